#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU remediation end to end on a simulated node that runs the whole stack (kubesim, kubelet-sim):
# the operator under its shipped RBAC deploys the operands on a DGX H100 node from the sample
# ClusterPolicy (the node status exporter on); the node's pool makes reset-gpu automatic. A GPU job
# pod and a CPU pod run; an uncorrectable ECC error is injected on GPU 0 (gpuop-sim). The real node
# agent reports it, the operator quarantines the node (the time from the fault measured, < 5 s),
# evicts the GPU pod, keeps the CPU pod, and requests the reset; the executor shipped in the driver
# pod (nvidia-remediation-ctr) resets the GPU with nvidia-smi -r; the agent reports the GPU
# healthy, the validator passes again and the node is back in service. The cycle is timed.
# Then GPU 4 falls off the bus (XID 79, lost) under a second GPU job: the node is quarantined, the
# job evicted, and the action (reboot-node, not one the executor may take live) asked of the
# node-reboot tool (remediation.gpuop.dev/reboot-requested); kubelet-sim reboots the node (its pods
# start again, the driver container loads the driver again, the lost GPU is back), the agent
# reports it healthy, the validator passes and the node is back in service; timed too.
# As root (namespaces per node); skipped otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
H=dgx-h100-1
R=$T/roots/$H
on_fail() {
    k get node $H -o jsonpath='{.metadata.labels}{"\n"}{.metadata.annotations}{"\n"}' 2>/dev/null
    local p
    p=$(k -n gpu-operator get pods -l app=nvidia-device-plugin-daemonset --field-selector spec.nodeName=$H -o jsonpath='{.items[0].metadata.name}' 2>/dev/null)
    [ -n "$p" ] && k -n gpu-operator logs "$p" 2>/dev/null | tail -15
    "$B/gpuop-sim" show 2>/dev/null | head -20
}
export GPUOP_SIM_FLEET=$S/sim/fleets/dgx-h100.yaml GPUOP_SIM_STATE=$R/var/lib/gpuop-sim/nvml
{ sim_cluster; sim_node $H "$S/sim/fleets/dgx-h100.yaml" "$R"; } >"$T/cluster.yaml"
kl_start_cluster 198.18.255.41 "$T/cluster.yaml" klrm0 198.18.241.0/24 1
t_start=$SECONDS
k label node $H pool=train >/dev/null
k apply -f - >/dev/null <<'EOF' || fail "create the pool"
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: train}
spec:
  nodeSelector: {pool: train}
  remediation:
    automatic: [reset-gpu, reboot-node]
    # the second fault comes seconds after the first cycle: no refail window
    refailWindow: 0s
EOF
kl_start_operator --metrics-listen 127.0.0.1:0
python3 - "$S/deploy/samples/clusterpolicy.yaml" >"$T/policy.yaml" <<'PY' || fail "edit the sample"
import sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
spec = cp["spec"]
spec["driver"]["startupProbe"] = {"initialDelaySeconds": 1, "periodSeconds": 1}
spec["driver"]["env"] = [{"name": "SIM_DRIVER_BUILD_SECONDS", "value": "0.5"}]
# the device plugin's recovery period stays at its default (5 min): the GPU the executor resets
# is advertised again as soon as NVML shows it reset and healthy, which the validation waits for
spec["nodeStatusExporter"] = {"enabled": True,
    "env": [{"name": "NODE_STATUS_EXPORTER_INTERVAL", "value": "1s"}]}
print(yaml.safe_dump(cp))
PY
k apply -f "$T/policy.yaml" >/dev/null || fail "apply the ClusterPolicy"

# The executor runs in the driver pod, beside the driver container.
pod_on() { k -n gpu-operator get pods -l "app=$1" --field-selector "spec.nodeName=$H" -o jsonpath='{.items[0].metadata.name}'; }
executor_up() {
    local p
    p=$(pod_on nvidia-driver-daemonset)
    [ -n "$p" ] && k -n gpu-operator logs "$p" -c nvidia-remediation-ctr 2>/dev/null | grep -q "executing remediation requests"
}
wait_for 90 "the executor running in the driver pod" executor_up
wait_for 90 "$H advertises 8 nvidia.com/gpu" want_alloc $H nvidia.com/gpu 8
validator_ready() { [ "$(ready_validators)" = 1 ]; }
wait_for 90 "the validator Ready on $H" validator_ready
ann() { k get node $H -o jsonpath="{.metadata.annotations.${1//./\\.}}"; }
agent_healthy() { ann gpuop.dev/gpu-health | grep -q '"healthy":true'; }
wait_for 30 "the node agent reporting $H healthy" agent_healthy
echo "ok: the stack up on $H in $((SECONDS - t_start)) s: the executor in the driver pod, 8 GPUs, the validator Ready"

# A GPU job (holds its GPU) and a CPU pod.
k apply -f - >/dev/null <<EOF || fail "create the pods"
apiVersion: v1
kind: Pod
metadata: {name: train-0, namespace: default}
spec:
  containers:
  - name: main
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env: [{name: SIM_WORKLOAD_SECONDS, value: "600"}]
    resources: {limits: {nvidia.com/gpu: "1"}}
---
apiVersion: v1
kind: Pod
metadata: {name: cpu-0, namespace: default}
spec:
  nodeName: $H
  containers:
  # a CPU-only container (the simulated images: an image kubelet-sim knows, no GPU asked)
  - {name: main, image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04, command: [sleep, "3600"]}
EOF
running() { [ "$(k get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; }
both_running() { running train-0 && running cpu-0; }
wait_for 30 "the GPU job and the CPU pod running" both_running

# ---- the fault ---------------------------------------------------------------------------------
state() { k get node $H -o jsonpath='{.metadata.labels.remediation\.gpuop\.dev/state}'; }
is_state() { [ "$(state)" = "$1" ]; }
cordoned() { [ "$(k get node $H -o jsonpath='{.spec.unschedulable}')" = true ]; }
tainted() { k get node $H -o jsonpath='{range .spec.taints[*]}{.key}:{.effect}{"\n"}{end}' | grep -qx 'gpuop.dev/gpu-unhealthy:NoSchedule'; }
now_ms() { date +%s%3N; }
t_fault=$(now_ms)
"$B/gpuop-sim" inject ecc --gpu 0 --dbe 1 >/dev/null || fail "inject the ECC error"
quarantined() { tainted && cordoned && [ -n "$(state)" ]; }
wait_for 10 "$H quarantined" quarantined
t_q=$(now_ms)
echo "fault to quarantine: $((t_q - t_fault)) ms (seen by kubectl; the agent's report included)"
limit=$(scaled 5)
[ $((t_q - t_fault)) -le $((limit * 1000)) ] || fail "quarantine took $((t_q - t_fault)) ms (more than $limit s)"
# what the agent reported, as the quarantine's Event names it (an uncorrectable ECC error also
# leaves rows pending remapping: the agent may report either first; both ask for a reset)
q_ev=$(grep -m1 "reason=GPUQuarantined" "$T/operator.log")
grep -Eq "GPU 0 \(GPU-[^)]*\): (uncorrectable ECC|rows pending remapping).*action reset-gpu" <<<"$q_ev" ||
    fail "the quarantine's Event does not name GPU 0's fault: $q_ev"
echo "ok: ${q_ev#*message=}"

gone() { ! k get pod "$1" >/dev/null 2>&1; }
wait_for 20 "the GPU job evicted" gone train-0
running cpu-0 || fail "the CPU pod did not stay"
echo "ok: the GPU job evicted, the CPU pod kept"

# The executor in the driver pod resets GPU 0; the agent sees the count cleared. (The node may
# pass through remediating between two reads: the request is read from the operator's log.)
requested() { grep -q "remediation requested node=$H action=reset-gpu id=" "$T/operator.log"; }
wait_for 20 "the operator's reset-gpu request" requested
req=$(grep -m1 "remediation requested node=$H action=reset-gpu" "$T/operator.log")
echo "request: ${req#* operator }"
id=$(sed 's/.* id=\([^ ]*\).*/\1/' <<<"$req")
[ -n "$id" ] || fail "no request id in: $req"
ex_log() { k -n gpu-operator logs "$(pod_on nvidia-driver-daemonset)" -c nvidia-remediation-ctr 2>/dev/null; }
reset_done() { ex_log | grep -q "remediation request done node=$H id=$id"; }
wait_for 30 "the executor's answer to $id" reset_done
dbe=$("$B/gpuop-sim" show | awk 'index($0, "GPU 0 ") == 1 {on = 1; next} /^GPU / {on = 0}
    on && /ECC errors/ {sub(/.*double-bit [0-9]+ \(volatile /, ""); sub(/\).*/, ""); print; exit}')
[ "$dbe" = 0 ] || fail "GPU 0's volatile double-bit count after the reset: $dbe"
echo "ok: the shipped executor reset GPU 0: $(ex_log | grep -m1 'resetting GPU')"

in_service() { [ -z "$(state)" ] && ! tainted && ! cordoned; }
wait_for 60 "$H back in service" in_service
t_r=$(now_ms)
validator_ready || wait_for 30 "the validator Ready again" validator_ready
running cpu-0 || fail "the CPU pod did not stay"
[ -n "$(ann remediation.gpuop.dev/recovered-at)" ] || fail "no recovered-at on $H"
want_alloc $H nvidia.com/gpu 8 || wait_for 20 "$H advertises 8 GPUs again" want_alloc $H nvidia.com/gpu 8
! grep -q "reconcile failed" "$T/operator.log" || fail "a reconcile failed: $(grep -m3 "reconcile failed" "$T/operator.log")"
echo "ok: quarantine in $((t_q - t_fault)) ms; the whole cycle, fault to back in service: $((t_r - t_fault)) ms (test wall time $((SECONDS - t_start)) s)"

# ---- a GPU falls off the bus: a reboot ---------------------------------------------------------
t_start2=$SECONDS
k apply -f - >/dev/null <<EOF || fail "create the second GPU job"
apiVersion: v1
kind: Pod
metadata: {name: train-1, namespace: default}
spec:
  containers:
  - name: main
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env: [{name: SIM_WORKLOAD_SECONDS, value: "600"}]
    resources: {limits: {nvidia.com/gpu: "8"}}
EOF
wait_for 30 "the second GPU job running on all 8 GPUs" running train-1
# A one-node pool: its breaker (and the cluster's) allows one quarantine an hour, so a person
# resets them after the first cycle; they count only the quarantines after the reset.
"$B/gpuop" remediation reset --pool train >"$T/reset.txt" 2>&1 &&
    "$B/gpuop" remediation reset >>"$T/reset.txt" 2>&1 || fail "gpuop remediation reset: $(cat "$T/reset.txt")"
boot0=$(k get node $H -o jsonpath='{.status.nodeInfo.bootID}')
t_fault=$(now_ms)
"$B/gpuop-sim" inject lost --gpu 4 >/dev/null || fail "inject lost on GPU 4"
wait_for 10 "$H quarantined for the lost GPU" quarantined
t_q=$(now_ms)
echo "lost GPU: fault to quarantine: $((t_q - t_fault)) ms"
[ $((t_q - t_fault)) -le $((limit * 1000)) ] || fail "quarantine took $((t_q - t_fault)) ms (more than $limit s)"
q_ev=$(grep "reason=GPUQuarantined" "$T/operator.log" | grep -m1 "action reboot-node")
[ -n "$q_ev" ] || fail "no quarantine Event with action reboot-node: $(grep "reason=GPUQuarantined" "$T/operator.log" | tail -2)"
grep -Eq "GPU 4 \(GPU-[^)]*\)" <<<"$q_ev" || fail "the quarantine's Event does not name GPU 4: $q_ev"
echo "ok: ${q_ev#*message=}"
tainted_with() {
    local t
    t=$(k get node $H -o jsonpath='{range .spec.taints[*]}{.key}={.value}:{.effect}{"\n"}{end}')
    grep -qx "gpuop.dev/gpu-unhealthy=$1:NoSchedule" <<<"$t"
}
tainted_with reboot-node || fail "the taint does not name reboot-node: $(k get node $H -o jsonpath='{.spec.taints}')"
wait_for 20 "the second GPU job evicted" gone train-1
running cpu-0 || fail "the CPU pod did not stay"
rebooted() { [ "$(ann remediation.gpuop.dev/reboot-done)" = "$(ann remediation.gpuop.dev/reboot-requested)" ] &&
    [ -n "$(ann remediation.gpuop.dev/reboot-done)" ]; }
reboot_req() { grep -q "remediation requested node=$H action=reboot-node id=" "$T/operator.log"; }
wait_for 20 "the operator's reboot request" reboot_req
req=$(grep -m1 "remediation requested node=$H action=reboot-node" "$T/operator.log")
echo "request: ${req#* operator }"
# the executor leaves a reboot to the node-reboot tool: it never answers it
ex_log | grep -q "request.*reboot" && fail "the executor acted on the reboot: $(ex_log | grep -m2 reboot)"
rebooted_seen() { grep -q "node rebooted" "$T/kubelet-sim.log"; }
wait_for 30 "kubelet-sim rebooting $H" rebooted_seen
t_boot=$(now_ms)
boot1=$(k get node $H -o jsonpath='{.status.nodeInfo.bootID}')
[ "$boot1" != "$boot0" ] || fail "the boot ID did not change"
"$B/gpuop-sim" show | grep -q LOST && fail "GPU 4 still lost after the reboot"
echo "ok: kubelet-sim rebooted $H (boot ID $boot0 -> $boot1), $((t_boot - t_fault)) ms after the fault"
wait_for 90 "$H back in service after the reboot" in_service
t_r=$(now_ms)
[ -z "$(ann remediation.gpuop.dev/reboot-requested)" ] || fail "the reboot request stayed on $H"
validator_ready || wait_for 30 "the validator Ready again" validator_ready
wait_for 30 "$H advertises 8 GPUs after the reboot" want_alloc $H nvidia.com/gpu 8
wait_for 30 "the CPU pod running again after the reboot" running cpu-0
[ -f "$R/sys/module/nvidia/version" ] || fail "the driver is not loaded after the reboot"
[ "$(grep -c 'node rebooting' "$T/kubelet-sim.log")" = 1 ] || fail "rebooted more than once"
! grep -q "reconcile failed" "$T/operator.log" || fail "a reconcile failed: $(grep -m3 "reconcile failed" "$T/operator.log")"
echo "ok: lost GPU: quarantine in $((t_q - t_fault)) ms; fault to reboot $((t_boot - t_fault)) ms; fault to back in service: $((t_r - t_fault)) ms (phase wall time $((SECONDS - t_start2)) s)"
