/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libcuda.so.1, simulated: the CUDA driver API entry points of cuda-abi.h, answering from the
 * same simulated node as the simulated NVML (GPUOP_SIM_FLEET, GPUOP_SIM_STATE, GPUOP_SIM_ROOT).
 * Device memory is host memory behind made-up device addresses; modules are PTX text that is
 * parsed (ptx.c); a launch runs the kernels the simulator knows by name (vectorAdd) on that
 * memory. See sim/cuda/README.md for what is simulated and what is not.
 *
 * One mutex serialises every call; the current context is per thread, as in CUDA.
 */
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

#include "cuda-abi.h"
#include "simcuda.h"
#include "simnvml.h"

/* Every declared entry point must exist: a missing definition fails the link. */
#define SIM_FUNC_REF(name, ret, params) (void *)name,
__attribute__((used)) static void *const sim_all_funcs[] = {CUDA_FUNCS(SIM_FUNC_REF)
                                                                CUDA_OPTIONAL_FUNCS(SIM_FUNC_REF)};

#define CTX_MAGIC 0x43545853u /* "SXTC" */
#define MOD_MAGIC 0x444f4d53u
#define VA_BASE   0x7f4000000000ull
#define VA_ALIGN  512u
/* Device memory lives in this process: one allocation, and all of them together, stay below
 * this, whatever the GPU's framebuffer. */
#define HOST_MEM_LIMIT (1ull << 30)
#define PTX_MAX_LEN    (16u << 20)

struct CUctx_st {
    uint32_t magic;
    unsigned gpu;    /* fleet index */
    CUresult sticky; /* a failure a launch left behind; every later call on the context sees it */
    struct CUctx_st *next;
};

struct CUfunc_st {
    struct CUmod_st *mod;
    size_t entry;
};

struct CUmod_st {
    uint32_t magic;
    struct CUctx_st *ctx;
    struct simcuda_ptx_module ptx;
    struct CUfunc_st funcs[SIMCUDA_PTX_MAX_ENTRIES];
    struct CUmod_st *next;
};

struct alloc {
    CUdeviceptr base;
    size_t size;
    unsigned char *mem;
    struct CUctx_st *ctx;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_tried; /* cuInit ran: its result is the process's, as with CUDA */
static CUresult g_init_result = CUDA_ERROR_NOT_INITIALIZED;
static bool g_reported;
static struct sim_fleet *g_fleet;
static struct sim_store *g_store;
static char *g_root;
static int g_cuda_version;
static unsigned g_visible[SIM_MAX_GPUS];
static size_t g_n_visible;
static bool g_corrupt[SIM_MAX_GPUS];
static uint8_t g_uuid[SIM_MAX_GPUS][16];
static struct CUctx_st *g_ctxs;
static struct CUmod_st *g_mods;
static struct alloc *g_allocs;
static size_t g_n_allocs, g_cap_allocs;
static uint64_t g_next_va = VA_BASE;
static uint64_t g_host_used;
static uint64_t g_dev_used[SIM_MAX_GPUS];
static __thread struct CUctx_st *t_current;

static void unlockp(int *x)
{
    (void)x;
    pthread_mutex_unlock(&g_lock);
}
#define LOCK() _cleanup_(unlockp) int _lk UNUSED = (pthread_mutex_lock(&g_lock), 0)

static void report_once(const char *msg)
{
    if (g_reported)
        return;
    g_reported = true;
    fprintf(stderr, "libcuda.so.1 (gpuop simulator): %s\n", msg);
}

/* ---- errors ------------------------------------------------------------------------------ */

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE",
     "uncorrectable ECC error encountered"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ARRAY_SIZE(errors); i++) {
        if (errors[i].code == error) {
            *pStr = errors[i].name;
            return CUDA_SUCCESS;
        }
    }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ARRAY_SIZE(errors); i++) {
        if (errors[i].code == error) {
            *pStr = errors[i].text;
            return CUDA_SUCCESS;
        }
    }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---- init -------------------------------------------------------------------------------- */

/* 16 bytes from the fleet's "GPU-xxxxxxxx-xxxx-..." UUID; a hash of it when it is not hex. */
static void uuid_bytes(const char *uuid, uint8_t out[16])
{
    const char *p = str_has_prefix(uuid, "GPU-") ? uuid + 4 : uuid;
    size_t k = 0;
    for (; *p && k < 32; p++) {
        if (*p == '-')
            continue;
        int d = hex_digit(*p);
        if (d < 0)
            break;
        out[k / 2] = (uint8_t)(k % 2 ? (out[k / 2] | d) : (d << 4));
        k++;
    }
    if (k == 32 && *p == '\0')
        return;
    uint64_t h = 0;
    for (const char *q = uuid; *q; q++)
        h = sim_hash64(h, (uint64_t)(unsigned char)*q);
    for (unsigned i = 0; i < 16; i++) {
        h = sim_hash64(h, i);
        out[i] = (uint8_t)h;
    }
}

/* The node's driver: with GPUOP_SIM_ROOT, loaded while <root>/sys/module/nvidia/version is. */
static bool driver_loaded(const char *root, char *version, size_t n)
{
    struct err e = {0};
    int r = sim_driver_loaded(root, version, n, &e);
    if (r < 0)
        report_once(err_msg(&e));
    return r > 0;
}

static CUresult do_init(void)
{
    const char *path = env_get("GPUOP_SIM_FLEET");
    if (!path) {
        report_once("GPUOP_SIM_FLEET is not set: it names the fleet file the simulated driver "
                    "serves (see sim/fleets/README.md)");
        return CUDA_ERROR_UNKNOWN;
    }
    struct err e = {0};
    _cleanup_(sim_fleet_freep) struct sim_fleet *f = NULL;
    if (sim_fleet_load(path, &f, &e) < 0) {
        report_once(err_msg(&e));
        return CUDA_ERROR_UNKNOWN;
    }
    int cuda_version = f->cuda_driver_version;
    const char *root = env_get("GPUOP_SIM_ROOT");
    if (root) {
        char version[80];
        if (!driver_loaded(root, version, sizeof(version)))
            return CUDA_ERROR_UNKNOWN; /* no kernel module: what libcuda's cuInit gives */
        cuda_version = sim_cuda_version_for_driver(version, f->cuda_driver_version);
    }
    size_t n = f->n_gpus < SIM_MAX_GPUS ? f->n_gpus : SIM_MAX_GPUS;
    const char *uuids[SIM_MAX_GPUS];
    for (size_t i = 0; i < n; i++) {
        uuids[i] = f->gpus[i].uuid;
        uuid_bytes(f->gpus[i].uuid, g_uuid[i]);
    }
    /* the device nodes of this process's /dev: a container's, under CDI */
    static struct sim_dev_nodes dev;
    sim_dev_read("/dev", &dev);
    struct simcuda_nodes nodes = {.ctl = dev.ctl, .minors = dev.gpu_minors, .n = dev.n_gpu};
    simcuda_visible(uuids, n, &nodes, getenv("NVIDIA_VISIBLE_DEVICES"),
                    getenv("CUDA_VISIBLE_DEVICES"), g_visible, &g_n_visible);
    if (g_n_visible == 0)
        return CUDA_ERROR_NO_DEVICE;
    struct sim_store *s = NULL;
    if (sim_store_open(f, env_get("GPUOP_SIM_STATE"), 0, &s, &e) < 0) {
        report_once(err_msg(&e));
        return CUDA_ERROR_UNKNOWN;
    }
    /* GPUOP_SIM_CUDA_CORRUPT: fleet indices whose kernels write one wrong element */
    const char *corrupt = env_get("GPUOP_SIM_CUDA_CORRUPT");
    while (corrupt && *corrupt) {
        const char *comma = strchr(corrupt, ',');
        char item[16];
        size_t len = comma ? (size_t)(comma - corrupt) : strlen(corrupt);
        unsigned g;
        if (len < sizeof(item)) {
            memcpy(item, corrupt, len);
            item[len] = '\0';
            if (parse_uint(item, &g) == 0 && g < SIM_MAX_GPUS)
                g_corrupt[g] = true;
        }
        corrupt = comma ? comma + 1 : NULL;
    }
    g_cuda_version = cuda_version;
    g_root = root ? xstrdup(root) : NULL;
    g_store = s;
    g_fleet = steal_ptr(&f);
    return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags)
{
    LOCK();
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!g_tried) {
        g_tried = true;
        g_init_result = do_init();
    }
    return g_init_result;
}

static CUresult ready(void)
{
    return g_tried ? g_init_result : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    LOCK();
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    if (g_fleet) {
        *driverVersion = g_cuda_version;
        return CUDA_SUCCESS;
    }
    /* Before (or without) a successful cuInit: the version of the driver the node has. */
    struct err e = {0};
    _cleanup_(sim_fleet_freep) struct sim_fleet *f = NULL;
    const char *path = env_get("GPUOP_SIM_FLEET");
    if (!path || sim_fleet_load(path, &f, &e) < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    const char *root = env_get("GPUOP_SIM_ROOT");
    char version[80];
    *driverVersion = root && driver_loaded(root, version, sizeof(version))
                         ? sim_cuda_version_for_driver(version, f->cuda_driver_version)
                         : f->cuda_driver_version;
    return CUDA_SUCCESS;
}

/* ---- devices ----------------------------------------------------------------------------- */

CUresult cuDeviceGetCount(int *count)
{
    LOCK();
    CUresult r = ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = (int)g_n_visible;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    LOCK();
    CUresult r = ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || (size_t)ordinal >= g_n_visible)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

static CUresult device_gpu(CUdevice dev, unsigned *ret)
{
    CUresult r = ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (dev < 0 || (size_t)dev >= g_n_visible)
        return CUDA_ERROR_INVALID_DEVICE;
    *ret = g_visible[dev];
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    LOCK();
    unsigned g;
    CUresult r = device_gpu(dev, &g);
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    strlcpy_s(name, g_fleet->gpus[g].model, (size_t)len);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    LOCK();
    unsigned g;
    CUresult r = device_gpu(dev, &g);
    if (r != CUDA_SUCCESS)
        return r;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(uuid->bytes, g_uuid[g], sizeof(uuid->bytes));
    return CUDA_SUCCESS;
}

/* MIG devices are not modelled: the GPU's own UUID, as the first entry point gives it. */
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid(uuid, dev);
}

/* The GPU can run work: the node's driver is loaded and the GPU has not fallen off the bus.
 * A lost GPU answers CUDA_ERROR_UNKNOWN ("unknown error"), as CUDA reports a GPU after XID 79. */
static CUresult gpu_usable(unsigned gpu)
{
    if (g_root) {
        char version[80];
        if (!driver_loaded(g_root, version, sizeof(version)))
            return CUDA_ERROR_UNKNOWN;
    }
    struct err e = {0};
    if (sim_store_refresh(g_store, &e) < 0)
        report_once(err_msg(&e)); /* the last good state stays */
    if (sim_store_state(g_store)->gpus[gpu].lost)
        return CUDA_ERROR_UNKNOWN;
    return CUDA_SUCCESS;
}

/* ---- contexts ---------------------------------------------------------------------------- */

static bool ctx_live(const struct CUctx_st *c)
{
    for (const struct CUctx_st *p = g_ctxs; p; p = p->next)
        if (p == c)
            return c->magic == CTX_MAGIC;
    return false;
}

/* The calling thread's context, usable: its GPU still works and no launch failed in it. */
static CUresult current(struct CUctx_st **ret)
{
    CUresult r = ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct CUctx_st *c = t_current;
    if (!c || !ctx_live(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (c->sticky != CUDA_SUCCESS)
        return c->sticky;
    r = gpu_usable(c->gpu);
    if (r != CUDA_SUCCESS)
        return r;
    *ret = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    LOCK();
    (void)flags; /* scheduling flags change nothing here */
    unsigned g;
    CUresult r = device_gpu(dev, &g);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    r = gpu_usable(g);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUctx_st *c = xcalloc(1, sizeof(*c));
    c->magic = CTX_MAGIC;
    c->gpu = g;
    c->next = g_ctxs;
    g_ctxs = c;
    t_current = c;
    *pctx = c;
    return CUDA_SUCCESS;
}

static void mod_free(struct CUmod_st *m)
{
    for (struct CUmod_st **pp = &g_mods; *pp; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    }
    m->magic = 0;
    free(m);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    LOCK();
    CUresult r = ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctx || !ctx_live(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    for (struct CUmod_st *m = g_mods, *next; m; m = next) {
        next = m->next;
        if (m->ctx == ctx)
            mod_free(m);
    }
    size_t k = 0;
    for (size_t i = 0; i < g_n_allocs; i++) {
        if (g_allocs[i].ctx == ctx) {
            g_host_used -= g_allocs[i].size;
            g_dev_used[ctx->gpu] -= g_allocs[i].size;
            free(g_allocs[i].mem);
        } else {
            g_allocs[k++] = g_allocs[i];
        }
    }
    g_n_allocs = k;
    for (struct CUctx_st **pp = &g_ctxs; *pp; pp = &(*pp)->next) {
        if (*pp == ctx) {
            *pp = ctx->next;
            break;
        }
    }
    if (t_current == ctx)
        t_current = NULL;
    ctx->magic = 0;
    free(ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
    LOCK();
    struct CUctx_st *c;
    return current(&c); /* launches ran to completion; a failure they left is sticky */
}

/* ---- modules ----------------------------------------------------------------------------- */

static bool mod_live(const struct CUmod_st *m)
{
    for (const struct CUmod_st *p = g_mods; p; p = p->next)
        if (p == m)
            return m->magic == MOD_MAGIC;
    return false;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    LOCK();
    struct CUctx_st *c;
    CUresult r = current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned char *b = image;
    if ((b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') ||
        (b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba))
        return CUDA_ERROR_NOT_SUPPORTED; /* cubin and fatbin: the simulator loads PTX only */
    size_t len = strnlen(image, PTX_MAX_LEN);
    if (len == PTX_MAX_LEN)
        return CUDA_ERROR_INVALID_PTX;
    struct CUmod_st *m = xcalloc(1, sizeof(*m));
    struct err e = {0};
    int pr = simcuda_ptx_parse(image, len, &m->ptx, &e);
    const struct sim_gpu_spec *spec = &g_fleet->gpus[c->gpu];
    unsigned device_sm = (unsigned)(spec->cc_major * 10 + spec->cc_minor);
    if (pr == 0 && m->ptx.target_sm > device_sm)
        pr = -EINVAL; /* the JIT cannot compile for a newer architecture than the device's */
    if (pr < 0) {
        free(m);
        return pr == -EPROTONOSUPPORT ? CUDA_ERROR_UNSUPPORTED_PTX_VERSION : CUDA_ERROR_INVALID_PTX;
    }
    m->magic = MOD_MAGIC;
    m->ctx = c;
    for (size_t i = 0; i < SIMCUDA_PTX_MAX_ENTRIES; i++)
        m->funcs[i] = (struct CUfunc_st){.mod = m, .entry = i};
    m->next = g_mods;
    g_mods = m;
    *module = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    LOCK();
    CUresult r = ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!hmod || !mod_live(hmod))
        return CUDA_ERROR_INVALID_HANDLE;
    for (size_t i = 0; i < hmod->ptx.n_entries; i++) {
        const struct simcuda_ptx_entry *ent = &hmod->ptx.entries[i];
        if (ent->kernel && ent->defined && strcmp(ent->name, name) == 0) {
            *hfunc = &hmod->funcs[i];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

CUresult cuModuleUnload(CUmodule hmod)
{
    LOCK();
    CUresult r = ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!hmod || !mod_live(hmod))
        return CUDA_ERROR_INVALID_HANDLE;
    mod_free(hmod);
    return CUDA_SUCCESS;
}

/* ---- memory ------------------------------------------------------------------------------ */

/* The allocation of context c holding [p, p + n), or NULL. */
static struct alloc *alloc_find(const struct CUctx_st *c, CUdeviceptr p, size_t n)
{
    for (size_t i = 0; i < g_n_allocs; i++) {
        struct alloc *a = &g_allocs[i];
        if (a->ctx == c && p >= a->base && p - a->base <= a->size && n <= a->size - (p - a->base))
            return a;
    }
    return NULL;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    LOCK();
    struct CUctx_st *c;
    CUresult r = current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sim_gpu_spec *spec = &g_fleet->gpus[c->gpu];
    uint64_t usable = (spec->memory_mib - spec->reserved_mib) << 20;
    if (bytesize > HOST_MEM_LIMIT - g_host_used || bytesize > usable - g_dev_used[c->gpu])
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (g_n_allocs == g_cap_allocs) {
        g_cap_allocs = g_cap_allocs ? g_cap_allocs * 2 : 16;
        g_allocs = xrealloc(g_allocs, g_cap_allocs * sizeof(*g_allocs));
    }
    unsigned char *mem = malloc(bytesize);
    if (!mem)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* fresh device memory holds whatever was there: not zero */
    memset(mem, 0xa5, bytesize);
    struct alloc *a = &g_allocs[g_n_allocs++];
    *a = (struct alloc){.base = g_next_va, .size = bytesize, .mem = mem, .ctx = c};
    g_next_va += (bytesize + VA_ALIGN - 1) / VA_ALIGN * VA_ALIGN + VA_ALIGN; /* a gap between */
    g_host_used += bytesize;
    g_dev_used[c->gpu] += bytesize;
    *dptr = a->base;
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    LOCK();
    struct CUctx_st *c;
    CUresult r = current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    for (size_t i = 0; i < g_n_allocs; i++) {
        if (g_allocs[i].ctx == c && g_allocs[i].base == dptr) {
            g_host_used -= g_allocs[i].size;
            g_dev_used[c->gpu] -= g_allocs[i].size;
            free(g_allocs[i].mem);
            g_allocs[i] = g_allocs[--g_n_allocs];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    LOCK();
    struct CUctx_st *c;
    CUresult r = current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (ByteCount == 0)
        return CUDA_SUCCESS;
    struct alloc *a = alloc_find(c, dstDevice, ByteCount);
    if (!a || !srcHost)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(a->mem + (dstDevice - a->base), srcHost, ByteCount);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    LOCK();
    struct CUctx_st *c;
    CUresult r = current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (ByteCount == 0)
        return CUDA_SUCCESS;
    struct alloc *a = alloc_find(c, srcDevice, ByteCount);
    if (!a || !dstHost)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(dstHost, a->mem + (srcDevice - a->base), ByteCount);
    return CUDA_SUCCESS;
}

/* ---- launches ---------------------------------------------------------------------------- */

/* vectorAdd(const float *A, const float *B, float *C, int n): C[i] = A[i] + B[i] for every
 * thread index i = blockIdx.x * blockDim.x + threadIdx.x below n. Threads run in index order;
 * an access outside the context's allocations stops the kernel with CUDA_ERROR_ILLEGAL_ADDRESS,
 * reported by the next call (launches are asynchronous). */
static CUresult run_vector_add(struct CUctx_st *c, void **params, uint64_t threads_x)
{
    CUdeviceptr pa, pb, pc;
    int n;
    memcpy(&pa, params[0], sizeof(pa));
    memcpy(&pb, params[1], sizeof(pb));
    memcpy(&pc, params[2], sizeof(pc));
    memcpy(&n, params[3], sizeof(n));
    uint64_t count = n > 0 ? (uint64_t)n : 0;
    if (count > threads_x)
        count = threads_x;
    if (count == 0)
        return CUDA_SUCCESS;
    size_t bytes = (size_t)count * sizeof(float);
    struct alloc *a = alloc_find(c, pa, bytes), *b = alloc_find(c, pb, bytes),
                 *out = alloc_find(c, pc, bytes);
    if (!a || !b || !out)
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    const unsigned char *ma = a->mem + (pa - a->base), *mb = b->mem + (pb - b->base);
    unsigned char *mc = out->mem + (pc - out->base);
    for (uint64_t i = 0; i < count; i++) {
        float x, y, z;
        memcpy(&x, ma + i * sizeof(float), sizeof(float));
        memcpy(&y, mb + i * sizeof(float), sizeof(float));
        z = x + y;
        memcpy(mc + i * sizeof(float), &z, sizeof(float));
    }
    if (g_corrupt[c->gpu]) {
        /* GPUOP_SIM_CUDA_CORRUPT: a silent wrong result (a flipped exponent bit) */
        unsigned char *p = mc + (count / 2) * sizeof(float);
        p[3] ^= 0x40;
    }
    return CUDA_SUCCESS;
}

static bool params_are(const struct simcuda_ptx_entry *ent, const size_t *sizes, size_t n)
{
    if (ent->n_params != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (ent->params[i].count != 1 || ent->params[i].size != sizes[i])
            return false;
    return true;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    LOCK();
    struct CUctx_st *c;
    CUresult r = current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (hStream)
        return CUDA_ERROR_INVALID_HANDLE; /* no streams are created here: only the default one */
    struct CUmod_st *m = NULL;
    for (struct CUmod_st *p = g_mods; p; p = p->next)
        if (f && (uintptr_t)f >= (uintptr_t)p->funcs &&
            (uintptr_t)f < (uintptr_t)(p->funcs + SIMCUDA_PTX_MAX_ENTRIES))
            m = p;
    if (!m || f->mod != m)
        return CUDA_ERROR_INVALID_HANDLE;
    if (m->ctx != c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (gridDimX == 0 || gridDimY == 0 || gridDimZ == 0 || blockDimX == 0 || blockDimY == 0 ||
        blockDimZ == 0 || gridDimX > 0x7fffffffu || gridDimY > 65535 || gridDimZ > 65535 ||
        blockDimX > 1024 || blockDimY > 1024 || blockDimZ > 64 ||
        (uint64_t)blockDimX * blockDimY * blockDimZ > 1024 || sharedMemBytes > 48 * 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (extra)
        return CUDA_ERROR_NOT_SUPPORTED; /* only kernelParams are simulated */
    const struct simcuda_ptx_entry *ent = &m->ptx.entries[f->entry];
    if (ent->n_params > 0 && !kernelParams)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ent->n_params; i++)
        if (!kernelParams[i])
            return CUDA_ERROR_INVALID_VALUE;
    static const size_t vector_add[] = {8, 8, 8, 4};
    if (strcmp(ent->name, "vectorAdd") != 0 || !params_are(ent, vector_add, ARRAY_SIZE(vector_add)))
        return CUDA_ERROR_NOT_SUPPORTED; /* a kernel the simulator cannot execute */
    /* vectorAdd indexes by x only: rows of y and z repeat the same elements. */
    r = run_vector_add(c, kernelParams, (uint64_t)gridDimX * blockDimX);
    const struct sim_gpu_spec *spec = &g_fleet->gpus[c->gpu];
    if (r == CUDA_SUCCESS && spec->ecc && sim_store_state(g_store)->gpus[c->gpu].ecc_dbe_vol > 0)
        r = CUDA_ERROR_ECC_UNCORRECTABLE; /* a double-bit error since the last reset */
    c->sticky = r;
    return CUDA_SUCCESS;
}
