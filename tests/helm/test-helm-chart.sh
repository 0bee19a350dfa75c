#!/usr/bin/env bash
# deploy/helm/gpuop checked with the tools that consume it: helm lint and helm template (the
# pinned helm 3.17) for each values file in tests/helm/values/ and NVIDIA's chart defaults
# (from ../shared when present); every rendered built-in object validated by kubernetes-models
# (Kubernetes' own schemas), the ClusterPolicy by the operator's own policy check and against
# its CRD (no field an API server would prune), the PrometheusRule's groups by promtool, the
# roles for wildcards. One version everywhere: Chart.yaml, the image tag and --operand-image
# carry meson.build's. Bad values fail helm template with the chart's message.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
SHARED=${GPUOP_SHARED:-$S/../shared}
need_tools
[ -x "$HELM" ] || skip "pinned helm not found at $HELM (scripts/tools.sh)"
need_cmd node npm
M=$B/npm-kubernetes-models
if [ ! -f "$M/node_modules/kubernetes-models/package.json" ]; then
    mkdir -p "$M"
    if ! (cd "$M" && timeout 300 npm install --no-audit --no-fund --silent kubernetes-models@5.1.0 >npm.log 2>&1); then
        skip "npm install kubernetes-models failed (registry unreachable?)"
    fi
fi
C=$S/deploy/helm/gpuop
V=$S/tests/helm/values

version=$(meson introspect --projectinfo "$B" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
grep -qx "version: $version" "$C/Chart.yaml" || fail "Chart.yaml version is not meson's $version"
grep -qx "appVersion: \"$version\"" "$C/Chart.yaml" || fail "Chart.yaml appVersion is not meson's $version"
"$B/gpuop" version | grep -qx "gpuop $version" || fail "gpuop version is not $version"

cases=()
for f in "$V"/*.yaml; do cases+=("$(basename "$f" .yaml):$f"); done
NV=$SHARED/reference/upstream/gpu-operator-chart-v26.7.0/values.yaml
if [ -f "$NV" ]; then cases+=("nvidia-defaults:$NV"); else echo "NVIDIA's chart absent: its defaults not rendered"; fi
cases+=("gpuop-defaults:")

helm_q lint "$C" --strict >"$T/lint" || { cat "$T/lint"; fail "helm lint"; }
echo "helm lint: ok"
rc=0
for c in "${cases[@]}"; do
    name=${c%%:*} file=${c#*:}
    args=(template gpuop "$C" --namespace gpu-operator)
    [ -n "$file" ] && args+=(-f "$file")
    if [ "$name" = nvidia-defaults ]; then
        helm_q lint "$C" --strict -f "$file" >"$T/lint.$name" || { cat "$T/lint.$name"; fail "helm lint with $name"; }
    fi
    helm_q "${args[@]}" >"$T/$name.yaml" || fail "helm template with $name"
    # Split: built-in kinds for kubernetes-models, the ClusterPolicy, the PrometheusRule.
    python3 "$S/tests/helm/chart-check.py" split "$T/$name.yaml" "$T/$name" "$version" "$name" || { rc=1; continue; }
    cp_ok=
    if [ -f "$T/$name.clusterpolicy.yaml" ]; then
        cp_ok=", ClusterPolicy accepted"
        "$B/gpuop" operator render --policy "$T/$name.clusterpolicy.yaml" --os-tag ubuntu22.04 >"$T/$name.objs" 2>"$T/$name.render" ||
            { cat "$T/$name.render"; echo "FAIL $name: the operator rejects the chart's ClusterPolicy"; rc=1; cp_ok=; }
        python3 "$S/tests/helm/chart-check.py" prune "$T/$name.clusterpolicy.yaml" "$S/deploy/crds/nvidia.com_clusterpolicies.yaml" || { rc=1; cp_ok=; }
    fi
    if [ -f "$T/$name.nvidiadriver.yaml" ]; then
        python3 "$S/tests/helm/chart-check.py" prune "$T/$name.nvidiadriver.yaml" "$S/deploy/crds/nvidia.com_nvidiadrivers.yaml" || rc=1
        cp_ok+=", NVIDIADriver default"
    fi
    if [ -f "$T/$name.rules.yaml" ]; then
        promtool check rules "$T/$name.rules.yaml" >/dev/null || { echo "FAIL $name: PrometheusRule groups"; rc=1; }
    fi
    echo "$name: rendered$cp_ok"
done
# Every case's built-in objects and the CRDs the chart installs, through kubernetes-models in
# one run (node starts once); each object's name carries its case in the output.
python3 - "$T" "$C"/crds/*.yaml >"$T/all.json" <<'PY'
import glob, json, os, sys, yaml
objs = []
for f in sorted(glob.glob(sys.argv[1] + "/*.builtin.json")):
    case = os.path.basename(f)[:-len(".builtin.json")]
    for o in json.load(open(f)):
        o["metadata"]["annotations"] = {**o["metadata"].get("annotations", {}), "test-case": case}
        objs.append(o)
objs += [d for f in sys.argv[2:] for d in yaml.safe_load_all(open(f)) if d]
json.dump(objs, sys.stdout)
PY
if ! node "$S/tests/operator/validate-models.mjs" "$T/all.json" "$M/node_modules" >"$T/models.out"; then
    grep '^FAIL' "$T/models.out"
    echo "FAIL kubernetes-models"
    rc=1
fi
echo "kubernetes-models: $(tail -1 "$T/models.out") (every case's objects and the CRDs)"

# Bad input: a wrong type fails with the schema's message naming the field; a config to create
# without a name fails with the chart's own message.
printf 'driver:\n  enabled: "yes"\n' >"$T/bad-type.yaml"
if helm_q template gpuop "$C" -f "$T/bad-type.yaml" >/dev/null 2>"$T/bad-type.err"; then fail "a string for driver.enabled rendered"; fi
grep -q 'driver.enabled: Invalid type. Expected: boolean, given: string' "$T/bad-type.err" || fail "wrong-type message: $(cat "$T/bad-type.err")"
printf 'mig:\n  strategy: both\n' >"$T/bad-enum.yaml"
if helm_q template gpuop "$C" -f "$T/bad-enum.yaml" >/dev/null 2>"$T/bad-enum.err"; then fail "mig.strategy both rendered"; fi
grep -q 'mig.strategy' "$T/bad-enum.err" || fail "bad-enum message: $(cat "$T/bad-enum.err")"
printf 'devicePlugin:\n  config:\n    create: true\n' >"$T/bad-cfg.yaml"
if helm_q template gpuop "$C" -f "$T/bad-cfg.yaml" >/dev/null 2>"$T/bad-cfg.err"; then fail "a config to create without a name rendered"; fi
grep -q 'devicePlugin.config.create needs devicePlugin.config.name' "$T/bad-cfg.err" || fail "bad-cfg message: $(cat "$T/bad-cfg.err")"
echo "bad values: refused with the field named"
[ $rc = 0 ] && echo "PASS helm chart"
exit $rc
