#!/usr/bin/env bash
# Driver upgrade at scale: N driver nodes in kubesim (default 1000) with simulated readiness
# (driver pods Running and Ready 1 s after they are made). The ClusterPolicy converges (every
# node upgrade-done), then the driver version changes and the operator rolls it through every
# node, maxUnavailable 10%. Measures the rollout's wall time, the planner's time per pass, the
# operator's API write calls per node upgraded (target: at most 12; Events and the Lease
# excluded, as Kubernetes' own event recorder batches them), the most nodes cordoned at once
# (sampled) and the operator's resident memory (target: under 64 MiB). Prints a Markdown section
# for bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NODES:-1000}
B=${BUILD:-build}
./scripts/tools.sh "$B/tools"
BUILD=$B . scripts/tools-env.sh
T=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
now() { date +%s.%N; }

"$B/kubesim" --nodes "$N" --node-template bench/operator/node-template.yaml \
    --kubeconfig-out "$T/kc" --pod-ready-delay 1s >"$T/kubesim.log" 2>&1 &
pids+=($!)
KS_PID=$!
for _ in $(seq 100); do [ -s "$T/kc" ] && break; sleep 0.1; done
export KUBECONFIG=$T/kc
SERVER=$(grep -m1 'server:' "$T/kc" | awk '{print $2}')
until kubectl get ns >/dev/null 2>&1; do sleep 0.2; done
printf "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: gpu-operator\n" | kubectl apply -f - >/dev/null
kubectl apply -f deploy/crds/ >/dev/null
MPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$B/gpuop" operator --kubeconfig "$T/kc" --namespace gpu-operator \
    --metrics-listen "127.0.0.1:$MPORT" --kube-qps 2000 --kube-burst 4000 >"$T/op.log" 2>&1 &
pids+=($!)
OP_PID=$!
until grep -q "became leader" "$T/op.log" 2>/dev/null; do sleep 0.1; done

writes() { # the operator's write calls, Events and the Lease excluded
    curl -s "$SERVER/metrics" | awk '/^kubesim_requests_total/ && /verb="(create|update|patch|delete)"/ && !/resource="(leases|events)"/ {s+=$NF} END {print s+0}'
}
write_lines() { # "verb resource code count" for every write call, Events and the Lease excluded
    curl -s "$SERVER/metrics" | awk '/^kubesim_requests_total/ && /verb="(create|update|patch|delete)"/ && !/resource="(leases|events)"/ {
        match($0, /verb="[^"]*"/); v = substr($0, RSTART + 6, RLENGTH - 7)
        match($0, /resource="[^"]*"/); r = substr($0, RSTART + 10, RLENGTH - 11)
        match($0, /code="[^"]*"/); c = substr($0, RSTART + 6, RLENGTH - 7)
        print v, r, c, $NF}'
}
metric() { curl -s "127.0.0.1:$MPORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
count_state() { kubectl get nodes -l "nvidia.com/gpu-driver-upgrade-state=$1" -o name 2>/dev/null | wc -l; }

kubectl apply -f deploy/samples/clusterpolicy.yaml >/dev/null
CP=$(kubectl get clusterpolicy -o jsonpath='{.items[0].metadata.name}')
kubectl patch clusterpolicy "$CP" --type merge -p \
    '{"spec":{"driver":{"upgradePolicy":{"autoUpgrade":true,"maxParallelUpgrades":0,"maxUnavailable":"10%"}}}}' >/dev/null
until [ "$(count_state upgrade-done)" -ge "$N" ]; do sleep 1; done
until [ "$(kubectl get clusterpolicy -o jsonpath='{.items[0].status.state}' 2>/dev/null)" = ready ]; do sleep 0.5; done
sleep 2
w0=$(writes)
write_lines >"$T/w0"
conflicts0=$(metric gpuop_driver_upgrade_node_conflicts_total)
passes0=$(metric gpuop_driver_upgrade_passes_total)
(
    max=0
    while :; do
        c=$(kubectl get nodes -o jsonpath='{range .items[*]}{.spec.unschedulable}{"\n"}{end}' 2>/dev/null | grep -c true || true)
        [ "$c" -gt "$max" ] && max=$c && echo "$max" >"$T/max"
        sleep 0.5
    done
) &
pids+=($!)
echo 0 >"$T/max"
t0=$(now)
OLD_REV=$(kubectl -n gpu-operator get pods -l app=nvidia-driver-daemonset -o jsonpath='{.items[0].metadata.labels.controller-revision-hash}')
kubectl patch clusterpolicy "$CP" --type merge -p '{"spec":{"driver":{"version":"595.100.01"}}}' >/dev/null
NEW_REV=$OLD_REV
while [ "$NEW_REV" = "$OLD_REV" ]; do
    sleep 0.2
    NEW_REV=$(kubectl -n gpu-operator get controllerrevisions -l app=nvidia-driver-daemonset \
        -o jsonpath='{range .items[*]}{.revision} {.metadata.labels.controller-revision-hash}{"\n"}{end}' | sort -n | tail -1 | cut -d' ' -f2)
done
new_pods() { kubectl -n gpu-operator get pods -l "app=nvidia-driver-daemonset,controller-revision-hash=$NEW_REV" -o name 2>/dev/null | wc -l; }
until [ "$(new_pods)" -ge "$N" ] && [ "$(count_state upgrade-done)" -ge "$N" ] &&
    [ -z "$(kubectl get nodes -o jsonpath='{range .items[*]}{.spec.unschedulable}{end}' | grep true || true)" ]; do
    sleep 1
done
t1=$(now)
sleep 2
w1=$(writes)
write_lines >"$T/w1"
conflicts1=$(metric gpuop_driver_upgrade_node_conflicts_total)
# per verb, resource and code: the rollout's share, per node upgraded
breakdown=$(awk -v n="$N" 'NR == FNR {a[$1" "$2" "$3] = $4; next}
    {d = $4 - a[$1" "$2" "$3]; if (d > 0) printf "%s%s %s %s: %.2f", (k++ ? ", " : ""), $1, $2, $3, d / n}' \
    "$T/w0" "$T/w1")
passes1=$(metric gpuop_driver_upgrade_passes_total)
revs=$(kubectl -n gpu-operator get pods -l app=nvidia-driver-daemonset -o jsonpath='{range .items[*]}{.metadata.labels.controller-revision-hash}{"\n"}{end}' | sort -u | wc -l)
plan_max=$(metric gpuop_driver_upgrade_plan_seconds_max)
plan_last=$(metric gpuop_driver_upgrade_plan_seconds)
cpu_max=$(metric gpuop_driver_upgrade_plan_cpu_seconds_max)
cpu_last=$(metric gpuop_driver_upgrade_plan_cpu_seconds)
rss=$(awk '/VmRSS/ {print $2}' /proc/$OP_PID/status)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$OP_PID/status)
cpu_op=$(awk '{printf "%.1f", ($14+$15)/100}' /proc/$OP_PID/stat)
elapsed=$(echo "$t1 - $t0" | bc)
per_node=$(echo "scale=2; ($w1 - $w0) / $N" | bc)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
cat <<MD
### Driver upgrade: $N driver nodes in kubesim ($(date -u +%Y-%m-%d), $(nproc) cores, $cpu)

| measure | value | target |
|---|---|---|
| driver version changed → every node upgrade-done on the new revision, none cordoned | ${elapsed} s | |
| driver pod revisions at the end | $revs | 1 |
| most nodes cordoned at once (sampled every 0.5 s; maxUnavailable 10%) | $(cat "$T/max") | ≤ $(( (N + 9) / 10 )) |
| planning passes during the rollout | $((passes1 - passes0)) | |
| planner wall time per pass: last / longest since start | ${plan_last} s / ${plan_max} s | |
| planner CPU time per pass: last / most since start | ${cpu_last} s / ${cpu_max} s | |
| operator write calls during the rollout (Events, Lease excluded) | $((w1 - w0)) | |
| write calls per node upgraded | $per_node | ≤ 12 |
| of which, per node (verb resource code) | $breakdown | |
| node patches refused with 409 (planned from an older node) | $(( ${conflicts1:-0} - ${conflicts0:-0} )) | |
| operator RSS after the rollout / peak | $((rss / 1024)) MiB / $((hwm / 1024)) MiB | < 64 MiB |
| operator CPU time (whole run) | ${cpu_op} s | |

Rerun: \`NODES=$N bench/upgrade/run.sh\` (needs \`make\` first).
MD
