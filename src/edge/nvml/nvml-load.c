/* SPDX-License-Identifier: Apache-2.0 */
/* Loading libnvidia-ml.so.1 at run time, and NVML return codes as gpuop errors. */
#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <string.h>

#include "nvml-internal.h"

#define NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"

int gpu_nvml_code(int r)
{
    switch (r) {
    case NVML_SUCCESS:
        return 0;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED:
    case NVML_ERROR_DEPRECATED:
        return GPU_ERR_NOT_SUPPORTED;
    case NVML_ERROR_GPU_IS_LOST:
        return GPU_ERR_LOST;
    case NVML_ERROR_INVALID_ARGUMENT:
        return -EINVAL;
    case NVML_ERROR_NO_PERMISSION:
        return -EPERM;
    case NVML_ERROR_ALREADY_INITIALIZED:
        return -EALREADY;
    case NVML_ERROR_NOT_FOUND:
    case NVML_ERROR_GPU_NOT_FOUND:
        return -ENOENT;
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return -ENOBUFS;
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return -ENODEV;
    case NVML_ERROR_TIMEOUT:
        return -ETIMEDOUT;
    case NVML_ERROR_RESET_REQUIRED:
    case NVML_ERROR_NOT_READY:
        return -EAGAIN;
    case NVML_ERROR_IN_USE:
        return -EBUSY;
    case NVML_ERROR_MEMORY:
        return -ENOMEM;
    case NVML_ERROR_NO_DATA:
        return -ENODATA;
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
        return -ENOSPC;
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return -EPROTO;
    case NVML_ERROR_INVALID_STATE:
        return -EBADFD;
    default:
        return -EIO;
    }
}

/* gpuop's wording, used when the library has no nvmlErrorString. */
static const char *own_string(int r)
{
    static const struct {
        int code;
        const char *s;
    } t[] = {
        {NVML_SUCCESS, "Success"},
        {NVML_ERROR_UNINITIALIZED, "Uninitialized"},
        {NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
        {NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
        {NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"},
        {NVML_ERROR_ALREADY_INITIALIZED, "Already Initialized"},
        {NVML_ERROR_NOT_FOUND, "Not Found"},
        {NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
        {NVML_ERROR_INSUFFICIENT_POWER, "Insufficient External Power"},
        {NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"},
        {NVML_ERROR_TIMEOUT, "Timeout"},
        {NVML_ERROR_IRQ_ISSUE, "Interrupt Request Issue"},
        {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"},
        {NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found"},
        {NVML_ERROR_CORRUPTED_INFOROM, "Corrupted infoROM"},
        {NVML_ERROR_GPU_IS_LOST, "GPU is lost"},
        {NVML_ERROR_RESET_REQUIRED, "GPU requires reset"},
        {NVML_ERROR_OPERATING_SYSTEM, "GPU access blocked by the operating system"},
        {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "Driver/library version mismatch"},
        {NVML_ERROR_IN_USE, "In use by another client"},
        {NVML_ERROR_MEMORY, "Insufficient Memory"},
        {NVML_ERROR_NO_DATA, "No data"},
        {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "ECC not supported on vGPU"},
        {NVML_ERROR_INSUFFICIENT_RESOURCES, "Insufficient resources"},
        {NVML_ERROR_FREQ_NOT_SUPPORTED, "Frequency not supported"},
        {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "Argument version mismatch"},
        {NVML_ERROR_DEPRECATED, "Deprecated"},
        {NVML_ERROR_NOT_READY, "Not ready"},
        {NVML_ERROR_GPU_NOT_FOUND, "GPU not found"},
        {NVML_ERROR_INVALID_STATE, "Invalid state"},
        {NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, "Reset type not supported"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++)
        if (t[i].code == r)
            return t[i].s;
    return "Unknown Error";
}

const char *gpu_nvml_string(const struct gpu_lib *lib, int r)
{
    /* A missing symbol is ours to word: NVML itself never saw the call. */
    if (r == NVML_ERROR_FUNCTION_NOT_FOUND)
        return "Function Not Found (not in this driver's libnvidia-ml)";
    if (lib && lib->t.nvmlErrorString) {
        const char *s = lib->t.nvmlErrorString((nvmlReturn_t)r);
        if (s && s[0])
            return s;
    }
    return own_string(r);
}

int nv_err(const struct gpu_lib *lib, nvmlReturn_t r, struct err *e, const char *fmt, ...)
{
    char head[ERR_MSG_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof(head), fmt, ap);
    va_end(ap);
    return err_set(e, gpu_nvml_code(r) ?: -EIO, "%s: %s", head, gpu_nvml_string(lib, r));
}

int nv_device_count(struct gpu_lib *lib, unsigned *ret, struct err *e)
{
    unsigned count = 0;
    nvmlReturn_t r = NV(lib, nvmlDeviceGetCount_v2, &count);
    if (r != NVML_SUCCESS)
        return nv_err(lib, r, e, "nvmlDeviceGetCount_v2");
    if (count > 1024)
        return err_set(e, -ERANGE, "nvmlDeviceGetCount_v2: implausible GPU count %u", count);
    *ret = count;
    return 0;
}

int nv_handle(struct gpu_lib *lib, unsigned index, nvmlDevice_t *ret, struct err *e)
{
    nvmlDevice_t dev = NULL;
    nvmlReturn_t r = NV(lib, nvmlDeviceGetHandleByIndex_v2, index, &dev);
    if (r != NVML_SUCCESS)
        return nv_err(lib, r, e, "nvmlDeviceGetHandleByIndex_v2(gpu %u)", index);
    *ret = dev;
    return 0;
}

const char *gpu_arch_name(unsigned arch)
{
    switch (arch) {
    case NVML_DEVICE_ARCH_KEPLER:
        return "kepler";
    case NVML_DEVICE_ARCH_MAXWELL:
        return "maxwell";
    case NVML_DEVICE_ARCH_PASCAL:
        return "pascal";
    case NVML_DEVICE_ARCH_VOLTA:
        return "volta";
    case NVML_DEVICE_ARCH_TURING:
        return "turing";
    case NVML_DEVICE_ARCH_AMPERE:
        return "ampere";
    case NVML_DEVICE_ARCH_ADA:
        return "ada";
    case NVML_DEVICE_ARCH_HOPPER:
        return "hopper";
    case NVML_DEVICE_ARCH_BLACKWELL:
        return "blackwell";
    case NVML_DEVICE_ARCH_RUBIN:
        return "rubin";
    default:
        return "unknown";
    }
}

static void table_load(void *dl, struct nvml_table *t)
{
#define NVML_TABLE_LOAD(name) t->name = (__typeof__(&name))dlsym(dl, #name);
    NVML_FUNCS(NVML_TABLE_LOAD)
#undef NVML_TABLE_LOAD
}

/* The file the dynamic loader actually opened, for messages and `gpuop inventory`. */
static char *loaded_path(void *dl, const char *requested)
{
    struct link_map *lm = NULL;
    if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
        return xstrdup(lm->l_name);
    return xstrdup(requested);
}

static int nvml_init(struct gpu_lib *lib, struct err *e)
{
    nvmlReturn_t r;
    const char *call;
    if (lib->t.nvmlInit_v2) {
        call = "nvmlInit_v2";
        r = lib->t.nvmlInit_v2();
    } else if (lib->t.nvmlInitWithFlags) {
        call = "nvmlInitWithFlags";
        r = lib->t.nvmlInitWithFlags(0);
    } else {
        return err_set(e, -ENOEXEC,
                       "NVML library \"%s\" has neither nvmlInit_v2 nor nvmlInitWithFlags: "
                       "not a usable libnvidia-ml",
                       lib->path);
    }
    if (r != NVML_SUCCESS)
        return err_set(e, gpu_nvml_code(r) ?: -EIO,
                       "NVML library \"%s\" failed to initialise: %s: %s (is the NVIDIA kernel "
                       "driver loaded and this library its match? GPUOP_NVML_LIBRARY selects "
                       "another)",
                       lib->path, call, gpu_nvml_string(lib, r));
    return 0;
}

int gpu_lib_open(const char *path, struct gpu_lib **ret, struct err *e)
{
    const char *p = path ? path : env_get("GPUOP_NVML_LIBRARY");
    if (!p)
        p = NVML_DEFAULT_LIBRARY;
    void *dl = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        return err_set(e, -ENOENT,
                       "cannot load the NVML library \"%s\": %s (is the NVIDIA driver installed? "
                       "set GPUOP_NVML_LIBRARY to the path of libnvidia-ml.so.1)",
                       p, why ? why : "unknown dlopen error");
    }
    struct gpu_lib *lib = xcalloc(1, sizeof(*lib));
    lib->dl = dl;
    lib->path = loaded_path(dl, p);
    table_load(dl, &lib->t);
    int r = nvml_init(lib, e);
    if (r < 0) {
        dlclose(lib->dl);
        free(lib->path);
        free(lib);
        return r;
    }
    *ret = lib;
    return 0;
}

void gpu_lib_free(struct gpu_lib *lib)
{
    if (!lib)
        return;
    if (lib->t.nvmlShutdown)
        lib->t.nvmlShutdown();
    dlclose(lib->dl);
    free(lib->path);
    free(lib);
}

const char *gpu_lib_path(const struct gpu_lib *lib)
{
    return lib ? lib->path : NULL;
}
