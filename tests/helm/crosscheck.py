#!/usr/bin/python3
"""crosscheck.py CASE NVIDIA_RENDERED GPUOP_RENDERED: the ClusterPolicy specs of both charts (or
their GPUCluster specs, where the values deploy one instead), compared field by field
(tests/helm/test-helm-crosscheck.sh)."""
import sys

import yaml

# Field paths (dotted, from spec) where the charts may differ, and why.
ALLOWED = {
    "daemonsets.labels.helm.sh/chart":
        "NVIDIA's chart labels every operand with its chart; gpuop's operator labels its operands itself",
    "daemonsets.labels.app.kubernetes.io/managed-by":
        "the same: NVIDIA's chart's operand labels",
    "validator.version":
        "NVIDIA's validator runs NVIDIA's operator image at the chart's version; gpuop's runs the gpuop image",
    "nodeStatusExporter.version":
        "the same: NVIDIA's node status exporter is its validator image",
    "devicePlugin.mps.root":
        "gpuop's chart writes the CRD's default (/run/nvidia/mps); NVIDIA's leaves it to the default",
}
EMPTY = (None, False, "", [], {})


def flat(x, prefix=""):
    if isinstance(x, dict) and x:
        out = {}
        for k, v in x.items():
            out.update(flat(v, f"{prefix}.{k}" if prefix else k))
        return out
    return {prefix: x}


def spec(path):
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    for kind in ("ClusterPolicy", "GPUCluster"):
        for d in docs:
            if d.get("kind") == kind:
                return d["spec"]
    raise SystemExit(f"{path}: no ClusterPolicy and no GPUCluster")


case, nv_path, ours_path = sys.argv[1:4]
nv, ours = flat(spec(nv_path)), flat(spec(ours_path))
bad = allowed = same = 0
for k in sorted(set(nv) | set(ours)):
    a, b = nv.get(k), ours.get(k)
    if a == b or (a in EMPTY and b in EMPTY):
        same += 1
    elif k in ALLOWED:
        allowed += 1
    else:
        print(f"FAIL {case}: spec.{k}: NVIDIA's chart {a!r}, gpuop's {b!r}")
        bad += 1
print(f"{case}: {same} fields equal, {allowed} allowed differences, {bad} other")
sys.exit(1 if bad else 0)
