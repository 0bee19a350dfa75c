#!/usr/bin/env bash
# deps.sh install|check|present PKG...: installs the Debian packages gpuop needs to build and test.
# `check` installs only when something is missing, so every make target can call it cheaply;
# `present` installs nothing and exits 1 when something is missing (an optional step's test).
set -euo pipefail
mode=$1
shift
missing=()
for p in "$@"; do
    # @cmd=pkg: satisfied by any `cmd` on PATH (e.g. a vendor build), else install pkg.
    if [[ $p == @* ]]; then
        cmd=${p#@}
        cmd=${cmd%%=*}
        command -v "$cmd" >/dev/null 2>&1 || missing+=("${p#*=}")
        continue
    fi
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        missing+=("$p")
    fi
done
if [ "$mode" = present ]; then
    [ ${#missing[@]} -eq 0 ]
    exit
fi
if [ "$mode" = check ] && [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all ${#} packages present"
    exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# pkg:ARCH (the arm64 libraries of the cross build): dpkg must know the foreign architecture
# before apt-get update fetches its package lists.
for p in "${missing[@]}"; do
    [[ $p == *:* ]] || continue
    a=${p##*:}
    if [ "$a" != "$(dpkg --print-architecture)" ] && ! dpkg --print-foreign-architectures | grep -qx "$a"; then
        echo "deps: adding the dpkg architecture $a"
        $SUDO dpkg --add-architecture "$a"
    fi
done
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
