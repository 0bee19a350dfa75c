/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One reconcile of the operator (op-controller.h): the snapshot read from the informers, the
 * plan (op_plan, pure), the plan executed in its order, then the driver upgrade's pass. It
 * decides nothing: what to write, what status to report and what to prune are the plan's.
 */
#include <errno.h>
#include <string.h>

#include "op-controller.h"
#include "operator-internal.h"
#include "upgrade-ctl.h"
#include "yamlcfg.h"

#define COMPONENT "operator"

int op_check_leader(struct controller *c, struct err *e)
{
    pthread_mutex_lock(&c->lock);
    bool leader = c->leader;
    pthread_mutex_unlock(&c->lock);
    if (!leader)
        return err_set(e, -ECANCELED, "not the leader (lease lost); write skipped");
    return 0;
}

void op_count_write(struct controller *c)
{
    pthread_mutex_lock(&c->lock);
    c->m.writes++;
    pthread_mutex_unlock(&c->lock);
}

/* ---- reports: Events and statuses ----------------------------------------------------------- */

/* Posts an Event about a ClusterPolicy (in the operator's namespace) or an NVIDIADriver (in
 * "default", the namespace of cluster-scoped objects' Events). */
static void post_event(struct controller *c, const json_t *obj, const struct op_event *ev)
{
    struct err e = {0};
    if (op_check_leader(c, &e) < 0)
        return;
    bool policy = streq_ptr(kobj_kind(obj), "ClusterPolicy");
    _cleanup_json_ json_t *inv = json_pack(
        "{s:s,s:s,s:{s:s,s:s}}", "apiVersion", policy ? "nvidia.com/v1" : "nvidia.com/v1alpha1",
        "kind", policy ? "ClusterPolicy" : "NVIDIADriver", "metadata", "name", kobj_name(obj) ?: "",
        "uid", kobj_uid(obj) ?: "");
    struct kube_event ke = {.ns = policy ? c->ns : "default",
                            .involved = inv,
                            .type = ev->type,
                            .reason = ev->reason,
                            .message = ev->message,
                            .component = "gpuop-operator"};
    if (streq_ptr(ev->type, "Warning"))
        log_warn(COMPONENT, policy ? "ClusterPolicy event" : "NVIDIADriver event",
                 "%s=%s reason=%s message=\"%s\"", policy ? "policy" : "nvidiadriver",
                 kobj_name(obj), ev->reason, ev->message);
    if (kube_event_create(c->kc, &ke, &e) < 0)
        log_warn(COMPONENT, "event not recorded", "reason=%s error=\"%s\"", ev->reason,
                 err_msg(&e));
    else
        op_count_write(c);
}

/* Writes a report's status; `written` keeps what the server returned (read-your-writes). */
static int write_status(struct controller *c, const struct kube_resource *res,
                        const struct op_report *r, json_t *written, struct err *e)
{
    int rc = op_check_leader(c, e);
    if (rc < 0)
        return rc;
    _cleanup_json_ json_t *obj = json_deep_copy(r->object);
    json_object_set(obj, "status", r->status);
    _cleanup_json_ json_t *out = NULL;
    rc = kube_update_status(c->kc, res, NULL, obj, &out, e);
    if (rc < 0)
        return rc;
    op_count_write(c);
    const char *rv = kobj_resource_version(r->object);
    if (rv && json_is_object(out) && kobj_name(r->object))
        json_object_set_new(written, kobj_name(r->object), json_pack("[s,O]", rv, out));
    return 0;
}

/* A policy's planned Events, then its status when it changed. */
static int report_policy(struct controller *c, const struct op_report *r, struct err *e)
{
    for (size_t i = 0; i < r->n_events; i++)
        post_event(c, r->object, &r->events[i]);
    if (!r->write)
        return 0;
    return write_status(c, &RES_CLUSTERPOLICIES, r, c->written, e);
}

/* Each NVIDIADriver's planned Events, then its status when it changed. A status the server
 * refuses (a conflict with a newer version) is logged; the next reconcile plans it again. */
static int report_nvds(struct controller *c, const struct op_plan *plan, struct err *e)
{
    for (size_t i = 0; i < plan->n_nvidia_drivers; i++) {
        const struct op_report *r = &plan->nvidia_drivers[i];
        for (size_t k = 0; k < r->n_events; k++)
            post_event(c, r->object, &r->events[k]);
        if (!r->write)
            continue;
        struct err we = {0};
        int rc = write_status(c, &RES_NVIDIADRIVERS, r, c->written_nvds, &we);
        if (rc == -ECANCELED)
            return err_set(e, rc, "%s", err_msg(&we));
        if (rc < 0)
            log_warn(COMPONENT, "NVIDIADriver status not written", "nvidiadriver=%s error=\"%s\"",
                     r->name, err_msg(&we));
    }
    return 0;
}

/* ---- objects -------------------------------------------------------------------------------- */

static const struct kube_resource *resource_of_kind(const char *kind)
{
    for (size_t i = 0; i < N_OWNED; i++)
        if (streq_ptr(owned_kinds[i]->kind, kind))
            return owned_kinds[i];
    return NULL;
}

static size_t owned_index(const struct kube_resource *r)
{
    for (size_t i = 0; i < N_OWNED; i++)
        if (owned_kinds[i] == r)
            return i;
    return 0;
}

/* Creates or replaces one planned object. */
static int apply_object(struct controller *c, json_t *desired, struct err *e)
{
    const struct kube_resource *r = resource_of_kind(kobj_kind(desired));
    if (!r)
        return err_set(e, -EINVAL, "rendered object of unknown kind \"%s\"", kobj_kind(desired));
    const char *ns = r->namespaced ? kobj_namespace(desired) : NULL;
    const char *name = kobj_name(desired);
    _cleanup_json_ json_t *live = kube_informer_get(c->owned[owned_index(r)], ns, name);
    if (!live) {
        /* Not in our store (the store only sees objects labelled as ours): ask the server, an
         * object of the same name may exist unlabelled. */
        int g = kube_get(c->kc, r, ns, name, &live, e);
        if (g < 0 && g != -ENOENT)
            return g;
        err_clear(e);
    }
    /* The informer may have caught up since the snapshot. */
    if (op_object_current(desired, live))
        return 0;
    int rc = op_check_leader(c, e);
    if (rc < 0)
        return rc;
    _cleanup_json_ json_t *out = NULL;
    if (!live) {
        rc = kube_create(c->kc, r, ns, desired, &out, e);
        if (rc == -EEXIST)
            return 0; /* raced with our own earlier create; the informer will catch up */
    } else {
        _cleanup_json_ json_t *obj = json_deep_copy(desired);
        json_t *meta = json_object_get(obj, "metadata");
        json_object_set(meta, "resourceVersion", kobj_at(live, "metadata", "resourceVersion"));
        if (r == &KUBE_SERVICES) {
            /* clusterIP is immutable and assigned by the server */
            json_t *lspec = json_object_get(live, "spec");
            json_t *ospec = json_object_get(obj, "spec");
            if (json_object_get(lspec, "clusterIP"))
                json_object_set(ospec, "clusterIP", json_object_get(lspec, "clusterIP"));
            if (json_object_get(lspec, "clusterIPs"))
                json_object_set(ospec, "clusterIPs", json_object_get(lspec, "clusterIPs"));
        }
        rc = kube_update(c->kc, r, ns, obj, &out, e);
    }
    if (rc < 0)
        return rc;
    op_count_write(c);
    log_info(COMPONENT, live ? "updated" : "created", "kind=%s name=%s", r->kind, name);
    return 0;
}

static int delete_object(struct controller *c, const struct op_object_ref *o, struct err *e)
{
    const struct kube_resource *r = resource_of_kind(o->kind);
    if (!r)
        return err_set(e, -EINVAL, "prune of unknown kind \"%s\"", o->kind);
    if (op_check_leader(c, e) < 0)
        return -ECANCELED;
    struct kube_delete_opts dopts = {.propagation = KUBE_PROPAGATION_BACKGROUND};
    int rc = kube_delete(c->kc, r, o->ns, o->name, &dopts, e);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    err_clear(e);
    op_count_write(c);
    log_info(COMPONENT, "deleted", "kind=%s name=%s", o->kind, o->name);
    return 0;
}

static void add_write_error(struct op_write_errors *errors, const char *kind, const char *ns,
                            const char *name, const struct err *e)
{
    _cleanup_free_ char *ref =
        xasprintf("%s %s%s%s", kind ? kind : "?", ns ? ns : "", ns ? "/" : "", name ? name : "?");
    op_write_errors_add(errors, ref, err_msg(e));
}

/* Patches every planned node. One node refusing its labels (a webhook, a conflict) does not hold
 * back the others; each failure goes to `errors`. */
static int label_nodes(struct controller *c, const struct op_plan *plan,
                       struct op_write_errors *errors, struct err *e)
{
    for (size_t i = 0; i < plan->n_node_patches; i++) {
        const struct op_node_patch *np = &plan->node_patches[i];
        if (op_check_leader(c, e) < 0)
            return -ECANCELED;
        _cleanup_json_ json_t *body = json_pack("{s:{s:O}}", "metadata", "labels", np->labels);
        struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
        _cleanup_json_ json_t *out = NULL;
        struct err ne = {0};
        int r = kube_patch(c->kc, &KUBE_NODES, NULL, np->node, &po, body, &out, &ne);
        if (r == -ENOENT)
            continue; /* the node went away */
        if (r < 0) {
            add_write_error(errors, "Node", NULL, np->node, &ne);
            continue;
        }
        op_count_write(c);
    }
    return 0;
}

/* The active policy's writes: node labels, applies and (when those all succeeded) prunes. Every
 * write is tried; one the API server refuses does not hold back the others, and each failure
 * goes to `errors`. Fails only when the lease is lost (-ECANCELED). */
static int write_objects(struct controller *c, const struct op_plan *plan,
                         struct op_write_errors *errors, struct err *e)
{
    int r = label_nodes(c, plan, errors, e);
    if (r < 0)
        return r;
    size_t i;
    json_t *obj;
    json_array_foreach (plan->apply, i, obj) {
        struct err ae = {0};
        r = apply_object(c, obj, &ae);
        if (r == -ECANCELED)
            return err_set(e, r, "%s", err_msg(&ae));
        if (r < 0)
            add_write_error(errors, kobj_kind(obj), kobj_namespace(obj), kobj_name(obj), &ae);
    }
    if (errors->n > 0)
        return 0; /* nothing is pruned on a reconcile that failed part way */
    for (i = 0; i < plan->n_prune; i++) {
        const struct op_object_ref *o = &plan->prune[i];
        struct err de = {0};
        r = delete_object(c, o, &de);
        if (r == -ECANCELED)
            return err_set(e, r, "%s", err_msg(&de));
        if (r < 0)
            add_write_error(errors, o->kind, o->ns, o->name, &de);
    }
    return 0;
}

/* ---- one reconcile -------------------------------------------------------------------------- */

/* Replaces cached objects that predate our own status write by what the server returned for
 * it; forgets writes the cache has caught up with. */
static void objects_fresh(json_t *written, json_t *objects)
{
    _cleanup_json_ json_t *keep = json_object();
    size_t i;
    json_t *o;
    json_array_foreach (objects, i, o) {
        const char *name = kobj_name(o);
        json_t *w = name ? json_object_get(written, name) : NULL;
        if (!w)
            continue;
        if (streq_ptr(kobj_resource_version(o), json_string_value(json_array_get(w, 0)))) {
            /* name is o's: kept before o is replaced (and maybe freed: the informer may have
             * dropped its own reference meanwhile) */
            json_object_set(keep, name, w);
            json_array_set(objects, i, json_array_get(w, 1));
        }
    }
    json_object_clear(written);
    json_object_update(written, keep);
}

/* What the informers hold, as the planner reads it. The arrays are new. */
struct world {
    json_t *policies, *nodes, *owned, *nvds, *findings;
};

static void world_done(struct world *w)
{
    json_decref(w->policies);
    json_decref(w->nodes);
    json_decref(w->owned);
    json_decref(w->nvds);
    json_decref(w->findings);
}

static int read_world(struct controller *c, struct world *w, struct err *e)
{
    w->policies = kube_informer_list(c->policies, NULL, NULL, NULL);
    w->nodes = kube_informer_list(c->nodes, NULL, NULL, NULL);
    w->owned = json_array();
    for (size_t k = 0; k < N_OWNED; k++) {
        /* The informers give every object its kind, which the plan matches objects by. */
        _cleanup_json_ json_t *list = kube_informer_list(c->owned[k], NULL, NULL, NULL);
        json_array_extend(w->owned, list);
    }
    objects_fresh(c->written, w->policies);
    /* not listed yet (or no CRD): NULL, and the plan keeps every NVIDIADriver DaemonSet */
    w->nvds = kube_informer_synced(c->nvds) ? kube_informer_list(c->nvds, NULL, NULL, NULL) : NULL;
    if (w->nvds)
        objects_fresh(c->written_nvds, w->nvds);
    w->findings = op_gpuquota_observe(&c->gq, w->nodes, e);
    return w->findings ? 0 : err_prefix(e, "GPU capacity view");
}

/* The ignored policies' Events and statuses; a failed status write there must not hold back
 * the active one (the first failure is kept in *ret_err). */
static int report_ignored(struct controller *c, const struct op_plan *plan, struct err *ret_err,
                          struct err *e)
{
    int first = 0;
    for (size_t i = 0; i < plan->n_policies; i++) {
        const struct op_policy_report *pr = &plan->policies[i];
        if (pr == plan->active)
            continue;
        struct err ie = {0};
        int r = report_policy(c, &pr->r, &ie);
        if (r == -ECANCELED)
            return err_set(e, r, "%s", err_msg(&ie));
        if (r < 0 && first == 0)
            first = err_set(ret_err, r, "ClusterPolicy %s status: %s", pr->r.name, err_msg(&ie));
    }
    return first;
}

/* The active, valid policy's plan executed: its objects, then (planned again with this
 * execution's failed writes when they changed) the NVIDIADrivers, the driver upgrade pass and
 * the policy's status. *plan may be replaced. */
static int execute_active(struct controller *c, struct op_snapshot *snap, struct op_plan **plan,
                          bool *ret_requeue, struct err *e)
{
    struct op_write_errors errors = {0}; /* of this execution's writes */
    int r = write_objects(c, *plan, &errors, e);
    if (r < 0)
        goto out;
    /* The status tells what this execution could not write, or that it recovered. */
    if (!op_write_errors_equal(&errors, &c->write_errors)) {
        op_write_errors_done(&c->write_errors);
        c->write_errors = errors;
        errors = (struct op_write_errors){0};
        snap->apply_errors = &c->write_errors;
        op_plan_free(steal_ptr(plan));
        if ((r = op_plan(snap, plan, e)) < 0)
            goto out;
        if (!(*plan)->active) {
            r = err_set(e, -EIO, "no active ClusterPolicy on the second plan");
            goto out;
        }
    }
    if ((r = report_nvds(c, *plan, e)) < 0)
        goto out;
    /* The GPU remediation, then the driver upgrade (held where faults use a pool's budget): their
     * own writes, and their conditions in the status about to be written. */
    struct op_report *ar = &(*plan)->active->r;
    r = op_remediation_reconcile(c->rem, ar->object, snap->owned, ar->status, snap->now_ms, e);
    if (r < 0)
        goto out;
    r = op_upgrade_reconcile(c->upg, ar->object, snap->owned, ar->status, snap->now_ms, e);
    if (r < 0)
        goto out;
    ar->write = !json_equal(kobj_path(ar->object, "status"), ar->status);
    if ((r = report_policy(c, ar, e)) < 0) {
        err_prefix(e, "ClusterPolicy %s status", ar->name);
        goto out;
    }
    if ((r = op_remediation_write_policy(c->rem, ar->object, e)) < 0)
        goto out;
    pthread_mutex_lock(&c->lock);
    c->m.status = (*plan)->health;
    pthread_mutex_unlock(&c->lock);
    *ret_requeue = (*plan)->requeue;
    if (c->write_errors.n > 0)
        r = err_set(e, -EIO, "%zu write(s) failed, nothing pruned; first: %s: %s",
                    c->write_errors.n, c->write_errors.v[0].object, c->write_errors.v[0].reason);
out:
    op_write_errors_done(&errors);
    return r;
}

int op_reconcile(struct controller *c, bool *ret_requeue, struct err *e)
{
    *ret_requeue = false;
    struct world w = {0};
    int r = read_world(c, &w, e);
    if (r < 0) {
        world_done(&w);
        return r;
    }
    struct op_snapshot snap = {.policies = w.policies,
                               .nodes = w.nodes,
                               .owned = w.owned,
                               .apply_errors = &c->write_errors,
                               .defaults = &c->defaults,
                               .templates = c->templates,
                               .now_ms = now_ms_real(),
                               .findings = w.findings,
                               .nvidia_drivers = w.nvds};
    _cleanup_(op_plan_freep) struct op_plan *plan = NULL;
    if ((r = op_plan(&snap, &plan, e)) < 0)
        goto out;
    pthread_mutex_lock(&c->lock);
    c->m.gpu_nodes = plan->gpu_nodes;
    if (plan->has_active && plan->health < 0)
        c->m.status = -1;
    pthread_mutex_unlock(&c->lock);

    struct err ignored_err = {0};
    int ignored_r = report_ignored(c, plan, &ignored_err, e);
    if (ignored_r == -ECANCELED) {
        r = ignored_r;
        goto out;
    }
    if (plan->active && !plan->active->valid) {
        /* Invalid: the running operands stay exactly as they are; the status says why. */
        r = report_policy(c, &plan->active->r, e);
    } else if (plan->active) {
        r = execute_active(c, &snap, &plan, ret_requeue, e);
    }
    if (r == 0 && ignored_r < 0)
        r = err_set(e, ignored_r, "%s", err_msg(&ignored_err));
out:
    world_done(&w);
    return r;
}
