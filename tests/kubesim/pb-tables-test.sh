#!/bin/bash
# sim/kubesim/pb-tables.c is what scripts/gen-k8s-pb.py writes from Kubernetes' .proto files
# (a cross-check: skipped where ../shared is absent).
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
SHARED=${GPUOP_SHARED:-$S/../shared}
[ -d "$SHARED/reference/upstream/k8s-proto-v0.32.9" ] ||
    skip "no $SHARED/reference/upstream/k8s-proto-v0.32.9"
python3 "$S/scripts/gen-k8s-pb.py" --check "$SHARED"
