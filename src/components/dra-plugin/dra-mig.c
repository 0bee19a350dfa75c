/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MIG slices made on demand (dra-plugin.h): which slices a claim's prepare makes or adopts, and
 * which its unprepare destroys, from the claim, the checkpoint's other claims and the GPUs as
 * NVML lists them now. Pure.
 */
#include <string.h>

#include "dra-plugin.h"

static const struct gpu_device *parent_of(const struct gpu_inventory *inv, const char *uuid)
{
    for (size_t i = 0; inv && i < inv->n_gpus; i++)
        if (strcmp(inv->gpus[i].uuid, uuid) == 0)
            return &inv->gpus[i];
    return NULL;
}

static const struct gpu_mig_device *by_gi(const struct gpu_device *g, unsigned gi_id)
{
    for (size_t k = 0; k < g->n_mig; k++)
        if (g->mig[k].gi_id == gi_id)
            return &g->mig[k];
    return NULL;
}

static const struct gpu_mig_device *at_placement(const struct gpu_device *g,
                                                 const struct dra_prepared_device *d)
{
    for (size_t k = 0; k < g->n_mig; k++)
        if (g->mig[k].gi_profile_id == d->gi_profile_id && g->mig[k].gi_placement_start == d->start)
            return &g->mig[k];
    return NULL;
}

/* Whether a claim other than `self` made GPU instance gi_id on the GPU parent_uuid. */
static bool made_by_other(const struct dra_claims *cs, const struct dra_claim *self,
                          const char *parent_uuid, unsigned gi_id)
{
    for (size_t i = 0; cs && i < cs->n; i++) {
        const struct dra_claim *o = cs->v[i];
        if (o == self || strcmp(o->ref.uid, self->ref.uid) == 0)
            continue;
        for (size_t k = 0; k < o->n_devices; k++) {
            const struct dra_prepared_device *d = &o->devices[k];
            if (d->created && d->gi_id == gi_id && strcmp(d->parent_uuid, parent_uuid) == 0)
                return true;
        }
    }
    return false;
}

static void adopt(struct dra_prepared_device *d, const struct gpu_mig_device *mg)
{
    strlcpy_s(d->uuid, mg->uuid, sizeof(d->uuid));
    d->gi_id = mg->gi_id;
    d->ci_id = mg->ci_id;
    d->created = true;
}

int dra_mig_prepare_plan(struct dra_claim *c, bool resumed, const struct gpu_inventory *inv,
                         const struct dra_claims *cs, struct dra_mig_create *ret, size_t *ret_n,
                         struct err *e)
{
    const char *ns = c->ref.ns, *name = c->ref.name;
    size_t n = 0;
    for (size_t i = 0; i < c->n_devices; i++) {
        struct dra_prepared_device *d = &c->devices[i];
        if (d->type != DRA_MIG_DYNAMIC)
            continue;
        const struct gpu_device *g = parent_of(inv, d->parent_uuid);
        if (!g)
            return err_set(e, -ENODEV, "claim %s/%s: device %s: its GPU %s is gone", ns, name,
                           d->device, d->parent_uuid);
        if (d->created) {
            const struct gpu_mig_device *mg = by_gi(g, d->gi_id);
            if (mg && mg->gi_profile_id == d->gi_profile_id && mg->gi_placement_start == d->start) {
                adopt(d, mg);
                continue;
            }
            /* recorded but gone (a GPU reset): made again */
            d->created = false;
            d->uuid[0] = 0;
            d->gi_id = d->ci_id = 0;
        }
        const struct gpu_mig_device *mg = at_placement(g, d);
        if (mg) {
            if (!resumed || made_by_other(cs, c, g->uuid, mg->gi_id))
                return err_set(e, -EBUSY,
                               "claim %s/%s: device %s: GPU %u already has GPU instance %u (%s) "
                               "at placement %u; it is not this claim's",
                               ns, name, d->device, g->index, mg->gi_id, mg->profile, d->start);
            adopt(d, mg);
            continue;
        }
        /* another instance overlapping the placement: NVML refuses the creation, naming it */
        struct dra_mig_create *k = &ret[n++];
        k->device = i;
        k->gpu_index = g->index;
        strlcpy_s(k->profile, d->profile, sizeof(k->profile));
        k->start = d->start;
    }
    *ret_n = n;
    return 0;
}

size_t dra_mig_unprepare_plan(const struct dra_claim *c, const struct gpu_inventory *inv,
                              const struct dra_claims *cs, struct dra_mig_destroy *ret)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_devices; i++) {
        const struct dra_prepared_device *d = &c->devices[i];
        if (d->type != DRA_MIG_DYNAMIC)
            continue;
        const struct gpu_device *g = parent_of(inv, d->parent_uuid);
        if (!g)
            continue;
        const struct gpu_mig_device *mg = NULL;
        if (d->created)
            mg = by_gi(g, d->gi_id);
        else if (c->state == DRA_PREPARE_STARTED)
            mg = at_placement(g, d);
        if (!mg || mg->gi_profile_id != d->gi_profile_id || mg->gi_placement_start != d->start ||
            made_by_other(cs, c, g->uuid, mg->gi_id))
            continue;
        /* one entry per GPU instance */
        bool seen = false;
        for (size_t k = 0; k < n; k++)
            seen |= ret[k].gpu_index == g->index && ret[k].gi_id == mg->gi_id;
        if (seen)
            continue;
        ret[n++] = (struct dra_mig_destroy){.device = i, .gpu_index = g->index, .gi_id = mg->gi_id};
    }
    return n;
}
