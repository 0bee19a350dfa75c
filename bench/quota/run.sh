#!/usr/bin/env bash
# The operator's GPU capacity-and-quota view at scale: N GPU nodes in kubesim (default 2000: half
# H100 x 8, half L4 x 4, as the device plugin advertises them) and M namespaces (default 200, half
# training pinned to the H100s, half serving pinned to the L4s), each with a GPU ResourceQuota and
# P GPU pods (default 5). Runs this build's operator, and when BASELINE names another gpuop binary
# (one without the view, e.g. main before it), that one on the same cluster. Measures, per binary:
# ClusterPolicy → ready, write calls to converge, write calls in 5 s of quiet and in 5 s while
# M new GPU pods arrive (target 0: pods and quota usage change no status), the operator's CPU time
# in that window and its RSS. Prints Markdown for bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NODES:-2000}
M=${NAMESPACES:-200}
P=${PODS:-5}
B=${BUILD:-build}
./scripts/tools.sh "$B/tools" >/dev/null
BUILD=$B . scripts/tools-env.sh
T=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
now() { date +%s.%N; }

# The cluster: nodes, namespaces, quotas (status charged by kubesim's quota admission), pods.
python3 - "$N" "$M" "$P" >"$T/cluster.yaml" <<'PY'
import sys
n, m, p = (int(x) for x in sys.argv[1:4])
docs = []
for i in range(n):
    h100 = i < n // 2
    prod, g = ("NVIDIA-H100-80GB-HBM3", 8) if h100 else ("NVIDIA-L4", 4)
    docs.append(f"""apiVersion: v1
kind: Node
metadata:
  name: gpu-{i:05d}
  labels: {{kubernetes.io/hostname: gpu-{i:05d}, kubernetes.io/os: linux, feature.node.kubernetes.io/pci-10de.present: "true", feature.node.kubernetes.io/system-os_release.ID: ubuntu, feature.node.kubernetes.io/system-os_release.VERSION_ID: "22.04", nvidia.com/gpu.present: "true", nvidia.com/gpu.product: {prod}, nvidia.com/gpu.count: "{g}"}}
status:
  capacity: {{cpu: "224", memory: 2063937984Ki, pods: "110", nvidia.com/gpu: "{g}"}}
  allocatable: {{cpu: "224", memory: 2063835584Ki, pods: "110", nvidia.com/gpu: "{g}"}}
  conditions: [{{type: Ready, status: "True", reason: KubeletReady}}]
  nodeInfo: {{containerRuntimeVersion: "containerd://1.7.24", kubeletVersion: v1.32.4, osImage: Ubuntu 22.04.5 LTS, kernelVersion: 5.15.0-127-generic, operatingSystem: linux, architecture: amd64}}""")
docs.append("apiVersion: v1\nkind: Namespace\nmetadata: {name: gpu-operator}")
half = n // 2
for j in range(m):
    train = j < m // 2
    ns = f"train-{j:03d}" if train else f"serve-{j:03d}"
    prod = "NVIDIA-H100-80GB-HBM3" if train else "NVIDIA-L4"
    # quotas add up to the H100s exactly and to 80% of the L4s
    hard = (half * 8) // (m // 2) if train else (n - half) * 4 * 8 // 10 // (m - m // 2)
    docs.append(f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}")
    docs.append(f"apiVersion: v1\nkind: ResourceQuota\nmetadata: {{name: gpus, namespace: {ns}}}\nspec: {{hard: {{requests.nvidia.com/gpu: \"{hard}\"}}}}")
    for k in range(p):
        node = (j * p + k) % half + (0 if train else half)
        docs.append(f"""apiVersion: v1
kind: Pod
metadata: {{name: job-{k}, namespace: {ns}}}
spec:
  nodeName: gpu-{node:05d}
  nodeSelector: {{nvidia.com/gpu.product: {prod}}}
  containers: [{{name: main, image: cuda-sample:12, resources: {{limits: {{nvidia.com/gpu: "1"}}}}}}]""")
print("\n---\n".join(docs))
PY

run_one() { # LABEL GPUOP
    local label=$1 gpuop=$2
    "$B/kubesim" --load "$T/cluster.yaml" --kubeconfig-out "$T/kc" --pod-ready-delay 1s \
        >"$T/kubesim.log" 2>&1 &
    local ks=$!
    pids+=($ks)
    for _ in $(seq 300); do [ -s "$T/kc" ] && break; sleep 0.1; done
    export KUBECONFIG=$T/kc
    local server
    server=$(grep -m1 'server:' "$T/kc" | awk '{print $2}')
    until kubectl get ns >/dev/null 2>&1; do sleep 0.2; done
    kubectl apply -f deploy/crds/ >/dev/null
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$gpuop" operator --kubeconfig "$T/kc" --namespace gpu-operator --metrics-listen "127.0.0.1:$port" \
        --kube-qps 2000 --kube-burst 4000 >"$T/op.log" 2>&1 &
    local op=$!
    pids+=($op)
    until grep -q "became leader" "$T/op.log" 2>/dev/null; do sleep 0.1; done
    all_writes() {
        curl -s "$server/metrics" | awk '/^kubesim_requests_total/ && /verb="(create|update|patch|delete)"/ && !/resource="(leases|events|pods|controllerrevisions)"/ {s+=$NF} END {print s+0}'
    }
    cpu() { awk '{printf "%.2f", ($14+$15)/100}' /proc/$op/stat; }
    local w0 t0 t1 w1 w2 w3 c2 c3 rss hwm
    w0=$(all_writes)
    t0=$(now)
    kubectl apply -f deploy/samples/clusterpolicy.yaml >/dev/null
    until [ "$(kubectl get clusterpolicy -o jsonpath='{.items[0].status.state}' 2>/dev/null)" = ready ]; do sleep 0.5; done
    t1=$(now)
    sleep 2
    w1=$(all_writes)
    sleep 5
    w2=$(all_writes)
    c2=$(cpu)
    # churn: one more GPU pod in every namespace (within its quota), then 5 s
    for j in $(kubectl get ns -o name | grep -E '^namespace/(train|serve)-' | cut -d/ -f2); do
        printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: extra, namespace: %s}\nspec:\n  containers: [{name: main, image: cuda-sample:12, resources: {limits: {nvidia.com/gpu: "1"}}}]\n---\n' "$j"
    done >"$T/extra.yaml"
    kubectl apply -f "$T/extra.yaml" >/dev/null
    sleep 5
    w3=$(all_writes)
    c3=$(cpu)
    rss=$(awk '/VmRSS/ {print $2}' /proc/$op/status)
    hwm=$(awk '/VmHWM/ {print $2}' /proc/$op/status)
    local ratio
    ratio=$(curl -s "127.0.0.1:$port/metrics" | awk '/^gpuop_gpu_quota_overcommit_ratio/ {print $2}')
    echo "| $label | $(printf "%.1f" "$(echo "$t1 - $t0" | bc)") s | $((w1 - w0)) | $((w2 - w1)) | $((w3 - w2)) | $(printf "%.2f" "$(echo "$c3 - $c2" | bc)") s | $((rss / 1024)) / $((hwm / 1024)) MiB | ${ratio:--} |" >>"$T/rows"
    kill $op $ks 2>/dev/null || true
    wait $op $ks 2>/dev/null || true
    rm -f "$T/kc"
}

run_one "this build (with the view)" "$B/gpuop"
[ -n "${BASELINE:-}" ] && run_one "baseline ($BASELINE)" "$BASELINE"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
cat <<MD
### GPU quota view: $N GPU nodes, $M namespaces with a GPU quota, $((M * P)) GPU pods ($(date -u +%Y-%m-%d), $(nproc) cores, $cpu)

| operator | ClusterPolicy → ready | writes to converge | writes in 5 s quiet | writes in 5 s while $M GPU pods arrive | operator CPU in those 5 s | RSS after / peak | over-commit ratio metric |
|---|---|---|---|---|---|---|---|
$(cat "$T/rows")

Writes: kubesim's request counter, leases, events and pods (kubesim's and the benchmark's own)
excluded. Rerun: \`ninja -C build && BASELINE=/path/to/gpuop-without-the-view bench/quota/run.sh\`
(\`NODES\`, \`NAMESPACES\`, \`PODS\` for other sizes).
MD
