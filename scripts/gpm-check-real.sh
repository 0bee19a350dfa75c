#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpm-check-real.sh: gpuop exporter's profiling fields (DCGM_FI_PROF_*) against NVML's GPU
# Performance Monitoring read directly, on a machine with a real Hopper (or newer) GPU, while a
# known kernel runs. It builds what it needs (a Meson build folder, default ./build; BUILD=DIR
# picks another), then:
#   1. starts a load on GPU $GPU (default 0): a tiny CUDA program compiled here when nvcc is
#      there (FP32 FMA on every SM, then half-precision tensor-core MMA, each $SECONDS_EACH s,
#      default 20), else build/cuda-check run over and over (vectorAdd: short kernels and copies);
#   2. meanwhile runs `gpuop exporter --collect-interval 1s` with every profiling field and
#      scrapes it every second, and reads GPM directly (a Python ctypes client of
#      libnvidia-ml.so.1 written apart from gpuop's binding: its own structures, percentages
#      divided by 100 and MiB/s times 1048576 as DCGM does) over the same seconds;
#   3. compares, per field, the mean of each phase's middle seconds: ratios within 0.05, rates
#      within 10 % (or 10 MiB/s), and prints each pair.
# Without an NVIDIA GPU, a driver with GPM, or python3, it says why and exits 0 (skipped).
# GPM_CHECK_SIM=1 runs the same against the simulated NVML (a DGX H100 fleet, the simulated CUDA
# sample with a set load) to check the script itself on a machine without a GPU.
# Exit 0 when every compared field agreed (or skipped), 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BUILD=${BUILD:-build}
GPU=${GPU:-0}
SECONDS_EACH=${SECONDS_EACH:-20}
SIM=${GPM_CHECK_SIM:-0}
say() { printf '== %s\n' "$*"; }
skip() {
    printf 'gpm-check-real: SKIP: %s\n' "$*"
    exit 0
}
die() {
    printf 'gpm-check-real: FAIL: %s\n' "$*"
    exit 1
}
command -v python3 >/dev/null || skip "python3 is needed for the direct NVML reader"
T=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

if [ ! -f "$BUILD/build.ninja" ]; then
    say "meson setup $BUILD"
    meson setup "$BUILD" >/dev/null || die "meson setup $BUILD"
fi
if [ "$SIM" = 1 ]; then
    say "against the simulated NVML (GPM_CHECK_SIM=1)"
    ninja -C "$BUILD" gpuop libnvidia-ml.so.1 sim-image >/dev/null || die "ninja -C $BUILD"
    export GPUOP_NVML_LIBRARY=$PWD/$BUILD/libnvidia-ml.so.1
    export GPUOP_SIM_FLEET=$PWD/sim/fleets/dgx-h100.yaml GPUOP_SIM_STATE=$T/sim-state
    mkdir -p "$GPUOP_SIM_STATE"
    NVML=$GPUOP_NVML_LIBRARY
else
    # This run is about the real driver: the simulator's environment must not leak in.
    unset GPUOP_SIM_FLEET GPUOP_SIM_STATE GPUOP_SIM_ROOT GPUOP_SIM_CLOCK GPUOP_NVML_LIBRARY
    NVML=$(ldconfig -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 /{print $NF; exit}')
    [ -n "$NVML" ] || skip "no libnvidia-ml.so.1 (no NVIDIA driver installed)"
    command -v nvidia-smi >/dev/null && nvidia-smi -L >"$T/gpus" 2>&1 || skip "nvidia-smi lists no GPU"
    grep -q "^GPU $GPU:" "$T/gpus" || skip "no GPU $GPU: $(cat "$T/gpus")"
    say "$(grep "^GPU $GPU:" "$T/gpus")"
    ninja -C "$BUILD" gpuop cuda-check >/dev/null || die "ninja -C $BUILD gpuop cuda-check"
fi

# The direct reader: NVML's GPM through ctypes, one line a second per field, in DCGM's units.
cat >"$T/gpm-direct.py" <<'PY'
import ctypes, sys, time
lib_path, gpu, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
nvml = ctypes.CDLL(lib_path)
# DCGM field -> (GPM metric id, percent? else MiB/s)
FIELDS = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": (1, True), "DCGM_FI_PROF_SM_ACTIVE": (2, True),
    "DCGM_FI_PROF_SM_OCCUPANCY": (3, True), "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": (5, True),
    "DCGM_FI_PROF_DRAM_ACTIVE": (10, True), "DCGM_FI_PROF_PIPE_FP64_ACTIVE": (11, True),
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": (12, True), "DCGM_FI_PROF_PIPE_FP16_ACTIVE": (13, True),
    "DCGM_FI_PROF_PCIE_TX_BYTES": (20, False), "DCGM_FI_PROF_PCIE_RX_BYTES": (21, False),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": (61, False), "DCGM_FI_PROF_NVLINK_RX_BYTES": (60, False),
}
class Info(ctypes.Structure):
    _fields_ = [("shortName", ctypes.c_char_p), ("longName", ctypes.c_char_p), ("unit", ctypes.c_char_p)]
class Metric(ctypes.Structure):
    _fields_ = [("metricId", ctypes.c_uint), ("nvmlReturn", ctypes.c_int), ("value", ctypes.c_double),
                ("metricInfo", Info)]
class MetricsGet(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("numMetrics", ctypes.c_uint), ("sample1", ctypes.c_void_p),
                ("sample2", ctypes.c_void_p), ("metrics", Metric * 333)]
class Support(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("isSupportedDevice", ctypes.c_uint)]
def check(r, what):
    if r != 0:
        sys.exit(f"gpm-direct: {what}: NVML error {r}")
check(nvml.nvmlInit_v2(), "nvmlInit_v2")
dev = ctypes.c_void_p()
check(nvml.nvmlDeviceGetHandleByIndex_v2(gpu, ctypes.byref(dev)), "nvmlDeviceGetHandleByIndex_v2")
sup = Support(version=1)
r = nvml.nvmlGpmQueryDeviceSupport(dev, ctypes.byref(sup))
if r != 0 or not sup.isSupportedDevice:
    print(f"NOGPM {r} {sup.isSupportedDevice}", flush=True)
    sys.exit(0)
samples = [ctypes.c_void_p(), ctypes.c_void_p()]
for s in samples:
    check(nvml.nvmlGpmSampleAlloc(ctypes.byref(s)), "nvmlGpmSampleAlloc")
check(nvml.nvmlGpmSampleGet(dev, samples[0]), "nvmlGpmSampleGet")
end = time.monotonic() + seconds
k = 0
while time.monotonic() < end:
    time.sleep(1.0)
    a, b = samples[k % 2], samples[(k + 1) % 2]
    check(nvml.nvmlGpmSampleGet(dev, b), "nvmlGpmSampleGet")
    mg = MetricsGet(version=1, numMetrics=len(FIELDS), sample1=a, sample2=b)
    for i, (mid, _) in enumerate(FIELDS.values()):
        mg.metrics[i].metricId = mid
    check(nvml.nvmlGpmMetricsGet(ctypes.byref(mg)), "nvmlGpmMetricsGet")
    now = time.time()
    for i, (name, (mid, pct)) in enumerate(FIELDS.items()):
        m = mg.metrics[i]
        if m.nvmlReturn != 0:
            continue
        v = min(1.0, max(0.0, m.value / 100.0)) if pct else max(0.0, m.value) * 1048576.0
        print(f"{now:.3f} {name} {v!r}", flush=True)
    k += 1
PY

# The exporter, every profiling field, a collection a second; scraped every second.
grep '^DCGM_FI_PROF_' bench/exporter/all-fields.csv >"$T/prof.csv"
"$BUILD/gpuop" exporter -a 127.0.0.1:0 -c 1s -f "$T/prof.csv" 2>"$T/exporter.log" &
pids+=($!)
port=
for _ in $(seq 1 100); do
    port=$(sed -n 's/.* serving .*port=\([0-9]*\).*/\1/p' "$T/exporter.log" | head -1)
    [ -n "$port" ] && break
    sleep 0.05
done
[ -n "$port" ] || die "the exporter did not start: $(tail -5 "$T/exporter.log")"
if grep -q 'not supported' "$T/exporter.log"; then
    skip "no GPU Performance Monitoring here: $(grep -m1 'not supported' "$T/exporter.log")"
fi
total=$((2 * SECONDS_EACH + 6))
python3 "$T/gpm-direct.py" "$NVML" "$GPU" "$total" >"$T/direct" 2>"$T/direct.err" &
pids+=($!)
(
    end=$((SECONDS + total))
    while [ $SECONDS -lt $end ]; do
        now=$(date +%s.%N)
        curl -s "http://127.0.0.1:$port/metrics" | grep '^DCGM_FI_PROF_' | grep "gpu=\"$GPU\"" |
            grep -v GPU_I_ID | awk -v t="$now" '{n = $1; sub(/\{.*/, "", n); print t, n, $NF}'
        sleep 1
    done
) >"$T/gpuop" &
pids+=($!)

# The load: phase A from 2 s, phase B after it; the comparison takes each phase's middle.
sleep 2
t_a=$(date +%s)
if [ "$SIM" = 1 ]; then
    NVIDIA_VISIBLE_DEVICES=$GPU SIM_WORKLOAD_SECONDS=$SECONDS_EACH SIM_WORKLOAD_LOAD=sm=0.9,dram=0.4 \
        "$BUILD/sim-image-bin/cuda-sample" >"$T/load.log" 2>&1
    t_b=$(date +%s)
    NVIDIA_VISIBLE_DEVICES=$GPU SIM_WORKLOAD_SECONDS=$SECONDS_EACH SIM_WORKLOAD_LOAD=sm=0.7,tensor=0.6,dram=0.2 \
        "$BUILD/sim-image-bin/cuda-sample" >>"$T/load.log" 2>&1
elif command -v nvcc >/dev/null; then
    cat >"$T/load.cu" <<'CU'
// FP32 FMA on every SM for argv[1] seconds, then tensor-core MMA (wmma, half) for as long.
#include <cstdio>
#include <cstdlib>
#include <mma.h>
using namespace nvcuda;
__global__ void fma_loop(float *out, long iters) {
    float a = threadIdx.x, b = 1.0001f, c = 0.5f;
    for (long i = 0; i < iters; i++) a = fmaf(a, b, c);
    out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}
__global__ void mma_loop(half *out, long iters) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, half> acc;
    wmma::fill_fragment(fa, __float2half(0.01f));
    wmma::fill_fragment(fb, __float2half(0.01f));
    wmma::fill_fragment(acc, __float2half(0.0f));
    for (long i = 0; i < iters; i++) wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(out + blockIdx.x * 256, acc, 16, wmma::mem_row_major);
}
static void run(const char *what, double seconds, void (*launch)(long), long iters0) {
    cudaEvent_t s, e; cudaEventCreate(&s); cudaEventCreate(&e);
    long iters = iters0; float ms = 0; double total = 0;
    while (total < seconds * 1000) {
        cudaEventRecord(s); launch(iters); cudaEventRecord(e); cudaEventSynchronize(e);
        cudaEventElapsedTime(&ms, s, e); total += ms;
        if (ms < 200) iters *= 2;
    }
    printf("%s: %.1f s\n", what, total / 1000);
}
static int blocks; static float *fout; static half *hout;
static void launch_fma(long n) { fma_loop<<<blocks * 8, 256>>>(fout, n); }
static void launch_mma(long n) { mma_loop<<<blocks * 8, 32>>>(hout, n); }
int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 20;
    cudaDeviceGetAttribute(&blocks, cudaDevAttrMultiProcessorCount, 0);
    cudaMalloc(&fout, sizeof(float) * blocks * 8 * 256);
    cudaMalloc(&hout, sizeof(half) * blocks * 8 * 256);
    run("fp32 fma", seconds, launch_fma, 1 << 16);
    fflush(stdout);
    run("tensor mma", seconds, launch_mma, 1 << 12);
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
CU
    nvcc -O2 -arch=native -o "$T/load" "$T/load.cu" >"$T/nvcc.log" 2>&1 ||
        die "nvcc: $(tail -5 "$T/nvcc.log")"
    # the phase boundary is when the first line comes out
    CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$GPU "$T/load" "$SECONDS_EACH" | while read -r l; do
        echo "$l" >>"$T/load.log"
        date +%s >>"$T/phases"
    done
    t_b=$(head -1 "$T/phases")
else
    say "no nvcc: the load is build/cuda-check (vectorAdd) run over and over"
    end=$((SECONDS + 2 * SECONDS_EACH))
    t_b=$((t_a + SECONDS_EACH))
    while [ $SECONDS -lt $end ]; do
        CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$GPU "$BUILD/cuda-check" --elements 50000000 >>"$T/load.log" 2>&1 || break
    done
fi
t_end=$(date +%s)
sleep 4
[ -s "$T/direct" ] || die "the direct reader read nothing: $(cat "$T/direct.err")"
! grep -q '^NOGPM' "$T/direct" || skip "NVML says GPU $GPU has no GPM ($(head -1 "$T/direct"))"
say "load: $(tr '\n' ';' <"$T/load.log" | cut -c1-200)"

# Each phase's middle (a second trimmed at both ends, and the exporter's one-interval lag):
# the mean of each field's readings there, from gpuop and from NVML.
python3 - "$T/gpuop" "$T/direct" "$t_a" "$t_b" "$t_end" <<'PY'
import collections, sys
gp, di, ta, tb, te = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
phases = [("A", ta + 3, tb - 1), ("B", tb + 3, te - 1)]
def means(path):
    acc = collections.defaultdict(list)
    for line in open(path):
        t, name, v = line.split()
        for p, lo, hi in phases:
            if lo <= float(t) <= hi:
                acc[(p, name)].append(float(v))
    return {k: sum(v) / len(v) for k, v in acc.items() if v}
g, d = means(gp), means(di)
bad = compared = 0
print(f"{'phase':5} {'field':34} {'gpuop':>14} {'NVML GPM':>14}")
for key in sorted(set(g) | set(d)):
    p, name = key
    a, b = g.get(key), d.get(key)
    fmt = lambda x: "-" if x is None else f"{x:.4g}"
    rate = name.endswith("_BYTES")
    ok = a is not None and b is not None and (
        abs(a - b) <= max(0.1 * max(abs(a), abs(b)), 10 * 1048576) if rate else abs(a - b) <= 0.05)
    if a is None and b is None:
        continue
    compared += 1
    bad += not ok
    print(f"{p:5} {name:34} {fmt(a):>14} {fmt(b):>14}  {'ok' if ok else 'DIFFERS'}")
if compared == 0:
    sys.exit("nothing to compare: no readings in either phase")
print(f"{compared} compared, {bad} differ")
sys.exit(1 if bad else 0)
PY
rc=$?
if [ $rc = 0 ]; then
    echo "gpm-check-real: PASS"
else
    echo "gpm-check-real: FAIL (see above)"
fi
exit $rc
