#!/usr/bin/env bash
# Simulated nodes that run the stack, at scale: N DGX H100 nodes (default 50, 8 GPUs each) on
# kubelet-sim, every operand pod a process, driven by the operator under its ServiceAccount and
# NVIDIA's sample ClusterPolicy, on kubesim (TLS, RBAC). Measures the time from the ClusterPolicy's
# creation to every node advertising its 8 nvidia.com/gpu (target: under 60 s) and to the policy's
# ready state, and the memory of each node: the proportional set size (PSS) of every process in
# the node's network namespace (its operand pods), plus its share of kubelet-sim's own (target:
# under 64 MiB per node). Needs root (namespaces per node). Prints a Markdown section for
# bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NODES:-50}
B=${BUILD:-build}
[ "$(id -u)" = 0 ] || { echo "bench/nodes: needs root (kubelet-sim's nodes)"; exit 1; }
[ "$N" -le 200 ] || { echo "bench/nodes: NODES is at most 200 (one /24 of addresses)"; exit 1; }
./scripts/tools.sh "$B/tools"
BUILD=$B . scripts/tools-env.sh
T=$(mktemp -d)
API_IP=198.18.255.9
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    ip addr del "$API_IP/32" dev lo 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }
k() { kubectl --request-timeout=20s "$@"; }

# The cluster: N copies of the mixed cluster's DGX H100 node.
python3 - "$N" "$PWD/sim/fleets/dgx-h100.yaml" >"$T/cluster.yaml" <<'PY'
import sys
n, fleet = int(sys.argv[1]), sys.argv[2]
print("apiVersion: gpuop.dev/v1alpha1\nkind: SimCluster\nnodes:")
for i in range(1, n + 1):
    print(f"""- name: h100-{i:03d}
  fleet: {fleet}
  root: /tmp/gpuop-bench/h100-{i:03d}
  kernel: 5.15.0-127-generic
  os: {{id: ubuntu, versionId: "22.04", prettyName: Ubuntu 22.04.5 LTS}}
  runtime: containerd
  kernelHeaders: [5.15.0-127-generic]
  cpu: 224
  memory: 2063937984Ki
  pods: 110""")
PY

ip addr add "$API_IP/32" dev lo 2>/dev/null || true
"$B/kubesim" --kubeconfig-out "$T/kc" --listen "$API_IP:0" --allow-remote --tls \
    --load deploy/rbac/operator.yaml >"$T/kubesim.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$T/kc" ] && break; sleep 0.1; done
export KUBECONFIG=$T/kc
until k get ns >/dev/null 2>&1; do sleep 0.2; done
"$B/kubelet-sim" --cluster "$T/cluster.yaml" --kubeconfig "$KUBECONFIG" --root-base "$T/roots" \
    --bridge klbench0 --subnet 198.18.210.0/24 --backoff-scale 0.05 --node-status-interval 5s \
    >"$T/kubelet-sim.log" 2>&1 &
pids+=($!)
KL_PID=$!
until [ "$(k get nodes --no-headers 2>/dev/null | grep -c ' Ready ')" = "$N" ]; do
    kill -0 $KL_PID 2>/dev/null || { cat "$T/kubelet-sim.log"; exit 1; }
    sleep 1
done
k apply -f deploy/crds/ >/dev/null
tok=$(k create token gpu-operator -n gpu-operator --duration=24h)
sed "s|^    token: .*|    token: $tok|" "$KUBECONFIG" >"$T/op.kc"
"$B/gpuop" operator --kubeconfig "$T/op.kc" --namespace gpu-operator --metrics-listen 127.0.0.1:0 \
    >"$T/op.log" 2>&1 &
pids+=($!)
until grep -q "became leader\|caches synced" "$T/op.log" 2>/dev/null; do sleep 0.1; done

# NVIDIA's sample (single strategy: every H100 whole), without the MIG manager.
python3 - deploy/samples/clusterpolicy.yaml >"$T/policy.yaml" <<'PY'
import sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
cp["spec"]["migManager"]["enabled"] = False
# the simulated driver builds in 2 s: its startup probe need not wait NVIDIA's 60 s first
cp["spec"]["driver"]["startupProbe"] = {"initialDelaySeconds": 2, "periodSeconds": 2}
print(yaml.safe_dump(cp))
PY
t0=$(now)
k apply -f "$T/policy.yaml" >/dev/null
advertised() {
    k get nodes -o jsonpath='{range .items[*]}{.status.allocatable.nvidia\.com/gpu}{"\n"}{end}' | grep -cx 8 || true
}
t_adv="" t_ready="" last=0
deadline=$(( $(date +%s) + 600 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
    n=$(advertised)
    if [ "$n" != "$last" ]; then
        echo "$(since "$t0") s: $n of $N nodes advertise 8 GPUs" >&2
        last=$n
    fi
    [ -z "$t_adv" ] && [ "$n" = "$N" ] && t_adv=$(since "$t0")
    if [ -z "$t_ready" ] && [ "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.state}')" = ready ]; then
        t_ready=$(since "$t0")
    fi
    [ -n "$t_adv" ] && [ -n "$t_ready" ] && break
    sleep 1
done
[ -n "$t_adv" ] || { echo "bench/nodes: not every node advertised its GPUs in 600 s ($(advertised) of $N)"; exit 1; }
sleep 10 # settle: init containers done, every operand in its steady state

# Memory per node: PSS of the processes in each node's network namespace (kubelet-sim's
# descendants only: other simulated clusters on the machine are not this bench's).
host_net=$(readlink /proc/self/ns/net)
declare -A pss procs
mine=$(ps -eo pid=,ppid= | awk -v root="$KL_PID" '
    {parent[$1] = $2}
    END {for (p in parent) {q = p; while (q in parent && q != root && q > 1) q = parent[q]; if (q == root && p != root) print p}}')
for pid in $mine; do
    d=/proc/$pid
    net=$(readlink "$d/ns/net" 2>/dev/null) || continue
    [ "$net" = "$host_net" ] && continue
    kb=$(awk '/^Pss:/ {print $2}' "$d/smaps_rollup" 2>/dev/null) || continue
    [ -n "$kb" ] || continue
    pss[$net]=$(( ${pss[$net]:-0} + kb ))
    procs[$net]=$(( ${procs[$net]:-0} + 1 ))
done
kl_kb=$(awk '/^Pss:/ {print $2}' "/proc/$KL_PID/smaps_rollup")
stats=$(for net in "${!pss[@]}"; do echo "${pss[$net]} ${procs[$net]}"; done | sort -n | awk -v kl="$kl_kb" -v n="$N" '
    {v[NR] = $1; p += $2; s += $1}
    END {printf "%d %.1f %.1f %.1f %.1f %.1f", NR, v[1]/1024, v[int((NR+1)/2)]/1024, v[NR]/1024, (s/NR + kl/n)/1024, p/NR}')
read -r nets min med max per_node procs_per <<<"$stats"

cat <<EOF

## simulated nodes that run the stack, $N x 8 GPUs ($(date -u +%Y-%m-%d), $(nproc) CPUs, $(uname -r))

\`bench/nodes/run.sh\` (NODES=$N): kubesim (TLS, RBAC) + kubelet-sim with $N simulated DGX H100 nodes,
every operand pod a process in the node's namespaces, the operator under its ServiceAccount and
NVIDIA's sample ClusterPolicy (MIG manager off; the driver's startup probe from 2 s, not 60 s: the simulated build takes 2 s). Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg).

| measure | result | target |
|---|---|---|
| ClusterPolicy created to every node advertising 8 nvidia.com/gpu | ${t_adv} s | < 60 s |
| ClusterPolicy created to state ready | ${t_ready:-not within 600 s} s | |
| memory per node: PSS of its processes, min / median / max | ${min} / ${med} / ${max} MiB ($nets nodes, ${procs_per} processes each) | |
| memory per node, with its share of kubelet-sim ($(awk -v k="$kl_kb" 'BEGIN {printf "%.1f", k / 1024}') MiB in all) | ${per_node} MiB | < 64 MiB |
EOF
