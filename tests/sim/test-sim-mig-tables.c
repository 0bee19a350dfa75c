/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulator's MIG profile tables against the hardware they describe: no layout that the
 * table allows (placements that do not overlap, at most max_count of a profile, at most 7
 * compute slices) may hold more SMs or engines than the whole GPU (the 7g profile) has, and the
 * A100 80GB profiles carry the A100 40GB's engines (same GA100 chip; NVIDIA's MIG user guide
 * lists the 80GB profiles as the 40GB ones renamed by memory).
 * Also: telemetry counters saturate rather than wrap or hit an undefined cast far in the future.
 */
#include <stdio.h>
#include <string.h>

#include "nvml-abi.h"
#include "simnvml.h"

static int failures;

#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, "\n");                               \
            failures++;                                          \
        }                                                        \
    } while (0)

struct totals {
    unsigned sms, ce, dec, enc, jpeg, ofa;
};

static const struct sim_gi_profile *full_gpu(const struct sim_mig_table *t)
{
    return sim_mig_profile_by_index(t, NVML_GPU_INSTANCE_PROFILE_7_SLICE);
}

static void add(struct totals *s, const struct sim_gi_profile *p, int sign)
{
    s->sms += (unsigned)sign * p->sms;
    s->ce += (unsigned)sign * p->ce;
    s->dec += (unsigned)sign * p->dec;
    s->enc += (unsigned)sign * p->enc;
    s->jpeg += (unsigned)sign * p->jpeg;
    s->ofa += (unsigned)sign * p->ofa;
}

static unsigned layouts_checked;
static unsigned bad_layouts;

/* Depth-first over every layout: each step places one more instance at a start >= min_start. */
static void walk(const struct sim_mig_table *t, const struct sim_gi_profile *full, unsigned used,
                 unsigned compute, unsigned min_start, unsigned counts[], struct totals *s,
                 char *desc, size_t desc_len)
{
    layouts_checked++;
    if (s->sms > full->sms || s->ce > full->ce || s->dec > full->dec || s->enc > full->enc ||
        s->jpeg > full->jpeg || s->ofa > full->ofa) {
        if (bad_layouts++ < 5)
            CHECK(0,
                  "%s: layout [%s] needs SM %u CE %u DEC %u ENC %u JPEG %u OFA %u, more than "
                  "the %s's SM %u CE %u DEC %u ENC %u JPEG %u OFA %u",
                  t->key, desc, s->sms, s->ce, s->dec, s->enc, s->jpeg, s->ofa, full->name,
                  full->sms, full->ce, full->dec, full->enc, full->jpeg, full->ofa);
        return;
    }
    for (size_t i = 0; i < t->n; i++) {
        const struct sim_gi_profile *p = &t->profiles[i];
        if (p == full || counts[i] >= p->max_count || compute + p->slices > SIM_COMPUTE_SLICES)
            continue;
        for (unsigned k = 0; k < p->n_starts; k++) {
            unsigned st = p->starts[k];
            if (st < min_start)
                continue;
            unsigned mask = ((1u << p->size) - 1) << st;
            if (mask & used)
                continue;
            size_t l = strlen(desc);
            snprintf(desc + l, desc_len - l, "%s%s@%u", l ? " " : "", p->name, st);
            counts[i]++;
            add(s, p, 1);
            walk(t, full, used | mask, compute + p->slices, st, counts, s, desc, desc_len);
            add(s, p, -1);
            counts[i]--;
            desc[l] = '\0';
        }
    }
}

static void check_table(const char *key)
{
    const struct sim_mig_table *t = sim_mig_table_by_key(key);
    CHECK(t != NULL, "no MIG table %s", key);
    if (!t)
        return;
    const struct sim_gi_profile *full = full_gpu(t);
    CHECK(full != NULL, "%s: no 7-slice profile", key);
    if (!full)
        return;
    unsigned counts[32] = {0};
    struct totals s = {0};
    char desc[512] = "";
    bad_layouts = 0;
    layouts_checked = 0;
    walk(t, full, 0, 0, 0, counts, &s, desc, sizeof(desc));
    CHECK(layouts_checked > 50, "%s: only %u layouts walked", key, layouts_checked);
    printf("%s: %u layouts checked, %u exceed the GPU\n", key, layouts_checked, bad_layouts);
}

/* Same chip, same engines: only the memory differs between the A100 40GB and 80GB tables. */
static void check_a100_80gb_engines(void)
{
    const struct sim_mig_table *a40 = sim_mig_table_by_key("a100-40gb");
    const struct sim_mig_table *a80 = sim_mig_table_by_key("a100-80gb");
    CHECK(a40 && a80 && a40->n == a80->n, "A100 tables differ in size");
    if (!a40 || !a80 || a40->n != a80->n)
        return;
    for (size_t i = 0; i < a80->n; i++) {
        const struct sim_gi_profile *p = &a80->profiles[i];
        const struct sim_gi_profile *q = sim_mig_profile_by_index(a40, p->index);
        CHECK(q != NULL, "a100-40gb lacks profile index %u", p->index);
        if (!q)
            continue;
        CHECK(p->id == q->id && p->slices == q->slices && p->max_count == q->max_count &&
                  p->sms == q->sms && p->ce == q->ce && p->dec == q->dec && p->enc == q->enc &&
                  p->jpeg == q->jpeg && p->ofa == q->ofa,
              "a100-80gb %s (SM %u CE %u DEC %u JPEG %u OFA %u) differs from a100-40gb %s "
              "(SM %u CE %u DEC %u JPEG %u OFA %u) in more than memory",
              p->name, p->sms, p->ce, p->dec, p->jpeg, p->ofa, q->name, q->sms, q->ce, q->dec,
              q->jpeg, q->ofa);
    }
    const struct sim_gi_profile *g2 = sim_mig_profile_by_name(a80, "2g.20gb");
    const struct sim_gi_profile *g3 = sim_mig_profile_by_name(a80, "3g.40gb");
    const struct sim_gi_profile *g4 = sim_mig_profile_by_name(a80, "4g.40gb");
    CHECK(g2 && g2->dec == 1, "a100-80gb 2g.20gb decoders: %u, want 1", g2 ? g2->dec : 0);
    CHECK(g3 && g3->dec == 2, "a100-80gb 3g.40gb decoders: %u, want 2", g3 ? g3->dec : 0);
    CHECK(g4 && g4->dec == 2, "a100-80gb 4g.40gb decoders: %u, want 2", g4 ? g4->dec : 0);
}

/* The energy and NVLink counters grow with time; at the far end of the clock GPUOP_SIM_CLOCK
 * accepts they must saturate, and stay monotonic on the way there. */
static void check_telemetry_counters(void)
{
    static const char doc[] = "driver_version: \"570.86.15\"\ncuda_driver_version: 12080\n"
                              "gpus:\n  - model: \"NVIDIA H100 80GB HBM3\"\n    count: 1\n"
                              "    memory_mib: 81559\n    compute_capability: \"9.0\"\n"
                              "    architecture: hopper\n    pci_device_id: 0x233010de\n"
                              "    mig_capable: false\n    power_limit_w: 700\n"
                              "    max_sm_clock_mhz: 1980\n";
    struct sim_fleet *f = NULL;
    struct err e = {0};
    int r = sim_fleet_parse(doc, sizeof(doc) - 1, "t.yaml", &f, &e);
    CHECK(r == 0, "fleet: %s", err_msg(&e));
    if (r < 0)
        return;
    uint64_t far_ms = (UINT64_MAX / 1000 - 1) * 1000; /* the largest clock sim_now_ms gives */
    struct sim_sample now, later, far;
    sim_telemetry(f, 0, 1780000000000ull, &now);
    sim_telemetry(f, 0, 1780000600000ull, &later);
    sim_telemetry(f, 0, far_ms, &far);
    CHECK(later.energy_mj > now.energy_mj, "energy does not grow: %llu then %llu",
          (unsigned long long)now.energy_mj, (unsigned long long)later.energy_mj);
    CHECK(far.energy_mj == UINT64_MAX, "energy at the end of time: %llu, want saturation",
          (unsigned long long)far.energy_mj);
    CHECK(far.nvlink_kib == UINT64_MAX, "NVLink KiB at the end of time: %llu, want saturation",
          (unsigned long long)far.nvlink_kib);
    sim_fleet_free(f);
}

int main(void)
{
    check_telemetry_counters();
    static const char *const keys[] = {"a100-40gb",  "a100-80gb",  "h100-80gb",
                                       "h200-141gb", "gh200-96gb", "gb200-186gb"};
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
        check_table(keys[i]);
    check_a100_80gb_engines();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
