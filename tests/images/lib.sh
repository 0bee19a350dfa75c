# SPDX-License-Identifier: Apache-2.0
# Shared by the simulated images' shell tests (sourced). Arguments of the test: BIN_DIR (the
# build/sim-image-bin folder), LIBNVIDIA_ML, FLEETS_DIR, GPUOP. Sets up a node root $ROOT in a scratch
# folder $T (removed at exit, with every process started by bg), the environment kubelet-sim
# gives a container of that node, and helpers.
set -u
BIN=$1
export GPUOP_NVML_LIBRARY=$2
FLEETS=$3
GPUOP=$4
T=$(mktemp -d)
ROOT=$T/root
KERNEL=5.15.0-127-generic
mkdir -p "$ROOT/usr/src/linux-headers-$KERNEL"
export GPUOP_SIM_ROOT=$ROOT GPUOP_SIM_FLEET=$FLEETS/pcie-l4.yaml GPUOP_SIM_STATE=$T/state
export GPUOP_SIM_KERNEL=$KERNEL GPUOP_SIM_IMAGE=nvcr.io/nvidia/driver:550.127.05-ubuntu22.04
export SIM_DRIVER_BUILD_SECONDS=0.2
unset DRIVER_VERSION NVIDIA_VISIBLE_DEVICES SIM_WORKLOAD_SECONDS GPUOP_SIM_CLOCK
PIDS=
cleanup() {
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    for f in "$T"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -30 "$f"; }; done
    exit 1
}
# bg NAME CMD...: runs CMD in the background, output in $T/NAME.log; sets LAST.
bg() {
    local name=$1
    shift
    "$@" >"$T/$name.log" 2>&1 &
    LAST=$!
    PIDS="$PIDS $LAST"
}
# wait_log FILE TEXT [SECONDS]: until FILE holds TEXT (default 5 s).
wait_log() {
    local i
    for i in $(seq $((${3:-5} * 20))); do
        grep -qF -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    fail "no \"$2\" in $1 after ${3:-5} s"
}
# wait_exit PID [SECONDS]: waits for a background process to end; sets RC.
wait_exit() {
    local i
    for i in $(seq $((${2:-5} * 20))); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.05
    done
    kill -0 "$1" 2>/dev/null && fail "process $1 still runs after ${2:-5} s"
    wait "$1"
    RC=$?
}
expect_file() { [ -e "$ROOT$1" ] || fail "missing $1 in the node root"; }
expect_no_file() { [ ! -e "$ROOT$1" ] || fail "$1 is still in the node root"; }
