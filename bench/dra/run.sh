#!/usr/bin/env bash
# DRA plugin benchmark: `gpuop dra-plugin` against kubesim (no kubelet: the claims are made and
# their allocation written through the API, then the plugin's DRA service is called as the
# kubelet calls it, from bench/dra/prepare.py), on FLEET=h100 (the simulated DGX H100, 8 GPUs,
# the default) or FLEET=a100-mig (8 A100 80GB, each with MIG on and 7 1g.10gb: 56 MIG devices):
#  - ResourceSlice publication latency p50/p99/max: from the plugin's start to its slices served
#    with every device, RUNS times (default 20; bench/dra/publish.py);
#  - NodePrepareResources latency p50/p99/max per claim, the first time (a plan from the watched
#    claim, the checkpoint written) and again (the checkpoint's answer); NodeUnprepareResources;
#    target: prepare p99 under 50 ms;
#  - the plugin's resident memory (VmRSS, VmHWM) after the load, target under 10 MiB.
# CLAIMS claims (default 200), each allocated a device of the node's in turn. Prints a Markdown
# section for bench/RESULTS.md. BUILD=build default. Needs python3-grpcio and grpc_tools.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
CLAIMS=${CLAIMS:-200}
RUNS=${RUNS:-20}
FLEET=${FLEET:-h100}
K=${KUBECTL:-/work/pinned-tools/bin/kubectl}
for f in "$BUILD/gpuop" "$BUILD/kubesim" "$BUILD/libnvidia-ml.so.1"; do
    [ -e "$f" ] || { echo "missing $f (make build first)" >&2; exit 1; }
done
tmp=$(mktemp -d)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait
    rm -rf "$tmp"
}
trap cleanup EXIT
"$BUILD/kubesim" --load sim/clusters/demo.yaml --kubeconfig-out "$tmp/kc" >"$tmp/kubesim.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -s "$tmp/kc" ] && break; sleep 0.1; done
export KUBECONFIG=$tmp/kc
node=dgx-h100-1 # the node the plugin runs as (the demo cluster's); its GPUs are the fleet's
case $FLEET in
h100) fleet=sim/fleets/dgx-h100.yaml devices=8 what="the simulated DGX H100 (8 GPUs)" ;;
a100-mig)
    fleet=$tmp/a100-mig.yaml devices=56 what="8 simulated A100 80GB, MIG on, 7 1g.10gb each (56 MIG devices)"
    python3 - "$fleet" <<'PY'
import sys, yaml
f = yaml.safe_load(open("sim/fleets/dgx-a100-80gb-mig.yaml"))
g = f["gpus"][1]  # the block of 7x 1g.10gb
assert g["mig"]["instances"] == ["1g.10gb"] * 7
g["count"] = 8
f["gpus"] = [g]
yaml.safe_dump(f, open(sys.argv[1], "w"))
PY
    ;;
*) echo "FLEET: h100 or a100-mig, not $FLEET" >&2; exit 2 ;;
esac
plugin_cmd=(env GPUOP_NVML_LIBRARY="$BUILD/libnvidia-ml.so.1" GPUOP_SIM_FLEET="$fleet"
    GPUOP_SIM_STATE="$tmp/state" "$BUILD/gpuop" dra-plugin --node-name $node --host-root "$tmp/root")
${PYTHON:-/usr/bin/python3} bench/dra/publish.py "$KUBECONFIG" $devices "$RUNS" -- "${plugin_cmd[@]}" \
    >"$tmp/publish.txt" 2>"$tmp/devices.txt"
mapfile -t devs <"$tmp/devices.txt"
[ ${#devs[@]} = $devices ] || { echo "published ${#devs[@]} devices, not $devices" >&2; exit 1; }
"${plugin_cmd[@]}" >"$tmp/plugin.log" 2>&1 &
plugin=$!
pids+=("$plugin")
sock=$tmp/root/var/lib/kubelet/plugins/gpu.nvidia.com/dra.sock
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { cat "$tmp/plugin.log" >&2; exit 1; }

{
    for i in $(seq 0 $((CLAIMS - 1))); do
        printf -- '---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c%d, namespace: default}\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {deviceClassName: gpu.nvidia.com}\n' "$i"
    done
} >"$tmp/claims.yaml"
printf 'apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.nvidia.com}\nspec:\n  selectors:\n  - cel: {expression: "device.driver == '"'"'gpu.nvidia.com'"'"'"}\n' |
    $K apply -f - >/dev/null
$K apply -f "$tmp/claims.yaml" >/dev/null
for i in $(seq 0 $((CLAIMS - 1))); do
    $K patch resourceclaim "c$i" --subresource=status --type=merge -p \
        "{\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"$node\",\"device\":\"${devs[i % devices]}\"}]}}}}" >/dev/null
done
$K get resourceclaims -o json | python3 -c '
import json, sys
print(json.dumps([{"uid": c["metadata"]["uid"], "namespace": "default", "name": c["metadata"]["name"]}
                  for c in json.load(sys.stdin)["items"]]))' >"$tmp/claims.json"
sleep 1 # the plugin's watch has every allocation
${PYTHON:-/usr/bin/python3} bench/dra/prepare.py "$sock" "$tmp/claims.json" >"$tmp/lat.txt"
rss=$(awk '/VmRSS/ {print $2}' "/proc/$plugin/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$plugin/status")

echo "## DRA plugin ($(date +%F), $(nproc) CPUs, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(uname -r))"
echo
echo "\`FLEET=$FLEET bench/dra/run.sh\`: \`gpuop dra-plugin\` on $what against kubesim;"
echo "$RUNS starts until the slices are served; $CLAIMS claims, one a call, called as the kubelet"
echo "calls them (python3-grpcio client)."
echo
echo "| call | p50 | p99 | max | target |"
echo "|---|---|---|---|---|"
read -r _ p50 p99 max _ <"$tmp/publish.txt"
echo "| ResourceSlices published (start to all $devices devices served) | $p50 ms | $p99 ms | $max ms | |"
while read -r phase p50 p99 max _; do
    case $phase in
    prepare) what="NodePrepareResources, first (plan + checkpoint write)"; tgt="p99 < 50 ms" ;;
    again) what="NodePrepareResources, again (checkpoint's answer)"; tgt="" ;;
    unprepare) what="NodeUnprepareResources (checkpoint write)"; tgt="" ;;
    esac
    echo "| $what | $p50 ms | $p99 ms | $max ms | $tgt |"
done <"$tmp/lat.txt"
echo
echo "Resident memory after the load: VmRSS $((rss / 1024)).$(((rss % 1024) * 10 / 1024)) MiB, VmHWM $((hwm / 1024)).$(((hwm % 1024) * 10 / 1024)) MiB (target < 10 MiB)."
