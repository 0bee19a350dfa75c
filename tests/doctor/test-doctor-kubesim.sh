#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kubectl gpuop doctor NODE against kubesim: the pod it creates (pinned to the node, privileged,
# the node's / read-only at /host, `gpuop doctor --host-root=/host`, never restarted), its exit
# status passed on, the pod removed after; a pod that never finishes is removed at the timeout
# (exit 1, said so); a node that does not exist is said so and creates nothing. kubesim runs no
# containers: the test plays the kubelet and finishes the pod through its status.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
JQ=$(command -v jq) || skip "jq not installed"
need_built "$B/kubesim" "$B/kubectl-gpuop"

start_kubesim --load "$S/sim/clusters/demo.yaml"
$K get namespace gpu-operator >/dev/null 2>&1 || $K create namespace gpu-operator >/dev/null
pods() { $K -n gpu-operator get pods -l app.kubernetes.io/name=gpuop-doctor -o json; }

# 1. the pod, finished by the "kubelet" with exit 3 (a warning): kubectl gpuop doctor exits 3
PATH=$B:$PATH "$KUBECTL" gpuop doctor dgx-h100-1 --image=gpuop:test --timeout=20s \
    >"$T/out" 2>"$T/doctor.log" &
dpid=$!
wait_for 10 "the doctor's pod" sh -c "$K -n gpu-operator get pods -l app.kubernetes.io/name=gpuop-doctor -o name | grep -q ."
pods >"$T/pods.json"
q() { "$JQ" -e ".items[0] | $1" "$T/pods.json" >/dev/null || fail "pod: $1: $("$JQ" -c '.items[0].spec' "$T/pods.json")"; }
q '.metadata.name | startswith("gpuop-doctor-")'
q '.spec.nodeName == "dgx-h100-1" and .spec.restartPolicy == "Never"'
q '.spec.containers[0] | .image == "gpuop:test" and .command == ["gpuop","doctor","--host-root=/host"] and .securityContext.privileged == true'
q '.spec.containers[0].volumeMounts[0] | .mountPath == "/host" and .readOnly == true'
q '.spec.volumes[0].hostPath.path == "/"'
q '.spec.tolerations == [{"operator":"Exists"}] and .spec.activeDeadlineSeconds > 0'
name=$("$JQ" -r '.items[0].metadata.name' "$T/pods.json")
$K -n gpu-operator patch pod "$name" --subresource=status --type merge -p \
    '{"status":{"phase":"Succeeded","containerStatuses":[{"name":"doctor","image":"gpuop:test","imageID":"","ready":false,"restartCount":0,"state":{"terminated":{"exitCode":3,"reason":"Completed"}}}]}}' >/dev/null
rc=0; wait "$dpid" || rc=$?
[ "$rc" = 3 ] || fail "kubectl gpuop doctor exited $rc, want 3 (the pod's): $(cat "$T/doctor.log")"
grep -q "doctor pod deleted" "$T/doctor.log" || fail "no deletion logged: $(cat "$T/doctor.log")"
wait_for 10 "the pod gone" sh -c "[ -z \"\$($K -n gpu-operator get pods -l app.kubernetes.io/name=gpuop-doctor -o name)\" ]"

# 2. a pod that never finishes: removed at the timeout, exit 1, said so
rc=0; "$B/gpuop" doctor dgx-h100-2 --image=gpuop:test --timeout=2s >"$T/out" 2>"$T/doctor.log" || rc=$?
[ "$rc" = 1 ] || fail "timeout: exit $rc: $(cat "$T/doctor.log")"
grep -q "did not finish within 2s" "$T/doctor.log" || fail "timeout not said: $(cat "$T/doctor.log")"
wait_for 10 "the pod gone after the timeout" sh -c "[ -z \"\$($K -n gpu-operator get pods -l app.kubernetes.io/name=gpuop-doctor -o name)\" ]"

# 3. no such node: said so, nothing created
rc=0; "$B/gpuop" doctor no-such-node >"$T/out" 2>"$T/doctor.log" || rc=$?
[ "$rc" = 1 ] && grep -q 'node no-such-node: .*not found' "$T/doctor.log" || fail "missing node: exit $rc $(cat "$T/doctor.log")"
[ "$(pods | "$JQ" '.items | length')" = 0 ] || fail "a pod for a missing node"
echo "ok: kubectl gpuop doctor NODE on kubesim"
