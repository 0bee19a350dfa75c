#!/usr/bin/env bash
# Exporter benchmark on the simulated DGX H100 (8 GPUs), warm snapshot:
#  - scrape latency p50/p99 over one keep-alive connection and with a new connection each time
#    (bench/exporter/scrape-latency.c), target p99 < 1 ms;
#  - throughput under concurrent scrapers (wrk);
#  - resident memory after warm-up and after the load, target < 10 MiB for 8 GPUs.
# Prints a Markdown section for bench/RESULTS.md.  BUILD=build by default.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
gpuop=$BUILD/gpuop
lib=$BUILD/libnvidia-ml.so.1
fleet=sim/fleets/dgx-h100.yaml
for f in "$gpuop" "$lib" "$fleet"; do [ -e "$f" ] || { echo "missing $f (make build first)" >&2; exit 1; }; done
command -v wrk >/dev/null || { echo "wrk missing (Debian package wrk)" >&2; exit 1; }
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT

cc -O2 -o "$tmp/scrape-latency" bench/exporter/scrape-latency.c
export GPUOP_NVML_LIBRARY=$lib GPUOP_SIM_FLEET=$fleet NODE_NAME=bench-node
"$gpuop" exporter -a 127.0.0.1:0 -c 30s 2>"$tmp/log" &
pid=$!
port=
for _ in $(seq 1 100); do
    port=$(sed -n 's/.* serving .*port=\([0-9]*\).*/\1/p' "$tmp/log" | head -1)
    [ -n "$port" ] && break
    sleep 0.05
done
[ -n "$port" ] || { echo "exporter did not start: $(cat "$tmp/log")" >&2; exit 1; }
rss() { awk '/^VmRSS/ {printf "%.1f", $2/1024}' /proc/$pid/status; }
hwm() { awk '/^VmHWM/ {printf "%.1f", $2/1024}' /proc/$pid/status; }
anon() { awk '/^RssAnon/ {printf "%.1f", $2/1024}' /proc/$pid/status; }
pss() { awk '/^Pss:/ {printf "%.1f", $2/1024}' /proc/$pid/smaps_rollup; }
filerss() { awk '/^RssFile/ {printf "%.1f", $2/1024}' /proc/$pid/status; }

"$tmp/scrape-latency" "$port" 2000 >/dev/null # warm-up
rss_warm=$(rss) anon_warm=$(anon) pss_warm=$(pss) file_warm=$(filerss)
libs=$(awk '$6 ~ /\.so/ {n=$6; sub(".*/", "", n); sub("\\.so.*", "", n); print n}' /proc/$pid/maps | sort -u | tr '\n' ' ')
keep=$("$tmp/scrape-latency" "$port" 20000)
fresh=$("$tmp/scrape-latency" "$port" 5000 new)
wrk1=$(wrk -t1 -c1 -d5s "http://127.0.0.1:$port/metrics" | awk '/Requests\/sec/ {print $2}')
wrk64=$(wrk -t4 -c64 -d10s --latency "http://127.0.0.1:$port/metrics")
rps64=$(echo "$wrk64" | awk '/Requests\/sec/ {print $2}')
p99_64=$(echo "$wrk64" | awk '$1=="99%" {print $2}')
p50_64=$(echo "$wrk64" | awk '$1=="50%" {print $2}')
rss_after=$(rss) anon_after=$(anon)
peak=$(hwm)
samples=$(curl -s "http://127.0.0.1:$port/metrics" | grep -vc '^#')
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
load=$(cut -d' ' -f1-3 /proc/loadavg)

cat <<MD
## exporter ($(date -u +%Y-%m-%d), $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -r))

\`bench/exporter/run.sh\`: \`gpuop exporter\` on the simulated DGX H100 (8 GPUs, default counters,
$samples samples per scrape), warm snapshot, loopback; load average at the end: $load.
RSS includes $file_warm MiB of file-backed pages (the binary and its shared libraries, mostly
shared with other processes); private anonymous memory is given apart. Libraries mapped: $libs.

| measure | result | target |
|---|---|---|
| scrape latency, keep-alive (20000 scrapes) | $(echo "$keep" | sed 's/.*p50_us=\([0-9.]*\).*p99_us=\([0-9.]*\).*/p50 \1 µs, p99 \2 µs/') | p99 < 1 ms |
| scrape latency, new connection each (5000) | $(echo "$fresh" | sed 's/.*p50_us=\([0-9.]*\).*p99_us=\([0-9.]*\).*/p50 \1 µs, p99 \2 µs/') | |
| body size | $(echo "$keep" | sed 's/.*bytes=\([0-9]*\).*/\1/') bytes | |
| throughput, 1 scraper (wrk -t1 -c1 5s) | $wrk1 scrapes/s | |
| throughput, 64 scrapers (wrk -t4 -c64 10s) | $rps64 scrapes/s (p50 $p50_64, p99 $p99_64) | |
| RSS after warm-up (private anon, PSS) | $rss_warm MiB ($anon_warm MiB, $pss_warm MiB) | < 10 MiB |
| RSS after the wrk runs (private anon) / peak | $rss_after MiB ($anon_after MiB) / $peak MiB | < 10 MiB |
MD
