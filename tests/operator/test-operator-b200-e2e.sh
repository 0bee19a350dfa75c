#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# driver.kernelModuleType end to end on a simulated Blackwell node (sim/fleets/dgx-b200.yaml,
# whose GPUs load only under the open kernel modules): kubesim, kubelet-sim with one DGX B200,
# the operator under its shipped RBAC. With kernelModuleType auto the driver pod loads the open
# modules and the stack comes up (8 GPUs advertised, validated). Switched to proprietary, the
# upgrade controller replaces the driver pod, whose container fails with the kernel's message:
# the validator (its log and Event) and `gpuop status` name the node
# and the reason (and the DriverUpgrade condition the node's failed upgrade). Switched back to auto, the upgrade controller replaces it again and the node
# recovers on the open modules. As root (namespaces per node); skipped otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
on_fail() {
    k get nodes -L nvidia.com/gpu-driver-upgrade-state 2>/dev/null
    k -n gpu-operator get pods -o wide 2>/dev/null
    k get clusterpolicy cluster-policy -o jsonpath='{range .status.conditions[*]}{.type}={.status}: {.message}{"\n"}{end}' 2>/dev/null
}
N=b200-1
{
    sim_cluster
    sim_node $N "$S/sim/fleets/dgx-b200.yaml" /tmp/gpuop-sim/b200/$N 'kernel: 6.8.0-49-generic' \
        'os: {id: ubuntu, versionId: "24.04", prettyName: Ubuntu 24.04.1 LTS}' \
        'kernelHeaders: [6.8.0-49-generic]' 'cpu: 224' 'memory: 2063937984Ki' 'pods: 110'
} >"$T/cluster.yaml"
t0=$SECONDS
kl_start_cluster 198.18.255.31 "$T/cluster.yaml" klb2 198.18.231.0/24 1
kl_start_operator --metrics-listen 127.0.0.1:0 --leader-elect false
python3 - "$S/deploy/samples/clusterpolicy.yaml" >"$T/policy.yaml" <<'PY' || fail "edit the sample"
import sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
spec = cp["spec"]
spec["driver"]["version"] = "570.133.20"
spec["driver"]["kernelModuleType"] = "auto"
# the simulated driver builds in 2 s: its startup probe need not wait NVIDIA's 60 s first
spec["driver"]["startupProbe"] = {"initialDelaySeconds": 2, "periodSeconds": 2}
spec["driver"]["upgradePolicy"] = {"autoUpgrade": True, "maxParallelUpgrades": 0,
    "maxUnavailable": "100%", "podDeletion": {"timeoutSeconds": 60}, "drain": {"enable": False}}
for c in ("dcgmExporter", "migManager", "nodeStatusExporter"):
    spec[c] = {"enabled": False}
print(yaml.safe_dump(cp))
PY
k apply -f "$T/policy.yaml" >/dev/null || fail "apply the ClusterPolicy"

upgrade_state() { label "$N" nvidia.com/gpu-driver-upgrade-state; }
pod_on() { k -n gpu-operator get pods -l "app=$1" --field-selector "spec.nodeName=$N" -o jsonpath='{.items[*].metadata.name}'; }
validator_ready() {
    local p
    p=$(pod_on nvidia-operator-validator)
    [ -n "$p" ] && [ "$(k -n gpu-operator get pod "$p" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
open_loaded() { grep -q "^NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.20 " "$T/roots/$N/proc/driver/nvidia/version" 2>/dev/null; }
node_up() {
    [ "$(upgrade_state)" = upgrade-done ] && open_loaded && want_alloc "$N" nvidia.com/gpu 8 &&
        validator_ready && [ "$(k get node "$N" -o jsonpath='{.spec.unschedulable}')" != true ]
}
wait_for 150 "$N up on the open modules: 8 GPUs advertised, validated, upgrade-done" node_up
env_kmt() { k -n gpu-operator get ds nvidia-driver-daemonset -o jsonpath='{.spec.template.spec.containers[0].env[?(@.name=="KERNEL_MODULE_TYPE")].value}'; }
[ "$(env_kmt)" = auto ] || fail "the driver DaemonSet's KERNEL_MODULE_TYPE: $(env_kmt)"
echo "ok: kernelModuleType auto: $N runs the open modules ($((SECONDS - t0)) s)"

k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"driver":{"kernelModuleType":"proprietary"}}}' >/dev/null ||
    fail "patch kernelModuleType proprietary"
REASON="requires use of the NVIDIA open kernel modules"
validator_says() {
    local p
    p=$(pod_on nvidia-operator-validator)
    [ -n "$p" ] && k -n gpu-operator logs "$p" -c driver-validation 2>/dev/null | grep -qF "$REASON"
}
wait_for 120 "$N's validator naming the refused modules" validator_says
# the validator's Event on the node carries the reason; the upgrade controller's condition names
# the node as failed
event_names() {
    k get events -A -o jsonpath='{range .items[?(@.involvedObject.name=="'"$N"'")]}{.reason}: {.message}{"\n"}{end}' |
        grep -q "^ValidationFailed: driver: .*$REASON"
}
wait_for 30 "a ValidationFailed Event on $N with the reason" event_names
cond_msg() { k get clusterpolicy cluster-policy -o jsonpath="{.status.conditions[?(@.type==\"$1\")].message}"; }
upgrade_names() { cond_msg DriverUpgrade | grep -q "$N failed"; }
wait_for 60 "the DriverUpgrade condition naming $N failed" upgrade_names
st=$("$B/gpuop" status 2>&1)
echo "gpuop status:"
sed 's/^/  /' <<<"$st"
grep -q "$N" <<<"$st" && grep -qF "$REASON" <<<"$st" || fail "gpuop status does not name $N and the reason"
[ -e "$T/roots/$N/sys/module/nvidia/version" ] && fail "a driver is loaded on $N under the proprietary modules"
echo "ok: kernelModuleType proprietary: the validator and gpuop status name $N and the reason; $(cond_msg DriverUpgrade)"

k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"driver":{"kernelModuleType":"auto"}}}' >/dev/null ||
    fail "patch kernelModuleType auto"
wait_for 150 "$N back on the open modules through the upgrade controller" node_up
recovered() { ! cond_msg DriverUpgrade | grep -q "failed"; }
wait_for 30 "the DriverUpgrade condition without a failed node" recovered
echo "ok: kernelModuleType auto again: $N recovered ($((SECONDS - t0)) s)"
