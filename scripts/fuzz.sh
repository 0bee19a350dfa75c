#!/usr/bin/env bash
# fuzz.sh [SECONDS [TARGET...]]: builds every libFuzzer target with clang (ASan+UBSan) in
# build-fuzz/ and runs each (or each TARGET named; the names are the first column of
# build-fuzz/tests/fuzz/fuzz-manifest.txt) for SECONDS (default 60) from a copy of its committed
# corpus, FUZZ_JOBS targets at a time (default: one per core). Any crash, leak or sanitizer
# report fails, and its input is kept as build-fuzz/<target>-crash-<sha1> (or -leak-, -timeout-).
# New inputs stay in build-fuzz/corpus/<target> (not committed).
# fuzz.sh minimize TARGET INPUT: minimises a crashing INPUT (libFuzzer's -minimize_crash) and
# copies the result into TARGET's committed corpus as crash-<sha1>, so that the replay test
# fuzz-corpus-TARGET (make check) fails until the bug is fixed, and guards it afterwards.
# `make fuzz` runs this; CI does not (every corpus replays in make check).
# FUZZ_SEED=N makes a run repeatable: the same seed explores the same inputs; unset, each run
# explores anew.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=run
if [ "${1:-}" = minimize ]; then
    [ $# = 3 ] || { echo "usage: fuzz.sh minimize TARGET INPUT"; exit 2; }
    MODE=minimize
    MIN_TARGET=$2
    MIN_INPUT=$(realpath "$3")
    set --
fi
SECS=${1:-60}
[ $# -gt 0 ] && shift
case $SECS in '' | *[!0-9]*) echo "fuzz: SECONDS must be a whole number, not \"$SECS\""; exit 2 ;; esac
command -v clang >/dev/null || { echo "fuzz: clang not found"; exit 1; }
if [ ! -f build-fuzz/build.ninja ]; then
    # Every library is instrumented for coverage (fuzzer-no-link) and sanitizers, not only the
    # targets' own files, so libFuzzer sees the parsers it feeds.
    # (C++: rtconfig's TOML module gpuop-tomlx.so, built with clang++ too so one sanitizer
    # runtime serves both; the targets load it from $GPUOP_TOMLX_MODULE.)
    CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=true -Dbuildtype=debug \
        -Db_sanitize=address,undefined -Db_lundef=false -Dc_args=-fsanitize=fuzzer-no-link \
        -Dcpp_args=-fsanitize=fuzzer-no-link >/dev/null
fi
meson setup --reconfigure build-fuzz >/dev/null
M=build-fuzz/tests/fuzz/fuzz-manifest.txt
[ -s "$M" ] || { echo "fuzz: no targets"; exit 1; }
mapfile -t names < <(awk 'NF {print $1}' "$M")
want=("$@")
[ "$MODE" = minimize ] && want=("$MIN_TARGET")
if [ ${#want[@]} -gt 0 ]; then
    for n in "${want[@]}"; do
        printf '%s\n' "${names[@]}" | grep -qxF -- "$n" ||
            { echo "fuzz: no target $n (the targets: ${names[*]})"; exit 2; }
    done
    names=("${want[@]}")
fi
ninja -C build-fuzz gpuop-tomlx.so $(printf 'tests/fuzz/fuzz-%s ' "${names[@]}") >/dev/null
export GPUOP_TOMLX_MODULE=$PWD/build-fuzz/gpuop-tomlx.so
if [ "$MODE" = minimize ]; then
    corpus=$(awk -v n="$MIN_TARGET" '$1 == n {print $2}' "$M")
    [ -n "$corpus" ] || { echo "fuzz: $MIN_TARGET has no committed corpus folder"; exit 2; }
    out=build-fuzz/$MIN_TARGET-minimized
    rm -f "$out"
    ./build-fuzz/tests/fuzz/fuzz-"$MIN_TARGET" -minimize_crash=1 -max_total_time="$SECS" \
        -exact_artifact_path="$out" "$MIN_INPUT" >build-fuzz/"$MIN_TARGET"-minimize.log 2>&1 || true
    # -minimize_crash writes nothing when INPUT does not crash
    [ -s "$out" ] || { echo "fuzz: $MIN_INPUT does not crash fuzz-$MIN_TARGET (build-fuzz/$MIN_TARGET-minimize.log)"; exit 1; }
    dest=$corpus/crash-$(sha1sum "$out" | cut -c1-40)
    cp "$out" "$dest"
    echo "fuzz: $(wc -c <"$MIN_INPUT") bytes minimised to $(wc -c <"$dest"): $dest"
    echo "fuzz: fix the bug until fuzz-corpus-$MIN_TARGET passes, then commit $dest with the fix"
    exit 0
fi
# Targets run FUZZ_JOBS at a time (default: one per core); each is one process, so the total
# time is about SECONDS x targets / jobs. Results print in the manifest's order.
JOBS=${FUZZ_JOBS:-$(nproc)}
run_one() { # NAME: one target's run; its result line in build-fuzz/NAME.result
    local name=$1 t=tests/fuzz/fuzz-$1 work=build-fuzz/corpus/$1 seed seedarg=()
    seed=$(awk -v n="$name" '$1 == n {print $2}' "$M")
    [ -n "${FUZZ_SEED:-}" ] && seedarg=(-seed="$FUZZ_SEED")
    rm -rf "$work" && mkdir -p "$work" && { [ -z "$seed" ] || cp "$seed"/* "$work"/; }
    if ./build-fuzz/"$t" "${seedarg[@]}" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix=build-fuzz/"$name"- "$work" >build-fuzz/"$name".log 2>&1; then
        echo "fuzz $name: ok ($(grep -Eo 'stat::number_of_executed_units: [0-9]+' build-fuzz/"$name".log | awk '{print $2}') runs in ${SECS}s)" >build-fuzz/"$name".result
    else
        { echo "fuzz $name: FAILED"; tail -n 30 build-fuzz/"$name".log; } >build-fuzz/"$name".result
    fi
}
running=0
for name in "${names[@]}"; do
    rm -f build-fuzz/"$name".result
    if [ "$running" -ge "$JOBS" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    run_one "$name" &
    running=$((running + 1))
done
wait
rc=0
for name in "${names[@]}"; do
    if [ -f build-fuzz/"$name".result ]; then
        cat build-fuzz/"$name".result
        head -n1 build-fuzz/"$name".result | grep -q ': ok (' || rc=1
    else
        echo "fuzz $name: no result"
        rc=1
    fi
done
exit $rc
