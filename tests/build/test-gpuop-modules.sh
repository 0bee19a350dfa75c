#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# build/gpuop links no C++: libstdc++, toml++ and libgcc_s are neither in its DT_NEEDED
# (readelf -d) nor among the libraries it loads at start (ldd); they come with its module
# gpuop-tomlx.so (src/lib/rtconfig), which exports one symbol and is loaded only where a
# runtime's TOML config is read. gpuop finds the module beside itself (the build tree) and in
# <prefix>/lib/gpuop (installed, the image), or where $GPUOP_TOMLX_MODULE says; without it, the
# runtime check (gpuop doctor, one shot) says which paths it tried and why, and nothing is
# written.
# usage: test-gpuop-modules.sh GPUOP GPUOP-TOMLX.SO
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
GPUOP=${1:?usage: test-gpuop-modules.sh GPUOP GPUOP-TOMLX.SO}
MOD=${2:?usage: test-gpuop-modules.sh GPUOP GPUOP-TOMLX.SO}
CXX_LIBS='libstdc\+\+|libtomlplusplus|libgcc_s'

needed() { readelf -d "$1" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $NF); print $NF }'; }
needed "$GPUOP" >"$T/needed"
[ -s "$T/needed" ] || fail "readelf -d $GPUOP: no NEEDED entries (not a dynamic executable?)"
echo "gpuop NEEDED: $(tr '\n' ' ' <"$T/needed")"
if grep -E "^($CXX_LIBS)" "$T/needed"; then
    fail "gpuop names C++ libraries in its DT_NEEDED (above): they belong to gpuop-tomlx.so"
fi
# The sanitizers' runtimes (check-asan) bring libstdc++ themselves: there, DT_NEEDED only.
if grep -qE '^lib(asan|ubsan|tsan)\.so' "$T/needed"; then
    echo "a sanitizer build: its runtime loads libstdc++; ldd not checked"
else
    ldd "$GPUOP" >"$T/ldd" || fail "ldd $GPUOP failed"
    if grep -E "$CXX_LIBS" "$T/ldd"; then
        fail "gpuop loads C++ libraries at start (ldd, above)"
    fi
fi
needed "$MOD" >"$T/mod-needed"
echo "gpuop-tomlx.so NEEDED: $(tr '\n' ' ' <"$T/mod-needed")"
grep -q '^libtomlplusplus\.so' "$T/mod-needed" || fail "gpuop-tomlx.so does not link toml++"
exports=$(nm -D --defined-only "$MOD" | awk '{ print $NF }' | tr '\n' ' ')
[ "$exports" = "gpuop_tomlx_module " ] || fail "gpuop-tomlx.so exports: $exports (want gpuop_tomlx_module only)"

# A node root whose toolkit configured containerd, with a containerd config that parses but is
# not configured: the doctor's runtime check gets as far as the config's content only when the
# module loaded.
R=$T/root
mkdir -p "$R/etc/containerd" "$R/run/containerd" "$R/run/nvidia/validations"
: >"$R/run/containerd/containerd.sock"
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.9"\n' \
    >"$R/etc/containerd/config.toml"
printf 'RUNTIME=containerd\n' >"$R/run/nvidia/validations/.toolkit-ctr-ready"
before=$(cd "$R" && find . -type f -exec md5sum {} + | sort)
parsed='no nvidia runtime with a BinaryName'

runtime_evidence() { # GPUOP [ENV...]: the doctor's runtime evidence on $R
    local bin=$1
    shift
    env -u GPUOP_TOMLX_MODULE -u GPUOP_NVML_LIBRARY "$@" "$bin" doctor --host-root="$R" --json \
        >"$T/out.json" 2>"$T/err" || true
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(next(c["evidence"] for c in d["checks"] if c["id"] == "runtime"))' "$T/out.json" ||
        fail "$bin doctor: no runtime check: $(cat "$T/out.json" "$T/err")"
}
expect() { # NAME WANT GPUOP [ENV...]
    local name=$1 want=$2
    shift 2
    local ev
    ev=$(runtime_evidence "$@")
    grep -qF -- "$want" <<<"$ev" || fail "$name: the runtime check says: $ev (want: $want)"
    [ "$(cd "$R" && find . -type f -exec md5sum {} + | sort)" = "$before" ] || fail "$name: a file changed"
    echo "ok $name: $ev"
}

mkdir -p "$T/tree" "$T/inst/bin" "$T/inst/lib/gpuop" "$T/none/bin" "$T/elsewhere"
cp "$GPUOP" "$T/tree/gpuop" && cp "$MOD" "$T/tree/gpuop-tomlx.so"
cp "$GPUOP" "$T/inst/bin/gpuop" && cp "$MOD" "$T/inst/lib/gpuop/gpuop-tomlx.so"
cp "$GPUOP" "$T/none/bin/gpuop" && cp "$MOD" "$T/elsewhere/gpuop-tomlx.so"
expect "beside the binary" "$parsed" "$T/tree/gpuop"
expect "installed in <prefix>/lib/gpuop" "$parsed" "$T/inst/bin/gpuop"
expect "named by GPUOP_TOMLX_MODULE" "$parsed" "$T/none/bin/gpuop" GPUOP_TOMLX_MODULE="$T/elsewhere/gpuop-tomlx.so"
expect "missing" "\"$T/none/bin/gpuop-tomlx.so\": cannot open shared object file: No such file or directory; \"$T/none/lib/gpuop/gpuop-tomlx.so\": cannot open shared object file" \
    "$T/none/bin/gpuop"
expect "GPUOP_TOMLX_MODULE naming nothing" "loading gpuop-tomlx.so from \$GPUOP_TOMLX_MODULE: \"$T/elsewhere/nothing.so\": cannot open shared object file" \
    "$T/tree/gpuop" GPUOP_TOMLX_MODULE="$T/elsewhere/nothing.so"
: >"$T/elsewhere/empty.so"
expect "not a shared object" "\"$T/elsewhere/empty.so\": " "$T/none/bin/gpuop" GPUOP_TOMLX_MODULE="$T/elsewhere/empty.so"
libc=$(ldd "$GPUOP" | awk '$1 ~ /^libc\.so/ { print $3 }')
expect "another library" "\"$libc\" has no gpuop_tomlx_module: not gpuop's gpuop-tomlx.so" \
    "$T/none/bin/gpuop" GPUOP_TOMLX_MODULE="$libc"
echo "PASS gpuop-modules"
