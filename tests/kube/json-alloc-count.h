/* SPDX-License-Identifier: Apache-2.0 */
/* A counting allocator for jansson, shared by the tests of kube_json_cost (tests/kube and its
 * fuzz target): jansson's allocations counted as glibc's malloc rounds them (kube_json_cost's
 * model: an 8-byte header, 16-byte steps, 32 at least). Between json_alloc_count_start() and
 * json_alloc_count_stop(), json_alloc_live is what jansson holds and json_alloc_peak the most it
 * held. Only values made and freed in between may go through it. */
#ifndef GPUOP_TESTS_JSON_ALLOC_COUNT_H
#define GPUOP_TESTS_JSON_ALLOC_COUNT_H

#include <jansson.h>
#include <stdlib.h>

static size_t json_alloc_live, json_alloc_peak;

static size_t json_alloc_chunk(size_t n)
{
    n = (n + 8 + 15) & ~(size_t)15;
    return n < 32 ? 32 : n;
}

static void *json_alloc_count_malloc(size_t n)
{
    size_t *h = malloc(n + 16);
    if (!h)
        return NULL;
    h[0] = n;
    json_alloc_live += json_alloc_chunk(n);
    if (json_alloc_live > json_alloc_peak)
        json_alloc_peak = json_alloc_live;
    return h + 2;
}

static void json_alloc_count_free(void *p)
{
    if (!p)
        return;
    size_t *h = (size_t *)p - 2;
    json_alloc_live -= json_alloc_chunk(h[0]);
    free(h);
}

static inline void json_alloc_count_start(void)
{
    json_set_alloc_funcs(json_alloc_count_malloc, json_alloc_count_free);
    json_alloc_live = json_alloc_peak = 0;
}

static inline void json_alloc_count_stop(void)
{
    json_set_alloc_funcs(malloc, free);
}

#endif
