/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The takeover planner (src/lib/adopt) on what NVIDIA's GPU Operator v24.9.2 left in a cluster
 * (tests/adopt/fixtures/nvidia-v24.9.2.yaml, written from ../shared/reference's facts): every
 * object's action and why; the node-by-node replacement as pods go and come; then a table with a
 * row for every field of the reference's ClusterPolicy spec, each saying what that field changes
 * in the plan (or that it changes nothing). gpuop's table of its own objects is checked against
 * deploy/operands.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adopt.h"
#include "kobj.h"
#include "yamlcfg.h"

#define NS "gpu-operator"

static json_t *fixture(void)
{
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    _cleanup_free_ char *path =
        xasprintf("%s/tests/adopt/fixtures/nvidia-v24.9.2.yaml", src ? src : ".");
    json_t *f = NULL;
    struct err e = {0};
    if (yaml_load_file(path, &f, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return f;
}

static json_t *y(const char *s)
{
    json_t *v = NULL;
    struct err e = {0};
    if (yaml_parse_one(s, strlen(s), "test", &v, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return v;
}

/* The plan of a fixture (policy, objects, pods, nodes), gpuop's side from adopt_expected(). */
static void plan_of(json_t *f, struct adopt_plan *ret)
{
    json_t *policy = json_object_get(f, "policy");
    _cleanup_json_ json_t *desired = NULL;
    struct err e = {0};
    if (adopt_expected(policy, NS, &desired, &e) < 0)
        fail_msg("%s", err_msg(&e));
    struct adopt_input in = {.ns = NS,
                             .policy = policy,
                             .objects = json_object_get(f, "objects"),
                             .pods = json_object_get(f, "pods"),
                             .nodes = json_object_get(f, "nodes"),
                             .desired = desired};
    if (adopt_plan(&in, ret, &e) < 0)
        fail_msg("%s", err_msg(&e));
}

/* "action Kind/name[@node][!]" per item (! when now), sorted as the plan is. */
static char *lines(const struct adopt_plan *p)
{
    char *out = xstrdup("");
    for (size_t i = 0; i < p->n_items; i++) {
        const struct adopt_item *it = &p->items[i];
        char *n = xasprintf(
            "%s%s %s/%s%s%s%s\n", out, adopt_action_name(it->action), it->kind, it->name,
            it->node ? "@" : "", it->node ? it->node : "",
            it->now && (it->action == ADOPT_REPLACE || it->action == ADOPT_SURGE) ? "!" : "");
        free(out);
        out = n;
    }
    return out;
}

/* cmocka cuts long messages: the plan goes to stderr first. */
#define fail_plan(got, fmt, ...)               \
    do {                                       \
        fprintf(stderr, "the plan:\n%s", got); \
        fail_msg(fmt, __VA_ARGS__);            \
    } while (0)

static bool has_line(const char *all, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = all; (p = strstr(p, line)); p++)
        if ((p == all || p[-1] == '\n') && p[n] == '\n')
            return true;
    return false;
}

static const struct adopt_item *item(const struct adopt_plan *p, const char *kind, const char *name)
{
    for (size_t i = 0; i < p->n_items; i++)
        if (strcmp(p->items[i].kind, kind) == 0 && strcmp(p->items[i].name, name) == 0)
            return &p->items[i];
    return NULL;
}

/* The whole plan for the reference cluster, object by object. */
static const char *const reference_plan[] = {
    /* same names, same selectors: updated in place */
    "adopt ConfigMap/default-mig-parted-config",
    "adopt DaemonSet/nvidia-container-toolkit-daemonset",
    "adopt DaemonSet/nvidia-dcgm-exporter",
    "adopt DaemonSet/nvidia-device-plugin-daemonset",
    "adopt DaemonSet/nvidia-driver-daemonset",
    "adopt DaemonSet/nvidia-mig-manager",
    "adopt RuntimeClass/nvidia",
    "adopt Service/nvidia-dcgm-exporter",
    "adopt ServiceAccount/nvidia-container-toolkit",
    "adopt ServiceAccount/nvidia-dcgm-exporter",
    "adopt ServiceAccount/nvidia-device-plugin",
    "adopt ServiceAccount/nvidia-driver",
    "adopt ServiceAccount/nvidia-gpu-feature-discovery",
    "adopt ServiceAccount/nvidia-mig-manager",
    "adopt ServiceAccount/nvidia-operator-validator",
    /* NVIDIA's selectors have a part-of label gpuop's lack */
    "recreate DaemonSet/gpu-feature-discovery",
    "recreate DaemonSet/nvidia-operator-validator",
    /* node by node, one at a time (maxUnavailable 1): gpu-a100's turn first */
    "replace Pod/gpu-feature-discovery-gpu-a100@gpu-a100!",
    "replace Pod/nvidia-container-toolkit-daemonset-gpu-a100@gpu-a100!",
    "replace Pod/nvidia-dcgm-exporter-gpu-a100@gpu-a100!",
    "replace Pod/nvidia-device-plugin-daemonset-gpu-a100@gpu-a100",
    /* its device plugin surged: gpuop's registers before NVIDIA's goes */
    "surge Pod/gpuop-device-plugin-takeover-gpu-a100@gpu-a100!",
    "replace Pod/nvidia-mig-manager-gpu-a100@gpu-a100!",
    "replace Pod/nvidia-operator-validator-gpu-a100@gpu-a100!",
    "replace Pod/gpu-feature-discovery-gpu-h100@gpu-h100",
    "replace Pod/nvidia-container-toolkit-daemonset-gpu-h100@gpu-h100",
    "replace Pod/nvidia-dcgm-exporter-gpu-h100@gpu-h100",
    "replace Pod/nvidia-device-plugin-daemonset-gpu-h100@gpu-h100",
    "replace Pod/nvidia-mig-manager-gpu-h100@gpu-h100",
    "replace Pod/nvidia-operator-validator-gpu-h100@gpu-h100",
    "replace Pod/gpu-feature-discovery-gpu-l4@gpu-l4",
    "replace Pod/nvidia-container-toolkit-daemonset-gpu-l4@gpu-l4",
    "replace Pod/nvidia-dcgm-exporter-gpu-l4@gpu-l4",
    "replace Pod/nvidia-device-plugin-daemonset-gpu-l4@gpu-l4",
    "replace Pod/nvidia-operator-validator-gpu-l4@gpu-l4",
    /* the driver is never restarted by the takeover */
    "defer Pod/nvidia-driver-daemonset-gpu-a100@gpu-a100",
    "defer Pod/nvidia-driver-daemonset-gpu-h100@gpu-h100",
    "defer Pod/nvidia-driver-daemonset-gpu-l4@gpu-l4",
    /* NVIDIA-only and unused: the MPS control daemon (no MPS-capable node) and its RBAC */
    "remove ClusterRole/nvidia-device-plugin-mps-control-daemon",
    "remove ClusterRoleBinding/nvidia-device-plugin-mps-control-daemon",
    "remove DaemonSet/nvidia-device-plugin-mps-control-daemon",
    "remove Role/nvidia-device-plugin-mps-control-daemon",
    "remove RoleBinding/nvidia-device-plugin-mps-control-daemon",
    "remove ServiceAccount/nvidia-device-plugin-mps-control-daemon",
    /* NVIDIA-only, used by NVIDIA's pods until they are replaced */
    "wait ClusterRole/nvidia-device-plugin",
    "wait ClusterRole/nvidia-driver",
    "wait ClusterRole/nvidia-gpu-feature-discovery",
    "wait ClusterRole/nvidia-mig-manager",
    "wait ClusterRole/nvidia-operator-validator",
    "wait ClusterRoleBinding/nvidia-device-plugin",
    "wait ClusterRoleBinding/nvidia-driver",
    "wait ClusterRoleBinding/nvidia-gpu-feature-discovery",
    "wait ClusterRoleBinding/nvidia-mig-manager",
    "wait ClusterRoleBinding/nvidia-operator-validator",
    "wait ConfigMap/default-gpu-clients",
    "wait ConfigMap/nvidia-container-toolkit-entrypoint",
    "wait ConfigMap/nvidia-device-plugin-entrypoint",
    "wait ConfigMap/nvidia-mig-manager-entrypoint",
    "wait Role/nvidia-container-toolkit",
    "wait Role/nvidia-dcgm-exporter",
    "wait Role/nvidia-device-plugin",
    "wait Role/nvidia-driver",
    "wait Role/nvidia-gpu-feature-discovery",
    "wait Role/nvidia-mig-manager",
    "wait Role/nvidia-operator-validator",
    "wait RoleBinding/nvidia-container-toolkit",
    "wait RoleBinding/nvidia-dcgm-exporter",
    "wait RoleBinding/nvidia-device-plugin",
    "wait RoleBinding/nvidia-driver",
    "wait RoleBinding/nvidia-gpu-feature-discovery",
    "wait RoleBinding/nvidia-mig-manager",
    "wait RoleBinding/nvidia-operator-validator",
    /* not gpuop's to delete */
    "leave Lease/53822513.nvidia.com",
    /* Service gpu-operator (NVIDIA's operator's metrics): NVIDIA-only here; gpu migrate gives
     * it to gpuop's chart, whose Service has that name */
    "remove Service/gpu-operator",
};

static void test_reference_plan(void **state)
{
    (void)state;
    _cleanup_json_ json_t *f = fixture();
    struct adopt_plan p;
    plan_of(f, &p);
    _cleanup_free_ char *got = lines(&p);
    size_t want_n = sizeof(reference_plan) / sizeof(reference_plan[0]);
    for (size_t i = 0; i < want_n; i++)
        if (!has_line(got, reference_plan[i]))
            fail_plan(got, "missing \"%s\" in the plan", reference_plan[i]);
    if (p.n_items != want_n)
        fail_plan(got, "%zu items, want %zu", p.n_items, want_n);
    assert_true(p.holding);
    assert_int_equal(p.max_unavailable, 1);
    assert_int_equal(p.nodes_todo, 2);
    assert_int_equal(p.nodes_in_flight, 0);
    /* reasons name what matters */
    const struct adopt_item *gfd = item(&p, "DaemonSet", "gpu-feature-discovery");
    assert_non_null(strstr(gfd->reason, "selector app=gpu-feature-discovery,"
                                        "app.kubernetes.io/part-of=nvidia-gpu differs from "
                                        "gpuop's app=gpu-feature-discovery"));
    const struct adopt_item *cm = item(&p, "ConfigMap", "nvidia-device-plugin-entrypoint");
    assert_string_equal(
        cm->reason, "mounted by 3 NVIDIA operand pod(s) (nvidia-device-plugin-daemonset-gpu-a100)");
    const struct adopt_item *rb = item(&p, "ClusterRoleBinding", "nvidia-driver");
    assert_non_null(
        strstr(rb->reason, "binds ServiceAccount nvidia-driver, which 3 NVIDIA pod(s)"));
    _cleanup_free_ char *text = adopt_plan_text(&p);
    assert_non_null(
        strstr(text, "takeover: 15 adopt, 2 recreate, 17 replace, 1 surge, 3 defer, "
                     "7 remove, 28 wait, 1 leave; operands replaced on 1 node(s) at a time (2 to "
                     "do, 0 in flight, 0 done)\n"));
    assert_non_null(strstr(text, "  recreate DaemonSet gpu-operator/gpu-feature-discovery: "));
    adopt_plan_done(&p);
}

/* Marks the pods of a node: NVIDIA's as deleting, or replaced by gpuop's (ready or not). */
enum step { DELETING, GPUOP_STARTING, GPUOP_READY };
static void step_node(json_t *f, const char *node, enum step s)
{
    json_t *pods = json_object_get(f, "pods");
    for (size_t i = json_array_size(pods); i-- > 0;) {
        json_t *p = json_array_get(pods, i);
        if (!streq_ptr(kobj_path_str(p, "spec.nodeName"), node) ||
            streq_ptr(kobj_label(p, "app"), "nvidia-driver-daemonset"))
            continue;
        json_t *meta = json_object_get(p, "metadata");
        if (s == DELETING) {
            if (adopt_is_nvidia_pod(p))
                json_object_set_new(meta, "deletionTimestamp", json_string("2026-01-01T00:00:00Z"));
            continue;
        }
        if (adopt_is_nvidia_pod(p)) {
            /* gone; gpuop's pod of the same app in its place */
            json_t *labels = json_object_get(meta, "labels");
            json_object_set_new(labels, ADOPT_LABEL_MANAGED_BY, json_string(ADOPT_GPUOP_MANAGER));
            json_object_del(meta, "deletionTimestamp");
        }
        if (adopt_is_nvidia_pod(p))
            continue;
        json_object_set_new(json_object_get(p, "status"), "conditions",
                            json_pack("[{s:s,s:s}]", "type", "Ready", "status",
                                      s == GPUOP_READY ? "True" : "False"));
    }
}

/* Node by node: a node in flight holds the next one until gpuop's pods there are Ready. */
static void test_node_by_node(void **state)
{
    (void)state;
    _cleanup_json_ json_t *f = fixture();
    struct adopt_plan p;
    step_node(f, "gpu-a100", DELETING);
    plan_of(f, &p);
    assert_int_equal(p.nodes_in_flight, 1);
    assert_int_equal(p.nodes_todo, 2);
    assert_null(item(&p, "Pod", "nvidia-dcgm-exporter-gpu-a100")); /* going: not planned again */
    assert_false(item(&p, "Pod", "nvidia-dcgm-exporter-gpu-h100")->now);
    adopt_plan_done(&p);
    step_node(f, "gpu-a100", GPUOP_STARTING);
    plan_of(f, &p);
    assert_int_equal(p.nodes_in_flight, 1);
    assert_false(item(&p, "Pod", "nvidia-dcgm-exporter-gpu-h100")->now);
    adopt_plan_done(&p);
    step_node(f, "gpu-a100", GPUOP_READY);
    plan_of(f, &p);
    assert_int_equal(p.nodes_in_flight, 0);
    assert_int_equal(p.nodes_done, 1);
    assert_true(item(&p, "Pod", "nvidia-dcgm-exporter-gpu-h100")->now);
    assert_false(item(&p, "Pod", "nvidia-dcgm-exporter-gpu-l4")->now);
    /* a node whose gpuop pod fails its readiness later counts as unavailable: no new start */
    adopt_plan_done(&p);
    json_t *pods = json_object_get(f, "pods");
    size_t i;
    json_t *pod;
    json_array_foreach (pods, i, pod) {
        if (streq_ptr(kobj_name(pod), "gpu-feature-discovery-gpu-a100"))
            json_object_set_new(json_object_get(pod, "status"), "conditions",
                                json_pack("[{s:s,s:s}]", "type", "Ready", "status", "False"));
    }
    plan_of(f, &p);
    assert_false(item(&p, "Pod", "nvidia-dcgm-exporter-gpu-h100")->now);
    adopt_plan_done(&p);
    json_array_foreach (pods, i, pod) {
        if (streq_ptr(kobj_name(pod), "gpu-feature-discovery-gpu-a100"))
            json_object_set_new(json_object_get(pod, "status"), "conditions",
                                json_pack("[{s:s,s:s}]", "type", "Ready", "status", "True"));
    }
    /* every node done: nothing held, NVIDIA's objects of the replaced operands go; the driver's
     * RBAC stays while NVIDIA's driver pods run */
    for (const char *const *n = (const char *const[]){"gpu-h100", "gpu-l4", NULL}; *n; n++) {
        step_node(f, *n, DELETING);
        step_node(f, *n, GPUOP_READY);
    }
    plan_of(f, &p);
    _cleanup_free_ char *got = lines(&p);
    assert_false(p.holding);
    assert_int_equal(p.nodes_done, 3);
    assert_int_equal(adopt_plan_count(&p, ADOPT_REPLACE), 0);
    const char *const after[] = {
        "remove ConfigMap/nvidia-container-toolkit-entrypoint",
        "remove ConfigMap/default-gpu-clients",
        "remove Role/nvidia-device-plugin",
        "remove RoleBinding/nvidia-device-plugin",
        "remove ClusterRole/nvidia-operator-validator",
        "remove ClusterRoleBinding/nvidia-gpu-feature-discovery",
        "wait Role/nvidia-driver",
        "wait ClusterRoleBinding/nvidia-driver",
        "defer Pod/nvidia-driver-daemonset-gpu-l4@gpu-l4",
    };
    for (size_t k = 0; k < sizeof(after) / sizeof(after[0]); k++)
        if (!has_line(got, after[k]))
            fail_plan(got, "missing \"%s\" once every node is done", after[k]);
    adopt_plan_done(&p);
}

static json_t *find_pod(json_t *f, const char *name)
{
    size_t i;
    json_t *p;
    json_array_foreach (json_object_get(f, "pods"), i, p) {
        if (streq_ptr(kobj_name(p), name))
            return p;
    }
    return NULL;
}

static void plan_at(json_t *f, uint64_t now_ms, struct adopt_plan *ret)
{
    json_t *policy = json_object_get(f, "policy");
    _cleanup_json_ json_t *desired = NULL;
    struct err e = {0};
    assert_int_equal(adopt_expected(policy, NS, &desired, &e), 0);
    struct adopt_input in = {.ns = NS,
                             .policy = policy,
                             .objects = json_object_get(f, "objects"),
                             .pods = json_object_get(f, "pods"),
                             .nodes = json_object_get(f, "nodes"),
                             .desired = desired,
                             .now_ms = now_ms};
    assert_int_equal(adopt_plan(&in, ret, &e), 0);
}

/* The device plugin, surged: gpuop's plugin registers (a pod of its own) before NVIDIA's goes,
 * and goes once the DaemonSet's has been Ready for the settle time. */
static void test_device_plugin_surge(void **state)
{
    (void)state;
    const uint64_t t0 = 1767225600000ull; /* 2026-01-01T00:00:00Z */
    _cleanup_json_ json_t *f = fixture();
    struct adopt_plan p;
    plan_at(f, t0, &p);
    const struct adopt_item *sg = item(&p, "Pod", "gpuop-device-plugin-takeover-gpu-a100");
    assert_non_null(sg);
    assert_int_equal(sg->action, ADOPT_SURGE);
    assert_true(sg->now);
    assert_false(item(&p, "Pod", "nvidia-device-plugin-daemonset-gpu-a100")->now);
    adopt_plan_done(&p);
    /* the surge pod runs, Ready since t0; the node's other NVIDIA pods go */
    json_array_append_new(
        json_object_get(f, "pods"),
        y("kind: Pod\nmetadata: {name: gpuop-device-plugin-takeover-gpu-a100, namespace: "
          "gpu-operator, labels: {app: gpuop-device-plugin-takeover, "
          "app.kubernetes.io/managed-by: gpuop}}\nspec: {nodeName: gpu-a100}\nstatus: {phase: "
          "Running, conditions: [{type: Ready, status: 'True', lastTransitionTime: "
          "'2026-01-01T00:00:00Z'}]}"));
    json_t *pods = json_object_get(f, "pods");
    size_t i;
    json_t *pod;
    json_array_foreach (pods, i, pod) {
        if (streq_ptr(kobj_path_str(pod, "spec.nodeName"), "gpu-a100") &&
            adopt_is_nvidia_pod(pod) &&
            !streq_ptr(kobj_label(pod, "app"), "nvidia-device-plugin-daemonset") &&
            !streq_ptr(kobj_label(pod, "app"), "nvidia-driver-daemonset"))
            json_object_set_new(json_object_get(pod, "metadata"), "deletionTimestamp",
                                json_string("2026-01-01T00:00:00Z"));
    }
    plan_at(f, t0 + 1000, &p);
    assert_int_equal(p.nodes_in_flight, 1);
    assert_null(item(&p, "Pod", "gpuop-device-plugin-takeover-gpu-a100")); /* made already */
    const struct adopt_item *dp = item(&p, "Pod", "nvidia-device-plugin-daemonset-gpu-a100");
    assert_false(dp->now);
    assert_non_null(strstr(dp->reason, "waits for gpuop's surge plugin"));
    assert_false(item(&p, "Pod", "nvidia-dcgm-exporter-gpu-h100")->now); /* a100 holds the slot */
    adopt_plan_done(&p);
    plan_at(f, t0 + ADOPT_SURGE_SETTLE_MS, &p);
    assert_true(item(&p, "Pod", "nvidia-device-plugin-daemonset-gpu-a100")->now);
    adopt_plan_done(&p);
    /* NVIDIA's plugin gone; the DaemonSet's (gpuop's) Ready since t0+10 s */
    json_t *ndp = find_pod(f, "nvidia-device-plugin-daemonset-gpu-a100");
    json_object_set_new(json_object_get(json_object_get(ndp, "metadata"), "labels"),
                        ADOPT_LABEL_MANAGED_BY, json_string(ADOPT_GPUOP_MANAGER));
    json_object_set_new(json_object_get(ndp, "status"), "conditions",
                        y("[{type: Ready, status: 'True', lastTransitionTime: "
                          "'2026-01-01T00:00:10Z'}]"));
    plan_at(f, t0 + 11000, &p);
    sg = item(&p, "Pod", "gpuop-device-plugin-takeover-gpu-a100");
    assert_int_equal(sg->action, ADOPT_WAIT);
    assert_int_equal(p.nodes_in_flight, 1);
    adopt_plan_done(&p);
    plan_at(f, t0 + 10000 + ADOPT_SURGE_SETTLE_MS, &p);
    sg = item(&p, "Pod", "gpuop-device-plugin-takeover-gpu-a100");
    assert_int_equal(sg->action, ADOPT_REMOVE);
    assert_true(sg->now);
    adopt_plan_done(&p);
    /* the surge gone, gpuop's pods Ready: done, and gpu-h100's turn */
    for (i = json_array_size(pods); i-- > 0;) {
        pod = json_array_get(pods, i);
        if (streq_ptr(kobj_name(pod), "gpuop-device-plugin-takeover-gpu-a100"))
            json_array_remove(pods, i);
    }
    step_node(f, "gpu-a100", GPUOP_READY);
    plan_at(f, t0 + 20000, &p);
    assert_int_equal(p.nodes_done, 1);
    assert_int_equal(p.nodes_in_flight, 0);
    sg = item(&p, "Pod", "gpuop-device-plugin-takeover-gpu-h100");
    assert_non_null(sg);
    assert_true(sg->now);
    assert_true(item(&p, "Pod", "nvidia-dcgm-exporter-gpu-h100")->now);
    adopt_plan_done(&p);
}

/*
 * A row per field of the reference ClusterPolicy's spec: the change, merged into the spec, and
 * extra objects or pods it needs (what NVIDIA's operator would have run with it), then lines the
 * plan must have and must not have. A row without either says the field changes nothing in the
 * plan (the whole plan is then compared with the reference's).
 */
struct field_case {
    const char *field;
    const char *spec_merge; /* YAML merged into spec */
    const char *objects;    /* YAML list appended to objects */
    const char *pods;       /* YAML list appended to pods */
    const char *const want[6];
    const char *const not_want[4];
    long long max_unavailable; /* 0: 1 */
};

#define NVREF "ownerReferences: [{kind: ClusterPolicy, name: cluster-policy, controller: true}]"
#define NVPOD(ds, node, app)                                                                       \
    "- kind: Pod\n  metadata: {name: " ds "-" node ", namespace: gpu-operator, labels: {app: " app \
    ", app.kubernetes.io/managed-by: gpu-operator}, ownerReferences: [{kind: DaemonSet, "          \
    "name: " ds ", controller: true, uid: " ds "-uid}]}\n  spec: {nodeName: " node "}\n  "         \
    "status: {phase: Running, conditions: [{type: Ready, status: 'True'}]}\n"

static const struct field_case field_cases[] = {
    {.field = "ccManager", .spec_merge = "ccManager: {enabled: true}"},
    {.field = "cdi", .spec_merge = "cdi: {enabled: false}"},
    {.field = "daemonsets",
     .spec_merge = "daemonsets: {rollingUpdate: {maxUnavailable: 2}}",
     .want = {"surge Pod/gpuop-device-plugin-takeover-gpu-h100@gpu-h100!",
              "replace Pod/nvidia-dcgm-exporter-gpu-h100@gpu-h100!",
              "replace Pod/nvidia-device-plugin-daemonset-gpu-l4@gpu-l4"},
     .max_unavailable = 2},
    {.field = "daemonsets (a percentage of the GPU nodes, rounded up)",
     .spec_merge = "daemonsets: {rollingUpdate: {maxUnavailable: '50%'}}",
     .want = {"surge Pod/gpuop-device-plugin-takeover-gpu-h100@gpu-h100!"},
     .max_unavailable = 2},
    {.field = "daemonsets (OnDelete: still node by node)",
     .spec_merge = "daemonsets: {updateStrategy: OnDelete}",
     .want = {"surge Pod/gpuop-device-plugin-takeover-gpu-a100@gpu-a100!"},
     .not_want = {"surge Pod/gpuop-device-plugin-takeover-gpu-h100@gpu-h100!"}},
    {.field = "dcgm",
     .spec_merge = "dcgm: {enabled: true}",
     .objects = "- kind: DaemonSet\n  metadata: {name: nvidia-dcgm, namespace: gpu-operator, " NVREF
                ", labels: {app: nvidia-dcgm, app.kubernetes.io/managed-by: gpu-operator}}\n"
                "  spec: {selector: {matchLabels: {app: nvidia-dcgm}}}\n",
     .want = {"wait DaemonSet/nvidia-dcgm"}},
    {.field = "dcgmExporter",
     .spec_merge = "dcgmExporter: {enabled: false}",
     .want = {"remove DaemonSet/nvidia-dcgm-exporter", "remove Service/nvidia-dcgm-exporter",
              "wait ServiceAccount/nvidia-dcgm-exporter"},
     .not_want = {"replace Pod/nvidia-dcgm-exporter-gpu-a100@gpu-a100!"}},
    {.field = "devicePlugin",
     .spec_merge = "devicePlugin: {enabled: false}",
     .want = {"remove DaemonSet/nvidia-device-plugin-daemonset",
              "wait ServiceAccount/nvidia-device-plugin"},
     .not_want = {"replace Pod/nvidia-device-plugin-daemonset-gpu-a100@gpu-a100!"}},
    {.field = "driver",
     .spec_merge = "driver: {enabled: false}",
     .want = {"leave DaemonSet/nvidia-driver-daemonset",
              "defer Pod/nvidia-driver-daemonset-gpu-a100@gpu-a100",
              "wait ServiceAccount/nvidia-driver"},
     .not_want = {"adopt DaemonSet/nvidia-driver-daemonset"}},
    {.field = "driver (useNvidiaDriverCRD: NVIDIADrivers' DaemonSets instead)",
     .spec_merge = "driver: {useNvidiaDriverCRD: true}",
     .want = {"leave DaemonSet/nvidia-driver-daemonset",
              "defer Pod/nvidia-driver-daemonset-gpu-l4@gpu-l4",
              "adopt ServiceAccount/nvidia-driver"}},
    {.field = "gdrcopy", .spec_merge = "gdrcopy: {enabled: true}"},
    {.field = "gfd",
     .spec_merge = "gfd: {enabled: false}",
     .want = {"remove DaemonSet/gpu-feature-discovery"},
     .not_want = {"recreate DaemonSet/gpu-feature-discovery",
                  "replace Pod/gpu-feature-discovery-gpu-a100@gpu-a100!"}},
    {.field = "hostPaths", .spec_merge = "hostPaths: {rootFS: /host-root}"},
    {.field = "kataManager", .spec_merge = "kataManager: {enabled: true}"},
    {.field = "mig", .spec_merge = "mig: {strategy: mixed}"},
    {.field = "migManager",
     .spec_merge = "migManager: {enabled: false}",
     .want = {"remove DaemonSet/nvidia-mig-manager", "wait ConfigMap/default-mig-parted-config"},
     .not_want = {"adopt ConfigMap/default-mig-parted-config"}},
    {.field = "nodeStatusExporter",
     .spec_merge = "nodeStatusExporter: {enabled: true}",
     .objects = "- kind: DaemonSet\n  metadata: {name: nvidia-node-status-exporter, namespace: "
                "gpu-operator, " NVREF "}\n  spec: {selector: {matchLabels: {app: "
                "nvidia-node-status-exporter}}}\n",
     .pods = NVPOD("nvidia-node-status-exporter", "gpu-l4", "nvidia-node-status-exporter"),
     .want = {"adopt DaemonSet/nvidia-node-status-exporter",
              "replace Pod/nvidia-node-status-exporter-gpu-l4@gpu-l4"}},
    {.field = "operator",
     .spec_merge = "operator: {runtimeClass: nvidia-gpu}",
     .want = {"leave RuntimeClass/nvidia"},
     .not_want = {"adopt RuntimeClass/nvidia"}},
    {.field = "psa", .spec_merge = "psa: {enabled: true}"},
    {.field = "sandboxDevicePlugin", .spec_merge = "sandboxDevicePlugin: {enabled: true}"},
    {.field = "sandboxWorkloads",
     .spec_merge = "sandboxWorkloads: {enabled: true}",
     .objects = "- kind: DaemonSet\n  metadata: {name: nvidia-vfio-manager, namespace: "
                "gpu-operator, " NVREF "}\n  spec: {selector: {matchLabels: {app: "
                "nvidia-vfio-manager}}}\n",
     .pods = NVPOD("nvidia-vfio-manager", "gpu-l4", "nvidia-vfio-manager"),
     .want = {"leave DaemonSet/nvidia-vfio-manager"}},
    {.field = "toolkit",
     .spec_merge = "toolkit: {enabled: false}",
     .want = {"remove DaemonSet/nvidia-container-toolkit-daemonset",
              "wait ConfigMap/nvidia-container-toolkit-entrypoint"},
     .not_want = {"replace Pod/nvidia-container-toolkit-daemonset-gpu-a100@gpu-a100!"}},
    {.field = "validator",
     .spec_merge = "validator: {plugin: {env: [{name: WITH_WORKLOAD, value: 'true'}]}}"},
    {.field = "vfioManager", .spec_merge = "vfioManager: {enabled: true}"},
    {.field = "vgpuDeviceManager", .spec_merge = "vgpuDeviceManager: {enabled: true}"},
    {.field = "vgpuManager", .spec_merge = "vgpuManager: {enabled: true}"},
};

static void merge_into(json_t *dst, json_t *src)
{
    const char *k;
    json_t *v;
    json_object_foreach (src, k, v) {
        json_t *d = json_object_get(dst, k);
        if (json_is_object(d) && json_is_object(v))
            merge_into(d, v);
        else
            json_object_set(dst, k, v);
    }
}

static void test_every_policy_field(void **state)
{
    (void)state;
    _cleanup_json_ json_t *base = fixture();
    struct adopt_plan bp;
    plan_of(base, &bp);
    _cleanup_free_ char *base_lines = lines(&bp);
    adopt_plan_done(&bp);
    /* every top-level field of the reference spec has a row */
    const char *k;
    json_t *v;
    json_object_foreach (kobj_path(base, "policy.spec"), k, v) {
        bool found = false;
        for (size_t i = 0; i < sizeof(field_cases) / sizeof(field_cases[0]); i++)
            found = found || strncmp(field_cases[i].field, k, strlen(k)) == 0;
        if (!found)
            fail_msg("spec.%s of the reference has no row", k);
    }
    for (size_t i = 0; i < sizeof(field_cases) / sizeof(field_cases[0]); i++) {
        const struct field_case *c = &field_cases[i];
        _cleanup_json_ json_t *f = fixture();
        _cleanup_json_ json_t *m = y(c->spec_merge);
        merge_into(kobj_path(f, "policy.spec"), m);
        if (c->objects) {
            _cleanup_json_ json_t *o = y(c->objects);
            json_array_extend(json_object_get(f, "objects"), o);
        }
        if (c->pods) {
            _cleanup_json_ json_t *o = y(c->pods);
            json_array_extend(json_object_get(f, "pods"), o);
        }
        struct adopt_plan p;
        plan_of(f, &p);
        _cleanup_free_ char *got = lines(&p);
        if (!c->want[0] && !c->not_want[0] && strcmp(got, base_lines) != 0)
            fail_plan(got, "spec.%s changed the plan", c->field);
        for (size_t w = 0; w < 6 && c->want[w]; w++)
            if (!has_line(got, c->want[w]))
                fail_plan(got, "spec.%s: missing \"%s\"", c->field, c->want[w]);
        for (size_t w = 0; w < 4 && c->not_want[w]; w++)
            if (has_line(got, c->not_want[w]))
                fail_plan(got, "spec.%s: unexpected \"%s\"", c->field, c->not_want[w]);
        assert_int_equal(p.max_unavailable, c->max_unavailable ? c->max_unavailable : 1);
        adopt_plan_done(&p);
    }
}

/* The DCGM host engine waits for NVIDIA's exporters, then goes. */
static void test_dcgm_host_engine(void **state)
{
    (void)state;
    _cleanup_json_ json_t *f = fixture();
    _cleanup_json_ json_t *o =
        y("- kind: DaemonSet\n  metadata: {name: nvidia-dcgm, namespace: gpu-operator, " NVREF "}\n"
          "  spec: {selector: {matchLabels: {app: nvidia-dcgm}}}\n");
    json_array_extend(json_object_get(f, "objects"), o);
    struct adopt_plan p;
    plan_of(f, &p);
    assert_int_equal(item(&p, "DaemonSet", "nvidia-dcgm")->action, ADOPT_WAIT);
    adopt_plan_done(&p);
    for (const char *const *n = (const char *const[]){"gpu-a100", "gpu-h100", "gpu-l4", NULL}; *n;
         n++) {
        step_node(f, *n, DELETING);
        step_node(f, *n, GPUOP_READY);
    }
    plan_of(f, &p);
    assert_int_equal(item(&p, "DaemonSet", "nvidia-dcgm")->action, ADOPT_REMOVE);
    adopt_plan_done(&p);
}

/* What is gpuop's, or a Helm release's, is never taken for NVIDIA's leftovers. */
static void test_not_nvidia(void **state)
{
    (void)state;
    _cleanup_json_ json_t *ours = y("kind: ServiceAccount\nmetadata: {name: x, " NVREF
                                    ", labels: {app.kubernetes.io/managed-by: gpuop}}");
    _cleanup_json_ json_t *helm = y("kind: Service\nmetadata: {name: gpu-operator, " NVREF
                                    ", annotations: {meta.helm.sh/release-name: gpuop}}");
    _cleanup_json_ json_t *nv = y("kind: Service\nmetadata: {name: gpu-operator, " NVREF "}");
    _cleanup_json_ json_t *lease = y("kind: Lease\nmetadata: {name: 53822513.nvidia.com}");
    _cleanup_json_ json_t *other = y("kind: Lease\nmetadata: {name: gpuop-operator}");
    assert_false(adopt_is_nvidia(ours));
    assert_false(adopt_is_nvidia(helm));
    assert_true(adopt_is_nvidia(nv));
    assert_true(adopt_is_nvidia(lease));
    assert_false(adopt_is_nvidia(other));
    /* a bad maxUnavailable is refused, naming the field */
    _cleanup_json_ json_t *f = fixture();
    json_object_set_new(json_object_get(kobj_path(f, "policy.spec"), "daemonsets"), "rollingUpdate",
                        y("{maxUnavailable: lots}"));
    _cleanup_json_ json_t *desired = NULL;
    struct err e = {0};
    assert_int_equal(adopt_expected(json_object_get(f, "policy"), NS, &desired, &e), 0);
    struct adopt_input in = {.ns = NS,
                             .policy = json_object_get(f, "policy"),
                             .objects = json_object_get(f, "objects"),
                             .pods = json_object_get(f, "pods"),
                             .nodes = json_object_get(f, "nodes"),
                             .desired = desired};
    struct adopt_plan p;
    assert_int_equal(adopt_plan(&in, &p, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "spec.daemonsets.rollingUpdate.maxUnavailable"));
}

/* adopt_expected's table against deploy/operands: every object of every template, by kind and
 * name, and each DaemonSet's template labels; the selector is app=<name>. */
static void test_table_matches_templates(void **state)
{
    (void)state;
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    _cleanup_json_ json_t *f = fixture();
    json_t *spec = kobj_path(f, "policy.spec");
    json_object_set_new(json_object_get(spec, "nodeStatusExporter"), "enabled", json_true());
    json_object_set_new(json_object_get(spec, "dcgmExporter"), "serviceMonitor",
                        json_pack("{s:b}", "enabled", 1));
    _cleanup_json_ json_t *desired = NULL;
    struct err e = {0};
    assert_int_equal(adopt_expected(json_object_get(f, "policy"), NS, &desired, &e), 0);
    const char *files[] = {"driver",        "container-toolkit",    "operator-validator",
                           "device-plugin", "dcgm-exporter",        "gpu-feature-discovery",
                           "mig-manager",   "node-status-exporter", "runtimeclass"};
    size_t n = 0;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        _cleanup_free_ char *path = xasprintf("%s/deploy/operands/%s.yaml", src, files[i]);
        _cleanup_json_ json_t *docs = NULL;
        if (yaml_load_file_all(path, &docs, &e) < 0)
            fail_msg("%s", err_msg(&e));
        size_t j;
        json_t *d;
        json_array_foreach (docs, j, d) {
            const char *name = kobj_name(d);
            if (streq_ptr(name, "${RUNTIME_CLASS}"))
                name = "nvidia";
            bool found = false;
            size_t k;
            json_t *w;
            json_array_foreach (desired, k, w) {
                if (!streq_ptr(kobj_kind(w), kobj_kind(d)) || !streq_ptr(kobj_name(w), name))
                    continue;
                found = true;
                if (streq_ptr(kobj_kind(d), "DaemonSet")) {
                    assert_true(
                        json_equal(kobj_path(w, "spec.selector"), kobj_path(d, "spec.selector")));
                    assert_true(json_equal(kobj_path(w, "spec.template.metadata.labels"),
                                           kobj_path(d, "spec.template.metadata.labels")));
                }
            }
            if (!found)
                fail_msg("%s %s of %s is not in adopt's table", kobj_kind(d), name, path);
            n++;
        }
    }
    if (n != json_array_size(desired))
        fail_msg("adopt's table has %zu objects, deploy/operands %zu", json_array_size(desired), n);
}

static void test_helm_owned(void **state)
{
    (void)state;
    _cleanup_json_ json_t *o = y("metadata: {name: cluster-policy, annotations: "
                                 "{meta.helm.sh/release-name: gpuop, "
                                 "meta.helm.sh/release-namespace: gpu-operator}}");
    assert_true(adopt_helm_owned(o, "gpuop", "gpu-operator"));
    assert_false(adopt_helm_owned(o, "gpu-operator", "gpu-operator"));
    assert_false(adopt_helm_owned(o, "gpuop", "other"));
    _cleanup_json_ json_t *bare = y("metadata: {name: cluster-policy}");
    assert_false(adopt_helm_owned(bare, "gpuop", "gpu-operator"));
}

static void test_toolkit_cleanup_patch(void **state)
{
    (void)state;
    _cleanup_json_ json_t *ds = y("spec: {template: {spec: {containers: [{name: sidecar}, {name: "
                                  "nvidia-container-toolkit-ctr, env: [{name: A, value: b}]}]}}}");
    _cleanup_json_ json_t *p = adopt_toolkit_cleanup_patch(ds);
    _cleanup_json_ json_t *want =
        y("spec: {template: {spec: {containers: [{name: nvidia-container-toolkit-ctr, env: "
          "[{name: TOOLKIT_CLEANUP, value: \"true\"}]}]}}}");
    assert_true(json_equal(p, want));
    /* on already: nothing to patch */
    _cleanup_json_ json_t *on = y("spec: {template: {spec: {containers: [{name: "
                                  "nvidia-container-toolkit-ctr, env: [{name: TOOLKIT_CLEANUP, "
                                  "value: \"true\"}]}]}}}");
    assert_null(adopt_toolkit_cleanup_patch(on));
    /* not a toolkit DaemonSet (NVIDIA's container is named otherwise): nothing */
    _cleanup_json_ json_t *other = y("spec: {template: {spec: {containers: [{name: x}]}}}");
    assert_null(adopt_toolkit_cleanup_patch(other));
}

static void test_ds_rolled_out(void **state)
{
    (void)state;
    char why[64];
    _cleanup_json_ json_t *done = y("metadata: {generation: 3}\nstatus: {observedGeneration: 3, "
                                    "desiredNumberScheduled: 2, updatedNumberScheduled: 2, "
                                    "numberReady: 2}");
    assert_true(adopt_ds_rolled_out(done, why, sizeof(why)));
    _cleanup_json_ json_t *stale = y("metadata: {generation: 4}\nstatus: {observedGeneration: 3, "
                                     "desiredNumberScheduled: 2, updatedNumberScheduled: 2, "
                                     "numberReady: 2}");
    assert_false(adopt_ds_rolled_out(stale, why, sizeof(why)));
    assert_string_equal(why, "generation 4 not observed yet");
    _cleanup_json_ json_t *rolling = y("metadata: {generation: 4}\nstatus: {observedGeneration: 4, "
                                       "desiredNumberScheduled: 3, updatedNumberScheduled: 1, "
                                       "numberReady: 3}");
    assert_false(adopt_ds_rolled_out(rolling, why, sizeof(why)));
    assert_string_equal(why, "1/3 updated, 3/3 ready");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_plan),     cmocka_unit_test(test_node_by_node),
        cmocka_unit_test(test_every_policy_field), cmocka_unit_test(test_dcgm_host_engine),
        cmocka_unit_test(test_not_nvidia),         cmocka_unit_test(test_table_matches_templates),
        cmocka_unit_test(test_helm_owned),         cmocka_unit_test(test_toolkit_cleanup_patch),
        cmocka_unit_test(test_ds_rolled_out),      cmocka_unit_test(test_device_plugin_surge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
