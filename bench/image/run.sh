#!/usr/bin/env bash
# The gpuop image's size: scripts/build-image.sh (what `make image` runs) on the build tree and,
# where it is built (make cross ARCH=arm64), the arm64 cross build: each image's compressed size
# (its layer is gzip-compressed: what a registry stores and a node pulls), the unpacked size and
# the largest files. One image serves every component but the driver.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
cross=${CROSS_BUILD:-build-arm64}
if [ -x "$cross/gpuop" ] && [ -f "$cross/gpuop-tomlx.so" ]; then
    ./scripts/build-image.sh "$build" "$build/gpuop-image.oci.tar" "$cross"
else
    echo "no arm64 build in $cross (make cross ARCH=arm64): the amd64 image alone"
    ./scripts/build-image.sh "$build"
fi
for root in "$build"/image/rootfs-*; do
    echo "${root##*/rootfs-}: largest files in the image (bytes):"
    (cd "$root" && find . -type f -printf '%s %p\n' | sort -rn | head -8)
    echo "${root##*/rootfs-}: files: $(find "$root" ! -type d | wc -l)"
done
