/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the simulated driver (build/libnvidia-ml.so.1) through its NVML ABI, as a client
 * sees it: dlopen and __typeof__(&nvmlX) pointers. Several checks run across processes: this
 * binary re-executes itself in a "child" mode, and runs build/gpuop-sim to inject faults.
 *
 * Usage: test-sim LIBNVIDIA_ML GPUOP_SIM FLEETS_DIR
 */
#include <dlfcn.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "nvml-abi.h"
#include "util.h"

#define DECL(f) __typeof__(&f) f;
static struct {
    NVML_FUNCS(DECL)
    nvmlReturn_t (*nvmlInit)(void);
    nvmlReturn_t (*nvmlDeviceGetCount)(unsigned *);
    nvmlReturn_t (*nvmlDeviceGetHandleByIndex)(unsigned, nvmlDevice_t *);
    nvmlReturn_t (*nvmlDeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses)(nvmlDevice_t, unsigned *,
                                                         nvmlProcessInfo_v1_t *);
} N;

static const char *lib_path, *gpuop_sim_path, *fleets_dir, *self_path;
static char tmp_root[256];
static void *lib;

static const char *const unversioned[] = {
    "nvmlInit",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetHandleByPciBusId",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetPciInfo_v2",
    "nvmlEventSetWait",
    "nvmlComputeInstanceGetInfo",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetGpuInstancePossiblePlacements",
};

static int load(void)
{
    lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", lib_path, dlerror());
        return -1;
    }
#define LOAD(f)                                                    \
    if (!(N.f = (__typeof__(N.f))dlsym(lib, #f))) {                \
        fprintf(stderr, "%s: %s is not exported\n", lib_path, #f); \
        return -1;                                                 \
    }
    NVML_FUNCS(LOAD)
    LOAD(nvmlInit)
    LOAD(nvmlDeviceGetCount)
    LOAD(nvmlDeviceGetHandleByIndex)
    LOAD(nvmlDeviceGetPciInfo)
    LOAD(nvmlDeviceGetComputeRunningProcesses)
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static char *fleet(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", fleets_dir, name);
    return buf[k];
}

/* A fresh state dir; both env vars set. */
static void use(const char *fleet_file, bool with_state)
{
    static int n;
    setenv("GPUOP_SIM_FLEET", fleet_file, 1);
    if (with_state) {
        char dir[300];
        snprintf(dir, sizeof(dir), "%s/state-%d", tmp_root, ++n);
        setenv("GPUOP_SIM_STATE", dir, 1);
    } else {
        unsetenv("GPUOP_SIM_STATE");
    }
    unsetenv("GPUOP_SIM_CLOCK");
}

static int rm_cb(const char *p, const struct stat *sb, int type, struct FTW *f)
{
    (void)sb;
    (void)type;
    (void)f;
    return remove(p);
}

/* Runs argv; captures stdout and stderr (truncated to the buffers). Returns the exit status. */
static int run(char *const argv[], char *out, size_t out_n, char *errb, size_t err_n)
{
    int po[2], pe[2];
    if (pipe(po) < 0 || pipe(pe) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    size_t no = 0, ne = 0;
    char junk[4096];
    for (int open_fds = 2; open_fds > 0;) {
        fd_set set;
        FD_ZERO(&set);
        int maxfd = -1;
        if (po[0] >= 0) {
            FD_SET(po[0], &set);
            maxfd = po[0];
        }
        if (pe[0] >= 0) {
            FD_SET(pe[0], &set);
            maxfd = pe[0] > maxfd ? pe[0] : maxfd;
        }
        if (select(maxfd + 1, &set, NULL, NULL, NULL) < 0)
            continue;
        int *fds[2] = {&po[0], &pe[0]};
        for (int i = 0; i < 2; i++) {
            if (*fds[i] < 0 || !FD_ISSET(*fds[i], &set))
                continue;
            char *b = i == 0 ? out : errb;
            size_t cap = i == 0 ? out_n : err_n, *len = i == 0 ? &no : &ne;
            ssize_t r;
            if (b && *len + 1 < cap)
                r = read(*fds[i], b + *len, cap - 1 - *len);
            else
                r = read(*fds[i], junk, sizeof(junk));
            if (r <= 0) {
                close(*fds[i]);
                *fds[i] = -1;
                open_fds--;
            } else if (b && *len + 1 < cap) {
                *len += (size_t)r;
            }
        }
    }
    if (out)
        out[out_n ? no : 0] = '\0';
    if (errb)
        errb[err_n ? ne : 0] = '\0';
    int st;
    if (waitpid(pid, &st, 0) < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs `gpuop-sim ARGS...` (NULL-terminated); stderr into errb. */
static int sim(char *errb, size_t err_n, ...)
{
    char *argv[16] = {(char *)gpuop_sim_path};
    size_t n = 1;
    va_list ap;
    va_start(ap, err_n);
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < ARRAY_SIZE(argv) - 1)
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    return run(argv, NULL, 0, errb, err_n);
}

static nvmlDevice_t dev(unsigned i)
{
    nvmlDevice_t d = NULL;
    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(i, &d), NVML_SUCCESS);
    return d;
}

/* ---- exports ---------------------------------------------------------------------------- */

static void test_exports(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(unversioned); i++)
        assert_non_null(dlsym(lib, unversioned[i]));
    /* the static helpers stay private */
    assert_null(dlsym(lib, "sim_fleet_parse"));
    assert_null(dlsym(lib, "err_set"));
    assert_null(dlsym(lib, "yaml_parse_one"));
    assert_null(dlsym(lib, "sim_main"));
}

/* ---- Grace: NVLink-C2C and the addressing mode ------------------------------------------ */

static void test_c2c(void **state)
{
    (void)state;
    static const struct {
        const char *fleet;
        nvmlReturn_t c2c_ret, mode_ret;
        unsigned c2c, mode;
    } cases[] = {
        {"gh200.yaml", NVML_SUCCESS, NVML_SUCCESS, 1, NVML_DEVICE_ADDRESSING_MODE_ATS},
        {"gb200.yaml", NVML_SUCCESS, NVML_SUCCESS, 1, NVML_DEVICE_ADDRESSING_MODE_ATS},
        /* a discrete GPU: neither is reported */
        {"dgx-h100.yaml", NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_SUPPORTED, 0, 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        use(fleet(cases[i].fleet), true);
        assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
        nvmlDevice_t d = dev(0);
        nvmlC2cModeInfo_v1_t c2c = {0};
        assert_int_equal(N.nvmlDeviceGetC2cModeInfoV(d, &c2c), cases[i].c2c_ret);
        assert_int_equal(c2c.isC2cEnabled, cases[i].c2c);
        nvmlDeviceAddressingMode_v1_t m = {.version = nvmlDeviceAddressingMode_v1};
        assert_int_equal(N.nvmlDeviceGetAddressingMode(d, &m), cases[i].mode_ret);
        assert_int_equal(m.value, cases[i].mode);
        m.version = 1; /* no size: not version 1 of this struct */
        assert_int_equal(N.nvmlDeviceGetAddressingMode(d, &m),
                         NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        assert_int_equal(N.nvmlDeviceGetC2cModeInfoV(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceGetAddressingMode(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    }
}

/* ---- basics ----------------------------------------------------------------------------- */

static void test_basics_h100(void **state)
{
    (void)state;
    use(fleet("dgx-h100.yaml"), false);
    char buf[128];
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(N.nvmlInit(), NVML_SUCCESS);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS); /* nested */
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "570.86.15");
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, 4), NVML_ERROR_INSUFFICIENT_SIZE);
    int cuda;
    assert_int_equal(N.nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
    assert_int_equal(cuda, 12080);
    unsigned n;
    assert_int_equal(N.nvmlDeviceGetCount(&n), NVML_SUCCESS);
    assert_int_equal(n, 8);
    nvmlDevice_t d = dev(3), d2;
    assert_int_equal(N.nvmlDeviceGetName(d, buf, NVML_DEVICE_NAME_BUFFER_SIZE), NVML_SUCCESS);
    assert_string_equal(buf, "NVIDIA H100 80GB HBM3");
    nvmlMemory_t m;
    assert_int_equal(N.nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
    assert_int_equal(m.total, 81559ULL << 20);
    assert_int_equal(m.used + m.free, m.total);
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_SUCCESS);
    assert_int_equal(m2.reserved, 450ULL << 20);
    m2.version = 1;
    assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    nvmlPciInfo_t pci;
    assert_int_equal(N.nvmlDeviceGetPciInfo(d, &pci), NVML_SUCCESS);
    assert_int_equal(pci.pciDeviceId, 0x233010DE);
    assert_int_equal(strlen(pci.busId), 16);
    assert_int_equal(N.nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &d2), NVML_SUCCESS);
    assert_ptr_equal(d2, d);
    assert_int_equal(N.nvmlDeviceGetHandleByPciBusId_v2(pci.busIdLegacy, &d2), NVML_SUCCESS);
    assert_ptr_equal(d2, d);
    assert_int_equal(N.nvmlDeviceGetHandleByPciBusId_v2("nonsense", &d2),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetUUID(d, buf, sizeof(buf)), NVML_SUCCESS);
    assert_true(str_has_prefix(buf, "GPU-"));
    assert_int_equal(N.nvmlDeviceGetHandleByUUID(buf, &d2), NVML_SUCCESS);
    assert_ptr_equal(d2, d);
    assert_int_equal(N.nvmlDeviceGetHandleByUUID("GPU-nope", &d2), NVML_ERROR_NOT_FOUND);
    int maj, min;
    assert_int_equal(N.nvmlDeviceGetCudaComputeCapability(d, &maj, &min), NVML_SUCCESS);
    assert_int_equal(maj * 10 + min, 90);
    nvmlDeviceArchitecture_t arch;
    assert_int_equal(N.nvmlDeviceGetArchitecture(d, &arch), NVML_SUCCESS);
    assert_int_equal(arch, NVML_DEVICE_ARCH_HOPPER);
    unsigned lim;
    assert_int_equal(N.nvmlDeviceGetEnforcedPowerLimit(d, &lim), NVML_SUCCESS);
    assert_int_equal(lim, 700000);
    unsigned mig, pend;
    assert_int_equal(N.nvmlDeviceGetMigMode(d, &mig, &pend), NVML_SUCCESS);
    assert_int_equal(mig, NVML_DEVICE_MIG_DISABLE);
    /* invalid handles are refused, not dereferenced */
    assert_int_equal(N.nvmlDeviceGetName((nvmlDevice_t)buf, buf, sizeof(buf)),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetName(NULL, buf, sizeof(buf)), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(8, &d2), NVML_ERROR_INVALID_ARGUMENT);
    unsigned cnt = 5;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses(d, &cnt, NULL), NVML_SUCCESS);
    assert_int_equal(cnt, 0);
    assert_string_equal(N.nvmlErrorString(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
    /* without GPUOP_SIM_STATE no events arrive; the wait times out */
    nvmlEventSet_t set;
    nvmlEventData_t ev;
    assert_int_equal(N.nvmlEventSetCreate(&set), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceRegisterEvents(d, nvmlEventTypeXidCriticalError, set),
                     NVML_SUCCESS);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &ev, 20), NVML_ERROR_TIMEOUT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS); /* still one reference */
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(N.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
    /* the set the client never freed went with the last shutdown (no leak, no crash) */
    assert_int_equal(N.nvmlEventSetFree(set), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &ev, 0), NVML_ERROR_UNINITIALIZED);
}

/* ---- topology ----------------------------------------------------------------------------- */

/* The MIG calls' returns as the NVML header documents them, on a GPU without MIG support (V100),
 * one that supports MIG with MIG disabled (H100), one with MIG enabled (A100) and a MIG device:
 * MaxMigDeviceCount is 0 (success) unless MIG is enabled; GetMigDeviceHandleByIndex is
 * NOT_SUPPORTED where MIG mode is not enabled; the MIG-only calls are NOT_SUPPORTED on a GPU and
 * GetDeviceHandleFromMigDeviceHandle INVALID_ARGUMENT. Clients built on the header's contract
 * (go-nvlib) enumerate MIG devices only where MaxMigDeviceCount is non-zero. */
struct mig_case {
    const char *fleet;
    unsigned gpu;
    bool mig_device; /* the case is the GPU's first MIG device */
    nvmlReturn_t mode, max, by_index, is_mig, parent, gi_id, ci_id;
    unsigned max_count, is_mig_value;
};

static void test_mig_call_returns(void **state)
{
    (void)state;
    static const struct mig_case cases[] = {
        {"dgx1-v100.yaml", 0, false, NVML_ERROR_NOT_SUPPORTED, NVML_SUCCESS,
         NVML_ERROR_NOT_SUPPORTED, NVML_SUCCESS, NVML_ERROR_INVALID_ARGUMENT,
         NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_SUPPORTED, 0, 0},
        {"dgx-h100.yaml", 0, false, NVML_SUCCESS, NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED,
         NVML_SUCCESS, NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_SUPPORTED,
         NVML_ERROR_NOT_SUPPORTED, 0, 0},
        {"dgx-a100-80gb-mig.yaml", 0, false, NVML_SUCCESS, NVML_SUCCESS, NVML_SUCCESS, NVML_SUCCESS,
         NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_SUPPORTED, 7, 0},
        /* a MIG device handle where a GPU is expected: NOT_SUPPORTED */
        {"dgx-a100-80gb-mig.yaml", 0, true, NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_SUPPORTED,
         NVML_ERROR_NOT_SUPPORTED, NVML_SUCCESS, NVML_SUCCESS, NVML_SUCCESS, NVML_SUCCESS, 0, 1},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const struct mig_case *c = &cases[i];
        use(fleet(c->fleet), true);
        assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
        nvmlDevice_t d = dev(c->gpu), m = NULL, p = NULL;
        if (c->mig_device)
            assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &d), NVML_SUCCESS);
        unsigned cur = 9, pend = 9, max = 99, is = 99, id = 99;
        print_message("case %zu: %s gpu %u%s\n", i, c->fleet, c->gpu,
                      c->mig_device ? " (MIG device)" : "");
        assert_int_equal(N.nvmlDeviceGetMigMode(d, &cur, &pend), c->mode);
        assert_int_equal(N.nvmlDeviceGetMaxMigDeviceCount(d, &max), c->max);
        if (c->max == NVML_SUCCESS)
            assert_int_equal(max, c->max_count);
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &m), c->by_index);
        assert_int_equal(N.nvmlDeviceIsMigDeviceHandle(d, &is), c->is_mig);
        if (c->is_mig == NVML_SUCCESS)
            assert_int_equal(is, c->is_mig_value);
        assert_int_equal(N.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(d, &p), c->parent);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceId(d, &id), c->gi_id);
        assert_int_equal(N.nvmlDeviceGetComputeInstanceId(d, &id), c->ci_id);
        /* a NULL out-pointer is INVALID_ARGUMENT on every call */
        if (!c->mig_device)
            assert_int_equal(N.nvmlDeviceGetMaxMigDeviceCount(d, NULL),
                             NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceIsMigDeviceHandle(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    }
}

static void test_topology_dgx1(void **state)
{
    (void)state;
    use(fleet("dgx1-v100.yaml"), false);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    nvmlGpuTopologyLevel_t lv;
    assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(dev(0), dev(0), &lv), NVML_SUCCESS);
    assert_int_equal(lv, NVML_TOPOLOGY_INTERNAL);
    assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(dev(0), dev(1), &lv), NVML_SUCCESS);
    assert_int_equal(lv, NVML_TOPOLOGY_SINGLE);
    assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(dev(2), dev(0), &lv), NVML_SUCCESS);
    assert_int_equal(lv, NVML_TOPOLOGY_HOSTBRIDGE);
    assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(dev(0), dev(5), &lv), NVML_SUCCESS);
    assert_int_equal(lv, NVML_TOPOLOGY_SYSTEM);
    /* hybrid cube mesh: 6 links on every GPU; GPU 0: 1x GPU1, 1x GPU2, 2x GPU3, 2x GPU4 */
    for (unsigned g = 0; g < 8; g++) {
        unsigned active = 0;
        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
            nvmlEnableState_t on;
            if (N.nvmlDeviceGetNvLinkState(dev(g), l, &on) == NVML_SUCCESS && on)
                active++;
        }
        assert_int_equal(active, 6);
    }
    unsigned to[8] = {0};
    for (unsigned l = 0; l < 6; l++) {
        nvmlPciInfo_t pci;
        nvmlDevice_t peer;
        assert_int_equal(N.nvmlDeviceGetNvLinkRemotePciInfo_v2(dev(0), l, &pci), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &peer), NVML_SUCCESS);
        unsigned idx;
        assert_int_equal(N.nvmlDeviceGetIndex(peer, &idx), NVML_SUCCESS);
        to[idx]++;
    }
    assert_int_equal(to[1], 1);
    assert_int_equal(to[2], 1);
    assert_int_equal(to[3], 2);
    assert_int_equal(to[4], 2);
    assert_int_equal(to[5] + to[6] + to[7], 0);
    nvmlEnableState_t on;
    assert_int_equal(N.nvmlDeviceGetNvLinkState(dev(0), 6, &on), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetNvLinkState(dev(0), NVML_NVLINK_MAX_LINKS, &on),
                     NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpuP2PStatus_t st;
    assert_int_equal(N.nvmlDeviceGetP2PStatus(dev(0), dev(4), NVML_P2P_CAPS_INDEX_NVLINK, &st),
                     NVML_SUCCESS);
    assert_int_equal(st, NVML_P2P_STATUS_OK);
    assert_int_equal(N.nvmlDeviceGetP2PStatus(dev(0), dev(5), NVML_P2P_CAPS_INDEX_NVLINK, &st),
                     NVML_SUCCESS);
    assert_int_not_equal(st, NVML_P2P_STATUS_OK);
    assert_int_equal(N.nvmlDeviceGetP2PStatus(dev(0), dev(5), NVML_P2P_CAPS_INDEX_READ, &st),
                     NVML_SUCCESS);
    assert_int_not_equal(st, NVML_P2P_STATUS_OK); /* no NVLink, across sockets */
    assert_int_equal(N.nvmlDeviceGetP2PStatus(dev(6), dev(7), NVML_P2P_CAPS_INDEX_READ, &st),
                     NVML_SUCCESS);
    assert_int_equal(st, NVML_P2P_STATUS_OK);
    /* Volta: retired pages, no row remapping */
    unsigned c, u, p, f;
    assert_int_equal(N.nvmlDeviceGetRemappedRows(dev(0), &c, &u, &p, &f), NVML_ERROR_NOT_SUPPORTED);
    unsigned pages = 0;
    assert_int_equal(N.nvmlDeviceGetRetiredPages(
                         dev(0), NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &pages, NULL),
                     NVML_SUCCESS);
    assert_int_equal(pages, 0);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

/* ---- MIG: fitting, profiles, MIG devices ------------------------------------------------- */

static void test_mig_fit(void **state)
{
    (void)state;
    use(fleet("dgx-a100-80gb-mig.yaml"), false);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    nvmlGpuInstance_t gi, gi2;
    nvmlComputeInstance_t ci;
    unsigned cap;
    /* GPU 2: 7x 1g.10gb from the fleet: full */
    assert_int_equal(N.nvmlDeviceCreateGpuInstance(dev(2), 19, &gi),
                     NVML_ERROR_INSUFFICIENT_RESOURCES);
    assert_int_equal(N.nvmlDeviceGetGpuInstanceRemainingCapacity(dev(2), 19, &cap), NVML_SUCCESS);
    assert_int_equal(cap, 0);
    /* GPU 4: 2x 3g.40gb: no room for even a 1g */
    assert_int_equal(N.nvmlDeviceCreateGpuInstance(dev(4), 19, &gi),
                     NVML_ERROR_INSUFFICIENT_RESOURCES);
    /* GPU 6: MIG disabled */
    assert_int_equal(N.nvmlDeviceCreateGpuInstance(dev(6), 19, &gi), NVML_ERROR_NOT_SUPPORTED);
    nvmlReturn_t act;
    assert_int_equal(N.nvmlDeviceSetMigMode(dev(6), NVML_DEVICE_MIG_ENABLE, &act), NVML_SUCCESS);
    assert_int_equal(act, NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetGpuInstanceRemainingCapacity(dev(6), 19, &cap), NVML_SUCCESS);
    assert_int_equal(cap, 7);
    assert_int_equal(N.nvmlDeviceCreateGpuInstance(dev(6), 5, &gi), NVML_SUCCESS); /* 4g.40gb */
    assert_int_equal(N.nvmlDeviceCreateGpuInstance(dev(6), 5, &gi2),
                     NVML_ERROR_INSUFFICIENT_RESOURCES); /* max 1 */
    nvmlGpuInstancePlacement_t bad = {.start = 3, .size = 4};
    assert_int_equal(N.nvmlDeviceCreateGpuInstanceWithPlacement(dev(6), 9, &bad, &gi2),
                     NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpuInstancePlacement_t taken = {.start = 0, .size = 4};
    assert_int_equal(N.nvmlDeviceCreateGpuInstanceWithPlacement(dev(6), 9, &taken, &gi2),
                     NVML_ERROR_INSUFFICIENT_RESOURCES);
    nvmlGpuInstancePlacement_t free4 = {.start = 4, .size = 4};
    assert_int_equal(N.nvmlDeviceCreateGpuInstanceWithPlacement(dev(6), 9, &free4, &gi2),
                     NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceCreateGpuInstance(dev(6), 19, &gi),
                     NVML_ERROR_INSUFFICIENT_RESOURCES); /* 4 + 3 = 7 slices used */
    assert_int_equal(N.nvmlDeviceGetGpuInstanceRemainingCapacity(dev(6), 19, &cap), NVML_SUCCESS);
    assert_int_equal(cap, 0);
    nvmlGpuInstanceInfo_t info;
    assert_int_equal(N.nvmlGpuInstanceGetInfo(gi2, &info), NVML_SUCCESS);
    assert_int_equal(info.profileId, 9);
    assert_int_equal(info.placement.start, 4);
    assert_int_equal(info.placement.size, 4);
    assert_int_equal(info.id, 2);
    assert_ptr_equal(info.device, dev(6));
    /* a CI spanning the 3g; then destroying the GI is refused while the CI lives */
    assert_int_equal(
        N.nvmlGpuInstanceCreateComputeInstance(gi2, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &ci),
        NVML_SUCCESS);
    assert_int_equal(N.nvmlGpuInstanceDestroy(gi2), NVML_ERROR_IN_USE);
    assert_int_equal(N.nvmlDeviceSetMigMode(dev(6), NVML_DEVICE_MIG_DISABLE, &act),
                     NVML_ERROR_IN_USE);
    assert_int_equal(N.nvmlComputeInstanceDestroy(ci), NVML_SUCCESS);
    assert_int_equal(N.nvmlComputeInstanceDestroy(ci), NVML_ERROR_INVALID_ARGUMENT); /* stale */
    assert_int_equal(N.nvmlGpuInstanceDestroy(gi2), NVML_SUCCESS);
    assert_int_equal(N.nvmlGpuInstanceDestroy(gi), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceSetMigMode(dev(6), NVML_DEVICE_MIG_DISABLE, &act), NVML_SUCCESS);
    N.nvmlShutdown();

    /* not MIG capable */
    use(fleet("pcie-l4.yaml"), false);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceSetMigMode(dev(0), NVML_DEVICE_MIG_ENABLE, &act),
                     NVML_ERROR_NOT_SUPPORTED);
    unsigned cur, pend;
    assert_int_equal(N.nvmlDeviceGetMigMode(dev(0), &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
    nvmlGpuInstanceProfileInfo_t pi;
    assert_int_equal(N.nvmlDeviceGetGpuInstanceProfileInfo(dev(0), 0, &pi),
                     NVML_ERROR_NOT_SUPPORTED);
    N.nvmlShutdown();
}

static void test_mig_profiles_and_devices(void **state)
{
    (void)state;
    use(fleet("dgx-a100-80gb-mig.yaml"), false);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    nvmlDevice_t d = dev(0);
    nvmlGpuInstanceProfileInfo_v2_t v2 = {.version = nvmlGpuInstanceProfileInfo_v2};
    assert_int_equal(
        N.nvmlDeviceGetGpuInstanceProfileInfoV(d, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &v2),
        NVML_SUCCESS);
    assert_string_equal(v2.name, "MIG 1g.10gb");
    assert_int_equal(v2.id, 19);
    assert_int_equal(v2.instanceCount, 7);
    assert_int_equal(v2.multiprocessorCount, 14);
    assert_int_equal(v2.memorySizeMB, 9728);
    nvmlGpuInstanceProfileInfo_v3_t v3 = {.version = nvmlGpuInstanceProfileInfo_v3};
    assert_int_equal(N.nvmlDeviceGetGpuInstanceProfileInfoV(d, NVML_GPU_INSTANCE_PROFILE_7_SLICE,
                                                            (nvmlGpuInstanceProfileInfo_v2_t *)&v3),
                     NVML_SUCCESS);
    assert_string_equal(v3.name, "MIG 7g.80gb");
    assert_int_equal(v3.id, 0);
    assert_int_equal(v3.multiprocessorCount, 98);
    assert_int_equal(v3.copyEngineCount, 7);
    nvmlGpuInstanceProfileInfo_t v1;
    assert_int_equal(
        N.nvmlDeviceGetGpuInstanceProfileInfo(d, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, &v1),
        NVML_SUCCESS);
    assert_int_equal(v1.id, 20); /* 1g.10gb+me */
    assert_int_equal(v1.ofaCount, 1);
    assert_int_equal(
        N.nvmlDeviceGetGpuInstanceProfileInfo(d, NVML_GPU_INSTANCE_PROFILE_6_SLICE, &v1),
        NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetGpuInstanceProfileInfo(d, NVML_GPU_INSTANCE_PROFILE_COUNT, &v1),
                     NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpuInstancePlacement_t pl[8];
    unsigned n = 0;
    assert_int_equal(N.nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, 9, pl, &n),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 2);
    assert_int_equal(N.nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, 9, pl, &n), NVML_SUCCESS);
    assert_int_equal(pl[0].start, 0);
    assert_int_equal(pl[1].start, 4);
    assert_int_equal(pl[1].size, 4);
    n = 8;
    assert_int_equal(N.nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, 19, pl, &n), NVML_SUCCESS);
    assert_int_equal(n, 7);

    /* GPU 0's fleet layout: 3g.40gb + 2g.20gb + 2x 1g.10gb, one CI each: 4 MIG devices */
    unsigned max;
    assert_int_equal(N.nvmlDeviceGetMaxMigDeviceCount(d, &max), NVML_SUCCESS);
    assert_int_equal(max, 7);
    unsigned found = 0, mem_3g = 0;
    for (unsigned i = 0; i < max; i++) {
        nvmlDevice_t m, parent, back;
        if (N.nvmlDeviceGetMigDeviceHandleByIndex(d, i, &m) != NVML_SUCCESS)
            break;
        found++;
        unsigned is = 0, gid, cid;
        assert_int_equal(N.nvmlDeviceIsMigDeviceHandle(m, &is), NVML_SUCCESS);
        assert_int_equal(is, 1);
        assert_int_equal(N.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(m, &parent), NVML_SUCCESS);
        assert_ptr_equal(parent, d);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceId(m, &gid), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetComputeInstanceId(m, &cid), NVML_SUCCESS);
        assert_int_equal(cid, 0);
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        assert_int_equal(N.nvmlDeviceGetUUID(m, uuid, sizeof(uuid)), NVML_SUCCESS);
        assert_true(str_has_prefix(uuid, "MIG-"));
        assert_int_equal(strlen(uuid), 40);
        assert_int_equal(N.nvmlDeviceGetHandleByUUID(uuid, &back), NVML_SUCCESS);
        assert_ptr_equal(back, m);
        assert_int_equal(N.nvmlDeviceGetName(m, name, sizeof(name)), NVML_SUCCESS);
        assert_true(str_has_prefix(name, "NVIDIA A100-SXM4-80GB MIG "));
        nvmlDeviceAttributes_t at;
        assert_int_equal(N.nvmlDeviceGetAttributes_v2(m, &at), NVML_SUCCESS);
        nvmlMemory_t mem;
        assert_int_equal(N.nvmlDeviceGetMemoryInfo(m, &mem), NVML_SUCCESS);
        assert_int_equal(mem.total, at.memorySizeMB << 20);
        if (strcmp(name, "NVIDIA A100-SXM4-80GB MIG 3g.40gb") == 0) {
            assert_int_equal(at.multiprocessorCount, 42);
            assert_int_equal(at.gpuInstanceSliceCount, 3);
            assert_int_equal(at.memorySizeMB, 40192);
            assert_int_equal(gid, 2); /* placement 4:4 */
            mem_3g = (unsigned)at.memorySizeMB;
        }
        /* telemetry is a whole-GPU matter */
        unsigned t;
        assert_int_equal(N.nvmlDeviceGetTemperature(m, NVML_TEMPERATURE_GPU, &t),
                         NVML_ERROR_NOT_SUPPORTED);
    }
    assert_int_equal(found, 4);
    assert_int_equal(mem_3g, 40192);
    unsigned is = 1, id;
    assert_int_equal(N.nvmlDeviceIsMigDeviceHandle(d, &is), NVML_SUCCESS);
    assert_int_equal(is, 0);
    assert_int_equal(N.nvmlDeviceGetGpuInstanceId(d, &id), NVML_ERROR_NOT_SUPPORTED);

    /* compute-instance profiles of the 3g.40gb GI (id 2) */
    nvmlGpuInstance_t gi;
    assert_int_equal(N.nvmlDeviceGetGpuInstanceById(d, 2, &gi), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetGpuInstanceById(d, 13, &gi), NVML_ERROR_NOT_FOUND);
    assert_int_equal(N.nvmlDeviceGetGpuInstanceById(d, 2, &gi), NVML_SUCCESS);
    nvmlComputeInstanceProfileInfo_v2_t cp = {.version = nvmlComputeInstanceProfileInfo_v2};
    assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceProfileInfoV(
                         gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
                         NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &cp),
                     NVML_SUCCESS);
    assert_string_equal(cp.name, "MIG 1c.3g.40gb");
    assert_int_equal(cp.instanceCount, 3);
    assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceProfileInfoV(
                         gi, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE,
                         NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &cp),
                     NVML_ERROR_NOT_SUPPORTED);
    nvmlComputeInstance_t cis[8];
    unsigned ncis = 0;
    assert_int_equal(
        N.nvmlGpuInstanceGetComputeInstances(gi, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, cis, &ncis),
        NVML_SUCCESS);
    assert_int_equal(ncis, 1);
    nvmlComputeInstanceInfo_t cinfo;
    assert_int_equal(N.nvmlComputeInstanceGetInfo_v2(cis[0], &cinfo), NVML_SUCCESS);
    assert_ptr_equal(cinfo.gpuInstance, gi);
    assert_ptr_equal(cinfo.device, d);
    assert_int_equal(cinfo.placement.size, 3);
    unsigned left;
    assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(
                         gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &left),
                     NVML_SUCCESS);
    assert_int_equal(left, 0); /* the 3-slice CI spans it */
    N.nvmlShutdown();
}

/* ---- (a) a MIG change made by one process is seen by another ----------------------------- */

static int child_mig(int argc, char **argv)
{
    /* child-mig create|expect GPU PROFILE_ID COUNT */
    if (argc != 5 || load() < 0 || N.nvmlInit_v2() != NVML_SUCCESS)
        return 10;
    unsigned gpu = (unsigned)atoi(argv[2]), prof = (unsigned)atoi(argv[3]),
             want = (unsigned)atoi(argv[4]);
    nvmlDevice_t d;
    if (N.nvmlDeviceGetHandleByIndex_v2(gpu, &d))
        return 11;
    if (strcmp(argv[1], "create") == 0) {
        nvmlGpuInstance_t gi;
        nvmlComputeInstance_t ci;
        if (N.nvmlDeviceCreateGpuInstance(d, prof, &gi) ||
            N.nvmlGpuInstanceCreateComputeInstance(gi, 0, &ci))
            return 12;
    } else {
        nvmlGpuInstance_t gis[8];
        unsigned n = 0, mig, pend;
        if (N.nvmlDeviceGetMigMode(d, &mig, &pend) || mig != NVML_DEVICE_MIG_ENABLE)
            return 13;
        if (N.nvmlDeviceGetGpuInstances(d, prof, gis, &n) || n != want)
            return 14;
        nvmlDevice_t m;
        char uuid[96];
        if (want && (N.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &m) ||
                     N.nvmlDeviceGetUUID(m, uuid, sizeof(uuid))))
            return 15;
        if (want)
            printf("%s\n", uuid);
    }
    N.nvmlShutdown();
    return 0;
}

static void test_mig_across_processes(void **state)
{
    (void)state;
    use(fleet("dgx-a100-80gb-mig.yaml"), true);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    nvmlReturn_t act;
    nvmlDevice_t d = dev(7);
    assert_int_equal(N.nvmlDeviceSetMigMode(d, NVML_DEVICE_MIG_ENABLE, &act), NVML_SUCCESS);
    nvmlGpuInstance_t gi;
    nvmlComputeInstance_t ci;
    assert_int_equal(N.nvmlDeviceCreateGpuInstance(d, 9, &gi), NVML_SUCCESS);
    assert_int_equal(
        N.nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, &ci),
        NVML_SUCCESS);
    char uuid[96];
    nvmlDevice_t m;
    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &m), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetUUID(m, uuid, sizeof(uuid)), NVML_SUCCESS);

    /* another process sees the mode, the GI and the same MIG UUID */
    char out[256], err[1024];
    char *expect[] = {(char *)self_path, "child-mig", "expect", "7", "9", "1", NULL};
    assert_int_equal(run(expect, out, sizeof(out), err, sizeof(err)), 0);
    out[strcspn(out, "\n")] = '\0';
    assert_string_equal(out, uuid);

    /* and a GI created there shows up here, without re-initialising */
    char *create[] = {(char *)self_path, "child-mig", "create", "7", "14", "0", NULL};
    assert_int_equal(run(create, out, sizeof(out), err, sizeof(err)), 0);
    nvmlGpuInstance_t gis[8];
    unsigned n = 0;
    assert_int_equal(N.nvmlDeviceGetGpuInstances(d, 14, gis, &n), NVML_SUCCESS);
    assert_int_equal(n, 1);
    nvmlGpuInstanceInfo_t info;
    assert_int_equal(N.nvmlGpuInstanceGetInfo(gis[0], &info), NVML_SUCCESS);
    assert_int_equal(info.profileId, 14);
    unsigned cap;
    assert_int_equal(N.nvmlDeviceGetGpuInstanceRemainingCapacity(d, 14, &cap), NVML_SUCCESS);
    assert_int_equal(cap, 1); /* 3g@4 + 2g: one more 2g fits */
    /* `gpuop-sim reset` restores the fleet's layout (MIG disabled on GPU 7) for everyone */
    assert_int_equal(sim(err, sizeof(err), "reset", NULL), 0);
    unsigned cur, pend;
    assert_int_equal(N.nvmlDeviceGetMigMode(d, &cur, &pend), NVML_SUCCESS);
    assert_int_equal(cur, NVML_DEVICE_MIG_DISABLE);
    assert_int_equal(N.nvmlGpuInstanceGetInfo(gi, &info), NVML_ERROR_INVALID_ARGUMENT); /* gone */
    N.nvmlShutdown();
}

/* ---- (b) an injected XID reaches a waiter within 1 s --------------------------------------- */

struct waiter {
    nvmlEventSet_t set;
    nvmlReturn_t r;
    nvmlEventData_t data;
    uint64_t done_ms;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    w->r = N.nvmlEventSetWait_v2(w->set, &w->data, 5000);
    w->done_ms = now_ms_mono();
    return NULL;
}

/* Meanwhile the collector keeps reading telemetry: the wait must not hold the library. */
static void *poll_thread(void *arg)
{
    volatile bool *stop = arg;
    while (!*stop) {
        unsigned t;
        nvmlDevice_t d;
        if (N.nvmlDeviceGetHandleByIndex_v2(1, &d) == NVML_SUCCESS)
            N.nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t);
        usleep(1000);
    }
    return NULL;
}

static void test_xid_event(void **state)
{
    (void)state;
    use(fleet("dgx-h100.yaml"), true);
    char err[1024];
    /* an event from before the set existed is not delivered */
    assert_int_equal(sim(err, sizeof(err), "inject", "xid", "--gpu", "2", "--code", "13", NULL), 0);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    nvmlEventSet_t set;
    assert_int_equal(N.nvmlEventSetCreate(&set), NVML_SUCCESS);
    unsigned long long types;
    assert_int_equal(N.nvmlDeviceGetSupportedEventTypes(dev(3), &types), NVML_SUCCESS);
    assert_true(types & nvmlEventTypeXidCriticalError);
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(N.nvmlDeviceRegisterEvents(dev(i), nvmlEventTypeXidCriticalError, set),
                         NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceRegisterEvents(dev(0), 1ULL << 40, set), NVML_ERROR_NOT_SUPPORTED);
    nvmlEventData_t data;
    uint64_t t0 = now_ms_mono();
    assert_int_equal(N.nvmlEventSetWait_v2(set, &data, 150), NVML_ERROR_TIMEOUT);
    assert_true(now_ms_mono() - t0 >= 140);

    struct waiter w = {.set = set};
    volatile bool stop = false;
    pthread_t th, poller;
    assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
    assert_int_equal(pthread_create(&poller, NULL, poll_thread, (void *)&stop), 0);
    usleep(100 * 1000);
    uint64_t start = now_ms_mono();
    assert_int_equal(sim(err, sizeof(err), "inject", "xid", "--gpu", "3", "--code", "48", NULL), 0);
    pthread_join(th, NULL);
    stop = true;
    pthread_join(poller, NULL);
    assert_int_equal(w.r, NVML_SUCCESS);
    assert_true(w.done_ms - start < 1000);
    assert_ptr_equal(w.data.device, dev(3));
    assert_int_equal(w.data.eventType, nvmlEventTypeXidCriticalError);
    assert_int_equal(w.data.eventData, 48);
    assert_int_equal(w.data.gpuInstanceId, 0xFFFFFFFFu);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &data, 0), NVML_ERROR_TIMEOUT); /* only once */

    /* a second set created now sees nothing old; both see the next one */
    nvmlEventSet_t set2;
    assert_int_equal(N.nvmlEventSetCreate(&set2), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceRegisterEvents(dev(5), nvmlEventTypeXidCriticalError, set2),
                     NVML_SUCCESS);
    assert_int_equal(N.nvmlEventSetWait_v2(set2, &data, 0), NVML_ERROR_TIMEOUT);
    assert_int_equal(sim(err, sizeof(err), "inject", "xid", "--gpu", "5", "--code", "79", NULL), 0);
    assert_int_equal(N.nvmlEventSetWait_v2(set2, &data, 1000), NVML_SUCCESS);
    assert_int_equal(data.eventData, 79);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &data, 1000), NVML_SUCCESS);
    assert_int_equal(data.eventData, 79);
    /* events of GPUs the set did not register are not delivered to it */
    assert_int_equal(sim(err, sizeof(err), "inject", "xid", "--gpu", "4", "--code", "31", NULL), 0);
    assert_int_equal(N.nvmlEventSetWait_v2(set2, &data, 100), NVML_ERROR_TIMEOUT);
    /* ECC: counters and a DoubleBitEccError event */
    assert_int_equal(N.nvmlDeviceRegisterEvents(dev(5), nvmlEventTypeDoubleBitEccError, set2),
                     NVML_SUCCESS);
    assert_int_equal(
        sim(err, sizeof(err), "inject", "ecc", "--gpu", "5", "--dbe", "2", "--sbe", "3", NULL), 0);
    assert_int_equal(N.nvmlEventSetWait_v2(set2, &data, 1000), NVML_SUCCESS);
    assert_int_equal(data.eventType, nvmlEventTypeDoubleBitEccError);
    unsigned long long cnt;
    assert_int_equal(N.nvmlDeviceGetTotalEccErrors(dev(5), NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                   NVML_VOLATILE_ECC, &cnt),
                     NVML_SUCCESS);
    assert_int_equal(cnt, 2);
    assert_int_equal(N.nvmlDeviceGetTotalEccErrors(dev(5), NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                   NVML_AGGREGATE_ECC, &cnt),
                     NVML_SUCCESS);
    assert_int_equal(cnt, 3);
    unsigned c, u, p, f;
    assert_int_equal(N.nvmlDeviceGetRemappedRows(dev(5), &c, &u, &p, &f), NVML_SUCCESS);
    assert_int_equal(u, 2);
    assert_int_equal(p, 1);
    nvmlFieldValue_t fv[2] = {{.fieldId = NVML_FI_DEV_ECC_DBE_AGG_TOTAL},
                              {.fieldId = NVML_FI_DEV_REMAPPED_UNC}};
    assert_int_equal(N.nvmlDeviceGetFieldValues(dev(5), 2, fv), NVML_SUCCESS);
    assert_int_equal(fv[0].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(fv[0].value.ullVal, 2);
    assert_int_equal(fv[1].value.uiVal, 2);
    assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(N.nvmlEventSetFree(set2), NVML_SUCCESS);
    assert_int_equal(N.nvmlEventSetFree(set2), NVML_ERROR_INVALID_ARGUMENT);
    N.nvmlShutdown();

    /* MIG-attributed XIDs carry the instance ids */
    use(fleet("dgx-a100-80gb-mig.yaml"), true);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(N.nvmlEventSetCreate(&set), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceRegisterEvents(dev(0), nvmlEventTypeXidCriticalError, set),
                     NVML_SUCCESS);
    assert_int_equal(sim(err, sizeof(err), "inject", "xid", "--gpu", "0", "--code", "43", "--gi",
                         "2", "--ci", "0", NULL),
                     0);
    assert_int_equal(N.nvmlEventSetWait_v2(set, &data, 1000), NVML_SUCCESS);
    assert_int_equal(data.gpuInstanceId, 2);
    assert_int_equal(data.computeInstanceId, 0);
    assert_int_equal(
        sim(err, sizeof(err), "inject", "xid", "--gpu", "0", "--code", "43", "--gi", "5", NULL), 1);
    assert_non_null(strstr(err, "no GPU instance 5"));
    assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
    N.nvmlShutdown();
}

/* ---- (c) a lost GPU fails its calls while the others work -------------------------------- */

static void test_lost_gpu(void **state)
{
    (void)state;
    use(fleet("dgx-h100.yaml"), true);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    nvmlEventSet_t set;
    assert_int_equal(N.nvmlEventSetCreate(&set), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceRegisterEvents(dev(2), nvmlEventTypeXidCriticalError, set),
                     NVML_SUCCESS);
    char err[1024];
    assert_int_equal(sim(err, sizeof(err), "inject", "lost", "--gpu", "2", NULL), 0);
    char buf[96];
    unsigned t;
    nvmlMemory_t m;
    nvmlPciInfo_t pci;
    nvmlEnableState_t on;
    nvmlDevice_t d2 = dev(2); /* handles are still handed out */
    assert_int_equal(N.nvmlDeviceGetName(d2, buf, sizeof(buf)), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(N.nvmlDeviceGetUUID(d2, buf, sizeof(buf)), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(N.nvmlDeviceGetTemperature(d2, NVML_TEMPERATURE_GPU, &t),
                     NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(N.nvmlDeviceGetMemoryInfo(d2, &m), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(N.nvmlDeviceGetPciInfo_v3(d2, &pci), NVML_ERROR_GPU_IS_LOST);
    for (unsigned i = 0; i < 8; i++) {
        if (i == 2)
            continue;
        assert_int_equal(N.nvmlDeviceGetName(dev(i), buf, sizeof(buf)), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetTemperature(dev(i), NVML_TEMPERATURE_GPU, &t),
                         NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetMemoryInfo(dev(i), &m), NVML_SUCCESS);
    }
    /* its NVLink peers see the link down */
    unsigned down = 0;
    for (unsigned l = 0; l < 14; l++) {
        nvmlPciInfo_t rp;
        assert_int_equal(N.nvmlDeviceGetNvLinkRemotePciInfo_v2(dev(0), l, &rp), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetNvLinkState(dev(0), l, &on), NVML_SUCCESS);
        down += on == NVML_FEATURE_DISABLED;
    }
    assert_int_equal(down, 2);
    /* falling off the bus is XID 79 */
    nvmlEventData_t data;
    assert_int_equal(N.nvmlEventSetWait_v2(set, &data, 1000), NVML_SUCCESS);
    assert_int_equal(data.eventData, 79);
    /* the state is shared: a new process sees the same */
    assert_int_equal(sim(err, sizeof(err), "reset", NULL), 0);
    assert_int_equal(N.nvmlDeviceGetTemperature(d2, NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
    assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
    N.nvmlShutdown();
}

/* ---- (d) malformed fleets ----------------------------------------------------------------- */

#define HEAD "driver_version: \"570.86.15\"\ncuda_driver_version: 12080\n"
#define GPU_COMMON                                                                         \
    "  - model: \"NVIDIA H100 80GB HBM3\"\n    memory_mib: 81559\n    mig_capable: true\n" \
    "    power_limit_w: 700\n    max_sm_clock_mhz: 1980\n"
#define CC   "    compute_capability: \"9.0\"\n"
#define ARCH "    architecture: hopper\n"
#define PCI  "    pci_device_id: 0x233010de\n"
#define GPU  GPU_COMMON CC ARCH PCI

static const struct {
    const char *yaml;
    const char *field; /* the message names it */
} bad_fleets[] = {
    {HEAD "gpus: []\nbogus: 1\n", "unknown field \"bogus\""},
    {"cuda_driver_version: 12080\ngpus: []\n", "driver_version: required field is missing"},
    {"driver_version: \"570.x\"\ncuda_driver_version: 12080\ngpus: []\n", "driver_version"},
    {HEAD "gpus:\n" GPU "    colour: green\n", "gpus[0]: unknown field \"colour\""},
    {HEAD "gpus:\n" GPU GPU "    count: 0\n", "gpus[1].count"},
    {HEAD "gpus:\n" GPU "    wrong\n", "could not find expected"},
    {HEAD "gpus:\n  - model: \"X\"\n    memory_mib: lots\n", "gpus[0].memory_mib"},
    {HEAD "gpus:\n" GPU "    mig: {enabled: true, instances: [\"3g.40gb\", \"9g.99gb\"]}\n",
     "gpus[0].mig.instances[1]: \"9g.99gb\" is not a MIG profile"},
    {HEAD "gpus:\n" GPU "    mig: {enabled: true, instances: [\"7g.80gb\", \"1g.10gb\"]}\n",
     "gpus[0].mig.instances[1]: \"1g.10gb\" does not fit"},
    {HEAD "gpus:\n" GPU "    mig: {enabled: yes}\n", "gpus[0].mig.enabled"},
    {HEAD "gpus:\n  - model: \"NVIDIA L4\"\n    memory_mib: 23034\n    compute_capability: "
          "\"8.9\"\n    architecture: ada\n    pci_device_id: 0x27b810de\n    mig_capable: "
          "true\n    power_limit_w: 72\n    max_sm_clock_mhz: 2040\n",
     "gpus[0].mig_capable: no MIG profile table"},
    {HEAD "gpus:\n" GPU_COMMON CC PCI "    architecture: fermi\n", "gpus[0].architecture"},
    {HEAD "gpus:\n" GPU_COMMON ARCH PCI "    compute_capability: \"nine\"\n",
     "gpus[0].compute_capability"},
    {HEAD "gpus:\n" GPU_COMMON CC ARCH "    pci_device_id: 0x23301234\n", "gpus[0].pci_device_id"},
    {HEAD "gpus:\n" GPU "    bus_id: \"zz:18:00.0\"\n", "gpus[0].bus_id"},
    {HEAD "gpus:\n" GPU "    count: 2\n    uuid: \"GPU-1234abcd\"\n", "gpus[0]: uuid"},
    {HEAD "gpus:\n" GPU "    count: 2\ntopology:\n  nvlinks: [[0, 5, 2]]\n",
     "topology.nvlinks[0][1]: GPU 5 is out of range"},
    {HEAD "gpus:\n" GPU "    count: 2\ntopology:\n  nvlinks: [[0, 1, 99]]\n",
     "topology.nvlinks[0][2]"},
    {HEAD "gpus:\n" GPU "    count: 2\ntopology:\n  pcie: [[0, 1, far]]\n", "topology.pcie[0][2]"},
    {HEAD "gpus:\n" GPU "    count: 2\ntopology:\n  colour: 1\n", "topology: unknown field"},
    {HEAD "gpus:\n" GPU "    count: 65\n", "gpus[0].count"},
    {HEAD "gpus:\n" GPU "    addressing_mode: pasid\n",
     "gpus[0].addressing_mode: \"pasid\" is not none, hmm or ats"},
    {HEAD "gpus:\n" GPU "    c2c: maybe\n", "gpus[0].c2c"},
};

static int child_init(void)
{
    if (load() < 0)
        return 100;
    nvmlReturn_t r = N.nvmlInit_v2();
    nvmlReturn_t r2 = N.nvmlInit_v2(); /* a second try does not print again */
    if (r == NVML_SUCCESS)
        N.nvmlShutdown();
    if (r2 == NVML_SUCCESS)
        N.nvmlShutdown();
    return r == NVML_ERROR_UNKNOWN ? 99 : (int)r; /* exit statuses stop at 255 */
}

/* ---- faults, resets and reboots (the remediation's test-bed) ------------------------------- */

static unsigned long long field(nvmlDevice_t d, unsigned id)
{
    nvmlFieldValue_t v = {.fieldId = id};
    assert_int_equal(N.nvmlDeviceGetFieldValues(d, 1, &v), NVML_SUCCESS);
    assert_int_equal(v.nvmlReturn, NVML_SUCCESS);
    return v.value.ullVal;
}

static void remapped(nvmlDevice_t d, unsigned *unc, unsigned *pending, unsigned *failure)
{
    unsigned cor;
    assert_int_equal(N.nvmlDeviceGetRemappedRows(d, &cor, unc, pending, failure), NVML_SUCCESS);
}

/* Each fault the catalog classifies, as NVML shows it; what a GPU reset, a driver reload and a
 * reboot clear, and what they do not. */
static void test_faults_reset_reboot(void **state)
{
    (void)state;
    use(fleet("dgx-h100.yaml"), true);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    char err[1024];
    /* an uncorrectable ECC error: counted, rows pending remapping; a reset clears it */
    assert_int_equal(sim(err, sizeof(err), "inject", "ecc", "--gpu", "1", "--dbe", "1", NULL), 0);
    unsigned long long n = 0;
    assert_int_equal(N.nvmlDeviceGetTotalEccErrors(dev(1), NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                   NVML_VOLATILE_ECC, &n),
                     NVML_SUCCESS);
    assert_int_equal(n, 1);
    unsigned unc, pending, failure;
    remapped(dev(1), &unc, &pending, &failure);
    assert_int_equal(pending, 1);
    /* NVLink errors: counted, XID 74 */
    assert_int_equal(sim(err, sizeof(err), "inject", "nvlink", "--gpu", "1", NULL), 0);
    assert_int_equal(field(dev(1), NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL), 1);
    assert_int_equal(field(dev(1), NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL), 1);
    /* slowdowns held */
    assert_int_equal(sim(err, sizeof(err), "inject", "thermal", "--gpu", "4", NULL), 0);
    assert_int_equal(sim(err, sizeof(err), "inject", "power", "--gpu", "5", NULL), 0);
    unsigned long long r4 = 0, r5 = 0;
    assert_int_equal(N.nvmlDeviceGetCurrentClocksEventReasons(dev(4), &r4), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetCurrentClocksEventReasons(dev(5), &r5), NVML_SUCCESS);
    assert_true(r4 & nvmlClocksThrottleReasonHwThermalSlowdown);
    assert_true(r4 & nvmlClocksThrottleReasonHwSlowdown);
    assert_true(r5 & nvmlClocksThrottleReasonHwPowerBrakeSlowdown);
    /* a remapping that failed */
    assert_int_equal(sim(err, sizeof(err), "inject", "remap-failure", "--gpu", "6", NULL), 0);
    remapped(dev(6), &unc, &pending, &failure);
    assert_int_equal(failure, 1);
    /* the reset of GPU 1 clears its counts and applies the remapping; the others keep theirs */
    assert_int_equal(sim(err, sizeof(err), "gpu-reset", "--gpu", "1", NULL), 0);
    assert_int_equal(N.nvmlDeviceGetTotalEccErrors(dev(1), NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                   NVML_VOLATILE_ECC, &n),
                     NVML_SUCCESS);
    assert_int_equal(n, 0);
    assert_int_equal(N.nvmlDeviceGetTotalEccErrors(dev(1), NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                   NVML_AGGREGATE_ECC, &n),
                     NVML_SUCCESS);
    assert_int_equal(n, 1); /* the aggregate stays */
    remapped(dev(1), &unc, &pending, &failure);
    assert_int_equal(pending, 0);
    assert_int_equal(unc, 1);
    assert_int_equal(field(dev(1), NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL), 0);
    remapped(dev(6), &unc, &pending, &failure);
    assert_int_equal(failure, 1);
    /* a lost GPU cannot be reset; a reboot brings it back, the slowdowns stay */
    assert_int_equal(sim(err, sizeof(err), "inject", "lost", "--gpu", "2", NULL), 0);
    assert_int_equal(sim(err, sizeof(err), "gpu-reset", "--gpu", "2", NULL), 1);
    assert_non_null(strstr(err, "only a reboot"));
    char name[96];
    assert_int_equal(N.nvmlDeviceGetName(dev(2), name, sizeof(name)), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(sim(err, sizeof(err), "driver-reload", NULL), 0);
    assert_int_equal(N.nvmlDeviceGetName(dev(2), name, sizeof(name)), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(sim(err, sizeof(err), "reboot", NULL), 0);
    assert_int_equal(N.nvmlDeviceGetName(dev(2), name, sizeof(name)), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetCurrentClocksEventReasons(dev(4), &r4), NVML_SUCCESS);
    assert_true(r4 & nvmlClocksThrottleReasonHwThermalSlowdown);
    assert_int_equal(sim(err, sizeof(err), "inject", "cool", "--gpu", "4", NULL), 0);
    assert_int_equal(N.nvmlDeviceGetCurrentClocksEventReasons(dev(4), &r4), NVML_SUCCESS);
    assert_false(r4 & nvmlClocksThrottleReasonHwThermalSlowdown);
    char out[8192];
    char *show[] = {(char *)gpuop_sim_path, "show", NULL};
    assert_int_equal(run(show, out, sizeof(out), err, sizeof(err)), 0);
    assert_non_null(strstr(out, "1 reboots"));
    assert_non_null(strstr(out, "slowdown held"));
    /* bad usage: exit 2 naming the fault */
    assert_int_equal(sim(err, sizeof(err), "inject", "nvlink", NULL), 2);
    assert_non_null(strstr(err, "--gpu"));
    assert_int_equal(sim(err, sizeof(err), "reboot", "now", NULL), 2);
    assert_int_equal(sim(err, sizeof(err), "inject", "thermal", "--gpu", "1", "--code", "3", NULL),
                     2);
    N.nvmlShutdown();
    /* a GPU without NVLinks, a GPU before Ampere: refused */
    use(fleet("dgx1-v100.yaml"), true);
    assert_int_equal(sim(err, sizeof(err), "inject", "remap-failure", "--gpu", "0", NULL), 1);
    assert_non_null(strstr(err, "Ampere"));
    use(fleet("pcie-l4.yaml"), true);
    assert_int_equal(sim(err, sizeof(err), "inject", "nvlink", "--gpu", "0", NULL), 1);
    assert_non_null(strstr(err, "no NVLinks"));
}

static void test_bad_fleets(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(bad_fleets); i++) {
        char path[300];
        snprintf(path, sizeof(path), "%s/bad-%zu.yaml", tmp_root, i);
        struct err e = {0};
        assert_int_equal(
            file_write_atomic(path, bad_fleets[i].yaml, strlen(bad_fleets[i].yaml), 0644, &e), 0);
        use(path, true);
        char err[2048];
        int rc = sim(err, sizeof(err), "show", NULL);
        if (rc == 0 || !strstr(err, path) || !strstr(err, bad_fleets[i].field))
            fail_msg("bad fleet %zu: exit %d, stderr: %s", i, rc, err);
        assert_non_null(strchr(err, '\n'));
        assert_null(strchr(strchr(err, '\n') + 1, '\n')); /* one line */
        /* the driver refuses to initialise and says why, once */
        char *argv[] = {(char *)self_path, "child-init", NULL};
        rc = run(argv, NULL, 0, err, sizeof(err));
        if (rc == 0 || rc >= 100 || !strstr(err, path) || !strstr(err, bad_fleets[i].field))
            fail_msg("bad fleet %zu: nvmlInit gave %d, stderr: %s", i, rc, err);
        assert_null(strchr(strchr(err, '\n') + 1, '\n'));
    }
    /* a missing fleet, an unset variable */
    use("/nonexistent/fleet.yaml", true);
    char err[2048];
    char *argv[] = {(char *)self_path, "child-init", NULL};
    assert_int_equal(run(argv, NULL, 0, err, sizeof(err)), NVML_ERROR_DRIVER_NOT_LOADED);
    assert_non_null(strstr(err, "/nonexistent/fleet.yaml"));
    unsetenv("GPUOP_SIM_FLEET");
    assert_int_equal(run(argv, NULL, 0, err, sizeof(err)), NVML_ERROR_DRIVER_NOT_LOADED);
    assert_non_null(strstr(err, "GPUOP_SIM_FLEET"));
}

static void test_cli_errors(void **state)
{
    (void)state;
    char err[2048], out[4096];
    use(fleet("dgx-h100.yaml"), false);
    assert_int_equal(sim(err, sizeof(err), "show", NULL), 1);
    assert_non_null(strstr(err, "GPUOP_SIM_STATE is not set"));
    use(fleet("dgx-h100.yaml"), true);
    assert_int_equal(sim(err, sizeof(err), "inject", "xid", "--gpu", "8", "--code", "13", NULL), 2);
    assert_non_null(strstr(err, "--gpu 8"));
    assert_int_equal(sim(err, sizeof(err), "inject", "xid", "--gpu", "1", NULL), 2);
    assert_non_null(strstr(err, "--code"));
    assert_int_equal(sim(err, sizeof(err), "inject", "ecc", "--gpu", "1", NULL), 2);
    assert_non_null(strstr(err, "--dbe"));
    assert_int_equal(sim(err, sizeof(err), "inject", "melt", "--gpu", "1", NULL), 2);
    assert_int_equal(sim(err, sizeof(err), "inject", "lost", "--gpu", "x1", NULL), 2);
    assert_int_equal(sim(err, sizeof(err), "frobnicate", NULL), 2);
    char *help[] = {(char *)gpuop_sim_path, "--help", NULL};
    assert_int_equal(run(help, out, sizeof(out), err, sizeof(err)), 0);
    assert_non_null(strstr(out, "GPUOP_SIM_STATE"));
    assert_non_null(strstr(out, "inject xid --gpu N --code C"));
    /* show: human-readable state */
    assert_int_equal(sim(err, sizeof(err), "inject", "lost", "--gpu", "6", NULL), 0);
    char *show[] = {(char *)gpuop_sim_path, "show", NULL};
    assert_int_equal(run(show, out, sizeof(out), err, sizeof(err)), 0);
    assert_non_null(strstr(out, "GPU 6  NVIDIA H100 80GB HBM3"));
    assert_non_null(strstr(out, "LOST"));
    assert_non_null(strstr(out, "XidCriticalError 79"));

    /* a damaged state file: refused with its name; the last good state stays for a running
     * process; `gpuop-sim reset` recovers */
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    char state_file[400];
    snprintf(state_file, sizeof(state_file), "%s/state.json", getenv("GPUOP_SIM_STATE"));
    struct err e = {0};
    assert_int_equal(file_write_atomic(state_file, "{\"fleet\": ", 10, 0644, &e), 0);
    char name[96];
    assert_int_equal(N.nvmlDeviceGetName(dev(6), name, sizeof(name)), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(N.nvmlDeviceGetName(dev(5), name, sizeof(name)), NVML_SUCCESS);
    assert_int_equal(sim(err, sizeof(err), "show", NULL), 1);
    assert_non_null(strstr(err, state_file));
    assert_non_null(strstr(err, "gpuop-sim reset"));
    char *init[] = {(char *)self_path, "child-init", NULL};
    assert_int_not_equal(run(init, NULL, 0, err, sizeof(err)), 0);
    assert_non_null(strstr(err, state_file));
    assert_int_equal(sim(err, sizeof(err), "reset", NULL), 0);
    assert_int_equal(N.nvmlDeviceGetName(dev(6), name, sizeof(name)), NVML_SUCCESS);
    N.nvmlShutdown();
}

/* A state file that lists more instances of a profile than the profile allows (edited by hand,
 * damaged) must not make the list calls write past an array sized by NVML's contract (the
 * profile's instanceCount). The arrays are heap-allocated to exactly that size for ASan. */
static void test_state_overfull_lists(void **state)
{
    (void)state;
    use(fleet("dgx-a100-80gb-mig.yaml"), true);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    N.nvmlShutdown(); /* the state file now exists: GPUs 2-3 hold 7x 1g.10gb (profile id 19) */
    char state_file[400];
    snprintf(state_file, sizeof(state_file), "%s/state.json", getenv("GPUOP_SIM_STATE"));
    struct err e = {0};
    char *buf = NULL;
    assert_int_equal(file_read_all(state_file, 1 << 20, &buf, NULL, &e), 0);
    /* GPU 2's first GPU instance, listed once more under a free id (14), and its compute
     * instance twice more (ids 1 and 2) */
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 1 << 20);
    const char *gpu2 = buf;
    for (int i = 0; i < 3 && gpu2; i++)
        gpu2 = strstr(gpu2 + 1, "\"instances\"");
    assert_non_null(gpu2);
    const char *open = strchr(gpu2, '[');
    assert_non_null(open);
    assert_int_equal(sbuf_append(&b, buf, (size_t)(open + 1 - buf)), 0);
    assert_int_equal(
        sbuf_puts(&b, "{\"id\": 14, \"profile_id\": 19, \"start\": 0, \"size\": 1, \"compute\": ["
                      "{\"id\": 0, \"profile\": 0, \"start\": 0, \"size\": 1},"
                      "{\"id\": 1, \"profile\": 0, \"start\": 0, \"size\": 1},"
                      "{\"id\": 2, \"profile\": 0, \"start\": 0, \"size\": 1}]},"),
        0);
    assert_int_equal(sbuf_puts(&b, open + 1), 0);
    free(buf);
    assert_int_equal(file_write_atomic(state_file, b.data, b.len, 0644, &e), 0);

    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    nvmlGpuInstanceProfileInfo_t info = {0};
    assert_int_equal(
        N.nvmlDeviceGetGpuInstanceProfileInfo(dev(2), NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info),
        NVML_SUCCESS);
    assert_int_equal(info.id, 19);
    nvmlGpuInstance_t *gis = calloc(info.instanceCount, sizeof(*gis));
    unsigned n = 0;
    assert_int_equal(N.nvmlDeviceGetGpuInstances(dev(2), 19, gis, &n), NVML_SUCCESS);
    assert_true(n <= info.instanceCount);
    nvmlGpuInstance_t extra = NULL;
    assert_int_equal(N.nvmlDeviceGetGpuInstanceById(dev(2), 14, &extra), NVML_SUCCESS);
    nvmlComputeInstanceProfileInfo_t cinfo = {0};
    assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                         extra, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
                         NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &cinfo),
                     NVML_SUCCESS);
    nvmlComputeInstance_t *cis = calloc(cinfo.instanceCount, sizeof(*cis));
    n = 0;
    assert_int_equal(N.nvmlGpuInstanceGetComputeInstances(extra, cinfo.id, cis, &n), NVML_SUCCESS);
    assert_true(n <= cinfo.instanceCount);
    free(cis);
    free(gis);
    N.nvmlShutdown();
}

/* ---- (f) telemetry ------------------------------------------------------------------------- */

static int child_telemetry(void)
{
    if (load() < 0 || N.nvmlInit_v2() != NVML_SUCCESS)
        return 10;
    for (unsigned i = 0; i < 8; i++) {
        nvmlDevice_t d;
        unsigned t, p, sm, mem;
        unsigned long long e;
        nvmlUtilization_t u;
        if (N.nvmlDeviceGetHandleByIndex_v2(i, &d) ||
            N.nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t) ||
            N.nvmlDeviceGetPowerUsage(d, &p) || N.nvmlDeviceGetTotalEnergyConsumption(d, &e) ||
            N.nvmlDeviceGetUtilizationRates(d, &u) ||
            N.nvmlDeviceGetClockInfo(d, NVML_CLOCK_SM, &sm) ||
            N.nvmlDeviceGetClockInfo(d, NVML_CLOCK_MEM, &mem))
            return 11;
        printf("%u %u %u %llu %u %u %u %u\n", i, t, p, e, u.gpu, u.memory, sm, mem);
    }
    N.nvmlShutdown();
    return 0;
}

static void telemetry_run(const char *fleet_file, const char *clock, char *out, size_t n)
{
    use(fleet_file, false);
    setenv("GPUOP_SIM_CLOCK", clock, 1);
    char err[1024];
    char *argv[] = {(char *)self_path, "child-telemetry", NULL};
    assert_int_equal(run(argv, out, n, err, sizeof(err)), 0);
    unsetenv("GPUOP_SIM_CLOCK");
}

static void test_telemetry(void **state)
{
    (void)state;
    char a[2048], b[2048], c[2048], later[2048];
    telemetry_run(fleet("dgx-h100.yaml"), "1796000000", a, sizeof(a));
    telemetry_run(fleet("dgx-h100.yaml"), "1796000000", b, sizeof(b));
    assert_string_equal(a, b); /* same seed, same time: same values, in another process */
    telemetry_run(fleet("dgx-h100.yaml"), "1796000060", later, sizeof(later));
    assert_string_not_equal(a, later); /* it moves */

    /* another seed, same hardware: other values */
    char path[300];
    snprintf(path, sizeof(path), "%s/seed.yaml", tmp_root);
    char *buf = NULL;
    size_t len;
    struct err e = {0};
    assert_int_equal(file_read_all(fleet("dgx-h100.yaml"), 1 << 20, &buf, &len, &e), 0);
    char *s = strstr(buf, "seed: 1\n");
    assert_non_null(s);
    s[6] = '7';
    assert_int_equal(file_write_atomic(path, buf, len, 0644, &e), 0);
    free(buf);
    telemetry_run(path, "1796000000", c, sizeof(c));
    assert_string_not_equal(a, c);

    /* plausible: within the limits; energy grows by at least idle power x time */
    char *pa = a, *pl = later;
    for (unsigned i = 0; i < 8; i++) {
        unsigned idx, t, p, ug, um, sm, mem, idx2, t2, p2, ug2, um2, sm2, mem2;
        unsigned long long en, en2;
        int na = 0, nl = 0;
        assert_int_equal(sscanf(pa, "%u %u %u %llu %u %u %u %u\n%n", &idx, &t, &p, &en, &ug, &um,
                                &sm, &mem, &na),
                         8);
        assert_int_equal(sscanf(pl, "%u %u %u %llu %u %u %u %u\n%n", &idx2, &t2, &p2, &en2, &ug2,
                                &um2, &sm2, &mem2, &nl),
                         8);
        pa += na;
        pl += nl;
        assert_int_equal(idx, i);
        assert_in_range(t, 25, 90);
        assert_in_range(p, 71000, 700000);
        assert_in_range(ug, 0, 100);
        assert_in_range(sm, 300, 1980);
        assert_int_equal(mem, 2619);
        assert_true(en2 >= en + 71ULL * 60 * 1000);
        assert_true(en2 <= en + 700ULL * 60 * 1000);
    }

    /* with the real clock the energy counter grows between two reads */
    use(fleet("pcie-l4.yaml"), false);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    unsigned long long e1, e2;
    assert_int_equal(N.nvmlDeviceGetTotalEnergyConsumption(dev(0), &e1), NVML_SUCCESS);
    usleep(60 * 1000);
    assert_int_equal(N.nvmlDeviceGetTotalEnergyConsumption(dev(0), &e2), NVML_SUCCESS);
    assert_true(e2 >= e1 + 16 * 50);
    unsigned long long reasons;
    assert_int_equal(N.nvmlDeviceGetCurrentClocksEventReasons(dev(0), &reasons), NVML_SUCCESS);
    unsigned maxclk, clk;
    assert_int_equal(N.nvmlDeviceGetMaxClockInfo(dev(0), NVML_CLOCK_SM, &maxclk), NVML_SUCCESS);
    assert_int_equal(maxclk, 2040);
    assert_int_equal(N.nvmlDeviceGetClockInfo(dev(0), NVML_CLOCK_SM, &clk), NVML_SUCCESS);
    assert_true(clk <= maxclk);
    nvmlEnableState_t cur, pend;
    assert_int_equal(N.nvmlDeviceGetEccMode(dev(0), &cur, &pend), NVML_SUCCESS);
    N.nvmlShutdown();
}

/* ---- thread safety ------------------------------------------------------------------------- */

/* arg: an int counting the full create/destroy rounds, so a churn in which every create failed
 * (and so raced nothing) fails the test instead of passing it. */
static void *mig_churn(void *arg)
{
    int *rounds = arg;
    nvmlDevice_t d;
    N.nvmlDeviceGetHandleByIndex_v2(6, &d);
    for (int i = 0; i < 100; i++) {
        nvmlGpuInstance_t gi;
        nvmlComputeInstance_t ci;
        if (N.nvmlDeviceCreateGpuInstance(d, 19, &gi) == NVML_SUCCESS) {
            if (N.nvmlGpuInstanceCreateComputeInstance(gi, 0, &ci) == NVML_SUCCESS &&
                N.nvmlComputeInstanceDestroy(ci) == NVML_SUCCESS)
                (*rounds)++;
            N.nvmlGpuInstanceDestroy(gi);
        }
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < 300; i++) {
        nvmlDevice_t d, m;
        char name[96];
        unsigned t;
        N.nvmlDeviceGetHandleByIndex_v2((unsigned)i % 8, &d);
        N.nvmlDeviceGetName(d, name, sizeof(name));
        N.nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t);
        if (N.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &m) == NVML_SUCCESS)
            N.nvmlDeviceGetUUID(m, name, sizeof(name));
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    use(fleet("dgx-a100-80gb-mig.yaml"), true);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    nvmlReturn_t act;
    assert_int_equal(N.nvmlDeviceSetMigMode(dev(6), NVML_DEVICE_MIG_ENABLE, &act), NVML_SUCCESS);
    pthread_t th[5];
    int rounds[2] = {0, 0};
    pthread_create(&th[0], NULL, mig_churn, &rounds[0]);
    pthread_create(&th[1], NULL, mig_churn, &rounds[1]);
    for (int i = 2; i < 5; i++)
        pthread_create(&th[i], NULL, reader, NULL);
    for (int i = 0; i < 5; i++)
        pthread_join(th[i], NULL);
    assert_true(rounds[0] > 0 && rounds[1] > 0);
    nvmlGpuInstance_t gis[8];
    unsigned n = 9;
    assert_int_equal(N.nvmlDeviceGetGpuInstances(dev(6), 19, gis, &n), NVML_SUCCESS);
    assert_int_equal(n, 0); /* every create was undone */
    N.nvmlShutdown();
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc >= 2 && strcmp(argv[1], "child-mig") == 0) {
        lib_path = getenv("TEST_SIM_LIB");
        return child_mig(argc - 1, argv + 1);
    }
    if (argc >= 2 && strcmp(argv[1], "child-init") == 0) {
        lib_path = getenv("TEST_SIM_LIB");
        return child_init();
    }
    if (argc >= 2 && strcmp(argv[1], "child-telemetry") == 0) {
        lib_path = getenv("TEST_SIM_LIB");
        return child_telemetry();
    }
    if (argc != 4) {
        fprintf(stderr, "usage: %s LIBNVIDIA_ML GPUOP FLEETS_DIR\n", argv[0]);
        return 2;
    }
    lib_path = argv[1];
    gpuop_sim_path = argv[2];
    fleets_dir = argv[3];
    setenv("TEST_SIM_LIB", lib_path, 1);
    snprintf(tmp_root, sizeof(tmp_root), "%s/gpuop-test-sim-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    if (load() < 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exports),
        cmocka_unit_test(test_basics_h100),
        cmocka_unit_test(test_c2c),
        cmocka_unit_test(test_topology_dgx1),
        cmocka_unit_test(test_mig_fit),
        cmocka_unit_test(test_mig_call_returns),
        cmocka_unit_test(test_mig_profiles_and_devices),
        cmocka_unit_test(test_mig_across_processes),
        cmocka_unit_test(test_xid_event),
        cmocka_unit_test(test_lost_gpu),
        cmocka_unit_test(test_faults_reset_reboot),
        cmocka_unit_test(test_bad_fleets),
        cmocka_unit_test(test_cli_errors),
        cmocka_unit_test(test_telemetry),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_state_overfull_lists),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    nftw(tmp_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    dlclose(lib);
    return r;
}
