#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The simulated driver container's failures, each with the real container's message and exit 1:
# no headers for the node's kernel, a driver already loaded on the host, a second instance, a
# SIGTERM during the build, an image that names no version.
. "$(dirname "$0")/lib.sh"

# no headers for the kernel /proc/version names (no GPUOP_SIM_KERNEL)
unset GPUOP_SIM_KERNEL
mkdir -p "$ROOT/proc"
echo "Linux version 6.8.0-44-generic (buildd@lcy02) (gcc 12.3.0) #44-Ubuntu SMP" >"$ROOT/proc/version"
"$BIN/nvidia-driver" init >"$T/headers.log" 2>&1
rc=$?
[ $rc = 1 ] || fail "missing headers exited $rc"
grep -qF "for Linux kernel version 6.8.0-44-generic" "$T/headers.log" || fail "kernel from /proc/version"
grep -qF "Could not resolve Linux kernel version" "$T/headers.log" || fail "headers message"
expect_no_file /sys/module/nvidia/version
expect_no_file /run/nvidia/driver/usr
export GPUOP_SIM_KERNEL=$KERNEL

# an image without a version and no DRIVER_VERSION
GPUOP_SIM_IMAGE=nvcr.io/nvidia/driver:latest "$BIN/nvidia-driver" init >"$T/version.log" 2>&1
[ $? = 1 ] || fail "no version accepted"
grep -qF "no driver version" "$T/version.log" || fail "version message"

# SIGTERM during the build: "Caught signal", exit 1, nothing loaded
SIM_DRIVER_BUILD_SECONDS=20 bg build "$BIN/nvidia-driver" init
wait_log "$T/build.log" "Compiling NVIDIA driver kernel modules..."
kill -TERM "$LAST"
wait_exit "$LAST" 2
[ $RC = 1 ] || fail "interrupted build exited $RC"
grep -qF "Caught signal" "$T/build.log" || fail "no Caught signal"
expect_no_file /sys/module/nvidia/version

# a second instance while one runs
bg first "$BIN/nvidia-driver" init
FIRST=$LAST
wait_log "$T/first.log" "Done, now waiting for signal"
"$BIN/nvidia-driver" init >"$T/second.log" 2>&1
[ $? = 1 ] || fail "a second instance did not fail"
grep -qF "An instance of the NVIDIA driver is already running, aborting" "$T/second.log" ||
    fail "second instance message"
kill -TERM "$FIRST"
wait_exit "$FIRST"
[ $RC = 0 ] || fail "first instance's unload exited $RC"

# a driver pre-installed on the host: the container refuses it and leaves it loaded
DRIVER_VERSION=535.216.03 "$BIN/nvidia-driver" host-install >"$T/host.log" 2>&1 ||
    fail "host-install"
expect_file /usr/bin/nvidia-smi
expect_file /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.216.03
"$BIN/nvidia-smi" | grep -qF "Driver Version: 535.216.03" || fail "host driver not seen"
"$BIN/nvidia-driver" init >"$T/hostdrv.log" 2>&1
[ $? = 1 ] || fail "the container started over a host driver"
grep -qF "Could not unload NVIDIA driver kernel modules, driver is in use" "$T/hostdrv.log" ||
    fail "host driver message"
[ "$(cat "$ROOT/sys/module/nvidia/version")" = 535.216.03 ] || fail "host driver touched"
expect_no_file /run/nvidia/driver/usr
echo PASS
