#!/bin/bash
# Idle and slow clients cannot starve /metrics: with 500 idle connections and 64 connections
# trickling a request a byte a second held open against `gpuop exporter` (on the simulated
# DGX H100), 100 scrapes from another client (127.0.0.2) all succeed with p99 under 200 ms, and
# the server closes the trickling connections at its header deadline. Loopback only, ~15 s. A
# starved scrape waits behind the trickling clients for seconds, or times out (as every scrape
# did before the server's connection limits); 200 ms tells that apart on a 2-CPU machine running
# other tests beside this one (a quiet one answers in a few ms: bench/RESULTS.md, "HTTP endpoints
# under idle and slow clients").
# $1: build/gpuop  $2: simulated libnvidia-ml.so.1  $3: sim/fleets/dgx-h100.yaml
set -u
gpuop=$1
. "$(dirname "$0")/lib.sh"
[ -f "$2" ] || skip "simulated libnvidia-ml not built: $2"
[ -f "$3" ] || fail "fleet missing: $3"
command -v python3 >/dev/null || skip "python3 not installed"
export GPUOP_NVML_LIBRARY=$2 GPUOP_SIM_FLEET=$3

start_exporter -c 1s
poll 10 scrape || fail "no first scrape"
python3 "$(dirname "$0")/slowloris.py" "$port" 500 64 100 200 8 DCGM_FI_DEV_GPU_TEMP \
    >"$T/result" 2>"$T/result.err"
rc=$?
cat "$T/result"
[ $rc = 0 ] || fail "$(cat "$T/result.err")"
# Still serving, and libmicrohttpd's own messages (if any) came through the project's log.
scrape >/dev/null || fail "no scrape after the attack"
if grep -v '^{' "$T/exporter.log" | grep -Ev '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' | grep -q .; then
    fail "raw lines on the exporter's stderr: $(grep -Ev '^[0-9]{4}-' "$T/exporter.log" | head -3)"
fi
stop_exporter
echo "PASS"
