#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Integration test: `gpuop feature-discovery --oneshot --no-timestamp --output -` on every sample
# fleet (sim/fleets) and MIG strategy, plus sharing configs, checked label by label against
# tests/feature-discovery/expected/<case>.labels; then bad input (clear one-line errors, non-zero exits), the
# NVML init-failure matrix, file output, and the relabel loop with SIGHUP/SIGTERM.
#
# usage: test-gfd-fleets.sh <gpuop> <libnvidia-ml.so.1 (simulator)>
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"

GPUOP=$1
SIMLIB=$2
SRC=$S
HERE=$SRC/tests/feature-discovery
PY=/usr/bin/python3

# The simulator is built by this project, not a peer: its absence is a broken build.
[ -f "$SIMLIB" ] || fail "the simulated libnvidia-ml ($SIMLIB) is not built"
[ -x "$PY" ] || skip "$PY is missing (needed to build the fake sysfs)"

WORK=$T
passes=0

pass() {
    passes=$((passes + 1))
}

printf 'NVIDIA DGX (simulated)\n' >"$WORK/machine"

# A fake sysfs (GPUOP_SYSFS_ROOT) giving every GPU of a fleet PCI class $2, so gpu.mode does not
# depend on the host's real PCI devices at the simulator's bus ids.
make_sysfs() { # fleet class dir
    m_state=$(mktemp -d "$WORK/state.XXXXXX")
    GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$1 GPUOP_SIM_STATE=$m_state GPUOP_SYSFS_ROOT=$3 \
        timeout 30 "$GPUOP" inventory --json --no-topology >"$WORK/inv.json" 2>"$WORK/inv.err" ||
        { cat "$WORK/inv.err"; return 1; }
    "$PY" - "$WORK/inv.json" "$2" "$3" <<'EOF'
import json, os, sys
inv = json.load(open(sys.argv[1]))
for g in inv["gpus"]:
    dom, rest = g["bus_id"].split(":", 1)
    d = os.path.join(sys.argv[3], "bus/pci/devices", "%04x:%s" % (int(dom, 16) & 0xFFFF, rest.lower()))
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "class"), "w").write(sys.argv[2] + "\n")
    open(os.path.join(d, "numa_node"), "w").write("0\n")
    open(os.path.join(d, "vendor"), "w").write("0x10de\n")
    # a passthrough GPU's configuration space: no vendor-specific capability
    open(os.path.join(d, "config"), "wb").write(bytes([0xde, 0x10]) + bytes(254))
EOF
}

# run_fd <fleet> <class> <machine-file> [feature-discovery flags...]: runs with a fresh simulator
# state; stdout in $WORK/out, stderr in $WORK/err, exit status in $rc.
run_fd() {
    r_fleet=$1
    r_class=$2
    r_machine=$3
    shift 3
    r_state=$(mktemp -d "$WORK/state.XXXXXX")
    r_sysfs=$(mktemp -d "$WORK/sysfs.XXXXXX")
    make_sysfs "$r_fleet" "$r_class" "$r_sysfs" || { rc=99; return; }
    GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$r_fleet GPUOP_SIM_STATE=$r_state \
        GPUOP_SYSFS_ROOT=$r_sysfs timeout 30 "$GPUOP" feature-discovery --oneshot \
        --no-timestamp --output - --machine-type-file "$r_machine" "$@" >"$WORK/out" 2>"$WORK/err"
    rc=$?
}

# check_case <name> <fleet> <class> <machine> [flags...]: compares every label with the golden.
check_case() {
    c_name=$1
    shift
    run_fd "$@"
    name=$c_name
    want=$HERE/expected/$name.labels
    if [ "$rc" -ne 0 ]; then
        fail_later "$name: exit $rc"
        sed 's/^/    /' "$WORK/err"
        return
    fi
    sort "$want" >"$WORK/want"
    sort "$WORK/out" >"$WORK/got"
    if ! cmp -s "$WORK/want" "$WORK/got"; then
        fail_later "$name: labels differ from $want"
        diff -u "$WORK/want" "$WORK/got" | sed 's/^/    /'
        return
    fi
    if [ "$(wc -l <"$WORK/got")" -lt 20 ]; then
        fail_later "$name: only $(wc -l <"$WORK/got") labels"
        return
    fi
    pass
}

FLEETS=$SRC/sim/fleets
COMPUTE=0x030200
GRAPHICS=0x030000
NOMACHINE=$WORK/no-such-machine-file

# ---- golden label sets ---------------------------------------------------------------------
for fleet in dgx-h100 hgx-h200 dgx1-v100 dgx-a100-80gb-mig; do
    for s in none single mixed; do
        check_case "$fleet.$s" "$FLEETS/$fleet.yaml" $COMPUTE "$WORK/machine" --mig-strategy "$s"
    done
done
for s in none single mixed; do
    check_case "pcie-l4.$s" "$FLEETS/pcie-l4.yaml" $COMPUTE "$NOMACHINE" --mig-strategy "$s"
done
check_case pcie-l4.graphics "$FLEETS/pcie-l4.yaml" $GRAPHICS "$NOMACHINE"

CFG=$HERE/configs
check_case dgx-h100.timeslicing "$FLEETS/dgx-h100.yaml" $COMPUTE "$WORK/machine" \
    --config-file "$CFG/timeslicing-4.yaml"
check_case dgx-h100.timeslicing-renamed "$FLEETS/dgx-h100.yaml" $COMPUTE "$WORK/machine" \
    --config-file "$CFG/timeslicing-4-renamed.yaml"
check_case hgx-h200.mps "$FLEETS/hgx-h200.yaml" $COMPUTE "$WORK/machine" \
    --config-file "$CFG/mps-2.json"
# the strategy from the file (mixed), sharing on a MIG resource
check_case dgx-a100-80gb-mig.mixed-timeslicing "$FLEETS/dgx-a100-80gb-mig.yaml" $COMPUTE \
    "$WORK/machine" --config-file "$CFG/timeslicing-mig-1g.yaml"

ONE=$HERE/fleets/a100-mig-single.yaml
check_case a100-mig-single.single "$ONE" $COMPUTE "$WORK/machine" --mig-strategy single
check_case a100-mig-single.none "$ONE" $COMPUTE "$WORK/machine" --mig-strategy none
check_case a100-mig-single.single-timeslicing "$ONE" $COMPUTE "$WORK/machine" \
    --mig-strategy single --config-file "$CFG/timeslicing-2.yaml"

# ---- precedence: flag > env > file ----------------------------------------------------------
# file: migStrategy single, outputFile in /proc (unwritable); the flag --output - wins.
check_case a100-mig-single.single "$ONE" $COMPUTE "$WORK/machine" --config-file \
    "$CFG/gfd-flags.yaml"
GFD_MIG_STRATEGY=mixed check_case dgx-a100-80gb-mig.mixed "$FLEETS/dgx-a100-80gb-mig.yaml" \
    $COMPUTE "$WORK/machine" --config-file "$CFG/gfd-flags.yaml"
GFD_MIG_STRATEGY=mixed check_case dgx-a100-80gb-mig.none "$FLEETS/dgx-a100-80gb-mig.yaml" \
    $COMPUTE "$WORK/machine" --config-file "$CFG/gfd-flags.yaml" --mig-strategy none
# NVIDIA's fallback names (what its operator sets): MIG_STRATEGY alone applies; GFD_ wins over it
MIG_STRATEGY=mixed check_case dgx-a100-80gb-mig.mixed "$FLEETS/dgx-a100-80gb-mig.yaml" \
    $COMPUTE "$WORK/machine"
MIG_STRATEGY=single GFD_MIG_STRATEGY=mixed check_case dgx-a100-80gb-mig.mixed \
    "$FLEETS/dgx-a100-80gb-mig.yaml" $COMPUTE "$WORK/machine"
GFD_CONFIG_FILE=$CFG/timeslicing-4.yaml check_case dgx-h100.timeslicing "$FLEETS/dgx-h100.yaml" \
    $COMPUTE "$WORK/machine"
GFD_MACHINE_TYPE_FILE=$WORK/machine check_case pcie-l4.graphics "$FLEETS/pcie-l4.yaml" \
    $GRAPHICS "$NOMACHINE" # the flag (missing file: unknown) beats the env

# ---- bad input: one clear line naming the thing, non-zero exit -----------------------------
# expect_error <name> <exit-status> <fragment> <fragment2>: checks the last run.
expect_error() {
    name=$1
    want_rc=$2
    if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
        fail_later "$name: exit $rc, want a clean non-zero exit"
        sed 's/^/    /' "$WORK/err"
        return
    fi
    if [ "$want_rc" != any ] && [ "$rc" -ne "$want_rc" ]; then
        fail_later "$name: exit $rc, want $want_rc"
    fi
    lines=$(grep -c ' error ' "$WORK/err")
    if [ "$lines" -ne 1 ]; then
        fail_later "$name: $lines error lines, want exactly one"
        sed 's/^/    /' "$WORK/err"
        return
    fi
    if ! grep ' error ' "$WORK/err" | grep -qF -- "$3" ||
        ! grep ' error ' "$WORK/err" | grep -qF -- "$4"; then
        fail_later "$name: error line lacks \"$3\" / \"$4\""
        sed 's/^/    /' "$WORK/err"
        return
    fi
    if [ -s "$WORK/out" ]; then
        fail_later "$name: labels written despite the error"
        return
    fi
    pass
}

H100=$FLEETS/dgx-h100.yaml
run_fd "$H100" $COMPUTE "$WORK/machine" --config-file "$CFG/bad-syntax.yaml"
expect_error bad-syntax 2 "$CFG/bad-syntax.yaml" ":"
run_fd "$H100" $COMPUTE "$WORK/machine" --config-file "$CFG/bad-field.yaml"
expect_error bad-field 2 "$CFG/bad-field.yaml" "flags.plugin.passDevSpecs: unknown field"
run_fd "$H100" $COMPUTE "$WORK/machine" --config-file "$CFG/bad-replicas.yaml"
expect_error bad-replicas 2 "sharing.timeSlicing.resources[0].replicas" \
    "number of replicas must be >= 2"
run_fd "$H100" $COMPUTE "$WORK/machine" --config-file "$CFG/bad-version.yaml"
expect_error bad-version 2 "$CFG/bad-version.yaml" "unknown version"
run_fd "$H100" $COMPUTE "$WORK/machine" --config-file "$CFG/bad-strategy.yaml"
expect_error bad-strategy-file 2 "flags.migStrategy" "unknown MIG strategy \"hybrid\""
run_fd "$H100" $COMPUTE "$WORK/machine" --config-file "$WORK/missing.yaml"
expect_error missing-config 2 "$WORK/missing.yaml" "No such file"
run_fd "$H100" $COMPUTE "$WORK/machine" --mig-strategy bogus
expect_error unknown-strategy 1 "--mig-strategy" "unknown MIG strategy \"bogus\""
GFD_MIG_STRATEGY=Mixed run_fd "$H100" $COMPUTE "$WORK/machine"
expect_error unknown-strategy-env 1 "GFD_MIG_STRATEGY" "\"Mixed\""
MIG_STRATEGY=Mixed run_fd "$H100" $COMPUTE "$WORK/machine"
expect_error unknown-strategy-fallback-env 1 "MIG_STRATEGY" "\"Mixed\""
run_fd "$H100" $COMPUTE "$WORK/machine" --sleep-interval soon
expect_error bad-interval 2 "--sleep-interval" "not a duration"
run_fd "$H100" $COMPUTE "$WORK/machine" --fail-on-init-error=maybe
expect_error bad-bool 2 "--fail-on-init-error" "not a boolean"
run_fd "$H100" $COMPUTE "$WORK/machine" --no-such-flag
expect_error unknown-flag 2 "unknown flag" "--no-such-flag"
run_fd "$H100" $COMPUTE "$WORK/machine" stray
expect_error stray-argument 2 "unexpected argument" "stray"
run_fd "$H100" $COMPUTE "$WORK/machine" --config-file "$CFG/gfd-flags.yaml" --output ""
# empty --output means stdout too (NVIDIA: an empty path is stdout); this one must succeed
if [ "$rc" -eq 0 ] && grep -q '^nvidia.com/mig.strategy=single$' "$WORK/out"; then pass; else
    fail_later "empty --output: exit $rc"; fi
# the file's outputFile (in /proc) when no flag overrides it: a write error naming the file
state=$(mktemp -d "$WORK/state.XXXXXX")
GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$H100 GPUOP_SIM_STATE=$state timeout 30 "$GPUOP" \
    feature-discovery --config-file "$CFG/gfd-flags.yaml" >"$WORK/out" 2>"$WORK/err"
rc=$?
expect_error unwritable-output 1 "output file" "/proc/gpuop-gfd-never-written"
# a machine type file that cannot be read (a directory)
run_fd "$H100" $COMPUTE "$WORK"
expect_error machine-file-dir 1 "machine type file" "$WORK"
# a malformed fleet: the simulator refuses to initialise, as a broken driver would
printf 'gpus: [\n' >"$WORK/bad-fleet.yaml"
state=$(mktemp -d "$WORK/state.XXXXXX")
GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$WORK/bad-fleet.yaml GPUOP_SIM_STATE=$state \
    timeout 30 "$GPUOP" feature-discovery --oneshot --output - >"$WORK/out" 2>"$WORK/err"
rc=$?
expect_error bad-fleet 1 "initialise NVML" "NVML"

# ---- NVML missing: the TestFailOnNVMLInitError matrix ---------------------------------------
# nvml_case <name> <want: ok|error> [flags]: NVML library missing.
nvml_case() {
    name=$1
    want=$2
    shift 2
    GPUOP_NVML_LIBRARY=$WORK/no-such-dir/libnvidia-ml.so.1 timeout 30 "$GPUOP" \
        feature-discovery --oneshot --output - "$@" >"$WORK/out" 2>"$WORK/err"
    rc=$?
    if [ "$want" = error ]; then
        expect_error "$name" 1 "$WORK/no-such-dir/libnvidia-ml.so.1" "NVML"
    elif [ "$rc" -ne 0 ]; then
        fail_later "$name: exit $rc, want 0"
        sed 's/^/    /' "$WORK/err"
    elif ! grep -qE '^nvidia.com/gfd.timestamp=[0-9]{10}$' "$WORK/out" ||
        [ "$(wc -l <"$WORK/out")" -ne 1 ]; then
        fail_later "$name: want only the timestamp label"
        sed 's/^/    /' "$WORK/out"
    else
        pass
    fi
}
nvml_case nvml-missing error
nvml_case nvml-missing-fail-true error --fail-on-init-error=true
nvml_case nvml-missing-bogus-strategy error --fail-on-init-error --mig-strategy bogus
nvml_case nvml-missing-no-fail ok --fail-on-init-error=false
nvml_case nvml-missing-no-fail-bogus ok --fail-on-init-error=false --mig-strategy bogus
GFD_FAIL_ON_INIT_ERROR=false nvml_case nvml-missing-no-fail-env ok
FAIL_ON_INIT_ERROR=false nvml_case nvml-missing-no-fail-fallback-env ok
FAIL_ON_INIT_ERROR=false GFD_FAIL_ON_INIT_ERROR=true nvml_case nvml-missing-gfd-env-wins error
FAIL_ON_INIT_ERROR=bogus GFD_FAIL_ON_INIT_ERROR=false nvml_case nvml-missing-fallback-unread ok
# (NVML working with a bogus strategy is the unknown-strategy case above, also with
# --fail-on-init-error=false:)
run_fd "$H100" $COMPUTE "$WORK/machine" --fail-on-init-error=false --mig-strategy bogus
expect_error nvml-ok-no-fail-bogus 1 "--mig-strategy" "bogus"

# ---- file output and the relabel loop --------------------------------------------------------
sysfs=$(mktemp -d "$WORK/sysfs.XXXXXX")
make_sysfs "$H100" $COMPUTE "$sysfs"
state=$(mktemp -d "$WORK/state.XXXXXX")
OUT=$WORK/features.d/gfd
GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$H100 GPUOP_SIM_STATE=$state GPUOP_SYSFS_ROOT=$sysfs \
    GFD_OUTPUT_FILE=$OUT GFD_ONESHOT=true timeout 30 "$GPUOP" feature-discovery \
    --machine-type-file "$WORK/machine" >"$WORK/out" 2>"$WORK/err"
rc=$?
if [ "$rc" -ne 0 ] || [ ! -f "$OUT" ]; then
    fail_later "oneshot to a file: exit $rc, file missing"
    sed 's/^/    /' "$WORK/err"
else
    grep -v '^nvidia.com/gfd.timestamp=' "$OUT" | sort >"$WORK/got"
    sort "$HERE/expected/dgx-h100.none.labels" >"$WORK/want"
    mode=$(stat -c %a "$OUT")
    if ! cmp -s "$WORK/want" "$WORK/got"; then
        fail_later "oneshot to a file: labels differ"
        diff -u "$WORK/want" "$WORK/got" | sed 's/^/    /'
    elif ! grep -qE '^nvidia.com/gfd.timestamp=[0-9]{10}$' "$OUT"; then
        fail_later "oneshot to a file: no timestamp label"
    elif [ "$mode" != 644 ] || [ -s "$WORK/out" ]; then
        fail_later "oneshot to a file: mode $mode, or labels also on stdout"
    elif ls "$WORK/features.d" | grep -q tmp; then
        fail_later "oneshot to a file: temp file left behind"
    else
        pass
    fi
fi

# a FIFO is written in place, not replaced (the same holds for /dev/null)
mkfifo "$WORK/fifo"
cat "$WORK/fifo" >"$WORK/fifo.out" &
reader=$!
GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$H100 GPUOP_SIM_STATE=$state timeout 30 "$GPUOP" \
    feature-discovery --oneshot --output "$WORK/fifo" 2>"$WORK/err"
rc=$?
wait $reader
if [ "$rc" -ne 0 ] || [ ! -p "$WORK/fifo" ] || ! grep -q '^nvidia.com/gpu.count=8$' "$WORK/fifo.out"; then
    fail_later "FIFO output: exit $rc"
    sed 's/^/    /' "$WORK/err"
else
    pass
fi

# loop: relabels every interval, SIGHUP reloads the config, SIGTERM exits 0 and removes the file
cp "$CFG/timeslicing-2.yaml" "$WORK/live.yaml"
OUT=$WORK/loop/gfd
GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$H100 GPUOP_SIM_STATE=$state GPUOP_SYSFS_ROOT=$sysfs \
    "$GPUOP" feature-discovery --sleep-interval 200ms --output "$OUT" --no-timestamp \
    --config-file "$WORK/live.yaml" 2>"$WORK/loop.err" &
pid=$!
# loop_waits WHAT COMMAND...: polls COMMAND for 10 s: a pass, else a failure naming WHAT
loop_waits() {
    local what=$1
    shift
    if poll 10 "$@"; then pass; else fail_later "loop: timed out waiting for $what"; return 1; fi
}
if loop_waits "the first labels" grep -q '^nvidia.com/gpu.replicas=2$' "$OUT"; then
    m1=$(stat -c %Y.%y "$OUT")
    loop_waits "a relabel" sh -c "[ \"\$(stat -c %Y.%y '$OUT')\" != '$m1' ]"
    cp "$CFG/timeslicing-4.yaml" "$WORK/live.yaml"
    kill -HUP $pid
    loop_waits "the reloaded config" grep -q '^nvidia.com/gpu.replicas=4$' "$OUT"
    # a broken config on reload: the last good one stays
    cp "$CFG/bad-replicas.yaml" "$WORK/live.yaml"
    kill -HUP $pid
    loop_waits "the reload error" grep -q 'keeping the last good config' "$WORK/loop.err"
    sleep 0.3
    if grep -q '^nvidia.com/gpu.replicas=4$' "$OUT"; then pass; else
        fail_later "loop: labels changed after a bad reload"; fi
fi
kill -TERM $pid 2>/dev/null
if ! poll 10 ended $pid; then
    fail_later "loop: still running 10 s after SIGTERM"
    kill -KILL $pid
fi
wait $pid
rc=$?
if [ "$rc" -ne 0 ]; then
    fail_later "loop: exit $rc after SIGTERM"
    sed 's/^/    /' "$WORK/loop.err"
elif [ -e "$OUT" ]; then
    fail_later "loop: the output file was not removed on exit"
else
    pass
fi

# --help documents every flag and its environment variable
"$GPUOP" feature-discovery --help >"$WORK/help" 2>&1 || fail_later "--help: exit $?"
for w in --oneshot GFD_ONESHOT --no-timestamp GFD_NO_TIMESTAMP --sleep-interval \
    GFD_SLEEP_INTERVAL --output GFD_OUTPUT_FILE --mig-strategy GFD_MIG_STRATEGY --config-file \
    GFD_CONFIG_FILE --machine-type-file GFD_MACHINE_TYPE_FILE --fail-on-init-error \
    GFD_FAIL_ON_INIT_ERROR GPUOP_NVML_LIBRARY; do
    grep -qF -- "$w" "$WORK/help" || fail_later "--help does not mention $w"
done
pass

echo "$passes passed, $FAILURES failed"
