/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the node offers (dra-plugin.h, "the model"): the devices NVIDIA's driver would publish,
 * named as it names them, from the GPU inventory. Pure.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dra-plugin.h"

#define MIB (1024ull * 1024ull)

const char *dra_dev_type_name(enum dra_dev_type t)
{
    return t == DRA_GPU ? "gpu" : "mig";
}

const char *dra_brand_name(unsigned brand)
{
    /* NVML's brand enumeration, in NVIDIA's words */
    static const char *const names[] = {
        "Unknown",   "Quadro",      "Tesla",     "NVS",        "Grid",      "GeForce",
        "Titan",     "NvidiaVApps", "NvidiaVPC", "NvidiaVCS",  "NvidiaVWS", "NvidiaCloudGaming",
        "QuadroRTX", "NvidiaRTX",   "Nvidia",    "GeForceRTX", "TitanRTX",
    };
    return brand < ARRAY_SIZE(names) ? names[brand] : "Unknown";
}

const char *dra_arch_name(unsigned arch)
{
    /* NVML_DEVICE_ARCH_*: 2 Kepler ... 10 Blackwell */
    switch (arch) {
    case 2:
        return "Kepler";
    case 3:
        return "Maxwell";
    case 4:
        return "Pascal";
    case 5:
        return "Volta";
    case 6:
        return "Turing";
    case 7:
        return "Ampere";
    case 8:
        return "Ada Lovelace";
    case 9:
        return "Hopper";
    case 10:
        return "Blackwell";
    default:
        return "Unknown";
    }
}

int dra_semver(const char *v, char *buf, size_t n)
{
    unsigned long long part[3] = {0, 0, 0};
    size_t got = 0;
    const char *p = v ? v : "";
    while (got < 3 && isdigit((unsigned char)*p)) {
        unsigned long long x = 0;
        while (isdigit((unsigned char)*p)) {
            if (x > 100000000ull)
                return -EINVAL;
            x = x * 10 + (unsigned long long)(*p - '0');
            p++;
        }
        part[got++] = x;
        if (*p != '.')
            break;
        p++;
    }
    if (got == 0)
        return -EINVAL;
    if ((size_t)snprintf(buf, n, "%llu.%llu.%llu", part[0], part[1], part[2]) >= n)
        return -ENAMETOOLONG;
    return 0;
}

void dra_profile_label(const char *profile, char *buf, size_t n)
{
    /* lower case, dots removed, anything else outside [a-z0-9-] a '-', no '-' at the ends */
    size_t o = 0;
    for (const char *p = profile; *p && o + 1 < n; p++) {
        char c = (char)tolower((unsigned char)*p);
        if (c == '.')
            continue;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            c = '-';
        if (c == '-' && o == 0)
            continue;
        buf[o++] = c;
    }
    while (o > 0 && buf[o - 1] == '-')
        o--;
    if (n)
        buf[o < n ? o : n - 1] = 0;
}

bool dra_gpu_withdrawn(bool lost, uint64_t fault_ms, uint64_t now_ms, uint64_t recovery_ms)
{
    if (lost)
        return true;
    if (fault_ms == 0)
        return false;
    if (recovery_ms == 0)
        return true;
    return now_ms < fault_ms || now_ms - fault_ms < recovery_ms;
}

/* ---- building ------------------------------------------------------------------------------ */

struct builder {
    struct dra_model *m;
    size_t cap_dev, cap_warn;
};

GPUOP_PRINTF(2, 3) static void warn(struct builder *b, const char *fmt, ...)
{
    if (b->m->n_warnings == b->cap_warn) {
        b->cap_warn = b->cap_warn ? b->cap_warn * 2 : 8;
        b->m->warnings = xrealloc(b->m->warnings, b->cap_warn * sizeof(*b->m->warnings));
    }
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = xstrdup("(out of memory)");
    va_end(ap);
    b->m->warnings[b->m->n_warnings++] = s;
}

static struct dra_device *add(struct builder *b, const struct dra_gpu_extra *x)
{
    if (b->m->n_devices == b->cap_dev) {
        b->cap_dev = b->cap_dev ? b->cap_dev * 2 : 16;
        b->m->devices = xrealloc(b->m->devices, b->cap_dev * sizeof(*b->m->devices));
    }
    struct dra_device *d = &b->m->devices[b->m->n_devices++];
    memset(d, 0, sizeof(*d));
    if (x)
        strlcpy_s(d->pcie_root, x->pcie_root, sizeof(d->pcie_root));
    return d;
}

static void mig_name(char *buf, size_t n, unsigned minor, const char *profile, unsigned gi_profile,
                     unsigned start)
{
    char label[GPU_PROFILE_MAX];
    dra_profile_label(profile, label, sizeof(label));
    snprintf(buf, n, "gpu-%u-mig-%s-%u-%u", minor, label, gi_profile, start);
}

static bool owned(const struct dra_model_input *in, const struct gpu_device *g,
                  const struct gpu_mig_device *m)
{
    for (size_t i = 0; i < in->n_owned; i++)
        if (in->owned[i].gi_id == m->gi_id && strcmp(in->owned[i].parent_uuid, g->uuid) == 0)
            return true;
    return false;
}

static const struct gpu_mig_profile *profile_by_id(const struct dra_gpu_extra *x, unsigned id)
{
    for (size_t i = 0; x && i < x->n_profiles; i++)
        if (x->profiles[i].id == id)
            return &x->profiles[i];
    return NULL;
}

static void from_profile(struct dra_device *d, const struct gpu_mig_profile *p)
{
    d->multiprocessors = p->multiprocessors;
    d->copy_engines = p->copy_engines;
    d->decoders = p->decoders;
    d->encoders = p->encoders;
    d->jpegs = p->jpegs;
    d->ofas = p->ofas;
    d->memory_bytes = p->memory_mib * MIB;
}

static void add_existing_mig(struct builder *b, size_t gi, size_t k, bool published,
                             const struct dra_gpu_extra *x)
{
    const struct gpu_device *g = &b->m->inv->gpus[gi];
    const struct gpu_mig_device *mg = &g->mig[k];
    struct dra_device *d = add(b, x);
    d->type = DRA_MIG;
    d->gpu = gi;
    d->mig = k;
    d->published = published;
    strlcpy_s(d->profile, mg->profile, sizeof(d->profile));
    d->gi_profile_id = mg->gi_profile_id;
    d->start = mg->gi_placement_start;
    d->size = mg->gi_placement_size;
    d->multiprocessors = mg->multiprocessors;
    d->copy_engines = mg->copy_engines;
    d->decoders = mg->decoders;
    d->encoders = mg->encoders;
    d->jpegs = mg->jpegs;
    d->ofas = mg->ofas;
    d->memory_bytes = mg->memory_mib * MIB;
    /* a compute instance smaller than its GPU instance still holds the whole GPU instance */
    const struct gpu_mig_profile *p = profile_by_id(x, mg->gi_profile_id);
    if (p && b->m->partitionable && mg->ci_slices < mg->gi_slices)
        from_profile(d, p);
    mig_name(d->name, sizeof(d->name), g->minor, mg->profile, mg->gi_profile_id, d->start);
}

/* Partitionable devices on a MIG-enabled GPU: its counter set, then every placement of every
 * profile; a MIG device that exists (not one a claim made) is published by its own name and
 * the placements it overlaps are not. */
static void add_partitionable(struct builder *b, const struct dra_model_input *in, size_t gi,
                              bool published)
{
    const struct gpu_device *g = &in->inv->gpus[gi];
    const struct dra_gpu_extra *x = &in->extra[gi];
    struct dra_model *m = b->m;
    struct dra_counter_set cs = {.gpu = gi};
    snprintf(cs.name, sizeof(cs.name), "gpu-%u-counter-set", g->minor);
    for (size_t i = 0; i < x->n_profiles; i++) {
        const struct gpu_mig_profile *p = &x->profiles[i];
#define MAXOF(f) cs.f = cs.f > p->f ? cs.f : p->f
        MAXOF(multiprocessors);
        MAXOF(copy_engines);
        MAXOF(decoders);
        MAXOF(encoders);
        MAXOF(jpegs);
        MAXOF(ofas);
#undef MAXOF
        if (p->memory_mib * MIB > cs.memory_bytes)
            cs.memory_bytes = p->memory_mib * MIB;
        for (size_t k = 0; k < p->n_placements; k++) {
            unsigned end = p->placements[k].start + p->placements[k].size;
            if (end > cs.memory_slices)
                cs.memory_slices = end;
        }
    }
    if (cs.memory_slices > 64) {
        warn(b, "GPU %u: %u memory slices, more than gpuop publishes; no MIG slices", g->index,
             cs.memory_slices);
        return;
    }
    m->counter_sets = xrealloc(m->counter_sets, (m->n_counter_sets + 1) * sizeof(cs));
    m->counter_sets[m->n_counter_sets++] = cs;

    uint64_t occupied = 0;
    bool *emitted = xcalloc(g->n_mig + 1, sizeof(bool));
    for (size_t k = 0; k < g->n_mig; k++) {
        const struct gpu_mig_device *mg = &g->mig[k];
        if (owned(in, g, mg)) {
            emitted[k] = true;
            continue;
        }
        for (unsigned s = 0; s < mg->gi_placement_size && mg->gi_placement_start + s < 64; s++)
            occupied |= 1ull << (mg->gi_placement_start + s);
    }
    for (size_t i = 0; i < x->n_profiles; i++) {
        const struct gpu_mig_profile *p = &x->profiles[i];
        for (size_t k = 0; k < p->n_placements; k++) {
            const struct gpu_mig_placement *pl = &p->placements[k];
            uint64_t mask = 0;
            for (unsigned s = 0; s < pl->size && pl->start + s < 64; s++)
                mask |= 1ull << (pl->start + s);
            if (mask & occupied) {
                /* a MIG device there: published by its own name when it is exactly this */
                for (size_t j = 0; j < g->n_mig; j++) {
                    const struct gpu_mig_device *mg = &g->mig[j];
                    if (!emitted[j] && mg->gi_profile_id == p->id &&
                        mg->gi_placement_start == pl->start && mg->ci_slices >= mg->gi_slices) {
                        add_existing_mig(b, gi, j, published, x);
                        emitted[j] = true;
                    }
                }
                continue;
            }
            struct dra_device *d = add(b, x);
            d->type = DRA_MIG_DYNAMIC;
            d->gpu = gi;
            d->published = published;
            strlcpy_s(d->profile, p->name, sizeof(d->profile));
            d->gi_profile_id = p->id;
            d->start = pl->start;
            d->size = pl->size;
            from_profile(d, p);
            mig_name(d->name, sizeof(d->name), g->minor, p->name, p->id, pl->start);
        }
    }
    for (size_t j = 0; j < g->n_mig; j++)
        if (!emitted[j])
            add_existing_mig(b, gi, j, published, x);
    free(emitted);
}

static int check_names(struct builder *b, struct err *e)
{
    struct dra_model *m = b->m;
    for (size_t i = 0; i < m->n_devices; i++) {
        const char *n = m->devices[i].name;
        size_t len = strlen(n);
        if (len == 0 || len > 63)
            return err_set(e, -EINVAL, "device name \"%s\": not a DNS label", n);
        for (size_t k = 0; k < i; k++)
            if (strcmp(m->devices[k].name, n) == 0)
                return err_set(e, -EINVAL,
                               "device name \"%s\" given twice (two GPUs with minor "
                               "%u?)",
                               n, m->inv->gpus[m->devices[i].gpu].minor);
    }
    return 0;
}

int dra_model_build(const struct dra_model_input *in, struct dra_model **ret, struct err *e)
{
    if (!in || !in->inv)
        return err_set(e, -EINVAL, "no GPU inventory");
    _cleanup_(dra_model_freep) struct dra_model *m = xcalloc(1, sizeof(*m));
    m->inv = in->inv;
    m->partitionable = in->partitionable;
    struct builder b = {.m = m};
    for (size_t gi = 0; gi < in->inv->n_gpus; gi++) {
        const struct gpu_device *g = &in->inv->gpus[gi];
        const struct dra_gpu_extra *x = in->extra ? &in->extra[gi] : NULL;
        bool published = !g->lost && !(x && x->unhealthy);
        if (!g->uuid[0]) {
            warn(&b, "GPU %u: no UUID (lost?); not published", g->index);
            continue;
        }
        if (!g->mig_enabled) {
            struct dra_device *d = add(&b, x);
            d->type = DRA_GPU;
            d->gpu = gi;
            d->published = published;
            d->memory_bytes = g->memory_total_bytes;
            snprintf(d->name, sizeof(d->name), "gpu-%u", g->minor);
            continue;
        }
        if (in->partitionable && x && x->n_profiles > 0) {
            add_partitionable(&b, in, gi, published);
            continue;
        }
        if (in->partitionable)
            warn(&b,
                 "GPU %u: MIG enabled but its MIG profiles are unknown; its MIG devices are "
                 "published as they are",
                 g->index);
        if (g->n_mig == 0)
            warn(&b, "GPU %u: MIG enabled without MIG devices; nothing published", g->index);
        for (size_t k = 0; k < g->n_mig; k++)
            add_existing_mig(&b, gi, k, published, x);
    }
    int r = check_names(&b, e);
    if (r < 0)
        return r;
    *ret = steal_ptr(&m);
    return 0;
}

void dra_model_free(struct dra_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_warnings; i++)
        free(m->warnings[i]);
    free(m->warnings);
    free(m->devices);
    free(m->counter_sets);
    free(m);
}

const struct dra_device *dra_model_find(const struct dra_model *m, const char *name)
{
    for (size_t i = 0; m && name && i < m->n_devices; i++)
        if (strcmp(m->devices[i].name, name) == 0)
            return &m->devices[i];
    return NULL;
}

uint64_t dra_faults_at(const struct dra_faults *fs, const char *uuid)
{
    for (size_t i = 0; fs && i < fs->n; i++)
        if (strcmp(fs->uuid[i], uuid) == 0)
            return fs->at_ms[i];
    return 0;
}

bool dra_faults_note(struct dra_faults *fs, const char *uuid, uint64_t now_ms)
{
    size_t i = 0;
    while (i < fs->n && strcmp(fs->uuid[i], uuid) != 0)
        i++;
    if (i == fs->n) {
        if (fs->n == DRA_FAULTS_MAX)
            return false;
        strlcpy_s(fs->uuid[fs->n++], uuid, GPU_UUID_MAX);
    }
    fs->at_ms[i] = now_ms ? now_ms : 1;
    return true;
}
