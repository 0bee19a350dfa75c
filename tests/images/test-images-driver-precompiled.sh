#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The simulated driver container from a precompiled image (NVIDIA's tag <branch>-<kernel>-<os>,
# as the operator renders it with driver.usePrecompiled, docs/operator.md "Precompiled drivers"):
# on the node of its kernel it loads at once, without the kernel's headers and without
# compiling (a compiled image on the same node fails for want of headers, and a build would take
# SIM_DRIVER_BUILD_SECONDS); on a node of another kernel it refuses, saying which kernels, and
# loads nothing; its full version is the simulated node's driver of its branch, or
# DRIVER_VERSION (another branch's refused).
. "$(dirname "$0")/lib.sh"
PRE=nvcr.io/nvidia/driver:550-$KERNEL-ubuntu22.04
export SIM_DRIVER_BUILD_SECONDS=60
rm -rf "${ROOT:?}/usr/src/linux-headers-$KERNEL" # nothing to compile against

run_init() { # NAME IMAGE [VAR=VALUE...]
    local name=$1 image=$2
    shift 2
    bg "$name" env GPUOP_SIM_IMAGE="$image" "$@" "$BIN/nvidia-driver" init
    DRIVER=$LAST
}
stop_driver() {
    kill -TERM "$DRIVER"
    wait_exit "$DRIVER"
    [ "$RC" = 0 ] || fail "the driver's unload exited $RC: $(tail -3 "$T/$1.log")"
    expect_no_file /sys/module/nvidia/version
}
refused() { # NAME TEXT: the container ended 1 with TEXT on its last line, nothing loaded
    wait_exit "$DRIVER" 10
    [ "$RC" = 1 ] || fail "$1: exit $RC, not 1: $(tail -3 "$T/$1.log")"
    tail -1 "$T/$1.log" | grep -qF -- "$2" || fail "$1: last line: $(tail -1 "$T/$1.log")"
    expect_no_file /sys/module/nvidia/version
}

# the control: an image that compiles needs the headers
run_init compiled nvcr.io/nvidia/driver:550.127.05-ubuntu22.04
refused compiled "Could not resolve Linux kernel version"

# precompiled for the node's kernel: loaded without compiling, the fleet's 550 driver
run_init pre "$PRE"
wait_log "$T/pre.log" "Done, now waiting for signal" 10
grep -qF "Installing precompiled NVIDIA driver kernel modules for Linux kernel version $KERNEL" \
    "$T/pre.log" || fail "no precompiled install line: $(cat "$T/pre.log")"
! grep -qE "Compiling|kernel headers|Building NVIDIA driver package" "$T/pre.log" ||
    fail "the precompiled image compiled: $(grep -E "Compiling|headers|Building" "$T/pre.log")"
[ "$(cat "$ROOT/sys/module/nvidia/version")" = 550.127.05 ] ||
    fail "loaded version: $(cat "$ROOT/sys/module/nvidia/version")"
"$BIN/nvidia-smi" | grep -qF "Driver Version: 550.127.05" || fail "nvidia-smi with the precompiled driver"
stop_driver pre

# DRIVER_VERSION of the branch names the version; of another branch it is refused
run_init pre-env "$PRE" DRIVER_VERSION=550.144.03
wait_log "$T/pre-env.log" "Done, now waiting for signal" 10
[ "$(cat "$ROOT/sys/module/nvidia/version")" = 550.144.03 ] || fail "DRIVER_VERSION not used"
stop_driver pre-env
run_init pre-branch "$PRE" DRIVER_VERSION=570.86.15
refused pre-branch 'DRIVER_VERSION "570.86.15" is not of branch 550'
# a branch the simulated node has no driver of, without DRIVER_VERSION
run_init pre-other nvcr.io/nvidia/driver:570-$KERNEL-ubuntu22.04
refused pre-other "names driver branch 570 only"

# precompiled for another kernel than the node's: refused, naming both
run_init pre-kernel nvcr.io/nvidia/driver:550-6.8.0-45-generic-ubuntu22.04
refused pre-kernel "Kernel version mismatch: the precompiled modules of this driver image are for Linux kernel version 6.8.0-45-generic, this node runs $KERNEL"
! grep -qF "Compiling" "$T/pre-kernel.log" || fail "compiled on a refused kernel"
"$BIN/nvidia-smi" >/dev/null 2>&1
[ $? = 9 ] || fail "nvidia-smi works after a refused precompiled load"
echo PASS
