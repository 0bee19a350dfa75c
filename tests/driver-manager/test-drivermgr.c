/* SPDX-License-Identifier: Apache-2.0 */
/* The driver manager's core: the owner rule on node root fixtures (a temporary folder per case),
 * the pause and restore of the operand labels, which pods go, and the mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "driver-manager.h"
#include "remediation.h"

#define V   "550.127.05"
#define LIB "usr/lib/x86_64-linux-gnu"

/* ---- node root fixtures ------------------------------------------------------------------- */

struct fixture {
    char root[64]; /* the host root */
    char *driver;  /* <root>/run/nvidia/driver */
};

static void put(const char *root, const char *rel, const char *text, unsigned mode)
{
    _cleanup_free_ char *p = xasprintf("%s/%s", root, rel);
    _cleanup_free_ char *dir = xstrdup(p);
    *strrchr(dir, '/') = '\0';
    assert_int_equal(mkdir_p(dir, 0755), 0);
    struct err e = {0};
    assert_int_equal(file_write_atomic(p, text, strlen(text), mode, &e), 0);
}

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof(*f));
    snprintf(f->root, sizeof(f->root), "/tmp/dm-root-XXXXXX");
    assert_non_null(mkdtemp(f->root));
    f->driver = xasprintf("%s/run/nvidia/driver", f->root);
    assert_int_equal(mkdir_p(f->driver, 0755), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", f->root);
    assert_int_equal(system(cmd), 0);
    free(f->driver);
    free(f);
    return 0;
}

/* A loaded module as the kernel shows it. */
static void module(struct fixture *f, const char *name, const char *version)
{
    _cleanup_free_ char *p = xasprintf("sys/module/%s/refcnt", name);
    put(f->root, p, "0\n", 0644);
    if (version) {
        _cleanup_free_ char *v = xasprintf("sys/module/%s/version", name);
        _cleanup_free_ char *t = xasprintf("%s\n", version);
        put(f->root, v, t, 0444);
    }
}

static void host_userspace(struct fixture *f, bool smi, bool lib)
{
    if (smi)
        put(f->root, "usr/bin/nvidia-smi", "#!/bin/sh\n", 0755);
    if (lib) {
        put(f->root, LIB "/libnvidia-ml.so." V, "ELF", 0644);
        put(f->root, LIB "/libnvidia-ml.so.1", "ELF", 0644); /* not a version: ignored */
    }
}

static void decide(struct fixture *f, struct dm_finding *ret)
{
    struct nodestate_driver_facts facts;
    struct err e = {0};
    assert_int_equal(nodestate_driver_probe(f->root, f->driver, NULL, &facts, &e), 0);
    dm_owner_decide(&facts, "570.86.15", ret);
}

static void test_host_module_loaded(void **state)
{
    struct fixture *f = *state;
    module(f, "nvidia", V);
    module(f, "nvidia_uvm", NULL);
    host_userspace(f, true, true);
    struct dm_finding d;
    decide(f, &d);
    assert_int_equal(d.owner, NODESTATE_OWNER_HOST);
    assert_int_equal(d.found, NODESTATE_OWNER_HOST);
    assert_string_equal(d.version, V);
    assert_non_null(strstr(d.source, "module nvidia " V " loaded, not from the driver root"));
}

static void test_host_module_only(void **state)
{
    struct fixture *f = *state;
    module(f, "nvidia", NULL);
    put(f->root, "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  " V "  Release Build\n", 0444);
    struct dm_finding d;
    decide(f, &d);
    assert_int_equal(d.owner, NODESTATE_OWNER_HOST);
    assert_string_equal(d.version, V); /* from /proc/driver/nvidia/version */
}

static void test_host_installed_not_loaded(void **state)
{
    struct fixture *f = *state;
    host_userspace(f, true, true);
    struct dm_finding d;
    decide(f, &d);
    assert_int_equal(d.owner, NODESTATE_OWNER_HOST);
    assert_string_equal(d.version, V);
    assert_non_null(strstr(d.source, "not loaded"));
}

static void test_only_libraries_left(void **state)
{
    struct fixture *f = *state;
    host_userspace(f, false, true);
    struct dm_finding d;
    decide(f, &d);
    assert_int_equal(d.found, NODESTATE_OWNER_NONE);
    assert_int_equal(d.owner, NODESTATE_OWNER_CONTAINER);
    assert_string_equal(d.version, "570.86.15");
    assert_non_null(strstr(d.source, "only libraries left behind"));
}

static void test_only_smi(void **state)
{
    struct fixture *f = *state;
    host_userspace(f, true, false);
    struct dm_finding d;
    decide(f, &d);
    assert_int_equal(d.found, NODESTATE_OWNER_NONE);
    assert_int_equal(d.owner, NODESTATE_OWNER_CONTAINER);
    assert_non_null(strstr(d.source, "only nvidia-smi"));
}

static void test_empty_smi_is_none(void **state)
{
    struct fixture *f = *state;
    put(f->root, "usr/bin/nvidia-smi", "", 0755); /* empty: not a program */
    put(f->root, LIB "/libnvidia-ml.so." V, "ELF", 0644);
    struct dm_finding d;
    decide(f, &d);
    assert_int_equal(d.found, NODESTATE_OWNER_NONE);
}

static void test_containerized(void **state)
{
    struct fixture *f = *state;
    module(f, "nvidia", V);
    module(f, "nvidia_modeset", NULL);
    put(f->driver, LIB "/libnvidia-ml.so." V, "ELF", 0644);
    struct dm_finding d;
    decide(f, &d);
    assert_int_equal(d.owner, NODESTATE_OWNER_CONTAINER);
    assert_int_equal(d.found, NODESTATE_OWNER_CONTAINER);
    assert_string_equal(d.version, V);
    assert_non_null(strstr(d.source, "loaded by the driver container"));
    struct nodestate_driver_facts facts;
    struct err e = {0};
    assert_int_equal(nodestate_driver_probe(f->root, f->driver, NULL, &facts, &e), 0);
    assert_true(facts.module[NODESTATE_MOD_NVIDIA]);
    assert_true(facts.module[NODESTATE_MOD_NVIDIA_MODESET]);
    assert_false(facts.module[NODESTATE_MOD_NVIDIA_UVM]);
    assert_false(facts.root_mountpoint);
}

static void test_driver_root_other_version(void **state)
{
    /* a stale driver root of an older version does not make the loaded module the container's */
    struct fixture *f = *state;
    module(f, "nvidia", V);
    put(f->driver, LIB "/libnvidia-ml.so.535.216.01", "ELF", 0644);
    struct dm_finding d;
    decide(f, &d);
    assert_int_equal(d.owner, NODESTATE_OWNER_HOST);
}

static void test_none(void **state)
{
    struct fixture *f = *state;
    struct dm_finding d;
    decide(f, &d);
    assert_int_equal(d.found, NODESTATE_OWNER_NONE);
    assert_int_equal(d.owner, NODESTATE_OWNER_CONTAINER);
    assert_string_equal(d.source, "no driver loaded; the driver container installs it");
}

static void test_bad_host_root(void **state)
{
    struct fixture *f = *state;
    struct nodestate_driver_facts facts;
    struct err e = {0};
    _cleanup_free_ char *missing = xasprintf("%s/nope", f->root);
    assert_int_equal(nodestate_driver_probe(missing, f->driver, NULL, &facts, &e), -ENOENT);
    assert_non_null(strstr(err_msg(&e), missing));
    put(f->root, "file", "x", 0644);
    _cleanup_free_ char *file = xasprintf("%s/file", f->root);
    err_clear(&e);
    assert_int_equal(nodestate_driver_probe(file, f->driver, NULL, &facts, &e), -ENOTDIR);
    err_clear(&e);
    assert_int_equal(nodestate_driver_probe("", f->driver, NULL, &facts, &e), -EINVAL);
    /* a missing driver root is no driver root */
    _cleanup_free_ char *nodrv = xasprintf("%s/none", f->root);
    assert_int_equal(nodestate_driver_probe(f->root, nodrv, NULL, &facts, &e), 0);
    assert_string_equal(facts.root_lib, "");
}

/* ---- labels ------------------------------------------------------------------------------- */

static void test_label_values(void **state)
{
    (void)state;
    static const struct {
        const char *in, *paused, *restored;
    } cases[] = {
        {"true", DM_PAUSED, "true"},
        {"", DM_PAUSED, "true"},
        {"false", NULL, "false"},
        {"pre-installed", "pre-installed_" DM_PAUSED, "pre-installed"},
        {"paused-for-mig-change", "paused-for-mig-change_" DM_PAUSED, "paused-for-mig-change"},
        {DM_PAUSED, NULL, "true"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char buf[128], back[128];
        int r = nodeops_label_pause(cases[i].in, DM_PAUSED, buf, sizeof(buf));
        if (!cases[i].paused) {
            assert_int_equal(r, 0);
            snprintf(buf, sizeof(buf), "%s", cases[i].in);
        } else {
            assert_int_equal(r, 1);
            assert_string_equal(buf, cases[i].paused);
            assert_int_equal(nodeops_label_pause(buf, DM_PAUSED, back, sizeof(back)),
                             0); /* paused stays */
        }
        r = nodeops_label_restore(buf, DM_PAUSED, back, sizeof(back));
        if (strcmp(buf, cases[i].restored) == 0) {
            assert_int_equal(r, 0);
        } else {
            assert_int_equal(r, 1);
            assert_string_equal(back, cases[i].restored);
        }
    }
    char buf[128];
    /* 40 bytes + "_paused-for-driver-upgrade" is past a label value's 63 */
    assert_int_equal(nodeops_label_pause("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", DM_PAUSED, buf,
                                         sizeof(buf)),
                     -E2BIG);
    assert_int_equal(nodeops_label_restore("true", DM_PAUSED, buf, sizeof(buf)), 0);
}

static void test_labels_patch(void **state)
{
    (void)state;
    json_t *labels = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", DM_LABEL_DRIVER, "true", DM_LABEL_OPERANDS, "true",
        "nvidia.com/gpu.deploy.device-plugin", "true", "nvidia.com/gpu.deploy.dcgm", "false",
        "nvidia.com/gpu.deploy.gpu-feature-discovery", "custom", "nvidia.com/gpu.present", "true",
        "nvidia.com/gpu.deploy.operator-validator", "true");
    assert_false(nodeops_labels_paused(labels, &dm_operand_pause));
    json_t *p = NULL;
    struct err e = {0};
    assert_int_equal(nodeops_labels_patch(labels, &dm_operand_pause, false, &p, &e), 0);
    json_t *want = json_pack("{s:s,s:s,s:s}", "nvidia.com/gpu.deploy.device-plugin", DM_PAUSED,
                             "nvidia.com/gpu.deploy.gpu-feature-discovery", "custom_" DM_PAUSED,
                             "nvidia.com/gpu.deploy.operator-validator", DM_PAUSED);
    assert_true(json_equal(p, want));
    json_object_update(labels, p);
    assert_true(nodeops_labels_paused(labels, &dm_operand_pause));
    json_decref(p);
    /* paused again: nothing more to write */
    assert_int_equal(nodeops_labels_patch(labels, &dm_operand_pause, false, &p, &e), 0);
    assert_int_equal(json_object_size(p), 0);
    json_decref(p);
    assert_int_equal(nodeops_labels_patch(labels, &dm_operand_pause, true, &p, &e), 0);
    json_object_update(labels, p);
    json_decref(p);
    assert_false(nodeops_labels_paused(labels, &dm_operand_pause));
    assert_string_equal(json_string_value(json_object_get(labels, "nvidia.com/gpu.deploy.dcgm")),
                        "false");
    assert_string_equal(
        json_string_value(json_object_get(labels, "nvidia.com/gpu.deploy.gpu-feature-discovery")),
        "custom");
    assert_string_equal(
        json_string_value(json_object_get(labels, "nvidia.com/gpu.deploy.device-plugin")), "true");
    assert_int_equal(nodeops_labels_patch(NULL, &dm_operand_pause, true, &p, &e), 0);
    assert_int_equal(json_object_size(p), 0);
    json_decref(p);
    json_decref(want);
    json_decref(labels);
    assert_false(nodeops_is_operand_label(DM_LABEL_DRIVER));
    assert_false(nodeops_is_operand_label(DM_LABEL_OPERANDS));
    assert_false(nodeops_is_operand_label(DM_DEPLOY_PREFIX));
    assert_true(nodeops_is_operand_label("nvidia.com/gpu.deploy.mig-manager"));
}

/* ---- pods and mode ------------------------------------------------------------------------ */

static json_t *pod(const char *spec_json, const char *meta_json)
{
    json_error_t je;
    json_t *spec = json_loads(spec_json, 0, &je);
    json_t *meta = json_loads(meta_json ? meta_json : "{}", 0, &je);
    assert_non_null(spec);
    assert_non_null(meta);
    json_object_set_new(meta, "name", json_string("p"));
    json_object_set_new(meta, "namespace", json_string("ns"));
    return json_pack("{s:o,s:o,s:{s:s}}", "metadata", meta, "spec", spec, "status", "phase",
                     "Running");
}

static void test_pod_classify(void **state)
{
    (void)state;
    json_t *labels = json_pack("{s:s,s:s}", "nvidia.com/gpu.deploy.device-plugin", DM_PAUSED,
                               "nvidia.com/gpu.deploy.dcgm", "true");
    static const char ds[] =
        "{\"ownerReferences\":[{\"kind\":\"DaemonSet\",\"name\":\"x\",\"controller\":true}]}";
    struct {
        json_t *p;
        enum nodeops_pod_kind want;
    } cases[] = {
        {pod("{\"containers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}", NULL),
         NODEOPS_POD_GPU},
        {pod("{\"containers\":[{\"resources\":{\"requests\":{\"nvidia.com/mig-1g.10gb\":\"1\"}}}]}",
             NULL),
         NODEOPS_POD_GPU},
        {pod("{\"initContainers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu.shared\":\"1\"}}}]"
             ",\"containers\":[{}]}",
             NULL),
         NODEOPS_POD_GPU},
        {pod("{\"containers\":[{\"resources\":{\"limits\":{\"amd.com/gpu\":\"1\"}}}]}", NULL),
         NODEOPS_POD_OTHER},
        {pod("{\"nodeSelector\":{\"nvidia.com/gpu.deploy.device-plugin\":\"true\"},"
             "\"containers\":[{}]}",
             ds),
         NODEOPS_POD_OPERAND},
        {pod("{\"nodeSelector\":{\"nvidia.com/gpu.deploy.dcgm\":\"true\"},\"containers\":[{}]}",
             ds),
         NODEOPS_POD_DAEMONSET},
        {pod("{\"containers\":[{}]}", "{\"annotations\":{\"kubernetes.io/config.mirror\":\"x\"}}"),
         NODEOPS_POD_MIRROR},
        {pod("{\"containers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}",
             "{\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"}"),
         NODEOPS_POD_GPU}, /* terminating keeps its kind: waited for, not evicted again */
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        assert_int_equal(nodeops_pod_classify(cases[i].p, labels), cases[i].want);
        json_decref(cases[i].p);
    }
    json_t *done =
        pod("{\"containers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}", NULL);
    json_object_set_new(json_object_get(done, "status"), "phase", json_string("Succeeded"));
    assert_int_equal(nodeops_pod_classify(done, labels), NODEOPS_POD_DONE);
    json_decref(done);
    json_decref(labels);
}

static void test_drain_allowed(void **state)
{
    (void)state;
    struct dm_config c = {0};
    struct err e = {0};
    json_t *bare = pod("{\"containers\":[{}]}", NULL);
    assert_int_equal(dm_drain_allowed(&c, bare, &e), -EPERM);
    assert_non_null(strstr(err_msg(&e), "DRAIN_USE_FORCE"));
    c.drain_force = true;
    err_clear(&e);
    assert_int_equal(dm_drain_allowed(&c, bare, &e), 0);
    json_t *empty = pod("{\"volumes\":[{\"name\":\"scratch\",\"emptyDir\":{}}],"
                        "\"containers\":[{}]}",
                        "{\"ownerReferences\":[{\"kind\":\"ReplicaSet\",\"name\":\"r\","
                        "\"controller\":true}]}");
    c.drain_force = false;
    assert_int_equal(dm_drain_allowed(&c, empty, &e), -EPERM);
    assert_non_null(strstr(err_msg(&e), "scratch"));
    c.drain_delete_emptydir = true;
    err_clear(&e);
    assert_int_equal(dm_drain_allowed(&c, empty, &e), 0);
    json_decref(bare);
    json_decref(empty);
}

static void test_mode(void **state)
{
    (void)state;
    struct dm_config c = {.gpu_pod_eviction = true, .auto_drain = true};
    struct dm_mode m;
    json_t *plain = json_pack("{s:{s:{}}}", "metadata", "labels");
    dm_mode_decide(&c, plain, &m);
    assert_false(m.operator_driven);
    assert_true(m.evict_gpu_pods);
    assert_true(m.drain);
    json_t *state_label = json_pack("{s:{s:{s:s}}}", "metadata", "labels", DM_LABEL_UPGRADE_STATE,
                                    "upgrade-required");
    dm_mode_decide(&c, state_label, &m);
    assert_true(m.operator_driven);
    assert_false(m.evict_gpu_pods);
    assert_false(m.drain);
    json_t *ann =
        json_pack("{s:{s:{s:s}}}", "metadata", "annotations", DM_ANN_UPGRADE_ENABLED, "true");
    dm_mode_decide(&c, ann, &m);
    assert_true(m.operator_driven);
    c.gpu_pod_eviction = false;
    c.auto_drain = false;
    dm_mode_decide(&c, plain, &m);
    assert_false(m.evict_gpu_pods);
    assert_false(m.drain);
    json_decref(plain);
    json_decref(state_label);
    json_decref(ann);
    assert_string_equal(nodestate_module_name(NODESTATE_MOD_NVIDIA_DRM), "nvidia_drm");
    assert_string_equal(nodestate_module_name(NODESTATE_MOD_NVIDIA), "nvidia");
    assert_true(NODESTATE_MOD_NVIDIA == NODESTATE_MOD_COUNT - 1); /* nvidia goes last */
}

/* ---- the plan ----------------------------------------------------------------------------- */

/* The plan as "step:hook,step,..." */
static void plan_text(const struct dm_plan *p, char *buf, size_t n)
{
    buf[0] = '\0';
    for (size_t i = 0; i < p->n; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s%s%s%s", i ? "," : "", dm_step_name(p->steps[i].step),
                 p->steps[i].hook ? ":" : "", p->steps[i].hook ? p->steps[i].hook : "");
    }
}

static void test_plan(void **state)
{
    (void)state;
    struct {
        const char *name;
        enum nodestate_owner owner;
        bool loaded;
        struct dm_mode mode;
        bool reload;
        const char *want;
    } cases[] = {
        {"a host driver: labelled, reported, the pod sent away",
         NODESTATE_OWNER_HOST,
         true,
         {.evict_gpu_pods = true},
         false,
         "label-host,report:report,host-wait"},
        {"nothing loaded: cleaned and restored, no reload",
         NODESTATE_OWNER_CONTAINER,
         false,
         {.evict_gpu_pods = true, .drain = true},
         false,
         "clean:clean,restore:restore,report:report"},
        {"a reload with the GPU pods evicted",
         NODESTATE_OWNER_CONTAINER,
         true,
         {.evict_gpu_pods = true},
         true,
         "pause:pause,wait-operands:operands,evict:evict,mark:drain,unload:unload,clean:clean,"
         "restore:restore,report:report"},
        {"a reload with a drain",
         NODESTATE_OWNER_CONTAINER,
         true,
         {.evict_gpu_pods = true, .drain = true},
         true,
         "pause:pause,wait-operands:operands,evict:evict,cordon,record-drain,drain:drain,"
         "unload:unload,clean:clean,restore:restore,report:report"},
        {"the operator drives: neither eviction nor drain",
         NODESTATE_OWNER_CONTAINER,
         true,
         {.operator_driven = true},
         true,
         "pause:pause,wait-operands:operands,mark:evict,mark:drain,unload:unload,clean:clean,"
         "restore:restore,report:report"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct dm_finding f = {.owner = cases[i].owner};
        struct nodestate_driver_facts facts = {0};
        facts.module[NODESTATE_MOD_NVIDIA] = cases[i].loaded;
        struct dm_plan p;
        dm_plan(&f, &facts, &cases[i].mode, &p);
        char text[512];
        plan_text(&p, text, sizeof(text));
        print_message("%s: %s\n", cases[i].name, text);
        assert_string_equal(text, cases[i].want);
        assert_int_equal(p.reload, cases[i].reload);
        /* every hook a plan names is one the test hook accepts */
        for (size_t k = 0; k < p.n; k++) {
            bool known = !p.steps[k].hook;
            for (size_t h = 0; !known && dm_hook_names[h]; h++)
                known = strcmp(dm_hook_names[h], p.steps[k].hook) == 0;
            assert_true(known);
        }
    }
}

static void test_unload_and_clean(void **state)
{
    (void)state;
    struct nodestate_driver_facts f = {0};
    enum nodestate_module order[NODESTATE_MOD_COUNT];
    assert_int_equal(dm_unload_order(&f, order), 0);
    f.module[NODESTATE_MOD_NVIDIA] = true;
    f.module[NODESTATE_MOD_NVIDIA_DRM] = true;
    assert_int_equal(dm_unload_order(&f, order), 2);
    assert_int_equal(order[0], NODESTATE_MOD_NVIDIA_DRM); /* its users first, nvidia last */
    assert_int_equal(order[1], NODESTATE_MOD_NVIDIA);
    /* GDS's and GDRCopy's modules use nvidia too: before it, by their names */
    f.module[NODESTATE_MOD_GDRDRV] = f.module[NODESTATE_MOD_NVIDIA_FS] = true;
    f.module[NODESTATE_MOD_NVIDIA_DRM] = false;
    assert_int_equal(dm_unload_order(&f, order), 3);
    assert_string_equal(nodestate_module_name(order[0]), "nvidia_fs");
    assert_string_equal(nodestate_module_name(order[1]), "gdrdrv");
    assert_string_equal(nodestate_module_name(order[2]), "nvidia");
    f.root_mountpoint = true;
    assert_false(dm_root_stale(&f)); /* the driver it serves is loaded */
    f.module[NODESTATE_MOD_NVIDIA] = false;
    assert_true(dm_root_stale(&f));
    f.root_mountpoint = false;
    assert_false(dm_root_stale(&f));
}

/* What the run writes: the restore's labels and uncordon, the owner's Event, the drain record,
 * which pods an eviction and a drain take. */
static void test_node_writes(void **state)
{
    (void)state;
    struct err e = {0};
    json_t *node = json_pack(
        "{s:{s:{s:s,s:s},s:{s:s}}}", "metadata", "labels", "nvidia.com/gpu.deploy.device-plugin",
        DM_PAUSED, "nvidia.com/gpu.deploy.dcgm", "false", "annotations", DM_ANN_CORDONED, "true");
    json_t *labels = NULL;
    bool uncordon = false;
    assert_int_equal(dm_restore_patch(node, false, &labels, &uncordon, &e), 0);
    json_t *want = json_pack("{s:s}", "nvidia.com/gpu.deploy.device-plugin", "true");
    assert_true(json_equal(labels, want));
    assert_true(uncordon);
    json_decref(labels);
    json_decref(want);
    json_object_del(json_object_get(node, "metadata"), "annotations");
    assert_int_equal(dm_restore_patch(node, true, &labels, &uncordon, &e), 0);
    want = json_pack("{s:s,s:s}", "nvidia.com/gpu.deploy.device-plugin", "true", DM_LABEL_DRIVER,
                     DM_PRE_INSTALLED);
    assert_true(json_equal(labels, want));
    assert_false(uncordon); /* a cordon not its own stays */
    json_decref(labels);
    json_decref(want);
    json_decref(node);

    struct dm_finding f = {.owner = NODESTATE_OWNER_HOST, .version = V};
    snprintf(f.source, sizeof(f.source), "module nvidia loaded");
    const char *reason;
    char msg[128];
    dm_owner_event(&f, &reason, msg, sizeof(msg));
    assert_string_equal(reason, "DriverOwnerHost");
    assert_string_equal(msg, "driver owner: host " V " (module nvidia loaded)");
    f.owner = NODESTATE_OWNER_CONTAINER;
    f.version[0] = '\0';
    dm_owner_event(&f, &reason, msg, 24);
    assert_string_equal(reason, "DriverOwnerContainer");
    assert_string_equal(msg, "driver owner: contai...");
    struct nodestate_drain dr;
    dm_drain_record(&f, "570.86.15", &dr);
    assert_string_equal(dr.reason, "driver reload: the containerized driver 570.86.15 replaces the "
                                   "loaded nvidia (version unknown)");
    assert_string_equal(dr.by, "driver-manager");
    assert_string_equal(dr.time, "");

    struct dm_config c = {0};
    json_t *none = json_object();
    json_t *gpu =
        pod("{\"containers\":[{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}", NULL);
    json_t *other = pod("{\"containers\":[{}]}", NULL);
    assert_int_equal(dm_evict_select(&c, gpu, none, false, &e), 1);
    assert_int_equal(dm_evict_select(&c, other, none, false, &e), 0);
    assert_int_equal(dm_evict_select(&c, other, none, true, &e), -EPERM); /* no controller */
    c.drain_force = true;
    assert_int_equal(dm_evict_select(&c, other, none, true, &e), 1);
    json_decref(gpu);
    json_decref(other);
    json_decref(none);
}

/* ---- remediation requests ---------------------------------------------------------------- */

static void test_rem_parse(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int ok;
        int action;
        const char *id;
        size_t n_gpus;
        const char *gpu0, *gpu1;
    } rows[] = {
        {"reset-gpu 17 GPU-a,GPU-b", 0, GH_ACT_RESET_GPU, "17", 2, "GPU-a", "GPU-b"},
        {"reset-gpu 17 GPU-a", 0, GH_ACT_RESET_GPU, "17", 1, "GPU-a", NULL},
        {"  reload-driver   18  ", 0, GH_ACT_RELOAD_DRIVER, "18", 0, NULL, NULL},
        {"reset-gpu 17", 0, GH_ACT_RESET_GPU, "17", 0, NULL, NULL},
        {"wipe-disk 19", 0, -1, "19", 0, NULL, NULL},
        {"reboot-node 20", 0, GH_ACT_REBOOT_NODE, "20", 0, NULL, NULL},
        {"", -EINVAL, 0, NULL, 0, NULL, NULL},
        {"reset-gpu", -EINVAL, 0, NULL, 0, NULL, NULL},
        {"reset-gpu 17 GPU-a extra", -EINVAL, 0, NULL, 0, NULL, NULL},
        {"reset-gpu 17 GPU-a,,GPU-b", -EINVAL, 0, NULL, 0, NULL, NULL},
        {"reset-gpu 17 ,GPU-a", -EINVAL, 0, NULL, 0, NULL, NULL},
        {"reset-gpu 0123456789012345678901234567890123456789012345678901234567890123456789 G",
         -EINVAL, 0, NULL, 0, NULL, NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        struct dm_rem_request q;
        struct err e = {0};
        int r = dm_rem_parse(rows[i].text, &q, &e);
        if (r != rows[i].ok)
            fail_msg("row %zu \"%s\": %d (%s)", i, rows[i].text, r, err_msg(&e));
        if (r < 0) {
            assert_true(err_msg(&e)[0]);
            continue;
        }
        assert_int_equal(q.action, rows[i].action);
        assert_string_equal(q.id, rows[i].id);
        assert_int_equal(q.n_gpus, rows[i].n_gpus);
        if (rows[i].gpu0)
            assert_string_equal(q.gpus[0], rows[i].gpu0);
        if (rows[i].gpu1)
            assert_string_equal(q.gpus[1], rows[i].gpu1);
    }
    /* the GPU list's bound */
    _cleanup_free_ char *many = xstrdup("reset-gpu 1 ");
    for (int i = 0; i <= DM_REM_GPUS_MAX; i++) {
        char *n = xasprintf("%s%sGPU-%d", many, i ? "," : "", i);
        free(many);
        many = n;
    }
    struct dm_rem_request q;
    struct err e = {0};
    assert_int_equal(dm_rem_parse(many, &q, &e), -EINVAL);
}

static void test_rem_actions(void **state)
{
    (void)state;
    bool a[GH_ACT_COUNT];
    struct err e = {0};
    assert_int_equal(dm_rem_actions_parse("reset-gpu,reload-driver", a, &e), 0);
    assert_true(a[GH_ACT_RESET_GPU] && a[GH_ACT_RELOAD_DRIVER] && !a[GH_ACT_REBOOT_NODE]);
    assert_int_equal(dm_rem_actions_parse("reset-gpu", a, &e), 0);
    assert_true(a[GH_ACT_RESET_GPU] && !a[GH_ACT_RELOAD_DRIVER]);
    assert_int_equal(dm_rem_actions_parse("", a, &e), 0);
    assert_false(a[GH_ACT_RESET_GPU] || a[GH_ACT_RELOAD_DRIVER]);
    assert_int_equal(dm_rem_actions_parse("reset-gpu,reboot-node", a, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "reboot-node"));
    assert_int_equal(dm_rem_actions_parse("reset-gpu,,", a, &e), -EINVAL);
    assert_int_equal(dm_rem_actions_parse("bogus", a, &e), -EINVAL);
}

static void test_rem_answer(void **state)
{
    (void)state;
    struct dm_rem_answer a;
    dm_rem_answer_of("r7", NULL, &a);
    assert_string_equal(a.annotation, REM_ANN_REQUEST_DONE);
    assert_string_equal(a.value, "r7");
    assert_string_equal(a.event_type, "Normal");
    assert_string_equal(a.event_reason, "GPURemediationRequestDone");
    assert_string_equal(a.message, "request r7 carried out");
    assert_string_equal(a.log_what, "remediation request done");
    dm_rem_answer_of("r8", "GPU-1: 2 processes", &a);
    assert_string_equal(a.annotation, REM_ANN_REQUEST_FAILED);
    assert_string_equal(a.value, "r8 GPU-1: 2 processes");
    assert_string_equal(a.event_type, "Warning");
    assert_string_equal(a.event_reason, "GPURemediationRequestFailed");
    assert_string_equal(a.message, "request r8 failed: GPU-1: 2 processes");
    /* a reason at the bound is cut, never overflows */
    char why[DM_REM_WHY_MAX];
    memset(why, 'x', sizeof(why) - 1);
    why[sizeof(why) - 1] = '\0';
    dm_rem_answer_of("r9", why, &a);
    assert_int_equal(strlen(a.value), strlen("r9 ") + sizeof(why) - 1);

    struct dm_rem_input in = {0};
    json_t *ann = json_pack("{s:s,s:s,s:s}", REM_ANN_REQUEST, "reset-gpu r1 GPU-1",
                            REM_ANN_REQUEST_DONE, "r0", DM_ANN_RELOAD, "r1 pod-a");
    dm_rem_input_annotations(ann, &in);
    assert_string_equal(in.request, "reset-gpu r1 GPU-1");
    assert_string_equal(in.done, "r0");
    assert_null(in.failed);
    assert_string_equal(in.reload, "r1 pod-a");
    json_decref(ann);
    dm_rem_input_annotations(NULL, &in);
    assert_null(in.request);
    assert_null(in.done);
}

/* The executor's NVML and nvidia-smi: the driver's own, from the owner's root. */
static void test_rem_tools(void **state)
{
    (void)state;
    struct nodestate_driver_facts f;
    memset(&f, 0, sizeof(f));
    strcpy(f.root_nvml, "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1");
    strcpy(f.root_smi, "/run/nvidia/driver/usr/bin/nvidia-smi");
    strcpy(f.host_nvml, "/host/usr/lib64/libnvidia-ml.so.1");
    strcpy(f.host_smi, "/host/usr/bin/nvidia-smi");
    static const struct {
        const char *name;
        enum nodestate_owner owner;
        bool no_root_nvml, no_root_smi;
        const char *nvml, *smi, *lib_dir, *why;
    } cases[] = {
        {"containerized: the driver root's", NODESTATE_OWNER_CONTAINER, false, false,
         "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
         "/run/nvidia/driver/usr/bin/nvidia-smi", "/run/nvidia/driver/usr/lib/x86_64-linux-gnu",
         ""},
        {"the host's driver: the host's", NODESTATE_OWNER_HOST, false, false,
         "/host/usr/lib64/libnvidia-ml.so.1", "/host/usr/bin/nvidia-smi", "/host/usr/lib64", ""},
        {"containerized without its NVML: never the host's or the image's",
         NODESTATE_OWNER_CONTAINER, true, false, "", "", "",
         "the driver root /run/nvidia/driver has no libnvidia-ml.so.1"},
        {"containerized without nvidia-smi: NVML read, the reset refused",
         NODESTATE_OWNER_CONTAINER, false, true,
         "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "",
         "/run/nvidia/driver/usr/lib/x86_64-linux-gnu",
         "the driver root /run/nvidia/driver has no nvidia-smi"},
        {"no driver", NODESTATE_OWNER_NONE, false, false, "", "", "",
         "no driver on the node (neither a driver container's nor the host's)"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        print_message("case %zu: %s\n", i, cases[i].name);
        struct nodestate_driver_facts g = f;
        if (cases[i].no_root_nvml)
            g.root_nvml[0] = 0;
        if (cases[i].no_root_smi)
            g.root_smi[0] = 0;
        struct dm_rem_tools t;
        dm_rem_tools_pick(&g, cases[i].owner, "/run/nvidia/driver", "/host", &t);
        assert_string_equal(t.nvml, cases[i].nvml);
        assert_string_equal(t.smi, cases[i].smi);
        assert_string_equal(t.lib_dir, cases[i].lib_dir);
        assert_string_equal(t.why, cases[i].why);
    }
    /* a library at the root's top: its folder is / */
    struct nodestate_driver_facts g = f;
    strcpy(g.root_nvml, "/libnvidia-ml.so.1");
    struct dm_rem_tools t;
    dm_rem_tools_pick(&g, NODESTATE_OWNER_CONTAINER, "/", "/host", &t);
    assert_string_equal(t.lib_dir, "/");
}

static void test_rem_decide(void **state)
{
    (void)state;
    static const struct dm_rem_gpu gpus[] = {
        {.uuid = "GPU-a"},
        {.uuid = "GPU-b", .processes = 2},
        {.uuid = "GPU-c", .lost = true},
        {.uuid = "GPU-d", .processes = 1},
        {.uuid = "GPU-e", .processes_unknown = true},
    };
    enum { ALL, RESET_ONLY, NONE };
    enum gpus_seen { SEEN, UNREADABLE };
    static const struct {
        const char *name;
        const char *request, *done, *failed, *reload;
        int allow;
        enum gpus_seen seen;
        enum nodestate_owner owner;
        bool ready;
        const char *pod;
        enum dm_rem_do want;
        const char *id, *why;
    } rows[] = {
        {"no request", NULL, NULL, NULL, NULL, ALL, SEEN, NODESTATE_OWNER_CONTAINER, true, "p1",
         DM_REM_IDLE, "", NULL},
        {"a reset", "reset-gpu 7 GPU-a", NULL, NULL, NULL, ALL, SEEN, NODESTATE_OWNER_CONTAINER,
         true, "p1", DM_REM_RESET, "7", NULL},
        {"a reset with a host driver", "reset-gpu 7 GPU-a", NULL, NULL, NULL, ALL, SEEN,
         NODESTATE_OWNER_HOST, false, NULL, DM_REM_RESET, "7", NULL},
        {"done already", "reset-gpu 7 GPU-a", "7", NULL, NULL, ALL, SEEN, NODESTATE_OWNER_CONTAINER,
         true, "p1", DM_REM_ANSWERED, "7", NULL},
        {"failed already", "reset-gpu 7 GPU-b", NULL, "7 GPU GPU-b has 2 processes", NULL, ALL,
         SEEN, NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_ANSWERED, "7", NULL},
        {"an older answer", "reset-gpu 8 GPU-a", "7", "77 x", NULL, ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_RESET, "8", NULL},
        {"an answered bad request", "reset-gpu 9 GPU-a extra", NULL, "9 bad", NULL, ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_ANSWERED, "9", NULL},
        {"a GPU with processes", "reset-gpu 7 GPU-a,GPU-b", NULL, NULL, NULL, ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_FAIL, "7",
         "GPU GPU-b has 2 processes running on it: a reset needs none"},
        {"one process", "reset-gpu 7 GPU-d", NULL, NULL, NULL, ALL, SEEN, NODESTATE_OWNER_CONTAINER,
         true, "p1", DM_REM_FAIL, "7", "GPU GPU-d has 1 process running on it: a reset needs none"},
        {"processes unknown", "reset-gpu 7 GPU-e", NULL, NULL, NULL, ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_FAIL, "7", "cannot be read: no reset"},
        {"a lost GPU", "reset-gpu 7 GPU-c", NULL, NULL, NULL, ALL, SEEN, NODESTATE_OWNER_CONTAINER,
         true, "p1", DM_REM_FAIL, "7", "is lost"},
        {"another node's GPU", "reset-gpu 7 GPU-a,GPU-z", NULL, NULL, NULL, ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_FAIL, "7", "GPU GPU-z is not on node n1"},
        {"no GPU named", "reset-gpu 7", NULL, NULL, NULL, ALL, SEEN, NODESTATE_OWNER_CONTAINER,
         true, "p1", DM_REM_FAIL, "7", "names no GPU"},
        {"NVML unreadable", "reset-gpu 7 GPU-a", NULL, NULL, NULL, ALL, UNREADABLE,
         NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_FAIL, "7", "cannot be read: no driver"},
        {"an unknown action", "wipe-disk 7", NULL, NULL, NULL, ALL, SEEN, NODESTATE_OWNER_CONTAINER,
         true, "p1", DM_REM_FAIL, "7", "wipe-disk: not an action the driver manager takes"},
        {"a reboot is not ours", "reboot-node 7", NULL, NULL, NULL, ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_FAIL, "7", "reboot-node: not an action"},
        {"policy forbids the reset", "reset-gpu 7 GPU-a", NULL, NULL, NULL, NONE, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_FAIL, "7",
         "reset-gpu is not allowed on node n1"},
        {"policy forbids the reload", "reload-driver 7", NULL, NULL, NULL, RESET_ONLY, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_FAIL, "7", "reload-driver is not allowed"},
        {"bad words with an id", "reset-gpu 7 GPU-a x", NULL, NULL, NULL, ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_FAIL, "7", "unexpected words"},
        {"no id: nothing to answer", "reset-gpu", NULL, NULL, NULL, ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_IDLE, "", "no id"},
        {"a reload", "reload-driver 7", NULL, NULL, NULL, ALL, SEEN, NODESTATE_OWNER_CONTAINER,
         true, "p1", DM_REM_RELOAD, "7", NULL},
        {"a reload, this pod evicted", "reload-driver 7", NULL, NULL, "7 p1", ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p1", DM_REM_RELOAD_WAIT, "7", "evicted"},
        {"a reload, the next pod, driver not ready", "reload-driver 7", NULL, NULL, "7 p1", ALL,
         SEEN, NODESTATE_OWNER_NONE, false, "p2", DM_REM_RELOAD_WAIT, "7", "ready"},
        {"a reload, the next pod, driver ready", "reload-driver 7", NULL, NULL, "7 p1", ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p2", DM_REM_RELOAD_DONE, "7", NULL},
        {"a reload answered", "reload-driver 7", "7", NULL, "7 p1", ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p2", DM_REM_ANSWERED, "7", NULL},
        {"an older reload's mark", "reload-driver 8", NULL, NULL, "7 p1", ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, "p2", DM_REM_RELOAD, "8", NULL},
        {"a reload of a host driver", "reload-driver 7", NULL, NULL, NULL, ALL, SEEN,
         NODESTATE_OWNER_HOST, false, "p1", DM_REM_FAIL, "7", "the host's"},
        {"a reload with no driver", "reload-driver 7", NULL, NULL, NULL, ALL, SEEN,
         NODESTATE_OWNER_NONE, false, "p1", DM_REM_FAIL, "7", "not ready"},
        {"a reload without the pod's name", "reload-driver 7", NULL, NULL, NULL, ALL, SEEN,
         NODESTATE_OWNER_CONTAINER, true, NULL, DM_REM_FAIL, "7", "POD_NAME"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        struct dm_rem_input in = {.node = "n1",
                                  .request = rows[i].request,
                                  .done = rows[i].done,
                                  .failed = rows[i].failed,
                                  .reload = rows[i].reload,
                                  .gpus = rows[i].seen == SEEN ? gpus : NULL,
                                  .n_gpus = rows[i].seen == SEEN ? ARRAY_SIZE(gpus) : 0,
                                  .gpus_error = rows[i].seen == SEEN ? NULL : "no driver",
                                  .owner = rows[i].owner,
                                  .driver_ready = rows[i].ready,
                                  .pod = rows[i].pod};
        in.allow[GH_ACT_RESET_GPU] = rows[i].allow != NONE;
        in.allow[GH_ACT_RELOAD_DRIVER] = rows[i].allow == ALL;
        struct dm_rem_decision d;
        dm_rem_decide(&in, &d);
        if (d.what != rows[i].want || strcmp(d.req.id, rows[i].id) != 0 ||
            (rows[i].why && !strstr(d.why, rows[i].why)) ||
            (!rows[i].why && d.what != DM_REM_IDLE && d.what != DM_REM_RELOAD_WAIT && d.why[0]))
            fail_msg("%s: %s id \"%s\" why \"%s\"; want %s id \"%s\" why \"%s\"", rows[i].name,
                     dm_rem_do_name(d.what), d.req.id, d.why, dm_rem_do_name(rows[i].want),
                     rows[i].id, rows[i].why ? rows[i].why : "");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_unload_and_clean),
        cmocka_unit_test(test_node_writes),
        cmocka_unit_test_setup_teardown(test_host_module_loaded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_module_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_installed_not_loaded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_only_libraries_left, setup, teardown),
        cmocka_unit_test_setup_teardown(test_only_smi, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_smi_is_none, setup, teardown),
        cmocka_unit_test_setup_teardown(test_containerized, setup, teardown),
        cmocka_unit_test_setup_teardown(test_driver_root_other_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_none, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_host_root, setup, teardown),
        cmocka_unit_test(test_label_values),
        cmocka_unit_test(test_labels_patch),
        cmocka_unit_test(test_pod_classify),
        cmocka_unit_test(test_drain_allowed),
        cmocka_unit_test(test_mode),
        cmocka_unit_test(test_rem_parse),
        cmocka_unit_test(test_rem_actions),
        cmocka_unit_test(test_rem_answer),
        cmocka_unit_test(test_rem_decide),
        cmocka_unit_test(test_rem_tools),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
