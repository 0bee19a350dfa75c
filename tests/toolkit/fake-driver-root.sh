#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds a fake NVIDIA driver root for the toolkit's tests: the driver's versioned libraries with
# their .so.1 links (and libcuda.so, the development link the spec leaves out), vdpau, GSP
# firmware, binaries, the persistenced socket and the control device nodes, as small regular
# files. The files of another version may already be there (an upgrade in progress).
#
# usage: fake-driver-root.sh DIR VERSION [--no-nvml] [--no-dev]
set -eu
d=$1
v=$2
shift 2
nvml=1
dev=1
for a in "$@"; do
    case $a in
    --no-nvml) nvml=0 ;;
    --no-dev) dev=0 ;;
    *) echo "fake-driver-root.sh: unknown option $a" >&2; exit 2 ;;
    esac
done
lib=$d/usr/lib/x86_64-linux-gnu
mkdir -p "$lib/vdpau" "$d/usr/bin" "$d/lib/firmware/nvidia/$v" "$d/run/nvidia-persistenced"
libs="libcuda libnvidia-ptxjitcompiler libnvidia-cfg libnvidia-allocator libnvidia-nvvm libnvidia-opencl"
[ $nvml = 1 ] && libs="$libs libnvidia-ml"
for l in $libs; do
    printf '%s %s\n' "$l" "$v" >"$lib/$l.so.$v"
    ln -sfn "$l.so.$v" "$lib/$l.so.1"
done
ln -sfn libcuda.so.1 "$lib/libcuda.so"
printf 'vdpau %s\n' "$v" >"$lib/vdpau/libvdpau_nvidia.so.$v"
printf 'fw\n' >"$d/lib/firmware/nvidia/$v/gsp_ga10x.bin"
printf 'fw\n' >"$d/lib/firmware/nvidia/$v/gsp_tu10x.bin"
for b in nvidia-smi nvidia-debugdump nvidia-persistenced nvidia-cuda-mps-control nvidia-cuda-mps-server; do
    printf '#!/bin/sh\n' >"$d/usr/bin/$b"
    chmod 755 "$d/usr/bin/$b"
done
: >"$d/run/nvidia-persistenced/socket"
if [ $dev = 1 ]; then
    mkdir -p "$d/dev"
    for n in nvidiactl nvidia-uvm nvidia-uvm-tools nvidia-modeset; do
        : >"$d/dev/$n"
    done
fi
