#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# NVIDIA's GPUCluster end to end on a simulated DGX H100 node: kubesim, kubelet-sim, the operator
# under its shipped RBAC, every operand pod a process. A GPUCluster alone (applied with the pinned
# kubectl) brings up the DRA stack: the driver, toolkit, validator, feature discovery and
# exporter as for a ClusterPolicy, no device plugin, and the DRA kubelet plugin (`gpuop
# dra-plugin`) with NVIDIA's DeviceClasses. The plugin publishes the node's ResourceSlice; a pod
# whose claim asks for an H100 with at least 80 GB runs the CUDA sample on exactly the allocated
# GPU; `gpuop status` shows the devices, the claim, and the capacity view counting them (and a
# DeviceClass quota); the GPUCluster turns ready. A ClusterPolicy applied beside it is refused (both say
# ConflictingResources, with an Event) and nothing of the running stack changes; deleted, the
# GPUCluster goes on. As root (namespaces per node); skipped otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
on_fail() {
    k -n gpu-operator get pods -o wide 2>/dev/null
    k get gpucluster gpu-cluster -o jsonpath='{.status.state}{"\n"}{range .status.conditions[*]}{.type}={.status}: {.message}{"\n"}{end}' 2>/dev/null
    tail -n 30 "$T/operator.log" 2>/dev/null
}
N=gpucl-h100-1
R=$T/roots/$N
{ sim_cluster; sim_node $N "$S/sim/fleets/dgx-h100.yaml" "$R"; } >"$T/cluster.yaml"
kl_start_cluster 198.18.255.62 "$T/cluster.yaml" klgpucl0 198.18.249.0/24 1
log_file "$T/operator.log"
P=$(free_port)
kl_start_operator --metrics-listen "127.0.0.1:$P" --leader-elect false

k apply -f - >/dev/null <<EOF2 || fail "apply the GPUCluster"
apiVersion: nvidia.com/v1alpha1
kind: GPUCluster
metadata: {name: gpu-cluster}
spec:
  draDriver:
    gpus:
      kubeletPlugin:
        env: [{name: DRA_RESYNC, value: 2s}]
    computeDomains: {enabled: false}
EOF2
t0=$SECONDS
wait_for 60 "the DRA kubelet plugin pod on $N" sh -c "[ \"\$($K -n gpu-operator get pods -l app=nvidia-dra-driver-gpu-kubelet-plugin -o jsonpath='{.items[0].spec.nodeName}')\" = $N ]"
owner=$(k get deviceclass gpu.nvidia.com -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')
[ "$owner" = GPUCluster/gpu-cluster ] || fail "DeviceClass gpu.nvidia.com's owner: $owner"
ext=$(k get deviceclass gpu.nvidia.com -o jsonpath='{.spec.extendedResourceName}')
[ "$ext" = nvidia.com/gpu ] || fail "DeviceClass gpu.nvidia.com's extendedResourceName: $ext"
k get deviceclass mig.nvidia.com >/dev/null || fail "no DeviceClass mig.nvidia.com"
[ -z "$(k -n gpu-operator get daemonset nvidia-device-plugin-daemonset -o name 2>/dev/null)" ] ||
    fail "a GPUCluster deployed the device plugin"
echo "ok: the GPUCluster rendered the DRA kubelet plugin and NVIDIA's DeviceClasses (owned by it), no device plugin"

slice=$N-gpu.nvidia.com-0
devices() { k get resourceslice $slice -o jsonpath='{range .spec.devices[*]}{.name} {end}' 2>/dev/null; }
is_devices() { [ "$(devices)" = "$1" ]; }
wait_for 180 "the plugin's ResourceSlice with 8 GPUs" is_devices "gpu-0 gpu-1 gpu-2 gpu-3 gpu-4 gpu-5 gpu-6 gpu-7 "
echo "ok: ResourceSlice $slice published $((SECONDS - t0)) s after the GPUCluster was applied"

cat >"$T/train.yaml" <<EOF2
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: h100-80g, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel: {expression: "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80G')) >= 0"}
---
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: default}
spec:
  restartPolicy: Never
  resourceClaims: [{name: gpu, resourceClaimTemplateName: h100-80g}]
  containers:
  - name: cuda
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env: [{name: SIM_WORKLOAD_SECONDS, value: "2"}]
    command: [sh, -c, 'cd /dev && ls | grep "^nvidia[0-9]" | sort; cuda-sample']
    resources: {claims: [{name: gpu}]}
EOF2
k apply -f "$T/train.yaml" >/dev/null || fail "apply the claim template and the pod"
phase() { k get pod "$1" -o jsonpath='{.status.phase}'; }
is_phase() { [ "$(phase "$1")" = "$2" ]; }
wait_for 60 "train runs" is_phase train Running
claim=$(k get pod train -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
dev=$(k get resourceclaim "$claim" -o jsonpath='{.status.allocation.devices.results[0].device}')
case $dev in gpu-[0-7]) ;; *) fail "train's claim got \"$dev\"" ;; esac
wait_for 60 "train completes" is_phase train Succeeded
log=$(k logs train) || fail "logs of train"
grep -q "Test PASSED" <<<"$log" || fail "train's CUDA sample: $log"
[ "$(grep '^nvidia[0-9]' <<<"$log")" = "nvidia${dev#gpu-}" ] || fail "train's /dev for $dev: $log"
echo "ok: a claim for an H100 with at least 80 GB: $dev alone in the container, the CUDA sample passed"

# gpuop status while a claim holds a GPU: the node's devices and the claim with its pod; the
# capacity view counts the published GPUs as advertised, the held one as requested, and a
# quota on the DeviceClass's devices as a quota on nvidia.com/gpu
k apply -f - >/dev/null <<EOF2 || fail "apply the DRA quota"
apiVersion: v1
kind: ResourceQuota
metadata: {name: dra-gpus, namespace: default}
spec:
  hard: {gpu.nvidia.com.deviceclass.resource.k8s.io/devices: "4"}
EOF2
sed -e 's/name: train/name: hold/' -e 's/value: "2"/value: "120"/' -e '/^---$/,$!d' "$T/train.yaml" |
    k apply -f - >/dev/null || fail "apply the pod hold"
wait_for 60 "hold runs" is_phase hold Running
held=$(k get pod hold -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
hdev=$(k get resourceclaim "$held" -o jsonpath='{.status.allocation.devices.results[0].device}')
st=$("$B/gpuop" status --kubeconfig "$KUBECONFIG" 2>&1) || fail "gpuop status: $st"
row=$(grep "^$N " <<<"$(sed -n '/^DRA (gpu.nvidia.com)/,/^$/p' <<<"$st")")
[[ $row == *"8 (8 gpu)"*"1/8"*"default/$held: $hdev (pod hold)"* ]] || fail "gpuop status's DRA section: $st"
echo "ok: gpuop status: $row"
js=$("$B/gpuop" status -o json --kubeconfig "$KUBECONFIG" 2>&1) || fail "gpuop status -o json: $js"
cap=$(python3 -c '
import json, sys
m = json.load(sys.stdin)["capacity"]
r = [x for x in m["resources"] if x["name"] == "nvidia.com/gpu"][0]
n = [x for x in m["namespaces"] if x["name"] == "default"][0]["resources"]
n = [x for x in n if x["name"] == "nvidia.com/gpu"][0]
print(r["advertised"], r["requested"], r["quota"], n["requested"], n.get("hard"))' <<<"$js") ||
    fail "gpuop status -o json's capacity view: $js"
[ "$cap" = "8 1 4 1 4" ] || fail "the capacity view (advertised requested quota, default's requested hard): $cap"
echo "ok: the capacity view counts DRA: 8 GPUs advertised, 1 requested (the held claim), the DeviceClass quota 4"
# the operator's view, in its metrics (its DRA informers start once resource.k8s.io/v1 lists)
metric() { curl -sf "127.0.0.1:$P/metrics" | awk -v m="$1" '$1 ~ "^"m"[{]" && $1 ~ /resource="nvidia.com\/gpu"/ {s += $2} END {print s + 0}'; }
is_metric() { [ "$(metric "$1")" = "$2" ]; }
wait_for 30 "the operator's gpuop_gpu_requested at 1" is_metric gpuop_gpu_requested 1
is_metric gpuop_gpu_capacity 8 || fail "the operator's gpuop_gpu_capacity: $(curl -sf "127.0.0.1:$P/metrics" | grep gpuop_gpu_)"
echo "ok: the operator's metrics: gpuop_gpu_capacity 8, gpuop_gpu_requested 1 (DRA)"
k delete pod hold --grace-period=0 >/dev/null 2>&1

state() { k get gpucluster gpu-cluster -o jsonpath='{.status.state}'; }
is_state() { [ "$(state)" = "$1" ]; }
wait_for 180 "the GPUCluster ready" is_state ready
cond() { k get "$1" "$2" -o jsonpath="{.status.conditions[?(@.type==\"$3\")].status}/{.status.conditions[?(@.type==\"$3\")].reason}"; }
[ "$(cond gpucluster gpu-cluster DRADriverReady)" = True/Ready ] ||
    fail "DRADriverReady: $(cond gpucluster gpu-cluster DRADriverReady)"
echo "ok: GPUCluster ready $((SECONDS - t0)) s after it was applied"

# A ClusterPolicy beside it: refused, both objects say so, nothing of the stack changes.
uid_of() { k -n gpu-operator get daemonset "$1" -o jsonpath='{.metadata.uid}/{.metadata.generation}'; }
before=$(uid_of nvidia-dra-driver-gpu-kubelet-plugin)
k apply -f "$S/deploy/samples/clusterpolicy.yaml" >/dev/null || fail "apply the sample ClusterPolicy"
cp=$(k get clusterpolicy -o jsonpath='{.items[0].metadata.name}')
refused() {
    [ "$(cond clusterpolicy "$cp" Ready)" = False/ConflictingResources ] &&
        [ "$(cond gpucluster gpu-cluster Ready)" = False/ConflictingResources ]
}
wait_for 30 "both refused with ConflictingResources" refused
msg=$(k get clusterpolicy "$cp" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')
grep -q 'conflicting GPUCluster resource "gpu-cluster" found: a GPUCluster and a ClusterPolicy cannot co-exist' <<<"$msg" ||
    fail "the ClusterPolicy's message: $msg"
event() { k -n gpu-operator get events --field-selector "involvedObject.kind=$1,reason=ConflictingResources" -o name | grep -q .; }
wait_for 20 "a ConflictingResources Event about the GPUCluster" event GPUCluster
wait_for 20 "a ConflictingResources Event about the ClusterPolicy" event ClusterPolicy
sleep "$(scaled 3)"
[ "$(uid_of nvidia-dra-driver-gpu-kubelet-plugin)" = "$before" ] || fail "the DRA plugin's DaemonSet changed under the refusal"
[ -z "$(k -n gpu-operator get daemonset nvidia-device-plugin-daemonset -o name 2>/dev/null)" ] ||
    fail "the refused ClusterPolicy deployed the device plugin"
is_devices "gpu-0 gpu-1 gpu-2 gpu-3 gpu-4 gpu-5 gpu-6 gpu-7 " || fail "the slice after the refusal: $(devices)"
echo "ok: a ClusterPolicy beside the GPUCluster refused (ConflictingResources on both, Events), the DRA stack untouched"

k delete clusterpolicy "$cp" >/dev/null || fail "delete the ClusterPolicy"
wait_for 60 "the GPUCluster ready again" is_state ready
[ "$(uid_of nvidia-dra-driver-gpu-kubelet-plugin)" = "$before" ] || fail "the DRA plugin's DaemonSet was replaced"
echo "ok: the ClusterPolicy deleted, the GPUCluster ready again with the same DaemonSets"

stop_kubelet_sim
echo "ok"
