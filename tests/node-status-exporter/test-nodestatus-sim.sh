#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuop node-status-exporter` end to end: the simulated DGX H100 (sim/nvml) as its GPUs, kubesim
# as its API server, run under its ServiceAccount with the ClusterRole the operand template
# ships (RBAC enforced). A healthy node reports 8 physical and 8 advertised GPUs and writes the
# gpu-count annotation; a GPU injected as lost, with the node's allocatable one short, makes
# gpuop_node_gpu_advertised_short 1 at once and gpuop_node_gpu_advertised_mismatch 1 only after
# the grace period, the annotation says mismatch and names the lost GPU, and the operator then
# reports GPUCountMismatch naming the node (condition and Event). promtool checks every page.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim" "$B/libnvidia-ml.so.1"
need_cmd promtool

NODE=dgx-h100-1
export GPUOP_NVML_LIBRARY=$B/libnvidia-ml.so.1 GPUOP_SIM_FLEET=$S/sim/fleets/dgx-h100.yaml
export GPUOP_SIM_STATE=$T/state GPUOP_SYSFS_ROOT=$T/sys
mkdir -p "$GPUOP_SIM_STATE" "$T/validations"
# Eight NVIDIA PCI functions (and a host bridge that is not one).
for i in 0 1 2 3 4 5 6 7; do
    mkdir -p "$T/sys/bus/pci/devices/0000:1$i:00.0"
    echo 0x10de >"$T/sys/bus/pci/devices/0000:1$i:00.0/vendor"
done
mkdir -p "$T/sys/bus/pci/devices/0000:00:00.0" && echo 0x8086 >"$T/sys/bus/pci/devices/0000:00:00.0/vendor"
: >"$T/validations/driver-ready"
: >"$T/validations/toolkit-ready"

# Bad input: one line naming it, exit 2, before anything is read.
rc=0; env -u NODE_NAME "$B/gpuop" node-status-exporter >"$T/bad.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q 'no node name' "$T/bad.log" || fail "no node name: exit $rc: $(cat "$T/bad.log")"
rc=0; NODE_NAME=x "$B/gpuop" node-status-exporter --mig-strategy=both >"$T/bad.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q 'mig-strategy' "$T/bad.log" || fail "bad MIG strategy: exit $rc: $(cat "$T/bad.log")"

start_kubesim --load "$S/sim/clusters/demo.yaml"
$K create namespace gpu-operator >/dev/null 2>&1 || true
# The operand's ServiceAccount, ClusterRole and binding, as shipped (the DaemonSet left out).
awk 'BEGIN{RS="\n---\n"; ORS="\n---\n"} !/kind: DaemonSet/' "$S/deploy/operands/node-status-exporter.yaml" |
    sed 's/\${NAMESPACE}/gpu-operator/g' | $K apply -f - >/dev/null
SAKC=$T/nse.kubeconfig
sa_kubeconfig "$SAKC" gpu-operator nvidia-node-status-exporter
# What the device plugin would advertise for the healthy node.
alloc() { # N: capacity and allocatable nvidia.com/gpu
    $K patch node "$NODE" --subresource=status --type=merge \
        -p "{\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"},\"allocatable\":{\"nvidia.com/gpu\":\"$1\"}}}" >/dev/null
}
alloc 8

# --once: one observation, the page on stdout (and the annotation written).
NODE_NAME=$NODE "$B/gpuop" node-status-exporter --kubeconfig "$SAKC" --once \
    --validations-dir "$T/validations" >"$T/once.prom" 2>"$T/once.log" || fail "--once: $(cat "$T/once.log")"
grep -qxF "gpuop_node_gpus_physical{node=\"$NODE\"} 8" "$T/once.prom" || fail "--once page: $(head -5 "$T/once.prom")"
$K annotate node "$NODE" gpuop.dev/gpu-count- >/dev/null

NODE_NAME=$NODE "$B/gpuop" node-status-exporter --kubeconfig "$SAKC" --listen 127.0.0.1:0 \
    --interval 200ms --mismatch-grace 2s --validations-dir "$T/validations" \
    >"$T/nse.log" 2>&1 &
pids+=($!)
wait_for 10 "exporter serving" grep -q ' serving ' "$T/nse.log"
PORT=$(sed -n 's/.* serving .*port=\([0-9]*\).*/\1/p' "$T/nse.log" | head -1)
scrape() { curl -sf --max-time 5 "http://127.0.0.1:$PORT/metrics" >"$T/m"; }
has() { scrape && grep -Eq "$1" "$T/m"; }
# promtool on the last page. Its only finding may be on NVIDIA's two gauges named *_total
# (kept as NVIDIA names them, so dashboards and alerts written for NVIDIA's exporter work).
NVIDIA_TOTALS='^gpu_operator_(node_device_plugin_devices|nvidia_pci_devices)_total non-counter metrics should not have "_total" suffix$'
lint() {
    local rc=0
    promtool check metrics <"$T/m" >"$T/lint" 2>&1 || rc=$?
    [ $rc = 0 ] || [ $rc = 3 ] || fail "promtool exit $rc: $(head -5 "$T/lint")"
    ! grep -Ev "$NVIDIA_TOTALS" "$T/lint" | grep -q . || fail "promtool: $(cat "$T/lint")"
}
ann() { $K get node "$NODE" -o jsonpath='{.metadata.annotations.gpuop\.dev/gpu-count}'; }

wait_for 10 "8 advertised" has "^gpuop_node_gpu_resources_advertised\{node=\"$NODE\",resource=\"nvidia.com/gpu\"\} 8$"
for want in "gpuop_node_gpus_physical{node=\"$NODE\"} 8" \
    "gpuop_node_gpu_advertised_mismatch{node=\"$NODE\"} 0" \
    "gpuop_node_gpu_advertised_short{node=\"$NODE\"} 0" \
    "gpu_operator_node_driver_ready{node=\"$NODE\"} 1" \
    "gpu_operator_node_toolkit_ready{node=\"$NODE\"} 1" \
    "gpu_operator_node_cuda_ready{node=\"$NODE\"} 0" \
    "gpu_operator_node_driver_validation{node=\"$NODE\"} 1" \
    "gpu_operator_node_device_plugin_devices_total{node=\"$NODE\"} 8" \
    "gpu_operator_nvidia_pci_devices_total{node=\"$NODE\"} 8"; do
    grep -qxF "$want" "$T/m" || fail "missing: $want"
done
lint
wait_for 10 "annotation written" sh -c "$K get node $NODE -o jsonpath='{.metadata.annotations}' | grep -q gpu-count"
a=$(ann)
echo "healthy: $a"
case "$a" in *'"physical":8'*'"mismatch":false'*) ;; *) fail "annotation: $a" ;; esac
# Written once: a steady node costs no writes.
rv1=$($K get node "$NODE" -o jsonpath='{.metadata.resourceVersion}')
sleep 1
rv2=$($K get node "$NODE" -o jsonpath='{.metadata.resourceVersion}')
[ "$rv1" = "$rv2" ] || fail "the node was written again without a change ($rv1 -> $rv2)"

# GPU 2 is lost and the node advertises one GPU fewer.
"$B/gpuop-sim" inject lost --gpu 2 >/dev/null || fail "inject lost"
alloc 7
wait_for 10 "short" has "^gpuop_node_gpu_advertised_short\{node=\"$NODE\"\} 1$"
t_short=$SECONDS
grep -qxF "gpuop_node_gpu_advertised_mismatch{node=\"$NODE\"} 0" "$T/m" ||
    fail "mismatch before the grace period: $(grep mismatch "$T/m")"
grep -qxF "gpuop_node_gpus_lost{node=\"$NODE\"} 1" "$T/m" || fail "lost GPU not counted"
lint
wait_for 10 "mismatch" has "^gpuop_node_gpu_advertised_mismatch\{node=\"$NODE\"\} 1$"
[ $((SECONDS - t_short)) -ge 1 ] || fail "mismatch came before the grace period"
lint
curl -sf -H 'Accept: application/openmetrics-text; version=1.0.0' "http://127.0.0.1:$PORT/metrics" >"$T/m"
tail -1 "$T/m" | grep -qx '# EOF' || fail "OpenMetrics page without # EOF"
grep -q '^gpuop_node_gpu_advertised_mismatch{node="'$NODE'"} 1$' "$T/m" || fail "OpenMetrics page differs"
wait_for 10 "annotation says mismatch" sh -c "$K get node $NODE -o jsonpath='{.metadata.annotations.gpuop\.dev/gpu-count}' | grep -q '\"mismatch\":true'"
a=$(ann)
echo "lost GPU: $a"
case "$a" in *'"short":true'*) ;; *) fail "annotation not short: $a" ;; esac
case "$a" in *GPU-*lost*) ;; *) fail "annotation does not name the lost GPU: $a" ;; esac

# The operator reports it: GPUCountMismatch naming the node, and a Warning Event.
$K apply -f "$S/deploy/crds/" >/dev/null
P=$(free_port)
"$B/gpuop" operator --kubeconfig "$KUBECONFIG" --namespace gpu-operator --operand-image gpuop:test \
    --metrics-listen "127.0.0.1:$P" --leader-elect false >"$T/operator.log" 2>&1 &
pids+=($!)
wait_for 20 "operator ready" curl -sf "127.0.0.1:$P/readyz"
$K apply -f "$S/tests/operator/fixtures/clusterpolicy-full.yaml" >/dev/null
cond() { $K get clusterpolicy gpu-cluster-policy -o jsonpath="{.status.conditions[?(@.type==\"$1\")].$2}"; }
wait_for 30 "GPUCountMismatch" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"GPUCountMismatch\")].status}')\" = True ]"
msg=$(cond GPUCountMismatch message)
echo "GPUCountMismatch: $msg"
case "$msg" in "$NODE: 8 GPUs, nvidia.com/gpu: 7 of 8 advertised, GPU-"*" (lost), since "*) ;; *) fail "condition message: $msg" ;; esac
wait_for 10 "GPUCountMismatch Event" sh -c "$K get events -A -o jsonpath='{range .items[*]}{.type}/{.reason}{\"\\n\"}{end}' | grep -qx Warning/GPUCountMismatch"
echo "ok: lost GPU -> mismatch after the grace period -> GPUCountMismatch"
