#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU quota alert rules (deploy/monitoring/gpuop-quota-rules.yaml) with the real promtool:
# `promtool check rules`, then `promtool test rules` with series that fire each alert and series
# that must not (tests/operator/rules/gpuop-quota-rules.test.yaml).
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
command -v promtool >/dev/null || skip "promtool not installed (Debian package prometheus)"
promtool check rules "$S/deploy/monitoring/gpuop-quota-rules.yaml"
# every alert of the file has a test case
for a in $(awk '$1 == "-" && $2 == "alert:" {print $3}' "$S/deploy/monitoring/gpuop-quota-rules.yaml"); do
    grep -q "alertname: $a\$" "$S/tests/operator/rules/gpuop-quota-rules.test.yaml" ||
        fail "alert $a has no promtool test"
done
cd "$S/tests/operator/rules"
promtool test rules gpuop-quota-rules.test.yaml
