#!/bin/bash
# What a takeover of DaemonSets and Helm's hook Jobs need from kubesim's controllers: a
# DaemonSet deleted with propagationPolicy=Orphan leaves its pods running without an owner, and a
# DaemonSet created again whose selector they match claims them (the pods stay, and RollingUpdate
# then replaces them as pods of an old template); a Job runs one pod from its template, labelled
# job-name and owned by the Job, and turns Complete when the pod succeeds or Failed once more pods
# failed than spec.backoffLimit allows.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
k() { $K "$@"; }
start_kubesim --nodes 3 --pod-ready-delay 100ms
k create namespace ops >/dev/null
ds() { # NAME SELECTOR-LABELS-JSON POD-LABELS-JSON STRATEGY
    cat <<Y
{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"$1","namespace":"ops"},
 "spec":{"selector":{"matchLabels":$2},"updateStrategy":{"type":"$4"},
  "template":{"metadata":{"labels":$3},"spec":{"containers":[{"name":"c","image":"x:$5"}]}}}}
Y
}
ds gfd '{"app":"gfd","part-of":"nvidia"}' '{"app":"gfd","part-of":"nvidia"}' OnDelete 1 | k apply -f - >/dev/null
pods() { k -n ops get pods -l app=gfd -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort; }
three() { [ "$(pods | wc -l)" = 3 ] && [ -z "$(k -n ops get pods -o jsonpath='{.items[?(@.status.phase!="Running")].metadata.name}')" ]; }
wait_for 10 "3 pods of DaemonSet gfd running" three
before=$(pods)
k -n ops delete ds gfd --cascade=orphan >/dev/null || fail "delete --cascade=orphan"
gone() { ! k -n ops get ds gfd; }
wait_for 10 "DaemonSet gfd gone" gone
[ "$(pods)" = "$before" ] || fail "orphaned pods changed: $(pods)"
owners=$(k -n ops get pods -l app=gfd -o jsonpath='{.items[*].metadata.ownerReferences}')
[ -z "$owners" ] || fail "orphaned pods keep an owner: $owners"
echo "ok: DaemonSet deleted with its 3 pods orphaned, still running"
# created again with a narrower selector the old pods match, on a new template
ds gfd '{"app":"gfd"}' '{"app":"gfd","managed-by":"gpuop"}' OnDelete 2 | k apply -f - >/dev/null
uid=$(k -n ops get ds gfd -o jsonpath='{.metadata.uid}')
claimed() { [ "$(k -n ops get pods -l app=gfd -o jsonpath='{.items[*].metadata.ownerReferences[0].uid}')" = "$uid $uid $uid" ]; }
wait_for 10 "the orphans claimed by the new DaemonSet" claimed
[ "$(pods)" = "$before" ] || fail "claiming replaced pods (OnDelete): $(pods)"
[ "$(k -n ops get ds gfd -o jsonpath='{.status.currentNumberScheduled}/{.status.updatedNumberScheduled}')" = 3/0 ] ||
    fail "status after claiming: $(k -n ops get ds gfd -o jsonpath='{.status}')"
echo "ok: the new DaemonSet claimed the 3 orphans (OnDelete: none replaced, 0 updated)"
one=$(pods | head -1)
k -n ops delete pod "$one" --wait=false >/dev/null
replaced() { [ "$(pods | wc -l)" = 3 ] && ! pods | grep -qx "$one" && [ "$(k -n ops get ds gfd -o jsonpath='{.status.updatedNumberScheduled}')" = 1 ]; }
wait_for 10 "one pod replaced on the new template" replaced
echo "ok: a deleted orphan is replaced by a pod of the new template"
# a bare pod with no matching labels stays nobody's
k -n ops run loner --image=x:1 --labels=app=other >/dev/null
sleep 0.5
[ -z "$(k -n ops get pod loner -o jsonpath='{.metadata.ownerReferences}')" ] || fail "a pod the selector does not match was claimed"

# Jobs
job() { # NAME BACKOFF
    cat <<Y
{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"$1","namespace":"ops"},
 "spec":{"backoffLimit":$2,"template":{"metadata":{"labels":{"hook":"$1"}},
  "spec":{"restartPolicy":"OnFailure","containers":[{"name":"c","image":"x:1"}]}}}}
Y
}
job upgrade 3 | k apply -f - >/dev/null
jobpod() { k -n ops get pods -l job-name="$1" -o jsonpath='{.items[0].metadata.name}'; }
has_pod() { [ -n "$(jobpod "$1")" ]; }
wait_for 10 "the Job's pod" has_pod upgrade
p=$(jobpod upgrade)
[ "$(k -n ops get pod "$p" -o jsonpath='{.metadata.labels.hook}/{.metadata.ownerReferences[0].kind}')" = upgrade/Job ] ||
    fail "job pod labels/owner: $(k -n ops get pod "$p" -o jsonpath='{.metadata}')"
k -n ops patch pod "$p" --subresource=status --type=merge -p '{"status":{"phase":"Succeeded"}}' >/dev/null ||
    fail "pod status"
complete() { [ "$(k -n ops get job "$1" -o jsonpath='{.status.conditions[?(@.type=="Complete")].status}')" = True ]; }
wait_for 10 "Job Complete" complete upgrade
[ "$(k -n ops get job upgrade -o jsonpath='{.status.succeeded}')" = 1 ] || fail "succeeded count"
echo "ok: a Job runs one pod and is Complete when it succeeds"
job flaky 1 | k apply -f - >/dev/null
for i in 1 2; do
    wait_for 10 "pod $i of Job flaky" has_pod flaky
    fp=$(k -n ops get pods -l job-name=flaky -o jsonpath='{.items[?(@.status.phase!="Failed")].metadata.name}')
    [ -n "$fp" ] || fail "no running pod of Job flaky"
    k -n ops patch pod "$fp" --subresource=status --type=merge -p '{"status":{"phase":"Failed"}}' >/dev/null
    sleep 0.3
done
failed() { [ "$(k -n ops get job flaky -o jsonpath='{.status.conditions[?(@.type=="Failed")].reason}')" = BackoffLimitExceeded ]; }
wait_for 10 "Job Failed after backoffLimit 1" failed
[ "$(k -n ops get pods -l job-name=flaky -o name | wc -l)" = 2 ] || fail "Job flaky made more than 2 pods"
k -n ops delete job upgrade >/dev/null
nopods() { [ -z "$(jobpod upgrade)" ]; }
wait_for 10 "a deleted Job's pods collected" nopods
echo "ok: a Job fails after backoffLimit+1 failed pods; a deleted Job's pod goes"
stop_kubesim
echo "PASS kubesim takeover controllers"
