/* SPDX-License-Identifier: Apache-2.0 */
/* The DaemonSet controller (with ControllerRevisions) and the DaemonSet part of the scheduler. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "ks-controllers.h"

static void ensure_revision(struct ksim *ks, json_t *ds, const char *hash, json_t *tmpl)
{
    struct ks_type *crt = ks_type_find(ks, "apps", "v1", "controllerrevisions");
    const char *ns = ks_obj_ns(ds);
    _cleanup_free_ char *name = xasprintf("%s-%s", ks_obj_name(ds), hash);
    const char *uid = kobj_uid(ds);
    json_int_t maxrev = 0;
    json_t *mine = json_array();
    const char *k;
    json_t *v;
    json_object_foreach (crt->objs, k, v) {
        if (!streq(ks_obj_ns(v), ns) || !ctl_controlled_by(v, uid))
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
        json_t *labels = json_deep_copy(kobj_labels(tmpl));
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
                      "ownerReferences", ctl_owner_ref(ds, "apps/v1", "DaemonSet"), "data", "spec",
                      "template", data_tmpl, "revision", maxrev + 1);
        ks_commit(ks, crt, cr, KS_ADDED, NULL);
    }
    /* history limit: drop the oldest revisions beyond revisionHistoryLimit (+ the live one) */
    json_t *lim = kobj_path(ds, "spec.revisionHistoryLimit");
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
    json_t *tmpl = kobj_path(ds, "spec.template");
    json_t *pod =
        json_pack("{s:s,s:s,s:O?,s:O?}", "apiVersion", "v1", "kind", "Pod", "metadata",
                  json_object_get(tmpl, "metadata"), "spec", json_object_get(tmpl, "spec"));
    json_t *meta = ks_own_member(pod, "metadata");
    json_t *spec = ks_own_member(pod, "spec");
    _cleanup_free_ char *gen = xasprintf("%s-", ks_obj_name(ds));
    json_object_set_new(meta, "generateName", json_string(gen));
    json_object_set_new(meta, "namespace", json_string(ks_obj_ns(ds)));
    json_t *labels = ks_own_member(meta, "labels");
    json_object_set_new(labels, "controller-revision-hash", json_string(hash));
    char g[32];
    snprintf(g, sizeof(g), "%lld",
             (long long)json_integer_value(kobj_path(ds, "metadata.generation")));
    json_object_set_new(labels, "pod-template-generation", json_string(g));
    json_object_set_new(meta, "ownerReferences",
                        json_pack("[o]", ctl_owner_ref(ds, "apps/v1", "DaemonSet")));
    json_object_set_new(spec, "tolerations", ctl_ds_tolerations(spec));
    json_t *aff = ks_own_member(spec, "affinity");
    json_t *na = ks_own_member(aff, "nodeAffinity");
    json_object_set_new(na, "requiredDuringSchedulingIgnoredDuringExecution",
                        json_pack("{s:[{s:[{s:s,s:s,s:[s]}]}]}", "nodeSelectorTerms", "matchFields",
                                  "key", "metadata.name", "operator", "In", "values", node));
    json_object_set_new(spec, "nodeName", json_string(node));
    struct err e = {0};
    ks_obj_create_own(ks, pod, &e);
}

static bool sync_daemonset(struct ksim *ks, json_t *ds_in, json_t *nodes, json_t *pods_by_owner)
{
    if (ks_is_deleting(ds_in))
        return false;
    struct ks_type *dst = ks_type_find(ks, "apps", "v1", "daemonsets");
    struct ks_type *pt = ctl_core(ks, "pods");
    json_t *ds = json_incref(ds_in);
    const char *uid = kobj_uid(ds);
    json_t *tmpl = kobj_path(ds, "spec.template");
    json_t *podspec = json_object_get(tmpl, "spec");
    json_t *tols = ctl_ds_tolerations(podspec);
    json_int_t collisions = json_integer_value(kobj_path(ds, "status.collisionCount"));
    _cleanup_free_ char *hash = ctl_template_hash(tmpl, collisions);
    ensure_revision(ks, ds, hash, tmpl);
    bool on_delete = streq_ptr(kobj_path_str(ds, "spec.updateStrategy.type"), "OnDelete");
    json_t *mine = json_object_get(pods_by_owner, uid); /* node -> [pods] */
    int64_t desired = 0, current = 0, ready = 0, available = 0, updated = 0, misscheduled = 0;
    int64_t unavailable = 0;
    json_t *old_ready = json_array(), *old_unready = json_array();
    bool changed = false;
    size_t i;
    json_t *node;
    json_array_foreach (nodes, i, node) {
        const char *nn = ks_obj_name(node);
        bool run = ctl_should_run(podspec, tols, node);
        json_t *list = json_object_get(mine, nn);
        /* failed pods are deleted and replaced */
        size_t j;
        json_t *p;
        json_t *live = json_array_size(list) ? json_array() : NULL;
        json_array_foreach (list, j, p) {
            if (streq_ptr(kobj_path_str(p, "status.phase"), "Failed")) {
                ks_delete_obj(ks, pt, p, NULL);
                changed = true;
            } else if (!ks_is_deleting(p)) {
                json_array_append(live, p);
            }
        }
        if (run) {
            desired++;
            if (json_array_size(live) == 0) {
                bool deleting = json_array_size(list) > 0;
                if (!deleting && ks->ds_pod_budget == 0) {
                    ks->more_work = true; /* the next reconcile goes on */
                } else if (!deleting) {
                    create_ds_pod(ks, ds, nn, hash);
                    ks->ds_pod_budget--;
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
                bool is_new = streq_ptr(kobj_label(keep, "controller-revision-hash"), hash);
                /* labels with dots cannot go through jpath; look them up directly */
                json_t *lab = kobj_labels(keep);
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
        } else if (json_array_size(live) > 0) {
            /* a node its pods should not be on: counted; removed unless a NoSchedule taint is
             * all that keeps new ones off (those keep running, as in Kubernetes) */
            misscheduled++;
            if (!ctl_should_continue_running(podspec, tols, node)) {
                json_array_foreach (live, j, p) {
                    ks_delete_obj(ks, pt, p, NULL);
                    changed = true;
                }
            }
        }
        json_decref(live);
    }
    /* pods on nodes that no longer exist */
    const char *nn;
    json_t *list;
    json_object_foreach (mine, nn, list) {
        if (ks_get(ctl_core(ks, "nodes"), "", nn))
            continue;
        size_t j;
        json_t *p;
        json_array_foreach (list, j, p)
            if (!ks_is_deleting(p)) {
                ks_delete_obj(ks, pt, p, NULL);
                changed = true;
            }
    }
    if (!on_delete) {
        json_t *mu = kobj_path(ds, "spec.updateStrategy.rollingUpdate.maxUnavailable");
        int64_t max_unavail = ks_intstr_scaled(mu, desired, true, 1);
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
    if (cur && streq_ptr(kobj_uid(cur), uid)) {
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
        json_object_set(st, "observedGeneration", kobj_path(cur, "metadata.generation"));
        if (!json_equal(st, json_object_get(cur, "status"))) {
            /* a status write takes only the status of what it is given */
            ks_update(ks, dst, cur, json_pack("{s:o}", "status", st), "status");
            changed = true;
        } else {
            json_decref(st);
        }
    }
    json_decref(ds);
    return changed;
}

static bool has_controller(const json_t *obj)
{
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(obj, "metadata.ownerReferences"), i, r) {
        if (json_is_true(json_object_get(r, "controller")))
            return true;
    }
    return false;
}

/* Orphaned pods (no controller) that a DaemonSet of their namespace selects become its pods, as
 * the DaemonSet controller claims them: a DaemonSet deleted with propagationPolicy=Orphan and
 * created again with a selector its old pods match takes them over (and then replaces them as
 * its update strategy says, since their template hash is not its own). */
static bool adopt_orphans(struct ksim *ks, struct ks_type *dst, struct ks_type *pt)
{
    /* the pods changed since the last look (an orphan left then matched no DaemonSet), unless
     * a DaemonSet was made or changed since: then every pod */
    json_t *look = NULL, *ds_changed = NULL;
    bool since = ctl_changed_since(ks, dst, ks->adopt_cursor, &ds_changed, NULL) &&
                 json_array_size(ds_changed) == 0 &&
                 ctl_changed_since(ks, pt, ks->adopt_cursor, &look, NULL);
    json_decref(ds_changed);
    if (!since)
        look = ctl_values(pt->objs);
    ks->adopt_cursor = ks->rv;
    json_t *orphans = json_array();
    const char *k;
    json_t *p;
    size_t li;
    json_array_foreach (look, li, p) {
        if (!ks_is_deleting(p) && kobj_path_str(p, "spec.nodeName") && !has_controller(p))
            json_array_append(orphans, p);
    }
    json_decref(look);
    bool changed = false;
    size_t i;
    json_array_foreach (orphans, i, p) {
        json_t *ds;
        json_object_foreach (dst->objs, k, ds) {
            json_t *match = kobj_path(ds, "spec.selector.matchLabels");
            if (ks_is_deleting(ds) || !streq_ptr(ks_obj_ns(ds), ks_obj_ns(p)) ||
                !json_is_object(match) || json_object_size(match) == 0 ||
                !kobj_labels_match(match, kobj_labels(p)))
                continue;
            json_t *n = json_deep_copy(p);
            json_t *meta = kobj_ensure_object(n, "metadata");
            json_t *refs = json_object_get(meta, "ownerReferences");
            if (!json_is_array(refs)) {
                refs = json_array();
                json_object_set_new(meta, "ownerReferences", refs);
            }
            json_array_append_new(refs, ctl_owner_ref(ds, "apps/v1", "DaemonSet"));
            ks_update(ks, pt, p, n, NULL);
            changed = true;
            break;
        }
    }
    json_decref(orphans);
    return changed;
}

/* The (DaemonSet uid, node) places of a pod: each controller reference to a DaemonSet, with
 * the pod's node. */
static void pod_places(json_t *p, json_t *ret)
{
    json_array_clear(ret);
    const char *node = kobj_path_str(p, "spec.nodeName");
    if (!node)
        return;
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(p, "metadata.ownerReferences"), i, r) {
        if (!json_is_true(json_object_get(r, "controller")) ||
            !streq_ptr(kobj_kind(r), "DaemonSet") || !kobj_str(r, "uid"))
            continue;
        json_array_append_new(ret, json_pack("[ss]", kobj_str(r, "uid"), node));
    }
}

static void index_add(json_t *idx, json_t *places, json_t *p)
{
    size_t i;
    json_t *pl;
    json_array_foreach (places, i, pl) {
        json_t *m = kobj_ensure_object(idx, json_string_value(json_array_get(pl, 0)));
        const char *node = json_string_value(json_array_get(pl, 1));
        json_t *l = json_object_get(m, node);
        if (!l) {
            l = json_array();
            json_object_set_new(m, node, l);
        }
        json_array_append(l, p);
    }
}

/* In each place, p's entry (the same namespace and name) replaced by now, or removed (now
 * NULL); empty lists and maps go. */
static void index_set(json_t *idx, json_t *places, json_t *p, json_t *now)
{
    size_t i;
    json_t *pl;
    json_array_foreach (places, i, pl) {
        const char *uid = json_string_value(json_array_get(pl, 0));
        const char *node = json_string_value(json_array_get(pl, 1));
        json_t *m = json_object_get(idx, uid);
        json_t *l = json_object_get(m, node);
        for (size_t j = 0; j < json_array_size(l); j++) {
            json_t *x = json_array_get(l, j);
            if (!streq(ks_obj_name(x), ks_obj_name(p)) || !streq(ks_obj_ns(x), ks_obj_ns(p)))
                continue;
            if (now)
                json_array_set(l, j, now);
            else
                json_array_remove(l, j);
            break;
        }
        if (l && json_array_size(l) == 0)
            json_object_del(m, node);
        if (m && json_object_size(m) == 0)
            json_object_del(idx, uid);
    }
}

/* DaemonSet uid -> node -> [pods], in the store's order: kept from reconcile to reconcile and
 * brought up to date from the event log (a pod's version replaced where it stays, moved where
 * its owner or node changed); made again from every pod when the log does not reach back. A
 * borrowed reference. */
static json_t *ds_pod_index(struct ksim *ks, struct ks_type *pt)
{
    size_t i0;
    if (ks->ds_index && ks_ev_since(ks, ks->ds_index_cursor, &i0)) {
        json_t *was = json_array(), *now = json_array();
        for (size_t i = i0; i < ks->ev_len; i++) {
            struct ks_event *e = &ks->ev[i];
            if (e->type != pt)
                continue;
            pod_places(e->kind == KS_MODIFIED  ? e->old
                       : e->kind == KS_DELETED ? e->obj
                                               : NULL,
                       was);
            pod_places(e->kind == KS_DELETED ? NULL : e->obj, now);
            if (json_equal(was, now)) {
                index_set(ks->ds_index, now, e->obj, e->obj);
            } else {
                index_set(ks->ds_index, was, e->obj, NULL);
                index_add(ks->ds_index, now, e->obj);
            }
        }
        json_decref(was);
        json_decref(now);
    } else {
        json_decref(ks->ds_index);
        ks->ds_index = json_object();
        json_t *places = json_array();
        const char *k;
        json_t *p;
        json_object_foreach (pt->objs, k, p) {
            pod_places(p, places);
            index_add(ks->ds_index, places, p);
        }
        json_decref(places);
    }
    ks->ds_index_cursor = ks->rv;
    return ks->ds_index;
}

bool ks_ctl_daemonsets(struct ksim *ks)
{
    struct ks_type *dst = ks_type_find(ks, "apps", "v1", "daemonsets");
    if (json_object_size(dst->objs) == 0)
        return false;
    struct ks_type *pt = ctl_core(ks, "pods");
    bool adopted = adopt_orphans(ks, dst, pt);
    json_t *nodes = ctl_values(ctl_core(ks, "nodes")->objs);
    json_t *by_owner = ds_pod_index(ks, pt);
    json_t *dss = ctl_values(dst->objs);
    bool changed = adopted;
    size_t i;
    json_t *ds;
    json_array_foreach (dss, i, ds)
        changed |= sync_daemonset(ks, ds, nodes, by_owner);
    json_decref(dss);
    json_decref(nodes);
    return changed;
}
