#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuop node-status-exporter` as the node's GPU health agent, end to end: the simulated DGX H100
# (sim/nvml) as its GPUs, kubesim as its API server, run under the shipped ClusterRole. Each fault
# class of the catalog injected with gpuop-sim shows on the Node (the gpu-health annotation and
# the GPUHealthy condition) with the catalog's action; an uncorrectable ECC error shows within 5 s
# (measured) and a GPU reset clears it; a GPU off the bus needs a reboot and its XID stays until
# the remediation acknowledges it; slowdowns count once held; an XID the application handles is
# only reported; a restarted agent continues from the Node without writing it again.
set -euo pipefail
B=${GPUOP_BUILD_ROOT:?}
S=${GPUOP_SOURCE_ROOT:?}
. "$S/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim" "$B/libnvidia-ml.so.1"

NODE=dgx-h100-1
export GPUOP_NVML_LIBRARY=$B/libnvidia-ml.so.1 GPUOP_SIM_FLEET=$S/sim/fleets/dgx-h100.yaml
export GPUOP_SIM_STATE=$T/state GPUOP_SYSFS_ROOT=$T/sys
mkdir -p "$GPUOP_SIM_STATE" "$T/validations" "$T/sys/bus/pci/devices"
SIM() { "$B/gpuop-sim" "$@" >/dev/null || fail "gpuop-sim $*"; }

start_kubesim --load "$S/sim/clusters/demo.yaml"
$K create namespace gpu-operator >/dev/null 2>&1 || true
awk 'BEGIN{RS="\n---\n"; ORS="\n---\n"} !/kind: DaemonSet/' "$S/deploy/operands/node-status-exporter.yaml" |
    sed 's/\${NAMESPACE}/gpu-operator/g' | $K apply -f - >/dev/null
SAKC=$T/nse.kubeconfig
sa_kubeconfig "$SAKC" gpu-operator nvidia-node-status-exporter

start_agent() {
    NODE_NAME=$NODE "$B/gpuop" node-status-exporter --kubeconfig "$SAKC" --listen 127.0.0.1:0 \
        --interval 500ms --mismatch-grace 1s --health-interval 200ms --slowdown-window 1s \
        --validations-dir "$T/validations" >>"$T/nse.log" 2>&1 &
    AGENT=$!
    pids+=($AGENT)
}
health() { $K get node "$NODE" -o jsonpath='{.metadata.annotations.gpuop\.dev/gpu-health}'; }
cond() { $K get node "$NODE" -o jsonpath="{.status.conditions[?(@.type==\"GPUHealthy\")].$1}"; }
is_cond() { [ "$(cond status)" = "$1" ] && [ "$(cond reason)" = "$2" ]; }
# has_fault CLASS ACTION: the annotation lists an active fault of CLASS with ACTION
has_fault() { health | python3 -c "import json,sys; h=json.load(sys.stdin); sys.exit(0 if any(f['class']=='$1' and f['action']=='$2' for f in h['faults']) else 1)"; }
no_fault() { ! has_fault "$@"; }
seq_of() { health | python3 -c "import json,sys; h=json.load(sys.stdin); print(max([f['seq'] for f in h['faults'] if f['class']=='$1']))"; }
ack() { $K annotate node "$NODE" --overwrite "remediation.gpuop.dev/ack-seq=$1" >/dev/null; }

# what the device plugin advertises: all 8
alloc() {
    $K patch node "$NODE" --subresource=status --type=merge \
        -p "{\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"8\"},\"allocatable\":{\"nvidia.com/gpu\":\"$1\"}}}" >/dev/null
}
alloc 8
start_agent
wait_for 10 "GPUHealthy True" is_cond True GPUsHealthy
health | grep -q '"healthy":true' || fail "annotation: $(health)"

# An uncorrectable ECC error on GPU 3: the event and the count, reset-gpu, within 5 s.
UUID3=$("$B/gpuop-sim" show | grep -o '^GPU 3  .*' | grep -o 'GPU-[0-9a-f-]*' | head -1)
[ -n "$UUID3" ] || fail "no UUID for GPU 3"
t0=$(date +%s%N)
SIM inject ecc --gpu 3 --dbe 1
wait_for 5 "UncorrectableECC" is_cond False UncorrectableECC
ms=$((($(date +%s%N) - t0) / 1000000))
echo "uncorrectable ECC error on the node in ${ms}ms"
[ $ms -le $((5000 * ${GPUOP_TEST_TIME_SCALE:-1})) ] || fail "the fault took ${ms}ms to show"
has_fault ecc-dbe reset-gpu || fail "no ecc-dbe fault: $(health)"
has_fault remap-pending reset-gpu || fail "no remap-pending fault: $(health)"
cond message | grep -q "$UUID3" || fail "the condition does not name the GPU: $(cond message)"
# the reset clears it: no acknowledgement needed for what NVML shows
SIM gpu-reset --gpu 3
wait_for 5 "healthy after the reset" is_cond True GPUsHealthy

# GPU 5 falls off the bus: XID 79 and the lost GPU, reboot-node; a reset cannot reach it.
SIM inject lost --gpu 5
wait_for 5 "GPULost" has_fault lost reboot-node
has_fault xid reboot-node || fail "no XID 79 fault: $(health)"
case "$(cond status)/$(cond reason)" in False/GPULost | False/Xid79) ;; *) fail "condition: $(cond reason)" ;; esac
"$B/gpuop-sim" gpu-reset --gpu 5 >/dev/null 2>&1 && fail "a lost GPU was reset"
SIM reboot
wait_for 5 "the lost GPU back, XID 79 latched" is_cond False Xid79
ack "$(seq_of xid)"
wait_for 5 "healthy after the acknowledgement" is_cond True GPUsHealthy

# NVLink errors (XID 74 and the counters): reset-gpu, latched.
SIM inject nvlink --gpu 2
wait_for 5 "NVLink" has_fault nvlink reset-gpu
has_fault xid reset-gpu || fail "no XID 74: $(health)"
SIM gpu-reset --gpu 2
ack "$(health | python3 -c "import json,sys; print(json.load(sys.stdin)['seq'])")"
wait_for 5 "healthy after NVLink" is_cond True GPUsHealthy

# The device plugin holds back a GPU NVML reports healthy: reported (none), the node healthy.
alloc 7
wait_for 10 "the device plugin disagrees" has_fault plugin none
is_cond True GPUsHealthy || fail "the disagreement took the node out: $(cond reason)"
alloc 8
wait_for 10 "the device plugin agrees again" no_fault plugin none

# A thermal slowdown counts once held for the window (1s); the cooling back, it goes.
SIM inject thermal --gpu 1
wait_for 5 "ThermalSlowdown" is_cond False ThermalSlowdown
has_fault thermal replace-hw || fail "thermal: $(health)"
SIM inject cool --gpu 1
wait_for 5 "healthy after cooling" is_cond True GPUsHealthy
SIM inject power --gpu 7
wait_for 5 "PowerBrakeSlowdown" is_cond False PowerBrakeSlowdown
SIM inject cool --gpu 7

# A row remapping that failed: replace-hw.
SIM inject remap-failure --gpu 6
wait_for 5 "RowRemapFailure" has_fault remap-failure replace-hw

# An XID the application handles: reported as the last event, the node's health unchanged.
SIM inject xid --gpu 0 --code 13
wait_for 5 "XID 13 reported" sh -c "$K get node $NODE -o jsonpath='{.metadata.annotations.gpuop\.dev/gpu-health}' | grep -q '\"last\":{\"action\":\"restart-workload\",\"class\":\"xid\",\"code\":13'"
[ "$(cond reason)" = RowRemapFailure ] || fail "XID 13 changed the condition: $(cond reason)"

# The metrics say the same.
PORT=$(sed -n 's/.* serving .*port=\([0-9]*\).*/\1/p' "$T/nse.log" | tail -1)
curl -sf "http://127.0.0.1:$PORT/metrics" >"$T/m" || fail "scrape"
grep -qx "gpuop_node_gpu_healthy{node=\"$NODE\"} 0" "$T/m" || fail "healthy gauge: $(grep gpu_healthy "$T/m")"
grep -qx "gpuop_node_gpu_health_faults{node=\"$NODE\",class=\"remap-failure\"} 1" "$T/m" ||
    fail "faults gauge: $(grep health_faults "$T/m")"
grep -qx "gpuop_node_gpu_health_action{node=\"$NODE\",action=\"replace-hw\"} 1" "$T/m" || fail "action gauge"
if command -v promtool >/dev/null; then
    promtool check metrics <"$T/m" >"$T/lint" 2>&1 || true
    ! grep -v '_total non-counter metrics should not have' "$T/lint" | grep -q . || fail "promtool: $(cat "$T/lint")"
fi

# A restarted agent continues from the Node: the same faults and numbers, no write.
before=$(health)
kill "$AGENT"
rc=0
wait "$AGENT" 2>/dev/null || rc=$?
[ $rc = 0 ] || fail "the agent exited $rc on SIGTERM (a sanitizer's report?)"
rv1=$($K get node "$NODE" -o jsonpath='{.metadata.resourceVersion}')
start_agent
wait_for 10 "agent serving again" sh -c "[ \$(grep -c ' serving ' $T/nse.log) = 2 ]"
sleep 1
rv2=$($K get node "$NODE" -o jsonpath='{.metadata.resourceVersion}')
[ "$(health)" = "$before" ] || fail "the health changed over a restart: $before -> $(health)"
[ "$rv1" = "$rv2" ] || fail "a restarted agent wrote the node ($rv1 -> $rv2)"
echo "ok: every fault class on the node with its action; reset, reboot and acknowledgement clear them"
