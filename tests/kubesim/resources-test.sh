#!/bin/bash
# Extended resources through kubectl: the scheduler places GPU pods only where allocatable
# covers them, an unschedulable pod carries the scheduler's message, and `kubectl describe node`
# (its field-selected pod list) shows the node's Allocated resources.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools

cat >"$T/cluster.yaml" <<'YAML'
apiVersion: v1
kind: Node
metadata: {name: gpu-a}
status:
  capacity: {cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "4"}
  allocatable: {cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "4"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: v1
kind: Node
metadata: {name: cpu-b}
status:
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: v1
kind: Pod
metadata: {name: w1, namespace: default}
spec:
  containers:
  - name: c
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    resources: {limits: {nvidia.com/gpu: 3}, requests: {cpu: 500m, memory: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: done, namespace: default}
spec:
  nodeName: gpu-a
  containers:
  - name: c
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    resources: {limits: {nvidia.com/gpu: 1}}
YAML
start_kubesim --load "$T/cluster.yaml"
k() { timeout 20 "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
on_node() { [ "$(k get pod "$1" -o 'jsonpath={.spec.nodeName}')" = "$2" ]; }
poll 5 on_node w1 gpu-a || fail "w1 not on gpu-a"
# a finished pod holds nothing: its GPU is free again
k patch pod done --subresource=status --type=merge -p '{"status":{"phase":"Succeeded"}}' \
    >/dev/null || fail "patch done"
k apply -f - >/dev/null <<'YAML' || fail "create w2"
apiVersion: v1
kind: Pod
metadata: {name: w2, namespace: default}
spec:
  containers:
  - name: c
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    resources: {limits: {nvidia.com/gpu: 2}}
YAML
unschedulable_msg() { k get pod w2 -o 'jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}'; }
has_msg() { [ -n "$(unschedulable_msg)" ]; }
poll 5 has_msg
msg=$(unschedulable_msg)
# cpu-b lacks the resource altogether: Insufficient too (one reason per node, counted)
want="0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
[ "$msg" = "$want" ] || fail "w2's message: '$msg'"
[ "$(k get pod w2 -o 'jsonpath={.status.phase}')" = Pending ] || fail "w2 not Pending"

k describe node gpu-a >"$T/describe" 2>&1 || fail "describe node: $(cat "$T/describe")"
grep -q 'Non-terminated Pods: *(1 in total)' "$T/describe" ||
    fail "describe node: non-terminated pods: $(cat "$T/describe")"
grep -Eq '^ +nvidia.com/gpu +3 +3$' "$T/describe" ||
    fail "describe node: Allocated resources: $(sed -n '/Allocated/,$p' "$T/describe")"
grep -Eq '^ +cpu +500m \(6%\) +0 \(0%\)$' "$T/describe" ||
    fail "describe node: cpu: $(sed -n '/Allocated/,$p' "$T/describe")"
# one GPU left on gpu-a: a one-GPU pod lands there
k run w3 --image=nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04 \
    --overrides='{"spec":{"containers":[{"name":"w3","image":"nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}' \
    >/dev/null || fail "run w3"
poll 5 on_node w3 gpu-a || fail "w3 not on gpu-a"
stop_kubesim
echo "kubesim resources: ok"
