#!/usr/bin/env bash
# build-image.sh [BUILD] [ARCHIVE] [BUILD2...]: the gpuop image, as an OCI archive (default
# BUILD/gpuop-image.oci.tar), from BUILD/gpuop and its module BUILD/gpuop-tomlx.so; `make image`
# runs it. With one build tree, the archive holds one image of that tree's architecture. With
# more (`make image`: build/ and the cross build build-arm64/), it holds an OCI image index with
# one image per tree, each of its tree's architecture (read from the binary's ELF header: amd64,
# arm64) with its own libraries; the trees must declare the same version and be of different
# architectures. The root filesystems come from scripts/image-rootfs.sh (the binary, the
# libraries it loads, CA certificates, a non-root user); buildah (Debian package) turns each into
# an image FROM scratch, without pulling anything, and `buildah manifest` gathers them. The
# archive's name and tag are gpuop:<version>, the version meson.build's project() declares: the
# same reference the operator's default --operand-image and the Helm chart's appVersion carry.
# Needs root (buildah's storage); prints each image's compressed size. GPUOP_IMAGE_PUSH=DEST (a
# containers-transports destination, e.g. docker://registry.example.com/gpuop/gpuop:0.1.0; make
# image IMAGE_PUSH=...) also pushes the index with every image (buildah manifest push --all, TLS
# verified, buildah's usual credentials), with more than one build tree.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
out=${2:-$build/gpuop-image.oci.tar}
builds=("$build")
for b in "${@:3}"; do builds+=("$(cd "$b" && pwd)"); done
die() { echo "build-image: $*" >&2; exit 1; }
push=${GPUOP_IMAGE_PUSH:-}
[ -z "$push" ] || [ ${#builds[@]} -gt 1 ] || die "GPUOP_IMAGE_PUSH=$push: pushes the multi-architecture index; give two build trees"
command -v buildah >/dev/null || die "buildah not found (Debian package buildah; make deps installs it)"
[ "$(id -u)" = 0 ] || die "buildah needs root here (its storage under $build/image)"
project_version() {
    meson introspect --projectinfo "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])'
}
version=$(project_version "$build")
[ -n "$version" ] || die "no project version from meson introspect $build"
ref=gpuop:$version
rev=$(git -C "$here/.." rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
archs=()
for b in "${builds[@]}"; do
    [ -x "$b/gpuop" ] || die "$b/gpuop: not built (make build, or make cross ARCH=arm64)"
    v=$(project_version "$b")
    [ "$v" = "$version" ] || die "$b declares version $v, $build $version: one image index, one version"
    a=$("$here/image-rootfs.sh" --arch "$b/gpuop")
    for seen in "${archs[@]}"; do
        [ "$seen" != "$a" ] || die "$b/gpuop: a second $a build; one image per architecture"
    done
    archs+=("$a")
done

work=$build/image
rm -rf "$work"
mkdir -p "$work"
# A private, throwaway store (vfs: no overlay mounts needed), so nothing is left in the machine's
# container storage and no registry is ever asked.
bah() { buildah --root "$work/store" --runroot "$work/run" --storage-driver vfs "$@"; }
cleanup() { bah rm --all >/dev/null 2>&1 || true; rm -rf "$work/store" "$work/run"; }
trap cleanup EXIT
# image ARCH BUILD DEST: the image of BUILD's tree, for ARCH, committed to DEST.
image() {
    local arch=$1 b=$2 dest=$3 ctr
    "$here/image-rootfs.sh" "$b/gpuop" "$work/rootfs-$arch"
    ctr=$(bah from --pull=never --arch "$arch" --os linux --name "gpuop-image-$arch" scratch)
    bah copy "$ctr" "$work/rootfs-$arch/" / >/dev/null
    bah config --arch "$arch" --os linux --user 65532:65532 --workingdir / \
        --entrypoint '["/usr/bin/gpuop"]' --cmd '--help' \
        --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
        --label org.opencontainers.image.title=gpuop \
        --label org.opencontainers.image.version="$version" \
        --label org.opencontainers.image.revision="$rev" \
        --label org.opencontainers.image.licenses=Apache-2.0 "$ctr"
    bah commit --quiet --timestamp 0 --disable-compression=false --format oci --rm "$ctr" \
        "$dest" >/dev/null
}
rm -f "$out"
if [ ${#builds[@]} -eq 1 ]; then
    image "${archs[0]}" "$build" "oci-archive:$out:$ref"
else
    bah manifest create "$ref" >/dev/null
    for i in "${!builds[@]}"; do
        image "${archs[$i]}" "${builds[$i]}" "containers-storage:localhost/gpuop-${archs[$i]}:$version"
        bah manifest add "$ref" "containers-storage:localhost/gpuop-${archs[$i]}:$version" >/dev/null
    done
    bah manifest push --quiet --all --format oci "$ref" "oci-archive:$out:$ref" >/dev/null
    if [ -n "$push" ]; then
        bah manifest push --quiet --all --format oci "$ref" "$push" >/dev/null ||
            die "buildah manifest push --all $ref $push failed"
        echo "pushed $ref with ${#builds[@]} images to $push"
    fi
fi
[ -s "$out" ] || die "buildah wrote no archive at $out"

# Each image's compressed size: its manifest, config and layers as stored in the archive.
python3 - "$out" "$ref" <<'PY' >"$work/sizes"
import json, sys, tarfile
tf = tarfile.open(sys.argv[1])
blob = lambda d: json.load(tf.extractfile("blobs/" + d.replace(":", "/")))
top = json.load(tf.extractfile("index.json"))["manifests"][0]
entries = blob(top["digest"])["manifests"] if top["mediaType"].endswith("index.v1+json") else [top]
for e in entries:
    m = blob(e["digest"])
    arch = e.get("platform", {}).get("architecture") or blob(m["config"]["digest"])["architecture"]
    size = e["size"] + m["config"]["size"] + sum(l["size"] for l in m["layers"])
    print(arch, size)
PY
while read -r arch size; do
    unpacked=$(du -sb "$work/rootfs-$arch" | cut -f1)
    line="$size bytes compressed ($(( (size + 524288) / 1048576 )) MiB), $unpacked bytes unpacked"
    if [ ${#builds[@]} -eq 1 ]; then
        echo "image $ref: $out, $line"
    else
        echo "image $ref linux/$arch: $line"
    fi
done <"$work/sizes"
if [ ${#builds[@]} -gt 1 ]; then
    echo "index $ref: $out, $(stat -c %s "$out") bytes, platforms: $(awk '{ printf "%slinux/%s", (NR > 1 ? " " : ""), $1 }' "$work/sizes")"
fi
