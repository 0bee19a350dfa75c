#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The simulated driver container's kernel modules, as the driver pod's settings ask for them
# (docs/operator.md, "Driver settings"): on a B200 node (Blackwell) the proprietary modules fail
# with the kernel's message and modprobe's and nothing is loaded, auto and open load the open
# modules (/proc/driver/nvidia/version says so); on a V100 node the open modules fail (no GSP)
# and auto loads the proprietary ones; a bad KERNEL_MODULE_TYPE is refused naming it; with
# GPU_DIRECT_RDMA_ENABLED nvidia-peermem loads beside nvidia, the sidecar's probe sees it, its
# reload brings it back, and the unload removes it.
. "$(dirname "$0")/lib.sh"
export GPUOP_SIM_IMAGE=nvcr.io/nvidia/driver:570.133.20-ubuntu22.04
export GPUOP_SIM_FLEET=$FLEETS/dgx-b200.yaml

# run_init NAME [VAR=VALUE...]: nvidia-driver init in the background with those variables
run_init() {
    local name=$1
    shift
    bg "$name" env "$@" "$BIN/nvidia-driver" init
    DRIVER=$LAST
}
stop_driver() {
    kill -TERM "$DRIVER"
    wait_exit "$DRIVER"
    [ "$RC" = 0 ] || fail "the driver's unload exited $RC: $(tail -3 "$T/$1.log")"
    expect_no_file /sys/module/nvidia/version
}

# B200, proprietary: refused by every GPU, nothing loaded, the kernel's lines in the log
run_init prop KERNEL_MODULE_TYPE=proprietary
wait_exit "$DRIVER" 10
[ "$RC" = 1 ] || fail "proprietary modules on B200: exit $RC, not 1"
grep -qF "NVRM: The NVIDIA GPU 0000:18:00.0 (PCI ID: 10de:2901)" "$T/prop.log" ||
    fail "no NVRM line naming the GPU: $(tail -5 "$T/prop.log")"
grep -qF "NVRM: installed in this system requires use of the NVIDIA open kernel modules." \
    "$T/prop.log" || fail "no open-modules line: $(tail -5 "$T/prop.log")"
grep -qF "modprobe: ERROR: could not insert 'nvidia': No such device" "$T/prop.log" ||
    fail "no modprobe error: $(tail -3 "$T/prop.log")"
tail -1 "$T/prop.log" | grep -qF "requires use of the NVIDIA open kernel modules." ||
    fail "the reason is not the last line (the termination message): $(tail -1 "$T/prop.log")"
expect_no_file /sys/module/nvidia/version
"$BIN/nvidia-smi" >/dev/null 2>&1 && fail "nvidia-smi works after a refused load"

# B200, auto (and the CRD's default, unset): the open modules
for kmt in auto ""; do
    run_init "auto$kmt" KERNEL_MODULE_TYPE="$kmt"
    wait_log "$T/auto$kmt.log" "Done, now waiting for signal"
    grep -qx "Kernel module type: open" "$T/auto$kmt.log" || fail "auto on B200 did not pick open"
    grep -q "^NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.20 " \
        "$ROOT/proc/driver/nvidia/version" || fail "/proc/driver/nvidia/version: not the open modules"
    "$BIN/nvidia-smi" -L | grep -q "^GPU 7: NVIDIA B200" || fail "nvidia-smi on B200"
    stop_driver "auto$kmt"
done

# a bad value: refused, naming it
run_init bad KERNEL_MODULE_TYPE=Open
wait_exit "$DRIVER" 10
[ "$RC" = 1 ] || fail "KERNEL_MODULE_TYPE=Open: exit $RC"
grep -qF 'KERNEL_MODULE_TYPE "Open": expected auto, open or proprietary' "$T/bad.log" ||
    fail "the refusal: $(cat "$T/bad.log")"

# V100 (no GSP): open refused with the kernel's GSP lines; auto loads the proprietary modules
export GPUOP_SIM_FLEET=$FLEETS/dgx1-v100.yaml
run_init v100open KERNEL_MODULE_TYPE=open
wait_exit "$DRIVER" 10
[ "$RC" = 1 ] || fail "open modules on V100: exit $RC"
grep -qF "NVRM: installed in this system is not supported by open" "$T/v100open.log" ||
    fail "no GSP line: $(tail -5 "$T/v100open.log")"
run_init v100auto KERNEL_MODULE_TYPE=auto
wait_log "$T/v100auto.log" "Done, now waiting for signal"
grep -qx "Kernel module type: proprietary" "$T/v100auto.log" || fail "auto on V100"
grep -q "^NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20 " \
    "$ROOT/proc/driver/nvidia/version" || fail "/proc/driver/nvidia/version on V100"
stop_driver v100auto

# GPUDirect RDMA: nvidia-peermem with the driver, the sidecar's probe and reload
export GPUOP_SIM_FLEET=$FLEETS/dgx-b200.yaml
"$BIN/nvidia-driver" probe_nvidia_peermem && fail "peermem probe succeeded with no driver"
run_init rdma GPU_DIRECT_RDMA_ENABLED=true
wait_log "$T/rdma.log" "Done, now waiting for signal"
grep -qx "+ modprobe nvidia-peermem" "$T/rdma.log" || fail "no modprobe nvidia-peermem"
expect_file /sys/module/nvidia_peermem/initstate
"$BIN/nvidia-driver" probe_nvidia_peermem || fail "peermem probe failed with the module loaded"
bg reload "$BIN/nvidia-driver" reload_nvidia_peermem
RELOAD=$LAST
rm -r "$ROOT/sys/module/nvidia_peermem" # as a MOFED reinstall unloads it
wait_for 5 "the sidecar to load nvidia-peermem again" test -e "$ROOT/sys/module/nvidia_peermem/initstate"
kill -TERM "$RELOAD"
wait_exit "$RELOAD"
[ "$RC" = 0 ] || fail "reload_nvidia_peermem on SIGTERM: exit $RC"
stop_driver rdma
expect_no_file /sys/module/nvidia_peermem
"$BIN/nvidia-driver" probe_nvidia_peermem && fail "peermem probe succeeded after the unload"
echo "PASS driver modules: open/proprietary by GPU, peermem"
