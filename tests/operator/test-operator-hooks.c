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

/* The files apply-crds reads and the CRDs of one file: empty documents skipped, each checked
 * with its place, nothing of a file with one wrong document. */
static void test_crd_files(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool want;
    } files[] = {{"crds.yaml", true}, {"a.b.yaml", true},  {".hidden.yaml", false},
                 {".yaml", false},    {"crds.yml", false}, {"crds.yaml.bak", false},
                 {"x.yaml~", false},  {"", false}};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (op_crd_file(files[i].name) != files[i].want)
            fail_msg("%s: %d", files[i].name, !files[i].want);
    _cleanup_json_ json_t *out = json_array();
    _cleanup_json_ json_t *docs = json_array();
    json_array_append_new(docs, json_null());
    json_array_append_new(docs, y(CRD("")));
    json_array_append_new(docs, json_object());
    json_array_append_new(docs, y(CRDL("{c: d}", "")));
    struct err e = {0};
    assert_int_equal(op_crds_add(out, docs, "d/a.yaml", &e), 0);
    assert_int_equal(json_array_size(out), 2);
    assert_string_equal(kobj_label(json_array_get(out, 1), "c"), "d");
    json_array_append_new(docs, y("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"));
    assert_int_equal(op_crds_add(out, docs, "d/b.yaml", &e), -EINVAL);
    assert_string_equal(err_msg(&e), "d/b.yaml: document 5: apiVersion/kind is v1/ConfigMap, not "
                                     "apiextensions.k8s.io/v1 CustomResourceDefinition");
    assert_int_equal(json_array_size(out), 2); /* nothing of b.yaml */
}

/* uninstall's options and what it waits for and deletes. */
static void test_uninstall(void **state)
{
    (void)state;
    struct err e = {0};
    const char *crds[] = {"clusterpolicies.nvidia.com", "Bad_Name"};
    assert_int_equal(op_uninstall_check("gpuop", crds, 1, &e), 0);
    assert_int_equal(op_uninstall_check(NULL, crds, 0, &e), -EINVAL);
    assert_string_equal(err_msg(&e), "--release NAME is required");
    assert_int_equal(op_uninstall_check("", crds, 0, &e), -EINVAL);
    assert_int_equal(op_uninstall_check("gpuop", crds, 2, &e), -EINVAL);
    assert_string_equal(err_msg(&e), "--delete-crd \"Bad_Name\": not a CRD name");

    _cleanup_json_ json_t *dep = y("spec: {selector: {matchLabels: {app: gpu-operator, x: y}}}");
    _cleanup_free_ char *sel = op_deployment_pods_selector(dep);
    assert_string_equal(sel, "app=gpu-operator,x=y");
    _cleanup_json_ json_t *bare = y("spec: {selector: {matchLabels: {}}}");
    assert_null(op_deployment_pods_selector(bare));
    assert_null(op_deployment_pods_selector(NULL));

    _cleanup_json_ json_t *dss =
        y("- metadata: {name: tk-a, generation: 2}\n"
          "  status: {observedGeneration: 2, desiredNumberScheduled: 2, updatedNumberScheduled: 2, "
          "numberReady: 2}\n"
          "- metadata: {name: tk-b, generation: 3}\n"
          "  status: {observedGeneration: 3, desiredNumberScheduled: 2, updatedNumberScheduled: 1, "
          "numberReady: 2}\n");
    char why[128];
    assert_string_equal(op_toolkit_pending(dss, why, sizeof(why)), "tk-b");
    assert_string_equal(why, "1/2 updated, 2/2 ready");
    json_array_remove(dss, 1);
    assert_null(op_toolkit_pending(dss, why, sizeof(why)));
    assert_null(op_toolkit_pending(NULL, why, sizeof(why)));

    _cleanup_json_ json_t *pols =
        y("- metadata: {name: mine, annotations: {meta.helm.sh/release-name: gpuop, "
          "meta.helm.sh/release-namespace: gpu-operator}}\n"
          "- metadata: {name: other-ns, annotations: {meta.helm.sh/release-name: gpuop, "
          "meta.helm.sh/release-namespace: elsewhere}}\n"
          "- metadata: {name: by-hand}\n");
    _cleanup_json_ json_t *del = NULL, *keep = NULL;
    op_release_split(pols, "gpuop", "gpu-operator", &del, &keep);
    _cleanup_json_ json_t *want_del = y("[mine]"), *want_keep = y("[other-ns, by-hand]");
    assert_true(json_equal(del, want_del));
    assert_true(json_equal(keep, want_keep));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crd_check),
        cmocka_unit_test(test_crd_plan),
        cmocka_unit_test(test_crd_files),
        cmocka_unit_test(test_uninstall),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
