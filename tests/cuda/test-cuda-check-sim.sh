#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The CUDA check (build/cuda-check: src/edge/cuda's PTX and launch code) against the simulated
# libcuda on simulated nodes. Arguments: CUDA_CHECK LIBCUDA GPUOP FLEETS_DIR.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
CHECK=$1
export GPUOP_CUDA_LIBRARY=$2
GPUOP=$3
FLEETS=$4
unset GPUOP_SIM_ROOT NVIDIA_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES GPUOP_SIM_CUDA_CORRUPT
export GPUOP_SIM_FLEET=$FLEETS/dgx-h100.yaml GPUOP_SIM_STATE=$T/state
log_file "$T/out"
# run WANT_RC [ENV=VALUE...]: the check with extra environment; output in $T/out.
run() {
    local want=$1 rc
    shift
    env "$@" "$CHECK" >"$T/out" 2>&1
    rc=$?
    [ "$rc" = "$want" ] || fail "cuda-check $* exited $rc, not $want"
}
has() { grep -qxF -- "$1" "$T/out" || fail "no line \"$1\""; }
has_re() { grep -qE -- "$1" "$T/out" || fail "no line matching /$1/"; }

# A healthy fleet: every GPU runs vectorAdd and verifies.
run 0
has "CUDA driver API 12.8, 8 device(s)"
[ "$(grep -c ': PASS (vectorAdd verified' "$T/out")" = 8 ] || fail "not 8 devices passed"
has_re "^device 0: NVIDIA H100 80GB HBM3 GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}: PASS"
has "CUDA check: PASS"
uuid1=$(sed -n 's/^device 1: NVIDIA H100 80GB HBM3 \(GPU-[^:]*\): PASS.*/\1/p' "$T/out")
[ -n "$uuid1" ] || fail "no UUID for device 1"
# The UUIDs are NVML's: the fleet's GPU 1.
GPUOP_NVML_LIBRARY=${GPUOP_CUDA_LIBRARY%/*}/libnvidia-ml.so.1 "$GPUOP" inventory >"$T/inv" 2>&1 ||
    fail "gpuop inventory: $(cat "$T/inv")"
grep -qE "^1 +NVIDIA H100 80GB HBM3 +$uuid1 " "$T/inv" || fail "device 1's UUID $uuid1 is not NVML's GPU 1"

# Another length; other fleets (Volta's sm_70 compiles the sm_50 PTX too).
"$CHECK" --elements 1000003 >"$T/out" 2>&1 || fail "--elements 1000003"
for f in pcie-l4 dgx1-v100 dgx-a100-80gb-mig; do
    run 0 GPUOP_SIM_FLEET="$FLEETS/$f.yaml" GPUOP_SIM_STATE="$T/state-$f"
    has "CUDA check: PASS"
done

# CUDA_VISIBLE_DEVICES picks devices (by ordinal or UUID prefix); NVIDIA_VISIBLE_DEVICES is the
# container's set.
run 0 CUDA_VISIBLE_DEVICES=1
has "CUDA driver API 12.8, 1 device(s)"
has_re "^device 0: NVIDIA H100 80GB HBM3 $uuid1: PASS"
run 0 CUDA_VISIBLE_DEVICES="${uuid1:0:12}"
has_re "^device 0: NVIDIA H100 80GB HBM3 $uuid1: PASS"
run 0 NVIDIA_VISIBLE_DEVICES=1,5 CUDA_VISIBLE_DEVICES=0
has_re "^device 0: NVIDIA H100 80GB HBM3 $uuid1: PASS"
run 0 CUDA_VISIBLE_DEVICES=3,2,nonsense,1
has "CUDA driver API 12.8, 2 device(s)"

# No device: an empty visible set.
for v in CUDA_VISIBLE_DEVICES= NVIDIA_VISIBLE_DEVICES=none NVIDIA_VISIBLE_DEVICES=void CUDA_VISIBLE_DEVICES=9; do
    run 1 "$v"
    has "CUDA check: FAIL: cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"
done

# No driver loaded on the node (GPUOP_SIM_ROOT without the kernel module), then loaded: the
# CUDA version follows the loaded driver's branch.
mkdir -p "$T/root"
run 1 GPUOP_SIM_ROOT="$T/root"
has "CUDA check: FAIL: cuInit: CUDA_ERROR_UNKNOWN (unknown error)"
mkdir -p "$T/root/sys/module/nvidia"
echo 550.127.05 >"$T/root/sys/module/nvidia/version"
run 0 GPUOP_SIM_ROOT="$T/root"
has "CUDA driver API 12.4, 8 device(s)"
# No fleet at all.
run 1 GPUOP_SIM_FLEET="$T/missing.yaml"
has "CUDA check: FAIL: cuInit: CUDA_ERROR_UNKNOWN (unknown error)"
# No library.
run 1 GPUOP_CUDA_LIBRARY="$T/libcuda.so.1"
has_re "^CUDA check: FAIL: load the CUDA driver \"$T/libcuda.so.1\": .*No such file"

# A lost GPU: its device fails, named; the others still pass.
"$GPUOP-sim" inject lost --gpu 2 >/dev/null || fail "inject lost"
run 1
has_re "^device 2: NVIDIA H100 80GB HBM3 GPU-[^ ]+: FAIL: cuCtxCreate: CUDA_ERROR_UNKNOWN \(unknown error\)$"
has_re "^CUDA check: FAIL: device 2 \(NVIDIA H100 80GB HBM3, GPU-[^)]+\): cuCtxCreate: CUDA_ERROR_UNKNOWN \(unknown error\)$"
[ "$(grep -c ': PASS (vectorAdd verified' "$T/out")" = 7 ] || fail "the other 7 did not pass"
"$GPUOP-sim" reset >/dev/null || fail "sim reset"
run 0

# An uncorrectable ECC error: the launch's synchronisation reports it.
"$GPUOP-sim" inject ecc --gpu 4 --dbe 1 >/dev/null || fail "inject ecc"
run 1
has "CUDA check: FAIL: device 4 (NVIDIA H100 80GB HBM3, $(sed -n 's/^device 4: NVIDIA H100 80GB HBM3 \(GPU-[^:]*\): FAIL.*/\1/p' "$T/out")): cuCtxSynchronize: CUDA_ERROR_ECC_UNCORRECTABLE (uncorrectable ECC error encountered)"
"$GPUOP-sim" reset >/dev/null || fail "sim reset"

# A silent wrong result (the simulator's corruption knob): the verification catches it.
run 1 GPUOP_SIM_CUDA_CORRUPT=6
has_re "^device 6: .*: FAIL: vectorAdd result verification failed: 1 of 50000 elements wrong, the first at index 25000 \(got .*, expected .*\)$"
has_re "^CUDA check: FAIL: device 6 \("
[ "$(grep -c ': PASS (vectorAdd verified' "$T/out")" = 7 ] || fail "the other 7 did not pass"

echo PASS
