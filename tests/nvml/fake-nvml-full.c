/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test-only libnvidia-ml that answers the way a real driver does where the simulator may not:
 * MIG profile names with NVML's "MIG " prefix, GetGpuInstanceById refused to unprivileged
 * callers (FAKE_NVML_UNPRIVILEGED=1), NVLinks that end at an NVSwitch rather than a GPU, and a
 * GPU that is lost (FAKE_NVML_LOST=<index>), and a driver that misbehaves (FAKE_NVML_HOSTILE=1):
 * strings that fill the caller's buffer without a terminating NUL, a field value of 1e30 as a
 * double.
 *
 * Three "NVIDIA H100 80GB HBM3":
 *   GPU0-GPU1: links 0..3 direct; links 4..17 of every GPU go to an NVSwitch at 0000:05:00.0.
 *   PCIe: 0-1 NODE, others SYS.
 *   GPU0: MIG on, GI 1 (3g.40gb, id 9, placement 0+4) with a 3-slice CI, GI 2 (3g.40gb,
 *         placement 4+4) with a 1-slice CI. GPU1: MIG off, enable pending. GPU2: no MIG.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml-abi.h"

#define EXPORT __attribute__((visibility("default")))
#define NGPU   3

struct nvmlDevice_st {
    unsigned index;
    int mig; /* -1: a full GPU; else the MIG device index on GPU0 */
};
struct nvmlGpuInstance_st {
    unsigned id;
};
static struct nvmlDevice_st gpus[NGPU] = {{0, -1}, {1, -1}, {2, -1}};
static struct nvmlDevice_st migs[2] = {{0, 0}, {0, 1}};
static struct nvmlGpuInstance_st gis[2] = {{1}, {2}};
static const char *const bus[NGPU] = {"00000000:18:00.0", "00000000:2A:00.0", "00000000:BA:00.0"};

static nvmlReturn_t dev_ok(nvmlDevice_t d)
{
    if (!d)
        return NVML_ERROR_INVALID_ARGUMENT;
    const char *lost = getenv("FAKE_NVML_LOST");
    if (lost && (unsigned)atoi(lost) == d->index)
        return NVML_ERROR_GPU_IS_LOST;
    return NVML_SUCCESS;
}

static nvmlReturn_t put(const char *s, char *buf, unsigned len)
{
    if (getenv("FAKE_NVML_HOSTILE") && len > 0) {
        memset(buf, 'Z', len); /* "success", and not a NUL in sight */
        return NVML_SUCCESS;
    }
    if (strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlShutdown(void)
{
    return NVML_SUCCESS;
}
EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
    return r == NVML_ERROR_GPU_IS_LOST ? "GPU is lost (fake)" : "fake error";
}
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int n)
{
    return put("570.86.15", v, n);
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    *v = 12080;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    *n = NGPU;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (i >= NGPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    *d = &gpus[i];
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *s, unsigned int n)
{
    nvmlReturn_t r = dev_ok(d);
    return r ? r
             : put(d->mig >= 0 ? "NVIDIA H100 80GB HBM3 MIG 3g.40gb" : "NVIDIA H100 80GB HBM3", s,
                   n);
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *s, unsigned int n)
{
    nvmlReturn_t r = dev_ok(d);
    if (r)
        return r;
    char u[96];
    if (d->mig >= 0)
        snprintf(u, sizeof(u), "MIG-11111111-2222-3333-4444-55555555550%d", d->mig);
    else
        snprintf(u, sizeof(u), "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeee%u", d->index);
    return put(u, s, n);
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p)
{
    nvmlReturn_t r = dev_ok(d);
    if (r)
        return r;
    memset(p, 0, sizeof(*p));
    snprintf(p->busId, sizeof(p->busId), "%s", bus[d->index]);
    p->pciDeviceId = 0x233010DE;
    p->pciSubSystemId = 0x16C110DE;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
    nvmlReturn_t r = dev_ok(d);
    if (r)
        return r;
    if (m->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    m->total = 81559ull << 20;
    m->reserved = 450ull << 20;
    m->used = 1ull << 20;
    m->free = m->total - m->reserved - m->used;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t d, nvmlDeviceArchitecture_t *a)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r)
        *a = NVML_DEVICE_ARCH_HOPPER;
    return r;
}
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pend)
{
    nvmlReturn_t r = dev_ok(d);
    if (r)
        return r;
    if (d->index == 2)
        return NVML_ERROR_NOT_SUPPORTED;
    *cur = d->index == 0;
    *pend = 1;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *n)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r)
        *n = d->index == 0 ? 7 : 0;
    return r;
}
EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int i,
                                                        nvmlDevice_t *m)
{
    nvmlReturn_t r = dev_ok(d);
    if (r)
        return r;
    if (d->index != 0 || i >= 7)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (i != 0 && i != 3) /* sparse, as after destroys */
        return NVML_ERROR_NOT_FOUND;
    *m = &migs[i == 0 ? 0 : 1];
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int *id)
{
    if (d->mig < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *id = gis[d->mig].id;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned int *id)
{
    if (d->mig < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    *id = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t d, nvmlDeviceAttributes_t *a)
{
    if (d->mig < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *a = (nvmlDeviceAttributes_t){
        .multiprocessorCount = d->mig == 0 ? 60 : 16,
        .sharedCopyEngineCount = 3,
        .sharedDecoderCount = 3,
        .gpuInstanceSliceCount = 3,
        .computeInstanceSliceCount = d->mig == 0 ? 3 : 1,
        .memorySizeMB = 40448,
    };
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t d, unsigned int profile,
                                                         nvmlGpuInstanceProfileInfo_v2_t *info)
{
    static const struct {
        unsigned index, id, slices, count;
        unsigned long long mem;
        const char *name;
    } t[] = {
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, 1, 7, 9984, "MIG 1g.10gb"},
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, 1, 1, 9984, "MIG 1g.10gb+me"},
        {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, 3, 2, 40448, "MIG 3g.40gb"},
        {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, 1, 81152, "MIG 7g.80gb"},
    };
    if (d->index != 0 || d->mig >= 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (info->version != nvmlGpuInstanceProfileInfo_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (t[i].index == profile) {
            info->id = t[i].id;
            info->sliceCount = t[i].slices;
            info->instanceCount = t[i].count;
            info->memorySizeMB = t[i].mem;
            snprintf(info->name, sizeof(info->name), "%s", t[i].name);
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_SUPPORTED;
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t d, unsigned int id,
                                                 nvmlGpuInstance_t *gi)
{
    if (getenv("FAKE_NVML_UNPRIVILEGED"))
        return NVML_ERROR_NO_PERMISSION;
    if (d->index != 0 || id < 1 || id > 2)
        return NVML_ERROR_NOT_FOUND;
    *gi = &gis[id - 1];
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t *info)
{
    *info = (nvmlGpuInstanceInfo_t){.device = &gpus[0], .id = gi->id, .profileId = 9};
    info->placement.start = gi->id == 1 ? 0 : 4;
    info->placement.size = 4;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                        nvmlGpuTopologyLevel_t *l)
{
    nvmlReturn_t r = dev_ok(a);
    if (r || (r = dev_ok(b)))
        return r;
    *l = a->index + b->index == 1 ? NVML_TOPOLOGY_NODE : NVML_TOPOLOGY_SYSTEM;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link,
                                             nvmlEnableState_t *on)
{
    nvmlReturn_t r = dev_ok(d);
    if (r)
        return r;
    if (link >= 18)
        return NVML_ERROR_INVALID_ARGUMENT;
    *on = link < 4 && d->index == 2 ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link,
                                                        nvmlPciInfo_t *p)
{
    nvmlReturn_t r = dev_ok(d);
    if (r)
        return r;
    memset(p, 0, sizeof(*p));
    const char *remote = "00000000:05:00.0"; /* the NVSwitch */
    if (link < 4 && d->index < 2)
        remote = bus[1 - d->index];
    snprintf(p->busId, sizeof(p->busId), "%s", remote);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, nvmlGpuP2PCapsIndex_t i,
                                           nvmlGpuP2PStatus_t *st)
{
    nvmlReturn_t r = dev_ok(a);
    if (r || (r = dev_ok(b)))
        return r;
    *st = i == NVML_P2P_CAPS_INDEX_NVLINK ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r)
        *mw = 71500;
    return r;
}
/* Only the deprecated name, as on an older driver: the loader must fall back to it. */
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d,
                                                              unsigned long long *reasons)
{
    nvmlReturn_t r = dev_ok(d);
    if (!r)
        *reasons = nvmlClocksEventReasonGpuIdle;
    return r;
}
EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *v)
{
    nvmlReturn_t r = dev_ok(d);
    if (r)
        return r;
    for (int i = 0; i < n; i++) {
        v[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        if (v[i].fieldId == NVML_FI_DEV_MEMORY_TEMP) {
            v[i].nvmlReturn = NVML_SUCCESS;
            v[i].valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
            v[i].value.uiVal = 40;
        } else if (v[i].fieldId == NVML_FI_DEV_NVLINK_BANDWIDTH_C0_TOTAL) {
            v[i].nvmlReturn = NVML_SUCCESS;
            v[i].valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
            v[i].value.ullVal = 123456789012ull;
            if (getenv("FAKE_NVML_HOSTILE")) {
                v[i].valueType = NVML_VALUE_TYPE_DOUBLE;
                v[i].value.dVal = 1e30;
            }
        }
    }
    return NVML_SUCCESS;
}

/* GPM as a driver of the R520 branch (NVML 11.8) has it: no nvmlGpmMigSampleGet yet. GPU2
 * answers the support query with success and isSupportedDevice 0; the metrics are fixed. */
struct nvmlGpmSample_st {
    unsigned gpu;
    unsigned seq; /* 0: never taken */
};
static unsigned gpm_seq;

EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t *s)
{
    nvmlReturn_t r = dev_ok(d);
    if (r)
        return r;
    if (!s)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (s->version != NVML_GPM_SUPPORT_VERSION)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    s->isSupportedDevice = d->index != 2;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *s)
{
    *s = calloc(1, sizeof(**s));
    return *s ? NVML_SUCCESS : NVML_ERROR_MEMORY;
}
EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t s)
{
    free(s);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t d, nvmlGpmSample_t s)
{
    nvmlReturn_t r = dev_ok(d);
    if (r)
        return r;
    if (d->index == 2)
        return NVML_ERROR_NOT_SUPPORTED;
    s->gpu = d->index;
    s->seq = ++gpm_seq;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *m)
{
    if (m->version != NVML_GPM_METRICS_GET_VERSION)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!m->sample1->seq || m->sample1->seq >= m->sample2->seq ||
        m->sample1->gpu != m->sample2->gpu)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < m->numMetrics; i++) {
        nvmlGpmMetric_t *x = &m->metrics[i];
        x->nvmlReturn = NVML_SUCCESS;
        switch (x->metricId) {
        case NVML_GPM_METRIC_GRAPHICS_UTIL:
            x->value = 50.0;
            break;
        case NVML_GPM_METRIC_SM_UTIL:
            x->value = 42.5;
            break;
        case NVML_GPM_METRIC_DRAM_BW_UTIL:
            x->value = 12.5;
            break;
        case NVML_GPM_METRIC_PCIE_TX_PER_SEC:
            x->value = 3.0;
            break;
        case NVML_GPM_METRIC_PCIE_RX_PER_SEC:
            x->value = 7.5;
            break;
        default:
            x->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            x->value = 0;
        }
    }
    return NVML_SUCCESS;
}
