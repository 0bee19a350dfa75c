# SPDX-License-Identifier: Apache-2.0
# Shared by the kubelet-sim end-to-end tests (sourced after tests/operator/lib.sh, which gives
# $T, $pids, fail and wait_for): the API server's address on lo, kubesim listening there, and
# kubelet-sim with a cluster file on its own bridge and subnet. Needs root; B and S set.

# kl_api_address ADDR: ADDR/32 on lo for the API server, removed at exit (with cleanup).
kl_api_address() {
    KL_API_IP=$1
    ip addr add "$KL_API_IP/32" dev lo 2>/dev/null
    trap 'cleanup; ip addr del "$KL_API_IP/32" dev lo 2>/dev/null' EXIT
}

# kl_start_kubesim [FLAGS...]: kubesim on $KL_API_IP, logging to $T/kubesim.log; exports
# KUBECONFIG ($T/kubeconfig) once kubesim answers.
kl_start_kubesim() {
    "$B/kubesim" --kubeconfig-out "$T/kubeconfig" --listen "$KL_API_IP:0" --allow-remote "$@" \
        >"$T/kubesim.log" 2>&1 &
    pids+=($!)
    wait_for 10 "kubesim" test -s "$T/kubeconfig"
    export KUBECONFIG=$T/kubeconfig
    wait_for 10 "kubesim answering" "$KUBECTL" --request-timeout=10s get ns
}

# kl_start_kubelet_sim CLUSTER BRIDGE SUBNET NODES [FLAGS...]: kubelet-sim with the nodes' roots
# under $T/roots, logging to $T/kubelet-sim.log; waits for NODES Ready nodes. KL_PID is its pid.
kl_start_kubelet_sim() {
    local cluster=$1 bridge=$2 subnet=$3 nodes=$4
    shift 4
    "$B/kubelet-sim" --cluster "$cluster" --kubeconfig "$KUBECONFIG" --root-base "$T/roots" \
        --bridge "$bridge" --subnet "$subnet" --backoff-scale 0.01 --node-status-interval 1s "$@" \
        >>"$T/kubelet-sim.log" 2>&1 &
    KL_PID=$!
    pids+=($KL_PID)
    wait_for 30 "$nodes Ready nodes" sh -c \
        "[ \$('$KUBECTL' --request-timeout=10s get nodes --no-headers 2>/dev/null | grep -c ' Ready ') = $nodes ]"
}
