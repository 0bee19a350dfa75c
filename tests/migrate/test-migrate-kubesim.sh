#!/usr/bin/env bash
# gpuop migrate against kubesim with the pinned helm, both ways, on a cluster set up as NVIDIA's
# GPU Operator v24.9.2 leaves it (tests/adopt/fixtures: its nodes and labels, the objects its
# operator made, owned by the ClusterPolicy) and NVIDIA's release installed from a stand-in of
# its chart (tests/migrate/nvidia-chart: the operator Deployment, its RBAC, the ClusterPolicy and
# delete hooks that would remove the CRDs and NFD's labels).
# - Refusals: NVIDIA's operator running, two ClusterPolicies, an upgrade in flight, an unknown
#   CRD version: each names the precondition and changes nothing (every object compared before
#   and after); a dry run changes nothing either.
# - --apply, then `helm install` of gpuop's chart with NVIDIA's values takes the ClusterPolicy,
#   the operator's ServiceAccount and Service over; `helm uninstall` of NVIDIA's release then
#   deletes none of the objects and runs no delete hook.
# - --to nvidia: refused while gpuop's operator runs; then `helm install` of NVIDIA's chart takes
#   the objects back, and `helm uninstall` of gpuop's release deletes none of them.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
[ -x "$HELM" ] || skip "pinned helm not found at $HELM"
F=$S/tests/adopt/fixtures/nvidia-v24.9.2.yaml
NVC=$S/tests/migrate/nvidia-chart
G=$S/deploy/helm/gpuop
python3 "$S/tests/migrate/nvidia-cluster.py" nodes "$F" >"$T/nodes.yaml"
python3 "$S/tests/migrate/nvidia-cluster.py" values "$F" >"$T/nvidia-values.yaml"
start_kubesim --load "$T/nodes.yaml" --pod-ready-delay 100ms
$K create namespace gpu-operator >/dev/null
$K apply -f "$S/deploy/crds/" >/dev/null || fail "apply the CRDs"

# NVIDIA's release, then what its operator made (owned by the release's ClusterPolicy).
helm_q install gpu-operator "$NVC" -n gpu-operator -f "$T/nvidia-values.yaml" --wait --timeout 60s >"$T/nv-install.log" ||
    fail "helm install of NVIDIA's chart: $(cat "$T/nv-install.log")"
uid=$($K get clusterpolicy cluster-policy -o jsonpath='{.metadata.uid}')
python3 "$S/tests/migrate/nvidia-cluster.py" objects "$F" "$uid" | $K create -f - >/dev/null
drivers_ready() { [ "$($K -n gpu-operator get ds nvidia-driver-daemonset -o jsonpath='{.status.numberReady}')" = 3 ]; }
wait_for 30 "NVIDIA's driver pods Ready on the 3 GPU nodes" drivers_ready
ops_up() { [ "$($K -n gpu-operator get pods --no-headers | grep -c Running)" -ge 20 ]; }
wait_for 30 "NVIDIA's operand pods running" ops_up
echo "ok: the cluster as NVIDIA's operator leaves it: $($K -n gpu-operator get ds --no-headers | wc -l) DaemonSets, $($K -n gpu-operator get pods --no-headers | wc -l) pods, release $(helm_q list -n gpu-operator -o json | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]; print(r["name"], r["status"])')"

# snapshot OUT: every object of the namespace and the cluster-scoped ones, without status and
# what the API server moves by itself.
snapshot() {
    {
        $K get -n gpu-operator deployments,daemonsets,serviceaccounts,roles,rolebindings,configmaps,services,secrets,leases,pods,jobs -o json
        $K get clusterpolicies,nodes,crds,clusterroles,clusterrolebindings,runtimeclasses -o json
    } | python3 -c '
import json, sys
dec = json.JSONDecoder()
text = sys.stdin.read()
objs, i = [], 0
while i < len(text):
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    o, i = dec.raw_decode(text, i)
    objs += o["items"]
out = []
for o in objs:
    o.pop("status", None)
    m = o["metadata"]
    for k in ("resourceVersion", "managedFields", "generation"):
        m.pop(k, None)
    out.append(o)
out.sort(key=lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]))
json.dump(out, sys.stdout, indent=1, sort_keys=True)' >"$1"
}
# refused WHY MESSAGE: migrate --apply exits 1 naming the precondition, and no object changed
refused() {
    snapshot "$T/before.json"
    local rc=0
    "$B/gpuop" migrate "$@" --apply >"$T/refused.out" 2>"$T/refused.err" || rc=$?
    [ $rc = 1 ] || fail "migrate $*: exit $rc, want 1 (refused): $(cat "$T/refused.out" "$T/refused.err")"
    snapshot "$T/after.json"
    cmp -s "$T/before.json" "$T/after.json" || fail "a refusal changed objects: $(diff "$T/before.json" "$T/after.json" | head -20)"
    grep -q 'refused: a precondition failed; nothing was changed' "$T/refused.out" || fail "no refusal line: $(cat "$T/refused.out")"
}

refused --from nvidia
grep -q "refused: NVIDIA's operator stopped: Deployment gpu-operator/gpu-operator wants 1 replica(s)" "$T/refused.err" ||
    fail "refusal message: $(cat "$T/refused.err")"
echo "ok: refused while NVIDIA's operator runs, nothing changed: $(cat "$T/refused.err")"
$K -n gpu-operator scale deployment gpu-operator --replicas=0 >/dev/null
no_op_pods() { [ -z "$($K -n gpu-operator get pods -l app=gpu-operator -o name)" ]; }
wait_for 20 "NVIDIA's operator pods gone" no_op_pods

$K create -f - >/dev/null <<Y
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: second}
spec: {daemonsets: {}, dcgm: {}, dcgmExporter: {}, devicePlugin: {}, driver: {}, gfd: {}, nodeStatusExporter: {}, operator: {}, toolkit: {}}
Y
refused --from nvidia
grep -q "refused: one ClusterPolicy: 2 ClusterPolicies (cluster-policy, second)" "$T/refused.err" || fail "refusal message: $(cat "$T/refused.err")"
echo "ok: refused with two ClusterPolicies, nothing changed"
$K delete clusterpolicy second >/dev/null

$K label node gpu-h100 --overwrite nvidia.com/gpu-driver-upgrade-state=drain-required >/dev/null
refused --from nvidia
grep -q "refused: no driver upgrade in flight: 1 node(s) mid-upgrade: gpu-h100 (drain-required)" "$T/refused.err" || fail "refusal message: $(cat "$T/refused.err")"
echo "ok: refused with an upgrade in flight, nothing changed"
$K label node gpu-h100 --overwrite nvidia.com/gpu-driver-upgrade-state=upgrade-done >/dev/null

$K get crd clusterpolicies.nvidia.com -o json | python3 -c '
import copy, json, sys
crd = json.load(sys.stdin)
v2 = copy.deepcopy(crd["spec"]["versions"][0])
v2.update({"name": "v2", "storage": False, "served": True})
crd["spec"]["versions"].append(v2)
json.dump(crd, sys.stdout)' >"$T/crd-v2.json"
$K replace -f "$T/crd-v2.json" >/dev/null
refused --from nvidia
grep -q "refused: CRD versions: CRD clusterpolicies.nvidia.com has version v2, which gpuop does not know" "$T/refused.err" ||
    fail "refusal message: $(cat "$T/refused.err")"
echo "ok: refused with an unknown CRD version, nothing changed"
$K apply -f "$S/deploy/crds/nvidia.com_clusterpolicies.yaml" >/dev/null 2>&1 || true
$K get crd clusterpolicies.nvidia.com -o json | python3 -c '
import json, sys
crd = json.load(sys.stdin)
crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
json.dump(crd, sys.stdout)' >"$T/crd-v1.json"
$K replace -f "$T/crd-v1.json" >/dev/null

# The dry run: the plan, nothing changed.
snapshot "$T/before.json"
"$B/gpuop" migrate --from nvidia >"$T/plan.out" || fail "dry run: $(cat "$T/plan.out")"
snapshot "$T/after.json"
cmp -s "$T/before.json" "$T/after.json" || fail "the dry run changed objects"
for m in "changes (made with --apply):" "delete  Deployment gpu-operator/gpu-operator" \
    "patch   ClusterPolicy cluster-policy" "replace Secret gpu-operator/sh.helm.release.v1.gpu-operator.v1" \
    "recreate DaemonSet gpu-operator/gpu-feature-discovery" "defer    Pod gpu-operator/nvidia-driver-daemonset-"; do
    grep -qF "$m" "$T/plan.out" || fail "the plan lacks \"$m\": $(cat "$T/plan.out")"
done
echo "ok: the dry run prints the plan ($(grep -c '' "$T/plan.out") lines) and changes nothing"

# --apply: the ownership moves; gpuop's chart takes the objects over with NVIDIA's values.
"$B/gpuop" migrate --from nvidia --apply >"$T/apply.out" 2>&1 || fail "migrate --apply: $(cat "$T/apply.out")"
grep -q '^done: 5 change(s)' "$T/apply.out" || fail "apply: $(cat "$T/apply.out")"
if $K -n gpu-operator get deployment gpu-operator >/dev/null 2>&1; then fail "NVIDIA's operator Deployment left"; fi
[ "$($K get clusterpolicy cluster-policy -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}')" = gpuop ] ||
    fail "the ClusterPolicy is not gpuop's release's"
helm_q get manifest gpu-operator -n gpu-operator >"$T/nv-manifest.yaml"
[ "$(grep -c '"helm.sh/resource-policy": "keep"' "$T/nv-manifest.yaml")" = 7 ] || fail "NVIDIA's manifest: $(head -40 "$T/nv-manifest.yaml")"
if helm_q get hooks gpu-operator -n gpu-operator | grep -q 'pre-delete\|post-delete'; then fail "NVIDIA's delete hooks left"; fi
"$B/gpuop" migrate --from nvidia --apply >"$T/apply2.out" 2>&1 || fail "migrate --apply again: $(cat "$T/apply2.out")"
grep -q '^done: 0 change(s)' "$T/apply2.out" || fail "a second --apply changed: $(cat "$T/apply2.out")"
echo "ok: --apply deleted NVIDIA's stopped operator, gave the ClusterPolicy, ServiceAccount and Service to release gpuop, kept NVIDIA's 7 objects and dropped its delete hooks; a second run changes nothing"

spec_before=$($K get clusterpolicy cluster-policy -o jsonpath='{.spec.driver.version} {.spec.devicePlugin.version}')
helm_q get values gpu-operator -n gpu-operator -o yaml >"$T/values-from-nvidia.yaml"
helm_q install gpuop "$G" -n gpu-operator --set operator.localImage=true -f "$T/values-from-nvidia.yaml" \
    --wait --timeout 60s >"$T/gpuop-install.log" || fail "helm install gpuop: $(cat "$T/gpuop-install.log")"
[ "$($K -n gpu-operator get deployment gpu-operator -o jsonpath='{.metadata.labels.app\.kubernetes\.io/name}')" = gpuop ] ||
    fail "the operator Deployment is not gpuop's"
[ "$($K get clusterpolicy cluster-policy -o jsonpath='{.metadata.uid}')" = "$uid" ] || fail "the ClusterPolicy was recreated"
[ "$($K get clusterpolicy cluster-policy -o jsonpath='{.spec.driver.version} {.spec.devicePlugin.version}')" = "$spec_before" ] ||
    fail "the policy's driver changed: $($K get clusterpolicy cluster-policy -o jsonpath='{.spec.driver.version}')"
echo "ok: helm install gpuop took over the ClusterPolicy (same uid, driver $spec_before), the ServiceAccount and the Service"

snapshot "$T/before-uninstall.json"
helm_q uninstall gpu-operator -n gpu-operator --wait --timeout 60s >"$T/nv-uninstall.log" 2>&1 ||
    fail "helm uninstall gpu-operator: $(cat "$T/nv-uninstall.log")"
grep -q 'These resources were kept due to the resource policy' "$T/nv-uninstall.log" || fail "uninstall: $(cat "$T/nv-uninstall.log")"
snapshot "$T/after-uninstall.json"
python3 - "$T/before-uninstall.json" "$T/after-uninstall.json" <<'PY' || fail "helm uninstall of NVIDIA's release deleted objects"
import json, sys
key = lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
before = {key(o) for o in json.load(open(sys.argv[1])) if o["kind"] != "Secret"}
after = {key(o) for o in json.load(open(sys.argv[2]))}
gone = sorted(before - after)
if gone:
    print("gone:", gone)
    sys.exit(1)
PY
if $K -n gpu-operator get jobs -o name | grep -q .; then fail "a delete hook ran: $($K -n gpu-operator get jobs -o name)"; fi
echo "ok: helm uninstall gpu-operator deleted nothing (no object gone, no delete hook run)"

# The way back.
refused --to nvidia
grep -q "refused: gpuop's operator stopped: Deployment gpu-operator/gpu-operator wants 1 replica(s)" "$T/refused.err" ||
    fail "refusal message: $(cat "$T/refused.err")"
echo "ok: --to nvidia refused while gpuop's operator runs, nothing changed"
$K -n gpu-operator scale deployment gpu-operator --replicas=0 >/dev/null
no_gpuop_pods() { [ -z "$($K -n gpu-operator get pods -l app.kubernetes.io/component=operator -o name)" ]; }
wait_for 20 "gpuop's operator pods gone" no_gpuop_pods
"$B/gpuop" migrate --to nvidia --apply >"$T/back.out" 2>&1 || fail "migrate --to nvidia --apply: $(cat "$T/back.out")"
grep -q 'left for you once NVIDIA' "$T/back.out" || fail "the way back lists nothing left behind: $(cat "$T/back.out")"
[ "$($K get clusterpolicy cluster-policy -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}')" = gpu-operator ] ||
    fail "the ClusterPolicy is not NVIDIA's release's"
helm_q install gpu-operator "$NVC" -n gpu-operator -f "$T/nvidia-values.yaml" --set operator.replicas=0 --wait --timeout 60s >"$T/nv-reinstall.log" ||
    fail "helm install of NVIDIA's chart again: $(cat "$T/nv-reinstall.log")"
snapshot "$T/before-uninstall.json"
helm_q uninstall gpuop -n gpu-operator --wait --timeout 60s >"$T/gpuop-uninstall.log" 2>&1 ||
    fail "helm uninstall gpuop: $(cat "$T/gpuop-uninstall.log")"
snapshot "$T/after-uninstall.json"
python3 - "$T/before-uninstall.json" "$T/after-uninstall.json" <<'PY' || fail "helm uninstall of gpuop's release deleted objects"
import json, sys
key = lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
before = {key(o) for o in json.load(open(sys.argv[1])) if o["kind"] != "Secret"}
after = {key(o) for o in json.load(open(sys.argv[2]))}
gone = sorted(before - after)
if gone:
    print("gone:", gone)
    sys.exit(1)
PY
[ "$($K get clusterpolicy cluster-policy -o jsonpath='{.metadata.uid}')" = "$uid" ] || fail "the ClusterPolicy was recreated on the way back"
if $K -n gpu-operator get jobs -o name | grep -q .; then fail "gpuop's uninstall hook ran"; fi
echo "ok: --to nvidia: NVIDIA's chart took the objects back; helm uninstall gpuop deleted nothing and ran no hook"
echo "PASS gpuop migrate both ways with helm on kubesim"
