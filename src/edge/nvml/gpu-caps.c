/* SPDX-License-Identifier: Apache-2.0 */
/* MIG capability minors (gpu.h): pure, shared by the device plugin and the CDI generator. */
#include <stdio.h>
#include <string.h>

#include "gpu.h"

/* The minor mig-minors lists for "gpu<g>/gi<i>/access" or "gpu<g>/gi<i>/ci<c>/access"; -1 when
 * it lists none (or the line does not parse). */
static long minors_find(const char *text, unsigned gpu, unsigned gi, int ci)
{
    char want[64];
    if (ci < 0)
        snprintf(want, sizeof(want), "gpu%u/gi%u/access ", gpu, gi);
    else
        snprintf(want, sizeof(want), "gpu%u/gi%u/ci%d/access ", gpu, gi, ci);
    size_t wl = strlen(want);
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > wl && len - wl < 12 && strncmp(line, want, wl) == 0) {
            char num[16];
            memcpy(num, line + wl, len - wl);
            num[len - wl] = 0;
            unsigned v;
            if (parse_uint(num, &v) == 0)
                return v;
        }
        line = nl ? nl + 1 : NULL;
    }
    return -1;
}

unsigned gpu_mig_cap_minor(const char *mig_minors, unsigned gpu_minor, unsigned gi, int ci)
{
    if (mig_minors) {
        long v = minors_find(mig_minors, gpu_minor, gi, ci);
        if (v >= 0)
            return (unsigned)v;
    }
    unsigned base = 3 + gpu_minor * 15 * 9 + gi * 9;
    return ci < 0 ? base : base + 1 + (unsigned)ci;
}
