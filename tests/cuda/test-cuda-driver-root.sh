#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The CUDA check through the libcuda a simulated driver lays out: the driver container's root
# (/run/nvidia/driver) and a driver pre-installed on the host. Arguments: CUDA_CHECK
# SIM_IMAGE_BIN LIBNVIDIA_ML FLEETS_DIR.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
CHECK=$1
BIN=$2
export GPUOP_NVML_LIBRARY=$3
FLEETS=$4
ROOT=$T/root
KERNEL=5.15.0-127-generic
LIBDIR=usr/lib/x86_64-linux-gnu
mkdir -p "$ROOT/usr/src/linux-headers-$KERNEL"
export GPUOP_SIM_ROOT=$ROOT GPUOP_SIM_FLEET=$FLEETS/pcie-l4.yaml GPUOP_SIM_STATE=$T/state
export GPUOP_SIM_KERNEL=$KERNEL GPUOP_SIM_IMAGE=nvcr.io/nvidia/driver:550.127.05-ubuntu22.04
export SIM_DRIVER_BUILD_SECONDS=0.1
unset DRIVER_VERSION NVIDIA_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES GPUOP_CUDA_LIBRARY
unset GPUOP_SIM_CUDA_CORRUPT

# No driver yet: the driver root has no libcuda to load.
DRVLIB=$ROOT/run/nvidia/driver/$LIBDIR/libcuda.so.1
"$CHECK" --lib "$DRVLIB" >"$T/none.log" 2>&1 && fail "the check passed without a driver"
grep -qF "CUDA check: FAIL: load the CUDA driver \"$DRVLIB\"" "$T/none.log" || fail "no-driver text"

# The driver container loads: its root's libcuda answers for the node's 4 L4s, CUDA 12.4.
bg driver "$BIN/nvidia-driver" init
DRIVER=$LAST
wait_log "$T/driver.log" "Done, now waiting for signal"
[ -f "$ROOT/run/nvidia/driver/$LIBDIR/libcuda.so.550.127.05" ] || fail "no libcuda.so.550.127.05"
[ "$(readlink "$DRVLIB")" = libcuda.so.550.127.05 ] || fail "libcuda.so.1 is not a link to it"
"$CHECK" --lib "$DRVLIB" >"$T/loaded.log" 2>&1 || fail "the check failed with the driver loaded"
grep -qxF "CUDA driver API 12.4, 4 device(s)" "$T/loaded.log" || fail "version or count"
[ "$(grep -c "^device [0-3]: NVIDIA L4 GPU-.*: PASS" "$T/loaded.log")" = 4 ] || fail "4 L4s pass"

# The driver unloads: its libcuda goes with it.
kill -TERM "$DRIVER"
wait_exit "$DRIVER" 10
[ $RC = 0 ] || fail "the driver's unload exited $RC"
if [ -e "$DRVLIB" ] || [ -e "$ROOT/run/nvidia/driver/$LIBDIR/libcuda.so.550.127.05" ]; then
    fail "libcuda left in the driver root"
fi
# A libcuda kept from before (a copy a container still has) cannot reach the unloaded driver.
"$CHECK" --lib "${GPUOP_NVML_LIBRARY%/*}/libcuda.so.1" >"$T/gone.log" 2>&1 && fail "passed unloaded"
grep -qxF "CUDA check: FAIL: cuInit: CUDA_ERROR_UNKNOWN (unknown error)" "$T/gone.log" ||
    fail "unloaded-driver text"

# A driver pre-installed on the host: libcuda on the host root.
DRIVER_VERSION=535.216.03 "$BIN/nvidia-driver" host-install >"$T/host.log" 2>&1 || fail "host-install"
"$CHECK" --lib "$ROOT/$LIBDIR/libcuda.so.1" >"$T/host-check.log" 2>&1 || fail "host driver check"
grep -qxF "CUDA driver API 12.2, 4 device(s)" "$T/host-check.log" || fail "host driver version"
echo PASS
