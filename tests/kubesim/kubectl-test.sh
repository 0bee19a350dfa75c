#!/bin/bash
# kubectl (the real client) drives kubesim through the verbs the operator and its users rely on.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" --cache-dir "$T/cache" --request-timeout=10s "$@"; }

cat > "$T/load.yaml" <<'Y'
apiVersion: v1
kind: Namespace
metadata: {name: preloaded}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: seed, namespace: preloaded}
data: {k: v}
Y
start_kubesim --nodes 3 --pod-ready-delay 100ms --load "$T/load.yaml"
grep -q "^kubesim: serving http://127.0.0.1:" "$T/kubesim.log" || fail "no address printed"

# get / describe
out=$(k get nodes) || fail "get nodes"
[ "$(echo "$out" | grep -c ' Ready ')" = 3 ] || fail "get nodes: $out"
k describe node node-00001 | grep -q "kubernetes.io/hostname=node-00001" || fail "describe node"
[ "$(k get cm seed -n preloaded -o jsonpath='{.data.k}')" = v ] || fail "--load objects"

# create, duplicate create
cat > "$T/cm.yaml" <<'Y'
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, namespace: default, labels: {app: demo}}
data: {mode: fast}
Y
k create -f "$T/cm.yaml" | grep -q "configmap/app-config created" || fail "create"
k create -f "$T/cm.yaml" 2>&1 | grep -q "AlreadyExists" || fail "duplicate create"

# kubectl's typed generators send protobuf bodies
k create namespace gen | grep -q "namespace/gen created" || fail "create namespace"
k create configmap gen-cm -n gen --from-literal=a=b | grep -q created || fail "create configmap"
k create secret generic gen-s -n gen --from-literal=pw=hunter2 | grep -q created \
    || fail "create secret"
[ "$(k get secret gen-s -n gen -o jsonpath='{.data.pw}' | base64 -d)" = hunter2 ] \
    || fail "secret data"
[ "$(k get cm gen-cm -n gen -o jsonpath='{.data.a}')" = b ] || fail "configmap data"
k create serviceaccount gen-sa -n gen | grep -q created || fail "create serviceaccount"

# apply, re-apply unchanged, change configured
cat > "$T/app.yaml" <<'Y'
apiVersion: v1
kind: ConfigMap
metadata: {name: applied, namespace: default}
data: {a: "1"}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
Y
k apply -f "$T/app.yaml" | grep -q "configmap/applied created" || fail "apply create"
out=$(k apply -f "$T/app.yaml")
[ "$(echo "$out" | grep -c unchanged)" = 2 ] || fail "re-apply not unchanged: $out"
sed -i 's/a: "1"/a: "2"/' "$T/app.yaml"
k apply -f "$T/app.yaml" | grep -q "configmap/applied configured" || fail "apply change"
[ "$(k get cm applied -o jsonpath='{.data.a}')" = 2 ] || fail "applied value"
k apply --server-side -f "$T/app.yaml" >/dev/null || fail "server-side apply"
rv1=$(k get cm applied -o jsonpath='{.metadata.resourceVersion}')
k apply --server-side -f "$T/app.yaml" >/dev/null || fail "server-side re-apply"
[ "$(k get cm applied -o jsonpath='{.metadata.resourceVersion}')" = "$rv1" ] || fail "SSA not idempotent"

# label, annotate, patch (strategic, merge, json)
k label cm app-config tier=backend | grep -q labeled || fail "label"
k annotate cm app-config note=hello | grep -q annotated || fail "annotate"
k patch cm app-config -p '{"data":{"extra":"1"}}' >/dev/null || fail "strategic patch"
k patch cm app-config --type=merge -p '{"data":{"mode":null}}' >/dev/null || fail "merge patch"
k patch cm app-config --type=json -p '[{"op":"add","path":"/data/j","value":"x"}]' >/dev/null \
    || fail "json patch"
got=$(k get cm app-config -o jsonpath='{.metadata.labels.tier}/{.metadata.annotations.note}/{.data.extra}/{.data.mode}/{.data.j}')
[ "$got" = "backend/hello/1//x" ] || fail "patched object: $got"
k get cm -l 'tier in (backend,frontend)' | grep -q app-config || fail "set selector"
k get cm -l 'tier in (backend' 2>&1 | grep -qi "error" || fail "malformed selector accepted"
k create configmap Bad_Name --dry-run=client -o json | grep -v '"namespace"' \
    | k create -f - 2>&1 | grep -q "Invalid" || fail "invalid name accepted"

# cordon / uncordon
k cordon node-00000 | grep -q cordoned || fail "cordon"
k get node node-00000 | grep -q SchedulingDisabled || fail "cordon status"
k uncordon node-00000 | grep -q uncordoned || fail "uncordon"
k get node node-00000 | grep -q SchedulingDisabled && fail "uncordon status"

# DaemonSet on labelled nodes, rolled out
k label node node-00001 node-00002 gpu=true >/dev/null || fail "label nodes"
cat > "$T/ds.yaml" <<'Y'
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {gpu: "true"}
      containers: [{name: agent, image: "example.com/agent:1.0"}]
Y
k apply -f "$T/ds.yaml" >/dev/null || fail "apply ds"
k rollout status ds/agent --timeout=20s >/dev/null || fail "rollout status"
[ "$(k get pods -l app=agent --no-headers | grep -c Running)" = 2 ] || fail "ds pods"
k get ds agent | grep -qE "agent +2 +2 +2 +2 +2" || fail "ds columns: $(k get ds agent)"

# a Deployment: rolled out through its ReplicaSet, then scaled
cat > "$T/deploy.yaml" <<'Y'
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: api, image: "example.com/api:1"}]
Y
k apply -f "$T/deploy.yaml" >/dev/null || fail "apply deployment"
k rollout status deploy/api --timeout=20s >/dev/null || fail "deployment rollout"
k scale deploy/api --replicas=1 | grep -q scaled || fail "scale"
running_api() { [ "$(k get pods -l app=api --no-headers 2>/dev/null | grep -c Running)" = "$1" ]; }
poll 5 running_api 1
[ "$(k get pods -l app=api --no-headers | grep -c Running)" = 1 ] || fail "scaled pods"
k delete deploy api >/dev/null || fail "delete deployment"

# drain: blocked by a PodDisruptionBudget, then allowed once the budget is relaxed
cat > "$T/pdb.yaml" <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default, labels: {app: web}}
spec:
  nodeName: node-00000
  containers: [{name: web, image: "nginx:1.27"}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
Y
k apply -f "$T/pdb.yaml" >/dev/null || fail "apply pdb"
k wait --for=condition=Ready pod/web-0 --timeout=10s >/dev/null || fail "pod ready"
healthy() { [ "$(k get pdb web -o jsonpath='{.status.currentHealthy}')" = "$1" ]; }
poll 5 healthy 1
out=$(k drain node-00000 --ignore-daemonsets --force --timeout=2s 2>&1) && fail "drain not blocked"
echo "$out" | grep -q "disruption budget" || fail "drain error: $out"
k get pod web-0 >/dev/null || fail "pod evicted despite the budget"
k patch pdb web --type=merge -p '{"spec":{"minAvailable":0}}' >/dev/null || fail "relax pdb"
k drain node-00000 --ignore-daemonsets --force --timeout=20s 2>&1 | grep -q "drained" \
    || fail "drain after relaxing"
k get pod web-0 2>&1 | grep -q NotFound || fail "pod still there after drain"
k uncordon node-00000 >/dev/null

# a CRD and its custom resources
cat > "$T/crd.yaml" <<'Y'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns: [{name: Size, type: integer, jsonPath: .spec.size}]
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
Y
cat > "$T/cr.yaml" <<'Y'
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: default}
spec: {size: 3}
Y
k apply -f "$T/crd.yaml" >/dev/null || fail "apply crd"
k apply -f "$T/cr.yaml" >/dev/null || fail "apply cr"
k get widgets | grep -qE "^w1 +3 *$" || fail "get widgets: $(k get widgets 2>&1)"
k get wd w1 -o jsonpath='{.spec.size}' | grep -q 3 || fail "short name"
k apply -f "$T/cr.yaml" | grep -q unchanged || fail "cr re-apply"
k delete crd widgets.example.com >/dev/null || fail "delete crd"
k get widgets 2>&1 | grep -qi "could not find\|doesn't have a resource" || fail "crd still served"

# a watch delivers a label change
k get cm app-config --watch -o jsonpath='{.metadata.labels.tier}{"\n"}' >"$T/watch" 2>&1 &
WPID=$!
# its first line is the list the watch starts from (by resourceVersion): a change after it is seen
wait_for 5 "the watch's first line" grep -q backend "$T/watch"
k label cm app-config tier=frontend --overwrite >/dev/null || fail "relabel"
poll 5 grep -q frontend "$T/watch"
kill $WPID 2>/dev/null; wait $WPID 2>/dev/null
grep -q frontend "$T/watch" || fail "watch missed the label change: $(cat "$T/watch")"

# a watch over server-side Tables (kubectl's default output) delivers a node change
k get nodes --watch --output-watch-events >"$T/twatch" 2>&1 &
WPID=$!
wait_for 5 "the table watch's first rows" grep -q "ADDED *node-00002" "$T/twatch"
k label node node-00002 watched=yes >/dev/null || fail "label for table watch"
poll 5 grep -q "MODIFIED *node-00002" "$T/twatch"
kill $WPID 2>/dev/null; wait $WPID 2>/dev/null
grep -q "MODIFIED *node-00002" "$T/twatch" || fail "table watch: $(cat "$T/twatch")"

# pagination as kubectl does it (limit/continue)
[ "$(k get nodes --chunk-size=1 --no-headers | wc -l)" = 3 ] || fail "chunked list"

# delete
k delete cm app-config | grep -q deleted || fail "delete"
k get cm app-config 2>&1 | grep -q NotFound || fail "deleted object still there"
k delete ns preloaded --timeout=10s >/dev/null || fail "delete namespace"
k get ns preloaded 2>&1 | grep -q NotFound || fail "namespace still there"

stop_kubesim
echo "ok"
