/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rendered objects a real API server accepts: the validator's rules, table-tested (each can
 * fail), and every ClusterPolicy the tests use rendered and checked against them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <unistd.h>

#include "kobj.h"
#include "operator.h"
#include "yamlcfg.h"

static const struct op_defaults defaults = {"gpu-operator", "gpuop:test"};

static json_t *load_yaml(const char *s)
{
    json_t *v = NULL;
    struct err e = {0};
    if (yaml_parse_one(s, strlen(s), "test", &v, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return v;
}

static void test_int_or_percent(void **state)
{
    (void)state;
    struct {
        const char *in; /* YAML scalar */
        const char *out;
    } cases[] = {
        {"1", "1"},        {"\"1\"", "1"},           {"\"25%\"", "\"25%\""},
        {"0", "0"},        {"\"100%\"", "\"100%\""}, {"\"one\"", NULL},
        {"\"1.5\"", NULL}, {"\"101%\"", NULL},       {"-1", NULL},
        {"\"\"", NULL},    {"\"%\"", NULL},          {"\"-1\"", NULL},
        {"true", NULL},    {"\"25 %\"", NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_json_ json_t *v = load_yaml(cases[i].in);
        _cleanup_json_ json_t *out = NULL;
        struct err e = {0};
        int r = kobj_int_or_percent(v, "spec.x", &out, &e);
        if (!cases[i].out) {
            if (r != -EINVAL || !strstr(err_msg(&e), "spec.x"))
                fail_msg("case %zu (%s): want an error naming the field, got %d \"%s\"", i,
                         cases[i].in, r, err_msg(&e));
            continue;
        }
        if (r < 0)
            fail_msg("case %zu (%s): %s", i, cases[i].in, err_msg(&e));
        _cleanup_free_ char *s = json_dumps(out, JSON_ENCODE_ANY);
        if (strcmp(s, cases[i].out) != 0)
            fail_msg("case %zu: %s -> %s, want %s", i, cases[i].in, s, cases[i].out);
    }
}

static void test_quantity(void **state)
{
    (void)state;
    static const char *const good[] = {"1",   "100m", "64Mi", "1.5Gi", ".5",
                                       "2e3", "1E-3", "10k",  "0"};
    static const char *const bad[] = {"", "1 GB", "64MB", "Mi", "1.5.5", "1e", "abc", "1Kb", "."};
    for (size_t i = 0; i < ARRAY_SIZE(good); i++)
        if (!op_quantity_valid(good[i]))
            fail_msg("%s refused", good[i]);
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        if (op_quantity_valid(bad[i]))
            fail_msg("\"%s\" accepted", bad[i]);
}

#define DS_HEAD                                                                          \
    "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ds, namespace: ns, labels: " \
    "{app: ds}}\nspec:\n  selector: {matchLabels: {app: ds}}\n"

/* One rule per case: a valid DaemonSet or Service made invalid in one field. */
static void test_rules(void **state)
{
    (void)state;
    struct {
        const char *yaml;
        const char *err; /* NULL: valid */
    } cases[] = {
        {DS_HEAD "  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}\n"
                 "  template:\n    metadata: {labels: {app: ds}}\n    spec:\n"
                 "      volumes: [{name: v, hostPath: {path: /x}}]\n"
                 "      containers: [{name: c, image: i, ports: [{containerPort: 80, name: "
                 "metrics}], resources: {limits: {memory: 64Mi, cpu: 100m}},\n"
                 "        volumeMounts: [{name: v, mountPath: /x}], env: [{name: A_B.c, value: "
                 "x}],\n"
                 "        startupProbe: {exec: {command: [x]}, periodSeconds: 5, "
                 "failureThreshold: 120},\n"
                 "        readinessProbe: {httpGet: {port: metrics}, successThreshold: 2}}]\n",
         NULL},
        {DS_HEAD "  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: \"1\"}}\n"
                 "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: c, "
                 "image: i}]}}\n",
         "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"1\""},
        {DS_HEAD
         "  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: \"x%\"}}\n"
         "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: c, "
         "image: i}]}}\n",
         "maxUnavailable"},
        {DS_HEAD "  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0}}\n"
                 "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: c, "
                 "image: i}]}}\n",
         "may not be 0 when `maxSurge` is 0"},
        {DS_HEAD "  template: {metadata: {labels: {app: other}}, spec: {containers: [{name: c, "
                 "image: i}]}}\n",
         "`selector` does not match template `labels`"},
        {DS_HEAD "  template: {metadata: {labels: {app: ds, \"bad key!\": x}}, spec: "
                 "{containers: [{name: c, image: i}]}}\n",
         "template.metadata.labels: Invalid value: \"bad key!\""},
        {DS_HEAD "  template: {metadata: {labels: {app: ds, k: \"a b\"}}, spec: {containers: "
                 "[{name: c, image: i}]}}\n",
         "Invalid value: \"a b\": a valid label"},
        {DS_HEAD "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: C_1, "
                 "image: i}]}}\n",
         "containers[0].name"},
        {DS_HEAD "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: c, "
                 "image: i, ports: [{containerPort: 0}]}]}}\n",
         "ports[0].containerPort: Invalid value: 0: must be between 1 and 65535"},
        {DS_HEAD "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: c, "
                 "image: i, ports: [{containerPort: 70000}]}]}}\n",
         "containerPort: Invalid value: 70000"},
        {DS_HEAD "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: c, "
                 "image: i, resources: {requests: {memory: 1 GB}}}]}}\n",
         "resources.requests: Invalid value: memory"},
        {DS_HEAD "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: c, "
                 "image: i, livenessProbe: {exec: {command: [x]}, periodSeconds: -1}}]}}\n",
         "livenessProbe.periodSeconds: Invalid value: -1"},
        {DS_HEAD "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: c, "
                 "image: i, livenessProbe: {exec: {command: [x]}, successThreshold: 2}}]}}\n",
         "livenessProbe.successThreshold: Invalid value: 2: must be 1"},
        {DS_HEAD "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: c, "
                 "image: i, readinessProbe: {httpGet: {port: 0}}}]}}\n",
         "readinessProbe.port: Invalid value: 0"},
        {DS_HEAD "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: c, "
                 "image: i, startupProbe: {periodSeconds: 1}}]}}\n",
         "must specify exactly one handler type"},
        {DS_HEAD "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: c, "
                 "image: i, volumeMounts: [{name: nope, mountPath: /x}]}]}}\n",
         "volumeMounts[0].name: Not found: \"nope\""},
        {DS_HEAD "  template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: c, "
                 "image: i, env: [{name: 1X}]}]}}\n",
         "env[0].name"},
        {DS_HEAD "  template: {metadata: {labels: {app: ds}}, spec: {priorityClassName: "
                 "Critical, containers: [{name: c, image: i}]}}\n",
         "priorityClassName: Invalid value: \"Critical\""},
        {DS_HEAD "  template: {metadata: {labels: {app: ds}}, spec: {tolerations: [{key: k, "
                 "operator: Exists, value: v}], containers: [{name: c, image: i}]}}\n",
         "tolerations[0].operator"},
        {DS_HEAD "  updateStrategy: {type: Sometimes}\n  template: {metadata: {labels: {app: "
                 "ds}}, spec: {containers: [{name: c, image: i}]}}\n",
         "updateStrategy.type: Unsupported value"},
        {"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: Bad_Name}\nspec: {selector: "
         "{matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: "
         "[{name: c, image: i}]}}}\n",
         "metadata.name: Invalid value: \"Bad_Name\""},
        {"apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: ns}\nspec: {ports: "
         "[{name: m, port: 9400, targetPort: 9400}], selector: {app: x}}\n",
         NULL},
        {"apiVersion: v1\nkind: Service\nmetadata: {name: 1s}\nspec: {ports: [{port: 1}]}\n",
         "metadata.name"},
        {"apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 0}]}\n",
         "spec.ports[0].port: Invalid value: 0"},
        {"apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 1, "
         "targetPort: Metrics}]}\n",
         "spec.ports[0].targetPort"},
        {"apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 1}, {port: "
         "2}]}\n",
         "spec.ports[0].name: Required value"},
        {"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa, annotations: {\"a/b/c\": "
         "x}}\n",
         "metadata.annotations"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_json_ json_t *obj = load_yaml(cases[i].yaml);
        struct err e = {0};
        int r = op_api_validate(obj, &e);
        if (!cases[i].err) {
            if (r < 0)
                fail_msg("case %zu: valid object refused: %s", i, err_msg(&e));
            continue;
        }
        if (r != -EINVAL || !strstr(err_msg(&e), cases[i].err))
            fail_msg("case %zu: got %d \"%s\", want \"%s\"", i, r, err_msg(&e), cases[i].err);
    }
}

/* The ClusterPolicy's int-or-string: "1" renders as 1, "25%" stays, anything else is an invalid
 * policy naming the field; quantities likewise. */
static void test_policy_int_or_string(void **state)
{
    (void)state;
    struct {
        const char *daemonsets;
        const char *want; /* rendered JSON, or the error */
        bool ok;
    } cases[] = {
        {"{rollingUpdate: {maxUnavailable: \"1\"}}", "1", true},
        /* NVIDIA's CRD types it a string: an integer is refused by the schema. */
        {"{rollingUpdate: {maxUnavailable: 2}}", "expected a string", false},
        {"{rollingUpdate: {maxUnavailable: \"25%\"}}", "\"25%\"", true},
        {"{rollingUpdate: {maxUnavailable: \"one\"}}",
         "spec.daemonsets.rollingUpdate.maxUnavailable: Invalid value: \"one\"", false},
        {"{rollingUpdate: {maxUnavailable: \"0\"}}", "may not be 0", false},
        {"{rollingUpdate: {maxUnavailable: \"150%\"}}", "must not be greater than 100%", false},
    };
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_free_ char *y = xasprintf(
            "metadata: {name: x, uid: u}\nspec:\n  daemonsets: %s\n  driver: {}\n  dcgm: {}\n"
            "  dcgmExporter: {}\n  devicePlugin: {}\n  gfd: {}\n  nodeStatusExporter: {}\n"
            "  operator: {}\n  toolkit: {}\n",
            cases[i].daemonsets);
        _cleanup_json_ json_t *cp = load_yaml(y);
        _cleanup_(op_policy_freep) struct op_policy *p = NULL;
        e = (struct err){0};
        int r = op_policy_parse(cp, &defaults, &p, &e);
        if (!cases[i].ok) {
            if (r != -EINVAL || !strstr(err_msg(&e), cases[i].want))
                fail_msg("case %zu: got %d \"%s\", want \"%s\"", i, r, err_msg(&e), cases[i].want);
            continue;
        }
        if (r < 0)
            fail_msg("case %zu: %s", i, err_msg(&e));
        _cleanup_json_ json_t *objs = NULL;
        assert_int_equal(op_render(p, t, NULL, &objs, &e), 0);
        size_t j;
        json_t *o;
        int n = 0;
        json_array_foreach (objs, j, o) {
            json_t *ru = json_object_get(
                json_object_get(json_object_get(o, "spec"), "updateStrategy"), "rollingUpdate");
            if (!ru)
                continue;
            _cleanup_free_ char *s =
                json_dumps(json_object_get(ru, "maxUnavailable"), JSON_ENCODE_ANY);
            if (strcmp(s, cases[i].want) != 0)
                fail_msg("case %zu: rendered %s, want %s", i, s, cases[i].want);
            n++;
        }
        assert_true(n >= 5);
    }
    _cleanup_json_ json_t *cp = load_yaml(
        "metadata: {name: x}\nspec:\n  daemonsets: {}\n  driver: {}\n  dcgm: {}\n"
        "  dcgmExporter: {}\n  devicePlugin: {resources: {limits: {memory: 1 GB}}}\n  gfd: {}\n"
        "  nodeStatusExporter: {}\n  operator: {}\n  toolkit: {}\n");
    struct op_policy *p = NULL;
    assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "spec.devicePlugin.resources.limits.memory"));
}

static void validate_policy(json_t *cp, const char *what, const char *os_tag)
{
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    if (op_policy_parse(cp, &defaults, &p, &e) < 0)
        fail_msg("%s: %s", what, err_msg(&e));
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    struct op_render_ctx ctx = {.os_tag = os_tag};
    _cleanup_json_ json_t *objs = NULL;
    if (op_render(p, t, &ctx, &objs, &e) < 0)
        fail_msg("%s: %s", what, err_msg(&e));
    size_t i;
    json_t *o;
    json_array_foreach (objs, i, o) {
        if (op_api_validate(o, &e) < 0)
            fail_msg("%s: the API server would refuse it: %s", what, err_msg(&e));
    }
    print_message("%s: %zu objects valid\n", what, json_array_size(objs));
}

static json_t *load_file(const char *rel, bool upstream)
{
    const char *root = getenv(upstream ? "GPUOP_SHARED" : "GPUOP_SOURCE_ROOT");
    if (!root)
        root = upstream ? "" : "../..";
    _cleanup_free_ char *path = xasprintf("%s/%s", root, rel);
    if (upstream && access(path, R_OK) != 0)
        return NULL;
    json_t *v = NULL;
    struct err e = {0};
    if (yaml_load_file(path, &v, &e) < 0)
        fail_msg("%s", err_msg(&e));
    json_object_set_new(json_object_get(v, "metadata"), "uid", json_string("uid-1"));
    return v;
}

/* Every ClusterPolicy the tests use (the planner's fixtures check theirs step by step). */
static void test_rendered_policies_valid(void **state)
{
    (void)state;
    static const char *const files[] = {"deploy/samples/clusterpolicy.yaml",
                                        "tests/operator/fixtures/clusterpolicy-full.yaml"};
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        _cleanup_json_ json_t *cp = load_file(files[i], false);
        validate_policy(cp, files[i], "ubuntu22.04");
        /* Every component on, every per-component setting the unit tests use. */
        json_t *spec = json_object_get(cp, "spec");
        _cleanup_json_ json_t *over = load_yaml(
            "daemonsets:\n"
            "  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]\n"
            "  annotations: {team: ml}\n"
            "  labels: {cost-center: c1}\n"
            "  priorityClassName: gpu-critical\n"
            "  rollingUpdate: {maxUnavailable: \"25%\"}\n"
            "nodeStatusExporter: {enabled: true}\n"
            "devicePlugin: {enabled: true, args: [--fail-on-init-error=false],\n"
            "  resources: {limits: {memory: 100Mi}, requests: {cpu: 100m}},\n"
            "  imagePullSecrets: [regcred], env: [{name: FAIL_ON_INIT_ERROR, value: \"false\"}]}\n"
            "dcgmExporter: {enabled: true, annotations: {prometheus.io/scrape: \"true\"},\n"
            "  service: {type: NodePort}}\n"
            "driver: {enabled: true, version: \"570.86.15\", args: [--debug]}\n");
        const char *k;
        json_t *v;
        json_object_foreach (over, k, v) {
            json_object_set(spec, k, v);
        }
        _cleanup_free_ char *what = xasprintf("%s with every component on", files[i]);
        validate_policy(cp, what, "rhel9.4");
    }
    _cleanup_json_ json_t *nv =
        load_file("reference/upstream/gpu-operator_config_samples_v1_clusterpolicy.yaml", true);
    if (nv)
        validate_policy(nv, "NVIDIA's sample", "ubuntu22.04");
    else
        print_message("NVIDIA's sample not under GPUOP_SHARED: that cross-check skipped\n");
}

/* driver.startupProbe is applied (its timings on the driver container's probe), so it is not
 * listed as unsupported; driver.livenessProbe, with no probe in the template, still is. */
static void test_driver_probes(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cp = load_file("tests/operator/fixtures/clusterpolicy-full.yaml", false);
    _cleanup_json_ json_t *probes =
        load_yaml("startupProbe: {initialDelaySeconds: 5, periodSeconds: 3, failureThreshold: 7, "
                  "successThreshold: 4}\nlivenessProbe: {periodSeconds: 9}\n");
    json_object_update(json_object_get(json_object_get(cp, "spec"), "driver"), probes);
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), 0);
    _cleanup_free_ char *u = json_dumps(p->unimplemented, JSON_COMPACT);
    assert_null(strstr(u, "spec.driver.startupProbe"));
    assert_non_null(strstr(u, "spec.driver.livenessProbe"));
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    _cleanup_json_ json_t *objs = NULL;
    assert_int_equal(op_render(p, t, NULL, &objs, &e), 0);
    size_t i;
    json_t *o;
    json_t *sp = NULL;
    json_array_foreach (objs, i, o) {
        if (op_api_validate(o, &e) < 0)
            fail_msg("%s", err_msg(&e));
        if (streq_ptr(json_string_value(json_object_get(json_object_get(o, "metadata"), "name")),
                      "nvidia-driver-daemonset"))
            sp = json_object_get(
                json_array_get(
                    json_object_get(
                        json_object_get(json_object_get(json_object_get(o, "spec"), "template"),
                                        "spec"),
                        "containers"),
                    0),
                "startupProbe");
    }
    assert_non_null(sp);
    assert_int_equal(json_integer_value(json_object_get(sp, "initialDelaySeconds")), 5);
    assert_int_equal(json_integer_value(json_object_get(sp, "periodSeconds")), 3);
    assert_int_equal(json_integer_value(json_object_get(sp, "failureThreshold")), 7);
    assert_null(json_object_get(sp, "successThreshold")); /* must stay 1 */
    assert_non_null(json_object_get(sp, "exec"));         /* the template's handler */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int_or_percent),
        cmocka_unit_test(test_quantity),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_policy_int_or_string),
        cmocka_unit_test(test_rendered_policies_valid),
        cmocka_unit_test(test_driver_probes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
