/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU Performance Monitoring: the profiling fields DCGM serves (DCGM_FI_PROF_*) from NVML's GPM
 * metrics. A sampler owns two NVML samples per target (the GPU, each MIG GPU instance) and uses
 * them in turn; the metrics are computed by NVML between the two, then converted to DCGM's units
 * (nvml-abi.h's GPM notes say where each fact comes from).
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "nvml-internal.h"

#define MIB_D (1024.0 * 1024.0)

/* Each field's GPM metric, and its unit there (DCGM's names: gpu-caps.c). */
static const struct {
    unsigned metric;
    bool mib_per_s; /* false: a percentage */
} fields[GPU_PROF_COUNT] = {
    [GPU_PROF_GR_ENGINE_ACTIVE] = {NVML_GPM_METRIC_GRAPHICS_UTIL, false},
    [GPU_PROF_SM_ACTIVE] = {NVML_GPM_METRIC_SM_UTIL, false},
    [GPU_PROF_SM_OCCUPANCY] = {NVML_GPM_METRIC_SM_OCCUPANCY, false},
    [GPU_PROF_PIPE_TENSOR_ACTIVE] = {NVML_GPM_METRIC_ANY_TENSOR_UTIL, false},
    [GPU_PROF_DRAM_ACTIVE] = {NVML_GPM_METRIC_DRAM_BW_UTIL, false},
    [GPU_PROF_PIPE_FP64_ACTIVE] = {NVML_GPM_METRIC_FP64_UTIL, false},
    [GPU_PROF_PIPE_FP32_ACTIVE] = {NVML_GPM_METRIC_FP32_UTIL, false},
    [GPU_PROF_PIPE_FP16_ACTIVE] = {NVML_GPM_METRIC_FP16_UTIL, false},
    [GPU_PROF_PCIE_TX_BYTES] = {NVML_GPM_METRIC_PCIE_TX_PER_SEC, true},
    [GPU_PROF_PCIE_RX_BYTES] = {NVML_GPM_METRIC_PCIE_RX_PER_SEC, true},
    [GPU_PROF_NVLINK_TX_BYTES] = {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, true},
    [GPU_PROF_NVLINK_RX_BYTES] = {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, true},
};

/* ---- the pure parts ------------------------------------------------------------------------ */

int nv_gpm_supported(nvmlReturn_t r, const nvmlGpmSupport_t *s)
{
    switch (r) {
    case NVML_SUCCESS:
        return s && s->isSupportedDevice ? 1 : 0;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
        return 0;
    default:
        return gpu_nvml_code(r) ?: -EIO;
    }
}

int nv_gpm_pair(uint64_t prev_ms, uint64_t cur_ms, uint64_t max_age_ms)
{
    if (cur_ms <= prev_ms)
        return -EAGAIN;
    if (max_age_ms && cur_ms - prev_ms > max_age_ms)
        return -ESTALE;
    return 0;
}

void nv_gpm_request(nvmlGpmMetricsGet_t *mg, nvmlGpmSample_t s1, nvmlGpmSample_t s2)
{
    mg->version = NVML_GPM_METRICS_GET_VERSION;
    mg->numMetrics = GPU_PROF_COUNT;
    mg->sample1 = s1;
    mg->sample2 = s2;
    for (size_t f = 0; f < GPU_PROF_COUNT; f++)
        mg->metrics[f] = (nvmlGpmMetric_t){.metricId = fields[f].metric,
                                           .nvmlReturn = NVML_ERROR_UNKNOWN, /* until answered */
                                           .value = NAN};
}

/* NVML computes a ratio of two counters in floating point: a hair under 0 or over 100 is
 * rounding, not a reading. */
#define ROUNDING 1e-6

void nv_gpm_convert(const nvmlGpmMetric_t *m, size_t n, struct gpu_prof *ret)
{
    struct gpu_prof p = {0};
    for (size_t i = 0; i < n; i++) {
        for (size_t f = 0; f < GPU_PROF_COUNT; f++) {
            if (fields[f].metric != m[i].metricId)
                continue;
            p.valid &= ~(1u << f);
            double v = m[i].value;
            if (m[i].nvmlReturn != NVML_SUCCESS || !isfinite(v) || v < -ROUNDING)
                continue;
            if (fields[f].mib_per_s)
                v = fmax(0.0, v) * MIB_D;
            else
                v = fmin(1.0, fmax(0.0, v / 100.0));
            p.value[f] = v;
            p.valid |= 1u << f;
        }
    }
    *ret = p;
}

/* ---- the sampler --------------------------------------------------------------------------- */

#define WHOLE_GPU 0xFFFFFFFFu

struct gpm_target {
    unsigned gi_id;            /* WHOLE_GPU, or the GPU instance */
    nvmlGpmSample_t sample[2]; /* used in turn */
    nvmlReturn_t taken[2];     /* how taking the sample in that slot went */
};

struct gpu_gpm_sampler {
    struct gpu_lib *lib;
    unsigned gpu;
    nvmlDevice_t dev;
    uint64_t max_age_ms;
    unsigned latest;   /* the slot of the latest sample */
    uint64_t at_ms[2]; /* when each slot was taken */
    size_t n_taken;
    size_t n_targets; /* [0] is the GPU */
    struct gpm_target t[1 + GPU_GPM_GI_MAX];
    nvmlGpmMetricsGet_t *mg; /* the request, reused */
};

int gpu_gpm_support(struct gpu_lib *lib, unsigned gpu, struct err *e)
{
    nvmlDevice_t dev;
    int rc = nv_handle(lib, gpu, &dev, e);
    if (rc < 0)
        return rc;
    nvmlGpmSupport_t s = {.version = NVML_GPM_SUPPORT_VERSION};
    nvmlReturn_t r = NV(lib, nvmlGpmQueryDeviceSupport, dev, &s);
    rc = nv_gpm_supported(r, &s);
    if (rc < 0)
        return nv_err(lib, r, e, "nvmlGpmQueryDeviceSupport(gpu %u)", gpu);
    return rc;
}

void gpu_gpm_sampler_free(struct gpu_gpm_sampler *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_targets; i++)
        for (size_t k = 0; k < 2; k++)
            if (s->t[i].sample[k])
                NV(s->lib, nvmlGpmSampleFree, s->t[i].sample[k]);
    free(s->mg);
    free(s);
}

static bool has_target(const struct gpu_gpm_sampler *s, unsigned gi_id)
{
    for (size_t i = 0; i < s->n_targets; i++)
        if (s->t[i].gi_id == gi_id)
            return true;
    return false;
}

int gpu_gpm_sampler_new(struct gpu_lib *lib, const struct gpu_device *dev, uint64_t max_age_ms,
                        struct gpu_gpm_sampler **ret, struct err *e)
{
    int rc = gpu_gpm_support(lib, dev->index, e);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return err_set(e, GPU_ERR_NOT_SUPPORTED,
                       "gpu %u (%s, %s): no GPU Performance Monitoring (Hopper and newer GPUs, "
                       "NVML 11.8 and later drivers)",
                       dev->index, dev->name, gpu_arch_name(dev->arch));
    _cleanup_(gpu_gpm_sampler_freep) struct gpu_gpm_sampler *s = xcalloc(1, sizeof(*s));
    s->lib = lib;
    s->gpu = dev->index;
    s->max_age_ms = max_age_ms;
    if ((rc = nv_handle(lib, dev->index, &s->dev, e)) < 0)
        return rc;
    s->t[s->n_targets++].gi_id = WHOLE_GPU;
    for (size_t i = 0; dev->mig_enabled && i < dev->n_mig; i++) {
        unsigned gi = dev->mig[i].gi_id;
        if (has_target(s, gi))
            continue;
        if (s->n_targets >= ARRAY_SIZE(s->t))
            return err_set(e, -E2BIG, "gpu %u: more than %d GPU instances", dev->index,
                           GPU_GPM_GI_MAX);
        s->t[s->n_targets++].gi_id = gi;
    }
    for (size_t i = 0; i < s->n_targets; i++)
        for (size_t k = 0; k < 2; k++) {
            nvmlReturn_t r = NV(lib, nvmlGpmSampleAlloc, &s->t[i].sample[k]);
            if (r != NVML_SUCCESS) {
                s->t[i].sample[k] = NULL;
                return nv_err(lib, r, e, "nvmlGpmSampleAlloc(gpu %u)", dev->index);
            }
            s->t[i].taken[k] = NVML_ERROR_UNINITIALIZED;
        }
    s->mg = xcalloc(1, sizeof(*s->mg));
    *ret = steal_ptr(&s);
    return 0;
}

int gpu_gpm_sample(struct gpu_gpm_sampler *s, uint64_t now_ms, struct err *e)
{
    unsigned next = s->n_taken ? s->latest ^ 1 : 0;
    nvmlReturn_t r = NV(s->lib, nvmlGpmSampleGet, s->dev, s->t[0].sample[next]);
    if (r != NVML_SUCCESS) {
        s->n_taken = 0; /* the slot may hold half a sample: start over */
        return nv_err(s->lib, r, e, "nvmlGpmSampleGet(gpu %u)", s->gpu);
    }
    s->t[0].taken[next] = NVML_SUCCESS;
    for (size_t i = 1; i < s->n_targets; i++)
        s->t[i].taken[next] =
            NV(s->lib, nvmlGpmMigSampleGet, s->dev, s->t[i].gi_id, s->t[i].sample[next]);
    s->at_ms[next] = now_ms;
    s->latest = next;
    s->n_taken++;
    return 0;
}

/* The metrics of target t between slots a and b into ret; NVML's code. */
static nvmlReturn_t target_metrics(struct gpu_gpm_sampler *s, struct gpm_target *t, unsigned a,
                                   unsigned b, struct gpu_prof *ret)
{
    if (t->taken[a] != NVML_SUCCESS)
        return t->taken[a];
    if (t->taken[b] != NVML_SUCCESS)
        return t->taken[b];
    nv_gpm_request(s->mg, t->sample[a], t->sample[b]);
    nvmlReturn_t r = NV(s->lib, nvmlGpmMetricsGet, s->mg);
    if (r != NVML_SUCCESS)
        return r;
    nv_gpm_convert(s->mg->metrics,
                   s->mg->numMetrics < GPU_PROF_COUNT ? s->mg->numMetrics : GPU_PROF_COUNT, ret);
    return NVML_SUCCESS;
}

int gpu_gpm_metrics(struct gpu_gpm_sampler *s, struct gpu_gpm_metrics *ret, struct err *e)
{
    if (s->n_taken < 2)
        return err_set(e, -EAGAIN, "gpu %u: GPM needs two samples, %zu taken so far", s->gpu,
                       s->n_taken);
    unsigned b = s->latest, a = b ^ 1;
    int rc = nv_gpm_pair(s->at_ms[a], s->at_ms[b], s->max_age_ms);
    if (rc == -EAGAIN)
        return err_set(e, rc,
                       "gpu %u: the latest GPM sample (%" PRIu64 " ms) is not after the "
                       "one before (%" PRIu64 " ms)",
                       s->gpu, s->at_ms[b], s->at_ms[a]);
    if (rc == -ESTALE)
        return err_set(e, rc,
                       "gpu %u: the GPM sample before the latest is %" PRIu64 " ms older, more "
                       "than %" PRIu64 " ms: stale",
                       s->gpu, s->at_ms[b] - s->at_ms[a], s->max_age_ms);
    struct gpu_gpm_metrics m = {.interval_ms = s->at_ms[b] - s->at_ms[a]};
    nvmlReturn_t r = target_metrics(s, &s->t[0], a, b, &m.gpu);
    if (r != NVML_SUCCESS)
        return nv_err(s->lib, r, e, "nvmlGpmMetricsGet(gpu %u)", s->gpu);
    for (size_t i = 1; i < s->n_targets; i++) {
        m.gi[m.n_gi].gi_id = s->t[i].gi_id;
        r = target_metrics(s, &s->t[i], a, b, &m.gi[m.n_gi].prof);
        m.gi[m.n_gi].error = gpu_nvml_code(r);
        m.n_gi++;
    }
    *ret = m;
    return 0;
}
