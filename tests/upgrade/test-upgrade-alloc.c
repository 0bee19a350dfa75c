/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU allocation per pool (upg_alloc_plan), table-tested: each step of a node's move from
 * the plan of a node annotated at that step (what a restarted operator reads), the budget and
 * the floor, the nodes left alone, and whole moves of a pool executed on a small simulated
 * cluster (node patches merged, evictions carried out and the evicted pods made again on a
 * schedulable node, the plugins' DaemonSets following the deploy labels, the DRA plugin
 * publishing a ResourceSlice, the device plugin advertising nvidia.com/gpu) until nothing
 * changes, checking after every pass that no more nodes than the budget are cordoned, that no
 * node ever runs both plugins and that no GPU pod is lost.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/compact-pods.h"
#include "kobj.h"
#include "upgrade.h"
#include "yamlcfg.h"

#define T0 1764669600

struct world {
    json_t *nodes, *pods, *pdbs, *pools, *slices;
    json_t *max_unavailable;
    int seq;
};

/* metadata.<kind>[key] of a patch (a key with dots, which a dotted path cannot name) */
static json_t *at_json(const json_t *o, const char *kind, const char *key)
{
    return kobj_keys(o, (const char *const[]){"metadata", kind, key, NULL});
}

static const char *at(const json_t *o, const char *kind, const char *key)
{
    return json_string_value(at_json(o, kind, key));
}

static json_t *mk_node(const char *name, bool dra)
{
    json_t *n =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s,s:s,s:s},s:{}},s:{},s:{s:{s:s},s:[{s:s,s:s}]}}",
                  "apiVersion", "v1", "kind", "Node", "metadata", "name", name, "resourceVersion",
                  "1", "labels", "nvidia.com/gpu.present", "true", "nvidia.com/gpu.count", "8",
                  "pool", "a", "annotations", "spec", "status", "allocatable", "nvidia.com/gpu",
                  dra ? "0" : "8", "conditions", "type", "Ready", "status", "True");
    if (dra) {
        json_t *l = kobj_path(n, "metadata.labels");
        json_object_set_new(l, UPG_LABEL_ALLOCATION, json_string("dra"));
        json_object_set_new(l, UPG_LABEL_DEPLOY_DP, json_string("false"));
        json_object_set_new(l, UPG_LABEL_DEPLOY_DRA, json_string("true"));
    }
    return n;
}

static json_t *mk_pod(struct world *w, const char *node, const char *app, bool gpu, bool daemon)
{
    char name[64];
    snprintf(name, sizeof(name), "%s-%d", app, w->seq++);
    json_t *p = json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s,s:[{s:s}]},s:{s:s,s:[{s:s,s:s}]}}",
                          "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace",
                          daemon ? "gpu-operator" : "default", "labels", "app", app, "spec",
                          "nodeName", node, "containers", "name", "c", "status", "phase", "Running",
                          "conditions", "type", "Ready", "status", "True");
    if (gpu)
        json_object_set_new(json_array_get(kobj_path(p, "spec.containers"), 0), "resources",
                            json_pack("{s:{s:s}}", "limits", "nvidia.com/gpu", "1"));
    if (daemon)
        json_object_set_new(json_object_get(p, "metadata"), "ownerReferences",
                            json_pack("[{s:s,s:s}]", "kind", "DaemonSet", "name", app));
    return p;
}

static json_t *mk_slice(const char *node)
{
    char name[96];
    snprintf(name, sizeof(name), "%s-gpu.nvidia.com-0", node);
    return json_pack("{s:{s:s,s:{s:s}},s:{s:s,s:s,s:[{s:s}]}}", "metadata", "name", name, "labels",
                     UPG_LABEL_DRA_NODE, node, "spec", "driver", UPG_DRA_DRIVER, "nodeName", node,
                     "devices", "name", "gpu-0");
}

static json_t *mk_pool(const char *name, const char *alloc, const char *extra)
{
    char text[512];
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"nodeSelector\":{\"pool\":\"a\"},"
             "\"gpuAllocation\":\"%s\"%s%s}}",
             name, alloc, extra ? "," : "", extra ? extra : "");
    json_t *p = json_loads(text, 0, NULL);
    assert_non_null(p);
    return p;
}

static void world_init(struct world *w, int n, bool dra, json_t *pool)
{
    *w = (struct world){.nodes = json_array(),
                        .pods = json_array(),
                        .pdbs = json_array(),
                        .pools = json_array(),
                        .slices = json_array()};
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "n%d", i);
        json_array_append_new(w->nodes, mk_node(name, dra));
        if (dra) {
            json_array_append_new(w->pods, mk_pod(w, name, UPG_DRA_PLUGIN_APP, false, true));
            json_array_append_new(w->slices, mk_slice(name));
        } else {
            json_array_append_new(w->pods, mk_pod(w, name, UPG_DEVICE_PLUGIN_APP, false, true));
        }
        json_array_append_new(w->pods, mk_pod(w, name, "train", true, false));
    }
    if (pool)
        json_array_append_new(w->pools, pool);
}

static void world_done(struct world *w)
{
    json_decref(w->nodes);
    json_decref(w->pods);
    json_decref(w->pdbs);
    json_decref(w->pools);
    json_decref(w->slices);
    json_decref(w->max_unavailable);
}

static json_t *node_by(struct world *w, const char *name)
{
    size_t i;
    json_t *n;
    json_array_foreach (w->nodes, i, n) {
        if (streq_ptr(kobj_name(n), name))
            return n;
    }
    return NULL;
}

/* The second run of every test plans from the pods as the shell hands them over
 * (upg_pod_compact's form) and must come out the same. */
static bool compact_run;

static struct upg_alloc_plan *plan(struct world *w)
{
    /* the plan copies what it keeps of a pod */
    _cleanup_json_ json_t *compact = compact_run ? test_compact_pods(w->pods, NULL) : NULL;
    struct upg_alloc_input in = {.nodes = w->nodes,
                                 .pods = compact ? compact : w->pods,
                                 .pdbs = w->pdbs,
                                 .pools = w->pools,
                                 .max_unavailable = w->max_unavailable,
                                 .slices = w->slices,
                                 .now_s = T0};
    struct upg_alloc_plan *p = NULL;
    struct err e = {0};
    assert_int_equal(upg_alloc_plan(&in, &p, &e), 0);
    return p;
}

/* A merge patch applied (RFC 7386) to obj, in place. */
static void merge(json_t *obj, const json_t *patch)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)patch, k, v) {
        if (json_is_null(v))
            json_object_del(obj, k);
        else if (json_is_object(v) && json_is_object(json_object_get(obj, k)))
            merge(json_object_get(obj, k), v);
        else
            json_object_set_new(obj, k, json_deep_copy(v));
    }
}

static const char *label(json_t *n, const char *k)
{
    return kobj_label(n, k);
}

static bool pod_running(struct world *w, const char *node, const char *app)
{
    size_t i;
    json_t *p;
    json_array_foreach (w->pods, i, p) {
        if (streq_ptr(kobj_path_str(p, "spec.nodeName"), node) &&
            streq_ptr(kobj_label(p, "app"), app))
            return true;
    }
    return false;
}

static int count_app(struct world *w, const char *app)
{
    int c = 0;
    size_t i;
    json_t *p;
    json_array_foreach (w->pods, i, p)
        c += streq_ptr(kobj_label(p, "app"), app);
    return c;
}

/* A plugin's pod stops in three ticks: terminating (deletionTimestamp set), still terminating,
 * then gone: a plan that started the other plugin before it was gone would run both. */
static void stop_pods(struct world *w, const char *node, const char *app)
{
    for (size_t i = json_array_size(w->pods); i-- > 0;) {
        json_t *p = json_array_get(w->pods, i);
        if (!streq_ptr(kobj_path_str(p, "spec.nodeName"), node) ||
            !streq_ptr(kobj_label(p, "app"), app))
            continue;
        if (kobj_label(p, "sim-stopping"))
            json_array_remove(w->pods, i);
        else if (kobj_path(p, "metadata.deletionTimestamp"))
            json_object_set_new(kobj_path(p, "metadata.labels"), "sim-stopping",
                                json_string("true"));
        else
            json_object_set_new(json_object_get(p, "metadata"), "deletionTimestamp",
                                json_string("2025-12-02T10:00:00Z"));
    }
}

static void remove_pods(struct world *w, const char *node, const char *app)
{
    for (size_t i = json_array_size(w->pods); i-- > 0;) {
        json_t *p = json_array_get(w->pods, i);
        if (streq_ptr(kobj_path_str(p, "spec.nodeName"), node) &&
            streq_ptr(kobj_label(p, "app"), app))
            json_array_remove(w->pods, i);
    }
}

/* The cluster after the plan: patches merged, evictions made (the pod made again on the first
 * schedulable node, as its ReplicaSet and the scheduler would), slices deleted; then the
 * DaemonSets and the plugins follow the labels. Returns whether anything changed. */
static bool execute(struct world *w, const struct upg_alloc_plan *p)
{
    bool changed = p->n_patches + p->n_evictions + p->n_slice_nodes > 0;
    for (size_t i = 0; i < p->n_patches; i++) {
        json_t *n = node_by(w, p->patches[i].node);
        assert_non_null(n);
        assert_string_equal(kobj_path_str(p->patches[i].patch, "metadata.resourceVersion"),
                            kobj_resource_version(n));
        _cleanup_json_ json_t *patch = json_deep_copy(p->patches[i].patch);
        json_object_del(json_object_get(patch, "metadata"), "resourceVersion");
        merge(n, patch);
        char rv[16];
        snprintf(rv, sizeof(rv), "%d", atoi(kobj_resource_version(n)) + 1);
        json_object_set_new(json_object_get(n, "metadata"), "resourceVersion", json_string(rv));
    }
    for (size_t i = 0; i < p->n_evictions; i++) {
        const struct upg_pod_ref *ev = &p->evictions[i];
        for (size_t k = json_array_size(w->pods); k-- > 0;) {
            json_t *pod = json_array_get(w->pods, k);
            if (!streq_ptr(kobj_name(pod), ev->name))
                continue;
            json_array_remove(w->pods, k);
            size_t j;
            json_t *n;
            json_array_foreach (w->nodes, j, n) {
                if (!json_is_true(kobj_path(n, "spec.unschedulable"))) {
                    json_array_append_new(w->pods, mk_pod(w, kobj_name(n), "train", true, false));
                    break;
                }
            }
        }
    }
    for (size_t i = 0; i < p->n_slice_nodes; i++) {
        for (size_t k = json_array_size(w->slices); k-- > 0;)
            if (streq_ptr(kobj_path_str(json_array_get(w->slices, k), "spec.nodeName"),
                          p->slice_nodes[i]))
                json_array_remove(w->slices, k);
    }
    /* the DaemonSets and the plugins */
    size_t i;
    json_t *n;
    json_array_foreach (w->nodes, i, n) {
        const char *name = kobj_name(n);
        bool dp = !streq_ptr(label(n, UPG_LABEL_DEPLOY_DP), "false");
        bool dra = streq_ptr(label(n, UPG_LABEL_DEPLOY_DRA), "true");
        bool dp_on = pod_running(w, name, UPG_DEVICE_PLUGIN_APP);
        bool dra_on = pod_running(w, name, UPG_DRA_PLUGIN_APP);
        if (dp_on && !dp) {
            stop_pods(w, name, UPG_DEVICE_PLUGIN_APP);
            json_object_set_new(kobj_path(n, "status.allocatable"), "nvidia.com/gpu",
                                json_string("0"));
            changed = true;
        } else if (!dp_on && dp) {
            json_array_append_new(w->pods, mk_pod(w, name, UPG_DEVICE_PLUGIN_APP, false, true));
            changed = true;
        } else if (dp_on && !streq_ptr(json_string_value(kobj_keys(
                                           n, (const char *const[]){"status", "allocatable",
                                                                    "nvidia.com/gpu", NULL})),
                                       "8")) {
            json_object_set_new(kobj_path(n, "status.allocatable"), "nvidia.com/gpu",
                                json_string("8"));
            changed = true;
        }
        if (dra_on && !dra) {
            stop_pods(w, name, UPG_DRA_PLUGIN_APP); /* its slices stay */
            changed = true;
        } else if (!dra_on && dra) {
            json_array_append_new(w->pods, mk_pod(w, name, UPG_DRA_PLUGIN_APP, false, true));
            changed = true;
        } else if (dra_on) {
            bool has = false;
            size_t k;
            json_t *s;
            json_array_foreach (w->slices, k, s)
                has |= streq_ptr(kobj_path_str(s, "spec.nodeName"), name);
            if (!has) {
                json_array_append_new(w->slices, mk_slice(name));
                changed = true;
            }
        }
        /* never both */
        assert_false(pod_running(w, name, UPG_DEVICE_PLUGIN_APP) &&
                     pod_running(w, name, UPG_DRA_PLUGIN_APP));
    }
    return changed;
}

static int cordoned(struct world *w)
{
    int c = 0;
    size_t i;
    json_t *n;
    json_array_foreach (w->nodes, i, n)
        c += json_is_true(kobj_path(n, "spec.unschedulable"));
    return c;
}

/* Plans and executes until nothing changes; the most nodes cordoned at once. */
static int run(struct world *w, int gpu_pods)
{
    int most = 0;
    for (int pass = 0; pass < 200; pass++) {
        struct upg_alloc_plan *p = plan(w);
        bool changed = execute(w, p);
        upg_alloc_plan_free(p);
        int c = cordoned(w);
        most = c > most ? c : most;
        assert_int_equal(count_app(w, "train"), gpu_pods); /* none lost */
        if (!changed)
            return most;
    }
    fail_msg("the moves did not settle in 200 passes");
    return most;
}

static void assert_all(struct world *w, const char *alloc)
{
    size_t i;
    json_t *n;
    json_array_foreach (w->nodes, i, n) {
        const char *name = kobj_name(n);
        assert_string_equal(upg_alloc_name(upg_node_alloc(n)), alloc);
        assert_null(kobj_annotation(n, UPG_ANN_MOVE));
        assert_null(kobj_annotation(n, UPG_ANN_MOVE_CORDONED));
        assert_false(json_is_true(kobj_path(n, "spec.unschedulable")));
        bool dra = strcmp(alloc, "dra") == 0;
        assert_int_equal(pod_running(w, name, UPG_DRA_PLUGIN_APP), dra);
        assert_int_equal(pod_running(w, name, UPG_DEVICE_PLUGIN_APP), !dra);
    }
}

/* ---- whole moves ---------------------------------------------------------------------------- */

static void test_pool_to_dra_one_at_a_time(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 3, false, mk_pool("serving", "dra", NULL));
    assert_int_equal(run(&w, 3), 1); /* the default budget: one node at a time */
    assert_all(&w, "dra");
    assert_int_equal(json_array_size(w.slices), 3);
    struct upg_alloc_plan *p = plan(&w);
    assert_true(p->dra_wanted);
    assert_int_equal(p->n_patches, 0);
    assert_int_equal(p->pools[0].on_target, 3);
    assert_string_equal(kobj_path_str(p->pools[0].status, "progress"), "3/3");
    upg_alloc_plan_free(p);
    world_done(&w);
}

static void test_pool_back_to_device_plugin(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 3, true, mk_pool("serving", "devicePlugin", NULL));
    assert_int_equal(run(&w, 3), 1);
    assert_all(&w, "devicePlugin");
    assert_int_equal(json_array_size(w.slices), 0); /* the stopped plugin's slices deleted */
    struct upg_alloc_plan *p = plan(&w);
    assert_false(p->dra_wanted);
    upg_alloc_plan_free(p);
    world_done(&w);
}

/* A pod that has its GPU through a resource claim alone leaves a node moving off DRA, as one
 * with nvidia.com/gpu does: read from the compact form too (its claims are kept there). */
static void test_claim_pod_leaves(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, true, mk_pool("serving", "devicePlugin", NULL));
    size_t i;
    json_t *pod;
    json_array_foreach (w.pods, i, pod) {
        if (!streq_ptr(kobj_label(pod, "app"), "train"))
            continue;
        json_object_del(json_array_get(kobj_path(pod, "spec.containers"), 0), "resources");
        json_object_set_new(json_object_get(pod, "spec"), "resourceClaims",
                            json_pack("[{s:s,s:s}]", "name", "gpu", "resourceClaimName", "c"));
        assert_false(upg_pod_is_gpu(pod));
    }
    bool evicted = false;
    for (int pass = 0; pass < 20 && !evicted; pass++) {
        struct upg_alloc_plan *p = plan(&w);
        for (size_t k = 0; k < p->n_evictions; k++)
            evicted |= strncmp(p->evictions[k].name, "train-", 6) == 0;
        execute(&w, p);
        upg_alloc_plan_free(p);
    }
    assert_true(evicted);
    world_done(&w);
}

static void test_budget_two_at_a_time(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 4, false, mk_pool("serving", "dra", "\"maxUnavailable\":2"));
    assert_int_equal(run(&w, 4), 2);
    assert_all(&w, "dra");
    world_done(&w);
    /* the ClusterPolicy's maxUnavailable bounds a pool without its own, and the cluster */
    world_init(&w, 4, false, mk_pool("serving", "dra", NULL));
    w.max_unavailable = json_string("50%");
    assert_int_equal(run(&w, 4), 2);
    world_done(&w);
    world_init(&w, 4, false, mk_pool("serving", "dra", "\"maxUnavailable\":3"));
    w.max_unavailable = json_integer(1);
    assert_int_equal(run(&w, 4), 1);
    world_done(&w);
}

static void test_floor(void **state)
{
    (void)state;
    struct world w;
    /* 24 GPUs, a floor of all of them: no node starts, and the pool says why */
    world_init(&w, 3, false, mk_pool("serving", "dra", "\"capacityFloor\":24"));
    struct upg_alloc_plan *p = plan(&w);
    assert_int_equal(p->n_patches, 0);
    assert_int_equal(p->pools[0].waiting.n, 3);
    assert_non_null(strstr(p->pools[0].waiting.v[0].text, "capacity floor 24"));
    assert_true(p->dra_wanted); /* asked for: the stack is rendered before the first move */
    upg_alloc_plan_free(p);
    world_done(&w);
    /* 16 of 24: a node at a time keeps 16 ready */
    world_init(&w, 3, false,
               mk_pool("serving", "dra", "\"capacityFloor\":16,\"maxUnavailable\":3"));
    assert_int_equal(run(&w, 3), 1);
    assert_all(&w, "dra");
    world_done(&w);
}

/* ---- each step, as a restarted operator reads it -------------------------------------------- */

static json_t *annotate(json_t *n, const char *move)
{
    json_t *a = kobj_path(n, "metadata.annotations");
    json_object_set_new(a, UPG_ANN_MOVE, json_string(move));
    json_object_set_new(a, UPG_ANN_MOVE_CORDONED, json_string("true"));
    json_object_set_new(json_object_get(n, "spec"), "unschedulable", json_true());
    return n;
}

static void test_steps(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, false, mk_pool("serving", "dra", NULL));
    json_t *n0 = node_by(&w, "n0");
    /* start: cordoned, gpuop's note, the first step */
    struct upg_alloc_plan *p = plan(&w);
    assert_int_equal(p->n_patches, 1);
    assert_string_equal(p->patches[0].node, "n0");
    json_t *pt = p->patches[0].patch;
    assert_true(json_is_true(kobj_path(pt, "spec.unschedulable")));
    assert_string_equal(at(pt, "annotations", UPG_ANN_MOVE), "dra drain");
    assert_string_equal(at(pt, "annotations", UPG_ANN_MOVE_CORDONED), "true");
    assert_int_equal(p->n_events, 1);
    assert_string_equal(p->events[0].node, "n0");
    assert_string_equal(p->events[0].message, "Moving from the device plugin to the DRA kubelet "
                                              "plugin: cordoned; its GPU pods are evicted");
    upg_alloc_plan_free(p);

    /* drain: its GPU pod evicted, the device plugin left (a daemon); n1 waits for the budget */
    annotate(n0, "dra drain");
    p = plan(&w);
    assert_int_equal(p->n_patches, 0);
    assert_int_equal(p->n_evictions, 1);
    assert_int_equal(p->n_events, 0); /* no step taken */
    assert_string_equal(p->evictions[0].node, "n0");
    assert_non_null(strstr(p->evictions[0].name, "train"));
    assert_int_equal(p->pools[0].waiting.n, 1);
    assert_non_null(strstr(p->pools[0].waiting.v[0].text, "maxUnavailable 1"));
    assert_int_equal(p->requeue_s, 2);
    upg_alloc_plan_free(p);
    /* its pods not listed yet: it waits, evicting nothing */
    {
        _cleanup_json_ json_t *none = json_object();
        struct upg_alloc_input in = {
            .nodes = w.nodes, .pods = w.pods, .pods_listed = none, .pools = w.pools, .now_s = T0};
        struct err e = {0};
        assert_int_equal(upg_alloc_plan(&in, &p, &e), 0);
        assert_int_equal(p->n_evictions, 0);
        assert_int_equal(p->n_patches, 0);
        assert_non_null(strstr(p->pools[0].moving.v[0].text, "not listed"));
        upg_alloc_plan_free(p);
    }
    /* a PodDisruptionBudget that allows none holds the eviction */
    json_array_append_new(w.pdbs, json_pack("{s:{s:s,s:s},s:{s:{s:{s:s}}},s:{s:i}}", "metadata",
                                            "name", "train", "namespace", "default", "spec",
                                            "selector", "matchLabels", "app", "train", "status",
                                            "disruptionsAllowed", 0));
    p = plan(&w);
    assert_int_equal(p->n_evictions, 0);
    assert_non_null(strstr(p->pools[0].moving.v[0].text, "PodDisruptionBudget default/train"));
    upg_alloc_plan_free(p);
    json_array_clear(w.pdbs);

    /* emptied: the device plugin turned off */
    remove_pods(&w, "n0", "train");
    p = plan(&w);
    assert_int_equal(p->n_patches, 1);
    pt = p->patches[0].patch;
    assert_string_equal(at(pt, "labels", UPG_LABEL_DEPLOY_DP), "false");
    assert_null(at_json(pt, "labels", UPG_LABEL_DEPLOY_DRA));
    assert_string_equal(at(pt, "annotations", UPG_ANN_MOVE), "dra stop");
    assert_int_equal(p->n_events, 1);
    assert_string_equal(p->events[0].message,
                        "Moving to dra: its GPU pods are gone; the device plugin turned off");
    upg_alloc_plan_free(p);

    /* stop: while the device plugin's pod runs, the DRA plugin is not turned on */
    annotate(n0, "dra stop");
    json_object_set_new(kobj_path(n0, "metadata.labels"), UPG_LABEL_DEPLOY_DP,
                        json_string("false"));
    p = plan(&w);
    assert_int_equal(p->n_patches, 0);
    assert_non_null(strstr(p->pools[0].moving.v[0].text, "nvidia-device-plugin-daemonset"));
    upg_alloc_plan_free(p);
    remove_pods(&w, "n0", UPG_DEVICE_PLUGIN_APP);
    p = plan(&w);
    assert_int_equal(p->n_patches, 1);
    pt = p->patches[0].patch;
    assert_string_equal(at(pt, "labels", UPG_LABEL_DEPLOY_DRA), "true");
    assert_string_equal(at(pt, "annotations", UPG_ANN_MOVE), "dra start");
    assert_string_equal(p->events[0].message, "Moving to dra: the device plugin stopped; the DRA "
                                              "kubelet plugin turned on");
    upg_alloc_plan_free(p);

    /* start: uncordoned only once its slice has a device */
    annotate(n0, "dra start");
    json_object_set_new(kobj_path(n0, "metadata.labels"), UPG_LABEL_DEPLOY_DRA,
                        json_string("true"));
    p = plan(&w);
    assert_int_equal(p->n_patches, 0);
    assert_non_null(strstr(p->pools[0].moving.v[0].text, "ResourceSlice is not published"));
    upg_alloc_plan_free(p);
    json_t *empty = mk_slice("n0");
    json_array_clear(kobj_path(empty, "spec.devices"));
    json_array_append_new(w.slices, empty);
    p = plan(&w);
    assert_int_equal(p->n_patches, 0); /* a slice without devices serves nothing */
    upg_alloc_plan_free(p);
    json_array_append_new(w.slices, mk_slice("n0"));
    p = plan(&w);
    assert_int_equal(p->n_patches, 1);
    pt = p->patches[0].patch;
    assert_string_equal(at(pt, "labels", UPG_LABEL_ALLOCATION), "dra");
    assert_true(json_is_null(at_json(pt, "annotations", UPG_ANN_MOVE)));
    assert_true(json_is_null(at_json(pt, "annotations", UPG_ANN_MOVE_CORDONED)));
    assert_true(json_is_false(kobj_path(pt, "spec.unschedulable")));
    assert_string_equal(p->events[0].message,
                        "Moved to dra: the DRA kubelet plugin serves its GPUs; uncordoned");
    upg_alloc_plan_free(p);
    world_done(&w);
}

/* A node gpuop did not cordon is not uncordoned by the move's end. */
static void test_start_keeps_others_cordon(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, false, mk_pool("serving", "dra", NULL));
    json_t *n0 = node_by(&w, "n0");
    annotate(n0, "dra start");
    json_object_del(kobj_path(n0, "metadata.annotations"), UPG_ANN_MOVE_CORDONED);
    json_array_append_new(w.slices, mk_slice("n0"));
    struct upg_alloc_plan *p = plan(&w);
    assert_int_equal(p->n_patches, 1);
    assert_null(kobj_path(p->patches[0].patch, "spec"));
    upg_alloc_plan_free(p);
    world_done(&w);
}

static void test_left_alone(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 4, false, mk_pool("serving", "dra", "\"maxUnavailable\":4"));
    json_t *l;
    /* cordoned by someone else, not Ready, a driver upgrade in flight, a node without GPUs */
    json_object_set_new(json_object_get(node_by(&w, "n0"), "spec"), "unschedulable", json_true());
    json_object_set_new(json_array_get(kobj_path(node_by(&w, "n1"), "status.conditions"), 0),
                        "status", json_string("False"));
    l = kobj_path(node_by(&w, "n2"), "metadata.labels");
    json_object_set_new(l, UPG_LABEL_STATE, json_string("drain-required"));
    l = kobj_path(node_by(&w, "n3"), "metadata.labels");
    json_object_del(l, "nvidia.com/gpu.present");
    struct upg_alloc_plan *p = plan(&w);
    assert_int_equal(p->n_patches, 0);
    assert_int_equal(p->pools[0].total, 3);
    assert_int_equal(p->pools[0].waiting.n, 3);
    assert_non_null(strstr(p->pools[0].waiting.v[0].text, "cordoned by someone else"));
    assert_non_null(strstr(p->pools[0].waiting.v[1].text, "not Ready"));
    assert_non_null(strstr(p->pools[0].waiting.v[2].text, "driver upgrade"));
    upg_alloc_plan_free(p);
    world_done(&w);
    /* two pools select the nodes: left as they are */
    world_init(&w, 2, false, mk_pool("serving", "dra", NULL));
    json_array_append_new(w.pools, mk_pool("other", "dra", NULL));
    p = plan(&w);
    assert_int_equal(p->n_patches, 0);
    upg_alloc_plan_free(p);
    world_done(&w);
}

/* A pool whose field does not parse: its nodes stay, the reason is its status's. */
static void test_invalid_pool(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, false, mk_pool("serving", "Dra", NULL));
    struct upg_alloc_plan *p = plan(&w);
    assert_int_equal(p->n_patches, 0);
    assert_non_null(p->pools[0].error);
    assert_string_equal(p->pools[0].error, "DriverUpgradePool serving: spec.gpuAllocation: "
                                           "\"Dra\": expected devicePlugin or dra");
    assert_string_equal(kobj_path_str(p->pools[0].status, "error"), p->pools[0].error);
    assert_true(p->pools[0].write);
    assert_false(p->dra_wanted);
    upg_alloc_plan_free(p);
    world_done(&w);
}

/* A pool that names no allocation: the device plugin, and no status of it to write. */
static void test_pool_without_field(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, false,
               json_pack("{s:{s:s},s:{s:{s:s}}}", "metadata", "name", "serving", "spec",
                         "nodeSelector", "pool", "a"));
    struct upg_alloc_plan *p = plan(&w);
    assert_int_equal(p->n_patches, 0);
    assert_int_equal(p->pools[0].on_target, 2);
    assert_null(p->pools[0].status);
    assert_false(p->pools[0].write);
    upg_alloc_plan_free(p);
    world_done(&w);
}

/* The default pool (no DriverUpgradePool): the device plugin; a node left on DRA comes back. */
static void test_default_pool(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, true, NULL);
    struct upg_alloc_plan *p = plan(&w);
    assert_int_equal(p->n_pools, 1);
    assert_string_equal(p->pools[0].name, "default");
    assert_null(p->pools[0].status);
    assert_true(p->dra_wanted);
    upg_alloc_plan_free(p);
    assert_int_equal(run(&w, 2), 1);
    assert_all(&w, "devicePlugin");
    world_done(&w);
}

/* A pool changed back while a node moves: the node finishes its move, then moves back. */
static void test_changed_mid_move(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, false, mk_pool("serving", "dra", NULL));
    for (int i = 0; i < 4; i++) {
        struct upg_alloc_plan *p = plan(&w);
        execute(&w, p);
        upg_alloc_plan_free(p);
    }
    enum upg_alloc target;
    assert_int_not_equal(upg_move_of(node_by(&w, "n0"), &target), UPG_MOVE_NONE);
    json_array_clear(w.pools);
    json_array_append_new(w.pools, mk_pool("serving", "devicePlugin", NULL));
    assert_int_equal(run(&w, 2), 1);
    assert_all(&w, "devicePlugin");
    world_done(&w);
}

static void test_names(void **state)
{
    (void)state;
    assert_int_equal(upg_alloc_parse("dra"), UPG_ALLOC_DRA);
    assert_int_equal(upg_alloc_parse("devicePlugin"), UPG_ALLOC_DEVICE_PLUGIN);
    assert_int_equal(upg_alloc_parse("DRA"), -1);
    assert_int_equal(upg_alloc_parse(NULL), -1);
    _cleanup_json_ json_t *n = mk_node("x", false);
    enum upg_alloc t = UPG_ALLOC_DEVICE_PLUGIN;
    static const struct {
        const char *ann;
        enum upg_move_step step;
        enum upg_alloc target;
    } cases[] = {{"dra drain", UPG_MOVE_DRAIN, UPG_ALLOC_DRA},
                 {"devicePlugin start", UPG_MOVE_START, UPG_ALLOC_DEVICE_PLUGIN},
                 {"dra stop", UPG_MOVE_STOP, UPG_ALLOC_DRA},
                 {"dra", UPG_MOVE_NONE, 0},
                 {"dra done", UPG_MOVE_NONE, 0},
                 {"gpu drain", UPG_MOVE_NONE, 0},
                 {"", UPG_MOVE_NONE, 0}};
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        json_object_set_new(kobj_path(n, "metadata.annotations"), UPG_ANN_MOVE,
                            json_string(cases[i].ann));
        assert_int_equal(upg_move_of(n, &t), cases[i].step);
        if (cases[i].step != UPG_MOVE_NONE)
            assert_int_equal(t, cases[i].target);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_to_dra_one_at_a_time),
        cmocka_unit_test(test_pool_back_to_device_plugin),
        cmocka_unit_test(test_claim_pod_leaves),
        cmocka_unit_test(test_budget_two_at_a_time),
        cmocka_unit_test(test_floor),
        cmocka_unit_test(test_steps),
        cmocka_unit_test(test_start_keeps_others_cordon),
        cmocka_unit_test(test_left_alone),
        cmocka_unit_test(test_invalid_pool),
        cmocka_unit_test(test_pool_without_field),
        cmocka_unit_test(test_default_pool),
        cmocka_unit_test(test_changed_mid_move),
        cmocka_unit_test(test_names),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    compact_run = true;
    return failed + cmocka_run_group_tests_name("compact pods", tests, NULL, NULL);
}
