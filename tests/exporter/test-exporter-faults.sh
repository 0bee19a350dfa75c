#!/bin/bash
# Injected faults on the simulated DGX H100 (`gpuop-sim inject`, state shared through
# GPUOP_SIM_STATE): an XID shows in DCGM_FI_DEV_XID_ERRORS and DCGM_EXP_XID_ERRORS_COUNT of that
# GPU only, ECC errors in its ECC counters, and a lost GPU drops its DCGM series and shows in
# gpuop_exporter_gpu_up / gpu_lost while the other seven keep reporting.
# $1: build/gpuop  $2: simulated libnvidia-ml.so.1  $3: sim/fleets/dgx-h100.yaml
set -u
gpuop=$1
. "$(dirname "$0")/lib.sh"
[ -f "$2" ] || skip "simulated libnvidia-ml not built: $2"
[ -f "$3" ] || fail "fleet missing: $3"
export GPUOP_NVML_LIBRARY=$2 GPUOP_SIM_FLEET=$3 GPUOP_SIM_STATE=$T/state
mkdir -p "$GPUOP_SIM_STATE"

cat >"$T/c.csv" <<'CSV'
DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).
DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.
DCGM_EXP_XID_ERRORS_COUNT, counter, reported XIDs during last window
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors.
DCGM_FI_DRIVER_VERSION, label, Driver Version
CSV
start_exporter -f "$T/c.csv" -c 100ms
scrape -o "$T/m0" || fail "scrape"
[ "$(grep -c '^DCGM_FI_DEV_GPU_TEMP{' "$T/m0")" = 8 ] || fail "want 8 GPU_TEMP series at start"
[ "$(grep -c '^DCGM_FI_DEV_XID_ERRORS{.*} 0$' "$T/m0")" = 8 ] || fail "want XID 0 on all GPUs at start"

# has PATTERN: the latest scrape has a line matching the extended regex.
has() { scrape -o "$T/m" && grep -Eq "$1" "$T/m"; }

"$gpuop-sim" inject xid --gpu 3 --code 48 || fail "inject xid"
poll 10 has '^DCGM_FI_DEV_XID_ERRORS\{gpu="3",.*\} 48$' || fail "XID 48 not on GPU 3: $(grep XID "$T/m")"
[ "$(grep -c '^DCGM_FI_DEV_XID_ERRORS{.*} 0$' "$T/m")" = 7 ] || fail "XID leaked to other GPUs"
grep -Eq '^DCGM_EXP_XID_ERRORS_COUNT\{gpu="3",.*window_size_in_ms="300000",xid="48"\} 1$' "$T/m" ||
    fail "XID count: $(grep XID_ERRORS_COUNT "$T/m")"
"$gpuop-sim" inject xid --gpu 3 --code 48 || fail "inject xid 2"
poll 10 has '^DCGM_EXP_XID_ERRORS_COUNT\{gpu="3",.*xid="48"\} 2$' || fail "XID count did not reach 2"

before=$(grep -E '^DCGM_FI_DEV_ECC_DBE_VOL_TOTAL\{gpu="2",' "$T/m" | awk '{print $NF}')
[ -n "$before" ] || fail "no DCGM_FI_DEV_ECC_DBE_VOL_TOTAL on GPU 2"
"$gpuop-sim" inject ecc --gpu 2 --dbe 2 || fail "inject ecc"
poll 10 has "^DCGM_FI_DEV_ECC_DBE_VOL_TOTAL\\{gpu=\"2\",.*\\} $((before + 2))\$" ||
    fail "ECC DBE not counted: $(grep ECC "$T/m")"

"$gpuop-sim" inject lost --gpu 5 || fail "inject lost"
poll 10 has '^gpuop_exporter_gpu_up\{gpu="5",.*\} 0$' || fail "lost GPU still up: $(grep gpu_up "$T/m")"
grep -Eq '^gpuop_exporter_gpu_lost\{gpu="5",.*\} 1$' "$T/m" || fail "gpu_lost not 1"
! grep -Eq '^DCGM_FI_DEV_GPU_TEMP\{gpu="5",' "$T/m" || fail "lost GPU still has GPU_TEMP"
[ "$(grep -c '^DCGM_FI_DEV_GPU_TEMP{' "$T/m")" = 7 ] || fail "the other GPUs stopped reporting"
[ "$(grep -c '^gpuop_exporter_gpu_up{.*} 1$' "$T/m")" = 7 ] || fail "want 7 GPUs up"
lost=$(metric_value gpuop_exporter_errors_total gpu_lost "$T/m")
[ "${lost:-0}" -gt 0 ] || fail "errors_total{kind=gpu_lost} not counted"
n1=$(awk '/^gpuop_exporter_collections_total/ {print $2}' "$T/m")
sleep 0.5
scrape -o "$T/m2" || fail "scrape"
n2=$(awk '/^gpuop_exporter_collections_total/ {print $2}' "$T/m2")
[ "$n2" -gt "$n1" ] || fail "collection stalled after a lost GPU"
[ "$(grep -c '^DCGM_FI_DEV_GPU_TEMP{' "$T/m2")" = 7 ] || fail "the other GPUs stopped reporting (2)"
kill -0 "$exporter_pid" || fail "exporter died"
stop_exporter
echo PASS
