/* SPDX-License-Identifier: Apache-2.0 */
/* GPU device IDs from the kubelet's PodResources API to pod, namespace and container. */
#include <string.h>

#include "exporter.h"

bool exp_pod_resource_is_gpu(const char *resource, const char *extra)
{
    if (!resource)
        return false;
    if (strcmp(resource, "nvidia.com/gpu") == 0 || str_has_prefix(resource, "nvidia.com/mig-"))
        return true;
    if (!extra)
        return false;
    size_t rl = strlen(resource);
    for (const char *p = extra; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *s = p;
        size_t sn = n;
        while (sn && (*s == ' ' || *s == '\t')) {
            s++;
            sn--;
        }
        while (sn && (s[sn - 1] == ' ' || s[sn - 1] == '\t'))
            sn--;
        if (sn == rl && strncmp(s, resource, rl) == 0)
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

/* The physical GPU and GPU instance a device ID names, or false. */
static bool resolve(const struct gpu_inventory *inv, const char *id, const char **ret_uuid,
                    unsigned *ret_gi)
{
    if (!inv)
        return false;
    /* Old-style MIG IDs: MIG-GPU-<uuid>/<gi>/<ci>. */
    if (str_has_prefix(id, "MIG-GPU-") && strchr(id, '/')) {
        const char *slash = strchr(id, '/');
        size_t ul = (size_t)(slash - (id + 4));
        unsigned gi;
        char gibuf[16];
        const char *gs = slash + 1, *ge = strchr(gs, '/');
        size_t gl = ge ? (size_t)(ge - gs) : strlen(gs);
        if (gl == 0 || gl >= sizeof(gibuf))
            return false;
        memcpy(gibuf, gs, gl);
        gibuf[gl] = '\0';
        if (parse_uint(gibuf, &gi) < 0)
            return false;
        for (size_t i = 0; i < inv->n_gpus; i++)
            if (strlen(inv->gpus[i].uuid) == ul && strncmp(inv->gpus[i].uuid, id + 4, ul) == 0) {
                *ret_uuid = inv->gpus[i].uuid;
                *ret_gi = gi;
                return true;
            }
        return false;
    }
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *d = &inv->gpus[i];
        if (strcmp(d->uuid, id) == 0) {
            *ret_uuid = d->uuid;
            *ret_gi = EXP_WHOLE_GPU;
            return true;
        }
        for (size_t j = 0; j < d->n_mig; j++)
            if (strcmp(d->mig[j].uuid, id) == 0) {
                *ret_uuid = d->uuid;
                *ret_gi = d->mig[j].gi_id;
                return true;
            }
    }
    return false;
}

bool exp_pod_map_add(struct exp_pod_map *m, const struct gpu_inventory *inv, const char *device_id,
                     const char *pod, const char *ns, const char *container)
{
    if (!device_id || !pod || !ns || !container)
        return false;
    /* Shared (time-sliced / MPS) replicas: "<uuid>::<n>". */
    char id[GPU_UUID_MAX + 16];
    size_t n = strlen(device_id);
    const char *sep = strstr(device_id, "::");
    if (sep)
        n = (size_t)(sep - device_id);
    if (n == 0 || n >= sizeof(id))
        return false;
    memcpy(id, device_id, n);
    id[n] = '\0';

    const char *uuid;
    unsigned gi;
    if (!resolve(inv, id, &uuid, &gi))
        return false;
    for (size_t i = 0; i < m->n; i++) {
        const struct exp_pod_entry *p = &m->items[i];
        if (p->gi_id == gi && strcmp(p->uuid, uuid) == 0 && strcmp(p->ref.pod, pod) == 0 &&
            strcmp(p->ref.namespace, ns) == 0 && strcmp(p->ref.container, container) == 0)
            return true;
    }
    m->items = xrealloc(m->items, (m->n + 1) * sizeof(*m->items));
    struct exp_pod_entry *p = &m->items[m->n++];
    memset(p, 0, sizeof(*p));
    strlcpy_s(p->uuid, uuid, sizeof(p->uuid));
    p->gi_id = gi;
    p->ref.pod = xstrdup(pod);
    p->ref.namespace = xstrdup(ns);
    p->ref.container = xstrdup(container);
    return true;
}

void exp_pod_map_clear(struct exp_pod_map *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->items[i].ref.pod);
        free(m->items[i].ref.namespace);
        free(m->items[i].ref.container);
    }
    free(m->items);
    m->items = NULL;
    m->n = 0;
}

void exp_pod_map_free(struct exp_pod_map *m)
{
    if (!m)
        return;
    exp_pod_map_clear(m);
    free(m);
}
