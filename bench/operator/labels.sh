#!/usr/bin/env bash
# The node informer's compact label sets alone (bench/operator/labels-mem.c): heap held per node
# and CPU per set made, for NODES nodes (default 10000) of one pool, labelled as the operator
# benchmark's nodes are (node-template.yaml's labels, a hostname, the operator's deploy and
# upgrade labels). REV=<commit> also measures that commit's src/base/kobj/klabels.c against the
# working tree's (the same kobj.h). BUILD=build default.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
N=${NODES:-10000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp/labels.json" <<'PY'
import json, sys, yaml
labels = yaml.safe_load(open("bench/operator/node-template.yaml"))["metadata"]["labels"]
for c in ["driver", "gpu-feature-discovery", "container-toolkit", "device-plugin", "dcgm",
          "dcgm-exporter", "node-status-exporter", "operator-validator", "mig-manager",
          "sandbox-device-plugin", "sandbox-validator", "vfio-manager", "vgpu-device-manager",
          "vgpu-manager", "kata-manager", "cc-manager"]:
    labels["nvidia.com/gpu.deploy." + c] = "true"
labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8",
               "nvidia.com/gpu.memory": "81559", "nvidia.com/cuda.driver.major": "550",
               "nvidia.com/cuda.driver.minor": "127", "nvidia.com/gpu.family": "hopper",
               "nvidia.com/gpu.workload.config": "container", "nvidia.com/mig.config": "all-disabled"})
json.dump(labels, open(sys.argv[1], "w"))
PY
build_one() { # klabels.c output
    cc -O2 -D_GNU_SOURCE -Isrc/base/kobj -Isrc/base/util -o "$2" bench/operator/labels-mem.c "$1" \
        "$BUILD/src/base/kobj/libgpuop-kobj.a" "$BUILD/src/base/util/libgpuop-util.a" \
        -ljansson -lm -pthread
}
build_one src/base/kobj/klabels.c "$tmp/now"
echo "working tree: $("$tmp/now" "$tmp/labels.json" "$N")"
if [ -n "${REV:-}" ]; then
    git show "$REV:src/base/kobj/klabels.c" >"$tmp/klabels-rev.c"
    build_one "$tmp/klabels-rev.c" "$tmp/rev"
    echo "$REV: $("$tmp/rev" "$tmp/labels.json" "$N")"
fi
