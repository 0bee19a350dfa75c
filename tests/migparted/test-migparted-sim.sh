#!/usr/bin/env bash
# `gpuop mig-parted` against the simulated driver: on each MIG-capable sample fleet, every config
# of NVIDIA's default ConfigMap that is written for the fleet's GPUs is applied, asserted and
# exported, and the export asserts against the GPUs again (round trip); the others are refused
# with exit 2 and nothing changes. A failure injected midway (the simulated driver's mig-fail
# fault) leaves every GPU as it was, also across a MIG mode change, and so does a mode change the
# driver leaves pending until a GPU reset (mig-reset-required). Bad input exits 2.
# $1: build/gpuop  $2: build/libnvidia-ml.so.1
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
gpuop=$1
export GPUOP_NVML_LIBRARY=$2
src=$S
tmp=$T

# The ConfigMap's config.yaml key, as the MIG manager's volume would hold it.
awk '/^  config.yaml: \|/ {on = 1; next} on { sub(/^    /, ""); print }' \
    "$src/tests/migparted/default-mig-parted-config.yaml" >"$tmp/config.yaml"
configs=$(grep -E '^  [a-z0-9][^ ]*:$' "$tmp/config.yaml" | tr -d ' :')
[ "$(echo "$configs" | wc -l)" -ge 80 ] || fail "the default config has too few configs: $configs"

mp() { "$gpuop" mig-parted "$@"; }

# fleet_round FLEET: every config on FLEET, in a subshell of its own (the fleets run side by side,
# each on a simulated driver state of its own); exits 1 with the reason on a failure
fleet_round() {
    local fleet=$1 err=$tmp/err-$1 exp=$tmp/export-$1.yaml c gen rc applied
    export GPUOP_SIM_FLEET="$src/sim/fleets/$fleet.yaml" GPUOP_SIM_STATE="$tmp/state-$fleet"
    mkdir -p "$GPUOP_SIM_STATE"
    "$gpuop-sim" reset >/dev/null || fail "$fleet: sim reset"
    applied=0
    # The simulated driver counts its state's writes: a refused config must write nothing.
    generation() { sed -n 's/^ "generation": \([0-9]*\),$/\1/p' "$GPUOP_SIM_STATE/state.json"; }
    for c in $configs; do
        gen=$(generation)
        mp apply -f "$tmp/config.yaml" -c "$c" 2>"$err"
        rc=$?
        if [ $rc = 2 ]; then
            grep -Eq "has no MIG profile|selects none" "$err" ||
                fail "$fleet: $c refused without the reason: $(cat "$err")"
            [ "$(generation)" = "$gen" ] || fail "$fleet: refused $c changed the GPUs"
            continue
        fi
        [ $rc = 0 ] || fail "$fleet: apply $c exit $rc: $(cat "$err")"
        applied=$((applied + 1))
        mp assert -f "$tmp/config.yaml" -c "$c" 2>"$err" ||
            fail "$fleet: assert $c after apply: $(cat "$err")"
        mp export >"$exp" 2>"$err" || fail "$fleet: export $c: $(cat "$err")"
        mp assert -f "$exp" -c current 2>"$err" ||
            fail "$fleet: the export of $c does not assert: $(cat "$err")
$(cat "$exp")"
        # the export applied is a no-op
        gen=$(generation)
        mp apply -f "$exp" -c current 2>"$err" || fail "$fleet: apply export: $(cat "$err")"
        grep -q "gpus_changed=0" "$err" || fail "$fleet: applying the export of $c changed GPUs"
        [ "$(generation)" = "$gen" ] || fail "$fleet: applying the export of $c wrote the GPUs"
    done
    # 10 configs are written for each of these models (all-disabled, all-enabled, all-balanced and
    # one per profile); the A100 fleet's GPUs 6-7 are left alone by none of them.
    [ $applied = 10 ] || fail "$fleet: $applied configs applied, expected 10"
    echo "ok $fleet: $applied configs applied, asserted and exported"
}
rounds=()
for fleet in dgx-h100 hgx-h200 dgx-a100-80gb-mig; do
    (fleet_round $fleet) >"$tmp/round-$fleet.out" 2>&1 &
    rounds+=($!)
    pids+=($!)
done
i=0
for fleet in dgx-h100 hgx-h200 dgx-a100-80gb-mig; do
    rc=0
    wait "${rounds[i]}" || rc=$?
    cat "$tmp/round-$fleet.out"
    [ $rc = 0 ] || fail "$fleet: its round failed"
    i=$((i + 1))
done

# A fault midway: GPUs 0-2 are changed before GPU 3's second instance fails; every GPU goes back.
export GPUOP_SIM_FLEET="$src/sim/fleets/dgx-h100.yaml" GPUOP_SIM_STATE="$tmp/state-fault"
mkdir -p "$GPUOP_SIM_STATE"
mp apply -f "$tmp/config.yaml" -c all-1g.10gb 2>"$tmp/err" || fail "apply all-1g.10gb: $(cat "$tmp/err")"
mp export >"$tmp/before.yaml" || fail "export"
"$gpuop-sim" inject mig-fail --gpu 3 --after 1 || fail "inject"
mp apply -f "$tmp/config.yaml" -c all-balanced 2>"$tmp/err" && fail "apply with a fault succeeded"
grep -q "config all-balanced: GPU 3" "$tmp/err" || fail "the failure does not name the GPU: $(cat "$tmp/err")"
grep -q "restoring the previous layout" "$tmp/err" || fail "no rollback logged: $(cat "$tmp/err")"
mp assert -f "$tmp/config.yaml" -c all-1g.10gb 2>"$tmp/err" || fail "after the rollback: $(cat "$tmp/err")"
mp export >"$tmp/after.yaml" || fail "export"
cmp "$tmp/before.yaml" "$tmp/after.yaml" || fail "the layout changed across a failed apply"
# the fault is spent: the same apply now goes through
mp apply -f "$tmp/config.yaml" -c all-balanced 2>"$tmp/err" || fail "apply after the fault: $(cat "$tmp/err")"
mp assert -f "$tmp/config.yaml" -c all-balanced || fail "assert all-balanced"
echo "ok fault midway: rolled back to all-1g.10gb"

# ... and across a mode change: MIG disabled before, a failure on the last GPU: all disabled again.
mp apply -f "$tmp/config.yaml" -c all-disabled 2>"$tmp/err" || fail "apply all-disabled: $(cat "$tmp/err")"
"$gpuop-sim" inject mig-fail --gpu 7 --after 3 || fail "inject"
mp apply -f "$tmp/config.yaml" -c all-balanced 2>"$tmp/err" && fail "apply with a fault succeeded"
mp assert -f "$tmp/config.yaml" -c all-disabled 2>"$tmp/err" || fail "MIG left enabled: $(cat "$tmp/err")"
echo "ok fault across a mode change: all GPUs disabled again"

# A mode change the driver leaves pending until a GPU reset (gpuop does not reset GPUs): exit 1
# naming the GPU, every GPU back, the pending change cancelled.
GPUOP_SIM_STATE="$tmp/state-reset" # a state of its own: the knob stays
mkdir -p "$GPUOP_SIM_STATE"
mp apply -f "$tmp/config.yaml" -c all-disabled 2>"$tmp/err" || fail "apply all-disabled: $(cat "$tmp/err")"
"$gpuop-sim" inject mig-reset-required --gpu 6 || fail "inject mig-reset-required"
mp apply -f "$tmp/config.yaml" -c all-1g.10gb 2>"$tmp/err"
[ $? = 1 ] || fail "apply with a mode change pending: exit not 1"
grep -q "GPU 6: MIG mode enabled is pending until the GPU is reset" "$tmp/err" ||
    fail "the pending mode is not named: $(cat "$tmp/err")"
mp assert -f "$tmp/config.yaml" -c all-disabled 2>"$tmp/err" || fail "not rolled back: $(cat "$tmp/err")"
"$gpuop-sim" show | grep -q "MIG mode change pending" && fail "the rollback left the change pending"
"$gpuop-sim" show | grep -q "MIG mode changes wait for a GPU reset" || fail "sim show: no reset knob"
"$gpuop-sim" gpu-reset --gpu 6 || fail "sim gpu-reset"
"$gpuop-sim" gpu-reset 2>/dev/null; [ $? = 2 ] || fail "gpu-reset without --gpu: exit not 2"
"$gpuop-sim" gpu-reset --gpu 99 2>/dev/null; [ $? = 2 ] || fail "gpu-reset --gpu 99: exit not 2"
"$gpuop-sim" inject gpu-reset --gpu 6 2>/dev/null; [ $? = 2 ] || fail "inject gpu-reset: exit not 2"
"$gpuop-sim" inject mig-reset-required 2>/dev/null; [ $? = 2 ] || fail "inject without --gpu: exit not 2"
echo "ok a mode change pending until a reset: exit 1 naming GPU 6, rolled back"
GPUOP_SIM_STATE="$tmp/state-fault"

# assert says what differs, with exit 1
mp assert -f "$tmp/config.yaml" -c all-7g.80gb 2>"$tmp/err"
[ $? = 1 ] || fail "assert of another layout: exit not 1"
grep -q "GPU 0: MIG mode is disabled, wanted enabled" "$tmp/err" || fail "assert: $(cat "$tmp/err")"
mp assert -f "$tmp/config.yaml" -c all-7g.80gb --mode-only 2>/dev/null && fail "mode-only assert"
mp apply -f "$tmp/config.yaml" -c all-enabled --mode-only 2>/dev/null || fail "mode-only apply"
mp assert -f "$tmp/config.yaml" -c all-7g.80gb --mode-only || fail "mode-only assert after"

# bad input: exit 2, one line naming the file and the reason, nothing changed
mp export >"$tmp/before.yaml"
printf 'version: v1\nmig-configs:\n  x:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {"1g.10gb": 1}\n      extra: 1\n' >"$tmp/bad.yaml"
mp apply -f "$tmp/bad.yaml" -c x 2>"$tmp/err"
[ $? = 2 ] || fail "a bad config: exit not 2"
grep -q 'bad.yaml: mig-configs.x\[0\]' "$tmp/err" || fail "bad config message: $(cat "$tmp/err")"
grep -q 'extra' "$tmp/err" || fail "bad config message: $(cat "$tmp/err")"
mp apply -f "$tmp/config.yaml" -c no-such-config 2>"$tmp/err"
[ $? = 2 ] || fail "unknown config: exit not 2"
grep -q 'no config named "no-such-config"' "$tmp/err" || fail "unknown config: $(cat "$tmp/err")"
mp apply -f "$tmp/nonexistent.yaml" -c x 2>/dev/null
[ $? = 2 ] || fail "missing file: exit not 2"
mp apply -c x 2>/dev/null
[ $? = 2 ] || fail "no -f: exit not 2"
mp frobnicate 2>/dev/null
[ $? = 2 ] || fail "unknown command: exit not 2"
mp export >"$tmp/after.yaml"
cmp -s "$tmp/before.yaml" "$tmp/after.yaml" || fail "bad input changed the GPUs"
echo "ok bad input"
