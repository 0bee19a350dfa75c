#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpuop gather against kubesim's demo cluster with the operator's objects in place: the bundle
# holds status.json (the same as gpuop status -o json), the ClusterPolicy, every gpuop object in
# YAML that reads back, each GPU node's facts, the namespace's Events and the pods' logs (one pod
# on a node whose "kubelet" is this test's HTTP server, serving a log with credentials); no
# Secret and no credential is anywhere in it (a Secret in the namespace, tokens in a ConfigMap,
# an env value, an annotation and the log); its index lists what it holds and what it could not
# read (the logs kubesim's own nodes do not keep) and why. Then: a bound that leaves objects out
# (the file under it, the index saying so), an API server that cannot be reached (the local
# facts, what is missing), and the exit codes (1: nowhere to write; 2: bad flags).
set -euo pipefail
B=${GPUOP_BUILD_ROOT:?}
S=${GPUOP_SOURCE_ROOT:?}
. "$S/tests/lib/test-lib.sh"
need_tools
need_cmd jq
JQ=$(command -v jq)
/usr/bin/python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml not installed"
need_built "$B/kubesim"

start_kubesim --load "$S/sim/clusters/demo.yaml" --pod-ready-delay 200ms
# the CRDs this cluster uses (not the GPUCluster's, 58 kB: the size bound below is sized for the
# bundle of a cluster without it)
for crd in "$S"/deploy/crds/*.yaml; do
    [ "${crd##*/}" = nvidia.com_gpuclusters.yaml ] || $K apply -f "$crd" >/dev/null
done
P=$(free_port)
"$B/gpuop" operator --kubeconfig "$KUBECONFIG" --namespace gpu-operator --operand-image gpuop:test \
    --metrics-listen "127.0.0.1:$P" --leader-elect false >"$T/operator.log" 2>&1 &
OP=$!
pids+=($OP)
wait_for 20 "operator ready" curl -sf "127.0.0.1:$P/readyz"
$K apply -f "$S/tests/operator/fixtures/clusterpolicy-full.yaml" >/dev/null
wait_for 30 "ClusterPolicy ready" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.state}')\" = ready ]"
# what the operator wrote stays; it stops so that the cluster holds still for the comparison
kill $OP
wait $OP 2>/dev/null || true

# credentials where a careless bundle would pick them up
SECRET_VALUE=s3cr3t-value-in-a-secret-0001
CM_TOKEN=cm-token-value-0002
ENV_TOKEN=env-token-value-0003
ANN_BEARER=annotation-bearer-value-0004
LOG_BEARER=log-bearer-value-0005
LOG_PASSWORD=log-password-value-0006
$K -n gpu-operator create secret generic registry-creds --from-literal=password=$SECRET_VALUE >/dev/null
$K -n gpu-operator create configmap leaky --from-literal=kubeconfig="users:
- name: admin
  user:
    token: $CM_TOKEN
" >/dev/null
$K -n gpu-operator annotate configmap leaky "example.com/probe=curl -H 'Authorization: Bearer $ANN_BEARER' https://x" >/dev/null

# a node whose kubelet is this test's HTTP server: kubesim proxies the pod's log to it
KL_PORT=$(free_port)
cat >"$T/kubelet.py" <<'PY'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(sys.argv[2], "a") as f:
            f.write(self.path + "\n")
        body = open(sys.argv[3], "rb").read()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
printf 'starting\nGET /v1 Authorization: Bearer %s\nlogin password=%s ok\nlast line\n' \
    "$LOG_BEARER" "$LOG_PASSWORD" >"$T/container.log"
/usr/bin/python3 "$T/kubelet.py" "$KL_PORT" "$T/kubelet-requests" "$T/container.log" &
pids+=($!)
$K apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: logs-node
  annotations: {kubelet.gpuop.dev/simulated: external}
  labels: {kubernetes.io/hostname: logs-node}
EOF
$K patch node logs-node --subresource=status --type merge -p \
    "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"127.0.0.1\"}],\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":$KL_PORT}}}}" >/dev/null
$K apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: with-logs, namespace: gpu-operator}
spec:
  nodeName: logs-node
  containers:
  - name: main
    image: busybox
    env:
    - {name: API_TOKEN, value: $ENV_TOKEN}
    - {name: LOG_LEVEL, value: debug}
EOF
wait_for 10 "the fake kubelet answering" curl -sf "127.0.0.1:$KL_PORT/healthz"

# 1. the bundle
rc=0
"$B/gpuop" gather --kubeconfig "$KUBECONFIG" --output "$T/bundle.tar.gz" --since 1h --tail 50 \
    >"$T/out" 2>"$T/gather.log" || rc=$?
[ "$rc" = 0 ] || fail "gpuop gather exited $rc"
[ "$(cat "$T/out")" = "$T/bundle.tar.gz" ] || fail "stdout: $(cat "$T/out"), want the bundle's path"
[ "$(stat -c %a "$T/bundle.tar.gz")" = 600 ] || fail "the bundle's mode is $(stat -c %a "$T/bundle.tar.gz"), want 600"
ls "$T"/.bundle.tar.gz.tmp.* 2>/dev/null && fail "a temporary file was left"
gzip -t "$T/bundle.tar.gz" || fail "not a gzip file"
tar tzf "$T/bundle.tar.gz" >"$T/listing"
mkdir "$T/x"
tar xzf "$T/bundle.tar.gz" -C "$T/x"
R=$T/x/bundle
[ -d "$R" ] || fail "no bundle/ folder: $(head -3 "$T/listing")"
has() { grep -qx "bundle/$1" "$T/listing" || fail "not in the bundle: $1"; }
has MANIFEST
has manifest.json
has local.yaml
has status.json
has cluster/clusterpolicies/gpu-cluster-policy.yaml
has cluster/customresourcedefinitions/clusterpolicies.nvidia.com.yaml
has cluster/runtimeclasses/nvidia.yaml
has namespaces/gpu-operator/namespace.yaml
has namespaces/gpu-operator/daemonsets/nvidia-device-plugin-daemonset.yaml
has namespaces/gpu-operator/configmaps/leaky.yaml
has namespaces/gpu-operator/pods/with-logs.yaml
has namespaces/gpu-operator/events.yaml
has nodes/dgx-h100-1.yaml
has logs/with-logs/main.log
# no Secret, not even its name; no credential anywhere
! grep -i secret "$T/listing" || fail "a Secret in the listing"
for v in $SECRET_VALUE registry-creds $CM_TOKEN $ENV_TOKEN $ANN_BEARER $LOG_BEARER $LOG_PASSWORD; do
    ! grep -rl -- "$v" "$R" || fail "$v is in the bundle"
done
grep -q "Authorization: <redacted>" "$R/logs/with-logs/main.log" || fail "log: $(cat "$R/logs/with-logs/main.log")"
grep -q "password=<redacted> ok" "$R/logs/with-logs/main.log" || fail "log: $(cat "$R/logs/with-logs/main.log")"
grep -q "^last line$" "$R/logs/with-logs/main.log" || fail "log: $(cat "$R/logs/with-logs/main.log")"
grep -q 'tailLines=50' "$T/kubelet-requests" || fail "kubelet asked: $(cat "$T/kubelet-requests")"
grep -q 'sinceSeconds=3600' "$T/kubelet-requests" || fail "kubelet asked: $(cat "$T/kubelet-requests")"
grep -q 'token: <redacted>' "$R/namespaces/gpu-operator/configmaps/leaky.yaml" || fail "configmap: $(cat "$R/namespaces/gpu-operator/configmaps/leaky.yaml")"
# every YAML reads back; no managedFields
/usr/bin/python3 - "$R" <<'PY' || fail "YAML in the bundle"
import os, sys, yaml
n = 0
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        if f.endswith(".yaml"):
            doc = yaml.safe_load(open(os.path.join(d, f)))
            assert isinstance(doc, dict), f
            assert "managedFields" not in doc.get("metadata", {}), f
            n += 1
pod = yaml.safe_load(open(os.path.join(sys.argv[1], "namespaces/gpu-operator/pods/with-logs.yaml")))
env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
assert env == {"API_TOKEN": "<redacted>", "LOG_LEVEL": "debug"}, env
node = yaml.safe_load(open(os.path.join(sys.argv[1], "nodes/dgx-h100-1.yaml")))
assert node["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3", node
assert any(c["type"] == "Ready" for c in node["conditions"]), node
print("ok: %d YAML files read back" % n)
PY
# status.json is gpuop status -o json
"$B/gpuop" status --kubeconfig "$KUBECONFIG" -o json >"$T/status.json"
"$JQ" -S . "$T/status.json" >"$T/a" && "$JQ" -S . "$R/status.json" >"$T/b"
diff -u "$T/a" "$T/b" || fail "status.json differs from gpuop status -o json"
# the index: what is there, with its sizes and redactions; what is not, and why
m() { "$JQ" -e "$1" "$R/manifest.json" >/dev/null || fail "manifest.json: $1 does not hold"; }
m '.facts.server | test("^https?://127.0.0.1:[0-9]+$")'
m '.facts.namespace == "gpu-operator"'
m '[.collected[].path] | index("status.json") != null'
m '.collected[] | select(.path == "logs/with-logs/main.log") | .redactions == 2'
m '.collected[] | select(.path == "namespaces/gpu-operator/pods/with-logs.yaml") | .redactions >= 1'
m '[.collected[].path | select(test("secret"; "i"))] == []'
# the demo's own nodes keep no logs: each operand's log is listed as not collected, with why
m '[.missing[] | select(.what | startswith("logs/nvidia-device-plugin-daemonset-"))] | length > 0'
m '.missing[] | select(.what | startswith("logs/nvidia-device-plugin-daemonset-")) | .why | test("not found|NotFound")'
m '.unlisted == {"collected": 0, "missing": 0}'
# the text index says the same
grep -q '^Collected: ' "$R/MANIFEST" && grep -q '^Not collected: ' "$R/MANIFEST" || fail "MANIFEST: $(head -20 "$R/MANIFEST")"
grep -q '^  logs/with-logs/main.log  [0-9]* bytes  2 redacted  log of gpu-operator/with-logs container main' "$R/MANIFEST" ||
    fail "MANIFEST: $(grep with-logs "$R/MANIFEST")"
# the same through kubectl's plugin
if [ -L "$B/kubectl-gpuop" ]; then
    PATH=$B:$PATH "$KUBECTL" gpuop gather -o "$T/plugin.tar.gz" >/dev/null 2>"$T/plugin.log" ||
        fail "kubectl gpuop gather: $(cat "$T/plugin.log")"
    gzip -t "$T/plugin.tar.gz" || fail "kubectl gpuop gather wrote no gzip"
fi
echo "ok: the bundle ($(stat -c %s "$T/bundle.tar.gz") bytes, $(wc -l <"$T/listing") files)"

# 2. the size bound: incompressible ConfigMaps that do not all fit
for i in 1 2 3; do
    head -c 150000 /dev/urandom | base64 -w0 >"$T/blob$i"
    $K -n gpu-operator create configmap "big-$i" --from-file=blob="$T/blob$i" >/dev/null
done
"$B/gpuop" gather --kubeconfig "$KUBECONFIG" -o "$T/small.tar.gz" --max-size 256Ki >/dev/null 2>"$T/gather.log" ||
    fail "gpuop gather --max-size 256Ki"
size=$(stat -c %s "$T/small.tar.gz")
[ "$size" -le 262144 ] || fail "the bundle is $size bytes, over --max-size 256Ki"
mkdir "$T/s" && tar xzf "$T/small.tar.gz" -C "$T/s"
q() { "$JQ" -e "$1" "$T/s/small/manifest.json" >/dev/null || fail "small manifest.json: $1 does not hold: $("$JQ" -c .missing "$T/s/small/manifest.json" | head -c 2000)"; }
q '[.missing[] | select(.why | startswith("the size bound"))] | length >= 1'
q '[.missing[] | select(.what | test("configmaps/big-"))] | length >= 1'
# what fits once compressed goes in (a 200 kB object in a 256 KiB bound)
q '[.collected[] | select(.path | test("configmaps/big-"))] | length == 1'
q '[.collected[].path] | index("status.json") != null'
grep -q 'the size bound' "$T/s/small/MANIFEST" || fail "MANIFEST does not say what the bound left out"
echo "ok: --max-size 256Ki: $size bytes, $("$JQ" '[.missing[] | select(.why | startswith("the size bound"))] | length' "$T/s/small/manifest.json") entries left out and listed"

# 3. an API server that cannot be reached: the local facts, what is missing; no credential
DEAD=$(free_port)
sed -E "s|server: https?://[^ ]*|server: https://127.0.0.1:$DEAD|" "$KUBECONFIG" >"$T/dead.kubeconfig"
grep -q "127.0.0.1:$DEAD" "$T/dead.kubeconfig" || fail "no server line in $KUBECONFIG"
token=$(sed -n 's/^ *token: //p' "$KUBECONFIG" | head -1)
rc=0
"$B/gpuop" gather --kubeconfig "$T/dead.kubeconfig" -o "$T/dead.tar.gz" >/dev/null 2>"$T/gather.log" || rc=$?
[ "$rc" = 0 ] || fail "unreachable API server: exit $rc"
mkdir "$T/d" && tar xzf "$T/dead.tar.gz" -C "$T/d"
[ -s "$T/d/dead/local.yaml" ] || fail "no local facts"
grep -q "server: https\?://127.0.0.1:$DEAD" "$T/d/dead/local.yaml" || fail "local.yaml: $(cat "$T/d/dead/local.yaml")"
d() { "$JQ" -e "$1" "$T/d/dead/manifest.json" >/dev/null || fail "dead manifest.json: $1 does not hold"; }
d '[.collected[].path] == ["local.yaml"]'
d '.missing[] | select(.what == "the cluster") | .why | test("could not be used.*refused")'
d '.missing[] | select(.what == "nodes") | .why | startswith("not read")'
if [ -n "$token" ]; then
    ! grep -rl -- "$token" "$T/d" || fail "the kubeconfig's token is in the bundle"
fi
# no kubeconfig at all: the same, the reason named
rc=0
"$B/gpuop" gather --kubeconfig "$T/no-such-kubeconfig" -o "$T/nokc.tar.gz" >/dev/null 2>"$T/gather.log" || rc=$?
[ "$rc" = 0 ] || fail "no kubeconfig: exit $rc"
tar xzf "$T/nokc.tar.gz" -O nokc/manifest.json | "$JQ" -e '.missing[] | select(.what == "the cluster") | .why | test("no API client.*no-such-kubeconfig")' >/dev/null ||
    fail "no kubeconfig: $(tar xzf "$T/nokc.tar.gz" -O nokc/MANIFEST)"
echo "ok: API server unreachable, or no kubeconfig: a partial bundle naming what is missing"

# 4. RBAC: a ServiceAccount that may read nodes and namespaces only: those are collected, the
# rest is listed as forbidden
$K -n default create serviceaccount limited >/dev/null
$K create clusterrole gather-limited --verb=get,list --resource=nodes,namespaces >/dev/null
$K create clusterrolebinding gather-limited --clusterrole=gather-limited --serviceaccount=default:limited >/dev/null
sa_kubeconfig "$T/limited.kubeconfig" default limited
rc=0
"$B/gpuop" gather --kubeconfig "$T/limited.kubeconfig" -o "$T/limited.tar.gz" >/dev/null 2>"$T/gather.log" || rc=$?
[ "$rc" = 0 ] || fail "a limited ServiceAccount: exit $rc"
mkdir "$T/l" && tar xzf "$T/limited.tar.gz" -C "$T/l"
l() { "$JQ" -e "$1" "$T/l/limited/manifest.json" >/dev/null || fail "limited manifest.json: $1 does not hold: $("$JQ" -c .missing "$T/l/limited/manifest.json" | head -c 1500)"; }
l '[.collected[].path] | index("nodes/dgx-h100-1.yaml") != null'
l '[.collected[].path] | index("namespaces/gpu-operator/namespace.yaml") != null'
l '.missing[] | select(.what == "clusterpolicies") | .why | test("forbidden|Forbidden")'
l '.missing[] | select(.what == "pods in namespace gpu-operator") | .why | test("forbidden|Forbidden")'
echo "ok: what RBAC forbids is listed as not collected, with the API's answer"

# 5. exit codes: nowhere to write (1, nothing written), bad flags (2)
rc=0; "$B/gpuop" gather --kubeconfig "$KUBECONFIG" -o "$T/no/such/dir/x.tar.gz" >/dev/null 2>"$T/gather.log" || rc=$?
[ "$rc" = 1 ] && grep -q 'no/such/dir' "$T/gather.log" || fail "unwritable output: exit $rc: $(cat "$T/gather.log")"
for bad in "--max-size 1Ki" "--max-size lots" "--log-bytes 0" "--since forever" "--tail 0"; do
    rc=0; "$B/gpuop" gather --kubeconfig "$KUBECONFIG" -o "$T/bad.tar.gz" $bad >/dev/null 2>"$T/gather.log" || rc=$?
    [ "$rc" = 2 ] || fail "$bad: exit $rc, want 2: $(cat "$T/gather.log")"
    [ ! -e "$T/bad.tar.gz" ] || fail "$bad: a bundle was written"
done
echo "ok: gpuop gather on kubesim"
