/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The model on a library that answers like a real driver (fake-nvml-full.c): MIG names from
 * NVML's "MIG ..." profile names, compute-instance names, GPU-instance info refused to
 * unprivileged callers, NVLinks through an NVSwitch, the deprecated throttle-reasons symbol,
 * a lost GPU, and GPM as the R520 branch has it (no MIG samples; a support query that answers
 * "no" with success). argv[1]: the library.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "gpu.h"
#include "nvml-abi.h"

static const char *full_lib;

static struct gpu_inventory *read_inventory(struct gpu_lib **ret_lib)
{
    struct err e = {0};
    if (gpu_lib_open(full_lib, ret_lib, &e) < 0)
        fail_msg("%s", err_msg(&e));
    struct gpu_inventory *inv = NULL;
    if (gpu_inventory_read(*ret_lib, &inv, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return inv;
}

static void check_mig(const struct gpu_device *g, bool privileged)
{
    assert_true(g->mig_capable);
    assert_true(g->mig_enabled);
    assert_true(g->mig_pending);
    assert_int_equal(g->n_mig, 2);
    const struct gpu_mig_device *a = &g->mig[0], *b = &g->mig[1];
    assert_string_equal(a->profile, "3g.40gb");
    assert_string_equal(b->profile, "1c.3g.40gb");
    assert_int_equal(a->index, 0);
    assert_int_equal(b->index, 3);
    assert_string_equal(a->uuid, "MIG-11111111-2222-3333-4444-555555555500");
    assert_int_equal(a->gi_id, 1);
    assert_int_equal(b->gi_id, 2);
    assert_int_equal(a->ci_id, 0);
    assert_int_equal(a->gi_profile_id, 9); /* from the GI, or matched by shape */
    assert_int_equal(a->gi_slices, 3);
    assert_int_equal(b->ci_slices, 1);
    assert_int_equal(a->multiprocessors, 60);
    assert_int_equal(a->copy_engines, 3);
    assert_int_equal(a->memory_mib, 40448);
    assert_int_equal(b->gi_placement_start, privileged ? 4 : 0);
    assert_int_equal(b->gi_placement_size, privileged ? 4 : 0);
}

static void real_driver_answers(void **state)
{
    (void)state;
    struct gpu_lib *lib = NULL;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = read_inventory(&lib);
    assert_string_equal(inv->driver_version, "570.86.15");
    assert_int_equal(inv->cuda_driver_version, 12080);
    assert_int_equal(inv->n_gpus, 3);
    const struct gpu_device *g0 = &inv->gpus[0], *g1 = &inv->gpus[1], *g2 = &inv->gpus[2];
    assert_string_equal(g0->bus_id, "00000000:18:00.0");
    assert_int_equal(g0->pci_device_id, 0x233010DE);
    assert_int_equal(g0->memory_total_bytes, 81559ull << 20);
    assert_int_equal(g0->memory_reserved_bytes, 450ull << 20);
    assert_string_equal(gpu_arch_name(g0->arch), "hopper");
    check_mig(g0, true);
    assert_false(g1->mig_enabled);
    assert_true(g1->mig_pending);
    assert_int_equal(g1->n_mig, 0);
    assert_false(g2->mig_capable);

    /* 0-1: 4 direct links; 0-2 and 1-2: 14 links each into the NVSwitch fabric. */
    static const unsigned links[9] = {0, 4, 14, 4, 0, 14, 14, 14, 0};
    static const unsigned levels[9] = {0, 40, 50, 40, 0, 50, 50, 50, 0};
    for (size_t i = 0; i < 9; i++) {
        assert_int_equal(inv->nvlinks[i], links[i]);
        assert_int_equal(inv->topo_level[i], levels[i]);
    }
    const struct gpu_mig_device *m = NULL;
    assert_ptr_equal(gpu_inventory_find(inv, "MIG-11111111-2222-3333-4444-555555555501", &m), g0);
    assert_ptr_equal(m, &g0->mig[1]);

    struct err e = {0};
    struct gpu_sample s;
    assert_int_equal(gpu_sample_read(lib, 0, &s, &e), 0);
    assert_int_equal(s.valid, GPU_SAMPLE_POWER | GPU_SAMPLE_CLOCK_EVENTS | GPU_SAMPLE_MEM_TEMP |
                                  GPU_SAMPLE_NVLINK_BW | GPU_SAMPLE_MEMORY);
    assert_int_equal(s.power_mw, 71500);
    assert_int_equal(s.clock_event_reasons, nvmlClocksEventReasonGpuIdle);
    assert_int_equal(s.mem_temp_c, 40);
    assert_int_equal(s.nvlink_bw_total, 123456789012ull);
    assert_int_equal(s.fb_total_mib, 81559);
    assert_int_equal(s.fb_reserved_mib, 450);
    gpu_lib_free(lib);
}

static void unprivileged(void **state)
{
    (void)state;
    setenv("FAKE_NVML_UNPRIVILEGED", "1", 1);
    struct gpu_lib *lib = NULL;
    struct gpu_inventory *inv = read_inventory(&lib);
    unsetenv("FAKE_NVML_UNPRIVILEGED");
    check_mig(&inv->gpus[0], false);
    gpu_inventory_free(inv);
    gpu_lib_free(lib);
}

static void lost_gpu(void **state)
{
    (void)state;
    setenv("FAKE_NVML_LOST", "1", 1);
    struct gpu_lib *lib = NULL;
    struct gpu_inventory *inv = read_inventory(&lib);
    assert_false(inv->gpus[0].lost);
    assert_true(inv->gpus[1].lost);
    assert_false(inv->gpus[2].lost);
    assert_string_equal(inv->gpus[1].uuid, ""); /* the first call already failed */
    assert_string_equal(inv->gpus[2].name, "NVIDIA H100 80GB HBM3");
    check_mig(&inv->gpus[0], true);
    assert_int_equal(inv->topo_level[0 * 3 + 1], NVML_TOPOLOGY_SYSTEM);
    assert_int_equal(inv->nvlinks[2 * 3 + 1], 0);
    struct err e = {0};
    struct gpu_sample s;
    assert_int_equal(gpu_sample_read(lib, 1, &s, &e), 0);
    assert_true(s.lost);
    assert_int_equal(s.valid, 0);
    assert_int_equal(gpu_sample_read(lib, 2, &s, &e), 0);
    assert_false(s.lost);
    assert_int_equal(s.power_mw, 71500);
    unsetenv("FAKE_NVML_LOST");
    gpu_inventory_free(inv);
    gpu_lib_free(lib);
}

/* A driver that fills string buffers without a NUL or hands out an out-of-range double: every
 * string the model holds stays terminated inside its field, and values are clamped. */
static void hostile_driver(void **state)
{
    (void)state;
    setenv("FAKE_NVML_HOSTILE", "1", 1);
    struct gpu_lib *lib = NULL;
    struct gpu_inventory *inv = read_inventory(&lib);
    assert_true(strnlen(inv->driver_version, sizeof(inv->driver_version)) <
                sizeof(inv->driver_version));
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *g = &inv->gpus[i];
        assert_true(strnlen(g->uuid, sizeof(g->uuid)) < sizeof(g->uuid));
        assert_true(strnlen(g->name, sizeof(g->name)) < sizeof(g->name));
        assert_true(strnlen(g->serial, sizeof(g->serial)) < sizeof(g->serial));
        for (size_t k = 0; k < g->n_mig; k++)
            assert_true(strnlen(g->mig[k].uuid, sizeof(g->mig[k].uuid)) < sizeof(g->mig[k].uuid));
    }
    struct err e = {0};
    struct gpu_sample s;
    assert_int_equal(gpu_sample_read(lib, 0, &s, &e), 0);
    assert_true(s.valid & GPU_SAMPLE_NVLINK_BW);
    assert_true(s.nvlink_bw_total == UINT64_MAX);
    struct gpu_events *ev = NULL;
    if (gpu_events_open(lib, UINT64_MAX, &ev, &e) == 0)
        gpu_events_free(ev);
    unsetenv("FAKE_NVML_HOSTILE");
    gpu_inventory_free(inv);
    gpu_lib_free(lib);
}

/* GPM on a driver without nvmlGpmMigSampleGet: the GPU's metrics, its GPU instances marked not
 * supported; GPU2's "no" answer; a lost GPU makes the sampler start over. */
static void gpm_r520(void **state)
{
    (void)state;
    struct gpu_lib *lib = NULL;
    struct gpu_inventory *inv = read_inventory(&lib);
    struct err e = {0};
    assert_int_equal(gpu_gpm_support(lib, 0, &e), 1);
    assert_int_equal(gpu_gpm_support(lib, 2, &e), 0);
    struct gpu_gpm_sampler *none = NULL;
    assert_int_equal(gpu_gpm_sampler_new(lib, &inv->gpus[2], 0, &none, &e), GPU_ERR_NOT_SUPPORTED);
    assert_null(none);

    struct gpu_gpm_sampler *s = NULL;
    if (gpu_gpm_sampler_new(lib, &inv->gpus[0], 30000, &s, &e) < 0)
        fail_msg("gpu_gpm_sampler_new: %s", err_msg(&e));
    struct gpu_gpm_metrics m;
    assert_int_equal(gpu_gpm_metrics(s, &m, &e), -EAGAIN);
    assert_non_null(strstr(err_msg(&e), "two samples, 0 taken"));
    assert_int_equal(gpu_gpm_sample(s, 1000, &e), 0);
    assert_int_equal(gpu_gpm_metrics(s, &m, &e), -EAGAIN);
    assert_int_equal(gpu_gpm_sample(s, 16000, &e), 0);
    if (gpu_gpm_metrics(s, &m, &e) < 0)
        fail_msg("gpu_gpm_metrics: %s", err_msg(&e));
    assert_int_equal(m.interval_ms, 15000);
    assert_int_equal(m.gpu.valid, 1u << GPU_PROF_GR_ENGINE_ACTIVE | 1u << GPU_PROF_SM_ACTIVE |
                                      1u << GPU_PROF_DRAM_ACTIVE | 1u << GPU_PROF_PCIE_TX_BYTES |
                                      1u << GPU_PROF_PCIE_RX_BYTES);
    assert_float_equal(m.gpu.value[GPU_PROF_GR_ENGINE_ACTIVE], 0.5, 1e-12);
    assert_float_equal(m.gpu.value[GPU_PROF_SM_ACTIVE], 0.425, 1e-12);
    assert_float_equal(m.gpu.value[GPU_PROF_DRAM_ACTIVE], 0.125, 1e-12);
    assert_float_equal(m.gpu.value[GPU_PROF_PCIE_TX_BYTES], 3.0 * 1048576, 1e-6);
    assert_float_equal(m.gpu.value[GPU_PROF_PCIE_RX_BYTES], 7.5 * 1048576, 1e-6);
    /* GPU0's two GPU instances, each once, in the inventory's order */
    assert_int_equal(m.n_gi, 2);
    assert_int_equal(m.gi[0].gi_id, 1);
    assert_int_equal(m.gi[1].gi_id, 2);
    for (size_t i = 0; i < m.n_gi; i++) {
        assert_int_equal(m.gi[i].error, GPU_ERR_NOT_SUPPORTED);
        assert_int_equal(m.gi[i].prof.valid, 0);
    }
    /* the sample before the latest may be no older than 30 s */
    assert_int_equal(gpu_gpm_sample(s, 60000, &e), 0);
    assert_int_equal(gpu_gpm_metrics(s, &m, &e), -ESTALE);
    assert_non_null(strstr(err_msg(&e), "stale"));
    assert_int_equal(gpu_gpm_sample(s, 61000, &e), 0);
    assert_int_equal(gpu_gpm_metrics(s, &m, &e), 0);
    assert_int_equal(m.interval_ms, 1000);

    setenv("FAKE_NVML_LOST", "0", 1);
    assert_int_equal(gpu_gpm_sample(s, 62000, &e), GPU_ERR_LOST);
    assert_non_null(strstr(err_msg(&e), "nvmlGpmSampleGet(gpu 0)"));
    unsetenv("FAKE_NVML_LOST");
    assert_int_equal(gpu_gpm_metrics(s, &m, &e), -EAGAIN); /* starts over */
    assert_int_equal(gpu_gpm_sample(s, 63000, &e), 0);
    assert_int_equal(gpu_gpm_sample(s, 64000, &e), 0);
    assert_int_equal(gpu_gpm_metrics(s, &m, &e), 0);

    gpu_gpm_sampler_free(s);
    gpu_gpm_sampler_free(NULL);
    gpu_inventory_free(inv);
    gpu_lib_free(lib);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    full_lib = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(real_driver_answers),
        cmocka_unit_test(unprivileged),
        cmocka_unit_test(lost_gpu),
        cmocka_unit_test(hostile_driver),
        cmocka_unit_test(gpm_r520),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
