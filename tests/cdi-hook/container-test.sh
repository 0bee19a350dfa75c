#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The CDI spec's hooks in a real container: `gpuop toolkit cdi generate` writes the spec of a
# simulated node (pcie-l4, NVML simulated) whose driver keeps its libraries in
# /usr/lib/x86_64-linux-gnu/nvidia/current (Debian's packaging), and `gpuop runtime` in front of
# Debian's runc starts a container from an image whose loader does not search that folder: its
# libc is in /usr/lib64, its /etc/ld.so.conf lists /usr/lib64 only, its ld.so.cache was built so.
# The container runs a program linked against libcuda.so.1:
#   - spec without hooks (gpuop not installed where the hooks would run it): the program does
#     not start, libcuda.so.1 not found (what the hooks are for);
#   - spec with hooks (`gpuop cdi-hook`): it runs with the driver's libcuda, and libcuda.so (the
#     development link) is there;
#   - the image has CUDA forward-compatible libraries of a newer driver branch in
#     /usr/local/cuda/compat: the program runs with those;
#   - the image keeps ld.so.conf.d (included by its ld.so.conf): the drop-in lists the folders.
# Needs root, runc, a static busybox and the host's ldconfig; skips (77) saying which otherwise.
set -u
GPUOP=${1:?usage: container-test.sh gpuop libnvidia-ml.so.1 cuda-driver-stub cuda-compat-stub probe}
SIMLIB=$2
STUB=$3
COMPAT=$4
PROBE=$5
SRC=${GPUOP_SOURCE_ROOT:?}
. "$SRC/tests/lib/test-lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (runc creates namespaces)"
RUNC=$(command -v runc || true)
[ -n "$RUNC" ] || skip "runc not installed (make deps: Debian's runc)"
BUSYBOX=''
for b in /bin/busybox /usr/bin/busybox; do
    if [ -x "$b" ] && LC_ALL=C ldd "$b" 2>&1 | grep -q 'not a dynamic executable'; then
        BUSYBOX=$b
        break
    fi
done
[ -n "$BUSYBOX" ] || skip "no static busybox (make deps: busybox-static)"
LDCONFIG=''
for l in /sbin/ldconfig.real /sbin/ldconfig /usr/sbin/ldconfig; do
    [ -x "$l" ] && { LDCONFIG=$l; break; }
done
[ -n "$LDCONFIG" ] || skip "no ldconfig on this machine"
command -v python3 >/dev/null || skip "python3 missing"
LOADER=$(readlink -f /lib64/ld-linux-x86-64.so.2)
LIBC=$(LC_ALL=C ldd "$PROBE" | sed -n 's/^.*libc\.so\.6 => \([^ ]*\) .*$/\1/p')
[ -f "$LOADER" ] && [ -f "$LIBC" ] || skip "no x86_64 glibc loader and libc to copy"

ROOT=$T/runc-root
IDS=()
delete_containers() {
    local id
    for id in "${IDS[@]}"; do
        "$RUNC" --root "$ROOT" delete -f "$id" >/dev/null 2>&1
    done
}
at_exit delete_containers
log_file "$T/out" "$T/err" # the container's output and stderr

# ---- the node: a driver root whose libraries are in nvidia/current, a GPU's device node -------
FLEET=$SRC/sim/fleets/pcie-l4.yaml
V=$(sed -n 's/^driver_version: *"\([0-9.]*\)".*/\1/p' "$FLEET")
D=$T/driver
LIB=/usr/lib/x86_64-linux-gnu/nvidia/current
mkdir -p "$D$LIB" "$D/dev" "$T/cdi" "$T/install"
cp "$STUB" "$D$LIB/libcuda.so.$V" && ln -s "libcuda.so.$V" "$D$LIB/libcuda.so.1"
cp "$SIMLIB" "$D$LIB/libnvidia-ml.so.$V" && ln -s "libnvidia-ml.so.$V" "$D$LIB/libnvidia-ml.so.1"
mknod -m 0666 "$D/dev/nvidia0" c 195 0 || fail "mknod nvidia0"
mknod -m 0666 "$D/dev/nvidiactl" c 1 3 || fail "mknod nvidiactl"

generate() { # [--install-dir DIR]: the spec into $T/cdi/nvidia.yaml
    GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$FLEET GPUOP_SIM_STATE=$(mktemp -d "$T/state.XXXXXX") \
        "$GPUOP" toolkit cdi generate --driver-root "$D" --mig-minors /nonexistent "$@" \
        --output "$T/cdi/nvidia.yaml" 2>"$T/gen.err" || fail "cdi generate: $(cat "$T/gen.err")"
}

# ---- the image: busybox, glibc's loader and libc in /usr/lib64 only, the probe --------------
R=$T/bundle/rootfs
mkdir -p "$R/bin" "$R/usr/bin" "$R/usr/lib64" "$R/dev" "$R/proc" "$R/sys" "$R/tmp" "$R/etc"
ln -s usr/lib64 "$R/lib64"
cp "$BUSYBOX" "$R/bin/busybox"
for a in sh ls cat echo; do ln -s busybox "$R/bin/$a"; done
cp "$LOADER" "$R/usr/lib64/ld-linux-x86-64.so.2"
cp "$LIBC" "$R/usr/lib64/libc.so.6"
cp "$PROBE" "$R/usr/bin/cuda-probe"
echo /usr/lib64 >"$R/etc/ld.so.conf"
"$LDCONFIG" -r "$R" || fail "the image's loader cache"
(cd "$T/bundle" && "$RUNC" spec) || fail "runc spec"
python3 - "$T/bundle/config.json" <<'PY' || fail "config.json"
import json, sys
c = json.load(open(sys.argv[1]))
c['process']['terminal'] = False
c['process']['args'] = ['sh', '-c', 'cuda-probe; echo "probe exit $?"; ls ' +
                        '/usr/lib/x86_64-linux-gnu/nvidia/current']
c['annotations'] = {'cdi.k8s.io/nvidia-device-plugin_gpuop-test': 'nvidia.com/gpu=0'}  # the device plugin's key: the runtime trusts it
json.dump(c, open(sys.argv[1], 'w'), indent=2)
PY

N=0
run_ctr() {
    N=$((N + 1))
    local id="gpuop-hook-$$-$N"
    IDS+=("$id")
    "$GPUOP" runtime --cdi-spec-dirs "$T/cdi" --runtime-path "$RUNC" --root "$ROOT" \
        --log "$T/runc.log" --log-format json run --bundle "$T/bundle" "$id" >"$T/out" 2>"$T/err" </dev/null
}

# 1. no hooks: the program's loader finds no libcuda.so.1
generate --install-dir "$T/none"
grep -q 'hookName' "$T/cdi/nvidia.yaml" && fail "gpuop not installed, yet the spec has hooks"
run_ctr || fail "the container without hooks exited $?"
grep -q 'libcuda.so.1' "$T/out" "$T/err" && grep -q 'probe exit 127' "$T/out" ||
    fail "without hooks: the program was expected not to find libcuda.so.1"
echo "ok: without the hooks an image whose loader does not search $LIB finds no libcuda.so.1"

# 2. the hooks: the driver's libcuda, and its development link
if LC_ALL=C ldd "$GPUOP" 2>/dev/null | grep -q libasan; then
    # a sanitizer build: the hook runs in the container's PID namespace with the host's /proc,
    # where LeakSanitizer cannot list its own threads; everything else of ASan stays on
    printf '#!/bin/sh\nASAN_OPTIONS=detect_leaks=0 exec %s "$@"\n' "$GPUOP" >"$T/install/gpuop"
    chmod 755 "$T/install/gpuop"
else
    cp "$GPUOP" "$T/install/gpuop"
fi
generate --install-dir "$T/install"
grep -q "path: $T/install/gpuop" "$T/cdi/nvidia.yaml" || fail "the spec's hooks do not run $T/install/gpuop"
run_ctr || fail "the container with hooks exited $?"
grep -q '^cuda-probe: driver API 12040$' "$T/out" || fail "with hooks: the program did not run on the driver's libcuda"
grep -q "^cuda-probe: loaded .*$LIB/libcuda.so" "$T/out" || fail "with hooks: libcuda not from $LIB"
grep -qx 'libcuda.so' "$T/out" || fail "with hooks: no libcuda.so development link"
echo "ok: with the hooks the program runs on the driver's libcuda, and libcuda.so is there"

# 3. CUDA forward compatibility: the image's compat libcuda of a newer branch goes first
mkdir -p "$R/usr/local/cuda/compat"
NEWER=$(( ${V%%.*} + 10 )).35.03
cp "$COMPAT" "$R/usr/local/cuda/compat/libcuda.so.$NEWER"
ln -s "libcuda.so.$NEWER" "$R/usr/local/cuda/compat/libcuda.so.1"
run_ctr || fail "the container with compat libraries exited $?"
grep -q '^cuda-probe: driver API 12060$' "$T/out" || fail "compat: the program did not run on the image's forward-compatible libcuda"
grep -q '^cuda-probe: loaded /usr/local/cuda/compat/libcuda.so' "$T/out" || fail "compat: libcuda not from /usr/local/cuda/compat"
# ... not when it is of an older branch than the driver
rm "$R/usr/local/cuda/compat/libcuda.so.$NEWER"
OLDER=$(( ${V%%.*} - 10 )).35.03
cp "$COMPAT" "$R/usr/local/cuda/compat/libcuda.so.$OLDER"
ln -sfn "libcuda.so.$OLDER" "$R/usr/local/cuda/compat/libcuda.so.1"
run_ctr || fail "the container with older compat libraries exited $?"
grep -q '^cuda-probe: driver API 12040$' "$T/out" || fail "older compat: the program did not run on the driver's libcuda"
rm -rf "$R/usr/local/cuda"
echo "ok: the image's CUDA forward-compatible libcuda is used when of a newer branch ($NEWER), not of an older one"

# 4. an image that includes ld.so.conf.d: the drop-in lists the driver's folder
mkdir -p "$R/etc/ld.so.conf.d"
printf 'include /etc/ld.so.conf.d/*.conf\n/usr/lib64\n' >"$R/etc/ld.so.conf"
run_ctr || fail "the container with ld.so.conf.d exited $?"
grep -q '^cuda-probe: driver API 12040$' "$T/out" || fail "ld.so.conf.d: the program did not run"
grep -qx "$LIB" "$R/etc/ld.so.conf.d/00-gpuop-cdi.conf" || fail "ld.so.conf.d: the drop-in does not list $LIB: $(cat "$R/etc/ld.so.conf.d/00-gpuop-cdi.conf" 2>&1)"
echo "ok: the drop-in /etc/ld.so.conf.d/00-gpuop-cdi.conf lists the driver's folder"
exit 0
