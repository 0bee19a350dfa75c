#!/usr/bin/env bash
# The chart installed with the pinned helm into kubesim (RBAC enforced): the CRDs, the
# operator's Deployment and RBAC and the ClusterPolicy come up; kubesim runs no containers, so
# the test runs the operator the Deployment describes (its args, from the Deployment object)
# from the build tree as the chart's ServiceAccount, and that operator takes the lead and
# reconciles the ClusterPolicy the chart rendered (status, operand DaemonSets, node labels).
# helm uninstall then removes every object it installed (the CRDs stay, as helm keeps crds/).
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
[ -x "$HELM" ] || skip "pinned helm not found at $HELM"
start_kubesim --load "$S/sim/clusters/demo.yaml" --pod-ready-delay 200ms

helm_q install gpuop "$S/deploy/helm/gpuop" --namespace gpu-operator --create-namespace \
    --set operator.replicas=2 --wait --timeout 60s >"$T/install.log" || fail "helm install: $(cat "$T/install.log")"
grep -q 'STATUS: deployed' "$T/install.log" || fail "helm install did not deploy"
$K get crd clusterpolicies.nvidia.com nvidiadrivers.nvidia.com >/dev/null || fail "CRDs not installed"
$K get clusterpolicy cluster-policy >/dev/null || fail "no ClusterPolicy"
[ "$($K -n gpu-operator get deploy gpu-operator -o jsonpath='{.status.readyReplicas}')" = 2 ] ||
    fail "the operator Deployment is not 2/2 ready"
echo "installed: $(helm_q list -n gpu-operator -o json | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]; print(r["name"], r["status"], r["app_version"])')"

# The operator as the Deployment runs it: its args and its ServiceAccount's token; the pod's name
# as its identity, the lease in the release's namespace.
args=$($K -n gpu-operator get deploy gpu-operator -o json | python3 -c '
import json, sys
c = json.load(sys.stdin)["spec"]["template"]["spec"]["containers"][0]
print("\n".join(c["args"]))')
image=$($K -n gpu-operator get deploy gpu-operator -o jsonpath='{.spec.template.spec.containers[0].image}')
sa=$($K -n gpu-operator get deploy gpu-operator -o jsonpath='{.spec.template.spec.serviceAccountName}')
grep -qx -- "--operand-image=$image" <<<"$args" || fail "--operand-image is not the Deployment's image $image"
grep -qx -- "--leader-elect=true" <<<"$args" || fail "leader election off: $args"
OPKC=$T/operator.kubeconfig
sa_kubeconfig "$OPKC" gpu-operator "$sa"
pods=($($K -n gpu-operator get pods -l app.kubernetes.io/component=operator -o jsonpath='{.items[*].metadata.name}'))
[ ${#pods[@]} = 2 ] || fail "want 2 operator pods, got ${pods[*]}"
mapfile -t argv <<<"$args"
P=$(free_port)
# argv: global flags, then the component and its flags; the metrics port moves off :8080.
POD_NAME=${pods[0]} "$B/gpuop" "${argv[@]/--metrics-listen=*/--metrics-listen=127.0.0.1:$P}" \
    --kubeconfig "$OPKC" >"$T/operator.log" 2>&1 &
pids+=($!)
wait_for 20 "operator ready" curl -sf "127.0.0.1:$P/readyz"
wait_for 30 "operator leads" sh -c "$K -n gpu-operator get lease gpuop-operator -o jsonpath='{.spec.holderIdentity}' | grep -qx ${pods[0]}"
wait_for 60 "ClusterPolicy reconciled" sh -c "[ -n \"\$($K get clusterpolicy cluster-policy -o jsonpath='{.status.state}')\" ]"
state=$($K get clusterpolicy cluster-policy -o jsonpath='{.status.state}')
version=$(meson introspect --projectinfo "$B" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
ds=$($K -n gpu-operator get daemonsets -o name | wc -l)
[ "$ds" -ge 5 ] || fail "only $ds operand DaemonSets"
$K get node dgx-h100-1 -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.deploy\.device-plugin}' | grep -qx true ||
    fail "GPU node not labelled for its operands"
echo "operator ${pods[0]} leads; ClusterPolicy state $state; $ds operand DaemonSets"
# kubectl's printer columns (the CRDs'): state, GPU nodes ready/total, version, age. A node whose
# validator passed (its plugin validation ok) counts as ready.
$K get clusterpolicy >"$T/get.txt"
head -1 "$T/get.txt" | grep -Eq '^NAME +STATE +NODES +VERSION +AGE$' || fail "columns: $(head -1 "$T/get.txt")"
# (the state may move on between the two reads: notReady, then ready)
grep -Eq "^cluster-policy +(notReady|ready) +0/[1-9][0-9]* +$version +[0-9]+s$" "$T/get.txt" || fail "row: $(cat "$T/get.txt")"
total=$(awk 'NR == 2 { split($3, a, "/"); print a[2] }' "$T/get.txt")
$K annotate node dgx-h100-1 "validation.gpuop.dev/plugin={\"state\":\"ok\",\"reason\":\"\",\"time\":\"2026-01-01T00:00:00Z\"}" >/dev/null
wait_for 30 "1/$total ready" sh -c "$K get clusterpolicy cluster-policy --no-headers | grep -Eq ' 1/$total '"
echo "kubectl get clusterpolicy: $(tail -1 "$T/get.txt") -> $($K get clusterpolicy --no-headers)"
$K get nvidiadrivers >/dev/null 2>"$T/nvd.err" || fail "kubectl get nvidiadrivers: $(cat "$T/nvd.err")"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true

# Node discovery (nfd.enabled, no NFD in the cluster): its DaemonSet is there; its command, run
# as its pod would (args, NODE_NAME, its ServiceAccount's token) on a node root folder, labels the
# node. With NFD in the cluster (nfd-master's annotation on a node), helm upgrade removes it.
$K -n gpu-operator get daemonset gpuop-node-discovery >/dev/null || fail "no node discovery DaemonSet"
dargs=$($K -n gpu-operator get ds gpuop-node-discovery -o json | python3 -c '
import json, sys
print("\n".join(json.load(sys.stdin)["spec"]["template"]["spec"]["containers"][0]["args"]))')
mapfile -t dargv <<<"$dargs"
DKC=$T/discovery.kubeconfig
sa_kubeconfig "$DKC" gpu-operator gpuop-node-discovery
R=$T/node-root
mkdir -p "$R/etc" "$R/sys/bus/pci/devices/0000:17:00.0"
printf 'ID=ubuntu\nVERSION_ID="24.04"\n' >"$R/etc/os-release"
echo 0x10de >"$R/sys/bus/pci/devices/0000:17:00.0/vendor"
echo 0x030200 >"$R/sys/bus/pci/devices/0000:17:00.0/class"
$K label node cpu-1 feature.node.kubernetes.io/pci-10de.present- >/dev/null 2>&1 || true
NODE_NAME=cpu-1 "$B/gpuop" "${dargv[@]/--host-root=*/--host-root=$R}" --oneshot --kubeconfig "$DKC" \
    >"$T/discovery.log" 2>&1 || fail "node-discovery as its pod: $(cat "$T/discovery.log")"
[ "$($K get node cpu-1 -o jsonpath='{.metadata.labels.feature\.node\.kubernetes\.io/system-os_release\.VERSION_ID}')" = 24.04 ] ||
    fail "node discovery did not label cpu-1: $(cat "$T/discovery.log")"
$K annotate node dgx-h100-1 nfd.node.kubernetes.io/worker.version=v0.17.2 >/dev/null
helm_q upgrade gpuop "$S/deploy/helm/gpuop" --namespace gpu-operator --reuse-values --wait --timeout 60s >"$T/upgrade.log" ||
    fail "helm upgrade: $(cat "$T/upgrade.log")"
if $K -n gpu-operator get daemonset gpuop-node-discovery >/dev/null 2>&1; then fail "node discovery stayed with NFD in the cluster"; fi
echo "node discovery: labelled cpu-1 as its pod; removed by helm upgrade once NFD runs"

helm_q uninstall gpuop --namespace gpu-operator --wait --timeout 60s >"$T/uninstall.log" || fail "helm uninstall: $(cat "$T/uninstall.log")"
for o in "clusterpolicy cluster-policy" "-n gpu-operator deployment gpu-operator" \
    "-n gpu-operator serviceaccount gpu-operator" "clusterrole gpuop-operator" \
    "clusterrolebinding gpuop-operator" "-n gpu-operator role gpuop-operator" \
    "-n gpu-operator rolebinding gpuop-operator" "-n gpu-operator service gpu-operator"; do
    if $K get $o >/dev/null 2>&1; then fail "still there after helm uninstall: $o"; fi
done
[ -z "$($K -n gpu-operator get secrets -l owner=helm -o name)" ] || fail "helm's release secret left"
echo "uninstalled: every object the chart installed is gone"
echo "PASS helm install into kubesim"
