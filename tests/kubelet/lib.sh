# SPDX-License-Identifier: Apache-2.0
# Shared by the tests that run the operator on kubelet-sim's simulated nodes (sourced after
# tests/operator/lib.sh, as root): kubesim on an address of its own on lo, kubelet-sim with a
# cluster file on a bridge and subnet of its own, the CRDs, and the operator under its shipped
# ServiceAccount. Each test passes its own names (HELPER-COMMON: one bridge, /24 and API address
# per test); everything started goes into $pids and the address is removed at exit.
# Needs B, S, T and KUBECTL (scripts/tools-env.sh).

# kl_start_cluster API_IP CLUSTER_FILE BRIDGE SUBNET NODES: kubesim on API_IP (TLS, the
# operator's RBAC loaded), kubelet-sim with CLUSTER_FILE (roots under $T/roots), then waits for
# NODES Ready nodes and applies the CRDs. Exports KUBECONFIG.
kl_start_cluster() {
    local api=$1 cluster=$2 bridge=$3 subnet=$4 want=$5
    KL_API_IP=$api
    ip addr add "$api/32" dev lo 2>/dev/null
    trap 'cleanup; ip addr del "$KL_API_IP/32" dev lo 2>/dev/null' EXIT
    "$B/kubesim" --kubeconfig-out "$T/kubeconfig" --listen "$api:0" --allow-remote --tls \
        --load "$S/deploy/rbac/operator.yaml" >"$T/kubesim.log" 2>&1 &
    pids+=($!)
    wait_for 10 "kubesim" test -s "$T/kubeconfig"
    export KUBECONFIG=$T/kubeconfig
    wait_for 10 "kubesim answering" "$KUBECTL" --request-timeout=10s get ns
    "$B/kubelet-sim" --cluster "$cluster" --kubeconfig "$KUBECONFIG" --root-base "$T/roots" \
        --bridge "$bridge" --subnet "$subnet" --backoff-scale 0.01 --node-status-interval 1s \
        >"$T/kubelet-sim.log" 2>&1 &
    pids+=($!)
    kl_ready_nodes() {
        local out
        out=$("$KUBECTL" --request-timeout=10s get nodes --no-headers 2>/dev/null) || return 1
        [ "$(grep -c ' Ready ' <<<"$out")" = "$1" ]
    }
    wait_for 30 "$want Ready nodes" kl_ready_nodes "$want"
    "$KUBECTL" --request-timeout=10s apply -f "$S/deploy/crds/" >/dev/null || fail "apply the CRDs"
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
