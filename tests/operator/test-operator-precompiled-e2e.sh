#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# driver.usePrecompiled end to end: kubesim, kubelet-sim with two PCIe L4 nodes running different
# kernels and no kernel headers (a compiling driver container fails on them), the operator
# under its shipped RBAC. The ClusterPolicy's single driver DaemonSet becomes one per kernel,
# each running NVIDIA's precompiled tag <branch>-<kernel>-<os> on its node; both nodes load the
# driver without compiling, and their GPUs are advertised. As root (namespaces per node);
# skipped otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
on_fail() {
    k -n gpu-operator get ds,pods -o wide 2>/dev/null
    k get clusterpolicy cluster-policy -o jsonpath='{range .status.conditions[*]}{.type}={.status}: {.message}{"\n"}{end}' 2>/dev/null
}
K1=5.15.0-127-generic K2=6.8.0-49-generic
cat >"$T/cluster.yaml" <<EOF2
apiVersion: gpuop.dev/v1alpha1
kind: SimCluster
nodes:
- name: pre-1
  fleet: $S/sim/fleets/pcie-l4.yaml
  root: /tmp/gpuop-sim/precompiled/pre-1
  kernel: $K1
  os: {id: ubuntu, versionId: "22.04"}
  runtime: containerd
- name: pre-2
  fleet: $S/sim/fleets/pcie-l4.yaml
  root: /tmp/gpuop-sim/precompiled/pre-2
  kernel: $K2
  os: {id: ubuntu, versionId: "22.04"}
  runtime: containerd
EOF2
t0=$SECONDS
kl_start_cluster 198.18.255.58 "$T/cluster.yaml" klpc0 198.18.248.0/24 2
kl_start_operator --metrics-listen 127.0.0.1:0 --leader-elect false
python3 - "$S/deploy/samples/clusterpolicy.yaml" >"$T/policy.yaml" <<'PY' || fail "edit the sample"
import sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
spec = cp["spec"]
spec["driver"]["version"] = "550.127.05"
spec["driver"]["usePrecompiled"] = True
spec["driver"]["startupProbe"] = {"initialDelaySeconds": 2, "periodSeconds": 2}
for c in ("dcgmExporter", "migManager", "nodeStatusExporter"):
    spec[c] = {"enabled": False}
print(yaml.safe_dump(cp))
PY
k apply -f "$T/policy.yaml" >/dev/null || fail "apply the ClusterPolicy"

driver_sets() { k -n gpu-operator get ds -o jsonpath='{range .items[*]}{.metadata.name} {.spec.template.spec.containers[0].image}{"\n"}{end}' | grep '^nvidia-driver-daemonset' | sort; }
want_sets="nvidia-driver-daemonset-$K1-ubuntu22.04 nvcr.io/nvidia/driver:550-$K1-ubuntu22.04
nvidia-driver-daemonset-$K2-ubuntu22.04 nvcr.io/nvidia/driver:550-$K2-ubuntu22.04"
two_sets() { [ "$(driver_sets)" = "$want_sets" ]; }
wait_for 60 "two driver DaemonSets, one per kernel, on the precompiled tags" two_sets
loaded() { [ "$(cat "$T/roots/$1/sys/module/nvidia/version" 2>/dev/null)" = 550.127.05 ]; }
both_up() { loaded pre-1 && loaded pre-2 && want_alloc pre-1 nvidia.com/gpu 4 && want_alloc pre-2 nvidia.com/gpu 4; }
wait_for 150 "both nodes' drivers loaded and their GPUs advertised" both_up
for n in pre-1 pre-2; do
    p=$(k -n gpu-operator get pods -l app=nvidia-driver-daemonset --field-selector "spec.nodeName=$n" -o jsonpath='{.items[0].metadata.name}')
    [ -n "$p" ] || fail "no driver pod on $n"
    log=$(k -n gpu-operator logs "$p" -c nvidia-driver-ctr 2>&1) || fail "the driver log on $n: $log"
    grep -qF "Installing precompiled NVIDIA driver kernel modules for Linux kernel version" <<<"$log" ||
        fail "$n's driver did not install precompiled modules: $log"
    ! grep -qE "Compiling|Building NVIDIA driver package" <<<"$log" || fail "$n's driver compiled: $log"
done
echo "ok: usePrecompiled on two kernels: two DaemonSets, both nodes loaded without compiling ($((SECONDS - t0)) s)"
