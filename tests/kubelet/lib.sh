# SPDX-License-Identifier: Apache-2.0
# Shared by the tests that run simulated nodes (sourced): the test library (tests/lib/test-lib.sh:
# $T, fail, wait_for, start_kubesim, start_kubelet_sim, sa_kubeconfig, ...) with the pinned
# kubectl, and what those tests ask of the nodes and the operand pods. Skips (exit 77) without the
# tools or without root (kubelet-sim's nodes need network and mount namespaces).
. "$(dirname "${BASH_SOURCE[0]}")/../lib/test-lib.sh"
need_tools
need_root "kubelet-sim's nodes (network and mount namespaces)"
k() { $K "$@"; }
# What the tests ask of the nodes and the operand pods (in gpu-operator):
label() { k get node "$1" -o jsonpath="{.metadata.labels.${2//./\\.}}"; }
is_label() { [ "$(label "$1" "$2")" = "$3" ]; }
# alloc NODE RESOURCE: the node's allocatable RESOURCE (nvidia.com/gpu)
alloc() { k get node "$1" -o jsonpath="{.status.allocatable.${2//./\\.}}"; }
want_alloc() { [ "$(alloc "$1" "$2")" = "$3" ]; }
# pods_of APP: the nodes of the pods labelled app=APP, sorted, each followed by a space
pods_of() { k -n gpu-operator get pods -l "app=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | tr '\n' ' '; }
# ready_validators: how many validator pods are Ready
ready_validators() {
    k -n gpu-operator get pods -l app=nvidia-operator-validator \
        -o jsonpath='{range .items[*]}{.spec.nodeName}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
        grep -c '=True'
}

# sim_driver_ds NAMESPACE VERSION: the YAML of a DaemonSet running the simulated driver
# container (sim/images: it loads VERSION's driver on each node, device nodes under /run/nvidia)
sim_driver_ds() {
    cat <<EOF
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-driver, namespace: $1}
spec:
  selector: {matchLabels: {app: nvidia-driver}}
  template:
    metadata: {labels: {app: nvidia-driver}}
    spec:
      containers:
      - name: nvidia-driver-ctr
        image: nvcr.io/nvidia/driver:$2-ubuntu22.04
        command: [nvidia-driver]
        args: [init]
        env: [{name: SIM_DRIVER_BUILD_SECONDS, value: "0.2"}]
        securityContext: {privileged: true}
        volumeMounts: [{name: run-nvidia, mountPath: /run/nvidia}]
      volumes: [{name: run-nvidia, hostPath: {path: /run/nvidia, type: DirectoryOrCreate}}]
EOF
}

# sim_cluster: the head of a kubelet-sim cluster file (as sim/clusters/*.yaml); sim_node NAME FLEET
# ROOT [KEY: VALUE...]: one node, by default an Ubuntu 22.04 containerd host on kernel
# 5.15.0-127-generic with its headers; each KEY given replaces that default or adds a field.
sim_cluster() { printf 'apiVersion: gpuop.dev/v1alpha1\nkind: SimCluster\nnodes:\n'; }
sim_node() {
    local name=$1 fleet=$2 root=$3 l k
    shift 3
    local -A given=()
    for l in "$@"; do given[${l%%:*}]=1; done
    printf -- '- name: %s\n  fleet: %s\n  root: %s\n' "$name" "$fleet" "$root"
    for l in 'kernel: 5.15.0-127-generic' 'os: {id: ubuntu, versionId: "22.04"}' 'runtime: containerd' \
        'kernelHeaders: [5.15.0-127-generic]'; do
        k=${l%%:*}
        [ -n "${given[$k]:-}" ] || printf '  %s\n' "$l"
    done
    for l in "$@"; do printf '  %s\n' "$l"; done
}

# kl_start_cluster API_IP CLUSTER BRIDGE SUBNET NODES: kubesim with TLS on API_IP with the
# operator's RBAC loaded, kubelet-sim with CLUSTER's NODES nodes, then the CRDs.
kl_start_cluster() {
    start_kubesim --api-ip "$1" --tls --load "$S/deploy/rbac/operator.yaml"
    start_kubelet_sim "$2" "$5" --bridge "$3" --subnet "$4"
    k apply -f "$S/deploy/crds/" >/dev/null || fail "apply the CRDs"
}

# kl_start_operator [FLAGS...]: the operator under its shipped ServiceAccount (kubeconfig
# $T/operator.kubeconfig, made once), logging to $T/operator.log (appended: a restarted operator
# keeps the earlier lines). Sets KL_OPERATOR_PID.
kl_start_operator() {
    [ -s "$T/operator.kubeconfig" ] || sa_kubeconfig "$T/operator.kubeconfig"
    "$B/gpuop" operator --kubeconfig "$T/operator.kubeconfig" --namespace gpu-operator "$@" \
        >>"$T/operator.log" 2>&1 &
    KL_OPERATOR_PID=$!
    pids+=($KL_OPERATOR_PID)
}
