# SPDX-License-Identifier: Apache-2.0
# Shared by the simulated images' shell tests (sourced): the test library (tests/lib/test-lib.sh:
# $T, fail, bg, wait_log, wait_exit...), and a node root $ROOT in $T with the environment
# kubelet-sim gives a container of that node. Arguments of the test: BIN_DIR (the
# build/sim-image-bin folder), LIBNVIDIA_ML, FLEETS_DIR, GPUOP.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../lib/test-lib.sh"
BIN=$1
export GPUOP_NVML_LIBRARY=$2
FLEETS=$3
GPUOP=$4
ROOT=$T/root
KERNEL=5.15.0-127-generic
mkdir -p "$ROOT/usr/src/linux-headers-$KERNEL"
export GPUOP_SIM_ROOT=$ROOT GPUOP_SIM_FLEET=$FLEETS/pcie-l4.yaml GPUOP_SIM_STATE=$T/state
export GPUOP_SIM_KERNEL=$KERNEL GPUOP_SIM_IMAGE=nvcr.io/nvidia/driver:550.127.05-ubuntu22.04
export SIM_DRIVER_BUILD_SECONDS=0.2
unset DRIVER_VERSION NVIDIA_VISIBLE_DEVICES SIM_WORKLOAD_SECONDS GPUOP_SIM_CLOCK
expect_file() { [ -e "$ROOT$1" ] || fail "missing $1 in the node root"; }
expect_no_file() { [ ! -e "$ROOT$1" ] || fail "$1 is still in the node root"; }
