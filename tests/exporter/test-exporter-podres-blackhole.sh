#!/bin/bash
# A kubelet that accepts the PodResources connection and never answers delays pod attribution
# only: with --kubernetes against such a socket, an XID injected into the simulated DGX H100
# shows in /metrics within two collection intervals, scrapes keep answering, and SIGTERM still
# exits promptly.
# $1: build/gpuop  $2: simulated libnvidia-ml.so.1  $3: sim/fleets/dgx-h100.yaml
set -u
gpuop=$1
. "$(dirname "$0")/lib.sh"
[ -f "$2" ] || skip "simulated libnvidia-ml not built: $2"
[ -f "$3" ] || fail "fleet missing: $3"
command -v python3 >/dev/null || skip "python3 not installed"
export GPUOP_NVML_LIBRARY=$2 GPUOP_SIM_FLEET=$3 GPUOP_SIM_STATE=$T/state
mkdir -p "$GPUOP_SIM_STATE"
sock=$T/kubelet.sock

# The black hole: accepts every connection, reads and drops what comes, never writes.
python3 - "$sock" >"$T/hole.log" 2>&1 <<'PY' &
import selectors, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(64); s.setblocking(False)
sel = selectors.DefaultSelector(); sel.register(s, selectors.EVENT_READ)
print("ready", flush=True)
held = []
while True:
    for key, _ in sel.select():
        if key.fileobj is s:
            c, _ = s.accept(); c.setblocking(False); held.append(c)
            sel.register(c, selectors.EVENT_READ)
            print("accepted", flush=True)
        else:
            try:
                if not key.fileobj.recv(65536):
                    sel.unregister(key.fileobj)
            except OSError:
                sel.unregister(key.fileobj)
PY
pids+=($!)
poll 10 grep -q ready "$T/hole.log" || fail "black hole did not start: $(cat "$T/hole.log")"

interval_ms=1000
start_exporter -k --pod-resources-socket "$sock" -c "${interval_ms}ms"
poll 10 scrape || fail "no first scrape"
poll 10 grep -q accepted "$T/hole.log" || fail "the exporter never connected to the socket"
scrape -o "$T/m0" || fail "scrape"
[ "$(grep -c '^DCGM_FI_DEV_XID_ERRORS{.*} 0$' "$T/m0")" = 8 ] || fail "want XID 0 on all GPUs at start"

"$gpuop-sim" inject xid --gpu 3 --code 79 || fail "inject xid"
t0=$(date +%s%N)
seen=
while [ $(( ($(date +%s%N) - t0) / 1000000 )) -lt $((4 * interval_ms)) ]; do
    if scrape -o "$T/m" && grep -Eq '^DCGM_FI_DEV_XID_ERRORS\{gpu="3",.*\} 79$' "$T/m"; then
        seen=$(( ($(date +%s%N) - t0) / 1000000 ))
        break
    fi
    sleep 0.05
done
[ -n "$seen" ] || fail "XID 79 not on GPU 3 within $((4 * interval_ms)) ms"
echo "XID visible after ${seen} ms (collection interval ${interval_ms} ms)"
[ "$seen" -le $((2 * interval_ms)) ] ||
    fail "XID took ${seen} ms, more than two collection intervals ($((2 * interval_ms)) ms)"
grep -q '^gpuop_exporter_pod_resources_up 0$' "$T/m" || fail "pod_resources_up not 0"
# scrapes stay fast while the kubelet hangs
for _ in $(seq 1 10); do
    s0=$(date +%s%N)
    scrape -o /dev/null || fail "scrape"
    ms=$(( ($(date +%s%N) - s0) / 1000000 ))
    [ "$ms" -lt 500 ] || fail "a scrape took ${ms} ms"
done
t0=$(date +%s%N)
stop_exporter
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -lt 2000 ] || fail "SIGTERM took ${ms} ms"
echo PASS
