#!/usr/bin/env bash
# Operator at scale: N GPU nodes in kubesim (default 2000). Measures the time from ClusterPolicy
# creation to every node labelled and every DaemonSet created, the API write calls by kind (target:
# one label write per node, no redundant writes), writes after convergence (target 0), and the
# operator's resident memory. Prints a Markdown section for bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NODES:-2000}
B=${BUILD:-build}
# The pinned kubectl (scripts/tools.sh), first on PATH.
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

"$B/gpuop" operator --kubeconfig "$T/kc" --namespace gpu-operator --metrics-listen 127.0.0.1:0 \
    --kube-qps 2000 --kube-burst 4000 >"$T/op.log" 2>&1 &
pids+=($!)
OP_PID=$!
until grep -q "became leader" "$T/op.log" 2>/dev/null; do sleep 0.1; done

metric_writes() { # verb resource -> count
    curl -s "$SERVER/metrics" | awk -v v="$1" -v r="$2" '/^kubesim_requests_total/ && $0 ~ "verb=\""v"\"" && $0 ~ "resource=\""r"\"" {s+=$NF} END {print s+0}'
}
all_writes() {
    curl -s "$SERVER/metrics" | awk '/^kubesim_requests_total/ && /verb="(create|update|patch|delete)"/ && !/resource="(leases|events|pods|controllerrevisions)"/ {s+=$NF} END {print s+0}'
}
write_lines() { # the counted write series, for telling which writes happened late
    curl -s "$SERVER/metrics" | awk '/^kubesim_requests_total/ && /verb="(create|update|patch|delete)"/ && !/resource="(leases|events|pods|controllerrevisions)"/'
}
w0=$(all_writes)
t0=$(now)
kubectl apply -f deploy/samples/clusterpolicy.yaml >/dev/null
while :; do
    labelled=$(kubectl get nodes -l nvidia.com/gpu.deploy.operator-validator=true -o name 2>/dev/null | wc -l)
    ds=$(kubectl -n gpu-operator get ds -o name 2>/dev/null | wc -l)
    [ "$labelled" -ge "$N" ] && [ "$ds" -ge 7 ] && break
    sleep 0.5
done
t1=$(now)
# Converged: kubesim's DaemonSet controller has run the pods and the operator reported ready.
until [ "$(kubectl get clusterpolicy -o jsonpath='{.items[0].status.state}' 2>/dev/null)" = ready ]; do sleep 0.5; done
t2=$(now)
sleep 1
w1=$(all_writes)
write_lines >"$T/w1"
node_patches=$(metric_writes patch nodes)
sleep 5
w2=$(all_writes)
write_lines >"$T/w2"
late=$( (diff "$T/w1" "$T/w2" || true) | awk '/^>/ {sub(/^> kubesim_requests_total/, ""); printf "%s ", $0}')
rss=$(awk '/VmRSS/ {print $2}' /proc/$OP_PID/status)
cpu_op=$(awk '{printf "%.1f", ($14+$15)/100}' /proc/$OP_PID/stat)
cpu_ks=$(awk '{printf "%.1f", ($14+$15)/100}' /proc/$KS_PID/stat)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$OP_PID/status)
elapsed=$(echo "$t1 - $t0" | bc)
ready_s=$(echo "$t2 - $t0" | bc)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
cat <<MD
### Operator: $N GPU nodes in kubesim ($(date -u +%Y-%m-%d), $(nproc) cores, $cpu)

| measure | value | target |
|---|---|---|
| ClusterPolicy created → all $N nodes labelled and 7 DaemonSets created | ${elapsed} s | |
| ClusterPolicy created → status.state ready (kubesim runs $((N * 7)) pods, ready after 1 s) | ${ready_s} s | |
| node label writes (PATCH nodes) | $node_patches | $N (one per node) |
| all write calls to reach convergence (leases, events, kubesim's own pods excluded) | $((w1 - w0)) | $N + objects |
| write calls in the 5 s after convergence (ready) | $((w2 - w1)) ${late:+(series now: $late)} | 0 |
| operator RSS after convergence / peak | $((rss / 1024)) MiB / $((hwm / 1024)) MiB | < 64 MiB |
| CPU time used: operator / kubesim (which also runs the DaemonSet controller: $((N * 7)) pods) | ${cpu_op} s / ${cpu_ks} s | |

Rerun: \`NODES=$N bench/operator/run.sh\` (needs \`make\` first).
MD
