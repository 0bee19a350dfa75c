#!/usr/bin/env bash
# test-image-multiarch.sh AMD64_BUILD ARM64_BUILD: the multi-architecture gpuop image (make image:
# scripts/build-image.sh with the native build and the cross build). The archive holds an OCI
# image index that lists linux/amd64 and linux/arm64, one version; each image's config names its
# architecture and runs gpuop as 65532; each unpacked root filesystem holds ELF files of its own
# architecture only (file(1)); each runs, chrooted into that root filesystem alone as 65532 (the
# arm64 one under qemu-aarch64-static, copied into it), `gpuop --version` and a component's
# --help: the same version, and the same output where both trees were configured at the same
# commit. Skips (77) where either build has no gpuop (a clone without `make cross ARCH=arm64`).
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
amd64=${1:?usage: test-image-multiarch.sh AMD64_BUILD ARM64_BUILD}
arm64=${2:?usage: test-image-multiarch.sh AMD64_BUILD ARM64_BUILD}
for b in "$amd64" "$arm64"; do
    if [ ! -x "$b/gpuop" ] || [ ! -f "$b/gpuop-tomlx.so" ]; then
        skip "$b: no gpuop and gpuop-tomlx.so built (the arm64 one: make cross ARCH=arm64)"
    fi
done
need_root "buildah's storage and chroot"
need_cmd buildah file chroot unshare qemu-aarch64-static aarch64-linux-gnu-strip

# Private copies of the build trees' parts keep the test's image work out of BUILD/image.
for a in amd64 arm64; do
    mkdir -p "$T/$a"
    cp "${!a}/gpuop" "${!a}/gpuop-tomlx.so" "$T/$a/"
    cp -r "${!a}/meson-info" "$T/$a/meson-info"
done
version=$(meson introspect --projectinfo "$amd64" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
# The push (make image IMAGE_PUSH=...) goes to a local OCI layout here instead of a registry.
GPUOP_IMAGE_PUSH=oci:$T/pushed:gpuop:$version \
    "$S/scripts/build-image.sh" "$T/amd64" "$T/gpuop.oci.tar" "$T/arm64" | tee "$T/build.out"
grep -q "^pushed gpuop:$version with 2 images to oci:$T/pushed" "$T/build.out" || fail "no push line"
for a in amd64 arm64; do
    grep -q "^image gpuop:$version linux/$a: [0-9]* bytes compressed" "$T/build.out" ||
        fail "no size line for gpuop:$version linux/$a"
done

# Unpack as a runtime would: index.json -> the image index -> per platform a manifest -> its
# config and layers.
mkdir -p "$T/oci"
tar -xf "$T/gpuop.oci.tar" -C "$T/oci"
python3 - "$T/oci" "$T" "$version" <<'PY'
import json, sys, tarfile
oci, out, version = sys.argv[1:4]
blob = lambda d: f"{oci}/blobs/{d.replace(':', '/')}"
top = json.load(open(f"{oci}/index.json"))["manifests"]
assert len(top) == 1, f"index.json lists {len(top)} entries, want the one image index"
ref = top[0].get("annotations", {}).get("org.opencontainers.image.ref.name", "")
assert ref.endswith(f"gpuop:{version}") or ref == version, f"ref {ref!r}, want gpuop:{version}"
assert top[0]["mediaType"] == "application/vnd.oci.image.index.v1+json", top[0]["mediaType"]
index = json.load(open(blob(top[0]["digest"])))
platforms = sorted(f"{m['platform']['os']}/{m['platform']['architecture']}" for m in index["manifests"])
assert platforms == ["linux/amd64", "linux/arm64"], f"the index lists {platforms}"
for m in index["manifests"]:
    arch = m["platform"]["architecture"]
    manifest = json.load(open(blob(m["digest"])))
    config = json.load(open(blob(manifest["config"]["digest"])))
    assert (config["os"], config["architecture"]) == ("linux", arch), (arch, config["os"], config["architecture"])
    c = config["config"]
    assert c.get("User") == "65532:65532", f"{arch}: user {c.get('User')!r}"
    assert c.get("Entrypoint") == ["/usr/bin/gpuop"], f"{arch}: {c.get('Entrypoint')}"
    labels = c.get("Labels", {})
    assert labels.get("org.opencontainers.image.version") == version, f"{arch}: {labels}"
    total = 0
    for layer in manifest["layers"]:
        assert layer["mediaType"].endswith("tar+gzip"), f"{arch}: layer not compressed: {layer['mediaType']}"
        total += layer["size"]
        with tarfile.open(blob(layer["digest"]), "r:gz") as tf:
            tf.extractall(f"{out}/rootfs-{arch}")
    print(f"linux/{arch}: {len(manifest['layers'])} layer(s), {total} bytes compressed")
PY
# The pushed layout holds the same index, naming the same two image manifests as the archive.
python3 - "$T/oci" "$T/pushed" <<'PY'
import json, sys
def platforms(d):
    top = json.load(open(f"{d}/index.json"))["manifests"]
    idx = [m for m in top if m["mediaType"].endswith("index.v1+json")]
    assert len(idx) == 1, f"{d}: {len(idx)} image indexes"
    index = json.load(open(f"{d}/blobs/{idx[0]['digest'].replace(':', '/')}"))
    return sorted((m["platform"]["architecture"], m["digest"]) for m in index["manifests"])
a, b = platforms(sys.argv[1]), platforms(sys.argv[2])
assert a == b, f"archive {a}, pushed {b}"
print("pushed: " + " ".join(f"linux/{arch}" for arch, _ in b))
PY

# Each image's ELF files are of its own architecture, its libraries from its multiarch folder.
for a in amd64 arm64; do
    case $a in amd64) want='x86-64' triplet=x86_64-linux-gnu ;; arm64) want='ARM aarch64' triplet=aarch64-linux-gnu ;; esac
    r=$T/rootfs-$a
    n=0
    while IFS= read -r -d '' f; do
        desc=$(file -b "$f")
        case $desc in ELF*) ;; *) continue ;; esac
        n=$((n + 1))
        case $desc in *"$want"*) ;; *) fail "$a image: ${f#"$r"} is $desc" ;; esac
    done < <(find "$r" -type f -print0)
    [ "$n" -ge 4 ] || fail "$a image: $n ELF files (gpuop, its module, libc and the loader at least)"
    [ -f "$r/usr/lib/$triplet/libc.so.6" ] || fail "$a image: no /usr/lib/$triplet/libc.so.6"
    [ -f "$r/usr/lib/$triplet/libtomlplusplus.so.3" ] || fail "$a image: no libtomlplusplus.so.3"
    if [ -n "$(find "$r" -path '*linux-gnu*' ! -path "*/$triplet*" -print -quit)" ]; then
        fail "$a image holds another architecture's folder: $(find "$r" -path '*linux-gnu*' ! -path "*/$triplet*" | head -3)"
    fi
    echo "$a image: $n ELF files, all $want"
done
file -b "$T/rootfs-arm64/usr/bin/gpuop"

# The entry point in each root filesystem alone (chroot, so nothing of this machine's is found),
# as the image's user, with its own /proc (a mount and PID namespace of its own, as a container
# has); the arm64 one through qemu-user, its static binary copied into the root.
cp /usr/bin/qemu-aarch64-static "$T/rootfs-arm64/qemu-aarch64-static"
mkdir -p "$T/rootfs-amd64/proc" "$T/rootfs-arm64/proc"
run() { # run ARCH ARGS...: stdout in $T/out.ARCH
    local a=$1 wrap=()
    shift
    [ "$a" = amd64 ] || wrap=(/qemu-aarch64-static)
    timeout 60 unshare --mount --pid --fork --mount-proc="$T/rootfs-$a/proc" \
        chroot --userspec=65532:65532 "$T/rootfs-$a" "${wrap[@]}" /usr/bin/gpuop "$@" \
        >"$T/out.$a" 2>"$T/err.$a" || fail "$a image: gpuop $*: $(cat "$T/err.$a" "$T/out.$a")"
}
for a in amd64 arm64; do run "$a" --version; done
grep -qx "gpuop $version" "$T/out.arm64" || fail "arm64 gpuop --version printed: $(head -1 "$T/out.arm64")"
# The same version. The revision (meson.build takes it when a tree is configured) and the build
# date may differ between two trees configured at different times: the revisions are printed, and
# only equal ones make the rest of the output, and the component's help, required to be equal.
rev_a=$(grep '^git:' "$T/out.amd64" || true) rev_b=$(grep '^git:' "$T/out.arm64" || true)
[ "$(head -1 "$T/out.amd64")" = "gpuop $version" ] || fail "amd64 gpuop --version printed: $(head -1 "$T/out.amd64")"
if [ "$rev_a" = "$rev_b" ]; then
    # built: and sanitizers: say how a tree was built (the sanitizer build runs this test too)
    diff <(grep -Ev '^(built|sanitizers):' "$T/out.amd64") <(grep -Ev '^(built|sanitizers):' "$T/out.arm64") ||
        fail "gpuop --version differs between the amd64 and the arm64 image"
else
    echo "note: the trees were configured at different commits (amd64 ${rev_a#git: }, arm64 ${rev_b#git: })"
fi
echo "both images: $(head -1 "$T/out.arm64"); amd64 $rev_a, arm64 $rev_b"
for a in amd64 arm64; do run "$a" feature-discovery --help; done
for a in amd64 arm64; do
    grep -q '^Usage: gpuop feature-discovery' "$T/out.$a" ||
        fail "$a gpuop feature-discovery --help printed: $(head -2 "$T/out.$a")"
done
if [ "$rev_a" = "$rev_b" ]; then
    cmp -s "$T/out.amd64" "$T/out.arm64" || fail "feature-discovery --help differs between the images"
fi
echo "both images: feature-discovery --help, $(wc -l <"$T/out.amd64") and $(wc -l <"$T/out.arm64") lines"
echo "PASS image-multiarch"
