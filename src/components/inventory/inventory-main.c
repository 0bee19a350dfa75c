/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop inventory`: what NVML reports, as a table (and topology matrix) or as JSON. */
#include <jansson.h>
#include <string.h>

#include "gpu.h"
#include "svc.h"

struct inventory_opts {
    bool json;
    bool no_topology;
    const char *library;
};

static const struct svc_option inventory_options[] = {
    {.flag = "json",
     .kind = SVC_FLAG,
     .off = offsetof(struct inventory_opts, json),
     .help = "machine-readable JSON on stdout instead of the tables"},
    {.flag = "no-topology",
     .kind = SVC_FLAG,
     .off = offsetof(struct inventory_opts, no_topology),
     .help = "leave out the topology matrix"},
    {.flag = "library",
     .kind = SVC_STRING,
     .off = offsetof(struct inventory_opts, library),
     .metavar = "PATH",
     .help = "the NVML library to load (overrides GPUOP_NVML_LIBRARY)"},
    {0},
};

/* ---- text --------------------------------------------------------------------------------- */

static const char *topo_word(unsigned level)
{
    switch (level) {
    case GPU_TOPO_INTERNAL:
        return "X";
    case GPU_TOPO_SINGLE:
        return "PIX";
    case GPU_TOPO_MULTIPLE:
        return "PXB";
    case GPU_TOPO_HOSTBRIDGE:
        return "PHB";
    case GPU_TOPO_NODE:
        return "NODE";
    default:
        return "SYS";
    }
}

static void topo_cell(const struct gpu_inventory *inv, size_t a, size_t b, char *buf, size_t n)
{
    size_t i = a * inv->n_gpus + b;
    if (a == b)
        snprintf(buf, n, "X");
    else if (inv->nvlinks[i] > 0)
        snprintf(buf, n, "NV%u", inv->nvlinks[i]);
    else
        snprintf(buf, n, "%s", topo_word(inv->topo_level[i]));
}

static void cuda_version(int v, char *buf, size_t n)
{
    if (v > 0)
        snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
    else
        snprintf(buf, n, "unknown");
}

static void mig_mode_word(const struct gpu_device *g, char *buf, size_t n)
{
    if (!g->mig_capable)
        snprintf(buf, n, "n/a");
    else if (g->mig_enabled == g->mig_pending)
        snprintf(buf, n, "%s", g->mig_enabled ? "enabled" : "disabled");
    else
        snprintf(buf, n, "%s->%s", g->mig_enabled ? "on" : "off", g->mig_pending ? "on" : "off");
}

static void print_gpu(const struct gpu_device *g)
{
    if (g->lost) {
        printf("%-4u %-26s %-42s %-17s (GPU is lost)\n", g->index, g->name[0] ? g->name : "?",
               g->uuid[0] ? g->uuid : "-", g->bus_id[0] ? g->bus_id : "-");
        return;
    }
    char mem[32], cc[32], mig[24], power[16], numa[16];
    if (g->memory_total_bytes)
        snprintf(mem, sizeof(mem), "%llu MiB", (unsigned long long)(g->memory_total_bytes >> 20));
    else
        snprintf(mem, sizeof(mem), "n/a");
    if (g->cc_major > 0)
        snprintf(cc, sizeof(cc), "%d.%d", g->cc_major, g->cc_minor);
    else
        snprintf(cc, sizeof(cc), "n/a");
    mig_mode_word(g, mig, sizeof(mig));
    if (g->power_limit_mw)
        snprintf(power, sizeof(power), "%u W", g->power_limit_mw / 1000);
    else
        snprintf(power, sizeof(power), "n/a");
    if (g->numa_node >= 0)
        snprintf(numa, sizeof(numa), "%d", g->numa_node);
    else
        snprintf(numa, sizeof(numa), "n/a");
    printf("%-4u %-26s %-42s %-17s %-11s %-4s %-10s %-9s %-7s %s\n", g->index, g->name, g->uuid,
           g->bus_id, mem, cc, gpu_arch_name(g->arch), mig, power, numa);
    /* Grace systems: the CPU link and the addressing mode, where the driver reports them */
    const char *am = gpu_addressing_name(g->addressing_mode);
    if (g->c2c >= 0 || am)
        printf("     NVLink-C2C %s, addressing mode %s\n",
               g->c2c < 0 ? "n/a" : (g->c2c ? "enabled" : "disabled"), am ? am : "n/a");
    for (size_t k = 0; k < g->n_mig; k++) {
        const struct gpu_mig_device *m = &g->mig[k];
        printf("     MIG %-14s %-46s gi %-2u ci %-2u %3u SMs %6llu MiB\n", m->profile, m->uuid,
               m->gi_id, m->ci_id, m->multiprocessors, (unsigned long long)m->memory_mib);
    }
}

static void print_topology(const struct gpu_inventory *inv)
{
    printf("\nTopology\n%-8s", "");
    for (size_t b = 0; b < inv->n_gpus; b++)
        printf("GPU%-5zu", b);
    printf("NUMA\n");
    for (size_t a = 0; a < inv->n_gpus; a++) {
        printf("GPU%-5zu", a);
        for (size_t b = 0; b < inv->n_gpus; b++) {
            char cell[16];
            topo_cell(inv, a, b, cell, sizeof(cell));
            printf("%-8s", cell);
        }
        if (inv->gpus[a].numa_node >= 0)
            printf("%d\n", inv->gpus[a].numa_node);
        else
            printf("n/a\n");
    }
    printf("\nLegend: X self; NV<n> n NVLinks; PIX one PCIe bridge; PXB several PCIe bridges;\n"
           "PHB a PCIe host bridge; NODE host bridges within a NUMA node; SYS across NUMA nodes\n");
}

static void print_text(const struct gpu_inventory *inv, const char *lib_path, bool topology)
{
    char cuda[16];
    cuda_version(inv->cuda_driver_version, cuda, sizeof(cuda));
    printf("NVML: %s\nDriver %s, CUDA %s, %zu GPU%s\n\n", lib_path,
           inv->driver_version[0] ? inv->driver_version : "unknown", cuda, inv->n_gpus,
           inv->n_gpus == 1 ? "" : "s");
    printf("%-4s %-26s %-42s %-17s %-11s %-4s %-10s %-9s %-7s %s\n", "GPU", "NAME", "UUID",
           "BUS ID", "MEMORY", "CC", "ARCH", "MIG", "POWER", "NUMA");
    for (size_t i = 0; i < inv->n_gpus; i++)
        print_gpu(&inv->gpus[i]);
    if (topology && inv->n_gpus > 0)
        print_topology(inv);
}

/* ---- JSON --------------------------------------------------------------------------------- */

static json_t *hex32(uint32_t v)
{
    char buf[16];
    snprintf(buf, sizeof(buf), "0x%08X", v);
    return json_string(buf);
}

static json_t *mig_json(const struct gpu_mig_device *m)
{
    return json_pack("{s:s, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:{s:I, s:I, s:I, s:I, "
                     "s:I}, s:{s:I, s:I}}",
                     "uuid", m->uuid, "index", (json_int_t)m->index, "profile", m->profile, "gi_id",
                     (json_int_t)m->gi_id, "ci_id", (json_int_t)m->ci_id, "gi_profile_id",
                     (json_int_t)m->gi_profile_id, "gi_slices", (json_int_t)m->gi_slices,
                     "ci_slices", (json_int_t)m->ci_slices, "multiprocessors",
                     (json_int_t)m->multiprocessors, "memory_mib", (json_int_t)m->memory_mib,
                     "engines", "copy", (json_int_t)m->copy_engines, "decoders",
                     (json_int_t)m->decoders, "encoders", (json_int_t)m->encoders, "jpegs",
                     (json_int_t)m->jpegs, "ofas", (json_int_t)m->ofas, "placement", "start",
                     (json_int_t)m->gi_placement_start, "size", (json_int_t)m->gi_placement_size);
}

static json_t *gpu_json(const struct gpu_device *g)
{
    char cc[32], cls[16];
    snprintf(cc, sizeof(cc), "%d.%d", g->cc_major, g->cc_minor);
    snprintf(cls, sizeof(cls), "0x%04X", g->pci_class);
    json_t *mig = json_array();
    for (size_t k = 0; k < g->n_mig; k++)
        json_array_append_new(mig, mig_json(&g->mig[k]));
    json_t *o = json_pack(
        "{s:I, s:s, s:s, s:s, s:s, s:I, s:o, s:o, s:s, s:I, s:I, s:I, s:s, s:s, s:I, s:I, s:I, "
        "s:I, s:b}",
        "index", (json_int_t)g->index, "name", g->name, "uuid", g->uuid, "serial", g->serial,
        "bus_id", g->bus_id, "minor", (json_int_t)g->minor, "pci_device_id",
        hex32(g->pci_device_id), "pci_subsystem_id", hex32(g->pci_subsystem_id), "pci_class", cls,
        "numa_node", (json_int_t)g->numa_node, "memory_total_bytes",
        (json_int_t)g->memory_total_bytes, "memory_reserved_bytes",
        (json_int_t)g->memory_reserved_bytes, "compute_capability", cc, "architecture",
        gpu_arch_name(g->arch), "brand", (json_int_t)g->brand, "power_limit_mw",
        (json_int_t)g->power_limit_mw, "max_sm_clock_mhz", (json_int_t)g->max_sm_clock_mhz,
        "max_mem_clock_mhz", (json_int_t)g->max_mem_clock_mhz, "lost", g->lost);
    const char *am = gpu_addressing_name(g->addressing_mode);
    json_object_set_new(o, "c2c", g->c2c < 0 ? json_null() : json_boolean(g->c2c));
    json_object_set_new(o, "addressing_mode", am ? json_string(am) : json_null());
    json_object_set_new(o, "mig",
                        json_pack("{s:b, s:b, s:b, s:o}", "capable", g->mig_capable, "enabled",
                                  g->mig_enabled, "pending", g->mig_pending, "devices", mig));
    return o;
}

static json_t *topology_json(const struct gpu_inventory *inv)
{
    json_t *levels = json_array(), *links = json_array(), *matrix = json_array();
    for (size_t a = 0; a < inv->n_gpus; a++) {
        json_t *l = json_array(), *n = json_array(), *m = json_array();
        for (size_t b = 0; b < inv->n_gpus; b++) {
            char cell[16];
            topo_cell(inv, a, b, cell, sizeof(cell));
            json_array_append_new(l, json_integer(inv->topo_level[a * inv->n_gpus + b]));
            json_array_append_new(n, json_integer(inv->nvlinks[a * inv->n_gpus + b]));
            json_array_append_new(m, json_string(cell));
        }
        json_array_append_new(levels, l);
        json_array_append_new(links, n);
        json_array_append_new(matrix, m);
    }
    return json_pack("{s:o, s:o, s:o}", "levels", levels, "nvlinks", links, "matrix", matrix);
}

static int print_json(const struct gpu_inventory *inv, const char *lib_path)
{
    char cuda[16];
    cuda_version(inv->cuda_driver_version, cuda, sizeof(cuda));
    json_t *gpus = json_array();
    for (size_t i = 0; i < inv->n_gpus; i++)
        json_array_append_new(gpus, gpu_json(&inv->gpus[i]));
    json_t *root =
        json_pack("{s:s, s:s, s:I, s:s, s:o, s:o}", "library", lib_path, "driver_version",
                  inv->driver_version, "cuda_driver_version", (json_int_t)inv->cuda_driver_version,
                  "cuda_version", cuda, "gpus", gpus, "topology", topology_json(inv));
    if (!root)
        return -ENOMEM;
    int r = json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (r < 0)
        return -EIO;
    fputc('\n', stdout);
    return 0;
}

/* ---- main --------------------------------------------------------------------------------- */

static int inventory_run(struct svc *s, struct err *e)
{
    const struct inventory_opts *o = svc_state(s);
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    int r = gpu_lib_open(o->library, &lib, e);
    if (r < 0 || (r = gpu_inventory_read(lib, &inv, e)) < 0)
        return r;
    if (o->json) {
        if (print_json(inv, gpu_lib_path(lib)) < 0)
            return err_set(e, -EIO, "cannot write JSON to stdout");
    } else {
        print_text(inv, gpu_lib_path(lib), !o->no_topology);
    }
    if (fflush(stdout) != 0)
        return err_set(e, -EIO, "write to stdout failed");
    return 0;
}

const struct svc_component inventory_component = {
    .name = "inventory",
    .usage = "Usage: gpuop inventory [--json] [--no-topology] [--library PATH]\n\n"
             "Shows the GPUs NVML reports: driver and CUDA versions, every GPU (index, name,\n"
             "UUID, PCI bus id, memory, compute capability, architecture, MIG mode and MIG\n"
             "devices, power limit, NUMA node), then the GPU-to-GPU topology matrix as\n"
             "`nvidia-smi topo -m` prints it (X, NV<links>, PIX, PXB, PHB, NODE, SYS).\n",
    .options = {inventory_options},
    .epilogue = "Environment:\n"
                "  GPUOP_NVML_LIBRARY  path of libnvidia-ml.so.1 (default: the dynamic loader's\n"
                "                      search for \"libnvidia-ml.so.1\")\n"
                "  GPUOP_SYSFS_ROOT    sysfs root for NUMA node and PCI class (default /sys)\n\n"
                "Exit status: 0 success, 1 NVML could not be loaded or read, 2 bad usage.\n",
    .state_size = sizeof(struct inventory_opts),
    .run = inventory_run,
};
