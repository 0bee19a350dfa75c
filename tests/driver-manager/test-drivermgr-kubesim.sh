#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuop driver-manager` against kubesim, on a node root of its own (the simulated rmmod from
# build/sim-image-bin unloads there):
#  - a GPU pod protected by a PodDisruptionBudget (minAvailable 1): the operands are paused and
#    their pods go, the GPU pod is not evicted while the budget forbids it, the driver manager
#    says why it waits (log and Event) and keeps the modules; relaxing the budget lets it evict,
#    unload in dependency order, restore the labels and record the owner;
#  - killed (SIGKILL) after each step and run again, it converges: labels as before, the node
#    uncordoned, the modules gone, every pod evicted exactly once;
#  - the operator's upgrade controller driving the node: no eviction;
#  - a host driver: the node is labelled pre-installed, exit 1;
#  - bad input: exit 2, one line naming it.
# It runs as the driver DaemonSet's ServiceAccount under the RBAC deploy/operands/driver.yaml
# ships (kubesim enforces it).
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim" "$B/sim-image-bin/rmmod"

start_kubesim --load "$S/sim/clusters/demo.yaml" --pod-ready-delay 200ms
N=dgx-h100-1
V=550.127.05
ROOT=$T/root
DROOT=$ROOT/run/nvidia/driver
LABELS=(nvidia.com/gpu.deploy.driver=true nvidia.com/gpu.deploy.device-plugin=true
        nvidia.com/gpu.deploy.dcgm=false nvidia.com/gpu.deploy.gpu-feature-discovery=custom
        nvidia.com/gpu.deploy.operator-validator=true)
$K label node $N "${LABELS[@]}" >/dev/null
# an operand: its pod runs on nodes whose device-plugin label is true
$K apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: fake-device-plugin, namespace: gpu-operator}
spec:
  selector: {matchLabels: {app: fake-device-plugin}}
  template:
    metadata: {labels: {app: fake-device-plugin}}
    spec:
      nodeSelector: {nvidia.com/gpu.deploy.device-plugin: "true"}
      containers: [{name: c, image: busybox}]
YAML

# The driver manager runs as the driver DaemonSet's ServiceAccount, under its shipped RBAC.
python3 - "$S/deploy/operands/driver.yaml" >"$T/driver-rbac.yaml" <<'PY'
import sys
docs = open(sys.argv[1]).read().replace("${NAMESPACE}", "gpu-operator").split("\n---\n")
print("\n---\n".join(d for d in docs if "kind: DaemonSet" not in d))
PY
$K apply -f "$T/driver-rbac.yaml" >/dev/null
sa_kubeconfig "$T/dm.kubeconfig" gpu-operator nvidia-driver

driver_loaded() { # the containerized driver's modules and driver root
    rm -rf "$ROOT"
    mkdir -p "$DROOT/usr/lib/x86_64-linux-gnu" "$ROOT/run/nvidia/validations"
    for m in nvidia nvidia_uvm nvidia_modeset; do
        mkdir -p "$ROOT/sys/module/$m"
        echo 1 >"$ROOT/sys/module/$m/refcnt"
    done
    echo $V >"$ROOT/sys/module/nvidia/version"
    : >"$DROOT/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.$V"
    : >"$ROOT/run/nvidia/validations/.driver-ctr-ready" # stale: its container is gone
}
gpu_pod() { # NAME: a pod on $N requesting a GPU
    $K apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default, labels: {app: $1}}
spec:
  nodeName: $N
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: nvcr.io/nvidia/cuda:12.4.1-base, resources: {limits: {nvidia.com/gpu: "1"}}}
YAML
}
plain_pod() { # NAME: a pod on $N without GPUs or controller
    $K apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  nodeName: $N
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: busybox}]
YAML
}
pod_ready() { [ "$($K get pod -n "$1" "$2" -o jsonpath='{.status.phase}')" = Running ]; }
ds_pod_on_node() { [ -n "$($K get pods -n gpu-operator -l app=fake-device-plugin --field-selector spec.nodeName=$N -o name)" ]; }
no_ds_pod() { ! ds_pod_on_node; }
gone() { ! $K get pod -n default "$1" >/dev/null 2>&1; }
label() { $K get node $N -o go-template="{{index .metadata.labels \"$1\"}}"; }
labels_restored() {
    for kv in "${LABELS[@]}"; do
        [ "$(label "${kv%%=*}")" = "${kv#*=}" ] || { echo "label ${kv%%=*}=$(label "${kv%%=*}")"; return 1; }
    done
}
DM_ENV=(PATH="$B/sim-image-bin:$PATH" GPUOP_SIM_ROOT="$ROOT" NODE_NAME=$N KUBECONFIG="$T/dm.kubeconfig"
        POD_NAMESPACE=gpu-operator DRIVER_VERSION=570.86.15 OPERAND_WAIT_TIMEOUT=20s)
DM_FLAGS=(--host-root="$ROOT" --driver-install-dir="$DROOT"
          --validations-dir="$ROOT/run/nvidia/validations")
dm() { # LOG [ENV...]: runs the driver manager in the foreground; sets RC
    local log=$1
    shift
    set +e
    env "${DM_ENV[@]}" "$@" "$B/gpuop" driver-manager "${DM_FLAGS[@]}" >>"$log" 2>&1
    RC=$?
    set -e
}
evictions() { grep -c "evicted pod.*pod=default/$1 " "$2" || true; }

# ---- a disruption budget holds the eviction ----------------------------------------------------
driver_loaded
gpu_pod train
$K apply -f - >/dev/null <<YAML
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: train, namespace: default}
spec: {minAvailable: 1, selector: {matchLabels: {app: train}}}
YAML
wait_for 10 "the GPU pod runs" pod_ready default train
wait_for 10 "the operand pod runs" ds_pod_on_node
budget_computed() { [ "$($K get pdb train -o jsonpath='{.status.currentHealthy}')" = 1 ]; }
wait_for 10 "the budget is computed" budget_computed
LOG=$T/pdb.log
env "${DM_ENV[@]}" "$B/gpuop" driver-manager "${DM_FLAGS[@]}" >"$LOG" 2>&1 &
DM=$!
pids+=($DM)
wait_for 20 "the driver manager waits on the budget" grep -q "eviction refused by a disruption budget; waiting" "$LOG"
grep "eviction refused" "$LOG" | head -1 | grep "pod=default/train reason=" |
    grep -q "Cannot evict pod as it would violate the pod's disruption budget" ||
    fail "the wait does not say why: $(grep 'eviction refused' "$LOG" | head -1)"
[ "$(label nvidia.com/gpu.deploy.device-plugin)" = paused-for-driver-upgrade ] || fail "device-plugin not paused"
[ "$(label nvidia.com/gpu.deploy.dcgm)" = false ] || fail "dcgm=false not kept"
[ "$(label nvidia.com/gpu.deploy.gpu-feature-discovery)" = custom_paused-for-driver-upgrade ] ||
    fail "gfd not paused as <value>_paused-for-driver-upgrade"
[ "$(label nvidia.com/gpu.deploy.driver)" = true ] || fail "the driver's own label changed"
no_ds_pod || fail "the paused operand's pod is still on the node"
sleep 3
[ -z "$($K get pod train -o jsonpath='{.metadata.deletionTimestamp}')" ] ||
    fail "the GPU pod was evicted while its budget forbids it"
[ -d "$ROOT/sys/module/nvidia" ] || fail "the modules went while the GPU pod runs"
kill -0 $DM 2>/dev/null || fail "the driver manager ended while waiting"
$K get events -A -o json | grep -q '"reason": "GPUPodEvictionBlocked"' || fail "no GPUPodEvictionBlocked Event"
$K patch pdb train --type=merge -p '{"spec":{"minAvailable":0}}' >/dev/null
poll 30 ended $DM || fail "the driver manager did not finish once the budget allowed"
wait $DM || fail "the driver manager exited $?"
gone train || fail "the GPU pod is still there"
[ "$(evictions train "$LOG")" = 1 ] || fail "the GPU pod was evicted $(evictions train "$LOG") times"
for m in nvidia_modeset nvidia_uvm nvidia; do
    [ ! -d "$ROOT/sys/module/$m" ] || fail "module $m still loaded"
done
order=$(grep -o 'unloading kernel module module=[a-z_]*' "$LOG" | sed 's/.*=//' | tr '\n' ' ')
[ "$order" = "nvidia_modeset nvidia_uvm nvidia " ] || fail "unload order: $order"
[ ! -e "$ROOT/run/nvidia/validations/.driver-ctr-ready" ] || fail "stale .driver-ctr-ready kept"
labels_restored || fail "labels not restored"
ann=$($K get node $N -o go-template='{{index .metadata.annotations "gpuop.dev/driver-owner"}}')
echo "$ann" | grep -q '"owner":"container"' || fail "owner annotation: $ann"
echo "$ann" | grep -q '"version":"550.127.05"' || fail "owner annotation version: $ann"
$K get events -A -o json | grep -q '"reason": "DriverOwnerContainer"' || fail "no DriverOwnerContainer Event"
wait_for 10 "the operand comes back" ds_pod_on_node
$K delete pdb train >/dev/null

# ---- killed after each step, run again --------------------------------------------------------
# One node of its own per step (a copy of $N with its own root and namespace), the nine rounds
# side by side: each the same as alone, since the driver manager touches only its own node.
pods_up() { # NS NODE: train and web Running in NS, the operand's pod on NODE
    $K get pods -A -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
run = {p["metadata"]["name"] for p in items if p["status"].get("phase") == "Running"
       and p["metadata"]["namespace"] == sys.argv[1] and not p["metadata"].get("deletionTimestamp")}
ds = [p for p in items if p["metadata"]["name"].startswith("fake-device-plugin-")
      and p["spec"].get("nodeName") == sys.argv[2]]
sys.exit(0 if {"train", "web"} <= run and ds else 1)' "$1" "$2"
}
pods_gone() { ! $K get pods -n "$1" -o name | grep -qE 'pod/(train|web)$'; }
node_converged() { # NODE STEP: the labels as before, uncordoned, no cordon mark, the owner recorded
    $K get node "$1" -o json | python3 -c '
import json, sys
n = json.load(sys.stdin)
labels, ann = n["metadata"].get("labels", {}), n["metadata"].get("annotations", {})
bad = ["label %s=%s" % (k, labels.get(k)) for k, v in (a.split("=", 1) for a in sys.argv[2:])
       if labels.get(k) != v]
if n.get("spec", {}).get("unschedulable"): bad.append("cordoned")
if "gpuop.dev/driver-manager-cordoned" in ann: bad.append("cordon mark stays")
if json.loads(ann.get("gpuop.dev/driver-owner", "{}")).get("owner") != "container":
    bad.append("owner annotation: %s" % ann.get("gpuop.dev/driver-owner"))
print("%s: %s" % (sys.argv[1], ", ".join(bad))) if bad else None
sys.exit(1 if bad else 0)' "$2" "${LABELS[@]}"
}
kill_round() { # STEP: in a subshell of its own; exit 1 (with the reason) on a failure
    local step=$1
    N=dm-$step ROOT=$T/root-$step DROOT=$T/root-$step/run/nvidia/driver
    local ns=s-$step log=$T/kill-$step.log
    DM_ENV=(PATH="$B/sim-image-bin:$PATH" GPUOP_SIM_ROOT="$ROOT" NODE_NAME=$N KUBECONFIG="$T/dm.kubeconfig"
            POD_NAMESPACE=gpu-operator DRIVER_VERSION=570.86.15 OPERAND_WAIT_TIMEOUT=20s)
    DM_FLAGS=(--host-root="$ROOT" --driver-install-dir="$DROOT"
              --validations-dir="$ROOT/run/nvidia/validations")
    driver_loaded
    $K apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: $ns, labels: {app: train}}
spec:
  nodeName: $N
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: nvcr.io/nvidia/cuda:12.4.1-base, resources: {limits: {nvidia.com/gpu: "1"}}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: $ns}
spec:
  nodeName: $N
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: busybox}]
YAML
    wait_for 30 "the pods run ($step)" pods_up $ns $N
    dm "$log" ENABLE_AUTO_DRAIN=true DRAIN_USE_FORCE=true GPUOP_DRIVER_MANAGER_KILL_AFTER=$step
    [ $RC = 137 ] || fail "the run killed after $step exited $RC"
    grep -q "killed after step (test hook) step=$step" "$log" || fail "no kill after $step"
    dm "$log" ENABLE_AUTO_DRAIN=true DRAIN_USE_FORCE=true
    [ $RC = 0 ] || fail "the rerun after a kill after $step exited $RC: $(tail -n 5 "$log")"
    wait_for 30 "the evicted pods go ($step)" pods_gone $ns
    local ev
    for pod in train web; do
        ev=$(grep -c "evicted pod.*pod=$ns/$pod " "$log" || true)
        [ "$ev" = 1 ] || fail "$step: $pod evicted $ev times"
    done
    [ ! -d "$ROOT/sys/module/nvidia" ] || fail "$step: nvidia still loaded"
    node_converged $N $step || fail "$step: the node did not converge"
}
STEPS=(owner pause operands evict drain unload clean restore report)
$K get node $N -o json | python3 -c '
import json, sys
n = json.load(sys.stdin)
out = []
for s in sys.argv[1:]:
    c = json.loads(json.dumps(n))
    m = c["metadata"]
    for k in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        m.pop(k, None)
    m["name"] = "dm-" + s
    m["labels"]["kubernetes.io/hostname"] = "dm-" + s
    m.get("annotations", {}).pop("gpuop.dev/driver-owner", None)
    out.append(c)
    out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "s-" + s}})
import yaml; print(yaml.safe_dump_all(out))' "${STEPS[@]}" >"$T/step-nodes.yaml"
$K apply -f "$T/step-nodes.yaml" >/dev/null
rounds=()
for step in "${STEPS[@]}"; do
    (kill_round $step) >"$T/round-$step.out" 2>&1 &
    rounds+=($!)
done
for i in "${!STEPS[@]}"; do
    wait "${rounds[$i]}" || { cat "$T/round-${STEPS[$i]}.out"; fail "the round killed after ${STEPS[$i]} failed"; }
done
echo "ok: killed after each of ${#STEPS[@]} steps and run again, every node converged"

# the drains are on record for gpuop status (a round's node): the node annotation and an Event
drained=$($K get node dm-report -o go-template='{{index .metadata.annotations "gpuop.dev/last-drain"}}')
echo "$drained" | grep -q '"by":"driver-manager"' || fail "no gpuop.dev/last-drain after a drain: $drained"
echo "$drained" | grep -q '"reason":"driver reload: ' || fail "last-drain reason: $drained"
$K get events -A -o json | grep -q '"reason": "NodeDrain"' || fail "no NodeDrain Event"

# ---- the operator's upgrade controller drives the node: no eviction ----------------------------
driver_loaded
gpu_pod train
wait_for 10 "the GPU pod runs" pod_ready default train
$K label node $N nvidia.com/gpu-driver-upgrade-state=pod-restart-required >/dev/null
LOG=$T/upgrade.log
dm "$LOG" ENABLE_AUTO_DRAIN=true
[ $RC = 0 ] || fail "operator-driven run exited $RC"
grep -q "eviction and drain are its own" "$LOG" || fail "no operator-driven line"
[ "$(evictions train "$LOG")" = 0 ] || fail "evicted a GPU pod though the operator drives the upgrade"
[ -z "$($K get pod train -o jsonpath='{.metadata.deletionTimestamp}')" ] || fail "train terminating"
$K label node $N nvidia.com/gpu-driver-upgrade-state- >/dev/null
$K delete pod train --wait=false >/dev/null

# ---- a host driver ------------------------------------------------------------------------------
rm -rf "$ROOT"
mkdir -p "$ROOT/sys/module/nvidia" "$ROOT/usr/bin" "$ROOT/usr/lib/x86_64-linux-gnu" "$DROOT"
echo $V >"$ROOT/sys/module/nvidia/version"
printf '#!/bin/sh\n' >"$ROOT/usr/bin/nvidia-smi"
chmod +x "$ROOT/usr/bin/nvidia-smi"
: >"$ROOT/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.$V"
LOG=$T/host.log
dm "$LOG" HOST_DRIVER_WAIT=500ms
[ $RC = 1 ] || fail "a host driver exited $RC, not 1"
[ "$(label nvidia.com/gpu.deploy.driver)" = pre-installed ] || fail "not labelled pre-installed"
grep -q "the driver on node $N is the host's" "$LOG" || fail "no host driver line"
$K get node $N -o go-template='{{index .metadata.annotations "gpuop.dev/driver-owner"}}' |
    grep -q '"owner":"host"' || fail "owner annotation not host"
[ -d "$ROOT/sys/module/nvidia" ] || fail "the host's driver was unloaded"
labels_restored 2>/dev/null && fail "pre-installed should have replaced driver=true"

# ---- bad input ------------------------------------------------------------------------------------
LOG=$T/bad.log
set +e
env "${DM_ENV[@]}" "$B/gpuop" driver-manager --host-root=/nonexistent/root >"$LOG" 2>&1
rc=$?
set -e
[ $rc = 2 ] || fail "a missing host root exited $rc"
[ "$(wc -l <"$LOG")" = 1 ] && grep -q 'host root "/nonexistent/root": No such file or directory' "$LOG" ||
    fail "missing host root: $(cat "$LOG")"
set +e
env -u NODE_NAME "$B/gpuop" driver-manager --host-root="$ROOT" >"$LOG" 2>&1
rc=$?
env "${DM_ENV[@]}" GPUOP_DRIVER_MANAGER_KILL_AFTER=nope "$B/gpuop" driver-manager "${DM_FLAGS[@]}" >>"$LOG" 2>&1
rc2=$?
set -e
[ $rc = 2 ] && [ $rc2 = 2 ] || fail "no node name exited $rc, a bad step $rc2: $(cat "$LOG")"
grep -q "no node name" "$LOG" || fail "no node name: $(cat "$LOG")"
echo ok
