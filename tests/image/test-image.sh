#!/usr/bin/env bash
# The gpuop image (make image: scripts/build-image.sh): built as an OCI archive, its tag is the
# meson project version, its config runs gpuop as a non-root user; its layers, unpacked, hold the
# binary, the libraries it loads, CA certificates and the user files, nothing else (no shell, no
# package manager); the unpacked root filesystem runs `gpuop --help` and `gpuop version` under
# Debian's runc as that user, read-only, reaches for an API server (TLS set up, a connection
# refused) and loads its TOML module gpuop-tomlx.so (/usr/lib/gpuop).
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_root "buildah's storage and runc"
need_cmd buildah runc
cid=gpuop-image-test-$$
at_exit 'for c in a b c; do runc delete -f $cid-$c >/dev/null 2>&1; done'

# The build reads BUILD/gpuop; a private copy of the build tree's parts keeps the test's image
# work out of BUILD/image.
mkdir -p "$T/build"
cp "$B/gpuop" "$B/gpuop-tomlx.so" "$T/build/"
cp -r "$B/meson-info" "$T/build/meson-info"
"$S/scripts/build-image.sh" "$T/build" "$T/gpuop.oci.tar" | tee "$T/build.out"
version=$(meson introspect --projectinfo "$B" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
grep -q "^image gpuop:$version: .* bytes compressed" "$T/build.out" || fail "no size line for gpuop:$version"

# Unpack the archive as a runtime would: index -> manifest -> config and layers.
mkdir -p "$T/oci" "$T/rootfs"
tar -xf "$T/gpuop.oci.tar" -C "$T/oci"
python3 - "$T/oci" "$T/rootfs" "$version" <<'PY'
import gzip, io, json, sys, tarfile
oci, rootfs, version = sys.argv[1:4]
blob = lambda d: f"{oci}/blobs/{d.replace(':', '/')}"
index = json.load(open(f"{oci}/index.json"))
m = index["manifests"][0]
ref = m.get("annotations", {}).get("org.opencontainers.image.ref.name", "")
assert ref.endswith(f"gpuop:{version}") or ref == version, f"image ref {ref!r}, want gpuop:{version}"
manifest = json.load(open(blob(m["digest"])))
config = json.load(open(blob(manifest["config"]["digest"])))["config"]
assert config.get("User") == "65532:65532", f"image user {config.get('User')!r}, want 65532:65532"
assert config.get("Entrypoint") == ["/usr/bin/gpuop"], config.get("Entrypoint")
total = 0
for layer in manifest["layers"]:
    assert layer["mediaType"].endswith("tar+gzip"), f"layer not compressed: {layer['mediaType']}"
    total += layer["size"]
    with tarfile.open(blob(layer["digest"]), "r:gz") as tf:
        tf.extractall(rootfs)
print(f"manifest: {len(manifest['layers'])} layer(s), {total} bytes compressed, user {config['User']}")
PY

# Every file in the image, each one accounted for.
(cd "$T/rootfs" && find . ! -type d | sort) >"$T/files"
echo "image files: $(wc -l <"$T/files")"
cat "$T/files"
bad=$(grep -Ev '^\./usr/bin/gpuop$|^\./usr/lib/gpuop/gpuop-tomlx\.so$|^\./etc/(passwd|group|nsswitch\.conf|ssl/certs/ca-certificates\.crt)$|^\./(bin|lib|lib64)$|^\./usr/lib(64)?/(x86_64-linux-gnu/|aarch64-linux-gnu/)?(ld-linux[-a-z0-9_.]*\.so\.[0-9]+|lib[A-Za-z0-9_+.-]+\.so[0-9.]*)$' "$T/files" || true)
[ -z "$bad" ] || fail "files the image should not hold: $bad"
for f in sh bash dash busybox apt apt-get dpkg ls; do
    if [ -n "$(find "$T/rootfs" -name "$f" ! -type d)" ]; then fail "the image holds $f"; fi
done
grep -qx './usr/bin/gpuop' "$T/files" || fail "no /usr/bin/gpuop"
grep -q 'libgnutls\.so\.30' "$T/files" || fail "libgnutls.so.30 (the API client's TLS) missing"
grep -qx './usr/lib/gpuop/gpuop-tomlx.so' "$T/files" || fail "no /usr/lib/gpuop/gpuop-tomlx.so (the TOML parser)"
grep -q 'libtomlplusplus\.so\.3' "$T/files" || fail "libtomlplusplus.so.3 (gpuop-tomlx.so's) missing"
grep -q '^gpuop:x:65532:' "$T/rootfs/etc/passwd" || fail "no gpuop user in /etc/passwd"

# runc: the unpacked rootfs, read-only, as user 65532, no network but loopback.
mkdir -p "$T/bundle"
(cd "$T/bundle" && runc spec)
run() { # run NAME ARGS...: the container's stdout in $T/out.NAME, its exit status returned
    local name=$1; shift
    python3 - "$T/bundle/config.json" "$T/rootfs" "$@" <<'PY'
import json, sys
path, rootfs, args = sys.argv[1], sys.argv[2], sys.argv[3:]
c = json.load(open(path))
c["root"] = {"path": rootfs, "readonly": True}
c["process"].update(terminal=False, args=args, user={"uid": 65532, "gid": 65532},
                    env=["PATH=/usr/bin"])
json.dump(c, open(path, "w"))
PY
    timeout 30 runc run --bundle "$T/bundle" "$cid-$name" >"$T/out.$name" 2>"$T/err.$name"
}
run a /usr/bin/gpuop --help || fail "gpuop --help in the image: $(cat "$T/err.a" "$T/out.a")"
grep -q '^Usage: gpuop' "$T/out.a" || fail "gpuop --help printed: $(head -3 "$T/out.a")"
run b /usr/bin/gpuop version || fail "gpuop version in the image: $(cat "$T/err.b" "$T/out.b")"
grep -qx "gpuop $version" "$T/out.b" || fail "gpuop version printed: $(head -1 "$T/out.b"), want gpuop $version"
echo "in runc as 65532: $(head -1 "$T/out.b"); --help $(wc -l <"$T/out.a") lines"
# node-discovery reaches for the API server in the image and fails on the connection (a closed
# port on the container's own loopback), not on anything missing from the image.
mkdir -p "$T/rootfs/tmp/hr/etc" "$T/rootfs/tmp/hr/sys/bus/pci/devices"
printf 'ID=debian\nVERSION_ID="12"\n' >"$T/rootfs/tmp/hr/etc/os-release"
cat >"$T/rootfs/tmp/kc" <<'KC'
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1", certificate-authority: /etc/ssl/certs/ca-certificates.crt}
users:
- name: u
  user: {token: x}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
KC
if run c /usr/bin/gpuop node-discovery --oneshot --node-name n --host-root /tmp/hr --kubeconfig /tmp/kc; then
    fail "node-discovery reached a closed port"
fi
grep -qi "connect" "$T/err.c" || fail "node-discovery in the image: $(cat "$T/err.c" "$T/out.c")"
echo "in runc: node-discovery: $(grep -io "connect [^\"]*" "$T/err.c" | head -1)"
# The TOML parser (gpuop-tomlx.so, dlopen'd from ../lib/gpuop) loads in the image: the doctor's
# runtime check on a node root whose containerd config parses but names no GPU runtime gets as
# far as the config's content.
mkdir -p "$T/rootfs/tmp/dr/etc/containerd" "$T/rootfs/tmp/dr/run/containerd" \
    "$T/rootfs/tmp/dr/run/nvidia/validations"
: >"$T/rootfs/tmp/dr/run/containerd/containerd.sock"
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n' >"$T/rootfs/tmp/dr/etc/containerd/config.toml"
printf 'RUNTIME=containerd\n' >"$T/rootfs/tmp/dr/run/nvidia/validations/.toolkit-ctr-ready"
run d /usr/bin/gpuop doctor --host-root=/tmp/dr --json || true
python3 - "$T/out.d" <<'PY' >"$T/rt.d" || fail "gpuop doctor in the image: $(cat "$T/err.d" "$T/out.d")"
import json, sys
print(next(c["evidence"] for c in json.load(open(sys.argv[1]))["checks"] if c["id"] == "runtime"))
PY
grep -q 'no nvidia runtime with a BinaryName' "$T/rt.d" ||
    fail "the TOML parser did not load in the image: $(cat "$T/rt.d")"
echo "in runc: gpuop-tomlx.so loads (doctor: $(cat "$T/rt.d"))"
echo "PASS image"
