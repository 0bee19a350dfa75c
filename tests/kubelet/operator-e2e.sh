#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The whole stack, driven by the operator, on simulated nodes that run it: kubesim, kubelet-sim
# with the mixed cluster (2x DGX H100, an A100 with MIG, an L4 with a host driver, a CPU node),
# the operator under its shipped ServiceAccount and RBAC, and NVIDIA's sample ClusterPolicy.
# Every operand pod is a process: the driver manager decides who owns the driver, the driver
# container loads the simulated one, the toolkit configures each node's runtime and writes the
# CDI spec, the validator's init containers pass in order, the device plugins register. Then:
# allocatable matches each fleet, the ClusterPolicy turns ready only after the validators are
# Ready, a GPU pod completes, and an operand whose subcommand gpuop does not have crash-loops
# with its own error. As root (namespaces per node); skipped otherwise.
set -uo pipefail
B=${GPUOP_BUILD_ROOT:?}
S=${GPUOP_SOURCE_ROOT:?}
. "$S/scripts/tools-env.sh" || { echo "$TOOLS_MISSING: skipped"; exit 77; }
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: kubelet-sim's nodes need root (network and mount namespaces)"
    exit 77
fi
. "$S/tests/operator/lib.sh"
API_IP=198.18.255.2
ip addr add "$API_IP/32" dev lo 2>/dev/null
trap 'cleanup; ip addr del "$API_IP/32" dev lo 2>/dev/null' EXIT
K="$KUBECTL --request-timeout=10s"
k() { $K "$@"; }
fail() {
    echo "FAIL: $*"
    for f in "$T"/*.log; do echo "--- $f"; tail -n 30 "$f"; done
    k get pods -A -o wide 2>/dev/null
    k get events -A -o jsonpath='{range .items[*]}{.involvedObject.name} {.reason} {.message}{"\n"}{end}' 2>/dev/null |
        sort -u -k2 | tail -n 25
    exit 1
}

"$B/kubesim" --kubeconfig-out "$T/kubeconfig" --listen "$API_IP:0" --allow-remote --tls \
    --load "$S/deploy/rbac/operator.yaml" >"$T/kubesim.log" 2>&1 &
pids+=($!)
wait_for 10 "kubesim" test -s "$T/kubeconfig"
export KUBECONFIG=$T/kubeconfig
wait_for 10 "kubesim answering" k get ns
"$B/kubelet-sim" --cluster "$S/sim/clusters/mixed.yaml" --kubeconfig "$KUBECONFIG" \
    --root-base "$T/roots" --bridge klop0 --subnet 198.18.201.0/24 --backoff-scale 0.01 \
    --node-status-interval 1s >"$T/kubelet-sim.log" 2>&1 &
pids+=($!)
wait_for 30 "5 Ready nodes" sh -c "[ \$($K get nodes --no-headers 2>/dev/null | grep -c ' Ready ') = 5 ]"
echo "ok: 5 nodes registered by kubelet-sim"

# The cluster file pre-labels the host-driver node for the hand-written node stack; here the
# driver manager is to find the host driver itself.
k label node l4-hostdriver-1 nvidia.com/gpu.deploy.driver- >/dev/null || fail "unlabel l4-hostdriver-1"
k apply -f "$S/deploy/crds/" >/dev/null || fail "apply the CRDs"
OPKC=$T/operator.kubeconfig
sa_kubeconfig "$OPKC"
"$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator --metrics-listen 127.0.0.1:0 \
    >"$T/operator.log" 2>&1 &
pids+=($!)
t0=$SECONDS
# NVIDIA's sample, with the mixed MIG strategy: a100-mig-1 has full GPUs beside MIG ones, which
# the single strategy refuses (as NVIDIA's device plugin does) until a MIG manager makes it
# uniform.
sed 's/strategy: single/strategy: mixed/' "$S/deploy/samples/clusterpolicy.yaml" | k apply -f - >/dev/null ||
    fail "apply the sample ClusterPolicy"

alloc() { k get node "$1" -o jsonpath="{.status.allocatable.${2//./\\.}}"; }
want_alloc() { [ "$(alloc "$1" "$2")" = "$3" ]; }
state() { k get clusterpolicy cluster-policy -o jsonpath='{.status.state}'; }
label() { k get node "$1" -o jsonpath="{.metadata.labels.${2//./\\.}}"; }
pods_of() { k -n gpu-operator get pods -l "app=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | tr '\n' ' '; }

# The host driver is found by the driver manager, which takes the node out of the driver's set.
is_label() { [ "$(label "$1" "$2")" = "$3" ]; }
wait_for 60 "l4-hostdriver-1 labelled deploy.driver=pre-installed" \
    is_label l4-hostdriver-1 nvidia.com/gpu.deploy.driver pre-installed
drivers_placed() { [ "$(pods_of nvidia-driver-daemonset)" = "a100-mig-1 dgx-h100-1 dgx-h100-2 " ]; }
wait_for 60 "driver pods on the three nodes without a host driver" drivers_placed
echo "ok: driver pods on $(pods_of nvidia-driver-daemonset)(the host driver on l4-hostdriver-1 is left alone)"

wait_for 120 "dgx-h100-1 advertises 8 nvidia.com/gpu" want_alloc dgx-h100-1 nvidia.com/gpu 8
wait_for 60 "dgx-h100-2 advertises 8 nvidia.com/gpu" want_alloc dgx-h100-2 nvidia.com/gpu 8
wait_for 60 "l4-hostdriver-1 advertises its 4 L4" want_alloc l4-hostdriver-1 nvidia.com/gpu 4
wait_for 60 "a100-mig-1 advertises its 2 full GPUs" want_alloc a100-mig-1 nvidia.com/gpu 2
wait_for 30 "a100-mig-1 advertises 18 nvidia.com/mig-1g.10gb" want_alloc a100-mig-1 nvidia.com/mig-1g.10gb 18
echo "ok: allocatable matches each fleet and the mixed strategy"
owner() { k get node "$1" -o jsonpath='{.metadata.annotations.gpuop\.dev/driver-owner}'; }
owner l4-hostdriver-1 | grep -q '"owner":"host"' || fail "l4-hostdriver-1 driver owner: $(owner l4-hostdriver-1)"
owner dgx-h100-1 | grep -q '"owner":"container"' || fail "dgx-h100-1's driver owner: $(owner dgx-h100-1)"
grep -q '^IS_HOST_DRIVER=true$' "$T/roots/l4-hostdriver-1/run/nvidia/validations/driver-ready" ||
    fail "l4-hostdriver-1's driver-ready: $(cat "$T/roots/l4-hostdriver-1/run/nvidia/validations/driver-ready" 2>&1)"
echo "ok: the driver owners are annotated (host on l4-hostdriver-1, validated with IS_HOST_DRIVER=true)"

# The MIG manager runs (gpuop mig-manager) and watches its node's nvidia.com/mig.config.
mig_watching() {
    local p
    p=$(k -n gpu-operator get pods -l app=nvidia-mig-manager -o jsonpath='{.items[0].metadata.name}')
    [ -n "$p" ] && k -n gpu-operator logs "$p" -c nvidia-mig-manager 2>/dev/null | grep -q "mig-manager watching node="
}
wait_for 60 "the mig-manager pod watching its node" mig_watching
echo "ok: nvidia-mig-manager runs: $(k -n gpu-operator logs "$(k -n gpu-operator get pods -l app=nvidia-mig-manager -o jsonpath='{.items[0].metadata.name}')" -c nvidia-mig-manager 2>&1 | grep -m1 watching)"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"migManager":{"enabled":false}}}' >/dev/null ||
    fail "turn the MIG manager off"

ready_validators() {
    k -n gpu-operator get pods -l app=nvidia-operator-validator \
        -o jsonpath='{range .items[*]}{.spec.nodeName}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
        grep -c '=True'
}
validators_ready() { [ "$(ready_validators)" = 4 ]; }
wait_for 120 "validator pods Ready on the 4 GPU nodes" validators_ready
is_ready() { [ "$(state)" = ready ]; }
wait_for 60 "ClusterPolicy ready" is_ready
echo "ok: ClusterPolicy ready $((SECONDS - t0)) s after it was applied"

# a GPU pod completes with the devices it was allocated
k apply -f "$S/sim/clusters/cuda-sample.yaml" >/dev/null || fail "create the CUDA sample"
done_ok() { [ "$(k get pod cuda-vectoradd -o jsonpath='{.status.phase}')" = Succeeded ]; }
wait_for 90 "the CUDA sample completes" done_ok
k logs cuda-vectoradd | grep -q "Test PASSED" || fail "the CUDA sample's log: $(k logs cuda-vectoradd 2>&1 | tail -n 3)"
echo "ok: a GPU pod completed (Test PASSED)"
