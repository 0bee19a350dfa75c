/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one disruption budget (upgrade.h, "the disruption budget"): how a node counts against its
 * pool's limits, which pool selects it, and the PodDisruptionBudgets over an eviction. The
 * upgrade planner counts with these, and so does the remediation planner (src/lib/remediation),
 * so a driver rollout and a node taken out for a GPU fault draw on the same budget.
 */
#include <string.h>

#include "kobj.h"
#include "upgrade.h"

bool upg_node_ready(const json_t *node)
{
    return kobj_condition_true(node, "Ready");
}

long long upg_node_gpus(const json_t *node)
{
    const char *keys[] = {"status", "allocatable", "nvidia.com/gpu", NULL};
    json_t *q = kobj_keys(node, keys);
    int64_t m;
    if (json_is_string(q) && kobj_quantity_milli(json_string_value(q), &m) == 0)
        return m / 1000;
    const char *c = kobj_label(node, "nvidia.com/gpu.count");
    int64_t v;
    if (c && parse_i64(c, &v) == 0 && v >= 0)
        return v;
    return 0;
}

bool upg_state_in_flight(enum upg_state s)
{
    return s >= UPG_CORDON && s <= UPG_UNCORDON;
}

void upg_budget_add(struct upg_budget *b, bool ready, bool unsched, enum upg_state st,
                    long long gpus)
{
    b->total++;
    b->gpus_total += gpus;
    if (!ready || unsched || st == UPG_CORDON)
        b->unavailable++;
    else if (!upg_state_in_flight(st))
        b->gpus_ready += gpus;
    if (upg_state_in_flight(st))
        b->in_progress++;
}

void upg_budget_add_node(struct upg_budget *b, const json_t *node)
{
    int st = upg_state_parse(kobj_label(node, UPG_LABEL_STATE));
    upg_budget_add(b, upg_node_ready(node), json_is_true(kobj_path(node, "spec.unschedulable")),
                   st < 0 ? UPG_UNKNOWN : (enum upg_state)st, upg_node_gpus(node));
}

long long upg_limit(const json_t *int_or_percent, int total)
{
    if (!int_or_percent)
        return total;
    return kobj_int_or_percent_scaled(int_or_percent, total, true);
}

bool upg_pool_selects(const struct upg_pool *p, const json_t *node)
{
    if (p->nvidia_driver)
        return streq_ptr(kobj_label(node, UPG_LABEL_DRIVER_OWNER), p->nvidia_driver);
    return json_is_object(p->node_selector) &&
           kobj_labels_match(p->node_selector, kobj_labels(node));
}

/* The budgets over `pod`: those of its namespace whose matchLabels select it. */
static bool pdb_covers(const json_t *pdb, const json_t *pod)
{
    pod = upg_pod_obj(pod);
    json_t *sel = kobj_path(pdb, "spec.selector.matchLabels");
    return streq_ptr(kobj_namespace(pdb), kobj_namespace(pod)) && json_is_object(sel) &&
           json_object_size(sel) > 0 && kobj_labels_match(sel, kobj_labels(pod));
}

bool upg_pdb_allows(const json_t *pdbs, json_t *used, const json_t *pod, const char **ret_pdb)
{
    size_t i;
    json_t *pdb;
    json_array_foreach ((json_t *)pdbs, i, pdb) {
        if (!pdb_covers(pdb, pod))
            continue;
        _cleanup_free_ char *key = xasprintf("%s/%s", kobj_namespace(pdb), kobj_name(pdb));
        long long n = json_integer_value(json_object_get(used, key));
        long long allowed = json_integer_value(kobj_path(pdb, "status.disruptionsAllowed"));
        if (allowed - n <= 0) {
            *ret_pdb = kobj_name(pdb);
            return false;
        }
    }
    /* counted only once every budget over the pod allows it */
    json_array_foreach ((json_t *)pdbs, i, pdb) {
        if (!pdb_covers(pdb, pod))
            continue;
        _cleanup_free_ char *key = xasprintf("%s/%s", kobj_namespace(pdb), kobj_name(pdb));
        long long n = json_integer_value(json_object_get(used, key));
        json_object_set_new(used, key, json_integer(n + 1));
    }
    return true;
}

bool upg_pod_ready(const json_t *pod)
{
    pod = upg_pod_obj(pod);
    return streq_ptr(kobj_path_str(pod, "status.phase"), "Running") &&
           kobj_condition_true(pod, "Ready");
}

bool upg_pod_finished(const json_t *pod)
{
    pod = upg_pod_obj(pod);
    const char *ph = kobj_path_str(pod, "status.phase");
    return streq_ptr(ph, "Succeeded") || streq_ptr(ph, "Failed");
}

bool upg_pod_daemon(const json_t *pod)
{
    pod = upg_pod_obj(pod);
    size_t i;
    json_t *o;
    json_array_foreach (kobj_path(pod, "metadata.ownerReferences"), i, o) {
        if (streq_ptr(kobj_str(o, "kind"), "DaemonSet"))
            return true;
    }
    return kobj_annotation(pod, "kubernetes.io/config.mirror") != NULL;
}
