/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-devices: PodResources v1 (List, Get, GetAllocatableResources) from the device records, on
 * the PodResources server's loop thread. Only devices are reported (kubelet-sim has no CPU or
 * memory manager: cpu_ids and memory stay empty, as on a kubelet with the none policies).
 * The kubelet groups a container's devices per resource and NUMA node; so does this.
 */
#include <string.h>

#include "grpc.h"
#include "kl-devices-internal.h"
#include "podresources/v1/api.pb-c.h"

/* A response under construction: every allocation is kept in one arena and freed together. */
struct arena {
    void **p;
    size_t n, cap;
};

static void *arena_add(struct arena *a, void *p)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 64;
        a->p = xrealloc(a->p, a->cap * sizeof(*a->p));
    }
    a->p[a->n++] = p;
    return p;
}

static void *arena_calloc(struct arena *a, size_t n, size_t size)
{
    return arena_add(a, xcalloc(n ? n : 1, size));
}

static void arena_free(struct arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->p[i]);
    free(a->p);
}

static V1__TopologyInfo *topology(struct arena *a, int64_t numa)
{
    if (numa == KL_NUMA_NONE)
        return NULL;
    V1__TopologyInfo *t = arena_calloc(a, 1, sizeof(*t));
    v1__topology_info__init(t);
    V1__NUMANode *n = arena_calloc(a, 1, sizeof(*n));
    v1__numanode__init(n);
    n->id = numa;
    t->nodes = arena_calloc(a, 1, sizeof(*t->nodes));
    t->nodes[0] = n;
    t->n_nodes = 1;
    return t;
}

/* Appends one ContainerDevices per NUMA node of the ids to *list. Strings are borrowed. */
static void add_devices(struct arena *a, V1__ContainerDevices ***list, size_t *n, size_t *cap,
                        const char *resource, char *const *ids, const int64_t *numa, size_t n_ids)
{
    for (size_t i = 0; i < n_ids; i++) {
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = numa[k] == numa[i];
        if (seen)
            continue;
        V1__ContainerDevices *cd = arena_calloc(a, 1, sizeof(*cd));
        v1__container_devices__init(cd);
        cd->resource_name = (char *)resource;
        cd->device_ids = arena_calloc(a, n_ids, sizeof(*cd->device_ids));
        for (size_t k = i; k < n_ids; k++)
            if (numa[k] == numa[i])
                cd->device_ids[cd->n_device_ids++] = ids[k];
        cd->topology = topology(a, numa[i]);
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 8;
            void **old = (void **)*list;
            *list = xcalloc(*cap, sizeof(**list));
            if (old)
                memcpy(*list, old, *n * sizeof(**list));
            free(old);
        }
        (*list)[(*n)++] = cd;
    }
}

/* With mu held: one PodResources per pod (in first-record order), or only the pod named. */
static size_t pods_build(struct kl_devices *d, struct arena *a, const char *only_ns,
                         const char *only_name, V1__PodResources ***ret)
{
    V1__PodResources **pods = arena_calloc(a, d->n_entries, sizeof(*pods));
    size_t n = 0;
    for (size_t i = 0; i < d->n_entries; i++) {
        const struct kl_entry *en = d->entries[i];
        if (only_name &&
            (strcmp(en->pod_name, only_name) != 0 || strcmp(en->pod_namespace, only_ns) != 0))
            continue;
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = strcmp(d->entries[k]->pod_uid, en->pod_uid) == 0;
        if (seen)
            continue;
        V1__PodResources *pr = arena_calloc(a, 1, sizeof(*pr));
        v1__pod_resources__init(pr);
        pr->name = en->pod_name;
        pr->namespace_ = en->pod_namespace;
        pr->containers = arena_calloc(a, d->n_entries, sizeof(*pr->containers));
        for (size_t c = i; c < d->n_entries; c++) {
            const struct kl_entry *ce = d->entries[c];
            if (strcmp(ce->pod_uid, en->pod_uid) != 0)
                continue;
            V1__ContainerResources *cr = NULL;
            for (size_t k = 0; k < pr->n_containers && !cr; k++)
                if (strcmp(pr->containers[k]->name, ce->container) == 0)
                    cr = pr->containers[k];
            if (!cr) {
                cr = arena_calloc(a, 1, sizeof(*cr));
                v1__container_resources__init(cr);
                cr->name = ce->container;
                pr->containers[pr->n_containers++] = cr;
            }
            size_t cap = cr->n_devices;
            V1__ContainerDevices **list = NULL;
            if (cr->n_devices) {
                list = xcalloc(cap, sizeof(*list));
                memcpy(list, cr->devices, cap * sizeof(*list));
            }
            add_devices(a, &list, &cr->n_devices, &cap, ce->resource, ce->ids, ce->numa, ce->n_ids);
            cr->devices = arena_add(a, list);
        }
        pods[n++] = pr;
    }
    *ret = pods;
    return n;
}

static void h_list(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)req;
    struct kl_devices *d = ud;
    struct arena a = {0};
    V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
    pthread_mutex_lock(&d->mu);
    resp.n_pod_resources = pods_build(d, &a, NULL, NULL, &resp.pod_resources);
    grpc_call_reply_pb(call, &resp.base);
    pthread_mutex_unlock(&d->mu);
    arena_free(&a);
}

static void h_get(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    struct kl_devices *d = ud;
    const V1__GetPodResourcesRequest *rq = (const V1__GetPodResourcesRequest *)req;
    const char *name = rq->pod_name ? rq->pod_name : "";
    const char *ns = rq->pod_namespace ? rq->pod_namespace : "";
    struct arena a = {0};
    V1__PodResources **pods = NULL;
    pthread_mutex_lock(&d->mu);
    if (pods_build(d, &a, ns, name, &pods) == 0) {
        /* kubelet-sim knows pods only through their devices: one without any is "not found",
         * the kubelet's answer for a pod it does not run. */
        grpc_call_fail(call, GRPC_STATUS_UNKNOWN, "pod %s in namespace %s not found", name, ns);
    } else {
        V1__GetPodResourcesResponse resp = V1__GET_POD_RESOURCES_RESPONSE__INIT;
        resp.pod_resources = pods[0];
        grpc_call_reply_pb(call, &resp.base);
    }
    pthread_mutex_unlock(&d->mu);
    arena_free(&a);
}

static void h_allocatable(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)req;
    struct kl_devices *d = ud;
    struct arena a = {0};
    V1__AllocatableResourcesResponse resp = V1__ALLOCATABLE_RESOURCES_RESPONSE__INIT;
    size_t cap = 0;
    V1__ContainerDevices **list = NULL;
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->n_res; i++) {
        const struct kl_res *r = d->res[i];
        char **ids = arena_calloc(&a, r->n_devs, sizeof(*ids));
        int64_t *numa = arena_calloc(&a, r->n_devs, sizeof(*numa));
        size_t n = 0;
        for (size_t k = 0; k < r->n_devs; k++)
            if (r->devs[k].healthy) {
                ids[n] = r->devs[k].id;
                numa[n++] = r->devs[k].numa;
            }
        add_devices(&a, &list, &resp.n_devices, &cap, r->name, ids, numa, n);
    }
    resp.devices = list;
    grpc_call_reply_pb(call, &resp.base);
    pthread_mutex_unlock(&d->mu);
    free(list);
    arena_free(&a);
}

int kl_podres_register(struct kl_devices *d, struct grpc_server *s, struct err *e)
{
    int r;
    if ((r = grpc_server_add_unary_pb(s, "/v1.PodResourcesLister/List",
                                      &v1__list_pod_resources_request__descriptor, h_list, d, e)) <
            0 ||
        (r = grpc_server_add_unary_pb(s, "/v1.PodResourcesLister/Get",
                                      &v1__get_pod_resources_request__descriptor, h_get, d, e)) <
            0 ||
        (r = grpc_server_add_unary_pb(s, "/v1.PodResourcesLister/GetAllocatableResources",
                                      &v1__allocatable_resources_request__descriptor, h_allocatable,
                                      d, e)) < 0)
        return r;
    return 0;
}
