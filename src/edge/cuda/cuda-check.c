/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA check's core: cuInit, the device count, then for each device a context, the embedded
 * vectorAdd module, device memory, a launch, the copy back and a check of every element. It
 * calls the driver only through a struct cuda_api, so a unit test can stand in for it.
 */
#include <string.h>

#include "cuda-internal.h"

int cuda_errno(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS:
        return 0;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_CONTEXT:
        return -EINVAL;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return -ENOMEM;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
        return -ENODEV;
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
        return -EBUSY;
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
        return -ENOEXEC;
    case CUDA_ERROR_NOT_FOUND:
        return -ENOENT;
    case CUDA_ERROR_NOT_SUPPORTED:
        return -EOPNOTSUPP;
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
        return -EPROTO;
    default:
        return -EIO;
    }
}

void cuda_describe(const struct cuda_api *api, CUresult r, char *buf, size_t n)
{
    const char *name = NULL, *text = NULL;
    if (api->cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) {
        snprintf(buf, n, "CUDA error %d", r);
        return;
    }
    if (api->cuGetErrorString(r, &text) != CUDA_SUCCESS || !text)
        snprintf(buf, n, "%s", name);
    else
        snprintf(buf, n, "%s (%s)", name, text);
}

void cuda_uuid_format(const CUuuid *u, char *buf, size_t n)
{
    const unsigned char *b = (const unsigned char *)u->bytes;
    snprintf(buf, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

/* A failed call: "<call>: CUDA_ERROR_X (text)" with the errno-style code of r. */
static int fail(const struct cuda_api *api, struct err *e, const char *call, CUresult r)
{
    char what[256];
    cuda_describe(api, r, what, sizeof(what));
    return err_set(e, cuda_errno(r), "%s: %s", call, what);
}

/* What one device's run holds; released in reverse order whatever happened. */
struct dev_run {
    const struct cuda_api *api;
    CUcontext ctx;
    CUmodule mod;
    CUdeviceptr d[3];
};

static void dev_run_release(struct dev_run *run)
{
    if (!run->ctx)
        return;
    for (size_t i = 0; i < ARRAY_SIZE(run->d); i++)
        if (run->d[i])
            run->api->cuMemFree_v2(run->d[i]);
    if (run->mod)
        run->api->cuModuleUnload(run->mod);
    run->api->cuCtxDestroy_v2(run->ctx);
    run->ctx = NULL;
}

/* Inputs that are exact in float and whose sums are too: verification by tolerance then only
 * forgives what a device may legitimately round (nothing, for these values). */
static void fill_inputs(float *a, float *b, size_t n)
{
    uint32_t x = 0x9e3779b9u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        a[i] = (float)(x >> 12) / (float)(1u << 20);
        x = x * 1664525u + 1013904223u;
        b[i] = (float)(x >> 12) / (float)(1u << 20);
    }
}

static int verify(const float *a, const float *b, const float *c, size_t n, struct err *e)
{
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double want = (double)a[i] + (double)b[i];
        double diff = (double)c[i] - want;
        /* NaN compares false: counted wrong through the negation */
        if (!(diff <= CUDA_CHECK_TOLERANCE && diff >= -CUDA_CHECK_TOLERANCE)) {
            if (wrong++ == 0)
                first = i;
        }
    }
    if (wrong == 0)
        return 0;
    return err_set(e, -EBADMSG,
                   "vectorAdd result verification failed: %zu of %zu elements wrong, the first "
                   "at index %zu (got %.9g, expected %.9g)",
                   wrong, n, first, (double)c[first], (double)a[first] + (double)b[first]);
}

static int run_device(const struct cuda_api *api, int ordinal, size_t n, const float *a,
                      const float *b, float *c, struct cuda_device_result *dr, struct err *e)
{
    CUdevice dev;
    CUresult r = api->cuDeviceGet(&dev, ordinal);
    if (r != CUDA_SUCCESS)
        return fail(api, e, "cuDeviceGet", r);
    r = api->cuDeviceGetName(dr->name, (int)sizeof(dr->name), dev);
    if (r != CUDA_SUCCESS)
        return fail(api, e, "cuDeviceGetName", r);
    dr->name[sizeof(dr->name) - 1] = '\0';
    CUuuid uuid;
    r = api->cuDeviceGetUuid_v2 ? api->cuDeviceGetUuid_v2(&uuid, dev)
                                : api->cuDeviceGetUuid(&uuid, dev);
    if (r == CUDA_SUCCESS)
        cuda_uuid_format(&uuid, dr->uuid, sizeof(dr->uuid));

    _cleanup_(dev_run_release) struct dev_run run = {.api = api};
    r = api->cuCtxCreate_v2(&run.ctx, 0, dev);
    if (r != CUDA_SUCCESS) {
        run.ctx = NULL;
        return fail(api, e, "cuCtxCreate", r);
    }
    r = api->cuModuleLoadData(&run.mod, cuda_vector_add_ptx);
    if (r != CUDA_SUCCESS) {
        run.mod = NULL;
        return fail(api, e, "cuModuleLoadData (vectorAdd PTX)", r);
    }
    CUfunction fn;
    r = api->cuModuleGetFunction(&fn, run.mod, "vectorAdd");
    if (r != CUDA_SUCCESS)
        return fail(api, e, "cuModuleGetFunction vectorAdd", r);
    size_t bytes = n * sizeof(float);
    for (size_t i = 0; i < ARRAY_SIZE(run.d); i++) {
        r = api->cuMemAlloc_v2(&run.d[i], bytes);
        if (r != CUDA_SUCCESS) {
            run.d[i] = 0;
            return fail(api, e, "cuMemAlloc", r);
        }
    }
    r = api->cuMemcpyHtoD_v2(run.d[0], a, bytes);
    if (r == CUDA_SUCCESS)
        r = api->cuMemcpyHtoD_v2(run.d[1], b, bytes);
    if (r != CUDA_SUCCESS)
        return fail(api, e, "cuMemcpyHtoD", r);
    /* A known pattern in C, so a kernel that writes nothing cannot pass. */
    memset(c, 0xff, bytes);
    r = api->cuMemcpyHtoD_v2(run.d[2], c, bytes);
    if (r != CUDA_SUCCESS)
        return fail(api, e, "cuMemcpyHtoD", r);

    int count = (int)n;
    void *params[] = {&run.d[0], &run.d[1], &run.d[2], &count};
    unsigned blocks = (unsigned)((n + CUDA_CHECK_BLOCK - 1) / CUDA_CHECK_BLOCK);
    r = api->cuLaunchKernel(fn, blocks, 1, 1, CUDA_CHECK_BLOCK, 1, 1, 0, NULL, params, NULL);
    if (r != CUDA_SUCCESS)
        return fail(api, e, "cuLaunchKernel vectorAdd", r);
    r = api->cuCtxSynchronize();
    if (r != CUDA_SUCCESS)
        return fail(api, e, "cuCtxSynchronize", r);
    r = api->cuMemcpyDtoH_v2(c, run.d[2], bytes);
    if (r != CUDA_SUCCESS)
        return fail(api, e, "cuMemcpyDtoH", r);
    return verify(a, b, c, n, e);
}

int cuda_check_api(const struct cuda_api *api, size_t n_elements, struct cuda_check_result *ret,
                   struct err *e)
{
    memset(ret, 0, sizeof(*ret));
    size_t n = n_elements ? n_elements : CUDA_CHECK_DEFAULT_N;
    if (n > CUDA_CHECK_MAX_N)
        return err_set(e, -EINVAL, "CUDA check: %zu elements is more than %u", n, CUDA_CHECK_MAX_N);
    CUresult r = api->cuInit(0);
    if (r != CUDA_SUCCESS)
        return fail(api, e, "cuInit", r);
    r = api->cuDriverGetVersion(&ret->driver_version);
    if (r != CUDA_SUCCESS)
        return fail(api, e, "cuDriverGetVersion", r);
    int count = 0;
    r = api->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return fail(api, e, "cuDeviceGetCount", r);
    if (count <= 0)
        return err_set(e, -ENODEV, "cuDeviceGetCount: no CUDA device");
    if (count > CUDA_CHECK_MAX_DEVICES)
        return err_set(e, -E2BIG, "cuDeviceGetCount: %d devices, more than the %d checked", count,
                       CUDA_CHECK_MAX_DEVICES);

    _cleanup_free_ float *a = xcalloc(n, sizeof(float));
    _cleanup_free_ float *b = xcalloc(n, sizeof(float));
    _cleanup_free_ float *c = xcalloc(n, sizeof(float));
    fill_inputs(a, b, n);

    int first = 0;
    struct err first_err = {0};
    for (int i = 0; i < count; i++) {
        struct cuda_device_result *dr = &ret->dev[i];
        dr->ordinal = i;
        ret->n_devices = i + 1;
        struct err de = {0};
        uint64_t t0 = now_us_mono();
        int rc = run_device(api, i, n, a, b, c, dr, &de);
        dr->elapsed_ms = (double)(now_us_mono() - t0) / 1000.0;
        if (rc == 0) {
            dr->ok = true;
            continue;
        }
        snprintf(dr->reason, sizeof(dr->reason), "%s", err_msg(&de));
        if (first == 0) {
            first = rc;
            first_err = de;
            err_prefix(&first_err, "device %d (%s%s%s)", i, dr->name[0] ? dr->name : "?",
                       dr->uuid[0] ? ", " : "", dr->uuid);
        }
    }
    if (first < 0) {
        *e = first_err;
        return first;
    }
    return 0;
}
