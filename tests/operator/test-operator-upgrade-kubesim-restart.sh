#!/usr/bin/env bash
# The API server SIGKILLed mid-rollout and restarted (issue 16, Faults: "kubesim restarted
# mid-rollout"): kubesim runs with --data-dir (its etcd) on a fixed port; the operator, never
# restarted, reconnects (its requests, its informers' watches, which get 410 Expired and relist)
# and the rollout completes.
#  - one rollout (a driver version change) through three driver nodes of a manual pool;
#  - kill 1: a100-mig-1 held in drain-required by a budget over its pod web-0; kubesim is killed
#    once the node's Event for the state is stored, comes back 2 s later, the node is still in
#    drain-required with web-0 in place; the budget is then relaxed through the restarted server
#    and the operator, which learns it through its re-established watches, drains on;
#  - kill 2: dgx-h100-1 in pod-restart-required (held by the simulated readiness delay); kubesim
#    is down 5 s, past the operator's lease renew deadline (3 s): the operator stops leading,
#    stays up, and leads again once the server is back (same identity, its own Lease);
#  - at the end every driver node is upgrade-done on the new revision, none cordoned, each
#    node's GPUDriverUpgrade Events list every state in order, never more than maxUnavailable (1)
#    node was cordoned (sampled through the run), and the operator process never exited.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim"

KS_PORT=$(free_port)
[ -n "$KS_PORT" ] || fail "no free port below 32000"
operator_cluster 3s --listen "127.0.0.1:$KS_PORT" --data-dir "$T/etcd"
PORT=$(free_port)
"$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator --operand-image gpuop:test \
    --metrics-listen "127.0.0.1:$PORT" --identity op-1 --leader-elect true \
    --leader-lease-duration 4s --leader-renew-deadline 3s --leader-retry-period 500ms \
    >"$T/operator.log" 2>&1 &
OP_PID=$!
pids+=("$OP_PID")
wait_for 20 "operator leading" grep -q "became leader" "$T/operator.log"

DRIVER_NODES="a100-mig-1 dgx-h100-1 dgx-h100-2"
state() { $K get node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}'; }
is_state() { [ "$(state "$1")" = "$2" ]; }
all_state() {
    for n in $DRIVER_NODES; do is_state "$n" "$1" || return 1; done
}
cordoned() { [ "$($K get node "$1" -o jsonpath='{.spec.unschedulable}')" = true ]; }
events() {
    $K get events -A --field-selector reason=GPUDriverUpgrade \
        -o jsonpath='{range .items[*]}{.metadata.resourceVersion} {.involvedObject.name} {.metadata.name} {.message}{"\n"}{end}' |
        sort -n
}
# has_event NODE STATE: the operator's Event for NODE entering STATE is stored.
has_event() {
    local ev
    ev=$(events) && grep -q "^[0-9]* $1 .*label to \[$2\]" <<<"$ev"
}
operator_alive() { kill -0 "$OP_PID" 2>/dev/null || fail "the operator exited: $(tail -n 5 "$T/operator.log")"; }
KILLS=0
# crash_in NODE STATE PAUSE: once NODE shows STATE and its Event is stored, SIGKILL kubesim,
# wait PAUSE seconds with the server down, restart it on the same port and data dir, and check
# NODE is still in STATE (the label came back from the data dir).
crash_in() {
    local n=$1 s=$2 pause=$3 secs=$((30 * ${GPUOP_TEST_TIME_SCALE:-1})) end
    end=$((SECONDS + secs))
    until is_state "$n" "$s" && has_event "$n" "$s"; do
        [ $SECONDS -lt $end ] || fail "$n never reached $s with its Event (at $(state "$n"))"
        sleep 0.05
    done
    local rv
    rv=$($K get node "$n" -o jsonpath='{.metadata.resourceVersion}')
    kill_kubesim
    KILLS=$((KILLS + 1))
    echo "kill $KILLS: kubesim SIGKILLed with $n in $s (node resourceVersion $rv), down ${pause}s"
    sleep "$pause"
    operator_alive
    restart_kubesim
    local now
    now=$(state "$n")
    [ "$now" = "$s" ] || fail "after the restart $n is in '$now', expected $s"
    local rv2
    rv2=$($K get node "$n" -o jsonpath='{.metadata.resourceVersion}')
    [ "$rv2" -ge "$rv" ] || fail "$n's resourceVersion went back from $rv to $rv2"
}

cat <<'EOF2' | $K apply -f - >/dev/null
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: restart}
spec:
  nodeSelector: {gpuop.test/pool: restart}
  approval: manual
EOF2
$K label node $DRIVER_NODES gpuop.test/pool=restart >/dev/null
$K apply -f "$S/tests/operator/fixtures/clusterpolicy-full.yaml" >/dev/null
$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"driver":{"upgradePolicy":{
  "autoUpgrade":true,"maxParallelUpgrades":0,"maxUnavailable":1,
  "podDeletion":{"force":true,"timeoutSeconds":300,"deleteEmptyDir":true},
  "drain":{"enable":true,"force":true,"timeoutSeconds":300,"deleteEmptyDir":true}}}}}' >/dev/null
wait_for 40 "driver nodes upgrade-done before any change" all_state upgrade-done
OLD_REV=$($K -n gpu-operator get pods -l app=nvidia-driver-daemonset -o jsonpath='{.items[0].metadata.labels.controller-revision-hash}')

# On a100-mig-1: a plain pod under a budget that allows no disruption (holds the drain).
cat <<'EOF2' | $K apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default, labels: {app: web}}
spec:
  nodeName: a100-mig-1
  containers: [{name: main, image: web}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
EOF2
running() { [ "$($K get pod "$1" -o jsonpath='{.status.phase}')" = Running ]; }
wait_for 10 "web-0 running" running web-0
events >"$T/events.before"

# Sample the cordoned nodes through the whole rollout (nothing while kubesim is down).
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
$K annotate node a100-mig-1 upgrade.gpuop.dev/approved=true >/dev/null

# Kill 1: drain-required, held by the budget 'web'.
crash_in a100-mig-1 drain-required 2
$K get pod web-0 >/dev/null || fail "web-0 lost or evicted through its budget across the restart"
sleep 2
is_state a100-mig-1 drain-required || fail "a100-mig-1 left drain-required with the budget holding: $(state a100-mig-1)"
$K patch pdb web --type merge -p '{"spec":{"minAvailable":0}}' >/dev/null
wait_for 60 "a100-mig-1 upgraded after kubesim's restart" is_state a100-mig-1 upgrade-done
cordoned a100-mig-1 && fail "a100-mig-1 left cordoned"

# Kill 2: pod-restart-required (the new driver pod not Ready yet), down past the renew deadline.
$K annotate node dgx-h100-1 dgx-h100-2 upgrade.gpuop.dev/approved=true >/dev/null
crash_in dgx-h100-1 pod-restart-required 5
operator_alive
wait_for 60 "every driver node upgraded" all_state upgrade-done
echo "rollout through 3 nodes with $KILLS kubesim kills in $((SECONDS - t0))s"
operator_alive

# The operator lost its lease while the server was down (kill 2), stayed up and led again.
lost=$(grep -c "stopped leading lease=" "$T/operator.log" || true)
led=$(grep -c "became leader lease=" "$T/operator.log" || true)
grep -E "leader|leading|lease" "$T/operator.log" | grep -v debug >"$T/leader.log" || true
[ "$lost" -ge 1 ] || fail "the operator never stopped leading with kubesim down 5s (renew deadline 3s)"
[ "$led" -ge 2 ] || fail "the operator did not lead again after kubesim came back (became leader $led times)"
echo "operator: stopped leading $lost time(s), became leader $led time(s), never exited"

# The end: every node done on the new revision, none cordoned, the limit kept.
revs=$($K -n gpu-operator get pods -l app=nvidia-driver-daemonset -o jsonpath='{range .items[*]}{.metadata.labels.controller-revision-hash}{"\n"}{end}' | sort -u)
[ "$revs" = "$NEW_REV" ] || fail "driver pods of revisions: $revs"
c=$($K get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.spec.unschedulable}{"\n"}{end}' | grep '=true' || true)
[ -z "$c" ] || fail "nodes left cordoned: $c"
max=$(cat "$T/max_cordoned")
[ "$max" -le 1 ] || fail "$max nodes cordoned at once, maxUnavailable is 1"
echo "at most $max node cordoned at once"

# Each node's states from its Events in resourceVersion order (kept across both restarts).
events >"$T/events.after"
seq_of() {
    grep -vxF -f "$T/events.before" "$T/events.after" | awk -v n="$1" '$2 == n' |
        sed -n 's/.*label to \[\([a-z-]*\)\].*/\1/p' | tr '\n' ' ' | sed 's/ $//'
}
ALL="upgrade-required cordon-required wait-for-jobs-required pod-deletion-required drain-required pod-restart-required validation-required uncordon-required upgrade-done"
for n in $DRIVER_NODES; do
    got=$(seq_of "$n")
    echo "$n: $got"
    [ "$got" = "$ALL" ] || fail "$n's states from its Events: '$got', expected '$ALL'"
done
[ "$KILLS" -eq 2 ] || fail "$KILLS kills, expected 2"
echo "PASS"
