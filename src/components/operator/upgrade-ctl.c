/* SPDX-License-Identifier: Apache-2.0 */
/* The driver upgrade controller's shell (upgrade-ctl.h): informers in, plan executed out. The
 * decisions (states, gates, Events and which of them repeat, pool phases, the DriverUpgrade
 * condition) are src/lib/upgrade's. */
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
#define MATRIX_CONFIGMAP "gpuop-driver-compat"
#define MATRIX_KEY       "matrix.yaml"
#define MAX_LISTED_NODES 256 /* nodes whose pods one pass lists (the rest: next pass) */

static const struct kube_resource RES_POOLS = {"upgrade.gpuop.dev", "v1alpha1",
                                               "driverupgradepools", "DriverUpgradePool", false};
static const struct kube_resource RES_NVIDIADRIVERS = {"nvidia.com", "v1alpha1", "nvidiadrivers",
                                                       "NVIDIADriver", false};

enum { INF_NODES, INF_PODS, INF_PDBS, INF_REVISIONS, INF_POOLS, INF_NVDS, INF_CONFIGMAP, N_INF };

/* A pool's counts, for gpuop_driver_upgrade_pool_nodes. */
struct pool_counts {
    char *name;
    int in_progress, done, failed, pending;
};

struct op_upgrade {
    struct kube_client *kc;
    const char *ns;
    struct op_upgrade_hooks h;
    struct kube_informer *inf[N_INF];
    struct upg_event_log *posted; /* the Events posted lately (reconcile thread) */
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
    struct pool_counts *pools;
    size_t n_pools;
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

static json_t *project_pod(json_t *obj, void *userdata)
{
    (void)userdata;
    json_t *p = kube_project_fields(obj, NULL);
    upg_project_pod(obj, p);
    return p;
}

int op_upgrade_new(struct kube_client *kc, const char *ns, struct kube_informer *nodes,
                   const struct op_upgrade_hooks *h, struct op_upgrade **ret, struct err *e)
{
    struct op_upgrade *u = xcalloc(1, sizeof(*u));
    u->kc = kc;
    u->ns = ns;
    u->h = *h;
    u->posted = upg_event_log_new();
    u->writes = upg_writes_new();
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
         * informer (borrowed: its projection keeps what upg_project_node adds) */
        /* the operand pods only; a node's workloads are listed while it is emptied */
        [INF_PODS] = {&KUBE_PODS,
                      {.ns = ns,
                       .label_selector = "app in (" UPG_DRIVER_APP "," UPG_VALIDATOR_APP ")",
                       .project = project_pod,
                       .index_label_keys = no_index,
                       .handlers = hh}},
        [INF_PDBS] = {&KUBE_PDBS, {.handlers = hh}},
        [INF_REVISIONS] = {&KUBE_CONTROLLERREVISIONS,
                           {.ns = ns,
                            .label_selector = "app=" UPG_DRIVER_APP,
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

static void pool_counts_free(struct pool_counts *pc, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(pc[i].name);
    free(pc);
}

void op_upgrade_free(struct op_upgrade *u)
{
    if (!u)
        return;
    for (int i = 0; i < N_INF; i++)
        if (i != INF_NODES) /* the controller's */
            kube_informer_free(u->inf[i]);
    upg_event_log_free(u->posted);
    upg_writes_free(u->writes);
    pool_counts_free(u->pools, u->n_pools);
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
                (streq_ptr(app, UPG_DRIVER_APP) || streq_ptr(app, UPG_VALIDATOR_APP)))
                continue; /* in the informer already */
            json_array_append_new(pods, project_pod(pod, NULL));
        }
        json_object_set_new(listed, kobj_name(n), json_true());
    }
    return listed;
}

/* ---- executing ------------------------------------------------------------------------------ */

static void post_event(struct op_upgrade *u, const struct upg_event *ev, const json_t *cp,
                       int64_t now_s)
{
    struct err e = {0};
    if (u->h.may_write(u->h.u, &e) < 0)
        return;
    _cleanup_json_ json_t *inv = NULL;
    if (ev->object == UPG_OBJ_NODE)
        inv = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Node", "metadata", "name",
                        ev->name);
    else if (ev->object == UPG_OBJ_POOL)
        inv = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "upgrade.gpuop.dev/v1alpha1", "kind",
                        "DriverUpgradePool", "metadata", "name", ev->name);
    else
        inv = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "nvidia.com/v1", "kind",
                        "ClusterPolicy", "metadata", "name", kobj_name(cp) ?: "", "uid",
                        kobj_uid(cp) ?: "");
    /* the planner holds back a repeat of what was tried, posted or not: a refused Event is not
     * retried on every pass */
    upg_event_log_record(u->posted, ev, now_s);
    struct kube_event ke = {.ns = ev->object == UPG_OBJ_POLICY ? u->ns : "default",
                            .involved = inv,
                            .type = ev->warning ? "Warning" : "Normal",
                            .reason = ev->reason,
                            .message = ev->message,
                            .component = "gpuop-operator"};
    if (kube_event_create(u->kc, &ke, &e) < 0)
        log_warn(COMPONENT, "event not recorded", "reason=%s error=\"%s\"", ke.reason, err_msg(&e));
    else
        u->h.wrote(u->h.u);
}

/* A DriverUpgradePool's planned status, when it changed. */
static int write_pool_status(struct op_upgrade *u, const struct upg_pool_report *r, struct err *e)
{
    if (!r->status || !r->write)
        return 0;
    _cleanup_json_ json_t *obj = kube_informer_get(u->inf[INF_POOLS], NULL, r->name);
    if (!obj)
        return 0; /* gone since the pass read it */
    int rc = u->h.may_write(u->h.u, e);
    if (rc < 0)
        return rc;
    json_object_set(obj, "status", r->status);
    _cleanup_json_ json_t *out = NULL;
    struct err we = {0};
    if (kube_update_status(u->kc, &RES_POOLS, NULL, obj, &out, &we) < 0)
        log_warn(COMPONENT, "pool status not written", "pool=%s error=\"%s\"", r->name,
                 err_msg(&we));
    else
        u->h.wrote(u->h.u);
    return 0;
}

/* A pod eviction or deletion of the plan; `evict`: through the Eviction API. */
static void pod_action(struct op_upgrade *u, const struct upg_pod_ref *a, bool evict)
{
    struct err pe = {0};
    struct kube_delete_opts dopts = {0};
    int r = evict ? kube_evict(u->kc, a->ns, a->name, NULL, &pe)
                  : kube_delete(u->kc, &KUBE_PODS, a->ns, a->name, &dopts, &pe);
    if (r == 0) {
        u->h.wrote(u->h.u);
        if (!evict)
            log_info(COMPONENT, "operand pod deleted for upgrade", "pod=%s node=%s", a->name,
                     a->node);
    } else if (evict && r == KUBE_EBLOCKED) {
        log_info(COMPONENT, "eviction refused by a PodDisruptionBudget", "pod=%s/%s node=%s", a->ns,
                 a->name, a->node);
    } else if (r != -ENOENT) {
        log_warn(COMPONENT, evict ? "eviction failed" : "operand pod deletion failed",
                 "pod=%s/%s error=\"%s\"", a->ns, a->name, err_msg(&pe));
    }
}

/* Patches the plan's nodes; those not patched (a conflict: changed since the pass read them, or
 * an error) go into `not_patched`. *ret_conflict: one met a newer node. */
static int patch_nodes(struct op_upgrade *u, const struct upg_plan *p, json_t *not_patched,
                       bool *ret_conflict, struct err *e)
{
    for (size_t i = 0; i < p->n_patches; i++) {
        const struct upg_node_patch *a = &p->patches[i];
        int r = u->h.may_write(u->h.u, e);
        if (r < 0)
            return r;
        struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
        _cleanup_json_ json_t *out = NULL;
        struct err ne = {0};
        r = kube_patch(u->kc, &KUBE_NODES, NULL, a->node, &po, a->patch, &out, &ne);
        if (r == 0) {
            u->h.wrote(u->h.u);
            upg_writes_record(u->writes, kobj_path_str(a->patch, "metadata.resourceVersion"), out);
            continue;
        }
        json_object_set_new(not_patched, a->node, json_true());
        if (r == KUBE_ECONFLICT) {
            *ret_conflict = true;
            pthread_mutex_lock(&u->lock);
            u->conflicts++;
            pthread_mutex_unlock(&u->lock);
            log_info(COMPONENT, "node changed since the upgrade pass read it, planned again",
                     "node=%s", a->node);
        } else if (r != -ENOENT) {
            log_warn(COMPONENT, "upgrade node patch failed", "node=%s error=\"%s\"", a->node,
                     err_msg(&ne));
        }
    }
    return 0;
}

/*
 * Executes a plan: the node patches first; a node whose patch did not go through keeps its
 * evictions, deletions and Events for the next pass, planned again from what the node is then.
 * *ret_conflict: a patch met a newer node (the next pass soon, the informer may not call for it).
 */
static int execute(struct op_upgrade *u, const struct upg_plan *p, const json_t *cp, int64_t now_s,
                   bool *ret_conflict, struct err *e)
{
    _cleanup_json_ json_t *not_patched = json_object();
    *ret_conflict = false;
    int r = patch_nodes(u, p, not_patched, ret_conflict, e);
    if (r < 0)
        return r;
    for (int evict = 1; evict >= 0; evict--) {
        const struct upg_pod_ref *list = evict ? p->evictions : p->deletions;
        size_t n = evict ? p->n_evictions : p->n_deletions;
        for (size_t i = 0; i < n; i++) {
            if (json_object_get(not_patched, list[i].node))
                continue;
            if ((r = u->h.may_write(u->h.u, e)) < 0)
                return r;
            pod_action(u, &list[i], evict);
        }
    }
    for (size_t i = 0; i < p->n_events; i++) {
        const struct upg_event *ev = &p->events[i];
        if (ev->object != UPG_OBJ_NODE || !json_object_get(not_patched, ev->name))
            post_event(u, ev, cp, now_s);
    }
    for (size_t i = 0; i < p->n_pools; i++)
        if ((r = write_pool_status(u, &p->pools[i], e)) < 0)
            return r;
    return 0;
}

/* ---- one pass ------------------------------------------------------------------------------- */

/* The next pass no later than ms from now (0: no pass was asked for). */
static void requeue_within(struct op_upgrade *u, uint64_t ms)
{
    if (u->requeue_ms == 0 || u->requeue_ms > ms)
        u->requeue_ms = ms;
}

/* Puts the DriverUpgrade condition into `status`: `c`, or (NULL) the stored one as it is. */
static void put_condition(json_t *status, const json_t *cp, const struct upg_condition *c,
                          uint64_t now_ms)
{
    json_t *conds = json_object_get(status, "conditions");
    if (!json_is_array(conds)) {
        conds = json_array();
        json_object_set_new(status, "conditions", conds);
    }
    const json_t *stored = kobj_path(cp, "status.conditions");
    if (!c) {
        size_t i;
        json_t *sc;
        json_array_foreach ((json_t *)stored, i, sc) {
            if (streq_ptr(kobj_str(sc, "type"), UPG_CONDITION_TYPE))
                kobj_conditions_put(conds, json_incref(sc));
        }
        return;
    }
    char now[40];
    time_rfc3339(now_ms, now, sizeof(now));
    json_t *gen = kobj_path(cp, "metadata.generation");
    kobj_conditions_put(conds,
                        kobj_condition(stored, UPG_CONDITION_TYPE, c->status, c->reason, c->message,
                                       now, json_is_integer(gen) ? json_integer_value(gen) : -1));
}

/* Every informer listed; else (logged once a minute) the pass waits. */
static bool synced(struct op_upgrade *u, uint64_t now_ms)
{
    static const char *const inf_names[N_INF] = {
        "nodes",
        "pods",
        "poddisruptionbudgets",
        "controllerrevisions",
        "driverupgradepools (is the DriverUpgradePool CRD installed?)",
        "nvidiadrivers",
        "configmaps"};
    for (int i = 0; i < N_INF; i++) {
        if (kube_informer_synced(u->inf[i]))
            continue;
        if (now_ms - u->last_unsynced_log_ms > 60000) {
            u->last_unsynced_log_ms = now_ms;
            log_warn(COMPONENT, "driver upgrades wait for an informer to list", "resource=\"%s\"",
                     inf_names[i]);
        }
        return false;
    }
    return true;
}

static void record_metrics(struct op_upgrade *u, const struct upg_plan *plan, bool auto_up,
                           uint64_t plan_us, uint64_t plan_cpu_us)
{
    struct pool_counts *pc = xcalloc(plan->n_pools + 1, sizeof(*pc));
    for (size_t i = 0; i < plan->n_pools; i++) {
        const struct upg_pool_report *r = &plan->pools[i];
        pc[i] = (struct pool_counts){xstrdup(r->name), (int)r->in_progress.n, r->upgraded,
                                     (int)r->failed.n, r->pending};
    }
    pthread_mutex_lock(&u->lock);
    u->plan_us_last = plan_us;
    if (plan_us > u->plan_us_max)
        u->plan_us_max = plan_us;
    u->plan_cpu_us_last = plan_cpu_us;
    if (plan_cpu_us > u->plan_cpu_us_max)
        u->plan_cpu_us_max = plan_cpu_us;
    u->passes++;
    u->have_counts = !plan->frozen;
    u->unseen_writes = upg_writes_pending(u->writes);
    u->auto_upgrade = auto_up;
    u->counts = plan->counts;
    pool_counts_free(u->pools, u->n_pools);
    u->pools = pc;
    u->n_pools = plan->n_pools;
    pthread_mutex_unlock(&u->lock);
}

int op_upgrade_reconcile(struct op_upgrade *u, const json_t *cp, const json_t *owned,
                         json_t *status, uint64_t now_ms, struct err *e)
{
    u->requeue_ms = 0;
    if (!cp)
        return 0;
    if (!synced(u, now_ms)) {
        put_condition(status, cp, NULL, now_ms);
        u->requeue_ms = 1000;
        return 0;
    }
    struct upg_policy pol = {0};
    struct err pe = {0};
    bool pol_ok = upg_policy_parse(kobj_path(cp, "spec.driver.upgradePolicy"),
                                   "spec.driver.upgradePolicy", false, &pol, &pe) == 0;
    _cleanup_json_ json_t *revisions = kube_informer_list(u->inf[INF_REVISIONS], u->ns, NULL, NULL);
    size_t n_sets = 0;
    _cleanup_free_ struct upg_driver_set *sets =
        upg_driver_sets(owned, revisions, u->ns, OP_DEFAULT_DRIVER_VERSION, &n_sets);
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
    bool validator = op_find_daemonset(owned, u->ns, UPG_VALIDATOR_APP) != NULL;
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
                           .validation_enabled = validator,
                           .posted = u->posted,
                           .now_s = (int64_t)(now_ms / 1000)};
    _cleanup_(upg_plan_freep) struct upg_plan *plan = NULL;
    uint64_t t0 = now_us_mono(), c0 = thread_cpu_us();
    int r = upg_plan(&in, &plan, e);
    uint64_t dt = now_us_mono() - t0, dc = thread_cpu_us() - c0;
    bool auto_up = pol_ok && pol.auto_upgrade;
    upg_policy_done(&pol);
    if (r < 0)
        return r;
    bool conflict = false;
    if ((r = execute(u, plan, cp, in.now_s, &conflict, e)) < 0)
        return r;
    if (plan->frozen)
        log_warn(COMPONENT, "driver upgrade refused, nothing changed", "error=\"%s\"", plan->error);
    u->requeue_ms = (uint64_t)plan->requeue_s * 1000;
    /* workload pods are not watched: look again while nodes are being emptied */
    if (json_object_size(listed) > 0)
        requeue_within(u, 2000);
    if (conflict)
        requeue_within(u, 1000);
    put_condition(status, cp, &plan->condition, now_ms);
    record_metrics(u, plan, auto_up, dt, dc);
    return 0;
}

uint64_t op_upgrade_requeue_ms(struct op_upgrade *u)
{
    return u ? u->requeue_ms : 0;
}

/* ---- metrics -------------------------------------------------------------------------------- */

void op_upgrade_metrics(struct op_upgrade *u, struct prom_writer *w)
{
    if (!u)
        return;
    pthread_mutex_lock(&u->lock);
    bool have = u->have_counts, au = u->auto_upgrade;
    struct upg_counts c = u->counts;
    size_t np = u->n_pools;
    struct pool_counts *pc = xcalloc(np + 1, sizeof(*pc));
    for (size_t i = 0; i < np; i++) {
        pc[i] = u->pools[i];
        pc[i].name = xstrdup(u->pools[i].name);
    }
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
        size_t off, pool_off; /* in struct upg_counts, struct pool_counts (0: none) */
    } m[] = {
        {"gpu_operator_nodes_upgrades_in_progress", "in_progress",
         "Nodes with a driver upgrade in progress", offsetof(struct upg_counts, in_progress),
         offsetof(struct pool_counts, in_progress)},
        {"gpu_operator_nodes_upgrades_done", "done", "Nodes whose driver is up to date",
         offsetof(struct upg_counts, done), offsetof(struct pool_counts, done)},
        {"gpu_operator_nodes_upgrades_failed", "failed", "Nodes whose driver upgrade failed",
         offsetof(struct upg_counts, failed), offsetof(struct pool_counts, failed)},
        {"gpu_operator_nodes_upgrades_available", NULL, "Driver upgrades that may start now",
         offsetof(struct upg_counts, available), 0},
        {"gpu_operator_nodes_upgrades_pending", "pending",
         "Nodes waiting to start a driver upgrade", offsetof(struct upg_counts, pending),
         offsetof(struct pool_counts, pending)},
    };
    for (size_t i = 0; i < ARRAY_SIZE(m); i++) {
        int v = have ? *(const int *)((const char *)&c + m[i].off) : 0;
        prom_metric(w, m[i].name, PROM_GAUGE, m[i].help, v);
    }
    /* per pool: gpuop's own family, so that sums over NVIDIA's stay right */
    prom_family(w, "gpuop_driver_upgrade_pool_nodes", PROM_GAUGE,
                "Driver-managed nodes per upgrade pool and state (in_progress, done, failed, "
                "pending)");
    for (size_t p = 0; p < np; p++) {
        for (size_t i = 0; i < ARRAY_SIZE(m); i++) {
            if (!m[i].key)
                continue;
            struct prom_label lab[2] = {{"pool", pc[p].name}, {"state", m[i].key}};
            prom_sample(w, "gpuop_driver_upgrade_pool_nodes", lab, 2,
                        (double)*(const int *)((const char *)&pc[p] + m[i].pool_off));
        }
    }
    pool_counts_free(pc, np);
}
