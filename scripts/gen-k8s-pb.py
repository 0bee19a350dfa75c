#!/usr/bin/python3
"""Writes sim/kubesim/pb-tables.c: kubesim's protobuf field tables, read from Kubernetes' own
generated.proto files (../shared/reference/upstream/k8s-proto-v0.32.9/).

Every message of the API groups kubesim serves becomes a table of its fields (number, JSON
name, scalar or message type, single, repeated or map) that sim/kubesim/pb.c walks to turn JSON
into protobuf and back. In Kubernetes' generated.proto a field's name is its JSON name; the
facts the .proto files do not carry are listed here: the fields Go embeds (`json:",inline"`),
the messages JSON writes another way (Time, Quantity, IntOrString, ...) and the scalar fields
whose zero value JSON omits (non-pointer `omitempty` fields).

Usage: scripts/gen-k8s-pb.py [--check] [SHARED_DIR]
  --check: exit 1 when the committed file differs from what would be written (the test).
"""
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
args = [a for a in sys.argv[1:] if a != "--check"]
check = "--check" in sys.argv[1:]
shared = args[0] if args else os.path.join(here, "..", "..", "shared")
root = os.path.join(shared, "reference", "upstream", "k8s-proto-v0.32.9")
dst = os.path.join(here, "..", "sim", "kubesim", "pb-tables.c")

# proto file -> the apiVersion its kinds are served under ("" for packages with no kinds)
FILES = [
    ("k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto", "meta.k8s.io/v1"),
    ("k8s.io/apimachinery/pkg/runtime/generated.proto", ""),
    ("k8s.io/apimachinery/pkg/runtime/schema/generated.proto", ""),
    ("k8s.io/apimachinery/pkg/api/resource/generated.proto", ""),
    ("k8s.io/apimachinery/pkg/util/intstr/generated.proto", ""),
    ("k8s.io/api/core/v1/generated.proto", "v1"),
    ("k8s.io/api/apps/v1/generated.proto", "apps/v1"),
    ("k8s.io/api/batch/v1/generated.proto", "batch/v1"),
    ("k8s.io/api/rbac/v1/generated.proto", "rbac.authorization.k8s.io/v1"),
    ("k8s.io/api/policy/v1/generated.proto", "policy/v1"),
    ("k8s.io/api/coordination/v1/generated.proto", "coordination.k8s.io/v1"),
    ("k8s.io/api/events/v1/generated.proto", "events.k8s.io/v1"),
    ("k8s.io/api/node/v1/generated.proto", "node.k8s.io/v1"),
    ("k8s.io/api/storage/v1/generated.proto", "storage.k8s.io/v1"),
    ("k8s.io/api/discovery/v1/generated.proto", "discovery.k8s.io/v1"),
    ("k8s.io/api/networking/v1/generated.proto", "networking.k8s.io/v1"),
    ("k8s.io/api/scheduling/v1/generated.proto", "scheduling.k8s.io/v1"),
    ("k8s.io/api/authentication/v1/generated.proto", "authentication.k8s.io/v1"),
    ("k8s.io/api/authorization/v1/generated.proto", "authorization.k8s.io/v1"),
]

META = "k8s.io.apimachinery.pkg.apis.meta.v1."
# Messages JSON writes as something other than an object.
SPECIAL = {
    META + "Time": "KS_PBS_TIME",
    META + "MicroTime": "KS_PBS_MICROTIME",
    META + "Duration": "KS_PBS_DURATION",
    META + "FieldsV1": "KS_PBS_RAWJSON",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "KS_PBS_QUANTITY",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "KS_PBS_INTORSTRING",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "KS_PBS_RAWEXT",
}

# Fields Go embeds in their parent's JSON (`json:",inline"`): Message.field.
INLINE = {
    "k8s.io.api.core.v1." + f for f in [
        "ConfigMapEnvSource.localObjectReference", "ConfigMapKeySelector.localObjectReference",
        "ConfigMapProjection.localObjectReference", "ConfigMapVolumeSource.localObjectReference",
        "SecretEnvSource.localObjectReference", "SecretKeySelector.localObjectReference",
        "SecretProjection.localObjectReference", "Volume.volumeSource", "Probe.handler",
        "PersistentVolumeSpec.persistentVolumeSource", "EphemeralContainer.ephemeralContainerCommon",
    ]
} | {"k8s.io.api.networking.v1.IngressRule.ingressRuleValue"}

# Non-pointer `omitempty` scalars (numbers, booleans) whose zero JSON leaves out: whole messages,
# then single fields. Elsewhere a zero number or false is kept, since a pointer field's zero
# (replicas: 0, automountServiceAccountToken: false) means something. Empty optional strings are
# always left out.
OMIT_ZERO_MSGS = {
    META + "ObjectMeta", META + "ListMeta", META + "OwnerReference",
    "k8s.io.api.apps.v1.DeploymentStatus", "k8s.io.api.apps.v1.ReplicaSetStatus",
    "k8s.io.api.apps.v1.DaemonSetStatus", "k8s.io.api.core.v1.ContainerPort",
}
OMIT_ZERO_FIELDS = {
    "k8s.io.api.core.v1.Container.stdin", "k8s.io.api.core.v1.Container.stdinOnce",
    "k8s.io.api.core.v1.Container.tty", "k8s.io.api.core.v1.PodSpec.hostNetwork",
    "k8s.io.api.core.v1.PodSpec.hostPID", "k8s.io.api.core.v1.PodSpec.hostIPC",
    "k8s.io.api.core.v1.ServicePort.nodePort", "k8s.io.api.core.v1.ServiceSpec.healthCheckNodePort",
    "k8s.io.api.core.v1.ServiceSpec.publishNotReadyAddresses",
    "k8s.io.api.core.v1.VolumeMount.readOnly", "k8s.io.api.core.v1.Probe.initialDelaySeconds",
    "k8s.io.api.core.v1.Probe.timeoutSeconds", "k8s.io.api.core.v1.Probe.periodSeconds",
    "k8s.io.api.core.v1.Probe.successThreshold", "k8s.io.api.core.v1.Probe.failureThreshold", "k8s.io.api.apps.v1.DeploymentSpec.minReadySeconds",
    "k8s.io.api.apps.v1.DeploymentSpec.paused", "k8s.io.api.apps.v1.DaemonSetSpec.minReadySeconds",
    "k8s.io.api.apps.v1.ReplicaSetSpec.minReadySeconds", "k8s.io.api.batch.v1.JobStatus.active",
    "k8s.io.api.batch.v1.JobStatus.succeeded", "k8s.io.api.batch.v1.JobStatus.failed",
    "k8s.io.api.core.v1.NodeSpec.unschedulable", "k8s.io.api.core.v1.Event.count",
    "k8s.io.api.events.v1.EventSeries.count",
}

SCALARS = {"string": "KS_PBT_STRING", "bool": "KS_PBT_BOOL", "int32": "KS_PBT_INT32",
           "int64": "KS_PBT_INT64", "bytes": "KS_PBT_BYTES"}

FIELD = re.compile(r"^\s*(optional|repeated)\s+(\S+)\s+(\w+)\s*=\s*(\d+)\s*;")
MAPF = re.compile(r"^\s*map<\s*(\w+)\s*,\s*(\S+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")


def parse(path):
    pkg = None
    msgs = []
    cur = None
    comments = []
    with open(path) as f:
        for line in f:
            s = line.strip()
            if s.startswith("//"):
                comments.append(s)
                continue
            m = re.match(r"^package\s+([\w.]+);", s)
            if m:
                pkg = m.group(1)
            m = re.match(r"^message\s+(\w+)\s*{", s)
            if m:
                cur = {"name": pkg + "." + m.group(1), "fields": [],
                       "nullable": any("+protobuf.nullable=true" in c for c in comments)}
                msgs.append(cur)
                comments = []
                continue
            m = FIELD.match(line)
            mm = MAPF.match(line)
            if cur is not None and (m or mm):
                if m:
                    card, typ, name, no = m.groups()
                    card = "KS_PBC_REPEATED" if card == "repeated" else "KS_PBC_ONE"
                else:
                    key, typ, name, no = mm.groups()
                    assert key == "string", line
                    card = "KS_PBC_MAP"
                optional = any(c == "// +optional" for c in comments)
                cur["fields"].append({"card": card, "type": typ, "name": name, "no": int(no),
                                      "optional": optional, "pkg": pkg})
                comments = []
                continue
            if s == "}":
                cur = None
            if not s:
                comments = []
    return pkg, msgs


def main():
    packages = []
    msgs = []
    for rel, gv in FILES:
        pkg, ms = parse(os.path.join(root, rel))
        packages.append((gv, pkg))
        msgs.extend(ms)
    msgs.sort(key=lambda m: m["name"])
    index = {m["name"]: i for i, m in enumerate(msgs)}

    out = []
    w = out.append
    w("/* SPDX-License-Identifier: Apache-2.0 */")
    w("/* Generated by scripts/gen-k8s-pb.py from Kubernetes' generated.proto files (v0.32.9); do")
    w(" * not edit. Each message's fields in number order; see ks-pb-tables.h. */")
    w('#include "ks-pb-tables.h"')
    w("")
    for i, m in enumerate(msgs):
        if not m["fields"]:
            continue
        w(f"static const struct ks_pb_field f{i}[] = {{")
        for fl in sorted(m["fields"], key=lambda x: x["no"]):
            typ = fl["type"]
            if typ in SCALARS:
                t, sub = SCALARS[typ], 0
            else:
                full = typ[1:] if typ.startswith(".") else fl["pkg"] + "." + typ
                if full not in index:
                    raise SystemExit(f"{m['name']}.{fl['name']}: unknown type {typ}")
                t, sub = "KS_PBT_MSG", index[full]
            flags = []
            path = m["name"] + "." + fl["name"]
            if path in INLINE:
                flags.append("KS_PBF_INLINE")
            if fl["optional"] and fl["card"] == "KS_PBC_ONE":
                if typ in ("string", "bytes"):
                    flags.append("KS_PBF_OMITZERO")
                elif typ in SCALARS and (m["name"] in OMIT_ZERO_MSGS or path in OMIT_ZERO_FIELDS):
                    flags.append("KS_PBF_OMITZERO")
            w(f'    {{{fl["no"]}, "{fl["name"]}", {t}, {fl["card"]}, '
              f'{"|".join(flags) or "0"}, {sub}}},')
        w("};")
    w("")
    w("const struct ks_pb_msg ks_pb_msgs[] = {")
    for i, m in enumerate(msgs):
        special = SPECIAL.get(m["name"], "KS_PBS_STRLIST" if m["nullable"] else "KS_PBS_NONE")
        fields = f"f{i}" if m["fields"] else "NULL"
        w(f'    {{"{m["name"]}", {special}, {len(m["fields"])}, {fields}}},')
    w("};")
    w("const size_t ks_pb_n_msgs = sizeof(ks_pb_msgs) / sizeof(ks_pb_msgs[0]);")
    w("")
    w("const struct ks_pb_package ks_pb_packages[] = {")
    for gv, pkg in packages:
        if gv:
            w(f'    {{"{gv}", "{pkg}"}},')
    w("};")
    w("const size_t ks_pb_n_packages = sizeof(ks_pb_packages) / sizeof(ks_pb_packages[0]);")
    text = "\n".join(out) + "\n"

    if check:
        with open(dst) as f:
            if f.read() != text:
                print(f"{dst} is not what scripts/gen-k8s-pb.py writes: rerun it", file=sys.stderr)
                return 1
        return 0
    with open(dst + ".tmp", "w") as f:
        f.write(text)
    os.replace(dst + ".tmp", dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
