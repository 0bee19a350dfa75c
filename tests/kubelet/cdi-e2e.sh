#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# CDI end to end on simulated nodes (kubesim, kubelet-sim with a DGX H100 node on containerd
# and an L4 node on CRI-O), every pod a process:
#  - the simulated driver container loads the driver and makes its device nodes in the driver
#    root; `gpuop toolkit` writes each node's CDI spec (kind nvidia.com/gpu) from it;
#  - gpuop's device plugin runs with DEVICE_LIST_STRATEGY=cdi-cri: a GPU pod's CDI names (in
#    the Allocate response, no NVIDIA_VISIBLE_DEVICES) resolve against the node's CDI specs;
#    its container's /dev holds exactly its GPUs' nodes and the control nodes, made with the
#    spec's numbers, and the CUDA sample finds its GPUs there and passes;
#  - a CDI name the node's specs do not define fails the container with containerd's error
#    (CreateContainerError), and the pod runs once the spec is back;
#  - a driver upgrade (the driver DaemonSet's image moved to another version, its pod replaced)
#    makes the toolkit regenerate the spec: no path of the old version is left, the new
#    version's libraries are there, and a GPU pod passes again. The device plugin and the
#    toolkit hold the module through NVML (a module in use does not unload), so they are paused
#    for the reload as the driver manager pauses them: their deploy labels, their pods gone,
#    the GPUs withdrawn, then the driver pod replaced and the labels restored;
#  - the device plugin switched to the toolkit's kind (GPUOP_CDI_KIND=nvidia.com/gpu) removes
#    its own spec, and a GPU pod's names resolve against the toolkit's spec alone.
# Needs root (namespaces, mknod); skips (77) saying so otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
OLD=570.86.15
NEW=575.57.08
H=cdi-h100-1
R=$T/roots/$H

{
    sim_cluster
    sim_node $H "$S/sim/fleets/dgx-h100.yaml" "$T/roots/$H"
    sim_node cdi-l4-1 "$S/sim/fleets/pcie-l4.yaml" "$T/roots/cdi-l4-1" 'runtime: cri-o'
} >"$T/cluster.yaml"
start_kubesim --api-ip 198.18.255.20 --tls
start_kubelet_sim "$T/cluster.yaml" 2 --bridge klcdi0 --subnet 198.18.220.0/24
echo "ok: 2 nodes registered by kubelet-sim"
# the operands' deploy labels, as the operator sets them (the driver reload pauses them)
DP_LABEL=nvidia.com/gpu.deploy.device-plugin TK_LABEL=nvidia.com/gpu.deploy.container-toolkit
k label node $H cdi-l4-1 $DP_LABEL=true $TK_LABEL=true >/dev/null || fail "label the nodes"

cat >"$T/stack.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: gpu-cdi}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-driver, namespace: gpu-cdi}
spec:
  selector: {matchLabels: {app: nvidia-driver}}
  updateStrategy: {type: OnDelete}
  template:
    metadata: {labels: {app: nvidia-driver}}
    spec:
      nodeSelector: {feature.node.kubernetes.io/pci-10de.present: "true"}
      containers:
      - name: nvidia-driver-ctr
        image: nvcr.io/nvidia/driver:$OLD-ubuntu22.04
        command: [nvidia-driver]
        args: [init]
        env: [{name: SIM_DRIVER_BUILD_SECONDS, value: "0.2"}]
        securityContext: {privileged: true}
        volumeMounts: [{name: run-nvidia, mountPath: /run/nvidia}]
      volumes: [{name: run-nvidia, hostPath: {path: /run/nvidia, type: DirectoryOrCreate}}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: toolkit, namespace: gpu-cdi}
spec:
  selector: {matchLabels: {app: toolkit}}
  template:
    metadata: {labels: {app: toolkit}}
    spec:
      nodeSelector: {feature.node.kubernetes.io/pci-10de.present: "true", $TK_LABEL: "true"}
      containers:
      - name: toolkit
        image: gpuop:demo
        args: [toolkit, --host-root=/host]
        env:
        - {name: NVIDIA_DRIVER_ROOT, value: /run/nvidia/driver}
        - {name: RUNTIME_RESTART_MODE, value: none}
        - {name: TOOLKIT_INTERVAL, value: 500ms}
        securityContext: {privileged: true}
        volumeMounts: [{name: host-root, mountPath: /host}]
      volumes: [{name: host-root, hostPath: {path: /}}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: device-plugin, namespace: gpu-cdi}
spec:
  selector: {matchLabels: {app: device-plugin}}
  template:
    metadata: {labels: {app: device-plugin}}
    spec:
      nodeSelector: {feature.node.kubernetes.io/pci-10de.present: "true", $DP_LABEL: "true"}
      containers:
      - name: device-plugin
        image: gpuop:demo
        args: [device-plugin]
        env:
        - {name: DEVICE_LIST_STRATEGY, value: cdi-cri}
        - {name: NVIDIA_DRIVER_ROOT, value: /run/nvidia/driver}
        volumeMounts:
        - {name: device-plugin, mountPath: /var/lib/kubelet/device-plugins}
        - {name: cdi-root, mountPath: /var/run/cdi}
        - {name: run-nvidia, mountPath: /run/nvidia}
      volumes:
      - {name: device-plugin, hostPath: {path: /var/lib/kubelet/device-plugins}}
      - {name: cdi-root, hostPath: {path: /var/run/cdi, type: DirectoryOrCreate}}
      - {name: run-nvidia, hostPath: {path: /run/nvidia}}
EOF
k apply -f "$T/stack.yaml" >/dev/null || fail "apply the stack"
wait_for 60 "$H advertises 8 nvidia.com/gpu" want_alloc $H nvidia.com/gpu 8
wait_for 30 "cdi-l4-1 advertises 4 nvidia.com/gpu" want_alloc cdi-l4-1 nvidia.com/gpu 4
spec_has() { grep -q "$2" "$T/roots/$1/var/run/cdi/nvidia.yaml" 2>/dev/null; }
for n in $H cdi-l4-1; do
    wait_for 30 "$n's toolkit spec" spec_has $n "libnvidia-ml.so.$OLD"
done
spec=$R/var/run/cdi/nvidia.yaml
grep -q '^kind: nvidia.com/gpu$' "$spec" || fail "the toolkit's spec kind: $(head -3 "$spec")"
grep -q "hostPath: $T/roots" "$spec" && fail "the spec names a path of the machine, not of the node"
grep -q 'hostPath: /run/nvidia/driver/dev/nvidia7$' "$spec" || fail "no /dev/nvidia7 under the driver root in $spec"
echo "ok: the toolkit wrote each node's spec: $(grep -c '^- name:' "$spec") devices on $H, $(grep -c '^- name:' "$T/roots/cdi-l4-1/var/run/cdi/nvidia.yaml") on cdi-l4-1, driver $OLD"

# a GPU pod: CDI names in the Allocate response only; /dev and the sample's verdict in its log
gpu_pod() { # NAME COUNT [SECONDS the sample holds its GPUs]
    k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  restartPolicy: Never
  nodeSelector: {kubernetes.io/hostname: $H}
  containers:
  - name: cuda
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env: [{name: SIM_WORKLOAD_SECONDS, value: "${3:-0}"}]
    command: [sh, -c, 'echo "visible=\${NVIDIA_VISIBLE_DEVICES-unset}"; cd /dev && find . -name "nvidia*" ! -type d -exec stat -c "%n %t:%T" {} + | sort; cuda-sample']
    resources: {limits: {nvidia.com/gpu: $2}}
EOF
}
phase() { k get pod "$1" -o jsonpath='{.status.phase}'; }
is_phase() { [ "$(phase "$1")" = "$2" ]; }
# the device nodes a running pod's devices should give: each allocated UUID's nodes in the
# plugin's spec (the kubelet's checkpoint holds them while the pod runs), and the control nodes
want_nodes() {
    python3 - "$R/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint" \
        "$R/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json" "$1" <<'PY'
import json, sys
ck, spec, pod = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
ids = [i for e in ck["Data"]["PodDeviceEntries"] if e["PodName"] == pod
       for l in e["DeviceIDs"].values() for i in l]
by = {d["name"]: d for d in spec["devices"]}
nodes = {n["path"] for i in ids for n in by[i]["containerEdits"]["deviceNodes"]}
nodes |= {n["path"] for n in spec["containerEdits"]["deviceNodes"]}
print(" ".join(sorted("." + p[len("/dev"):] for p in nodes)))
PY
}
gpu_pod cdi-two 2 2
wait_for 30 "cdi-two runs" is_phase cdi-two Running
want=$(want_nodes cdi-two)
wait_for 30 "cdi-two completes" is_phase cdi-two Succeeded
log=$(k logs cdi-two)
grep -q "Test PASSED" <<<"$log" || fail "cdi-two's log: $log"
grep -qx "visible=unset" <<<"$log" || fail "cdi-two has NVIDIA_VISIBLE_DEVICES: $log"
got=$(grep '^\./' <<<"$log" | awk '{print $1}' | sort | tr '\n' ' ' | sed 's/ $//')
[ -n "$want" ] && [ "$got" = "$want" ] || fail "cdi-two's /dev: got \"$got\", want \"$want\""
[ "$(grep -c '^\./nvidia[0-9]' <<<"$log")" = 2 ] || fail "cdi-two sees other than 2 GPU nodes: $got"
grep -q '^\./nvidiactl c3:ff$' <<<"$log" || fail "cdi-two's nvidiactl is not 195:255: $log"
echo "ok: a GPU pod's CDI names resolved; its /dev holds exactly $got; the CUDA sample passed"

# a CDI name no spec on the node defines: the device plugin's spec taken away
dps=$R/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json
mv "$dps" "$T/dp-spec.json" || fail "move the device plugin's spec"
gpu_pod cdi-missing 1
msg() { k get pod cdi-missing -o jsonpath='{.status.containerStatuses[0].state.waiting.message}'; }
unresolvable() { msg | grep -q "unresolvable CDI devices k8s.device-plugin.nvidia.com/gpu=GPU-"; }
wait_for 20 "cdi-missing refused with containerd's error" unresolvable
reason=$(k get pod cdi-missing -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}')
[ "$reason" = CreateContainerError ] || fail "cdi-missing waits with $reason"
echo "ok: an unknown CDI name: $reason: $(msg)"
mv "$T/dp-spec.json" "$dps" || fail "restore the device plugin's spec"
wait_for 30 "cdi-missing runs once the spec is back" is_phase cdi-missing Succeeded
k delete pod cdi-two cdi-missing --wait=true --timeout=30s >/dev/null || fail "delete the pods"

# a driver upgrade on $H, as the driver manager does it: the device plugin and the toolkit, which
# hold the module through NVML, paused and gone (the GPUs withdrawn), the DaemonSet's image moved
# to $NEW and its pod replaced (the old driver unloads, the new one loads), the operands restored
paused=paused-for-driver-upgrade
k label node $H --overwrite $DP_LABEL=$paused $TK_LABEL=$paused >/dev/null || fail "pause $H's operands"
operands_gone() {
    [ -z "$(k -n gpu-cdi get pods -l 'app in (device-plugin,toolkit)' --field-selector spec.nodeName=$H -o name)" ]
}
wait_for 30 "$H's device plugin and toolkit pods gone" operands_gone
wait_for 30 "$H withdraws its GPUs" want_alloc $H nvidia.com/gpu 0
k -n gpu-cdi patch ds nvidia-driver --type=json \
    -p "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"nvcr.io/nvidia/driver:$NEW-ubuntu22.04\"}]" \
    >/dev/null || fail "move the driver DaemonSet to $NEW"
drv=$(k -n gpu-cdi get pods -l app=nvidia-driver --field-selector spec.nodeName=$H -o jsonpath='{.items[0].metadata.name}')
k -n gpu-cdi delete pod "$drv" --wait=true --timeout=30s >/dev/null || fail "delete $drv"
loaded() { [ "$(cat "$R/sys/module/nvidia/version" 2>/dev/null)" = "$1" ]; }
wait_for 30 "$H's driver $NEW loaded" loaded $NEW
k label node $H --overwrite $DP_LABEL=true $TK_LABEL=true >/dev/null || fail "restore $H's operands"
upgraded() { spec_has $H "libnvidia-ml.so.$NEW" && ! spec_has $H "$OLD"; }
wait_for 60 "$H's spec regenerated for $NEW" upgraded
for lib in libnvidia-ml.so.$NEW libcuda.so.$NEW; do
    grep -q "hostPath: /run/nvidia/driver/usr/lib/x86_64-linux-gnu/$lib$" "$spec" || fail "no $lib in the spec"
done
spec_has cdi-l4-1 "libnvidia-ml.so.$OLD" || fail "cdi-l4-1's spec changed with $H's driver"
echo "ok: the driver upgrade regenerated $H's spec: no path of $OLD, $(grep -c "$NEW" "$spec") of $NEW; cdi-l4-1 keeps $OLD"
wait_for 30 "$H advertises 8 again" want_alloc $H nvidia.com/gpu 8
gpu_pod cdi-after 1
wait_for 30 "cdi-after completes" is_phase cdi-after Succeeded
grep -q "Test PASSED" <<<"$(k logs cdi-after)" || fail "cdi-after's log: $(k logs cdi-after)"
echo "ok: a GPU pod passes on $NEW"

# the device plugin handing out the toolkit's names (--cdi-kind nvidia.com/gpu): it removes its
# own spec, and a GPU pod's names resolve against the toolkit's regenerated spec alone (whose
# devices also bring the driver's libraries)
k -n gpu-cdi set env ds/device-plugin GPUOP_CDI_KIND=nvidia.com/gpu >/dev/null || fail "set GPUOP_CDI_KIND"
# the DaemonSet's rolling update replaces the plugin pod; the new one removes the old spec
new_plugin() {
    local v
    v=$(k -n gpu-cdi get pods -l app=device-plugin --field-selector spec.nodeName=$H \
        -o jsonpath='{range .items[*]}{.status.phase} {.spec.containers[0].env[?(@.name=="GPUOP_CDI_KIND")].value}{"\n"}{end}')
    grep -qx "Running nvidia.com/gpu" <<<"$v"
}
wait_for 30 "a device plugin pod with GPUOP_CDI_KIND on $H" new_plugin
no_own_spec() { [ ! -e "$dps" ] && want_alloc $H nvidia.com/gpu 8; }
wait_for 30 "the device plugin on $H without a spec of its own, advertising 8" no_own_spec
k delete pod cdi-after --wait=true --timeout=30s >/dev/null || fail "delete cdi-after"
gpu_pod cdi-toolkit 2
wait_for 30 "cdi-toolkit completes" is_phase cdi-toolkit Succeeded
log=$(k logs cdi-toolkit)
grep -q "Test PASSED" <<<"$log" || fail "cdi-toolkit's log: $log"
[ "$(grep -c '^\./nvidia[0-9]' <<<"$log")" = 2 ] || fail "cdi-toolkit sees other than 2 GPU nodes: $log"
ls "$R"/var/run/cdi/ | grep -qv '^nvidia.yaml$' && fail "another spec than the toolkit's on $H: $(ls "$R"/var/run/cdi/)"
echo "ok: with the toolkit's kind the plugin writes no spec; a GPU pod resolved its names against the toolkit's spec for $NEW and passed"

stop_kubelet_sim
ip link show klcdi0 >/dev/null 2>&1 && fail "the bridge klcdi0 is left"
echo PASS
