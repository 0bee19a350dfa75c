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
#    node's GPUDriverUpgrade Events list its states in order, none twice, and none missing but
#    those of the pass the operator was killed in (it posts a pass's Events after its node patch:
#    a SIGKILL between them drops them), and never more than maxUnavailable (1) node was
#    cordoned (sampled through the whole run).
# Reads are retried (a kubectl that failed under load is no empty label) and idempotent writes
# too; on a failure every driver node's label and cordon history (sampled) is printed with the
# kills and restarts between.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim"

operator_cluster 1s
# the operator's metrics port, the same for every restart: below the ephemeral range, where the
# many kubectl connections of this test do not take it meanwhile
PORT=$(free_port)
OP_PID=
DRIVER_NODES="a100-mig-1 dgx-h100-1 dgx-h100-2"
# Each node's states from its Events, as gpuop writes them (the states the test writes itself
# have none).
declare -A EXPECT=(
    [a100-mig-1]="upgrade-required cordon-required wait-for-jobs-required pod-deletion-required drain-required pod-restart-required validation-required uncordon-required upgrade-done"
    [dgx-h100-1]="upgrade-required wait-for-jobs-required pod-deletion-required drain-required pod-restart-required validation-required uncordon-required upgrade-done"
    [dgx-h100-2]="upgrade-required cordon-required wait-for-jobs-required pod-deletion-required drain-required pod-restart-required validation-required upgrade-done"
)
declare -A MAY_LACK=() # node -> states whose Events the kills may have dropped

# note TEXT: into the output and the history printed on a failure
note() {
    echo "$*"
    echo "$(date +%T.%3N) $*" >>"$T/history"
}
on_fail() {
    echo "--- label and cordon history of the driver nodes (sampled every 0.1 s):"
    cat "$T/history" 2>/dev/null || true
}
# kread ARGS...: kubectl get ARGS, retried: an API call that failed (a timeout under load) is
# no empty answer. Prints the output; returns 1 after 5 failed tries, saying why on stderr.
kread() {
    local i out
    for i in 1 2 3 4 5; do
        if out=$($K get "$@" 2>"$T/kread.err"); then
            printf '%s' "$out"
            return 0
        fi
        sleep 0.5
    done
    echo "kubectl get $*: $(cat "$T/kread.err")" >&2
    return 1
}
# kdo ARGS...: an idempotent kubectl write, retried the same way; fails the test after 5 tries.
kdo() {
    local i
    for i in 1 2 3 4 5; do
        $K "$@" >/dev/null 2>"$T/kdo.err" && return 0
        sleep 0.5
    done
    fail "kubectl $*: $(cat "$T/kdo.err")"
}
# kapply: a manifest on stdin, applied (retried)
kapply() {
    local f
    f=$(mktemp -p "$T" manifest.XXXXXX)
    cat >"$f"
    kdo apply -f "$f"
}
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
    note "operator restarted"
    start_operator
    wait_for 20 "restarted operator planned a pass" metrics_has "$PORT" '^gpuop_driver_upgrade_passes_total [1-9]'
}
start_operator

state() { kread node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}'; }
is_state() {
    local s
    s=$(state "$1") || fail "$1's state label not read"
    [ "$s" = "$2" ]
}
all_state() {
    for n in $DRIVER_NODES; do is_state "$n" "$1" || return 1; done
}
cordoned() {
    local u
    u=$(kread node "$1" -o jsonpath='{.spec.unschedulable}') || fail "$1's cordon not read"
    [ "$u" = true ]
}
# pod_exists NAME: the pod is there (default namespace)
pod_exists() {
    local p
    p=$(kread pod "$1" --ignore-not-found -o name) || fail "pod $1 not read"
    [ -n "$p" ]
}
KILLS=0
declare -A LAST_SEEN=() # node -> the state the test last knew it in (before the rollout: done)
# seen NODE STATE: the test knows NODE is in STATE now (checked, or written by the test).
seen() { LAST_SEEN[$1]=$2; }
# may_lack NODE FROM TO: NODE went from state FROM to TO in passes the test did not see one by
# one, the last of which a kill may have interrupted: the states after FROM up to TO may lack
# their Event.
may_lack() {
    local n=$1 from=$2 to=$3 i at=-1 first=0
    [ "$from" != "$to" ] || return 0
    local -a want
    read -ra want <<<"${EXPECT[$n]}"
    for i in "${!want[@]}"; do [ "${want[$i]}" = "$to" ] && at=$i; done
    [ "$at" -ge 0 ] || return 0
    for ((i = at - 1; i >= 0; i--)); do
        if [ "${want[$i]}" = "$from" ]; then
            first=$((i + 1))
            break
        fi
    done
    for ((i = first; i <= at; i++)); do MAY_LACK[$n]+=" ${want[$i]}"; done
}
# kill_in NODE STATE: SIGKILL the operator as soon as NODE shows STATE (polled), then check that
# the label still says STATE with the operator gone: the kill happened in that state. The
# operator posts a pass's Events after the pass's node patches, so the kill may have dropped
# the Events of the pass it interrupted, on any node that pass moved: for each driver node, the
# states after the one the test saw last (for NODE: the last its poll saw before STATE) up to
# the one it is in now.
kill_in() {
    local n=$1 s=$2 secs=$((20 * ${GPUOP_TEST_TIME_SCALE:-1})) end cur prev m from
    prev=${LAST_SEEN[$n]:-upgrade-done}
    end=$((SECONDS + secs))
    while :; do
        cur=$(state "$n") || fail "$n's state label not read"
        [ "$cur" = "$s" ] && break
        prev=$cur
        [ $SECONDS -lt $end ] || fail "$n never reached $s (at $cur)"
        sleep 0.05
    done
    stop_operator
    KILLS=$((KILLS + 1))
    local before dropped=
    for m in $DRIVER_NODES; do
        cur=$(state "$m") || fail "$m's state label not read after the kill"
        from=${LAST_SEEN[$m]:-upgrade-done}
        if [ "$m" = "$n" ]; then
            [ "$cur" = "$s" ] || fail "the kill meant for $s found $n in $cur"
            from=$prev
        fi
        before=${MAY_LACK[$m]:-}
        may_lack "$m" "$from" "$cur"
        [ "${MAY_LACK[$m]:-}" = "$before" ] || dropped+=" $m:${MAY_LACK[$m]#"$before"}"
        seen "$m" "$cur"
    done
    note "kill $KILLS: operator SIGKILLed with $n in $s (Events it may have dropped:${dropped:- none})"
}

kapply <<'EOF2'
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: kill}
spec:
  nodeSelector: {gpuop.test/pool: kill}
  approval: manual
EOF2
kdo label node $DRIVER_NODES gpuop.test/pool=kill --overwrite
kdo apply -f "$S/tests/operator/fixtures/clusterpolicy-full.yaml"
kdo patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"driver":{"upgradePolicy":{
  "autoUpgrade":true,"maxParallelUpgrades":0,"maxUnavailable":1,
  "waitForCompletion":{"podSelector":"app=batch","timeoutSeconds":0},
  "podDeletion":{"force":true,"timeoutSeconds":300,"deleteEmptyDir":true},
  "drain":{"enable":true,"force":true,"timeoutSeconds":300,"deleteEmptyDir":true}}}}}'
wait_for 30 "driver nodes upgrade-done before any change" all_state upgrade-done
OLD_REV=$(kread -n gpu-operator pods -l app=nvidia-driver-daemonset -o jsonpath='{.items[0].metadata.labels.controller-revision-hash}') ||
    fail "driver pods not read"
[ -n "$OLD_REV" ] || fail "no driver pod's revision"
for n in $DRIVER_NODES; do
    kdo patch node "$n" --subresource=status --type merge \
        -p '{"status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"8"}}}'
done

# On a100-mig-1: a job waitForCompletion waits for, a GPU pod and a plain pod, each of the last
# two under a budget that allows no disruption.
kapply <<'EOF2'
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
running() { [ "$(kread pod "$1" -o jsonpath='{.status.phase}')" = Running ]; }
for p in batch-0 serve-0 web-0; do wait_for 10 "$p running" running "$p"; done

# The GPUDriverUpgrade Events so far (the first pass's upgrade-done): left out of the sequences.
events() {
    local out
    out=$(kread events -A --field-selector reason=GPUDriverUpgrade \
        -o jsonpath='{range .items[*]}{.metadata.resourceVersion} {.involvedObject.name} {.metadata.name} {.message}{"\n"}{end}') ||
        return 1
    sort -n <<<"$out"
}
events >"$T/events.before" || fail "Events not read"

# Sample the nodes through the whole rollout: the most cordoned at once, and each driver node's
# label and cordon changes (the history a failure prints). A failed read is no sample.
echo 0 >"$T/max_cordoned"
(
    max=0
    declare -A last=()
    while :; do
        if out=$($K get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.labels.nvidia\.com/gpu-driver-upgrade-state} {.spec.unschedulable}{"\n"}{end}' 2>/dev/null); then
            n=$(grep -c ' true$' <<<"$out" || true)
            if [ "$n" -gt "$max" ]; then
                max=$n
                echo "$max" >"$T/max_cordoned"
            fi
            while read -r name st un; do
                case " $DRIVER_NODES " in *" $name "*) ;; *) continue ;; esac
                case $st in true | false) un=$st st= ;; esac # no label: the cordon moved left
                line="label=${st:-(none)} cordoned=${un:-false}"
                if [ "${last[$name]:-}" != "$line" ]; then
                    last[$name]=$line
                    echo "$(date +%T.%3N) $name $line" >>"$T/history"
                fi
            done <<<"$out"
        fi
        sleep 0.1
    done
) &
pids+=($!)

t0=$SECONDS
note "driver version change"
kdo patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"driver":{"version":"595.100.01"}}}'
NEW_REV=
new_rev() {
    local out
    out=$(kread -n gpu-operator controllerrevisions -l app=nvidia-driver-daemonset \
        -o jsonpath='{range .items[*]}{.revision} {.metadata.labels.controller-revision-hash}{"\n"}{end}') || return 1
    NEW_REV=$(sort -n <<<"$out" | tail -1 | cut -d' ' -f2)
    [ -n "$NEW_REV" ] && [ "$NEW_REV" != "$OLD_REV" ]
}
wait_for 10 "a new driver revision" new_rev

# upgrade-required: the pool waits for approval.
kill_in a100-mig-1 upgrade-required
restart
wait_for 10 "a100-mig-1 waits for approval after the restart" sh -c \
    "$K get node a100-mig-1 -o jsonpath='{.metadata.annotations.upgrade\.gpuop\.dev/waiting}' | grep -q approval"
all_state upgrade-required || fail "a node moved without approval after the restart"
for n in $DRIVER_NODES; do seen "$n" upgrade-required; done
note "a100-mig-1 approved"
kdo annotate node a100-mig-1 upgrade.gpuop.dev/approved=true --overwrite

# wait-for-jobs-required: batch-0 runs.
kill_in a100-mig-1 wait-for-jobs-required
cordoned a100-mig-1 || fail "a100-mig-1 not cordoned in wait-for-jobs-required"
restart
is_state a100-mig-1 wait-for-jobs-required || fail "restarted operator moved a100-mig-1 on with batch-0 running: $(state a100-mig-1)"
note "batch-0 deleted"
kdo delete pod batch-0 --wait=false --ignore-not-found

# pod-deletion-required: the budget 'serve' holds serve-0.
kill_in a100-mig-1 pod-deletion-required
restart
is_state a100-mig-1 pod-deletion-required || fail "restarted operator lost pod-deletion-required: $(state a100-mig-1)"
pod_exists serve-0 || fail "serve-0 evicted through its budget"
note "budget serve relaxed"
kdo patch pdb serve --type merge -p '{"spec":{"minAvailable":0}}'

# drain-required: the budget 'web' holds web-0.
kill_in a100-mig-1 drain-required
restart
is_state a100-mig-1 drain-required || fail "restarted operator lost drain-required: $(state a100-mig-1)"
pod_exists web-0 || fail "web-0 evicted through its budget"
note "budget web relaxed"
kdo patch pdb web --type merge -p '{"spec":{"minAvailable":0}}'

# pod-restart-required and validation-required: the simulated readiness delay holds them.
kill_in a100-mig-1 pod-restart-required
restart
kill_in a100-mig-1 validation-required
restart
wait_for 20 "a100-mig-1 upgraded" is_state a100-mig-1 upgrade-done
seen a100-mig-1 upgrade-done
cordoned a100-mig-1 && fail "a100-mig-1 left cordoned"

# cordon-required, as an instance killed after cordoning and before recording the next state
# leaves it: the label and the cordon, none of gpuop's annotations of the step.
is_state dgx-h100-1 upgrade-required || fail "dgx-h100-1 moved without approval: $(state dgx-h100-1)"
stop_operator
kdo label node dgx-h100-1 nvidia.com/gpu-driver-upgrade-state=cordon-required --overwrite
kdo cordon dgx-h100-1
seen dgx-h100-1 cordon-required
KILLS=$((KILLS + 1))
note "kill $KILLS: operator SIGKILLed with dgx-h100-1 in cordon-required (label written, node cordoned, by the test)"
restart
wait_for 30 "dgx-h100-1 upgraded" is_state dgx-h100-1 upgrade-done
seen dgx-h100-1 upgrade-done
cordoned dgx-h100-1 && fail "dgx-h100-1 left cordoned: resumed in cordon-required, it took its own cordon for one made before the upgrade"

# uncordon-required, as an instance killed after validation and before the uncordon leaves it.
note "dgx-h100-2 approved"
kdo annotate node dgx-h100-2 upgrade.gpuop.dev/approved=true --overwrite
kill_in dgx-h100-2 validation-required
validated() {
    local v
    v=$(kread -n gpu-operator pods -l app=nvidia-operator-validator --field-selector spec.nodeName=dgx-h100-2 \
        -o jsonpath='{range .items[*]}{.metadata.deletionTimestamp}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}') &&
        [ "$v" = "/True" ]
}
wait_for 20 "dgx-h100-2's new validator Ready" validated
kdo label node dgx-h100-2 nvidia.com/gpu-driver-upgrade-state=uncordon-required --overwrite
seen dgx-h100-2 uncordon-required
note "kill $KILLS, operator still dead: dgx-h100-2 validated, its label set to uncordon-required (by the test)"
cordoned dgx-h100-2 || fail "dgx-h100-2 not cordoned in uncordon-required"
restart
wait_for 20 "dgx-h100-2 upgraded" is_state dgx-h100-2 upgrade-done
echo "rollout through 3 nodes with $KILLS kills in $((SECONDS - t0))s"

# The end: every node done on the new revision, none cordoned, the limit kept.
all_state upgrade-done || fail "not every driver node upgrade-done"
revs=$(kread -n gpu-operator pods -l app=nvidia-driver-daemonset -o jsonpath='{range .items[*]}{.metadata.labels.controller-revision-hash}{"\n"}{end}') ||
    fail "driver pods not read"
revs=$(sort -u <<<"$revs")
[ "$revs" = "$NEW_REV" ] || fail "driver pods of revisions: $revs"
c=$(kread nodes -o jsonpath='{range .items[*]}{.metadata.name}={.spec.unschedulable}{"\n"}{end}') || fail "nodes not read"
c=$(grep '=true' <<<"$c" || true)
[ -z "$c" ] || fail "nodes left cordoned: $c"
max=$(cat "$T/max_cordoned")
[ "$max" -le 1 ] || fail "$max nodes cordoned at once, maxUnavailable is 1"
echo "at most $max node cordoned at once"

# Each node's states from its Events, in the order the API server stored them (resourceVersion):
# EXPECT's, in order, none twice, none missing but those of the passes the kills interrupted
# (MAY_LACK; the states the test wrote itself have no Event: gpuop did not write them).
events >"$T/events.after" || fail "Events not read"
seq_of() {
    grep -vxF -f "$T/events.before" "$T/events.after" | awk -v n="$1" '$2 == n' |
        sed -n 's/.*label to \[\([a-z-]*\)\].*/\1/p' | tr '\n' ' ' | sed 's/ $//'
}
check_seq() {
    local n=$1 got x gi=0
    local -a g w
    got=$(seq_of "$n")
    read -ra g <<<"$got"
    read -ra w <<<"${EXPECT[$n]}"
    echo "$n: $got"
    for x in "${w[@]}"; do
        if [ $gi -lt ${#g[@]} ] && [ "${g[$gi]}" = "$x" ]; then
            gi=$((gi + 1))
        elif [[ " ${MAY_LACK[$n]:-} " == *" $x "* ]]; then
            echo "  no Event for $x: its pass was the one the operator was killed in"
        else
            fail "$n's states from its Events: '$got', expected '${EXPECT[$n]}' (only these may lack their Event, lost with a kill:${MAY_LACK[$n]:- none})"
        fi
    done
    [ $gi -eq ${#g[@]} ] || fail "$n's states from its Events: '$got': more than '${EXPECT[$n]}' (a step repeated)"
}
for n in $DRIVER_NODES; do check_seq "$n"; done
[ "$KILLS" -eq 8 ] || fail "$KILLS kills, expected 8"
echo "PASS"
