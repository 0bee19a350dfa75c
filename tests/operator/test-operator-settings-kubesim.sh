#!/usr/bin/env bash
# The settings of issue 30 against an API server: a ClusterPolicy setting them all renders
# objects kubesim accepts (the driver DaemonSet with its module containers, licensing and
# repository volumes; the ServiceMonitor, validated by the Prometheus Operator's CRD schema,
# tests/operator/fixtures/servicemonitor-crd.yaml); the CRD's schema refuses a ServiceMonitor it
# should (so the acceptance means something); and `gpuop operator render` names none of these
# fields as not acted on.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_built gpuop kubesim
need_tools
cat >"$T/policy.yaml" <<'Y'
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: cluster-policy}
spec:
  operator: {}
  daemonsets: {}
  toolkit: {}
  devicePlugin: {hostNetwork: true}
  dcgm: {}
  gfd: {}
  nodeStatusExporter: {}
  psa: {enabled: true}
  dcgmExporter:
    serviceMonitor:
      enabled: true
      interval: 15s
      honorLabels: false
      additionalLabels: {release: kube-prometheus-stack}
      relabelings:
      - {sourceLabels: [__meta_kubernetes_pod_node_name], regex: (.*), targetLabel: instance,
         replacement: $1, action: replace}
  driver:
    kernelModuleType: open
    rdma: {enabled: true, useHostMofed: false}
    repoConfig: {configMapName: repo-config}
    certConfig: {name: cert-config}
    licensingConfig: {secretName: licensing, nlsEnabled: true}
    secretEnv: driver-env
    hostNetwork: true
  gds: {enabled: true, repository: nvcr.io/nvidia/cloud-native, image: nvidia-fs, version: "2.20.5"}
  gdrcopy: {enabled: true, repository: nvcr.io/nvidia/cloud-native, image: gdrdrv, version: v2.4.1-2}
Y
"$B/gpuop" operator render --policy "$T/policy.yaml" --os-tag ubuntu22.04 >"$T/objs.json" \
    2>"$T/render.err" || fail "render: $(cat "$T/render.err")"
# Only fields outside this task may be named (none are set here).
if grep -q "not acted on" "$T/render.err"; then
    fail "render still names fields as not acted on: $(cat "$T/render.err")"
fi

start_kubesim
$K create namespace gpu-operator >/dev/null
$K apply -f "$S/tests/operator/fixtures/servicemonitor-crd.yaml" >/dev/null || fail "apply the ServiceMonitor CRD"
wait_for 10 "the ServiceMonitor kind served" $K get servicemonitors -A
# Each rendered object as a file; ownerReferences dropped (no ClusterPolicy here).
python3 - "$T/objs.json" "$T" <<'PY'
import json, sys
objs = json.load(open(sys.argv[1]))
kinds = {}
for o in objs:
    o["metadata"].pop("ownerReferences", None)
    kinds[o["kind"]] = kinds.get(o["kind"], 0) + 1
    json.dump(o, open(f"{sys.argv[2]}/obj-{o['kind']}-{o['metadata']['name']}.json", "w"))
assert kinds.get("ServiceMonitor") == 1, kinds
PY
for f in "$T"/obj-*.json; do
    $K apply -f "$f" >"$T/apply.out" 2>&1 || fail "kubesim refused $(basename "$f"): $(cat "$T/apply.out")"
done
# What kubesim stored is what was rendered.
$K -n gpu-operator get servicemonitor nvidia-dcgm-exporter -o json >"$T/sm.json"
python3 - "$T/sm.json" <<'PY' || fail "the stored ServiceMonitor"
import json, sys
sm = json.load(open(sys.argv[1]))
ep = sm["spec"]["endpoints"][0]
assert ep["port"] == "gpu-metrics" and ep["interval"] == "15s", ep
assert ep["relabelings"][0]["targetLabel"] == "instance", ep
assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
PY
$K -n gpu-operator get daemonset nvidia-driver-daemonset -o json >"$T/ds.json"
python3 - "$T/ds.json" <<'PY' || fail "the stored driver DaemonSet"
import json, sys
ps = json.load(open(sys.argv[1]))["spec"]["template"]["spec"]
names = [c["name"] for c in ps["containers"]]
assert names == ["nvidia-driver-ctr", "nvidia-peermem-ctr", "nvidia-fs-ctr", "nvidia-gdrcopy-ctr",
                 "nvidia-remediation-ctr"], names
env = {e["name"]: e.get("value") for e in ps["containers"][0]["env"]}
assert env["KERNEL_MODULE_TYPE"] == "open" and env["GPU_DIRECT_RDMA_ENABLED"] == "true", env
assert ps["hostNetwork"] is True and ps["dnsPolicy"] == "ClusterFirstWithHostNet"
PY
# The schema is enforced: a bad interval and a relabeling's unknown action are refused.
python3 - "$T/sm.json" "$T" <<'PY'
import json, sys
sm = json.load(open(sys.argv[1]))
for k in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
    sm["metadata"].pop(k, None)
sm["metadata"]["name"] = "bad-interval"
sm["spec"]["endpoints"][0]["interval"] = "15 seconds"
json.dump(sm, open(f"{sys.argv[2]}/bad1.json", "w"))
sm["metadata"]["name"] = "bad-action"
sm["spec"]["endpoints"][0]["interval"] = "15s"
sm["spec"]["endpoints"][0]["relabelings"][0]["action"] = "rename"
json.dump(sm, open(f"{sys.argv[2]}/bad2.json", "w"))
PY
for b in bad1 bad2; do
    if $K apply -f "$T/$b.json" >"$T/$b.out" 2>&1; then
        fail "kubesim accepted $b: the ServiceMonitor CRD's schema is not enforced"
    fi
done
grep -q "interval" "$T/bad1.out" || fail "the refusal does not name the field: $(cat "$T/bad1.out")"
echo "PASS settings: driver DaemonSet and ServiceMonitor accepted, the schema enforced"
