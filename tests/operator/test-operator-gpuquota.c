/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU quota findings and metrics over kubesim's two-pool cluster (sim/clusters/two-pools.yaml),
 * and what the planner makes of them: conditions on the ClusterPolicy, a Warning Event when a
 * finding's message changes and a Normal one when it clears, and no status write when nothing
 * changed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capacity.h"
#include "kobj.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_findings),
        cmocka_unit_test(test_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
