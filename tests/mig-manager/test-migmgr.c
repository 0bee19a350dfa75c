/* SPDX-License-Identifier: Apache-2.0 */
/* migmgr's core: the decision table, and the operand pause with the MIG manager's word. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "kobj.h"
#include "mig-manager.h"

static void test_decide(void **state)
{
    (void)state;
    static const struct {
        struct mm_input in;
        enum mm_action want;
    } t[] = {
        /* no config wanted */
        {{0}, MM_NOTHING},
        {{.want = ""}, MM_NOTHING},
        {{.paused = true}, MM_RESTORE},             /* a pause a killed run left */
        {{.progress = "all-balanced"}, MM_RESTORE}, /* the label removed mid-change */
        /* a config wanted */
        {{.want = "a", .matches = false}, MM_CHANGE},
        {{.want = "a", .state = "pending", .progress = "a", .paused = true}, MM_CHANGE},
        {{.want = "a", .state = "success", .matches = true}, MM_NOTHING},
        {{.want = "a", .matches = true}, MM_FINISH}, /* first sight, already laid out */
        {{.want = "a", .state = "pending", .progress = "a", .paused = true, .matches = true},
         MM_FINISH}, /* killed after the apply */
        {{.want = "a", .state = "success", .matches = true, .paused = true}, MM_FINISH},
        {{.want = "a", .state = "success", .matches = false}, MM_CHANGE}, /* changed by hand */
        /* refusals and failures */
        {{.want = "a", .config_error = true}, MM_REFUSE},
        {{.want = "a", .state = "pending", .progress = "a", .paused = true, .config_error = true},
         MM_REFUSE},
        {{.want = "a", .state = "failed", .failed = "a", .config_error = true}, MM_NOTHING},
        {{.want = "a", .state = "failed", .failed = "a"}, MM_NOTHING}, /* no retry loop */
        {{.want = "b", .state = "failed", .failed = "a"}, MM_CHANGE},  /* a new label */
        {{.want = "a", .state = "failed", .failed = "a", .paused = true}, MM_CHANGE},
        /* a mode change waiting for a GPU reset: rebooting, once; then the change again */
        {{.want = "a", .state = "pending", .progress = "a", .paused = true, .reset_pending = true},
         MM_AWAIT_RESET},
        {{.want = "a", .state = "rebooting", .progress = "a", .reset_pending = true}, MM_NOTHING},
        {{.want = "a",
          .state = "rebooting",
          .progress = "a",
          .paused = true,
          .reset_pending = true},
         MM_AWAIT_RESET}, /* killed while restoring the operands */
        {{.want = "a", .reset_pending = true}, MM_AWAIT_RESET}, /* killed before it was written */
        {{.want = "b", .state = "rebooting", .progress = "a", .reset_pending = true},
         MM_AWAIT_RESET}, /* another config wanting the same pending mode */
        {{.want = "a", .state = "rebooting", .progress = "a"}, MM_CHANGE}, /* reset done */
        {{.want = "a", .state = "rebooting", .progress = "a", .matches = true}, MM_FINISH},
        {{.want = "a",
          .state = "rebooting",
          .progress = "a",
          .config_error = true,
          .reset_pending = true},
         MM_REFUSE}, /* the config file changed under it */
        {{.want = "", .state = "rebooting", .progress = "a"}, MM_RESTORE},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        enum mm_action a = mm_decide(&t[i].in);
        if (a != t[i].want)
            fail_msg("case %zu: %s, wanted %s", i, mm_action_name(a), mm_action_name(t[i].want));
    }
}

static void test_pause(void **state)
{
    (void)state;
    json_t *labels = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:s}", "nvidia.com/gpu.deploy.device-plugin", "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery", "paused-for-driver-upgrade",
        "nvidia.com/gpu.deploy.dcgm", "false", "nvidia.com/gpu.deploy.dcgm-exporter", "true",
        "nvidia.com/gpu.deploy.mig-manager", "true", "nvidia.com/gpu.deploy.driver", "true");
    struct err e = {0};
    json_t *p = NULL;
    assert_false(nodeops_labels_paused(labels, &mm_pause));
    assert_int_equal(nodeops_labels_patch(labels, &mm_pause, false, &p, &e), 0);
    json_t *want = json_pack("{s:s,s:s,s:s}", "nvidia.com/gpu.deploy.device-plugin", MM_PAUSED,
                             "nvidia.com/gpu.deploy.gpu-feature-discovery",
                             "paused-for-driver-upgrade_" MM_PAUSED,
                             "nvidia.com/gpu.deploy.dcgm-exporter", MM_PAUSED);
    assert_true(json_equal(p, want)); /* dcgm=false kept; mig-manager and driver not covered */
    json_object_update(labels, p);
    json_decref(p);
    json_decref(want);
    assert_true(nodeops_labels_paused(labels, &mm_pause));
    assert_int_equal(nodeops_labels_patch(labels, &mm_pause, false, &p, &e), 0);
    assert_int_equal(json_object_size(p), 0); /* paused twice: nothing more */
    json_decref(p);
    assert_int_equal(nodeops_labels_patch(labels, &mm_pause, true, &p, &e), 0);
    json_object_update(labels, p);
    json_decref(p);
    assert_string_equal(kobj_str(labels, "nvidia.com/gpu.deploy.device-plugin"), "true");
    assert_string_equal(kobj_str(labels, "nvidia.com/gpu.deploy.gpu-feature-discovery"),
                        "paused-for-driver-upgrade"); /* the driver manager's pause stays */
    assert_string_equal(kobj_str(labels, "nvidia.com/gpu.deploy.dcgm"), "false");
    assert_false(nodeops_labels_paused(labels, &mm_pause));
    json_decref(labels);
}

/* The Node as JSON, for the patch tests. */
static json_t *node(const char *text)
{
    json_error_t je;
    json_t *n = json_loads(text, 0, &je);
    assert_non_null(n);
    return n;
}

static void assert_json(const json_t *got, const char *want_text)
{
    json_t *want = want_text ? node(want_text) : NULL;
    if (!json_equal(got, want) && (got || want)) {
        char *g = got ? json_dumps(got, JSON_SORT_KEYS) : NULL;
        fail_msg("got %s, wanted %s", g ? g : "NULL", want_text ? want_text : "NULL");
    }
    json_decref(want);
}

static void test_read_and_steps(void **state)
{
    (void)state;
    json_t *n = node("{\"metadata\":{\"labels\":{\"nvidia.com/mig.config\":\"all-1g\","
                     "\"nvidia.com/mig.config.state\":\"pending\","
                     "\"nvidia.com/gpu.deploy.dcgm\":\"paused-for-mig-change\"},"
                     "\"annotations\":{\"gpuop.dev/mig-manager.progress\":\"all-1g\","
                     "\"gpuop.dev/mig-manager.force\":\"true\"}}}");
    struct mm_input in;
    mm_input_read(n, &in);
    assert_string_equal(in.want, "all-1g");
    assert_string_equal(in.state, "pending");
    assert_string_equal(in.progress, "all-1g");
    assert_null(in.failed);
    assert_true(in.paused);
    assert_false(in.matches || in.config_error || in.reset_pending); /* the GPUs' */
    assert_false(mm_evict_first(n));                                 /* forced */
    json_decref(n);
    n = node("{\"metadata\":{}}");
    assert_true(mm_evict_first(n));
    json_decref(n);
    static const struct {
        int r;
        bool reset_required, still_pending;
        enum mm_after_apply want;
    } t[] = {
        {0, false, false, MM_APPLIED},       {-EIO, false, false, MM_APPLY_FAILED},
        {-EIO, true, true, MM_APPLY_FAILED}, {0, true, true, MM_RESET_WAIT},
        {0, true, false, MM_RESET_DONE},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++)
        assert_int_equal(mm_after_apply(t[i].r, t[i].reset_required, t[i].still_pending),
                         t[i].want);
    assert_string_equal(mm_hook_names[0], "pending");
}

static void test_patches(void **state)
{
    (void)state;
    struct err e = {0};
    struct mm_patch p;
    json_t *n = node("{\"metadata\":{\"labels\":{\"nvidia.com/mig.config.state\":\"pending\","
                     "\"nvidia.com/gpu.deploy.device-plugin\":\"paused-for-mig-change\"},"
                     "\"annotations\":{\"gpuop.dev/mig-manager.progress\":\"a\","
                     "\"gpuop.dev/mig-manager.reason\":\"waiting for an eviction: pdb\"}}}");
    /* success: operands back, progress and reason gone, applied recorded */
    assert_int_equal(mm_conclude_patch(n, "success", "a", NULL, &p, &e), 0);
    assert_json(p.labels, "{\"nvidia.com/gpu.deploy.device-plugin\":\"true\","
                          "\"nvidia.com/mig.config.state\":\"success\"}");
    assert_json(p.annotations, "{\"gpuop.dev/mig-manager.progress\":null,"
                               "\"gpuop.dev/mig-manager.reason\":null,"
                               "\"gpuop.dev/mig-manager.failed\":null,"
                               "\"gpuop.dev/mig-manager.applied\":\"a\"}");
    mm_patch_clear(&p);
    /* failed: the config is not tried again; applied left as it is */
    assert_int_equal(mm_conclude_patch(n, "failed", "a", "bad", &p, &e), 0);
    assert_json(p.annotations, "{\"gpuop.dev/mig-manager.progress\":null,"
                               "\"gpuop.dev/mig-manager.reason\":\"bad\","
                               "\"gpuop.dev/mig-manager.failed\":\"a\"}");
    mm_patch_clear(&p);
    /* the restore of a run left behind: no state */
    assert_int_equal(mm_conclude_patch(n, NULL, NULL, NULL, &p, &e), 0);
    assert_json(p.labels, "{\"nvidia.com/gpu.deploy.device-plugin\":\"true\"}");
    mm_patch_clear(&p);
    /* pending for a already: nothing; for b: state, progress, reason and failed */
    mm_pending_patch(n, "a", &p);
    assert_true(mm_patch_empty(&p));
    mm_patch_clear(&p);
    mm_pending_patch(n, "b", &p);
    assert_json(p.labels, "{\"nvidia.com/mig.config.state\":\"pending\"}");
    assert_json(p.annotations, "{\"gpuop.dev/mig-manager.progress\":\"b\","
                               "\"gpuop.dev/mig-manager.reason\":null,"
                               "\"gpuop.dev/mig-manager.failed\":null}");
    mm_patch_clear(&p);
    /* paused already */
    assert_int_equal(mm_pause_patch(n, &p, &e), 0);
    assert_json(p.labels, "{}");
    assert_true(mm_patch_empty(&p));
    mm_patch_clear(&p);
    /* a reset to wait for: the first time says so */
    bool first = false;
    assert_int_equal(mm_await_reset_patch(n, "a", "GPU 0 waits", &p, &first, &e), 0);
    assert_true(first);
    assert_json(p.labels, "{\"nvidia.com/gpu.deploy.device-plugin\":\"true\","
                          "\"nvidia.com/mig.config.state\":\"rebooting\"}");
    assert_json(p.annotations, "{\"gpuop.dev/mig-manager.progress\":\"a\","
                               "\"gpuop.dev/mig-manager.reason\":\"GPU 0 waits\","
                               "\"gpuop.dev/mig-manager.failed\":null}");
    mm_patch_clear(&p);
    /* an eviction's wait: recorded once; removed after */
    mm_blocked_patch(n, "pdb", &p);
    assert_true(mm_patch_empty(&p));
    mm_patch_clear(&p);
    mm_blocked_patch(n, "another pdb", &p);
    assert_json(p.annotations,
                "{\"gpuop.dev/mig-manager.reason\":\"waiting for an eviction: another pdb\"}");
    mm_patch_clear(&p);
    mm_unblocked_patch(n, &p);
    assert_json(p.annotations, "{\"gpuop.dev/mig-manager.reason\":null}");
    mm_patch_clear(&p);
    json_decref(n);
    n = node("{\"metadata\":{\"labels\":{\"nvidia.com/mig.config.state\":\"rebooting\"}}}");
    assert_int_equal(mm_await_reset_patch(n, "a", "GPU 0 waits", &p, &first, &e), 0);
    assert_false(first);
    mm_patch_clear(&p);
    mm_unblocked_patch(n, &p);
    assert_true(mm_patch_empty(&p));
    mm_patch_clear(&p);
    json_decref(n);
}

static void test_events(void **state)
{
    (void)state;
    struct mm_event_text t;
    mm_event_text(MM_EV_REFUSED, "a", NULL, "no config named", &t);
    assert_true(t.warning);
    assert_string_equal(t.reason, "MIGConfigFailed");
    assert_string_equal(t.msg, "nvidia.com/mig.config=a refused, the GPUs keep their layout: no "
                               "config named");
    mm_event_text(MM_EV_ROLLBACK_FAILED, "a", NULL, "GPU 1", &t);
    assert_string_equal(t.msg, "nvidia.com/mig.config=a failed, the rollback failed too: GPU 1");
    mm_event_text(MM_EV_FAILED, "a", NULL, "GPU 1", &t);
    assert_string_equal(t.msg,
                        "nvidia.com/mig.config=a failed, the previous layout is back: GPU 1");
    mm_event_text(MM_EV_APPLIED, "b", "a", NULL, &t);
    assert_false(t.warning);
    assert_string_equal(t.reason, "MIGConfigApplied");
    assert_string_equal(t.msg, "MIG layout changed from a to b; pods evicted: none");
    mm_event_text(MM_EV_REBOOT, "b", NULL, "GPU 0", &t);
    assert_string_equal(t.reason, "MIGRebootRequired");
    mm_event_text(MM_EV_EVICTION_BLOCKED, NULL, NULL, "waiting for an eviction: pdb", &t);
    assert_string_equal(t.reason, "MIGEvictionBlocked");
    assert_string_equal(t.msg, "waiting for an eviction: pdb");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decide),         cmocka_unit_test(test_pause),
        cmocka_unit_test(test_read_and_steps), cmocka_unit_test(test_patches),
        cmocka_unit_test(test_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
