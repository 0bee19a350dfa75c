#!/usr/bin/env bash
# The exporter's cost with the profiling fields (GPU Performance Monitoring) on: every field
# gpuop serves (bench/exporter/all-fields.csv), and dcgm-exporter's default counters with every
# profiling field (bench/exporter/default-and-prof.csv), on three simulated nodes:
#  - the DGX H100 (8 GPUs, GPM on each: sim/fleets/dgx-h100.yaml);
#  - the same with seven 1g.10gb MIG instances on each GPU (56 MIG devices, GPM on each GPU
#    and each GPU instance: bench/exporter/dgx-h100-56mig.yaml);
#  - a DGX A100 with 56 MIG instances (no GPM: Ampere; bench/exporter/dgx-a100-56mig.yaml).
# For each: the collector thread's CPU time per collection (its utime + stime, read from
# /proc/PID/task/TID where the thread is named exp-collector, over COLLECTIONS collections at
# INTERVAL), the exporter's own wall time per collection (gpuop_exporter_collection_duration_
# seconds), resident memory after the run, and the scrape latency over one keep-alive connection
# (bench/exporter/scrape-latency.c). Targets: RSS under 8 MiB, a collection of all fields on 8
# GPUs under 5 ms of CPU.
# Prints a Markdown section for bench/RESULTS.md.  BUILD=build by default.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
INTERVAL=${INTERVAL:-200}
COLLECTIONS=${COLLECTIONS:-100}
gpuop=$BUILD/gpuop
lib=$BUILD/libnvidia-ml.so.1
for f in "$gpuop" "$lib"; do [ -e "$f" ] || { echo "missing $f (make build first)" >&2; exit 1; }; done
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/scrape-latency" bench/exporter/scrape-latency.c
export GPUOP_NVML_LIBRARY=$lib NODE_NAME=bench-node
tck=$(getconf CLK_TCK)

# collector_ticks: utime + stime of the exporter's collector thread, in clock ticks
collector_ticks() {
    local t
    for t in /proc/$pid/task/*; do
        [ "$(cat "$t/comm" 2>/dev/null)" = exp-collector ] || continue
        # fields 14 and 15 of stat, after the command name in parentheses
        sed 's/^.*) //' "$t/stat" | awk '{print $12 + $13}'
        return 0
    done
    echo "no exp-collector thread in $pid" >&2
    return 1
}
metric() { curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

rows=()
run() { # NAME FLEET COUNTERS
    local name=$1 fleet=$2 counters=$3
    GPUOP_SIM_FLEET=$fleet "$gpuop" exporter -a 127.0.0.1:0 -c "${INTERVAL}ms" \
        -f "$counters" 2>"$tmp/log" &
    pid=$!
    port=
    for _ in $(seq 1 100); do
        port=$(sed -n 's/.* serving .*port=\([0-9]*\).*/\1/p' "$tmp/log" | head -1)
        [ -n "$port" ] && break
        sleep 0.05
    done
    [ -n "$port" ] || { echo "exporter did not start: $(cat "$tmp/log")" >&2; exit 1; }
    sleep 2 # warm-up: the samplers made, a few collections
    local c0 t0 c1 t1 dur=0 n=0 d
    c0=$(metric gpuop_exporter_collections_total)
    t0=$(collector_ticks)
    # the exporter's own wall time per collection, sampled once a second meanwhile
    local end=$((SECONDS + COLLECTIONS * INTERVAL / 1000))
    while [ $SECONDS -lt $end ]; do
        d=$(metric gpuop_exporter_collection_duration_seconds)
        dur=$(awk -v a="$dur" -v b="$d" 'BEGIN {print a + b}')
        n=$((n + 1))
        sleep 1
    done
    c1=$(metric gpuop_exporter_collections_total)
    t1=$(collector_ticks)
    local cpu_ms wall_ms rss anon series lat body
    cpu_ms=$(awk -v a="$t0" -v b="$t1" -v c0="$c0" -v c1="$c1" -v h="$tck" \
        'BEGIN {printf "%.2f", (b - a) * 1000 / h / (c1 - c0)}')
    wall_ms=$(awk -v s="$dur" -v n="$n" 'BEGIN {printf "%.2f", s * 1000 / n}')
    "$tmp/scrape-latency" "$port" 500 >/dev/null
    lat=$("$tmp/scrape-latency" "$port" 5000)
    rss=$(awk '/^VmRSS/ {printf "%.1f", $2/1024}' /proc/$pid/status)
    anon=$(awk '/^RssAnon/ {printf "%.1f", $2/1024}' /proc/$pid/status)
    curl -s "http://127.0.0.1:$port/metrics" >"$tmp/page"
    series=$(grep -vc '^#' "$tmp/page")
    local prof
    prof=$(grep -c '^DCGM_FI_PROF_' "$tmp/page" || true)
    body=$(echo "$lat" | sed 's/.*bytes=\([0-9]*\).*/\1/')
    lat=$(echo "$lat" | sed 's/.*p50_us=\([0-9.]*\).*p99_us=\([0-9.]*\).*/\1 \/ \2 µs/')
    rows+=("| $name | $((c1 - c0)) | $cpu_ms ms | $wall_ms ms | $rss MiB ($anon MiB) | $series ($prof profiling), $body bytes | $lat |")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
}
all=bench/exporter/all-fields.csv dp=bench/exporter/default-and-prof.csv
run "DGX H100, 8 GPUs; every field" sim/fleets/dgx-h100.yaml $all
run "DGX H100, 8 GPUs; default + profiling" sim/fleets/dgx-h100.yaml $dp
run "DGX H100, 56 MIG instances; every field" bench/exporter/dgx-h100-56mig.yaml $all
run "DGX H100, 56 MIG instances; default + profiling" bench/exporter/dgx-h100-56mig.yaml $dp
run "DGX A100, 56 MIG instances (no GPM); every field" bench/exporter/dgx-a100-56mig.yaml $all
run "DGX A100, 56 MIG instances (no GPM); default + profiling" bench/exporter/dgx-a100-56mig.yaml $dp

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
load=$(cut -d' ' -f1-3 /proc/loadavg)
cat <<MD
## exporter: every field, profiling fields included ($(date -u +%Y-%m-%d), $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -r))

\`bench/exporter/gpm.sh\`: \`gpuop exporter -c ${INTERVAL}ms\` on the simulated NVML with every field gpuop
serves (\`bench/exporter/all-fields.csv\`: 57 fields, the 12 \`DCGM_FI_PROF_*\` ones and two label
fields included) or dcgm-exporter's default counters and every profiling field
(\`bench/exporter/default-and-prof.csv\`); no \`--kubernetes\`. CPU per collection: the collector thread's user + system time over the
collections counted, clock ticks of $((1000 / tck)) ms; it includes the simulated NVML library's own
work (reading its state, computing GPM metrics) and the rendering of both pages. Wall: the
exporter's \`gpuop_exporter_collection_duration_seconds\` (the NVML reads and the pod map, not the
rendering after them), the mean of one reading a second. Scrape latency:
5000 scrapes over one keep-alive connection (p50 / p99). Load average at the end: $load.

| node | collections | CPU per collection | wall per collection | RSS (private anon) | series per scrape, body | scrape latency p50 / p99 |
|---|---|---|---|---|---|---|
$(printf '%s\n' "${rows[@]}")

Targets: RSS under 8 MiB; a collection of all fields on 8 GPUs under 5 ms of CPU.
MD
