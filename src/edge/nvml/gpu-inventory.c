/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_inventory: what NVML reports about the node, read into plain data. */
#include <limits.h>
#include <string.h>

#include "nvml-internal.h"

#define COMPONENT "nvml"
#define MIB       (1024ull * 1024ull)

/* ---- MIG profiles ------------------------------------------------------------------------- */

void nv_profile_name(const nvmlGpuInstanceProfileInfo_v2_t *info, char *buf, size_t n)
{
    char name[sizeof(info->name) + 1];
    memcpy(name, info->name, sizeof(info->name));
    name[sizeof(info->name)] = '\0';
    const char *s = name;
    if (str_has_prefix(s, "MIG "))
        s += 4;
    if (s[0]) {
        strlcpy_s(buf, s, n);
        return;
    }
    unsigned long long gb = (info->memorySizeMB + 1023) / 1024;
    snprintf(buf, n, "%ug.%llugb", info->sliceCount, gb);
}

static bool gi_profile_info(struct gpu_lib *lib, nvmlDevice_t dev, unsigned index,
                            nvmlGpuInstanceProfileInfo_v2_t *ret)
{
    nvmlGpuInstanceProfileInfo_v2_t v2 = {.version = nvmlGpuInstanceProfileInfo_v2};
    if (NV(lib, nvmlDeviceGetGpuInstanceProfileInfoV, dev, index, &v2) == NVML_SUCCESS) {
        *ret = v2;
        return true;
    }
    /* Older drivers: the v1 struct has every field but the name. */
    nvmlGpuInstanceProfileInfo_t v1 = {0};
    if (NV(lib, nvmlDeviceGetGpuInstanceProfileInfo, dev, index, &v1) != NVML_SUCCESS)
        return false;
    *ret = (nvmlGpuInstanceProfileInfo_v2_t){
        .version = nvmlGpuInstanceProfileInfo_v2,
        .id = v1.id,
        .isP2pSupported = v1.isP2pSupported,
        .sliceCount = v1.sliceCount,
        .instanceCount = v1.instanceCount,
        .multiprocessorCount = v1.multiprocessorCount,
        .copyEngineCount = v1.copyEngineCount,
        .decoderCount = v1.decoderCount,
        .encoderCount = v1.encoderCount,
        .jpegCount = v1.jpegCount,
        .ofaCount = v1.ofaCount,
        .memorySizeMB = v1.memorySizeMB,
    };
    return true;
}

void nv_gi_profiles_read(struct gpu_lib *lib, nvmlDevice_t dev,
                         struct nv_gi_profile ret[NVML_GPU_INSTANCE_PROFILE_COUNT])
{
    for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++) {
        ret[i] = (struct nv_gi_profile){.index = i};
        ret[i].ok = gi_profile_info(lib, dev, i, &ret[i].info);
    }
}

/* The profile a MIG device belongs to: by the GI's profile id when known, else by shape. */
static const struct nv_gi_profile *profile_match(const struct nv_gi_profile *p, bool have_id,
                                                 unsigned id, unsigned slices,
                                                 unsigned long long mem_mb)
{
    for (unsigned i = 0; have_id && i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++)
        if (p[i].ok && p[i].info.id == id)
            return &p[i];
    for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++)
        if (p[i].ok && p[i].info.sliceCount == slices && p[i].info.memorySizeMB == mem_mb)
            return &p[i];
    return NULL;
}

/* ---- one MIG device ----------------------------------------------------------------------- */

static void mig_placement(struct gpu_lib *lib, nvmlDevice_t parent, struct gpu_mig_device *m,
                          bool *ret_have_id)
{
    nvmlGpuInstance_t gi = NULL;
    nvmlGpuInstanceInfo_t info = {0};
    *ret_have_id = false;
    if (NV(lib, nvmlDeviceGetGpuInstanceById, parent, m->gi_id, &gi) != NVML_SUCCESS)
        return;
    if (NV(lib, nvmlGpuInstanceGetInfo, gi, &info) != NVML_SUCCESS)
        return;
    m->gi_profile_id = info.profileId;
    m->gi_placement_start = info.placement.start;
    m->gi_placement_size = info.placement.size;
    *ret_have_id = true;
}

static void mig_name(const struct nv_gi_profile *profiles, bool have_id, struct gpu_mig_device *m)
{
    const struct nv_gi_profile *p =
        profile_match(profiles, have_id, m->gi_profile_id, m->gi_slices, m->memory_mib);
    char gi[GPU_PROFILE_MAX];
    if (p) {
        nv_profile_name(&p->info, gi, sizeof(gi));
        if (!have_id)
            m->gi_profile_id = p->info.id;
    } else {
        snprintf(gi, sizeof(gi), "%ug.%llugb", m->gi_slices,
                 (unsigned long long)(m->memory_mib + 1023) / 1024);
    }
    char full[GPU_PROFILE_MAX + 16];
    if (m->ci_slices > 0 && m->ci_slices < m->gi_slices)
        snprintf(full, sizeof(full), "%uc.%s", m->ci_slices, gi);
    else
        strlcpy_s(full, gi, sizeof(full));
    strlcpy_s(m->profile, full, sizeof(m->profile));
}

/* Reads MIG device `index` of a GPU. 1: no device at that index; GPU_ERR_LOST: the GPU is lost. */
static int mig_read(struct gpu_lib *lib, nvmlDevice_t parent, unsigned index,
                    const struct nv_gi_profile *profiles, struct gpu_mig_device *m)
{
    nvmlDevice_t h = NULL;
    nvmlReturn_t r = NV(lib, nvmlDeviceGetMigDeviceHandleByIndex, parent, index, &h);
    if (r == NVML_ERROR_GPU_IS_LOST)
        return GPU_ERR_LOST;
    if (r != NVML_SUCCESS)
        return 1;
    *m = (struct gpu_mig_device){.index = index, .gi_id = UINT32_MAX, .ci_id = UINT32_MAX};
    if (NV(lib, nvmlDeviceGetUUID, h, m->uuid, sizeof(m->uuid)) != NVML_SUCCESS)
        m->uuid[0] = '\0';
    nv_terminate(m->uuid, sizeof(m->uuid));
    NV(lib, nvmlDeviceGetGpuInstanceId, h, &m->gi_id);
    NV(lib, nvmlDeviceGetComputeInstanceId, h, &m->ci_id);
    nvmlDeviceAttributes_t a = {0};
    if (NV(lib, nvmlDeviceGetAttributes_v2, h, &a) == NVML_SUCCESS) {
        m->multiprocessors = a.multiprocessorCount;
        m->copy_engines = a.sharedCopyEngineCount;
        m->decoders = a.sharedDecoderCount;
        m->encoders = a.sharedEncoderCount;
        m->jpegs = a.sharedJpegCount;
        m->ofas = a.sharedOfaCount;
        m->gi_slices = a.gpuInstanceSliceCount;
        m->ci_slices = a.computeInstanceSliceCount;
        m->memory_mib = a.memorySizeMB;
    }
    bool have_id = false;
    m->gi_profile_id = UINT32_MAX;
    mig_placement(lib, parent, m, &have_id);
    mig_name(profiles, have_id, m);
    return 0;
}

static int mig_devices_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_device *g)
{
    unsigned max = 0;
    nvmlReturn_t r = NV(lib, nvmlDeviceGetMaxMigDeviceCount, dev, &max);
    if (r == NVML_ERROR_GPU_IS_LOST)
        return GPU_ERR_LOST;
    if (r != NVML_SUCCESS || max == 0)
        return 0;
    if (max > 64)
        max = 64; /* no GPU has more than 8 slices; bounds a confused driver */
    _cleanup_free_ struct nv_gi_profile *profiles =
        xcalloc(NVML_GPU_INSTANCE_PROFILE_COUNT, sizeof(*profiles));
    nv_gi_profiles_read(lib, dev, profiles);
    g->mig = xcalloc(max, sizeof(*g->mig));
    for (unsigned i = 0; i < max; i++) {
        int k = mig_read(lib, dev, i, profiles, &g->mig[g->n_mig]);
        if (k == GPU_ERR_LOST)
            return k;
        if (k == 0)
            g->n_mig++;
    }
    return 0;
}

/* ---- one GPU ------------------------------------------------------------------------------ */

static void pci_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_device *g, nvmlReturn_t *r)
{
    nvmlPciInfo_t pci = {0};
    *r = NV(lib, nvmlDeviceGetPciInfo_v3, dev, &pci);
    if (*r != NVML_SUCCESS)
        return;
    char bus[sizeof(pci.busId) + 1];
    memcpy(bus, pci.busId, sizeof(pci.busId));
    bus[sizeof(pci.busId)] = '\0';
    strlcpy_s(g->bus_id, bus, sizeof(g->bus_id));
    g->pci_device_id = pci.pciDeviceId;
    g->pci_subsystem_id = pci.pciSubSystemId;
    struct err e = {0};
    if (g->bus_id[0] && gpu_sysfs_pci(g->bus_id, &g->numa_node, NULL, &e) < 0)
        log_debug(COMPONENT, "no NUMA node from sysfs", "gpu=%u reason=\"%s\"", g->index,
                  err_msg(&e));
    err_clear(&e);
    if (g->bus_id[0] && gpu_sysfs_pci(g->bus_id, NULL, &g->pci_class, &e) < 0)
        log_debug(COMPONENT, "no PCI class from sysfs", "gpu=%u reason=\"%s\"", g->index,
                  err_msg(&e));
}

static void memory_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_device *g,
                        nvmlReturn_t *r)
{
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    *r = NV(lib, nvmlDeviceGetMemoryInfo_v2, dev, &m2);
    if (*r == NVML_SUCCESS) {
        g->memory_total_bytes = m2.total;
        g->memory_reserved_bytes = m2.reserved;
        return;
    }
    if (*r == NVML_ERROR_GPU_IS_LOST)
        return;
    nvmlMemory_t m1 = {0};
    *r = NV(lib, nvmlDeviceGetMemoryInfo, dev, &m1);
    if (*r == NVML_SUCCESS)
        g->memory_total_bytes = m1.total;
}

/* Each step returns the NVML code of its last call, so a lost GPU stops the reading. */
static nvmlReturn_t ids_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_device *g)
{
    nvmlReturn_t r;
    if ((r = NV(lib, nvmlDeviceGetUUID, dev, g->uuid, sizeof(g->uuid))) != NVML_SUCCESS)
        g->uuid[0] = '\0';
    nv_terminate(g->uuid, sizeof(g->uuid));
    if (r == NVML_ERROR_GPU_IS_LOST)
        return r;
    if ((r = NV(lib, nvmlDeviceGetName, dev, g->name, sizeof(g->name))) != NVML_SUCCESS)
        g->name[0] = '\0';
    nv_terminate(g->name, sizeof(g->name));
    if (r == NVML_ERROR_GPU_IS_LOST)
        return r;
    if ((r = NV(lib, nvmlDeviceGetSerial, dev, g->serial, sizeof(g->serial))) != NVML_SUCCESS)
        g->serial[0] = '\0';
    nv_terminate(g->serial, sizeof(g->serial));
    if (r == NVML_ERROR_GPU_IS_LOST)
        return r;
    if ((r = NV(lib, nvmlDeviceGetVbiosVersion, dev, g->vbios, sizeof(g->vbios))) != NVML_SUCCESS)
        g->vbios[0] = '\0';
    nv_terminate(g->vbios, sizeof(g->vbios));
    if (r == NVML_ERROR_GPU_IS_LOST)
        return r;
    unsigned minor = 0;
    if ((r = NV(lib, nvmlDeviceGetMinorNumber, dev, &minor)) == NVML_SUCCESS)
        g->minor = minor;
    if (r == NVML_ERROR_GPU_IS_LOST)
        return r;
    pci_read(lib, dev, g, &r);
    if (r == NVML_ERROR_GPU_IS_LOST)
        return r;
    memory_read(lib, dev, g, &r);
    return r;
}

static nvmlReturn_t caps_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_device *g)
{
    nvmlReturn_t r;
    int major = 0, minor = 0;
    if ((r = NV(lib, nvmlDeviceGetCudaComputeCapability, dev, &major, &minor)) == NVML_SUCCESS) {
        g->cc_major = major;
        g->cc_minor = minor;
    }
    if (r == NVML_ERROR_GPU_IS_LOST)
        return r;
    nvmlDeviceArchitecture_t arch = NVML_DEVICE_ARCH_UNKNOWN;
    if ((r = NV(lib, nvmlDeviceGetArchitecture, dev, &arch)) == NVML_SUCCESS)
        g->arch = arch;
    if (r == NVML_ERROR_GPU_IS_LOST)
        return r;
    nvmlBrandType_t brand = NVML_BRAND_UNKNOWN;
    if ((r = NV(lib, nvmlDeviceGetBrand, dev, &brand)) == NVML_SUCCESS)
        g->brand = (unsigned)brand;
    if (r == NVML_ERROR_GPU_IS_LOST)
        return r;
    unsigned mw = 0;
    r = NV(lib, nvmlDeviceGetEnforcedPowerLimit, dev, &mw);
    if (r != NVML_SUCCESS && r != NVML_ERROR_GPU_IS_LOST)
        r = NV(lib, nvmlDeviceGetPowerManagementLimit, dev, &mw);
    if (r == NVML_SUCCESS)
        g->power_limit_mw = mw;
    if (r == NVML_ERROR_GPU_IS_LOST)
        return r;
    unsigned mhz = 0;
    if ((r = NV(lib, nvmlDeviceGetMaxClockInfo, dev, NVML_CLOCK_SM, &mhz)) == NVML_SUCCESS)
        g->max_sm_clock_mhz = mhz;
    if (r == NVML_ERROR_GPU_IS_LOST)
        return r;
    if ((r = NV(lib, nvmlDeviceGetMaxClockInfo, dev, NVML_CLOCK_MEM, &mhz)) == NVML_SUCCESS)
        g->max_mem_clock_mhz = mhz;
    return r;
}

static nvmlReturn_t mig_read_all(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_device *g)
{
    unsigned cur = 0, pend = 0;
    nvmlReturn_t r = NV(lib, nvmlDeviceGetMigMode, dev, &cur, &pend);
    if (r != NVML_SUCCESS)
        return r;
    g->mig_capable = true;
    g->mig_enabled = cur == NVML_DEVICE_MIG_ENABLE;
    g->mig_pending = pend == NVML_DEVICE_MIG_ENABLE;
    if (g->mig_enabled && mig_devices_read(lib, dev, g) == GPU_ERR_LOST)
        return NVML_ERROR_GPU_IS_LOST;
    return NVML_SUCCESS;
}

/* The C2C link and the addressing mode: newer calls, absent from older drivers
 * (NVML_ERROR_FUNCTION_NOT_FOUND) and not supported on GPUs without the feature; both leave -1. */
static nvmlReturn_t c2c_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_device *g)
{
    nvmlC2cModeInfo_v1_t c2c = {0};
    nvmlReturn_t r = NV(lib, nvmlDeviceGetC2cModeInfoV, dev, &c2c);
    if (r == NVML_SUCCESS)
        g->c2c = c2c.isC2cEnabled ? 1 : 0;
    if (r == NVML_ERROR_GPU_IS_LOST)
        return r;
    nvmlDeviceAddressingMode_v1_t mode = {.version = nvmlDeviceAddressingMode_v1};
    r = NV(lib, nvmlDeviceGetAddressingMode, dev, &mode);
    if (r == NVML_SUCCESS && mode.value <= INT_MAX)
        g->addressing_mode = (int)mode.value;
    return r;
}

const char *gpu_addressing_name(int mode)
{
    switch (mode) {
    case GPU_ADDRESSING_NONE:
        return "none";
    case GPU_ADDRESSING_HMM:
        return "hmm";
    case GPU_ADDRESSING_ATS:
        return "ats";
    default:
        return NULL;
    }
}

static void device_read(struct gpu_lib *lib, unsigned index, nvmlDevice_t dev, struct gpu_device *g)
{
    if (ids_read(lib, dev, g) == NVML_ERROR_GPU_IS_LOST ||
        caps_read(lib, dev, g) == NVML_ERROR_GPU_IS_LOST ||
        c2c_read(lib, dev, g) == NVML_ERROR_GPU_IS_LOST ||
        mig_read_all(lib, dev, g) == NVML_ERROR_GPU_IS_LOST) {
        g->lost = true;
        log_warn(COMPONENT, "GPU is lost", "gpu=%u uuid=%s", index, g->uuid[0] ? g->uuid : "-");
    }
}

/* ---- topology ----------------------------------------------------------------------------- */

static int gpu_by_bus(const struct gpu_inventory *inv, const char *bus)
{
    unsigned d, b, v, f, d2, b2, v2, f2;
    if (gpu_bus_id_parse(bus, &d, &b, &v, &f) < 0)
        return -1;
    for (size_t i = 0; i < inv->n_gpus; i++)
        if (gpu_bus_id_parse(inv->gpus[i].bus_id, &d2, &b2, &v2, &f2) == 0 && d == d2 && b == b2 &&
            v == v2 && f == f2)
            return (int)i;
    return -1;
}

/* Counts the active NVLinks of GPU a per peer GPU; returns links that end elsewhere (NVSwitch). */
static unsigned nvlinks_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_inventory *inv,
                             size_t a)
{
    unsigned other = 0;
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; link++) {
        nvmlEnableState_t on = NVML_FEATURE_DISABLED;
        nvmlReturn_t r = NV(lib, nvmlDeviceGetNvLinkState, dev, link, &on);
        if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND ||
            r == NVML_ERROR_GPU_IS_LOST)
            break;
        if (r != NVML_SUCCESS || on != NVML_FEATURE_ENABLED)
            continue;
        nvmlPciInfo_t pci = {0};
        if (NV(lib, nvmlDeviceGetNvLinkRemotePciInfo_v2, dev, link, &pci) != NVML_SUCCESS)
            continue;
        char bus[sizeof(pci.busId) + 1];
        memcpy(bus, pci.busId, sizeof(pci.busId));
        bus[sizeof(pci.busId)] = '\0';
        int b = gpu_by_bus(inv, bus);
        if (b >= 0 && (size_t)b != a)
            inv->nvlinks[a * inv->n_gpus + (size_t)b]++;
        else if (b < 0)
            other++;
    }
    return other;
}

/* GPUs whose links end at NVSwitches reach each other through the fabric (DGX/HGX): nvidia-smi
 * shows NV<links>; count the smaller link count when NVML confirms NVLink P2P between them. */
static void nvswitch_links(struct gpu_lib *lib, nvmlDevice_t *devs, const unsigned *sw,
                           struct gpu_inventory *inv)
{
    size_t n = inv->n_gpus;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            if (a == b || !sw[a] || !sw[b] || inv->nvlinks[a * n + b])
                continue;
            nvmlGpuP2PStatus_t st = NVML_P2P_STATUS_UNKNOWN;
            if (NV(lib, nvmlDeviceGetP2PStatus, devs[a], devs[b], NVML_P2P_CAPS_INDEX_NVLINK,
                   &st) != NVML_SUCCESS ||
                st != NVML_P2P_STATUS_OK)
                continue;
            inv->nvlinks[a * n + b] = sw[a] < sw[b] ? sw[a] : sw[b];
        }
}

static void topology_read(struct gpu_lib *lib, nvmlDevice_t *devs, struct gpu_inventory *inv)
{
    size_t n = inv->n_gpus;
    size_t cells = n > 0 ? n * n : 1;
    inv->topo_level = xcalloc(cells, sizeof(unsigned));
    inv->nvlinks = xcalloc(cells, sizeof(unsigned));
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            /* Unknown (lost GPU, unsupported call) reads as the farthest level. */
            unsigned level = a == b ? GPU_TOPO_INTERNAL : GPU_TOPO_SYSTEM;
            nvmlGpuTopologyLevel_t l;
            if (a != b && devs[a] && devs[b] && !inv->gpus[a].lost && !inv->gpus[b].lost &&
                NV(lib, nvmlDeviceGetTopologyCommonAncestor, devs[a], devs[b], &l) == NVML_SUCCESS)
                level = nv_topo_level(l);
            inv->topo_level[a * n + b] = level;
        }
    _cleanup_free_ unsigned *sw = xcalloc(n ? n : 1, sizeof(unsigned));
    for (size_t a = 0; a < n; a++)
        if (devs[a] && !inv->gpus[a].lost)
            sw[a] = nvlinks_read(lib, devs[a], inv, a);
    nvswitch_links(lib, devs, sw, inv);
}

/* ---- the inventory ------------------------------------------------------------------------ */

static void versions_read(struct gpu_lib *lib, struct gpu_inventory *inv)
{
    if (NV(lib, nvmlSystemGetDriverVersion, inv->driver_version, sizeof(inv->driver_version)) !=
        NVML_SUCCESS)
        inv->driver_version[0] = '\0';
    nv_terminate(inv->driver_version, sizeof(inv->driver_version));
    int v = 0;
    nvmlReturn_t r = NV(lib, nvmlSystemGetCudaDriverVersion_v2, &v);
    if (r != NVML_SUCCESS)
        r = NV(lib, nvmlSystemGetCudaDriverVersion, &v);
    inv->cuda_driver_version = r == NVML_SUCCESS ? v : 0;
}

int gpu_inventory_read(struct gpu_lib *lib, struct gpu_inventory **ret, struct err *e)
{
    unsigned count = 0;
    int rc = nv_device_count(lib, &count, e);
    if (rc < 0)
        return rc;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = xcalloc(1, sizeof(*inv));
    versions_read(lib, inv);
    inv->n_gpus = count;
    inv->gpus = xcalloc(count ? count : 1, sizeof(*inv->gpus));
    _cleanup_free_ nvmlDevice_t *devs = xcalloc(count ? count : 1, sizeof(*devs));
    for (unsigned i = 0; i < count; i++) {
        struct gpu_device *g = &inv->gpus[i];
        g->index = i;
        g->minor = i;
        g->numa_node = -1;
        g->c2c = -1;
        g->addressing_mode = -1;
        g->arch = NVML_DEVICE_ARCH_UNKNOWN;
        struct err he = {0};
        if (nv_handle(lib, i, &devs[i], &he) < 0) {
            /* A GPU NVML cannot hand out is as unusable as a lost one; the others still read. */
            g->lost = true;
            devs[i] = NULL;
            log_warn(COMPONENT, "GPU unreadable, reported as lost", "gpu=%u reason=\"%s\"", i,
                     err_msg(&he));
            continue;
        }
        device_read(lib, i, devs[i], g);
    }
    topology_read(lib, devs, inv);
    *ret = steal_ptr(&inv);
    return 0;
}

void gpu_inventory_free(struct gpu_inventory *inv)
{
    if (!inv)
        return;
    for (size_t i = 0; i < inv->n_gpus; i++)
        free(inv->gpus[i].mig);
    free(inv->gpus);
    free(inv->topo_level);
    free(inv->nvlinks);
    free(inv);
}

const struct gpu_device *gpu_inventory_find(const struct gpu_inventory *inv, const char *uuid,
                                            const struct gpu_mig_device **ret_mig)
{
    if (!inv || !uuid || !uuid[0])
        return NULL;
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *g = &inv->gpus[i];
        if (strcmp(g->uuid, uuid) == 0) {
            if (ret_mig)
                *ret_mig = NULL;
            return g;
        }
        for (size_t k = 0; k < g->n_mig; k++)
            if (strcmp(g->mig[k].uuid, uuid) == 0) {
                if (ret_mig)
                    *ret_mig = &g->mig[k];
                return g;
            }
    }
    return NULL;
}
