/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU quota findings and metrics over kubesim's two-pool cluster (sim/clusters/two-pools.yaml),
 * and what the planner makes of them: conditions on the ClusterPolicy, a Warning Event when a
 * finding's message changes and a Normal one when it clears, and no status write when nothing
 * changed. The pod informer's prefilter passes over no pod the view counts. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capacity.h"
#include "kobj.h"
#include "kube.h"
#include "operator.h"
#include "prom.h"
#include "yamlcfg.h"

static const struct op_defaults defaults = {"gpu-operator", "gpuop:test"};

/* The cluster file's objects of one kind (a new array), without node `skip` (may be NULL). */
static json_t *of_kind(const json_t *docs, const char *kind, const char *skip)
{
    json_t *out = json_array();
    size_t i;
    json_t *d;
    json_array_foreach (docs, i, d)
        if (streq_ptr(kobj_kind(d), kind) && !(skip && streq_ptr(kobj_name(d), skip)))
            json_array_append(out, d);
    return out;
}

static struct cap_view *view_of(const json_t *docs, const char *lost_node)
{
    _cleanup_json_ json_t *nodes = of_kind(docs, "Node", lost_node);
    _cleanup_json_ json_t *pods = of_kind(docs, "Pod", NULL);
    _cleanup_json_ json_t *quotas = of_kind(docs, "ResourceQuota", NULL);
    /* the quota controller's status: hard, and used from the pods */
    size_t i;
    json_t *q;
    json_array_foreach (quotas, i, q) {
        bool training = streq_ptr(kobj_namespace(q), "training");
        json_object_set_new(q, "status",
                            json_pack("{s:O,s:{s:s}}", "hard", kobj_path(q, "spec.hard"), "used",
                                      "requests.nvidia.com/gpu", training ? "8" : "2"));
    }
    struct cap_input in = {.nodes = nodes, .pods = pods, .quotas = quotas};
    struct cap_view *v = NULL;
    struct err e = {0};
    if (cap_view_compute(&in, &v, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return v;
}

static json_t *load_cluster(void)
{
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    assert_non_null(src);
    _cleanup_free_ char *path = xasprintf("%s/sim/clusters/two-pools.yaml", src);
    json_t *docs = NULL;
    struct err e = {0};
    if (yaml_load_file_all(path, &docs, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return docs;
}

static const json_t *finding(const json_t *findings, const char *type)
{
    size_t i;
    json_t *f;
    json_array_foreach (findings, i, f)
        if (streq_ptr(kobj_str(f, "type"), type))
            return f;
    fail_msg("no finding %s", type);
    return NULL;
}

static const char *line0(const json_t *findings, const char *type)
{
    return json_string_value(json_array_get(json_object_get(finding(findings, type), "lines"), 0));
}

static void test_findings(void **state)
{
    (void)state;
    _cleanup_json_ json_t *docs = load_cluster();
    struct cap_view *v = view_of(docs, NULL);
    _cleanup_json_ json_t *f = op_gpuquota_findings(v);
    assert_int_equal(json_array_size(f), 3);
    assert_null(line0(f, "GPUQuotaOvercommitted"));
    assert_null(line0(f, "GPUPoolBelowQuota"));
    assert_string_equal(line0(f, "GPUQuotaMissing"), "notebooks: 1 GPU pod, no GPU quota");
    assert_string_equal(kobj_str(finding(f, "GPUQuotaMissing"), "event_type"), "Normal");
    cap_view_free(v);

    v = view_of(docs, "h100-2");
    _cleanup_json_ json_t *g = op_gpuquota_findings(v);
    assert_string_equal(line0(g, "GPUQuotaOvercommitted"),
                        "nvidia.com/gpu: namespace quotas promise 24 of 16 advertised (ratio 1.50, "
                        "threshold 1.00)");
    assert_string_equal(line0(g, "GPUPoolBelowQuota"),
                        "pool NVIDIA-H100-80GB-HBM3 advertises 8 nvidia.com/gpu, below the 16 its "
                        "namespaces' quotas pin to it (namespaces: training)");

    /* the metrics of that state */
    struct sbuf b;
    sbuf_init(&b, 1 << 20);
    struct prom_writer w;
    prom_writer_init(&w, &b, PROM_FORMAT_TEXT);
    op_gpuquota_metrics(v, &w);
    assert_int_equal(prom_writer_finish(&w), 0);
    static const char *const want[] = {
        "gpuop_gpu_capacity{resource=\"nvidia.com/gpu\",pool=\"NVIDIA-H100-80GB-HBM3\"} 8\n",
        "gpuop_gpu_capacity{resource=\"nvidia.com/gpu\",pool=\"NVIDIA-L4\"} 8\n",
        "gpuop_gpu_physical{resource=\"nvidia.com/gpu\",pool=\"NVIDIA-H100-80GB-HBM3\"} 8\n",
        "gpuop_gpu_quota_pinned{resource=\"nvidia.com/gpu\",pool=\"NVIDIA-H100-80GB-HBM3\"} 16\n",
        "gpuop_gpu_quota_hard{namespace=\"training\",resource=\"nvidia.com/gpu\"} 16\n",
        "gpuop_gpu_quota_used{namespace=\"training\",resource=\"nvidia.com/gpu\"} 8\n",
        "gpuop_gpu_quota_overcommit_ratio{resource=\"nvidia.com/gpu\"} 1.5\n",
        "gpuop_gpu_quota_overcommit_threshold 1\n",
        "gpuop_gpu_namespace_pods_without_quota{namespace=\"notebooks\"} 1\n",
        "# TYPE gpuop_gpu_capacity gauge\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!strstr(b.data, want[i]))
            fail_msg("metrics lack %s in:\n%s", want[i], b.data);
    /* no quota line for the quota-less namespace */
    assert_null(strstr(b.data, "gpuop_gpu_quota_hard{namespace=\"notebooks\""));
    sbuf_free(&b);
    cap_view_free(v);
}

static json_t *plan_status(const json_t *cp, const json_t *findings, struct op_templates *t,
                           json_t **ret_events, bool *ret_write)
{
    _cleanup_json_ json_t *policies = json_pack("[O]", cp);
    _cleanup_json_ json_t *none = json_array();
    struct op_snapshot snap = {.policies = policies,
                               .nodes = none,
                               .owned = none,
                               .defaults = &defaults,
                               .templates = t,
                               .now_ms = 1800000000000ull,
                               .findings = findings};
    struct op_plan *plan = NULL;
    struct err e = {0};
    if (op_plan(&snap, &plan, &e) < 0)
        fail_msg("%s", err_msg(&e));
    const struct op_report *r = &plan->active->r;
    json_t *events = json_array();
    for (size_t i = 0; i < r->n_events; i++)
        json_array_append_new(events,
                              json_pack("{s:s,s:s,s:s}", "type", r->events[i].type, "reason",
                                        r->events[i].reason, "message", r->events[i].message));
    *ret_events = events;
    *ret_write = r->write;
    json_t *st = json_incref(r->status);
    op_plan_free(plan);
    return st;
}

static const json_t *cond(const json_t *status, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(status, "conditions"), i, c)
        if (streq_ptr(kobj_str(c, "type"), type))
            return c;
    return NULL;
}

static size_t count_events(const json_t *events, const char *type, const char *reason)
{
    size_t i, n = 0;
    json_t *ev;
    json_array_foreach (events, i, ev)
        n += streq_ptr(kobj_str(ev, "type"), type) && streq_ptr(kobj_str(ev, "reason"), reason);
    return n;
}

/* The planner: a pool falls short (condition, Warning Event naming the pool), the same again
 * (no Event, no write), restored (condition gone, Normal Event). */
static void test_plan(void **state)
{
    (void)state;
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    _cleanup_free_ char *path =
        xasprintf("%s/tests/operator/fixtures/clusterpolicy-full.yaml", src);
    json_t *cp = NULL;
    struct err e = {0};
    assert_int_equal(yaml_load_file(path, &cp, &e), 0);
    json_t *meta = json_object_get(cp, "metadata");
    json_object_set_new(meta, "uid", json_string("uid-1"));
    json_object_set_new(meta, "generation", json_integer(1));
    json_object_set_new(meta, "creationTimestamp", json_string("2026-01-01T00:00:00Z"));
    struct op_templates *t = NULL;
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    _cleanup_json_ json_t *docs = load_cluster();

    struct cap_view *lost = view_of(docs, "h100-2");
    _cleanup_json_ json_t *f1 = op_gpuquota_findings(lost);
    cap_view_free(lost);
    json_t *events = NULL;
    bool write = false;
    json_t *st = plan_status(cp, f1, t, &events, &write);
    assert_true(write);
    const json_t *c = cond(st, "GPUPoolBelowQuota");
    assert_non_null(c);
    assert_string_equal(kobj_str(c, "status"), "True");
    assert_string_equal(kobj_str(c, "reason"), "PoolCapacityBelowPinnedQuotas");
    assert_non_null(strstr(kobj_str(c, "message"), "pool NVIDIA-H100-80GB-HBM3"));
    assert_non_null(cond(st, "GPUQuotaOvercommitted"));
    assert_non_null(cond(st, "GPUQuotaMissing"));
    assert_int_equal(count_events(events, "Warning", "GPUPoolBelowQuota"), 1);
    assert_int_equal(count_events(events, "Warning", "GPUQuotaOvercommitted"), 1);
    assert_int_equal(count_events(events, "Normal", "GPUQuotaMissing"), 1);
    json_decref(events);

    /* stored: planned again with the same findings, nothing to report or write */
    json_object_set(cp, "status", st);
    json_t *st2 = plan_status(cp, f1, t, &events, &write);
    assert_false(write);
    assert_int_equal(count_events(events, "Warning", "GPUPoolBelowQuota"), 0);
    assert_int_equal(count_events(events, "Normal", "GPUQuotaMissing"), 0);
    json_decref(events);
    json_decref(st2);

    /* restored */
    struct cap_view *ok = view_of(docs, NULL);
    _cleanup_json_ json_t *f2 = op_gpuquota_findings(ok);
    cap_view_free(ok);
    json_t *st3 = plan_status(cp, f2, t, &events, &write);
    assert_true(write);
    assert_null(cond(st3, "GPUPoolBelowQuota"));
    assert_null(cond(st3, "GPUQuotaOvercommitted"));
    assert_non_null(cond(st3, "GPUQuotaMissing"));
    assert_int_equal(count_events(events, "Normal", "GPUPoolCapacityRestored"), 1);
    assert_int_equal(count_events(events, "Normal", "GPUQuotaWithinCapacity"), 1);
    json_decref(events);
    json_decref(st3);
    json_decref(st);
    json_decref(cp);
    op_templates_free(t);
}

/* The pod informer's prefilter (op_gpuquota_pod_texts) passes over only pods the view does not
 * count: every pod op_gpuquota_pod_counts keeps has a text with a group whole (its slash
 * escaped too), the operand pods none, and the view of the pods the filter lets through is the
 * view of them all. */
static void test_pod_prefilter(void **state)
{
    (void)state;
    static const struct {
        const char *pod;
        bool counts, decoded;
    } cases[] = {
        /* GPU requests, limits, an init container's, a MIG slice, a claim, the extended
         * resource a DeviceClass maps to DRA (nvidia.com/gpu, the view's only kind) */
        {"{\"metadata\":{\"name\":\"r\",\"namespace\":\"a\"},\"spec\":{\"containers\":[{"
         "\"name\":\"c\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
         true, true},
        {"{\"metadata\":{\"name\":\"l\",\"namespace\":\"a\"},\"spec\":{\"containers\":[{"
         "\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}",
         true, true},
        {"{\"metadata\":{\"name\":\"i\",\"namespace\":\"a\"},\"spec\":{\"initContainers\":[{"
         "\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"1\"}}}],"
         "\"containers\":[{\"name\":\"m\"}]}}",
         true, true},
        {"{\"metadata\":{\"name\":\"d\",\"namespace\":\"a\"},\"spec\":{\"resourceClaims\":[{"
         "\"name\":\"gpu\",\"resourceClaimTemplateName\":\"t\"}],\"containers\":[{\"name\":\"c\","
         "\"resources\":{\"claims\":[{\"name\":\"gpu\"}]}}]},\"status\":{\"phase\":\"Running\"}}",
         true, true},
        {"{\"metadata\":{\"name\":\"x\",\"namespace\":\"a\"},\"spec\":{\"nodeName\":\"h100-1\","
         "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
         "\"status\":{\"extendedResourceClaimStatus\":{\"resourceClaimName\":\"x-gpu-abc\"}}}",
         true, true},
        /* an operand pod: nvidia.com/ in its tolerations and node selector, no request */
        {"{\"metadata\":{\"name\":\"nvidia-device-plugin-daemonset-x1\",\"namespace\":"
         "\"gpu-operator\",\"labels\":{\"app\":\"nvidia-device-plugin-daemonset\"}},\"spec\":{"
         "\"nodeSelector\":{\"nvidia.com/gpu.deploy.device-plugin\":\"true\"},\"tolerations\":[{"
         "\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],"
         "\"containers\":[{\"name\":\"p\",\"image\":\"gpuop\",\"resources\":{}}]},"
         "\"status\":{\"phase\":\"Running\"}}",
         false, false},
        /* a workload with CPU requests only; one pinned to GPU nodes with CPU requests
         * (decoded, then dropped); one requesting another vendor's extended resource, which
         * the view counts nowhere (a DeviceClass's non-GPU extendedResourceName is unmapped) */
        {"{\"metadata\":{\"name\":\"w\",\"namespace\":\"b\"},\"spec\":{\"containers\":[{"
         "\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}}]}}",
         false, false},
        {"{\"metadata\":{\"name\":\"s\",\"namespace\":\"b\"},\"spec\":{\"nodeSelector\":{"
         "\"nvidia.com/gpu.present\":\"true\"},\"containers\":[{\"name\":\"c\",\"resources\":{"
         "\"requests\":{\"cpu\":\"1\"}}}]}}",
         false, true},
        {"{\"metadata\":{\"name\":\"o\",\"namespace\":\"b\"},\"spec\":{\"containers\":[{"
         "\"name\":\"c\",\"resources\":{\"limits\":{\"example.com/gpu\":\"1\"}}}]}}",
         false, false},
    };
    _cleanup_json_ json_t *docs = load_cluster();
    _cleanup_json_ json_t *pods = of_kind(docs, "Pod", NULL);
    size_t n_cluster = json_array_size(pods);
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        json_t *pod = json_loads(cases[i].pod, 0, NULL);
        assert_non_null(pod);
        if (op_gpuquota_pod_counts(pod) != cases[i].counts)
            fail_msg("case %zu counts %d", i, !cases[i].counts);
        json_array_append_new(pods, pod);
    }
    _cleanup_json_ json_t *kept = json_array();
    size_t i;
    json_t *pod;
    json_array_foreach (pods, i, pod) {
        for (int esc = 0; esc < 2; esc++) {
            _cleanup_free_ char *text =
                json_dumps(pod, JSON_COMPACT | (esc ? JSON_ESCAPE_SLASH : 0));
            bool may = kube_json_may_hold(text, strlen(text), op_gpuquota_pod_texts);
            if (op_gpuquota_pod_counts(pod) && !may)
                fail_msg("pod %zu counts, yet the prefilter passes it over: %s", i, text);
            if (!esc && i >= n_cluster && may != cases[i - n_cluster].decoded)
                fail_msg("case %zu: decoded %d", i - n_cluster, may);
            if (!esc && may)
                json_array_append(kept, pod);
        }
    }
    assert_true(json_array_size(kept) < json_array_size(pods));
    /* the view, of every pod and of those the informer decodes */
    _cleanup_json_ json_t *nodes = of_kind(docs, "Node", NULL);
    _cleanup_json_ json_t *quotas = of_kind(docs, "ResourceQuota", NULL);
    _cleanup_json_ json_t *classes =
        json_loads("[{\"metadata\":{\"name\":\"gpu.nvidia.com\"},\"spec\":{"
                   "\"extendedResourceName\":\"nvidia.com/gpu\"}},{\"metadata\":{\"name\":"
                   "\"other\"},\"spec\":{\"extendedResourceName\":\"example.com/gpu\"}}]",
                   0, NULL);
    json_t *views[2];
    for (int k = 0; k < 2; k++) {
        struct cap_input in = {
            .nodes = nodes, .pods = k ? kept : pods, .quotas = quotas, .classes = classes};
        struct cap_view *v = NULL;
        struct err e = {0};
        if (cap_view_compute(&in, &v, &e) < 0)
            fail_msg("%s", err_msg(&e));
        views[k] = cap_view_to_json(v);
        cap_view_free(v);
    }
    if (!json_equal(views[0], views[1])) {
        _cleanup_free_ char *a = json_dumps(views[0], JSON_COMPACT | JSON_SORT_KEYS);
        _cleanup_free_ char *b = json_dumps(views[1], JSON_COMPACT | JSON_SORT_KEYS);
        fail_msg("every pod:\n%s\nthe pods decoded:\n%s", a, b);
    }
    /* and the GPU pods are counted: the cluster's three and the cases' */
    _cleanup_free_ char *text = json_dumps(views[1], JSON_COMPACT);
    assert_non_null(strstr(text, "\"notebooks\""));
    json_decref(views[0]);
    json_decref(views[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_findings),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_pod_prefilter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
