#!/usr/bin/env bash
# The running operator, under its shipped RBAC on kubesim, acts on dcgmExporter.serviceMonitor
# and psa.enabled:
#  - without the Prometheus Operator's CRD no ServiceMonitor is written and the ClusterPolicy
#    says why (condition ServiceMonitor False CRDNotInstalled, a Warning Event); the operator
#    keeps running and the rest of the policy is applied;
#  - the CRD installed later: the ServiceMonitor appears (the operator looks again by itself);
#  - turned off: the ServiceMonitor is deleted;
#  - psa.enabled labels the operand namespace privileged, keeping an administrator's labels, and
#    records what it replaced; turned off, the namespace's labels are exactly as before;
#  - driver.kernelModuleConfig naming a ConfigMap that does not exist: no driver DaemonSet, the
#    status says why; the ConfigMap created: the driver DaemonSet mounts each key in /drivers.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built gpuop kubesim

operator_cluster 200ms
# The administrator's labels, before gpuop: one it will replace, one it must never touch.
$K label namespace gpu-operator team=ml pod-security.kubernetes.io/audit=baseline >/dev/null
$K get namespace gpu-operator -o json | /usr/bin/python3 -c '
import json, sys; print(json.dumps(json.load(sys.stdin)["metadata"].get("labels", {}), sort_keys=True))' >"$T/labels-before.json"

P=$(free_port)
"$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator --operand-image gpuop:test \
    --metrics-listen "127.0.0.1:$P" --leader-elect false >"$T/operator.log" 2>&1 &
OP=$!
pids+=($OP)
log_file "$T/operator.log"
wait_for 20 "operator ready" curl -sf "127.0.0.1:$P/readyz"

cat >"$T/policy.yaml" <<'Y'
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: cluster-policy}
spec:
  operator: {}
  daemonsets: {}
  driver: {enabled: false}
  toolkit: {}
  devicePlugin: {}
  dcgm: {}
  gfd: {}
  nodeStatusExporter: {}
  psa: {enabled: true}
  dcgmExporter:
    serviceMonitor: {enabled: true, interval: 15s, additionalLabels: {release: kube-prometheus-stack}}
Y
$K apply -f "$T/policy.yaml" >/dev/null
cond() { # TYPE FIELD
    $K get clusterpolicy cluster-policy -o jsonpath="{.status.conditions[?(@.type==\"$1\")].$2}"
}
sm_cond_is() { [ "$(cond ServiceMonitor status)/$(cond ServiceMonitor reason)" = "$1" ]; }

# No CRD: nothing written, the status and an Event say why; the operands are applied anyway.
wait_for 30 "ServiceMonitor condition False/CRDNotInstalled" sm_cond_is False/CRDNotInstalled
case "$(cond ServiceMonitor message)" in
*monitoring.coreos.com/v1*"not served"*) ;;
*) fail "the condition does not say why: $(cond ServiceMonitor message)" ;;
esac
wait_for 15 "the Warning Event" sh -c "$K -n gpu-operator get events -o json | grep -q ServiceMonitorCRDMissing"
$K -n gpu-operator get ds nvidia-dcgm-exporter >/dev/null || fail "the exporter was not applied"
ended "$OP" && fail "the operator exited without the ServiceMonitor CRD"

# Pod Security: the three labels, the administrator's team label kept, the record made.
ns_json() { $K get namespace gpu-operator -o json; }
psa_on() {
    ns_json | /usr/bin/python3 -c '
import json, sys
m = json.load(sys.stdin)["metadata"]
l = m.get("labels", {})
assert all(l.get("pod-security.kubernetes.io/" + k) == "privileged" for k in ("enforce", "audit", "warn")), l
assert l.get("team") == "ml", l
rec = json.loads(m["annotations"]["gpuop.dev/pod-security-labels-set"])
assert rec == {"pod-security.kubernetes.io/audit": "baseline",
               "pod-security.kubernetes.io/enforce": None,
               "pod-security.kubernetes.io/warn": None}, rec'
}
wait_for 20 "the namespace's Pod Security labels" psa_on

# The CRD installed: the operator writes the ServiceMonitor without being poked (its informer
# lists again after a backoff of up to 30 s, then a reconcile).
$K apply -f "$S/tests/operator/fixtures/servicemonitor-crd.yaml" >/dev/null || fail "apply the ServiceMonitor CRD"
wait_for 100 "the ServiceMonitor written" $K -n gpu-operator get servicemonitor nvidia-dcgm-exporter
wait_for 20 "ServiceMonitor condition True/Applied" sm_cond_is True/Applied
$K -n gpu-operator get servicemonitor nvidia-dcgm-exporter -o json >"$T/sm.json"
/usr/bin/python3 - "$T/sm.json" <<'PY' || fail "the ServiceMonitor written"
import json, sys
sm = json.load(open(sys.argv[1]))
assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack", sm["metadata"]
assert sm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuop", sm["metadata"]
assert sm["metadata"]["ownerReferences"][0]["kind"] == "ClusterPolicy", sm["metadata"]
assert sm["spec"]["endpoints"][0]["interval"] == "15s", sm["spec"]
PY

# Turned off: the ServiceMonitor goes, its condition too.
$K patch clusterpolicy cluster-policy --type=merge \
    -p '{"spec":{"dcgmExporter":{"serviceMonitor":{"enabled":false}}}}' >/dev/null
gone() { ! $K -n gpu-operator get servicemonitor nvidia-dcgm-exporter >/dev/null 2>&1; }
wait_for 20 "the ServiceMonitor deleted" gone
wait_for 10 "no ServiceMonitor condition" sh -c "[ -z \"\$($K get clusterpolicy cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"ServiceMonitor\")].status}')\" ]"

# psa off: the namespace's labels are exactly the administrator's again, the record gone.
$K patch clusterpolicy cluster-policy --type=merge -p '{"spec":{"psa":{"enabled":false}}}' >/dev/null
psa_restored() {
    ns_json | /usr/bin/python3 -c '
import json, sys
m = json.load(sys.stdin)["metadata"]
want = json.load(open(sys.argv[1]))
assert m.get("labels", {}) == want, (m.get("labels"), want)
assert "gpuop.dev/pod-security-labels-set" not in m.get("annotations", {}), m.get("annotations")' "$T/labels-before.json"
}
wait_for 20 "the namespace's labels restored" psa_restored

# The driver with a kernel module ConfigMap that is not there yet.
$K patch clusterpolicy cluster-policy --type=merge \
    -p '{"spec":{"driver":{"enabled":true,"kernelModuleConfig":{"name":"kmc"}}}}' >/dev/null
kmc_cond_is() { [ "$(cond KernelModuleConfig status)/$(cond KernelModuleConfig reason)" = "$1" ]; }
wait_for 20 "KernelModuleConfig False/ConfigMapNotFound" kmc_cond_is False/ConfigMapNotFound
$K -n gpu-operator get ds nvidia-driver-daemonset >/dev/null 2>&1 &&
    fail "the driver DaemonSet was written without its kernel module ConfigMap"
$K -n gpu-operator create configmap kmc --from-literal=nvidia.conf='NVreg_EnableGpuFirmware=0' \
    --from-literal=nvidia-uvm.conf='uvm_perf_prefetch_enable=0' >/dev/null
wait_for 30 "the driver DaemonSet" $K -n gpu-operator get ds nvidia-driver-daemonset
$K -n gpu-operator get ds nvidia-driver-daemonset -o json >"$T/ds.json"
/usr/bin/python3 - "$T/ds.json" <<'PY' || fail "the driver DaemonSet's kernel module files"
import json, sys
ps = json.load(open(sys.argv[1]))["spec"]["template"]["spec"]
ctr = [c for c in ps["containers"] if c["name"] == "nvidia-driver-ctr"][0]
m = sorted((v["mountPath"], v["subPath"]) for v in ctr["volumeMounts"] if v["name"] == "kmc")
assert m == [("/drivers/nvidia-uvm.conf", "nvidia-uvm.conf"), ("/drivers/nvidia.conf", "nvidia.conf")], m
vol = [v for v in ps["volumes"] if v["name"] == "kmc"][0]
assert vol["configMap"]["name"] == "kmc" and len(vol["configMap"]["items"]) == 2, vol
PY
wait_for 10 "no KernelModuleConfig condition" sh -c "[ -z \"\$($K get clusterpolicy cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"KernelModuleConfig\")].status}')\" ]"
ended "$OP" && fail "the operator exited"
echo "PASS settings-live: ServiceMonitor without and with its CRD, removed when off; Pod Security labels set and restored exactly; kernel module ConfigMap mounted once it exists"
