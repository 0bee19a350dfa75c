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
# clang-format's dry run over batches of files, as many batches at once as there are CPUs; each
# file that differs is named once, and a clang-format that fails otherwise fails the check
rc=0
out=$(printf '%s\0' "${files[@]}" |
    xargs -0 -n 40 -P "$(nproc)" clang-format --dry-run --Werror 2>&1) || rc=$?
bad=$(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*clang-format-violations.*/\1/p' <<<"$out" | sort -u)
[ -z "$bad" ] || { printf 'format: %s differs from .clang-format (run: make format)\n' $bad; exit 1; }
[ "$rc" = 0 ] || { printf 'format: clang-format failed (exit %s):\n%s\n' "$rc" "$out" | head -20; exit 1; }
