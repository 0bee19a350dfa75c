#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpuop gather --doctor on simulated nodes that run the stack: kubesim, kubelet-sim with two GPU
# nodes (tests/gather/e2e-cluster.yaml: a DGX H100 whose driver the operator deploys, an L4
# server with a host driver), the Helm chart installed (the operator the pod of its Deployment).
# Once the GPUs are advertised, one bundle: the operator pod's log and the operands' logs read
# through the nodes' kubelets, `gpuop doctor --json` from each GPU node (a pod each, in the
# operator's image, removed after: the driver's owner as the node says it), the chart's objects,
# no Secret, no token, under the bound. As root (namespaces per node); skipped otherwise.
set -uo pipefail
B=${GPUOP_BUILD_ROOT:?}
S=${GPUOP_SOURCE_ROOT:?}
. "$S/tests/kubelet/lib.sh"
need_cmd jq
JQ=$(command -v jq)
start_kubesim --api-ip 198.18.255.47 --tls
start_kubelet_sim "$S/tests/gather/e2e-cluster.yaml" 2 --bridge klgath0 --subnet 198.18.247.0/24 --no-nfd
H100=gather-h100-1 L4=gather-l4-host-1
helm_q install gpuop "$S/deploy/helm/gpuop" --namespace gpu-operator --create-namespace \
    --set operator.localImage=true \
    --set driver.startupProbe.initialDelaySeconds=2 --set driver.startupProbe.periodSeconds=2 \
    --wait --timeout 60s >"$T/install.log" || fail "helm install: $(cat "$T/install.log")"
wait_for 120 "$H100 advertises 8 nvidia.com/gpu" want_alloc $H100 nvidia.com/gpu 8
wait_for 60 "$L4 advertises 4 nvidia.com/gpu" want_alloc $L4 nvidia.com/gpu 4
op_pod=$(k -n gpu-operator get pods -l app.kubernetes.io/component=operator -o jsonpath='{.items[0].metadata.name}')
[ -n "$op_pod" ] || fail "no operator pod"
echo "ok: the stack runs (operator pod $op_pod); GPUs advertised on both nodes"
k -n gpu-operator create secret generic e2e-creds --from-literal=password=e2e-secret-value-0001 >/dev/null

t0=$SECONDS
rc=0
"$B/gpuop" gather --kubeconfig "$KUBECONFIG" --doctor --doctor-timeout 60s --max-size 16Mi \
    -o "$T/e2e.tar.gz" >"$T/out" 2>"$T/gather.log" || rc=$?
[ "$rc" = 0 ] || fail "gpuop gather --doctor exited $rc: $(tail -5 "$T/gather.log")"
size=$(stat -c %s "$T/e2e.tar.gz")
[ "$size" -le $((16 << 20)) ] || fail "the bundle is $size bytes, over 16Mi"
mkdir "$T/x" && tar xzf "$T/e2e.tar.gz" -C "$T/x" || fail "tar xzf"
R=$T/x/e2e
echo "ok: gpuop gather --doctor in $((SECONDS - t0)) s: $size bytes, $(find "$R" -type f | wc -l) files"

# the operator's own log, through its node's kubelet
grep -q "became leader" "$R/logs/$op_pod/gpu-operator.log" 2>/dev/null ||
    fail "the operator's log: $(ls "$R/logs/$op_pod" 2>&1) $("$JQ" -c ".missing[] | select(.what | contains(\"$op_pod\"))" "$R/manifest.json")"
# an operand's: the driver container's on the H100
drv=$(k -n gpu-operator get pods -l app=nvidia-driver-daemonset -o jsonpath='{.items[0].metadata.name}')
[ -s "$R/logs/$drv/nvidia-driver-ctr.log" ] || fail "no driver log for $drv: $(ls "$R/logs" | head)"
# the doctor on each GPU node, its pods gone after
for n in $H100 $L4; do
    [ -s "$R/doctor/$n.json" ] || fail "no doctor/$n.json: $("$JQ" -c '.missing' "$R/manifest.json" | head -c 1500)"
    "$JQ" -e '(.checks | length) == 12 and (.exitStatus | IN(0, 3, 4))' "$R/doctor/$n.json" >/dev/null ||
        fail "doctor/$n.json: $(head -c 600 "$R/doctor/$n.json")"
done
[ "$("$JQ" -r .driver.owner "$R/doctor/$H100.json")" = container ] || fail "$H100's owner: $("$JQ" -c .driver "$R/doctor/$H100.json")"
[ "$("$JQ" -r .driver.owner "$R/doctor/$L4.json")" = host ] || fail "$L4's owner: $("$JQ" -c .driver "$R/doctor/$L4.json")"
gone() { [ -z "$(k -n gpu-operator get pods -l app.kubernetes.io/name=gpuop-doctor -o name)" ]; }
wait_for 20 "the doctor pods removed" gone
# the chart's objects and the nodes' facts
for f in namespaces/gpu-operator/deployments/gpu-operator.yaml cluster/clusterpolicies/cluster-policy.yaml \
    nodes/$H100.yaml nodes/$L4.yaml status.json MANIFEST; do
    [ -s "$R/$f" ] || fail "not in the bundle: $f"
done
"$JQ" -e '.summary.nodes.gpu == 2' "$R/status.json" >/dev/null || fail "status.json: $("$JQ" -c .summary "$R/status.json")"
# no Secret, no token (the admin's, a service account's JWT)
token=$(sed -n 's/^ *token: //p' "$KUBECONFIG" | head -1)
find "$R" -path '*secret*' | grep . && fail "a Secret in the bundle"
for v in e2e-secret-value-0001 e2e-creds ${token:+"$token"}; do
    ! grep -rl -- "$v" "$R" || fail "$v is in the bundle"
done
! grep -rlE 'eyJ[A-Za-z0-9_-]{4,}\.eyJ' "$R" || fail "a JWT in the bundle"
"$JQ" -r '.missing[] | "  not collected: \(.what): \(.why)"' "$R/manifest.json"
echo "ok: the operator's and operands' logs, gpuop doctor from both GPU nodes ($("$JQ" -r .worst "$R/doctor/$H100.json"), $("$JQ" -r .worst "$R/doctor/$L4.json")), no Secret, no token; $("$JQ" '.missing | length' "$R/manifest.json") things not collected"
