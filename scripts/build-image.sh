#!/usr/bin/env bash
# build-image.sh [BUILD] [ARCHIVE]: the gpuop image, as an OCI archive (default
# BUILD/gpuop-image.oci.tar), from BUILD/gpuop and its module BUILD/gpuop-tomlx.so; `make image`
# runs it. The root filesystem comes from
# scripts/image-rootfs.sh (the binary, the libraries it loads, CA certificates, a non-root user);
# buildah (Debian package) turns it into an image FROM scratch, without pulling anything. Its
# name and tag are gpuop:<version>, the version meson.build's project() declares: the same
# reference the operator's default --operand-image and the Helm chart's appVersion carry.
# Needs root (buildah's storage); prints the archive's size, which is the compressed size.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
out=${2:-$build/gpuop-image.oci.tar}
die() { echo "build-image: $*" >&2; exit 1; }
command -v buildah >/dev/null || die "buildah not found (Debian package buildah; make deps installs it)"
[ "$(id -u)" = 0 ] || die "buildah needs root here (its storage under $build/image)"
[ -x "$build/gpuop" ] || die "$build/gpuop: not built (make build)"
version=$(meson introspect --projectinfo "$build" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
[ -n "$version" ] || die "no project version from meson introspect $build"
ref=gpuop:$version
rev=$(git -C "$here/.." rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

work=$build/image
rm -rf "$work"
mkdir -p "$work"
"$here/image-rootfs.sh" "$build/gpuop" "$work/rootfs"

# A private, throwaway store (vfs: no overlay mounts needed), so nothing is left in the machine's
# container storage and no registry is ever asked.
bah() { buildah --root "$work/store" --runroot "$work/run" --storage-driver vfs "$@"; }
cleanup() { bah rm --all >/dev/null 2>&1 || true; rm -rf "$work/store" "$work/run"; }
trap cleanup EXIT
ctr=$(bah from --pull=never --name gpuop-image-build scratch)
bah copy "$ctr" "$work/rootfs/" / >/dev/null
bah config --user 65532:65532 --workingdir / --entrypoint '["/usr/bin/gpuop"]' --cmd '--help' \
    --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --label org.opencontainers.image.title=gpuop \
    --label org.opencontainers.image.version="$version" \
    --label org.opencontainers.image.revision="$rev" \
    --label org.opencontainers.image.licenses=Apache-2.0 "$ctr"
rm -f "$out"
bah commit --quiet --timestamp 0 --disable-compression=false --format oci --rm "$ctr" \
    "oci-archive:$out:$ref" >/dev/null
[ -s "$out" ] || die "buildah commit wrote no archive at $out"
size=$(stat -c %s "$out")
unpacked=$(du -sb "$work/rootfs" | cut -f1)
echo "image $ref: $out, $size bytes compressed ($(( (size + 524288) / 1048576 )) MiB), $unpacked bytes unpacked"
