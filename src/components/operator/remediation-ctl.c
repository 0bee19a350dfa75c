/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU remediation controller's shell (remediation-ctl.h): the planner's inputs read from the
 * upgrade controller's informers, one pass of rem_plan, its plan executed. The decisions (the
 * states, the budget, the breakers, the Events, the condition, the holds) are
 * src/lib/remediation's. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "operator-internal.h"
#include "operator.h"
#include "remediation-ctl.h"
#include "remediation.h"
#include "upgrade-ctl-internal.h"
#include "yamlcfg.h"

#define REM_COMPONENT "operator"

struct op_remediation {
    struct kube_client *kc;
    const char *ns;
    struct op_upgrade *upg; /* its informers and its record of node writes (borrowed) */
    struct op_upgrade_hooks h;
    /* the last pass's plan, kept for the holds handed to the upgrade pass (their strings are
     * the plan's) */
    struct rem_plan *plan;
    struct upg_hold *holds;
    uint64_t requeue_ms;
    uint64_t last_unsynced_log_ms;
    /* The breakers' annotations for the ClusterPolicy: planned this pass and written after its
     * status (op_remediation_write_policy; written before, they would make that write conflict),
     * then kept as written until the informer's ClusterPolicy shows them (read-your-writes: a
     * pass in between would open or close the breaker again). {key: value or null}. */
    json_t *cp_pending;
    json_t *cp_written;

    pthread_mutex_t lock; /* the figures below, for /metrics */
    bool have_counts;
    int counts[REM_N_STATES];
    struct {
        char *name;
        bool open;
    } * breakers;
    size_t n_breakers;
    struct {
        char *name;
        enum rem_state state;
        int64_t since_ms;
    } * nodes; /* the nodes out of service, for the alerts on how long */
    size_t n_nodes;
    uint64_t quarantines, recoveries, conflicts;
    double quarantine_s_sum, recovery_s_sum, quarantine_s_last, recovery_s_last;
};

int op_remediation_new(struct kube_client *kc, const char *ns, struct op_upgrade *upg,
                       const struct op_upgrade_hooks *h, struct op_remediation **ret, struct err *e)
{
    (void)e;
    struct op_remediation *r = xcalloc(1, sizeof(*r));
    r->kc = kc;
    r->ns = ns;
    r->upg = upg;
    r->h = *h;
    r->cp_pending = json_object();
    r->cp_written = json_object();
    pthread_mutex_init(&r->lock, NULL);
    *ret = r;
    return 0;
}

static void figures_free(struct op_remediation *r)
{
    for (size_t i = 0; i < r->n_breakers; i++)
        free(r->breakers[i].name);
    free(r->breakers);
    r->breakers = NULL;
    r->n_breakers = 0;
    for (size_t i = 0; i < r->n_nodes; i++)
        free(r->nodes[i].name);
    free(r->nodes);
    r->nodes = NULL;
    r->n_nodes = 0;
}

void op_remediation_free(struct op_remediation *r)
{
    if (!r)
        return;
    if (r->upg)
        op_upgrade_set_holds(r->upg, NULL, 0);
    free(r->holds);
    rem_plan_free(r->plan);
    figures_free(r);
    json_decref(r->cp_pending);
    json_decref(r->cp_written);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* ---- the plan's writes ---------------------------------------------------------------------- */

/*
 * The controller's one node write: a planned merge patch (labels, annotations, cordon, taints)
 * with the node's resourceVersion as its precondition. The result goes into the upgrade
 * controller's record of gpuop's node writes, so the next pass of either plans from it while
 * the informer lags. 1: written; 0: not (a conflict, *ret_conflict set; gone; an error, logged);
 * -ECANCELED when the lease is lost.
 */
static int write_node(struct op_remediation *r, const struct rem_node_patch *np, bool *ret_conflict,
                      struct err *e)
{
    int rc = r->h.may_write(r->h.u, e);
    if (rc < 0)
        return rc;
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
    _cleanup_json_ json_t *out = NULL;
    struct err ne = {0};
    rc = kube_patch(r->kc, &KUBE_NODES, NULL, np->node, &po, np->patch, &out, &ne);
    if (rc == 0) {
        r->h.wrote(r->h.u);
        upg_writes_record(r->upg->writes, np->node,
                          kobj_path_str(np->patch, "metadata.resourceVersion"),
                          kobj_resource_version(out), np->patch);
        return 1;
    }
    if (rc == KUBE_ECONFLICT) {
        *ret_conflict = true;
        pthread_mutex_lock(&r->lock);
        r->conflicts++;
        pthread_mutex_unlock(&r->lock);
        log_info(REM_COMPONENT, "node changed since the remediation pass read it, planned again",
                 "node=%s", np->node);
    } else if (rc != -ENOENT) {
        log_warn(REM_COMPONENT, "remediation node patch failed", "node=%s error=\"%s\"", np->node,
                 err_msg(&ne));
    }
    return 0;
}

/* An eviction (through the Eviction API: the pod's PodDisruptionBudgets decide) or a validator
 * pod's deletion. */
static void pod_action(struct op_remediation *r, const struct rem_pod_ref *a, bool evict)
{
    struct err pe = {0};
    struct kube_delete_opts dopts = {0};
    int rc = evict ? kube_evict(r->kc, a->ns, a->name, NULL, &pe)
                   : kube_delete(r->kc, &KUBE_PODS, a->ns, a->name, &dopts, &pe);
    if (rc == 0) {
        r->h.wrote(r->h.u);
        log_info(REM_COMPONENT, evict ? "pod evicted for remediation" : "validator pod replaced",
                 "pod=%s/%s node=%s", a->ns, a->name, a->node);
    } else if (evict && rc == KUBE_EBLOCKED) {
        log_info(REM_COMPONENT, "eviction refused by a PodDisruptionBudget", "pod=%s/%s node=%s",
                 a->ns, a->name, a->node);
    } else if (rc != -ENOENT) {
        log_warn(REM_COMPONENT, evict ? "eviction failed" : "validator pod deletion failed",
                 "pod=%s/%s error=\"%s\"", a->ns, a->name, err_msg(&pe));
    }
}

static void post_event(struct op_remediation *r, const struct rem_event *ev, const json_t *cp)
{
    struct err e = {0};
    if (r->h.may_write(r->h.u, &e) < 0)
        return;
    _cleanup_json_ json_t *inv = NULL;
    const char *ns = "default"; /* cluster-scoped objects' Events */
    if (ev->node)
        inv = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Node", "metadata", "name",
                        ev->node);
    else if (ev->pool && strcmp(ev->pool, "default") != 0)
        inv = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "upgrade.gpuop.dev/v1alpha1", "kind",
                        "DriverUpgradePool", "metadata", "name", ev->pool);
    else {
        inv = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "nvidia.com/v1", "kind",
                        "ClusterPolicy", "metadata", "name", kobj_name(cp) ?: "", "uid",
                        kobj_uid(cp) ?: "");
        ns = r->ns;
    }
    if (ev->warning)
        log_warn(REM_COMPONENT, "remediation event", "node=%s pool=%s reason=%s message=\"%s\"",
                 ev->node ?: "", ev->pool ?: "", ev->reason, ev->message);
    struct kube_event ke = {.ns = ns,
                            .involved = inv,
                            .type = ev->warning ? "Warning" : "Normal",
                            .reason = ev->reason,
                            .message = ev->message,
                            .component = "gpuop-operator"};
    if (kube_event_create(r->kc, &ke, &e) < 0)
        log_warn(REM_COMPONENT, "event not recorded", "reason=%s error=\"%s\"", ke.reason,
                 err_msg(&e));
    else
        r->h.wrote(r->h.u);
}

/* An annotation patch of a breaker's object; logged, never fatal. */
static void patch_breaker(struct op_remediation *r, const struct kube_resource *res,
                          const char *name, json_t *anns)
{
    _cleanup_json_ json_t *patch = json_pack("{s:{s:O}}", "metadata", "annotations", anns);
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
    _cleanup_json_ json_t *out = NULL;
    struct err be = {0};
    int rc = kube_patch(r->kc, res, NULL, name, &po, patch, &out, &be);
    if (rc == 0) {
        r->h.wrote(r->h.u);
        log_info(REM_COMPONENT, "remediation breaker state written", "%s=%s",
                 res == &KUBE_DRIVERUPGRADEPOOLS ? "pool" : "clusterpolicy", name);
    } else if (rc != -ENOENT) {
        log_warn(REM_COMPONENT, "breaker state not written", "%s=%s error=\"%s\"",
                 res == &KUBE_DRIVERUPGRADEPOOLS ? "pool" : "clusterpolicy", name, err_msg(&be));
    }
}

/* A breaker's state: a DriverUpgradePool's annotation is written now; the ClusterPolicy's (the
 * cluster's breaker and the default pool's) wait for op_remediation_write_policy. */
static int write_breaker(struct op_remediation *r, const struct rem_breaker_update *b,
                         struct err *e)
{
    json_t *v = b->value ? json_string(b->value) : json_null();
    if (!b->pool || strcmp(b->key, REM_ANN_BREAKER) != 0) {
        json_object_set_new(r->cp_pending, b->key, v);
        return 0;
    }
    _cleanup_json_ json_t *anns = json_pack("{s:o}", b->key, v);
    int rc = r->h.may_write(r->h.u, e);
    if (rc < 0)
        return rc;
    patch_breaker(r, &KUBE_DRIVERUPGRADEPOOLS, b->pool, anns);
    return 0;
}

int op_remediation_write_policy(struct op_remediation *r, const json_t *cp, struct err *e)
{
    if (!r || json_object_size(r->cp_pending) == 0 || !kobj_name(cp))
        return 0;
    int rc = r->h.may_write(r->h.u, e);
    if (rc < 0)
        return rc;
    /* the active policy: a ClusterPolicy, or a GPUCluster */
    patch_breaker(
        r, streq_ptr(kobj_kind(cp), "GPUCluster") ? &KUBE_GPUCLUSTERS : &KUBE_CLUSTERPOLICIES,
        kobj_name(cp), r->cp_pending);
    json_object_update(r->cp_written, r->cp_pending);
    json_object_clear(r->cp_pending);
    return 0;
}

/* The ClusterPolicy's annotations as the planner reads them: the informer's, with the breakers'
 * values this controller wrote and the informer does not show yet. A new object. */
static json_t *policy_annotations(struct op_remediation *r, const json_t *cp)
{
    const json_t *have = kobj_annotations(cp);
    json_t *anns = have ? json_deep_copy(have) : json_object();
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe (r->cp_written, tmp, k, v) {
        const char *now = kobj_str(have, k);
        bool seen = json_is_null(v) ? !now : streq_ptr(now, json_string_value(v));
        if (seen) {
            json_object_del(r->cp_written, k); /* the informer caught up */
        } else if (json_is_null(v)) {
            json_object_del(anns, k);
        } else {
            json_object_set(anns, k, v);
        }
    }
    return anns;
}

/* Executes a plan: the node patches first; a node whose patch did not go through keeps its
 * evictions, deletions and Events for the next pass, planned again from the node as it is then.
 * Those nodes go into `not_patched`. Fails only when the lease is lost. */
static int execute(struct op_remediation *r, const struct rem_plan *p, const json_t *cp,
                   json_t *not_patched, bool *ret_conflict, struct err *e)
{
    int rc;
    for (size_t i = 0; i < p->n_patches; i++) {
        if ((rc = write_node(r, &p->patches[i], ret_conflict, e)) < 0)
            return rc;
        if (rc == 0)
            json_object_set_new(not_patched, p->patches[i].node, json_true());
    }
    for (int evict = 1; evict >= 0; evict--) {
        const struct rem_pod_ref *list = evict ? p->evictions : p->deletions;
        size_t n = evict ? p->n_evictions : p->n_deletions;
        for (size_t i = 0; i < n; i++) {
            if (json_object_get(not_patched, list[i].node))
                continue;
            if ((rc = r->h.may_write(r->h.u, e)) < 0)
                return rc;
            pod_action(r, &list[i], evict);
        }
    }
    for (size_t i = 0; i < p->n_requests; i++) {
        const struct rem_request *q = &p->requests[i];
        if (q->fresh && !json_object_get(not_patched, q->node))
            log_info(REM_COMPONENT, "remediation requested", "node=%s action=%s id=%s gpus=%s",
                     q->node, gh_action_name(q->action), q->id, q->gpus ?: "");
    }
    for (size_t i = 0; i < p->n_events; i++) {
        const struct rem_event *ev = &p->events[i];
        if (!ev->node || !json_object_get(not_patched, ev->node))
            post_event(r, ev, cp);
    }
    for (size_t i = 0; i < p->n_breakers; i++)
        if ((rc = write_breaker(r, &p->breakers[i], e)) < 0)
            return rc;
    for (size_t i = 0; i < p->n_nodes; i++) {
        const struct rem_node_report *n = &p->nodes[i];
        if (json_object_get(not_patched, n->node))
            continue;
        if (n->quarantine_ms >= 0)
            log_info(REM_COMPONENT, "node quarantined",
                     "node=%s action=%s fault_to_quarantine_ms=%lld", n->node,
                     gh_action_name(n->action), (long long)n->quarantine_ms);
        if (n->recovery_ms >= 0)
            log_info(REM_COMPONENT, "node back in service", "node=%s fault_to_recovery_ms=%lld",
                     n->node, (long long)n->recovery_ms);
    }
    return 0;
}

/* ---- metrics -------------------------------------------------------------------------------- */

/* The pass's figures; the nodes not patched are measured on the pass that patches them. */
static void record(struct op_remediation *r, const struct rem_plan *p, const json_t *not_patched)
{
    pthread_mutex_lock(&r->lock);
    r->have_counts = true;
    memcpy(r->counts, p->counts, sizeof(r->counts));
    figures_free(r);
    r->breakers = xcalloc(p->n_pools + 1, sizeof(*r->breakers));
    for (size_t i = 0; i < p->n_pools; i++) {
        r->breakers[i].name = xstrdup(p->pools[i].name);
        r->breakers[i].open = p->pools[i].breaker_open;
    }
    r->n_breakers = p->n_pools;
    r->nodes = xcalloc(p->n_nodes + 1, sizeof(*r->nodes));
    for (size_t i = 0; i < p->n_nodes; i++) {
        const struct rem_node_report *n = &p->nodes[i];
        if (n->state == REM_HEALTHY || n->since_ms <= 0)
            continue;
        r->nodes[r->n_nodes].name = xstrdup(n->node);
        r->nodes[r->n_nodes].state = n->state;
        r->nodes[r->n_nodes++].since_ms = n->since_ms;
    }
    for (size_t i = 0; i < p->n_nodes; i++) {
        const struct rem_node_report *n = &p->nodes[i];
        if (json_object_get(not_patched, n->node))
            continue;
        if (n->quarantine_ms >= 0) {
            r->quarantines++;
            r->quarantine_s_last = (double)n->quarantine_ms / 1000.0;
            r->quarantine_s_sum += r->quarantine_s_last;
        }
        if (n->recovery_ms >= 0) {
            r->recoveries++;
            r->recovery_s_last = (double)n->recovery_ms / 1000.0;
            r->recovery_s_sum += r->recovery_s_last;
        }
    }
    pthread_mutex_unlock(&r->lock);
}

void op_remediation_metrics(struct op_remediation *r, struct prom_writer *w)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    prom_family(w, "gpuop_remediation_nodes", PROM_GAUGE,
                "GPU nodes per remediation state (healthy: in service)");
    for (int s = 0; s < REM_N_STATES; s++) {
        struct prom_label lab = {"state", s == REM_HEALTHY ? "healthy" : rem_state_name(s)};
        prom_sample(w, "gpuop_remediation_nodes", &lab, 1,
                    r->have_counts ? (double)r->counts[s] : 0);
    }
    prom_family(w, "gpuop_remediation_breaker_open", PROM_GAUGE,
                "1 while a pool's remediation breaker is open (no new quarantines)");
    for (size_t i = 0; i < r->n_breakers; i++) {
        struct prom_label lab = {"pool", r->breakers[i].name};
        prom_sample(w, "gpuop_remediation_breaker_open", &lab, 1, r->breakers[i].open ? 1 : 0);
    }
    prom_family(w, "gpuop_remediation_node_state_since_timestamp_seconds", PROM_GAUGE,
                "When each node out of service entered its remediation state (Unix time)");
    for (size_t i = 0; i < r->n_nodes; i++) {
        struct prom_label lab[] = {{"node", r->nodes[i].name},
                                   {"state", rem_state_name(r->nodes[i].state)}};
        prom_sample(w, "gpuop_remediation_node_state_since_timestamp_seconds", lab, ARRAY_SIZE(lab),
                    (double)r->nodes[i].since_ms / 1000.0);
    }
    prom_metric_u64(w, "gpuop_remediation_quarantines_total", PROM_COUNTER,
                    "Nodes quarantined for a GPU fault", r->quarantines);
    prom_metric(w, "gpuop_remediation_quarantine_seconds_total", PROM_COUNTER,
                "Time from the fault to the quarantine, summed over the quarantines",
                r->quarantine_s_sum);
    prom_metric(w, "gpuop_remediation_last_quarantine_seconds", PROM_GAUGE,
                "Time from the fault to the quarantine, the last node", r->quarantine_s_last);
    prom_metric_u64(w, "gpuop_remediation_recoveries_total", PROM_COUNTER,
                    "Nodes back in service after a remediation", r->recoveries);
    prom_metric(w, "gpuop_remediation_recovery_seconds_total", PROM_COUNTER,
                "Time from the fault to the node back in service, summed over the recoveries",
                r->recovery_s_sum);
    prom_metric(w, "gpuop_remediation_last_recovery_seconds", PROM_GAUGE,
                "Time from the fault to the node back in service, the last node",
                r->recovery_s_last);
    prom_metric_u64(w, "gpuop_remediation_node_conflicts_total", PROM_COUNTER,
                    "Remediation node patches refused because the node changed since the pass "
                    "read it",
                    r->conflicts);
    pthread_mutex_unlock(&r->lock);
}

/* ---- one pass ------------------------------------------------------------------------------- */

static void requeue_within(struct op_remediation *r, uint64_t ms)
{
    if (r->requeue_ms == 0 || r->requeue_ms > ms)
        r->requeue_ms = ms;
}

/* The informers it reads listed; else (logged once a minute) the pass waits. */
static bool synced(struct op_remediation *r, uint64_t now_ms)
{
    static const int need[] = {INF_NODES, INF_PODS, INF_PDBS, INF_POOLS};
    for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
        if (kube_informer_synced(r->upg->inf[need[i]]))
            continue;
        if (now_ms - r->last_unsynced_log_ms > 60000) {
            r->last_unsynced_log_ms = now_ms;
            log_warn(REM_COMPONENT, "GPU remediation waits for the upgrade informers to list",
                     NULL);
        }
        return false;
    }
    return true;
}

/* The nodes whose every pod the planner needs: those quarantined (about to drain) or draining.
 */
static json_t *nodes_to_list(const json_t *nodes)
{
    json_t *want = json_object();
    size_t i;
    json_t *n;
    json_array_foreach ((json_t *)nodes, i, n) {
        int st = rem_state_parse(kobj_label(n, REM_LABEL_STATE));
        if ((st == REM_QUARANTINED || st == REM_DRAINING) && kobj_name(n))
            json_object_set_new(want, kobj_name(n), json_true());
    }
    return want;
}

int op_remediation_reconcile(struct op_remediation *r, const json_t *cp, const json_t *owned,
                             json_t *status, uint64_t now_ms, struct err *e)
{
    r->requeue_ms = 0;
    /* what a pass that did not reach the status write planned: planned again */
    json_object_clear(r->cp_pending);
    if (!cp)
        return 0;
    if (!synced(r, now_ms)) {
        op_status_condition_keep(status, cp, REM_CONDITION_TYPE);
        r->requeue_ms = 1000;
        return 0;
    }
    struct op_upgrade *u = r->upg;
    _cleanup_json_ json_t *cached = kube_informer_list(u->inf[INF_NODES], NULL, NULL, NULL);
    _cleanup_json_ json_t *nodes = upg_writes_fresh(u->writes, cached);
    _cleanup_json_ json_t *pods = kube_informer_list(u->inf[INF_PODS], NULL, NULL, NULL);
    _cleanup_json_ json_t *want = nodes_to_list(nodes);
    _cleanup_json_ json_t *listed = op_upgrade_list_node_pods(u, want, pods);
    _cleanup_json_ json_t *pdbs = kube_informer_list(u->inf[INF_PDBS], NULL, NULL, NULL);
    _cleanup_json_ json_t *pools = kube_informer_list(u->inf[INF_POOLS], NULL, NULL, NULL);
    _cleanup_(upg_zones_freep) struct upg_zones *zones = upg_zones_new();
    upg_zones_load_pools(zones, NULL, pools);
    _cleanup_json_ json_t *cp_anns = policy_annotations(r, cp);
    struct rem_input in = {
        .nodes = nodes,
        .pods = pods,
        .pods_listed = listed,
        .pdbs = pdbs,
        .pools = pools,
        .zones = zones,
        .max_unavailable = kobj_path(cp, "spec.driver.upgradePolicy.maxUnavailable"),
        .cluster_annotations = cp_anns,
        .validation_enabled = op_find_daemonset(owned, r->ns, UPG_VALIDATOR_APP) != NULL,
        .now_ms = (int64_t)now_ms,
    };
    struct rem_plan *plan = NULL;
    struct err pe = {0};
    int rc = rem_plan(&in, &plan, &pe);
    if (rc < 0) {
        /* nothing written; the condition stays as it was, the pass is tried again */
        log_warn(REM_COMPONENT, "GPU remediation not planned", "error=\"%s\"", err_msg(&pe));
        op_status_condition_keep(status, cp, REM_CONDITION_TYPE);
        r->requeue_ms = 5000;
        return 0;
    }
    bool conflict = false;
    _cleanup_json_ json_t *not_patched = json_object();
    rc = execute(r, plan, cp, not_patched, &conflict, e);
    if (rc < 0) {
        rem_plan_free(plan);
        return rc;
    }
    /* the holds go to the upgrade pass next; the plan lives until the next pass replaces it */
    size_t n_holds = 0;
    struct upg_hold *holds = rem_plan_holds(plan, &n_holds);
    op_upgrade_set_holds(u, holds, n_holds);
    free(r->holds);
    rem_plan_free(r->plan);
    r->holds = holds;
    r->plan = plan;
    r->requeue_ms = (uint64_t)(plan->requeue_ms > 0 ? plan->requeue_ms : 0);
    if (json_object_size(listed) > 0)
        requeue_within(r, 2000); /* the drained nodes' pods are not watched */
    if (conflict)
        requeue_within(r, 1000);
    op_status_condition_set(status, cp, REM_CONDITION_TYPE, plan->condition.status,
                            plan->condition.reason, plan->condition.message, now_ms);
    record(r, plan, not_patched);
    return 0;
}

uint64_t op_remediation_requeue_ms(struct op_remediation *r)
{
    return r ? r->requeue_ms : 0;
}
