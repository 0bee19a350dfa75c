/* SPDX-License-Identifier: Apache-2.0 */
/* The capacity-and-quota view, table-tested: over-commit, a namespace without quota, MIG
 * resources, a pool shrinking, nodes with unhealthy GPUs (and NotReady, cordoned) excluded
 * from advertised, finished pods not counted, configured pools; its JSON form (golden files);
 * DRA nodes, claims and quotas counted in the same names. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../unit/compact-nodes.h"
#include "capacity.h"
#include "kobj.h"
#include "nodestate.h"

#define H100 "NVIDIA-H100-80GB-HBM3"
#define L4   "NVIDIA-L4"
#define A100 "NVIDIA-A100-SXM4-80GB"

/* A GPU node: product label, nvidia.com/gpu capacity and allocatable. */
static json_t *node(const char *name, const char *product, int cap, int alloc)
{
    return json_pack("{s:s,s:{s:s,s:{s:s,s:s}},s:{},s:{s:{s:I},s:{s:I},s:[{s:s,s:s}]}}", "kind",
                     "Node", "metadata", "name", name, "labels", "nvidia.com/gpu.product", product,
                     "nvidia.com/gpu.present", "true", "spec", "status", "capacity",
                     "nvidia.com/gpu", (json_int_t)cap, "allocatable", "nvidia.com/gpu",
                     (json_int_t)alloc, "conditions", "type", "Ready", "status", "True");
}

/* A pod in ns requesting gpus of resource res, pinned to product (NULL: anywhere), scheduled
 * on node_name (NULL: pending), in phase (NULL: Running). */
static json_t *pod(const char *ns, const char *name, const char *res, int gpus, const char *product,
                   const char *node_name, const char *phase)
{
    json_t *p =
        json_pack("{s:s,s:{s:s,s:s},s:{s:[{s:s,s:{s:{s:I}}}]},s:{s:s}}", "kind", "Pod", "metadata",
                  "name", name, "namespace", ns, "spec", "containers", "name", "c", "resources",
                  "limits", res, (json_int_t)gpus, "status", "phase", phase ? phase : "Running");
    json_t *spec = json_object_get(p, "spec");
    if (product)
        json_object_set_new(spec, "nodeSelector",
                            json_pack("{s:s}", "nvidia.com/gpu.product", product));
    if (node_name)
        json_object_set_new(spec, "nodeName", json_string(node_name));
    return p;
}

/* A ResourceQuota on requests.<res> with its status as the quota controller writes it. */
static json_t *quota(const char *ns, const char *name, const char *res, int hard, int used)
{
    char key[128], h[32], u[32];
    snprintf(key, sizeof(key), "requests.%s", res);
    snprintf(h, sizeof(h), "%d", hard);
    snprintf(u, sizeof(u), "%d", used);
    return json_pack("{s:s,s:{s:s,s:s},s:{s:{s:s}},s:{s:{s:s},s:{s:s}}}", "kind", "ResourceQuota",
                     "metadata", "name", name, "namespace", ns, "spec", "hard", key, h, "status",
                     "hard", key, h, "used", key, u);
}

#define QUOTA(ns, name, res, hard, used) quota(ns, name, res, hard, used)

/* The two-pool cluster of the guide: 2 H100 nodes of 8, 2 L4 nodes of 4; training pinned to
 * the H100s (quota 16), serving to the L4s (quota 8), research (quota 8) with no pods yet. */
struct cluster {
    json_t *nodes, *pods, *quotas;
};

static void cluster_init(struct cluster *c)
{
    c->nodes = json_pack("[o,o,o,o]", node("h100-a", H100, 8, 8), node("h100-b", H100, 8, 8),
                         node("l4-a", L4, 4, 4), node("l4-b", L4, 4, 4));
    c->pods = json_pack("[o,o,o,o]",
                        pod("training", "train-0", "nvidia.com/gpu", 8, H100, "h100-a", NULL),
                        pod("training", "train-1", "nvidia.com/gpu", 4, H100, NULL, "Pending"),
                        pod("serving", "serve-0", "nvidia.com/gpu", 2, L4, "l4-a", NULL),
                        pod("serving", "old", "nvidia.com/gpu", 4, L4, "l4-b", "Succeeded"));
    c->quotas = json_pack("[o,o]", QUOTA("training", "gpus", "nvidia.com/gpu", 16, 12),
                          QUOTA("serving", "gpus", "nvidia.com/gpu", 8, 2));
}

static void cluster_clear(struct cluster *c)
{
    json_decref(c->nodes);
    json_decref(c->pods);
    json_decref(c->quotas);
}

/* The second run of every test computes from the nodes as the operator's node informer keeps
 * them (labels compact; kept to the end: a view may borrow from them) and must come out the
 * same. */
static bool compact_run;
static json_t *compact_kept, *compact_intern;

static const json_t *informer_view(const json_t *nodes)
{
    if (!compact_run)
        return nodes;
    json_t *c = test_compact_nodes(nodes, compact_intern);
    json_array_append_new(compact_kept, c);
    return c;
}

static struct cap_view *compute(const struct cluster *c, const struct cap_pool_def *pools,
                                size_t n_pools, double ratio)
{
    struct cap_input in = {.nodes = informer_view(c->nodes),
                           .pods = c->pods,
                           .quotas = c->quotas,
                           .pools = pools,
                           .n_pools = n_pools,
                           .overcommit_ratio = ratio};
    struct cap_view *v = NULL;
    struct err e = {0};
    if (cap_view_compute(&in, &v, &e) < 0)
        fail_msg("cap_view_compute: %s", err_msg(&e));
    return v;
}

static const struct cap_resource *resource(const struct cap_view *v, const char *name)
{
    for (size_t i = 0; i < v->n_resources; i++)
        if (strcmp(v->resources[i].name, name) == 0)
            return &v->resources[i];
    fail_msg("no resource %s", name);
    return NULL;
}

static const struct cap_pool_resource *pool_res(const struct cap_view *v, const char *pool,
                                                const char *res)
{
    for (size_t p = 0; p < v->n_pools; p++)
        if (strcmp(v->pools[p].name, pool) == 0)
            for (size_t r = 0; r < v->pools[p].n_res; r++)
                if (strcmp(v->pools[p].res[r].name, res) == 0)
                    return &v->pools[p].res[r];
    fail_msg("no pool %s resource %s", pool, res);
    return NULL;
}

static const struct cap_namespace *ns(const struct cap_view *v, const char *name)
{
    for (size_t i = 0; i < v->n_namespaces; i++)
        if (strcmp(v->namespaces[i].name, name) == 0)
            return &v->namespaces[i];
    fail_msg("no namespace %s", name);
    return NULL;
}

/* The view's JSON form, as `gpuop status -o json` shows it. */
static char *render(const struct cap_view *v)
{
    json_t *j = cap_view_to_json(v);
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(j);
    assert_non_null(text);
    return text;
}

static void golden(const char *name, const char *text)
{
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    assert_non_null(src);
    _cleanup_free_ char *path = xasprintf("%s/tests/capacity/golden/%s", src, name);
    struct err e = {0};
    if (getenv("GPUOP_UPDATE_GOLDEN"))
        assert_int_equal(file_write_atomic(path, text, strlen(text), 0644, &e), 0);
    char *want = NULL;
    size_t n = 0;
    if (file_read_all(path, 1 << 20, &want, &n, &e) < 0)
        fail_msg("%s", err_msg(&e));
    if (strcmp(want, text) != 0)
        fail_msg("%s differs (GPUOP_UPDATE_GOLDEN=1 rewrites it):\n%s", name, text);
    free(want);
}

/* Balanced: 24 promised of 24 advertised; each team pinned to its pool; the finished pod and
 * the pending one count where they should. */
static void test_balanced(void **state)
{
    (void)state;
    struct cluster c;
    cluster_init(&c);
    _cleanup_(cap_view_freep) struct cap_view *v = compute(&c, NULL, 0, 0);
    assert_true(v->threshold == 1.0);
    assert_int_equal(v->n_resources, 1);
    const struct cap_resource *g = resource(v, "nvidia.com/gpu");
    assert_int_equal(g->total.physical, 24);
    assert_int_equal(g->total.advertised, 24);
    assert_int_equal(g->total.requested, 10); /* 8 + 2 scheduled, the finished pod not */
    assert_int_equal(g->total.quota, 24);
    assert_true(fabs(g->ratio - 1.0) < 1e-9);
    assert_false(g->over);
    assert_int_equal(v->n_pools, 2);
    const struct cap_pool_resource *h = pool_res(v, H100, "nvidia.com/gpu");
    assert_int_equal(h->a.advertised, 16);
    assert_int_equal(h->pinned, 16);
    assert_int_equal(h->n_pinned_ns, 1);
    assert_string_equal(h->pinned_ns[0], "training");
    assert_false(h->short_);
    const struct cap_namespace *t = ns(v, "training");
    assert_int_equal(t->n_pools, 1);
    assert_string_equal(t->pools[0], H100);
    assert_int_equal(t->res[0].hard, 16);
    assert_int_equal(t->res[0].used, 12);
    assert_int_equal(t->res[0].requested, 12); /* the pending pod counts for its namespace */
    assert_false(t->no_quota);
    _cleanup_free_ char *text = render(v);
    golden("balanced.json", text);
    cluster_clear(&c);
}

/* A research quota with no pods lands anywhere: 32 promised of 24 is over-committed, no pool
 * is short (research is pinned nowhere); a ratio of 1.5 tolerates it. */
static void test_overcommit(void **state)
{
    (void)state;
    struct cluster c;
    cluster_init(&c);
    json_array_append_new(c.quotas, QUOTA("research", "gpus", "nvidia.com/gpu", 8, 0));
    _cleanup_(cap_view_freep) struct cap_view *v = compute(&c, NULL, 0, 0);
    const struct cap_resource *g = resource(v, "nvidia.com/gpu");
    assert_int_equal(g->total.quota, 32);
    assert_true(fabs(g->ratio - 32.0 / 24.0) < 1e-9);
    assert_true(g->over);
    const struct cap_namespace *r = ns(v, "research");
    assert_int_equal(r->n_pools, 2);
    assert_false(pool_res(v, H100, "nvidia.com/gpu")->short_);
    assert_int_equal(pool_res(v, H100, "nvidia.com/gpu")->a.quota, 24); /* 16 + research's 8 */
    cap_view_free(v);
    v = compute(&c, NULL, 0, 1.5);
    assert_false(resource(v, "nvidia.com/gpu")->over);
    cluster_clear(&c);
}

/* An H100 node is lost: 16 pinned to a pool advertising 8 is short, naming training; the
 * total ratio passes 1. */
static void test_pool_shrinks(void **state)
{
    (void)state;
    struct cluster c;
    cluster_init(&c);
    json_array_remove(c.nodes, 1);
    _cleanup_(cap_view_freep) struct cap_view *v = compute(&c, NULL, 0, 0);
    const struct cap_resource *g = resource(v, "nvidia.com/gpu");
    assert_int_equal(g->total.advertised, 16);
    assert_true(g->over);
    const struct cap_pool_resource *h = pool_res(v, H100, "nvidia.com/gpu");
    assert_int_equal(h->a.advertised, 8);
    assert_true(h->short_);
    assert_string_equal(h->pinned_ns[0], "training");
    assert_false(pool_res(v, L4, "nvidia.com/gpu")->short_);
    _cleanup_free_ char *text = render(v);
    golden("node-lost.json", text);
    cluster_clear(&c);
}

/* Nodes that cannot take GPU pods keep their physical GPUs but advertise none: an unhealthy
 * GPU (allocatable below capacity), a gpu-count mismatch, NotReady, cordoned. */
static void test_unhealthy_excluded(void **state)
{
    (void)state;
    struct cluster c;
    cluster_init(&c);
    json_t *n;
    /* h100-a: one GPU unhealthy */
    n = json_array_get(c.nodes, 0);
    json_object_set_new(json_object_get(json_object_get(n, "status"), "allocatable"),
                        "nvidia.com/gpu", json_integer(7));
    /* h100-b: the node status exporter reports a mismatch */
    n = json_array_get(c.nodes, 1);
    struct nodestate_gpu_count gc = {.physical = 8,
                                     .n_expected = 1,
                                     .n_advertised = 1,
                                     .short_ = true,
                                     .mismatch = true,
                                     .n_missing = 1};
    snprintf(gc.expected[0].name, sizeof(gc.expected[0].name), "nvidia.com/gpu");
    gc.expected[0].count = 8;
    snprintf(gc.advertised[0].name, sizeof(gc.advertised[0].name), "nvidia.com/gpu");
    gc.advertised[0].count = 8;
    snprintf(gc.missing[0], sizeof(gc.missing[0]), "GPU-1 (lost)");
    snprintf(gc.since, sizeof(gc.since), "2026-01-01T00:00:00Z");
    _cleanup_free_ char *ann = NULL;
    assert_int_equal(nodestate_gpu_count_render(&gc, &ann), 0);
    json_object_set_new(json_object_get(n, "metadata"), "annotations",
                        json_pack("{s:s}", NODESTATE_ANN_GPU_COUNT, ann));
    /* l4-a NotReady, l4-b cordoned */
    n = json_array_get(c.nodes, 2);
    json_object_set_new(
        json_array_get(json_object_get(json_object_get(n, "status"), "conditions"), 0), "status",
        json_string("False"));
    n = json_array_get(c.nodes, 3);
    json_object_set_new(json_object_get(n, "spec"), "unschedulable", json_true());
    _cleanup_(cap_view_freep) struct cap_view *v = compute(&c, NULL, 0, 0);
    const struct cap_resource *g = resource(v, "nvidia.com/gpu");
    assert_int_equal(g->total.physical, 24);
    assert_int_equal(g->total.advertised, 0);
    assert_true(isinf(g->ratio));
    assert_true(g->over);
    for (size_t p = 0; p < v->n_pools; p++)
        assert_int_equal(v->pools[p].n_excluded, 2);
    assert_string_equal(v->pools[0].excluded[0],
                        "h100-a: unhealthy GPUs: nvidia.com/gpu 7 of 8 allocatable");
    assert_string_equal(v->pools[0].excluded[1],
                        "h100-b: advertises fewer GPUs than it has (GPU-1 (lost))");
    assert_string_equal(v->pools[1].excluded[0], "l4-a: not Ready");
    assert_string_equal(v->pools[1].excluded[1], "l4-b: cordoned");
    json_t *j = cap_view_to_json(v);
    assert_true(json_is_null(
        json_object_get(json_array_get(json_object_get(j, "resources"), 0), "overcommitRatio")));
    json_decref(j);
    cluster_clear(&c);
}

/* GPU pods in a namespace with no GPU quota are flagged; one with a quota is not. */
static void test_namespace_without_quota(void **state)
{
    (void)state;
    struct cluster c;
    cluster_init(&c);
    json_array_append_new(c.pods, pod("adhoc", "nb", "nvidia.com/gpu", 1, NULL, "l4-b", "Running"));
    json_array_append_new(c.pods,
                          pod("adhoc", "cpu", "example.com/fpga", 1, NULL, "l4-b", "Running"));
    _cleanup_(cap_view_freep) struct cap_view *v = compute(&c, NULL, 0, 0);
    const struct cap_namespace *a = ns(v, "adhoc");
    assert_true(a->no_quota);
    assert_int_equal(a->gpu_pods, 1);
    assert_int_equal(a->res[0].hard, -1);
    assert_int_equal(a->res[0].requested, 1);
    assert_int_equal(a->n_pools, 2); /* no selector: both pools offer nvidia.com/gpu */
    assert_false(ns(v, "training")->no_quota);
    cluster_clear(&c);
}

/* MIG: an A100 node in mixed mode advertises 7 1g.10gb slices; a quota of 14 slices is twice
 * that; when the layout changes to 2 3g.40gb the slices' pool is short. Physical follows the
 * gpu-count annotation's expected resources. */
static void test_mig(void **state)
{
    (void)state;
    struct cluster c = {0};
    json_t *n = node("a100-a", A100, 0, 0);
    json_t *st = json_object_get(n, "status");
    json_object_set_new(st, "capacity", json_pack("{s:i}", "nvidia.com/mig-1g.10gb", 7));
    json_object_set_new(st, "allocatable", json_pack("{s:i}", "nvidia.com/mig-1g.10gb", 7));
    struct nodestate_gpu_count gc = {.physical = 1, .n_expected = 1, .n_advertised = 1};
    snprintf(gc.expected[0].name, sizeof(gc.expected[0].name), "nvidia.com/mig-1g.10gb");
    gc.expected[0].count = 7;
    gc.advertised[0] = gc.expected[0];
    _cleanup_free_ char *ann = NULL;
    assert_int_equal(nodestate_gpu_count_render(&gc, &ann), 0);
    json_object_set_new(json_object_get(n, "metadata"), "annotations",
                        json_pack("{s:s}", NODESTATE_ANN_GPU_COUNT, ann));
    c.nodes = json_pack("[o]", n);
    c.pods = json_pack("[o]", pod("infer", "p", "nvidia.com/mig-1g.10gb", 2, A100, "a100-a", NULL));
    c.quotas = json_pack("[o]", QUOTA("infer", "slices", "nvidia.com/mig-1g.10gb", 14, 2));
    _cleanup_(cap_view_freep) struct cap_view *v = compute(&c, NULL, 0, 0);
    const struct cap_resource *m = resource(v, "nvidia.com/mig-1g.10gb");
    assert_int_equal(m->total.physical, 7);
    assert_int_equal(m->total.advertised, 7);
    assert_int_equal(m->total.requested, 2);
    assert_true(fabs(m->ratio - 2.0) < 1e-9);
    assert_true(m->over);
    assert_true(pool_res(v, A100, "nvidia.com/mig-1g.10gb")->short_);
    /* the layout changes: 2 x 3g.40gb; the 1g.10gb slices are gone */
    json_object_set_new(st, "capacity", json_pack("{s:i}", "nvidia.com/mig-3g.40gb", 2));
    json_object_set_new(st, "allocatable", json_pack("{s:i}", "nvidia.com/mig-3g.40gb", 2));
    snprintf(gc.expected[0].name, sizeof(gc.expected[0].name), "nvidia.com/mig-3g.40gb");
    gc.expected[0].count = 2;
    gc.advertised[0] = gc.expected[0];
    free(ann);
    ann = NULL;
    assert_int_equal(nodestate_gpu_count_render(&gc, &ann), 0);
    json_object_set_new(json_object_get(n, "metadata"), "annotations",
                        json_pack("{s:s}", NODESTATE_ANN_GPU_COUNT, ann));
    cap_view_free(v);
    v = compute(&c, NULL, 0, 0);
    assert_int_equal(resource(v, "nvidia.com/mig-1g.10gb")->total.advertised, 0);
    assert_int_equal(resource(v, "nvidia.com/mig-3g.40gb")->total.advertised, 2);
    assert_true(isinf(resource(v, "nvidia.com/mig-1g.10gb")->ratio));
    cluster_clear(&c);
}

/* Configured pools (label selectors) instead of products; nodes matching none are "(no pool)";
 * bad definitions are refused with the reason. */
static void test_configured_pools(void **state)
{
    (void)state;
    struct cluster c;
    cluster_init(&c);
    json_object_set_new(kobj_labels(json_array_get(c.nodes, 0)), "gpuop.dev/pool",
                        json_string("train"));
    json_object_set_new(kobj_labels(json_array_get(c.nodes, 1)), "gpuop.dev/pool",
                        json_string("train"));
    struct cap_pool_def defs[2] = {0};
    struct err e = {0};
    assert_int_equal(cap_pool_def_parse("training:gpuop.dev/pool=train", &defs[0], &e), 0);
    assert_int_equal(cap_pool_def_parse("inference:nvidia.com/gpu.product=NVIDIA-L4,gpuop.dev/x=y",
                                        &defs[1], &e),
                     0);
    _cleanup_(cap_view_freep) struct cap_view *v = compute(&c, defs, 2, 0);
    /* a configured pool stays in the view with no nodes (it may have lost them all) */
    assert_int_equal(v->n_pools, 3);
    assert_string_equal(v->pools[0].name, "(no pool)"); /* the L4s lack gpuop.dev/x */
    assert_string_equal(v->pools[1].name, "inference");
    assert_int_equal(v->pools[1].n_nodes, 0);
    assert_string_equal(v->pools[2].name, "training");
    assert_string_equal(v->pools[2].selector, "gpuop.dev/pool=train");
    assert_int_equal(pool_res(v, "training", "nvidia.com/gpu")->a.advertised, 16);
    assert_int_equal(pool_res(v, "training", "nvidia.com/gpu")->pinned, 16);
    for (size_t i = 0; i < 2; i++)
        cap_pool_def_clear(&defs[i]);
    struct {
        const char *spec, *msg;
    } bad[] = {
        {"training", "GPU pool \"training\": want NAME:key=value[,key=value...]"},
        {"Bad_Name:a=b", "GPU pool \"Bad_Name:a=b\": the name \"Bad_Name\" is not a DNS label"},
        {"p:novalue", "GPU pool \"p\": \"novalue\" is not key=value"},
        {"p:", "GPU pool \"p\": no key=value selects its nodes"},
        {"p:a=b c", "GPU pool \"p\": \"b c\" is not a label value"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct cap_pool_def d = {0};
        struct err e2 = {0};
        assert_int_equal(cap_pool_def_parse(bad[i].spec, &d, &e2), -EINVAL);
        assert_string_equal(err_msg(&e2), bad[i].msg);
    }
    cluster_clear(&c);
}

static void test_bad_input(void **state)
{
    (void)state;
    json_t *obj = json_object();
    struct cap_input in = {.nodes = obj};
    struct cap_view *v = NULL;
    struct err e = {0};
    assert_int_equal(cap_view_compute(&in, &v, &e), -EINVAL);
    assert_null(v);
    json_decref(obj);
    /* empty cluster: an empty view that renders */
    struct cap_input none = {0};
    assert_int_equal(cap_view_compute(&none, &v, &e), 0);
    assert_int_equal(v->n_resources, 0);
    _cleanup_free_ char *text = render(v);
    assert_non_null(strstr(text, "\"resources\": []"));
    cap_view_free(v);
}

/* ---- DRA ---------------------------------------------------------------------------------- */

/* A node of a DRA pool: product label and gpu.count label, nothing under status.allocatable. */
static json_t *dra_node(const char *name, const char *product, int gpus)
{
    char count[16];
    snprintf(count, sizeof(count), "%d", gpus);
    return json_pack("{s:s,s:{s:s,s:{s:s,s:s,s:s}},s:{},s:{s:[{s:s,s:s}]}}", "kind", "Node",
                     "metadata", "name", name, "labels", "nvidia.com/gpu.product", product,
                     "nvidia.com/gpu.present", "true", "nvidia.com/gpu.count", count, "spec",
                     "status", "conditions", "type", "Ready", "status", "True");
}

/* A device as the DRA plugin publishes it: type gpu (profile NULL) or mig. */
static json_t *dev(const char *name, const char *type, const char *profile)
{
    json_t *d = json_pack("{s:s,s:{s:{s:s}}}", "name", name, "attributes", "type", "string", type);
    if (profile)
        json_object_set_new(json_object_get(d, "attributes"), "profile",
                            json_pack("{s:s}", "string", profile));
    return d;
}

/* The node's slice of driver gpu.nvidia.com, pool named after the node. */
static json_t *slice(const char *node_name, json_t *devices)
{
    return json_pack("{s:s,s:{s:s},s:{s:s,s:s,s:{s:s,s:i},s:o}}", "kind", "ResourceSlice",
                     "metadata", "name", node_name, "spec", "driver", "gpu.nvidia.com", "nodeName",
                     node_name, "pool", "name", node_name, "generation", 1, "devices", devices);
}

/* A pod holding claims (spec.resourceClaims), on node_name, in phase (NULL: Running). */
static json_t *claim_pod(const char *ns, const char *name, const char *node_name, const char *phase)
{
    return json_pack("{s:s,s:{s:s,s:s},s:{s:s,s:[{s:s}],s:[{s:s}]},s:{s:s}}", "kind", "Pod",
                     "metadata", "name", name, "namespace", ns, "spec", "nodeName", node_name,
                     "resourceClaims", "name", "gpu", "containers", "name", "c", "status", "phase",
                     phase ? phase : "Running");
}

/* An allocated claim: devices (NULL-terminated) from the node's pool, reserved for the pods
 * (a comma-separated list, "" for none). */
static json_t *claim(const char *ns, const char *name, const char *node_name, const char *pods,
                     const char *const *devices)
{
    json_t *results = json_array(), *reserved = json_array();
    for (size_t i = 0; devices[i]; i++)
        json_array_append_new(results,
                              json_pack("{s:s,s:s,s:s,s:s}", "request", "gpu", "driver",
                                        "gpu.nvidia.com", "pool", node_name, "device", devices[i]));
    _cleanup_free_ char *list = xstrdup(pods);
    char *save = NULL;
    for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save))
        json_array_append_new(reserved,
                              json_pack("{s:s,s:s,s:s}", "resource", "pods", "name", p, "uid", p));
    return json_pack("{s:s,s:{s:s,s:s},s:{s:{s:{s:o}},s:o}}", "kind", "ResourceClaim", "metadata",
                     "name", name, "namespace", ns, "status", "allocation", "devices", "results",
                     results, "reservedFor", reserved);
}

/* A ResourceQuota of one key, as the quota controller writes it. */
static json_t *quota_key(const char *ns, const char *name, const char *key, int hard, int used)
{
    char h[32], u[32];
    snprintf(h, sizeof(h), "%d", hard);
    snprintf(u, sizeof(u), "%d", used);
    return json_pack("{s:s,s:{s:s,s:s},s:{s:{s:s}},s:{s:{s:s},s:{s:s}}}", "kind", "ResourceQuota",
                     "metadata", "name", name, "namespace", ns, "spec", "hard", key, h, "status",
                     "hard", key, h, "used", key, u);
}

struct dra_cluster {
    json_t *nodes, *pods, *quotas, *slices, *claims, *classes;
};

static void dra_cluster_clear(struct dra_cluster *c)
{
    json_t **all[] = {&c->nodes, &c->pods, &c->quotas, &c->slices, &c->claims, &c->classes};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        json_decref(*all[i]);
        *all[i] = NULL;
    }
}

static struct cap_view *compute_dra(const struct dra_cluster *c)
{
    struct cap_input in = {.nodes = c->nodes,
                           .pods = c->pods,
                           .quotas = c->quotas,
                           .slices = c->slices,
                           .claims = c->claims,
                           .classes = c->classes};
    struct cap_view *v = NULL;
    struct err e = {0};
    if (cap_view_compute(&in, &v, &e) < 0)
        fail_msg("cap_view_compute: %s", err_msg(&e));
    return v;
}

static json_t *gpus(int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "gpu-%d", i);
        json_array_append_new(a, dev(name, "gpu", NULL));
    }
    return a;
}

/* A node whose 8 GPUs only DRA publishes: advertised from its slice, requested from the held
 * claims (a finished pod's and an unreserved one's not), physical from its gpu.count label;
 * cordoned, it is excluded like any node. */
static void test_dra_node(void **state)
{
    (void)state;
    static const char *const two[] = {"gpu-0", "gpu-1", NULL}, *const one[] = {"gpu-2", NULL},
                             *const other[] = {"gpu-3", NULL};
    struct dra_cluster c = {0};
    c.nodes = json_pack("[o]", dra_node("dra-a", H100, 8));
    c.slices = json_pack("[o]", slice("dra-a", gpus(8)));
    c.pods = json_pack("[o,o]", claim_pod("training", "t0", "dra-a", NULL),
                       claim_pod("training", "done", "dra-a", "Succeeded"));
    c.claims = json_pack("[o,o,o]", claim("training", "t0-gpu", "dra-a", "t0", two),
                         claim("training", "done-gpu", "dra-a", "done", one),
                         claim("training", "idle", "dra-a", "", other));
    _cleanup_(cap_view_freep) struct cap_view *v = compute_dra(&c);
    assert_int_equal(v->n_resources, 1);
    const struct cap_resource *g = resource(v, "nvidia.com/gpu");
    assert_int_equal(g->total.physical, 8);
    assert_int_equal(g->total.advertised, 8);
    assert_int_equal(g->total.requested, 2);
    const struct cap_namespace *t = ns(v, "training");
    assert_int_equal(t->gpu_pods, 1);
    assert_true(t->no_quota);
    assert_int_equal(t->res[0].requested, 2);
    assert_int_equal(t->n_pools, 1);
    assert_string_equal(t->pools[0], H100);
    /* without the DRA objects the node offers nothing: the numbers came from them */
    struct cap_input bare = {.nodes = c.nodes, .pods = c.pods};
    struct cap_view *b = NULL;
    struct err e = {0};
    assert_int_equal(cap_view_compute(&bare, &b, &e), 0);
    assert_int_equal(resource(b, "nvidia.com/gpu")->total.advertised, 0);
    assert_int_equal(b->n_namespaces, 0);
    cap_view_free(b);
    /* cordoned: excluded, with the reason */
    json_object_set_new(json_object_get(json_array_get(c.nodes, 0), "spec"), "unschedulable",
                        json_true());
    cap_view_free(v);
    v = compute_dra(&c);
    assert_int_equal(resource(v, "nvidia.com/gpu")->total.advertised, 0);
    assert_int_equal(v->pools[0].n_excluded, 1);
    assert_string_equal(v->pools[0].excluded[0], "dra-a: cordoned");
    dra_cluster_clear(&c);
}

/* A MIG node: MIG devices count as nvidia.com/mig-<profile>; on-demand ones (consuming a GPU's
 * shared counters) as many as the counters hold at once; a vfio device not at all. */
static void test_dra_mig(void **state)
{
    (void)state;
    static const char *const held[] = {"gpu-0-mig-3g40gb-9-0", NULL};
    struct dra_cluster c = {0};
    c.nodes = json_pack("[o]", dra_node("a100-a", A100, 2));
    json_t *fixed =
        json_pack("[o,o,o,o]", dev("gpu-0-mig-3g40gb-9-0", "mig", "3g.40gb"),
                  dev("gpu-0-mig-3g40gb-9-4", "mig", "3g.40gb"),
                  dev("gpu-0-mig-1g10gb-19-6", "mig", "1g.10gb"), dev("vfio-0", "vfio", NULL));
    json_t *on_demand = json_array();
    for (int i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof(name), "gpu-1-mig-1g10gb-19-%d", i);
        json_t *d = dev(name, "mig", "1g.10gb");
        json_object_set_new(d, "consumesCounters",
                            json_pack("[{s:s,s:{s:{s:s},s:{s:s}}}]", "counterSet",
                                      "gpu-1-counter-set", "counters", "memory", "value", "10Gi",
                                      "slots", "value", "1"));
        json_array_append_new(on_demand, d);
    }
    json_t *counters = json_pack("{s:s,s:{s:s},s:{s:s,s:{s:s,s:i},s:[{s:s,s:{s:{s:s},s:{s:s}}}]}}",
                                 "kind", "ResourceSlice", "metadata", "name", "a100-a-counters",
                                 "spec", "driver", "gpu.nvidia.com", "pool", "name", "a100-a",
                                 "generation", 1, "sharedCounters", "name", "gpu-1-counter-set",
                                 "counters", "memory", "value", "80Gi", "slots", "value", "3");
    json_array_extend(fixed, on_demand);
    json_decref(on_demand);
    c.slices = json_pack("[o,o]", counters, slice("a100-a", fixed));
    c.pods = json_pack("[o]", claim_pod("infer", "p", "a100-a", NULL));
    c.claims = json_pack("[o]", claim("infer", "p-gpu", "a100-a", "p", held));
    _cleanup_(cap_view_freep) struct cap_view *v = compute_dra(&c);
    assert_int_equal(resource(v, "nvidia.com/mig-3g.40gb")->total.advertised, 2);
    assert_int_equal(resource(v, "nvidia.com/mig-3g.40gb")->total.requested, 1);
    /* 1 made + 3 of the 4 placements the counters ("slots": 3) hold at once */
    assert_int_equal(resource(v, "nvidia.com/mig-1g.10gb")->total.advertised, 4);
    assert_int_equal(resource(v, "nvidia.com/gpu")->total.physical, 2);
    assert_int_equal(resource(v, "nvidia.com/gpu")->total.advertised, 0);
    assert_int_equal(v->n_resources, 3); /* no resource for the vfio device */
    const struct cap_namespace *n = ns(v, "infer");
    assert_int_equal(n->n_res, 1);
    assert_string_equal(n->res[0].name, "nvidia.com/mig-3g.40gb");
    assert_int_equal(n->res[0].requested, 1);
    dra_cluster_clear(&c);
}

/* A claim two pods share counts once; each pod is a GPU pod of its namespace. A claim whose
 * pods are both finished counts no more. */
static void test_dra_shared_claim(void **state)
{
    (void)state;
    static const char *const one[] = {"gpu-5", NULL};
    struct dra_cluster c = {0};
    c.nodes = json_pack("[o]", dra_node("dra-a", H100, 8));
    c.slices = json_pack("[o]", slice("dra-a", gpus(8)));
    c.pods = json_pack("[o,o]", claim_pod("serving", "a", "dra-a", NULL),
                       claim_pod("serving", "b", "dra-a", NULL));
    c.claims = json_pack("[o]", claim("serving", "shared", "dra-a", "a,b", one));
    _cleanup_(cap_view_freep) struct cap_view *v = compute_dra(&c);
    assert_int_equal(resource(v, "nvidia.com/gpu")->total.requested, 1);
    assert_int_equal(ns(v, "serving")->res[0].requested, 1);
    assert_int_equal(ns(v, "serving")->gpu_pods, 2);
    for (size_t i = 0; i < 2; i++)
        json_object_set_new(json_object_get(json_array_get(c.pods, i), "status"), "phase",
                            json_string("Succeeded"));
    cap_view_free(v);
    v = compute_dra(&c);
    assert_int_equal(resource(v, "nvidia.com/gpu")->total.requested, 0);
    dra_cluster_clear(&c);
}

/* A pod asking nvidia.com/gpu served through the DeviceClass's extended resource: its request
 * counts, the claim Kubernetes made for it does not (once by its annotation, once by the pod's
 * status naming it). */
static void test_dra_extended_resource(void **state)
{
    (void)state;
    static const char *const one[] = {"gpu-1", NULL};
    for (int named_by_pod = 0; named_by_pod < 2; named_by_pod++) {
        struct dra_cluster c = {0};
        c.nodes = json_pack("[o]", dra_node("dra-a", H100, 8));
        c.slices = json_pack("[o]", slice("dra-a", gpus(8)));
        json_t *p = pod("legacy", "old", "nvidia.com/gpu", 1, NULL, "dra-a", NULL);
        json_t *cl = claim("legacy", "old-extended-resources-x7k2p", "dra-a", "old", one);
        if (named_by_pod)
            json_object_set_new(json_object_get(p, "status"), "extendedResourceClaimStatus",
                                json_pack("{s:s,s:[]}", "resourceClaimName",
                                          "old-extended-resources-x7k2p", "requestMappings"));
        else
            json_object_set_new(json_object_get(cl, "metadata"), "annotations",
                                json_pack("{s:s}", CAP_DRA_EXTENDED_ANNOT, "true"));
        c.pods = json_pack("[o]", p);
        c.claims = json_pack("[o]", cl);
        _cleanup_(cap_view_freep) struct cap_view *v = compute_dra(&c);
        assert_int_equal(resource(v, "nvidia.com/gpu")->total.requested, 1);
        assert_int_equal(resource(v, "nvidia.com/gpu")->total.advertised, 8);
        assert_int_equal(ns(v, "legacy")->res[0].requested, 1);
        assert_int_equal(ns(v, "legacy")->gpu_pods, 1);
        dra_cluster_clear(&c);
    }
}

/* DRA quotas: <class>.deviceclass.resource.k8s.io/devices and
 * requests.deviceclass.resource.kubernetes.io/<class> count for the class's resource (the
 * smallest of a namespace's quotas on it); a class whose devices are of several resources
 * (mig.nvidia.com) maps to none. */
static void test_dra_quota(void **state)
{
    (void)state;
    struct dra_cluster c = {0};
    c.nodes = json_pack("[o]", dra_node("dra-a", H100, 8));
    c.slices = json_pack("[o]", slice("dra-a", gpus(8)));
    c.classes = json_pack("[{s:{s:s},s:{s:s}},{s:{s:s},s:{}}]", "metadata", "name",
                          "h100.example.com", "spec", "extendedResourceName", "nvidia.com/gpu",
                          "metadata", "name", "mig.nvidia.com", "spec");
    c.quotas = json_pack(
        "[o,o,o,o,o]",
        quota_key("a", "q", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", 6, 1),
        quota_key("a", "q2", "requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com", 4, 2),
        quota_key("b", "q", "h100.example.com.deviceclass.resource.k8s.io/devices", 6, 0),
        quota_key("c", "q", "mig.nvidia.com.deviceclass.resource.k8s.io/devices", 7, 0),
        quota_key("c", "q2", "count/resourceclaims.resource.k8s.io", 7, 0));
    _cleanup_(cap_view_freep) struct cap_view *v = compute_dra(&c);
    assert_int_equal(v->n_resources, 1);
    const struct cap_resource *g = resource(v, "nvidia.com/gpu");
    assert_int_equal(g->total.quota, 10); /* a: 4 (the smaller), b: 6 */
    assert_true(g->over);                 /* 10 promised of 8 */
    assert_int_equal(ns(v, "a")->res[0].hard, 4);
    assert_int_equal(ns(v, "a")->res[0].used, 2);
    assert_int_equal(ns(v, "b")->res[0].hard, 6);
    assert_int_equal(v->n_namespaces, 2); /* c's quotas are on nothing the view maps */
    assert_int_equal(pool_res(v, H100, "nvidia.com/gpu")->pinned, 10);
    dra_cluster_clear(&c);
}

/* A node moving from the device plugin to DRA publishes its GPUs through both: each counted
 * once; what pods use through either counts. */
static void test_dra_both(void **state)
{
    (void)state;
    static const char *const one[] = {"gpu-7", NULL};
    struct dra_cluster c = {0};
    c.nodes = json_pack("[o]", node("h100-a", H100, 8, 8));
    c.slices = json_pack("[o]", slice("h100-a", gpus(8)));
    c.pods = json_pack("[o,o]", pod("t", "plugin", "nvidia.com/gpu", 2, NULL, "h100-a", NULL),
                       claim_pod("t", "dra", "h100-a", NULL));
    c.claims = json_pack("[o]", claim("t", "dra-gpu", "h100-a", "dra", one));
    _cleanup_(cap_view_freep) struct cap_view *v = compute_dra(&c);
    const struct cap_resource *g = resource(v, "nvidia.com/gpu");
    assert_int_equal(g->total.physical, 8);
    assert_int_equal(g->total.advertised, 8);
    assert_int_equal(g->total.requested, 3);
    assert_int_equal(ns(v, "t")->gpu_pods, 2);
    dra_cluster_clear(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_balanced),
        cmocka_unit_test(test_overcommit),
        cmocka_unit_test(test_pool_shrinks),
        cmocka_unit_test(test_unhealthy_excluded),
        cmocka_unit_test(test_namespace_without_quota),
        cmocka_unit_test(test_mig),
        cmocka_unit_test(test_configured_pools),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_dra_node),
        cmocka_unit_test(test_dra_mig),
        cmocka_unit_test(test_dra_shared_claim),
        cmocka_unit_test(test_dra_extended_resource),
        cmocka_unit_test(test_dra_quota),
        cmocka_unit_test(test_dra_both),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    compact_run = true;
    compact_kept = json_array();
    compact_intern = json_object();
    failed += cmocka_run_group_tests_name("compact labels", tests, NULL, NULL);
    json_decref(compact_kept);
    json_decref(compact_intern);
    return failed;
}
