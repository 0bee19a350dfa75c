#!/usr/bin/env bash
# build/gpuop validator against temp node roots with the simulated NVML (sim/fleets) and
# kubesim: the driver check on a host driver, a containerized driver and none; bad input (one
# line, exit 2, no file written); the modules the driver container enabled (nvidia_fs, gdrdrv)
# and their ready files; --wait that polls without spinning; the plugin check against
# the Node's allocatable, with the Event and the annotation; all-done.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
GPUOP=${1:-$B/gpuop}
SIMLIB=${2:-$B/libnvidia-ml.so.1}
CUDALIB=${3:-$B/libcuda.so.1}
FLEET=$S/sim/fleets/dgx-h100.yaml

# A node root: R/, its validations and driver folders.
new_root() {
    local r=$T/$1
    rm -rf "$r"
    mkdir -p "$r/etc" "$r/run/nvidia/validations"
    echo "$r"
}
# The host driver kubelet-sim lays out for a node with hostDriver.
host_driver() {
    mkdir -p "$1/sys/module/nvidia" "$1/usr/lib/x86_64-linux-gnu" "$1/usr/bin"
    echo 550.127.05 >"$1/sys/module/nvidia/version"
    ln -sf "$SIMLIB" "$1/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
    printf '#!/bin/sh\nexit 0\n' >"$1/usr/bin/nvidia-smi"
    chmod 755 "$1/usr/bin/nvidia-smi"
}
# The driver container's root (sim/images: what nvidia-driver init lays out).
ctr_driver() {
    local d=$1/run/nvidia/driver
    mkdir -p "$1/sys/module/nvidia" "$d/usr/lib/x86_64-linux-gnu" "$d/usr/bin"
    echo 570.86.15 >"$1/sys/module/nvidia/version"
    cp "$SIMLIB" "$d/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.86.15"
    ln -sf libnvidia-ml.so.570.86.15 "$d/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
    printf '#!/bin/sh\nexit 0\n' >"$d/usr/bin/nvidia-smi"
    chmod 755 "$d/usr/bin/nvidia-smi"
}
# val ROOT STATE ARGS...: the validator on that node root, NVML simulated with the fleet.
val() {
    local r=$1 st=$2
    shift 2
    env -u GPUOP_NVML_LIBRARY -u GPUOP_CUDA_LIBRARY -u KUBECONFIG -u NODE_NAME GPUOP_SIM_FLEET="$FLEET" \
        GPUOP_SIM_STATE="$st" GPUOP_SIM_ROOT="$r" timeout 60 "$GPUOP" validator --host-root="$r" \
        --driver-install-dir="$r/run/nvidia/driver" --validations-dir="$r/run/nvidia/validations" \
        --interval=200ms "$@"
}
# expect RC LOG CMD...: runs CMD with stderr to LOG, checks the exit status.
expect() {
    local want=$1 log=$2 rc=0
    shift 2
    "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" = "$want" ] || fail "exit $rc, want $want: $* ($(cat "$log"))"
}
one_line() { # LOG TEXT: the error is one line, the last, and names TEXT
    [ "$(grep -c ' error ' "$1")" = 1 ] || fail "not one error line: $(cat "$1")"
    tail -n1 "$1" | grep -q ' error ' || fail "the error is not the last line: $(cat "$1")"
    tail -n1 "$1" | grep -qF -- "$2" || fail "the line does not name '$2': $(cat "$1")"
}
gpuop_pid() { # ROOT: the gpuop validator process working on that node root
    local p
    for p in $(pgrep -f -- "--host-root=$1 " || true); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = gpuop ] && echo "$p" && return 0
    done
}
no_temps() { # DIR: nothing half-written (no dot-prefixed temp file) is left
    if ls -A "$1" | grep -Ev '^\.(driver|toolkit)-ctr-ready$' | grep -q '^\.'; then
        fail "temp file left in $1: $(ls -A "$1")"
    fi
}

echo "== bad input"
R=$(new_root bad)
expect 2 "$T/bad1.log" val "$R" "$T/st0" --component=bogus
one_line "$T/bad1.log" bogus
expect 2 "$T/bad2.log" val "$R" "$T/st0" --component=driver --host-root="$T/no-such-root"
one_line "$T/bad2.log" "$T/no-such-root"
echo x >"$T/a-file"
expect 2 "$T/bad3.log" val "$R" "$T/st0" --component=driver --validations-dir="$T/a-file"
one_line "$T/bad3.log" "$T/a-file"
expect 2 "$T/bad4.log" val "$R" "$T/st0"
one_line "$T/bad4.log" "--component"
expect 2 "$T/bad5.log" val "$R" "$T/st0" --component=driver --interval=1ms
one_line "$T/bad5.log" "--interval"
expect 2 "$T/bad6.log" val "$R" "$T/st0" --component=plugin
one_line "$T/bad6.log" "--node-name"
[ -z "$(ls -A "$R/run/nvidia/validations")" ] || fail "bad input wrote a file"

echo "== driver: none"
expect 1 "$T/none.log" val "$R" "$T/st0" --component=driver
one_line "$T/none.log" "no driver"
[ ! -e "$R/run/nvidia/validations/driver-ready" ] || fail "driver-ready without a driver"

echo "== driver: the host's"
H=$(new_root host)
host_driver "$H"
expect 0 "$T/host.log" val "$H" "$T/st1" --component=driver
grep -q 'driver validated.*source=host' "$T/host.log" || fail "no success line: $(cat "$T/host.log")"
printf 'IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/\nDRIVER_ROOT_CTR_PATH=%s\nNVIDIA_DEV_ROOT=/\nDEV_ROOT_CTR_PATH=%s\n' \
    "$H" "$H" >"$T/want-host"
diff -u "$T/want-host" "$H/run/nvidia/validations/driver-ready" || fail "driver-ready differs"
no_temps "$H/run/nvidia/validations"
# the expected version, checked; a failure removes the status file
expect 1 "$T/ver.log" val "$H" "$T/st1" --component=driver --driver-version=570.86.15
one_line "$T/ver.log" "driver version 550.127.05, expected 570.86.15"
[ ! -e "$H/run/nvidia/validations/driver-ready" ] || fail "driver-ready kept after a failure"
expect 0 "$T/ver2.log" val "$H" "$T/st1" --component=driver --driver-version=550.127.05
# the PCI devices the node has: one of 8 GPUs does not answer NVML
for i in 1 2 3 4 5 6 7 8 9; do
    d=$T/sysfs/bus/pci/devices/0000:0$i:00.0
    mkdir -p "$d"
    echo 0x10de >"$d/vendor"
    echo 0x030200 >"$d/class"
done
d=$T/sysfs/bus/pci/devices/0000:0a:00.0 # an NVSwitch bridge: not a GPU
mkdir -p "$d" && echo 0x10de >"$d/vendor" && echo 0x068000 >"$d/class"
expect 1 "$T/pci.log" val "$H" "$T/st1" --component=driver --sysfs-root="$T/sysfs"
one_line "$T/pci.log" "NVML lists 8 GPUs but the node has 9 NVIDIA PCI devices"
rm -rf "$T/sysfs/bus/pci/devices/0000:09:00.0"
expect 0 "$T/pci2.log" val "$H" "$T/st1" --component=driver --sysfs-root="$T/sysfs"
# a lost GPU
GPUOP_SIM_FLEET=$FLEET GPUOP_SIM_STATE=$T/st-lost GPUOP_NVML_LIBRARY=$SIMLIB \
    "$GPUOP-sim" inject lost --gpu 2 >/dev/null 2>&1 || fail "sim inject lost"
expect 1 "$T/lost.log" val "$H" "$T/st-lost" --component=driver
one_line "$T/lost.log" "1 of 8 GPUs are lost"
# a status file that cannot be written: an error, nothing half-written
rm -f "$H/run/nvidia/validations/driver-ready"
mkdir "$H/run/nvidia/validations/driver-ready"
expect 1 "$T/unw.log" val "$H" "$T/st1" --component=driver
one_line "$T/unw.log" "driver-ready"
no_temps "$H/run/nvidia/validations"
rmdir "$H/run/nvidia/validations/driver-ready"

echo "== driver: the containerized one"
C=$(new_root ctr)
ctr_driver "$C"
expect 0 "$T/ctr.log" val "$C" "$T/st2" --component=driver
printf 'IS_HOST_DRIVER=false\nNVIDIA_DRIVER_ROOT=%s\nDRIVER_ROOT_CTR_PATH=%s\nNVIDIA_DEV_ROOT=/\nDEV_ROOT_CTR_PATH=%s\n' \
    "$C/run/nvidia/driver" "$C/run/nvidia/driver" "$C" >"$T/want-ctr"
diff -u "$T/want-ctr" "$C/run/nvidia/validations/driver-ready" || fail "driver-ready differs"
# the modules the driver container enabled (its startup probe's .driver-ctr-ready)
VC=$C/run/nvidia/validations
printf 'GPU_DIRECT_RDMA_ENABLED=\nGDS_ENABLED=true\nGDRCOPY_ENABLED=true\n' >"$VC/.driver-ctr-ready"
mkdir -p "$C/sys/module/gdrdrv"
expect 1 "$T/mod1.log" val "$C" "$T/st2" --component=driver
one_line "$T/mod1.log" "module nvidia_fs (GPUDirect Storage, GDS_ENABLED) is not loaded (the driver pod's nvidia-fs-ctr loads it)"
grep -q "gdrdrv" "$T/mod1.log" && fail "gdrdrv named though loaded: $(cat "$T/mod1.log")"
[ ! -e "$VC/driver-ready" ] || fail "driver-ready kept with nvidia_fs missing"
[ ! -e "$VC/gdrcopy-ready" ] || fail "gdrcopy-ready written by a failed check"
mkdir -p "$C/sys/module/nvidia_fs"
expect 0 "$T/mod2.log" val "$C" "$T/st2" --component=driver
grep -q 'driver validated.*rdma=false gds=true gdrcopy=true' "$T/mod2.log" || fail "$(cat "$T/mod2.log")"
for f in driver-ready nvidia-fs-ready gdrcopy-ready; do
    [ -e "$VC/$f" ] || fail "no $f"
done
[ ! -e "$VC/nvidia-peermem-ready" ] || fail "nvidia-peermem-ready without RDMA"
no_temps "$VC"
# GDS switched off: its file goes at the next pass
printf 'GPU_DIRECT_RDMA_ENABLED=\nGDS_ENABLED=\nGDRCOPY_ENABLED=true\n' >"$VC/.driver-ctr-ready"
expect 0 "$T/mod3.log" val "$C" "$T/st2" --component=driver
[ ! -e "$VC/nvidia-fs-ready" ] || fail "nvidia-fs-ready kept after GDS was switched off"
[ -e "$VC/gdrcopy-ready" ] || fail "gdrcopy-ready gone"
rm -rf "$C/sys/module/nvidia_fs" "$C/sys/module/gdrdrv" "$VC/.driver-ctr-ready" "$VC/gdrcopy-ready"

echo "== cuda"
expect 0 "$T/host4.log" val "$H" "$T/st1" --component=driver
expect 1 "$T/cuda0.log" val "$H" "$T/st1" --component=cuda
one_line "$T/cuda0.log" "libcuda.so.1 is not under the driver root $H"
ln -sf "$CUDALIB" "$H/usr/lib/x86_64-linux-gnu/libcuda.so.1"
expect 0 "$T/cuda.log" val "$H" "$T/st1" --component=cuda
grep -q 'cuda validated devices=8' "$T/cuda.log" || fail "no CUDA line: $(cat "$T/cuda.log")"
[ -e "$H/run/nvidia/validations/cuda-ready" ] || fail "no cuda-ready"
expect 1 "$T/cuda2.log" val "$H" "$T/st-lost" --component=cuda
one_line "$T/cuda2.log" "cuda: CUDA check:"
[ ! -e "$H/run/nvidia/validations/cuda-ready" ] || fail "cuda-ready kept after a failure"
rm -f "$H/run/nvidia/validations/driver-ready"
expect 1 "$T/cuda3.log" val "$H" "$T/st1" --component=cuda
one_line "$T/cuda3.log" "driver-ready is missing"

echo "== toolkit"
expect 0 "$T/host5.log" val "$H" "$T/st1" --component=driver
VD=$H/run/nvidia/validations
printf 'RUNTIME=docker\nRUNTIME_CONFIG=/etc/docker/daemon.json\nCDI_SPEC=/var/run/cdi/nvidia.yaml\nTOOLKIT_INSTALL_DIR=/usr/local/nvidia\n' \
    >"$VD/.toolkit-ctr-ready"
# /var/run is a link to /run on the host: the spec is read inside the host root
mkdir -p "$H/etc/docker" "$H/run/cdi" "$H/var"
ln -s /run "$H/var/run"
printf '{"runtimes": {"nvidia": {"path": "/usr/local/nvidia/gpuop-runtime", "args": []}}}\n' \
    >"$H/etc/docker/daemon.json"
expect 1 "$T/tk0.log" val "$H" "$T/st1" --component=toolkit
one_line "$T/tk0.log" "$H/run/cdi/nvidia.yaml"
printf 'cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [name: {\n' >"$H/run/cdi/nvidia.yaml"
expect 1 "$T/tk1.log" val "$H" "$T/st1" --component=toolkit
one_line "$T/tk1.log" "CDI spec \"$H/run/cdi/nvidia.yaml\" does not parse"
no_temps "$VD"
# a spec naming every GPU but the last, by index and UUID
uuids=$(GPUOP_SIM_FLEET=$FLEET GPUOP_SIM_STATE=$T/st1 GPUOP_NVML_LIBRARY=$SIMLIB "$GPUOP" inventory --json |
    /usr/bin/python3 -c 'import json,sys; print(" ".join(g["uuid"] for g in json.load(sys.stdin)["gpus"]))')
spec() { # N: a spec with the first N GPUs
    local i=0
    printf 'cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ncontainerEdits:\n  deviceNodes: [{path: /dev/nvidiactl}]\ndevices:\n'
    for u in $uuids; do
        [ $i -lt "$1" ] || break
        printf -- '- name: "%d"\n  containerEdits: {deviceNodes: [{path: /dev/nvidia%d}]}\n' $i $i
        printf -- '- name: %s\n  containerEdits: {deviceNodes: [{path: /dev/nvidia%d}]}\n' "$u" $i
        i=$((i + 1))
    done
}
spec 7 >"$H/run/cdi/nvidia.yaml"
expect 1 "$T/tk2.log" val "$H" "$T/st1" --component=toolkit
one_line "$T/tk2.log" "lacks 2 devices: 7, $(echo $uuids | awk '{print $8}')"
spec 8 >"$H/run/cdi/nvidia.yaml"
expect 1 "$T/tk3.log" val "$H" "$T/st1" --component=toolkit
one_line "$T/tk3.log" "docker is not configured for GPUs"
printf '{"runtimes": {"nvidia": {"path": "/usr/local/nvidia/gpuop-runtime", "args": []}}, "features": {"cdi": true}}\n' \
    >"$H/etc/docker/daemon.json"
expect 0 "$T/tk4.log" val "$H" "$T/st1" --component=toolkit
grep -q 'toolkit validated runtime=docker' "$T/tk4.log" || fail "no toolkit line: $(cat "$T/tk4.log")"
[ -e "$VD/toolkit-ready" ] || fail "no toolkit-ready"
rm -f "$VD/toolkit-ready" "$VD/cuda-ready"

echo "== --wait polls without spinning"
W=$(new_root wait)
val "$W" "$T/st3" --component=driver --wait --interval=1s >"$T/wait.log" 2>&1 &
wpid=$!
pids+=($wpid)
sleep 3
kill -0 $wpid 2>/dev/null || fail "--wait exited without a driver: $(cat "$T/wait.log")"
[ "$(grep -c 'retrying' "$T/wait.log")" = 1 ] || fail "not one line per reason: $(cat "$T/wait.log")"
vpid=$(gpuop_pid "$W")
[ -n "$vpid" ] || fail "no gpuop validator process for $W"
ticks=$(awk '{print $14 + $15}' "/proc/$vpid/stat")
[ "$ticks" -lt 50 ] || fail "--wait used $ticks CPU ticks in 3 s: it spins"
host_driver "$W"
wait_for 10 "--wait to pass once the driver is there" test -s "$W/run/nvidia/validations/driver-ready"
rc=0
wait $wpid || rc=$?
[ "$rc" = 0 ] || fail "--wait exit $rc: $(cat "$T/wait.log")"

echo "== all-done"
expect 1 "$T/ad.log" val "$H" "$T/st1" --component=all-done
one_line "$T/ad.log" "toolkit-ready, cuda-ready, plugin-ready"
expect 0 "$T/host3.log" val "$H" "$T/st1" --component=driver
for f in toolkit-ready cuda-ready plugin-ready; do : >"$H/run/nvidia/validations/$f"; done
# --once, the validator pod's readiness probe: one look, no wait
expect 0 "$T/ad-once.log" val "$H" "$T/st1" --component=all-done --once
rm "$H/run/nvidia/validations/plugin-ready"
expect 1 "$T/ad-once2.log" val "$H" "$T/st1" --component=all-done --once
one_line "$T/ad-once2.log" "plugin-ready"
# a node without the device plugin (DRA): all-done needs no plugin-ready
expect 0 "$T/ad-once3.log" val "$H" "$T/st1" --component=all-done --once --without-plugin
: >"$H/run/nvidia/validations/plugin-ready"
: >"$H/run/nvidia/validations/.toolkit-ctr-ready"
val "$H" "$T/st1" --component=all-done >"$T/ad2.log" 2>&1 &
apid=$!
pids+=($apid)
wait_for 10 "all-done's line" grep -q 'all validations are successful' "$T/ad2.log"
kill -0 $apid 2>/dev/null || fail "all-done did not wait for a signal"
adpid=$(gpuop_pid "$H")
[ -n "$adpid" ] || fail "no gpuop validator process for $H"
kill -TERM "$adpid"
rc=0
wait $apid || rc=$?
[ "$rc" = 0 ] || fail "all-done exit $rc on SIGTERM: $(cat "$T/ad2.log")"
# stopped, it takes the checks' files with it (no stale success), not the containers' markers
for f in driver-ready toolkit-ready cuda-ready plugin-ready; do
    [ -e "$H/run/nvidia/validations/$f" ] && fail "all-done stopped, $f stayed"
done
[ -e "$H/run/nvidia/validations/.toolkit-ctr-ready" ] || fail "all-done stopped, the toolkit's marker went"
rm "$H/run/nvidia/validations/.toolkit-ctr-ready"
expect 0 "$T/host4.log" val "$H" "$T/st1" --component=driver

echo "== toolkit-ready: the operands' init-container wait (no host root needed)"
TR="$GPUOP validator --component=toolkit-ready --host-root=/nonexistent --interval=200ms"
TRDIR=$T/tr/run/nvidia/validations
expect 1 "$T/tr1.log" $TR --validations-dir="$TRDIR"
one_line "$T/tr1.log" "waiting for toolkit-ready in $TRDIR"
# a long --interval: the file wakes the wait through inotify, not the next poll
$TR --interval=60s --validations-dir="$TRDIR" --wait >"$T/tr2.log" 2>&1 &
trpid=$!
pids+=($trpid)
sleep 0.5
kill -0 $trpid 2>/dev/null || fail "the toolkit-ready wait ended before the file: $(cat "$T/tr2.log")"
: >"$TRDIR/toolkit-ready"
for _ in $(seq 60); do kill -0 $trpid 2>/dev/null || break; sleep 0.05; done
kill -0 $trpid 2>/dev/null && fail "the toolkit-ready wait still runs 3 s after the file (interval 60 s)"
rc=0
wait $trpid || rc=$?
[ "$rc" = 0 ] || fail "the toolkit-ready wait exit $rc: $(cat "$T/tr2.log")"
ls -A "$TRDIR" | grep -qvx toolkit-ready && fail "the toolkit-ready wait wrote files: $(ls -A "$TRDIR")"

echo "== the API server: plugin, Events, annotations"
need_tools
need_built "$B/kubesim"
start_kubesim --load "$S/sim/clusters/demo.yaml"
N=dgx-h100-1
api() { val "$@" --kubeconfig="$KUBECONFIG" --node-name=$N --namespace=gpu-operator; }
ann() { $K get node $N -o "jsonpath={.metadata.annotations.validation\.gpuop\.dev/$1}"; }
alloc() {
    $K patch node $N --subresource=status --type=merge \
        -p "{\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"$1\"}}}" >/dev/null
}
# no GPUs advertised yet: the plugin check waits, then passes once all 8 are
api "$H" "$T/st1" --component=plugin --timeout=30s >"$T/plugin.log" 2>&1 &
ppid=$!
pids+=($ppid)
sleep 1
kill -0 $ppid 2>/dev/null || fail "the plugin check did not wait: $(cat "$T/plugin.log")"
grep -q 'nvidia.com/gpu: 0 of 8 advertised' "$T/plugin.log" || fail "no shortfall line: $(cat "$T/plugin.log")"
ann plugin | grep -q '"state":"waiting"' || fail "annotation not waiting: $(ann plugin)"
alloc 8
rc=0
wait $ppid || rc=$?
[ "$rc" = 0 ] || fail "plugin exit $rc: $(cat "$T/plugin.log")"
[ -e "$H/run/nvidia/validations/plugin-ready" ] || fail "no plugin-ready"
ann plugin | grep -q '"state":"ok"' || fail "annotation not ok: $(ann plugin)"
# a lost GPU the node no longer advertises: named, within the timeout, Event and annotation
alloc 7
expect 1 "$T/plugin2.log" api "$H" "$T/st-lost" --component=plugin --timeout=1s
grep -c . "$T/plugin2.log" >/dev/null
tail -n1 "$T/plugin2.log" | grep -q 'nvidia.com/gpu: 7 of 8 advertised; GPU.* (lost)' ||
    fail "the shortfall is not named: $(cat "$T/plugin2.log")"
[ ! -e "$H/run/nvidia/validations/plugin-ready" ] || fail "plugin-ready kept after a failure"
ann plugin | grep -q '"state":"failed"' || fail "annotation not failed: $(ann plugin)"
$K get events -A -o json | grep -q '"reason": "ValidationFailed"' || fail "no ValidationFailed Event"
$K get events -A -o json | grep -q 'plugin: the node advertises fewer GPUs' || fail "the Event lacks the reason"
# the driver check waits for the driver container's marker when a driver DaemonSet exists
$K get namespace gpu-operator >/dev/null 2>&1 || $K create namespace gpu-operator >/dev/null
cat <<EOF | $K apply -f - >/dev/null
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nvidia-driver-daemonset
  namespace: gpu-operator
  labels: {app: nvidia-driver-daemonset, app.kubernetes.io/component: nvidia-driver}
spec:
  selector: {matchLabels: {app: nvidia-driver-daemonset}}
  template:
    metadata: {labels: {app: nvidia-driver-daemonset}}
    spec:
      nodeSelector: {nvidia.com/gpu.deploy.driver: "true"}
      containers: [{name: c, image: gpuop:test}]
EOF
C2=$(new_root ctr2)
ctr_driver "$C2"
api "$C2" "$T/st2" --component=driver --wait >"$T/dwait.log" 2>&1 &
dpid=$!
pids+=($dpid)
wait_for 10 "the marker wait" grep -q 'driver-ctr-ready' "$T/dwait.log"
ann driver | grep -q '"state":"waiting"' || fail "driver annotation not waiting: $(ann driver)"
: >"$C2/run/nvidia/validations/.driver-ctr-ready"
rc=0
wait $dpid || rc=$?
[ "$rc" = 0 ] || fail "driver exit $rc: $(cat "$T/dwait.log")"
grep -q IS_HOST_DRIVER=false "$C2/run/nvidia/validations/driver-ready" || fail "not the container's"
ann driver | grep -q '"state":"ok"' || fail "driver annotation not ok: $(ann driver)"
echo "PASS"
