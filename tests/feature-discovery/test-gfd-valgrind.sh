#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# valgrind --leak-check=full on feature-discovery runs: a oneshot on the DGX A100 MIG fleet with
# the mixed strategy and a time-slicing config, the NVML-missing path, a config error, and the
# relabel loop through a SIGHUP reload and a SIGTERM exit. No leaks, no memory errors.
#
# usage: test-gfd-valgrind.sh <gpuop> <libnvidia-ml.so.1 (simulator)>
set -u

GPUOP=$1
SIMLIB=$2
SRC=${GPUOP_SOURCE_ROOT:?GPUOP_SOURCE_ROOT is not set}

if ! command -v valgrind >/dev/null 2>&1; then
    echo "SKIP: valgrind is not installed"
    exit 77
fi
# valgrind and AddressSanitizer do not mix: skip a sanitized build.
if ldd "$GPUOP" 2>/dev/null | grep -qE 'libasan|libubsan'; then
    echo "SKIP: $GPUOP is built with sanitizers"
    exit 77
fi
if [ -n "${GPUOP_BUILD_ROOT:-}" ] && [ -x /usr/bin/python3 ] &&
    meson introspect --buildoptions "$GPUOP_BUILD_ROOT" 2>/dev/null | /usr/bin/python3 -c '
import json, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
sys.exit(0 if opts.get("b_sanitize", "none") != "none" else 1)'; then
    echo "SKIP: the build is sanitized"
    exit 77
fi
# The simulator is built by this project, not a peer: its absence is a broken build.
if [ ! -f "$SIMLIB" ]; then
    echo "FAIL: the simulated libnvidia-ml ($SIMLIB) is not built"
    exit 1
fi

WORK=$(mktemp -d /tmp/gpuop-gfd-vg.XXXXXX)
trap 'rm -rf "$WORK"' EXIT INT TERM
failures=0
VG="valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99"

check() { # <name> <expected exit> : the last run
    if [ "$rc" -eq 99 ] || grep -q '^==[0-9]*==' "$WORK/err"; then
        echo "FAIL: $1: valgrind reports errors or leaks"
        sed 's/^/    /' "$WORK/err"
        failures=$((failures + 1))
    elif [ "$rc" -ne "$2" ]; then
        echo "FAIL: $1: exit $rc, want $2"
        sed 's/^/    /' "$WORK/err"
        failures=$((failures + 1))
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
    echo "FAIL: oneshot-mixed-timeslicing: labels missing"
    failures=$((failures + 1))
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
i=0
while [ ! -s "$WORK/loop" ] && [ $i -lt 300 ]; do
    sleep 0.1
    i=$((i + 1))
done
cp "$SRC/tests/feature-discovery/configs/timeslicing-4.yaml" "$WORK/live.yaml"
kill -HUP $pid
i=0
while ! grep -q 'gpu.replicas=4' "$WORK/loop" 2>/dev/null && [ $i -lt 300 ]; do
    sleep 0.1
    i=$((i + 1))
done
if ! grep -q 'gpu.replicas=4' "$WORK/loop" 2>/dev/null; then
    echo "FAIL: loop-reload: SIGHUP did not relabel with the new config"
    failures=$((failures + 1))
fi
cp "$SRC/tests/feature-discovery/configs/bad-syntax.yaml" "$WORK/live.yaml"
kill -HUP $pid
sleep 0.5
kill -TERM $pid
wait $pid
rc=$?
check loop-reload-exit 0

[ "$failures" -eq 0 ]
