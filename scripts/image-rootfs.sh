#!/usr/bin/env bash
# image-rootfs.sh GPUOP_BINARY ROOTFS: lays out the gpuop image's root filesystem in ROOTFS (made
# empty first): the gpuop binary (stripped), its modules (gpuop-tomlx.so, found beside the binary:
# /usr/lib/gpuop/), the shared libraries they load as the dynamic linker resolves them on this
# machine (from ldd, never a hand-kept list; each under its own path, with its soname link), the
# CA certificates, /etc/passwd and /etc/group with the non-root user gpuop (65532) and nothing
# else: no shell, no package manager. Used by `make image`
# (scripts/build-image.sh) and by deploy/Containerfile's build stage, so both make the same tree.
set -euo pipefail
bin=${1:?usage: image-rootfs.sh GPUOP_BINARY ROOTFS}
root=${2:?usage: image-rootfs.sh GPUOP_BINARY ROOTFS}
die() { echo "image-rootfs: $*" >&2; exit 1; }
[ -x "$bin" ] || die "$bin: not an executable"
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || die "$ca: absent (Debian package ca-certificates)"
rm -rf "$root"
mkdir -p "$root"/{usr/bin,etc/ssl/certs,tmp}
chmod 1777 "$root/tmp"

strip --strip-unneeded -o "$root/usr/bin/gpuop" "$bin"
chmod 0755 "$root/usr/bin/gpuop"

# The libraries: what ldd resolves for the binary, plus each library the binary names in its ELF
# section .gpuop.dlopen (a library loaded with dlopen, which ldd cannot see; none today),
# found where the dynamic linker finds it (ldconfig's cache), with what ldd resolves for
# it. ldd prints "name => /path (addr)" per library and "/lib64/ld-linux-x86-64.so.2 (addr)" for
# the dynamic linker.
ldd_paths() {
    local out
    out=$(ldd "$1") || die "ldd $1 failed"
    if grep -q 'not found' <<<"$out"; then
        die "ldd $1: $(grep 'not found' <<<"$out" | tr -s ' \t' ' ')"
    fi
    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$out"
}
sect=$(mktemp)
trap 'rm -f "$sect"' EXIT
objcopy -O binary --only-section=.gpuop.dlopen "$bin" "$sect"
libs=$(ldd_paths "$bin")
for so in $(tr '\0' '\n' <"$sect" | grep -v '^$' || true); do
    path=$(ldconfig -p | awk -v s="$so" '$1 == s && !p { p = $NF } END { print p }')
    [ -n "$path" ] || die "$so (named in $bin's .gpuop.dlopen): not in the dynamic linker's cache"
    libs+=$'\n'$path$'\n'$(ldd_paths "$path")
done
# gpuop's own modules (util.h: module_open), loaded with dlopen where a component needs them, so
# ldd cannot see them either: each sits beside the binary in the build tree and goes to
# /usr/lib/gpuop/ in the image (where /usr/bin/gpuop looks: ../lib/gpuop from its folder),
# stripped, with the libraries ldd resolves for it. gpuop-tomlx.so is rtconfig's TOML parser
# (toml++ and libstdc++: the toolkit and the runtime checks).
mkdir -p "$root/usr/lib/gpuop"
for mod in gpuop-tomlx.so; do
    src=$(dirname "$bin")/$mod
    [ -f "$src" ] || die "$src: not built (ninja -C $(dirname "$bin") $mod): gpuop loads it"
    strip --strip-unneeded -o "$root/usr/lib/gpuop/$mod" "$src"
    chmod 0644 "$root/usr/lib/gpuop/$mod"
    libs+=$'\n'$(ldd_paths "$src")
done
libs=$(sort -u <<<"$libs")
[ -n "$libs" ] || die "ldd $bin listed no libraries"
# Each library is copied as the file it resolves to (its real directory), and the name ldd gave
# becomes a link to it in its real directory; the host's top-level usrmerge links (/lib ->
# usr/lib, /lib64 -> usr/lib64) are made the same, so every path ldd printed resolves in the image.
for lib in $libs; do
    real=$(readlink -f "$lib")
    dir=$(readlink -f "$(dirname "$lib")")
    mkdir -p "$root$(dirname "$real")" "$root$dir"
    [ -e "$root$real" ] || cp --no-preserve=ownership "$real" "$root$real"
    link=$dir/$(basename "$lib")
    if [ "$link" != "$real" ] && [ ! -e "$root$link" ]; then
        if [ "$(dirname "$real")" = "$dir" ]; then
            ln -s "$(basename "$real")" "$root$link"
        else
            ln -s "$real" "$root$link"
        fi
    fi
done
for d in lib lib64 bin sbin; do
    if [ -L "/$d" ] && [ -e "$root/$(readlink "/$d")" ]; then
        ln -sfn "$(readlink "/$d")" "$root/$d"
    fi
done

cp -L "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
chmod 0644 "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/:/sbin/nologin\ngpuop:x:65532:65532:gpuop:/:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\ngpuop:x:65532:\n' >"$root/etc/group"
# Name resolution without NSS modules: glibc's files and dns backends are built into libc.so.6.
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
chmod 0644 "$root"/etc/{passwd,group,nsswitch.conf}
