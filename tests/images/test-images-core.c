/* SPDX-License-Identifier: Apache-2.0 */
/* The simulated images' pure part (sim/images/simimage.h): tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "simimage.h"

static void test_driver_ref(void **state)
{
    (void)state;
    static const struct {
        const char *image, *env, *version, *os;
    } ok[] = {
        {"nvcr.io/nvidia/driver:550.127.05-ubuntu22.04", NULL, "550.127.05", "ubuntu22.04"},
        {"nvcr.io/nvidia/driver:550.127.05-ubuntu22.04", "", "550.127.05", "ubuntu22.04"},
        {"registry:5000/nvidia/driver:535.216.03-rhel9.4@sha256:0123", NULL, "535.216.03",
         "rhel9.4"},
        {"nvcr.io/nvidia/driver:570.86.15", NULL, "570.86.15", ""},
        {"nvcr.io/nvidia/driver:550.127.05-ubuntu22.04", "570.86.15", "570.86.15", "ubuntu22.04"},
        {"nvcr.io/nvidia/driver:latest", "580.65.06", "580.65.06", ""},
        {NULL, "550.54.15", "550.54.15", ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
        struct simimg_driver_ref r;
        struct err e = {0};
        assert_int_equal(simimg_driver_ref_parse(ok[i].image, ok[i].env, &r, &e), 0);
        assert_string_equal(r.version, ok[i].version);
        assert_string_equal(r.os, ok[i].os);
    }
    static const struct {
        const char *image, *env, *msg;
    } bad[] = {
        {"nvcr.io/nvidia/driver:latest", NULL, "no driver version"},
        {"localhost:5000/nvidia/driver", NULL, "no driver version"},
        {"nvcr.io/nvidia/driver:550.-ubuntu22.04", NULL, "no driver version"},
        {NULL, NULL, "no driver version"},
        {"nvcr.io/nvidia/driver:550.127.05-ubuntu22.04", "550;x", "is not a driver version"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct simimg_driver_ref r;
        struct err e = {0};
        assert_int_equal(simimg_driver_ref_parse(bad[i].image, bad[i].env, &r, &e), -EINVAL);
        assert_non_null(strstr(err_msg(&e), bad[i].msg));
    }

    /* NVIDIA's precompiled tag <branch>-<kernel>-<os>: the kernel, the branch completed with the
     * fleet's driver of that branch or DRIVER_VERSION's */
    static const struct {
        const char *image, *env, *fleet, *kernel, *os, *version, *msg;
    } pre[] = {
        {"nvcr.io/nvidia/driver:595-5.15.0-69-generic-ubuntu22.04", NULL, "595.91.07",
         "5.15.0-69-generic", "ubuntu22.04", "595.91.07", NULL},
        {"nvcr.io/nvidia/driver:535-5.14.0-427.13.1.el9_4.x86_64-rhel9.4", NULL, "535.216.03",
         "5.14.0-427.13.1.el9_4.x86_64", "rhel9.4", "535.216.03", NULL},
        {"nvcr.io/nvidia/driver:550-6.8.0-1014-nvidia-ubuntu24.04@sha256:00", "550.144.03",
         "550.127.05", "6.8.0-1014-nvidia", "ubuntu24.04", "550.144.03", NULL},
        /* not precompiled: a full version, or a branch with only an OS */
        {"nvcr.io/nvidia/driver:550.127.05-ubuntu22.04", NULL, "570.86.15", "", "ubuntu22.04",
         "550.127.05", NULL},
        {"nvcr.io/nvidia/driver:550-ubuntu22.04", "550.127.05", NULL, "", "ubuntu22.04",
         "550.127.05", NULL},
        /* refused */
        {"nvcr.io/nvidia/driver:595-5.15.0-69-generic-ubuntu22.04", NULL, "570.86.15", NULL, NULL,
         NULL, "names driver branch 595 only, and the simulated node's driver (570.86.15)"},
        {"nvcr.io/nvidia/driver:595-5.15.0-69-generic-ubuntu22.04", NULL, NULL, NULL, NULL, NULL,
         "set DRIVER_VERSION"},
        {"nvcr.io/nvidia/driver:59-5.15.0-69-generic-ubuntu22.04", NULL, "595.91.07", NULL, NULL,
         NULL, "names driver branch 59 only"},
        {"nvcr.io/nvidia/driver:595-5.15.0-69-generic-ubuntu22.04", "570.86.15", NULL, NULL, NULL,
         NULL, "DRIVER_VERSION \"570.86.15\" is not of branch 595"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(pre); i++) {
        struct simimg_driver_ref r;
        struct err e = {0};
        int rc = simimg_driver_ref_parse(pre[i].image, pre[i].env, &r, &e);
        if (rc == 0)
            rc = simimg_driver_ref_complete(&r, pre[i].fleet, &e);
        if (pre[i].msg) {
            if (rc != -EINVAL || !strstr(err_msg(&e), pre[i].msg))
                fail_msg("precompiled %zu: want \"%s\", got %d: %s", i, pre[i].msg, rc,
                         err_msg(&e));
            continue;
        }
        if (rc != 0)
            fail_msg("precompiled %zu: %s", i, err_msg(&e));
        assert_string_equal(r.kernel, pre[i].kernel);
        assert_string_equal(r.os, pre[i].os);
        assert_string_equal(r.version, pre[i].version);
    }
}

static void test_kernel_and_proc_version(void **state)
{
    (void)state;
    char k[64];
    struct err e = {0};
    assert_int_equal(simimg_kernel_from_proc_version("Linux version 5.15.0-127-generic "
                                                     "(buildd@lcy02) (gcc 11.4.0) #137-Ubuntu\n",
                                                     k, sizeof(k), &e),
                     0);
    assert_string_equal(k, "5.15.0-127-generic");
    assert_int_equal(simimg_kernel_from_proc_version("SunOS 5.11", k, sizeof(k), &e), -EINVAL);
    assert_int_equal(simimg_kernel_from_proc_version("Linux version ", k, sizeof(k), &e), -EINVAL);
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 4096);
    assert_int_equal(simimg_proc_version_text("550.127.05", "6.8.0-44-generic", false, &b), 0);
    assert_true(str_has_prefix(b.data, "NVRM version: NVIDIA UNIX x86_64 Kernel Module  "
                                       "550.127.05  "));
    assert_non_null(strstr(b.data, "\nGCC version:  "));
    sbuf_reset(&b);
    assert_int_equal(simimg_proc_version_text("570.133.20", "6.8.0-44-generic", true, &b), 0);
    assert_true(str_has_prefix(b.data, "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                                       "570.133.20  "));
}

/* Which modules the driver container loads, and the kernel's refusal when a GPU will not run
 * them. */
static void test_module_type(void **state)
{
    (void)state;
    static const struct {
        const char *kmt, *open_env;
        bool all_gsp, open_only;
        unsigned branch;
        int want_rc;
        bool want_open;
    } rows[] = {
        {"open", NULL, false, false, 535, 0, true},
        {"proprietary", NULL, true, true, 570, 0, false}, /* asked for: refused at load */
        {"auto", NULL, true, true, 570, 0, true},         /* Blackwell: open */
        {"auto", NULL, true, false, 570, 0, true},        /* Hopper, 570: open */
        {"auto", NULL, true, false, 550, 0, false},       /* Hopper, 550: proprietary */
        {"auto", NULL, false, false, 570, 0, false},      /* a Volta among them */
        {NULL, NULL, true, false, 550, 0, false},
        {NULL, "true", false, false, 535, 0, true}, /* the older switch */
        {"proprietary", "true", true, false, 570, 0, false},
        {"", NULL, true, true, 570, 0, true},
        {"Open", NULL, true, true, 570, -EINVAL, false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        bool open = !rows[i].want_open;
        struct err e = {0};
        int r = simimg_module_type(rows[i].kmt, rows[i].open_env, rows[i].all_gsp,
                                   rows[i].open_only, rows[i].branch, &open, &e);
        if (r != rows[i].want_rc || (r == 0 && open != rows[i].want_open))
            fail_msg("row %zu: rc %d open %d", i, r, open);
        if (r < 0)
            assert_non_null(strstr(err_msg(&e), "KERNEL_MODULE_TYPE \"Open\""));
    }
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 4096);
    simimg_nvrm_refusal(false, "0000:18:00.0", 0x290110de, &b);
    assert_string_equal(b.data, "NVRM: The NVIDIA GPU 0000:18:00.0 (PCI ID: 10de:2901)\n"
                                "NVRM: installed in this system requires use of the NVIDIA open "
                                "kernel modules.\n");
    sbuf_reset(&b);
    simimg_nvrm_refusal(true, "0000:06:00.0", 0x1db110de, &b);
    assert_true(str_has_prefix(b.data,
                               "NVRM: The NVIDIA GPU 0000:06:00.0 (PCI ID: 10de:1db1)\n"
                               "NVRM: installed in this system is not supported by open\n"));
}

/* GPU 0: no MIG; GPU 1: MIG on, two MIG devices; GPU 2: lost */
static struct gpu_mig_device migs[2] = {
    {.uuid = "MIG-aaaa", .index = 0, .gi_id = 1, .ci_id = 0, .profile = "3g.40gb"},
    {.uuid = "MIG-bbbb", .index = 1, .gi_id = 2, .ci_id = 0, .profile = "3g.40gb"},
};
static struct gpu_device gpus[3] = {
    {.index = 0,
     .name = "NVIDIA A100-SXM4-80GB",
     .uuid = "GPU-0000",
     .bus_id = "00000000:18:00.0",
     .memory_total_bytes = 81920ULL << 20,
     .cc_major = 8,
     .mig_capable = true},
    {.index = 1,
     .minor = 1,
     .name = "NVIDIA A100-SXM4-80GB",
     .uuid = "GPU-1111",
     .bus_id = "00000000:28:00.0",
     .memory_total_bytes = 81920ULL << 20,
     .cc_major = 8,
     .mig_capable = true,
     .mig_enabled = true,
     .n_mig = 2,
     .mig = migs},
    {.index = 2, .minor = 2, .name = "NVIDIA A100-SXM4-80GB", .uuid = "GPU-2222", .lost = true},
};
static struct gpu_inventory inv = {
    .driver_version = "550.127.05", .cuda_driver_version = 12040, .n_gpus = 3, .gpus = gpus};

static void test_visible_devices(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        const char *uuids; /* space-separated, in order */
    } ok[] = {
        {NULL, ""},
        {"", ""},
        {"none", ""},
        {"void", ""},
        {"all", "GPU-0000 MIG-aaaa MIG-bbbb"},
        {"0", "GPU-0000"},
        {" 0 , 0,GPU-0000", "GPU-0000"},
        {"1:1", "MIG-bbbb"},
        {"MIG-aaaa,GPU-1111", "MIG-aaaa GPU-1111"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
        struct simimg_device *d = NULL;
        size_t n = 99;
        struct err e = {0};
        assert_int_equal(simimg_visible_devices(&inv, ok[i].value, &d, &n, &e), 0);
        char got[256] = "";
        for (size_t k = 0; k < n; k++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", k ? " " : "", d[k].uuid);
        assert_string_equal(got, ok[i].uuids);
        free(d);
    }
    struct simimg_device *d = NULL;
    size_t n = 0;
    struct err e = {0};
    assert_int_equal(simimg_visible_devices(&inv, "1:0", &d, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_true(d[0].mig);
    assert_int_equal(d[0].gpu, 1);
    assert_int_equal(d[0].gi_id, 1);
    assert_string_equal(d[0].name, "NVIDIA A100-SXM4-80GB MIG 3g.40gb");
    free(d);
    static const char *const bad[] = {"7", "GPU-zzzz", "1:5", "x", "0:"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        d = NULL;
        assert_true(simimg_visible_devices(&inv, bad[i], &d, &n, &e) < 0);
        assert_non_null(strstr(err_msg(&e), "unknown device"));
        assert_null(d);
    }
}

/* The devices of device nodes (a CDI container): none without nvidiactl; a GPU by its node; a
 * MIG device by its GPU's node and both its capability nodes; a lost GPU never. */
static void test_devices_from_nodes(void **state)
{
    (void)state;
    const unsigned gi1 = sim_mig_cap_minor(1, 1, -1), ci1 = sim_mig_cap_minor(1, 1, 0);
    const unsigned gi2 = sim_mig_cap_minor(1, 2, -1), ci2 = sim_mig_cap_minor(1, 2, 0);
    assert_int_equal(gi1, 3 + 135 + 9); /* the driver's layout: GPU minor 1, GI 1 */
    assert_int_equal(ci2, 3 + 135 + 18 + 1);
    const struct {
        bool ctl;
        unsigned gpus[4], caps[4];
        size_t n_gpu, n_cap;
        const char *want; /* UUIDs, comma-joined */
    } cases[] = {
        {true, {0}, {0}, 1, 0, "GPU-0000"},
        {false, {0, 1}, {gi1, ci1}, 2, 2, ""},
        {true, {0, 1, 2}, {gi1, ci1, gi2, ci2}, 3, 4, "GPU-0000,MIG-aaaa,MIG-bbbb"},
        {true, {1}, {gi2, ci2}, 1, 2, "MIG-bbbb"},
        {true, {1}, {gi2, ci1}, 1, 2, ""},         /* a GI without its CI's node */
        {true, {0}, {gi1, ci1}, 1, 2, "GPU-0000"}, /* MIG caps without the GPU's node */
        {true, {2}, {0}, 1, 0, ""},                /* the lost GPU */
        {true, {7}, {0}, 1, 0, ""},                /* a node of no GPU in the inventory */
    };
    static struct sim_dev_nodes nodes;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        nodes.ctl = cases[i].ctl;
        nodes.n_gpu = cases[i].n_gpu;
        nodes.n_cap = cases[i].n_cap;
        memcpy(nodes.gpu_minors, cases[i].gpus, sizeof(cases[i].gpus));
        memcpy(nodes.cap_minors, cases[i].caps, sizeof(cases[i].caps));
        struct simimg_device *d = NULL;
        size_t n = 99;
        simimg_devices_from_nodes(&inv, &nodes, &d, &n);
        char got[256] = "";
        for (size_t k = 0; k < n; k++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", k ? "," : "", d[k].uuid);
        free(d);
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, got, cases[i].want);
    }
}

/* sim_dev_read: the control node, GPU nodes (nvidia<digits>, character, major 195) and the
 * capability nodes; anything else in /dev is not a GPU. mknod needs root: skipped otherwise. */
static void test_dev_read(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip(); /* mknod needs CAP_MKNOD */
        return;
    }
    char dir[] = "/tmp/simdev-XXXXXX";
    assert_non_null(mkdtemp(dir));
    static const struct {
        const char *name;
        mode_t type;
        unsigned major, minor;
    } nodes[] = {
        {"nvidiactl", S_IFCHR, 195, 255},
        {"nvidia3", S_IFCHR, 195, 3},
        {"nvidia-modeset", S_IFCHR, 195, 254},
        {"nvidia7", S_IFBLK, 195, 7},
        {"nvidia9", S_IFCHR, 1, 9},
        {"nvidiaX", S_IFCHR, 195, 5},
        {"nvidia-caps/nvidia-cap12", S_IFCHR, 509, 12},
        {"nvidia-caps/nvidia-capx", S_IFCHR, 509, 13},
    };
    char path[256];
    snprintf(path, sizeof(path), "%s/nvidia-caps", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    for (size_t i = 0; i < ARRAY_SIZE(nodes); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, nodes[i].name);
        assert_int_equal(mknod(path, nodes[i].type | 0600, makedev(nodes[i].major, nodes[i].minor)),
                         0);
    }
    static struct sim_dev_nodes got;
    sim_dev_read(dir, &got);
    assert_true(got.ctl);
    assert_int_equal(got.n_gpu, 1);
    assert_int_equal(got.gpu_minors[0], 3);
    assert_int_equal(got.n_cap, 1);
    assert_int_equal(got.cap_minors[0], 12);
    for (size_t i = ARRAY_SIZE(nodes); i-- > 0;) {
        snprintf(path, sizeof(path), "%s/%s", dir, nodes[i].name);
        unlink(path);
    }
    snprintf(path, sizeof(path), "%s/nvidia-caps", dir);
    rmdir(path);
    /* a folder without nodes: nothing, and no control node */
    sim_dev_read(dir, &got);
    assert_false(got.ctl);
    assert_int_equal(got.n_gpu + got.n_cap, 0);
    rmdir(dir);
}

/* The driver's device nodes: the control nodes, one per GPU, and the MIG capabilities of the
 * MIG-capable GPUs only, in the layout CUDA and the toolkit read. */
static void test_device_layout(void **state)
{
    (void)state;
    struct sim_dev_node *v = NULL;
    const bool mig[3] = {false, true, false};
    size_t n = sim_dev_layout(3, mig, &v);
    assert_int_equal(n, 4 + 3 + 2 + 135);
    assert_string_equal(v[0].path, "/dev/nvidiactl");
    assert_int_equal(v[0].major, SIM_GPU_MAJOR);
    assert_int_equal(v[0].minor, 255);
    assert_string_equal(v[6].path, "/dev/nvidia2");
    assert_int_equal(v[6].minor, 2);
    assert_string_equal(v[7].path, "/dev/nvidia-caps/nvidia-cap1");
    assert_string_equal(v[9].path, "/dev/nvidia-caps/nvidia-cap138"); /* GPU 1, GI 0 */
    assert_int_equal(v[9].minor, sim_mig_cap_minor(1, 0, -1));
    assert_string_equal(v[n - 1].path, "/dev/nvidia-caps/nvidia-cap272");
    free(v);
    n = sim_dev_layout(2, NULL, &v);
    assert_int_equal(n, 6);
    free(v);
}

static void test_smi_list_and_query(void **state)
{
    (void)state;
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 1 << 16);
    assert_int_equal(simimg_smi_list(&inv, &b), 0);
    assert_string_equal(b.data, "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0000)\n"
                                "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-1111)\n"
                                "  MIG 3g.40gb      Device  0: (UUID: MIG-aaaa)\n"
                                "  MIG 3g.40gb      Device  1: (UUID: MIG-bbbb)\n"
                                "GPU 2: NVIDIA A100-SXM4-80GB (UUID: GPU-2222)\n");
    struct simimg_smi_proc procs[] = {
        {.gpu = 1, .gi_id = 1, .ci_id = 0, .pid = 42, .used_mib = 256, .name = "cuda-sample"}};
    struct simimg_smi_input in = {.inv = &inv, .procs = procs, .n_procs = 1};
    struct err e = {0};
    sbuf_reset(&b);
    assert_int_equal(simimg_smi_query(&in, "driver_version", "csv,noheader", &b, &e), 0);
    assert_string_equal(b.data, "550.127.05\n550.127.05\n550.127.05\n");
    sbuf_reset(&b);
    assert_int_equal(
        simimg_smi_query(&in, "index,uuid,memory.used,mig.mode.current", "csv", &b, &e), 0);
    assert_true(str_has_prefix(b.data, "index, uuid, memory.used [MiB], mig.mode.current\n"
                                       "0, GPU-0000, 0 MiB, Disabled\n"
                                       "1, GPU-1111, 256 MiB, Enabled\n"));
    sbuf_reset(&b);
    assert_int_equal(simimg_smi_query(&in, "memory.total", "csv,noheader,nounits", &b, &e), 0);
    assert_true(str_has_prefix(b.data, "81920\n"));
    assert_int_equal(simimg_smi_query(&in, "driver_version,bogus", "csv", &b, &e), -EINVAL);
    assert_string_equal(err_msg(&e), "Field \"bogus\" is not a valid field to query.");
    assert_int_equal(simimg_smi_query(&in, "name", "xml", &b, &e), -EINVAL);

    /* the table: versions in the header, a row per GPU, the process; every line 91 wide */
    sbuf_reset(&b);
    in.now_unix_ms = 1764646899000ULL;
    assert_int_equal(simimg_smi_table(&in, &b), 0);
    assert_non_null(strstr(b.data, "| NVIDIA-SMI 550.127.05             Driver Version: "
                                   "550.127.05     CUDA Version: 12.4     |\n"));
    assert_non_null(strstr(b.data, "|   1  NVIDIA A100-SXM4-80GB          On  |"));
    assert_non_null(strstr(b.data, "Enabled |\n"));
    assert_non_null(strstr(b.data, "cuda-sample"));
    assert_null(strstr(b.data, "No running processes found"));
    const char *line = strchr(b.data, '\n') + 1;
    for (const char *nl; (nl = strchr(line, '\n')); line = nl + 1)
        assert_int_equal(nl - line, 91);
    in.n_procs = 0;
    sbuf_reset(&b);
    assert_int_equal(simimg_smi_table(&in, &b), 0);
    assert_non_null(strstr(b.data, "|  No running processes found"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_driver_ref),         cmocka_unit_test(test_kernel_and_proc_version),
        cmocka_unit_test(test_module_type),        cmocka_unit_test(test_visible_devices),
        cmocka_unit_test(test_devices_from_nodes), cmocka_unit_test(test_device_layout),
        cmocka_unit_test(test_dev_read),           cmocka_unit_test(test_smi_list_and_query),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
