#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Dynamic Resource Allocation on a simulated node (kubesim, kubelet-sim, a DRA kubelet plugin
# over real gRPC, tests/kubelet/kl_dra_plugin.py), every pod a process:
#  - the plugin registers through the plugin watcher (a socket in plugins_registry, GetInfo,
#    NotifyRegistrationStatus); one with no version kubelet-sim serves is refused;
#  - a pod's claim made from a template is allocated by kubesim's scheduler, prepared by the
#    plugin before the pod's containers start (NodePrepareResources), and the container gets the
#    CDI device the plugin returned; when the pod ends the claim is unprepared
#    (NodeUnprepareResources) and deleted;
#  - a pod asking a DeviceClass's extended resource gets its device the same way;
#  - a plugin's failure and a plugin gone leave the pod's containers unstarted, with the
#    kubelet's FailedPrepareDynamicResources event.
# Needs root (namespaces) and python3-grpcio; skips (77) saying so otherwise.
set -uo pipefail
B=${GPUOP_BUILD_ROOT:?}
S=${GPUOP_SOURCE_ROOT:?}
PY=/usr/bin/python3
. "$S/tests/kubelet/lib.sh"
$PY -c 'import grpc, grpc_tools' 2>/dev/null || skip "python3-grpcio / grpc_tools missing"
N=dra-h100-1
R=$T/roots/$N
{ sim_cluster; sim_node $N "$S/sim/fleets/dgx-h100.yaml" "$R"; } >"$T/cluster.yaml"
start_kubesim --api-ip 198.18.255.34 --tls
start_kubelet_sim "$T/cluster.yaml" 1 --bridge kldra0 --subnet 198.18.234.0/24

# a plugin speaking only a version kubelet-sim does not serve is refused, and told why
$PY "$S/tests/kubelet/kl_dra_plugin.py" "$R" old.example.com "$KUBECTL" "$KUBECONFIG" \
    "$T/old-plugin.log" --versions v1beta1.DRAPlugin >"$T/old-plugin.out" 2>&1 &
OLD_PID=$!
pids+=($OLD_PID)
wait_for 20 "the old plugin told" grep -q "registered=False" "$T/old-plugin.log"
grep -q "registered=False error=invalid versions of plugin old.example.com: none of the supported services \[v1beta1.DRAPlugin\]" \
    "$T/old-plugin.log" || fail "the old plugin's refusal: $(cat "$T/old-plugin.log")"
kill "$OLD_PID"

$PY "$S/tests/kubelet/kl_dra_plugin.py" "$R" gpu.nvidia.com "$KUBECTL" "$KUBECONFIG" \
    "$T/plugin.log" --fail-claim bad- >"$T/plugin.out" 2>&1 &
PLUGIN_PID=$!
pids+=($PLUGIN_PID)
wait_for 20 "the plugin registered" grep -q "registered=True" "$T/plugin.log"
echo "ok: the DRA plugin registered through the plugin watcher"

{
    cat <<EOF
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
  extendedResourceName: nvidia.com/gpu
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: $N-gpu.nvidia.com}
spec:
  driver: gpu.nvidia.com
  nodeName: $N
  pool: {name: $N, generation: 1, resourceSliceCount: 1}
  devices:
EOF
    for i in 0 1 2 3; do
        printf '  - name: gpu-%s\n    attributes: {index: {int: %s}, type: {string: gpu}}\n' $i $i
    done
    cat <<EOF
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu-two, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel: {expression: "device.attributes['gpu.nvidia.com'].index == 2"}
EOF
} >"$T/dra.yaml"
k apply -f "$T/dra.yaml" >/dev/null || fail "apply the class, slice and template"

pod() { # name claim|extended
    local claims='' resources='limits: {nvidia.com/gpu: 1}'
    if [ "$2" = claim ]; then
        claims='resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-two}]'
        resources='claims: [{name: gpu}]'
    fi
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  restartPolicy: Never
  $claims
  containers:
  - name: main
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    command: [sh, -c, 'env | grep "^DRA_" | sort; echo end']
    resources: {$resources}
EOF
}
phase() { k get pod "$1" -o jsonpath='{.status.phase}'; }
is_phase() { [ "$(phase "$1")" = "$2" ]; }

# a claim from the template: allocated (gpu-2), prepared, its CDI device in the container
pod train claim | k apply -f - >/dev/null || fail "pod train"
wait_for 30 "train Succeeded" is_phase train Succeeded
claim=$(k get pod train -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
uid=$(grep -o "prepare default/$claim [0-9a-f-]*" "$T/plugin.log" | awk '{print $3}')
[ -n "$uid" ] || fail "the plugin prepared no claim $claim: $(cat "$T/plugin.log")"
out=$(k logs train) || fail "logs of train"
[ "$out" = "DRA_GPU_2=gpu
end" ] || fail "train's DRA devices: $out"
wait_for 20 "claim $claim unprepared" grep -q "unprepare default/$claim $uid" "$T/plugin.log"
[ ! -e "$R/var/run/cdi/gpu.nvidia.com-$uid.json" ] || fail "the claim's CDI spec stayed"
wait_for 20 "claim $claim deleted" sh -c "! $K get resourceclaim $claim >/dev/null 2>&1"
echo "ok: a template's claim prepared, its device in the container, unprepared and deleted"

# a DeviceClass's extended resource on a node without a device plugin for it
pod legacy extended | k apply -f - >/dev/null || fail "pod legacy"
wait_for 30 "legacy Succeeded" is_phase legacy Succeeded
out=$(k logs legacy) || fail "logs of legacy"
case $out in DRA_GPU_[0-3]=container-0-request-0$'\n'end) ;; *) fail "legacy's DRA devices: $out" ;; esac
echo "ok: a DeviceClass's extended resource served by DRA"

# the plugin fails a claim: no container starts, the kubelet's event says why
pod bad claim | k apply -f - >/dev/null || fail "pod bad"
ev() { k get events --field-selector "involvedObject.name=$1,reason=FailedPrepareDynamicResources" \
    -o jsonpath='{range .items[*]}{.message}{"\n"}{end}'; }
wait_for 30 "bad's event" sh -c "$K get events --field-selector involvedObject.name=bad,reason=FailedPrepareDynamicResources -o name | grep -q ."
case $(ev bad) in
*"Failed to prepare dynamic resources: NodePrepareResources failed for claim default/bad-gpu-"*": simulated failure of bad-gpu-"*) ;;
*) fail "bad's event: $(ev bad)" ;;
esac
[ "$(k get pod bad -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}')" = ContainerCreating ] ||
    fail "bad's container: $(k get pod bad -o jsonpath='{.status.containerStatuses}')"
k delete pod bad --grace-period=0 >/dev/null 2>&1

# the plugin goes: its sockets removed, it is deregistered, a pod waits with the kubelet's reason
kill "$PLUGIN_PID"
wait_for 10 "the plugin stopped" grep -q stopped "$T/plugin.log"
# the watcher sees the registration socket go and deregisters the driver; until then a prepare
# would still dial the plugin's (removed) socket
wait_for 10 "the plugin deregistered" grep -q "DRA plugin deregistered" "$T/kubelet-sim.log"
pod late claim | k apply -f - >/dev/null || fail "pod late"
wait_for 30 "late's event" sh -c "$K get events --field-selector involvedObject.name=late,reason=FailedPrepareDynamicResources -o name | grep -q ."
case $(ev late) in
*"plugin name gpu.nvidia.com not found in the list of registered DRA plugins"*) ;;
*) fail "late's event: $(ev late)" ;;
esac
echo "ok: a failing and a missing plugin leave the pod's containers unstarted, with the kubelet's event"

# SIGTERM: kubelet-sim stops every pod and exits 0 (under the sanitizers: nothing leaked)
stop_kubelet_sim
echo "ok"
