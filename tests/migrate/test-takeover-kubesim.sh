#!/usr/bin/env bash
# gpuop's operator taking over what NVIDIA's GPU Operator v24.9.2 left (tests/adopt/fixtures), on
# kubesim with the operator's shipped RBAC enforced (pods Ready as kubesim makes them; the
# end-to-end test on simulated nodes is tests/migrate/e2e.sh). Sampled throughout
# (tests/migrate/sample.py): at most maxUnavailable (1) node with operands being replaced at a
# time, no driver pod deleted. At the end: gpu-feature-discovery and nvidia-operator-validator
# recreated with gpuop's selectors (their pods orphaned, claimed, replaced), every operand
# DaemonSet gpuop's and back to RollingUpdate, the device plugin surged on each node (the surge
# pods gone), NVIDIA-only objects removed once unused (each with an Event), the driver's RBAC
# kept while NVIDIA's driver pods run, and the ClusterPolicy's Takeover condition True. NVIDIA's
# policy has autoUpgrade on: a DriverUpgradePool with manual approval, made first as
# docs/migrate-from-nvidia.md says, defers the driver change (gpuop's driver template differs
# from NVIDIA's): the driver pods wait for approval, untouched.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
F=$S/tests/adopt/fixtures/nvidia-v24.9.2.yaml
python3 "$S/tests/migrate/nvidia-cluster.py" nodes "$F" >"$T/nodes.yaml"
start_kubesim --load "$T/nodes.yaml" --load "$S/deploy/rbac/operator.yaml" --pod-ready-delay 300ms
$K apply -f "$S/deploy/crds/" >/dev/null || fail "apply the CRDs"
python3 - "$F" >"$T/cp.yaml" <<'PY'
import sys, yaml
f = yaml.safe_load(open(sys.argv[1]))
p = f["policy"]
print(yaml.safe_dump({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                      "metadata": {"name": "cluster-policy", "labels": p["metadata"]["labels"]},
                      "spec": p["spec"]}))
PY
$K create -f "$T/cp.yaml" >/dev/null
uid=$($K get clusterpolicy cluster-policy -o jsonpath='{.metadata.uid}')
python3 "$S/tests/migrate/nvidia-cluster.py" objects "$F" "$uid" | $K create -f - >/dev/null
nv_ready() { [ "$($K -n gpu-operator get pods --no-headers 2>/dev/null | grep -c ' Running ')" -ge 20 ]; }
wait_for 30 "NVIDIA's operand pods Running" nv_ready
drivers_before=$($K -n gpu-operator get pods -l app=nvidia-driver-daemonset -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' | sort)
gfd_uid=$($K -n gpu-operator get ds gpu-feature-discovery -o jsonpath='{.metadata.uid}')
echo "ok: NVIDIA's operator's leftovers: $($K -n gpu-operator get ds --no-headers | wc -l) DaemonSets, $($K -n gpu-operator get pods --no-headers | wc -l) pods"

$K apply -f - >/dev/null <<Y
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: takeover}
spec:
  nodeSelector: {nvidia.com/gpu.present: "true"}
  approval: manual
Y
bg sample python3 "$S/tests/migrate/sample.py" --kubectl "$KUBECTL" --out "$T/sample.json" --stop "$T/stop"
sampler=$LAST
OPKC=$T/operator.kubeconfig
sa_kubeconfig "$OPKC"
P=$(free_port)
bg operator "$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator \
    --operand-image registry.example.com/gpuop:test --metrics-listen "127.0.0.1:$P"
operator=$LAST
t0=$SECONDS
taken_over() { [ "$($K get clusterpolicy cluster-policy -o jsonpath='{.status.conditions[?(@.type=="Takeover")].status}')" = True ]; }
wait_for -p "$operator" 150 "the Takeover condition True" taken_over
echo "ok: taken over in $((SECONDS - t0)) s: $($K get clusterpolicy cluster-policy -o jsonpath='{.status.conditions[?(@.type=="Takeover")].message}')"
touch "$T/stop"
wait_exit "$sampler" 10
[ "$RC" = 0 ] || fail "the sampler exited $RC"
summary=$(cat "$T/sample.json")
python3 - "$T/sample.json" <<'PY' || fail "sampled: $summary"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["samples"] > 20, s["samples"]
assert s["max_in_flight"] == 1, ("nodes in flight at once", s["max_in_flight"], s["in_flight_seen"])
assert not s["driver_restarts"], s["driver_restarts"]
assert s["nodes_done"] == ["gpu-a100", "gpu-h100", "gpu-l4"], s["nodes_done"]
PY
echo "ok: sampled $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["samples"], "times: at most", s["max_in_flight"], "node in flight, no driver pod deleted")' "$T/sample.json")"
[ "$($K -n gpu-operator get pods -l app=nvidia-driver-daemonset -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' | sort)" = "$drivers_before" ] ||
    fail "the driver pods changed"
[ "$($K -n gpu-operator get ds gpu-feature-discovery -o jsonpath='{.metadata.uid}')" != "$gfd_uid" ] || fail "gpu-feature-discovery not recreated"
[ "$($K -n gpu-operator get ds gpu-feature-discovery -o jsonpath='{.spec.selector.matchLabels}')" = '{"app":"gpu-feature-discovery"}' ] ||
    fail "gpu-feature-discovery's selector: $($K -n gpu-operator get ds gpu-feature-discovery -o jsonpath='{.spec.selector}')"
for ds in $($K -n gpu-operator get ds -o name); do
    [ "$($K -n gpu-operator get "$ds" -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by}')" = gpuop ] || fail "$ds is not gpuop's"
done
for ds in gpu-feature-discovery nvidia-operator-validator nvidia-device-plugin-daemonset nvidia-container-toolkit-daemonset; do
    [ "$($K -n gpu-operator get ds $ds -o jsonpath='{.spec.updateStrategy.type}')" = RollingUpdate ] || fail "$ds still held at OnDelete"
done
[ "$($K -n gpu-operator get ds nvidia-driver-daemonset -o jsonpath='{.spec.updateStrategy.type}')" = OnDelete ] || fail "the driver DaemonSet is not OnDelete"
waiting() { [ "$($K get node gpu-l4 -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}')" = upgrade-required ]; }
wait_for 30 "the driver change waiting for approval (upgrade-required)" waiting
echo "ok: the driver change waits for the pool's approval: $($K get node gpu-l4 -o jsonpath='{.metadata.annotations.upgrade\.gpuop\.dev/waiting}')"
[ -z "$($K -n gpu-operator get pods -l app=gpuop-device-plugin-takeover -o name)" ] || fail "surge pods left"
[ -z "$($K -n gpu-operator get pods -l app.kubernetes.io/managed-by=gpu-operator -o name | grep -v nvidia-driver-daemonset)" ] ||
    fail "NVIDIA operand pods left: $($K -n gpu-operator get pods -l app.kubernetes.io/managed-by=gpu-operator -o name)"
for o in "daemonset nvidia-device-plugin-mps-control-daemon" "configmap nvidia-device-plugin-entrypoint" \
    "configmap default-gpu-clients" "role nvidia-device-plugin" "rolebinding nvidia-operator-validator" "serviceaccount nvidia-device-plugin-mps-control-daemon"; do
    if $K -n gpu-operator get $o >/dev/null 2>&1; then fail "NVIDIA's $o not removed"; fi
done
for o in "clusterrole nvidia-gpu-feature-discovery" "clusterrolebinding nvidia-mig-manager"; do
    if $K get $o >/dev/null 2>&1; then fail "NVIDIA's $o not removed"; fi
done
$K -n gpu-operator get role nvidia-driver >/dev/null || fail "the driver's RBAC went while NVIDIA's driver pods run"
$K get clusterrolebinding nvidia-driver >/dev/null || fail "the driver's cluster RBAC went while NVIDIA's driver pods run"
events=$($K -n gpu-operator get events --field-selector reason=GPUOperatorTakeover -o jsonpath='{range .items[*]}{.message}{"\n"}{end}')
for m in "NVIDIA's DaemonSet gpu-feature-discovery deleted, its pods orphaned" "node gpu-a100: NVIDIA's operand pods replaced by gpuop's" \
    "node gpu-l4: gpuop's device plugin started beside NVIDIA's" "ConfigMap gpu-operator/nvidia-device-plugin-entrypoint removed" \
    "ClusterRole nvidia-operator-validator removed"; do
    grep -qF "$m" <<<"$events" || fail "no Event \"$m\": $events"
done
echo "ok: $(grep -c . <<<"$events") takeover Events; every operand DaemonSet gpuop's, NVIDIA-only objects removed, the driver's RBAC kept"
echo "PASS the takeover on kubesim"
