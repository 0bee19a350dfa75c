#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuop mig-manager` against kubesim, on the simulated DGX H100 (sim/nvml), as the MIG manager
# DaemonSet's ServiceAccount under the RBAC deploy/operands/mig-manager.yaml ships:
#  - nvidia.com/mig.config=all-1g.10gb ends in mig.config.state=success, the GPUs laid out so
#    (gpuop mig-parted assert), the CDI spec written again before the operands are back (false
#    kept), an Event;
#  - a GPU pod under a PodDisruptionBudget that forbids its eviction: state stays pending with the
#    budget's reason, the GPUs untouched, until the budget allows; then success and the Event
#    names the evicted pod;
#  - an unknown config name, a profile the GPUs lack, a malformed config file: failed with the
#    reason (annotation and Event), the old layout kept, the operands restored;
#  - a fault injected into the simulated driver midway: failed, the old layout back;
#  - a MIG mode change the driver can only finish with a GPU reset: state rebooting with the
#    reason, operands restored, the change kept; after the reset, the layout and success;
#  - killed (SIGKILL) after each step of the protocol and run again: the node ends with the
#    requested layout, state success, no operand left paused.
# $1: "protocol" (the change, the budget, the refusals) or "kill" (the kills), one meson test each.
set -euo pipefail
PART=${1:?protocol or kill}
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim" "$B/libnvidia-ml.so.1"

N=dgx-h100-1
export GPUOP_NVML_LIBRARY=$B/libnvidia-ml.so.1 GPUOP_SIM_FLEET=$S/sim/fleets/dgx-h100.yaml
export GPUOP_SIM_STATE=$T/state
mkdir -p "$GPUOP_SIM_STATE"
CFG=$T/config.yaml
awk '/^  config.yaml: \|/ {on = 1; next} on { sub(/^    /, ""); print }' \
    "$S/tests/migparted/default-mig-parted-config.yaml" >"$CFG"

start_kubesim --load "$S/sim/clusters/demo.yaml" --pod-ready-delay 200ms
$K create namespace gpu-operator >/dev/null 2>&1 || true
LABELS=(nvidia.com/gpu.deploy.device-plugin=true nvidia.com/gpu.deploy.dcgm=false
        nvidia.com/gpu.deploy.gpu-feature-discovery=true nvidia.com/gpu.deploy.dcgm-exporter=true
        nvidia.com/gpu.deploy.mig-manager=true)
$K label node $N "${LABELS[@]}" >/dev/null
$K apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: fake-device-plugin, namespace: gpu-operator}
spec:
  selector: {matchLabels: {app: fake-device-plugin}}
  template:
    metadata: {labels: {app: fake-device-plugin}}
    spec:
      nodeSelector: {nvidia.com/gpu.deploy.device-plugin: "true"}
      containers: [{name: c, image: busybox}]
YAML
awk 'BEGIN{RS="\n---\n"; ORS="\n---\n"} !/kind: DaemonSet/' "$S/deploy/operands/mig-manager.yaml" |
    sed 's/\${NAMESPACE}/gpu-operator/g' | $K apply -f - >/dev/null
sa_kubeconfig "$T/mm.kubeconfig" gpu-operator nvidia-mig-manager

# The host root: a fake driver root at / (the fleet's driver version) and a CDI spec the toolkit
# would have written, which the MIG manager writes again after each change.
HOST=$T/host
sh "$S/tests/toolkit/fake-driver-root.sh" "$HOST" 570.86.15
mkdir -p "$HOST/var/run/cdi"
echo "# the toolkit's spec, before any change" >"$HOST/var/run/cdi/nvidia.yaml"
MM_ENV=(NODE_NAME=$N KUBECONFIG="$T/mm.kubeconfig" POD_NAMESPACE=gpu-operator CONFIG_FILE="$CFG"
        MIG_MANAGER_INTERVAL=300ms OPERAND_WAIT_TIMEOUT=20s HOST_ROOT="$HOST")
mm_start() { # LOG: the MIG manager in the background; sets MM
    env "${MM_ENV[@]}" "$B/gpuop" mig-manager >>"$1" 2>&1 &
    MM=$!
    pids+=($MM)
}
mm_stop() { kill "$MM" 2>/dev/null || true; wait "$MM" 2>/dev/null || true; }
# (a missing key prints nothing)
label() { $K get node $N -o go-template="{{with index .metadata.labels \"$1\"}}{{.}}{{end}}"; }
ann() { $K get node $N -o go-template="{{with index .metadata.annotations \"$1\"}}{{.}}{{end}}"; }
state_is() { [ "$(label nvidia.com/mig.config.state)" = "$1" ]; }
cp "$CFG" "$T/good.yaml"
layout_is() { "$B/gpuop" mig-parted assert -f "$T/good.yaml" -c "$1" 2>/dev/null; }
labels_restored() {
    for kv in "${LABELS[@]}"; do
        [ "$(label "${kv%%=*}")" = "${kv#*=}" ] || { echo "label ${kv%%=*}=$(label "${kv%%=*}")"; return 1; }
    done
}
events() { $K get events -n gpu-operator -o json; }
ds_pod_on_node() { [ -n "$($K get pods -n gpu-operator -l app=fake-device-plugin --field-selector spec.nodeName=$N -o name)" ]; }
configure() { $K label node $N --overwrite "nvidia.com/mig.config=$1" >/dev/null; }

# Bad input: one line naming it, exit 2.
rc=0; env -u NODE_NAME "$B/gpuop" mig-manager >"$T/bad.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q 'no node name' "$T/bad.log" || fail "no node name: exit $rc: $(cat "$T/bad.log")"

if [ "$PART" = protocol ]; then
# ---- a change -----------------------------------------------------------------------------------
wait_for 10 "the operand runs" ds_pod_on_node
LOG=$T/mm.log
mm_start "$LOG"
configure all-1g.10gb
wait_for 20 "state success" state_is success
layout_is all-1g.10gb || fail "the GPUs are not laid out as all-1g.10gb"
grep -q 'operands paused labels={"nvidia.com/gpu.deploy.dcgm-exporter":"paused-for-mig-change","nvidia.com/gpu.deploy.device-plugin":"paused-for-mig-change","nvidia.com/gpu.deploy.gpu-feature-discovery":"paused-for-mig-change"}' "$LOG" ||
    fail "the operands were not paused as expected: $(grep 'operands paused' "$LOG")"
grep -q 'paused operands gone' "$LOG" || fail "no wait for the operands' pods"
labels_restored || fail "labels not restored"
[ "$(ann gpuop.dev/mig-manager.applied)" = all-1g.10gb ] || fail "applied annotation"
[ -z "$(ann gpuop.dev/mig-manager.progress)" ] || fail "progress annotation left"
events | grep -q 'MIG layout changed from (none) to all-1g.10gb; pods evicted: none' ||
    fail "no MIGConfigApplied Event"
# the CDI spec written again before the operands came back: every MIG device by UUID
grep -q "CDI spec regenerated path=/var/run/cdi/nvidia.yaml" "$LOG" || fail "the CDI spec was not regenerated"
n=$(grep -c -- '- name: MIG-' "$HOST/var/run/cdi/nvidia.yaml")
[ "$n" = 56 ] || fail "the regenerated CDI spec has $n MIG devices, not 56"
cdi_line=$(grep -n "CDI spec regenerated" "$LOG" | head -n1 | cut -d: -f1)
fin_line=$(grep -n "MIG config applied" "$LOG" | head -n1 | cut -d: -f1)
[ "$cdi_line" -lt "$fin_line" ] || fail "the CDI spec was written after the operands were restored"
wait_for 10 "the operand comes back" ds_pod_on_node
echo "ok a change: all-1g.10gb, the CDI spec regenerated with $n MIG devices (${SECONDS}s)"

# ---- a disruption budget holds the change ---------------------------------------------------------
$K apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: default, labels: {app: train}}
spec:
  nodeName: $N
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: nvcr.io/nvidia/cuda:12.4.1-base, resources: {limits: {nvidia.com/gpu: "1"}}}
YAML
train_runs() { [ "$($K get pod train -o jsonpath='{.status.phase}')" = Running ]; }
wait_for 20 "the GPU pod runs" train_runs
$K apply -f - >/dev/null <<YAML
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: train, namespace: default}
spec: {minAvailable: 1, selector: {matchLabels: {app: train}}}
YAML
budget_computed() { [ "$($K get pdb train -o jsonpath='{.status.currentHealthy}')" = 1 ]; }
wait_for 10 "the budget is computed" budget_computed
configure all-balanced
reason_blocked() { ann gpuop.dev/mig-manager.reason | grep -q "waiting for an eviction: pod default/train: .*disruption budget"; }
wait_for 20 "pending with the budget's reason" reason_blocked
state_is pending || fail "state $(label nvidia.com/mig.config.state) while the budget blocks"
sleep 2
state_is pending || fail "state left pending while the budget blocks"
layout_is all-1g.10gb || fail "the GPUs changed while the budget forbids the eviction"
[ "$(label nvidia.com/gpu.deploy.device-plugin)" = paused-for-mig-change ] || fail "operands not paused while waiting"
events | grep -q '"reason": "MIGEvictionBlocked"' || fail "no MIGEvictionBlocked Event"
$K patch pdb train --type=merge -p '{"spec":{"minAvailable":0}}' >/dev/null
wait_for 30 "state success after the budget allows" state_is success
layout_is all-balanced || fail "the GPUs are not laid out as all-balanced"
labels_restored || fail "labels not restored"
[ -z "$(ann gpuop.dev/mig-manager.reason)" ] || fail "reason left: $(ann gpuop.dev/mig-manager.reason)"
events | grep -q 'MIG layout changed from all-1g.10gb to all-balanced; pods evicted: default/train' ||
    fail "the Event does not name the evicted pod"
$K delete pdb train >/dev/null
echo "ok a disruption budget: pending with the reason, then all-balanced (${SECONDS}s)"

# ---- refusals: failed with the reason, nothing changed -------------------------------------------
refused() { # CONFIG REASON-REGEX
    configure "$1"
    failed_for() { [ "$(ann gpuop.dev/mig-manager.failed)" = "$1" ] && state_is failed; }
    wait_for 20 "state failed for $1" failed_for "$1"
    ann gpuop.dev/mig-manager.reason | grep -Eq "$2" || fail "$1: reason $(ann gpuop.dev/mig-manager.reason)"
    layout_is all-balanced || fail "$1: the layout changed"
    labels_restored || fail "$1: labels not restored"
    events | grep -q "nvidia.com/mig.config=$1 .*: " || fail "$1: no MIGConfigFailed Event"
}
refused no-such-config 'no config named "no-such-config"'
refused all-1g.5gb 'has no MIG profile "1g.5gb"'
printf 'version: v1\nmig-configs:\n  broken:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {"1g.10gb": 1}\n      bogus: 1\n' >"$CFG"
refused broken 'config.yaml: mig-configs.broken\[0\].*bogus'
cp "$T/good.yaml" "$CFG"
# a fault in the driver midway: the apply fails, every GPU back to all-balanced
"$B/gpuop-sim" inject mig-fail --gpu 5 --after 0
refused all-7g.80gb 'GPU 5.*nvmlDeviceCreateGpuInstance'
grep -q "apply failed; restoring the previous layout" "$LOG" || fail "no rollback"
events | grep -q 'the previous layout is back' || fail "no Event naming the rollback"
echo "ok refusals: unknown name, missing profile, malformed file, fault midway (${SECONDS}s)"

# ---- a MIG mode change that needs a GPU reset: rebooting, finished after the reset ---------------
configure all-disabled
wait_for 30 "state success for all-disabled" state_is success
"$B/gpuop-sim" inject mig-reset-required --gpu 3
"$B/gpuop-sim" inject mig-reset-required --gpu 6
configure all-1g.10gb
wait_for 30 "state rebooting" state_is rebooting
reason=$(ann gpuop.dev/mig-manager.reason)
grep -q 'the MIG mode of GPU 3 (MIG enabled), GPU 6 (MIG enabled) waits for a GPU reset' <<<"$reason" ||
    fail "the rebooting reason: $reason"
[ "$(ann gpuop.dev/mig-manager.progress)" = all-1g.10gb ] || fail "the change is not kept in progress"
labels_restored || fail "operands left paused while rebooting"
show=$("$B/gpuop-sim" show)
grep -q "MIG mode change pending: enabled after a GPU reset" <<<"$show" || fail "no pending mode: $show"
layout_is all-1g.10gb && fail "all-1g.10gb laid out before the reset"
layout_is all-disabled && fail "no GPU's mode was set before the reset"
sleep 1 # polls while rebooting change nothing and record no second Event
state_is rebooting || fail "state left rebooting before the reset"
n=$(events | grep -c '"reason": "MIGRebootRequired"')
[ "$n" = 1 ] || fail "$n MIGRebootRequired Events"
echo "ok a mode change needing a reset: state rebooting, reason \"$reason\""
"$B/gpuop-sim" gpu-reset --gpu 3
"$B/gpuop-sim" gpu-reset --gpu 6
wait_for 30 "state success after the reset" state_is success
layout_is all-1g.10gb || fail "the GPUs are not laid out as all-1g.10gb after the reset"
labels_restored || fail "labels not restored after the reset"
[ -z "$(ann gpuop.dev/mig-manager.progress)" ] || fail "progress annotation left after the reset"
events | grep -q 'MIG layout changed from all-disabled to all-1g.10gb' || fail "no Event after the reset"
mm_stop
echo "ok after the GPU reset: all-1g.10gb, state success (${SECONDS}s)"
exit 0
fi

# ---- killed after each step, run again: it converges ---------------------------------------------
want=all-balanced
for step in pending pause operands evict apply finish; do
    [ $want = all-balanced ] && want=all-1g.10gb || want=all-balanced
    configure $want
    LOG=$T/kill-$step.log
    rc=0
    env "${MM_ENV[@]}" GPUOP_MIG_MANAGER_KILL_AFTER=$step timeout 30 "$B/gpuop" mig-manager >"$LOG" 2>&1 || rc=$?
    [ $rc = 137 ] || fail "the run killed after $step exited $rc"
    grep -q "killed after step (test hook) step=$step" "$LOG" || fail "no kill after $step"
    mm_start "$LOG"
    wait_for 20 "convergence after a kill after $step" state_is success
    layout_is $want || fail "$step: the GPUs are not laid out as $want"
    labels_restored || fail "$step: labels left paused"
    [ -z "$(ann gpuop.dev/mig-manager.progress)" ] || fail "$step: progress annotation left"
    mm_stop
    echo "  converged after a kill after $step (${SECONDS}s)"
done
echo "ok killed after each step: converged (${SECONDS}s)"
