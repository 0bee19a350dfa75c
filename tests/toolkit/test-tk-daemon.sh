#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Integration test: the toolkit daemon (`gpuop toolkit`) in a temporary host root, on the MIG
# fleet through the simulated driver, with a fake containerized driver root named by
# driver-ready and a containerd config:
#  - it writes the spec (the fleet's golden spec, byte for byte), installs gpuop and the
#    gpuop-runtime wrapper, configures containerd (detected from the kubelet's
#    containerRuntimeVersion) and writes .toolkit-ctr-ready;
#  - the spec follows a MIG layout change; a driver unload removes the spec and the marker, the
#    upgraded driver brings them back with no path of the old version left;
#  - SIGTERM with --cleanup: exit 0, containerd's config back byte for byte, spec and marker gone;
#    without --cleanup the spec stays and the marker goes;
#  - an administrator's config that is a link to an absolute path (of uid 1000, mode 0640 when
#    run as root): configured through the link under the host root, the link, owner and mode
#    kept; the administrator's edit since followed by the next pass (the drop-in repeats it) and
#    kept by --cleanup, which says what it did;
#  - bad input: a CDI spec directory that cannot be written, a driver root without NVML, a node
#    running another runtime than the policy's, gpuop's TOML module missing: one line, non-zero
#    exit, nothing written.
#
# usage: test-tk-daemon.sh <gpuop> <libnvidia-ml.so.1 (simulator)> <tk-sim-mig>
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"

GPUOP=$1
SIMLIB=$2
MIG=$3
SRC=$S
HERE=$SRC/tests/toolkit
FLEET=$SRC/sim/fleets/dgx-a100-80gb-mig.yaml
OLD=550.90.07
NEW=570.86.15

# gpuop finds its TOML module (gpuop-tomlx.so) beside itself, as on a node: not where the test
# environment names it for the test programs.
unset GPUOP_TOMLX_MODULE

WORK=$T
PID=

# A host root: the driver root of $2 at /run/nvidia/driver, driver-ready naming it, a simulated
# node whose driver is loaded at that version, and a containerd config of the user's.
make_host() { # dir version [fake-driver-root flags]
    h=$1
    v=$2
    shift 2
    sh "$HERE/fake-driver-root.sh" "$h/run/nvidia/driver" "$v" "$@" || return 1
    mkdir -p "$h/run/nvidia/validations" "$h/etc/containerd" "$h/node/sys/module/nvidia"
    printf 'IS_HOST_DRIVER=false\nNVIDIA_DRIVER_ROOT=/run/nvidia/driver\nDRIVER_ROOT_CTR_PATH=/run/nvidia/driver\nNVIDIA_DEV_ROOT=/run/nvidia/driver\nDEV_ROOT_CTR_PATH=/run/nvidia/driver\n' \
        >"$h/run/nvidia/validations/driver-ready"
    printf '%s\n' "$v" >"$h/node/sys/module/nvidia/version"
    cat >"$h/etc/containerd/config.toml" <<'EOF'
version = 2
# the user's settings
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
EOF
    mkdir -p "$h/state"
}

# start <host> [flags]: the daemon in the background, its log in $WORK/log
start() {
    s_host=$1
    shift
    GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$FLEET GPUOP_SIM_STATE=$s_host/state \
        GPUOP_SIM_ROOT=$s_host/node "$GPUOP" toolkit --host-root "$s_host" \
        --install-dir=/usr/local/nvidia --runtime-class=nvidia --interval 200ms \
        --restart-mode none --node-runtime-version containerd://1.7.24 \
        --mig-minors /nonexistent "$@" >"$WORK/log" 2>&1 &
    PID=$!
    pids+=("$PID")
}

stop() { # expects exit 0
    kill -TERM "$PID"
    wait "$PID"
    s_rc=$?
    _tl_forget "$PID"
    PID=
    [ $s_rc = 0 ] || fail "SIGTERM: exit $s_rc: $(tail -3 "$WORK/log")"
}

H=$WORK/host
make_host "$H" "$OLD" || fail "fixture"
cp "$H/etc/containerd/config.toml" "$WORK/config.orig"
SPEC=$H/var/run/cdi/nvidia.yaml
MARK=$H/run/nvidia/validations/.toolkit-ctr-ready

start "$H" --cleanup
if ! poll 30 eval '[ -f "$MARK" ]'; then
    fail "no .toolkit-ctr-ready after 30 s: $(cat "$WORK/log")"
else
    cmp -s "$SPEC" "$HERE/golden/dgx-a100-80gb-mig.yaml" ||
        fail "the daemon's spec is not the fleet's golden spec"
    for kv in RUNTIME=containerd RUNTIME_CONFIG=/etc/containerd/config.toml \
        CDI_SPEC=/var/run/cdi/nvidia.yaml TOOLKIT_INSTALL_DIR=/usr/local/nvidia; do
        grep -qx "$kv" "$MARK" || fail "marker: no $kv in: $(cat "$MARK")"
    done
    cmp -s "$H/usr/local/nvidia/gpuop" "$GPUOP" || fail "gpuop is not installed"
    [ -x "$H/usr/local/nvidia/gpuop" ] || fail "the installed gpuop is not executable"
    [ -x "$H/usr/local/nvidia/gpuop-runtime" ] || fail "gpuop-runtime is not installed"
    # the runtime handler's defaults (closed): no flags
    grep -q "exec '/usr/local/nvidia/gpuop' runtime \"\$@\"" "$H/usr/local/nvidia/gpuop-runtime" ||
        fail "gpuop-runtime does not run gpuop runtime: $(cat "$H/usr/local/nvidia/gpuop-runtime")"
    dropin=$H/etc/containerd/conf.d/99-nvidia.toml
    grep -q 'runtimes.nvidia' "$dropin" 2>/dev/null || fail "containerd: no nvidia runtime in $dropin"
    grep -q '/usr/local/nvidia/gpuop-runtime' "$dropin" 2>/dev/null ||
        fail "containerd: the handler does not run gpuop-runtime"
    grep -q 'enable_cdi = true' "$dropin" 2>/dev/null || fail "containerd: CDI not enabled"
    grep -q 'snapshotter = "overlayfs"' "$H/etc/containerd/config.toml" ||
        fail "containerd: the user's setting is gone"
    ls -a "$H/var/run/cdi" | grep -q tmp && fail "a temporary file is left in the CDI directory"

    # MIG: GPU 6 (MIG off in the fleet) gets two instances; the spec follows
    GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$FLEET GPUOP_SIM_STATE=$H/state \
        GPUOP_SIM_ROOT=$H/node "$MIG" 6 3g.40gb 3g.40gb || fail "MIG change"
    poll 20 eval 'grep -q "^- name: \"6:1\"\$" "$SPEC"' ||
        fail "the spec does not follow the MIG change: $(grep -c '^- name' "$SPEC") names"
    [ "$(grep -c '^- name: MIG-' "$SPEC")" = 28 ] || fail "not 28 MIG devices after the change"

    # the driver is unloaded: spec and marker go; the upgraded driver brings them back
    rm "$H/node/sys/module/nvidia/version"
    poll 20 eval '[ ! -e "$SPEC" ] && [ ! -e "$MARK" ]' ||
        fail "the spec or marker stayed while the driver was gone"
    rm -f "$H"/run/nvidia/driver/usr/lib/x86_64-linux-gnu/*."$OLD"
    rm -rf "$H/run/nvidia/driver/lib/firmware/nvidia/$OLD"
    sh "$HERE/fake-driver-root.sh" "$H/run/nvidia/driver" "$NEW"
    printf '%s\n' "$NEW" >"$H/node/sys/module/nvidia/version"
    if poll 20 eval '[ -f "$MARK" ] && grep -q "libnvidia-ml.so.$NEW\$" "$SPEC" 2>/dev/null'; then
        grep -q "$OLD" "$SPEC" && fail "the upgraded spec still names $OLD"
        grep -q '^- name: "6:1"$' "$SPEC" || fail "the upgraded spec lost the MIG change"
    else
        fail "no spec for the upgraded driver: $(tail -3 "$WORK/log")"
    fi
fi
stop
[ -e "$MARK" ] && fail "--cleanup: the marker stayed"
[ -e "$SPEC" ] && fail "--cleanup: the spec stayed"
cmp -s "$H/etc/containerd/config.toml" "$WORK/config.orig" ||
    fail "--cleanup: containerd's config is not the original"
[ -e "$H/etc/containerd/conf.d/99-nvidia.toml" ] && fail "--cleanup: the drop-in stayed"

# without --cleanup: the spec and the runtime config stay, the marker goes. The policy's
# permissive setting (NVIDIA's toolkit variable) reaches the handler, with a warning.
ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=true start "$H"
poll 30 eval '[ -f "$MARK" ]' || fail "second run: no marker: $(cat "$WORK/log")"
grep -q "exec '/usr/local/nvidia/gpuop' runtime --accept-nvidia-visible-devices-envvar-when-unprivileged \"\$@\"" \
    "$H/usr/local/nvidia/gpuop-runtime" ||
    fail "the accepted variable is not the handler's: $(cat "$H/usr/local/nvidia/gpuop-runtime")"
grep -q "warn.*trusts NVIDIA_VISIBLE_DEVICES of unprivileged containers" "$WORK/log" ||
    fail "no warning for the permissive handler: $(cat "$WORK/log")"
stop
[ -e "$MARK" ] && fail "SIGTERM: the marker stayed"
[ -f "$SPEC" ] || fail "SIGTERM without --cleanup: the spec went"
[ -f "$H/etc/containerd/conf.d/99-nvidia.toml" ] || fail "SIGTERM without --cleanup: the drop-in went"

# ---- an administrator's config: a link to an absolute path, edited while installed ----------
A=$WORK/admin
make_host "$A" "$OLD" || { echo "FAIL: fixture"; exit 1; }
mkdir -p "$A/etc/site"
mv "$A/etc/containerd/config.toml" "$A/etc/site/containerd.toml"
ln -s /etc/site/containerd.toml "$A/etc/containerd/config.toml"
[ "$(id -u)" = 0 ] && chown 1000:1000 "$A/etc/site/containerd.toml"
chmod 0640 "$A/etc/site/containerd.toml"
attrs() { stat -c '%u:%g %a' "$A/etc/site/containerd.toml"; readlink "$A/etc/containerd/config.toml"; }
before=$(attrs)
start "$A" --cleanup
if poll 30 eval '[ -f "$A/run/nvidia/validations/.toolkit-ctr-ready" ]'; then
    grep -q '^imports = \["/etc/containerd/conf.d/99-nvidia.toml"\]' "$A/etc/site/containerd.toml" ||
        fail "admin: the link's target under the host root was not configured"
    [ "$(attrs)" = "$before" ] || fail "admin: the link, owner or mode changed: $(attrs)"
    printf '[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]\n  endpoint = ["https://mirror.example.com"]\n' \
        >>"$A/etc/site/containerd.toml"
    poll 20 eval 'grep -q mirror.example.com "$A/etc/containerd/conf.d/99-nvidia.toml"' ||
        fail "admin: the drop-in does not follow the administrator's edit: $(tail -3 "$WORK/log")"
    # the drop-in is written before the line is logged: wait for the line too
    poll 10 eval 'grep -q "runtime config followed an edit" "$WORK/log"' ||
        fail "admin: the follow is not logged: $(tail -3 "$WORK/log")"
else
    fail "admin: no marker: $(cat "$WORK/log")"
fi
stop
{ cat "$WORK/config.orig"; printf '[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]\n  endpoint = ["https://mirror.example.com"]\n'; } |
    cmp -s - "$A/etc/site/containerd.toml" ||
    fail "admin: --cleanup did not give back the administrator's config with the edit: $(cat "$A/etc/site/containerd.toml")"
[ "$(attrs)" = "$before" ] || fail "admin: --cleanup changed the link, owner or mode: $(attrs)"
[ -e "$A/etc/containerd/conf.d/99-nvidia.toml" ] && fail "admin: --cleanup left the drop-in"
grep -q 'runtime config restored.*path=/etc/containerd/config.toml result=edit' "$WORK/log" ||
    fail "admin: --cleanup does not say what it did: $(cat "$WORK/log")"
grep -q 'result=edit' "$A/var/lib/gpuop/rtconfig/status" 2>/dev/null || fail "admin: no status"

# ---- bad input: one line, non-zero exit, nothing written ------------------------------------
nothing_written() { # what host
    [ -e "$2/var/run/cdi/nvidia.yaml" ] && fail "$1: the spec was written"
    [ -e "$2/run/nvidia/validations/.toolkit-ctr-ready" ] && fail "$1: the marker was written"
    [ -e "$2/usr/local/nvidia" ] && fail "$1: gpuop was installed"
    [ -e "$2/etc/containerd/conf.d" ] && fail "$1: containerd was configured"
    cmp -s "$2/etc/containerd/config.toml" "$WORK/config.orig" || fail "$1: containerd's config changed"
}
run_bad() { # what want host [flags]
    b_what=$1
    b_want=$2
    b_host=$3
    shift 3
    start "$b_host" "$@"
    wait "$PID"
    b_rc=$?
    _tl_forget "$PID"
    PID=
    if [ $b_rc = 0 ]; then
        fail "$b_what: exit 0"
    elif [ "$(wc -l <"$WORK/log")" != 1 ]; then
        fail "$b_what: not one line: $(cat "$WORK/log")"
    elif ! grep -q -- "$b_want" "$WORK/log"; then
        fail "$b_what: the error does not say \"$b_want\": $(cat "$WORK/log")"
    fi
    nothing_written "$b_what" "$b_host"
}

B=$WORK/bad-cdi
make_host "$B" "$OLD"
mkdir -p "$B/var/run"
: >"$B/var/run/cdi" # a file where the spec directory should be
run_bad "CDI directory not writable" 'CDI spec directory "' "$B"
[ -s "$B/var/run/cdi" ] && fail "CDI directory not writable: the file in its place changed"

B=$WORK/bad-nvml
make_host "$B" "$OLD" --no-nvml
run_bad "driver root without NVML" \
    "driver root \"/run/nvidia/driver\": no libnvidia-ml.so.$OLD (NVML)" "$B"

B=$WORK/bad-policy
make_host "$B" "$OLD"
run_bad "another runtime than the policy's" "cri-o" "$B" --default-runtime cri-o

# gpuop's TOML module missing: the runtime is not configured, and it says so before it writes
# the spec or installs anything
B=$WORK/bad-module
make_host "$B" "$OLD"
export GPUOP_TOMLX_MODULE=$WORK/nowhere/gpuop-tomlx.so
run_bad "the TOML module missing" \
    "configure containerd: the TOML parser: loading gpuop-tomlx.so from \$GPUOP_TOMLX_MODULE: \"$GPUOP_TOMLX_MODULE\": cannot open shared object file" "$B"
unset GPUOP_TOMLX_MODULE

echo "toolkit daemon: all good"
