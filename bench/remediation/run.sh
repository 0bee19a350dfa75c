#!/usr/bin/env bash
# GPU remediation at scale: N GPU nodes in kubesim (default 1000) with simulated readiness (pods
# Ready 1 s after they are made), the operator with the sample ClusterPolicy and one
# DriverUpgradePool over every node that makes reset-gpu automatic (maxUnavailable 10%). Once the
# cluster has converged, FAULT_PCT percent of the nodes (default 2) get an uncorrectable ECC error
# at once, written to their Nodes as the node agent writes it (gpuop.dev/gpu-health). The node
# agents and executors are played by remediate_agents.py: it answers each reset request
# (request-done, as `gpuop driver-manager remediate` does), then reports the GPU healthy and
# applies the acknowledgement as the node status exporter does. The operator quarantines, drains,
# requests the reset, replaces the validator pods and returns each node to service.
# Measures: the time from the fault to the quarantine and to the node back in service (the
# operator's own figures, fault_to_*_ms in its log), the operator's API write calls per
# remediated node (Events and the Lease excluded; the played agents' writes subtracted), the
# operator's resident memory (peak) and the whole wall time. Prints a Markdown section for
# bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NODES:-1000}
PCT=${FAULT_PCT:-2}
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
for _ in $(seq 100); do [ -s "$T/kc" ] && break; sleep 0.1; done
export KUBECONFIG=$T/kc
SERVER=$(grep -m1 'server:' "$T/kc" | awk '{print $2}')
until kubectl get ns >/dev/null 2>&1; do sleep 0.2; done
printf "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: gpu-operator\n" | kubectl apply -f - >/dev/null
kubectl apply -f deploy/crds/ >/dev/null
cat <<'EOF' | kubectl apply -f - >/dev/null
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: fleet}
spec:
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
  maxUnavailable: "10%"
  remediation:
    automatic: [reset-gpu]
EOF
MPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$B/gpuop" operator --kubeconfig "$T/kc" --namespace gpu-operator \
    --metrics-listen "127.0.0.1:$MPORT" --kube-qps 2000 --kube-burst 4000 >"$T/op.log" 2>&1 &
pids+=($!)
OP_PID=$!
until grep -q "became leader" "$T/op.log" 2>/dev/null; do sleep 0.1; done

writes() { # the write calls, Events and the Lease excluded
    curl -s "$SERVER/metrics" | awk '/^kubesim_requests_total/ && /verb="(create|update|patch|delete)"/ && !/resource="(leases|events)"/ {s+=$NF} END {print s+0}'
}
write_lines() { # "verb resource code count" for every write call, Events and the Lease excluded
    curl -s "$SERVER/metrics" | awk '/^kubesim_requests_total/ && /verb="(create|update|patch|delete)"/ && !/resource="(leases|events)"/ {
        match($0, /verb="[^"]*"/); v = substr($0, RSTART + 6, RLENGTH - 7)
        match($0, /resource="[^"]*"/); r = substr($0, RSTART + 10, RLENGTH - 11)
        match($0, /code="[^"]*"/); c = substr($0, RSTART + 6, RLENGTH - 7)
        print v, r, c, $NF}'
}
ready_validators() {
    kubectl -n gpu-operator get pods -l app=nvidia-operator-validator \
        -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True || true
}

kubectl apply -f deploy/samples/clusterpolicy.yaml >/dev/null
until [ "$(kubectl get clusterpolicy -o jsonpath='{.items[0].status.state}' 2>/dev/null)" = ready ]; do sleep 0.5; done
until [ "$(ready_validators)" -ge "$N" ]; do sleep 1; done
sleep 3
F=$(( (N * PCT + 99) / 100 ))
kubectl get nodes -o name | sed 's|node/||' | sort | awk -v n="$N" -v f="$F" 'NR % int(n / f) == 1 && k < f {print; k++}' >"$T/faulty"
F=$(wc -l <"$T/faulty")
w0=$(writes)
write_lines >"$T/w0"
hwm0=$(awk '/VmHWM/ {print $2}' /proc/$OP_PID/status)
t0=$(now)
python3 bench/remediation/remediate_agents.py "$T/faulty" "$T/agents.json" >"$T/agents.log" 2>&1 ||
    { cat "$T/agents.log"; tail -20 "$T/op.log"; exit 1; }
t1=$(now)
sleep 2
w1=$(writes)
write_lines >"$T/w1"
own=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["writes"])' "$T/agents.json")
breakdown=$(awk -v n="$F" 'NR == FNR {a[$1" "$2" "$3] = $4; next}
    {d = $4 - a[$1" "$2" "$3]; if (d > 0) printf "%s%s %s %s: %.2f", (k++ ? ", " : ""), $1, $2, $3, d / n}' \
    "$T/w0" "$T/w1")
stats() { # KEY: min / median / max of the operator's KEY=ms figures, in seconds
    grep -o "$1=[0-9]*" "$T/op.log" | cut -d= -f2 | sort -n | awk '{a[NR] = $1} END {
        if (NR == 0) {print "none"; exit}
        printf "%.2f s / %.2f s / %.2f s (%d nodes)", a[1] / 1000, a[int((NR + 1) / 2)] / 1000, a[NR] / 1000, NR}'
}
rss=$(awk '/VmRSS/ {print $2}' /proc/$OP_PID/status)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$OP_PID/status)
elapsed=$(echo "$t1 - $t0" | bc)
per_node=$(echo "scale=2; ($w1 - $w0 - $own) / $F" | bc)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
cat <<MD
### GPU remediation: $N GPU nodes in kubesim, $F faulting at once ($(date -u +%Y-%m-%d), $(nproc) cores, $cpu)

| measure | value | target |
|---|---|---|
| faults written → every faulty node back in service (uncordoned, untainted, no state) | ${elapsed} s | |
| fault → quarantine, per node (operator's figure): min / median / max | $(stats fault_to_quarantine_ms) | < 5 s |
| fault → back in service, per node (operator's figure): min / median / max | $(stats fault_to_recovery_ms) | |
| operator write calls per remediated node (Events, Lease excluded) | $per_node | |
| all write calls per remediated node, the played agents' included (verb resource code) | $breakdown | |
| the played agents' and executors' writes (subtracted above) | $own | |
| operator RSS after / peak before the faults / peak | $((rss / 1024)) MiB / $((hwm0 / 1024)) MiB / $((hwm / 1024)) MiB | < 64 MiB |

Rerun: \`NODES=$N FAULT_PCT=$PCT bench/remediation/run.sh\` (needs \`make\` first).
MD
