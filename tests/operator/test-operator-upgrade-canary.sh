#!/usr/bin/env bash
# A canary that fails halts its pool, against kubesim (the operator under its shipped RBAC):
# two DriverUpgradePools; the research pool's first node is its canary (soak 60 s). After a
# driver version change the canary and the serving pool's node upgrade; the canary's new driver
# restarts during the soak (its pod status says so, as a crash-looping driver's would), so the
# research pool halts (status.halted names the node and the reason, condition RolloutHalted,
# an Event) and its other node never starts, while the serving pool finishes; resuming the
# rollout for the revision lets the held node go through.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim"

operator_cluster 200ms
"$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator --operand-image gpuop:test \
    --metrics-listen "" --leader-elect false >"$T/operator.log" 2>&1 &
pids+=($!)

state() { $K get node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}'; }
is_state() { [ "$(state "$1")" = "$2" ]; }
$K label node a100-mig-1 dgx-h100-2 gpuop.test/pool=research >/dev/null
$K label node dgx-h100-1 gpuop.test/pool=serving >/dev/null
cat <<'EOF2' | $K apply -f - >/dev/null
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: research}
spec:
  nodeSelector: {gpuop.test/pool: research}
  canary: {nodes: 1, soakSeconds: 60}
---
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: serving}
spec:
  nodeSelector: {gpuop.test/pool: serving}
EOF2
sed -e 's/maxParallelUpgrades: 1/maxParallelUpgrades: 0\n      maxUnavailable: 2/' \
    "$S/tests/operator/fixtures/clusterpolicy-full.yaml" | $K apply -f - >/dev/null
for n in a100-mig-1 dgx-h100-1 dgx-h100-2; do
    wait_for 30 "$n upgrade-done before any change" is_state "$n" upgrade-done
done
$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"driver":{"version":"595.100.01"}}}' >/dev/null
# upgraded: upgrade-done with the new driver's pod (upgrade-done alone is also the state from
# before the change, until the operator has seen it)
upgraded() {
    is_state "$1" upgrade-done &&
        $K -n gpu-operator get pods -l app=nvidia-driver-daemonset --field-selector "spec.nodeName=$1" \
            -o jsonpath='{.items[*].spec.containers[*].image}' | grep -q 595.100.01
}
wait_for 20 "canary a100-mig-1 upgraded" upgraded a100-mig-1
wait_for 20 "serving node upgraded" upgraded dgx-h100-1
sleep 1
is_state dgx-h100-2 upgrade-required || fail "dgx-h100-2 started before its pool's canary soaked: $(state dgx-h100-2)"
$K get node dgx-h100-2 -o jsonpath='{.metadata.annotations.upgrade\.gpuop\.dev/waiting}' | grep -q canary ||
    fail "dgx-h100-2 does not say it waits for the canary"

# The canary's new driver restarts while it soaks.
pod=$($K -n gpu-operator get pods -l app=nvidia-driver-daemonset --field-selector spec.nodeName=a100-mig-1 -o jsonpath='{.items[0].metadata.name}')
$K -n gpu-operator get pod "$pod" -o json | /usr/bin/python3 -c '
import json, sys
p = json.load(sys.stdin)
for c in p["status"]["containerStatuses"]:
    if c["name"] == "nvidia-driver-ctr":
        c["restartCount"] = 1
print(json.dumps({"status": {"containerStatuses": p["status"]["containerStatuses"]}}))' >"$T/patch.json"
$K -n gpu-operator patch pod "$pod" --subresource=status --type merge --patch-file "$T/patch.json" >/dev/null
halted() { $K get driverupgradepool research -o jsonpath='{.status.halted}'; }
wait_for 15 "research pool halted" sh -c "$K get driverupgradepool research -o jsonpath='{.status.halted}' | grep -q a100-mig-1"
halted | grep -q 'restarted 1 times during the soak' || fail "halt reason: $(halted)"
[ "$($K get driverupgradepool research -o jsonpath='{.status.conditions[?(@.type=="RolloutHalted")].status}')" = True ] ||
    fail "no RolloutHalted condition"
# the Event follows the pool's status write: wait for it
canary_event() {
    local ev
    ev=$($K get events -A --field-selector reason=GPUDriverUpgrade -o jsonpath='{range .items[*]}{.message}{"\n"}{end}')
    grep -q 'canary for revision .* failed: driver pod restarted' <<<"$ev"
}
wait_for 10 "an Event for the failed canary" canary_event
cp_halted() { [ "$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type=="DriverUpgrade")].reason}')" = RolloutHalted ]; }
wait_for 10 "the ClusterPolicy's DriverUpgrade condition saying RolloutHalted" cp_halted
sleep 1
is_state dgx-h100-2 upgrade-required || fail "halted pool started dgx-h100-2: $(state dgx-h100-2)"
[ "$($K get driverupgradepool serving -o jsonpath='{.status.phase}')" = Done ] || fail "serving pool did not finish"

# Resume the rollout for this revision: the held node goes through.
rev=$($K get driverupgradepool research -o jsonpath='{.status.targetRevision}')
$K annotate driverupgradepool research "upgrade.gpuop.dev/resumed-revision=$rev" >/dev/null
wait_for 20 "dgx-h100-2 upgraded after the resume" is_state dgx-h100-2 upgrade-done
[ "$($K get driverupgradepool research -o jsonpath='{.status.conditions[?(@.type=="RolloutHalted")].status}')" = False ] ||
    fail "RolloutHalted still True after the resume"
echo "PASS"
