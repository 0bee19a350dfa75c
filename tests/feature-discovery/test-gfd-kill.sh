#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Feature discovery SIGKILLed 100 times while relabelling leaves nothing Node Feature Discovery
# would read but `gfd` in the output directory (NFD's local source reads every regular file
# whose name does not start with a dot): temp files are dot-prefixed, and a new start removes
# those a killed run left. Then a fresh run leaves exactly `gfd`.
#
# usage: test-gfd-kill.sh <gpuop> <libnvidia-ml.so.1 (simulator)> <fleet.yaml>
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
GPUOP=$1
SIMLIB=$2
FLEET=$3
[ -f "$SIMLIB" ] || fail "the simulated libnvidia-ml ($SIMLIB) is not built"
WORK=$T
pid=
at_exit '[ -z "$pid" ] || kill -9 $pid 2>/dev/null'
DIR=$WORK/features.d
mkdir -p "$DIR" "$WORK/state"
printf 'NVIDIA DGX (simulated)\n' >"$WORK/machine"
export GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$FLEET GPUOP_SIM_STATE=$WORK/state

on_fail() { ls -la "$DIR"; }
# Names NFD would read: regular files not starting with a dot, other than gfd.
visible_strays() { find "$DIR" -mindepth 1 -maxdepth 1 -type f ! -name '.*' ! -name gfd -printf '%f\n'; }

left=0
i=0
while [ $i -lt 100 ]; do
    "$GPUOP" feature-discovery --sleep-interval 1ms --output "$DIR/gfd" \
        --machine-type-file "$WORK/machine" 2>"$WORK/err" &
    pid=$!
    # Until the first labels are out (the relabel loop is running), then a little longer.
    n=0
    while [ ! -s "$DIR/gfd" ] && [ $n -lt 200 ]; do
        sleep 0.01
        n=$((n + 1))
    done
    [ -s "$DIR/gfd" ] || fail "run $i: no labels written: $(cat "$WORK/err")"
    sleep "0.0$((i % 7 + 1))"
    kill -9 $pid
    wait $pid 2>/dev/null
    pid=
    strays=$(visible_strays)
    [ -z "$strays" ] || fail "after kill $i: files NFD would read: $strays"
    if [ -n "$(find "$DIR" -mindepth 1 -maxdepth 1 -name '.gfd.tmp.*')" ]; then
        left=$((left + 1))
    fi
    i=$((i + 1))
done
echo "100 kills; $left left a (hidden) temp file behind for the next start to remove"

# A new start removes what the killed runs left: only gfd remains.
"$GPUOP" feature-discovery --oneshot --output "$DIR/gfd" --machine-type-file "$WORK/machine" \
    2>"$WORK/err" || fail "oneshot: $(cat "$WORK/err")"
[ "$(ls -A "$DIR")" = gfd ] || fail "after a fresh run the directory holds: $(ls -A "$DIR" | tr '\n' ' ')"

# Visible temp files of older versions are removed at start too.
: >"$DIR/gfd.tmp.Ab12Cd"
"$GPUOP" feature-discovery --oneshot --output "$DIR/gfd" --machine-type-file "$WORK/machine" \
    2>"$WORK/err" || fail "oneshot: $(cat "$WORK/err")"
[ "$(ls -A "$DIR")" = gfd ] || fail "an old-style temp file stayed: $(ls -A "$DIR" | tr '\n' ' ')"
echo "PASS"
