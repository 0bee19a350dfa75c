#!/usr/bin/env bash
# Device plugin benchmark: `gpuop device-plugin` on simulated fleets, measured from a C gRPC
# client on src/edge/grpc (bench/deviceplugin/dp-bench.c), one connection, calls back to back:
#  - Allocate latency (one device) p50/p99, target p99 < 200 us;
#  - GetPreferredAllocation latency p50/p99 (best-effort topology partition over all GPUs),
#    target < 1 ms for 8 GPUs;
#  - resident memory (VmRSS / VmHWM from /proc) after the load, target < 8 MiB.
# Fleets: DGX-1 V100 (8, hybrid cube-mesh), DGX H100 (8, NVSwitch), bench/deviceplugin/hgx-16.yaml
# (16, two NVLink domains). Prints a Markdown section for bench/RESULTS.md. BUILD=build default.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
ITER=${ITER:-5000}
gpuop=$BUILD/gpuop
lib=$BUILD/libnvidia-ml.so.1
for f in "$gpuop" "$lib" "$BUILD/src/edge/grpc/libgpuop-grpc.a"; do
    [ -e "$f" ] || { echo "missing $f (make build first)" >&2; exit 1; }
done
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT

cc -O2 -D_GNU_SOURCE -Isrc/edge/grpc -Isrc/base/util -I"$BUILD/src/edge/grpc/kubeletproto" \
    -o "$tmp/dp-bench" bench/deviceplugin/dp-bench.c \
    "$BUILD/src/edge/grpc/libgpuop-grpc.a" "$BUILD/src/edge/grpc/libkubeletproto.a" \
    "$BUILD/src/base/util/libgpuop-util.a" -lnghttp2 -lprotobuf-c -pthread

rows=
run_fleet() { # fleet label sizes...
    local fleet=$1 label=$2
    shift 2
    local dir=$tmp/$label
    mkdir -p "$dir/dp" "$dir/state"
    GPUOP_NVML_LIBRARY=$lib GPUOP_SIM_FLEET=$fleet GPUOP_SIM_STATE=$dir/state \
        "$gpuop" --log-level error device-plugin --kubelet-socket "$dir/dp/kubelet.sock" \
        2>"$dir/log" &
    pid=$!
    for _ in $(seq 1 100); do [ -S "$dir/dp/nvidia-gpu.sock" ] && break; sleep 0.05; done
    [ -S "$dir/dp/nvidia-gpu.sock" ] || { echo "plugin did not start: $(cat "$dir/log")" >&2; exit 1; }
    "$tmp/dp-bench" "$dir/dp/nvidia-gpu.sock" 500 2 >/dev/null # warm-up
    local first=1
    for size in "$@"; do
        local out alloc pref
        out=$("$tmp/dp-bench" "$dir/dp/nvidia-gpu.sock" "$ITER" "$size")
        alloc=$(echo "$out" | sed -n 's/^Allocate .*p50_us=\([0-9]*\) p99_us=\([0-9]*\).*/p50 \1 µs, p99 \2 µs/p')
        pref=$(echo "$out" | sed -n 's/^GetPreferredAllocation.*p50_us=\([0-9]*\) p99_us=\([0-9]*\).*/p50 \1 µs, p99 \2 µs/p')
        if [ $first = 1 ]; then
            rows+="| $label | Allocate (1 device, $ITER calls) | $alloc | p99 < 200 µs |"$'\n'
            first=0
        fi
        rows+="| $label | GetPreferredAllocation size $size of all ($ITER calls) | $pref | < 1 ms (8 GPUs) |"$'\n'
    done
    local rss hwm
    rss=$(awk '/^VmRSS/ {printf "%.1f", $2/1024}' /proc/$pid/status)
    hwm=$(awk '/^VmHWM/ {printf "%.1f", $2/1024}' /proc/$pid/status)
    local priv pss
    priv=$(awk '/^Private_(Clean|Dirty)/ {s+=$2} END {printf "%.1f", s/1024}' /proc/$pid/smaps_rollup)
    pss=$(awk '/^Pss:/ {printf "%.1f", $2/1024}' /proc/$pid/smaps_rollup)
    rows+="| $label | RSS after the load / peak | $rss MiB / $hwm MiB | < 8 MiB |"$'\n'
    rows+="| $label | of which private to the process / PSS | $priv MiB / $pss MiB | |"$'\n'
    kill $pid
    wait $pid 2>/dev/null || true
    pid=
}

run_fleet sim/fleets/dgx1-v100.yaml "DGX-1 V100 (8)" 2 3 4
run_fleet sim/fleets/dgx-h100.yaml "DGX H100 (8)" 2 3 4
ITER=${ITER16:-200} run_fleet bench/deviceplugin/hgx-16.yaml "HGX 16x H100 (16)" 2 3 4 5 8

cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1)
cat <<MD
## device plugin ($(date -u +%Y-%m-%d), $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -r))

\`bench/deviceplugin/run.sh\`: \`gpuop device-plugin\` on simulated fleets, called over its unix
socket by a C client on src/edge/grpc (one connection, calls back to back, as the kubelet does).
GetPreferredAllocation offers every GPU as available, so the best-effort policy enumerates
every partition of the node (its worst case for that size). RSS counts the pages of every shared
library the all-in-one \`gpuop\` binary maps, most of them shared with other processes; the
private row is what the plugin itself holds.

| fleet | measure | result | target |
|---|---|---|---|
$rows
MD
