#!/usr/bin/env bash
# DRA plugin benchmark: `gpuop dra-plugin` on the simulated DGX H100 against kubesim (no
# kubelet: the claims are made and their allocation written through the API, then the plugin's
# DRA service is called as the kubelet calls it, from bench/dra/prepare.py):
#  - NodePrepareResources latency p50/p99/max per claim, the first time (a plan from the watched
#    claim, the checkpoint written) and again (the checkpoint's answer); NodeUnprepareResources;
#    target: prepare p99 under 50 ms;
#  - the plugin's resident memory (VmRSS, VmHWM) after the load, target under 10 MiB.
# CLAIMS claims (default 200), each allocated a GPU of the eight in turn. Prints a Markdown
# section for bench/RESULTS.md. BUILD=build default. Needs python3-grpcio and grpc_tools.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
CLAIMS=${CLAIMS:-200}
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
node=dgx-h100-1
GPUOP_NVML_LIBRARY=$BUILD/libnvidia-ml.so.1 GPUOP_SIM_FLEET=sim/fleets/dgx-h100.yaml \
    GPUOP_SIM_STATE=$tmp/state "$BUILD/gpuop" dra-plugin --node-name $node --host-root "$tmp/root" \
    >"$tmp/plugin.log" 2>&1 &
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
        "{\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"$node\",\"device\":\"gpu-$((i % 8))\"}]}}}}" >/dev/null
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
echo "\`bench/dra/run.sh\`: \`gpuop dra-plugin\` on the simulated DGX H100 (8 GPUs) against kubesim,"
echo "$CLAIMS claims, one a call, called as the kubelet calls them (python3-grpcio client)."
echo
echo "| call | p50 | p99 | max | target |"
echo "|---|---|---|---|---|"
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
