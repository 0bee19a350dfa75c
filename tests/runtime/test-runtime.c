/* SPDX-License-Identifier: Apache-2.0 */
/*
 * runtime: runc's command line split (the wrapper's flags, the command, the bundle), who is
 * privileged, the devices a container was given under each policy (NVIDIA_VISIBLE_DEVICES only
 * when privileged or accepted, the device plugin's volume mounts, trusted CDI annotations), the
 * ignored variable made void, and the config.json edit (unchanged on error; applying twice
 * changes nothing more).
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
        /* the switches take no separate value */
        {{"runtime", "--accept-nvidia-visible-devices-envvar-when-unprivileged", "--root", "/r",
          "--accept-nvidia-visible-devices-as-volume-mounts=false", "--cdi-annotation-keys=a/",
          "create", "c"},
         "create",
         NULL,
         NULL,
         NULL,
         "--accept-nvidia-visible-devices-envvar-when-unprivileged "
         "--accept-nvidia-visible-devices-as-volume-mounts=false --cdi-annotation-keys=a/",
         "--root /r create c"},
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

/* Every capability the wrapper knows, as a privileged container's bounding set lists them. */
#define ALL_CAPS                                                                                  \
    "[\"CAP_CHOWN\",\"CAP_DAC_OVERRIDE\",\"CAP_DAC_READ_SEARCH\",\"CAP_FOWNER\",\"CAP_FSETID\","  \
    "\"CAP_KILL\",\"CAP_SETGID\",\"CAP_SETUID\",\"CAP_SETPCAP\",\"CAP_LINUX_IMMUTABLE\","         \
    "\"CAP_NET_BIND_SERVICE\",\"CAP_NET_BROADCAST\",\"CAP_NET_ADMIN\",\"CAP_NET_RAW\","           \
    "\"CAP_IPC_LOCK\",\"CAP_IPC_OWNER\",\"CAP_SYS_MODULE\",\"CAP_SYS_RAWIO\",\"CAP_SYS_CHROOT\"," \
    "\"CAP_SYS_PTRACE\",\"CAP_SYS_PACCT\",\"CAP_SYS_ADMIN\",\"CAP_SYS_BOOT\",\"CAP_SYS_NICE\","   \
    "\"CAP_SYS_RESOURCE\",\"CAP_SYS_TIME\",\"CAP_SYS_TTY_CONFIG\",\"CAP_MKNOD\",\"CAP_LEASE\","   \
    "\"CAP_AUDIT_WRITE\",\"CAP_AUDIT_CONTROL\",\"CAP_SETFCAP\",\"CAP_MAC_OVERRIDE\","             \
    "\"CAP_MAC_ADMIN\",\"CAP_SYSLOG\",\"CAP_WAKE_ALARM\",\"CAP_BLOCK_SUSPEND\",\"CAP_AUDIT_"      \
    "READ\","                                                                                     \
    "\"CAP_PERFMON\",\"CAP_BPF\",\"CAP_CHECKPOINT_RESTORE\"]"
/* runc's default set: an unprivileged container's */
#define DEFAULT_CAPS                                                                   \
    "[\"CAP_CHOWN\",\"CAP_DAC_OVERRIDE\",\"CAP_FSETID\",\"CAP_FOWNER\",\"CAP_MKNOD\"," \
    "\"CAP_NET_RAW\",\"CAP_SETGID\",\"CAP_SETUID\",\"CAP_SETFCAP\",\"CAP_SETPCAP\","   \
    "\"CAP_NET_BIND_SERVICE\",\"CAP_SYS_CHROOT\",\"CAP_KILL\",\"CAP_AUDIT_WRITE\"]"

#define PRIV(env) "{\"process\":{\"capabilities\":{\"bounding\":" ALL_CAPS "},\"env\":[" env "]}"
#define UNPRIV(env) \
    "{\"process\":{\"capabilities\":{\"bounding\":" DEFAULT_CAPS "},\"env\":[" env "]}"
#define VMOUNT(dev)                                                                     \
    "{\"destination\":\"/var/run/nvidia-container-devices/" dev "\",\"type\":\"bind\"," \
    "\"source\":\"/dev/null\",\"options\":[\"rbind\",\"rprivate\"]}"

enum pol { CLOSED, OPEN_ENV, NO_MOUNTS, ALL_CDI };

static struct runtime_policy policy(enum pol which)
{
    struct runtime_policy p = {.default_kind = "nvidia.com/gpu",
                               .accept_volume_mounts = true,
                               .annotation_keys = {RUNTIME_PLUGIN_ANNOTATION},
                               .n_annotation_keys = 1,
                               .privileged_caps = RUNTIME_CAPS_KNOWN};
    if (which == OPEN_ENV)
        p.accept_envvar_unprivileged = true;
    if (which == NO_MOUNTS)
        p.accept_volume_mounts = false;
    if (which == ALL_CDI)
        p.annotation_keys[0] = "cdi.k8s.io/";
    return p;
}

#define CAP(n) (UINT64_C(1) << (n))

static void test_privileged(void **state)
{
    (void)state;
    /* a set without CAP_SYS_RESOURCE (24), as a nested runtime may have */
    const uint64_t nested = RUNTIME_CAPS_KNOWN & ~CAP(24);
    static const char *const no_resource =
        "{\"process\":{\"capabilities\":{\"bounding\":[\"CAP_CHOWN\",\"CAP_DAC_OVERRIDE\","
        "\"CAP_DAC_READ_SEARCH\",\"CAP_FOWNER\",\"CAP_FSETID\",\"CAP_KILL\",\"CAP_SETGID\","
        "\"CAP_SETUID\",\"CAP_SETPCAP\",\"CAP_LINUX_IMMUTABLE\",\"CAP_NET_BIND_SERVICE\","
        "\"CAP_NET_BROADCAST\",\"CAP_NET_ADMIN\",\"CAP_NET_RAW\",\"CAP_IPC_LOCK\","
        "\"CAP_IPC_OWNER\",\"CAP_SYS_MODULE\",\"CAP_SYS_RAWIO\",\"CAP_SYS_CHROOT\","
        "\"CAP_SYS_PTRACE\",\"CAP_SYS_PACCT\",\"CAP_SYS_ADMIN\",\"CAP_SYS_BOOT\","
        "\"CAP_SYS_NICE\",\"CAP_SYS_TIME\",\"CAP_SYS_TTY_CONFIG\","
        "\"CAP_MKNOD\",\"CAP_LEASE\",\"CAP_AUDIT_WRITE\",\"CAP_AUDIT_CONTROL\",\"CAP_SETFCAP\","
        "\"CAP_MAC_OVERRIDE\",\"CAP_MAC_ADMIN\",\"CAP_SYSLOG\",\"CAP_WAKE_ALARM\","
        "\"CAP_BLOCK_SUSPEND\",\"CAP_AUDIT_READ\",\"CAP_PERFMON\",\"CAP_BPF\","
        "\"CAP_CHECKPOINT_RESTORE\"]}}}";
    const struct {
        const char *oci;
        uint64_t caps;
        bool want;
    } cases[] = {
        {PRIV("") "}", RUNTIME_CAPS_KNOWN, true},
        {UNPRIV("") "}", RUNTIME_CAPS_KNOWN, false},
        {"{}", RUNTIME_CAPS_KNOWN, false},
        {"{\"process\":{\"capabilities\":{}}}", RUNTIME_CAPS_KNOWN, false},
        {"{\"process\":{\"capabilities\":{\"bounding\":\"CAP_SYS_ADMIN\"}}}", RUNTIME_CAPS_KNOWN,
         false},
        /* CAP_SYS_ADMIN alone is not every capability */
        {"{\"process\":{\"capabilities\":{\"bounding\":[\"CAP_SYS_ADMIN\"]}}}", RUNTIME_CAPS_KNOWN,
         false},
        /* the runtime's own set: every capability it can give */
        {no_resource, RUNTIME_CAPS_KNOWN, false},
        {no_resource, nested, true},
        {PRIV("") "}", nested, true},
        /* bits the wrapper has no name for do not count */
        {PRIV("") "}", ~UINT64_C(0), true},
        /* a set without CAP_SYS_ADMIN stands for every capability */
        {"{\"process\":{\"capabilities\":{\"bounding\":[\"CAP_CHOWN\"]}}}", CAP(0), false},
        {"{\"process\":{\"capabilities\":{\"bounding\":[]}}}", 0, false},
        {"{\"process\":{\"capabilities\":{\"bounding\":[\"CAP_CHOWN\",\"CAP_SYS_ADMIN\"]}}}",
         CAP(0) | CAP(21), true},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        json_t *oci = json_loads(cases[i].oci, 0, NULL);
        assert_non_null(oci);
        if (runtime_privileged(oci, cases[i].caps) != cases[i].want)
            fail_msg("case %zu: want %d", i, cases[i].want);
        json_decref(oci);
    }
}

static void test_requested(void **state)
{
    (void)state;
    static const struct {
        enum pol pol;
        const char *oci;
        const char *want; /* space-joined names, or the error's text after "!" */
        enum runtime_env env;
        size_t ignored; /* untrusted cdi.k8s.io/ annotations */
    } cases[] = {
        /* a privileged container: NVIDIA_VISIBLE_DEVICES in every form */
        {CLOSED, PRIV("\"NVIDIA_VISIBLE_DEVICES=0\"") "}", "nvidia.com/gpu=0", RUNTIME_ENV_USED},
        {CLOSED, PRIV("\"NVIDIA_VISIBLE_DEVICES=all\"") "}", "nvidia.com/gpu=all",
         RUNTIME_ENV_USED},
        {CLOSED, PRIV("\"NVIDIA_VISIBLE_DEVICES=0, 1,GPU-6b8f-aa,0:1,MIG-7c1e-bb,,1\"") "}",
         "nvidia.com/gpu=0 nvidia.com/gpu=1 nvidia.com/gpu=GPU-6b8f-aa nvidia.com/gpu=0:1 "
         "nvidia.com/gpu=MIG-7c1e-bb",
         RUNTIME_ENV_USED},
        {CLOSED, PRIV("\"NVIDIA_VISIBLE_DEVICES=other.com/x=1,2\"") "}",
         "other.com/x=1 nvidia.com/gpu=2", RUNTIME_ENV_USED},
        /* the last one set wins */
        {CLOSED,
         PRIV("\"NVIDIA_VISIBLE_DEVICES=0\",\"PATH=/bin\",\"NVIDIA_VISIBLE_DEVICES=1\"") "}",
         "nvidia.com/gpu=1", RUNTIME_ENV_USED},
        {CLOSED, PRIV("\"NVIDIA_VISIBLE_DEVICES=none\"") "}", "", RUNTIME_ENV_NONE},
        {CLOSED, PRIV("\"NVIDIA_VISIBLE_DEVICES=void\"") "}", "", RUNTIME_ENV_NONE},
        {CLOSED, PRIV("\"NVIDIA_VISIBLE_DEVICES=\"") "}", "", RUNTIME_ENV_NONE},
        {CLOSED, PRIV("\"NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices\"") "}", "",
         RUNTIME_ENV_NONE},
        {CLOSED, PRIV("\"NVIDIA_VISIBLE_DEVICESX=0\",\"XNVIDIA_VISIBLE_DEVICES=0\"") "}", "",
         RUNTIME_ENV_NONE},
        {CLOSED, "{}", "", RUNTIME_ENV_NONE},
        /* unprivileged: the variable names nothing, whatever it says, and is never parsed */
        {CLOSED, UNPRIV("\"NVIDIA_VISIBLE_DEVICES=all\"") "}", "", RUNTIME_ENV_IGNORED},
        {CLOSED, UNPRIV("\"NVIDIA_VISIBLE_DEVICES=1\"") "}", "", RUNTIME_ENV_IGNORED},
        {CLOSED, UNPRIV("\"NVIDIA_VISIBLE_DEVICES=a b\"") "}", "", RUNTIME_ENV_IGNORED},
        {CLOSED, "{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=all\"]}}", "",
         RUNTIME_ENV_IGNORED},
        {CLOSED, UNPRIV("\"NVIDIA_VISIBLE_DEVICES=void\"") "}", "", RUNTIME_ENV_NONE},
        {CLOSED, UNPRIV("\"NVIDIA_VISIBLE_DEVICES=none\"") "}", "", RUNTIME_ENV_NONE},
        /* ... unless the policy accepts it */
        {OPEN_ENV, UNPRIV("\"NVIDIA_VISIBLE_DEVICES=all\"") "}", "nvidia.com/gpu=all",
         RUNTIME_ENV_USED},
        /* the device plugin's volume mounts, in mounts order, after the variable */
        {CLOSED,
         UNPRIV(
             "\"NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices\"") ",\"mounts\":"
                                                                             "[" VMOUNT(
                                                                                 "GPU-"
                                                                                 "1111") "," VMOUNT("GPU-0000") "]"
                                                                                                                "}",
         "nvidia.com/gpu=GPU-1111 nvidia.com/gpu=GPU-0000", RUNTIME_ENV_NONE},
        {CLOSED, UNPRIV("\"NVIDIA_VISIBLE_DEVICES=all\"") ",\"mounts\":[" VMOUNT("1") "]}",
         "nvidia.com/gpu=1", RUNTIME_ENV_IGNORED},
        {CLOSED, PRIV("\"NVIDIA_VISIBLE_DEVICES=0\"") ",\"mounts\":[" VMOUNT("1") "]}",
         "nvidia.com/gpu=0 nvidia.com/gpu=1", RUNTIME_ENV_USED},
        {CLOSED, "{\"mounts\":[" VMOUNT("all") "," VMOUNT("other.com/x=y") "]}",
         "nvidia.com/gpu=all other.com/x=y", RUNTIME_ENV_NONE},
        /* a redundant slash is still the root; a mount of anything but /dev/null is no device,
         * nor is the root itself or a path beside it */
        {CLOSED,
         "{\"mounts\":[{\"destination\":\"/var/run//nvidia-container-devices/2/\","
         "\"source\":\"/dev/null\"},"
         "{\"destination\":\"/var/run/nvidia-container-devices/3\",\"source\":\"/tmp/x\"},"
         "{\"destination\":\"/var/run/nvidia-container-devices/4\"},"
         "{\"destination\":\"/var/run/nvidia-container-devices\",\"source\":\"/dev/null\"},"
         "{\"destination\":\"/var/run/nvidia-container-devicesX/5\",\"source\":\"/dev/null\"},"
         "{\"destination\":\"/run/nvidia-container-devices/6\",\"source\":\"/dev/null\"}]}",
         "nvidia.com/gpu=2", RUNTIME_ENV_NONE},
        {NO_MOUNTS, "{\"mounts\":[" VMOUNT("1") "]}", "", RUNTIME_ENV_NONE},
        {CLOSED, "{\"mounts\":[" VMOUNT("a b") "]}",
         "!mounts[0] /var/run/nvidia-container-devices: \"nvidia.com/gpu=a b\""},
        /* annotations: only the device plugin's keys, in key order, after the rest */
        {CLOSED,
         UNPRIV(
             "\"NVIDIA_VISIBLE_DEVICES=0\"") ",\"annotations\":{"
                                             "\"cdi.k8s.io/nvidia-device-plugin_b2\":\"nvidia.com/"
                                             "gpu=1\","
                                             "\"cdi.k8s.io/nvidia-device-plugin_a1\":\"nvidia.com/"
                                             "gpu=0, vendor.example/dev=x\","
                                             "\"cdi.k8s.io/mine\":\"nvidia.com/"
                                             "gpu=all\",\"other\":\"nvidia.com/gpu=9\"}}",
         "nvidia.com/gpu=0 vendor.example/dev=x nvidia.com/gpu=1", RUNTIME_ENV_IGNORED, 1},
        {CLOSED, "{\"annotations\":{\"cdi.k8s.io/devices\":\"nvidia.com/gpu=0\"}}", "",
         RUNTIME_ENV_NONE, 1},
        {ALL_CDI,
         PRIV("\"NVIDIA_VISIBLE_DEVICES=0\"") ",\"annotations\":{"
                                              "\"cdi.k8s.io/z\":\"nvidia.com/gpu=1\",\"cdi.k8s.io/"
                                              "a\":\"nvidia.com/gpu=0, "
                                              "vendor.example/dev=x\",\"other\":\"nvidia.com/"
                                              "gpu=9\"}}",
         "nvidia.com/gpu=0 vendor.example/dev=x nvidia.com/gpu=1", RUNTIME_ENV_USED},
        /* an untrusted annotation is never parsed */
        {CLOSED, "{\"annotations\":{\"cdi.k8s.io/d\":5}}", "", RUNTIME_ENV_NONE, 1},
        /* bad names from what counts: where they came from */
        {CLOSED, "{\"annotations\":{\"cdi.k8s.io/nvidia-device-plugin_1\":\"0\"}}",
         "!annotation cdi.k8s.io/nvidia-device-plugin_1: \"0\": not a qualified device name"},
        {ALL_CDI, "{\"annotations\":{\"cdi.k8s.io/d\":5}}",
         "!annotation cdi.k8s.io/d: expected a string"},
        {CLOSED, PRIV("\"NVIDIA_VISIBLE_DEVICES=a b\"") "}",
         "!process.env NVIDIA_VISIBLE_DEVICES: \"nvidia.com/gpu=a b\": \"a b\" is not a device"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        json_t *oci = json_loads(cases[i].oci, 0, NULL);
        if (!oci)
            fail_msg("case %zu: the JSON does not parse", i);
        struct runtime_policy p = policy(cases[i].pol);
        struct runtime_request rq = {.n = 99};
        struct err e = {0};
        int r = runtime_request_read(oci, &p, &rq, &e);
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
        for (size_t k = 0; k < rq.n; k++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", k ? " " : "",
                     rq.names[k]);
        assert_null(rq.names[rq.n]);
        if (strcmp(got, cases[i].want) != 0 || rq.env != cases[i].env ||
            rq.n_ignored_annotations != cases[i].ignored)
            fail_msg("case %zu: got \"%s\" env %d ignored %zu, want \"%s\" env %d ignored %zu", i,
                     got, rq.env, rq.n_ignored_annotations, cases[i].want, cases[i].env,
                     cases[i].ignored);
        runtime_request_clear(&rq);
    }
}

static void test_env_void(void **state)
{
    (void)state;
    json_t *oci = json_loads("{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=all\",\"PATH=/b\","
                             "\"NVIDIA_VISIBLE_DEVICES=1\",\"NVIDIA_VISIBLE_DEVICESX=2\"]}}",
                             0, NULL);
    runtime_env_void(oci);
    json_t *want = json_loads("{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=void\","
                              "\"PATH=/b\",\"NVIDIA_VISIBLE_DEVICES=void\","
                              "\"NVIDIA_VISIBLE_DEVICESX=2\"]}}",
                              0, NULL);
    assert_true(json_equal(oci, want));
    json_decref(want);
    json_decref(oci);
    /* no env at all: nothing to do */
    oci = json_loads("{}", 0, NULL);
    runtime_env_void(oci);
    assert_int_equal(json_object_size(oci), 0);
    json_decref(oci);
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

/* --cdi-annotation-keys: checked whole, then split; bad lists leave the policy as it was. */
static void test_annotation_keys(void **state)
{
    (void)state;
    static const struct {
        const char *list;
        int want;
        size_t n;
        const char *first, *last, *msg;
    } cases[] = {
        {"cdi.k8s.io/nvidia-device-plugin_", 0, 1, "cdi.k8s.io/nvidia-device-plugin_",
         "cdi.k8s.io/nvidia-device-plugin_", NULL},
        {"a/,b/,c/", 0, 3, "a/", "c/", NULL},
        {"a/,", 0, 1, "a/", "a/", NULL}, /* a trailing comma ends the list */
        {"", 0, 0, NULL, NULL, NULL},
        {",a/", -EINVAL, 0, NULL, NULL, "\",a/\": an empty key prefix"},
        {"a/,,b/", -EINVAL, 0, NULL, NULL, "\"a/,,b/\": an empty key prefix"},
        {"a /", -EINVAL, 0, NULL, NULL, "\"a /\": a key prefix holds a blank"},
        {"a/\tb", -EINVAL, 0, NULL, NULL, "a blank or a control character"},
        {"a\x7f", -EINVAL, 0, NULL, NULL, "a blank or a control character"},
        {"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", 0, 16, "1", "16", NULL},
        {"1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", -EINVAL, 0, NULL, NULL,
         "more than 16 key prefixes"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char *list = strdup(cases[i].list);
        struct runtime_policy p = {.n_annotation_keys = 99};
        struct err e = {0};
        print_message("case %zu: \"%s\"\n", i, cases[i].list);
        assert_int_equal(runtime_policy_annotation_keys(&p, list, &e), cases[i].want);
        if (cases[i].want < 0) {
            assert_int_equal(p.n_annotation_keys, 99);
            assert_non_null(strstr(err_msg(&e), cases[i].msg));
        } else {
            assert_int_equal(p.n_annotation_keys, cases[i].n);
            if (cases[i].n) {
                assert_string_equal(p.annotation_keys[0], cases[i].first);
                assert_string_equal(p.annotation_keys[cases[i].n - 1], cases[i].last);
            }
        }
        free(list);
    }
}

/* The bounding set of /proc/self/status: CapBnd's hex, else every capability known. */
static void test_bounding_set(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t want;
    } cases[] = {
        {"Name:\tx\nCapBnd:\t000001ffffffffff\nCapAmb:\t0\n", 0x1ffffffffffull},
        {"Name:\tx\nCapBnd:\t00000000a80425fb\n", 0xa80425fbull},
        {"Name:\tx\nCapBnd: 0\n", 0},
        {"Name:\tx\nCapPrm:\t0\n", RUNTIME_CAPS_KNOWN},
        {"CapBnd:\t1f\n", RUNTIME_CAPS_KNOWN}, /* not after a newline: not the field */
        {"Name:\tx\nCapBnd:\t\n", RUNTIME_CAPS_KNOWN},
        {"Name:\tx\nCapBnd:\t00000000000000001f\n", RUNTIME_CAPS_KNOWN}, /* over 16 digits */
        {NULL, RUNTIME_CAPS_KNOWN},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        print_message("case %zu\n", i);
        assert_int_equal(runtime_status_bounding_set(cases[i].text), cases[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cmdline),      cmocka_unit_test(test_privileged),
        cmocka_unit_test(test_requested),    cmocka_unit_test(test_env_void),
        cmocka_unit_test(test_edit),         cmocka_unit_test(test_annotation_keys),
        cmocka_unit_test(test_bounding_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
