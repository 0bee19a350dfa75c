/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MIG profile tables and the pure MIG operations of the simulator.
 *
 * Figures: nvidia-smi `mig -lgip` captures of real GPUs (see
 * ../shared/reference/notes/node-components.md §2). memorySizeMB is the listed GiB x 1024.
 * Placements are in memory slices (8 per GPU): 1g starts 0..6 size 1, the 1g double-memory
 * profile and 2g start at even slices with size 2, 3g at 0 and 4 with size 4, 4g at 0 size 4,
 * 7g at 0 size 8. GPU-instance ids follow from the placement the way the driver numbers them
 * (7g: 0; halves 1-2; quarters 3-6; eighths 7-13). Values marked [unverified] in the notes
 * (H200 1g.35gb/3g.71gb/4g.71gb memory and SMs, A100-40GB 4g.20gb decoders) are interpolated
 * from the H100 and the published profile names. The A100 80GB engines are the A100 40GB's
 * (same GA100 chip, 5 NVDECs in all): one capture lists 2/3/4 decoders for 2g/3g/4g, which no
 * layout could hold (4g + 3g would need 7), another lists 1/2/2 as used here.
 */
#include <string.h>

#include "nvml-abi.h"
#include "simnvml.h"

/* name, index, id, slices, max, memorySizeMB, SMs, CE, DEC, ENC, JPEG, OFA, placements */
#define PROF(name, idx, id, sl, max, mem, sms, ce, dec, enc, jpeg, ofa, place, nplace)   \
    {                                                                                    \
        name, idx, id, sl, place##_SIZE, max, mem, sms, ce, dec, enc, jpeg, ofa, nplace, \
            place##_STARTS                                                               \
    }
#define S1_SIZE 1
#define S1_STARTS           \
    {                       \
        0, 1, 2, 3, 4, 5, 6 \
    }
#define S2_SIZE 2
#define S2_STARTS  \
    {              \
        0, 2, 4, 6 \
    }
#define S2G_SIZE 2
#define S2G_STARTS \
    {              \
        0, 2, 4    \
    }
#define S3_SIZE 4
#define S3_STARTS \
    {             \
        0, 4      \
    }
#define S4_SIZE 4
#define S4_STARTS \
    {             \
        0         \
    }
#define S7_SIZE 8
#define S7_STARTS \
    {             \
        0         \
    }

#define I1   NVML_GPU_INSTANCE_PROFILE_1_SLICE
#define I1ME NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1
#define I1R2 NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2
#define I2   NVML_GPU_INSTANCE_PROFILE_2_SLICE
#define I3   NVML_GPU_INSTANCE_PROFILE_3_SLICE
#define I4   NVML_GPU_INSTANCE_PROFILE_4_SLICE
#define I7   NVML_GPU_INSTANCE_PROFILE_7_SLICE

/* Listed in NVML profile-index order: 1, 2, 3, 4, 7 slices, then 1+me (7), 1 double (9). */
static const struct sim_gi_profile a100_40gb[] = {
    PROF("1g.5gb", I1, 19, 1, 7, 4864, 14, 1, 0, 0, 0, 0, S1, 7),
    PROF("2g.10gb", I2, 14, 2, 3, 9984, 28, 2, 1, 0, 0, 0, S2G, 3),
    PROF("3g.20gb", I3, 9, 3, 2, 20096, 42, 3, 2, 0, 0, 0, S3, 2),
    PROF("4g.20gb", I4, 5, 4, 1, 20096, 56, 4, 2, 0, 0, 0, S4, 1),
    PROF("7g.40gb", I7, 0, 7, 1, 40320, 98, 7, 5, 0, 1, 1, S7, 1),
    PROF("1g.5gb+me", I1ME, 20, 1, 1, 4864, 14, 1, 1, 0, 1, 1, S1, 7),
    PROF("1g.10gb", I1R2, 15, 1, 4, 9984, 14, 1, 1, 0, 0, 0, S2, 4),
};

static const struct sim_gi_profile a100_80gb[] = {
    PROF("1g.10gb", I1, 19, 1, 7, 9728, 14, 1, 0, 0, 0, 0, S1, 7),
    PROF("2g.20gb", I2, 14, 2, 3, 19968, 28, 2, 1, 0, 0, 0, S2G, 3),
    PROF("3g.40gb", I3, 9, 3, 2, 40192, 42, 3, 2, 0, 0, 0, S3, 2),
    PROF("4g.40gb", I4, 5, 4, 1, 40192, 56, 4, 2, 0, 0, 0, S4, 1),
    PROF("7g.80gb", I7, 0, 7, 1, 80896, 98, 7, 5, 0, 1, 1, S7, 1),
    PROF("1g.10gb+me", I1ME, 20, 1, 1, 9728, 14, 1, 1, 0, 1, 1, S1, 7),
    PROF("1g.20gb", I1R2, 15, 1, 4, 19968, 14, 1, 1, 0, 0, 0, S2, 4),
};

static const struct sim_gi_profile h100_80gb[] = {
    PROF("1g.10gb", I1, 19, 1, 7, 9984, 16, 1, 1, 0, 1, 0, S1, 7),
    PROF("2g.20gb", I2, 14, 2, 3, 20096, 32, 2, 2, 0, 2, 0, S2G, 3),
    PROF("3g.40gb", I3, 9, 3, 2, 40448, 60, 3, 3, 0, 3, 0, S3, 2),
    PROF("4g.40gb", I4, 5, 4, 1, 40448, 64, 4, 4, 0, 4, 0, S4, 1),
    PROF("7g.80gb", I7, 0, 7, 1, 81152, 132, 8, 7, 0, 7, 1, S7, 1),
    PROF("1g.10gb+me", I1ME, 20, 1, 1, 9984, 16, 1, 1, 0, 1, 1, S1, 7),
    PROF("1g.20gb", I1R2, 15, 1, 4, 20096, 26, 1, 1, 0, 1, 0, S2, 4),
};

static const struct sim_gi_profile h200_141gb[] = {
    PROF("1g.18gb", I1, 19, 1, 7, 16384, 16, 1, 1, 0, 1, 0, S1, 7),
    PROF("2g.35gb", I2, 14, 2, 3, 33280, 32, 2, 2, 0, 2, 0, S2G, 3),
    PROF("3g.71gb", I3, 9, 3, 2, 66560, 60, 3, 3, 0, 3, 0, S3, 2),
    PROF("4g.71gb", I4, 5, 4, 1, 66560, 64, 4, 4, 0, 4, 0, S4, 1),
    PROF("7g.141gb", I7, 0, 7, 1, 143360, 132, 8, 7, 0, 7, 1, S7, 1),
    PROF("1g.18gb+me", I1ME, 20, 1, 1, 16384, 16, 1, 1, 0, 1, 1, S1, 7),
    PROF("1g.35gb", I1R2, 15, 1, 4, 33280, 26, 1, 1, 0, 1, 0, S2, 4),
};

/*
 * Grace Hopper (GH200, 96 GB HBM3) and Grace Blackwell (GB200, 186 GB HBM3e): the profile names
 * are NVIDIA's (mig-parted's default config: all-balanced is 2x 1g.12gb, 2g.24gb, 3g.48gb on the
 * GH200's 0x2342 and 2x 1g.23gb, 2g.47gb, 3g.93gb on the GB200's 0x2941); every figure is
 * [unverified]: memory scaled from the H100 80GB table (x 1.2, and x 2.32 for the GB200), SMs
 * the H100's (GH200, same GH100 chip) and scaled to the 148 SMs of a Blackwell GPU (GB200),
 * engines the H100's.
 */
static const struct sim_gi_profile gh200_96gb[] = {
    PROF("1g.12gb", I1, 19, 1, 7, 11904, 16, 1, 1, 0, 1, 0, S1, 7),
    PROF("2g.24gb", I2, 14, 2, 3, 24064, 32, 2, 2, 0, 2, 0, S2G, 3),
    PROF("3g.48gb", I3, 9, 3, 2, 48512, 60, 3, 3, 0, 3, 0, S3, 2),
    PROF("4g.48gb", I4, 5, 4, 1, 48512, 64, 4, 4, 0, 4, 0, S4, 1),
    PROF("7g.96gb", I7, 0, 7, 1, 97280, 132, 8, 7, 0, 7, 1, S7, 1),
    PROF("1g.12gb+me", I1ME, 20, 1, 1, 11904, 16, 1, 1, 0, 1, 1, S1, 7),
    PROF("1g.24gb", I1R2, 15, 1, 4, 24064, 26, 1, 1, 0, 1, 0, S2, 4),
};

static const struct sim_gi_profile gb200_186gb[] = {
    PROF("1g.23gb", I1, 19, 1, 7, 23168, 18, 1, 1, 0, 1, 0, S1, 7),
    PROF("2g.47gb", I2, 14, 2, 3, 46592, 36, 2, 2, 0, 2, 0, S2G, 3),
    PROF("3g.93gb", I3, 9, 3, 2, 93824, 67, 3, 3, 0, 3, 0, S3, 2),
    PROF("4g.93gb", I4, 5, 4, 1, 93824, 72, 4, 4, 0, 4, 0, S4, 1),
    PROF("7g.186gb", I7, 0, 7, 1, 188288, 148, 8, 7, 0, 7, 1, S7, 1),
    PROF("1g.23gb+me", I1ME, 20, 1, 1, 23168, 18, 1, 1, 0, 1, 1, S1, 7),
    PROF("1g.47gb", I1R2, 15, 1, 4, 46592, 29, 1, 1, 0, 1, 0, S2, 4),
};

static const struct sim_mig_table tables[] = {
    {"a100-40gb", ARRAY_SIZE(a100_40gb), a100_40gb},
    {"a100-80gb", ARRAY_SIZE(a100_80gb), a100_80gb},
    {"h100-80gb", ARRAY_SIZE(h100_80gb), h100_80gb},
    {"h200-141gb", ARRAY_SIZE(h200_141gb), h200_141gb},
    {"gh200-96gb", ARRAY_SIZE(gh200_96gb), gh200_96gb},
    {"gb200-186gb", ARRAY_SIZE(gb200_186gb), gb200_186gb},
};

const struct sim_mig_table *sim_mig_table_by_key(const char *key)
{
    for (size_t i = 0; i < ARRAY_SIZE(tables); i++)
        if (strcmp(tables[i].key, key) == 0)
            return &tables[i];
    return NULL;
}

const struct sim_mig_table *sim_mig_table_for_model(const char *model)
{
    /* before "H200": "NVIDIA GH200 480GB" contains it (the 144 GB GH200 has no table here) */
    if (strstr(model, "GH200") && !strstr(model, "144G"))
        return sim_mig_table_by_key("gh200-96gb");
    if (strstr(model, "GB200"))
        return sim_mig_table_by_key("gb200-186gb");
    if (strstr(model, "H200"))
        return sim_mig_table_by_key("h200-141gb");
    if (strstr(model, "H100") && !strstr(model, "NVL") && !strstr(model, "94GB") &&
        !strstr(model, "96GB"))
        return sim_mig_table_by_key("h100-80gb");
    if (strstr(model, "A100") && strstr(model, "80GB"))
        return sim_mig_table_by_key("a100-80gb");
    if (strstr(model, "A100"))
        return sim_mig_table_by_key("a100-40gb");
    return NULL;
}

const struct sim_gi_profile *sim_mig_profile_by_name(const struct sim_mig_table *t,
                                                     const char *name)
{
    for (size_t i = 0; t && i < t->n; i++)
        if (strcmp(t->profiles[i].name, name) == 0)
            return &t->profiles[i];
    return NULL;
}

const struct sim_gi_profile *sim_mig_profile_by_id(const struct sim_mig_table *t, unsigned id)
{
    for (size_t i = 0; t && i < t->n; i++)
        if (t->profiles[i].id == id)
            return &t->profiles[i];
    return NULL;
}

const struct sim_gi_profile *sim_mig_profile_by_index(const struct sim_mig_table *t, unsigned index)
{
    for (size_t i = 0; t && i < t->n; i++)
        if (t->profiles[i].index == index)
            return &t->profiles[i];
    return NULL;
}

static const unsigned ci_slices_by_index[] = {1, 2, 3, 4, 7};

static unsigned ci_index_for_slices(unsigned slices)
{
    for (unsigned i = 0; i < ARRAY_SIZE(ci_slices_by_index); i++)
        if (ci_slices_by_index[i] == slices)
            return i;
    return SIM_NO_ID;
}

bool sim_mig_ci_profile(const struct sim_gi_profile *p, unsigned index, struct sim_ci_profile *ret)
{
    if (!p || index >= ARRAY_SIZE(ci_slices_by_index))
        return false;
    unsigned c = ci_slices_by_index[index];
    if (c > p->slices || (c == 7 && p->slices != 7))
        return false;
    struct sim_ci_profile r = {.index = index, .id = index, .slices = c};
    r.max_count = p->slices / c;
    r.sms = c == p->slices ? p->sms : p->sms / p->slices * c;
    if (c == p->slices)
        snprintf(r.name, sizeof(r.name), "%s", p->name);
    else
        snprintf(r.name, sizeof(r.name), "%uc.%s", c, p->name);
    *ret = r;
    return true;
}

unsigned sim_mig_gi_id_for(unsigned start, unsigned size)
{
    switch (size) {
    case 8:
        return 0;
    case 4:
        return 1 + start / 4;
    case 2:
        return 3 + start / 2;
    default:
        return 7 + start;
    }
}

struct sim_gi *sim_gpu_find_gi(struct sim_gpu_state *g, unsigned gi_id)
{
    for (unsigned i = 0; i < g->n_gi; i++)
        if (g->gi[i].id == gi_id)
            return &g->gi[i];
    return NULL;
}

const struct sim_gi *sim_gpu_find_gi_const(const struct sim_gpu_state *g, unsigned gi_id)
{
    return sim_gpu_find_gi((struct sim_gpu_state *)g, gi_id);
}

static bool gi_fits(const struct sim_gpu_spec *spec, const struct sim_gpu_state *g,
                    const struct sim_gi_profile *p, unsigned start)
{
    unsigned count = 0, used_slices = 0;
    for (unsigned i = 0; i < g->n_gi; i++) {
        const struct sim_gi *gi = &g->gi[i];
        const struct sim_gi_profile *q = sim_mig_profile_by_id(spec->mig_table, gi->profile_id);
        if (gi->profile_id == p->id)
            count++;
        used_slices += q ? q->slices : 0;
        if (start < gi->start + gi->size && gi->start < start + p->size)
            return false;
        if (sim_gpu_find_gi_const(g, sim_mig_gi_id_for(start, p->size)))
            return false;
    }
    return count < p->max_count && used_slices + p->slices <= SIM_COMPUTE_SLICES;
}

int sim_mig_set_mode(const struct sim_gpu_spec *spec, struct sim_gpu_state *g, bool enable,
                     bool *ret_pending)
{
    *ret_pending = false;
    if (!spec->mig_capable || !spec->mig_table)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!enable && g->n_gi > 0)
        return NVML_ERROR_IN_USE;
    if (enable == g->mig_mode) {
        g->mig_change_pending = false; /* setting the current mode cancels a pending change */
        return NVML_SUCCESS;
    }
    if (g->mig_reset_required) {
        g->mig_change_pending = true;
        *ret_pending = true;
        return NVML_SUCCESS;
    }
    g->mig_mode = enable;
    return NVML_SUCCESS;
}

void sim_mig_reset(struct sim_gpu_state *g)
{
    if (g->mig_change_pending)
        g->mig_mode = !g->mig_mode;
    g->mig_change_pending = false;
}

int sim_mig_gi_create(const struct sim_gpu_spec *spec, struct sim_gpu_state *g, unsigned profile_id,
                      unsigned placement_start, unsigned *ret_gi_id)
{
    if (!spec->mig_table || !g->mig_mode)
        return NVML_ERROR_NOT_SUPPORTED;
    const struct sim_gi_profile *p = sim_mig_profile_by_id(spec->mig_table, profile_id);
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned start = SIM_NO_ID;
    if (placement_start != SIM_NO_ID) {
        bool valid = false;
        for (unsigned i = 0; i < p->n_starts; i++)
            valid |= p->starts[i] == placement_start;
        if (!valid)
            return NVML_ERROR_INVALID_ARGUMENT;
        if (!gi_fits(spec, g, p, placement_start))
            return NVML_ERROR_INSUFFICIENT_RESOURCES;
        start = placement_start;
    } else {
        /* Like the driver: the highest free placement first, which keeps the low slices free
         * for the larger profiles. */
        for (unsigned i = p->n_starts; i-- > 0;)
            if (gi_fits(spec, g, p, p->starts[i])) {
                start = p->starts[i];
                break;
            }
        if (start == SIM_NO_ID)
            return NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
    if (g->n_gi >= SIM_GI_IDS)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    struct sim_gi gi = {.id = sim_mig_gi_id_for(start, p->size),
                        .profile_id = p->id,
                        .start = start,
                        .size = p->size};
    unsigned pos = 0;
    while (pos < g->n_gi && g->gi[pos].id < gi.id)
        pos++;
    memmove(&g->gi[pos + 1], &g->gi[pos], (g->n_gi - pos) * sizeof(g->gi[0]));
    g->gi[pos] = gi;
    g->n_gi++;
    if (ret_gi_id)
        *ret_gi_id = gi.id;
    return NVML_SUCCESS;
}

int sim_mig_gi_destroy(struct sim_gpu_state *g, unsigned gi_id)
{
    struct sim_gi *gi = sim_gpu_find_gi(g, gi_id);
    if (!gi)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (gi->n_ci > 0)
        return NVML_ERROR_IN_USE;
    size_t pos = (size_t)(gi - g->gi);
    memmove(&g->gi[pos], &g->gi[pos + 1], (g->n_gi - pos - 1) * sizeof(g->gi[0]));
    g->n_gi--;
    return NVML_SUCCESS;
}

unsigned sim_mig_gi_remaining(const struct sim_gpu_spec *spec, const struct sim_gpu_state *g,
                              unsigned profile_id)
{
    struct sim_gpu_state copy = *g;
    unsigned n = 0;
    while (n < SIM_GI_IDS && sim_mig_gi_create(spec, &copy, profile_id, SIM_NO_ID, NULL) == 0)
        n++;
    return n;
}

static bool ci_fits(const struct sim_gi *gi, const struct sim_ci_profile *cp, unsigned start)
{
    unsigned count = 0;
    for (unsigned i = 0; i < gi->n_ci; i++) {
        if (gi->ci[i].profile_index == cp->index)
            count++;
        if (start < gi->ci[i].start + gi->ci[i].size && gi->ci[i].start < start + cp->slices)
            return false;
    }
    return count < cp->max_count;
}

int sim_mig_ci_create(const struct sim_gpu_spec *spec, struct sim_gpu_state *g, unsigned gi_id,
                      unsigned ci_profile_index, unsigned *ret_ci_id)
{
    struct sim_gi *gi = sim_gpu_find_gi(g, gi_id);
    if (!gi)
        return NVML_ERROR_INVALID_ARGUMENT;
    const struct sim_gi_profile *p = sim_mig_profile_by_id(spec->mig_table, gi->profile_id);
    struct sim_ci_profile cp;
    if (!sim_mig_ci_profile(p, ci_profile_index, &cp))
        return ci_profile_index < NVML_COMPUTE_INSTANCE_PROFILE_COUNT ? NVML_ERROR_NOT_SUPPORTED
                                                                      : NVML_ERROR_INVALID_ARGUMENT;
    unsigned start = SIM_NO_ID;
    for (unsigned s = 0; s + cp.slices <= p->slices; s += cp.slices)
        if (ci_fits(gi, &cp, s)) {
            start = s;
            break;
        }
    if (start == SIM_NO_ID || gi->n_ci >= SIM_CI_IDS)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    unsigned id = 0;
    for (unsigned i = 0; i < gi->n_ci && gi->ci[i].id == id; i++)
        id++;
    unsigned pos = 0;
    while (pos < gi->n_ci && gi->ci[pos].id < id)
        pos++;
    memmove(&gi->ci[pos + 1], &gi->ci[pos], (gi->n_ci - pos) * sizeof(gi->ci[0]));
    gi->ci[pos] =
        (struct sim_ci){.id = id, .profile_index = cp.index, .start = start, .size = cp.slices};
    gi->n_ci++;
    if (ret_ci_id)
        *ret_ci_id = id;
    return NVML_SUCCESS;
}

int sim_mig_ci_destroy(struct sim_gpu_state *g, unsigned gi_id, unsigned ci_id)
{
    struct sim_gi *gi = sim_gpu_find_gi(g, gi_id);
    if (!gi)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < gi->n_ci; i++)
        if (gi->ci[i].id == ci_id) {
            memmove(&gi->ci[i], &gi->ci[i + 1], (gi->n_ci - i - 1) * sizeof(gi->ci[0]));
            gi->n_ci--;
            return NVML_SUCCESS;
        }
    return NVML_ERROR_INVALID_ARGUMENT;
}

unsigned sim_mig_ci_remaining(const struct sim_gpu_spec *spec, const struct sim_gpu_state *g,
                              unsigned gi_id, unsigned ci_profile_index)
{
    struct sim_gpu_state copy = *g;
    unsigned n = 0;
    while (n < SIM_CI_IDS &&
           sim_mig_ci_create(spec, &copy, gi_id, ci_profile_index, NULL) == NVML_SUCCESS)
        n++;
    return n;
}

void sim_gpu_state_init(const struct sim_gpu_spec *spec, struct sim_gpu_state *g)
{
    memset(g, 0, sizeof(*g));
    g->mig_mode = spec->mig_capable && spec->mig_enabled;
    if (!g->mig_mode)
        return;
    for (size_t i = 0; i < spec->n_mig_instances; i++) {
        const struct sim_gi_profile *p = spec->mig_instances[i];
        unsigned gi_id;
        if (sim_mig_gi_create(spec, g, p->id, SIM_NO_ID, &gi_id) != NVML_SUCCESS)
            continue; /* the fleet parser checked the layout fits */
        sim_mig_ci_create(spec, g, gi_id, ci_index_for_slices(p->slices), NULL);
    }
}

void sim_mig_uuid(const struct sim_gpu_spec *spec, unsigned gi_id, unsigned ci_id, char *buf,
                  size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *c = spec->uuid; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    uint64_t a = sim_hash64(h, ((uint64_t)gi_id << 8) | ci_id);
    uint64_t b = sim_hash64(a, 0x4d4947ULL);
    snprintf(buf, n, "MIG-%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32),
             (unsigned)(a >> 16) & 0xffff, ((unsigned)a & 0x0fff) | 0x5000,
             ((unsigned)(b >> 48) & 0x3fff) | 0x8000, (unsigned long long)(b & 0xffffffffffffULL));
}
