#!/usr/bin/env bash
# make demo: gpuop's main job on simulated GPUs and a simulated cluster.
#   1. what NVML reports on a simulated DGX H100 (inventory, topology)
#   2. the node labels GPU feature discovery derives from it
#   3. the control plane: kubesim with a mixed cluster, the operator, a ClusterPolicy, and what
#      landed on which node. The cluster keeps running afterwards for kubectl.
#   4. (root) the whole stack driven by the operator on simulated nodes that run it: kubelet-sim
#      runs every pod as a process on nodes with their own namespaces and addresses (the mixed
#      cluster and a Grace GH200 node, arm64, whose programs are the aarch64 build under
#      qemu-user when `make demo` could build it); per node, who owns the driver, the
#      validations, GPUs advertised vs physical, the time to ready; `gpuop status -o wide`; then
#      a CUDA sample gets a GPU on a DGX H100 and one on the GH200, and the exporter attributes
#      the first.
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

section "4. The whole stack on simulated nodes, driven by the operator (kubesim + kubelet-sim)"
if [ "$(id -u)" != 0 ]; then
    echo "skipped: kubelet-sim's nodes need root (a network namespace, address and root per node)"
else
    # a second API server (TLS, RBAC enforced) on an address the host and the nodes reach
    API_IP=198.18.255.1
    ip addr add "$API_IP/32" dev lo 2>/dev/null || true
    rm -f "$D/kubeconfig-nodes"
    "$B/kubesim" --listen "$API_IP:0" --allow-remote --tls --kubeconfig-out "$D/kubeconfig-nodes" \
        --load deploy/rbac/operator.yaml >"$D/kubesim-nodes.log" 2>&1 &
    echo $! >>"$D/pids"
    for _ in $(seq 100); do [ -s "$D/kubeconfig-nodes" ] && break; sleep 0.1; done
    kn() { KUBECONFIG=$PWD/$D/kubeconfig-nodes kubectl --request-timeout=10s "$@"; }
    for _ in $(seq 50); do kn get ns >/dev/null 2>&1 && break; sleep 0.1; done
    rm -rf "$D/roots"
    # the nodes: sim/clusters/mixed.yaml and the GH200 of sim/clusters/grace.yaml (fleets made
    # absolute: they are relative to their own files)
    python3 - sim/clusters/mixed.yaml sim/clusters/grace.yaml gh200-1 >"$D/cluster-nodes.yaml" <<'PY'
import os, sys, yaml
docs = []
for path in sys.argv[1:3]:
    doc = yaml.safe_load(open(path))
    for n in doc["nodes"]:
        if "fleet" in n:
            n["fleet"] = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), n["fleet"]))
    docs.append(doc)
docs[0]["nodes"] += [n for n in docs[1]["nodes"] if n["name"] == sys.argv[3]]
print(yaml.safe_dump(docs[0], sort_keys=False))
PY
    # the GH200's programs: the aarch64 build (make demo builds it when the cross toolchain is
    # installed) under qemu-user, else this machine's
    arm=()
    for f in gpuop gpuop-tomlx.so libnvidia-ml.so.1 libcuda.so.1 sim-image; do
        [ -f "build-arm64/$f" ] || { arm=(); break; }
        arm=(--arm64-build "$PWD/build-arm64")
    done
    command -v qemu-aarch64-static >/dev/null || arm=()
    "$B/kubelet-sim" --cluster "$D/cluster-nodes.yaml" --kubeconfig "$D/kubeconfig-nodes" \
        --root-base "$PWD/$D/roots" --bridge gpuopdemo0 --subnet 198.18.100.0/24 \
        --backoff-scale 0.05 --node-status-interval 1s "${arm[@]}" >"$D/kubelet-sim.log" 2>&1 &
    echo $! >>"$D/pids"
    for _ in $(seq 150); do [ "$(kn get nodes --no-headers 2>/dev/null | grep -c ' Ready ')" = 6 ] && break; sleep 0.2; done
    echo "kubelet-sim: $(kn get nodes --no-headers | grep -c ' Ready ') nodes Ready (sim/clusters/mixed.yaml and the GH200 of grace.yaml), each pod a process"
    if [ ${#arm[@]} != 0 ]; then
        echo "gh200-1 (arm64) runs the aarch64 build (build-arm64) under $(command -v qemu-aarch64-static)"
    else
        echo "gh200-1 (arm64) runs this machine's programs: no aarch64 build in build-arm64 or no qemu-user (make deps, then make demo)"
    fi
    kn apply -f deploy/crds/ >/dev/null
    # the operator under its shipped ServiceAccount and RBAC
    tok=$(kn create token gpu-operator -n gpu-operator --duration=24h)
    sed "s|^    token: .*|    token: $tok|" "$D/kubeconfig-nodes" >"$D/operator-nodes.kubeconfig"
    "$B/gpuop" operator --kubeconfig "$D/operator-nodes.kubeconfig" --namespace gpu-operator \
        --metrics-listen 127.0.0.1:0 >"$D/operator-nodes.log" 2>&1 &
    echo $! >>"$D/pids"
    # NVIDIA's sample ClusterPolicy, with the mixed MIG strategy (the A100 has full GPUs beside
    # MIG ones), the node status exporter on, no default MIG layout (the A100 keeps its
    # partitions; the MIG manager applies a layout once a node is labelled with one), and the
    # driver's startup probe from 2 s (NVIDIA waits 60 s for a real build).
    python3 - deploy/samples/clusterpolicy.yaml >"$D/policy-nodes.yaml" <<'PY'
import sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
spec = cp["spec"]
spec["mig"]["strategy"] = "mixed"
# the simulated driver builds in 2 s: its startup probe need not wait NVIDIA's 60 s first
spec["driver"]["startupProbe"] = {"initialDelaySeconds": 2, "periodSeconds": 2}
spec["migManager"]["config"]["default"] = ""
spec["nodeStatusExporter"] = {"enabled": True,
    "env": [{"name": "NODE_STATUS_EXPORTER_INTERVAL", "value": "2s"}]}
print(yaml.safe_dump(cp))
PY
    echo "applying NVIDIA's sample ClusterPolicy (mig.strategy mixed, no default MIG layout, nodeStatusExporter on,"
    echo "  the driver's startup probe from 2 s: the simulated driver builds in 2 s) ..."
    t0=$(date +%s%N)
    kn apply -f "$D/policy-nodes.yaml" >/dev/null
    state=""
    for _ in $(seq 600); do
        state=$(kn get clusterpolicy cluster-policy -o jsonpath='{.status.state}' 2>/dev/null || true)
        [ "$state" = ready ] && break
        sleep 0.5
    done
    echo "ClusterPolicy cluster-policy: ${state:-pending}, $((($(date +%s%N) - t0) / 1000000)) ms after it was applied"
    echo "(driver containers built and loaded, toolkit configured each runtime, validators passed, device plugins registered)"
    # the node status exporter's count annotation lands within its interval
    for _ in $(seq 50); do
        [ "$(kn get nodes -o json | grep -c 'gpuop.dev/gpu-count')" -ge 4 ] && break
        sleep 0.2
    done
    echo
    kn get nodes -o json | python3 -c '
import json, sys
bold, plain = sys.argv[1], sys.argv[2]
print("%s%-16s %-6s %-22s %-42s %-36s %s%s" % (bold, "NODE", "ARCH", "DRIVER", "VALIDATIONS", "GPUS ADVERTISED / PHYSICAL", "ADDRESS", plain))
for n in sorted(json.load(sys.stdin)["items"], key=lambda n: n["metadata"]["name"]):
    ann = n["metadata"].get("annotations", {})
    name = n["metadata"]["name"]
    own = json.loads(ann.get("gpuop.dev/driver-owner", "{}"))
    drv = ("%s %s" % (own.get("owner", ""), own.get("version", ""))).strip() or "-"
    vals = []
    for check in ("driver", "toolkit", "cuda", "plugin"):
        v = json.loads(ann.get("validation.gpuop.dev/" + check, "{}"))
        if v:
            vals.append("%s %s" % (check, v.get("state")))
    cnt = json.loads(ann.get("gpuop.dev/gpu-count", "{}"))
    alloc = n["status"].get("allocatable", {})
    adv = ", ".join("%s=%s" % (k[len("nvidia.com/"):], v) for k, v in sorted(alloc.items())
                    if k.startswith("nvidia.com/"))
    gpus = "%s / %s" % (adv or "-", cnt.get("physical", 0)) if cnt else (adv or "-")
    if cnt.get("mismatch"):
        gpus += " MISMATCH"
    ip = next((a["address"] for a in n["status"].get("addresses", []) if a["type"] == "InternalIP"), "")
    arch = n["status"].get("nodeInfo", {}).get("architecture", "-")
    print("%-16s %-6s %-22s %-42s %-36s %s" % (name, arch, drv, ", ".join(vals) or "-", gpus, ip))
' "$bold" "$plain"
    echo
    # the Grace node's operands, as processes of this machine (scripts/node-procs.py)
    echo "gh200-1's operand processes (pid, pod, program, machine):"
    ./scripts/node-procs.py "$D/roots/gh200-1" | awk '{printf "  %-8s %-44s %s (%s)\n", $1, $5, $3, $2}'
    echo
    echo "gpuop status -o wide (the GPU nodes, their architecture among the columns):"
    KUBECONFIG=$PWD/$D/kubeconfig-nodes "$B/gpuop" status -o wide --color never |
        sed -n '/^NODE /,/^$/p' | sed -e '/^$/d' -e 's/^/  /'
    kn apply -f sim/clusters/cuda-sample.yaml >/dev/null
    # and one on the GH200 (arm64: the simulated CUDA sample of the node's build)
    sed -e 's/name: cuda-vectoradd,/name: cuda-vectoradd-grace,/' -e 's/hostname: dgx-h100-1/hostname: gh200-1/' \
        -e 's/- name: cuda-vectoradd$/- name: cuda-vectoradd-grace/' sim/clusters/cuda-sample.yaml | kn apply -f - >/dev/null
    for _ in $(seq 150); do [ "$(kn get pod cuda-vectoradd -o jsonpath='{.status.phase}')" = Running ] && break; sleep 0.2; done
    ip1=$(kn get node dgx-h100-1 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
    # the exporter's page read whole, then searched (grep -q leaving a pipe early fails it)
    attributed() { metrics=$(curl -sf "http://$ip1:9400/metrics") && grep '^DCGM_FI_DEV_FB_USED' <<<"$metrics" | grep -m1 'pod="cuda-vectoradd"'; }
    line=""
    for _ in $(seq 150); do line=$(attributed) && break; sleep 0.2; done
    echo "CUDA sample on dgx-h100-1: $(kn get pod cuda-vectoradd -o jsonpath='{.status.phase}'); the exporter at $ip1:9400 says:"
    echo "  ${line:-(no sample attributed to cuda-vectoradd yet: the pod may have finished first)}"
    for _ in $(seq 150); do [ "$(kn get pod cuda-vectoradd -o jsonpath='{.status.phase}')" = Succeeded ] && break; sleep 0.2; done
    echo "CUDA sample: $(kn get pod cuda-vectoradd -o jsonpath='{.status.phase}'), log: $(kn logs cuda-vectoradd | grep -m1 'Test ')"
    for _ in $(seq 150); do [ "$(kn get pod cuda-vectoradd-grace -o jsonpath='{.status.phase}')" = Succeeded ] && break; sleep 0.2; done
    echo "CUDA sample on gh200-1: $(kn get pod cuda-vectoradd-grace -o jsonpath='{.status.phase}'), log: $(kn logs cuda-vectoradd-grace | grep -m1 'Test ')"
fi

section "Explore"
cat <<EOF
The simulated cluster keeps running (kubesim and the operator, pids in $D/pids):

  export KUBECONFIG=$PWD/$D/kubeconfig PATH=$PWD/$B/tools/bin:\$PATH   # the pinned kubectl 1.32
  kubectl get clusterpolicy,nodes,daemonsets,pods -A -o wide
  kubectl patch clusterpolicy cluster-policy --type merge -p '{"spec":{"dcgmExporter":{"enabled":false}}}'
  kubectl label node cpu-1 feature.node.kubernetes.io/pci-10de.present=true   # a new GPU node

Simulated GPUs: GPUOP_NVML_LIBRARY=$GPUOP_NVML_LIBRARY GPUOP_SIM_FLEET=$GPUOP_SIM_FLEET
Nodes that run the stack (root): KUBECONFIG=$PWD/$D/kubeconfig-nodes kubectl get pods -A -o wide
  (each node's root under $D/roots; kubectl logs works through kubesim, as with a real kubelet)
Stop: kill \$(cat $D/pids)   (kubelet-sim removes its bridge and namespaces on SIGTERM)
EOF
