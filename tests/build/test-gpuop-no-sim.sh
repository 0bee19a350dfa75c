#!/usr/bin/env bash
# The shipped gpuop holds no test-bed code: no global symbol defined by a test-bed library
# (sim/: the simulated NVML's core, kubesim, kubelet-sim, the simulated images and CUDA) is
# defined in build/gpuop, and `gpuop --help` lists no simulator command.
# Usage: test-gpuop-no-sim.sh GPUOP SIM_LIB...
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
gpuop=$1; shift
need_cmd nm
[ -x "$gpuop" ] || fail "$gpuop: not an executable"
tmp=$T
nm --defined-only -g "$gpuop" | awk '{print $NF}' | sort -u >"$tmp/gpuop"
[ -s "$tmp/gpuop" ] || fail "nm found no symbol in $gpuop"
for lib in "$@"; do
    [ -f "$lib" ] || fail "$lib: missing"
    nm --defined-only -g "$lib" 2>/dev/null | awk 'NF >= 3 {print $NF}' | sort -u >"$tmp/lib"
    [ -s "$tmp/lib" ] || fail "nm found no symbol in $lib"
    both=$(comm -12 "$tmp/gpuop" "$tmp/lib")
    [ -z "$both" ] || fail "$gpuop defines test-bed symbols of $(basename "$lib"): $(echo $both | head -c 300)"
done
help=$("$gpuop" --help) || fail "gpuop --help failed"
if grep -qiE '^  (sim|simulator)\b' <<<"$help"; then fail "gpuop --help lists a simulator command"; fi
grep -qi "simulated GPU fleet" <<<"$help" && fail "gpuop --help describes the simulated fleet"
echo "ok: $(wc -l <"$tmp/gpuop") symbols in gpuop, none from $# test-bed libraries; --help lists no simulator"
