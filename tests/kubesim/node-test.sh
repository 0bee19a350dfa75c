#!/bin/bash
# kubesim's nodes look like nodes a kubelet registered: the annotations every kubelet writes and
# a full nodeInfo, on the default template (--nodes) and on the demo cluster (--load).
set -u
CURL=$(command -v curl) || { echo "curl not installed: skipping"; exit 77; }
JQ=$(command -v jq) || { echo "jq not installed: skipping"; exit 77; }
BUILD=${GPUOP_BUILD_ROOT:?}
SRC=${GPUOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
KUBESIM=$BUILD/kubesim
. "$(dirname "$0")/lib.sh"

# every node: the kubelet's annotations and the nodeInfo fields clients read
check_nodes() {
    local what=$1 n
    "$CURL" -sf "$URL/api/v1/nodes" >"$T/nodes" || fail "$what: list nodes"
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

start --nodes 3
check_nodes "--nodes"
stop
start --load "$SRC/sim/clusters/demo.yaml"
check_nodes "demo cluster"
stop
echo "kubesim nodes: ok"
