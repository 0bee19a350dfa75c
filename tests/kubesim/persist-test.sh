#!/bin/bash
# kubesim --data-dir: what the store committed survives a SIGKILL and a restart with the same
# directory (objects, resourceVersions, UIDs, removals, custom resources, ServiceAccount tokens,
# the TLS material, so kubectl keeps its kubeconfig); watches from before the restart get 410
# and a relist works; the controllers resume; a torn journal tail is dropped with a log line; a
# corrupt snapshot or journal line, or a directory in use, exits 2 and leaves the files alone.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
KUBESIM=$B/kubesim
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" --cache-dir "$T/cache" --request-timeout=10s "$@"; }
D=$T/data
PORT=$(free_port) || fail "no free port below 32000"
FLAGS=(--listen "127.0.0.1:$PORT" --tls --data-dir "$D" --nodes 2 --pod-ready-delay 3s)
# restart: kubesim again with FLAGS, keeping the kubeconfig of the first start to compare.
restart() {
    cp "$KUBECONFIG" "$T/kc.before"
    start_kubesim "${FLAGS[@]}"
    cmp -s "$KUBECONFIG" "$T/kc.before" || fail "the kubeconfig changed across the restart"
}
curl_k() { curl -sS --cacert "$T/ca.crt" -H "Authorization: Bearer kubesim-admin" "$@"; }
jp() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

start_kubesim "${FLAGS[@]}"
[ "$KS_URL" = "https://127.0.0.1:$PORT" ] || fail "serving $KS_URL"
for f in snapshot.jsonl journal.jsonl tls/ca.crt tls/tls.crt tls/tls.key; do
    [ -s "$D/$f" ] || fail "$D/$f not written"
done
cp "$D/tls/ca.crt" "$T/ca.crt"

# Objects of several kinds, a removal, a custom resource, a Deployment the controllers serve, a
# ServiceAccount token.
k create namespace keep >/dev/null || fail "create namespace"
k -n keep create configmap one --from-literal=a=1 >/dev/null || fail "create configmap"
k -n keep create configmap gone --from-literal=a=1 >/dev/null || fail "create configmap gone"
k -n keep delete configmap gone >/dev/null || fail "delete configmap"
k -n keep patch configmap one --type merge -p '{"data":{"b":"2"}}' >/dev/null || fail "patch"
cat >"$T/crd.yaml" <<'Y'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.test.gpuop.dev}
spec:
  group: test.gpuop.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    subresources: {status: {}}
Y
k apply -f "$T/crd.yaml" >/dev/null || fail "create CRD"
poll 5 k get widgets
printf 'apiVersion: test.gpuop.dev/v1\nkind: Widget\nmetadata: {name: w1, namespace: keep}\nspec: {size: 3}\n' |
    k apply -f - >/dev/null || fail "create widget"
k -n keep create deployment web --image=web --replicas=2 >/dev/null || fail "create deployment"
ready2() { [ "$(k -n keep get deployment web -o jsonpath='{.status.readyReplicas}')" = 2 ]; }
poll 10 ready2 || fail "deployment web not ready before the kill"
tok=$(k -n keep create token default --duration=1h) || fail "create token"

cm_meta() { k -n keep get configmap one -o jsonpath='{.metadata.resourceVersion} {.metadata.uid} {.data.b}'; }
before=$(cm_meta)
w_before=$(k -n keep get widget w1 -o jsonpath='{.metadata.uid} {.spec.size}')
uids_before=$(k get all,cm,ns,sa -A -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' | sort)
list_rv=$(curl_k "$KS_URL/api/v1/namespaces/keep/configmaps" | jp 'd["metadata"]["resourceVersion"]')
[ -n "$list_rv" ] || fail "no list resourceVersion"
k -n keep create configmap after-list >/dev/null || fail "create after-list"
# A pod terminating when the server dies (its grace outlives the kill): the restarted simulated
# kubelet still removes it.
victim=$(k -n keep get pods -o jsonpath='{.items[0].metadata.name}')
k -n keep delete pod "$victim" --wait=false >/dev/null || fail "delete pod"
kill_kubesim
restart

# Everything came back, with the same resourceVersions and UIDs.
[ "$(cm_meta)" = "$before" ] || fail "configmap after the restart: '$(cm_meta)', before: '$before'"
k -n keep get configmap gone >/dev/null 2>&1 && fail "a deleted configmap came back"
k -n keep get configmap after-list >/dev/null || fail "the last write before the kill is lost"
[ "$(k -n keep get widget w1 -o jsonpath='{.metadata.uid} {.spec.size}')" = "$w_before" ] ||
    fail "custom resource after the restart"
k get --raw /apis/test.gpuop.dev/v1 | grep -q '"widgets"' || fail "the CRD's resource not served after the restart"
k --token "$tok" auth whoami -o jsonpath='{.status.userInfo.username}' | grep -qx "system:serviceaccount:keep:default" ||
    fail "the ServiceAccount token does not authenticate after the restart"
grep -q "state loaded" "$T/kubesim.log" || fail "no 'state loaded' log line"

# New writes: resourceVersions go on, UIDs are new.
k -n keep create configmap two >/dev/null || fail "create after the restart"
rv_two=$(k -n keep get configmap two -o jsonpath='{.metadata.resourceVersion}')
rv_one=${before%% *}
[ "$rv_two" -gt "$rv_one" ] || fail "resourceVersion went back: $rv_two after $rv_one"
uid_two=$(k -n keep get configmap two -o jsonpath='{.metadata.uid}')
grep -qx "$uid_two" <<<"$uids_before" && fail "UID $uid_two reused after the restart"

# A watch from before the restart: 410 Expired; from a fresh list: events flow.
w=$(curl_k "$KS_URL/api/v1/namespaces/keep/configmaps?watch=1&resourceVersion=$list_rv&timeoutSeconds=2")
grep -q '"type":"ERROR"' <<<"$w" && grep -q '"code":410' <<<"$w" || fail "watch from $list_rv after the restart: $w"
new_rv=$(curl_k "$KS_URL/api/v1/namespaces/keep/configmaps" | jp 'd["metadata"]["resourceVersion"]')
(sleep 1; k -n keep create configmap three >/dev/null) &
writer=$!
w=$(curl_k "$KS_URL/api/v1/namespaces/keep/configmaps?watch=1&resourceVersion=$new_rv&timeoutSeconds=4")
wait "$writer"
grep -q '"type":"ADDED".*"name":"three"' <<<"$w" || fail "watch from the relist's $new_rv: $w"

# The controllers resume: the terminating pod goes, the Deployment scales.
gone() { ! k -n keep get pod "$victim" >/dev/null 2>&1; }
poll 10 gone || fail "pod $victim, terminating at the kill, never removed"
k -n keep scale deployment web --replicas=3 >/dev/null || fail "scale"
ready3() { [ "$(k -n keep get deployment web -o jsonpath='{.status.readyReplicas}')" = 3 ]; }
poll 15 ready3 || fail "deployment web not scaled to 3 ready after the restart"

# A second kubesim on the same directory: refused (exit 2).
"$KUBESIM" --data-dir "$D" >"$T/out2" 2>"$T/log2"
rc=$?
[ $rc = 2 ] || fail "a second kubesim on $D exited $rc"
grep -q "in use by another kubesim" "$T/log2" || fail "busy data dir: $(cat "$T/log2")"

# A torn last journal line (a kill in the middle of a write): dropped, logged, the rest kept.
k -n keep create configmap four >/dev/null || fail "create four"
kill_kubesim
printf '{"rv":99999999999999,"u":1,"t":"/v1/configmaps","o":{"metadata":{"na' >>"$D/journal.jsonl"
restart
grep -q "dropped a torn last line" "$T/kubesim.log" || fail "no log line for the torn journal tail"
k -n keep get configmap four >/dev/null || fail "the complete line before the torn one not applied"
stop_kubesim

# Corrupt files: exit 2 naming the file, nothing written.
corrupt_case() {
    local what=$1 file=$2
    local sum
    sum=$(cd "$D" && md5sum snapshot.jsonl journal.jsonl)
    "$KUBESIM" "${FLAGS[@]}" --kubeconfig-out "$T/kc3" >"$T/out3" 2>"$T/log3"
    local rc=$?
    [ $rc = 2 ] || fail "$what: exit $rc, expected 2: $(cat "$T/log3")"
    grep -q "$file" "$T/log3" || fail "$what: the error does not name $file: $(cat "$T/log3")"
    [ "$(cd "$D" && md5sum snapshot.jsonl journal.jsonl)" = "$sum" ] || fail "$what: the files changed"
    echo "$what: $(tail -1 "$T/log3")"
}
cp "$D/snapshot.jsonl" "$T/snapshot.good"
head -c -40 "$T/snapshot.good" >"$D/snapshot.jsonl"
corrupt_case "truncated snapshot" 'snapshot.jsonl": truncated'
sed '3s/.*/{"t":"\/v1\/configmaps","o":{/' "$T/snapshot.good" >"$D/snapshot.jsonl"
corrupt_case "corrupt snapshot line" 'snapshot.jsonl" line 3: not JSON'
cp "$T/snapshot.good" "$D/snapshot.jsonl"
printf '{"rv":1,"t":"/v1/nosuch","o":{}}\n{"rv":2,"t":"/v1/configmaps","d":"keep/one"}\n' >"$D/journal.jsonl"
corrupt_case "unknown resource in the journal" 'journal.jsonl" line 1: unknown resource'
: >"$D/journal.jsonl"
start_kubesim "${FLAGS[@]}"
k -n keep get configmap four >/dev/null || fail "the snapshot restored by hand does not load"
stop_kubesim
echo PASS
