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

# nodes made from one template share its values: a write to one node (a label, an annotation,
# its addresses and nodeInfo through /status, its images) never shows in another
check_apart() {
    local want
    "$CURL" -sf "$KS_URL/api/v1/nodes/node-00001" >"$T/before" || fail "get node-00001"
    "$CURL" -sf -X PATCH -H 'Content-Type: application/merge-patch+json' \
        -d '{"metadata":{"labels":{"kubernetes.io/hostname":"x","z":"1"},"annotations":{"node.alpha.kubernetes.io/ttl":"9"}},"spec":{"podCIDR":"10.0.0.0/24"}}' \
        "$KS_URL/api/v1/nodes/node-00000" >/dev/null || fail "patch node-00000"
    "$CURL" -sf -X PATCH -H 'Content-Type: application/json-patch+json' \
        -d '[{"op":"replace","path":"/status/nodeInfo/bootID","value":"b"},{"op":"replace","path":"/status/addresses/0/address","value":"1.2.3.4"},{"op":"add","path":"/status/capacity/x","value":"1"}]' \
        "$KS_URL/api/v1/nodes/node-00000/status" >/dev/null || fail "patch node-00000/status"
    "$CURL" -sf "$KS_URL/api/v1/nodes/node-00000" >"$T/n0" || fail "get node-00000"
    "$JQ" -e '.metadata.labels.z == "1" and .status.nodeInfo.bootID == "b" and .status.capacity.x == "1"' \
        "$T/n0" >/dev/null || fail "the writes to node-00000 did not land"
    "$CURL" -sf "$KS_URL/api/v1/nodes/node-00001" >"$T/after" || fail "get node-00001"
    cmp -s "$T/before" "$T/after" || fail "a write to node-00000 showed in node-00001"
    want=$("$JQ" -c '.status.capacity' "$T/before")
    "$CURL" -sf "$KS_URL/api/v1/nodes/node-00002" | "$JQ" -e --argjson w "$want" \
        '.status.capacity == $w and .metadata.labels.z == null' >/dev/null ||
        fail "a write to node-00000 showed in node-00002"
}

start_kubesim --nodes 3
check_nodes "--nodes"
check_apart
stop_kubesim
start_kubesim --load "$S/sim/clusters/demo.yaml"
check_nodes "demo cluster"
stop_kubesim
echo "kubesim nodes: ok"
