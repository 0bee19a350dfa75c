#!/bin/bash
# kubectl logs through kubesim to a kubelet process, as the API server proxies to a kubelet: a
# fake kubelet (fake-kubelet.py) serves /containerLogs for pods bound to a node annotated
# kubelet.gpuop.dev/simulated=external; logs, --previous, --tail, --timestamps, -f (ending when
# the client goes away), the container checks and the errors the API server returns.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
CURL=$(command -v curl) || skip "curl not installed"
PY=$(command -v python3) || skip "python3 not installed"

mkdir -p "$T/kl"
bg fake-kubelet "$PY" "$S/tests/kubesim/fake-kubelet.py" "$T/kl"
wait_for -p "$LAST" 5 "the fake kubelet's port" test -s "$T/kl/port"
PORT=$(cat "$T/kl/port")
# a port nothing listens on: a kubelet that is down
DOWN=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

start_kubesim --nodes 1
k() { timeout 20 "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
post() {
    "$CURL" -sf -X POST -H 'Content-Type: application/json' --data "$2" "$KS_URL$1" >/dev/null ||
        fail "POST $1"
}
node() { # name port
    post /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$1\",
      \"annotations\":{\"kubelet.gpuop.dev/simulated\":\"external\"}},\"status\":{
      \"addresses\":[{\"type\":\"Hostname\",\"address\":\"$1\"},
                     {\"type\":\"InternalIP\",\"address\":\"127.0.0.1\"}],
      \"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":$2}},
      \"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"
}
pod() { # name node containers...
    local name=$1 nn=$2 cs="" c
    shift 2
    for c in "$@"; do cs="$cs${cs:+,}{\"name\":\"$c\",\"image\":\"busybox:1\"}"; done
    post /api/v1/namespaces/default/pods "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",
      \"metadata\":{\"name\":\"$name\"},\"spec\":{\"nodeName\":\"$nn\",\"containers\":[$cs]}}"
}
node ext "$PORT"
node gone "$DOWN"
pod one ext c
pod two ext a b
pod lost gone c
pod local node-00000 c

# the log, its options passed on to the kubelet
out=$(k logs one 2>&1) || fail "logs one: $out"
[ "$out" = $'line1\nline2' ] || fail "logs one: got '$out'"
grep -qx "/containerLogs/default/one/c" "$T/kl/requests" || fail "kubelet request: $(cat "$T/kl/requests")"
out=$(k logs one --tail=1 --timestamps 2>&1) || fail "logs --tail: $out"
[ "$out" = "2026-01-01T00:00:01Z line2" ] || fail "logs --tail=1 --timestamps: got '$out'"
grep -qx "/containerLogs/default/one/c?timestamps=true&tailLines=1" "$T/kl/requests" ||
    fail "kubelet request: $(tail -1 "$T/kl/requests")"
out=$(k logs one -c c 2>&1) || fail "logs -c: $out"
[ "$out" = $'line1\nline2' ] || fail "logs -c c: got '$out'"

# --previous: the kubelet's 400 becomes the API server's BadRequest
out=$(k logs one --previous 2>&1) && fail "logs --previous succeeded: $out"
[ "$out" = 'Error from server (BadRequest): previous terminated container "c" in pod "one" not found' ] ||
    fail "logs --previous: got '$out'"
# a container the pod does not have (kubectl checks it too, so ask directly)
out=$(k get --raw "/api/v1/namespaces/default/pods/one/log?container=ghost" 2>&1) &&
    fail "log of container ghost succeeded"
echo "$out" | grep -qF 'container ghost is not valid for pod one' || fail "container ghost: got '$out'"

# several containers: -c picks one; without it the API server names them (kubectl itself
# defaults to the first and says so)
out=$(k logs two -c b 2>&1) || fail "logs two -c b: $out"
[ "$out" = "from b" ] || fail "logs two -c b: got '$out'"
out=$(k get --raw /api/v1/namespaces/default/pods/two/log 2>&1) && fail "raw log of two succeeded"
echo "$out" | grep -qF 'a container name must be specified for pod two, choose one of: [a b]' ||
    fail "raw log of two: got '$out'"
out=$(k logs two 2>&1) || fail "logs two: $out"
echo "$out" | grep -qx "from a" || fail "logs two: got '$out'"

# -f streams until the client goes away; then kubesim lets go of the kubelet
timeout 6 "$KUBECTL" --kubeconfig "$KUBECONFIG" logs -f one >"$T/follow" 2>&1
rc=$?
[ $rc = 124 ] || fail "logs -f ended by itself (rc $rc): $(cat "$T/follow")"
grep -qx line2 "$T/follow" && grep -qx "tick 3" "$T/follow" || fail "logs -f: $(cat "$T/follow")"
poll 5 test -e "$T/kl/follow-closed" || fail "the kubelet's follow stream was kept open after the client left"

# a kubelet that is down, a pod kubesim's own simulated kubelet runs, a pod that is not there
out=$(k logs lost 2>&1) && fail "logs lost succeeded"
[ "$out" = "Error from server: Get \"http://127.0.0.1:$DOWN/containerLogs/default/lost/c\": dial tcp 127.0.0.1:$DOWN: connect: connection refused" ] ||
    fail "logs lost: got '$out'"
out=$(k logs local 2>&1) && fail "logs local succeeded"
[ "$out" = "Error from server (NotFound): the server could not find the requested resource" ] ||
    fail "logs local: got '$out'"
out=$(k logs nothere 2>&1) && fail "logs nothere succeeded"
[ "$out" = 'error: error from server (NotFound): pods "nothere" not found in namespace "default"' ] ||
    fail "logs nothere: got '$out'"
"$CURL" -s "$KS_URL/metrics" | grep -q 'kubesim_requests_total{verb="get",resource="pods/log",code="200"}' ||
    fail "metrics: no pods/log requests counted"
stop_kubesim
echo "kubesim logs: ok"
