# SPDX-License-Identifier: Apache-2.0
# The exporter's shell tests (sourced after setting $gpuop): the test library
# (tests/lib/test-lib.sh) and start_exporter, stop_exporter, scrape, metric_value.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/test-lib.sh"
exporter_pid=

# start_exporter ARGS...: runs `gpuop exporter -a 127.0.0.1:0 ARGS` in the background, its log
# in $T/exporter.log, and sets $port once it serves.
start_exporter() {
    rm -f "$T/exporter.out" "$T/exporter.log" # a stale "serving" line would give an old port
    "$gpuop" exporter -a 127.0.0.1:0 "$@" >"$T/exporter.out" 2>"$T/exporter.log" &
    exporter_pid=$!
    pids+=("$exporter_pid")
    port=
    wait_for -p "$exporter_pid" 5 "the exporter serving" _exporter_port
}
_exporter_port() {
    port=$(sed -n 's/.* serving .*port=\([0-9]*\).*/\1/p' "$T/exporter.log" | head -1)
    [ -n "$port" ]
}

# stop_exporter: SIGTERM; the exporter must exit 0.
stop_exporter() {
    kill -TERM "$exporter_pid" || fail "exporter already gone"
    wait_exit "$exporter_pid" 10
    exporter_pid=
    [ $RC = 0 ] || fail "exporter exit $RC after SIGTERM"
}

scrape() { curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" "$@"; }

# metric_value NAME LABEL_SUBSTRING FILE: the value of the first sample matching both.
metric_value() {
    grep "^$1{" "$3" | grep -F "$2" | head -1 | awk '{print $NF}'
}
