# SPDX-License-Identifier: Apache-2.0
# The shell tests' one library (docs/DEVELOPING.md, "Shell tests"). A test sources it first:
#     . "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
# and has $B and $S (the build and source roots, from meson's test environment), a scratch
# folder $T removed at exit, and:
#   skip REASON              exit 77 (skipped), saying why
#   fail MESSAGE             exit 1: the message, the tail of every $T/*.log and of the logs
#                            named with log_file PATH..., the cluster's pods and Events while
#                            kubelet-sim runs, then what the test's on_fail (if defined) prints
#   fail_later MESSAGE       a failed check after which the test goes on (tables of cases); a
#                            test that counted any (FAILURES) exits 1
#   need_cmd NAME...         skip unless each command exists; need_root WHY; need_built FILE...
#   need_tools               the pinned kubectl and helm (scripts/tools-env.sh) first on PATH,
#                            as KUBECTL and HELM, and K (kubectl with a 10 s request deadline);
#                            skip without them
#   wait_for [-p PID] SECS WHAT CMD...   until CMD succeeds, else fail naming WHAT (at once if
#                            the process PID ended); SECS scaled by GPUOP_TEST_TIME_SCALE (make
#                            check-asan's slowdown; scaled SECS prints it)
#   poll [-p PID] SECS CMD...   the same, but returns 1 for the caller to say what failed
#   wait_log FILE TEXT [SECS], wait_exit PID [SECS] (RC: its exit status), ended PID
#   bg NAME CMD...           CMD in the background, its output in $T/NAME.log, its pid in LAST
#   at_exit COMMAND          a command (a string) run at exit, after the processes are stopped
#   free_port [N]            the first of N consecutive free ports below the ephemeral range
#                            (scripts/free-port.py)
#   start_kubesim [--api-ip IP] FLAGS...   kubesim, answering, with KUBECONFIG exported;
#                            restart_kubesim, stop_kubesim, kill_kubesim
#   operator_cluster DELAY [FLAGS...]      kubesim with the demo cluster, the operator's RBAC
#                            and CRDs, and OPKC (the operator's kubeconfig)
#   start_kubelet_sim CLUSTER NODES [FLAGS...]   kubelet-sim's nodes, Ready; stop_kubelet_sim
#   sa_kubeconfig OUT [NS SA], metrics_has PORT REGEX
# At exit every process started with bg, start_kubesim or start_kubelet_sim, and every pid a
# test adds to the array pids, is stopped (SIGTERM, then SIGKILL), its descendants too.
# shellcheck shell=bash

B=${B:-${GPUOP_BUILD_ROOT:-}}
S=${S:-${GPUOP_SOURCE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}}
T=$(mktemp -d "${TMPDIR:-/tmp}/gpuop-test.XXXXXX") || {
    echo "FAIL: mktemp"
    exit 1
}
pids=()
_tl_logs=()
_tl_at_exit=()
KS_PID='' KL_PID=''

# At exit: SIGTERM to each process in pids, 10 s for them to end (kubesim and kubelet-sim clean
# up), then SIGTERM to what they left of their descendants (a background shell function's
# programs do not get its signal), SIGKILL to what remains; then the at_exit commands and $T.
_tl_cleanup() {
    local rc=$? p i tree=''
    set +e
    for p in "${pids[@]}"; do tree+=" $(_tl_tree "$p")"; done
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    _tl_poll 10 '' _tl_all_ended "${pids[@]}"
    for p in $tree; do kill -TERM "$p" 2>/dev/null; done
    _tl_poll 2 '' _tl_all_ended $tree
    for p in $tree; do kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    for ((i = ${#_tl_at_exit[@]} - 1; i >= 0; i--)); do eval "${_tl_at_exit[i]}"; done
    rm -rf "$T"
    if [ "$rc" = 0 ] && [ "$FAILURES" -gt 0 ]; then
        echo "FAIL: $FAILURES check(s) failed"
        exit 1
    fi
}
trap _tl_cleanup EXIT
# _tl_tree PID: the pids of PID's descendants, the deepest first
_tl_tree() {
    local c
    for c in $(pgrep -P "$1" 2>/dev/null); do
        _tl_tree "$c"
        echo "$c"
    done
}
_tl_all_ended() {
    local p
    for p in "$@"; do ! kill -0 "$p" 2>/dev/null || return 1; done
}

at_exit() { _tl_at_exit+=("$1"); }

# log_file PATH...: logs that fail shows the tail of, besides $T/*.log.
log_file() { _tl_logs+=("$@"); }

# fail_later MESSAGE: a failed check after which the test goes on (a table of cases reports
# every failure): prints it and counts it in FAILURES; a test that counted any exits 1.
FAILURES=0
fail_later() {
    echo "FAIL: $*"
    FAILURES=$((FAILURES + 1))
}

skip() {
    echo "SKIP: $*"
    exit 77
}

fail() {
    local f seen=' '
    set +e # what follows only reports
    echo "FAIL: $*"
    for f in "${_tl_logs[@]}" "$T"/*.log; do
        [ -f "$f" ] && [[ $seen != *" $f "* ]] || continue
        seen+="$f "
        echo "--- $f"
        tail -n "${FAIL_LOG_LINES:-40}" "$f"
    done
    if [ -n "$KL_PID" ] && [ -n "${KUBECTL:-}" ]; then
        echo "--- pods"
        "$KUBECTL" --request-timeout=5s get pods -A -o wide 2>&1
        echo "--- the latest Events"
        "$KUBECTL" --request-timeout=5s get events -A \
            -o jsonpath='{range .items[*]}{.involvedObject.name} {.reason} {.message}{"\n"}{end}' \
            2>/dev/null | sort -u -k2 | tail -n 25
    fi
    if declare -F on_fail >/dev/null; then on_fail || true; fi
    exit 1
}

need_cmd() {
    local c
    for c in "$@"; do command -v "$c" >/dev/null || skip "$c not installed"; done
}
need_root() { [ "$(id -u)" = 0 ] || skip "$* need root"; }
need_built() {
    local f
    for f in "$@"; do [ -e "$f" ] || skip "$f not built"; done
}
need_tools() {
    # shellcheck source=../../scripts/tools-env.sh
    . "$S/scripts/tools-env.sh" || skip "$TOOLS_MISSING"
    K="$KUBECTL --request-timeout=10s"
}

# scaled SECONDS: SECONDS times GPUOP_TEST_TIME_SCALE when that is a whole number.
scaled() {
    local scale=${GPUOP_TEST_TIME_SCALE:-1}
    case $scale in
    '' | *[!0-9]*) echo "$1" ;;
    *) echo $(($1 * scale)) ;;
    esac
}

# wait_for [-p PID] SECONDS WHAT COMMAND...: polls COMMAND (output discarded) until it succeeds;
# fails naming WHAT when the scaled SECONDS have passed, or at once when the process PID (what
# should bring it about) has ended.
wait_for() {
    local pid=''
    if [ "$1" = -p ]; then
        pid=$2
        shift 2
    fi
    local what=$2 secs
    secs=$(scaled "$1")
    shift 2
    _tl_poll "$secs" "$pid" "$@" && return 0
    [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && fail "process $pid ended while waiting for: $what"
    fail "timed out after ${secs}s waiting for: $what"
}

# poll [-p PID] SECONDS COMMAND...: polls COMMAND (output discarded) until it succeeds; returns 1
# when the scaled SECONDS have passed or the process PID has ended (the caller says what failed,
# with what it saw).
poll() {
    local pid='' secs
    if [ "$1" = -p ]; then
        pid=$2
        shift 2
    fi
    secs=$(scaled "$1")
    shift
    _tl_poll "$secs" "$pid" "$@"
}

# _tl_poll SECONDS PID COMMAND...: COMMAND 50 ms apart for the first second, 100 ms apart up to
# the third, 250 ms apart up to the tenth, 500 ms apart after (a quick event is seen quickly, a
# slow one costs few runs of a command such as kubectl: each costs about 0.1 s of CPU, which the
# tests running beside this one need), until it succeeds (0), SECONDS have passed or the process
# PID has ended (1).
_tl_poll() {
    # microseconds since the epoch: bash's EPOCHREALTIME without its decimal point
    local start=${EPOCHREALTIME/[.,]/} now pid=$2 nap=0.05
    local end=$((start + $1 * 1000000))
    shift 2
    # an empty command line would "succeed" at once: a caller's mistake, not a wait
    [ $# -gt 0 ] && [ -n "$1" ] || fail "wait_for/poll: no command to poll (SECONDS WHAT COMMAND...)"
    until "$@" >/dev/null 2>&1; do
        [ -z "$pid" ] || kill -0 "$pid" 2>/dev/null || return 1
        now=${EPOCHREALTIME/[.,]/}
        [ "$now" -lt $end ] || return 1
        if [ $((now - start)) -ge 10000000 ]; then
            nap=0.5
        elif [ $((now - start)) -ge 3000000 ]; then
            nap=0.25
        elif [ $((now - start)) -ge 1000000 ]; then
            nap=0.1
        fi
        sleep $nap
    done
}

# wait_log FILE TEXT [SECONDS]: until FILE holds TEXT (default 5 s).
wait_log() { wait_for "${3:-5}" "\"$2\" in $1" grep -qF -- "$2" "$1"; }

# wait_exit PID [SECONDS]: until the background process PID ends (default 5 s); RC is its exit
# status.
wait_exit() {
    wait_for "${2:-5}" "process $1 to end" ended "$1"
    RC=0
    wait "$1" || RC=$?
    _tl_forget "$1"
}
# _tl_forget PID: PID ended; out of pids, so that the cleanup signals no process that reuses it
_tl_forget() {
    local i
    for i in "${!pids[@]}"; do [ "${pids[i]}" != "$1" ] || unset 'pids[i]'; done
}
# ended PID: the process PID has ended.
ended() { ! kill -0 "$1" 2>/dev/null; }

bg() {
    local name=$1
    shift
    "$@" >"$T/$name.log" 2>&1 &
    LAST=$!
    pids+=("$LAST")
}

free_port() { /usr/bin/python3 "$S/scripts/free-port.py" "$@"; }

metrics_has() {
    # the page read whole: grep -q leaving a pipe early would cut curl's write and, under
    # pipefail, fail the pipeline
    local page
    page=$(curl -s "127.0.0.1:$1/metrics") && grep -q "$2" <<<"$page"
}

# start_kubesim [--api-ip IP] [KUBESIM FLAGS...]: build/kubesim with FLAGS (the cluster is a
# flag: --load "$S/sim/clusters/demo.yaml", --nodes N), logging to $T/kubesim.log. With
# --api-ip, it listens on IP (added to lo until the test ends: an address of its own that only
# the host and its simulated nodes reach). Returns once it answers; then KUBECONFIG
# ($T/kubeconfig, exported), KS_URL, KS_CA (the CA's PEM file under --tls, else empty), KS_PID
# and KS_ARGS (for restart_kubesim) are set.
start_kubesim() {
    local ip=''
    if [ "${1:-}" = --api-ip ]; then
        ip=$2
        shift 2
        ip addr add "$ip/32" dev lo 2>/dev/null || true # left by an earlier run: reused
        at_exit "ip addr del $ip/32 dev lo 2>/dev/null"
        set -- --listen "$ip:0" --allow-remote "$@"
    fi
    KS_API_IP=$ip
    KS_ARGS=(--kubeconfig-out "$T/kubeconfig" "$@")
    : >"$T/kubesim.log"
    _tl_kubesim
}

# restart_kubesim: kubesim again with start_kubesim's flags (the same --listen and --data-dir
# make it the same cluster), appending to $T/kubesim.log; returns once it answers.
restart_kubesim() { _tl_kubesim; }

_tl_kubesim() {
    local kc=$T/kubeconfig
    rm -f "$kc"
    "$B/kubesim" "${KS_ARGS[@]}" >>"$T/kubesim.log" 2>&1 &
    KS_PID=$!
    pids+=("$KS_PID")
    wait_for -p "$KS_PID" 10 "kubesim to write its kubeconfig" test -s "$kc"
    export KUBECONFIG=$kc
    KS_URL=$(sed -n 's/^    server: //p' "$kc" | head -n 1)
    [ -n "$KS_URL" ] || fail "no server in kubesim's kubeconfig"
    KS_CA=
    if [[ $KS_URL == https:* ]]; then
        KS_CA=$T/kubesim-ca.pem
        sed -n 's/^    certificate-authority-data: //p' "$kc" | base64 -d >"$KS_CA" ||
            fail "no CA in kubesim's kubeconfig"
    fi
    wait_for -p "$KS_PID" 10 "kubesim answering at $KS_URL" \
        curl -sf --max-time 2 ${KS_CA:+--cacert "$KS_CA"} -o /dev/null "$KS_URL/readyz"
}

# stop_kubesim: SIGTERM; kubesim must exit 0 within 5 s.
stop_kubesim() { _tl_stop kubesim KS_PID 5; }

# _tl_stop NAME PIDVAR SECONDS: SIGTERM to the process whose pid the variable PIDVAR holds; it
# must exit 0 within SECONDS (scaled); PIDVAR is emptied.
_tl_stop() {
    kill -TERM "${!2}" 2>/dev/null || true
    wait_exit "${!2}" "$3"
    printf -v "$2" ''
    [ $RC = 0 ] || fail "$1 exited $RC after SIGTERM"
}

# kill_kubesim: SIGKILL (an API server crash).
kill_kubesim() {
    kill -KILL "$KS_PID" 2>/dev/null || true
    wait "$KS_PID" 2>/dev/null || true
    _tl_forget "$KS_PID"
    KS_PID=
}

# start_kubelet_sim CLUSTER NODES [FLAGS...]: build/kubelet-sim with CLUSTER's nodes against
# kubesim ($KUBECONFIG), their roots under $T/roots, fast restarts and node status every second
# (FLAGS may say otherwise: the last of a flag wins; --bridge and --subnet give each test its own
# network), logging to $T/kubelet-sim.log (appended: a restart keeps the earlier lines); returns
# once NODES nodes are Ready; its pid in KL_PID. Needs need_tools (and root, but for --no-netns).
start_kubelet_sim() {
    local cluster=$1 n=$2
    shift 2
    "$B/kubelet-sim" --cluster "$cluster" --kubeconfig "$KUBECONFIG" --root-base "$T/roots" \
        --backoff-scale 0.01 --node-status-interval 1s "$@" >>"$T/kubelet-sim.log" 2>&1 &
    KL_PID=$!
    pids+=("$KL_PID")
    wait_for -p "$KL_PID" 60 "$n Ready nodes" _tl_ready_nodes "$n"
}
_tl_ready_nodes() { [ "$($KUBECTL --request-timeout=10s get nodes --no-headers 2>/dev/null | grep -c ' Ready ')" = "$1" ]; }

# stop_kubelet_sim: SIGTERM; kubelet-sim must exit 0 within 30 s (its nodes, namespaces and
# bridge gone).
stop_kubelet_sim() { _tl_stop kubelet-sim KL_PID 30; }

# operator_cluster DELAY [FLAGS...]: start_kubesim with the demo cluster and the operator's
# shipped RBAC (pods ready DELAY after they are made) and FLAGS, the CRDs applied; OPKC is a
# kubeconfig of the operator's ServiceAccount. Needs need_tools.
operator_cluster() {
    start_kubesim --load "$S/sim/clusters/demo.yaml" --pod-ready-delay "$1" \
        --load "$S/deploy/rbac/operator.yaml" "${@:2}"
    $K apply -f "$S/deploy/crds/" >/dev/null || fail "apply the CRDs"
    OPKC=$T/operator.kubeconfig
    sa_kubeconfig "$OPKC"
}

# sa_kubeconfig OUT [NS NAME]: KUBECONFIG (the admin's) with the token of a ServiceAccount
# (default the operator's shipped gpu-operator/gpu-operator, deploy/rbac/operator.yaml) from
# the TokenRequest API, for running a component under its own RBAC.
sa_kubeconfig() {
    local out=$1 ns=${2:-gpu-operator} sa=${3:-gpu-operator} tok
    tok=$("$KUBECTL" --request-timeout=10s create token "$sa" -n "$ns" --duration=24h) ||
        fail "no token for ServiceAccount $ns/$sa"
    sed "s|^    token: .*|    token: $tok|" "$KUBECONFIG" >"$out"
    grep -q "token: $tok" "$out" || fail "no token line in $KUBECONFIG"
}
