/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fleet file (GPUOP_SIM_FLEET): YAML into struct sim_fleet. The format is documented in
 * sim/fleets/README.md. Strict: unknown keys, wrong types, out-of-range values, MIG layouts
 * that do not fit and topology entries naming missing GPUs are errors naming the file and the
 * field path ("dgx.yaml: gpus[1].mig.instances[2]: ...").
 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "nvml-abi.h"
#include "simnvml.h"
#include "yamlcfg.h"

#define FLEET_CTX_MAX 256

static const struct {
    const char *name;
    unsigned arch;
    unsigned cores_per_sm, pcie_gen, mem_clock;
    const char *vbios;
} archs[] = {
    {"kepler", NVML_DEVICE_ARCH_KEPLER, 192, 3, 2505, "80.21.1F.00.01"},
    {"maxwell", NVML_DEVICE_ARCH_MAXWELL, 128, 3, 3004, "84.04.8A.00.01"},
    {"pascal", NVML_DEVICE_ARCH_PASCAL, 64, 3, 715, "86.00.4D.00.01"},
    {"volta", NVML_DEVICE_ARCH_VOLTA, 64, 3, 877, "88.00.4F.00.09"},
    {"turing", NVML_DEVICE_ARCH_TURING, 64, 3, 5001, "90.04.96.00.01"},
    {"ampere", NVML_DEVICE_ARCH_AMPERE, 64, 4, 1593, "92.00.45.00.03"},
    {"ada", NVML_DEVICE_ARCH_ADA, 128, 4, 6251, "95.04.29.00.01"},
    {"hopper", NVML_DEVICE_ARCH_HOPPER, 128, 5, 2619, "96.00.A5.00.01"},
    {"blackwell", NVML_DEVICE_ARCH_BLACKWELL, 128, 5, 3996, "97.00.88.00.01"},
};

static const struct {
    const char *name;
    unsigned level;
} topo_levels[] = {
    {"internal", NVML_TOPOLOGY_INTERNAL}, {"single", NVML_TOPOLOGY_SINGLE},
    {"multiple", NVML_TOPOLOGY_MULTIPLE}, {"hostbridge", NVML_TOPOLOGY_HOSTBRIDGE},
    {"node", NVML_TOPOLOGY_NODE},         {"system", NVML_TOPOLOGY_SYSTEM},
};

const char *sim_arch_name(unsigned arch)
{
    for (size_t i = 0; i < ARRAY_SIZE(archs); i++)
        if (archs[i].arch == arch)
            return archs[i].name;
    return "unknown";
}

const char *sim_topology_name(unsigned level)
{
    for (size_t i = 0; i < ARRAY_SIZE(topo_levels); i++)
        if (topo_levels[i].level == level)
            return topo_levels[i].name;
    return "unknown";
}

static int arch_index(unsigned arch)
{
    for (size_t i = 0; i < ARRAY_SIZE(archs); i++)
        if (archs[i].arch == arch)
            return (int)i;
    return -1;
}

void sim_fleet_free(struct sim_fleet *f)
{
    if (!f)
        return;
    free(f->path);
    free(f->gpus);
    free(f->pcie_level);
    free(f);
}

unsigned sim_fleet_nvlinks(const struct sim_fleet *f, unsigned a, unsigned b)
{
    if (a >= f->n_gpus || b >= f->n_gpus)
        return 0;
    unsigned n = 0;
    for (unsigned l = 0; l < f->gpus[a].n_links; l++)
        n += f->gpus[a].link_peer[l] == b;
    return n;
}

/* cfg_* name top-level fields "<file>.<key>"; we want "<file>: <key>". */
static int top_err(struct err *e, const char *name, int r)
{
    size_t n = strlen(name);
    if (r < 0 && strncmp(e->msg, name, n) == 0 && e->msg[n] == '.') {
        char tmp[ERR_MSG_MAX];
        snprintf(tmp, sizeof(tmp), "%s: %s", name, e->msg + n + 1);
        snprintf(e->msg, sizeof(e->msg), "%s", tmp);
    }
    return r;
}

static void name_brand(struct sim_gpu_spec *g)
{
    if (str_has_prefix(g->model, "Tesla"))
        g->brand = NVML_BRAND_TESLA;
    else if (strstr(g->model, "GeForce RTX"))
        g->brand = NVML_BRAND_GEFORCE_RTX;
    else if (strstr(g->model, "GeForce"))
        g->brand = NVML_BRAND_GEFORCE;
    else if (strstr(g->model, "Quadro"))
        g->brand = NVML_BRAND_QUADRO;
    else if (strstr(g->model, "RTX"))
        g->brand = NVML_BRAND_NVIDIA_RTX;
    else
        g->brand = NVML_BRAND_NVIDIA;
}

static unsigned default_sms(const struct sim_gpu_spec *g)
{
    static const struct {
        const char *needle;
        unsigned sms;
    } known[] = {
        {"H200", 132}, {"H100", 132}, {"A100", 108}, {"A30", 56},  {"L40S", 142}, {"L40", 142},
        {"L4", 58},    {"A10", 72},   {"T4", 40},    {"V100", 80}, {"B200", 148}, {"P100", 56},
    };
    for (size_t i = 0; i < ARRAY_SIZE(known); i++)
        if (strstr(g->model, known[i].needle))
            return known[i].sms;
    return 0;
}

/* "0000:18:00.0" or "00000000:18:00.0" (hex, any case). */
static int parse_bus_id(const char *s, unsigned *domain, unsigned *bus, unsigned *device)
{
    unsigned d, b, dev, fn;
    int consumed = 0;
    if (sscanf(s, "%x:%x:%x.%x%n", &d, &b, &dev, &fn, &consumed) != 4 ||
        (size_t)consumed != strlen(s) || b > 0xff || dev > 0x1f || fn != 0)
        return -EINVAL;
    for (const char *c = s; *c; c++)
        if (!isxdigit((unsigned char)*c) && *c != ':' && *c != '.')
            return -EINVAL;
    *domain = d;
    *bus = b;
    *device = dev;
    return 0;
}

static void set_bus(struct sim_gpu_spec *g, unsigned domain, unsigned bus, unsigned device)
{
    g->domain = domain;
    g->bus = bus;
    g->device = device;
    snprintf(g->bus_id, sizeof(g->bus_id), "%08X:%02X:%02X.0", domain, bus, device);
    snprintf(g->bus_id_legacy, sizeof(g->bus_id_legacy), "%04X:%02X:%02X.0", domain & 0xffff, bus,
             device);
}

static int get_pci_id(json_t *obj, const char *key, const char *ctx, bool required, uint32_t *ret,
                      struct err *e)
{
    int64_t v;
    int r = cfg_int64(obj, key, ctx, required, 0, 0xffffffffLL, &v, e);
    if (r <= 0)
        return r;
    if (v <= 0xffff)
        v = (v << 16) | 0x10de;
    if ((v & 0xffff) != 0x10de && strcmp(key, "pci_device_id") == 0)
        return err_set(e, -EINVAL,
                       "%s.%s: 0x%08" PRIX64 " is not an NVIDIA id (want 0xDDDD10DE: device id, "
                       "then vendor 0x10DE)",
                       ctx, key, (uint64_t)v);
    *ret = (uint32_t)v;
    return 1;
}

static int get_uint(json_t *obj, const char *key, const char *ctx, bool required, int64_t min,
                    int64_t max, unsigned *ret, struct err *e)
{
    int64_t v;
    int r = cfg_int64(obj, key, ctx, required, min, max, &v, e);
    if (r > 0)
        *ret = (unsigned)v;
    return r;
}

static int get_str(json_t *obj, const char *key, const char *ctx, bool required, char *buf,
                   size_t n, struct err *e)
{
    const char *s = NULL;
    int r = cfg_string(obj, key, ctx, required, &s, e);
    if (r <= 0)
        return r;
    if (strlen(s) >= n)
        return err_set(e, -EINVAL, "%s.%s: \"%s\" is too long (at most %zu characters)", ctx, key,
                       s, n - 1);
    if (!*s)
        return err_set(e, -EINVAL, "%s.%s: must not be empty", ctx, key);
    snprintf(buf, n, "%s", s);
    return 1;
}

static int parse_mig(json_t *gpu, const char *ctx, struct sim_gpu_spec *g, struct err *e)
{
    json_t *mig = NULL;
    int r = cfg_object(gpu, "mig", ctx, false, &mig, e);
    if (r <= 0)
        return r;
    char mctx[FLEET_CTX_MAX + 8];
    snprintf(mctx, sizeof(mctx), "%s.mig", ctx);
    static const char *const keys[] = {"enabled", "instances", NULL};
    if ((r = cfg_known_keys(mig, mctx, keys, e)) < 0)
        return r;
    bool enabled = false;
    if ((r = cfg_bool(mig, "enabled", mctx, true, &enabled, e)) < 0)
        return r;
    if (enabled && (!g->mig_capable || !g->mig_table))
        return err_set(e, -EINVAL, "%s.enabled: MIG needs mig_capable: true", mctx);
    g->mig_enabled = enabled;
    json_t *inst = NULL;
    if ((r = cfg_array(mig, "instances", mctx, false, &inst, e)) < 0)
        return r;
    if (!inst)
        return 0;
    if (!enabled && json_array_size(inst) > 0)
        return err_set(e, -EINVAL, "%s.instances: listed while MIG is not enabled", mctx);
    struct sim_gpu_state st = {.mig_mode = true};
    size_t i;
    json_t *v;
    json_array_foreach (inst, i, v) {
        if (!json_is_string(v))
            return err_set(e, -EINVAL, "%s.instances[%zu]: expected a profile name, got %s", mctx,
                           i, cfg_type_name(v));
        const char *name = json_string_value(v);
        const struct sim_gi_profile *p = sim_mig_profile_by_name(g->mig_table, name);
        if (!p) {
            struct sbuf b _cleanup_sbuf_;
            sbuf_init(&b, 512);
            for (size_t k = 0; k < g->mig_table->n; k++)
                sbuf_addf(&b, "%s%s", k ? ", " : "", g->mig_table->profiles[k].name);
            int rc = sbuf_check_err(&b, e, "%s.instances[%zu]: the list of %s's MIG profiles", mctx,
                                    i, g->model);
            if (rc < 0)
                return rc;
            return err_set(e, -EINVAL, "%s.instances[%zu]: \"%s\" is not a MIG profile of %s (%s)",
                           mctx, i, name, g->model, b.data ? b.data : "");
        }
        if (i >= SIM_COMPUTE_SLICES ||
            sim_mig_gi_create(g, &st, p->id, SIM_NO_ID, NULL) != NVML_SUCCESS)
            return err_set(e, -EINVAL,
                           "%s.instances[%zu]: \"%s\" does not fit next to the instances before "
                           "it (7 compute slices, 8 memory slices, at most %u of this profile)",
                           mctx, i, name, p->max_count);
        g->mig_instances[g->n_mig_instances++] = p;
    }
    return 0;
}

/* workload: {sm: R, tensor: R, dram: R}: ratios 0..1 (a key left out is 0) */
static int parse_workload(json_t *gpu, const char *ctx, struct sim_gpu_spec *g, struct err *e)
{
    json_t *w = NULL;
    int r = cfg_object(gpu, "workload", ctx, false, &w, e);
    if (r <= 0)
        return r;
    char wctx[FLEET_CTX_MAX + 16];
    snprintf(wctx, sizeof(wctx), "%s.workload", ctx);
    static const char *const keys[] = {"sm", "tensor", "dram", NULL};
    if ((r = cfg_known_keys(w, wctx, keys, e)) < 0)
        return r;
    unsigned *slot[] = {&g->workload.sm, &g->workload.tensor, &g->workload.dram};
    for (size_t i = 0; i < ARRAY_SIZE(slot); i++) {
        json_t *v = json_object_get(w, keys[i]);
        *slot[i] = 0;
        if (!v)
            continue;
        double x = json_is_number(v) ? json_number_value(v) : -1;
        if (!(x >= 0 && x <= 1))
            return err_set(e, -EINVAL, "%s.%s: expected a ratio from 0 to 1, got %s", wctx, keys[i],
                           json_is_number(v) ? "a number outside it" : cfg_type_name(v));
        *slot[i] = (unsigned)lround(x * SIM_LOAD_MAX);
    }
    g->has_workload = true;
    return 0;
}

/* c2c (bool) and addressing_mode (none, hmm, ats): each left out, its NVML call is not supported
 * on the GPU, as on one without the feature. */
static int parse_c2c(json_t *gpu, const char *ctx, struct sim_gpu_spec *g, struct err *e)
{
    static const char *const modes[] = {"none", "hmm", "ats"}; /* NVML_DEVICE_ADDRESSING_MODE_* */
    int r = cfg_bool(gpu, "c2c", ctx, false, &g->c2c, e);
    if (r < 0)
        return r;
    g->has_c2c = r > 0;
    const char *mode = NULL;
    if ((r = cfg_string(gpu, "addressing_mode", ctx, false, &mode, e)) < 0)
        return r;
    if (!mode)
        return 0;
    for (size_t i = 0; i < ARRAY_SIZE(modes); i++)
        if (strcmp(mode, modes[i]) == 0) {
            g->has_addressing_mode = true;
            g->addressing_mode = (unsigned)i;
            return 0;
        }
    return err_set(e, -EINVAL, "%s.addressing_mode: \"%s\" is not none, hmm or ats", ctx, mode);
}

static int parse_gpu(json_t *gpu, const char *ctx, const struct sim_fleet *f,
                     struct sim_gpu_spec *g, unsigned *ret_count, bool *ret_has_ids, struct err *e)
{
    static const char *const keys[] = {"model",
                                       "count",
                                       "memory_mib",
                                       "compute_capability",
                                       "architecture",
                                       "pci_device_id",
                                       "pci_subsystem_id",
                                       "mig_capable",
                                       "power_limit_w",
                                       "max_sm_clock_mhz",
                                       "max_mem_clock_mhz",
                                       "uuid",
                                       "serial",
                                       "bus_id",
                                       "mig",
                                       "mig_profiles",
                                       "multiprocessors",
                                       "idle_power_w",
                                       "idle_temp_c",
                                       "ecc",
                                       "vbios_version",
                                       "board_part_number",
                                       "pcie_generation",
                                       "pcie_width",
                                       "workload",
                                       "c2c",
                                       "addressing_mode",
                                       NULL};
    int r;
    (void)f;
    if ((r = cfg_known_keys(gpu, ctx, keys, e)) < 0)
        return r;
    if ((r = get_str(gpu, "model", ctx, true, g->model, NVML_DEVICE_NAME_BUFFER_SIZE, e)) < 0)
        return r;
    unsigned count = 1;
    if ((r = get_uint(gpu, "count", ctx, false, 1, SIM_MAX_GPUS, &count, e)) < 0)
        return r;
    int64_t mem;
    if ((r = cfg_int64(gpu, "memory_mib", ctx, true, 1, 1LL << 24, &mem, e)) < 0)
        return r;
    g->memory_mib = (uint64_t)mem;
    g->reserved_mib = g->memory_mib / 181;

    json_t *cc = json_object_get(gpu, "compute_capability");
    char ccbuf[32] = "";
    if (cc && json_is_real(cc))
        snprintf(ccbuf, sizeof(ccbuf), "%.1f", json_real_value(cc));
    else if ((r = get_str(gpu, "compute_capability", ctx, true, ccbuf, sizeof(ccbuf), e)) < 0)
        return r;
    int maj, min, used = 0;
    if (sscanf(ccbuf, "%d.%d%n", &maj, &min, &used) != 2 || (size_t)used != strlen(ccbuf) ||
        maj < 1 || maj > 20 || min < 0 || min > 9)
        return err_set(e, -EINVAL,
                       "%s.compute_capability: \"%s\" is not MAJOR.MINOR (e.g. \"9.0\")", ctx,
                       ccbuf);
    g->cc_major = maj;
    g->cc_minor = min;

    const char *arch = NULL;
    if ((r = cfg_string(gpu, "architecture", ctx, true, &arch, e)) < 0)
        return r;
    int ai = -1;
    for (size_t i = 0; i < ARRAY_SIZE(archs); i++)
        if (strcmp(archs[i].name, arch) == 0)
            ai = (int)i;
    if (ai < 0)
        return err_set(e, -EINVAL,
                       "%s.architecture: unknown architecture \"%s\" (kepler, maxwell, pascal, "
                       "volta, turing, ampere, ada, hopper, blackwell)",
                       ctx, arch);
    g->arch = archs[ai].arch;
    if ((r = get_pci_id(gpu, "pci_device_id", ctx, true, &g->pci_device_id, e)) < 0)
        return r;
    if ((r = get_pci_id(gpu, "pci_subsystem_id", ctx, false, &g->pci_subsystem_id, e)) < 0)
        return r;
    if ((r = cfg_bool(gpu, "mig_capable", ctx, true, &g->mig_capable, e)) < 0)
        return r;
    if ((r = get_uint(gpu, "power_limit_w", ctx, true, 10, 5000, &g->power_limit_w, e)) < 0)
        return r;
    if ((r = get_uint(gpu, "max_sm_clock_mhz", ctx, true, 100, 10000, &g->max_sm_clock_mhz, e)) < 0)
        return r;
    g->max_mem_clock_mhz = archs[ai].mem_clock;
    if ((r = get_uint(gpu, "max_mem_clock_mhz", ctx, false, 100, 40000, &g->max_mem_clock_mhz, e)) <
        0)
        return r;
    g->idle_power_w = g->power_limit_w / 10 ? g->power_limit_w / 10 : 1;
    if ((r = get_uint(gpu, "idle_power_w", ctx, false, 1, g->power_limit_w - 1, &g->idle_power_w,
                      e)) < 0)
        return r;
    g->idle_temp_c = 32;
    if ((r = get_uint(gpu, "idle_temp_c", ctx, false, 5, 90, &g->idle_temp_c, e)) < 0)
        return r;
    g->ecc = true;
    if ((r = cfg_bool(gpu, "ecc", ctx, false, &g->ecc, e)) < 0)
        return r;
    g->multiprocessors = default_sms(g);
    if ((r = get_uint(gpu, "multiprocessors", ctx, false, 1, 1024, &g->multiprocessors, e)) < 0)
        return r;
    g->pcie_gen = archs[ai].pcie_gen;
    if ((r = get_uint(gpu, "pcie_generation", ctx, false, 1, 7, &g->pcie_gen, e)) < 0)
        return r;
    g->pcie_width = 16;
    if ((r = get_uint(gpu, "pcie_width", ctx, false, 1, 32, &g->pcie_width, e)) < 0)
        return r;
    snprintf(g->vbios, sizeof(g->vbios), "%s", archs[ai].vbios);
    if ((r = get_str(gpu, "vbios_version", ctx, false, g->vbios, sizeof(g->vbios), e)) < 0)
        return r;
    if ((r = get_str(gpu, "board_part_number", ctx, false, g->board_part, sizeof(g->board_part),
                     e)) < 0)
        return r;
    name_brand(g);

    const char *tkey = NULL;
    if ((r = cfg_string(gpu, "mig_profiles", ctx, false, &tkey, e)) < 0)
        return r;
    if (tkey) {
        g->mig_table = sim_mig_table_by_key(tkey);
        if (!g->mig_table)
            return err_set(e, -EINVAL,
                           "%s.mig_profiles: unknown table \"%s\" (a100-40gb, a100-80gb, "
                           "h100-80gb, h200-141gb, gh200-96gb, gb200-186gb)",
                           ctx, tkey);
    } else if (g->mig_capable) {
        g->mig_table = sim_mig_table_for_model(g->model);
    }
    if (g->mig_capable && !g->mig_table)
        return err_set(e, -EINVAL,
                       "%s.mig_capable: no MIG profile table for \"%s\" (known: A100 40GB, A100 "
                       "80GB, H100 80GB, H200, GH200, GB200; or set mig_profiles)",
                       ctx, g->model);
    if (!g->mig_capable)
        g->mig_table = NULL;
    if ((r = parse_mig(gpu, ctx, g, e)) < 0)
        return r;
    if ((r = parse_workload(gpu, ctx, g, e)) < 0)
        return r;
    if ((r = parse_c2c(gpu, ctx, g, e)) < 0)
        return r;

    bool has_ids = false;
    if ((r = get_str(gpu, "uuid", ctx, false, g->uuid, sizeof(g->uuid), e)) < 0)
        return r;
    if (r > 0) {
        if (!str_has_prefix(g->uuid, "GPU-") || strlen(g->uuid) < 8)
            return err_set(e, -EINVAL, "%s.uuid: \"%s\" does not look like GPU-<uuid>", ctx,
                           g->uuid);
        has_ids = true;
    }
    if ((r = get_str(gpu, "serial", ctx, false, g->serial, NVML_DEVICE_SERIAL_BUFFER_SIZE, e)) < 0)
        return r;
    has_ids |= r > 0;
    char bus[64] = "";
    if ((r = get_str(gpu, "bus_id", ctx, false, bus, sizeof(bus), e)) < 0)
        return r;
    if (r > 0) {
        unsigned d, b, dev;
        if (parse_bus_id(bus, &d, &b, &dev) < 0)
            return err_set(e, -EINVAL,
                           "%s.bus_id: \"%s\" is not a PCI bus id (DDDDDDDD:BB:DD.0 or "
                           "DDDD:BB:DD.0, hex)",
                           ctx, bus);
        set_bus(g, d, b, dev);
        has_ids = true;
    }
    if (has_ids && count > 1)
        return err_set(e, -EINVAL,
                       "%s: uuid, serial and bus_id name one GPU; they need count: 1 (got %u)", ctx,
                       count);
    *ret_count = count;
    *ret_has_ids = has_ids;
    return 0;
}

static int get_gpu_ref(json_t *v, const char *ctx, size_t pos, size_t n_gpus, unsigned *ret,
                       struct err *e)
{
    if (!json_is_integer(v))
        return err_set(e, -EINVAL, "%s[%zu]: expected a GPU index, got %s", ctx, pos,
                       cfg_type_name(v));
    json_int_t i = json_integer_value(v);
    if (i < 0 || (size_t)i >= n_gpus)
        return err_set(e, -EINVAL, "%s[%zu]: GPU %lld is out of range (the fleet has %zu GPUs)",
                       ctx, pos, (long long)i, n_gpus);
    *ret = (unsigned)i;
    return 0;
}

static int parse_topology(json_t *doc, const char *name, struct sim_fleet *f, struct err *e)
{
    json_t *topo = NULL;
    int r = top_err(e, name, cfg_object(doc, "topology", name, false, &topo, e));
    if (r <= 0)
        return r;
    char ctx[FLEET_CTX_MAX];
    snprintf(ctx, sizeof(ctx), "%.200s: topology", name);
    static const char *const keys[] = {"nvlinks", "pcie", NULL};
    if ((r = cfg_known_keys(topo, ctx, keys, e)) < 0)
        return r;
    json_t *links = NULL, *pcie = NULL;
    if ((r = cfg_array(topo, "nvlinks", ctx, false, &links, e)) < 0)
        return r;
    if ((r = cfg_array(topo, "pcie", ctx, false, &pcie, e)) < 0)
        return r;
    size_t i;
    json_t *v;
    json_array_foreach (links, i, v) {
        char ectx[FLEET_CTX_MAX];
        snprintf(ectx, sizeof(ectx), "%.200s: topology.nvlinks[%zu]", name, i);
        if (!json_is_array(v) || json_array_size(v) != 3)
            return err_set(e, -EINVAL, "%s: expected [gpuA, gpuB, links], got %s", ectx,
                           cfg_type_name(v));
        unsigned a, b;
        if ((r = get_gpu_ref(json_array_get(v, 0), ectx, 0, f->n_gpus, &a, e)) < 0 ||
            (r = get_gpu_ref(json_array_get(v, 1), ectx, 1, f->n_gpus, &b, e)) < 0)
            return r;
        if (a == b)
            return err_set(e, -EINVAL, "%s: a GPU cannot link to itself (GPU %u)", ectx, a);
        json_t *nv = json_array_get(v, 2);
        if (!json_is_integer(nv) || json_integer_value(nv) < 1 ||
            json_integer_value(nv) > SIM_MAX_LINKS)
            return err_set(e, -EINVAL, "%s[2]: the number of links must be an integer in [1, %d]",
                           ectx, SIM_MAX_LINKS);
        unsigned n = (unsigned)json_integer_value(nv);
        if (f->gpus[a].n_links + n > SIM_MAX_LINKS || f->gpus[b].n_links + n > SIM_MAX_LINKS)
            return err_set(e, -EINVAL, "%s: GPU %u would have more than %d NVLinks", ectx,
                           f->gpus[a].n_links + n > SIM_MAX_LINKS ? a : b, SIM_MAX_LINKS);
        for (unsigned k = 0; k < n; k++) {
            f->gpus[a].link_peer[f->gpus[a].n_links++] = b;
            f->gpus[b].link_peer[f->gpus[b].n_links++] = a;
        }
    }
    json_array_foreach (pcie, i, v) {
        char ectx[FLEET_CTX_MAX];
        snprintf(ectx, sizeof(ectx), "%.200s: topology.pcie[%zu]", name, i);
        if (!json_is_array(v) || json_array_size(v) != 3)
            return err_set(e, -EINVAL, "%s: expected [gpuA, gpuB, level], got %s", ectx,
                           cfg_type_name(v));
        unsigned a, b;
        if ((r = get_gpu_ref(json_array_get(v, 0), ectx, 0, f->n_gpus, &a, e)) < 0 ||
            (r = get_gpu_ref(json_array_get(v, 1), ectx, 1, f->n_gpus, &b, e)) < 0)
            return r;
        if (a == b)
            return err_set(e, -EINVAL, "%s: both ends are GPU %u", ectx, a);
        const char *lv = json_string_value(json_array_get(v, 2));
        unsigned level = SIM_NO_ID;
        for (size_t k = 0; lv && k < ARRAY_SIZE(topo_levels); k++)
            if (strcmp(topo_levels[k].name, lv) == 0)
                level = topo_levels[k].level;
        if (level == SIM_NO_ID)
            return err_set(e, -EINVAL,
                           "%s[2]: level must be one of internal, single, multiple, hostbridge, "
                           "node, system",
                           ectx);
        f->pcie_level[a * f->n_gpus + b] = level;
        f->pcie_level[b * f->n_gpus + a] = level;
    }
    return 0;
}

/* The fleet's own hash, an FNV-1a-like mix whose starting value (not FNV's offset basis) is
 * part of every simulated UUID, serial and bus ID, and so of every golden file and recorded
 * comparison with NVIDIA's binaries: kept as it is, apart from util's hash_fnv1a64. */
static uint64_t fleet_hash(const char *buf, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
    return h;
}

int sim_fleet_parse(const char *buf, size_t len, const char *name, struct sim_fleet **ret,
                    struct err *e)
{
    json_t *doc _cleanup_json_ = NULL;
    int r = yaml_parse_one(buf, len, name, &doc, e);
    if (r < 0)
        return r;
    static const char *const keys[] = {
        "driver_version", "cuda_driver_version", "seed", "gpus", "topology", NULL};
    if (!json_is_object(doc))
        return err_set(e, -EINVAL, "%s: expected a mapping at the top, got %s", name,
                       cfg_type_name(doc));
    if ((r = top_err(e, name, cfg_known_keys(doc, name, keys, e))) < 0) {
        /* cfg_known_keys says "<name>: unknown field" already */
        return r;
    }
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = xcalloc(1, sizeof(*f));
    f->path = xstrdup(name);
    f->hash = fleet_hash(buf, len);
    if ((r = top_err(e, name,
                     get_str(doc, "driver_version", name, true, f->driver_version,
                             sizeof(f->driver_version), e))) < 0)
        return r;
    for (const char *c = f->driver_version; *c; c++)
        if (!isdigit((unsigned char)*c) && *c != '.')
            return err_set(e, -EINVAL, "%s: driver_version: \"%s\" is not a version like 570.86.15",
                           name, f->driver_version);
    int64_t cuda;
    if ((r = top_err(e, name,
                     cfg_int64(doc, "cuda_driver_version", name, true, 1000, 99999, &cuda, e))) < 0)
        return r;
    f->cuda_driver_version = (int)cuda;
    int64_t seed = 0;
    if ((r = top_err(e, name, cfg_int64(doc, "seed", name, false, 0, INT64_MAX, &seed, e))) < 0)
        return r;
    f->seed = (uint64_t)seed;
    json_t *gpus = NULL;
    if ((r = top_err(e, name, cfg_array(doc, "gpus", name, true, &gpus, e))) < 0)
        return r;

    f->gpus = xcalloc(SIM_MAX_GPUS, sizeof(*f->gpus));
    size_t i;
    json_t *v;
    json_array_foreach (gpus, i, v) {
        char ctx[FLEET_CTX_MAX];
        snprintf(ctx, sizeof(ctx), "%.200s: gpus[%zu]", name, i);
        struct sim_gpu_spec g = {0};
        unsigned count = 1;
        bool has_ids = false;
        if ((r = parse_gpu(v, ctx, f, &g, &count, &has_ids, e)) < 0)
            return r;
        if (f->n_gpus + count > SIM_MAX_GPUS)
            return err_set(e, -EINVAL, "%s.count: the fleet would have more than %d GPUs", ctx,
                           SIM_MAX_GPUS);
        for (unsigned k = 0; k < count; k++) {
            size_t idx = f->n_gpus++;
            struct sim_gpu_spec *d = &f->gpus[idx];
            *d = g;
            uint64_t h = sim_hash64(f->seed ^ fleet_hash(g.model, strlen(g.model)), idx);
            uint64_t h2 = sim_hash64(h, 0x555549);
            if (!d->uuid[0])
                snprintf(d->uuid, sizeof(d->uuid), "GPU-%08x-%04x-%04x-%04x-%012llx",
                         (unsigned)(h >> 32), (unsigned)(h >> 16) & 0xffff,
                         ((unsigned)h & 0x0fff) | 0x4000, ((unsigned)(h2 >> 48) & 0x3fff) | 0x8000,
                         (unsigned long long)(h2 & 0xffffffffffffULL));
            if (!d->serial[0])
                snprintf(d->serial, sizeof(d->serial), "16549%08llu",
                         (unsigned long long)(h2 % 100000000ULL));
            if (!d->bus_id[0])
                set_bus(d, (unsigned)(idx / 14), 0x18 + 0x10 * (unsigned)(idx % 14), 0);
        }
    }
    for (size_t a = 0; a < f->n_gpus; a++)
        for (size_t b = a + 1; b < f->n_gpus; b++) {
            if (strcasecmp(f->gpus[a].uuid, f->gpus[b].uuid) == 0)
                return err_set(e, -EINVAL, "%s: gpus: GPUs %zu and %zu have the same uuid %s", name,
                               a, b, f->gpus[a].uuid);
            if (strcmp(f->gpus[a].bus_id, f->gpus[b].bus_id) == 0)
                return err_set(e, -EINVAL, "%s: gpus: GPUs %zu and %zu have the same bus_id %s",
                               name, a, b, f->gpus[a].bus_id);
        }
    f->pcie_level = xcalloc(f->n_gpus ? f->n_gpus * f->n_gpus : 1, sizeof(unsigned));
    for (size_t a = 0; a < f->n_gpus; a++)
        for (size_t b = 0; b < f->n_gpus; b++)
            f->pcie_level[a * f->n_gpus + b] =
                a == b ? NVML_TOPOLOGY_INTERNAL : NVML_TOPOLOGY_SYSTEM;
    if ((r = parse_topology(doc, name, f, e)) < 0)
        return r;
    *ret = steal_ptr(&f);
    return 0;
}

int sim_fleet_load(const char *path, struct sim_fleet **ret, struct err *e)
{
    char *buf _cleanup_free_ = NULL;
    size_t len = 0;
    int r = file_read_all(path, YAML_MAX_BYTES, &buf, &len, e);
    if (r < 0)
        return r;
    return sim_fleet_parse(buf, len, path, ret, e);
}

unsigned sim_cores_per_sm(unsigned arch)
{
    int i = arch_index(arch);
    return i < 0 ? 0 : archs[i].cores_per_sm;
}
