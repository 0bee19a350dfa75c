/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop doctor's pure core: facts filled by hand to results (the owner rule, the plugin and
 * clock checks, the verdict), and the remote mode's pod. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "doctor.h"
#include "doctorpod.h"

static struct doctor_facts *facts(void)
{
    struct doctor_facts *f = xcalloc(1, sizeof(*f));
    strlcpy_s(f->host_root, "/host", sizeof(f->host_root));
    strlcpy_s(f->driver_root, "/run/nvidia/driver", sizeof(f->driver_root));
    strlcpy_s(f->kernel, "6.1.0", sizeof(f->kernel));
    f->plugin_dir = true;
    f->clock_synced = 1;
    return f;
}

static const struct doctor_result *result(const struct doctor_result *r, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(r[i].id, id) == 0)
            return &r[i];
    fail_msg("no check %s", id);
    return NULL;
}

static void test_owner(void **state)
{
    (void)state;
    static const struct {
        bool smi, host_lib, root_lib, module;
        enum doctor_owner want;
        const char *part;
    } cases[] = {
        {false, false, false, false, DOCTOR_OWNER_NONE, "no driver"},
        {true, true, false, true, DOCTOR_OWNER_HOST, "the host's driver"},
        {true, true, false, false, DOCTOR_OWNER_HOST, "no nvidia module loaded"},
        {false, false, true, true, DOCTOR_OWNER_CONTAINER, "the containerized driver"},
        {true, true, true, true, DOCTOR_OWNER_BOTH, "a host install"},
        {false, false, false, true, DOCTOR_OWNER_HOST, "neither nvidia-smi"},
        /* libraries alone own nothing: they are named as leftovers */
        {false, true, false, false, DOCTOR_OWNER_NONE, "libraries left on the host"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct doctor_facts *f = facts();
        if (cases[i].smi)
            strlcpy_s(f->drv.host_smi, "/host/usr/bin/nvidia-smi", PATH_MAX);
        if (cases[i].host_lib)
            strlcpy_s(f->drv.host_nvml, "/host/usr/lib/libnvidia-ml.so.1", PATH_MAX);
        if (cases[i].root_lib)
            strlcpy_s(f->drv.root_nvml, "/host/run/nvidia/driver/usr/lib/libnvidia-ml.so.1",
                      PATH_MAX);
        f->drv.module[NODESTATE_MOD_NVIDIA] = cases[i].module;
        char why[DOCTOR_LINE_MAX];
        assert_int_equal(doctor_owner_decide(f, why, sizeof(why)), cases[i].want);
        if (!strstr(why, cases[i].part))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, why, cases[i].part);
        struct doctor_result r[DOCTOR_CHECKS];
        size_t n = doctor_check(f, r);
        assert_int_equal(n, DOCTOR_CHECKS);
        enum doctor_level lv = result(r, n, "driver-owner")->level;
        assert_int_equal(lv, cases[i].want == DOCTOR_OWNER_BOTH   ? DOCTOR_FAIL
                             : cases[i].want == DOCTOR_OWNER_NONE ? DOCTOR_WARN
                                                                  : DOCTOR_PASS);
        free(f);
    }
}

static void test_plugins(void **state)
{
    (void)state;
    struct doctor_facts *f = facts();
    struct doctor_result r[DOCTOR_CHECKS];
    /* none listening */
    size_t n = doctor_check(f, r);
    assert_int_equal(result(r, n, "device-plugins")->level, DOCTOR_WARN);
    /* one per resource: pass */
    f->n_sockets = 2;
    f->sockets[0] = (struct doctor_socket){"nvidia-gpu.sock", "nvidia.com/gpu", true};
    f->sockets[1] =
        (struct doctor_socket){"nvidia-mig-1g.10gb.sock", "nvidia.com/mig-1g.10gb", true};
    n = doctor_check(f, r);
    assert_int_equal(result(r, n, "device-plugins")->level, DOCTOR_PASS);
    /* a second for nvidia.com/gpu, but stale: a warning, not two plugins */
    f->n_sockets = 3;
    f->sockets[2] = (struct doctor_socket){"nvidia.sock", "nvidia.com/gpu", false};
    n = doctor_check(f, r);
    assert_int_equal(result(r, n, "device-plugins")->level, DOCTOR_WARN);
    assert_non_null(strstr(result(r, n, "device-plugins")->evidence, "stale socket nvidia.sock"));
    /* live: two plugins */
    f->sockets[2].live = true;
    n = doctor_check(f, r);
    assert_int_equal(result(r, n, "device-plugins")->level, DOCTOR_FAIL);
    /* and NVML failing with a plugin serving: the plugin-vs-nvml failure */
    strlcpy_s(f->nvml_error, "Driver Not Loaded", sizeof(f->nvml_error));
    n = doctor_check(f, r);
    assert_int_equal(result(r, n, "plugin-vs-nvml")->level, DOCTOR_FAIL);
    f->nvml_ok = true;
    n = doctor_check(f, r);
    assert_int_equal(result(r, n, "plugin-vs-nvml")->level, DOCTOR_PASS);
    free(f);
}

static void test_verdict(void **state)
{
    (void)state;
    struct doctor_facts *f = facts();
    f->clock_synced = 0;
    strlcpy_s(f->clock_source, "STA_UNSYNC", sizeof(f->clock_source));
    struct doctor_result r[DOCTOR_CHECKS];
    size_t n = doctor_check(f, r);
    assert_int_equal(result(r, n, "clock")->level, DOCTOR_WARN);
    assert_int_equal(doctor_exit_status(DOCTOR_PASS), 0);
    assert_int_equal(doctor_exit_status(DOCTOR_WARN), 3);
    assert_int_equal(doctor_exit_status(DOCTOR_FAIL), 4);
    assert_int_equal(doctor_worst(r, n), DOCTOR_FAIL); /* NVML did not initialise */
    json_t *j = doctor_render_json(f, r, n);
    assert_string_equal(json_string_value(json_object_get(j, "worst")), "fail");
    assert_int_equal(json_integer_value(json_object_get(j, "exitStatus")), 4);
    assert_int_equal(json_array_size(json_object_get(j, "checks")), DOCTOR_CHECKS);
    json_decref(j);
    free(f);
}

static void test_pod(void **state)
{
    (void)state;
    struct doctorpod_opts o = {
        .node = "gpu-1", .ns = "gpu-operator", .image = "gpuop:1", .json = true};
    json_t *p = doctorpod_render(&o);
    assert_non_null(p);
    json_t *spec = json_object_get(p, "spec");
    assert_string_equal(json_string_value(json_object_get(spec, "nodeName")), "gpu-1");
    assert_string_equal(json_string_value(json_object_get(spec, "restartPolicy")), "Never");
    json_t *c = json_array_get(json_object_get(spec, "containers"), 0);
    json_t *cmd = json_object_get(c, "command");
    assert_int_equal(json_array_size(cmd), 4);
    assert_string_equal(json_string_value(json_array_get(cmd, 2)), "--host-root=/host");
    assert_string_equal(json_string_value(json_array_get(cmd, 3)), "--json");
    assert_true(json_is_true(json_object_get(json_object_get(c, "securityContext"), "privileged")));
    json_t *vol = json_array_get(json_object_get(spec, "volumes"), 0);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(vol, "hostPath"), "path")), "/");
    assert_null(json_object_get(spec, "serviceAccountName"));
    json_decref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_owner),
        cmocka_unit_test(test_plugins),
        cmocka_unit_test(test_verdict),
        cmocka_unit_test(test_pod),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
