/* SPDX-License-Identifier: Apache-2.0 */
/* One write per node: op_node_merge's rule, table-tested (operator.h), and the phase the
 * executor writes a merged patch in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "kobj.h"
#include "operator.h"

/* The operator's table, in its order: the driver upgrade, then remediation, then the deploy
 * labels (reconcile.c), and a fourth to show the merge takes any number. */
static const struct op_node_controller ctl[] = {
    {"driver-upgrade", false},
    {"remediation", false},
    {"deploy", true},
    {"fourth", false},
};

struct wish {
    size_t controller;
    const char *patch; /* JSON */
};

struct mcase {
    const char *name;
    struct wish w[4];
    size_t n;
    const char *want;          /* JSON, NULL: no patch */
    const char *want_fallback; /* JSON, NULL: none */
    bool deploys;
    uint64_t controllers;
    const char *conflicts; /* "field>winner:loser;..." in order, "" none */
    bool fails;
};

static const struct mcase cases[] = {
    {"deploy labels alone",
     {{2, "{\"metadata\":{\"labels\":{\"nvidia.com/gpu.deploy.driver\":\"true\"}}}"}},
     1,
     "{\"metadata\":{\"labels\":{\"nvidia.com/gpu.deploy.driver\":\"true\"}}}",
     NULL,
     true,
     1u << 2,
     ""},
    {"fresh install: deploy labels and upgrade-done in one patch, the upgrade's precondition",
     {{2, "{\"metadata\":{\"labels\":{\"nvidia.com/gpu.deploy.driver\":\"true\"}}}"},
      {0, "{\"metadata\":{\"labels\":{\"nvidia.com/gpu-driver-upgrade-state\":\"upgrade-done\"},"
          "\"annotations\":{\"upgrade.gpuop.dev/state-since\":\"100\"},"
          "\"resourceVersion\":\"7\"}}"}},
     2,
     "{\"metadata\":{\"labels\":{\"nvidia.com/gpu-driver-upgrade-state\":\"upgrade-done\","
     "\"nvidia.com/gpu.deploy.driver\":\"true\"},"
     "\"annotations\":{\"upgrade.gpuop.dev/state-since\":\"100\"},\"resourceVersion\":\"7\"}}",
     "{\"metadata\":{\"labels\":{\"nvidia.com/gpu.deploy.driver\":\"true\"}}}",
     true,
     (1u << 0) | (1u << 2),
     ""},
    {"bookkeeping alone: no fallback, not deploying",
     {{0, "{\"metadata\":{\"labels\":{\"nvidia.com/gpu-driver-upgrade-state\":\"cordon-required\"},"
          "\"resourceVersion\":\"9\"},\"spec\":{\"unschedulable\":true}}"}},
     1,
     "{\"metadata\":{\"labels\":{\"nvidia.com/gpu-driver-upgrade-state\":\"cordon-required\"},"
     "\"resourceVersion\":\"9\"},\"spec\":{\"unschedulable\":true}}",
     NULL,
     false,
     1u << 0,
     ""},
    {"the controller first in the table wins a label; the loser is named",
     {{2, "{\"metadata\":{\"labels\":{\"x\":\"deploy\",\"y\":\"1\"}}}"},
      {1, "{\"metadata\":{\"labels\":{\"x\":\"remediation\"}}}"}},
     2,
     "{\"metadata\":{\"labels\":{\"x\":\"remediation\",\"y\":\"1\"}}}",
     NULL,
     true,
     (1u << 1) | (1u << 2),
     "metadata.labels.x>1:2"},
    {"a removal and a set of one annotation: the first ranked wins",
     {{3, "{\"metadata\":{\"annotations\":{\"a\":\"v\"}}}"},
      {0, "{\"metadata\":{\"annotations\":{\"a\":null}}}"}},
     2,
     "{\"metadata\":{\"annotations\":{\"a\":null}}}",
     NULL,
     false,
     (1u << 0) | (1u << 3),
     "metadata.annotations.a>0:3"},
    {"equal wishes are no conflict",
     {{0, "{\"metadata\":{\"labels\":{\"x\":\"1\"}}}"},
      {2, "{\"metadata\":{\"labels\":{\"x\":\"1\"}}}"}},
     2,
     "{\"metadata\":{\"labels\":{\"x\":\"1\"}}}",
     NULL,
     true,
     (1u << 0) | (1u << 2),
     ""},
    {"a cordon holds over an uncordon by a controller ranked first",
     {{0, "{\"spec\":{\"unschedulable\":false}}"}, {1, "{\"spec\":{\"unschedulable\":true}}"}},
     2,
     "{\"spec\":{\"unschedulable\":true}}",
     NULL,
     false,
     (1u << 0) | (1u << 1),
     "spec.unschedulable>1:0"},
    {"a wish planned from another version is dropped whole",
     {{0, "{\"metadata\":{\"labels\":{\"s\":\"a\"},\"resourceVersion\":\"5\"}}"},
      {3, "{\"metadata\":{\"labels\":{\"t\":\"b\"},\"resourceVersion\":\"4\"}}"},
      {2, "{\"metadata\":{\"labels\":{\"d\":\"true\"}}}"}},
     3,
     "{\"metadata\":{\"labels\":{\"s\":\"a\",\"d\":\"true\"},\"resourceVersion\":\"5\"}}",
     "{\"metadata\":{\"labels\":{\"d\":\"true\"}}}",
     true,
     (1u << 0) | (1u << 2),
     "metadata.resourceVersion>0:3"},
    {"four controllers, in any order of wishes",
     {{3, "{\"metadata\":{\"labels\":{\"k\":\"4\",\"four\":\"y\"}}}"},
      {2, "{\"metadata\":{\"labels\":{\"k\":\"3\"}}}"},
      {1, "{\"metadata\":{\"labels\":{\"k\":\"2\"}}}"},
      {0, "{\"metadata\":{\"labels\":{\"k\":\"1\"}}}"}},
     4,
     "{\"metadata\":{\"labels\":{\"k\":\"1\",\"four\":\"y\"}}}",
     NULL,
     true,
     0xf,
     "metadata.labels.k>0:1;metadata.labels.k>0:2;metadata.labels.k>0:3"},
    {"a wish that changes nothing: no patch",
     {{2, "{\"metadata\":{}}"}},
     1,
     NULL,
     NULL,
     false,
     0,
     ""},
    {"a wish setting a field the merge does not know fails",
     {{0, "{\"metadata\":{\"labels\":{\"x\":\"1\"}},\"status\":{}}"}},
     1,
     NULL,
     NULL,
     false,
     0,
     "",
     true},
    {"a label value that is no string fails",
     {{0, "{\"metadata\":{\"labels\":{\"x\":1}}}"}},
     1,
     NULL,
     NULL,
     false,
     0,
     "",
     true},
};

static json_t *parse(const char *s)
{
    json_error_t je;
    json_t *v = json_loads(s, 0, &je);
    if (!v)
        fail_msg("bad JSON in the table: %s: %s", s, je.text);
    return v;
}

static void test_merge_table(void **state)
{
    (void)state;
    for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
        const struct mcase *tc = &cases[c];
        json_t *patches[4] = {0};
        struct op_node_wish w[4];
        for (size_t i = 0; i < tc->n; i++) {
            patches[i] = parse(tc->w[i].patch);
            w[i] = (struct op_node_wish){"gpu-1", tc->w[i].controller, patches[i]};
        }
        char *before[4] = {0};
        for (size_t i = 0; i < tc->n; i++)
            before[i] = json_dumps(patches[i], JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        struct op_node_merged m = {0};
        struct err e = {0};
        int r = op_node_merge(ctl, ARRAY_SIZE(ctl), w, tc->n, &m, &e);
        /* the merge makes new objects: a wish is shared between nodes alike (held once), so
         * neither the merge nor a change to what it made may reach into one */
        json_t *outs[] = {m.patch, m.fallback};
        for (size_t o = 0; o < ARRAY_SIZE(outs); o++) {
            if (!outs[o])
                continue;
            json_object_set_new(
                kobj_ensure_keys(outs[o], (const char *const[]){"metadata", "labels", NULL}),
                "test.example/changed", json_string("yes"));
            json_object_set_new(
                kobj_ensure_keys(outs[o], (const char *const[]){"metadata", "annotations", NULL}),
                "test.example/changed", json_string("yes"));
            json_object_set_new(kobj_ensure_object(outs[o], "spec"), "unschedulable",
                                json_string("changed"));
        }
        for (size_t i = 0; i < tc->n; i++) {
            char *after = json_dumps(patches[i], JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
            if (!streq_ptr(before[i], after))
                fail_msg("%s: wish %zu changed: %s", tc->name, i, after);
            free(after);
            free(before[i]);
        }
        if (r == 0) {
            /* the checks below read what the merge made */
            op_node_merged_done(&m);
            r = op_node_merge(ctl, ARRAY_SIZE(ctl), w, tc->n, &m, &e);
            assert_int_equal(r, 0);
        }
        if (tc->fails) {
            if (r != -EINVAL)
                fail_msg("%s: want -EINVAL, got %d", tc->name, r);
            assert_non_null(strstr(err_msg(&e), "gpu-1"));
        } else {
            if (r != 0)
                fail_msg("%s: %s", tc->name, err_msg(&e));
            json_t *want = tc->want ? parse(tc->want) : NULL;
            if (!json_equal(want, m.patch) && !(want == NULL && m.patch == NULL)) {
                char *got = m.patch ? json_dumps(m.patch, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
                fail_msg("%s: patch %s", tc->name, got ? got : "(none)");
            }
            json_decref(want);
            want = tc->want_fallback ? parse(tc->want_fallback) : NULL;
            if (!(want == NULL && m.fallback == NULL) && !json_equal(want, m.fallback)) {
                char *got =
                    m.fallback ? json_dumps(m.fallback, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
                fail_msg("%s: fallback %s", tc->name, got ? got : "(none)");
            }
            json_decref(want);
            if (m.deploys != tc->deploys || m.controllers != tc->controllers)
                fail_msg("%s: deploys %d controllers %llx", tc->name, m.deploys,
                         (unsigned long long)m.controllers);
            char got[512] = "";
            for (size_t i = 0; i < m.n_conflicts; i++) {
                char one[160];
                snprintf(one, sizeof(one), "%s%s>%zu:%zu", i ? ";" : "", m.conflicts[i].field,
                         m.conflicts[i].winner, m.conflicts[i].loser);
                strncat(got, one, sizeof(got) - strlen(got) - 1);
            }
            if (strcmp(got, tc->conflicts) != 0)
                fail_msg("%s: conflicts \"%s\", want \"%s\"", tc->name, got, tc->conflicts);
            /* the executor: a deploying wish goes before the status, bookkeeping after it */
            if (m.patch)
                assert_int_equal(op_node_patch_phase(&m),
                                 tc->deploys ? OP_PHASE_DEPLOY : OP_PHASE_BOOKKEEPING);
        }
        op_node_merged_done(&m);
        for (size_t i = 0; i < tc->n; i++)
            json_decref(patches[i]);
    }
}

static void test_merge_wishes_of_two_nodes_fail(void **state)
{
    (void)state;
    json_t *p = parse("{\"metadata\":{\"labels\":{\"x\":\"1\"}}}");
    struct op_node_wish w[] = {{"a", 0, p}, {"b", 2, p}};
    struct op_node_merged m = {0};
    struct err e = {0};
    assert_int_equal(op_node_merge(ctl, ARRAY_SIZE(ctl), w, 2, &m, &e), -EINVAL);
    assert_null(m.patch);
    json_decref(p);
}

/* The executor's order is a rule of its own: readiness first, then the status, then
 * bookkeeping, then Events. */
static void test_write_phases_order(void **state)
{
    (void)state;
    assert_true(OP_PHASE_DEPLOY < OP_PHASE_OBJECTS);
    assert_true(OP_PHASE_OBJECTS < OP_PHASE_STATUS);
    assert_true(OP_PHASE_STATUS < OP_PHASE_BOOKKEEPING);
    assert_true(OP_PHASE_BOOKKEEPING < OP_PHASE_EVENTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_table),
        cmocka_unit_test(test_merge_wishes_of_two_nodes_fail),
        cmocka_unit_test(test_write_phases_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
