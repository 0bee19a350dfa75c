#!/bin/sh
# tests/adopt/fixtures/nvidia-v24.9.2.yaml against what ../shared/reference gives (fixture.py).
S=${GPUOP_SOURCE_ROOT:?}
REF=${GPUOP_SHARED:-$S/../shared}/reference/nvidia-operator-v24.9.2
[ -f "$REF/README.md" ] || { echo "the reference is absent ($REF): skipped"; exit 77; }
exec python3 "$S/tests/adopt/fixture.py" check "$REF" "$S/tests/adopt/fixtures/nvidia-v24.9.2.yaml"
