#!/usr/bin/env bash
# Operator at scale: a fresh install on N GPU nodes in kubesim (default 1000; the issue's sizes
# are 100, 1000 and 10000), node objects at real size (bench/operator/node-template.yaml: ~20 KB
# of JSON with status.images and managedFields), gpuop's sample ClusterPolicy with
# driver.upgradePolicy.autoUpgrade on (the upgrade controller records every node's state).
# Measures, each against its target:
#   - ClusterPolicy created -> the last operand pod ready (every DaemonSet reports all its pods
#     ready) -> status.state ready (target: ready within 1.5 s of the last pod);
#   - the API writes by verb and resource until ready and in the 60 s after (target: one node
#     patch per node plus the operand objects and status writes; 0 after);
#   - the Events posted (target: a handful, not one per node);
#   - the operator's peak RSS (targets: 1,000 nodes < 30 MiB, 10,000 < 64 MiB);
#   - kubesim's own CPU time and peak RSS, and how often the operator lost its leadership (a
#     Lease renewal answered too late: the API server, not the operator, was the bottleneck).
# HEAPTRACK=1 runs the operator under heaptrack instead and prints where its heap peak lives
# (by allocation site, and by informer), not the timings. Prints a Markdown section for
# bench/RESULTS.md. SMAPS=1 also prints, on stderr, the operator's resident memory by kind once ready
# (anonymous: its heap and stacks; file-backed: the binary and libraries). PRELOAD=LIB runs the
# operator with LD_PRELOAD=LIB (another allocator: libjemalloc.so.2, libmimalloc.so.2).
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NODES:-1000}
B=${BUILD:-build}
QPS=${QPS:-2000}
BURST=${BURST:-4000}
IDLE=${IDLE:-60}
TEMPLATE=${TEMPLATE:-bench/operator/node-template.yaml}
# The pinned kubectl (scripts/tools.sh), first on PATH.
./scripts/tools.sh "$B/tools"
BUILD=$B . scripts/tools-env.sh
T=$(mktemp -d)
pids=()
# KEEP_LOGS=DIR: the operator's and kubesim's logs are copied there at the end.
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -z "${KEEP_LOGS:-}" ] || { mkdir -p "$KEEP_LOGS"; cp "$T"/*.log "$KEEP_LOGS/" 2>/dev/null || true; }
    rm -rf "$T"
}
trap cleanup EXIT
now() { date +%s.%N; }

"$B/kubesim" --nodes "$N" --node-template "$TEMPLATE" \
    --kubeconfig-out "$T/kc" --pod-ready-delay 1s >"$T/kubesim.log" 2>&1 &
pids+=($!)
KS_PID=$!
for _ in $(seq 600); do [ -s "$T/kc" ] && break; sleep 0.1; done
export KUBECONFIG=$T/kc
SERVER=$(grep -m1 'server:' "$T/kc" | awk '{print $2}')
until kubectl get ns >/dev/null 2>&1; do sleep 0.2; done
printf "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: gpu-operator\n" | kubectl apply -f - >/dev/null
kubectl apply -f deploy/crds/ >/dev/null

wrap=()
[ -z "${PRELOAD:-}" ] || wrap=(env "LD_PRELOAD=$PRELOAD")
if [ "${HEAPTRACK:-0}" = 1 ]; then
    command -v heaptrack >/dev/null || { echo "HEAPTRACK=1: heaptrack is not installed" >&2; exit 1; }
    wrap=(heaptrack -o "$T/heap")
fi
"${wrap[@]}" "$B/gpuop" operator --kubeconfig "$T/kc" --namespace gpu-operator \
    --metrics-listen 127.0.0.1:0 --kube-qps "$QPS" --kube-burst "$BURST" >"$T/op.log" 2>&1 &
pids+=($!)
OP_PID=$!
until grep -q "became leader" "$T/op.log" 2>/dev/null; do sleep 0.1; done
[ "${HEAPTRACK:-0}" = 1 ] && OP_PID=$(pgrep -P "$OP_PID" -n || echo "$OP_PID")

# Every request kubesim served, "verb resource code count" (the script's own kubectl calls are
# reads; every write is the operator's, but for the ClusterPolicy the script creates).
requests() {
    curl -s "$SERVER/metrics" | awk '/^kubesim_requests_total/ {
        match($0, /verb="[^"]*"/); v = substr($0, RSTART + 6, RLENGTH - 7)
        match($0, /resource="[^"]*"/); r = substr($0, RSTART + 10, RLENGTH - 11)
        match($0, /code="[^"]*"/); c = substr($0, RSTART + 6, RLENGTH - 7)
        print v, r, c, $NF}'
}
# The write calls between two snapshots, "verb resource: count" per line (codes summed; the
# Lease's renewals left out).
writes_between() {
    awk 'NR == FNR {a[$1" "$2" "$3] = $4; next}
        $1 ~ /^(create|update|patch|delete|deletecollection)$/ && $2 != "leases" {
            d = $4 - a[$1" "$2" "$3]; if (d > 0) w[$1" "$2] += d }
        END {for (k in w) print k": "w[k]}' "$1" "$2" | sort
}
sum_of() { awk -F': ' '{s += $2} END {print s + 0}' "$1"; }
count_of() { awk -F': ' -v k="$2" '$1 == k {s += $2} END {print s + 0}' "$1"; }
ds_state() { # "ready/desired" per DaemonSet
    kubectl -n gpu-operator get ds -o jsonpath='{range .items[*]}{.status.numberReady}/{.status.desiredNumberScheduled} {end}' 2>/dev/null
}
all_pods_ready() { # 7 DaemonSets, each with every node's pod ready
    local s n=0
    for s in $(ds_state); do
        [ "${s%/*}" = "${s#*/}" ] && [ "${s#*/}" -ge "$N" ] || return 1
        n=$((n + 1))
    done
    [ "$n" -ge 7 ]
}
policy_state() { kubectl get clusterpolicy -o jsonpath='{.items[0].status.state}' 2>/dev/null; }

requests >"$T/r0"
t0=$(now)
sed 's/^  driver:$/  driver:\n    upgradePolicy: {autoUpgrade: true, maxParallelUpgrades: 1, maxUnavailable: "25%"}/' \
    deploy/samples/clusterpolicy.yaml | kubectl apply -f - >/dev/null
t_pods= t_ready=
while [ -z "$t_ready" ]; do
    if [ -z "$t_pods" ] && all_pods_ready; then t_pods=$(now); fi
    if [ "$(policy_state)" = ready ]; then
        t_ready=$(now)
        [ -n "$t_pods" ] || t_pods=$t_ready # the operator saw them first
    fi
    sleep 0.2
done
requests >"$T/r1"
sleep "$IDLE"
requests >"$T/r2"
writes_between "$T/r0" "$T/r1" >"$T/w_ready"
writes_between "$T/r1" "$T/r2" >"$T/w_idle"
events=$(($(count_of "$T/w_ready" "create events") + $(count_of "$T/w_ready" "patch events") +
    $(count_of "$T/w_idle" "create events") + $(count_of "$T/w_idle" "patch events")))
patches=$(count_of "$T/w_ready" "patch nodes")
objects=$(($(sum_of "$T/w_ready") - patches - $(count_of "$T/w_ready" "create events") -
    $(count_of "$T/w_ready" "patch events") - $(count_of "$T/w_ready" "update clusterpolicies/status") -
    $(count_of "$T/w_ready" "create clusterpolicies")))
line() { paste -sd, "$1" | sed 's/,/, /g'; }
hwm=$(awk '/VmHWM/ {print $2}' /proc/$OP_PID/status)
[ -z "${SMAPS:-}" ] || { grep -E "^(Rss|Anonymous|Shared_Clean|Private_Clean|Private_Dirty)" /proc/$OP_PID/smaps_rollup; grep Threads /proc/$OP_PID/status; } >&2
rss=$(awk '/VmRSS/ {print $2}' /proc/$OP_PID/status)
cpu_op=$(awk '{printf "%.1f", ($14+$15)/100}' /proc/$OP_PID/stat)
cpu_ks=$(awk '{printf "%.1f", ($14+$15)/100}' /proc/$KS_PID/stat)
hwm_ks=$(awk '/VmHWM/ {print $2}' /proc/$KS_PID/status)
losses=$(grep -c "lost leadership" "$T/op.log" || true)
pods_s=$(printf "%.1f" "$(echo "$t_pods - $t0" | bc)")
ready_s=$(printf "%.1f" "$(echo "$t_ready - $t0" | bc)")
lag_s=$(printf "%.1f" "$(echo "$t_ready - $t_pods" | bc)")
cpu=$(lscpu | awk -F: '/Model name/ {sub(/^ +/, "", $2); print $2; exit}')
target_mib=$([ "$N" -le 1000 ] && echo 30 || echo 64)

if [ "${HEAPTRACK:-0}" = 1 ]; then
    # SIGKILL: what is still allocated when it dies is what the operator holds once ready
    kill -9 "$OP_PID" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "${pids[1]}" 2>/dev/null || break; sleep 0.2; done
    f=$(ls "$T"/heap* | head -1)
    echo "### Operator heap: $N nodes, by part (heaptrack; $(date -u +%Y-%m-%d); $cpu)"
    echo
    echo "Peak RSS under heaptrack: $((hwm / 1024)) MiB. At the heap's peak:"
    echo
    heaptrack_print -f "$f" --flamegraph-cost-type peak -F "$T/peak.txt" >/dev/null 2>&1
    bench/operator/heap-breakdown.py "$T/peak.txt"
    echo
    echo "Held once ready (${IDLE} s after; per node: divide by $N):"
    echo
    heaptrack_print -f "$f" --flamegraph-cost-type leaked -F "$T/held.txt" >/dev/null 2>&1
    bench/operator/heap-breakdown.py "$T/held.txt"
    [ -z "${HEAP_STACKS:-}" ] || cp "$T/peak.txt" "$T/held.txt" "$HEAP_STACKS/"
    exit 0
fi

cat <<MD
### Operator: fresh install on $N GPU nodes in kubesim ($(date -u +%Y-%m-%d); $cpu, $(nproc) cores shared with other work)

| measure | value | target |
|---|---|---|
| ClusterPolicy created → last operand pod ready (7 DaemonSets, $((N * 7)) pods, each ready 1 s after it is made) | ${pods_s} s | |
| ClusterPolicy created → status.state ready | ${ready_s} s | |
| last operand pod ready → status.state ready | ${lag_s} s | ≤ 1.5 s |
| node patches until ready | $patches | ≤ $N (one per node) |
| operand objects written until ready | $objects | the rendered objects |
| all writes until ready, by verb and resource | $(line "$T/w_ready") | |
| writes in the ${IDLE} s after ready | $(sum_of "$T/w_idle")$([ -s "$T/w_idle" ] && echo " ($(line "$T/w_idle"))") | 0 |
| Events posted (created or counted up), until ready and after | $events | a handful |
| operator RSS at the end / peak | $((rss / 1024)) MiB / $((hwm / 1024)) MiB | < $target_mib MiB |
| CPU time: operator / kubesim (its DaemonSet controller runs $((N * 7)) pods) | ${cpu_op} s / ${cpu_ks} s | |
| kubesim RSS peak | $((hwm_ks / 1024)) MiB | |
| the operator's leadership lost (Lease renewals late) | $losses | 0 |

Rerun: \`NODES=$N bench/operator/run.sh\` (needs \`make\` first; operator at --kube-qps $QPS --kube-burst $BURST).
MD
