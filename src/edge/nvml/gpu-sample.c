/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_sample_read: one GPU's telemetry. Every field is optional; a lost GPU stops the read. */
#include <string.h>

#include "nvml-internal.h"

#define MIB (1024ull * 1024ull)

/* Marks the sample lost on NVML_ERROR_GPU_IS_LOST; true when the call succeeded. */
static bool ok(struct gpu_sample *s, nvmlReturn_t r)
{
    if (r == NVML_ERROR_GPU_IS_LOST)
        s->lost = true;
    return r == NVML_SUCCESS;
}

static void basic_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_sample *s)
{
    unsigned v = 0, w = 0, period = 0;
    if (ok(s, NV(lib, nvmlDeviceGetTemperature, dev, NVML_TEMPERATURE_GPU, &v))) {
        s->temp_c = v;
        s->valid |= GPU_SAMPLE_TEMP;
    }
    if (s->lost)
        return;
    if (ok(s, NV(lib, nvmlDeviceGetPowerUsage, dev, &v))) {
        s->power_mw = v;
        s->valid |= GPU_SAMPLE_POWER;
    }
    unsigned long long mj = 0;
    if (!s->lost && ok(s, NV(lib, nvmlDeviceGetTotalEnergyConsumption, dev, &mj))) {
        s->energy_mj = mj;
        s->valid |= GPU_SAMPLE_ENERGY;
    }
    nvmlUtilization_t u = {0};
    if (!s->lost && ok(s, NV(lib, nvmlDeviceGetUtilizationRates, dev, &u))) {
        s->util_gpu = u.gpu;
        s->util_mem = u.memory;
        s->valid |= GPU_SAMPLE_UTIL;
    }
    if (!s->lost && ok(s, NV(lib, nvmlDeviceGetEncoderUtilization, dev, &v, &period)) &&
        ok(s, NV(lib, nvmlDeviceGetDecoderUtilization, dev, &w, &period))) {
        s->util_enc = v;
        s->util_dec = w;
        s->valid |= GPU_SAMPLE_ENC_DEC;
    }
    if (!s->lost && ok(s, NV(lib, nvmlDeviceGetClockInfo, dev, NVML_CLOCK_SM, &v)) &&
        ok(s, NV(lib, nvmlDeviceGetClockInfo, dev, NVML_CLOCK_MEM, &w))) {
        s->sm_clock_mhz = v;
        s->mem_clock_mhz = w;
        s->valid |= GPU_SAMPLE_CLOCKS;
    }
}

static void memory_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_sample *s)
{
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    nvmlReturn_t r = NV(lib, nvmlDeviceGetMemoryInfo_v2, dev, &m2);
    if (ok(s, r)) {
        s->fb_total_mib = m2.total / MIB;
        s->fb_free_mib = m2.free / MIB;
        s->fb_used_mib = m2.used / MIB;
        s->fb_reserved_mib = m2.reserved / MIB;
        s->valid |= GPU_SAMPLE_MEMORY;
        return;
    }
    nvmlMemory_t m1 = {0};
    if (!s->lost && ok(s, NV(lib, nvmlDeviceGetMemoryInfo, dev, &m1))) {
        s->fb_total_mib = m1.total / MIB;
        s->fb_free_mib = m1.free / MIB;
        s->fb_used_mib = m1.used / MIB;
        s->valid |= GPU_SAMPLE_MEMORY;
    }
}

static void health_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_sample *s)
{
    unsigned v = 0;
    if (ok(s, NV(lib, nvmlDeviceGetPcieReplayCounter, dev, &v))) {
        s->pcie_replay = v;
        s->valid |= GPU_SAMPLE_PCIE_REPLAY;
    }
    unsigned long long reasons = 0;
    nvmlReturn_t r = NV(lib, nvmlDeviceGetCurrentClocksEventReasons, dev, &reasons);
    if (r == NVML_ERROR_FUNCTION_NOT_FOUND)
        r = NV(lib, nvmlDeviceGetCurrentClocksThrottleReasons, dev, &reasons);
    if (!s->lost && ok(s, r)) {
        s->clock_event_reasons = nv_clock_events(reasons);
        s->valid |= GPU_SAMPLE_CLOCK_EVENTS;
    }
    unsigned long long c[4] = {0};
    if (!s->lost &&
        ok(s, NV(lib, nvmlDeviceGetTotalEccErrors, dev, NVML_MEMORY_ERROR_TYPE_CORRECTED,
                 NVML_VOLATILE_ECC, &c[0])) &&
        ok(s, NV(lib, nvmlDeviceGetTotalEccErrors, dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                 NVML_VOLATILE_ECC, &c[1])) &&
        ok(s, NV(lib, nvmlDeviceGetTotalEccErrors, dev, NVML_MEMORY_ERROR_TYPE_CORRECTED,
                 NVML_AGGREGATE_ECC, &c[2])) &&
        ok(s, NV(lib, nvmlDeviceGetTotalEccErrors, dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                 NVML_AGGREGATE_ECC, &c[3]))) {
        s->ecc_sbe_vol = c[0];
        s->ecc_dbe_vol = c[1];
        s->ecc_sbe_agg = c[2];
        s->ecc_dbe_agg = c[3];
        s->valid |= GPU_SAMPLE_ECC;
    }
}

/* Retired pages: asking with no buffer returns the count (SUCCESS or INSUFFICIENT_SIZE). */
static bool retired_count(struct gpu_lib *lib, nvmlDevice_t dev, nvmlPageRetirementCause_t cause,
                          struct gpu_sample *s, unsigned *ret)
{
    unsigned n = 0;
    nvmlReturn_t r = NV(lib, nvmlDeviceGetRetiredPages, dev, cause, &n, NULL);
    if (r == NVML_ERROR_INSUFFICIENT_SIZE)
        r = NVML_SUCCESS;
    if (!ok(s, r))
        return false;
    *ret = n;
    return true;
}

static void memory_health_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_sample *s)
{
    nvmlEnableState_t pending = NVML_FEATURE_DISABLED;
    if (retired_count(lib, dev, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, s,
                      &s->retired_sbe) &&
        retired_count(lib, dev, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, s,
                      &s->retired_dbe) &&
        ok(s, NV(lib, nvmlDeviceGetRetiredPagesPendingStatus, dev, &pending))) {
        s->retired_pending = pending == NVML_FEATURE_ENABLED;
        s->valid |= GPU_SAMPLE_RETIRED;
    } else {
        s->retired_sbe = s->retired_dbe = 0;
    }
    unsigned cor = 0, unc = 0, pend = 0, fail = 0;
    if (!s->lost && ok(s, NV(lib, nvmlDeviceGetRemappedRows, dev, &cor, &unc, &pend, &fail))) {
        s->remapped_cor = cor;
        s->remapped_unc = unc;
        s->remap_pending = pend != 0;
        s->remap_failure = fail != 0;
        s->valid |= GPU_SAMPLE_REMAPPED;
    }
}

/* Violation counters: valid when any policy answers; the others stay 0. */
static void violations_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_sample *s)
{
    static const nvmlPerfPolicyType_t policy[6] = {
        NVML_PERF_POLICY_POWER,           NVML_PERF_POLICY_THERMAL,
        NVML_PERF_POLICY_SYNC_BOOST,      NVML_PERF_POLICY_BOARD_LIMIT,
        NVML_PERF_POLICY_LOW_UTILIZATION, NVML_PERF_POLICY_RELIABILITY,
    };
    for (size_t i = 0; i < ARRAY_SIZE(policy) && !s->lost; i++) {
        nvmlViolationTime_t t = {0};
        if (ok(s, NV(lib, nvmlDeviceGetViolationStatus, dev, policy[i], &t))) {
            s->violation_ns[i] = t.violationTime;
            s->valid |= GPU_SAMPLE_VIOLATIONS;
        }
    }
}

static bool field_u64(struct gpu_sample *s, const nvmlFieldValue_t *f, uint64_t *ret)
{
    if (!ok(s, f->nvmlReturn))
        return false;
    switch (f->valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
        /* NaN and negatives read 0; past 2^64 saturates (the cast would be undefined) */
        *ret = !(f->value.dVal > 0)                      ? 0
               : f->value.dVal >= 18446744073709551616.0 ? UINT64_MAX
                                                         : (uint64_t)f->value.dVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        *ret = f->value.uiVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        *ret = f->value.ulVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        *ret = f->value.ullVal;
        return true;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        *ret = f->value.sllVal > 0 ? (uint64_t)f->value.sllVal : 0;
        return true;
    case NVML_VALUE_TYPE_SIGNED_INT:
        *ret = f->value.siVal > 0 ? (uint64_t)f->value.siVal : 0;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
        *ret = f->value.usVal;
        return true;
    default:
        return false;
    }
}

static void fields_read(struct gpu_lib *lib, nvmlDevice_t dev, struct gpu_sample *s)
{
    enum { F_MEMTEMP, F_BW, F_FLIT, F_DATA, F_REPLAY, F_RECOVERY, F_COUNT };
    static const unsigned ids[F_COUNT] = {
        NVML_FI_DEV_MEMORY_TEMP,
        NVML_FI_DEV_NVLINK_BANDWIDTH_C0_TOTAL,
        NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
        NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL,
        NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,
        NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL,
    };
    nvmlFieldValue_t f[F_COUNT];
    memset(f, 0, sizeof(f));
    for (size_t i = 0; i < F_COUNT; i++) {
        f[i].fieldId = ids[i];
        f[i].nvmlReturn = NVML_ERROR_UNKNOWN; /* a driver that skips an entry leaves it failed */
    }
    if (!ok(s, NV(lib, nvmlDeviceGetFieldValues, dev, F_COUNT, f)))
        return;
    uint64_t v[F_COUNT] = {0};
    bool got[F_COUNT];
    for (size_t i = 0; i < F_COUNT; i++)
        got[i] = field_u64(s, &f[i], &v[i]);
    if (s->lost)
        return;
    if (got[F_MEMTEMP]) {
        s->mem_temp_c = (unsigned)v[F_MEMTEMP];
        s->valid |= GPU_SAMPLE_MEM_TEMP;
    }
    if (got[F_BW]) {
        s->nvlink_bw_total = v[F_BW];
        s->valid |= GPU_SAMPLE_NVLINK_BW;
    }
    if (got[F_FLIT] && got[F_DATA] && got[F_REPLAY] && got[F_RECOVERY]) {
        s->nvlink_crc_flit = v[F_FLIT];
        s->nvlink_crc_data = v[F_DATA];
        s->nvlink_replay = v[F_REPLAY];
        s->nvlink_recovery = v[F_RECOVERY];
        s->valid |= GPU_SAMPLE_NVLINK_ERRORS;
    }
}

int gpu_sample_read(struct gpu_lib *lib, unsigned index, struct gpu_sample *ret, struct err *e)
{
    struct gpu_sample s = {0};
    nvmlDevice_t dev = NULL;
    nvmlReturn_t r = NV(lib, nvmlDeviceGetHandleByIndex_v2, index, &dev);
    if (r == NVML_ERROR_GPU_IS_LOST) {
        *ret = (struct gpu_sample){.lost = true};
        return 0;
    }
    if (r != NVML_SUCCESS)
        return nv_err(lib, r, e, "nvmlDeviceGetHandleByIndex_v2(gpu %u)", index);
    void (*const steps[])(struct gpu_lib *, nvmlDevice_t, struct gpu_sample *) = {
        basic_read, memory_read, health_read, memory_health_read, violations_read, fields_read,
    };
    for (size_t i = 0; i < ARRAY_SIZE(steps) && !s.lost; i++)
        steps[i](lib, dev, &s);
    if (s.lost)
        s = (struct gpu_sample){.lost = true};
    *ret = s;
    return 0;
}

int gpu_process_count(struct gpu_lib *lib, unsigned index, unsigned *ret, struct err *e)
{
    nvmlDevice_t dev = NULL;
    nvmlReturn_t r = NV(lib, nvmlDeviceGetHandleByIndex_v2, index, &dev);
    if (r != NVML_SUCCESS)
        return nv_err(lib, r, e, "nvmlDeviceGetHandleByIndex_v2(gpu %u)", index);
    /* asked with no room: NVML answers the count (INSUFFICIENT_SIZE when there are any) */
    unsigned n = 0;
    r = NV(lib, nvmlDeviceGetComputeRunningProcesses_v3, dev, &n, NULL);
    if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE)
        return nv_err(lib, r, e, "nvmlDeviceGetComputeRunningProcesses_v3(gpu %u)", index);
    *ret = n;
    return 0;
}
