/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libnvidia-ml.so.1, simulated: the NVML entry points of nvml-abi.h (and the older unversioned
 * names real clients still call) served from a fleet file (GPUOP_SIM_FLEET) and a state shared
 * between processes (GPUOP_SIM_STATE). See sim/fleets/README.md.
 *
 * Handles are addresses inside static tables (a GPU, a GPU instance id, a compute instance id),
 * so they stay valid across state changes made by other processes; a handle whose instance no
 * longer exists answers NVML_ERROR_INVALID_ARGUMENT. One mutex serialises every call; the event
 * wait drops it while it sleeps.
 */
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "nvml-abi.h"
#include "simnvml.h"

/* Older and unversioned entry points (not in nvml-abi.h, which lists what gpuop calls). */
typedef struct nvmlEventData_v1_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
} nvmlEventData_v1_t;
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_v1_t *data, unsigned int timeoutms);
nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t computeInstance,
                                        nvmlComputeInstanceInfo_t *info);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements(nvmlDevice_t device, unsigned int profileId,
                                                        nvmlGpuInstancePlacement_t *placements,
                                                        unsigned int *count);

/* Every declared function must exist: a missing definition fails the link. */
#define SIM_FUNC_REF(f) (void *)f,
__attribute__((used)) static void *const sim_all_funcs[] = {NVML_FUNCS(SIM_FUNC_REF)};

struct nvmlDevice_st {
    unsigned gpu, gi, ci;
    bool mig;
};
struct nvmlGpuInstance_st {
    unsigned gpu, gi;
};
struct nvmlComputeInstance_st {
    unsigned gpu, gi, ci;
};
struct nvmlEventSet_st {
    uint64_t after; /* sequence number of the last event seen */
    unsigned long long mask[SIM_MAX_GPUS];
    int inotify_fd;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_refs;
static struct sim_fleet *g_fleet;
static struct sim_store *g_store;
static bool g_reported;
static char g_last_store_err[ERR_MSG_MAX];
/* GPUOP_SIM_ROOT: the node's root; the loaded kernel module's version, read again when its file
 * changes (a driver container reloads); NULL root: the fleet's driver, always loaded. */
static char *g_root;
static char g_driver_version[80];
static int g_cuda_version;
static struct stat g_module_seen;
/* The reference on the node's module while initialised (sim_module_get): as a real client's open
 * /dev/nvidia* keeps nvidia loaded until nvmlShutdown or its end. */
static int g_module_fd = -1;

static struct nvmlDevice_st g_dev[SIM_MAX_GPUS];
static struct nvmlDevice_st g_mig[SIM_MAX_GPUS][SIM_GI_IDS][SIM_CI_IDS];
static struct nvmlGpuInstance_st g_gi[SIM_MAX_GPUS][SIM_GI_IDS];
static struct nvmlComputeInstance_st g_ci[SIM_MAX_GPUS][SIM_GI_IDS][SIM_CI_IDS];

#define MAX_EVENT_SETS 256
static nvmlEventSet_t g_sets[MAX_EVENT_SETS];

static void gpm_release(void); /* GPM samples and counters, at the last nvmlShutdown */

static void unlockp(int *x)
{
    (void)x;
    pthread_mutex_unlock(&g_lock);
}
#define LOCK() _cleanup_(unlockp) int _lk UNUSED = (pthread_mutex_lock(&g_lock), 0)

static void report(const char *msg)
{
    fprintf(stderr, "libnvidia-ml.so.1 (gpuop simulator): %s\n", msg);
}

static void report_once(const char *msg)
{
    if (g_reported)
        return;
    g_reported = true;
    report(msg);
}

/* A state-store failure: the last good state stays; each new reason is printed once. */
static void report_store(const struct err *e)
{
    if (strcmp(g_last_store_err, err_msg(e)) == 0)
        return;
    snprintf(g_last_store_err, sizeof(g_last_store_err), "%s", err_msg(e));
    report(err_msg(e));
}

static bool in_table(const void *p, const void *base, size_t elem, size_t count, size_t *ret)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;
    if (!p || a < b || a >= b + elem * count || (a - b) % elem != 0)
        return false;
    *ret = (a - b) / elem;
    return true;
}

/* The node's kernel module (GPUOP_SIM_ROOT): NVML_SUCCESS while loaded, with the version it
 * reports; an unloaded module fails every call as a real client's would after the driver left. */
static nvmlReturn_t module_check(const char *root, bool first)
{
    _cleanup_free_ char *path = xasprintf("%s%s", root, SIM_DRIVER_VERSION_FILE);
    struct stat sb;
    if (stat(path, &sb) < 0)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    if (!first && sb.st_ino == g_module_seen.st_ino && sb.st_dev == g_module_seen.st_dev &&
        sb.st_size == g_module_seen.st_size && sb.st_mtim.tv_sec == g_module_seen.st_mtim.tv_sec &&
        sb.st_mtim.tv_nsec == g_module_seen.st_mtim.tv_nsec)
        return NVML_SUCCESS;
    char version[sizeof(g_driver_version)];
    struct err e = {0};
    int r = sim_driver_loaded(root, version, sizeof(version), &e);
    if (r < 0) {
        report_store(&e);
        return first ? NVML_ERROR_UNKNOWN : NVML_SUCCESS; /* the last good version stays */
    }
    if (r == 0)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    g_module_seen = sb;
    snprintf(g_driver_version, sizeof(g_driver_version), "%s", version);
    g_cuda_version = sim_cuda_version_for_driver(version, g_fleet->cuda_driver_version);
    return NVML_SUCCESS;
}

static nvmlReturn_t ready(void)
{
    if (g_refs == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (g_root) {
        nvmlReturn_t m = module_check(g_root, false);
        if (m != NVML_SUCCESS)
            return m;
    }
    struct err e = {0};
    if (sim_store_refresh(g_store, &e) < 0)
        report_store(&e);
    else
        g_last_store_err[0] = '\0';
    return NVML_SUCCESS;
}

static const struct sim_state *state(void)
{
    return sim_store_state(g_store);
}

/* What a device handle names. */
struct dev {
    unsigned gpu;
    const struct sim_gpu_spec *spec;
    const struct sim_gpu_state *st;
    bool mig;
    const struct sim_gi *gi;
    const struct sim_ci *ci;
    const struct sim_gi_profile *gip;
    struct sim_ci_profile cip;
};

enum { DEV_GPU = 0, DEV_MIG_OK = 1 };

static nvmlReturn_t dev_get(nvmlDevice_t h, int flags, struct dev *d)
{
    nvmlReturn_t r = ready();
    if (r != NVML_SUCCESS)
        return r;
    size_t i;
    memset(d, 0, sizeof(*d));
    if (in_table(h, g_dev, sizeof(g_dev[0]), SIM_MAX_GPUS, &i)) {
        d->gpu = (unsigned)i;
    } else if (in_table(h, g_mig, sizeof(g_mig[0][0][0]), SIM_MAX_GPUS * SIM_GI_IDS * SIM_CI_IDS,
                        &i)) {
        d->gpu = h->gpu;
        d->mig = true;
    } else {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (d->gpu >= g_fleet->n_gpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    d->spec = &g_fleet->gpus[d->gpu];
    d->st = &state()->gpus[d->gpu];
    if (d->st->lost)
        return NVML_ERROR_GPU_IS_LOST;
    if (d->mig) {
        if (!(flags & DEV_MIG_OK))
            return NVML_ERROR_NOT_SUPPORTED;
        d->gi = sim_gpu_find_gi_const(d->st, h->gi);
        if (!d->st->mig_mode || !d->gi)
            return NVML_ERROR_INVALID_ARGUMENT;
        for (unsigned k = 0; k < d->gi->n_ci; k++)
            if (d->gi->ci[k].id == h->ci)
                d->ci = &d->gi->ci[k];
        if (!d->ci)
            return NVML_ERROR_INVALID_ARGUMENT;
        d->gip = sim_mig_profile_by_id(d->spec->mig_table, d->gi->profile_id);
        if (!d->gip || !sim_mig_ci_profile(d->gip, d->ci->profile_index, &d->cip))
            return NVML_ERROR_INVALID_ARGUMENT;
    }
    return NVML_SUCCESS;
}

static nvmlReturn_t put_str(const char *s, char *buf, unsigned length)
{
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) >= length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

static struct sim_sample sample(const struct dev *d)
{
    struct sim_sample s;
    sim_telemetry(g_fleet, d->gpu, sim_now_ms(), &s);
    return s;
}

/* ---- init ------------------------------------------------------------------------------- */

static nvmlReturn_t do_init(void)
{
    LOCK();
    if (g_refs > 0) {
        g_refs++;
        return NVML_SUCCESS;
    }
    const char *path = env_get("GPUOP_SIM_FLEET");
    if (!path) {
        report_once("GPUOP_SIM_FLEET is not set: it names the fleet file the simulated driver "
                    "serves (see sim/fleets/README.md)");
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    struct err e = {0};
    struct sim_fleet *f = NULL;
    if (sim_fleet_load(path, &f, &e) < 0) {
        report_once(err_msg(&e));
        return e.code == -ENOENT ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_ERROR_UNKNOWN;
    }
    const char *root = env_get("GPUOP_SIM_ROOT");
    g_fleet = f; /* module_check falls back to the fleet's CUDA version */
    snprintf(g_driver_version, sizeof(g_driver_version), "%s", f->driver_version);
    g_cuda_version = f->cuda_driver_version;
    int module_fd = -1;
    if (root) {
        int held = sim_module_get(root, &module_fd, &e);
        nvmlReturn_t m = held < 0    ? NVML_ERROR_UNKNOWN
                         : held == 0 ? NVML_ERROR_DRIVER_NOT_LOADED
                                     : module_check(root, true);
        if (held < 0)
            report_once(err_msg(&e));
        if (m != NVML_SUCCESS) {
            if (module_fd >= 0)
                close(module_fd);
            g_fleet = NULL;
            sim_fleet_free(f);
            return m;
        }
    }
    struct sim_store *s = NULL;
    if (sim_store_open(f, env_get("GPUOP_SIM_STATE"), 0, &s, &e) < 0) {
        report_once(err_msg(&e));
        if (module_fd >= 0)
            close(module_fd);
        g_fleet = NULL;
        sim_fleet_free(f);
        return NVML_ERROR_UNKNOWN;
    }
    for (unsigned g = 0; g < SIM_MAX_GPUS; g++) {
        g_dev[g] = (struct nvmlDevice_st){.gpu = g, .gi = SIM_NO_ID, .ci = SIM_NO_ID};
        for (unsigned i = 0; i < SIM_GI_IDS; i++) {
            g_gi[g][i] = (struct nvmlGpuInstance_st){.gpu = g, .gi = i};
            for (unsigned c = 0; c < SIM_CI_IDS; c++) {
                g_mig[g][i][c] = (struct nvmlDevice_st){.gpu = g, .gi = i, .ci = c, .mig = true};
                g_ci[g][i][c] = (struct nvmlComputeInstance_st){.gpu = g, .gi = i, .ci = c};
            }
        }
    }
    g_fleet = f;
    g_store = s;
    g_root = root ? xstrdup(root) : NULL;
    g_module_fd = module_fd;
    g_refs = 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void)
{
    return do_init();
}

nvmlReturn_t nvmlInit(void)
{
    return do_init();
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return do_init();
}

nvmlReturn_t nvmlShutdown(void)
{
    LOCK();
    if (g_refs == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (--g_refs == 0) {
        /* sets the client did not free: a later nvmlEventSetFree of one finds it gone */
        for (size_t i = 0; i < MAX_EVENT_SETS; i++) {
            if (!g_sets[i])
                continue;
            if (g_sets[i]->inotify_fd >= 0)
                close(g_sets[i]->inotify_fd);
            free(g_sets[i]);
            g_sets[i] = NULL;
        }
        gpm_release();
        sim_store_free(g_store);
        sim_fleet_free(g_fleet);
        free(g_root);
        if (g_module_fd >= 0)
            close(g_module_fd); /* the module may go now */
        g_module_fd = -1;
        g_store = NULL;
        g_fleet = NULL;
        g_root = NULL;
    }
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
        return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
        return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
        return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
        return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
        return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
        return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM:
        return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE:
        return "In use by another client";
    case NVML_ERROR_MEMORY:
        return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
        return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
        return "The requested vgpu operation is not available on target device, because ECC is "
               "enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
        return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
        return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
        return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED:
        return "Deprecated";
    case NVML_ERROR_NOT_READY:
        return "Not Ready";
    case NVML_ERROR_GPU_NOT_FOUND:
        return "GPU not found";
    case NVML_ERROR_INVALID_STATE:
        return "Invalid state";
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED:
        return "Reset type not supported";
    default:
        return "Unknown Error";
    }
}

/* ---- system ----------------------------------------------------------------------------- */

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    LOCK();
    nvmlReturn_t r = ready();
    return r ? r : put_str(g_driver_version, version, length);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    LOCK();
    nvmlReturn_t r = ready();
    if (r)
        return r;
    char buf[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE + 16];
    snprintf(buf, sizeof(buf), "%d.%s", g_cuda_version / 1000, g_driver_version);
    return put_str(buf, version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    LOCK();
    nvmlReturn_t r = ready();
    if (r)
        return r;
    if (!cudaDriverVersion)
        return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = g_cuda_version;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

/* ---- device lookup ---------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    LOCK();
    nvmlReturn_t r = ready();
    if (r)
        return r;
    if (!deviceCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = (unsigned)g_fleet->n_gpus;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    return nvmlDeviceGetCount_v2(deviceCount);
}

/* Handles of a lost GPU are still handed out: every call on them then fails with
 * NVML_ERROR_GPU_IS_LOST, so callers can report which GPU is lost. */
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    LOCK();
    nvmlReturn_t r = ready();
    if (r)
        return r;
    if (!device || index >= g_fleet->n_gpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g_dev[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    LOCK();
    nvmlReturn_t r = ready();
    if (r)
        return r;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned g = 0; g < g_fleet->n_gpus; g++) {
        const struct sim_gpu_spec *spec = &g_fleet->gpus[g];
        if (strcmp(spec->uuid, uuid) == 0) {
            *device = &g_dev[g];
            return NVML_SUCCESS;
        }
        const struct sim_gpu_state *st = &state()->gpus[g];
        if (!str_has_prefix(uuid, "MIG-") || !st->mig_mode)
            continue;
        for (unsigned i = 0; i < st->n_gi; i++)
            for (unsigned c = 0; c < st->gi[i].n_ci; c++) {
                char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
                sim_mig_uuid(spec, st->gi[i].id, st->gi[i].ci[c].id, buf, sizeof(buf));
                if (strcmp(buf, uuid) == 0) {
                    *device = &g_mig[g][st->gi[i].id][st->gi[i].ci[c].id];
                    return NVML_SUCCESS;
                }
            }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    LOCK();
    nvmlReturn_t r = ready();
    if (r)
        return r;
    if (!pciBusId || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned dom, bus, dv, fn;
    int used = 0;
    if (sscanf(pciBusId, "%x:%x:%x.%x%n", &dom, &bus, &dv, &fn, &used) != 4 ||
        (size_t)used != strlen(pciBusId)) {
        dom = 0;
        if (sscanf(pciBusId, "%x:%x.%x%n", &bus, &dv, &fn, &used) != 3 ||
            (size_t)used != strlen(pciBusId))
            return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (unsigned g = 0; g < g_fleet->n_gpus; g++) {
        const struct sim_gpu_spec *s = &g_fleet->gpus[g];
        if (s->domain == dom && s->bus == bus && s->device == dv && fn == 0) {
            *device = &g_dev[g];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

/* ---- identity --------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!d.mig)
        return put_str(d.spec->model, name, length);
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 64];
    snprintf(buf, sizeof(buf), "%s MIG %s", d.spec->model, d.cip.name);
    return put_str(buf, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!d.mig)
        return put_str(d.spec->uuid, uuid, length);
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    sim_mig_uuid(d.spec, d.gi->id, d.ci->id, buf, sizeof(buf));
    return put_str(buf, uuid, length);
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    return r ? r : put_str(d.spec->serial, serial, length);
}

nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char *partNumber,
                                          unsigned int length)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!d.spec->board_part[0])
        return NVML_ERROR_NOT_SUPPORTED;
    return put_str(d.spec->board_part, partNumber, length);
}

nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    return r ? r : put_str(d.spec->vbios, version, length);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = d.gpu;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!minorNumber)
        return NVML_ERROR_INVALID_ARGUMENT;
    *minorNumber = d.gpu;
    return NVML_SUCCESS;
}

static void fill_pci(const struct sim_gpu_spec *s, nvmlPciInfo_t *pci)
{
    memset(pci, 0, sizeof(*pci));
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%s", s->bus_id_legacy);
    snprintf(pci->busId, sizeof(pci->busId), "%s", s->bus_id);
    pci->domain = s->domain;
    pci->bus = s->bus;
    pci->device = s->device;
    pci->pciDeviceId = s->pci_device_id;
    pci->pciSubSystemId = s->pci_subsystem_id;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    fill_pci(d.spec, pci);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

/* ---- memory and capabilities ------------------------------------------------------------ */

#define MIB 1048576ULL

static void mem_figures(const struct dev *d, uint64_t *total, uint64_t *reserved, uint64_t *used)
{
    struct sim_sample s = sample(d);
    if (d->mig) {
        *total = (uint64_t)d->gip->memory_mb * MIB;
        *reserved = 0;
        *used = (uint64_t)((double)s.mem_used_mib * d->gip->memory_mb / d->spec->memory_mib) * MIB;
    } else {
        *total = d->spec->memory_mib * MIB;
        *reserved = d->spec->reserved_mib * MIB;
        *used = s.mem_used_mib * MIB;
    }
    if (*used + *reserved > *total)
        *used = *total - *reserved;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t total, reserved, used;
    mem_figures(&d, &total, &reserved, &used);
    memory->total = total;
    memory->used = used + reserved; /* v1 counts the reserved memory as used */
    memory->free = total - used - reserved;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    uint64_t total, reserved, used;
    mem_figures(&d, &total, &reserved, &used);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total - used - reserved;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!bar1Memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t mib = 256;
    while (mib < d.spec->memory_mib)
        mib *= 2;
    bar1Memory->bar1Total = mib * MIB;
    bar1Memory->bar1Used = 2 * MIB;
    bar1Memory->bar1Free = bar1Memory->bar1Total - bar1Memory->bar1Used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = d.spec->cc_major;
    *minor = d.spec->cc_minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!arch)
        return NVML_ERROR_INVALID_ARGUMENT;
    *arch = d.spec->arch;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!type)
        return NVML_ERROR_INVALID_ARGUMENT;
    *type = (nvmlBrandType_t)d.spec->brand;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int *numCores)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!numCores)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned sms = d.mig ? d.cip.sms : d.spec->multiprocessors;
    if (!sms)
        return NVML_ERROR_NOT_SUPPORTED;
    *numCores = sms * sim_cores_per_sm(d.spec->arch);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!attributes)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(attributes, 0, sizeof(*attributes));
    if (d.mig) {
        attributes->multiprocessorCount = d.cip.sms;
        attributes->sharedCopyEngineCount = d.gip->ce;
        attributes->sharedDecoderCount = d.gip->dec;
        attributes->sharedEncoderCount = d.gip->enc;
        attributes->sharedJpegCount = d.gip->jpeg;
        attributes->sharedOfaCount = d.gip->ofa;
        attributes->gpuInstanceSliceCount = d.gip->slices;
        attributes->computeInstanceSliceCount = d.cip.slices;
        attributes->memorySizeMB = d.gip->memory_mb;
        return NVML_SUCCESS;
    }
    const struct sim_gi_profile *full =
        sim_mig_profile_by_index(d.spec->mig_table, NVML_GPU_INSTANCE_PROFILE_7_SLICE);
    attributes->multiprocessorCount = d.spec->multiprocessors;
    if (full) {
        attributes->sharedCopyEngineCount = full->ce;
        attributes->sharedDecoderCount = full->dec;
        attributes->sharedEncoderCount = full->enc;
        attributes->sharedJpegCount = full->jpeg;
        attributes->sharedOfaCount = full->ofa;
    }
    attributes->memorySizeMB = d.spec->memory_mib;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!mode)
        return NVML_ERROR_INVALID_ARGUMENT;
    *mode = NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetC2cModeInfoV(nvmlDevice_t device, nvmlC2cModeInfo_v1_t *c2cModeInfo)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!c2cModeInfo)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d.spec->has_c2c)
        return NVML_ERROR_NOT_SUPPORTED;
    c2cModeInfo->isC2cEnabled = d.spec->c2c ? 1 : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device, nvmlDeviceAddressingMode_v1_t *mode)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!mode)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mode->version != nvmlDeviceAddressingMode_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!d.spec->has_addressing_mode)
        return NVML_ERROR_NOT_SUPPORTED;
    mode->value = d.spec->addressing_mode;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!mode)
        return NVML_ERROR_INVALID_ARGUMENT;
    *mode = NVML_COMPUTEMODE_DEFAULT;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!pState)
        return NVML_ERROR_INVALID_ARGUMENT;
    *pState = NVML_PSTATE_0;
    return NVML_SUCCESS;
}

/* ---- telemetry -------------------------------------------------------------------------- */

/* The common head of the telemetry getters: a whole GPU, and a non-NULL output. */
#define TELEMETRY_BEGIN(device, out)               \
    LOCK();                                        \
    struct dev d;                                  \
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d); \
    if (r)                                         \
        return r;                                  \
    if (!(out))                                    \
        return NVML_ERROR_INVALID_ARGUMENT;        \
    struct sim_sample s = sample(&d);              \
    (void)s

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp)
{
    TELEMETRY_BEGIN(device, temp);
    if (sensorType != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    *temp = s.temp_c;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    TELEMETRY_BEGIN(device, power);
    *power = s.power_mw;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    TELEMETRY_BEGIN(device, limit);
    *limit = d.spec->power_limit_w * 1000;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
    return nvmlDeviceGetEnforcedPowerLimit(device, limit);
}

nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                      unsigned int *defaultLimit)
{
    return nvmlDeviceGetEnforcedPowerLimit(device, defaultLimit);
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
                                                          unsigned int *minLimit,
                                                          unsigned int *maxLimit)
{
    TELEMETRY_BEGIN(device, minLimit && maxLimit);
    *minLimit = d.spec->power_limit_w * 2 / 7 * 1000; /* H100: 200 of 700 W */
    *maxLimit = d.spec->power_limit_w * 1000;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy)
{
    TELEMETRY_BEGIN(device, energy);
    *energy = s.energy_mj;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    TELEMETRY_BEGIN(device, utilization);
    utilization->gpu = s.util_gpu;
    utilization->memory = s.util_mem;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs)
{
    TELEMETRY_BEGIN(device, utilization && samplingPeriodUs);
    *utilization = s.util_enc;
    *samplingPeriodUs = 167000;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs)
{
    TELEMETRY_BEGIN(device, utilization && samplingPeriodUs);
    *utilization = s.util_dec;
    *samplingPeriodUs = 167000;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
    TELEMETRY_BEGIN(device, clock);
    switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM:
        *clock = s.sm_clock_mhz;
        return NVML_SUCCESS;
    case NVML_CLOCK_MEM:
        *clock = s.mem_clock_mhz;
        return NVML_SUCCESS;
    case NVML_CLOCK_VIDEO:
        *clock = s.video_clock_mhz;
        return NVML_SUCCESS;
    default:
        return NVML_ERROR_INVALID_ARGUMENT;
    }
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                       unsigned int *clock)
{
    TELEMETRY_BEGIN(device, clock);
    switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM:
        *clock = d.spec->max_sm_clock_mhz;
        return NVML_SUCCESS;
    case NVML_CLOCK_MEM:
        *clock = d.spec->max_mem_clock_mhz;
        return NVML_SUCCESS;
    case NVML_CLOCK_VIDEO:
        *clock = d.spec->max_sm_clock_mhz * 1545 / 1980;
        return NVML_SUCCESS;
    default:
        return NVML_ERROR_INVALID_ARGUMENT;
    }
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *clocksEventReasons)
{
    TELEMETRY_BEGIN(device, clocksEventReasons);
    *clocksEventReasons = s.clock_event_reasons | d.st->throttle;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *clocksThrottleReasons)
{
    return nvmlDeviceGetCurrentClocksEventReasons(device, clocksThrottleReasons);
}

nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device, nvmlPerfPolicyType_t perfPolicyType,
                                          nvmlViolationTime_t *violTime)
{
    TELEMETRY_BEGIN(device, violTime);
    if ((unsigned)perfPolicyType >= NVML_PERF_POLICY_COUNT ||
        (perfPolicyType > NVML_PERF_POLICY_RELIABILITY &&
         perfPolicyType < NVML_PERF_POLICY_TOTAL_APP_CLOCKS))
        return NVML_ERROR_INVALID_ARGUMENT;
    violTime->referenceTime = sim_now_ms() * 1000ULL;
    violTime->violationTime = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
    TELEMETRY_BEGIN(device, value);
    *value = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                         unsigned int *value)
{
    TELEMETRY_BEGIN(device, value);
    if (counter == NVML_PCIE_UTIL_TX_BYTES)
        *value = s.pcie_tx_kbps;
    else if (counter == NVML_PCIE_UTIL_RX_BYTES)
        *value = s.pcie_rx_kbps;
    else
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen)
{
    TELEMETRY_BEGIN(device, currLinkGen);
    *currLinkGen = d.spec->pcie_gen;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth)
{
    TELEMETRY_BEGIN(device, currLinkWidth);
    *currLinkWidth = d.spec->pcie_width;
    return NVML_SUCCESS;
}

/* ---- ECC, retired pages, remapped rows -------------------------------------------------- */

static bool row_remapping(const struct sim_gpu_spec *s)
{
    return s->arch >= NVML_DEVICE_ARCH_AMPERE && s->arch != NVML_DEVICE_ARCH_UNKNOWN;
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                  nvmlEnableState_t *pending)
{
    TELEMETRY_BEGIN(device, current && pending);
    if (!d.spec->ecc)
        return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}

static nvmlReturn_t ecc_count(const struct dev *d, nvmlMemoryErrorType_t errorType,
                              nvmlEccCounterType_t counterType, unsigned long long *out)
{
    if (!d->spec->ecc)
        return NVML_ERROR_NOT_SUPPORTED;
    bool vol = counterType == NVML_VOLATILE_ECC;
    if ((unsigned)counterType >= NVML_ECC_COUNTER_TYPE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED)
        *out = vol ? d->st->ecc_sbe_vol : d->st->ecc_sbe_agg;
    else if (errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED)
        *out = vol ? d->st->ecc_dbe_vol : d->st->ecc_dbe_agg;
    else
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long *eccCounts)
{
    TELEMETRY_BEGIN(device, eccCounts);
    return ecc_count(&d, errorType, counterType, eccCounts);
}

nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                             nvmlEccCounterType_t counterType,
                                             nvmlMemoryLocation_t locationType,
                                             unsigned long long *count)
{
    TELEMETRY_BEGIN(device, count);
    if ((unsigned)locationType >= NVML_MEMORY_LOCATION_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long n = 0;
    r = ecc_count(&d, errorType, counterType, &n);
    if (r)
        return r;
    *count = locationType == NVML_MEMORY_LOCATION_DEVICE_MEMORY ? n : 0;
    return NVML_SUCCESS;
}

static nvmlReturn_t retired(const struct dev *d, nvmlPageRetirementCause_t cause,
                            unsigned int *pageCount, unsigned long long *addresses,
                            unsigned long long *timestamps)
{
    if (row_remapping(d->spec))
        return NVML_ERROR_NOT_SUPPORTED;
    if (!pageCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned need;
    if (cause == NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        need = d->st->retired_sbe;
    else if (cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        need = d->st->retired_dbe;
    else
        return NVML_ERROR_INVALID_ARGUMENT;
    if (*pageCount < need || (need && !addresses)) {
        *pageCount = need;
        return need ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    }
    for (unsigned i = 0; i < need; i++) {
        addresses[i] = (sim_hash64(d->gpu * 2 + cause, i) & 0x3ffffff000ULL);
        if (timestamps)
            timestamps[i] = 1767225600ULL + i;
    }
    *pageCount = need;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                       unsigned int *pageCount, unsigned long long *addresses)
{
    TELEMETRY_BEGIN(device, pageCount);
    return retired(&d, cause, pageCount, addresses, NULL);
}

nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                          unsigned int *pageCount, unsigned long long *addresses,
                                          unsigned long long *timestamps)
{
    TELEMETRY_BEGIN(device, pageCount);
    return retired(&d, cause, pageCount, addresses, timestamps);
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                    nvmlEnableState_t *isPending)
{
    TELEMETRY_BEGIN(device, isPending);
    if (row_remapping(d.spec))
        return NVML_ERROR_NOT_SUPPORTED;
    *isPending = d.st->retired_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                       unsigned int *uncRows, unsigned int *isPending,
                                       unsigned int *failureOccurred)
{
    TELEMETRY_BEGIN(device, corrRows && uncRows && isPending && failureOccurred);
    if (!row_remapping(d.spec))
        return NVML_ERROR_NOT_SUPPORTED;
    *corrRows = d.st->remapped_cor;
    *uncRows = d.st->remapped_unc;
    *isPending = d.st->remap_pending;
    *failureOccurred = d.st->remap_failure;
    return NVML_SUCCESS;
}

static void fv_ull(nvmlFieldValue_t *v, unsigned long long x)
{
    v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
    v->value.ullVal = x;
}

static void fv_uint(nvmlFieldValue_t *v, unsigned x)
{
    v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
    v->value.uiVal = x;
}

static nvmlReturn_t field_value(const struct dev *d, const struct sim_sample *s,
                                nvmlFieldValue_t *v)
{
    bool links = d->spec->n_links > 0;
    unsigned long long n = 0;
    nvmlReturn_t r;
    switch (v->fieldId) {
    case NVML_FI_DEV_ECC_CURRENT:
        fv_uint(v, d->spec->ecc);
        return NVML_SUCCESS;
    case NVML_FI_DEV_ECC_SBE_VOL_TOTAL:
    case NVML_FI_DEV_ECC_DBE_VOL_TOTAL:
    case NVML_FI_DEV_ECC_SBE_AGG_TOTAL:
    case NVML_FI_DEV_ECC_DBE_AGG_TOTAL:
        r = ecc_count(d,
                      v->fieldId == NVML_FI_DEV_ECC_SBE_VOL_TOTAL ||
                              v->fieldId == NVML_FI_DEV_ECC_SBE_AGG_TOTAL
                          ? NVML_MEMORY_ERROR_TYPE_CORRECTED
                          : NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                      v->fieldId <= NVML_FI_DEV_ECC_DBE_VOL_TOTAL ? NVML_VOLATILE_ECC
                                                                  : NVML_AGGREGATE_ECC,
                      &n);
        if (r)
            return r;
        fv_ull(v, n);
        return NVML_SUCCESS;
    case NVML_FI_DEV_RETIRED_SBE:
    case NVML_FI_DEV_RETIRED_DBE:
    case NVML_FI_DEV_RETIRED_PENDING:
        if (row_remapping(d->spec))
            return NVML_ERROR_NOT_SUPPORTED;
        fv_ull(v, v->fieldId == NVML_FI_DEV_RETIRED_SBE   ? d->st->retired_sbe
                  : v->fieldId == NVML_FI_DEV_RETIRED_DBE ? d->st->retired_dbe
                                                          : d->st->retired_pending);
        return NVML_SUCCESS;
    case NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL:
    case NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL:
    case NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL:
    case NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL:
        if (!links)
            return NVML_ERROR_NOT_SUPPORTED;
        fv_ull(v, v->fieldId == NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL ? d->st->nvlink_replay
                  : v->fieldId == NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL
                      ? d->st->nvlink_recovery
                      : 0);
        return NVML_SUCCESS;
    case NVML_FI_DEV_NVLINK_BANDWIDTH_C0_TOTAL:
        if (!links)
            return NVML_ERROR_NOT_SUPPORTED;
        fv_ull(v, s->nvlink_kib * d->spec->n_links);
        return NVML_SUCCESS;
    case NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON:
        if (!links)
            return NVML_ERROR_NOT_SUPPORTED;
        fv_uint(v, 25781);
        return NVML_SUCCESS;
    case NVML_FI_DEV_NVLINK_LINK_COUNT:
        fv_uint(v, d->spec->n_links);
        return NVML_SUCCESS;
    case NVML_FI_DEV_MEMORY_TEMP:
        fv_uint(v, s->mem_temp_c);
        return NVML_SUCCESS;
    case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
        fv_ull(v, s->energy_mj);
        return NVML_SUCCESS;
    case NVML_FI_DEV_PCIE_REPLAY_COUNTER:
        fv_ull(v, 0);
        return NVML_SUCCESS;
    case NVML_FI_DEV_REMAPPED_COR:
    case NVML_FI_DEV_REMAPPED_UNC:
    case NVML_FI_DEV_REMAPPED_PENDING:
    case NVML_FI_DEV_REMAPPED_FAILURE:
        if (!row_remapping(d->spec))
            return NVML_ERROR_NOT_SUPPORTED;
        fv_uint(v, v->fieldId == NVML_FI_DEV_REMAPPED_COR       ? d->st->remapped_cor
                   : v->fieldId == NVML_FI_DEV_REMAPPED_UNC     ? d->st->remapped_unc
                   : v->fieldId == NVML_FI_DEV_REMAPPED_PENDING ? d->st->remap_pending
                                                                : d->st->remap_failure);
        return NVML_SUCCESS;
    case NVML_FI_DEV_POWER_AVERAGE:
    case NVML_FI_DEV_POWER_INSTANT:
        fv_uint(v, s->power_mw);
        return NVML_SUCCESS;
    default:
        return NVML_ERROR_NOT_SUPPORTED;
    }
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t *values)
{
    TELEMETRY_BEGIN(device, values);
    if (valuesCount < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    long long now_us = (long long)sim_now_ms() * 1000;
    for (int i = 0; i < valuesCount; i++) {
        values[i].timestamp = now_us;
        values[i].latencyUsec = 0;
        values[i].nvmlReturn = field_value(&d, &s, &values[i]);
    }
    return NVML_SUCCESS;
}

/* ---- MIG -------------------------------------------------------------------------------- */

enum mig_op_kind { OP_SET_MODE, OP_GI_CREATE, OP_GI_DESTROY, OP_CI_CREATE, OP_CI_DESTROY };

struct mig_op {
    enum mig_op_kind kind;
    unsigned gpu, profile, start, gi, ci;
    bool enable;
    bool pending; /* OP_SET_MODE: the change waits for a GPU reset */
    unsigned ret_id;
    bool fault; /* an injected fault fired (the state is written with it spent) */
};

static int mig_apply(struct sim_update *u, struct sim_state *st, void *arg, struct err *e)
{
    (void)u;
    (void)e;
    struct mig_op *op = arg;
    const struct sim_gpu_spec *spec = &g_fleet->gpus[op->gpu];
    struct sim_gpu_state *g = &st->gpus[op->gpu];
    if (g->lost)
        return NVML_ERROR_GPU_IS_LOST;
    switch (op->kind) {
    case OP_SET_MODE:
        return sim_mig_set_mode(spec, g, op->enable, &op->pending);
    case OP_GI_CREATE:
        if (g->mig_fail_in > 0 && --g->mig_fail_in == 0) {
            op->fault = true;
            return NVML_SUCCESS; /* written: the fault is spent, nothing was created */
        }
        return sim_mig_gi_create(spec, g, op->profile, op->start, &op->ret_id);
    case OP_GI_DESTROY:
        return sim_mig_gi_destroy(g, op->gi);
    case OP_CI_CREATE:
        return sim_mig_ci_create(spec, g, op->gi, op->profile, &op->ret_id);
    case OP_CI_DESTROY:
        return sim_mig_ci_destroy(g, op->gi, op->ci);
    }
    return NVML_ERROR_UNKNOWN;
}

static nvmlReturn_t mig_run(struct mig_op *op)
{
    struct err e = {0};
    int r = sim_store_update(g_store, mig_apply, op, &e);
    if (r < 0) {
        report_store(&e);
        return NVML_ERROR_UNKNOWN;
    }
    return op->fault ? NVML_ERROR_UNKNOWN : (nvmlReturn_t)r;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!currentMode || !pendingMode)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d.spec->mig_capable)
        return NVML_ERROR_NOT_SUPPORTED;
    *currentMode = d.st->mig_mode ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    *pendingMode = d.st->mig_mode != d.st->mig_change_pending ? NVML_DEVICE_MIG_ENABLE
                                                              : NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                  nvmlReturn_t *activationStatus)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!activationStatus || (mode != NVML_DEVICE_MIG_ENABLE && mode != NVML_DEVICE_MIG_DISABLE))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d.spec->mig_capable)
        return NVML_ERROR_NOT_SUPPORTED;
    struct mig_op op = {
        .kind = OP_SET_MODE, .gpu = d.gpu, .enable = mode == NVML_DEVICE_MIG_ENABLE};
    r = mig_run(&op);
    if (r == NVML_SUCCESS)
        *activationStatus = op.pending ? NVML_ERROR_RESET_REQUIRED : NVML_SUCCESS;
    return r;
}

static nvmlReturn_t gi_profile(const struct dev *d, unsigned index,
                               const struct sim_gi_profile **ret)
{
    if (!d->spec->mig_capable || !d->spec->mig_table)
        return NVML_ERROR_NOT_SUPPORTED;
    if (index >= NVML_GPU_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    *ret = sim_mig_profile_by_index(d->spec->mig_table, index);
    return *ret ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info)
{
    LOCK();
    struct dev d;
    const struct sim_gi_profile *p;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((r = gi_profile(&d, profile, &p)))
        return r;
    *info = (nvmlGpuInstanceProfileInfo_t){.id = p->id,
                                           .isP2pSupported = 0,
                                           .sliceCount = p->slices,
                                           .instanceCount = p->max_count,
                                           .multiprocessorCount = p->sms,
                                           .copyEngineCount = p->ce,
                                           .decoderCount = p->dec,
                                           .encoderCount = p->enc,
                                           .jpegCount = p->jpeg,
                                           .ofaCount = p->ofa,
                                           .memorySizeMB = p->memory_mb};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info)
{
    LOCK();
    struct dev d;
    const struct sim_gi_profile *p;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != nvmlGpuInstanceProfileInfo_v2 &&
        info->version != nvmlGpuInstanceProfileInfo_v3)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if ((r = gi_profile(&d, profile, &p)))
        return r;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    snprintf(name, sizeof(name), "MIG %s", p->name);
    if (info->version == nvmlGpuInstanceProfileInfo_v2) {
        *info = (nvmlGpuInstanceProfileInfo_v2_t){.version = nvmlGpuInstanceProfileInfo_v2,
                                                  .id = p->id,
                                                  .isP2pSupported = 0,
                                                  .sliceCount = p->slices,
                                                  .instanceCount = p->max_count,
                                                  .multiprocessorCount = p->sms,
                                                  .copyEngineCount = p->ce,
                                                  .decoderCount = p->dec,
                                                  .encoderCount = p->enc,
                                                  .jpegCount = p->jpeg,
                                                  .ofaCount = p->ofa,
                                                  .memorySizeMB = p->memory_mb};
        memcpy(info->name, name, sizeof(name));
    } else {
        nvmlGpuInstanceProfileInfo_v3_t *v3 = (nvmlGpuInstanceProfileInfo_v3_t *)(void *)info;
        *v3 = (nvmlGpuInstanceProfileInfo_v3_t){.version = nvmlGpuInstanceProfileInfo_v3,
                                                .id = p->id,
                                                .sliceCount = p->slices,
                                                .instanceCount = p->max_count,
                                                .multiprocessorCount = p->sms,
                                                .copyEngineCount = p->ce,
                                                .decoderCount = p->dec,
                                                .encoderCount = p->enc,
                                                .jpegCount = p->jpeg,
                                                .ofaCount = p->ofa,
                                                .memorySizeMB = p->memory_mb,
                                                .capabilities = 0};
        memcpy(v3->name, name, sizeof(name));
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t *placements,
                                                           unsigned int *count)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d.spec->mig_capable || !d.spec->mig_table)
        return NVML_ERROR_NOT_SUPPORTED;
    const struct sim_gi_profile *p = sim_mig_profile_by_id(d.spec->mig_table, profileId);
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!placements) {
        *count = p->n_starts;
        return NVML_SUCCESS;
    }
    if (*count < p->n_starts) {
        *count = p->n_starts;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < p->n_starts; i++)
        placements[i] = (nvmlGpuInstancePlacement_t){.start = p->starts[i], .size = p->size};
    *count = p->n_starts;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements(nvmlDevice_t device, unsigned int profileId,
                                                        nvmlGpuInstancePlacement_t *placements,
                                                        unsigned int *count)
{
    return nvmlDeviceGetGpuInstancePossiblePlacements_v2(device, profileId, placements, count);
}

static nvmlReturn_t mig_ready(const struct dev *d)
{
    if (!d->spec->mig_capable || !d->spec->mig_table || !d->st->mig_mode)
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                       unsigned int *count)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((r = mig_ready(&d)))
        return r;
    if (!sim_mig_profile_by_id(d.spec->mig_table, profileId))
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = sim_mig_gi_remaining(d.spec, d.st, profileId);
    return NVML_SUCCESS;
}

static nvmlReturn_t gi_create(nvmlDevice_t device, unsigned profileId,
                              const nvmlGpuInstancePlacement_t *placement,
                              nvmlGpuInstance_t *gpuInstance)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!gpuInstance)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((r = mig_ready(&d)))
        return r;
    struct mig_op op = {
        .kind = OP_GI_CREATE, .gpu = d.gpu, .profile = profileId, .start = SIM_NO_ID};
    if (placement) {
        const struct sim_gi_profile *p = sim_mig_profile_by_id(d.spec->mig_table, profileId);
        if (!p || placement->size != p->size)
            return NVML_ERROR_INVALID_ARGUMENT;
        op.start = placement->start;
    }
    r = mig_run(&op);
    if (r == NVML_SUCCESS)
        *gpuInstance = &g_gi[d.gpu][op.ret_id];
    return r;
}

nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                         nvmlGpuInstance_t *gpuInstance)
{
    return gi_create(device, profileId, NULL, gpuInstance);
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t *placement,
                                                      nvmlGpuInstance_t *gpuInstance)
{
    if (!placement)
        return NVML_ERROR_INVALID_ARGUMENT;
    return gi_create(device, profileId, placement, gpuInstance);
}

/* `count` is output only, as in NVML: the buffer holds the profile's instanceCount. */
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t *gpuInstances, unsigned int *count)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!count || !gpuInstances)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((r = mig_ready(&d)))
        return r;
    const struct sim_gi_profile *p = sim_mig_profile_by_id(d.spec->mig_table, profileId);
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* The caller's array holds the profile's instanceCount (NVML's contract); a state file
     * listing more (damaged, edited) must not write past it. */
    unsigned n = 0;
    for (unsigned i = 0; i < d.st->n_gi && n < p->max_count; i++)
        if (d.st->gi[i].profile_id == profileId)
            gpuInstances[n++] = &g_gi[d.gpu][d.st->gi[i].id];
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *gpuInstance)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!gpuInstance)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((r = mig_ready(&d)))
        return r;
    if (!sim_gpu_find_gi_const(d.st, id))
        return NVML_ERROR_NOT_FOUND;
    *gpuInstance = &g_gi[d.gpu][id];
    return NVML_SUCCESS;
}

/* What a GPU-instance handle names. */
static nvmlReturn_t gi_get(nvmlGpuInstance_t h, struct dev *d, const struct sim_gi **gi,
                           const struct sim_gi_profile **p)
{
    size_t i;
    if (!in_table(h, g_gi, sizeof(g_gi[0][0]), SIM_MAX_GPUS * SIM_GI_IDS, &i))
        return g_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t r = dev_get(&g_dev[h->gpu], DEV_GPU, d);
    if (r)
        return r;
    *gi = sim_gpu_find_gi_const(d->st, h->gi);
    if (!d->st->mig_mode || !*gi)
        return NVML_ERROR_INVALID_ARGUMENT;
    *p = sim_mig_profile_by_id(d->spec->mig_table, (*gi)->profile_id);
    return *p ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info)
{
    LOCK();
    struct dev d;
    const struct sim_gi *gi;
    const struct sim_gi_profile *p;
    nvmlReturn_t r = gi_get(gpuInstance, &d, &gi, &p);
    if (r)
        return r;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    *info = (nvmlGpuInstanceInfo_t){.device = &g_dev[d.gpu],
                                    .id = gi->id,
                                    .profileId = gi->profile_id,
                                    .placement = {.start = gi->start, .size = gi->size}};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance)
{
    LOCK();
    struct dev d;
    const struct sim_gi *gi;
    const struct sim_gi_profile *p;
    nvmlReturn_t r = gi_get(gpuInstance, &d, &gi, &p);
    if (r)
        return r;
    struct mig_op op = {.kind = OP_GI_DESTROY, .gpu = d.gpu, .gi = gi->id};
    return mig_run(&op);
}

static nvmlReturn_t ci_profile(const struct sim_gi_profile *p, unsigned profile,
                               unsigned engProfile, struct sim_ci_profile *cp)
{
    if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
        engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
        return NVML_ERROR_INVALID_ARGUMENT;
    return sim_mig_ci_profile(p, profile, cp) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t *info)
{
    LOCK();
    struct dev d;
    const struct sim_gi *gi;
    const struct sim_gi_profile *p;
    struct sim_ci_profile cp;
    nvmlReturn_t r = gi_get(gpuInstance, &d, &gi, &p);
    if (r)
        return r;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((r = ci_profile(p, profile, engProfile, &cp)))
        return r;
    *info = (nvmlComputeInstanceProfileInfo_t){.id = cp.id,
                                               .sliceCount = cp.slices,
                                               .instanceCount = cp.max_count,
                                               .multiprocessorCount = cp.sms,
                                               .sharedCopyEngineCount = p->ce,
                                               .sharedDecoderCount = p->dec,
                                               .sharedEncoderCount = p->enc,
                                               .sharedJpegCount = p->jpeg,
                                               .sharedOfaCount = p->ofa};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,
    nvmlComputeInstanceProfileInfo_v2_t *info)
{
    LOCK();
    struct dev d;
    const struct sim_gi *gi;
    const struct sim_gi_profile *p;
    struct sim_ci_profile cp;
    nvmlReturn_t r = gi_get(gpuInstance, &d, &gi, &p);
    if (r)
        return r;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != nvmlComputeInstanceProfileInfo_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if ((r = ci_profile(p, profile, engProfile, &cp)))
        return r;
    *info = (nvmlComputeInstanceProfileInfo_v2_t){.version = nvmlComputeInstanceProfileInfo_v2,
                                                  .id = cp.id,
                                                  .sliceCount = cp.slices,
                                                  .instanceCount = cp.max_count,
                                                  .multiprocessorCount = cp.sms,
                                                  .sharedCopyEngineCount = p->ce,
                                                  .sharedDecoderCount = p->dec,
                                                  .sharedEncoderCount = p->enc,
                                                  .sharedJpegCount = p->jpeg,
                                                  .sharedOfaCount = p->ofa};
    snprintf(info->name, sizeof(info->name), "MIG %s", cp.name);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                unsigned int profileId,
                                                                unsigned int *count)
{
    LOCK();
    struct dev d;
    const struct sim_gi *gi;
    const struct sim_gi_profile *p;
    struct sim_ci_profile cp;
    nvmlReturn_t r = gi_get(gpuInstance, &d, &gi, &p);
    if (r)
        return r;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((r = ci_profile(p, profileId, 0, &cp)))
        return r;
    *count = sim_mig_ci_remaining(d.spec, d.st, gi->id, profileId);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                  unsigned int profileId,
                                                  nvmlComputeInstance_t *computeInstance)
{
    LOCK();
    struct dev d;
    const struct sim_gi *gi;
    const struct sim_gi_profile *p;
    nvmlReturn_t r = gi_get(gpuInstance, &d, &gi, &p);
    if (r)
        return r;
    if (!computeInstance)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct mig_op op = {.kind = OP_CI_CREATE, .gpu = d.gpu, .gi = gi->id, .profile = profileId};
    unsigned gi_id = gi->id;
    r = mig_run(&op);
    if (r == NVML_SUCCESS)
        *computeInstance = &g_ci[d.gpu][gi_id][op.ret_id];
    return r;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                unsigned int profileId,
                                                nvmlComputeInstance_t *computeInstances,
                                                unsigned int *count)
{
    LOCK();
    struct dev d;
    const struct sim_gi *gi;
    const struct sim_gi_profile *p;
    struct sim_ci_profile cp;
    nvmlReturn_t r = gi_get(gpuInstance, &d, &gi, &p);
    if (r)
        return r;
    if (!count || !computeInstances)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((r = ci_profile(p, profileId, 0, &cp)))
        return r;
    unsigned n = 0; /* at most the CI profile's instanceCount, the caller's array size */
    for (unsigned i = 0; i < gi->n_ci && n < cp.max_count; i++)
        if (gi->ci[i].profile_index == profileId)
            computeInstances[n++] = &g_ci[d.gpu][gi->id][gi->ci[i].id];
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                   nvmlComputeInstance_t *computeInstance)
{
    LOCK();
    struct dev d;
    const struct sim_gi *gi;
    const struct sim_gi_profile *p;
    nvmlReturn_t r = gi_get(gpuInstance, &d, &gi, &p);
    if (r)
        return r;
    if (!computeInstance)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < gi->n_ci; i++)
        if (gi->ci[i].id == id) {
            *computeInstance = &g_ci[d.gpu][gi->id][id];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

static nvmlReturn_t ci_get(nvmlComputeInstance_t h, struct dev *d, const struct sim_gi **gi,
                           const struct sim_ci **ci)
{
    size_t i;
    if (!in_table(h, g_ci, sizeof(g_ci[0][0][0]), SIM_MAX_GPUS * SIM_GI_IDS * SIM_CI_IDS, &i))
        return g_refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    const struct sim_gi_profile *p;
    nvmlReturn_t r = gi_get(&g_gi[h->gpu][h->gi], d, gi, &p);
    if (r)
        return r;
    for (unsigned k = 0; k < (*gi)->n_ci; k++)
        if ((*gi)->ci[k].id == h->ci) {
            *ci = &(*gi)->ci[k];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance)
{
    LOCK();
    struct dev d;
    const struct sim_gi *gi;
    const struct sim_ci *ci;
    nvmlReturn_t r = ci_get(computeInstance, &d, &gi, &ci);
    if (r)
        return r;
    struct mig_op op = {.kind = OP_CI_DESTROY, .gpu = d.gpu, .gi = gi->id, .ci = ci->id};
    return mig_run(&op);
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                           nvmlComputeInstanceInfo_t *info)
{
    LOCK();
    struct dev d;
    const struct sim_gi *gi;
    const struct sim_ci *ci;
    nvmlReturn_t r = ci_get(computeInstance, &d, &gi, &ci);
    if (r)
        return r;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    *info = (nvmlComputeInstanceInfo_t){.device = &g_dev[d.gpu],
                                        .gpuInstance = &g_gi[d.gpu][gi->id],
                                        .id = ci->id,
                                        .profileId = ci->profile_index,
                                        .placement = {.start = ci->start, .size = ci->size}};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t computeInstance,
                                        nvmlComputeInstanceInfo_t *info)
{
    return nvmlComputeInstanceGetInfo_v2(computeInstance, info);
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* the header: zero when MIG is not supported or not enabled (not an error) */
    *count = mig_ready(&d) == NVML_SUCCESS ? SIM_COMPUTE_SLICES : 0;
    return NVML_SUCCESS;
}

/* MIG devices (one per compute instance) in GPU-instance id, then compute-instance id order. */
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!migDevice)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((r = mig_ready(&d)))
        return r;
    unsigned n = 0;
    for (unsigned i = 0; i < d.st->n_gi; i++)
        for (unsigned c = 0; c < d.st->gi[i].n_ci; c++)
            if (n++ == index) {
                *migDevice = &g_mig[d.gpu][d.st->gi[i].id][d.st->gi[i].ci[c].id];
                return NVML_SUCCESS;
            }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!isMigDevice)
        return NVML_ERROR_INVALID_ARGUMENT;
    *isMigDevice = d.mig;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t *device)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(migDevice, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!device || !d.mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g_dev[d.gpu];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!id)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d.mig)
        return NVML_ERROR_NOT_SUPPORTED;
    *id = d.gi->id;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!id)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!d.mig)
        return NVML_ERROR_NOT_SUPPORTED;
    *id = d.ci->id;
    return NVML_SUCCESS;
}

/* ---- topology --------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo)
{
    LOCK();
    struct dev a, b;
    nvmlReturn_t r = dev_get(device1, DEV_MIG_OK, &a);
    if (r || (r = dev_get(device2, DEV_MIG_OK, &b)))
        return r;
    if (!pathInfo)
        return NVML_ERROR_INVALID_ARGUMENT;
    *pathInfo = (nvmlGpuTopologyLevel_t)g_fleet->pcie_level[a.gpu * g_fleet->n_gpus + b.gpu];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                    nvmlGpuP2PCapsIndex_t p2pIndex, nvmlGpuP2PStatus_t *p2pStatus)
{
    LOCK();
    struct dev a, b;
    nvmlReturn_t r = dev_get(device1, DEV_GPU, &a);
    if (r || (r = dev_get(device2, DEV_GPU, &b)))
        return r;
    if (!p2pStatus || (unsigned)p2pIndex >= NVML_P2P_CAPS_INDEX_UNKNOWN)
        return NVML_ERROR_INVALID_ARGUMENT;
    bool nvlink = sim_fleet_nvlinks(g_fleet, a.gpu, b.gpu) > 0;
    bool pcie = g_fleet->pcie_level[a.gpu * g_fleet->n_gpus + b.gpu] <= NVML_TOPOLOGY_HOSTBRIDGE;
    bool ok;
    switch (p2pIndex) {
    case NVML_P2P_CAPS_INDEX_NVLINK:
        ok = nvlink;
        break;
    case NVML_P2P_CAPS_INDEX_PCI:
        ok = pcie;
        break;
    case NVML_P2P_CAPS_INDEX_ATOMICS:
        ok = nvlink || a.gpu == b.gpu;
        break;
    default:
        ok = nvlink || pcie;
        break;
    }
    if (ok)
        *p2pStatus = NVML_P2P_STATUS_OK;
    else if (p2pIndex == NVML_P2P_CAPS_INDEX_NVLINK || p2pIndex == NVML_P2P_CAPS_INDEX_ATOMICS)
        *p2pStatus = NVML_P2P_STATUS_NOT_SUPPORTED;
    else
        *p2pStatus = NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!isActive || link >= NVML_NVLINK_MAX_LINKS)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (link >= d.spec->n_links)
        return NVML_ERROR_NOT_SUPPORTED;
    unsigned peer = d.spec->link_peer[link];
    *isActive = state()->gpus[peer].lost ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!pci || link >= NVML_NVLINK_MAX_LINKS)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (link >= d.spec->n_links)
        return NVML_ERROR_NOT_SUPPORTED;
    fill_pci(&g_fleet->gpus[d.spec->link_peer[link]], pci);
    return NVML_SUCCESS;
}

/* ---- events ----------------------------------------------------------------------------- */

static unsigned long long supported_events(const struct sim_gpu_spec *s)
{
    unsigned long long t = nvmlEventTypeXidCriticalError | nvmlEventTypePState | nvmlEventTypeClock;
    if (s->ecc)
        t |= nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
    return t;
}

static bool set_valid(nvmlEventSet_t set, size_t *ret_slot)
{
    for (size_t i = 0; set && i < MAX_EVENT_SETS; i++)
        if (g_sets[i] == set) {
            if (ret_slot)
                *ret_slot = i;
            return true;
        }
    return false;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    LOCK();
    nvmlReturn_t r = ready();
    if (r)
        return r;
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    size_t slot = MAX_EVENT_SETS;
    for (size_t i = 0; i < MAX_EVENT_SETS && slot == MAX_EVENT_SETS; i++)
        if (!g_sets[i])
            slot = i;
    if (slot == MAX_EVENT_SETS)
        return NVML_ERROR_MEMORY;
    nvmlEventSet_t s = calloc(1, sizeof(*s));
    if (!s)
        return NVML_ERROR_MEMORY;
    s->after = sim_store_last_seq(g_store);
    s->inotify_fd = -1;
    const char *dir = sim_store_dir(g_store);
    if (dir) {
        s->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (s->inotify_fd >= 0 &&
            inotify_add_watch(s->inotify_fd, dir, IN_MODIFY | IN_CREATE | IN_MOVED_TO) < 0) {
            close(s->inotify_fd);
            s->inotify_fd = -1; /* falls back to short sleeps */
        }
    }
    g_sets[slot] = s;
    *set = s;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    LOCK();
    size_t slot;
    if (!g_refs)
        return NVML_ERROR_UNINITIALIZED;
    if (!set_valid(set, &slot))
        return NVML_ERROR_INVALID_ARGUMENT;
    g_sets[slot] = NULL;
    if (set->inotify_fd >= 0)
        close(set->inotify_fd);
    free(set);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!set_valid(set, NULL))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (eventTypes & ~supported_events(d.spec))
        return NVML_ERROR_NOT_SUPPORTED;
    set->mask[d.gpu] |= eventTypes;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!eventTypes)
        return NVML_ERROR_INVALID_ARGUMENT;
    *eventTypes = supported_events(d.spec);
    return NVML_SUCCESS;
}

/* Under the lock: the next event of the set, if any. 1 found, 0 none, <0 error code. */
static nvmlReturn_t next_event(nvmlEventSet_t set, nvmlEventData_t *data, bool *found)
{
    struct sim_event evs[64];
    size_t n = 0;
    struct err e = {0};
    *found = false;
    do {
        if (sim_store_events(g_store, set->after, evs, ARRAY_SIZE(evs), &n, &e) < 0) {
            report_store(&e);
            return NVML_ERROR_UNKNOWN;
        }
        for (size_t i = 0; i < n; i++) {
            set->after = evs[i].seq;
            if (evs[i].gpu >= g_fleet->n_gpus || !(set->mask[evs[i].gpu] & evs[i].type))
                continue;
            *data = (nvmlEventData_t){.device = &g_dev[evs[i].gpu],
                                      .eventType = evs[i].type,
                                      .eventData = evs[i].data,
                                      .gpuInstanceId = evs[i].gi_id,
                                      .computeInstanceId = evs[i].ci_id};
            *found = true;
            return NVML_SUCCESS;
        }
    } while (n == ARRAY_SIZE(evs));
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    uint64_t deadline = deadline_after(timeoutms);
    for (;;) {
        int fd = -1;
        {
            LOCK();
            nvmlReturn_t r = ready();
            if (r)
                return r;
            if (!data || !set_valid(set, NULL))
                return NVML_ERROR_INVALID_ARGUMENT;
            if (set->inotify_fd >= 0) {
                /* drained here, under the lock, while the set is known to be alive */
                char buf[4096];
                while (read(set->inotify_fd, buf, sizeof(buf)) > 0) {
                }
            }
            bool found;
            if ((r = next_event(set, data, &found)) || found)
                return r;
            fd = set->inotify_fd;
        }
        uint64_t left = deadline_left_ms(deadline);
        if (left == 0)
            return NVML_ERROR_TIMEOUT;
        /* inotify wakes us at once; the short cap keeps a missed notification harmless */
        int wait_ms = (int)(left < 50 ? left : 50);
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        poll(fd >= 0 ? &pfd : NULL, fd >= 0 ? 1 : 0, wait_ms);
    }
}

nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_v1_t *data, unsigned int timeoutms)
{
    if (!data)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlEventData_t full;
    nvmlReturn_t r = nvmlEventSetWait_v2(set, &full, timeoutms);
    if (r == NVML_SUCCESS)
        *data = (nvmlEventData_v1_t){
            .device = full.device, .eventType = full.eventType, .eventData = full.eventData};
    return r;
}

/* ---- processes -------------------------------------------------------------------------- */

/* The live processes registered on the device (a GPU: all of its processes, MIG devices
 * included; a MIG device: those on it), with NVML's sizing contract: too small a buffer gives
 * NVML_ERROR_INSUFFICIENT_SIZE and the count needed. */
static nvmlReturn_t processes(nvmlDevice_t device, unsigned int *infoCount,
                              nvmlProcessInfo_v2_t *v2, nvmlProcessInfo_v1_t *v1)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!infoCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct sim_proc all[SIM_MAX_PROCS];
    size_t n_all = sim_procs_live(state(), d.gpu, all, ARRAY_SIZE(all));
    unsigned n = 0;
    for (size_t i = 0; i < n_all; i++) {
        const struct sim_proc *p = &all[i];
        if (d.mig && (p->gi_id != d.gi->id || p->ci_id != d.ci->id))
            continue;
        if (n < *infoCount && (v2 || v1)) {
            unsigned long long bytes = (unsigned long long)p->used_mib << 20;
            if (v2)
                v2[n] = (nvmlProcessInfo_v2_t){.pid = p->pid,
                                               .usedGpuMemory = bytes,
                                               .gpuInstanceId = p->gi_id,
                                               .computeInstanceId = p->ci_id};
            else
                v1[n] = (nvmlProcessInfo_v1_t){.pid = p->pid, .usedGpuMemory = bytes};
        }
        n++;
    }
    bool fits = n <= *infoCount && (n == 0 || v2 || v1);
    *infoCount = n;
    return fits ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    return processes(device, infoCount, infos, NULL);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_v2_t *infos)
{
    return processes(device, infoCount, infos, NULL);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos)
{
    return processes(device, infoCount, NULL, infos);
}

/* ---- GPU Performance Monitoring --------------------------------------------------------- */

/*
 * Counters live in this process, one set per target (a GPU, a GPU instance, a compute instance):
 * a sample advances its target's counters by the activity in effect now (sim-gpm.c, from the
 * processes of the shared state) over the time since the target's previous sample, then copies
 * them. So the metrics between two samples average what was running at each sample in between,
 * and the simulated clock (GPUOP_SIM_CLOCK) makes them exact. A sample remembers its target and
 * that target's identity (a MIG instance's profile and placement): nvmlGpmMetricsGet refuses
 * samples of two targets, a pair whose instance was destroyed and made anew in between (its
 * counters restarted), a pair not in time order, and samples never taken, with
 * NVML_ERROR_INVALID_ARGUMENT (NVML documents no code for these; this is the simulator's).
 */
struct nvmlGpmSample_st {
    bool taken;
    unsigned gpu, gi, ci; /* gi, ci SIM_NO_ID: the whole GPU / the whole GPU instance */
    uint64_t ident, seq, t_ms;
    struct sim_gpm_counters c;
};

struct gpm_acc {
    unsigned gpu, gi, ci;
    uint64_t ident, at_ms;
    struct sim_gpm_counters c;
};

#define MAX_GPM_SAMPLES 4096
/* every GPU, GPU instance and compute instance there can be */
#define MAX_GPM_TARGETS (SIM_MAX_GPUS * (1 + SIM_GI_IDS * (1 + SIM_CI_IDS)))
static nvmlGpmSample_t g_samples[MAX_GPM_SAMPLES];
static struct gpm_acc *g_acc; /* grown as targets are sampled */
static size_t g_n_acc, g_cap_acc;
static uint64_t g_gpm_seq;

static void gpm_release(void)
{
    for (size_t i = 0; i < MAX_GPM_SAMPLES; i++) {
        free(g_samples[i]);
        g_samples[i] = NULL;
    }
    free(g_acc);
    g_acc = NULL;
    g_n_acc = g_cap_acc = 0;
}

static bool sample_valid(nvmlGpmSample_t s, size_t *ret_slot)
{
    for (size_t i = 0; s && i < MAX_GPM_SAMPLES; i++)
        if (g_samples[i] == s) {
            if (ret_slot)
                *ret_slot = i;
            return true;
        }
    return false;
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    if (!gpmSupport)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!sim_gpm_supported(d.spec))
        return NVML_ERROR_NOT_SUPPORTED;
    gpmSupport->isSupportedDevice = 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample)
{
    LOCK();
    if (!g_refs)
        return NVML_ERROR_UNINITIALIZED;
    if (!gpmSample)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < MAX_GPM_SAMPLES; i++) {
        if (g_samples[i])
            continue;
        nvmlGpmSample_t s = calloc(1, sizeof(*s));
        if (!s)
            return NVML_ERROR_MEMORY;
        g_samples[i] = s;
        *gpmSample = s;
        return NVML_SUCCESS;
    }
    return NVML_ERROR_MEMORY;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample)
{
    LOCK();
    size_t slot;
    if (!g_refs)
        return NVML_ERROR_UNINITIALIZED;
    if (!sample_valid(gpmSample, &slot))
        return NVML_ERROR_INVALID_ARGUMENT;
    free(gpmSample);
    g_samples[slot] = NULL;
    return NVML_SUCCESS;
}

/* This process's counters of a target; NULL when the table is full. */
static struct gpm_acc *acc_get(unsigned gpu, unsigned gi, unsigned ci, uint64_t now,
                               const struct sim_gpm_rates *rates)
{
    for (size_t i = 0; i < g_n_acc; i++) {
        struct gpm_acc *a = &g_acc[i];
        if (a->gpu != gpu || a->gi != gi || a->ci != ci)
            continue;
        if (a->ident != rates->ident) /* another instance in the same place: counters restart */
            *a = (struct gpm_acc){
                .gpu = gpu, .gi = gi, .ci = ci, .ident = rates->ident, .at_ms = now};
        return a;
    }
    if (g_n_acc == g_cap_acc) {
        size_t cap = g_cap_acc ? 2 * g_cap_acc : 16;
        if (cap > MAX_GPM_TARGETS)
            cap = MAX_GPM_TARGETS;
        if (cap == g_n_acc)
            return NULL;
        struct gpm_acc *grown = realloc(g_acc, cap * sizeof(*g_acc));
        if (!grown)
            return NULL;
        g_acc = grown;
        g_cap_acc = cap;
    }
    struct gpm_acc *a = &g_acc[g_n_acc++];
    *a = (struct gpm_acc){.gpu = gpu, .gi = gi, .ci = ci, .ident = rates->ident, .at_ms = now};
    return a;
}

static nvmlReturn_t gpm_take(const struct dev *d, unsigned gi, unsigned ci, nvmlGpmSample_t s)
{
    if (!sample_valid(s, NULL))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!sim_gpm_supported(d->spec))
        return NVML_ERROR_NOT_SUPPORTED;
    struct sim_proc procs[SIM_MAX_PROCS];
    size_t n = sim_procs_live(state(), d->gpu, procs, ARRAY_SIZE(procs));
    if (n > ARRAY_SIZE(procs))
        n = ARRAY_SIZE(procs);
    struct sim_gpm_rates rates;
    nvmlReturn_t r = sim_gpm_rates(d->spec, d->st, procs, n, gi, ci, &rates);
    if (r)
        return r;
    uint64_t now = sim_now_ms();
    struct gpm_acc *a = acc_get(d->gpu, gi, ci, now, &rates);
    if (!a)
        return NVML_ERROR_MEMORY;
    if (now > a->at_ms)
        sim_gpm_advance(&a->c, &rates, now - a->at_ms);
    else
        sim_gpm_advance(&a->c, &rates, 0); /* what the target counts, no time */
    a->at_ms = now;
    *s = (struct nvmlGpmSample_st){.taken = true,
                                   .gpu = d->gpu,
                                   .gi = gi,
                                   .ci = ci,
                                   .ident = rates.ident,
                                   .seq = ++g_gpm_seq,
                                   .t_ms = now,
                                   .c = a->c};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_MIG_OK, &d);
    if (r)
        return r;
    return gpm_take(&d, d.mig ? d.gi->id : SIM_NO_ID, d.mig ? d.ci->id : SIM_NO_ID, gpmSample);
}

nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                 nvmlGpmSample_t gpmSample)
{
    LOCK();
    struct dev d;
    nvmlReturn_t r = dev_get(device, DEV_GPU, &d);
    if (r)
        return r;
    if (!sample_valid(gpmSample, NULL))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!sim_gpm_supported(d.spec) || !d.spec->mig_capable)
        return NVML_ERROR_NOT_SUPPORTED;
    if (gpuInstanceId >= SIM_GI_IDS)
        return NVML_ERROR_NOT_FOUND;
    return gpm_take(&d, gpuInstanceId, SIM_NO_ID, gpmSample);
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet)
{
    LOCK();
    nvmlReturn_t r = ready();
    if (r)
        return r;
    if (!metricsGet)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (metricsGet->numMetrics > NVML_GPM_METRIC_MAX)
        return NVML_ERROR_INVALID_ARGUMENT;
    const struct nvmlGpmSample_st *a = metricsGet->sample1, *b = metricsGet->sample2;
    if (!sample_valid(metricsGet->sample1, NULL) || !sample_valid(metricsGet->sample2, NULL) ||
        !a->taken || !b->taken)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (a->gpu != b->gpu || a->gi != b->gi || a->ci != b->ci || a->ident != b->ident)
        return NVML_ERROR_INVALID_ARGUMENT; /* two devices, or an instance made anew */
    if (b->seq <= a->seq || b->t_ms <= a->t_ms)
        return NVML_ERROR_INVALID_ARGUMENT; /* swapped, the same sample, or the same instant */
    for (unsigned i = 0; i < metricsGet->numMetrics; i++) {
        nvmlGpmMetric_t *m = &metricsGet->metrics[i];
        double v = 0;
        m->nvmlReturn = sim_gpm_metric(m->metricId, &a->c, &b->c, &v);
        m->value = m->nvmlReturn == NVML_SUCCESS ? v : 0;
        m->metricInfo = (nvmlGpmMetricMetricInfo_t){0}; /* no names: NVML allows NULL */
    }
    return NVML_SUCCESS;
}
