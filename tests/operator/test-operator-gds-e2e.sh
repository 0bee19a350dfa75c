#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPUDirect RDMA, GPUDirect Storage and GDRCopy end to end (driver.rdma, gds, gdrcopy):
# kubesim, kubelet-sim with one DGX H100, the operator under its shipped RBAC. The driver pod
# runs the driver with nvidia-peermem, and the module containers load nvidia_fs and gdrdrv on
# the node; the driver container's startup probe writes what is enabled into .driver-ctr-ready,
# the validator checks each module and writes nvidia-peermem-ready, nvidia-fs-ready and
# gdrcopy-ready, and the ClusterPolicy becomes ready. Then a driver without its kernel sources
# (SIM_DRIVER_SOURCES=false, as a precompiled image ships none) replaces it through the upgrade
# controller: the module containers fail naming the missing sources, and the validator does not
# pass, naming the modules, the container and why; the ClusterPolicy is not ready. As root
# (namespaces per node); skipped otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
on_fail() {
    k -n gpu-operator get pods -o wide 2>/dev/null
    k get clusterpolicy cluster-policy -o jsonpath='{.status.state}{"\n"}{range .status.conditions[*]}{.type}={.status}: {.message}{"\n"}{end}' 2>/dev/null
    ls -la "$T/roots/$N/run/nvidia/validations" "$T/roots/$N/sys/module" 2>/dev/null
}
N=gds-1
cat >"$T/cluster.yaml" <<EOF2
apiVersion: gpuop.dev/v1alpha1
kind: SimCluster
nodes:
- name: $N
  fleet: $S/sim/fleets/dgx-h100.yaml
  root: /tmp/gpuop-sim/gds/$N
  kernel: 5.15.0-127-generic
  os: {id: ubuntu, versionId: "22.04", prettyName: Ubuntu 22.04.5 LTS}
  runtime: containerd
  kernelHeaders: [5.15.0-127-generic]
  cpu: 224
  memory: 2063937984Ki
  pods: 110
EOF2
t0=$SECONDS
kl_start_cluster 198.18.255.61 "$T/cluster.yaml" klgds0 198.18.243.0/24 1
kl_start_operator --metrics-listen 127.0.0.1:0 --leader-elect false
python3 - "$S/deploy/samples/clusterpolicy.yaml" >"$T/policy.yaml" <<'PY' || fail "edit the sample"
import sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
spec = cp["spec"]
spec["driver"]["version"] = "550.127.05"
spec["driver"]["rdma"] = {"enabled": True}
# the simulated driver builds in 2 s: its startup probe need not wait NVIDIA's 60 s first
spec["driver"]["startupProbe"] = {"initialDelaySeconds": 2, "periodSeconds": 2}
spec["driver"]["upgradePolicy"] = {"autoUpgrade": True, "maxParallelUpgrades": 0,
    "maxUnavailable": "100%", "podDeletion": {"timeoutSeconds": 60}, "drain": {"enable": False}}
spec["gds"] = {"enabled": True, "repository": "nvcr.io/nvidia/cloud-native", "image": "nvidia-fs",
               "version": "2.20.5"}
spec["gdrcopy"] = {"enabled": True, "repository": "nvcr.io/nvidia/cloud-native",
                   "image": "gdrdrv", "version": "v2.4.1-2"}
for c in ("dcgmExporter", "migManager", "nodeStatusExporter"):
    spec[c] = {"enabled": False}
print(yaml.safe_dump(cp))
PY
k apply -f "$T/policy.yaml" >/dev/null || fail "apply the ClusterPolicy"

R=$T/roots/$N
V=$R/run/nvidia/validations
pod_on() { k -n gpu-operator get pods -l "app=$1" --field-selector "spec.nodeName=$N" -o jsonpath='{.items[*].metadata.name}'; }
policy_state() { k get clusterpolicy cluster-policy -o jsonpath='{.status.state}'; }
modules_loaded() { [ -d "$R/sys/module/nvidia_peermem" ] && [ -d "$R/sys/module/nvidia_fs" ] && [ -d "$R/sys/module/gdrdrv" ]; }
ready_files() { [ -e "$V/driver-ready" ] && [ -e "$V/nvidia-peermem-ready" ] && [ -e "$V/nvidia-fs-ready" ] && [ -e "$V/gdrcopy-ready" ]; }
stack_up() { modules_loaded && ready_files && [ "$(policy_state)" = ready ] && want_alloc "$N" nvidia.com/gpu 8; }
wait_for 240 "$N: nvidia_peermem, nvidia_fs and gdrdrv loaded, their ready files, the ClusterPolicy ready" stack_up
for c in nvidia-driver-ctr nvidia-peermem-ctr nvidia-fs-ctr nvidia-gdrcopy-ctr; do
    k -n gpu-operator get pod "$(pod_on nvidia-driver-daemonset)" -o jsonpath='{.spec.containers[*].name}' |
        grep -qw "$c" || fail "the driver pod has no $c"
done
grep -qx "GDS_ENABLED=true" "$V/.driver-ctr-ready" && grep -qx "GDRCOPY_ENABLED=true" "$V/.driver-ctr-ready" &&
    grep -qx "GPU_DIRECT_RDMA_ENABLED=true" "$V/.driver-ctr-ready" ||
    fail ".driver-ctr-ready does not name the modules: $(cat "$V/.driver-ctr-ready")"
DP=$(pod_on nvidia-driver-daemonset)
k -n gpu-operator logs "$DP" -c nvidia-fs-ctr | grep -qx "Building and loading nvidia-fs kernel module" ||
    fail "nvidia-fs-ctr's log: $(k -n gpu-operator logs "$DP" -c nvidia-fs-ctr | tail -5)"
VP=$(pod_on nvidia-operator-validator)
k -n gpu-operator logs "$VP" -c driver-validation | grep -q "driver validated.*rdma=true gds=true gdrcopy=true" ||
    fail "the driver check's line: $(k -n gpu-operator logs "$VP" -c driver-validation | tail -3)"
echo "ok: RDMA, GDS, GDRCopy: modules loaded on $N, validated, ClusterPolicy ready ($((SECONDS - t0)) s)"

# a driver without its kernel sources: the module containers cannot build
k patch clusterpolicy cluster-policy --type merge \
    -p '{"spec":{"driver":{"env":[{"name":"SIM_DRIVER_SOURCES","value":"false"}]}}}' >/dev/null ||
    fail "patch driver.env"
REASON="module nvidia_fs (GPUDirect Storage, GDS_ENABLED) is not loaded: nvidia-fs-ctr failed (exit 1): nvidia-gds-driver: no kernel sources of the NVIDIA driver 550.127.05 in /run/nvidia/driver/usr/src/nvidia-550.127.05 to build nvidia_fs against"
GDR_REASON="module gdrdrv (GDRCopy, GDRCOPY_ENABLED) is not loaded: nvidia-gdrcopy-ctr failed (exit 1)"
# one line naming both, once both containers have failed (one may fail a pass before the other)
validator_says() {
    local p
    p=$(pod_on nvidia-operator-validator)
    [ -n "$p" ] && k -n gpu-operator logs "$p" -c driver-validation 2>/dev/null |
        grep -F "$REASON" | grep -qF "$GDR_REASON"
}
wait_for 180 "$N's validator naming nvidia_fs, gdrdrv and the missing sources" validator_says
p=$(pod_on nvidia-operator-validator)
line=$(k -n gpu-operator logs "$p" -c driver-validation | grep -F "$REASON" | grep -F "$GDR_REASON" | tail -1)
echo "validator: $line"
[ -e "$R/sys/module/nvidia_fs" ] && fail "nvidia_fs loaded without sources"
[ -e "$V/nvidia-fs-ready" ] && fail "nvidia-fs-ready written without nvidia_fs"
[ "$(policy_state)" = ready ] && fail "the ClusterPolicy is ready with nvidia_fs missing"
event_names() {
    k get events -A -o jsonpath='{range .items[?(@.involvedObject.name=="'"$N"'")]}{.reason}: {.message}{"\n"}{end}' |
        grep -qF "ValidationFailed: driver: module nvidia_fs (GPUDirect Storage, GDS_ENABLED) is not loaded: nvidia-fs-ctr failed"
}
wait_for 30 "a ValidationFailed Event on $N naming nvidia_fs" event_names
echo "ok: without the driver's sources the validator names nvidia_fs and gdrdrv; ClusterPolicy $(policy_state) ($((SECONDS - t0)) s)"
