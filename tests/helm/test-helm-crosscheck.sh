#!/usr/bin/env bash
# Cross-check with NVIDIA's GPU Operator chart (../shared/reference/upstream; skipped when
# absent): a team's values file used unchanged. For NVIDIA's defaults and each values file in
# tests/helm/values/ (over NVIDIA's defaults, as a team's file is), both charts are rendered and
# their ClusterPolicy specs compared field by field. Allowed differences are listed in
# crosscheck.py, each with its reason; an empty value and an absent one count as the same.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
SHARED=${GPUOP_SHARED:-$S/../shared}
NV=$SHARED/reference/upstream/gpu-operator-chart-v26.7.0
[ -f "$NV/Chart.yaml" ] || skip "NVIDIA's chart absent ($NV)"
need_tools
[ -x "$HELM" ] || skip "pinned helm not found at $HELM"
rc=0
for f in "" "$S"/tests/helm/values/*.yaml; do
    name=$(basename "${f:-nvidia-defaults}" .yaml)
    # a cluster serving DRA (NVIDIA's chart asks for it before it renders a GPUCluster)
    helm_q template g "$NV" --namespace gpu-operator --api-versions resource.k8s.io/v1/DeviceClass \
        ${f:+-f "$f"} >"$T/nv.yaml"
    # gpuop's image: NVIDIA's values name NVIDIA's operator image, which the chart refuses
    helm_q template g "$S/deploy/helm/gpuop" --namespace gpu-operator -f "$NV/values.yaml" ${f:+-f "$f"} \
        --api-versions resource.k8s.io/v1/DeviceClass \
        --set operator.repository=registry.example.com/gpuop --set operator.image=gpuop >"$T/ours.yaml"
    python3 "$S/tests/helm/crosscheck.py" "$name" "$T/nv.yaml" "$T/ours.yaml" || rc=1
done
[ $rc = 0 ] && echo "PASS cross-check with NVIDIA's chart"
exit $rc
