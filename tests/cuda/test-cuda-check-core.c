/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA check's core over a stand-in driver: a table of functions (struct cuda_api) whose
 * "device memory" is host memory and whose vectorAdd is C's. Faults are switched per test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "cuda-internal.h"

static struct {
    CUresult init, ctx_on_dev1, load;
    int devices;
    bool corrupt_dev1, write_nothing;
    int allocs, frees, ctxs, ctx_destroys, mods, unloads;
    unsigned last_grid, last_block;
    const char *ptx_seen;
    int current;
} F;

static CUresult f_init(unsigned flags)
{
    return flags ? CUDA_ERROR_INVALID_VALUE : F.init;
}
static CUresult f_version(int *v)
{
    *v = 12080;
    return CUDA_SUCCESS;
}
static CUresult f_count(int *n)
{
    *n = F.devices;
    return CUDA_SUCCESS;
}
static CUresult f_get(CUdevice *d, int ord)
{
    if (ord < 0 || ord >= F.devices)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ord;
    return CUDA_SUCCESS;
}
static CUresult f_name(char *name, int len, CUdevice d)
{
    snprintf(name, (size_t)len, "Fake GPU %d", d);
    return CUDA_SUCCESS;
}
static CUresult f_uuid(CUuuid *u, CUdevice d)
{
    for (int i = 0; i < 16; i++)
        u->bytes[i] = (char)(d * 16 + i);
    return CUDA_SUCCESS;
}
static CUresult f_ctx_create(CUcontext *c, unsigned flags, CUdevice d)
{
    (void)flags;
    if (d == 1 && F.ctx_on_dev1)
        return F.ctx_on_dev1;
    F.ctxs++;
    F.current = d;
    *c = (CUcontext)(uintptr_t)(0x1000 + d);
    return CUDA_SUCCESS;
}
static CUresult f_ctx_destroy(CUcontext c)
{
    (void)c;
    F.ctx_destroys++;
    return CUDA_SUCCESS;
}
static CUresult f_sync(void)
{
    return CUDA_SUCCESS;
}
static CUresult f_load(CUmodule *m, const void *image)
{
    if (F.load)
        return F.load;
    F.ptx_seen = image;
    F.mods++;
    *m = (CUmodule)(uintptr_t)0x2000;
    return CUDA_SUCCESS;
}
static CUresult f_getfn(CUfunction *f, CUmodule m, const char *name)
{
    (void)m;
    if (strcmp(name, "vectorAdd") != 0)
        return CUDA_ERROR_NOT_FOUND;
    *f = (CUfunction)(uintptr_t)0x3000;
    return CUDA_SUCCESS;
}
static CUresult f_unload(CUmodule m)
{
    (void)m;
    F.unloads++;
    return CUDA_SUCCESS;
}
static CUresult f_alloc(CUdeviceptr *p, size_t n)
{
    F.allocs++;
    *p = (CUdeviceptr)(uintptr_t)malloc(n);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult f_free(CUdeviceptr p)
{
    F.frees++;
    free((void *)(uintptr_t)p);
    return CUDA_SUCCESS;
}
static CUresult f_htod(CUdeviceptr d, const void *s, size_t n)
{
    memcpy((void *)(uintptr_t)d, s, n);
    return CUDA_SUCCESS;
}
static CUresult f_dtoh(void *d, CUdeviceptr s, size_t n)
{
    memcpy(d, (const void *)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}
static CUresult f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned shm, CUstream s, void **params,
                         void **extra)
{
    (void)f, (void)gy, (void)gz, (void)by, (void)bz, (void)shm, (void)s, (void)extra;
    F.last_grid = gx;
    F.last_block = bx;
    if (F.write_nothing)
        return CUDA_SUCCESS;
    CUdeviceptr a = *(CUdeviceptr *)params[0], b = *(CUdeviceptr *)params[1],
                c = *(CUdeviceptr *)params[2];
    int n = *(int *)params[3];
    const float *fa = (const float *)(uintptr_t)a, *fb = (const float *)(uintptr_t)b;
    float *fc = (float *)(uintptr_t)c;
    for (uint64_t i = 0; i < (uint64_t)gx * bx && i < (uint64_t)n; i++)
        fc[i] = fa[i] + fb[i];
    if (F.corrupt_dev1 && F.current == 1)
        fc[n - 1] += 0.5f;
    return CUDA_SUCCESS;
}
static const struct {
    CUresult code;
    const char *name, *text;
} names[] = {
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
};
static CUresult f_errname(CUresult r, const char **s)
{
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (names[i].code == r)
            return *s = names[i].name, CUDA_SUCCESS;
    return CUDA_ERROR_INVALID_VALUE;
}
static CUresult f_errstr(CUresult r, const char **s)
{
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (names[i].code == r)
            return *s = names[i].text, CUDA_SUCCESS;
    return CUDA_ERROR_INVALID_VALUE;
}

static const struct cuda_api fake = {
    .cuInit = f_init,
    .cuDriverGetVersion = f_version,
    .cuDeviceGetCount = f_count,
    .cuDeviceGet = f_get,
    .cuDeviceGetName = f_name,
    .cuDeviceGetUuid = f_uuid,
    .cuCtxCreate_v2 = f_ctx_create,
    .cuCtxDestroy_v2 = f_ctx_destroy,
    .cuCtxSynchronize = f_sync,
    .cuModuleLoadData = f_load,
    .cuModuleGetFunction = f_getfn,
    .cuModuleUnload = f_unload,
    .cuMemAlloc_v2 = f_alloc,
    .cuMemFree_v2 = f_free,
    .cuMemcpyHtoD_v2 = f_htod,
    .cuMemcpyDtoH_v2 = f_dtoh,
    .cuLaunchKernel = f_launch,
    .cuGetErrorName = f_errname,
    .cuGetErrorString = f_errstr,
};

static int reset(void **state)
{
    (void)state;
    memset(&F, 0, sizeof(F));
    F.devices = 2;
    return 0;
}

static struct cuda_check_result res;

static void test_pass(void **state)
{
    (void)state;
    struct err e = {0};
    assert_int_equal(cuda_check_api(&fake, 0, &res, &e), 0);
    assert_int_equal(res.driver_version, 12080);
    assert_int_equal(res.n_devices, 2);
    for (int i = 0; i < 2; i++) {
        assert_true(res.dev[i].ok);
        assert_int_equal(res.dev[i].ordinal, i);
        assert_string_equal(res.dev[i].reason, "");
    }
    assert_string_equal(res.dev[1].name, "Fake GPU 1");
    assert_string_equal(res.dev[1].uuid, "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f");
    /* vectorAdd's 50000 elements in blocks of 256 */
    assert_int_equal(F.last_block, 256);
    assert_int_equal(F.last_grid, 196);
    assert_ptr_equal(F.ptx_seen, cuda_vector_add_ptx);
    /* everything given back */
    assert_int_equal(F.allocs, 6);
    assert_int_equal(F.frees, 6);
    assert_int_equal(F.ctxs, 2);
    assert_int_equal(F.ctx_destroys, 2);
    assert_int_equal(F.unloads, F.mods);
}

static void test_wrong_result(void **state)
{
    (void)state;
    F.corrupt_dev1 = true;
    struct err e = {0};
    assert_int_equal(cuda_check_api(&fake, 1000, &res, &e), -EBADMSG);
    assert_true(res.dev[0].ok);
    assert_false(res.dev[1].ok);
    assert_string_equal(err_msg(&e),
                        "device 1 (Fake GPU 1, GPU-10111213-1415-1617-1819-1a1b1c1d1e1f): "
                        "vectorAdd result verification failed: 1 of 1000 elements wrong, the "
                        "first at index 999 (got 1.6812706, expected 1.1812706)");
    assert_string_equal(res.dev[1].reason,
                        "vectorAdd result verification failed: 1 of 1000 elements wrong, the "
                        "first at index 999 (got 1.6812706, expected 1.1812706)");
    assert_int_equal(F.frees, F.allocs);
}

static void test_kernel_writes_nothing(void **state)
{
    (void)state;
    F.write_nothing = true;
    struct err e = {0};
    assert_int_equal(cuda_check_api(&fake, 10, &res, &e), -EBADMSG);
    assert_non_null(strstr(err_msg(&e), "device 0 (Fake GPU 0"));
    assert_non_null(strstr(err_msg(&e), "10 of 10 elements wrong, the first at index 0 (got -nan"));
}

static void test_init_fails(void **state)
{
    (void)state;
    F.init = CUDA_ERROR_NO_DEVICE;
    struct err e = {0};
    assert_int_equal(cuda_check_api(&fake, 0, &res, &e), -ENODEV);
    assert_string_equal(err_msg(&e), "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is "
                                     "detected)");
    assert_int_equal(res.n_devices, 0);
    F.init = 12345; /* a code the library has no name for */
    assert_int_equal(cuda_check_api(&fake, 0, &res, &e), -EIO);
    assert_string_equal(err_msg(&e), "cuInit: CUDA error 12345");
}

static void test_one_device_fails(void **state)
{
    (void)state;
    F.devices = 3;
    F.ctx_on_dev1 = CUDA_ERROR_UNKNOWN;
    struct err e = {0};
    assert_int_equal(cuda_check_api(&fake, 0, &res, &e), -EIO);
    assert_string_equal(err_msg(&e), "device 1 (Fake GPU 1, GPU-10111213-1415-1617-1819-"
                                     "1a1b1c1d1e1f): cuCtxCreate: CUDA_ERROR_UNKNOWN (unknown "
                                     "error)");
    assert_int_equal(res.n_devices, 3); /* the others still ran */
    assert_true(res.dev[0].ok && !res.dev[1].ok && res.dev[2].ok);
    assert_int_equal(F.ctx_destroys, 2);
}

static void test_module_fails(void **state)
{
    (void)state;
    F.load = CUDA_ERROR_INVALID_PTX;
    struct err e = {0};
    assert_int_equal(cuda_check_api(&fake, 0, &res, &e), -ENOEXEC);
    assert_non_null(strstr(err_msg(&e), "cuModuleLoadData (vectorAdd PTX): "
                                        "CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)"));
    assert_int_equal(F.ctx_destroys, F.ctxs);
    assert_int_equal(F.allocs, 0);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    struct err e = {0};
    assert_int_equal(cuda_check_api(&fake, CUDA_CHECK_MAX_N + 1, &res, &e), -EINVAL);
    F.devices = 0;
    assert_int_equal(cuda_check_api(&fake, 0, &res, &e), -ENODEV);
    assert_string_equal(err_msg(&e), "cuDeviceGetCount: no CUDA device");
    F.devices = CUDA_CHECK_MAX_DEVICES + 1;
    assert_int_equal(cuda_check_api(&fake, 0, &res, &e), -E2BIG);
}

static void test_missing_library(void **state)
{
    (void)state;
    struct err e = {0};
    assert_int_equal(cuda_check_run("/nonexistent/libcuda.so.1", 0, &res, &e), -ENODEV);
    assert_true(
        str_has_prefix(err_msg(&e), "load the CUDA driver \"/nonexistent/libcuda.so.1\": "));
    /* a library without the driver API */
    assert_int_equal(cuda_check_run("libm.so.6", 0, &res, &e), -ENOSYS);
    assert_string_equal(err_msg(&e), "CUDA driver \"libm.so.6\" has no cuInit");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_pass, reset),
        cmocka_unit_test_setup(test_wrong_result, reset),
        cmocka_unit_test_setup(test_kernel_writes_nothing, reset),
        cmocka_unit_test_setup(test_init_fails, reset),
        cmocka_unit_test_setup(test_one_device_fails, reset),
        cmocka_unit_test_setup(test_module_fails, reset),
        cmocka_unit_test_setup(test_bad_arguments, reset),
        cmocka_unit_test_setup(test_missing_library, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
