#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The simulated CUDA workload: vectorAdd's output, NVIDIA_VISIBLE_DEVICES forms, its entry in
# NVML's running processes while it runs, and CUDA's errors without a driver or a device.
. "$(dirname "$0")/lib.sh"

"$BIN/cuda-sample" >"$T/nodrv.log" 2>&1
rc=$?
[ $rc = 1 ] || fail "without a driver it exited $rc"
grep -qxF "Failed to allocate device vector A (error code CUDA driver version is insufficient for CUDA runtime version)!" \
    "$T/nodrv.log" || fail "no-driver text: $(cat "$T/nodrv.log")"

DRIVER_VERSION=550.127.05 "$BIN/nvidia-driver" host-install >/dev/null || fail "host-install"

for v in "" none void GPU-does-not-exist 9; do
    NVIDIA_VISIBLE_DEVICES=$v "$BIN/cuda-sample" >"$T/nodev.log" 2>&1
    rc=$?
    [ $rc = 1 ] || fail "NVIDIA_VISIBLE_DEVICES=\"$v\" exited $rc"
    grep -qxF "Failed to allocate device vector A (error code no CUDA-capable device is detected)!" \
        "$T/nodev.log" || fail "no-device text for \"$v\": $(cat "$T/nodev.log")"
done

uuid=$("$BIN/nvidia-smi" --query-gpu=uuid --format=csv,noheader | sed -n 3p)
for v in all 0 "1,2" "$uuid"; do
    NVIDIA_VISIBLE_DEVICES=$v "$BIN/cuda-sample" >"$T/ok.log" 2>&1 ||
        fail "NVIDIA_VISIBLE_DEVICES=\"$v\": $(cat "$T/ok.log")"
done
cat >"$T/want" <<'OUT'
[Vector addition of 50000 elements]
Copy input data from the host memory to the CUDA device
CUDA kernel launch with 196 blocks of 256 threads
Copy output data from the CUDA device to the host memory
Test PASSED
Done
OUT
diff "$T/want" "$T/ok.log" || fail "the sample's output differs"

# while it runs it holds its GPUs (GPU 2 by UUID); afterwards nothing does
NVIDIA_VISIBLE_DEVICES=$uuid SIM_WORKLOAD_SECONDS=30 bg run "$BIN/cuda-sample"
RUN=$LAST
wait_log "$T/run.log" "CUDA kernel launch"
"$BIN/nvidia-smi" >"$T/smi.log"
grep -qE "^\|    2   N/A  N/A +$RUN +C   cuda-sample +256MiB \|$" "$T/smi.log" ||
    fail "the process on GPU 2: $(tail -5 "$T/smi.log")"
[ "$(grep -c cuda-sample "$T/smi.log")" = 1 ] || fail "listed on other GPUs"
"$GPUOP-sim" show | grep -qx "  process $RUN, 256 MiB" || fail "gpuop-sim show lacks the process"
kill -TERM "$RUN"
wait_exit "$RUN"
[ $RC = 143 ] || fail "SIGTERM: exit $RC, not killed by the signal"
"$BIN/nvidia-smi" | grep -qF "No running processes found" || fail "still listed after SIGTERM"

# a run of SIM_WORKLOAD_SECONDS ends by itself with exit 0
start=$(date +%s%N)
NVIDIA_VISIBLE_DEVICES=0 SIM_WORKLOAD_SECONDS=0.5 "$BIN/cuda-sample" >/dev/null || fail "timed run"
took=$((($(date +%s%N) - start) / 1000000))
[ $took -ge 500 ] || fail "the run took $took ms"
echo PASS
