#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The whole stack from the Helm chart alone, on simulated nodes that run it: kubesim, kubelet-sim
# with two GPU nodes (tests/kubelet/chart-cluster.yaml: a DGX H100 whose driver the operator
# deploys, an L4 server with a host driver) and no Node Feature Discovery in the cluster
# (--no-nfd), then only `helm install` of deploy/helm/gpuop with its default values. The
# operator runs as the pod of the chart's Deployment on a simulated node (the gpuop image is the
# built gpuop), with its ServiceAccount's token and the in-cluster config, takes the lead and
# reconciles the ClusterPolicy the chart rendered; the chart's node discovery (nfd.enabled, no
# NFD found) labels the GPU nodes, which is how the operator finds them; the GPU nodes end with
# allocatable GPUs and their validations passed. `helm uninstall` removes what it installed and
# every operand pod stops. As root (namespaces per node); skipped otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
[ -x "$HELM" ] || skip "pinned helm not found at $HELM"
start_kubesim --api-ip 198.18.255.23 --tls
start_kubelet_sim "$S/tests/kubelet/chart-cluster.yaml" 2 --bridge klchart0 --subnet 198.18.223.0/24 --no-nfd
H100=chart-h100-1 L4=chart-l4-host-1
annotation() { k get node "$1" -o jsonpath="{.metadata.annotations.${2//./\\.}}"; }
for n in $H100 $L4; do
    [ -z "$(label $n feature.node.kubernetes.io/pci-10de.present)$(annotation $n nfd.node.kubernetes.io/worker.version)" ] ||
        fail "$n carries NFD's labels before the chart is installed"
done
echo "ok: 2 GPU nodes registered by kubelet-sim, no NFD in the cluster"

# Only the chart: its default values, the simulated driver's startup probe shortened (it builds
# in 2 s; NVIDIA's default waits 60 s before the first probe).
t0=$SECONDS
helm_q install gpuop "$S/deploy/helm/gpuop" --namespace gpu-operator --create-namespace \
    --set driver.startupProbe.initialDelaySeconds=2 --set driver.startupProbe.periodSeconds=2 \
    --wait --timeout 60s >"$T/install.log" || fail "helm install: $(cat "$T/install.log")"
grep -q 'STATUS: deployed' "$T/install.log" || fail "helm install did not deploy: $(cat "$T/install.log")"
echo "ok: helm install deployed in $((SECONDS - t0)) s (the operator's Deployment and the node discovery ready)"

# The operator: the Deployment's pod, a process on a simulated node, in-cluster.
op_pod=$(k -n gpu-operator get pods -l app.kubernetes.io/component=operator -o jsonpath='{.items[0].metadata.name}')
op_node=$(k -n gpu-operator get pod "$op_pod" -o jsonpath='{.spec.nodeName}')
[ -n "$op_pod" ] && [ -n "$op_node" ] || fail "no operator pod bound to a node"
sa=$(k -n gpu-operator get pod "$op_pod" -o jsonpath='{.spec.serviceAccountName}')
args=$(k -n gpu-operator get pod "$op_pod" -o jsonpath='{.spec.containers[0].args}')
[[ $args != *kubeconfig* ]] || fail "the operator pod is given a kubeconfig: $args"
leads() { [ "$(k -n gpu-operator get lease gpuop-operator -o jsonpath='{.spec.holderIdentity}')" = "$op_pod" ]; }
wait_for 30 "the operator pod $op_pod holding the lease" leads
led() { k -n gpu-operator logs "$op_pod" >"$T/op-pod.out" 2>&1 && grep -q "became leader" "$T/op-pod.out"; }
wait_for 10 "'became leader' in the operator pod's log (through its node's kubelet)" led
# its process: the built gpuop, reaching the API server the in-cluster way (no KUBECONFIG)
op_proc=
for p in /proc/[0-9]*; do
    env=$(tr '\0' '\n' <"$p/environ" 2>/dev/null) || continue
    grep -qx "HOSTNAME=$op_pod" <<<"$env" && grep -qx "GPUOP_SIM_ROOT=$T/roots/$op_node" <<<"$env" &&
        [ "$p/exe" -ef "$B/gpuop" ] && { op_proc=$p; break; } # the same file: under a chroot the link's text differs
done
[ -n "$op_proc" ] || fail "no gpuop process for pod $op_pod"
grep -qx "KUBERNETES_SERVICE_HOST=$KS_API_IP" <<<"$env" || fail "the operator pod has no in-cluster service address"
if grep -q "^KUBECONFIG=" <<<"$env"; then fail "the operator pod has a KUBECONFIG"; fi
echo "ok: the operator runs as pod $op_pod on $op_node (${op_proc#/proc/} $(tr '\0' ' ' <"$op_proc/cmdline" | cut -c1-60)...; ServiceAccount $sa, in-cluster) and leads: $(grep -m1 'became leader' "$T/op-pod.out")"

# Node discovery, the chart's since no NFD runs: the PCI and os_release labels on both nodes.
disc_nodes() { k -n gpu-operator get pods -l app.kubernetes.io/component=node-discovery \
    -o jsonpath='{range .items[?(@.status.phase=="Running")]}{.spec.nodeName}{"\n"}{end}' | sort | tr '\n' ' '; }
disc_on_both() { [ "$(disc_nodes)" = "$L4 $H100 " ] || [ "$(disc_nodes)" = "$H100 $L4 " ]; }
wait_for 30 "node discovery running on both nodes" disc_on_both
for n in $H100 $L4; do
    wait_for 30 "$n labelled pci-10de.present by node discovery" is_label $n feature.node.kubernetes.io/pci-10de.present true
    is_label $n feature.node.kubernetes.io/pci-0302_10de.present true || fail "$n: no class-qualified PCI label"
    is_label $n feature.node.kubernetes.io/system-os_release.ID ubuntu || fail "$n: no os_release label"
    [ -z "$(annotation $n nfd.node.kubernetes.io/worker.version)" ] || fail "$n: an NFD worker annotation appeared"
done
echo "ok: node discovery labelled both nodes: $(k get node $H100 -o json | python3 -c '
import json, sys
l = json.load(sys.stdin)["metadata"]["labels"]
print(" ".join(sorted(k.split("/")[1] + "=" + v for k, v in l.items() if k.startswith("feature.node.kubernetes.io/"))))')"

# The operator found the GPU nodes by those labels: the driver where none is installed, the
# host's left alone; the device plugins advertise every GPU; the validators pass.
wait_for 60 "$L4 labelled deploy.driver=pre-installed" is_label $L4 nvidia.com/gpu.deploy.driver pre-installed
drivers_placed() { [ "$(pods_of nvidia-driver-daemonset)" = "$H100 " ]; }
wait_for 30 "a driver pod on $H100 only" drivers_placed
wait_for 90 "$H100 advertises 8 nvidia.com/gpu" want_alloc $H100 nvidia.com/gpu 8
wait_for 30 "$L4 advertises 4 nvidia.com/gpu" want_alloc $L4 nvidia.com/gpu 4
echo "ok: allocatable nvidia.com/gpu: $H100 $(alloc $H100 nvidia.com/gpu), $L4 $(alloc $L4 nvidia.com/gpu) (driver pod on $(pods_of nvidia-driver-daemonset)only)"
validators_ready() { [ "$(ready_validators)" = 2 ]; }
wait_for 60 "validator pods Ready on both GPU nodes" validators_ready
policy_ready() { k get clusterpolicy cluster-policy --no-headers | grep -Eq '^cluster-policy +ready +2/2 '; }
wait_for 30 "ClusterPolicy ready, 2/2 GPU nodes" policy_ready
for n in $H100 $L4; do
    v=$(annotation $n validation.gpuop.dev/plugin)
    [[ $v == *'"state":"ok"'* ]] || fail "$n: plugin validation $v"
done
echo "ok: validations passed on both nodes; kubectl get clusterpolicy: $(k get clusterpolicy --no-headers | tr -s ' ')"
echo "ok: the whole stack from the chart: ClusterPolicy ready $((SECONDS - t0)) s after helm install started"

# helm uninstall: what the chart installed goes, and with the ClusterPolicy every operand.
sim_procs() { # processes kubelet-sim runs for this test's pods
    local n=0 p
    for p in /proc/[0-9]*; do
        { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qx "GPUOP_SIM_ROOT=$T/roots/.*" && n=$((n + 1))
    done
    echo $n
}
before=$(sim_procs)
[ "$before" -gt 0 ] || fail "no pod processes found to watch"
helm_q uninstall gpuop --namespace gpu-operator --wait --timeout 60s >"$T/uninstall.log" ||
    fail "helm uninstall: $(cat "$T/uninstall.log")"
for o in "clusterpolicy cluster-policy" "-n gpu-operator deployment gpu-operator" \
    "-n gpu-operator daemonset gpuop-node-discovery" "-n gpu-operator serviceaccount gpu-operator" \
    "clusterrole gpuop-operator" "clusterrolebinding gpuop-operator"; do
    if k get $o >/dev/null 2>&1; then fail "still there after helm uninstall: $o"; fi
done
no_pods() { [ -z "$(k -n gpu-operator get pods -o name)" ]; }
wait_for 60 "every pod in gpu-operator gone" no_pods
no_procs() { [ "$(sim_procs)" = 0 ]; }
wait_for 30 "every pod's process stopped" no_procs
echo "ok: helm uninstall removed the release's objects; $before pod processes stopped, none left"
# kubelet-sim stops cleanly (exit 0 after SIGTERM: nodes, namespaces and its bridge gone)
stop_kubelet_sim
if ip link show klchart0 >/dev/null 2>&1; then fail "the bridge klchart0 is left"; fi
echo "PASS the whole stack from the chart alone on simulated nodes ($((SECONDS - t0)) s)"
