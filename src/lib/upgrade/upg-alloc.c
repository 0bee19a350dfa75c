/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU allocation per pool (upgrade.h, "the GPU allocation per pool"): a pool's nodes moved
 * from the device plugin to DRA, or back, one by one under the shared disruption budget. Pure:
 * the nodes, their pods, the pools and the ResourceSlices in; node patches, evictions, the
 * slices to delete and each pool's progress out.
 */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "upg-internal.h"
#include "yamlcfg.h"

static const char *const alloc_names[] = {
    [UPG_ALLOC_DEVICE_PLUGIN] = "devicePlugin", [UPG_ALLOC_DRA] = "dra"};
static const char *const step_names[] = {[UPG_MOVE_NONE] = "",
                                         [UPG_MOVE_DRAIN] = "drain",
                                         [UPG_MOVE_STOP] = "stop",
                                         [UPG_MOVE_START] = "start"};

const char *upg_alloc_name(enum upg_alloc a)
{
    assert(a == UPG_ALLOC_DEVICE_PLUGIN || a == UPG_ALLOC_DRA);
    return alloc_names[a];
}

int upg_alloc_parse(const char *v)
{
    for (size_t i = 0; i < ARRAY_SIZE(alloc_names); i++)
        if (streq_ptr(v, alloc_names[i]))
            return (int)i;
    return -1;
}

const char *upg_move_step_name(enum upg_move_step s)
{
    assert(s >= UPG_MOVE_NONE && s <= UPG_MOVE_START);
    return step_names[s];
}

enum upg_alloc upg_node_alloc(const json_t *node)
{
    return streq_ptr(kobj_label(node, UPG_LABEL_ALLOCATION), "dra") ? UPG_ALLOC_DRA
                                                                    : UPG_ALLOC_DEVICE_PLUGIN;
}

enum upg_move_step upg_move_of(const json_t *node, enum upg_alloc *ret_target)
{
    const char *v = kobj_annotation(node, UPG_ANN_MOVE);
    const char *sp = v ? strchr(v, ' ') : NULL;
    if (!sp || (size_t)(sp - v) >= 32)
        return UPG_MOVE_NONE;
    char target[32];
    memcpy(target, v, (size_t)(sp - v));
    target[sp - v] = '\0';
    int a = upg_alloc_parse(target);
    if (a < 0)
        return UPG_MOVE_NONE;
    for (int s = UPG_MOVE_DRAIN; s <= UPG_MOVE_START; s++) {
        if (strcmp(sp + 1, step_names[s]) == 0) {
            *ret_target = (enum upg_alloc)a;
            return (enum upg_move_step)s;
        }
    }
    return UPG_MOVE_NONE;
}

/* ---- the pass ------------------------------------------------------------------------------- */

struct pool {
    struct upg_pool p;
    const json_t *obj; /* NULL: the default pool */
    char *error;
    struct upg_budget budget;
    long long floor; /* GPUs; -1: none */
    long long limit; /* nodes unavailable at most */
    struct upg_alloc_pool_report *r;
};

struct pass {
    const struct upg_alloc_input *in;
    struct upg_alloc_plan *plan;
    struct pool *pools;
    size_t n_pools;
    json_t *pdb_used;
    struct upg_budget cluster;
    long long cluster_limit; /* -1: none */
};

/* The node's GPUs whichever plugin hands them out: allocatable nvidia.com/gpu where the device
 * plugin runs, else the count feature discovery labels (a DRA node advertises none). */
static long long node_gpus(const json_t *node)
{
    long long g = upg_node_gpus(node);
    if (g > 0)
        return g;
    const char *c = kobj_label(node, "nvidia.com/gpu.count");
    int64_t v;
    return c && parse_i64(c, &v) == 0 && v >= 0 ? v : 0;
}

static bool node_gpu(const json_t *node)
{
    return streq_ptr(kobj_label(node, "nvidia.com/gpu.present"), "true") &&
           !streq_ptr(kobj_label(node, "nvidia.com/gpu.deploy.operands"), "false");
}

/* The one patch of `node` in this pass, made on first use, with the node's resourceVersion as
 * its precondition. */
static json_t *node_patch(struct pass *ps, const json_t *node)
{
    struct upg_alloc_plan *pl = ps->plan;
    const char *name = kobj_name(node);
    for (size_t i = 0; i < pl->n_patches; i++)
        if (strcmp(pl->patches[i].node, name) == 0)
            return pl->patches[i].patch;
    pl->patches = xrealloc(pl->patches, (pl->n_patches + 1) * sizeof(*pl->patches));
    json_t *patch = json_pack("{s:{s:{},s:{}}}", "metadata", "labels", "annotations");
    const char *rv = kobj_resource_version(node);
    if (rv)
        json_object_set_new(json_object_get(patch, "metadata"), "resourceVersion", json_string(rv));
    pl->patches[pl->n_patches++] = (struct upg_node_patch){.node = xstrdup(name), .patch = patch};
    return patch;
}

static void set_label(json_t *patch, const char *key, const char *value)
{
    json_object_set_new(kobj_path(patch, "metadata.labels"), key,
                        value ? json_string(value) : json_null());
}

static void set_annotation(json_t *patch, const char *key, const char *value)
{
    json_object_set_new(kobj_path(patch, "metadata.annotations"), key,
                        value ? json_string(value) : json_null());
}

static void event(struct pass *ps, const json_t *node, const char *fmt, ...) GPUOP_PRINTF(3, 4);
static void event(struct pass *ps, const json_t *node, const char *fmt, ...)
{
    struct upg_alloc_plan *pl = ps->plan;
    pl->events = xrealloc(pl->events, (pl->n_events + 1) * sizeof(*pl->events));
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pl->events[pl->n_events++] =
        (struct upg_alloc_event){.node = xstrdup(kobj_name(node)), .message = xstrdup(msg)};
}

/* "the DRA kubelet plugin" or "the device plugin" */
static const char *plugin_name(enum upg_alloc a)
{
    return a == UPG_ALLOC_DRA ? "the DRA kubelet plugin" : "the device plugin";
}

static enum upg_alloc other(enum upg_alloc a)
{
    return a == UPG_ALLOC_DRA ? UPG_ALLOC_DEVICE_PLUGIN : UPG_ALLOC_DRA;
}

static void set_step(struct pass *ps, json_t *patch, enum upg_alloc target, enum upg_move_step s)
{
    char v[64];
    snprintf(v, sizeof(v), "%s %s", upg_alloc_name(target), upg_move_step_name(s));
    set_annotation(patch, UPG_ANN_MOVE, v);
    char since[24];
    snprintf(since, sizeof(since), "%lld", (long long)ps->in->now_s);
    set_annotation(patch, UPG_ANN_MOVE_SINCE, since);
}

/* A pod the move empties the node of: a GPU workload (nvidia.com/gpu, MIG, or a resource
 * claim), neither a daemon nor finished. */
static bool pod_moves(const json_t *pod)
{
    if (upg_pod_daemon(pod) || upg_pod_finished(pod))
        return false;
    return upg_pod_is_gpu(pod) ||
           json_array_size(kobj_path(upg_pod_obj(pod), "spec.resourceClaims")) > 0;
}

static bool pod_on(const json_t *pod, const char *node)
{
    return streq_ptr(upg_pod_node(pod), node);
}

static bool listed(const struct upg_alloc_input *in, const char *node)
{
    return !in->pods_listed || json_object_get(in->pods_listed, node);
}

/* The ResourceSlices of the GPU driver for `node`; with_devices: only those with a device. */
static size_t node_slices(const struct upg_alloc_input *in, const char *node, bool with_devices)
{
    size_t n = 0, i;
    json_t *s;
    json_array_foreach ((json_t *)in->slices, i, s) {
        if (!streq_ptr(kobj_path_str(s, "spec.driver"), UPG_DRA_DRIVER))
            continue;
        if (!streq_ptr(kobj_path_str(s, "spec.nodeName"), node) &&
            !streq_ptr(kobj_label(s, UPG_LABEL_DRA_NODE), node))
            continue;
        if (!with_devices || json_array_size(kobj_path(s, "spec.devices")) > 0)
            n++;
    }
    return n;
}

/* A running pod of the plugin `app` on `node`. */
static bool plugin_running(const struct upg_alloc_input *in, const char *node, const char *app)
{
    size_t i;
    json_t *pod;
    json_array_foreach ((json_t *)in->pods, i, pod) {
        if (pod_on(pod, node) && streq_ptr(kobj_label(upg_pod_obj(pod), "app"), app) &&
            !upg_pod_finished(pod))
            return true;
    }
    return false;
}

static bool gpus_advertised(const json_t *node)
{
    const char *keys[] = {"status", "allocatable", "nvidia.com/gpu", NULL};
    const char *q = json_string_value(kobj_keys(node, keys));
    int64_t m;
    return q && kobj_quantity_milli(q, &m) == 0 && m > 0;
}

/* One step of a node in a move; `why` says what it waits for when it waits. */
static void step_node(struct pass *ps, const json_t *node, enum upg_alloc target,
                      enum upg_move_step step, char *why, size_t why_len)
{
    const struct upg_alloc_input *in = ps->in;
    const char *name = kobj_name(node);
    why[0] = '\0';
    switch (step) {
    case UPG_MOVE_DRAIN: {
        if (!listed(in, name)) {
            snprintf(why, why_len, "its pods not listed yet");
            return;
        }
        size_t left = 0, i;
        json_t *pod;
        json_array_foreach ((json_t *)in->pods, i, pod) {
            if (!pod_on(pod, name) || !pod_moves(pod))
                continue;
            left++;
            if (upg_pod_deletion(pod))
                continue; /* on its way out */
            const char *pdb = NULL;
            if (!upg_pdb_allows(in->pdbs, ps->pdb_used, pod, &pdb)) {
                snprintf(why, why_len, "PodDisruptionBudget %s/%s holds pod %s",
                         kobj_namespace(upg_pod_obj(pod)) ?: "", pdb ? pdb : "?",
                         upg_pod_name(pod) ?: "");
                continue;
            }
            struct upg_alloc_plan *pl = ps->plan;
            pl->evictions = xrealloc(pl->evictions, (pl->n_evictions + 1) * sizeof(*pl->evictions));
            pl->evictions[pl->n_evictions++] = (struct upg_pod_ref){
                .ns = xstrdup(kobj_namespace(upg_pod_obj(pod)) ?: ""),
                .name = xstrdup(upg_pod_name(pod) ?: ""),
                .node = xstrdup(name),
            };
        }
        if (left > 0) {
            if (!why[0])
                snprintf(why, why_len, "%zu GPU pod(s) leaving", left);
            return;
        }
        /* empty: the old plugin off */
        json_t *patch = node_patch(ps, node);
        if (target == UPG_ALLOC_DRA)
            set_label(patch, UPG_LABEL_DEPLOY_DP, "false");
        else
            set_label(patch, UPG_LABEL_DEPLOY_DRA, NULL);
        set_step(ps, patch, target, UPG_MOVE_STOP);
        event(ps, node, "Moving to %s: its GPU pods are gone; %s turned off",
              upg_alloc_name(target), plugin_name(other(target)));
        return;
    }
    case UPG_MOVE_STOP: {
        if (!listed(in, name)) {
            snprintf(why, why_len, "its pods not listed yet");
            return;
        }
        const char *old = target == UPG_ALLOC_DRA ? UPG_DEVICE_PLUGIN_APP : UPG_DRA_PLUGIN_APP;
        if (plugin_running(in, name, old)) {
            snprintf(why, why_len, "the %s pod is stopping", old);
            return;
        }
        /* leaving DRA: the slices its plugin published go before the device plugin starts */
        if (target == UPG_ALLOC_DEVICE_PLUGIN && node_slices(in, name, false) > 0) {
            struct upg_alloc_plan *pl = ps->plan;
            pl->slice_nodes =
                xrealloc(pl->slice_nodes, (pl->n_slice_nodes + 1) * sizeof(*pl->slice_nodes));
            pl->slice_nodes[pl->n_slice_nodes++] = xstrdup(name);
            snprintf(why, why_len, "its ResourceSlices are being deleted");
            return;
        }
        json_t *patch = node_patch(ps, node);
        if (target == UPG_ALLOC_DRA)
            set_label(patch, UPG_LABEL_DEPLOY_DRA, "true");
        else
            set_label(patch, UPG_LABEL_DEPLOY_DP, "true");
        set_step(ps, patch, target, UPG_MOVE_START);
        event(ps, node, "Moving to %s: %s stopped; %s turned on", upg_alloc_name(target),
              plugin_name(other(target)), plugin_name(target));
        return;
    }
    case UPG_MOVE_START: {
        bool serves =
            target == UPG_ALLOC_DRA ? node_slices(in, name, true) > 0 : gpus_advertised(node);
        if (!serves) {
            snprintf(why, why_len,
                     target == UPG_ALLOC_DRA ? "its ResourceSlice is not published yet"
                                             : "nvidia.com/gpu is not advertised yet");
            return;
        }
        json_t *patch = node_patch(ps, node);
        set_label(patch, UPG_LABEL_ALLOCATION, upg_alloc_name(target));
        set_annotation(patch, UPG_ANN_MOVE, NULL);
        set_annotation(patch, UPG_ANN_MOVE_SINCE, NULL);
        if (streq_ptr(kobj_annotation(node, UPG_ANN_MOVE_CORDONED), "true")) {
            set_annotation(patch, UPG_ANN_MOVE_CORDONED, NULL);
            json_object_set_new(patch, "spec", json_pack("{s:b}", "unschedulable", 0));
        }
        event(ps, node, "Moved to %s: %s serves its GPUs%s", upg_alloc_name(target),
              plugin_name(target), json_object_get(patch, "spec") ? "; uncordoned" : "");
        return;
    }
    case UPG_MOVE_NONE:
        break;
    }
    assert(!"a node in a move has a step");
}

/* May a move start on `node` of pool `pl` now? If so the budgets count it. */
static bool may_start(struct pass *ps, struct pool *pl, const json_t *node, char *why,
                      size_t why_len)
{
    if (!upg_node_ready(node)) {
        snprintf(why, why_len, "not Ready");
        return false;
    }
    if (json_is_true(kobj_path(node, "spec.unschedulable"))) {
        snprintf(why, why_len,
                 "cordoned by someone else (a driver upgrade, a remediation, a "
                 "person): it moves once uncordoned");
        return false;
    }
    int st = upg_state_parse(kobj_label(node, UPG_LABEL_STATE));
    if (st > 0 && upg_state_in_flight((enum upg_state)st)) {
        snprintf(why, why_len, "its driver upgrade is in flight");
        return false;
    }
    if (pl->budget.unavailable + 1 > pl->limit) {
        snprintf(why, why_len, "pool %s: %d of %d nodes unavailable (maxUnavailable %lld)",
                 pl->p.name, pl->budget.unavailable, pl->budget.total, pl->limit);
        return false;
    }
    if (ps->cluster_limit >= 0 && ps->cluster.unavailable + 1 > ps->cluster_limit) {
        snprintf(why, why_len, "the cluster: %d of %d GPU nodes unavailable (maxUnavailable %lld)",
                 ps->cluster.unavailable, ps->cluster.total, ps->cluster_limit);
        return false;
    }
    long long g = node_gpus(node);
    if (pl->floor >= 0 && pl->budget.gpus_ready - g < pl->floor) {
        snprintf(why, why_len, "pool %s: capacity floor %lld GPUs (%lld ready, this node has %lld)",
                 pl->p.name, pl->floor, pl->budget.gpus_ready, g);
        return false;
    }
    pl->budget.unavailable++;
    pl->budget.gpus_ready -= g;
    ps->cluster.unavailable++;
    return true;
}

static void start_node(struct pass *ps, const json_t *node, enum upg_alloc target)
{
    json_t *patch = node_patch(ps, node);
    set_step(ps, patch, target, UPG_MOVE_DRAIN);
    set_annotation(patch, UPG_ANN_MOVE_CORDONED, "true");
    json_object_set_new(patch, "spec", json_pack("{s:b}", "unschedulable", 1));
    event(ps, node, "Moving from %s to %s: cordoned; its GPU pods are evicted",
          plugin_name(upg_node_alloc(node)), plugin_name(target));
}

static int cmp_node_name(const void *a, const void *b)
{
    return strcmp(kobj_name(*(json_t *const *)a) ?: "", kobj_name(*(json_t *const *)b) ?: "");
}

static void pools_done(struct pass *ps)
{
    for (size_t i = 0; i < ps->n_pools; i++) {
        upg_pool_done(&ps->pools[i].p);
        free(ps->pools[i].error);
    }
    free(ps->pools);
}

/* The pools parsed, the default one last; each with its report. */
static void read_pools(struct pass *ps)
{
    size_t n = json_array_size(ps->in->pools);
    ps->pools = xcalloc(n + 1, sizeof(*ps->pools));
    ps->plan->pools = xcalloc(n + 1, sizeof(*ps->plan->pools));
    size_t i;
    json_t *obj;
    json_array_foreach ((json_t *)ps->in->pools, i, obj) {
        struct pool *pl = &ps->pools[ps->n_pools];
        struct err pe = {0};
        if (upg_pool_parse(obj, &pl->p, &pe) < 0) {
            pl->p = (struct upg_pool){.name = xstrdup(kobj_name(obj) ?: "?")};
            pl->error = xstrdup(err_msg(&pe));
        } else if (pl->p.nvidia_driver) {
            bool found = false;
            size_t k;
            json_t *nvd;
            json_array_foreach ((json_t *)ps->in->nvidia_drivers, k, nvd)
                found |= streq_ptr(kobj_name(nvd), pl->p.nvidia_driver);
            if (!found)
                pl->error = xasprintf("DriverUpgradePool %s: spec.nvidiaDriver: NVIDIADriver "
                                      "\"%s\" not found",
                                      pl->p.name, pl->p.nvidia_driver);
        }
        pl->obj = obj;
        ps->n_pools++;
    }
    struct pool *d = &ps->pools[ps->n_pools++];
    d->p = (struct upg_pool){.name = xstrdup("default"), .gpu_allocation = UPG_ALLOC_DEVICE_PLUGIN};
    for (i = 0; i < ps->n_pools; i++) {
        struct pool *pl = &ps->pools[i];
        pl->r = &ps->plan->pools[i];
        pl->r->name = xstrdup(pl->p.name);
        pl->r->target = pl->p.gpu_allocation;
        pl->r->error = pl->error ? xstrdup(pl->error) : NULL;
    }
    ps->plan->n_pools = ps->n_pools;
}

/* The pool selecting `node` (the default one when none does); NULL with *ret_why when two do. */
static struct pool *pool_of(struct pass *ps, const json_t *node, char *why, size_t why_len)
{
    struct pool *found = NULL;
    for (size_t i = 0; i + 1 < ps->n_pools; i++) {
        struct pool *pl = &ps->pools[i];
        if (!pl->p.node_selector && !pl->p.nvidia_driver)
            continue; /* did not parse */
        if (!upg_pool_selects(&pl->p, node))
            continue;
        if (found) {
            snprintf(why, why_len, "selected by pools %s and %s: left as it is", found->p.name,
                     pl->p.name);
            return NULL;
        }
        found = pl;
    }
    return found ? found : &ps->pools[ps->n_pools - 1];
}

static json_t *notes_json(const struct upg_notes *n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n->n; i++)
        json_array_append_new(a,
                              json_pack("{s:s,s:s}", "node", n->v[i].node, "step", n->v[i].text));
    return a;
}

static void report_status(struct pool *pl)
{
    struct upg_alloc_pool_report *r = pl->r;
    /* a pool that never named an allocation has nothing to report (no write for it) */
    if (!pl->obj ||
        (!kobj_path(pl->obj, "spec.gpuAllocation") && !kobj_path(pl->obj, "status.gpuAllocation")))
        return;
    json_t *st = json_pack("{s:s,s:i,s:i}", "target", upg_alloc_name(r->target), "nodes", r->total,
                           "onTarget", r->on_target);
    char prog[48];
    snprintf(prog, sizeof(prog), "%d/%d", r->on_target, r->total);
    json_object_set_new(st, "progress", json_string(prog));
    json_object_set_new(st, "moving", notes_json(&r->moving));
    json_t *w = json_array();
    for (size_t i = 0; i < r->waiting.n; i++)
        json_array_append_new(
            w, json_pack("{s:s,s:s}", "node", r->waiting.v[i].node, "why", r->waiting.v[i].text));
    json_object_set_new(st, "waiting", w);
    if (r->error)
        json_object_set_new(st, "error", json_string(r->error));
    r->write = !json_equal(kobj_path(pl->obj, "status.gpuAllocation"), st);
    r->status = st;
}

int upg_alloc_plan(const struct upg_alloc_input *in, struct upg_alloc_plan **ret, struct err *e)
{
    (void)e;
    struct upg_alloc_plan *plan = xcalloc(1, sizeof(*plan));
    struct pass ps = {.in = in, .plan = plan, .pdb_used = json_object(), .cluster_limit = -1};
    read_pools(&ps);
    /* the GPU nodes by name: the order moves start in */
    size_t n_nodes = json_array_size(in->nodes), n = 0, i;
    const json_t **nodes = xcalloc(n_nodes + 1, sizeof(*nodes));
    struct pool **of = xcalloc(n_nodes + 1, sizeof(*of));
    json_t *node;
    json_array_foreach ((json_t *)in->nodes, i, node) {
        if (node_gpu(node) && kobj_name(node))
            nodes[n++] = node;
    }
    qsort(nodes, n, sizeof(*nodes), cmp_node_name);
    char why[512];
    /* the budgets as the nodes stand */
    for (i = 0; i < n; i++) {
        of[i] = pool_of(&ps, nodes[i], why, sizeof(why));
        upg_budget_add_node(&ps.cluster, nodes[i]);
        if (!of[i])
            continue;
        struct upg_budget *b = &of[i]->budget;
        b->total++;
        long long g = node_gpus(nodes[i]);
        b->gpus_total += g;
        bool unsched = json_is_true(kobj_path(nodes[i], "spec.unschedulable"));
        if (!upg_node_ready(nodes[i]) || unsched)
            b->unavailable++;
        else
            b->gpus_ready += g;
    }
    const json_t *cluster_mu = in->max_unavailable;
    if (cluster_mu)
        ps.cluster_limit = upg_limit(cluster_mu, ps.cluster.total);
    _cleanup_json_ json_t *one = json_integer(1);
    for (size_t k = 0; k < ps.n_pools; k++) {
        struct pool *pl = &ps.pools[k];
        const json_t *mu = pl->p.max_unavailable ? pl->p.max_unavailable
                           : cluster_mu          ? cluster_mu
                                                 : one;
        pl->limit = upg_limit(mu, pl->budget.total);
        if (pl->limit < 1)
            pl->limit = 1; /* a percentage of a small pool rounds up to a node */
        pl->floor = pl->p.capacity_floor ? kobj_int_or_percent_scaled(pl->p.capacity_floor,
                                                                      pl->budget.gpus_total, true)
                                         : -1;
    }
    /* the nodes in a move first (they free their budget as they finish), then the starts */
    for (int pass = 0; pass < 2; pass++) {
        for (i = 0; i < n; i++) {
            node = (json_t *)nodes[i];
            const char *name = kobj_name(node);
            if (!of[i])
                continue; /* two pools select it: left as it is */
            struct pool *pl = of[i];
            enum upg_alloc target = UPG_ALLOC_DEVICE_PLUGIN;
            enum upg_move_step step = upg_move_of(node, &target);
            enum upg_alloc cur = upg_node_alloc(node);
            if (pass == 0) {
                pl->r->total++;
                if (step != UPG_MOVE_NONE) {
                    step_node(&ps, node, target, step, why, sizeof(why));
                    char note[600];
                    snprintf(note, sizeof(note), "%s%s%s", upg_move_step_name(step),
                             why[0] ? ": " : "", why);
                    upg_notes_add(&pl->r->moving, name, note);
                    plan->requeue_s = 2;
                } else if (cur == pl->p.gpu_allocation) {
                    pl->r->on_target++;
                }
                if (cur == UPG_ALLOC_DRA || (step != UPG_MOVE_NONE && target == UPG_ALLOC_DRA))
                    plan->dra_wanted = true;
                continue;
            }
            if (step != UPG_MOVE_NONE || cur == pl->p.gpu_allocation || pl->error)
                continue;
            if (pl->p.gpu_allocation == UPG_ALLOC_DRA)
                plan->dra_wanted = true;
            if (!may_start(&ps, pl, node, why, sizeof(why))) {
                if (pl->r->waiting.n < UPG_POOL_WAITING_MAX)
                    upg_notes_add(&pl->r->waiting, name, why);
                plan->requeue_s = plan->requeue_s ?: 10;
                continue;
            }
            start_node(&ps, node, pl->p.gpu_allocation);
            upg_notes_add(&pl->r->moving, name, "drain: starting");
            plan->requeue_s = 2;
        }
    }
    for (size_t k = 0; k < ps.n_pools; k++) {
        if (ps.pools[k].p.gpu_allocation == UPG_ALLOC_DRA && !ps.pools[k].error)
            plan->dra_wanted = true;
        report_status(&ps.pools[k]);
    }
    free(nodes);
    free(of);
    json_decref(ps.pdb_used);
    pools_done(&ps);
    *ret = plan;
    return 0;
}

void upg_alloc_plan_free(struct upg_alloc_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_patches; i++) {
        free(p->patches[i].node);
        json_decref(p->patches[i].patch);
    }
    free(p->patches);
    for (size_t i = 0; i < p->n_evictions; i++) {
        free(p->evictions[i].ns);
        free(p->evictions[i].name);
        free(p->evictions[i].node);
    }
    free(p->evictions);
    for (size_t i = 0; i < p->n_slice_nodes; i++)
        free(p->slice_nodes[i]);
    free(p->slice_nodes);
    for (size_t i = 0; i < p->n_events; i++) {
        free(p->events[i].node);
        free(p->events[i].message);
    }
    free(p->events);
    for (size_t i = 0; i < p->n_pools; i++) {
        struct upg_alloc_pool_report *r = &p->pools[i];
        free(r->name);
        free(r->error);
        upg_notes_done(&r->moving);
        upg_notes_done(&r->waiting);
        json_decref(r->status);
    }
    free(p->pools);
    free(p);
}

bool upg_alloc_dra_wanted(const json_t *nodes, const json_t *pools)
{
    size_t i;
    json_t *o;
    json_array_foreach ((json_t *)pools, i, o) {
        struct upg_pool p = {0};
        struct err pe = {0};
        if (upg_pool_parse(o, &p, &pe) < 0)
            continue;
        bool dra = p.gpu_allocation == UPG_ALLOC_DRA;
        upg_pool_done(&p);
        if (dra)
            return true;
    }
    json_array_foreach ((json_t *)nodes, i, o) {
        enum upg_alloc target = UPG_ALLOC_DEVICE_PLUGIN;
        if (upg_node_alloc(o) == UPG_ALLOC_DRA ||
            (upg_move_of(o, &target) != UPG_MOVE_NONE && target == UPG_ALLOC_DRA))
            return true;
    }
    return false;
}
