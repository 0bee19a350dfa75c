#!/bin/sh
# One signal contract for every long-running component on src/lib/svc, against the simulated NVML:
# SIGHUP never kills (feature discovery and the device plugin reload, the exporter and the
# operator log and ignore it); SIGTERM, SIGINT and SIGQUIT each end the process with exit 0
# within 2 s. The operator runs against kubesim ($GPUOP_BUILD_ROOT/kubesim; skipped without it).
# $1: build/gpuop  $2: the simulated libnvidia-ml.so.1  $3: a fleet file
set -u
gpuop=$1
lib=$2
fleet=$3
[ -f "$lib" ] || { echo "SKIP: no simulated libnvidia-ml.so.1 at $lib"; exit 77; }
tmp=$(mktemp -d)
pid=
kubesim_pid=
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
    [ -n "$kubesim_pid" ] && kill -KILL "$kubesim_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() {
    echo "FAIL: $*" >&2
    [ -f "$tmp/log" ] && sed 's/^/    /' "$tmp/log" | tail -15 >&2
    failures=$((failures + 1))
}
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
    i=0
    while ! grep -q "$ready" "$tmp/log" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null || [ $i -ge 100 ]; then
            fail "$name: not ready (\"$ready\")"
            kill -KILL "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            pid=
            return 1
        fi
        sleep 0.1
        i=$((i + 1))
    done
    return 0
}

# stop NAME SIGNAL: sends SIGNAL, wants exit 0 within 2 s.
stop() {
    name=$1 sig=$2
    t0=$(ms)
    kill -"$sig" "$pid"
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
        sleep 0.05
        i=$((i + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        fail "$name: still running 2.5 s after SIG$sig"
        kill -KILL "$pid"
    fi
    wait "$pid"
    rc=$?
    took=$(($(ms) - t0))
    pid=
    before=$failures
    [ "$rc" = 0 ] || fail "$name: SIG$sig: exit $rc, want 0"
    [ "$took" -le 2000 ] || fail "$name: SIG$sig: took $took ms, want <= 2000"
    [ "$failures" != "$before" ] || echo "ok: $name: SIG$sig: exit $rc in $took ms"
}

# hup NAME EXPECT: two SIGHUPs, still running, and the log holds EXPECT.
hup() {
    name=$1 expect=$2
    kill -HUP "$pid"
    sleep 0.3
    kill -HUP "$pid"
    sleep 0.3
    kill -0 "$pid" 2>/dev/null || { fail "$name: died on SIGHUP"; pid=; return 1; }
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
    start operator "caches synced" operator --kubeconfig "$tmp/kubeconfig" --metrics-listen "" \
        --leader-election-id signals --identity signals
}

components="gfd dp exporter"
ks=${GPUOP_BUILD_ROOT:-}/kubesim
if [ -x "$ks" ]; then
    "$ks" --load "${GPUOP_SOURCE_ROOT:-.}/deploy/crds/nvidia.com_clusterpolicies.yaml" \
        --kubeconfig-out "$tmp/kubeconfig" >"$tmp/kubesim.log" 2>&1 &
    kubesim_pid=$!
    i=0
    while [ ! -s "$tmp/kubeconfig" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    components="$components operator"
else
    echo "SKIP: operator: no kubesim at $ks"
fi

for c in $components; do
    case $c in
    gfd) name=feature-discovery reload="SIGHUP: reloading the config" ;;
    dp) name=device-plugin reload="SIGHUP: reloading the config" ;;
    exporter) name=exporter reload="SIGHUP ignored" ;;
    operator) name=operator reload="SIGHUP ignored" ;;
    esac
    if $c; then
        hup "$name" "$reload" && stop "$name" TERM
    fi
    for sig in INT QUIT; do
        if $c; then stop "$name" "$sig"; fi
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
    i=0
    while [ ! -S "$tmp/dp/kubelet.sock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    if start device-plugin "serving" device-plugin --kubelet-socket "$tmp/dp/kubelet.sock"; then
        sleep 0.5 # inside the registration call now
        stop "device-plugin (black-holed kubelet)" TERM
    fi
    # The exporter's pod attribution against the same socket: the collections go on (the
    # PodResources call has a deadline) and SIGTERM ends it within 2 s.
    t0=$(ms)
    if start exporter "serving" exporter -a 127.0.0.1:0 -c 1s -k \
        --pod-resources-socket "$tmp/dp/kubelet.sock"; then
        took=$(($(ms) - t0))
        [ "$took" -le 3000 ] || fail "exporter: the first collection took $took ms with a silent kubelet"
        sleep 1.5 # a collection in progress
        stop "exporter (black-holed PodResources)" TERM
    fi
    kill "$hole" 2>/dev/null
    wait "$hole" 2>/dev/null
fi
# kubesim (build/kubesim, on svc too): SIGHUP logged and ignored; TERM, INT, QUIT exit 0.
kubesim=${GPUOP_BUILD_ROOT:-}/kubesim
if [ -x "$kubesim" ]; then
    saved=$gpuop gpuop=$kubesim
    if start kubesim "serving" --nodes 2; then
        hup kubesim "SIGHUP ignored" && stop kubesim TERM
    fi
    for sig in INT QUIT; do
        if start kubesim "serving" --nodes 2; then stop kubesim "$sig"; fi
    done
    gpuop=$saved
else
    echo "note: no kubesim at $kubesim: its signals not checked"
fi
[ ! -e "$tmp/labels" ] || fail "feature-discovery: the labels outlived the process"
[ "$failures" = 0 ] || exit 1
echo "all ok"
