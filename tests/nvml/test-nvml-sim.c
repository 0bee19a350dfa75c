/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU model against the simulated driver (build/libnvidia-ml.so.1), checked against the
 * fleet file it reads. One scenario per process, since the driver keeps process-wide state:
 *   test-nvml-sim <libnvidia-ml.so.1> <gpuop> <fleet.yaml> fleet|lost|mig
 * fleet: every GPU's identity, memory, power, NVLinks and PCIe levels as the fleet says,
 *        telemetry, and an injected XID through the event API;
 * lost:  `gpuop-sim inject lost` marks one GPU lost while the others read;
 * mig:   MIG devices and their canonical names, and the MIG management API;
 * gpm:   the profiling metrics of GPUs and MIG instances running the simulated CUDA sample
 *        (build/sim-image cuda-sample, beside gpuop) under a frozen clock.
 * fleet also checks GPU Performance Monitoring: supported on Hopper and newer only, idle values.
 * Fails when the simulator or the fleet is missing: both are part of this project, not peers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "gpu.h"
#include "nvml-abi.h"
#include "yamlcfg.h"

#define MIB (1024ull * 1024ull)

static const char *sim_lib, *gpuop, *fleet_path;
static char state_dir[] = "/tmp/gpuop-nvml-sim-XXXXXX";
static json_t *fleet;

/* ---- the fleet file, read independently of the simulator ---------------------------------- */

/* The gpus: entry GPU `index` comes from (entries are replicated `count` times). */
static json_t *fleet_gpu(size_t index)
{
    json_t *gpus = json_object_get(fleet, "gpus");
    size_t at = 0, i;
    json_t *g;
    json_array_foreach (gpus, i, g) {
        json_t *c = json_object_get(g, "count");
        size_t n = json_is_integer(c) ? (size_t)json_integer_value(c) : 1;
        if (index < at + n)
            return g;
        at += n;
    }
    return NULL;
}

static size_t fleet_gpu_count(void)
{
    size_t n = 0;
    while (fleet_gpu(n))
        n++;
    return n;
}

static long long fleet_int(json_t *g, const char *key)
{
    json_t *v = json_object_get(g, key);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static const char *fleet_str(json_t *g, const char *key)
{
    json_t *v = json_object_get(g, key);
    assert_true(json_is_string(v));
    return json_string_value(v);
}

/* topology.<key>: [[a, b, value], ...]; returns the value for (a, b) either way round. */
static json_t *fleet_pair(const char *key, size_t a, size_t b)
{
    json_t *list = json_object_get(json_object_get(fleet, "topology"), key);
    size_t i;
    json_t *t;
    json_array_foreach (list, i, t) {
        size_t x = (size_t)json_integer_value(json_array_get(t, 0));
        size_t y = (size_t)json_integer_value(json_array_get(t, 1));
        if ((x == a && y == b) || (x == b && y == a))
            return json_array_get(t, 2);
    }
    return NULL;
}

static unsigned level_number(const char *s)
{
    static const struct {
        const char *name;
        unsigned level;
    } t[] = {
        {"internal", NVML_TOPOLOGY_INTERNAL}, {"single", NVML_TOPOLOGY_SINGLE},
        {"multiple", NVML_TOPOLOGY_MULTIPLE}, {"hostbridge", NVML_TOPOLOGY_HOSTBRIDGE},
        {"node", NVML_TOPOLOGY_NODE},         {"system", NVML_TOPOLOGY_SYSTEM},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++)
        if (strcmp(s, t[i].name) == 0)
            return t[i].level;
    fail_msg("unknown topology level \"%s\" in the fleet", s);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static void sim_cli(const char *args)
{
    _cleanup_free_ char *cmd = xasprintf("'%s-sim' %s", gpuop, args);
    int r = system(cmd);
    if (r != 0)
        fail_msg("`%s` failed (status %d)", cmd, r);
}

static struct gpu_inventory *inventory(struct gpu_lib *lib)
{
    struct err e = {0};
    struct gpu_inventory *inv = NULL;
    if (gpu_inventory_read(lib, &inv, &e) < 0)
        fail_msg("gpu_inventory_read: %s", err_msg(&e));
    return inv;
}

static struct gpu_lib *open_sim(void)
{
    struct err e = {0};
    struct gpu_lib *lib = NULL;
    if (gpu_lib_open(sim_lib, &lib, &e) < 0)
        fail_msg("gpu_lib_open: %s", err_msg(&e));
    return lib;
}

/* ---- fleet -------------------------------------------------------------------------------- */

static void check_gpu(const struct gpu_inventory *inv, size_t i)
{
    const struct gpu_device *g = &inv->gpus[i];
    json_t *f = fleet_gpu(i);
    assert_non_null(f);
    assert_false(g->lost);
    assert_int_equal(g->index, i);
    assert_string_equal(g->name, fleet_str(f, "model"));
    assert_true(str_has_prefix(g->uuid, "GPU-"));
    assert_int_equal(g->memory_total_bytes, (uint64_t)fleet_int(f, "memory_mib") * MIB);
    assert_int_equal(g->power_limit_mw, (unsigned)fleet_int(f, "power_limit_w") * 1000);
    assert_int_equal(g->max_sm_clock_mhz, (unsigned)fleet_int(f, "max_sm_clock_mhz"));
    char cc[16];
    snprintf(cc, sizeof(cc), "%d.%d", g->cc_major, g->cc_minor);
    assert_string_equal(cc, fleet_str(f, "compute_capability"));
    assert_string_equal(gpu_arch_name(g->arch), fleet_str(f, "architecture"));
    assert_int_equal(g->pci_device_id, (uint32_t)fleet_int(f, "pci_device_id"));
    assert_int_equal(strlen(g->bus_id), 16); /* "00000000:18:00.0" */
    json_t *mig = json_object_get(f, "mig_capable");
    assert_int_equal(g->mig_capable, json_is_true(mig));
    assert_ptr_equal(gpu_inventory_find(inv, g->uuid, NULL), g);
    for (size_t k = 0; k < i; k++) {
        assert_string_not_equal(g->uuid, inv->gpus[k].uuid);
        assert_string_not_equal(g->bus_id, inv->gpus[k].bus_id);
    }
}

static void check_topology(const struct gpu_inventory *inv)
{
    size_t n = inv->n_gpus;
    unsigned links_seen = 0;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            json_t *links = a == b ? NULL : fleet_pair("nvlinks", a, b);
            json_t *level = a == b ? NULL : fleet_pair("pcie", a, b);
            unsigned want_links = links ? (unsigned)json_integer_value(links) : 0;
            unsigned want_level = a == b  ? NVML_TOPOLOGY_INTERNAL
                                  : level ? level_number(json_string_value(level))
                                          : NVML_TOPOLOGY_SYSTEM;
            if (inv->nvlinks[a * n + b] != want_links)
                fail_msg("nvlinks %zu-%zu: %u, fleet says %u", a, b, inv->nvlinks[a * n + b],
                         want_links);
            if (inv->topo_level[a * n + b] != want_level)
                fail_msg("topology %zu-%zu: %u, fleet says %u", a, b, inv->topo_level[a * n + b],
                         want_level);
            links_seen += want_links;
        }
    (void)links_seen;
}

static void check_sample(struct gpu_lib *lib, const struct gpu_device *g)
{
    struct err e = {0};
    struct gpu_sample s;
    assert_int_equal(gpu_sample_read(lib, g->index, &s, &e), 0);
    assert_false(s.lost);
    uint32_t want = GPU_SAMPLE_TEMP | GPU_SAMPLE_POWER | GPU_SAMPLE_ENERGY | GPU_SAMPLE_UTIL |
                    GPU_SAMPLE_CLOCKS | GPU_SAMPLE_MEMORY;
    if ((s.valid & want) != want)
        fail_msg("gpu %u: sample valid 0x%x lacks 0x%x", g->index, s.valid, want & ~s.valid);
    assert_in_range(s.temp_c, 5, 110);
    assert_in_range(s.power_mw, 1, g->power_limit_mw + g->power_limit_mw / 2);
    assert_true(s.energy_mj > 0);
    assert_in_range(s.util_gpu, 0, 100);
    assert_in_range(s.sm_clock_mhz, 1, g->max_sm_clock_mhz);
    assert_int_equal(s.fb_total_mib, g->memory_total_bytes / MIB);
    assert_true(s.fb_used_mib <= s.fb_total_mib);
}

static void check_events(struct gpu_lib *lib, const struct gpu_inventory *inv)
{
    struct err e = {0};
    _cleanup_(gpu_events_freep) struct gpu_events *ev = NULL;
    if (gpu_events_open(lib, nvmlEventTypeXidCriticalError, &ev, &e) < 0)
        fail_msg("gpu_events_open: %s", err_msg(&e));
    struct gpu_event got;
    assert_int_equal(gpu_events_wait(ev, 0, &got, &e), -ETIMEDOUT);
    unsigned gpu = inv->n_gpus > 3 ? 3 : 0;
    _cleanup_free_ char *args = xasprintf("inject xid --gpu %u --code 79", gpu);
    sim_cli(args);
    int r = gpu_events_wait(ev, 5000, &got, &e);
    if (r < 0)
        fail_msg("gpu_events_wait: %d %s", r, err_msg(&e));
    assert_int_equal(got.type, nvmlEventTypeXidCriticalError);
    assert_int_equal(got.data, 79);
    assert_int_equal(got.gpu_index, gpu);
    assert_string_equal(got.uuid, inv->gpus[gpu].uuid);
}

/* ---- GPU Performance Monitoring ------------------------------------------------------------ */

#define CLOCK_T0 1796000000ull /* the simulated clock, unix seconds */

static void set_clock(uint64_t s)
{
    char v[32];
    snprintf(v, sizeof(v), "%llu", (unsigned long long)s);
    setenv("GPUOP_SIM_CLOCK", v, 1);
}

/* What the fleet file says: GPM is Hopper's and later's (NVML: "Hopper or newer"). */
static bool fleet_gpm(size_t i)
{
    const char *arch = fleet_str(fleet_gpu(i), "architecture");
    return strcmp(arch, "hopper") == 0 || strcmp(arch, "blackwell") == 0;
}

static unsigned links_of(const struct gpu_inventory *inv, size_t i)
{
    unsigned n = 0;
    for (size_t k = 0; k < inv->n_gpus; k++)
        n += inv->nvlinks[i * inv->n_gpus + k];
    return n;
}

static void gpm_pair(struct gpu_gpm_sampler *s, uint64_t t, struct gpu_gpm_metrics *ret)
{
    struct err e = {0};
    set_clock(t);
    if (gpu_gpm_sample(s, t * 1000, &e) < 0)
        fail_msg("gpu_gpm_sample at %llu: %s", (unsigned long long)t, err_msg(&e));
    if (gpu_gpm_metrics(s, ret, &e) < 0)
        fail_msg("gpu_gpm_metrics at %llu: %s", (unsigned long long)t, err_msg(&e));
}

static void expect(const struct gpu_prof *p, enum gpu_prof_field f, double want, const char *what)
{
    if (!(p->valid & (1u << f)))
        fail_msg("%s: %s not valid (valid 0x%x)", what, gpu_prof_name(f), p->valid);
    if (fabs(p->value[f] - want) > 1e-6 * fmax(1.0, fabs(want)))
        fail_msg("%s: %s = %.9g, want %.9g", what, gpu_prof_name(f), p->value[f], want);
}

/* Support as the architecture says; on a supported GPU with nothing running, every activity is
 * a valid 0, PCIe traffic too, NVLink traffic where the GPU has links. */
static void check_gpm(struct gpu_lib *lib, const struct gpu_inventory *inv, size_t i)
{
    struct err e = {0};
    const struct gpu_device *g = &inv->gpus[i];
    int sup = gpu_gpm_support(lib, g->index, &e);
    struct gpu_gpm_sampler *s = NULL;
    int r = gpu_gpm_sampler_new(lib, g, 0, &s, &e);
    if (!fleet_gpm(i)) {
        assert_int_equal(sup, 0);
        assert_int_equal(r, GPU_ERR_NOT_SUPPORTED);
        assert_null(s);
        assert_non_null(strstr(err_msg(&e), gpu_arch_name(g->arch)));
        return;
    }
    assert_int_equal(sup, 1);
    if (r < 0)
        fail_msg("gpu %zu: gpu_gpm_sampler_new: %s", i, err_msg(&e));
    struct gpu_gpm_metrics m;
    set_clock(CLOCK_T0);
    assert_int_equal(gpu_gpm_sample(s, CLOCK_T0 * 1000, &e), 0);
    gpm_pair(s, CLOCK_T0 + 5, &m);
    assert_int_equal(m.interval_ms, 5000);
    uint32_t want = (1u << GPU_PROF_COUNT) - 1;
    if (!links_of(inv, i))
        want &= ~(1u << GPU_PROF_NVLINK_TX_BYTES | 1u << GPU_PROF_NVLINK_RX_BYTES);
    if (m.gpu.valid != want)
        fail_msg("gpu %zu: valid 0x%x, want 0x%x", i, m.gpu.valid, want);
    for (unsigned f = 0; f < GPU_PROF_COUNT; f++)
        if (want & (1u << f))
            assert_true(m.gpu.value[f] == 0);
    unsetenv("GPUOP_SIM_CLOCK");
    gpu_gpm_sampler_free(s);
}

static void scenario_fleet(void **state)
{
    (void)state;
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = open_sim();
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = inventory(lib);
    assert_string_equal(inv->driver_version, fleet_str(fleet, "driver_version"));
    assert_int_equal(inv->cuda_driver_version, fleet_int(fleet, "cuda_driver_version"));
    assert_int_equal(inv->n_gpus, fleet_gpu_count());
    for (size_t i = 0; i < inv->n_gpus; i++)
        check_gpu(inv, i);
    check_topology(inv);
    for (size_t i = 0; i < inv->n_gpus; i++)
        check_sample(lib, &inv->gpus[i]);
    check_events(lib, inv);
    for (size_t i = 0; i < inv->n_gpus; i++)
        check_gpm(lib, inv, i);
}

/* ---- lost --------------------------------------------------------------------------------- */

static void scenario_lost(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = open_sim();
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *before = inventory(lib);
    assert_true(before->n_gpus >= 2);
    unsigned lost = before->n_gpus > 2 ? 2 : 1;
    for (size_t i = 0; i < before->n_gpus; i++)
        assert_false(before->gpus[i].lost);

    _cleanup_free_ char *args = xasprintf("inject lost --gpu %u", lost);
    sim_cli(args);

    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = inventory(lib);
    assert_int_equal(inv->n_gpus, before->n_gpus);
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *g = &inv->gpus[i];
        if (i == lost) {
            assert_true(g->lost);
            continue;
        }
        assert_false(g->lost);
        assert_string_equal(g->uuid, before->gpus[i].uuid);
        assert_string_equal(g->name, before->gpus[i].name);
        assert_int_equal(g->memory_total_bytes, before->gpus[i].memory_total_bytes);
        /* Links to the lost GPU are unknown now; between healthy GPUs they stay. */
        for (size_t k = 0; k < inv->n_gpus; k++)
            if (k != lost && k != i)
                assert_int_equal(inv->nvlinks[i * inv->n_gpus + k],
                                 before->nvlinks[i * inv->n_gpus + k]);
    }
    struct gpu_sample s;
    assert_int_equal(gpu_sample_read(lib, lost, &s, &e), 0);
    assert_true(s.lost);
    assert_int_equal(s.valid, 0);
    assert_int_equal(gpu_sample_read(lib, 0, &s, &e), 0);
    assert_false(s.lost);
    assert_true(s.valid & GPU_SAMPLE_POWER);
}

/* ---- MIG ---------------------------------------------------------------------------------- */

/* The first GPU the fleet lays out with MIG instances. */
static size_t mig_gpu_index(json_t **ret_instances)
{
    for (size_t i = 0; fleet_gpu(i); i++) {
        json_t *mig = json_object_get(fleet_gpu(i), "mig");
        json_t *inst = json_object_get(mig, "instances");
        if (json_is_true(json_object_get(mig, "enabled")) && json_array_size(inst) > 0) {
            *ret_instances = inst;
            return i;
        }
    }
    fail_msg("the fleet lays out no MIG instances");
    return 0;
}

static bool has_profile(const struct gpu_device *g, const char *name)
{
    for (size_t k = 0; k < g->n_mig; k++)
        if (strcmp(g->mig[k].profile, name) == 0)
            return true;
    return false;
}

static void check_mig_layout(const struct gpu_inventory *inv, size_t gi, json_t *instances)
{
    const struct gpu_device *g = &inv->gpus[gi];
    assert_true(g->mig_capable);
    assert_true(g->mig_enabled);
    assert_int_equal(g->n_mig, json_array_size(instances));
    size_t i;
    json_t *want;
    json_array_foreach (instances, i, want) {
        if (!has_profile(g, json_string_value(want)))
            fail_msg("GPU %zu: no MIG device of profile %s", gi, json_string_value(want));
    }
    for (size_t k = 0; k < g->n_mig; k++) {
        const struct gpu_mig_device *m = &g->mig[k];
        const struct gpu_mig_device *found = NULL;
        assert_true(str_has_prefix(m->uuid, "MIG-"));
        assert_ptr_equal(gpu_inventory_find(inv, m->uuid, &found), g);
        assert_ptr_equal(found, m);
        /* "3g.40gb": the leading number is the GI's compute slices. */
        assert_int_equal(m->gi_slices, (unsigned)(m->profile[0] - '0'));
        assert_int_equal(m->ci_slices, m->gi_slices);
        assert_true(m->multiprocessors > 0);
        assert_true(m->memory_mib > 0);
        assert_true(m->gi_profile_id != UINT32_MAX);
        assert_true(m->gi_placement_size > 0);
    }
}

static const struct gpu_mig_profile *find_profile(const struct gpu_mig_profile *p, size_t n,
                                                  const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(p[i].name, name) == 0)
            return &p[i];
    fail_msg("no MIG profile %s", name);
    return NULL;
}

static void check_mig_manage(struct gpu_lib *lib, unsigned gpu)
{
    struct err e = {0};
    _cleanup_free_ struct gpu_mig_profile *p = NULL;
    size_t n = 0;
    if (gpu_mig_profiles(lib, gpu, &p, &n, &e) < 0)
        fail_msg("gpu_mig_profiles: %s", err_msg(&e));
    const struct gpu_mig_profile *one = find_profile(p, n, "1g.10gb");
    assert_int_equal(one->id, 19);
    assert_int_equal(one->index, NVML_GPU_INSTANCE_PROFILE_1_SLICE);
    assert_int_equal(one->slices, 1);
    assert_int_equal(one->max_count, 7);
    assert_int_equal(one->n_placements, 7);
    const struct gpu_mig_profile *three = find_profile(p, n, "3g.40gb");
    assert_int_equal(three->id, 9);
    assert_int_equal(three->max_count, 2);
    assert_int_equal(find_profile(p, n, "7g.80gb")->id, 0);
    find_profile(p, n, "1g.10gb+me");

    if (gpu_mig_destroy_all(lib, gpu, &e) < 0)
        fail_msg("gpu_mig_destroy_all: %s", err_msg(&e));
    unsigned gi_id = 99, ci_id = 99;
    if (gpu_mig_create(lib, gpu, "3g.40gb", &gi_id, &ci_id, &e) < 0)
        fail_msg("gpu_mig_create 3g.40gb: %s", err_msg(&e));
    assert_true(gi_id != 99 && ci_id != 99);
    if (gpu_mig_create(lib, gpu, "1c.3g.40gb", NULL, NULL, &e) < 0)
        fail_msg("gpu_mig_create 1c.3g.40gb: %s", err_msg(&e));
    assert_true(gpu_mig_create(lib, gpu, "3g.40gb", NULL, NULL, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "nvmlDeviceCreateGpuInstance"));
    assert_int_equal(gpu_mig_create(lib, gpu, "5g.50gb", NULL, NULL, &e), -ENOENT);
    assert_non_null(strstr(err_msg(&e), "unknown MIG profile \"5g.50gb\""));
    assert_int_equal(gpu_mig_create(lib, gpu, "c.1g", NULL, NULL, &e), -ENOENT);

    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = inventory(lib);
    const struct gpu_device *g = &inv->gpus[gpu];
    assert_int_equal(g->n_mig, 2);
    assert_true(has_profile(g, "3g.40gb"));
    assert_true(has_profile(g, "1c.3g.40gb"));
    for (size_t k = 0; k < g->n_mig; k++)
        if (strcmp(g->mig[k].profile, "1c.3g.40gb") == 0) {
            assert_int_equal(g->mig[k].ci_slices, 1);
            assert_int_equal(g->mig[k].gi_slices, 3);
        }

    if (gpu_mig_destroy_all(lib, gpu, &e) < 0)
        fail_msg("gpu_mig_destroy_all: %s", err_msg(&e));
    struct gpu_mig_mode mode;
    if (gpu_mig_set_mode(lib, gpu, false, &mode, &e) < 0)
        fail_msg("gpu_mig_set_mode: %s", err_msg(&e));
    assert_false(mode.pending);
    assert_int_equal(mode.reset_required, mode.current != mode.pending);
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *off = inventory(lib);
    assert_int_equal(off->gpus[gpu].mig_pending, false);
    assert_int_equal(off->gpus[gpu].n_mig, 0);
}

static void scenario_mig(void **state)
{
    (void)state;
    json_t *instances = NULL;
    size_t gpu = mig_gpu_index(&instances);
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = open_sim();
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = inventory(lib);
    check_mig_layout(inv, gpu, instances);
    check_mig_manage(lib, (unsigned)gpu);
}

/* ---- GPM with a workload ------------------------------------------------------------------- */

/* The running CUDA sample, ended by sample_stop or, after a failure, by the teardown. */
static pid_t sample_pid = -1;

/* The simulated CUDA sample on `visible` driving `load`: returns once it holds its devices (it
 * prints the launch line after registering). */
static pid_t sample_start(const char *visible, const char *load)
{
    _cleanup_free_ char *dir = xstrdup(gpuop);
    char *slash = strrchr(dir, '/');
    _cleanup_free_ char *prog = xasprintf("%s/sim-image", slash ? (*slash = 0, dir) : ".");
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        setenv("NVIDIA_VISIBLE_DEVICES", visible, 1);
        setenv("SIM_WORKLOAD_SECONDS", "60", 1);
        setenv("SIM_WORKLOAD_LOAD", load, 1);
        setenv("GPUOP_NVML_LIBRARY", sim_lib, 1);
        execl(prog, prog, "cuda-sample", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    sample_pid = pid;
    FILE *f = fdopen(fds[0], "r");
    char line[256];
    bool running = false;
    while (!running && fgets(line, sizeof(line), f))
        running = strstr(line, "CUDA kernel launch") != NULL;
    fclose(f);
    if (!running)
        fail_msg("cuda-sample (%s) did not start", prog);
    return pid;
}

static void sample_stop(pid_t pid)
{
    int st;
    kill(pid, SIGTERM);
    assert_int_equal(waitpid(pid, &st, 0), pid); /* it unregisters before it dies */
    sample_pid = -1;
}

static void scenario_gpm(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = open_sim();
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = inventory(lib);
    const struct gpu_device *g0 = &inv->gpus[0];
    assert_true(fleet_gpm(0));

    /* A whole GPU: idle, then the CUDA sample's load for the interval, then idle again once it
     * ended. */
    struct gpu_gpm_sampler *s = NULL;
    if (gpu_gpm_sampler_new(lib, g0, 60000, &s, &e) < 0)
        fail_msg("gpu_gpm_sampler_new: %s", err_msg(&e));
    struct gpu_gpm_metrics m;
    set_clock(CLOCK_T0);
    assert_int_equal(gpu_gpm_sample(s, CLOCK_T0 * 1000, &e), 0);
    pid_t pid = sample_start("0", "sm=0.8,tensor=0.5,dram=0.3");
    gpm_pair(s, CLOCK_T0 + 10, &m);
    assert_int_equal(m.n_gi, 0);
    const double pcie = 3938e6 * 16, nvlink = 25e9 * links_of(inv, 0);
    static const struct {
        enum gpu_prof_field f;
        double want;
    } busy[] = {
        {GPU_PROF_GR_ENGINE_ACTIVE, 0.8},  {GPU_PROF_SM_ACTIVE, 0.8},
        {GPU_PROF_SM_OCCUPANCY, 0.4},      {GPU_PROF_PIPE_TENSOR_ACTIVE, 0.5},
        {GPU_PROF_DRAM_ACTIVE, 0.3},       {GPU_PROF_PIPE_FP64_ACTIVE, 0.03},
        {GPU_PROF_PIPE_FP32_ACTIVE, 0.18}, {GPU_PROF_PIPE_FP16_ACTIVE, 0.06},
    };
    for (size_t i = 0; i < ARRAY_SIZE(busy); i++)
        expect(&m.gpu, busy[i].f, busy[i].want, "gpu 0 busy");
    expect(&m.gpu, GPU_PROF_PCIE_RX_BYTES, 0.10 * 0.3 * pcie, "gpu 0 busy");
    expect(&m.gpu, GPU_PROF_PCIE_TX_BYTES, 0.05 * 0.3 * pcie, "gpu 0 busy");
    expect(&m.gpu, GPU_PROF_NVLINK_TX_BYTES, 0.25 * 0.5 * nvlink, "gpu 0 busy");
    expect(&m.gpu, GPU_PROF_NVLINK_RX_BYTES, 0.25 * 0.5 * nvlink, "gpu 0 busy");
    /* GPU 1 ran nothing */
    struct gpu_gpm_sampler *s1 = NULL;
    assert_int_equal(gpu_gpm_sampler_new(lib, &inv->gpus[1], 0, &s1, &e), 0);
    assert_int_equal(gpu_gpm_sample(s1, (CLOCK_T0 + 10) * 1000, &e), 0);
    sample_stop(pid);
    gpm_pair(s, CLOCK_T0 + 20, &m);
    expect(&m.gpu, GPU_PROF_SM_ACTIVE, 0, "gpu 0 after the sample ended");
    expect(&m.gpu, GPU_PROF_PCIE_RX_BYTES, 0, "gpu 0 after the sample ended");
    gpm_pair(s1, CLOCK_T0 + 20, &m);
    expect(&m.gpu, GPU_PROF_SM_ACTIVE, 0, "gpu 1");
    gpu_gpm_sampler_free(s1);
    /* a scrape missed for longer than the sampler allows */
    set_clock(CLOCK_T0 + 200);
    assert_int_equal(gpu_gpm_sample(s, (CLOCK_T0 + 200) * 1000, &e), 0);
    assert_int_equal(gpu_gpm_metrics(s, &m, &e), -ESTALE);
    gpm_pair(s, CLOCK_T0 + 215, &m);
    assert_int_equal(m.interval_ms, 15000);
    gpu_gpm_sampler_free(s);

    /* MIG on GPU 1: a 3g.40gb instance runs the sample, a 1g.10gb idles. Per instance: its own
     * activity, no link traffic; the GPU: the instance's by its share of SMs and memory. */
    struct gpu_mig_mode mode;
    unsigned gi3 = 0, gi1 = 0;
    if (gpu_mig_set_mode(lib, 1, true, &mode, &e) < 0 ||
        gpu_mig_create(lib, 1, "3g.40gb", &gi3, NULL, &e) < 0 ||
        gpu_mig_create(lib, 1, "1g.10gb", &gi1, NULL, &e) < 0)
        fail_msg("MIG on GPU 1: %s", err_msg(&e));
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *mig = inventory(lib);
    const struct gpu_device *g1 = &mig->gpus[1];
    const struct gpu_mig_device *three = NULL;
    for (size_t k = 0; k < g1->n_mig; k++)
        if (g1->mig[k].gi_id == gi3)
            three = &g1->mig[k];
    assert_non_null(three);
    if (gpu_gpm_sampler_new(lib, g1, 0, &s, &e) < 0)
        fail_msg("gpu_gpm_sampler_new (MIG): %s", err_msg(&e));
    set_clock(CLOCK_T0 + 300);
    assert_int_equal(gpu_gpm_sample(s, (CLOCK_T0 + 300) * 1000, &e), 0);
    pid = sample_start(three->uuid, "sm=1,dram=0.5");
    gpm_pair(s, CLOCK_T0 + 330, &m);
    sample_stop(pid);
    assert_int_equal(m.n_gi, 2);
    for (size_t k = 0; k < m.n_gi; k++) {
        assert_int_equal(m.gi[k].error, 0);
        const struct gpu_prof *p = &m.gi[k].prof;
        bool busy_gi = m.gi[k].gi_id == gi3;
        if (!busy_gi)
            assert_int_equal(m.gi[k].gi_id, gi1);
        expect(p, GPU_PROF_SM_ACTIVE, busy_gi ? 1.0 : 0, "GPU instance");
        expect(p, GPU_PROF_DRAM_ACTIVE, busy_gi ? 0.5 : 0, "GPU instance");
        expect(p, GPU_PROF_PIPE_TENSOR_ACTIVE, 0, "GPU instance");
        assert_false(p->valid & (1u << GPU_PROF_PCIE_TX_BYTES | 1u << GPU_PROF_NVLINK_RX_BYTES));
    }
    double sm_share = (double)three->multiprocessors / 132.0;
    expect(&m.gpu, GPU_PROF_SM_ACTIVE, sm_share, "gpu 1 (MIG)");
    expect(&m.gpu, GPU_PROF_DRAM_ACTIVE, 0.5 * three->gi_placement_size / 8.0, "gpu 1 (MIG)");
    expect(&m.gpu, GPU_PROF_PCIE_RX_BYTES, 0.10 * 0.5 * three->gi_placement_size / 8.0 * pcie,
           "gpu 1 (MIG)");
    gpu_gpm_sampler_free(s);
    unsetenv("GPUOP_SIM_CLOCK");
}

/* ---- main --------------------------------------------------------------------------------- */

static int teardown(void **state)
{
    (void)state;
    if (sample_pid > 0) {
        kill(sample_pid, SIGKILL);
        waitpid(sample_pid, NULL, 0);
    }
    _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", state_dir);
    json_decref(fleet);
    return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s <libnvidia-ml.so.1> <gpuop> <fleet.yaml> fleet|lost|mig|gpm\n",
                argv[0]);
        return 2;
    }
    sim_lib = argv[1];
    gpuop = argv[2];
    fleet_path = argv[3];
    struct stat st;
    if (stat(sim_lib, &st) < 0 || stat(fleet_path, &st) < 0) {
        fprintf(stderr, "FAIL: simulator %s or fleet %s not built/present\n", sim_lib, fleet_path);
        return 1;
    }
    struct err e = {0};
    if (yaml_load_file(fleet_path, &fleet, &e) < 0) {
        fprintf(stderr, "%s\n", err_msg(&e));
        return 1;
    }
    if (!mkdtemp(state_dir))
        return 1;
    setenv("GPUOP_SIM_FLEET", fleet_path, 1);
    setenv("GPUOP_SIM_STATE", state_dir, 1);
    struct CMUnitTest test;
    if (strcmp(argv[4], "fleet") == 0)
        test = (struct CMUnitTest)cmocka_unit_test(scenario_fleet);
    else if (strcmp(argv[4], "lost") == 0)
        test = (struct CMUnitTest)cmocka_unit_test(scenario_lost);
    else if (strcmp(argv[4], "mig") == 0)
        test = (struct CMUnitTest)cmocka_unit_test(scenario_mig);
    else if (strcmp(argv[4], "gpm") == 0)
        test = (struct CMUnitTest)cmocka_unit_test(scenario_gpm);
    else
        return 2;
    const struct CMUnitTest tests[] = {test};
    return cmocka_run_group_tests(tests, NULL, teardown);
}
