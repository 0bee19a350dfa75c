#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# End to end on a simulated Grace pool: kubesim, kubelet-sim with sim/clusters/grace.yaml (a GH200
# and a GB200 node, arm64, their drivers on the host) and the node stack
# (sim/clusters/node-stack.yaml): the nodes register as arm64 (label and nodeInfo), NVIDIA's
# DaemonSets, which select no architecture, run there, and the device plugin advertises each
# node's GPUs: the GH200's one GPU, the GB200's whole GPU and the MIG devices of its
# all-balanced GPU (mixed strategy). The pods' programs are this machine's build (docs/arm64.md).
# Needs root (namespaces, a bridge); skips (77) saying so otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
start_kubesim --api-ip 198.18.255.59
start_kubelet_sim "$S/sim/clusters/grace.yaml" 2 --bridge klgrace0 --subnet 198.18.246.0/24
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
