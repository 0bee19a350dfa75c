/* SPDX-License-Identifier: Apache-2.0 */
/* The capacity-and-quota view, table-tested: over-commit, a namespace without quota, MIG
 * resources, a pool shrinking, nodes with unhealthy GPUs (and NotReady, cordoned) excluded
 * from advertised, finished pods not counted, configured pools; its JSON form (golden files). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

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

static struct cap_view *compute(const struct cluster *c, const struct cap_pool_def *pools,
                                size_t n_pools, double ratio)
{
    struct cap_input in = {.nodes = c->nodes,
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
