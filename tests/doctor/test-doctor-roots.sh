#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpuop doctor on node-root fixtures, NVML simulated (build/libnvidia-ml.so.1 with a fleet file,
# the driver version from <root>/sys/module/nvidia/version): a host driver only, a containerized
# driver only, both, the leftovers of a host install after the switch to the operator, two
# device plugins for one resource, a runtime configured for another runtime than the node's,
# NVML failing while the device plugin reports healthy, and an unreadable node root. Each case
# checks the check's result and its evidence line (--json), and the exit status.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
GPUOP=$B/gpuop
SIMLIB=$B/libnvidia-ml.so.1
FLEET=$S/sim/fleets/dgx-h100.yaml
JQ=$(command -v jq) || skip "jq not installed"
PY=$(command -v python3) || skip "python3 not installed"
KERNEL=6.1.0-test
LIBDIR=usr/lib/x86_64-linux-gnu

# new_root NAME: a node with a kubelet, containerd, IOMMU in passthrough, the kernel's headers,
# a toolkit that left the runtime alone; no driver.
new_root() {
    local r=$T/$1
    mkdir -p "$r/etc" "$r/run/nvidia/validations" "$r/var/lib/kubelet/device-plugins" \
        "$r/proc/sys/kernel" "$r/sys/kernel/iommu_groups/0" "$r/sys/kernel/iommu_groups/1" \
        "$r/lib/modules/$KERNEL/build" "$r/run/containerd" "$r/$LIBDIR" "$r/usr/bin"
    echo "$KERNEL" >"$r/proc/sys/kernel/osrelease"
    echo "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro iommu=pt" >"$r/proc/cmdline"
    : >"$r/run/containerd/containerd.sock"
    echo "RUNTIME=none" >"$r/run/nvidia/validations/.toolkit-ctr-ready"
    echo "$r"
}
host_driver() { # ROOT VERSION
    mkdir -p "$1/sys/module/nvidia"
    echo "$2" >"$1/sys/module/nvidia/version"
    ln -sf "$SIMLIB" "$1/$LIBDIR/libnvidia-ml.so.$2"
    ln -sf "libnvidia-ml.so.$2" "$1/$LIBDIR/libnvidia-ml.so.1"
    printf '#!/bin/sh\nexit 0\n' >"$1/usr/bin/nvidia-smi"
    chmod 755 "$1/usr/bin/nvidia-smi"
}
ctr_driver() { # ROOT VERSION: what the driver container lays out
    local d=$1/run/nvidia/driver
    mkdir -p "$1/sys/module/nvidia" "$d/$LIBDIR" "$d/usr/bin"
    echo "$2" >"$1/sys/module/nvidia/version"
    ln -sf "$SIMLIB" "$d/$LIBDIR/libnvidia-ml.so.$2"
    ln -sf "libnvidia-ml.so.$2" "$d/$LIBDIR/libnvidia-ml.so.1"
    printf '#!/bin/sh\nexit 0\n' >"$d/usr/bin/nvidia-smi"
    chmod 755 "$d/usr/bin/nvidia-smi"
    : >"$1/run/nvidia/validations/.driver-ctr-ready"
}
# listen SOCKET...: Unix sockets something listens on (a device plugin), until the test ends
listen() {
    "$PY" -c 'import socket, sys, time
ss = []
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(); ss.append(s)
open(sys.argv[1] + ".up", "w").close()
time.sleep(300)' "$@" &
    pids+=($!)
    wait_for 10 "sockets listening" test -e "$1.up"
    rm -f "$1.up"
}
# doctor ROOT [FLEET]: the report in $T/out.json, the exit status in $RC
doctor() {
    local r=$1 fleet=${2-$FLEET}
    RC=0
    env -u GPUOP_NVML_LIBRARY GPUOP_SIM_FLEET="$fleet" GPUOP_SIM_STATE="$r.state" \
        GPUOP_SIM_ROOT="$r" timeout 60 "$GPUOP" doctor --host-root="$r" --json \
        >"$T/out.json" 2>"$T/err.log" || RC=$?
    "$JQ" -e . "$T/out.json" >/dev/null || fail "$r: not JSON: $(cat "$T/out.json" "$T/err.log")"
    [ "$RC" = "$("$JQ" .exitStatus "$T/out.json")" ] || fail "$r: exit $RC, report says $("$JQ" .exitStatus "$T/out.json")"
    case $("$JQ" -r .worst "$T/out.json") in pass) [ "$RC" = 0 ] ;; warn) [ "$RC" = 3 ] ;; fail) [ "$RC" = 4 ] ;; esac ||
        fail "$r: exit $RC for worst $("$JQ" -r .worst "$T/out.json")"
}
# expect ID RESULT EVIDENCE-PART: the check's result and a part of its one evidence line
expect() {
    local got ev rem
    { IFS= read -r got; IFS= read -r ev; IFS= read -r rem; } < <("$JQ" -r --arg id "$1" \
        '.checks[] | select(.id == $id) | .result, (.evidence | gsub("\n"; "<NL>")), (.remedy | length)' \
        "$T/out.json")
    [ "$got" = "$2" ] || fail "$CASE: $1 is $got, want $2 ($ev)"
    [[ "$ev" == *"$3"* ]] || fail "$CASE: $1's evidence lacks '$3': $ev"
    [[ "$ev" != *"<NL>"* ]] || fail "$CASE: $1's evidence is not one line"
    [ "$2" = pass ] || [ "$rem" -gt 0 ] || fail "$CASE: $1 has no remedy"
    echo "  $CASE: $1 $2: $ev"
}

CASE=host-only
r=$(new_root host); host_driver "$r" 570.86.15
doctor "$r"
expect driver-owner pass "host: the host's driver ($r/usr/bin/nvidia-smi"
expect host-libraries pass "of the driver's version 570.86.15"
expect nvml pass "lists 8 GPUs"
expect firmware pass "driver 570.86.15 (kernel module and NVML agree); VBIOS 96.00.A5.00.01 on 8 GPUs"
expect kernel-headers pass "not needed: the host's driver"
expect dkms pass "no nvidia DKMS"
expect iommu pass "2 IOMMU groups, passthrough (iommu=pt)"
expect runtime pass "left the runtime alone"
[ "$("$JQ" -r .driver.owner "$T/out.json")" = host ] || fail "owner"

CASE=container-only
r=$(new_root ctr); ctr_driver "$r" 570.86.15
doctor "$r"
expect driver-owner pass "container: the containerized driver under /run/nvidia/driver ($r/run/nvidia/driver/$LIBDIR/libnvidia-ml.so.570.86.15)"
expect nvml pass "NVML 570.86.15 ($r/run/nvidia/driver/$LIBDIR/libnvidia-ml.so.1) lists 8 GPUs"
expect kernel-headers pass "kernel $KERNEL: headers at $r/lib/modules/$KERNEL/build"
expect host-libraries pass "no versioned NVIDIA library"

CASE=both
r=$(new_root both); ctr_driver "$r" 570.86.15; host_driver "$r" 570.86.15
doctor "$r"
expect driver-owner fail "both: a host install ($r/usr/bin/nvidia-smi"
[ "$RC" = 4 ] || fail "both: exit $RC, want 4"

CASE=leftovers
r=$(new_root left); ctr_driver "$r" 570.86.15
mkdir -p "$r/var/lib/dkms/nvidia/535.183.01" "$r/lib/modules/$KERNEL/updates/dkms" \
    "$r/etc/systemd/system/multi-user.target.wants" "$r/lib/systemd/system"
echo ELF >"$r/lib/modules/$KERNEL/updates/dkms/nvidia.ko"
echo ELF >"$r/$LIBDIR/libnvidia-ml.so.535.183.01"
echo ELF >"$r/$LIBDIR/libcuda.so.535.183.01"
echo "[Service]" >"$r/lib/systemd/system/nvidia-persistenced.service"
ln -s /lib/systemd/system/nvidia-persistenced.service \
    "$r/etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service"
doctor "$r"
expect driver-owner pass "container:"
expect dkms warn "2 nvidia DKMS item(s) left by a host install"
expect host-libraries warn "(version 535.183.01)"
expect persistenced warn "nvidia-persistenced.service is enabled while the driver is containerized"
rm -f "$r/etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service"
doctor "$r"
expect persistenced warn "is present while the driver is containerized"

CASE=two-plugins
r=$(new_root plugins); ctr_driver "$r" 570.86.15
listen "$r/var/lib/kubelet/device-plugins/nvidia.sock" "$r/var/lib/kubelet/device-plugins/nvidia-gpu.sock"
doctor "$r"
expect device-plugins fail "two device plugins serve nvidia.com/gpu"
CASE=one-plugin-and-a-stale-socket
r=$(new_root plugin1); ctr_driver "$r" 570.86.15
listen "$r/var/lib/kubelet/device-plugins/nvidia-gpu.sock"
: >"$r/var/lib/kubelet/device-plugins/nvidia-mig-1g.10gb.sock"
doctor "$r"
expect device-plugins warn "nvidia-gpu.sock (nvidia.com/gpu); stale socket nvidia-mig-1g.10gb.sock"

CASE=runtime-mismatch
r=$(new_root rt); ctr_driver "$r" 570.86.15
rm -rf "$r/run/containerd"; mkdir -p "$r/run/crio"; : >"$r/run/crio/crio.sock"
printf 'RUNTIME=containerd\nRUNTIME_NAME=nvidia\n' >"$r/run/nvidia/validations/.toolkit-ctr-ready"
doctor "$r"
expect runtime fail "the node runs cri-o but the policy's default runtime is containerd"
CASE=runtime-not-configured
r=$(new_root rt2); ctr_driver "$r" 570.86.15
mkdir -p "$r/etc/containerd"; printf 'version = 2\n' >"$r/etc/containerd/config.toml"
printf 'RUNTIME=containerd\n' >"$r/run/nvidia/validations/.toolkit-ctr-ready"
doctor "$r"
expect runtime fail "containerd is not configured for GPUs"

CASE=nvml-failing-plugin-healthy
r=$(new_root nvmlfail); ctr_driver "$r" 570.86.15
listen "$r/var/lib/kubelet/device-plugins/nvidia-gpu.sock"
: >"$r/run/nvidia/validations/plugin-ready"
doctor "$r" ""
expect nvml fail "does not initialise"
expect plugin-vs-nvml fail "the device plugin reports healthy (nvidia-gpu.sock) but NVML does not initialise"
expect firmware warn "not read: NVML does not initialise"

CASE=driver-library-mismatch
r=$(new_root mism); host_driver "$r" 570.86.15
echo ELF >"$r/$LIBDIR/libnvidia-ml.so.550.127.05"
doctor "$r"
expect host-libraries fail "libnvidia-ml.so.550.127.05 is version 550.127.05, the driver is 570.86.15"

CASE=iommu-translated
r=$(new_root iommu); host_driver "$r" 570.86.15
echo "BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on" >"$r/proc/cmdline"
doctor "$r"
expect iommu warn "2 IOMMU groups in translated mode"

CASE=no-headers
r=$(new_root nohdr); ctr_driver "$r" 570.86.15
rm -rf "$r/lib/modules/$KERNEL/build"
doctor "$r"
expect kernel-headers warn "kernel $KERNEL: no headers under $r"

# An unreadable node root: said so, non-zero, no report
CASE=unreadable
rc=0; "$GPUOP" doctor --host-root="$T/missing" >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" = 1 ] || fail "missing root: exit $rc"
grep -q "node root unreadable: host root \"$T/missing\": No such file or directory" "$T/err" || fail "missing root: $(cat "$T/err")"
[ ! -s "$T/out" ] || fail "a report for a missing root"
: >"$T/afile"
rc=0; "$GPUOP" doctor --host-root="$T/afile" >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" = 1 ] && grep -q "not a folder" "$T/err" || fail "a file as root: exit $rc $(cat "$T/err")"
# the text report: one line per check, the remedy under each warning or failure
r=$T/both
GPUOP_SIM_FLEET=$FLEET GPUOP_SIM_ROOT=$r GPUOP_SIM_STATE=$r.state "$GPUOP" doctor --host-root="$r" >"$T/text" || true
grep -q '^FAIL  driver-owner    both: ' "$T/text" || fail "text: $(cat "$T/text")"
grep -A1 '^FAIL  driver-owner' "$T/text" | grep -q 'remedy: keep one driver' || fail "text remedy: $(cat "$T/text")"
echo "ok: gpuop doctor on node-root fixtures"
