#!/usr/bin/env bash
# image-rootfs.sh GPUOP_BINARY ROOTFS: lays out the gpuop image's root filesystem in ROOTFS (made
# empty first): the gpuop binary (stripped), its modules (gpuop-tomlx.so, found beside the binary:
# /usr/lib/gpuop/), the shared libraries they load (never a hand-kept list; each under its own
# path, with its soname link), the CA certificates, /etc/passwd and /etc/group with the non-root
# user gpuop (65532) and nothing else: no shell, no package manager. Used by `make image`
# (scripts/build-image.sh) and by deploy/Containerfile's build stage, so both make the same tree.
#
# The binary's architecture is read from its ELF header. For this machine's own architecture the
# libraries are the ones ldd resolves. For another one (an aarch64 gpuop from `make cross
# ARCH=arm64` on an x86-64 machine, which ldd cannot run) they are resolved from the ELF files'
# DT_NEEDED entries, recursively, in that architecture's Debian multiarch folders
# (/usr/lib/aarch64-linux-gnu, from the :arm64 packages) with its dynamic loader (the program
# interpreter the binary names); the binaries are stripped with that architecture's binutils
# (binutils-aarch64-linux-gnu). Every ELF file laid out is checked to be of the binary's machine.
#
# image-rootfs.sh --arch GPUOP_BINARY prints the binary's OCI architecture (amd64, arm64).
set -euo pipefail
die() { echo "image-rootfs: $*" >&2; exit 1; }
# elf_arch FILE: the OCI architecture and the Debian multiarch triplet of an ELF file, from the
# machine its header names; nothing for a file that is not ELF or of another machine.
elf_arch() {
    local m
    m=$(LC_ALL=C readelf -h "$1" 2>/dev/null | sed -n 's/^ *Machine: *//p')
    case $m in
    "Advanced Micro Devices X86-64") echo "amd64 x86_64-linux-gnu" ;;
    AArch64) echo "arm64 aarch64-linux-gnu" ;;
    "") ;;
    *) echo "unknown -" ;;
    esac
}
command -v readelf >/dev/null || die "readelf not found (Debian package binutils)"
if [ "${1:-}" = --arch ]; then
    bin=${2:?usage: image-rootfs.sh --arch GPUOP_BINARY}
    read -r arch _ <<<"$(elf_arch "$bin")" || true
    case ${arch:-} in amd64 | arm64) echo "$arch" ;; *) die "$bin: not an amd64 or arm64 ELF file" ;; esac
    exit 0
fi
bin=${1:?usage: image-rootfs.sh GPUOP_BINARY ROOTFS}
root=${2:?usage: image-rootfs.sh GPUOP_BINARY ROOTFS}
[ -x "$bin" ] || die "$bin: not an executable"
read -r arch triplet <<<"$(elf_arch "$bin")" || true
case ${arch:-} in amd64 | arm64) ;; *) die "$bin: not an amd64 or arm64 ELF file" ;; esac
case $(uname -m) in x86_64) host_arch=amd64 ;; aarch64) host_arch=arm64 ;; *) host_arch=$(uname -m) ;; esac
if [ "$arch" = "$host_arch" ]; then
    foreign=
    strip=strip objcopy=objcopy
else
    # Another architecture's binary: its own binutils, its own library folders.
    foreign=1
    strip=$triplet-strip objcopy=$triplet-objcopy
    for t in "$strip" "$objcopy"; do
        command -v "$t" >/dev/null || die "$t not found (Debian package binutils-$triplet) for $arch binary $bin"
    done
fi
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || die "$ca: absent (Debian package ca-certificates)"
rm -rf "$root"
mkdir -p "$root"/{usr/bin,etc/ssl/certs,tmp}
chmod 1777 "$root/tmp"

"$strip" --strip-unneeded -o "$root/usr/bin/gpuop" "$bin"
chmod 0755 "$root/usr/bin/gpuop"

# The libraries a binary loads (lib_paths FILE: their paths, one a line, the dynamic loader's
# among them). This machine's architecture: what ldd resolves; ldd prints "name => /path (addr)"
# per library and "/lib64/ld-linux-x86-64.so.2 (addr)" for the dynamic loader. Another
# architecture: the DT_NEEDED names, each found in that architecture's multiarch folders, and
# theirs in turn, plus the program interpreter FILE names (readelf reads any machine's ELF).
ldd_paths() {
    local out
    out=$(ldd "$1") || die "ldd $1 failed"
    if grep -q 'not found' <<<"$out"; then
        die "ldd $1: $(grep 'not found' <<<"$out" | tr -s ' \t' ' ')"
    fi
    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$out"
}
# The folders the dynamic loader of a Debian system of that architecture searches by default
# (multiarch first); a library found there but of another machine is passed over, as the loader
# does.
lib_dirs=("/lib/$triplet" "/usr/lib/$triplet" /lib /usr/lib)
find_lib() { # find_lib SONAME WHO: the library's path, or fail naming WHO
    local d
    for d in "${lib_dirs[@]}"; do
        if [ -e "$d/$1" ] && [ "$(elf_arch "$d/$1")" = "$arch $triplet" ]; then
            echo "$d/$1"
            return
        fi
    done
    die "$1 (needed by $2): no $arch library of that name in ${lib_dirs[*]} (install its :$arch package)"
}
needed_paths() {
    local -a todo=("$1")
    local -A seen=()
    local f so interp dyn path
    interp=$(LC_ALL=C readelf -l "$1" | sed -n 's/.*Requesting program interpreter: \(.*\)]$/\1/p')
    [ -z "$interp" ] || echo "$interp"
    while [ ${#todo[@]} -gt 0 ]; do
        f=${todo[0]}
        todo=("${todo[@]:1}")
        dyn=$(LC_ALL=C readelf -d "$f") || die "readelf -d $f failed"
        if grep -qE '\((RPATH|RUNPATH)\)' <<<"$dyn"; then
            die "$f: has an RPATH/RUNPATH, which this layout does not follow"
        fi
        for so in $(sed -n 's/.*(NEEDED).*Shared library: \[\(.*\)\]$/\1/p' <<<"$dyn"); do
            [ -z "${seen[$so]:-}" ] || continue
            seen[$so]=1
            path=$(find_lib "$so" "$f")
            echo "$path"
            todo+=("$path")
        done
    done
}
lib_paths() {
    if [ -n "$foreign" ]; then needed_paths "$1"; else ldd_paths "$1"; fi
}
# A library named by soname alone (.gpuop.dlopen): where the dynamic loader would find it.
soname_path() { # soname_path SONAME WHO
    local path
    if [ -n "$foreign" ]; then
        find_lib "$1" "$2"
        return
    fi
    path=$(ldconfig -p | awk -v s="$1" '$1 == s && !p { p = $NF } END { print p }')
    [ -n "$path" ] || die "$1 (named in $2's .gpuop.dlopen): not in the dynamic linker's cache"
    echo "$path"
}

# The libraries: those of the binary, plus each library the binary names in its ELF section
# .gpuop.dlopen (a library loaded with dlopen, which ldd and DT_NEEDED cannot show; none today),
# with its own.
sect=$(mktemp)
trap 'rm -f "$sect"' EXIT
"$objcopy" -O binary --only-section=.gpuop.dlopen "$bin" "$sect"
libs=$(lib_paths "$bin")
for so in $(tr '\0' '\n' <"$sect" | grep -v '^$' || true); do
    path=$(soname_path "$so" "$bin")
    libs+=$'\n'$path$'\n'$(lib_paths "$path")
done
# gpuop's own modules (util.h: module_open), loaded with dlopen where a component needs them, so
# ldd cannot see them either: each sits beside the binary in the build tree and goes to
# /usr/lib/gpuop/ in the image (where /usr/bin/gpuop looks: ../lib/gpuop from its folder),
# stripped, with the libraries it loads. gpuop-tomlx.so is rtconfig's TOML parser (toml++ and
# libstdc++: the toolkit and the runtime checks).
mkdir -p "$root/usr/lib/gpuop"
for mod in gpuop-tomlx.so; do
    src=$(dirname "$bin")/$mod
    [ -f "$src" ] || die "$src: not built (ninja -C $(dirname "$bin") $mod): gpuop loads it"
    [ "$(elf_arch "$src")" = "$arch $triplet" ] || die "$src: not an $arch ELF file like $bin"
    "$strip" --strip-unneeded -o "$root/usr/lib/gpuop/$mod" "$src"
    chmod 0644 "$root/usr/lib/gpuop/$mod"
    libs+=$'\n'$(lib_paths "$src")
done
libs=$(sort -u <<<"$libs")
[ -n "$libs" ] || die "$bin: no libraries found"
# Each library is copied as the file it resolves to (its real directory), and the name it was
# found by becomes a link to it in its real directory; the host's top-level usrmerge links (/lib
# -> usr/lib, /lib64 -> usr/lib64) are made the same, so every path found resolves in the image.
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

# Only the binary's architecture: an ELF file of another machine here would be a library taken
# from the wrong folders.
while IFS= read -r -d '' f; do
    a=$(elf_arch "$f")
    [ -z "$a" ] || [ "$a" = "$arch $triplet" ] || die "${f#"$root"}: ${a%% *} ELF file in the $arch image"
done < <(find "$root" -type f -print0)
