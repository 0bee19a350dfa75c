#!/bin/bash
# Dynamic Resource Allocation through the real kubectl: resource.k8s.io/v1 found by discovery
# (kubectl 1.32 compiles in only v1beta1), `kubectl get resourceclaims,resourceslices,
# deviceclasses` with the API server's columns, a pod's claim made from a template, allocated on
# the node with the device and reserved for the pod, a second pod waiting with the scheduler's
# message, the claim released and deleted when the first pod goes, a selector CEL refuses
# rejected with the API server's message, and a DeviceClass's extended resource.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" --cache-dir "$T/cache" --request-timeout=10s "$@"; }
start_kubesim --nodes 2 --pod-ready-delay 100ms
scheduled() { [ -n "$(k get pod "$1" -o jsonpath='{.spec.nodeName}')" ]; }
condition_is() { [ "$(k get pod "$1" -o jsonpath='{.status.conditions[0].message}')" = "$2" ]; }

k api-resources --api-group=resource.k8s.io -o name | sort | tr '\n' ' ' >"$T/res"
[ "$(cat "$T/res")" = "deviceclasses.resource.k8s.io resourceclaims.resource.k8s.io resourceclaimtemplates.resource.k8s.io resourceslices.resource.k8s.io " ] \
    || fail "discovery: $(cat "$T/res")"

cat >"$T/dra.yaml" <<'Y'
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel:
      expression: device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'
  extendedResourceName: nvidia.com/gpu
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-00001-gpu.nvidia.com}
spec:
  driver: gpu.nvidia.com
  nodeName: node-00001
  pool: {name: node-00001, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      type: {string: gpu}
      productName: {string: NVIDIA H100 80GB HBM3}
      driverVersion: {version: 550.127.5}
    capacity:
      memory: {value: 81559Mi}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: h100, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel:
              expression: >-
                device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100') &&
                device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80G')) >= 0
Y
k apply -f "$T/dra.yaml" >/dev/null || fail "apply the class, slice and template"
pod() {
    cat <<Y
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: h100}
  containers:
  - name: cuda
    image: cuda-sample:12
    resources: {claims: [{name: gpu}]}
Y
}
pod train-0 | k apply -f - >/dev/null || fail "pod train-0"
wait_for 20 "train-0 scheduled" scheduled train-0
[ "$(k get pod train-0 -o jsonpath='{.spec.nodeName}')" = node-00001 ] || fail "train-0's node"
claim=$(k get pod train-0 -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
case $claim in train-0-gpu-?????) ;; *) fail "generated claim name: $claim" ;; esac
[ "$(k get resourceclaim "$claim" -o jsonpath='{.status.allocation.devices.results[0].device}')" = gpu-0 ] \
    || fail "allocation: $(k get resourceclaim "$claim" -o yaml)"
[ "$(k get resourceclaim "$claim" -o jsonpath='{.status.reservedFor[0].name}')" = train-0 ] \
    || fail "reservation"

# the table view kubectl prints, from kubesim's table converter
out=$(k get resourceclaims,resourceslices,deviceclasses) || fail "get: $out"
echo "$out" | grep -Eq "^NAME +STATE +AGE$" || fail "claims' columns: $out"
echo "$out" | grep -Eq "^resourceclaim.resource.k8s.io/$claim +allocated,reserved +[0-9]+s$" \
    || fail "claim row: $out"
echo "$out" | grep -Eq "^NAME +NODE +DRIVER +POOL +AGE$" || fail "slices' columns: $out"
echo "$out" | grep -Eq "^resourceslice.resource.k8s.io/node-00001-gpu.nvidia.com +node-00001 +gpu.nvidia.com +node-00001 +[0-9]+s$" \
    || fail "slice row: $out"
echo "$out" | grep -Eq "^deviceclass.resource.k8s.io/gpu.nvidia.com +[0-9]+s$" || fail "class row: $out"

# the second pod waits for the only H100
pod train-1 | k apply -f - >/dev/null || fail "pod train-1"
want="0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
wait_for 20 "train-1 unschedulable" condition_is train-1 "$want"
[ -z "$(k get pod train-1 -o jsonpath='{.spec.nodeName}')" ] || fail "train-1 bound"
k get resourceclaims | grep -Eq "^train-1-gpu-[a-z0-9]{5} +pending " || fail "train-1's claim: $(k get resourceclaims)"

# train-0 goes: its claim is released and deleted, and train-1 gets the device
k delete pod train-0 --wait=false >/dev/null || fail "delete train-0"
wait_for 20 "train-0's claim deleted" bash -c "! $KUBECTL get resourceclaim $claim"
wait_for 20 "train-1 scheduled" scheduled train-1

# the API server's validation of a selector, as kubectl shows it
cat >"$T/bad.yaml" <<'Y'
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: bad, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel: {expression: "device.capacity['gpu.nvidia.com'].memory > quantity('80Gi')"}
Y
out=$(k create -f "$T/bad.yaml" 2>&1) && fail "a selector CEL refuses: created"
case $out in
*'The ResourceClaim "bad" is invalid: spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: "device.capacity['"'"'gpu.nvidia.com'"'"'].memory > quantity('"'"'80Gi'"'"')": compilation failed: ERROR: <input>:1:42: found no matching overload for '"'"'_>_'"'"' applied to '"'"'(kubernetes.Quantity, kubernetes.Quantity)'"'"''*) ;;
*) fail "selector refusal: $out" ;;
esac

# the class's extended resource: a pod asking nvidia.com/gpu on nodes without a device plugin
k delete pod train-1 --wait=false >/dev/null || fail "delete train-1"
cat >"$T/ext.yaml" <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: legacy, namespace: default}
spec:
  containers:
  - name: cuda
    image: cuda-sample:12
    resources: {limits: {nvidia.com/gpu: 1}}
Y
k apply -f "$T/ext.yaml" >/dev/null || fail "pod legacy"
wait_for 20 "legacy scheduled" scheduled legacy
ext=$(k get pod legacy -o jsonpath='{.status.extendedResourceClaimStatus.resourceClaimName}')
case $ext in legacy-extended-resources-?????) ;; *) fail "extended resource claim: $ext" ;; esac
[ "$(k get resourceclaim "$ext" -o jsonpath='{.status.allocation.devices.results[0].device}')" = gpu-0 ] \
    || fail "extended resource claim's allocation"
stop_kubesim
echo "ok"
