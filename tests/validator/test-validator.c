/* SPDX-License-Identifier: Apache-2.0 */
/* The validator's core on node-root fixtures: who answers for the driver (host driver with the
 * module loaded, only libraries left behind, only nvidia-smi, both; the containerized driver;
 * none), driver-ready's exact contents, the checks' verdicts and reasons. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "validator.h"

struct fx {
    char base[64];
    char host[PATH_MAX];
    char drv[PATH_MAX];
    char val[PATH_MAX];
    struct val_paths p;
};

static void touch(const char *root, const char *rel, const char *text, unsigned mode)
{
    _cleanup_free_ char *path = xasprintf("%s%s", root, rel);
    _cleanup_free_ char *dir = xstrdup(path);
    *strrchr(dir, '/') = '\0';
    assert_int_equal(mkdir_p(dir, 0755), 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static void mkdirs(const char *root, const char *rel)
{
    _cleanup_free_ char *path = xasprintf("%s%s", root, rel);
    assert_int_equal(mkdir_p(path, 0755), 0);
}

static int fx_setup(void **state)
{
    struct fx *f = xcalloc(1, sizeof(*f));
    strlcpy_s(f->base, "/tmp/gpuop-val-XXXXXX", sizeof(f->base));
    assert_non_null(mkdtemp(f->base));
    snprintf(f->host, sizeof(f->host), "%s/host", f->base);
    snprintf(f->drv, sizeof(f->drv), "%s/host/run/nvidia/driver", f->base);
    snprintf(f->val, sizeof(f->val), "%s/host/run/nvidia/validations", f->base);
    mkdirs(f->host, "/etc");
    f->p = (struct val_paths){f->host, f->drv, f->val};
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", f->base);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void plan(struct fx *f, bool managed, struct val_driver_plan *pl)
{
    struct nodestate_driver_facts facts;
    struct err e = {0};
    assert_int_equal(
        nodestate_driver_probe(f->p.host_root, f->p.driver_root, f->p.validations_dir, &facts, &e),
        0);
    val_driver_plan(&f->p, &facts, managed, pl);
}

/* driver-ready as written to disk, read back. */
static char *written_ready(struct fx *f, const struct val_driver_plan *pl)
{
    _cleanup_free_ char *text = NULL;
    struct err e = {0};
    assert_int_equal(nodestate_driver_ready_render(&pl->ready, &text, &e), 0);
    assert_int_equal(nodestate_file_write(f->val, NODESTATE_DRIVER_READY, text, &e), 0);
    _cleanup_free_ char *path = xasprintf("%s/driver-ready", f->val);
    char *back = NULL;
    size_t len;
    assert_int_equal(file_read_all(path, 4096, &back, &len, &e), 0);
    return back;
}

static void test_host_module_loaded(void **state)
{
    struct fx *f = *state;
    touch(f->host, "/sys/module/nvidia/version", "550.127.05\n", 0644);
    struct val_driver_plan pl;
    plan(f, false, &pl);
    assert_int_equal(pl.source, VAL_SRC_HOST);
    assert_true(pl.check);
    assert_string_equal(pl.nvml, "");
    assert_non_null(strstr(pl.found, "module nvidia loaded"));
    _cleanup_free_ char *text = written_ready(f, &pl);
    _cleanup_free_ char *want = xasprintf("IS_HOST_DRIVER=true\n"
                                          "NVIDIA_DRIVER_ROOT=/\n"
                                          "DRIVER_ROOT_CTR_PATH=%s\n"
                                          "NVIDIA_DEV_ROOT=/\n"
                                          "DEV_ROOT_CTR_PATH=%s\n",
                                          f->host, f->host);
    assert_string_equal(text, want);
}

static void test_host_smi_and_libs(void **state)
{
    struct fx *f = *state;
    touch(f->host, "/usr/bin/nvidia-smi", "#!/bin/sh\n", 0755);
    touch(f->host, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127.05", "ELF", 0644);
    _cleanup_free_ char *lib = xasprintf("%s/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", f->host);
    /* an absolute link, as a driver installer makes it: resolved inside the host root */
    assert_int_equal(symlink("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127.05", lib), 0);
    free(lib);
    lib = xasprintf("%s/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127.05", f->host);
    struct val_driver_plan pl;
    plan(f, true, &pl); /* a driver DaemonSet exists: the host driver still wins */
    assert_int_equal(pl.source, VAL_SRC_HOST);
    assert_true(pl.check);
    assert_string_equal(pl.nvml, lib);
    assert_non_null(strstr(pl.found, "nvidia-smi"));
    assert_true(pl.ready.is_host_driver);
}

static void test_only_libraries_left(void **state)
{
    struct fx *f = *state;
    touch(f->host, "/usr/lib64/libnvidia-ml.so.1", "ELF", 0644);
    struct val_driver_plan pl;
    plan(f, false, &pl);
    assert_int_equal(pl.source, VAL_SRC_NONE);
    assert_false(pl.check);
    assert_non_null(strstr(pl.reason, "no driver"));
    assert_non_null(strstr(pl.reason, "only libraries are left"));
}

static void test_only_smi(void **state)
{
    struct fx *f = *state;
    touch(f->host, "/usr/sbin/nvidia-smi", "#!/bin/sh\n", 0755);
    touch(f->host, "/usr/bin/nvidia-smi", "", 0755); /* empty: not a program */
    struct val_driver_plan pl;
    plan(f, false, &pl);
    assert_int_equal(pl.source, VAL_SRC_NONE);
    assert_false(pl.check);
    assert_non_null(strstr(pl.reason, "only nvidia-smi"));
}

static void test_smi_not_executable(void **state)
{
    struct fx *f = *state;
    touch(f->host, "/usr/bin/nvidia-smi", "#!/bin/sh\n", 0644);
    touch(f->host, "/usr/lib64/libnvidia-ml.so.1", "ELF", 0644);
    struct val_driver_plan pl;
    plan(f, false, &pl);
    assert_int_equal(pl.source, VAL_SRC_NONE);
}

static void test_container_driver(void **state)
{
    struct fx *f = *state;
    /* the containerized driver loaded the module too: it is not a host driver */
    touch(f->host, "/sys/module/nvidia/version", "570.86.15\n", 0644);
    touch(f->drv, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "ELF", 0644);
    touch(f->drv, "/usr/bin/nvidia-smi", "#!/bin/sh\n", 0755);
    struct val_driver_plan pl;
    plan(f, true, &pl); /* managed, no .driver-ctr-ready yet: wait */
    assert_int_equal(pl.source, VAL_SRC_CONTAINER);
    assert_false(pl.check);
    assert_non_null(strstr(pl.reason, ".driver-ctr-ready"));

    touch(f->val, "/.driver-ctr-ready", "", 0644);
    plan(f, true, &pl);
    assert_int_equal(pl.source, VAL_SRC_CONTAINER);
    assert_true(pl.check);
    _cleanup_free_ char *lib = xasprintf("%s/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", f->drv);
    assert_string_equal(pl.nvml, lib);
    _cleanup_free_ char *text = written_ready(f, &pl);
    _cleanup_free_ char *want = xasprintf("IS_HOST_DRIVER=false\n"
                                          "NVIDIA_DRIVER_ROOT=%s\n"
                                          "DRIVER_ROOT_CTR_PATH=%s\n"
                                          "NVIDIA_DEV_ROOT=/\n"
                                          "DEV_ROOT_CTR_PATH=%s\n",
                                          f->drv, f->drv, f->host);
    assert_string_equal(text, want);

    /* a driver root with its own device nodes is the device root too */
    touch(f->drv, "/dev/nvidiactl", "", 0644);
    plan(f, true, &pl);
    assert_string_equal(pl.ready.dev_root, f->drv);
    assert_string_equal(pl.ready.dev_root_ctr, f->drv);
}

static void test_container_unmanaged(void **state)
{
    struct fx *f = *state;
    /* no driver DaemonSet known (no API): the driver root's library is enough */
    touch(f->drv, "/usr/lib64/libnvidia-ml.so.1", "ELF", 0644);
    struct val_driver_plan pl;
    plan(f, false, &pl);
    assert_int_equal(pl.source, VAL_SRC_CONTAINER);
    assert_true(pl.check);
    assert_false(pl.ready.is_host_driver);
}

static void test_marker_without_library(void **state)
{
    struct fx *f = *state;
    touch(f->val, "/.driver-ctr-ready", "", 0644);
    struct val_driver_plan pl;
    plan(f, true, &pl);
    assert_false(pl.check);
    assert_non_null(strstr(pl.reason, "has no libnvidia-ml.so.1"));
}

static void test_none(void **state)
{
    struct fx *f = *state;
    struct val_driver_plan pl;
    plan(f, false, &pl);
    assert_int_equal(pl.source, VAL_SRC_NONE);
    assert_false(pl.check);
    assert_non_null(strstr(pl.reason, "no driver"));
    assert_non_null(strstr(pl.reason, f->drv));
    assert_null(strstr(pl.reason, "only"));
    assert_string_equal(val_driver_source_name(pl.source), "none");
}

static void test_host_root_missing(void **state)
{
    struct fx *f = *state;
    struct val_paths p = f->p;
    _cleanup_free_ char *gone = xasprintf("%s/nope", f->base);
    p.host_root = gone;
    struct nodestate_driver_facts facts;
    struct err e = {0};
    assert_int_equal(
        nodestate_driver_probe(p.host_root, p.driver_root, p.validations_dir, &facts, &e), -ENOENT);
    assert_non_null(strstr(e.msg, gone));
    _cleanup_free_ char *file = xasprintf("%s/host/etc/file", f->base);
    touch(f->host, "/etc/file", "x", 0644);
    p.host_root = file;
    assert_int_equal(
        nodestate_driver_probe(p.host_root, p.driver_root, p.validations_dir, &facts, &e),
        -ENOTDIR);
}

static void test_find_links(void **state)
{
    struct fx *f = *state;
    char buf[PATH_MAX];
    static const char *const dirs[] = {"/usr/bin", NULL};
    assert_int_equal(nodestate_root_find(f->host, dirs, "nvidia-smi", true, buf, sizeof(buf)),
                     -ENOENT);
    /* a dangling link is nothing; a relative link is followed */
    mkdirs(f->host, "/usr/bin");
    _cleanup_free_ char *l = xasprintf("%s/usr/bin/nvidia-smi", f->host);
    assert_int_equal(symlink("/opt/none/nvidia-smi", l), 0);
    assert_int_equal(nodestate_root_find(f->host, dirs, "nvidia-smi", true, buf, sizeof(buf)),
                     -ENOENT);
    unlink(l);
    touch(f->host, "/usr/bin/nvidia-smi.real", "#!/bin/sh\n", 0755);
    assert_int_equal(symlink("nvidia-smi.real", l), 0);
    assert_int_equal(nodestate_root_find(f->host, dirs, "nvidia-smi", true, buf, sizeof(buf)), 0);
    _cleanup_free_ char *real = xasprintf("%s.real", l);
    assert_string_equal(buf, real);
    assert_int_equal(nodestate_root_find(f->host, dirs, "nvidia-smi", true, buf, 8), -ENAMETOOLONG);
}

/* /var/run -> /run on a host: read inside the host root, not in this process's /run. */
static void test_resolve_in_root(void **state)
{
    struct fx *f = *state;
    mkdirs(f->host, "/run/cdi");
    mkdirs(f->host, "/var");
    _cleanup_free_ char *vr = xasprintf("%s/var/run", f->host);
    assert_int_equal(symlink("/run", vr), 0);
    char buf[PATH_MAX];
    assert_int_equal(file_root_resolve(f->host, "/var/run/cdi/nvidia.yaml", buf, sizeof(buf)), 0);
    _cleanup_free_ char *want = xasprintf("%s/run/cdi/nvidia.yaml", f->host);
    assert_string_equal(buf, want);
    /* relative links, "..", and a missing tail */
    _cleanup_free_ char *l = xasprintf("%s/etc/alt", f->host);
    assert_int_equal(symlink("../run/./cdi", l), 0);
    assert_int_equal(file_root_resolve(f->host, "/etc/alt/x/y", buf, sizeof(buf)), 0);
    _cleanup_free_ char *want2 = xasprintf("%s/run/cdi/x/y", f->host);
    assert_string_equal(buf, want2);
    /* ".." never leaves the root */
    assert_int_equal(file_root_resolve(f->host, "/../../etc", buf, sizeof(buf)), 0);
    _cleanup_free_ char *want3 = xasprintf("%s/etc", f->host);
    assert_string_equal(buf, want3);
    /* a loop */
    _cleanup_free_ char *a = xasprintf("%s/etc/a", f->host);
    assert_int_equal(symlink("/etc/a", a), 0);
    assert_int_equal(file_root_resolve(f->host, "/etc/a/x", buf, sizeof(buf)), -ELOOP);
    assert_int_equal(file_root_resolve("/", "/etc", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "/etc");
}

static void test_driver_verify(void **state)
{
    (void)state;
    char buf[NODESTATE_REASON_MAX];
    struct {
        struct val_driver_seen s;
        int want;
        const char *has;
    } cases[] = {
        {{.n_gpus = 8, .pci_gpus = 8, .version = "550.127.05"}, 0, NULL},
        {{.n_gpus = 8, .pci_gpus = -1, .version = "550.127.05"}, 0, NULL},
        {{.n_gpus = 8, .pci_gpus = 0, .version = "550.127.05", .expected_version = ""}, 0, NULL},
        {{.nvml_error = "Driver Not Loaded"}, -ENODEV, "NVML does not initialise: Driver Not"},
        {{.n_gpus = 0}, -ENODEV, "no GPU"},
        {{.n_gpus = 8, .n_lost = 1, .pci_gpus = 8}, -ENODEV, "1 of 8 GPUs are lost"},
        {{.n_gpus = 7, .pci_gpus = 8}, -ENODEV, "NVML lists 7 GPUs but the node has 8 NVIDIA PCI"},
        {{.n_gpus = 8, .version = "550.127.05", .expected_version = "570.86.15"},
         -ENODEV,
         "driver version 550.127.05, expected 570.86.15"},
        {{.n_gpus = 8, .version = "570.86.15", .expected_version = "570.86.15"}, 0, NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int r = val_driver_verify(&cases[i].s, buf, sizeof(buf));
        if (r != cases[i].want)
            fail_msg("case %zu: %d, want %d (%s)", i, r, cases[i].want, buf);
        if (cases[i].has && !strstr(buf, cases[i].has))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, buf, cases[i].has);
        if (!cases[i].has)
            assert_string_equal(buf, "");
    }
}

static void test_toolkit_marker(void **state)
{
    (void)state;
    struct nodestate_toolkit_marker m;
    struct err e = {0};
    assert_int_equal(nodestate_toolkit_marker_parse("m", NULL, 0, &m, &e), 0);
    assert_true(m.check_runtime);
    assert_string_equal(m.runtime, "");
    assert_string_equal(m.runtime_name, "nvidia");
    assert_string_equal(m.runtime_path, NODESTATE_RUNTIME_PATH_DEFAULT);
    assert_string_equal(m.cdi_spec, NODESTATE_CDI_SPEC_DEFAULT);
    assert_true(m.cdi_enabled);
    /* what gpuop's toolkit daemon writes */
    const char *t = "RUNTIME=containerd\nRUNTIME_CONFIG=/etc/containerd/config.toml\n"
                    "CDI_SPEC=/etc/cdi/nvidia.yaml\nTOOLKIT_INSTALL_DIR=/usr/local/nvidia\n";
    assert_int_equal(nodestate_toolkit_marker_parse("m", t, strlen(t), &m, &e), 0);
    assert_true(m.check_runtime);
    assert_string_equal(m.runtime, "containerd");
    assert_string_equal(m.runtime_config, "/etc/containerd/config.toml");
    assert_string_equal(m.runtime_name, "nvidia");
    assert_string_equal(m.runtime_path, "/usr/local/nvidia/" NODESTATE_TOOLKIT_WRAPPER);
    assert_string_equal(m.cdi_spec, "/etc/cdi/nvidia.yaml");
    assert_true(m.cdi_enabled);
    const char *t2 = "# a comment\nRUNTIME=none\nRUNTIME_PATH=/opt/x/rt\nTOOLKIT_INSTALL_DIR=/u\n"
                     "CDI_ENABLED=false\n";
    assert_int_equal(nodestate_toolkit_marker_parse("m", t2, strlen(t2), &m, &e), 0);
    assert_false(m.check_runtime);
    assert_string_equal(m.runtime, "");
    assert_string_equal(m.runtime_path, "/opt/x/rt");
    assert_false(m.cdi_enabled);
    const char *bad = "CDI_ENABLED=perhaps\n";
    assert_int_equal(
        nodestate_toolkit_marker_parse("/x/.toolkit-ctr-ready", bad, strlen(bad), &m, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "/x/.toolkit-ctr-ready: CDI_ENABLED"));
    const char *rel = "CDI_SPEC=nvidia.yaml\n";
    assert_int_equal(nodestate_toolkit_marker_parse("m", rel, strlen(rel), &m, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "CDI_SPEC: \"nvidia.yaml\" is not an absolute path"));
}

static bool has_name(void *ud, const char *name)
{
    for (const char *const *n = ud; *n; n++)
        if (strcmp(*n, name) == 0)
            return true;
    return false;
}

static void test_cdi_missing(void **state)
{
    (void)state;
    static const char *const profiles[] = {"1g.10gb", "1g.10gb"};
    static const char *const migs[] = {"MIG-a", "MIG-b"};
    struct nodestate_gpu gpus[] = {
        {.uuid = "GPU-0"},
        {.uuid = "GPU-1",
         .mig_enabled = true,
         .n_mig = 2,
         .mig_profiles = profiles,
         .mig_uuids = migs},
    };
    static const char *const full[] = {"0",     "GPU-0", "1",     "GPU-1", "1:0",
                                       "MIG-a", "1:1",   "MIG-b", "all",   NULL};
    char buf[NODESTATE_REASON_MAX];
    assert_int_equal(val_cdi_missing(gpus, 2, has_name, (void *)full, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
    static const char *const part[] = {"0", "GPU-0", "1", "GPU-1", "1:0", "MIG-a", "all", NULL};
    assert_int_equal(val_cdi_missing(gpus, 2, has_name, (void *)part, buf, sizeof(buf)), 2);
    assert_string_equal(buf, "1:1, MIG-b");
    static const char *const none[] = {NULL};
    assert_int_equal(val_cdi_missing(gpus, 2, has_name, (void *)none, buf, sizeof(buf)), 8);
    assert_string_equal(buf, "0, GPU-0, 1, GPU-1, 1:0, MIG-a, 1:1, MIG-b");
    struct nodestate_gpu many[12];
    for (size_t i = 0; i < ARRAY_SIZE(many); i++)
        many[i] = (struct nodestate_gpu){.uuid = "GPU-x"};
    assert_int_equal(val_cdi_missing(many, 12, has_name, (void *)none, buf, sizeof(buf)), 24);
    assert_non_null(strstr(buf, " and 16 more"));
}

static void test_plugin_reason(void **state)
{
    (void)state;
    struct nodestate_gpu_count c = {
        .physical = 8, .n_expected = 1, .n_advertised = 1, .short_ = true};
    strlcpy_s(c.expected[0].name, "nvidia.com/gpu", sizeof(c.expected[0].name));
    c.expected[0].count = 8;
    strlcpy_s(c.advertised[0].name, "nvidia.com/gpu", sizeof(c.advertised[0].name));
    c.advertised[0].count = 7;
    char buf[NODESTATE_REASON_MAX];
    val_plugin_reason(&c, buf, sizeof(buf));
    assert_string_equal(buf, "nvidia.com/gpu: 7 of 8 advertised");
    c.n_advertised = 0;
    val_plugin_reason(&c, buf, sizeof(buf));
    assert_string_equal(buf, "nvidia.com/gpu: 0 of 8 advertised");
    c.n_missing = 2;
    strlcpy_s(c.missing[0], "nvidia.com/gpu: 0 of 8 advertised", sizeof(c.missing[0]));
    strlcpy_s(c.missing[1], "GPU-abc (lost)", sizeof(c.missing[1]));
    val_plugin_reason(&c, buf, sizeof(buf));
    assert_string_equal(buf, "nvidia.com/gpu: 0 of 8 advertised; GPU-abc (lost)");
    /* a reason longer than the buffer ends in "..." */
    char small[24];
    val_plugin_reason(&c, small, sizeof(small));
    assert_string_equal(small, "nvidia.com/gpu: 0 of...");
    c.short_ = false;
    val_plugin_reason(&c, buf, sizeof(buf));
    assert_string_equal(buf, "");
}

/* Why a driver pod is not ready, from its status. */
static void test_driver_pod_reason(void **state)
{
    (void)state;
    static const struct {
        const char *status, *want;
    } rows[] = {
        {"{}", ""},
        {"{\"initContainerStatuses\":[{\"name\":\"k8s-driver-manager\",\"ready\":true,"
         "\"state\":{\"terminated\":{\"exitCode\":0}}}],"
         "\"containerStatuses\":[{\"name\":\"nvidia-driver-ctr\",\"ready\":false,"
         "\"state\":{\"waiting\":{\"reason\":\"CrashLoopBackOff\"}},"
         "\"lastState\":{\"terminated\":{\"exitCode\":1,\"message\":\"Installing headers...\\n"
         "Could not resolve Linux kernel version\\n\"}}}]}",
         "nvidia-driver-ctr failed (exit 1): Could not resolve Linux kernel version"},
        {"{\"initContainerStatuses\":[{\"name\":\"k8s-driver-manager\",\"ready\":false,"
         "\"state\":{\"running\":{}}}],\"containerStatuses\":[{\"name\":\"nvidia-driver-ctr\","
         "\"state\":{\"waiting\":{\"reason\":\"PodInitializing\"}}}]}",
         "k8s-driver-manager: running, not ready yet"},
        {"{\"containerStatuses\":[{\"name\":\"nvidia-driver-ctr\",\"ready\":false,"
         "\"state\":{\"waiting\":{\"reason\":\"ImagePullBackOff\",\"message\":\"Back-off "
         "pulling image\"}}}]}",
         "nvidia-driver-ctr: ImagePullBackOff: Back-off pulling image"},
        {"{\"containerStatuses\":[{\"name\":\"nvidia-driver-ctr\",\"ready\":false,"
         "\"state\":{\"terminated\":{\"exitCode\":2,\"reason\":\"Error\"}}}]}",
         "nvidia-driver-ctr failed (exit 2)"},
        {"{\"containerStatuses\":[{\"name\":\"nvidia-driver-ctr\",\"ready\":true,"
         "\"state\":{\"running\":{}}}]}",
         ""},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        json_error_t je;
        json_t *st = json_loads(rows[i].status, 0, &je);
        assert_non_null(st);
        json_t *pod = json_pack("{s:o}", "status", st);
        char buf[NODESTATE_REASON_MAX];
        val_driver_pod_reason(pod, buf, sizeof(buf));
        if (strcmp(buf, rows[i].want) != 0)
            fail_msg("row %zu: got \"%s\", want \"%s\"", i, buf, rows[i].want);
        json_decref(pod);
    }
}

static void test_report_plan(void **state)
{
    (void)state;
    struct val_report r;
    /* a pass: annotation ok, a Normal Event, done */
    val_report_plan(VAL_DRIVER, VAL_PASSED, "", "", false, &r);
    assert_int_equal(r.next, VAL_NEXT_DONE);
    assert_false(r.remove_file);
    assert_true(r.annotate);
    assert_int_equal(r.state, NODESTATE_V_OK);
    assert_true(r.event);
    assert_false(r.warning);
    assert_string_equal(r.event_reason, "ValidationSucceeded");
    assert_string_equal(r.message, "driver validation passed");
    /* not yet, with time left: the file goes; a new reason is logged, annotated and an Event */
    val_report_plan(VAL_PLUGIN, VAL_NOT_YET, "short", "", true, &r);
    assert_int_equal(r.next, VAL_NEXT_RETRY);
    assert_true(r.remove_file);
    assert_int_equal(r.file, NODESTATE_PLUGIN_READY);
    assert_true(r.annotate);
    assert_int_equal(r.state, NODESTATE_V_WAITING);
    assert_true(r.event && r.warning && r.log_retry);
    assert_string_equal(r.event_reason, "ValidationFailed");
    assert_string_equal(r.message, "plugin: short (retrying)");
    /* the same reason again: quiet */
    val_report_plan(VAL_PLUGIN, VAL_NOT_YET, "short", "short", true, &r);
    assert_int_equal(r.next, VAL_NEXT_RETRY);
    assert_true(r.remove_file);
    assert_false(r.annotate || r.event || r.log_retry);
    /* no time left (or no --wait): failed, once, whatever came before */
    val_report_plan(VAL_PLUGIN, VAL_NOT_YET, "short", "short", false, &r);
    assert_int_equal(r.next, VAL_NEXT_FAIL);
    assert_true(r.remove_file && r.annotate && r.event && r.warning);
    assert_int_equal(r.state, NODESTATE_V_FAILED);
    assert_string_equal(r.message, "plugin: short");
    /* an error ends the try even with time left */
    val_report_plan(VAL_DRIVER, VAL_ERROR, "write driver-ready: EROFS", "", true, &r);
    assert_int_equal(r.next, VAL_NEXT_FAIL);
    assert_int_equal(r.state, NODESTATE_V_FAILED);
    assert_string_equal(r.message, "driver: write driver-ready: EROFS");
    /* all-done: no status file, no annotation; an Event when it fails */
    val_report_plan(VAL_ALL_DONE, VAL_PASSED, "", "", false, &r);
    assert_false(r.annotate || r.event || r.remove_file);
    val_report_plan(VAL_ALL_DONE, VAL_NOT_YET, "cuda-ready missing", "", false, &r);
    assert_int_equal(r.next, VAL_NEXT_FAIL);
    assert_false(r.annotate || r.remove_file);
    assert_true(r.event);
}

static void test_status_missing(void **state)
{
    (void)state;
    char buf[256];
    bool present[NODESTATE_FILE_COUNT] = {0};
    assert_int_equal(val_status_missing(present, false, buf, sizeof(buf)), 4);
    assert_string_equal(buf, "driver-ready, toolkit-ready, cuda-ready, plugin-ready");
    present[NODESTATE_DRIVER_READY] = present[NODESTATE_CUDA_READY] = true;
    present[NODESTATE_TOOLKIT_CTR_READY] = true; /* not one all-done needs */
    assert_int_equal(val_status_missing(present, false, buf, sizeof(buf)), 2);
    assert_string_equal(buf, "toolkit-ready, plugin-ready");
    present[NODESTATE_TOOLKIT_READY] = present[NODESTATE_PLUGIN_READY] = true;
    assert_int_equal(val_status_missing(present, false, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
    /* a node without the device plugin (DRA): plugin-ready is not one all-done needs */
    present[NODESTATE_PLUGIN_READY] = false;
    assert_int_equal(val_status_missing(present, false, buf, sizeof(buf)), 1);
    assert_int_equal(val_status_missing(present, true, buf, sizeof(buf)), 0);
    present[NODESTATE_CUDA_READY] = false;
    assert_int_equal(val_status_missing(present, true, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "cuda-ready");
    /* what a stopped validator takes away: the checks' files, not the containers' markers */
    assert_true(val_status_cleared_on_stop(NODESTATE_DRIVER_READY));
    assert_true(val_status_cleared_on_stop(NODESTATE_PLUGIN_READY));
    assert_true(val_status_cleared_on_stop(NODESTATE_GDRCOPY_READY));
    assert_false(val_status_cleared_on_stop(NODESTATE_DRIVER_CTR_READY));
    assert_false(val_status_cleared_on_stop(NODESTATE_TOOLKIT_CTR_READY));
}

/* ---- the checks as plans: a world answers the probes, the plan's questions and verdict ---- */

/* What each probe finds on a simulated node. */
struct world {
    int driver_err; /* the driver probe fails with this */
    struct nodestate_driver_facts driver;
    bool driver_ds, toolkit_ds;
    const char *driver_pod;            /* JSON, NULL none */
    const char *driver_ready, *marker; /* NULL: missing */
    const char *ctr_ready;             /* .driver-ctr-ready: NULL missing */
    enum val_stage spec_fail;          /* VAL_STAGE_NONE: parses */
    const char *const *spec_devices;   /* NULL-terminated */
    const char *lib;                   /* FIND_LIB: NULL not found */
    enum val_stage gpus_fail;
    size_t n_gpus;
    bool lost;
    int pci;
    const char *node; /* JSON, NULL: the API fails */
    enum val_stage runtime_fail;
    bool cuda_fails;
    bool status[NODESTATE_FILE_COUNT];
};

struct asked {
    char probes[256];                      /* "driver,driver-ds,gpus" */
    char paths[VAL_PROBE_COUNT][PATH_MAX]; /* each probe's path argument */
    const char *runtime_version;
};

static bool world_has(void *ud, const char *name)
{
    for (const char *const *n = ud; n && *n; n++)
        if (strcmp(*n, name) == 0)
            return true;
    return false;
}

static void answer(const struct world *w, const struct val_step *st, struct val_facts *f,
                   struct nodestate_gpu *gpus, json_t **pod, json_t **node)
{
    struct val_failure *x = &f->fail[st->probe];
    f->have[st->probe] = true;
    switch (st->probe) {
    case VAL_PROBE_DRIVER:
        f->driver = w->driver;
        x->code = w->driver_err;
        snprintf(x->msg, sizeof(x->msg), "host root unreadable");
        break;
    case VAL_PROBE_DRIVER_DS:
        assert_string_equal(st->selector, VAL_DRIVER_DS_SELECTOR);
        f->driver_ds = w->driver_ds;
        break;
    case VAL_PROBE_TOOLKIT_DS:
        assert_string_equal(st->selector, VAL_TOOLKIT_DS_SELECTOR);
        f->toolkit_ds = w->toolkit_ds;
        break;
    case VAL_PROBE_DRIVER_POD:
        f->driver_pod = *pod = w->driver_pod ? json_loads(w->driver_pod, 0, NULL) : NULL;
        break;
    case VAL_PROBE_DRIVER_READY:
        f->driver_ready = w->driver_ready;
        f->driver_ready_len = w->driver_ready ? strlen(w->driver_ready) : 0;
        x->code = w->driver_ready ? 0 : -ENOENT;
        break;
    case VAL_PROBE_CTR_READY:
        f->ctr_ready = w->ctr_ready;
        f->ctr_ready_len = w->ctr_ready ? strlen(w->ctr_ready) : 0;
        x->code = w->ctr_ready ? 0 : -ENOENT;
        break;
    case VAL_PROBE_MARKER:
        f->marker = w->marker;
        f->marker_len = w->marker ? strlen(w->marker) : 0;
        x->code = w->marker ? 0 : -ENOENT;
        break;
    case VAL_PROBE_CDI_SPEC:
        assert_true(snprintf(f->spec_path, sizeof(f->spec_path), "/host%s", st->path) <
                    (int)sizeof(f->spec_path));
        x->code = w->spec_fail ? -EINVAL : 0;
        x->stage = w->spec_fail;
        snprintf(x->msg, sizeof(x->msg), "bad spec");
        f->spec_has = world_has;
        f->spec = (void *)w->spec_devices;
        for (const char *const *n = w->spec_devices; n && *n; n++)
            f->spec_devices++;
        break;
    case VAL_PROBE_FIND_LIB:
        x->code = w->lib ? 0 : -ENOENT;
        assert_true(snprintf(f->lib, sizeof(f->lib), "%s%s", st->lib_root, w->lib ? w->lib : "") <
                    (int)sizeof(f->lib));
        break;
    case VAL_PROBE_GPUS:
        x->code = w->gpus_fail ? -EIO : 0;
        x->stage = w->gpus_fail;
        snprintf(x->msg, sizeof(x->msg), "boom");
        for (size_t i = 0; i < w->n_gpus; i++) {
            static char uuids[8][32];
            snprintf(uuids[i], sizeof(uuids[i]), "GPU-%zu", i);
            gpus[i] = (struct nodestate_gpu){.uuid = uuids[i], .lost = w->lost && i == 0};
        }
        f->gpus = gpus;
        f->n_gpus = w->n_gpus;
        f->nvml_version = "550.127.05";
        break;
    case VAL_PROBE_PCI:
        f->pci_gpus = w->pci;
        break;
    case VAL_PROBE_NODE:
        f->node = *node = w->node ? json_loads(w->node, 0, NULL) : NULL;
        x->code = w->node ? 0 : -ECONNREFUSED;
        snprintf(x->msg, sizeof(x->msg), "connection refused");
        break;
    case VAL_PROBE_RUNTIME:
        f->runtime = w->runtime_fail == VAL_STAGE_DETECT ? NULL : "containerd";
        x->code = w->runtime_fail ? -EINVAL : 0;
        x->stage = w->runtime_fail;
        snprintf(x->msg, sizeof(x->msg), "no nvidia handler");
        break;
    case VAL_PROBE_CUDA:
        x->code = w->cuda_fails ? -EIO : 0;
        snprintf(x->msg, sizeof(x->msg), "vectorAdd failed");
        f->cuda_devices = 8;
        f->cuda_driver = 12080;
        break;
    case VAL_PROBE_STATUS:
        memcpy(f->status, w->status, sizeof(f->status));
        break;
    default:
        fail();
    }
}

/* Runs c's plan against w: every probe once, in the order asked; the verdict in st. */
static void run_plan(enum val_component c, const struct val_config *cfg, const struct world *w,
                     struct asked *a, struct val_step *st)
{
    struct val_facts f = {0};
    struct nodestate_gpu gpus[8];
    json_t *pod = NULL, *node = NULL;
    memset(a, 0, sizeof(*a));
    for (int i = 0; i < VAL_PROBE_COUNT + 1; i++) {
        val_check_step(c, cfg, &f, st);
        if (st->probe == VAL_PROBE_NONE)
            break;
        assert_false(f.have[st->probe]);
        size_t used = strlen(a->probes);
        snprintf(a->probes + used, sizeof(a->probes) - used, "%s%s", used ? "," : "",
                 val_probe_name(st->probe));
        strlcpy_s(a->paths[st->probe], st->probe == VAL_PROBE_FIND_LIB ? st->lib_root : st->path,
                  PATH_MAX);
        if (st->probe == VAL_PROBE_RUNTIME)
            a->runtime_version = st->runtime_version ? "set" : NULL;
        answer(w, st, &f, gpus, &pod, &node);
    }
    assert_int_equal(st->probe, VAL_PROBE_NONE);
    json_decref(pod);
    json_decref(node);
}

#define READY_HOST                                                            \
    "IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/\nDRIVER_ROOT_CTR_PATH=/host\n" \
    "NVIDIA_DEV_ROOT=/\nDEV_ROOT_CTR_PATH=/host\n"
#define NODE_8                                       \
    "{\"metadata\":{\"name\":\"n1\",\"labels\":{}}," \
    "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\"}}}"

static const struct val_config plan_cfg = {
    .paths = {"/host", "/run/nvidia/driver", "/run/nvidia/validations"}};

static void test_plan_driver(void **state)
{
    (void)state;
    struct asked a;
    struct val_step *st = xcalloc(1, sizeof(*st));
    /* a host driver, verified: driver-ready written, the owner recorded, NVML the host's */
    struct world w = {.n_gpus = 8, .pci = 8};
    strlcpy_s(w.driver.host_smi, "/host/usr/bin/nvidia-smi", sizeof(w.driver.host_smi));
    strlcpy_s(w.driver.host_nvml, "/host/usr/lib/libnvidia-ml.so.1", sizeof(w.driver.host_nvml));
    run_plan(VAL_DRIVER, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver,driver-ds,gpus,pci");
    assert_string_equal(a.paths[VAL_PROBE_GPUS], "/host/usr/lib/libnvidia-ml.so.1");
    assert_int_equal(st->outcome, VAL_PASSED);
    assert_true(st->write);
    assert_int_equal(st->file, NODESTATE_DRIVER_READY);
    assert_string_equal(st->text, READY_HOST);
    assert_true(st->record_owner);
    assert_int_equal(st->owner.owner, NODESTATE_OWNER_HOST);
    assert_string_equal(st->owner.version, "550.127.05");
    assert_non_null(strstr(st->owner.source, "validated: nvidia-smi /host/usr/bin/nvidia-smi"));
    assert_string_equal(st->log_msg, "driver validated");
    assert_non_null(strstr(st->log_kv, "source=host "));
    assert_non_null(strstr(st->log_kv, "gpus=8 pci=8"));
    /* GPUOP_NVML_LIBRARY, read at configure, wins over the driver root's */
    struct val_config cfg = plan_cfg;
    cfg.nvml_library = "/opt/sim/libnvidia-ml.so.1";
    run_plan(VAL_DRIVER, &cfg, &w, &a, st);
    assert_string_equal(a.paths[VAL_PROBE_GPUS], "/opt/sim/libnvidia-ml.so.1");
    /* NVML does not answer: no PCI count asked, the reason names the driver found */
    w.gpus_fail = VAL_STAGE_READ;
    run_plan(VAL_DRIVER, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver,driver-ds,gpus");
    assert_int_equal(st->outcome, VAL_NOT_YET);
    assert_false(st->write || st->record_owner);
    assert_non_null(strstr(st->reason, "NVML does not initialise: boom (host driver: nvidia-smi"));
    /* one of 9 PCI GPUs missing from NVML; a lost GPU */
    w.gpus_fail = VAL_STAGE_NONE;
    w.pci = 9;
    run_plan(VAL_DRIVER, &plan_cfg, &w, &a, st);
    assert_non_null(strstr(st->reason, "NVML lists 8 GPUs but the node has 9 NVIDIA PCI devices"));
    w.pci = 8;
    w.lost = true;
    run_plan(VAL_DRIVER, &plan_cfg, &w, &a, st);
    assert_non_null(strstr(st->reason, "1 of 8 GPUs are lost"));
    /* the expected version */
    w.lost = false;
    cfg = plan_cfg;
    cfg.driver_version = "570.86.15";
    run_plan(VAL_DRIVER, &cfg, &w, &a, st);
    assert_non_null(strstr(st->reason, "driver version 550.127.05, expected 570.86.15"));
    /* the node root cannot be read: an error, nothing else asked */
    w.driver_err = -EACCES;
    run_plan(VAL_DRIVER, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver");
    assert_int_equal(st->outcome, VAL_ERROR);
    assert_int_equal(st->code, -EACCES);
    assert_string_equal(st->reason, "host root unreadable");
    /* a managed node whose driver container is not ready: its pod says why */
    struct world m = {.driver_ds = true,
                      .driver_pod = "{\"metadata\":{\"name\":\"nvidia-driver-x\"},\"status\":{"
                                    "\"initContainerStatuses\":[{\"name\":\"k8s-driver-manager\","
                                    "\"ready\":false,\"state\":{\"running\":{}}}]}}"};
    run_plan(VAL_DRIVER, &plan_cfg, &m, &a, st);
    assert_string_equal(a.probes, "driver,driver-ds,driver-pod");
    assert_int_equal(st->outcome, VAL_NOT_YET);
    assert_non_null(strstr(st->reason, "waiting for the driver container"));
    assert_non_null(
        strstr(st->reason, "; driver pod nvidia-driver-x: k8s-driver-manager: running, not ready"));
    /* no driver at all, nothing manages it: no pod asked for */
    struct world none = {0};
    run_plan(VAL_DRIVER, &plan_cfg, &none, &a, st);
    assert_string_equal(a.probes, "driver,driver-ds");
    assert_non_null(strstr(st->reason, "no driver:"));
    val_step_clear(st);
    free(st);
}

/* .driver-ctr-ready's variables: which modules the driver container enabled */
static void test_modules_enabled(void **state)
{
    (void)state;
    static const struct {
        const char *text; /* NULL: no file */
        bool rdma, gds, gdrcopy;
    } cases[] = {
        {NULL, false, false, false},
        {"", false, false, false},
        /* what gpuop's startup probe writes: "true", else empty */
        {"GPU_DIRECT_RDMA_ENABLED=true\nGDS_ENABLED=\nGDRCOPY_ENABLED=\n", true, false, false},
        {"GPU_DIRECT_RDMA_ENABLED=true\nGDS_ENABLED=true\nGDRCOPY_ENABLED=true", true, true, true},
        /* YAML, quotes, blanks, CRLF, comments, any case */
        {"GDS_ENABLED: \"true\"\r\n# GDRCOPY_ENABLED=true\n  GDRCOPY_ENABLED : 'TRUE'\n", false,
         true, true},
        /* anything but true is off; a longer or shorter name is another variable */
        {"GDS_ENABLED=false\nGDRCOPY_ENABLED=1\nGPU_DIRECT_RDMA_ENABLED=truee\n", false, false,
         false},
        {"XGDS_ENABLED=true\nGDS_ENABLED_X=true\nGDS_ENABLE=true\n", false, false, false},
        /* the last line wins; a line without a separator is skipped */
        {"GDS_ENABLED=true\nGDS_ENABLED=false\ngarbage\nGDRCOPY_ENABLED=true", false, false, true},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        bool en[VAL_MOD_COUNT];
        val_modules_enabled(cases[i].text, cases[i].text ? strlen(cases[i].text) : 0, en);
        print_message("case %zu\n", i);
        assert_int_equal(en[VAL_MOD_PEERMEM], cases[i].rdma);
        assert_int_equal(en[VAL_MOD_NVIDIA_FS], cases[i].gds);
        assert_int_equal(en[VAL_MOD_GDRCOPY], cases[i].gdrcopy);
    }
    /* a NUL inside is no blank: the value is not "true" */
    bool en[VAL_MOD_COUNT];
    val_modules_enabled("GDS_ENABLED=\0true", 17, en);
    assert_false(en[VAL_MOD_NVIDIA_FS]);
    assert_int_equal(val_module_file(VAL_MOD_PEERMEM), NODESTATE_PEERMEM_READY);
    assert_string_equal(nodestate_file_name(val_module_file(VAL_MOD_PEERMEM)),
                        "nvidia-peermem-ready");
    assert_string_equal(nodestate_file_name(val_module_file(VAL_MOD_NVIDIA_FS)), "nvidia-fs-ready");
    assert_string_equal(nodestate_file_name(val_module_file(VAL_MOD_GDRCOPY)), "gdrcopy-ready");
}

/* Each enabled module must be loaded; the reason names the module, what enabled it, and what
 * the driver pod says of the container that loads it. */
static void test_modules_missing(void **state)
{
    (void)state;
    static const char pod[] =
        "{\"metadata\":{\"name\":\"d\"},\"status\":{\"containerStatuses\":["
        "{\"name\":\"nvidia-driver-ctr\",\"ready\":true,\"state\":{\"running\":{}}},"
        "{\"name\":\"nvidia-fs-ctr\",\"ready\":false,\"restartCount\":2,\"state\":{\"waiting\":{"
        "\"reason\":\"CrashLoopBackOff\"}},\"lastState\":{\"terminated\":{\"exitCode\":1,"
        "\"message\":\"Installing prerequisites\\nno kernel sources\\n\"}}},"
        "{\"name\":\"nvidia-gdrcopy-ctr\",\"ready\":false,\"state\":{\"running\":{}}}]}}";
    static const struct {
        bool en[VAL_MOD_COUNT];
        bool peermem, fs, gdrdrv; /* loaded */
        bool with_pod;
        size_t missing;
        const char *want; /* the reason; "" for none */
    } cases[] = {
        {{false, false, false}, false, false, false, true, 0, ""},
        {{true, true, true}, true, true, true, true, 0, ""},
        /* loaded but not enabled: nothing to say */
        {{false, false, false}, true, true, true, false, 0, ""},
        /* no pod known (or no status for its container): which container loads it */
        {{true, false, false},
         false,
         true,
         true,
         false,
         1,
         "module nvidia_peermem (GPUDirect RDMA, GPU_DIRECT_RDMA_ENABLED) is not loaded (the "
         "driver pod's nvidia-peermem-ctr keeps it loaded)"},
        {{true, false, false},
         false,
         true,
         true,
         true,
         1,
         "module nvidia_peermem (GPUDirect RDMA, GPU_DIRECT_RDMA_ENABLED) is not loaded (the "
         "driver pod's nvidia-peermem-ctr keeps it loaded)"},
        {{false, true, false},
         false,
         false,
         false,
         false,
         1,
         "module nvidia_fs (GPUDirect Storage, GDS_ENABLED) is not loaded (the driver pod's "
         "nvidia-fs-ctr loads it)"},
        /* its container's failure, the last line of its message */
        {{false, true, false},
         false,
         false,
         false,
         true,
         1,
         "module nvidia_fs (GPUDirect Storage, GDS_ENABLED) is not loaded: nvidia-fs-ctr failed "
         "(exit 1): no kernel sources"},
        {{false, true, true},
         false,
         false,
         false,
         true,
         2,
         "module nvidia_fs (GPUDirect Storage, GDS_ENABLED) is not loaded: nvidia-fs-ctr failed "
         "(exit 1): no kernel sources; module gdrdrv (GDRCopy, GDRCOPY_ENABLED) is not loaded: "
         "nvidia-gdrcopy-ctr: running, not ready yet"},
    };
    json_t *p = json_loads(pod, 0, NULL);
    assert_non_null(p);
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        bool mod[NODESTATE_MOD_COUNT] = {0};
        mod[NODESTATE_MOD_NVIDIA] = true;
        mod[NODESTATE_MOD_NVIDIA_PEERMEM] = cases[i].peermem;
        mod[NODESTATE_MOD_NVIDIA_FS] = cases[i].fs;
        mod[NODESTATE_MOD_GDRDRV] = cases[i].gdrdrv;
        char buf[NODESTATE_REASON_MAX];
        print_message("case %zu\n", i);
        assert_int_equal(
            val_modules_missing(cases[i].en, mod, cases[i].with_pod ? p : NULL, buf, sizeof(buf)),
            cases[i].missing);
        assert_string_equal(buf, cases[i].want);
    }
    json_decref(p);
    /* a short buffer ends in "...", the count stays right */
    bool all[VAL_MOD_COUNT] = {true, true, true}, none[NODESTATE_MOD_COUNT] = {0};
    char small[40];
    assert_int_equal(val_modules_missing(all, none, NULL, small, sizeof(small)), 3);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_string_equal(small + sizeof(small) - 4, "...");
}

/* The driver check with modules enabled by the driver container. */
static void test_plan_driver_modules(void **state)
{
    (void)state;
    struct asked a;
    struct val_step *st = xcalloc(1, sizeof(*st));
    /* the containerized driver, its startup probe's file naming GDS and GDRCopy */
    struct world w = {.n_gpus = 8,
                      .pci = 8,
                      .driver_ds = true,
                      .ctr_ready = "GPU_DIRECT_RDMA_ENABLED=\nGDS_ENABLED=true\n"
                                   "GDRCOPY_ENABLED=true\n"};
    w.driver.ctr_ready = w.driver.root_used = true;
    w.driver.module[NODESTATE_MOD_NVIDIA] = true;
    strlcpy_s(w.driver.root_nvml, "/run/nvidia/driver/usr/lib/libnvidia-ml.so.1",
              sizeof(w.driver.root_nvml));
    w.driver.module[NODESTATE_MOD_NVIDIA_FS] = w.driver.module[NODESTATE_MOD_GDRDRV] = true;
    run_plan(VAL_DRIVER, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver,driver-ds,gpus,pci,ctr-ready");
    assert_int_equal(st->outcome, VAL_PASSED);
    assert_int_equal(st->file, NODESTATE_DRIVER_READY);
    assert_true(st->also[NODESTATE_NVIDIA_FS_READY] && st->also[NODESTATE_GDRCOPY_READY]);
    assert_false(st->also[NODESTATE_PEERMEM_READY] || st->also[NODESTATE_DRIVER_READY]);
    assert_true(st->drop[NODESTATE_PEERMEM_READY]);
    assert_false(st->drop[NODESTATE_NVIDIA_FS_READY] || st->drop[NODESTATE_GDRCOPY_READY]);
    assert_non_null(strstr(st->log_kv, "rdma=false gds=true gdrcopy=true"));
    /* gdrdrv missing: not yet, the driver pod's failing container joins the reason */
    w.driver.module[NODESTATE_MOD_GDRDRV] = false;
    w.driver_pod = "{\"metadata\":{\"name\":\"nvidia-driver-daemonset-x\"},\"status\":{"
                   "\"containerStatuses\":[{\"name\":\"nvidia-driver-ctr\",\"ready\":true,"
                   "\"state\":{\"running\":{}}},{\"name\":\"nvidia-gdrcopy-ctr\",\"ready\":"
                   "false,\"restartCount\":1,\"state\":{\"waiting\":{\"reason\":"
                   "\"CrashLoopBackOff\"}},\"lastState\":{\"terminated\":{\"exitCode\":1,"
                   "\"message\":\"gdrdrv: no sources\\n\"}}}]}}";
    run_plan(VAL_DRIVER, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver,driver-ds,gpus,pci,ctr-ready,driver-pod");
    assert_int_equal(st->outcome, VAL_NOT_YET);
    assert_false(st->write);
    assert_string_equal(st->reason,
                        "module gdrdrv (GDRCopy, GDRCOPY_ENABLED) is not loaded: "
                        "nvidia-gdrcopy-ctr failed (exit 1): gdrdrv: no sources (driver pod "
                        "nvidia-driver-daemonset-x)");
    /* nothing enabled (an older probe's empty file, or none): driver-ready alone, as before */
    w.ctr_ready = "";
    run_plan(VAL_DRIVER, &plan_cfg, &w, &a, st);
    assert_int_equal(st->outcome, VAL_PASSED);
    for (int f = 0; f < NODESTATE_FILE_COUNT; f++)
        assert_false(st->also[f]);
    assert_true(st->drop[NODESTATE_NVIDIA_FS_READY] && st->drop[NODESTATE_GDRCOPY_READY]);
    /* an unmanaged containerized driver without the file: nothing enabled either */
    w.ctr_ready = NULL;
    w.driver_ds = false;
    run_plan(VAL_DRIVER, &plan_cfg, &w, &a, st);
    assert_int_equal(st->outcome, VAL_PASSED);
    /* a host driver: its modules are the host's, the file not read */
    struct world h = {.n_gpus = 8, .pci = 8, .ctr_ready = "GDS_ENABLED=true\n"};
    strlcpy_s(h.driver.host_smi, "/host/usr/bin/nvidia-smi", sizeof(h.driver.host_smi));
    strlcpy_s(h.driver.host_nvml, "/host/usr/lib/libnvidia-ml.so.1", sizeof(h.driver.host_nvml));
    run_plan(VAL_DRIVER, &plan_cfg, &h, &a, st);
    assert_string_equal(a.probes, "driver,driver-ds,gpus,pci");
    assert_int_equal(st->outcome, VAL_PASSED);
    assert_false(st->also[NODESTATE_NVIDIA_FS_READY]);
    val_step_clear(st);
    free(st);
}

static void test_plan_toolkit(void **state)
{
    (void)state;
    struct asked a;
    struct val_step *st = xcalloc(1, sizeof(*st));
    static const char *const devices[] = {"0",     "1",     "2",     "3",     "4",     "5",
                                          "6",     "7",     "GPU-0", "GPU-1", "GPU-2", "GPU-3",
                                          "GPU-4", "GPU-5", "GPU-6", "GPU-7", NULL};
    /* the driver check has not passed */
    struct world w = {0};
    run_plan(VAL_TOOLKIT, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver-ready");
    assert_int_equal(st->outcome, VAL_NOT_YET);
    assert_string_equal(st->reason, "/run/nvidia/validations/driver-ready is missing: the driver "
                                    "check has not passed");
    /* gpuop's toolkit runs but has not written its marker yet */
    w.driver_ready = READY_HOST;
    w.toolkit_ds = true;
    run_plan(VAL_TOOLKIT, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver-ready,marker,toolkit-ds");
    assert_string_equal(st->reason, "waiting for the toolkit: "
                                    "/run/nvidia/validations/.toolkit-ctr-ready is not there yet");
    /* no toolkit DaemonSet: the marker's defaults; a spec that does not parse */
    w.toolkit_ds = false;
    w.spec_fail = VAL_STAGE_PARSE;
    run_plan(VAL_TOOLKIT, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver-ready,marker,toolkit-ds,cdi-spec");
    assert_string_equal(a.paths[VAL_PROBE_CDI_SPEC], NODESTATE_CDI_SPEC_DEFAULT);
    assert_string_equal(st->reason, "CDI spec \"/host" NODESTATE_CDI_SPEC_DEFAULT
                                    "\" does not parse: bad spec");
    w.spec_fail = VAL_STAGE_RESOLVE;
    run_plan(VAL_TOOLKIT, &plan_cfg, &w, &a, st);
    assert_non_null(strstr(st->reason, "under /host: cannot resolve its path"));
    /* the spec lacks devices NVML lists: the driver root's NVML, found under driver-ready's root */
    w.spec_fail = VAL_STAGE_NONE;
    w.spec_devices = devices + 2;
    w.lib = "/usr/lib/libnvidia-ml.so.1";
    w.n_gpus = 8;
    run_plan(VAL_TOOLKIT, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver-ready,marker,toolkit-ds,cdi-spec,find-lib,gpus");
    assert_string_equal(a.paths[VAL_PROBE_FIND_LIB], "/host");
    assert_string_equal(a.paths[VAL_PROBE_GPUS], "/host/usr/lib/libnvidia-ml.so.1");
    assert_string_equal(st->reason,
                        "CDI spec \"/host" NODESTATE_CDI_SPEC_DEFAULT "\" lacks 2 devices: 0, 1");
    /* the marker says the toolkit left the runtime alone */
    w.marker = "RUNTIME=none\n";
    /* every device there, the runtime left alone: passed without the Node */
    w.spec_devices = devices;
    run_plan(VAL_TOOLKIT, &plan_cfg, &w, &a, st);
    assert_int_equal(st->outcome, VAL_PASSED);
    assert_true(st->write);
    assert_int_equal(st->file, NODESTATE_TOOLKIT_READY);
    assert_null(st->text);
    assert_false(st->record_owner);
    assert_non_null(strstr(st->log_kv, "runtime=none "));
    assert_non_null(strstr(st->log_kv, "devices=16"));
    /* a runtime to check: the Node's runtime version goes with it; its failure is the reason */
    w.marker = "RUNTIME=containerd\n";
    w.node = NODE_8;
    w.runtime_fail = VAL_STAGE_CHECK;
    run_plan(VAL_TOOLKIT, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver-ready,marker,cdi-spec,find-lib,gpus,node,runtime");
    assert_string_equal(st->reason, "containerd is not configured for GPUs: no nvidia handler");
    w.runtime_fail = VAL_STAGE_DETECT;
    w.node = NULL; /* no API server: detected from the node root */
    run_plan(VAL_TOOLKIT, &plan_cfg, &w, &a, st);
    assert_null(a.runtime_version);
    assert_string_equal(st->reason, "container runtime: no nvidia handler");
    w.runtime_fail = VAL_STAGE_NONE;
    run_plan(VAL_TOOLKIT, &plan_cfg, &w, &a, st);
    assert_int_equal(st->outcome, VAL_PASSED);
    assert_non_null(strstr(st->log_kv, "runtime=containerd "));
    /* GPUOP_NVML_LIBRARY: no library looked for under the root */
    struct val_config cfg = plan_cfg;
    cfg.nvml_library = "/opt/libnvidia-ml.so.1";
    run_plan(VAL_TOOLKIT, &cfg, &w, &a, st);
    assert_null(strstr(a.probes, "find-lib"));
    assert_string_equal(a.paths[VAL_PROBE_GPUS], "/opt/libnvidia-ml.so.1");
    /* a root without NVML: the loader's default */
    w.lib = NULL;
    run_plan(VAL_TOOLKIT, &plan_cfg, &w, &a, st);
    assert_string_equal(a.paths[VAL_PROBE_GPUS], "");
    w.gpus_fail = VAL_STAGE_OPEN;
    run_plan(VAL_TOOLKIT, &plan_cfg, &w, &a, st);
    assert_string_equal(st->reason, "NVML does not initialise: boom");
    /* a driver-ready that does not parse */
    w.driver_ready = "NVIDIA_DRIVER_ROOT=/\n";
    run_plan(VAL_TOOLKIT, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver-ready");
    assert_non_null(strstr(st->reason, "IS_HOST_DRIVER"));
    val_step_clear(st);
    free(st);
}

static void test_plan_cuda_plugin(void **state)
{
    (void)state;
    struct asked a;
    struct val_step *st = xcalloc(1, sizeof(*st));
    struct world w = {.driver_ready = READY_HOST, .n_gpus = 8};
    /* no libcuda under the driver root */
    run_plan(VAL_CUDA, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver-ready,find-lib");
    assert_string_equal(st->reason, "libcuda.so.1 is not under the driver root /host (searched "
                                    "its lib folders)");
    w.lib = "/usr/lib/libcuda.so.1";
    w.cuda_fails = true;
    run_plan(VAL_CUDA, &plan_cfg, &w, &a, st);
    assert_string_equal(a.paths[VAL_PROBE_CUDA], "/host/usr/lib/libcuda.so.1");
    assert_string_equal(st->reason, "CUDA check: vectorAdd failed");
    w.cuda_fails = false;
    struct val_config cfg = plan_cfg;
    cfg.cuda_library = "/opt/libcuda.so.1";
    run_plan(VAL_CUDA, &cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver-ready,cuda");
    assert_string_equal(a.paths[VAL_PROBE_CUDA], "/opt/libcuda.so.1");
    assert_int_equal(st->outcome, VAL_PASSED);
    assert_int_equal(st->file, NODESTATE_CUDA_READY);
    assert_string_equal(st->log_kv, "devices=8 driver=12080");
    /* plugin: the Node unread */
    run_plan(VAL_PLUGIN, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "driver-ready,find-lib,gpus,node");
    assert_string_equal(st->reason, "get the node: connection refused");
    w.node = "{\"metadata\":{\"name\":\"n1\"},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":"
             "\"7\"}}}";
    run_plan(VAL_PLUGIN, &plan_cfg, &w, &a, st);
    assert_non_null(strstr(st->reason, "the node advertises fewer GPUs than it has: "));
    assert_non_null(strstr(st->reason, "nvidia.com/gpu: 7 of 8 advertised"));
    w.node = "{\"metadata\":{\"name\":\"n1\",\"labels\":{\"nvidia.com/mig.strategy\":\"odd\"}}}";
    run_plan(VAL_PLUGIN, &plan_cfg, &w, &a, st);
    assert_string_equal(st->reason,
                        "node label nvidia.com/mig.strategy: \"odd\" is not none, single or mixed");
    w.node = NODE_8;
    run_plan(VAL_PLUGIN, &plan_cfg, &w, &a, st);
    assert_int_equal(st->outcome, VAL_PASSED);
    assert_int_equal(st->file, NODESTATE_PLUGIN_READY);
    assert_string_equal(st->log_kv, "physical=8 strategy=none");
    /* a node whose device plugin is turned off (a DRA node): nothing advertised, nothing to
     * compare, the check passes */
    w.node = "{\"metadata\":{\"name\":\"n1\",\"labels\":{\"nvidia.com/gpu.deploy.device-plugin\":"
             "\"false\"}},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"0\"}}}";
    run_plan(VAL_PLUGIN, &plan_cfg, &w, &a, st);
    assert_int_equal(st->outcome, VAL_PASSED);
    assert_int_equal(st->file, NODESTATE_PLUGIN_READY);
    assert_string_equal(st->log_kv, "label=nvidia.com/gpu.deploy.device-plugin=false");
    val_step_clear(st);
    free(st);
}

static void test_plan_status(void **state)
{
    (void)state;
    struct asked a;
    struct val_step *st = xcalloc(1, sizeof(*st));
    struct world w = {0};
    w.status[NODESTATE_DRIVER_READY] = true;
    run_plan(VAL_ALL_DONE, &plan_cfg, &w, &a, st);
    assert_string_equal(a.probes, "status");
    assert_string_equal(st->reason, "not validated yet: toolkit-ready, cuda-ready, plugin-ready "
                                    "missing in /run/nvidia/validations");
    run_plan(VAL_TOOLKIT_READY, &plan_cfg, &w, &a, st);
    assert_string_equal(st->reason, "waiting for toolkit-ready in /run/nvidia/validations");
    for (int i = 0; i < NODESTATE_FILE_COUNT; i++)
        w.status[i] = true;
    run_plan(VAL_ALL_DONE, &plan_cfg, &w, &a, st);
    assert_int_equal(st->outcome, VAL_PASSED);
    assert_false(st->write); /* all-done and the wait write nothing */
    assert_string_equal(st->log_msg, "all validations are successful");
    run_plan(VAL_TOOLKIT_READY, &plan_cfg, &w, &a, st);
    assert_int_equal(st->outcome, VAL_PASSED);
    assert_false(st->write);
    assert_null(st->log_msg);
    /* how long each check tries */
    assert_int_equal(val_try_window_ms(VAL_PLUGIN, false, 150000), 150000);
    assert_int_equal(val_try_window_ms(VAL_DRIVER, false, 150000), 0);
    assert_true(val_try_window_ms(VAL_ALL_DONE, true, 150000) == UINT64_MAX);
    val_step_clear(st);
    free(st);
}

static void test_component_names(void **state)
{
    (void)state;
    enum nodestate_component nc;
    assert_int_equal(val_component_ns(VAL_TOOLKIT, &nc), 0);
    assert_int_equal(nc, NODESTATE_COMP_TOOLKIT);
    assert_int_equal(val_component_ns(VAL_ALL_DONE, &nc), -EINVAL);
    for (int c = 0; c < VAL_ALL_DONE; c++) {
        assert_int_equal(val_component_ns((enum val_component)c, &nc), 0);
        assert_string_equal(val_component_names[c], nodestate_component_name(nc));
    }
    assert_string_equal(val_component_names[VAL_ALL_DONE], "all-done");
    assert_null(val_component_names[VAL_COMPONENT_COUNT]);
}

#define FX(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        FX(test_host_module_loaded),
        FX(test_host_smi_and_libs),
        FX(test_only_libraries_left),
        FX(test_only_smi),
        FX(test_smi_not_executable),
        FX(test_container_driver),
        FX(test_container_unmanaged),
        FX(test_marker_without_library),
        FX(test_none),
        FX(test_host_root_missing),
        FX(test_find_links),
        FX(test_resolve_in_root),
        cmocka_unit_test(test_driver_verify),
        cmocka_unit_test(test_toolkit_marker),
        cmocka_unit_test(test_cdi_missing),
        cmocka_unit_test(test_plugin_reason),
        cmocka_unit_test(test_report_plan),
        cmocka_unit_test(test_driver_pod_reason),
        cmocka_unit_test(test_status_missing),
        cmocka_unit_test(test_plan_driver),
        cmocka_unit_test(test_modules_enabled),
        cmocka_unit_test(test_modules_missing),
        cmocka_unit_test(test_plan_driver_modules),
        cmocka_unit_test(test_plan_toolkit),
        cmocka_unit_test(test_plan_cuda_plugin),
        cmocka_unit_test(test_plan_status),
        cmocka_unit_test(test_component_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
