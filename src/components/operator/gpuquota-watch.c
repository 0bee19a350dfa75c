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

static bool has_gpu_request(const json_t *pod)
{
    static const char *const lists[] = {"spec.containers", "spec.initContainers"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *c;
        json_array_foreach (kobj_path(pod, lists[l]), i, c) {
            static const char *const kinds[] = {"resources.requests", "resources.limits"};
            for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
                const char *key;
                json_t *v;
                json_object_foreach (kobj_path(c, kinds[k]), key, v)
                    if (cap_gpu_resource(key))
                        return true;
            }
        }
    }
    return false;
}

/* A pod with GPU requests as the view reads it: name, namespace, node, phase, its node selection
 * and its containers' resources (nothing else of them); NULL for any other pod. */
static json_t *project_pod(json_t *obj, void *u)
{
    (void)u;
    /* Most pods of a cluster request no GPU: they are not kept at all (a pod's requests cannot
     * change to or from a GPU resource, so none is ever missed). */
    if (!has_gpu_request(obj))
        return NULL;
    static const char *const keep[] = {"spec.nodeName", "status.phase", NULL};
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

int op_gpuquota_start(struct op_gpuquota *q, struct kube_client *kc,
                      const struct kube_informer_handlers *mark, struct err *e)
{
    static const char *const no_index[] = {NULL};
    static const char *const quota_fields[] = {"spec.hard", "status.used", NULL};
    struct kube_informer_opts po = {.project = project_pod,
                                    .index_label_keys = no_index,
                                    .handlers = *mark}; /* a GPU pod is worth a reconcile */
    struct kube_informer_opts qo = {
        .keep_fields = quota_fields, .index_label_keys = no_index, .handlers = *mark};
    int r;
    if ((r = kube_informer_new(kc, &KUBE_PODS, &po, &q->pods, e)) < 0 ||
        (r = kube_informer_new(kc, &KUBE_RESOURCEQUOTAS, &qo, &q->quotas, e)) < 0)
        return r;
    return 0;
}

json_t *op_gpuquota_observe(struct op_gpuquota *q, const json_t *nodes, struct err *e)
{
    _cleanup_json_ json_t *pods = kube_informer_list(q->pods, NULL, NULL, NULL);
    _cleanup_json_ json_t *quotas = kube_informer_list(q->quotas, NULL, NULL, NULL);
    struct cap_input in = {.nodes = nodes,
                           .pods = pods,
                           .quotas = quotas,
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
