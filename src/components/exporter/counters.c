/* SPDX-License-Identifier: Apache-2.0 */
/* The DCGM field catalogue and the counters CSV parser. */
#include <pthread.h>
#include <string.h>

#include "exporter.h"

#define PROF(name, f)                                   \
    {                                                   \
        name, EXP_SRC_PROF, EXP_MIG_OWN, false, NULL, f \
    }

static const struct exp_field catalogue[] = {
    {"DCGM_FI_DEV_SM_CLOCK", EXP_SRC_SM_CLOCK, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_MEM_CLOCK", EXP_SRC_MEM_CLOCK, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_MAX_SM_CLOCK", EXP_SRC_MAX_SM_CLOCK, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_MAX_MEM_CLOCK", EXP_SRC_MAX_MEM_CLOCK, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_MEMORY_TEMP", EXP_SRC_MEM_TEMP, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_GPU_TEMP", EXP_SRC_GPU_TEMP, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_POWER_USAGE", EXP_SRC_POWER, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_POWER_MGMT_LIMIT", EXP_SRC_POWER_LIMIT, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", EXP_SRC_ENERGY, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", EXP_SRC_PCIE_REPLAY, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_GPU_UTIL", EXP_SRC_UTIL_GPU, EXP_MIG_NONE, false, NULL},
    {"DCGM_FI_DEV_MEM_COPY_UTIL", EXP_SRC_UTIL_MEM, EXP_MIG_NONE, false, NULL},
    {"DCGM_FI_DEV_ENC_UTIL", EXP_SRC_UTIL_ENC, EXP_MIG_NONE, false, NULL},
    {"DCGM_FI_DEV_DEC_UTIL", EXP_SRC_UTIL_DEC, EXP_MIG_NONE, false, NULL},
    {"DCGM_FI_DEV_XID_ERRORS", EXP_SRC_XID, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_FB_TOTAL", EXP_SRC_FB_TOTAL, EXP_MIG_GPU_ONLY, false, NULL},
    {"DCGM_FI_DEV_FB_FREE", EXP_SRC_FB_FREE, EXP_MIG_GPU_ONLY, false, NULL},
    {"DCGM_FI_DEV_FB_USED", EXP_SRC_FB_USED, EXP_MIG_GPU_ONLY, false, NULL},
    {"DCGM_FI_DEV_FB_RESERVED", EXP_SRC_FB_RESERVED, EXP_MIG_GPU_ONLY, false, NULL},
    {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", EXP_SRC_REMAP_UNC, EXP_MIG_PER_INSTANCE, false,
     NULL},
    {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", EXP_SRC_REMAP_COR, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_ROW_REMAP_FAILURE", EXP_SRC_REMAP_FAILURE, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_ROW_REMAP_PENDING", EXP_SRC_REMAP_PENDING, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", EXP_SRC_NVLINK_BW, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", EXP_SRC_NVLINK_CRC_FLIT, EXP_MIG_PER_INSTANCE,
     false, NULL},
    {"DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", EXP_SRC_NVLINK_CRC_DATA, EXP_MIG_PER_INSTANCE,
     false, NULL},
    {"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", EXP_SRC_NVLINK_REPLAY, EXP_MIG_PER_INSTANCE,
     false, NULL},
    {"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", EXP_SRC_NVLINK_RECOVERY, EXP_MIG_PER_INSTANCE,
     false, NULL},
    {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", EXP_SRC_ECC_SBE_VOL, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", EXP_SRC_ECC_DBE_VOL, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", EXP_SRC_ECC_SBE_AGG, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", EXP_SRC_ECC_DBE_AGG, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_RETIRED_SBE", EXP_SRC_RETIRED_SBE, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_RETIRED_DBE", EXP_SRC_RETIRED_DBE, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_RETIRED_PENDING", EXP_SRC_RETIRED_PENDING, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_POWER_VIOLATION", EXP_SRC_VIOL_POWER, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_THERMAL_VIOLATION", EXP_SRC_VIOL_THERMAL, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_SYNC_BOOST_VIOLATION", EXP_SRC_VIOL_SYNC_BOOST, EXP_MIG_PER_INSTANCE, false,
     NULL},
    {"DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", EXP_SRC_VIOL_BOARD_LIMIT, EXP_MIG_PER_INSTANCE, false,
     NULL},
    {"DCGM_FI_DEV_LOW_UTIL_VIOLATION", EXP_SRC_VIOL_LOW_UTIL, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DEV_RELIABILITY_VIOLATION", EXP_SRC_VIOL_RELIABILITY, EXP_MIG_PER_INSTANCE, false,
     NULL},
    {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", EXP_SRC_CLOCK_EVENT_REASONS, EXP_MIG_PER_INSTANCE, false,
     NULL},
    {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", EXP_SRC_CLOCK_EVENT_REASONS, EXP_MIG_PER_INSTANCE, false,
     NULL},
    {"DCGM_EXP_CLOCK_EVENTS_COUNT", EXP_SRC_CLOCK_EVENTS_COUNT, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_EXP_XID_ERRORS_COUNT", EXP_SRC_XID_COUNT, EXP_MIG_PER_INSTANCE, false, NULL},
    {"DCGM_FI_DRIVER_VERSION", EXP_SRC_LABEL_DRIVER_VERSION, EXP_MIG_PER_INSTANCE, true, NULL},
    {"DCGM_FI_DEV_SERIAL", EXP_SRC_LABEL_SERIAL, EXP_MIG_PER_INSTANCE, true, NULL},
    /* The profiling fields, from GPU Performance Monitoring where a GPU has it (gpu.h's
     * GPU_PROF_*; test exporter-core checks each name against gpu_prof_name). */
    PROF("DCGM_FI_PROF_GR_ENGINE_ACTIVE", GPU_PROF_GR_ENGINE_ACTIVE),
    PROF("DCGM_FI_PROF_SM_ACTIVE", GPU_PROF_SM_ACTIVE),
    PROF("DCGM_FI_PROF_SM_OCCUPANCY", GPU_PROF_SM_OCCUPANCY),
    PROF("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", GPU_PROF_PIPE_TENSOR_ACTIVE),
    PROF("DCGM_FI_PROF_DRAM_ACTIVE", GPU_PROF_DRAM_ACTIVE),
    PROF("DCGM_FI_PROF_PIPE_FP64_ACTIVE", GPU_PROF_PIPE_FP64_ACTIVE),
    PROF("DCGM_FI_PROF_PIPE_FP32_ACTIVE", GPU_PROF_PIPE_FP32_ACTIVE),
    PROF("DCGM_FI_PROF_PIPE_FP16_ACTIVE", GPU_PROF_PIPE_FP16_ACTIVE),
    PROF("DCGM_FI_PROF_PCIE_TX_BYTES", GPU_PROF_PCIE_TX_BYTES),
    PROF("DCGM_FI_PROF_PCIE_RX_BYTES", GPU_PROF_PCIE_RX_BYTES),
    PROF("DCGM_FI_PROF_NVLINK_TX_BYTES", GPU_PROF_NVLINK_TX_BYTES),
    PROF("DCGM_FI_PROF_NVLINK_RX_BYTES", GPU_PROF_NVLINK_RX_BYTES),

    /* Known, but NVML (through gpuop's GPU model) cannot provide them. */
    {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", EXP_SRC_UNSUPPORTED, 0, false,
     "vGPU license state is reported only by vGPU guest drivers, which gpuop does not read"},
    {"DCGM_FI_DEV_NVLINK_BANDWIDTH_L0", EXP_SRC_UNSUPPORTED, 0, false,
     "per-link NVLink counters are not sampled; use DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"},
    {"DCGM_EXP_GPU_HEALTH_STATUS", EXP_SRC_UNSUPPORTED, 0, false,
     "DCGM health watches have no NVML equivalent; see gpuop_exporter_gpu_up"},
    {"DCGM_EXP_P2P_STATUS", EXP_SRC_UNSUPPORTED, 0, false, "P2P status is not sampled"},
    {"DCGM_FI_DEV_FAN_SPEED", EXP_SRC_UNSUPPORTED, 0, false, "fan speed is not sampled"},
    {"DCGM_FI_DEV_APP_SM_CLOCK", EXP_SRC_UNSUPPORTED, 0, false,
     "application clocks are not sampled"},
    {"DCGM_FI_DEV_APP_MEM_CLOCK", EXP_SRC_UNSUPPORTED, 0, false,
     "application clocks are not sampled"},
    {"DCGM_FI_NVML_VERSION", EXP_SRC_UNSUPPORTED, 0, true, "the NVML version is not read"},
    {"DCGM_FI_DEV_BRAND", EXP_SRC_UNSUPPORTED, 0, true, "the brand name is not read"},
    {"DCGM_FI_DEV_OEM_INFOROM_VER", EXP_SRC_UNSUPPORTED, 0, true, "inforom versions are not read"},
    {"DCGM_FI_DEV_ECC_INFOROM_VER", EXP_SRC_UNSUPPORTED, 0, true, "inforom versions are not read"},
    {"DCGM_FI_DEV_POWER_INFOROM_VER", EXP_SRC_UNSUPPORTED, 0, true,
     "inforom versions are not read"},
    {"DCGM_FI_DEV_INFOROM_IMAGE_VER", EXP_SRC_UNSUPPORTED, 0, true,
     "inforom versions are not read"},
    {"DCGM_FI_DEV_VBIOS_VERSION", EXP_SRC_UNSUPPORTED, 0, true, "the VBIOS version is not read"},
};

const char *const exp_clock_event_names[EXP_CLOCK_EVENTS] = {
    "gpu_idle",   "clocks_setting", "power_cap",      "hw_slowdown",    "sync_boost",
    "sw_thermal", "hw_thermal",     "hw_power_brake", "display_clocks",
};

/* dcgm-exporter's default set (etc/default-counters.csv): same fields, types and help. */
const char exp_default_counters_csv[] =
    "DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz).\n"
    "DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).\n"
    "DCGM_FI_DEV_MEMORY_TEMP, gauge, Memory temperature (in C).\n"
    "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
    "DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).\n"
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy consumption since boot (in mJ).\n"
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter, Total number of PCIe retries.\n"
    "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
    "DCGM_FI_DEV_MEM_COPY_UTIL, gauge, Memory utilization (in %).\n"
    "DCGM_FI_DEV_ENC_UTIL, gauge, Encoder utilization (in %).\n"
    "DCGM_FI_DEV_DEC_UTIL, gauge, Decoder utilization (in %).\n"
    "DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.\n"
    "DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).\n"
    "DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n"
    "DCGM_FI_DEV_FB_RESERVED, gauge, Framebuffer memory reserved (in MiB).\n"
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, counter, Total number of NVLink bandwidth counters for "
    "all lanes.\n"
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS, gauge, vGPU License status\n"
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for uncorrectable "
    "errors\n"
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for correctable "
    "errors\n"
    "DCGM_FI_DEV_ROW_REMAP_FAILURE, gauge, Whether remapping of rows has failed\n"
    "DCGM_FI_DRIVER_VERSION, label, Driver Version\n"
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, Ratio of time the graphics engine is active.\n"
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active.\n"
    "DCGM_FI_PROF_DRAM_ACTIVE, gauge, Ratio of cycles the device memory interface is active "
    "sending or receiving data.\n"
    "DCGM_FI_PROF_PCIE_TX_BYTES, gauge, The rate of data transmitted over the PCIe bus - "
    "including both protocol headers and data payloads - in bytes per second.\n"
    "DCGM_FI_PROF_PCIE_RX_BYTES, gauge, The rate of data received over the PCIe bus - including "
    "both protocol headers and data payloads - in bytes per second.\n";

const struct exp_field *exp_field_lookup(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(catalogue); i++)
        if (strcmp(catalogue[i].name, name) == 0)
            return &catalogue[i];
    return NULL;
}

const char *exp_field_known_names(void)
{
    static char buf[4096];
    static bool done;
    /* Built from constant data; racing builders write identical bytes. */
    if (!done) {
        size_t off = 0;
        for (size_t i = 0; i < ARRAY_SIZE(catalogue); i++) {
            int n =
                snprintf(buf + off, sizeof(buf) - off, "%s%s", i ? ", " : "", catalogue[i].name);
            if (n < 0 || (size_t)n >= sizeof(buf) - off)
                break;
            off += (size_t)n;
        }
        done = true;
    }
    return buf;
}

void exp_counters_free(struct exp_counters *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        free(c->items[i].help);
    free(c->items);
    free(c);
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

#define COUNTERS_MAX_LINE 4096
#define COUNTERS_MAX      512

static int parse_line(struct exp_counters *c, char *line, unsigned lineno, const char *source,
                      struct err *e)
{
    for (const char *p = line; *p; p++)
        if ((unsigned char)*p < 0x20 && *p != '\t' && *p != '\r')
            return err_set(e, -EINVAL, "%s:%u: control character 0x%02x in line", source, lineno,
                           (unsigned char)*p);
    char *s = trim(line);
    if (!*s || *s == '#')
        return 0;
    char *c1 = strchr(s, ',');
    char *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (!c1 || !c2)
        return err_set(e, -EINVAL,
                       "%s:%u: expected \"DCGM field, prometheus type, help\", got \"%s\"", source,
                       lineno, s);
    *c1 = '\0';
    *c2 = '\0';
    char *name = trim(s), *type = trim(c1 + 1), *help = trim(c2 + 1);
    if (!*name)
        return err_set(e, -EINVAL, "%s:%u: empty DCGM field name", source, lineno);
    const struct exp_field *f = exp_field_lookup(name);
    if (!f)
        return err_set(e, EXP_UNKNOWN_FIELD, "%s:%u: unknown field \"%s\"", source, lineno, name);
    enum exp_kind kind;
    if (strcmp(type, "gauge") == 0)
        kind = EXP_GAUGE;
    else if (strcmp(type, "counter") == 0)
        kind = EXP_COUNTER;
    else if (strcmp(type, "label") == 0)
        kind = EXP_LABEL;
    else
        return err_set(e, -EINVAL,
                       "%s:%u: field %s: unknown type \"%s\" (expected gauge, counter or label)",
                       source, lineno, name, type);
    if (f->label && kind != EXP_LABEL)
        return err_set(e, -EINVAL, "%s:%u: field %s is a string; its type must be label, not %s",
                       source, lineno, name, type);
    if (!f->label && kind == EXP_LABEL)
        return err_set(e, -EINVAL,
                       "%s:%u: field %s is numeric; its type must be gauge or counter, not label",
                       source, lineno, name);
    for (size_t i = 0; i < c->n; i++)
        if (c->items[i].field == f)
            return err_set(e, -EINVAL, "%s:%u: field %s already listed on line %u", source, lineno,
                           name, c->items[i].line);
    if (c->n >= COUNTERS_MAX)
        return err_set(e, -E2BIG, "%s:%u: more than %d counters", source, lineno, COUNTERS_MAX);
    c->items = xrealloc(c->items, (c->n + 1) * sizeof(*c->items));
    c->items[c->n++] =
        (struct exp_counter){.field = f, .kind = kind, .help = xstrdup(help), .line = lineno};
    return 0;
}

int exp_counters_parse(const char *text, size_t len, const char *source, struct exp_counters **ret,
                       struct err *e)
{
    _cleanup_(exp_counters_freep) struct exp_counters *c = xcalloc(1, sizeof(*c));
    unsigned lineno = 0;
    size_t pos = 0;
    while (pos < len) {
        lineno++;
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - (text + pos)) : len - pos;
        if (ll > COUNTERS_MAX_LINE)
            return err_set(e, -EINVAL, "%s:%u: line longer than %d bytes", source, lineno,
                           COUNTERS_MAX_LINE);
        if (memchr(text + pos, '\0', ll))
            return err_set(e, -EINVAL, "%s:%u: NUL byte in line", source, lineno);
        char line[COUNTERS_MAX_LINE + 1];
        memcpy(line, text + pos, ll);
        line[ll] = '\0';
        int r = parse_line(c, line, lineno, source, e);
        if (r < 0)
            return r;
        pos += ll + (nl ? 1 : 0);
    }
    if (c->n == 0)
        return err_set(e, -EINVAL, "%s: no counters (every line is empty or a comment)", source);
    *ret = steal_ptr(&c);
    return 0;
}

int exp_counters_load(const char *path, struct exp_counters **ret, struct err *e)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = file_read_all(path, 1u << 20, &text, &len, e);
    if (r < 0)
        return err_prefix(e, "counters file");
    return exp_counters_parse(text, len, path, ret, e);
}

int exp_counters_default(struct exp_counters **ret, struct err *e)
{
    return exp_counters_parse(exp_default_counters_csv, strlen(exp_default_counters_csv),
                              "built-in default counters", ret, e);
}

size_t exp_counters_log_unsupported(const struct exp_counters *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++) {
        const struct exp_field *f = c->items[i].field;
        if (f->src != EXP_SRC_UNSUPPORTED)
            continue;
        log_warn("exporter", "field not supported, not exported", "field=%s reason=\"%s\"", f->name,
                 f->reason);
        n++;
    }
    return n;
}

bool exp_counters_want_prof(const struct exp_counters *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->items[i].field->src == EXP_SRC_PROF)
            return true;
    return false;
}
