/* SPDX-License-Identifier: Apache-2.0 */
/* Which of a fleet's GPUs a process sees through CUDA (see simcuda.h). Pure. */
#include <string.h>
#include <strings.h>

#include "simcuda.h"

static bool has(const unsigned *list, size_t n, unsigned v)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == v)
            return true;
    return false;
}

/* The next comma-separated item of *s (spaces trimmed) into buf; false at the end. */
static bool next_item(const char **s, char *buf, size_t n)
{
    if (!*s)
        return false;
    const char *p = *s, *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    *s = comma ? comma + 1 : NULL;
    while (len > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        len--;
    }
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
        len--;
    if (len >= n)
        len = n - 1; /* too long to be an index or a UUID: it will not match */
    memcpy(buf, p, len);
    buf[len] = '\0';
    return true;
}

static void container_devices(const char *const *uuids, size_t n_gpus,
                              const struct simcuda_nodes *nodes, const char *spec, unsigned *ret,
                              size_t *ret_n)
{
    *ret_n = 0;
    if ((!spec || strcmp(spec, "void") == 0) && nodes && nodes->ctl) {
        for (size_t i = 0; i < n_gpus; i++)
            if (has(nodes->minors, nodes->n, (unsigned)i))
                ret[(*ret_n)++] = (unsigned)i;
        return;
    }
    if (!spec || strcmp(spec, "all") == 0) {
        for (size_t i = 0; i < n_gpus; i++)
            ret[(*ret_n)++] = (unsigned)i;
        return;
    }
    char item[128];
    const char *s = spec;
    while (next_item(&s, item, sizeof(item))) {
        unsigned idx;
        if (parse_uint(item, &idx) == 0) {
            if (idx < n_gpus && !has(ret, *ret_n, idx))
                ret[(*ret_n)++] = idx;
            continue;
        }
        for (size_t i = 0; i < n_gpus; i++)
            if (strcasecmp(item, uuids[i]) == 0 && !has(ret, *ret_n, (unsigned)i))
                ret[(*ret_n)++] = (unsigned)i;
        /* "none", "void", MIG devices ("0:1", "MIG-..."), unknown names: nothing */
    }
}

void simcuda_visible(const char *const *uuids, size_t n_gpus, const struct simcuda_nodes *nodes,
                     const char *nvidia_visible, const char *cuda_visible, unsigned *ret,
                     size_t *ret_n)
{
    unsigned base[64];
    size_t n_base = 0;
    if (n_gpus > ARRAY_SIZE(base))
        n_gpus = ARRAY_SIZE(base);
    container_devices(uuids, n_gpus, nodes, nvidia_visible, base, &n_base);
    *ret_n = 0;
    if (!cuda_visible) {
        memcpy(ret, base, n_base * sizeof(base[0]));
        *ret_n = n_base;
        return;
    }
    char item[128];
    const char *s = cuda_visible;
    while (next_item(&s, item, sizeof(item))) {
        unsigned ord, pick = 0;
        bool found = false;
        if (parse_uint(item, &ord) == 0) {
            found = ord < n_base;
            if (found)
                pick = base[ord];
        } else if (strncasecmp(item, "GPU-", 4) == 0 && item[4]) {
            size_t matches = 0;
            for (size_t i = 0; i < n_base; i++) {
                if (strncasecmp(item, uuids[base[i]], strlen(item)) == 0) {
                    matches++;
                    pick = base[i];
                }
            }
            found = matches == 1;
        }
        if (!found || has(ret, *ret_n, pick))
            return; /* CUDA stops at the first entry it cannot use */
        ret[(*ret_n)++] = pick;
    }
}
