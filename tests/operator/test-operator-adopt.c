/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop migrate's view of gpuop's objects (adopt_expected, a table) against what the operator
 * renders (op_render), for NVIDIA's reference ClusterPolicy (tests/adopt/fixtures) and variants
 * of it: the same objects by kind, name and namespace, the same DaemonSet selectors and template
 * labels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adopt.h"
#include "kobj.h"
#include "operator.h"
#include "yamlcfg.h"

static json_t *ref_policy(void)
{
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    _cleanup_free_ char *path =
        xasprintf("%s/tests/adopt/fixtures/nvidia-v24.9.2.yaml", src ? src : ".");
    _cleanup_json_ json_t *f = NULL;
    struct err e = {0};
    if (yaml_load_file(path, &f, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return json_deep_copy(json_object_get(f, "policy"));
}

static char *key(const json_t *o)
{
    const char *ns = kobj_namespace(o);
    return xasprintf("%s %s/%s", kobj_kind(o), ns ? ns : "", kobj_name(o));
}

static void compare(const char *variant, const char *spec_yaml)
{
    _cleanup_json_ json_t *cp = ref_policy();
    struct err e = {0};
    if (spec_yaml) {
        _cleanup_json_ json_t *m = NULL;
        if (yaml_parse_one(spec_yaml, strlen(spec_yaml), variant, &m, &e) < 0)
            fail_msg("%s", err_msg(&e));
        const char *k;
        json_t *v;
        json_object_foreach (m, k, v) {
            json_t *sec = json_object_get(json_object_get(cp, "spec"), k);
            if (json_is_object(sec) && json_is_object(v))
                json_object_update(sec, v);
            else
                json_object_set(json_object_get(cp, "spec"), k, v);
        }
    }
    struct op_defaults d = {"gpu-operator", "registry.example.com/gpuop:1"};
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    _cleanup_json_ json_t *objs = NULL, *want = NULL;
    if (op_policy_parse(cp, &d, &p, &e) < 0 || op_templates_builtin(&t, &e) < 0)
        fail_msg("%s: %s", variant, err_msg(&e));
    struct op_render_ctx ctx = {.os_tag = "ubuntu22.04"};
    if (op_render(p, t, &ctx, &objs, &e) < 0 || adopt_expected(cp, "gpu-operator", &want, &e) < 0)
        fail_msg("%s: %s", variant, err_msg(&e));
    size_t i, j;
    json_t *o, *w;
    /* With NVIDIADrivers the plan drops the ClusterPolicy's own driver DaemonSet (op_plan; the
     * NVIDIADrivers' DaemonSets are named per NVIDIADriver): what the operator applies. */
    if (p->use_nvidia_driver_crd) {
        json_array_foreach (objs, i, o) {
            if (streq_ptr(kobj_kind(o), "DaemonSet") &&
                streq_ptr(kobj_name(o), "nvidia-driver-daemonset")) {
                json_array_remove(objs, i);
                break;
            }
        }
    }
    json_array_foreach (objs, i, o) {
        /* NVIDIA's policy sets app.kubernetes.io/managed-by=gpu-operator among
         * daemonsets.labels: gpuop's pods still say gpuop, or the takeover could not tell them
         * from NVIDIA's; the policy's other labels pass */
        if (streq_ptr(kobj_kind(o), "DaemonSet")) {
            json_t *tl = kobj_path(o, "spec.template.metadata.labels");
            const char *mb = json_string_value(json_object_get(tl, "app.kubernetes.io/managed-by"));
            if (mb && !streq_ptr(mb, "gpuop"))
                fail_msg("%s: %s's pods are labelled managed-by %s", variant, kobj_name(o), mb);
            if (!json_object_get(tl, "helm.sh/chart"))
                fail_msg("%s: %s's pods lack the policy's helm.sh/chart label", variant,
                         kobj_name(o));
        }
        _cleanup_free_ char *k = key(o);
        bool found = false;
        json_array_foreach (want, j, w) {
            _cleanup_free_ char *kw = key(w);
            if (strcmp(k, kw) != 0)
                continue;
            found = true;
            if (streq_ptr(kobj_kind(o), "DaemonSet") &&
                (!json_equal(kobj_path(o, "spec.selector"), kobj_path(w, "spec.selector")) ||
                 !kobj_labels_match(kobj_path(w, "spec.template.metadata.labels"),
                                    kobj_path(o, "spec.template.metadata.labels"))))
                fail_msg("%s: %s: selector or template labels differ from adopt's table", variant,
                         k);
        }
        if (!found)
            fail_msg("%s: the operator renders %s, adopt's table lacks it", variant, k);
    }
    if (json_array_size(objs) != json_array_size(want))
        fail_msg("%s: the operator renders %zu objects, adopt's table has %zu", variant,
                 json_array_size(objs), json_array_size(want));
}

static void test_reference(void **state)
{
    (void)state;
    compare("the reference", NULL);
}

static void test_variants(void **state)
{
    (void)state;
    compare("nodeStatusExporter on", "nodeStatusExporter: {enabled: true}");
    compare("migManager off", "migManager: {enabled: false}");
    compare("driver off", "driver: {enabled: false}");
    compare("NVIDIADrivers", "driver: {useNvidiaDriverCRD: true}");
    compare("a runtime class of its own", "operator: {runtimeClass: nvidia-gpu}");
    compare("dcgmExporter, gfd and toolkit off",
            "{dcgmExporter: {enabled: false}, gfd: {enabled: false}, toolkit: {enabled: false}}");
    compare("dcgm on (gpuop deploys none)", "dcgm: {enabled: true}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_variants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
