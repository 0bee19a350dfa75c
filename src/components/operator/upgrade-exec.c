/* SPDX-License-Identifier: Apache-2.0 */
/* The driver upgrade plan's writes (upgrade-ctl.h's steps): how its node wishes fared (the
 * reconcile writes them merged into each node's one patch; a conflict leaves the node's other
 * actions for the next pass), evictions and driver pod deletions, each DriverUpgradePool's
 * status, and its Events queued for the operator's recorder; every write asks the lease first. */
#include <pthread.h>

#include "operator-internal.h"
#include "operator.h"
#include "upgrade-ctl-internal.h"
#include "yamlcfg.h"

/* An Event of the plan queued for the operator's recorder: a node's is aggregated with its
 * pool's alike (about the DriverUpgradePool, or the ClusterPolicy for nodes no pool selects). */
static void queue_event(struct op_upgrade *u, const struct upg_event *ev, const json_t *cp,
                        json_t *queue)
{
    struct op_event_ref policy = {.api_version = "nvidia.com/v1",
                                  .kind = "ClusterPolicy",
                                  .name = kobj_name(cp) ?: "",
                                  .uid = kobj_uid(cp)};
    struct op_event_in in = {
        .type = ev->warning ? "Warning" : "Normal", .reason = ev->reason, .message = ev->message};
    if (ev->object == UPG_OBJ_NODE) {
        in.about = (struct op_event_ref){.api_version = "v1", .kind = "Node", .name = ev->name};
        in.ns = "default";
        in.group = ev->pool ?: "default";
        _cleanup_json_ json_t *pool =
            ev->pool ? kube_informer_get(u->inf[INF_POOLS], NULL, ev->pool) : NULL;
        if (pool) {
            in.group_ref = (struct op_event_ref){.api_version = "upgrade.gpuop.dev/v1alpha1",
                                                 .kind = "DriverUpgradePool",
                                                 .name = ev->pool};
            in.group_ns = "default";
        } else {
            in.group_ref = policy;
            in.group_ns = u->ns;
        }
        op_event_queue_add(queue, &in);
        return;
    }
    if (ev->object == UPG_OBJ_POOL) {
        in.about = (struct op_event_ref){.api_version = "upgrade.gpuop.dev/v1alpha1",
                                         .kind = "DriverUpgradePool",
                                         .name = ev->name};
        in.ns = "default";
    } else {
        in.about = policy;
        in.ns = u->ns;
    }
    op_event_queue_add(queue, &in);
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
    if (kube_update_status(u->kc, &KUBE_DRIVERUPGRADEPOOLS, NULL, obj, &out, &we) < 0)
        log_warn(UPG_COMPONENT, "pool status not written", "pool=%s error=\"%s\"", r->name,
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
            log_info(UPG_COMPONENT, "operand pod deleted for upgrade", "pod=%s node=%s", a->name,
                     a->node);
    } else if (evict && r == KUBE_EBLOCKED) {
        log_info(UPG_COMPONENT, "eviction refused by a PodDisruptionBudget", "pod=%s/%s node=%s",
                 a->ns, a->name, a->node);
    } else if (r != -ENOENT) {
        log_warn(UPG_COMPONENT, evict ? "eviction failed" : "operand pod deletion failed",
                 "pod=%s/%s error=\"%s\"", a->ns, a->name, err_msg(&pe));
    }
}

void op_upgrade_node_written(struct op_upgrade *u, const char *node, int rc, const char *base_rv,
                             const char *rv, const json_t *patch)
{
    if (rc == 0) {
        upg_writes_record(u->writes, node, base_rv, rv, patch);
        if (u->pass_wishes)
            json_object_del(u->pass_wishes, node); /* it went through */
        return;
    }
    if (rc == KUBE_ECONFLICT) {
        pthread_mutex_lock(&u->lock);
        u->conflicts++;
        pthread_mutex_unlock(&u->lock);
        /* the next pass soon: the informer may not call for it */
        if (u->requeue_ms == 0 || u->requeue_ms > 1000)
            u->requeue_ms = 1000;
        log_info(UPG_COMPONENT, "node changed since the upgrade pass read it, planned again",
                 "node=%s", node);
    }
}

/* The node's wish (if the pass had one) went through. */
static bool node_done(struct op_upgrade *u, const char *node)
{
    return !json_object_get(u->pass_wishes, node);
}

int op_upgrade_bookkeeping(struct op_upgrade *u, struct err *e)
{
    const struct upg_plan *p = u->pass;
    if (!p)
        return 0;
    int r;
    for (int evict = 1; evict >= 0; evict--) {
        const struct upg_pod_ref *list = evict ? p->evictions : p->deletions;
        size_t n = evict ? p->n_evictions : p->n_deletions;
        for (size_t i = 0; i < n; i++) {
            if (!node_done(u, list[i].node))
                continue;
            if ((r = u->h.may_write(u->h.u, e)) < 0)
                return r;
            pod_action(u, &list[i], evict);
        }
    }
    for (size_t i = 0; i < p->n_pools; i++)
        if ((r = write_pool_status(u, &p->pools[i], e)) < 0)
            return r;
    return 0;
}

void op_upgrade_events(struct op_upgrade *u, const json_t *cp, json_t *queue)
{
    const struct upg_plan *p = u->pass;
    if (!p)
        return;
    for (size_t i = 0; i < p->n_events; i++) {
        const struct upg_event *ev = &p->events[i];
        if (ev->object == UPG_OBJ_NODE && !node_done(u, ev->name))
            continue;
        /* the planner holds back a repeat of what was tried, posted or not: a refused Event is
         * not retried on every pass */
        upg_event_log_record(u->posted, ev, u->pass_now_s);
        queue_event(u, ev, cp, queue);
    }
}
