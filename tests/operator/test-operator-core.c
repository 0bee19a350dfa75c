/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <unistd.h>

#include "kobj.h"
#include "operator-internal.h"
#include "operator.h"
#include "yamlcfg.h"

static json_t *load_yaml(const char *s)
{
    json_t *v = NULL;
    struct err e = {0};
    if (yaml_parse_one(s, strlen(s), "test", &v, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return v;
}

static json_t *load_policy_file(const char *path)
{
    json_t *v = NULL;
    struct err e = {0};
    if (yaml_load_file(path, &v, &e) < 0)
        fail_msg("%s", err_msg(&e));
    json_object_set_new(json_object_get(v, "metadata"), "uid", json_string("uid-1"));
    return v;
}

/* gpuop's own test ClusterPolicy: what the behaviour tests depend on lives in the tree. */
static json_t *sample_policy(void)
{
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    _cleanup_free_ char *path =
        xasprintf("%s/tests/operator/fixtures/clusterpolicy-full.yaml", src ? src : "../..");
    return load_policy_file(path);
}

/* NVIDIA's sample ClusterPolicy from ../shared, for cross-checks; NULL (the test skips) when the
 * folder is absent, as in a user's clone. */
static json_t *upstream_policy(void)
{
    const char *shared = getenv("GPUOP_SHARED");
    if (!shared)
        return NULL;
    _cleanup_free_ char *path = xasprintf(
        "%s/reference/upstream/gpu-operator_config_samples_v1_clusterpolicy.yaml", shared);
    if (access(path, R_OK) != 0)
        return NULL;
    return load_policy_file(path);
}

static const struct op_defaults defaults = {"gpu-operator", "gpuop:test"};

static void test_schema_loaded(void **state)
{
    (void)state;
    const json_t *s = op_clusterpolicy_schema();
    assert_non_null(json_object_get(json_object_get(s, "properties"), "spec"));
}

/* What NVIDIA's sample and gpuop's own test policy both say. */
static void check_sample_policy(json_t *cp)
{
    struct op_policy *p = NULL;
    struct err e = {0};
    assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), 0);
    assert_string_equal(p->name, "gpu-cluster-policy");
    assert_string_equal(p->mig_strategy, "single");
    assert_true(p->operand[OP_DRIVER].enabled);
    assert_true(p->operand[OP_TOOLKIT].enabled);
    assert_true(p->operand[OP_DEVICE_PLUGIN].enabled);
    assert_true(p->operand[OP_GFD].enabled);
    assert_true(p->operand[OP_MIG_MANAGER].enabled);
    assert_false(p->operand[OP_NODE_STATUS_EXPORTER].enabled);
    assert_false(p->operand[OP_DCGM].enabled); /* accepted, nothing deployed */
    assert_string_equal(p->operand[OP_DEVICE_PLUGIN].image, "gpuop:test");
    /* The sample sets fields gpuop does not act on: they are listed, not dropped. */
    char *s = json_dumps(p->unimplemented, JSON_COMPACT);
    assert_non_null(strstr(s, "spec.operator.use_ocp_driver_toolkit"));
    assert_null(strstr(s, "spec.driver.upgradePolicy")); /* the upgrade controller acts on it */
    assert_non_null(strstr(s, "spec.dcgm"));
    assert_null(strstr(s, "spec.vgpuManager")); /* inert without sandbox workloads */
    assert_null(strstr(s, "spec.devicePlugin.config"));
    free(s);
    op_policy_free(p);
}

static void test_sample_policy(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cp = sample_policy();
    check_sample_policy(cp);
}

/* Cross-check: NVIDIA's own sample parses the same way and renders. */
static void test_upstream_sample(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cp = upstream_policy();
    if (!cp) {
        print_message("NVIDIA's sample ClusterPolicy not found under GPUOP_SHARED: skipped\n");
        skip();
    }
    check_sample_policy(cp);
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), 0);
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    _cleanup_json_ json_t *objs = NULL;
    struct op_render_ctx ctx = {.os_tag = "ubuntu22.04"};
    if (op_render(p, t, &ctx, &objs, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_true(json_array_size(objs) > 0);
}

/* A ClusterPolicy whose pools move nodes to DRA renders the DRA stack beside its own: the
 * kubelet plugin only on the nodes labelled for it, NVIDIA's DeviceClasses; the device plugin
 * and the validator's plugin check stay (a node turns its device plugin off by label). */
static void test_render_dra_nodes(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cp = sample_policy();
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), 0);
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    struct op_render_ctx ctx = {.os_tag = "ubuntu22.04"};
    for (int dra = 0; dra <= 1; dra++) {
        p->dra_nodes = dra;
        _cleanup_json_ json_t *objs = NULL;
        if (op_render(p, t, &ctx, &objs, &e) < 0)
            fail_msg("%s", err_msg(&e));
        const json_t *ds = NULL, *dp = NULL;
        bool classes = false, validation = false;
        size_t i;
        json_t *o;
        json_array_foreach (objs, i, o) {
            if (streq_ptr(kobj_kind(o), "DaemonSet") &&
                streq_ptr(kobj_name(o), "nvidia-dra-driver-gpu-kubelet-plugin"))
                ds = o;
            if (streq_ptr(kobj_kind(o), "DaemonSet") &&
                streq_ptr(kobj_name(o), "nvidia-device-plugin-daemonset"))
                dp = o;
            classes |= streq_ptr(kobj_kind(o), "DeviceClass") &&
                       streq_ptr(kobj_name(o), "gpu.nvidia.com") &&
                       streq_ptr(kobj_path_str(o, "spec.extendedResourceName"), "nvidia.com/gpu");
            if (streq_ptr(kobj_name(o), "nvidia-operator-validator") &&
                streq_ptr(kobj_kind(o), "DaemonSet")) {
                size_t k;
                json_t *ic;
                json_array_foreach (kobj_path(o, "spec.template.spec.initContainers"), k, ic)
                    validation |= streq_ptr(kobj_str(ic, "name"), "plugin-validation");
            }
        }
        assert_true(validation);
        assert_non_null(dp);
        if (!dra) {
            assert_null(ds);
            assert_false(classes);
            continue;
        }
        assert_non_null(ds);
        assert_true(classes);
        _cleanup_free_ char *aff =
            json_dumps(kobj_path(ds, "spec.template.spec.affinity"), JSON_COMPACT);
        assert_non_null(strstr(aff, "{\"key\":\"gpuop.dev/gpu.deploy.dra-kubelet-plugin\","
                                    "\"operator\":\"In\",\"values\":[\"true\"]}"));
        assert_non_null(strstr(aff, "nvidia.com/gpu.present"));
    }
}

#define REQ                                                                             \
    "daemonsets: {}\n  dcgm: {}\n  dcgmExporter: {}\n  devicePlugin: {}\n  gfd: {}\n  " \
    "nodeStatusExporter: {}\n  operator: {}\n  toolkit: {}\n"

static void test_invalid_policy(void **state)
{
    (void)state;
    struct {
        const char *yaml;
        const char *msg;
    } cases[] = {
        {"metadata: {name: x}\nspec:\n  mig: {strategy: bogus}\n  driver: {}\n  " REQ,
         "spec.mig.strategy: unsupported value \"bogus\""},
        {"metadata: {name: x}\nspec:\n  driver: {enabled: \"yes\"}\n  " REQ,
         "spec.driver.enabled: expected a boolean"},
        {"metadata: {name: x}\nspec:\n  driver: {}\n  " REQ "  validator: {env: {a: b}}\n",
         "spec.validator.env: expected an array"},
        {"metadata: {name: x}\nspec:\n  " REQ, "spec.driver: required field is missing"},
        {"spec: {}", "metadata.name is missing"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_json_ json_t *cp = load_yaml(cases[i].yaml);
        struct op_policy *p = NULL;
        struct err e = {0};
        assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), -EINVAL);
        assert_null(p);
        if (!strstr(err_msg(&e), cases[i].msg))
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, err_msg(&e), cases[i].msg);
    }
}

static json_t *labels_patch(const char *labels_yaml, const struct op_policy *p)
{
    _cleanup_json_ json_t *labels = load_yaml(labels_yaml);
    json_t *patch = NULL;
    struct err e = {0};
    assert_int_equal(op_node_labels(labels, p, &patch, &e), 0);
    return patch;
}

/* The node as it will be, read through a label patch (op_label_after and the questions asked
 * of it), answers as the patch merged into a copy of the labels does, in both label forms. */
static void test_node_after(void **state)
{
    (void)state;
    static const char *const label_sets[] = {
        "{}",
        "{feature.node.kubernetes.io/pci-10de.present: 'true'}",
        "{feature.node.kubernetes.io/cpu-model.id: '143', nvidia.com/gpu.present: 'true'}",
        "{nvidia.com/gpu.present: 'true'}",
        "{nvidia.com/gpu.present: 'true', nvidia.com/gpu.deploy.driver: pre-installed}",
        "{nvidia.com/gpu.deploy.operands: 'false', feature.node.kubernetes.io/pci-10de.present: "
        "'true'}",
        "{feature.node.kubernetes.io/pci-0302_10de.present: 'true', nvidia.com/gpu.deploy.driver: "
        "'true', nvidia.com/gpu-operator.driver.owner: pool-a}",
    };
    static const char *const patches[] = {
        "{}",
        "{nvidia.com/gpu.present: null}",
        "{feature.node.kubernetes.io/pci-10de.present: null}",
        "{feature.node.kubernetes.io/pci-10de.present: 'false'}",
        "{feature.node.kubernetes.io/cpu-model.id: null}",
        "{feature.node.kubernetes.io/cpu-model.id: '143'}",
        "{nvidia.com/gpu.deploy.driver: pre-installed}",
        "{nvidia.com/gpu.deploy.driver: null, nvidia.com/gpu.present: 'true'}",
        "{nvidia.com/gpu.deploy.operands: null}",
        "{nvidia.com/gpu.deploy.operands: 'false'}",
        "{nvidia.com/gpu-operator.driver.owner: pool-b}",
        "{nvidia.com/gpu-operator.driver.owner: null}",
    };
    _cleanup_json_ json_t *intern = json_object();
    int differs = 0;
    for (size_t i = 0; i < ARRAY_SIZE(label_sets); i++) {
        _cleanup_json_ json_t *labels = load_yaml(label_sets[i]);
        _cleanup_json_ json_t *compact = kobj_labels_compact(labels, intern);
        assert_non_null(compact);
        for (size_t j = 0; j < ARRAY_SIZE(patches); j++) {
            _cleanup_json_ json_t *patch = load_yaml(patches[j]);
            _cleanup_json_ json_t *after = kobj_merge_patch(labels, patch);
            const json_t *forms[] = {labels, compact};
            for (size_t f = 0; f < ARRAY_SIZE(forms); f++) {
                const char *what = f ? "compact" : "object";
                if (op_node_is_gpu_after(forms[f], patch) != op_node_is_gpu(after))
                    fail_msg("labels %zu, patch %zu (%s): is_gpu", i, j, what);
                if (op_node_runs_driver_after(forms[f], patch) != op_node_runs_driver(after))
                    fail_msg("labels %zu, patch %zu (%s): runs_driver", i, j, what);
                const char *keys[] = {OP_LABEL_DRIVER_OWNER, OP_LABEL_GPU_PRESENT,
                                      "feature.node.kubernetes.io/cpu-model.id"};
                for (size_t k = 0; k < ARRAY_SIZE(keys); k++)
                    if (!streq_ptr(op_label_after(forms[f], patch, keys[k]),
                                   kobj_labels_get(after, keys[k])))
                        fail_msg("labels %zu, patch %zu (%s): %s", i, j, what, keys[k]);
            }
            differs += op_node_is_gpu(labels) != op_node_is_gpu(after) ||
                       op_node_runs_driver(labels) != op_node_runs_driver(after);
        }
    }
    /* the table has patches that change the answers, not only ones that keep them */
    assert_true(differs >= 8);
}

static void test_node_labels(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cp = sample_policy();
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    struct err e = {0};
    assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), 0);

    /* A new NFD-labelled H100 node gets presence, every deploy label and the MIG default. */
    _cleanup_json_ json_t *a =
        labels_patch("feature.node.kubernetes.io/pci-10de.present: \"true\"\n"
                     "nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3\n",
                     p);
    assert_string_equal(json_string_value(json_object_get(a, "nvidia.com/gpu.present")), "true");
    for (int c = 0; c < OP_N_COMPONENTS; c++)
        assert_string_equal(
            json_string_value(json_object_get(a, op_component_def(c)->deploy_label)), "true");
    assert_string_equal(json_string_value(json_object_get(a, "nvidia.com/mig.config")),
                        "all-disabled");

    /* migManager.config.default "": MIG-capable nodes keep their layout, no label written. */
    _cleanup_json_ json_t *cp2 = sample_policy();
    json_object_set_new(json_object_get(json_object_get(cp2, "spec"), "migManager"), "config",
                        json_pack("{s:s}", "default", ""));
    _cleanup_(op_policy_freep) struct op_policy *p2 = NULL;
    assert_int_equal(op_policy_parse(cp2, &defaults, &p2, &e), 0);
    _cleanup_json_ json_t *a2 =
        labels_patch("feature.node.kubernetes.io/pci-10de.present: \"true\"\n"
                     "nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3\n",
                     p2);
    assert_string_equal(json_string_value(json_object_get(a2, "nvidia.com/gpu.deploy.mig-manager")),
                        "true");
    assert_null(json_object_get(a2, "nvidia.com/mig.config"));

    /* Values others wrote stand; empty ones are filled; converged nodes need no patch. */
    _cleanup_json_ json_t *b =
        labels_patch("feature.node.kubernetes.io/pci-0302_10de.present: \"true\"\n"
                     "nvidia.com/mig.capable: \"false\"\n"
                     "nvidia.com/gpu.present: \"true\"\n"
                     "nvidia.com/gpu.deploy.driver: pre-installed\n"
                     "nvidia.com/gpu.deploy.device-plugin: paused-for-mig-change\n"
                     "nvidia.com/gpu.deploy.dcgm-exporter: \"\"\n"
                     "nvidia.com/gpu.deploy.mig-manager: \"true\"\n",
                     p);
    assert_null(json_object_get(b, "nvidia.com/gpu.present"));
    assert_null(json_object_get(b, "nvidia.com/gpu.deploy.driver"));
    assert_null(json_object_get(b, "nvidia.com/gpu.deploy.device-plugin"));
    assert_string_equal(
        json_string_value(json_object_get(b, "nvidia.com/gpu.deploy.dcgm-exporter")), "true");
    assert_true(json_is_null(json_object_get(b, "nvidia.com/gpu.deploy.mig-manager")));
    assert_null(json_object_get(b, "nvidia.com/mig.config"));

    /* Feature discovery paused (its labels gone, as during a MIG change): the MIG capability is
     * unknown, the MIG manager's label stays as it is, set or not. */
    _cleanup_json_ json_t *h =
        labels_patch("feature.node.kubernetes.io/pci-10de.present: \"true\"\n"
                     "nvidia.com/gpu.present: \"true\"\n"
                     "nvidia.com/gpu.deploy.gpu-feature-discovery: paused-for-mig-change\n"
                     "nvidia.com/gpu.deploy.mig-manager: \"true\"\n"
                     "nvidia.com/mig.config: all-1g.10gb\n",
                     p);
    assert_null(json_object_get(h, "nvidia.com/gpu.deploy.mig-manager"));
    assert_null(json_object_get(h, "nvidia.com/gpu.deploy.gpu-feature-discovery"));
    _cleanup_json_ json_t *h2 =
        labels_patch("feature.node.kubernetes.io/pci-10de.present: \"true\"\n"
                     "nvidia.com/gpu.present: \"true\"\n",
                     p);
    assert_null(json_object_get(h2, "nvidia.com/gpu.deploy.mig-manager"));
    assert_null(json_object_get(h2, "nvidia.com/mig.config"));
    /* A product that is not MIG capable: removed. */
    _cleanup_json_ json_t *h3 =
        labels_patch("feature.node.kubernetes.io/pci-10de.present: \"true\"\n"
                     "nvidia.com/gpu.product: NVIDIA-L4\n"
                     "nvidia.com/gpu.deploy.mig-manager: \"true\"\n",
                     p);
    assert_true(json_is_null(json_object_get(h3, "nvidia.com/gpu.deploy.mig-manager")));

    /* The kill switch removes every deploy label. */
    _cleanup_json_ json_t *c =
        labels_patch("feature.node.kubernetes.io/pci-10de.present: \"true\"\n"
                     "nvidia.com/gpu.present: \"true\"\n"
                     "nvidia.com/gpu.deploy.operands: \"false\"\n"
                     "nvidia.com/gpu.deploy.driver: \"true\"\n",
                     p);
    assert_true(json_is_null(json_object_get(c, "nvidia.com/gpu.deploy.driver")));
    assert_null(json_object_get(c, "nvidia.com/gpu.deploy.toolkit"));

    /* A node that stops being a GPU node loses presence and deploy labels. */
    _cleanup_json_ json_t *d =
        labels_patch("feature.node.kubernetes.io/cpu-model.vendor_id: Intel\n"
                     "nvidia.com/gpu.present: \"true\"\n"
                     "nvidia.com/gpu.deploy.gfd: \"true\"\n"
                     "nvidia.com/gpu.deploy.gpu-feature-discovery: \"true\"\n",
                     p);
    assert_true(json_is_null(json_object_get(d, "nvidia.com/gpu.present")));
    assert_true(json_is_null(json_object_get(d, "nvidia.com/gpu.deploy.gpu-feature-discovery")));
    assert_null(json_object_get(d, "nvidia.com/gpu.deploy.gfd")); /* not ours */

    /* Without NFD, an administrator's gpu.present=true marks a GPU node. */
    _cleanup_json_ json_t *f = labels_patch("nvidia.com/gpu.present: \"true\"\n", p);
    assert_string_equal(json_string_value(json_object_get(f, "nvidia.com/gpu.deploy.driver")),
                        "true");
    /* A CPU node: nothing. */
    _cleanup_json_ json_t *g = labels_patch("kubernetes.io/os: linux\n", p);
    assert_int_equal(json_object_size(g), 0);
}

static json_t *find_obj(json_t *objs, const char *kind, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach (objs, i, o) {
        if (streq_ptr(json_string_value(json_object_get(o, "kind")), kind) &&
            streq_ptr(json_string_value(json_object_get(json_object_get(o, "metadata"), "name")),
                      name))
            return o;
    }
    return NULL;
}

static void test_render_sample(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cp = sample_policy();
    json_t *spec = json_object_get(cp, "spec");
    json_object_set_new(json_object_get(spec, "driver"), "version", json_string("570.86.15"));
    json_object_set_new(json_object_get(spec, "daemonsets"), "priorityClassName",
                        json_string("gpu-critical"));
    json_object_set_new(json_object_get(spec, "devicePlugin"), "env",
                        json_pack("[{s:s,s:s}]", "name", "FAIL_ON_INIT_ERROR", "value", "false"));
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), 0);
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    struct op_render_ctx ctx = {.os_tag = "ubuntu22.04"};
    _cleanup_json_ json_t *objs = NULL;
    if (op_render(p, t, &ctx, &objs, &e) < 0)
        fail_msg("%s", err_msg(&e));

    json_t *rc = find_obj(objs, "RuntimeClass", "nvidia");
    assert_non_null(rc);
    assert_string_equal(json_string_value(json_object_get(rc, "handler")), "nvidia");

    json_t *drv = find_obj(objs, "DaemonSet", "nvidia-driver-daemonset");
    assert_non_null(drv);
    json_t *dspec = json_object_get(drv, "spec");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(dspec, "updateStrategy"), "type")),
        "OnDelete");
    json_t *podspec = json_object_get(json_object_get(dspec, "template"), "spec");
    json_t *ctr = json_array_get(json_object_get(podspec, "containers"), 0);
    assert_string_equal(json_string_value(json_object_get(ctr, "image")),
                        "nvcr.io/nvidia/driver:570.86.15-ubuntu22.04");
    assert_string_equal(json_string_value(json_object_get(podspec, "priorityClassName")),
                        "gpu-critical");
    assert_string_equal(json_string_value(json_object_get(json_object_get(podspec, "nodeSelector"),
                                                          "nvidia.com/gpu.deploy.driver")),
                        "true");

    json_t *dp = find_obj(objs, "DaemonSet", "nvidia-device-plugin-daemonset");
    assert_non_null(dp);
    json_t *dpod =
        json_object_get(json_object_get(json_object_get(dp, "spec"), "template"), "spec");
    json_t *dctr = json_array_get(json_object_get(dpod, "containers"), 0);
    assert_string_equal(json_string_value(json_object_get(dctr, "image")), "gpuop:test");
    assert_string_equal(json_string_value(json_array_get(json_object_get(dctr, "args"), 0)),
                        "device-plugin");
    bool found_env = false, found_mig = false;
    size_t i;
    json_t *ev;
    json_array_foreach (json_object_get(dctr, "env"), i, ev) {
        const char *n = json_string_value(json_object_get(ev, "name"));
        const char *v = json_string_value(json_object_get(ev, "value"));
        if (streq_ptr(n, "FAIL_ON_INIT_ERROR") && streq_ptr(v, "false"))
            found_env = true;
        if (streq_ptr(n, "MIG_STRATEGY") && streq_ptr(v, "single"))
            found_mig = true;
    }
    assert_true(found_env);
    assert_true(found_mig);
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(dp, "spec"), "updateStrategy"), "type")),
        "RollingUpdate");

    /* Every enabled component, with NVIDIA's names; no node-status-exporter, no dcgm. */
    assert_non_null(find_obj(objs, "DaemonSet", "nvidia-container-toolkit-daemonset"));
    assert_non_null(find_obj(objs, "DaemonSet", "nvidia-operator-validator"));
    assert_non_null(find_obj(objs, "DaemonSet", "nvidia-dcgm-exporter"));
    assert_non_null(find_obj(objs, "Service", "nvidia-dcgm-exporter"));
    assert_non_null(find_obj(objs, "DaemonSet", "gpu-feature-discovery"));
    assert_non_null(find_obj(objs, "DaemonSet", "nvidia-mig-manager"));
    assert_null(find_obj(objs, "DaemonSet", "nvidia-node-status-exporter"));
    assert_null(find_obj(objs, "DaemonSet", "nvidia-dcgm"));

    /* The sample's validator.env (WITH_WORKLOAD=false) reaches the plugin check too. */
    json_t *val = find_obj(objs, "DaemonSet", "nvidia-operator-validator");
    json_t *vpod =
        json_object_get(json_object_get(json_object_get(val, "spec"), "template"), "spec");
    json_t *ic;
    bool with_workload = false;
    json_array_foreach (json_object_get(vpod, "initContainers"), i, ic) {
        if (!streq_ptr(json_string_value(json_object_get(ic, "name")), "plugin-validation"))
            continue;
        size_t j;
        json_array_foreach (json_object_get(ic, "env"), j, ev) {
            if (streq_ptr(json_string_value(json_object_get(ev, "name")), "WITH_WORKLOAD"))
                with_workload = true;
        }
    }
    assert_true(with_workload);

    /* Owner, managed-by and a content hash on every object; the hash is stable. */
    json_t *o;
    json_array_foreach (objs, i, o) {
        json_t *meta = json_object_get(o, "metadata");
        assert_string_equal(json_string_value(json_object_get(json_object_get(meta, "labels"),
                                                              "app.kubernetes.io/managed-by")),
                            "gpuop");
        json_t *owner = json_array_get(json_object_get(meta, "ownerReferences"), 0);
        assert_string_equal(json_string_value(json_object_get(owner, "uid")), "uid-1");
        const char *h = json_string_value(
            json_object_get(json_object_get(meta, "annotations"), OP_HASH_ANNOTATION));
        assert_non_null(h);
        _cleanup_free_ char *again = op_object_hash(o);
        assert_string_equal(h, again);
    }
}

static void test_disable_component(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cp = sample_policy();
    json_t *spec = json_object_get(cp, "spec");
    json_object_set_new(json_object_get(spec, "driver"), "enabled", json_false());
    json_object_set_new(json_object_get(spec, "dcgmExporter"), "enabled", json_false());
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), 0);
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    _cleanup_json_ json_t *objs = NULL;
    assert_int_equal(op_render(p, t, NULL, &objs, &e), 0);
    assert_null(find_obj(objs, "DaemonSet", "nvidia-driver-daemonset"));
    assert_null(find_obj(objs, "DaemonSet", "nvidia-dcgm-exporter"));
    assert_null(find_obj(objs, "Service", "nvidia-dcgm-exporter"));
    assert_non_null(find_obj(objs, "DaemonSet", "nvidia-device-plugin-daemonset"));
}

static void test_ds_ready(void **state)
{
    (void)state;
    struct {
        const char *yaml;
        bool ready;
    } cases[] = {
        {"metadata: {generation: 1}\nspec: {updateStrategy: {type: RollingUpdate}}\n"
         "status: {desiredNumberScheduled: 0, observedGeneration: 1}",
         true},
        /* just created: the controller has not counted the nodes yet */
        {"metadata: {generation: 1}\nspec: {updateStrategy: {type: RollingUpdate}}\n"
         "status: {desiredNumberScheduled: 0}",
         false},
        {"metadata: {generation: 1}\nspec: {updateStrategy: {type: OnDelete}}\n"
         "status: {desiredNumberScheduled: 0}",
         false},
        {"metadata: {generation: 2}\nspec: {updateStrategy: {type: RollingUpdate}}\n"
         "status: {desiredNumberScheduled: 3, numberAvailable: 3, updatedNumberScheduled: 3,"
         " observedGeneration: 2, numberReady: 3}",
         true},
        {"metadata: {generation: 3}\nspec: {updateStrategy: {type: RollingUpdate}}\n"
         "status: {desiredNumberScheduled: 3, numberAvailable: 3, updatedNumberScheduled: 3,"
         " observedGeneration: 2, numberReady: 3}",
         false},
        {"metadata: {generation: 1}\nspec: {updateStrategy: {type: RollingUpdate}}\n"
         "status: {desiredNumberScheduled: 3, numberUnavailable: 1, numberAvailable: 2,"
         " updatedNumberScheduled: 3, observedGeneration: 1}",
         false},
        {"metadata: {generation: 1}\nspec: {updateStrategy: {type: OnDelete}}\n"
         "status: {desiredNumberScheduled: 2, numberReady: 2, updatedNumberScheduled: 1,"
         " observedGeneration: 1}",
         true},
        {"metadata: {generation: 1}\nspec: {}", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_json_ json_t *ds = load_yaml(cases[i].yaml);
        char why[128];
        if (op_ds_ready(ds, why, sizeof(why)) != cases[i].ready)
            fail_msg("case %zu: want ready=%d (%s)", i, cases[i].ready, why);
    }
}

/* Privilege is where it is needed, and only there: the API server rejects a Bidirectional mount
 * in a container that is not privileged, and every privileged container is on this list. */
static void test_render_privileges(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cp = sample_policy();
    json_object_set_new(json_object_get(json_object_get(cp, "spec"), "nodeStatusExporter"),
                        "enabled", json_true());
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), 0);
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    _cleanup_json_ json_t *objs = NULL;
    assert_int_equal(op_render(p, t, NULL, &objs, &e), 0);
    static const char *const allowed[] = {
        "nvidia-driver-daemonset/k8s-driver-manager",
        "nvidia-driver-daemonset/nvidia-driver-ctr",
        /* the remediation executor: nvidia-smi -r needs the GPUs' device nodes and root */
        "nvidia-driver-daemonset/nvidia-remediation-ctr",
        "nvidia-container-toolkit-daemonset/driver-validation",
        "nvidia-container-toolkit-daemonset/nvidia-container-toolkit-ctr",
        "nvidia-operator-validator/driver-validation",
        "nvidia-operator-validator/toolkit-validation",
        "nvidia-mig-manager/nvidia-mig-manager",
    };
    size_t n_priv = 0, n_ds = 0;
    size_t i;
    json_t *o;
    json_array_foreach (objs, i, o) {
        if (!streq_ptr(json_string_value(json_object_get(o, "kind")), "DaemonSet"))
            continue;
        n_ds++;
        const char *ds = json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
        json_t *pod =
            json_object_get(json_object_get(json_object_get(o, "spec"), "template"), "spec");
        static const char *const lists[] = {"initContainers", "containers"};
        for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
            size_t j;
            json_t *ctr;
            json_array_foreach (json_object_get(pod, lists[l]), j, ctr) {
                const char *name = json_string_value(json_object_get(ctr, "name"));
                bool priv = json_is_true(
                    json_object_get(json_object_get(ctr, "securityContext"), "privileged"));
                _cleanup_free_ char *id = xasprintf("%s/%s", ds, name);
                size_t k;
                json_t *m;
                json_array_foreach (json_object_get(ctr, "volumeMounts"), k, m) {
                    if (streq_ptr(json_string_value(json_object_get(m, "mountPropagation")),
                                  "Bidirectional") &&
                        !priv)
                        fail_msg("%s: Bidirectional mount %s in an unprivileged container", id,
                                 json_string_value(json_object_get(m, "name")));
                }
                if (!priv)
                    continue;
                n_priv++;
                bool ok = false;
                for (size_t a = 0; a < ARRAY_SIZE(allowed); a++)
                    ok = ok || strcmp(allowed[a], id) == 0;
                if (!ok)
                    fail_msg("%s is privileged and need not be", id);
            }
        }
    }
    assert_int_equal(n_ds, 8); /* every component gpuop deploys, node status exporter included */
    assert_int_equal(n_priv, ARRAY_SIZE(allowed));
}

static json_t *podspec_of(json_t *ds)
{
    return json_object_get(json_object_get(json_object_get(ds, "spec"), "template"), "spec");
}

/* The ClusterPolicy's common (daemonsets) and per-component settings reach the DaemonSets. */
static void test_render_overrides(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cp = sample_policy();
    json_t *spec = json_object_get(cp, "spec");
    _cleanup_json_ json_t *over = load_yaml(
        "daemonsets:\n"
        "  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]\n"
        "  annotations: {team: ml}\n"
        "  labels: {cost-center: c1, app: not-the-selector}\n"
        "  priorityClassName: gpu-critical\n"
        "  updateStrategy: RollingUpdate\n"
        "  rollingUpdate: {maxUnavailable: \"25%\"}\n"
        "devicePlugin:\n"
        "  enabled: true\n"
        "  args: [--fail-on-init-error=false]\n"
        "  resources: {limits: {memory: 100Mi}}\n"
        "  imagePullSecrets: [regcred]\n"
        "  imagePullPolicy: Always\n"
        "toolkit: {enabled: true, repository: reg.example/gpu, image: gpuop, version: v9}\n"
        "dcgmExporter: {enabled: true, annotations: {prometheus.io/scrape: \"true\"}}\n"
        "validator: {cuda: {env: [{name: CUDA_VISIBLE_DEVICES_CHECK, value: \"all\"}]}}\n"
        "driver: {enabled: true, repository: reg.example/nv, image: driver, version: \"580.1\",\n"
        "         args: [--debug]}\n");
    const char *k;
    json_t *v;
    json_object_foreach (over, k, v) {
        json_object_set(spec, k, v);
    }
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    if (op_policy_parse(cp, &defaults, &p, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    struct op_render_ctx ctx = {.os_tag = "rhel9.4"};
    _cleanup_json_ json_t *objs = NULL;
    assert_int_equal(op_render(p, t, &ctx, &objs, &e), 0);

    size_t i;
    json_t *o;
    json_array_foreach (objs, i, o) {
        if (!streq_ptr(json_string_value(json_object_get(o, "kind")), "DaemonSet"))
            continue;
        const char *name =
            json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
        json_t *pod = podspec_of(o);
        json_t *tmeta =
            json_object_get(json_object_get(json_object_get(o, "spec"), "template"), "metadata");
        /* Common settings on every DaemonSet; the selector label stays NVIDIA's. */
        assert_string_equal(json_string_value(json_object_get(pod, "priorityClassName")),
                            "gpu-critical");
        bool tol = false;
        size_t j;
        json_t *x;
        json_array_foreach (json_object_get(pod, "tolerations"), j, x) {
            tol = tol || streq_ptr(json_string_value(json_object_get(x, "key")), "dedicated");
        }
        if (!tol)
            fail_msg("%s: no daemonsets.tolerations", name);
        json_t *labels = json_object_get(tmeta, "labels");
        assert_string_equal(json_string_value(json_object_get(labels, "cost-center")), "c1");
        json_t *sel = json_object_get(
            json_object_get(json_object_get(json_object_get(o, "spec"), "selector"), "matchLabels"),
            "app");
        assert_non_null(json_string_value(sel));
        assert_string_equal(json_string_value(json_object_get(labels, "app")),
                            json_string_value(sel));
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(tmeta, "annotations"), "team")),
            "ml");
        json_t *us = json_object_get(json_object_get(o, "spec"), "updateStrategy");
        if (strcmp(name, "nvidia-driver-daemonset") == 0) {
            assert_string_equal(json_string_value(json_object_get(us, "type")), "OnDelete");
        } else {
            assert_string_equal(json_string_value(json_object_get(us, "type")), "RollingUpdate");
            assert_string_equal(json_string_value(json_object_get(
                                    json_object_get(us, "rollingUpdate"), "maxUnavailable")),
                                "25%");
        }
    }

    json_t *dp = podspec_of(find_obj(objs, "DaemonSet", "nvidia-device-plugin-daemonset"));
    json_t *dctr = json_array_get(json_object_get(dp, "containers"), 0);
    json_t *args = json_object_get(dctr, "args");
    assert_string_equal(json_string_value(json_array_get(args, 0)), "device-plugin");
    assert_string_equal(json_string_value(json_array_get(args, json_array_size(args) - 1)),
                        "--fail-on-init-error=false");
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(dctr, "resources"), "limits"), "memory")),
        "100Mi");
    assert_string_equal(json_string_value(json_object_get(dctr, "imagePullPolicy")), "Always");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(dp, "imagePullSecrets"), 0), "name")),
                        "regcred");

    /* A section's own image is never used, even one named like gpuop's: every operand runs
     * the operand image (--operand-image), and the section's image is listed as not acted on.
     * The driver image takes the OS suffix. */
    json_t *tk = podspec_of(find_obj(objs, "DaemonSet", "nvidia-container-toolkit-daemonset"));
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(tk, "containers"), 0), "image")),
                        "gpuop:test");
    _cleanup_free_ char *unimpl = json_dumps(p->unimplemented, JSON_COMPACT);
    assert_non_null(strstr(unimpl, "\"spec.toolkit.image\""));
    json_t *drv = podspec_of(find_obj(objs, "DaemonSet", "nvidia-driver-daemonset"));
    json_t *drvctr = json_array_get(json_object_get(drv, "containers"), 0);
    assert_string_equal(json_string_value(json_object_get(drvctr, "image")),
                        "reg.example/nv/driver:580.1-rhel9.4");
    assert_string_equal(json_string_value(json_array_get(json_object_get(drvctr, "args"), 0)),
                        "--debug");

    json_t *ex = find_obj(objs, "DaemonSet", "nvidia-dcgm-exporter");
    json_t *exann = json_object_get(
        json_object_get(json_object_get(json_object_get(ex, "spec"), "template"), "metadata"),
        "annotations");
    assert_string_equal(json_string_value(json_object_get(exann, "prometheus.io/scrape")), "true");

    /* validator.cuda.env reaches the CUDA check's init container and no other. */
    json_t *val = podspec_of(find_obj(objs, "DaemonSet", "nvidia-operator-validator"));
    json_t *ic;
    json_array_foreach (json_object_get(val, "initContainers"), i, ic) {
        bool has = false;
        size_t j;
        json_t *ev;
        json_array_foreach (json_object_get(ic, "env"), j, ev) {
            has = has || streq_ptr(json_string_value(json_object_get(ev, "name")),
                                   "CUDA_VISIBLE_DEVICES_CHECK");
        }
        const char *icname = json_string_value(json_object_get(ic, "name"));
        if (has != streq_ptr(icname, "cuda-validation"))
            fail_msg("validator.cuda.env: %s %s it", icname, has ? "has" : "lacks");
    }
}

/* The driver image: NVIDIA's sample names no version (its operator then uses the version its
 * release ships); a bare repository/image would pull ":latest", which does not exist. */
static void test_driver_image(void **state)
{
    (void)state;
    struct {
        const char *driver;
        const char *want;
    } cases[] = {
        {"{}", "nvcr.io/nvidia/driver:" OP_DEFAULT_DRIVER_VERSION "-ubuntu22.04"},
        {"{version: \"570.86.15\"}", "nvcr.io/nvidia/driver:570.86.15-ubuntu22.04"},
        {"{repository: r.example/nv, image: drv, version: \"580.1\"}",
         "r.example/nv/drv:580.1-ubuntu22.04"},
        {"{image: \"r.example/drv@sha256:abc\"}", "r.example/drv@sha256:abc"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_json_ json_t *cp = sample_policy();
        json_object_set_new(json_object_get(cp, "spec"), "driver", load_yaml(cases[i].driver));
        _cleanup_(op_policy_freep) struct op_policy *p = NULL;
        struct err e = {0};
        if (op_policy_parse(cp, &defaults, &p, &e) < 0)
            fail_msg("case %zu: %s", i, err_msg(&e));
        _cleanup_free_ char *img = op_driver_image(p, "ubuntu22.04");
        if (strcmp(img, cases[i].want) != 0)
            fail_msg("case %zu: got %s, want %s", i, img, cases[i].want);
    }
}

/* The operand image is the one given (--operand-image), whatever its name: a mirror such as
 * registry.corp/gpu/operands:0.1.0 runs every operand but the driver, and a section's own image
 * (NVIDIA's, or one whose name says gpuop) never replaces it. */
static void test_operand_image_by_key(void **state)
{
    (void)state;
    static const struct op_defaults mirrored = {"gpu-operator", "registry.corp/gpu/operands:0.1.0"};
    _cleanup_json_ json_t *cp = sample_policy();
    json_t *spec = json_object_get(cp, "spec");
    json_object_set_new(spec, "devicePlugin",
                        load_yaml("{enabled: true, repository: nvcr.io/nvidia, image: "
                                  "k8s-device-plugin, version: v0.17.0}"));
    json_object_set_new(spec, "gfd", load_yaml("{enabled: true, image: \"gpuop:9.9\"}"));
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    if (op_policy_parse(cp, &mirrored, &p, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    struct op_render_ctx ctx = {.os_tag = "ubuntu22.04"};
    _cleanup_json_ json_t *objs = NULL;
    if (op_render(p, t, &ctx, &objs, &e) < 0)
        fail_msg("%s", err_msg(&e));
    size_t i, n = 0;
    json_t *o;
    json_array_foreach (objs, i, o) {
        if (!streq_ptr(json_string_value(json_object_get(o, "kind")), "DaemonSet"))
            continue;
        const char *name =
            json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
        json_t *ps = podspec_of(o);
        const char *const lists[] = {"containers", "initContainers"};
        for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
            size_t j;
            json_t *c;
            json_array_foreach (json_object_get(ps, lists[l]), j, c) {
                const char *img = json_string_value(json_object_get(c, "image"));
                if (streq_ptr(name, "nvidia-driver-daemonset") &&
                    streq_ptr(json_string_value(json_object_get(c, "name")), "nvidia-driver-ctr"))
                    continue;
                if (!streq_ptr(img, "registry.corp/gpu/operands:0.1.0"))
                    fail_msg("%s: container %s runs %s", name,
                             json_string_value(json_object_get(c, "name")), img);
                n++;
            }
        }
    }
    assert_true(n > 8);
    _cleanup_free_ char *u = json_dumps(p->unimplemented, JSON_COMPACT);
    assert_non_null(strstr(u, "\"spec.devicePlugin.image\""));
    assert_non_null(strstr(u, "\"spec.gfd.image\""));
}

/* NVIDIA's chart points DCGM_EXPORTER_COLLECTORS at a file of its exporter image: gpuop's
 * exporter keeps its built-in counters instead (the entry is left out and reported); a file of
 * the user's ConfigMap (under custom/) or elsewhere stays. */
static void test_exporter_nvidia_collectors(void **state)
{
    (void)state;
    struct {
        const char *value;
        bool kept;
    } cases[] = {{"/etc/dcgm-exporter/dcp-metrics-included.csv", false},
                 {"/etc/dcgm-exporter/default-counters.csv", false},
                 {"/etc/dcgm-exporter/custom/dcgm-metrics.csv", true},
                 {"/srv/counters.csv", true}};
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_json_ json_t *cp = sample_policy();
        json_object_set_new(json_object_get(cp, "spec"), "dcgmExporter",
                            json_pack("{s:b,s:[{s:s,s:s}]}", "enabled", 1, "env", "name",
                                      "DCGM_EXPORTER_COLLECTORS", "value", cases[i].value));
        _cleanup_(op_policy_freep) struct op_policy *p = NULL;
        _cleanup_(op_templates_freep) struct op_templates *t = NULL;
        struct err e = {0};
        assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), 0);
        assert_int_equal(op_templates_builtin(&t, &e), 0);
        struct op_render_ctx ctx = {.os_tag = "ubuntu22.04"};
        _cleanup_json_ json_t *objs = NULL;
        assert_int_equal(op_render(p, t, &ctx, &objs, &e), 0);
        json_t *ctr = json_array_get(
            json_object_get(podspec_of(find_obj(objs, "DaemonSet", "nvidia-dcgm-exporter")),
                            "containers"),
            0);
        bool found = false;
        size_t k;
        json_t *ev;
        json_array_foreach (json_object_get(ctr, "env"), k, ev) {
            found = found || streq_ptr(json_string_value(json_object_get(ev, "name")),
                                       "DCGM_EXPORTER_COLLECTORS");
        }
        if (found != cases[i].kept)
            fail_msg("%s: %s", cases[i].value, found ? "kept" : "left out");
        _cleanup_free_ char *u = json_dumps(p->unimplemented, JSON_COMPACT);
        assert_true(!!strstr(u, "DCGM_EXPORTER_COLLECTORS") == !cases[i].kept);
    }
}

/* A condition put into the status about to be written: set (the stored transition time kept
 * while its status holds; observedGeneration only with a generation) or the stored one kept. */
static void test_status_condition(void **state)
{
    (void)state;
    json_t *cp = json_loads(
        "{\"metadata\":{\"name\":\"p\",\"generation\":7},\"status\":{\"conditions\":["
        "{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"Ready\",\"message\":\"\","
        "\"lastTransitionTime\":\"2024-01-01T00:00:00Z\"},"
        "{\"type\":\"DriverUpgrade\",\"status\":\"False\",\"reason\":\"Idle\",\"message\":\"m\","
        "\"lastTransitionTime\":\"2024-01-02T00:00:00Z\"}]}}",
        0, NULL);
    json_t *nogen = json_loads("{\"metadata\":{\"name\":\"p\"}}", 0, NULL);
    assert_non_null(cp);
    const uint64_t now = 1735689600000ull; /* 2025-01-01T00:00:00Z */
    static const struct {
        bool keep, with_gen;
        bool cstatus;
        const char *reason;
        const char *want_status, *want_time;
        long long want_gen; /* -1: none */
        size_t want_n;      /* conditions in the status (one "Ready" was there before) */
    } cases[] = {
        {false, true, false, "Idle", "False", "2024-01-02T00:00:00Z", 7, 2},
        {false, true, true, "InProgress", "True", "2025-01-01T00:00:00Z", 7, 2},
        {false, false, true, "InProgress", "True", "2025-01-01T00:00:00Z", -1, 2},
        {true, true, false, NULL, "False", "2024-01-02T00:00:00Z", -2, 2},
        {true, false, false, NULL, NULL, NULL, 0, 1}, /* nothing stored: nothing kept */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        print_message("case %zu\n", i);
        json_t *status =
            json_pack("{s:[{s:s,s:s}]}", "conditions", "type", "Ready", "status", "True");
        const json_t *obj = cases[i].with_gen ? cp : nogen;
        if (cases[i].keep)
            op_status_condition_keep(status, obj, "DriverUpgrade");
        else
            op_status_condition_set(status, obj, "DriverUpgrade", cases[i].cstatus, cases[i].reason,
                                    "msg", now);
        json_t *conds = json_object_get(status, "conditions");
        assert_int_equal(json_array_size(conds), cases[i].want_n);
        json_t *c = NULL;
        size_t k;
        json_t *x;
        json_array_foreach (conds, k, x)
            if (strcmp(json_string_value(json_object_get(x, "type")), "DriverUpgrade") == 0)
                c = x;
        if (!cases[i].want_status) {
            assert_null(c);
            json_decref(status);
            continue;
        }
        assert_non_null(c);
        assert_string_equal(json_string_value(json_object_get(c, "status")), cases[i].want_status);
        assert_string_equal(json_string_value(json_object_get(c, "lastTransitionTime")),
                            cases[i].want_time);
        json_t *g = json_object_get(c, "observedGeneration");
        if (cases[i].want_gen == -1)
            assert_null(g);
        else if (cases[i].want_gen >= 0)
            assert_int_equal(json_integer_value(g), cases[i].want_gen);
        json_decref(status);
    }
    /* a status without conditions gets the array */
    json_t *status = json_object();
    op_status_condition_set(status, cp, "DriverUpgrade", true, "R", "m", now);
    assert_int_equal(json_array_size(json_object_get(status, "conditions")), 1);
    json_decref(status);
    json_decref(cp);
    json_decref(nogen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_loaded),
        cmocka_unit_test(test_sample_policy),
        cmocka_unit_test(test_invalid_policy),
        cmocka_unit_test(test_node_labels),
        cmocka_unit_test(test_node_after),
        cmocka_unit_test(test_render_sample),
        cmocka_unit_test(test_disable_component),
        cmocka_unit_test(test_ds_ready),
        cmocka_unit_test(test_render_privileges),
        cmocka_unit_test(test_render_overrides),
        cmocka_unit_test(test_driver_image),
        cmocka_unit_test(test_upstream_sample),
        cmocka_unit_test(test_operand_image_by_key),
        cmocka_unit_test(test_exporter_nvidia_collectors),
        cmocka_unit_test(test_status_condition),
        cmocka_unit_test(test_render_dra_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
