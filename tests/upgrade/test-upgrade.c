/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The upgrade planner, table-tested on a small simulated cluster: each case builds nodes, pods,
 * PodDisruptionBudgets and pools, plans, checks the plan, and (for the rollouts) executes it as
 * the operator's shell would (node patches merged, evictions and driver pod deletions carried
 * out, a new driver pod of the DaemonSet's revision coming up) until nothing changes, checking
 * after every pass that no more nodes than maxUnavailable are down and no pool is below its
 * floor.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../unit/compact-nodes.h"
#include "../unit/compact-pods.h"
#include "kobj.h"
#include "kube.h"
#include "upg-internal.h"
#include "upgrade.h"
#include "yamlcfg.h"

#define OLD "rev-old"
#define NEW "rev-new"
#define T0  1764669600 /* 2025-12-02 10:00:00 UTC, a Tuesday */

static const char *MATRIX_TEXT =
    "branches:\n"
    "  \"595\": {architectures: [ampere, hopper, blackwell], minKernel: \"5.4\", cudaVersion: "
    "\"13.0\", osImages: [ubuntu22.04, ubuntu24.04]}\n"
    "  \"580\": {architectures: [turing, ampere, hopper], minKernel: \"4.15\", cudaVersion: "
    "\"12.9\"}\n";

struct world {
    json_t *nodes, *pods, *pdbs, *pools, *nvds;
    struct upg_policy pol;
    struct upg_matrix *matrix;
    const char *rev, *version;
    int64_t now;
    bool broken_driver; /* new driver pods crash-loop */
    int pod_seq;
    struct upg_driver_set set;
    const struct upg_event_log *posted; /* the shell's log of Events posted, or NULL */
    const struct upg_hold *holds;       /* the remediation's holds */
    size_t n_holds;
    json_t *kept, *intern; /* the compact run's nodes (informer_view) */
};

/* The second run of every test plans from the nodes and pods as the operator hands them over
 * (nodes projected: only what upg_project_node keeps, labels compact; pods in upg_pod_compact's
 * form) and must come out the same: a field the planner reads that a projection drops, or a
 * pod read past upg_pod_obj and the upg_pod_* accessors, fails it. */
static bool compact_run;

static json_t *kept(struct world *w, json_t *v)
{
    if (!w->kept)
        w->kept = json_array();
    json_array_append_new(w->kept, v);
    return v;
}

/* The nodes a pass reads: as they are, or on the second run their projected, compact copies
 * (kept with the world: a plan may borrow from them). */
static const json_t *informer_view(struct world *w, const json_t *nodes)
{
    if (!compact_run)
        return nodes;
    if (!w->intern)
        w->intern = json_object();
    json_t *projected = json_array();
    size_t i;
    json_t *n;
    json_array_foreach ((json_t *)nodes, i, n) {
        json_t *p = kube_project_fields(n, NULL);
        upg_project_node(n, p);
        json_array_append_new(projected, p);
    }
    json_t *c = test_compact_nodes(projected, w->intern);
    json_decref(projected);
    return kept(w, c);
}

/* The pods a pass reads: as they are, or on the second run compact as the shell hands them
 * over (upg_pod_compact): the operand pods as the pod informer keeps them and the listed
 * workloads alike. */
static const json_t *pods_view(struct world *w)
{
    if (!compact_run)
        return w->pods;
    if (!w->intern)
        w->intern = json_object();
    return kept(w, test_compact_pods(w->pods, w->intern));
}

static json_t *mk_node(const char *name, int gpus)
{
    char g[16];
    snprintf(g, sizeof(g), "%d", gpus);
    return json_pack("{s:s,s:s,s:{s:s,s:{s:s,s:s,s:s,s:s},s:{}},s:{},s:{s:{s:s},s:[{s:s,s:s}],"
                     "s:{s:s}}}",
                     "apiVersion", "v1", "kind", "Node", "metadata", "name", name, "labels",
                     "nvidia.com/gpu.present", "true", "nvidia.com/gpu.family", "hopper",
                     "feature.node.kubernetes.io/system-os_release.ID", "ubuntu",
                     "feature.node.kubernetes.io/system-os_release.VERSION_ID", "22.04",
                     "annotations", "spec", "status", "allocatable", "nvidia.com/gpu", g,
                     "conditions", "type", "Ready", "status", "True", "nodeInfo", "kernelVersion",
                     "5.15.0-127-generic");
}

static json_t *mk_pod(struct world *w, const char *node, const char *name, const char *ns)
{
    static int uid_seq;
    char uid[96], created[40];
    snprintf(uid, sizeof(uid), "uid-%s-%d", name, uid_seq++);
    time_rfc3339((uint64_t)w->now * 1000, created, sizeof(created));
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:{}},s:{s:s,s:[]},s:{s:s,s:[{s:s,s:s}],s:[]}}",
                     "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", ns,
                     "uid", uid, "creationTimestamp", created, "labels", "spec", "nodeName", node,
                     "containers", "status", "phase", "Running", "conditions", "type", "Ready",
                     "status", "True", "containerStatuses");
}

static json_t *mk_driver_pod(struct world *w, const char *node, const char *rev, bool ready)
{
    char name[64];
    snprintf(name, sizeof(name), "nvidia-driver-daemonset-%d", w->pod_seq++);
    json_t *p = mk_pod(w, node, name, "gpu-operator");
    json_object_set_new(kobj_labels(p), "app", json_string(UPG_DRIVER_APP));
    json_object_set_new(kobj_labels(p), "controller-revision-hash", json_string(rev));
    json_object_set_new(
        json_object_get(p, "metadata"), "ownerReferences",
        json_pack("[{s:s,s:s}]", "kind", "DaemonSet", "name", "nvidia-driver-daemonset"));
    json_t *st = json_object_get(p, "status");
    json_object_set_new(st, "containerStatuses",
                        json_pack("[{s:s,s:b,s:i}]", "name", "driver", "ready", ready,
                                  "restartCount", ready ? 0 : 11));
    if (!ready)
        json_object_set_new(json_array_get(kobj_path(p, "status.conditions"), 0), "status",
                            json_string("False"));
    return p;
}

static json_t *mk_validator(struct world *w, const char *node)
{
    char name[64];
    snprintf(name, sizeof(name), "nvidia-operator-validator-%s", node);
    json_t *p = mk_pod(w, node, name, "gpu-operator");
    json_object_set_new(kobj_labels(p), "app", json_string(UPG_VALIDATOR_APP));
    json_object_set_new(
        json_object_get(p, "metadata"), "ownerReferences",
        json_pack("[{s:s,s:s}]", "kind", "DaemonSet", "name", "nvidia-operator-validator"));
    return p;
}

/* A GPU workload pod (one nvidia.com/gpu), owned by a ReplicaSet, labelled app=<app>. */
static json_t *mk_gpu_pod(struct world *w, const char *node, const char *name, const char *app)
{
    json_t *p = mk_pod(w, node, name, "default");
    json_object_set_new(kobj_labels(p), "app", json_string(app));
    json_object_set_new(json_object_get(p, "metadata"), "ownerReferences",
                        json_pack("[{s:s,s:s}]", "kind", "ReplicaSet", "name", app));
    json_array_append_new(kobj_path(p, "spec.containers"),
                          json_pack("{s:s,s:{s:{s:s}}}", "name", "main", "resources", "limits",
                                    "nvidia.com/gpu", "1"));
    return p;
}

static json_t *node_of(struct world *w, const char *name)
{
    size_t i;
    json_t *n;
    json_array_foreach (w->nodes, i, n) {
        if (streq_ptr(kobj_name(n), name))
            return n;
    }
    return NULL;
}

static void world_init(struct world *w, int n_nodes, int gpus)
{
    memset(w, 0, sizeof(*w));
    w->nodes = json_array();
    w->pods = json_array();
    w->pdbs = json_array();
    w->pools = json_array();
    w->nvds = json_array();
    w->rev = NEW;
    w->version = "595.91.07";
    w->now = T0;
    struct err e = {0};
    assert_int_equal(upg_policy_parse(NULL, "upgradePolicy", true, &w->pol, &e), 0);
    assert_int_equal(upg_matrix_parse(MATRIX_TEXT, strlen(MATRIX_TEXT), "matrix", &w->matrix, &e),
                     0);
    for (int i = 0; i < n_nodes; i++) {
        char name[32];
        snprintf(name, sizeof(name), "node-%d", i);
        json_array_append_new(w->nodes, mk_node(name, gpus));
        json_array_append_new(w->pods, mk_driver_pod(w, name, OLD, true));
        json_array_append_new(w->pods, mk_validator(w, name));
    }
}

static void world_done(struct world *w)
{
    json_decref(w->kept);
    json_decref(w->intern);
    json_decref(w->nodes);
    json_decref(w->pods);
    json_decref(w->pdbs);
    json_decref(w->pools);
    json_decref(w->nvds);
    upg_policy_done(&w->pol);
    upg_matrix_free(w->matrix);
}

static void set_policy(struct world *w, const char *json_text)
{
    json_error_t je;
    json_t *v = json_loads(json_text, 0, &je);
    assert_non_null(v);
    struct err e = {0};
    upg_policy_done(&w->pol);
    int r = upg_policy_parse(v, "spec.driver.upgradePolicy", false, &w->pol, &e);
    if (r < 0)
        fail_msg("%s", err_msg(&e));
    json_decref(v);
}

static void add_pool(struct world *w, const char *json_text)
{
    json_error_t je;
    json_t *v = json_loads(json_text, 0, &je);
    if (!v)
        fail_msg("pool JSON: %s", je.text);
    json_array_append_new(w->pools, v);
}

/* A pass over `nodes` (the shell's view of them) and the world's pods. */
static struct upg_plan *plan_nodes(struct world *w, const json_t *nodes)
{
    w->set = (struct upg_driver_set){.name = "nvidia-driver-daemonset",
                                     .ns = "gpu-operator",
                                     .revision = w->rev,
                                     .version = w->version};
    _cleanup_(upg_zones_freep) struct upg_zones *zones = upg_zones_new();
    upg_zones_load_pools(zones, NULL, w->pools);
    struct upg_input in = {.policy = &w->pol,
                           .zones = zones,
                           .nodes = informer_view(w, nodes),
                           .pods = pods_view(w),
                           .pdbs = w->pdbs,
                           .sets = &w->set,
                           .n_sets = 1,
                           .pools = w->pools,
                           .nvidia_drivers = w->nvds,
                           .matrix = w->matrix,
                           .validation_enabled = true,
                           .posted = w->posted,
                           .holds = w->holds,
                           .n_holds = w->n_holds,
                           .now_s = w->now};
    struct upg_plan *p = NULL;
    struct err e = {0};
    if (upg_plan(&in, &p, &e) < 0)
        fail_msg("upg_plan: %s", err_msg(&e));
    return p;
}

static struct upg_plan *plan(struct world *w)
{
    return plan_nodes(w, w->nodes);
}

/* RFC 7386 merge patch, in place (the node objects are held by pointer). */
static void merge(json_t *dst, const json_t *patch)
{
    json_t *m = kobj_merge_patch(dst, patch);
    json_object_clear(dst);
    json_object_update(dst, m);
    json_decref(m);
}

static void remove_pod(struct world *w, const char *ns, const char *name)
{
    for (size_t i = 0; i < json_array_size(w->pods); i++) {
        json_t *p = json_array_get(w->pods, i);
        if (streq_ptr(kobj_namespace(p), ns) && streq_ptr(kobj_name(p), name)) {
            json_array_remove(w->pods, i);
            return;
        }
    }
    fail_msg("no pod %s/%s to remove", ns, name);
}

/* Executes a plan as the shell and the cluster would; the driver DaemonSet (OnDelete) makes the
 * deleted pod's replacement at the current revision. */
static void execute_pods(struct world *w, const struct upg_plan *p);

static void execute(struct world *w, const struct upg_plan *p)
{
    for (size_t i = 0; i < p->n_patches; i++) {
        json_t *n = node_of(w, p->patches[i].node);
        assert_non_null(n);
        merge(n, p->patches[i].patch);
    }
    execute_pods(w, p);
}

/* The plan's evictions and pod deletions. */
static void execute_pods(struct world *w, const struct upg_plan *p)
{
    for (size_t i = 0; i < p->n_evictions; i++) {
        /* the Eviction API: refused when a budget allows no disruption */
        size_t k;
        json_t *pdb;
        json_array_foreach (w->pdbs, k, pdb) {
            json_t *al = kobj_path(pdb, "status.disruptionsAllowed");
            assert_true(json_integer_value(al) > 0);
        }
        remove_pod(w, p->evictions[i].ns, p->evictions[i].name);
    }
    for (size_t i = 0; i < p->n_deletions; i++) {
        const struct upg_pod_ref *a = &p->deletions[i];
        bool validator = strstr(a->name, "validator") != NULL;
        remove_pod(w, a->ns, a->name);
        /* the DaemonSet's replacement: a validator validates again (Ready unless told not) */
        json_array_append_new(w->pods, validator
                                           ? mk_validator(w, a->node)
                                           : mk_driver_pod(w, a->node, w->rev, !w->broken_driver));
    }
}

static const char *state_of(struct world *w, const char *node)
{
    return kobj_label(node_of(w, node), UPG_LABEL_STATE) ?: "";
}

static bool is_cordoned(struct world *w, const char *node)
{
    return json_is_true(kobj_path(node_of(w, node), "spec.unschedulable"));
}

static int count_state(struct world *w, const char *state)
{
    int c = 0;
    size_t i;
    json_t *n;
    json_array_foreach (w->nodes, i, n)
        c += streq_ptr(kobj_label(n, UPG_LABEL_STATE) ?: "", state);
    return c;
}

static int count_down(struct world *w)
{
    int c = 0;
    size_t i;
    json_t *n;
    json_array_foreach (w->nodes, i, n) {
        const char *s = kobj_label(n, UPG_LABEL_STATE);
        c += json_is_true(kobj_path(n, "spec.unschedulable")) ||
             (s && upg_state_parse(s) >= UPG_CORDON && upg_state_parse(s) <= UPG_UNCORDON);
    }
    return c;
}

static const char *ann(struct world *w, const char *node, const char *k)
{
    return kobj_annotation(node_of(w, node), k);
}

static bool has_event(const struct upg_plan *p, const char *node, const char *substr)
{
    for (size_t i = 0; i < p->n_events; i++) {
        const struct upg_event *ev = &p->events[i];
        if ((!node || (ev->object == UPG_OBJ_NODE && streq_ptr(ev->name, node))) &&
            strstr(ev->message, substr))
            return true;
    }
    return false;
}

static const struct upg_pool_report *pool_report(const struct upg_plan *p, const char *name)
{
    for (size_t i = 0; i < p->n_pools; i++)
        if (streq_ptr(p->pools[i].name, name))
            return &p->pools[i];
    fail_msg("no report of pool %s", name);
    return NULL;
}

/* The patch of node `name` in the plan, or NULL. */
static const json_t *patch_of(const struct upg_plan *p, const char *name)
{
    for (size_t i = 0; i < p->n_patches; i++)
        if (streq_ptr(p->patches[i].node, name))
            return p->patches[i].patch;
    return NULL;
}

/*
 * Plans and executes until a pass changes nothing (at most `max` passes); after each, at most
 * `max_down` nodes are cordoned or in flight. Returns the passes made.
 */
static int converge(struct world *w, int max, int max_down, int64_t step_s)
{
    for (int pass = 0; pass < max; pass++) {
        struct upg_plan *p = plan(w);
        bool idle = p->n_patches == 0 && p->n_evictions == 0 && p->n_deletions == 0;
        execute(w, p);
        upg_plan_free(p);
        int down = count_down(w);
        if (down > max_down)
            fail_msg("pass %d: %d nodes down, limit %d", pass, down, max_down);
        if (idle)
            return pass;
        w->now += step_s;
    }
    fail_msg("no convergence in %d passes", max);
    return -1;
}

/* ---- NVIDIA's machine ----------------------------------------------------------------------- */

static void test_states_in_order(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, 8);
    json_array_append_new(w.pods, mk_gpu_pod(&w, "node-0", "train-0", "train"));
    /* pass 1: the out-of-date driver makes it upgrade-required; a free slot starts it at
     * once: cordoned, the GPU pod evicted; every state passed through has its Event */
    struct upg_plan *p = plan(&w);
    assert_true(has_event(p, "node-0", "[upgrade-required]"));
    assert_true(has_event(p, "node-0", "[cordon-required]"));
    assert_true(has_event(p, "node-0", "[wait-for-jobs-required]"));
    assert_true(has_event(p, "node-0", "[pod-deletion-required]"));
    assert_int_equal(p->n_evictions, 1);
    assert_string_equal(p->evictions[0].name, "train-0");
    assert_int_equal(p->n_deletions, 0);
    assert_int_equal(p->counts.in_progress, 1);
    execute(&w, p);
    upg_plan_free(p);
    assert_true(is_cordoned(&w, "node-0"));
    assert_string_equal(state_of(&w, "node-0"), "pod-deletion-required");
    /* pass 3: nothing left to evict, drain off: the driver pod is deleted (its replacement
     * starts later than the validator did) */
    w.now += 10;
    p = plan(&w);
    assert_int_equal(p->n_deletions, 1);
    assert_true(has_event(p, "node-0", "[pod-restart-required]"));
    /* drain off: straight from pod deletion to the restart (the upgrade e2e saw drain-required) */
    assert_false(has_event(p, "node-0", "[drain-required]"));
    execute(&w, p);
    upg_plan_free(p);
    /* pass 4: the new pod is ready: the validator that ran with the old driver is replaced,
     * and its readiness does not count (it validated the old driver) */
    p = plan(&w);
    assert_true(has_event(p, "node-0", "[validation-required]"));
    assert_false(has_event(p, "node-0", "[uncordon-required]"));
    assert_int_equal(p->n_deletions, 1);
    assert_string_equal(p->deletions[0].name, "nvidia-operator-validator-node-0");
    execute(&w, p);
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "validation-required");
    /* pass 5: the new validator is Ready: uncordoned, done */
    p = plan(&w);
    assert_true(has_event(p, "node-0", "[uncordon-required]"));
    assert_true(has_event(p, "node-0", "[upgrade-done]"));
    execute(&w, p);
    assert_int_equal(p->counts.done, 1);
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    assert_false(is_cordoned(&w, "node-0"));
    /* converged: no writes */
    p = plan(&w);
    assert_int_equal(p->n_patches, 0);
    upg_plan_free(p);
    world_done(&w);
}

/* The shell lists a node's workloads only while it is emptied: a node whose pods are not
 * listed waits (and asks to be looked at again soon), evicting nothing. */
static void test_pods_not_listed_wait(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, 8);
    json_array_append_new(w.pods, mk_gpu_pod(&w, "node-0", "train-0", "train"));
    json_t *listed = json_object();
    w.set = (struct upg_driver_set){"nvidia-driver-daemonset", "gpu-operator", NEW, "595.91.07"};
    struct upg_input in = {.policy = &w.pol,
                           .nodes = w.nodes,
                           .pods = w.pods,
                           .pods_listed = listed,
                           .sets = &w.set,
                           .n_sets = 1,
                           .matrix = w.matrix,
                           .validation_enabled = true,
                           .now_s = T0};
    struct upg_plan *p = NULL;
    struct err e = {0};
    assert_int_equal(upg_plan(&in, &p, &e), 0);
    assert_int_equal(p->n_evictions, 0);
    assert_int_equal(p->requeue_s, 1);
    execute(&w, p);
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "pod-deletion-required");
    json_object_set_new(listed, "node-0", json_true());
    assert_int_equal(upg_plan(&in, &p, &e), 0);
    assert_int_equal(p->n_evictions, 1);
    upg_plan_free(p);
    json_decref(listed);
    world_done(&w);
}

static void test_max_parallel_and_unavailable(void **state)
{
    (void)state;
    static const struct {
        const char *policy;
        int nodes, first_wave;
    } cases[] = {
        {"{\"autoUpgrade\":true,\"maxParallelUpgrades\":1,\"maxUnavailable\":\"50%\"}", 8, 1},
        {"{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":2}", 8, 2},
        {"{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":\"25%\"}", 8, 2},
        {"{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":\"50%\"}", 5, 3},
        {"{\"autoUpgrade\":true,\"maxParallelUpgrades\":3,\"maxUnavailable\":\"100%\"}", 8, 3},
        {"{\"autoUpgrade\":true,\"maxParallelUpgrades\":0}", 8, 2}, /* 25% by default */
        {"{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":\"1\"}", 4, 1},
    };
    for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
        struct world w;
        world_init(&w, cases[c].nodes, 8);
        set_policy(&w, cases[c].policy);
        struct upg_plan *p = plan(&w); /* all upgrade-required */
        execute(&w, p);
        upg_plan_free(p);
        p = plan(&w);
        execute(&w, p);
        upg_plan_free(p);
        int started = cases[c].nodes - count_state(&w, "upgrade-required");
        if (started != cases[c].first_wave)
            fail_msg("case %zu: %d started, want %d", c, started, cases[c].first_wave);
        converge(&w, 100, cases[c].first_wave, 10);
        assert_int_equal(count_state(&w, "upgrade-done"), cases[c].nodes);
        assert_int_equal(count_down(&w), 0);
        world_done(&w);
    }
}

static void test_precordoned_node(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 3, 8);
    set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":2}");
    json_object_set_new(json_object_get(node_of(&w, "node-2"), "spec"), "unschedulable",
                        json_true());
    /* the cordoned node fills one of the two unavailable slots: it and node-0 start */
    struct upg_plan *p = plan(&w);
    execute(&w, p);
    upg_plan_free(p);
    assert_string_not_equal(state_of(&w, "node-0"), "upgrade-required");
    assert_string_equal(state_of(&w, "node-1"), "upgrade-required");
    assert_string_not_equal(state_of(&w, "node-2"), "upgrade-required");
    assert_string_equal(ann(&w, "node-2", UPG_ANN_INITIAL_UNSCH), "true");
    assert_null(ann(&w, "node-0", UPG_ANN_INITIAL_UNSCH));
    converge(&w, 50, 2, 10);
    assert_int_equal(count_state(&w, "upgrade-done"), 3);
    /* it stays cordoned; the others were uncordoned */
    assert_true(is_cordoned(&w, "node-2"));
    assert_null(ann(&w, "node-2", UPG_ANN_INITIAL_UNSCH));
    assert_false(is_cordoned(&w, "node-0"));
    assert_false(is_cordoned(&w, "node-1"));
    world_done(&w);
}

/* The operator killed in any state and restarted: a node whose label says that state (as gpuop
 * leaves it, or as an instance that wrote it and died before acting on it leaves it: cordoned
 * without gpuop's annotation from cordon-required on, the old driver still running up to
 * pod-restart-required) goes on from it to upgrade-done, uncordoned, while node-1, waiting for
 * the one unavailable slot, starts only after it. */
static void test_resume_from_each_state(void **state)
{
    (void)state;
    static const struct {
        const char *state;
        bool cordoned, gpuop_ann; /* as the killed instance left the node */
    } cases[] = {
        {"upgrade-required", false, false},     {"cordon-required", false, false},
        {"cordon-required", true, false}, /* cordoned, then killed before the next label */
        {"wait-for-jobs-required", true, true}, {"wait-for-jobs-required", true, false},
        {"pod-deletion-required", true, true},  {"pod-deletion-required", true, false},
        {"drain-required", true, true},         {"drain-required", true, false},
        {"pod-restart-required", true, true},   {"pod-restart-required", true, false},
        {"validation-required", true, true},    {"validation-required", true, false},
        {"uncordon-required", true, true},      {"uncordon-required", true, false},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct world w;
        world_init(&w, 2, 8);
        set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":1,"
                       "\"drain\":{\"enable\":true,\"force\":true}}");
        json_t *n = node_of(&w, "node-0");
        json_object_set_new(kobj_labels(n), UPG_LABEL_STATE, json_string(cases[c].state));
        if (cases[c].cordoned)
            json_object_set_new(json_object_get(n, "spec"), "unschedulable", json_true());
        if (cases[c].gpuop_ann)
            json_object_set_new(json_object_get(n, "metadata"), "annotations",
                                json_pack("{s:s}", UPG_ANN_CORDONED, "true"));
        /* one pass: node-0 holds the slot, node-1 waits in upgrade-required */
        struct upg_plan *p = plan(&w);
        execute(&w, p);
        upg_plan_free(p);
        if (strcmp(state_of(&w, "node-0"), "upgrade-done") != 0 &&
            strcmp(state_of(&w, "node-1"), "upgrade-required") != 0)
            fail_msg("case %zu (%s): node-1 started while node-0 is in %s", c, cases[c].state,
                     state_of(&w, "node-0"));
        converge(&w, 50, 1, 10);
        for (int k = 0; k < 2; k++) {
            const char *name = k ? "node-1" : "node-0";
            if (strcmp(state_of(&w, name), "upgrade-done") != 0 || is_cordoned(&w, name) ||
                ann(&w, name, UPG_ANN_INITIAL_UNSCH))
                fail_msg("case %zu (%s, cordoned %d): %s ends %s, cordoned %d", c, cases[c].state,
                         cases[c].cordoned, name, state_of(&w, name), is_cordoned(&w, name));
        }
        world_done(&w);
    }
}

static void test_skip_label(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, 8);
    json_object_set_new(kobj_labels(node_of(&w, "node-1")), UPG_LABEL_SKIP, json_string("true"));
    converge(&w, 30, 1, 10);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    assert_string_equal(state_of(&w, "node-1"), "");
    assert_null(kobj_annotations(node_of(&w, "node-1"))
                    ? json_object_get(kobj_annotations(node_of(&w, "node-1")), UPG_ANN_SINCE)
                    : NULL);
    world_done(&w);
}

static void test_auto_upgrade_off(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, 8);
    json_object_set_new(kobj_labels(node_of(&w, "node-0")), UPG_LABEL_STATE,
                        json_string("upgrade-done"));
    set_policy(&w, "{\"autoUpgrade\":false}");
    struct upg_plan *p = plan(&w);
    assert_int_equal(p->n_patches, 1);
    execute(&w, p);
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "");
    assert_string_equal(state_of(&w, "node-1"), "");
    world_done(&w);
}

/* A fresh install: nodes the driver DaemonSet is about to run on (no driver pod yet, no state)
 * are recorded upgrade-done in the pass that labels them, with no DaemonSet revision known yet;
 * a node the DaemonSet does not target stays unmanaged. Its pod, made from the current template,
 * keeps it done. */
static void test_fresh_node_done_before_its_pod(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 0, 8);
    json_array_append_new(w.nodes, mk_node("fresh-1", 8));
    json_array_append_new(w.nodes, mk_node("fresh-2", 8));
    json_array_append_new(w.nodes, mk_node("pre-installed", 8));
    json_t *due = json_pack("{s:b,s:b}", "fresh-1", 1, "fresh-2", 1);
    _cleanup_(upg_zones_freep) struct upg_zones *zones = upg_zones_new();
    struct upg_input in = {.policy = &w.pol,
                           .zones = zones,
                           .nodes = w.nodes,
                           .pods = w.pods,
                           .pdbs = w.pdbs,
                           .pools = w.pools,
                           .nvidia_drivers = w.nvds,
                           .matrix = w.matrix,
                           .driver_nodes = due,
                           .validation_enabled = true,
                           .now_s = w.now};
    struct upg_plan *p = NULL;
    struct err e = {0};
    assert_int_equal(upg_plan(&in, &p, &e), 0);
    assert_int_equal(p->n_patches, 2);
    for (int i = 0; i < 2; i++) {
        const json_t *pa = patch_of(p, i ? "fresh-2" : "fresh-1");
        assert_non_null(pa);
        assert_string_equal(
            json_string_value(
                kobj_keys(pa, (const char *const[]){"metadata", "labels", UPG_LABEL_STATE, NULL})),
            "upgrade-done");
        assert_non_null(
            kobj_keys(pa, (const char *const[]){"metadata", "annotations", UPG_ANN_SINCE, NULL}));
    }
    assert_null(patch_of(p, "pre-installed"));
    /* alike for both nodes (the state, the pass's time): each map held once */
    for (int k = 0; k < 2; k++) {
        const char *const path[] = {"metadata", k ? "annotations" : "labels", NULL};
        const json_t *a = kobj_keys(patch_of(p, "fresh-1"), path),
                     *b = kobj_keys(patch_of(p, "fresh-2"), path);
        assert_true(json_equal((json_t *)a, (json_t *)b));
        assert_ptr_equal(a, b);
    }
    assert_true(has_event(p, "fresh-1", "[upgrade-done]"));
    assert_int_equal(p->counts.done, 2);
    execute(&w, p);
    upg_plan_free(p);
    /* the DaemonSet is made and runs the pods: nothing more to write */
    json_array_append_new(w.pods, mk_driver_pod(&w, "fresh-1", NEW, true));
    json_array_append_new(w.pods, mk_driver_pod(&w, "fresh-2", NEW, true));
    json_object_set_new(due, "fresh-1", json_true());
    p = plan(&w);
    assert_int_equal(p->n_patches, 0);
    assert_int_equal(p->n_events, 0);
    assert_int_equal(p->counts.done, 2);
    upg_plan_free(p);
    json_decref(due);
    world_done(&w);
}

static void test_pdb_holds_node_then_times_out(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, 8);
    set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":2,"
                   "\"podDeletion\":{\"timeoutSeconds\":120}}");
    json_array_append_new(w.pods, mk_gpu_pod(&w, "node-0", "serve-0", "serve"));
    json_array_append_new(w.pdbs, json_pack("{s:{s:s,s:s},s:{s:{s:{s:s}}},s:{s:i}}", "metadata",
                                            "name", "serve", "namespace", "default", "spec",
                                            "selector", "matchLabels", "app", "serve", "status",
                                            "disruptionsAllowed", 0));
    converge(&w, 20, 2, 10); /* 2 passes to start, then held */
    assert_string_equal(state_of(&w, "node-0"), "pod-deletion-required");
    assert_true(is_cordoned(&w, "node-0"));
    assert_string_equal(state_of(&w, "node-1"), "upgrade-done");
    /* past the timeout, drain off: upgrade-failed, naming the budget */
    w.now += 200;
    struct upg_plan *p = plan(&w);
    assert_true(has_event(p, "node-0", "PodDisruptionBudget serve"));
    execute(&w, p);
    assert_int_equal(p->counts.failed, 1);
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-failed");
    assert_non_null(strstr(ann(&w, "node-0", UPG_ANN_FAILED_REASON), "timed out"));
    world_done(&w);
}

static void test_drain_timeout_fails(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, 8);
    set_policy(&w, "{\"autoUpgrade\":true,\"drain\":{\"enable\":true,\"timeoutSeconds\":60},"
                   "\"podDeletion\":{\"timeoutSeconds\":30}}");
    json_t *cpu = mk_pod(&w, "node-0", "web-0", "default");
    json_object_set_new(kobj_labels(cpu), "app", json_string("web"));
    json_object_set_new(json_object_get(cpu, "metadata"), "ownerReferences",
                        json_pack("[{s:s,s:s}]", "kind", "ReplicaSet", "name", "web"));
    json_array_append_new(w.pods, cpu);
    json_array_append_new(w.pdbs, json_pack("{s:{s:s,s:s},s:{s:{s:{s:s}}},s:{s:i}}", "metadata",
                                            "name", "web", "namespace", "default", "spec",
                                            "selector", "matchLabels", "app", "web", "status",
                                            "disruptionsAllowed", 0));
    converge(&w, 10, 1, 5);
    assert_string_equal(state_of(&w, "node-0"), "drain-required");
    w.now += 61;
    struct upg_plan *p = plan(&w);
    execute(&w, p);
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-failed");
    assert_non_null(strstr(ann(&w, "node-0", UPG_ANN_FAILED_REASON), "drain timed out"));
    world_done(&w);
}

static void test_drain_skip_and_selector(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, 8);
    set_policy(&w, "{\"autoUpgrade\":true,\"drain\":{\"enable\":true,\"podSelector\":"
                   "\"tier=batch\"}}");
    json_t *op = mk_gpu_pod(&w, "node-0", "gpu-operator-x", "op");
    json_object_set_new(kobj_labels(op), UPG_LABEL_DRAIN_SKIP, json_string("true"));
    json_array_append_new(w.pods, op);
    json_t *other = mk_pod(&w, "node-0", "keep-me", "default");
    json_object_set_new(kobj_labels(other), "tier", json_string("web"));
    json_object_set_new(json_object_get(other, "metadata"), "ownerReferences",
                        json_pack("[{s:s,s:s}]", "kind", "ReplicaSet", "name", "web"));
    json_array_append_new(w.pods, other);
    json_t *batch = mk_pod(&w, "node-0", "batch-0", "default");
    json_object_set_new(kobj_labels(batch), "tier", json_string("batch"));
    json_object_set_new(json_object_get(batch, "metadata"), "ownerReferences",
                        json_pack("[{s:s,s:s}]", "kind", "Job", "name", "b"));
    json_array_append_new(w.pods, batch);
    converge(&w, 20, 1, 5);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    /* the skip-labelled pod and the one the selector leaves out stayed; the batch pod went */
    bool has_op = false, has_keep = false, has_batch = false;
    size_t i;
    json_t *pod;
    json_array_foreach (w.pods, i, pod) {
        has_op |= streq_ptr(kobj_name(pod), "gpu-operator-x");
        has_keep |= streq_ptr(kobj_name(pod), "keep-me");
        has_batch |= streq_ptr(kobj_name(pod), "batch-0");
    }
    assert_true(has_op && has_keep && !has_batch);
    world_done(&w);
}

static void test_failed_node_recovers_and_retry(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, 8);
    /* failed while cordoned, then someone fixed the driver: in sync and ready; the validator
     * that ran before it is replaced first, and the node recovers once the new one passes */
    json_t *n = node_of(&w, "node-0");
    json_object_set_new(kobj_labels(n), UPG_LABEL_STATE, json_string("upgrade-failed"));
    json_object_set_new(json_object_get(n, "spec"), "unschedulable", json_true());
    remove_pod(&w, "gpu-operator", "nvidia-driver-daemonset-0");
    w.now += 60;
    json_array_append_new(w.pods, mk_driver_pod(&w, "node-0", NEW, true));
    struct upg_plan *p = plan(&w);
    assert_false(has_event(p, "node-0", "[uncordon-required]"));
    assert_int_equal(p->n_deletions, 1);
    assert_string_equal(p->deletions[0].name, "nvidia-operator-validator-node-0");
    w.now += 10;
    execute(&w, p);
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-failed");
    p = plan(&w);
    assert_true(has_event(p, "node-0", "[uncordon-required]"));
    execute(&w, p);
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    assert_false(is_cordoned(&w, "node-0"));
    /* a failed node whose driver is still broken stays failed */
    json_object_set_new(kobj_labels(n), UPG_LABEL_STATE, json_string("upgrade-failed"));
    remove_pod(&w, "gpu-operator", "nvidia-driver-daemonset-1");
    json_array_append_new(w.pods, mk_driver_pod(&w, "node-0", NEW, false));
    p = plan(&w);
    assert_int_equal(p->n_patches, 0);
    upg_plan_free(p);
    /* upgrade-required set by hand retries the whole plan */
    w.broken_driver = false;
    json_object_set_new(kobj_labels(n), UPG_LABEL_STATE, json_string("upgrade-required"));
    remove_pod(&w, "gpu-operator", "nvidia-driver-daemonset-2");
    json_array_append_new(w.pods, mk_driver_pod(&w, "node-0", OLD, true));
    converge(&w, 20, 1, 5);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    world_done(&w);
}

static void test_driver_crashloop_fails(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, 8);
    w.broken_driver = true;
    converge(&w, 20, 1, 5);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-failed");
    assert_non_null(strstr(ann(&w, "node-0", UPG_ANN_FAILED_REASON), "restarted 11 times"));
    world_done(&w);
}

static void test_requested_annotation(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, 8);
    w.rev = OLD; /* in sync */
    converge(&w, 5, 1, 5);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    json_object_set_new(kobj_annotations(node_of(&w, "node-0")), UPG_ANN_REQUESTED,
                        json_string("true"));
    struct upg_plan *p = plan(&w);
    assert_true(has_event(p, "node-0", "[upgrade-required]"));
    assert_true(has_event(p, "node-0", "[cordon-required]"));
    execute(&w, p);
    upg_plan_free(p);
    assert_null(ann(&w, "node-0", UPG_ANN_REQUESTED));
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    world_done(&w);
}

/* A driver container waiting for a safe load (its annotation) makes the node go through the
 * plan; once the node is empty the annotation is removed (the driver may load), and the node
 * ends upgrade-done without looping. */
static void test_safe_load(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, 8);
    w.rev = OLD; /* in sync */
    converge(&w, 5, 1, 5);
    json_object_set_new(kobj_annotations(node_of(&w, "node-0")), UPG_ANN_SAFE_LOAD,
                        json_string("true"));
    json_array_append_new(w.pods, mk_gpu_pod(&w, "node-0", "train-0", "train"));
    struct upg_plan *p = plan(&w);
    assert_int_equal(p->n_evictions, 1);
    execute(&w, p);
    upg_plan_free(p);
    assert_non_null(ann(&w, "node-0", UPG_ANN_SAFE_LOAD)); /* not before the node is empty */
    converge(&w, 10, 1, 5);
    assert_null(ann(&w, "node-0", UPG_ANN_SAFE_LOAD));
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    world_done(&w);
}

static void test_validation_timeout(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, 8);
    remove_pod(&w, "gpu-operator", "nvidia-operator-validator-node-0");
    converge(&w, 10, 1, 5);
    assert_string_equal(state_of(&w, "node-0"), "validation-required");
    w.now += 601;
    struct upg_plan *p = plan(&w);
    execute(&w, p);
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-failed");
    world_done(&w);
}

/* A node left in validation-required with a validator that ran with the old driver (the
 * operator was killed between the state and the deletion, or the deletion failed): the stale
 * validator is deleted on every pass until it goes, not only on entering the state, so the
 * node does not wait for the timeout. */
static void test_validation_resumes_stale_validator(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, 8); /* the validator starts now, with the old driver */
    json_t *n = node_of(&w, "node-0");
    json_object_set_new(kobj_labels(n), UPG_LABEL_STATE, json_string("validation-required"));
    json_object_set_new(json_object_get(n, "spec"), "unschedulable", json_true());
    json_object_set_new(kobj_annotations(n), UPG_ANN_CORDONED, json_string("true"));
    remove_pod(&w, "gpu-operator", "nvidia-driver-daemonset-0");
    w.now += 60;
    json_array_append_new(w.pods, mk_driver_pod(&w, "node-0", NEW, true));
    char vstart[24];
    snprintf(vstart, sizeof(vstart), "%lld", (long long)w.now);
    json_object_set_new(kobj_annotations(n), UPG_ANN_VALID_START, json_string(vstart));
    /* two passes whose deletion did not happen: each asks for it again; the stale validator,
     * Ready as it is, does not pass the node */
    for (int pass = 0; pass < 2; pass++) {
        w.now += 5;
        struct upg_plan *p = plan(&w);
        assert_int_equal(p->n_deletions, 1);
        assert_string_equal(p->deletions[0].name, "nvidia-operator-validator-node-0");
        assert_false(has_event(p, "node-0", "[uncordon-required]"));
        assert_false(has_event(p, "node-0", "[validation-required]")); /* no new transition */
        upg_plan_free(p);
    }
    /* terminating: not deleted again */
    json_t *v = NULL;
    size_t i;
    json_t *pod;
    json_array_foreach (w.pods, i, pod) {
        if (streq_ptr(kobj_name(pod), "nvidia-operator-validator-node-0"))
            v = pod;
    }
    assert_non_null(v);
    json_object_set_new(json_object_get(v, "metadata"), "deletionTimestamp",
                        json_string("2025-12-02T10:01:05Z"));
    struct upg_plan *p = plan(&w);
    assert_int_equal(p->n_deletions, 0);
    assert_string_equal(state_of(&w, "node-0"), "validation-required");
    upg_plan_free(p);
    /* gone, and the DaemonSet's new one passes: done, uncordoned */
    remove_pod(&w, "gpu-operator", "nvidia-operator-validator-node-0");
    json_array_append_new(w.pods, mk_validator(&w, "node-0"));
    p = plan(&w);
    assert_true(has_event(p, "node-0", "[upgrade-done]"));
    assert_int_equal(p->n_deletions, 0);
    execute(&w, p);
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    assert_false(is_cordoned(&w, "node-0"));
    world_done(&w);
}

/* ---- read-your-writes ----------------------------------------------------------------------- */

static long long rv_seq = 1000;

static void bump_rv(json_t *n)
{
    char b[24];
    snprintf(b, sizeof(b), "%lld", rv_seq++);
    json_object_set_new(json_object_get(n, "metadata"), "resourceVersion", json_string(b));
}

static const char *rv_of(const json_t *nodes, const char *name)
{
    size_t i;
    json_t *n;
    json_array_foreach ((json_t *)nodes, i, n) {
        if (streq_ptr(kobj_name(n), name))
            return kobj_resource_version(n);
    }
    return NULL;
}

/* The API server's side of a pass, with w->nodes as its store: a node patch goes through when
 * its precondition (metadata.resourceVersion) is the node's version, and makes a new version;
 * the shell records what the server returned. The pods' actions follow. Returns the conflicts. */
static int serve(struct world *w, const struct upg_plan *p, struct upg_writes *wr)
{
    int conflicts = 0;
    for (size_t i = 0; i < p->n_patches; i++) {
        json_t *n = node_of(w, p->patches[i].node);
        assert_non_null(n);
        const json_t *patch = p->patches[i].patch;
        const char *pre = kobj_path_str(patch, "metadata.resourceVersion");
        if (pre && !streq_ptr(pre, kobj_resource_version(n))) {
            conflicts++;
            continue;
        }
        merge(n, patch);
        bump_rv(n);
        upg_writes_record(wr, kobj_name(n), pre, kobj_resource_version(n), patch);
    }
    execute_pods(w, p);
    return conflicts;
}

static json_t *snapshot(struct world *w)
{
    return json_deep_copy(w->nodes);
}

/* upg_writes alone: what is kept and when it is forgotten, and the node planned from: the
 * cached one as the patches written since its version left it. */
static void test_writes_rule(void **state)
{
    (void)state;
    struct upg_writes *wr = upg_writes_new();
    json_t *b0 = json_pack("{s:{s:s,s:s,s:{s:s,s:s}}}", "metadata", "name", "n", "resourceVersion",
                           "5", "labels", "s", "a", "keep", "k");
    json_t *w1 = json_pack("{s:{s:s,s:s,s:{s:s,s:s}}}", "metadata", "name", "n", "resourceVersion",
                           "9", "labels", "s", "b", "keep", "k");
    json_t *other = json_pack("{s:{s:s,s:s,s:{s:s}}}", "metadata", "name", "n", "resourceVersion",
                              "13", "labels", "s", "x");
    json_t *p1 =
        json_pack("{s:{s:s,s:{s:s}}}", "metadata", "resourceVersion", "5", "labels", "s", "b");
    json_t *p2 =
        json_pack("{s:{s:s,s:{s:s,s:n},s:{s:s}},s:{s:b}}", "metadata", "resourceVersion", "9",
                  "labels", "s", "c", "keep", "annotations", "x", "1", "spec", "unschedulable", 1);
    /* no precondition, no version, a write that made no version: nothing to go by */
    upg_writes_record(wr, "n", NULL, "9", p1);
    upg_writes_record(wr, "n", "5", NULL, p1);
    upg_writes_record(wr, NULL, "5", "9", p1);
    upg_writes_record(wr, "n", "9", "9", p1);
    assert_int_equal(upg_writes_pending(wr), 0);
    upg_writes_record(wr, "n", "5", "9", p1);
    assert_int_equal(upg_writes_pending(wr), 1);
    json_t *cache = json_pack("[O]", b0);
    json_t *f = upg_writes_fresh(wr, cache); /* the cache at 5: behind, ours is read */
    json_t *n = json_array_get(f, 0);
    assert_string_equal(kobj_resource_version(n), "9");
    assert_string_equal(kobj_label(n, "s"), "b");
    assert_string_equal(kobj_label(n, "keep"), "k");
    assert_string_equal(kobj_label(b0, "s"), "a"); /* the cached node is left as it is */
    json_decref(f);
    upg_writes_record(wr, "n", "9", "12", p2); /* planned from ours: the chain goes on */
    f = upg_writes_fresh(wr, cache);
    n = json_array_get(f, 0);
    assert_string_equal(kobj_resource_version(n), "12");
    assert_string_equal(kobj_label(n, "s"), "c");
    assert_null(kobj_label(n, "keep"));
    assert_string_equal(kobj_annotation(n, "x"), "1");
    assert_true(json_is_true(kobj_path(n, "spec.unschedulable")));
    json_decref(f);
    json_array_set(cache, 0, w1); /* caught up with the first write only: the second on it */
    f = upg_writes_fresh(wr, cache);
    n = json_array_get(f, 0);
    assert_string_equal(kobj_resource_version(n), "12");
    assert_string_equal(kobj_label(n, "s"), "c");
    assert_null(kobj_label(n, "keep"));
    assert_int_equal(upg_writes_pending(wr), 1);
    json_decref(f);
    /* a compact label set (the operator's node informer) stays compact */
    json_t *intern = json_object();
    json_t *w1c = json_deep_copy(w1);
    json_object_set_new(json_object_get(w1c, "metadata"), "labels",
                        kobj_labels_compact(kobj_labels(w1), intern));
    json_array_set_new(cache, 0, w1c);
    f = upg_writes_fresh(wr, cache);
    n = json_array_get(f, 0);
    assert_true(kobj_labels_is_compact(kobj_labels(n)));
    assert_string_equal(kobj_label(n, "s"), "c");
    assert_null(kobj_label(n, "keep"));
    json_decref(f);
    json_decref(intern);
    json_array_set(cache, 0, other); /* a later version (another writer's): the cache's */
    f = upg_writes_fresh(wr, cache);
    assert_ptr_equal(json_array_get(f, 0), other);
    assert_int_equal(upg_writes_pending(wr), 0);
    json_decref(f);
    /* a node gone from the cache is forgotten */
    upg_writes_record(wr, "n", "13", "14", p2);
    assert_int_equal(upg_writes_pending(wr), 1);
    json_t *none = json_array();
    f = upg_writes_fresh(wr, none);
    assert_int_equal(json_array_size(f), 0);
    assert_int_equal(upg_writes_pending(wr), 0);
    json_decref(f);
    json_decref(none);
    json_decref(cache);
    json_decref(b0);
    json_decref(w1);
    json_decref(other);
    json_decref(p1);
    json_decref(p2);
    upg_writes_free(wr);
    upg_writes_free(NULL);
}

/* Writes k -> k + 1 for k in 0..39 on node n, each setting label s to vk. */
static void record_chain(struct upg_writes *wr)
{
    for (int k = 0; k < 40; k++) {
        char base[16], rv[16], val[16];
        snprintf(base, sizeof(base), "%d", k);
        snprintf(rv, sizeof(rv), "%d", k + 1);
        snprintf(val, sizeof(val), "v%d", k);
        json_t *p =
            json_pack("{s:{s:s,s:{s:s}}}", "metadata", "resourceVersion", base, "labels", "s", val);
        upg_writes_record(wr, "n", base, rv, p);
        json_decref(p);
    }
}

/* A chain of writes keeps its 32 newest: a cache at a version an older write replaced is too
 * far behind to plan from and is read as it is. */
static void test_writes_chain_bounded(void **state)
{
    (void)state;
    struct upg_writes *wr = upg_writes_new();
    for (int k = 6; k <= 9; k++) {
        record_chain(wr); /* again: a cache read as it is forgets the chain */
        char rv[16];
        snprintf(rv, sizeof(rv), "%d", k);
        json_t *node = json_pack("{s:{s:s,s:s,s:{s:s}}}", "metadata", "name", "n",
                                 "resourceVersion", rv, "labels", "s", "cached");
        json_t *cache = json_pack("[O]", node);
        json_t *f = upg_writes_fresh(wr, cache);
        json_t *n = json_array_get(f, 0);
        if (k < 8) {
            assert_ptr_equal(n, node);
        } else {
            assert_string_equal(kobj_resource_version(n), "40");
            assert_string_equal(kobj_label(n, "s"), "v39");
        }
        json_decref(f);
        json_decref(cache);
        json_decref(node);
    }
    upg_writes_free(wr);
}

/*
 * The shell's informer lags behind its writes: the passes after a write still see the nodes as
 * they were. Planned from upg_writes_fresh, no step is repeated: no transition and its Event
 * again, and no second node started past maxParallelUpgrades (1) because the first one looks
 * not started. Planned from the stale cache itself, both happen (and the precondition makes the
 * server refuse that plan's patch).
 */
static void test_stale_informer_no_repeat(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, 8);
    set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":1,\"maxUnavailable\":2}");
    size_t i;
    json_t *n;
    json_array_foreach (w.nodes, i, n)
        bump_rv(n);
    struct upg_writes *wr = upg_writes_new();
    json_t *cache0 = snapshot(&w); /* the informer, stuck before the first write */
    /* pass 1: node-0 starts (to pod-restart-required, its driver pod deleted), node-1 waits */
    json_t *view = upg_writes_fresh(wr, cache0);
    struct upg_plan *p = plan_nodes(&w, view);
    json_decref(view);
    assert_true(has_event(p, "node-0", "[cordon-required]"));
    assert_true(has_event(p, "node-0", "[pod-restart-required]"));
    assert_true(has_event(p, "node-1", "[upgrade-required]"));
    assert_false(has_event(p, "node-1", "[cordon-required]"));
    w.now += 10; /* the new driver pod starts after the validator */
    assert_int_equal(serve(&w, p, wr), 0);
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "pod-restart-required");
    assert_int_equal(upg_writes_pending(wr), 2);
    json_t *cache1 = snapshot(&w);
    /* the hazard: a pass from the stale cache takes node-0 (its new driver already there) for
     * done and starts node-1 beside it; node-0's patch carries a version the server has moved
     * past */
    p = plan_nodes(&w, cache0);
    assert_true(has_event(p, "node-0", "[upgrade-done]"));
    assert_true(has_event(p, "node-1", "[cordon-required]"));
    const char *pre = kobj_path_str(patch_of(p, "node-0"), "metadata.resourceVersion");
    assert_non_null(pre);
    assert_string_not_equal(pre, rv_of(w.nodes, "node-0"));
    upg_plan_free(p);
    /* pass 2, the cache still stale: planned from the writes, node-0 goes on (its new driver
     * pod is Ready: validation-required, the old validator deleted), nothing is repeated and
     * node-1 is not started */
    view = upg_writes_fresh(wr, cache0);
    p = plan_nodes(&w, view);
    json_decref(view);
    assert_true(has_event(p, "node-0", "[validation-required]"));
    assert_false(has_event(p, "node-0", "[upgrade-required]"));
    assert_false(has_event(p, "node-0", "[cordon-required]"));
    assert_false(has_event(p, "node-0", "[pod-restart-required]"));
    assert_false(has_event(p, "node-1", "[upgrade-required]"));
    assert_false(has_event(p, "node-1", "[cordon-required]"));
    assert_int_equal(p->counts.in_progress, 1);
    w.now += 10;
    assert_int_equal(serve(&w, p, wr), 0); /* the preconditions hold */
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "validation-required");
    /* pass 3, the cache caught up with the first pass only: node-0's second write is still
     * newer (the chain), node-1's copy is forgotten; node-0 ends, node-1 still waits */
    view = upg_writes_fresh(wr, cache1);
    assert_int_equal(upg_writes_pending(wr), 1);
    p = plan_nodes(&w, view);
    json_decref(view);
    assert_false(has_event(p, "node-0", "[validation-required]"));
    assert_true(has_event(p, "node-0", "[upgrade-done]"));
    assert_false(has_event(p, "node-1", "[cordon-required]")); /* node-0 held the slot */
    assert_int_equal(serve(&w, p, wr), 0);
    upg_plan_free(p);
    /* someone else writes node-0; the cache shows that version: it is read, ours forgotten */
    json_object_set_new(kobj_labels(node_of(&w, "node-0")), "example.com/other", json_string("x"));
    bump_rv(node_of(&w, "node-0"));
    json_t *cache2 = snapshot(&w);
    view = upg_writes_fresh(wr, cache2);
    assert_int_equal(upg_writes_pending(wr), 0);
    assert_string_equal(kobj_label(json_array_get(view, 0), "example.com/other"), "x");
    json_decref(view);
    /* and the rest of the rollout from an up-to-date cache: node-1 once node-0 is done */
    converge(&w, 20, 1, 5);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    assert_string_equal(state_of(&w, "node-1"), "upgrade-done");
    json_decref(cache0);
    json_decref(cache1);
    json_decref(cache2);
    upg_writes_free(wr);
    world_done(&w);
}

/* ---- gpuop's pools -------------------------------------------------------------------------- */

static void label_nodes(struct world *w, int from, int to, const char *k, const char *v)
{
    for (int i = from; i < to; i++) {
        char name[32];
        snprintf(name, sizeof(name), "node-%d", i);
        json_object_set_new(kobj_labels(node_of(w, name)), k, json_string(v));
    }
}

static void test_capacity_floor(void **state)
{
    (void)state;
    static const struct {
        const char *floor;
        int expect_started;
    } cases[] = {{"14", 0},      {"16", 0},      {"12", 1}, {"8", 2},
                 {"\"50%\"", 2}, {"\"25%\"", 3}, {"0", 4}};
    for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
        struct world w;
        world_init(&w, 4, 4); /* 16 GPUs */
        set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":4}");
        label_nodes(&w, 0, 4, "pool", "serve");
        char pool[256];
        snprintf(pool, sizeof(pool),
                 "{\"metadata\":{\"name\":\"serve\"},\"spec\":{\"nodeSelector\":{\"pool\":"
                 "\"serve\"},\"capacityFloor\":%s}}",
                 cases[c].floor);
        add_pool(&w, pool);
        struct upg_plan *p = plan(&w);
        execute(&w, p);
        upg_plan_free(p);
        p = plan(&w);
        execute(&w, p);
        int started = 4 - count_state(&w, "upgrade-required");
        if (started != cases[c].expect_started)
            fail_msg("floor %s: %d started, want %d", cases[c].floor, started,
                     cases[c].expect_started);
        if (cases[c].expect_started < 4) {
            const char *why = ann(&w, "node-3", UPG_ANN_WAITING);
            assert_non_null(why);
            assert_non_null(strstr(why, "capacity floor"));
        }
        upg_plan_free(p);
        world_done(&w);
    }
}

static void test_window_closed_then_open(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, 8);
    label_nodes(&w, 0, 2, "pool", "serve");
    /* Saturdays 02:00-06:00 in Berlin; T0 is a Tuesday */
    add_pool(&w, "{\"metadata\":{\"name\":\"serve\"},\"spec\":{\"nodeSelector\":{\"pool\":"
                 "\"serve\"},\"timeZone\":\"Europe/Berlin\",\"maintenanceWindows\":[{\"days\":["
                 "\"Sat\"],\"start\":\"02:00\",\"duration\":\"4h\"}]}}");
    converge(&w, 5, 0, 60);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-required");
    assert_non_null(strstr(ann(&w, "node-0", UPG_ANN_WAITING), "2025-12-06T01:00:00"));
    struct upg_plan *p = plan(&w);
    assert_int_equal(pool_report(p, "serve")->next_window_s, 1764982800);
    assert_string_equal(kobj_path_str(pool_report(p, "serve")->status, "nextWindow"),
                        "2025-12-06T01:00:00Z");
    /* the planner asks to be woken when it opens */
    assert_int_equal(p->requeue_s, 1764982800 - w.now);
    upg_plan_free(p);
    /* Saturday 03:00 Berlin (02:00 UTC): open */
    w.now = 1764986400;
    converge(&w, 30, 1, 10);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    assert_string_equal(state_of(&w, "node-1"), "upgrade-done");
    world_done(&w);
}

static void test_window_in_flight_finishes(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, 8);
    label_nodes(&w, 0, 2, "pool", "serve");
    add_pool(&w, "{\"metadata\":{\"name\":\"serve\"},\"spec\":{\"nodeSelector\":{\"pool\":"
                 "\"serve\"},\"timeZone\":\"UTC\",\"maintenanceWindows\":[{\"days\":[\"Tue\"],"
                 "\"start\":\"09:00\",\"duration\":\"61m\"}]}}");
    json_array_append_new(w.pods, mk_gpu_pod(&w, "node-0", "t", "t"));
    /* 10:00 UTC Tuesday: open for one more minute: node-0 starts */
    struct upg_plan *p = plan(&w);
    execute(&w, p);
    upg_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "pod-deletion-required");
    /* closed: node-0 finishes, node-1 waits for next Tuesday */
    w.now += 120;
    converge(&w, 20, 1, 10);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    assert_string_equal(state_of(&w, "node-1"), "upgrade-required");
    assert_non_null(strstr(ann(&w, "node-1", UPG_ANN_WAITING), "2025-12-09T09:00:00"));
    world_done(&w);
}

/* ---- time zones: the system's database read by gpuop, no TZ ---------------------------------- */

static struct upg_tz *zone(const char *name)
{
    struct upg_tz *tz = NULL;
    struct err e = {0};
    if (upg_tz_load(NULL, name, &tz, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return tz;
}

/* Offsets at instants on both sides of each clock change, before the zone's first transition
 * (local mean time), and far past its listed transitions (the footer's POSIX rule), north and
 * south of the equator. The figures are the database's (Python's zoneinfo, zdump). */
static void test_tz_offsets(void **state)
{
    (void)state;
    static const struct {
        const char *zone;
        int64_t t;
        int32_t off;
    } rows[] = {
        {"America/New_York", 1782907200, -14400},  /* 2026-07-01 */
        {"America/New_York", 1796126400, -18000},  /* 2026-12-01 */
        {"America/New_York", 1772953199, -18000},  /* 2026-03-08 06:59:59Z: EST */
        {"America/New_York", 1772953200, -14400},  /* 07:00Z: EDT */
        {"America/New_York", 1793512799, -14400},  /* 2026-11-01 05:59:59Z: EDT */
        {"America/New_York", 1793512800, -18000},  /* 06:00Z: EST */
        {"America/New_York", 4118126400, -14400},  /* 2100-07-01: the rule */
        {"America/New_York", 4131345600, -18000},  /* 2100-12-01 */
        {"America/New_York", -3786825600, -17762}, /* 1850: local mean time */
        {"Europe/Berlin", 1782907200, 7200},
        {"Europe/Berlin", 1768478400, 3600},
        {"Europe/Berlin", 1774745999, 3600}, /* 2026-03-29 00:59:59Z: CET */
        {"Europe/Berlin", 1774746000, 7200}, /* 01:00Z: CEST */
        {"Europe/Berlin", 1792889999, 7200}, /* 2026-10-25 00:59:59Z: CEST */
        {"Europe/Berlin", 1792890000, 3600}, /* 01:00Z: CET */
        {"Europe/Berlin", -2840140800, 3208},
        {"Europe/Berlin", 7276435200, 7200}, /* 2200-08-01 */
        {"Australia/Sydney", 1768435200, 39600},
        {"Australia/Sydney", 1784073600, 36000},
        {"Australia/Sydney", 5681491200, 39600}, /* 2150-01-15: the rule, south */
        {"UTC", 1782907200, 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        _cleanup_(upg_tz_freep) struct upg_tz *tz = zone(rows[i].zone);
        int32_t got = upg_tz_offset(tz, rows[i].t);
        if (got != rows[i].off)
            fail_msg("%s at %lld: offset %d, want %d", rows[i].zone, (long long)rows[i].t, got,
                     rows[i].off);
    }
    assert_int_equal(upg_tz_offset(NULL, 1782907200), 0);
}

/* Wall-clock times to instants: ordinary ones, one in the hour a spring-forward skips (read with
 * the offset before the change), one in the hour a fall-back repeats (the first occurrence). */
static void test_tz_local_to_utc(void **state)
{
    (void)state;
    static const struct {
        const char *zone;
        int64_t local; /* the wall time as if it were UTC */
        int64_t want;
    } rows[] = {
        /* 2026-03-08 01:30 New York: EST, 06:30Z */
        {"America/New_York", 1772933400, 1772951400},
        /* 02:30 does not exist: 07:30Z (03:30 EDT) */
        {"America/New_York", 1772937000, 1772955000},
        /* 03:30 EDT: 07:30Z too */
        {"America/New_York", 1772940600, 1772955000},
        /* 2026-11-01 01:30 happens twice: the EDT one, 05:30Z (not 06:30Z) */
        {"America/New_York", 1793496600, 1793511000},
        /* 2026-03-29 02:30 Berlin does not exist: 01:30Z (03:30 CEST) */
        {"Europe/Berlin", 1774751400, 1774747800},
        /* 2026-10-25 02:30 Berlin happens twice: the CEST one, 00:30Z */
        {"Europe/Berlin", 1792895400, 1792888200},
        /* 2026-10-25 03:30 Berlin: CET, 02:30Z */
        {"Europe/Berlin", 1792899000, 1792895400},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        _cleanup_(upg_tz_freep) struct upg_tz *tz = zone(rows[i].zone);
        int64_t got = upg_tz_local_to_utc(tz, rows[i].local);
        if (got != rows[i].want)
            fail_msg("%s local %lld: %lld, want %lld", rows[i].zone, (long long)rows[i].local,
                     (long long)got, (long long)rows[i].want);
    }
}

/* Windows across the clock changes of 2026 in New York and Berlin: open or closed at an instant,
 * and when the next one opens (closed) or this one closes (open). */
static void test_window_dst(void **state)
{
    (void)state;
    enum { SUN = 1u << 0, SAT = 1u << 6 };
    static const struct {
        const char *zone;
        unsigned days;
        int start_min, length_min;
        int64_t now;
        bool open;
        int64_t next;
    } rows[] = {
        /* Sunday 02:30 for 1 h on 2026-03-08 (New York skips 02:00-03:00): it starts at 03:30
         * EDT (07:30Z) */
        {"America/New_York", SUN, 150, 60, 1772955000 - 1, false, 1772955000},
        {"America/New_York", SUN, 150, 60, 1772955000, true, 1772958600},
        /* Saturday 23:00 for 4 h, the night of 2026-03-07/08: four hours of elapsed time, to
         * 04:00 EDT (08:00Z) */
        {"America/New_York", SAT, 23 * 60, 240, 1772942400, true, 1772956800},
        /* Sunday 01:30 for 1 h on 2026-11-01 (01:00-02:00 happens twice): from the first 01:30
         * (05:30Z) to 06:30Z, the second 01:30; then next Sunday's, 01:30 EST (2026-11-08
         * 06:30Z) */
        {"America/New_York", SUN, 90, 60, 1793511000, true, 1793514600},
        {"America/New_York", SUN, 90, 60, 1793513700, true, 1793514600},
        {"America/New_York", SUN, 90, 60, 1793514600, false, 1794119400},
        /* Sunday 02:15 for 30 min on 2026-03-29 (Berlin skips 02:00-03:00): 01:15Z-01:45Z */
        {"Europe/Berlin", SUN, 135, 30, 1774746000, false, 1774746900},
        {"Europe/Berlin", SUN, 135, 30, 1774746900, true, 1774748700},
        /* Sunday 02:30 for 30 min on 2026-10-25 (02:00-03:00 twice): the first, 00:30Z-01:00Z;
         * at the second 02:30 (01:30Z) it is closed, next Sunday's 02:30 CET is 01:30Z */
        {"Europe/Berlin", SUN, 150, 30, 1792888200, true, 1792890000},
        {"Europe/Berlin", SUN, 150, 30, 1792891800, false, 1793496600},
        /* an ordinary summer Saturday 02:00-06:00 Berlin: 00:00Z-04:00Z on 2026-07-04 */
        {"Europe/Berlin", SAT, 120, 240, 1783123200 - 60, false, 1783123200},
        {"Europe/Berlin", SAT, 120, 240, 1783130400, true, 1783137600},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        _cleanup_(upg_tz_freep) struct upg_tz *tz = zone(rows[i].zone);
        struct upg_window w = {rows[i].days, rows[i].start_min, rows[i].length_min};
        bool open;
        int64_t next;
        upg_window_state(&w, 1, tz, rows[i].now, &open, &next);
        if (open != rows[i].open || next != rows[i].next)
            fail_msg("row %zu (%s): open %d next %lld, want %d %lld", i, rows[i].zone, open,
                     (long long)next, rows[i].open, (long long)rows[i].next);
    }
    /* no window: always open */
    bool open = false;
    int64_t next = 1;
    upg_window_state(NULL, 0, NULL, 1782907200, &open, &next);
    assert_true(open);
    assert_int_equal(next, 0);
}

/* A zone that cannot be read is an error naming the zone and the file, never UTC by accident;
 * nothing touches the process's TZ. */
static void test_tz_errors(void **state)
{
    (void)state;
    struct upg_tz *tz = NULL;
    struct err e = {0};
    assert_true(upg_tz_load(NULL, "Mars/Olympus", &tz, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "\"Mars/Olympus\""));
    assert_non_null(strstr(err_msg(&e), "/usr/share/zoneinfo/Mars/Olympus"));
    err_clear(&e);
    assert_true(upg_tz_load(NULL, "../../etc/passwd", &tz, &e) < 0);
    assert_false(upg_tz_name_valid("/etc/localtime"));
    assert_false(upg_tz_name_valid("Europe/Berlin\n"));
    assert_true(upg_tz_name_valid("Etc/GMT+5"));
    /* a zone directory with bad files in it */
    char dir[] = "/tmp/gpuop-tz-XXXXXX";
    assert_non_null(mkdtemp(dir));
    _cleanup_free_ char *berlin = NULL;
    size_t blen = 0;
    assert_int_equal(
        file_read_all("/usr/share/zoneinfo/Europe/Berlin", 1 << 20, &berlin, &blen, &e), 0);
    static const struct {
        const char *name;
        size_t len; /* bytes of Berlin's file; 0: "garbage" */
        const char *want;
    } bad[] = {
        {"Cut", 60, "truncated"},
        {"Garbage", 0, "bad header"},
        {"NoFooter", 0, "bad footer"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, bad[i].name);
        const char *data = bad[i].len ? berlin : "not a zone file at all, really not at all";
        size_t len = bad[i].len ? bad[i].len : strlen(data);
        if (strcmp(bad[i].name, "NoFooter") == 0) {
            data = berlin;
            len = blen - 3; /* the footer's rule cut short */
        }
        assert_int_equal(file_write_atomic(path, data, len, 0644, &e), 0);
        err_clear(&e);
        assert_true(upg_tz_load(dir, bad[i].name, &tz, &e) < 0);
        if (!strstr(err_msg(&e), bad[i].want) || !strstr(err_msg(&e), path) ||
            !strstr(err_msg(&e), bad[i].name))
            fail_msg("%s: \"%s\"", bad[i].name, err_msg(&e));
        err_clear(&e);
        unlink(path);
    }
    /* a directory is no zone */
    _cleanup_free_ char *sub = xasprintf("%s/Sub", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_true(upg_tz_load(dir, "Sub", &tz, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "Sub"));
    rmdir(sub);
    rmdir(dir);
    /* the set the shell reads: a pool's zone that did not read keeps its error */
    _cleanup_(upg_zones_freep) struct upg_zones *z = upg_zones_new();
    _cleanup_json_ json_t *pools =
        json_pack("[{s:{s:s}},{s:{s:s}},{s:{s:s}}]", "spec", "timeZone", "Europe/Berlin", "spec",
                  "timeZone", "Mars/Olympus", "spec", "timeZone", "Europe/Berlin");
    upg_zones_load_pools(z, NULL, pools);
    const char *why = NULL;
    assert_non_null(upg_zones_get(z, "Europe/Berlin", &why));
    assert_null(upg_zones_get(z, "Mars/Olympus", &why));
    assert_non_null(strstr(why, "Mars/Olympus"));
    assert_null(upg_zones_get(z, "Asia/Tokyo", &why));
    assert_non_null(why);
}

/* A pool whose zone does not read is invalid: its nodes are left as they are, its status and an
 * Event name the zone and the file. */
static void test_pool_bad_zone(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, 8);
    label_nodes(&w, 0, 1, "pool", "serve");
    add_pool(&w, "{\"metadata\":{\"name\":\"serve\"},\"spec\":{\"nodeSelector\":{\"pool\":"
                 "\"serve\"},\"timeZone\":\"Mars/Olympus\",\"maintenanceWindows\":[{\"days\":["
                 "\"Sat\"],\"start\":\"02:00\",\"duration\":\"4h\"}]}}");
    struct upg_plan *p = plan(&w);
    assert_non_null(strstr(pool_report(p, "serve")->error, "/usr/share/zoneinfo/Mars/Olympus"));
    assert_int_equal(pool_report(p, "serve")->phase, UPG_PHASE_INVALID);
    assert_int_equal(p->n_patches, 0);
    upg_plan_free(p);
    world_done(&w);
}

static void test_manual_approval(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 3, 8);
    set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":3}");
    label_nodes(&w, 0, 3, "pool", "serve");
    add_pool(&w, "{\"metadata\":{\"name\":\"serve\"},\"spec\":{\"nodeSelector\":{\"pool\":"
                 "\"serve\"},\"approval\":\"manual\"}}");
    converge(&w, 5, 0, 60);
    assert_int_equal(count_state(&w, "upgrade-required"), 3);
    assert_non_null(strstr(ann(&w, "node-0", UPG_ANN_WAITING), "approval"));
    struct upg_plan *p = plan(&w);
    assert_int_equal(pool_report(p, "serve")->waiting.n, 3);
    upg_plan_free(p);
    /* one node approved: it alone goes */
    json_object_set_new(kobj_annotations(node_of(&w, "node-1")), UPG_ANN_NODE_APPROVED,
                        json_string("true"));
    converge(&w, 20, 1, 10);
    assert_string_equal(state_of(&w, "node-1"), "upgrade-done");
    assert_null(ann(&w, "node-1", UPG_ANN_NODE_APPROVED));
    assert_int_equal(count_state(&w, "upgrade-required"), 2);
    /* approving another revision does nothing; the pool's target revision does */
    json_t *pool = json_array_get(w.pools, 0);
    json_object_set_new(json_object_get(pool, "metadata"), "annotations",
                        json_pack("{s:s}", UPG_ANN_POOL_APPROVED, "rev-other"));
    converge(&w, 5, 0, 10);
    assert_int_equal(count_state(&w, "upgrade-required"), 2);
    json_object_set_new(kobj_path(pool, "metadata.annotations"), UPG_ANN_POOL_APPROVED,
                        json_string(NEW));
    converge(&w, 20, 2, 10);
    assert_int_equal(count_state(&w, "upgrade-done"), 3);
    world_done(&w);
}

/* The remediation planner holds a pool (GPU-faulty nodes beyond its budget): no node of it
 * starts, another pool goes on; the hold lifted, the rollout resumes. */
static void test_remediation_hold(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 4, 8);
    set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":4}");
    label_nodes(&w, 0, 2, "pool", "serve");
    label_nodes(&w, 2, 4, "pool", "train");
    add_pool(&w, "{\"metadata\":{\"name\":\"serve\"},\"spec\":{\"nodeSelector\":{\"pool\":"
                 "\"serve\"}}}");
    add_pool(&w, "{\"metadata\":{\"name\":\"train\"},\"spec\":{\"nodeSelector\":{\"pool\":"
                 "\"train\"}}}");
    struct upg_hold hold = {.pool = "serve", .why = "2 nodes quarantined for GPU faults, budget 1"};
    w.holds = &hold;
    w.n_holds = 1;
    struct upg_plan *p = plan(&w);
    bool held_event = false;
    for (size_t i = 0; i < p->n_events; i++)
        held_event |= p->events[i].gate == UPG_GATE_REMEDIATION;
    assert_true(held_event);
    upg_plan_free(p);
    converge(&w, 30, 4, 10);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-required");
    assert_string_equal(state_of(&w, "node-1"), "upgrade-required");
    assert_string_equal(state_of(&w, "node-2"), "upgrade-done");
    assert_string_equal(state_of(&w, "node-3"), "upgrade-done");
    assert_non_null(strstr(ann(&w, "node-0", UPG_ANN_WAITING), "remediation: 2 nodes"));
    w.holds = NULL;
    w.n_holds = 0;
    converge(&w, 30, 4, 10);
    assert_int_equal(count_state(&w, "upgrade-done"), 4);
    world_done(&w);
}

/* The budget's rule, node by node: what is unavailable, what is ready capacity. */
static void test_budget_counting(void **state)
{
    (void)state;
    struct upg_budget b = {0};
    upg_budget_add(&b, true, false, UPG_DONE, 8);        /* serving */
    upg_budget_add(&b, true, true, UPG_UNKNOWN, 8);      /* cordoned by anyone */
    upg_budget_add(&b, false, false, UPG_UNKNOWN, 8);    /* not Ready */
    upg_budget_add(&b, true, false, UPG_CORDON, 8);      /* being cordoned for an upgrade */
    upg_budget_add(&b, true, false, UPG_POD_RESTART, 8); /* upgrading, still schedulable */
    assert_int_equal(b.total, 5);
    assert_int_equal(b.gpus_total, 40);
    assert_int_equal(b.unavailable, 3);
    assert_int_equal(b.gpus_ready, 8);
    assert_int_equal(b.in_progress, 2);
    json_t *n = mk_node("n", 4);
    struct upg_budget c = {0};
    upg_budget_add_node(&c, n);
    assert_int_equal(c.gpus_ready, 4);
    json_object_set_new(json_object_get(n, "spec"), "unschedulable", json_true());
    upg_budget_add_node(&c, n);
    assert_int_equal(c.unavailable, 1);
    assert_int_equal(upg_limit(NULL, 7), 7);
    json_t *pct = json_string("25%");
    assert_int_equal(upg_limit(pct, 7), 2);
    json_decref(pct);
    json_decref(n);
}

static void test_canary_pass(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 4, 8);
    set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":4}");
    label_nodes(&w, 0, 4, "pool", "research");
    add_pool(&w, "{\"metadata\":{\"name\":\"research\"},\"spec\":{\"nodeSelector\":{\"pool\":"
                 "\"research\"},\"canary\":{\"nodes\":1,\"soakSeconds\":600}}}");
    converge(&w, 10, 1, 5);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    assert_string_equal(ann(&w, "node-0", UPG_ANN_CANARY), NEW);
    assert_int_equal(count_state(&w, "upgrade-required"), 3);
    assert_non_null(strstr(ann(&w, "node-1", UPG_ANN_WAITING), "canary"));
    /* soaking: still held, and the planner wants to look again when it ends */
    struct upg_plan *p = plan(&w);
    assert_true(p->requeue_s > 0 && p->requeue_s <= 600);
    upg_plan_free(p);
    w.now += 600;
    converge(&w, 20, 3, 5);
    assert_int_equal(count_state(&w, "upgrade-done"), 4);
    world_done(&w);
}

/* A canary's soak reads the GPUs its device plugin found unhealthy (critical XIDs, ECC errors:
 * capacity less allocatable, GPUs and MIG devices); more than canary.maxUnhealthyGPUs halts the
 * pool. */
static void test_canary_unhealthy_gpus(void **state)
{
    (void)state;
    static const struct {
        const char *capacity, *allocatable; /* status JSON of the canary while it soaks */
        int max_unhealthy;
        const char *halt; /* NULL: it passes */
    } cases[] = {
        {"{\"nvidia.com/gpu\":\"8\"}", "{\"nvidia.com/gpu\":\"8\"}", 0, NULL},
        {"{\"nvidia.com/gpu\":\"8\"}", "{\"nvidia.com/gpu\":\"7\"}", 0,
         "1 of 8 GPUs unhealthy during the soak"},
        {"{\"nvidia.com/gpu\":\"8\"}", "{\"nvidia.com/gpu\":\"7\"}", 1, NULL},
        {"{\"nvidia.com/gpu\":\"8\"}", "{\"nvidia.com/gpu\":\"5\"}", 2, "3 of 8 GPUs unhealthy"},
        {"{\"nvidia.com/gpu\":\"2\",\"nvidia.com/mig-1g.10gb\":\"14\",\"cpu\":\"64\"}",
         "{\"nvidia.com/gpu\":\"2\",\"nvidia.com/mig-1g.10gb\":\"13\",\"cpu\":\"60\"}", 0,
         "1 of 16 GPUs unhealthy"},
        /* a resource missing from allocatable: none of it is offered */
        {"{\"nvidia.com/gpu\":\"4\"}", "{}", 0, "4 of 4 GPUs unhealthy"},
    };
    for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
        struct world w;
        world_init(&w, 2, 8);
        set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":2}");
        label_nodes(&w, 0, 2, "pool", "research");
        _cleanup_free_ char *pool =
            xasprintf("{\"metadata\":{\"name\":\"research\"},\"spec\":{\"nodeSelector\":{\"pool\":"
                      "\"research\"},\"canary\":{\"nodes\":1,\"soakSeconds\":600,"
                      "\"maxUnhealthyGPUs\":%d}}}",
                      cases[c].max_unhealthy);
        add_pool(&w, pool);
        converge(&w, 10, 1, 5);
        assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
        json_t *st = json_object_get(node_of(&w, "node-0"), "status");
        json_object_set_new(st, "capacity", json_loads(cases[c].capacity, 0, NULL));
        json_object_set_new(st, "allocatable", json_loads(cases[c].allocatable, 0, NULL));
        w.now += 30; /* within the soak */
        struct upg_plan *p = plan(&w);
        const char *halted = pool_report(p, "research")->halted;
        if (cases[c].halt) {
            if (!halted || !strstr(halted, cases[c].halt))
                fail_msg("case %zu: halted \"%s\", want \"%s\"", c, halted ?: "(none)",
                         cases[c].halt);
            assert_non_null(strstr(halted, "canary node node-0"));
            assert_true(has_event(p, "node-0", "critical XID"));
        } else if (halted) {
            fail_msg("case %zu: halted: %s", c, halted);
        }
        execute(&w, p);
        upg_plan_free(p);
        /* after the soak the second node starts only when the canary passed */
        w.now += 600;
        converge(&w, 20, 2, 5);
        assert_string_equal(state_of(&w, "node-1"),
                            cases[c].halt ? "upgrade-required" : "upgrade-done");
        world_done(&w);
    }
}

static void test_canary_first_k(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 5, 8);
    set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":5}");
    label_nodes(&w, 0, 5, "pool", "r");
    /* node-0 was chosen in an earlier pass; one more is chosen by name, not two */
    json_object_set_new(kobj_annotations(node_of(&w, "node-3")), UPG_ANN_CANARY, json_string(NEW));
    add_pool(&w, "{\"metadata\":{\"name\":\"r\"},\"spec\":{\"nodeSelector\":{\"pool\":\"r\"},"
                 "\"canary\":{\"nodes\":2,\"soakSeconds\":0}}}");
    struct upg_plan *p = plan(&w);
    execute(&w, p);
    upg_plan_free(p);
    assert_int_equal(count_state(&w, "upgrade-required"), 3);
    assert_string_not_equal(state_of(&w, "node-0"), "upgrade-required");
    assert_string_not_equal(state_of(&w, "node-3"), "upgrade-required");
    converge(&w, 20, 3, 5);
    assert_int_equal(count_state(&w, "upgrade-done"), 5);
    world_done(&w);
}

static void test_canary_halt_resume_rollback(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 4, 8);
    set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":4}");
    label_nodes(&w, 0, 2, "pool", "a");
    label_nodes(&w, 2, 4, "pool", "b");
    label_nodes(&w, 1, 2, "canary", "yes");
    add_pool(&w, "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"nodeSelector\":{\"pool\":\"a\"},"
                 "\"canary\":{\"selector\":{\"canary\":\"yes\"},\"soakSeconds\":60}}}");
    add_pool(&w, "{\"metadata\":{\"name\":\"b\"},\"spec\":{\"nodeSelector\":{\"pool\":\"b\"}}}");
    w.broken_driver = true; /* the new driver fails to load on a's canary (node-1) */
    converge(&w, 20, 3, 5);
    assert_string_equal(state_of(&w, "node-1"), "upgrade-failed");
    assert_non_null(ann(&w, "node-1", UPG_ANN_CANARY_FAILED));
    /* pool a halted with the reason; node-0 never started; pool b still moved */
    assert_string_equal(state_of(&w, "node-0"), "upgrade-required");
    assert_false(is_cordoned(&w, "node-0"));
    assert_non_null(strstr(ann(&w, "node-0", UPG_ANN_WAITING), "rollout halted"));
    struct upg_plan *p = plan(&w);
    const char *halted = pool_report(p, "a")->halted;
    assert_non_null(halted);
    assert_non_null(strstr(halted, "node-1"));
    assert_null(pool_report(p, "b")->halted);
    upg_plan_free(p);
    /* roll back: the DaemonSet's template goes back to the old revision; the canary returns to
     * it through the same drain plan and the halt (for the new revision) no longer applies */
    w.rev = OLD;
    w.broken_driver = false;
    converge(&w, 30, 3, 5);
    assert_int_equal(count_state(&w, "upgrade-done"), 4);
    assert_false(is_cordoned(&w, "node-1"));
    world_done(&w);
}

static void test_canary_resume(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, 8);
    set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":2}");
    label_nodes(&w, 0, 2, "pool", "a");
    add_pool(&w, "{\"metadata\":{\"name\":\"a\",\"annotations\":{}},\"spec\":{\"nodeSelector\":"
                 "{\"pool\":\"a\"},\"canary\":{\"nodes\":1,\"soakSeconds\":0}}}");
    w.broken_driver = true;
    converge(&w, 20, 1, 5);
    assert_string_equal(state_of(&w, "node-1"), "upgrade-required");
    w.broken_driver = false;
    json_object_set_new(kobj_path(json_array_get(w.pools, 0), "metadata.annotations"),
                        UPG_ANN_POOL_RESUMED, json_string(NEW));
    converge(&w, 20, 2, 5);
    assert_string_equal(state_of(&w, "node-1"), "upgrade-done");
    world_done(&w);
}

static void test_compat_gate_refuses_one_node(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 3, 8);
    set_policy(&w, "{\"autoUpgrade\":true,\"maxParallelUpgrades\":0,\"maxUnavailable\":3}");
    json_object_set_new(kobj_labels(node_of(&w, "node-1")), "nvidia.com/gpu.family",
                        json_string("kepler"));
    converge(&w, 20, 2, 5);
    assert_string_equal(state_of(&w, "node-0"), "upgrade-done");
    assert_string_equal(state_of(&w, "node-2"), "upgrade-done");
    assert_string_equal(state_of(&w, "node-1"), "upgrade-required");
    assert_false(is_cordoned(&w, "node-1"));
    assert_non_null(strstr(ann(&w, "node-1", UPG_ANN_WAITING), "architecture kepler"));
    /* a pool that needs newer CUDA than the branch supports: none of its nodes start */
    world_done(&w);
    world_init(&w, 2, 8);
    label_nodes(&w, 0, 2, "pool", "serve");
    add_pool(&w, "{\"metadata\":{\"name\":\"serve\"},\"spec\":{\"nodeSelector\":{\"pool\":"
                 "\"serve\"},\"minCudaVersion\":\"13.1\"}}");
    struct upg_plan *p = plan(&w);
    execute(&w, p);
    upg_plan_free(p);
    p = plan(&w);
    execute(&w, p);
    upg_plan_free(p);
    assert_non_null(strstr(ann(&w, "node-0", UPG_ANN_WAITING), "CUDA 13.0"));
    assert_int_equal(count_state(&w, "upgrade-required"), 2);
    assert_int_equal(count_down(&w), 0);
    /* an old kernel */
    world_done(&w);
    world_init(&w, 1, 8);
    json_object_set_new(kobj_path(node_of(&w, "node-0"), "status.nodeInfo"), "kernelVersion",
                        json_string("4.18.0-553.el8"));
    converge(&w, 5, 0, 5);
    assert_non_null(strstr(ann(&w, "node-0", UPG_ANN_WAITING), "kernel 5.4"));
    world_done(&w);
}

/* ---- bad input: nothing changes on any node ------------------------------------------------- */

static void test_bad_input_freezes(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, 8);
    w.set = (struct upg_driver_set){"nvidia-driver-daemonset", "gpu-operator", NEW, "595.91.07"};
    /* an invalid upgrade policy */
    struct upg_input in = {.policy = NULL,
                           .policy_error = "spec.driver.upgradePolicy.maxUnavailable: bad",
                           .nodes = w.nodes,
                           .pods = w.pods,
                           .sets = &w.set,
                           .n_sets = 1,
                           .matrix = w.matrix,
                           .now_s = T0};
    struct upg_plan *p = NULL;
    struct err e = {0};
    assert_int_equal(upg_plan(&in, &p, &e), 0);
    assert_true(p->frozen);
    assert_int_equal(p->n_patches, 0);
    assert_non_null(strstr(p->error, "maxUnavailable"));
    assert_int_equal(p->n_events, 1);
    upg_plan_free(p);
    /* an unparsable matrix */
    in.policy = &w.pol;
    in.matrix = NULL;
    in.matrix_error = "ConfigMap gpu-operator/gpuop-driver-compat: matrix.yaml:3:1: bad";
    assert_int_equal(upg_plan(&in, &p, &e), 0);
    assert_true(p->frozen);
    assert_int_equal(p->n_patches, 0);
    upg_plan_free(p);
    /* an invalid pool: its nodes left as they are, others move */
    label_nodes(&w, 0, 1, "pool", "x");
    add_pool(&w, "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"nodeSelector\":{\"pool\":\"x\"},"
                 "\"approval\":\"sometimes\"}}");
    p = plan(&w);
    assert_non_null(strstr(pool_report(p, "x")->error, "approval"));
    assert_null(patch_of(p, "node-0"));
    assert_true(has_event(p, "node-0", "left as it is"));
    upg_plan_free(p);
    /* an unknown NVIDIADriver reference */
    json_array_clear(w.pools);
    add_pool(&w, "{\"metadata\":{\"name\":\"y\"},\"spec\":{\"nvidiaDriver\":\"nope\"}}");
    p = plan(&w);
    assert_non_null(strstr(pool_report(p, "y")->error, "NVIDIADriver nope"));
    upg_plan_free(p);
    /* a pool naming an NVIDIADriver holds the nodes it owns (the owner label), even the
     * default one's, which has no nodeSelector */
    json_array_clear(w.pools);
    json_array_append_new(
        w.nvds, json_pack("{s:{s:s},s:{s:b}}", "metadata", "name", "dflt", "spec", "default", 1));
    label_nodes(&w, 1, 2, UPG_LABEL_DRIVER_OWNER, "dflt");
    add_pool(&w, "{\"metadata\":{\"name\":\"y\"},\"spec\":{\"nvidiaDriver\":\"dflt\"}}");
    p = plan(&w);
    assert_null(pool_report(p, "y")->error);
    assert_int_equal(pool_report(p, "y")->total, 1);
    assert_int_equal(pool_report(p, "default")->total, 1);
    upg_plan_free(p);
    /* overlapping pools: the node in both is left alone, with both named */
    json_array_clear(w.pools);
    label_nodes(&w, 0, 2, "zone", "z");
    add_pool(&w, "{\"metadata\":{\"name\":\"p1\"},\"spec\":{\"nodeSelector\":{\"pool\":\"x\"}}}");
    add_pool(&w, "{\"metadata\":{\"name\":\"p2\"},\"spec\":{\"nodeSelector\":{\"zone\":\"z\"}}}");
    p = plan(&w);
    assert_true(has_event(p, "node-0", "DriverUpgradePools p1 and p2"));
    assert_null(patch_of(p, "node-0"));
    upg_plan_free(p);
    world_done(&w);
}

/* ---- what a pass reports: phases, the condition, Events held back ------------------------- */

/* A report with `prog` nodes in flight, `failed` failed, `pending` pending, `done` upgraded. */
static struct upg_pool_report mk_report(const char *name, int done, int prog, int failed,
                                        int pending, const char *halted, const char *error)
{
    struct upg_pool_report r = {.name = xstrdup(name), .upgraded = done, .pending = pending};
    r.total = done + prog + failed + pending;
    for (int i = 0; i < prog; i++) {
        char n[32];
        snprintf(n, sizeof(n), "%s-p%d", name, i);
        upg_notes_add(&r.in_progress, n, "drain-required");
    }
    for (int i = 0; i < failed; i++) {
        char n[32];
        snprintf(n, sizeof(n), "%s-f%d", name, i);
        upg_notes_add(&r.failed, n, "validation did not pass");
    }
    for (int i = 0; i < pending; i++) {
        char n[32];
        snprintf(n, sizeof(n), "%s-w%d", name, i);
        upg_notes_add(&r.waiting, n, "approval");
    }
    r.halted = halted ? xstrdup(halted) : NULL;
    r.error = error ? xstrdup(error) : NULL;
    r.phase = upg_report_phase(&r);
    return r;
}

/* The phase of each pool from what its nodes are doing. */
static void test_pool_phases(void **state)
{
    (void)state;
    static const struct {
        int done, prog, failed, pending;
        const char *halted, *error;
        enum upg_phase want;
    } rows[] = {
        {3, 0, 0, 0, NULL, NULL, UPG_PHASE_DONE},
        {0, 0, 0, 0, NULL, NULL, UPG_PHASE_DONE}, /* no nodes */
        {1, 1, 0, 0, NULL, NULL, UPG_PHASE_UPGRADING},
        {1, 0, 0, 2, NULL, NULL, UPG_PHASE_UPGRADING}, /* pending only */
        {1, 1, 1, 0, NULL, NULL, UPG_PHASE_UPGRADING}, /* a failure while others move */
        {2, 0, 1, 0, NULL, NULL, UPG_PHASE_FAILED},
        {1, 0, 1, 2, "canary node a: x", NULL, UPG_PHASE_HALTED},
        {0, 0, 0, 1, "canary node a: x", "bad zone", UPG_PHASE_INVALID},
        {0, 0, 0, 0, NULL, "bad zone", UPG_PHASE_INVALID},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        struct upg_plan *p = xcalloc(1, sizeof(*p));
        p->pools = xcalloc(1, sizeof(*p->pools));
        p->n_pools = 1;
        p->pools[0] = mk_report("p", rows[i].done, rows[i].prog, rows[i].failed, rows[i].pending,
                                rows[i].halted, rows[i].error);
        if (p->pools[0].phase != rows[i].want)
            fail_msg("row %zu: phase %s, want %s", i, upg_phase_name(p->pools[0].phase),
                     upg_phase_name(rows[i].want));
        upg_plan_free(p);
    }
}

/* The DriverUpgrade condition rolled up from the pools: the worst reason wins whatever the
 * pools' order; a line per pool with nodes (or an error), a few nodes by name. */
static void test_condition_rollup(void **state)
{
    (void)state;
    struct spec {
        int done, prog, failed, pending;
        const char *halted, *error;
    };
    static const struct {
        bool frozen, auto_off;
        struct spec pools[3];
        size_t n;
        bool status;
        const char *reason;
        const char *msg[3]; /* substrings */
    } rows[] = {
        {.frozen = true, .status = false, .reason = "InvalidUpgradeInput", .msg = {"frozen why"}},
        {.auto_off = true,
         .n = 1,
         .pools = {{1, 1, 0, 0}},
         .status = true,
         .reason = "AutoUpgradeDisabled",
         .msg = {"autoUpgrade is false"}},
        {.n = 1,
         .pools = {{0, 0, 0, 0}},
         .status = true,
         .reason = "UpgradeDone",
         .msg = {"no driver-managed node"}},
        {.n = 2,
         .pools = {{3, 0, 0, 0}, {2, 0, 0, 0}},
         .status = true,
         .reason = "UpgradeDone",
         .msg = {"pool a: 3/3 upgraded; pool b: 2/2 upgraded"}},
        {.n = 2,
         .pools = {{1, 1, 0, 0}, {2, 0, 0, 0}},
         .status = false,
         .reason = "UpgradeInProgress",
         .msg = {"pool a: 1/2 upgraded, a-p0 drain-required"}},
        {.n = 1,
         .pools = {{0, 0, 0, 3}},
         .status = false,
         .reason = "UpgradeInProgress",
         .msg = {"3 waiting (a-w0: approval)"}},
        {.n = 2,
         .pools = {{1, 1, 1, 0}, {0, 1, 0, 0}},
         .status = false,
         .reason = "UpgradeFailed",
         .msg = {"a-f0 failed: validation did not pass"}},
        /* the worst wins in either order */
        {.n = 3,
         .pools = {{0, 0, 0, 1, NULL, "bad"}, {0, 0, 1, 1, "canary node x: y"}, {0, 1}},
         .status = false,
         .reason = "InvalidUpgradeInput",
         .msg = {"invalid: bad", "halted: canary node x: y", "pool c: 0/1"}},
        {.n = 3,
         .pools = {{0, 1}, {0, 0, 1, 1, "canary node x: y"}, {0, 0, 0, 1, NULL, "bad"}},
         .status = false,
         .reason = "InvalidUpgradeInput"},
        {.n = 2,
         .pools = {{0, 0, 1, 0}, {0, 0, 0, 1, "canary node x: y"}},
         .status = false,
         .reason = "RolloutHalted"},
        /* many nodes: five named, then a count */
        {.n = 1,
         .pools = {{0, 8, 7, 0}},
         .status = false,
         .reason = "UpgradeFailed",
         .msg = {"a-p4 drain-required (+3 more in progress)", "(+2 more failed)"}},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        struct upg_plan *p = xcalloc(1, sizeof(*p));
        p->frozen = rows[i].frozen;
        p->error = rows[i].frozen ? xstrdup("frozen why") : NULL;
        p->n_pools = rows[i].n;
        p->pools = xcalloc(rows[i].n + 1, sizeof(*p->pools));
        for (size_t k = 0; k < rows[i].n; k++) {
            const struct spec *sp = &rows[i].pools[k];
            char name[2] = {(char)('a' + k), 0};
            p->pools[k] =
                mk_report(name, sp->done, sp->prog, sp->failed, sp->pending, sp->halted, sp->error);
        }
        upg_report_condition(p, !rows[i].auto_off);
        if (p->condition.status != rows[i].status ||
            !streq_ptr(p->condition.reason, rows[i].reason))
            fail_msg("row %zu: %d %s, want %d %s (%s)", i, p->condition.status, p->condition.reason,
                     rows[i].status, rows[i].reason, p->condition.message);
        for (size_t k = 0; k < 3 && rows[i].msg[k]; k++)
            if (!strstr(p->condition.message, rows[i].msg[k]))
                fail_msg("row %zu: \"%s\" lacks \"%s\"", i, p->condition.message, rows[i].msg[k]);
        upg_plan_free(p);
    }
}

/* A DriverUpgradePool's status: the progress and phase; RolloutHalted keeps its transition
 * time while it stays; a status equal to the stored one is not written. */
static void test_pool_status_body(void **state)
{
    (void)state;
    struct upg_pool_report r = mk_report("serve", 1, 1, 0, 0, "canary node a: x", NULL);
    json_t *obj = json_pack("{s:{s:s},s:{s:[{s:s,s:s,s:s}]}}", "metadata", "name", "serve",
                            "status", "conditions", "type", "RolloutHalted", "status", "True",
                            "lastTransitionTime", "2026-01-01T00:00:00Z");
    upg_report_pool(&r, obj, "2026-06-01T00:00:00Z");
    assert_int_equal(r.phase, UPG_PHASE_HALTED);
    assert_true(r.write);
    assert_string_equal(kobj_path_str(r.status, "phase"), "Halted");
    assert_string_equal(kobj_path_str(r.status, "progress"), "1/2");
    assert_string_equal(kobj_path_str(r.status, "conditions.0.lastTransitionTime"),
                        "2026-01-01T00:00:00Z");
    assert_string_equal(kobj_path_str(r.status, "conditions.0.reason"), "CanaryFailed");
    /* stored as planned: nothing to write */
    json_object_set(obj, "status", r.status);
    json_decref(r.status);
    r.status = NULL;
    upg_report_pool(&r, obj, "2026-06-02T00:00:00Z");
    assert_false(r.write);
    /* resumed: NotHalted from now */
    json_decref(r.status);
    r.status = NULL;
    free(r.halted);
    r.halted = NULL;
    upg_report_pool(&r, obj, "2026-06-03T00:00:00Z");
    assert_true(r.write);
    assert_string_equal(kobj_path_str(r.status, "phase"), "Upgrading");
    assert_string_equal(kobj_path_str(r.status, "conditions.0.lastTransitionTime"),
                        "2026-06-03T00:00:00Z");
    /* the default pool has no object: no status */
    struct upg_pool_report d = mk_report("default", 1, 0, 0, 0, NULL, NULL);
    upg_report_pool(&d, NULL, "2026-06-03T00:00:00Z");
    assert_null(d.status);
    struct upg_plan *p = xcalloc(1, sizeof(*p));
    p->pools = xcalloc(2, sizeof(*p->pools));
    p->pools[0] = r;
    p->pools[1] = d;
    p->n_pools = 2;
    upg_plan_free(p);
    json_decref(obj);
}

/* Repeats are held back by what an Event is about (object, reason, cause, gate, pool, revision),
 * never by its message; a state change never is. */
static void test_events_held_back(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, 8);
    label_nodes(&w, 0, 1, "pool", "x");
    add_pool(&w, "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"nodeSelector\":{\"pool\":\"x\"},"
                 "\"approval\":\"sometimes\"}}");
    _cleanup_(upg_event_log_freep) struct upg_event_log *log = upg_event_log_new();
    w.posted = log;
    /* pass 1: node-0 refused (its pool invalid), the pool's Event, node-1's states */
    struct upg_plan *p = plan(&w);
    assert_true(has_event(p, "node-0", "left as it is"));
    assert_true(has_event(p, "node-1", "[upgrade-required]"));
    size_t pool_events = 0;
    for (size_t i = 0; i < p->n_events; i++) {
        pool_events += p->events[i].object == UPG_OBJ_POOL;
        upg_event_log_record(log, &p->events[i], w.now);
    }
    assert_int_equal(pool_events, 1);
    assert_int_equal(p->events_held, 0);
    execute(&w, p);
    upg_plan_free(p);
    /* pass 2 a minute later: the refusal and the pool's Event are held back; node-1's state
     * changes are not */
    w.now += 60;
    p = plan(&w);
    assert_false(has_event(p, "node-0", "left as it is"));
    assert_int_equal(p->events_held, 2);
    for (size_t i = 0; i < p->n_events; i++)
        assert_int_equal(p->events[i].cause, UPG_CAUSE_STATE);
    upg_plan_free(p);
    /* the same refusal worded otherwise (another reason in its text) is the same Event */
    json_array_clear(w.pools);
    add_pool(&w, "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"nodeSelector\":{\"pool\":\"x\"},"
                 "\"approval\":\"never\"}}");
    p = plan(&w);
    assert_false(has_event(p, "node-0", "left as it is"));
    assert_int_equal(p->events_held, 2);
    upg_plan_free(p);
    /* past UPG_EVENT_REPEAT_S: posted again */
    w.now += UPG_EVENT_REPEAT_S;
    p = plan(&w);
    assert_true(has_event(p, "node-0", "left as it is"));
    assert_int_equal(p->events_held, 0);
    upg_plan_free(p);
    /* a state Event is never recorded nor held */
    struct upg_event st = {.object = UPG_OBJ_NODE,
                           .name = "n",
                           .reason = UPG_EVENT_REASON,
                           .cause = UPG_CAUSE_STATE,
                           .message = "x"};
    size_t before = upg_event_log_size(log);
    upg_event_log_record(log, &st, w.now);
    assert_int_equal(upg_event_log_size(log), before);
    assert_false(upg_event_log_holds(log, &st, w.now));
    /* a waiting node: another gate is another Event, the same gate reworded is not */
    struct upg_event a = {.object = UPG_OBJ_NODE,
                          .name = "n",
                          .pool = "p",
                          .revision = "r1",
                          .reason = UPG_EVENT_REASON,
                          .cause = UPG_CAUSE_WAITING,
                          .gate = UPG_GATE_FLOOR,
                          .message = "capacity floor: 3 of 8"};
    upg_event_log_record(log, &a, w.now);
    struct upg_event b = a;
    b.message = "capacity floor: 2 of 8";
    assert_true(upg_event_log_holds(log, &b, w.now + 1));
    b.gate = UPG_GATE_WINDOW;
    assert_false(upg_event_log_holds(log, &b, w.now + 1));
    b = a;
    b.revision = "r2"; /* another rollout */
    assert_false(upg_event_log_holds(log, &b, w.now + 1));
    world_done(&w);
}

/* The driver DaemonSets the shell hands the planner: the ClusterPolicy's and each
 * NVIDIADriver's in the operator's namespace, each at its newest ControllerRevision, with the
 * version its image tag names. */
static void test_driver_sets(void **state)
{
    (void)state;
    json_t *owned = json_loads(
        "[{\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"nvidia-driver-daemonset\","
        "\"namespace\":\"gpu-operator\",\"uid\":\"u1\"},\"spec\":{\"template\":{\"spec\":{"
        "\"containers\":[{\"image\":\"nvcr.io/nvidia/driver:580.82.07-ubuntu22.04\"}]}}}},"
        "{\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"nvidia-gpu-driver-a-ubuntu24.04\","
        "\"namespace\":\"gpu-operator\",\"uid\":\"u2\",\"labels\":{\"gpuop.dev/nvidia-driver\":"
        "\"a\"}},\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"image\":"
        "\"registry:5000/driver@sha256:00\"}]}}}},"
        "{\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"nvidia-device-plugin-daemonset\","
        "\"namespace\":\"gpu-operator\",\"uid\":\"u3\"}},"
        "{\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"nvidia-driver-daemonset\","
        "\"namespace\":\"elsewhere\",\"uid\":\"u4\"}},"
        "{\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"nvidia-gpu-driver-b-rhel9\","
        "\"namespace\":\"gpu-operator\",\"uid\":\"u5\",\"labels\":{\"gpuop.dev/nvidia-driver\":"
        "\"b\"}}}]",
        0, NULL);
    json_t *revs = json_loads(
        "[{\"metadata\":{\"labels\":{\"controller-revision-hash\":\"old\"},\"ownerReferences\":"
        "[{\"kind\":\"DaemonSet\",\"uid\":\"u1\"}]},\"revision\":1},"
        "{\"metadata\":{\"labels\":{\"controller-revision-hash\":\"new\"},\"ownerReferences\":"
        "[{\"kind\":\"DaemonSet\",\"uid\":\"u1\"}]},\"revision\":3},"
        "{\"metadata\":{\"labels\":{\"controller-revision-hash\":\"mid\"},\"ownerReferences\":"
        "[{\"kind\":\"DaemonSet\",\"uid\":\"u1\"}]},\"revision\":2},"
        "{\"metadata\":{\"labels\":{\"controller-revision-hash\":\"a1\"},\"ownerReferences\":"
        "[{\"kind\":\"DaemonSet\",\"uid\":\"u2\"}]},\"revision\":1},"
        "{\"metadata\":{\"labels\":{\"controller-revision-hash\":\"x\"},\"ownerReferences\":"
        "[{\"kind\":\"DaemonSet\",\"uid\":\"u3\"}]},\"revision\":1}]",
        0, NULL);
    assert_non_null(owned);
    assert_non_null(revs);
    size_t n = 0;
    struct upg_driver_set *sets = upg_driver_sets(owned, revs, "gpu-operator", "595.91.07", &n);
    /* the device plugin is no driver, the other namespace's is not ours, b has no revision */
    assert_int_equal(n, 2);
    assert_string_equal(sets[0].name, "nvidia-driver-daemonset");
    assert_string_equal(sets[0].revision, "new");
    assert_string_equal(sets[0].version, "580.82.07");
    assert_string_equal(sets[1].name, "nvidia-gpu-driver-a-ubuntu24.04");
    assert_string_equal(sets[1].revision, "a1");
    assert_string_equal(sets[1].version, "595.91.07"); /* a digest names no version */
    free(sets);
    json_decref(owned);
    json_decref(revs);
}

static void test_policy_parse_errors(void **state)
{
    (void)state;
    static const struct {
        const char *json, *want;
    } cases[] = {
        {"{\"maxUnavailable\":\"abc\"}", "maxUnavailable"},
        {"{\"maxUnavailable\":\"150%\"}", "100%"},
        {"{\"maxParallelUpgrades\":-1}", "maxParallelUpgrades"},
        {"{\"autoUpgrade\":\"yes please\"}", "autoUpgrade"},
        {"{\"drain\":{\"podSelector\":\"a in (b\"}}", "drain.podSelector"},
        {"{\"drain\":{\"timeoutSecond\":3}}", "timeoutSecond"},
        {"{\"waitForCompletion\":{\"timeoutSeconds\":\"x\"}}", "waitForCompletion"},
        {"[]", "expected an object"},
    };
    for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
        json_t *v = json_loads(cases[c].json, JSON_DECODE_ANY, NULL);
        struct upg_policy p;
        struct err e = {0};
        assert_true(upg_policy_parse(v, "spec.driver.upgradePolicy", false, &p, &e) < 0);
        if (!strstr(err_msg(&e), cases[c].want) ||
            !strstr(err_msg(&e), "spec.driver.upgradePolicy"))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", c, err_msg(&e), cases[c].want);
        json_decref(v);
    }
    /* defaults: NVIDIA's CRD's */
    struct upg_policy p;
    struct err e = {0};
    json_t *v = json_loads("{\"drain\":{\"enable\":true}}", 0, NULL);
    assert_int_equal(upg_policy_parse(v, "x", false, &p, &e), 0);
    assert_false(p.auto_upgrade);
    assert_int_equal(p.max_parallel, 1);
    assert_string_equal(json_string_value(p.max_unavailable), "25%");
    assert_int_equal(p.drain_timeout_s, 300);
    assert_int_equal(p.del_timeout_s, 300);
    assert_true(p.drain_enable);
    upg_policy_done(&p);
    json_decref(v);
}

static void test_pool_parse_errors(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *want;
    } cases[] = {
        {"{}", "exactly one of nodeSelector and nvidiaDriver"},
        {"{\"nodeSelector\":{\"a\":\"b\"},\"approval\":\"maybe\"}", "spec.approval"},
        {"{\"nodeSelector\":{\"a\":\"b\"},\"timeZone\":\"../../etc/passwd\"}", "spec.timeZone"},
        {"{\"nodeSelector\":{\"a\":\"b\"},\"maintenanceWindows\":[{\"days\":[\"Funday\"],"
         "\"start\":\"02:00\",\"duration\":\"1h\"}]}",
         "maintenanceWindows[0].days[0]"},
        {"{\"nodeSelector\":{\"a\":\"b\"},\"maintenanceWindows\":[{\"days\":[\"Mon\"],"
         "\"start\":\"25:00\",\"duration\":\"1h\"}]}",
         "maintenanceWindows[0].start"},
        {"{\"nodeSelector\":{\"a\":\"b\"},\"maintenanceWindows\":[{\"days\":[\"Mon\"],"
         "\"start\":\"02:00\",\"duration\":\"9d\"}]}",
         "maintenanceWindows[0].duration"},
        {"{\"nodeSelector\":{\"a\":\"b\"},\"capacityFloor\":\"lots\"}", "capacityFloor"},
        {"{\"nodeSelector\":{\"a\":\"b\"},\"canary\":{}}", "canary"},
        {"{\"nodeSelector\":{\"a\":\"b\"},\"minCudaVersion\":\"new\"}", "minCudaVersion"},
        {"{\"nodeSelector\":{\"a\":\"b\"},\"canary\":{\"nodes\":1,\"maxUnhealthyGPUs\":-1}}",
         "canary.maxUnhealthyGPUs"},
        {"{\"nodeSelector\":{\"a b\":\"c\"}}", "nodeSelector"},
        {"{\"nodeSelector\":{\"a\":\"b\"},\"surprise\":1}", "surprise"},
    };
    for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
        _cleanup_free_ char *txt =
            xasprintf("{\"metadata\":{\"name\":\"p\"},\"spec\":%s}", cases[c].spec);
        json_t *v = json_loads(txt, 0, NULL);
        assert_non_null(v);
        struct upg_pool p;
        struct err e = {0};
        assert_true(upg_pool_parse(v, &p, &e) < 0);
        if (!strstr(err_msg(&e), cases[c].want) || !strstr(err_msg(&e), "DriverUpgradePool p"))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", c, err_msg(&e), cases[c].want);
        json_decref(v);
    }
}

static void test_matrix(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"branches: [1]", "branches"},
        {"branches: {}", "1 to 256"},
        {"branches: {\"r595\": {cudaVersion: \"13.0\"}}", "r595"},
        {"branches: {\"595\": {architectures: hopper, cudaVersion: \"13.0\"}}", "architectures"},
        {"branches: {\"595\": {architectures: [hopper]}}", "cudaVersion"},
        {"branches: {\"595\": {cudaVersion: \"13.0\", minKernel: new}}", "minKernel"},
        {"branches: {\"595\": {cudaVersion: \"13.0\", color: blue}}", "color"},
        {"branches: {\"595\": [", "matrix"},
        {"other: 1", "other"},
    };
    for (size_t c = 0; c < ARRAY_SIZE(bad); c++) {
        struct upg_matrix *m = NULL;
        struct err e = {0};
        assert_true(upg_matrix_parse(bad[c].text, strlen(bad[c].text), "matrix", &m, &e) < 0);
        assert_null(m);
        if (!strstr(err_msg(&e), bad[c].want) || strncmp(err_msg(&e), "matrix", 6) != 0)
            fail_msg("case %zu: \"%s\" lacks \"%s\"", c, err_msg(&e), bad[c].want);
    }
    struct upg_matrix *m = NULL;
    struct err e = {0};
    assert_int_equal(upg_matrix_parse(MATRIX_TEXT, strlen(MATRIX_TEXT), "m", &m, &e), 0);
    char *why = NULL;
    assert_true(upg_matrix_allows(m, "595.91.07", "hopper", "6.8.0-45-generic", "ubuntu24.04",
                                  "12.4", &why));
    assert_false(upg_matrix_allows(m, "610.57.04", "hopper", NULL, NULL, NULL, &why));
    assert_non_null(strstr(why, "branch 610"));
    free(why);
    assert_false(upg_matrix_allows(m, "595.91.07", NULL, NULL, "rhel8.10", NULL, &why));
    assert_non_null(strstr(why, "rhel8.10"));
    free(why);
    assert_true(upg_matrix_allows(m, "580.105.08", "turing", NULL, "rhel8.10", NULL, &why));
    upg_matrix_free(m);
    assert_true(upg_version_cmp("5.15.0-127-generic", "5.4") > 0);
    assert_true(upg_version_cmp("4.18.0", "5.4") < 0);
    assert_int_equal(upg_version_cmp("12.4", "12.4.0"), 0);
    /* the matrix gpuop ships parses */
    const char *root = getenv("GPUOP_SOURCE_ROOT");
    if (root) {
        _cleanup_free_ char *path = xasprintf("%s/deploy/upgrade/compat-matrix.yaml", root);
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        assert_int_equal(file_read_all(path, 1 << 20, &buf, &len, &e), 0);
        assert_int_equal(upg_matrix_parse(buf, len, path, &m, &e), 0);
        assert_true(
            upg_matrix_allows(m, "595.91.07", "hopper", "5.15.0", "ubuntu22.04", NULL, &why));
        upg_matrix_free(m);
    }
}

/* upg_pod_compact: every accessor reads the same from a pod and from its compact form; alike
 * pods share one alike part, which a change to the pod it came from never reaches. */
static void test_pod_compact(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, 8);
    json_t *drv = mk_driver_pod(&w, "node-0", "rev-1", true);
    json_t *drv2 = mk_driver_pod(&w, "node-1", "rev-1", true);
    json_t *gone = mk_gpu_pod(&w, "node-0", "train-0", "train");
    json_object_set_new(json_object_get(gone, "metadata"), "deletionTimestamp",
                        json_string("2026-12-01T00:00:00Z"));
    json_object_set_new(kobj_path(gone, "spec"), "resourceClaims",
                        json_pack("[{s:s}]", "name", "gpu"));
    _cleanup_json_ json_t *intern = json_object();
    const json_t *pods[] = {drv, drv2, gone};
    json_t *c[3];
    for (int i = 0; i < 3; i++) {
        const json_t *p = pods[i];
        c[i] = upg_pod_compact(p, intern);
        assert_true(upg_pod_is_compact(c[i]));
        assert_false(upg_pod_is_compact(p));
        assert_ptr_equal(upg_pod_obj(p), p);
        assert_string_equal(upg_pod_name(c[i]), kobj_name(p));
        assert_string_equal(upg_pod_node(c[i]), kobj_path_str(p, "spec.nodeName"));
        assert_string_equal(upg_pod_created(c[i]), kobj_creation_timestamp(p));
        assert_true(streq_ptr(upg_pod_deletion(c[i]), kobj_deletion_timestamp(p)));
        assert_string_equal(upg_pod_name(p), kobj_name(p));
        assert_string_equal(upg_pod_node(p), kobj_path_str(p, "spec.nodeName"));
        const json_t *o = upg_pod_obj(c[i]);
        assert_string_equal(kobj_namespace(o), kobj_namespace(p));
        assert_true(json_equal(kobj_labels(o), kobj_labels(p)));
        assert_int_equal(upg_pod_ready(c[i]), upg_pod_ready(p));
        assert_int_equal(upg_pod_finished(c[i]), upg_pod_finished(p));
        assert_int_equal(upg_pod_daemon(c[i]), upg_pod_daemon(p));
        assert_int_equal(upg_pod_is_gpu(c[i]), upg_pod_is_gpu(p));
    }
    assert_string_equal(upg_pod_deletion(c[2]), "2026-12-01T00:00:00Z");
    assert_null(upg_pod_deletion(c[0]));
    assert_int_equal(json_array_size(kobj_path(upg_pod_obj(c[2]), "spec.resourceClaims")), 1);
    assert_true(upg_pod_daemon(c[0]) && !upg_pod_daemon(c[2]) && upg_pod_is_gpu(c[2]));
    /* two pods of one revision, both ready: one alike part */
    assert_ptr_equal(upg_pod_obj(c[0]), upg_pod_obj(c[1]));
    assert_ptr_not_equal(upg_pod_obj(c[0]), upg_pod_obj(c[2]));
    /* the pod it came from changes: the shared part does not */
    json_object_set_new(kobj_labels(drv), "controller-revision-hash", json_string("rev-2"));
    assert_string_equal(kobj_label(upg_pod_obj(c[1]), "controller-revision-hash"), "rev-1");
    assert_true(kobj_intern_check(intern));
    /* absent values read as absent, and a malformed owner still names its kind */
    json_t *bare = json_pack("{s:{s:s,s:[{s:s}]}}", "metadata", "name", "bare", "ownerReferences",
                             "kind", "DaemonSet");
    json_t *cb = upg_pod_compact(bare, NULL);
    assert_string_equal(upg_pod_name(cb), "bare");
    assert_null(upg_pod_node(cb));
    assert_null(upg_pod_created(cb));
    assert_null(upg_pod_deletion(cb));
    assert_null(kobj_namespace(upg_pod_obj(cb)));
    assert_true(upg_pod_daemon(cb) && !upg_pod_ready(cb) && !upg_pod_finished(cb));
    /* what is no pod has no compact form; what is no compact form reads as a pod */
    json_t *nameless = json_pack("{s:{s:s}}", "metadata", "namespace", "x");
    assert_null(upg_pod_compact(nameless, intern));
    assert_null(upg_pod_compact(json_array_get(w.pods, 99), intern));
    json_t *odd[] = {json_pack("[s,s]", "a", "b"), json_pack("[{}]"),
                     json_pack("[{},s,s]", "a", "b")};
    for (size_t i = 0; i < ARRAY_SIZE(odd); i++) {
        assert_false(upg_pod_is_compact(odd[i]));
        assert_ptr_equal(upg_pod_obj(odd[i]), odd[i]);
        assert_null(upg_pod_name(odd[i]));
        assert_null(upg_pod_node(odd[i]));
        json_decref(odd[i]);
    }
    for (int i = 0; i < 3; i++)
        json_decref(c[i]);
    json_decref(cb);
    json_decref(bare);
    json_decref(nameless);
    json_decref(drv);
    json_decref(drv2);
    json_decref(gone);
    world_done(&w);
}

static void test_selectors(void **state)
{
    (void)state;
    json_t *labels = json_pack("{s:s,s:s}", "app", "serve", "tier", "gpu");
    static const struct {
        const char *sel;
        int match; /* 1, 0, -1 error */
    } cases[] = {
        {"", 1},
        {"app=serve", 1},
        {"app==serve,tier=gpu", 1},
        {"app!=serve", 0},
        {"app", 1},
        {"!app", 0},
        {"!missing", 1},
        {"app in (train, serve)", 1},
        {"app notin (serve)", 0},
        {"tier in (cpu)", 0},
        {"app=", 0},
        {"app=serve,", -1},
        {"a b", -1},
        {"app in (serve", -1},
        {"=x", -1},
        {"app=se rve", -1},
    };
    for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
        bool m = false;
        struct err e = {0};
        int r = kobj_selector_match(cases[c].sel, labels, &m, &e);
        int got = r < 0 ? -1 : m;
        if (got != cases[c].match)
            fail_msg("selector \"%s\": got %d want %d (%s)", cases[c].sel, got, cases[c].match,
                     err_msg(&e));
    }
    json_decref(labels);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_states_in_order),
        cmocka_unit_test(test_pods_not_listed_wait),
        cmocka_unit_test(test_max_parallel_and_unavailable),
        cmocka_unit_test(test_precordoned_node),
        cmocka_unit_test(test_resume_from_each_state),
        cmocka_unit_test(test_skip_label),
        cmocka_unit_test(test_auto_upgrade_off),
        cmocka_unit_test(test_fresh_node_done_before_its_pod),
        cmocka_unit_test(test_pdb_holds_node_then_times_out),
        cmocka_unit_test(test_drain_timeout_fails),
        cmocka_unit_test(test_drain_skip_and_selector),
        cmocka_unit_test(test_failed_node_recovers_and_retry),
        cmocka_unit_test(test_driver_crashloop_fails),
        cmocka_unit_test(test_requested_annotation),
        cmocka_unit_test(test_safe_load),
        cmocka_unit_test(test_validation_timeout),
        cmocka_unit_test(test_validation_resumes_stale_validator),
        cmocka_unit_test(test_writes_rule),
        cmocka_unit_test(test_writes_chain_bounded),
        cmocka_unit_test(test_stale_informer_no_repeat),
        cmocka_unit_test(test_capacity_floor),
        cmocka_unit_test(test_window_closed_then_open),
        cmocka_unit_test(test_window_in_flight_finishes),
        cmocka_unit_test(test_tz_offsets),
        cmocka_unit_test(test_tz_local_to_utc),
        cmocka_unit_test(test_window_dst),
        cmocka_unit_test(test_tz_errors),
        cmocka_unit_test(test_pool_bad_zone),
        cmocka_unit_test(test_manual_approval),
        cmocka_unit_test(test_remediation_hold),
        cmocka_unit_test(test_budget_counting),
        cmocka_unit_test(test_canary_pass),
        cmocka_unit_test(test_canary_unhealthy_gpus),
        cmocka_unit_test(test_canary_first_k),
        cmocka_unit_test(test_canary_halt_resume_rollback),
        cmocka_unit_test(test_canary_resume),
        cmocka_unit_test(test_compat_gate_refuses_one_node),
        cmocka_unit_test(test_bad_input_freezes),
        cmocka_unit_test(test_driver_sets),
        cmocka_unit_test(test_pool_phases),
        cmocka_unit_test(test_condition_rollup),
        cmocka_unit_test(test_pool_status_body),
        cmocka_unit_test(test_events_held_back),
        cmocka_unit_test(test_policy_parse_errors),
        cmocka_unit_test(test_pool_parse_errors),
        cmocka_unit_test(test_matrix),
        cmocka_unit_test(test_selectors),
        cmocka_unit_test(test_pod_compact),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    compact_run = true;
    return failed + cmocka_run_group_tests_name("compact labels", tests, NULL, NULL);
}
