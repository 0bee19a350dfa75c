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

static const char *jget_str(const json_t *o, const char *a, const char *b)
{
    const json_t *x = json_object_get(o, a);
    if (b)
        x = json_object_get(x, b);
    return json_string_value(x);
}

static const char *obj_name(const json_t *o)
{
    return jget_str(o, "metadata", "name");
}

/* ---- choosing the active ClusterPolicy ---------------------------------------------------- */

/* Oldest creationTimestamp wins; the name breaks ties. RFC 3339 UTC strings order as text. */
static json_t *pick_active(json_t *list)
{
    json_t *best = NULL;
    size_t i;
    json_t *cp;
    json_array_foreach (list, i, cp) {
        if (jget_str(cp, "metadata", "deletionTimestamp"))
            continue;
        if (!best) {
            best = cp;
            continue;
        }
        const char *a = jget_str(cp, "metadata", "creationTimestamp");
        const char *b = jget_str(best, "metadata", "creationTimestamp");
        int cmp = strcmp(a ? a : "", b ? b : "");
        if (cmp < 0 || (cmp == 0 && strcmp(obj_name(cp), obj_name(best)) < 0))
            best = cp;
    }
    return best;
}

/* ---- status ------------------------------------------------------------------------------- */

static json_t *condition(const char *type, bool status, const char *reason, const char *message,
                         int64_t generation, const json_t *old_conditions)
{
    char now[40];
    time_rfc3339(now_ms_real(), now, sizeof(now));
    const char *st = status ? "True" : "False";
    const char *ltt = now;
    size_t i;
    json_t *oc;
    json_array_foreach (old_conditions, i, oc) {
        if (streq_ptr(json_string_value(json_object_get(oc, "type")), type) &&
            streq_ptr(json_string_value(json_object_get(oc, "status")), st)) {
            const char *t = json_string_value(json_object_get(oc, "lastTransitionTime"));
            if (t)
                ltt = t;
        }
    }
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:I}", "type", type, "status", st, "reason", reason,
                     "message", message, "lastTransitionTime", ltt, "observedGeneration",
                     (json_int_t)generation);
}

/* Writes status only when it differs from what is stored (conditions keep their transition
 * times), so a converged operator makes no status writes. */
static int write_status(struct controller *c, json_t *cp, json_t *status, struct err *e)
{
    json_t *old = json_object_get(cp, "status");
    if (old && json_equal(old, status))
        return 0;
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
    const char *rv = jget_str(cp, "metadata", "resourceVersion");
    if (rv && json_is_object(out) && obj_name(cp))
        json_object_set_new(c->written, obj_name(cp), json_pack("[s,O]", rv, out));
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
                  "metadata", "name", obj_name(cp), "uid", jget_str(cp, "metadata", "uid") ?: "");
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

/* The stored message of a condition, to report each change once: what was reported lives in
 * the ClusterPolicy's status, so a restarted operator repeats nothing. */
static const char *stored_condition(const json_t *cp, const char *type, const char *status)
{
    json_t *conds = json_object_get(json_object_get(cp, "status"), "conditions");
    size_t i;
    json_t *c;
    json_array_foreach (conds, i, c) {
        if (streq_ptr(json_string_value(json_object_get(c, "type")), type) &&
            (!status || streq_ptr(json_string_value(json_object_get(c, "status")), status)))
            return json_string_value(json_object_get(c, "message"));
    }
    return NULL;
}

/* ---- objects ------------------------------------------------------------------------------ */

static const struct kube_resource *resource_for(const json_t *obj)
{
    const char *kind = json_string_value(json_object_get(obj, "kind"));
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

/* Creates or replaces one rendered object; nothing when the stored one carries the same hash. */
static int apply_object(struct controller *c, json_t *desired, struct err *e)
{
    const struct kube_resource *r = resource_for(desired);
    if (!r)
        return err_set(e, -EINVAL, "rendered object of unknown kind \"%s\"",
                       jget_str(desired, "kind", NULL));
    const char *ns = r->namespaced ? jget_str(desired, "metadata", "namespace") : NULL;
    const char *name = obj_name(desired);
    _cleanup_json_ json_t *live = kube_informer_get(c->owned[owned_index(r)], ns, name);
    if (!live) {
        /* Not in our store (the store only sees objects labelled as ours): ask the server, an
         * object of the same name may exist unlabelled. */
        int g = kube_get(c->kc, r, ns, name, &live, e);
        if (g < 0 && g != -ENOENT)
            return g;
        err_clear(e);
    }
    const char *want =
        jget_str(json_object_get(desired, "metadata"), "annotations", OP_HASH_ANNOTATION);
    const char *have =
        live ? jget_str(json_object_get(live, "metadata"), "annotations", OP_HASH_ANNOTATION)
             : NULL;
    /* Same content and labelled as ours: nothing to do. An object someone stripped of the
     * managed-by label is out of our informers (and of pruning): write it back, labelled. */
    if (live && streq_ptr(want, have) &&
        streq_ptr(
            jget_str(json_object_get(live, "metadata"), "labels", "app.kubernetes.io/managed-by"),
            OP_MANAGED_BY))
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
        return err_prefix(e, "%s %s", r->kind, name);
    count_write(c);
    log_info(COMPONENT, live ? "updated" : "created", "kind=%s name=%s", r->kind, name);
    return 0;
}

static bool owned_by(const json_t *obj, const char *uid)
{
    json_t *refs = json_object_get(json_object_get(obj, "metadata"), "ownerReferences");
    size_t i;
    json_t *ref;
    json_array_foreach (refs, i, ref) {
        if (streq_ptr(json_string_value(json_object_get(ref, "kind")), "ClusterPolicy") &&
            (!uid || streq_ptr(json_string_value(json_object_get(ref, "uid")), uid)))
            return true;
    }
    return false;
}

static bool desired_has(json_t *desired, const struct kube_resource *r, const char *ns,
                        const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach (desired, i, o) {
        if (resource_for(o) != r || !streq_ptr(obj_name(o), name))
            continue;
        if (!r->namespaced || streq_ptr(jget_str(o, "metadata", "namespace"), ns))
            return true;
    }
    return false;
}

/* Deletes what gpuop owns that is no longer wanted (a component turned off). Only ever called
 * with a valid policy: nothing is deleted because of a parse or validation error. */
static int prune_objects(struct controller *c, json_t *desired, struct err *e)
{
    for (size_t k = 0; k < N_OWNED; k++) {
        _cleanup_json_ json_t *list = kube_informer_list(c->owned[k], NULL, NULL, NULL);
        size_t i;
        json_t *o;
        json_array_foreach (list, i, o) {
            const char *ns =
                owned_kinds[k]->namespaced ? jget_str(o, "metadata", "namespace") : NULL;
            if (!owned_by(o, NULL) || desired_has(desired, owned_kinds[k], ns, obj_name(o)))
                continue;
            if (jget_str(o, "metadata", "deletionTimestamp"))
                continue;
            if (check_leader(c, e) < 0)
                return -ECANCELED;
            struct kube_delete_opts dopts = {.propagation = KUBE_PROPAGATION_BACKGROUND};
            int r = kube_delete(c->kc, owned_kinds[k], ns, obj_name(o), &dopts, e);
            if (r < 0 && r != -ENOENT)
                return err_prefix(e, "delete %s %s", owned_kinds[k]->kind, obj_name(o));
            err_clear(e);
            count_write(c);
            log_info(COMPONENT, "deleted", "kind=%s name=%s", owned_kinds[k]->kind, obj_name(o));
        }
    }
    return 0;
}

/* ---- nodes -------------------------------------------------------------------------------- */

/* The driver image's OS suffix from the NFD os_release labels of the GPU nodes the driver
 * DaemonSet will run on (the most common); *ret_counts: OS tag -> nodes. */
static char *os_tag_of(json_t *nodes, json_t **ret_counts)
{
    _cleanup_json_ json_t *counts = json_object();
    size_t i;
    json_t *n;
    json_array_foreach (nodes, i, n) {
        json_t *labels = json_object_get(json_object_get(n, "metadata"), "labels");
        if (!op_node_is_gpu(labels))
            continue;
        /* Nodes with a pre-installed driver (or operands off) never run the driver image. */
        const char *deploy =
            json_string_value(json_object_get(labels, "nvidia.com/gpu.deploy.driver"));
        if ((deploy && *deploy && strcmp(deploy, "true") != 0) ||
            streq_ptr(json_string_value(json_object_get(labels, OP_LABEL_DEPLOY_OPERANDS)),
                      "false"))
            continue;
        const char *id = json_string_value(
            json_object_get(labels, "feature.node.kubernetes.io/system-os_release.ID"));
        const char *ver = json_string_value(
            json_object_get(labels, "feature.node.kubernetes.io/system-os_release.VERSION_ID"));
        if (!id || !ver)
            continue;
        _cleanup_free_ char *tag = xasprintf("%s%s", id, ver);
        json_t *cnt = json_object_get(counts, tag);
        json_object_set_new(counts, tag,
                            json_integer(json_is_integer(cnt) ? json_integer_value(cnt) + 1 : 1));
    }
    const char *best = NULL;
    json_int_t best_n = 0;
    const char *k;
    json_t *v;
    json_object_foreach (counts, k, v) {
        if (json_integer_value(v) > best_n ||
            (json_integer_value(v) == best_n && best && strcmp(k, best) < 0)) {
            best = k;
            best_n = json_integer_value(v);
        }
    }
    char *ret = best ? xstrdup(best) : NULL;
    *ret_counts = steal_ptr(&counts);
    return ret;
}

static int label_nodes(struct controller *c, json_t *nodes, const struct op_policy *p,
                       int *ret_gpu_nodes, json_t *warnings, struct err *e)
{
    int gpu_nodes = 0, failed = 0;
    _cleanup_free_ char *first_err = NULL;
    size_t i;
    json_t *n;
    json_array_foreach (nodes, i, n) {
        json_t *labels = json_object_get(json_object_get(n, "metadata"), "labels");
        _cleanup_json_ json_t *patch = NULL;
        int r = op_node_labels(labels, p, &patch, e);
        if (r < 0)
            return r;
        if (op_node_is_gpu(labels))
            gpu_nodes++;
        /* A host driver already loaded (GPU feature discovery saw another version) while the
         * driver DaemonSet targets the node: report it instead of letting two drivers race. */
        if (p && p->operand[OP_DRIVER].enabled && p->driver_version[0] && op_node_is_gpu(labels)) {
            const char *loaded =
                json_string_value(json_object_get(labels, "nvidia.com/cuda.driver-version.full"));
            const char *deploy =
                json_string_value(json_object_get(labels, "nvidia.com/gpu.deploy.driver"));
            if (loaded && strcmp(loaded, p->driver_version) != 0 &&
                (!deploy || strcmp(deploy, "true") == 0 || !*deploy))
                json_array_append_new(warnings,
                                      json_sprintf("node %s: a driver %s is already loaded; the "
                                                   "driver DaemonSet would install %s (label it "
                                                   "nvidia.com/gpu.deploy.driver=pre-installed)",
                                                   obj_name(n), loaded, p->driver_version));
        }
        if (json_object_size(patch) == 0)
            continue;
        if (check_leader(c, e) < 0)
            return -ECANCELED;
        _cleanup_json_ json_t *body = json_pack("{s:{s:O}}", "metadata", "labels", patch);
        struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
        _cleanup_json_ json_t *out = NULL;
        struct err ne = {0};
        r = kube_patch(c->kc, &KUBE_NODES, NULL, obj_name(n), &po, body, &out, &ne);
        if (r == -ENOENT)
            continue; /* the node went away */
        if (r < 0) {
            /* One node refusing its labels (a webhook, a conflict) must not hold back every
             * other node: go on, and fail the reconcile at the end so it is retried. */
            failed++;
            if (!first_err)
                first_err = xasprintf("label node %s: %s", obj_name(n), err_msg(&ne));
            continue;
        }
        count_write(c);
    }
    *ret_gpu_nodes = gpu_nodes;
    if (failed)
        return err_set(e, -EIO, "%s (%d node(s) not labelled)", first_err, failed);
    return 0;
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
        const char *name = obj_name(cp);
        json_t *w = name ? json_object_get(c->written, name) : NULL;
        if (!w)
            continue;
        if (streq_ptr(jget_str(cp, "metadata", "resourceVersion"),
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
    policies_fresh(c, policies);
    json_t *active = pick_active(policies);
    int ignored_r = 0;
    struct err ignored_err = {0};

    /* Every other ClusterPolicy is ignored, as NVIDIA's operator does. */
    size_t i;
    json_t *cp;
    json_array_foreach (policies, i, cp) {
        if (cp == active || jget_str(cp, "metadata", "deletionTimestamp"))
            continue;
        json_t *old = json_object_get(json_object_get(cp, "status"), "conditions");
        _cleanup_free_ char *msg = xasprintf(
            "another ClusterPolicy (%s) is active; only one is reconciled", obj_name(active));
        json_t *gen = json_object_get(json_object_get(cp, "metadata"), "generation");
        _cleanup_json_ json_t *st =
            json_pack("{s:s,s:s,s:[o]}", "state", "ignored", "namespace", c->ns, "conditions",
                      condition("Ready", false, "Ignored", msg, json_integer_value(gen), old));
        if (!json_equal(json_object_get(json_object_get(cp, "status"), "state"),
                        json_object_get(st, "state")))
            emit_event(c, cp, "Warning", "Ignored", msg);
        /* A failed write here must not hold back the active policy: retried after it. */
        struct err ie = {0};
        int ir = write_status(c, cp, st, &ie);
        if (ir == -ECANCELED)
            return err_set(e, ir, "%s", err_msg(&ie));
        if (ir < 0 && ignored_r == 0) {
            ignored_r = ir;
            err_set(&ignored_err, ir, "ClusterPolicy %s status: %s", obj_name(cp), err_msg(&ie));
        }
    }

    if (!active) {
        /* No policy, nothing to do: nodes are labelled once, together with the deploy labels,
         * when a ClusterPolicy arrives (one write per node). */
        int gpu = 0;
        json_t *n;
        json_array_foreach (nodes, i, n) {
            if (op_node_is_gpu(json_object_get(json_object_get(n, "metadata"), "labels")))
                gpu++;
        }
        pthread_mutex_lock(&c->lock);
        c->m.gpu_nodes = gpu;
        pthread_mutex_unlock(&c->lock);
        return 0;
    }

    json_t *meta = json_object_get(active, "metadata");
    int64_t generation = json_integer_value(json_object_get(meta, "generation"));
    json_t *old_conditions = json_object_get(json_object_get(active, "status"), "conditions");

    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    struct err perr = {0};
    if (op_policy_parse(active, &c->defaults, &p, &perr) < 0) {
        /* Invalid: the running operands stay exactly as they are; say why. */
        pthread_mutex_lock(&c->lock);
        c->m.status = -1;
        pthread_mutex_unlock(&c->lock);
        if (!streq_ptr(stored_condition(active, "Error", "True"), err_msg(&perr))) {
            emit_event(c, active, "Warning", "InvalidClusterPolicy", err_msg(&perr));
            log_error(COMPONENT, "invalid ClusterPolicy; operands left as they are",
                      "policy=%s error=\"%s\"", obj_name(active), err_msg(&perr));
        }
        json_t *prev = json_object_get(active, "status");
        _cleanup_json_ json_t *st = prev ? json_deep_copy(prev) : json_object();
        json_object_set_new(st, "state", json_string("notReady"));
        json_object_set_new(st, "namespace", json_string(c->ns));
        json_t *conds = json_array();
        json_array_append_new(conds, condition("Ready", false, "ReconcileFailed", err_msg(&perr),
                                               generation, old_conditions));
        json_array_append_new(conds, condition("Error", true, "ReconcileFailed", err_msg(&perr),
                                               generation, old_conditions));
        /* The other conditions stay as they were: what was reported (UnsupportedFields, ...)
         * is not reported again once the policy is fixed. */
        size_t k;
        json_t *oc;
        json_array_foreach (old_conditions, k, oc) {
            const char *t = json_string_value(json_object_get(oc, "type"));
            if (!streq_ptr(t, "Ready") && !streq_ptr(t, "Error"))
                json_array_append(conds, oc);
        }
        json_object_set_new(st, "conditions", conds);
        int wr = write_status(c, active, st, e);
        if (wr == 0 && ignored_r < 0)
            return err_set(e, ignored_r, "%s", err_msg(&ignored_err));
        return wr;
    }

    /* Fields gpuop accepts but does not act on: reported once per distinct set. */
    _cleanup_free_ char *unsup = json_dumps(p->unimplemented, JSON_COMPACT);
    _cleanup_free_ char *unsup_msg = xasprintf("accepted, not acted on by gpuop: %s", unsup);
    if (json_array_size(p->unimplemented) > 0 &&
        !streq_ptr(stored_condition(active, "UnsupportedFields", NULL), unsup_msg)) {
        emit_event(c, active, "Normal", "UnsupportedFields", unsup_msg);
        log_warn(COMPONENT, "ClusterPolicy fields accepted but not acted on", "fields=%s", unsup);
    }

    _cleanup_json_ json_t *warnings = json_array();
    int gpu_nodes = 0;
    struct err label_err = {0};
    int label_r = label_nodes(c, nodes, p, &gpu_nodes, warnings, &label_err);
    pthread_mutex_lock(&c->lock);
    c->m.gpu_nodes = gpu_nodes;
    pthread_mutex_unlock(&c->lock);
    if (label_r == -ECANCELED)
        return err_set(e, label_r, "%s", err_msg(&label_err));
    int r;

    _cleanup_json_ json_t *os_counts = NULL;
    _cleanup_free_ char *os_tag = os_tag_of(nodes, &os_counts);
    struct op_render_ctx ctx = {.os_tag = os_tag};
    _cleanup_json_ json_t *desired = NULL;
    r = op_render(p, c->templates, &ctx, &desired, e);
    if (r < 0)
        return r;
    /* One object the API server refuses does not hold back the others; but nothing is pruned
     * on a reconcile that failed part way, and it is retried with backoff. */
    json_t *obj;
    int apply_failed = 0;
    json_array_foreach (desired, i, obj) {
        struct err ae = {0};
        r = apply_object(c, obj, &ae);
        if (r == -ECANCELED)
            return err_set(e, r, "%s", err_msg(&ae));
        if (r < 0) {
            if (apply_failed++ == 0)
                err_set(e, r, "%s", err_msg(&ae));
        }
    }
    if (apply_failed)
        return err_prefix(e, "%d object(s) not applied, nothing pruned", apply_failed);
    r = prune_objects(c, desired, e);
    if (r < 0)
        return r;

    /* Status: per-component conditions from the DaemonSets, then the overall state. */
    json_t *conds = json_array();
    _cleanup_json_ json_t *status = json_pack("{s:s,s:o}", "namespace", c->ns, "conditions", conds);
    _cleanup_json_ json_t *not_ready = json_array();
    for (int k = 0; k < OP_N_COMPONENTS; k++) {
        const struct op_component_def *def = op_component_def(k);
        _cleanup_free_ char *type = xasprintf("%sReady", def->title);
        if (!p->operand[k].enabled) {
            json_array_append_new(conds, condition(type, false, "Disabled",
                                                   def->ds_name ? "disabled in the ClusterPolicy"
                                                                : "not deployed by gpuop",
                                                   generation, old_conditions));
            continue;
        }
        _cleanup_json_ json_t *ds =
            kube_informer_get(c->owned[owned_index(&KUBE_DAEMONSETS)], c->ns, def->ds_name);
        char why[160] = "not created yet";
        bool ready = ds && op_ds_ready(ds, why, sizeof(why));
        if (!ready)
            json_array_append_new(not_ready, json_string(def->state));
        json_array_append_new(conds, condition(type, ready, ready ? "Ready" : "OperandNotReady",
                                               ready ? "applied and ready" : why, generation,
                                               old_conditions));
    }
    bool all_ready = json_array_size(not_ready) == 0;
    _cleanup_free_ char *nr = json_dumps(not_ready, JSON_COMPACT);
    _cleanup_free_ char *msg =
        all_ready ? xstrdup("ClusterPolicy is ready as all resources have been successfully "
                            "reconciled")
                  : xasprintf("ClusterPolicy is not ready, states not ready: %s", nr);
    json_array_insert_new(conds, 0,
                          condition("Ready", all_ready,
                                    all_ready ? "Reconciled" : "OperandNotReady", msg, generation,
                                    old_conditions));
    json_array_insert_new(conds, 1,
                          condition("Error", false, all_ready ? "Reconciled" : "OperandNotReady",
                                    all_ready ? "" : msg, generation, old_conditions));
    if (json_array_size(p->unimplemented) > 0)
        json_array_append_new(conds, condition("UnsupportedFields", true, "AcceptedNotApplied",
                                               unsup_msg, generation, old_conditions));
    if (json_array_size(warnings) > 0) {
        _cleanup_free_ char *w = json_dumps(warnings, JSON_COMPACT);
        if (!streq_ptr(stored_condition(active, "HostDriverConflict", "True"), w))
            emit_event(c, active, "Warning", "HostDriverConflict", w);
        json_array_append_new(conds, condition("HostDriverConflict", true, "HostDriverDetected", w,
                                               generation, old_conditions));
    }
    /* One driver DaemonSet runs one image: GPU nodes of another OS would get a driver built for
     * the wrong OS. NVIDIA splits the DaemonSet per OS; gpuop does not yet, so it says so. */
    if (p->operand[OP_DRIVER].enabled && json_object_size(os_counts) > 1) {
        _cleanup_free_ char *cnt = json_dumps(os_counts, JSON_COMPACT | JSON_SORT_KEYS);
        _cleanup_free_ char *w = xasprintf(
            "GPU nodes run different OS versions %s; the driver DaemonSet runs the %s image on all "
            "of them (one driver DaemonSet per OS is not implemented): label the others "
            "nvidia.com/gpu.deploy.driver=false or pre-install their driver",
            cnt, os_tag);
        if (!streq_ptr(stored_condition(active, "DriverOSMismatch", "True"), w))
            emit_event(c, active, "Warning", "DriverOSMismatch", w);
        json_array_append_new(conds, condition("DriverOSMismatch", true, "MixedOperatingSystems", w,
                                               generation, old_conditions));
    }
    const char *state = all_ready ? "ready" : "notReady";
    json_object_set_new(status, "state", json_string(state));
    json_object_set_new(status, "observedGeneration", json_integer(generation));
    json_object_set_new(status, "operatorVersion", json_string(GPUOP_VERSION));
    if (!streq_ptr(jget_str(active, "status", "state"), state))
        emit_event(c, active, all_ready ? "Normal" : "Warning", all_ready ? "Ready" : "NotReady",
                   msg);
    r = write_status(c, active, status, e);
    if (r < 0)
        return err_prefix(e, "ClusterPolicy %s status", obj_name(active));
    pthread_mutex_lock(&c->lock);
    c->m.status = all_ready ? 1 : 0;
    pthread_mutex_unlock(&c->lock);
    *ret_requeue = !all_ready;
    if (label_r < 0)
        return err_set(e, label_r, "%s", err_msg(&label_err));
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
    kube_client_free(c.kc);
    pthread_cond_destroy(&c.cond);
    pthread_mutex_destroy(&c.lock);
    return rc;
}
