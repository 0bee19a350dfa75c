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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decide),
        cmocka_unit_test(test_pause),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
