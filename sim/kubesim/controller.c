/* SPDX-License-Identifier: Apache-2.0 */
/* The control loops kubesim runs in place of kube-controller-manager, the scheduler's binding of
 * DaemonSet pods and the kubelet's pod status: DaemonSets (with ControllerRevisions), pod
 * readiness, the node unschedulable taint, PodDisruptionBudget status and evictions, namespace
 * deletion, and garbage collection through ownerReferences. All run under ks->lock. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kubesim-internal.h"

#define T_UNSCHED "node.kubernetes.io/unschedulable"

static struct ks_type *core(struct ksim *ks, const char *plural)
{
    return ks_type_find(ks, "", "v1", plural);
}

static bool is_deleting(json_t *o)
{
    return jpath(o, "metadata.deletionTimestamp") != NULL;
}

bool ks_pod_ready(json_t *pod)
{
    if (!streq_ptr(jstr(pod, "status.phase"), "Running") || is_deleting(pod))
        return false;
    size_t i;
    json_t *c;
    json_array_foreach (jpath(pod, "status.conditions"), i, c)
        if (streq_ptr(jstr(c, "type"), "Ready"))
            return streq_ptr(jstr(c, "status"), "True");
    return false;
}

static bool has_fin(json_t *obj, const char *f)
{
    size_t i;
    json_t *x;
    json_array_foreach (jpath(obj, "metadata.finalizers"), i, x)
        if (streq_ptr(json_string_value(x), f))
            return true;
    return false;
}

/* A snapshot of a map's values: controllers change the map while walking it. */
static json_t *values(json_t *objs)
{
    json_t *a = json_array();
    const char *k;
    json_t *v;
    json_object_foreach (objs, k, v)
        json_array_append(a, v);
    return a;
}

/* ---- node matching ------------------------------------------------------------------------ */

static bool node_selector_term_matches(json_t *term, json_t *node)
{
    json_t *labels = jpath(node, "metadata.labels");
    size_t i;
    json_t *ex;
    json_array_foreach (json_object_get(term, "matchExpressions"), i, ex) {
        const char *key = jstr(ex, "key"), *op = jstr(ex, "operator");
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
        const char *key = jstr(ex, "key"), *op = jstr(ex, "operator");
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

static bool tolerates(json_t *tols, json_t *taint)
{
    size_t i;
    json_t *t;
    json_array_foreach (tols, i, t) {
        const char *eff = jstr(t, "effect");
        if (eff && eff[0] && !streq_ptr(eff, jstr(taint, "effect")))
            continue;
        const char *key = jstr(t, "key");
        const char *op = jstr(t, "operator");
        if (op && streq(op, "Exists")) {
            if (!key || !key[0] || streq_ptr(key, jstr(taint, "key")))
                return true;
            continue;
        }
        if (streq_ptr(key, jstr(taint, "key")) &&
            streq(jstr(t, "value") ?: "", jstr(taint, "value") ?: ""))
            return true;
    }
    return false;
}

/* Whether a pod with this spec may run on node, as the DaemonSet controller decides. */
static bool should_run(json_t *podspec, json_t *tols, json_t *node)
{
    const char *k;
    json_t *v;
    json_t *labels = jpath(node, "metadata.labels");
    json_object_foreach (json_object_get(podspec, "nodeSelector"), k, v)
        if (!json_equal(json_object_get(labels, k), v))
            return false;
    json_t *terms = jpath(podspec, "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuring"
                                   "Execution.nodeSelectorTerms");
    if (json_is_array(terms)) {
        bool any = false;
        size_t i;
        json_t *term;
        json_array_foreach (terms, i, term)
            if (node_selector_term_matches(term, node))
                any = true;
        if (!any)
            return false;
    }
    size_t i;
    json_t *taint;
    json_array_foreach (jpath(node, "spec.taints"), i, taint) {
        const char *eff = jstr(taint, "effect");
        if (!streq_ptr(eff, "NoSchedule") && !streq_ptr(eff, "NoExecute"))
            continue;
        if (!tolerates(tols, taint))
            return false;
    }
    return true;
}

/* The tolerations the DaemonSet controller adds to its pods. */
static json_t *ds_tolerations(json_t *podspec)
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

/* ---- DaemonSets --------------------------------------------------------------------------- */

/* controller-revision-hash: FNV-32a over the template, spelled with the API's safe alphabet. */
static char *template_hash(json_t *tmpl, json_int_t collisions)
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

static json_t *owner_ref(json_t *owner, const char *api_version, const char *kind)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:b,s:b}", "apiVersion", api_version, "kind", kind, "name",
                     ks_obj_name(owner), "uid", jstr(owner, "metadata.uid") ?: "", "controller", 1,
                     "blockOwnerDeletion", 1);
}

static bool controlled_by(json_t *obj, const char *uid)
{
    size_t i;
    json_t *r;
    json_array_foreach (jpath(obj, "metadata.ownerReferences"), i, r)
        if (json_is_true(json_object_get(r, "controller")) && streq_ptr(jstr(r, "uid"), uid))
            return true;
    return false;
}

static int64_t scaled(json_t *v, int64_t total, bool round_up, int64_t dflt)
{
    if (json_is_integer(v))
        return json_integer_value(v);
    const char *s = json_string_value(v);
    if (!s)
        return dflt;
    char *end = NULL;
    double pct = strtod(s, &end);
    if (end == s || !end || *end != '%') {
        int64_t n;
        return parse_i64(s, &n) == 0 ? n : dflt;
    }
    double x = pct * (double)total / 100.0;
    return (int64_t)(round_up ? ceil(x) : floor(x));
}

static void ensure_revision(struct ksim *ks, json_t *ds, const char *hash, json_t *tmpl)
{
    struct ks_type *crt = ks_type_find(ks, "apps", "v1", "controllerrevisions");
    const char *ns = ks_obj_ns(ds);
    _cleanup_free_ char *name = xasprintf("%s-%s", ks_obj_name(ds), hash);
    const char *uid = jstr(ds, "metadata.uid");
    json_int_t maxrev = 0;
    json_t *mine = json_array();
    const char *k;
    json_t *v;
    json_object_foreach (crt->objs, k, v) {
        if (!streq(ks_obj_ns(v), ns) || !controlled_by(v, uid))
            continue;
        json_int_t r = json_integer_value(json_object_get(v, "revision"));
        if (r > maxrev)
            maxrev = r;
        json_array_append(mine, v);
    }
    json_t *cur = ks_get(crt, ns, name);
    if (cur) {
        json_int_t r = json_integer_value(json_object_get(cur, "revision"));
        if (r < maxrev) {
            json_t *n = json_deep_copy(cur);
            json_object_set_new(n, "revision", json_integer(maxrev + 1));
            ks_update(ks, crt, cur, n, NULL);
        }
    } else {
        json_t *data_tmpl = json_deep_copy(tmpl);
        json_object_set_new(data_tmpl, "$patch", json_string("replace"));
        json_t *labels = json_deep_copy(jpath(tmpl, "metadata.labels"));
        if (!json_is_object(labels)) {
            json_decref(labels);
            labels = json_object();
        }
        json_object_set_new(labels, "controller-revision-hash", json_string(hash));
        char now[40];
        ks_now_str(ks, now, sizeof(now));
        _cleanup_free_ char *uid2 = ks_new_uid(ks);
        json_t *cr =
            json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:o,s:[o]},s:{s:{s:o}},s:I}", "apiVersion",
                      "apps/v1", "kind", "ControllerRevision", "metadata", "name", name,
                      "namespace", ns, "uid", uid2, "creationTimestamp", now, "labels", labels,
                      "ownerReferences", owner_ref(ds, "apps/v1", "DaemonSet"), "data", "spec",
                      "template", data_tmpl, "revision", maxrev + 1);
        ks_commit(ks, crt, cr, KS_ADDED, NULL);
    }
    /* history limit: drop the oldest revisions beyond revisionHistoryLimit (+ the live one) */
    json_t *lim = jpath(ds, "spec.revisionHistoryLimit");
    json_int_t limit = json_is_integer(lim) ? json_integer_value(lim) : 10;
    while ((json_int_t)json_array_size(mine) > limit + 1) {
        size_t oldest = 0;
        json_int_t orev = INT64_MAX;
        size_t i;
        json_t *x;
        json_array_foreach (mine, i, x) {
            json_int_t r = json_integer_value(json_object_get(x, "revision"));
            if (r < orev && !streq(ks_obj_name(x), name)) {
                orev = r;
                oldest = i;
            }
        }
        json_t *x2 = json_array_get(mine, oldest);
        if (ks_get(crt, ns, ks_obj_name(x2)))
            ks_remove(ks, crt, ks_get(crt, ns, ks_obj_name(x2)));
        json_array_remove(mine, oldest);
    }
    json_decref(mine);
}

static void create_ds_pod(struct ksim *ks, json_t *ds, const char *node, const char *hash)
{
    struct ks_type *pt = core(ks, "pods");
    json_t *tmpl = jpath(ds, "spec.template");
    json_t *pod = json_pack("{s:s,s:s,s:O,s:O}", "apiVersion", "v1", "kind", "Pod", "metadata",
                            json_object_get(tmpl, "metadata") ?: json_object(), "spec",
                            json_object_get(tmpl, "spec") ?: json_object());
    json_t *meta = jensure(pod, "metadata");
    json_t *m2 = json_deep_copy(meta);
    json_object_set_new(pod, "metadata", m2);
    meta = m2;
    json_t *spec = json_deep_copy(json_object_get(pod, "spec"));
    json_object_set_new(pod, "spec", spec);
    _cleanup_free_ char *gen = xasprintf("%s-", ks_obj_name(ds));
    json_object_set_new(meta, "generateName", json_string(gen));
    json_object_set_new(meta, "namespace", json_string(ks_obj_ns(ds)));
    json_t *labels = jensure(meta, "labels");
    json_object_set_new(labels, "controller-revision-hash", json_string(hash));
    char g[32];
    snprintf(g, sizeof(g), "%lld", (long long)json_integer_value(jpath(ds, "metadata.generation")));
    json_object_set_new(labels, "pod-template-generation", json_string(g));
    json_object_set_new(meta, "ownerReferences",
                        json_pack("[o]", owner_ref(ds, "apps/v1", "DaemonSet")));
    json_object_set_new(spec, "tolerations", ds_tolerations(spec));
    json_t *aff = jensure(spec, "affinity");
    json_t *na = jensure(aff, "nodeAffinity");
    json_object_set_new(na, "requiredDuringSchedulingIgnoredDuringExecution",
                        json_pack("{s:[{s:[{s:s,s:s,s:[s]}]}]}", "nodeSelectorTerms", "matchFields",
                                  "key", "metadata.name", "operator", "In", "values", node));
    json_object_set_new(spec, "nodeName", json_string(node));
    struct err e = {0};
    ks_create_locked(ks, pod, &e);
    json_decref(pod);
    (void)pt;
}

static bool sync_daemonset(struct ksim *ks, json_t *ds_in, json_t *nodes, json_t *pods_by_owner)
{
    if (is_deleting(ds_in))
        return false;
    struct ks_type *dst = ks_type_find(ks, "apps", "v1", "daemonsets");
    struct ks_type *pt = core(ks, "pods");
    json_t *ds = json_incref(ds_in);
    const char *uid = jstr(ds, "metadata.uid");
    json_t *tmpl = jpath(ds, "spec.template");
    json_t *podspec = json_object_get(tmpl, "spec");
    json_t *tols = ds_tolerations(podspec);
    json_int_t collisions = json_integer_value(jpath(ds, "status.collisionCount"));
    _cleanup_free_ char *hash = template_hash(tmpl, collisions);
    ensure_revision(ks, ds, hash, tmpl);
    bool on_delete = streq_ptr(jstr(ds, "spec.updateStrategy.type"), "OnDelete");
    json_t *mine = json_object_get(pods_by_owner, uid); /* node -> [pods] */
    int64_t desired = 0, current = 0, ready = 0, available = 0, updated = 0, misscheduled = 0;
    int64_t unavailable = 0;
    json_t *old_ready = json_array(), *old_unready = json_array();
    bool changed = false;
    size_t i;
    json_t *node;
    json_array_foreach (nodes, i, node) {
        const char *nn = ks_obj_name(node);
        bool run = should_run(podspec, tols, node);
        json_t *list = json_object_get(mine, nn);
        /* failed pods are deleted and replaced */
        size_t j;
        json_t *p;
        json_t *live = json_array();
        json_array_foreach (list, j, p) {
            if (streq_ptr(jstr(p, "status.phase"), "Failed")) {
                ks_delete_obj(ks, pt, p, NULL);
                changed = true;
            } else if (!is_deleting(p)) {
                json_array_append(live, p);
            }
        }
        if (run) {
            desired++;
            if (json_array_size(live) == 0) {
                bool deleting = json_array_size(list) > 0;
                if (!deleting) {
                    create_ds_pod(ks, ds, nn, hash);
                    changed = true;
                }
                unavailable++;
            } else {
                current++;
                /* keep the oldest pod, delete duplicates */
                for (size_t k = json_array_size(live); k-- > 1;) {
                    ks_delete_obj(ks, pt, json_array_get(live, k), NULL);
                    changed = true;
                }
                json_t *keep = json_array_get(live, 0);
                bool is_ready = ks_pod_ready(keep);
                bool is_new =
                    streq_ptr(jstr(keep, "metadata.labels.controller-revision-hash"), hash);
                /* labels with dots cannot go through jpath; look them up directly */
                json_t *lab = jpath(keep, "metadata.labels");
                is_new = streq_ptr(
                    json_string_value(json_object_get(lab, "controller-revision-hash")), hash);
                if (is_ready) {
                    ready++;
                    available++;
                } else {
                    unavailable++;
                }
                if (is_new)
                    updated++;
                else
                    json_array_append(is_ready ? old_ready : old_unready, keep);
            }
        } else {
            json_array_foreach (live, j, p) {
                misscheduled++;
                ks_delete_obj(ks, pt, p, NULL);
                changed = true;
            }
        }
        json_decref(live);
    }
    /* pods on nodes that no longer exist */
    const char *nn;
    json_t *list;
    json_object_foreach (mine, nn, list) {
        if (ks_get(core(ks, "nodes"), "", nn))
            continue;
        size_t j;
        json_t *p;
        json_array_foreach (list, j, p)
            if (!is_deleting(p)) {
                ks_delete_obj(ks, pt, p, NULL);
                changed = true;
            }
    }
    if (!on_delete) {
        json_t *mu = jpath(ds, "spec.updateStrategy.rollingUpdate.maxUnavailable");
        int64_t max_unavail = scaled(mu, desired, true, 1);
        if (max_unavail < 1)
            max_unavail = 1;
        /* old unavailable pods go first, they cost nothing */
        json_array_foreach (old_unready, i, node) {
            ks_delete_obj(ks, pt, node, NULL);
            changed = true;
        }
        json_array_foreach (old_ready, i, node) {
            if (unavailable >= max_unavail)
                break;
            ks_delete_obj(ks, pt, node, NULL);
            unavailable++;
            changed = true;
        }
    }
    json_decref(old_ready);
    json_decref(old_unready);
    json_decref(tols);
    json_t *cur = ks_get(dst, ks_obj_ns(ds), ks_obj_name(ds));
    if (cur && streq_ptr(jstr(cur, "metadata.uid"), uid)) {
        json_t *st = json_deep_copy(json_object_get(cur, "status"));
        if (!json_is_object(st)) {
            json_decref(st);
            st = json_object();
        }
        json_object_set_new(st, "desiredNumberScheduled", json_integer(desired));
        json_object_set_new(st, "currentNumberScheduled", json_integer(current));
        json_object_set_new(st, "numberMisscheduled", json_integer(misscheduled));
        json_object_set_new(st, "numberReady", json_integer(ready));
        json_object_set_new(st, "numberAvailable", json_integer(available));
        json_object_set_new(st, "updatedNumberScheduled", json_integer(updated));
        if (desired - available > 0)
            json_object_set_new(st, "numberUnavailable", json_integer(desired - available));
        else
            json_object_del(st, "numberUnavailable");
        if (!available)
            json_object_del(st, "numberAvailable");
        json_object_set(st, "observedGeneration", jpath(cur, "metadata.generation"));
        if (!json_equal(st, json_object_get(cur, "status"))) {
            json_t *n = json_deep_copy(cur);
            json_object_set_new(n, "status", st);
            ks_update(ks, dst, cur, n, "status");
            changed = true;
        } else {
            json_decref(st);
        }
    }
    json_decref(ds);
    return changed;
}

static bool daemonsets(struct ksim *ks)
{
    struct ks_type *dst = ks_type_find(ks, "apps", "v1", "daemonsets");
    if (json_object_size(dst->objs) == 0)
        return false;
    struct ks_type *pt = core(ks, "pods");
    json_t *nodes = values(core(ks, "nodes")->objs);
    /* index: DaemonSet uid -> node -> [pods] */
    json_t *by_owner = json_object();
    const char *k;
    json_t *p;
    json_object_foreach (pt->objs, k, p) {
        size_t i;
        json_t *r;
        json_array_foreach (jpath(p, "metadata.ownerReferences"), i, r) {
            if (!json_is_true(json_object_get(r, "controller")) ||
                !streq_ptr(jstr(r, "kind"), "DaemonSet"))
                continue;
            const char *uid = jstr(r, "uid");
            const char *node = jstr(p, "spec.nodeName");
            if (!uid || !node)
                continue;
            json_t *m = jensure(by_owner, uid);
            json_t *l = json_object_get(m, node);
            if (!l) {
                l = json_array();
                json_object_set_new(m, node, l);
            }
            json_array_append(l, p);
        }
    }
    json_t *dss = values(dst->objs);
    bool changed = false;
    size_t i;
    json_t *ds;
    json_array_foreach (dss, i, ds)
        changed |= sync_daemonset(ks, ds, nodes, by_owner);
    json_decref(dss);
    json_decref(by_owner);
    json_decref(nodes);
    return changed;
}

/* ---- Deployments and ReplicaSets ---------------------------------------------------------- */

/* Pods controlled by owner uid, bucketed from one pass over the pods. */
static json_t *pods_by_controller(struct ksim *ks, const char *kind)
{
    json_t *by = json_object();
    const char *k;
    json_t *p;
    json_object_foreach (core(ks, "pods")->objs, k, p) {
        size_t i;
        json_t *r;
        json_array_foreach (jpath(p, "metadata.ownerReferences"), i, r) {
            if (!json_is_true(json_object_get(r, "controller")) ||
                !streq_ptr(jstr(r, "kind"), kind) || !jstr(r, "uid"))
                continue;
            json_t *l = json_object_get(by, jstr(r, "uid"));
            if (!l) {
                l = json_array();
                json_object_set_new(by, jstr(r, "uid"), l);
            }
            json_array_append(l, p);
        }
    }
    return by;
}

static bool set_status(struct ksim *ks, struct ks_type *t, json_t *obj, json_t *st)
{
    json_t *cur = ks_get(t, ks_obj_ns(obj), ks_obj_name(obj));
    if (!cur || json_equal(st, json_object_get(cur, "status"))) {
        json_decref(st);
        return false;
    }
    json_t *n = json_deep_copy(cur);
    json_object_set_new(n, "status", st);
    ks_update(ks, t, cur, n, "status");
    return true;
}

static bool replicasets(struct ksim *ks)
{
    struct ks_type *rst = ks_type_find(ks, "apps", "v1", "replicasets");
    if (json_object_size(rst->objs) == 0)
        return false;
    struct ks_type *pt = core(ks, "pods");
    json_t *by = pods_by_controller(ks, "ReplicaSet");
    json_t *all = values(rst->objs);
    bool changed = false;
    size_t i;
    json_t *rs;
    json_array_foreach (all, i, rs) {
        if (is_deleting(rs))
            continue;
        json_t *want_j = jpath(rs, "spec.replicas");
        int64_t want = json_is_integer(want_j) ? json_integer_value(want_j) : 1;
        json_t *owned = json_object_get(by, jstr(rs, "metadata.uid"));
        json_t *live = json_array();
        int64_t ready = 0;
        size_t j;
        json_t *p;
        json_array_foreach (owned, j, p) {
            if (is_deleting(p) || streq_ptr(jstr(p, "status.phase"), "Failed") ||
                streq_ptr(jstr(p, "status.phase"), "Succeeded"))
                continue;
            json_array_append(live, p);
            if (ks_pod_ready(p))
                ready++;
        }
        int64_t have = (int64_t)json_array_size(live);
        for (int64_t n = have; n < want; n++) {
            json_t *tmpl = jpath(rs, "spec.template");
            json_t *pod = json_pack("{s:s,s:s,s:O,s:O}", "apiVersion", "v1", "kind", "Pod",
                                    "metadata", json_object_get(tmpl, "metadata") ?: json_object(),
                                    "spec", json_object_get(tmpl, "spec") ?: json_object());
            json_t *meta = json_deep_copy(json_object_get(pod, "metadata"));
            json_object_set_new(pod, "metadata", meta);
            _cleanup_free_ char *gen = xasprintf("%s-", ks_obj_name(rs));
            json_object_set_new(meta, "generateName", json_string(gen));
            json_object_set_new(meta, "namespace", json_string(ks_obj_ns(rs)));
            json_object_set_new(meta, "ownerReferences",
                                json_pack("[o]", owner_ref(rs, "apps/v1", "ReplicaSet")));
            struct err e = {0};
            ks_create_locked(ks, pod, &e);
            json_decref(pod);
            changed = true;
        }
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
                      jpath(rs, "metadata.generation") ?: json_integer(0));
        changed |= set_status(ks, rst, rs, st);
        json_decref(live);
    }
    json_decref(all);
    json_decref(by);
    return changed;
}

static bool deployments(struct ksim *ks)
{
    struct ks_type *dt = ks_type_find(ks, "apps", "v1", "deployments");
    if (json_object_size(dt->objs) == 0)
        return false;
    struct ks_type *rst = ks_type_find(ks, "apps", "v1", "replicasets");
    json_t *all = values(dt->objs);
    bool changed = false;
    char ts[40];
    ks_now_str(ks, ts, sizeof(ts));
    size_t i;
    json_t *d;
    json_array_foreach (all, i, d) {
        if (is_deleting(d))
            continue;
        const char *uid = jstr(d, "metadata.uid");
        json_t *want_j = jpath(d, "spec.replicas");
        int64_t want = json_is_integer(want_j) ? json_integer_value(want_j) : 1;
        json_t *tmpl = jpath(d, "spec.template");
        _cleanup_free_ char *hash = template_hash(tmpl, 0);
        _cleanup_free_ char *rsname = xasprintf("%s-%s", ks_obj_name(d), hash);
        json_t *newrs = ks_get(rst, ks_obj_ns(d), rsname);
        if (!newrs) {
            json_t *t2 = json_deep_copy(tmpl);
            json_object_set_new(jensure(jensure(t2, "metadata"), "labels"), "pod-template-hash",
                                json_string(hash));
            json_t *sel = json_deep_copy(jpath(d, "spec.selector"));
            if (!json_is_object(sel)) {
                json_decref(sel);
                sel = json_object();
            }
            json_object_set_new(jensure(sel, "matchLabels"), "pod-template-hash",
                                json_string(hash));
            json_t *labels = json_deep_copy(jpath(t2, "metadata.labels"));
            json_t *rs = json_pack("{s:s,s:s,s:{s:s,s:s,s:o,s:[o]},s:{s:I,s:o,s:o}}", "apiVersion",
                                   "apps/v1", "kind", "ReplicaSet", "metadata", "name", rsname,
                                   "namespace", ks_obj_ns(d), "labels", labels, "ownerReferences",
                                   owner_ref(d, "apps/v1", "Deployment"), "spec", "replicas",
                                   (json_int_t)0, "selector", sel, "template", t2);
            struct err e = {0};
            ks_create_locked(ks, rs, &e);
            json_decref(rs);
            newrs = ks_get(rst, ks_obj_ns(d), rsname);
            changed = true;
            if (!newrs)
                continue;
        }
        int64_t new_ready = json_integer_value(jpath(newrs, "status.readyReplicas"));
        int64_t new_have = json_integer_value(jpath(newrs, "status.replicas"));
        bool recreate = streq_ptr(jstr(d, "spec.strategy.type"), "Recreate");
        /* old ReplicaSets: scaled down as new pods turn ready (Recreate: all at once) */
        int64_t old_left = recreate ? 0 : want - new_ready;
        if (old_left < 0)
            old_left = 0;
        int64_t old_pods = 0, total = new_have, ready = new_ready;
        const char *k;
        json_t *rs;
        json_t *mine = json_array();
        json_object_foreach (rst->objs, k, rs)
            if (controlled_by(rs, uid) && rs != newrs)
                json_array_append(mine, rs);
        size_t j;
        json_array_foreach (mine, j, rs) {
            int64_t cur = json_integer_value(jpath(rs, "spec.replicas"));
            int64_t to = cur < old_left ? cur : old_left;
            old_left -= to;
            old_pods += json_integer_value(jpath(rs, "status.replicas"));
            total += json_integer_value(jpath(rs, "status.replicas"));
            ready += json_integer_value(jpath(rs, "status.readyReplicas"));
            if (to != cur) {
                json_t *n = json_deep_copy(rs);
                json_object_set_new(jensure(n, "spec"), "replicas", json_integer(to));
                ks_update(ks, rst, rs, n, NULL);
                changed = true;
            }
        }
        json_decref(mine);
        int64_t new_want = recreate && old_pods > 0 ? 0 : want;
        newrs = ks_get(rst, ks_obj_ns(d), rsname);
        if (newrs && json_integer_value(jpath(newrs, "spec.replicas")) != new_want) {
            json_t *n = json_deep_copy(newrs);
            json_object_set_new(jensure(n, "spec"), "replicas", json_integer(new_want));
            ks_update(ks, rst, newrs, n, NULL);
            changed = true;
        }
        bool available = ready >= want;
        json_t *old_conds = jpath(d, "status.conditions");
        const char *lt = ts;
        size_t ci;
        json_t *oc;
        json_array_foreach (old_conds, ci, oc)
            if (streq_ptr(jstr(oc, "type"), "Available") &&
                streq_ptr(jstr(oc, "status"), available ? "True" : "False"))
                lt = jstr(oc, "lastTransitionTime") ?: ts;
        json_t *st = json_pack(
            "{s:I,s:I,s:I,s:I,s:O,s:[{s:s,s:s,s:s,s:s,s:s,s:s}]}", "replicas", (json_int_t)total,
            "updatedReplicas", (json_int_t)new_have, "readyReplicas", (json_int_t)ready,
            "availableReplicas", (json_int_t)ready, "observedGeneration",
            jpath(d, "metadata.generation") ?: json_integer(0), "conditions", "type", "Available",
            "status", available ? "True" : "False", "reason",
            available ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable", "message",
            available ? "Deployment has minimum availability."
                      : "Deployment does not have minimum availability.",
            "lastUpdateTime", lt, "lastTransitionTime", lt);
        if (total - ready > 0)
            json_object_set_new(st, "unavailableReplicas", json_integer(total - ready));
        changed |= set_status(ks, dt, d, st);
    }
    json_decref(all);
    return changed;
}

/* ---- pods: the simulated kubelet ---------------------------------------------------------- */

static bool pods_ready(struct ksim *ks)
{
    struct ks_type *pt = core(ks, "pods");
    uint64_t now = ks_now(ks);
    bool changed = false;
    json_t *todo = json_array();
    const char *k;
    json_t *p;
    json_object_foreach (pt->objs, k, p) {
        if (!jstr(p, "spec.nodeName") || is_deleting(p) ||
            !streq_ptr(jstr(p, "status.phase"), "Pending"))
            continue;
        const char *uid = jstr(p, "metadata.uid");
        if (!uid)
            continue;
        json_t *born = json_object_get(ks->pod_born, uid);
        if (!born) {
            born = json_integer((json_int_t)now);
            json_object_set_new(ks->pod_born, uid, born);
        }
        uint64_t due = (uint64_t)json_integer_value(born) + ks->opts.pod_ready_delay_ms;
        if (due <= now)
            json_array_append(todo, p);
        else if (!ks->next_due || due < ks->next_due)
            ks->next_due = due;
    }
    char ts[40];
    ks_now_str(ks, ts, sizeof(ts));
    size_t i;
    json_array_foreach (todo, i, p) {
        json_t *n = json_deep_copy(p);
        json_t *st = jensure(n, "status");
        json_object_set_new(st, "phase", json_string("Running"));
        json_object_set_new(st, "startTime", json_string(ts));
        uint64_t h = 0;
        for (const char *s = ks_obj_name(p); *s; s++)
            h = h * 131 + (unsigned char)*s;
        char ip[32];
        snprintf(ip, sizeof(ip), "10.244.%u.%u", (unsigned)(h >> 8) % 250, (unsigned)h % 250 + 2);
        json_object_set_new(st, "podIP", json_string(ip));
        json_object_set_new(st, "podIPs", json_pack("[{s:s}]", "ip", ip));
        json_t *node = ks_get(core(ks, "nodes"), "", jstr(p, "spec.nodeName"));
        json_t *addr = json_array_get(jpath(node, "status.addresses"), 0);
        if (jstr(addr, "address"))
            json_object_set_new(st, "hostIP", json_string(jstr(addr, "address")));
        json_object_set_new(st, "conditions",
                            json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s,s:s}]",
                                      "type", "Initialized", "status", "True", "lastTransitionTime",
                                      ts, "type", "Ready", "status", "True", "lastTransitionTime",
                                      ts, "type", "ContainersReady", "status", "True",
                                      "lastTransitionTime", ts, "type", "PodScheduled", "status",
                                      "True", "lastTransitionTime", ts));
        json_t *cs = json_array();
        size_t j;
        json_t *c;
        json_array_foreach (jpath(p, "spec.containers"), j, c) {
            json_array_append_new(
                cs, json_pack("{s:s,s:s,s:s,s:b,s:b,s:i,s:{s:{s:s}},s:s}", "name",
                              jstr(c, "name") ?: "", "image", jstr(c, "image") ?: "", "imageID", "",
                              "ready", 1, "started", 1, "restartCount", 0, "state", "running",
                              "startedAt", ts, "containerID", "containerd://kubesim"));
        }
        json_object_set_new(st, "containerStatuses", cs);
        ks_update(ks, core(ks, "pods"), p, n, "status");
        changed = true;
    }
    json_decref(todo);
    /* terminating pods whose containers have "stopped" are removed, as the kubelet does */
    json_t *dying = json_array();
    json_object_foreach (ks->pod_dying, k, p) {
        uint64_t due = (uint64_t)json_integer_value(p);
        if (due <= now)
            json_array_append_new(dying, json_string(k));
        else if (!ks->next_due || due < ks->next_due)
            ks->next_due = due;
    }
    json_array_foreach (dying, i, p) {
        const char *uid = json_string_value(p);
        json_t *where = json_object_get(ks->uids, uid);
        json_t *pod =
            where ? json_object_get(pt->objs, json_string_value(json_array_get(where, 1))) : NULL;
        if (pod && is_deleting(pod) && json_array_size(jpath(pod, "metadata.finalizers")) == 0) {
            ks_remove(ks, pt, pod);
            changed = true;
        }
        json_object_del(ks->pod_dying, uid);
    }
    json_decref(dying);
    /* forget pods that are gone */
    void *tmp;
    json_t *v;
    json_object_foreach_safe (ks->pod_born, tmp, k, v) {
        if (!json_object_get(ks->uids, k))
            json_object_del(ks->pod_born, k);
    }
    return changed;
}

/* ---- the scheduler, reduced: bind pending pods to a feasible node, fewest pods first ------- */

static bool schedule(struct ksim *ks)
{
    struct ks_type *pt = core(ks, "pods");
    struct ks_type *nt = core(ks, "nodes");
    json_t *pending = json_array();
    json_t *load = json_object(); /* node -> pods bound */
    const char *k;
    json_t *p;
    json_object_foreach (pt->objs, k, p) {
        const char *nn = jstr(p, "spec.nodeName");
        if (nn) {
            json_t *c = json_object_get(load, nn);
            json_object_set_new(load, nn, json_integer(c ? json_integer_value(c) + 1 : 1));
            continue;
        }
        if (is_deleting(p))
            continue;
        const char *sched = jstr(p, "spec.schedulerName");
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
            if (json_is_true(jpath(n, "spec.unschedulable")))
                continue;
            if (!should_run(spec, tols, n))
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
            json_object_set_new(jensure(c, "spec"), "nodeName", json_string(best));
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
        json_t *old_cond = json_array_get(jpath(p, "status.conditions"), 0);
        if (!best && streq_ptr(jstr(old_cond, "reason"), "Unschedulable") &&
            streq_ptr(jstr(old_cond, "message"), jstr(cond, "message"))) {
            json_decref(cond);
            json_decref(c);
            continue;
        }
        json_object_set_new(jensure(c, "status"), "conditions", json_pack("[o]", cond));
        /* binding sets spec.nodeName, which a plain update may not: commit directly */
        ks_commit(ks, pt, c, KS_MODIFIED, p);
        changed = true;
    }
    json_decref(pending);
    json_decref(load);
    return changed;
}

/* The pod garbage collector: pods bound to nodes that no longer exist are deleted. */
static bool orphan_pods(struct ksim *ks)
{
    struct ks_type *pt = core(ks, "pods");
    struct ks_type *nt = core(ks, "nodes");
    json_t *gone = json_array();
    const char *k;
    json_t *p;
    json_object_foreach (pt->objs, k, p) {
        const char *nn = jstr(p, "spec.nodeName");
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

/* ---- nodes: the unschedulable taint (the node lifecycle controller's job) ----------------- */

static bool node_taints(struct ksim *ks)
{
    struct ks_type *nt = core(ks, "nodes");
    json_t *todo = json_array();
    const char *k;
    json_t *n;
    json_object_foreach (nt->objs, k, n) {
        bool want = json_is_true(jpath(n, "spec.unschedulable"));
        bool have = false;
        size_t i;
        json_t *t;
        json_array_foreach (jpath(n, "spec.taints"), i, t)
            if (streq_ptr(jstr(t, "key"), T_UNSCHED))
                have = true;
        if (want != have)
            json_array_append(todo, n);
    }
    char ts[40];
    ks_now_str(ks, ts, sizeof(ts));
    size_t i;
    json_array_foreach (todo, i, n) {
        json_t *c = json_deep_copy(n);
        json_t *spec = jensure(c, "spec");
        json_t *taints = json_object_get(spec, "taints");
        if (json_is_true(json_object_get(spec, "unschedulable"))) {
            if (!json_is_array(taints)) {
                taints = json_array();
                json_object_set_new(spec, "taints", taints);
            }
            json_array_append_new(taints, json_pack("{s:s,s:s,s:s}", "key", T_UNSCHED, "effect",
                                                    "NoSchedule", "timeAdded", ts));
        } else {
            for (size_t j = json_array_size(taints); j-- > 0;)
                if (streq_ptr(jstr(json_array_get(taints, j), "key"), T_UNSCHED))
                    json_array_remove(taints, j);
            if (json_array_size(taints) == 0)
                json_object_del(spec, "taints");
        }
        ks_update(ks, nt, n, c, NULL);
    }
    bool changed = json_array_size(todo) > 0;
    json_decref(todo);
    return changed;
}

/* ---- PodDisruptionBudgets ----------------------------------------------------------------- */

struct pdb_math {
    int64_t expected, healthy, desired, allowed;
};

static struct pdb_math pdb_compute(struct ksim *ks, json_t *pdb)
{
    struct pdb_math m = {0};
    struct err e = {0};
    json_t *sel = jpath(pdb, "spec.selector");
    struct ksim_selector *s = json_is_object(sel) ? ksim_label_selector_from_json(sel, &e) : NULL;
    if (s) {
        const char *k;
        json_t *p;
        json_object_foreach (core(ks, "pods")->objs, k, p) {
            if (!streq(ks_obj_ns(p), ks_obj_ns(pdb)) || is_deleting(p) ||
                !ksim_selector_matches(s, jpath(p, "metadata.labels")))
                continue;
            m.expected++;
            if (ks_pod_ready(p))
                m.healthy++;
        }
        ksim_selector_free(s);
    }
    json_t *mina = jpath(pdb, "spec.minAvailable");
    json_t *maxu = jpath(pdb, "spec.maxUnavailable");
    if (maxu)
        m.desired = m.expected - scaled(maxu, m.expected, true, 0);
    else if (mina)
        m.desired = scaled(mina, m.expected, true, 0);
    else
        m.desired = m.expected;
    if (m.desired < 0)
        m.desired = 0;
    m.allowed = m.healthy - m.desired;
    if (m.allowed < 0)
        m.allowed = 0;
    return m;
}

static bool pdbs(struct ksim *ks)
{
    struct ks_type *pt = ks_type_find(ks, "policy", "v1", "poddisruptionbudgets");
    json_t *all = values(pt->objs);
    bool changed = false;
    char ts[40];
    ks_now_str(ks, ts, sizeof(ts));
    size_t i;
    json_t *pdb;
    json_array_foreach (all, i, pdb) {
        struct pdb_math m = pdb_compute(ks, pdb);
        json_t *old = json_object_get(pdb, "status");
        json_t *st =
            json_pack("{s:I,s:I,s:I,s:I,s:O}", "expectedPods", (json_int_t)m.expected,
                      "currentHealthy", (json_int_t)m.healthy, "desiredHealthy",
                      (json_int_t)m.desired, "disruptionsAllowed", (json_int_t)m.allowed,
                      "observedGeneration", jpath(pdb, "metadata.generation") ?: json_integer(0));
        const char *cs = m.allowed > 0 ? "True" : "False";
        const char *reason = m.allowed > 0 ? "SufficientPods" : "InsufficientPods";
        json_t *oc = json_array_get(json_object_get(old, "conditions"), 0);
        const char *lt = streq_ptr(jstr(oc, "status"), cs) && jstr(oc, "lastTransitionTime")
                             ? jstr(oc, "lastTransitionTime")
                             : ts;
        json_object_set_new(st, "conditions",
                            json_pack("[{s:s,s:s,s:s,s:s,s:s,s:O}]", "type", "DisruptionAllowed",
                                      "status", cs, "reason", reason, "message", "",
                                      "lastTransitionTime", lt, "observedGeneration",
                                      jpath(pdb, "metadata.generation") ?: json_integer(0)));
        if (!json_equal(st, old)) {
            json_t *n = json_deep_copy(pdb);
            json_object_set_new(n, "status", st);
            ks_update(ks, pt, pdb, n, "status");
            changed = true;
        } else {
            json_decref(st);
        }
    }
    json_decref(all);
    return changed;
}

int ks_evict(struct ksim *ks, json_t *pod, struct ksim_response *resp)
{
    struct ks_type *podt = core(ks, "pods");
    struct ks_type *pt = ks_type_find(ks, "policy", "v1", "poddisruptionbudgets");
    json_t *match = json_array();
    const char *k;
    json_t *pdb;
    json_object_foreach (pt->objs, k, pdb) {
        if (!streq(ks_obj_ns(pdb), ks_obj_ns(pod)))
            continue;
        struct err e = {0};
        json_t *sel = jpath(pdb, "spec.selector");
        struct ksim_selector *s =
            json_is_object(sel) ? ksim_label_selector_from_json(sel, &e) : NULL;
        if (s && s->n > 0 && ksim_selector_matches(s, jpath(pod, "metadata.labels")))
            json_array_append(match, pdb);
        ksim_selector_free(s);
    }
    int r = 0;
    if (json_array_size(match) > 1) {
        ks_status(resp, 500, "InternalError",
                  "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                  "does not support.",
                  NULL);
        r = -EBUSY;
    } else if (json_array_size(match) == 1 && !is_deleting(pod)) {
        pdb = json_array_get(match, 0);
        json_t *gen = jpath(pdb, "metadata.generation");
        json_t *og = jpath(pdb, "status.observedGeneration");
        struct pdb_math m = pdb_compute(ks, pdb);
        bool healthy = ks_pod_ready(pod);
        char msg[512];
        if (!og || json_integer_value(og) < json_integer_value(gen)) {
            snprintf(msg, sizeof(msg),
                     "The disruption budget %s is still being processed by the server.",
                     ks_obj_name(pdb));
            r = -EAGAIN;
        } else if (healthy ? json_integer_value(jpath(pdb, "status.disruptionsAllowed")) <= 0 ||
                                 m.allowed <= 0
                           : m.healthy < m.desired) {
            snprintf(msg, sizeof(msg),
                     "The disruption budget %s needs %lld healthy pods and has %lld currently",
                     ks_obj_name(pdb),
                     (long long)json_integer_value(jpath(pdb, "status.desiredHealthy")),
                     (long long)json_integer_value(jpath(pdb, "status.currentHealthy")));
            r = -EAGAIN;
        }
        if (r < 0) {
            json_t *det = json_pack("{s:[{s:s,s:s}]}", "causes", "reason", "DisruptionBudget",
                                    "message", msg);
            ks_status(resp, 429, "TooManyRequests",
                      "Cannot evict pod as it would violate the pod's disruption budget.", det);
        } else if (healthy) {
            /* record the disruption as the API server does, before the controller catches up */
            json_t *n = json_deep_copy(pdb);
            json_t *st = jensure(n, "status");
            json_object_set_new(
                st, "disruptionsAllowed",
                json_integer(json_integer_value(json_object_get(st, "disruptionsAllowed")) - 1));
            char ts[40];
            ks_now_str(ks, ts, sizeof(ts));
            json_object_set_new(jensure(st, "disruptedPods"), ks_obj_name(pod), json_string(ts));
            ks_update(ks, pt, pdb, n, "status");
        }
    }
    if (r == 0) {
        ks_delete_obj(ks, podt, pod, NULL);
        ks_status(resp, 201, "", "", NULL);
    }
    json_decref(match);
    return r;
}

/* ---- namespaces and garbage collection ---------------------------------------------------- */

static bool namespaces(struct ksim *ks)
{
    struct ks_type *nst = core(ks, "namespaces");
    json_t *all = values(nst->objs);
    bool changed = false;
    size_t i;
    json_t *ns;
    json_array_foreach (all, i, ns) {
        if (!is_deleting(ns))
            continue;
        const char *name = ks_obj_name(ns);
        bool left = false;
        for (struct ks_type *t = ks->types; t; t = t->next) {
            if (!t->namespaced)
                continue;
            json_t *objs = values(t->objs);
            size_t j;
            json_t *o;
            json_array_foreach (objs, j, o) {
                if (!streq(ks_obj_ns(o), name))
                    continue;
                left = true;
                if (!is_deleting(o)) {
                    ks_delete_obj(ks, t, o, NULL);
                    changed = true;
                }
            }
            json_decref(objs);
        }
        if (left)
            continue;
        json_t *cur = ks_get(nst, "", name);
        if (cur) {
            json_t *n = json_deep_copy(cur);
            json_object_set_new(jensure(n, "spec"), "finalizers", json_array());
            ks_commit(ks, nst, n, KS_MODIFIED, cur);
            cur = ks_get(nst, "", name);
            if (json_array_size(jpath(cur, "metadata.finalizers")) == 0)
                ks_remove(ks, nst, cur);
            changed = true;
        }
    }
    json_decref(all);
    return changed;
}

static json_t *remove_finalizer(json_t *obj, const char *f)
{
    json_t *n = json_deep_copy(obj);
    json_t *fin = jpath(n, "metadata.finalizers");
    for (size_t i = json_array_size(fin); i-- > 0;)
        if (streq_ptr(json_string_value(json_array_get(fin, i)), f))
            json_array_remove(fin, i);
    return n;
}

static bool gc(struct ksim *ks)
{
    if (!ks->gc_dirty)
        return false;
    ks->gc_dirty = false;
    bool changed = false;
    /* owners being deleted with foreground/orphan finalizers, by uid -> remaining dependents */
    json_t *dependents = json_object();
    for (struct ks_type *t = ks->types; t; t = t->next) {
        json_t *objs = values(t->objs);
        size_t i;
        json_t *o;
        json_array_foreach (objs, i, o) {
            json_t *refs = jpath(o, "metadata.ownerReferences");
            if (!json_array_size(refs))
                continue;
            size_t live = 0, j;
            json_t *r;
            bool foreground_owner = false;
            json_t *keep = json_array();
            bool orphaned = false;
            json_array_foreach (refs, j, r) {
                const char *uid = jstr(r, "uid");
                json_t *where = uid ? json_object_get(ks->uids, uid) : NULL;
                if (!where)
                    continue;
                struct ks_type *ot =
                    (struct ks_type *)(intptr_t)json_integer_value(json_array_get(where, 0));
                json_t *owner =
                    json_object_get(ot->objs, json_string_value(json_array_get(where, 1)));
                if (owner && is_deleting(owner) && has_fin(owner, "orphan")) {
                    orphaned = true;
                    continue;
                }
                live++;
                json_array_append(keep, r);
                if (owner && is_deleting(owner) && has_fin(owner, "foregroundDeletion")) {
                    foreground_owner = true;
                    json_object_set_new(dependents, uid, json_true());
                }
            }
            if (live == 0 && !orphaned) {
                if (!is_deleting(o)) {
                    ks_delete_obj(ks, t, o, "Background");
                    changed = true;
                }
            } else if (orphaned || live < json_array_size(refs)) {
                json_t *n = json_deep_copy(o);
                if (json_array_size(keep))
                    json_object_set(json_object_get(n, "metadata"), "ownerReferences", keep);
                else
                    json_object_del(json_object_get(n, "metadata"), "ownerReferences");
                ks_update(ks, t, o, n, NULL);
                changed = true;
            } else if (foreground_owner && !is_deleting(o)) {
                ks_delete_obj(ks, t, o, "Foreground");
                changed = true;
            }
            json_decref(keep);
        }
        json_decref(objs);
    }
    /* finish owners: orphan finalizer done once nothing references them; foreground once no
     * dependents remain */
    for (struct ks_type *t = ks->types; t; t = t->next) {
        json_t *objs = values(t->objs);
        size_t i;
        json_t *o;
        json_array_foreach (objs, i, o) {
            if (!is_deleting(o))
                continue;
            const char *uid = jstr(o, "metadata.uid");
            const char *fin = NULL;
            if (has_fin(o, "orphan"))
                fin = "orphan";
            else if (has_fin(o, "foregroundDeletion") && !json_object_get(dependents, uid))
                fin = "foregroundDeletion";
            if (!fin)
                continue;
            ks_update(ks, t, o, remove_finalizer(o, fin), NULL);
            changed = true;
        }
        json_decref(objs);
    }
    json_decref(dependents);
    return changed;
}

bool ks_controllers(struct ksim *ks)
{
    uint64_t now = ks_now(ks);
    bool timed = ks->next_due && now >= ks->next_due;
    if (!ks->dirty && !timed)
        return false;
    ks->dirty = false;
    ks->next_due = 0;
    bool changed = false;
    for (int round = 0; round < 8; round++) {
        bool c = false;
        c |= node_taints(ks);
        c |= daemonsets(ks);
        c |= deployments(ks);
        c |= replicasets(ks);
        c |= schedule(ks);
        c |= orphan_pods(ks);
        c |= pods_ready(ks);
        c |= pdbs(ks);
        c |= namespaces(ks);
        c |= gc(ks);
        changed |= c;
        if (!c)
            break;
    }
    ks->dirty = false;
    return changed;
}
