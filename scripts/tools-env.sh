# SPDX-License-Identifier: Apache-2.0
# Sourced by the tests, the demo and the benchmarks: puts the pinned kubectl and helm
# (scripts/tools.sh) first on PATH and names them KUBECTL and HELM, so nothing drives kubesim
# with whichever kubectl the machine has. GPUOP_KUBECTL (meson's test environment) wins, else
# <source>/${BUILD:-build}/tools/bin. Returns 1 with the reason in TOOLS_MISSING when absent.
_tools_bin=${BUILD:-build}
[[ $_tools_bin == /* ]] || _tools_bin=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/$_tools_bin
_tools_bin=$(dirname "${GPUOP_KUBECTL:-$_tools_bin/tools/bin/kubectl}")
KUBECTL=$_tools_bin/kubectl
HELM=${GPUOP_HELM:-$_tools_bin/helm}
# helm_q ARGS...: the pinned helm, without its "found symbolic link in path" warnings (the build
# tree's chart links). Its errors reach stderr before it returns, so a caller that sends them to
# a file can read the file at once (a process substitution would still be writing it).
helm_q() {
    local err rc=0
    err=$(mktemp) || return 1
    "$HELM" "$@" 2>"$err" || rc=$?
    grep -v 'found symbolic link in path' "$err" >&2 || true
    rm -f "$err"
    return $rc
}
if [ -x "$KUBECTL" ]; then
    PATH=$_tools_bin:$PATH
    export PATH KUBECTL HELM
    unset _tools_bin
    true
else
    TOOLS_MISSING="pinned kubectl not found at $KUBECTL (make deps or scripts/tools.sh installs it)"
    unset _tools_bin
    false
fi
