#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# End to end on a simulated Grace pool: kubesim, kubelet-sim with sim/clusters/grace.yaml (a GH200
# and a GB200 node, arm64, their drivers on the host) and the node stack
# (sim/clusters/node-stack.yaml): the nodes register as arm64 (label and nodeInfo), NVIDIA's
# DaemonSets, which select no architecture, run there, and the device plugin advertises each
# node's GPUs: the GH200's one GPU, the GB200's whole GPU and the MIG devices of its
# all-balanced GPU (mixed strategy). Then the CUDA sample runs on the GH200 on the GPU it was
# allocated (the node's exporter attributes the GPU's memory to it) and passes.
# With an arm64 cross tree (GPUOP_ARM64_BUILD, default build-arm64 in the source tree: `make
# cross ARCH=arm64`, or at least its gpuop, gpuop-tomlx.so, sim-image, libnvidia-ml.so.1 and
# libcuda.so.1) and qemu-user, kubelet-sim runs the nodes' programs from it under qemu
# (docs/arm64.md), and the test requires every operand process and the CUDA sample's to be an
# aarch64 program (scripts/node-procs.py: /proc/PID/exe is qemu, the program it runs is aarch64).
# Without them the nodes run this machine's build, and the test says it skips that check.
# Needs root (namespaces, a bridge); skips (77) saying so otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
start_kubesim --api-ip 198.18.255.59
ARM=${GPUOP_ARM64_BUILD:-$S/build-arm64}
arm=()
for f in gpuop gpuop-tomlx.so libnvidia-ml.so.1 libcuda.so.1 sim-image; do
    [ -f "$ARM/$f" ] || { arm=(); why="$ARM/$f is missing"; break; }
    arm=(--arm64-build "$ARM")
done
command -v qemu-aarch64-static >/dev/null || command -v qemu-aarch64 >/dev/null ||
    [ -f /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || { arm=(); why="no qemu-user (qemu-user-static)"; }
if [ ${#arm[@]} = 0 ]; then
    echo "SKIP (part): the nodes run this machine's programs, not arm64 ones: ${why} (make cross ARCH=arm64)"
fi
start_kubelet_sim "$S/sim/clusters/grace.yaml" 2 --bridge klgrace0 --subnet 198.18.246.0/24 "${arm[@]}"
for n in gh200-1 gb200-1; do
    is_label $n kubernetes.io/arch arm64 || fail "$n: kubernetes.io/arch is not arm64"
    [ "$(k get node $n -o jsonpath='{.status.nodeInfo.architecture}')" = arm64 ] ||
        fail "$n: nodeInfo.architecture is not arm64"
    k label node $n nvidia.com/gpu.deploy.driver=pre-installed >/dev/null || fail "label $n"
done
echo "ok: 2 arm64 nodes registered"
k apply -f "$S/sim/clusters/node-stack.yaml" >/dev/null || fail "apply the node stack"
wait_for 90 "gh200-1 advertises its GPU" want_alloc gh200-1 nvidia.com/gpu 1
wait_for 60 "gb200-1 advertises its whole GPU" want_alloc gb200-1 nvidia.com/gpu 1
wait_for 30 "gb200-1 advertises 2 nvidia.com/mig-1g.23gb" want_alloc gb200-1 nvidia.com/mig-1g.23gb 2
wait_for 30 "gb200-1 advertises 1 nvidia.com/mig-3g.93gb" want_alloc gb200-1 nvidia.com/mig-3g.93gb 1
echo "ok: each Grace node advertises its fleet's GPUs and MIG devices"

# every process of the node's operands runs an aarch64 program (under qemu-user or binfmt_misc),
# and those of at least the device plugin and the exporter are there
arm64_operands() {
    "$S/scripts/node-procs.py" "$T/roots/$1" >"$T/procs-$1.txt" || return 1
    ! awk '$2 != "aarch64"' "$T/procs-$1.txt" | grep -q . &&
        [ "$(grep -c 'gpuop:demo$' "$T/procs-$1.txt")" -ge 2 ]
}
if [ ${#arm[@]} != 0 ]; then
    for n in gh200-1 gb200-1; do
        poll 30 arm64_operands $n ||
            fail "$n: not every operand is an aarch64 program: $(cat "$T/procs-$n.txt")"
        grep -q "^[0-9]* aarch64 $(realpath "$ARM")/gpuop " "$T/procs-$n.txt" ||
            fail "$n: no process runs $ARM/gpuop: $(cat "$T/procs-$n.txt")"
    done
    echo "ok: the Grace nodes' operands are aarch64 processes:"
    sed 's/^/  /' "$T/procs-gh200-1.txt"
fi

# the CUDA sample on the GH200, its one GPU allocated to it
sed -e 's/kubernetes.io\/hostname: dgx-h100-1/kubernetes.io\/hostname: gh200-1/' \
    -e 's/value: "20"/value: "12"/' "$S/sim/clusters/cuda-sample.yaml" >"$T/cuda-sample.yaml"
grep -q 'hostname: gh200-1' "$T/cuda-sample.yaml" || fail "the CUDA sample's node selector"
k apply -f "$T/cuda-sample.yaml" >/dev/null || fail "apply the CUDA sample"
sample_procs() {
    "$S/scripts/node-procs.py" "$T/roots/gh200-1" --image cuda-sample >"$T/procs-sample.txt" &&
        grep -q . "$T/procs-sample.txt"
}
wait_for 60 "the CUDA sample runs on gh200-1" sample_procs
if [ ${#arm[@]} != 0 ]; then
    awk '$2 != "aarch64"' "$T/procs-sample.txt" | grep -q . &&
        fail "the CUDA sample is not an aarch64 program: $(cat "$T/procs-sample.txt")"
    echo "ok: the CUDA sample is an aarch64 process: $(cat "$T/procs-sample.txt")"
fi
ip=$(k get node gh200-1 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
mkdir -p "$T/inventory-state"
uuid=$(GPUOP_SIM_FLEET=$S/sim/fleets/gh200.yaml GPUOP_SIM_STATE=$T/inventory-state \
    GPUOP_NVML_LIBRARY=$B/libnvidia-ml.so.1 "$B/gpuop" inventory --json --no-topology |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["gpus"][0]["uuid"])') ||
    fail "the GH200's GPU UUID from its fleet"
attributed() {
    metrics=$(curl -sf "http://$ip:9400/metrics") &&
        grep '^DCGM_FI_DEV_FB_USED' <<<"$metrics" | grep 'pod="cuda-vectoradd"' | grep -q "UUID=\"$uuid\""
}
wait_for 30 "gh200-1's exporter attributes $uuid's memory to the CUDA sample" attributed
wait_for 60 "the CUDA sample completes" \
    sh -c "[ \"\$($K get pod cuda-vectoradd -o jsonpath='{.status.phase}')\" = Succeeded ]"
k logs cuda-vectoradd | grep -q '^Test PASSED' || fail "the CUDA sample's log: $(k logs cuda-vectoradd)"
echo "ok: the CUDA sample ran on gh200-1's GPU $uuid and passed"
