#!/bin/bash
# sim/kubesim/pb-tables.c is what scripts/gen-k8s-pb.py writes from Kubernetes' .proto files
# (a cross-check: skipped where ../shared is absent).
set -u
SRC=${GPUOP_SOURCE_ROOT:?}
SHARED=${GPUOP_SHARED:-$SRC/../shared}
[ -d "$SHARED/reference/upstream/k8s-proto-v0.32.9" ] \
    || { echo "no $SHARED/reference/upstream/k8s-proto-v0.32.9: skipped"; exit 77; }
exec python3 "$SRC/scripts/gen-k8s-pb.py" --check "$SHARED"
