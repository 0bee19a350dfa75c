#!/bin/bash
# kubesim stays responsive under a Deployment of a million replicas: /healthz and reads answer
# quickly while the controllers work, memory stays bounded, and SIGTERM exits within 2 s.
set -u
CURL=$(command -v curl) || { echo "curl not installed: skipping"; exit 77; }
BUILD=${GPUOP_BUILD_ROOT:?}
KUBESIM=$BUILD/kubesim
T=$(mktemp -d)
KS_PID=
cleanup() {
    [ -n "$KS_PID" ] && kill -9 "$KS_PID" 2>/dev/null && wait "$KS_PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -20 "$T/log" 2>/dev/null; exit 1; }

"$KUBESIM" --kubeconfig-out "$T/kc" --nodes 2 >"$T/out" 2>"$T/log" &
KS_PID=$!
for _ in $(seq 100); do [ -s "$T/kc" ] && break; sleep 0.05; done
[ -s "$T/kc" ] || fail "kubesim did not start"
URL=$(sed -n 's/^kubesim: serving //p' "$T/out")

code=$("$CURL" -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    "$URL/apis/apps/v1/namespaces/default/deployments" -d '{"apiVersion":"apps/v1",
    "kind":"Deployment","metadata":{"name":"huge"},"spec":{"replicas":1000000,
    "selector":{"matchLabels":{"app":"huge"}},"template":{"metadata":{"labels":{"app":"huge"}},
    "spec":{"containers":[{"name":"c","image":"busybox:1"}]}}}}')
[ "$code" = 201 ] || fail "create the Deployment: $code"

# while the controllers work: health and reads answer, each well within a second
for i in $(seq 20); do
    "$CURL" -sf --max-time 1 -o /dev/null "$URL/healthz" || fail "/healthz did not answer ($i)"
    "$CURL" -sf --max-time 2 -o /dev/null "$URL/api/v1/namespaces/default/pods?limit=1" \
        || fail "a read did not answer ($i)"
    sleep 0.2
done
rss=$(awk '/VmRSS/ {print $2}' "/proc/$KS_PID/status")
[ "$rss" -lt 2000000 ] || fail "kubesim holds ${rss} kB"

kill -TERM "$KS_PID"
for _ in $(seq 40); do kill -0 "$KS_PID" 2>/dev/null || break; sleep 0.05; done
kill -0 "$KS_PID" 2>/dev/null && fail "still running 2 s after SIGTERM"
wait "$KS_PID"
rc=$?
KS_PID=
[ $rc = 0 ] || fail "kubesim exited $rc"
echo "kubesim limits: ok (rss ${rss} kB)"
