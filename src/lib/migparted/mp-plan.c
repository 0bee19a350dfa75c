/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A config resolved against the node's GPUs (which entry selects which GPU; the instances each
 * GPU gets, with the placement of each), the comparison with a GPU's current layout, and the
 * layout written back as a config. Pure.
 */
#include <stdlib.h>
#include <string.h>

#include "migparted.h"

#define MP_SLOTS_MAX 64 /* instances one GPU may be asked for (7 fit at most) */

void mp_instance_profile(const struct mp_instance *in, char *buf, size_t n)
{
    if (in->ci_slices)
        snprintf(buf, n, "%uc.%s", in->ci_slices, in->gi);
    else
        snprintf(buf, n, "%s", in->gi);
}

void mp_plan_free(struct mp_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_gpus; i++)
        free(p->gpus[i].instances);
    free(p->gpus);
    free(p->config);
    free(p);
}

static bool entry_selects(const struct mp_entry *en, const struct mp_gpu *g)
{
    bool listed = en->all_devices;
    for (size_t i = 0; !listed && i < en->n_devices; i++)
        listed = en->devices[i] == g->index;
    if (!listed)
        return false;
    if (en->n_filters == 0)
        return true;
    for (size_t i = 0; i < en->n_filters; i++) {
        const struct mp_filter *f = &en->filters[i];
        if (f->device_id == g->pci_device_id &&
            (!f->has_subsystem || f->subsystem_id == g->pci_subsystem_id))
            return true;
    }
    return false;
}

static const struct gpu_mig_profile *profile_find(const struct mp_gpu *g, const char *name)
{
    for (size_t i = 0; i < g->n_profiles; i++)
        if (strcmp(g->profiles[i].name, name) == 0)
            return &g->profiles[i];
    return NULL;
}

static unsigned compute_slices(const struct mp_gpu *g)
{
    unsigned max = 0;
    for (size_t i = 0; i < g->n_profiles; i++)
        if (g->profiles[i].slices > max)
            max = g->profiles[i].slices;
    return max;
}

static void profiles_list(const struct mp_gpu *g, struct sbuf *b)
{
    for (size_t i = 0; i < g->n_profiles; i++)
        sbuf_addf(b, "%s%s", i ? ", " : "", g->profiles[i].name);
}

/* ---- placements --------------------------------------------------------------------------- */

struct slot {
    const struct gpu_mig_profile *p;
    unsigned ci_slices;
    unsigned start, size;
};

static unsigned slot_size(const struct slot *s)
{
    return s->p->n_placements ? s->p->placements[0].size : 0;
}

static int slot_cmp(const void *a, const void *b)
{
    const struct slot *x = a, *y = b;
    if (slot_size(x) != slot_size(y))
        return slot_size(x) > slot_size(y) ? -1 : 1;
    if (x->p->slices != y->p->slices)
        return x->p->slices > y->p->slices ? -1 : 1;
    int c = strcmp(x->p->name, y->p->name);
    if (c)
        return c;
    return (int)x->ci_slices - (int)y->ci_slices;
}

static uint64_t span(unsigned start, unsigned size)
{
    if (size >= 64)
        return ~0ULL;
    return ((1ULL << size) - 1) << start;
}

/* Depth-first over the slots, largest first, each trying its placements from the highest start
 * down (the driver's own preference, which keeps the low slices for the large profiles); a slot
 * of the same profile as the one before only takes lower starts, so equal instances are not
 * tried in every order. */
static bool place(struct slot *s, size_t n, size_t i, uint64_t used)
{
    if (i == n)
        return true;
    const struct gpu_mig_profile *p = s[i].p;
    bool same = i > 0 && s[i - 1].p == p;
    for (size_t k = p->n_placements; k-- > 0;) {
        const struct gpu_mig_placement *pl = &p->placements[k];
        if (same && pl->start >= s[i - 1].start)
            continue;
        if (pl->start + pl->size > 64 || (used & span(pl->start, pl->size)))
            continue;
        s[i].start = pl->start;
        s[i].size = pl->size;
        if (place(s, n, i + 1, used | span(pl->start, pl->size)))
            return true;
    }
    return false;
}

static int gpu_plan(const struct mp_config *c, size_t entry, const struct mp_gpu *g,
                    struct mp_gpu_plan *out, struct err *e)
{
    const struct mp_entry *en = &c->entries[entry];
    out->selected = true;
    out->mig_enabled = en->mig_enabled;
    if (!en->mig_enabled)
        return 0;
    if (!g->mig_capable)
        return err_set(e, -EINVAL, "mig-configs.%s[%zu]: GPU %u (%s) is not MIG capable", c->name,
                       entry, g->index, g->model);
    if (g->n_profiles == 0)
        return err_set(e, -EINVAL, "mig-configs.%s[%zu]: GPU %u (%s) reports no MIG profiles",
                       c->name, entry, g->index, g->model);
    struct slot slots[MP_SLOTS_MAX];
    size_t n = 0;
    unsigned used_slices = 0;
    for (size_t i = 0; i < en->n_mig_devices; i++) {
        const struct mp_mig_device *d = &en->mig_devices[i];
        const struct gpu_mig_profile *p = profile_find(g, d->key.gi);
        if (!p) {
            struct sbuf b _cleanup_sbuf_;
            sbuf_init(&b, 1024);
            profiles_list(g, &b);
            return err_set(e, -ENOENT,
                           "mig-configs.%s[%zu]: GPU %u (%s) has no MIG profile \"%s\" (it "
                           "offers %s)",
                           c->name, entry, g->index, g->model, d->key.gi,
                           b.error ? "many" : b.data);
        }
        unsigned total = 0;
        for (size_t k = 0; k < en->n_mig_devices; k++)
            if (strcmp(en->mig_devices[k].key.gi, d->key.gi) == 0)
                total += en->mig_devices[k].count;
        if (total > p->max_count)
            return err_set(e, -ENOSPC,
                           "mig-configs.%s[%zu]: GPU %u (%s) holds at most %u x %s, the config "
                           "asks for %u",
                           c->name, entry, g->index, g->model, p->max_count, p->name, total);
        if (p->n_placements == 0)
            return err_set(e, -EINVAL, "mig-configs.%s[%zu]: GPU %u (%s): %s has no placements",
                           c->name, entry, g->index, g->model, p->name);
        for (unsigned k = 0; k < d->count; k++) {
            if (n == MP_SLOTS_MAX)
                return err_set(e, -ENOSPC, "mig-configs.%s[%zu]: more than %u instances", c->name,
                               entry, MP_SLOTS_MAX);
            slots[n++] = (struct slot){.p = p, .ci_slices = d->key.ci_slices};
            used_slices += p->slices;
        }
    }
    unsigned cap = compute_slices(g);
    if (used_slices > cap)
        return err_set(e, -ENOSPC,
                       "mig-configs.%s[%zu]: GPU %u (%s) has %u compute slices, the config asks "
                       "for %u",
                       c->name, entry, g->index, g->model, cap, used_slices);
    qsort(slots, n, sizeof(slots[0]), slot_cmp);
    if (!place(slots, n, 0, 0))
        return err_set(e, -ENOSPC,
                       "mig-configs.%s[%zu]: GPU %u (%s): the instances cannot coexist: no "
                       "choice of placements keeps them apart",
                       c->name, entry, g->index, g->model);
    out->instances = xcalloc(n + 1, sizeof(*out->instances));
    for (size_t i = 0; i < n; i++) {
        struct mp_instance *in = &out->instances[i];
        strlcpy_s(in->gi, slots[i].p->name, sizeof(in->gi));
        in->ci_slices = slots[i].ci_slices;
        in->start = slots[i].start;
        in->size = slots[i].size;
    }
    out->n_instances = n;
    return 0;
}

int mp_plan_make(const struct mp_config *c, const struct mp_gpu *gpus, size_t n_gpus,
                 struct mp_plan **ret, struct err *e)
{
    _cleanup_(mp_plan_freep) struct mp_plan *p = xcalloc(1, sizeof(*p));
    p->config = xstrdup(c->name);
    p->gpus = xcalloc(n_gpus + 1, sizeof(*p->gpus));
    p->n_gpus = n_gpus;
    size_t selected = 0;
    for (size_t i = 0; i < n_gpus; i++) {
        const struct mp_gpu *g = &gpus[i];
        p->gpus[i].index = g->index;
        size_t by = SIZE_MAX;
        for (size_t k = 0; k < c->n_entries; k++) {
            if (!entry_selects(&c->entries[k], g))
                continue;
            if (by != SIZE_MAX)
                return err_set(e, -EINVAL,
                               "mig-configs.%s: GPU %u (%s) is selected by entries %zu and %zu",
                               c->name, g->index, g->model, by, k);
            by = k;
        }
        if (by == SIZE_MAX)
            continue;
        selected++;
        int r = gpu_plan(c, by, g, &p->gpus[i], e);
        if (r < 0)
            return r;
    }
    if (selected == 0) {
        struct sbuf b _cleanup_sbuf_;
        sbuf_init(&b, 1024);
        for (size_t i = 0; i < n_gpus; i++)
            sbuf_addf(&b, "%s%u %s (0x%08X)", i ? ", " : "", gpus[i].index, gpus[i].model,
                      gpus[i].pci_device_id);
        return err_set(e, -ENOENT, "mig-configs.%s: selects none of this node's GPUs (%s)", c->name,
                       n_gpus == 0 ? "none"
                       : b.error   ? "many"
                                   : b.data);
    }
    *ret = steal_ptr(&p);
    return 0;
}

/* ---- comparison ---------------------------------------------------------------------------- */

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "1g.10gb x2, 3g.40gb x1" (sorted by profile), or "no instances". */
static void layout_describe(const struct mp_instance *in, size_t n, struct sbuf *b)
{
    if (n == 0) {
        sbuf_adds(b, "no instances");
        return;
    }
    char(*names)[GPU_PROFILE_MAX + 8] = xcalloc(n, sizeof(*names));
    const char **sorted = xcalloc(n, sizeof(*sorted));
    for (size_t i = 0; i < n; i++) {
        mp_instance_profile(&in[i], names[i], sizeof(names[i]));
        sorted[i] = names[i];
    }
    qsort(sorted, n, sizeof(*sorted), str_cmp);
    for (size_t i = 0, first = 1; i < n;) {
        size_t k = i;
        while (k < n && strcmp(sorted[k], sorted[i]) == 0)
            k++;
        sbuf_addf(b, "%s%s x%zu", first ? "" : ", ", sorted[i], k - i);
        first = 0;
        i = k;
    }
    free(sorted);
    free(names);
}

int mp_gpu_matches(const struct mp_gpu *g, const struct mp_gpu_plan *p, bool mode_only,
                   struct err *e)
{
    if (!p->selected)
        return 0;
    if (!g->mig_capable)
        return p->mig_enabled ? err_set(e, -ESTALE, "GPU %u is not MIG capable", g->index) : 0;
    if (g->mig_enabled != p->mig_enabled)
        return err_set(e, -ESTALE, "GPU %u: MIG mode is %s, wanted %s", g->index,
                       g->mig_enabled ? "enabled" : "disabled",
                       p->mig_enabled ? "enabled" : "disabled");
    if (mode_only || !p->mig_enabled)
        return 0;
    struct sbuf have _cleanup_sbuf_, want _cleanup_sbuf_;
    sbuf_init(&have, 4096);
    sbuf_init(&want, 4096);
    layout_describe(g->instances, g->n_instances, &have);
    layout_describe(p->instances, p->n_instances, &want);
    if (have.error || want.error)
        return err_set(e, -E2BIG, "GPU %u: layout too large to compare", g->index);
    if (strcmp(have.data, want.data) != 0)
        return err_set(e, -ESTALE, "GPU %u: has %s, wanted %s", g->index, have.data, want.data);
    return 0;
}

int mp_plan_matches(const struct mp_plan *p, const struct mp_gpu *gpus, size_t n_gpus,
                    bool mode_only, struct err *e)
{
    if (p->n_gpus != n_gpus)
        return err_set(e, -ESTALE, "the plan is for %zu GPUs, the node has %zu", p->n_gpus, n_gpus);
    for (size_t i = 0; i < n_gpus; i++) {
        int r = mp_gpu_matches(&gpus[i], &p->gpus[i], mode_only, e);
        if (r < 0)
            return err_prefix(e, "config %s", p->config);
    }
    return 0;
}

int mp_plan_reset_pending(const struct mp_plan *p, const struct mp_gpu *gpus, size_t n_gpus,
                          struct err *e)
{
    if (p->n_gpus != n_gpus)
        return 0;
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 1024);
    size_t n = 0;
    for (size_t i = 0; i < n_gpus; i++) {
        const struct mp_gpu *g = &gpus[i];
        const struct mp_gpu_plan *gp = &p->gpus[i];
        if (!gp->selected || !g->mig_capable || g->mig_enabled == gp->mig_enabled ||
            g->mig_pending != gp->mig_enabled)
            continue;
        sbuf_addf(&b, "%sGPU %u (MIG %s)", n++ ? ", " : "", g->index,
                  gp->mig_enabled ? "enabled" : "disabled");
    }
    if (n == 0)
        return 0;
    err_set(e, -EAGAIN,
            "config %s: the MIG mode of %s waits for a GPU reset the driver could not do live "
            "(reboot the node or reset the GPU%s to finish)",
            p->config, b.error ? "many GPUs" : b.data, n == 1 ? "" : "s");
    return 1;
}

/* ---- export -------------------------------------------------------------------------------- */

struct group {
    bool enabled;
    char *layout; /* layout_describe's text: equal text, equal layout */
    size_t first; /* the GPU whose instances are written */
    struct sbuf devices;
};

char *mp_export(const struct mp_gpu *gpus, size_t n_gpus, const char *name)
{
    struct group *groups = xcalloc(n_gpus + 1, sizeof(*groups));
    size_t n_groups = 0;
    for (size_t i = 0; i < n_gpus; i++) {
        const struct mp_gpu *g = &gpus[i];
        if (!g->mig_capable)
            continue;
        struct sbuf l _cleanup_sbuf_;
        sbuf_init(&l, 4096);
        if (g->mig_enabled)
            layout_describe(g->instances, g->n_instances, &l);
        else
            sbuf_adds(&l, "disabled");
        size_t k = 0;
        while (k < n_groups && !(groups[k].enabled == g->mig_enabled &&
                                 strcmp(groups[k].layout, l.data ? l.data : "") == 0))
            k++;
        if (k == n_groups) {
            groups[k] = (struct group){
                .enabled = g->mig_enabled, .layout = xstrdup(l.data ? l.data : ""), .first = i};
            sbuf_init(&groups[k].devices, 4096);
            n_groups++;
        }
        sbuf_addf(&groups[k].devices, "%s%u", groups[k].devices.len ? ", " : "", g->index);
    }
    struct sbuf b;
    sbuf_init(&b, 1 << 20);
    sbuf_addf(&b, "version: v1\nmig-configs:\n  %s:\n", name);
    if (n_groups == 0)
        sbuf_adds(&b, "    - devices: all\n      mig-enabled: false\n");
    for (size_t k = 0; k < n_groups; k++) {
        const struct group *gr = &groups[k];
        sbuf_addf(&b, "    - devices: [%s]\n      mig-enabled: %s\n",
                  gr->devices.data ? gr->devices.data : "", gr->enabled ? "true" : "false");
        if (!gr->enabled)
            continue;
        const struct mp_gpu *g = &gpus[gr->first];
        if (g->n_instances == 0) {
            sbuf_adds(&b, "      mig-devices: {}\n");
            continue;
        }
        sbuf_adds(&b, "      mig-devices:\n");
        /* counts per profile, in the sorted order layout_describe uses */
        char(*names)[GPU_PROFILE_MAX + 8] = xcalloc(g->n_instances, sizeof(*names));
        const char **sorted = xcalloc(g->n_instances, sizeof(*sorted));
        for (size_t i = 0; i < g->n_instances; i++) {
            mp_instance_profile(&g->instances[i], names[i], sizeof(names[i]));
            sorted[i] = names[i];
        }
        qsort(sorted, g->n_instances, sizeof(*sorted), str_cmp);
        for (size_t i = 0; i < g->n_instances;) {
            size_t j = i;
            while (j < g->n_instances && strcmp(sorted[j], sorted[i]) == 0)
                j++;
            sbuf_addf(&b, "        \"%s\": %zu\n", sorted[i], j - i);
            i = j;
        }
        free(sorted);
        free(names);
    }
    for (size_t k = 0; k < n_groups; k++) {
        free(groups[k].layout);
        sbuf_free(&groups[k].devices);
    }
    free(groups);
    if (sbuf_check(&b) < 0) {
        sbuf_free(&b);
        return NULL;
    }
    return sbuf_steal(&b);
}
