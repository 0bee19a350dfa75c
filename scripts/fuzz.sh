#!/usr/bin/env bash
# fuzz.sh [SECONDS]: builds every libFuzzer target with clang (ASan+UBSan) and runs each for
# SECONDS (default 15) from a copy of its committed corpus, FUZZ_JOBS targets at a time. Any crash, leak or sanitizer report
# fails. New inputs stay in build-fuzz/corpus/<target> (not committed).
# FUZZ_SEED=N (CI sets 1) makes a run repeatable: the same seed explores the same inputs, so a
# gate run finds nothing a developer's identical run did not; unset, each run explores anew.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-15}
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
ninja -C build-fuzz gpuop-tomlx.so $(printf 'tests/fuzz/fuzz-%s ' "${names[@]}") >/dev/null
export GPUOP_TOMLX_MODULE=$PWD/build-fuzz/gpuop-tomlx.so
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
