#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cuda-check-real.sh: the validator's CUDA check against this machine's real NVIDIA driver, for a
# machine with a GPU. It builds what it needs (a Meson build folder, default ./build; BUILD=DIR
# picks another), then runs:
#   1. build/cuda-check: src/edge/cuda's check on its own (cuda_check_run): cuInit, the device count,
#      and on every device a context, the embedded PTX vectorAdd JIT-compiled by the driver
#      (cuModuleLoadData), launched, copied back and verified element by element; one line per
#      device;
#   2. `gpuop validator --component=cuda`, when this build of gpuop has the validator (the same
#      check, through the component; extra arguments in VALIDATOR_ARGS, e.g. where it writes its
#      status file).
# The library is $GPUOP_CUDA_LIBRARY, else libcuda.so.1 as the dynamic loader finds it; never the
# simulated one in the build folder. Exit 0 only when every step that ran passed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BUILD=${BUILD:-build}
LIB=${GPUOP_CUDA_LIBRARY:-libcuda.so.1}
ELEMENTS=${ELEMENTS:-50000}

say() { printf '== %s\n' "$*"; }
die() {
    printf 'cuda-check-real: FAIL: %s\n' "$*"
    exit 1
}

# The simulator's environment must not leak in: this run is about the real driver.
unset GPUOP_SIM_FLEET GPUOP_SIM_STATE GPUOP_SIM_ROOT GPUOP_SIM_CUDA_CORRUPT
case "$LIB" in
*/"$BUILD"/libcuda.so* | "$BUILD"/libcuda.so*) die "$LIB is the simulated libcuda; unset GPUOP_CUDA_LIBRARY" ;;
esac
if [ "$LIB" = libcuda.so.1 ]; then
    resolved=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')
    [ -n "$resolved" ] || say "warning: ldconfig does not list libcuda.so.1 (no NVIDIA driver installed?)"
    [ -n "$resolved" ] && say "libcuda.so.1 -> $(readlink -f "$resolved")"
fi
if command -v nvidia-smi >/dev/null 2>&1; then
    say "nvidia-smi -L"
    nvidia-smi -L || say "warning: nvidia-smi failed"
fi

if [ ! -f "$BUILD/build.ninja" ]; then
    say "meson setup $BUILD"
    meson setup "$BUILD" >/dev/null || die "meson setup $BUILD"
fi
say "building cuda-check and gpuop"
ninja -C "$BUILD" cuda-check gpuop >/dev/null || die "ninja -C $BUILD cuda-check gpuop"

rc=0
say "$BUILD/cuda-check --lib $LIB --elements $ELEMENTS"
"$BUILD/cuda-check" --lib "$LIB" --elements "$ELEMENTS" || rc=1

if "$BUILD/gpuop" validator --help 2>&1 | grep -q -- '--component'; then
    say "gpuop validator --component=cuda ${VALIDATOR_ARGS:-}"
    # shellcheck disable=SC2086
    GPUOP_CUDA_LIBRARY=$LIB "$BUILD/gpuop" validator --component=cuda ${VALIDATOR_ARGS:-} || rc=1
else
    say "gpuop validator is not in this build: only cuda-check ran"
fi

if [ $rc = 0 ]; then
    echo "cuda-check-real: PASS"
else
    echo "cuda-check-real: FAIL (see above)"
fi
exit $rc
