/* SPDX-License-Identifier: Apache-2.0 */
/*
 * runtime: runc's command line split (the wrapper's flags, the command, the bundle), the devices
 * a container asks for (NVIDIA_VISIBLE_DEVICES, cdi.k8s.io/ annotations) and the config.json
 * edit (unchanged on error; applying twice changes nothing more).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "runtime.h"

/* ---- command line --------------------------------------------------------------------------- */

static void test_cmdline(void **state)
{
    (void)state;
    static const struct {
        const char *argv[16];
        const char *command, *bundle, *log, *log_format;
        const char *own, *pass; /* space-joined own[1..] and pass[1..] */
        bool help;
    } cases[] = {
        {{"runtime", "--root", "/run/containerd/runc/k8s.io", "--log", "/b/log.json",
          "--log-format", "json", "--systemd-cgroup", "create", "--bundle", "/b", "--pid-file",
          "/b/pid", "ctr1"},
         "create",
         "/b",
         "/b/log.json",
         "json",
         "",
         "--root /run/containerd/runc/k8s.io --log /b/log.json --log-format json --systemd-cgroup "
         "create --bundle /b --pid-file /b/pid ctr1"},
        {{"runtime", "--runtime-path=/usr/bin/crun", "--cdi-spec-dirs", "/x:/y", "--root=/r", "run",
          "-b", "/bb", "--detach", "c"},
         "run",
         "/bb",
         NULL,
         NULL,
         "--runtime-path=/usr/bin/crun --cdi-spec-dirs /x:/y",
         "--root=/r run -b /bb --detach c"},
        {{"runtime", "create", "--bundle=/x", "c"},
         "create",
         "/x",
         NULL,
         NULL,
         "",
         "create --bundle=/x c"},
        {{"runtime", "-log", "/l", "create", "c"},
         "create",
         NULL,
         "/l",
         NULL,
         "",
         "-log /l create c"},
        /* Other commands: no bundle, the wrapper's flags after the command are runc's. */
        {{"runtime", "--root", "/r", "start", "c"},
         "start",
         NULL,
         NULL,
         NULL,
         "",
         "--root /r start c"},
        {{"runtime", "exec", "--runtime-path", "x", "-b", "y", "c", "sh"},
         "exec",
         NULL,
         NULL,
         NULL,
         "",
         "exec --runtime-path x -b y c sh"},
        {{"runtime", "create", "c", "--", "-b", "/no"},
         "create",
         NULL,
         NULL,
         NULL,
         "",
         "create c -- -b /no"},
        {{"runtime", "--version"}, NULL, NULL, NULL, NULL, "", "--version"},
        {{"runtime", "--help"}, NULL, NULL, NULL, NULL, "", "--help", true},
        {{"runtime"}, NULL, NULL, NULL, NULL, "", ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int argc = 0;
        while (cases[i].argv[argc])
            argc++;
        struct runtime_cmdline c;
        struct err e = {0};
        if (runtime_cmdline_parse(argc, (char **)cases[i].argv, &c, &e) < 0)
            fail_msg("case %zu: %s", i, err_msg(&e));
        char own[512] = "", pass[512] = "";
        for (int k = 1; k < c.n_own; k++)
            snprintf(own + strlen(own), sizeof(own) - strlen(own), "%s%s", k > 1 ? " " : "",
                     c.own[k]);
        for (int k = 1; k < c.n_pass; k++)
            snprintf(pass + strlen(pass), sizeof(pass) - strlen(pass), "%s%s", k > 1 ? " " : "",
                     c.pass[k]);
        if (!streq_ptr(c.command, cases[i].command) || !streq_ptr(c.bundle, cases[i].bundle) ||
            !streq_ptr(c.log_path, cases[i].log) || !streq_ptr(c.log_format, cases[i].log_format) ||
            strcmp(own, cases[i].own) != 0 || strcmp(pass, cases[i].pass) != 0 ||
            c.help != cases[i].help)
            fail_msg("case %zu: command %s bundle %s log %s own \"%s\" pass \"%s\"", i,
                     c.command ? c.command : "-", c.bundle ? c.bundle : "-",
                     c.log_path ? c.log_path : "-", own, pass);
        assert_null(c.pass[c.n_pass]);
        assert_null(c.own[c.n_own]);
        assert_null(c.pass[0]);
        assert_string_equal(c.own[0], "runtime");
        runtime_cmdline_clear(&c);
    }
    /* A flag without its value. */
    static const char *const bad[][4] = {{"runtime", "--root"}, {"runtime", "create", "-b"}};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct runtime_cmdline c;
        struct err e = {0};
        int argc = bad[i][2] ? 3 : 2;
        assert_int_equal(runtime_cmdline_parse(argc, (char **)bad[i], &c, &e), -EINVAL);
        assert_non_null(strstr(err_msg(&e), "needs a value"));
    }
    assert_true(runtime_command_edits("create"));
    assert_true(runtime_command_edits("run"));
    assert_false(runtime_command_edits("start"));
    assert_false(runtime_command_edits(NULL));
}

/* ---- request -------------------------------------------------------------------------------- */

static void test_requested(void **state)
{
    (void)state;
    static const struct {
        const char *oci;
        const char *want; /* space-joined names, or the error's text after "!" */
    } cases[] = {
        {"{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=0\"]}}", "nvidia.com/gpu=0"},
        {"{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=all\"]}}", "nvidia.com/gpu=all"},
        {"{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=0, 1,GPU-6b8f-aa,0:1,"
         "MIG-7c1e-bb,,1\"]}}",
         "nvidia.com/gpu=0 nvidia.com/gpu=1 nvidia.com/gpu=GPU-6b8f-aa nvidia.com/gpu=0:1 "
         "nvidia.com/gpu=MIG-7c1e-bb"},
        {"{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=other.com/x=1,2\"]}}",
         "other.com/x=1 nvidia.com/gpu=2"},
        /* the last one set wins */
        {"{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=0\",\"PATH=/bin\","
         "\"NVIDIA_VISIBLE_DEVICES=1\"]}}",
         "nvidia.com/gpu=1"},
        {"{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=none\"]}}", ""},
        {"{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=void\"]}}", ""},
        {"{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=\"]}}", ""},
        {"{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICESX=0\",\"XNVIDIA_VISIBLE_DEVICES=0\"]}}",
         ""},
        {"{}", ""},
        /* annotations in key order, after the environment, without repeats */
        {"{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=0\"]},\"annotations\":{"
         "\"cdi.k8s.io/z\":\"nvidia.com/gpu=1\",\"cdi.k8s.io/a\":\"nvidia.com/gpu=0, "
         "vendor.example/dev=x\",\"other\":\"nvidia.com/gpu=9\"}}",
         "nvidia.com/gpu=0 vendor.example/dev=x nvidia.com/gpu=1"},
        {"{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=none\"]},\"annotations\":{"
         "\"cdi.k8s.io/devices\":\"nvidia.com/gpu=0\"}}",
         "nvidia.com/gpu=0"},
        /* bad names: where they came from */
        {"{\"annotations\":{\"cdi.k8s.io/d\":\"0\"}}",
         "!annotation cdi.k8s.io/d: \"0\": not a qualified device name"},
        {"{\"annotations\":{\"cdi.k8s.io/d\":5}}", "!annotation cdi.k8s.io/d: expected a string"},
        {"{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=a b\"]}}",
         "!process.env NVIDIA_VISIBLE_DEVICES: \"nvidia.com/gpu=a b\": \"a b\" is not a device"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        json_t *oci = json_loads(cases[i].oci, 0, NULL);
        assert_non_null(oci);
        char **names = NULL;
        size_t n = 99;
        struct err e = {0};
        int r = runtime_requested_devices(oci, "nvidia.com/gpu", &names, &n, &e);
        json_decref(oci);
        if (cases[i].want[0] == '!') {
            if (r >= 0 || !strstr(err_msg(&e), cases[i].want + 1))
                fail_msg("case %zu: r=%d \"%s\", want \"%s\"", i, r, err_msg(&e),
                         cases[i].want + 1);
            continue;
        }
        if (r < 0)
            fail_msg("case %zu: %s", i, err_msg(&e));
        char got[512] = "";
        for (size_t k = 0; k < n; k++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", k ? " " : "", names[k]);
        assert_null(names[n]);
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, got, cases[i].want);
        runtime_strv_free(names);
    }
}

/* ---- edit ----------------------------------------------------------------------------------- */

static int fake_stat(void *ud, const char *path, struct cdi_host_node *ret, struct err *e)
{
    (void)ud, (void)e;
    *ret = (struct cdi_host_node){
        .type = 'c', .major = 195, .minor = path[strlen(path) - 1] - '0', .file_mode = 0666};
    return 0;
}

static void test_edit(void **state)
{
    (void)state;
    char tmp[] = "/tmp/gpuop-test-runtime-XXXXXX";
    assert_non_null(mkdtemp(tmp));
    char *path = xasprintf("%s/nvidia.yaml", tmp);
    const char *spec = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n"
                       "containerEdits: {env: [NVIDIA_VISIBLE_DEVICES=void], "
                       "deviceNodes: [{path: /dev/nvidiactl}], hooks: [{hookName: "
                       "createContainer, path: /bin/hook}]}\n"
                       "devices:\n"
                       "- {name: \"0\", containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}}\n"
                       "- {name: \"1\", containerEdits: {deviceNodes: [{path: /dev/nvidia1}]}}\n";
    struct err e = {0};
    assert_int_equal(file_write_atomic(path, spec, strlen(spec), 0644, &e), 0);
    const char *dirs[] = {tmp};
    struct cdi_registry *reg = NULL;
    assert_int_equal(cdi_registry_load(dirs, 1, &reg, &e), 0);

    json_t *oci = json_loads("{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=0\"]}}", 0, NULL);
    const char *names[] = {"nvidia.com/gpu=0"};
    assert_int_equal(runtime_edit_config(oci, reg, names, 1, fake_stat, NULL, &e), 0);
    json_t *devs = json_object_get(json_object_get(oci, "linux"), "devices");
    assert_int_equal(json_array_size(devs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(devs, 1), "path")),
                        "/dev/nvidia0");
    assert_string_equal(json_string_value(json_array_get(
                            json_object_get(json_object_get(oci, "process"), "env"), 0)),
                        "NVIDIA_VISIBLE_DEVICES=void");

    /* Applying the same devices again (containerd may have applied them already) adds nothing. */
    json_t *once = json_deep_copy(oci);
    assert_int_equal(runtime_edit_config(oci, reg, names, 1, fake_stat, NULL, &e), 0);
    assert_true(json_equal(oci, once));
    json_decref(once);

    /* An unknown device: an error naming it, the config unchanged. */
    json_t *before = json_deep_copy(oci);
    const char *bad[] = {"nvidia.com/gpu=1", "nvidia.com/gpu=7"};
    assert_int_equal(runtime_edit_config(oci, reg, bad, 2, fake_stat, NULL, &e), -ENOENT);
    assert_non_null(strstr(err_msg(&e), "unresolvable CDI devices nvidia.com/gpu=7"));
    assert_true(json_equal(oci, before));
    /* A config field of the wrong type: the same. */
    json_object_set_new(oci, "hooks", json_string("x"));
    json_decref(before);
    before = json_deep_copy(oci);
    assert_int_equal(runtime_edit_config(oci, reg, names, 1, fake_stat, NULL, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "config.json: hooks: expected an object"));
    assert_true(json_equal(oci, before));
    json_decref(before);
    json_decref(oci);
    cdi_registry_free(reg);
    unlink(path);
    rmdir(tmp);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cmdline),
        cmocka_unit_test(test_requested),
        cmocka_unit_test(test_edit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
