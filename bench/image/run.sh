#!/usr/bin/env bash
# The gpuop image's size: `make image` (scripts/build-image.sh) on the build tree, then the
# archive's size (its layer is gzip-compressed: what a registry stores and a node pulls), the
# unpacked size and the largest files. One image serves every component but the driver.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
./scripts/build-image.sh "$build"
echo "largest files in the image (bytes):"
(cd "$build/image/rootfs" && find . -type f -printf '%s %p\n' | sort -rn | head -8)
echo "files: $(find "$build/image/rootfs" ! -type d | wc -l)"
