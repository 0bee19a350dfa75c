/* SPDX-License-Identifier: Apache-2.0 */
/* The eviction subresource: a pod deletion that honours PodDisruptionBudgets. */
#include <string.h>

#include "ks-objects.h"

struct ks_pdb_math ks_pdb_compute(struct ksim *ks, json_t *pdb)
{
    struct ks_pdb_math m = {0};
    struct err e = {0};
    json_t *sel = kobj_path(pdb, "spec.selector");
    struct ksim_selector *s = json_is_object(sel) ? ksim_label_selector_from_json(sel, &e) : NULL;
    if (s) {
        const char *k;
        json_t *p;
        json_object_foreach (ks_type_find(ks, "", "v1", "pods")->objs, k, p) {
            if (!streq(ks_obj_ns(p), ks_obj_ns(pdb)) || ks_is_deleting(p) ||
                !ksim_selector_matches(s, kobj_labels(p)))
                continue;
            m.expected++;
            if (ks_pod_ready(p))
                m.healthy++;
        }
        ksim_selector_free(s);
    }
    json_t *mina = kobj_path(pdb, "spec.minAvailable");
    json_t *maxu = kobj_path(pdb, "spec.maxUnavailable");
    if (maxu)
        m.desired = m.expected - ks_intstr_scaled(maxu, m.expected, true, 0);
    else if (mina)
        m.desired = ks_intstr_scaled(mina, m.expected, true, 0);
    else
        m.desired = m.expected;
    if (m.desired < 0)
        m.desired = 0;
    m.allowed = m.healthy - m.desired;
    if (m.allowed < 0)
        m.allowed = 0;
    return m;
}

int ks_obj_evict(struct ksim *ks, json_t *pod, struct ks_status *st)
{
    struct ks_type *podt = ks_type_find(ks, "", "v1", "pods");
    struct ks_type *pt = ks_type_find(ks, "policy", "v1", "poddisruptionbudgets");
    json_t *match = json_array();
    const char *k;
    json_t *pdb;
    json_object_foreach (pt->objs, k, pdb) {
        if (!streq(ks_obj_ns(pdb), ks_obj_ns(pod)))
            continue;
        struct err e = {0};
        json_t *sel = kobj_path(pdb, "spec.selector");
        struct ksim_selector *s =
            json_is_object(sel) ? ksim_label_selector_from_json(sel, &e) : NULL;
        if (s && s->n > 0 && ksim_selector_matches(s, kobj_labels(pod)))
            json_array_append(match, pdb);
        ksim_selector_free(s);
    }
    int r = 0;
    if (json_array_size(match) > 1) {
        ks_status_set(st, 500, "InternalError", NULL, "%s",
                      "This pod has more than one PodDisruptionBudget, which the eviction "
                      "subresource does not support.");
        r = -EBUSY;
    } else if (json_array_size(match) == 1 && !ks_is_deleting(pod)) {
        pdb = json_array_get(match, 0);
        json_t *gen = kobj_path(pdb, "metadata.generation");
        json_t *og = kobj_path(pdb, "status.observedGeneration");
        struct ks_pdb_math m = ks_pdb_compute(ks, pdb);
        bool healthy = ks_pod_ready(pod);
        char msg[512];
        if (!og || json_integer_value(og) < json_integer_value(gen)) {
            snprintf(msg, sizeof(msg),
                     "The disruption budget %s is still being processed by the server.",
                     ks_obj_name(pdb));
            r = -EAGAIN;
        } else if (healthy ? json_integer_value(kobj_path(pdb, "status.disruptionsAllowed")) <= 0 ||
                                 m.allowed <= 0
                           : m.healthy < m.desired) {
            snprintf(msg, sizeof(msg),
                     "The disruption budget %s needs %lld healthy pods and has %lld currently",
                     ks_obj_name(pdb),
                     (long long)json_integer_value(kobj_path(pdb, "status.desiredHealthy")),
                     (long long)json_integer_value(kobj_path(pdb, "status.currentHealthy")));
            r = -EAGAIN;
        }
        if (r < 0) {
            json_t *det = json_pack("{s:[{s:s,s:s}]}", "causes", "reason", "DisruptionBudget",
                                    "message", msg);
            ks_status_set(st, 429, "TooManyRequests", det, "%s",
                          "Cannot evict pod as it would violate the pod's disruption budget.");
        } else if (healthy) {
            /* record the disruption as the API server does, before the controller catches up */
            json_t *n = json_deep_copy(pdb);
            json_t *pst = kobj_ensure_object(n, "status");
            json_object_set_new(
                pst, "disruptionsAllowed",
                json_integer(json_integer_value(json_object_get(pst, "disruptionsAllowed")) - 1));
            char ts[40];
            ks_now_str(ks, ts, sizeof(ts));
            json_object_set_new(kobj_ensure_object(pst, "disruptedPods"), ks_obj_name(pod),
                                json_string(ts));
            ks_update(ks, pt, pdb, n, "status");
        }
    }
    if (r == 0) {
        ks_delete_obj(ks, podt, pod, NULL);
        ks_status_ok(st, 201, NULL);
    }
    json_decref(match);
    return r;
}
