/* SPDX-License-Identifier: Apache-2.0 */
/* The profiling fields' decisions (DCGM_FI_PROF_*, from GPU Performance Monitoring): which
 * sampler answers become series, when a collection samples, when a sampler is made anew, and
 * why a GPU has none. Pure: the collector (collector.c) owns the samplers and the clock. */
#include <string.h>

#include "exporter.h"

uint64_t exp_gpm_max_age_ms(uint64_t interval_ms)
{
    uint64_t slack = interval_ms > 1000 ? interval_ms : 1000;
    return interval_ms > UINT64_MAX - slack ? UINT64_MAX : interval_ms + slack;
}

bool exp_gpm_due(uint64_t prev_ms, uint64_t now_ms)
{
    return prev_ms == 0 || now_ms < prev_ms || now_ms - prev_ms >= EXP_GPM_MIN_GAP_MS;
}

void exp_prof_from_gpm(int rc, const struct gpu_gpm_metrics *m, uint64_t max_age_ms,
                       struct exp_prof *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (rc < 0 || !m || m->interval_ms == 0 || (max_age_ms && m->interval_ms > max_age_ms))
        return;
    ret->ok = true;
    ret->interval_ms = m->interval_ms;
    ret->gpu = m->gpu;
    size_t n = m->n_gi < GPU_GPM_GI_MAX ? m->n_gi : GPU_GPM_GI_MAX;
    for (size_t i = 0; i < n; i++) {
        if (m->gi[i].error != 0 || m->gi[i].prof.valid == 0)
            continue;
        ret->gi[ret->n_gi].gi_id = m->gi[i].gi_id;
        ret->gi[ret->n_gi].prof = m->gi[i].prof;
        ret->n_gi++;
    }
}

static bool prof_get(const struct gpu_prof *p, enum gpu_prof_field f, double *ret)
{
    if ((unsigned)f >= GPU_PROF_COUNT || !(p->valid & (1u << f)))
        return false;
    *ret = p->value[f];
    return true;
}

bool exp_prof_value(const struct exp_prof *p, unsigned gi_id, enum gpu_prof_field f, double *ret)
{
    if (!p || !p->ok)
        return false;
    if (gi_id == EXP_WHOLE_GPU)
        return prof_get(&p->gpu, f, ret);
    for (size_t i = 0; i < p->n_gi; i++)
        if (p->gi[i].gi_id == gi_id)
            return prof_get(&p->gi[i].prof, f, ret);
    return false;
}

void exp_gpm_layout_of(const struct gpu_device *d, struct exp_gpm_layout *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->mig = d->mig_enabled;
    for (size_t i = 0; d->mig_enabled && i < d->n_mig; i++) {
        bool seen = false;
        for (size_t k = 0; k < ret->n && !seen; k++)
            seen = ret->gi[k].gi_id == d->mig[i].gi_id;
        if (seen || ret->n >= ARRAY_SIZE(ret->gi))
            continue;
        ret->gi[ret->n].gi_id = d->mig[i].gi_id;
        ret->gi[ret->n].profile_id = d->mig[i].gi_profile_id;
        ret->n++;
    }
}

bool exp_gpm_layout_equal(const struct exp_gpm_layout *a, const struct gpu_device *d)
{
    struct exp_gpm_layout b;
    exp_gpm_layout_of(d, &b);
    if (a->mig != b.mig || a->n != b.n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->gi[i].gi_id != b.gi[i].gi_id || a->gi[i].profile_id != b.gi[i].profile_id)
            return false;
    return true;
}

enum exp_gpm_why exp_gpm_why_not(const struct gpu_device *d, const char *arch,
                                 const char *driver_version, char *buf, size_t n)
{
    /* Hopper is compute capability 9.0; every architecture before it (Ada is 8.9) has no GPM. */
    if (d->cc_major > 0 && d->cc_major < 9) {
        snprintf(buf, n,
                 "%s is %s (compute capability %d.%d): GPU Performance Monitoring needs a Hopper "
                 "or newer GPU",
                 d->name, arch && *arch ? arch : "an architecture before Hopper", d->cc_major,
                 d->cc_minor);
        return EXP_GPM_NO_ARCH;
    }
    bool known = arch && *arch && strcmp(arch, "unknown") != 0;
    snprintf(buf, n,
             "the driver (%s) offers no GPU Performance Monitoring on %s (%s): it needs NVML 11.8 "
             "(R520) or later",
             driver_version && *driver_version ? driver_version : "version unknown", d->name,
             known ? arch : "architecture unknown");
    return EXP_GPM_NO_DRIVER;
}

/* GPU indices as ranges: "0-3,6". */
static void write_indices(struct sbuf *out, const unsigned *idx, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && idx[j + 1] == idx[j] + 1)
            j++;
        sbuf_addf(out, "%s%u", i ? "," : "", idx[i]);
        if (j > i)
            sbuf_addf(out, "-%u", idx[j]);
        i = j + 1;
    }
}

int exp_gpm_summary(const struct exp_gpm_support *g, size_t n, struct sbuf *out)
{
    int supported = 0;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (g[i].support > 0) {
            supported++;
            continue;
        }
        /* Each reason once, at its first GPU, with every GPU that has it. */
        bool earlier = false;
        for (size_t k = 0; k < i && !earlier; k++)
            earlier = g[k].support <= 0 && strcmp(g[k].reason, g[i].reason) == 0;
        if (earlier)
            continue;
        unsigned idx[64];
        size_t m = 0;
        for (size_t k = i; k < n && m < ARRAY_SIZE(idx); k++)
            if (g[k].support <= 0 && strcmp(g[k].reason, g[i].reason) == 0)
                idx[m++] = g[k].index;
        sbuf_addf(out, "%sgpu ", first ? "" : "; ");
        write_indices(out, idx, m);
        sbuf_addf(out, ": %s", g[i].reason);
        first = false;
    }
    int r = sbuf_check(out);
    return r < 0 ? r : supported;
}

size_t exp_prof_log_unsupported(const struct exp_counters *c, const struct exp_gpm_support *g,
                                size_t n)
{
    if (!exp_counters_want_prof(c))
        return 0;
    _cleanup_sbuf_ struct sbuf why;
    sbuf_init(&why, 4096);
    int supported = exp_gpm_summary(g, n, &why);
    if (supported < 0) { /* a reason per GPU, each long: too much for one line */
        sbuf_reset(&why);
        supported = 0;
        for (size_t i = 0; i < n; i++)
            supported += g[i].support > 0;
        sbuf_adds(&why, "several reasons; each GPU's is logged at debug level");
        for (size_t i = 0; i < n; i++)
            if (g[i].support <= 0)
                log_debug("exporter", "no GPU Performance Monitoring", "gpu=%u reason=\"%s\"",
                          g[i].index, g[i].reason);
    }
    if (n > 0 && (size_t)supported == n)
        return 0;
    const char *reason = n == 0 ? "no GPUs" : why.data;
    size_t lines = 0;
    for (size_t i = 0; i < c->n; i++) {
        const struct exp_field *f = c->items[i].field;
        if (f->src != EXP_SRC_PROF)
            continue;
        if (supported == 0)
            log_warn("exporter", "field not supported, not exported", "field=%s reason=\"%s\"",
                     f->name, reason);
        else
            log_warn("exporter", "field not supported on some GPUs", "field=%s reason=\"%s\"",
                     f->name, reason);
        lines++;
    }
    return lines;
}
