/* SPDX-License-Identifier: Apache-2.0 */
/* The driver upgrade controller's shell (upgrade-ctl.h): informers in, plan executed out. The
 * decisions (states, gates, Events and which of them repeat, pool phases, the DriverUpgrade
 * condition) are src/lib/upgrade's. This file reads the planner's inputs and runs a pass; the
 * plan's writes are upgrade-exec.c's, the figures /metrics shows upgrade-metrics.c's. */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "operator-internal.h"
#include "operator.h"
#include "upgrade-ctl-internal.h"
#include "yamlcfg.h"

#define MATRIX_CONFIGMAP "gpuop-driver-compat"
#define MATRIX_KEY       "matrix.yaml"
#define MAX_LISTED_NODES 256 /* nodes whose pods one pass lists (the rest: next pass) */

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

/* An operand pod as the planners read it (upg_pod_compact), its alike part shared with the
 * other pods' through the controller's table (the informer thread's alone). */
static json_t *project_pod(json_t *obj, void *userdata)
{
    struct op_upgrade *u = userdata;
    json_t *p = upg_pod_compact(obj, u->pod_intern);
    kobj_intern_prune(u->pod_intern, &u->pod_intern_pruned, 256);
    return p;
}

int op_upgrade_new(struct kube_client *kc, const char *ns, struct kube_informer *nodes,
                   const struct op_upgrade_hooks *h, struct op_upgrade **ret, struct err *e)
{
    struct op_upgrade *u = xcalloc(1, sizeof(*u));
    u->kc = kc;
    u->ns = ns;
    u->h = *h;
    u->pod_intern = json_object();
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
                       .project_userdata = u,
                       .index_label_keys = no_index,
                       .handlers = hh}},
        [INF_PDBS] = {&KUBE_PDBS, {.handlers = hh}},
        [INF_REVISIONS] = {&KUBE_CONTROLLERREVISIONS,
                           {.ns = ns,
                            .label_selector = "app=" UPG_DRIVER_APP,
                            .keep_fields =
                                (const char *const[]){"metadata.ownerReferences", "revision", NULL},
                            .handlers = hh}},
        [INF_POOLS] = {&KUBE_DRIVERUPGRADEPOOLS, {.handlers = hh}},
        [INF_NVDS] = {&KUBE_NVIDIADRIVERS, {.handlers = hh}},
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

static void pass_clear(struct op_upgrade *u)
{
    upg_plan_free(u->pass);
    u->pass = NULL;
    json_decref(u->pass_wishes);
    u->pass_wishes = NULL;
}

void op_upgrade_free(struct op_upgrade *u)
{
    if (!u)
        return;
    for (int i = 0; i < N_INF; i++)
        if (i != INF_NODES) /* the controller's */
            kube_informer_free(u->inf[i]);
    pass_clear(u);
    upg_event_log_free(u->posted);
    json_decref(u->pod_intern);
    upg_writes_free(u->writes);
    op_upgrade_pool_counts_free(u->pools, u->n_pools);
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

json_t *op_upgrade_list_node_pods(struct op_upgrade *u, const json_t *want, json_t *pods)
{
    json_t *listed = json_object();
    const char *node;
    json_t *v;
    json_object_foreach ((json_t *)want, node, v) {
        if (json_object_size(listed) >= MAX_LISTED_NODES)
            break;
        _cleanup_free_ char *fs = xasprintf("spec.nodeName=%s", node);
        struct kube_list_opts lo = {.field_selector = fs};
        _cleanup_json_ json_t *list = NULL;
        struct err le = {0};
        if (kube_list(u->kc, &KUBE_PODS, NULL, &lo, &list, &le) < 0) {
            log_warn(UPG_COMPONENT, "pods of a node not listed", "node=%s error=\"%s\"", node,
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
            json_t *p = upg_pod_compact(pod, NULL);
            if (p)
                json_array_append_new(pods, p);
        }
        json_object_set_new(listed, node, json_true());
    }
    return listed;
}

/* The pods of the nodes being emptied (cordoned and waiting for jobs, deleting GPU pods,
 * draining), listed now by node: a cluster-wide pod informer would hold every pod of the
 * cluster in memory for the few nodes that need them. Appends to `pods`; returns the nodes
 * listed. */
static json_t *list_workloads(struct op_upgrade *u, const json_t *nodes, json_t *pods)
{
    _cleanup_json_ json_t *want = json_object();
    size_t i;
    json_t *n;
    json_array_foreach ((json_t *)nodes, i, n) {
        int st = upg_state_parse(kobj_label(n, UPG_LABEL_STATE));
        if (st >= UPG_CORDON && st <= UPG_DRAIN && kobj_name(n))
            json_object_set_new(want, kobj_name(n), json_true());
    }
    return op_upgrade_list_node_pods(u, want, pods);
}

/* ---- one pass ------------------------------------------------------------------------------- */

/* The next pass no later than ms from now (0: no pass was asked for). */
static void requeue_within(struct op_upgrade *u, uint64_t ms)
{
    if (u->requeue_ms == 0 || u->requeue_ms > ms)
        u->requeue_ms = ms;
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
            log_warn(UPG_COMPONENT, "driver upgrades wait for an informer to list",
                     "resource=\"%s\"", inf_names[i]);
        }
        return false;
    }
    return true;
}

int op_upgrade_plan(struct op_upgrade *u, const json_t *cp, const json_t *owned,
                    const json_t *driver_nodes, uint64_t now_ms, struct err *e)
{
    pass_clear(u);
    u->requeue_ms = 0;
    u->pass_now_s = (int64_t)(now_ms / 1000);
    if (!cp)
        return 0;
    if (!synced(u, now_ms)) {
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
                           .driver_nodes = driver_nodes,
                           .validation_enabled = validator,
                           .posted = u->posted,
                           .holds = u->holds,
                           .n_holds = u->n_holds,
                           .now_s = u->pass_now_s};
    _cleanup_(upg_plan_freep) struct upg_plan *plan = NULL;
    uint64_t t0 = now_us_mono(), c0 = thread_cpu_us();
    int r = upg_plan(&in, &plan, e);
    uint64_t dt = now_us_mono() - t0, dc = thread_cpu_us() - c0;
    bool auto_up = pol_ok && pol.auto_upgrade;
    upg_policy_done(&pol);
    if (r < 0)
        return r;
    if (plan->frozen)
        log_warn(UPG_COMPONENT, "driver upgrade refused, nothing changed", "error=\"%s\"",
                 plan->error);
    u->requeue_ms = (uint64_t)plan->requeue_s * 1000;
    /* workload pods are not watched: look again while nodes are being emptied */
    if (json_object_size(listed) > 0)
        requeue_within(u, 2000);
    op_upgrade_record(u, plan, auto_up, dt, dc);
    /* the wishes move to pass_wishes, their one holder from here: a node's is let go of as soon
     * as its patch went through (op_upgrade_node_written), not kept for the whole pass */
    u->pass_wishes = json_object();
    for (size_t i = 0; i < plan->n_patches; i++)
        json_object_set_new(u->pass_wishes, plan->patches[i].node,
                            steal_ptr(&plan->patches[i].patch));
    u->pass = steal_ptr(&plan);
    return 0;
}

const json_t *op_upgrade_node_wishes(struct op_upgrade *u)
{
    return u->pass_wishes;
}

void op_upgrade_condition(struct op_upgrade *u, const json_t *cp, json_t *status, uint64_t now_ms)
{
    if (!cp)
        return;
    if (!u->pass) {
        op_status_condition_keep(status, cp, UPG_CONDITION_TYPE);
        return;
    }
    op_status_condition_set(status, cp, UPG_CONDITION_TYPE, u->pass->condition.status,
                            u->pass->condition.reason, u->pass->condition.message, now_ms);
}

void op_upgrade_set_holds(struct op_upgrade *u, const struct upg_hold *holds, size_t n)
{
    u->holds = holds;
    u->n_holds = n;
}

uint64_t op_upgrade_requeue_ms(struct op_upgrade *u)
{
    return u ? u->requeue_ms : 0;
}
