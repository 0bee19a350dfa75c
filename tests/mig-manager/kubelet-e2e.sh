#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The MIG manager end to end on a simulated node that runs the whole stack: kubesim, kubelet-sim
# with one DGX A100 80GB (sim/clusters/a100-mig.yaml: GPUs 0-1 mixed, 2-3 7x 1g.10gb, 4-5
# 2x 3g.40gb, 6-7 MIG disabled), the operator under its shipped RBAC and NVIDIA's sample
# ClusterPolicy (mixed strategy, no default layout); every operand pod is a process. Then:
#  - nvidia.com/mig.config=all-1g.10gb ends in mig.config.state=success, the node advertises
#    56 (7 x 8 GPUs) nvidia.com/mig-1g.10gb and no other GPU resource, feature discovery's labels
#    follow, the MIG manager wrote the node's CDI spec again (56 MIG devices), the operands are
#    back, an Event names the change;
#  - an unknown config name ends in failed with the reason, the layout kept;
#  - a pod on one of its MIG devices under a PodDisruptionBudget forbidding its eviction keeps
#    all-balanced pending with the budget's reason, the GPUs untouched; once the budget allows,
#    the pod is evicted and the node advertises all-balanced (16 1g.10gb, 8 2g.20gb, 8 3g.40gb);
#  - the single strategy: all-1g.10gb again and the ClusterPolicy's mig.strategy single, the
#    node advertises 56 nvidia.com/gpu.
# As root (namespaces per node); skipped otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
N=mig-a100-1
on_fail() {
    k get node $N -o jsonpath='{.metadata.labels}{"\n"}{.metadata.annotations}{"\n"}{.status.allocatable}{"\n"}' 2>/dev/null
    local p
    for p in $(k -n gpu-operator get pods -l app=nvidia-mig-manager -o name 2>/dev/null); do
        echo "--- $p"; k -n gpu-operator logs "$p" -c nvidia-mig-manager 2>&1 | tail -n 30
    done
    [ -n "${KEEP:-}" ] && { echo "kept: $T"; sleep 100000; }
}

kl_start_cluster 198.18.255.21 "$S/sim/clusters/a100-mig.yaml" klmig0 198.18.221.0/24 1
kl_start_operator --metrics-listen 127.0.0.1:0
t0=$SECONDS
python3 - "$S/deploy/samples/clusterpolicy.yaml" >"$T/policy.yaml" <<'PY' || fail "edit the sample"
import sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
spec = cp["spec"]
spec["mig"]["strategy"] = "mixed"
spec["migManager"]["config"]["default"] = ""
spec["migManager"]["env"] = [{"name": "MIG_MANAGER_INTERVAL", "value": "500ms"}]
spec["driver"]["startupProbe"] = {"initialDelaySeconds": 2, "periodSeconds": 2}
spec["dcgmExporter"]["enabled"] = False
print(yaml.safe_dump(cp))
PY
k apply -f "$T/policy.yaml" >/dev/null || fail "apply the sample ClusterPolicy"

alloc() { k get node $N -o jsonpath="{.status.allocatable.${1//./\\.}}"; }
want_alloc() { [ "$(alloc "$1")" = "$2" ]; }
label() { k get node $N -o go-template="{{with index .metadata.labels \"$1\"}}{{.}}{{end}}"; }
ann() { k get node $N -o go-template="{{with index .metadata.annotations \"$1\"}}{{.}}{{end}}"; }
is_label() { [ "$(label "$1")" = "$2" ]; }

wait_for 90 "18 nvidia.com/mig-1g.10gb advertised" want_alloc nvidia.com/mig-1g.10gb 18
want_alloc nvidia.com/gpu 2 || fail "nvidia.com/gpu: $(alloc nvidia.com/gpu), not 2"
echo "ok: the stack up in $((SECONDS - t0)) s: 2 nvidia.com/gpu, 18 mig-1g.10gb, $(alloc nvidia.com/mig-3g.40gb) mig-3g.40gb"
mig_watching() {
    local p
    p=$(k -n gpu-operator get pods -l app=nvidia-mig-manager -o jsonpath='{.items[0].metadata.name}')
    [ -n "$p" ] && grep -q "mig-manager watching node=" <<<"$(k -n gpu-operator logs "$p" -c nvidia-mig-manager 2>/dev/null)"
}
wait_for 60 "the mig-manager pod watching its node" mig_watching

# ---- all-1g.10gb ------------------------------------------------------------------------------
FLEET=$S/sim/fleets/dgx-a100-80gb-mig.yaml
NVML_STATE=$T/roots/$N/var/lib/gpuop-sim/nvml
CFG=$T/config.yaml
awk '/^  config.yaml: \|/ {on = 1; next} on { sub(/^    /, ""); print }' \
    "$S/tests/migparted/default-mig-parted-config.yaml" >"$CFG"
# the node's GPUs as its simulated driver has them
layout_is() {
    GPUOP_NVML_LIBRARY=$B/libnvidia-ml.so.1 GPUOP_SIM_FLEET=$FLEET GPUOP_SIM_STATE=$NVML_STATE \
        "$B/gpuop" mig-parted assert -f "$CFG" -c "$1" >/dev/null 2>&1
}
[ -d "$NVML_STATE" ] || fail "no simulated NVML state at $NVML_STATE"
resources() { # the node's GPU resources with a non-zero count, sorted
    k get node $N -o json | python3 -c 'import json,sys; a=json.load(sys.stdin)["status"]["allocatable"]; print(" ".join(sorted(f"{k}={v}" for k,v in a.items() if k.startswith("nvidia.com/") and v != "0")))'
}
want_resources() { [ "$(resources)" = "$1" ]; }
operands_back() {
    for l in device-plugin gpu-feature-discovery dcgm-exporter dcgm; do
        [ "$(label nvidia.com/gpu.deploy.$l)" = true ] || return 1
    done
}
event_has() {
    grep -q "$1" <<<"$(k get events -A -o jsonpath='{range .items[?(@.involvedObject.name=="'$N'")]}{.reason}: {.message}{"\n"}{end}')"
}
mig_configure() { k label --overwrite node $N "nvidia.com/mig.config=$1" >/dev/null || fail "label mig.config=$1"; }

t1=$SECONDS
mig_configure all-1g.10gb
wait_for 60 "mig.config.state=success" is_label nvidia.com/mig.config.state success
layout_is all-1g.10gb || fail "the GPUs are not laid out as all-1g.10gb"
wait_for 60 "56 nvidia.com/mig-1g.10gb and nothing else advertised" want_resources "nvidia.com/mig-1g.10gb=56"
echo "ok: all-1g.10gb: state success, the node advertises $(resources) $((SECONDS - t1)) s after the label"
gfd_follows() {
    [ "$(label nvidia.com/mig-1g.10gb.count)" = 56 ] && [ -z "$(label nvidia.com/mig-3g.40gb.count)" ] &&
        [ -z "$(label nvidia.com/mig-2g.20gb.count)" ]
}
wait_for 30 "feature discovery's labels: mig-1g.10gb.count=56, no 2g/3g" gfd_follows
operands_back || fail "operands not restored"
event_has "MIGConfigApplied: MIG layout changed from (none) to all-1g.10gb; pods evicted: none" ||
    fail "no MIGConfigApplied Event"
mm_log() { k -n gpu-operator logs "$(k -n gpu-operator get pods -l app=nvidia-mig-manager -o jsonpath='{.items[0].metadata.name}')" -c nvidia-mig-manager 2>&1; }
grep -q "CDI spec regenerated path=/var/run/cdi/nvidia.yaml" <<<"$(mm_log)" ||
    fail "the MIG manager did not regenerate the CDI spec: $(mm_log | tail -n 5)"
n_cdi=$(grep -c -- '- name: MIG-' "$T/roots/$N/var/run/cdi/nvidia.yaml")
[ "$n_cdi" = 56 ] || fail "the node's CDI spec has $n_cdi MIG devices, not 56"
echo "ok: feature discovery relabelled (mig-1g.10gb.count=$(label nvidia.com/mig-1g.10gb.count)), the CDI spec regenerated by the MIG manager ($n_cdi MIG devices), operands back, the Event recorded"

# ---- an unknown config name -------------------------------------------------------------------
mig_configure all-2x.nothing
wait_for 30 "mig.config.state=failed" is_label nvidia.com/mig.config.state failed
reason=$(ann gpuop.dev/mig-manager.reason)
grep -q 'no config named "all-2x.nothing"' <<<"$reason" || fail "the reason: $reason"
layout_is all-1g.10gb || fail "the layout changed under a refused config"
want_resources "nvidia.com/mig-1g.10gb=56" || fail "resources after a refusal: $(resources)"
operands_back || fail "operands not restored after a refusal"
event_has "MIGConfigFailed: .*all-2x.nothing" || fail "no MIGConfigFailed Event"
echo "ok: an unknown config: state failed, reason \"$reason\", layout and resources kept"

# ---- a disruption budget holds the change -----------------------------------------------------
k apply -f - >/dev/null <<YAML || fail "create the training pod"
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: default, labels: {app: train}}
spec:
  nodeSelector: {kubernetes.io/hostname: $N}
  terminationGracePeriodSeconds: 2
  containers:
  - name: train
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    env: [{name: SIM_WORKLOAD_SECONDS, value: "600"}]
    resources: {limits: {nvidia.com/mig-1g.10gb: 1}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: train, namespace: default}
spec: {minAvailable: 1, selector: {matchLabels: {app: train}}}
YAML
train_runs() { [ "$(k get pod train -o jsonpath='{.status.phase}')" = Running ]; }
wait_for 30 "the training pod runs" train_runs
mig_configure all-balanced
blocked() { is_label nvidia.com/mig.config.state pending && grep -q "train" <<<"$(ann gpuop.dev/mig-manager.reason)"; }
wait_for 30 "state pending with the budget's reason" blocked
sleep 3 # the budget holds: still pending, nothing changed
is_label nvidia.com/mig.config.state pending || fail "state $(label nvidia.com/mig.config.state) under the budget"
layout_is all-1g.10gb || fail "the GPUs changed while the budget forbids the eviction"
train_runs || fail "the training pod went while its budget forbids it"
echo "ok: a budget blocks: state pending, reason \"$(ann gpuop.dev/mig-manager.reason)\", the GPUs untouched"
k patch pdb train --type merge -p '{"spec":{"minAvailable":0}}' >/dev/null || fail "relax the budget"
wait_for 60 "mig.config.state=success after the budget allows" is_label nvidia.com/mig.config.state success
layout_is all-balanced || fail "the GPUs are not laid out as all-balanced"
gone() { ! k get pod train >/dev/null 2>&1 || [ -n "$(k get pod train -o jsonpath='{.metadata.deletionTimestamp}')" ]; }
gone || fail "the training pod was not evicted"
event_has "MIGConfigApplied: MIG layout changed from all-1g.10gb to all-balanced; pods evicted: default/train" ||
    fail "the Event does not name the evicted pod"
bal="nvidia.com/mig-1g.10gb=16 nvidia.com/mig-2g.20gb=8 nvidia.com/mig-3g.40gb=8"
wait_for 60 "all-balanced advertised" want_resources "$bal"
echo "ok: the budget allows: the pod evicted, state success, the node advertises $(resources)"

# ---- the single strategy ------------------------------------------------------------------------
mig_configure all-1g.10gb
wait_for 60 "mig.config.state=success (all-1g.10gb again)" is_label nvidia.com/mig.config.state success
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"mig":{"strategy":"single"}}}' >/dev/null ||
    fail "switch to the single strategy"
wait_for 60 "56 nvidia.com/gpu under the single strategy" want_resources "nvidia.com/gpu=56"
wait_for 30 "feature discovery: gpu.count=56 under single" is_label nvidia.com/gpu.count 56
echo "ok: single strategy: the node advertises $(resources), gpu.product=$(label nvidia.com/gpu.product)"
echo "ok: migmgr-kubelet-e2e in $((SECONDS - t0)) s"
