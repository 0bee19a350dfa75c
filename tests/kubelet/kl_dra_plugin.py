#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A DRA kubelet plugin for kubelet-sim's tests, over real gRPC (grpcio).

  kl_dra_plugin.py ROOT DRIVER KUBECTL KUBECONFIG LOG [--fail-claim PREFIX] [--versions V,...]

Serves pluginregistration.Registration on ROOT/var/lib/kubelet/plugins_registry/DRIVER-reg.sock
(GetInfo: type DRAPlugin, name DRIVER, endpoint /var/lib/kubelet/plugins/DRIVER/dra.sock, the
versions) and the kubelet's DRA service v1 on that endpoint under ROOT. NodePrepareResources
reads each claim's allocation with kubectl and writes one CDI spec per claim in ROOT/var/run/cdi
(kind k8s.DRIVER/claim, a device per allocated device of this driver, whose edit sets
DRA_<DEVICE>=<request>), answering with those CDI names; claims whose name starts with PREFIX
fail. NodeUnprepareResources removes the spec. Every call is logged to LOG, one line each.
SIGTERM removes the sockets and exits 0; exit 77 without grpcio / grpc_tools.
"""
import json
import os
import signal
import subprocess
import sys
import threading
from concurrent import futures

sys.path.insert(0, os.path.join(os.environ.get("GPUOP_SOURCE_ROOT") or
                                os.path.join(os.path.dirname(__file__), "..", ".."), "tests", "lib"))
import kubelet_grpc as kg  # noqa: E402  (exits 77 when grpcio is not installed)
from kubelet_grpc import grpc  # noqa: E402


def main():
    args = sys.argv[1:]
    fail_prefix, versions = None, ["v1.DRAPlugin"]
    if "--fail-claim" in args:
        i = args.index("--fail-claim")
        fail_prefix = args[i + 1]
        del args[i:i + 2]
    if "--versions" in args:
        i = args.index("--versions")
        versions = args[i + 1].split(",")
        del args[i:i + 2]
    root, driver, kubectl, kubeconfig, logpath = args
    (dra_pb2, dra_grpc), (reg_pb2, reg_grpc) = kg.stubs("dra/v1/api.proto",
                                                        "pluginregistration/v1/api.proto")
    lock = threading.Lock()
    logf = open(logpath, "a", buffering=1)

    def log(line):
        with lock:
            logf.write(line + "\n")

    endpoint = f"/var/lib/kubelet/plugins/{driver}/dra.sock"
    dra_sock = root + endpoint
    reg_sock = f"{root}/var/lib/kubelet/plugins_registry/{driver}-reg.sock"
    cdi_dir = f"{root}/var/run/cdi"
    os.makedirs(os.path.dirname(dra_sock), exist_ok=True)
    os.makedirs(os.path.dirname(reg_sock), exist_ok=True)
    os.makedirs(cdi_dir, exist_ok=True)

    class Registration(reg_grpc.RegistrationServicer):
        def GetInfo(self, request, context):
            log("getinfo")
            return reg_pb2.PluginInfo(type="DRAPlugin", name=driver, endpoint=endpoint,
                                      supported_versions=versions)

        def NotifyRegistrationStatus(self, request, context):
            log(f"registered={request.plugin_registered} error={request.error}")
            return reg_pb2.RegistrationStatusResponse()

    def spec_path(uid):
        return f"{cdi_dir}/{driver}-{uid}.json"

    class Plugin(dra_grpc.DRAPluginServicer):
        def NodePrepareResources(self, request, context):
            resp = dra_pb2.NodePrepareResourcesResponse()
            for c in request.claims:
                log(f"prepare {c.namespace}/{c.name} {c.uid}")
                one = resp.claims[c.uid]
                if fail_prefix and c.name.startswith(fail_prefix):
                    one.error = f"simulated failure of {c.name}"
                    continue
                out = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "get",
                                      "resourceclaim", "-n", c.namespace, c.name, "-o", "json"],
                                     capture_output=True, text=True)
                if out.returncode != 0:
                    one.error = f"get claim: {out.stderr.strip()}"
                    continue
                claim = json.loads(out.stdout)
                if claim["metadata"]["uid"] != c.uid:
                    one.error = "claim UID changed"
                    continue
                results = [r for r in claim.get("status", {}).get("allocation", {})
                           .get("devices", {}).get("results", []) if r["driver"] == driver]
                devices = []
                for r in results:
                    var = "DRA_" + r["device"].upper().replace("-", "_")
                    devices.append({"name": f"{c.uid}-{r['device']}",
                                    "containerEdits": {"env": [f"{var}={r['request']}"]}})
                    d = one.devices.add()
                    d.request_names.append(r["request"])
                    d.pool_name = r["pool"]
                    d.device_name = r["device"]
                    d.cdi_device_ids.append(f"k8s.{driver}/claim={c.uid}-{r['device']}")
                spec = {"cdiVersion": "0.5.0", "kind": f"k8s.{driver}/claim", "devices": devices}
                with open(spec_path(c.uid) + ".tmp", "w") as f:
                    json.dump(spec, f)
                os.rename(spec_path(c.uid) + ".tmp", spec_path(c.uid))
            return resp

        def NodeUnprepareResources(self, request, context):
            resp = dra_pb2.NodeUnprepareResourcesResponse()
            for c in request.claims:
                log(f"unprepare {c.namespace}/{c.name} {c.uid}")
                try:
                    os.unlink(spec_path(c.uid))
                except FileNotFoundError:
                    pass
                resp.claims[c.uid].error = ""
            return resp

    servers = []
    for sock, add in ((dra_sock, lambda s: dra_grpc.add_DRAPluginServicer_to_server(Plugin(), s)),
                      (reg_sock, lambda s: reg_grpc.add_RegistrationServicer_to_server(
                          Registration(), s))):
        if os.path.exists(sock):
            os.unlink(sock)
        s = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        add(s)
        s.add_insecure_port(f"unix://{sock}")
        servers.append(s)
    for s in servers[:1]:
        s.start()
    servers[1].start()  # registration last: the kubelet may dial the endpoint at once
    log("serving")
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    signal.signal(signal.SIGINT, lambda *a: done.set())
    done.wait()
    for s in servers:
        s.stop(0)
    for sock in (reg_sock, dra_sock):
        try:
            os.unlink(sock)
        except FileNotFoundError:
            pass
    log("stopped")


if __name__ == "__main__":
    main()
