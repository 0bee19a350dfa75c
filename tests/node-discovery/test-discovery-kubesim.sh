#!/usr/bin/env bash
# gpuop node-discovery against kubesim with node root folders (sysfs PCI functions, os-release):
# a GPU node without NFD gets the PCI and os_release labels (and the operator's GPU-node test
# then holds), a CPU node only os_release, a GPU removed loses its PCI labels and nothing else,
# a node where NFD runs gets nothing, and a node root it cannot read fails with the path named
# and writes nothing.
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
cat >"$T/nodes.yaml" <<'Y'
apiVersion: v1
kind: Node
metadata: {name: gpu-1, labels: {kubernetes.io/os: linux, team: ml}}
---
apiVersion: v1
kind: Node
metadata: {name: cpu-1, labels: {kubernetes.io/os: linux}}
---
apiVersion: v1
kind: Node
metadata:
  name: nfd-1
  labels: {kubernetes.io/os: linux, feature.node.kubernetes.io/pci-10de.present: "true"}
  annotations: {nfd.node.kubernetes.io/worker.version: v0.17.2, nfd.node.kubernetes.io/feature-labels: pci-10de.present}
Y
start_kubesim --load "$T/nodes.yaml"

# root NAME OS_ID VERSION [BUS:CLASS...]: a node root folder.
root() {
    local r=$T/root-$1; shift
    mkdir -p "$r/etc" "$r/sys/bus/pci/devices"
    printf 'NAME="Test"\nID=%s\nVERSION_ID="%s"\n' "$1" "$2" >"$r/etc/os-release"
    shift 2
    for f in "$@"; do
        mkdir -p "$r/sys/bus/pci/devices/${f%%=*}"
        echo "${f#*=}" >"$r/sys/bus/pci/devices/${f%%=*}/class"
        echo 0x10de >"$r/sys/bus/pci/devices/${f%%=*}/vendor"
    done
}
disc() { "$B/gpuop" node-discovery --oneshot --node-name "$1" --host-root "$T/root-$1"; }
labels() { $K get node "$1" -o json | python3 -c '
import json, sys
l = json.load(sys.stdin)["metadata"]["labels"]
p = "feature.node.kubernetes.io/"
print(" ".join(sorted(k.removeprefix(p) + "=" + v for k, v in l.items())))'; }

root gpu-1 ubuntu 22.04 0000:17:00.0=0x030200 0000:18:00.0=0x030200 0000:05:00.0=0x068000
root cpu-1 rhel 9.4
root nfd-1 ubuntu 22.04 0000:17:00.0=0x030200
disc gpu-1 2>"$T/gpu.log" || fail "gpu-1: $(cat "$T/gpu.log")"
disc cpu-1 2>"$T/cpu.log" || fail "cpu-1: $(cat "$T/cpu.log")"
disc nfd-1 2>"$T/nfd.log" || fail "nfd-1: $(cat "$T/nfd.log")"
want="kubernetes.io/os=linux pci-0302_10de.present=true pci-10de.present=true system-os_release.ID=ubuntu system-os_release.VERSION_ID.major=22 system-os_release.VERSION_ID.minor=04 system-os_release.VERSION_ID=22.04 team=ml"
[ "$(labels gpu-1)" = "$want" ] || fail "gpu-1 labels: $(labels gpu-1)"
[ "$(labels cpu-1)" = "kubernetes.io/os=linux system-os_release.ID=rhel system-os_release.VERSION_ID.major=9 system-os_release.VERSION_ID.minor=4 system-os_release.VERSION_ID=9.4" ] ||
    fail "cpu-1 labels: $(labels cpu-1)"
[ "$(labels nfd-1)" = "kubernetes.io/os=linux pci-10de.present=true" ] || fail "nfd-1 (NFD runs) got labels: $(labels nfd-1)"
grep -q 'staying away' "$T/nfd.log" && fail "nfd-1 had nothing of gpuop's to drop, yet wrote"
echo "gpu-1: $(labels gpu-1)"
# Converged: a second pass writes nothing.
disc gpu-1 2>"$T/gpu2.log" || fail "second pass: $(cat "$T/gpu2.log")"
grep -q 'labels written' "$T/gpu2.log" && fail "a second pass wrote: $(cat "$T/gpu2.log")"
# The GPUs leave: their PCI labels go, the others stay.
rm -rf "$T/root-gpu-1/sys/bus/pci/devices/0000:17:00.0" "$T/root-gpu-1/sys/bus/pci/devices/0000:18:00.0"
disc gpu-1 2>"$T/gpu3.log" || fail "gpu-1 after removal: $(cat "$T/gpu3.log")"
[ "$(labels gpu-1)" = "kubernetes.io/os=linux system-os_release.ID=ubuntu system-os_release.VERSION_ID.major=22 system-os_release.VERSION_ID.minor=04 system-os_release.VERSION_ID=22.04 team=ml" ] ||
    fail "gpu-1 after removal: $(labels gpu-1)"
echo "gpu-1 without GPUs: $(labels gpu-1)"
# NFD starts on a node gpuop labelled: gpuop drops its annotation and leaves the labels to NFD.
$K annotate node cpu-1 nfd.node.kubernetes.io/worker.version=v0.17.2 >/dev/null
disc cpu-1 2>"$T/cpu2.log" || fail "cpu-1 with NFD: $(cat "$T/cpu2.log")"
grep -q 'staying away' "$T/cpu2.log" || fail "cpu-1: no stay-away: $(cat "$T/cpu2.log")"
[ -z "$($K get node cpu-1 -o jsonpath='{.metadata.annotations.gpuop\.dev/node-discovery-labels}')" ] ||
    fail "cpu-1 kept gpuop's annotation"
labels cpu-1 | grep -q 'system-os_release.ID=rhel' || fail "cpu-1's labels removed under NFD"
# Bad input: no sysfs, no os-release: a clear error, non-zero, nothing written.
before=$($K get node gpu-1 -o jsonpath='{.metadata.resourceVersion}')
rm -rf "$T/root-gpu-1/sys"
if disc gpu-1 2>"$T/bad.log"; then fail "a node root without sysfs passed"; fi
grep -q "list PCI devices \"$T/root-gpu-1/sys/bus/pci/devices\"" "$T/bad.log" || fail "error: $(cat "$T/bad.log")"
mkdir -p "$T/root-gpu-1/sys/bus/pci/devices"
rm -f "$T/root-gpu-1/etc/os-release"
if disc gpu-1 2>"$T/bad2.log"; then fail "a node root without os-release passed"; fi
grep -q 'neither etc/os-release nor usr/lib/os-release' "$T/bad2.log" || fail "error: $(cat "$T/bad2.log")"
[ "$($K get node gpu-1 -o jsonpath='{.metadata.resourceVersion}')" = "$before" ] || fail "a failed pass wrote"
if "$B/gpuop" node-discovery --oneshot --host-root "$T/root-cpu-1" 2>"$T/noname.log"; then fail "no node name accepted"; fi
echo "PASS node-discovery"
