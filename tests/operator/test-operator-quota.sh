#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPU quotas against advertised capacity, end to end on kubesim's two-pool cluster
# (sim/clusters/two-pools.yaml: training pinned to 16 H100 GPUs, serving to 8 L4 GPUs, a notebook
# namespace with a GPU pod and no quota). Balanced: the metrics say ratio 1, no over-commit
# condition, the quota-less namespace listed; nothing changes, nothing is written. An H100 node is
# removed: the over-commit ratio and GPUPoolBelowQuota turn on within a reconcile, with an Event
# naming the pool and the namespace. The node comes back: both turn off, with Normal Events.
# `gpuop status` shows both states: its capacity section against golden files
# (tests/status/golden/quota-*.txt), and the same view in -o json.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim"

start_kubesim --load "$S/sim/clusters/two-pools.yaml" --pod-ready-delay 100ms
$K apply -f "$S/deploy/crds/" >/dev/null
$K get node h100-2 -o json >"$T/h100-2.json"

P=$(free_port)
"$B/gpuop" operator --kubeconfig "$KUBECONFIG" --namespace gpu-operator --operand-image gpuop:test \
    --metrics-listen "127.0.0.1:$P" --leader-elect false >"$T/operator.log" 2>&1 &
pids+=($!)
wait_for 20 "operator ready" curl -sf "127.0.0.1:$P/readyz"
$K apply -f "$S/tests/operator/fixtures/clusterpolicy-full.yaml" >/dev/null
metric() { curl -sf "127.0.0.1:$P/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
cond() { # TYPE FIELD
    $K get clusterpolicy gpu-cluster-policy -o jsonpath="{.status.conditions[?(@.type==\"$1\")].$2}"
}
# gpuop status's capacity section (the last one) compared with tests/status/golden/quota-$1.txt
status_golden() {
    "$B/gpuop" status --kubeconfig "$KUBECONFIG" >"$T/status-$1.txt" 2>"$T/status.log" ||
        fail "gpuop status: $(cat "$T/status.log")"
    sed -n '/^GPU quotas:/,$p' "$T/status-$1.txt" >"$T/quota-$1.txt"
    cat "$T/quota-$1.txt"
    if [ -n "${GPUOP_UPDATE_GOLDEN:-}" ]; then cp "$T/quota-$1.txt" "$S/tests/status/golden/quota-$1.txt"; fi
    diff -u "$S/tests/status/golden/quota-$1.txt" "$T/quota-$1.txt" ||
        fail "gpuop status differs from tests/status/golden/quota-$1.txt"
    "$B/gpuop" status --kubeconfig "$KUBECONFIG" -o json >"$T/status-$1.json"
    jq -e "$2" "$T/status-$1.json" >/dev/null || fail "gpuop status -o json: $2 does not hold: $(jq -c .capacity "$T/status-$1.json")"
}
events() { $K get events -A -o jsonpath='{range .items[*]}{.type}/{.reason}: {.message}{"\n"}{end}'; }
RATIO='gpuop_gpu_quota_overcommit_ratio{resource="nvidia.com/gpu"}'
H100='pool="NVIDIA-H100-80GB-HBM3"'

wait_for 20 "the capacity metrics" sh -c "curl -sf 127.0.0.1:$P/metrics | grep -q '^gpuop_gpu_capacity'"
[ "$(metric "$RATIO")" = 1 ] || fail "balanced ratio: $(metric "$RATIO")"
[ "$(metric "gpuop_gpu_capacity{resource=\"nvidia.com/gpu\",$H100}")" = 16 ] ||
    fail "H100 capacity: $(curl -sf "127.0.0.1:$P/metrics" | grep gpuop_gpu_)"
[ "$(metric 'gpuop_gpu_quota_hard{namespace="training",resource="nvidia.com/gpu"}')" = 16 ] ||
    fail "training quota metric"
[ "$(metric 'gpuop_gpu_quota_used{namespace="training",resource="nvidia.com/gpu"}')" = 8 ] ||
    fail "training used metric"
wait_for 20 "GPUQuotaMissing" sh -c "[ -n \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"GPUQuotaMissing\")].status}')\" ]"
[ "$(cond GPUQuotaMissing message)" = "notebooks: 1 GPU pod, no GPU quota" ] ||
    fail "GPUQuotaMissing: $(cond GPUQuotaMissing message)"
[ -z "$(cond GPUQuotaOvercommitted status)" ] || fail "over-committed while balanced"
[ -z "$(cond GPUPoolBelowQuota status)" ] || fail "a pool short while balanced"
status_golden balanced '.capacity.resources[0] | .name == "nvidia.com/gpu" and .advertised == 24 and .quota == 24 and (.over | not)'

# Converged: a few seconds with no change cost no write. (First the reconcile that the last
# condition came with settles: its status and Events may still be on their way on a slow,
# sanitized build.)
settled() { local a; a=$(metric gpuop_operator_api_writes_total); sleep 2; [ "$a" = "$(metric gpuop_operator_api_writes_total)" ]; }
wait_for 30 "no operator write for 2 s" settled
w0=$(metric gpuop_operator_api_writes_total)
sleep 3
w1=$(metric gpuop_operator_api_writes_total)
[ "$w0" = "$w1" ] || fail "writes while nothing changed: $w0 -> $w1"

# An H100 node is lost.
$K delete node h100-2 >/dev/null
wait_for 20 "GPUPoolBelowQuota True" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"GPUPoolBelowQuota\")].status}')\" = True ]"
[ "$(metric "$RATIO")" = 1.5 ] || fail "ratio after the loss: $(metric "$RATIO")"
msg=$(cond GPUPoolBelowQuota message)
echo "GPUPoolBelowQuota: $msg"
[ "$msg" = "pool NVIDIA-H100-80GB-HBM3 advertises 8 nvidia.com/gpu, below the 16 its namespaces' quotas pin to it (namespaces: training)" ] ||
    fail "GPUPoolBelowQuota message: $msg"
msg=$(cond GPUQuotaOvercommitted message)
[ "$msg" = "nvidia.com/gpu: namespace quotas promise 24 of 16 advertised (ratio 1.50, threshold 1.00)" ] ||
    fail "GPUQuotaOvercommitted message: $msg"
wait_for 10 "the pool's Event" sh -c "$K get events -A -o jsonpath='{range .items[*]}{.type}/{.reason}: {.message}{\"\\n\"}{end}' | grep -q '^Warning/GPUPoolBelowQuota: pool NVIDIA-H100-80GB-HBM3 .*namespaces: training'"
status_golden node-lost '.capacity.resources[0] | .advertised == 16 and .quota == 24 and .over'
wait_for 10 "the over-commit Event" sh -c "$K get events -A -o jsonpath='{range .items[*]}{.type}/{.reason}{\"\\n\"}{end}' | grep -qx Warning/GPUQuotaOvercommitted"

# It comes back.
jq 'del(.metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp)' "$T/h100-2.json" |
    $K create -f - >/dev/null
wait_for 20 "conditions gone" sh -c "[ -z \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"GPUPoolBelowQuota\")].status}{.status.conditions[?(@.type==\"GPUQuotaOvercommitted\")].status}')\" ]"
[ "$(metric "$RATIO")" = 1 ] || fail "ratio after the restore: $(metric "$RATIO")"
wait_for 10 "GPUPoolCapacityRestored Event" sh -c "$K get events -A -o jsonpath='{range .items[*]}{.type}/{.reason}{\"\\n\"}{end}' | grep -qx Normal/GPUPoolCapacityRestored"
wait_for 10 "GPUQuotaWithinCapacity Event" sh -c "$K get events -A -o jsonpath='{range .items[*]}{.type}/{.reason}{\"\\n\"}{end}' | grep -qx Normal/GPUQuotaWithinCapacity"
n=$(events | grep -c '^Warning/GPUPoolBelowQuota' || true)
[ "$n" = 1 ] || fail "GPUPoolBelowQuota reported $n times for one loss"
echo "ok: GPU quotas against advertised capacity (metrics, conditions, Events)"
