/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The remediation planner, table-tested on a small simulated cluster. Each node's health agent is
 * the real tracker (src/lib/gpuhealth) over simulated GPUs, so the planner reads what the agent
 * would write; a pass plans, then the cluster executes the plan as the operator's shell, the
 * API server and the node would (patches merged, evictions and validator deletions carried out,
 * the validator DaemonSet's new pod, reset and reboot requests answered) and the agents observe
 * again. Every state, the budget, the breakers, a node cordoned by a person, a node under a
 * driver upgrade, and a restart from each state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuhealth.h"
#include "../unit/compact-nodes.h"
#include "../unit/compact-pods.h"
#include "kobj.h"
#include "remediation.h"

#define T0     1767261600000LL /* 2026-01-01T10:00:00Z, a Thursday */
#define MAXN   12
#define NGPU   8
#define VAL_NS "gpu-operator"

struct agent {
    struct gh_state st;
    struct gh_gpu_obs gpus[NGPU];
    char uuids[NGPU][40];
    struct gh_event_obs ev[8];
    size_t n_ev;
};

struct world {
    json_t *nodes, *pods, *pdbs, *pools, *cluster_anns;
    struct agent agents[MAXN];
    int n;
    int64_t now;
    struct rem_policy pol;
    bool executor;       /* reset and reload requests answered (and the GPUs fixed) */
    bool executor_fixes; /* the reset fixes the fault */
    bool reboot_tool;    /* reboot requests carried out */
    bool validator_ok;   /* a new validator pod becomes ready */
    int boots[MAXN];
    int pod_seq;
    int max_down; /* checked after every pass: nodes cordoned at most (0: unchecked) */
    json_t *max_unavailable;
    json_t *cluster_threshold;
    bool changed;          /* the agents or the node side changed something this round */
    json_t *kept, *intern; /* the compact run's nodes (informer_view) */
};

/* The second run of every test plans from the nodes and pods as the operator hands them over
 * (node labels compact, the boot ID beside the status as rem_project_node keeps it; pods in
 * upg_pod_compact's form) and must come out the same. */
static bool compact_run;

/* The nodes a pass reads: as they are, or on the second run their compact copies (kept with
 * the world: a plan may borrow from them). */
static const json_t *informer_view(struct world *w, const json_t *nodes)
{
    if (!compact_run)
        return nodes;
    if (!w->kept)
        w->kept = json_array();
    if (!w->intern)
        w->intern = json_object();
    json_t *c = test_compact_nodes(nodes, w->intern);
    size_t i;
    json_t *n;
    json_array_foreach (c, i, n) {
        json_t *info = kobj_path(n, "status.nodeInfo");
        if (!json_object_get(info, "bootID"))
            continue;
        json_t *status = json_copy(json_object_get(n, "status"));
        json_t *info2 = json_copy(info);
        json_object_del(info2, "bootID");
        json_object_set_new(status, "nodeInfo", info2);
        rem_project_node(json_array_get(nodes, i), n);
        json_object_set_new(n, "status", status);
        assert_null(kobj_path(n, "status.nodeInfo.bootID"));
    }
    json_array_append_new(w->kept, c);
    return c;
}

/* The pods a pass reads: as they are, or on the second run compact (upg_pod_compact), as the
 * shell hands them over. */
static const json_t *pods_view(struct world *w)
{
    if (!compact_run)
        return w->pods;
    if (!w->kept)
        w->kept = json_array();
    if (!w->intern)
        w->intern = json_object();
    json_t *c = test_compact_pods(w->pods, w->intern);
    json_array_append_new(w->kept, c);
    return c;
}

static json_t *node_of(struct world *w, const char *name)
{
    size_t i;
    json_t *n;
    json_array_foreach (w->nodes, i, n)
        if (streq_ptr(kobj_name(n), name))
            return n;
    return NULL;
}

static const char *now_text(struct world *w, char *buf, size_t n)
{
    time_rfc3339((uint64_t)w->now, buf, n);
    return buf;
}

static json_t *mk_pod(struct world *w, const char *ns, const char *name, const char *node, bool gpu,
                      const char *app)
{
    char t[40];
    json_t *res = gpu ? json_pack("{s:{s:s}}", "limits", "nvidia.com/gpu", "1") : json_object();
    json_t *pod = json_pack(
        "{s:{s:s,s:s,s:s,s:{},s:[{s:s,s:s}]},s:{s:s,s:[{s:s,s:o}]},s:{s:s,s:[{s:s,s:s}]}}",
        "metadata", "name", name, "namespace", ns, "creationTimestamp", now_text(w, t, sizeof(t)),
        "labels", "ownerReferences", "kind", app ? "DaemonSet" : "ReplicaSet", "name", "owner",
        "spec", "nodeName", node, "containers", "name", "c", "resources", res, "status", "phase",
        "Running", "conditions", "type", "Ready", "status", "True");
    if (app)
        json_object_set_new(kobj_labels(pod), "app", json_string(app));
    return pod;
}

static void add_validator(struct world *w, const char *node)
{
    char name[64];
    snprintf(name, sizeof(name), "nvidia-operator-validator-%d", ++w->pod_seq);
    json_t *v = mk_pod(w, VAL_NS, name, node, false, UPG_VALIDATOR_APP);
    if (!w->validator_ok)
        json_object_set_new(json_object_get(v, "status"), "phase", json_string("Pending"));
    json_array_append_new(w->pods, v);
}

static void world_init(struct world *w, int n, const char *policy_json)
{
    memset(w, 0, sizeof(*w));
    w->nodes = json_array();
    w->pods = json_array();
    w->pdbs = json_array();
    w->pools = json_array();
    w->now = T0;
    w->n = n;
    w->executor = w->executor_fixes = w->reboot_tool = w->validator_ok = true;
    w->cluster_threshold = json_string("100%");
    struct err e = {0};
    json_t *pj = policy_json ? json_loads(policy_json, 0, NULL) : NULL;
    if (policy_json && !pj)
        fail_msg("policy JSON");
    if (rem_policy_parse(pj, "policy", &w->pol, &e) < 0)
        fail_msg("%s", err_msg(&e));
    json_decref(pj);
    for (int i = 0; i < n; i++) {
        char name[24];
        snprintf(name, sizeof(name), "node-%d", i);
        json_array_append_new(
            w->nodes,
            json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s},s:{}},s:{},s:{s:{s:s},s:[{s:s,s:s}],s:{s:s}}}",
                      "apiVersion", "v1", "kind", "Node", "metadata", "name", name,
                      "resourceVersion", "1", "labels", "nvidia.com/gpu.present", "true",
                      "annotations", "spec", "status", "allocatable", "nvidia.com/gpu", "8",
                      "conditions", "type", "Ready", "status", "True", "nodeInfo", "bootID",
                      "boot-0"));
        struct agent *a = &w->agents[i];
        for (unsigned g = 0; g < NGPU; g++) {
            snprintf(a->uuids[g], sizeof(a->uuids[g]), "GPU-%02d-%u", i, g);
            a->gpus[g] = (struct gh_gpu_obs){.index = g,
                                             .uuid = a->uuids[g],
                                             .ecc_ok = true,
                                             .remap_ok = true,
                                             .nvlink_ok = true,
                                             .clocks_ok = true};
        }
        add_validator(w, name);
        char pod[32];
        snprintf(pod, sizeof(pod), "job-%d", i);
        json_array_append_new(w->pods, mk_pod(w, "ml", pod, name, true, NULL));
        snprintf(pod, sizeof(pod), "cpu-%d", i);
        json_array_append_new(w->pods, mk_pod(w, "ml", pod, name, false, NULL));
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
    json_decref(w->cluster_anns);
    json_decref(w->max_unavailable);
    json_decref(w->cluster_threshold);
    rem_policy_done(&w->pol);
}

static void merge(json_t *dst, const json_t *patch)
{
    json_t *m = kobj_merge_patch(dst, patch);
    json_object_clear(dst);
    json_object_update(dst, m);
    json_decref(m);
}

static const char *ann(struct world *w, const char *node, const char *k)
{
    return kobj_annotation(node_of(w, node), k);
}

static void set_node_ann(struct world *w, const char *node, const char *k, const char *v)
{
    json_t *a = kobj_path(node_of(w, node), "metadata.annotations");
    json_object_set_new(a, k, v ? json_string(v) : json_null());
    if (!v)
        json_object_del(a, k);
}

static const char *state_of(struct world *w, const char *node)
{
    return kobj_label(node_of(w, node), REM_LABEL_STATE) ?: "healthy";
}

static bool is_cordoned(struct world *w, const char *node)
{
    return json_is_true(kobj_path(node_of(w, node), "spec.unschedulable"));
}

static const char *taint_of(struct world *w, const char *node)
{
    size_t i;
    json_t *t;
    json_array_foreach (kobj_path(node_of(w, node), "spec.taints"), i, t)
        if (streq_ptr(kobj_str(t, "key"), REM_TAINT_KEY))
            return kobj_str(t, "value");
    return NULL;
}

static bool has_pod(struct world *w, const char *name)
{
    size_t i;
    json_t *p;
    json_array_foreach (w->pods, i, p)
        if (streq_ptr(kobj_name(p), name))
            return true;
    return false;
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
    fail_msg("no pod %s/%s", ns, name);
}

/* The agents observe their GPUs and write the annotation to their Node. */
static void agents(struct world *w)
{
    for (int i = 0; i < w->n; i++) {
        struct agent *a = &w->agents[i];
        char name[24];
        snprintf(name, sizeof(name), "node-%d", i);
        struct gh_observation o = {.now_ms = w->now,
                                   .nvml_ok = true,
                                   .gpus = a->gpus,
                                   .n_gpus = NGPU,
                                   .events = a->ev,
                                   .n_events = a->n_ev,
                                   .plugin_held_back = 0,
                                   .annotation = ann(w, name, GH_ANN_HEALTH),
                                   .ack = ann(w, name, GH_ANN_ACK),
                                   .slowdown_window_ms = 60000};
        struct gh_report r;
        struct err e = {0};
        assert_int_equal(gh_observe(&a->st, &o, &r, &e), 0);
        a->n_ev = 0;
        if (r.annotation) {
            set_node_ann(w, name, GH_ANN_HEALTH, r.annotation);
            w->changed = true;
        }
        gh_report_clear(&r);
    }
}

static struct rem_plan *plan(struct world *w)
{
    struct rem_input in = {.nodes = informer_view(w, w->nodes),
                           .pods = pods_view(w),
                           .pdbs = w->pdbs,
                           .pools = w->pools,
                           .policy = &w->pol,
                           .max_unavailable = w->max_unavailable,
                           .cluster_annotations = w->cluster_anns,
                           .cluster_breaker_threshold = w->cluster_threshold,
                           .validation_enabled = true,
                           .now_ms = w->now};
    struct rem_plan *p = NULL;
    struct err e = {0};
    if (rem_plan(&in, &p, &e) < 0)
        fail_msg("rem_plan: %s", err_msg(&e));
    return p;
}

static void execute(struct world *w, const struct rem_plan *p)
{
    for (size_t i = 0; i < p->n_patches; i++) {
        json_t *n = node_of(w, p->patches[i].node);
        assert_non_null(n);
        /* the precondition holds: the node as read */
        assert_string_equal(kobj_path_str(p->patches[i].patch, "metadata.resourceVersion"),
                            kobj_resource_version(n));
        merge(n, p->patches[i].patch);
        char rv[16];
        snprintf(rv, sizeof(rv), "%d", atoi(kobj_resource_version(n)) + 1);
        json_object_set_new(json_object_get(n, "metadata"), "resourceVersion", json_string(rv));
    }
    for (size_t i = 0; i < p->n_evictions; i++)
        remove_pod(w, p->evictions[i].ns, p->evictions[i].name);
    for (size_t i = 0; i < p->n_deletions; i++) {
        remove_pod(w, p->deletions[i].ns, p->deletions[i].name);
        add_validator(w, p->deletions[i].node); /* the DaemonSet's new pod */
    }
    for (size_t k = 0; k < p->n_breakers; k++) {
        const struct rem_breaker_update *b = &p->breakers[k];
        json_t *anns;
        if (b->pool && strcmp(b->key, REM_ANN_BREAKER) == 0) {
            json_t *pool = NULL;
            size_t i;
            json_t *v;
            json_array_foreach (w->pools, i, v)
                if (streq_ptr(kobj_name(v), b->pool))
                    pool = v;
            assert_non_null(pool);
            anns = kobj_ensure_object(json_object_get(pool, "metadata"), "annotations");
        } else {
            /* the cluster's breaker and the default pool's, on the cluster's object */
            if (!w->cluster_anns)
                w->cluster_anns = json_object();
            anns = w->cluster_anns;
        }
        if (b->value)
            json_object_set_new(anns, b->key, json_string(b->value));
        else
            json_object_del(anns, b->key);
    }
}

/* What the node does with the requests: the executor resets the GPUs or reloads the driver, a
 * reboot tool reboots the node. */
static void node_side(struct world *w)
{
    for (int i = 0; i < w->n; i++) {
        char name[24];
        snprintf(name, sizeof(name), "node-%d", i);
        struct agent *a = &w->agents[i];
        const char *req = ann(w, name, REM_ANN_REQUEST);
        if (req && w->executor && !ann(w, name, REM_ANN_REQUEST_DONE)) {
            char act[32], id[64];
            assert_int_equal(sscanf(req, "%31s %63s", act, id), 2);
            if (w->executor_fixes)
                for (int g = 0; g < NGPU; g++) {
                    a->gpus[g].dbe_volatile = 0;
                    a->gpus[g].remap_pending = false;
                    a->gpus[g].retired_pending = false;
                }
            set_node_ann(w, name, REM_ANN_REQUEST_DONE, id);
            w->changed = true;
        }
        const char *rb = ann(w, name, REM_ANN_REBOOT);
        if (rb && w->reboot_tool && !streq_ptr(ann(w, name, REM_ANN_REBOOT_DONE), rb)) {
            for (int g = 0; g < NGPU; g++)
                a->gpus[g] = (struct gh_gpu_obs){.index = (unsigned)g,
                                                 .uuid = a->uuids[g],
                                                 .ecc_ok = true,
                                                 .remap_ok = true,
                                                 .nvlink_ok = true,
                                                 .clocks_ok = true};
            char boot[24];
            snprintf(boot, sizeof(boot), "boot-%d", ++w->boots[i]);
            json_object_set_new(kobj_path(node_of(w, name), "status.nodeInfo"), "bootID",
                                json_string(boot));
            w->changed = true;
        }
    }
}

static int count_state(struct world *w, const char *s)
{
    int c = 0;
    for (int i = 0; i < w->n; i++) {
        char name[24];
        snprintf(name, sizeof(name), "node-%d", i);
        c += strcmp(state_of(w, name), s) == 0;
    }
    return c;
}

/* One round: the agents observe, a pass plans and is executed, the nodes answer. */
static struct rem_plan *round_trip(struct world *w)
{
    w->changed = false;
    agents(w);
    struct rem_plan *p = plan(w);
    execute(w, p);
    node_side(w);
    return p;
}

static bool has_event(const struct rem_plan *p, const char *node, const char *reason,
                      const char *substr)
{
    for (size_t i = 0; i < p->n_events; i++) {
        const struct rem_event *ev = &p->events[i];
        if ((!node || streq_ptr(ev->node, node)) && (!reason || streq_ptr(ev->reason, reason)) &&
            (!substr || strstr(ev->message, substr)))
            return true;
    }
    return false;
}

/* Rounds until nothing changes (at most max), every step_s apart. Returns the rounds. */
static int converge(struct world *w, int max, int64_t step_ms)
{
    for (int r = 0; r < max; r++) {
        struct rem_plan *p = round_trip(w);
        bool idle = p->n_patches == 0 && p->n_evictions == 0 && p->n_deletions == 0 &&
                    p->n_breakers == 0 && !w->changed;
        rem_plan_free(p);
        if (w->max_down) {
            int down = 0;
            for (int i = 0; i < w->n; i++) {
                char name[24];
                snprintf(name, sizeof(name), "node-%d", i);
                const char *s = state_of(w, name);
                down += strcmp(s, "draining") == 0 || strcmp(s, "remediating") == 0 ||
                        strcmp(s, "validating") == 0;
            }
            if (down > w->max_down)
                fail_msg("round %d: %d nodes in remediation, limit %d", r, down, w->max_down);
        }
        if (idle)
            return r;
        w->now += step_ms;
    }
    fail_msg("no convergence in %d rounds", max);
    return -1;
}

static void dbe(struct world *w, int node, unsigned gpu)
{
    struct agent *a = &w->agents[node];
    a->gpus[gpu].dbe_volatile = 1;
    a->gpus[gpu].remap_pending = true;
    a->ev[a->n_ev++] = (struct gh_event_obs){
        .kind = GH_EV_DBE, .gpu = gpu, .uuid = a->uuids[gpu], .at_ms = w->now - 1200};
}

static void lost(struct world *w, int node, unsigned gpu)
{
    struct agent *a = &w->agents[node];
    a->gpus[gpu].lost = true;
    a->ev[a->n_ev++] =
        (struct gh_event_obs){.kind = GH_EV_XID, .gpu = gpu, .uuid = a->uuids[gpu], .xid = 79};
}

#define AUTO_RESET "{\"automatic\":[\"reset-gpu\"]}"
#define AUTO_ALL   "{\"automatic\":[\"reset-gpu\",\"reload-driver\",\"reboot-node\"]}"

/* ---- the machine ---------------------------------------------------------------------------- */

/* An uncorrectable ECC error on one GPU of a node running a GPU job and a CPU pod: quarantined
 * (an Event naming the GPU and the action), the job evicted, the CPU pod left, the GPU reset,
 * the validator run again, the node back in service; every state in order. */
static void test_states_in_order(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, AUTO_RESET);
    agents(&w);
    dbe(&w, 0, 3);
    const char *want[] = {"quarantined", "draining", "remediating", "validating", "healthy"};
    size_t k = 0;
    bool quarantine_event = false, recovered = false;
    for (int r = 0; r < 12 && k < ARRAY_SIZE(want); r++) {
        struct rem_plan *p = round_trip(&w);
        const char *s = state_of(&w, "node-0");
        if (has_event(p, "node-0", "GPUQuarantined", "GPU-00-3")) {
            quarantine_event = true;
            assert_true(has_event(p, "node-0", "GPUQuarantined", "reset-gpu"));
            assert_true(has_event(p, "node-0", "GPUQuarantined", "1200ms after the fault"));
            assert_true(is_cordoned(&w, "node-0"));
            assert_string_equal(taint_of(&w, "node-0"), "reset-gpu");
            assert_int_equal(p->nodes[0].quarantine_ms, 1200);
        }
        for (size_t i = 0; i < p->n_requests; i++) {
            assert_int_equal(p->requests[i].action, GH_ACT_RESET_GPU);
            assert_string_equal(p->requests[i].gpus, "GPU-00-3");
        }
        if (has_event(p, "node-0", "GPURecovered", NULL))
            recovered = true;
        /* each state in turn (a pass may go through several) */
        while (k < ARRAY_SIZE(want) && strcmp(s, want[k]) != 0)
            k++;
        assert_true(k < ARRAY_SIZE(want));
        rem_plan_free(p);
        w.now += 5000;
    }
    assert_true(quarantine_event);
    assert_true(recovered);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    assert_false(is_cordoned(&w, "node-0"));
    assert_null(taint_of(&w, "node-0"));
    assert_false(has_pod(&w, "job-0")); /* evicted */
    assert_true(has_pod(&w, "cpu-0"));  /* left */
    assert_true(has_pod(&w, "job-1"));  /* another node's */
    assert_non_null(ann(&w, "node-0", REM_ANN_RECOVERED_AT));
    assert_non_null(ann(&w, "node-0", REM_ANN_QUARANTINED_AT));
    assert_null(ann(&w, "node-0", REM_ANN_ACTION));
    assert_null(ann(&w, "node-0", REM_ANN_REQUEST));
    assert_string_equal(state_of(&w, "node-1"), "healthy");
    /* nothing more to do */
    assert_int_equal(converge(&w, 3, 5000), 0);
    world_done(&w);
}

/* The defaults quarantine and report; a person approves the action, then it runs. */
static void test_default_policy_waits_for_a_person(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, NULL);
    dbe(&w, 0, 0);
    converge(&w, 5, 5000);
    assert_string_equal(state_of(&w, "node-0"), "quarantined");
    assert_true(has_pod(&w, "job-0")); /* nothing drained */
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_WAITING), "needs a person"));
    struct rem_plan *p = plan(&w);
    assert_int_equal(p->counts[REM_QUARANTINED], 1);
    assert_non_null(strstr(p->nodes[0].why, "needs a person"));
    assert_string_equal(p->condition.reason, "Remediating");
    rem_plan_free(p);
    set_node_ann(&w, "node-0", REM_ANN_APPROVED, "true");
    converge(&w, 12, 5000);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    assert_null(ann(&w, "node-0", REM_ANN_APPROVED));
    world_done(&w);
}

/* A node a person cordoned before the fault stays cordoned after it recovers. */
static void test_admin_cordoned_stays_cordoned(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, AUTO_RESET);
    json_object_set_new(json_object_get(node_of(&w, "node-0"), "spec"), "unschedulable",
                        json_true());
    dbe(&w, 0, 1);
    converge(&w, 12, 5000);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    assert_true(is_cordoned(&w, "node-0"));
    assert_null(taint_of(&w, "node-0"));
    world_done(&w);
}

/* A node under a driver upgrade: quarantined at once, its remediation waits for the upgrade;
 * uncordoned by the upgrade's end, it is cordoned again and then uncordoned at its recovery. */
static void test_node_under_driver_upgrade(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 2, AUTO_RESET);
    json_t *n0 = node_of(&w, "node-0");
    json_object_set_new(kobj_labels(n0), UPG_LABEL_STATE, json_string("pod-restart-required"));
    json_object_set_new(json_object_get(n0, "spec"), "unschedulable", json_true());
    dbe(&w, 0, 2);
    converge(&w, 5, 5000);
    assert_string_equal(state_of(&w, "node-0"), "quarantined");
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_WAITING), "driver upgrade"));
    assert_null(ann(&w, "node-0", REM_ANN_CORDONED)); /* the upgrade's cordon */
    /* the upgrade ends and uncordons the node */
    json_object_set_new(kobj_labels(n0), UPG_LABEL_STATE, json_string("upgrade-done"));
    json_object_set_new(json_object_get(n0, "spec"), "unschedulable", json_false());
    struct rem_plan *p = round_trip(&w);
    rem_plan_free(p);
    assert_true(is_cordoned(&w, "node-0"));
    converge(&w, 12, 5000);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    assert_false(is_cordoned(&w, "node-0"));
    world_done(&w);
}

/* A GPU off the bus: XID 79 and the lost GPU, reboot-node; the reboot request, a new boot ID,
 * the GPU back, the node back in service. */
static void test_lost_gpu_reboot(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, AUTO_ALL);
    agents(&w);
    lost(&w, 0, 5);
    bool asked = false;
    for (int r = 0; r < 12; r++) {
        struct rem_plan *p = round_trip(&w);
        for (size_t i = 0; i < p->n_requests; i++) {
            assert_int_equal(p->requests[i].action, GH_ACT_REBOOT_NODE);
            asked = true;
        }
        rem_plan_free(p);
        w.now += 5000;
    }
    assert_true(asked);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    assert_string_equal(kobj_path_str(node_of(&w, "node-0"), "status.nodeInfo.bootID"), "boot-1");
    assert_null(ann(&w, "node-0", REM_ANN_REBOOT));
    world_done(&w);
}

/* A reboot answered by the tool's annotation, with the same boot ID (a tool that records it). */
static void test_reboot_done_annotation(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, AUTO_ALL);
    w.reboot_tool = false;
    lost(&w, 0, 0);
    converge(&w, 6, 5000);
    assert_string_equal(state_of(&w, "node-0"), "remediating");
    const char *id = ann(&w, "node-0", REM_ANN_REBOOT);
    assert_non_null(id);
    _cleanup_free_ char *idc = xstrdup(id);
    w.agents[0].gpus[0].lost = false;
    set_node_ann(&w, "node-0", REM_ANN_REBOOT_DONE, idc);
    converge(&w, 10, 5000);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    world_done(&w);
}

/* Hardware the node cannot fix: failed at once, left quarantined. */
static void test_replace_hw_fails(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, AUTO_ALL);
    w.agents[0].gpus[6].remap_failure = true;
    converge(&w, 5, 5000);
    assert_string_equal(state_of(&w, "node-0"), "failed");
    assert_true(is_cordoned(&w, "node-0"));
    assert_string_equal(taint_of(&w, "node-0"), "replace-hw");
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_REASON), "hardware needs a person"));
    struct rem_plan *p = plan(&w);
    assert_false(p->condition.status);
    assert_string_equal(p->condition.reason, "NodesFailed");
    rem_plan_free(p);
    /* a person replaced the GPU and asks for a retry */
    w.agents[0].gpus[6].remap_failure = false;
    set_node_ann(&w, "node-0", REM_ANN_RETRY, "true");
    converge(&w, 10, 5000);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    assert_false(is_cordoned(&w, "node-0"));
    world_done(&w);
}

/* The reset did not clear the fault: failed with the reason; a request failed or unanswered:
 * failed too. */
static void test_fault_persists_or_request_fails(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 3, AUTO_RESET);
    w.executor_fixes = false;
    dbe(&w, 0, 0);
    converge(&w, 12, 5000);
    assert_string_equal(state_of(&w, "node-0"), "failed");
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_REASON), "the fault persists"));
    world_done(&w);

    world_init(&w, 1, AUTO_RESET);
    w.executor = false;
    dbe(&w, 0, 0);
    converge(&w, 6, 5000);
    assert_string_equal(state_of(&w, "node-0"), "remediating");
    const char *req = ann(&w, "node-0", REM_ANN_REQUEST);
    char act[32], id[64];
    assert_int_equal(sscanf(req, "%31s %63s", act, id), 2);
    char failed[128];
    snprintf(failed, sizeof(failed), "%s GPU in use by pid 4242", id);
    set_node_ann(&w, "node-0", REM_ANN_REQUEST_FAILED, failed);
    converge(&w, 4, 5000);
    assert_string_equal(state_of(&w, "node-0"), "failed");
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_REASON), "GPU in use by pid 4242"));
    world_done(&w);

    world_init(&w, 1, AUTO_RESET);
    w.executor = false;
    dbe(&w, 0, 0);
    converge(&w, 6, 5000);
    w.now += 1801 * 1000LL;
    converge(&w, 4, 5000);
    assert_string_equal(state_of(&w, "node-0"), "failed");
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_REASON), "no answer"));
    world_done(&w);
}

/* A validator that never passes: failed at the validation timeout. */
static void test_validation_timeout(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, AUTO_RESET);
    w.validator_ok = false;
    dbe(&w, 0, 0);
    converge(&w, 8, 5000);
    assert_string_equal(state_of(&w, "node-0"), "validating");
    w.now += 601 * 1000LL;
    converge(&w, 3, 5000);
    assert_string_equal(state_of(&w, "node-0"), "failed");
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_REASON), "validator"));
    world_done(&w);
}

/* A node failing again within the refail window of recovering goes to failed, not around. */
static void test_refail_window(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, AUTO_RESET);
    dbe(&w, 0, 0);
    converge(&w, 12, 5000);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    w.now += 3600 * 1000LL;
    dbe(&w, 0, 4);
    converge(&w, 5, 5000);
    assert_string_equal(state_of(&w, "node-0"), "failed");
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_REASON), "failed again"));
    assert_true(is_cordoned(&w, "node-0"));
    world_done(&w);
}

/* Eviction modes per namespace: immediate, wait (evicted after the timeout), leave. */
static void test_eviction_modes(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1,
               "{\"automatic\":[\"reset-gpu\"],\"eviction\":{\"waitTimeout\":\"60s\","
               "\"namespaces\":{\"batch\":\"wait\",\"infra\":\"leave\"}}}");
    json_array_append_new(w.pods, mk_pod(&w, "batch", "train-0", "node-0", true, NULL));
    json_array_append_new(w.pods, mk_pod(&w, "infra", "probe-0", "node-0", true, NULL));
    dbe(&w, 0, 0);
    converge(&w, 3, 5000);
    assert_string_equal(state_of(&w, "node-0"), "draining");
    assert_false(has_pod(&w, "job-0")); /* immediate */
    assert_true(has_pod(&w, "train-0"));
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_WAITING), "batch/train-0"));
    w.now += 61 * 1000LL;
    converge(&w, 12, 5000);
    assert_false(has_pod(&w, "train-0"));
    assert_true(has_pod(&w, "probe-0")); /* left running */
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    world_done(&w);
}

/* A PodDisruptionBudget that allows nothing holds the drain, until the drain's timeout. */
static void test_pdb_holds_then_times_out(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, "{\"automatic\":[\"reset-gpu\"],\"drainTimeout\":\"10m\"}");
    json_object_set_new(kobj_labels(json_array_get(w.pods, 1)), "job", json_string("a"));
    json_array_append_new(w.pdbs,
                          json_pack("{s:{s:s,s:s},s:{s:{s:{s:s}}},s:{s:i}}", "metadata", "name",
                                    "job-pdb", "namespace", "ml", "spec", "selector", "matchLabels",
                                    "job", "a", "status", "disruptionsAllowed", 0));
    dbe(&w, 0, 0);
    converge(&w, 3, 5000);
    assert_string_equal(state_of(&w, "node-0"), "draining");
    assert_true(has_pod(&w, "job-0"));
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_WAITING), "PodDisruptionBudget job-pdb"));
    w.now += 601 * 1000LL;
    converge(&w, 3, 5000);
    assert_string_equal(state_of(&w, "node-0"), "failed");
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_REASON), "did not finish"));
    world_done(&w);
}

/* The budget: a pool's maxUnavailable and capacity floor, counted as driver upgrades count;
 * faulty nodes are all quarantined, their remediation takes turns. */
static void test_budget_and_floor(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 4, "{\"automatic\":[\"reset-gpu\"],\"breaker\":{\"threshold\":\"100%\"}}");
    w.max_unavailable = json_integer(1);
    w.max_down = 1;
    dbe(&w, 0, 0);
    dbe(&w, 1, 0);
    struct rem_plan *p = round_trip(&w);
    assert_string_equal(state_of(&w, "node-0"), "draining");
    assert_string_equal(state_of(&w, "node-1"), "quarantined");
    assert_non_null(strstr(ann(&w, "node-1", REM_ANN_WAITING), "budget"));
    /* both count against the pool: its rollout holds */
    assert_true(p->pools[0].hold_upgrades);
    size_t nh;
    struct upg_hold *h = rem_plan_holds(p, &nh);
    assert_int_equal(nh, 1);
    assert_string_equal(h[0].pool, "default");
    assert_non_null(strstr(h[0].why, "2 nodes quarantined"));
    free(h);
    rem_plan_free(p);
    converge(&w, 30, 5000);
    assert_int_equal(count_state(&w, "healthy"), 4);
    world_done(&w);

    /* the floor: 32 GPUs, floor 24. Two faults: the first node out leaves 24 ready, so it is
     * remediated; the second would leave 16 and waits for the first to come back. */
    world_init(&w, 4, AUTO_RESET);
    json_array_append_new(w.pools, json_pack("{s:{s:s},s:{s:{s:s},s:i,s:{s:[s]}}}", "metadata",
                                             "name", "train", "spec", "nodeSelector",
                                             "nvidia.com/gpu.present", "true", "capacityFloor", 24,
                                             "remediation", "automatic", "reset-gpu"));
    json_object_set_new(kobj_path(json_array_get(w.pools, 0), "spec.remediation"), "breaker",
                        json_pack("{s:s}", "threshold", "100%"));
    dbe(&w, 0, 0);
    dbe(&w, 1, 0);
    p = round_trip(&w);
    rem_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "draining");
    assert_string_equal(state_of(&w, "node-1"), "quarantined");
    assert_non_null(strstr(ann(&w, "node-1", REM_ANN_WAITING), "capacity floor: 16 of 32"));
    w.max_down = 1;
    converge(&w, 20, 5000);
    assert_int_equal(count_state(&w, "healthy"), 4);
    world_done(&w);

    /* a fault that clears before anything is done: checked again, back in service */
    world_init(&w, 2, NULL);
    dbe(&w, 0, 0);
    converge(&w, 4, 5000);
    assert_string_equal(state_of(&w, "node-0"), "quarantined");
    w.agents[0].gpus[0].dbe_volatile = 0;
    w.agents[0].gpus[0].remap_pending = false;
    converge(&w, 8, 5000);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    world_done(&w);
}

/* The breakers: a fault storm on 40% of a pool's nodes quarantines 30% and opens the pool's
 * breaker; a person resets it and the rest are quarantined. */
static void test_pool_breaker(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 10, NULL);
    json_array_append_new(w.pools, json_pack("{s:{s:s,s:{}},s:{s:{s:s},s:{s:{s:s}}}}", "metadata",
                                             "name", "train", "annotations", "spec", "nodeSelector",
                                             "nvidia.com/gpu.present", "true", "remediation",
                                             "breaker", "threshold", "30%"));
    for (int i = 0; i < 4; i++)
        dbe(&w, i, 0);
    struct rem_plan *p = round_trip(&w);
    assert_int_equal(p->counts[REM_QUARANTINED], 3);
    assert_int_equal(p->n_breakers, 1);
    assert_string_equal(p->breakers[0].pool, "train");
    assert_true(has_event(p, NULL, "GPURemediationBreakerOpen", "3 nodes quarantined"));
    assert_false(p->condition.status);
    assert_string_equal(p->condition.reason, "BreakerOpen");
    rem_plan_free(p);
    assert_string_equal(state_of(&w, "node-3"), "healthy"); /* not quarantined */
    assert_non_null(strstr(ann(&w, "node-3", REM_ANN_WAITING), "breaker open"));
    /* more faults: still nothing new */
    dbe(&w, 5, 0);
    converge(&w, 4, 5000);
    assert_int_equal(count_state(&w, "quarantined"), 3);
    /* a person resets it */
    json_t *pool = json_array_get(w.pools, 0);
    char t[32];
    snprintf(t, sizeof(t), "%lld", (long long)w.now);
    json_object_set_new(kobj_path(pool, "metadata.annotations"), REM_ANN_BREAKER_RESET,
                        json_string(t));
    w.now += 1000;
    p = round_trip(&w);
    assert_true(has_event(p, NULL, "GPURemediationBreakerReset", NULL));
    rem_plan_free(p);
    converge(&w, 4, 5000);
    assert_int_equal(count_state(&w, "quarantined"), 5);
    world_done(&w);
}

/* The default pool's breaker (the nodes no pool selects) lives on the cluster's object under a
 * key of its own: it opens once (one update, one Event), stays open over the passes that follow,
 * and the cluster's reset annotation closes it. */
static void test_default_pool_breaker(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 10, "{\"breaker\":{\"threshold\":\"30%\"}}");
    for (int i = 0; i < 4; i++)
        dbe(&w, i, 0);
    struct rem_plan *p = round_trip(&w);
    assert_int_equal(p->counts[REM_QUARANTINED], 3);
    assert_int_equal(p->n_breakers, 1);
    assert_string_equal(p->breakers[0].pool, "default");
    assert_string_equal(p->breakers[0].key, REM_ANN_BREAKER_DEFAULT);
    assert_non_null(p->breakers[0].value);
    assert_true(has_event(p, NULL, "GPURemediationBreakerOpen", "3 nodes quarantined"));
    rem_plan_free(p);
    assert_non_null(json_object_get(w.cluster_anns, REM_ANN_BREAKER_DEFAULT));
    assert_null(json_object_get(w.cluster_anns, REM_ANN_BREAKER)); /* the cluster's is closed */
    /* open from its annotation: no new update or Event, still no new quarantine */
    w.now += 5000;
    p = round_trip(&w);
    assert_int_equal(p->n_breakers, 0);
    assert_false(has_event(p, NULL, "GPURemediationBreakerOpen", NULL));
    assert_string_equal(p->condition.reason, "BreakerOpen");
    rem_plan_free(p);
    assert_string_equal(state_of(&w, "node-3"), "healthy");
    /* the cluster's reset closes it */
    char t[32];
    snprintf(t, sizeof(t), "%lld", (long long)w.now);
    json_object_set_new(w.cluster_anns, REM_ANN_BREAKER_RESET, json_string(t));
    w.now += 1000;
    p = round_trip(&w);
    assert_true(has_event(p, NULL, "GPURemediationBreakerReset", NULL));
    rem_plan_free(p);
    assert_null(json_object_get(w.cluster_anns, REM_ANN_BREAKER_DEFAULT));
    converge(&w, 4, 5000);
    assert_int_equal(count_state(&w, "quarantined"), 4);
    world_done(&w);
}

/* The cluster's breaker counts every pool. */
static void test_cluster_breaker(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 10, NULL);
    json_decref(w.cluster_threshold);
    w.cluster_threshold = NULL; /* the default: 30% */
    for (int i = 0; i < 5; i++) {
        char name[24];
        snprintf(name, sizeof(name), "node-%d", i);
        json_object_set_new(kobj_labels(node_of(&w, name)), "pool", json_string("a"));
    }
    json_array_append_new(w.pools, json_pack("{s:{s:s},s:{s:{s:s},s:{s:{s:s}}}}", "metadata",
                                             "name", "a", "spec", "nodeSelector", "pool", "a",
                                             "remediation", "breaker", "threshold", "100%"));
    for (int i = 0; i < 10; i++)
        dbe(&w, i, 0);
    struct rem_plan *p = round_trip(&w);
    assert_int_equal(p->counts[REM_QUARANTINED], 3); /* 30% of 10 */
    bool cluster = false;
    for (size_t i = 0; i < p->n_breakers; i++)
        cluster |= p->breakers[i].pool == NULL && p->breakers[i].value;
    assert_true(cluster);
    rem_plan_free(p);
    assert_non_null(json_object_get(w.cluster_anns, REM_ANN_BREAKER));
    world_done(&w);
}

/* The planner keeps no memory but the nodes: a new planner (and a restarted agent) at any point
 * of a cycle carries it on to the same end. */
static void test_resume_from_each_state(void **state)
{
    (void)state;
    const char *want[] = {"quarantined", "draining", "remediating", "validating"};
    for (size_t k = 0; k < ARRAY_SIZE(want); k++) {
        struct world w;
        world_init(&w, 1, AUTO_RESET);
        dbe(&w, 0, 0);
        /* hold the cycle at want[k] */
        w.executor = k != 2;
        w.validator_ok = k != 3;
        json_t *job = json_array_get(w.pods, 1);
        if (k == 1) {
            json_object_set_new(kobj_labels(job), "job", json_string("a"));
            json_array_append_new(w.pdbs, json_pack("{s:{s:s,s:s},s:{s:{s:{s:s}}},s:{s:i}}",
                                                    "metadata", "name", "job-pdb", "namespace",
                                                    "ml", "spec", "selector", "matchLabels", "job",
                                                    "a", "status", "disruptionsAllowed", 0));
        }
        if (k == 0) {
            rem_policy_done(&w.pol);
            struct err e = {0};
            assert_int_equal(rem_policy_parse(NULL, "p", &w.pol, &e), 0);
        }
        converge(&w, 8, 5000);
        assert_string_equal(state_of(&w, "node-0"), want[k]);
        /* restart everything: a fresh agent state, the planner as always from the nodes */
        memset(&w.agents[0].st, 0, sizeof(w.agents[0].st));
        json_array_clear(w.pdbs);
        if (k == 0) {
            rem_policy_done(&w.pol);
            struct err e = {0};
            json_t *pj = json_loads(AUTO_RESET, 0, NULL);
            assert_int_equal(rem_policy_parse(pj, "p", &w.pol, &e), 0);
            json_decref(pj);
        }
        w.executor = true;
        w.validator_ok = true;
        /* a validator that stayed Pending is replaced by its DaemonSet when it restarts */
        for (size_t i = 0; i < json_array_size(w.pods); i++) {
            json_t *p = json_array_get(w.pods, i);
            if (streq_ptr(kobj_label(p, "app"), UPG_VALIDATOR_APP))
                json_object_set_new(json_object_get(p, "status"), "phase", json_string("Running"));
        }
        converge(&w, 15, 5000);
        if (strcmp(state_of(&w, "node-0"), "healthy") != 0)
            fail_msg("resumed from %s: ended %s (%s) %s", want[k], state_of(&w, "node-0"),
                     ann(&w, "node-0", REM_ANN_REASON) ?: "",
                     json_dumps(node_of(&w, "node-0"), JSON_COMPACT));
        assert_false(is_cordoned(&w, "node-0"));
        world_done(&w);
    }
}

/* Escalation: a worse fault during the drain makes the action a reboot; without reboot in the
 * policy, the node waits for a person. */
static void test_escalation(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, AUTO_RESET);
    json_object_set_new(kobj_labels(json_array_get(w.pods, 1)), "job", json_string("a"));
    json_array_append_new(w.pdbs,
                          json_pack("{s:{s:s,s:s},s:{s:{s:{s:s}}},s:{s:i}}", "metadata", "name",
                                    "job-pdb", "namespace", "ml", "spec", "selector", "matchLabels",
                                    "job", "a", "status", "disruptionsAllowed", 0));
    dbe(&w, 0, 0);
    converge(&w, 3, 5000);
    assert_string_equal(state_of(&w, "node-0"), "draining");
    lost(&w, 0, 7);
    converge(&w, 4, 5000);
    assert_string_equal(ann(&w, "node-0", REM_ANN_ACTION), "reboot-node");
    assert_string_equal(taint_of(&w, "node-0"), "reboot-node");
    assert_string_equal(state_of(&w, "node-0"), "quarantined");
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_WAITING), "reboot-node needs a person"));
    json_array_clear(w.pdbs);
    set_node_ann(&w, "node-0", REM_ANN_APPROVED, "true");
    converge(&w, 12, 5000);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    assert_int_equal(w.boots[0], 1);
    world_done(&w);
}

/* A closed window holds the drain and the action; the quarantine is at once. */
static void test_window(void **state)
{
    (void)state;
    struct world w;
    /* T0 is a Thursday 10:00 UTC; the window is Saturdays */
    world_init(&w, 1,
               "{\"automatic\":[\"reset-gpu\"],\"windows\":[{\"days\":[\"Sat\"],\"start\":"
               "\"02:00\",\"duration\":\"4h\"}]}");
    dbe(&w, 0, 0);
    struct rem_plan *p = round_trip(&w);
    assert_true(p->requeue_ms > 0);
    rem_plan_free(p);
    assert_string_equal(state_of(&w, "node-0"), "quarantined");
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_WAITING), "maintenance window closed"));
    w.now += (2 * 24 - 10 + 2) * 3600 * 1000LL + 60000; /* Saturday 02:01 */
    converge(&w, 12, 5000);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    world_done(&w);
}

/* Bad input: a state label that is no state, two pools, a policy that does not parse, a health
 * annotation that does not parse; each left alone with the reason, nothing else touched. */
static void test_bad_input(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 4, AUTO_RESET);
    json_object_set_new(kobj_labels(node_of(&w, "node-0")), REM_LABEL_STATE,
                        json_string("rebooting"));
    json_object_set_new(kobj_labels(node_of(&w, "node-1")), "pool", json_string("x"));
    json_array_append_new(w.pools, json_pack("{s:{s:s},s:{s:{s:s}}}", "metadata", "name", "p1",
                                             "spec", "nodeSelector", "pool", "x"));
    json_array_append_new(w.pools, json_pack("{s:{s:s},s:{s:{s:s}}}", "metadata", "name", "p2",
                                             "spec", "nodeSelector", "pool", "x"));
    json_object_set_new(kobj_labels(node_of(&w, "node-2")), "pool", json_string("y"));
    json_array_append_new(w.pools, json_pack("{s:{s:s},s:{s:{s:s},s:{s:b}}}", "metadata", "name",
                                             "p3", "spec", "nodeSelector", "pool", "y",
                                             "remediation", "bogus", 1));
    for (int i = 0; i < 3; i++)
        dbe(&w, i, 0);
    agents(&w);
    set_node_ann(&w, "node-3", GH_ANN_HEALTH, "{not json");
    struct rem_plan *p = plan(&w);
    execute(&w, p);
    assert_true(has_event(p, "node-0", "GPURemediationRefused", "rebooting"));
    assert_true(has_event(p, "node-1", "GPURemediationRefused", "p1 and p2"));
    assert_true(has_event(p, "node-2", "GPURemediationRefused",
                          "spec.remediation: unknown field \"bogus\""));
    assert_non_null(strstr(ann(&w, "node-3", REM_ANN_WAITING), GH_ANN_HEALTH));
    for (int i = 0; i < 4; i++) {
        char name[24];
        snprintf(name, sizeof(name), "node-%d", i);
        assert_false(is_cordoned(&w, name));
    }
    rem_plan_free(p);
    /* the same again: no repeated Event */
    p = plan(&w);
    assert_false(has_event(p, NULL, "GPURemediationRefused", NULL));
    rem_plan_free(p);
    struct rem_input in = {0};
    struct err e = {0};
    assert_int_equal(rem_plan(&in, &p, &e), -EINVAL);
    world_done(&w);
}

/* A person takes a failed node's state label off once it is fixed: what the quarantine left
 * (its taint, its cordon) goes. */
static void test_label_removed_by_a_person(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, AUTO_ALL);
    w.agents[0].gpus[6].remap_failure = true;
    converge(&w, 5, 5000);
    assert_string_equal(state_of(&w, "node-0"), "failed");
    w.agents[0].gpus[6].remap_failure = false;
    json_object_del(kobj_labels(node_of(&w, "node-0")), REM_LABEL_STATE);
    converge(&w, 5, 5000);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    assert_null(taint_of(&w, "node-0"));
    assert_false(is_cordoned(&w, "node-0"));
    world_done(&w);
}

/* A node whose pool turns remediation off is not quarantined. */
static void test_disabled(void **state)
{
    (void)state;
    struct world w;
    world_init(&w, 1, "{\"enabled\":false}");
    dbe(&w, 0, 0);
    converge(&w, 3, 5000);
    assert_string_equal(state_of(&w, "node-0"), "healthy");
    assert_false(is_cordoned(&w, "node-0"));
    assert_non_null(strstr(ann(&w, "node-0", REM_ANN_WAITING), "off"));
    world_done(&w);
}

static void test_policy_parse(void **state)
{
    (void)state;
    static const struct {
        const char *json, *want;
    } bad[] = {
        {"[]", "expected an object"},
        {"{\"bogus\":1}", "bogus"},
        {"{\"enabled\":\"maybe\"}", "enabled"},
        {"{\"automatic\":[\"restart-workload\"]}", "automatic[0]"},
        {"{\"automatic\":[\"replace-hw\"]}", "a person's"},
        {"{\"automatic\":\"reset-gpu\"}", "automatic"},
        {"{\"eviction\":{\"default\":\"now\"}}", "eviction.default"},
        {"{\"eviction\":{\"namespaces\":{\"Bad_NS\":\"wait\"}}}", "not a namespace"},
        {"{\"eviction\":{\"namespaces\":{\"a\":1}}}", "namespaces.a"},
        {"{\"eviction\":{\"waitTimeout\":\"soon\"}}", "waitTimeout"},
        {"{\"eviction\":{\"x\":1}}", "eviction"},
        {"{\"drainTimeout\":\"-1h\"}", "drainTimeout"},
        {"{\"refailWindow\":\"100000h\"}", "at most 10 years"},
        {"{\"validationTimeout\":-5}", "validationTimeout"},
        {"{\"breaker\":{\"threshold\":\"150%\"}}", "breaker.threshold"},
        {"{\"breaker\":{\"window\":\"0s\"}}", "breaker.window"},
        {"{\"windows\":[{\"days\":[\"Funday\"],\"start\":\"02:00\",\"duration\":\"1h\"}]}",
         "windows[0]"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        json_t *v = json_loads(bad[i].json, 0, NULL);
        assert_non_null(v);
        struct rem_policy p;
        struct err e = {0};
        assert_true(rem_policy_parse(v, "spec.remediation", &p, &e) < 0);
        if (!strstr(err_msg(&e), bad[i].want) || !strstr(err_msg(&e), "spec.remediation"))
            fail_msg("%s: \"%s\" does not name %s", bad[i].json, err_msg(&e), bad[i].want);
        json_decref(v);
    }
    const char *ok = "{\"enabled\":true,\"automatic\":[\"reset-gpu\",\"reboot-node\"],"
                     "\"eviction\":{\"default\":\"wait\",\"waitTimeout\":\"5m\","
                     "\"namespaces\":{\"infra\":\"leave\"}},\"drainTimeout\":\"2h\","
                     "\"remediationTimeout\":600,\"validationTimeout\":\"15m\","
                     "\"refailWindow\":\"12h\",\"breaker\":{\"threshold\":3,\"window\":\"30m\"}}";
    json_t *v = json_loads(ok, 0, NULL);
    struct rem_policy p;
    struct err e = {0};
    assert_int_equal(rem_policy_parse(v, "r", &p, &e), 0);
    assert_true(p.automatic[GH_ACT_RESET_GPU]);
    assert_false(p.automatic[GH_ACT_RELOAD_DRIVER]);
    assert_true(p.automatic[GH_ACT_REBOOT_NODE]);
    assert_int_equal(rem_policy_evict_mode(&p, "infra"), REM_EVICT_LEAVE);
    assert_int_equal(rem_policy_evict_mode(&p, "ml"), REM_EVICT_WAIT);
    assert_int_equal(p.evict_wait_s, 300);
    assert_int_equal(p.drain_timeout_s, 7200);
    assert_int_equal(p.remediation_timeout_s, 600);
    assert_int_equal(p.validation_timeout_s, 900);
    assert_int_equal(p.refail_window_s, 43200);
    assert_int_equal(json_integer_value(p.breaker_threshold), 3);
    assert_int_equal(p.breaker_window_s, 1800);
    rem_policy_done(&p);
    json_decref(v);
    /* the defaults: quarantine and report */
    assert_int_equal(rem_policy_parse(NULL, "r", &p, &e), 0);
    assert_true(p.enabled);
    for (int a = 0; a < GH_ACT_COUNT; a++)
        assert_false(p.automatic[a]);
    rem_policy_done(&p);
    for (int s = 0; s < REM_N_STATES; s++)
        assert_int_equal(rem_state_parse(rem_state_name((enum rem_state)s)), s);
    assert_int_equal(rem_state_parse("rebooting"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_states_in_order),
        cmocka_unit_test(test_default_policy_waits_for_a_person),
        cmocka_unit_test(test_admin_cordoned_stays_cordoned),
        cmocka_unit_test(test_node_under_driver_upgrade),
        cmocka_unit_test(test_lost_gpu_reboot),
        cmocka_unit_test(test_reboot_done_annotation),
        cmocka_unit_test(test_replace_hw_fails),
        cmocka_unit_test(test_fault_persists_or_request_fails),
        cmocka_unit_test(test_validation_timeout),
        cmocka_unit_test(test_refail_window),
        cmocka_unit_test(test_eviction_modes),
        cmocka_unit_test(test_pdb_holds_then_times_out),
        cmocka_unit_test(test_budget_and_floor),
        cmocka_unit_test(test_pool_breaker),
        cmocka_unit_test(test_cluster_breaker),
        cmocka_unit_test(test_default_pool_breaker),
        cmocka_unit_test(test_resume_from_each_state),
        cmocka_unit_test(test_escalation),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_disabled),
        cmocka_unit_test(test_label_removed_by_a_person),
        cmocka_unit_test(test_policy_parse),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    compact_run = true;
    return failed + cmocka_run_group_tests_name("compact labels", tests, NULL, NULL);
}
