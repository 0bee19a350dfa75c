/* SPDX-License-Identifier: Apache-2.0 */
/* What the capacity-and-quota view (src/lib/capacity) means for the ClusterPolicy and /metrics:
 * the findings the planner turns into conditions and Events, and the metric families. Pure. */
#include <math.h>
#include <string.h>

#include "capacity.h"
#include "kobj.h"
#include "operator.h"
#include "prom.h"
#include "yamlcfg.h"

#define LINES_MAX 20 /* lines named in one condition; the rest are counted */

static const char *const gpu_requested[] = {CAP_GPU_PREFIX, "requests", NULL};
static const char *const gpu_limited[] = {CAP_GPU_PREFIX, "limits", NULL};
static const char *const claimed[] = {"resourceClaims", NULL};
const char *const *const op_gpuquota_pod_texts[] = {gpu_requested, gpu_limited, claimed, NULL};

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

bool op_gpuquota_pod_counts(const json_t *pod)
{
    /* a GPU resource name starts with CAP_GPU_PREFIX and is a member of "requests" or
     * "limits", a claim is in "resourceClaims": the text of every pod counted holds a group of
     * op_gpuquota_pod_texts */
    return has_gpu_request(pod) || json_array_size(kobj_path(pod, "spec.resourceClaims")) > 0;
}

static void add_line(json_t *lines, char *line)
{
    json_array_append_new(lines, json_string(line));
    free(line);
}

/* At most LINES_MAX lines, the last saying how many more there are. */
static json_t *capped(json_t *lines, const char *noun)
{
    size_t n = json_array_size(lines);
    if (n <= LINES_MAX)
        return lines;
    json_t *out = json_array();
    for (size_t i = 0; i < LINES_MAX - 1; i++)
        json_array_append(out, json_array_get(lines, i));
    add_line(out, xasprintf("and %zu more %s", n - (LINES_MAX - 1), noun));
    json_decref(lines);
    return out;
}

static char *join(char **v, size_t n)
{
    char *s = xstrdup("");
    for (size_t i = 0; i < n; i++) {
        char *next = xasprintf("%s%s%s", s, i ? ", " : "", v[i]);
        free(s);
        s = next;
    }
    return s;
}

static json_t *finding(const char *type, const char *reason, const char *event_type, json_t *lines,
                       const char *cleared_reason, const char *cleared_msg)
{
    return json_pack("{s:s,s:s,s:s,s:o,s:s,s:s}", "type", type, "reason", reason, "event_type",
                     event_type, "lines", lines, "cleared_reason", cleared_reason,
                     "cleared_message", cleared_msg);
}

json_t *op_gpuquota_findings(const struct cap_view *v)
{
    json_t *over = json_array(), *pools = json_array(), *missing = json_array();
    for (size_t r = 0; r < v->n_resources; r++) {
        const struct cap_resource *cr = &v->resources[r];
        if (!cr->over)
            continue;
        if (isinf(cr->ratio))
            add_line(over, xasprintf("%s: namespace quotas promise %lld, none advertised", cr->name,
                                     (long long)cr->total.quota));
        else
            add_line(over, xasprintf("%s: namespace quotas promise %lld of %lld advertised "
                                     "(ratio %.2f, threshold %.2f)",
                                     cr->name, (long long)cr->total.quota,
                                     (long long)cr->total.advertised, cr->ratio, v->threshold));
    }
    for (size_t p = 0; p < v->n_pools; p++) {
        const struct cap_pool *cp = &v->pools[p];
        for (size_t r = 0; r < cp->n_res; r++) {
            const struct cap_pool_resource *pr = &cp->res[r];
            if (!pr->short_)
                continue;
            _cleanup_free_ char *nss = join(pr->pinned_ns, pr->n_pinned_ns);
            add_line(pools, xasprintf("pool %s advertises %lld %s, below the %lld its namespaces' "
                                      "quotas pin to it (namespaces: %s)",
                                      cp->name, (long long)pr->a.advertised, pr->name,
                                      (long long)pr->pinned, nss));
        }
    }
    for (size_t n = 0; n < v->n_namespaces; n++) {
        const struct cap_namespace *cn = &v->namespaces[n];
        if (cn->no_quota)
            add_line(missing, xasprintf("%s: %zu GPU pod%s, no GPU quota", cn->name, cn->gpu_pods,
                                        cn->gpu_pods == 1 ? "" : "s"));
    }
    return json_pack("[o,o,o]",
                     finding("GPUQuotaOvercommitted", "QuotasExceedAdvertisedGPUs", "Warning",
                             capped(over, "resources"), "GPUQuotaWithinCapacity",
                             "namespace quotas are within the advertised GPUs"),
                     finding("GPUPoolBelowQuota", "PoolCapacityBelowPinnedQuotas", "Warning",
                             capped(pools, "pools"), "GPUPoolCapacityRestored",
                             "every pool advertises the GPUs its namespaces' quotas pin to it"),
                     finding("GPUQuotaMissing", "NamespacesWithoutGPUQuota", "Normal",
                             capped(missing, "namespaces"), "GPUQuotaPresent",
                             "every namespace with GPU pods has a GPU quota"));
}

void op_gpuquota_metrics(const struct cap_view *v, struct prom_writer *w)
{
    static const struct {
        const char *name, *help;
        int what;
    } pool_fams[] = {
        {"gpuop_gpu_capacity",
         "GPUs a pool advertises to the scheduler (allocatable of its "
         "Ready, schedulable nodes with healthy GPUs)",
         0},
        {"gpuop_gpu_physical", "GPUs (or MIG devices) a pool's nodes have", 1},
        {"gpuop_gpu_requested", "GPUs requested by the non-finished pods on a pool's nodes", 2},
        {"gpuop_gpu_quota_pinned", "GPU quotas of namespaces whose pods can land only in the pool",
         3},
    };
    for (size_t f = 0; f < ARRAY_SIZE(pool_fams); f++) {
        prom_family(w, pool_fams[f].name, PROM_GAUGE, pool_fams[f].help);
        for (size_t p = 0; p < v->n_pools; p++)
            for (size_t r = 0; r < v->pools[p].n_res; r++) {
                const struct cap_pool_resource *pr = &v->pools[p].res[r];
                int64_t x = pool_fams[f].what == 0   ? pr->a.advertised
                            : pool_fams[f].what == 1 ? pr->a.physical
                            : pool_fams[f].what == 2 ? pr->a.requested
                                                     : pr->pinned;
                struct prom_label l[] = {{"resource", pr->name}, {"pool", v->pools[p].name}};
                prom_sample(w, pool_fams[f].name, l, 2, (double)x);
            }
    }
    prom_family(w, "gpuop_gpu_quota_hard", PROM_GAUGE,
                "A namespace's ResourceQuota on requests.<GPU resource>");
    for (size_t n = 0; n < v->n_namespaces; n++)
        for (size_t r = 0; r < v->namespaces[n].n_res; r++) {
            const struct cap_ns_resource *nr = &v->namespaces[n].res[r];
            struct prom_label l[] = {{"namespace", v->namespaces[n].name}, {"resource", nr->name}};
            if (nr->hard >= 0)
                prom_sample(w, "gpuop_gpu_quota_hard", l, 2, (double)nr->hard);
        }
    prom_family(w, "gpuop_gpu_quota_used", PROM_GAUGE,
                "What a namespace's ResourceQuota counts as used of a GPU resource");
    for (size_t n = 0; n < v->n_namespaces; n++)
        for (size_t r = 0; r < v->namespaces[n].n_res; r++) {
            const struct cap_ns_resource *nr = &v->namespaces[n].res[r];
            struct prom_label l[] = {{"namespace", v->namespaces[n].name}, {"resource", nr->name}};
            if (nr->hard >= 0)
                prom_sample(w, "gpuop_gpu_quota_used", l, 2, (double)nr->used);
        }
    prom_family(w, "gpuop_gpu_quota_overcommit_ratio", PROM_GAUGE,
                "The namespaces' GPU quotas over the GPUs advertised (+Inf: none advertised)");
    for (size_t r = 0; r < v->n_resources; r++) {
        struct prom_label l[] = {{"resource", v->resources[r].name}};
        prom_sample(w, "gpuop_gpu_quota_overcommit_ratio", l, 1, v->resources[r].ratio);
    }
    prom_metric(w, "gpuop_gpu_quota_overcommit_threshold", PROM_GAUGE,
                "The over-commit ratio above which the operator reports (--gpu-quota-overcommit-"
                "ratio)",
                v->threshold);
    prom_family(w, "gpuop_gpu_namespace_pods_without_quota", PROM_GAUGE,
                "GPU pods of a namespace that has no GPU quota");
    for (size_t n = 0; n < v->n_namespaces; n++) {
        struct prom_label l[] = {{"namespace", v->namespaces[n].name}};
        if (v->namespaces[n].no_quota)
            prom_sample(w, "gpuop_gpu_namespace_pods_without_quota", l, 1,
                        (double)v->namespaces[n].gpu_pods);
    }
}
