#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Driver upgrades end to end on simulated nodes that run the stack: kubesim, kubelet-sim with four
# L4 servers in two DriverUpgradePools (research: automatic, its first node a canary that soaks
# 5 s; serving: manual approval, a capacity floor of 4 GPUs, a GPU Deployment under a
# PodDisruptionBudget), the operator under its shipped RBAC.
#
# Rollout 1, a driver version change: the research canary goes first; an XID on it while it
# soaks (its device plugin marks the GPU unhealthy) halts the research pool, which goes on when
# resumed; the serving pool does not move until approved; then its first node waits in
# pod-deletion-required while the budget allows no disruption (the second waits for the floor),
# and goes on once the budget allows it. Every node goes through NVIDIA's states in order (from
# the GPUDriverUpgrade Events), its GPU pods are evicted, its driver pod is replaced, the
# simulated driver reloads with the new version (NVML's version file on the node, the validator's
# gpuop.dev/driver-owner), its validator passes, the device plugin advertises its 4 GPUs again and
# it is uncordoned.
#
# Rollout 2: the research canary's kernel loses its headers, so its new driver fails to build:
# the research pool halts (RolloutHalted naming the node and the reason, an Event) and its second
# node never starts, while the serving pool (approved for the new revision) finishes; the
# operator is killed (SIGKILL) while a serving node is mid-upgrade and restarted: it resumes from
# the labels, no node is skipped and only the failed canary stays cordoned.
#
# Each reload goes as on a real node: the device plugin (and the other operands) hold the nvidia
# module through NVML, so the old driver container's unload on SIGTERM is refused ("Module nvidia
# is in use"); the new driver pod's driver manager finds the module loaded, pauses the operands
# (their deploy labels), waits for their pods to go, unloads the modules and restores the labels;
# the new driver container loads and the operands come back.
#
# Every node and gpu-operator pod change the API server served is recorded (e2e_watch.py) and
# replayed in resourceVersion order: never more than maxUnavailable (50% of 4) nodes cordoned or
# NotReady, never fewer than the serving pool's floor; and for each node upgraded (rollout 1: the
# four, rollout 2: the serving two) its old driver pod DELETED, then its GPUs withdrawn (its
# device plugin pod DELETED, or allocatable nvidia.com/gpu at 0), then a new driver pod Ready,
# then its 4 GPUs advertised again by a new device plugin pod, then upgrade-done and uncordoned.
# (The validator may pass before or after the plugin advertises: nothing is asked of that.)
# As root (namespaces per node); skipped otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
on_fail() { k get nodes -L nvidia.com/gpu-driver-upgrade-state 2>/dev/null; }
W="/usr/bin/python3 $S/tests/upgrade/e2e_watch.py"
V1=570.86.15 V2=580.105.08 V3=580.126.09
NODES="res-1 res-2 srv-1 srv-2"
t_start=$SECONDS

kl_start_cluster 198.18.255.22 "$S/tests/upgrade/kubelet-cluster.yaml" klup0 198.18.222.0/24 4
echo "ok: 4 nodes registered by kubelet-sim ($((SECONDS - t_start)) s)"
$W watch "$T/nodes.jsonl" $KUBECTL >"$T/watch.log" 2>&1 &
pids+=($!)
$W pods "$T/pods.jsonl" gpu-operator $KUBECTL >"$T/watch-pods.log" 2>&1 &
pids+=($!)

cat <<'EOF' | k apply -f - >/dev/null || fail "apply the pools"
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: research}
spec:
  nodeSelector: {gpuop.test/pool: research}
  canary: {nodes: 1, soakSeconds: 60}
---
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: serving}
spec:
  nodeSelector: {gpuop.test/pool: serving}
  approval: manual
  capacityFloor: 4
EOF
MPORT=$(free_port)
kl_start_operator --metrics-listen "127.0.0.1:$MPORT" --leader-elect false
python3 - "$S/deploy/samples/clusterpolicy.yaml" "$V1" >"$T/policy.yaml" <<'PY' || fail "edit the sample"
import sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
spec = cp["spec"]
spec["driver"]["version"] = sys.argv[2]
# the simulated driver builds in 2 s: its startup probe need not wait NVIDIA's 60 s first
spec["driver"]["startupProbe"] = {"initialDelaySeconds": 2, "periodSeconds": 2}
spec["driver"]["upgradePolicy"] = {"autoUpgrade": True, "maxParallelUpgrades": 0,
    "maxUnavailable": "50%", "podDeletion": {"timeoutSeconds": 300}, "drain": {"enable": False}}
# what an upgrade does not touch stays off: fewer processes per node
# a GPU the health check marked unhealthy (the XID below) is offered again 8 s after its last error
spec["devicePlugin"]["env"] = [{"name": "DP_HEALTH_RECOVERY_PERIOD", "value": "8s"}]
for c in ("dcgmExporter", "migManager", "nodeStatusExporter"):
    spec[c] = {"enabled": False}
print(yaml.safe_dump(cp))
PY
k apply -f "$T/policy.yaml" >/dev/null || fail "apply the ClusterPolicy"

state() { k get node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}'; }
is_state() { [ "$(state "$1")" = "$2" ]; }
alloc() { k get node "$1" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}'; }
ann() { k get node "$1" -o jsonpath="{.metadata.annotations.${2//./\\.}}"; }
owner_version() { ann "$1" gpuop.dev/driver-owner | python3 -c 'import json,sys; print(json.load(sys.stdin).get("version",""))' 2>/dev/null; }
nvml_version() { cat "$T/roots/$1/sys/module/nvidia/version" 2>/dev/null; }
pod_on() { k -n gpu-operator get pods -l "app=$1" --field-selector "spec.nodeName=$2" -o jsonpath='{.items[*].metadata.name}'; }
validator_ready() {
    local p
    p=$(pod_on nvidia-operator-validator "$1")
    [ -n "$p" ] && [ "$(k -n gpu-operator get pod "$p" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
node_current() { # NODE VERSION: upgraded and back in service
    is_state "$1" upgrade-done && [ "$(owner_version "$1")" = "$2" ] && [ "$(nvml_version "$1")" = "$2" ] &&
        [ "$(alloc "$1")" = 4 ] && validator_ready "$1" &&
        [ "$(k get node "$1" -o jsonpath='{.spec.unschedulable}')" != true ]
}
for n in $NODES; do
    wait_for 150 "$n: driver $V1 validated, 4 GPUs advertised, upgrade-done" node_current "$n" "$V1"
done
echo "ok: the stack is up on the 4 nodes with driver $V1 ($((SECONDS - t_start)) s)"
metrics_passes() {
    local page
    page=$(curl -s "127.0.0.1:$MPORT/metrics") || return 1
    sed -n 's/^gpuop_driver_upgrade_passes_total \([0-9]*\)$/\1/p' <<<"$page"
}

# GPU workloads: a serving Deployment on srv-1 under a budget that allows no disruption, a
# research one on res-2 with none.
cat <<'EOF' | k apply -f - >/dev/null || fail "create the workloads"
apiVersion: v1
kind: Namespace
metadata: {name: work}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: serve, namespace: work}
spec:
  replicas: 1
  selector: {matchLabels: {app: serve}}
  template:
    metadata: {labels: {app: serve}}
    spec:
      nodeSelector: {kubernetes.io/hostname: srv-1}
      containers:
      - name: main
        image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
        env: [{name: SIM_WORKLOAD_SECONDS, value: "3600"}]
        resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: serve, namespace: work}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: serve}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: train, namespace: work}
spec:
  replicas: 1
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      nodeSelector: {kubernetes.io/hostname: res-2}
      containers:
      - name: main
        image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
        env: [{name: SIM_WORKLOAD_SECONDS, value: "3600"}]
        resources: {limits: {nvidia.com/gpu: 2}}
EOF
running_pod() { # APP: the name of its Running pod
    k -n work get pods -l "app=$1" -o jsonpath='{range .items[?(@.status.phase=="Running")]}{.metadata.name}{"\n"}{end}'
}
has_running() { [ -n "$(running_pod "$1")" ]; }
wait_for 30 "the serve pod Running" has_running serve
wait_for 30 "the train pod Running" has_running train
pdb_blocks() { [ "$(k -n work get pdb serve -o jsonpath='{.status.disruptionsAllowed}')" = 0 ]; }
wait_for 10 "PDB serve with no disruption allowed" pdb_blocks
serve_pod=$(running_pod serve) train_pod=$(running_pod train)
declare -A drv_before
for n in $NODES; do drv_before[$n]=$(pod_on nvidia-driver-daemonset "$n"); done

# ---- rollout 1 ---------------------------------------------------------------------------------
list_rv() { k get --raw /api/v1/events | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])'; }
rv1=$(list_rv) && [ -n "$rv1" ] || fail "no resourceVersion for the Events list"
t1=$SECONDS
k patch clusterpolicy cluster-policy --type merge -p "{\"spec\":{\"driver\":{\"version\":\"$V2\"}}}" >/dev/null
wait_for 60 "canary res-1 upgraded to $V2" node_current res-1 "$V2"
waits_for() { ann "$1" upgrade.gpuop.dev/waiting | grep -q "$2"; }
waits_for res-2 canary || fail "res-2 does not say it waits for the canary: $(ann res-2 upgrade.gpuop.dev/waiting)"
echo "ok: canary res-1 upgraded first; res-2 waits: $(ann res-2 upgrade.gpuop.dev/waiting)"
# An XID on the soaking canary: its device plugin marks the GPU unhealthy (the node offers 3 of
# its 4), so the canary fails its soak and the research pool halts; resumed, it goes on.
GPUOP_SIM_FLEET=$S/sim/fleets/pcie-l4.yaml GPUOP_SIM_STATE=$T/roots/res-1/var/lib/gpuop-sim/nvml \
    "$B/gpuop-sim" inject xid --gpu 0 --code 48 >/dev/null || fail "inject an XID on res-1"
halted() { k get dup "$1" -o jsonpath='{.status.halted}'; }
halted_by_xid() { halted research | grep -q "canary node res-1: 1 of 4 GPUs unhealthy during the soak"; }
wait_for 30 "the research pool halted by the XID on its canary" halted_by_xid
is_state res-2 upgrade-required || fail "res-2 started while its pool is halted: $(state res-2)"
waits_for res-2 "rollout halted" || fail "res-2 does not say the rollout halted: $(ann res-2 upgrade.gpuop.dev/waiting)"
echo "ok: an XID on the soaking canary halted the research pool: $(halted research)"
k annotate dup research "upgrade.gpuop.dev/resumed-revision=$(k get dup research -o jsonpath='{.status.targetRevision}')" >/dev/null
wait_for 60 "res-2 upgraded to $V2 after the resume" node_current res-2 "$V2"
for n in srv-1 srv-2; do
    is_state "$n" upgrade-required || fail "$n moved without approval: $(state "$n")"
    waits_for "$n" approval || fail "$n does not say it waits for approval: $(ann "$n" upgrade.gpuop.dev/waiting)"
done
# the serving nodes never left upgrade-required (every change the API server served)
moved=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    v = json.loads(l)
    if v["pool"] == "serving" and v["state"] not in ("upgrade-done", "upgrade-required", "") : print(v["node"], v["state"])' "$T/nodes.jsonl")
[ -z "$moved" ] || fail "a serving node moved before approval: $moved"
echo "ok: the research pool is done ($((SECONDS - t1)) s); the serving pool waits: $(ann srv-1 upgrade.gpuop.dev/waiting)"

rev=$(k get dup serving -o jsonpath='{.status.targetRevision}')
[ -n "$rev" ] || fail "serving pool has no targetRevision"
k annotate dup serving "upgrade.gpuop.dev/approved-revision=$rev" --overwrite >/dev/null
wait_for 30 "srv-1 in pod-deletion-required" is_state srv-1 pod-deletion-required
p0=$(metrics_passes)
more_passes() { [ "$(metrics_passes)" -ge $((p0 + 3)) ]; }
wait_for 30 "three more planning passes" more_passes
is_state srv-1 pod-deletion-required || fail "srv-1 left pod-deletion-required under the budget: $(state srv-1)"
[ "$(running_pod serve)" = "$serve_pod" ] || fail "the serve pod was evicted against its budget"
is_state srv-2 upgrade-required || fail "srv-2 started below the floor: $(state srv-2)"
waits_for srv-2 "capacity floor" || fail "srv-2 does not say it waits for the floor: $(ann srv-2 upgrade.gpuop.dev/waiting)"
echo "ok: srv-1 waits in pod-deletion-required while PDB serve allows no disruption ($serve_pod runs); srv-2: $(ann srv-2 upgrade.gpuop.dev/waiting)"
k -n work patch pdb serve --type merge -p '{"spec":{"minAvailable":0}}' >/dev/null
wait_for 60 "srv-1 upgraded to $V2" node_current srv-1 "$V2"
wait_for 60 "srv-2 upgraded to $V2" node_current srv-2 "$V2"
echo "ok: rollout 1 through the 4 nodes in $((SECONDS - t1)) s"

k get events -A -o json >"$T/events1.json"
want="upgrade-required cordon-required wait-for-jobs-required pod-deletion-required pod-restart-required validation-required uncordon-required upgrade-done"
seqs=$($W states "$T/events1.json" "$rv1" $NODES) || fail "read the Events"
[ "$(wc -l <<<"$seqs")" = 4 ] || fail "state sequences of 4 nodes expected: $seqs"
while read -r n seq; do
    [ "$seq" = "$want" ] || fail "$n went through [$seq], not [$want]"
    echo "ok: $n: $seq"
done <<<"$seqs"
for n in $NODES; do
    after=$(pod_on nvidia-driver-daemonset "$n")
    [ -n "$after" ] && [ "$after" != "${drv_before[$n]}" ] || fail "$n: driver pod not replaced (${drv_before[$n]} -> $after)"
done
gone() { ! k -n work get pod "$1" >/dev/null 2>&1; }
wait_for 30 "$serve_pod evicted" gone "$serve_pod"
wait_for 30 "$train_pod evicted" gone "$train_pod"
wait_for 30 "a new serve pod Running on srv-1" has_running serve
wait_for 30 "a new train pod Running on res-2" has_running train
$W reloads "$T/nodes.jsonl" "$T/pods.jsonl" "$rv1" $NODES || fail "a driver reload out of order"
echo "ok: GPU pods evicted and replaced ($serve_pod -> $(running_pod serve), $train_pod -> $(running_pod train)); driver pods replaced; NVML and driver-owner say $V2 on every node"

# ---- rollout 2: the canary's new driver fails to build -----------------------------------------
rm -rf "$T"/roots/res-1/usr/src/linux-headers-*
rv2=$(list_rv) && [ -n "$rv2" ] || fail "no resourceVersion for the Events list"
w2=$(wc -l <"$T/nodes.jsonl")
t2=$SECONDS
k patch clusterpolicy cluster-policy --type merge -p "{\"spec\":{\"driver\":{\"version\":\"$V3\"}}}" >/dev/null
new_rev() { r=$(k get dup serving -o jsonpath='{.status.targetRevision}') && [ -n "$r" ] && [ "$r" != "$rev" ]; }
wait_for 30 "the serving pool's new target revision" new_rev
rev2=$(k get dup serving -o jsonpath='{.status.targetRevision}')
k annotate dup serving "upgrade.gpuop.dev/approved-revision=$rev2" --overwrite >/dev/null
# the operator killed mid-upgrade: SIGKILL, no chance to finish anything
srv_in_flight() { case "$(state srv-1)" in cordon-required | wait-for-jobs-required | pod-deletion-required | pod-restart-required | validation-required) return 0 ;; esac; return 1; }
wait_for 60 "srv-1 mid-upgrade" srv_in_flight
killed_in=$(state srv-1)
kill -KILL "$KL_OPERATOR_PID"
wait "$KL_OPERATOR_PID" 2>/dev/null
echo "ok: operator killed with srv-1 in $killed_in"
kl_start_operator --metrics-listen "127.0.0.1:$MPORT" --leader-elect false
names_res1() { halted research | grep -q "canary node res-1: upgrade failed: driver pod"; }
wait_for 90 "the research pool halted naming res-1" names_res1
[ "$(k get dup research -o jsonpath='{.status.conditions[?(@.type=="RolloutHalted")].status}')" = True ] ||
    fail "no RolloutHalted condition on the research pool"
wait_for 90 "srv-1 upgraded to $V3" node_current srv-1 "$V3"
wait_for 90 "srv-2 upgraded to $V3" node_current srv-2 "$V3"
phase_done() { [ "$(k get dup serving -o jsonpath='{.status.phase}')" = Done ]; }
wait_for 20 "the serving pool Done" phase_done
is_state res-2 upgrade-required || fail "res-2 of the halted pool moved: $(state res-2)"
k get events -A -o json >"$T/events2.json"
# every change of res-2 the API server served since the version change: never started
res2_seen=$(tail -n +"$((w2 + 1))" "$T/nodes.jsonl" | python3 -c 'import json,sys
print(" ".join(sorted({v["state"] + ("/cordoned" if v["unsched"] else "") for v in map(json.loads, sys.stdin) if v["node"] == "res-2"})))')
[ "$res2_seen" = upgrade-required ] || fail "res-2 of the halted pool went through: $res2_seen"
halt_event() {
    k get events -A -o jsonpath='{range .items[?(@.involvedObject.name=="res-1")]}{.message}{"\n"}{end}' |
        grep -q "canary for revision .* failed: .*; pool research halted"
}
wait_for 10 "an Event for the failed canary" halt_event
echo "ok: the research pool halted: $(halted research); res-2 waits: $(ann res-2 upgrade.gpuop.dev/waiting)"
seqs=$($W states "$T/events2.json" "$rv2" srv-1 srv-2) || fail "read the Events"
[ "$(wc -l <<<"$seqs")" = 2 ] || fail "state sequences of 2 nodes expected: $seqs"
while read -r n seq; do
    [ "$seq" = "$want" ] || fail "$n went through [$seq] in rollout 2, not [$want]"
    echo "ok: $n (operator restarted mid-way): $seq"
done <<<"$seqs"
for n in res-2 srv-1 srv-2; do
    [ "$(k get node "$n" -o jsonpath='{.spec.unschedulable}')" != true ] || fail "$n left cordoned"
done
$W reloads "$T/nodes.jsonl" "$T/pods.jsonl" "$rv2" srv-1 srv-2 || fail "a driver reload out of order"
echo "ok: rollout 2: serving done at $V3, research halted at its canary ($((SECONDS - t2)) s); res-1: $(state res-1)"

$W limits "$T/nodes.jsonl" 2 serving=4 || fail "a limit was passed"
echo "PASS ($((SECONDS - t_start)) s)"
