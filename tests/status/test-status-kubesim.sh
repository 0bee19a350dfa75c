#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpuop status against kubesim's demo cluster with the operator running: the three facts (the
# version the operator wrote in the ClusterPolicy's status, the policy's last writer from
# managedFields as kubesim records them for kubectl's writes, the last drain from a node's
# gpuop.dev/last-drain), the pools and the per-node table, checked in -o json and against a
# golden text (times and ages masked); a node whose gpu-count annotation says a GPU is lost is
# flagged MISMATCH. Then the same through kubectl: `kubectl gpuop status` finds the kubectl-gpuop
# link on PATH and prints the same JSON.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
JQ=$(command -v jq) || skip "jq not installed"
need_built "$B/kubesim" "$B/kubectl-gpuop"

start_kubesim --load "$S/sim/clusters/demo.yaml" --pod-ready-delay 200ms
$K apply -f "$S/deploy/crds/" >/dev/null
P=$(free_port)
"$B/gpuop" operator --kubeconfig "$KUBECONFIG" --namespace gpu-operator --operand-image gpuop:test \
    --metrics-listen "127.0.0.1:$P" --leader-elect false >"$T/operator.log" 2>&1 &
OP=$!
pids+=($OP)
wait_for 20 "operator ready" curl -sf "127.0.0.1:$P/readyz"
$K apply -f "$S/tests/operator/fixtures/clusterpolicy-full.yaml" >/dev/null
wait_for 30 "ClusterPolicy ready" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.state}')\" = ready ]"
# someone changes the policy's spec: the owner line names kubectl's patch
$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"daemonsets":{"rollingUpdate":{"maxUnavailable":"2"}}}}' >/dev/null
# The operator stops here (what it wrote stays): the upgrade states below are set by hand, and
# its upgrade controller would move them on.
sleep 1
kill $OP
wait $OP 2>/dev/null || true
$K label node a100-mig-1 l4-hostdriver-1 nvidia.com/gpu-driver-upgrade-state- >/dev/null

# what the node agents write (the driver manager, the validator, the node status exporter)
own() { echo "{\"owner\":\"$1\",\"version\":\"$2\",\"source\":\"test\",\"time\":\"2026-01-01T00:00:00Z\"}"; }
ok='{"state":"ok","reason":"","time":"2026-01-01T00:00:00Z"}'
for n in dgx-h100-1 dgx-h100-2 a100-mig-1; do
    $K annotate --overwrite node "$n" "gpuop.dev/driver-owner=$(own container 550.127.05)" \
        "validation.gpuop.dev/driver=$ok" "validation.gpuop.dev/toolkit=$ok" \
        "validation.gpuop.dev/cuda=$ok" "validation.gpuop.dev/plugin=$ok" >/dev/null
done
$K annotate --overwrite node l4-hostdriver-1 "gpuop.dev/driver-owner=$(own host 535.183.01)" >/dev/null
$K annotate --overwrite node dgx-h100-1 \
    'gpuop.dev/gpu-count={"physical":8,"expected":{"nvidia.com/gpu":8},"advertised":{"nvidia.com/gpu":8},"missing":[],"short":false,"since":"","mismatch":false}' \
    'gpuop.dev/last-drain={"time":"2026-01-02T03:04:05Z","reason":"driver reload: the containerized driver 550.127.05 replaces the loaded nvidia 535.183.01","by":"driver-manager"}' >/dev/null
$K annotate --overwrite node dgx-h100-2 \
    'gpuop.dev/gpu-count={"physical":8,"expected":{"nvidia.com/gpu":8},"advertised":{"nvidia.com/gpu":7},"missing":["nvidia.com/gpu: 7 of 8 advertised","GPU-5eed0002-0000-4000-8000-000000000002 (lost)"],"short":true,"since":"2026-01-01T00:00:00Z","mismatch":true}' \
    'gpuop.dev/last-drain={"time":"2026-01-01T00:00:00Z","reason":"an older drain","by":"driver-manager"}' >/dev/null
$K label --overwrite node dgx-h100-1 nvidia.com/gpu-driver-upgrade-state=upgrade-done >/dev/null
$K label --overwrite node dgx-h100-2 nvidia.com/gpu-driver-upgrade-state=drain-required >/dev/null
$K label --overwrite node a100-mig-1 nvidia.com/mig.config.state=success >/dev/null

"$B/gpuop" status --kubeconfig "$KUBECONFIG" -o json >"$T/status.json" 2>"$T/status.log" ||
    fail "gpuop status -o json: $(cat "$T/status.log")"
q() { "$JQ" -e "$1" "$T/status.json" >/dev/null || fail "status JSON: $1 does not hold: $("$JQ" -c "${2:-.summary}" "$T/status.json")"; }
version=$("$B/gpuop" version | sed -n 's/^gpuop //p')
q ".summary.operatorVersion == \"$version\""
q '.summary.clusterPolicy | .name == "gpu-cluster-policy" and .state == "ready"'
q '.summary.clusterPolicy.lastChange | .manager == "kubectl-patch" and .operation == "Update" and (.time | test("Z$"))'
q '.summary.lastDrain | .node == "dgx-h100-1" and .time == "2026-01-02T03:04:05Z" and .by == "driver-manager"'
q '.summary.nodes == {"total":5,"gpu":4,"attention":1}'
q '[.nodes[].name] == ["a100-mig-1","dgx-h100-1","dgx-h100-2","l4-hostdriver-1"]' '.nodes'
q '.nodes[] | select(.name == "dgx-h100-2") | .gpus.mismatch and .gpus.physical == 8 and .gpus.advertisedTotal == 7 and .health == "fail"' '.nodes'
q '.nodes[] | select(.name == "dgx-h100-2") | any(.problems[]; contains("GPU-5eed0002-0000-4000-8000-000000000002 (lost)"))' '.nodes'
q '.nodes[] | select(.name == "dgx-h100-1") | .health == "ok" and (.gpus.mismatch | not) and .driver.owner == "container" and (.validations | length) == 4' '.nodes'
q '.nodes[] | select(.name == "l4-hostdriver-1") | .driver == {"owner":"host","version":"535.183.01","source":"test","time":"2026-01-01T00:00:00Z"}' '.nodes'
q '.nodes[] | select(.name == "a100-mig-1") | .mig.state == "success" and .mig.config == "all-balanced"' '.nodes'
q '.pools == [{"name":"ubuntu22.04","nodes":4,"targetVersion":null,"versions":{"550.127.05":3,"535.183.01":1},"upgrade":{"done":1,"inProgress":1,"failed":0,"required":0,"none":2},"states":{"drain-required":1}}]' '.pools'

# the text: no colour without a terminal, the golden table (times and ages masked)
"$B/gpuop" status --kubeconfig "$KUBECONFIG" >"$T/status.txt" 2>"$T/status.log" ||
    fail "gpuop status: $(cat "$T/status.log")"
cat "$T/status.txt"
! grep -q $'\x1b' "$T/status.txt" || fail "colour codes without a terminal"
grep -E '^dgx-h100-2 .* 7/8 MISMATCH ' "$T/status.txt" >/dev/null || fail "the lost GPU is not flagged"
mask() { sed -E 's/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z/<time>/g; s/, [0-9]+[smhd] ago/, <age> ago/g; s/gpuop [0-9][^,]*,/gpuop <version>,/'; }
mask <"$T/status.txt" >"$T/masked.txt"
if [ -n "${GPUOP_UPDATE_GOLDEN:-}" ]; then cp "$T/masked.txt" "$S/tests/status/golden/kubesim.txt"; fi
diff -u "$S/tests/status/golden/kubesim.txt" "$T/masked.txt" || fail "text differs from tests/status/golden/kubesim.txt"
"$B/gpuop" status --kubeconfig "$KUBECONFIG" --color=always | grep -q $'\x1b\\[31m7/8 MISMATCH' ||
    fail "--color=always: the mismatch is not red"

# kubectl's plugin: kubectl-gpuop on PATH
PATH=$B:$PATH "$KUBECTL" plugin list 2>/dev/null | grep -q "$B/kubectl-gpuop" || fail "kubectl plugin list does not show kubectl-gpuop"
PATH=$B:$PATH "$KUBECTL" gpuop status -o json >"$T/plugin.json" 2>"$T/plugin.log" ||
    fail "kubectl gpuop status: $(cat "$T/plugin.log")"
"$JQ" -S . "$T/plugin.json" >"$T/a" && "$JQ" -S . "$T/status.json" >"$T/b"
diff -u "$T/b" "$T/a" || fail "kubectl gpuop status -o json differs from gpuop status -o json"
echo "ok: gpuop status and kubectl gpuop status on the demo cluster"
