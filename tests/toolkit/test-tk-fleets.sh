#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Integration test: `gpuop toolkit cdi generate` and `cdi list` on every sample fleet
# (sim/fleets, MIG included) through the simulated driver and a fake containerized driver root:
# the spec is byte for byte tests/toolkit/golden/<fleet>.yaml (GPUOP_UPDATE_GOLDEN=1 rewrites
# them), the same on a second run, valid against the CDI JSON schema, and `cdi list` names its
# devices; one fleet with a host driver root too. Then bad input: a driver root without NVML, an
# output directory that cannot be written, an NVML that does not load, an unknown runtime or
# command: one line, a non-zero exit, nothing written.
#
# usage: test-tk-fleets.sh <gpuop> <libnvidia-ml.so.1 (simulator)>
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"

GPUOP=$1
SIMLIB=$2
SRC=$S
HERE=$SRC/tests/toolkit
GOLDEN=$HERE/golden

[ -f "$SIMLIB" ] || fail "the simulated libnvidia-ml ($SIMLIB) is not built"

WORK=$T
schema_skipped=0

# gen <fleet> <host-root> <driver-root> [flags...]: stdout in $WORK/out, stderr in $WORK/err.
gen() {
    g_fleet=$1
    g_host=$2
    g_root=$3
    shift 3
    g_state=$(mktemp -d "$WORK/state.XXXXXX")
    GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$g_fleet GPUOP_SIM_STATE=$g_state \
        timeout 30 "$GPUOP" toolkit cdi generate --host-root "$g_host" --driver-root "$g_root" \
        --mig-minors /nonexistent "$@" >"$WORK/out" 2>"$WORK/err"
    rc=$?
}

schema_check() { # files...
    GPUOP_SHARED=${GPUOP_SHARED:-} python3 "$HERE/cdi-schema-check.py" "$@" >"$WORK/schema" 2>&1
    s_rc=$?
    if [ $s_rc = 77 ]; then
        schema_skipped=1
    elif [ $s_rc != 0 ]; then
        fail "schema: $(cat "$WORK/schema")"
    fi
}

check_golden() { # name file
    if [ "${GPUOP_UPDATE_GOLDEN:-}" = 1 ]; then
        cp "$2" "$GOLDEN/$1"
        return
    fi
    if ! cmp -s "$2" "$GOLDEN/$1"; then
        diff -u "$GOLDEN/$1" "$2" | head -30
        fail "$1: the spec differs from the golden file"
    fi
}

version_of() { sed -n 's/^driver_version: *"\([0-9.]*\)".*/\1/p' "$1"; }

# gpuop installed on a host root where the toolkit daemon installs it: the spec's hooks run it
install_stub() { # host-root
    mkdir -p "$1/usr/local/nvidia" && printf '#!/bin/sh\n' >"$1/usr/local/nvidia/gpuop" &&
        chmod 755 "$1/usr/local/nvidia/gpuop"
}

for fleet in "$SRC"/sim/fleets/*.yaml; do
    name=$(basename "$fleet" .yaml)
    v=$(version_of "$fleet")
    host=$WORK/host-$name
    sh "$HERE/fake-driver-root.sh" "$host/run/nvidia/driver" "$v" || { fail "$name: fixture"; continue; }
    install_stub "$host"
    gen "$fleet" "$host" /run/nvidia/driver
    if [ $rc != 0 ]; then
        fail "$name: cdi generate exited $rc: $(cat "$WORK/err")"
        continue
    fi
    cp "$WORK/out" "$WORK/$name.yaml"
    check_golden "$name.yaml" "$WORK/$name.yaml"
    gen "$fleet" "$host" /run/nvidia/driver
    cmp -s "$WORK/out" "$WORK/$name.yaml" || fail "$name: a second run differs"
    grep -q "libnvidia-ml.so.$v\$" "$WORK/$name.yaml" || fail "$name: NVML $v is not mounted"
    schema_check "$WORK/$name.yaml"
    # cdi list: the spec's device names, in its order
    g_state=$(mktemp -d "$WORK/state.XXXXXX")
    GPUOP_NVML_LIBRARY=$SIMLIB GPUOP_SIM_FLEET=$fleet GPUOP_SIM_STATE=$g_state \
        timeout 30 "$GPUOP" toolkit cdi list --driver-root /run/nvidia/driver \
        --host-root "$host" >"$WORK/list" 2>"$WORK/err" || fail "$name: cdi list: $(cat "$WORK/err")"
    sed -n 's/^- name: //p' "$WORK/$name.yaml" | tr -d '"' | sed 's|^|nvidia.com/gpu=|' >"$WORK/names"
    cmp -s "$WORK/list" "$WORK/names" || fail "$name: cdi list differs from the spec's names"
    # --output: the same bytes, written atomically
    gen "$fleet" "$host" /run/nvidia/driver --output "$WORK/out-$name/nvidia.yaml"
    cmp -s "$WORK/out-$name/nvidia.yaml" "$WORK/$name.yaml" || fail "$name: --output differs"
done

# MIG fleet: every MIG device by <gpu>:<mig> and by UUID, with its capability nodes
mig=$WORK/dgx-a100-80gb-mig.yaml
[ "$(grep -c '^- name: "[0-9]*:[0-9]*"$' "$mig")" = 26 ] || fail "MIG fleet: not 26 MIG index names"
[ "$(grep -c '^- name: MIG-' "$mig")" = 26 ] || fail "MIG fleet: not 26 MIG UUID names"
grep -q 'path: /dev/nvidia-caps/nvidia-cap' "$mig" || fail "MIG fleet: no capability nodes"

# a host driver root: no hostPath for the nodes, the libraries at their host paths
fleet=$SRC/sim/fleets/pcie-l4.yaml
sh "$HERE/fake-driver-root.sh" "$WORK/hostdrv" "$(version_of "$fleet")"
install_stub "$WORK/hostdrv"
gen "$fleet" "$WORK/hostdrv" /
if [ $rc = 0 ]; then
    cp "$WORK/out" "$WORK/pcie-l4-host-driver.yaml"
    check_golden pcie-l4-host-driver.yaml "$WORK/pcie-l4-host-driver.yaml"
    schema_check "$WORK/pcie-l4-host-driver.yaml"
else
    fail "host driver root: exited $rc: $(cat "$WORK/err")"
fi

# the hooks: gpuop's createContainer hooks run the installed gpuop; --install-dir moves them
spec=$WORK/pcie-l4.yaml
grep -q '^  - hookName: createContainer$' "$spec" || fail "pcie-l4: no createContainer hook"
[ "$(grep -c '^    path: /usr/local/nvidia/gpuop$' "$spec")" = 2 ] || fail "pcie-l4: not 2 hooks running /usr/local/nvidia/gpuop"
grep -q '^    - libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so$' "$spec" || fail "pcie-l4: no libcuda.so link hook"
fleet=$SRC/sim/fleets/pcie-l4.yaml
mkdir -p "$WORK/host-pcie-l4/opt/gpuop" && cp "$WORK/host-pcie-l4/usr/local/nvidia/gpuop" "$WORK/host-pcie-l4/opt/gpuop/gpuop"
gen "$fleet" "$WORK/host-pcie-l4" /run/nvidia/driver --install-dir /opt/gpuop
[ $rc = 0 ] && grep -q '^    path: /opt/gpuop/gpuop$' "$WORK/out" || fail "--install-dir: the hooks do not run /opt/gpuop/gpuop: $(cat "$WORK/err")"
# gpuop not installed where the hooks would run it: the spec has no hooks, and a warning says why
rm "$WORK/host-pcie-l4/usr/local/nvidia/gpuop"
gen "$fleet" "$WORK/host-pcie-l4" /run/nvidia/driver
if [ $rc != 0 ]; then
    fail "no gpuop installed: exited $rc: $(cat "$WORK/err")"
else
    grep -q 'hookName' "$WORK/out" && fail "no gpuop installed: the spec still has hooks"
    grep -q 'warn.*CDI hooks left out.*path=/usr/local/nvidia/gpuop.*not an executable file on the host' "$WORK/err" ||
        fail "no gpuop installed: no warning naming it: $(cat "$WORK/err")"
    sed '/^  hooks:$/,$d' "$spec" | cmp -s - "$WORK/out" || fail "no gpuop installed: the spec differs otherwise"
fi

# ---- links that lead outside the driver root ------------------------------------------------
# a library linked to /etc/shadow, an absolute .so.1 link, a binary linked outside: nothing the
# spec names is outside the driver root; the escaping files are left out, a warning names each
v=$(version_of "$fleet")
host=$WORK/escape
sh "$HERE/fake-driver-root.sh" "$host/run/nvidia/driver" "$v"
install_stub "$host"
lib=$host/run/nvidia/driver/usr/lib/x86_64-linux-gnu
ln -s /etc/shadow "$lib/libnvidia-escape.so.$v"
ln -sfn "/usr/lib/x86_64-linux-gnu/libcuda.so.$v" "$lib/libcuda.so.1"   # absolute, inside: rebased
ln -sfn "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.$v.gone" "$lib/libnvidia-cfg.so.1" # absolute, nowhere
rm "$host/run/nvidia/driver/usr/bin/nvidia-smi"
ln -s /bin/sh "$host/run/nvidia/driver/usr/bin/nvidia-smi"
gen "$fleet" "$host" /run/nvidia/driver
if [ $rc != 0 ]; then
    fail "escaping links: exited $rc: $(cat "$WORK/err")"
else
    if grep 'hostPath:' "$WORK/out" | grep -v 'hostPath: /run/nvidia/driver/' | grep -q .; then
        fail "escaping links: a hostPath outside the driver root: $(grep 'hostPath:' "$WORK/out" | grep -v /run/nvidia/driver/)"
    fi
    grep -q "libnvidia-escape" "$WORK/out" && fail "escaping links: the /etc/shadow link is in the spec"
    grep -q "shadow" "$WORK/out" && fail "escaping links: the spec names shadow"
    grep -q 'nvidia-smi' "$WORK/out" && fail "escaping links: the nvidia-smi link to /bin/sh is in the spec"
    grep -A1 "hostPath: /run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.$v\$" "$WORK/out" |
        grep -q "containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1\$" ||
        fail "escaping links: the absolute libcuda.so.1 link is not rebased into the driver root"
    for f in "/usr/lib/x86_64-linux-gnu/libnvidia-escape.so.$v" /usr/bin/nvidia-smi; do
        grep "warn" "$WORK/err" | grep "driver file left out of the CDI spec" | grep -q "path=$f " ||
            fail "escaping links: no warning names $f: $(cat "$WORK/err")"
    done
    grep -q "path=/usr/lib/x86_64-linux-gnu/libnvidia-escape.so.$v reason=.*/etc/shadow.*not inside the driver root" "$WORK/err" ||
        fail "escaping links: the warning does not say why: $(cat "$WORK/err")"
    schema_check "$WORK/out"
fi
# the driver root has its own /etc/shadow: the link stays out, it is not a library
mkdir -p "$host/run/nvidia/driver/etc" && echo 'root:*:1::::::' >"$host/run/nvidia/driver/etc/shadow"
gen "$fleet" "$host" /run/nvidia/driver
grep -q "shadow" "$WORK/out" && fail "escaping links: the driver root's /etc/shadow is mounted"
grep -q "path=/usr/lib/x86_64-linux-gnu/libnvidia-escape.so.$v reason=.*/etc/shadow.*not a library" "$WORK/err" ||
    fail "escaping links: no 'not a library' warning: $(cat "$WORK/err")"

# ---- bad input ---------------------------------------------------------------------------------
one_line_fail() { # what want-in-message
    if [ $rc = 0 ]; then
        fail "$1: exit 0"
    elif [ "$(wc -l <"$WORK/err")" != 1 ]; then
        fail "$1: not one line: $(cat "$WORK/err")"
    elif ! grep -q -- "$2" "$WORK/err"; then
        fail "$1: the error does not say \"$2\": $(cat "$WORK/err")"
    fi
}
fleet=$SRC/sim/fleets/dgx-h100.yaml
v=$(version_of "$fleet")

# a driver root without NVML
sh "$HERE/fake-driver-root.sh" "$WORK/nonvml/run/nvidia/driver" "$v" --no-nvml
gen "$fleet" "$WORK/nonvml" /run/nvidia/driver --output "$WORK/nonvml-out/nvidia.yaml"
one_line_fail "driver root without NVML" "driver root \"/run/nvidia/driver\": no libnvidia-ml.so.$v (NVML)"
[ -e "$WORK/nonvml-out" ] && fail "driver root without NVML: something was written"
# ... and NVML looked for in it (no --nvml-library): the same clear line
GPUOP_SIM_FLEET=$fleet timeout 30 env -u GPUOP_NVML_LIBRARY "$GPUOP" toolkit cdi generate \
    --host-root "$WORK/nonvml" --driver-root /run/nvidia/driver >"$WORK/out" 2>"$WORK/err"
rc=$?
one_line_fail "NVML from a driver root without it" "no libnvidia-ml.so.1 (NVML)"

# an output directory that cannot be written (a file where the directory should be)
: >"$WORK/afile"
gen "$fleet" "$WORK/host-dgx-h100" /run/nvidia/driver --output "$WORK/afile/nvidia.yaml"
one_line_fail "output directory not writable" "CDI spec directory \"$WORK/afile\""
[ "$(cat "$WORK/afile")" = "" ] || fail "output directory not writable: the file changed"

# an NVML that does not load
gen "$fleet" "$WORK/host-dgx-h100" /run/nvidia/driver --nvml-library "$WORK/nonexistent.so"
one_line_fail "NVML missing" "nonexistent.so"

# unknown runtime, unknown command: bad input (exit 2)
"$GPUOP" toolkit --runtime podman --host-root "$WORK/unknown" >"$WORK/out" 2>"$WORK/err"
rc=$?
one_line_fail "unknown runtime" 'unknown runtime "podman"'
[ $rc = 2 ] || fail "unknown runtime: exit $rc, not 2"
[ -e "$WORK/unknown" ] && fail "unknown runtime: something was written"
"$GPUOP" toolkit cdi frobnicate >"$WORK/out" 2>"$WORK/err"
rc=$?
one_line_fail "unknown command" 'unknown command "cdi frobnicate"'
[ $rc = 2 ] || fail "unknown command: exit $rc, not 2"

[ $schema_skipped = 1 ] && echo "note: the CDI schema check was skipped (no schema or jsonschema)"
echo "toolkit fleets: all good"
