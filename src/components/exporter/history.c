/* SPDX-License-Identifier: Apache-2.0 */
/* The histories behind DCGM_EXP_CLOCK_EVENTS_COUNT and the XID fields, and the collection's
 * budgets: pure, the collector's clock passed in. */
#include <assert.h>
#include <string.h>

#include "exporter.h"

void exp_clock_hist_init(struct exp_clock_hist *h, size_t cap)
{
    memset(h, 0, sizeof(*h));
    h->cap = cap ? cap : 1;
    h->at_ms = xcalloc(h->cap, sizeof(*h->at_ms));
    h->mask = xcalloc(h->cap, sizeof(*h->mask));
}

void exp_clock_hist_clear(struct exp_clock_hist *h)
{
    free(h->at_ms);
    free(h->mask);
    memset(h, 0, sizeof(*h));
}

void exp_clock_hist_push(struct exp_clock_hist *h, uint64_t now_ms, uint64_t mask)
{
    mask &= (1u << EXP_CLOCK_EVENTS) - 1;
    if (!mask || !h->cap)
        return;
    h->at_ms[h->next] = now_ms;
    h->mask[h->next] = (uint32_t)mask;
    h->next = (h->next + 1) % h->cap;
    if (h->n < h->cap)
        h->n++;
}

void exp_clock_hist_count(const struct exp_clock_hist *h, uint64_t now_ms, uint64_t window_ms,
                          uint64_t counts[EXP_CLOCK_EVENTS])
{
    memset(counts, 0, EXP_CLOCK_EVENTS * sizeof(counts[0]));
    for (size_t i = 0; i < h->n; i++) {
        if (h->at_ms[i] > now_ms || now_ms - h->at_ms[i] > window_ms)
            continue;
        for (unsigned k = 0; k < EXP_CLOCK_EVENTS; k++)
            if (h->mask[i] & (1u << k))
                counts[k]++;
    }
}

size_t exp_clock_hist_cap(uint64_t window_ms, uint64_t interval_ms)
{
    assert(interval_ms > 0);
    uint64_t cap = window_ms / interval_ms + 2;
    return cap > EXP_CLOCK_HIST_MAX ? EXP_CLOCK_HIST_MAX : (size_t)cap;
}

struct exp_clock_hist *exp_clock_table_get(struct exp_clock_table *t, const char *uuid, size_t cap)
{
    assert(t->n <= EXP_CLOCK_HISTS);
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->items[i].uuid, uuid) == 0)
            return &t->items[i].h;
    if (t->n == EXP_CLOCK_HISTS)
        return NULL;
    strlcpy_s(t->items[t->n].uuid, uuid, sizeof(t->items[t->n].uuid));
    exp_clock_hist_init(&t->items[t->n].h, cap);
    return &t->items[t->n++].h;
}

void exp_clock_table_clear(struct exp_clock_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        exp_clock_hist_clear(&t->items[i].h);
    t->n = 0;
}

void exp_xid_log_record(struct exp_xid_log *l, const char *uuid, uint64_t xid, uint64_t now_ms)
{
    assert(l->n_last <= EXP_XID_GPUS && l->n <= EXP_XID_RING && l->next < EXP_XID_RING);
    size_t i;
    for (i = 0; i < l->n_last; i++)
        if (strcmp(l->last[i].uuid, uuid) == 0)
            break;
    if (i == l->n_last && l->n_last < EXP_XID_GPUS)
        strlcpy_s(l->last[l->n_last++].uuid, uuid, sizeof(l->last[i].uuid));
    if (i < l->n_last)
        l->last[i].xid = xid;
    strlcpy_s(l->ring[l->next].uuid, uuid, sizeof(l->ring[l->next].uuid));
    l->ring[l->next].xid = xid;
    l->ring[l->next].at_ms = now_ms;
    l->next = (l->next + 1) % EXP_XID_RING;
    if (l->n < EXP_XID_RING)
        l->n++;
}

uint64_t exp_xid_log_last(const struct exp_xid_log *l, const char *uuid)
{
    for (size_t i = 0; i < l->n_last; i++)
        if (strcmp(l->last[i].uuid, uuid) == 0)
            return l->last[i].xid;
    return 0;
}

void exp_xid_log_counts(const struct exp_xid_log *l, const char *uuid, uint64_t now_ms,
                        uint64_t window_ms, struct exp_gpu_state *st)
{
    st->n_xid_counts = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (strcmp(l->ring[i].uuid, uuid) != 0 || now_ms - l->ring[i].at_ms > window_ms)
            continue;
        size_t k;
        for (k = 0; k < st->n_xid_counts; k++)
            if (st->xid_counts[k].xid == l->ring[i].xid)
                break;
        if (k == st->n_xid_counts) {
            if (k == EXP_XID_COUNTS_MAX)
                continue;
            st->xid_counts[k].xid = l->ring[i].xid;
            st->xid_counts[k].count = 0;
            st->n_xid_counts++;
        }
        st->xid_counts[k].count++;
    }
    assert(st->n_xid_counts <= EXP_XID_COUNTS_MAX);
}

uint64_t exp_podres_budget_ms(uint64_t interval_ms)
{
    return interval_ms / 4 > 250 ? interval_ms / 4 : 250;
}
