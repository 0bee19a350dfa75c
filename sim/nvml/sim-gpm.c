/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulated GPU Performance Monitoring: what the workload on a GPU drives, as counters a
 * sample can snapshot, and NVML's metrics over two snapshots. Pure: the driver (nvml-sim.c) keeps
 * the counters, takes the samples and checks the calls.
 *
 * The model. Each process holding a GPU or MIG device drives a load (struct sim_load: SM, tensor
 * and DRAM activity). A compute instance's load is the sum of its processes' (at most 1); a GPU
 * instance's, its compute instances' weighted by their share of its slices; a GPU's with MIG on,
 * its GPU instances' weighted by their share of its SMs (SM and tensor) and of its memory slices
 * (DRAM); a GPU's without MIG, the sum of its processes'. From a load L:
 *   SM_UTIL = L.sm, ANY_TENSOR = HMMA = L.tensor, DRAM_BW = L.dram,
 *   GRAPHICS (the engine) = max(L.sm, L.tensor, L.dram), SM_OCCUPANCY = L.sm / 2,
 *   INTEGER = 0.3 L.sm, and of the SM time left by the tensor pipe (L.sm - L.tensor, at least 0):
 *   FP32 0.6, FP16 0.2, FP64 0.1; DFMA, DMMA and IMMA stay 0;
 *   PCIe: RX 10 % and TX 5 % of the link's bandwidth (generation x width) times L.dram;
 *   NVLink: each direction a quarter of every link's bandwidth (25 GB/s a link, 50 from
 *   Blackwell) times L.tensor (collectives run beside tensor work).
 * These proportions are the simulator's; only the units and ranges are NVML's.
 */
#include <math.h>
#include <string.h>

#include "nvml-abi.h"
#include "simnvml.h"

int sim_ratio_parse(const char *s, unsigned *ret_milli)
{
    if (!s || !(*s >= '0' && *s <= '9'))
        return -EINVAL;
    unsigned whole = 0, frac = 0, digits = 0;
    const char *p = s;
    while (*p >= '0' && *p <= '9') {
        if (whole > 1)
            return -ERANGE;
        whole = whole * 10 + (unsigned)(*p++ - '0');
    }
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (++digits > 3) {
                if (*p != '0') /* "0.1250" is fine, "0.1251" is finer than a thousandth */
                    return -EINVAL;
                continue;
            }
            frac = frac * 10 + (unsigned)(*p - '0');
        }
    }
    if (*p)
        return -EINVAL;
    for (; digits < 3; digits++)
        frac *= 10;
    unsigned v = whole * SIM_LOAD_MAX + frac;
    if (whole > 1 || v > SIM_LOAD_MAX)
        return -ERANGE;
    *ret_milli = v;
    return 0;
}

int sim_load_parse(const char *s, struct sim_load *ret, struct err *e)
{
    struct sim_load l = {0};
    bool seen[3] = {false, false, false};
    static const char *const keys[3] = {"sm", "tensor", "dram"};
    unsigned *slot[3] = {&l.sm, &l.tensor, &l.dram};
    if (!s || !*s)
        return err_set(e, -EINVAL, "\"\": no load (sm=R,tensor=R,dram=R, ratios 0..1)");
    const char *p = s;
    while (*p) {
        size_t len = strcspn(p, ",");
        char part[64];
        if (len >= sizeof(part))
            return err_set(e, -EINVAL, "\"%.*s\": too long", (int)(len > 40 ? 40 : len), p);
        memcpy(part, p, len);
        part[len] = '\0';
        char *eq = strchr(part, '=');
        if (!eq)
            return err_set(e, -EINVAL, "\"%s\": not key=ratio (sm, tensor, dram)", part);
        *eq = '\0';
        size_t k = 0;
        while (k < 3 && strcmp(part, keys[k]) != 0)
            k++;
        if (k == 3)
            return err_set(e, -EINVAL, "\"%s\": unknown key (sm, tensor, dram)", part);
        if (seen[k])
            return err_set(e, -EINVAL, "\"%s\" given twice", part);
        seen[k] = true;
        int r = sim_ratio_parse(eq + 1, slot[k]);
        if (r < 0)
            return err_set(e, r, "%s=\"%s\": not a ratio from 0 to 1 (at most 3 decimals)", part,
                           eq + 1);
        p += len;
        if (*p == ',') {
            p++;
            if (!*p)
                return err_set(e, -EINVAL, "\"%s\": ends in a comma", s);
        }
    }
    *ret = l;
    return 0;
}

bool sim_gpm_supported(const struct sim_gpu_spec *spec)
{
    return spec->arch >= NVML_DEVICE_ARCH_HOPPER && spec->arch != NVML_DEVICE_ARCH_UNKNOWN;
}

struct sim_load sim_proc_load(const struct sim_gpu_spec *spec, const struct sim_gpu_state *g,
                              const struct sim_proc *p)
{
    if (p->has_load)
        return p->load;
    if (g->has_load)
        return g->load;
    if (spec->has_workload)
        return spec->workload;
    return SIM_LOAD_DEFAULT;
}

/* A load as ratios, each at most 1. */
struct ratios {
    double sm, tensor, dram;
};

static void ratios_add(struct ratios *a, struct sim_load l, double w)
{
    a->sm += w * l.sm / SIM_LOAD_MAX;
    a->tensor += w * l.tensor / SIM_LOAD_MAX;
    a->dram += w * l.dram / SIM_LOAD_MAX;
}

static void ratios_clamp(struct ratios *a)
{
    a->sm = fmin(1.0, a->sm);
    a->tensor = fmin(1.0, a->tensor);
    a->dram = fmin(1.0, a->dram);
}

/* The load of compute instance (gi, ci): its processes', at most 1. */
static struct ratios ci_load(const struct sim_gpu_spec *spec, const struct sim_gpu_state *g,
                             const struct sim_proc *procs, size_t n, unsigned gi, unsigned ci)
{
    struct ratios r = {0};
    for (size_t i = 0; i < n; i++)
        if (procs[i].gi_id == gi && procs[i].ci_id == ci)
            ratios_add(&r, sim_proc_load(spec, g, &procs[i]), 1.0);
    ratios_clamp(&r);
    return r;
}

/* The load of GPU instance gi: its compute instances' by their share of its slices. */
static struct ratios gi_load(const struct sim_gpu_spec *spec, const struct sim_gpu_state *g,
                             const struct sim_gi *gi, const struct sim_proc *procs, size_t n)
{
    const struct sim_gi_profile *p = sim_mig_profile_by_id(spec->mig_table, gi->profile_id);
    unsigned slices = p && p->slices ? p->slices : 1;
    struct ratios r = {0};
    for (unsigned k = 0; k < gi->n_ci; k++) {
        struct ratios c = ci_load(spec, g, procs, n, gi->id, gi->ci[k].id);
        double w = (double)gi->ci[k].size / slices;
        r.sm += w * c.sm;
        r.tensor += w * c.tensor;
        r.dram += w * c.dram;
    }
    ratios_clamp(&r);
    return r;
}

/* PCIe bandwidth of one lane, bytes per second, after line encoding. */
static double lane_bytes_per_s(unsigned gen)
{
    static const double rate[] = {0, 250e6, 500e6, 984.6e6, 1969e6, 3938e6, 7563e6, 15125e6};
    return gen < ARRAY_SIZE(rate) ? rate[gen] : rate[ARRAY_SIZE(rate) - 1];
}

static void rates_from(const struct sim_gpu_spec *spec, struct ratios l, bool whole,
                       struct sim_gpm_rates *ret)
{
    double nt = fmax(0.0, l.sm - l.tensor); /* SM time outside the tensor pipe */
    double *a = ret->active;
    a[SIM_GPM_SM] = l.sm;
    a[SIM_GPM_TENSOR] = a[SIM_GPM_HMMA] = l.tensor;
    a[SIM_GPM_DRAM] = l.dram;
    a[SIM_GPM_GR] = fmax(l.sm, fmax(l.tensor, l.dram));
    a[SIM_GPM_OCC] = 0.5 * l.sm;
    a[SIM_GPM_INT] = 0.3 * l.sm;
    a[SIM_GPM_FP32] = 0.6 * nt;
    a[SIM_GPM_FP16] = 0.2 * nt;
    a[SIM_GPM_FP64] = 0.1 * nt;
    a[SIM_GPM_DFMA] = a[SIM_GPM_IMMA] = 0;
    ret->pcie = whole;
    ret->nvlink = whole && spec->n_links > 0;
    ret->n_links = ret->nvlink ? spec->n_links : 0;
    if (ret->pcie) {
        double link = lane_bytes_per_s(spec->pcie_gen) * spec->pcie_width;
        ret->bytes_per_s[SIM_GPM_PCIE_RX] = 0.10 * l.dram * link;
        ret->bytes_per_s[SIM_GPM_PCIE_TX] = 0.05 * l.dram * link;
    }
    if (ret->nvlink) {
        double per_link = spec->arch >= NVML_DEVICE_ARCH_BLACKWELL ? 50e9 : 25e9;
        ret->bytes_per_s[SIM_GPM_NVLINK_TX] = ret->bytes_per_s[SIM_GPM_NVLINK_RX] =
            0.25 * l.tensor * per_link * spec->n_links;
    }
}

int sim_gpm_rates(const struct sim_gpu_spec *spec, const struct sim_gpu_state *g,
                  const struct sim_proc *procs, size_t n, unsigned gi, unsigned ci,
                  struct sim_gpm_rates *ret)
{
    struct sim_gpm_rates r = {0};
    struct ratios l = {0};
    if (gi == SIM_NO_ID && !g->mig_mode) {
        for (size_t i = 0; i < n; i++)
            ratios_add(&l, sim_proc_load(spec, g, &procs[i]), 1.0);
        ratios_clamp(&l);
    } else if (gi == SIM_NO_ID) {
        double sms = spec->multiprocessors ? spec->multiprocessors : 1;
        for (unsigned k = 0; k < g->n_gi; k++) {
            const struct sim_gi_profile *p =
                sim_mig_profile_by_id(spec->mig_table, g->gi[k].profile_id);
            struct ratios x = gi_load(spec, g, &g->gi[k], procs, n);
            double w_sm = p ? fmin(1.0, p->sms / sms) : 0;
            double w_mem = (double)g->gi[k].size / SIM_MEM_SLICES;
            l.sm += w_sm * x.sm;
            l.tensor += w_sm * x.tensor;
            l.dram += w_mem * x.dram;
        }
        ratios_clamp(&l);
    } else {
        if (!g->mig_mode)
            return NVML_ERROR_NOT_FOUND;
        const struct sim_gi *x = sim_gpu_find_gi_const(g, gi);
        if (!x)
            return NVML_ERROR_NOT_FOUND;
        r.ident = sim_hash64(((uint64_t)x->profile_id << 32) | x->start, x->size);
        if (ci == SIM_NO_ID) {
            l = gi_load(spec, g, x, procs, n);
        } else {
            const struct sim_ci *c = NULL;
            for (unsigned k = 0; k < x->n_ci; k++)
                if (x->ci[k].id == ci)
                    c = &x->ci[k];
            if (!c)
                return NVML_ERROR_NOT_FOUND;
            r.ident = sim_hash64(r.ident, ((uint64_t)c->profile_index << 32) | c->start);
            l = ci_load(spec, g, procs, n, gi, ci);
        }
    }
    rates_from(spec, l, gi == SIM_NO_ID, &r);
    *ret = r;
    return NVML_SUCCESS;
}

/* x in [0, 2^64) as a counter increment (rounded; saturating). */
static uint64_t count(double x)
{
    if (!(x > 0))
        return 0;
    return x + 0.5 >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)(x + 0.5);
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void sim_gpm_advance(struct sim_gpm_counters *c, const struct sim_gpm_rates *r, uint64_t dt_ms)
{
    double ns = (double)dt_ms * 1e6;
    c->elapsed_ns = sat_add(c->elapsed_ns, count(ns));
    for (size_t i = 0; i < SIM_GPM_ACTIVITIES; i++)
        c->active_ns[i] = sat_add(c->active_ns[i], count(r->active[i] * ns));
    for (size_t i = 0; i < SIM_GPM_FLOWS; i++)
        c->bytes[i] = sat_add(c->bytes[i], count(r->bytes_per_s[i] * (double)dt_ms / 1000.0));
    c->pcie = r->pcie;
    c->nvlink = r->nvlink;
    c->n_links = r->n_links;
}

static int flow_metric(enum sim_gpm_flow f, double share, const struct sim_gpm_counters *a,
                       const struct sim_gpm_counters *b, double s, double *ret)
{
    if (b->bytes[f] < a->bytes[f])
        return NVML_ERROR_INVALID_ARGUMENT;
    *ret = (double)(b->bytes[f] - a->bytes[f]) * share / s / (1024.0 * 1024.0);
    return NVML_SUCCESS;
}

int sim_gpm_metric(unsigned id, const struct sim_gpm_counters *a, const struct sim_gpm_counters *b,
                   double *ret)
{
    static const struct {
        unsigned id;
        enum sim_gpm_activity what;
    } util[] = {
        {NVML_GPM_METRIC_GRAPHICS_UTIL, SIM_GPM_GR},
        {NVML_GPM_METRIC_SM_UTIL, SIM_GPM_SM},
        {NVML_GPM_METRIC_SM_OCCUPANCY, SIM_GPM_OCC},
        {NVML_GPM_METRIC_INTEGER_UTIL, SIM_GPM_INT},
        {NVML_GPM_METRIC_ANY_TENSOR_UTIL, SIM_GPM_TENSOR},
        {NVML_GPM_METRIC_DFMA_TENSOR_UTIL, SIM_GPM_DFMA},
        {NVML_GPM_METRIC_HMMA_TENSOR_UTIL, SIM_GPM_HMMA},
        {8 /* DMMA */, SIM_GPM_DFMA},
        {NVML_GPM_METRIC_IMMA_TENSOR_UTIL, SIM_GPM_IMMA},
        {NVML_GPM_METRIC_DRAM_BW_UTIL, SIM_GPM_DRAM},
        {NVML_GPM_METRIC_FP64_UTIL, SIM_GPM_FP64},
        {NVML_GPM_METRIC_FP32_UTIL, SIM_GPM_FP32},
        {NVML_GPM_METRIC_FP16_UTIL, SIM_GPM_FP16},
    };
    if (id == 0 || id >= NVML_GPM_METRIC_MAX)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (b->elapsed_ns <= a->elapsed_ns)
        return NVML_ERROR_INVALID_ARGUMENT;
    double ns = (double)(b->elapsed_ns - a->elapsed_ns), s = ns / 1e9;
    for (size_t i = 0; i < ARRAY_SIZE(util); i++) {
        if (util[i].id != id)
            continue;
        enum sim_gpm_activity w = util[i].what;
        if (b->active_ns[w] < a->active_ns[w])
            return NVML_ERROR_INVALID_ARGUMENT;
        *ret = fmin(100.0, 100.0 * (double)(b->active_ns[w] - a->active_ns[w]) / ns);
        return NVML_SUCCESS;
    }
    /* the video engines: present, idle (no simulated workload decodes) */
    if ((id >= NVML_GPM_METRIC_NVDEC_0_UTIL && id <= NVML_GPM_METRIC_NVDEC_0_UTIL + 7) ||
        (id >= NVML_GPM_METRIC_NVJPG_0_UTIL && id <= NVML_GPM_METRIC_NVJPG_0_UTIL + 7) ||
        (id >= NVML_GPM_METRIC_NVOFA_0_UTIL && id <= NVML_GPM_METRIC_NVOFA_0_UTIL + 1)) {
        *ret = 0;
        return NVML_SUCCESS;
    }
    bool pcie = a->pcie && b->pcie, nvlink = a->nvlink && b->nvlink;
    unsigned links = b->n_links;
    switch (id) {
    case NVML_GPM_METRIC_PCIE_TX_PER_SEC:
    case NVML_GPM_METRIC_PCIE_RX_PER_SEC:
        if (!pcie)
            return NVML_ERROR_NOT_SUPPORTED;
        return flow_metric(id == NVML_GPM_METRIC_PCIE_TX_PER_SEC ? SIM_GPM_PCIE_TX
                                                                 : SIM_GPM_PCIE_RX,
                           1.0, a, b, s, ret);
    case NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC:
    case NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC:
        if (!nvlink)
            return NVML_ERROR_NOT_SUPPORTED;
        return flow_metric(id == NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC ? SIM_GPM_NVLINK_TX
                                                                         : SIM_GPM_NVLINK_RX,
                           1.0, a, b, s, ret);
    default:
        break;
    }
    /* per link: the total spread evenly over the GPU's links */
    unsigned link = 0;
    bool rx = false, per_link = false;
    if (id >= NVML_GPM_METRIC_NVLINK_L0_RX_PER_SEC && id <= NVML_GPM_METRIC_NVLINK_L17_TX_PER_SEC) {
        link = (id - NVML_GPM_METRIC_NVLINK_L0_RX_PER_SEC) / 2;
        rx = (id - NVML_GPM_METRIC_NVLINK_L0_RX_PER_SEC) % 2 == 0;
        per_link = true;
    } else if (id >= NVML_GPM_METRIC_NVLINK_L18_RX_PER_SEC &&
               id <= NVML_GPM_METRIC_NVLINK_L35_TX_PER_SEC) {
        link = 18 + (id - NVML_GPM_METRIC_NVLINK_L18_RX_PER_SEC) / 2;
        rx = (id - NVML_GPM_METRIC_NVLINK_L18_RX_PER_SEC) % 2 == 0;
        per_link = true;
    }
    if (!per_link)
        return NVML_ERROR_NOT_SUPPORTED; /* a metric the simulator does not model */
    if (!nvlink || link >= links)
        return NVML_ERROR_NOT_SUPPORTED;
    return flow_metric(rx ? SIM_GPM_NVLINK_RX : SIM_GPM_NVLINK_TX, 1.0 / links, a, b, s, ret);
}
