/* SPDX-License-Identifier: Apache-2.0 */
/* The exporter's collector: every interval, NVML's samples of each GPU (with the clock-event and
 * XID histories the core keeps), the pod map from the kubelet, both pages rendered by the core
 * and swapped in as the snapshot the scrapes serve. */
#include <string.h>

#include "exporter-internal.h"

#define COMP           "exporter"
#define SNAPSHOT_LIMIT (64u << 20)

void exp_snapshot_unref(void *p)
{
    struct exp_snapshot *s = p;
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
        free(s->text);
        free(s->om);
        free(s);
    }
}

struct exp_snapshot *exp_snapshot_get(struct exporter *x)
{
    pthread_mutex_lock(&x->lock);
    struct exp_snapshot *s = x->snap;
    if (s)
        atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&x->lock);
    return s;
}

void exp_collector_clear(struct exporter *x)
{
    for (size_t i = 0; i < x->n_gpm; i++)
        gpu_gpm_sampler_free(x->gpm[i].sampler);
    memset(x->gpm, 0, sizeof(x->gpm));
    x->n_gpm = 0;
    gpu_inventory_free(x->inv);
    free(x->gpus);
    x->inv = NULL;
    x->gpus = NULL;
    x->n_gpus = 0;
    exp_clock_table_clear(&x->clocks);
    exp_pod_map_clear(&x->pods);
    exp_snapshot_unref(x->snap);
    x->snap = NULL;
}

/* DCGM_EXP_CLOCK_EVENTS_COUNT as dcgm-exporter computes it: per reason, the collections in the
 * last window in which NVML reported the reason active. */
static void clock_events_count(struct exporter *x, const char *uuid, struct exp_gpu_state *st)
{
    memset(st->clock_events, 0, sizeof(st->clock_events));
    struct exp_clock_hist *h = exp_clock_table_get(
        &x->clocks, uuid, exp_clock_hist_cap(x->clock_window_ms, x->interval_ms));
    if (!h)
        return;
    uint64_t now = now_ms_mono();
    if (st->ok && (st->sample.valid & GPU_SAMPLE_CLOCK_EVENTS))
        exp_clock_hist_push(h, now, st->sample.clock_event_reasons);
    exp_clock_hist_count(h, now, x->clock_window_ms, st->clock_events);
}

static void xid_history(struct exporter *x, const char *uuid, struct exp_gpu_state *st)
{
    uint64_t now = now_ms_mono();
    pthread_mutex_lock(&x->lock);
    st->last_xid = exp_xid_log_last(&x->xids, uuid);
    exp_xid_log_counts(&x->xids, uuid, now, x->xid_window_ms, st);
    pthread_mutex_unlock(&x->lock);
}

static void refresh_pods(struct exporter *x)
{
    exp_pod_map_clear(&x->pods);
    struct err e = {0};
    /* A kubelet that is slow or never answers delays the GPU metrics by at most the budget
     * (attribution is then left empty for this collection), and never a stop. */
    int r = exp_podresources_list(x->socket, x->inv, x->resource_names,
                                  exp_podres_budget_ms(x->interval_ms), x->stop, &x->pods, &e);
    if (r < 0) {
        x->self.errors[EXP_ERR_PODRESOURCES]++;
        x->self.pod_resources_up = false;
        exp_pod_map_clear(&x->pods);
        if (!x->podres_failing)
            log_warn(COMP,
                     "kubelet PodResources unavailable; pod labels left empty, retrying "
                     "every collection",
                     "socket=%s error=\"%s\"", x->socket, err_msg(&e));
        x->podres_failing = true;
        return;
    }
    if (x->podres_failing)
        log_info(COMP, "kubelet PodResources reachable again", "socket=%s", x->socket);
    x->podres_failing = false;
    x->self.pod_resources_up = true;
}

/* ---- GPU Performance Monitoring ----------------------------------------------------------- */

static struct exp_gpm_slot *gpm_slot(struct exporter *x, const char *uuid)
{
    for (size_t i = 0; i < x->n_gpm; i++)
        if (strcmp(x->gpm[i].uuid, uuid) == 0)
            return &x->gpm[i];
    if (x->n_gpm >= EXP_GPM_GPUS)
        return NULL;
    struct exp_gpm_slot *g = &x->gpm[x->n_gpm++];
    memset(g, 0, sizeof(*g));
    strlcpy_s(g->uuid, uuid, sizeof(g->uuid));
    return g;
}

/* Asks whether the GPU has GPM; the reason where it has not. A GPU first seen after start is
 * named at once (those at start are in the start-up notice). */
static void gpm_ask(struct exporter *x, const struct gpu_device *d, struct exp_gpm_slot *g)
{
    struct err e = {0};
    g->support.index = d->index;
    g->support.support = gpu_gpm_support(x->lib, d->index, &e);
    g->asked = g->support.support >= 0;
    if (g->support.support < 0)
        snprintf(g->support.reason, sizeof(g->support.reason), "the support query failed: %s",
                 err_msg(&e));
    else if (g->support.support == 0)
        exp_gpm_why_not(d, gpu_arch_name(d->arch), x->inv->driver_version, g->support.reason,
                        sizeof(g->support.reason));
    if (x->gpm_logged && g->support.support == 0)
        log_warn(COMP,
                 "GPU has no GPU Performance Monitoring; its profiling fields are not exported",
                 "gpu=%u uuid=%s reason=\"%s\"", d->index, d->uuid, g->support.reason);
}

/* The GPU's sampler for its current MIG layout (made anew when the layout changed); NULL where
 * the GPU has no GPM or the sampler cannot be made (logged once). */
static struct gpu_gpm_sampler *gpm_sampler(struct exporter *x, const struct gpu_device *d,
                                           struct exp_gpm_slot *g)
{
    if (!g->asked)
        gpm_ask(x, d, g);
    if (g->support.support != 1)
        return NULL;
    if (g->sampler && exp_gpm_layout_equal(&g->layout, d))
        return g->sampler;
    if (g->sampler)
        log_info(COMP, "MIG layout changed; GPU Performance Monitoring sampler made anew",
                 "gpu=%u uuid=%s", d->index, d->uuid);
    gpu_gpm_sampler_free(g->sampler);
    g->sampler = NULL;
    g->last_ms = 0;
    memset(&g->prof, 0, sizeof(g->prof));
    struct err e = {0};
    if (gpu_gpm_sampler_new(x->lib, d, exp_gpm_max_age_ms(x->interval_ms), &g->sampler, &e) < 0) {
        x->self.errors[EXP_ERR_NVML]++;
        if (!g->failing)
            log_warn(COMP, "GPU Performance Monitoring sampler failed; retrying each collection",
                     "gpu=%u uuid=%s error=\"%s\"", d->index, d->uuid, err_msg(&e));
        g->failing = true;
        return NULL;
    }
    exp_gpm_layout_of(d, &g->layout);
    return g->sampler;
}

static void gpm_failed(struct exp_gpm_slot *g, const struct gpu_device *d, const char *what,
                       const struct err *e)
{
    if (!g->failing)
        log_warn(COMP, what, "gpu=%u uuid=%s error=\"%s\"", d->index, d->uuid, err_msg(e));
    g->failing = true;
}

/* This collection's profiling values of one GPU: a sample paired with the previous one. */
static void gpm_read(struct exporter *x, const struct gpu_device *d, struct exp_gpu_state *st,
                     uint64_t now)
{
    st->prof = NULL;
    struct exp_gpm_slot *g = gpm_slot(x, d->uuid);
    if (!g || !st->ok)
        return;
    struct gpu_gpm_sampler *s = gpm_sampler(x, d, g);
    if (!s)
        return;
    st->prof = &g->prof;
    if (!exp_gpm_due(g->last_ms, now))
        return; /* too soon for NVML: the last pair's values stand */
    struct err e = {0};
    g->last_ms = now;
    int r = gpu_gpm_sample(s, now, &e);
    if (r < 0) {
        memset(&g->prof, 0, sizeof(g->prof));
        if (r != GPU_ERR_LOST)
            x->self.errors[EXP_ERR_NVML]++;
        gpm_failed(g, d, "GPU Performance Monitoring sample failed", &e);
        return;
    }
    struct gpu_gpm_metrics m;
    r = gpu_gpm_metrics(s, &m, &e);
    exp_prof_from_gpm(r, &m, exp_gpm_max_age_ms(x->interval_ms), &g->prof);
    if (r < 0 && r != -EAGAIN && r != -ESTALE) {
        x->self.errors[EXP_ERR_NVML]++;
        gpm_failed(g, d, "GPU Performance Monitoring metrics failed", &e);
        return;
    }
    if (r == 0 && g->failing)
        log_info(COMP, "GPU Performance Monitoring works again", "gpu=%u uuid=%s", d->index,
                 d->uuid);
    if (r == 0)
        g->failing = false;
}

/* Once, after the first collection: the requested profiling fields some GPU cannot serve. */
static void gpm_notice(struct exporter *x)
{
    if (x->gpm_logged || !x->want_prof || !x->inv)
        return;
    x->gpm_logged = true;
    struct exp_gpm_support sup[EXP_GPM_GPUS];
    size_t n = 0;
    for (size_t i = 0; i < x->n_gpus && n < ARRAY_SIZE(sup); i++) {
        const struct gpu_device *d = &x->inv->gpus[i];
        struct exp_gpm_slot *g = gpm_slot(x, d->uuid);
        if (!g)
            continue;
        if (!g->asked && !x->gpus[i].ok) /* a lost or failing GPU: why it has none */
            snprintf(g->support.reason, sizeof(g->support.reason),
                     "the GPU could not be read at start");
        g->support.index = d->index;
        sup[n++] = g->support;
    }
    exp_prof_log_unsupported(x->counters, sup, n);
}

size_t exp_gpm_prime(struct exporter *x)
{
    struct err e = {0};
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    if (!x->want_prof || gpu_inventory_read(x->lib, &inv, &e) < 0)
        return 0;
    struct gpu_inventory *saved = x->inv;
    x->inv = inv; /* gpm_ask reads the driver version there */
    size_t n = 0;
    uint64_t now = now_ms_mono();
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *d = &inv->gpus[i];
        struct exp_gpm_slot *g = gpm_slot(x, d->uuid);
        struct gpu_gpm_sampler *s = g && !d->lost ? gpm_sampler(x, d, g) : NULL;
        if (s && gpu_gpm_sample(s, now, &e) == 0) {
            g->last_ms = now;
            n++;
        }
    }
    x->inv = saved;
    return n;
}

static void read_gpus(struct exporter *x)
{
    struct err e = {0};
    struct gpu_inventory *inv = NULL;
    if (gpu_inventory_read(x->lib, &inv, &e) < 0) {
        x->self.errors[EXP_ERR_INVENTORY]++;
        log_warn(COMP, "inventory read failed; keeping the previous one", "error=\"%s\"",
                 err_msg(&e));
    } else {
        struct exp_gpu_state *gpus = xcalloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*gpus));
        gpu_inventory_free(x->inv);
        free(x->gpus);
        x->inv = inv;
        x->gpus = gpus;
        x->n_gpus = inv->n_gpus;
    }
    for (size_t i = 0; i < x->n_gpus; i++) {
        struct exp_gpu_state *st = &x->gpus[i];
        const struct gpu_device *d = &x->inv->gpus[i];
        memset(&st->sample, 0, sizeof(st->sample));
        err_clear(&e);
        int r = gpu_sample_read(x->lib, d->index, &st->sample, &e);
        st->lost = st->sample.lost || d->lost || r == GPU_ERR_LOST;
        st->ok = r >= 0 && !st->lost;
        if (st->lost) {
            x->self.errors[EXP_ERR_GPU_LOST]++;
            log_debug(COMP, "GPU lost", "gpu=%u uuid=%s", d->index, d->uuid);
        } else if (r < 0) {
            x->self.errors[EXP_ERR_NVML]++;
            log_warn(COMP, "GPU sample failed", "gpu=%u uuid=%s error=\"%s\"", d->index, d->uuid,
                     err_msg(&e));
        }
        clock_events_count(x, d->uuid, st);
        xid_history(x, d->uuid, st);
        if (x->want_prof)
            gpm_read(x, d, st, now_ms_mono());
    }
    gpm_notice(x);
}

int exp_collect(struct exporter *x, struct err *e)
{
    uint64_t t0 = now_us_mono();
    read_gpus(x);
    if (x->kubernetes)
        refresh_pods(x);
    x->self.errors[EXP_ERR_EVENTS] = atomic_load(&x->event_errors);
    x->self.collections++;
    x->self.last_collection_unix_s = now_ms_real() / 1000.0;
    x->self.last_collection_duration_s = (now_us_mono() - t0) / 1e6;
    x->self.kubernetes = x->kubernetes;

    struct exp_render_input in = {.counters = x->counters,
                                  .inv = x->inv,
                                  .gpus = x->gpus,
                                  .hostname = x->hostname,
                                  .lower_hostname = x->lower_hostname,
                                  .kubernetes = x->kubernetes,
                                  .pods = &x->pods,
                                  .self = &x->self,
                                  .xid_window_ms = x->xid_window_ms};
    _cleanup_sbuf_ struct sbuf text, om;
    sbuf_init(&text, SNAPSHOT_LIMIT);
    sbuf_init(&om, SNAPSHOT_LIMIT);
    if (exp_render(&in, PROM_FORMAT_TEXT, &text) < 0 ||
        exp_render(&in, PROM_FORMAT_OPENMETRICS, &om) < 0)
        return err_set(e, -ENOBUFS, "rendering metrics: more than %u bytes", SNAPSHOT_LIMIT);
    struct exp_snapshot *fresh = xcalloc(1, sizeof(*fresh));
    atomic_init(&fresh->refs, 1);
    fresh->text_len = text.len;
    fresh->om_len = om.len;
    fresh->text = sbuf_steal(&text);
    fresh->om = sbuf_steal(&om);

    pthread_mutex_lock(&x->lock);
    struct exp_snapshot *old = x->snap;
    x->snap = fresh;
    pthread_mutex_unlock(&x->lock);
    exp_snapshot_unref(old);
    return 0;
}

/* Whether a GPU has a GPM sampler with its first sample taken (its values need a second). */
static bool gpm_sampling(const struct exporter *x)
{
    for (size_t i = 0; i < x->n_gpm; i++)
        if (x->gpm[i].sampler && x->gpm[i].last_ms)
            return true;
    return false;
}

void *exp_collector_thread(void *arg)
{
    struct exporter *x = arg;
    /* The profiling fields need two samples: the collection after the first comes within a
     * second, so that they do not wait a whole interval to appear. */
    uint64_t first = x->interval_ms;
    if (gpm_sampling(x) && first > 1000)
        first = 1000;
    uint64_t next = now_ms_mono() + first;
    while (!stop_wait_until(x->stop, next)) {
        struct err e = {0};
        if (exp_collect(x, &e) < 0)
            log_error(COMP, "collection failed", "error=\"%s\"", err_msg(&e));
        next += x->interval_ms;
        uint64_t now = now_ms_mono();
        if (next <= now) /* fell behind: skip, don't burst */
            next = now + x->interval_ms;
    }
    return NULL;
}
