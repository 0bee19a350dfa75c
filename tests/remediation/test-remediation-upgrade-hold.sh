#!/usr/bin/env bash
# A GPU fault during a driver rollout, on kubesim with the operator under its shipped RBAC: the
# pool train (dgx-h100-1, dgx-h100-2; maxUnavailable 1) has dgx-h100-1 quarantined (its action
# waits for a person) when the driver version changes: the rollout holds in that pool
# (dgx-h100-2 waits, saying "remediation: ..."), the pool's other node is never taken while the
# faulty one is out (sampled throughout: at most one of them cordoned), and once the fault is
# gone and the node back in service the rollout goes on through both.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim" "$B/gpuop"

operator_cluster 200ms
PORT=$(free_port)
"$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator --operand-image gpuop:test \
    --metrics-listen "127.0.0.1:$PORT" --leader-elect false >>"$T/operator.log" 2>&1 &
pids+=($!)
log_file "$T/operator.log"

N1=dgx-h100-1
N2=dgx-h100-2
ann() { $K get node "$1" -o jsonpath="{.metadata.annotations.${2//./\\.}}"; }
rem_state() { $K get node "$1" -o jsonpath='{.metadata.labels.remediation\.gpuop\.dev/state}'; }
upg_state() { $K get node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}'; }
is_upg() { [ "$(upg_state "$1")" = "$2" ]; }
now_ms() { date +%s%3N; }
health() { # NODE [SINCE_MS]: healthy, or an uncorrectable ECC error on GPU 0
    local v
    if [ $# -gt 1 ]; then
        local since f
        since=$(date -u -d "@$(($2 / 1000))" +%Y-%m-%dT%H:%M:%SZ)
        f=$(printf '{"action":"reset-gpu","class":"ecc-dbe","code":0,"gpu":0,"live":true,"message":"GPU 0: uncorrectable ECC errors","seq":1,"since":"%s","uuid":"GPU-0"}' "$since")
        v=$(printf '{"acked":0,"action":"reset-gpu","faults":[%s],"healthy":false,"last":%s,"seq":1}' "$f" "$f")
    else
        v=$(printf '{"acked":%s,"action":"none","faults":[],"healthy":true,"seq":1}' "$(ann "$1" remediation.gpuop.dev/ack-seq || true)")
        v=${v/\"acked\":,/\"acked\":0,}
    fi
    $K annotate node "$1" --overwrite "gpuop.dev/gpu-health=$v" >/dev/null
}

$K label node $N1 $N2 gpuop.test/pool=train >/dev/null
cat <<'EOF' | $K apply -f - >/dev/null
apiVersion: upgrade.gpuop.dev/v1alpha1
kind: DriverUpgradePool
metadata: {name: train}
spec:
  nodeSelector: {gpuop.test/pool: train}
  maxUnavailable: 1
EOF
sed -e 's/maxParallelUpgrades: 1/maxParallelUpgrades: 0\n      maxUnavailable: 1\n      podDeletion: {timeoutSeconds: 300, force: true}/' \
    -e 's|^      - key: nvidia.com/gpu$|      - {key: gpuop.dev/gpu-unhealthy, operator: Exists, effect: NoSchedule}\n      - key: nvidia.com/gpu|' \
    "$S/tests/operator/fixtures/clusterpolicy-full.yaml" | $K apply -f - >/dev/null
for n in $N1 $N2; do
    $K patch node "$n" --subresource=status --type merge \
        -p '{"status":{"capacity":{"nvidia.com/gpu":"8"},"allocatable":{"nvidia.com/gpu":"8"}}}' >/dev/null
done
wait_for 30 "the driver nodes upgrade-done before any change" sh -c "[ \"\$($K get node $N1 -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}')\" = upgrade-done ] && [ \"\$($K get node $N2 -o jsonpath='{.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}')\" = upgrade-done ]"

# The fault: N1 quarantined; its action waits for a person (the pool takes none by itself).
health $N1 "$(now_ms)"
wait_for 10 "$N1 quarantined" sh -c "[ \"\$($K get node $N1 -o jsonpath='{.metadata.labels.remediation\.gpuop\.dev/state}')\" = quarantined ]"

# Sample the train nodes cordoned together, through the rest of the test.
echo 0 >"$T/max_cordoned"
(
    max=0
    while :; do
        n=$($K get nodes $N1 $N2 -o jsonpath='{range .items[*]}{.spec.unschedulable}{"\n"}{end}' 2>/dev/null | grep -c true || true)
        [ "$n" -gt "$max" ] && max=$n && echo "$max" >"$T/max_cordoned"
        sleep 0.1
    done
) &
pids+=($!)

$K patch clusterpolicy gpu-cluster-policy --type merge -p '{"spec":{"driver":{"version":"595.100.01"}}}' >/dev/null
holds() { ann $N2 upgrade.gpuop.dev/waiting | grep -q "remediation: "; }
wait_for 20 "$N2's upgrade held by the remediation" holds
echo "held: $(ann $N2 upgrade.gpuop.dev/waiting)"
sleep 3 # some passes
is_upg $N2 upgrade-required || fail "$N2 moved while its pool holds: $(upg_state $N2)"
[ "$(cat "$T/max_cordoned")" -le 1 ] || fail "both train nodes cordoned at once"

# The fault goes (a slowdown that eased, say): N1 is validated and back in service; the rollout
# goes on through both nodes.
health $N1
wait_for 20 "the acknowledgement" sh -c "[ -n \"\$($K get node $N1 -o jsonpath='{.metadata.annotations.remediation\.gpuop\.dev/ack-seq}')\" ]"
health $N1
wait_for 30 "$N1 back in service" sh -c "[ -z \"\$($K get node $N1 -o jsonpath='{.metadata.labels.remediation\.gpuop\.dev/state}')\" ]"
wait_for 60 "$N2 upgraded" is_upg $N2 upgrade-done
wait_for 60 "$N1 upgraded" is_upg $N1 upgrade-done
max=$(cat "$T/max_cordoned")
[ "$max" -le 1 ] || fail "$max train nodes cordoned at once (maxUnavailable 1)"
echo "ok: the rollout held while $N1 was quarantined and finished after; at most $max train node cordoned at a time"
