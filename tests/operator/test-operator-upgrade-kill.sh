#!/usr/bin/env bash
# The operator SIGKILLed in each state of NVIDIA's upgrade machine and restarted resumes from the
# node labels (issue 16, Faults), against kubesim with its simulated readiness:
#  - one rollout (a driver version change) through three driver nodes of a manual pool, each node
#    started by approving it, so that the test decides when a node moves;
#  - a100-mig-1 is held in each state the operator leaves a node in by something the test then
#    releases: approval (upgrade-required), a running pod matching waitForCompletion
#    (wait-for-jobs-required), a GPU pod under a PodDisruptionBudget (pod-deletion-required), a
#    plain pod under a budget with the drain on (drain-required), the simulated readiness delay
#    (pod-restart-required, validation-required); the operator is killed as soon as the label
#    shows the state, the label is checked to be that state after the kill, then it restarts;
#  - cordon-required and uncordon-required are never left on a node by gpuop (they are decided
#    in the same node patch as the next state): an instance killed in them is one that wrote
#    the label and died before the next step (NVIDIA's operator, replaced by gpuop, or an older
#    one). The test writes that label with the operator dead (dgx-h100-1 cordoned by the killed
#    instance, dgx-h100-2 validated) and checks the restart goes on from it;
#  - at the end every driver node is upgrade-done on the new revision, none cordoned, each
#    node's GPUDriverUpgrade Events list its states in order without a gap, and never more than
#    maxUnavailable (1) node was cordoned (sampled through the whole run).
set -euo pipefail
B=${GPUOP_BUILD_ROOT:?}
S=${GPUOP_SOURCE_ROOT:?}
. "$S/scripts/tools-env.sh" || { echo "$TOOLS_MISSING: skipped"; exit 77; }
[ -x "$B/kubesim" ] || { echo "build/kubesim not built: skipped"; exit 77; }
. "$S/tests/operator/lib.sh"

start_kubesim_operator_rbac 1s
PORT=$(free_port)
OP_PID=
start_operator() {
    "$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator --operand-image gpuop:test \
        --metrics-listen "127.0.0.1:$PORT" --leader-elect false >>"$T/operator.log" 2>&1 &
    OP_PID=$!
    pids+=("$OP_PID")
}
stop_operator() {
    kill -KILL "$OP_PID"
    wait "$OP_PID" 2>/dev/null || true
}
# restart: a new operator, and wait until it has planned a pass over the labels it found (its
# pass counter; the writes of that plan follow at once, before the next kubectl answers).
restart() {
    start_operator
    wait_for 20 "restarted operator planned a pass" metrics_has "$PORT" '^gpuop_driver_upgrade_passes_total [1-9]'
}
start_operator

DRIVER_NODES="a100-mig-1 dgx-h100-1 dgx-h100-2"
state() { $K get node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}'; }
is_state() { [ "$(state "$1")" = "$2" ]; }
all_state() {
    for n in $DRIVER_NODES; do is_state "$n" "$1" || return 1; done
}
cordoned() { [ "$($K get node "$1" -o jsonpath='{.spec.unschedulable}')" = true ]; }
KILLS=0
# kill_in NODE STATE: SIGKILL the operator as soon as NODE shows STATE (polled), then check that
# the label still says STATE with the operator gone: the kill happened in that state.
kill_in() {
    local n=$1 s=$2 secs=$((20 * ${GPUOP_TEST_TIME_SCALE:-1})) end
    end=$((SECONDS + secs))
    until is_state "$n" "$s"; do
        [ $SECONDS -lt $end ] || fail "$n never reached $s (at $(state "$n"))"
        sleep 0.05
    done
    stop_operator
    local now
    now=$(state "$n")
    [ "$now" = "$s" ] || fail "the kill meant for $s found $n in $now"
    KILLS=$((KILLS + 1))
    echo "kill $KILLS: operator SIGKILLed with $n in $s"
}

cat <<'EOF2' | $K apply -f - >/dev/null
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: kill}
spec:
  nodeSelector: {gpuop.test/pool: kill}
  approval: manual
EOF2
$K label node $DRIVER_NODES gpuop.test/pool=kill >/dev/null
$K apply -f "$S/tests/operator/fixtures/clusterpolicy-full.yaml" >/dev/null
$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"driver":{"upgradePolicy":{
  "autoUpgrade":true,"maxParallelUpgrades":0,"maxUnavailable":1,
  "waitForCompletion":{"podSelector":"app=batch","timeoutSeconds":0},
  "podDeletion":{"force":true,"timeoutSeconds":300,"deleteEmptyDir":true},
  "drain":{"enable":true,"force":true,"timeoutSeconds":300,"deleteEmptyDir":true}}}}}' >/dev/null
wait_for 30 "driver nodes upgrade-done before any change" all_state upgrade-done
OLD_REV=$($K -n gpu-operator get pods -l app=nvidia-driver-daemonset -o jsonpath='{.items[0].metadata.labels.controller-revision-hash}')
for n in $DRIVER_NODES; do
    $K patch node "$n" --subresource=status --type merge \
        -p '{"status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"8"}}}' >/dev/null
done

# On a100-mig-1: a job waitForCompletion waits for, a GPU pod and a plain pod, each of the last
# two under a budget that allows no disruption.
cat <<'EOF2' | $K apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: batch-0, namespace: default, labels: {app: batch}}
spec:
  nodeName: a100-mig-1
  containers: [{name: main, image: batch}]
---
apiVersion: v1
kind: Pod
metadata: {name: serve-0, namespace: default, labels: {app: serve}}
spec:
  nodeName: a100-mig-1
  containers: [{name: main, image: cuda-sample, resources: {limits: {nvidia.com/gpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default, labels: {app: web}}
spec:
  nodeName: a100-mig-1
  containers: [{name: main, image: web}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: serve, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: serve}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
EOF2
running() { [ "$($K get pod "$1" -o jsonpath='{.status.phase}')" = Running ]; }
for p in batch-0 serve-0 web-0; do wait_for 10 "$p running" running "$p"; done

# The GPUDriverUpgrade Events so far (the first pass's upgrade-done): left out of the sequences.
events() {
    $K get events -A --field-selector reason=GPUDriverUpgrade \
        -o jsonpath='{range .items[*]}{.metadata.resourceVersion} {.involvedObject.name} {.metadata.name} {.message}{"\n"}{end}' |
        sort -n
}
events >"$T/events.before"

# Sample the cordoned nodes through the whole rollout.
echo 0 >"$T/max_cordoned"
(
    max=0
    while :; do
        n=$($K get nodes -o jsonpath='{range .items[*]}{.spec.unschedulable}{"\n"}{end}' 2>/dev/null | grep -c true || true)
        [ "$n" -gt "$max" ] && max=$n && echo "$max" >"$T/max_cordoned"
        sleep 0.1
    done
) &
pids+=($!)

t0=$SECONDS
$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"driver":{"version":"595.100.01"}}}' >/dev/null
NEW_REV=
new_rev() {
    NEW_REV=$($K -n gpu-operator get controllerrevisions -l app=nvidia-driver-daemonset \
        -o jsonpath='{range .items[*]}{.revision} {.metadata.labels.controller-revision-hash}{"\n"}{end}' | sort -n | tail -1 | cut -d' ' -f2)
    [ -n "$NEW_REV" ] && [ "$NEW_REV" != "$OLD_REV" ]
}
wait_for 10 "a new driver revision" new_rev

# upgrade-required: the pool waits for approval.
kill_in a100-mig-1 upgrade-required
restart
wait_for 10 "a100-mig-1 waits for approval after the restart" sh -c \
    "$K get node a100-mig-1 -o jsonpath='{.metadata.annotations.upgrade\.gpuop\.dev/waiting}' | grep -q approval"
all_state upgrade-required || fail "a node moved without approval after the restart"
$K annotate node a100-mig-1 upgrade.gpuop.dev/approved=true >/dev/null

# wait-for-jobs-required: batch-0 runs.
kill_in a100-mig-1 wait-for-jobs-required
cordoned a100-mig-1 || fail "a100-mig-1 not cordoned in wait-for-jobs-required"
restart
is_state a100-mig-1 wait-for-jobs-required || fail "restarted operator moved a100-mig-1 on with batch-0 running: $(state a100-mig-1)"
$K delete pod batch-0 --wait=false >/dev/null

# pod-deletion-required: the budget 'serve' holds serve-0.
kill_in a100-mig-1 pod-deletion-required
restart
is_state a100-mig-1 pod-deletion-required || fail "restarted operator lost pod-deletion-required: $(state a100-mig-1)"
$K get pod serve-0 >/dev/null || fail "serve-0 evicted through its budget"
$K patch pdb serve --type merge -p '{"spec":{"minAvailable":0}}' >/dev/null

# drain-required: the budget 'web' holds web-0.
kill_in a100-mig-1 drain-required
restart
is_state a100-mig-1 drain-required || fail "restarted operator lost drain-required: $(state a100-mig-1)"
$K get pod web-0 >/dev/null || fail "web-0 evicted through its budget"
$K patch pdb web --type merge -p '{"spec":{"minAvailable":0}}' >/dev/null

# pod-restart-required and validation-required: the simulated readiness delay holds them.
kill_in a100-mig-1 pod-restart-required
restart
kill_in a100-mig-1 validation-required
restart
wait_for 20 "a100-mig-1 upgraded" is_state a100-mig-1 upgrade-done
cordoned a100-mig-1 && fail "a100-mig-1 left cordoned"

# cordon-required, as an instance killed after cordoning and before recording the next state
# leaves it: the label and the cordon, none of gpuop's annotations of the step.
is_state dgx-h100-1 upgrade-required || fail "dgx-h100-1 moved without approval: $(state dgx-h100-1)"
stop_operator
$K label node dgx-h100-1 nvidia.com/gpu-driver-upgrade-state=cordon-required --overwrite >/dev/null
$K cordon dgx-h100-1 >/dev/null
KILLS=$((KILLS + 1))
echo "kill $KILLS: operator SIGKILLed with dgx-h100-1 in cordon-required (label written, node cordoned, by the test)"
restart
wait_for 30 "dgx-h100-1 upgraded" is_state dgx-h100-1 upgrade-done
cordoned dgx-h100-1 && fail "dgx-h100-1 left cordoned: resumed in cordon-required, it took its own cordon for one made before the upgrade"

# uncordon-required, as an instance killed after validation and before the uncordon leaves it.
$K annotate node dgx-h100-2 upgrade.gpuop.dev/approved=true >/dev/null
kill_in dgx-h100-2 validation-required
validated() {
    local v
    v=$($K -n gpu-operator get pods -l app=nvidia-operator-validator --field-selector spec.nodeName=dgx-h100-2 \
        -o jsonpath='{range .items[*]}{.metadata.deletionTimestamp}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
    [ "$v" = "/True" ]
}
wait_for 20 "dgx-h100-2's new validator Ready" validated
$K label node dgx-h100-2 nvidia.com/gpu-driver-upgrade-state=uncordon-required --overwrite >/dev/null
echo "kill $KILLS, operator still dead: dgx-h100-2 validated, its label set to uncordon-required (by the test)"
cordoned dgx-h100-2 || fail "dgx-h100-2 not cordoned in uncordon-required"
restart
wait_for 20 "dgx-h100-2 upgraded" is_state dgx-h100-2 upgrade-done
echo "rollout through 3 nodes with $KILLS kills in $((SECONDS - t0))s"

# The end: every node done on the new revision, none cordoned, the limit kept.
all_state upgrade-done || fail "not every driver node upgrade-done"
revs=$($K -n gpu-operator get pods -l app=nvidia-driver-daemonset -o jsonpath='{range .items[*]}{.metadata.labels.controller-revision-hash}{"\n"}{end}' | sort -u)
[ "$revs" = "$NEW_REV" ] || fail "driver pods of revisions: $revs"
c=$($K get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.spec.unschedulable}{"\n"}{end}' | grep '=true' || true)
[ -z "$c" ] || fail "nodes left cordoned: $c"
max=$(cat "$T/max_cordoned")
[ "$max" -le 1 ] || fail "$max nodes cordoned at once, maxUnavailable is 1"
echo "at most $max node cordoned at once"

# Each node's states from its Events, in the order the API server stored them (resourceVersion),
# none skipped (the states the test wrote itself
# have no Event: gpuop did not write them).
events >"$T/events.after"
seq_of() {
    grep -vxF -f "$T/events.before" "$T/events.after" | awk -v n="$1" '$2 == n' |
        sed -n 's/.*label to \[\([a-z-]*\)\].*/\1/p' | tr '\n' ' ' | sed 's/ $//'
}
check_seq() {
    local got
    got=$(seq_of "$1")
    echo "$1: $got"
    [ "$got" = "$2" ] || fail "$1's states from its Events: '$got', expected '$2'"
}
check_seq a100-mig-1 "upgrade-required cordon-required wait-for-jobs-required pod-deletion-required drain-required pod-restart-required validation-required uncordon-required upgrade-done"
check_seq dgx-h100-1 "upgrade-required wait-for-jobs-required pod-deletion-required drain-required pod-restart-required validation-required uncordon-required upgrade-done"
check_seq dgx-h100-2 "upgrade-required cordon-required wait-for-jobs-required pod-deletion-required drain-required pod-restart-required validation-required upgrade-done"
[ "$KILLS" -eq 8 ] || fail "$KILLS kills, expected 8"
echo "PASS"
