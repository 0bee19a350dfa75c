#!/bin/bash
# The project's CRDs enforced as an API server enforces them: a ClusterPolicy the schema refuses
# is a 422 with the real cause (raw requests, and kubectl's own message); one with omitted fields
# reads back defaulted and without the fields the schema does not know; the status subresource
# keeps spec and status writes apart, each validated; NVIDIADriver's immutable fields stay put.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_cmd curl python3
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" --cache-dir "$T/cache" --request-timeout=10s "$@"; }
# req METHOD URL [BODY [CONTENT-TYPE]]: the body in $T/resp, the status code on stdout.
req() {
    curl -s -o "$T/resp" -w '%{http_code}' -X "$1" -H "Content-Type: ${4:-application/json}" \
        ${3:+--data-binary "${3:-}"} "$2"
}
# jq-like: a Python expression over the response as r.
field() { python3 -c "import json,sys; r=json.load(open('$T/resp')); print($1)"; }

start_kubesim --load "$S/deploy/crds/nvidia.com_clusterpolicies.yaml" \
    --load "$S/deploy/crds/nvidia.com_nvidiadrivers.yaml"
CP=$KS_URL/apis/nvidia.com/v1/clusterpolicies
NVD=$KS_URL/apis/nvidia.com/v1alpha1/nvidiadrivers

REQ='"daemonsets":{},"dcgm":{},"dcgmExporter":{},"devicePlugin":{},"driver":{},"gfd":{},"nodeStatusExporter":{},"operator":{},"toolkit":{}'
cp_body() { echo "{\"apiVersion\":\"nvidia.com/v1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"$1\"},\"spec\":{$2}${3:-}}"; }

# spec.driver.enabled: "yes" is refused at the API with the real cause.
code=$(req POST "$CP" "$(cp_body cluster-policy "$REQ,\"driver\":{\"enabled\":\"yes\"}")")
[ "$code" = 422 ] || fail "invalid ClusterPolicy: $code $(cat "$T/resp")"
want='ClusterPolicy.nvidia.com "cluster-policy" is invalid: spec.driver.enabled: Invalid value: "string": spec.driver.enabled in body must be of type boolean: "string"'
[ "$(field "r['message']")" = "$want" ] || fail "message: $(cat "$T/resp")"
[ "$(field "r['reason'], r['details']['kind'], r['details']['group']")" = "Invalid ClusterPolicy nvidia.com" ] ||
    fail "status: $(cat "$T/resp")"
[ "$(field "[(c['reason'], c['field']) for c in r['details']['causes']]")" = \
    "[('FieldValueTypeInvalid', 'spec.driver.enabled')]" ] || fail "causes: $(cat "$T/resp")"
# kubectl shows the same cause (client-side validation off until the OpenAPI documents exist)
cp_body cluster-policy "$REQ,\"driver\":{\"enabled\":\"yes\"}" >"$T/bad.json"
out=$(k create -f "$T/bad.json" 2>&1) && fail "kubectl created an invalid ClusterPolicy"
echo "$out" | grep -qF 'spec.driver.enabled: Invalid value: "string": spec.driver.enabled in body must be of type boolean: "string"' ||
    fail "kubectl: $out"
# a required section missing, and an unsupported enum value
code=$(req POST "$CP" "$(cp_body p "\"mig\":{\"strategy\":\"bogus\"},\"driver\":{}")")
[ "$code" = 422 ] || fail "missing sections: $code"
field "'\n'.join(c['field'] + ': ' + c['message'] for c in r['details']['causes'])" >"$T/causes"
grep -qx 'spec.toolkit: Required value' "$T/causes" || fail "required: $(cat "$T/causes")"
grep -qxF 'spec.mig.strategy: Unsupported value: "bogus": supported values: "none", "single", "mixed"' \
    "$T/causes" || fail "enum: $(cat "$T/causes")"
[ "$(field "[c['reason'] for c in r['details']['causes'] if c['field'] == 'spec.mig.strategy']")" = \
    "['FieldValueNotSupported']" ] || fail "enum reason: $(cat "$T/resp")"
k get clusterpolicies -o name | grep -q . && fail "an invalid ClusterPolicy was stored"

# Omitted fields read back with the CRD's defaults; unknown fields are pruned; status cannot be
# set on create.
code=$(req POST "$CP" "$(cp_body cluster-policy "$REQ,\"bogus\":1,\"mig\":{\"strategy\":\"single\",\"x\":2}" ',"status":{"state":"ready"},"extra":true')")
[ "$code" = 201 ] || fail "create: $code $(cat "$T/resp")"
[ "$(k get clusterpolicy cluster-policy -o jsonpath='{.spec.operator.runtimeClass}')" = nvidia ] ||
    fail "spec.operator.runtimeClass not defaulted"
[ "$(k get clusterpolicy cluster-policy -o jsonpath='{.spec.daemonsets.updateStrategy}')" = RollingUpdate ] ||
    fail "spec.daemonsets.updateStrategy not defaulted"
[ "$(k get clusterpolicy cluster-policy -o jsonpath='{.spec.driver.kernelModuleType}/{.spec.toolkit.installDir}')" = auto//usr/local/nvidia ] ||
    fail "driver/toolkit defaults"
k get clusterpolicy cluster-policy -o json >"$T/resp"
[ "$(field "sorted(r['spec']['mig']), 'bogus' in r['spec'], 'extra' in r, 'status' in r")" = \
    "['strategy'] False False False" ] || fail "pruning: $(cat "$T/resp")"
[ "$(field "r['metadata']['generation']")" = 1 ] || fail "generation: $(cat "$T/resp")"

# Updates: a patch the schema refuses is 422 and changes nothing; a valid one is defaulted too.
out=$(k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"driver":{"upgradePolicy":{"maxParallelUpgrades":-1}}}}' 2>&1) &&
    fail "an invalid patch was accepted"
echo "$out" | grep -qF 'spec.driver.upgradePolicy.maxParallelUpgrades: Invalid value: -1: spec.driver.upgradePolicy.maxParallelUpgrades in body should be greater than or equal to 0' ||
    fail "patch: $out"
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"driver":{"upgradePolicy":{"drain":{}}},"junk":1}}' >/dev/null ||
    fail "valid patch"
[ "$(k get clusterpolicy cluster-policy -o jsonpath='{.spec.driver.upgradePolicy.maxParallelUpgrades}/{.spec.driver.upgradePolicy.drain.timeoutSeconds}')" = 1/300 ] ||
    fail "nested defaults on patch"
[ "$(k get clusterpolicy cluster-policy -o jsonpath='{.spec.junk}{.metadata.generation}')" = 2 ] ||
    fail "patch pruning or generation"
# a patch of only unknown fields changes nothing: no new generation
k patch clusterpolicy cluster-policy --type merge -p '{"spec":{"junk2":1}}' >/dev/null || fail "noop patch"
[ "$(k get clusterpolicy cluster-policy -o jsonpath='{.metadata.generation}')" = 2 ] ||
    fail "a pruned-away change bumped the generation"
# server-side apply is defaulted and validated as well
cat >"$T/apply.yaml" <<'Y'
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: applied}
spec: {daemonsets: {}, dcgm: {}, dcgmExporter: {}, devicePlugin: {}, driver: {}, gfd: {}, nodeStatusExporter: {}, operator: {}, toolkit: {}, cdi: {}}
Y
k apply --server-side -f "$T/apply.yaml" >/dev/null || fail "server-side apply"
[ "$(k get clusterpolicy applied -o jsonpath='{.spec.cdi.enabled}')" = true ] || fail "apply defaults"
sed 's/cdi: {}/cdi: {enabled: maybe}/' "$T/apply.yaml" >"$T/apply-bad.yaml"
out=$(k apply --server-side -f "$T/apply-bad.yaml" 2>&1) && fail "invalid apply accepted"
echo "$out" | grep -qF 'spec.cdi.enabled in body must be of type boolean' || fail "apply: $out"

# The status subresource: a main-resource write ignores status; /status takes only status, and
# validates it.
k get clusterpolicy cluster-policy -o json >"$T/cur.json"
python3 - "$T/cur.json" <<'P'
import json, sys
o = json.load(open(sys.argv[1]))
o["status"] = {"state": "ready"}
json.dump(o, open(sys.argv[1], "w"))
P
code=$(req PUT "$CP/cluster-policy" "$(cat "$T/cur.json")")
[ "$code" = 200 ] || fail "put: $code $(cat "$T/resp")"
[ "$(field "'status' in r")" = False ] || fail "a main-resource PUT set status"
code=$(req PATCH "$CP/cluster-policy/status" '{"status":{"state":"sideways"}}' application/merge-patch+json)
[ "$code" = 422 ] || fail "invalid status: $code $(cat "$T/resp")"
grep -qF 'status.state: Unsupported value: \"sideways\": supported values: \"ignored\", \"ready\", \"notReady\"' "$T/resp" ||
    fail "status cause: $(cat "$T/resp")"
code=$(req PATCH "$CP/cluster-policy/status" '{"status":{"state":"ready","observedGeneration":2,"junk":1},"spec":{"mig":{"strategy":"mixed"}}}' application/merge-patch+json)
[ "$code" = 200 ] || fail "status patch: $code $(cat "$T/resp")"
[ "$(k get clusterpolicy cluster-policy -o jsonpath='{.status.state}/{.status.observedGeneration}/{.status.junk}/{.spec.mig.strategy}')" = ready/2//single ] ||
    fail "status subresource: $(k get clusterpolicy cluster-policy -o jsonpath='{.status}{.spec.mig}')"

# NVIDIADriver: defaults, and the x-kubernetes-validations rule self == oldSelf.
code=$(req POST "$NVD" '{"apiVersion":"nvidia.com/v1alpha1","kind":"NVIDIADriver","metadata":{"name":"d"},"spec":{}}')
[ "$code" = 201 ] || fail "NVIDIADriver: $code $(cat "$T/resp")"
[ "$(k get nvidiadriver d -o jsonpath='{.spec.driverType}/{.spec.image}/{.spec.default}')" = gpu/nvcr.io/nvidia/driver/false ] ||
    fail "NVIDIADriver defaults"
out=$(k patch nvidiadriver d --type merge -p '{"spec":{"driverType":"vgpu"}}' 2>&1) && fail "driverType changed"
echo "$out" | grep -qF 'spec.driverType: Invalid value: "string": driverType is immutable' || fail "immutable: $out"
k patch nvidiadriver d --type merge -p '{"spec":{"version":"570.1"}}' >/dev/null || fail "a mutable field"
stop_kubesim
echo "ok: CRD schemas enforced"
