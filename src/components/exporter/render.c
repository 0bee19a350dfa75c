/* SPDX-License-Identifier: Apache-2.0 */
/* One collection to Prometheus text / OpenMetrics with dcgm-exporter's names and labels. */
#include <assert.h>
#include <string.h>

#include "exporter.h"

const char *const exp_error_kind_names[EXP_ERR_KINDS] = {"nvml", "gpu_lost", "inventory", "events",
                                                         "podresources"};

/* ---- a numeric field's value for one GPU, by group ---------------------------------------- */

#define NEED(bit)            \
    if (!(s->valid & (bit))) \
        return false;

/* A field's value from the GPU's own properties and its clocks, temperatures, power and PCIe
 * sample; false when it is not one of those or the sample lacks it. */
static bool device_value(enum exp_src src, const struct gpu_device *d, const struct gpu_sample *s,
                         double *ret)
{
    switch (src) {
    case EXP_SRC_SM_CLOCK:
        NEED(GPU_SAMPLE_CLOCKS) *ret = s->sm_clock_mhz;
        return true;
    case EXP_SRC_MEM_CLOCK:
        NEED(GPU_SAMPLE_CLOCKS) *ret = s->mem_clock_mhz;
        return true;
    case EXP_SRC_MAX_SM_CLOCK:
        if (!d->max_sm_clock_mhz)
            return false;
        *ret = d->max_sm_clock_mhz;
        return true;
    case EXP_SRC_MAX_MEM_CLOCK:
        if (!d->max_mem_clock_mhz)
            return false;
        *ret = d->max_mem_clock_mhz;
        return true;
    case EXP_SRC_MEM_TEMP:
        NEED(GPU_SAMPLE_MEM_TEMP) *ret = s->mem_temp_c;
        return true;
    case EXP_SRC_GPU_TEMP:
        NEED(GPU_SAMPLE_TEMP) *ret = s->temp_c;
        return true;
    case EXP_SRC_POWER:
        NEED(GPU_SAMPLE_POWER) *ret = s->power_mw / 1000.0;
        return true;
    case EXP_SRC_POWER_LIMIT:
        if (!d->power_limit_mw)
            return false;
        *ret = d->power_limit_mw / 1000.0;
        return true;
    case EXP_SRC_ENERGY:
        NEED(GPU_SAMPLE_ENERGY) *ret = (double)s->energy_mj;
        return true;
    case EXP_SRC_PCIE_REPLAY:
        NEED(GPU_SAMPLE_PCIE_REPLAY) *ret = s->pcie_replay;
        return true;
    default:
        return false;
    }
}

/* Utilization, XIDs, clock events and the framebuffer. */
static bool activity_value(enum exp_src src, const struct exp_gpu_state *st, double *ret)
{
    const struct gpu_sample *s = &st->sample;
    switch (src) {
    case EXP_SRC_UTIL_GPU:
        NEED(GPU_SAMPLE_UTIL) *ret = s->util_gpu;
        return true;
    case EXP_SRC_UTIL_MEM:
        NEED(GPU_SAMPLE_UTIL) *ret = s->util_mem;
        return true;
    case EXP_SRC_UTIL_ENC:
        NEED(GPU_SAMPLE_ENC_DEC) *ret = s->util_enc;
        return true;
    case EXP_SRC_UTIL_DEC:
        NEED(GPU_SAMPLE_ENC_DEC) *ret = s->util_dec;
        return true;
    case EXP_SRC_XID:
        *ret = (double)st->last_xid;
        return true;
    case EXP_SRC_CLOCK_EVENT_REASONS:
        NEED(GPU_SAMPLE_CLOCK_EVENTS) *ret = (double)s->clock_event_reasons;
        return true;
    case EXP_SRC_FB_TOTAL:
        NEED(GPU_SAMPLE_MEMORY) *ret = (double)s->fb_total_mib;
        return true;
    case EXP_SRC_FB_FREE:
        NEED(GPU_SAMPLE_MEMORY) *ret = (double)s->fb_free_mib;
        return true;
    case EXP_SRC_FB_USED:
        NEED(GPU_SAMPLE_MEMORY) *ret = (double)s->fb_used_mib;
        return true;
    case EXP_SRC_FB_RESERVED:
        NEED(GPU_SAMPLE_MEMORY) *ret = (double)s->fb_reserved_mib;
        return true;
    default:
        return false;
    }
}

/* Row remapping, ECC, retired pages and NVLink errors and bandwidth. */
static bool reliability_value(enum exp_src src, const struct gpu_sample *s, double *ret)
{
    switch (src) {
    case EXP_SRC_REMAP_UNC:
        NEED(GPU_SAMPLE_REMAPPED) *ret = s->remapped_unc;
        return true;
    case EXP_SRC_REMAP_COR:
        NEED(GPU_SAMPLE_REMAPPED) *ret = s->remapped_cor;
        return true;
    case EXP_SRC_REMAP_FAILURE:
        NEED(GPU_SAMPLE_REMAPPED) *ret = s->remap_failure ? 1 : 0;
        return true;
    case EXP_SRC_REMAP_PENDING:
        NEED(GPU_SAMPLE_REMAPPED) *ret = s->remap_pending ? 1 : 0;
        return true;
    case EXP_SRC_NVLINK_BW:
        NEED(GPU_SAMPLE_NVLINK_BW) *ret = (double)s->nvlink_bw_total;
        return true;
    case EXP_SRC_NVLINK_CRC_FLIT:
        NEED(GPU_SAMPLE_NVLINK_ERRORS) *ret = (double)s->nvlink_crc_flit;
        return true;
    case EXP_SRC_NVLINK_CRC_DATA:
        NEED(GPU_SAMPLE_NVLINK_ERRORS) *ret = (double)s->nvlink_crc_data;
        return true;
    case EXP_SRC_NVLINK_REPLAY:
        NEED(GPU_SAMPLE_NVLINK_ERRORS) *ret = (double)s->nvlink_replay;
        return true;
    case EXP_SRC_NVLINK_RECOVERY:
        NEED(GPU_SAMPLE_NVLINK_ERRORS) *ret = (double)s->nvlink_recovery;
        return true;
    case EXP_SRC_ECC_SBE_VOL:
        NEED(GPU_SAMPLE_ECC) *ret = (double)s->ecc_sbe_vol;
        return true;
    case EXP_SRC_ECC_DBE_VOL:
        NEED(GPU_SAMPLE_ECC) *ret = (double)s->ecc_dbe_vol;
        return true;
    case EXP_SRC_ECC_SBE_AGG:
        NEED(GPU_SAMPLE_ECC) *ret = (double)s->ecc_sbe_agg;
        return true;
    case EXP_SRC_ECC_DBE_AGG:
        NEED(GPU_SAMPLE_ECC) *ret = (double)s->ecc_dbe_agg;
        return true;
    case EXP_SRC_RETIRED_SBE:
        NEED(GPU_SAMPLE_RETIRED) *ret = s->retired_sbe;
        return true;
    case EXP_SRC_RETIRED_DBE:
        NEED(GPU_SAMPLE_RETIRED) *ret = s->retired_dbe;
        return true;
    case EXP_SRC_RETIRED_PENDING:
        NEED(GPU_SAMPLE_RETIRED) *ret = s->retired_pending ? 1 : 0;
        return true;
    default:
        return false;
    }
}

/* The clock-throttling violation counters (ns). */
static bool violation_value(enum exp_src src, const struct gpu_sample *s, double *ret)
{
    if (src < EXP_SRC_VIOL_POWER || src > EXP_SRC_VIOL_RELIABILITY)
        return false;
    NEED(GPU_SAMPLE_VIOLATIONS) *ret = (double)s->violation_ns[src - EXP_SRC_VIOL_POWER];
    return true;
}
#undef NEED

/* A field's value at one collection; false when the GPU or its sample has none. Each source
 * belongs to one group. */
static bool field_value(const struct exp_field *f, const struct gpu_device *d,
                        const struct exp_gpu_state *st, double *ret)
{
    return device_value(f->src, d, &st->sample, ret) || activity_value(f->src, st, ret) ||
           reliability_value(f->src, &st->sample, ret) || violation_value(f->src, &st->sample, ret);
}

/* The labels every series of one GPU or MIG device opens with, written once per render for
 * all of its series: most of a page is these, and formatting them for each series was most of
 * a collection's time. Entry first[g] is GPU g's, first[g] + 1 + j its MIG device j's. */
struct label_cache {
    size_t *first;
    struct {
        bool valid;
        size_t off, len;
    } * e;
    struct sbuf text; /* the entries' labels one after another */
};

struct series_ctx {
    const struct exp_render_input *in;
    const char *host_label;
    struct sbuf *out;
    struct label_cache *cache;
};

static int label(struct sbuf *b, bool *first, const char *name, const char *value)
{
    int r = *first ? 0 : sbuf_puts(b, ",");
    if (r >= 0)
        r = sbuf_puts(b, name);
    if (r >= 0)
        r = sbuf_puts(b, "=\"");
    *first = false;
    if (r >= 0)
        r = prom_escape_label_value(b, value);
    if (r >= 0)
        r = sbuf_puts(b, "\"");
    return r;
}

/* gpu, UUID, pci_bus_id, device, modelName[, GPU_I_PROFILE, GPU_I_ID][, Hostname]. */
static int device_labels(const struct series_ctx *c, const struct gpu_device *d,
                         const struct gpu_mig_device *mig, bool *first)
{
    struct sbuf *b = c->out;
    char num[32];
    snprintf(num, sizeof(num), "%u", d->index);
    int r = label(b, first, "gpu", num);
    if (r >= 0)
        r = label(b, first, "UUID", d->uuid);
    if (r >= 0)
        r = label(b, first, "pci_bus_id", d->bus_id);
    snprintf(num, sizeof(num), "nvidia%u", d->index);
    if (r >= 0)
        r = label(b, first, "device", num);
    if (r >= 0)
        r = label(b, first, "modelName", d->name);
    if (r >= 0 && mig) {
        r = label(b, first, "GPU_I_PROFILE", mig->profile);
        snprintf(num, sizeof(num), "%u", mig->gi_id);
        if (r >= 0)
            r = label(b, first, "GPU_I_ID", num);
    }
    if (r >= 0 && c->in->hostname)
        r = label(b, first, c->host_label, c->in->hostname);
    return r;
}

/* The label counters (DCGM_FI_DRIVER_VERSION, ...), in CSV order. */
static int counter_labels(const struct series_ctx *c, const struct gpu_device *d, bool *first)
{
    int r = 0;
    const struct exp_counters *cs = c->in->counters;
    for (size_t i = 0; i < cs->n && r >= 0; i++) {
        const struct exp_field *f = cs->items[i].field;
        if (cs->items[i].kind != EXP_LABEL)
            continue;
        if (f->src == EXP_SRC_LABEL_DRIVER_VERSION && c->in->inv)
            r = label(c->out, first, f->name, c->in->inv->driver_version);
        else if (f->src == EXP_SRC_LABEL_SERIAL)
            r = label(c->out, first, f->name, d->serial);
    }
    return r;
}

/* The device's and the label counters' labels of (d, mig), written in c->cache the first time;
 * *ret_off and *ret_len say where. d is one of the inventory's GPUs, mig one of its devices. */
static int series_labels(const struct series_ctx *c, const struct gpu_device *d,
                         const struct gpu_mig_device *mig, size_t *ret_off, size_t *ret_len)
{
    struct label_cache *lc = c->cache;
    size_t g = (size_t)(d - c->in->inv->gpus);
    assert(g < c->in->inv->n_gpus);
    assert(!mig || (size_t)(mig - d->mig) < d->n_mig);
    size_t k = lc->first[g] + (mig ? 1 + (size_t)(mig - d->mig) : 0);
    if (!lc->e[k].valid) {
        struct series_ctx cc = *c;
        cc.out = &lc->text;
        size_t off = lc->text.len;
        bool first = true;
        int r = device_labels(&cc, d, mig, &first);
        if (r >= 0)
            r = counter_labels(&cc, d, &first);
        if (r < 0)
            return r;
        lc->e[k].off = off;
        lc->e[k].len = lc->text.len - off;
        lc->e[k].valid = true;
    }
    *ret_off = lc->e[k].off;
    *ret_len = lc->e[k].len;
    return 0;
}

struct extra_labels {
    const char *n1, *v1, *n2, *v2;
};

/* Writes the samples of one GPU (or one GPU instance) for every matching pod. */
static int write_series(const struct series_ctx *c, const char *name, const struct gpu_device *d,
                        const struct gpu_mig_device *mig, const struct extra_labels *x, double v)
{
    const struct exp_render_input *in = c->in;
    unsigned gi = mig ? mig->gi_id : EXP_WHOLE_GPU;
    size_t written = 0;
    size_t n_pods = in->kubernetes && in->pods ? in->pods->n : 0;
    for (size_t i = 0; i <= n_pods; i++) {
        const struct exp_pod_ref *ref = NULL;
        if (i < n_pods) {
            const struct exp_pod_entry *p = &in->pods->items[i];
            if (p->gi_id != gi || strcmp(p->uuid, d->uuid) != 0)
                continue;
            ref = &p->ref;
        } else if (written > 0) {
            break;
        }
        size_t off = 0, len = 0;
        int r = series_labels(c, d, mig, &off, &len);
        if (r >= 0)
            r = sbuf_puts(c->out, name);
        if (r >= 0)
            r = sbuf_puts(c->out, "{");
        if (r >= 0)
            r = sbuf_append(c->out, c->cache->text.data + off, len);
        bool first = len == 0;
        if (r >= 0 && x && x->n1)
            r = label(c->out, &first, x->n1, x->v1);
        if (r >= 0 && x && x->n2)
            r = label(c->out, &first, x->n2, x->v2);
        if (r >= 0 && in->kubernetes) {
            r = label(c->out, &first, "pod", ref ? ref->pod : "");
            if (r >= 0)
                r = label(c->out, &first, "namespace", ref ? ref->namespace : "");
            if (r >= 0)
                r = label(c->out, &first, "container", ref ? ref->container : "");
        }
        if (r >= 0)
            r = sbuf_puts(c->out, "} ");
        if (r >= 0)
            r = prom_write_value(c->out, v);
        if (r >= 0)
            r = sbuf_puts(c->out, "\n");
        if (r < 0)
            return r;
        written++;
    }
    return 0;
}

/* A profiling field: the whole GPU's value without MIG labels and, on a GPU in MIG mode, each
 * GPU instance's own value, where each has one. */
static int write_gpu_prof(const struct series_ctx *c, const struct exp_field *f,
                          const struct gpu_device *d, const struct exp_prof *p)
{
    double v;
    int r = 0;
    if (exp_prof_value(p, EXP_WHOLE_GPU, f->prof, &v))
        r = write_series(c, f->name, d, NULL, NULL, v);
    for (size_t j = 0; d->mig_enabled && j < d->n_mig && r >= 0; j++) {
        bool seen = false;
        for (size_t k = 0; k < j; k++)
            if (d->mig[k].gi_id == d->mig[j].gi_id)
                seen = true;
        if (!seen && exp_prof_value(p, d->mig[j].gi_id, f->prof, &v))
            r = write_series(c, f->name, d, &d->mig[j], NULL, v);
    }
    return r;
}

/* Calls write_series for the GPU, or for each of its GPU instances, as the field wants. */
static int write_gpu_x(const struct series_ctx *c, const struct exp_field *f, const char *name,
                       const struct gpu_device *d, const struct extra_labels *x, double v)
{
    bool per_instance = d->mig_enabled && d->n_mig > 0 && f->mig == EXP_MIG_PER_INSTANCE;
    if (!per_instance)
        return write_series(c, name, d, NULL, x, v);
    for (size_t j = 0; j < d->n_mig; j++) {
        bool seen = false;
        for (size_t k = 0; k < j; k++)
            if (d->mig[k].gi_id == d->mig[j].gi_id)
                seen = true;
        if (seen)
            continue;
        int r = write_series(c, name, d, &d->mig[j], x, v);
        if (r < 0)
            return r;
    }
    return 0;
}

static int write_gpu(const struct series_ctx *c, const struct exp_field *f, const char *name,
                     const struct gpu_device *d, const char *extra_name, const char *extra_value,
                     double v)
{
    struct extra_labels x = {.n1 = extra_name, .v1 = extra_value};
    return write_gpu_x(c, f, name, d, &x, v);
}

/* DCGM_EXP_XID_ERRORS_COUNT: labels xid and window_size_in_ms, as dcgm-exporter sets them. */
static int write_gpu_xid(const struct series_ctx *c, const struct exp_field *f,
                         const struct gpu_device *d, const char *xid, const char *window, double v)
{
    struct extra_labels x = {.n1 = "window_size_in_ms", .v1 = window, .n2 = "xid", .v2 = xid};
    return write_gpu_x(c, f, f->name, d, &x, v);
}

static int render_field(const struct series_ctx *c, const struct exp_counter *ctr,
                        enum prom_format fmt, struct sbuf *scratch)
{
    const struct exp_render_input *in = c->in;
    const struct exp_field *f = ctr->field;
    struct series_ctx sc = *c;
    sc.out = scratch;
    sbuf_reset(scratch);
    for (size_t g = 0; g < in->inv->n_gpus; g++) {
        const struct gpu_device *d = &in->inv->gpus[g];
        const struct exp_gpu_state *st = &in->gpus[g];
        if (!st->ok || (d->mig_enabled && f->mig == EXP_MIG_NONE))
            continue;
        int r = 0;
        if (f->src == EXP_SRC_CLOCK_EVENTS_COUNT) {
            if (!(st->sample.valid & GPU_SAMPLE_CLOCK_EVENTS))
                continue;
            for (unsigned k = 0; k < EXP_CLOCK_EVENTS && r >= 0; k++)
                r = write_gpu(&sc, f, f->name, d, "clock_event", exp_clock_event_names[k],
                              (double)st->clock_events[k]);
        } else if (f->src == EXP_SRC_XID_COUNT) {
            char win[32];
            snprintf(win, sizeof(win), "%llu", (unsigned long long)in->xid_window_ms);
            for (size_t k = 0; k < st->n_xid_counts && r >= 0; k++) {
                char xid[32];
                snprintf(xid, sizeof(xid), "%llu", (unsigned long long)st->xid_counts[k].xid);
                r = write_gpu_xid(&sc, f, d, xid, win, (double)st->xid_counts[k].count);
            }
        } else if (f->src == EXP_SRC_PROF) {
            r = write_gpu_prof(&sc, f, d, st->prof);
        } else {
            double v;
            if (!field_value(f, d, st, &v))
                continue;
            r = write_gpu(&sc, f, f->name, d, NULL, NULL, v);
        }
        if (r < 0)
            return r;
    }
    if (scratch->len == 0)
        return 0;
    int r = prom_write_family(c->out, fmt, f->name,
                              ctr->kind == EXP_COUNTER ? PROM_COUNTER : PROM_GAUGE, ctr->help);
    if (r >= 0)
        r = sbuf_append(c->out, scratch->data, scratch->len);
    return r;
}

static int render_self(const struct series_ctx *c, enum prom_format fmt)
{
    const struct exp_render_input *in = c->in;
    const struct exp_self *s = in->self;
    struct sbuf *b = c->out;
    int r = 0;
    if (in->inv && in->inv->n_gpus) {
        r = prom_write_family(b, fmt, "gpuop_exporter_gpu_up", PROM_GAUGE,
                              "Whether the last collection read the GPU (0: lost or failing).");
        for (size_t g = 0; g < in->inv->n_gpus && r >= 0; g++) {
            bool first = true;
            r = sbuf_puts(b, "gpuop_exporter_gpu_up{");
            if (r >= 0)
                r = device_labels(c, &in->inv->gpus[g], NULL, &first);
            if (r >= 0)
                r = sbuf_printf(b, "} %d\n", in->gpus[g].ok ? 1 : 0);
        }
        if (r >= 0)
            r = prom_write_family(b, fmt, "gpuop_exporter_gpu_lost", PROM_GAUGE,
                                  "Whether NVML reported the GPU as lost (GPU_IS_LOST).");
        for (size_t g = 0; g < in->inv->n_gpus && r >= 0; g++) {
            bool first = true;
            r = sbuf_puts(b, "gpuop_exporter_gpu_lost{");
            if (r >= 0)
                r = device_labels(c, &in->inv->gpus[g], NULL, &first);
            if (r >= 0)
                r = sbuf_printf(b, "} %d\n", in->gpus[g].lost ? 1 : 0);
        }
    }
    if (r >= 0)
        r = prom_write_family(b, fmt, "gpuop_exporter_gpus", PROM_GAUGE,
                              "GPUs in the NVML inventory.");
    if (r >= 0)
        r = sbuf_printf(b, "gpuop_exporter_gpus %zu\n", in->inv ? in->inv->n_gpus : 0);
    if (!s)
        return r;
    if (r >= 0)
        r = prom_write_family(b, fmt, "gpuop_exporter_last_collection_timestamp_seconds",
                              PROM_GAUGE, "Unix time the last collection finished.");
    if (r >= 0)
        r = sbuf_puts(b, "gpuop_exporter_last_collection_timestamp_seconds ");
    if (r >= 0)
        r = prom_write_value(b, s->last_collection_unix_s);
    if (r >= 0)
        r = sbuf_puts(b, "\n");
    if (r >= 0)
        r = prom_write_family(b, fmt, "gpuop_exporter_collection_duration_seconds", PROM_GAUGE,
                              "How long the last collection took.");
    if (r >= 0)
        r = sbuf_puts(b, "gpuop_exporter_collection_duration_seconds ");
    if (r >= 0)
        r = prom_write_value(b, s->last_collection_duration_s);
    if (r >= 0)
        r = sbuf_puts(b, "\n");
    if (r >= 0)
        r = prom_write_family(b, fmt, "gpuop_exporter_collections_total", PROM_COUNTER,
                              "Collections done since start.");
    if (r >= 0)
        r = sbuf_printf(b, "gpuop_exporter_collections_total %llu\n",
                        (unsigned long long)s->collections);
    if (r >= 0)
        r = prom_write_family(b, fmt, "gpuop_exporter_errors_total", PROM_COUNTER,
                              "Collection errors since start, by kind.");
    for (int k = 0; k < EXP_ERR_KINDS && r >= 0; k++)
        r = sbuf_printf(b, "gpuop_exporter_errors_total{kind=\"%s\"} %llu\n",
                        exp_error_kind_names[k], (unsigned long long)s->errors[k]);
    if (r >= 0 && s->kubernetes) {
        r = prom_write_family(b, fmt, "gpuop_exporter_pod_resources_up", PROM_GAUGE,
                              "Whether the last kubelet PodResources List succeeded.");
        if (r >= 0)
            r = sbuf_printf(b, "gpuop_exporter_pod_resources_up %d\n", s->pod_resources_up ? 1 : 0);
    }
    return r;
}

int exp_render(const struct exp_render_input *in, enum prom_format fmt, struct sbuf *out)
{
    struct label_cache cache = {0};
    struct series_ctx c = {.in = in,
                           .host_label = in->lower_hostname ? "hostname" : "Hostname",
                           .out = out,
                           .cache = &cache};
    _cleanup_sbuf_ struct sbuf scratch;
    sbuf_init(&scratch, out->limit);
    sbuf_init(&cache.text, out->limit);
    size_t n_gpus = in->inv ? in->inv->n_gpus : 0, n_entries = 0;
    cache.first = xcalloc(n_gpus + 1, sizeof(*cache.first));
    for (size_t g = 0; g < n_gpus; g++) {
        cache.first[g] = n_entries;
        n_entries += 1 + in->inv->gpus[g].n_mig;
    }
    cache.e = xcalloc(n_entries + 1, sizeof(*cache.e));
    int r = 0;
    if (in->inv && in->counters)
        for (size_t i = 0; i < in->counters->n && r >= 0; i++) {
            const struct exp_counter *ctr = &in->counters->items[i];
            if (ctr->kind == EXP_LABEL || ctr->field->src == EXP_SRC_UNSUPPORTED)
                continue;
            r = render_field(&c, ctr, fmt, &scratch);
        }
    if (r >= 0)
        r = render_self(&c, fmt);
    sbuf_free(&cache.text);
    free(cache.first);
    free(cache.e);
    return r;
}

int exp_render_tail(uint64_t scrapes, enum prom_format f, struct sbuf *out)
{
    int r = prom_write_family(out, f, "gpuop_exporter_scrapes_total", PROM_COUNTER,
                              "Scrapes of /metrics served since start.");
    if (r >= 0)
        r = sbuf_printf(out, "gpuop_exporter_scrapes_total %llu\n", (unsigned long long)scrapes);
    if (r >= 0)
        r = prom_write_eof(out, f);
    return r;
}
