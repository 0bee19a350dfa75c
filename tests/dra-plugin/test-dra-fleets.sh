#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `gpuop dra-plugin slices` on the simulated fleets (DGX H100, DGX A100 80GB with MIG, PCIe L4,
# HGX H200; the A100 also with partitionable devices) against golden files: NVIDIA's driver name, device names, attribute names and types,
# capacities. GPUOP_UPDATE_GOLDEN=1 rewrites the golden files. Then bad input: no node name
# (exit 2) and a library that is not there (exit 1, naming it).
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
GPUOP=$B/gpuop
SIMLIB=$B/libnvidia-ml.so.1
need_built "$GPUOP" "$SIMLIB"
need_cmd diff

slices() { # fleet [flags]
    local f=$1
    shift
    GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$S/sim/fleets/$f.yaml GPUOP_SIM_STATE=$T/state-$f \
        GPUOP_SYSFS_ROOT=$T/no-sysfs "$GPUOP" dra-plugin slices --node-name node-1 "$@"
}
# dgx-a100-80gb-mig-partitionable: the same fleet with --partitionable-devices (counter sets,
# the placements its MIG GPUs can still hold: none, they are full, but GPUs 6-7 are whole)
for fleet in dgx-h100 dgx-a100-80gb-mig pcie-l4 hgx-h200 dgx-a100-80gb-mig-partitionable; do
    want=$S/tests/dra-plugin/expected/$fleet.json
    flags=()
    f=$fleet
    if [ "$fleet" = dgx-a100-80gb-mig-partitionable ]; then
        f=dgx-a100-80gb-mig
        flags=(--partitionable-devices)
    fi
    slices "$f" "${flags[@]}" >"$T/$fleet.json" 2>"$T/$fleet.err" || fail "$fleet: exit $?: $(cat "$T/$fleet.err")"
    if [ "${GPUOP_UPDATE_GOLDEN:-}" = 1 ]; then
        cp "$T/$fleet.json" "$want"
    fi
    diff -u "$want" "$T/$fleet.json" >"$T/$fleet.diff" || fail_later "$fleet: the slices differ from $want: $(head -40 "$T/$fleet.diff")"
    echo "ok: $fleet"
done

# bad input: no node name is exit 2, naming the flag; a missing NVML library exit 1
out=$(NODE_NAME='' GPUOP_NVML_LIBRARY=$SIMLIB "$GPUOP" dra-plugin slices 2>&1)
rc=$?
if [ "$rc" != 2 ] || [[ $out != *--node-name* ]]; then fail "no node name: rc=$rc: $out"; fi
out=$(GPUOP_NVML_LIBRARY=$T/none/libnvidia-ml.so.1 "$GPUOP" dra-plugin slices --node-name n 2>&1)
rc=$?
if [ "$rc" != 1 ] || [[ $out != *"$T/none/libnvidia-ml.so.1"* ]]; then fail "no library: rc=$rc: $out"; fi
echo "ok: bad input"
