/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulated libcuda's driver API, called directly: module loading checks the PTX (malformed
 * text is CUDA_ERROR_INVALID_PTX), launches keep CUDA's bounds, and a kernel's bad address is
 * reported by the next call and sticks to the context.
 *
 * Usage: test-cuda-sim LIBCUDA FLEETS_DIR
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "cuda-internal.h"

static struct cuda_api api;
static CUcontext ctx;

static int setup(void **state)
{
    (void)state;
    assert_int_equal(api.cuInit(0), CUDA_SUCCESS);
    assert_int_equal(api.cuCtxCreate_v2(&ctx, 0, 0), CUDA_SUCCESS);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    assert_int_equal(api.cuCtxDestroy_v2(ctx), CUDA_SUCCESS);
    return 0;
}

static void test_malformed_ptx(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "not ptx at all",
        ".version 6.0\n.target sm_50\n.address_size 64\n.entry vectorAdd( {\n}\n",
        ".version 6.0\n.target sm_50\n.address_size 64\n.entry k() { bogus.op %r1; }\n",
        ".version 6.0\n.target sm_50\n.entry k() { ret;\n",
        ".version 6.0\n.target sm_100\n.entry k() { ret; }\n", /* newer than the L4 (sm_89) */
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        CUmodule m = NULL;
        CUresult r = api.cuModuleLoadData(&m, bad[i]);
        if (r != CUDA_ERROR_INVALID_PTX)
            fail_msg("case %zu: %d, want CUDA_ERROR_INVALID_PTX", i, r);
    }
    CUmodule m;
    assert_int_equal(api.cuModuleLoadData(&m, ".version 12.0\n.target sm_50\n"),
                     CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
    assert_int_equal(api.cuModuleLoadData(&m, "\x7f"
                                              "ELF\x02\x01"),
                     CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.cuModuleLoadData(&m, NULL), CUDA_ERROR_INVALID_VALUE);
    const char *name = NULL, *text = NULL;
    assert_int_equal(api.cuGetErrorName(CUDA_ERROR_INVALID_PTX, &name), CUDA_SUCCESS);
    assert_int_equal(api.cuGetErrorString(CUDA_ERROR_INVALID_PTX, &text), CUDA_SUCCESS);
    assert_string_equal(name, "CUDA_ERROR_INVALID_PTX");
    assert_string_equal(text, "a PTX JIT compilation failed");
    assert_int_equal(api.cuGetErrorName(4242, &name), CUDA_ERROR_INVALID_VALUE);
}

static void test_functions_and_bounds(void **state)
{
    (void)state;
    CUmodule m;
    CUfunction f, g;
    assert_int_equal(api.cuModuleLoadData(&m, cuda_vector_add_ptx), CUDA_SUCCESS);
    assert_int_equal(api.cuModuleGetFunction(&f, m, "vectorAdd"), CUDA_SUCCESS);
    assert_int_equal(api.cuModuleGetFunction(&g, m, "vectorSub"), CUDA_ERROR_NOT_FOUND);
    enum { N = 1000 };
    static float a[N], b[N], c[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)i;
        b[i] = 0.5f;
        c[i] = -1.0f;
    }
    CUdeviceptr d[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(api.cuMemAlloc_v2(&d[i], sizeof(a)), CUDA_SUCCESS);
    assert_int_equal(api.cuMemcpyHtoD_v2(d[0], a, sizeof(a)), CUDA_SUCCESS);
    assert_int_equal(api.cuMemcpyHtoD_v2(d[1], b, sizeof(b)), CUDA_SUCCESS);
    assert_int_equal(api.cuMemcpyHtoD_v2(d[2], c, sizeof(c)), CUDA_SUCCESS);
    assert_int_equal(api.cuMemcpyHtoD_v2(d[2] + 4, c, sizeof(c)), CUDA_ERROR_INVALID_VALUE);
    int n = N;
    void *params[] = {&d[0], &d[1], &d[2], &n};
    /* too many threads per block, a zero grid */
    assert_int_equal(api.cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, NULL, params, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(api.cuLaunchKernel(f, 0, 1, 1, 256, 1, 1, 0, NULL, params, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    /* 2 blocks of 256 threads: the first 512 elements only, as the kernel's index says */
    assert_int_equal(api.cuLaunchKernel(f, 2, 1, 1, 256, 1, 1, 0, NULL, params, NULL),
                     CUDA_SUCCESS);
    assert_int_equal(api.cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(api.cuMemcpyDtoH_v2(c, d[2], sizeof(c)), CUDA_SUCCESS);
    for (int i = 0; i < N; i++)
        assert_true(c[i] == (i < 512 ? (float)i + 0.5f : -1.0f));
    /* n beyond the allocations: an illegal address, reported by the next call, sticky */
    n = 2 * N;
    assert_int_equal(api.cuLaunchKernel(f, 8, 1, 1, 256, 1, 1, 0, NULL, params, NULL),
                     CUDA_SUCCESS);
    assert_int_equal(api.cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(api.cuMemcpyDtoH_v2(c, d[2], sizeof(c)), CUDA_ERROR_ILLEGAL_ADDRESS);
    /* destroying the context (teardown) frees its memory and modules */
}

static void test_devices(void **state)
{
    (void)state;
    int count = 0, v = 0;
    assert_int_equal(api.cuDeviceGetCount(&count), CUDA_SUCCESS);
    assert_int_equal(count, 4);
    assert_int_equal(api.cuDriverGetVersion(&v), CUDA_SUCCESS);
    assert_true(v >= 11000);
    char name[8];
    assert_int_equal(api.cuDeviceGetName(name, sizeof(name), 0), CUDA_SUCCESS);
    assert_string_equal(name, "NVIDIA ");
    CUdevice dev;
    assert_int_equal(api.cuDeviceGet(&dev, 4), CUDA_ERROR_INVALID_DEVICE);
    CUcontext other;
    assert_int_equal(api.cuCtxCreate_v2(&other, 0, 7), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(api.cuInit(1), CUDA_ERROR_INVALID_VALUE);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test-cuda-sim LIBCUDA FLEETS_DIR\n");
        return 2;
    }
    char fleet[512];
    snprintf(fleet, sizeof(fleet), "%s/pcie-l4.yaml", argv[2]);
    setenv("GPUOP_SIM_FLEET", fleet, 1);
    unsetenv("GPUOP_SIM_STATE");
    unsetenv("GPUOP_SIM_ROOT");
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("NVIDIA_VISIBLE_DEVICES");
    unsetenv("GPUOP_SIM_CUDA_CORRUPT");
    struct err e = {0};
    if (cuda_api_load(argv[1], &api, &e) < 0) {
        fprintf(stderr, "%s\n", err_msg(&e));
        return 1;
    }
    /* before cuInit */
    int count;
    if (api.cuDeviceGetCount(&count) != CUDA_ERROR_NOT_INITIALIZED) {
        fprintf(stderr, "cuDeviceGetCount before cuInit did not fail\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_malformed_ptx, setup, teardown),
        cmocka_unit_test_setup_teardown(test_functions_and_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices, setup, teardown),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    cuda_api_unload(&api);
    return r;
}
