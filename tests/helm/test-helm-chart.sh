#!/usr/bin/env bash
# deploy/helm/gpuop checked with the tools that consume it: helm lint and helm template (the
# pinned helm 3.17) for each values file in tests/helm/values/ and NVIDIA's chart defaults
# (from ../shared when present); every rendered built-in object validated by kubernetes-models
# (Kubernetes' own schemas), the ClusterPolicy by the operator's own policy check and against
# its CRD (no field an API server would prune), the PrometheusRule's groups by promtool, the
# roles for wildcards, the hooks. One version everywhere: Chart.yaml, the image tag and
# --operand-image carry meson.build's; the chart's driver.version is the operator's default.
# Images: no registry fails with what to set (unless operator.localImage); with a registry every
# image is that registry's; the operands' image comes from its own key. Bad values fail helm
# template with the chart's message.
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

REG=registry.example.com/gpuop
IMAGE=$REG/gpuop:$version
helm_q lint "$C" --strict --set operator.repository=$REG >"$T/lint" || { cat "$T/lint"; fail "helm lint"; }
echo "helm lint: ok"
rc=0
for c in "${cases[@]}"; do
    name=${c%%:*} file=${c#*:}
    args=(template gpuop "$C" --namespace gpu-operator)
    [ -n "$file" ] && args+=(-f "$file")
    # after the file: NVIDIA's values name NVIDIA's operator image
    args+=(--set operator.repository=$REG --set operator.image=gpuop)
    if [ "$name" = nvidia-defaults ]; then
        helm_q lint "$C" --strict -f "$file" --set operator.repository=$REG --set operator.image=gpuop >"$T/lint.$name" ||
            { cat "$T/lint.$name"; fail "helm lint with $name"; }
    fi
    helm_q "${args[@]}" >"$T/$name.yaml" || fail "helm template with $name"
    # Split: built-in kinds for kubernetes-models, the ClusterPolicy, the PrometheusRule.
    python3 "$S/tests/helm/chart-check.py" split "$T/$name.yaml" "$T/$name" "$version" "$name" "$IMAGE" || { rc=1; continue; }
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
    if [ -f "$T/$name.gpucluster.yaml" ]; then
        "$B/gpuop" operator render --policy "$T/$name.gpucluster.yaml" --os-tag ubuntu22.04 >"$T/$name.objs" 2>"$T/$name.render" ||
            { cat "$T/$name.render"; echo "FAIL $name: the operator rejects the chart's GPUCluster"; rc=1; }
        python3 "$S/tests/helm/chart-check.py" prune "$T/$name.gpucluster.yaml" "$S/deploy/crds/nvidia.com_gpuclusters.yaml" || rc=1
        grep -q '"name": "nvidia-dra-driver-gpu-kubelet-plugin"' "$T/$name.objs" || { echo "FAIL $name: no DRA kubelet plugin rendered"; rc=1; }
        cp_ok+=", GPUCluster accepted"
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

# Images. No registry: helm fails and says what to set; NVIDIA's operator image is refused; a
# local image (operator.localImage) renders as it is; the operands' image by its own key.
img_of() { # RENDERED KIND NAME: the first container's image and the operator's --operand-image
    python3 - "$@" <<'PY'
import sys, yaml
for o in yaml.safe_load_all(open(sys.argv[1])):
    if o and o["kind"] == sys.argv[2] and o["metadata"]["name"] == sys.argv[3]:
        c = o["spec"]["template"]["spec"]["containers"][0]
        print(c["image"], *[a for a in c.get("args", []) if a.startswith("--operand-image=")])
PY
}
if helm_q template gpuop "$C" >/dev/null 2>"$T/noreg.err"; then fail "the default values (no registry) rendered"; fi
grep -q "operator.repository is not set: the image \"gpuop:$version\" names no registry" "$T/noreg.err" &&
    grep -q 'operator.localImage=true' "$T/noreg.err" || fail "no-registry message: $(cat "$T/noreg.err")"
if helm_q template gpuop "$C" --set operator.repository=nvcr.io/nvidia --set operator.image=gpu-operator >/dev/null 2>"$T/nv.err"; then
    fail "NVIDIA's operator image rendered"
fi
grep -q "is NVIDIA's operator image, which does not run gpuop" "$T/nv.err" || fail "NVIDIA image message: $(cat "$T/nv.err")"
helm_q template gpuop "$C" --set operator.localImage=true >"$T/local.yaml" || fail "operator.localImage=true"
[ "$(img_of "$T/local.yaml" Deployment gpu-operator)" = "gpuop:$version --operand-image=gpuop:$version" ] ||
    fail "local image: $(img_of "$T/local.yaml" Deployment gpu-operator)"
helm_q template gpuop "$C" --set operator.repository=$REG --set operands.repository=mirror.corp/gpu \
    --set operands.image=operands >"$T/mirror.yaml" || fail "operands mirror"
[ "$(img_of "$T/mirror.yaml" Deployment gpu-operator)" = "$IMAGE --operand-image=mirror.corp/gpu/operands:$version" ] ||
    fail "mirrored operands: $(img_of "$T/mirror.yaml" Deployment gpu-operator)"
[ "$(img_of "$T/mirror.yaml" DaemonSet gpuop-node-discovery)" = "mirror.corp/gpu/operands:$version" ] ||
    fail "node discovery with mirrored operands: $(img_of "$T/mirror.yaml" DaemonSet gpuop-node-discovery)"
if helm_q template gpuop "$C" --set operator.repository=$REG --set operands.image=ops --set operands.repository=ops >/dev/null 2>"$T/opreg.err"; then
    fail "an operands image without a registry rendered"
fi
grep -q 'operands.repository is not set: the image "ops/ops' "$T/opreg.err" || fail "operands message: $(cat "$T/opreg.err")"
echo "images: no registry refused with what to set; $IMAGE and mirror.corp/gpu/operands:$version as set; local gpuop:$version"

# One default driver version: the chart's driver.version is what the operator renders for a
# ClusterPolicy that names none.
chart_ver=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["driver"]["version"])' "$C/values.yaml")
python3 - "$T/gpuop-defaults.clusterpolicy.yaml" >"$T/nover.yaml" <<'PY'
import sys, yaml
cp = yaml.safe_load(open(sys.argv[1]))
del cp["spec"]["driver"]["version"]
yaml.safe_dump(cp, sys.stdout)
PY
op_ver=$("$B/gpuop" operator render --policy "$T/nover.yaml" --os-tag ubuntu22.04 | python3 -c '
import json, sys
for o in json.load(sys.stdin):
    if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nvidia-driver-daemonset":
        for c in o["spec"]["template"]["spec"]["containers"]:
            if c["name"] == "nvidia-driver-ctr":
                print(c["image"].rsplit(":", 1)[1].rsplit("-", 1)[0])')
[ -n "$op_ver" ] && [ "$chart_ver" = "$op_ver" ] || fail "the chart's driver.version $chart_ver is not the operator's default $op_ver"
echo "driver version: the chart's and the operator's default are both $chart_ver"

# Bad input: a wrong type fails with the schema's message naming the field; a config to create
# without a name fails with the chart's own message.
printf 'driver:\n  enabled: "yes"\n' >"$T/bad-type.yaml"
if helm_q template gpuop "$C" --set operator.localImage=true -f "$T/bad-type.yaml" >/dev/null 2>"$T/bad-type.err"; then fail "a string for driver.enabled rendered"; fi
grep -q 'driver.enabled: Invalid type. Expected: boolean, given: string' "$T/bad-type.err" || fail "wrong-type message: $(cat "$T/bad-type.err")"
printf 'mig:\n  strategy: both\n' >"$T/bad-enum.yaml"
if helm_q template gpuop "$C" --set operator.localImage=true -f "$T/bad-enum.yaml" >/dev/null 2>"$T/bad-enum.err"; then fail "mig.strategy both rendered"; fi
grep -q 'mig.strategy' "$T/bad-enum.err" || fail "bad-enum message: $(cat "$T/bad-enum.err")"
printf 'devicePlugin:\n  config:\n    create: true\n' >"$T/bad-cfg.yaml"
if helm_q template gpuop "$C" --set operator.localImage=true -f "$T/bad-cfg.yaml" >/dev/null 2>"$T/bad-cfg.err"; then fail "a config to create without a name rendered"; fi
grep -q 'devicePlugin.config.create needs devicePlugin.config.name' "$T/bad-cfg.err" || fail "bad-cfg message: $(cat "$T/bad-cfg.err")"
printf 'gpuCluster:\n  deployCR: true\n' >"$T/bad-both.yaml"
if helm_q template gpuop "$C" --set operator.localImage=true -f "$T/bad-both.yaml" >/dev/null 2>"$T/bad-both.err"; then fail "a ClusterPolicy and a GPUCluster rendered together"; fi
grep -q 'clusterPolicy.deployCR and gpuCluster.deployCR cannot both be true' "$T/bad-both.err" || fail "bad-both message: $(cat "$T/bad-both.err")"
echo "bad values: refused with the field named"
[ $rc = 0 ] && echo "PASS helm chart"
exit $rc
