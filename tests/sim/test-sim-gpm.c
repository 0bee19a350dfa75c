/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulated GPU Performance Monitoring. Pure parts by tables (sim-gpm.c: ratios and loads
 * as text, the fleet's workload, the activity of GPUs and MIG instances, counters and metrics),
 * then the driver through NVML's ABI as a client sees it (dlopen): support by architecture,
 * versions, errors, the two-sample metrics and their refusals, MIG samples, and the load of a
 * running CUDA sample (build/sim-image cuda-sample) with gpuop-sim set-load over it. The
 * simulated clock (GPUOP_SIM_CLOCK) makes every figure exact.
 *
 * Usage: test-sim-gpm LIBNVIDIA_ML GPUOP_SIM SIM_IMAGE
 */
#include <dlfcn.h>
#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "nvml-abi.h"
#include "simnvml.h"
#include "util.h"

#define DECL(f) __typeof__(&f) f;
static struct {
    NVML_FUNCS(DECL)
} N;

static const char *lib_path, *gpuop_sim, *sim_image;
static char tmp_root[256];
static char fleet_path[400];
static pid_t sample_pid = -1;

#define T0 1796000000ull

/* GPU 0: an H100 whose processes drive the fleet's workload; GPU 1: an H100 with MIG on
 * (3g.40gb and 1g.10gb); GPU 2: an A100 (Ampere: no GPM). GPUs 0 and 1 share 4 NVLinks. */
static const char fleet_text[] = "driver_version: \"570.86.15\"\n"
                                 "cuda_driver_version: 12080\n"
                                 "gpus:\n"
                                 "  - model: \"NVIDIA H100 80GB HBM3\"\n"
                                 "    memory_mib: 81559\n"
                                 "    compute_capability: \"9.0\"\n"
                                 "    architecture: hopper\n"
                                 "    pci_device_id: 0x2330\n"
                                 "    mig_capable: true\n"
                                 "    power_limit_w: 700\n"
                                 "    max_sm_clock_mhz: 1980\n"
                                 "    workload:\n"
                                 "      sm: 0.7\n"
                                 "      tensor: 0.2\n"
                                 "      dram: 0.4\n"
                                 "  - model: \"NVIDIA H100 80GB HBM3\"\n"
                                 "    memory_mib: 81559\n"
                                 "    compute_capability: \"9.0\"\n"
                                 "    architecture: hopper\n"
                                 "    pci_device_id: 0x2330\n"
                                 "    mig_capable: true\n"
                                 "    power_limit_w: 700\n"
                                 "    max_sm_clock_mhz: 1980\n"
                                 "    mig:\n"
                                 "      enabled: true\n"
                                 "      instances: [\"3g.40gb\", \"1g.10gb\"]\n"
                                 "  - model: \"NVIDIA A100-SXM4-80GB\"\n"
                                 "    memory_mib: 81920\n"
                                 "    compute_capability: \"8.0\"\n"
                                 "    architecture: ampere\n"
                                 "    pci_device_id: 0x20b2\n"
                                 "    mig_capable: false\n"
                                 "    power_limit_w: 400\n"
                                 "    max_sm_clock_mhz: 1410\n"
                                 "topology:\n"
                                 "  nvlinks:\n"
                                 "    - [0, 1, 4]\n";

static const double PCIE = 3938e6 * 16; /* Hopper: PCIe 5.0 x16, bytes per second */
static const double MIB = 1024.0 * 1024.0;

static struct sim_fleet *fleet(void)
{
    struct err e = {0};
    struct sim_fleet *f = NULL;
    if (sim_fleet_parse(fleet_text, strlen(fleet_text), "gpm.yaml", &f, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return f;
}

static void set_clock(uint64_t s)
{
    char v[32];
    snprintf(v, sizeof(v), "%llu", (unsigned long long)s);
    setenv("GPUOP_SIM_CLOCK", v, 1);
}

static void near(double got, double want, const char *what)
{
    if (fabs(got - want) > 1e-6 * fmax(1.0, fabs(want)))
        fail_msg("%s: %.12g, want %.12g", what, got, want);
}

/* ---- pure: text ---------------------------------------------------------------------------- */

static void ratios(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int want;
        unsigned milli;
    } t[] = {
        {"0", 0, 0},          {"1", 0, 1000},       {"0.8", 0, 800},
        {"0.125", 0, 125},    {"1.0", 0, 1000},     {"1.000", 0, 1000},
        {"0.1250", 0, 125},   {"00.5", 0, 500},     {"0.1251", -EINVAL, 0},
        {"1.5", -ERANGE, 0},  {"2", -ERANGE, 0},    {"10", -ERANGE, 0},
        {"100", -ERANGE, 0},  {"", -EINVAL, 0},     {".5", -EINVAL, 0},
        {"0.", -EINVAL, 0},   {"-0.1", -EINVAL, 0}, {"0.5x", -EINVAL, 0},
        {"1e-1", -EINVAL, 0}, {" 0.5", -EINVAL, 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        unsigned v = 4242;
        int r = sim_ratio_parse(t[i].s, &v);
        if (r != t[i].want || (r == 0 && v != t[i].milli) || (r < 0 && v != 4242))
            fail_msg("\"%s\": %d %u, want %d %u", t[i].s, r, v, t[i].want, t[i].milli);
    }
    assert_int_equal(sim_ratio_parse(NULL, &(unsigned){0}), -EINVAL);
}

static void loads(void **state)
{
    (void)state;
    struct err e = {0};
    struct sim_load l;
    assert_int_equal(sim_load_parse("sm=0.8,tensor=0.5,dram=0.3", &l, &e), 0);
    assert_true(l.sm == 800 && l.tensor == 500 && l.dram == 300);
    assert_int_equal(sim_load_parse("dram=1", &l, &e), 0);
    assert_true(l.sm == 0 && l.tensor == 0 && l.dram == 1000);
    static const struct {
        const char *s, *msg;
    } bad[] = {
        {"sm=0.8,sm=0.1", "\"sm\" given twice"}, {"gpu=1", "\"gpu\": unknown key"},
        {"sm", "\"sm\": not key=ratio"},         {"sm=2", "sm=\"2\": not a ratio"},
        {"tensor=0.5x", "tensor=\"0.5x\""},      {"", "no load"},
        {"sm=0.5,", "ends in a comma"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err_clear(&e);
        if (sim_load_parse(bad[i].s, &l, &e) >= 0 || !strstr(err_msg(&e), bad[i].msg))
            fail_msg("\"%s\": \"%s\", want \"%s\"", bad[i].s, err_msg(&e), bad[i].msg);
    }
}

static void fleet_workload(void **state)
{
    (void)state;
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = fleet();
    assert_true(f->gpus[0].has_workload);
    assert_true(f->gpus[0].workload.sm == 700 && f->gpus[0].workload.tensor == 200 &&
                f->gpus[0].workload.dram == 400);
    assert_false(f->gpus[1].has_workload);
    static const struct {
        const char *from, *to, *msg;
    } bad[] = {
        {"      sm: 0.7\n", "      sm: 1.5\n", "gpus[0].workload.sm: expected a ratio from 0 to 1"},
        {"      sm: 0.7\n", "      sm: high\n", "gpus[0].workload.sm: expected a ratio"},
        {"      sm: 0.7\n", "      fp64: 0.7\n", "gpus[0].workload"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char buf[sizeof(fleet_text) + 64];
        const char *at = strstr(fleet_text, bad[i].from);
        assert_non_null(at);
        snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - fleet_text), fleet_text, bad[i].to,
                 at + strlen(bad[i].from));
        struct err e = {0};
        struct sim_fleet *g = NULL;
        if (sim_fleet_parse(buf, strlen(buf), "gpm.yaml", &g, &e) >= 0 ||
            !strstr(err_msg(&e), bad[i].msg))
            fail_msg("case %zu: \"%s\", want \"%s\"", i, err_msg(&e), bad[i].msg);
        assert_null(g);
    }
}

/* ---- pure: activity, counters, metrics ----------------------------------------------------- */

static struct sim_proc proc(unsigned gpu, unsigned gi, unsigned ci, const struct sim_load *l)
{
    struct sim_proc p = {.pid = 1, .gpu = gpu, .gi_id = gi, .ci_id = ci};
    if (l) {
        p.has_load = true;
        p.load = *l;
    }
    return p;
}

static void activity(void **state)
{
    (void)state;
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = fleet();
    const struct sim_gpu_spec *h = &f->gpus[0], *m = &f->gpus[1];
    struct sim_gpu_state g0, g1;
    sim_gpu_state_init(h, &g0);
    sim_gpu_state_init(m, &g1);
    assert_true(sim_gpm_supported(h));
    assert_false(sim_gpm_supported(&f->gpus[2])); /* Ampere */
    struct sim_gpm_rates r;

    /* idle: zeros, and the GPU counts PCIe and its 4 NVLinks */
    assert_int_equal(sim_gpm_rates(h, &g0, NULL, 0, SIM_NO_ID, SIM_NO_ID, &r), NVML_SUCCESS);
    for (size_t i = 0; i < SIM_GPM_ACTIVITIES; i++)
        assert_true(r.active[i] == 0);
    assert_true(r.pcie && r.nvlink && r.n_links == 4 && r.ident == 0);

    /* a process's own load */
    struct sim_load own = {800, 500, 300};
    struct sim_proc p = proc(0, SIM_NO_ID, SIM_NO_ID, &own);
    assert_int_equal(sim_gpm_rates(h, &g0, &p, 1, SIM_NO_ID, SIM_NO_ID, &r), NVML_SUCCESS);
    near(r.active[SIM_GPM_GR], 0.8, "gr");
    near(r.active[SIM_GPM_SM], 0.8, "sm");
    near(r.active[SIM_GPM_OCC], 0.4, "occupancy");
    near(r.active[SIM_GPM_TENSOR], 0.5, "tensor");
    near(r.active[SIM_GPM_HMMA], 0.5, "hmma");
    near(r.active[SIM_GPM_DRAM], 0.3, "dram");
    near(r.active[SIM_GPM_INT], 0.24, "integer");
    near(r.active[SIM_GPM_FP32], 0.18, "fp32");
    near(r.active[SIM_GPM_FP16], 0.06, "fp16");
    near(r.active[SIM_GPM_FP64], 0.03, "fp64");
    near(r.active[SIM_GPM_DFMA] + r.active[SIM_GPM_IMMA], 0, "dfma, imma");
    near(r.bytes_per_s[SIM_GPM_PCIE_RX], 0.10 * 0.3 * PCIE, "pcie rx");
    near(r.bytes_per_s[SIM_GPM_PCIE_TX], 0.05 * 0.3 * PCIE, "pcie tx");
    near(r.bytes_per_s[SIM_GPM_NVLINK_TX], 0.25 * 0.5 * 25e9 * 4, "nvlink tx");

    /* no load of its own: the GPU's set-load, else the fleet's workload, else vectorAdd's */
    p = proc(0, SIM_NO_ID, SIM_NO_ID, NULL);
    assert_int_equal(sim_gpm_rates(h, &g0, &p, 1, SIM_NO_ID, SIM_NO_ID, &r), NVML_SUCCESS);
    near(r.active[SIM_GPM_SM], 0.7, "fleet workload");
    g0.has_load = true;
    g0.load = (struct sim_load){250, 0, 0};
    assert_int_equal(sim_gpm_rates(h, &g0, &p, 1, SIM_NO_ID, SIM_NO_ID, &r), NVML_SUCCESS);
    near(r.active[SIM_GPM_SM], 0.25, "set-load");
    near(r.active[SIM_GPM_DRAM], 0, "set-load dram");
    struct sim_gpu_state g2;
    sim_gpu_state_init(&f->gpus[2], &g2);
    struct sim_proc q = proc(2, SIM_NO_ID, SIM_NO_ID, NULL);
    assert_int_equal(sim_gpm_rates(&f->gpus[2], &g2, &q, 1, SIM_NO_ID, SIM_NO_ID, &r), 0);
    near(r.active[SIM_GPM_SM], SIM_LOAD_DEFAULT.sm / 1000.0, "default");
    assert_false(r.nvlink); /* no links */

    /* two processes: the sum, at most 1 */
    struct sim_load a = {600, 0, 500}, b = {600, 100, 800};
    struct sim_proc two[] = {proc(0, SIM_NO_ID, SIM_NO_ID, &a), proc(0, SIM_NO_ID, SIM_NO_ID, &b)};
    assert_int_equal(sim_gpm_rates(h, &g0, two, 2, SIM_NO_ID, SIM_NO_ID, &r), NVML_SUCCESS);
    near(r.active[SIM_GPM_SM], 1.0, "two: sm");
    near(r.active[SIM_GPM_TENSOR], 0.1, "two: tensor");
    near(r.active[SIM_GPM_DRAM], 1.0, "two: dram");

    /* MIG: a process on the 3g.40gb instance; the 1g.10gb idles */
    assert_true(g1.mig_mode && g1.n_gi == 2);
    const struct sim_gi *gi3 = NULL, *gi1 = NULL;
    for (unsigned k = 0; k < g1.n_gi; k++) {
        const struct sim_gi_profile *pr = sim_mig_profile_by_id(m->mig_table, g1.gi[k].profile_id);
        if (strcmp(pr->name, "3g.40gb") == 0)
            gi3 = &g1.gi[k];
        else
            gi1 = &g1.gi[k];
    }
    assert_non_null(gi3);
    assert_non_null(gi1);
    struct sim_load full = {1000, 0, 500};
    struct sim_proc mp = proc(1, gi3->id, gi3->ci[0].id, &full);
    assert_int_equal(sim_gpm_rates(m, &g1, &mp, 1, gi3->id, SIM_NO_ID, &r), NVML_SUCCESS);
    near(r.active[SIM_GPM_SM], 1.0, "gi 3g sm");
    near(r.active[SIM_GPM_DRAM], 0.5, "gi 3g dram");
    assert_false(r.pcie || r.nvlink); /* the GPU's links, not an instance's */
    uint64_t ident3 = r.ident;
    assert_int_equal(sim_gpm_rates(m, &g1, &mp, 1, gi3->id, gi3->ci[0].id, &r), NVML_SUCCESS);
    near(r.active[SIM_GPM_SM], 1.0, "ci of 3g");
    assert_true(r.ident != ident3 && r.ident != 0);
    assert_int_equal(sim_gpm_rates(m, &g1, &mp, 1, gi1->id, SIM_NO_ID, &r), NVML_SUCCESS);
    near(r.active[SIM_GPM_SM], 0, "gi 1g");
    assert_true(r.ident != ident3);
    assert_int_equal(sim_gpm_rates(m, &g1, &mp, 1, SIM_NO_ID, SIM_NO_ID, &r), NVML_SUCCESS);
    near(r.active[SIM_GPM_SM], 60.0 / 132.0, "gpu with MIG: sm by the instance's SMs");
    near(r.active[SIM_GPM_DRAM], 0.5 * 4 / 8, "gpu with MIG: dram by its memory slices");
    assert_true(r.pcie);
    assert_int_equal(sim_gpm_rates(m, &g1, &mp, 1, 14, SIM_NO_ID, &r), NVML_ERROR_NOT_FOUND);
    assert_int_equal(sim_gpm_rates(m, &g1, &mp, 1, gi3->id, 7, &r), NVML_ERROR_NOT_FOUND);
    assert_int_equal(sim_gpm_rates(h, &g0, NULL, 0, 0, SIM_NO_ID, &r), NVML_ERROR_NOT_FOUND);
}

static void counters_and_metrics(void **state)
{
    (void)state;
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = fleet();
    struct sim_gpu_state g;
    sim_gpu_state_init(&f->gpus[0], &g);
    struct sim_load own = {800, 500, 300};
    struct sim_proc p = proc(0, SIM_NO_ID, SIM_NO_ID, &own);
    struct sim_gpm_rates busy, idle;
    assert_int_equal(sim_gpm_rates(&f->gpus[0], &g, &p, 1, SIM_NO_ID, SIM_NO_ID, &busy), 0);
    assert_int_equal(sim_gpm_rates(&f->gpus[0], &g, NULL, 0, SIM_NO_ID, SIM_NO_ID, &idle), 0);
    struct sim_gpm_counters c0 = {0}, c1, c2;
    sim_gpm_advance(&c0, &idle, 0);
    c1 = c0;
    sim_gpm_advance(&c1, &busy, 4000);
    c2 = c1;
    sim_gpm_advance(&c2, &idle, 12000);
    assert_int_equal(c1.elapsed_ns, 4000000000ull);
    assert_int_equal(c1.active_ns[SIM_GPM_SM], 3200000000ull);
    near((double)c1.bytes[SIM_GPM_PCIE_RX], 4 * 0.10 * 0.3 * PCIE, "pcie rx bytes");

    double v = -1;
    static const struct {
        unsigned id;
        double want; /* over the busy 4 s */
    } t[] = {
        {NVML_GPM_METRIC_GRAPHICS_UTIL, 80},    {NVML_GPM_METRIC_SM_UTIL, 80},
        {NVML_GPM_METRIC_SM_OCCUPANCY, 40},     {NVML_GPM_METRIC_INTEGER_UTIL, 24},
        {NVML_GPM_METRIC_ANY_TENSOR_UTIL, 50},  {NVML_GPM_METRIC_DFMA_TENSOR_UTIL, 0},
        {NVML_GPM_METRIC_HMMA_TENSOR_UTIL, 50}, {NVML_GPM_METRIC_IMMA_TENSOR_UTIL, 0},
        {NVML_GPM_METRIC_DRAM_BW_UTIL, 30},     {NVML_GPM_METRIC_FP64_UTIL, 3},
        {NVML_GPM_METRIC_FP32_UTIL, 18},        {NVML_GPM_METRIC_FP16_UTIL, 6},
        {NVML_GPM_METRIC_NVDEC_0_UTIL, 0},      {NVML_GPM_METRIC_NVJPG_0_UTIL + 7, 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        if (sim_gpm_metric(t[i].id, &c0, &c1, &v) != NVML_SUCCESS)
            fail_msg("metric %u: not answered", t[i].id);
        near(v, t[i].want, "metric over the busy interval");
    }
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_PCIE_RX_PER_SEC, &c0, &c1, &v), 0);
    near(v, 0.10 * 0.3 * PCIE / MIB, "pcie rx MiB/s");
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_PCIE_TX_PER_SEC, &c0, &c1, &v), 0);
    near(v, 0.05 * 0.3 * PCIE / MIB, "pcie tx MiB/s");
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, &c0, &c1, &v), 0);
    near(v, 0.25 * 0.5 * 25e9 * 4 / MIB, "nvlink rx MiB/s");
    /* per link: the total over the 4 links; links 4 and up are not there */
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_NVLINK_L0_TX_PER_SEC + 6, &c0, &c1, &v), 0);
    near(v, 0.25 * 0.5 * 25e9 / MIB, "link 3 tx");
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_NVLINK_L0_RX_PER_SEC + 8, &c0, &c1, &v),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_NVLINK_L18_RX_PER_SEC, &c0, &c1, &v),
                     NVML_ERROR_NOT_SUPPORTED);
    /* the average over busy 4 s then idle 12 s */
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_SM_UTIL, &c0, &c2, &v), 0);
    near(v, 80.0 * 4 / 16, "average");
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_SM_UTIL, &c1, &c2, &v), 0);
    near(v, 0, "idle");
    /* what the simulator refuses */
    assert_int_equal(sim_gpm_metric(0, &c0, &c1, &v), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_MAX, &c0, &c1, &v),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(sim_gpm_metric(100 /* C2C */, &c0, &c1, &v), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_SM_UTIL, &c1, &c1, &v),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_SM_UTIL, &c2, &c1, &v),
                     NVML_ERROR_INVALID_ARGUMENT);
    /* a MIG instance's counters carry no link traffic */
    struct sim_gpm_counters m0 = {0}, m1;
    struct sim_gpm_rates mig = busy;
    mig.pcie = mig.nvlink = false;
    sim_gpm_advance(&m0, &mig, 0);
    m1 = m0;
    sim_gpm_advance(&m1, &mig, 1000);
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_PCIE_TX_PER_SEC, &m0, &m1, &v),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, &m0, &m1, &v),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(sim_gpm_metric(NVML_GPM_METRIC_SM_UTIL, &m0, &m1, &v), NVML_SUCCESS);
}

/* ---- the driver through NVML's ABI --------------------------------------------------------- */

/* A fresh state for the test fleet; no node root (the fleet's driver). */
static void use_fleet(void)
{
    static int n;
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/state-%d", tmp_root, ++n);
    setenv("GPUOP_SIM_FLEET", fleet_path, 1);
    setenv("GPUOP_SIM_STATE", dir, 1);
    unsetenv("GPUOP_SIM_ROOT");
    set_clock(T0);
}

static struct sim_store *store_open(struct sim_fleet **ret_fleet)
{
    struct err e = {0};
    assert_int_equal(sim_fleet_load(fleet_path, ret_fleet, &e), 0);
    struct sim_store *s = NULL;
    assert_int_equal(sim_store_open(*ret_fleet, getenv("GPUOP_SIM_STATE"), 0, &s, &e), 0);
    return s;
}

static nvmlDevice_t dev(unsigned i)
{
    nvmlDevice_t d = NULL;
    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(i, &d), NVML_SUCCESS);
    return d;
}

static nvmlGpmSample_t sample_new(void)
{
    nvmlGpmSample_t s = NULL;
    assert_int_equal(N.nvmlGpmSampleAlloc(&s), NVML_SUCCESS);
    assert_non_null(s);
    return s;
}

static nvmlReturn_t metrics(nvmlGpmSample_t a, nvmlGpmSample_t b, nvmlGpmMetricsGet_t *mg,
                            const unsigned *ids, unsigned n)
{
    memset(mg, 0, sizeof(*mg));
    mg->version = NVML_GPM_METRICS_GET_VERSION;
    mg->numMetrics = n;
    mg->sample1 = a;
    mg->sample2 = b;
    for (unsigned i = 0; i < n; i++)
        mg->metrics[i].metricId = ids[i];
    return N.nvmlGpmMetricsGet(mg);
}

/* One metric between a and b; fails unless NVML answers it. */
static double metric(nvmlGpmSample_t a, nvmlGpmSample_t b, unsigned id)
{
    static nvmlGpmMetricsGet_t mg;
    nvmlReturn_t r = metrics(a, b, &mg, &id, 1);
    if (r != NVML_SUCCESS || mg.metrics[0].nvmlReturn != NVML_SUCCESS)
        fail_msg("metric %u: call %d, metric %d", id, r, mg.metrics[0].nvmlReturn);
    return mg.metrics[0].value;
}

static void support_versions_errors(void **state)
{
    (void)state;
    use_fleet();
    nvmlGpmSample_t s = NULL;
    assert_int_equal(N.nvmlGpmSampleAlloc(&s), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);

    /* the support query: Hopper yes, Ampere NVML_ERROR_NOT_SUPPORTED; its version is plain 1 */
    nvmlGpmSupport_t sup = {.version = NVML_GPM_SUPPORT_VERSION};
    assert_int_equal(N.nvmlGpmQueryDeviceSupport(dev(0), &sup), NVML_SUCCESS);
    assert_int_equal(sup.isSupportedDevice, 1);
    sup = (nvmlGpmSupport_t){.version = NVML_GPM_SUPPORT_VERSION};
    assert_int_equal(N.nvmlGpmQueryDeviceSupport(dev(2), &sup), NVML_ERROR_NOT_SUPPORTED);
    nvmlDevice_t mig = NULL;
    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(dev(1), 0, &mig), NVML_SUCCESS);
    sup = (nvmlGpmSupport_t){.version = NVML_GPM_SUPPORT_VERSION};
    assert_int_equal(N.nvmlGpmQueryDeviceSupport(mig, &sup), NVML_SUCCESS);
    assert_int_equal(sup.isSupportedDevice, 1);
    sup = (nvmlGpmSupport_t){.version = 0};
    assert_int_equal(N.nvmlGpmQueryDeviceSupport(dev(0), &sup),
                     NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    sup = (nvmlGpmSupport_t){.version = (unsigned)sizeof(nvmlGpmSupport_t) | 1u << 24};
    assert_int_equal(N.nvmlGpmQueryDeviceSupport(dev(0), &sup),
                     NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    assert_int_equal(N.nvmlGpmQueryDeviceSupport(dev(0), NULL), NVML_ERROR_INVALID_ARGUMENT);

    /* samples: allocation, and what a sample call refuses */
    assert_int_equal(N.nvmlGpmSampleAlloc(NULL), NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpmSample_t a = sample_new(), b = sample_new();
    nvmlGpmSample_t bogus = (nvmlGpmSample_t)(uintptr_t)&sup;
    assert_int_equal(N.nvmlGpmSampleGet(dev(2), a), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), bogus), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlGpmMigSampleGet(dev(2), 1, a), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlGpmMigSampleGet(dev(0), 1, a), NVML_ERROR_NOT_FOUND); /* MIG off */
    assert_int_equal(N.nvmlGpmMigSampleGet(dev(1), 14, a), NVML_ERROR_NOT_FOUND);
    assert_int_equal(N.nvmlGpmMigSampleGet(dev(1), 99, a), NVML_ERROR_NOT_FOUND);
    assert_int_equal(N.nvmlGpmMigSampleGet(mig, 1, a), NVML_ERROR_NOT_SUPPORTED); /* a GPU's */

    /* the metrics call: its version, its size, samples never taken */
    nvmlGpmMetricsGet_t *mg = xcalloc(1, sizeof(*mg));
    unsigned sm = NVML_GPM_METRIC_SM_UTIL;
    assert_int_equal(N.nvmlGpmMetricsGet(NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(metrics(a, b, mg, &sm, 1), NVML_ERROR_INVALID_ARGUMENT); /* not taken */
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), a), NVML_SUCCESS);
    set_clock(T0 + 1);
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), b), NVML_SUCCESS);
    assert_int_equal(metrics(a, b, mg, &sm, 1), NVML_SUCCESS);
    mg->version = 2;
    assert_int_equal(N.nvmlGpmMetricsGet(mg), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    mg->version = NVML_GPM_METRICS_GET_VERSION;
    mg->numMetrics = NVML_GPM_METRIC_MAX + 1;
    assert_int_equal(N.nvmlGpmMetricsGet(mg), NVML_ERROR_INVALID_ARGUMENT);
    mg->numMetrics = 0;
    assert_int_equal(N.nvmlGpmMetricsGet(mg), NVML_SUCCESS);
    mg->sample2 = bogus;
    mg->numMetrics = 1;
    assert_int_equal(N.nvmlGpmMetricsGet(mg), NVML_ERROR_INVALID_ARGUMENT);
    free(mg);

    /* a lost GPU */
    char *argv[] = {(char *)gpuop_sim, "inject", "lost", "--gpu", "0", NULL};
    pid_t pid = fork();
    if (pid == 0) {
        execv(gpuop_sim, argv);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), a), NVML_ERROR_GPU_IS_LOST);
    sup = (nvmlGpmSupport_t){.version = NVML_GPM_SUPPORT_VERSION};
    assert_int_equal(N.nvmlGpmQueryDeviceSupport(dev(0), &sup), NVML_ERROR_GPU_IS_LOST);

    assert_int_equal(N.nvmlGpmSampleFree(a), NVML_SUCCESS);
    assert_int_equal(N.nvmlGpmSampleFree(a), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(N.nvmlGpmSampleFree(b), NVML_ERROR_UNINITIALIZED); /* gone with NVML */
}

static void two_samples(void **state)
{
    (void)state;
    use_fleet();
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *st _cleanup_(sim_store_freep) = store_open(&f);
    struct err e = {0};
    nvmlGpmSample_t s1 = sample_new(), s2 = sample_new(), s3 = sample_new(), s4 = sample_new(),
                    s5 = sample_new();

    /* idle at T0; a process with its own load runs when the next sample is taken, 4 s later */
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), s1), NVML_SUCCESS);
    struct sim_proc p = {.pid = (uint32_t)getpid(),
                         .gpu = 0,
                         .gi_id = SIM_NO_ID,
                         .ci_id = SIM_NO_ID,
                         .used_mib = 64,
                         .has_load = true,
                         .load = {800, 500, 300}};
    assert_int_equal(sim_procs_register(st, &p, 1, &e), 0);
    set_clock(T0 + 4);
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), s2), NVML_SUCCESS);

    static nvmlGpmMetricsGet_t mg;
    static const unsigned ids[] = {
        NVML_GPM_METRIC_SM_UTIL,
        NVML_GPM_METRIC_ANY_TENSOR_UTIL,
        NVML_GPM_METRIC_DRAM_BW_UTIL,
        NVML_GPM_METRIC_PCIE_RX_PER_SEC,
        NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
        NVML_GPM_METRIC_NVDEC_0_UTIL,
        200 /* not modelled */,
        0 /* not a metric */,
    };
    assert_int_equal(metrics(s1, s2, &mg, ids, ARRAY_SIZE(ids)), NVML_SUCCESS);
    static const struct {
        nvmlReturn_t r;
        double v;
    } want[] = {
        {NVML_SUCCESS, 80},
        {NVML_SUCCESS, 50},
        {NVML_SUCCESS, 30},
        {NVML_SUCCESS, 0.10 * 0.3 * 3938e6 * 16 / (1024.0 * 1024.0)},
        {NVML_SUCCESS, 0.25 * 0.5 * 25e9 * 4 / (1024.0 * 1024.0)},
        {NVML_SUCCESS, 0},
        {NVML_ERROR_NOT_SUPPORTED, 0},
        {NVML_ERROR_INVALID_ARGUMENT, 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
        assert_int_equal(mg.metrics[i].metricId, ids[i]);
        if (mg.metrics[i].nvmlReturn != want[i].r)
            fail_msg("metric %u: %d, want %d", ids[i], mg.metrics[i].nvmlReturn, want[i].r);
        near(mg.metrics[i].value, want[i].v, "two samples");
        assert_null(mg.metrics[i].metricInfo.shortName);
    }

    /* refused: swapped, the same sample twice, the same instant, two devices */
    unsigned sm = NVML_GPM_METRIC_SM_UTIL;
    assert_int_equal(metrics(s2, s1, &mg, &sm, 1), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(metrics(s2, s2, &mg, &sm, 1), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), s3), NVML_SUCCESS); /* still T0 + 4 */
    assert_int_equal(metrics(s2, s3, &mg, &sm, 1), NVML_ERROR_INVALID_ARGUMENT);
    set_clock(T0 + 6);
    assert_int_equal(N.nvmlGpmSampleGet(dev(1), s4), NVML_SUCCESS);
    assert_int_equal(metrics(s2, s4, &mg, &sm, 1), NVML_ERROR_INVALID_ARGUMENT);

    /* the process ends: from the next sample on, the GPU idles; over both, the average */
    assert_int_equal(sim_procs_unregister(st, p.pid, &e), 0);
    set_clock(T0 + 12);
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), s5), NVML_SUCCESS);
    near(metric(s2, s5, NVML_GPM_METRIC_SM_UTIL), 0, "after the process");
    near(metric(s1, s5, NVML_GPM_METRIC_SM_UTIL), 80.0 * 4 / 12, "average");
    near(metric(s3, s5, NVML_GPM_METRIC_PCIE_RX_PER_SEC), 0, "pcie after");
    N.nvmlShutdown();
}

static void mig_samples(void **state)
{
    (void)state;
    use_fleet();
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *st _cleanup_(sim_store_freep) = store_open(&f);
    struct err e = {0};
    /* MIG device 0 of GPU 1 is the 3g.40gb one (GI id order: 3g is 1 or 2, 1g is 7..13) */
    nvmlDevice_t m3 = NULL, m1 = NULL;
    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(dev(1), 0, &m3), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(dev(1), 1, &m1), NVML_SUCCESS);
    unsigned gi3 = 0, ci3 = 0, gi1 = 0;
    assert_int_equal(N.nvmlDeviceGetGpuInstanceId(m3, &gi3), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetComputeInstanceId(m3, &ci3), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetGpuInstanceId(m1, &gi1), NVML_SUCCESS);
    assert_true(gi3 < gi1);

    nvmlGpmSample_t g3a = sample_new(), g3b = sample_new(), g1a = sample_new(), g1b = sample_new(),
                    dva = sample_new(), dvb = sample_new(), gpa = sample_new(), gpb = sample_new();
    assert_int_equal(N.nvmlGpmMigSampleGet(dev(1), gi3, g3a), NVML_SUCCESS);
    assert_int_equal(N.nvmlGpmMigSampleGet(dev(1), gi1, g1a), NVML_SUCCESS);
    assert_int_equal(N.nvmlGpmSampleGet(m3, dva), NVML_SUCCESS); /* a MIG device handle */
    assert_int_equal(N.nvmlGpmSampleGet(dev(1), gpa), NVML_SUCCESS);
    struct sim_proc p = {.pid = (uint32_t)getpid(),
                         .gpu = 1,
                         .gi_id = gi3,
                         .ci_id = ci3,
                         .used_mib = 64,
                         .has_load = true,
                         .load = {1000, 0, 500}};
    assert_int_equal(sim_procs_register(st, &p, 1, &e), 0);
    set_clock(T0 + 5);
    assert_int_equal(N.nvmlGpmMigSampleGet(dev(1), gi3, g3b), NVML_SUCCESS);
    assert_int_equal(N.nvmlGpmMigSampleGet(dev(1), gi1, g1b), NVML_SUCCESS);
    assert_int_equal(N.nvmlGpmSampleGet(m3, dvb), NVML_SUCCESS);
    assert_int_equal(N.nvmlGpmSampleGet(dev(1), gpb), NVML_SUCCESS);
    assert_int_equal(sim_procs_unregister(st, p.pid, &e), 0);

    near(metric(g3a, g3b, NVML_GPM_METRIC_SM_UTIL), 100, "3g instance");
    near(metric(g3a, g3b, NVML_GPM_METRIC_DRAM_BW_UTIL), 50, "3g instance dram");
    near(metric(dva, dvb, NVML_GPM_METRIC_SM_UTIL), 100, "3g MIG device");
    near(metric(g1a, g1b, NVML_GPM_METRIC_SM_UTIL), 0, "1g instance");
    near(metric(gpa, gpb, NVML_GPM_METRIC_SM_UTIL), 100.0 * 60 / 132, "the GPU");
    near(metric(gpa, gpb, NVML_GPM_METRIC_DRAM_BW_UTIL), 50.0 * 4 / 8, "the GPU's dram");
    static nvmlGpmMetricsGet_t mg;
    static const unsigned links[] = {NVML_GPM_METRIC_PCIE_TX_PER_SEC,
                                     NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC};
    assert_int_equal(metrics(g3a, g3b, &mg, links, 2), NVML_SUCCESS);
    assert_int_equal(mg.metrics[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(mg.metrics[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    unsigned sm = NVML_GPM_METRIC_SM_UTIL;
    /* two instances, an instance and its GPU, an instance and its MIG device: not one device */
    assert_int_equal(metrics(g3a, g1b, &mg, &sm, 1), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(metrics(gpa, g3b, &mg, &sm, 1), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(metrics(g3a, dvb, &mg, &sm, 1), NVML_ERROR_INVALID_ARGUMENT);

    /* the 1g instance made anew in its place as 1g.10gb+me: the same id, its counters restarted:
     * a sample from before is stale */
    nvmlGpuInstance_t gi = NULL;
    nvmlGpuInstanceInfo_t info;
    assert_int_equal(N.nvmlDeviceGetGpuInstanceById(dev(1), gi1, &gi), NVML_SUCCESS);
    assert_int_equal(N.nvmlGpuInstanceGetInfo(gi, &info), NVML_SUCCESS);
    nvmlComputeInstance_t ci = NULL;
    unsigned ci_id = 0;
    assert_int_equal(N.nvmlDeviceGetComputeInstanceId(m1, &ci_id), NVML_SUCCESS);
    assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceById(gi, ci_id, &ci), NVML_SUCCESS);
    assert_int_equal(N.nvmlComputeInstanceDestroy(ci), NVML_SUCCESS);
    assert_int_equal(N.nvmlGpuInstanceDestroy(gi), NVML_SUCCESS);
    nvmlGpmSample_t gone = sample_new();
    assert_int_equal(N.nvmlGpmMigSampleGet(dev(1), gi1, gone), NVML_ERROR_NOT_FOUND);
    nvmlGpuInstance_t again = NULL;
    assert_int_equal(N.nvmlDeviceCreateGpuInstanceWithPlacement(dev(1), 20 /* 1g.10gb+me */,
                                                                &info.placement, &again),
                     NVML_SUCCESS);
    nvmlGpuInstanceInfo_t info2;
    assert_int_equal(N.nvmlGpuInstanceGetInfo(again, &info2), NVML_SUCCESS);
    assert_int_equal(info2.id, gi1);
    set_clock(T0 + 9);
    assert_int_equal(N.nvmlGpmMigSampleGet(dev(1), gi1, gone), NVML_SUCCESS);
    assert_int_equal(metrics(g1b, gone, &mg, &sm, 1), NVML_ERROR_INVALID_ARGUMENT);
    N.nvmlShutdown();
}

/* Runs a program (gpuop-sim) with its stderr into errb (NULL: inherited); its exit status. */
static int run_status(char *const argv[], char *errb, size_t n)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        if (errb)
            dup2(fds[1], 2);
        close(fds[0]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t r;
    char junk[256];
    while ((r = read(fds[0], errb && len + 1 < n ? errb + len : junk,
                     errb && len + 1 < n ? n - 1 - len : sizeof(junk))) > 0)
        if (errb && len + 1 < n)
            len += (size_t)r;
    close(fds[0]);
    if (errb)
        errb[len] = '\0';
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs a program (gpuop-sim); fails unless it exits 0. */
static void run(char *const argv[])
{
    int st = run_status(argv, NULL, 0);
    if (st != 0)
        fail_msg("%s %s: status %d", argv[0], argv[1], st);
}

/* set-load's bad input: exit 2, a message naming the flag, nothing written. */
static void set_load_errors(void **state)
{
    (void)state;
    use_fleet();
    static const struct {
        const char *args[8];
        const char *msg;
    } t[] = {
        {{"set-load", "--gpu", "0", "--sm", "2"}, "--sm \"2\": not a ratio"},
        {{"set-load", "--gpu", "0", "--dram", "0.5%"}, "--dram \"0.5%\""},
        {{"set-load", "--gpu", "0", "--clear", "--sm", "1"}, "--clear takes no --sm"},
        {{"set-load", "--sm", "0.5"}, "give one of --gpu N and --pid P"},
        {{"set-load", "--gpu", "0", "--pid", "1", "--sm", "0.5"}, "give one of --gpu"},
        {{"set-load", "--gpu", "0"}, "give --sm, --tensor or --dram"},
        {{"set-load", "--gpu", "9", "--sm", "0.5"}, "--gpu 9: the fleet"},
        {{"set-load", "--pid", "1", "--sm", "0.5"}, "process 1 holds no simulated GPU"},
        {{"set-load", "--gpu", "0", "--code", "48", "--sm", "0.5"}, "belong to inject"},
        {{"set-load", "now", "--gpu", "0"}, "unexpected argument \"now\""},
        {{"inject", "lost", "--gpu", "0", "--sm", "1"}, "belong to set-load"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        char *argv[10] = {(char *)gpuop_sim};
        for (size_t k = 0; k < 8 && t[i].args[k]; k++)
            argv[k + 1] = (char *)t[i].args[k];
        char err[1024];
        int st = run_status(argv, err, sizeof(err));
        if (st != 2 || !strstr(err, t[i].msg))
            fail_msg("case %zu: status %d, \"%s\"; want 2, \"%s\"", i, st, err, t[i].msg);
    }
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *s _cleanup_(sim_store_freep) = store_open(&f);
    for (size_t i = 0; i < f->n_gpus; i++)
        assert_false(sim_store_state(s)->gpus[i].has_load);
}

/* Loads are kept in state.json (thousandths, as integers); a bad one is an error naming the field,
 * and the last good state stays. */
static void state_loads(void **state)
{
    (void)state;
    use_fleet();
    char *argv[] = {(char *)gpuop_sim, "set-load", "--gpu", "1", "--tensor", "0.375", NULL};
    run(argv);
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *s _cleanup_(sim_store_freep) = store_open(&f);
    const struct sim_gpu_state *g = &sim_store_state(s)->gpus[1];
    assert_true(g->has_load && g->load.sm == 0 && g->load.tensor == 375 && g->load.dram == 0);
    assert_false(sim_store_state(s)->gpus[0].has_load);
    struct err e = {0};
    char *text = NULL;
    size_t len = 0;
    char file[512];
    snprintf(file, sizeof(file), "%s/state.json", getenv("GPUOP_SIM_STATE"));
    assert_int_equal(file_read_all(file, 1 << 20, &text, &len, &e), 0);
    const char *key = "\"tensor_milli\": ";
    char *at = strstr(text, "\"tensor_milli\": 375");
    assert_non_null(at);
    at += strlen(key);
    char *bad = xasprintf("%.*s9999%s", (int)(at - text), text, at + 3); /* above 1000 */
    assert_int_equal(file_write_atomic(file, bad, strlen(bad), 0644, &e), 0);
    free(bad);
    free(text);
    assert_true(sim_store_refresh(s, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "gpus[1].load"));
    assert_non_null(strstr(err_msg(&e), "tensor_milli"));
    assert_int_equal(sim_store_state(s)->gpus[1].load.tensor, 375); /* the last good state */
    char *clear[] = {(char *)gpuop_sim, "reset", NULL};
    run(clear);
    assert_int_equal(sim_store_refresh(s, &e), 0);
    assert_false(sim_store_state(s)->gpus[1].has_load);
}

/* The simulated CUDA sample on GPU 0 (without a load of its own): the fleet's workload, then
 * gpuop-sim set-load for the GPU, then for the process; after it ends, idle. */
static void cuda_sample_load(void **state)
{
    (void)state;
    use_fleet();
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        setenv("NVIDIA_VISIBLE_DEVICES", "0", 1);
        setenv("SIM_WORKLOAD_SECONDS", "60", 1);
        unsetenv("SIM_WORKLOAD_LOAD");
        setenv("GPUOP_NVML_LIBRARY", lib_path, 1);
        execl(sim_image, sim_image, "cuda-sample", (char *)NULL);
        _exit(127);
    }
    sample_pid = pid;
    close(fds[1]);
    FILE *out = fdopen(fds[0], "r");
    char line[256];
    bool running = false;
    while (!running && fgets(line, sizeof(line), out))
        running = strstr(line, "CUDA kernel launch") != NULL;
    fclose(out);
    assert_true(running);

    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    nvmlGpmSample_t s[4] = {sample_new(), sample_new(), sample_new(), sample_new()};
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), s[0]), NVML_SUCCESS); /* starts the count */
    set_clock(T0 + 10);
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), s[1]), NVML_SUCCESS);
    near(metric(s[0], s[1], NVML_GPM_METRIC_SM_UTIL), 70, "the fleet's workload");
    near(metric(s[0], s[1], NVML_GPM_METRIC_ANY_TENSOR_UTIL), 20, "the fleet's tensor");

    char *set_gpu[] = {(char *)gpuop_sim, "set-load", "--gpu", "0", "--sm", "0.25", NULL};
    run(set_gpu);
    set_clock(T0 + 20);
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), s[2]), NVML_SUCCESS);
    near(metric(s[1], s[2], NVML_GPM_METRIC_SM_UTIL), 25, "set-load --gpu");
    near(metric(s[1], s[2], NVML_GPM_METRIC_ANY_TENSOR_UTIL), 0, "set-load --gpu tensor");

    char pid_s[16];
    snprintf(pid_s, sizeof(pid_s), "%d", (int)pid);
    char *set_pid[] = {(char *)gpuop_sim, "set-load", "--pid",  pid_s, "--sm", "0.9",
                       "--tensor",        "0.6",      "--dram", "0.1", NULL};
    run(set_pid);
    set_clock(T0 + 30);
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), s[3]), NVML_SUCCESS);
    near(metric(s[2], s[3], NVML_GPM_METRIC_SM_UTIL), 90, "set-load --pid");
    near(metric(s[2], s[3], NVML_GPM_METRIC_ANY_TENSOR_UTIL), 60, "set-load --pid tensor");

    kill(pid, SIGTERM);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    sample_pid = -1;
    set_clock(T0 + 40);
    assert_int_equal(N.nvmlGpmSampleGet(dev(0), s[0]), NVML_SUCCESS);
    near(metric(s[3], s[0], NVML_GPM_METRIC_SM_UTIL), 0, "after the sample ended");
    N.nvmlShutdown();
}

static int rm_cb(const char *p, const struct stat *sb, int type, struct FTW *f)
{
    (void)sb;
    (void)type;
    (void)f;
    return remove(p);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s LIBNVIDIA_ML GPUOP_SIM SIM_IMAGE\n", argv[0]);
        return 2;
    }
    lib_path = argv[1];
    gpuop_sim = argv[2];
    sim_image = argv[3];
    void *lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", lib_path, dlerror());
        return 1;
    }
#define LOAD(f)                                                    \
    if (!(N.f = (__typeof__(N.f))dlsym(lib, #f))) {                \
        fprintf(stderr, "%s: %s is not exported\n", lib_path, #f); \
        return 1;                                                  \
    }
    NVML_FUNCS(LOAD)
    snprintf(tmp_root, sizeof(tmp_root), "%s/gpuop-test-sim-gpm-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(fleet_path, sizeof(fleet_path), "%s/gpm.yaml", tmp_root);
    struct err e = {0};
    if (file_write_atomic(fleet_path, fleet_text, strlen(fleet_text), 0644, &e) < 0) {
        fprintf(stderr, "%s\n", err_msg(&e));
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ratios),
        cmocka_unit_test(loads),
        cmocka_unit_test(fleet_workload),
        cmocka_unit_test(activity),
        cmocka_unit_test(counters_and_metrics),
        cmocka_unit_test(support_versions_errors),
        cmocka_unit_test(two_samples),
        cmocka_unit_test(mig_samples),
        cmocka_unit_test(state_loads),
        cmocka_unit_test(set_load_errors),
        cmocka_unit_test(cuda_sample_load),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    if (sample_pid > 0) {
        kill(sample_pid, SIGKILL);
        waitpid(sample_pid, NULL, 0);
    }
    nftw(tmp_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return r;
}
