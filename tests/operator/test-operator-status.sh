#!/usr/bin/env bash
# Status that tells the truth, end to end against kubesim: deleting the operand namespace makes
# every write fail; within a reconcile the ClusterPolicy turns notReady with an Error condition
# naming the objects and the reason (and the operator records a ReconcileFailed Event, logged
# when the namespace for it is gone too); once the namespace is back it turns ready again, with
# every operand recreated.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim"
POLICY=$S/tests/operator/fixtures/clusterpolicy-full.yaml

start_kubesim --load "$S/sim/clusters/demo.yaml" --pod-ready-delay 200ms
$K apply -f "$S/deploy/crds/" >/dev/null

P=$(free_port)
"$B/gpuop" operator --kubeconfig "$KUBECONFIG" --namespace gpu-operator --operand-image gpuop:test \
    --metrics-listen "127.0.0.1:$P" --leader-elect false >"$T/operator.log" 2>&1 &
pids+=($!)
wait_for 20 "operator ready" curl -sf "127.0.0.1:$P/readyz"
$K apply -f "$POLICY" >/dev/null
state() { $K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.state}'; }
cond() { # TYPE FIELD
    $K get clusterpolicy gpu-cluster-policy -o jsonpath="{.status.conditions[?(@.type==\"$1\")].$2}"
}
wait_for 30 "ClusterPolicy ready" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.state}')\" = ready ]"
[ "$(cond Error status)" = False ] || fail "Error condition is $(cond Error status) on a ready policy"
[ "$(cond Error reason)" = Ready ] || fail "Error condition's reason is $(cond Error reason), want NVIDIA's Ready"
[ "$($K -n gpu-operator get ds nvidia-device-plugin-daemonset -o jsonpath='{.spec.updateStrategy.rollingUpdate.maxUnavailable}')" = 1 ] ||
    fail "maxUnavailable is not the integer 1"

# The operand namespace goes: every write fails, and the status says so.
$K delete namespace gpu-operator --wait=false >/dev/null
wait_for 30 "ClusterPolicy notReady" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.state}')\" = notReady ]"
wait_for 10 "Error condition True" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"Error\")].status}')\" = True ]"
msg=$(cond Error message)
echo "Error condition: $msg"
case "$msg" in
*"object(s) not written"*gpu-operator/*) ;;
*) fail "the Error condition does not name the objects: $msg" ;;
esac
case "$msg" in
*"not found"* | *"being terminated"* | *forbidden*) ;;
*) fail "the Error condition does not give the reason: $msg" ;;
esac
[ "$(cond Error reason)" = ReconcileFailed ] || fail "Error reason $(cond Error reason)"
[ "$(cond Ready status)" = False ] || fail "Ready is still True"
metrics_has "$P" '^gpu_operator_reconciliation_status -1' || fail "status metric is not -1"
wait_for 10 "ReconcileFailed event (or its log line)" grep -q 'reason=ReconcileFailed' "$T/operator.log"

# It comes back: the operands are recreated and the policy is ready again.
wait_for 30 "namespace gone" sh -c "! $K get namespace gpu-operator"
$K create namespace gpu-operator >/dev/null
wait_for 30 "ClusterPolicy ready again" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.state}')\" = ready ]"
[ "$(cond Error status)" = False ] || fail "Error condition still $(cond Error status) after recovery"
$K -n gpu-operator get ds nvidia-driver-daemonset >/dev/null || fail "driver DaemonSet not recreated"
wait_for 10 "Ready event" sh -c "$K get events -n gpu-operator -o jsonpath='{range .items[*]}{.reason}{\"\\n\"}{end}' | grep -qx Ready"
echo "ok: status follows failed writes and recovers"
