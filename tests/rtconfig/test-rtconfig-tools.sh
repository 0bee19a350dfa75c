#!/usr/bin/env bash
# The runtimes' own tools on what rtconfig writes, and the file-level contract per runtime: a
# user's settings survive, configuring twice changes nothing, restore gives the original back
# byte for byte.
#   containerd: `containerd --config FILE config dump` (Debian 12: containerd 1.6) shows the
#     nvidia runtime, its BinaryName and the user's settings, for configs that started as
#     version 1, 2, an empty file and no file. containerd 1.6 predates CDI (1.7) and drops
#     enable_cdi from its dump; the drop-in's enable_cdi is then read with Python's tomllib (an
#     independent TOML parser), and required in the dump when the installed containerd knows it.
#     Version 3 (containerd 2.x, not in Debian 12): tomllib on the result.
#   docker: Debian 12's dockerd (20.10) predates `--validate` (23.0); dockerd loads and validates
#     the config file and is stopped right after, at its pidfile (a path under a regular file),
#     in a private mount namespace. A bad file (negative control) fails at the config step.
#   CRI-O: not packaged in Debian 12; the drop-in is read with tomllib (a round trip).
# Usage: test-rtconfig-tools.sh RTCONFIG-TOOL
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
TOOL=$1
WORK=$T
BIN=/usr/local/nvidia/toolkit/gpuop
python3 -c 'import tomllib' 2>/dev/null || skip "python3 tomllib missing"
toml_expect() { # FILE KEY/PATH=VALUE...: each value read with tomllib equals VALUE
    python3 - "$@" <<'PY'
import sys, tomllib
d = tomllib.load(open(sys.argv[1], 'rb'))
for arg in sys.argv[2:]:
    path, want = arg.split('=', 1)
    v = d
    for k in path.split('/'):
        v = v.get(k) if isinstance(v, dict) else None
    got = str(v).lower() if isinstance(v, bool) else str(v)
    if got != want:
        sys.exit(f"{sys.argv[1]}: {path} is {got!r}, want {want!r}")
PY
}

have_containerd=1; command -v containerd >/dev/null || have_containerd=0
have_dockerd=1; DOCKERD=$(command -v dockerd || echo /usr/sbin/dockerd); [ -x "$DOCKERD" ] || have_dockerd=0
[ "$have_containerd" = 1 ] && [ "$have_dockerd" = 1 ] ||
    skip "containerd or dockerd missing (make deps installs containerd and docker.io)"

# ---- containerd ----------------------------------------------------------------------------
cdi_known=0
containerd config default 2>/dev/null | grep -q enable_cdi && cdi_known=1

containerd_case() { # NAME VERSION PLUGIN; the config comes on stdin ("-missing-" for none)
    local name=$1 version=$2 plugin=$3 d=$WORK/ctd-$1
    mkdir -p "$d"
    local cfg=$d/config.toml dropin=$d/conf.d/99-nvidia.toml
    local in; in=$(cat)
    [ "$in" = "-missing-" ] || printf '%s' "$in" > "$cfg"
    [ -e "$cfg" ] && cp "$cfg" "$d/orig"
    local args=(--config "$cfg" --dropin "$dropin" --state "$d/state")
    [ "$("$TOOL" configure / containerd "$BIN" "${args[@]}")" = changed ] || fail "$name: first configure"
    [ "$("$TOOL" configure / containerd "$BIN" "${args[@]}")" = unchanged ] || fail "$name: second configure changed something"
    "$TOOL" check / containerd "$BIN" "${args[@]}" || fail "$name: check"
    grep -qF "$dropin" "$cfg" || fail "$name: no imports entry"
    toml_expect "$dropin" "plugins/$plugin/enable_cdi=true" \
        "plugins/$plugin/containerd/runtimes/nvidia/options/BinaryName=$BIN" ||
        fail "$name: the drop-in lacks enable_cdi or BinaryName"
    if [ "$version" != 3 ]; then
        containerd --config "$cfg" config dump > "$d/dump" 2> "$d/dump.err" ||
            { cat "$d/dump.err"; fail "$name: containerd config dump failed"; }
        grep -q 'containerd.runtimes.nvidia\]' "$d/dump" || fail "$name: dump lacks the nvidia runtime"
        grep -q 'containerd.runtimes.runc\]' "$d/dump" || fail "$name: runc is gone from the dump"
        grep -qF "BinaryName = \"$BIN\"" "$d/dump" || fail "$name: dump lacks BinaryName"
        if [ "$cdi_known" = 1 ]; then
            grep -q 'enable_cdi = true' "$d/dump" || fail "$name: dump lacks enable_cdi"
        fi
        if grep -q mirror.example "$d/orig" 2>/dev/null; then
            grep -q 'mirror.example' "$d/dump" || fail "$name: the user's registry mirror is gone"
            [ "$(grep -c 'SystemdCgroup = true' "$d/dump")" -ge 2 ] ||
                fail "$name: SystemdCgroup not on runc and nvidia"
        fi
    fi
    "$TOOL" restore / containerd "$BIN" "${args[@]}" || fail "$name: restore"
    if [ -e "$d/orig" ]; then cmp "$cfg" "$d/orig" || fail "$name: restore is not byte for byte"
    else [ ! -e "$cfg" ] || fail "$name: restore left a config that was not there"; fi
    [ ! -e "$dropin" ] || fail "$name: restore left the drop-in"
    echo "ok containerd $name"
}

containerd_case v1 1 cri <<'EOF2'
# a version 1 config: no version key
oom_score = -999
[plugins.cri]
  sandbox_image = "registry.k8s.io/pause:3.9"
[plugins.cri.registry.mirrors."docker.io"]
  endpoint = ["https://mirror.example.com"]
[plugins.cri.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins.cri.containerd.runtimes.runc.options]
  SystemdCgroup = true
EOF2
containerd_case v2 2 io.containerd.grpc.v1.cri <<'EOF2'
version = 2
root = "/var/lib/containerd"   # comments survive

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.9"
    [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
      endpoint = ["https://mirror.example.com"]
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = true
EOF2
containerd_case v2-imports 2 io.containerd.grpc.v1.cri <<'EOF2'
version = 2
imports = ["/etc/containerd/site.d/*.toml"]
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
  endpoint = ["https://mirror.example.com"]
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
EOF2
printf '' | containerd_case empty 2 io.containerd.grpc.v1.cri
echo -missing- | containerd_case missing 2 io.containerd.grpc.v1.cri
containerd_case v3 3 io.containerd.cri.v1.runtime <<'EOF2'
version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = true
EOF2
[ "$cdi_known" = 1 ] || echo "note: containerd $(containerd --version | awk '{print $3}') predates CDI: enable_cdi checked in the drop-in with tomllib, not in the dump"

# ---- docker --------------------------------------------------------------------------------
docker_validate() { # FILE: 0 when dockerd accepts the config file
    local d=$WORK/dockerd; rm -rf "$d"; mkdir -p "$d"; touch "$d/file"
    local run=(timeout 30 "$DOCKERD" --config-file "$1" --pidfile "$d/file/pid" --data-root "$d/data"
               --exec-root "$d/exec" -H "unix://$d/d.sock")
    if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
        run=(unshare -m --propagation private "${run[@]}")
    fi
    "${run[@]}" > "$d/log" 2>&1 && { cat "$d/log"; echo "dockerd did not stop at its pidfile" >&2; return 1; }
    if grep -q 'unable to configure the Docker daemon' "$d/log"; then cat "$d/log" >&2; return 1; fi
    grep -q 'failed to start daemon: mkdir .*: not a directory' "$d/log" || { cat "$d/log" >&2; return 1; }
}
printf '{"default-runtime": "nvidia"}\n' > "$WORK/bad.json"
! docker_validate "$WORK/bad.json" 2>/dev/null || fail "docker: dockerd accepted a config it must refuse (the check cannot fail)"

docker_case() { # NAME [FLAGS...]; daemon.json on stdin ("-missing-" for none)
    local name=$1; shift
    local d=$WORK/docker-$name cfg; mkdir -p "$d"; cfg=$d/daemon.json
    local in; in=$(cat)
    [ "$in" = "-missing-" ] || printf '%s\n' "$in" > "$cfg"
    [ -e "$cfg" ] && cp "$cfg" "$d/orig"
    local args=(--config "$cfg" --state "$d/state" "$@")
    [ "$("$TOOL" configure / docker "$BIN" "${args[@]}")" = changed ] || fail "docker $name: first configure"
    [ "$("$TOOL" configure / docker "$BIN" "${args[@]}")" = unchanged ] || fail "docker $name: second configure changed something"
    "$TOOL" check / docker "$BIN" "${args[@]}" || fail "docker $name: check"
    docker_validate "$cfg" || fail "docker $name: dockerd refused the config"
    [ "$(jq -r .runtimes.nvidia.path "$cfg")" = "$BIN" ] || fail "docker $name: runtimes.nvidia.path"
    [ "$(jq -r .features.cdi "$cfg")" = true ] || fail "docker $name: features.cdi"
    if [ -e "$d/orig" ]; then
        # Every key the user had is still there with the same value.
        [ "$(jq -S 'del(.runtimes.nvidia, .features.cdi, ."default-runtime") | with_entries(select(.value != {}))' "$cfg")" = \
          "$(jq -S 'del(.runtimes.nvidia, .features.cdi, ."default-runtime") | with_entries(select(.value != {}))' "$d/orig")" ] ||
            fail "docker $name: the user's settings changed"
        # Bytes outside the edit are kept: every line of the original is still there, in order.
        diff "$d/orig" "$cfg" | grep -q '^<' && { diff "$d/orig" "$cfg"; fail "docker $name: original lines changed"; }
    fi
    "$TOOL" restore / docker "$BIN" "${args[@]}" || fail "docker $name: restore"
    if [ -e "$d/orig" ]; then cmp "$cfg" "$d/orig" || fail "docker $name: restore is not byte for byte"
    else [ ! -e "$cfg" ] || fail "docker $name: restore left a file that was not there"; fi
    echo "ok docker $name"
}
docker_case pretty <<'EOF2'
{
  "registry-mirrors": ["https://mirror.example.com"],
  "log-driver": "json-file",
  "log-opts": {
    "max-size": "10m"
  },
  "runtimes": {
    "custom": {
      "path": "/usr/local/bin/custom-runc"
    }
  }
}
EOF2
docker_case default --default <<'EOF2'
{"log-level": "warn", "features": {"buildkit": true}}
EOF2
echo -missing- | docker_case missing
printf '{}' | docker_case empty-object

# ---- CRI-O (not in Debian 12: a TOML round trip) -------------------------------------------
R=$WORK/crio
mkdir -p "$R/etc/crio/crio.conf.d"
cat > "$R/etc/crio/crio.conf" <<'EOF2'
[crio.runtime]
default_runtime = "crun"
[crio.runtime.runtimes.crun]
runtime_path = "/usr/bin/crun"
runtime_root = "/run/crun"
monitor_path = "/usr/libexec/crio/conmon"
allowed_annotations = ["io.containerd.userns"]
EOF2
printf '[crio.image]\npause_image = "registry.k8s.io/pause:3.9"\n' > "$R/etc/crio/crio.conf.d/10-site.conf"
cp "$R/etc/crio/crio.conf" "$WORK/crio.orig"; cp "$R/etc/crio/crio.conf.d/10-site.conf" "$WORK/site.orig"
[ "$("$TOOL" configure "$R" cri-o "$BIN")" = changed ] || fail "crio: first configure"
[ "$("$TOOL" configure "$R" cri-o "$BIN")" = unchanged ] || fail "crio: second configure changed something"
"$TOOL" check "$R" cri-o "$BIN" || fail "crio: check"
D=$R/etc/crio/crio.conf.d/99-nvidia.toml
toml_expect "$D" "crio/runtime/runtimes/nvidia/runtime_path=$BIN" crio/runtime/runtimes/nvidia/runtime_type=oci \
    crio/runtime/runtimes/nvidia/monitor_path=/usr/libexec/crio/conmon crio/runtime/default_runtime=None ||
    fail "crio: the drop-in's nvidia entry"
cmp "$R/etc/crio/crio.conf" "$WORK/crio.orig" || fail "crio: the main config was edited"
"$TOOL" restore "$R" cri-o "$BIN" || fail "crio: restore"
[ ! -e "$D" ] || fail "crio: restore left the drop-in"
cmp "$R/etc/crio/crio.conf.d/10-site.conf" "$WORK/site.orig" || fail "crio: a user drop-in changed"
grep -q 'runtime=cri-o action=configure mode=none result=recorded' "$R/var/lib/gpuop/rtconfig/reload.log" ||
    fail "crio: the reload request was not recorded"
echo "ok cri-o (TOML round trip: CRI-O is not packaged in Debian 12)"
echo "rtconfig tools: all passed"
