#!/usr/bin/env bash
# make demo: gpuop's main job on simulated GPUs and a simulated cluster.
#   1. what NVML reports on a simulated DGX H100 (inventory, topology)
#   2. the node labels GPU feature discovery derives from it
#   3. the control plane: kubesim with a mixed cluster, the operator, a ClusterPolicy, and what
#      landed on which node. The cluster keeps running afterwards for kubectl.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
D=$B/demo
mkdir -p "$D"
bold=$(tput bold 2>/dev/null || true)
plain=$(tput sgr0 2>/dev/null || true)
section() { printf '\n%s== %s ==%s\n\n' "$bold" "$*" "$plain"; }

# A previous demo's cluster is stopped first.
if [ -f "$D/pids" ]; then
    kill $(cat "$D/pids") 2>/dev/null || true
    rm -f "$D/pids"
    sleep 0.5
fi

export GPUOP_NVML_LIBRARY=$PWD/$B/libnvidia-ml.so.1
export GPUOP_SIM_FLEET=$PWD/sim/fleets/dgx-h100.yaml
export GPUOP_SIM_STATE=$PWD/$D/sim-state
rm -rf "$GPUOP_SIM_STATE"
mkdir -p "$GPUOP_SIM_STATE"

section "1. A simulated DGX H100: what NVML reports (gpuop inventory)"
"$B/gpuop" inventory

section "2. Its node labels (gpuop feature-discovery --oneshot)"
"$B/gpuop" feature-discovery --oneshot --no-timestamp --output - | sort | sed 's/^/  /'

# The pinned kubectl (scripts/tools.sh; a no-op once installed), first on PATH from here on.
./scripts/tools.sh "$B/tools"
BUILD=$B . scripts/tools-env.sh

section "3. The control plane on a simulated cluster (kubesim + gpuop operator)"
rm -f "$D/kubeconfig"
"$B/kubesim" --load sim/clusters/demo.yaml --kubeconfig-out "$D/kubeconfig" \
    --pod-ready-delay 500ms >"$D/kubesim.log" 2>&1 &
echo $! >"$D/pids"
for _ in $(seq 100); do [ -s "$D/kubeconfig" ] && break; sleep 0.1; done
export KUBECONFIG=$PWD/$D/kubeconfig
for _ in $(seq 50); do kubectl get ns >/dev/null 2>&1 && break; sleep 0.1; done
kubectl apply -f deploy/crds/ >/dev/null
"$B/gpuop" operator --kubeconfig "$KUBECONFIG" --namespace gpu-operator \
    --metrics-listen 127.0.0.1:0 >"$D/operator.log" 2>&1 &
echo $! >>"$D/pids"
echo "cluster: 5 nodes (2x DGX H100, 1x A100 with MIG, 1x L4 with a host-installed driver, 1x CPU)"
echo "applying deploy/samples/clusterpolicy.yaml ..."
kubectl apply -f deploy/samples/clusterpolicy.yaml >/dev/null
state=""
for _ in $(seq 150); do
    state=$(kubectl get clusterpolicy cluster-policy -o jsonpath='{.status.state}' 2>/dev/null || true)
    [ "$state" = ready ] && break
    sleep 0.2
done
echo "ClusterPolicy cluster-policy: ${state:-pending}"
echo
kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.metadata.labels.nvidia\.com/gpu\.product}{"\t"}{.metadata.labels.nvidia\.com/gpu\.deploy\.driver}{"\t"}{.metadata.labels.nvidia\.com/gpu\.present}{"\n"}{end}' |
    sort >"$D/nodes.tsv"
kubectl -n gpu-operator get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{"\t"}{.metadata.labels.app}{"\t"}{.status.phase}{"\n"}{end}' |
    sort >"$D/pods.tsv"
printf '%s%-18s %-24s %-15s %s%s\n' "$bold" NODE GPU DRIVER "COMPONENTS RUNNING" "$plain"
while IFS=$'\t' read -r node product driver present; do
    comps=$(awk -F'\t' -v n="$node" '$1 == n {sub(/^nvidia-/, "", $2); sub(/-daemonset$/, "", $2); printf "%s%s", sep, $2; sep=", "}' "$D/pods.tsv")
    case "$driver" in
    pre-installed) drv="host (kept)" ;;
    true) drv="gpuop" ;;
    *) drv="-" ;;
    esac
    if [ -z "$comps" ]; then
        [ "$present" = true ] && comps="(pending)" || comps="(none: not a GPU node)"
    fi
    printf '%-18s %-24s %-15s %s\n' "$node" "${product:--}" "$drv" "$comps"
done <"$D/nodes.tsv"
echo
kubectl get clusterpolicy cluster-policy \
    -o jsonpath='{range .status.conditions[*]}{.type}{": "}{.status}{" "}{.message}{"\n"}{end}' |
    grep -E '^(Ready|UnsupportedFields|HostDriverConflict)' | sed 's/^/  /' || true

section "Explore"
cat <<EOF
The simulated cluster keeps running (kubesim and the operator, pids in $D/pids):

  export KUBECONFIG=$PWD/$D/kubeconfig PATH=$PWD/$B/tools/bin:\$PATH   # the pinned kubectl 1.32
  kubectl get clusterpolicy,nodes,daemonsets,pods -A -o wide
  kubectl patch clusterpolicy cluster-policy --type merge -p '{"spec":{"dcgmExporter":{"enabled":false}}}'
  kubectl label node cpu-1 feature.node.kubernetes.io/pci-10de.present=true   # a new GPU node

Simulated GPUs: GPUOP_NVML_LIBRARY=$GPUOP_NVML_LIBRARY GPUOP_SIM_FLEET=$GPUOP_SIM_FLEET
Stop: kill \$(cat $D/pids)
EOF
