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
. "$SRC/tests/lib/test-lib.sh"

# The names listed under a title ("Components:", "Commands:") up to the next blank line.
section() { awk -v t="$1" '$0 == t {on = 1; next} on && /^$/ {exit} on {print $1}'; }

helps=0
# check_help WORDS...: `gpuop WORDS --help`, then every command it lists, the same way.
check_help() {
    local out="$T/help" rc
    "$gpuop" "$@" --help >"$out" 2>"$T/err"
    rc=$?
    helps=$((helps + 1))
    if [ $rc != 0 ]; then
        fail_later "gpuop $* --help: exit $rc: $(cat "$T/err")"
        return
    fi
    head -1 "$out" | grep -q "^Usage: gpuop $* " || fail_later "gpuop $* --help: no Usage line: $(head -1 "$out")"
    grep -q -- '-h, --help' "$out" || fail_later "gpuop $* --help: no -h, --help"
    grep -E -- '--(kubeconfig|context) ' "$out" | sed "s/^/$* | /" >>"$T/shared" || true
    local cmds
    cmds=$(section "Commands:" <"$out")
    [ -z "$cmds" ] && return
    grep -q "gpuop $* COMMAND --help" "$out" || fail_later "gpuop $* --help: no word on a command's help"
    "$gpuop" "$@" no-such-command >/dev/null 2>"$T/err"
    rc=$?
    [ $rc = 2 ] || fail_later "gpuop $* no-such-command: exit $rc, not 2"
    [ "$(wc -l <"$T/err")" = 1 ] || fail_later "gpuop $* no-such-command: not one line: $(cat "$T/err")"
    grep -q 'unknown command ".*no-such-command"' "$T/err" ||
        fail_later "gpuop $* no-such-command: $(cat "$T/err")"
    local c
    for c in $cmds; do
        grep -q "\b$c\b" "$T/err" || fail_later "gpuop $* no-such-command: \"$c\" not named: $(cat "$T/err")"
    done
    for c in $cmds; do
        check_help "$@" "$c"
    done
}

"$gpuop" --help >"$T/top" || fail_later "gpuop --help: exit $?"
components=$(section "Components:" <"$T/top")
[ "$(echo "$components" | wc -l)" -ge 15 ] || fail_later "gpuop --help lists too few components: $components"
: >"$T/shared"
for c in $components; do
    [ "$c" = version ] && continue
    check_help "$c"
done
"$gpuop" version >/dev/null || fail_later "gpuop version: exit $?"
"$gpuop" no-such-component 2>/dev/null
[ $? = 2 ] || fail_later "gpuop no-such-component: exit not 2"

# The commands this tree has (a missing one is a regression, not a skip).
for want in "mig-parted apply" "mig-parted assert" "mig-parted export" "toolkit cdi generate" \
    "toolkit cdi list" "operator render"; do
    grep -q "^Usage: gpuop $want" <("$gpuop" $want --help 2>&1) || fail_later "no command gpuop $want"
done

# A shared flag reads the same everywhere (defined once, src/lib/svc/svc-fragments.c).
for flag in kubeconfig context; do
    n=$(grep -c -- "--$flag " "$T/shared")
    lines=$(grep -- "--$flag " "$T/shared" | sed 's/^[^|]*| //' | sort -u | wc -l)
    [ "$n" -ge 2 ] || fail_later "--$flag: in $n components only"
    [ "$lines" = 1 ] || fail_later "--$flag: $lines different help lines: $(grep -- "--$flag " "$T/shared")"
done

# operator render: an invalid policy is bad input, one line naming the file and the field.
sed 's/^    strategy: single$/    strategy: bogus/' "$SRC/deploy/samples/clusterpolicy.yaml" >"$T/bad.yaml"
grep -q 'strategy: bogus' "$T/bad.yaml" || fail_later "the sample policy has no mig.strategy to spoil"
"$gpuop" operator render --policy "$T/bad.yaml" >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 2 ] || fail_later "render of an invalid policy: exit $rc, not 2"
[ "$(wc -l <"$T/err")" = 1 ] || fail_later "render of an invalid policy: not one line: $(cat "$T/err")"
grep -q "$T/bad.yaml: .*spec.mig.strategy" "$T/err" ||
    fail_later "render of an invalid policy: the file or the field not named: $(cat "$T/err")"
[ -s "$T/out" ] && fail_later "render of an invalid policy printed objects"
"$gpuop" operator render --policy "$T/none.yaml" >/dev/null 2>"$T/err"
rc=$?
[ $rc = 2 ] && grep -q "none.yaml" "$T/err" || fail_later "render of a missing file: exit $rc: $(cat "$T/err")"
"$gpuop" operator render >/dev/null 2>"$T/err"
rc=$?
[ $rc = 2 ] && grep -q -- "--policy" "$T/err" || fail_later "render without --policy: exit $rc: $(cat "$T/err")"
"$gpuop" operator render --policy "$SRC/deploy/samples/clusterpolicy.yaml" >"$T/out" 2>"$T/err" ||
    fail_later "render of the sample: exit $?: $(cat "$T/err")"
python3 -c 'import json,sys; assert len(json.load(open(sys.argv[1]))) > 10' "$T/out" ||
    fail_later "render of the sample: not a JSON list of objects"

[ $FAILURES = 0 ] || exit 1
echo "ok: $helps --help pages, unknown commands refused, shared flags alike, render's bad input"
