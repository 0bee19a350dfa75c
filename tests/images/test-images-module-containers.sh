#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The driver pod's module containers, simulated (sim/images/modules.c): NVIDIA's wait loop as the
# operator renders it (the driver root's usr/src and `lsmod | grep nvidia`) through the simulated
# lsmod; nvidia-gds-driver and nvidia-gdrcopy-driver load nvidia_fs and gdrdrv beside the
# driver with their log lines, lsmod lists them, rmmod refuses nvidia while they are loaded, a
# signal unloads them; a module in use is not unloaded; a driver without its kernel sources
# (SIM_DRIVER_SOURCES=false, as a precompiled image) is refused, naming the folder, nothing
# loaded; the driver's own unload takes them with it.
. "$(dirname "$0")/lib.sh"
export GPUOP_SIM_FLEET=$FLEETS/dgx-h100.yaml
export PATH="$BIN:$PATH" # the container's PATH: the simulated lsmod first
VERSION=550.127.05

# the operator's command line for the container (deploy/operands/driver.yaml), with the driver
# root under the node root and a shorter sleep
wait_and_install() {
    exec bash -c "until [ -d '$ROOT/run/nvidia/driver/usr/src' ] && lsmod | grep nvidia; do
        echo Waiting for nvidia-driver to be installed...; sleep 0.2; done; exec $1 install"
}
run_driver() {
    bg "$1" env "${@:2}" "$BIN/nvidia-driver" init
    DRIVER=$LAST
    wait_log "$T/$1.log" "Done, now waiting for signal"
}

lsmod | grep -q nvidia && fail "lsmod lists nvidia before any driver"
"$BIN/nvidia-gds-driver" 2>"$T/usage.log" && fail "nvidia-gds-driver without a command succeeded"
grep -q "install" "$T/usage.log" || fail "no usage: $(cat "$T/usage.log")"

# the containers start before the driver and wait for it
bg fs wait_and_install nvidia-gds-driver
FS=$LAST
bg gdr wait_and_install nvidia-gdrcopy-driver
GDR=$LAST
wait_log "$T/fs.log" "Waiting for nvidia-driver to be installed..."
expect_no_file /sys/module/nvidia_fs
run_driver driver
expect_file "/run/nvidia/driver/usr/src/nvidia-$VERSION"
wait_log "$T/fs.log" "Done, now waiting for signal"
wait_log "$T/gdr.log" "Done, now waiting for signal"
for line in "Unloading nvidia-fs kernel module" "Updating the package cache" \
    "Installing prerequisites" "Building and loading nvidia-fs kernel module" "+ modprobe nvidia_fs"; do
    grep -qxF "$line" "$T/fs.log" || fail "nvidia-fs-ctr's log lacks \"$line\": $(cat "$T/fs.log")"
done
grep -qxF "Building and loading gdrdrv kernel module" "$T/gdr.log" || fail "gdrdrv's log: $(cat "$T/gdr.log")"
expect_file /sys/module/nvidia_fs/initstate
expect_file /sys/module/gdrdrv/initstate
lsmod >"$T/lsmod"
head -1 "$T/lsmod" | grep -q "^Module  *Size  Used by$" || fail "lsmod's header: $(head -1 "$T/lsmod")"
for m in nvidia nvidia_fs gdrdrv nvidia_uvm; do
    grep -q "^$m " "$T/lsmod" || fail "lsmod does not list $m: $(cat "$T/lsmod")"
done
# the startup probes' commands
sh -c "lsmod | grep nvidia_fs" >/dev/null || fail "nvidia-fs-ctr's startup probe fails"
sh -c "lsmod | grep gdrdrv" >/dev/null || fail "nvidia-gdrcopy-ctr's startup probe fails"
# nvidia cannot go while they are loaded
"$BIN/rmmod" nvidia 2>"$T/rmmod.log" && fail "rmmod nvidia with nvidia_fs loaded succeeded"
grep -qF "rmmod: ERROR: Module nvidia is in use by: nvidia_modeset nvidia_uvm nvidia_fs gdrdrv" \
    "$T/rmmod.log" || fail "rmmod's refusal: $(cat "$T/rmmod.log")"

# a module in use stays (and its container says so), one not in use goes
echo 1 >"$ROOT/sys/module/gdrdrv/refcnt"
kill -TERM "$GDR"
wait_exit "$GDR"
[ "$RC" = 1 ] || fail "gdrdrv in use: exit $RC, not 1"
grep -qF "Could not unload gdrdrv kernel module, module is in use" "$T/gdr.log" || fail "$(tail -2 "$T/gdr.log")"
expect_file /sys/module/gdrdrv
echo 0 >"$ROOT/sys/module/gdrdrv/refcnt"
kill -TERM "$FS"
wait_exit "$FS"
[ "$RC" = 0 ] || fail "nvidia-fs-ctr on SIGTERM: exit $RC"
grep -qx "Caught signal" "$T/fs.log" || fail "no Caught signal"
expect_no_file /sys/module/nvidia_fs
# a container started again unloads what was left, then loads it again
bg gdr2 "$BIN/nvidia-gdrcopy-driver" install
GDR=$LAST
wait_log "$T/gdr2.log" "Done, now waiting for signal"
grep -qx "+ rmmod gdrdrv" "$T/gdr2.log" || fail "the left-over gdrdrv was not unloaded first"
# the driver's unload takes the modules of the pod with it
kill -TERM "$DRIVER"
wait_exit "$DRIVER"
[ "$RC" = 0 ] || fail "the driver's unload with gdrdrv loaded: exit $RC: $(tail -3 "$T/driver.log")"
expect_no_file /sys/module/gdrdrv
expect_no_file /sys/module/nvidia
expect_no_file "/run/nvidia/driver/usr/src/nvidia-$VERSION"
kill -TERM "$GDR"
wait_exit "$GDR"
[ "$RC" = 0 ] || fail "gdrdrv's container after the driver took its module: exit $RC"

# no driver loaded: refused
"$BIN/nvidia-gds-driver" install >"$T/nodrv.log" 2>&1 && fail "nvidia-fs loaded without a driver"
grep -qF "the NVIDIA driver is not loaded" "$T/nodrv.log" || fail "$(cat "$T/nodrv.log")"

# a driver without its sources: refused naming the folder, nothing loaded
run_driver nosrc SIM_DRIVER_SOURCES=false
expect_no_file "/run/nvidia/driver/usr/src/nvidia-$VERSION"
"$BIN/nvidia-gds-driver" install >"$T/nosrc-fs.log" 2>&1 && fail "nvidia-fs built without sources"
tail -1 "$T/nosrc-fs.log" | grep -qF "nvidia-gds-driver: no kernel sources of the NVIDIA driver $VERSION in /run/nvidia/driver/usr/src/nvidia-$VERSION to build nvidia_fs against" ||
    fail "the refusal is not the last line: $(cat "$T/nosrc-fs.log")"
expect_no_file /sys/module/nvidia_fs
kill -TERM "$DRIVER"
wait_exit "$DRIVER"
SIM_DRIVER_SOURCES=maybe "$BIN/nvidia-driver" init >"$T/badsrc.log" 2>&1 && fail "SIM_DRIVER_SOURCES=maybe accepted"
grep -qF 'SIM_DRIVER_SOURCES "maybe": expected true or false' "$T/badsrc.log" || fail "$(cat "$T/badsrc.log")"
echo "PASS module containers: nvidia_fs and gdrdrv loaded, listed, unloaded; no sources refused"
