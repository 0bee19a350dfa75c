#!/bin/bash
# kubesim's nodes look like nodes a kubelet registered: the annotations every kubelet writes and
# a full nodeInfo, on the default template (--nodes) and on the demo cluster (--load).
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
CURL=$(command -v curl) || skip "curl not installed"
JQ=$(command -v jq) || skip "jq not installed"

# every node: the kubelet's annotations and the nodeInfo fields clients read
check_nodes() {
    local what=$1 n
    "$CURL" -sf "$KS_URL/api/v1/nodes" >"$T/nodes" || fail "$what: list nodes"
    n=$("$JQ" '.items | length' "$T/nodes")
    [ "$n" -gt 0 ] || fail "$what: no nodes"
    for a in node.alpha.kubernetes.io/ttl volumes.kubernetes.io/controller-managed-attach-detach; do
        "$JQ" -e --arg a "$a" 'all(.items[]; .metadata.annotations[$a] | type == "string")' \
            "$T/nodes" >/dev/null || fail "$what: a node without annotation $a"
    done
    for f in machineID systemUUID bootID kernelVersion osImage containerRuntimeVersion \
             kubeletVersion kubeProxyVersion operatingSystem architecture; do
        "$JQ" -e --arg f "$f" 'all(.items[]; .status.nodeInfo[$f] | type == "string")' \
            "$T/nodes" >/dev/null || fail "$what: a node without nodeInfo.$f"
    done
}

start_kubesim --nodes 3
check_nodes "--nodes"
stop_kubesim
start_kubesim --load "$S/sim/clusters/demo.yaml"
check_nodes "demo cluster"
stop_kubesim
echo "kubesim nodes: ok"
