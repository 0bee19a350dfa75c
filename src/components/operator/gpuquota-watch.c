/* SPDX-License-Identifier: Apache-2.0 */
/* The shell of the GPU quota view: informers in, the view out (op-gpuquota.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "op-gpuquota.h"
#include "operator-internal.h"
#include "operator.h"
#include "yamlcfg.h"

int op_gpuquota_configure(struct op_gpuquota *q, const char *const *pools, size_t n_pools,
                          const char *ratio, struct err *e)
{
    pthread_mutex_init(&q->lock, NULL);
    return cap_settings_parse(pools, n_pools, ratio, q->pools, &q->n_pools, &q->ratio, e);
}

void op_gpuquota_clear(struct op_gpuquota *q)
{
    for (size_t i = 0; i < q->n_pools; i++)
        cap_pool_def_clear(&q->pools[i]);
    q->n_pools = 0;
    cap_view_free(q->view);
    q->view = NULL;
    pthread_mutex_destroy(&q->lock);
}

void op_gpuquota_project_node(json_t *obj, json_t *p)
{
    static const char *const paths[] = {"status.allocatable", "status.capacity",
                                        "spec.unschedulable"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
        kobj_path_copy(p, obj, paths[i]);
    const json_t *c = kobj_condition_find(obj, "Ready");
    if (c) {
        json_t *st = kobj_ensure_keys(p, (const char *const[]){"status", NULL});
        json_object_set_new(st, "conditions",
                            json_pack("[{s:s,s:s}]", "type", "Ready", "status",
                                      kobj_str(c, "status") ?: "Unknown"));
    }
}

/* A pod with GPU requests or DRA claims as the view reads it: name, namespace, node, phase, the
 * claim of its extended resources, its node selection and its containers' resources (nothing
 * else of them); NULL for any other pod. */
static json_t *project_pod(json_t *obj, void *u)
{
    (void)u;
    /* Most pods of a cluster request no GPU: they are not kept at all (a pod's requests and
     * claims cannot change, so none is ever missed); most are not even decoded (prefilter) */
    if (!op_gpuquota_pod_counts(obj))
        return NULL;
    static const char *const keep[] = {"spec.nodeName", "status.phase",
                                       "status.extendedResourceClaimStatus.resourceClaimName",
                                       NULL};
    json_t *p = kube_project_fields(obj, keep);
    json_object_del(json_object_get(p, "metadata"), "labels");
    kobj_path_copy(p, obj, "spec.nodeSelector");
    kobj_path_copy(p, obj, "spec.affinity.nodeAffinity");
    json_t *spec = kobj_ensure_keys(p, (const char *const[]){"spec", NULL});
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        json_t *src = json_object_get(json_object_get(obj, "spec"), lists[l]);
        if (!json_is_array(src))
            continue;
        json_t *dst = json_array();
        size_t i;
        json_t *c;
        json_array_foreach (src, i, c) {
            json_t *res = json_object_get(c, "resources");
            json_array_append_new(dst, res ? json_pack("{s:O}", "resources", res) : json_object());
        }
        json_object_set_new(spec, lists[l], dst);
    }
    return p;
}

/* A ResourceSlice of the GPU driver as the view reads it: its node, pool, shared counters and
 * each device's name, type, profile and counters; NULL for other drivers' slices. */
static json_t *project_slice(json_t *obj, void *u)
{
    (void)u;
    if (!streq_ptr(kobj_path_str(obj, "spec.driver"), CAP_DRA_DRIVER))
        return NULL;
    static const char *const keep[] = {"spec.driver", "spec.nodeName", "spec.pool.name",
                                       "spec.sharedCounters", NULL};
    json_t *p = kube_project_fields(obj, keep);
    json_object_del(json_object_get(p, "metadata"), "labels");
    json_t *devs = json_array();
    size_t i;
    json_t *d;
    json_array_foreach (kobj_path(obj, "spec.devices"), i, d) {
        json_t *o = json_pack("{s:O?}", "name", json_object_get(d, "name"));
        kobj_path_copy(o, d, "attributes.type");
        kobj_path_copy(o, d, "attributes.profile");
        kobj_path_copy(o, d, "consumesCounters");
        json_array_append_new(devs, o);
    }
    json_object_set_new(kobj_ensure_keys(p, (const char *const[]){"spec", NULL}), "devices", devs);
    return p;
}

/* A ResourceClaim as the view reads it: the GPU driver's allocated devices, the reservations,
 * the extended-resource annotation; of a claim with none of that driver's devices its name
 * alone (kept, not dropped, so that a claim deallocated leaves nothing stale behind). */
static json_t *project_claim(json_t *obj, void *u)
{
    (void)u;
    json_t *results = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(obj, "status.allocation.devices.results"), i, r)
        if (streq_ptr(kobj_str(r, "driver"), CAP_DRA_DRIVER))
            json_array_append_new(results, json_pack("{s:s,s:O?,s:O?}", "driver", CAP_DRA_DRIVER,
                                                     "pool", json_object_get(r, "pool"), "device",
                                                     json_object_get(r, "device")));
    static const char *const keep[] = {NULL};
    json_t *p = kube_project_fields(obj, keep);
    json_t *meta = json_object_get(p, "metadata");
    json_object_del(meta, "labels");
    if (json_array_size(results) == 0) {
        json_decref(results);
        return p;
    }
    const char *ext = kobj_annotation(obj, CAP_DRA_EXTENDED_ANNOT);
    if (ext)
        json_object_set_new(meta, "annotations", json_pack("{s:s}", CAP_DRA_EXTENDED_ANNOT, ext));
    json_t *reserved = json_array();
    json_t *ref;
    json_array_foreach (kobj_path(obj, "status.reservedFor"), i, ref)
        json_array_append_new(reserved, json_pack("{s:O?,s:O?,s:O?}", "apiGroup",
                                                  json_object_get(ref, "apiGroup"), "resource",
                                                  json_object_get(ref, "resource"), "name",
                                                  json_object_get(ref, "name")));
    json_object_set_new(p, "status",
                        json_pack("{s:{s:{s:o}},s:o}", "allocation", "devices", "results", results,
                                  "reservedFor", reserved));
    return p;
}

static int start_dra(struct op_gpuquota *q, struct err *e)
{
    static const char *const no_index[] = {NULL};
    static const char *const class_fields[] = {"spec.extendedResourceName", NULL};
    struct kube_informer_opts so = {
        .project = project_slice, .index_label_keys = no_index, .handlers = q->mark};
    struct kube_informer_opts co = {
        .project = project_claim, .index_label_keys = no_index, .handlers = q->mark};
    struct kube_informer_opts dco = {
        .keep_fields = class_fields, .index_label_keys = no_index, .handlers = q->mark};
    _cleanup_(kube_informer_freep) struct kube_informer *slices = NULL, *claims = NULL,
                                                        *classes = NULL;
    int r;
    if ((r = kube_informer_new(q->kc, &KUBE_RESOURCESLICES, &so, &slices, e)) < 0 ||
        (r = kube_informer_new(q->kc, &KUBE_RESOURCECLAIMS, &co, &claims, e)) < 0 ||
        (r = kube_informer_new(q->kc, &KUBE_DEVICECLASSES, &dco, &classes, e)) < 0)
        return err_prefix(e, "DRA informers");
    q->slices = steal_ptr(&slices);
    q->claims = steal_ptr(&claims);
    q->classes = steal_ptr(&classes);
    return 0;
}

int op_gpuquota_start(struct op_gpuquota *q, struct kube_client *kc,
                      const struct kube_informer_handlers *mark, struct err *e)
{
    q->kc = kc;
    q->mark = *mark;
    static const char *const no_index[] = {NULL};
    static const char *const quota_fields[] = {"spec.hard", "status.used", NULL};
    /* every operand pod's every event, ~5 KB of JSON each, is passed over undecoded unless its
     * text names a GPU resource and requests or limits, or a claim: what
     * op_gpuquota_pod_counts needs */
    struct kube_informer_opts po = {.project = project_pod,
                                    .index_label_keys = no_index,
                                    .prefilter = op_gpuquota_pod_texts,
                                    .handlers = *mark}; /* a GPU pod is worth a reconcile */
    struct kube_informer_opts qo = {
        .keep_fields = quota_fields, .index_label_keys = no_index, .handlers = *mark};
    int r;
    if ((r = kube_informer_new(kc, &KUBE_PODS, &po, &q->pods, e)) < 0 ||
        (r = kube_informer_new(kc, &KUBE_RESOURCEQUOTAS, &qo, &q->quotas, e)) < 0)
        return r;
    return 0;
}

/* What a DRA informer holds; NULL until it is started and synced. */
static json_t *dra_list(struct kube_informer *inf)
{
    return inf && kube_informer_synced(inf) ? kube_informer_list(inf, NULL, NULL, NULL) : NULL;
}

json_t *op_gpuquota_observe(struct op_gpuquota *q, const json_t *nodes, bool dra_served,
                            struct err *e)
{
    if (dra_served && !q->slices && q->kc && start_dra(q, e) < 0)
        return NULL;
    _cleanup_json_ json_t *pods = kube_informer_list(q->pods, NULL, NULL, NULL);
    _cleanup_json_ json_t *quotas = kube_informer_list(q->quotas, NULL, NULL, NULL);
    _cleanup_json_ json_t *slices = dra_list(q->slices);
    _cleanup_json_ json_t *claims = dra_list(q->claims);
    _cleanup_json_ json_t *classes = dra_list(q->classes);
    struct cap_input in = {.nodes = nodes,
                           .pods = pods,
                           .quotas = quotas,
                           .slices = slices,
                           .claims = claims,
                           .classes = classes,
                           .pools = q->pools,
                           .n_pools = q->n_pools,
                           .overcommit_ratio = q->ratio};
    struct cap_view *v = NULL;
    if (cap_view_compute(&in, &v, e) < 0)
        return NULL;
    json_t *findings = op_gpuquota_findings(v);
    pthread_mutex_lock(&q->lock);
    cap_view_free(q->view);
    q->view = v;
    pthread_mutex_unlock(&q->lock);
    return findings;
}

void op_gpuquota_write_metrics(struct op_gpuquota *q, struct prom_writer *w)
{
    pthread_mutex_lock(&q->lock);
    if (q->view)
        op_gpuquota_metrics(q->view, w);
    pthread_mutex_unlock(&q->lock);
}
