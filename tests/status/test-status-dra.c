/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop status's DRA section (statusview-dra.c) on a fixture (dra.json): per node the devices the
 * gpu.nvidia.com driver publishes by type, the claims allocated on them with their pods; another
 * driver's slices and results, and claims not allocated, left out; nothing without slices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "statusview.h"

static json_t *load(void)
{
    const char *root = getenv("GPUOP_SOURCE_ROOT");
    _cleanup_free_ char *p = xasprintf("%s/tests/status/dra.json", root ? root : "../..");
    json_error_t je;
    json_t *doc = json_load_file(p, 0, &je);
    if (!doc)
        fail_msg("%s: %s", p, je.text);
    return doc;
}

static char *text_of(const json_t *m)
{
    struct sbuf out;
    sbuf_init(&out, 1u << 20);
    struct st_view v = {0};
    st_dra_text(m, &v, &out);
    assert_int_equal(out.error, 0);
    return out.data ? out.data : xstrdup("");
}

static void test_dra_model(void **state)
{
    (void)state;
    _cleanup_(json_decrefp) json_t *doc = load();
    struct st_objects in = {.slices = json_object_get(doc, "slices"),
                            .claims = json_object_get(doc, "claims")};
    _cleanup_(json_decrefp) json_t *m = st_dra_model(&in);
    json_t *nodes = json_object_get(m, "nodes");
    assert_int_equal(json_array_size(nodes), 2);
    json_t *a = json_array_get(nodes, 0), *h = json_array_get(nodes, 1);
    assert_string_equal(kobj_str(a, "name"), "a100-1"); /* by name */
    assert_int_equal(json_integer_value(json_object_get(a, "devices")), 3);
    assert_int_equal(json_integer_value(kobj_path(a, "types.mig")), 2);
    assert_int_equal(json_integer_value(kobj_path(a, "types.gpu")), 1);
    assert_int_equal(json_integer_value(json_object_get(a, "allocated")), 1);
    json_t *c = json_array_get(json_object_get(a, "claims"), 0);
    assert_string_equal(kobj_str(c, "name"), "shared");
    assert_int_equal(json_array_size(json_object_get(c, "pods")), 2);
    /* the other driver's slice is not counted, nor its result in the claim */
    assert_int_equal(json_integer_value(json_object_get(h, "devices")), 2);
    assert_int_equal(json_integer_value(json_object_get(h, "allocated")), 1);
    c = json_array_get(json_object_get(h, "claims"), 0);
    assert_int_equal(json_array_size(json_object_get(c, "devices")), 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(c, "devices"), 0)),
                        "gpu-1");
    assert_int_equal(json_array_size(json_object_get(h, "claims")), 1);

    _cleanup_free_ char *t = text_of(m);
    assert_non_null(strstr(t, "DRA (gpu.nvidia.com)"));
    assert_non_null(strstr(t, "NODE"));
    assert_non_null(strstr(t, "3 (1 gpu, 2 mig)"));
    assert_non_null(strstr(t, "1/3"));
    assert_non_null(strstr(t, "default/shared: gpu-1-mig-1g10gb-19-0 (pod ts-a, ts-b)"));
    assert_non_null(strstr(t, "ml/train-gpu-x1: gpu-1 (pod train)"));
    assert_null(strstr(t, "nic-0"));
    assert_null(strstr(t, "pending"));
}

/* No slices (no DRA, or a cluster before Kubernetes 1.34): the section says nothing. */
static void test_dra_none(void **state)
{
    (void)state;
    struct st_objects in = {0};
    _cleanup_(json_decrefp) json_t *m = st_dra_model(&in);
    assert_int_equal(json_array_size(json_object_get(m, "nodes")), 0);
    _cleanup_free_ char *t = text_of(m);
    assert_string_equal(t, "");
}

/* The pools' GPU allocation: a pool moving to DRA with its nodes' steps and those waiting, an
 * invalid one with its reason; a pool that never named one left out. */
static void test_alloc(void **state)
{
    (void)state;
    _cleanup_(json_decrefp) json_t *pools = json_loads(
        "[{\"metadata\":{\"name\":\"serving\"},\"status\":{\"gpuAllocation\":{\"target\":"
        "\"dra\",\"nodes\":3,\"onTarget\":1,\"progress\":\"1/3\",\"moving\":[{\"node\":"
        "\"srv-2\",\"step\":\"drain: 1 GPU pod(s) leaving\"}],\"waiting\":[{\"node\":"
        "\"srv-3\",\"why\":\"pool serving: 1 of 3 nodes unavailable (maxUnavailable 1)\"}]}}},"
        "{\"metadata\":{\"name\":\"research\"},\"status\":{\"phase\":\"Done\"}},"
        "{\"metadata\":{\"name\":\"bad\"},\"status\":{\"gpuAllocation\":{\"target\":"
        "\"devicePlugin\",\"progress\":\"0/0\",\"moving\":[],\"waiting\":[],\"error\":"
        "\"DriverUpgradePool bad: spec.gpuAllocation: \\\"Dra\\\": expected devicePlugin or "
        "dra\"}}}]",
        0, NULL);
    assert_non_null(pools);
    struct st_objects in = {.upgrade_pools = pools};
    _cleanup_(json_decrefp) json_t *m = st_alloc_model(&in);
    assert_int_equal(json_array_size(json_object_get(m, "pools")), 2);
    struct sbuf out;
    sbuf_init(&out, 1u << 16);
    struct st_view v = {0};
    st_alloc_text(m, &v, &out);
    assert_int_equal(out.error, 0);
    assert_non_null(out.data);
    assert_non_null(strstr(out.data, "GPU allocation per DriverUpgradePool"));
    assert_non_null(strstr(out.data, "1/3"));
    assert_non_null(strstr(out.data, "srv-2: drain: 1 GPU pod(s) leaving; 1 waiting"));
    assert_non_null(strstr(out.data, "expected devicePlugin or dra"));
    assert_null(strstr(out.data, "research"));
    free(out.data);
    /* no pool with an allocation: nothing */
    struct st_objects none = {0};
    _cleanup_(json_decrefp) json_t *m0 = st_alloc_model(&none);
    sbuf_init(&out, 1024);
    st_alloc_text(m0, &v, &out);
    assert_null(out.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dra_model),
        cmocka_unit_test(test_dra_none),
        cmocka_unit_test(test_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
