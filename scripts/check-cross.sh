#!/usr/bin/env bash
# check-cross.sh CROSS_BUILD: the cross build's test stage (make check-cross). Builds
# the programs that the tests listed in tests/cross/tests.txt need (not the whole tree: the stage
# has a budget) and runs those tests under the cross file's exe_wrapper (qemu-user); the
# same-answers test among them compares with the native build (its -Dnative_build_dir). meson's testlog.json in
# CROSS_BUILD/meson-logs has the counts (.ci/run reads them).
set -euo pipefail
cross=$1
here=$(cd "$(dirname "$0")/.." && pwd)
list=$here/tests/cross/tests.txt
mapfile -t names < <(grep -v '^[[:space:]]*\(#\|$\)' "$list")
# The outputs of every target a listed test runs or depends on, from meson's introspection.
mapfile -t targets < <(meson introspect "$cross" --tests --targets | python3 -c '
import json, os, sys
want = set(sys.argv[1:])
data = json.load(sys.stdin)
tests = {t["name"]: t for t in data["tests"]}
files = {t["id"]: t["filename"] for t in data["targets"]}
everything = set()
for f in files.values():
    everything.update(f)
missing = sorted(want - set(tests))
if missing:
    sys.exit("check-cross: tests/cross/tests.txt names unknown tests: " + " ".join(missing))
out = set()
for n in want:
    t = tests[n]
    out.update(x for x in t["cmd"] if x in everything)
    # what the environment names (GPUOP_TOMLX_MODULE: the module rtconfig loads)
    out.update(v for v in t.get("env", {}).values() if v in everything)
    for d in t["depends"]:
        out.update(files.get(d, []))
for f in sorted(out):
    print(f)
' "${names[@]}")
# Never an empty list: ninja would build the whole tree.
[ ${#targets[@]} -gt 0 ] || { echo "check-cross: no programs found for the listed tests"; exit 1; }
rel=()
for t in "${targets[@]}"; do rel+=("${t#"$(cd "$cross" && pwd)"/}"); done
echo "check-cross: building ${#rel[@]} programs in $cross"
ninja -C "$cross" "${rel[@]}"
echo "check-cross: ${#names[@]} tests under the cross file's exe_wrapper (qemu-user)"
meson test -C "$cross" --no-rebuild --print-errorlogs --timeout-multiplier 3 "${names[@]}"
