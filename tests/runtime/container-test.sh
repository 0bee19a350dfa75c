#!/bin/bash
# `gpuop runtime` in front of Debian's runc, running a real container from a busybox rootfs
# (busybox-static). A CDI spec in a temporary directory names fake device nodes (character
# devices with /dev/null's numbers, made with mknod: nvidia0, nvidia1, nvidiactl) and a fake
# driver library. Inside the container `ls` shows what the wrapper injected:
#   NVIDIA_VISIBLE_DEVICES=0      nvidia0, nvidiactl and the library; no nvidia1
#   a cdi.k8s.io/ annotation      the device it names (nvidia1), not nvidia0
#   NVIDIA_VISIBLE_DEVICES=none   no nvidia node, no library; config.json byte for byte as it was
#   an unknown device             exit non-zero naming it (stderr and runc's --log file), no
#                                 container, config.json untouched
# and commands other than create/run pass straight through (`list`). Needs root, runc and a
# static busybox; skips (77) with the reason otherwise.
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

# config.json for one run: the base spec, no terminal, the env var and annotations given.
make_config() { # VISIBLE ANNOTATION_JSON
    python3 - "$T/config.base.json" "$T/bundle/config.json" "$1" "$2" <<'PY' || fail "config.json"
import json, sys
c = json.load(open(sys.argv[1]))
c['process']['terminal'] = False
c['process']['args'] = ['sh', '-c', 'ls /dev; echo ---; ls /usr/lib; cat /usr/lib/lib* 2>/dev/null; true']
if sys.argv[3] != '-':
    c['process']['env'].append('NVIDIA_VISIBLE_DEVICES=' + sys.argv[3])
ann = json.loads(sys.argv[4])
if ann:
    c['annotations'] = ann
json.dump(c, open(sys.argv[2], 'w'), indent=2)
PY
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

# 1. NVIDIA_VISIBLE_DEVICES=0, the spec directory and runc from the environment.
make_config 0 '{}'
GPUOP_CDI_SPEC_DIRS=$T/cdi GPUOP_RUNTIME_PATH=$RUNC run_ctr || fail "run with NVIDIA_VISIBLE_DEVICES=0 exited $?"
has nvidia0 || fail "NVIDIA_VISIBLE_DEVICES=0: /dev/nvidia0 missing"
has nvidiactl || fail "NVIDIA_VISIBLE_DEVICES=0: /dev/nvidiactl missing"
has libnvidia-fake.so.570.0 || fail "NVIDIA_VISIBLE_DEVICES=0: the library missing"
has "fake driver 570.0" || fail "NVIDIA_VISIBLE_DEVICES=0: the library's content not readable"
has nvidia1 && fail "NVIDIA_VISIBLE_DEVICES=0: /dev/nvidia1 is there"
python3 - "$T/bundle/config.json" <<'PY' || fail "config.json after the edit"
import json, sys
c = json.load(open(sys.argv[1]))
paths = [d['path'] for d in c['linux']['devices']]
assert '/dev/nvidia0' in paths and '/dev/nvidia1' not in paths, paths
assert 'NVIDIA_VISIBLE_DEVICES=void' in c['process']['env'], c['process']['env']
rules = c['linux']['resources']['devices']
assert {'allow': True, 'type': 'c', 'major': 1, 'minor': 3, 'access': 'rwm'} in rules, rules
PY
echo "ok: NVIDIA_VISIBLE_DEVICES=0 sees nvidia0, nvidiactl and the library, not nvidia1"

# 1b. By UUID, the flags instead of the environment.
make_config GPU-11111111-2222-3333-4444-555555555555 '{}'
run_ctr --cdi-spec-dirs "$T/cdi" --runtime-path "$RUNC" || fail "run by UUID exited $?"
has nvidia0 && ! has nvidia1 || fail "by UUID: want nvidia0 only"
echo "ok: a GPU UUID"

# 2. A CDI annotation (and NVIDIA_VISIBLE_DEVICES unset).
make_config - '{"cdi.k8s.io/gpuop-test": "nvidia.com/gpu=1"}'
run_ctr --cdi-spec-dirs "$T/cdi" --runtime-path "$RUNC" || fail "run with a CDI annotation exited $?"
has nvidia1 || fail "annotation: /dev/nvidia1 missing"
has "fake driver 570.0" || fail "annotation: the library missing"
has nvidia0 && fail "annotation: /dev/nvidia0 is there"
echo "ok: a cdi.k8s.io/ annotation sees nvidia1 and the library, not nvidia0"

# 3. none: nothing injected, config.json not rewritten.
make_config none '{}'
cp "$T/bundle/config.json" "$T/config.before"
run_ctr --cdi-spec-dirs "$T/cdi" --runtime-path "$RUNC" || fail "run with none exited $?"
grep -q '^nvidia' "$T/out" && fail "none: an nvidia device node is there"
# (runc leaves the earlier runs' empty mount point file in the rootfs: the content tells)
has "fake driver 570.0" && fail "none: the library is there"
cmp -s "$T/config.before" "$T/bundle/config.json" || fail "none: config.json was rewritten"
echo "ok: NVIDIA_VISIBLE_DEVICES=none sees no device and no library"

# 4. An unknown device: a clear error naming it, no container, config.json untouched.
make_config 0,7 '{}'
cp "$T/bundle/config.json" "$T/config.before"
rm -f "$T/runc.log"
if run_ctr --cdi-spec-dirs "$T/cdi" --runtime-path "$RUNC"; then fail "unknown device: exit 0"; fi
grep -q 'unresolvable CDI devices nvidia.com/gpu=7' "$T/err" || fail "unknown device: stderr does not name it"
grep -q '"level":"error".*nvidia.com/gpu=7' "$T/runc.log" || fail "unknown device: not in runc's --log file"
cmp -s "$T/config.before" "$T/bundle/config.json" || fail "unknown device: config.json changed"
[ -z "$("$RUNC" --root "$ROOT" list -q)" ] || fail "unknown device: a container exists"
echo "ok: an unknown device is refused by name, config.json untouched"

# 5. Pass-through: other commands reach runc unchanged.
"$GPUOP" runtime --runtime-path "$RUNC" --root "$ROOT" list -f json >"$T/out" 2>"$T/err" || fail "list exited $?"
"$RUNC" --root "$ROOT" list -f json >"$T/want" || fail "runc list"
cmp -s "$T/out" "$T/want" || fail "list: not what runc prints"
GPUOP_RUNTIME_PATH=$RUNC "$GPUOP" runtime --version >"$T/out" 2>&1 || fail "--version exited $?"
grep -q '^runc version' "$T/out" || fail "--version did not reach runc"
echo "ok: list and --version pass straight through"
exit 0
