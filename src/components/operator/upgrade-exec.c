/* SPDX-License-Identifier: Apache-2.0 */
/* The driver upgrade plan's writes (upgrade-ctl-internal.h): node patches (a conflict leaves the
 * node's other actions for the next pass), evictions and driver pod deletions, Events, each
 * DriverUpgradePool's status; every write asks the lease first. */
#include <pthread.h>

#include "operator-internal.h"
#include "upgrade-ctl-internal.h"
#include "yamlcfg.h"

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
        log_warn(UPG_COMPONENT, "event not recorded", "reason=%s error=\"%s\"", ke.reason,
                 err_msg(&e));
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
            log_info(UPG_COMPONENT, "node changed since the upgrade pass read it, planned again",
                     "node=%s", a->node);
        } else if (r != -ENOENT) {
            log_warn(UPG_COMPONENT, "upgrade node patch failed", "node=%s error=\"%s\"", a->node,
                     err_msg(&ne));
        }
    }
    return 0;
}

int op_upgrade_execute(struct op_upgrade *u, const struct upg_plan *p, const json_t *cp,
                       int64_t now_s, bool *ret_conflict, struct err *e)
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
