#!/bin/bash
# managedFields of writes other than server-side apply, as the API server records them: the real
# kubectl's create, label, patch and edit-like replace each leave an "Update" entry naming its
# field manager (kubectl's fieldManager parameter, else the User-Agent's product), the time and
# the fields it set; a field taken over leaves the previous owner's entry; a no-op keeps the time.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
JQ=$(command -v jq) || skip "jq not installed"
CURL=$(command -v curl) || skip "curl not installed"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" --cache-dir "$T/cache" --request-timeout=10s "$@"; }
mf() { k get cm demo -o json --show-managed-fields | "$JQ" -c "$1"; }
mfr() { k get cm demo -o json --show-managed-fields | "$JQ" -r "$1"; }

start_kubesim --nodes 1
k create configmap demo --from-literal=a=1 >/dev/null || fail "create"
[ "$(mf '[.metadata.managedFields[] | [.manager, .operation]]')" = '[["kubectl-create","Update"]]' ] ||
    fail "create: $(mf .metadata.managedFields)"
mf '.metadata.managedFields[0] | (.time | test("^[0-9-]+T[0-9:]+Z$")) and .fieldsType == "FieldsV1"
    and .apiVersion == "v1" and (.fieldsV1["f:data"]["f:a"] == {})' | grep -qx true ||
    fail "create entry: $(mf .metadata.managedFields)"
sleep 1.1
k label configmap demo team=gpu >/dev/null || fail "label"
mf '[.metadata.managedFields[] | .manager]' | grep -qx '\["kubectl-create","kubectl-label"\]' ||
    fail "label: $(mf .metadata.managedFields)"
mf '.metadata.managedFields[1].fieldsV1 == {"f:metadata":{"f:labels":{"f:team":{}}}}' |
    grep -qx true || fail "label's fields: $(mf .metadata.managedFields)"
t_label=$(mfr '.metadata.managedFields[1].time')
t_create=$(mfr '.metadata.managedFields[0].time')
[[ "$t_label" > "$t_create" ]] || fail "label time $t_label not after create $t_create"
# the same label again changes nothing: the entry and its time stay
sleep 1.1
k label --overwrite configmap demo team=gpu >/dev/null || fail "label again"
[ "$(mfr '.metadata.managedFields[1].time')" = "$t_label" ] || fail "a no-op moved the time"
# a patch taking data.a over: the create entry loses it (and, empty, goes)
k patch configmap demo --type=merge -p '{"data":{"a":"2"}}' >/dev/null || fail "patch"
mf '[.metadata.managedFields[] | .manager]' | grep -qx '\["kubectl-label","kubectl-patch"\]' ||
    fail "patch: $(mf .metadata.managedFields)"
# without a fieldManager parameter: the User-Agent's product name
"$CURL" -sf -X PATCH -A "ops-script/1.0 (linux)" -H 'Content-Type: application/merge-patch+json' \
    --data '{"data":{"b":"x"}}' "$KS_URL/api/v1/namespaces/default/configmaps/demo" >/dev/null ||
    fail "curl patch"
mf '.metadata.managedFields[-1] | .manager == "ops-script" and .fieldsV1 == {"f:data":{"f:b":{}}}' |
    grep -qx true || fail "user agent manager: $(mf .metadata.managedFields)"
# a status write names its subresource
node=$(k get nodes -o name | head -1)
"$CURL" -sf -X PATCH -A "gpuop/0.1" -H 'Content-Type: application/merge-patch+json' \
    --data '{"status":{"capacity":{"example.com/x":"1"}}}' \
    "$KS_URL/api/v1/nodes/${node#node/}/status" >/dev/null || fail "status patch"
k get "$node" -o json --show-managed-fields | "$JQ" -e '.metadata.managedFields[-1] |
    .manager == "gpuop" and .subresource == "status" and
    .fieldsV1 == {"f:status":{"f:capacity":{"f:example.com/x":{}}}}' >/dev/null ||
    fail "status entry: $(k get "$node" -o json --show-managed-fields | "$JQ" -c .metadata.managedFields)"
echo "kubesim managed fields: ok"
