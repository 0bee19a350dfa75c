#!/bin/bash
# kubesim over HTTP: TLS with the generated CA and bearer tokens, /metrics, bounded bodies,
# hostile input, and bad flags.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
CURL=$(command -v curl) || skip "curl not installed"
KUBESIM=$B/kubesim

# bad flags: a one-line error and exit 2, never a crash
for args in "--nodes x" "--listen 10.0.0.1:80" "--listen nope" "--pod-ready-delay soon" \
            "--bogus" "--node-template /nonexistent --nodes 1" "--load /nonexistent"; do
    # shellcheck disable=SC2086
    "$KUBESIM" $args >"$T/bad" 2>&1
    rc=$?
    [ $rc = 1 ] || [ $rc = 2 ] || fail "kubesim $args: exit $rc"
    grep -q "kubesim" "$T/bad" || fail "kubesim $args: no message"
done
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "Bad_Name"}\n' >"$T/bad.yaml"
"$KUBESIM" --load "$T/bad.yaml" >"$T/bad" 2>&1 && fail "bad --load accepted"
grep -q 'bad.yaml.*document 1.*is invalid' "$T/bad" || fail "bad --load message: $(cat "$T/bad")"

# TLS + token
start_kubesim --tls --token s3cret --nodes 2 --max-body 65536
case "$KS_URL" in https://127.0.0.1:*) ;; *) fail "url $KS_URL" ;; esac
grep -q certificate-authority-data "$KUBECONFIG" || fail "no CA in kubeconfig"
grep -q "token: s3cret" "$KUBECONFIG" || fail "no token in kubeconfig"
code=$("$CURL" -s -o "$T/body" -w '%{http_code}' --cacert "$KS_CA" "$KS_URL/api/v1/nodes")
[ "$code" = 401 ] || fail "no token: $code"
grep -q '"reason":"Unauthorized"' "$T/body" || fail "401 body"
code=$("$CURL" -s -o "$T/body" -w '%{http_code}' --cacert "$KS_CA" \
    -H "Authorization: Bearer wrong" "$KS_URL/api/v1/nodes")
[ "$code" = 401 ] || fail "wrong token: $code"
A=(-s --cacert "$KS_CA" -H "Authorization: Bearer s3cret")
code=$("$CURL" "${A[@]}" -o "$T/body" -w '%{http_code}' "$KS_URL/api/v1/nodes")
[ "$code" = 200 ] || fail "with token: $code"
grep -q '"kind":"NodeList"' "$T/body" || fail "node list"
"$CURL" -s -o /dev/null "$KS_URL/api/v1/nodes" 2>/dev/null && fail "TLS not verified"
if . "$S/scripts/tools-env.sh"; then
    "$KUBECTL" --kubeconfig "$KUBECONFIG" --cache-dir "$T/cache" get nodes | grep -q node-00001 || fail "kubectl over TLS"
fi

# bounded bodies and hostile input
head -c 70000 /dev/zero | tr '\0' 'a' >"$T/big"
code=$("$CURL" "${A[@]}" -o "$T/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data-binary @"$T/big" "$KS_URL/api/v1/namespaces/default/configmaps")
[ "$code" = 413 ] || fail "oversized body: $code"
grep -q RequestEntityTooLarge "$T/body" || fail "413 body"
code=$("$CURL" "${A[@]}" -o "$T/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data-binary '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":' \
    "$KS_URL/api/v1/namespaces/default/configmaps")
[ "$code" = 400 ] || fail "truncated JSON: $code"
code=$("$CURL" "${A[@]}" -o "$T/body" -w '%{http_code}' -X POST -H 'Content-Type: application/yaml' \
    --data-binary $'kind: ConfigMap\n  bad: [' "$KS_URL/api/v1/namespaces/default/configmaps")
[ "$code" = 400 ] || fail "broken YAML: $code"
code=$("$CURL" "${A[@]}" -o "$T/body" -w '%{http_code}' "$KS_URL/api/v1/gizmos")
[ "$code" = 404 ] || fail "unknown resource: $code"
code=$("$CURL" "${A[@]}" -o "$T/body" -w '%{http_code}' "$KS_URL/api/v1/nodes?labelSelector=a%20in%20(b")
[ "$code" = 400 ] || fail "malformed selector: $code"
code=$("$CURL" "${A[@]}" -o "$T/body" -w '%{http_code}' -X POST -H 'Content-Type: application/yaml' \
    --data-binary $'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: UPPER}\n' \
    "$KS_URL/api/v1/namespaces/default/configmaps")
[ "$code" = 422 ] || fail "invalid name: $code"
grep -q '"reason":"Invalid"' "$T/body" || fail "422 body"

# deeply nested JSON through the HTTP threads: an answer, not a crash
{ printf '{"metadata":{"labels":{"deep":"1"}},"spec":'; for _ in $(seq 1500); do printf '{"x":'; done
  printf 1; for _ in $(seq 1500); do printf '}'; done; printf '}'; } >"$T/deep.json"
code=$("$CURL" "${A[@]}" -o "$T/body" -w '%{http_code}' -X PATCH \
    -H 'Content-Type: application/strategic-merge-patch+json' --data-binary @"$T/deep.json" \
    "$KS_URL/api/v1/namespaces/default")
case "$code" in 2*|4*) ;; *) fail "deep JSON: $code" ;; esac
code=$("$CURL" "${A[@]}" -o /dev/null -w '%{http_code}' "$KS_URL/healthz")
[ "$code" = 200 ] || fail "kubesim gone after deep JSON"

# a watch stream over TLS: chunked JSON events, ended by timeoutSeconds
"$CURL" "${A[@]}" -N "$KS_URL/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=2" \
    >"$T/watch" &
WPID=$!
sleep 0.5
"$CURL" "${A[@]}" -o /dev/null -X POST -H 'Content-Type: application/json' \
    --data-binary '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w"}}' \
    "$KS_URL/api/v1/namespaces/default/configmaps"
wait $WPID || fail "watch stream did not end cleanly"
grep -q '"type":"ADDED".*"name":"w"' "$T/watch" || fail "watch event: $(cat "$T/watch")"

# metrics
"$CURL" "${A[@]}" "$KS_URL/metrics" >"$T/metrics"
grep -q 'kubesim_requests_total{verb="list",resource="nodes",code="200"}' "$T/metrics" \
    || fail "request metric: $(head -20 "$T/metrics")"
grep -q 'kubesim_requests_total{verb="create",resource="configmaps",code="413"} 1' "$T/metrics" \
    || fail "413 counted"
grep -q '^kubesim_watch_events_total [1-9]' "$T/metrics" || fail "watch events metric"
grep -q '^kubesim_watches_active ' "$T/metrics" || fail "watches gauge"
if command -v promtool >/dev/null; then
    promtool check metrics <"$T/metrics" >"$T/lint" 2>&1 || fail "promtool: $(cat "$T/lint")"
fi
RV=$("$CURL" "${A[@]}" "$KS_URL/api/v1/nodes" | sed -n 's/.*"resourceVersion":"\([0-9]*\)".*/\1/p' | head -1)
[ -n "$RV" ] || fail "no list resourceVersion"
stop_kubesim

# a restarted kubesim: a watch resumed from the old resourceVersion gets 410 Expired
sleep 0.01
start_kubesim --nodes 2
code=$("$CURL" -s -o "$T/body" -w '%{http_code}' "$KS_URL/api/v1/nodes?watch=true&resourceVersion=$RV")
[ "$code" = 200 ] || fail "resumed watch: $code"
grep -q '"type":"ERROR".*"code":410' "$T/body" || fail "resumed watch not 410: $(cat "$T/body")"
code=$("$CURL" -s -o "$T/body" -w '%{http_code}' "$KS_URL/api/v1/nodes?watch=true&resourceVersion=9${RV}")
[ "$code" = 504 ] || fail "future resourceVersion: $code"
grep -q ResourceVersionTooLarge "$T/body" || fail "504 body"
stop_kubesim
echo ok
