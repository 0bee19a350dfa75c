/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GetPreferredAllocation.
 *
 * Full GPUs: go-gpuallocator's best-effort policy (dp_besteffort, dp-besteffort.c: an exact
 * search over the topology's interchangeable GPUs). Its work is bounded by DP_BE_BUDGET per
 * request, shared by the request's containers, so a request listing many containers costs no
 * more than one hard search: the server's loop thread, which also writes the ListAndWatch
 * health updates, is never busy for long.
 *
 * Replicas and MIG devices: NVIDIA's greedy policies over physical GPUs: distributed takes the
 * candidate whose GPU has the fewest allocated devices, packed the most; ties go to the GPU
 * picked least often in this request, then to request order.
 */
#include <string.h>

#include "device-plugin.h"

/* ---- the request over device IDs ----------------------------------------------------------- */

static const struct dp_device *find_dev(const struct dp_resource *r, const char *id)
{
    return dp_resource_find(r, id);
}

static int greedy(const struct dp_plan *p, const struct dp_resource *r,
                  const struct dp_device **cand, size_t n_cand, size_t needed,
                  const struct dp_device **out, struct err *e)
{
    if (n_cand < needed)
        return err_set(e, -EINVAL, "not enough available devices to satisfy allocation");
    unsigned ng = p->n_gpus ? p->n_gpus : 1;
    _cleanup_free_ unsigned *total = xcalloc(ng, sizeof(unsigned));
    _cleanup_free_ unsigned *avail = xcalloc(ng, sizeof(unsigned));
    _cleanup_free_ unsigned *picked = xcalloc(ng, sizeof(unsigned));
    _cleanup_free_ bool *taken = xcalloc(n_cand ? n_cand : 1, sizeof(bool));
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].gpu < ng)
            total[r->devices[i].gpu]++;
    for (size_t i = 0; i < n_cand; i++)
        avail[cand[i]->gpu]++;
    bool packed = p->opts.shared_policy == DPCONFIG_ALLOC_PACKED;
    for (size_t k = 0; k < needed; k++) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < n_cand; i++) {
            if (taken[i])
                continue;
            if (best == SIZE_MAX) {
                best = i;
                continue;
            }
            unsigned gi = cand[i]->gpu, gb = cand[best]->gpu;
            unsigned ai = total[gi] - avail[gi], ab = total[gb] - avail[gb];
            if (ai != ab) {
                if (packed ? ai > ab : ai < ab)
                    best = i;
                continue;
            }
            if (picked[gi] < picked[gb])
                best = i;
        }
        taken[best] = true;
        avail[cand[best]->gpu]--;
        picked[cand[best]->gpu]++;
        out[k] = cand[best];
    }
    return 0;
}

int dp_preferred(const struct dp_plan *p, const struct dp_resource *r, const char *const *avail,
                 size_t n_avail, const char *const *must, size_t n_must, int size,
                 const char **ret_ids, size_t *ret_n, struct err *e)
{
    uint64_t budget = DP_BE_BUDGET;
    return dp_preferred_budget(p, r, avail, n_avail, must, n_must, size, &budget, ret_ids, ret_n,
                               e);
}

int dp_preferred_budget(const struct dp_plan *p, const struct dp_resource *r,
                        const char *const *avail, size_t n_avail, const char *const *must,
                        size_t n_must, int size, uint64_t *budget, const char **ret_ids,
                        size_t *ret_n, struct err *e)
{
    if (size <= 0)
        return err_set(e, -EINVAL, "invalid allocation size %d", size);
    if ((size_t)size > r->n_devices)
        return err_set(e, -EINVAL, "allocation size %d is more than the %zu devices of '%s'", size,
                       r->n_devices, r->name);
    if (n_must > (size_t)size)
        return err_set(e, -EINVAL, "%zu must-include devices for an allocation of size %d", n_must,
                       size);
    /* Unique known devices, in request order. */
    _cleanup_free_ const struct dp_device **av = xcalloc(n_avail + 1, sizeof(*av));
    _cleanup_free_ const struct dp_device **mu = xcalloc(n_must + 1, sizeof(*mu));
    size_t na = 0, nm = 0;
    for (size_t i = 0; i < n_avail; i++) {
        const struct dp_device *d = find_dev(r, avail[i]);
        if (!d)
            return err_set(e, -ENOENT, "unknown device in available list of '%s': %s", r->name,
                           avail[i] ? avail[i] : "(null)");
        bool dup = false;
        for (size_t j = 0; j < na && !dup; j++)
            dup = av[j] == d;
        if (!dup)
            av[na++] = d;
    }
    for (size_t i = 0; i < n_must; i++) {
        const struct dp_device *d = find_dev(r, must[i]);
        if (!d)
            return err_set(e, -ENOENT, "unknown must-include device of '%s': %s", r->name,
                           must[i] ? must[i] : "(null)");
        bool dup = false, in_av = false;
        for (size_t j = 0; j < nm && !dup; j++)
            dup = mu[j] == d;
        for (size_t j = 0; j < na && !in_av; j++)
            in_av = av[j] == d;
        if (!in_av)
            return err_set(e, -EINVAL, "must-include device %s is not in the available list",
                           must[i]);
        if (!dup)
            mu[nm++] = d;
    }

    bool full_gpus = r->replicas <= 1;
    for (size_t i = 0; i < r->n_devices && full_gpus; i++)
        full_gpus = !r->devices[i].is_mig;

    if (full_gpus) {
        _cleanup_free_ unsigned *ag = xcalloc(na + 1, sizeof(unsigned));
        _cleanup_free_ unsigned *mg = xcalloc(nm + 1, sizeof(unsigned));
        _cleanup_free_ unsigned *out = xcalloc((size_t)size, sizeof(unsigned));
        for (size_t i = 0; i < na; i++)
            ag[i] = av[i]->gpu;
        for (size_t i = 0; i < nm; i++)
            mg[i] = mu[i]->gpu;
        int rr = dp_besteffort_budget(p->pair_score, p->n_gpus, ag, na, mg, nm, (unsigned)size,
                                      budget, out);
        if (rr == -E2BIG)
            return err_set(e, rr, "%zu available GPUs is more than the supported %d", na,
                           DP_BE_MAX_SLOTS);
        if (rr < 0) {
            *ret_n = 0; /* nothing to prefer; the kubelet decides */
            return 0;
        }
        for (int i = 0; i < size; i++)
            for (size_t j = 0; j < na; j++)
                if (av[j]->gpu == out[i]) {
                    ret_ids[i] = av[j]->id;
                    break;
                }
        *ret_n = (size_t)size;
        return 0;
    }

    _cleanup_free_ const struct dp_device **cand = xcalloc(na + 1, sizeof(*cand));
    size_t nc = 0;
    for (size_t i = 0; i < na; i++) {
        bool is_must = false;
        for (size_t j = 0; j < nm && !is_must; j++)
            is_must = mu[j] == av[i];
        if (!is_must)
            cand[nc++] = av[i];
    }
    _cleanup_free_ const struct dp_device **picked = xcalloc((size_t)size, sizeof(*picked));
    int rr = greedy(p, r, cand, nc, (size_t)size - nm, picked, e);
    if (rr < 0)
        return rr;
    size_t k = 0;
    for (size_t i = 0; i < nm; i++)
        ret_ids[k++] = mu[i]->id;
    for (size_t i = 0; i < (size_t)size - nm; i++)
        ret_ids[k++] = picked[i]->id;
    *ret_n = k;
    return 0;
}
