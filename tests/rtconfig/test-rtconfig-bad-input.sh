#!/usr/bin/env bash
# Bad input to rtconfig: a runtime config that does not parse (refused with one line naming the
# file and the line, nothing written: no drop-in, no backup, the file as it was), gpuop's TOML
# module missing (the same, the error naming the path tried), an unknown runtime, and a node
# whose runtime is not the policy's (an error naming both).
# Usage: test-rtconfig-bad-input.sh RTCONFIG-TOOL
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
TOOL=$1
WORK=$T
BIN=/usr/local/nvidia/toolkit/gpuop

refused() { # NAME ROOT KIND FILE-REL WANT-IN-ERROR
    local name=$1 root=$2 kind=$3 file=$4 want=$5
    local before; before=$(cd "$root" && find . -type f -exec md5sum {} + | sort)
    if "$TOOL" configure "$root" "$kind" "$BIN" > "$WORK/out" 2> "$WORK/err"; then
        fail "$name: accepted"
    fi
    [ "$(wc -l < "$WORK/err")" = 1 ] || { cat "$WORK/err"; fail "$name: not one error line"; }
    grep -qF "$root$file: $want" "$WORK/err" || { cat "$WORK/err"; fail "$name: the error does not name $file and $want"; }
    [ "$(cd "$root" && find . -type f -exec md5sum {} + | sort)" = "$before" ] || fail "$name: something was written"
    [ ! -e "$root/var/lib/gpuop" ] || fail "$name: a backup was made"
    echo "ok $name: $(cat "$WORK/err")"
}

R=$WORK/containerd; mkdir -p "$R/etc/containerd"
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.9"\n  [plugins."io.containerd.grpc.v1.cri".containerd\n' \
    > "$R/etc/containerd/config.toml"
refused containerd "$R" containerd /etc/containerd/config.toml "line 4"

R=$WORK/docker; mkdir -p "$R/etc/docker"
printf '{\n  "log-driver": "json-file",\n  "log-opts": {"max-size": "10m"},,\n}\n' > "$R/etc/docker/daemon.json"
refused docker "$R" docker /etc/docker/daemon.json "line 3"

R=$WORK/crio; mkdir -p "$R/etc/crio/crio.conf.d"
printf '[crio.runtime]\nconmon = "/usr/bin/conmon"\n' > "$R/etc/crio/crio.conf"
printf '[crio.image]\npause_image = registry.k8s.io/pause\n' > "$R/etc/crio/crio.conf.d/10-site.conf"
refused cri-o "$R" cri-o /etc/crio/crio.conf.d/10-site.conf "line 2"

# Uninstall with a config that no longer parses: refused with one line naming the file and the
# line, nothing written or removed (the drop-in and the backups stay); once the file is fixed, a
# later uninstall finishes.
undo_refused() { # NAME ROOT KIND FILE-REL GARBAGE WANT-IN-ERROR
    local name=$1 root=$2 kind=$3 file=$4 garbage=$5 want=$6
    [ "$("$TOOL" configure "$root" "$kind" "$BIN")" = changed ] || fail "$name: configure"
    cp "$root$file" "$WORK/good"
    printf '%b' "$garbage" >> "$root$file"
    local before; before=$(cd "$root" && find . -type f -exec md5sum {} + | sort)
    if "$TOOL" restore "$root" "$kind" "$BIN" > "$WORK/out" 2> "$WORK/err"; then
        fail "$name: restore accepted a config that does not parse"
    fi
    [ "$(wc -l < "$WORK/err")" = 1 ] || { cat "$WORK/err"; fail "$name: not one error line"; }
    grep -qF "$root$file: line " "$WORK/err" && grep -qF "$want" "$WORK/err" ||
        { cat "$WORK/err"; fail "$name: the error does not name $file, the line and $want"; }
    [ "$(cd "$root" && find . -type f -exec md5sum {} + | sort)" = "$before" ] || fail "$name: restore wrote or removed something"
    cp "$WORK/good" "$root$file"
    "$TOOL" restore "$root" "$kind" "$BIN" > "$WORK/out" || fail "$name: restore once fixed"
    "$TOOL" check "$root" "$kind" "$BIN" 2>/dev/null && fail "$name: still configured after the restore"
    echo "ok $name: $(cat "$WORK/err")"
}
R=$WORK/undo-containerd; mkdir -p "$R/etc/containerd"
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.9"\n' > "$R/etc/containerd/config.toml"
undo_refused "containerd uninstall" "$R" containerd /etc/containerd/config.toml '[plugins\n' "line 5"
R=$WORK/undo-docker; mkdir -p "$R/etc/docker"
printf '{\n  "log-driver": "json-file"\n}\n' > "$R/etc/docker/daemon.json"
undo_refused "docker uninstall" "$R" docker /etc/docker/daemon.json ',' "end of file expected"

# CRI-O: gpuop's drop-in made into something that does not parse is not gpuop's any more: left,
# said, nothing removed.
R=$WORK/undo-crio; mkdir -p "$R/etc/crio"
printf '[crio.runtime]\nconmon = "/usr/bin/conmon"\n' > "$R/etc/crio/crio.conf"
[ "$("$TOOL" configure "$R" cri-o "$BIN")" = changed ] || fail "cri-o uninstall: configure"
printf '[broken\n' >> "$R/etc/crio/crio.conf.d/99-nvidia.toml"
before=$(cd "$R" && find . -type f ! -name status -exec md5sum {} + | sort)
"$TOOL" restore "$R" cri-o "$BIN" > "$WORK/out" || fail "cri-o uninstall: restore failed"
grep -qx '/etc/crio/crio.conf.d/99-nvidia.toml left: changed since gpuop wrote it' "$WORK/out" ||
    fail "cri-o uninstall: $(cat "$WORK/out")"
[ "$(cd "$R" && find . -type f ! -name status -exec md5sum {} + | sort)" = "$before" ] || fail "cri-o uninstall: something was written or removed"
echo "ok cri-o uninstall: $(cat "$WORK/out")"

# gpuop's TOML parser (the module gpuop-tomlx.so) not there: containerd and CRI-O are refused
# with one line naming the path tried and why, nothing written; docker needs no TOML.
NOMOD=$WORK/nowhere/gpuop-tomlx.so
for kind in containerd cri-o; do
    R=$WORK/nomod-$kind; mkdir -p "$R/etc/containerd" "$R/etc/crio"
    printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.9"\n' \
        > "$R/etc/containerd/config.toml"
    printf '[crio.runtime]\nconmon = "/usr/bin/conmon"\n' > "$R/etc/crio/crio.conf"
    before=$(cd "$R" && find . -type f -exec md5sum {} + | sort)
    for op in configure check; do
        if GPUOP_TOMLX_MODULE=$NOMOD "$TOOL" $op "$R" $kind "$BIN" > "$WORK/out" 2> "$WORK/err"; then
            fail "$kind $op without the TOML module: accepted"
        fi
        [ "$(wc -l < "$WORK/err")" = 1 ] || { cat "$WORK/err"; fail "$kind $op without the module: not one error line"; }
        grep -qF "the TOML parser: loading gpuop-tomlx.so from \$GPUOP_TOMLX_MODULE: \"$NOMOD\": cannot open shared object file: No such file or directory" "$WORK/err" ||
            { cat "$WORK/err"; fail "$kind $op without the module: the error does not name the path and why"; }
    done
    [ "$(cd "$R" && find . -type f -exec md5sum {} + | sort)" = "$before" ] || fail "$kind without the module: something was written"
    [ ! -e "$R/var/lib/gpuop" ] || fail "$kind without the module: a backup was made"
    [ ! -e "$R/etc/containerd/conf.d" ] && [ ! -e "$R/etc/crio/crio.conf.d" ] || fail "$kind without the module: a drop-in was written"
    echo "ok $kind without the TOML module: $(cat "$WORK/err")"
done
R=$WORK/nomod-docker; mkdir -p "$R/etc/docker"; printf '{}\n' > "$R/etc/docker/daemon.json"
GPUOP_TOMLX_MODULE=$NOMOD "$TOOL" configure "$R" docker "$BIN" > "$WORK/out" 2> "$WORK/err" ||
    fail "docker without the TOML module: $(cat "$WORK/err")"
grep -q '"nvidia"' "$R/etc/docker/daemon.json" || fail "docker without the TOML module: not configured"
echo "ok docker without the TOML module: configured"

# An unknown runtime: no config written anywhere.
R=$WORK/unknown; mkdir -p "$R"
if "$TOOL" configure "$R" podman "$BIN" 2> "$WORK/err"; then fail "unknown runtime accepted"; fi
grep -q 'unknown container runtime "podman"' "$WORK/err" || fail "unknown runtime: $(cat "$WORK/err")"
if "$TOOL" detect "$R" "rkt://1.4" 2> "$WORK/err"; then fail "unknown containerRuntimeVersion accepted"; fi
grep -q 'unknown container runtime "rkt://1.4"' "$WORK/err" || fail "unknown node runtime: $(cat "$WORK/err")"
[ -z "$(find "$R" -mindepth 1)" ] || fail "unknown runtime: something was written"
echo "ok unknown runtime: $(cat "$WORK/err")"

# The node runs containerd, the policy says docker: an error naming both.
mkdir -p "$R/run/containerd" && touch "$R/run/containerd/containerd.sock"
if "$TOOL" detect "$R" "containerd://1.7.24" docker 2> "$WORK/err"; then fail "mismatch accepted"; fi
grep -q 'the node runs containerd (containerRuntimeVersion containerd://1.7.24) but the policy.s default runtime is docker' "$WORK/err" ||
    fail "mismatch: $(cat "$WORK/err")"
if "$TOOL" detect "$R" - docker 2> "$WORK/err"; then fail "mismatch (from the socket) accepted"; fi
grep -q 'the node runs containerd but the policy.s default runtime is docker' "$WORK/err" || fail "mismatch: $(cat "$WORK/err")"
[ "$("$TOOL" detect "$R" -)" = containerd ] || fail "detect from the socket"
echo "ok mismatch: $(cat "$WORK/err")"
echo "rtconfig bad input: all passed"
