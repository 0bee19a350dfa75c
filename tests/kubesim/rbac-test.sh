#!/bin/bash
# kubesim's authentication and RBAC as real clients meet them: `kubectl auth can-i` (yes/no,
# exit 0/1) for a table of rule shapes and identities (impersonated with --as), ServiceAccount
# tokens from the TokenRequest API (kubectl create token) used by kubectl, the API server's 403
# messages, 401 for a bad or revoked token, impersonation refused to a ServiceAccount, and
# --authorization-mode AlwaysAllow. Over TLS: kubectl sends bearer tokens only over https.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
CURL=$(command -v curl) || skip "curl not installed"
need_tools

start_kubesim --tls --nodes 1 --load "$S/deploy/crds/nvidia.com_clusterpolicies.yaml" --load "$S/deploy/rbac/operator.yaml" \
    --load "$S/tests/kubesim/fixtures/rbac-cases.yaml"
grep -q "token: " "$KUBECONFIG" || fail "no admin token in the kubeconfig"

BOT=system:serviceaccount:team:bot
OP=system:serviceaccount:gpu-operator:gpu-operator
n=0
# can IDENTITY(-: the admin) EXPECT(yes|no) ARGS...: kubectl auth can-i answers EXPECT, exit 0/1
can() {
    local who=$1 want=$2 as=()
    shift 2
    [ "$who" = - ] || as=(--as="$who")
    local out rc
    out=$($K auth can-i "$@" "${as[@]}" 2>"$T/err")
    rc=$?
    local want_rc=0
    [ "$want" = yes ] || want_rc=1
    [ "${out%% *}" = "$want" ] && [ $rc = $want_rc ] ||
        fail "auth can-i $* as $who: '$out' (exit $rc), want $want: $(cat "$T/err")"
    n=$((n + 1))
}
can - yes '*' '*'
can - yes create nodes
can "$BOT" yes get pods -n team
can "$BOT" yes list pods -n team
can "$BOT" yes watch pods -n team
can "$BOT" no delete pods -n team
can "$BOT" no get pods -n default
can "$BOT" no list pods --all-namespaces
can "$BOT" yes get configmaps/cm1 -n team
can "$BOT" no get configmaps/cm2 -n team
can "$BOT" no list configmaps -n team
can "$BOT" yes update nodes --subresource=status
can "$BOT" yes patch nodes/node-00000 --subresource=status
can "$BOT" no update nodes
can "$BOT" yes create pods --subresource=eviction -n team
can "$BOT" no create pods -n team
can "$BOT" yes update deployments.apps --subresource=scale -n team
can "$BOT" yes update replicasets.apps --subresource=scale -n team
can "$BOT" no update deployments.apps -n team
can "$BOT" no update deployments.apps --subresource=scale -n default
can "$BOT" yes create selfsubjectaccessreviews.authorization.k8s.io
can "$BOT" no create subjectaccessreviews.authorization.k8s.io
can "$BOT" no impersonate users
can alice yes get /metrics
can alice yes get /logs/kubelet.log
can alice no get /logs
can alice no post /metrics
can alice no get /healthz/etcd
can bob yes get /version
can bob yes get /apis/apps/v1
can bob yes get /healthz
can bob no list pods
can "$OP" yes list nodes
can "$OP" yes patch nodes
can "$OP" no delete nodes
can "$OP" yes watch clusterpolicies.nvidia.com
can "$OP" no update clusterpolicies.nvidia.com
can "$OP" yes update clusterpolicies.nvidia.com --subresource=status
can "$OP" yes create leases.coordination.k8s.io -n gpu-operator
can "$OP" no create leases.coordination.k8s.io -n default
can "$OP" yes create daemonsets.apps -n gpu-operator
can "$OP" no create daemonsets.apps -n kube-system
can "$OP" no get secrets -n gpu-operator
echo "auth can-i: $n cases"

# A ServiceAccount token from the TokenRequest API, used by kubectl.
TOK=$($K create token bot -n team) || fail "kubectl create token"
[ -n "$TOK" ] || fail "empty token"
KT="$K --token=$TOK"
$KT auth whoami -o jsonpath='{.status.userInfo.username}' | grep -qx "$BOT" || fail "whoami"
$KT get pods -n team >/dev/null 2>"$T/err" || fail "bot cannot list pods: $(cat "$T/err")"
$KT get pod x -n default >/dev/null 2>"$T/err" && fail "bot read a pod in default"
grep -qF 'Error from server (Forbidden): pods "x" is forbidden: User "system:serviceaccount:team:bot" cannot get resource "pods" in API group "" in the namespace "default"' "$T/err" ||
    fail "403 get message: $(cat "$T/err")"
$KT get nodes >/dev/null 2>"$T/err" && fail "bot listed nodes"
grep -qF 'nodes is forbidden: User "system:serviceaccount:team:bot" cannot list resource "nodes" in API group "" at the cluster scope' "$T/err" ||
    fail "403 list message: $(cat "$T/err")"
# The dangling RoleBinding is named in the reason, as RBAC does.
$KT get secrets -n team >/dev/null 2>"$T/err" && fail "bot listed secrets"
grep -qF 'in the namespace "team": RBAC: role.rbac.authorization.k8s.io "t-missing" not found' "$T/err" ||
    fail "403 reason: $(cat "$T/err")"
$KT get deployments.apps -n team -w --request-timeout=2s >/dev/null 2>"$T/err" && fail "bot watched deployments"
grep -qF 'deployments.apps is forbidden: User "system:serviceaccount:team:bot" cannot watch resource "deployments" in API group "apps" in the namespace "team"' "$T/err" ||
    grep -qF 'cannot list resource "deployments" in API group "apps" in the namespace "team"' "$T/err" ||
    fail "403 watch message: $(cat "$T/err")"
# the Status itself, and a non-resource URL
A=(-s --cacert "$KS_CA" -H "Authorization: Bearer $TOK")
code=$("$CURL" "${A[@]}" -o "$T/body" -w '%{http_code}' "$KS_URL/api/v1/namespaces/team/pods/p1/log")
[ "$code" = 403 ] || fail "pods/log: $code"
grep -qF '"message":"pods \"p1\" is forbidden: User \"system:serviceaccount:team:bot\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"team\"' "$T/body" ||
    fail "pods/log body: $(cat "$T/body")"
grep -qF '"reason":"Forbidden"' "$T/body" && grep -qF '"details":{"name":"p1","kind":"pods"}' "$T/body" ||
    fail "403 Status: $(cat "$T/body")"
code=$("$CURL" "${A[@]}" -o "$T/body" -w '%{http_code}' "$KS_URL/metrics")
[ "$code" = 403 ] || fail "bot /metrics: $code"
grep -qF 'forbidden: User \"system:serviceaccount:team:bot\" cannot get path \"/metrics\"' "$T/body" ||
    fail "/metrics body: $(cat "$T/body")"
code=$("$CURL" "${A[@]}" -o /dev/null -w '%{http_code}' "$KS_URL/version")
[ "$code" = 200 ] || fail "bot /version: $code"
# A ServiceAccount may not impersonate.
$KT get pods -n team --as=system:admin >/dev/null 2>"$T/err" && fail "bot impersonated"
grep -qF 'users "system:admin" is forbidden: User "system:serviceaccount:team:bot" cannot impersonate resource "users" in API group "" at the cluster scope' "$T/err" ||
    fail "impersonation message: $(cat "$T/err")"
# 401: no token, a bad token, a token whose ServiceAccount is gone, one too short-lived.
code=$("$CURL" -s --cacert "$KS_CA" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer nope" "$KS_URL/api/v1/nodes")
[ "$code" = 401 ] || fail "bad token: $code"
GONE=$($K create token gone -n team) || fail "create token gone"
$K --token="$GONE" auth whoami >/dev/null || fail "fresh token of gone"
$K delete sa gone -n team >/dev/null || fail "delete sa"
$K --token="$GONE" get pods -n team >/dev/null 2>"$T/err" && fail "token of a deleted ServiceAccount worked"
grep -q "Unauthorized" "$T/err" || fail "revoked token: $(cat "$T/err")"
$K create token bot -n team --duration=5m >/dev/null 2>"$T/err" && fail "5m token"
grep -qF 'may not specify a duration less than 10 minutes' "$T/err" || fail "short token: $(cat "$T/err")"
$K create token nosuch -n team >/dev/null 2>"$T/err" && fail "token for a missing ServiceAccount"
grep -qF 'serviceaccounts "nosuch" not found' "$T/err" || fail "missing sa: $(cat "$T/err")"
stop_kubesim

# --token keeps working: the admin's; no credentials: 401 (health endpoints aside).
start_kubesim --tls --token s3cret --load "$S/tests/kubesim/fixtures/rbac-cases.yaml"
can - yes '*' '*'
code=$("$CURL" -s --cacert "$KS_CA" -o /dev/null -w '%{http_code}' "$KS_URL/api/v1/nodes")
[ "$code" = 401 ] || fail "--token, anonymous: $code"
code=$("$CURL" -s --cacert "$KS_CA" -o /dev/null -w '%{http_code}' "$KS_URL/readyz")
[ "$code" = 200 ] || fail "--token, /readyz: $code"
stop_kubesim

# AlwaysAllow: tokens still authenticate, nothing is forbidden.
start_kubesim --tls --authorization-mode AlwaysAllow --load "$S/tests/kubesim/fixtures/rbac-cases.yaml"
TOK=$($K create token bot -n team) || fail "create token (AlwaysAllow)"
$K --token="$TOK" get secrets -n kube-system >/dev/null 2>"$T/err" || fail "AlwaysAllow: $(cat "$T/err")"
can "$BOT" yes delete nodes
code=$("$CURL" -s --cacert "$KS_CA" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer nope" "$KS_URL/api/v1/nodes")
[ "$code" = 401 ] || fail "AlwaysAllow, bad token: $code"
stop_kubesim
"$B/kubesim" --authorization-mode Webhook >"$T/bad" 2>&1
[ $? = 2 ] || fail "bad --authorization-mode accepted"
echo "ok"
