#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Integration test: the device plugin and feature discovery read one config file format
# (src/lib/dpconfig) and answer bad input alike: each input below makes both exit 2 (bad input,
# src/lib/svc/svc.h) with one error line naming the file, before touching NVML or the kubelet.
# A FIFO, a device or a directory given as the config is refused ("not a regular file"), never
# read as an empty config.
#
# usage: test-config-input.sh <gpuop>
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"

GPUOP=$1
SRC=$S
WORK=$T
mkfifo "$WORK/fifo" || skip "mkfifo failed"
mkdir "$WORK/dir"

# check <name> <config> <text the error line holds>...
check() {
    name=$1
    cfg=$2
    shift 2
    for comp in device-plugin feature-discovery; do
        # a regression (an empty config) would run on: the timeout turns it into a failure
        GPUOP_NVML_LIBRARY=$WORK/missing/libnvidia-ml.so.1 timeout 10 "$GPUOP" "$comp" \
            --config-file "$cfg" >/dev/null 2>"$WORK/err"
        rc=$?
        if [ "$rc" != 2 ]; then
            fail_later "$name: $comp exited $rc, want 2 (bad input)"
            sed 's/^/    /' "$WORK/err"
            continue
        fi
        if [ "$(grep -c ' error ' "$WORK/err")" != 1 ]; then
            fail_later "$name: $comp: not one error line"
            sed 's/^/    /' "$WORK/err"
            continue
        fi
        for want in "$cfg" "$@"; do
            if ! grep ' error ' "$WORK/err" | grep -qF -- "$want"; then
                fail_later "$name: $comp: the error line lacks \"$want\""
                sed 's/^/    /' "$WORK/err"
            fi
        done
    done
}

check fifo "$WORK/fifo" "not a regular file (a FIFO)"
check directory "$WORK/dir" "not a regular file (a directory)"
check device /dev/null "not a regular file (a character device)"
check missing "$WORK/missing.yaml" "No such file"
# configs that do not parse or validate: the same exit code and error line from both components
CFG=$SRC/tests/feature-discovery/configs
check bad-syntax "$CFG/bad-syntax.yaml" "did not find expected"
check bad-field "$CFG/bad-field.yaml" "flags.plugin.passDevSpecs: unknown field"
check bad-replicas "$CFG/bad-replicas.yaml" "sharing.timeSlicing.resources[0].replicas" \
    "number of replicas must be >= 2"
check bad-version "$CFG/bad-version.yaml" "unknown version"
check bad-strategy "$CFG/bad-strategy.yaml" "flags.migStrategy" "unknown MIG strategy"
cat >"$WORK/dup.yaml" <<'YAML'
version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 2
    - name: gpu
      replicas: 4
YAML
check duplicate-resource "$WORK/dup.yaml" "sharing.timeSlicing.resources[1].name" \
    "already given by sharing.timeSlicing.resources[0].name"

[ "$FAILURES" = 0 ] && echo "ok"
