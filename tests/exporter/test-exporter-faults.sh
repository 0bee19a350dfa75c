#!/bin/bash
# Injected faults on the simulated DGX H100 (`gpuop sim inject`, shared state in
# GPUOP_SIM_STATE): an XID shows in DCGM_FI_DEV_XID_ERRORS of that GPU, a lost GPU drops its
# DCGM series and shows in gpuop_exporter_gpu_up / gpu_lost, and the other GPUs keep reporting.
# $1: build/gpuop  $2: simulated libnvidia-ml.so.1  $3: sim/fleets/dgx-h100.yaml
set -u
gpuop=$1
. "$(dirname "$0")/lib.sh"
[ -f "$2" ] || skip "simulated libnvidia-ml not built: $2"
[ -f "$3" ] || skip "fleet missing: $3"
export GPUOP_NVML_LIBRARY=$2 GPUOP_SIM_FLEET=$3 GPUOP_SIM_STATE=$tmp/state
mkdir -p "$GPUOP_SIM_STATE"
echo "TODO: inject syntax" >&2
exit 77
