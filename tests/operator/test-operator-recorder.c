/* SPDX-License-Identifier: Apache-2.0 */
/* Events that scale (operator.h, op_recorder): aggregation per group, counting up within the
 * window, the token bucket, a failed write forgotten, and the queue the reconcile collects in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "kobj.h"
#include "operator.h"

#define T0 1795987800000ull /* 2026-11-29T21:30:00Z */

static const struct op_event_ref policy = {"nvidia.com/v1", "ClusterPolicy", NULL,
                                           "gpu-cluster-policy", "uid-1"};

/* A node's Event of the driver upgrade, grouped by pool (as upgrade-exec.c queues it). */
static struct op_event_in node_event(const char *node, const char *pool, const char *message)
{
    return (struct op_event_in){.about = {"v1", "Node", NULL, node, NULL},
                                .ns = "default",
                                .type = "Normal",
                                .reason = "GPUDriverUpgrade",
                                .message = message,
                                .group = pool,
                                .group_ref = policy,
                                .group_ns = "gpu-operator"};
}

static char names[200][16];

static struct op_event_writes plan_nodes(struct op_recorder *r, size_t first, size_t n,
                                         const char *pool, const char *msg, uint64_t now)
{
    struct op_event_in ev[200];
    assert_true(n <= 200);
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "gpu-%zu", first + i);
        ev[i] = node_event(names[i], pool, msg);
    }
    struct op_event_writes w = {0};
    op_recorder_plan(r, ev, n, now, &w);
    return w;
}

static const char *upgrade_done = "Successfully updated node state label to [upgrade-done]";

static void test_many_nodes_one_event(void **state)
{
    (void)state;
    struct op_recorder *r = op_recorder_new(NULL);
    struct op_event_writes w = plan_nodes(r, 0, 100, "default", upgrade_done, T0);
    assert_int_equal(w.n, 1);
    assert_false(w.v[0].patch);
    assert_string_equal(w.v[0].ns, "gpu-operator");
    json_t *b = w.v[0].body;
    assert_string_equal(kobj_path_str(b, "involvedObject.kind"), "ClusterPolicy");
    assert_string_equal(kobj_path_str(b, "involvedObject.name"), "gpu-cluster-policy");
    assert_string_equal(kobj_path_str(b, "metadata.name"), w.v[0].name);
    assert_int_equal(json_integer_value(kobj_path(b, "count")), 100);
    assert_int_equal(json_integer_value(kobj_path(b, "series.count")), 100);
    assert_string_equal(kobj_path_str(b, "reason"), "GPUDriverUpgrade");
    assert_string_equal(kobj_path_str(b, "message"),
                        "Successfully updated node state label to [upgrade-done] on 100 nodes: "
                        "gpu-0, gpu-1, gpu-2, gpu-3, gpu-4 and 95 more");
    assert_string_equal(kobj_path_str(b, "firstTimestamp"), "2026-11-29T21:30:00Z");
    assert_int_equal(w.dropped, 0);
    op_recorder_result(r, &w.v[0], true);
    op_event_writes_done(&w);

    /* later members of the group within the window count the one Event up, however few */
    w = plan_nodes(r, 100, 3, "default", upgrade_done, T0 + 5000);
    assert_int_equal(w.n, 1);
    assert_true(w.v[0].patch);
    assert_int_equal(json_integer_value(kobj_path(w.v[0].body, "count")), 103);
    assert_int_equal(json_integer_value(kobj_path(w.v[0].body, "series.count")), 103);
    assert_string_equal(kobj_path_str(w.v[0].body, "series.lastObservedTime"),
                        "2026-11-29T21:30:05.000000Z");
    assert_non_null(strstr(kobj_path_str(w.v[0].body, "message"), "on 103 nodes: gpu-100"));
    op_event_writes_done(&w);

    /* another pool, another message: Events of their own */
    w = plan_nodes(r, 0, 20, "canary", upgrade_done, T0 + 6000);
    assert_int_equal(w.n, 1);
    assert_false(w.v[0].patch);
    op_event_writes_done(&w);
    w = plan_nodes(r, 0, 20, "default", "Node gpu-x failed", T0 + 6000);
    assert_int_equal(w.n, 1);
    assert_false(w.v[0].patch);
    op_event_writes_done(&w);
    op_recorder_free(r);
}

static void test_few_nodes_each_its_own(void **state)
{
    (void)state;
    struct op_recorder *r = op_recorder_new(NULL);
    struct op_event_writes w =
        plan_nodes(r, 0, OP_EVENT_AGGREGATE_MIN - 1, "default", upgrade_done, T0);
    assert_int_equal(w.n, OP_EVENT_AGGREGATE_MIN - 1);
    for (size_t i = 0; i < w.n; i++) {
        assert_false(w.v[i].patch);
        assert_string_equal(w.v[i].ns, "default");
        assert_string_equal(kobj_path_str(w.v[i].body, "involvedObject.kind"), "Node");
        assert_string_equal(kobj_path_str(w.v[i].body, "involvedObject.name"), names[i]);
        assert_string_equal(kobj_path_str(w.v[i].body, "message"), upgrade_done);
        assert_int_equal(json_integer_value(kobj_path(w.v[i].body, "count")), 1);
        assert_null(kobj_path(w.v[i].body, "series"));
    }
    op_event_writes_done(&w);
    op_recorder_free(r);
}

static struct op_event_in policy_event(const char *reason, const char *message)
{
    return (struct op_event_in){.about = policy,
                                .ns = "gpu-operator",
                                .type = "Warning",
                                .reason = reason,
                                .message = message};
}

static void test_repeat_counts_up_within_window(void **state)
{
    (void)state;
    struct op_recorder *r = op_recorder_new(NULL);
    struct op_event_in ev = policy_event("ReconcileFailed", "DaemonSet x refused");
    struct op_event_writes w = {0};
    op_recorder_plan(r, &ev, 1, T0, &w);
    assert_int_equal(w.n, 1);
    assert_false(w.v[0].patch);
    _cleanup_free_ char *name = xstrdup(w.v[0].name);
    op_recorder_result(r, &w.v[0], true);
    op_event_writes_done(&w);

    op_recorder_plan(r, &ev, 1, T0 + 60000, &w);
    assert_int_equal(w.n, 1);
    assert_true(w.v[0].patch);
    assert_string_equal(w.v[0].name, name);
    assert_string_equal(w.v[0].ns, "gpu-operator");
    assert_int_equal(json_integer_value(kobj_path(w.v[0].body, "count")), 2);
    assert_int_equal(json_integer_value(kobj_path(w.v[0].body, "series.count")), 2);
    assert_string_equal(kobj_path_str(w.v[0].body, "lastTimestamp"), "2026-11-29T21:31:00Z");
    assert_null(kobj_path(w.v[0].body, "message")); /* a single Event's message stays */
    /* and the whole Event, to create under its name when the one to count up is gone */
    json_t *re = w.v[0].recreate;
    assert_non_null(re);
    assert_string_equal(kobj_path_str(re, "metadata.name"), name);
    assert_string_equal(kobj_path_str(re, "message"), "DaemonSet x refused");
    assert_string_equal(kobj_path_str(re, "involvedObject.kind"), "ClusterPolicy");
    assert_int_equal(json_integer_value(kobj_path(re, "count")), 2);
    op_recorder_result(r, &w.v[0], true);
    op_event_writes_done(&w);

    /* past the window: a new Event */
    op_recorder_plan(r, &ev, 1, T0 + 60000 + OP_EVENT_WINDOW_MS + 1, &w);
    assert_int_equal(w.n, 1);
    assert_false(w.v[0].patch);
    assert_string_not_equal(w.v[0].name, name);
    op_event_writes_done(&w);
    op_recorder_free(r);
}

static void test_failed_write_forgotten(void **state)
{
    (void)state;
    struct op_recorder *r = op_recorder_new(NULL);
    struct op_event_in ev = policy_event("ReconcileFailed", "refused");
    struct op_event_writes w = {0};
    op_recorder_plan(r, &ev, 1, T0, &w);
    assert_int_equal(w.n, 1);
    op_recorder_result(r, &w.v[0], false);
    op_event_writes_done(&w);
    /* not stored: the repeat creates, rather than counting up an Event that is not there */
    op_recorder_plan(r, &ev, 1, T0 + 1000, &w);
    assert_int_equal(w.n, 1);
    assert_false(w.v[0].patch);
    op_event_writes_done(&w);
    op_recorder_free(r);
}

static void test_token_bucket(void **state)
{
    (void)state;
    struct op_recorder_opts o = {.burst = 3, .refill_ms = 10000};
    struct op_recorder *r = op_recorder_new(&o);
    char msg[5][24]; /* "message " and any int */
    struct op_event_in ev[5];
    for (int i = 0; i < 5; i++) {
        snprintf(msg[i], sizeof(msg[i]), "message %d", i);
        ev[i] = policy_event("Reason", msg[i]);
    }
    struct op_event_writes w = {0};
    op_recorder_plan(r, ev, 5, T0, &w);
    assert_int_equal(w.n, 3);
    assert_int_equal(w.dropped, 2);
    assert_string_equal(kobj_path_str(w.v[2].body, "message"), "message 2");
    op_event_writes_done(&w);
    /* one token back after refill_ms */
    op_recorder_plan(r, ev + 3, 2, T0 + 10000, &w);
    assert_int_equal(w.n, 1);
    assert_int_equal(w.dropped, 1);
    op_event_writes_done(&w);
    /* another object has its own bucket */
    struct op_event_in other = ev[0];
    other.about.name = "other-policy";
    op_recorder_plan(r, &other, 1, T0 + 10000, &w);
    assert_int_equal(w.n, 1);
    assert_int_equal(w.dropped, 0);
    op_event_writes_done(&w);
    op_recorder_free(r);
}

static void test_queue_roundtrip(void **state)
{
    (void)state;
    json_t *q = op_event_queue_new();
    char node[16] = "gpu-7";
    struct op_event_in a = node_event(node, "pool-a", upgrade_done);
    op_event_queue_add(q, &a);
    struct op_event_in b = policy_event("Ready", "all operands ready");
    op_event_queue_add(q, &b);
    strcpy(node, "changed"); /* the queue owns copies */
    size_t n = 0;
    struct op_event_in *v = op_event_queue_view(q, &n);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].about.name, "gpu-7");
    assert_string_equal(v[0].about.kind, "Node");
    assert_null(v[0].about.ns);
    assert_string_equal(v[0].group, "pool-a");
    assert_string_equal(v[0].group_ref.uid, "uid-1");
    assert_string_equal(v[0].group_ns, "gpu-operator");
    assert_string_equal(v[0].message, upgrade_done);
    assert_null(v[1].group);
    assert_string_equal(v[1].type, "Warning");
    assert_string_equal(v[1].reason, "Ready");
    free(v);
    json_decref(q);
}

/* Each write's body, as text without its generated name and times, in order. */
static json_t *bodies(const struct op_event_writes *w)
{
    json_t *out = json_array();
    for (size_t i = 0; i < w->n; i++) {
        json_t *b = json_deep_copy(w->v[i].body);
        json_object_del(json_object_get(b, "metadata"), "name");
        json_array_append_new(out, b);
    }
    return out;
}

/* A queue of 10,000 nodes' Events of one group keeps OP_EVENT_QUEUE_KEEP of them and counts
 * the rest; what the recorder writes from it is what it writes from all 10,000 Events: the
 * group's Event with the count and the sample, the repeats left out, a smaller group and the
 * Events of no group each as they are. */
static void test_queue_keeps_a_groups_first(void **state)
{
    (void)state;
    enum { N = 10000, SMALL = 3 };
    static char nm[N][16];
    static struct op_event_in all[N + N / 1000 + 1 + SMALL];
    size_t n = 0;
    json_t *q = op_event_queue_new();
    for (size_t i = 0; i < N; i++) {
        snprintf(nm[i], sizeof(nm[i]), "gpu-%zu", i);
        all[n] = node_event(nm[i], "default", upgrade_done);
        op_event_queue_add(q, &all[n++]);
        if (i % 1000 == 7) { /* a repeat: one object, counted once */
            all[n] = node_event(nm[i / 2], "default", upgrade_done);
            op_event_queue_add(q, &all[n++]);
        }
        if (i == 20) { /* another Event of the pass, not grouped */
            all[n] = policy_event("Ready", "all operands ready");
            op_event_queue_add(q, &all[n++]);
        }
        if (i < SMALL) { /* a group too small to aggregate */
            all[n] = node_event(nm[i], "canary", upgrade_done);
            op_event_queue_add(q, &all[n++]);
        }
    }
    assert_int_equal(n, ARRAY_SIZE(all));
    size_t nv = 0;
    struct op_event_in *v = op_event_queue_view(q, &nv);
    assert_int_equal(nv, OP_EVENT_QUEUE_KEEP + 1 + SMALL + 1); /* +1: a repeat among the kept */
    struct op_recorder *ra = op_recorder_new(NULL), *rq = op_recorder_new(NULL);
    struct op_event_writes wa = {0}, wq = {0};
    op_recorder_plan(ra, all, n, T0, &wa);
    op_recorder_plan(rq, v, nv, T0, &wq);
    assert_int_equal(wq.n, 1 + 1 + SMALL);
    json_t *ba = bodies(&wa), *bq = bodies(&wq);
    assert_true(json_equal(ba, bq));
    assert_int_equal(json_integer_value(kobj_path(json_array_get(bq, 0), "count")), N);
    assert_string_equal(kobj_path_str(json_array_get(bq, 0), "message"),
                        "Successfully updated node state label to [upgrade-done] on 10000 nodes: "
                        "gpu-0, gpu-1, gpu-2, gpu-3, gpu-4 and 9995 more");
    json_decref(ba);
    json_decref(bq);
    op_event_writes_done(&wa);
    op_event_writes_done(&wq);
    op_recorder_free(ra);
    op_recorder_free(rq);
    free(v);
    json_decref(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_nodes_one_event),
        cmocka_unit_test(test_few_nodes_each_its_own),
        cmocka_unit_test(test_repeat_counts_up_within_window),
        cmocka_unit_test(test_failed_write_forgotten),
        cmocka_unit_test(test_token_bucket),
        cmocka_unit_test(test_queue_roundtrip),
        cmocka_unit_test(test_queue_keeps_a_groups_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
