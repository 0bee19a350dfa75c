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
    assert_int_equal(nodestate_root_resolve(f->host, "/var/run/cdi/nvidia.yaml", buf, sizeof(buf)),
                     0);
    _cleanup_free_ char *want = xasprintf("%s/run/cdi/nvidia.yaml", f->host);
    assert_string_equal(buf, want);
    /* relative links, "..", and a missing tail */
    _cleanup_free_ char *l = xasprintf("%s/etc/alt", f->host);
    assert_int_equal(symlink("../run/./cdi", l), 0);
    assert_int_equal(nodestate_root_resolve(f->host, "/etc/alt/x/y", buf, sizeof(buf)), 0);
    _cleanup_free_ char *want2 = xasprintf("%s/run/cdi/x/y", f->host);
    assert_string_equal(buf, want2);
    /* ".." never leaves the root */
    assert_int_equal(nodestate_root_resolve(f->host, "/../../etc", buf, sizeof(buf)), 0);
    _cleanup_free_ char *want3 = xasprintf("%s/etc", f->host);
    assert_string_equal(buf, want3);
    /* a loop */
    _cleanup_free_ char *a = xasprintf("%s/etc/a", f->host);
    assert_int_equal(symlink("/etc/a", a), 0);
    assert_int_equal(nodestate_root_resolve(f->host, "/etc/a/x", buf, sizeof(buf)), -ELOOP);
    assert_int_equal(nodestate_root_resolve("/", "/etc", buf, sizeof(buf)), 0);
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
    struct fx *f = *state;
    char buf[256];
    assert_int_equal(val_status_missing(f->val, buf, sizeof(buf)), 4);
    assert_string_equal(buf, "driver-ready, toolkit-ready, cuda-ready, plugin-ready");
    struct err e = {0};
    assert_int_equal(
        nodestate_file_write(f->val, NODESTATE_DRIVER_READY, "IS_HOST_DRIVER=true\n", &e), 0);
    assert_int_equal(nodestate_file_write(f->val, NODESTATE_CUDA_READY, NULL, &e), 0);
    assert_int_equal(val_status_missing(f->val, buf, sizeof(buf)), 2);
    assert_string_equal(buf, "toolkit-ready, plugin-ready");
    assert_int_equal(nodestate_file_write(f->val, NODESTATE_TOOLKIT_READY, NULL, &e), 0);
    assert_int_equal(nodestate_file_write(f->val, NODESTATE_PLUGIN_READY, NULL, &e), 0);
    assert_int_equal(val_status_missing(f->val, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
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
        FX(test_status_missing),
        cmocka_unit_test(test_component_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
