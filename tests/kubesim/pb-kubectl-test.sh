#!/bin/bash
# kubectl 1.32's typed generators send protobuf bodies and accept protobuf answers: each creates
# its object against kubesim, and the object reads back as the same generator's JSON (sent by
# `kubectl create -f`) does. Lists and watches in protobuf (kubectl's typed clients) too.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" --cache-dir "$T/cache" --request-timeout=10s "$@"; }

start_kubesim --nodes 2 --pod-ready-delay 100ms

gens=(
    "deployment NAME --image=nginx:1.27 --replicas=2"
    "job NAME --image=busybox:1.36"
    "secret generic NAME --from-literal=pw=hunter2"
    "service clusterip NAME --tcp=80:8080"
    "role NAME --verb=get,list --resource=pods"
    "rolebinding NAME --role=NAME --user=alice"
    "configmap NAME --from-literal=a=b"
    "serviceaccount NAME"
    "clusterrole NAME --verb=get --resource=nodes"
    "clusterrolebinding NAME --clusterrole=NAME --user=bob"
    "poddisruptionbudget NAME --selector=app=NAME --min-available=1"
)
for g in "${gens[@]}"; do
    set -- $g
    out=$(k create ${g//NAME/pb-$1} 2>&1) || fail "typed create $1: $out"
    echo "$out" | grep -q created || fail "typed create $1: $out"
    k create ${g//NAME/js-$1} --dry-run=client -o json >"$T/obj.json" || fail "dry-run $1"
    ref=$(k create -f "$T/obj.json" -o name) || fail "create -f $1"
    k get "${ref/js-/pb-}" -o json >"$T/pb-$1.json" || fail "get ${ref/js-/pb-}"
    k get "$ref" -o json >"$T/js-$1.json" || fail "get $ref"
done
# each pair is the same object, but for its name and what the server sets
python3 - "$T" "${gens[@]%% *}" <<'PY' || fail "typed (protobuf) and JSON creates differ"
import difflib, json, sys
def norm(path, name):
    o = json.load(open(path))
    for k in ["uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"]:
        o["metadata"].pop(k, None)
    o.pop("status", None)
    for k in ["clusterIP", "clusterIPs"]:
        o.get("spec", {}).pop(k, None)
    return json.dumps(o, sort_keys=True, indent=1).replace(name, "NAME").splitlines()
bad = 0
for g in sys.argv[2:]:
    a = norm(f"{sys.argv[1]}/pb-{g}.json", f"pb-{g}")
    b = norm(f"{sys.argv[1]}/js-{g}.json", f"js-{g}")
    if a != b:
        bad = 1
        print(g, "\n".join(difflib.unified_diff(a, b, "protobuf", "json", lineterm="")))
sys.exit(bad)
PY
[ "$(k get secret pb-secret -o jsonpath='{.data.pw}' | base64 -d)" = hunter2 ] || fail "secret data"
k rollout status deployment/pb-deployment --timeout=20s >/dev/null || fail "rollout status"

# typed clients: list (drain lists pods, evicts them) and watch (rollout status, wait) in protobuf
k drain node-00000 --ignore-daemonsets --delete-emptydir-data --timeout=20s >/dev/null 2>&1 \
    || fail "drain"
k uncordon node-00000 >/dev/null || fail "uncordon"
k wait --for=condition=Available deployment/pb-deployment --timeout=20s >/dev/null \
    || fail "wait (watch)"
# the server's own answers: a list and a watch frame in protobuf
curl -sf -H "Accept: application/vnd.kubernetes.protobuf" "$KS_URL/api/v1/namespaces/default/pods" \
    -o "$T/pods.pb" || fail "protobuf list"
head -c 4 "$T/pods.pb" | od -c | grep -q 'k   8   s  \\0' || fail "list: no k8s envelope"
grep -q PodList "$T/pods.pb" || fail "list: not a PodList"
ct=$(curl -s -o "$T/watch.pb" -D - -m 2 -H "Accept: application/vnd.kubernetes.protobuf" \
    "$KS_URL/api/v1/namespaces/default/pods?watch=1" | tr -d '\r' | sed -n 's/^Content-Type: //Ip')
[ "$ct" = "application/vnd.kubernetes.protobuf;stream=watch" ] || fail "watch content type: $ct"
grep -q ADDED "$T/watch.pb" || fail "watch: no ADDED frame"
stop_kubesim
echo ok
