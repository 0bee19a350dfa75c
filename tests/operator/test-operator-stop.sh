#!/usr/bin/env bash
# An operator that stops when told, whatever the API server does (issue 18 item 5): the leading
# operator talks to kubesim through a proxy that turns bad on demand; SIGTERM ends it with exit 0
# within 2 s with the API server refusing connections, black-holed (accepting, never answering)
# and slow (every answer 3 s late), and when it refused from the start. With the API server
# answering, the leader releases its Lease on the way out (empty holder).
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_built "$B/kubesim"
need_cmd python3
need_tools
ms() { echo $(($(date +%s%N) / 1000000)); }

start_kubesim --load "$S/sim/clusters/demo.yaml" \
    --load "$S/deploy/crds/nvidia.com_clusterpolicies.yaml"
upstream=${KS_URL#http://}
K="$KUBECTL --request-timeout=5s"

# kubeconfig PORT: a kubeconfig for the server at 127.0.0.1:PORT
kubeconfig() {
    sed "s|server: .*|server: http://127.0.0.1:$1|" "$KUBECONFIG" >"$T/op.kubeconfig"
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
    fi
    rc=0
    wait "$op" || rc=$?
    took=$(($(ms) - t0))
    [ "$rc" = 0 ] || fail "$1: SIGTERM: exit $rc, want 0"
    [ "$took" -le "$budget" ] || fail "$1: SIGTERM: took $took ms, want <= $budget"
    grep -q "stopping" "$T/operator.log" || fail "$1: no \"stopping\" line in the log"
    echo "ok: $1: exit $rc in $took ms"
}

holder() { $K -n gpu-operator get lease "$1" -o jsonpath='{.spec.holderIdentity}'; }

# Refusing from the start: the informers' lists are refused and retried.
port=$(free_port)
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
    wait_for 10 "proxy port" test -s "$T/port"
    kubeconfig "$(cat "$T/port")"
    lease=stop-$mode
    start_operator "$lease"
    wait_for 20 "$mode: leading" grep -q "became leader" "$T/operator.log"
    echo "$mode" >"$T/mode"
    sleep 1.2 # renewals (every 500 ms) and watches now hang or fail
    stop_operator "API server $mode"
    if [ "$mode" = pass ]; then
        h=$(holder "$lease")
        [ -z "$h" ] || fail "pass: the Lease is still held by \"$h\" after the leader stopped"
        echo "ok: pass: the Lease was released"
    fi
    kill -KILL "$proxy" 2>/dev/null || true
    wait "$proxy" 2>/dev/null || true
done
echo "all ok"
