/* SPDX-License-Identifier: Apache-2.0 */
/* The clock-event history behind DCGM_EXP_CLOCK_EVENTS_COUNT. */
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
