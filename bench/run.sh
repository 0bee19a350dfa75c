#!/usr/bin/env bash
# Runs every benchmark script bench/*/run.sh in turn.
set -euo pipefail
cd "$(dirname "$0")/.."
for s in bench/*/run.sh; do
    [ -x "$s" ] || continue
    echo "== $s"
    "$s"
done
