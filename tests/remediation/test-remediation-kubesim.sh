#!/usr/bin/env bash
# GPU remediation end to end on kubesim: the operator under its shipped RBAC runs the planner and
# executes its plan; the node's health is written by hand as the node status exporter writes it
# (the gpu-health annotation); the reset request on dgx-h100-1 is carried out by the real executor
# (`gpuop driver-manager remediate`, as the driver DaemonSet's ServiceAccount, on the simulated
# NVML: its GPU 0's uncorrectable ECC error is cleared by the reset); dgx-h100-2's is answered by
# hand, as a person would.
#  - an uncorrectable ECC error on dgx-h100-1 (pool train: reset-gpu automatic), which runs a GPU
#    pod under a PodDisruptionBudget and a CPU pod: the node is quarantined (cordon, the taint
#    gpuop.dev/gpu-unhealthy:NoSchedule, the state label; time from the fault printed), the GPU
#    pod evicted, the CPU pod kept; the operator SIGKILLed while the node waits for its reset and
#    restarted resumes from the labels (gpuop status shows the node's state and event); the reset answered and the health back to healthy, the
#    validator runs again and the node is back in service: uncordoned, untainted (the whole cycle
#    timed);
#  - a fault storm (two more nodes at once): the cluster's breaker (30% of the four GPU nodes in
#    an hour: one quarantine) opens, no node is quarantined, the ClusterPolicy's annotation, its
#    GPURemediation condition, an Event, the node's waiting annotation and gpuop status say why; a
#    person resets it (gpuop remediation reset) and the next fault is quarantined: on dgx-h100-2, which an
#    administrator had cordoned, with the default policy (a person approves), and which stays
#    cordoned when it is back in service.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim" "$B/gpuop" "$B/libnvidia-ml.so.1" "$B/sim-image-bin/nvidia-smi" "$B/gpuop-sim"

operator_cluster 200ms
PORT=$(free_port)
start_operator() {
    "$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator --operand-image gpuop:test \
        --metrics-listen "127.0.0.1:$PORT" --leader-elect false >>"$T/operator.log" 2>&1 &
    OP_PID=$!
    pids+=($OP_PID)
}
log_file "$T/operator.log"

N1=dgx-h100-1
N2=dgx-h100-2
# N1's GPUs are the simulated NVML's (the executor resets them there)
export GPUOP_NVML_LIBRARY=$B/libnvidia-ml.so.1 GPUOP_SIM_FLEET=$S/sim/fleets/dgx-h100.yaml
export GPUOP_SIM_STATE=$T/state
mkdir -p "$GPUOP_SIM_STATE"
N1_GPU0=$(PATH=$B/sim-image-bin:$PATH nvidia-smi -L | sed -n 's/^GPU 0: .*(UUID: \(GPU-[^)]*\)).*/\1/p')
[ -n "$N1_GPU0" ] || fail "no GPU 0 in the simulated fleet"
uuid_of() { if [ "$1" = $N1 ] && [ "$2" = 0 ]; then echo "$N1_GPU0"; else echo "GPU-$1-$2"; fi; }
ann() { $K get node "$1" -o jsonpath="{.metadata.annotations.${2//./\\.}}"; }
state() { $K get node "$1" -o jsonpath='{.metadata.labels.remediation\.gpuop\.dev/state}'; }
is_state() { [ "$(state "$1")" = "$2" ]; }
cordoned() { [ "$($K get node "$1" -o jsonpath='{.spec.unschedulable}')" = true ]; }
tainted() { $K get node "$1" -o jsonpath='{range .spec.taints[*]}{.key}:{.effect}{"\n"}{end}' | grep -qx 'gpuop.dev/gpu-unhealthy:NoSchedule'; }
now_ms() { date +%s%3N; }
rfc3339() { date -u -d "@$(($1 / 1000)).$(printf %03d $(($1 % 1000)))" +%Y-%m-%dT%H:%M:%S.%3NZ; }

# health NODE SEQ ACKED [GPU SINCE_MS]: the agent's annotation: healthy, or an uncorrectable ECC
# error on GPU (live: NVML shows its count) since SINCE_MS.
health() {
    local node=$1 seq=$2 acked=$3 v
    if [ $# -gt 3 ]; then
        local f
        local u
        u=$(uuid_of "$node" "$4")
        f=$(printf '{"action":"reset-gpu","class":"ecc-dbe","code":0,"gpu":%d,"live":true,"message":"GPU %d (%s): uncorrectable ECC errors (1 volatile)","seq":%d,"since":"%s","uuid":"%s"}' \
            "$4" "$4" "$u" "$seq" "$(rfc3339 "$5")" "$u")
        v=$(printf '{"acked":%d,"action":"reset-gpu","faults":[%s],"healthy":false,"last":%s,"seq":%d}' "$acked" "$f" "$f" "$seq")
    else
        v=$(printf '{"acked":%d,"action":"none","faults":[],"healthy":true,"seq":%d}' "$acked" "$seq")
    fi
    $K annotate node "$node" --overwrite "gpuop.dev/gpu-health=$v" >/dev/null
}

# The nodes' GPUs, as the device plugin advertises them; their health, as the agent reports it.
for n in $N1 $N2 a100-mig-1 l4-hostdriver-1; do
    $K patch node "$n" --subresource=status --type merge \
        -p '{"status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"8"}}}' >/dev/null
    health "$n" 0 0
done
$K label node $N1 gpuop.test/pool=train >/dev/null
cat <<'EOF' | $K apply -f - >/dev/null
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: train}
spec:
  nodeSelector: {gpuop.test/pool: train}
  remediation:
    automatic: [reset-gpu]
EOF
# The validator must run on a quarantined node to check it again: every operand tolerates the
# taint here (spec.daemonsets.tolerations).
sed -e 's|^      - key: nvidia.com/gpu$|      - {key: gpuop.dev/gpu-unhealthy, operator: Exists, effect: NoSchedule}\n      - key: nvidia.com/gpu|' \
    "$S/tests/operator/fixtures/clusterpolicy-full.yaml" >"$T/policy.yaml"
grep -q gpu-unhealthy "$T/policy.yaml" || fail "the toleration was not added to the policy"
$K apply -f "$T/policy.yaml" >/dev/null
start_operator
validator_ready() {
    $K -n gpu-operator get pods -l app=nvidia-operator-validator --field-selector "spec.nodeName=$1" \
        -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -q True
}
wait_for 60 "the validator ready on $N1" validator_ready $N1
condition_is() { $K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type=="GPURemediation")].reason}' | grep -qx "$1"; }
policy_ann() { $K get clusterpolicy gpu-cluster-policy -o jsonpath="{.metadata.annotations.${1//./\\.}}"; }
wait_for 20 "GPURemediation condition NoFaults" condition_is NoFaults

# A GPU job under a budget that allows one disruption, and a CPU pod, on N1.
cat <<EOF | $K apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: train-0, namespace: default, labels: {app: train}}
spec:
  nodeName: $N1
  containers:
  - {name: main, image: cuda-sample, resources: {limits: {nvidia.com/gpu: "1"}}}
---
apiVersion: v1
kind: Pod
metadata: {name: cpu-0, namespace: default}
spec:
  nodeName: $N1
  containers:
  - {name: main, image: busybox}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: train, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: train}}
EOF
running() { [ "$($K get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; }
both_running() { running train-0 && running cpu-0; }
wait_for 10 "the pods running" both_running

# ---- an uncorrectable ECC error on N1 ---------------------------------------------------------
t_fault=$(now_ms)
"$B/gpuop-sim" inject ecc --gpu 0 --dbe 1 >/dev/null
health $N1 1 0 0 "$t_fault"
quarantined() { tainted $N1 && cordoned $N1 && [ -n "$(state $N1)" ]; }
wait_for 10 "$N1 quarantined" quarantined
t_q=$(now_ms)
echo "fault to quarantine: $((t_q - t_fault)) ms seen by kubectl, $(($(ann $N1 remediation.gpuop.dev/quarantined-at) - $(ann $N1 remediation.gpuop.dev/fault-at))) ms by the planner (fault-at to quarantined-at)"
limit=$(scaled 5) # the issue's 5 s (scaled under the sanitizers)
[ $((t_q - t_fault)) -le $((limit * 1000)) ] || fail "quarantine took $((t_q - t_fault)) ms (more than $limit s)"
$K get events -A --field-selector reason=GPUQuarantined -o jsonpath='{.items[*].message}' |
    grep -q "uncorrectable ECC" || fail "no GPUQuarantined Event naming the fault"

gone() { ! $K get pod "$1" >/dev/null 2>&1; }
wait_for 15 "the GPU pod evicted" gone train-0
wait_for 10 "$N1 remediating" is_state $N1 remediating
running cpu-0 || fail "the CPU pod did not stay"
req=$(ann $N1 remediation.gpuop.dev/request)
echo "request: $req"
case "$req" in "reset-gpu "*" $N1_GPU0") ;; *) fail "request: \"$req\"" ;; esac
metrics_has "$PORT" "^gpuop_remediation_node_state_since_timestamp_seconds{node=\"$N1\",state=\"remediating\"} " ||
    fail "no state-since gauge for $N1: $(curl -s "127.0.0.1:$PORT/metrics" | grep gpuop_remediation_node)"

# gpuop status shows it: the node's state, its action and the event.
"$B/gpuop" status --color never >"$T/status.txt" 2>&1 || fail "gpuop status: $(cat "$T/status.txt")"
grep -E "^$N1 +remediating +reset-gpu +[0-9]+s +UncorrectableECC: GPU 0" "$T/status.txt" >/dev/null ||
    fail "gpuop status does not show $N1 remediating: $(cat "$T/status.txt")"

# The operator killed while the node waits for its reset; restarted, it resumes from the labels.
kill -KILL "$OP_PID"
wait "$OP_PID" 2>/dev/null || true
start_operator
id=$(echo "$req" | cut -d' ' -f2)
# The executor, as the driver DaemonSet's ServiceAccount under its shipped RBAC: it resets the GPU
# in the simulated NVML and answers; the agent's report of the count cleared is written by hand.
python3 - "$S/deploy/operands/driver.yaml" >"$T/driver-rbac.yaml" <<'PY'
import sys
docs = open(sys.argv[1]).read().replace("${NAMESPACE}", "gpu-operator").split("\n---\n")
print("\n---\n".join(d for d in docs if "kind: DaemonSet" not in d))
PY
$K apply -f "$T/driver-rbac.yaml" >/dev/null
sa_kubeconfig "$T/dm.kubeconfig" gpu-operator nvidia-driver
mkdir -p "$T/root/sys/module/nvidia" "$T/root/run/nvidia/driver/usr/lib/x86_64-linux-gnu" "$T/root/run/nvidia/validations"
echo 550.127.05 >"$T/root/sys/module/nvidia/version"
# the driver container's own NVML and nvidia-smi in its root (the simulated ones), which the
# executor uses rather than its environment's
mkdir -p "$T/root/run/nvidia/driver/usr/bin"
ln -s "$B/libnvidia-ml.so.1" "$T/root/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127.05"
ln -s libnvidia-ml.so.550.127.05 "$T/root/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
ln -s "$B/sim-image-bin/nvidia-smi" "$T/root/run/nvidia/driver/usr/bin/nvidia-smi"
: >"$T/root/run/nvidia/validations/.driver-ctr-ready"
dbe_vol0() { "$B/gpuop-sim" show | awk 'index($0, "GPU 0 ") == 1 {on = 1; next} /^GPU / {on = 0}
    on && /ECC errors/ {sub(/.*double-bit [0-9]+ \(volatile /, ""); sub(/\).*/, ""); print; exit}'; }
[ "$(dbe_vol0)" -gt 0 ] || fail "the injected ECC error does not show"
bg executor env -u GPUOP_NVML_LIBRARY POD_NAMESPACE=gpu-operator POD_NAME=nvidia-driver-daemonset-x \
    "$B/gpuop" driver-manager remediate --node-name $N1 --kubeconfig "$T/dm.kubeconfig" \
    --host-root "$T/root" --driver-install-dir "$T/root/run/nvidia/driver" \
    --validations-dir "$T/root/run/nvidia/validations" --poll 200ms
EX_PID=$LAST
# (the planner clears the answer with the request as it moves on: the executor's log says it)
wait_log "$T/executor.log" "remediation request done node=$N1 id=$id" 10
[ "$(dbe_vol0)" = 0 ] || fail "GPU 0's ECC count after the executor's reset: $(dbe_vol0)"
health $N1 1 0
wait_for 20 "$N1 validating (after the restart)" is_state $N1 validating
# The agent applies the acknowledgement.
has_ann() { [ -n "$(ann "$1" "$2")" ]; }
wait_for 10 "the acknowledgement written" has_ann $N1 remediation.gpuop.dev/ack-seq
health $N1 1 "$(ann $N1 remediation.gpuop.dev/ack-seq)"
in_service() { [ -z "$(state $N1)" ] && ! tainted $N1 && ! cordoned $N1; }
wait_for 30 "$N1 back in service" in_service
t_r=$(now_ms)
echo "fault to back in service: $((t_r - t_fault)) ms (operator killed and restarted on the way)"
[ -n "$(ann $N1 remediation.gpuop.dev/recovered-at)" ] || fail "no recovered-at"
running cpu-0 || fail "the CPU pod did not stay"
grep -q 'node quarantined.*fault_to_quarantine_ms=' "$T/operator.log" || fail "the operator did not log the quarantine's time"
metrics_has "$PORT" '^gpuop_remediation_nodes{state="healthy"} 4' || fail "metrics: $(curl -s "127.0.0.1:$PORT/metrics" | grep gpuop_remediation)"
! metrics_has "$PORT" "^gpuop_remediation_node_state_since_timestamp_seconds{node=\"$N1\"" ||
    fail "$N1 back in service still has a state-since gauge"

# ---- a fault storm: the cluster's breaker ------------------------------------------------------
$K cordon $N2 >/dev/null # an administrator's, before the fault
t=$(now_ms)
health $N2 1 0 3 "$t"
health a100-mig-1 1 0 1 "$t"
breaker_open() { [ -n "$(policy_ann remediation.gpuop.dev/breaker-open)" ]; }
wait_for 10 "the cluster's breaker open" breaker_open
echo "breaker: $(policy_ann remediation.gpuop.dev/breaker-open)"
wait_for 10 "GPURemediation BreakerOpen" condition_is BreakerOpen
sleep 2 # a few passes
for n in $N2 a100-mig-1; do
    [ -z "$(state $n)" ] || fail "$n quarantined with the breaker open: $(state $n)"
    tainted $n && fail "$n tainted with the breaker open"
done
ann $N2 remediation.gpuop.dev/waiting | grep -q "breaker open" || ann a100-mig-1 remediation.gpuop.dev/waiting | grep -q "breaker open" ||
    fail "no node says it waits for the breaker"
$K get events -A --field-selector reason=GPURemediationBreakerOpen -o name | grep -q . || fail "no breaker Event"
n_ev=$($K get events -A --field-selector reason=GPURemediationBreakerOpen -o name | wc -l)
[ "$n_ev" -le 1 ] || fail "$n_ev breaker Events (posted again on every pass?)"

"$B/gpuop" status --color never >"$T/status.txt" 2>&1 || fail "gpuop status: $(cat "$T/status.txt")"
grep -q "^Breaker open: cluster gpu-cluster-policy" "$T/status.txt" || fail "gpuop status does not show the breaker: $(cat "$T/status.txt")"
grep -E "^$N2 +fault +reset-gpu .*breaker open" "$T/status.txt" >/dev/null || fail "gpuop status does not show $N2 waiting: $(cat "$T/status.txt")"

# A person resets it, after the fault on a100-mig-1 went: N2 is quarantined next; it stays
# cordoned, and waits for a person (the default policy takes no action by itself).
health a100-mig-1 1 1
"$B/gpuop" remediation reset >"$T/reset.txt" 2>&1 || fail "gpuop remediation reset: $(cat "$T/reset.txt")"
grep -q "ClusterPolicy gpu-cluster-policy: breaker reset" "$T/reset.txt" || fail "reset: $(cat "$T/reset.txt")"
rc=0
"$B/gpuop" remediation reset --pool nonesuch >"$T/reset.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "a pool that does not exist: exit $rc (not 2): $(cat "$T/reset.txt")"
grep -q "DriverUpgradePool nonesuch: not found" "$T/reset.txt" || fail "reset of nonesuch: $(cat "$T/reset.txt")"
breaker_closed() { ! breaker_open; }
wait_for 10 "the breaker closed" breaker_closed
wait_for 10 "$N2 quarantined" tainted $N2
n_ev=$($K get events -A --field-selector reason=GPURemediationBreakerReset -o name | wc -l)
[ "$n_ev" = 1 ] || fail "$n_ev breaker reset Events (not 1)"
! grep -q "reconcile failed" "$T/operator.log" || fail "a reconcile failed: $(grep "reconcile failed" "$T/operator.log")"
[ "$(ann $N2 remediation.gpuop.dev/cordoned)" != true ] || fail "$N2: the planner claims the administrator's cordon"
sleep 2
is_state $N2 quarantined || fail "$N2 moved without a person: $(state $N2)"
ann $N2 remediation.gpuop.dev/waiting | grep -q "needs a person" || fail "$N2 waiting: $(ann $N2 remediation.gpuop.dev/waiting)"
$K annotate node $N2 remediation.gpuop.dev/approved=true >/dev/null
wait_for 20 "$N2 remediating" is_state $N2 remediating
id=$(ann $N2 remediation.gpuop.dev/request | cut -d' ' -f2)
health $N2 1 0
$K annotate node $N2 --overwrite "remediation.gpuop.dev/request-done=$id" >/dev/null
wait_for 10 "the acknowledgement written on $N2" has_ann $N2 remediation.gpuop.dev/ack-seq
health $N2 1 "$(ann $N2 remediation.gpuop.dev/ack-seq)"
n2_back() { [ -z "$(state $N2)" ] && ! tainted $N2; }
wait_for 30 "$N2 back in service" n2_back
cordoned $N2 || fail "$N2 uncordoned: the administrator's cordon was lost"
kill -TERM "$EX_PID"
wait_exit "$EX_PID" 10
[ "$RC" = 0 ] || fail "the executor exited $RC on SIGTERM"
# The operator stops cleanly (under the sanitizers: no leak, no error at exit).
kill -TERM "$OP_PID"
wait_exit "$OP_PID" 10
[ "$RC" = 0 ] || fail "the operator exited $RC on SIGTERM"
echo "ok: quarantine in $((t_q - t_fault)) ms, back in service in $((t_r - t_fault)) ms; breaker opened and reset; the administrator's cordon kept"
