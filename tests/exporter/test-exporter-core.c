/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the exporter's pure core: counters CSV, catalogue, pod map, rendering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "exporter.h"

/* ---- counters CSV ------------------------------------------------------------------------- */

static int parse(const char *text, struct exp_counters **ret, struct err *e)
{
    return exp_counters_parse(text, strlen(text), "test.csv", ret, e);
}

static void test_csv_good(void **state)
{
    (void)state;
    struct exp_counters *c = NULL;
    struct err e = {0};
    const char *text = "# comment\n"
                       "\n"
                       "   # indented comment\n"
                       "DCGM_FI_DEV_GPU_TEMP ,  gauge , GPU temperature (in C).\r\n"
                       "\tDCGM_FI_DEV_XID_ERRORS,counter,Last XID, with a comma\n"
                       "DCGM_FI_DRIVER_VERSION, label, Driver Version\n"
                       "DCGM_FI_DEV_FAN_SPEED, gauge, unsupported but known";
    assert_int_equal(parse(text, &c, &e), 0);
    assert_int_equal(c->n, 4);
    assert_false(exp_counters_want_prof(c));
    assert_string_equal(c->items[0].field->name, "DCGM_FI_DEV_GPU_TEMP");
    assert_int_equal(c->items[0].kind, EXP_GAUGE);
    assert_string_equal(c->items[0].help, "GPU temperature (in C).");
    assert_int_equal(c->items[0].line, 4);
    assert_int_equal(c->items[1].kind, EXP_COUNTER);
    assert_string_equal(c->items[1].help, "Last XID, with a comma");
    assert_int_equal(c->items[2].kind, EXP_LABEL);
    assert_int_equal(c->items[3].field->src, EXP_SRC_UNSUPPORTED);
    assert_int_equal(exp_counters_log_unsupported(c), 1);
    exp_counters_free(c);
}

struct bad_case {
    const char *text;
    const char *want; /* substring of the error */
};

static void test_csv_bad(void **state)
{
    (void)state;
    static const struct bad_case cases[] = {
        {"", "test.csv: no counters"},
        {"# only\n\n", "test.csv: no counters"},
        {"DCGM_FI_DEV_GPU_TEMP\n", "test.csv:1: expected \"DCGM field, prometheus type, help\""},
        {"# x\nDCGM_FI_DEV_GPU_TEMP, gauge\n", "test.csv:2: expected"},
        {", gauge, x\n", "test.csv:1: empty DCGM field name"},
        {"DCGM_FI_DEV_NOPE, gauge, x\n", "test.csv:1: unknown field \"DCGM_FI_DEV_NOPE\""},
        {"DCGM_FI_DEV_GPU_TEMP, histogram, x\n",
         "test.csv:1: field DCGM_FI_DEV_GPU_TEMP: unknown type \"histogram\""},
        {"DCGM_FI_DEV_GPU_TEMP, Gauge, x\n", "unknown type \"Gauge\""},
        {"DCGM_FI_DRIVER_VERSION, gauge, x\n",
         "test.csv:1: field DCGM_FI_DRIVER_VERSION is a string; its type must be label"},
        {"DCGM_FI_DEV_GPU_TEMP, label, x\n",
         "test.csv:1: field DCGM_FI_DEV_GPU_TEMP is numeric; its type must be gauge or counter"},
        {"DCGM_FI_DEV_GPU_TEMP, gauge, x\n\nDCGM_FI_DEV_GPU_TEMP, gauge, y\n",
         "test.csv:3: field DCGM_FI_DEV_GPU_TEMP already listed on line 1"},
        {"DCGM_FI_DEV_GPU_TEMP, gauge, a\x01"
         "b\n",
         "test.csv:1: control character 0x01"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct exp_counters *c = NULL;
        struct err e = {0};
        int r = parse(cases[i].text, &c, &e);
        if (r >= 0 || !strstr(err_msg(&e), cases[i].want))
            fail_msg("case %zu: r=%d error \"%s\", want \"%s\"", i, r, err_msg(&e), cases[i].want);
        assert_null(c);
    }
    /* An unknown field has its own code, so callers can append the known names. */
    struct exp_counters *c = NULL;
    struct err e = {0};
    assert_int_equal(parse("# x\nDCGM_FI_DEV_NOPE, gauge, x\n", &c, &e), EXP_UNKNOWN_FIELD);
    assert_int_equal(parse("DCGM_FI_DEV_GPU_TEMP, gaug, x\n", &c, &e), -EINVAL);
    /* NUL byte and over-long line. */
    const char nul[] = "DCGM_FI_DEV_GPU_TEMP, gauge, a\0b\n";
    assert_true(exp_counters_parse(nul, sizeof(nul) - 1, "test.csv", &c, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "test.csv:1: NUL byte"));
    char *longl = xmalloc(5000);
    memset(longl, 'A', 4999);
    longl[4999] = '\0';
    assert_true(parse(longl, &c, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "test.csv:1: line longer than"));
    free(longl);
    /* Missing file names the file. */
    assert_true(exp_counters_load("/nonexistent/x.csv", &c, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "/nonexistent/x.csv"));
}

/* The built-in default counters, field by field: dcgm-exporter's default set, in its order and
 * with its types. The project's own statement of what it exports by default (the upstream CSV is
 * compared separately, as a cross-check, when the reference folder is present). */
static const struct {
    const char *name;
    enum exp_kind kind;
} default_fields[] = {
    {"DCGM_FI_DEV_SM_CLOCK", EXP_GAUGE},
    {"DCGM_FI_DEV_MEM_CLOCK", EXP_GAUGE},
    {"DCGM_FI_DEV_MEMORY_TEMP", EXP_GAUGE},
    {"DCGM_FI_DEV_GPU_TEMP", EXP_GAUGE},
    {"DCGM_FI_DEV_POWER_USAGE", EXP_GAUGE},
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", EXP_COUNTER},
    {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", EXP_COUNTER},
    {"DCGM_FI_DEV_GPU_UTIL", EXP_GAUGE},
    {"DCGM_FI_DEV_MEM_COPY_UTIL", EXP_GAUGE},
    {"DCGM_FI_DEV_ENC_UTIL", EXP_GAUGE},
    {"DCGM_FI_DEV_DEC_UTIL", EXP_GAUGE},
    {"DCGM_FI_DEV_XID_ERRORS", EXP_GAUGE},
    {"DCGM_FI_DEV_FB_FREE", EXP_GAUGE},
    {"DCGM_FI_DEV_FB_USED", EXP_GAUGE},
    {"DCGM_FI_DEV_FB_RESERVED", EXP_GAUGE},
    {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", EXP_COUNTER},
    {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", EXP_GAUGE},
    {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", EXP_COUNTER},
    {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", EXP_COUNTER},
    {"DCGM_FI_DEV_ROW_REMAP_FAILURE", EXP_GAUGE},
    {"DCGM_FI_DRIVER_VERSION", EXP_LABEL},
    {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", EXP_GAUGE},
    {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", EXP_GAUGE},
    {"DCGM_FI_PROF_DRAM_ACTIVE", EXP_GAUGE},
    {"DCGM_FI_PROF_PCIE_TX_BYTES", EXP_GAUGE},
    {"DCGM_FI_PROF_PCIE_RX_BYTES", EXP_GAUGE},
};

static void test_csv_default_fields(void **state)
{
    (void)state;
    struct exp_counters *def = NULL;
    struct err e = {0};
    assert_int_equal(exp_counters_default(&def, &e), 0);
    assert_int_equal(def->n, ARRAY_SIZE(default_fields));
    for (size_t i = 0; i < def->n; i++) {
        assert_string_equal(def->items[i].field->name, default_fields[i].name);
        assert_int_equal(def->items[i].kind, default_fields[i].kind);
        assert_true(def->items[i].help && def->items[i].help[0]);
    }
    /* The unsupported one: the vGPU license status (the five profiling fields depend on the
     * GPUs: exp_prof_log_unsupported). */
    assert_int_equal(exp_counters_log_unsupported(def), 1);
    assert_true(exp_counters_want_prof(def));
    exp_counters_free(def);
}

/* Cross-check: the built-in default is dcgm-exporter's default-counters.csv (same fields, types,
 * help), read from the upstream reference folder ($GPUOP_SHARED/reference/upstream). Run as its
 * own test (`--upstream`): a clone without that folder skips it (77), saying why. */
static const char *const upstream_files[] = {"dcgm-exporter_default-counters.csv",
                                             "dcgm-exporter_dcp-metrics-included.csv"};

static char *upstream_path(size_t i)
{
    const char *shared = getenv("GPUOP_SHARED");
    return shared && *shared ? xasprintf("%s/reference/upstream/%s", shared, upstream_files[i])
                             : NULL;
}

static void test_csv_default_matches_upstream(void **state)
{
    (void)state;
    struct exp_counters *def = NULL;
    struct err e = {0};
    assert_int_equal(exp_counters_default(&def, &e), 0);
    for (size_t f = 0; f < ARRAY_SIZE(upstream_files); f++) {
        char *path = upstream_path(f);
        assert_non_null(path);
        struct exp_counters *up = NULL;
        if (exp_counters_load(path, &up, &e) < 0)
            fail_msg("%s", err_msg(&e));
        assert_int_equal(up->n, def->n);
        for (size_t i = 0; i < up->n; i++) {
            assert_ptr_equal(up->items[i].field, def->items[i].field);
            assert_int_equal(up->items[i].kind, def->items[i].kind);
            assert_string_equal(up->items[i].help, def->items[i].help);
        }
        exp_counters_free(up);
        free(path);
    }
    /* The unsupported one: the vGPU license status (the five profiling fields depend on the
     * GPUs: exp_prof_log_unsupported). */
    assert_int_equal(exp_counters_log_unsupported(def), 1);
    assert_true(exp_counters_want_prof(def));
    exp_counters_free(def);
}

/* 0 when every upstream file is readable; otherwise prints why the cross-check cannot run. */
static int upstream_present(void)
{
    for (size_t f = 0; f < ARRAY_SIZE(upstream_files); f++) {
        char *path = upstream_path(f);
        if (!path) {
            printf("skipped: GPUOP_SHARED is not set; the upstream cross-check needs the reference "
                   "folder (../shared beside the source tree)\n");
            return -ENOENT;
        }
        if (access(path, R_OK) < 0) {
            printf("skipped: %s: %s; the upstream cross-check needs the reference folder "
                   "(../shared beside the source tree)\n",
                   path, strerror(errno));
            free(path);
            return -ENOENT;
        }
        free(path);
    }
    return 0;
}

static void test_catalogue(void **state)
{
    (void)state;
    const struct exp_field *f = exp_field_lookup("DCGM_FI_DEV_FB_USED");
    assert_non_null(f);
    assert_int_equal(f->src, EXP_SRC_FB_USED);
    assert_int_equal(f->mig, EXP_MIG_GPU_ONLY);
    assert_int_equal(exp_field_lookup("DCGM_FI_DEV_GPU_UTIL")->mig, EXP_MIG_NONE);
    assert_true(exp_field_lookup("DCGM_FI_DRIVER_VERSION")->label);
    assert_null(exp_field_lookup("DCGM_FI_DEV_GPU_TEMPX"));
    /* Every profiling field gpu.h gives, under the name it gives it, and nothing else. */
    for (unsigned k = 0; k < GPU_PROF_COUNT; k++) {
        const struct exp_field *p = exp_field_lookup(gpu_prof_name(k));
        assert_non_null(p);
        assert_int_equal(p->src, EXP_SRC_PROF);
        assert_int_equal(p->prof, k);
        assert_int_equal(p->mig, EXP_MIG_OWN);
        assert_null(p->reason);
    }
    size_t n_prof = 0;
    for (const char *s = exp_field_known_names(); (s = strstr(s, "DCGM_FI_PROF_")); s++)
        n_prof++;
    assert_int_equal(n_prof, GPU_PROF_COUNT);
    assert_non_null(exp_field_lookup("DCGM_FI_DEV_FAN_SPEED")->reason);
    assert_non_null(strstr(exp_field_known_names(), "DCGM_FI_DEV_XID_ERRORS"));
    assert_non_null(strstr(exp_field_known_names(), "DCGM_FI_DEV_VBIOS_VERSION"));
}

/* ---- a hand-built node: GPU 0 whole, GPU 1 in MIG mode with two GPU instances -------------- */

static struct gpu_mig_device migs[3];
static struct gpu_device devs[3];
static struct gpu_inventory inv;
static struct exp_gpu_state states[3];
static struct exp_prof profs[3];

static void prof_set(struct gpu_prof *p, enum gpu_prof_field f, double v)
{
    p->valid |= 1u << f;
    p->value[f] = v;
}

static void build_node(void)
{
    memset(devs, 0, sizeof(devs));
    memset(migs, 0, sizeof(migs));
    memset(states, 0, sizeof(states));
    for (unsigned i = 0; i < 3; i++) {
        devs[i].index = i;
        devs[i].minor = i;
        snprintf(devs[i].uuid, sizeof(devs[i].uuid), "GPU-0000000%u-aaaa", i);
        snprintf(devs[i].bus_id, sizeof(devs[i].bus_id), "00000000:%02X:00.0", 0x18 + i);
        strlcpy_s(devs[i].name, "NVIDIA H100 80GB HBM3", sizeof(devs[i].name));
        snprintf(devs[i].serial, sizeof(devs[i].serial), "SN%u", i);
    }
    devs[1].mig_enabled = true;
    devs[1].n_mig = 3;
    devs[1].mig = migs;
    strlcpy_s(migs[0].uuid, "MIG-1111", sizeof(migs[0].uuid));
    strlcpy_s(migs[0].profile, "3g.40gb", sizeof(migs[0].profile));
    migs[0].gi_id = 2;
    strlcpy_s(migs[1].uuid, "MIG-2222", sizeof(migs[1].uuid));
    strlcpy_s(migs[1].profile, "1g.10gb", sizeof(migs[1].profile));
    migs[1].gi_id = 9;
    /* A second compute instance in GI 9: still one series per GPU instance. */
    strlcpy_s(migs[2].uuid, "MIG-3333", sizeof(migs[2].uuid));
    strlcpy_s(migs[2].profile, "1g.10gb", sizeof(migs[2].profile));
    migs[2].gi_id = 9;
    migs[2].ci_id = 1;
    memset(&inv, 0, sizeof(inv));
    strlcpy_s(inv.driver_version, "570.86.15", sizeof(inv.driver_version));
    inv.n_gpus = 3;
    inv.gpus = devs;

    for (unsigned i = 0; i < 2; i++) {
        struct gpu_sample *s = &states[i].sample;
        states[i].ok = true;
        s->valid = GPU_SAMPLE_TEMP | GPU_SAMPLE_POWER | GPU_SAMPLE_UTIL | GPU_SAMPLE_MEMORY |
                   GPU_SAMPLE_CLOCK_EVENTS;
        s->temp_c = 40 + i;
        s->power_mw = 123456;
        s->util_gpu = 7;
        s->fb_free_mib = 1000;
        s->fb_used_mib = 24;
        s->fb_reserved_mib = 500;
        s->clock_event_reasons = 1;
    }
    states[0].last_xid = 79;
    states[0].clock_events[0] = 3;
    states[0].n_xid_counts = 2;
    states[0].xid_counts[0].xid = 79;
    states[0].xid_counts[0].count = 2;
    states[0].xid_counts[1].xid = 48;
    states[0].xid_counts[1].count = 1;
    /* GPU 2 is lost. */
    states[2].lost = true;

    /* Profiling: GPU 0 whole, its DRAM metric failed; GPU 1 whole and its two GPU instances;
     * GPU 2 (lost) has values that must not show. */
    memset(profs, 0, sizeof(profs));
    profs[0].ok = true;
    prof_set(&profs[0].gpu, GPU_PROF_SM_ACTIVE, 0.75);
    prof_set(&profs[0].gpu, GPU_PROF_PIPE_TENSOR_ACTIVE, 0.5);
    profs[1].ok = true;
    prof_set(&profs[1].gpu, GPU_PROF_SM_ACTIVE, 0.4);
    prof_set(&profs[1].gpu, GPU_PROF_DRAM_ACTIVE, 0.25);
    profs[1].n_gi = 2;
    profs[1].gi[0].gi_id = 9;
    prof_set(&profs[1].gi[0].prof, GPU_PROF_SM_ACTIVE, 0.125);
    prof_set(&profs[1].gi[0].prof, GPU_PROF_PIPE_TENSOR_ACTIVE, 0.0625);
    profs[1].gi[1].gi_id = 2;
    prof_set(&profs[1].gi[1].prof, GPU_PROF_SM_ACTIVE, 0.9);
    profs[2].ok = true;
    prof_set(&profs[2].gpu, GPU_PROF_SM_ACTIVE, 1);
    for (unsigned i = 0; i < 3; i++)
        states[i].prof = &profs[i];
}

static const char *golden_csv = "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
                                "DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).\n"
                                "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
                                "DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n"
                                "DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error.\n"
                                "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, DBE \"vol\".\n"
                                "DCGM_EXP_CLOCK_EVENTS_COUNT, counter, reported clock events\n"
                                "DCGM_EXP_XID_ERRORS_COUNT, counter, XIDs in the window\n"
                                "DCGM_FI_PROF_SM_ACTIVE, gauge, The ratio of cycles an SM "
                                "has at least 1 warp assigned.\n"
                                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the "
                                "tensor (HMMA) pipe is active.\n"
                                "DCGM_FI_PROF_DRAM_ACTIVE, gauge, Ratio of cycles the device "
                                "memory interface is active sending or receiving data.\n"
                                "DCGM_FI_PROF_PCIE_TX_BYTES, gauge, never measured here\n"
                                "DCGM_FI_DRIVER_VERSION, label, Driver Version\n";

static char *render(enum prom_format f, bool k8s, const struct exp_pod_map *pods)
{
    struct exp_counters *c = NULL;
    struct err e = {0};
    assert_int_equal(parse(golden_csv, &c, &e), 0);
    struct exp_self self = {.last_collection_unix_s = 1700000000.5,
                            .last_collection_duration_s = 0.25,
                            .collections = 4,
                            .errors = {1, 2, 0, 0, 3},
                            .kubernetes = k8s,
                            .pod_resources_up = true};
    struct exp_render_input in = {.counters = c,
                                  .inv = &inv,
                                  .gpus = states,
                                  .hostname = "node-a",
                                  .kubernetes = k8s,
                                  .pods = pods,
                                  .self = &self,
                                  .xid_window_ms = 300000};
    struct sbuf b;
    sbuf_init(&b, 1 << 20);
    assert_int_equal(exp_render(&in, f, &b), 0);
    assert_int_equal(exp_render_tail(5, f, &b), 0);
    exp_counters_free(c);
    return sbuf_steal(&b);
}

static void compare_golden(const char *got, const char *name)
{
    const char *root = getenv("GPUOP_SOURCE_ROOT");
    assert_non_null(root);
    char *path = xasprintf("%s/tests/exporter/golden/%s", root, name);
    char *want = NULL;
    size_t len = 0;
    struct err e = {0};
    if (getenv("GPUOP_UPDATE_GOLDEN")) {
        assert_int_equal(file_write_atomic(path, got, strlen(got), 0644, &e), 0);
    } else if (file_read_all(path, 1 << 20, &want, &len, &e) < 0) {
        fail_msg("%s", err_msg(&e));
    } else if (strcmp(want, got) != 0) {
        fail_msg("%s differs; got:\n%s", path, got);
    }
    free(want);
    free(path);
}

static void test_render_golden(void **state)
{
    (void)state;
    build_node();
    char *text = render(PROM_FORMAT_TEXT, false, NULL);
    compare_golden(text, "node.prom");
    free(text);
    char *om = render(PROM_FORMAT_OPENMETRICS, false, NULL);
    compare_golden(om, "node.openmetrics");
    free(om);
}

static void test_render_pods_golden(void **state)
{
    (void)state;
    build_node();
    struct exp_pod_map pods = {0};
    assert_true(exp_pod_map_add(&pods, &inv, "GPU-00000000-aaaa", "train-0", "ml", "main"));
    assert_true(exp_pod_map_add(&pods, &inv, "GPU-00000000-aaaa::2", "infer-1", "ml", "srv"));
    assert_true(exp_pod_map_add(&pods, &inv, "GPU-00000000-aaaa::3", "infer-1", "ml", "srv"));
    assert_true(exp_pod_map_add(&pods, &inv, "MIG-2222", "small", "dev", "c"));
    assert_int_equal(pods.n, 3);
    char *text = render(PROM_FORMAT_TEXT, true, &pods);
    compare_golden(text, "node-pods.prom");
    free(text);
    exp_pod_map_clear(&pods);
}

static void test_pod_map(void **state)
{
    (void)state;
    build_node();
    struct exp_pod_map m = {0};
    assert_false(exp_pod_map_add(&m, &inv, "GPU-unknown", "p", "n", "c"));
    assert_false(exp_pod_map_add(&m, &inv, "", "p", "n", "c"));
    assert_false(exp_pod_map_add(&m, &inv, "::3", "p", "n", "c"));
    assert_false(exp_pod_map_add(&m, NULL, "GPU-00000000-aaaa", "p", "n", "c"));
    assert_true(exp_pod_map_add(&m, &inv, "MIG-1111", "p", "n", "c"));
    assert_string_equal(m.items[0].uuid, "GPU-00000001-aaaa");
    assert_int_equal(m.items[0].gi_id, 2);
    /* Old-style MIG id: MIG-<parent uuid>/<gi>/<ci>. */
    assert_true(exp_pod_map_add(&m, &inv, "MIG-GPU-00000001-aaaa/9/0", "q", "n", "c"));
    assert_string_equal(m.items[1].uuid, "GPU-00000001-aaaa");
    assert_int_equal(m.items[1].gi_id, 9);
    assert_false(exp_pod_map_add(&m, &inv, "MIG-GPU-00000001-aaaa/x/0", "q", "n", "c"));
    assert_true(exp_pod_map_add(&m, &inv, "GPU-00000002-aaaa::0", "r", "n", "c"));
    assert_int_equal(m.items[2].gi_id, EXP_WHOLE_GPU);
    assert_int_equal(m.n, 3);
    exp_pod_map_clear(&m);
    assert_int_equal(m.n, 0);

    assert_true(exp_pod_resource_is_gpu("nvidia.com/gpu", NULL));
    assert_true(exp_pod_resource_is_gpu("nvidia.com/mig-1g.10gb", NULL));
    assert_false(exp_pod_resource_is_gpu("nvidia.com/gpu.shared", NULL));
    assert_true(exp_pod_resource_is_gpu("nvidia.com/gpu.shared", "a.io/x, nvidia.com/gpu.shared"));
    assert_false(exp_pod_resource_is_gpu("a.io/xy", "a.io/x"));
    assert_false(exp_pod_resource_is_gpu("cpu", NULL));
    assert_false(exp_pod_resource_is_gpu(NULL, NULL));
}

static void test_clock_hist(void **state)
{
    (void)state;
    struct exp_clock_hist h;
    uint64_t c[EXP_CLOCK_EVENTS];
    exp_clock_hist_init(&h, 3);
    exp_clock_hist_push(&h, 1000, 0); /* nothing active: no entry */
    assert_int_equal(h.n, 0);
    exp_clock_hist_push(&h, 1000, 0x1);   /* gpu_idle */
    exp_clock_hist_push(&h, 2000, 0x5);   /* gpu_idle + power_cap */
    exp_clock_hist_push(&h, 3000, 0x104); /* power_cap + display_clocks */
    exp_clock_hist_count(&h, 3000, 5000, c);
    assert_int_equal(c[0], 2);
    assert_int_equal(c[2], 2);
    assert_int_equal(c[8], 1);
    assert_int_equal(c[1], 0);
    /* The window drops old entries... */
    exp_clock_hist_count(&h, 3000, 1000, c);
    assert_int_equal(c[0], 1);
    assert_int_equal(c[2], 2);
    exp_clock_hist_count(&h, 10000, 1000, c);
    assert_int_equal(c[2], 0);
    /* ...and the ring the oldest: cap 3. */
    exp_clock_hist_push(&h, 4000, 0x8);
    exp_clock_hist_count(&h, 4000, 100000, c);
    assert_int_equal(c[0], 1);
    assert_int_equal(c[3], 1);
    /* Bits beyond the nine named reasons are ignored. */
    exp_clock_hist_push(&h, 5000, 1ull << 40);
    exp_clock_hist_count(&h, 5000, 100000, c);
    assert_int_equal(c[3], 1);
    exp_clock_hist_clear(&h);
}

/* The clock-event histories by GPU and the collection's budgets. */
static void test_clock_table(void **state)
{
    (void)state;
    assert_int_equal(exp_clock_hist_cap(300000, 30000), 12);
    assert_int_equal(exp_clock_hist_cap(300000, 1), EXP_CLOCK_HIST_MAX);
    assert_int_equal(exp_podres_budget_ms(30000), 7500);
    assert_int_equal(exp_podres_budget_ms(500), 250);
    struct exp_clock_table *t = xcalloc(1, sizeof(*t));
    struct exp_clock_hist *a = exp_clock_table_get(t, "GPU-a", 3);
    assert_non_null(a);
    assert_int_equal(a->cap, 3);
    assert_ptr_equal(exp_clock_table_get(t, "GPU-a", 99), a); /* made once */
    char uuid[32];
    for (int i = 1; i < EXP_CLOCK_HISTS; i++) {
        snprintf(uuid, sizeof(uuid), "GPU-%d", i);
        assert_non_null(exp_clock_table_get(t, uuid, 2));
    }
    assert_null(exp_clock_table_get(t, "GPU-one-too-many", 2)); /* full: not counted */
    assert_ptr_equal(exp_clock_table_get(t, "GPU-a", 3), a);
    exp_clock_table_clear(t);
    assert_int_equal(t->n, 0);
    free(t);
}

/* The last XID of each GPU and the window's counts by value. */
static void test_xid_log(void **state)
{
    (void)state;
    struct exp_xid_log *l = xcalloc(1, sizeof(*l));
    struct exp_gpu_state st = {0};
    assert_int_equal(exp_xid_log_last(l, "GPU-a"), 0);
    exp_xid_log_record(l, "GPU-a", 79, 1000);
    exp_xid_log_record(l, "GPU-b", 48, 1500);
    exp_xid_log_record(l, "GPU-a", 79, 2000);
    exp_xid_log_record(l, "GPU-a", 48, 3000);
    assert_int_equal(exp_xid_log_last(l, "GPU-a"), 48);
    assert_int_equal(exp_xid_log_last(l, "GPU-b"), 48);
    exp_xid_log_counts(l, "GPU-a", 3000, 5000, &st);
    assert_int_equal(st.n_xid_counts, 2);
    assert_int_equal(st.xid_counts[0].xid, 79);
    assert_int_equal(st.xid_counts[0].count, 2);
    assert_int_equal(st.xid_counts[1].xid, 48);
    assert_int_equal(st.xid_counts[1].count, 1);
    /* the window leaves the old ones out */
    exp_xid_log_counts(l, "GPU-a", 3000, 1000, &st);
    assert_int_equal(st.n_xid_counts, 2);
    assert_int_equal(st.xid_counts[0].count, 1);
    exp_xid_log_counts(l, "GPU-a", 10000, 1000, &st);
    assert_int_equal(st.n_xid_counts, 0);
    /* at most EXP_XID_COUNTS_MAX values; the ring keeps the newest EXP_XID_RING events */
    for (uint64_t x = 1; x <= EXP_XID_RING + 10; x++)
        exp_xid_log_record(l, "GPU-c", x, 20000);
    exp_xid_log_counts(l, "GPU-c", 20000, 1000, &st);
    assert_int_equal(st.n_xid_counts, EXP_XID_COUNTS_MAX);
    assert_int_equal(l->n, EXP_XID_RING);
    exp_xid_log_counts(l, "GPU-a", 20000, 100000, &st);
    assert_int_equal(st.n_xid_counts, 0); /* pushed out of the ring */
    assert_int_equal(exp_xid_log_last(l, "GPU-a"), 48);
    free(l);
}

/* ---- profiling fields ----------------------------------------------------------------------- */

/* A collection's GPM answer to the values it exports: one case per way a pair can go. */
struct prof_case {
    const char *name;
    int rc;               /* gpu_gpm_metrics' answer */
    uint64_t interval_ms; /* between the pair's samples */
    uint32_t gpu_valid;   /* the whole GPU's metrics NVML answered (gpu_prof.valid) */
    size_t n_gi;
    struct {
        unsigned gi_id;
        int error;
        uint32_t valid;
    } gi[3];
    /* expected */
    bool ok;
    uint32_t want_gpu;
    size_t want_n_gi;
    unsigned want_gi[3];
};

#define B(f) (1u << (f))
#define ACT  (B(GPU_PROF_SM_ACTIVE) | B(GPU_PROF_PIPE_TENSOR_ACTIVE) | B(GPU_PROF_DRAM_ACTIVE))
#define ALL  ((1u << GPU_PROF_COUNT) - 1)

static const struct prof_case prof_cases[] = {
    {"a pair one interval apart", 0, 30000, ALL, 0, {{0}}, true, ALL, 0, {0}},
    {"a late collection, within the slack", 0, 59000, ALL, 0, {{0}}, true, ALL, 0, {0}},
    {"the first sample: no pair yet", -EAGAIN, 0, 0, 0, {{0}}, false, 0, 0, {0}},
    {"a sample not after the previous (same instant)", -EAGAIN, 0, 0, 0, {{0}}, false, 0, 0, {0}},
    {"the sampler refused a stale previous sample", -ESTALE, 0, 0, 0, {{0}}, false, 0, 0, {0}},
    {"a previous sample older than the interval allows", 0, 61000, ALL, 0, {{0}}, false, 0, 0, {0}},
    {"a pair of no length", 0, 0, ALL, 0, {{0}}, false, 0, 0, {0}},
    {"a lost GPU", GPU_ERR_LOST, 0, 0, 0, {{0}}, false, 0, 0, {0}},
    {"an unsupported GPU (no sampler's answer)",
     GPU_ERR_NOT_SUPPORTED,
     0,
     0,
     0,
     {{0}},
     false,
     0,
     0,
     {0}},
    /* A counter that wrapped (or any pair NVML cannot compute a metric over) comes back with that
     * metric failed, negative or not finite: the GPU model leaves its valid bit clear, and the
     * field is left out while the others stay. */
    {"counter wrap: DRAM's metric failed",
     0,
     30000,
     ALL & ~B(GPU_PROF_DRAM_ACTIVE),
     0,
     {{0}},
     true,
     ALL & ~B(GPU_PROF_DRAM_ACTIVE),
     0,
     {0}},
    {"no NVLinks: the NVLink metrics not supported",
     0,
     30000,
     ALL & ~(B(GPU_PROF_NVLINK_TX_BYTES) | B(GPU_PROF_NVLINK_RX_BYTES)),
     0,
     {{0}},
     true,
     ALL & ~(B(GPU_PROF_NVLINK_TX_BYTES) | B(GPU_PROF_NVLINK_RX_BYTES)),
     0,
     {0}},
    {"a MIG GPU: each GPU instance's own values",
     0,
     30000,
     ALL,
     3,
     {{2, 0, ACT}, {9, 0, ACT}, {13, 0, B(GPU_PROF_SM_ACTIVE)}},
     true,
     ALL,
     3,
     {2, 9, 13}},
    {"a MIG GPU on R520: the instances not supported, the GPU's values kept",
     0,
     30000,
     ALL,
     2,
     {{2, GPU_ERR_NOT_SUPPORTED, 0}, {9, GPU_ERR_NOT_SUPPORTED, 0}},
     true,
     ALL,
     0,
     {0}},
    {"a MIG instance made anew since the previous sample (its pair refused)",
     0,
     30000,
     ACT,
     2,
     {{2, -EINVAL, 0}, {9, 0, ACT}},
     true,
     ACT,
     1,
     {9}},
};

static void test_prof_from_gpm(void **state)
{
    (void)state;
    uint64_t max_age = exp_gpm_max_age_ms(30000);
    assert_int_equal(max_age, 60000);
    for (size_t i = 0; i < ARRAY_SIZE(prof_cases); i++) {
        const struct prof_case *c = &prof_cases[i];
        struct gpu_gpm_metrics m = {.interval_ms = c->interval_ms, .n_gi = c->n_gi};
        for (unsigned f = 0; f < GPU_PROF_COUNT; f++)
            if (c->gpu_valid & B(f))
                prof_set(&m.gpu, f, 0.01 * (f + 1));
        for (size_t k = 0; k < c->n_gi; k++) {
            m.gi[k].gi_id = c->gi[k].gi_id;
            m.gi[k].error = c->gi[k].error;
            for (unsigned f = 0; f < GPU_PROF_COUNT; f++)
                if (c->gi[k].valid & B(f))
                    prof_set(&m.gi[k].prof, f, 0.001 * (f + 1) + c->gi[k].gi_id);
        }
        struct exp_prof p;
        memset(&p, 0xA5, sizeof(p)); /* every byte is written */
        exp_prof_from_gpm(c->rc, &m, max_age, &p);
        if (p.ok != c->ok)
            fail_msg("%s: ok %d, want %d", c->name, p.ok, c->ok);
        for (unsigned f = 0; f < GPU_PROF_COUNT; f++) {
            double v = -1;
            bool got = exp_prof_value(&p, EXP_WHOLE_GPU, f, &v);
            if (got != !!(c->want_gpu & B(f)))
                fail_msg("%s: GPU field %s %s", c->name, gpu_prof_name(f),
                         got ? "exported" : "missing");
            if (got && v != 0.01 * (f + 1))
                fail_msg("%s: GPU field %s = %g", c->name, gpu_prof_name(f), v);
        }
        if (p.n_gi != c->want_n_gi)
            fail_msg("%s: %zu GPU instances, want %zu", c->name, p.n_gi, c->want_n_gi);
        for (size_t k = 0; k < c->n_gi; k++) {
            unsigned gi = c->gi[k].gi_id;
            bool want = false;
            for (size_t w = 0; w < c->want_n_gi; w++)
                want = want || c->want_gi[w] == gi;
            for (unsigned f = 0; f < GPU_PROF_COUNT; f++) {
                double v = -1;
                bool got = exp_prof_value(&p, gi, f, &v);
                bool want_f = want && (c->gi[k].valid & B(f));
                if (got != want_f)
                    fail_msg("%s: GPU instance %u field %s %s", c->name, gi, gpu_prof_name(f),
                             got ? "exported" : "missing");
                if (got && v != 0.001 * (f + 1) + gi)
                    fail_msg("%s: GPU instance %u field %s = %g", c->name, gi, gpu_prof_name(f), v);
            }
        }
        /* An instance the pair does not know has nothing. */
        double v;
        assert_false(exp_prof_value(&p, 5, GPU_PROF_SM_ACTIVE, &v));
    }
    /* No sampler at all (a GPU without GPM): no values. */
    double v;
    assert_false(exp_prof_value(NULL, EXP_WHOLE_GPU, GPU_PROF_SM_ACTIVE, &v));
    struct exp_prof none = {0};
    assert_false(exp_prof_value(&none, EXP_WHOLE_GPU, GPU_PROF_SM_ACTIVE, &v));
    assert_false(exp_prof_value(&none, EXP_WHOLE_GPU, GPU_PROF_COUNT, &v));
}

/* When a collection samples, and how old a pair may be. */
static void test_gpm_timing(void **state)
{
    (void)state;
    assert_int_equal(exp_gpm_max_age_ms(30000), 60000);
    assert_int_equal(exp_gpm_max_age_ms(1000), 2000);
    assert_int_equal(exp_gpm_max_age_ms(50), 1050); /* a second of slack at least */
    assert_int_equal(exp_gpm_max_age_ms(UINT64_MAX - 5), UINT64_MAX);
    assert_true(exp_gpm_due(0, 5));        /* never sampled */
    assert_false(exp_gpm_due(1000, 1050)); /* 50 ms: NVML wants more than 100 */
    assert_false(exp_gpm_due(1000, 1099));
    assert_true(exp_gpm_due(1000, 1100));
    assert_true(exp_gpm_due(1000, 31000));
    assert_true(exp_gpm_due(5000, 1000)); /* a clock that went back: sample again */
}

/* A sampler serves one MIG layout: GPU instances and their profiles, each once. */
static void test_gpm_layout(void **state)
{
    (void)state;
    build_node();
    struct exp_gpm_layout whole, mig;
    exp_gpm_layout_of(&devs[0], &whole);
    assert_false(whole.mig);
    assert_int_equal(whole.n, 0);
    migs[0].gi_profile_id = 2;
    migs[1].gi_profile_id = 19;
    migs[2].gi_profile_id = 19;
    exp_gpm_layout_of(&devs[1], &mig);
    assert_true(mig.mig);
    assert_int_equal(mig.n, 2); /* GI 9 has two compute instances: once */
    assert_int_equal(mig.gi[0].gi_id, 2);
    assert_int_equal(mig.gi[1].gi_id, 9);
    assert_true(exp_gpm_layout_equal(&mig, &devs[1]));
    assert_true(exp_gpm_layout_equal(&whole, &devs[0]));
    assert_false(exp_gpm_layout_equal(&whole, &devs[1]));
    /* the same GPU instance id made anew with another profile */
    migs[0].gi_profile_id = 9;
    assert_false(exp_gpm_layout_equal(&mig, &devs[1]));
    migs[0].gi_profile_id = 2;
    /* one instance destroyed */
    devs[1].n_mig = 1;
    assert_false(exp_gpm_layout_equal(&mig, &devs[1]));
    devs[1].n_mig = 3;
    /* MIG turned off */
    devs[1].mig_enabled = false;
    assert_false(exp_gpm_layout_equal(&mig, &devs[1]));
    assert_true(exp_gpm_layout_equal(&whole, &devs[1]));
}

/* Why a GPU has no GPM, and the start-up notice's grouping. */
static void test_gpm_why_not(void **state)
{
    (void)state;
    struct gpu_device d = {0};
    char why[EXP_GPM_REASON_MAX];
    strlcpy_s(d.name, "NVIDIA A100-SXM4-80GB", sizeof(d.name));
    d.cc_major = 8;
    assert_int_equal(exp_gpm_why_not(&d, "ampere", "550.90.07", why, sizeof(why)), EXP_GPM_NO_ARCH);
    assert_string_equal(why, "NVIDIA A100-SXM4-80GB is ampere (compute capability 8.0): GPU "
                             "Performance Monitoring needs a Hopper or newer GPU");
    strlcpy_s(d.name, "NVIDIA L4", sizeof(d.name));
    d.cc_minor = 9; /* Ada is 8.9: not Hopper */
    assert_int_equal(exp_gpm_why_not(&d, "ada", "550.90.07", why, sizeof(why)), EXP_GPM_NO_ARCH);
    strlcpy_s(d.name, "Tesla V100-SXM2-16GB", sizeof(d.name));
    d.cc_major = 7;
    d.cc_minor = 0;
    assert_int_equal(exp_gpm_why_not(&d, "volta", "418.40.04", why, sizeof(why)), EXP_GPM_NO_ARCH);
    /* A Hopper GPU the driver offers no GPM on: the driver's reason. */
    strlcpy_s(d.name, "NVIDIA H100 80GB HBM3", sizeof(d.name));
    d.cc_major = 9;
    assert_int_equal(exp_gpm_why_not(&d, "hopper", "515.65.01", why, sizeof(why)),
                     EXP_GPM_NO_DRIVER);
    assert_string_equal(why, "the driver (515.65.01) offers no GPU Performance Monitoring on "
                             "NVIDIA H100 80GB HBM3 (hopper): it needs NVML 11.8 (R520) or later");
    d.cc_major = 0; /* compute capability unknown: not blamed on the architecture */
    assert_int_equal(exp_gpm_why_not(&d, NULL, "", why, sizeof(why)), EXP_GPM_NO_DRIVER);
    assert_non_null(strstr(why, "(version unknown)"));
    assert_non_null(strstr(why, "(architecture unknown)"));
    exp_gpm_why_not(&d, "unknown", "", why, sizeof(why));
    assert_non_null(strstr(why, "(architecture unknown)"));

    struct exp_gpm_support g[8];
    memset(g, 0, sizeof(g));
    for (unsigned i = 0; i < 8; i++) {
        g[i].index = i;
        strlcpy_s(g[i].reason, i == 7 ? "reason B" : "reason A", sizeof(g[i].reason));
    }
    g[4].support = 1;
    struct sbuf b;
    sbuf_init(&b, 1024);
    assert_int_equal(exp_gpm_summary(g, 8, &b), 1);
    assert_string_equal(b.data, "gpu 0-3,5-6: reason A; gpu 7: reason B");
    sbuf_reset(&b);
    g[1].support = -EIO;
    strlcpy_s(g[1].reason, "the support query failed: x", sizeof(g[1].reason));
    assert_int_equal(exp_gpm_summary(g, 8, &b), 1);
    assert_string_equal(b.data,
                        "gpu 0,2-3,5-6: reason A; gpu 1: the support query failed: x; gpu 7: "
                        "reason B");
    sbuf_free(&b);
    sbuf_init(&b, 16); /* too small: an error, not a cut reason */
    assert_int_equal(exp_gpm_summary(g, 8, &b), -ENOBUFS);
    sbuf_free(&b);

    /* The notice: one line per requested profiling field, none when every GPU has GPM. */
    struct exp_counters *c = NULL;
    struct err e = {0};
    assert_int_equal(parse("DCGM_FI_DEV_GPU_TEMP, gauge, t\n"
                           "DCGM_FI_PROF_SM_ACTIVE, gauge, s\n"
                           "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, p\n",
                           &c, &e),
                     0);
    assert_true(exp_counters_want_prof(c));
    assert_int_equal(exp_prof_log_unsupported(c, g, 8), 2);     /* some GPUs */
    assert_int_equal(exp_prof_log_unsupported(c, &g[4], 1), 0); /* every GPU */
    assert_int_equal(exp_prof_log_unsupported(c, g, 4), 2);     /* none */
    assert_int_equal(exp_prof_log_unsupported(c, g, 0), 2);     /* no GPUs */
    exp_counters_free(c);
    assert_int_equal(parse("DCGM_FI_DEV_GPU_TEMP, gauge, t\n", &c, &e), 0);
    assert_int_equal(exp_prof_log_unsupported(c, g, 4), 0); /* none asked for */
    exp_counters_free(c);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--upstream") == 0) {
        if (upstream_present() < 0)
            return 77;
        const struct CMUnitTest upstream[] = {
            cmocka_unit_test(test_csv_default_matches_upstream),
        };
        return cmocka_run_group_tests(upstream, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_good),
        cmocka_unit_test(test_csv_bad),
        cmocka_unit_test(test_csv_default_fields),
        cmocka_unit_test(test_catalogue),
        cmocka_unit_test(test_render_golden),
        cmocka_unit_test(test_render_pods_golden),
        cmocka_unit_test(test_pod_map),
        cmocka_unit_test(test_clock_hist),
        cmocka_unit_test(test_clock_table),
        cmocka_unit_test(test_xid_log),
        cmocka_unit_test(test_prof_from_gpm),
        cmocka_unit_test(test_gpm_timing),
        cmocka_unit_test(test_gpm_layout),
        cmocka_unit_test(test_gpm_why_not),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
