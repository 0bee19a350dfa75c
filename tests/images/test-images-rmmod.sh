#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The simulated rmmod on a node root: a module not loaded is refused; nvidia is refused while a
# module using it is loaded ("in use by") and while a CUDA workload holds a GPU ("in use"), and
# the GPUs keep working; once free, the modules go in dependency order and NVML sees no driver;
# a driver container started afterwards cleans the driver root rmmod left and loads again.
# An NVML client holds the module from nvmlInit to nvmlShutdown (as its open /dev/nvidia* holds a
# real one): rmmod and the driver container's unload are refused while it does; its shutdown,
# or its end (a SIGKILL) frees the module; a client initialising after the unload finds no
# driver.
. "$(dirname "$0")/lib.sh"

# nvml_client NAME: a process that initialises NVML, shuts it down on the first line of its
# fifo $T/NAME.in and exits on the second; its log says what nvmlInit and nvmlShutdown returned.
# A sanitizer build of the library (make check-asan) needs its runtime preloaded into python.
SAN_PRELOAD=$(ldd "$GPUOP_NVML_LIBRARY" 2>/dev/null | awk '/lib(asan|ubsan)\.so/ {print $3}' | xargs)
nvml_client() {
    mkfifo "$T/$1.in"
    LD_PRELOAD="$SAN_PRELOAD" ASAN_OPTIONS=detect_leaks=0 python3 -c '
import ctypes, os, sys
nvml = ctypes.CDLL(os.environ["GPUOP_NVML_LIBRARY"])
print("nvmlInit", nvml.nvmlInit_v2(), flush=True)
sys.stdin.readline()
print("nvmlShutdown", nvml.nvmlShutdown(), flush=True)
sys.stdin.readline()
' <>"$T/$1.in" >"$T/$1.log" 2>&1 &
    LAST=$!
    pids+=("$LAST")
}

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

# an NVML client holds the module: the driver container's unload and rmmod are refused
nvml_client holder
HOLDER=$LAST
wait_log "$T/holder.log" "nvmlInit 0"
kill -TERM "$DRIVER"
wait_exit "$DRIVER"
[ $RC = 1 ] || fail "the unload under an NVML client exited $RC, not 1"
grep -qF "rmmod: ERROR: Module nvidia is in use" "$T/driver2.log" || fail "no rmmod message"
expect_file /sys/module/nvidia/version
"$BIN/rmmod" nvidia_modeset nvidia_uvm || fail "rmmod nvidia_modeset nvidia_uvm"
"$BIN/rmmod" nvidia >"$T/rm3.log" 2>&1 && fail "rmmod nvidia under an NVML client succeeded"
grep -qx "rmmod: ERROR: Module nvidia is in use" "$T/rm3.log" || fail "in use: $(cat "$T/rm3.log")"
"$BIN/nvidia-smi" -L >/dev/null 2>&1 || fail "nvidia-smi after the refused rmmod"
# nvmlShutdown releases it (the process lives on); a second client holds it until its SIGKILL
echo >"$T/holder.in"
wait_log "$T/holder.log" "nvmlShutdown 0"
kill -0 "$HOLDER" || fail "the client ended after nvmlShutdown"
nvml_client killed
KILLED=$LAST
wait_log "$T/killed.log" "nvmlInit 0"
"$BIN/rmmod" nvidia >"$T/rm4.log" 2>&1 && fail "rmmod nvidia under the second client succeeded"
grep -qx "rmmod: ERROR: Module nvidia is in use" "$T/rm4.log" || fail "in use: $(cat "$T/rm4.log")"
kill -KILL "$KILLED"
wait "$KILLED" 2>/dev/null
"$BIN/rmmod" nvidia || fail "rmmod nvidia after the clients let go"
expect_no_file /sys/module/nvidia
nvml_client late
wait_log "$T/late.log" "nvmlInit 9" # NVML_ERROR_DRIVER_NOT_LOADED

bg driver3 "$BIN/nvidia-driver" init
DRIVER=$LAST
wait_log "$T/driver3.log" "Done, now waiting for signal"
"$BIN/nvidia-smi" -L >/dev/null 2>&1 || fail "nvidia-smi after the second reload"
kill -TERM "$DRIVER"
wait_exit "$DRIVER"
[ $RC = 0 ] || fail "the unload exited $RC"
echo "ok"
