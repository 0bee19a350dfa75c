/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which GPUs' compute time slice a claim's prepare sets and its unprepare sets back
 * (dra-plugin.h). Pure.
 */
#include <assert.h>
#include <string.h>

#include "dra-plugin.h"

unsigned dra_interval_smi(enum dra_interval i)
{
    assert((unsigned)i <= DRA_INTERVAL_LONG);
    return (unsigned)i; /* the enum's order is nvidia-smi's numbering */
}

/* Whether device d of a claim is a whole GPU whose interval the claim sets. */
static bool sets_interval(const struct dra_prepared_device *d)
{
    return d->type == DRA_GPU && d->sharing.strategy == DRA_SHARE_TIME_SLICING && d->uuid[0];
}

size_t dra_timeslice_prepare_plan(const struct dra_claim *c, struct dra_timeslice *ret)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_devices; i++) {
        const struct dra_prepared_device *d = &c->devices[i];
        if (!sets_interval(d))
            continue;
        strlcpy_s(ret[n].uuid, d->uuid, sizeof(ret[n].uuid));
        ret[n].interval = d->sharing.interval;
        n++;
    }
    return n;
}

/* The interval the claims of cs other than c ask for GPU uuid: the last prepared one's that
 * sets one, else Default. */
static enum dra_interval others_ask(const struct dra_claim *c, const struct dra_claims *cs,
                                    const char *uuid)
{
    enum dra_interval want = DRA_INTERVAL_DEFAULT;
    for (size_t k = 0; cs && k < cs->n; k++) {
        const struct dra_claim *o = cs->v[k];
        if (o == c || strcmp(o->ref.uid, c->ref.uid) == 0)
            continue;
        for (size_t j = 0; j < o->n_devices; j++)
            if (sets_interval(&o->devices[j]) && strcmp(o->devices[j].uuid, uuid) == 0)
                want = o->devices[j].sharing.interval;
    }
    return want;
}

size_t dra_timeslice_unprepare_plan(const struct dra_claim *c, const struct dra_claims *cs,
                                    struct dra_timeslice *ret)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_devices; i++) {
        const struct dra_prepared_device *d = &c->devices[i];
        if (!sets_interval(d))
            continue;
        enum dra_interval want = others_ask(c, cs, d->uuid);
        if (want == d->sharing.interval)
            continue;
        strlcpy_s(ret[n].uuid, d->uuid, sizeof(ret[n].uuid));
        ret[n].interval = want;
        n++;
    }
    return n;
}
