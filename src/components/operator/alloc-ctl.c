/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU allocation per pool, the shell (alloc-ctl.h): inputs read, upg_alloc_plan called, its
 * plan executed. The decisions are src/lib/upgrade's (upg-alloc.c). */
#include <errno.h>
#include <string.h>

#include "alloc-ctl.h"
#include "op-controller.h"
#include "operator-internal.h"
#include "upgrade-ctl-internal.h"
#include "yamlcfg.h"

#define ALLOC_COMPONENT "operator"

bool op_alloc_dra_wanted(struct controller *c, const json_t *nodes, const json_t *owned)
{
    struct kube_informer *pools = c->upg ? c->upg->inf[INF_POOLS] : NULL;
    if (!pools || !kube_informer_synced(pools))
        return upg_alloc_dra_wanted(nodes, NULL) ||
               op_find_daemonset(owned, c->ns, UPG_DRA_PLUGIN_APP) != NULL;
    _cleanup_json_ json_t *list = kube_informer_list(pools, NULL, NULL, NULL);
    return upg_alloc_dra_wanted(nodes, list);
}

/* The nodes whose every pod the planner needs: those draining or stopping a plugin. */
static json_t *nodes_to_list(const json_t *nodes)
{
    json_t *want = json_object();
    size_t i;
    json_t *n;
    json_array_foreach ((json_t *)nodes, i, n) {
        enum upg_alloc target;
        enum upg_move_step s = upg_move_of(n, &target);
        if ((s == UPG_MOVE_DRAIN || s == UPG_MOVE_STOP) && kobj_name(n))
            json_object_set_new(want, kobj_name(n), json_true());
    }
    return want;
}

/* A node patch of the plan (its precondition the node's resourceVersion as read). 1: written;
 * 0: not (a conflict, gone, an error: logged; planned again next pass); -ECANCELED. */
static int write_node(struct controller *c, const struct upg_node_patch *np, struct err *e)
{
    if (op_check_leader(c, e) < 0)
        return -ECANCELED;
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
    _cleanup_json_ json_t *out = NULL;
    struct err ne = {0};
    int rc = kube_patch(c->kc, &KUBE_NODES, NULL, np->node, &po, np->patch, &out, &ne);
    if (rc == 0) {
        op_count_write(c);
        upg_writes_record(c->upg->writes, np->node,
                          kobj_path_str(np->patch, "metadata.resourceVersion"),
                          kobj_resource_version(out), np->patch);
        const char *move = json_string_value(kobj_keys(
            np->patch, (const char *const[]){"metadata", "annotations", UPG_ANN_MOVE, NULL}));
        const char *done = json_string_value(kobj_keys(
            np->patch, (const char *const[]){"metadata", "labels", UPG_LABEL_ALLOCATION, NULL}));
        log_info(ALLOC_COMPONENT, "GPU allocation move", "node=%s step=\"%s\"", np->node,
                 move   ? move
                 : done ? done
                        : "?");
        return 1;
    }
    if (rc == KUBE_ECONFLICT)
        log_info(ALLOC_COMPONENT, "node changed since the GPU allocation pass read it", "node=%s",
                 np->node);
    else if (rc != -ENOENT)
        log_warn(ALLOC_COMPONENT, "GPU allocation node patch failed", "node=%s error=\"%s\"",
                 np->node, err_msg(&ne));
    return 0;
}

/* A step's Normal Event on its Node (the node's patch went through). */
static void post_event(struct controller *c, const struct upg_alloc_event *ev)
{
    _cleanup_json_ json_t *inv = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Node",
                                           "metadata", "name", ev->node);
    struct kube_event ke = {.ns = "default",
                            .involved = inv,
                            .type = "Normal",
                            .reason = UPG_ALLOC_EVENT_REASON,
                            .message = ev->message,
                            .component = "gpuop-operator"};
    struct err e = {0};
    if (kube_event_create(c->kc, &ke, &e) < 0)
        log_warn(ALLOC_COMPONENT, "event not recorded", "node=%s reason=%s error=\"%s\"", ev->node,
                 ke.reason, err_msg(&e));
    else
        op_count_write(c);
}

static void evict(struct controller *c, const struct upg_pod_ref *a)
{
    struct err pe = {0};
    int rc = kube_evict(c->kc, a->ns, a->name, NULL, &pe);
    if (rc == 0) {
        op_count_write(c);
        log_info(ALLOC_COMPONENT, "pod evicted for a GPU allocation move", "pod=%s/%s node=%s",
                 a->ns, a->name, a->node);
    } else if (rc == KUBE_EBLOCKED) {
        log_info(ALLOC_COMPONENT, "eviction refused by a PodDisruptionBudget", "pod=%s/%s node=%s",
                 a->ns, a->name, a->node);
    } else if (rc != -ENOENT) {
        log_warn(ALLOC_COMPONENT, "eviction failed", "pod=%s/%s error=\"%s\"", a->ns, a->name,
                 err_msg(&pe));
    }
}

/* The GPU driver's ResourceSlices of `node` deleted (their plugin has stopped). */
static int delete_slices(struct controller *c, const json_t *slices, const char *node,
                         struct err *e)
{
    size_t i;
    json_t *s;
    json_array_foreach ((json_t *)slices, i, s) {
        if (!streq_ptr(kobj_path_str(s, "spec.nodeName"), node) || !kobj_name(s))
            continue;
        if (op_check_leader(c, e) < 0)
            return -ECANCELED;
        struct err de = {0};
        int rc = kube_delete(c->kc, &KUBE_RESOURCESLICES, NULL, kobj_name(s), NULL, &de);
        if (rc == 0) {
            op_count_write(c);
            log_info(ALLOC_COMPONENT, "ResourceSlice of a node leaving DRA deleted",
                     "node=%s slice=%s", node, kobj_name(s));
        } else if (rc != -ENOENT) {
            log_warn(ALLOC_COMPONENT, "ResourceSlice not deleted", "slice=%s error=\"%s\"",
                     kobj_name(s), err_msg(&de));
        }
    }
    return 0;
}

/* A pool's status.gpuAllocation written into its status as read (the rest as it is); a
 * conflict (the upgrade pass wrote the status since) is planned again next pass. */
static int write_pool(struct controller *c, const struct upg_alloc_pool_report *r,
                      const json_t *pools, struct err *e)
{
    if (!r->status || !r->write)
        return 0;
    const json_t *obj = NULL;
    size_t i;
    json_t *p;
    json_array_foreach ((json_t *)pools, i, p) {
        if (streq_ptr(kobj_name(p), r->name))
            obj = p;
    }
    if (!obj)
        return 0;
    if (op_check_leader(c, e) < 0)
        return -ECANCELED;
    _cleanup_json_ json_t *upd = json_deep_copy(obj);
    json_object_set(kobj_ensure_object(upd, "status"), "gpuAllocation", r->status);
    struct err pe = {0};
    int rc = kube_update_status(c->kc, &KUBE_DRIVERUPGRADEPOOLS, NULL, upd, NULL, &pe);
    if (rc == 0)
        op_count_write(c);
    else if (rc != KUBE_ECONFLICT && rc != -ENOENT)
        log_warn(ALLOC_COMPONENT, "pool status not written", "pool=%s error=\"%s\"", r->name,
                 err_msg(&pe));
    return 0;
}

static int execute(struct controller *c, const struct upg_alloc_plan *p, const json_t *slices,
                   const json_t *pools, bool *ret_conflict, struct err *e)
{
    _cleanup_json_ json_t *not_patched = json_object();
    int rc;
    for (size_t i = 0; i < p->n_patches; i++) {
        if ((rc = write_node(c, &p->patches[i], e)) < 0)
            return rc;
        if (rc == 0) {
            json_object_set_new(not_patched, p->patches[i].node, json_true());
            *ret_conflict = true;
        }
    }
    for (size_t i = 0; i < p->n_events; i++) {
        if (json_object_get(not_patched, p->events[i].node))
            continue;
        if (op_check_leader(c, e) < 0)
            return -ECANCELED;
        post_event(c, &p->events[i]);
    }
    for (size_t i = 0; i < p->n_evictions; i++) {
        if (json_object_get(not_patched, p->evictions[i].node))
            continue;
        if (op_check_leader(c, e) < 0)
            return -ECANCELED;
        evict(c, &p->evictions[i]);
    }
    for (size_t i = 0; i < p->n_slice_nodes; i++)
        if ((rc = delete_slices(c, slices, p->slice_nodes[i], e)) < 0)
            return rc;
    for (size_t i = 0; i < p->n_pools; i++)
        if ((rc = write_pool(c, &p->pools[i], pools, e)) < 0)
            return rc;
    return 0;
}

int op_alloc_reconcile(struct controller *c, const json_t *cp, uint64_t now_ms, struct err *e)
{
    c->alloc_requeue_ms = 0;
    /* a GPUCluster runs DRA on every GPU node: nothing to move */
    if (!cp || streq_ptr(kobj_kind(cp), "GPUCluster"))
        return 0;
    struct op_upgrade *u = c->upg;
    static const int need[] = {INF_NODES, INF_PODS, INF_PDBS, INF_POOLS, INF_NVDS};
    for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
        if (!kube_informer_synced(u->inf[need[i]])) {
            c->alloc_requeue_ms = 1000;
            return 0;
        }
    }
    _cleanup_json_ json_t *cached = kube_informer_list(u->inf[INF_NODES], NULL, NULL, NULL);
    _cleanup_json_ json_t *nodes = upg_writes_fresh(u->writes, cached);
    _cleanup_json_ json_t *pods = kube_informer_list(u->inf[INF_PODS], NULL, NULL, NULL);
    _cleanup_json_ json_t *want = nodes_to_list(nodes);
    _cleanup_json_ json_t *listed = op_upgrade_list_node_pods(u, want, pods);
    _cleanup_json_ json_t *pdbs = kube_informer_list(u->inf[INF_PDBS], NULL, NULL, NULL);
    _cleanup_json_ json_t *pools = kube_informer_list(u->inf[INF_POOLS], NULL, NULL, NULL);
    _cleanup_json_ json_t *nvds = kube_informer_list(u->inf[INF_NVDS], NULL, NULL, NULL);
    _cleanup_json_ json_t *slices = c->gq.slices && kube_informer_synced(c->gq.slices)
                                        ? kube_informer_list(c->gq.slices, NULL, NULL, NULL)
                                        : NULL;
    struct upg_alloc_input in = {
        .nodes = nodes,
        .pods = pods,
        .pods_listed = listed,
        .pdbs = pdbs,
        .pools = pools,
        .nvidia_drivers = nvds,
        .max_unavailable = kobj_path(cp, "spec.driver.upgradePolicy.maxUnavailable"),
        .slices = slices,
        .now_s = (int64_t)(now_ms / 1000), /* the pass's clock, as the other planners' */
    };
    _cleanup_(upg_alloc_plan_freep) struct upg_alloc_plan *plan = NULL;
    struct err pe = {0};
    if (upg_alloc_plan(&in, &plan, &pe) < 0) {
        log_warn(ALLOC_COMPONENT, "GPU allocation not planned", "error=\"%s\"", err_msg(&pe));
        c->alloc_requeue_ms = 5000;
        return 0;
    }
    bool conflict = false;
    int rc = execute(c, plan, slices, pools, &conflict, e);
    if (rc < 0)
        return rc;
    c->alloc_requeue_ms = (uint64_t)plan->requeue_s * 1000;
    if (conflict && (c->alloc_requeue_ms == 0 || c->alloc_requeue_ms > 1000))
        c->alloc_requeue_ms = 1000;
    return 0;
}

uint64_t op_alloc_requeue_ms(struct controller *c)
{
    return c->alloc_requeue_ms;
}
