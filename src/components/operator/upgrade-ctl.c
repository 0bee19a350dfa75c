/* SPDX-License-Identifier: Apache-2.0 */
/* The driver upgrade controller's shell (upgrade-ctl.h): informers in, plan executed out. */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "operator-internal.h"
#include "operator.h"
#include "upgrade-ctl.h"
#include "upgrade.h"
#include "yamlcfg.h"

#define COMPONENT        "operator"
#define DRIVER_DS        "nvidia-driver-daemonset"
#define VALIDATOR_DS     "nvidia-operator-validator"
#define MATRIX_CONFIGMAP "gpuop-driver-compat"
#define MATRIX_KEY       "matrix.yaml"
#define EVENT_TTL_MS     (10 * 60 * 1000) /* the same Event on the same object: once per 10 min */
#define COND_TYPE        "DriverUpgrade"

static const struct kube_resource RES_POOLS = {"upgrade.gpuop.dev", "v1alpha1",
                                               "driverupgradepools", "DriverUpgradePool", false};
static const struct kube_resource RES_NVIDIADRIVERS = {"nvidia.com", "v1alpha1", "nvidiadrivers",
                                                       "NVIDIADriver", false};

enum { INF_NODES, INF_PODS, INF_PDBS, INF_REVISIONS, INF_POOLS, INF_NVDS, INF_CONFIGMAP, N_INF };

struct op_upgrade {
    struct kube_client *kc;
    const char *ns;
    struct op_upgrade_hooks h;
    struct kube_informer *inf[N_INF];
    json_t *recent_events; /* "object|message" -> ms emitted (reconcile thread) */
    /* the nodes as gpuop's last patches left them, until the informer shows those patches
     * (upgrade.h, read-your-writes; reconcile thread) */
    struct upg_writes *writes;
    struct upg_matrix *builtin;
    struct upg_matrix *override;
    char *override_rv; /* the ConfigMap's resourceVersion the override was parsed from */
    char *override_err;
    uint64_t requeue_ms;
    uint64_t last_unsynced_log_ms;

    pthread_mutex_t lock; /* the metrics below */
    bool have_counts, auto_upgrade;
    struct upg_counts counts;
    json_t *pool_counts;
    uint64_t plan_us_last, plan_us_max, passes; /* the planner's own time, per pass */
    uint64_t plan_cpu_us_last, plan_cpu_us_max; /* and the CPU time it used */
    uint64_t conflicts;                         /* node patches refused: the node had changed */
    size_t unseen_writes;                       /* node writes the informer does not show yet */
};

static uint64_t thread_cpu_us(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- informers ------------------------------------------------------------------------------ */

static void h_add(json_t *obj, void *u)
{
    (void)obj;
    struct op_upgrade *up = u;
    up->h.dirty(up->h.u);
}
static void h_update(json_t *old, json_t *obj, void *u)
{
    (void)old;
    h_add(obj, u);
}

static void copy_path(json_t *dst, const json_t *src, const char *dotted)
{
    kobj_path_copy(dst, src, dotted);
}

void op_upgrade_project_node(const json_t *obj, json_t *p)
{
    /* gpuop's and NVIDIA's upgrade annotations (the planner reads and writes only those) */
    const char *k;
    json_t *v;
    json_object_foreach (kobj_annotations(obj), k, v) {
        if (str_has_prefix(k, "nvidia.com/gpu-driver-upgrade") ||
            str_has_prefix(k, "upgrade.gpuop.dev/"))
            json_object_set(
                kobj_ensure_keys(p, (const char *const[]){"metadata", "annotations", NULL}), k, v);
    }
    static const char *const paths[] = {"spec.unschedulable", "status.nodeInfo.kernelVersion"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
        kobj_path_copy(p, obj, paths[i]);
    /* the GPU resources the kubelet has (capacity) and offers (allocatable): the floor counts
     * the offered ones, a canary's soak the difference (GPUs its device plugin found unhealthy) */
    static const char *const lists[] = {"capacity", "allocatable"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        json_object_foreach (kobj_keys(obj, (const char *const[]){"status", lists[l], NULL}), k,
                             v) {
            if (strncmp(k, "nvidia.com/gpu", 14) == 0 || strncmp(k, "nvidia.com/mig-", 15) == 0)
                json_object_set(
                    kobj_ensure_keys(p, (const char *const[]){"status", lists[l], NULL}), k, v);
        }
    }
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(obj, "status.conditions"), i, c) {
        if (streq_ptr(kobj_str(c, "type"), "Ready"))
            json_object_set_new(
                kobj_ensure_object(p, "status"), "conditions",
                json_pack("[{s:s,s:O}]", "type", "Ready", "status", json_object_get(c, "status")));
    }
}

static json_t *slim_statuses(const json_t *list)
{
    json_t *out = json_array();
    size_t i;
    json_t *cs;
    json_array_foreach ((json_t *)list, i, cs) {
        json_array_append_new(
            out, json_pack("{s:O,s:O}", "ready", json_object_get(cs, "ready") ?: json_false(),
                           "restartCount", json_object_get(cs, "restartCount") ?: json_integer(0)));
    }
    return out;
}

/* What the planner reads of a pod: who owns it, when it was made (a validator older than the
 * driver pod validated an earlier driver), where it runs, its GPU requests, emptyDirs,
 * readiness and restarts. */
static json_t *project_pod(json_t *obj, void *userdata)
{
    (void)userdata;
    static const char *const keep[] = {"metadata.creationTimestamp", "spec.nodeName",
                                       "status.phase", NULL};
    json_t *p = kube_project_fields(obj, keep);
    json_t *meta = kobj_ensure_object(p, "metadata");
    json_t *owners = json_array();
    size_t i;
    json_t *o;
    json_array_foreach (kobj_path(obj, "metadata.ownerReferences"), i, o)
        json_array_append_new(owners, json_pack("{s:O,s:O}", "kind", json_object_get(o, "kind"),
                                                "name", json_object_get(o, "name")));
    json_object_set_new(meta, "ownerReferences", owners);
    const char *mirror = kobj_annotation(obj, "kubernetes.io/config.mirror");
    if (mirror)
        json_object_set_new(meta, "annotations",
                            json_pack("{s:s}", "kubernetes.io/config.mirror", mirror));
    json_t *spec = kobj_ensure_object(p, "spec");
    json_t *ctrs = json_array();
    json_array_foreach (kobj_path(obj, "spec.containers"), i, o) {
        json_t *c = json_object();
        copy_path(c, o, "resources.limits");
        copy_path(c, o, "resources.requests");
        json_array_append_new(ctrs, c);
    }
    json_object_set_new(spec, "containers", ctrs);
    json_t *vols = json_array();
    json_array_foreach (kobj_path(obj, "spec.volumes"), i, o) {
        if (json_object_get(o, "emptyDir"))
            json_array_append_new(vols, json_pack("{s:{}}", "emptyDir"));
    }
    json_object_set_new(spec, "volumes", vols);
    json_t *st = kobj_ensure_object(p, "status");
    json_array_foreach (kobj_path(obj, "status.conditions"), i, o) {
        if (streq_ptr(kobj_str(o, "type"), "Ready"))
            json_object_set_new(
                st, "conditions",
                json_pack("[{s:s,s:O}]", "type", "Ready", "status", json_object_get(o, "status")));
    }
    json_object_set_new(st, "containerStatuses",
                        slim_statuses(kobj_path(obj, "status.containerStatuses")));
    json_object_set_new(st, "initContainerStatuses",
                        slim_statuses(kobj_path(obj, "status.initContainerStatuses")));
    return p;
}

int op_upgrade_new(struct kube_client *kc, const char *ns, struct kube_informer *nodes,
                   const struct op_upgrade_hooks *h, struct op_upgrade **ret, struct err *e)
{
    struct op_upgrade *u = xcalloc(1, sizeof(*u));
    u->kc = kc;
    u->ns = ns;
    u->h = *h;
    u->recent_events = json_object();
    u->writes = upg_writes_new();
    u->pool_counts = json_object();
    pthread_mutex_init(&u->lock, NULL);
    const struct embedded_file *m = &op_embedded_upgrade[0];
    int r = upg_matrix_parse(m->data, m->len, "deploy/upgrade/compat-matrix.yaml", &u->builtin, e);
    if (r < 0) {
        op_upgrade_free(u);
        return r;
    }
    struct kube_informer_handlers hh = {h_add, h_update, h_add, u};
    static const char *const no_index[] = {NULL};
    _cleanup_free_ char *cm_field = xasprintf("metadata.name=%s", MATRIX_CONFIGMAP);
    struct {
        const struct kube_resource *res;
        struct kube_informer_opts o;
    } spec[N_INF] = {
        /* nothing here queries by label: no label indexes; the nodes are the controller's
         * informer (borrowed: its projection keeps what op_upgrade_project_node adds) */
        /* the operand pods only; a node's workloads are listed while it is emptied */
        [INF_PODS] = {&KUBE_PODS,
                      {.ns = ns,
                       .label_selector = "app in (" DRIVER_DS "," VALIDATOR_DS ")",
                       .project = project_pod,
                       .index_label_keys = no_index,
                       .handlers = hh}},
        [INF_PDBS] = {&KUBE_PDBS, {.handlers = hh}},
        [INF_REVISIONS] = {&KUBE_CONTROLLERREVISIONS,
                           {.ns = ns,
                            .label_selector = "app=" DRIVER_DS,
                            .keep_fields =
                                (const char *const[]){"metadata.ownerReferences", "revision", NULL},
                            .handlers = hh}},
        [INF_POOLS] = {&RES_POOLS, {.handlers = hh}},
        [INF_NVDS] = {&RES_NVIDIADRIVERS, {.handlers = hh}},
        [INF_CONFIGMAP] = {&KUBE_CONFIGMAPS,
                           {.ns = ns, .field_selector = cm_field, .handlers = hh}},
    };
    u->inf[INF_NODES] = nodes;
    for (int i = 0; i < N_INF; i++) {
        if (i == INF_NODES)
            continue;
        r = kube_informer_new(kc, spec[i].res, &spec[i].o, &u->inf[i], e);
        if (r < 0) {
            op_upgrade_free(u);
            return err_prefix(e, "upgrade controller");
        }
    }
    *ret = u;
    return 0;
}

void op_upgrade_free(struct op_upgrade *u)
{
    if (!u)
        return;
    for (int i = 0; i < N_INF; i++)
        if (i != INF_NODES) /* the controller's */
            kube_informer_free(u->inf[i]);
    json_decref(u->recent_events);
    upg_writes_free(u->writes);
    json_decref(u->pool_counts);
    upg_matrix_free(u->builtin);
    upg_matrix_free(u->override);
    free(u->override_rv);
    free(u->override_err);
    pthread_mutex_destroy(&u->lock);
    free(u);
}

int op_upgrade_wait_synced(struct op_upgrade *u, uint64_t timeout_ms)
{
    for (int i = 0; i < N_INF; i++)
        if (kube_informer_wait_synced(u->inf[i], timeout_ms) < 0)
            return -ETIMEDOUT;
    return 0;
}

/* ---- inputs --------------------------------------------------------------------------------- */

static const json_t *find_owned(const json_t *owned, const char *kind, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach ((json_t *)owned, i, o) {
        if (streq_ptr(kobj_kind(o), kind) && streq_ptr(kobj_name(o), name))
            return o;
    }
    return NULL;
}

/* The driver DaemonSet's current revision: its newest ControllerRevision's hash. */
static char *current_revision(struct op_upgrade *u, const json_t *ds)
{
    _cleanup_json_ json_t *revs = kube_informer_list(u->inf[INF_REVISIONS], u->ns, NULL, NULL);
    const char *best = NULL;
    long long best_rev = -1;
    size_t i;
    json_t *cr;
    json_array_foreach (revs, i, cr) {
        if (!kobj_owned_by(cr, "DaemonSet", kobj_uid(ds)))
            continue;
        long long r = json_integer_value(json_object_get(cr, "revision"));
        if (r > best_rev) {
            best_rev = r;
            best = kobj_label(cr, "controller-revision-hash");
        }
    }
    return best ? xstrdup(best) : NULL;
}

/* The driver version the DaemonSet's driver container runs: its image tag up to the OS
 * suffix ("…/driver:595.91.07-ubuntu22.04" -> "595.91.07"). */
static char *ds_driver_version(const json_t *ds)
{
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(ds, "spec.template.spec.containers"), i, c) {
        const char *img = kobj_str(c, "image");
        const char *slash = img ? strrchr(img, '/') : NULL;
        const char *colon = strrchr(slash ? slash : (img ? img : ""), ':');
        if (!colon)
            continue;
        size_t n = strcspn(colon + 1, "-@");
        if (n > 0 && n < 64)
            return strndup(colon + 1, n);
    }
    return NULL;
}

/* The matrix in force: the ConfigMap's when present (re-parsed when it changes), else the
 * compiled-in one. A ConfigMap that does not parse is an error: nothing moves until fixed. */
static const struct upg_matrix *matrix(struct op_upgrade *u, const char **ret_err)
{
    _cleanup_json_ json_t *cm = kube_informer_get(u->inf[INF_CONFIGMAP], u->ns, MATRIX_CONFIGMAP);
    *ret_err = NULL;
    if (!cm)
        return u->builtin;
    const char *rv = kobj_resource_version(cm);
    if (!streq_ptr(rv, u->override_rv)) {
        upg_matrix_free(u->override);
        u->override = NULL;
        free(u->override_err);
        u->override_err = NULL;
        free(u->override_rv);
        u->override_rv = rv ? xstrdup(rv) : NULL;
        const char *keys[] = {"data", MATRIX_KEY, NULL};
        const char *text = json_string_value(kobj_keys(cm, keys));
        _cleanup_free_ char *src =
            xasprintf("ConfigMap %s/%s: %s", u->ns, MATRIX_CONFIGMAP, MATRIX_KEY);
        struct err e = {0};
        if (!text)
            u->override_err = xasprintf("%s: missing", src);
        else if (upg_matrix_parse(text, strlen(text), src, &u->override, &e) < 0)
            u->override_err = xstrdup(err_msg(&e));
    }
    if (u->override_err) {
        *ret_err = u->override_err;
        return NULL;
    }
    return u->override;
}

/* ---- executing ------------------------------------------------------------------------------ */

static bool event_recent(struct op_upgrade *u, const char *obj, const char *msg, uint64_t now)
{
    _cleanup_free_ char *key = xasprintf("%s|%s", obj, msg);
    json_t *t = json_object_get(u->recent_events, key);
    if (t && now - (uint64_t)json_integer_value(t) < EVENT_TTL_MS)
        return true;
    if (json_object_size(u->recent_events) > 10000) {
        /* forget the expired ones; the map stays bounded */
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe (u->recent_events, tmp, k, v) {
            if (now - (uint64_t)json_integer_value(v) >= EVENT_TTL_MS)
                json_object_del(u->recent_events, k);
        }
    }
    json_object_set_new(u->recent_events, key, json_integer((json_int_t)now));
    return false;
}

static void post_event(struct op_upgrade *u, const json_t *ev, const json_t *cp, uint64_t now)
{
    const char *node = kobj_str(ev, "node");
    const char *pool = kobj_str(ev, "pool");
    const char *msg = kobj_str(ev, "message");
    _cleanup_json_ json_t *inv = NULL;
    if (node)
        inv = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Node", "metadata", "name",
                        node);
    else if (pool)
        inv = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "upgrade.gpuop.dev/v1alpha1", "kind",
                        "DriverUpgradePool", "metadata", "name", pool);
    else
        inv = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "nvidia.com/v1", "kind",
                        "ClusterPolicy", "metadata", "name", kobj_name(cp) ?: "", "uid",
                        kobj_uid(cp) ?: "");
    _cleanup_free_ char *obj = xasprintf("%s/%s",
                                         node   ? "Node"
                                         : pool ? "Pool"
                                                : "CP",
                                         node   ? node
                                         : pool ? pool
                                                : "");
    bool dedupe = !strstr(msg ?: "", "Successfully updated node state label");
    if (dedupe && event_recent(u, obj, msg ?: "", now))
        return;
    struct err e = {0};
    if (u->h.may_write(u->h.u, &e) < 0)
        return;
    struct kube_event ke = {.ns = node || pool ? "default" : u->ns,
                            .involved = inv,
                            .type = kobj_str(ev, "type"),
                            .reason = kobj_str(ev, "reason"),
                            .message = msg,
                            .component = "gpuop-operator"};
    if (kube_event_create(u->kc, &ke, &e) < 0)
        log_warn(COMPONENT, "event not recorded", "reason=%s error=\"%s\"", ke.reason, err_msg(&e));
    else
        u->h.wrote(u->h.u);
}

static json_t *rolled_up_condition(const struct upg_plan *p, bool auto_upgrade,
                                   const char **ret_status, const char **ret_reason)
{
    json_t *lines = json_array();
    *ret_status = "True";
    *ret_reason = "UpgradeDone";
    if (p->frozen) {
        *ret_status = "False";
        *ret_reason = "InvalidUpgradeInput";
        json_array_append_new(lines, json_string(p->error));
        return lines;
    }
    if (!auto_upgrade) {
        *ret_reason = "AutoUpgradeDisabled";
        json_array_append_new(lines, json_string("driver.upgradePolicy.autoUpgrade is false"));
        return lines;
    }
    size_t i;
    json_t *ps;
    json_array_foreach (p->pools, i, ps) {
        int total = (int)json_integer_value(json_object_get(ps, "total"));
        if (total == 0 && !json_object_get(ps, "error"))
            continue;
        struct sbuf b;
        sbuf_init(&b, 4096);
        sbuf_addf(&b, "pool %s: %lld/%d upgraded", kobj_str(ps, "name"),
                  (long long)json_integer_value(json_object_get(ps, "upgraded")), total);
        const char *k;
        json_t *v;
        /* a few nodes by name, then a count: the message stays readable on a large pool */
        size_t shown = 0, n_prog = json_object_size(json_object_get(ps, "inProgress"));
        json_object_foreach (json_object_get(ps, "inProgress"), k, v) {
            if (shown++ == 5)
                break;
            sbuf_addf(&b, ", %s %s", k, json_string_value(v));
        }
        if (n_prog > 5)
            sbuf_addf(&b, " (+%zu more in progress)", n_prog - 5);
        shown = 0;
        size_t n_failed = json_object_size(json_object_get(ps, "failed"));
        json_object_foreach (json_object_get(ps, "failed"), k, v) {
            if (shown++ == 5)
                break;
            sbuf_addf(&b, ", %s failed: %s", k, json_string_value(v));
        }
        if (n_failed > 5)
            sbuf_addf(&b, " (+%zu more failed)", n_failed - 5);
        size_t nw = json_object_size(json_object_get(ps, "waiting"));
        if (nw) {
            json_object_foreach (json_object_get(ps, "waiting"), k, v) {
                sbuf_addf(&b, ", %zu waiting (%s: %s)", nw, k, json_string_value(v));
                break;
            }
        }
        if (kobj_str(ps, "halted")) {
            sbuf_addf(&b, ", halted: %s", kobj_str(ps, "halted"));
            *ret_reason = "RolloutHalted";
        }
        if (kobj_str(ps, "error")) {
            sbuf_addf(&b, ", invalid: %s", kobj_str(ps, "error"));
            *ret_reason = "InvalidUpgradeInput";
        }
        if (json_object_size(json_object_get(ps, "failed")) &&
            !streq_ptr(*ret_reason, "RolloutHalted") &&
            !streq_ptr(*ret_reason, "InvalidUpgradeInput"))
            *ret_reason = "UpgradeFailed";
        if ((json_object_size(json_object_get(ps, "inProgress")) ||
             json_integer_value(json_object_get(ps, "pending"))) &&
            streq_ptr(*ret_reason, "UpgradeDone"))
            *ret_reason = "UpgradeInProgress";
        json_array_append_new(lines, json_string((sbuf_check(&b) == 0 && b.data ? b.data : NULL)
                                                     ?: "pool: (status too long)"));
        sbuf_free(&b);
    }
    if (!streq_ptr(*ret_reason, "UpgradeDone"))
        *ret_status = "False";
    if (json_array_size(lines) == 0)
        json_array_append_new(lines, json_string("no driver-managed node"));
    return lines;
}

/* Sets the DriverUpgrade condition in `status` (kobj_condition's transition rule). */
static void set_condition(json_t *status, const json_t *cp, bool cstatus, const char *reason,
                          const char *message, uint64_t now_ms)
{
    json_t *conds = json_object_get(status, "conditions");
    if (!json_is_array(conds)) {
        conds = json_array();
        json_object_set_new(status, "conditions", conds);
    }
    char now[40];
    time_rfc3339(now_ms, now, sizeof(now));
    json_t *gen = kobj_path(cp, "metadata.generation");
    kobj_conditions_put(conds, kobj_condition(kobj_path(cp, "status.conditions"), COND_TYPE,
                                              cstatus, reason, message, now,
                                              json_is_integer(gen) ? json_integer_value(gen) : -1));
}

static void keep_stored_condition(json_t *status, const json_t *cp)
{
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(cp, "status.conditions"), i, c) {
        if (streq_ptr(kobj_str(c, "type"), COND_TYPE)) {
            json_t *conds = json_object_get(status, "conditions");
            if (json_is_array(conds))
                json_array_append(conds, c);
        }
    }
}

/* Each DriverUpgradePool's status: its progress and the RolloutHalted condition. */
static int write_pool_status(struct op_upgrade *u, const json_t *ps, uint64_t now_ms, struct err *e)
{
    _cleanup_json_ json_t *obj = kube_informer_get(u->inf[INF_POOLS], NULL, kobj_str(ps, "name"));
    if (!obj)
        return 0; /* the default pool */
    _cleanup_json_ json_t *st = json_deep_copy(ps);
    json_object_del(st, "name");
    const char *halted = kobj_str(ps, "halted");
    char now[40];
    time_rfc3339(now_ms, now, sizeof(now));
    json_object_set_new(
        st, "conditions",
        json_pack("[o]", kobj_condition(kobj_path(obj, "status.conditions"), "RolloutHalted",
                                        halted != NULL, halted ? "CanaryFailed" : "NotHalted",
                                        halted ? halted : "", now, -1)));
    char summary[64];
    snprintf(summary, sizeof(summary), "%lld/%lld",
             (long long)json_integer_value(json_object_get(ps, "upgraded")),
             (long long)json_integer_value(json_object_get(ps, "total")));
    json_object_set_new(st, "progress", json_string(summary));
    json_object_set_new(st, "phase",
                        json_string(kobj_str(ps, "error") ? "Invalid"
                                    : halted              ? "Halted"
                                    : json_object_size(json_object_get(ps, "inProgress")) ||
                                            json_integer_value(json_object_get(ps, "pending"))
                                        ? "Upgrading"
                                    : json_object_size(json_object_get(ps, "failed")) ? "Failed"
                                                                                      : "Done"));
    if (json_equal(json_object_get(obj, "status"), st))
        return 0;
    int r = u->h.may_write(u->h.u, e);
    if (r < 0)
        return r;
    json_object_set(obj, "status", st);
    _cleanup_json_ json_t *out = NULL;
    struct err we = {0};
    if (kube_update_status(u->kc, &RES_POOLS, NULL, obj, &out, &we) < 0)
        log_warn(COMPONENT, "pool status not written", "pool=%s error=\"%s\"", kobj_str(ps, "name"),
                 err_msg(&we));
    else
        u->h.wrote(u->h.u);
    return 0;
}

/* The next pass no later than ms from now (0: no pass was asked for). */
static void requeue_within(struct op_upgrade *u, uint64_t ms)
{
    if (u->requeue_ms == 0 || u->requeue_ms > ms)
        u->requeue_ms = ms;
}

/*
 * Executes a plan: the node patches first; a node whose patch did not go through (a conflict:
 * it changed since the pass read it, or an error) keeps its evictions, deletions and Events
 * for the next pass, planned again from what the node is then. *ret_conflict: a patch met a
 * newer node (the next pass soon, the informer may not call for it).
 */
static int execute(struct op_upgrade *u, const struct upg_plan *p, const json_t *cp,
                   uint64_t now_ms, bool *ret_conflict, struct err *e)
{
    size_t i;
    json_t *a;
    int r;
    _cleanup_json_ json_t *not_patched = json_object();
    *ret_conflict = false;
    json_array_foreach (p->node_patches, i, a) {
        if ((r = u->h.may_write(u->h.u, e)) < 0)
            return r;
        struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
        _cleanup_json_ json_t *out = NULL;
        struct err ne = {0};
        const char *node = kobj_str(a, "name");
        json_t *patch = json_object_get(a, "patch");
        r = kube_patch(u->kc, &KUBE_NODES, NULL, node, &po, patch, &out, &ne);
        if (r == 0) {
            u->h.wrote(u->h.u);
            upg_writes_record(u->writes, kobj_path_str(patch, "metadata.resourceVersion"), out);
            continue;
        }
        json_object_set_new(not_patched, node, json_true());
        if (r == KUBE_ECONFLICT) {
            *ret_conflict = true;
            pthread_mutex_lock(&u->lock);
            u->conflicts++;
            pthread_mutex_unlock(&u->lock);
            log_info(COMPONENT, "node changed since the upgrade pass read it, planned again",
                     "node=%s", node);
        } else if (r != -ENOENT) {
            log_warn(COMPONENT, "upgrade node patch failed", "node=%s error=\"%s\"", node,
                     err_msg(&ne));
        }
    }
    json_array_foreach (p->evictions, i, a) {
        if (json_object_get(not_patched, kobj_str(a, "node")))
            continue;
        if ((r = u->h.may_write(u->h.u, e)) < 0)
            return r;
        struct err ee = {0};
        r = kube_evict(u->kc, kobj_str(a, "namespace"), kobj_str(a, "name"), NULL, &ee);
        if (r == KUBE_EBLOCKED)
            log_info(COMPONENT, "eviction refused by a PodDisruptionBudget", "pod=%s/%s node=%s",
                     kobj_str(a, "namespace"), kobj_str(a, "name"), kobj_str(a, "node"));
        else if (r < 0 && r != -ENOENT)
            log_warn(COMPONENT, "eviction failed", "pod=%s/%s error=\"%s\"",
                     kobj_str(a, "namespace"), kobj_str(a, "name"), err_msg(&ee));
        else if (r == 0)
            u->h.wrote(u->h.u);
    }
    json_array_foreach (p->deletions, i, a) {
        if (json_object_get(not_patched, kobj_str(a, "node")))
            continue;
        if ((r = u->h.may_write(u->h.u, e)) < 0)
            return r;
        struct err de = {0};
        struct kube_delete_opts dopts = {0};
        r = kube_delete(u->kc, &KUBE_PODS, kobj_str(a, "namespace"), kobj_str(a, "name"), &dopts,
                        &de);
        if (r < 0 && r != -ENOENT)
            log_warn(COMPONENT, "operand pod deletion failed", "pod=%s/%s error=\"%s\"",
                     kobj_str(a, "namespace"), kobj_str(a, "name"), err_msg(&de));
        else if (r == 0) {
            u->h.wrote(u->h.u);
            log_info(COMPONENT, "operand pod deleted for upgrade", "pod=%s node=%s",
                     kobj_str(a, "name"), kobj_str(a, "node"));
        }
    }
    json_array_foreach (p->events, i, a) {
        const char *node = kobj_str(a, "node");
        if (!node || !json_object_get(not_patched, node))
            post_event(u, a, cp, now_ms);
    }
    json_array_foreach (p->pools, i, a) {
        if ((r = write_pool_status(u, a, now_ms, e)) < 0)
            return r;
    }
    return 0;
}

#define MAX_LISTED_NODES 256 /* nodes whose pods one pass lists (the rest: next pass) */

/* The pods of the nodes being emptied (cordoned and waiting for jobs, deleting GPU pods,
 * draining), listed now by node: a cluster-wide pod informer would hold every pod of the
 * cluster in memory for the few nodes that need them. Appends to `pods`; returns the nodes
 * listed. */
static json_t *list_workloads(struct op_upgrade *u, const json_t *nodes, json_t *pods)
{
    json_t *listed = json_object();
    size_t i;
    json_t *n;
    json_array_foreach ((json_t *)nodes, i, n) {
        int st = upg_state_parse(kobj_label(n, UPG_LABEL_STATE));
        if (st < UPG_CORDON || st > UPG_DRAIN || json_object_size(listed) >= MAX_LISTED_NODES)
            continue;
        _cleanup_free_ char *fs = xasprintf("spec.nodeName=%s", kobj_name(n));
        struct kube_list_opts lo = {.field_selector = fs};
        _cleanup_json_ json_t *list = NULL;
        struct err le = {0};
        if (kube_list(u->kc, &KUBE_PODS, NULL, &lo, &list, &le) < 0) {
            log_warn(COMPONENT, "pods of a node not listed", "node=%s error=\"%s\"", kobj_name(n),
                     err_msg(&le));
            continue;
        }
        size_t k;
        json_t *pod;
        json_array_foreach (json_object_get(list, "items"), k, pod) {
            const char *app = kobj_label(pod, "app");
            if (streq_ptr(kobj_namespace(pod), u->ns) &&
                (streq_ptr(app, DRIVER_DS) || streq_ptr(app, VALIDATOR_DS)))
                continue; /* in the informer already */
            json_array_append_new(pods, project_pod(pod, NULL));
        }
        json_object_set_new(listed, kobj_name(n), json_true());
    }
    return listed;
}

int op_upgrade_reconcile(struct op_upgrade *u, const json_t *cp, const json_t *owned,
                         json_t *status, uint64_t now_ms, struct err *e)
{
    u->requeue_ms = 0;
    if (!cp)
        return 0;
    static const char *const inf_names[N_INF] = {
        "nodes",
        "pods",
        "poddisruptionbudgets",
        "controllerrevisions",
        "driverupgradepools (is the DriverUpgradePool CRD installed?)",
        "nvidiadrivers",
        "configmaps"};
    for (int i = 0; i < N_INF; i++) {
        if (!kube_informer_synced(u->inf[i])) {
            if (now_ms - u->last_unsynced_log_ms > 60000) {
                u->last_unsynced_log_ms = now_ms;
                log_warn(COMPONENT, "driver upgrades wait for an informer to list",
                         "resource=\"%s\"", inf_names[i]);
            }
            keep_stored_condition(status, cp);
            u->requeue_ms = 1000;
            return 0;
        }
    }
    struct upg_policy pol = {0};
    struct err pe = {0};
    bool pol_ok = upg_policy_parse(kobj_path(cp, "spec.driver.upgradePolicy"),
                                   "spec.driver.upgradePolicy", false, &pol, &pe) == 0;
    /* The driver DaemonSets: the ClusterPolicy's, or one per NVIDIADriver and OS (each its
     * pool's: a driver pod is out of date against its own DaemonSet's revision). */
    size_t n_owned = json_array_size(owned), n_sets = 0;
    struct upg_driver_set *sets = xcalloc(n_owned + 1, sizeof(*sets));
    char **strs = xcalloc(2 * n_owned + 1, sizeof(*strs));
    size_t oi;
    const json_t *ds;
    json_array_foreach (owned, oi, ds) {
        if (!streq_ptr(kobj_kind(ds), "DaemonSet") || !streq_ptr(kobj_namespace(ds), u->ns) ||
            !(streq_ptr(kobj_name(ds), DRIVER_DS) || kobj_label(ds, OP_LABEL_NVIDIA_DRIVER)))
            continue;
        char *rev = current_revision(u, ds);
        if (!rev)
            continue;
        char *version = ds_driver_version(ds);
        strs[2 * n_sets] = rev;
        strs[2 * n_sets + 1] = version;
        sets[n_sets++] =
            (struct upg_driver_set){.name = kobj_name(ds),
                                    .ns = u->ns,
                                    .revision = rev,
                                    .version = version ? version : OP_DEFAULT_DRIVER_VERSION};
    }
    const char *matrix_err = NULL;
    const struct upg_matrix *m = matrix(u, &matrix_err);
    _cleanup_json_ json_t *cached = kube_informer_list(u->inf[INF_NODES], NULL, NULL, NULL);
    _cleanup_json_ json_t *nodes = upg_writes_fresh(u->writes, cached);
    _cleanup_json_ json_t *pods = kube_informer_list(u->inf[INF_PODS], NULL, NULL, NULL);
    _cleanup_json_ json_t *listed = list_workloads(u, nodes, pods);
    _cleanup_json_ json_t *pdbs = kube_informer_list(u->inf[INF_PDBS], NULL, NULL, NULL);
    _cleanup_json_ json_t *pools = kube_informer_list(u->inf[INF_POOLS], NULL, NULL, NULL);
    _cleanup_json_ json_t *nvds = kube_informer_list(u->inf[INF_NVDS], NULL, NULL, NULL);
    /* the pools' time zones, read now (a fixed or updated zone file is read on the next pass) */
    _cleanup_(upg_zones_freep) struct upg_zones *zones = upg_zones_new();
    upg_zones_load_pools(zones, NULL, pools);
    struct upg_input in = {.policy = pol_ok ? &pol : NULL,
                           .policy_error = pol_ok ? NULL : err_msg(&pe),
                           .nodes = nodes,
                           .pods = pods,
                           .pods_listed = listed,
                           .pdbs = pdbs,
                           .sets = sets,
                           .n_sets = n_sets,
                           .pools = pools,
                           .nvidia_drivers = nvds,
                           .zones = zones,
                           .matrix = m,
                           .matrix_error = matrix_err,
                           .validation_enabled =
                               find_owned(owned, "DaemonSet", VALIDATOR_DS) != NULL,
                           .now_s = (int64_t)(now_ms / 1000)};
    _cleanup_(upg_plan_freep) struct upg_plan *plan = NULL;
    uint64_t t0 = now_us_mono(), c0 = thread_cpu_us();
    int r = upg_plan(&in, &plan, e);
    uint64_t dt = now_us_mono() - t0, dc = thread_cpu_us() - c0;
    pthread_mutex_lock(&u->lock);
    u->plan_us_last = dt;
    if (dt > u->plan_us_max)
        u->plan_us_max = dt;
    u->plan_cpu_us_last = dc;
    if (dc > u->plan_cpu_us_max)
        u->plan_cpu_us_max = dc;
    u->passes++;
    pthread_mutex_unlock(&u->lock);
    for (size_t k = 0; k < 2 * n_sets; k++)
        free(strs[k]);
    free(strs);
    free(sets);
    if (r < 0) {
        upg_policy_done(&pol);
        return r;
    }
    bool conflict = false;
    r = execute(u, plan, cp, now_ms, &conflict, e);
    bool auto_up = pol_ok && pol.auto_upgrade;
    upg_policy_done(&pol);
    if (r < 0)
        return r;
    if (plan->frozen)
        log_warn(COMPONENT, "driver upgrade refused, nothing changed", "error=\"%s\"", plan->error);
    u->requeue_ms = (uint64_t)plan->requeue_s * 1000;
    /* workload pods are not watched: look again while nodes are being emptied */
    if (json_object_size(listed) > 0)
        requeue_within(u, 2000);
    if (conflict)
        requeue_within(u, 1000);
    const char *cs, *reason;
    _cleanup_json_ json_t *lines = rolled_up_condition(plan, auto_up, &cs, &reason);
    struct sbuf b;
    sbuf_init(&b, 32768);
    size_t i;
    json_t *l;
    json_array_foreach (lines, i, l)
        sbuf_addf(&b, "%s%s", i ? "; " : "", json_string_value(l));
    set_condition(status, cp, streq_ptr(cs, "True"), reason,
                  (sbuf_check(&b) == 0 && b.data ? b.data : NULL) ?: "(too long)", now_ms);
    sbuf_free(&b);
    pthread_mutex_lock(&u->lock);
    u->have_counts = !plan->frozen;
    u->unseen_writes = upg_writes_pending(u->writes);
    u->auto_upgrade = auto_up;
    u->counts = plan->counts;
    json_decref(u->pool_counts);
    u->pool_counts = json_incref(plan->pool_counts);
    pthread_mutex_unlock(&u->lock);
    return 0;
}

uint64_t op_upgrade_requeue_ms(struct op_upgrade *u)
{
    return u ? u->requeue_ms : 0;
}

void op_upgrade_metrics(struct op_upgrade *u, struct prom_writer *w)
{
    if (!u)
        return;
    pthread_mutex_lock(&u->lock);
    bool have = u->have_counts, au = u->auto_upgrade;
    struct upg_counts c = u->counts;
    json_t *pc = json_incref(u->pool_counts);
    uint64_t last = u->plan_us_last, max = u->plan_us_max, passes = u->passes;
    uint64_t clast = u->plan_cpu_us_last, cmax = u->plan_cpu_us_max;
    uint64_t conflicts = u->conflicts;
    size_t unseen = u->unseen_writes;
    pthread_mutex_unlock(&u->lock);
    prom_metric(w, "gpuop_driver_upgrade_plan_seconds", PROM_GAUGE,
                "Time the last upgrade planning pass took", (double)last / 1e6);
    prom_metric(w, "gpuop_driver_upgrade_plan_seconds_max", PROM_GAUGE,
                "Longest upgrade planning pass since start", (double)max / 1e6);
    prom_metric(w, "gpuop_driver_upgrade_plan_cpu_seconds", PROM_GAUGE,
                "CPU time the last upgrade planning pass used", (double)clast / 1e6);
    prom_metric(w, "gpuop_driver_upgrade_plan_cpu_seconds_max", PROM_GAUGE,
                "Most CPU time an upgrade planning pass used since start", (double)cmax / 1e6);
    prom_metric_u64(w, "gpuop_driver_upgrade_passes_total", PROM_COUNTER,
                    "Upgrade planning passes run", passes);
    prom_metric_u64(w, "gpuop_driver_upgrade_node_conflicts_total", PROM_COUNTER,
                    "Upgrade node patches refused because the node changed since the pass read it",
                    conflicts);
    prom_metric(w, "gpuop_driver_upgrade_unseen_writes", PROM_GAUGE,
                "Nodes planned from the controller's own last write, which its informer does not "
                "show yet",
                (double)unseen);
    prom_metric(w, "gpu_operator_auto_upgrade_enabled", PROM_GAUGE,
                "1 when driver.upgradePolicy.autoUpgrade is on", au ? 1 : 0);
    static const struct {
        const char *name, *key, *help;
        size_t off;
    } m[] = {
        {"gpu_operator_nodes_upgrades_in_progress", "in_progress",
         "Nodes with a driver upgrade "
         "in progress",
         offsetof(struct upg_counts, in_progress)},
        {"gpu_operator_nodes_upgrades_done", "done", "Nodes whose driver is up to date",
         offsetof(struct upg_counts, done)},
        {"gpu_operator_nodes_upgrades_failed", "failed", "Nodes whose driver upgrade failed",
         offsetof(struct upg_counts, failed)},
        {"gpu_operator_nodes_upgrades_available", NULL, "Driver upgrades that may start now",
         offsetof(struct upg_counts, available)},
        {"gpu_operator_nodes_upgrades_pending", "pending",
         "Nodes waiting to start a driver "
         "upgrade",
         offsetof(struct upg_counts, pending)},
    };
    for (size_t i = 0; i < ARRAY_SIZE(m); i++) {
        int v = have ? *(const int *)((const char *)&c + m[i].off) : 0;
        prom_metric(w, m[i].name, PROM_GAUGE, m[i].help, v);
    }
    /* per pool: gpuop's own family, so that sums over NVIDIA's stay right */
    prom_family(w, "gpuop_driver_upgrade_pool_nodes", PROM_GAUGE,
                "Driver-managed nodes per upgrade pool and state (in_progress, done, failed, "
                "pending)");
    const char *pool;
    json_t *pv;
    json_object_foreach (pc, pool, pv) {
        for (size_t i = 0; i < ARRAY_SIZE(m); i++) {
            if (!m[i].key)
                continue;
            struct prom_label lab[2] = {{"pool", pool}, {"state", m[i].key}};
            prom_sample(w, "gpuop_driver_upgrade_pool_nodes", lab, 2,
                        (double)json_integer_value(json_object_get(pv, m[i].key)));
        }
    }
    json_decref(pc);
}
