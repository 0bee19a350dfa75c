/* SPDX-License-Identifier: Apache-2.0 */
/* What several controllers share: node matching (selectors, affinity, taints), owner
 * references, template hashes and status writes. */
#include <inttypes.h>
#include <string.h>

#include "ks-controllers.h"

struct ks_type *ctl_core(struct ksim *ks, const char *plural)
{
    return ks_type_find(ks, "", "v1", plural);
}

json_t *ctl_values(json_t *objs)
{
    json_t *a = json_array();
    const char *k;
    json_t *v;
    json_object_foreach (objs, k, v)
        json_array_append(a, v);
    return a;
}

bool ctl_changed_since(struct ksim *ks, struct ks_type *t, uint64_t cursor, json_t **ret_changed,
                       size_t *ret_deleted)
{
    size_t i0;
    if (!ks_ev_since(ks, cursor, &i0))
        return false;
    json_t *changed = json_array(), *seen = json_object();
    size_t deleted = 0;
    for (size_t i = i0; i < ks->ev_len; i++) {
        struct ks_event *e = &ks->ev[i];
        if (e->type != t)
            continue;
        if (e->kind == KS_DELETED) {
            deleted++;
            continue;
        }
        if (!ret_changed)
            continue;
        const char *ns = t->namespaced ? ks_obj_ns(e->obj) : "";
        json_t *cur = ks_get(t, ns, ks_obj_name(e->obj));
        if (!cur)
            continue;
        _cleanup_free_ char *key = ks_key(ns, ks_obj_name(e->obj));
        if (json_object_get(seen, key))
            continue;
        json_object_set_new(seen, key, json_true());
        json_array_append(changed, cur);
    }
    json_decref(seen);
    if (ret_changed)
        *ret_changed = changed;
    else
        json_decref(changed);
    if (ret_deleted)
        *ret_deleted = deleted;
    return true;
}

/* ---- node matching ------------------------------------------------------------------------ */

bool ctl_node_term_matches(json_t *term, json_t *node)
{
    json_t *labels = kobj_labels(node);
    size_t i;
    json_t *ex;
    json_array_foreach (json_object_get(term, "matchExpressions"), i, ex) {
        const char *key = kobj_str(ex, "key"), *op = kobj_str(ex, "operator");
        const char *have = key ? json_string_value(json_object_get(labels, key)) : NULL;
        bool in = false;
        size_t j;
        json_t *v;
        json_array_foreach (json_object_get(ex, "values"), j, v)
            if (have && streq_ptr(json_string_value(v), have))
                in = true;
        if (!op)
            return false;
        if (streq(op, "In") && !(have && in))
            return false;
        if (streq(op, "NotIn") && have && in)
            return false;
        if (streq(op, "Exists") && !have)
            return false;
        if (streq(op, "DoesNotExist") && have)
            return false;
        if ((streq(op, "Gt") || streq(op, "Lt"))) {
            long long hv, wv;
            const char *w = json_string_value(json_array_get(json_object_get(ex, "values"), 0));
            if (!have || !w || sscanf(have, "%lld", &hv) != 1 || sscanf(w, "%lld", &wv) != 1)
                return false;
            if (streq(op, "Gt") ? !(hv > wv) : !(hv < wv))
                return false;
        }
    }
    json_array_foreach (json_object_get(term, "matchFields"), i, ex) {
        const char *key = kobj_str(ex, "key"), *op = kobj_str(ex, "operator");
        if (!streq_ptr(key, "metadata.name"))
            return false;
        bool in = false;
        size_t j;
        json_t *v;
        json_array_foreach (json_object_get(ex, "values"), j, v)
            if (streq_ptr(json_string_value(v), ks_obj_name(node)))
                in = true;
        if (streq_ptr(op, "In") ? !in : in)
            return false;
    }
    return true;
}

bool ctl_tolerates(json_t *tols, json_t *taint)
{
    size_t i;
    json_t *t;
    json_array_foreach (tols, i, t) {
        const char *eff = kobj_str(t, "effect");
        if (eff && eff[0] && !streq_ptr(eff, kobj_str(taint, "effect")))
            continue;
        const char *key = kobj_str(t, "key");
        const char *op = kobj_str(t, "operator");
        if (op && streq(op, "Exists")) {
            if (!key || !key[0] || streq_ptr(key, kobj_str(taint, "key")))
                return true;
            continue;
        }
        if (streq_ptr(key, kobj_str(taint, "key")) &&
            streq(kobj_str(t, "value") ?: "", kobj_str(taint, "value") ?: ""))
            return true;
    }
    return false;
}

/* nodeSelector and required node affinity (the scheduler's NodeAffinity filter). */
bool ctl_node_affinity_matches(json_t *podspec, json_t *node)
{
    const char *k;
    json_t *v;
    json_t *labels = kobj_labels(node);
    json_object_foreach (json_object_get(podspec, "nodeSelector"), k, v)
        if (!json_equal(json_object_get(labels, k), v))
            return false;
    json_t *terms = kobj_path(podspec, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuring"
                                       "Execution.nodeSelectorTerms");
    if (json_is_array(terms)) {
        bool any = false;
        size_t i;
        json_t *term;
        json_array_foreach (terms, i, term)
            if (ctl_node_term_matches(term, node))
                any = true;
        if (!any)
            return false;
    }
    return true;
}

json_t *ctl_untolerated_taint(json_t *tols, json_t *node)
{
    size_t i;
    json_t *taint;
    json_array_foreach (kobj_path(node, "spec.taints"), i, taint) {
        const char *eff = kobj_str(taint, "effect");
        if (!streq_ptr(eff, "NoSchedule") && !streq_ptr(eff, "NoExecute"))
            continue;
        if (!ctl_tolerates(tols, taint))
            return taint;
    }
    return NULL;
}

/* Whether a pod with this spec may run on node, as the DaemonSet controller decides. */
bool ctl_should_run(json_t *podspec, json_t *tols, json_t *node)
{
    return ctl_node_affinity_matches(podspec, node) && !ctl_untolerated_taint(tols, node);
}

/* Whether a daemon pod already on node keeps running there: as Kubernetes decides, a NoSchedule
 * taint keeps new pods off but leaves running ones; only a NoExecute taint it does not tolerate
 * (or node affinity it no longer matches) removes it. */
bool ctl_should_continue_running(json_t *podspec, json_t *tols, json_t *node)
{
    if (!ctl_node_affinity_matches(podspec, node))
        return false;
    size_t i;
    json_t *taint;
    json_array_foreach (kobj_path(node, "spec.taints"), i, taint) {
        if (streq_ptr(kobj_str(taint, "effect"), "NoExecute") && !ctl_tolerates(tols, taint))
            return false;
    }
    return true;
}

/* The tolerations the DaemonSet controller adds to its pods. */
json_t *ctl_ds_tolerations(json_t *podspec)
{
    json_t *tols = json_deep_copy(json_object_get(podspec, "tolerations"));
    if (!json_is_array(tols)) {
        json_decref(tols);
        tols = json_array();
    }
    static const struct {
        const char *key, *effect;
        bool host_net;
    } add[] = {
        {"node.kubernetes.io/not-ready", "NoExecute", false},
        {"node.kubernetes.io/unreachable", "NoExecute", false},
        {"node.kubernetes.io/disk-pressure", "NoSchedule", false},
        {"node.kubernetes.io/memory-pressure", "NoSchedule", false},
        {"node.kubernetes.io/pid-pressure", "NoSchedule", false},
        {T_UNSCHED, "NoSchedule", false},
        {"node.kubernetes.io/network-unavailable", "NoSchedule", true},
    };
    for (size_t i = 0; i < ARRAY_SIZE(add); i++) {
        if (add[i].host_net && !json_is_true(json_object_get(podspec, "hostNetwork")))
            continue;
        json_t *t = json_pack("{s:s,s:s,s:s}", "key", add[i].key, "operator", "Exists", "effect",
                              add[i].effect);
        bool have = false;
        size_t j;
        json_t *x;
        json_array_foreach (tols, j, x)
            if (json_equal(x, t))
                have = true;
        if (!have)
            json_array_append(tols, t);
        json_decref(t);
    }
    return tols;
}

char *ctl_template_hash(json_t *tmpl, json_int_t collisions)
{
    char *s = json_dumps(tmpl, JSON_COMPACT | JSON_SORT_KEYS);
    uint32_t h = 2166136261u;
    for (const char *p = s ? s : ""; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 16777619u;
    }
    free(s);
    if (collisions)
        h ^= (uint32_t)collisions * 2654435761u;
    char dec[16];
    snprintf(dec, sizeof(dec), "%" PRIu32, h);
    static const char alpha[] = "bcdfghjklmnpqrstvwxz2456789";
    char *r = xstrdup(dec);
    for (char *p = r; *p; p++)
        *p = alpha[(unsigned char)*p % 27];
    return r;
}

json_t *ctl_owner_ref(json_t *owner, const char *api_version, const char *kind)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:b,s:b}", "apiVersion", api_version, "kind", kind, "name",
                     ks_obj_name(owner), "uid", kobj_uid(owner) ?: "", "controller", 1,
                     "blockOwnerDeletion", 1);
}

bool ctl_controlled_by(json_t *obj, const char *uid)
{
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(obj, "metadata.ownerReferences"), i, r)
        if (json_is_true(json_object_get(r, "controller")) && streq_ptr(kobj_str(r, "uid"), uid))
            return true;
    return false;
}

json_t *ctl_pods_by_controller(struct ksim *ks, const char *kind)
{
    json_t *by = json_object();
    const char *k;
    json_t *p;
    json_object_foreach (ctl_core(ks, "pods")->objs, k, p) {
        size_t i;
        json_t *r;
        json_array_foreach (kobj_path(p, "metadata.ownerReferences"), i, r) {
            if (!json_is_true(json_object_get(r, "controller")) || !streq_ptr(kobj_kind(r), kind) ||
                !kobj_str(r, "uid"))
                continue;
            json_t *l = json_object_get(by, kobj_str(r, "uid"));
            if (!l) {
                l = json_array();
                json_object_set_new(by, kobj_str(r, "uid"), l);
            }
            json_array_append(l, p);
        }
    }
    return by;
}

bool ctl_set_status(struct ksim *ks, struct ks_type *t, json_t *obj, json_t *st)
{
    json_t *cur = ks_get(t, ks_obj_ns(obj), ks_obj_name(obj));
    if (!cur || json_equal(st, json_object_get(cur, "status"))) {
        json_decref(st);
        return false;
    }
    /* a status write takes only the status of what it is given */
    ks_update(ks, t, cur, json_pack("{s:o}", "status", st), "status");
    return true;
}

void ctl_event(struct ksim *ks, json_t *obj, const char *kind, const char *type, const char *reason,
               const char *message)
{
    char now[40];
    ks_now_str(ks, now, sizeof(now));
    _cleanup_free_ char *gen = xasprintf("%s.", ks_obj_name(obj));
    json_t *ev =
        json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:i,s:s,s:s,s:{s:s}}",
                  "apiVersion", "v1", "kind", "Event", "metadata", "generateName", gen, "namespace",
                  ks_obj_ns(obj)[0] ? ks_obj_ns(obj) : "default", "involvedObject", "kind", kind,
                  "namespace", ks_obj_ns(obj), "name", ks_obj_name(obj), "uid", kobj_uid(obj) ?: "",
                  "apiVersion", kobj_api_version(obj) ?: "", "type", type, "reason", reason,
                  "message", message, "count", 1, "firstTimestamp", now, "lastTimestamp", now,
                  "source", "component", "kubesim-controller-manager");
    struct err e = {0};
    ks_obj_create_any(ks, ev, &e);
    json_decref(ev);
}
