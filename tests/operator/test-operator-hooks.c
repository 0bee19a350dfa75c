/* SPDX-License-Identifier: Apache-2.0 */
/* The chart hooks' decisions (op-hooks.h): what apply-crds writes for a CRD, which objects are a
 * release's, and the toolkit's cleanup switch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "kobj.h"
#include "op-hooks.h"
#include "yamlcfg.h"

static json_t *y(const char *s)
{
    json_t *v = NULL;
    struct err e = {0};
    if (yaml_parse_one(s, strlen(s), "test", &v, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return v;
}

#define CRDL(labels, extra)                                                    \
    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"    \
    "metadata: {name: clusterpolicies.nvidia.com, labels: " labels extra "}\n" \
    "spec: {group: nvidia.com, names: {kind: ClusterPolicy, plural: clusterpolicies}}\n"
#define CRD(extra) CRDL("{a: b}", extra)

static void test_crd_check(void **state)
{
    (void)state;
    struct {
        const char *doc, *msg;
    } cases[] = {
        {CRD(""), NULL},
        {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
         "f: apiVersion/kind is v1/ConfigMap, not apiextensions.k8s.io/v1 "
         "CustomResourceDefinition"},
        {"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: "
         "Bad_Name}\nspec: {}\n",
         "f: metadata.name \"Bad_Name\" is not a CRD name"},
        {"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: "
         "a.b}\n",
         "f: CRD a.b has no spec"},
        {"[1]", "f: not an object"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        _cleanup_json_ json_t *d = y(cases[i].doc);
        struct err e = {0};
        int r = op_crd_check(d, "f", &e);
        if (!cases[i].msg) {
            assert_int_equal(r, 0);
            continue;
        }
        assert_int_equal(r, -EINVAL);
        assert_string_equal(err_msg(&e), cases[i].msg);
    }
}

static void test_crd_plan(void **state)
{
    (void)state;
    _cleanup_json_ json_t *desired = y(CRD(""));
    json_t *obj = NULL;
    /* absent: create */
    assert_int_equal(op_crd_plan(desired, NULL, &obj), OP_CRD_CREATE);
    assert_null(obj);
    /* stored the same, plus what others set (a label, an annotation, status): nothing to do */
    _cleanup_json_ json_t *same =
        y(CRDL("{a: b, c: d}", ", resourceVersion: \"7\", annotations: {injector: x}"));
    json_object_set_new(same, "status", y("{acceptedNames: {kind: ClusterPolicy}}"));
    assert_int_equal(op_crd_plan(desired, same, &obj), OP_CRD_UNCHANGED);
    assert_null(obj);
    /* a new field in the spec: replaced at the stored version, others' metadata kept */
    _cleanup_json_ json_t *next = y(CRD(""));
    json_object_set_new(json_object_get(next, "spec"), "scope", json_string("Cluster"));
    assert_int_equal(op_crd_plan(next, same, &obj), OP_CRD_UPDATE);
    assert_non_null(obj);
    assert_string_equal(kobj_resource_version(obj), "7");
    assert_string_equal(kobj_annotation(obj, "injector"), "x");
    assert_string_equal(kobj_label(obj, "c"), "d");
    assert_string_equal(kobj_path_str(obj, "spec.scope"), "Cluster");
    json_decref(obj);
    /* a label of ours changed: replaced */
    _cleanup_json_ json_t *relabelled = y(CRDL("{a: z}", ", resourceVersion: \"8\""));
    assert_int_equal(op_crd_plan(desired, relabelled, &obj), OP_CRD_UPDATE);
    assert_string_equal(kobj_label(obj, "a"), "b");
    json_decref(obj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crd_check),
        cmocka_unit_test(test_crd_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
