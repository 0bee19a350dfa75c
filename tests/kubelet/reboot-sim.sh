#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# kubelet-sim as the node-reboot tool of its simulated nodes (sim/kubelet/reboot.c): a DGX H100
# node runs the simulated driver container and a device plugin; one GPU falls off the bus (the
# device plugin holds it back). The node asks for a reboot the way the remediation does
# (remediation.gpuop.dev/reboot-requested); kubelet-sim reboots it: the answer
# (reboot-done), a new boot ID, the lost GPU back, the status files of /run gone, the driver
# loaded again by its container, all 8 GPUs advertised again; a condition another writer set on
# the Node (GPUHealthy) is kept through kubelet-sim's status updates. Root (namespaces).
set -uo pipefail
B=${GPUOP_BUILD_ROOT:?}
S=${GPUOP_SOURCE_ROOT:?}
. "$S/tests/kubelet/lib.sh"
H=reboot-h100-1
R=$T/roots/$H
export GPUOP_SIM_FLEET=$S/sim/fleets/dgx-h100.yaml GPUOP_SIM_STATE=$R/var/lib/gpuop-sim/nvml

cat >"$T/cluster.yaml" <<EOF
apiVersion: gpuop.dev/v1alpha1
kind: SimCluster
nodes:
- name: $H
  fleet: $S/sim/fleets/dgx-h100.yaml
  root: $R
  kernel: 5.15.0-127-generic
  os: {id: ubuntu, versionId: "22.04"}
  runtime: containerd
  kernelHeaders: [5.15.0-127-generic]
EOF
start_kubesim --api-ip 198.18.255.33 --tls
start_kubelet_sim "$T/cluster.yaml" 1 --bridge klrb0 --subnet 198.18.233.0/24

cat >"$T/stack.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: gpu-rb}
---
$(sim_driver_ds gpu-rb 570.86.15)
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: device-plugin, namespace: gpu-rb}
spec:
  selector: {matchLabels: {app: device-plugin}}
  template:
    metadata: {labels: {app: device-plugin}}
    spec:
      containers:
      - name: device-plugin
        image: gpuop:demo
        args: [device-plugin]
        env: [{name: NVIDIA_DRIVER_ROOT, value: /run/nvidia/driver}]
        volumeMounts:
        - {name: device-plugin, mountPath: /var/lib/kubelet/device-plugins}
        - {name: run-nvidia, mountPath: /run/nvidia}
      volumes:
      - {name: device-plugin, hostPath: {path: /var/lib/kubelet/device-plugins}}
      - {name: run-nvidia, hostPath: {path: /run/nvidia}}
EOF
k apply -f "$T/stack.yaml" >/dev/null || fail "apply the stack"
wait_for 60 "$H advertises 8 nvidia.com/gpu" want_alloc $H nvidia.com/gpu 8
[ -f "$R/sys/module/nvidia/version" ] || fail "the driver container loaded no driver"

# a condition another writer owns, and a status file of /run
k patch node $H --subresource=status --type=strategic \
    -p '{"status":{"conditions":[{"type":"GPUHealthy","status":"False","reason":"Xid79","message":"GPU 4 lost"}]}}' \
    >/dev/null || fail "set the GPUHealthy condition"
mkdir -p "$R/run/nvidia/validations" && : >"$R/run/nvidia/validations/driver-ready"
gpu_cond() { k get node $H -o jsonpath='{.status.conditions[?(@.type=="GPUHealthy")].reason}'; }
sleep 2 # kubelet-sim posts status every second
[ "$(gpu_cond)" = Xid79 ] || fail "kubelet-sim dropped the GPUHealthy condition"

# GPU 4 falls off the bus: the device plugin holds it back
"$B/gpuop-sim" inject lost --gpu 4 >/dev/null || fail "inject lost"
wait_for 30 "$H advertises 7" want_alloc $H nvidia.com/gpu 7
boot0=$(k get node $H -o jsonpath='{.status.nodeInfo.bootID}')

# the remediation's reboot request
k annotate node $H remediation.gpuop.dev/reboot-requested=42 >/dev/null || fail "request"
done_is() { [ "$(k get node $H -o jsonpath='{.metadata.annotations.remediation\.gpuop\.dev/reboot-done}')" = 42 ]; }
wait_for 30 "the reboot answered" done_is
boot1=$(k get node $H -o jsonpath='{.status.nodeInfo.bootID}')
wait_for 10 "a new boot ID" sh -c "[ \"\$($K get node $H -o jsonpath='{.status.nodeInfo.bootID}')\" != '$boot0' ]"
"$B/gpuop-sim" show >"$T/show" || fail "gpuop-sim show"
grep -q '1 reboots' "$T/show" || fail "the simulated GPUs were not rebooted: $(head -3 "$T/show")"
grep -q 'LOST' "$T/show" && fail "GPU 4 still lost after the reboot"
[ -e "$R/run/nvidia/validations/driver-ready" ] && fail "a status file of /run survived the reboot"
wait_for 60 "the driver loaded again" test -f "$R/sys/module/nvidia/version"
wait_for 60 "$H advertises 8 again" want_alloc $H nvidia.com/gpu 8
grep -q 'node rebooted' "$T/kubelet-sim.log" || fail "no reboot in kubelet-sim's log"
[ "$(gpu_cond)" = Xid79 ] || fail "kubelet-sim dropped the GPUHealthy condition after the reboot"
# answered once: no second reboot
sleep 2
[ "$(grep -c 'node rebooting' "$T/kubelet-sim.log")" = 1 ] || fail "rebooted more than once"
# kubelet-sim stops cleanly after a reboot (a sanitizer's report would make it fail)
stop_kubelet_sim
echo "ok: reboot requested, answered, boot ID $boot0 -> $boot1, the GPU back, the driver reloaded"
