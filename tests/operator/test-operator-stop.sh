#!/usr/bin/env bash
# An operator that stops when told, whatever the API server does (issue 18 item 5): the leading
# operator talks to kubesim through a proxy that turns bad on demand; SIGTERM ends it with exit 0
# within 2 s with the API server refusing connections, black-holed (accepting, never answering)
# and slow (every answer 3 s late), and when it refused from the start. With the API server
# answering, the leader releases its Lease on the way out (empty holder).
set -euo pipefail
B=${GPUOP_BUILD_ROOT:?}
S=${GPUOP_SOURCE_ROOT:?}
[ -x "$B/kubesim" ] || { echo "build/kubesim not built: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
. "$S/scripts/tools-env.sh" || { echo "$TOOLS_MISSING: skipped"; exit 77; }

T=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT
failures=0
fail() {
    echo "FAIL: $*"
    for f in "$T"/*.log; do echo "--- $f"; tail -n 15 "$f"; done
    failures=$((failures + 1))
}
ms() { echo $(($(date +%s%N) / 1000000)); }
wait_for() { # SECONDS DESCRIPTION COMMAND...
    local secs=$1 what=$2
    shift 2
    local end=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || { fail "timed out after ${secs}s waiting for: $what"; return 1; }
        sleep 0.1
    done
}

"$B/kubesim" --load "$S/sim/clusters/demo.yaml" \
    --load "$S/deploy/crds/nvidia.com_clusterpolicies.yaml" \
    --kubeconfig-out "$T/kubesim.kubeconfig" >"$T/kubesim.log" 2>&1 &
pids+=($!)
wait_for 10 "kubesim kubeconfig" test -s "$T/kubesim.kubeconfig" || exit 1
server=$(sed -n 's/^ *server: //p' "$T/kubesim.kubeconfig")
upstream=${server#http://}
K="$KUBECTL --kubeconfig $T/kubesim.kubeconfig --request-timeout=5s"
wait_for 10 "kubesim answering" $K get nodes || exit 1

# kubeconfig PORT: a kubeconfig for the server at 127.0.0.1:PORT
kubeconfig() {
    sed "s|server: .*|server: http://127.0.0.1:$1|" "$T/kubesim.kubeconfig" >"$T/op.kubeconfig"
}

# start_operator LEASE [READY_PATTERN]: the operator, leader election with short periods
start_operator() {
    : >"$T/operator.log"
    "$B/gpuop" operator --kubeconfig "$T/op.kubeconfig" --namespace gpu-operator \
        --metrics-listen "" --leader-election-id "$1" --identity "op-$1" \
        --leader-retry-period 500ms --leader-renew-deadline 4s --leader-lease-duration 6s \
        >"$T/operator.log" 2>&1 &
    op=$!
    pids+=($op)
}

# stop_operator CASE: SIGTERM, wants exit 0 within 2 s (times GPUOP_TEST_TIME_SCALE under
# sanitizers, where everything runs slower)
stop_operator() {
    local t0 rc took i=0 budget=$((2000 * ${GPUOP_TEST_TIME_SCALE:-1}))
    t0=$(ms)
    kill -TERM "$op"
    while kill -0 "$op" 2>/dev/null && [ $i -lt $((60 * ${GPUOP_TEST_TIME_SCALE:-1})) ]; do
        sleep 0.05
        i=$((i + 1))
    done
    if kill -0 "$op" 2>/dev/null; then
        fail "$1: still running $((3 * ${GPUOP_TEST_TIME_SCALE:-1})) s after SIGTERM"
        kill -KILL "$op"
    fi
    rc=0
    wait "$op" || rc=$?
    took=$(($(ms) - t0))
    local before=$failures
    [ "$rc" = 0 ] || fail "$1: SIGTERM: exit $rc, want 0"
    [ "$took" -le "$budget" ] || fail "$1: SIGTERM: took $took ms, want <= $budget"
    grep -q "stopping" "$T/operator.log" || fail "$1: no \"stopping\" line in the log"
    [ "$failures" != "$before" ] || echo "ok: $1: exit $rc in $took ms"
}

holder() { $K -n gpu-operator get lease "$1" -o jsonpath='{.spec.holderIdentity}'; }

# Refusing from the start: the informers' lists are refused and retried.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
kubeconfig "$port"
start_operator refused-at-start
wait_for 10 "a refused list" grep -q "informer list failed" "$T/operator.log" && sleep 0.5
stop_operator "refused from the start"

$K create namespace gpu-operator >/dev/null 2>&1 || true
for mode in pass refuse blackhole slow; do
    echo pass >"$T/mode"
    rm -f "$T/port"
    python3 "$S/tests/operator/faultproxy.py" "$T/port" "$T/mode" "${upstream%:*}" "${upstream#*:}" \
        >"$T/proxy.log" 2>&1 &
    proxy=$!
    pids+=($proxy)
    wait_for 10 "proxy port" test -s "$T/port" || continue
    kubeconfig "$(cat "$T/port")"
    lease=stop-$mode
    start_operator "$lease"
    if wait_for 20 "$mode: leading" grep -q "became leader" "$T/operator.log"; then
        echo "$mode" >"$T/mode"
        sleep 1.2 # renewals (every 500 ms) and watches now hang or fail
        stop_operator "API server $mode"
        if [ "$mode" = pass ]; then
            h=$(holder "$lease")
            [ -z "$h" ] || fail "pass: the Lease is still held by \"$h\" after the leader stopped"
            [ -n "$h" ] || echo "ok: pass: the Lease was released"
        fi
    else
        kill -KILL "$op" 2>/dev/null || true
    fi
    kill -KILL "$proxy" 2>/dev/null || true
    wait "$proxy" 2>/dev/null || true
done
[ "$failures" = 0 ] || exit 1
echo "all ok"
