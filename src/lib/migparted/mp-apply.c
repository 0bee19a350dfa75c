/* SPDX-License-Identifier: Apache-2.0 */
/* The NVML edge: the node's GPUs read into struct mp_gpu, a plan applied with rollback. */
#include <string.h>

#include "migparted.h"

#define COMPONENT "mig-parted"

static void gpu_clear(struct mp_gpu *g)
{
    free(g->profiles);
    free(g->instances);
}

void mp_node_free(struct mp_node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n_gpus; i++)
        gpu_clear(&n->gpus[i]);
    free(n->gpus);
    free(n);
}

static int gpu_fill(struct gpu_lib *lib, const struct gpu_device *d, struct mp_gpu *g,
                    struct err *e)
{
    g->index = d->index;
    strlcpy_s(g->model, d->name, sizeof(g->model));
    g->pci_device_id = d->pci_device_id;
    g->pci_subsystem_id = d->pci_subsystem_id;
    g->mig_capable = d->mig_capable && !d->lost;
    g->mig_enabled = d->mig_enabled;
    g->mig_pending = d->mig_pending;
    if (!g->mig_capable)
        return 0;
    int r = gpu_mig_profiles(lib, d->index, &g->profiles, &g->n_profiles, e);
    if (r == GPU_ERR_NOT_SUPPORTED) {
        /* Some drivers list the profiles only with MIG enabled: the plan says so. */
        log_debug(COMPONENT, "no MIG profiles listed", "gpu=%u reason=\"%s\"", d->index,
                  err_msg(e));
        err_clear(e);
    } else if (r < 0) {
        return err_prefix(e, "GPU %u", d->index);
    }
    if (!d->mig_enabled || d->n_mig == 0)
        return 0;
    g->instances = xcalloc(d->n_mig, sizeof(*g->instances));
    for (size_t i = 0; i < d->n_mig; i++) {
        const struct gpu_mig_device *m = &d->mig[i];
        struct mp_instance *in = &g->instances[g->n_instances++];
        struct mp_profile_key k;
        struct err ignored = {0};
        if (mp_profile_key_parse(m->profile, &k, &ignored) == 0) {
            strlcpy_s(in->gi, k.gi, sizeof(in->gi));
            in->ci_slices = k.ci_slices;
        } else {
            strlcpy_s(in->gi, m->profile, sizeof(in->gi));
        }
        in->start = m->gi_placement_start;
        in->size = m->gi_placement_size;
        in->gi_id = m->gi_id;
    }
    return 0;
}

int mp_node_read(struct gpu_lib *lib, struct mp_node **ret, struct err *e)
{
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    int r = gpu_inventory_read(lib, &inv, e);
    if (r < 0)
        return err_prefix(e, "read the GPUs");
    _cleanup_(mp_node_freep) struct mp_node *n = xcalloc(1, sizeof(*n));
    n->gpus = xcalloc(inv->n_gpus + 1, sizeof(*n->gpus));
    for (size_t i = 0; i < inv->n_gpus; i++) {
        if ((r = gpu_fill(lib, &inv->gpus[i], &n->gpus[i], e)) < 0)
            return r;
        n->n_gpus++;
    }
    *ret = steal_ptr(&n);
    return 0;
}

static int set_mode(struct gpu_lib *lib, unsigned gpu, bool enable, struct mp_apply_result *res,
                    struct err *e)
{
    struct gpu_mig_mode m;
    int r = gpu_mig_set_mode(lib, gpu, enable, &m, e);
    if (r < 0)
        return r;
    if (m.reset_required || m.current != enable) {
        res->reset_required = true;
        return err_set(e, -EAGAIN,
                       "GPU %u: MIG mode %s is pending until the GPU is reset (the driver could "
                       "not reset it now)",
                       gpu, enable ? "enabled" : "disabled");
    }
    return 0;
}

static int create(struct gpu_lib *lib, unsigned gpu, const struct mp_instance *in, struct err *e)
{
    char profile[GPU_PROFILE_MAX + 8];
    mp_instance_profile(in, profile, sizeof(profile));
    int r = gpu_mig_create_at(lib, gpu, profile, in->start, NULL, NULL, e);
    return r < 0 ? err_prefix(e, "create %s at slice %u", profile, in->start) : 0;
}

/* GPU g to plan p. */
static int gpu_apply(struct gpu_lib *lib, const struct mp_gpu *g, const struct mp_gpu_plan *p,
                     bool mode_only, struct mp_apply_result *res, struct err *e)
{
    int r;
    if (!p->mig_enabled) {
        if (!mode_only && g->mig_enabled && (r = gpu_mig_destroy_all(lib, g->index, e)) < 0)
            return r;
        return set_mode(lib, g->index, false, res, e);
    }
    if (!g->mig_enabled && (r = set_mode(lib, g->index, true, res, e)) < 0)
        return r;
    if (mode_only)
        return 0;
    if ((r = gpu_mig_destroy_all(lib, g->index, e)) < 0)
        return r;
    for (size_t i = 0; i < p->n_instances; i++)
        if ((r = create(lib, g->index, &p->instances[i], e)) < 0)
            return r;
    return 0;
}

/* GPU back to the layout g describes: its mode, and its GPU instances at their placements (one
 * compute instance each, the first the GPU instance had). */
static int gpu_restore(struct gpu_lib *lib, const struct mp_gpu *g, struct mp_apply_result *res,
                       struct err *e)
{
    int r;
    if (!g->mig_enabled) {
        r = gpu_mig_destroy_all(lib, g->index, e);
        if (r < 0 && r != GPU_ERR_NOT_SUPPORTED)
            return r;
        err_clear(e);
        return set_mode(lib, g->index, false, res, e);
    }
    if ((r = set_mode(lib, g->index, true, res, e)) < 0 ||
        (r = gpu_mig_destroy_all(lib, g->index, e)) < 0)
        return r;
    for (size_t i = 0; i < g->n_instances; i++) {
        bool made = false;
        for (size_t k = 0; k < i && !made; k++)
            made = g->instances[k].gi_id == g->instances[i].gi_id;
        if (!made && (r = create(lib, g->index, &g->instances[i], e)) < 0)
            return r;
    }
    return 0;
}

/* Whether GPU i needs work: selected and not as the plan wants it. */
static bool needs(const struct mp_node *before, const struct mp_plan *p, size_t i, bool mode_only)
{
    struct err ignored = {0};
    return p->gpus[i].selected &&
           mp_gpu_matches(&before->gpus[i], &p->gpus[i], mode_only, &ignored) < 0;
}

/* The MIG modes of every GPU that needs another one (MP_APPLY_MODES_FIRST); touched[i]: GPU i
 * was (or was being) changed. *ret_failed: the GPU a failure stopped at. */
static int modes_first(struct gpu_lib *lib, const struct mp_node *before, const struct mp_plan *p,
                       bool *touched, struct mp_apply_result *res, size_t *ret_failed,
                       struct err *e)
{
    for (size_t i = 0; i < before->n_gpus; i++) {
        const struct mp_gpu *g = &before->gpus[i];
        if (!needs(before, p, i, true))
            continue;
        log_info(COMPONENT, "setting the MIG mode", "config=%s gpu=%u enable=%s", p->config,
                 g->index, p->gpus[i].mig_enabled ? "true" : "false");
        touched[i] = true;
        bool pending_before = res->reset_required;
        res->reset_required = false;
        int r = 0;
        if (!p->gpus[i].mig_enabled && g->mig_enabled)
            r = gpu_mig_destroy_all(lib, g->index, e);
        if (r == 0)
            r = set_mode(lib, g->index, p->gpus[i].mig_enabled, res, e);
        if (r == -EAGAIN && res->reset_required) {
            log_warn(COMPONENT, "MIG mode change pending until the GPU is reset",
                     "config=%s gpu=%u", p->config, g->index);
            err_clear(e);
            res->gpus_pending++;
            continue;
        }
        res->reset_required = pending_before;
        if (r < 0) {
            *ret_failed = i;
            return r;
        }
    }
    res->reset_required = res->gpus_pending > 0;
    return 0;
}

int mp_apply(struct gpu_lib *lib, const struct mp_node *before, const struct mp_plan *p,
             unsigned flags, struct mp_apply_result *ret, struct err *e)
{
    bool mode_only = flags & MP_APPLY_MODE_ONLY;
    struct mp_apply_result res = {0};
    if (p->n_gpus != before->n_gpus)
        return err_set(e, -ESTALE, "config %s was planned for %zu GPUs, the node has %zu",
                       p->config, p->n_gpus, before->n_gpus);
    _cleanup_free_ bool *touched = xcalloc(before->n_gpus + 1, sizeof(*touched));
    size_t i = 0;
    int r = 0;
    bool modes_done = (flags & MP_APPLY_MODES_FIRST) && !mode_only;
    if (modes_done) {
        r = modes_first(lib, before, p, touched, &res, &i, e);
        if (r == 0 && res.gpus_pending > 0) {
            if (ret)
                *ret = res;
            return 0;
        }
    }
    for (size_t k = 0; r == 0 && k < before->n_gpus; k++) {
        if (!needs(before, p, k, mode_only))
            continue;
        res.gpus_changed++;
        if (modes_done && !p->gpus[k].mig_enabled)
            continue; /* disabled, its instances destroyed first: done */
        log_info(COMPONENT, "applying", "config=%s gpu=%u", p->config, before->gpus[k].index);
        touched[k] = true;
        i = k;
        r = gpu_apply(lib, &before->gpus[k], &p->gpus[k], mode_only, &res, e);
    }
    if (r == 0) {
        if (ret)
            *ret = res;
        return 0;
    }
    err_prefix(e, "config %s: GPU %u", p->config, before->gpus[i].index);
    log_warn(COMPONENT, "apply failed; restoring the previous layout", "config=%s error=\"%s\"",
             p->config, err_msg(e));
    res.rolled_back = true;
    for (size_t k = before->n_gpus; k-- > 0;) {
        if (!touched[k])
            continue;
        struct err re = {0};
        struct mp_apply_result dummy = {0};
        if (gpu_restore(lib, &before->gpus[k], &dummy, &re) < 0) {
            res.rollback_failed = true;
            log_error(COMPONENT, "rollback failed", "gpu=%u error=\"%s\"", before->gpus[k].index,
                      err_msg(&re));
            _cleanup_free_ char *first = xstrdup(err_msg(e));
            err_set(e, r, "%s; rolling GPU %u back failed too, its layout is unknown: %s", first,
                    before->gpus[k].index, err_msg(&re));
        }
    }
    if (ret)
        *ret = res;
    return r;
}
