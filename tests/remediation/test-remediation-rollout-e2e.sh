#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A GPU fault during a driver rollout, end to end on simulated nodes that run the stack (kubesim,
# kubelet-sim, the operator under its shipped RBAC, the real node agent and executor): one pool of
# three L4 servers (12 GPUs; maxUnavailable 1, capacityFloor 8, its first node a canary that
# soaks), the node status exporter on. The driver version changes; the canary upgrades; while it
# soaks, an uncorrectable ECC error hits another node, which is quarantined and waits for a
# person (the pool takes no action by itself). The rollout pauses: the pool's quarantined node
# uses its whole budget (the next node waits, saying "remediation: ..."), and it stays paused past
# the soak. A person approves the repair: the node is drained, its GPU reset by the executor in
# its driver pod, validated and back in service; the rollout goes on through the other two nodes.
# Every node change the API server served is recorded (tests/upgrade/e2e_watch.py) and replayed
# in order: never more than one node cordoned or NotReady at once, quarantined, draining,
# remediating and upgrading nodes counted together, and never fewer than 8 ready GPUs in the pool.
# As root (namespaces per node); skipped otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
on_fail() { k get nodes -L nvidia.com/gpu-driver-upgrade-state -L remediation.gpuop.dev/state 2>/dev/null; }
W="/usr/bin/python3 $S/tests/upgrade/e2e_watch.py"
V1=570.86.15 V2=580.105.08
NODES="tr-1 tr-2 tr-3"
t_start=$SECONDS
{
    echo "apiVersion: gpuop.dev/v1alpha1"
    echo "kind: SimCluster"
    echo "nodes:"
    for n in $NODES; do
        cat <<EOF
- name: $n
  fleet: $S/sim/fleets/pcie-l4.yaml
  root: $T/roots/$n
  kernel: 5.15.0-127-generic
  os: {id: ubuntu, versionId: "22.04"}
  runtime: containerd
  kernelHeaders: [5.15.0-127-generic]
  labels: {gpuop.test/pool: train}
EOF
    done
} >"$T/cluster.yaml"
kl_start_cluster 198.18.255.63 "$T/cluster.yaml" klrr0 198.18.250.0/24 3
echo "ok: 3 nodes registered by kubelet-sim ($((SECONDS - t_start)) s)"
$W watch "$T/nodes.jsonl" $KUBECTL >"$T/watch.log" 2>&1 &
pids+=($!)

k apply -f - >/dev/null <<'EOF' || fail "create the pool"
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: train}
spec:
  nodeSelector: {gpuop.test/pool: train}
  maxUnavailable: 1
  capacityFloor: 8
  canary: {nodes: 1, soakSeconds: 20}
EOF
kl_start_operator --metrics-listen 127.0.0.1:0 --leader-elect false
python3 - "$S/deploy/samples/clusterpolicy.yaml" "$V1" >"$T/policy.yaml" <<'PY' || fail "edit the sample"
import sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
spec = cp["spec"]
spec["driver"]["version"] = sys.argv[2]
spec["driver"]["startupProbe"] = {"initialDelaySeconds": 1, "periodSeconds": 1}
spec["driver"]["env"] = [{"name": "SIM_DRIVER_BUILD_SECONDS", "value": "0.5"}]
spec["driver"]["upgradePolicy"] = {"autoUpgrade": True, "maxParallelUpgrades": 0,
    "maxUnavailable": 1, "podDeletion": {"timeoutSeconds": 300}, "drain": {"enable": False}}
spec["nodeStatusExporter"] = {"enabled": True,
    "env": [{"name": "NODE_STATUS_EXPORTER_INTERVAL", "value": "1s"}]}
for c in ("dcgmExporter", "migManager"):
    spec[c] = {"enabled": False}
print(yaml.safe_dump(cp))
PY
k apply -f "$T/policy.yaml" >/dev/null || fail "apply the ClusterPolicy"

upg() { k get node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}'; }
rem() { k get node "$1" -o jsonpath='{.metadata.labels.remediation\.gpuop\.dev/state}'; }
ann() { k get node "$1" -o jsonpath="{.metadata.annotations.${2//./\\.}}"; }
alloc() { k get node "$1" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}'; }
pod_on() { k -n gpu-operator get pods -l "app=$1" --field-selector "spec.nodeName=$2" -o jsonpath='{.items[*].metadata.name}'; }
validator_ready() {
    local p
    p=$(pod_on nvidia-operator-validator "$1")
    [ -n "$p" ] && [ "$(k -n gpu-operator get pod "$p" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
node_current() { # NODE VERSION: upgraded, in service, its 4 GPUs advertised, validated
    [ "$(upg "$1")" = upgrade-done ] && [ "$(cat "$T/roots/$1/sys/module/nvidia/version" 2>/dev/null)" = "$2" ] &&
        [ "$(alloc "$1")" = 4 ] && validator_ready "$1" && [ -z "$(rem "$1")" ] &&
        [ "$(k get node "$1" -o jsonpath='{.spec.unschedulable}')" != true ]
}
for n in $NODES; do
    wait_for 150 "$n: driver $V1 validated, 4 GPUs advertised, upgrade-done" node_current "$n" "$V1"
done
echo "ok: the stack is up on the 3 nodes with driver $V1 ($((SECONDS - t_start)) s)"

# ---- the rollout; the fault while the canary soaks ----------------------------------------------
rv0=$(k get nodes -o jsonpath='{.metadata.resourceVersion}')
t_roll=$SECONDS
k patch clusterpolicy cluster-policy --type merge -p "{\"spec\":{\"driver\":{\"version\":\"$V2\"}}}" \
    >/dev/null || fail "change the driver version"
wait_for 120 "the canary tr-1 upgraded to $V2 and back in service" node_current tr-1 "$V2"
echo "ok: the canary tr-1 upgraded in $((SECONDS - t_roll)) s; soaking"
[ "$(upg tr-2)" = upgrade-required ] && [ "$(upg tr-3)" = upgrade-required ] ||
    fail "the rest moved before the soak ended: tr-2 $(upg tr-2), tr-3 $(upg tr-3)"
now_ms() { date +%s%3N; }
t_fault=$(now_ms)
GPUOP_SIM_FLEET=$S/sim/fleets/pcie-l4.yaml GPUOP_SIM_STATE=$T/roots/tr-3/var/lib/gpuop-sim/nvml \
    "$B/gpuop-sim" inject ecc --gpu 0 --dbe 1 >/dev/null || fail "inject the ECC error on tr-3"
is_rem() { [ "$(rem "$1")" = "$2" ]; }
wait_for 10 "tr-3 quarantined" is_rem tr-3 quarantined
echo "ok: tr-3 quarantined $(($(now_ms) - t_fault)) ms after the fault; waiting: $(ann tr-3 remediation.gpuop.dev/waiting)"
held() { ann tr-2 upgrade.gpuop.dev/waiting | grep -q "remediation: "; }
wait_for 20 "tr-2's upgrade held by the remediation" held
echo "held: tr-2: $(ann tr-2 upgrade.gpuop.dev/waiting)"
# past the canary's soak: the rollout stays paused while tr-3 is out
soak_end=$((t_roll + 20))
while [ $SECONDS -lt $((soak_end + 25)) ]; do
    [ "$(upg tr-2)" = upgrade-required ] || fail "tr-2 moved while its pool holds: $(upg tr-2)"
    is_rem tr-3 quarantined || fail "tr-3 left quarantined without a person: $(rem tr-3)"
    sleep 1
done
held || fail "the hold went: tr-2 waiting \"$(ann tr-2 upgrade.gpuop.dev/waiting)\""
echo "ok: the rollout paused past the canary's soak ($((SECONDS - t_roll)) s into it): tr-2 and tr-3 upgrade-required"

# ---- a person approves the repair; the rollout goes on -------------------------------------------
k annotate node tr-3 remediation.gpuop.dev/approved=true >/dev/null || fail "approve tr-3's repair"
t_appr=$(now_ms)
wait_for 60 "tr-3 back in service" sh -c "[ -z \"\$($K get node tr-3 -o jsonpath='{.metadata.labels.remediation\.gpuop\.dev/state}')\" ]"
echo "ok: tr-3 repaired (drained, GPU 0 reset by its executor, validated) in $(($(now_ms) - t_appr)) ms after the approval"
grep -q "remediation request done node=tr-3" <(k -n gpu-operator logs "$(pod_on nvidia-driver-daemonset tr-3)" -c nvidia-remediation-ctr 2>/dev/null) ||
    fail "tr-3's executor did not answer the reset"
for n in tr-2 tr-3; do
    wait_for 150 "$n upgraded to $V2 and back in service" node_current "$n" "$V2"
done
echo "ok: the rollout finished $((SECONDS - t_roll)) s after it began"
! grep -q "reconcile failed" "$T/operator.log" || fail "a reconcile failed: $(grep -m3 "reconcile failed" "$T/operator.log")"

# ---- the budget, on every state the API server served --------------------------------------------
sleep 2 # the watch catches up
$W limits "$T/nodes.jsonl" 1 train=8 || fail "the pool's budget was exceeded (above)"
echo "ok: fault during the rollout: the quarantine in the pool's budget, the rollout paused, the pool kept its floor (test wall time $((SECONDS - t_start)) s)"
