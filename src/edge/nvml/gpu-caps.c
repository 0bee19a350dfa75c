/* SPDX-License-Identifier: Apache-2.0 */
/* MIG capability minors, the profiling fields' names and PCI bus ids (gpu.h): pure, for the cores
 * that take the GPU model without the binding (the device plugin, the CDI generator, the exporter).
 */
#include <stdio.h>
#include <string.h>

#include "gpu.h"

/* The minor mig-minors lists for "gpu<g>/gi<i>/access" or "gpu<g>/gi<i>/ci<c>/access"; -1 when
 * it lists none (or the line does not parse). */
static long minors_find(const char *text, unsigned gpu, unsigned gi, int ci)
{
    char want[64];
    if (ci < 0)
        snprintf(want, sizeof(want), "gpu%u/gi%u/access ", gpu, gi);
    else
        snprintf(want, sizeof(want), "gpu%u/gi%u/ci%d/access ", gpu, gi, ci);
    size_t wl = strlen(want);
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > wl && len - wl < 12 && strncmp(line, want, wl) == 0) {
            char num[16];
            memcpy(num, line + wl, len - wl);
            num[len - wl] = 0;
            unsigned v;
            if (parse_uint(num, &v) == 0)
                return v;
        }
        line = nl ? nl + 1 : NULL;
    }
    return -1;
}

unsigned gpu_mig_cap_minor(const char *mig_minors, unsigned gpu_minor, unsigned gi, int ci)
{
    if (mig_minors) {
        long v = minors_find(mig_minors, gpu_minor, gi, ci);
        if (v >= 0)
            return (unsigned)v;
    }
    unsigned base = 3 + gpu_minor * 15 * 9 + gi * 9;
    return ci < 0 ? base : base + 1 + (unsigned)ci;
}

/* DCGM's names and field ids (NVIDIA/DCGM, dcgmlib/dcgm_fields.h). */
static const struct {
    const char *name;
    unsigned dcgm_id;
} prof_fields[GPU_PROF_COUNT] = {
    [GPU_PROF_GR_ENGINE_ACTIVE] = {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1001},
    [GPU_PROF_SM_ACTIVE] = {"DCGM_FI_PROF_SM_ACTIVE", 1002},
    [GPU_PROF_SM_OCCUPANCY] = {"DCGM_FI_PROF_SM_OCCUPANCY", 1003},
    [GPU_PROF_PIPE_TENSOR_ACTIVE] = {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1004},
    [GPU_PROF_DRAM_ACTIVE] = {"DCGM_FI_PROF_DRAM_ACTIVE", 1005},
    [GPU_PROF_PIPE_FP64_ACTIVE] = {"DCGM_FI_PROF_PIPE_FP64_ACTIVE", 1006},
    [GPU_PROF_PIPE_FP32_ACTIVE] = {"DCGM_FI_PROF_PIPE_FP32_ACTIVE", 1007},
    [GPU_PROF_PIPE_FP16_ACTIVE] = {"DCGM_FI_PROF_PIPE_FP16_ACTIVE", 1008},
    [GPU_PROF_PCIE_TX_BYTES] = {"DCGM_FI_PROF_PCIE_TX_BYTES", 1009},
    [GPU_PROF_PCIE_RX_BYTES] = {"DCGM_FI_PROF_PCIE_RX_BYTES", 1010},
    [GPU_PROF_NVLINK_TX_BYTES] = {"DCGM_FI_PROF_NVLINK_TX_BYTES", 1011},
    [GPU_PROF_NVLINK_RX_BYTES] = {"DCGM_FI_PROF_NVLINK_RX_BYTES", 1012},
};

const char *gpu_prof_name(enum gpu_prof_field f)
{
    return (unsigned)f < GPU_PROF_COUNT ? prof_fields[f].name : NULL;
}

unsigned gpu_prof_dcgm_id(enum gpu_prof_field f)
{
    return (unsigned)f < GPU_PROF_COUNT ? prof_fields[f].dcgm_id : 0;
}

/* ---- PCI bus ids ---- */

static int hex_field(const char *s, size_t len, unsigned max, unsigned *ret)
{
    uint64_t v;
    if (len > 8 || hex_parse(s, len, &v) < 0)
        return -EINVAL;
    if (v > max)
        return -ERANGE;
    *ret = (unsigned)v;
    return 0;
}

int gpu_bus_id_parse(const char *s, unsigned *domain, unsigned *bus, unsigned *dev, unsigned *fn)
{
    if (!s)
        return -EINVAL;
    const char *c1 = strchr(s, ':');
    const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    const char *dot = c2 ? strchr(c2 + 1, '.') : NULL;
    if (!dot)
        return -EINVAL;
    unsigned d, b, v, f;
    if (hex_field(s, (size_t)(c1 - s), UINT32_MAX, &d) < 0 ||
        hex_field(c1 + 1, (size_t)(c2 - c1 - 1), 0xff, &b) < 0 ||
        hex_field(c2 + 1, (size_t)(dot - c2 - 1), 0x1f, &v) < 0 ||
        hex_field(dot + 1, strlen(dot + 1), 7, &f) < 0)
        return -EINVAL;
    *domain = d;
    *bus = b;
    *dev = v;
    *fn = f;
    return 0;
}

int gpu_bus_id_sysfs(const char *bus_id, char *buf, size_t n)
{
    unsigned d, b, v, f;
    if (gpu_bus_id_parse(bus_id, &d, &b, &v, &f) < 0)
        return -EINVAL;
    int w = snprintf(buf, n, "%04x:%02x:%02x.%x", d, b, v, f);
    return w < 0 || (size_t)w >= n ? -ENOBUFS : 0;
}
