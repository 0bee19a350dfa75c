#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The exporter's profiling fields end to end on simulated nodes (kubesim, kubelet-sim; every pod
# a process): gpuop's device plugin and exporter (profiling fields on, a collection a second) on
#  - a DGX H100: a CUDA sample given two GPUs and a set load (SIM_WORKLOAD_LOAD) raises
#    DCGM_FI_PROF_SM_ACTIVE and DCGM_FI_PROF_PIPE_TENSOR_ACTIVE on exactly its two GPUs, to its
#    load, attributed to its pod; the other GPUs stay at 0; deleted, its GPUs fall back to 0;
#  - an H100 with MIG on GPU 0: a CUDA sample on one 1g.10gb MIG device raises its GPU
#    instance's fields (GPU_I_ID, GPU_I_PROFILE, its pod), not the other instances'; the whole
#    GPU's value is the instances' weighted by their SMs;
#  - a DGX A100 (no GPM): no profiling series at all, and the exporter's start-up log names each
#    requested field unsupported with the architecture as the reason.
# Needs root (namespaces); skips (77) saying so otherwise.
set -uo pipefail
B=${GPUOP_BUILD_ROOT:?}
S=${GPUOP_SOURCE_ROOT:?}
. "$S/tests/kubelet/lib.sh"
H=gpm-h100-1
M=gpm-h100mig-1
A=gpm-a100-1

# An H100 node whose GPU 0 runs MIG (a 3g.40gb and two 1g.10gb instances); GPU 1 whole.
h100=$(sed -n '/^  - model:/,/^topology:/p' "$S/sim/fleets/dgx-h100.yaml" | sed '/^topology:/d;/^ *#/d;s/count: 8/count: 1/')
cat >"$T/h100-mig.yaml" <<EOF
driver_version: "570.86.15"
cuda_driver_version: 12080
seed: 7
gpus:
$h100
    mig:
      enabled: true
      instances: ["3g.40gb", "1g.10gb", "1g.10gb"]
$h100
EOF
cat >"$T/cluster.yaml" <<EOF
apiVersion: gpuop.dev/v1alpha1
kind: SimCluster
nodes:
- {name: $H, fleet: $S/sim/fleets/dgx-h100.yaml, root: $T/roots/$H, kernel: 5.15.0-127-generic,
   os: {id: ubuntu, versionId: "22.04"}, runtime: containerd, hostDriver: "570.86.15"}
- {name: $M, fleet: $T/h100-mig.yaml, root: $T/roots/$M, kernel: 5.15.0-127-generic,
   os: {id: ubuntu, versionId: "22.04"}, runtime: containerd, hostDriver: "570.86.15"}
- {name: $A, fleet: $S/sim/fleets/dgx-a100-80gb-mig.yaml, root: $T/roots/$A,
   kernel: 5.15.0-127-generic, os: {id: ubuntu, versionId: "22.04"}, runtime: cri-o,
   hostDriver: "550.90.07"}
EOF
start_kubesim --api-ip 198.18.255.32 --tls
start_kubelet_sim "$T/cluster.yaml" 3 --bridge klgpm0 --subnet 198.18.232.0/24
echo "ok: 3 nodes registered by kubelet-sim"

k apply -f - >/dev/null <<'EOF' || fail "apply the stack"
apiVersion: v1
kind: Namespace
metadata: {name: gpu-gpm}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: exporter-counters, namespace: gpu-gpm}
data:
  counters.csv: |
    DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).
    DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, Ratio of time the graphics engine is active.
    DCGM_FI_PROF_SM_ACTIVE, gauge, The ratio of cycles an SM has at least 1 warp assigned.
    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active.
    DCGM_FI_PROF_DRAM_ACTIVE, gauge, Ratio of cycles the device memory interface is active sending or receiving data.
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: gpuop-device-plugin, namespace: gpu-gpm}
spec:
  selector: {matchLabels: {app: gpuop-device-plugin}}
  template:
    metadata: {labels: {app: gpuop-device-plugin}}
    spec:
      nodeSelector: {feature.node.kubernetes.io/pci-10de.present: "true"}
      containers:
      - name: device-plugin
        image: gpuop:demo
        args: [device-plugin]
        env: [{name: MIG_STRATEGY, value: mixed}]
        volumeMounts: [{name: device-plugin, mountPath: /var/lib/kubelet/device-plugins}]
      volumes: [{name: device-plugin, hostPath: {path: /var/lib/kubelet/device-plugins}}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: gpuop-exporter, namespace: gpu-gpm}
spec:
  selector: {matchLabels: {app: gpuop-exporter}}
  template:
    metadata: {labels: {app: gpuop-exporter}}
    spec:
      nodeSelector: {feature.node.kubernetes.io/pci-10de.present: "true"}
      containers:
      - name: exporter
        image: gpuop:demo
        args: [exporter]
        env:
        - {name: DCGM_EXPORTER_LISTEN, value: ":9400"}
        - {name: DCGM_EXPORTER_KUBERNETES, value: "true"}
        - {name: DCGM_EXPORTER_INTERVAL, value: "1000"}
        - {name: DCGM_EXPORTER_COLLECTORS, value: /etc/dcgm-exporter/counters.csv}
        volumeMounts:
        - {name: pod-resources, mountPath: /var/lib/kubelet/pod-resources, readOnly: true}
        - {name: counters, mountPath: /etc/dcgm-exporter, readOnly: true}
      volumes:
      - {name: pod-resources, hostPath: {path: /var/lib/kubelet/pod-resources}}
      - {name: counters, configMap: {name: exporter-counters}}
EOF
wait_for 60 "$H advertises 8 nvidia.com/gpu" want_alloc $H nvidia.com/gpu 8
wait_for 30 "$M advertises 2 nvidia.com/mig-1g.10gb" want_alloc $M nvidia.com/mig-1g.10gb 2
wait_for 30 "$A advertises its 2 full GPUs" want_alloc $A nvidia.com/gpu 2
echo "ok: the device plugin advertises each node's GPUs"

ip_of() { k get node "$1" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}'; }
# page NODE FILE: the node's exporter page into FILE
page() { curl -sf --max-time 5 "http://$(ip_of "$1"):9400/metrics" -o "$2"; }
# vals FILE METRIC FILTER: "<gpu>[/<GPU_I_ID>] <value> <pod>" of each METRIC series whose labels
# contain FILTER (a fixed string)
vals() {
    grep "^$2{" "$1" | grep -F -- "$3" | sed -E 's/^[^{]*\{.*gpu="([0-9]+)".*\} (.*)$/\1 \2 &/' |
        awk '{gi=""; if (match($0, /GPU_I_ID="[0-9]+"/)) gi="/" substr($0, RSTART+10, RLENGTH-11);
              pod=""; if (match($0, /pod="[^"]*"/)) pod=substr($0, RSTART+5, RLENGTH-6);
              print $1 gi, $2, pod}' | sort
}
near() { awk -v a="$1" -v b="$2" 'BEGIN {d = a - b; exit !(d < 0.005 && d > -0.005)}'; }

for n in $H $M $A; do
    wait_for 60 "the exporter on $n serves GPU temperatures" sh -c \
        "curl -sf --max-time 5 http://$(ip_of $n):9400/metrics | grep -q '^DCGM_FI_DEV_GPU_TEMP{'"
done
# Idle: every GPU of the H100 serves its fields, at 0 (from the collection after the first: a
# field needs two samples).
idle_h100() { page $H "$T/h.prom" && [ "$(vals "$T/h.prom" DCGM_FI_PROF_SM_ACTIVE '' | awk '$2 == 0' | wc -l)" = 8 ]; }
wait_for 30 "the idle $H serves DCGM_FI_PROF_SM_ACTIVE at 0 on 8 GPUs" idle_h100 ||
    fail "idle $H: $(vals "$T/h.prom" DCGM_FI_PROF_SM_ACTIVE '')"
echo "ok: the idle DGX H100 serves the profiling fields at 0 on its 8 GPUs"

# 1. A CUDA sample on two GPUs of the DGX H100, sm 0.8, tensor 0.6.
k apply -f - >/dev/null <<EOF || fail "create tensor-load"
apiVersion: v1
kind: Pod
metadata: {name: tensor-load, namespace: default}
spec:
  restartPolicy: Never
  nodeSelector: {kubernetes.io/hostname: $H}
  containers:
  - name: cuda
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env:
    - {name: SIM_WORKLOAD_SECONDS, value: "600"}
    - {name: SIM_WORKLOAD_LOAD, value: "sm=0.8,tensor=0.6,dram=0.3"}
    resources: {limits: {nvidia.com/gpu: 2}}
EOF
# its two GPUs read the load, attributed to it, and the six others 0 (a whole collection
# interval under the load: the pair after the one that saw it start)
loaded() {
    page $H "$T/h.prom" || return 1
    local sm tensor
    sm=$(vals "$T/h.prom" DCGM_FI_PROF_SM_ACTIVE '')
    tensor=$(vals "$T/h.prom" DCGM_FI_PROF_PIPE_TENSOR_ACTIVE '')
    [ "$(awk '$3 == "tensor-load"' <<<"$sm" | wc -l)" = 2 ] || return 1
    awk '$3 == "tensor-load" {print $2}' <<<"$sm" | while read -r v; do near "$v" 0.8 || exit 1; done || return 1
    awk '$3 == "tensor-load" {print $2}' <<<"$tensor" | while read -r v; do near "$v" 0.6 || exit 1; done || return 1
    [ "$(awk '$3 == "tensor-load"' <<<"$tensor" | wc -l)" = 2 ] || return 1
    [ "$(awk '$3 != "tensor-load" && $2 == 0' <<<"$sm" | wc -l)" = 6 ] || return 1
    [ "$(awk '$3 != "tensor-load" && $2 == 0' <<<"$tensor" | wc -l)" = 6 ]
}
wait_for 60 "tensor-load's two GPUs at SM 0.8 and tensor 0.6, the others at 0" loaded ||
    fail "$(vals "$T/h.prom" DCGM_FI_PROF_SM_ACTIVE '')"
gpus=$(vals "$T/h.prom" DCGM_FI_PROF_SM_ACTIVE 'pod="tensor-load"' | awk '{print $1}' | paste -sd,)
# exactly the GPUs the kubelet allocated it (its checkpoint), by UUID
uid=$(k get pod tensor-load -o jsonpath='{.metadata.uid}')
allocated=$(jq -r --arg u "$uid" '[.Data.PodDeviceEntries[] | select(.PodUID == $u) | .DeviceIDs[][]] | sort | join(",")' \
    "$T/roots/$H/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint")
served=$(grep '^DCGM_FI_PROF_SM_ACTIVE{' "$T/h.prom" | grep -F 'pod="tensor-load"' |
    sed -E 's/.*UUID="([^"]*)".*/\1/' | sort | paste -sd,)
[ "$served" = "$allocated" ] || fail "tensor-load was allocated $allocated; its series are on $served"
grep '^DCGM_FI_PROF_GR_ENGINE_ACTIVE{' "$T/h.prom" | grep -F 'pod="tensor-load"' | awk '{print $NF}' |
    while read -r v; do near "$v" 0.8 || exit 1; done || fail "GR_ENGINE_ACTIVE of tensor-load's GPUs"
echo "ok: tensor-load raises SM 0.8 and tensor 0.6 on exactly its GPUs ($gpus = $allocated), attributed to it"

k delete pod tensor-load --wait=true --timeout=30s >/dev/null || fail "delete tensor-load"
idle() {
    page $H "$T/h.prom" || return 1
    [ "$(vals "$T/h.prom" DCGM_FI_PROF_SM_ACTIVE '' | awk '$2 == 0' | wc -l)" = 8 ] &&
        [ "$(vals "$T/h.prom" DCGM_FI_PROF_PIPE_TENSOR_ACTIVE '' | awk '$2 == 0' | wc -l)" = 8 ]
}
wait_for 30 "every GPU of $H back at 0 after tensor-load ended" idle ||
    fail "$(vals "$T/h.prom" DCGM_FI_PROF_SM_ACTIVE '')"
echo "ok: the fields fall back to 0 when tensor-load ends"

# 2. A CUDA sample on one 1g.10gb MIG device of the MIG H100.
k apply -f - >/dev/null <<EOF || fail "create mig-load"
apiVersion: v1
kind: Pod
metadata: {name: mig-load, namespace: default}
spec:
  restartPolicy: Never
  nodeSelector: {kubernetes.io/hostname: $M}
  containers:
  - name: cuda
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env:
    - {name: SIM_WORKLOAD_SECONDS, value: "600"}
    - {name: SIM_WORKLOAD_LOAD, value: "sm=0.7,tensor=0.4"}
    resources: {limits: {nvidia.com/mig-1g.10gb: 1}}
EOF
mig_loaded() {
    page $M "$T/m.prom" || return 1
    local sm
    sm=$(vals "$T/m.prom" DCGM_FI_PROF_SM_ACTIVE '')
    # its instance at its load, attributed; the two other instances at 0
    [ "$(awk '$3 == "mig-load"' <<<"$sm" | wc -l)" = 1 ] || return 1
    near "$(awk '$3 == "mig-load" {print $2}' <<<"$sm")" 0.7 || return 1
    near "$(vals "$T/m.prom" DCGM_FI_PROF_PIPE_TENSOR_ACTIVE 'pod="mig-load"' | awk '{print $2}')" 0.4 || return 1
    [ "$(awk '$1 ~ /^0\// && $3 != "mig-load" && $2 == 0' <<<"$sm" | wc -l)" = 2 ]
}
wait_for 60 "mig-load's GPU instance at SM 0.7 and tensor 0.4, the other instances at 0" mig_loaded ||
    fail "$(vals "$T/m.prom" DCGM_FI_PROF_SM_ACTIVE '')"
inst=$(vals "$T/m.prom" DCGM_FI_PROF_SM_ACTIVE 'pod="mig-load"' | awk '{print $1}')
grep '^DCGM_FI_PROF_SM_ACTIVE{' "$T/m.prom" | grep -F 'pod="mig-load"' | grep -q 'GPU_I_PROFILE="1g.10gb"' ||
    fail "mig-load's series lacks GPU_I_PROFILE 1g.10gb"
# The whole GPU (no MIG labels): the instances weighted by their SMs, 0.7 x 16/132 for a 1g.10gb
# of an H100 (the simulator's SM counts) -- above 0 and below the instance's own value.
whole=$(vals "$T/m.prom" DCGM_FI_PROF_SM_ACTIVE '' | awk '$1 == "0" {print $2}')
awk -v w="$whole" 'BEGIN {exit !(w > 0 && w < 0.7)}' || fail "GPU 0 whole: $whole"
# GPU 1 (no MIG) idle
[ "$(vals "$T/m.prom" DCGM_FI_PROF_SM_ACTIVE '' | awk '$1 == "1" {print $2}')" = 0 ] || fail "GPU 1 not idle"
echo "ok: mig-load raises its GPU instance ($inst, 1g.10gb) to SM 0.7 and tensor 0.4, attributed; GPU 0 whole $whole"
k delete pod mig-load --wait=true --timeout=30s >/dev/null || fail "delete mig-load"
mig_idle() {
    page $M "$T/m.prom" || return 1
    ! vals "$T/m.prom" DCGM_FI_PROF_SM_ACTIVE '' | awk '$2 != 0' | grep -q .
}
wait_for 30 "every GPU and instance of $M back at 0" mig_idle ||
    fail "$(vals "$T/m.prom" DCGM_FI_PROF_SM_ACTIVE '')"
echo "ok: the MIG instance falls back to 0 when mig-load ends"

# 3. The A100: no profiling series; the start-up log names each field with the reason.
page $A "$T/a.prom" || fail "scrape $A"
! grep -q '^DCGM_FI_PROF_' "$T/a.prom" || fail "$A serves profiling fields: $(grep -m3 '^DCGM_FI_PROF_' "$T/a.prom")"
grep -q '^DCGM_FI_DEV_GPU_TEMP{' "$T/a.prom" || fail "$A serves no temperatures"
pod=$(k -n gpu-gpm get pods -l app=gpuop-exporter --field-selector spec.nodeName=$A -o jsonpath='{.items[0].metadata.name}')
log=$(k -n gpu-gpm logs "$pod" 2>&1)
for f in GR_ENGINE_ACTIVE SM_ACTIVE PIPE_TENSOR_ACTIVE DRAM_ACTIVE; do
    [ "$(grep -c "field not supported, not exported field=DCGM_FI_PROF_$f reason=\"gpu 0-7: NVIDIA A100-SXM4-80GB is ampere (compute capability 8.0): GPU Performance Monitoring needs a Hopper or newer GPU\"" <<<"$log")" = 1 ] ||
        fail "$A's exporter log does not name DCGM_FI_PROF_$f unsupported once: $(grep PROF <<<"$log")"
done
echo "ok: the DGX A100 serves no profiling fields; its exporter's log names each, with the architecture"
