/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPM binding's pure parts (white-box: nvml-internal.h): the support answer, the pairing of
 * two samples, the request, and NVML's metrics converted to DCGM's units, by tables.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "nvml-internal.h"

static void support_answers(void **state)
{
    (void)state;
    static const struct {
        nvmlReturn_t r;
        unsigned is_supported;
        int want;
    } t[] = {
        {NVML_SUCCESS, 1, 1},                         /* Hopper */
        {NVML_SUCCESS, 0, 0},                         /* a GPU the query answers "no" for */
        {NVML_ERROR_NOT_SUPPORTED, 0, 0},             /* a GPU before Hopper */
        {NVML_ERROR_FUNCTION_NOT_FOUND, 0, 0},        /* a driver older than R520: no symbol */
        {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, 0, 0}, /* a library that knows another version */
        {NVML_ERROR_GPU_IS_LOST, 0, GPU_ERR_LOST},    /* fell off the bus */
        {NVML_ERROR_UNINITIALIZED, 0, -EIO},          /* NVML's other failures are errors */
        {NVML_ERROR_NO_PERMISSION, 0, -EPERM},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        nvmlGpmSupport_t s = {.version = NVML_GPM_SUPPORT_VERSION,
                              .isSupportedDevice = t[i].is_supported};
        int got = nv_gpm_supported(t[i].r, &s);
        if (got != t[i].want)
            fail_msg("row %zu (nvml %d, supported %u): got %d, want %d", i, t[i].r,
                     t[i].is_supported, got, t[i].want);
    }
    assert_int_equal(nv_gpm_supported(NVML_SUCCESS, NULL), 0);
}

static void sample_pairs(void **state)
{
    (void)state;
    static const struct {
        uint64_t prev, cur, max_age;
        int want;
    } t[] = {
        {1000, 2000, 0, 0},             /* no limit */
        {1000, 2000, 30000, 0},         /* within the limit */
        {1000, 31000, 30000, 0},        /* exactly the limit */
        {1000, 31001, 30000, -ESTALE},  /* a sample older than the interval allows */
        {1000, 900000, 30000, -ESTALE}, /* missed scrapes */
        {2000, 1000, 0, -EAGAIN},       /* swapped: the latest is older */
        {2000, 2000, 30000, -EAGAIN},   /* the same instant: no interval */
        {0, 1, 0, 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        int got = nv_gpm_pair(t[i].prev, t[i].cur, t[i].max_age);
        if (got != t[i].want)
            fail_msg("row %zu: got %d, want %d", i, got, t[i].want);
    }
}

static void request(void **state)
{
    (void)state;
    nvmlGpmMetricsGet_t *mg = xcalloc(1, sizeof(*mg));
    nvmlGpmSample_t a = (nvmlGpmSample_t)(uintptr_t)0x1000, b = (nvmlGpmSample_t)(uintptr_t)0x2000;
    nv_gpm_request(mg, a, b);
    assert_int_equal(mg->version, 1);
    assert_int_equal(mg->numMetrics, GPU_PROF_COUNT);
    assert_ptr_equal(mg->sample1, a);
    assert_ptr_equal(mg->sample2, b);
    static const unsigned want[GPU_PROF_COUNT] = {
        NVML_GPM_METRIC_GRAPHICS_UTIL,
        NVML_GPM_METRIC_SM_UTIL,
        NVML_GPM_METRIC_SM_OCCUPANCY,
        NVML_GPM_METRIC_ANY_TENSOR_UTIL,
        NVML_GPM_METRIC_DRAM_BW_UTIL,
        NVML_GPM_METRIC_FP64_UTIL,
        NVML_GPM_METRIC_FP32_UTIL,
        NVML_GPM_METRIC_FP16_UTIL,
        NVML_GPM_METRIC_PCIE_TX_PER_SEC,
        NVML_GPM_METRIC_PCIE_RX_PER_SEC,
        NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
        NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
    };
    for (size_t f = 0; f < GPU_PROF_COUNT; f++) {
        assert_int_equal(mg->metrics[f].metricId, want[f]);
        assert_int_not_equal(mg->metrics[f].nvmlReturn, NVML_SUCCESS); /* nothing answered yet */
    }
    free(mg);
}

static void names(void **state)
{
    (void)state;
    for (unsigned f = 0; f < GPU_PROF_COUNT; f++) {
        assert_non_null(gpu_prof_name(f));
        assert_true(str_has_prefix(gpu_prof_name(f), "DCGM_FI_PROF_"));
        assert_int_equal(gpu_prof_dcgm_id(f), 1001 + f); /* DCGM numbers them in this order */
    }
    assert_string_equal(gpu_prof_name(GPU_PROF_PIPE_TENSOR_ACTIVE),
                        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE");
    assert_string_equal(gpu_prof_name(GPU_PROF_NVLINK_RX_BYTES), "DCGM_FI_PROF_NVLINK_RX_BYTES");
    assert_null(gpu_prof_name(GPU_PROF_COUNT));
    assert_int_equal(gpu_prof_dcgm_id(GPU_PROF_COUNT), 0);
}

/* One answer: metric id, NVML's code, value; then the field it lands in, valid, the value. */
struct answer {
    unsigned id;
    nvmlReturn_t r;
    double value;
};
struct want {
    int field; /* -1: no field */
    bool valid;
    double value;
};

static void convert_case(const char *name, const struct answer *a, size_t n, const struct want *w,
                         size_t nw)
{
    nvmlGpmMetric_t m[32];
    assert_true(n <= ARRAY_SIZE(m));
    for (size_t i = 0; i < n; i++)
        m[i] = (nvmlGpmMetric_t){.metricId = a[i].id, .nvmlReturn = a[i].r, .value = a[i].value};
    struct gpu_prof p;
    memset(&p, 0xa5, sizeof(p));
    nv_gpm_convert(m, n, &p);
    uint32_t want_valid = 0;
    for (size_t i = 0; i < nw; i++) {
        if (!w[i].valid)
            continue;
        want_valid |= 1u << w[i].field;
        double got = p.value[w[i].field], diff = fabs(got - w[i].value);
        if (diff > 1e-9 * fmax(1.0, fabs(w[i].value)))
            fail_msg("%s: %s = %.12g, want %.12g", name, gpu_prof_name(w[i].field), got,
                     w[i].value);
    }
    if (p.valid != want_valid)
        fail_msg("%s: valid 0x%x, want 0x%x", name, p.valid, want_valid);
}

#define CASE(name, answers, wants) \
    convert_case(name, answers, ARRAY_SIZE(answers), wants, ARRAY_SIZE(wants))

static void conversions(void **state)
{
    (void)state;
    const double MiB = 1024.0 * 1024.0;
    /* A busy whole GPU: percentages to ratios, MiB/s to bytes per second. */
    static const struct answer busy[] = {
        {NVML_GPM_METRIC_GRAPHICS_UTIL, NVML_SUCCESS, 80.0},
        {NVML_GPM_METRIC_SM_UTIL, NVML_SUCCESS, 80.0},
        {NVML_GPM_METRIC_SM_OCCUPANCY, NVML_SUCCESS, 40.0},
        {NVML_GPM_METRIC_ANY_TENSOR_UTIL, NVML_SUCCESS, 50.0},
        {NVML_GPM_METRIC_DRAM_BW_UTIL, NVML_SUCCESS, 30.0},
        {NVML_GPM_METRIC_FP64_UTIL, NVML_SUCCESS, 3.0},
        {NVML_GPM_METRIC_FP32_UTIL, NVML_SUCCESS, 18.0},
        {NVML_GPM_METRIC_FP16_UTIL, NVML_SUCCESS, 6.0},
        {NVML_GPM_METRIC_PCIE_TX_PER_SEC, NVML_SUCCESS, 901.25},
        {NVML_GPM_METRIC_PCIE_RX_PER_SEC, NVML_SUCCESS, 1802.5},
        {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, NVML_SUCCESS, 41723.3},
        {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, NVML_SUCCESS, 0.0},
    };
    const struct want busy_w[] = {
        {GPU_PROF_GR_ENGINE_ACTIVE, true, 0.8},
        {GPU_PROF_SM_ACTIVE, true, 0.8},
        {GPU_PROF_SM_OCCUPANCY, true, 0.4},
        {GPU_PROF_PIPE_TENSOR_ACTIVE, true, 0.5},
        {GPU_PROF_DRAM_ACTIVE, true, 0.3},
        {GPU_PROF_PIPE_FP64_ACTIVE, true, 0.03},
        {GPU_PROF_PIPE_FP32_ACTIVE, true, 0.18},
        {GPU_PROF_PIPE_FP16_ACTIVE, true, 0.06},
        {GPU_PROF_PCIE_TX_BYTES, true, 901.25 * MiB},
        {GPU_PROF_PCIE_RX_BYTES, true, 1802.5 * MiB},
        {GPU_PROF_NVLINK_TX_BYTES, true, 41723.3 * MiB},
        {GPU_PROF_NVLINK_RX_BYTES, true, 0.0},
    };
    CASE("busy GPU", busy, busy_w);

    /* A MIG GPU instance: the link traffic is the GPU's, NVML answers not supported for it. */
    static const struct answer mig[] = {
        {NVML_GPM_METRIC_SM_UTIL, NVML_SUCCESS, 100.0},
        {NVML_GPM_METRIC_DRAM_BW_UTIL, NVML_SUCCESS, 50.0},
        {NVML_GPM_METRIC_PCIE_TX_PER_SEC, NVML_ERROR_NOT_SUPPORTED, 0.0},
        {NVML_GPM_METRIC_PCIE_RX_PER_SEC, NVML_ERROR_NOT_SUPPORTED, 0.0},
        {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, NVML_ERROR_NOT_SUPPORTED, 0.0},
        {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, NVML_ERROR_NOT_SUPPORTED, 0.0},
    };
    const struct want mig_w[] = {
        {GPU_PROF_SM_ACTIVE, true, 1.0},
        {GPU_PROF_DRAM_ACTIVE, true, 0.5},
        {GPU_PROF_PCIE_TX_BYTES, false, 0},
        {GPU_PROF_NVLINK_RX_BYTES, false, 0},
    };
    CASE("MIG instance", mig, mig_w);

    /* An idle GPU: zeros are values, not absences. */
    static const struct answer idle[] = {
        {NVML_GPM_METRIC_SM_UTIL, NVML_SUCCESS, 0.0},
        {NVML_GPM_METRIC_PCIE_RX_PER_SEC, NVML_SUCCESS, 0.0},
    };
    const struct want idle_w[] = {
        {GPU_PROF_SM_ACTIVE, true, 0.0},
        {GPU_PROF_PCIE_RX_BYTES, true, 0.0},
    };
    CASE("idle GPU", idle, idle_w);

    /* What NVML should not give, and gpuop must not pass on: NaN, infinity, a negative value,
     * rounding just outside 0..100 (clamped), and a failed metric's leftover value. */
    static const struct answer odd[] = {
        {NVML_GPM_METRIC_GRAPHICS_UTIL, NVML_SUCCESS, NAN},
        {NVML_GPM_METRIC_SM_UTIL, NVML_SUCCESS, 100.0000001},
        {NVML_GPM_METRIC_SM_OCCUPANCY, NVML_SUCCESS, -1e-9},
        {NVML_GPM_METRIC_ANY_TENSOR_UTIL, NVML_SUCCESS, -3.0},
        {NVML_GPM_METRIC_DRAM_BW_UTIL, NVML_SUCCESS, 250.0},
        {NVML_GPM_METRIC_FP64_UTIL, NVML_ERROR_UNKNOWN, 42.0},
        {NVML_GPM_METRIC_PCIE_TX_PER_SEC, NVML_SUCCESS, INFINITY},
        {NVML_GPM_METRIC_PCIE_RX_PER_SEC, NVML_SUCCESS, -0.5},
    };
    const struct want odd_w[] = {
        {GPU_PROF_GR_ENGINE_ACTIVE, false, 0}, {GPU_PROF_SM_ACTIVE, true, 1.0},
        {GPU_PROF_SM_OCCUPANCY, true, 0.0},    {GPU_PROF_PIPE_TENSOR_ACTIVE, false, 0},
        {GPU_PROF_DRAM_ACTIVE, true, 1.0},     {GPU_PROF_PIPE_FP64_ACTIVE, false, 0},
        {GPU_PROF_PCIE_TX_BYTES, false, 0},    {GPU_PROF_PCIE_RX_BYTES, false, 0},
    };
    CASE("odd values", odd, odd_w);

    /* An unsupported GPU's answer, every metric failed: nothing valid. Ids gpuop does not ask
     * for (integer, a per-link NVLink metric) are ignored. */
    static const struct answer none[] = {
        {NVML_GPM_METRIC_SM_UTIL, NVML_ERROR_NOT_SUPPORTED, 0},
        {NVML_GPM_METRIC_DRAM_BW_UTIL, NVML_ERROR_NOT_SUPPORTED, 0},
        {NVML_GPM_METRIC_INTEGER_UTIL, NVML_SUCCESS, 12.0},
        {NVML_GPM_METRIC_NVLINK_L0_TX_PER_SEC, NVML_SUCCESS, 5.0},
    };
    const struct want none_w[] = {{GPU_PROF_SM_ACTIVE, false, 0}};
    CASE("unsupported", none, none_w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(support_answers), cmocka_unit_test(sample_pairs),
        cmocka_unit_test(request),         cmocka_unit_test(names),
        cmocka_unit_test(conversions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
