#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `gpuop cdi-hook` against container roots made here, as a runtime runs it (the container state
# on stdin, the bundle's config.json naming the root), with the host's ldconfig:
#   - an image's links never lead the hook outside the container's root: a library folder that
#     is an absolute link to a folder of this machine, an ld.so.conf.d that is one, a drop-in name
#     that is a link to a file of this machine; what the hook writes lands inside the root;
#   - an image without /etc: nothing to do, exit 0; a link already there is left as it is;
#   - bad input: an unknown hook, a malformed --link or --folder, flags of the other hook (exit
#     2); a state that is not JSON, a config.json without root.path (exit 1): one line each.
# Needs root (ldconfig -r chroots) and the host's ldconfig; skips (77) otherwise.
set -u
GPUOP=${1:?usage: root-test.sh gpuop}
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (ldconfig -r chroots)"
LDCONFIG=''
for l in /sbin/ldconfig.real /sbin/ldconfig /usr/sbin/ldconfig; do
    [ -x "$l" ] && { LDCONFIG=$l; break; }
done
[ -n "$LDCONFIG" ] || skip "no ldconfig on this machine"
# hook <bundle> <args...>: the state on stdin; rc, $T/err
hook() {
    local b=$1
    shift
    printf '{"ociVersion":"1.0.2","id":"c","status":"creating","pid":1,"bundle":"%s"}' "$b" |
        "$GPUOP" cdi-hook "$@" >"$T/out" 2>"$T/err"
    rc=$?
}
bundle() { # dir: a bundle whose root is dir/rootfs
    mkdir -p "$1/rootfs"
    echo '{"ociVersion":"1.0.2","root":{"path":"rootfs"}}' >"$1/config.json"
}

# ---- an image whose links point at this machine's folders ------------------------------------
B=$T/evil
bundle "$B"
R=$B/rootfs
OUT=$T/outside # a folder of this machine the image's links name
mkdir -p "$OUT/lib" "$OUT/confd" "$R/etc" "$R/usr/lib"
echo 'keep' >"$OUT/file"
ln -s "$OUT/lib" "$R/usr/lib/x86_64-linux-gnu"
hook "$B" create-symlinks --link libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so
[ $rc = 0 ] || fail_later "create-symlinks through an absolute folder link exited $rc: $(cat "$T/err")"
[ -e "$OUT/lib/libcuda.so" ] || [ -L "$OUT/lib/libcuda.so" ] && fail_later "create-symlinks wrote outside the root ($OUT/lib)"
[ "$(readlink "$R$OUT/lib/libcuda.so")" = libcuda.so.1 ] || fail_later "create-symlinks: the link is not in the root, where the image's link leads"
ln -s "$OUT/confd" "$R/etc/ld.so.conf.d"
hook "$B" update-ldcache --folder /usr/lib/x86_64-linux-gnu
[ $rc = 0 ] || fail_later "update-ldcache with ld.so.conf.d an absolute link exited $rc: $(cat "$T/err")"
[ -z "$(ls -A "$OUT/confd")" ] || fail_later "update-ldcache wrote into $OUT/confd: $(ls "$OUT/confd")"
[ -f "$R/etc/ld.so.cache" ] || fail_later "update-ldcache: no ld.so.cache in the root"
rm "$R/etc/ld.so.conf.d"
mkdir "$R/etc/ld.so.conf.d"
ln -s "$OUT/file" "$R/etc/ld.so.conf.d/00-gpuop-cdi.conf"
hook "$B" update-ldcache --folder /usr/lib/x86_64-linux-gnu
[ $rc = 0 ] || fail_later "update-ldcache with the drop-in a link exited $rc: $(cat "$T/err")"
[ "$(cat "$OUT/file")" = keep ] || fail_later "update-ldcache wrote through the drop-in's link into $OUT/file"
[ -L "$R/etc/ld.so.conf.d/00-gpuop-cdi.conf" ] && fail_later "update-ldcache: the drop-in is still the image's link"
grep -qx /usr/lib/x86_64-linux-gnu "$R/etc/ld.so.conf.d/00-gpuop-cdi.conf" || fail_later "update-ldcache: the drop-in does not list the folder"
echo "ok: the image's links lead the hooks nowhere outside its root"

# ---- nothing to do, or left as it is ------------------------------------------------------------
B=$T/scratch
bundle "$B"
hook "$B" update-ldcache --folder /usr/lib64
[ $rc = 0 ] || fail_later "an image without /etc: exit $rc: $(cat "$T/err")"
grep -q 'no /etc in the image' "$T/err" || fail_later "an image without /etc: not said: $(cat "$T/err")"
mkdir -p "$B/rootfs/usr/lib"
ln -s libcuda.so.999 "$B/rootfs/usr/lib/libcuda.so"
hook "$B" create-symlinks --link libcuda.so.1::/usr/lib/libcuda.so
[ $rc = 0 ] && [ "$(readlink "$B/rootfs/usr/lib/libcuda.so")" = libcuda.so.999 ] ||
    fail_later "an image's own libcuda.so: not left as it is ($rc, $(readlink "$B/rootfs/usr/lib/libcuda.so"))"
# --container-spec instead of the state
"$GPUOP" cdi-hook create-symlinks --container-spec "$B/config.json" --link a::/usr/lib/liba.so </dev/null 2>"$T/err"
[ "$(readlink "$B/rootfs/usr/lib/liba.so")" = a ] || fail_later "--container-spec: no link made: $(cat "$T/err")"
echo "ok: an image without /etc, a link the image has, --container-spec"

# ---- bad input ------------------------------------------------------------------------------------
bad() { # want-rc what want-in-message
    if [ $rc != "$1" ]; then
        fail_later "$2: exit $rc, not $1: $(cat "$T/err")"
    elif [ "$(wc -l <"$T/err")" != 1 ]; then
        fail_later "$2: not one line: $(cat "$T/err")"
    elif ! grep -q -- "$3" "$T/err"; then
        fail_later "$2: the error does not say \"$3\": $(cat "$T/err")"
    fi
}
hook "$B" frobnicate
bad 2 "unknown hook" 'unknown hook "frobnicate"'
hook "$B" create-symlinks --link libcuda.so.1
bad 2 "--link without ::" 'not TARGET::LINK'
hook "$B" create-symlinks --link a::../etc/passwd
bad 2 "--link relative" 'not an absolute path'
hook "$B" update-ldcache --folder /usr/../etc
bad 2 "--folder with .." '".." component'
hook "$B" create-symlinks --folder /usr/lib
bad 2 "--folder to create-symlinks" 'create-symlinks takes --link only'
hook "$B" update-ldcache --link a::/b
bad 2 "--link to update-ldcache" 'update-ldcache takes no --link'
echo 'not json' | "$GPUOP" cdi-hook update-ldcache --folder /usr/lib >"$T/out" 2>"$T/err"
rc=$?
bad 1 "a state that is not JSON" 'container state (stdin): not JSON'
echo '{"root":{}}' >"$T/noroot.json"
"$GPUOP" cdi-hook update-ldcache --container-spec "$T/noroot.json" </dev/null >"$T/out" 2>"$T/err"
rc=$?
bad 1 "config.json without root.path" "$T/noroot.json: root.path: missing"
[ $FAILURES = 0 ] || exit 1
echo "ok: bad input: one line, exit 2 (arguments) or 1 (the state)"
