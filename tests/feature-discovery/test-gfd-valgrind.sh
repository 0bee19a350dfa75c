#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# valgrind --leak-check=full on feature-discovery runs: a oneshot on the DGX A100 MIG fleet with
# the mixed strategy and a time-slicing config, the NVML-missing path, a config error, and the
# relabel loop through a SIGHUP reload and a SIGTERM exit. No leaks, no memory errors.
#
# usage: test-gfd-valgrind.sh <gpuop> <libnvidia-ml.so.1 (simulator)>
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"

GPUOP=$1
SIMLIB=$2
SRC=$S

need_cmd valgrind
# valgrind and AddressSanitizer do not mix: skip a sanitized build.
if ldd "$GPUOP" 2>/dev/null | grep -qE 'libasan|libubsan'; then
    skip "$GPUOP is built with sanitizers"
fi
if [ -n "${GPUOP_BUILD_ROOT:-}" ] && [ -x /usr/bin/python3 ] &&
    meson introspect --buildoptions "$GPUOP_BUILD_ROOT" 2>/dev/null | /usr/bin/python3 -c '
import json, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
sys.exit(0 if opts.get("b_sanitize", "none") != "none" else 1)'; then
    skip "the build is sanitized"
fi
# The simulator is built by this project, not a peer: its absence is a broken build.
[ -f "$SIMLIB" ] || fail "the simulated libnvidia-ml ($SIMLIB) is not built"

WORK=$T
VG="valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99"

check() { # <name> <expected exit> : the last run
    if [ "$rc" -eq 99 ] || grep -q '^==[0-9]*==' "$WORK/err"; then
        fail_later "$1: valgrind reports errors or leaks"
        sed 's/^/    /' "$WORK/err"
    elif [ "$rc" -ne "$2" ]; then
        fail_later "$1: exit $rc, want $2"
        sed 's/^/    /' "$WORK/err"
    else
        echo "ok: $1"
    fi
}

export GPUOP_NVML_LIBRARY=$SIMLIB
export GPUOP_SIM_FLEET=$SRC/sim/fleets/dgx-a100-80gb-mig.yaml
export GPUOP_SIM_STATE=$WORK/state
mkdir -p "$GPUOP_SIM_STATE"

$VG "$GPUOP" feature-discovery --oneshot --output "$WORK/labels" --mig-strategy mixed \
    --config-file "$SRC/tests/feature-discovery/configs/timeslicing-mig-1g.yaml" 2>"$WORK/err"
rc=$?
check oneshot-mixed-timeslicing 0
if ! grep -q '^nvidia.com/mig-1g.10gb.replicas=3$' "$WORK/labels" 2>/dev/null; then
    fail_later "oneshot-mixed-timeslicing: labels missing"
fi

$VG "$GPUOP" feature-discovery --oneshot --output - --mig-strategy single >/dev/null \
    2>"$WORK/err"
rc=$?
check oneshot-single-invalid 0

GPUOP_NVML_LIBRARY=$WORK/missing/libnvidia-ml.so.1 $VG "$GPUOP" feature-discovery --oneshot \
    --output - --fail-on-init-error=false >/dev/null 2>"$WORK/err"
rc=$?
check nvml-missing-tolerated 0

GPUOP_NVML_LIBRARY=$WORK/missing/libnvidia-ml.so.1 $VG "$GPUOP" feature-discovery --oneshot \
    --output - >/dev/null 2>"$WORK/err"
rc=$?
check nvml-missing-fails 1

$VG "$GPUOP" feature-discovery --oneshot --output - \
    --config-file "$SRC/tests/feature-discovery/configs/bad-replicas.yaml" >/dev/null 2>"$WORK/err"
rc=$?
check bad-config 2

cp "$SRC/tests/feature-discovery/configs/timeslicing-2.yaml" "$WORK/live.yaml"
$VG "$GPUOP" feature-discovery --sleep-interval 100ms --output "$WORK/loop" \
    --config-file "$WORK/live.yaml" 2>"$WORK/err" &
pid=$!
poll 30 test -s "$WORK/loop"
cp "$SRC/tests/feature-discovery/configs/timeslicing-4.yaml" "$WORK/live.yaml"
kill -HUP $pid
if ! poll 30 grep -q 'gpu.replicas=4' "$WORK/loop"; then
    fail_later "loop-reload: SIGHUP did not relabel with the new config"
fi
cp "$SRC/tests/feature-discovery/configs/bad-syntax.yaml" "$WORK/live.yaml"
kill -HUP $pid
sleep 0.5
kill -TERM $pid
wait $pid
rc=$?
check loop-reload-exit 0
