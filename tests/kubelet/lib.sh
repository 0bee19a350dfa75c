# SPDX-License-Identifier: Apache-2.0
# Shared by the tests that run simulated nodes (sourced): kubesim on an API address of its own
# and kubelet-sim's nodes against it, every pod a process. Needs B (build root) and S (source
# root) set by the caller; brings in tests/operator/lib.sh ($T, $pids, wait_for, sa_kubeconfig,
# ...) and the pinned kubectl. Skips (exit 77) without the tools or without root (kubelet-sim's
# nodes need network and mount namespaces).
. "$S/scripts/tools-env.sh" || { echo "$TOOLS_MISSING: skipped"; exit 77; }
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: kubelet-sim's nodes need root (network and mount namespaces)"
    exit 77
fi
. "$S/tests/operator/lib.sh"
K="$KUBECTL --request-timeout=10s"
k() { $K "$@"; }
# fail MESSAGE: the logs' tails, the pods and the latest Events, then exit 1
fail() {
    echo "FAIL: $*"
    for f in "$T"/*.log; do echo "--- $f"; tail -n 30 "$f"; done
    k get pods -A -o wide 2>/dev/null
    k get events -A -o jsonpath='{range .items[*]}{.involvedObject.name} {.reason} {.message}{"\n"}{end}' 2>/dev/null |
        sort -u -k2 | tail -n 25
    exit 1
}
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

# kl_start_kubesim API_IP [FLAGS...]: kubesim with TLS on API_IP (added to lo, removed at exit;
# an address each test has to itself, so that only the host and its nodes reach it), logging to
# $T/kubesim.log; sets and exports KUBECONFIG once kubesim answers.
kl_start_kubesim() {
    KL_API_IP=$1
    shift
    ip addr add "$KL_API_IP/32" dev lo 2>/dev/null
    trap 'cleanup; ip addr del "$KL_API_IP/32" dev lo 2>/dev/null' EXIT
    "$B/kubesim" --kubeconfig-out "$T/kubeconfig" --listen "$KL_API_IP:0" --allow-remote --tls \
        "$@" >"$T/kubesim.log" 2>&1 &
    pids+=($!)
    wait_for 10 "kubesim" test -s "$T/kubeconfig"
    export KUBECONFIG=$T/kubeconfig
    wait_for 10 "kubesim answering" k get ns
}

# kl_start_nodes CLUSTER BRIDGE SUBNET NODES [FLAGS...]: kubelet-sim with CLUSTER's nodes, their
# roots under $T/roots, on their own bridge and /24, fast restarts and node status every second;
# logs to $T/kubelet-sim.log; its pid in KL_NODES_PID; returns once NODES nodes are Ready.
kl_start_nodes() {
    local cluster=$1 bridge=$2 subnet=$3 n=$4
    shift 4
    "$B/kubelet-sim" --cluster "$cluster" --kubeconfig "$KUBECONFIG" --root-base "$T/roots" \
        --bridge "$bridge" --subnet "$subnet" --backoff-scale 0.01 --node-status-interval 1s \
        "$@" >"$T/kubelet-sim.log" 2>&1 &
    KL_NODES_PID=$!
    pids+=($KL_NODES_PID)
    wait_for 30 "$n Ready nodes" sh -c "[ \$($K get nodes --no-headers 2>/dev/null | grep -c ' Ready ') = $n ]"
}

# kl_start_cluster API_IP CLUSTER BRIDGE SUBNET NODES: kubesim on API_IP with the operator's RBAC
# loaded, kubelet-sim with CLUSTER's NODES nodes (kl_start_nodes), then the CRDs.
kl_start_cluster() {
    local api=$1 cluster=$2 bridge=$3 subnet=$4 want=$5
    kl_start_kubesim "$api" --load "$S/deploy/rbac/operator.yaml"
    kl_start_nodes "$cluster" "$bridge" "$subnet" "$want"
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
