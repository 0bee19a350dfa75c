/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The best-effort policy of GetPreferredAllocation for full GPUs (go-gpuallocator's rules):
 * pad the available GPUs to a multiple of the request size, split them into sets of that size
 * (the padding all in one set, the must-include GPUs all in one set without padding), score a
 * split as the sum over its sets of their pairwise link scores, keep the best split (the first
 * in enumeration order on ties) and return its best set holding every must-include GPU (the
 * first on ties). Scoring the whole split, not one greedy set, is the point: links are not
 * hierarchical, so the locally best set can strand the rest of the node.
 *
 * Enumeration order: the next set always holds the lowest remaining slot (slots are the
 * available GPUs in request order, then the padding) and the sets holding it are tried in
 * lexicographic order; "first on ties" means the lexicographically first split.
 *
 * The search is exact without enumerating splits:
 *  1. Alike GPUs are grouped: two GPUs are twins when they score the same with every other
 *     available GPU. Twins score the same with each other too (twin-ness is transitive), so
 *     the best score of splitting what remains depends only on how many of each group remain.
 *     The must-include GPUs are one more group of one unit, the padding another (both all or
 *     nothing); groups are ordered by their lowest slot, the padding last.
 *  2. best(state) is a dynamic programme over those counts, memoised: each split is counted
 *     once, by the set holding a unit of the lowest remaining group, chosen as counts per
 *     group; best(state) = max over those sets of their score plus best(state without them).
 *     Two 8-GPU NVLink domains are 2 groups: a few hundred states. With no two GPUs alike
 *     the states are the subsets of the GPUs (2^16 for 16).
 *  3. The lexicographically first best split is walked over the slots: at each step the first
 *     set (holding the lowest remaining slot, in lexicographic order) whose score plus
 *     best(rest) equals best(remaining) is taken. The group order makes the walk's states
 *     best()'s own where no GPUs are alike, so it adds little work.
 * Work (sets chosen in 2 and 3) is charged to the request's budget; when it is spent, or the
 * states would not fit DP_BE_MAX_STATES, the answer is a greedy set grown from the
 * must-include GPUs. For 16 GPUs or fewer the states always fit, and one search stays within
 * a fresh budget (the hardest, 16 GPUs with no two alike and size 6: ~850,000 sets);
 * tests/device-plugin/test-dp-besteffort.c checks the answers against the enumeration.
 */
#include <assert.h>
#include <limits.h>
#include <string.h>

#include "device-plugin.h"

#define BE_UNKNOWN    0ull
#define BE_INFEASIBLE UINT64_MAX /* memo: value + 1, 0 unknown, UINT64_MAX no valid split */
#define BE_MAX_GRP    (DP_BE_MAX_SLOTS + 2)

/* A group: `cap` units of `unit` slots each. Twins are groups of 1-slot units; the
 * must-include GPUs are one unit of n_must slots, the padding one unit of n_pad slots (both
 * all or nothing). Groups are ordered by their lowest slot, the padding last. */
struct be {
    unsigned n_real, n_pad, size;
    uint64_t real_mask, pad_mask, must_mask; /* slots */
    unsigned n_must;
    /* slot x slot scores: pair (i, j) scores what the caller's matrix gives for the lower slot
     * first; padding scores 0 */
    uint64_t score[DP_BE_MAX_SLOTS][DP_BE_MAX_SLOTS];

    unsigned n_grp;
    int must_grp, pad_grp;         /* -1: none */
    int slot_grp[DP_BE_MAX_SLOTS]; /* every slot's group */
    unsigned cap[BE_MAX_GRP], unit[BE_MAX_GRP];
    uint64_t own[BE_MAX_GRP];   /* the score inside one unit (the must-include GPUs') */
    uint64_t intra[BE_MAX_GRP]; /* two units of the group */
    uint64_t inter[BE_MAX_GRP][BE_MAX_GRP];

    /* state: units remaining per group, mixed radix */
    size_t stride[BE_MAX_GRP], n_states;
    uint64_t *memo;
    unsigned cnt[BE_MAX_GRP]; /* the units remaining in the state being expanded */

    uint64_t work, limit;
    bool spent;
};

/* One set being chosen in best(): the groups taken so far and how many units of each, the
 * slots remaining in groups g.. (untouched by the choice so far), the best total found. */
struct be_pick {
    unsigned grp[BE_MAX_GRP], k[BE_MAX_GRP], n;
    unsigned from[BE_MAX_GRP + 1];
    bool must;
    uint64_t best;
};

static uint64_t be_best(struct be *b, size_t state);

/* Chooses how many units of groups g.. complete the set being built with `left` more slots;
 * `first` is the group that gives at least one (the lowest remaining). */
static void be_pick_rest(struct be *b, struct be_pick *pk, unsigned g, unsigned first,
                         unsigned left, uint64_t score, size_t state)
{
    if (left == 0) {
        if (b->work >= b->limit) {
            b->spent = true;
            return;
        }
        b->work++;
        uint64_t rest = be_best(b, state);
        if (rest != BE_INFEASIBLE && (pk->best == BE_INFEASIBLE || score + rest > pk->best))
            pk->best = score + rest;
        return;
    }
    for (; g < b->n_grp && !b->spent && pk->from[g] >= left; g++) {
        unsigned c = b->cnt[g];
        if (c && !((int)g == b->pad_grp && pk->must)) { /* no padding with must-include GPUs */
            uint64_t with = 0;
            for (unsigned i = 0; i < pk->n; i++)
                with += pk->k[i] * b->inter[pk->grp[i]][g];
            unsigned most = left / b->unit[g];
            for (unsigned k = c < most ? c : most; k >= 1; k--) {
                uint64_t add = k * b->own[g] + (uint64_t)k * (k - 1) / 2 * b->intra[g] + k * with;
                b->cnt[g] -= k;
                pk->grp[pk->n] = g;
                pk->k[pk->n] = k;
                pk->n++;
                bool was_must = pk->must;
                pk->must = pk->must || (int)g == b->must_grp;
                be_pick_rest(b, pk, g + 1, first, left - k * b->unit[g], score + add,
                             state - k * b->stride[g]);
                pk->must = was_must;
                pk->n--;
                b->cnt[g] += k;
            }
        }
        if (g == first)
            return; /* none of it is not an option */
    }
}

/* The best score of splitting what `state` holds (b->cnt: its units per group) into valid
 * sets, or BE_INFEASIBLE. Each split is counted once, by the set holding a unit of the lowest
 * remaining group. */
static uint64_t be_best(struct be *b, size_t state)
{
    if (state == 0)
        return 0;
    uint64_t *m = &b->memo[state];
    if (*m != BE_UNKNOWN)
        return *m == BE_INFEASIBLE ? BE_INFEASIBLE : *m - 1;
    struct be_pick pk = {.best = BE_INFEASIBLE};
    for (unsigned g = b->n_grp; g-- > 0;)
        pk.from[g] = pk.from[g + 1] + b->cnt[g] * b->unit[g];
    unsigned first = 0;
    while (!b->cnt[first])
        first++; /* state != 0 */
    be_pick_rest(b, &pk, first, first, b->size, 0, state);
    if (b->spent)
        return BE_INFEASIBLE; /* not memoised: the search stops */
    *m = pk.best == BE_INFEASIBLE ? BE_INFEASIBLE : pk.best + 1;
    return pk.best;
}

/* ---- the walk: the lexicographically first best split ----------------------------------- */

struct be_walk {
    uint64_t remaining; /* slots */
    uint64_t target;    /* best(remaining) */
    unsigned members[DP_BE_MAX_SLOTS];
    uint64_t found; /* the set taken, 0 while none */
    uint64_t found_score;
};

/* Loads b->cnt with the units of `slots` and returns its state. */
static size_t be_load(struct be *b, uint64_t slots)
{
    for (unsigned g = 0; g < b->n_grp; g++)
        b->cnt[g] = 0;
    for (uint64_t r = slots & b->real_mask & ~b->must_mask; r; r &= r - 1)
        b->cnt[b->slot_grp[__builtin_ctzll(r)]]++;
    if (slots & b->must_mask)
        b->cnt[b->must_grp] = 1;
    if (slots & b->pad_mask)
        b->cnt[b->pad_grp] = 1;
    size_t st = 0;
    for (unsigned g = 0; g < b->n_grp; g++)
        st += b->cnt[g] * b->stride[g];
    return st;
}

/* Candidates holding members[0..k-1], the rest from slots >= from, in lexicographic order. */
static void be_walk_choose(struct be *b, struct be_walk *w, unsigned k, unsigned from,
                           unsigned n_must_in, bool must_skipped, uint64_t score)
{
    if (k == b->size) {
        if (n_must_in && n_must_in != b->n_must)
            return;
        if (b->work >= b->limit) {
            b->spent = true;
            return;
        }
        b->work++;
        uint64_t set = 0;
        for (unsigned i = 0; i < k; i++)
            set |= 1ull << w->members[i];
        uint64_t rest = be_best(b, be_load(b, w->remaining & ~set));
        if (rest != BE_INFEASIBLE && score + rest == w->target) {
            w->found = set;
            w->found_score = score;
        }
        return;
    }
    unsigned n_slots = b->n_real + b->n_pad;
    for (unsigned i = from; i < n_slots; i++) {
        if (!(w->remaining & (1ull << i)))
            continue;
        if (i >= b->n_real) {
            /* padding: all of it, to the end of the set, never with must-include GPUs */
            if (i == b->n_real && b->size - k == b->n_pad && !n_must_in) {
                for (unsigned p = 0; p < b->n_pad; p++)
                    w->members[k + p] = b->n_real + p;
                be_walk_choose(b, w, b->size, n_slots, n_must_in, must_skipped, score);
            }
            return;
        }
        bool is_must = (b->must_mask >> i) & 1;
        if (!is_must || !must_skipped) {
            uint64_t add = 0;
            for (unsigned j = 0; j < k; j++)
                add += b->score[w->members[j]][i];
            w->members[k] = i;
            be_walk_choose(b, w, k + 1, i + 1, n_must_in + is_must, must_skipped, score + add);
            if (w->found || b->spent)
                return;
        }
        if (is_must) {
            if (n_must_in)
                return; /* leaving it out splits the must-include GPUs */
            must_skipped = true;
        }
    }
}

/* ---- setup ---------------------------------------------------------------------------- */

static bool twins(const struct be *b, unsigned u, unsigned v)
{
    for (unsigned w = 0; w < b->n_real; w++)
        if (w != u && w != v && b->score[u][w] != b->score[v][w])
            return false;
    return true;
}

/* Groups, their scores and the state strides; false when the states would not fit. */
static bool be_group(struct be *b)
{
    unsigned rep[BE_MAX_GRP]; /* a slot of each group */
    b->n_grp = 0;
    b->must_grp = b->pad_grp = -1;
    for (unsigned u = 0; u < b->n_real; u++) {
        bool must = (b->must_mask >> u) & 1;
        unsigned g = 0;
        if (must)
            g = b->must_grp >= 0 ? (unsigned)b->must_grp : b->n_grp;
        else
            while (g < b->n_grp && ((int)g == b->must_grp || !twins(b, u, rep[g])))
                g++;
        if (g == b->n_grp) {
            rep[g] = u;
            b->cap[g] = 0;
            b->unit[g] = must ? b->n_must : 1;
            b->n_grp++;
            if (must)
                b->must_grp = (int)g;
        } else if (!must && b->cap[g] == 1) {
            b->intra[g] = b->score[rep[g]][u]; /* the same for any two twins */
        }
        if (!must || !b->cap[g])
            b->cap[g]++;
        b->slot_grp[u] = (int)g;
    }
    if (b->n_pad) {
        unsigned g = b->n_grp++;
        b->pad_grp = (int)g;
        b->cap[g] = 1;
        b->unit[g] = b->n_pad;
        for (unsigned u = b->n_real; u < b->n_real + b->n_pad; u++)
            b->slot_grp[u] = (int)g;
    }
    /* twins score the same with any GPU outside their group, so a representative's scores
     * are the group's; the must-include unit's scores sum over its GPUs */
    for (unsigned g = 0; g < b->n_grp; g++)
        for (unsigned h = 0; h < b->n_grp; h++)
            b->inter[g][h] = 0;
    for (unsigned u = 0; u < b->n_real; u++)
        for (unsigned v = 0; v < b->n_real; v++) {
            int g = b->slot_grp[u], h = b->slot_grp[v];
            if (g == h)
                continue;
            bool u_counts = g == b->must_grp || rep[g] == u;
            bool v_counts = h == b->must_grp || rep[h] == v;
            if (u_counts && v_counts)
                b->inter[g][h] += b->score[u][v];
        }
    if (b->must_grp >= 0)
        for (unsigned i = 0; i < b->n_real; i++)
            for (unsigned j = i + 1; j < b->n_real; j++)
                if ((b->must_mask >> i) & (b->must_mask >> j) & 1)
                    b->own[b->must_grp] += b->score[i][j];

    size_t n = 1;
    for (unsigned g = 0; g < b->n_grp; g++) {
        b->stride[g] = n;
        if (n > DP_BE_MAX_STATES / (b->cap[g] + 1))
            return false;
        n *= b->cap[g] + 1;
    }
    b->n_states = n;
    return true;
}

/* The lexicographically first best split's best qualifying set, or 0 when the work ran out. */
static uint64_t be_search(struct be *b)
{
    uint64_t all = b->real_mask | b->pad_mask;
    b->memo = xcalloc(b->n_states, sizeof(*b->memo));
    struct be_walk w = {.remaining = all};
    w.target = be_best(b, be_load(b, all));
    if (b->spent)
        return 0;
    assert(w.target != BE_INFEASIBLE); /* checked by the caller: a split always exists */
    if (w.target == BE_INFEASIBLE)
        return 0;

    uint64_t chosen = 0, chosen_score = 0;
    while (w.remaining) {
        w.found = 0;
        w.members[0] = (unsigned)__builtin_ctzll(w.remaining);
        bool first_must = (b->must_mask >> w.members[0]) & 1;
        be_walk_choose(b, &w, 1, w.members[0] + 1, first_must, false, 0);
        if (b->spent)
            return 0;
        assert(w.found); /* best(remaining) is reached by some set */
        if (!w.found)
            return 0;
        uint64_t set = w.found;
        if ((set & b->must_mask) == b->must_mask && !(set & b->pad_mask) &&
            (!chosen || w.found_score > chosen_score)) {
            chosen = set;
            chosen_score = w.found_score;
        }
        w.remaining &= ~set;
        w.target -= w.found_score;
    }
    return chosen;
}

static void be_greedy_fill(const struct be *b, uint64_t *chosen)
{
    while ((unsigned)__builtin_popcountll(*chosen) < b->size) {
        unsigned best_i = 0;
        uint64_t best_gain = 0;
        bool have = false;
        for (unsigned i = 0; i < b->n_real; i++) {
            if (*chosen & (1ull << i))
                continue;
            uint64_t g = 0;
            for (unsigned j = 0; j < b->n_real; j++)
                if (*chosen & (1ull << j))
                    g += b->score[i][j];
            if (!have || g > best_gain) {
                have = true;
                best_gain = g;
                best_i = i;
            }
        }
        *chosen |= 1ull << best_i;
    }
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
    _cleanup_free_ struct be *b = xcalloc(1, sizeof(*b));
    b->n_real = (unsigned)n_avail;
    b->n_pad = (unsigned)(padded - n_avail);
    b->size = size;
    b->real_mask = n_avail == 64 ? ~0ull : (1ull << n_avail) - 1;
    b->pad_mask = (padded == 64 ? ~0ull : (1ull << padded) - 1) & ~b->real_mask;
    b->limit = *budget;
    for (size_t i = 0; i < n_must; i++) {
        size_t j = 0;
        while (j < n_avail && avail[j] != must[i])
            j++;
        if (j == n_avail)
            return -EINVAL;
        b->must_mask |= 1ull << j;
    }
    b->n_must = (unsigned)__builtin_popcountll(b->must_mask);
    for (size_t i = 0; i < n_avail; i++)
        for (size_t j = i + 1; j < n_avail; j++)
            b->score[i][j] = b->score[j][i] = pair_score[avail[i] * n_gpus + avail[j]];

    uint64_t chosen = 0;
    if (size == 1) {
        /* Every GPU alone; all sets score 0, so the first set holding the must-include GPU */
        chosen = b->must_mask ? b->must_mask & -b->must_mask : 1;
    } else if (be_group(b)) {
        chosen = be_search(b);
        free(b->memo);
        *budget -= b->work < *budget ? b->work : *budget;
    }
    if (!chosen) {
        /* too many states, or the budget was spent: grow from must by the best gain */
        chosen = b->must_mask;
        be_greedy_fill(b, &chosen);
    }
    unsigned k = 0;
    for (unsigned i = 0; i < n_avail; i++)
        if (chosen & (1ull << i))
            ret[k++] = avail[i];
    return 0;
}
