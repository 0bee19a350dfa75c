#!/usr/bin/env bash
# format.sh check|fix: clang-format over every C source and header we own.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -co --exclude-standard -- '*.c' '*.h' | grep -v -E '(^|/)generated/|\.pb-c\.' || true)
[ ${#files[@]} -gt 0 ] || exit 0
if [ "${1:-check}" = fix ]; then
    clang-format -i "${files[@]}"
    exit 0
fi
bad=0
for f in "${files[@]}"; do
    if ! diff -q <(clang-format "$f") "$f" >/dev/null; then
        echo "format: $f differs from .clang-format (run: make format)"
        bad=1
    fi
done
exit $bad
