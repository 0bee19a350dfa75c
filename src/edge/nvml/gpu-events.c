/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_events: XID / ECC events of every GPU through one NVML event set. */
#include <string.h>

#include "nvml-internal.h"

#define COMPONENT "nvml"

struct gpu_events {
    struct gpu_lib *lib;
    nvmlEventSet_t set;
    size_t n;
    nvmlDevice_t *devs; /* registered GPUs, their NVML index and uuid alongside */
    unsigned *index;
    char (*uuid)[GPU_UUID_MAX];
};

void gpu_events_free(struct gpu_events *ev)
{
    if (!ev)
        return;
    if (ev->set)
        NV(ev->lib, nvmlEventSetFree, ev->set);
    free(ev->devs);
    free(ev->index);
    free(ev->uuid);
    free(ev);
}

/* Registers GPU i for mask & its supported types; 1 when skipped (logged), 0 when registered. */
static int register_gpu(struct gpu_events *ev, unsigned i, uint64_t mask)
{
    struct gpu_lib *lib = ev->lib;
    nvmlDevice_t dev = NULL;
    struct err he = {0};
    if (nv_handle(lib, i, &dev, &he) < 0) {
        log_warn(COMPONENT, "no events from GPU", "gpu=%u reason=\"%s\"", i, err_msg(&he));
        return 1;
    }
    unsigned long long supported = 0;
    nvmlReturn_t r = NV(lib, nvmlDeviceGetSupportedEventTypes, dev, &supported);
    unsigned long long types = r == NVML_SUCCESS ? (supported & nv_event_mask(mask)) : 0;
    if (types == 0) {
        log_info(COMPONENT, "GPU supports none of the requested events", "gpu=%u reason=\"%s\"", i,
                 r == NVML_SUCCESS ? "unsupported types" : gpu_nvml_string(lib, r));
        return 1;
    }
    r = NV(lib, nvmlDeviceRegisterEvents, dev, types, ev->set);
    if (r != NVML_SUCCESS) {
        /* Not supported, lost, or no permission in this container: the other GPUs still count. */
        log_warn(COMPONENT, "no events from GPU", "gpu=%u reason=\"nvmlDeviceRegisterEvents: %s\"",
                 i, gpu_nvml_string(lib, r));
        return 1;
    }
    size_t k = ev->n++;
    ev->devs[k] = dev;
    ev->index[k] = i;
    if (NV(lib, nvmlDeviceGetUUID, dev, ev->uuid[k], GPU_UUID_MAX) != NVML_SUCCESS)
        ev->uuid[k][0] = '\0';
    nv_terminate(ev->uuid[k], GPU_UUID_MAX);
    return 0;
}

int gpu_events_open(struct gpu_lib *lib, uint64_t mask, struct gpu_events **ret, struct err *e)
{
    unsigned count = 0;
    int rc = nv_device_count(lib, &count, e);
    if (rc < 0)
        return rc;
    _cleanup_(gpu_events_freep) struct gpu_events *ev = xcalloc(1, sizeof(*ev));
    ev->lib = lib;
    nvmlReturn_t r = NV(lib, nvmlEventSetCreate, &ev->set);
    if (r != NVML_SUCCESS) {
        ev->set = NULL;
        return nv_err(lib, r, e, "nvmlEventSetCreate");
    }
    size_t cap = count ? count : 1;
    ev->devs = xcalloc(cap, sizeof(*ev->devs));
    ev->index = xcalloc(cap, sizeof(*ev->index));
    ev->uuid = xcalloc(cap, sizeof(*ev->uuid));
    for (unsigned i = 0; i < count; i++)
        register_gpu(ev, i, mask);
    *ret = steal_ptr(&ev);
    return 0;
}

/* Which registered GPU an event came from; MIG events name their parent GPU's handle. */
static void event_gpu(struct gpu_events *ev, nvmlDevice_t dev, struct gpu_event *out)
{
    for (size_t k = 0; k < ev->n; k++)
        if (ev->devs[k] == dev) {
            out->gpu_index = ev->index[k];
            strlcpy_s(out->uuid, ev->uuid[k], sizeof(out->uuid));
            return;
        }
    unsigned idx = UINT32_MAX;
    if (dev && NV(ev->lib, nvmlDeviceGetIndex, dev, &idx) == NVML_SUCCESS)
        out->gpu_index = idx;
    if (!dev || NV(ev->lib, nvmlDeviceGetUUID, dev, out->uuid, sizeof(out->uuid)) != NVML_SUCCESS)
        out->uuid[0] = '\0';
    nv_terminate(out->uuid, sizeof(out->uuid));
}

int gpu_events_wait(struct gpu_events *ev, unsigned timeout_ms, struct gpu_event *ret,
                    struct err *e)
{
    nvmlEventData_t d = {0};
    nvmlReturn_t r = NV(ev->lib, nvmlEventSetWait_v2, ev->set, &d, timeout_ms);
    if (r == NVML_ERROR_TIMEOUT)
        return -ETIMEDOUT;
    if (r != NVML_SUCCESS)
        return nv_err(ev->lib, r, e, "nvmlEventSetWait_v2");
    struct gpu_event out = {
        .gpu_index = UINT32_MAX,
        .type = nv_event_kind(d.eventType),
        .data = d.eventData,
        .gi_id = d.gpuInstanceId,
        .ci_id = d.computeInstanceId,
    };
    event_gpu(ev, d.device, &out);
    *ret = out;
    return 0;
}
