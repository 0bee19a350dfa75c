#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A pool moved from the device plugin to DRA, node by node, with no GPU pod lost: kubesim,
# kubelet-sim with three PCIe L4 servers (4 GPUs each) in one DriverUpgradePool, the operator
# under its shipped RBAC with a ClusterPolicy (maxUnavailable 1), every operand pod a process.
# A Deployment of three pods asking nvidia.com/gpu: 1 (a PodDisruptionBudget keeps two available)
# runs under the device plugin; the pool's
# spec.gpuAllocation set to dra (applied with the pinned kubectl) moves its nodes one at a time:
# cordoned, GPU pods evicted (made again by their ReplicaSet on a schedulable node), the device
# plugin turned off and gone, the DRA kubelet plugin turned on, its ResourceSlice published,
# uncordoned. The operator is killed (SIGKILL) while the first node is in the middle of its move
# (held in its drain by the PodDisruptionBudget, which asks all three available until then) and
# started again: it resumes from the node's annotations. Every node and pod change the API server
# served is recorded and replayed in order: never two nodes cordoned at once, never a GPU pod
# Failed, the three always Running or being admitted again, never fewer than two Ready. At the end every node publishes its
# ResourceSlice and runs no device plugin, the three pods run on DRA nodes through the
# DeviceClass's extendedResourceName, a claim-based pod runs the CUDA sample, and the pool's
# status says 3/3. Then back to the device plugin the same way: the nodes' ResourceSlices deleted,
# the DRA stack removed, the pods served by the device plugin again. As root (namespaces per
# node); skipped otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
on_fail() {
    k get nodes -L gpuop.dev/gpu-allocation -L nvidia.com/gpu.deploy.device-plugin \
        -L gpuop.dev/gpu.deploy.dra-kubelet-plugin 2>/dev/null
    k get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.annotations.upgrade\.gpuop\.dev/allocation-move}{"\n"}{end}' 2>/dev/null
    k -n gpu-operator get pods -o wide 2>/dev/null
    k -n work get pods -o wide 2>/dev/null
    k get dup serving -o jsonpath='{.status.gpuAllocation}{"\n"}' 2>/dev/null
    tail -n 40 "$T/operator.log" 2>/dev/null
}
W="/usr/bin/python3 $S/tests/upgrade/e2e_watch.py"
NODES="pool-1 pool-2 pool-3"
t_start=$SECONDS
{
    sim_cluster
    for n in $NODES; do
        sim_node "$n" "$S/sim/fleets/pcie-l4.yaml" "$T/roots/$n" 'labels: {gpuop.test/pool: serving}'
    done
} >"$T/cluster.yaml"
kl_start_cluster 198.18.255.64 "$T/cluster.yaml" kldrapool0 198.18.190.0/24 3
echo "ok: 3 nodes registered by kubelet-sim ($((SECONDS - t_start)) s)"

k apply -f - >/dev/null <<'EOF' || fail "apply the pool"
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: serving}
spec:
  nodeSelector: {gpuop.test/pool: serving}
  gpuAllocation: devicePlugin
EOF
kl_start_operator --leader-elect false
python3 - "$S/deploy/samples/clusterpolicy.yaml" >"$T/policy.yaml" <<'PY' || fail "edit the sample"
import sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
spec = cp["spec"]
spec["driver"]["startupProbe"] = {"initialDelaySeconds": 2, "periodSeconds": 2}
spec["driver"]["upgradePolicy"] = {"autoUpgrade": True, "maxUnavailable": 1}
for c in ("dcgmExporter", "migManager", "nodeStatusExporter"):
    spec[c] = {"enabled": False}
print(yaml.safe_dump(cp))
PY
k apply -f "$T/policy.yaml" >/dev/null || fail "apply the ClusterPolicy"
for n in $NODES; do
    wait_for 150 "$n: the device plugin advertising 4 GPUs" want_alloc "$n" nvidia.com/gpu 4
done
[ -z "$(k -n gpu-operator get daemonset nvidia-dra-driver-gpu-kubelet-plugin -o name 2>/dev/null)" ] ||
    fail "the DRA kubelet plugin rendered while no pool asks for DRA"
echo "ok: the stack is up under the device plugin on the 3 nodes ($((SECONDS - t_start)) s)"

k apply -f - >/dev/null <<'EOF' || fail "create the workload"
apiVersion: v1
kind: Namespace
metadata: {name: work}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: serve, namespace: work}
spec:
  replicas: 3
  selector: {matchLabels: {app: serve}}
  template:
    metadata: {labels: {app: serve}}
    spec:
      containers:
      - name: main
        image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
        env: [{name: SIM_WORKLOAD_SECONDS, value: "3600"}]
        resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: serve, namespace: work}
spec:
  minAvailable: 3 # lowered to 2 once the operator has been killed mid-move (below)
  selector: {matchLabels: {app: serve}}
EOF
ready_serve() {
    k -n work get pods -l app=serve -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True
}
is_ready_serve() { [ "$(ready_serve)" = "$1" ]; }
wait_for 60 "3 serve pods Ready" is_ready_serve 3
echo "ok: 3 pods asking nvidia.com/gpu: 1 run under the device plugin"

$W watch "$T/nodes.jsonl" $KUBECTL >"$T/watch.log" 2>&1 &
pids+=($!)
$W pods "$T/pods.jsonl" work $KUBECTL >"$T/watch-pods.log" 2>&1 &
pids+=($!)
sleep "$(scaled 2)"

t_move=$SECONDS
k patch dup serving --type merge -p '{"spec":{"gpuAllocation":"dra"}}' >/dev/null || fail "switch the pool to dra"
wait_for 60 "the DRA kubelet plugin's DaemonSet rendered" \
    sh -c "$K -n gpu-operator get daemonset nvidia-dra-driver-gpu-kubelet-plugin -o name | grep -q ."
ext=$(k get deviceclass gpu.nvidia.com -o jsonpath='{.spec.extendedResourceName}')
[ "$ext" = nvidia.com/gpu ] || fail "DeviceClass gpu.nvidia.com's extendedResourceName: \"$ext\""

# Killed in the middle of a node's move, started again: it goes on from the node's annotations.
# The PodDisruptionBudget (all 3 available) holds the first node in its drain, cordoned, so the
# kill lands mid-move on any machine (the other steps can take less than a poll).
move_of() { k get node "$1" -o jsonpath='{.metadata.annotations.upgrade\.gpuop\.dev/allocation-move}'; }
mid_move() { for n in $NODES; do case $(move_of "$n") in "dra drain") [ "$(k get node "$n" -o jsonpath='{.spec.unschedulable}')" = true ] && return 0 ;; esac; done; return 1; }
wait_for 120 "a node cordoned in the middle of its move, held by the PodDisruptionBudget" mid_move
kill -9 "$KL_OPERATOR_PID"
wait "$KL_OPERATOR_PID" 2>/dev/null
moving=$(for n in $NODES; do [ -n "$(move_of "$n")" ] && echo "$n: $(move_of "$n")"; done)
echo "ok: the operator killed while $moving"
sleep "$(scaled 2)"
kl_start_operator --leader-elect false
k -n work patch pdb serve --type merge -p '{"spec":{"minAvailable":2}}' >/dev/null || fail "lower the PodDisruptionBudget"

on_dra() {
    [ "$(label "$1" gpuop.dev/gpu-allocation)" = dra ] && [ -z "$(move_of "$1")" ] &&
        [ "$(k get node "$1" -o jsonpath='{.spec.unschedulable}')" != true ]
}
for n in $NODES; do
    wait_for 240 "$n moved to DRA and uncordoned" on_dra "$n"
done
echo "ok: the pool moved to DRA in $((SECONDS - t_move)) s"

for n in $NODES; do
    is_label "$n" nvidia.com/gpu.deploy.device-plugin false || fail "$n: the device plugin's deploy label: $(label "$n" nvidia.com/gpu.deploy.device-plugin)"
    devs=$(k get resourceslice "$n-gpu.nvidia.com-0" -o jsonpath='{range .spec.devices[*]}{.name} {end}' 2>/dev/null)
    [ "$devs" = "gpu-0 gpu-1 gpu-2 gpu-3 " ] || fail "$n's ResourceSlice: \"$devs\""
done
[ -z "$(pods_of nvidia-device-plugin-daemonset)" ] || fail "device plugin pods left: $(pods_of nvidia-device-plugin-daemonset)"
[ "$(pods_of nvidia-dra-driver-gpu-kubelet-plugin)" = "pool-1 pool-2 pool-3 " ] ||
    fail "DRA kubelet plugin pods on: $(pods_of nvidia-dra-driver-gpu-kubelet-plugin)"
echo "ok: every node publishes its 4 GPUs in a ResourceSlice; no device plugin runs"
moved_event() {
    k -n default get events --field-selector "involvedObject.name=$1,reason=GPUAllocationMove" \
        -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' | grep -q "^Moved to dra: the DRA kubelet plugin serves its GPUs; uncordoned$"
}
for n in $NODES; do wait_for 20 "$n's GPUAllocationMove Event of its move's end" moved_event "$n"; done
echo "ok: each node's steps posted as GPUAllocationMove Events"

wait_for 60 "3 serve pods Ready on DRA" is_ready_serve 3
served=$(k -n work get pods -l app=serve -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName} {.status.extendedResourceClaimStatus.resourceClaimName}{"\n"}{end}')
while read -r pod node claim; do
    [ -n "$claim" ] || fail "pod $pod on $node is not served through the DeviceClass's extendedResourceName"
    dev=$(k -n work get resourceclaim "$claim" -o jsonpath='{.status.allocation.devices.results[0].pool}/{.status.allocation.devices.results[0].device}')
    case $dev in "$node"/gpu-[0-3]) ;; *) fail "pod $pod's claim $claim: $dev" ;; esac
done <<<"$served"
echo "ok: the 3 pods asking nvidia.com/gpu: 1 run on DRA nodes through the extended-resource mapping"

k apply -f - >/dev/null <<'EOF' || fail "apply the claim pod"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-l4, namespace: work}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel: {expression: "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L4'"}
---
apiVersion: v1
kind: Pod
metadata: {name: claimed, namespace: work}
spec:
  restartPolicy: Never
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-l4}]
  containers:
  - name: cuda
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env: [{name: SIM_WORKLOAD_SECONDS, value: "1"}]
    resources: {claims: [{name: gpu}]}
EOF
phase() { k -n work get pod claimed -o jsonpath='{.status.phase}'; }
is_phase() { [ "$(phase)" = "$1" ]; }
wait_for 60 "the claim's pod completes" is_phase Succeeded
k -n work logs claimed | grep -q "Test PASSED" || fail "the claim's CUDA sample: $(k -n work logs claimed)"
echo "ok: a claim-based pod ran the CUDA sample"

progress() { k get dup serving -o jsonpath='{.status.gpuAllocation.target} {.status.gpuAllocation.progress}'; }
is_progress() { [ "$(progress)" = "$1" ]; }
wait_for 30 "the pool's status: dra 3/3" is_progress "dra 3/3"
echo "ok: the pool's status.gpuAllocation: $(progress)"
st=$("$B/gpuop" status --kubeconfig "$KUBECONFIG" 2>&1) || fail "gpuop status: $st"
row=$(sed -n '/^GPU allocation per DriverUpgradePool/,/^$/p' <<<"$st" | grep '^serving ')
[[ $row == *dra*3/3* ]] || fail "gpuop status's GPU allocation section: $st"
echo "ok: gpuop status: $row"

# And back: the same steps the other way; leaving DRA, a node's ResourceSlices are deleted once
# its plugin stopped, and with no node on DRA the DRA stack goes.
k -n work delete pod claimed --wait=false >/dev/null 2>&1
t_back=$SECONDS
k patch dup serving --type merge -p '{"spec":{"gpuAllocation":"devicePlugin"}}' >/dev/null ||
    fail "switch the pool back to devicePlugin"
on_dp() {
    [ "$(label "$1" gpuop.dev/gpu-allocation)" = devicePlugin ] && [ -z "$(move_of "$1")" ] &&
        [ "$(k get node "$1" -o jsonpath='{.spec.unschedulable}')" != true ] && want_alloc "$1" nvidia.com/gpu 4
}
for n in $NODES; do
    wait_for 240 "$n back on the device plugin, advertising 4 GPUs" on_dp "$n"
done
[ -z "$(k get resourceslices -o name)" ] || fail "ResourceSlices left: $(k get resourceslices -o name)"
no_dra_stack() {
    [ -z "$(k -n gpu-operator get daemonset nvidia-dra-driver-gpu-kubelet-plugin -o name 2>/dev/null)" ] &&
        [ -z "$(k get deviceclass gpu.nvidia.com -o name 2>/dev/null)" ]
}
wait_for 60 "the DRA stack removed" no_dra_stack
wait_for 60 "3 serve pods Ready on the device plugin" is_ready_serve 3
[ -z "$(k -n work get pods -l app=serve -o jsonpath='{.items[*].status.extendedResourceClaimStatus.resourceClaimName}')" ] ||
    fail "serve pods still served through DRA"
echo "ok: the pool moved back to the device plugin in $((SECONDS - t_back)) s: no ResourceSlice left, the DRA stack removed, the 3 pods served by the device plugin"

sleep "$(scaled 2)"
$W limits "$T/nodes.jsonl" 1 || fail "more than one node cordoned at once"
python3 - "$T/pods.jsonl" <<'PY' || fail "a GPU pod was lost"
import json, sys
cur, low, low_live, seen3, failed = {}, 3, 3, False, []
gone, made = 0, 0
for line in open(sys.argv[1]):
    v = json.loads(line)
    if v["app"] != "serve":
        continue
    if v["deleted"]:
        gone += seen3 and v["pod"] in cur
        cur.pop(v["pod"], None)
    else:
        made += seen3 and v["pod"] not in cur
        cur[v["pod"]] = v
    if v["phase"] == "Failed":
        failed.append(v["pod"])
    ready = sum(1 for x in cur.values() if x["ready"] and not x["deleting"])
    # an evicted pod runs until it is gone, and its ReplicaSet makes the next one
    live = sum(1 for x in cur.values() if x["phase"] in ("Pending", "Running"))
    seen3 = seen3 or ready == 3
    if seen3:
        low, low_live = min(low, ready), min(low_live, live)
if failed:
    sys.exit(f"FAIL: GPU pods Failed: {failed}")
if low < 2 or low_live < 2:
    sys.exit(f"FAIL: at one point {low} of the 3 serve pods Ready, {low_live} Running or pending")
running = sum(1 for x in cur.values() if x["phase"] == "Running" and x["ready"])
if gone == 0 or made != gone or running != 3:
    sys.exit(f"FAIL: {gone} pods evicted, {made} made again, {running} Running at the end")
print(f"ok: pod changes replayed: {gone} GPU pods evicted and each made again, none Failed, "
      f"never fewer than {low} of 3 Ready")
PY
stop_kubelet_sim
echo "ok"
