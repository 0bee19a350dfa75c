#!/bin/bash
# kubectl 1.32 (the pinned one) with its default validation against kubesim: the OpenAPI v3
# index and documents it reads, server-side field validation (fieldValidation=Strict, Warn,
# Ignore) with the API server's messages, create/apply (twice: unchanged)/server-side
# apply/diff/explain, and validation turned off nowhere in the project (a grep).
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" --cache-dir "$T/cache" --request-timeout=10s "$@"; }

# the project drives kubectl with its default validation everywhere (pattern split so this
# line does not match itself)
flag="--validate""=false"
hits=$(cd "$S" && git ls-files -z 2>/dev/null | xargs -0 grep -l -F -e "$flag" 2>/dev/null)
[ -z "$hits" ] || fail "$flag left in: $hits"

start_kubesim --nodes 2
"$KUBECTL" version --client | grep -q 'v1\.32\.' || fail "not kubectl 1.32: $("$KUBECTL" version --client)"

# the documents: an index entry per group-version, each document with its kinds, the
# fieldValidation parameter on writes, and no strict-merge-patch for custom resources
curl -sf "$KS_URL/openapi/v3" >"$T/idx" || fail "GET /openapi/v3"
for gv in api/v1 apis/apps/v1 apis/rbac.authorization.k8s.io/v1 apis/batch/v1 \
    apis/apiextensions.k8s.io/v1; do
    u=$(jq -r --arg gv "$gv" '.paths[$gv].serverRelativeURL' "$T/idx")
    [[ $u == /openapi/v3/$gv\?hash=* ]] || fail "index entry $gv: $u"
done
curl -sf "$KS_URL/openapi/v3/apis/apps/v1" >"$T/apps" || fail "GET apps/v1 document"
jq -e '.components.schemas["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"][0].kind == "Deployment"' \
    "$T/apps" >/dev/null || fail "Deployment schema GVK"
jq -e '.paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"].patch.parameters | map(.name) | index("fieldValidation")' \
    "$T/apps" >/dev/null || fail "patch without fieldValidation"
code=$(curl -s -o /dev/null -w '%{http_code}' "$KS_URL/openapi/v3/apis/nope/v1")
[ "$code" = 404 ] || fail "unknown group-version: $code"
curl -sf -H 'Accept: application/json' "$KS_URL/openapi/v2" | jq -e '.swagger == "2.0" and
    (.definitions["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"][0].kind == "Pod")' \
    >/dev/null || fail "GET /openapi/v2 (JSON)"
code=$(curl -s -o /dev/null -w '%{http_code}' \
    -H 'Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf' "$KS_URL/openapi/v2")
[ "$code" = 406 ] || fail "/openapi/v2 as protobuf only: $code"

# create -f, apply -f twice, a change, diff, server-side apply (default validation)
cat >"$T/app.yaml" <<'Y'
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: web
        image: nginx:1.27
        args: [--port, "8080"]
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
        ports: [{containerPort: 8080, name: http}]
        resources: {limits: {cpu: 500m, memory: 64Mi}}
        volumeMounts: [{name: cfg, mountPath: /etc/web}]
        readinessProbe: {httpGet: {path: /healthz, port: 8080}}
      volumes: [{name: cfg, configMap: {name: web}}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  updateStrategy: {type: RollingUpdate}
  template:
    metadata: {labels: {app: agent}}
    spec:
      hostPID: true
      priorityClassName: system-node-critical
      containers: [{name: agent, image: busybox, securityContext: {privileged: true}}]
Y
cat >"$T/cm.yaml" <<'Y'
apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: default}
data: {a: "1"}
Y
k create -f "$T/cm.yaml" 2>"$T/err" | grep -q "configmap/web created" || fail "create -f: $(cat "$T/err")"
k apply -f "$T/app.yaml" >"$T/o" 2>"$T/err" || fail "apply -f: $(cat "$T/err")"
grep -q "deployment.apps/web created" "$T/o" || fail "apply created: $(cat "$T/o")"
[ -s "$T/err" ] && fail "apply -f wrote to stderr: $(cat "$T/err")"
k apply -f "$T/app.yaml" >"$T/o" 2>"$T/err" || fail "re-apply: $(cat "$T/err")"
[ "$(grep -c unchanged "$T/o")" = 2 ] || fail "re-apply not unchanged: $(cat "$T/o") $(cat "$T/err")"
[ -s "$T/err" ] && fail "re-apply wrote to stderr: $(cat "$T/err")"
# a list element removed by apply is removed (merge keys from kubectl's own types)
sed -i 's/, {name: B, value: "2"}//' "$T/app.yaml"
k diff -f "$T/app.yaml" >"$T/diff"
[ $? = 1 ] || fail "diff exit status (want 1: differences)"
grep -q '^-.*name: B' "$T/diff" || fail "diff does not show the removal: $(cat "$T/diff")"
k apply -f "$T/app.yaml" | grep -q "deployment.apps/web configured" || fail "apply change"
[ "$(k get deploy web -o jsonpath='{.spec.template.spec.containers[0].env[*].name}')" = A ] \
    || fail "env after apply: $(k get deploy web -o jsonpath='{.spec.template.spec.containers[0].env}')"
k diff -f "$T/app.yaml" >/dev/null || fail "diff after apply (want 0)"
k apply --server-side -f "$T/cm.yaml" 2>"$T/err" | grep -q "serverside-applied" \
    || fail "apply --server-side: $(cat "$T/err")"
k apply --server-side --force-conflicts -f "$T/app.yaml" >/dev/null 2>"$T/err" \
    || fail "apply --server-side deployment: $(cat "$T/err")"

# typed generators that send JSON bodies
k create secret generic gen --from-literal=pw=x | grep -q "secret/gen created" || fail "create secret generic"

# custom resources: the CRDs and the sample policy, apply twice, explain from the CRD schema
k apply -f "$S/deploy/crds/" >/dev/null 2>"$T/err" || fail "apply CRDs: $(cat "$T/err")"
k create namespace gpu-operator >/dev/null
k apply -f "$S/deploy/samples/clusterpolicy.yaml" 2>"$T/err" | grep -q created \
    || fail "apply ClusterPolicy: $(cat "$T/err")"
k apply -f "$S/deploy/samples/clusterpolicy.yaml" | grep -q unchanged || fail "ClusterPolicy re-apply"
k explain clusterpolicy.spec >"$T/explain" 2>&1 || fail "explain clusterpolicy.spec: $(cat "$T/explain")"
grep -q "The desired GPU stack" "$T/explain" || fail "explain: no description: $(cat "$T/explain")"
k explain clusterpolicy.spec.driver >"$T/explain" 2>&1 || fail "explain clusterpolicy.spec.driver: $(cat "$T/explain")"
grep -q "FIELD: driver <Object>" "$T/explain" && grep -q "enabled" "$T/explain" \
    || fail "explain clusterpolicy.spec.driver: $(cat "$T/explain")"
k explain deployment.spec.template.spec.containers >/dev/null 2>"$T/err" \
    || fail "explain a built-in: $(cat "$T/err")"

# field validation: Strict (kubectl's default) rejects with the decoder's message, Warn warns,
# Ignore accepts; CRD-backed kinds are checked against their schema
sed 's/^spec:/spec:\n  bogus: 1/; s/name: web, namespace/name: web2, namespace/' "$T/app.yaml" \
    | awk '/^---/{exit} {print}' >"$T/bad.yaml"
k create -f "$T/bad.yaml" 2>"$T/err" && fail "unknown field accepted under Strict"
grep -q 'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.bogus"' \
    "$T/err" || fail "Strict message: $(cat "$T/err")"
grep -q BadRequest "$T/err" || fail "Strict is not BadRequest: $(cat "$T/err")"
sed 's/image: nginx:1.27/imagex: nginx/' "$T/app.yaml" | awk '/^---/{exit} {print}' \
    | k apply -f - 2>"$T/err" && fail "nested unknown field accepted"
grep -q 'unknown field "spec.template.spec.containers\[0\].imagex"' "$T/err" \
    || fail "nested unknown field message: $(cat "$T/err")"
k create --validate=warn -f "$T/bad.yaml" 2>"$T/err" | grep -q created || fail "Warn create"
grep -q 'Warning: unknown field "spec.bogus"' "$T/err" || fail "Warn header: $(cat "$T/err")"
sed -i 's/name: web2,/name: web3,/' "$T/bad.yaml"
k create --validate=ignore -f "$T/bad.yaml" 2>"$T/err" | grep -q created || fail "Ignore create"
[ -s "$T/err" ] && fail "Ignore warned: $(cat "$T/err")"
k apply --server-side -f "$T/bad.yaml" 2>"$T/err" && fail "server-side apply of an unknown field"
grep -q '.spec.bogus: field not declared in schema' "$T/err" || fail "SSA message: $(cat "$T/err")"
sed 's/^  driver:/  driver:\n    typo: x/' "$S/deploy/samples/clusterpolicy.yaml" \
    | k apply -f - 2>"$T/err" && fail "unknown ClusterPolicy field accepted"
grep -q 'ClusterPolicy in version "v1" cannot be handled as a ClusterPolicy: strict decoding error: unknown field "spec.driver.typo"' \
    "$T/err" || fail "ClusterPolicy Strict message: $(cat "$T/err")"
code=$(curl -s -o "$T/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"q"},"x":1}' \
    "$KS_URL/api/v1/namespaces/default/configmaps?fieldValidation=Sometimes")
[ "$code" = 400 ] || fail "bad fieldValidation value: $code"
# no directive: Warn, as the API server's default
curl -s -D "$T/hdr" -o /dev/null -X POST -H 'Content-Type: application/json' \
    -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w"},"x":1}' \
    "$KS_URL/api/v1/namespaces/default/configmaps"
grep -qi '^Warning: 299 - "unknown field \\"x\\""' "$T/hdr" || fail "default Warn header: $(cat "$T/hdr")"

# a CRD change reaches the documents: the index hash of its group-version changes
h1=$(curl -sf "$KS_URL/openapi/v3" | jq -r '.paths["apis/nvidia.com/v1"].serverRelativeURL')
k patch crd clusterpolicies.nvidia.com --type=json \
    -p '[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/description","value":"Changed."}]' \
    >/dev/null || fail "patch CRD"
h2=$(curl -sf "$KS_URL/openapi/v3" | jq -r '.paths["apis/nvidia.com/v1"].serverRelativeURL')
[ "$h1" != "$h2" ] || fail "index hash unchanged after a CRD change"
k explain clusterpolicy.spec 2>&1 | grep -q Changed. || fail "explain after a CRD change"
stop_kubesim
echo "kubesim-openapi: ok"
