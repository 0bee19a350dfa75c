#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The simulated rmmod on a node root: a module not loaded is refused; nvidia is refused while a
# module using it is loaded ("in use by") and while a CUDA workload holds a GPU ("in use"), and
# the GPUs keep working; once free, the modules go in dependency order and NVML sees no driver;
# a driver container started afterwards cleans the driver root rmmod left and loads again.
. "$(dirname "$0")/lib.sh"

"$BIN/rmmod" nvidia >"$T/rm0.log" 2>&1 && fail "rmmod of a module not loaded succeeded"
grep -qx "rmmod: ERROR: Module nvidia is not currently loaded" "$T/rm0.log" ||
    fail "not loaded: $(cat "$T/rm0.log")"
env -u GPUOP_SIM_ROOT "$BIN/rmmod" nvidia >/dev/null 2>&1 && fail "rmmod without a node root"

bg driver "$BIN/nvidia-driver" init
DRIVER=$LAST
wait_log "$T/driver.log" "Done, now waiting for signal"
kill -KILL "$DRIVER" # the container is gone; its modules stay, as after a kill -9
wait "$DRIVER" 2>/dev/null

"$BIN/rmmod" nvidia >"$T/rm1.log" 2>&1 && fail "rmmod nvidia with nvidia_uvm loaded succeeded"
grep -qx "rmmod: ERROR: Module nvidia is in use by: nvidia_modeset nvidia_uvm" "$T/rm1.log" ||
    fail "in use by: $(cat "$T/rm1.log")"

SIM_WORKLOAD_SECONDS=30 NVIDIA_VISIBLE_DEVICES=0 bg sample "$BIN/cuda-sample"
SAMPLE=$LAST
wait_log "$T/sample.log" "CUDA kernel launch with 196 blocks of 256 threads"
"$BIN/rmmod" nvidia_modeset || fail "rmmod nvidia_modeset"
"$BIN/rmmod" nvidia_uvm || fail "rmmod nvidia_uvm"
expect_no_file /sys/module/nvidia_uvm
"$BIN/rmmod" nvidia >"$T/rm2.log" 2>&1 && fail "rmmod nvidia with a workload succeeded"
grep -qx "rmmod: ERROR: Module nvidia is in use" "$T/rm2.log" || fail "in use: $(cat "$T/rm2.log")"
expect_file /sys/module/nvidia/version
"$BIN/nvidia-smi" -L >/dev/null 2>&1 || fail "nvidia-smi after the refused rmmod"

kill -TERM "$SAMPLE"
wait "$SAMPLE" 2>/dev/null
"$BIN/rmmod" nvidia || fail "rmmod nvidia once free"
expect_no_file /sys/module/nvidia
expect_no_file /proc/driver/nvidia/version
"$BIN/nvidia-smi" >/dev/null 2>&1
[ $? = 9 ] || fail "nvidia-smi after rmmod: the driver should be gone"
expect_file /run/nvidia/driver/.sim-loaded-by-container # the driver root is not rmmod's

# a new driver container cleans what the old one left and loads
bg driver2 "$BIN/nvidia-driver" init
DRIVER=$LAST
wait_log "$T/driver2.log" "Done, now waiting for signal"
"$BIN/nvidia-smi" -L >/dev/null 2>&1 || fail "nvidia-smi after the reload"
kill -TERM "$DRIVER"
wait_exit "$DRIVER"
[ $RC = 0 ] || fail "the unload exited $RC"
echo "ok"
