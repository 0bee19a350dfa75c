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
# with its own error. Then two faults at once: a lost GPU (allocatable, the node status
# exporter's mismatch gauge, the ClusterPolicy's GPUCountMismatch naming the node) and a driver
# that fails to build (its validator held in Init, the reason in its log and an Event, the other
# nodes' validators still Ready). GPU quotas meet the advertised GPUs: a namespace's quota pinned
# to the H100 pool is balanced, then short once that pool loses a node to the lost GPU
# (gpuop status and GPUPoolBelowQuota). As root (namespaces per node); skipped otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
# On a failure, the latest log of every container that restarted: a crash loop (an init container
# that exits non-zero after its check passed keeps its pod Pending) shows in no Event.
on_fail() {
    local d n
    for d in "$T"/roots/*/var/log/pods/*/*/; do
        n=$(find "$d" -maxdepth 1 -name '*.log' -printf '%f\n' | sort -n | tail -n 1)
        [ "${n%.log}" -gt 0 ] 2>/dev/null || continue
        echo "--- $(basename "$(dirname "$d")") $(basename "$d"): restarted ${n%.log} times; its $n"
        tail -n 8 "$d$n"
    done
}
start_kubesim --api-ip 198.18.255.2 --tls --load "$S/deploy/rbac/operator.yaml"
start_kubelet_sim "$S/sim/clusters/mixed.yaml" 5 --bridge klop0 --subnet 198.18.202.0/24
echo "ok: 5 nodes registered by kubelet-sim"

k apply -f "$S/deploy/crds/" >/dev/null || fail "apply the CRDs"
OPKC=$T/operator.kubeconfig
sa_kubeconfig "$OPKC"
"$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator --metrics-listen 127.0.0.1:0 \
    >"$T/operator.log" 2>&1 &
pids+=($!)
t0=$SECONDS
# NVIDIA's sample, with the mixed MIG strategy: a100-mig-1 has full GPUs beside MIG ones, which
# the single strategy refuses (as NVIDIA's device plugin does) until a MIG manager makes it
# uniform. The node status exporter on, with a 2 s grace before a short node counts.
python3 - "$S/deploy/samples/clusterpolicy.yaml" >"$T/policy.yaml" <<'PY' || fail "edit the sample"
import sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
spec = cp["spec"]
spec["mig"]["strategy"] = "mixed"
# no default MIG layout: a100-mig-1 keeps its partitions until the test names one
spec["migManager"]["config"]["default"] = ""
# the simulated driver builds in 2 s: its startup probe need not wait NVIDIA's 60 s first
spec["driver"]["startupProbe"] = {"initialDelaySeconds": 2, "periodSeconds": 2}
spec["nodeStatusExporter"] = {"enabled": True,
    "env": [{"name": "NODE_STATUS_EXPORTER_MISMATCH_GRACE", "value": "2s"},
            {"name": "NODE_STATUS_EXPORTER_INTERVAL", "value": "1s"}]}
print(yaml.safe_dump(cp))
PY
k apply -f "$T/policy.yaml" >/dev/null || fail "apply the sample ClusterPolicy"

state() { k get clusterpolicy cluster-policy -o jsonpath='{.status.state}'; }

# The host driver is found by the driver manager, which takes the node out of the driver's set.
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

validators_ready() { [ "$(ready_validators)" = 4 ]; }
wait_for 120 "validator pods Ready on the 4 GPU nodes" validators_ready
is_ready() { [ "$(state)" = ready ]; }
wait_for 60 "ClusterPolicy ready" is_ready
echo "ok: ClusterPolicy ready $((SECONDS - t0)) s after it was applied"
# the validator's driver check records the version it verified
owner dgx-h100-1 | grep -q '"owner":"container","version":"570.86.15"' ||
    fail "dgx-h100-1's driver owner after validation: $(owner dgx-h100-1)"

# the toolkit configured each node's own runtime, CDI on, and wrote the CDI spec
R=$T/roots
for n in dgx-h100-1 dgx-h100-2; do
    grep -q 'enable_cdi = true' "$R/$n/etc/containerd/conf.d/99-nvidia.toml" 2>/dev/null ||
        fail "$n: containerd drop-in without enable_cdi"
done
grep -q '^\[crio.runtime.runtimes.nvidia\]' "$R/a100-mig-1/etc/crio/crio.conf.d/99-nvidia.toml" 2>/dev/null ||
    fail "a100-mig-1: no CRI-O drop-in with the nvidia runtime"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if "nvidia" in d.get("runtimes",{}) and d.get("features",{}).get("cdi") else 1)' \
    "$R/l4-hostdriver-1/etc/docker/daemon.json" || fail "l4-hostdriver-1: daemon.json without the nvidia runtime and CDI"
for n in dgx-h100-1 dgx-h100-2 a100-mig-1 l4-hostdriver-1; do
    [ -s "$R/$n/var/run/cdi/nvidia.yaml" ] || fail "$n: no CDI spec at /var/run/cdi/nvidia.yaml"
done
echo "ok: the toolkit configured containerd (2 nodes), CRI-O and docker, and wrote each node's CDI spec"

# a GPU pod completes with the devices it was allocated
k apply -f "$S/sim/clusters/cuda-sample.yaml" >/dev/null || fail "create the CUDA sample"
done_ok() { [ "$(k get pod cuda-vectoradd -o jsonpath='{.status.phase}')" = Succeeded ]; }
wait_for 90 "the CUDA sample completes" done_ok
grep -q "Test PASSED" <<<"$(k logs cuda-vectoradd 2>&1)" || fail "the CUDA sample's log: $(k logs cuda-vectoradd 2>&1 | tail -n 3)"
echo "ok: a GPU pod completed (Test PASSED)"

# ---- GPU quotas against the GPUs advertised ----------------------------------------------------
# A training namespace whose pods can land on the H100 pool only (a pod pinned there by its
# nodeSelector, asking more GPUs than one node has, so it waits unscheduled) and a quota of all 16
# H100 GPUs: balanced while both DGX nodes advertise theirs; short once dgx-h100-2 loses a GPU
# below (a node short of its GPUs is left out of its pool's advertised capacity).
product=$(label dgx-h100-1 nvidia.com/gpu.product)
[ -n "$product" ] || fail "dgx-h100-1 has no nvidia.com/gpu.product label"
k create namespace training >/dev/null && k -n training create quota gpus --hard=requests.nvidia.com/gpu=16 >/dev/null ||
    fail "create the training namespace and its GPU quota"
k apply -f - >/dev/null <<EOF || fail "create the training pod"
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: training}
spec:
  nodeSelector: {nvidia.com/gpu.product: $product}
  containers:
  - name: main
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    resources: {requests: {nvidia.com/gpu: "9"}, limits: {nvidia.com/gpu: "9"}}
EOF
pool_json() { "$B/gpuop" status -o json | jq -c --arg p "$product" '.capacity.pools[] | select(.name == $p) | .resources[] | select(.name == "nvidia.com/gpu")'; }
balanced() { pool_json | jq -e '.advertised == 16 and .pinnedQuota == 16 and (.short | not)' >/dev/null; }
wait_for 30 "the H100 pool balanced in gpuop status" balanced
[ -z "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.conditions[?(@.type=="GPUPoolBelowQuota")].status}')" ] ||
    fail "GPUPoolBelowQuota while balanced"
echo "ok: GPU quotas: training's 16 pinned to the H100 pool, which advertises 16: $(pool_json)"

# ---- faults on two nodes at once ---------------------------------------------------------------
# dgx-h100-2 loses a GPU: the device plugin stops advertising it, the node status exporter's
# mismatch gauge turns 1 after its grace, and the ClusterPolicy names the node.
GPUOP_SIM_FLEET=$S/sim/fleets/dgx-h100.yaml GPUOP_SIM_STATE=$T/roots/dgx-h100-2/var/lib/gpuop-sim/nvml \
    "$B/gpuop-sim" inject lost --gpu 5 >/dev/null || fail "inject a lost GPU"
# dgx-h100-1's kernel loses its headers and its driver pod is recreated: the new driver
# container fails to build; its validator, recreated too, waits in Init saying why.
rm -rf "$T"/roots/dgx-h100-1/usr/src/linux-headers-*
pod_on() { k -n gpu-operator get pods -l "app=$1" --field-selector "spec.nodeName=$2" -o jsonpath='{.items[0].metadata.name}'; }
k -n gpu-operator delete pod "$(pod_on nvidia-driver-daemonset dgx-h100-1)" "$(pod_on nvidia-operator-validator dgx-h100-1)" \
    --wait=false >/dev/null || fail "delete dgx-h100-1's driver and validator pods"

wait_for 20 "dgx-h100-2 advertises 7 nvidia.com/gpu" want_alloc dgx-h100-2 nvidia.com/gpu 7
ip2=$(k get node dgx-h100-2 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
mismatch() { curl -sf "http://$ip2:8000/metrics" | grep -q '^gpuop_node_gpu_advertised_mismatch{.*} 1$'; }
wait_for 30 "gpuop_node_gpu_advertised_mismatch 1 at $ip2:8000" mismatch
cond() { k get clusterpolicy cluster-policy -o jsonpath="{.status.conditions[?(@.type==\"$1\")].$2}"; }
names_node() { cond GPUCountMismatch message | grep -q "^dgx-h100-2: 8 GPUs"; }
wait_for 30 "GPUCountMismatch naming dgx-h100-2" names_node
echo "ok: a lost GPU: allocatable 7, the mismatch gauge 1, GPUCountMismatch: $(cond GPUCountMismatch message)"
short() { pool_json | jq -e '.short and .pinnedQuota == 16 and .advertised < 16' >/dev/null; }
wait_for 30 "the H100 pool short in gpuop status" short
below() { [ "$(cond GPUPoolBelowQuota status)" = True ] && cond GPUPoolBelowQuota message | grep -q "namespaces: training"; }
wait_for 30 "GPUPoolBelowQuota naming training" below
st=$("$B/gpuop" status)
grep -q "short: 16 pinned by quotas (training)" <<<"$st" || fail "gpuop status text: no short pool: $st"
echo "ok: the pool short of its quotas: $(cond GPUPoolBelowQuota message)"

build_failed() {
    local p
    p=$(pod_on nvidia-operator-validator dgx-h100-1)
    [ -n "$p" ] && k -n gpu-operator logs "$p" -c driver-validation 2>/dev/null |
        grep -q "nvidia-driver-ctr failed (exit 1): Could not resolve Linux kernel version"
}
wait_for 60 "dgx-h100-1's validator saying the driver build failed" build_failed
vp=$(pod_on nvidia-operator-validator dgx-h100-1)
[ "$(k -n gpu-operator get pod "$vp" -o jsonpath='{.status.phase}')" = Pending ] || fail "$vp is not held in Init"
build_event() {
    k get events -A -o jsonpath='{range .items[?(@.involvedObject.name=="dgx-h100-1")]}{.reason}: {.message}{"\n"}{end}' |
        grep -q "^ValidationFailed: driver: .*Could not resolve Linux kernel version"
}
wait_for 10 "an Event on dgx-h100-1 with the build failure" build_event
[ "$(ready_validators)" = 3 ] || fail "the other nodes' validators are not all Ready: $(ready_validators)"
echo "ok: a driver that fails to build: $vp held in Init, its log and an Event say: $(k -n gpu-operator logs "$vp" -c driver-validation | grep -m1 'Could not resolve' | sed 's/.*driver pod //; s/" every=.*//')"

