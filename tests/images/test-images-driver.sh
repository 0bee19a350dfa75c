#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The simulated driver container end to end on a node root: no driver, then `nvidia-driver init`
# builds for SIM_DRIVER_BUILD_SECONDS, loads and lays out the driver root; nvidia-smi works
# through it (its compute-policy time slices set and listed per GPU);
# SIGTERM while a CUDA workload holds a GPU is refused as rmmod refuses and the
# driver stays; a restarted container unloads and reloads; SIGTERM without a workload unloads.
. "$(dirname "$0")/lib.sh"

"$BIN/nvidia-smi" >"$T/smi0.log" 2>&1
rc=$?
[ $rc = 9 ] || fail "nvidia-smi without a driver exited $rc, not 9"
grep -qF "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." \
    "$T/smi0.log" || fail "nvidia-smi's no-driver text: $(cat "$T/smi0.log")"

export SIM_DRIVER_BUILD_SECONDS=1
start=$(date +%s%N)
bg driver "$BIN/nvidia-driver" init
DRIVER=$LAST
wait_log "$T/driver.log" "Compiling NVIDIA driver kernel modules..."
"$BIN/nvidia-smi" >/dev/null 2>&1 && fail "nvidia-smi succeeded while the driver builds"
wait_log "$T/driver.log" "Done, now waiting for signal"
took=$((($(date +%s%N) - start) / 1000000))
[ $took -ge 1000 ] || fail "the build took $took ms, less than SIM_DRIVER_BUILD_SECONDS=1"
grep -qF "Starting installation of NVIDIA driver version 550.127.05 for Linux kernel version $KERNEL" \
    "$T/driver.log" || fail "no installation line"

# the layout
expect_file /sys/module/nvidia/version
expect_file /sys/module/nvidia/refcnt
expect_file /sys/module/nvidia_uvm/refcnt
expect_file /sys/module/nvidia_modeset/refcnt
expect_file /run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127.05
expect_file /run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
expect_file /run/nvidia/driver/usr/bin/nvidia-smi
[ "$(cat "$ROOT/sys/module/nvidia/version")" = 550.127.05 ] || fail "module version"
grep -q "^NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05 " \
    "$ROOT/proc/driver/nvidia/version" || fail "/proc/driver/nvidia/version"
[ "$(cat "$ROOT/run/nvidia/nvidia-driver.pid")" = "$DRIVER" ] || fail "pid file"
# the device nodes, in the driver root's /dev (as root: mknod needs CAP_MKNOD)
if [ "$(id -u)" = 0 ]; then
    nodes=$(cd "$ROOT/run/nvidia/driver/dev" && stat -c '%n %F %t:%T' nvidiactl nvidia3 nvidia-uvm 2>&1)
    [ "$nodes" = "nvidiactl character special file c3:ff
nvidia3 character special file c3:3
nvidia-uvm character special file 1fe:0" ] || fail "the driver's device nodes: $nodes"
    expect_no_file /run/nvidia/driver/dev/nvidia4
fi

# nvidia-smi, ours and the driver root's (as the validator runs it, with that root's library)
"$BIN/nvidia-smi" >"$T/smi1.log" 2>&1 || fail "nvidia-smi after the load: $(cat "$T/smi1.log")"
grep -qF "Driver Version: 550.127.05     CUDA Version: 12.4" "$T/smi1.log" ||
    fail "nvidia-smi's header: $(head -4 "$T/smi1.log")"
[ "$(grep -c "NVIDIA L4  " "$T/smi1.log")" = 4 ] || fail "nvidia-smi lists 4 L4s"
GPUOP_NVML_LIBRARY=$ROOT/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127.05 \
    "$ROOT/run/nvidia/driver/usr/bin/nvidia-smi" -L >"$T/smi2.log" 2>&1 ||
    fail "the driver root's nvidia-smi -L: $(cat "$T/smi2.log")"
grep -q "^GPU 3: NVIDIA L4 (UUID: GPU-" "$T/smi2.log" || fail "nvidia-smi -L: $(cat "$T/smi2.log")"
"$BIN/nvidia-smi" --version | grep -qx "NVML version        : 550.127" || fail "nvidia-smi --version"
out=$("$BIN/nvidia-smi" --query-gpu=driver_version --format=csv,noheader | sort -u)
[ "$out" = 550.127.05 ] || fail "--query-gpu=driver_version: $out"

# compute-policy: the GPUs' time slice set (one GPU or all) and listed back from the fleet's state
"$BIN/nvidia-smi" compute-policy -l >"$T/cp0.log" || fail "compute-policy -l: $(cat "$T/cp0.log")"
[ "$(grep -c ": timeslice DEFAULT$" "$T/cp0.log")" = 4 ] || fail "the default time slices: $(cat "$T/cp0.log")"
uuid1=$("$BIN/nvidia-smi" -L | sed -n 's/^GPU 1: .*(UUID: \(GPU-[^)]*\))$/\1/p')
[ -n "$uuid1" ] || fail "GPU 1's UUID"
"$BIN/nvidia-smi" compute-policy -i "$uuid1" --set-timeslice 3 >/dev/null || fail "--set-timeslice 3"
"$BIN/nvidia-smi" compute-policy -l -i 1 | grep -qx "GPU 1 ($uuid1): timeslice LONG" ||
    fail "GPU 1 after --set-timeslice 3: $("$BIN/nvidia-smi" compute-policy -l)"
[ "$("$BIN/nvidia-smi" compute-policy -l | grep -c ": timeslice DEFAULT$")" = 3 ] ||
    fail "the other GPUs changed: $("$BIN/nvidia-smi" compute-policy -l)"
"$BIN/nvidia-smi" compute-policy --set-timeslice=1 >/dev/null || fail "--set-timeslice=1 (all)"
[ "$("$BIN/nvidia-smi" compute-policy -l | grep -c ": timeslice SHORT$")" = 4 ] ||
    fail "every GPU short: $("$BIN/nvidia-smi" compute-policy -l)"
for bad in "--set-timeslice 4" "--set-timeslice" "-l --set-timeslice 1" "" "--bogus"; do
    # shellcheck disable=SC2086
    "$BIN/nvidia-smi" compute-policy $bad >/dev/null 2>&1
    rc=$?
    [ $rc = 2 ] || fail "compute-policy $bad exited $rc, not 2"
done
"$BIN/nvidia-smi" compute-policy -i GPU-nope --set-timeslice 2 >/dev/null
[ $? = 6 ] || fail "compute-policy on an unknown GPU did not exit 6"
"$BIN/nvidia-smi" compute-policy --set-timeslice 0 >/dev/null || fail "--set-timeslice 0"

# a workload on GPU 1: the unload is refused, the driver stays, the GPUs keep working
SIM_WORKLOAD_SECONDS=30 NVIDIA_VISIBLE_DEVICES=1 bg sample "$BIN/cuda-sample"
SAMPLE=$LAST
wait_log "$T/sample.log" "CUDA kernel launch with 196 blocks of 256 threads"
"$BIN/nvidia-smi" | grep -q "cuda-sample" || fail "nvidia-smi does not show the workload"
kill -TERM "$DRIVER"
wait_exit "$DRIVER"
[ $RC = 1 ] || fail "the refused unload exited $RC, not 1"
grep -qF "rmmod: ERROR: Module nvidia is in use" "$T/driver.log" || fail "no rmmod message"
expect_file /sys/module/nvidia/version
"$BIN/nvidia-smi" -L >/dev/null || fail "nvidia-smi fails after the refused unload"

# restarted (as the kubelet restarts it) while the workload runs: it cannot reload either
bg driver2 "$BIN/nvidia-driver" init
wait_exit "$LAST"
[ $RC = 1 ] || fail "a restart with the GPU held exited $RC, not 1"
grep -qF "Could not unload NVIDIA driver kernel modules, driver is in use" "$T/driver2.log" ||
    fail "restart message"
kill -TERM "$SAMPLE"
wait_exit "$SAMPLE"

# restarted with the GPUs free: unloads the earlier run's driver and loads its own
export DRIVER_VERSION=570.86.15
bg driver3 "$BIN/nvidia-driver" init
DRIVER=$LAST
wait_log "$T/driver3.log" "Done, now waiting for signal"
grep -qF "Unloading NVIDIA driver kernel modules..." "$T/driver3.log" || fail "no unload first"
[ "$(cat "$ROOT/sys/module/nvidia/version")" = 570.86.15 ] || fail "reloaded version"
expect_no_file /run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127.05
"$BIN/nvidia-smi" | grep -qF "Driver Version: 570.86.15      CUDA Version: 12.8" ||
    fail "nvidia-smi after the reload"

# SIGTERM with nothing on the GPUs: a clean unload
kill -TERM "$DRIVER"
wait_exit "$DRIVER"
[ $RC = 0 ] || fail "the clean unload exited $RC"
expect_no_file /sys/module/nvidia/version
expect_no_file /sys/module/nvidia
expect_no_file /proc/driver/nvidia/version
expect_no_file /run/nvidia/driver/usr
expect_no_file /run/nvidia/driver/.sim-loaded-by-container
expect_no_file /run/nvidia/driver/dev
expect_no_file /run/nvidia/nvidia-driver.pid
"$BIN/nvidia-smi" >/dev/null 2>&1
[ $? = 9 ] || fail "nvidia-smi after the unload"
echo PASS
