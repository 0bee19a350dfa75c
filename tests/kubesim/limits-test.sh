#!/bin/bash
# kubesim stays responsive under a Deployment of a million replicas: /healthz and reads answer
# quickly while the controllers work, memory stays bounded, and SIGTERM exits within 2 s.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
CURL=$(command -v curl) || skip "curl not installed"
start_kubesim --nodes 2

code=$("$CURL" -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    "$KS_URL/apis/apps/v1/namespaces/default/deployments" -d '{"apiVersion":"apps/v1",
    "kind":"Deployment","metadata":{"name":"huge"},"spec":{"replicas":1000000,
    "selector":{"matchLabels":{"app":"huge"}},"template":{"metadata":{"labels":{"app":"huge"}},
    "spec":{"containers":[{"name":"c","image":"busybox:1"}]}}}}')
[ "$code" = 201 ] || fail "create the Deployment: $code"

# while the controllers work: health and reads answer, each well within a second
for i in $(seq 20); do
    "$CURL" -sf --max-time 1 -o /dev/null "$KS_URL/healthz" || fail "/healthz did not answer ($i)"
    "$CURL" -sf --max-time 2 -o /dev/null "$KS_URL/api/v1/namespaces/default/pods?limit=1" \
        || fail "a read did not answer ($i)"
    sleep 0.2
done
rss=$(awk '/VmRSS/ {print $2}' "/proc/$KS_PID/status")
[ "$rss" -lt 2000000 ] || fail "kubesim holds ${rss} kB"

kill -TERM "$KS_PID"
wait_exit "$KS_PID" 2
KS_PID=
[ $RC = 0 ] || fail "kubesim exited $RC"
echo "kubesim limits: ok (rss ${rss} kB)"
