#!/usr/bin/env bash
# One signal contract for every long-running component on src/lib/svc, against the simulated NVML:
# SIGHUP never kills (feature discovery and the device plugin reload, the exporter and the
# operator log and ignore it); SIGTERM, SIGINT and SIGQUIT each end the process with exit 0
# within 2 s. The operator runs against kubesim ($GPUOP_BUILD_ROOT/kubesim; skipped without it).
# $1: build/gpuop  $2: the simulated libnvidia-ml.so.1  $3: a fleet file
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
gpuop=$1
lib=$2
fleet=$3
[ -f "$lib" ] || skip "no simulated libnvidia-ml.so.1 at $lib"
tmp=$T
pid=
at_exit '[ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null'
log_file "$tmp/log" # the component's, at a failure
ms() { echo $(($(date +%s%N) / 1000000)); }

export GPUOP_NVML_LIBRARY="$lib" GPUOP_SIM_FLEET="$fleet" GPUOP_SIM_STATE="$tmp/state"
mkdir -p "$tmp/state" "$tmp/dp"
unset CONFIG_FILE GFD_CONFIG_FILE KUBELET_SOCKET MIG_STRATEGY GFD_MIG_STRATEGY \
    DCGM_EXPORTER_LISTEN DCGM_EXPORTER_INTERVAL DCGM_EXPORTER_KUBERNETES

# start NAME READY_PATTERN ARGS...: runs `gpuop ARGS` in the background, logs to $tmp/log, waits
# (up to 10 s) until the log holds READY_PATTERN.
start() {
    name=$1 ready=$2
    shift 2
    # The previous run's log goes first: the shell truncates it only in the child, so the wait
    # below could match the old "ready" line and signal a process that has not set up yet.
    rm -f "$tmp/out" "$tmp/log"
    "$gpuop" "$@" >"$tmp/out" 2>"$tmp/log" &
    pid=$!
    wait_for -p "$pid" 10 "$name: ready (\"$ready\")" grep -q "$ready" "$tmp/log"
}

# stop NAME SIGNAL: sends SIGNAL, wants exit 0 within 2 s.
stop() {
    name=$1 sig=$2
    t0=$(ms)
    kill -"$sig" "$pid"
    poll 3 ended "$pid" || fail "$name: still running 3 s after SIG$sig"
    wait "$pid"
    rc=$?
    took=$(($(ms) - t0))
    pid=
    [ "$rc" = 0 ] || fail "$name: SIG$sig: exit $rc, want 0"
    [ "$took" -le 2000 ] || fail "$name: SIG$sig: took $took ms, want <= 2000"
    echo "ok: $name: SIG$sig: exit $rc in $took ms"
}

# hup NAME EXPECT: two SIGHUPs, still running, and the log holds EXPECT.
hup() {
    name=$1 expect=$2
    kill -HUP "$pid"
    sleep 0.3
    kill -HUP "$pid"
    sleep 0.3
    kill -0 "$pid" 2>/dev/null || fail "$name: died on SIGHUP"
    grep -q "$expect" "$tmp/log" || fail "$name: SIGHUP: the log lacks \"$expect\""
    echo "ok: $name: SIGHUP: still running"
}

gfd() {
    start feature-discovery "labels written" feature-discovery --sleep-interval 1h \
        --output "$tmp/labels"
}
dp() {
    start device-plugin "serving" device-plugin --kubelet-socket "$tmp/dp/kubelet.sock"
}
exporter() {
    start exporter "serving" exporter -a 127.0.0.1:0 -c 1s
}

operator() {
    start operator "caches synced" operator --kubeconfig "$KUBECONFIG" --metrics-listen "" \
        --leader-election-id signals --identity signals
}

components="gfd dp exporter"
if [ -x "$B/kubesim" ]; then
    start_kubesim --load "$S/deploy/crds/nvidia.com_clusterpolicies.yaml"
    components="$components operator"
else
    echo "SKIP: operator: no kubesim at $B/kubesim"
fi

for c in $components; do
    case $c in
    gfd) name=feature-discovery reload="SIGHUP: reloading the config" ;;
    dp) name=device-plugin reload="SIGHUP: reloading the config" ;;
    exporter) name=exporter reload="SIGHUP ignored" ;;
    operator) name=operator reload="SIGHUP ignored" ;;
    esac
    $c
    hup "$name" "$reload"
    stop "$name" TERM
    for sig in INT QUIT; do
        $c
        stop "$name" "$sig"
    done
done
# A kubelet that accepts and never answers (issue 18 item 5): registration waits on it, SIGTERM
# still ends the device plugin within 2 s.
if command -v python3 >/dev/null; then
    python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(64)
time.sleep(120)' "$tmp/dp/kubelet.sock" &
    hole=$!
    pids+=("$hole")
    wait_for 5 "the silent kubelet's socket" test -S "$tmp/dp/kubelet.sock"
    start device-plugin "serving" device-plugin --kubelet-socket "$tmp/dp/kubelet.sock"
    sleep 0.5 # inside the registration call now
    stop "device-plugin (black-holed kubelet)" TERM
    # The exporter's pod attribution against the same socket: the collections go on (the
    # PodResources call has a deadline) and SIGTERM ends it within 2 s.
    t0=$(ms)
    start exporter "serving" exporter -a 127.0.0.1:0 -c 1s -k \
        --pod-resources-socket "$tmp/dp/kubelet.sock"
    took=$(($(ms) - t0))
    [ "$took" -le 3000 ] || fail "exporter: the first collection took $took ms with a silent kubelet"
    sleep 1.5 # a collection in progress
    stop "exporter (black-holed PodResources)" TERM
    kill "$hole" 2>/dev/null
    wait "$hole" 2>/dev/null
fi
# kubesim (build/kubesim, on svc too): SIGHUP logged and ignored; TERM, INT, QUIT exit 0.
kubesim=${GPUOP_BUILD_ROOT:-}/kubesim
if [ -x "$kubesim" ]; then
    saved=$gpuop gpuop=$kubesim
    start kubesim "serving" --nodes 2
    hup kubesim "SIGHUP ignored"
    stop kubesim TERM
    for sig in INT QUIT; do
        start kubesim "serving" --nodes 2
        stop kubesim "$sig"
    done
    gpuop=$saved
else
    echo "note: no kubesim at $kubesim: its signals not checked"
fi
[ ! -e "$tmp/labels" ] || fail "feature-discovery: the labels outlived the process"
echo "all ok"
