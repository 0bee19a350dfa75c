/* SPDX-License-Identifier: Apache-2.0 */
/* nodestate: status files, the agents' annotations, expected vs advertised GPUs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "nodestate.h"

static void test_file_names(void **state)
{
    (void)state;
    char buf[128];
    assert_string_equal(nodestate_file_name(NODESTATE_DRIVER_READY), "driver-ready");
    assert_string_equal(nodestate_file_name(NODESTATE_DRIVER_CTR_READY), ".driver-ctr-ready");
    assert_string_equal(nodestate_file_name(nodestate_component_file(NODESTATE_COMP_PLUGIN)),
                        "plugin-ready");
    assert_int_equal(nodestate_file_path(NULL, NODESTATE_TOOLKIT_READY, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "/run/nvidia/validations/toolkit-ready");
    assert_int_equal(nodestate_file_path("/x", NODESTATE_CUDA_READY, buf, 8), -ENAMETOOLONG);
    nodestate_validation_key(NODESTATE_COMP_CUDA, buf, sizeof(buf));
    assert_string_equal(buf, "validation.gpuop.dev/cuda");
    enum nodestate_component c;
    assert_int_equal(nodestate_component_parse("toolkit", &c), 0);
    assert_int_equal(c, NODESTATE_COMP_TOOLKIT);
    assert_true(nodestate_component_parse("all-done", &c) < 0);
}

static void test_driver_ready(void **state)
{
    (void)state;
    struct nodestate_driver_ready d = {.is_host_driver = true};
    strcpy(d.driver_root, "/");
    strcpy(d.driver_root_ctr, "/host");
    strcpy(d.dev_root, "/");
    strcpy(d.dev_root_ctr, "/host");
    char *text = NULL;
    struct err e = {0};
    assert_int_equal(nodestate_driver_ready_render(&d, &text, &e), 0);
    /* NVIDIA's variables, in its order, sourceable by a shell. */
    assert_string_equal(text,
                        "IS_HOST_DRIVER=true\nNVIDIA_DRIVER_ROOT=/\nDRIVER_ROOT_CTR_PATH=/host\n"
                        "NVIDIA_DEV_ROOT=/\nDEV_ROOT_CTR_PATH=/host\n");
    struct nodestate_driver_ready back;
    assert_int_equal(nodestate_driver_ready_parse("driver-ready", text, strlen(text), &back, &e),
                     0);
    assert_memory_equal(&back, &d, sizeof(d));
    free(text);

    const char *quoted = "# written by a validator\nexport IS_HOST_DRIVER=\"false\"\n"
                         "NVIDIA_DRIVER_ROOT='/run/nvidia/driver'\r\n";
    assert_int_equal(nodestate_driver_ready_parse("f", quoted, strlen(quoted), &back, &e), 0);
    assert_false(back.is_host_driver);
    assert_string_equal(back.driver_root, "/run/nvidia/driver");

    const char *no_root = "IS_HOST_DRIVER=true\n";
    assert_int_equal(
        nodestate_driver_ready_parse("/v/driver-ready", no_root, strlen(no_root), &back, &e),
        -EINVAL);
    assert_string_equal(e.msg, "/v/driver-ready: NVIDIA_DRIVER_ROOT: missing");
    const char *bad = "IS_HOST_DRIVER=maybe\nNVIDIA_DRIVER_ROOT=/\n";
    assert_int_equal(nodestate_driver_ready_parse("f", bad, strlen(bad), &back, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "IS_HOST_DRIVER"));

    /* A value a shell would split or expand is refused, not written. */
    strcpy(d.driver_root, "/a b");
    assert_int_equal(nodestate_driver_ready_render(&d, &text, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "NVIDIA_DRIVER_ROOT"));
    strcpy(d.driver_root, "/$(reboot)");
    assert_int_equal(nodestate_driver_ready_render(&d, &text, &e), -EINVAL);
}

static void test_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/nodestate-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[256];
    snprintf(sub, sizeof(sub), "%s/validations", dir);
    struct err e = {0};
    assert_false(nodestate_file_exists(sub, NODESTATE_TOOLKIT_READY));
    assert_int_equal(nodestate_file_write(sub, NODESTATE_TOOLKIT_READY, NULL, &e),
                     0); /* creates the folder */
    assert_true(nodestate_file_exists(sub, NODESTATE_TOOLKIT_READY));
    assert_int_equal(
        nodestate_file_write(sub, NODESTATE_DRIVER_READY, "IS_HOST_DRIVER=false\n", &e), 0);
    char path[512];
    assert_int_equal(nodestate_file_path(sub, NODESTATE_DRIVER_READY, path, sizeof(path)), 0);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(file_read_all(path, 4096, &text, &len, &e), 0);
    assert_string_equal(text, "IS_HOST_DRIVER=false\n");
    free(text);
    assert_int_equal(nodestate_file_remove(sub, NODESTATE_TOOLKIT_READY, &e), 0);
    assert_false(nodestate_file_exists(sub, NODESTATE_TOOLKIT_READY));
    assert_int_equal(nodestate_file_remove(sub, NODESTATE_TOOLKIT_READY, &e),
                     0); /* already gone: fine */
    assert_int_equal(nodestate_file_remove(sub, NODESTATE_DRIVER_READY, &e), 0);
    /* A directory in the file's place is not the file. */
    assert_int_equal(nodestate_file_path(sub, NODESTATE_CUDA_READY, path, sizeof(path)), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_false(nodestate_file_exists(sub, NODESTATE_CUDA_READY));
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(rmdir(sub), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void test_annotations(void **state)
{
    (void)state;
    struct err e = {0};
    struct nodestate_driver_owner o = {.owner = NODESTATE_OWNER_HOST}, ob;
    strcpy(o.version, "550.127.05");
    strcpy(o.source, "module nvidia loaded (/host/sys/module/nvidia)");
    strcpy(o.time, "2026-12-02T07:00:00Z");
    char *text = NULL;
    assert_int_equal(nodestate_driver_owner_render(&o, &text), 0);
    assert_string_equal(text, "{\"owner\":\"host\",\"version\":\"550.127.05\",\"source\":\"module "
                              "nvidia loaded (/host/sys/module/nvidia)\",\"time\":"
                              "\"2026-12-02T07:00:00Z\"}");
    assert_int_equal(nodestate_driver_owner_parse(text, &ob, &e), 0);
    assert_memory_equal(&o, &ob, sizeof(o));
    free(text);
    assert_int_equal(nodestate_driver_owner_parse("{\"owner\":\"someone\"}", &ob, &e), -EINVAL);
    assert_string_equal(e.msg, "gpuop.dev/driver-owner: owner: \"someone\" is not none, host or "
                               "container");
    assert_int_equal(nodestate_driver_owner_parse("[1]", &ob, &e), -EINVAL);
    assert_int_equal(nodestate_driver_owner_parse("{\"owner\":", &ob, &e), -EINVAL);
    assert_int_equal(nodestate_driver_owner_parse(NULL, &ob, &e), -EINVAL);

    struct nodestate_validation v = {.state = NODESTATE_V_FAILED}, vb;
    strcpy(v.reason, "NVML: Driver Not Loaded");
    strcpy(v.time, "2026-12-02T07:00:00Z");
    assert_int_equal(nodestate_validation_render(&v, &text), 0);
    assert_int_equal(nodestate_validation_parse(text, &vb, &e), 0);
    assert_memory_equal(&v, &vb, sizeof(v));
    free(text);
    assert_int_equal(nodestate_validation_parse("{\"state\":1}", &vb, &e), -EINVAL);
    assert_string_equal(e.msg, "validation annotation: state: not a string");
    assert_int_equal(nodestate_validation_parse("{\"reason\":\"x\"}", &vb, &e), -EINVAL);

    /* Oversized input is refused before it is parsed. */
    size_t big = NODESTATE_ANN_MAX + 10;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[big] = '\0';
    assert_int_equal(nodestate_validation_parse(huge, &vb, &e), -EFBIG);
    free(huge);
}

static const char *const a100_mig[] = {"1g.10gb", "1g.10gb", "3g.40gb"};

static void test_expected(void **state)
{
    (void)state;
    struct nodestate_gpu g[3] = {
        {.uuid = "GPU-a"},
        {.uuid = "GPU-b", .mig_enabled = true, .n_mig = 3, .mig_profiles = a100_mig},
        {.uuid = "GPU-c"},
    };
    struct nodestate_resource_count rc[NODESTATE_RESOURCES_MAX];
    size_t n = 0;
    struct err e = {0};
    assert_int_equal(nodestate_expected_resources(g, 3, NODESTATE_MIG_NONE, rc, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(rc[0].name, "nvidia.com/gpu");
    assert_int_equal(rc[0].count, 3);
    assert_int_equal(nodestate_expected_resources(g, 3, NODESTATE_MIG_SINGLE, rc, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rc[0].count, 5);
    assert_int_equal(nodestate_expected_resources(g, 3, NODESTATE_MIG_MIXED, rc, &n, &e), 0);
    assert_int_equal(n, 3); /* sorted by name */
    assert_string_equal(rc[0].name, "nvidia.com/gpu");
    assert_int_equal(rc[0].count, 2);
    assert_string_equal(rc[1].name, "nvidia.com/mig-1g.10gb");
    assert_int_equal(rc[1].count, 2);
    assert_string_equal(rc[2].name, "nvidia.com/mig-3g.40gb");
    assert_int_equal(rc[2].count, 1);
    enum nodestate_mig_strategy s;
    assert_int_equal(nodestate_mig_strategy_parse(NULL, &s), 0);
    assert_int_equal(s, NODESTATE_MIG_NONE);
    assert_int_equal(nodestate_mig_strategy_parse("mixed", &s), 0);
    assert_int_equal(s, NODESTATE_MIG_MIXED);
    assert_int_equal(nodestate_mig_strategy_parse("double", &s), -EINVAL);
}

static void test_compare(void **state)
{
    (void)state;
    struct nodestate_gpu g[4] = {
        {.uuid = "GPU-0"}, {.uuid = "GPU-1"}, {.uuid = "GPU-2", .lost = true}, {.uuid = "GPU-3"}};
    struct nodestate_gpu_count c;
    struct err e = {0};
    /* Everything advertised (other vendors' and core resources are ignored). */
    assert_int_equal(nodestate_gpu_count_compare(g, 4, NODESTATE_MIG_NONE,
                                                 "{\"cpu\":\"8\",\"nvidia.com/gpu\":\"4\"}", &c,
                                                 &e),
                     0);
    assert_false(c.short_);
    assert_int_equal(c.physical, 4);
    assert_int_equal(c.n_missing, 1); /* the lost GPU is named even when counts agree */
    assert_string_equal(c.missing[0], "GPU-2 (lost)");
    /* One short. */
    assert_int_equal(
        nodestate_gpu_count_compare(g, 4, NODESTATE_MIG_NONE, "{\"nvidia.com/gpu\":\"3\"}", &c, &e),
        0);
    assert_true(c.short_);
    assert_string_equal(c.missing[0], "nvidia.com/gpu: 3 of 4 advertised");
    assert_string_equal(c.missing[1], "GPU-2 (lost)");
    /* Time-slicing replicas under a renamed resource: more, never fewer. */
    assert_int_equal(nodestate_gpu_count_compare(g, 4, NODESTATE_MIG_NONE,
                                                 "{\"nvidia.com/gpu.shared\":\"16\"}", &c, &e),
                     0);
    assert_false(c.short_);
    /* Nothing advertised at all (no device plugin yet). */
    assert_int_equal(nodestate_gpu_count_compare(g, 4, NODESTATE_MIG_NONE, NULL, &c, &e), 0);
    assert_true(c.short_);
    assert_string_equal(c.missing[0], "nvidia.com/gpu: 0 of 4 advertised");
    /* A malformed allocatable is an error naming the resource. */
    assert_int_equal(nodestate_gpu_count_compare(g, 4, NODESTATE_MIG_NONE,
                                                 "{\"nvidia.com/gpu\":\"four\"}", &c, &e),
                     -EINVAL);
    assert_string_equal(e.msg, "allocatable: nvidia.com/gpu: not a quantity");
    /* MIG, mixed: one profile short. */
    struct nodestate_gpu m[1] = {
        {.uuid = "GPU-m", .mig_enabled = true, .n_mig = 3, .mig_profiles = a100_mig}};
    assert_int_equal(nodestate_gpu_count_compare(m, 1, NODESTATE_MIG_MIXED,
                                                 "{\"nvidia.com/mig-1g.10gb\":\"1\","
                                                 "\"nvidia.com/mig-3g.40gb\":\"1\"}",
                                                 &c, &e),
                     0);
    assert_true(c.short_);
    assert_int_equal(c.n_missing, 1);
    assert_string_equal(c.missing[0], "nvidia.com/mig-1g.10gb: 1 of 2 advertised");
}

static void test_gpu_count_codec(void **state)
{
    (void)state;
    struct nodestate_gpu g[2] = {{.uuid = "GPU-0"}, {.uuid = "GPU-1", .lost = true}};
    struct nodestate_gpu_count c, b;
    struct err e = {0};
    assert_int_equal(
        nodestate_gpu_count_compare(g, 2, NODESTATE_MIG_NONE, "{\"nvidia.com/gpu\":\"1\"}", &c, &e),
        0);
    strcpy(c.since, "2026-12-02T07:00:00Z");
    c.mismatch = true;
    char *text = NULL;
    assert_int_equal(nodestate_gpu_count_render(&c, &text), 0);
    assert_string_equal(text, "{\"physical\":2,\"expected\":{\"nvidia.com/gpu\":2},\"advertised\":"
                              "{\"nvidia.com/gpu\":1},\"missing\":[\"nvidia.com/gpu: 1 of 2 "
                              "advertised\",\"GPU-1 (lost)\"],\"short\":true,\"since\":"
                              "\"2026-12-02T07:00:00Z\",\"mismatch\":true}");
    assert_int_equal(nodestate_gpu_count_parse(text, &b, &e), 0);
    assert_memory_equal(&c, &b, sizeof(c));
    free(text);
    assert_int_equal(nodestate_gpu_count_parse("{\"physical\":-1}", &b, &e), -EINVAL);
    assert_int_equal(
        nodestate_gpu_count_parse("{\"physical\":1,\"advertised\":{\"x\":\"1\"}}", &b, &e),
        -EINVAL);
    assert_string_equal(e.msg, "gpuop.dev/gpu-count: advertised.x: not a count");
    assert_int_equal(nodestate_gpu_count_parse("{\"physical\":1,\"mismatch\":\"yes\"}", &b, &e),
                     -EINVAL);
}

/* gpuop.dev/last-drain: round trip; bad input names the annotation and the field. */
static void test_drain_codec(void **state)
{
    (void)state;
    struct nodestate_drain d = {
        .time = "2026-01-01T00:00:00Z", .reason = "driver reload", .by = "x"};
    char *text = NULL;
    assert_int_equal(nodestate_drain_render(&d, &text), 0);
    struct nodestate_drain back;
    struct err e = {0};
    assert_int_equal(nodestate_drain_parse(text, &back, &e), 0);
    free(text);
    assert_string_equal(back.time, d.time);
    assert_string_equal(back.reason, d.reason);
    assert_string_equal(back.by, "x");
    assert_int_equal(nodestate_drain_parse("{\"reason\":\"r\"}", &back, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "gpuop.dev/last-drain: time: missing"));
    assert_int_equal(nodestate_drain_parse("[1]", &back, &e), -EINVAL);
    assert_int_equal(nodestate_drain_parse("{\"time\":7}", &back, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "time: not a string"));
}

/* NVML's inventory as nodestate's GPUs: UUIDs, MIG devices only in MIG mode, and a GPU whose UUID
 * could not be read named by the UUID last read at its index, else by its index. */
static void test_gpus_from(void **state)
{
    (void)state;
    struct gpu_mig_device mig[2] = {{.uuid = "MIG-a", .profile = "1g.10gb"},
                                    {.uuid = "MIG-b", .profile = "2g.20gb"}};
    static const struct {
        const char *what;
        unsigned index;
        const char *uuid;
        bool lost, mig_mode;
        size_t n_mig;
        const char *known; /* known[index] before; NULL: no known array */
        const char *want_name, *want_known;
        size_t want_mig;
    } cases[] = {
        {"read", 0, "GPU-0", false, false, 0, NULL, "GPU-0", NULL, 0},
        {"read, remembered", 1, "GPU-1", false, false, 0, "", "GPU-1", "GPU-1", 0},
        {"read, replaces an older one", 1, "GPU-1b", false, false, 0, "GPU-1", "GPU-1b", "GPU-1b",
         0},
        {"MIG mode", 2, "GPU-2", false, true, 2, NULL, "GPU-2", NULL, 2},
        {"MIG devices listed but MIG off", 2, "GPU-2", false, false, 2, NULL, "GPU-2", NULL, 0},
        {"lost, unread, known", 3, "", true, false, 0, "GPU-3", "GPU-3", "GPU-3", 0},
        {"lost, '-', known", 3, "-", true, false, 0, "GPU-3", "GPU-3", "GPU-3", 0},
        {"lost, unread, never read", 4, "", true, false, 0, "", "GPU 4 (no UUID)", "", 0},
        {"lost, no known array", 5, "-", true, false, 0, NULL, "GPU 5 (no UUID)", NULL, 0},
        {"index past the known array", 70, "", true, false, 0, "", "GPU 70 (no UUID)", NULL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char known[8][GPU_UUID_MAX] = {{0}};
        bool with_known = cases[i].known != NULL;
        if (with_known && cases[i].index < 8)
            strlcpy_s(known[cases[i].index], cases[i].known, GPU_UUID_MAX);
        struct gpu_device dev[2] = {{.index = 9, .uuid = "GPU-9"},
                                    {.index = cases[i].index,
                                     .lost = cases[i].lost,
                                     .mig_enabled = cases[i].mig_mode,
                                     .n_mig = cases[i].n_mig,
                                     .mig = cases[i].n_mig ? mig : NULL}};
        strlcpy_s(dev[1].uuid, cases[i].uuid, sizeof(dev[1].uuid));
        struct gpu_inventory inv = {.n_gpus = 2, .gpus = dev};
        struct nodestate_gpus g;
        nodestate_gpus_from(&inv, with_known ? known : NULL, with_known ? 8 : 0, &g);
        print_message("case %zu: %s\n", i, cases[i].what);
        assert_int_equal(g.n, 2);
        assert_string_equal(g.g[0].uuid, "GPU-9");
        assert_string_equal(g.g[1].uuid, cases[i].want_name);
        assert_int_equal(g.g[1].lost, cases[i].lost);
        assert_int_equal(g.g[1].mig_enabled, cases[i].mig_mode);
        assert_int_equal(g.g[1].n_mig, cases[i].want_mig);
        if (cases[i].want_mig) {
            assert_string_equal(g.g[1].mig_profiles[1], "2g.20gb");
            assert_string_equal(g.g[1].mig_uuids[0], "MIG-a");
            assert_string_equal(g.g[1].mig_uuids[1], "MIG-b");
        }
        if (cases[i].want_known)
            assert_string_equal(known[cases[i].index], cases[i].want_known);
        nodestate_gpus_clear(&g);
        assert_null(g.g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_names),      cmocka_unit_test(test_driver_ready),
        cmocka_unit_test(test_files),           cmocka_unit_test(test_annotations),
        cmocka_unit_test(test_expected),        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_gpu_count_codec), cmocka_unit_test(test_drain_codec),
        cmocka_unit_test(test_gpus_from),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
