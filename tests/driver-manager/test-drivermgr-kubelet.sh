#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The driver manager end to end on kubelet-sim's simulated nodes (every pod a process), with the
# mixed cluster (no node pre-labelled: the driver manager finds the host driver itself):
#  - on l4-hostdriver-1 it finds the host's driver, labels the node pre-installed and the driver
#    pod goes; the host driver stays loaded;
#  - on dgx-h100-1 it finds no driver and the driver container loads one;
#  - a driver pod restart while a CUDA workload (protected by a PodDisruptionBudget) holds a GPU:
#    the old container's unload is refused, the new driver manager pauses the device plugin,
#    does not evict the workload while the budget forbids it and says why in `kubectl logs`;
#    once the budget allows, it evicts it, unloads the old modules with the simulated rmmod, and
#    the driver container reloads.
# Needs root (namespaces, a bridge); skips (77) saying so otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
on_fail() {
    for p in $("$KUBECTL" get pods -l app=nvidia-driver-daemonset -o name 2>/dev/null); do
        echo "--- $p"
        "$KUBECTL" logs "$p" -c k8s-driver-manager 2>&1 | tail -n 20
    done
}
k() { "$KUBECTL" --request-timeout=20s "$@"; }

sed -e "s|fleet: ../fleets/|fleet: $S/sim/fleets/|" "$S/sim/clusters/mixed.yaml" >"$T/mixed.yaml"
! grep -q "deploy.driver: pre-installed" "$T/mixed.yaml" || fail "the cluster file pre-labels a node pre-installed"
start_kubesim --api-ip 198.18.254.1
start_kubelet_sim "$T/mixed.yaml" 5 --bridge kldm0 --subnet 198.18.201.0/24
# kubesim serves plain HTTP here while a pod's in-cluster config speaks HTTPS: the pods read the
# kubeconfig from their node root instead (/host/etc/gpuop-kubeconfig)
for r in "$T"/roots/*; do cp "$KUBECONFIG" "$r/etc/gpuop-kubeconfig"; done
k label node l4-hostdriver-1 nvidia.com/gpu.deploy.driver=true >/dev/null
k label node dgx-h100-1 nvidia.com/gpu.deploy.driver=true \
    nvidia.com/gpu.deploy.device-plugin=true >/dev/null
k apply -f - >/dev/null <<'YAML' || fail "apply the driver and device plugin DaemonSets"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-driver-daemonset, namespace: default}
spec:
  selector: {matchLabels: {app: nvidia-driver-daemonset}}
  updateStrategy: {type: OnDelete}
  template:
    metadata: {labels: {app: nvidia-driver-daemonset}}
    spec:
      hostPID: true
      nodeSelector: {nvidia.com/gpu.deploy.driver: "true"}
      initContainers:
      - name: k8s-driver-manager
        image: gpuop:latest
        args: [driver-manager, --host-root=/host, --driver-install-dir=/run/nvidia/driver]
        env:
        - {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
        - {name: KUBECONFIG, value: /host/etc/gpuop-kubeconfig}
        - {name: HOST_DRIVER_WAIT, value: 5s}
        securityContext: {privileged: true}
        volumeMounts:
        - {name: host-root, mountPath: /host, readOnly: true, mountPropagation: HostToContainer}
        - {name: run-nvidia, mountPath: /run/nvidia, mountPropagation: Bidirectional}
      containers:
      - name: nvidia-driver-ctr
        image: nvcr.io/nvidia/driver:570.86.15-ubuntu22.04
        command: [nvidia-driver]
        args: [init]
        env: [{name: SIM_DRIVER_BUILD_SECONDS, value: "1"}]
        securityContext: {privileged: true}
        volumeMounts:
        - {name: run-nvidia, mountPath: /run/nvidia, mountPropagation: Bidirectional}
      volumes:
      - {name: run-nvidia, hostPath: {path: /run/nvidia, type: DirectoryOrCreate}}
      - {name: host-root, hostPath: {path: /}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: device-plugin, namespace: default}
spec:
  selector: {matchLabels: {app: device-plugin}}
  template:
    metadata: {labels: {app: device-plugin}}
    spec:
      nodeSelector: {nvidia.com/gpu.deploy.device-plugin: "true"}
      containers:
      - name: device-plugin
        image: gpuop:latest
        args: [device-plugin]
        volumeMounts:
        - {name: device-plugin, mountPath: /var/lib/kubelet/device-plugins}
      volumes:
      - {name: device-plugin, hostPath: {path: /var/lib/kubelet/device-plugins}}
YAML
ann() { k get node "$1" -o jsonpath='{.metadata.annotations.gpuop\.dev/driver-owner}'; }
want_label() { [ "$(label "$1" "$2")" = "$3" ]; }
driver_pods() { k get pods -l app=nvidia-driver-daemonset --field-selector spec.nodeName=$1 -o name; }
no_driver_pod() { [ -z "$(driver_pods "$1")" ]; }
wait_for 90 "l4-hostdriver-1 labelled pre-installed" \
    want_label l4-hostdriver-1 nvidia.com/gpu.deploy.driver pre-installed
wait_for 60 "the driver pod leaves l4-hostdriver-1" no_driver_pod l4-hostdriver-1
ann l4-hostdriver-1 | grep -q '"owner":"host","version":"550.127.05"' ||
    fail "l4-hostdriver-1's owner: $(ann l4-hostdriver-1)"
[ -s "$T/roots/l4-hostdriver-1/sys/module/nvidia/version" ] || fail "the host's driver went"
echo "ok: l4-hostdriver-1: the driver manager found the host driver and labelled it pre-installed"

wait_for 120 "dgx-h100-1 advertises 8 GPUs" sh -c "[ \"\$('$KUBECTL' get node dgx-h100-1 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')\" = 8 ]"
[ "$(cat "$T/roots/dgx-h100-1/sys/module/nvidia/version")" = 570.86.15 ] || fail "no driver on dgx-h100-1"
ann dgx-h100-1 | grep -q '"owner":"container"' || fail "dgx-h100-1's owner: $(ann dgx-h100-1)"
echo "ok: dgx-h100-1: the containerized driver loaded"

k apply -f - >/dev/null <<'YAML' || fail "create the workload"
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: default, labels: {app: train}}
spec:
  restartPolicy: Never
  nodeSelector: {kubernetes.io/hostname: dgx-h100-1}
  terminationGracePeriodSeconds: 5
  containers:
  - name: train
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env: [{name: SIM_WORKLOAD_SECONDS, value: "600"}]
    resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: train, namespace: default}
spec: {minAvailable: 1, selector: {matchLabels: {app: train}}}
YAML
phase() { k get pod train -o jsonpath='{.status.phase}'; }
wait_for 60 "the workload runs" sh -c "[ \"\$('$KUBECTL' get pod train -o jsonpath='{.status.phase}')\" = Running ]"
wait_for 20 "the budget counts it" sh -c "[ \"\$('$KUBECTL' get pdb train -o jsonpath='{.status.currentHealthy}')\" = 1 ]"

old=$(driver_pods dgx-h100-1)
k delete "$old" --wait=false >/dev/null || fail "delete the driver pod"
newpod() { p=$(driver_pods dgx-h100-1); [ -n "$p" ] && [ "$p" != "$old" ]; }
wait_for 60 "a new driver pod" newpod
new=$(driver_pods dgx-h100-1)
dmlog() { k logs "$new" -c k8s-driver-manager 2>&1; }
blocked() { dmlog | grep -q "eviction refused by a disruption budget; waiting pod=default/train"; }
wait_for 90 "the driver manager waits on the budget" blocked
dmlog | grep "eviction refused" | head -1 | grep -q "disruption budget" || fail "no reason logged"
want_label dgx-h100-1 nvidia.com/gpu.deploy.device-plugin paused-for-driver-upgrade ||
    fail "the device plugin is not paused"
sleep 3
[ "$(phase)" = Running ] || fail "the workload was disrupted while its budget forbids it: $(phase)"
[ -s "$T/roots/dgx-h100-1/sys/module/nvidia/version" ] || fail "the driver went under the workload"
echo "ok: the restarted driver pod waits on the workload's budget and says so in kubectl logs"

k patch pdb train --type=merge -p '{"spec":{"minAvailable":0}}' >/dev/null
wait_for 90 "the workload is evicted" sh -c "! '$KUBECTL' get pod train >/dev/null 2>&1"
wait_for 90 "the driver manager unloads" sh -c "'$KUBECTL' logs $new -c k8s-driver-manager 2>&1 | grep -q 'node ready for the driver container'"
order=$(dmlog | grep -o 'unloading kernel module module=[a-z_]*' | sed 's/.*=//' | tr '\n' ' ')
[ "$order" = "nvidia_modeset nvidia_uvm nvidia " ] || fail "unload order: $order"
[ "$(dmlog | grep -c 'evicted pod pod=default/train')" = 1 ] || fail "train evicted more than once"
wait_for 60 "the new driver container runs" sh -c "[ \"\$('$KUBECTL' get $new -o jsonpath='{.status.phase}')\" = Running ]"
wait_for 60 "the driver reloaded" test -s "$T/roots/dgx-h100-1/sys/module/nvidia/version"
wait_for 30 "the device plugin label restored" want_label dgx-h100-1 nvidia.com/gpu.deploy.device-plugin true
wait_for 60 "dgx-h100-1 advertises 8 GPUs again" sh -c "[ \"\$('$KUBECTL' get node dgx-h100-1 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')\" = 8 ]"
echo "ok: once the budget allows: evicted once, modules unloaded in order, driver reloaded, operands back"
