#!/usr/bin/env bash
# Device plugin benchmark: `gpuop device-plugin` on simulated fleets, measured from a C gRPC
# client on src/edge/grpc (bench/deviceplugin/dp-bench.c), one connection, calls back to back:
#  - Allocate latency (one device) p50/p99, target p99 < 200 us;
#  - GetPreferredAllocation latency p50/p99 (best-effort topology partition over all GPUs, and
#    on 16 GPUs over rotating subsets with must-include GPUs), target p99 < 1 ms;
#  - resident memory (VmRSS / VmHWM from /proc) after the load, target < 8 MiB.
# Fleets: DGX-1 V100 (8, hybrid cube-mesh), DGX H100 (8, NVSwitch), bench/deviceplugin/hgx-16.yaml
# (16, two NVLink domains). Each measure is taken RUNS times (default 5; a shared machine is
# noisy): the rows give the medians of the runs' p50 and p99 and the range of their p99.
# Then the best-effort search alone, in-process (bench/deviceplugin/be-bench.c), per size on
# 16 GPUs. Prints a Markdown section for bench/RESULTS.md. BUILD=build default.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
ITER=${ITER:-5000}
RUNS=${RUNS:-5}
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
cc -O2 -D_GNU_SOURCE -Isrc/components/device-plugin -Isrc/lib/dpconfig -Isrc/lib/svc \
    -Isrc/edge/nvml -Isrc/lib/gpuhealth -Isrc/base/util -Isrc/base/yamlcfg -o "$tmp/be-bench" \
    bench/deviceplugin/be-bench.c "$BUILD/src/components/device-plugin/libgpuop-deviceplugin-core.a" \
    "$BUILD/src/base/util/libgpuop-util.a" -pthread

# median, min and max of the numbers on stdin
stats() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)], a[1], a[NR]}'; }
# "p50 M µs, p99 M µs (RUNS runs; p99 MIN-MAX µs)" from lines "p50 p99"
summary() {
    local lines p50 p99 lo hi
    lines=$(cat)
    read -r p50 _ _ <<<"$(cut -d' ' -f1 <<<"$lines" | stats)"
    read -r p99 lo hi <<<"$(cut -d' ' -f2 <<<"$lines" | stats)"
    echo "p50 $p50 µs, p99 $p99 µs ($RUNS runs; p99 $lo-$hi µs)"
}

rows=
# run_fleet FLEET LABEL SPEC...: SPEC is SIZE (all devices available) or SIZE:MUST:AVAILABLE
run_fleet() {
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
    for spec in "$@"; do
        local out alloc='' pref='' size must avail what args
        IFS=: read -r size must avail <<<"$spec"
        args=("$ITER" "$size")
        what="size $size of all"
        if [ -n "$must" ]; then
            args+=("$must" "$avail")
            what="size $size of $avail (rotating), $must must-include"
        fi
        for _ in $(seq 1 "$RUNS"); do
            out=$("$tmp/dp-bench" "$dir/dp/nvidia-gpu.sock" "${args[@]}")
            alloc+=$(echo "$out" | sed -n 's/^Allocate .*p50_us=\([0-9]*\) p99_us=\([0-9]*\).*/\1 \2/p')$'\n'
            pref+=$(echo "$out" | sed -n 's/^GetPreferredAllocation.*p50_us=\([0-9]*\) p99_us=\([0-9]*\).*/\1 \2/p')$'\n'
        done
        if [ $first = 1 ]; then
            rows+="| $label | Allocate (1 device, $ITER calls) | $(grep . <<<"$alloc" | summary) | p99 < 200 µs |"$'\n'
            first=0
        fi
        rows+="| $label | GetPreferredAllocation $what ($ITER calls) | $(grep . <<<"$pref" | summary) | p99 < 1 ms |"$'\n'
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

run_fleet sim/fleets/dgx1-v100.yaml "DGX-1 V100 (8)" $(seq 1 8)
run_fleet sim/fleets/dgx-h100.yaml "DGX H100 (8)" $(seq 1 8)
run_fleet bench/deviceplugin/hgx-16.yaml "HGX 16x H100 (16)" $(seq 1 16) 3:1:12 5:1:12 5:2:16 \
    8:1:14

search=$("$tmp/be-bench" 2000 | awk '{
    split($2, s, "="); split($4, a, "="); split($5, b, "="); split($6, w, "=")
    printf "| %s | %s | %s µs | %s µs | %s |\n", $1, s[2], a[2], b[2], w[2]
}')

cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1)
cat <<MD
## device plugin ($(date -u +%Y-%m-%d), $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -r))

\`bench/deviceplugin/run.sh\`: \`gpuop device-plugin\` on simulated fleets, called over its unix
socket by a C client on src/edge/grpc (one connection, calls back to back, as the kubelet does).
GetPreferredAllocation offers every GPU as available (on 16 GPUs also rotating subsets, in
rotating order, with must-include GPUs); the best-effort policy finds the best split of all of
them into sets of that size (dp-besteffort.c). RSS counts the pages of every shared
library the all-in-one \`gpuop\` binary maps, most of them shared with other processes; the
private row is what the plugin itself holds.

| fleet | measure | result | target |
|---|---|---|---|
$rows
The search alone, in-process (\`bench/deviceplugin/be-bench.c\`: \`dp_besteffort\` choosing from 16
GPUs, 2000 calls per size on hgx-16, 20 on the synthetic topology where no two GPUs are alike,
its worst case; work in units of the request's budget of $(sed -n 's/^#define DP_BE_BUDGET *\([0-9]*\).*/\1/p' src/components/device-plugin/device-plugin.h)):

| topology | size | p50 | p99 | work |
|---|---|---|---|---|
$search
MD
