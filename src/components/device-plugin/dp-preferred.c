/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GetPreferredAllocation.
 *
 * Full GPUs: go-gpuallocator's best-effort policy. Partition all available GPUs (padded to a
 * multiple of the request size) into sets of that size, score each partition as the sum over
 * its sets of the pairwise link scores, keep the best partition (strictly greater wins; first
 * found on ties), and return its best set holding every must-include GPU. Scoring the whole
 * split, not one greedy set, is the point: links are not hierarchical, so the locally best set
 * can strand the rest of the node.
 *
 * The enumeration is combinatorial. Branch and bound keeps it small: a branch whose upper bound
 * (each remaining GPU with its best partners) cannot beat the best partition strictly is cut,
 * which never changes the answer (ties keep the first found). It is also bounded by
 * DP_BE_BUDGET visited sets per request (shared by its containers, so a request listing many
 * containers costs no more than one hard search: the server's loop thread, which also writes
 * the ListAndWatch health updates, is never busy for long), after which the best partition
 * seen so far is used, or, when none qualified yet, a greedy set that grows from the
 * must-include GPUs.
 *
 * Replicas and MIG devices: NVIDIA's greedy policies over physical GPUs: distributed takes the
 * candidate whose GPU has the fewest allocated devices, packed the most; ties go to the GPU
 * picked least often in this request, then to request order.
 */
#include <string.h>

#include "device-plugin.h"

#define DP_BE_MAX_SLOTS 64

struct be {
    unsigned n, size;
    unsigned score[DP_BE_MAX_SLOTS][DP_BE_MAX_SLOTS]; /* slot x slot; pads score 0 */
    uint64_t pad_mask, must_mask;
    uint64_t sets[DP_BE_MAX_SLOTS];
    unsigned set_score[DP_BE_MAX_SLOTS];
    unsigned n_sets;
    uint64_t cur;
    bool have_best;
    uint64_t best;
    uint64_t best_sets[DP_BE_MAX_SLOTS];
    unsigned best_set_score[DP_BE_MAX_SLOTS];
    unsigned best_n;
    uint64_t visited, limit;
    /* per slot, the other slots by descending score, for the upper bound */
    unsigned char order[DP_BE_MAX_SLOTS][DP_BE_MAX_SLOTS];
};

/* An upper bound of the best score the remaining slots can still add: a set's score is half the
 * sum over its members of their scores to the others, and no member can do better than its
 * size-1 best partners among the remaining slots. */
static uint64_t be_bound(const struct be *b, uint64_t remaining)
{
    uint64_t twice = 0;
    for (uint64_t rem = remaining; rem; rem &= rem - 1) {
        unsigned v = (unsigned)__builtin_ctzll(rem);
        unsigned taken = 0;
        for (unsigned k = 0; k + 1 < b->n && taken + 1 < b->size; k++) {
            unsigned u = b->order[v][k];
            if (remaining & (1ull << u)) {
                twice += b->score[v][u];
                taken++;
            }
        }
    }
    return twice / 2;
}

static unsigned set_score(const struct be *b, const unsigned *members, unsigned k)
{
    unsigned s = 0;
    for (unsigned i = 0; i < k; i++)
        for (unsigned j = i + 1; j < k; j++)
            s += b->score[members[i]][members[j]];
    return s;
}

static void be_iterate(struct be *b, uint64_t remaining);

/* Chooses the rest of the set that starts with members[0], in lexicographic order. */
static void be_choose(struct be *b, uint64_t remaining, unsigned *members, unsigned k,
                      unsigned from)
{
    if (b->visited >= b->limit)
        return;
    if (k == b->size) {
        b->visited++;
        uint64_t set = 0;
        for (unsigned i = 0; i < k; i++)
            set |= 1ull << members[i];
        uint64_t pads = set & b->pad_mask;
        if (pads && pads != b->pad_mask)
            return; /* some but not all padding */
        uint64_t must = set & b->must_mask;
        if (must && (must != b->must_mask || pads))
            return; /* the must-include GPUs split, or sharing a set with padding */
        unsigned s = set_score(b, members, k);
        b->sets[b->n_sets] = set;
        b->set_score[b->n_sets] = s;
        b->n_sets++;
        b->cur += s;
        be_iterate(b, remaining & ~set);
        b->cur -= s;
        b->n_sets--;
        return;
    }
    for (unsigned i = from; i < b->n; i++) {
        if (!(remaining & (1ull << i)))
            continue;
        members[k] = i;
        be_choose(b, remaining, members, k + 1, i + 1);
        if (b->visited >= b->limit)
            return;
    }
}

static void be_iterate(struct be *b, uint64_t remaining)
{
    /* Nothing below can beat the best strictly: prune (ties keep the first found anyway). */
    if (remaining && b->have_best && b->cur + be_bound(b, remaining) <= b->best)
        return;
    if (remaining == 0) {
        if (!b->have_best || b->cur > b->best) {
            b->have_best = true;
            b->best = b->cur;
            b->best_n = b->n_sets;
            memcpy(b->best_sets, b->sets, b->n_sets * sizeof(b->sets[0]));
            memcpy(b->best_set_score, b->set_score, b->n_sets * sizeof(b->set_score[0]));
        }
        return;
    }
    unsigned members[DP_BE_MAX_SLOTS];
    members[0] = (unsigned)__builtin_ctzll(remaining);
    be_choose(b, remaining, members, 1, members[0] + 1);
}

int dp_besteffort(const unsigned *pair_score, unsigned n_gpus, const unsigned *avail,
                  size_t n_avail, const unsigned *must, size_t n_must, unsigned size, unsigned *ret)
{
    uint64_t budget = DP_BE_BUDGET;
    return dp_besteffort_budget(pair_score, n_gpus, avail, n_avail, must, n_must, size, &budget,
                                ret);
}

int dp_besteffort_budget(const unsigned *pair_score, unsigned n_gpus, const unsigned *avail,
                         size_t n_avail, const unsigned *must, size_t n_must, unsigned size,
                         uint64_t *budget, unsigned *ret)
{
    if (size == 0 || n_avail < size || n_must > size || n_must > n_avail)
        return -EINVAL;
    size_t padded = (n_avail + size - 1) / size * size;
    if (padded > DP_BE_MAX_SLOTS)
        return -E2BIG;
    for (size_t i = 0; i < n_avail; i++)
        if (avail[i] >= n_gpus)
            return -EINVAL;
    struct be *b = xcalloc(1, sizeof(*b));
    b->limit = *budget;
    b->n = (unsigned)padded;
    b->size = size;
    for (size_t i = n_avail; i < padded; i++)
        b->pad_mask |= 1ull << i;
    for (size_t i = 0; i < n_must; i++) {
        size_t j = 0;
        while (j < n_avail && avail[j] != must[i])
            j++;
        if (j == n_avail) {
            free(b);
            return -EINVAL;
        }
        b->must_mask |= 1ull << j;
    }
    for (size_t i = 0; i < n_avail; i++)
        for (size_t j = 0; j < n_avail; j++)
            if (i != j)
                b->score[i][j] = pair_score[avail[i] * n_gpus + avail[j]];

    for (unsigned v = 0; v < b->n; v++) {
        unsigned k = 0;
        for (unsigned u = 0; u < b->n; u++)
            if (u != v)
                b->order[v][k++] = (unsigned char)u;
        for (unsigned i = 1; i < k; i++) /* insertion sort, descending score */
            for (unsigned j = i;
                 j > 0 && b->score[v][b->order[v][j]] > b->score[v][b->order[v][j - 1]]; j--) {
                unsigned char t = b->order[v][j];
                b->order[v][j] = b->order[v][j - 1];
                b->order[v][j - 1] = t;
            }
    }

    if (size == 1) {
        /* Every GPU alone; all sets score 0, so the first set holding the must-include GPU. */
        unsigned pick = 0;
        if (b->must_mask)
            pick = (unsigned)__builtin_ctzll(b->must_mask);
        ret[0] = avail[pick];
        free(b);
        return 0;
    }

    be_iterate(b, (b->n == 64) ? ~0ull : ((1ull << b->n) - 1));
    *budget -= b->visited < *budget ? b->visited : *budget;

    uint64_t chosen = 0;
    if (b->have_best) {
        bool found = false;
        unsigned best_s = 0;
        for (unsigned i = 0; i < b->best_n; i++) {
            uint64_t s = b->best_sets[i];
            if ((s & b->must_mask) != b->must_mask || (s & b->pad_mask))
                continue;
            if (!found || b->best_set_score[i] > best_s) {
                found = true;
                best_s = b->best_set_score[i];
                chosen = s;
            }
        }
    }
    if (!chosen) {
        /* Budget spent before any partition qualified: grow from must by the best gain. */
        chosen = b->must_mask;
        while ((unsigned)__builtin_popcountll(chosen) < size) {
            unsigned best_i = 0, best_gain = 0;
            bool have = false;
            for (unsigned i = 0; i < n_avail; i++) {
                if (chosen & (1ull << i))
                    continue;
                unsigned g = 0;
                for (unsigned j = 0; j < n_avail; j++)
                    if (chosen & (1ull << j))
                        g += b->score[i][j];
                if (!have || g > best_gain) {
                    have = true;
                    best_gain = g;
                    best_i = i;
                }
            }
            chosen |= 1ull << best_i;
        }
    }
    unsigned k = 0;
    for (unsigned i = 0; i < n_avail; i++)
        if (chosen & (1ull << i))
            ret[k++] = avail[i];
    free(b);
    return 0;
}

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
