#!/usr/bin/env bash
# The operator against kubesim, driven and inspected with kubectl:
#  - NVIDIA's CRD-compatible ClusterPolicy sample creates, within seconds, the DaemonSets of every
#    enabled component, with the deploy-label selectors, and kubesim places their pods on exactly
#    the GPU nodes (no driver pod on the node whose driver is pre-installed, none on the CPU node);
#  - turning a component off removes its objects; driver.enabled=false removes the driver;
#  - an invalid value changes nothing and is reported (status and Event);
#  - a restarted operator makes no writes; a second replica stays passive;
#  - a leader that loses its lease in the middle of a reconcile stops writing.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim"
SHARED=${GPUOP_SHARED:-$S/../shared}
SAMPLE=$SHARED/reference/upstream/gpu-operator_config_samples_v1_clusterpolicy.yaml
# Without ../shared (a user's clone), gpuop's own test policy (same name, same fields of note).
[ -f "$SAMPLE" ] || SAMPLE=$S/tests/operator/fixtures/clusterpolicy-full.yaml

# The operator runs under its shipped ServiceAccount and RBAC, enforced by kubesim.
start_kubesim --load "$S/sim/clusters/demo.yaml" --pod-ready-delay 200ms \
    --load "$S/deploy/rbac/operator.yaml"
OPKC=$T/operator.kubeconfig
sa_kubeconfig "$OPKC"
SERVER=$(grep -m1 'server:' "$T/kubeconfig" | awk '{print $2}')

writes() { # write calls kubesim has served, leases and events excluded
    curl -s "$SERVER/metrics" | awk '/^kubesim_requests_total/ && /verb="(create|update|patch|delete|deletecollection)"/ && !/resource="(leases|events)"/ {s+=$NF} END {print s+0}'
}

$K apply -f "$S/deploy/crds/" >/dev/null
# Short leader-election periods keep hand-overs quick; the renew deadline still leaves a loaded
# (sanitizer) run several attempts to renew.
LEADER_FLAGS="--leader-lease-duration 3s --leader-renew-deadline 2s --leader-retry-period 250ms"
start_operator() { # name port [flags...]
    local name=$1 port=$2
    shift 2
    # shellcheck disable=SC2086
    "$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator \
        --operand-image gpuop:test --metrics-listen "127.0.0.1:$port" --identity "$name" \
        $LEADER_FLAGS "$@" >"$T/$name.log" 2>&1 &
    pids+=($!)
    eval "PID_$name=$!"
}
P1=$(free_port)
start_operator op1 "$P1"
wait_for 20 "operator op1 leading" sh -c "curl -s 127.0.0.1:$P1/metrics | grep -q '^gpuop_operator_leader 1'"

t0=$SECONDS
$K apply -f "$SAMPLE" >/dev/null
DS_ALL="nvidia-driver-daemonset nvidia-container-toolkit-daemonset nvidia-operator-validator nvidia-device-plugin-daemonset nvidia-dcgm-exporter gpu-feature-discovery nvidia-mig-manager"
for ds in $DS_ALL; do
    wait_for 15 "DaemonSet $ds" $K -n gpu-operator get ds "$ds"
done
echo "DaemonSets created in $((SECONDS - t0))s"

# Selectors are the deploy labels.
for ds in $DS_ALL; do
    sel=$($K -n gpu-operator get ds "$ds" -o jsonpath='{.spec.template.spec.nodeSelector}')
    case "$ds" in
    nvidia-driver-daemonset) want=driver ;;
    nvidia-container-toolkit-daemonset) want=container-toolkit ;;
    nvidia-operator-validator) want=operator-validator ;;
    nvidia-device-plugin-daemonset) want=device-plugin ;;
    nvidia-dcgm-exporter) want=dcgm-exporter ;;
    gpu-feature-discovery) want=gpu-feature-discovery ;;
    nvidia-mig-manager) want=mig-manager ;;
    esac
    [ "$sel" = "{\"nvidia.com/gpu.deploy.$want\":\"true\"}" ] || fail "$ds nodeSelector is $sel"
done
[ "$($K -n gpu-operator get ds nvidia-driver-daemonset -o jsonpath='{.spec.updateStrategy.type}')" = OnDelete ] ||
    fail "driver DaemonSet does not update OnDelete"

pods_on() { # ds -> sorted node names of its pods
    $K -n gpu-operator get pods -l "app=$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | tr '\n' ' ' | sed 's/ $//'
}
GPU4="a100-mig-1 dgx-h100-1 dgx-h100-2 l4-hostdriver-1"
check_placement() {
    [ "$(pods_on nvidia-driver-daemonset)" = "a100-mig-1 dgx-h100-1 dgx-h100-2" ] || return 1
    [ "$(pods_on nvidia-mig-manager)" = "a100-mig-1 dgx-h100-1 dgx-h100-2" ] || return 1
    for ds in nvidia-container-toolkit-daemonset nvidia-operator-validator nvidia-device-plugin-daemonset nvidia-dcgm-exporter gpu-feature-discovery; do
        [ "$(pods_on $ds)" = "$GPU4" ] || return 1
    done
}
wait_for 20 "pods on exactly the GPU nodes" check_placement
echo "pods placed on the GPU nodes in $((SECONDS - t0))s"
[ -z "$($K -n gpu-operator get pods --field-selector spec.nodeName=cpu-1 -o name)" ] || fail "pods on the CPU node"
[ "$($K get node l4-hostdriver-1 -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.deploy\.driver}')" = pre-installed ] ||
    fail "the pre-installed label was overwritten"
[ -z "$($K get node cpu-1 -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.present}')" ] || fail "CPU node labelled as GPU node"
$K get runtimeclass nvidia >/dev/null || fail "no RuntimeClass nvidia"
wait_for 20 "ClusterPolicy ready" sh -c "[ \"\$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.state}')\" = ready ]"
$K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type=="UnsupportedFields")].message}' | grep -q 'spec.operator.use_ocp_driver_toolkit' ||
    fail "fields gpuop does not act on are not reported"

# A converged cluster: nothing more is written.
sleep 1
w1=$(writes)
sleep 2
w2=$(writes)
[ "$w1" = "$w2" ] || fail "the operator keeps writing on a converged cluster ($w1 -> $w2)"

# An object stripped of gpuop's label (out of its informers) is written back, labelled.
$K -n gpu-operator label sa nvidia-device-plugin app.kubernetes.io/managed-by- >/dev/null
wait_for 10 "managed-by label restored" sh -c "[ \"\$($K -n gpu-operator get sa nvidia-device-plugin -o jsonpath='{.metadata.labels.app\\.kubernetes\\.io/managed-by}')\" = gpuop ]"

# A GPU node of another OS would get a driver built for the wrong OS: reported, not hidden.
$K label node dgx-h100-2 --overwrite feature.node.kubernetes.io/system-os_release.VERSION_ID=24.04 >/dev/null
wait_for 10 "mixed OS reported" sh -c "$K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"DriverOSMismatch\")].message}' | grep -q '\"ubuntu24.04\":1'"
wait_for 10 "DriverOSMismatch event" sh -c "$K get events -n gpu-operator -o jsonpath='{range .items[*]}{.reason}{\"\\n\"}{end}' | grep -qx DriverOSMismatch"
$K -n gpu-operator get ds nvidia-driver-daemonset -o jsonpath='{.spec.template.spec.containers[0].image}' | grep -q -- '-ubuntu22.04$' ||
    fail "the driver image does not follow the most common OS"
$K label node dgx-h100-2 --overwrite feature.node.kubernetes.io/system-os_release.VERSION_ID=22.04 >/dev/null
wait_for 10 "mixed OS cleared" sh -c "! $K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[*].type}' | grep -q DriverOSMismatch"

# A second replica stays passive.
P2=$(free_port)
start_operator op2 "$P2"
wait_for 20 "replica op2 synced" sh -c "curl -sf 127.0.0.1:$P2/readyz"
sleep 1 # four lease attempts
metrics_has "$P2" '^gpuop_operator_leader 0' || fail "op2 is not passive"
metrics_has "$P2" '^gpuop_operator_api_writes_total 0' || fail "passive op2 wrote"

rv_before=$($K -n gpu-operator get ds -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}')
reasons() { $K get events -n gpu-operator -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}'; }

# A second ClusterPolicy is ignored, as NVIDIA does: reported, and the active one stays in charge.
sed 's/name: gpu-cluster-policy/name: second-policy/' "$SAMPLE" | $K apply -f - >/dev/null
wait_for 10 "second ClusterPolicy ignored" sh -c "[ \"\$($K get clusterpolicy second-policy -o jsonpath='{.status.state}')\" = ignored ]"
wait_for 10 "Ignored event" sh -c "$K get events -n gpu-operator -o jsonpath='{range .items[*]}{.reason}{\"\\n\"}{end}' | grep -qx Ignored"
[ "$($K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.state}')" = ready ] || fail "the active ClusterPolicy changed state"
$K delete clusterpolicy second-policy >/dev/null

# A value the CRD's schema refuses is rejected by the API server (422, the real cause) and never
# reaches the operator.
out=$($K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"mig":{"strategy":"bogus"}}}' 2>&1) && fail "a schema-invalid patch was accepted"
echo "$out" | grep -q 'spec.mig.strategy: Unsupported value: "bogus": supported values: "none", "single", "mixed"' || fail "schema rejection: $out"
# A value the schema accepts but the operator cannot deploy (maxUnavailable 0 with gpuop's
# maxSurge 0, which every DaemonSet write would fail on) changes nothing and is reported.
$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"daemonsets":{"rollingUpdate":{"maxUnavailable":"0"}},"dcgmExporter":{"enabled":false}}}' >/dev/null || fail "a schema-valid patch was rejected"
wait_for 10 "invalid policy reported" sh -c "$K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"Error\")].message}' | grep -q 'spec.daemonsets.rollingUpdate.maxUnavailable: Invalid value'"
wait_for 10 "InvalidClusterPolicy event" sh -c "$K get events -n gpu-operator -o jsonpath='{range .items[*]}{.reason}{\"\\n\"}{end}' | grep -q InvalidClusterPolicy"
sleep 1
rv_after=$($K -n gpu-operator get ds -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}')
[ "$rv_before" = "$rv_after" ] || fail "operands changed under an invalid policy"
$K -n gpu-operator get ds nvidia-dcgm-exporter >/dev/null || fail "an invalid policy deleted the exporter"

# Turning a component off removes its objects.
$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"daemonsets":{"rollingUpdate":null}}}' >/dev/null
wait_for 15 "exporter removed" sh -c "! $K -n gpu-operator get ds nvidia-dcgm-exporter"
wait_for 15 "exporter service removed" sh -c "! $K -n gpu-operator get svc nvidia-dcgm-exporter"
# Reported once: not again after the policy was invalid for a while.
n=$(reasons | grep -cx UnsupportedFields || true)
[ "$n" = 1 ] || fail "UnsupportedFields reported $n times, want once"
$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"driver":{"enabled":false}}}' >/dev/null
wait_for 15 "driver removed" sh -c "! $K -n gpu-operator get ds nvidia-driver-daemonset"
wait_for 15 "driver pods gone" sh -c "[ -z \"\$($K -n gpu-operator get pods -l app=nvidia-driver-daemonset -o name)\" ]"
$K -n gpu-operator get ds nvidia-device-plugin-daemonset >/dev/null || fail "device plugin removed too"

# A restarted operator makes no writes.
wait_for 10 "driver condition reported" sh -c "$K get clusterpolicy gpu-cluster-policy -o jsonpath='{.status.conditions[?(@.type==\"DriverReady\")].reason}' | grep -qx Disabled"
kill "$PID_op1"
wait "$PID_op1" 2>/dev/null || true
wait_for 30 "op2 takes over" sh -c "curl -s 127.0.0.1:$P2/metrics | grep -q '^gpuop_operator_leader 1'"
wait_for 10 "op2 reconciled" sh -c "curl -s 127.0.0.1:$P2/metrics | grep -qE '^gpu_operator_reconciliation_total [1-9]'"
sleep 1
w_before=$(writes)
P3=$(free_port)
kill "$PID_op2"
wait "$PID_op2" 2>/dev/null || true
start_operator op3 "$P3"
wait_for 30 "op3 leading" sh -c "curl -s 127.0.0.1:$P3/metrics | grep -q '^gpuop_operator_leader 1'"
wait_for 10 "op3 reconciled" sh -c "curl -s 127.0.0.1:$P3/metrics | grep -qE '^gpu_operator_reconciliation_total [1-9]'"
sleep 1
w_after=$(writes)
[ "$w_before" = "$w_after" ] || fail "a restarted operator wrote $((w_after - w_before)) times"
metrics_has "$P3" '^gpuop_operator_api_writes_total 0' || fail "op3 counted writes"
kill "$PID_op3"
wait "$PID_op3" 2>/dev/null || true

# A leader that loses its lease in the middle of a reconcile stops writing at once, before
# another replica can start: 100 new GPU nodes labelled at 10 writes/s, the lease taken over
# after the first few labels.
stop_kubesim
start_kubesim --nodes 100 --node-template "$S/bench/operator/node-template.yaml" \
    --load "$S/deploy/rbac/operator.yaml"
SERVER=$KS_URL
OPKC=$T/operator2.kubeconfig
sa_kubeconfig "$OPKC"
printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: gpu-operator\n' | $K apply -f - >/dev/null
$K apply -f "$S/deploy/crds/" >/dev/null
$K apply -f "$SAMPLE" >/dev/null
node_patches() { curl -s "$SERVER/metrics" | awk '/^kubesim_requests_total/ && /verb="patch"/ && /resource="nodes"/ {s+=$NF} END {print s+0}'; }
P4=$(free_port)
# The lease outlasts the check: kube's elector counts expiry by its own lease duration, not the
# holder's leaseDurationSeconds, so op4 would take an unrenewed lease back after it.
LEADER_FLAGS="--leader-lease-duration 15s --leader-renew-deadline 3s --leader-retry-period 1s"
start_operator op4 "$P4" --kube-qps 10 --kube-burst 1
wait_for 20 "op4 labelling nodes" sh -c "[ \$(curl -s $SERVER/metrics | awk '/^kubesim_requests_total/ && /verb=\"patch\"/ && /resource=\"nodes\"/ {s+=\$NF} END {print s+0}') -ge 3 ]"
# leading now (a slow first acquisition under the client's rate limit may have stepped down and
# come back once already: only a step-down after the takeover counts)
leading() { grep -E "operator (became leader|lost leadership)" "$T/op4.log" | tail -n 1 | grep -q "became leader"; }
wait_for 10 "op4 leading" leading
seen=$(wc -l <"$T/op4.log")
now=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)
$K -n gpu-operator patch lease gpuop-operator --type merge \
    -p "{\"spec\":{\"holderIdentity\":\"another-replica\",\"leaseDurationSeconds\":600,\"renewTime\":\"$now\"}}" >/dev/null
wait_for 10 "op4 steps down" sh -c "tail -n +$((seen + 1)) \"\$1\" | grep -q 'lost leadership'" sh "$T/op4.log"
sleep 0.5 # a write already on the wire
p1=$(node_patches)
w1=$(writes)
sleep 2
p2=$(node_patches)
w2=$(writes)
[ "$p1" -lt 100 ] || fail "op4 labelled every node before it lost the lease (the check proves nothing)"
[ "$p1" = "$p2" ] && [ "$w1" = "$w2" ] || fail "op4 kept writing after it lost the lease: node patches $p1 -> $p2, writes $w1 -> $w2"
echo "op4 stopped after $p1 of 100 node labels"
echo "ok: operator against kubesim"
