/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuop operator: the I/O shell around the pure core. Informers keep the ClusterPolicies, the
 * nodes and everything gpuop owns in memory; one reconcile thread compares what should exist
 * with what does and writes only the differences (a converged cluster costs no writes); a Lease
 * makes sure only one replica writes.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "kube.h"
#include "operator-internal.h"
#include "operator.h"
#include "yamlcfg.h"

#define COMPONENT "operator"

/* Resources gpuop owns or watches beyond kube.h's list. */
static const struct kube_resource RES_CLUSTERPOLICIES = {"nvidia.com", "v1", "clusterpolicies",
                                                         "ClusterPolicy", false};
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
    &RES_ROLEBINDINGS, &KUBE_RUNTIMECLASSES,
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
    struct kube_informer *owned[N_OWNED];

    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool dirty;
    bool stopping;
    volatile int stop_flag;

    struct metrics m;
    bool leader;
    bool ready; /* readyz: informers synced, and (when leading) a first reconcile done */
    /* ClusterPolicy name -> [resourceVersion before our status write, the object the server
     * returned]. Until the informer shows a newer version, reconciles read ours: what was
     * reported lives in that status, so a stale cache must not report it again (nor write it
     * again with an old resourceVersion and fail with a conflict). Reconcile thread only. */
    json_t *written;
    /* What the last reconcile failed to write: [{"object", "reason"}], an input of the next plan
     * (the status says so until a write succeeds). Reconcile thread only. */
    json_t *write_errors;
};

static volatile sig_atomic_t g_signal;

static void on_signal(int sig)
{
    g_signal = sig;
}

static void mark_dirty(struct controller *c)
{
    pthread_mutex_lock(&c->lock);
    c->dirty = true;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
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
    const char *rv = op_json_str(cp, "metadata", "resourceVersion");
    if (rv && json_is_object(out) && op_obj_name(cp))
        json_object_set_new(c->written, op_obj_name(cp), json_pack("[s,O]", rv, out));
    return 0;
}

static void emit_event(struct controller *c, json_t *cp, const char *type, const char *reason,
                       const char *message)
{
    struct err e = {0};
    if (check_leader(c, &e) < 0)
        return;
    _cleanup_json_ json_t *inv = json_pack(
        "{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "nvidia.com/v1", "kind", "ClusterPolicy", "metadata",
        "name", op_obj_name(cp), "uid", op_json_str(cp, "metadata", "uid") ?: "");
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
    const struct kube_resource *r = resource_of_kind(op_json_str(desired, "kind", NULL));
    if (!r)
        return err_set(e, -EINVAL, "rendered object of unknown kind \"%s\"",
                       op_json_str(desired, "kind", NULL));
    const char *ns = r->namespaced ? op_json_str(desired, "metadata", "namespace") : NULL;
    const char *name = op_obj_name(desired);
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
        json_object_set(meta, "resourceVersion",
                        json_object_get(json_object_get(live, "metadata"), "resourceVersion"));
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
    const char *kind = json_string_value(json_object_get(item, "kind"));
    const char *name = json_string_value(json_object_get(item, "name"));
    const struct kube_resource *r = resource_of_kind(kind);
    if (!r)
        return err_set(e, -EINVAL, "prune of unknown kind \"%s\"", kind);
    if (check_leader(c, e) < 0)
        return -ECANCELED;
    struct kube_delete_opts dopts = {.propagation = KUBE_PROPAGATION_BACKGROUND};
    int rc = kube_delete(c->kc, r, json_string_value(json_object_get(item, "namespace")), name,
                         &dopts, e);
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
        const char *name = json_string_value(json_object_get(np, "name"));
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
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *reason = json_string_value(json_object_get(ev, "reason"));
        const char *msg = json_string_value(json_object_get(ev, "message"));
        if (streq_ptr(type, "Warning"))
            log_warn(COMPONENT, "ClusterPolicy event", "policy=%s reason=%s message=\"%s\"",
                     op_obj_name(cp), reason, msg);
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
static void policies_fresh(struct controller *c, json_t *policies)
{
    _cleanup_json_ json_t *keep = json_object();
    size_t i;
    json_t *cp;
    json_array_foreach (policies, i, cp) {
        const char *name = op_obj_name(cp);
        json_t *w = name ? json_object_get(c->written, name) : NULL;
        if (!w)
            continue;
        if (streq_ptr(op_json_str(cp, "metadata", "resourceVersion"),
                      json_string_value(json_array_get(w, 0)))) {
            json_array_set(policies, i, json_array_get(w, 1));
            json_object_set(keep, name, w);
        }
    }
    json_object_clear(c->written);
    json_object_update(c->written, keep);
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
    policies_fresh(c, policies);
    struct op_snapshot snap = {.policies = policies,
                               .nodes = nodes,
                               .owned = owned,
                               .apply_errors = c->write_errors,
                               .defaults = &c->defaults,
                               .templates = c->templates,
                               .now_ms = now_ms_real()};
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
            err_set(&ignored_err, ir, "ClusterPolicy %s status: %s",
                    json_string_value(json_object_get(entry, "name")), err_msg(&ie));
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
    r = report_policy(c, active, e);
    if (r < 0)
        return err_prefix(e, "ClusterPolicy %s status",
                          json_string_value(json_object_get(active, "name")));
    pthread_mutex_lock(&c->lock);
    c->m.status = plan->health;
    pthread_mutex_unlock(&c->lock);
    *ret_requeue = plan->requeue;
    if (json_array_size(errors) > 0) {
        json_t *first = json_array_get(errors, 0);
        return err_set(e, -EIO, "%zu write(s) failed, nothing pruned; first: %s: %s",
                       json_array_size(errors), json_string_value(json_object_get(first, "object")),
                       json_string_value(json_object_get(first, "reason")));
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
    enum prom_format f = prom_negotiate(req->accept);
    struct sbuf b;
    sbuf_init(&b, 1u << 20);
    pthread_mutex_lock(&c->lock);
    struct metrics m = c->m;
    bool leader = c->leader;
    pthread_mutex_unlock(&c->lock);
    prom_write_family(&b, f, "gpu_operator_reconciliation_total", PROM_COUNTER,
                      "Reconciliations run");
    sbuf_printf(&b, "gpu_operator_reconciliation_total %llu\n",
                (unsigned long long)m.reconciliations);
    prom_write_family(&b, f, "gpu_operator_reconciliation_failed_total", PROM_COUNTER,
                      "Reconciliations that failed");
    sbuf_printf(&b, "gpu_operator_reconciliation_failed_total %llu\n",
                (unsigned long long)m.failed);
    prom_write_family(&b, f, "gpu_operator_reconciliation_last_success_ts_seconds", PROM_GAUGE,
                      "Time of the last successful reconciliation");
    sbuf_printf(&b, "gpu_operator_reconciliation_last_success_ts_seconds %.3f\n",
                (double)m.last_success_ms / 1000.0);
    prom_write_family(&b, f, "gpu_operator_reconciliation_status", PROM_GAUGE,
                      "1 ready, 0 not ready, -1 failed or invalid policy");
    sbuf_printf(&b, "gpu_operator_reconciliation_status %d\n", m.status);
    prom_write_family(&b, f, "gpu_operator_gpu_nodes_total", PROM_GAUGE, "GPU nodes seen");
    sbuf_printf(&b, "gpu_operator_gpu_nodes_total %d\n", m.gpu_nodes);
    prom_write_family(&b, f, "gpuop_operator_api_writes_total", PROM_COUNTER,
                      "Write calls made to the API server");
    sbuf_printf(&b, "gpuop_operator_api_writes_total %llu\n", (unsigned long long)m.writes);
    prom_write_family(&b, f, "gpuop_operator_leader", PROM_GAUGE, "1 when this replica leads");
    sbuf_printf(&b, "gpuop_operator_leader %d\n", leader ? 1 : 0);
    if (f == PROM_FORMAT_OPENMETRICS)
        sbuf_puts(&b, "# EOF\n");
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
    c->dirty = true;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
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
#define N_INFORMERS (2 + N_OWNED)
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

static void usage(FILE *out)
{
    fprintf(
        out,
        "Usage: gpuop operator [flags]\n\n"
        "The control plane: reconciles the ClusterPolicy (nvidia.com/v1) into the GPU stack on\n"
        "every GPU node (node labels, operand DaemonSets, RBAC, RuntimeClass, status).\n\n"
        "Flags:\n"
        "  --kubeconfig FILE          kubeconfig (env KUBECONFIG); default: in-cluster config\n"
        "  --namespace NS             namespace of the operands (env OPERATOR_NAMESPACE;\n"
        "                             default gpu-operator)\n"
        "  --operand-image IMAGE      image of every gpuop component (env OPERAND_IMAGE;\n"
        "                             default gpuop:%s)\n"
        "  --operand-templates DIR    override the compiled-in deploy/operands templates\n"
        "  --metrics-listen ADDR      /metrics, /healthz, /readyz (default :8080; \"\" off)\n"
        "  --leader-elect BOOL        Lease-based leader election (default true)\n"
        "  --leader-election-id NAME  the Lease's name (default gpuop-operator)\n"
        "  --identity ID              this replica's identity (env POD_NAME; default hostname)\n"
        "  --leader-lease-duration D  how long others wait after the last renewal (default 15s)\n"
        "  --leader-renew-deadline D  the leader stops writing when it could not renew for this\n"
        "                             long (default 10s; less than the lease duration)\n"
        "  --leader-retry-period D    period of lease attempts (default 2s)\n"
        "  --kube-qps N --kube-burst N  client-side rate limit (default 50 / 100)\n"
        "  -h, --help\n",
        GPUOP_VERSION);
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

int operator_main(int argc, char **argv);
int operator_main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "render") == 0)
        return render_main(argc - 1, argv + 1);

    const char *kubeconfig = env_get("KUBECONFIG");
    const char *ns = env_get("OPERATOR_NAMESPACE");
    const char *operand_image = env_get("OPERAND_IMAGE");
    const char *templates_dir = NULL;
    const char *metrics_listen = ":8080";
    const char *lease_name = "gpuop-operator";
    const char *identity = env_get("POD_NAME");
    bool leader_elect = true;
    uint64_t lease_ms = 0, renew_ms = 0, retry_ms = 0; /* 0: kube's defaults */
    double qps = 50;
    unsigned burst = 100;
    static const struct option opts[] = {
        {"kubeconfig", required_argument, NULL, 'k'},
        {"namespace", required_argument, NULL, 'n'},
        {"operand-image", required_argument, NULL, 'i'},
        {"operand-templates", required_argument, NULL, 't'},
        {"metrics-listen", required_argument, NULL, 'm'},
        {"leader-elect", required_argument, NULL, 'l'},
        {"leader-election-id", required_argument, NULL, 'L'},
        {"identity", required_argument, NULL, 'I'},
        {"leader-lease-duration", required_argument, NULL, 'D'},
        {"leader-renew-deadline", required_argument, NULL, 'R'},
        {"leader-retry-period", required_argument, NULL, 'P'},
        {"kube-qps", required_argument, NULL, 'q'},
        {"kube-burst", required_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 'k':
            kubeconfig = optarg;
            break;
        case 'n':
            ns = optarg;
            break;
        case 'i':
            operand_image = optarg;
            break;
        case 't':
            templates_dir = optarg;
            break;
        case 'm':
            metrics_listen = optarg;
            break;
        case 'l':
            if (parse_bool(optarg, &leader_elect) < 0) {
                fprintf(stderr, "gpuop operator: --leader-elect: \"%s\" is not a boolean\n",
                        optarg);
                return 2;
            }
            break;
        case 'L':
            lease_name = optarg;
            break;
        case 'I':
            identity = optarg;
            break;
        case 'D':
        case 'R':
        case 'P': {
            uint64_t *dst = o == 'D' ? &lease_ms : o == 'R' ? &renew_ms : &retry_ms;
            if (parse_duration_ms(optarg, dst) < 0 || *dst == 0) {
                fprintf(stderr, "gpuop operator: --%s: \"%s\" is not a positive duration\n",
                        o == 'D'   ? "leader-lease-duration"
                        : o == 'R' ? "leader-renew-deadline"
                                   : "leader-retry-period",
                        optarg);
                return 2;
            }
            break;
        }
        case 'q': {
            uint64_t v;
            if (parse_u64(optarg, &v) < 0 || v == 0 || v > 100000) {
                fprintf(stderr, "gpuop operator: --kube-qps: \"%s\" is not a positive number\n",
                        optarg);
                return 2;
            }
            qps = (double)v;
            break;
        }
        case 'b':
            if (parse_uint(optarg, &burst) < 0 || burst == 0) {
                fprintf(stderr, "gpuop operator: --kube-burst: \"%s\" is not a positive number\n",
                        optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpuop operator: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    {
        uint64_t l = lease_ms ? lease_ms : 15000, rn = renew_ms ? renew_ms : 10000,
                 rt = retry_ms ? retry_ms : 2000;
        if (!(rt < rn && rn < l)) {
            fprintf(stderr,
                    "gpuop operator: leader election needs --leader-retry-period < "
                    "--leader-renew-deadline < --leader-lease-duration (%llu/%llu/%llu ms)\n",
                    (unsigned long long)rt, (unsigned long long)rn, (unsigned long long)l);
            return 2;
        }
    }

    struct controller c = {0};
    c.written = json_object();
    c.write_errors = json_array();
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.cond, NULL);
    struct err e = {0};
    int rc = 1;
    char host[256] = "gpuop-operator";
    gethostname(host, sizeof(host) - 1);
    _cleanup_free_ char *id = xstrdup(identity ? identity : host);
    struct http_server *http = NULL;
    struct kube_leader *leader = NULL;

    struct kube_options ko = {.kubeconfig = kubeconfig, .qps = qps, .burst = burst};
    if (kube_client_new(&ko, &c.kc, &e) < 0) {
        fprintf(stderr, "gpuop operator: %s\n", err_msg(&e));
        return 1;
    }
    c.ns = ns ? ns : "gpu-operator";
    _cleanup_free_ char *default_image = xasprintf("gpuop:%s", GPUOP_VERSION);
    c.defaults.namespace = c.ns;
    c.defaults.operand_image = operand_image ? operand_image : default_image;
    if (op_templates_builtin(&c.templates, &e) < 0 ||
        (templates_dir && op_templates_load_dir(c.templates, templates_dir, &e) < 0)) {
        fprintf(stderr, "gpuop operator: %s\n", err_msg(&e));
        goto out;
    }

    struct kube_informer_handlers hh = {h_add, h_update, h_delete, &c};
    struct kube_informer_opts po = {.handlers = hh};
    if (kube_informer_new(c.kc, &RES_CLUSTERPOLICIES, &po, &c.policies, &e) < 0)
        goto fail;
    static const char *const node_fields[] = {"metadata.labels", NULL};
    struct kube_informer_opts no = {.keep_fields = node_fields, .handlers = hh};
    if (kube_informer_new(c.kc, &KUBE_NODES, &no, &c.nodes, &e) < 0)
        goto fail;
    for (size_t k = 0; k < N_OWNED; k++) {
        struct kube_informer_opts oo = {.ns = owned_kinds[k]->namespaced ? c.ns : NULL,
                                        .label_selector =
                                            "app.kubernetes.io/managed-by=" OP_MANAGED_BY,
                                        .handlers = hh};
        if (kube_informer_new(c.kc, owned_kinds[k], &oo, &c.owned[k], &e) < 0)
            goto fail;
    }

    if (metrics_listen && *metrics_listen) {
        struct http_route routes[] = {
            {"/metrics", h_metrics, &c},
            {"/healthz", h_healthz, &c},
            {"/readyz", h_readyz, &c},
        };
        struct http_config hc = {
            .listen = metrics_listen, .routes = routes, .n_routes = ARRAY_SIZE(routes)};
        if (http_server_new(&hc, &http, &e) < 0)
            goto fail;
    }

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    uint64_t deadline = now_ms_mono() + 60000;
    struct kube_informer *all[2 + N_OWNED] = {c.policies, c.nodes};
    for (size_t k = 0; k < N_OWNED; k++)
        all[2 + k] = c.owned[k];
    for (size_t k = 0; k < ARRAY_SIZE(all); k++) {
        while (!g_signal && kube_informer_wait_synced(all[k], 200) < 0) {
            if (now_ms_mono() > deadline) {
                err_set(&e, -ETIMEDOUT, "informers did not sync within 60 s");
                goto fail;
            }
        }
    }
    log_info(COMPONENT, "caches synced", "namespace=%s identity=%s", c.ns, id);

    if (leader_elect) {
        struct kube_leader_opts lo = {.ns = c.ns,
                                      .name = lease_name,
                                      .identity = id,
                                      .lease_ms = lease_ms,
                                      .renew_ms = renew_ms,
                                      .retry_ms = retry_ms,
                                      .on_started = on_started,
                                      .on_stopped = on_stopped,
                                      .on_new_leader = on_new_leader,
                                      .userdata = &c};
        if (kube_leader_new(c.kc, &lo, &leader, &e) < 0)
            goto fail;
    } else {
        c.leader = true;
    }
    pthread_mutex_lock(&c.lock);
    c.ready = true; /* synced; a passive replica is ready to take over */
    c.dirty = true;
    pthread_mutex_unlock(&c.lock);

    uint64_t backoff = 100;
    while (!g_signal) {
        pthread_mutex_lock(&c.lock);
        bool run = c.dirty && c.leader;
        pthread_mutex_unlock(&c.lock);
        if (!run) {
            pthread_mutex_lock(&c.lock);
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&c.cond, &c.lock, &ts);
            pthread_mutex_unlock(&c.lock);
            continue;
        }
        pthread_mutex_lock(&c.lock);
        c.dirty = false;
        pthread_mutex_unlock(&c.lock);
        bool requeue = false;
        struct err re = {0};
        uint64_t t0 = now_ms_mono();
        int r = reconcile(&c, &requeue, &re);
        if (r == -ECANCELED) {
            /* Lost the lease mid-way: stop here; the new leader (or this one, when it leads
             * again) reconciles from the cluster's state. */
            log_warn(COMPONENT, "reconcile stopped", "error=\"%s\"", err_msg(&re));
            continue;
        }
        pthread_mutex_lock(&c.lock);
        c.m.reconciliations++;
        if (r < 0) {
            c.m.failed++;
            c.m.status = -1;
        } else {
            c.m.last_success_ms = now_ms_real();
        }
        pthread_mutex_unlock(&c.lock);
        if (r < 0) {
            log_error(COMPONENT, "reconcile failed", "error=\"%s\" retry_ms=%llu", err_msg(&re),
                      (unsigned long long)backoff);
            /* Rate-limited retry: 100 ms doubling to 3 s. */
            for (uint64_t w = 0; w < backoff && !g_signal; w += 50)
                usleep(50 * 1000);
            backoff = backoff * 2 > 3000 ? 3000 : backoff * 2;
            mark_dirty(&c);
            continue;
        }
        backoff = 100;
        log_debug(COMPONENT, "reconciled", "ms=%llu requeue=%d",
                  (unsigned long long)(now_ms_mono() - t0), requeue);
        if (requeue) {
            /* Not ready yet: look again in 5 s even without events, as NVIDIA's operator does.
             * DaemonSet status changes arrive as events before that anyway. */
            for (int w = 0; w < 100 && !g_signal; w++) {
                pthread_mutex_lock(&c.lock);
                bool d = c.dirty;
                pthread_mutex_unlock(&c.lock);
                if (d)
                    break;
                usleep(50 * 1000);
            }
            mark_dirty(&c);
        }
    }
    log_info(COMPONENT, "stopping", "signal=%d", (int)g_signal);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "gpuop operator: %s\n", err_msg(&e));
    rc = 1;
out:
    kube_leader_free(leader); /* first: the lease is released before anything else */
    http_server_free(http);
    {
        struct kube_informer *infs[N_INFORMERS] = {c.nodes, c.policies};
        for (size_t k = 0; k < N_OWNED; k++)
            infs[2 + k] = c.owned[k];
        informers_free(infs, ARRAY_SIZE(infs));
    }
    op_templates_free(c.templates);
    json_decref(c.written);
    json_decref(c.write_errors);
    kube_client_free(c.kc);
    pthread_cond_destroy(&c.cond);
    pthread_mutex_destroy(&c.lock);
    return rc;
}
