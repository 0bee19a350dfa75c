#!/usr/bin/env bash
# An administrator's runtime configuration through gpuop's install and uninstall: one case per
# test, for containerd, CRI-O and docker (docs/runtime-config.md, "The administrator's files").
#   abs-link  the config is a link to an absolute path: resolved under the host root as the host
#             resolves it, never in the toolkit's own container
#   rel-link  a relative link (CRI-O: its drop-in folder is a relative link too)
#   owner     the config is uid 1000's, mode 0640
#   edit      the administrator edits the config after install (and the toolkit's next pass runs)
#   created   a file gpuop created, extended by the administrator since (daemon.json,
#             containerd's config.toml; CRI-O: the drop-in folder gets a file of theirs)
#   conflict  the administrator changed what gpuop wrote: gpuop cannot tell its changes apart, so
#             it leaves the files, says so (its output and the state dir's status) and keeps the
#             backups
# After install and after uninstall the runtime's effective configuration is what the
# administrator had (plus, while installed, gpuop's runtime): containerd's own `config dump`;
# dockerd's own config loading (Debian 12's dockerd 20.10 has no --validate: it is stopped at its
# pidfile, as in test-rtconfig-tools.sh); for CRI-O, not packaged in Debian 12, the project's
# parser (rtconfig's check) and CRI-O's merge redone with tomllib (rtconfig_effective.py). The
# tools run chrooted into the host root, so links resolve there as on the host. The link stays a
# link, the owner and mode stay, every later edit stays, and the administrator's bytes come back.
# Usage: test-rtconfig-admin.sh RTCONFIG-TOOL RUNTIME CASE
set -euo pipefail
TOOL=$1 RT=$2 CASE=$3
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=/usr/local/nvidia/gpuop-runtime
. "$HERE/../lib/test-lib.sh"
on_fail() { echo "(runtime $RT, case $CASE)"; }
[ "$(id -u)" = 0 ] || skip "needs root (a chroot into the host root; files of uid 1000)"
command -v unshare >/dev/null && command -v chroot >/dev/null || skip "no unshare or chroot"
python3 -c 'import tomllib' 2>/dev/null || skip "python3 tomllib missing"
case $RT in
containerd)
    command -v containerd >/dev/null || skip "containerd missing (make deps installs it)"
    KIND=containerd MAIN=/etc/containerd/config.toml DROPIN=/etc/containerd/conf.d/99-nvidia.toml ;;
docker)
    [ -x "$(command -v dockerd || echo /usr/sbin/dockerd)" ] || skip "dockerd missing (make deps installs docker.io)"
    KIND=docker MAIN=/etc/docker/daemon.json DROPIN= ;;
crio) KIND=cri-o MAIN=/etc/crio/crio.conf DROPIN=/etc/crio/crio.conf.d/99-nvidia.toml ;;
*) fail "unknown runtime" ;;
esac
WORK=$T
R=$WORK/host REF=$WORK/ref STATE=$WORK/host/var/lib/gpuop/rtconfig

# COMMAND chrooted into ROOT, in a mount namespace of its own with /usr bound in read-only.
inroot() { # ROOT COMMAND...
    local root=$1; shift
    mkdir -p "$root/usr" "$root/tmp"
    for l in bin sbin lib lib64; do [ -L "$root/$l" ] || ln -s "usr/$l" "$root/$l"; done
    cp "$HERE/rtconfig_effective.py" "$root/tmp/.effective.py"
    unshare --mount --propagation private -- /bin/sh -ec '
        root=$1; shift
        mount --rbind /usr "$root/usr"
        mount -o remount,bind,ro "$root/usr" 2>/dev/null || true
        exec chroot "$root" "$@"' sh "$root" "$@"
}

# dockerd loads FILE (a host path) in ROOT and validates it; it is stopped right after, at its
# pidfile (a path under a regular file). 0 when it accepts the config.
docker_accepts() { # ROOT FILE
    local root=$1 d=/tmp/.dockerd
    rm -rf "$root$d"; mkdir -p "$root$d"; touch "$root$d/file"
    if inroot "$root" dockerd --config-file "$2" --pidfile "$d/file/pid" --data-root "$d/data" \
        --exec-root "$d/exec" -H "unix://$d/d.sock" > "$WORK/dockerd.log" 2>&1; then
        echo "dockerd did not stop at its pidfile" >&2; return 1
    fi
    grep -q 'unable to configure the Docker daemon' "$WORK/dockerd.log" && { cat "$WORK/dockerd.log" >&2; return 1; }
    grep -q 'failed to start daemon: mkdir .*: not a directory' "$WORK/dockerd.log" || { cat "$WORK/dockerd.log" >&2; return 1; }
}

# The runtime's effective configuration in ROOT, normalized (rtconfig_effective.py); with
# --installed gpuop's runtime must be in force, and is taken out.
effective() { # ROOT [--installed]
    local root=$1 inst=(); [ "${2:-}" = --installed ] && inst=(--installed "$BIN")
    case $RT in
    containerd)
        local cfg=$MAIN
        inroot "$root" test -e "$MAIN" || { : > "$root/tmp/.empty.toml"; cfg=/tmp/.empty.toml; }
        inroot "$root" containerd --config "$cfg" config dump > "$WORK/dump" 2> "$WORK/dump.err" ||
            { cat "$WORK/dump.err" >&2; fail "containerd config dump refused the config"; }
        python3 "$HERE/rtconfig_effective.py" containerd "$WORK/dump" "${inst[@]}" ;;
    docker)
        if inroot "$root" test -e "$MAIN"; then
            docker_accepts "$root" "$MAIN" || fail "dockerd refused the config"
        fi
        inroot "$root" python3 /tmp/.effective.py docker "$MAIN" "${inst[@]}" ;;
    crio) inroot "$root" python3 /tmp/.effective.py crio / "${inst[@]}" ;;
    esac
}

# The administrator's own configuration as a host root of its own: the main config's expected
# bytes ($WORK/ref.txt, none when absent); for CRI-O a copy of its files as they are, gpuop's
# drop-in left out (gpuop never edits them: their bytes are compared below).
admin_effective() {
    rm -rf "$REF"; mkdir -p "$REF"
    if [ "$RT" = crio ]; then
        rm -rf "$R/tmp/.crio"; inroot "$R" cp -rL /etc/crio /tmp/.crio
        mkdir -p "$REF/etc"; mv "$R/tmp/.crio" "$REF/etc/crio"; rm -f "$REF$DROPIN"
    elif [ -e "$WORK/ref.txt" ]; then
        mkdir -p "$REF$(dirname "$MAIN")"; cp "$WORK/ref.txt" "$REF$MAIN"
    fi
    effective "$REF"
}

# What must not change: links (and where they point), owners, modes, and for CRI-O the bytes of
# every file of the administrator's.
attrs() {
    local p
    for p in $MAIN /etc/site /etc/crio/crio.conf.d /etc/crio/crio.conf.d/10-site.conf; do
        [ -e "$R$p" ] || [ -L "$R$p" ] || continue
        if [ -L "$R$p" ]; then echo "$p -> $(readlink "$R$p")"; fi
        inroot "$R" stat -L -c "$p %F %u:%g %a" "$p"
    done
    if [ "$RT" = crio ]; then
        inroot "$R" sh -c 'cd /etc/crio && find -L . -type f ! -name 99-nvidia.toml | sort | xargs md5sum'
    fi
}

tool() { "$TOOL" "$1" "$R" "$KIND" "$BIN"; }

# ---- the administrator's configuration -------------------------------------------------------
admin_text() {
    case $RT in
    containerd) cat <<'EOF' ;;
version = 2
root = "/var/lib/containerd"   # the site's

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
    endpoint = ["https://mirror.example.com"]
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
EOF
    docker) cat <<'EOF' ;;
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
EOF
    crio) cat <<'EOF' ;;
[crio.runtime]
default_runtime = "crun"
[crio.runtime.runtimes.crun]
runtime_path = "/usr/bin/crun"
runtime_root = "/run/crun"
monitor_path = "/usr/libexec/crio/conmon"
allowed_annotations = ["io.containerd.userns"]
EOF
    esac
}

mkdir -p "$R$(dirname "$MAIN")"
REAL=$MAIN # where the main config's bytes are
if [ "$CASE" != created ] || [ "$RT" = crio ]; then
    case $CASE in
    abs-link) REAL=/etc/site/$(basename "$MAIN"); ln -s "$REAL" "$R$MAIN" ;;
    rel-link) REAL=/etc/site/$(basename "$MAIN"); ln -s "../site/$(basename "$MAIN")" "$R$MAIN" ;;
    esac
    mkdir -p "$R$(dirname "$REAL")"
    admin_text > "$R$REAL"
    cp "$R$REAL" "$WORK/ref.txt"
    if [ "$RT" = crio ] && [ "$CASE" != created ]; then
        if [ "$CASE" = rel-link ]; then
            mkdir -p "$R/etc/site/crio.conf.d"; ln -s ../site/crio.conf.d "$R/etc/crio/crio.conf.d"
        fi
        mkdir -p "$R/etc/crio/crio.conf.d"
        printf '[crio.image]\npause_image = "registry.k8s.io/pause:3.9"\n' > "$R/etc/crio/crio.conf.d/10-site.conf"
    fi
    if [ "$CASE" = owner ]; then
        chown 1000:1000 "$R$REAL"; chmod 0640 "$R$REAL"
        [ "$RT" != crio ] || { chown 1000:1000 "$R/etc/crio/crio.conf.d/10-site.conf"; chmod 0640 "$R/etc/crio/crio.conf.d/10-site.conf"; }
    fi
fi
attrs > "$WORK/attrs.before"
admin_effective > "$WORK/eff.admin"

# ---- install ---------------------------------------------------------------------------------
[ "$(tool configure)" = changed ] || fail "first configure"
[ "$(tool configure)" = unchanged ] || fail "second configure changed something"
tool check > /dev/null || fail "rtconfig check after install"
attrs > "$WORK/attrs.after"
if [ "$CASE" = created ]; then
    # What gpuop created (the config, CRI-O's drop-in folder) is new; nothing else changed.
    new="^($MAIN|/etc/crio/crio.conf.d) "
    diff <(grep -Ev "$new" "$WORK/attrs.before" || true) <(grep -Ev "$new" "$WORK/attrs.after" || true) ||
        fail "install changed a link, an owner, a mode or a file of the administrator's"
else
    diff "$WORK/attrs.before" "$WORK/attrs.after" || fail "install changed a link, an owner, a mode or a file of the administrator's"
fi
effective "$R" --installed > "$WORK/eff.installed"
diff "$WORK/eff.admin" "$WORK/eff.installed" ||
    fail "installed, the effective configuration is not the administrator's plus gpuop's runtime"
echo "ok $RT $CASE: installed; the effective configuration is the administrator's plus the nvidia runtime"

# ---- the administrator's edit since ----------------------------------------------------------
case $RT/$CASE in
containerd/edit)
    for f in "$R$REAL" "$WORK/ref.txt"; do
        sed -i 's/pause:3.9/pause:3.10/' "$f"
        printf '[plugins."io.containerd.grpc.v1.cri".registry.mirrors."quay.io"]\n  endpoint = ["https://quay-mirror.example.com"]\n' >> "$f"
    done ;;
containerd/created)
    ext='[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.10"\n'
    printf "$ext" >> "$R$MAIN"; printf "version = 2\n$ext" > "$WORK/ref.txt" ;;
docker/edit)
    for f in "$R$REAL" "$WORK/ref.txt"; do
        sed -i 's/"max-size": "10m"/"max-size": "20m"/; s/"log-driver": "json-file",/"log-driver": "json-file",\n  "debug": true,/' "$f"
    done ;;
docker/created)
    sed -i '1s/{/{\n    "log-level": "debug",/' "$R$MAIN"
    printf '{\n    "log-level": "debug"\n}\n' > "$WORK/ref.txt" ;;
crio/edit)
    sed -i 's|/usr/libexec/crio/conmon|/usr/bin/conmon|' "$R$REAL"
    printf '[crio.runtime]\nlog_level = "debug"\n' > "$R/etc/crio/crio.conf.d/20-admin.conf" ;;
crio/created)
    printf '[crio.runtime]\nlog_level = "debug"\n' > "$R/etc/crio/crio.conf.d/50-admin.conf" ;;
containerd/conflict|crio/conflict)
    printf '# tuned by hand\n' >> "$R$DROPIN" ;;
docker/conflict)
    sed -i "s|\"$BIN\"|\"/opt/mine/runtime\"|" "$R$REAL" ;;
esac
if [ "$CASE" = edit ] || [ "$CASE" = created ]; then
    # The toolkit's next pass follows the edit (containerd's drop-in repeats the CRI section).
    tool configure > /dev/null || fail "configure after the administrator's edit"
    attrs > "$WORK/attrs.before" # the administrator's files as they now are
    admin_effective > "$WORK/eff.admin"
    effective "$R" --installed > "$WORK/eff.installed"
    diff "$WORK/eff.admin" "$WORK/eff.installed" ||
        fail "after the edit, the effective configuration is not the administrator's plus gpuop's runtime"
    echo "ok $RT $CASE: the administrator's edit is in force beside gpuop's runtime"
fi

# ---- uninstall -------------------------------------------------------------------------------
if [ "$CASE" = conflict ]; then
    for p in $MAIN $DROPIN; do inroot "$R" cat "$p" > "$WORK/$(basename "$p").before"; done
    tool restore > "$WORK/restore.out" || fail "restore: $(cat "$WORK/restore.out")"
    cat "$WORK/restore.out"
    grep -q " left: " "$WORK/restore.out" || fail "restore did not say it left a file"
    for p in $MAIN $DROPIN; do
        inroot "$R" cat "$p" | cmp -s - "$WORK/$(basename "$p").before" || fail "restore changed $p, which it could not tell apart"
    done
    grep -q 'result=left reason="' "$STATE/status" || fail "the status does not say what was left: $(cat "$STATE/status")"
    [ -n "$(find "$STATE" -name '*.orig' -o -name '*.absent')" ] || fail "the backups of what was left are gone"
    # containerd, CRI-O: gpuop's runtime stays in force with the files (docker's is the
    # administrator's now).
    [ "$RT" = docker ] || tool check > /dev/null || fail "gpuop's runtime is no longer in force although its files were left"
    echo "ok $RT $CASE: left as it is and said so: $(grep -h ' left: ' "$WORK/restore.out" | head -1)"
    exit 0
fi
tool restore > "$WORK/restore.out" || fail "restore"
case $RT/$CASE in
*/edit|*/created) want_main=edit ;;
*) want_main=original ;;
esac
case $RT in
containerd) want=("$MAIN $want_main" "$DROPIN remove") ;;
docker) want=("$MAIN $want_main") ;;
crio) want=("$DROPIN remove") ;;
esac
printf '%s\n' "${want[@]}" | diff - "$WORK/restore.out" || fail "restore did not do what it should"
tool check > /dev/null 2>&1 && fail "gpuop's runtime is still configured after restore"
attrs > "$WORK/attrs.restored"
diff "$WORK/attrs.before" "$WORK/attrs.restored" || fail "restore changed a link, an owner, a mode or a file of the administrator's"
if [ "$RT" != crio ]; then
    inroot "$R" cat "$MAIN" | cmp - "$WORK/ref.txt" ||
        { inroot "$R" cat "$MAIN"; fail "the config is not the administrator's, byte for byte"; }
fi
[ -z "$DROPIN" ] || [ ! -e "$R$DROPIN" ] || fail "the drop-in is still there"
[ -z "$(find "$STATE" -name '*.orig' -o -name '*.absent' -o -name '*.written')" ] || fail "backups left: $(ls "$STATE")"
grep -q "path=${want[0]%% *} result=" "$STATE/status" || fail "no status: $(cat "$STATE/status" 2>&1)"
effective "$R" > "$WORK/eff.restored"
diff "$WORK/eff.admin" "$WORK/eff.restored" || fail "after uninstall the effective configuration is not the administrator's"
echo "ok $RT $CASE: uninstalled; the administrator's configuration, byte for byte and in effect ($(tr '\n' ' ' < "$WORK/restore.out"))"
