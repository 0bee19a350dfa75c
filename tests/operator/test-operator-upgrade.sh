#!/usr/bin/env bash
# The driver upgrade as a drain plan, against kubesim with its simulated readiness (the operator
# under its shipped RBAC, driven and inspected with kubectl):
#  - a driver version change in the ClusterPolicy rolls through every driver node in NVIDIA's
#    states (labels, GPUDriverUpgrade Events), each driver pod replaced by one of the new
#    revision, every node uncordoned at the end;
#  - never more than maxUnavailable (1) nodes cordoned at once (sampled through the whole run);
#  - a GPU pod under a PodDisruptionBudget that allows no disruption holds its node in
#    pod-deletion-required until the budget allows it;
#  - a pool with manual approval (DriverUpgradePool) does not move until approved;
#  - the operator killed (SIGKILL) mid-rollout and restarted resumes from the labels;
#  - a pod deletion that never completes ends in upgrade-failed after its timeout, naming the
#    budget, holds the one unavailable slot, and a retry by hand goes through;
#  - NVIDIA's gpu_operator_nodes_upgrades_* metrics and the pool's status report it;
#  - an unparsable compatibility matrix (ConfigMap gpuop-driver-compat) freezes the upgrade: no
#    node changes, the ClusterPolicy's condition and an Event name the error; fixed, it goes on.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim"

operator_cluster 200ms
PORT=$(free_port)
start_operator() {
    "$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator --operand-image gpuop:test \
        --metrics-listen "127.0.0.1:$PORT" --leader-elect false >>"$T/operator.log" 2>&1 &
    OP_PID=$!
    pids+=($OP_PID)
}
start_operator

DRIVER_NODES="a100-mig-1 dgx-h100-1 dgx-h100-2"
state() { $K get node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}'; }
all_state() { # all driver nodes in state $1
    for n in $DRIVER_NODES; do [ "$(state "$n")" = "$1" ] || return 1; done
}

# The serving pool (manual approval) and the research pool, by node labels.
$K label node a100-mig-1 dgx-h100-2 gpuop.test/pool=research >/dev/null
$K label node dgx-h100-1 gpuop.test/pool=serving >/dev/null
cat <<'EOF' | $K apply -f - >/dev/null
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: serving}
spec:
  nodeSelector: {gpuop.test/pool: serving}
  approval: manual
---
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: research}
spec:
  nodeSelector: {gpuop.test/pool: research}
EOF
sed -e 's/maxParallelUpgrades: 1/maxParallelUpgrades: 0\n      maxUnavailable: 1\n      podDeletion: {timeoutSeconds: 300, force: true}/' \
    "$S/tests/operator/fixtures/clusterpolicy-full.yaml" | $K apply -f - >/dev/null
wait_for 30 "driver nodes upgrade-done before any change" all_state upgrade-done
OLD_REV=$($K -n gpu-operator get pods -l app=nvidia-driver-daemonset -o jsonpath='{.items[0].metadata.labels.controller-revision-hash}')

# The device plugin's part, simulated: each driver node advertises 8 GPUs.
for n in $DRIVER_NODES; do
    $K patch node "$n" --subresource=status --type merge \
        -p '{"status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"8"}}}' >/dev/null
done
# A GPU workload on dgx-h100-2 (a bare pod: podDeletion.force) under a budget that allows no
# disruption.
cat <<'EOF' | $K apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata:
  name: serve-0
  namespace: default
  labels: {app: serve}
spec:
  nodeName: dgx-h100-2
  containers:
  - name: main
    image: cuda-sample
    resources: {limits: {nvidia.com/gpu: "1"}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: serve, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: serve}}
EOF
wait_for 10 "workload running" sh -c "[ \"\$($K get pod serve-0 -o jsonpath='{.status.phase}')\" = Running ]" ||
    { $K get pod serve-0 -o yaml; exit 1; }

# Sample the cordoned driver nodes through the whole rollout.
(
    max=0
    while :; do
        n=$($K get nodes -o jsonpath='{range .items[*]}{.spec.unschedulable}{"\n"}{end}' 2>/dev/null | grep -c true || true)
        [ "$n" -gt "$max" ] && max=$n && echo "$max" >"$T/max_cordoned"
        sleep 0.1
    done
) &
pids+=($!)
echo 0 >"$T/max_cordoned"

t0=$SECONDS
$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"driver":{"version":"595.100.01"}}}' >/dev/null
NEW_REV=
new_rev() {
    NEW_REV=$($K -n gpu-operator get controllerrevisions -l app=nvidia-driver-daemonset \
        -o jsonpath='{range .items[*]}{.revision} {.metadata.labels.controller-revision-hash}{"\n"}{end}' | sort -n | tail -1 | cut -d' ' -f2)
    [ -n "$NEW_REV" ] && [ "$NEW_REV" != "$OLD_REV" ]
}
wait_for 10 "a new driver revision" new_rev

# a100-mig-1 (first by name) goes through; dgx-h100-2 is held by the budget; the serving node
# waits for approval.
wait_for 20 "a100-mig-1 upgraded" sh -c "[ \"\$($K get node a100-mig-1 -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}')\" = upgrade-done ]"
wait_for 10 "dgx-h100-2 held in pod-deletion-required" sh -c "[ \"\$($K get node dgx-h100-2 -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}')\" = pod-deletion-required ]"
[ "$(state dgx-h100-1)" = upgrade-required ] || fail "serving node moved without approval: $(state dgx-h100-1)"
$K get node dgx-h100-1 -o jsonpath='{.metadata.annotations.upgrade\.gpuop\.dev/waiting}' | grep -q approval ||
    fail "serving node does not say it waits for approval"
sleep 1
[ "$(state dgx-h100-2)" = pod-deletion-required ] || fail "the PodDisruptionBudget did not hold dgx-h100-2"
$K get pod serve-0 >/dev/null || fail "the budgeted pod was evicted"

# Kill the operator mid-rollout (a node cordoned, held) and start a new one: it resumes.
kill -KILL "$OP_PID"
wait "$OP_PID" 2>/dev/null || true
start_operator
sleep 1
[ "$(state dgx-h100-2)" = pod-deletion-required ] || fail "restarted operator lost dgx-h100-2's state"
# The budget allows one disruption now: the pod is evicted, the node goes on.
$K patch pdb serve --type merge -p '{"spec":{"minAvailable":0}}' >/dev/null
wait_for 20 "dgx-h100-2 upgraded" sh -c "[ \"\$($K get node dgx-h100-2 -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}')\" = upgrade-done ]"
sleep 1
[ "$(state dgx-h100-1)" = upgrade-required ] || fail "serving node moved without approval: $(state dgx-h100-1)"
wait_for 10 "serving pool reports its pending node" sh -c "[ \"\$($K get driverupgradepool serving -o jsonpath='{.status.pending}')\" = 1 ]"
TARGET=$($K get driverupgradepool serving -o jsonpath='{.status.targetRevision}')
[ "$TARGET" = "$NEW_REV" ] || fail "serving pool's targetRevision '$TARGET' is not $NEW_REV"
$K get driverupgradepools | grep -q '^serving' || fail "kubectl get driverupgradepools lists no serving"

# Approve the serving pool for this revision.
$K annotate driverupgradepool serving "upgrade.gpuop.dev/approved-revision=$TARGET" >/dev/null
wait_for 20 "all driver nodes upgrade-done" all_state upgrade-done
echo "rollout through 3 nodes (held, killed, approved) in $((SECONDS - t0))s"

# Every driver pod is of the new revision and runs the new version; nothing stays cordoned.
revs=$($K -n gpu-operator get pods -l app=nvidia-driver-daemonset -o jsonpath='{range .items[*]}{.metadata.labels.controller-revision-hash}{"\n"}{end}' | sort -u)
[ "$revs" = "$NEW_REV" ] || fail "driver pods of revisions: $revs"
$K -n gpu-operator get ds nvidia-driver-daemonset -o jsonpath='{.spec.template.spec.containers[0].image}' | grep -q 595.100.01 ||
    fail "driver DaemonSet not on the new version"
[ -z "$($K get nodes -o jsonpath='{range .items[*]}{.spec.unschedulable}{end}' | grep true || true)" ] || fail "a node stayed cordoned"
max=$(cat "$T/max_cordoned")
[ "$max" -le 1 ] || fail "$max nodes cordoned at once, maxUnavailable is 1"
echo "at most $max node cordoned at once"

# NVIDIA's Events and metrics, the pool status, the ClusterPolicy condition.
$K get events -A --field-selector reason=GPUDriverUpgrade -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' >"$T/events"
for s in cordon-required pod-deletion-required pod-restart-required validation-required upgrade-done; do
    grep -q "\[$s\]" "$T/events" || fail "no GPUDriverUpgrade Event for [$s]"
done
wait_for 10 "metrics: 3 nodes upgraded" sh -c "curl -s 127.0.0.1:$PORT/metrics | grep -q '^gpu_operator_nodes_upgrades_done 3'"
metrics_has "$PORT" '^gpuop_driver_upgrade_pool_nodes{pool="serving",state="done"} 1' ||
    fail "no per-pool metric"
wait_for 10 "ClusterPolicy DriverUpgrade condition True" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"DriverUpgrade\")].status}')\" = True ]"
[ "$($K get driverupgradepool research -o jsonpath='{.status.progress}')" = 2/2 ] || fail "research pool progress"

# A pod deletion that never completes (the budget allows nothing again) ends in upgrade-failed
# after podDeletion.timeoutSeconds (drain off), naming the budget; nothing else starts while the
# failed node is cordoned (maxUnavailable 1); a retry by hand goes through once the budget allows.
$K patch pdb serve --type merge -p '{"spec":{"minAvailable":1}}' >/dev/null
cat <<'EOF2' | $K apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: serve-1, namespace: default, labels: {app: serve}}
spec:
  nodeName: a100-mig-1
  containers: [{name: main, image: cuda-sample, resources: {limits: {nvidia.com/gpu: "1"}}}]
EOF2
wait_for 10 "second workload running" sh -c "[ \"\$($K get pod serve-1 -o jsonpath='{.status.phase}')\" = Running ]"
$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"driver":{"version":"595.110.01","upgradePolicy":{"podDeletion":{"timeoutSeconds":3}}}}}' >/dev/null
wait_for 20 "a100-mig-1 upgrade-failed after the pod deletion timeout" sh -c "[ \"\$($K get node a100-mig-1 -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}')\" = upgrade-failed ]"
$K get node a100-mig-1 -o jsonpath='{.metadata.annotations.upgrade\.gpuop\.dev/failed-reason}' | grep -q 'PodDisruptionBudget serve' ||
    fail "failure reason does not name the budget"
[ "$(state dgx-h100-2)" = upgrade-required ] || fail "dgx-h100-2 started while the failed node holds the one unavailable slot"
$K delete pdb serve >/dev/null
$K label node a100-mig-1 nvidia.com/gpu-driver-upgrade-state=upgrade-required --overwrite >/dev/null
wait_for 20 "a100-mig-1 retried to upgrade-done" sh -c "[ \"\$($K get node a100-mig-1 -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}')\" = upgrade-done ]"
max=$(cat "$T/max_cordoned")
[ "$max" -le 1 ] || fail "$max nodes cordoned at once, maxUnavailable is 1"

# An unparsable compatibility matrix: the next version change moves no node, the ClusterPolicy's
# DriverUpgrade condition and a GPUDriverUpgrade Event name the ConfigMap and its error; removed
# (the built-in matrix again), the upgrade goes on.
cat <<'EOF2' | $K apply -f - >/dev/null
apiVersion: v1
kind: ConfigMap
metadata: {name: gpuop-driver-compat, namespace: gpu-operator}
data: {matrix.yaml: "branches: [unclosed"}
EOF2
$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"driver":{"version":"595.120.01"}}}' >/dev/null
wait_for 20 "DriverUpgrade condition InvalidUpgradeInput" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"DriverUpgrade\")].reason}')\" = InvalidUpgradeInput ]"
$K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type=="DriverUpgrade")].message}' |
    grep -q 'ConfigMap gpu-operator/gpuop-driver-compat: matrix.yaml' || fail "the condition does not name the matrix ConfigMap"
wait_for 10 "a GPUDriverUpgrade Event naming the matrix" sh -c "$K get events -A --field-selector reason=GPUDriverUpgrade -o jsonpath='{range .items[*]}{.message}{\"\\n\"}{end}' | grep -q gpuop-driver-compat"
snapshot() { $K get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.labels.nvidia\.com/gpu-driver-upgrade-state} {.spec.unschedulable}{"\n"}{end}'; }
snapshot >"$T/frozen-before"
sleep 3 # several passes (200 ms resync)
snapshot >"$T/frozen-after"
diff "$T/frozen-before" "$T/frozen-after" >/dev/null ||
    fail "nodes changed under an unparsable matrix: $(diff "$T/frozen-before" "$T/frozen-after")"
$K delete configmap -n gpu-operator gpuop-driver-compat >/dev/null
wait_for 20 "the upgrade going on after the matrix is fixed" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"DriverUpgrade\")].reason}')\" != InvalidUpgradeInput ]"
echo "PASS"
