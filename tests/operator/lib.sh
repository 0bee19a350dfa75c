# SPDX-License-Identifier: Apache-2.0
# Shared by the operator's kubesim tests (sourced): a scratch folder $T removed at exit with every
# process in $pids, fail (and a test's on_fail), free_port, low_free_port, wait_for,
# start_kubesim, and kill_kubesim and restart_kubesim (an API server crash and restart, with
# --data-dir).
# Needs B (build root) and S (source root) set by the caller.
T=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT
# fail MESSAGE: prints it, the test's on_fail (when it defines one: what it recorded), the tail
# of each $T/*.log, and exits 1.
fail() {
    echo "FAIL: $*"
    if declare -F on_fail >/dev/null; then on_fail || true; fi
    for f in "$T"/*.log; do echo "--- $f"; tail -n ${FAIL_LOG_LINES:-40} "$f"; done
    exit 1
}
# metrics_has PORT REGEX: 127.0.0.1:PORT/metrics has a line matching REGEX (the page read whole:
# grep -q leaving a pipe early would cut curl's write and, under pipefail, fail the pipeline).
metrics_has() { local page; page=$(curl -s "127.0.0.1:$1/metrics") && grep -q "$2" <<<"$page"; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_for SECONDS DESCRIPTION COMMAND...: polls until COMMAND succeeds (SECONDS times
# GPUOP_TEST_TIME_SCALE, the sanitizer builds' slowdown, when that is a whole number)
wait_for() {
    local secs=$1 what=$2 scale=${GPUOP_TEST_TIME_SCALE:-1}
    case $scale in
    '' | *[!0-9]*) ;;
    *) secs=$((secs * scale)) ;;
    esac
    shift 2
    local end=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || fail "timed out after ${secs}s waiting for: $what"
        sleep 0.2
    done
}
# low_free_port: a free port below the ephemeral range, for a server that must get the same port
# again after a restart (scripts/free-port.py).
low_free_port() { /usr/bin/python3 "$S/scripts/free-port.py"; }
# start_kubesim [FLAGS...]: kubesim with the demo cluster, logging to $T/kubesim.log; sets and
# exports KUBECONFIG ($T/kubeconfig) once kubesim wrote it, KS_PID, and KS_ARGS (the flags, for
# restart_kubesim).
start_kubesim() {
    KS_ARGS=(--load "$S/sim/clusters/demo.yaml" --kubeconfig-out "$T/kubeconfig" "$@")
    "$B/kubesim" "${KS_ARGS[@]}" >"$T/kubesim.log" 2>&1 &
    KS_PID=$!
    pids+=($!)
    wait_for 10 "kubesim kubeconfig" test -s "$T/kubeconfig"
    export KUBECONFIG=$T/kubeconfig
}
# kill_kubesim: SIGKILL kubesim (an API server crash).
kill_kubesim() {
    kill -KILL "$KS_PID"
    wait "$KS_PID" 2>/dev/null || true
}
# restart_kubesim: kubesim again with the flags of start_kubesim (the same --listen and
# --data-dir make it the same cluster), appending to $T/kubesim.log; waits until it answers.
restart_kubesim() {
    "$B/kubesim" "${KS_ARGS[@]}" >>"$T/kubesim.log" 2>&1 &
    KS_PID=$!
    pids+=($!)
    wait_for 10 "kubesim answering after its restart" "$KUBECTL" --request-timeout=2s get --raw /readyz
}
# start_kubesim_operator_rbac DELAY [FLAGS...]: start_kubesim (with FLAGS) with the operator's
# shipped RBAC loaded (pods ready DELAY after they are made), answering, the CRDs applied; sets K
# (the pinned kubectl with a deadline) and OPKC (a kubeconfig of the operator's ServiceAccount).
start_kubesim_operator_rbac() {
    start_kubesim --pod-ready-delay "$1" --load "$S/deploy/rbac/operator.yaml" "${@:2}"
    K="$KUBECTL --request-timeout=10s"
    wait_for 10 "kubesim answering" $K get nodes
    $K apply -f "$S/deploy/crds/" >/dev/null
    OPKC=$T/operator.kubeconfig
    sa_kubeconfig "$OPKC"
}
# sa_kubeconfig OUT [NS NAME]: KUBECONFIG (the admin's) with the token of a ServiceAccount
# (default the operator's shipped gpu-operator/gpu-operator, deploy/rbac/operator.yaml) from
# the TokenRequest API, for running the operator under its own RBAC.
sa_kubeconfig() {
    local out=$1 ns=${2:-gpu-operator} sa=${3:-gpu-operator} tok
    tok=$(kubectl --request-timeout=10s create token "$sa" -n "$ns" --duration=24h) ||
        fail "no token for ServiceAccount $ns/$sa"
    sed "s|^    token: .*|    token: $tok|" "$KUBECONFIG" >"$out"
    grep -q "token: $tok" "$out" || fail "no token line in $KUBECONFIG"
}
