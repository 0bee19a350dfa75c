# SPDX-License-Identifier: Apache-2.0
# Shared helpers for the exporter's shell tests. Source after setting $gpuop.
tmp=$(mktemp -d)
exporter_pid=
cleanup() {
    if [ -n "$exporter_pid" ]; then kill "$exporter_pid" 2>/dev/null; wait "$exporter_pid" 2>/dev/null; fi
    for p in $extra_pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
extra_pids=
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$tmp/exporter.err" ] && { echo "--- exporter log:" >&2; tail -20 "$tmp/exporter.err" >&2; }; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }

# start_exporter ARGS...: runs `gpuop exporter -a 127.0.0.1:0 ARGS` in the background and sets
# $port once it serves.
start_exporter() {
    rm -f "$tmp/exporter.out" "$tmp/exporter.err" # a stale "serving" line would give an old port
    "$gpuop" exporter -a 127.0.0.1:0 "$@" >"$tmp/exporter.out" 2>"$tmp/exporter.err" &
    exporter_pid=$!
    port=
    for _ in $(seq 1 100); do
        port=$(sed -n 's/.* serving .*port=\([0-9]*\).*/\1/p' "$tmp/exporter.err" | head -1)
        [ -n "$port" ] && return 0
        kill -0 "$exporter_pid" 2>/dev/null || fail "exporter exited: $(cat "$tmp/exporter.err")"
        sleep 0.05
    done
    fail "exporter did not start serving"
}

stop_exporter() {
    kill -TERM "$exporter_pid" || fail "exporter already gone"
    wait "$exporter_pid"
    rc=$?
    exporter_pid=
    [ $rc = 0 ] || fail "exporter exit $rc after SIGTERM"
}

scrape() { curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" "$@"; }

# wait_for CMD...: retries a command for up to 10 s.
wait_for() {
    for _ in $(seq 1 200); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    return 1
}

# metric_value NAME LABEL_SUBSTRING FILE: the value of the first sample matching both.
metric_value() {
    grep "^$1{" "$3" | grep -F "$2" | head -1 | awk '{print $NF}'
}
