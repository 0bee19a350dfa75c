/* SPDX-License-Identifier: Apache-2.0 */
/*
 * be-bench: the best-effort search of GetPreferredAllocation in-process (dp_besteffort, no
 * gRPC), per request size on 16 GPUs, so its own cost shows apart from the round trip:
 *
 *   be-bench ITERATIONS
 *
 * Topologies: bench/deviceplugin/hgx-16.yaml's scores (two 8-GPU NVLink domains: 220 inside,
 * 10 across) and a synthetic one where no two GPUs are alike (every subset of GPUs is a state
 * of the search: its worst case). Prints "<topology> size=<s> n=<n> p50_us=<..> p99_us=<..>
 * work=<units of the budget>" lines.
 */
#include <stdio.h>
#include <stdlib.h>

#include "device-plugin.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void run(const char *name, const unsigned *score, unsigned iters)
{
    unsigned avail[16], out[16];
    for (unsigned i = 0; i < 16; i++)
        avail[i] = i;
    uint64_t *lat = xcalloc(iters, sizeof(uint64_t));
    for (unsigned size = 1; size <= 16; size++) {
        uint64_t work = 0;
        for (unsigned i = 0; i < iters; i++) {
            uint64_t budget = DP_BE_BUDGET;
            uint64_t t0 = now_us_mono();
            if (dp_besteffort_budget(score, 16, avail, 16, NULL, 0, size, &budget, out) < 0) {
                fprintf(stderr, "be-bench: %s size %u failed\n", name, size);
                exit(1);
            }
            lat[i] = now_us_mono() - t0;
            work = DP_BE_BUDGET - budget;
        }
        qsort(lat, iters, sizeof(*lat), cmp_u64);
        printf("%s size=%u n=%u p50_us=%llu p99_us=%llu work=%llu\n", name, size, iters,
               (unsigned long long)lat[iters / 2], (unsigned long long)lat[(iters * 99) / 100],
               (unsigned long long)work);
    }
    free(lat);
}

int main(int argc, char **argv)
{
    unsigned iters = 0;
    if (argc != 2 || parse_uint(argv[1], &iters) < 0 || iters == 0) {
        fprintf(stderr, "usage: %s ITERATIONS\n", argv[0]);
        return 2;
    }
    unsigned hgx[256], irregular[256];
    unsigned seed = 77;
    for (unsigned a = 0; a < 16; a++)
        for (unsigned b = a; b < 16; b++) {
            hgx[a * 16 + b] = hgx[b * 16 + a] = a == b ? 0 : a / 8 == b / 8 ? 220 : 10;
            /* link counts 0-3 inside a half (1 in 7 pairs across), PCIe 50/40/20/10 by
             * distance: the same as tests/device-plugin/test-dp-besteffort.c's */
            seed = seed * 1103515245u + 12345u;
            unsigned links = a / 8 == b / 8 ? (seed >> 16) % 4 : (seed >> 16) % 7 == 0;
            unsigned pcie = a / 8 != b / 8 ? 10 : a / 2 == b / 2 ? 50 : a / 4 == b / 4 ? 40 : 20;
            irregular[a * 16 + b] = irregular[b * 16 + a] = a == b ? 0 : pcie + 100 * links;
        }
    run("hgx-16", hgx, iters);
    run("irregular-16", irregular, iters > 20 ? 20 : iters);
    return 0;
}
