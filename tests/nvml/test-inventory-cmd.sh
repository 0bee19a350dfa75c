#!/usr/bin/env bash
# `gpuop inventory` end to end on the minimal library: table, topology, JSON, and the failures
# (missing library, bad flag) as one clear line and the documented exit codes.
# $1: build/gpuop  $2: the minimal libnvidia-ml (tests/nvml/fake-nvml-min.c)
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
gpuop=$1
lib=$2
tmp=$T

"$gpuop" inventory --help >"$tmp/help" 2>&1 || fail "--help exit $?"
grep -q GPUOP_NVML_LIBRARY "$tmp/help" || fail "--help does not document GPUOP_NVML_LIBRARY"
grep -q -- --json "$tmp/help" || fail "--help does not document --json"

"$gpuop" inventory --library "$lib" >"$tmp/out" 2>"$tmp/err" || fail "inventory exit $?: $(cat "$tmp/err")"
[ "$(grep -c 'Tesla V100-SXM2-16GB' "$tmp/out")" = 2 ] || fail "expected 2 GPUs: $(cat "$tmp/out")"
grep -q 'Driver 418.40.04' "$tmp/out" || fail "no driver version: $(cat "$tmp/out")"
grep -q '^Topology' "$tmp/out" || fail "no topology matrix"
grep -Eq '^GPU0 +X +SYS' "$tmp/out" || fail "topology row 0 wrong: $(cat "$tmp/out")"
grep -Eq '^GPU1 +SYS +X' "$tmp/out" || fail "topology row 1 wrong: $(cat "$tmp/out")"

GPUOP_NVML_LIBRARY="$lib" "$gpuop" inventory --json --no-topology >"$tmp/json" 2>"$tmp/err" ||
    fail "--json exit $?: $(cat "$tmp/err")"
/usr/bin/python3 - "$tmp/json" <<'PY' || fail "JSON check failed"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["driver_version"] == "418.40.04", d
assert d["cuda_driver_version"] == 0
g = d["gpus"]
assert len(g) == 2 and g[1]["uuid"].endswith("0001") and g[0]["name"] == "Tesla V100-SXM2-16GB"
assert g[0]["mig"] == {"capable": False, "enabled": False, "pending": False, "devices": []}
assert g[0]["architecture"] == "unknown" and g[0]["lost"] is False
assert d["topology"]["matrix"] == [["X", "SYS"], ["SYS", "X"]], d["topology"]
PY

"$gpuop" inventory --library /nonexistent/libnvidia-ml.so.1 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] || fail "missing library: exit $rc, want 1"
[ "$(wc -l <"$tmp/err")" = 1 ] || fail "missing library: want one line, got: $(cat "$tmp/err")"
grep -q '/nonexistent/libnvidia-ml.so.1' "$tmp/err" || fail "error does not name the library"
grep -q GPUOP_NVML_LIBRARY "$tmp/err" || fail "error does not hint at GPUOP_NVML_LIBRARY"
[ ! -s "$tmp/out" ] || fail "missing library: something on stdout"

GPUOP_NVML_LIBRARY=/nonexistent/x.so "$gpuop" inventory >/dev/null 2>"$tmp/err"
[ $? = 1 ] || fail "GPUOP_NVML_LIBRARY not honoured"
grep -q '/nonexistent/x.so' "$tmp/err" || fail "error does not name \$GPUOP_NVML_LIBRARY's path"

"$gpuop" inventory --bogus >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "unknown flag: want exit 2"
[ "$(wc -l <"$tmp/err")" = 1 ] || fail "unknown flag: want one line, got: $(cat "$tmp/err")"
grep -q -- '--bogus' "$tmp/err" || fail "unknown flag: the error does not name it"
"$gpuop" inventory --library >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "flag without value: want exit 2"
[ "$(wc -l <"$tmp/err")" = 1 ] || fail "flag without value: want one line, got: $(cat "$tmp/err")"
grep -q -- '--library' "$tmp/err" || fail "flag without value: the error does not name it"
"$gpuop" inventory extra >/dev/null 2>&1
[ $? = 2 ] || fail "stray argument: want exit 2"
echo "ok"
