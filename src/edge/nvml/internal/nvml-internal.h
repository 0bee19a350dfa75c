/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml-internal: the loaded NVML function table and the helpers the gpu_* files share.
 * Only src/edge/nvml includes this.
 */
#ifndef GPUOP_NVML_INTERNAL_H
#define GPUOP_NVML_INTERNAL_H

#include "gpu.h"
#include "nvml-abi.h"

/* Every NVML entry point, by its own name; NULL when the library lacks the symbol. */
struct nvml_table {
#define NVML_TABLE_ENTRY(name) __typeof__(&name) name;
    NVML_FUNCS(NVML_TABLE_ENTRY)
#undef NVML_TABLE_ENTRY
};

struct gpu_lib {
    void *dl;
    char *path;
    struct nvml_table t;
};

/* Calls NVML's `name` through the table; a missing symbol reads NVML_ERROR_FUNCTION_NOT_FOUND. */
#define NV(lib, name, ...) \
    ((lib)->t.name ? (lib)->t.name(__VA_ARGS__) : NVML_ERROR_FUNCTION_NOT_FOUND)

/* NVML promises a NUL-terminated string on success; a driver that fills the whole buffer must
 * not make later reads run past the field. Call after every successful string query. */
static inline void nv_terminate(char *buf, size_t n)
{
    if (n)
        buf[n - 1] = '\0';
}

/* Fills e with "<what>: <NVML's reason>" and returns the mapped code. */
int nv_err(const struct gpu_lib *lib, nvmlReturn_t r, struct err *e, const char *fmt, ...)
    GPUOP_PRINTF(4, 5);

/* The number of GPUs NVML sees; a count over 1024 is refused as implausible (-ERANGE). */
int nv_device_count(struct gpu_lib *lib, unsigned *ret, struct err *e);
/* The handle of GPU `index`; the error names the call and the GPU. */
int nv_handle(struct gpu_lib *lib, unsigned index, nvmlDevice_t *ret, struct err *e);

/* GPU-instance profile table of one GPU, by NVML profile index. */
struct nv_gi_profile {
    bool ok;
    unsigned index;
    nvmlGpuInstanceProfileInfo_v2_t info; /* name "" when the driver gives none */
};
void nv_gi_profiles_read(struct gpu_lib *lib, nvmlDevice_t dev,
                         struct nv_gi_profile ret[NVML_GPU_INSTANCE_PROFILE_COUNT]);
/* The canonical name of a profile: NVML's name without "MIG ", else "<slices>g.<GiB>gb". */
void nv_profile_name(const nvmlGpuInstanceProfileInfo_v2_t *info, char *buf, size_t n);

/* ---- gpu.h's vocabulary from NVML's (gpu-abi.c) ------------------------------------------ */

/* NVML topology level -> enum gpu_topo_level; a value NVML adds later reads as GPU_TOPO_SYSTEM. */
unsigned nv_topo_level(nvmlGpuTopologyLevel_t l);
/* GPU_EVENT_* mask -> nvmlEventType* mask, and one NVML event type -> GPU_EVENT_* (0 unknown). */
unsigned long long nv_event_mask(uint64_t gpu_mask);
uint64_t nv_event_kind(unsigned long long nvml_type);
/* nvmlClocksEventReason* bits -> GPU_CLOCK_EVENT_* bits (bits gpu.h does not name dropped). */
uint64_t nv_clock_events(unsigned long long nvml_reasons);

/* ---- GPU Performance Monitoring (gpu-gpm.c): the pure parts --------------------------------- */

/* nvmlGpmQueryDeviceSupport's answer r (s filled when r is NVML_SUCCESS): 1 supported; 0 where
 * the GPU or the library does not support GPM (isSupportedDevice 0, NOT_SUPPORTED, a missing
 * symbol, a version the library does not know); GPU_ERR_LOST; another negative code. */
int nv_gpm_supported(nvmlReturn_t r, const nvmlGpmSupport_t *s);
/* Whether samples taken at prev_ms and cur_ms make a pair: 0; -EAGAIN when cur is not after prev;
 * -ESTALE when prev is more than max_age_ms (0: no limit) before cur. */
int nv_gpm_pair(uint64_t prev_ms, uint64_t cur_ms, uint64_t max_age_ms);
/* Fills a request for every gpu_prof_field's metric between s1 and s2. */
void nv_gpm_request(nvmlGpmMetricsGet_t *mg, nvmlGpmSample_t s1, nvmlGpmSample_t s2);
/* nvmlGpmMetricsGet's metrics (n of them) as DCGM's values: percentages to ratios (above 100
 * reads 1, a rounding hair below 0 reads 0), MiB/s to bytes per second; a metric that failed, or
 * whose value is not finite or is negative, leaves its field invalid; ids gpuop does not ask for
 * are ignored. */
void nv_gpm_convert(const nvmlGpmMetric_t *m, size_t n, struct gpu_prof *ret);

#endif
