/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One reconcile of the operator (op-controller.h): the snapshot read from the informers, the
 * plan (op_plan, pure), the plan executed in its order, then the driver upgrade's pass. It
 * decides nothing: what to write, what status to report and what to prune are the plan's.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "adopt-ctl.h"
#include "op-controller.h"
#include "operator-internal.h"
#include "upgrade-ctl.h"
#include "alloc-ctl.h"
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

/* Queues an Event about a ClusterPolicy (in the operator's namespace) or an NVIDIADriver (in
 * "default", the namespace of cluster-scoped objects' Events) for the recorder. */
static void queue_event(struct controller *c, json_t *queue, const json_t *obj,
                        const struct op_event *ev)
{
    bool cp = streq_ptr(kobj_kind(obj), "ClusterPolicy");
    bool gc = streq_ptr(kobj_kind(obj), "GPUCluster");
    bool policy = cp || gc; /* the cluster-wide ones: their Events go to the operand namespace */
    struct op_event_in in = {.about = {.api_version = cp ? "nvidia.com/v1" : "nvidia.com/v1alpha1",
                                       .kind = cp   ? "ClusterPolicy"
                                               : gc ? "GPUCluster"
                                                    : "NVIDIADriver",
                                       .name = kobj_name(obj) ?: "",
                                       .uid = kobj_uid(obj)},
                             .ns = policy ? c->ns : "default",
                             .type = ev->type,
                             .reason = ev->reason,
                             .message = ev->message};
    if (streq_ptr(ev->type, "Warning"))
        log_warn(COMPONENT,
                 cp   ? "ClusterPolicy event"
                 : gc ? "GPUCluster event"
                      : "NVIDIADriver event",
                 "%s=%s reason=%s message=\"%s\"", policy ? "policy" : "nvidiadriver",
                 kobj_name(obj), ev->reason, ev->message);
    op_event_queue_add(queue, &in);
}

/* The reconcile's Events, last (OP_PHASE_EVENTS): aggregated and rate-limited by the recorder,
 * then posted. */
static void post_events(struct controller *c, const json_t *queue, uint64_t now_ms)
{
    size_t n = 0;
    _cleanup_free_ struct op_event_in *v = op_event_queue_view(queue, &n);
    if (n == 0)
        return;
    struct op_event_writes w = {0};
    op_recorder_plan(c->recorder, v, n, now_ms, &w);
    for (size_t i = 0; i < w.n; i++) {
        struct op_event_write *x = &w.v[i];
        struct err e = {0};
        int r = op_check_leader(c, &e);
        if (r == 0) {
            _cleanup_json_ json_t *out = NULL;
            struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
            r = x->patch ? kube_patch(c->kc, &KUBE_EVENTS, x->ns, x->name, &po, x->body, &out, &e)
                         : kube_create(c->kc, &KUBE_EVENTS, x->ns, x->body, &out, &e);
            if (r == -ENOENT && x->recreate) { /* the Event to count up is gone */
                err_clear(&e);
                json_decref(steal_ptr(&out));
                r = kube_create(c->kc, &KUBE_EVENTS, x->ns, x->recreate, &out, &e);
            }
        }
        op_recorder_result(c->recorder, x, r == 0);
        if (r == 0)
            op_count_write(c);
        else
            log_warn(COMPONENT, "event not recorded", "event=%s/%s error=\"%s\"", x->ns, x->name,
                     err_msg(&e));
    }
    if (w.dropped > 0)
        log_info(COMPONENT, "events held back by the rate limit", "count=%zu", w.dropped);
    op_event_writes_done(&w);
}

/* Posts one Event at once, not through the recorder: the takeover's audit trail (adopt-ctl.c),
 * one Event per step of a one-time migration, bounded by the objects and nodes it takes over,
 * every one of which an administrator reads afterwards (the recorder's bucket per object would
 * drop all but the first 25 about the ClusterPolicy). */
void op_post_event(struct controller *c, const json_t *obj, const struct op_event *ev)
{
    struct err e = {0};
    if (op_check_leader(c, &e) < 0)
        return;
    bool cp = streq_ptr(kobj_kind(obj), "ClusterPolicy");
    bool gc = streq_ptr(kobj_kind(obj), "GPUCluster");
    bool policy = cp || gc; /* the cluster-wide ones: their Events go to the operand namespace */
    _cleanup_json_ json_t *inv = json_pack(
        "{s:s,s:s,s:{s:s,s:s}}", "apiVersion", cp ? "nvidia.com/v1" : "nvidia.com/v1alpha1", "kind",
        cp   ? "ClusterPolicy"
        : gc ? "GPUCluster"
             : "NVIDIADriver",
        "metadata", "name", kobj_name(obj) ?: "", "uid", kobj_uid(obj) ?: "");
    struct kube_event ke = {.ns = policy ? c->ns : "default",
                            .involved = inv,
                            .type = ev->type,
                            .reason = ev->reason,
                            .message = ev->message,
                            .component = "gpuop-operator"};
    if (streq_ptr(ev->type, "Warning"))
        log_warn(COMPONENT,
                 cp   ? "ClusterPolicy event"
                 : gc ? "GPUCluster event"
                      : "NVIDIADriver event",
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

/* A policy's planned Events queued, then its status written when it changed. */
static int report_policy(struct controller *c, const struct op_report *r, json_t *queue,
                         struct err *e)
{
    for (size_t i = 0; i < r->n_events; i++)
        queue_event(c, queue, r->object, &r->events[i]);
    if (!r->write)
        return 0;
    if (streq_ptr(kobj_kind(r->object), "GPUCluster"))
        return write_status(c, &KUBE_GPUCLUSTERS, r, c->written_gcs, e);
    return write_status(c, &KUBE_CLUSTERPOLICIES, r, c->written, e);
}

/* Each NVIDIADriver's planned Events queued, then its status written when it changed. A status
 * the server refuses (a conflict with a newer version) is logged; the next reconcile plans it
 * again. */
static int report_nvds(struct controller *c, const struct op_plan *plan, json_t *queue,
                       struct err *e)
{
    for (size_t i = 0; i < plan->n_nvidia_drivers; i++) {
        const struct op_report *r = &plan->nvidia_drivers[i];
        for (size_t k = 0; k < r->n_events; k++)
            queue_event(c, queue, r->object, &r->events[k]);
        if (!r->write)
            continue;
        struct err we = {0};
        int rc = write_status(c, &KUBE_NVIDIADRIVERS, r, c->written_nvds, &we);
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
    if (streq_ptr(kind, KUBE_SERVICEMONITORS.kind))
        return &KUBE_SERVICEMONITORS;
    if (streq_ptr(kind, KUBE_DEVICECLASSES.kind))
        return &KUBE_DEVICECLASSES;
    return NULL;
}

/* The informer that holds gpuop's objects of an owned kind. */
static struct kube_informer *informer_of(struct controller *c, const struct kube_resource *r)
{
    for (size_t i = 0; i < N_OWNED; i++)
        if (owned_kinds[i] == r)
            return c->owned[i];
    if (r == &KUBE_DEVICECLASSES)
        return c->deviceclasses;
    assert(r == &KUBE_SERVICEMONITORS);
    return c->servicemonitors;
}

/* Creates or replaces one planned object. */
static int apply_object(struct controller *c, json_t *desired, struct err *e)
{
    const struct kube_resource *r = resource_of_kind(kobj_kind(desired));
    if (!r)
        return err_set(e, -EINVAL, "rendered object of unknown kind \"%s\"", kobj_kind(desired));
    const char *ns = r->namespaced ? kobj_namespace(desired) : NULL;
    const char *name = kobj_name(desired);
    _cleanup_json_ json_t *live = kube_informer_get(informer_of(c, r), ns, name);
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

/* ---- nodes: one patch each, merged from the controllers' wishes -------------------------------
 */

enum { CTL_UPGRADE, CTL_DEPLOY };
/* In precedence order (op_node_merge's rule 3): the driver upgrade's state before the deploy
 * labels (docs/operator.md). */
static const struct op_node_controller node_controllers[] = {
    [CTL_UPGRADE] = {"driver-upgrade", false},
    [CTL_DEPLOY] = {"deploy", true},
};

/* The nodes to patch this reconcile and the wishes their one patch merges. A node's merged
 * patch is made again right before it is written and let go of right after, so that only one
 * is alive at a time (not a patch for every node: several MiB at 10,000 nodes); the merge is a
 * pure function of the wishes, which are held here (shared values, read-only) until then. */
struct node_write {
    char *node;
    json_t *deploy;  /* the plan's label patch (shared between nodes alike); NULL: none */
    json_t *upgrade; /* the upgrade pass's wish; NULL: none */
    enum op_write_phase phase;
    bool pending; /* not written yet */
};

struct node_writes {
    struct node_write *v;
    size_t n;
};

static void node_writes_done(struct node_writes *nw)
{
    for (size_t i = 0; i < nw->n; i++) {
        free(nw->v[i].node);
        json_decref(nw->v[i].deploy);
        json_decref(nw->v[i].upgrade);
    }
    free(nw->v);
    *nw = (struct node_writes){0};
}

/* The node's wishes merged into *ret (op_node_merged_done it). */
static int node_write_merge(const struct node_write *nwr, struct op_node_merged *ret, struct err *e)
{
    _cleanup_json_ json_t *deploy =
        nwr->deploy ? json_pack("{s:{s:O}}", "metadata", "labels", nwr->deploy) : NULL;
    struct op_node_wish w[2];
    size_t n = 0;
    if (deploy)
        w[n++] = (struct op_node_wish){nwr->node, CTL_DEPLOY, deploy};
    if (nwr->upgrade)
        w[n++] = (struct op_node_wish){nwr->node, CTL_UPGRADE, nwr->upgrade}; /* in any order */
    return op_node_merge(node_controllers, ARRAY_SIZE(node_controllers), w, n, ret, e);
}

/* One node's wishes merged once to learn what it writes and when; a wish the merge refuses is a
 * write error of the node. */
static void merge_node(struct node_writes *nw, const char *node, json_t *deploy, json_t *upgrade,
                       struct op_write_errors *errors)
{
    struct node_write nwr = {(char *)node, deploy, upgrade, OP_PHASE_DEPLOY, true};
    struct op_node_merged m = {0};
    struct err e = {0};
    if (node_write_merge(&nwr, &m, &e) < 0) {
        add_write_error(errors, "Node", NULL, node, &e);
        return;
    }
    for (size_t i = 0; i < m.n_conflicts; i++)
        log_info(COMPONENT, "node wishes disagree, one rule decided",
                 "node=%s field=%s kept=%s "
                 "dropped=%s",
                 node, m.conflicts[i].field, node_controllers[m.conflicts[i].winner].name,
                 node_controllers[m.conflicts[i].loser].name);
    if (m.patch) {
        nwr.phase = op_node_patch_phase(&m);
        nwr.node = xstrdup(node);
        json_incref(deploy);
        json_incref(upgrade);
        nw->v = xrealloc(nw->v, (nw->n + 1) * sizeof(*nw->v));
        nw->v[nw->n++] = nwr;
    }
    op_node_merged_done(&m);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every node's one patch: the plan's deploy labels and the upgrade pass's wish, merged. */
static void merge_nodes(struct controller *c, const struct op_plan *plan, struct node_writes *nw,
                        struct op_write_errors *errors)
{
    const json_t *upg = op_upgrade_node_wishes(c->upg);
    /* the nodes with deploy labels, sorted: the upgrade's other nodes are looked up in it */
    _cleanup_free_ const char **planned = xcalloc(plan->n_node_patches + 1, sizeof(*planned));
    for (size_t i = 0; i < plan->n_node_patches; i++) {
        const struct op_node_patch *np = &plan->node_patches[i];
        planned[i] = np->node;
        merge_node(nw, np->node, np->labels, upg ? json_object_get(upg, np->node) : NULL, errors);
    }
    qsort(planned, plan->n_node_patches, sizeof(*planned), cmp_str);
    const char *node;
    json_t *u;
    json_object_foreach ((json_t *)upg, node, u) {
        if (bsearch(&node, planned, plan->n_node_patches, sizeof(*planned), cmp_str))
            continue;
        merge_node(nw, node, NULL, u, errors);
    }
}

/* The merged patches of one phase. A node refusing its patch (a webhook, a conflict) does not
 * hold back the others; a deploy patch's failure goes to `errors`. A patch whose precondition
 * failed (the node changed since it was read) is written again without the wishes planned from
 * that version (the fallback); those controllers plan again from the node as it is. */
static int write_node_patches(struct controller *c, struct node_writes *nw,
                              enum op_write_phase phase, struct op_write_errors *errors,
                              struct err *e)
{
    for (size_t i = 0; i < nw->n; i++) {
        struct node_write *nwr = &nw->v[i];
        const char *node = nwr->node;
        if (!nwr->pending || nwr->phase != phase)
            continue; /* written in an earlier phase, or another phase's */
        if (op_check_leader(c, e) < 0)
            return -ECANCELED;
        /* made now, let go of below: one node's merged patch alive at a time */
        struct op_node_merged m = {0};
        struct err me = {0};
        int r = node_write_merge(nwr, &m, &me);
        /* the same wishes merged as in merge_nodes: the same outcome */
        assert(r == 0 && m.patch && op_node_patch_phase(&m) == phase);
        struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
        _cleanup_json_ json_t *out = NULL;
        struct err ne = {0};
        if (r < 0 || !m.patch) {
            if (r < 0 && nwr->deploy)
                add_write_error(errors, "Node", NULL, node, &me);
            goto next;
        }
        r = kube_patch(c->kc, &KUBE_NODES, NULL, node, &po, m.patch, &out, &ne);
        if (r == 0)
            op_count_write(c);
        if (m.controllers & (UINT64_C(1) << CTL_UPGRADE)) {
            if (r < 0 && r != KUBE_ECONFLICT && r != -ENOENT)
                log_warn(COMPONENT, "node patch failed", "node=%s error=\"%s\"", node,
                         err_msg(&ne));
            /* read-your-writes keeps the patch and the version it made, not the node */
            op_upgrade_node_written(c->upg, node, r,
                                    kobj_path_str(m.patch, "metadata.resourceVersion"),
                                    r == 0 ? kobj_resource_version(out) : NULL, m.patch);
        }
        if (r == KUBE_ECONFLICT && m.fallback) {
            json_decref(steal_ptr(&out));
            err_clear(&ne);
            r = kube_patch(c->kc, &KUBE_NODES, NULL, node, &po, m.fallback, &out, &ne);
            if (r == 0)
                op_count_write(c);
        }
        if (r < 0 && r != -ENOENT && m.deploys)
            add_write_error(errors, "Node", NULL, node, &ne);
    next:
        op_node_merged_done(&m);
        /* written: its wishes let go of now */
        nwr->pending = false;
        json_decref(steal_ptr(&nwr->deploy));
        json_decref(steal_ptr(&nwr->upgrade));
    }
    return 0;
}

/* The operand objects applied and (when every write so far succeeded) pruned. Every write is
 * tried; one the API server refuses does not hold back the others, and each failure goes to
 * `errors`. Fails only when the lease is lost (-ECANCELED). */
static int write_objects(struct controller *c, const struct op_plan *plan,
                         struct op_write_errors *errors, struct err *e)
{
    int r;
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

/* The operand namespace's Pod Security labels, before the privileged operands they admit. A
 * refusal goes to `errors`; -ECANCELED when the lease is lost. */
static int write_namespace(struct controller *c, const struct op_plan *plan,
                           struct op_write_errors *errors, struct err *e)
{
    if (!plan->namespace_patch)
        return 0;
    if (op_check_leader(c, e) < 0)
        return -ECANCELED;
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
    _cleanup_json_ json_t *out = NULL;
    struct err ne = {0};
    int r = kube_patch(c->kc, &KUBE_NAMESPACES, NULL, c->ns, &po, plan->namespace_patch, &out, &ne);
    if (r < 0) {
        add_write_error(errors, "Namespace", NULL, c->ns, &ne);
        return 0;
    }
    op_count_write(c);
    log_info(COMPONENT, "namespace Pod Security labels written", "namespace=%s", c->ns);
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
    json_t *ns;                 /* the operand namespace; NULL: not read */
    json_t *configmaps;         /* those the policies' driver.kernelModuleConfig name, found */
    bool servicemonitor_served; /* the ServiceMonitors' informer listed: the kind is served */
};

static void world_done(struct world *w)
{
    json_decref(w->policies);
    json_decref(w->nodes);
    json_decref(w->owned);
    json_decref(w->nvds);
    json_decref(w->findings);
    json_decref(w->ns);
    json_decref(w->configmaps);
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
    /* the ServiceMonitor kind is served once its informer could list it */
    w->servicemonitor_served = kube_informer_synced(c->servicemonitors);
    if (w->servicemonitor_served) {
        _cleanup_json_ json_t *list = kube_informer_list(c->servicemonitors, NULL, NULL, NULL);
        json_array_extend(w->owned, list);
    }
    if (kube_informer_synced(c->deviceclasses)) {
        _cleanup_json_ json_t *list = kube_informer_list(c->deviceclasses, NULL, NULL, NULL);
        json_array_extend(w->owned, list);
    }
    /* The operand namespace, for its Pod Security labels (gpuop's RBAC on namespaces is get and
     * patch, no watch): read while a policy enables psa, or while the namespace holds the record
     * of labels gpuop set (to restore them), and once at start to learn that. Unread, they stay
     * as they are. */
    size_t i;
    json_t *cp;
    bool psa = false;
    json_array_foreach (w->policies, i, cp)
        psa = psa || json_is_true(kobj_path(cp, "spec.psa.enabled"));
    if (json_array_size(w->policies) > 0 && (psa || c->psa_record != 0)) {
        struct err ne = {0};
        int g = kube_get(c->kc, &KUBE_NAMESPACES, NULL, c->ns, &w->ns, &ne);
        if (g < 0 && g != -ENOENT)
            log_warn(COMPONENT, "namespace not read; its Pod Security labels are left as they are",
                     "namespace=%s error=\"%s\"", c->ns, err_msg(&ne));
        if (g == 0 || g == -ENOENT)
            c->psa_record = kobj_str(kobj_annotations(w->ns), OP_PSA_ANNOTATION) ? 1 : 0;
    }
    /* The administrator's ConfigMaps of kernel module parameters (not gpuop's: not in the
     * ConfigMap informer). One that cannot be read fails the reconcile (retried), so that the
     * driver DaemonSet never loses its mounts to a passing error. */
    w->configmaps = json_array();
    json_array_foreach (w->policies, i, cp) {
        const char *name = kobj_path_str(cp, "spec.driver.kernelModuleConfig.name");
        if (!name || !*name)
            continue;
        json_t *cm = NULL;
        int g = kube_get(c->kc, &KUBE_CONFIGMAPS, c->ns, name, &cm, e);
        if (g == -ENOENT) {
            err_clear(e);
            continue;
        }
        if (g < 0)
            return err_prefix(e, "ConfigMap %s/%s (spec.driver.kernelModuleConfig)", c->ns, name);
        json_array_append_new(w->configmaps, cm);
    }
    objects_fresh(c->written, w->policies);
    /* GPUClusters, once listed, beside the ClusterPolicies: the planner tells them apart */
    if (kube_informer_synced(c->gpuclusters)) {
        _cleanup_json_ json_t *gcs = kube_informer_list(c->gpuclusters, NULL, NULL, NULL);
        objects_fresh(c->written_gcs, gcs);
        json_array_extend(w->policies, gcs);
    }
    /* not listed yet (or no CRD): NULL, and the plan keeps every NVIDIADriver DaemonSet */
    w->nvds = kube_informer_synced(c->nvds) ? kube_informer_list(c->nvds, NULL, NULL, NULL) : NULL;
    if (w->nvds)
        objects_fresh(c->written_nvds, w->nvds);
    /* resource.k8s.io/v1 is served once the DeviceClasses' informer could list them */
    w->findings = op_gpuquota_observe(&c->gq, w->nodes, kube_informer_synced(c->deviceclasses), e);
    return w->findings ? 0 : err_prefix(e, "GPU capacity view");
}

/* The ignored policies' Events and statuses; a failed status write there must not hold back
 * the active one (the first failure is kept in *ret_err). */
static int report_ignored(struct controller *c, const struct op_plan *plan, json_t *queue,
                          struct err *ret_err, struct err *e)
{
    int first = 0;
    for (size_t i = 0; i < plan->n_policies; i++) {
        const struct op_policy_report *pr = &plan->policies[i];
        if (pr == plan->active)
            continue;
        struct err ie = {0};
        int r = report_policy(c, &pr->r, queue, &ie);
        if (r == -ECANCELED)
            return err_set(e, r, "%s", err_msg(&ie));
        if (r < 0 && first == 0)
            first = err_set(ret_err, r, "ClusterPolicy %s status: %s", pr->r.name, err_msg(&ie));
    }
    return first;
}

/*
 * The active, valid policy's plan executed, in the executor's order (operator.h,
 * enum op_write_phase): the driver upgrade pass planned (no write); each node's one patch
 * merged from the deploy labels and the upgrade's wish; the patches that deploy; the operand
 * objects; then (planned again with this execution's failed writes when they changed) the
 * statuses, the NVIDIADrivers' and the ClusterPolicy's with the upgrade's condition; then the
 * bookkeeping: the other node patches, the upgrade's evictions, deletions and pool statuses.
 * The Events are queued for the end of the reconcile. *plan may be replaced.
 */
static int execute_active(struct controller *c, struct op_snapshot *snap, struct op_plan **plan,
                          json_t *queue, bool *ret_requeue, struct err *e)
{
    struct op_write_errors errors = {0}; /* of this execution's writes */
    struct node_writes nw = {0};
    /* the policy (the planned report's object): the snapshot's, alive through a second plan */
    const json_t *cp = (*plan)->active->r.object;
    struct op_adopt_pass adopt = {0};
    int r = op_upgrade_plan(c->upg, cp, snap->owned, (*plan)->driver_nodes, snap->now_ms, e);
    if (r < 0)
        goto out;
    /* The takeover of NVIDIA's operator's objects, around the writes (adopt-ctl.c). */
    struct err ae = {0};
    r = op_adopt_prepare(c, cp, *plan, &adopt, &ae);
    if (r == -ECANCELED) {
        err_set(e, r, "%s", err_msg(&ae));
        goto out;
    }
    if (r < 0)
        log_warn(COMPONENT, "takeover pass failed", "error=\"%s\"", err_msg(&ae));
    merge_nodes(c, *plan, &nw, &errors);
    if ((r = write_node_patches(c, &nw, OP_PHASE_DEPLOY, &errors, e)) < 0)
        goto out;
    if ((r = write_namespace(c, *plan, &errors, e)) < 0)
        goto out;
    if ((r = write_objects(c, *plan, &errors, e)) < 0)
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
    if ((r = report_nvds(c, *plan, queue, e)) < 0)
        goto out;
    /* The GPU remediation: its own writes (a quarantine is not held back behind the status), its
     * condition in the status about to be written, its holds for the driver upgrade's next pass
     * (op_upgrade_set_holds). */
    struct op_report *ar = &(*plan)->active->r;
    r = op_remediation_reconcile(c->rem, ar->object, snap->owned, ar->status, snap->now_ms, e);
    if (r < 0)
        goto out;
    /* The pools' GPU allocation: nodes moved between the device plugin and DRA (alloc-ctl.c). */
    if ((r = op_alloc_reconcile(c, ar->object, snap->now_ms, e)) < 0)
        goto out;
    err_clear(&ae);
    r = op_adopt_finish(c, ar->object, *plan, &adopt, ar->status, &ae);
    if (r == -ECANCELED) {
        err_set(e, r, "%s", err_msg(&ae));
        goto out;
    }
    if (r < 0)
        log_warn(COMPONENT, "takeover pass failed", "error=\"%s\"", err_msg(&ae));
    op_upgrade_condition(c->upg, ar->object, ar->status, snap->now_ms);
    ar->write = !json_equal(kobj_path(ar->object, "status"), ar->status);
    if ((r = report_policy(c, ar, queue, e)) < 0) {
        err_prefix(e, "ClusterPolicy %s status", ar->name);
        goto out;
    }
    if ((r = op_remediation_write_policy(c->rem, ar->object, e)) < 0)
        goto out;
    pthread_mutex_lock(&c->lock);
    c->m.status = (*plan)->health;
    pthread_mutex_unlock(&c->lock);
    *ret_requeue = (*plan)->requeue;
    /* bookkeeping: after the status, never before it */
    struct op_write_errors later = {0}; /* not the status's: the upgrade retries its own */
    r = write_node_patches(c, &nw, OP_PHASE_BOOKKEEPING, &later, e);
    op_write_errors_done(&later);
    if (r < 0 || (r = op_upgrade_bookkeeping(c->upg, e)) < 0)
        goto out;
    if (c->write_errors.n > 0)
        r = err_set(e, -EIO, "%zu write(s) failed, nothing pruned; first: %s: %s",
                    c->write_errors.n, c->write_errors.v[0].object, c->write_errors.v[0].reason);
out:
    op_adopt_pass_done(&adopt);
    /* the upgrade's Events of the nodes patched, whatever failed after their patches: their
     * state changes are written, and a next pass would not plan them again */
    op_upgrade_events(c->upg, cp, queue);
    node_writes_done(&nw);
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
                               .nvidia_drivers = w.nvds,
                               .namespace_obj = w.ns,
                               .configmaps = w.configmaps,
                               .servicemonitor_served = w.servicemonitor_served,
                               .dra_nodes = op_alloc_dra_wanted(c, w.nodes, w.owned)};
    _cleanup_json_ json_t *queue = op_event_queue_new(); /* the reconcile's Events */
    _cleanup_(op_plan_freep) struct op_plan *plan = NULL;
    if ((r = op_plan(&snap, &plan, e)) < 0)
        goto out;
    c->servicemonitor_wait = plan->servicemonitor_missing;
    pthread_mutex_lock(&c->lock);
    c->m.gpu_nodes = plan->gpu_nodes;
    if (plan->has_active && plan->health < 0)
        c->m.status = -1;
    pthread_mutex_unlock(&c->lock);

    struct err ignored_err = {0};
    int ignored_r = report_ignored(c, plan, queue, &ignored_err, e);
    if (ignored_r == -ECANCELED) {
        r = ignored_r;
        goto out;
    }
    if (plan->active && !plan->active->valid) {
        /* Invalid: the running operands stay exactly as they are; the status says why. */
        r = report_policy(c, &plan->active->r, queue, e);
    } else if (plan->active) {
        r = execute_active(c, &snap, &plan, queue, ret_requeue, e);
    }
    if (r == 0 && ignored_r < 0)
        r = err_set(e, ignored_r, "%s", err_msg(&ignored_err));
out:
    if (r != -ECANCELED)
        post_events(c, queue, now_ms_real());
    world_done(&w);
    return r;
}
