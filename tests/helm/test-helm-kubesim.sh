#!/usr/bin/env bash
# The chart installed with the pinned helm into kubesim (RBAC enforced): the CRDs, the
# operator's Deployment and RBAC and the ClusterPolicy come up; kubesim runs no containers, so
# the test runs the operator the Deployment describes (its args, from the Deployment object)
# from the build tree as the chart's ServiceAccount, and that operator takes the lead and
# reconciles the ClusterPolicy the chart rendered (status, operand DaemonSets, node labels).
# NOTES names the NVIDIA chart keys gpuop does not act on. The hooks' Jobs run as their pods
# would (kubesim runs no containers: the test plays their kubelet): helm upgrade to a chart whose
# ClusterPolicy CRD has a new field applies it (operator.upgradeCRD); helm uninstall's hook stops
# the operator, rolls the toolkit's cleanup out, deletes the ClusterPolicy, and helm removes
# every object it installed (the CRDs stay, as helm keeps crds/, without operator.cleanupCRD).
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
[ -x "$HELM" ] || skip "pinned helm not found at $HELM"
start_kubesim --load "$S/sim/clusters/demo.yaml" --pod-ready-delay 200ms

# run_hook JOB: plays the kubelet for the pod of a hook Job (kubesim runs no containers): its
# ConfigMap volumes as folders, its command as the built gpuop with its ServiceAccount's token,
# then the pod's phase as the command ended (the Job turns Complete, and helm goes on).
run_hook() {
    local job=$1 pod
    hook_pod() { pod=$($K -n gpu-operator get pods -l job-name="$job" -o jsonpath='{.items[0].metadata.name}') && [ -n "$pod" ]; }
    wait_for 60 "the pod of hook Job $job" hook_pod
    hook_pod
    $K -n gpu-operator get pod "$pod" -o json >"$T/hook-$job.json"
    mapfile -t argv < <(python3 - "$T/hook-$job.json" "$T/hook-$job" <<'PY'
import json, os, subprocess, sys
pod, root = json.load(open(sys.argv[1])), sys.argv[2]
spec = pod["spec"]
c = spec["containers"][0]
vols = {v["name"]: v for v in spec.get("volumes", [])}
args = c["args"]
for m in c.get("volumeMounts", []):
    cm = vols[m["name"]].get("configMap")
    if not cm:
        continue
    d = root + m["mountPath"]
    os.makedirs(d, exist_ok=True)
    data = json.loads(subprocess.check_output([os.environ["KUBECTL"], "-n", "gpu-operator", "get", "configmap", cm["name"], "-o", "json"]))["data"]
    for k, v in data.items():
        open(os.path.join(d, k), "w").write(v)
    args = [a.replace("=" + m["mountPath"], "=" + d) for a in args]
print(spec["serviceAccountName"])
print("\n".join(args))
PY
)
    local sa=${argv[0]}
    sa_kubeconfig "$T/hook-$job.kc" gpu-operator "$sa"
    local phase=Succeeded
    "$B/gpuop" "${argv[@]:1}" --kubeconfig "$T/hook-$job.kc" >"$T/hook-$job.log" 2>&1 || phase=Failed
    $K -n gpu-operator patch pod "$pod" --subresource=status --type=merge -p "{\"status\":{\"phase\":\"$phase\"}}" >/dev/null
    [ $phase = Succeeded ] || fail "hook $job failed: $(cat "$T/hook-$job.log")"
}

# helm install with the default values: the image names no registry, so helm refuses and says
# what to set; no release is recorded and no object made.
if helm_q install gpuop "$S/deploy/helm/gpuop" --namespace gpu-operator --create-namespace \
    >"$T/noreg.out" 2>&1; then
    fail "helm install with the default values (no registry) succeeded"
fi
grep -q 'operator.repository is not set: the image "gpuop:[0-9.]*" names no registry' "$T/noreg.out" &&
    grep -q 'operator.localImage=true' "$T/noreg.out" ||
    fail "no-registry message: $(cat "$T/noreg.out")"
[ -z "$(helm_q list -A -a -q)" ] || fail "a release recorded after the refusal: $(helm_q list -A -a)"
if $K get clusterpolicy cluster-policy >/dev/null 2>&1; then fail "a ClusterPolicy made after the refusal"; fi
echo "no registry: helm install refused, the message names operator.repository and operator.localImage; nothing recorded"

# The gpuop image is local here (kubesim pulls nothing); an NVIDIA chart key gpuop does not act
# on is named in the notes (draDriver no longer: it is the GPUCluster's, gpuCluster.deployCR).
helm_q install gpuop "$S/deploy/helm/gpuop" --namespace gpu-operator --create-namespace \
    --set operator.localImage=true --set draDriver.enabled=true --set platform.openshift=false \
    --set operator.replicas=2 --wait --timeout 60s >"$T/install.log" || fail "helm install: $(cat "$T/install.log")"
grep -q 'STATUS: deployed' "$T/install.log" || fail "helm install did not deploy"
grep -q 'the operator runs gpuop:[0-9.]*, the operands gpuop:' "$T/install.log" || fail "NOTES: no images: $(cat "$T/install.log")"
grep -q 'Not acted on by gpuop (NVIDIA chart keys outside the ClusterPolicy): platform.$' "$T/install.log" ||
    fail "NOTES do not name the keys not acted on: $(cat "$T/install.log")"
echo "notes: $(grep 'Not acted on' "$T/install.log")"
$K get crd clusterpolicies.nvidia.com nvidiadrivers.nvidia.com gpuclusters.nvidia.com >/dev/null || fail "CRDs not installed"
if $K get gpucluster gpu-cluster >/dev/null 2>&1; then fail "a GPUCluster made with gpuCluster.deployCR false"; fi
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
# helm upgrade to the next chart version, whose ClusterPolicy CRD has a field more: the
# pre-upgrade hook applies it (helm itself leaves an installed crds/ as it is).
NEXT=$T/next-chart
cp -rL "$S/deploy/helm/gpuop" "$NEXT"
sed -i 's/^version: .*/version: 99.0.0/' "$NEXT/Chart.yaml"
python3 - "$NEXT/crds/nvidia.com_clusterpolicies.yaml" <<'PY'
import sys, yaml
crd = yaml.safe_load(open(sys.argv[1]))
for v in crd["spec"]["versions"]:
    v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["gpuopUpgradeTest"] = {"type": "string"}
yaml.safe_dump(crd, open(sys.argv[1], "w"))
PY
has_field() { local c; c=$($K get crd clusterpolicies.nvidia.com -o json) && grep -q gpuopUpgradeTest <<<"$c"; }
if has_field; then fail "the new field is there before the upgrade"; fi
bg upgrade helm_q upgrade gpuop "$NEXT" --namespace gpu-operator --reuse-values --wait --timeout 60s
upgrade_pid=$LAST
run_hook gpuop-upgrade-crd
wait_exit "$upgrade_pid" 60
[ "$RC" = 0 ] || fail "helm upgrade exited $RC: $(cat "$T/upgrade.log")"
has_field || fail "helm upgrade did not update the ClusterPolicy CRD: $(cat "$T/hook-gpuop-upgrade-crd.log")"
grep -q 'CRD updated.*name=clusterpolicies.nvidia.com' "$T/hook-gpuop-upgrade-crd.log" || fail "hook log: $(cat "$T/hook-gpuop-upgrade-crd.log")"
for o in "job gpuop-upgrade-crd" "configmap gpuop-upgrade-crd" "serviceaccount gpuop-upgrade-crd"; do
    if $K -n gpu-operator get $o >/dev/null 2>&1; then fail "hook object left after it succeeded: $o"; fi
done
echo "helm upgrade: the pre-upgrade hook updated the ClusterPolicy CRD ($(grep -c 'CRD' "$T/hook-gpuop-upgrade-crd.log") CRDs applied), its objects then removed"
if $K -n gpu-operator get daemonset gpuop-node-discovery >/dev/null 2>&1; then fail "node discovery stayed with NFD in the cluster"; fi
echo "node discovery: labelled cpu-1 as its pod; removed by helm upgrade once NFD runs"

# helm uninstall: its pre-delete hook stops the operator, turns the toolkit's cleanup on, and
# deletes the ClusterPolicy (and so the operands) before helm deletes the rest.
bg uninstall helm_q uninstall gpuop --namespace gpu-operator --wait --timeout 60s
uninstall_pid=$LAST
run_hook gpuop-uninstall
wait_exit "$uninstall_pid" 60
[ "$RC" = 0 ] || fail "helm uninstall exited $RC: $(cat "$T/uninstall.log")"
for m in "operator stopped" "toolkit cleanup on" "deleted.*kind=ClusterPolicy name=cluster-policy" "uninstall hook done"; do
    grep -q "$m" "$T/hook-gpuop-uninstall.log" || fail "uninstall hook: no \"$m\": $(cat "$T/hook-gpuop-uninstall.log")"
done
[ -z "$($K -n gpu-operator get daemonsets -o name)" ] || fail "operand DaemonSets left: $($K -n gpu-operator get daemonsets -o name)"
$K get crd clusterpolicies.nvidia.com >/dev/null || fail "the CRD went without operator.cleanupCRD"
for o in "clusterpolicy cluster-policy" "-n gpu-operator deployment gpu-operator" \
    "-n gpu-operator serviceaccount gpu-operator" "clusterrole gpuop-operator" \
    "clusterrolebinding gpuop-operator" "-n gpu-operator role gpuop-operator" \
    "-n gpu-operator rolebinding gpuop-operator" "-n gpu-operator service gpu-operator"; do
    if $K get $o >/dev/null 2>&1; then fail "still there after helm uninstall: $o"; fi
done
[ -z "$($K -n gpu-operator get secrets -l owner=helm -o name)" ] || fail "helm's release secret left"
echo "uninstalled: every object the chart installed is gone"
echo "PASS helm install into kubesim"
