/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The best-effort policy of GetPreferredAllocation (dp_besteffort, dp-besteffort.c) against two
 * references kept here as test oracles:
 *  - ref_*: the rules as written (enumerate every split of the padded GPUs, keep the first one
 *    with the best score), for up to 9 GPUs;
 *  - oracle_*: the device plugin's search before the exact one: the same enumeration in the same
 *    order, cut where an admissible upper bound (each remaining GPU with its best partners)
 *    cannot beat the best split strictly, so it keeps the same first best split; it is fast
 *    enough for 16 GPUs. It is checked against ref_ on small inputs here too.
 * Tables: hand-derived answers on a DGX-1; the product's answers equal the oracle's on the
 * 8-GPU DGX-1 and DGX H100 and on 16-GPU topologies for every size and a set of
 * available/must-include subsets; the work stays far below the budget; a spent budget falls
 * back to a greedy set.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <time.h>

#include "device-plugin.h"

#define MAXG 16

/* ---- the oracle: exhaustive enumeration with an admissible bound ------------------------- */

#define OR_SLOTS 64

struct oracle {
    unsigned n, size;
    unsigned score[OR_SLOTS][OR_SLOTS]; /* slot x slot; padding scores 0 */
    uint64_t pad_mask, must_mask;
    unsigned first_pad;
    uint64_t sets[OR_SLOTS];
    unsigned set_score[OR_SLOTS];
    unsigned n_sets;
    uint64_t cur;
    bool have_best;
    uint64_t best;
    uint64_t best_sets[OR_SLOTS];
    unsigned best_set_score[OR_SLOTS];
    unsigned best_n;
    unsigned char order[OR_SLOTS][OR_SLOTS]; /* per slot, the others by descending score */
};

/* Twice a set's score is the sum over its members of their scores with the others; no member
 * does better than with its size-1 best partners among the remaining slots. */
static uint64_t or_bound(const struct oracle *b, uint64_t remaining)
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

static void or_iterate(struct oracle *b, uint64_t remaining);

static void or_choose(struct oracle *b, uint64_t remaining, unsigned *members, unsigned k,
                      unsigned from)
{
    if (k == b->size) {
        uint64_t set = 0;
        for (unsigned i = 0; i < k; i++)
            set |= 1ull << members[i];
        uint64_t pads = set & b->pad_mask;
        if (pads && pads != b->pad_mask)
            return; /* some but not all padding */
        uint64_t must = set & b->must_mask;
        if (must && (must != b->must_mask || pads))
            return; /* the must-include GPUs split, or with padding */
        unsigned s = 0;
        for (unsigned i = 0; i < k; i++)
            for (unsigned j = i + 1; j < k; j++)
                s += b->score[members[i]][members[j]];
        b->sets[b->n_sets] = set;
        b->set_score[b->n_sets] = s;
        b->n_sets++;
        b->cur += s;
        or_iterate(b, remaining & ~set);
        b->cur -= s;
        b->n_sets--;
        return;
    }
    for (unsigned i = from; i < b->n; i++) {
        if (!(remaining & (1ull << i)))
            continue;
        members[k] = i;
        if (i >= b->first_pad) {
            /* The padding is the last slots and members ascend: a set with all of it has the
             * first padding slot at k = size - pads and the rest after it; any other set with
             * padding would be skipped when complete. */
            bool in_pad = k > 0 && members[k - 1] >= b->first_pad;
            if (in_pad || (i == b->first_pad && b->size - k == b->n - b->first_pad))
                or_choose(b, remaining, members, k + 1, i + 1);
            return;
        }
        or_choose(b, remaining, members, k + 1, i + 1);
    }
}

static void or_iterate(struct oracle *b, uint64_t remaining)
{
    if (remaining && b->have_best && b->cur + or_bound(b, remaining) <= b->best)
        return; /* cannot beat the best strictly */
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
    unsigned members[OR_SLOTS];
    members[0] = (unsigned)__builtin_ctzll(remaining);
    or_choose(b, remaining, members, 1, members[0] + 1);
}

/* Same contract as dp_besteffort (without a budget). */
static int oracle_besteffort(const unsigned *pair_score, unsigned n_gpus, const unsigned *avail,
                             size_t n_avail, const unsigned *must, size_t n_must, unsigned size,
                             unsigned *ret)
{
    if (size == 0 || n_avail < size || n_must > size || n_must > n_avail)
        return -EINVAL;
    size_t padded = (n_avail + size - 1) / size * size;
    if (padded > OR_SLOTS)
        return -E2BIG;
    struct oracle *b = xcalloc(1, sizeof(*b));
    b->n = (unsigned)padded;
    b->size = size;
    b->first_pad = (unsigned)n_avail;
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
    uint64_t chosen = 0;
    if (size == 1) {
        chosen = b->must_mask ? b->must_mask & -b->must_mask : 1;
    } else {
        or_iterate(b, (b->n == 64) ? ~0ull : ((1ull << b->n) - 1));
        assert_true(b->have_best);
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
        assert_true(found);
    }
    unsigned k = 0;
    for (unsigned i = 0; i < n_avail; i++)
        if (chosen & (1ull << i))
            ret[k++] = avail[i];
    free(b);
    return 0;
}

/* ---- the plain reference: every split ---------------------------------------------------- */

struct ref {
    const unsigned *score; /* n_real x n_real; pads (>= n_real) score 0 */
    unsigned n, n_real, size, pads;
    uint64_t must;
    int sets[16][16];
    unsigned n_sets;
    long best;
    int best_sets[16][16];
    unsigned best_n;
};

static unsigned ref_set_score(const struct ref *r, const int *set)
{
    unsigned s = 0;
    for (unsigned i = 0; i < r->size; i++)
        for (unsigned j = i + 1; j < r->size; j++)
            if (set[i] < (int)r->n_real && set[j] < (int)r->n_real)
                s += r->score[set[i] * r->n_real + set[j]];
    return s;
}

static bool ref_ok(const struct ref *r, const int *set, bool need_all_must)
{
    unsigned pads = 0;
    uint64_t m = 0;
    for (unsigned i = 0; i < r->size; i++) {
        if (set[i] >= (int)r->n_real)
            pads++;
        else if (r->must & (1ull << set[i]))
            m |= 1ull << set[i];
    }
    if (need_all_must)
        return pads == 0 && m == r->must;
    return !(pads && pads != r->pads);
}

static void ref_iter(struct ref *r, uint64_t rem);

static void ref_choose(struct ref *r, uint64_t rem, int *set, unsigned k, unsigned from)
{
    if (k == r->size) {
        if (!ref_ok(r, set, false))
            return;
        memcpy(r->sets[r->n_sets++], set, sizeof(int) * r->size);
        uint64_t s = 0;
        for (unsigned i = 0; i < k; i++)
            s |= 1ull << set[i];
        ref_iter(r, rem & ~s);
        r->n_sets--;
        return;
    }
    for (unsigned i = from; i < r->n; i++)
        if (rem & (1ull << i)) {
            set[k] = (int)i;
            ref_choose(r, rem, set, k + 1, i + 1);
        }
}

static void ref_iter(struct ref *r, uint64_t rem)
{
    if (!rem) {
        bool has = false;
        long total = 0;
        for (unsigned i = 0; i < r->n_sets; i++) {
            has = has || ref_ok(r, r->sets[i], true);
            total += ref_set_score(r, r->sets[i]);
        }
        if (has && total > r->best) {
            r->best = total;
            r->best_n = r->n_sets;
            memcpy(r->best_sets, r->sets, sizeof(r->sets));
        }
        return;
    }
    int set[16];
    set[0] = __builtin_ctzll(rem);
    ref_choose(r, rem, set, 1, (unsigned)set[0] + 1);
}

/* The reference's answer over GPUs 0..n-1 (all available, in order). */
static void ref_besteffort(const unsigned *score, unsigned n, const unsigned *must, unsigned n_must,
                           unsigned size, unsigned *ret)
{
    struct ref r = {.score = score, .n_real = n, .size = size, .best = -1};
    r.n = (n + size - 1) / size * size;
    r.pads = r.n - n;
    for (unsigned i = 0; i < n_must; i++)
        r.must |= 1ull << must[i];
    if (size == 1) {
        ret[0] = n_must ? must[0] : 0;
        return;
    }
    ref_iter(&r, (1ull << r.n) - 1);
    assert_true(r.best >= 0);
    int best_i = -1;
    unsigned best_s = 0;
    for (unsigned i = 0; i < r.best_n; i++)
        if (ref_ok(&r, r.best_sets[i], true) &&
            (best_i < 0 || ref_set_score(&r, r.best_sets[i]) > best_s)) {
            best_i = (int)i;
            best_s = ref_set_score(&r, r.best_sets[i]);
        }
    for (unsigned i = 0; i < size; i++)
        ret[i] = (unsigned)r.best_sets[best_i][i];
}

/* ---- topologies --------------------------------------------------------------------------- */

struct topo {
    const char *name;
    unsigned n;
    unsigned score[MAXG * MAXG];
};

/* DGX-1 (Volta) hybrid cube-mesh, as the device plugin scores it (see test-dp-core.c):
 * PCIe 50 same switch, 20 same CPU, 10 across; plus 100 per NVLink. */
static const unsigned dgx1_nvlinks[8][8] = {
    {0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 0, 2, 0, 0, 1, 0},
    {2, 1, 2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
    {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0},
};

static void topo_dgx1(struct topo *t)
{
    t->name = "DGX-1 V100";
    t->n = 8;
    for (unsigned a = 0; a < 8; a++)
        for (unsigned b = 0; b < 8; b++) {
            unsigned lvl = GPU_TOPO_SYSTEM;
            if (a / 4 == b / 4)
                lvl = a / 2 == b / 2 ? GPU_TOPO_SINGLE : GPU_TOPO_NODE;
            t->score[a * 8 + b] = a == b ? 0 : dp_pair_score(lvl, dgx1_nvlinks[a][b]);
        }
}

/* DGX H100 (sim/fleets/dgx-h100.yaml): 2 NVLinks per pair through the NVSwitches; GPUs 0-3 on
 * one CPU, 4-7 on the other. */
static void topo_dgx_h100(struct topo *t)
{
    t->name = "DGX H100";
    t->n = 8;
    for (unsigned a = 0; a < 8; a++)
        for (unsigned b = 0; b < 8; b++)
            t->score[a * 8 + b] =
                a == b ? 0 : dp_pair_score(a / 4 == b / 4 ? GPU_TOPO_NODE : GPU_TOPO_SYSTEM, 2);
}

/* bench/deviceplugin/hgx-16.yaml: two 8-GPU NVLink domains (2 links per pair), one per CPU;
 * nothing links the domains. */
static void topo_hgx16(struct topo *t)
{
    t->name = "HGX 16";
    t->n = 16;
    for (unsigned a = 0; a < 16; a++)
        for (unsigned b = 0; b < 16; b++)
            t->score[a * 16 + b] = a == b ? 0
                                          : (a / 8 == b / 8 ? dp_pair_score(GPU_TOPO_NODE, 2)
                                                            : dp_pair_score(GPU_TOPO_SYSTEM, 0));
}

/* The same with 4 NVLinks between GPUs 0 and 1: they are alike only with each other, and
 * with GPU 1 must-include, GPU 0 is alike with none. */
static void topo_hgx16_pair(struct topo *t)
{
    topo_hgx16(t);
    t->name = "HGX 16, one pair with 4 links";
    t->score[0 * 16 + 1] = t->score[1 * 16 + 0] = dp_pair_score(GPU_TOPO_NODE, 4);
}

/* The same with pairs under one PCIe switch (0,1) (2,3) ... and 4 GPUs per PCIe host bridge:
 * fewer interchangeable GPUs (8 groups of 2). */
static void topo_hgx16_switches(struct topo *t)
{
    t->name = "HGX 16, PCIe switches";
    t->n = 16;
    for (unsigned a = 0; a < 16; a++)
        for (unsigned b = 0; b < 16; b++) {
            unsigned lvl = a / 8 != b / 8   ? GPU_TOPO_SYSTEM
                           : a / 2 == b / 2 ? GPU_TOPO_SINGLE
                           : a / 4 == b / 4 ? GPU_TOPO_HOSTBRIDGE
                                            : GPU_TOPO_NODE;
            t->score[a * 16 + b] = a == b ? 0 : dp_pair_score(lvl, a / 8 == b / 8 ? 2 : 0);
        }
}

/* No two GPUs alike: link counts from a fixed pseudo-random sequence (1-3 NVLinks inside a
 * half, some pairs without), PCIe level by distance. */
static void topo_irregular16(struct topo *t)
{
    t->name = "irregular 16";
    t->n = 16;
    unsigned seed = 77;
    for (unsigned a = 0; a < 16; a++)
        for (unsigned b = a; b < 16; b++) {
            seed = seed * 1103515245u + 12345u;
            unsigned links = a / 8 == b / 8 ? (seed >> 16) % 4 : (seed >> 16) % 7 == 0;
            unsigned lvl = a / 8 != b / 8   ? GPU_TOPO_SYSTEM
                           : a / 2 == b / 2 ? GPU_TOPO_SINGLE
                           : a / 4 == b / 4 ? GPU_TOPO_MULTIPLE
                                            : GPU_TOPO_NODE;
            unsigned s = a == b ? 0 : dp_pair_score(lvl, links);
            t->score[a * 16 + b] = t->score[b * 16 + a] = s;
        }
}

/* ---- helpers ------------------------------------------------------------------------------ */

static unsigned lcg(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 16;
}

static void shuffle(unsigned *v, unsigned n, unsigned *seed)
{
    for (unsigned i = n; i > 1; i--) {
        unsigned j = lcg(seed) % i, t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void fmt_set(char *buf, size_t len, const unsigned *v, unsigned n)
{
    size_t o = 0;
    buf[0] = 0;
    for (unsigned i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%u", i ? "," : "", v[i]);
}

/* One request: the product's answer must be the oracle's. Returns the product's work. */
static uint64_t check_case(const struct topo *t, const unsigned *avail, unsigned n_avail,
                           const unsigned *must, unsigned n_must, unsigned size)
{
    unsigned got[MAXG], want[MAXG];
    uint64_t budget = DP_BE_BUDGET;
    int r = dp_besteffort_budget(t->score, t->n, avail, n_avail, must, n_must, size, &budget, got);
    int w = oracle_besteffort(t->score, t->n, avail, n_avail, must, n_must, size, want);
    assert_int_equal(r, w);
    if (r < 0)
        return 0;
    for (unsigned i = 0; i < size; i++)
        if (got[i] != want[i]) {
            char a[128], m[64], g[128], o[128];
            fmt_set(a, sizeof(a), avail, n_avail);
            fmt_set(m, sizeof(m), must, n_must);
            fmt_set(g, sizeof(g), got, size);
            fmt_set(o, sizeof(o), want, size);
            fail_msg("%s: available [%s] must [%s] size %u: got [%s], the oracle [%s]", t->name, a,
                     m, size, g, o);
        }
    return DP_BE_BUDGET - budget;
}

/* ---- tests -------------------------------------------------------------------------------- */

struct be_case {
    const char *what;
    unsigned avail[8];
    size_t n_avail;
    unsigned must[4];
    size_t n_must;
    unsigned size;
    unsigned want[8]; /* in available order */
};

/* Hand-derived answers on the DGX-1. */
static void test_dgx1_table(void **state)
{
    (void)state;
    struct topo t;
    topo_dgx1(&t);
    assert_int_equal(t.score[2 * 8 + 3], 250);
    assert_int_equal(t.score[0 * 8 + 4], 210);
    assert_int_equal(t.score[0 * 8 + 2], 120);
    assert_int_equal(t.score[2 * 8 + 7], 10);
    static const struct be_case cases[] = {
        /* Pairs over all 8: the best split is {0,4}=210 {1,5}=210 {2,3}=250 {6,7}=250 = 920
         * (the all-220 split {0,3}{1,2}{4,7}{5,6} gives 880, switch pairs 800). Its best set:
         * {2,3} and {6,7} tie at 250, the first found ({2,3}) wins. */
        {"pairs", {0, 1, 2, 3, 4, 5, 6, 7}, 8, {0}, 0, 2, {2, 3}},
        /* Must include 0: the same 920 split; 0 is paired with 4 (210) although (0,3) scores
         * 220, because taking {0,3} leaves a worse split of the rest (at most 880). */
        {"pair with 0", {0, 1, 2, 3, 4, 5, 6, 7}, 8, {0}, 1, 2, {0, 4}},
        /* Quads: {0,1,2,3} and {4,5,6,7} score 1080 each (150+120+220+220+120+250); any quad
         * crossing sockets holds cross-CPU pairs of 10. First set wins the tie. */
        {"quads", {0, 1, 2, 3, 4, 5, 6, 7}, 8, {0}, 0, 4, {0, 1, 2, 3}},
        {"quad with 4", {0, 1, 2, 3, 4, 5, 6, 7}, 8, {4}, 1, 4, {4, 5, 6, 7}},
        /* Triples: 8 GPUs pad to 9. Best split {0,2,3}=590 {1,5,pad}=210 {4,6,7}=590 = 1390;
         * the padded set cannot be returned, {0,2,3} is the first best real set. */
        {"triples", {0, 1, 2, 3, 4, 5, 6, 7}, 8, {0}, 0, 3, {0, 2, 3}},
        /* With 5 required, the first 1390 split keeps 5 with the padding, so it does not
         * qualify; the next 1390 split {0,4,pad} {1,2,3} {5,6,7} does: {5,6,7}=590. */
        {"triple with 5", {0, 1, 2, 3, 4, 5, 6, 7}, 8, {5}, 1, 3, {5, 6, 7}},
        /* 6 available: {1,5}=210 {2,3}=250 {6,7}=250 = 710 beats e.g. {1,2}=220 {3,7}=110
         * {5,6}=220 = 550; best set {2,3} (first of the 250s). */
        {"pairs of six", {1, 2, 3, 5, 6, 7}, 6, {0}, 0, 2, {2, 3}},
        /* 4 GPUs given as 3,0,1,2: {3,0}=220 {1,2}=220 = 440 beats {3,2}=250 {0,1}=150 = 400:
         * the pair a greedy policy would take first (2,3) is not chosen. */
        {"global not greedy", {3, 0, 1, 2}, 4, {0}, 0, 2, {3, 0}},
        /* No NVLinks between the halves: {0,2}=120 {5,7}=120 = 240; tie, first. */
        {"same socket", {0, 2, 5, 7}, 4, {0}, 0, 2, {0, 2}},
        /* Size 1: every set scores 0; the must-include GPU, else the first available. */
        {"single", {6, 1, 2}, 3, {0}, 0, 1, {6}},
        {"single must", {6, 1, 2}, 3, {2}, 1, 1, {2}},
        /* Everything */
        {"all", {0, 1, 2, 3, 4, 5, 6, 7}, 8, {0}, 0, 8, {0, 1, 2, 3, 4, 5, 6, 7}},
    };
    for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
        unsigned out[8] = {0}, want[8] = {0};
        int r = dp_besteffort(t.score, 8, cases[c].avail, cases[c].n_avail, cases[c].must,
                              cases[c].n_must, cases[c].size, out);
        if (r != 0)
            fail_msg("case %s: %d", cases[c].what, r);
        assert_int_equal(oracle_besteffort(t.score, 8, cases[c].avail, cases[c].n_avail,
                                           cases[c].must, cases[c].n_must, cases[c].size, want),
                         0);
        for (unsigned i = 0; i < cases[c].size; i++) {
            if (out[i] != cases[c].want[i])
                fail_msg("case %s: element %u is %u, want %u", cases[c].what, i, out[i],
                         cases[c].want[i]);
            if (want[i] != cases[c].want[i])
                fail_msg("case %s: the oracle's element %u is %u, want %u", cases[c].what, i,
                         want[i], cases[c].want[i]);
        }
    }
    /* impossible requests */
    unsigned out[8];
    const unsigned av[] = {0, 1, 2}, mu[] = {5}, bad[] = {0, 9};
    assert_int_equal(dp_besteffort(t.score, 8, av, 3, NULL, 0, 4, out), -EINVAL);
    assert_int_equal(dp_besteffort(t.score, 8, av, 3, mu, 1, 2, out), -EINVAL);
    assert_int_equal(dp_besteffort(t.score, 8, av, 3, NULL, 0, 0, out), -EINVAL);
    assert_int_equal(dp_besteffort(t.score, 8, av, 3, av, 3, 2, out), -EINVAL);
    assert_int_equal(dp_besteffort(t.score, 8, bad, 2, NULL, 0, 1, out), -EINVAL);
    unsigned many[DP_BE_MAX_SLOTS + 1];
    for (unsigned i = 0; i < DP_BE_MAX_SLOTS + 1; i++)
        many[i] = i % 8;
    assert_int_equal(dp_besteffort(t.score, 8, many, DP_BE_MAX_SLOTS + 1, NULL, 0, 2, out), -E2BIG);
    /* 64 slots (each GPU listed 8 times): too many states for the exact search, a greedy set */
    unsigned big[DP_BE_MAX_SLOTS];
    for (unsigned size = 1; size <= DP_BE_MAX_SLOTS; size *= 4) {
        assert_int_equal(dp_besteffort(t.score, 8, many, DP_BE_MAX_SLOTS, many, 1, size, big), 0);
        assert_int_equal(big[0], 0); /* the must-include GPU, in available order */
    }
}

/* Random score matrices with many ties, up to 9 GPUs: the product, the oracle and the plain
 * reference agree. */
static void test_random_small(void **state)
{
    (void)state;
    unsigned seed = 12345;
    for (int iter = 0; iter < 1000; iter++) {
        unsigned n = 2 + lcg(&seed) % 8; /* 2..9 GPUs */
        unsigned score[81];
        if (iter % 2) {
            for (unsigned a = 0; a < n; a++)
                for (unsigned b = a; b < n; b++) {
                    unsigned v = a == b ? 0 : 10 * (1 + lcg(&seed) % 4); /* many ties */
                    score[a * n + b] = score[b * n + a] = v;
                }
        } else {
            /* GPUs of 2-3 kinds scoring by kind (many alike), one pair changed */
            unsigned kind[9], by_kind[9], kinds = 2 + lcg(&seed) % 2;
            for (unsigned a = 0; a < n; a++)
                kind[a] = lcg(&seed) % kinds;
            for (unsigned k = 0; k < kinds * kinds; k++)
                by_kind[k] = 10 * (1 + lcg(&seed) % 5);
            for (unsigned a = 0; a < n; a++)
                for (unsigned b = a; b < n; b++) {
                    unsigned ka = kind[a], kb = kind[b];
                    unsigned v =
                        a == b ? 0 : by_kind[(ka < kb ? ka : kb) * kinds + (ka < kb ? kb : ka)];
                    score[a * n + b] = score[b * n + a] = v;
                }
            unsigned a = lcg(&seed) % n, b = lcg(&seed) % n;
            if (a != b && lcg(&seed) % 2)
                score[a * n + b] = score[b * n + a] = 70;
        }
        unsigned size = 1 + lcg(&seed) % n;
        unsigned n_must = lcg(&seed) % 3;
        if (n_must > size)
            n_must = size;
        unsigned avail[9], must[2];
        for (unsigned i = 0; i < n; i++)
            avail[i] = i;
        for (unsigned i = 0; i < n_must; i++)
            must[i] = (i * 3 + (unsigned)iter) % n;
        if (n_must == 2 && must[0] == must[1])
            n_must = 1;
        unsigned out[9], orc[9], ref[9];
        assert_int_equal(dp_besteffort(score, n, avail, n, must, n_must, size, out), 0);
        assert_int_equal(oracle_besteffort(score, n, avail, n, must, n_must, size, orc), 0);
        ref_besteffort(score, n, must, n_must, size, ref);
        for (unsigned i = 0; i < size; i++) {
            if (orc[i] != ref[i])
                fail_msg("iteration %d (n=%u size=%u must=%u): oracle element %u is %u, want %u",
                         iter, n, size, n_must, i, orc[i], ref[i]);
            if (out[i] != ref[i])
                fail_msg("iteration %d (n=%u size=%u must=%u): element %u is %u, want %u", iter, n,
                         size, n_must, i, out[i], ref[i]);
        }
    }
}

/* Every size on a topology, with all GPUs available (in order and shuffled), with must-include
 * GPUs, and on subsets in shuffled order with random must-include GPUs. */
static void check_topology(const struct topo *t, unsigned seed, unsigned n_subsets,
                           uint64_t work_limit)
{
    unsigned all[MAXG], shuf[MAXG];
    for (unsigned i = 0; i < t->n; i++)
        all[i] = shuf[i] = i;
    shuffle(shuf, t->n, &seed);
    double t0 = now_ms();
    unsigned cases = 0;
    uint64_t max_work = 0, w;
#define CHECK(...)                              \
    do {                                        \
        w = check_case(t, __VA_ARGS__);         \
        max_work = w > max_work ? w : max_work; \
        cases++;                                \
    } while (0)
    for (unsigned size = 1; size <= t->n; size++) {
        const unsigned must1[] = {t->n - 1}, must2[] = {1, t->n / 2 + 1};
        CHECK(all, t->n, NULL, 0, size);
        CHECK(shuf, t->n, NULL, 0, size);
        CHECK(all, t->n, must1, 1, size);
        if (size >= 2)
            CHECK(shuf, t->n, must2, 2, size);
    }
    for (unsigned s = 0; s < n_subsets; s++) {
        unsigned sub[MAXG], n_sub = t->n / 2 + lcg(&seed) % (t->n / 2);
        memcpy(sub, all, sizeof(all));
        shuffle(sub, t->n, &seed);
        unsigned must[2], n_must = lcg(&seed) % 3;
        for (unsigned i = 0; i < n_must; i++)
            must[i] = sub[lcg(&seed) % n_sub];
        if (n_must == 2 && must[0] == must[1])
            n_must = 1;
        for (unsigned size = n_must ? n_must : 1; size <= n_sub; size++)
            CHECK(sub, n_sub, must, n_must, size);
    }
#undef CHECK
    print_message("%s: %u requests equal the oracle's (%.0f ms); most work %llu\n", t->name, cases,
                  now_ms() - t0, (unsigned long long)max_work);
    assert_true(max_work < work_limit);
}

static void test_topology_dgx1(void **state)
{
    (void)state;
    struct topo t;
    topo_dgx1(&t);
    check_topology(&t, 1, 40, 1000);
}

static void test_topology_dgx_h100(void **state)
{
    (void)state;
    struct topo t;
    topo_dgx_h100(&t);
    check_topology(&t, 2, 40, 100);
}

static void test_topology_hgx16(void **state)
{
    (void)state;
    struct topo t;
    topo_hgx16(&t);
    check_topology(&t, 3, 6, 10000);
}

static void test_topology_hgx16_pair(void **state)
{
    (void)state;
    struct topo t;
    topo_hgx16_pair(&t);
    check_topology(&t, 6, 3, 10000);
}

static void test_topology_hgx16_switches(void **state)
{
    (void)state;
    struct topo t;
    topo_hgx16_switches(&t);
    check_topology(&t, 4, 4, 100000);
}

static void test_topology_irregular16(void **state)
{
    (void)state;
    struct topo t;
    topo_irregular16(&t);
    check_topology(&t, 5, 2, DP_BE_BUDGET); /* never the fallback */
}

/* The work of the exact search is small where GPUs are alike and bounded where none are; a
 * spent budget gives a greedy set (still a full, valid answer), and the work is charged. */
static void test_budget(void **state)
{
    (void)state;
    struct topo t;
    topo_hgx16(&t);
    unsigned avail[16], out[16];
    for (unsigned a = 0; a < 16; a++)
        avail[a] = a;
    for (unsigned size = 2; size <= 16; size++) {
        uint64_t budget = DP_BE_BUDGET;
        assert_int_equal(dp_besteffort_budget(t.score, 16, avail, 16, NULL, 0, size, &budget, out),
                         0);
        assert_true(DP_BE_BUDGET - budget > 0);
        assert_true(DP_BE_BUDGET - budget < 10000); /* two groups of 8: a few hundred states */
    }
    /* size 5 of 16: five of one domain */
    uint64_t budget = DP_BE_BUDGET;
    assert_int_equal(dp_besteffort_budget(t.score, 16, avail, 16, NULL, 0, 5, &budget, out), 0);
    for (unsigned i = 0; i < 5; i++)
        assert_int_equal(out[i], i);
    /* spent: greedy from the must-include GPU stays in its domain */
    budget = 3;
    unsigned must = 9;
    assert_int_equal(dp_besteffort_budget(t.score, 16, avail, 16, &must, 1, 5, &budget, out), 0);
    assert_int_equal(budget, 0);
    unsigned seen = 0;
    for (unsigned i = 0; i < 5; i++) {
        assert_true(out[i] >= 8);
        seen |= 1u << out[i];
    }
    assert_int_equal(__builtin_popcount(seen), 5);
    assert_true(seen & (1u << 9));
    /* 16 GPUs with no two alike: every subset is a state; the hardest size (6) stays within
     * the budget of one request */
    topo_irregular16(&t);
    uint64_t most = 0;
    for (unsigned size = 2; size <= 16; size++) {
        budget = DP_BE_BUDGET;
        assert_int_equal(dp_besteffort_budget(t.score, 16, avail, 16, NULL, 0, size, &budget, out),
                         0);
        most = DP_BE_BUDGET - budget > most ? DP_BE_BUDGET - budget : most;
    }
    print_message("irregular 16, all available: most work %llu\n", (unsigned long long)most);
    assert_true(most < DP_BE_BUDGET * 9 / 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgx1_table),
        cmocka_unit_test(test_random_small),
        cmocka_unit_test(test_topology_dgx1),
        cmocka_unit_test(test_topology_dgx_h100),
        cmocka_unit_test(test_topology_hgx16),
        cmocka_unit_test(test_topology_hgx16_pair),
        cmocka_unit_test(test_topology_hgx16_switches),
        cmocka_unit_test(test_topology_irregular16),
        cmocka_unit_test(test_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
