#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# From NVIDIA's GPU Operator to gpuop and back, end to end on simulated nodes (kubesim,
# kubelet-sim: every pod a process), following docs/migrate-from-nvidia.md and
# docs/rollback-to-nvidia.md.
#
# The cluster as NVIDIA's operator v24.9.2 leaves it (tests/adopt/fixtures: its objects, owned by
# the ClusterPolicy, its node labels, its release from a stand-in of its chart): three GPU nodes
# whose driver NVIDIA's driver container runs, NVIDIA's operands as stand-ins (sim/images:
# nvidia-operand; NVIDIA's device plugin played by gpuop's, the same kubelet API), and a CUDA
# workload holding a GPU on every node. Then, as the page says: NVIDIA's operator stopped,
# `gpuop migrate --from nvidia --apply`, a DriverUpgradePool with manual approval (the driver
# change is deferred), `helm install` of gpuop's chart with NVIDIA's values and the device list
# strategy gpuop's runtime handler needs. Sampled throughout (tests/migrate/sample.py): no
# workload pod evicted or restarted, the simulated driver never unloaded and no driver pod
# deleted, each node's allocatable nvidia.com/gpu never below its first value, at most
# maxUnavailable (1) node with operands being replaced at once. The ClusterPolicy turns ready
# under gpuop and its Takeover condition True; `helm uninstall` of NVIDIA's release deletes
# nothing. Then the way back: gpuop's operator stopped, `gpuop migrate --to nvidia --apply` (the
# toolkit's cleanup rolled out, a surge device plugin on each node), NVIDIA's chart installed
# again and NVIDIA's operator played by the test (its DaemonSets applied as it writes them; their
# own rollouts replace gpuop's pods), the surge plugins removed once NVIDIA's plugin is Ready:
# the workloads and the drivers untouched, allocatable never below its first value, each node's
# runtime configuration back to its bytes before gpuop, and `helm uninstall` of gpuop's release
# deleting nothing. As root (namespaces per
# node); skipped otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
[ -x "$HELM" ] || skip "pinned helm not found at $HELM"
F=$S/tests/adopt/fixtures/nvidia-v24.9.2.yaml
NC=$S/tests/migrate/nvidia-cluster.py
NODES="tko-h100-1 tko-h100-2 tko-l4-1"
start_kubesim --api-ip 198.18.255.26 --tls
start_kubelet_sim "$S/tests/migrate/e2e-cluster.yaml" 3 --bridge kltko0 --subnet 198.18.226.0/24
k apply -f "$S/deploy/crds/" >/dev/null || fail "apply the CRDs"
k create namespace gpu-operator >/dev/null

# ---- the cluster as NVIDIA's operator leaves it ------------------------------------------------
python3 "$NC" values "$F" >"$T/nvidia-values.yaml"
helm_q install gpu-operator "$S/tests/migrate/nvidia-chart" -n gpu-operator -f "$T/nvidia-values.yaml" \
    --set operator.replicas=0 >"$T/nv-install.log" || fail "NVIDIA's chart: $(cat "$T/nv-install.log")"
uid=$(k get clusterpolicy cluster-policy -o jsonpath='{.metadata.uid}')
# its node labels (NVIDIA's operator's: tests/adopt/fixtures' nodes), MIG ones on the H100s
for n in $NODES; do
    k label node "$n" --overwrite nvidia.com/gpu.present=true nvidia.com/gpu.deploy.driver=true \
        nvidia.com/gpu.deploy.container-toolkit=true nvidia.com/gpu.deploy.device-plugin=true \
        nvidia.com/gpu.deploy.gpu-feature-discovery=true nvidia.com/gpu.deploy.dcgm-exporter=true \
        nvidia.com/gpu.deploy.dcgm=true nvidia.com/gpu.deploy.operator-validator=true \
        nvidia.com/gpu.deploy.node-status-exporter=true nvidia.com/gpu-driver-upgrade-state=upgrade-done >/dev/null
    k annotate node "$n" --overwrite nvidia.com/gpu-driver-upgrade-enabled=true >/dev/null
done
for n in tko-h100-1 tko-h100-2; do
    k label node "$n" --overwrite nvidia.com/gpu.deploy.mig-manager=true nvidia.com/mig.config=all-disabled >/dev/null
done
# each node's runtime configuration as kubelet-sim made it: what must come back at the end
for n in $NODES; do
    for f in etc/containerd/config.toml etc/docker/daemon.json; do
        [ -f "$T/roots/$n/$f" ] && cp "$T/roots/$n/$f" "$T/rt-before.$n.${f//\//_}"
    done
done
python3 "$NC" objects "$F" "$uid" --standins | k create -f - >/dev/null || fail "NVIDIA's objects"
gpus() { for n in $NODES; do printf '%s=%s ' "$n" "$(alloc "$n" nvidia.com/gpu)"; done; }
all_gpus() { [ "$(gpus)" = "tko-h100-1=8 tko-h100-2=8 tko-l4-1=4 " ]; }
wait_for 120 "NVIDIA's stand-in device plugins advertising every GPU" all_gpus
nv_running() { [ "$(k -n gpu-operator get pods -l app.kubernetes.io/managed-by=gpu-operator --no-headers | grep -c ' Running ')" = 20 ]; }
wait_for 60 "NVIDIA's 20 operand pods Running" nv_running
drivers_ready() { [ "$(k -n gpu-operator get ds nvidia-driver-daemonset -o jsonpath='{.status.numberReady}')" = 3 ]; }
wait_for 60 "NVIDIA's driver pods Ready" drivers_ready
echo "ok: NVIDIA's operator's cluster: $(k -n gpu-operator get ds --no-headers | wc -l) DaemonSets, 20 operand pods, GPUs $(gpus)"

# GPU workloads, one per node, each holding a GPU for an hour
k create namespace workloads >/dev/null
for n in $NODES; do
    k apply -f - >/dev/null <<Y
apiVersion: v1
kind: Pod
metadata: {name: train-$n, namespace: workloads}
spec:
  nodeSelector: {kubernetes.io/hostname: $n}
  restartPolicy: Always
  containers:
  - name: main
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env: [{name: SIM_WORKLOAD_SECONDS, value: "3600"}]
    resources: {limits: {nvidia.com/gpu: 1}}
Y
done
wl_running() { [ "$(k -n workloads get pods --no-headers | grep -c ' Running ')" = 3 ]; }
wait_for 60 "the 3 workloads Running" wl_running
# A pod just Running may have no log to serve yet (NotFound on a loaded machine): polled.
wl_on_gpu() { k -n workloads logs "train-$1" 2>/dev/null | grep -q 'Test PASSED\|CUDA kernel launch'; }
for n in $NODES; do
    poll 30 wl_on_gpu "$n" ||
        fail "workload on $n has no GPU: $(k -n workloads logs "train-$n" 2>&1 | tail -3)"
done
echo "ok: a CUDA workload holds a GPU on each node"

sample() { # NAME: the sampler, until $T/stop.NAME (NAME there or back: the direction)
    bg "sample-$1" python3 "$S/tests/migrate/sample.py" --kubectl "$KUBECTL" --out "$T/sample.$1.json" \
        --stop "$T/stop.$1" --roots "$T/roots" --alloc --workloads workloads --interval 0.3 --direction "$1"
    SAMPLER=$LAST
}
stop_sample() {
    touch "$T/stop.$1"
    wait_exit "$SAMPLER" 15
    [ "$RC" = 0 ] || fail "the sampler ($1) exited $RC"
}
sample there

# ---- docs/migrate-from-nvidia.md ----------------------------------------------------------------
t0=$SECONDS
"$B/gpuop" migrate --from nvidia >"$T/plan.out" 2>&1 || fail "migrate (dry run): $(cat "$T/plan.out")"
grep -q 'GPU access: the ClusterPolicy sets devicePlugin.env DEVICE_LIST_STRATEGY=envvar' "$T/plan.out" ||
    fail "the plan does not warn about envvar: $(cat "$T/plan.out")"
"$B/gpuop" migrate --from nvidia --apply >"$T/apply.out" 2>&1 || fail "migrate --apply: $(cat "$T/apply.out")"
k apply -f - >/dev/null <<Y
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: takeover}
spec:
  nodeSelector: {nvidia.com/gpu.present: "true"}
  approval: manual
Y
python3 "$NC" chart-values "$F" >"$T/values-from-nvidia.yaml"
python3 - "$T/values-from-nvidia.yaml" >"$T/values-gpu-access.yaml" <<'PY'
import sys, yaml
v = yaml.safe_load(open(sys.argv[1]))
env = [e for e in v["devicePlugin"].get("env", []) if e["name"] != "DEVICE_LIST_STRATEGY"]
env.append({"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"})
print(yaml.safe_dump({"devicePlugin": {"env": env}}))
PY
helm_q install gpuop "$S/deploy/helm/gpuop" -n gpu-operator -f "$T/values-from-nvidia.yaml" -f "$T/values-gpu-access.yaml" \
    --set operator.localImage=true --wait --timeout 90s >"$T/gpuop-install.log" || fail "helm install gpuop: $(cat "$T/gpuop-install.log")"
echo "ok: migrate --apply, a manual DriverUpgradePool, helm install gpuop ($((SECONDS - t0)) s)"
taken_over() { [ "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.conditions[?(@.type=="Takeover")].status}')" = True ]; }
wait_for 300 "the Takeover condition True" taken_over
policy_ready() { [ "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.state}')" = ready ]; }
wait_for 120 "the ClusterPolicy ready under gpuop" policy_ready
echo "ok: taken over in $((SECONDS - t0)) s; ClusterPolicy $(k get clusterpolicy --no-headers | tr -s ' '); $(k get clusterpolicy cluster-policy -o jsonpath='{.status.conditions[?(@.type=="Takeover")].message}')"
waits() { [ "$(label tko-l4-1 nvidia.com/gpu-driver-upgrade-state)" = upgrade-required ]; }
wait_for 30 "the driver change waiting for the pool's approval" waits

# helm uninstall of NVIDIA's release, still sampled
objs() { k get -n gpu-operator daemonsets,serviceaccounts,services,configmaps -o name | sort; k get clusterpolicies,crds -o name | sort; }
objs >"$T/objs-before"
helm_q uninstall gpu-operator -n gpu-operator --wait --timeout 60s >"$T/nv-uninstall.log" 2>&1 ||
    fail "helm uninstall gpu-operator: $(cat "$T/nv-uninstall.log")"
objs >"$T/objs-after"
cmp -s "$T/objs-before" "$T/objs-after" || fail "helm uninstall of NVIDIA's release deleted: $(diff "$T/objs-before" "$T/objs-after")"
sleep 3
stop_sample there
python3 - "$T/sample.there.json" <<'PY' || fail "the way there, sampled: $(cat "$T/sample.there.json")"
import json, sys
s = json.load(open(sys.argv[1]))
problems = []
# coverage, not speed: each sample is three API reads, slower on a loaded machine; what counts is
# that the sampler saw the takeover under way (a node in flight) and enough of it to mean something
if s["samples"] < 20: problems.append(f"only {s['samples']} samples")
if s["max_in_flight"] < 1: problems.append("no node seen in flight: the sampler missed the takeover")
if s["workloads_watched"] != 3: problems.append(f"{s['workloads_watched']} workloads watched")
if s["workload_problems"]: problems.append(f"workloads: {s['workload_problems']}")
if s["driver_unloaded"]: problems.append(f"driver unloaded on {s['driver_unloaded']}")
if s["driver_restarts"]: problems.append(f"driver pods: {s['driver_restarts']}")
if s["alloc_drops"]: problems.append(f"allocatable dropped: {s['alloc_drops'][:5]}")
if s["max_in_flight"] > 1: problems.append(f"{s['max_in_flight']} nodes in flight at once: {s['in_flight_seen']}")
if sorted(s["nodes_done"]) != ["tko-h100-1", "tko-h100-2", "tko-l4-1"]: problems.append(f"nodes done: {s['nodes_done']}")
if problems:
    print("; ".join(problems))
    sys.exit(1)
print(f"{s['samples']} samples: no workload evicted or restarted (3 watched), no driver unloaded or restarted, allocatable never dropped ({s['alloc_first']}), at most {s['max_in_flight']} node in flight")
PY
echo "ok: the way there: $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["samples"], "samples, max in flight", s["max_in_flight"])' "$T/sample.there.json"); helm uninstall gpu-operator deleted nothing"

# ---- docs/rollback-to-nvidia.md ----------------------------------------------------------------
sample back
t1=$SECONDS
k -n gpu-operator scale deployment gpu-operator --replicas=0 >/dev/null
no_op() { [ -z "$(k -n gpu-operator get pods -l app.kubernetes.io/component=operator -o name)" ]; }
wait_for 60 "gpuop's operator stopped" no_op
"$B/gpuop" migrate --to nvidia --apply --timeout 120s >"$T/back.out" 2>&1 || fail "migrate --to nvidia --apply: $(cat "$T/back.out")"
[ "$(k get clusterpolicy cluster-policy -o jsonpath='{.spec.daemonsets.updateStrategy}')" = OnDelete ] ||
    fail "migrate --to nvidia --apply did not set the ClusterPolicy's DaemonSets to OnDelete"
helm_q install gpu-operator "$S/tests/migrate/nvidia-chart" -n gpu-operator -f "$T/nvidia-values.yaml" \
    --set operator.replicas=0 --set daemonsets.updateStrategy=OnDelete >"$T/nv-reinstall.log" ||
    fail "NVIDIA's chart again: $(cat "$T/nv-reinstall.log")"
# NVIDIA's operator, played: its objects as it writes them (each whole, same names, its
# selectors, the policy's update strategy as it applies it: OnDelete here), its ConfigMaps and
# RBAC first; created where the takeover removed them or migrate deleted gpuop's.
nv_operator() {
    rm -rf "$T/nv-ds" && mkdir -p "$T/nv-ds"
    python3 "$NC" objects "$F" "$uid" --standins \
        --update-strategy "$(k get clusterpolicy cluster-policy -o jsonpath='{.spec.daemonsets.updateStrategy}')" \
        --max-unavailable "$(k get clusterpolicy cluster-policy -o jsonpath='{.spec.daemonsets.rollingUpdate.maxUnavailable}')" |
        python3 -c '
import sys, yaml
order = {"DaemonSet": 1}
for i, d in enumerate(sorted((d for d in yaml.safe_load_all(sys.stdin) if d), key=lambda d: order.get(d["kind"], 0))):
    yaml.safe_dump(d, open("%s/%03d-%s-%s.yaml" % (sys.argv[1], i, d["kind"], d["metadata"]["name"]), "w"))' "$T/nv-ds"
    for f in "$T"/nv-ds/*.yaml; do
        k replace -f "$f" >>"$T/nv-apply.log" 2>&1 || k create -f "$f" >>"$T/nv-apply.log" 2>&1 ||
            fail "NVIDIA's object $f: $(cat "$T/nv-apply.log")"
    done
}
nv_operator
# At OnDelete NVIDIA's DaemonSets replace nothing on their own: gpuop's pods are all there still.
sleep 3
[ -n "$(k -n gpu-operator get pods -l 'app.kubernetes.io/managed-by=gpuop,app=nvidia-container-toolkit-daemonset' -o name)" ] ||
    fail "NVIDIA's DaemonSets at OnDelete replaced gpuop's toolkit pods on their own"
# gpuop replaces them node by node: stopped part way through, then run again to the end
timeout -s TERM "$(scaled 8)" "$B/gpuop" migrate --to nvidia --roll >"$T/roll1.out" 2>&1
echo "ok: the roll stopped part way: $(grep -c '^  delete Pod' "$T/roll1.out") pod(s) deleted, $(grep -c 'patch Node' "$T/roll1.out") node mark(s)"
"$B/gpuop" migrate --to nvidia --roll --timeout 240s >"$T/roll.out" 2>&1 ||
    fail "migrate --to nvidia --roll: $(cat "$T/roll1.out" "$T/roll.out")"
grep -q 'done: every node runs NVIDIA' "$T/roll.out" || fail "the roll did not say done: $(cat "$T/roll.out")"
grep -q 'next: .*helm upgrade gpu-operator nvidia/gpu-operator -n gpu-operator --reuse-values --set daemonsets.updateStrategy=RollingUpdate' "$T/roll.out" ||
    fail "the roll does not say how to restore the update strategy: $(cat "$T/roll.out")"
[ -z "$(k get nodes -o jsonpath='{.items[*].metadata.annotations.migrate\.gpuop\.dev/roll}')" ] ||
    fail "roll marks left on the nodes"
nv_back() { [ "$(k -n gpu-operator get pods -l app.kubernetes.io/managed-by=gpu-operator --no-headers | grep -c ' Running ')" -ge 20 ] &&
    [ -z "$(k -n gpu-operator get pods -l 'app.kubernetes.io/managed-by=gpuop,app!=gpuop-device-plugin-takeover' -o name)" ]; }
wait_for 240 "NVIDIA's operand pods back on every node, none of gpuop's left" nv_back
wait_for 60 "every GPU advertised" all_gpus
# the step the plan's notes give: gpuop's surge device plugins go once NVIDIA's plugin runs
grep -q "delete pods -l app=gpuop-device-plugin-takeover (gpuop's 3 surge" "$T/back.out" ||
    fail "the way back made no surge plugins: $(cat "$T/back.out")"
# the roll removed each node's surge plugin once NVIDIA's plugin there was Ready
[ -z "$(k -n gpu-operator get pods -l app=gpuop-device-plugin-takeover -o name)" ] ||
    fail "surge plugins left: $(k -n gpu-operator get pods -l app=gpuop-device-plugin-takeover -o name)"
# the update strategy given back, as the roll said: NVIDIA's DaemonSets roll on their own again,
# with nothing to replace
helm_q upgrade gpu-operator "$S/tests/migrate/nvidia-chart" -n gpu-operator --reuse-values \
    --set daemonsets.updateStrategy=RollingUpdate >"$T/nv-upgrade.log" || fail "helm upgrade: $(cat "$T/nv-upgrade.log")"
nv_operator
[ "$(k -n gpu-operator get ds nvidia-container-toolkit-daemonset -o jsonpath='{.spec.updateStrategy.type}')" = RollingUpdate ] ||
    fail "the update strategy not given back"
[ "$(k -n gpu-operator get ds nvidia-driver-daemonset -o jsonpath='{.spec.updateStrategy.type}')" = OnDelete ] ||
    fail "NVIDIA's driver DaemonSet is not OnDelete"
sleep 3
wait_for 30 "every GPU advertised" all_gpus
for n in $NODES; do
    for f in etc/containerd/config.toml etc/docker/daemon.json; do
        b="$T/rt-before.$n.${f//\//_}"
        [ -f "$b" ] || continue
        cmp -s "$b" "$T/roots/$n/$f" || fail "$n: /$f not handed back: $(diff "$b" "$T/roots/$n/$f" | head)"
    done
done
objs >"$T/objs-before"
helm_q uninstall gpuop -n gpu-operator --wait --timeout 60s >"$T/gpuop-uninstall.log" 2>&1 ||
    fail "helm uninstall gpuop: $(cat "$T/gpuop-uninstall.log")"
objs >"$T/objs-after"
cmp -s "$T/objs-before" "$T/objs-after" || fail "helm uninstall of gpuop's release deleted: $(diff "$T/objs-before" "$T/objs-after")"
sleep 3
stop_sample back
python3 - "$T/sample.back.json" <<'PY' || fail "the way back, sampled: $(cat "$T/sample.back.json")"
import json, sys
s = json.load(open(sys.argv[1]))
problems = []
if s["workloads_watched"] != 3: problems.append(f"{s['workloads_watched']} workloads watched")
if s["workload_problems"]: problems.append(f"workloads: {s['workload_problems']}")
if s["driver_unloaded"]: problems.append(f"driver unloaded on {s['driver_unloaded']}")
if s["driver_restarts"]: problems.append(f"driver pods: {s['driver_restarts']}")
if s["alloc_drops"]: problems.append(f"allocatable dropped: {s['alloc_drops'][:5]}")
if s["samples"] < 20: problems.append(f"only {s['samples']} samples")
if s["max_in_flight"] < 1: problems.append("no node seen in flight: the sampler missed the roll")
if s["max_in_flight"] > 1: problems.append(f"{s['max_in_flight']} nodes in flight at once: {s['in_flight_seen']}")
if sorted(s["nodes_done"]) != ["tko-h100-1", "tko-h100-2", "tko-l4-1"]: problems.append(f"nodes done: {s['nodes_done']}")
if problems:
    print("; ".join(problems))
    sys.exit(1)
PY
echo "ok: the way back in $((SECONDS - t1)) s: $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["samples"], "samples, at most", s["max_in_flight"], "node in flight, allocatable at the start", s["alloc_first"])' "$T/sample.back.json"); no workload evicted or restarted, no driver unloaded or restarted, allocatable never dropped (the device plugin surged); runtime configurations handed back byte for byte; helm uninstall gpuop deleted nothing"
echo "PASS from NVIDIA's GPU Operator to gpuop and back on simulated nodes ($SECONDS s)"
