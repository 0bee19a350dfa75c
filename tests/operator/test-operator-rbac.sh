#!/usr/bin/env bash
# The operator under its shipped RBAC (deploy/rbac/operator.yaml), enforced by kubesim as a real
# API server enforces it:
#  - no shipped role, and no role the operator renders for an operand, has a wildcard verb,
#    resource or API group (every Role and ClusterRole listed);
#  - with one rule removed from its ClusterRole (pods/eviction, which it must hold to grant it to
#    the driver manager: the API server's escalation check), the operator's write fails with 403,
#    named in its log and in the ClusterPolicy's status (ReconcileFailed), as on a real cluster;
#  - with the rule back, the policy turns ready and every operand role exists.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim"
POLICY=$S/tests/operator/fixtures/clusterpolicy-full.yaml

# no_wildcards WHAT: the Roles and ClusterRoles of a JSON list (a List's items or an array) on
# stdin have no '*' verb, resource or API group; prints how many it checked.
no_wildcards() {
    /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
items = d if isinstance(d, list) else d.get("items", [])
n, bad = 0, []
for o in items:
    if o.get("kind") not in ("Role", "ClusterRole"):
        continue
    n += 1
    for r in o.get("rules") or []:
        for f in ("verbs", "resources", "apiGroups", "nonResourceURLs"):
            if any("*" in v for v in r.get(f) or []):
                bad.append("%s %s: %s %s" % (o["kind"], o["metadata"]["name"], f, r.get(f)))
if bad:
    print("wildcards in " + sys.argv[1] + ":\n  " + "\n  ".join(bad))
    sys.exit(1)
print(n)
' "$1"
}

# The operands' roles as the operator renders them (every component enabled).
n=$("$B/gpuop" operator render --policy "$POLICY" --os-tag ubuntu22.04 2>"$T/render.err" |
    no_wildcards "the rendered operands") || fail "$n $(cat "$T/render.err")"
[ "$n" -ge 4 ] || fail "only $n operand roles rendered"

start_kubesim --load "$S/sim/clusters/demo.yaml" --pod-ready-delay 200ms \
    --load "$S/deploy/crds/nvidia.com_clusterpolicies.yaml" --load "$S/deploy/rbac/operator.yaml"
OPKC=$T/operator.kubeconfig
sa_kubeconfig "$OPKC"
# Every shipped role: deploy/rbac (loaded above).
n=$($K get clusterroles,roles -A -o json | no_wildcards "deploy/rbac") || fail "$n"
[ "$n" -ge 2 ] || fail "only $n shipped roles listed"

# One rule out of the operator's ClusterRole.
idx=$($K get clusterrole gpuop-operator -o json | /usr/bin/python3 -c '
import json, sys
rules = json.load(sys.stdin)["rules"]
print([i for i, r in enumerate(rules) if r.get("resources") == ["pods/eviction"]][0])')
$K patch clusterrole gpuop-operator --type=json -p "[{\"op\":\"remove\",\"path\":\"/rules/$idx\"}]" >/dev/null
$K auth can-i create pods --subresource=eviction --as=system:serviceaccount:gpu-operator:gpu-operator >/dev/null &&
    fail "the rule is still there"

P=$(free_port)
"$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator --operand-image gpuop:test \
    --metrics-listen "127.0.0.1:$P" --leader-elect false >"$T/operator.log" 2>&1 &
pids+=($!)
wait_for 20 "operator ready" curl -sf "127.0.0.1:$P/readyz"
$K create -f "$POLICY" >/dev/null
cond() { # TYPE FIELD
    $K get clusterpolicy gpu-cluster-policy -o jsonpath="{.status.conditions[?(@.type==\"$1\")].$2}"
}
wait_for 30 "Error condition True" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"Error\")].status}')\" = True ]"
msg=$(cond Error message)
echo "Error condition: $msg"
case "$msg" in
*gpuop-nvidia-driver*forbidden*) ;;
*) fail "the Error condition does not name the forbidden write: $msg" ;;
esac
[ "$(cond Error reason)" = ReconcileFailed ] || fail "Error reason $(cond Error reason)"
[ "$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.state}')" = notReady ] ||
    fail "the policy is not notReady"
wait_for 10 "the 403 in the operator's log" grep -q 'gpuop-nvidia-driver.*is forbidden.*attempting to grant RBAC permissions not currently held.*403 Forbidden' "$T/operator.log"
# kubesim's whole answer to that write names the missing permission, as the API server does.
SERVER=$(grep -m1 'server:' "$T/kubeconfig" | awk '{print $2}')
TOKEN=$(sed -n 's/^    token: //p' "$OPKC")
curl -s -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -o "$T/403.json" \
    -d '{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"x"},"rules":[{"apiGroups":[""],"resources":["pods/eviction"],"verbs":["create"]}]}' \
    "$SERVER/apis/rbac.authorization.k8s.io/v1/clusterroles"
grep -qF 'is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods/eviction\"], Verbs:[\"create\"]}"' "$T/403.json" ||
    fail "the escalation 403: $(cat "$T/403.json")"
# Nothing else failed: the other operands were written.
$K -n gpu-operator get ds nvidia-device-plugin-daemonset >/dev/null || fail "the device plugin was not written"
$K get clusterrole gpuop-nvidia-driver >/dev/null 2>&1 && fail "the driver's ClusterRole was written anyway"

# The rule back: the policy turns ready with every operand role.
$K patch clusterrole gpuop-operator --type=json \
    -p '[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["pods/eviction"],"verbs":["create"]}}]' >/dev/null
wait_for 60 "ClusterPolicy ready" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.state}')\" = ready ]"
$K get clusterrole gpuop-nvidia-driver >/dev/null || fail "the driver's ClusterRole is missing"
# Every role in the cluster now: the shipped one and those the operator rendered.
n=$($K get clusterroles,roles -A -o json | no_wildcards "the cluster") || fail "$n"
[ "$n" -ge 6 ] || fail "only $n roles in the cluster"
echo "ok: operator under its shipped RBAC ($n roles, no wildcards)"
