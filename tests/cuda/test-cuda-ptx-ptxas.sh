#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The check's embedded PTX through NVIDIA's own assembler (ptxas, from a CUDA toolkit), for the
# architectures it still targets: what the driver's JIT does with it on a real GPU. Skipped
# without a toolkit. Also keeps the fuzz corpus's copy of the module current.
# Arguments: CUDA_CHECK SOURCE_ROOT.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
CHECK=$1
SRC=$2
"$CHECK" --ptx >"$T/vectorAdd.ptx" || fail "cuda-check --ptx"
cmp -s "$T/vectorAdd.ptx" "$SRC/tests/fuzz/simcuda/corpus/vector-add.ptx" ||
    fail "tests/fuzz/simcuda/corpus/vector-add.ptx differs from the embedded PTX" \
        "(build/cuda-check --ptx > tests/fuzz/simcuda/corpus/vector-add.ptx)"
PTXAS=$(command -v ptxas || { [ -x /usr/local/cuda/bin/ptxas ] && echo /usr/local/cuda/bin/ptxas; })
[ -n "$PTXAS" ] || skip "no ptxas (CUDA toolkit) on this machine"
ran=0
for arch in sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120; do
    out=$("$PTXAS" -arch=$arch "$T/vectorAdd.ptx" -o "$T/$arch.cubin" 2>&1)
    rc=$?
    if [ $rc != 0 ]; then
        # an architecture this toolkit no longer (or not yet) targets is not the PTX's fault
        grep -q "is not defined for option 'gpu-name'" <<<"$out" && continue
        fail "ptxas -arch=$arch: $out"
    fi
    [ -s "$T/$arch.cubin" ] || fail "ptxas -arch=$arch wrote nothing"
    ran=$((ran + 1))
done
[ $ran -gt 0 ] || skip "ptxas targets none of the architectures"
echo "PASS ($ran architectures, $("$PTXAS" --version | tail -1))"
