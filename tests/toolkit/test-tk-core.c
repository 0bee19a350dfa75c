/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop toolkit's pure core (toolkit.h): the runtime the options ask for, the install
 * directory's rules, the hook path, the handler's script, the runtime's options, the marker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "toolkit.h"

static void test_runtime_choose(void **state)
{
    (void)state;
    static const struct {
        const char *runtime, *policy, *restart, *klass;
        int want;
        bool configure, known;
        enum rtconfig_kind kind;
        enum rtconfig_restart_mode restart_mode;
        const char *msg;
    } cases[] = {
        {"auto", NULL, "signal", "nvidia", 0, true, false, 0, RTCONFIG_RESTART_SIGNAL, NULL},
        {"auto", "cri-o", "systemd", "nvidia", 0, true, false, 0, RTCONFIG_RESTART_SYSTEMD, NULL},
        {"containerd", "", "none", "nvidia", 0, true, true, RTCONFIG_CONTAINERD,
         RTCONFIG_RESTART_NONE, NULL},
        {"cri-o", "crio", "signal", "nvidia", 0, true, true, RTCONFIG_CRIO, RTCONFIG_RESTART_SIGNAL,
         NULL},
        {"docker", "docker", "signal", "gpu", 0, true, true, RTCONFIG_DOCKER,
         RTCONFIG_RESTART_SIGNAL, NULL},
        {"none", NULL, "signal", "nvidia", 0, false, false, 0, RTCONFIG_RESTART_SIGNAL, NULL},
        {"none", "containerd", "signal", "nvidia", 0, false, false, 0, RTCONFIG_RESTART_SIGNAL,
         NULL}, /* the spec only: no runtime to compare */
        {"podman", NULL, "signal", "nvidia", -EINVAL, 0, 0, 0, 0,
         "--runtime: unknown runtime \"podman\""},
        {"auto", "rkt", "signal", "nvidia", -EINVAL, 0, 0, 0, 0,
         "--default-runtime: unknown runtime \"rkt\""},
        {"docker", "containerd", "signal", "nvidia", -EINVAL, 0, 0, 0, 0,
         "--runtime is docker but the policy's default runtime is containerd"},
        {"auto", NULL, "reboot", "nvidia", -EINVAL, 0, 0, 0, 0,
         "--restart-mode: unknown mode \"reboot\""},
        {"auto", NULL, "signal", "", -EINVAL, 0, 0, 0, 0, "--runtime-class: empty"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct toolkit_runtime rt = {.kind = (enum rtconfig_kind)99};
        struct err e = {0};
        print_message("case %zu: --runtime=%s\n", i, cases[i].runtime);
        int r = toolkit_runtime_choose(cases[i].runtime, cases[i].policy, cases[i].restart,
                                       cases[i].klass, &rt, &e);
        assert_int_equal(r, cases[i].want);
        if (r < 0) {
            assert_int_equal(rt.kind, 99); /* written only on success */
            assert_non_null(strstr(err_msg(&e), cases[i].msg));
            continue;
        }
        assert_int_equal(rt.configure, cases[i].configure);
        assert_int_equal(rt.known, cases[i].known);
        if (rt.known)
            assert_int_equal(rt.kind, cases[i].kind);
        assert_int_equal(rt.restart, cases[i].restart_mode);
    }
}

static void test_install_dir(void **state)
{
    (void)state;
    static const struct {
        const char *dir;
        const char *msg; /* NULL: accepted */
    } cases[] = {
        {"/usr/local/nvidia", NULL},
        {"/opt/gpu_op-1.2+x", NULL},
        {"/", NULL},
        {"usr/local/nvidia", "is not an absolute path"},
        {"", "is not an absolute path"},
        {"/usr/local/nvidia dir", "only letters, digits and /._+- are allowed"},
        {"/usr/local/n'x", "only letters, digits and /._+- are allowed"},
        {"/usr/$(reboot)", "only letters, digits and /._+- are allowed"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct err e = {0};
        print_message("case %zu: \"%s\"\n", i, cases[i].dir);
        int r = toolkit_install_dir_check(cases[i].dir, &e);
        if (!cases[i].msg) {
            assert_int_equal(r, 0);
        } else {
            assert_int_equal(r, -EINVAL);
            assert_non_null(strstr(err_msg(&e), cases[i].msg));
        }
    }
    char *p = toolkit_hook_path("/usr/local/nvidia");
    assert_string_equal(p, "/usr/local/nvidia/gpuop");
    free(p);
    p = toolkit_hook_path("/");
    assert_string_equal(p, "/gpuop");
    free(p);
}

static void test_wrapper_script(void **state)
{
    (void)state;
    static const struct {
        bool envvar, mounts;
        const char *exec;
    } cases[] = {
        {false, true, "exec '/usr/local/nvidia/gpuop' runtime \"$@\"\n"},
        {true, true,
         "exec '/usr/local/nvidia/gpuop' runtime "
         "--accept-nvidia-visible-devices-envvar-when-unprivileged \"$@\"\n"},
        {false, false,
         "exec '/usr/local/nvidia/gpuop' runtime "
         "--accept-nvidia-visible-devices-as-volume-mounts=false \"$@\"\n"},
        {true, false,
         "exec '/usr/local/nvidia/gpuop' runtime "
         "--accept-nvidia-visible-devices-envvar-when-unprivileged "
         "--accept-nvidia-visible-devices-as-volume-mounts=false \"$@\"\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *s =
            toolkit_wrapper_script("/usr/local/nvidia/gpuop", cases[i].envvar, cases[i].mounts);
        assert_true(strncmp(s, "#!/bin/sh\n", 10) == 0);
        const char *exec = strstr(s, "exec ");
        assert_non_null(exec);
        assert_string_equal(exec, cases[i].exec);
        free(s);
    }
}

static void test_marker(void **state)
{
    (void)state;
    char path[512];
    struct rtconfig_options o;
    toolkit_rt_options("nvidia", "/usr/local/nvidia", true, RTCONFIG_RESTART_SYSTEMD, path,
                       sizeof(path), &o);
    assert_string_equal(o.runtime_name, "nvidia");
    assert_string_equal(o.runtime_path, "/usr/local/nvidia/gpuop-runtime");
    assert_true(o.set_as_default);
    assert_true(o.enable_cdi);
    assert_int_equal(o.restart_mode, RTCONFIG_RESTART_SYSTEMD);
    static const struct {
        struct toolkit_runtime rt;
        const char *want[4]; /* lines the marker holds */
        const char * not ;
    } cases[] = {
        {{.configure = true, .known = true, .kind = RTCONFIG_CONTAINERD},
         {"RUNTIME=containerd", "RUNTIME_CONFIG=" RTCONFIG_CONTAINERD_CONFIG,
          "CDI_SPEC=/var/run/cdi/nvidia.yaml", "TOOLKIT_INSTALL_DIR=/usr/local/nvidia"},
         NULL},
        {{.configure = true, .kind = RTCONFIG_CRIO},
         {"RUNTIME=cri-o", "RUNTIME_CONFIG=" RTCONFIG_CRIO_CONFIG, "CDI_SPEC=", "TOOLKIT_"},
         NULL},
        {{.configure = false},
         {"RUNTIME=none", "CDI_SPEC=/var/run/cdi/nvidia.yaml", "TOOLKIT_INSTALL_DIR=", "RUNTIME"},
         "RUNTIME_CONFIG"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = NULL;
        struct err e = {0};
        assert_int_equal(toolkit_marker_render(&cases[i].rt, &o, "/var/run/cdi/nvidia.yaml",
                                               "/usr/local/nvidia", &text, &e),
                         0);
        for (size_t k = 0; k < 4; k++) {
            print_message("case %zu: %s\n", i, cases[i].want[k]);
            assert_non_null(strstr(text, cases[i].want[k]));
        }
        if (cases[i].not )
            assert_null(strstr(text, cases[i].not ));
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runtime_choose),
        cmocka_unit_test(test_install_dir),
        cmocka_unit_test(test_wrapper_script),
        cmocka_unit_test(test_marker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
