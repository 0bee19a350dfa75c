/* SPDX-License-Identifier: Apache-2.0 */
/* The scheduler, reduced: bind pending pods to a feasible node, fewest pods first; and the pod
 * garbage collector for pods bound to nodes that no longer exist. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "ks-controllers.h"

bool ks_ctl_schedule(struct ksim *ks)
{
    struct ks_type *pt = ctl_core(ks, "pods");
    struct ks_type *nt = ctl_core(ks, "nodes");
    json_t *pending = json_array();
    json_t *load = json_object(); /* node -> pods bound */
    const char *k;
    json_t *p;
    json_object_foreach (pt->objs, k, p) {
        const char *nn = kobj_path_str(p, "spec.nodeName");
        if (nn) {
            json_t *c = json_object_get(load, nn);
            json_object_set_new(load, nn, json_integer(c ? json_integer_value(c) + 1 : 1));
            continue;
        }
        if (ks_is_deleting(p))
            continue;
        const char *sched = kobj_path_str(p, "spec.schedulerName");
        if (sched && !streq(sched, "default-scheduler"))
            continue;
        /* already marked unschedulable and nothing changed since: leave it */
        json_array_append(pending, p);
    }
    bool changed = false;
    char ts[40];
    ks_now_str(ks, ts, sizeof(ts));
    size_t i;
    json_array_foreach (pending, i, p) {
        json_t *spec = json_object_get(p, "spec");
        json_t *tols = json_object_get(spec, "tolerations");
        const char *best = NULL;
        json_int_t best_load = 0;
        size_t total = 0;
        json_t *n;
        json_object_foreach (nt->objs, k, n) {
            total++;
            if (json_is_true(kobj_path(n, "spec.unschedulable")))
                continue;
            if (!ctl_should_run(spec, tols, n))
                continue;
            json_int_t l = json_integer_value(json_object_get(load, ks_obj_name(n)));
            if (!best || l < best_load) {
                best = ks_obj_name(n);
                best_load = l;
            }
        }
        json_t *c = json_deep_copy(p);
        json_t *cond;
        if (best) {
            json_object_set_new(kobj_ensure_object(c, "spec"), "nodeName", json_string(best));
            json_object_set_new(load, best, json_integer(best_load + 1));
            cond = json_pack("{s:s,s:s,s:n,s:s}", "type", "PodScheduled", "status", "True",
                             "lastProbeTime", "lastTransitionTime", ts);
        } else {
            char msg[128];
            snprintf(msg, sizeof(msg),
                     "0/%zu nodes are available: %zu node(s) didn't match Pod's node "
                     "affinity/selector, taints or were unschedulable.",
                     total, total);
            cond = json_pack("{s:s,s:s,s:n,s:s,s:s,s:s}", "type", "PodScheduled", "status", "False",
                             "lastProbeTime", "lastTransitionTime", ts, "reason", "Unschedulable",
                             "message", msg);
        }
        json_t *old_cond = json_array_get(kobj_path(p, "status.conditions"), 0);
        if (!best && streq_ptr(kobj_str(old_cond, "reason"), "Unschedulable") &&
            streq_ptr(kobj_str(old_cond, "message"), kobj_str(cond, "message"))) {
            json_decref(cond);
            json_decref(c);
            continue;
        }
        json_object_set_new(kobj_ensure_object(c, "status"), "conditions", json_pack("[o]", cond));
        /* binding sets spec.nodeName, which a plain update may not: commit directly */
        ks_commit(ks, pt, c, KS_MODIFIED, p);
        changed = true;
    }
    json_decref(pending);
    json_decref(load);
    return changed;
}

/* The pod garbage collector: pods bound to nodes that no longer exist are deleted. */
bool ks_ctl_orphan_pods(struct ksim *ks)
{
    struct ks_type *pt = ctl_core(ks, "pods");
    struct ks_type *nt = ctl_core(ks, "nodes");
    json_t *gone = json_array();
    const char *k;
    json_t *p;
    json_object_foreach (pt->objs, k, p) {
        const char *nn = kobj_path_str(p, "spec.nodeName");
        if (nn && !ks_get(nt, "", nn))
            json_array_append(gone, p);
    }
    size_t i;
    json_array_foreach (gone, i, p) {
        json_t *cur = ks_get(pt, ks_obj_ns(p), ks_obj_name(p));
        if (cur)
            ks_remove(ks, pt, cur);
    }
    bool changed = json_array_size(gone) > 0;
    json_decref(gone);
    return changed;
}
