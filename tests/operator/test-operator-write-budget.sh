#!/usr/bin/env bash
# The operator's write budget on a fresh install (issue 31): 100 GPU nodes at real size
# (bench/operator/node-template.yaml), gpuop's sample ClusterPolicy with the driver's
# autoUpgrade on, the operator under its shipped RBAC. Until the ClusterPolicy reports ready the
# operator writes at most one patch per node (the deploy labels and the driver upgrade's
# upgrade-done, merged), each operand object once, a few status writes and a handful of Events;
# in the idle period after it, nothing. The writes are kubesim's own count of the requests it
# served, by verb and resource (/metrics); not timed.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim"

N=100
IDLE=${IDLE:-15}
printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: gpu-operator\n' >"$T/ns.yaml"
start_kubesim --nodes "$N" --node-template "$S/bench/operator/node-template.yaml" \
    --pod-ready-delay 200ms --load "$T/ns.yaml" --load "$S/deploy/rbac/operator.yaml"
$K apply -f "$S/deploy/crds/" >/dev/null || fail "apply the CRDs"
on_fail() {
    $K -n gpu-operator get ds
    $K get clusterpolicy -o jsonpath='{.items[0].status}'
    echo
    $K get node "$($K get nodes -o name | head -1 | cut -d/ -f2)" -o jsonpath='{.metadata.labels}'
}
OPKC=$T/operator.kubeconfig
sa_kubeconfig "$OPKC"
SERVER=$(awk '/server:/ {print $2; exit}' "$KUBECONFIG")

bg operator "$B/gpuop" operator --kubeconfig "$OPKC" --namespace gpu-operator \
    --operand-image gpuop:test --kube-qps 2000 --kube-burst 4000 --metrics-listen 127.0.0.1:0
OP_PID=$LAST
wait_log "$T/operator.log" "became leader" 30

# "verb resource count" for each series kubesim counted (codes summed)
requests() {
    curl -sf "$SERVER/metrics" | awk '/^kubesim_requests_total/ {
        match($0, /verb="[^"]*"/); v = substr($0, RSTART + 6, RLENGTH - 7)
        match($0, /resource="[^"]*"/); r = substr($0, RSTART + 10, RLENGTH - 11)
        n[v " " r] += $NF} END {for (k in n) print k, n[k]}' | sort
}
# the writes between two snapshots, "verb resource count", the Lease's renewals left out
writes_between() {
    awk 'NR == FNR {a[$1" "$2] = $3; next}
        $1 ~ /^(create|update|patch|delete|deletecollection)$/ && $2 != "leases" {
            d = $3 - a[$1" "$2]; if (d > 0) print $1, $2, d}' "$1" "$2"
}
count() { awk -v v="$2" -v r="$3" '$1 == v && $2 == r {s += $3} END {print s + 0}' "$1"; }
policy_ready() { [ "$($K get clusterpolicy -o jsonpath='{.items[0].status.state}' 2>/dev/null)" = ready ]; }

requests >"$T/r0" || fail "kubesim's /metrics"
sed 's/^  driver:$/  driver:\n    upgradePolicy: {autoUpgrade: true, maxParallelUpgrades: 1}/' \
    "$S/deploy/samples/clusterpolicy.yaml" | $K apply -f - >/dev/null
grep -q autoUpgrade <($K get clusterpolicy -o yaml) || fail "the policy has no upgradePolicy"
wait_for -p "$OP_PID" 60 "the ClusterPolicy ready" policy_ready
# Events trail the status they describe (status first): the ready transition's Event and the
# upgrade's one Event for the N fresh nodes belong to the install, counted in its budget below;
# the idle period starts once they are posted
install_events() {
    $K get events -A -o jsonpath='{range .items[*]}{.reason} {.count}{"\n"}{end}' >"$T/ev" &&
        grep -q '^Ready ' "$T/ev" && grep -qx "GPUDriverUpgrade $N" "$T/ev"
}
wait_for -p "$OP_PID" 20 "the install's Events (Ready, GPUDriverUpgrade for $N nodes)" install_events
requests >"$T/r1"
sleep "$IDLE"
requests >"$T/r2"
writes_between "$T/r0" "$T/r1" >"$T/ready.txt"
writes_between "$T/r1" "$T/r2" >"$T/idle.txt"
echo "writes until ready:"
sed 's/^/  /' "$T/ready.txt"

patches=$(count "$T/ready.txt" patch nodes)
[ "$patches" -le "$N" ] || fail_later "$patches node patches until ready (at most $N, one per node)"
# the one patch carried both controllers' wishes: every node labelled and upgrade-done
labelled=$($K get nodes -l 'nvidia.com/gpu.deploy.driver=true,nvidia.com/gpu-driver-upgrade-state=upgrade-done' -o name | wc -l)
[ "$labelled" -eq "$N" ] || fail_later "$labelled of $N nodes deploy-labelled and upgrade-done"

# the operand objects: each written once (created), none updated or deleted
objects=0
for kind in daemonsets serviceaccounts services roles rolebindings configmaps; do
    objects=$((objects + $($K -n gpu-operator get "$kind" -l app.kubernetes.io/managed-by=gpuop -o name | wc -l)))
done
for kind in clusterroles clusterrolebindings runtimeclasses; do
    objects=$((objects + $($K get "$kind" -l app.kubernetes.io/managed-by=gpuop -o name | wc -l)))
done
created=$(awk '$1 == "create" && $2 !~ /^(events|clusterpolicies|tokenreviews|subjectaccessreviews)$/ {s += $3} END {print s + 0}' "$T/ready.txt")
rewritten=$(awk '$1 ~ /^(update|delete)$/ && $2 != "clusterpolicies/status" {s += $3} END {print s + 0}' "$T/ready.txt")
[ "$objects" -gt 0 ] || fail_later "no operand object found"
[ "$created" -le "$objects" ] || fail_later "$created objects created for $objects operand objects"
[ "$rewritten" -eq 0 ] || fail_later "$rewritten updates or deletes of objects until ready"
# the status is written when it changes: the set of states not yet ready shrinks once per
# operand at most (how many passes that takes depends on the machine's speed), plus the first
# write and the upgrade condition's; never once per node
status=$(count "$T/ready.txt" update clusterpolicies/status)
n_ds=$($K -n gpu-operator get daemonsets -l app.kubernetes.io/managed-by=gpuop -o name | wc -l)
max_status=$((n_ds + 2))
[ "$status" -ge 1 ] && [ "$status" -le "$max_status" ] ||
    fail_later "$status ClusterPolicy status writes (1-$max_status: one per change, $n_ds operands)"
events=$(($(count "$T/ready.txt" create events) + $(count "$T/ready.txt" patch events)))
[ "$events" -le 5 ] || fail_later "$events Event writes until ready (a handful, not one per node)"
others=$(awk '!($1 == "patch" && $2 == "nodes") && !($2 == "events") &&
    !($2 == "clusterpolicies/status") && !($1 == "create") {print}' "$T/ready.txt")
[ -z "$others" ] || fail_later "writes outside the budget: $others"
# the Events that stand for the fresh nodes say how many they are
if [ "$events" -gt 0 ]; then
    $K get events -A -o jsonpath='{range .items[*]}{.count} {.reason}: {.message}{"\n"}{end}' \
        | sed 's/^/  event: /'
fi
[ ! -s "$T/idle.txt" ] || fail_later "writes in the $IDLE s after ready: $(paste -sd, "$T/idle.txt")"
echo "ok: $patches node patches, $created objects, $status status writes, $events Event writes; idle: $(wc -l <"$T/idle.txt") writes"
