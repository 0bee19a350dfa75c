/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuop operator: the I/O shell around the pure core. Informers keep the ClusterPolicies, the
 * nodes and everything gpuop owns in memory; one reconcile thread compares what should exist
 * with what does and writes only the differences (a converged cluster costs no writes); a Lease
 * makes sure only one replica writes.
 */
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "http.h"
#include "kube.h"
#include "op-gpuquota.h"
#include "operator-internal.h"
#include "operator.h"
#include "prom.h"
#include "svc.h"
#include "upgrade-ctl.h"
#include "upgrade.h"
#include "yamlcfg.h"

#define COMPONENT "operator"

/* The one work-queue key: a reconcile covers every ClusterPolicy and what they own. */
#define RECONCILE_KEY "cluster"
#define RETRY_BASE_MS 100  /* failed reconcile: 100 ms doubling ... */
#define RETRY_MAX_MS  3000 /* ... to 3 s */
#define REQUEUE_MS    5000 /* not ready yet: look again */

/* Resources gpuop owns or watches beyond kube.h's list. */
static const struct kube_resource RES_CLUSTERPOLICIES = {"nvidia.com", "v1", "clusterpolicies",
                                                         "ClusterPolicy", false};
static const struct kube_resource RES_NVIDIADRIVERS = {"nvidia.com", "v1alpha1", "nvidiadrivers",
                                                       "NVIDIADriver", false};
static const struct kube_resource RES_CLUSTERROLES = {"rbac.authorization.k8s.io", "v1",
                                                      "clusterroles", "ClusterRole", false};
static const struct kube_resource RES_CLUSTERROLEBINDINGS = {
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false};
static const struct kube_resource RES_ROLES = {"rbac.authorization.k8s.io", "v1", "roles", "Role",
                                               true};
static const struct kube_resource RES_ROLEBINDINGS = {"rbac.authorization.k8s.io", "v1",
                                                      "rolebindings", "RoleBinding", true};

/* The owned kinds, each with an informer on app.kubernetes.io/managed-by=gpuop. */
static const struct kube_resource *const owned_kinds[] = {
    &KUBE_DAEMONSETS,  &KUBE_SERVICEACCOUNTS,    &KUBE_SERVICES,
    &RES_CLUSTERROLES, &RES_CLUSTERROLEBINDINGS, &RES_ROLES,
    &RES_ROLEBINDINGS, &KUBE_RUNTIMECLASSES,     &KUBE_CONFIGMAPS,
};
#define N_OWNED ARRAY_SIZE(owned_kinds)

struct metrics {
    uint64_t reconciliations, failed, writes;
    uint64_t last_success_ms;
    int gpu_nodes;
    int status; /* 1 ready, 0 not ready, -1 failed/invalid */
};

struct controller {
    struct kube_client *kc;
    const char *ns;
    struct op_defaults defaults;
    struct op_templates *templates;
    struct kube_informer *policies, *nodes;
    /* NVIDIADrivers: not waited for at start (a cluster without the CRD runs the ClusterPolicy's
     * single driver); until listed, every NVIDIADriver DaemonSet stays as it is. */
    struct kube_informer *nvds;
    struct kube_informer *owned[N_OWNED];
    struct op_gpuquota gq; /* Pods, ResourceQuotas and the GPU capacity view */

    struct svc_workqueue *queue; /* informer handlers and the leader mark the cluster dirty */
    struct http_server *http;
    struct kube_leader *leader_elector;
    struct op_upgrade *upg; /* the driver upgrade controller (upgrade-ctl.c) */

    pthread_mutex_t lock;
    struct metrics m;
    bool leader;
    bool ready; /* readyz: informers synced, and (when leading) a first reconcile done */
    /* ClusterPolicy name -> [resourceVersion before our status write, the object the server
     * returned]. Until the informer shows a newer version, reconciles read ours: what was
     * reported lives in that status, so a stale cache must not report it again (nor write it
     * again with an old resourceVersion and fail with a conflict). Reconcile thread only. */
    json_t *written;
    json_t *written_nvds; /* the same for NVIDIADrivers */
    /* What the last reconcile failed to write: [{"object", "reason"}], an input of the next plan
     * (the status says so until a write succeeds). Reconcile thread only. */
    json_t *write_errors;
};

/* The component's state: the options, then the controller. */
struct op_process {
    const char *kubeconfig, *ns, *operand_image, *templates_dir, *metrics_listen;
    const char *leader_elect, *lease_name, *identity;
    const char *overcommit_ratio;
    struct svc_strings gpu_pools;
    uint64_t lease_ms, renew_ms, retry_ms, qps;
    unsigned burst;
    bool elect;
    char *id, *default_image;
    struct controller c;
};

static void mark_dirty(struct controller *c)
{
    svc_workqueue_add(c->queue, RECONCILE_KEY);
}

/*
 * Every write goes through this check: a replica that lost the lease stops in the middle of a
 * reconcile, at the next write, instead of finishing it while another replica already leads.
 */
static int check_leader(struct controller *c, struct err *e)
{
    pthread_mutex_lock(&c->lock);
    bool leader = c->leader;
    pthread_mutex_unlock(&c->lock);
    if (!leader)
        return err_set(e, -ECANCELED, "not the leader (lease lost); write skipped");
    return 0;
}

static void count_write(struct controller *c)
{
    pthread_mutex_lock(&c->lock);
    c->m.writes++;
    pthread_mutex_unlock(&c->lock);
}

static int upg_may_write(void *u, struct err *e)
{
    return check_leader(u, e);
}
static void upg_wrote(void *u)
{
    count_write(u);
}
static void upg_dirty(void *u)
{
    mark_dirty(u);
}

static void h_add(json_t *obj, void *u)
{
    (void)obj;
    mark_dirty(u);
}
static void h_update(json_t *old, json_t *obj, void *u)
{
    (void)old;
    (void)obj;
    mark_dirty(u);
}
static void h_delete(json_t *obj, void *u)
{
    (void)obj;
    mark_dirty(u);
}

/* ---- status ------------------------------------------------------------------------------- */

/* Writes a ClusterPolicy's planned status (the plan says when it differs from the stored one). */
static int write_status(struct controller *c, json_t *cp, json_t *status, struct err *e)
{
    int r = check_leader(c, e);
    if (r < 0)
        return r;
    _cleanup_json_ json_t *obj = json_deep_copy(cp);
    json_object_set(obj, "status", status);
    _cleanup_json_ json_t *out = NULL;
    r = kube_update_status(c->kc, &RES_CLUSTERPOLICIES, NULL, obj, &out, e);
    if (r < 0)
        return r;
    count_write(c);
    const char *rv = kobj_resource_version(cp);
    if (rv && json_is_object(out) && kobj_name(cp))
        json_object_set_new(c->written, kobj_name(cp), json_pack("[s,O]", rv, out));
    return 0;
}

static void emit_event(struct controller *c, json_t *cp, const char *type, const char *reason,
                       const char *message)
{
    struct err e = {0};
    if (check_leader(c, &e) < 0)
        return;
    _cleanup_json_ json_t *inv =
        json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "nvidia.com/v1", "kind", "ClusterPolicy",
                  "metadata", "name", kobj_name(cp), "uid", kobj_uid(cp) ?: "");
    struct kube_event ev = {.ns = c->ns,
                            .involved = inv,
                            .type = type,
                            .reason = reason,
                            .message = message,
                            .component = "gpuop-operator"};
    if (kube_event_create(c->kc, &ev, &e) < 0)
        log_warn(COMPONENT, "event not recorded", "reason=%s error=\"%s\"", reason, err_msg(&e));
    else
        count_write(c);
}

/* ---- executing a plan --------------------------------------------------------------------- */

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
    int rc = check_leader(c, e);
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
    count_write(c);
    log_info(COMPONENT, live ? "updated" : "created", "kind=%s name=%s", r->kind, name);
    return 0;
}

static int delete_object(struct controller *c, const json_t *item, struct err *e)
{
    const char *kind = kobj_str(item, "kind");
    const char *name = kobj_str(item, "name");
    const struct kube_resource *r = resource_of_kind(kind);
    if (!r)
        return err_set(e, -EINVAL, "prune of unknown kind \"%s\"", kind);
    if (check_leader(c, e) < 0)
        return -ECANCELED;
    struct kube_delete_opts dopts = {.propagation = KUBE_PROPAGATION_BACKGROUND};
    int rc = kube_delete(c->kc, r, kobj_str(item, "namespace"), name, &dopts, e);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    err_clear(e);
    count_write(c);
    log_info(COMPONENT, "deleted", "kind=%s name=%s", kind, name);
    return 0;
}

static void add_write_error(json_t *errors, const char *object, const struct err *e)
{
    json_array_append_new(errors, json_pack("{s:s,s:s}", "object", object, "reason", err_msg(e)));
}

/* Patches every planned node. One node refusing its labels (a webhook, a conflict) does not hold
 * back the others; each failure goes to `errors`. */
static int label_nodes(struct controller *c, const json_t *patches, json_t *errors, struct err *e)
{
    size_t i;
    json_t *np;
    json_array_foreach (patches, i, np) {
        const char *name = kobj_str(np, "name");
        if (check_leader(c, e) < 0)
            return -ECANCELED;
        _cleanup_json_ json_t *body =
            json_pack("{s:{s:O}}", "metadata", "labels", json_object_get(np, "labels"));
        struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
        _cleanup_json_ json_t *out = NULL;
        struct err ne = {0};
        int r = kube_patch(c->kc, &KUBE_NODES, NULL, name, &po, body, &out, &ne);
        if (r == -ENOENT)
            continue; /* the node went away */
        if (r < 0) {
            _cleanup_free_ char *obj = xasprintf("Node %s", name);
            add_write_error(errors, obj, &ne);
            continue;
        }
        count_write(c);
    }
    return 0;
}

static char *object_ref(const json_t *kind, const json_t *obj_ns, const json_t *name)
{
    const char *ns = json_string_value(obj_ns);
    return xasprintf("%s %s%s%s", json_string_value(kind), ns ? ns : "", ns ? "/" : "",
                     json_string_value(name));
}

static void emit_events(struct controller *c, json_t *entry)
{
    json_t *cp = json_object_get(entry, "policy");
    size_t i;
    json_t *ev;
    json_array_foreach (json_object_get(entry, "events"), i, ev) {
        const char *type = kobj_str(ev, "type");
        const char *reason = kobj_str(ev, "reason");
        const char *msg = kobj_str(ev, "message");
        if (streq_ptr(type, "Warning"))
            log_warn(COMPONENT, "ClusterPolicy event", "policy=%s reason=%s message=\"%s\"",
                     kobj_name(cp), reason, msg);
        emit_event(c, cp, type, reason, msg);
    }
}

/* A policy's planned events, then its status when it changed. */
static int report_policy(struct controller *c, json_t *entry, struct err *e)
{
    emit_events(c, entry);
    if (!json_is_true(json_object_get(entry, "write")))
        return 0;
    return write_status(c, json_object_get(entry, "policy"), json_object_get(entry, "status"), e);
}

/* The active policy's writes: node labels, applies and (when those all succeeded) prunes. Every
 * write is tried; one the API server refuses does not hold back the others, and each failure
 * goes to `errors`. Fails only when the lease is lost (-ECANCELED). */
static int write_objects(struct controller *c, const struct op_plan *plan, json_t *errors,
                         struct err *e)
{
    int r = label_nodes(c, plan->node_patches, errors, e);
    if (r < 0)
        return r;
    size_t i;
    json_t *obj;
    json_array_foreach (plan->apply, i, obj) {
        struct err ae = {0};
        r = apply_object(c, obj, &ae);
        if (r == -ECANCELED)
            return err_set(e, r, "%s", err_msg(&ae));
        if (r < 0) {
            json_t *meta = json_object_get(obj, "metadata");
            _cleanup_free_ char *ref =
                object_ref(json_object_get(obj, "kind"), json_object_get(meta, "namespace"),
                           json_object_get(meta, "name"));
            add_write_error(errors, ref, &ae);
        }
    }
    if (json_array_size(errors) > 0)
        return 0; /* nothing is pruned on a reconcile that failed part way */
    json_array_foreach (plan->prune, i, obj) {
        struct err de = {0};
        r = delete_object(c, obj, &de);
        if (r == -ECANCELED)
            return err_set(e, r, "%s", err_msg(&de));
        if (r < 0) {
            _cleanup_free_ char *ref =
                object_ref(json_object_get(obj, "kind"), json_object_get(obj, "namespace"),
                           json_object_get(obj, "name"));
            add_write_error(errors, ref, &de);
        }
    }
    return 0;
}

static json_t *active_entry(const struct op_plan *plan)
{
    size_t i;
    json_t *entry;
    json_array_foreach (plan->policies, i, entry) {
        if (json_is_true(json_object_get(entry, "active")))
            return entry;
    }
    return NULL;
}

/* ---- one reconcile ------------------------------------------------------------------------ */

/* Replaces cached ClusterPolicies that predate our own status write by what the server returned
 * for it; forgets writes the cache has caught up with. */
static void objects_fresh(json_t *written, json_t *policies)
{
    _cleanup_json_ json_t *keep = json_object();
    size_t i;
    json_t *cp;
    json_array_foreach (policies, i, cp) {
        const char *name = kobj_name(cp);
        json_t *w = name ? json_object_get(written, name) : NULL;
        if (!w)
            continue;
        if (streq_ptr(kobj_resource_version(cp), json_string_value(json_array_get(w, 0)))) {
            /* name is cp's: kept before cp is replaced (and maybe freed: the informer may have
             * dropped its own reference meanwhile) */
            json_object_set(keep, name, w);
            json_array_set(policies, i, json_array_get(w, 1));
        }
    }
    json_object_clear(written);
    json_object_update(written, keep);
}

/* ---- NVIDIADrivers ------------------------------------------------------------------------ */

static void emit_nvd_event(struct controller *c, const json_t *nvd, const json_t *ev)
{
    struct err e = {0};
    if (check_leader(c, &e) < 0)
        return;
    _cleanup_json_ json_t *inv = json_pack(
        "{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "nvidia.com/v1alpha1", "kind", "NVIDIADriver",
        "metadata", "name", kobj_name(nvd) ?: "", "uid", kobj_uid(nvd) ?: "");
    struct kube_event ke = {.ns = "default", /* the namespace of cluster-scoped objects' Events */
                            .involved = inv,
                            .type = kobj_str(ev, "type"),
                            .reason = kobj_str(ev, "reason"),
                            .message = kobj_str(ev, "message"),
                            .component = "gpuop-operator"};
    if (streq_ptr(ke.type, "Warning"))
        log_warn(COMPONENT, "NVIDIADriver event", "nvidiadriver=%s reason=%s message=\"%s\"",
                 kobj_name(nvd), ke.reason, ke.message);
    if (kube_event_create(c->kc, &ke, &e) < 0)
        log_warn(COMPONENT, "event not recorded", "reason=%s error=\"%s\"", ke.reason, err_msg(&e));
    else
        count_write(c);
}

/* Each NVIDIADriver's planned Events, then its status when it changed. A status the server
 * refuses (a conflict with a newer version) is logged; the next reconcile plans it again. */
static int report_nvds(struct controller *c, const struct op_plan *plan, struct err *e)
{
    size_t i;
    json_t *entry;
    json_array_foreach (plan->nvidia_drivers, i, entry) {
        json_t *nvd = json_object_get(entry, "driver");
        size_t k;
        json_t *ev;
        json_array_foreach (json_object_get(entry, "events"), k, ev)
            emit_nvd_event(c, nvd, ev);
        if (!json_is_true(json_object_get(entry, "write")))
            continue;
        int r = check_leader(c, e);
        if (r < 0)
            return r;
        _cleanup_json_ json_t *obj = json_deep_copy(nvd);
        json_object_set(obj, "status", json_object_get(entry, "status"));
        _cleanup_json_ json_t *out = NULL;
        struct err we = {0};
        if (kube_update_status(c->kc, &RES_NVIDIADRIVERS, NULL, obj, &out, &we) < 0) {
            log_warn(COMPONENT, "NVIDIADriver status not written", "nvidiadriver=%s error=\"%s\"",
                     kobj_name(nvd), err_msg(&we));
            continue;
        }
        count_write(c);
        const char *rv = kobj_resource_version(nvd);
        if (rv && json_is_object(out) && kobj_name(nvd))
            json_object_set_new(c->written_nvds, kobj_name(nvd), json_pack("[s,O]", rv, out));
    }
    return 0;
}

static int reconcile(struct controller *c, bool *ret_requeue, struct err *e)
{
    *ret_requeue = false;
    _cleanup_json_ json_t *policies = kube_informer_list(c->policies, NULL, NULL, NULL);
    _cleanup_json_ json_t *nodes = kube_informer_list(c->nodes, NULL, NULL, NULL);
    _cleanup_json_ json_t *owned = json_array();
    for (size_t k = 0; k < N_OWNED; k++) {
        /* The informers give every object its kind, which the plan matches objects by. */
        _cleanup_json_ json_t *list = kube_informer_list(c->owned[k], NULL, NULL, NULL);
        json_array_extend(owned, list);
    }
    objects_fresh(c->written, policies);
    /* not listed yet (or no CRD): NULL, and the plan keeps every NVIDIADriver DaemonSet */
    _cleanup_json_ json_t *nvds =
        kube_informer_synced(c->nvds) ? kube_informer_list(c->nvds, NULL, NULL, NULL) : NULL;
    if (nvds)
        objects_fresh(c->written_nvds, nvds);
    _cleanup_json_ json_t *findings = op_gpuquota_observe(&c->gq, nodes, e);
    if (!findings)
        return err_prefix(e, "GPU capacity view");
    struct op_snapshot snap = {.policies = policies,
                               .nodes = nodes,
                               .owned = owned,
                               .apply_errors = c->write_errors,
                               .defaults = &c->defaults,
                               .templates = c->templates,
                               .now_ms = now_ms_real(),
                               .findings = findings,
                               .nvidia_drivers = nvds};
    _cleanup_(op_plan_freep) struct op_plan *plan = NULL;
    _cleanup_json_ json_t *errors = json_array(); /* of this execution's writes */
    int r = op_plan(&snap, &plan, e);
    if (r < 0)
        return r;
    pthread_mutex_lock(&c->lock);
    c->m.gpu_nodes = plan->gpu_nodes;
    if (plan->has_active && plan->health < 0)
        c->m.status = -1;
    pthread_mutex_unlock(&c->lock);

    /* Ignored policies first; a failed status write there must not hold back the active one. */
    int ignored_r = 0;
    struct err ignored_err = {0};
    json_t *active = active_entry(plan);
    size_t i;
    json_t *entry;
    json_array_foreach (plan->policies, i, entry) {
        if (entry == active)
            continue;
        struct err ie = {0};
        int ir = report_policy(c, entry, &ie);
        if (ir == -ECANCELED)
            return err_set(e, ir, "%s", err_msg(&ie));
        if (ir < 0 && ignored_r == 0) {
            ignored_r = ir;
            err_set(&ignored_err, ir, "ClusterPolicy %s status: %s", kobj_str(entry, "name"),
                    err_msg(&ie));
        }
    }
    if (!active)
        goto out;
    if (!json_is_true(json_object_get(active, "valid"))) {
        /* Invalid: the running operands stay exactly as they are; the status says why. */
        r = report_policy(c, active, e);
        if (r < 0)
            return r;
        goto out;
    }

    r = write_objects(c, plan, errors, e);
    if (r < 0)
        return r;
    /* The status tells what this execution could not write, or that it recovered: planned again
     * with these results when they differ from those the plan was made with. */
    if (!json_equal(errors, c->write_errors)) {
        json_decref(c->write_errors);
        c->write_errors = json_incref(errors);
        snap.apply_errors = errors;
        op_plan_free(steal_ptr(&plan));
        r = op_plan(&snap, &plan, e);
        if (r < 0)
            return r;
        active = active_entry(plan);
        if (!active)
            return err_set(e, -EIO, "no active ClusterPolicy on the second plan");
    }
    r = report_nvds(c, plan, e);
    if (r < 0)
        return r;
    /* The driver upgrade: its own writes, and its condition in the status about to be written. */
    json_t *cp = json_object_get(active, "policy");
    r = op_upgrade_reconcile(c->upg, cp, owned, json_object_get(active, "status"), snap.now_ms, e);
    if (r < 0)
        return r;
    json_object_set_new(
        active, "write",
        json_boolean(!json_equal(kobj_path(cp, "status"), json_object_get(active, "status"))));
    r = report_policy(c, active, e);
    if (r < 0)
        return err_prefix(e, "ClusterPolicy %s status", kobj_str(active, "name"));
    pthread_mutex_lock(&c->lock);
    c->m.status = plan->health;
    pthread_mutex_unlock(&c->lock);
    *ret_requeue = plan->requeue;
    if (json_array_size(errors) > 0) {
        json_t *first = json_array_get(errors, 0);
        return err_set(e, -EIO, "%zu write(s) failed, nothing pruned; first: %s: %s",
                       json_array_size(errors), kobj_str(first, "object"),
                       kobj_str(first, "reason"));
    }
out:
    if (ignored_r < 0)
        return err_set(e, ignored_r, "%s", err_msg(&ignored_err));
    return 0;
}

/* ---- metrics and health ------------------------------------------------------------------- */

static int h_metrics(const struct http_request *req, struct http_response *resp, void *u)
{
    struct controller *c = u;
    pthread_mutex_lock(&c->lock);
    struct metrics m = c->m;
    bool leader = c->leader;
    pthread_mutex_unlock(&c->lock);
    enum prom_format f = prom_negotiate(req->accept);
    struct sbuf b;
    sbuf_init(&b, 8u << 20); /* the GPU quota families grow with pools and namespaces */
    struct prom_writer w;
    prom_writer_init(&w, &b, f);
    prom_metric_u64(&w, "gpu_operator_reconciliation_total", PROM_COUNTER, "Reconciliations run",
                    m.reconciliations);
    prom_metric_u64(&w, "gpu_operator_reconciliation_failed_total", PROM_COUNTER,
                    "Reconciliations that failed", m.failed);
    prom_metric(&w, "gpu_operator_reconciliation_last_success_ts_seconds", PROM_GAUGE,
                "Time of the last successful reconciliation", (double)m.last_success_ms / 1000.0);
    prom_metric(&w, "gpu_operator_reconciliation_status", PROM_GAUGE,
                "1 ready, 0 not ready, -1 failed or invalid policy", m.status);
    prom_metric(&w, "gpu_operator_gpu_nodes_total", PROM_GAUGE, "GPU nodes seen", m.gpu_nodes);
    prom_metric_u64(&w, "gpuop_operator_api_writes_total", PROM_COUNTER,
                    "Write calls made to the API server", m.writes);
    prom_metric(&w, "gpuop_operator_leader", PROM_GAUGE, "1 when this replica leads",
                leader ? 1 : 0);
    op_gpuquota_write_metrics(&c->gq, &w);
    op_upgrade_metrics(c->upg, &w);
    int r = prom_writer_finish(&w);
    if (r < 0) {
        sbuf_free(&b);
        return r; /* a truncated page is no page */
    }
    size_t len = b.len;
    http_response_take(resp, 200, prom_content_type(f), sbuf_steal(&b), len);
    return 0;
}

static int h_healthz(const struct http_request *req, struct http_response *resp, void *u)
{
    (void)req;
    (void)u;
    http_response_static(resp, 200, HTTP_CT_TEXT, "ok\n");
    return 0;
}

static int h_readyz(const struct http_request *req, struct http_response *resp, void *u)
{
    (void)req;
    struct controller *c = u;
    pthread_mutex_lock(&c->lock);
    bool ready = c->ready;
    pthread_mutex_unlock(&c->lock);
    http_response_static(resp, ready ? 200 : 503, HTTP_CT_TEXT, ready ? "ok\n" : "not ready\n");
    return 0;
}

/* ---- leader election ---------------------------------------------------------------------- */

static void on_started(void *u)
{
    struct controller *c = u;
    log_info(COMPONENT, "became leader", NULL);
    pthread_mutex_lock(&c->lock);
    c->leader = true;
    pthread_mutex_unlock(&c->lock);
    mark_dirty(c);
}

static void on_stopped(void *u)
{
    struct controller *c = u;
    log_warn(COMPONENT, "lost leadership; stopping writes", NULL);
    pthread_mutex_lock(&c->lock);
    c->leader = false;
    pthread_mutex_unlock(&c->lock);
}

static void on_new_leader(const char *identity, void *u)
{
    (void)u;
    log_info(COMPONENT, "leader", "identity=%s", identity ? identity : "");
}

/* ---- main --------------------------------------------------------------------------------- */

static void *informer_free_thread(void *inf)
{
    kube_informer_free(inf);
    return NULL;
}

/* Each informer takes up to a watch poll interval to stop; stopping them one after another made
 * shutdown take ~10 s. Stop them all at once. */
#define N_INFORMERS (5 + N_OWNED) /* policies, nodes, owned, pods, quotas, nvidiadrivers */
static void informers_free(struct kube_informer **infs, size_t n)
{
    pthread_t th[N_INFORMERS];
    bool started[N_INFORMERS];
    if (n > N_INFORMERS)
        n = N_INFORMERS;
    for (size_t k = 0; k < n; k++) {
        started[k] = infs[k] && pthread_create(&th[k], NULL, informer_free_thread, infs[k]) == 0;
        if (!started[k])
            kube_informer_free(infs[k]);
    }
    for (size_t k = 0; k < n; k++)
        if (started[k])
            pthread_join(th[k], NULL);
}

/* `gpuop operator render`: the objects a ClusterPolicy turns into, without a cluster. */
static int render_main(int argc, char **argv)
{
    const char *policy = NULL, *os_tag = NULL, *ns = "gpu-operator", *templates_dir = NULL;
    const char *image = NULL;
    static const struct option opts[] = {
        {"policy", required_argument, NULL, 'p'},
        {"os-tag", required_argument, NULL, 'o'},
        {"namespace", required_argument, NULL, 'n'},
        {"operand-image", required_argument, NULL, 'i'},
        {"operand-templates", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 'p':
            policy = optarg;
            break;
        case 'o':
            os_tag = optarg;
            break;
        case 'n':
            ns = optarg;
            break;
        case 'i':
            image = optarg;
            break;
        case 't':
            templates_dir = optarg;
            break;
        case 'h':
            printf("Usage: gpuop operator render --policy FILE [--os-tag ubuntu22.04]\n"
                   "       [--namespace NS] [--operand-image IMAGE] [--operand-templates DIR]\n\n"
                   "Prints, as a JSON list, every object the ClusterPolicy in FILE (YAML or JSON)\n"
                   "turns into, exactly as the operator would create them.\n");
            return 0;
        default:
            return 2;
        }
    }
    if (!policy) {
        fprintf(stderr, "gpuop operator render: --policy FILE is required\n");
        return 2;
    }
    struct err e = {0};
    _cleanup_json_ json_t *cp = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_json_ json_t *objs = NULL;
    _cleanup_free_ char *default_image = xasprintf("gpuop:%s", GPUOP_VERSION);
    struct op_defaults d = {ns, image ? image : default_image};
    struct op_render_ctx ctx = {.os_tag = os_tag};
    if (yaml_load_file(policy, &cp, &e) < 0 || op_templates_builtin(&t, &e) < 0 ||
        (templates_dir && op_templates_load_dir(t, templates_dir, &e) < 0) ||
        op_policy_parse(cp, &d, &p, &e) < 0 || op_render(p, t, &ctx, &objs, &e) < 0) {
        fprintf(stderr, "gpuop operator render: %s\n", err_msg(&e));
        return 1;
    }
    if (json_dumpf(objs, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) < 0)
        return 1;
    printf("\n");
    if (json_array_size(p->unimplemented) > 0) {
        _cleanup_free_ char *u = json_dumps(p->unimplemented, JSON_COMPACT);
        fprintf(stderr, "accepted, not acted on by gpuop: %s\n", u);
    }
    return 0;
}

/* ---- options ------------------------------------------------------------------------------ */

static int check_bool(const void *dst, const char *source, struct err *e)
{
    bool b;
    if (parse_bool(*(const char *const *)dst, &b) < 0)
        return err_set(e, -EINVAL, "%s: not a boolean", source);
    return 0;
}

#define X(m) offsetof(struct op_process, m)
static const struct svc_option operator_options[] = {
    {.flag = "kubeconfig",
     .env = "KUBECONFIG",
     .kind = SVC_STRING,
     .off = X(kubeconfig),
     .metavar = "FILE",
     .help = "kubeconfig; default: in-cluster config"},
    {.flag = "namespace",
     .env = "OPERATOR_NAMESPACE",
     .kind = SVC_STRING,
     .off = X(ns),
     .metavar = "NS",
     .help = "namespace of the operands (default gpu-operator)"},
    {.flag = "operand-image",
     .env = "OPERAND_IMAGE",
     .kind = SVC_STRING,
     .off = X(operand_image),
     .metavar = "IMAGE",
     .help = "image of every gpuop component (default gpuop:" GPUOP_VERSION ")"},
    {.flag = "operand-templates",
     .kind = SVC_STRING,
     .off = X(templates_dir),
     .metavar = "DIR",
     .help = "override the compiled-in deploy/operands templates"},
    {.flag = "metrics-listen",
     .kind = SVC_STRING,
     .off = X(metrics_listen),
     .metavar = "ADDR",
     .help = "/metrics, /healthz, /readyz (default :8080; \"\" off)"},
    {.flag = "leader-elect",
     .kind = SVC_STRING,
     .off = X(leader_elect),
     .metavar = "BOOL",
     .check = check_bool,
     .help = "Lease-based leader election (default true)"},
    {.flag = "leader-election-id",
     .kind = SVC_STRING,
     .off = X(lease_name),
     .metavar = "NAME",
     .help = "the Lease's name (default gpuop-operator)"},
    {.flag = "identity",
     .env = "POD_NAME",
     .kind = SVC_STRING,
     .off = X(identity),
     .metavar = "ID",
     .help = "this replica's identity (default: the host name)"},
    {.flag = "leader-lease-duration",
     .kind = SVC_DURATION,
     .min = 1,
     .finite = true,
     .off = X(lease_ms),
     .metavar = "D",
     .expect = "expected a positive duration",
     .help = "how long others wait after the last renewal (default 15s)"},
    {.flag = "leader-renew-deadline",
     .kind = SVC_DURATION,
     .min = 1,
     .finite = true,
     .off = X(renew_ms),
     .metavar = "D",
     .expect = "expected a positive duration",
     .help = "the leader stops writing when it could not renew for this\n"
             "long (default 10s; less than the lease duration)"},
    {.flag = "leader-retry-period",
     .kind = SVC_DURATION,
     .min = 1,
     .finite = true,
     .off = X(retry_ms),
     .metavar = "D",
     .expect = "expected a positive duration",
     .help = "period of lease attempts (default 2s)"},
    {.flag = "kube-qps",
     .kind = SVC_U64,
     .min = 1,
     .max = 100000,
     .off = X(qps),
     .metavar = "N",
     .expect = "expected a positive number",
     .help = "client-side rate limit (default 50)"},
    {.flag = "gpu-pool",
     .kind = SVC_STRINGS,
     .off = X(gpu_pools),
     .metavar = "NAME:K=V[,K=V]",
     .help = "a GPU pool of the capacity-and-quota view: the nodes with\n"
             "these labels (repeatable; default: one pool per\n"
             "nvidia.com/gpu.product)"},
    {.flag = "gpu-quota-overcommit-ratio",
     .env = "GPUOP_GPU_QUOTA_OVERCOMMIT_RATIO",
     .kind = SVC_STRING,
     .off = X(overcommit_ratio),
     .metavar = "R",
     .help = "report when namespace GPU quotas pass R times the GPUs\n"
             "advertised (default 1.0)"},
    {.flag = "kube-burst",
     .kind = SVC_UINT,
     .min = 1,
     .off = X(burst),
     .metavar = "N",
     .expect = "expected a positive number",
     .help = "client-side burst (default 100)"},
    {0},
};
#undef X

static void operator_defaults(void *state)
{
    struct op_process *o = state;
    o->ns = "gpu-operator";
    o->metrics_listen = ":8080";
    o->leader_elect = "true";
    o->lease_name = "gpuop-operator";
    o->lease_ms = 15000;
    o->renew_ms = 10000;
    o->retry_ms = 2000;
    o->qps = 50;
    o->burst = 100;
    o->c.written = json_object();
    o->c.written_nvds = json_object();
    o->c.write_errors = json_array();
    pthread_mutex_init(&o->c.lock, NULL);
}

static int operator_configure(struct svc *s, struct err *e)
{
    struct op_process *o = svc_state(s);
    bool elect = true;
    parse_bool(o->leader_elect, &elect); /* checked with the option */
    o->elect = elect;
    if (!(o->retry_ms < o->renew_ms && o->renew_ms < o->lease_ms))
        return err_set(e, -EINVAL,
                       "leader election needs --leader-retry-period < --leader-renew-deadline < "
                       "--leader-lease-duration (%llu/%llu/%llu ms)",
                       (unsigned long long)o->retry_ms, (unsigned long long)o->renew_ms,
                       (unsigned long long)o->lease_ms);
    char host[256] = "gpuop-operator";
    gethostname(host, sizeof(host) - 1);
    o->id = xstrdup(o->identity ? o->identity : host);
    o->default_image = xasprintf("gpuop:%s", GPUOP_VERSION);
    o->c.ns = o->ns;
    o->c.defaults.namespace = o->ns;
    o->c.defaults.operand_image = o->operand_image ? o->operand_image : o->default_image;
    return op_gpuquota_configure(&o->c.gq, o->gpu_pools.v, o->gpu_pools.n, o->overcommit_ratio, e);
}

static void operator_cleanup(void *state)
{
    struct op_process *o = state;
    struct controller *c = &o->c;
    kube_leader_free(c->leader_elector); /* first: the Lease is released before anything else */
    http_server_free(c->http);
    op_upgrade_free(c->upg);
    struct kube_informer *infs[N_INFORMERS] = {c->nodes, c->policies};
    for (size_t k = 0; k < N_OWNED; k++)
        infs[2 + k] = c->owned[k];
    infs[2 + N_OWNED] = c->gq.pods;
    infs[3 + N_OWNED] = c->gq.quotas;
    infs[4 + N_OWNED] = c->nvds;
    informers_free(infs, ARRAY_SIZE(infs));
    op_gpuquota_clear(&c->gq);
    svc_workqueue_free(c->queue);
    op_templates_free(c->templates);
    json_decref(c->written);
    json_decref(c->written_nvds);
    json_decref(c->write_errors);
    kube_client_free(c->kc);
    pthread_mutex_destroy(&c->lock);
    free(o->id);
    free(o->default_image);
}

/* ---- run ---------------------------------------------------------------------------------- */

/* What the node informer keeps of a node: its labels, the node agents' annotations and what the
 * GPU capacity view reads (allocatable, capacity, cordon, Ready), so a
 * heartbeat changes nothing kept (no reconcile) and an agent's finding does (a reconcile). */
static json_t *project_node(json_t *obj, void *userdata)
{
    (void)userdata;
    static const char *const node_fields[] = {"metadata.labels", NULL};
    json_t *p = kube_project_fields(obj, node_fields);
    const char *k;
    json_t *v;
    json_object_foreach (kobj_annotations(obj), k, v) {
        if (op_node_annotation_watched(k))
            json_object_set(
                kobj_ensure_keys(p, (const char *const[]){"metadata", "annotations", NULL}), k, v);
    }
    op_gpuquota_project_node(obj, p);
    upg_project_node(obj, p); /* the upgrade controller reads this informer too */
    return p;
}

static int start_informers(struct controller *c, struct err *e)
{
    struct kube_informer_handlers hh = {h_add, h_update, h_delete, c};
    struct kube_informer_opts po = {.handlers = hh};
    /* nothing queries nodes by label: no label index (about 2.5 KiB per node at NFD's labels) */
    static const char *const no_index[] = {NULL};
    struct kube_informer_opts no = {
        .project = project_node, .index_label_keys = no_index, .handlers = hh};
    int r;
    if ((r = kube_informer_new(c->kc, &RES_CLUSTERPOLICIES, &po, &c->policies, e)) < 0 ||
        (r = kube_informer_new(c->kc, &KUBE_NODES, &no, &c->nodes, e)) < 0 ||
        (r = kube_informer_new(c->kc, &RES_NVIDIADRIVERS, &po, &c->nvds, e)) < 0)
        return r;
    for (size_t k = 0; k < N_OWNED; k++) {
        struct kube_informer_opts oo = {.ns = owned_kinds[k]->namespaced ? c->ns : NULL,
                                        .label_selector =
                                            "app.kubernetes.io/managed-by=" OP_MANAGED_BY,
                                        .handlers = hh};
        if ((r = kube_informer_new(c->kc, owned_kinds[k], &oo, &c->owned[k], e)) < 0)
            return r;
    }
    if ((r = op_gpuquota_start(&c->gq, c->kc, &hh, e)) < 0)
        return r;
    struct op_upgrade_hooks uh = {upg_may_write, upg_wrote, upg_dirty, c};
    return op_upgrade_new(c->kc, c->ns, c->nodes, &uh, &c->upg, e);
}

static int start_metrics(struct controller *c, const char *listen, struct err *e)
{
    if (!listen || !*listen)
        return 0;
    struct http_route routes[] = {
        {"/metrics", h_metrics, c},
        {"/healthz", h_healthz, c},
        {"/readyz", h_readyz, c},
    };
    struct http_config hc = {.listen = listen, .routes = routes, .n_routes = ARRAY_SIZE(routes)};
    return http_server_new(&hc, &c->http, e);
}

/* 0 once every informer listed, 1 when stopped first, -ETIMEDOUT after 60 s. */
static int wait_synced(struct controller *c, struct svc *s, struct err *e)
{
    uint64_t deadline = deadline_after(60000);
    struct kube_informer *all[N_INFORMERS - 1] = {c->policies, c->nodes}; /* not nvds */
    for (size_t k = 0; k < N_OWNED; k++)
        all[2 + k] = c->owned[k];
    all[2 + N_OWNED] = c->gq.pods;
    all[3 + N_OWNED] = c->gq.quotas;
    for (size_t k = 0; k < ARRAY_SIZE(all); k++) {
        /* Short waits: the stop is looked at between them. */
        while (kube_informer_wait_synced(all[k], 100) < 0) {
            if (svc_stopped(s))
                return 1;
            if (deadline_left_ms(deadline) == 0)
                return err_set(e, -ETIMEDOUT, "informers did not sync within 60 s");
        }
    }
    return 0;
}

static int start_leader(struct op_process *o, struct err *e)
{
    struct controller *c = &o->c;
    if (!o->elect) {
        c->leader = true;
        return 0;
    }
    struct kube_leader_opts lo = {.ns = c->ns,
                                  .name = o->lease_name,
                                  .identity = o->id,
                                  .lease_ms = o->lease_ms,
                                  .renew_ms = o->renew_ms,
                                  .retry_ms = o->retry_ms,
                                  .on_started = on_started,
                                  .on_stopped = on_stopped,
                                  .on_new_leader = on_new_leader,
                                  .userdata = c};
    return kube_leader_new(c->kc, &lo, &c->leader_elector, e);
}

/* One pass of the work queue's key: reconcile, then requeue as the result says. */
static void reconcile_key(struct controller *c, struct svc *s, const char *key)
{
    pthread_mutex_lock(&c->lock);
    bool leader = c->leader;
    pthread_mutex_unlock(&c->lock);
    if (!leader)
        return; /* becoming the leader queues it again */
    bool requeue = false;
    struct err re = {0};
    uint64_t t0 = now_ms_mono();
    int r = reconcile(c, &requeue, &re);
    if (svc_stopped(s))
        return;
    if (r == -ECANCELED) {
        /* Lost the lease mid-way: stop here; the new leader (or this one, when it leads
         * again) reconciles from the cluster's state. */
        log_warn(COMPONENT, "reconcile stopped", "error=\"%s\"", err_msg(&re));
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->m.reconciliations++;
    if (r < 0) {
        c->m.failed++;
        c->m.status = -1;
    } else {
        c->m.last_success_ms = now_ms_real();
    }
    pthread_mutex_unlock(&c->lock);
    if (r < 0) {
        /* Rate-limited retry: 100 ms doubling to 3 s. */
        log_error(COMPONENT, "reconcile failed", "error=\"%s\" retry_ms=%llu", err_msg(&re),
                  (unsigned long long)svc_backoff_ms(RETRY_BASE_MS, RETRY_MAX_MS,
                                                     svc_workqueue_failures(c->queue, key)));
        svc_workqueue_add_rate_limited(c->queue, key);
        return;
    }
    svc_workqueue_forget(c->queue, key);
    log_debug(COMPONENT, "reconciled", "ms=%llu requeue=%d",
              (unsigned long long)(now_ms_mono() - t0), requeue);
    /* Not ready yet: look again in 5 s even without events, as NVIDIA's operator does.
     * DaemonSet status changes arrive as events before that anyway. */
    if (requeue)
        svc_workqueue_add_after(c->queue, key, REQUEUE_MS);
    uint64_t upg_ms = op_upgrade_requeue_ms(c->upg); /* a timeout, a soak, a window */
    if (upg_ms)
        svc_workqueue_add_after(c->queue, key, upg_ms);
}

static int operator_run(struct svc *s, struct err *e)
{
    /* One malloc arena: the operator's threads (an informer per resource, the reconcile loop)
     * are I/O bound, and an arena per thread kept the peak of each one's list parsing
     * (bench/operator at 2,000 nodes: 83 MiB RSS with one arena per thread, 67 MiB with one). */
    mallopt(M_ARENA_MAX, 1);
    struct op_process *o = svc_state(s);
    struct controller *c = &o->c;
    struct kube_options ko = {
        .kubeconfig = o->kubeconfig, .qps = (double)o->qps, .burst = o->burst, .stop = svc_stop(s)};
    struct svc_workqueue_config qc = {.base_delay_ms = RETRY_BASE_MS, .max_delay_ms = RETRY_MAX_MS};
    int r;
    if ((r = kube_client_new(&ko, &c->kc, e)) < 0 ||
        (r = svc_workqueue_new(&qc, svc_stop(s), &c->queue, e)) < 0 ||
        (r = op_templates_builtin(&c->templates, e)) < 0 ||
        (o->templates_dir && (r = op_templates_load_dir(c->templates, o->templates_dir, e)) < 0) ||
        (r = start_informers(c, e)) < 0 || (r = start_metrics(c, o->metrics_listen, e)) < 0 ||
        (r = wait_synced(c, s, e)) != 0)
        return r < 0 ? r : 0;
    log_info(COMPONENT, "caches synced", "namespace=%s identity=%s", c->ns, o->id);
    if ((r = start_leader(o, e)) < 0)
        return r;
    pthread_mutex_lock(&c->lock);
    c->ready = true; /* synced; a passive replica is ready to take over */
    pthread_mutex_unlock(&c->lock);
    mark_dirty(c);
    for (;;) {
        _cleanup_free_ char *key = NULL;
        if (svc_workqueue_get(c->queue, DEADLINE_NEVER, &key) < 0)
            break; /* -ECANCELED: stopped */
        reconcile_key(c, s, key);
        svc_workqueue_done(c->queue, key);
    }
    log_info(COMPONENT, "stopping", NULL);
    return 0;
}

static const struct svc_component operator_component = {
    .name = COMPONENT,
    .usage = "Usage: gpuop operator [flags]\n\n"
             "The control plane: reconciles the ClusterPolicy (nvidia.com/v1) into the GPU stack "
             "on\n"
             "every GPU node (node labels, operand DaemonSets, RBAC, RuntimeClass, status).\n"
             "`gpuop operator render --help`: the objects a ClusterPolicy turns into.\n",
    .flags_title = "Flags (environment variable in brackets; a flag wins over its variable):",
    .options = {operator_options},
    .epilogue = "Signals: SIGTERM, SIGINT and SIGQUIT exit 0 within 2 s whatever the API server "
                "does\n"
                "(the leader releases its Lease when the API server answers within 1 s); SIGHUP "
                "is\n"
                "logged and ignored.\n",
    .state_size = sizeof(struct op_process),
    .defaults = operator_defaults,
    .configure = operator_configure,
    .run = operator_run,
    .cleanup = operator_cleanup,
};

int operator_main(int argc, char **argv);
int operator_main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "render") == 0)
        return render_main(argc - 1, argv + 1);
    return svc_main(&operator_component, argc, argv);
}
