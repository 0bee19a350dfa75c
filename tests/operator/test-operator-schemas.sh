#!/usr/bin/env bash
# Every object the operator renders validates against Kubernetes' own schemas (the npm package
# kubernetes-models, installed here into the build directory on first use).
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
SHARED=${GPUOP_SHARED:-$S/../shared}
need_cmd node npm
M=$B/npm-kubernetes-models
if [ ! -f "$M/node_modules/kubernetes-models/package.json" ]; then
    mkdir -p "$M"
    if ! (cd "$M" && timeout 300 npm install --no-audit --no-fund --silent kubernetes-models@5.1.0 >npm.log 2>&1); then
        tail -5 "$M/npm.log"
        skip "npm install kubernetes-models failed (registry unreachable?)"
    fi
fi
rc=0
# Both samples leave the node status exporter off: a third policy turns every component on, so
# every template is validated.
sed '/^  nodeStatusExporter:/{n;s/enabled: false/enabled: true/}' "$S/deploy/samples/clusterpolicy.yaml" >"$T/all.yaml"
grep -A1 '^  nodeStatusExporter:' "$T/all.yaml" | grep -q 'enabled: true' || fail "could not enable every component"
for policy in "$S/deploy/samples/clusterpolicy.yaml" "$T/all.yaml" \
    "$SHARED/reference/upstream/gpu-operator_config_samples_v1_clusterpolicy.yaml"; do
    [ -f "$policy" ] || continue
    "$B/gpuop" operator render --policy "$policy" --os-tag ubuntu22.04 >"$T/objs.json" 2>/dev/null
    node "$S/tests/operator/validate-models.mjs" "$T/objs.json" "$M/node_modules" || rc=1
done
exit $rc
