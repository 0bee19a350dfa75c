#!/bin/bash
# `gpuop runtime` in front of Debian's runc, running a real container from a busybox rootfs
# (busybox-static). A CDI spec in a temporary directory names fake device nodes (character
# devices with /dev/null's numbers, made with mknod: nvidia0, nvidia1, nvidia-ctl) and a fake
# driver library. Inside the container `ls` shows what the wrapper injected. With the default
# (closed) settings:
#   unprivileged (no capabilities), NVIDIA_VISIBLE_DEVICES=all    no nvidia node, no library;
#                                   the variable becomes void, a warning in runc's --log file
#   unprivileged, NVIDIA_VISIBLE_DEVICES=1 (not allocated)        no nvidia node
#   unprivileged, allocated GPU 1 by the device plugin's volume mounts (and its own variable
#                                   saying all)                   nvidia1, nvidiactl, the library
#   unprivileged, allocated GPU 1 by the device plugin's CDI annotation (and an annotation of its
#                                   own naming GPU 0)             nvidia1 only
#   privileged (every capability), NVIDIA_VISIBLE_DEVICES=0 (or a UUID)   nvidia0, nvidiactl and
#                                   the library; no nvidia1
#   NVIDIA_VISIBLE_DEVICES=none     no nvidia node, no library; config.json byte for byte as it was
#   an unknown device               exit non-zero naming it (stderr and runc's --log file), no
#                                   container, config.json untouched
# and with --accept-nvidia-visible-devices-envvar-when-unprivileged an unprivileged container's
# variable counts again; commands other than create/run pass straight through (`list`). Needs
# root, runc and a static busybox; skips (77) with the reason otherwise.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
GPUOP=${1:?usage: container-test.sh path/to/gpuop}
need_root "runc (namespaces and device nodes)"
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
need_cmd python3

ROOT=$T/runc-root
IDS=()
at_exit 'for id in "${IDS[@]}"; do "$RUNC" --root "$ROOT" delete -f "$id" >/dev/null 2>&1; done'
on_fail() {
    echo "--- container output"; cat "$T/out" 2>/dev/null
    echo "--- stderr"; cat "$T/err" 2>/dev/null
}

# The host side: fake GPUs and a fake driver library.
mkdir -p "$T/host/dev" "$T/host/lib" "$T/cdi" "$T/bundle/rootfs"
for n in nvidia0 nvidia1 nvidiactl; do
    mknod -m 0666 "$T/host/dev/$n" c 1 3 || fail "mknod $n"
done
echo "fake driver 570.0" > "$T/host/lib/libnvidia-fake.so.570.0"
cat > "$T/cdi/nvidia.yaml" <<EOF
cdiVersion: 0.5.0
kind: nvidia.com/gpu
containerEdits:
  env: [NVIDIA_VISIBLE_DEVICES=void]
  deviceNodes: [{path: /dev/nvidiactl, hostPath: $T/host/dev/nvidiactl}]
  mounts:
  - {hostPath: $T/host/lib/libnvidia-fake.so.570.0, containerPath: /usr/lib/libnvidia-fake.so.570.0,
     options: [ro, nosuid, nodev, bind]}
devices:
- name: "0"
  containerEdits: {deviceNodes: [{path: /dev/nvidia0, hostPath: $T/host/dev/nvidia0}]}
- name: GPU-11111111-2222-3333-4444-555555555555
  containerEdits: {deviceNodes: [{path: /dev/nvidia0, hostPath: $T/host/dev/nvidia0}]}
- name: "1"
  containerEdits: {deviceNodes: [{path: /dev/nvidia1, hostPath: $T/host/dev/nvidia1}]}
- name: all
  containerEdits:
    deviceNodes:
    - {path: /dev/nvidia0, hostPath: $T/host/dev/nvidia0}
    - {path: /dev/nvidia1, hostPath: $T/host/dev/nvidia1}
EOF

# The container: busybox, `ls` of /dev and /usr/lib, and the library's content.
R=$T/bundle/rootfs
mkdir -p "$R/bin" "$R/dev" "$R/proc" "$R/sys" "$R/usr/lib" "$R/tmp" "$R/etc"
cp "$BUSYBOX" "$R/bin/busybox"
for a in sh ls cat echo; do ln -s busybox "$R/bin/$a"; done
(cd "$T/bundle" && "$RUNC" spec) || fail "runc spec"
cp "$T/bundle/config.json" "$T/config.base.json"

# config.json for one run: the base spec, no terminal; the env var, annotations, privilege
# ("priv": every capability of this process's bounding set, as a runtime gives a privileged
# container; "unpriv": none at all) and the device plugin's volume mounts (device names,
# comma-separated) given.
make_config() { # VISIBLE ANNOTATION_JSON [priv|unpriv] [MOUNT_DEVICES]
    python3 - "$T/config.base.json" "$T/bundle/config.json" "$1" "$2" "${3:-unpriv}" "${4:-}" <<'PY' || fail "config.json"
import json, sys
CAPS = ['CHOWN', 'DAC_OVERRIDE', 'DAC_READ_SEARCH', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID',
        'SETPCAP', 'LINUX_IMMUTABLE', 'NET_BIND_SERVICE', 'NET_BROADCAST', 'NET_ADMIN', 'NET_RAW',
        'IPC_LOCK', 'IPC_OWNER', 'SYS_MODULE', 'SYS_RAWIO', 'SYS_CHROOT', 'SYS_PTRACE', 'SYS_PACCT',
        'SYS_ADMIN', 'SYS_BOOT', 'SYS_NICE', 'SYS_RESOURCE', 'SYS_TIME', 'SYS_TTY_CONFIG', 'MKNOD',
        'LEASE', 'AUDIT_WRITE', 'AUDIT_CONTROL', 'SETFCAP', 'MAC_OVERRIDE', 'MAC_ADMIN', 'SYSLOG',
        'WAKE_ALARM', 'BLOCK_SUSPEND', 'AUDIT_READ', 'PERFMON', 'BPF', 'CHECKPOINT_RESTORE']
bnd = int([l.split()[1] for l in open('/proc/self/status') if l.startswith('CapBnd:')][0], 16)
c = json.load(open(sys.argv[1]))
c['process']['terminal'] = False
c['process']['args'] = ['sh', '-c', 'ls /dev; echo ---; ls /usr/lib; cat /usr/lib/lib* 2>/dev/null; true']
if sys.argv[3] != '-':
    c['process']['env'].append('NVIDIA_VISIBLE_DEVICES=' + sys.argv[3])
ann = json.loads(sys.argv[4])
if ann:
    c['annotations'] = ann
caps = ['CAP_' + n for i, n in enumerate(CAPS) if bnd >> i & 1] if sys.argv[5] == 'priv' else []
c['process']['capabilities'] = {k: list(caps) for k in ('bounding', 'effective', 'permitted')}
c['process'].pop('noNewPrivileges', None)
for dev in filter(None, sys.argv[6].split(',')):
    c['mounts'].append({'destination': '/var/run/nvidia-container-devices/' + dev, 'type': 'bind',
                        'source': '/dev/null', 'options': ['rbind', 'rprivate']})
json.dump(c, open(sys.argv[2], 'w'), indent=2)
PY
}
env_of() { # the config.json's NVIDIA_VISIBLE_DEVICES values, space-separated
    python3 -c 'import json,sys; print(" ".join(e.split("=",1)[1] for e in json.load(open(sys.argv[1]))["process"]["env"] if e.startswith("NVIDIA_VISIBLE_DEVICES=")))' "$T/bundle/config.json"
}

N=0
run_ctr() { # gpuop runtime's own flags..., then runc's run
    N=$((N + 1))
    local id="gpuop-rt-$$-$N"
    IDS+=("$id")
    "$GPUOP" runtime "$@" --root "$ROOT" --log "$T/runc.log" --log-format json \
        run --bundle "$T/bundle" "$id" >"$T/out" 2>"$T/err" </dev/null
}
has() { grep -qx -- "$1" "$T/out"; }
no_gpu() { # WHAT: no nvidia device node and no library in the container
    grep -q '^nvidia' "$T/out" && fail "$1: an nvidia device node is there"
    # (runc leaves the earlier runs' empty mount point file in the rootfs: the content tells)
    has "fake driver 570.0" && fail "$1: the library is there"
    return 0
}
export GPUOP_CDI_SPEC_DIRS=$T/cdi GPUOP_RUNTIME_PATH=$RUNC

# 1. Unprivileged, NVIDIA_VISIBLE_DEVICES=all: nothing; the variable made void and said so.
make_config all '{}' unpriv
rm -f "$T/runc.log"
run_ctr || fail "unprivileged with NVIDIA_VISIBLE_DEVICES=all exited $?"
no_gpu "unprivileged, NVIDIA_VISIBLE_DEVICES=all"
[ "$(env_of)" = void ] || fail "unprivileged, all: config.json's variable is \"$(env_of)\", not void"
grep -q '"level":"warning".*NVIDIA_VISIBLE_DEVICES of a container that is not privileged is ignored' \
    "$T/runc.log" || fail "unprivileged, all: no warning in runc's --log file"
echo "ok: an unprivileged container with NVIDIA_VISIBLE_DEVICES=all gets no GPU (variable made void)"

# 2. Unprivileged, an index it was not allocated.
make_config 1 '{}' unpriv
run_ctr || fail "unprivileged with NVIDIA_VISIBLE_DEVICES=1 exited $?"
no_gpu "unprivileged, NVIDIA_VISIBLE_DEVICES=1"
echo "ok: an unprivileged container naming an unallocated index gets no GPU"

# 3. Allocated GPU 1 by the device plugin's volume mounts; its own variable says all.
make_config all '{}' unpriv 1
run_ctr || fail "allocated by volume mounts exited $?"
has nvidia1 || fail "volume mounts: /dev/nvidia1 missing"
has nvidiactl || fail "volume mounts: /dev/nvidiactl missing"
has "fake driver 570.0" || fail "volume mounts: the library missing"
has nvidia0 && fail "volume mounts: /dev/nvidia0 is there"
[ "$(env_of)" = void ] || fail "volume mounts: config.json's variable is \"$(env_of)\", not void"
echo "ok: a container allocated GPU 1 by volume mounts sees nvidia1 and the library, not nvidia0"

# 4. Allocated GPU 1 by the device plugin's CDI annotation; an annotation of its own names GPU 0.
make_config - '{"cdi.k8s.io/nvidia-device-plugin_5f0c2a4e-1d2b-4c3d-9e8f-0a1b2c3d4e5f": "nvidia.com/gpu=1", "cdi.k8s.io/mine": "nvidia.com/gpu=0"}' unpriv
run_ctr || fail "allocated by a CDI annotation exited $?"
has nvidia1 || fail "annotation: /dev/nvidia1 missing"
has "fake driver 570.0" || fail "annotation: the library missing"
has nvidia0 && fail "annotation: /dev/nvidia0 is there (the container's own annotation counted)"
echo "ok: the device plugin's cdi.k8s.io/ annotation gives nvidia1; the container's own is ignored"

# 5. Privileged, NVIDIA_VISIBLE_DEVICES=0.
make_config 0 '{}' priv
run_ctr || fail "privileged with NVIDIA_VISIBLE_DEVICES=0 exited $?"
has nvidia0 || fail "privileged, 0: /dev/nvidia0 missing"
has nvidiactl || fail "privileged, 0: /dev/nvidiactl missing"
has libnvidia-fake.so.570.0 || fail "privileged, 0: the library missing"
has "fake driver 570.0" || fail "privileged, 0: the library's content not readable"
has nvidia1 && fail "privileged, 0: /dev/nvidia1 is there"
python3 - "$T/bundle/config.json" <<'PY' || fail "config.json after the edit"
import json, sys
c = json.load(open(sys.argv[1]))
paths = [d['path'] for d in c['linux']['devices']]
assert '/dev/nvidia0' in paths and '/dev/nvidia1' not in paths, paths
assert 'NVIDIA_VISIBLE_DEVICES=void' in c['process']['env'], c['process']['env']
rules = c['linux']['resources']['devices']
assert {'allow': True, 'type': 'c', 'major': 1, 'minor': 3, 'access': 'rwm'} in rules, rules
PY
echo "ok: a privileged container with NVIDIA_VISIBLE_DEVICES=0 sees nvidia0, nvidiactl and the library, not nvidia1"

# 5b. Privileged, by UUID, the flags instead of the environment.
make_config GPU-11111111-2222-3333-4444-555555555555 '{}' priv
env -u GPUOP_CDI_SPEC_DIRS -u GPUOP_RUNTIME_PATH \
    "$GPUOP" runtime --cdi-spec-dirs "$T/cdi" --runtime-path "$RUNC" --root "$ROOT" \
    run --bundle "$T/bundle" "gpuop-rt-$$-uuid" >"$T/out" 2>"$T/err" </dev/null || fail "run by UUID exited $?"
IDS+=("gpuop-rt-$$-uuid")
has nvidia0 && ! has nvidia1 || fail "by UUID: want nvidia0 only"
echo "ok: a privileged container by GPU UUID"

# 6. The setting that trusts the variable again: an unprivileged container's counts.
make_config 0 '{}' unpriv
run_ctr --accept-nvidia-visible-devices-envvar-when-unprivileged ||
    fail "accepted variable exited $?"
has nvidia0 && ! has nvidia1 || fail "accepted variable: want nvidia0 only"
echo "ok: --accept-nvidia-visible-devices-envvar-when-unprivileged lets the variable count"

# 7. none: nothing injected, config.json not rewritten.
make_config none '{}' unpriv
cp "$T/bundle/config.json" "$T/config.before"
run_ctr || fail "run with none exited $?"
no_gpu "none"
cmp -s "$T/config.before" "$T/bundle/config.json" || fail "none: config.json was rewritten"
echo "ok: NVIDIA_VISIBLE_DEVICES=none sees no device and no library, config.json untouched"

# 8. An unknown device: a clear error naming it, no container, config.json untouched.
make_config 0,7 '{}' priv
cp "$T/bundle/config.json" "$T/config.before"
rm -f "$T/runc.log"
if run_ctr; then fail "unknown device: exit 0"; fi
grep -q 'unresolvable CDI devices nvidia.com/gpu=7' "$T/err" || fail "unknown device: stderr does not name it"
grep -q '"level":"error".*nvidia.com/gpu=7' "$T/runc.log" || fail "unknown device: not in runc's --log file"
cmp -s "$T/config.before" "$T/bundle/config.json" || fail "unknown device: config.json changed"
[ -z "$("$RUNC" --root "$ROOT" list -q)" ] || fail "unknown device: a container exists"
echo "ok: an unknown device is refused by name, config.json untouched"

# 9. Pass-through: other commands reach runc unchanged.
"$GPUOP" runtime --runtime-path "$RUNC" --root "$ROOT" list -f json >"$T/out" 2>"$T/err" || fail "list exited $?"
"$RUNC" --root "$ROOT" list -f json >"$T/want" || fail "runc list"
cmp -s "$T/out" "$T/want" || fail "list: not what runc prints"
"$GPUOP" runtime --version >"$T/out" 2>&1 || fail "--version exited $?"
grep -q '^runc version' "$T/out" || fail "--version did not reach runc"
echo "ok: list and --version pass straight through"
exit 0
