#!/bin/bash
# build/kubelet-sim against kubesim, without network namespaces (no root needed): bad input is one
# line naming the file and field with exit 2 and nothing registered; the Node as a kubelet keeps
# it (status, NFD labels, local feature files turned into labels and removed again), the Lease,
# the kubelet endpoint; SIGTERM exits 0.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
BUILD=$B
SRC=$S
KL=$BUILD/kubelet-sim
k() { "$KUBECTL" --cache-dir "$T/cache" --request-timeout=10s "$@"; }
# a free port block for the nodes' kubelet endpoints (two ports), below the ephemeral range
# (32768 up), where the connections of other tests running beside this one take theirs
PORT=$(free_port 2) || fail "no free port block"

start_kubesim

# ---- bad input: exit 2, one line naming the file and the field, nothing registered -----------
node() { # name root [extra lines]
    printf -- '- name: %s\n  root: %s\n  kernel: 5.15.0-127-generic\n' "$1" "$2"
    printf -- '  os: {id: ubuntu, versionId: "22.04"}\n  runtime: containerd\n'
    [ $# -gt 2 ] && printf -- '%s\n' "$3"
    return 0
}
cluster_head() { printf 'apiVersion: gpuop.dev/v1alpha1\nkind: SimCluster\nnodes:\n'; }
bad() { # file want-fragment
    local rc
    "$KL" --cluster "$1" --kubeconfig "$KUBECONFIG" --no-netns --kubelet-port $PORT \
        >"$T/bad.out" 2>"$T/bad.err"
    rc=$?
    [ $rc = 2 ] || fail "$1: exit $rc, want 2: $(cat "$T/bad.err")"
    [ "$(wc -l <"$T/bad.err")" = 1 ] || fail "$1: not one line: $(cat "$T/bad.err")"
    grep -qF "$1" "$T/bad.err" || fail "$1: the error does not name the file: $(cat "$T/bad.err")"
    grep -qF "$2" "$T/bad.err" || fail "$1: want \"$2\" in: $(cat "$T/bad.err")"
}
printf 'apiVersion: gpuop.dev/v1alpha1\nkind: SimCluster\nnodes: [\n' >"$T/malformed.yaml"
bad "$T/malformed.yaml" "malformed.yaml:"
{ cluster_head; node a "$T/roots/a" "  fleet: $T/missing-fleet.yaml"; } >"$T/nofleet.yaml"
bad "$T/nofleet.yaml" "nodes[0].fleet: open \"$T/missing-fleet.yaml\""
: >"$T/afile"
{ cluster_head; node a "$T/afile"; } >"$T/rootfile.yaml"
bad "$T/rootfile.yaml" "nodes[0].root: \"$T/afile\" exists and is not a directory"
{ cluster_head; node a "$T/roots/a"; node a "$T/roots/b"; } >"$T/dup.yaml"
bad "$T/dup.yaml" 'nodes[1].name: duplicate node name "a"'
{ cluster_head; node a "$T/roots/a" "  runtime2: x"; } >"$T/unknown.yaml"
bad "$T/unknown.yaml" 'nodes[0]: unknown field "runtime2"'
bad "$T/absent.yaml" "No such file or directory"
# an arm64 node's cross tree, named: it must exist and hold aarch64 programs
{ cluster_head; node a "$T/roots/a" "  arch: arm64"; } >"$T/arm64.yaml"
bad_arm64() { # tree want-fragment
    local rc
    "$KL" --cluster "$T/arm64.yaml" --kubeconfig "$KUBECONFIG" --no-netns --kubelet-port $PORT \
        --arm64-build "$1" >"$T/bad.out" 2>"$T/bad.err"
    rc=$?
    [ $rc = 2 ] || fail "--arm64-build $1: exit $rc, want 2: $(cat "$T/bad.err")"
    [ "$(wc -l <"$T/bad.err")" = 1 ] || fail "--arm64-build $1: not one line: $(cat "$T/bad.err")"
    grep -qF -- "--arm64-build: " "$T/bad.err" && grep -qF "$2" "$T/bad.err" ||
        fail "--arm64-build $1: want \"$2\" in: $(cat "$T/bad.err")"
}
bad_arm64 "$T/no-tree" "\"$T/no-tree\": No such file or directory"
bad_arm64 "$BUILD" "$(realpath "$BUILD")/gpuop\" is not an aarch64 program"
[ -z "$(k get nodes -o name)" ] || fail "bad input registered nodes: $(k get nodes -o name)"
[ ! -e "$T/roots" ] || fail "bad input created node roots"

# ---- a GPU node and a CPU node -----------------------------------------------------------------
{
    cluster_head
    node gpu-1 roots/gpu-1 "  fleet: $SRC/sim/fleets/dgx-h100.yaml
  hostDriver: \"550.127.05\"
  kernelHeaders: [5.15.0-127-generic]
  memory: 64Gi
  labels: {example.com/rack: r1}"
    node cpu-1 roots/cpu-1 "  runtime2: x" | sed '/runtime2/d'
} >"$T/cluster.yaml"
start_kubelet_sim "$T/cluster.yaml" 2 --no-netns --kubelet-port $PORT \
    --node-status-interval 3s --nvml-library "$BUILD/libnvidia-ml.so.1"

k get node gpu-1 -o json >"$T/gpu-1.json" || fail "get node"
k get node cpu-1 -o json >"$T/cpu-1.json" || fail "get node"
jq -e --arg port $PORT '
  .status.capacity.memory == "67108864Ki" and .status.allocatable.memory == "67006464Ki" and
  .status.capacity.cpu == "8" and .status.capacity.pods == "110" and
  .status.nodeInfo.kernelVersion == "5.15.0-127-generic" and
  .status.nodeInfo.osImage == "ubuntu 22.04" and
  .status.nodeInfo.containerRuntimeVersion == "containerd://1.7.24" and
  .status.nodeInfo.kubeletVersion == "v1.32.4" and
  .status.daemonEndpoints.kubeletEndpoint.Port == ($port | tonumber) and
  .status.addresses[0] == {type: "InternalIP", address: "127.0.0.1"} and
  ([.status.conditions[] | select(.type == "Ready")][0].status == "True") and
  .metadata.annotations["kubelet.gpuop.dev/simulated"] == "external" and
  .metadata.labels["example.com/rack"] == "r1" and
  .metadata.labels["kubernetes.io/hostname"] == "gpu-1" and
  .metadata.labels["feature.node.kubernetes.io/pci-10de.present"] == "true" and
  .metadata.labels["feature.node.kubernetes.io/pci-0302_10de.present"] == "true" and
  .metadata.labels["feature.node.kubernetes.io/kernel-version.major"] == "5" and
  .metadata.labels["feature.node.kubernetes.io/system-os_release.VERSION_ID"] == "22.04"
' "$T/gpu-1.json" >/dev/null || fail "gpu-1: $(jq -c '{labels: .metadata.labels, status}' "$T/gpu-1.json")"
jq -e '.metadata.labels["feature.node.kubernetes.io/pci-10de.present"] == null and
  .status.nodeInfo.containerRuntimeVersion == "containerd://1.7.24"' "$T/cpu-1.json" >/dev/null ||
    fail "cpu-1: $(jq -c .metadata.labels "$T/cpu-1.json")"

# the node root
R=$T/roots/gpu-1
grep -q '^ID=ubuntu$' "$R/etc/os-release" || fail "os-release"
[ -f "$R/etc/containerd/config.toml" ] || fail "containerd config"
[ -d "$R/usr/src/linux-headers-5.15.0-127-generic" ] || fail "kernel headers"
[ -S "$R/var/lib/kubelet/device-plugins/kubelet.sock" ] || fail "the Registration socket"
[ -S "$R/var/lib/kubelet/pod-resources/kubelet.sock" ] || fail "the PodResources socket"
[ "$(cat "$R/sys/module/nvidia/version")" = 550.127.05 ] || fail "host driver module"
# the driver's library a file of the node's root (a copy), not a link out of it
[ -f "$R/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127.05" ] &&
    [ ! -L "$R/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127.05" ] &&
    cmp -s "$R/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127.05" "$BUILD/libnvidia-ml.so.1" ||
    fail "host driver library"
if [ -x "$BUILD/sim-image-bin/nvidia-smi" ]; then
    [ "$(readlink "$R/usr/bin/nvidia-smi")" = "$BUILD/sim-image-bin/nvidia-smi" ] ||
        fail "host driver nvidia-smi"
fi
[ ! -e "$T/roots/cpu-1/sys/module/nvidia" ] || fail "a CPU node with a driver"
# the GPUs' PCI functions as sysfs lists them (8 H100, 3D controllers); a CPU node's list empty
pci=$(cat "$R"/sys/bus/pci/devices/*/vendor "$R"/sys/bus/pci/devices/*/class | sort | uniq -c | tr -s ' ')
[ "$pci" = " 8 0x030200
 8 0x10de" ] || fail "gpu-1's PCI functions: $pci"
[ -d "$T/roots/cpu-1/sys/bus/pci/devices" ] && [ -z "$(ls "$T/roots/cpu-1/sys/bus/pci/devices")" ] ||
    fail "cpu-1's PCI functions: $(ls "$T/roots/cpu-1/sys/bus/pci/devices" 2>&1)"

# a device plugin's registration becomes capacity and allocatable; an XID on one GPU lowers
# allocatable within 2 s (the device manager's change is posted at once; the status interval is 3 s)
res() { k get node gpu-1 -o json | jq -r --arg r "$1" '.status[$r]["nvidia.com/gpu"] // ""'; }
res_is() { [ "$(res "$1")" = "$2" ]; }
env -u KUBELET_SOCKET -u CONFIG_FILE -u MIG_STRATEGY -u DEVICE_LIST_STRATEGY \
    GPUOP_NVML_LIBRARY="$BUILD/libnvidia-ml.so.1" GPUOP_SIM_FLEET="$SRC/sim/fleets/dgx-h100.yaml" \
    GPUOP_SIM_STATE="$R/var/lib/gpuop-sim/nvml" GPUOP_SIM_ROOT="$R" DP_HEALTH_RECOVERY_PERIOD=0 \
    "$BUILD/gpuop" device-plugin --kubelet-socket "$R/var/lib/kubelet/device-plugins/kubelet.sock" \
    >"$T/dp.log" 2>&1 &
DP_PID=$!
pids+=("$DP_PID")
poll 10 res_is allocatable 8
[ "$(res capacity)" = 8 ] && [ "$(res allocatable)" = 8 ] ||
    fail "nvidia.com/gpu: capacity $(res capacity) allocatable $(res allocatable); $(tail -3 "$T/dp.log")"
GPUOP_SIM_FLEET="$SRC/sim/fleets/dgx-h100.yaml" GPUOP_SIM_STATE="$R/var/lib/gpuop-sim/nvml" \
    "$BUILD/gpuop-sim" inject xid --gpu 5 --code 79 >/dev/null || fail "inject an XID"
start=$(date +%s%N)
poll 2 res_is allocatable 7
ms=$((($(date +%s%N) - start) / 1000000))
[ "$(res allocatable)" = 7 ] || fail "allocatable after an XID: $(res allocatable)"
[ $ms -le 2000 ] || fail "allocatable took $ms ms to follow the XID"
[ "$(res capacity)" = 8 ] || fail "capacity after an XID: $(res capacity)"
kill "$DP_PID"
wait_exit "$DP_PID" 10

# local feature files become labels, and go when the file drops them
lbl() { k get node gpu-1 -o json | jq -r --arg k "$1" '.metadata.labels[$k] // ""'; }
lbl_is() { [ "$(lbl "$1")" = "$2" ]; }
F=$R/etc/kubernetes/node-feature-discovery/features.d
printf 'nvidia.com/gpu.count=8\nnvidia.com/gpu.product=NVIDIA-H100\nexample.com/denied=1\n' >"$F/gfd"
poll 5 lbl_is nvidia.com/gpu.count 8
[ "$(lbl nvidia.com/gpu.count)" = 8 ] || fail "features.d label"
[ -z "$(lbl example.com/denied)" ] || fail "a denied namespace became a label"
printf 'nvidia.com/gpu.count=8\n' >"$F/gfd"
poll 5 lbl_is nvidia.com/gpu.product ""
[ -z "$(lbl nvidia.com/gpu.product)" ] || fail "a dropped feature stayed"
[ "$(lbl nvidia.com/gpu.count)" = 8 ] || fail "a kept feature went"

# the Lease, owned by the Node
k -n kube-node-lease get lease gpu-1 -o json | jq -e '.spec.holderIdentity == "gpu-1" and
  .spec.leaseDurationSeconds == 40 and .metadata.ownerReferences[0].kind == "Node"' >/dev/null ||
    fail "lease: $(k -n kube-node-lease get lease gpu-1 -o json)"

# the kubelet endpoint
curl -fsS "http://127.0.0.1:$PORT/healthz" | grep -q ok || fail "/healthz"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$((PORT + 1))/nope")
[ "$code" = 404 ] || fail "unknown path: $code"

# a node deleted meanwhile (or an API server restarted empty) is registered again
k delete node cpu-1 >/dev/null || fail "delete node"
kv() { k get node cpu-1 -o json 2>/dev/null |
    jq -r '.metadata.labels["feature.node.kubernetes.io/kernel-version.major"] // ""'; }
kv_is() { [ "$(kv)" = "$1" ]; }
poll 5 kv_is 5
[ "$(kv)" = 5 ] || fail "cpu-1 not registered again with its labels"

# SIGTERM: exit 0
stop_kubelet_sim
curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && fail "endpoint still serving"

# arm64 nodes where nothing runs aarch64 programs here (no qemu on PATH and no binfmt_misc entry):
# they run this machine's build, and kubelet-sim says so once, with the reason
if [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    echo "SKIP (part): binfmt_misc runs aarch64 programs here: no fallback to check"
else
    { cluster_head; node g1 roots/g1 "  arch: arm64"; node g2 roots/g2 "  arch: arm64"; } >"$T/arm64-2.yaml"
    L=$T/kubelet-sim-arm64.log
    PATH=/nonexistent "$KL" --cluster "$T/arm64-2.yaml" --kubeconfig "$KUBECONFIG" \
        --root-base "$T/roots" --no-netns --kubelet-port $PORT >"$L" 2>&1 &
    KL_PID=$!
    pids+=("$KL_PID")
    wait_for -p "$KL_PID" 30 "kubelet-sim serves 2 arm64 nodes" grep -q 'serving nodes=2' "$L"
    [ "$(grep -c "arm64 nodes run this machine's programs" "$L")" = 1 ] ||
        fail "the fallback not said once: $(cat "$L")"
    grep -q 'reason=".*qemu-aarch64-static' "$L" || grep -q 'reason="no arm64 cross tree' "$L" ||
        fail "the fallback's reason: $(grep arm64 "$L")"
    [ ! -e "$T/roots/g1/var/lib/gpuop-sim/arm64" ] || fail "shims written without qemu"
    stop_kubelet_sim
fi
echo "ok"
