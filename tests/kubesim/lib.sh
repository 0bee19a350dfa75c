# SPDX-License-Identifier: Apache-2.0
# Shared by kubesim's shell tests (sourced): a scratch folder $T removed at exit with the kubesim
# started last, fail, and start/stop. Needs KUBESIM (the kubesim binary) set by the caller.
T=$(mktemp -d)
KS_PID=
cleanup() {
    [ -n "$KS_PID" ] && kill "$KS_PID" 2>/dev/null && wait "$KS_PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -20 "$T/log" 2>/dev/null; exit 1; }

# start [FLAGS...]: kubesim writing $T/kc; sets URL once it serves.
start() {
    rm -f "$T/kc"
    "$KUBESIM" --kubeconfig-out "$T/kc" "$@" >"$T/out" 2>"$T/log" &
    KS_PID=$!
    for _ in $(seq 100); do [ -s "$T/kc" ] && break; sleep 0.05; done
    [ -s "$T/kc" ] || fail "kubesim did not start: $(cat "$T/log")"
    URL=$(sed -n 's/^kubesim: serving //p' "$T/out")
}
# stop: SIGTERM; kubesim must exit 0.
stop() {
    kill "$KS_PID"
    wait "$KS_PID"
    local rc=$?
    KS_PID=
    [ $rc = 0 ] || fail "kubesim exited $rc"
}
