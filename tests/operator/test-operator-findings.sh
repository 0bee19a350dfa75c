#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What the node agents found, in the ClusterPolicy's status, end to end against kubesim: a node
# whose gpu-count annotation (the node status exporter's) says mismatch gets the
# GPUCountMismatch condition naming it with its counts, and a Warning Event; a node whose
# validator annotation says failed gets ValidationFailed naming the component and the reason.
# Node annotation changes alone trigger the reconcile (no other change is made). Once the nodes
# report no finding, both conditions go, with a Normal Event each.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim"
POLICY=$S/tests/operator/fixtures/clusterpolicy-full.yaml

start_kubesim --load "$S/sim/clusters/demo.yaml" --pod-ready-delay 200ms
$K apply -f "$S/deploy/crds/" >/dev/null

P=$(free_port)
"$B/gpuop" operator --kubeconfig "$KUBECONFIG" --namespace gpu-operator --operand-image gpuop:test \
    --metrics-listen "127.0.0.1:$P" --leader-elect false >"$T/operator.log" 2>&1 &
pids+=($!)
wait_for 20 "operator ready" curl -sf "127.0.0.1:$P/readyz"
$K apply -f "$POLICY" >/dev/null
st() { $K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.state}'; }
cond() { # TYPE FIELD
    $K get clusterpolicy gpu-cluster-policy -o jsonpath="{.status.conditions[?(@.type==\"$1\")].$2}"
}
events() { $K get events -A -o jsonpath='{range .items[*]}{.type}/{.reason}{"\n"}{end}'; }
wait_for 30 "ClusterPolicy ready" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.state}')\" = ready ]"
[ -z "$(cond GPUCountMismatch status)" ] || fail "GPUCountMismatch on a healthy cluster"

COUNT='{"physical":8,"expected":{"nvidia.com/gpu":8},"advertised":{"nvidia.com/gpu":7},"missing":["nvidia.com/gpu: 7 of 8 advertised","GPU-5eed0002-0000-4000-8000-000000000002 (lost)"],"short":true,"since":"2026-01-01T00:00:00Z","mismatch":true}'
$K annotate node dgx-h100-2 "gpuop.dev/gpu-count=$COUNT" >/dev/null
wait_for 20 "GPUCountMismatch True" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"GPUCountMismatch\")].status}')\" = True ]"
msg=$(cond GPUCountMismatch message)
echo "GPUCountMismatch: $msg"
[ "$msg" = "dgx-h100-2: 8 GPUs, nvidia.com/gpu: 7 of 8 advertised, GPU-5eed0002-0000-4000-8000-000000000002 (lost), since 2026-01-01T00:00:00Z" ] ||
    fail "condition message: $msg"
[ "$(cond GPUCountMismatch reason)" = AdvertisedFewerGPUs ] || fail "reason $(cond GPUCountMismatch reason)"
wait_for 10 "GPUCountMismatch Event" sh -c "$K get events -A -o jsonpath='{range .items[*]}{.type}/{.reason}{\"\\n\"}{end}' | grep -qx Warning/GPUCountMismatch"
[ "$(st)" = ready ] || fail "a count mismatch changed the policy's state to $(st)"

$K annotate node a100-mig-1 'validation.gpuop.dev/plugin={"state":"failed","reason":"nvidia.com/mig-1g.10gb: 5 of 7 advertised","time":"2026-01-01T00:00:00Z"}' >/dev/null
wait_for 20 "ValidationFailed True" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"ValidationFailed\")].status}')\" = True ]"
msg=$(cond ValidationFailed message)
echo "ValidationFailed: $msg"
[ "$msg" = "a100-mig-1: plugin: nvidia.com/mig-1g.10gb: 5 of 7 advertised" ] || fail "condition message: $msg"
wait_for 10 "ValidationFailed Event" sh -c "$K get events -A -o jsonpath='{range .items[*]}{.type}/{.reason}{\"\\n\"}{end}' | grep -qx Warning/ValidationFailed"
n=$(events | grep -cx Warning/GPUCountMismatch)
[ "$n" = 1 ] || fail "GPUCountMismatch reported $n times for one change"

# Resolved: the exporter's annotation says no mismatch, the validator's ok.
$K annotate --overwrite node dgx-h100-2 'gpuop.dev/gpu-count={"physical":8,"expected":{"nvidia.com/gpu":8},"advertised":{"nvidia.com/gpu":8},"missing":[],"short":false,"since":"","mismatch":false}' >/dev/null
$K annotate --overwrite node a100-mig-1 'validation.gpuop.dev/plugin={"state":"ok","reason":"","time":"2026-01-01T00:01:00Z"}' >/dev/null
wait_for 20 "conditions gone" sh -c "[ -z \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"GPUCountMismatch\")].status}{.status.conditions[?(@.type==\"ValidationFailed\")].status}')\" ]"
wait_for 10 "GPUCountMatched Event" sh -c "$K get events -A -o jsonpath='{range .items[*]}{.type}/{.reason}{\"\\n\"}{end}' | grep -qx Normal/GPUCountMatched"
# Events are posted after the status write that clears the condition: wait for each.
wait_for 10 "ValidationRecovered Event" sh -c "$K get events -A -o jsonpath='{range .items[*]}{.type}/{.reason}{\"\\n\"}{end}' | grep -qx Normal/ValidationRecovered"
echo "ok: node findings reach the ClusterPolicy's status and Events"
