#!/usr/bin/env bash
# gpuop's command line as the runtime generates it: `gpuop <component> --help` for every
# component `gpuop --help` lists, and `--help` of every command each one lists under
# "Commands:", down to the last (exit 0, a Usage line naming the command, -h); an unknown
# command of a component that has commands (exit 2, one line naming the valid ones); one help
# line for a shared flag (--kubeconfig, --context) in every component that takes it; and
# `gpuop operator render` of an invalid policy (exit 2, one line naming the file and the field).
# $1: build/gpuop
set -uo pipefail
gpuop=$1
SRC=${GPUOP_SOURCE_ROOT:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# The names listed under a title ("Components:", "Commands:") up to the next blank line.
section() { awk -v t="$1" '$0 == t {on = 1; next} on && /^$/ {exit} on {print $1}'; }

helps=0
# check_help WORDS...: `gpuop WORDS --help`, then every command it lists, the same way.
check_help() {
    local out="$tmp/help" rc
    "$gpuop" "$@" --help >"$out" 2>"$tmp/err"
    rc=$?
    helps=$((helps + 1))
    if [ $rc != 0 ]; then
        fail "gpuop $* --help: exit $rc: $(cat "$tmp/err")"
        return
    fi
    head -1 "$out" | grep -q "^Usage: gpuop $* " || fail "gpuop $* --help: no Usage line: $(head -1 "$out")"
    grep -q -- '-h, --help' "$out" || fail "gpuop $* --help: no -h, --help"
    grep -E -- '--(kubeconfig|context) ' "$out" | sed "s/^/$* | /" >>"$tmp/shared" || true
    local cmds
    cmds=$(section "Commands:" <"$out")
    [ -z "$cmds" ] && return
    grep -q "gpuop $* COMMAND --help" "$out" || fail "gpuop $* --help: no word on a command's help"
    "$gpuop" "$@" no-such-command >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc = 2 ] || fail "gpuop $* no-such-command: exit $rc, not 2"
    [ "$(wc -l <"$tmp/err")" = 1 ] || fail "gpuop $* no-such-command: not one line: $(cat "$tmp/err")"
    grep -q 'unknown command ".*no-such-command"' "$tmp/err" ||
        fail "gpuop $* no-such-command: $(cat "$tmp/err")"
    local c
    for c in $cmds; do
        grep -q "\b$c\b" "$tmp/err" || fail "gpuop $* no-such-command: \"$c\" not named: $(cat "$tmp/err")"
    done
    for c in $cmds; do
        check_help "$@" "$c"
    done
}

"$gpuop" --help >"$tmp/top" || fail "gpuop --help: exit $?"
components=$(section "Components:" <"$tmp/top")
[ "$(echo "$components" | wc -l)" -ge 15 ] || fail "gpuop --help lists too few components: $components"
: >"$tmp/shared"
for c in $components; do
    [ "$c" = version ] && continue
    check_help "$c"
done
"$gpuop" version >/dev/null || fail "gpuop version: exit $?"
"$gpuop" no-such-component 2>/dev/null
[ $? = 2 ] || fail "gpuop no-such-component: exit not 2"

# The commands this tree has (a missing one is a regression, not a skip).
for want in "mig-parted apply" "mig-parted assert" "mig-parted export" "toolkit cdi generate" \
    "toolkit cdi list" "operator render"; do
    grep -q "^Usage: gpuop $want" <("$gpuop" $want --help 2>&1) || fail "no command gpuop $want"
done

# A shared flag reads the same everywhere (defined once, src/lib/svc/svc-fragments.c).
for flag in kubeconfig context; do
    n=$(grep -c -- "--$flag " "$tmp/shared")
    lines=$(grep -- "--$flag " "$tmp/shared" | sed 's/^[^|]*| //' | sort -u | wc -l)
    [ "$n" -ge 2 ] || fail "--$flag: in $n components only"
    [ "$lines" = 1 ] || fail "--$flag: $lines different help lines: $(grep -- "--$flag " "$tmp/shared")"
done

# operator render: an invalid policy is bad input, one line naming the file and the field.
sed 's/^    strategy: single$/    strategy: bogus/' "$SRC/deploy/samples/clusterpolicy.yaml" >"$tmp/bad.yaml"
grep -q 'strategy: bogus' "$tmp/bad.yaml" || fail "the sample policy has no mig.strategy to spoil"
"$gpuop" operator render --policy "$tmp/bad.yaml" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 2 ] || fail "render of an invalid policy: exit $rc, not 2"
[ "$(wc -l <"$tmp/err")" = 1 ] || fail "render of an invalid policy: not one line: $(cat "$tmp/err")"
grep -q "$tmp/bad.yaml: .*spec.mig.strategy" "$tmp/err" ||
    fail "render of an invalid policy: the file or the field not named: $(cat "$tmp/err")"
[ -s "$tmp/out" ] && fail "render of an invalid policy printed objects"
"$gpuop" operator render --policy "$tmp/none.yaml" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q "none.yaml" "$tmp/err" || fail "render of a missing file: exit $rc: $(cat "$tmp/err")"
"$gpuop" operator render >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q -- "--policy" "$tmp/err" || fail "render without --policy: exit $rc: $(cat "$tmp/err")"
"$gpuop" operator render --policy "$SRC/deploy/samples/clusterpolicy.yaml" >"$tmp/out" 2>"$tmp/err" ||
    fail "render of the sample: exit $?: $(cat "$tmp/err")"
python3 -c 'import json,sys; assert len(json.load(open(sys.argv[1]))) > 10' "$tmp/out" ||
    fail "render of the sample: not a JSON list of objects"

[ $failures = 0 ] || exit 1
echo "ok: $helps --help pages, unknown commands refused, shared flags alike, render's bad input"
