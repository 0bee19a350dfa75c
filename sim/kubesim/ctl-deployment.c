/* SPDX-License-Identifier: Apache-2.0 */
/* The ReplicaSet and Deployment controllers. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "ks-controllers.h"

static int create_pod(struct ksim *ks, json_t *rs)
{
    json_t *tmpl = kobj_path(rs, "spec.template");
    json_t *pod = json_pack("{s:s,s:s,s:O,s:O}", "apiVersion", "v1", "kind", "Pod", "metadata",
                            json_object_get(tmpl, "metadata") ?: json_object(), "spec",
                            json_object_get(tmpl, "spec") ?: json_object());
    json_t *meta = json_deep_copy(json_object_get(pod, "metadata"));
    json_object_set_new(pod, "metadata", meta);
    _cleanup_free_ char *gen = xasprintf("%s-", ks_obj_name(rs));
    json_object_set_new(meta, "generateName", json_string(gen));
    json_object_set_new(meta, "namespace", json_string(ks_obj_ns(rs)));
    json_object_set_new(meta, "ownerReferences",
                        json_pack("[o]", ctl_owner_ref(rs, "apps/v1", "ReplicaSet")));
    struct err e = {0};
    int r = ks_obj_create_any(ks, pod, &e);
    json_decref(pod);
    return r;
}

/* More replicas than kubesim holds for one owner: the ReplicaFailure condition the controller
 * sets when it cannot create pods, and a Warning Event the first time. */
static void over_cap(struct ksim *ks, json_t *rs, json_t *st, int64_t want, int64_t cap)
{
    _cleanup_free_ char *msg =
        xasprintf("kubesim holds at most %lld pods per ReplicaSet (spec.replicas is %lld)",
                  (long long)cap, (long long)want);
    json_t *old = json_array_get(kobj_path(rs, "status.conditions"), 0);
    const char *since = kobj_str(old, "lastTransitionTime");
    char now[40];
    ks_now_str(ks, now, sizeof(now));
    if (!streq_ptr(kobj_str(old, "message"), msg)) {
        since = now;
        ctl_event(ks, rs, "ReplicaSet", "Warning", "FailedCreate", msg);
    }
    json_object_set_new(st, "conditions",
                        json_pack("[{s:s,s:s,s:s,s:s,s:s}]", "type", "ReplicaFailure", "status",
                                  "True", "reason", "FailedCreate", "message", msg,
                                  "lastTransitionTime", since));
}

bool ks_ctl_replicasets(struct ksim *ks)
{
    struct ks_type *rst = ks_type_find(ks, "apps", "v1", "replicasets");
    if (json_object_size(rst->objs) == 0)
        return false;
    struct ks_type *pt = ctl_core(ks, "pods");
    json_t *by = ctl_pods_by_controller(ks, "ReplicaSet");
    json_t *all = ctl_values(rst->objs);
    bool changed = false;
    size_t i;
    json_t *rs;
    json_array_foreach (all, i, rs) {
        if (ks_is_deleting(rs))
            continue;
        json_t *want_j = kobj_path(rs, "spec.replicas");
        int64_t want = json_is_integer(want_j) ? json_integer_value(want_j) : 1;
        json_t *owned = json_object_get(by, kobj_uid(rs));
        json_t *live = json_array();
        int64_t ready = 0;
        size_t j;
        json_t *p;
        json_array_foreach (owned, j, p) {
            if (ks_is_deleting(p) || streq_ptr(kobj_path_str(p, "status.phase"), "Failed") ||
                streq_ptr(kobj_path_str(p, "status.phase"), "Succeeded"))
                continue;
            json_array_append(live, p);
            if (ks_pod_ready(p))
                ready++;
        }
        int64_t have = (int64_t)json_array_size(live);
        int64_t cap = (int64_t)ks->opts.max_pods_per_owner;
        int64_t target = want < cap ? want : cap;
        /* slow start, as the ReplicaSet controller: batches of 1, 2, 4, ... pods, stopping at
         * the first failure, and no more than this reconcile's budget */
        int64_t missing = target - have, made = 0;
        bool failed = false;
        for (int64_t batch = 1; made < missing && ks->pod_budget > 0 && !failed; batch *= 2) {
            for (int64_t k = 0; k < batch && made < missing && ks->pod_budget > 0; k++) {
                if (create_pod(ks, rs) < 0) {
                    failed = true;
                    break;
                }
                made++;
                ks->pod_budget--;
            }
            changed = true;
        }
        if (made < missing && !failed)
            ks->more_work = true;
        have += made;
        /* scale down: unready pods first, then the newest */
        for (int64_t n = have; n > want; n--) {
            size_t pick = 0;
            json_array_foreach (live, j, p)
                if (!ks_pod_ready(p))
                    pick = j;
            if (ks_pod_ready(json_array_get(live, pick)))
                pick = json_array_size(live) - 1;
            ks_delete_obj(ks, pt, json_array_get(live, pick), NULL);
            json_array_remove(live, pick);
            changed = true;
        }
        json_t *st =
            json_pack("{s:I,s:I,s:I,s:I,s:O}", "replicas", (json_int_t)have, "fullyLabeledReplicas",
                      (json_int_t)have, "readyReplicas", (json_int_t)ready, "availableReplicas",
                      (json_int_t)ready, "observedGeneration",
                      kobj_path(rs, "metadata.generation") ?: json_integer(0));
        if (want > cap)
            over_cap(ks, rs, st, want, cap);
        changed |= ctl_set_status(ks, rst, rs, st);
        json_decref(live);
    }
    json_decref(all);
    json_decref(by);
    return changed;
}

bool ks_ctl_deployments(struct ksim *ks)
{
    struct ks_type *dt = ks_type_find(ks, "apps", "v1", "deployments");
    if (json_object_size(dt->objs) == 0)
        return false;
    struct ks_type *rst = ks_type_find(ks, "apps", "v1", "replicasets");
    json_t *all = ctl_values(dt->objs);
    bool changed = false;
    char ts[40];
    ks_now_str(ks, ts, sizeof(ts));
    size_t i;
    json_t *d;
    json_array_foreach (all, i, d) {
        if (ks_is_deleting(d))
            continue;
        const char *uid = kobj_uid(d);
        json_t *want_j = kobj_path(d, "spec.replicas");
        int64_t want = json_is_integer(want_j) ? json_integer_value(want_j) : 1;
        json_t *tmpl = kobj_path(d, "spec.template");
        _cleanup_free_ char *hash = ctl_template_hash(tmpl, 0);
        _cleanup_free_ char *rsname = xasprintf("%s-%s", ks_obj_name(d), hash);
        json_t *newrs = ks_get(rst, ks_obj_ns(d), rsname);
        if (!newrs) {
            json_t *t2 = json_deep_copy(tmpl);
            json_object_set_new(kobj_ensure_object(kobj_ensure_object(t2, "metadata"), "labels"),
                                "pod-template-hash", json_string(hash));
            json_t *sel = json_deep_copy(kobj_path(d, "spec.selector"));
            if (!json_is_object(sel)) {
                json_decref(sel);
                sel = json_object();
            }
            json_object_set_new(kobj_ensure_object(sel, "matchLabels"), "pod-template-hash",
                                json_string(hash));
            json_t *labels = json_deep_copy(kobj_labels(t2));
            json_t *rs = json_pack("{s:s,s:s,s:{s:s,s:s,s:o,s:[o]},s:{s:I,s:o,s:o}}", "apiVersion",
                                   "apps/v1", "kind", "ReplicaSet", "metadata", "name", rsname,
                                   "namespace", ks_obj_ns(d), "labels", labels, "ownerReferences",
                                   ctl_owner_ref(d, "apps/v1", "Deployment"), "spec", "replicas",
                                   (json_int_t)0, "selector", sel, "template", t2);
            struct err e = {0};
            ks_obj_create_any(ks, rs, &e);
            json_decref(rs);
            newrs = ks_get(rst, ks_obj_ns(d), rsname);
            changed = true;
            if (!newrs)
                continue;
        }
        int64_t new_ready = json_integer_value(kobj_path(newrs, "status.readyReplicas"));
        int64_t new_have = json_integer_value(kobj_path(newrs, "status.replicas"));
        bool recreate = streq_ptr(kobj_path_str(d, "spec.strategy.type"), "Recreate");
        /* old ReplicaSets: scaled down as new pods turn ready (Recreate: all at once) */
        int64_t old_left = recreate ? 0 : want - new_ready;
        if (old_left < 0)
            old_left = 0;
        int64_t old_pods = 0, total = new_have, ready = new_ready;
        const char *k;
        json_t *rs;
        json_t *mine = json_array();
        json_object_foreach (rst->objs, k, rs)
            if (ctl_controlled_by(rs, uid) && rs != newrs)
                json_array_append(mine, rs);
        size_t j;
        json_array_foreach (mine, j, rs) {
            int64_t cur = json_integer_value(kobj_path(rs, "spec.replicas"));
            int64_t to = cur < old_left ? cur : old_left;
            old_left -= to;
            old_pods += json_integer_value(kobj_path(rs, "status.replicas"));
            total += json_integer_value(kobj_path(rs, "status.replicas"));
            ready += json_integer_value(kobj_path(rs, "status.readyReplicas"));
            if (to != cur) {
                json_t *n = json_deep_copy(rs);
                json_object_set_new(kobj_ensure_object(n, "spec"), "replicas", json_integer(to));
                ks_update(ks, rst, rs, n, NULL);
                changed = true;
            }
        }
        json_decref(mine);
        int64_t new_want = recreate && old_pods > 0 ? 0 : want;
        newrs = ks_get(rst, ks_obj_ns(d), rsname);
        if (newrs && json_integer_value(kobj_path(newrs, "spec.replicas")) != new_want) {
            json_t *n = json_deep_copy(newrs);
            json_object_set_new(kobj_ensure_object(n, "spec"), "replicas", json_integer(new_want));
            ks_update(ks, rst, newrs, n, NULL);
            changed = true;
        }
        bool available = ready >= want;
        json_t *old_conds = kobj_path(d, "status.conditions");
        const char *lt = ts;
        size_t ci;
        json_t *oc;
        json_array_foreach (old_conds, ci, oc)
            if (streq_ptr(kobj_str(oc, "type"), "Available") &&
                streq_ptr(kobj_str(oc, "status"), available ? "True" : "False"))
                lt = kobj_str(oc, "lastTransitionTime") ?: ts;
        json_t *st = json_pack(
            "{s:I,s:I,s:I,s:I,s:O,s:[{s:s,s:s,s:s,s:s,s:s,s:s}]}", "replicas", (json_int_t)total,
            "updatedReplicas", (json_int_t)new_have, "readyReplicas", (json_int_t)ready,
            "availableReplicas", (json_int_t)ready, "observedGeneration",
            kobj_path(d, "metadata.generation") ?: json_integer(0), "conditions", "type",
            "Available", "status", available ? "True" : "False", "reason",
            available ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable", "message",
            available ? "Deployment has minimum availability."
                      : "Deployment does not have minimum availability.",
            "lastUpdateTime", lt, "lastTransitionTime", lt);
        if (total - ready > 0)
            json_object_set_new(st, "unavailableReplicas", json_integer(total - ready));
        changed |= ctl_set_status(ks, dt, d, st);
    }
    json_decref(all);
    return changed;
}
