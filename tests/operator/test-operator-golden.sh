#!/usr/bin/env bash
# Golden files of the rendered operands: `gpuop operator render` on NVIDIA's sample ClusterPolicy
# and on gpuop's own sample must match tests/operator/golden/ byte for byte.
# GPUOP_UPDATE_GOLDEN=1 rewrites them (review the diff before committing).
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
SHARED=${GPUOP_SHARED:-$S/../shared}
G=$S/tests/operator/golden
cases=("gpuop-sample:$S/deploy/samples/clusterpolicy.yaml")
NV=$SHARED/reference/upstream/gpu-operator_config_samples_v1_clusterpolicy.yaml
[ -f "$NV" ] && cases+=("nvidia-sample:$NV")
rc=0
for c in "${cases[@]}"; do
    name=${c%%:*}
    policy=${c#*:}
    "$B/gpuop" operator render --policy "$policy" --os-tag ubuntu22.04 \
        --operand-image gpuop:golden >"$T/$name.json" 2>"$T/$name.err"
    if [ "${GPUOP_UPDATE_GOLDEN:-0}" = 1 ]; then
        cp "$T/$name.json" "$G/$name.json"
        echo "updated $G/$name.json"
        continue
    fi
    if ! diff -u "$G/$name.json" "$T/$name.json"; then
        echo "FAIL: $name differs from its golden file"
        rc=1
    fi
done
# Bad input: a clear error naming the field, non-zero exit.
printf 'apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: x}\nspec: {mig: {strategy: bogus}}\n' >"$T/bad.yaml"
if "$B/gpuop" operator render --policy "$T/bad.yaml" >/dev/null 2>"$T/bad.err"; then
    echo "FAIL: an invalid policy rendered"
    rc=1
fi
grep -q 'spec' "$T/bad.err" || { echo "FAIL: error does not name the field: $(cat "$T/bad.err")"; rc=1; }
exit $rc
