#!/usr/bin/env bash
# Per-pool drivers (NVIDIADriver, useNvidiaDriverCRD) against kubesim with the operator under its
# shipped RBAC, driven and inspected with kubectl:
#  - two NVIDIADrivers on two node pools: one driver DaemonSet each (per OS), the ClusterPolicy's
#    own driver DaemonSet not rendered, the owner label on each node, `kubectl get nvidiadrivers`
#    printer columns showing each one ready with its nodes and version;
#  - a third NVIDIADriver selecting a node of the first: refused (ConflictingNodeSelector in its
#    status and an Event naming both and the node), nothing created, the node's owner unchanged;
#  - the upgrade controller takes each NVIDIADriver's DaemonSet as its nodes' driver DaemonSet:
#    a version change in one NVIDIADriver rolls through its nodes only (their driver pods
#    replaced by the new revision), the other pool's driver pod untouched;
#  - useNvidiaDriverCRD off again: the single driver DaemonSet back, the per-pool ones and the
#    owner labels gone, every NVIDIADriver disabled.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim"

operator_cluster 200ms
PORT=$(free_port)
"$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator --operand-image gpuop:test \
    --metrics-listen "127.0.0.1:$PORT" --leader-elect false >>"$T/operator.log" 2>&1 &
pids+=($!)

$K label node dgx-h100-1 gpuop.test/pool=serving >/dev/null
$K label node dgx-h100-2 a100-mig-1 gpuop.test/pool=research >/dev/null
cat <<'YAML' | $K apply -f - >/dev/null
apiVersion: nvidia.com/v1alpha1
kind: NVIDIADriver
metadata: {name: serving}
spec:
  nodeSelector: {gpuop.test/pool: serving}
  version: "580.105.08"
  env: [{name: GPUOP_POOL, value: serving}]
---
apiVersion: nvidia.com/v1alpha1
kind: NVIDIADriver
metadata: {name: research}
spec:
  nodeSelector: {gpuop.test/pool: research}
  repository: registry.example.com/nvidia
  image: driver
  version: "595.91.07"
YAML
sed -e '/^  driver:$/a\    useNvidiaDriverCRD: true' "$S/tests/operator/fixtures/clusterpolicy-full.yaml" |
    $K apply -f - >/dev/null

G="$K -n gpu-operator get ds"
wait_for 30 "both NVIDIADriver DaemonSets" sh -c "$G nvidia-gpu-driver-serving-ubuntu22.04 && $G nvidia-gpu-driver-research-ubuntu22.04"
$G nvidia-driver-daemonset 2>/dev/null && fail "the ClusterPolicy's driver DaemonSet is rendered with useNvidiaDriverCRD"
img=$($G nvidia-gpu-driver-research-ubuntu22.04 -o jsonpath='{.spec.template.spec.containers[0].image}')
[ "$img" = registry.example.com/nvidia/driver:595.91.07-ubuntu22.04 ] || fail "research image: $img"
env=$($G nvidia-gpu-driver-serving-ubuntu22.04 -o jsonpath='{.spec.template.spec.containers[0].env}')
grep -q GPUOP_POOL <<<"$env" || fail "serving DaemonSet lacks the NVIDIADriver's env: $env"
owner() { $K get node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/gpu-operator\.driver\.owner}'; }
[ "$(owner dgx-h100-1)" = serving ] && [ "$(owner a100-mig-1)" = research ] ||
    fail "owner labels: dgx-h100-1=$(owner dgx-h100-1) a100-mig-1=$(owner a100-mig-1)"

nvd_state() { $K get nvidiadriver "$1" -o jsonpath='{.status.state}'; }
wait_for 40 "both NVIDIADrivers ready" sh -c "[ \"\$($K get nvidiadriver serving -o jsonpath='{.status.state}')\" = ready ] && [ \"\$($K get nvidiadriver research -o jsonpath='{.status.state}')\" = ready ]"
cols=$($K get nvidiadrivers)
echo "$cols"
head -1 <<<"$cols" | grep -Eq '^NAME +STATE +NODES +VERSION +DEFAULT +AGE' || fail "printer columns: $cols"
grep -Eq '^serving +ready +1/1 +580\.105\.08 ' <<<"$cols" || fail "serving row: $cols"
grep -Eq '^research +ready +2/2 +595\.91\.07 ' <<<"$cols" || fail "research row: $cols"

# A third NVIDIADriver selecting dgx-h100-1 too: refused, nothing changed.
cat <<'YAML' | $K apply -f - >/dev/null
apiVersion: nvidia.com/v1alpha1
kind: NVIDIADriver
metadata: {name: overlap}
spec:
  nodeSelector: {kubernetes.io/hostname: dgx-h100-1}
  version: "595.91.07"
YAML
reason() { $K get nvidiadriver "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}'; }
wait_for 20 "overlap refused" sh -c "[ \"\$($K get nvidiadriver overlap -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].reason}')\" = ConflictingNodeSelector ]"
[ "$(reason serving)" = ConflictingNodeSelector ] || fail "serving does not report the conflict: $(reason serving)"
msg=$($K get nvidiadriver overlap -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')
echo "overlap: $msg"
grep -q "node dgx-h100-1 is selected by NVIDIADrivers overlap and serving" <<<"$msg" || fail "conflict message: $msg"
wait_for 10 "a ConflictingNodeSelector Event" sh -c "$K get events -n default --field-selector involvedObject.name=overlap,reason=ConflictingNodeSelector -o name | grep -q ."
$G -l gpuop.dev/nvidia-driver=overlap -o name | grep -q . && fail "overlap created a DaemonSet"
[ "$(owner dgx-h100-1)" = serving ] || fail "dgx-h100-1 owner changed: $(owner dgx-h100-1)"
$K get nvidiadrivers
$K delete nvidiadriver overlap >/dev/null
wait_for 20 "serving ready again" sh -c "[ \"\$($K get nvidiadriver serving -o jsonpath='{.status.state}')\" = ready ]"

# The upgrade controller: research's new version rolls through research's nodes only.
upstate() { $K get node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}'; }
wait_for 30 "driver nodes upgrade-done" sh -c "for n in dgx-h100-1 dgx-h100-2 a100-mig-1; do [ \"\$($K get node \$n -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}')\" = upgrade-done ] || exit 1; done"
pod_on() { $K -n gpu-operator get pods -l "gpuop.dev/nvidia-driver=$1" --field-selector "spec.nodeName=$2" -o jsonpath='{.items[0].metadata.name} {.items[0].metadata.labels.controller-revision-hash}'; }
SERVING_POD=$(pod_on serving dgx-h100-1)
OLD_A=$(pod_on research a100-mig-1)
OLD_B=$(pod_on research dgx-h100-2)
$K patch nvidiadriver research --type merge -p '{"spec":{"version":"595.100.01"}}' >/dev/null
replaced() { # the research pods on both nodes are of a new revision and the nodes done
    local a b
    a=$(pod_on research a100-mig-1) && b=$(pod_on research dgx-h100-2) || return 1
    [ "${a#* }" != "${OLD_A#* }" ] && [ "${b#* }" != "${OLD_B#* }" ] &&
        [ "$(upstate a100-mig-1)" = upgrade-done ] && [ "$(upstate dgx-h100-2)" = upgrade-done ]
}
wait_for 60 "research's nodes upgraded to the new revision" replaced
[ "$(pod_on serving dgx-h100-1)" = "$SERVING_POD" ] || fail "the serving pool's driver pod was touched: $SERVING_POD -> $(pod_on serving dgx-h100-1)"
[ "$(upstate dgx-h100-1)" = upgrade-done ] || fail "serving node state: $(upstate dgx-h100-1)"
grep -q "operand pod deleted for upgrade pod=nvidia-gpu-driver-research-" "$T/operator.log" || fail "no driver pod deleted by the upgrade controller"
echo "research upgraded: a100-mig-1 ${OLD_A#* } -> $(pod_on research a100-mig-1 | cut -d' ' -f2), serving pod kept: $SERVING_POD"

# useNvidiaDriverCRD off: the single DaemonSet back, the per-pool ones and the owner labels gone.
$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"driver":{"useNvidiaDriverCRD":false}}}' >/dev/null
wait_for 30 "the single driver DaemonSet back" $G nvidia-driver-daemonset
wait_for 30 "per-pool DaemonSets pruned" sh -c "! $G -l gpuop.dev/nvidia-driver -o name | grep -q ."
wait_for 20 "owner labels removed" sh -c "[ -z \"\$($K get node dgx-h100-1 -o jsonpath='{.metadata.labels.nvidia\.com/gpu-operator\.driver\.owner}')\" ]"
wait_for 20 "NVIDIADrivers disabled" sh -c "[ \"\$($K get nvidiadriver serving -o jsonpath='{.status.state}')\" = disabled ]"
$K get nvidiadrivers
echo "PASS"
