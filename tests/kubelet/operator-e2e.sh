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
# nodes' validators still Ready). As root (namespaces per node); skipped otherwise.
set -uo pipefail
B=${GPUOP_BUILD_ROOT:?}
S=${GPUOP_SOURCE_ROOT:?}
. "$S/scripts/tools-env.sh" || { echo "$TOOLS_MISSING: skipped"; exit 77; }
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: kubelet-sim's nodes need root (network and mount namespaces)"
    exit 77
fi
. "$S/tests/operator/lib.sh"
. "$S/tests/kubelet/lib.sh"
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

kl_start_cluster 198.18.255.2 "$S/sim/clusters/mixed.yaml" klop0 198.18.201.0/24 5
echo "ok: 5 nodes registered by kubelet-sim"
kl_start_operator --metrics-listen 127.0.0.1:0
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

# ---- faults on two nodes at once ---------------------------------------------------------------
# dgx-h100-2 loses a GPU: the device plugin stops advertising it, the node status exporter's
# mismatch gauge turns 1 after its grace, and the ClusterPolicy names the node.
GPUOP_SIM_FLEET=$S/sim/fleets/dgx-h100.yaml GPUOP_SIM_STATE=$T/roots/dgx-h100-2/var/lib/gpuop-sim/nvml \
    "$B/gpuop" sim inject lost --gpu 5 >/dev/null || fail "inject a lost GPU"
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

