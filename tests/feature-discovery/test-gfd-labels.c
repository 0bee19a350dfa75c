/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Table tests of the GFD label computation. The inventories mirror the mocks of NVIDIA's GFD
 * tests (internal/resource/testing): a full GPU "MOCKMODEL" with compute 8.0 and 300 MiB; a
 * MIG-enabled GPU with compute 0.0; MIG devices "<g>g.<gb>gb" with memory gb and slices g/c.
 * Cases A-G reproduce the expected outputs of those tests (notes/deviceplugin.md section 6).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "dpconfig.h"
#include "feature-discovery.h"

#define P "nvidia.com/"

/* ---- inventory builders ------------------------------------------------------------------- */

#define MAX_GPUS 8
#define MAX_MIGS 8

struct fixture {
    struct gpu_inventory inv;
    struct gpu_device gpus[MAX_GPUS];
    struct gpu_mig_device migs[MAX_GPUS][MAX_MIGS];
};

static void fx_init(struct fixture *f)
{
    memset(f, 0, sizeof(*f));
    strlcpy_s(f->inv.driver_version, "400.300", sizeof(f->inv.driver_version));
    f->inv.cuda_driver_version = 8000;
    f->inv.gpus = f->gpus;
}

static struct gpu_device *fx_add(struct fixture *f)
{
    assert_true(f->inv.n_gpus < MAX_GPUS);
    size_t i = f->inv.n_gpus++;
    struct gpu_device *d = &f->gpus[i];
    d->index = (unsigned)i;
    strlcpy_s(d->name, "MOCKMODEL", sizeof(d->name));
    snprintf(d->uuid, sizeof(d->uuid), "GPU-%zu", i);
    d->memory_total_bytes = 300ull << 20;
    d->mig = f->migs[i];
    return d;
}

/* NewFullGPU(): compute 8.0, 300 MiB, not MIG capable, PCI class 0. */
static struct gpu_device *fx_full(struct fixture *f)
{
    struct gpu_device *d = fx_add(f);
    d->cc_major = 8;
    d->cc_minor = 0;
    return d;
}

/* NewMigEnabledDevice(): compute 0.0, MIG capable and enabled. */
static struct gpu_device *fx_mig_enabled(struct fixture *f)
{
    struct gpu_device *d = fx_add(f);
    d->mig_capable = true;
    d->mig_enabled = true;
    return d;
}

/* NewMigDevice(gi, ci, gb) with optional attributes (mp, copy, dec, enc, jpeg, ofa). */
static struct gpu_mig_device *fx_mig(struct gpu_device *d, unsigned gi, unsigned ci, unsigned gb)
{
    assert_true(d->n_mig < MAX_MIGS);
    struct gpu_mig_device *m = &d->mig[d->n_mig];
    memset(m, 0, sizeof(*m));
    m->index = (unsigned)d->n_mig++;
    snprintf(m->profile, sizeof(m->profile), "%ug.%ugb", gi, gb);
    m->memory_mib = gb;
    m->gi_slices = gi;
    m->ci_slices = ci;
    return m;
}

/* ---- config builders ---------------------------------------------------------------------- */

/* A config with one replicated resource, built directly (as NVIDIA's unit tests do, so a given
 * rename is kept). kind: 't' time-slicing, 'm' MPS. */
static struct dpconfig *cfg_shared(char kind, const char *name, unsigned replicas,
                                   const char *rename)
{
    struct dpconfig *c = dpconfig_new();
    struct dpconfig_sharing *s = kind == 'm' ? &c->mps : &c->time_slicing;
    s->present = true;
    s->n_resources = 1;
    s->resources = calloc(1, sizeof(*s->resources));
    s->resources[0].name = strdup(name);
    s->resources[0].rename = rename ? strdup(rename) : NULL;
    s->resources[0].replicas = replicas;
    return c;
}

static struct dpconfig *cfg_strategy(struct dpconfig *c, enum dpconfig_mig_strategy s)
{
    if (!c)
        c = dpconfig_new();
    c->mig_strategy = s;
    return c;
}

static struct gfd_labels *compute(const struct fixture *f, const struct dpconfig *c)
{
    struct gfd_input in = {.inventory = f ? &f->inv : NULL, .config = c, .machine_type = NULL};
    struct gfd_labels *l = NULL;
    struct err e = {0};
    int r = gfd_labels_compute(&in, &l, &e);
    if (r < 0)
        fail_msg("gfd_labels_compute: %s", err_msg(&e));
    return l;
}

/* ---- assertions --------------------------------------------------------------------------- */

static void expect_label(const struct gfd_labels *l, const char *key, const char *value)
{
    const char *v = gfd_labels_get(l, key);
    if (!v)
        fail_msg("label %s missing (want %s)", key, value);
    if (strcmp(v, value) != 0)
        fail_msg("label %s = \"%s\", want \"%s\"", key, v, value);
}

static void expect_absent(const struct gfd_labels *l, const char *key)
{
    const char *v = gfd_labels_get(l, key);
    if (v)
        fail_msg("label %s = \"%s\" should be absent", key, v);
}

/* The labels of resource `res` (keys "<res>.<suffix>", gpu.machine/mode excluded) are exactly
 * the NULL-terminated "suffix=value" list. */
static void expect_resource(const struct gfd_labels *l, const char *res, const char *const *want)
{
    size_t rlen = strlen(res);
    size_t n_want = 0;
    for (const char *const *w = want; *w; w++) {
        const char *eq = strchr(*w, '=');
        assert_non_null(eq);
        char key[256];
        snprintf(key, sizeof(key), "%s.%.*s", res, (int)(eq - *w), *w);
        expect_label(l, key, eq + 1);
        n_want++;
    }
    size_t n_have = 0;
    for (size_t i = 0; i < l->n; i++) {
        const char *k = l->items[i].key;
        if (strncmp(k, res, rlen) != 0 || k[rlen] != '.')
            continue;
        if (strcmp(res, P "gpu") == 0 &&
            (strcmp(k, P "gpu.machine") == 0 || strcmp(k, P "gpu.mode") == 0))
            continue;
        n_have++;
        bool listed = false;
        for (const char *const *w = want; *w; w++) {
            const char *eq = strchr(*w, '=');
            if (strlen(k + rlen + 1) == (size_t)(eq - *w) &&
                strncmp(k + rlen + 1, *w, (size_t)(eq - *w)) == 0)
                listed = true;
        }
        if (!listed)
            fail_msg("unexpected label %s=%s", k, l->items[i].value);
    }
    assert_int_equal(n_have, n_want);
}

#define RES(...) ((const char *const[]){__VA_ARGS__, NULL})

#define FULL_NOSHARE                                                                     \
    "count=1", "replicas=1", "sharing-strategy=none", "memory=300", "product=MOCKMODEL", \
        "family=ampere", "compute.major=8", "compute.minor=0"

/* ---- A: TestGPUResourceLabeler ------------------------------------------------------------ */

static void test_a_full_gpu(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f);
    fx_full(&f);

    struct gfd_labels *l = compute(&f, NULL);
    expect_resource(l, P "gpu", RES(FULL_NOSHARE));
    gfd_labels_free(l);

    /* time-slicing of another resource: as without sharing */
    struct dpconfig *c = cfg_shared('t', P "not-gpu", 2, NULL);
    l = compute(&f, c);
    expect_resource(l, P "gpu", RES(FULL_NOSHARE));
    gfd_labels_free(l);
    dpconfig_free(c);

    const char kinds[] = {'t', 'm'};
    const char *names[] = {"time-slicing", "mps"};
    for (size_t k = 0; k < 2; k++) {
        char strat[64];
        snprintf(strat, sizeof(strat), "sharing-strategy=%s", names[k]);

        c = cfg_shared(kinds[k], P "gpu", 2, NULL);
        l = compute(&f, c);
        expect_resource(l, P "gpu",
                        RES("count=1", "replicas=2", strat, "memory=300",
                            "product=MOCKMODEL-SHARED", "family=ampere", "compute.major=8",
                            "compute.minor=0"));
        gfd_labels_free(l);
        dpconfig_free(c);

        c = cfg_shared(kinds[k], P "gpu", 2, P "gpu.shared");
        l = compute(&f, c);
        expect_resource(l, P "gpu",
                        RES("count=1", "replicas=2", strat, "memory=300", "product=MOCKMODEL",
                            "family=ampere", "compute.major=8", "compute.minor=0"));
        gfd_labels_free(l);
        dpconfig_free(c);

        c = cfg_shared(kinds[k], P "not-gpu", 2, NULL);
        l = compute(&f, c);
        expect_resource(l, P "gpu", RES(FULL_NOSHARE));
        gfd_labels_free(l);
        dpconfig_free(c);
    }
}

/* ---- B: TestSanitise ---------------------------------------------------------------------- */

static void test_b_sanitise(void **state)
{
    (void)state;
    static const char *const table[][2] = {
        {"a space separated string", "a-space-separated-string"},
        {"some(thing)else", "somethingelse"},
        {"some ( thing )else", "some-thing-else"},
        {"NVIDIA-TITAN-X-(Pascal)", "NVIDIA-TITAN-X-Pascal"},
        {" input  with multiple   spaces   ", "input-with-multiple-spaces"},
        {"some [ / thing / ]else", "some-thing-else"},
        {"some / thing /else", "some-thing-else"},
        {"some-thing.else_new", "some-thing.else_new"},
        /* beyond NVIDIA's table: characters outside the set go before the split */
        {"product-name\n", "product-name"},
        {"a\nb", "ab"},
        {"NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"},
        {"caf\xc3\xa9 bar", "caf-bar"},
        {"", ""},
        {"   ", ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
        char *s = gfd_sanitise(table[i][0]);
        if (strcmp(s, table[i][1]) != 0)
            fail_msg("sanitise(\"%s\") = \"%s\", want \"%s\"", table[i][0], s, table[i][1]);
        free(s);
    }
}

/* ---- C: TestMigResourceLabeler ------------------------------------------------------------ */

static void test_c_mig_resource(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f);
    fx_mig(fx_mig_enabled(&f), 1, 2, 300);

#define MIG_ATTRS                                                                      \
    "memory=300", "multiprocessors=0", "slices.gi=1", "slices.ci=2", "engines.copy=0", \
        "engines.decoder=0", "engines.encoder=0", "engines.jpeg=0", "engines.ofa=0"

    /* resource nvidia.com/gpu: the single strategy */
    struct dpconfig *c = cfg_strategy(NULL, DPCONFIG_MIG_SINGLE);
    struct gfd_labels *l = compute(&f, c);
    expect_resource(l, P "gpu",
                    RES("count=1", "replicas=1", "sharing-strategy=none",
                        "product=MOCKMODEL-MIG-1g.300gb", MIG_ATTRS));
    gfd_labels_free(l);
    dpconfig_free(c);

    c = cfg_strategy(cfg_shared('t', P "gpu", 2, NULL), DPCONFIG_MIG_SINGLE);
    l = compute(&f, c);
    expect_resource(l, P "gpu",
                    RES("count=1", "replicas=2", "sharing-strategy=time-slicing",
                        "product=MOCKMODEL-MIG-1g.300gb-SHARED", MIG_ATTRS));
    gfd_labels_free(l);
    dpconfig_free(c);

    c = cfg_strategy(cfg_shared('t', P "gpu", 2, P "gpu.shared"), DPCONFIG_MIG_SINGLE);
    l = compute(&f, c);
    expect_resource(l, P "gpu",
                    RES("count=1", "replicas=2", "sharing-strategy=time-slicing",
                        "product=MOCKMODEL-MIG-1g.300gb", MIG_ATTRS));
    gfd_labels_free(l);
    dpconfig_free(c);

    /* A mig-<profile> resource shared x2 (NVIDIA's test names the resource mig-1g.1gb
     * directly; here the name follows from the device's profile under the mixed strategy). */
    c = cfg_strategy(cfg_shared('t', P "mig-1g.300gb", 2, NULL), DPCONFIG_MIG_MIXED);
    l = compute(&f, c);
    expect_resource(l, P "mig-1g.300gb",
                    RES("count=1", "replicas=2", "sharing-strategy=time-slicing",
                        "product=MOCKMODEL-MIG-1g.300gb-SHARED", MIG_ATTRS));
    gfd_labels_free(l);
    dpconfig_free(c);
#undef MIG_ATTRS
}

/* ---- D: TestMigStrategyNoneLabels --------------------------------------------------------- */

static void test_d_strategy_none(void **state)
{
    (void)state;
    struct fixture f;
    struct gfd_labels *l;
    struct dpconfig *ts = cfg_shared('t', P "gpu", 2, NULL);

    fx_init(&f);
    fx_full(&f);
    l = compute(&f, NULL);
    expect_resource(l, P "gpu", RES(FULL_NOSHARE));
    expect_absent(l, P "mig.strategy");
    gfd_labels_free(l);

    fx_init(&f);
    fx_full(&f);
    fx_full(&f);
    l = compute(&f, ts);
    expect_resource(l, P "gpu",
                    RES("count=2", "replicas=2", "sharing-strategy=time-slicing", "memory=300",
                        "product=MOCKMODEL-SHARED", "family=ampere", "compute.major=8",
                        "compute.minor=0"));
    gfd_labels_free(l);

    for (int n = 1; n <= 2; n++) {
        fx_init(&f);
        for (int i = 0; i < n; i++)
            fx_mig_enabled(&f);
        l = compute(&f, ts);
        char count[24]; /* "count=" and any int */
        snprintf(count, sizeof(count), "count=%d", n);
        expect_resource(
            l, P "gpu",
            RES(count, "replicas=0", "sharing-strategy=none", "memory=300", "product=MOCKMODEL"));
        gfd_labels_free(l);
    }

    fx_init(&f);
    fx_mig_enabled(&f);
    fx_full(&f);
    l = compute(&f, ts);
    expect_resource(l, P "gpu",
                    RES("count=2", "replicas=2", "sharing-strategy=time-slicing", "memory=300",
                        "product=MOCKMODEL-SHARED", "family=ampere", "compute.major=8",
                        "compute.minor=0"));
    gfd_labels_free(l);
    dpconfig_free(ts);
}

/* ---- E: TestMigStrategySingleLabels ------------------------------------------------------- */

static void test_e_strategy_single(void **state)
{
    (void)state;
    struct fixture f;
    struct gfd_labels *l;
    struct dpconfig *c = cfg_strategy(NULL, DPCONFIG_MIG_SINGLE);

    for (int n = 1; n <= 2; n++) {
        fx_init(&f);
        for (int i = 0; i < n; i++)
            fx_full(&f);
        l = compute(&f, c);
        char count[24]; /* "count=" and any int */
        snprintf(count, sizeof(count), "count=%d", n);
        expect_resource(l, P "gpu",
                        RES(count, "replicas=1", "sharing-strategy=none", "memory=300",
                            "product=MOCKMODEL", "family=ampere", "compute.major=8",
                            "compute.minor=0"));
        expect_label(l, P "mig.strategy", "single");
        assert_null(l->warning);
        gfd_labels_free(l);
    }

    fx_init(&f);
    fx_mig(fx_mig_enabled(&f), 1, 2, 100);
    l = compute(&f, c);
    expect_resource(l, P "gpu",
                    RES("count=1", "replicas=1", "sharing-strategy=none", "memory=100",
                        "product=MOCKMODEL-MIG-1g.100gb", "multiprocessors=0", "slices.gi=1",
                        "slices.ci=2", "engines.copy=0", "engines.decoder=0", "engines.encoder=0",
                        "engines.jpeg=0", "engines.ofa=0"));
    expect_label(l, P "mig.strategy", "single");
    gfd_labels_free(l);

    fx_init(&f);
    for (int i = 0; i < 2; i++) {
        struct gpu_mig_device *m = fx_mig(fx_mig_enabled(&f), 1, 2, 100);
        m->multiprocessors = 12;
        m->copy_engines = 13;
        m->decoders = 14;
        m->encoders = 15;
        m->jpegs = 16;
        m->ofas = 17;
    }
    l = compute(&f, c);
    expect_resource(l, P "gpu",
                    RES("count=2", "replicas=1", "sharing-strategy=none", "memory=100",
                        "product=MOCKMODEL-MIG-1g.100gb", "multiprocessors=12", "slices.gi=1",
                        "slices.ci=2", "engines.copy=13", "engines.decoder=14",
                        "engines.encoder=15", "engines.jpeg=16", "engines.ofa=17"));
    gfd_labels_free(l);

    /* invalid cases */
    struct {
        const char *name;
        bool with_full;
        const char *reason;
    } invalid[4] = {
        {"empty MIG-enabled GPU", false, "no MIG devices"},
        {"two MIG profiles", false, "more than one MIG device type"},
        {"MIG-enabled + full", true, "same migEnabled value"},
        {"enabled + full + empty", true, "same migEnabled value"},
    };
    for (size_t t = 0; t < 4; t++) {
        fx_init(&f);
        struct gpu_device *d;
        switch (t) {
        case 0:
            fx_mig_enabled(&f);
            break;
        case 1:
            d = fx_mig_enabled(&f);
            fx_mig(d, 1, 2, 100);
            fx_mig(d, 3, 4, 100);
            break;
        case 2:
            fx_mig(fx_mig_enabled(&f), 1, 2, 100);
            fx_full(&f);
            break;
        case 3:
            fx_mig(fx_mig_enabled(&f), 1, 2, 100);
            fx_full(&f);
            fx_mig_enabled(&f);
            break;
        }
        l = compute(&f, c);
        if (invalid[t].with_full)
            expect_resource(l, P "gpu",
                            RES("count=0", "replicas=0", "sharing-strategy=", "memory=0",
                                "product=MOCKMODEL-MIG-INVALID", "family=ampere", "compute.major=8",
                                "compute.minor=0"));
        else
            expect_resource(l, P "gpu",
                            RES("count=0", "replicas=0", "sharing-strategy=", "memory=0",
                                "product=MOCKMODEL-MIG-INVALID"));
        expect_label(l, P "mig.strategy", "single");
        assert_non_null(l->warning);
        if (!strstr(l->warning, invalid[t].reason))
            fail_msg("%s: warning \"%s\" lacks \"%s\"", invalid[t].name, l->warning,
                     invalid[t].reason);
        gfd_labels_free(l);
    }

    /* invalid with sharing configured: still no sharing, no -SHARED */
    struct dpconfig *cs = cfg_strategy(cfg_shared('t', P "gpu", 4, NULL), DPCONFIG_MIG_SINGLE);
    fx_init(&f);
    fx_mig_enabled(&f);
    l = compute(&f, cs);
    expect_label(l, P "gpu.product", "MOCKMODEL-MIG-INVALID");
    expect_label(l, P "gpu.replicas", "0");
    gfd_labels_free(l);
    dpconfig_free(cs);
    dpconfig_free(c);
}

/* ---- F: TestMigCapabilityLabeler, TestSharingLabeler -------------------------------------- */

static void test_f_capabilities(void **state)
{
    (void)state;
    struct fixture f;
    struct gfd_labels *l;

    fx_init(&f);
    fx_full(&f);
    fx_full(&f);
    l = compute(&f, NULL);
    expect_label(l, P "mig.capable", "false");
    expect_label(l, P "mps.capable", "false");
    gfd_labels_free(l);

    fx_init(&f);
    fx_full(&f);
    fx_mig_enabled(&f);
    l = compute(&f, NULL);
    expect_label(l, P "mig.capable", "true");
    gfd_labels_free(l);

    /* capable but not enabled */
    fx_init(&f);
    fx_full(&f)->mig_capable = true;
    l = compute(&f, NULL);
    expect_label(l, P "mig.capable", "true");
    gfd_labels_free(l);

    fx_init(&f);
    fx_full(&f);
    struct dpconfig *c = dpconfig_new(); /* empty config */
    l = compute(&f, c);
    expect_label(l, P "mps.capable", "false");
    gfd_labels_free(l);
    dpconfig_free(c);

    c = cfg_shared('t', P "gpu", 2, NULL);
    l = compute(&f, c);
    expect_label(l, P "mps.capable", "false");
    gfd_labels_free(l);
    dpconfig_free(c);

    c = cfg_shared('m', P "gpu", 1, NULL); /* MPS with replicas 1 is no MPS */
    l = compute(&f, c);
    expect_label(l, P "mps.capable", "false");
    expect_label(l, P "gpu.sharing-strategy", "none");
    gfd_labels_free(l);
    dpconfig_free(c);

    c = cfg_shared('m', P "gpu", 2, NULL);
    l = compute(&f, c);
    expect_label(l, P "mps.capable", "true");
    gfd_labels_free(l);

    /* MPS with a MIG-enabled device is an error */
    fx_mig_enabled(&f);
    struct gfd_input in = {.inventory = &f.inv, .config = c};
    struct err e = {0};
    l = NULL;
    assert_int_equal(gfd_labels_compute(&in, &l, &e), -EINVAL);
    assert_null(l);
    assert_non_null(strstr(err_msg(&e), "MPS"));
    assert_non_null(strstr(err_msg(&e), "MIG-enabled"));
    dpconfig_free(c);
}

/* ---- G: end-to-end cases of NVIDIA's main_test.go / mig_test.go --------------------------- */

static void test_g_end_to_end(void **state)
{
    (void)state;
    struct fixture f;
    struct gfd_labels *l;

    /* none, one MIG-enabled GPU with 2x(3g, 20000) */
    fx_init(&f);
    struct gpu_device *d = fx_mig_enabled(&f);
    fx_mig(d, 3, 3, 20000);
    fx_mig(d, 3, 3, 20000);
    l = compute(&f, NULL);
    expect_label(l, P "gpu.count", "1");
    expect_label(l, P "gpu.product", "MOCKMODEL");
    expect_label(l, P "gpu.memory", "300");
    expect_absent(l, P "mig.strategy");
    gfd_labels_free(l);

    struct dpconfig *single = cfg_strategy(NULL, DPCONFIG_MIG_SINGLE);
    fx_init(&f);
    fx_full(&f);
    l = compute(&f, single);
    expect_label(l, P "mig.strategy", "single");
    expect_label(l, P "gpu.count", "1");
    expect_label(l, P "gpu.product", "MOCKMODEL");
    expect_label(l, P "gpu.memory", "300");
    gfd_labels_free(l);

    /* single, MIG disabled but MIG devices attached: they are ignored */
    fx_init(&f);
    d = fx_full(&f);
    fx_mig(d, 3, 0, 20);
    l = compute(&f, single);
    expect_label(l, P "mig.strategy", "single");
    expect_label(l, P "gpu.count", "1");
    expect_label(l, P "gpu.product", "MOCKMODEL");
    expect_label(l, P "gpu.memory", "300");
    gfd_labels_free(l);

    fx_init(&f);
    d = fx_mig_enabled(&f);
    fx_mig(d, 3, 0, 20);
    fx_mig(d, 3, 0, 20);
    l = compute(&f, single);
    expect_label(l, P "gpu.count", "2");
    expect_label(l, P "gpu.product", "MOCKMODEL-MIG-3g.20gb");
    expect_label(l, P "gpu.memory", "20");
    gfd_labels_free(l);
    dpconfig_free(single);

    struct dpconfig *mixed = cfg_strategy(NULL, DPCONFIG_MIG_MIXED);
    fx_init(&f);
    d = fx_mig_enabled(&f);
    fx_mig(d, 3, 0, 20);
    fx_mig(d, 1, 0, 5);
    l = compute(&f, mixed);
    expect_label(l, P "mig.strategy", "mixed");
    expect_label(l, P "gpu.count", "1");
    expect_label(l, P "gpu.product", "MOCKMODEL");
    expect_label(l, P "gpu.memory", "300");
    expect_label(l, P "mig-3g.20gb.count", "1");
    expect_label(l, P "mig-1g.5gb.count", "1");
    expect_label(l, P "mig-3g.20gb.product", "MOCKMODEL-MIG-3g.20gb");
    expect_label(l, P "mig-1g.5gb.memory", "5");
    gfd_labels_free(l);
    dpconfig_free(mixed);

    /* timestamp: present with with_timestamp (10 digits for today's clock), absent without */
    fx_init(&f);
    fx_full(&f);
    struct gfd_input in = {.inventory = &f.inv, .with_timestamp = true, .timestamp = 1795988148};
    struct err e = {0};
    assert_int_equal(gfd_labels_compute(&in, &l, &e), 0);
    expect_label(l, P "gfd.timestamp", "1795988148");
    gfd_labels_free(l);
    in.with_timestamp = false;
    assert_int_equal(gfd_labels_compute(&in, &l, &e), 0);
    expect_absent(l, P "gfd.timestamp");
    gfd_labels_free(l);
}

/* ---- MIG strategies on realistic inventories ---------------------------------------------- */

static void test_mixed_naming_and_counts(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f);
    struct gpu_device *a = fx_mig_enabled(&f);
    struct gpu_device *b = fx_mig_enabled(&f);
    struct gpu_device *full = fx_full(&f);
    (void)full;
    strlcpy_s(fx_mig(a, 1, 1, 10)->profile, "1g.10gb", GPU_PROFILE_MAX);
    strlcpy_s(fx_mig(a, 1, 1, 10)->profile, "1g.10gb+me", GPU_PROFILE_MAX);
    strlcpy_s(fx_mig(b, 1, 1, 10)->profile, "1g.10gb", GPU_PROFILE_MAX);
    strlcpy_s(fx_mig(b, 3, 3, 40)->profile, "3g.40gb", GPU_PROFILE_MAX);

    struct dpconfig *c =
        cfg_strategy(cfg_shared('t', P "mig-1g.10gb", 3, NULL), DPCONFIG_MIG_MIXED);
    struct gfd_labels *l = compute(&f, c);
    /* every physical GPU counts under mixed; the full GPU carries the sharing (none for gpu) */
    expect_label(l, P "gpu.count", "3");
    expect_label(l, P "gpu.replicas", "1");
    expect_label(l, P "gpu.family", "ampere");
    expect_label(l, P "mig-1g.10gb.count", "2");
    expect_label(l, P "mig-1g.10gb.replicas", "3");
    expect_label(l, P "mig-1g.10gb.sharing-strategy", "time-slicing");
    expect_label(l, P "mig-1g.10gb.product", "MOCKMODEL-MIG-1g.10gb-SHARED");
    expect_label(l, P "mig-1g.10gb.me.count", "1");
    expect_label(l, P "mig-1g.10gb.me.replicas", "1");
    /* the sanitiser drops '+' from the product, as NVIDIA's does */
    expect_label(l, P "mig-1g.10gb.me.product", "MOCKMODEL-MIG-1g.10gbme");
    expect_label(l, P "mig-3g.40gb.count", "1");
    expect_label(l, P "mig-3g.40gb.slices.gi", "3");
    expect_label(l, P "mig-3g.40gb.memory", "40");
    expect_label(l, P "mig.strategy", "mixed");
    gfd_labels_free(l);
    dpconfig_free(c);
}

/* Mixed labels only C == G profiles, like NVIDIA's device map and gpuop's device plugin: a
 * compute instance smaller than its GPU instance ("1c.3g.40gb") advertises no resource. */
static void test_mixed_skips_partial_compute_instances(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f);
    struct gpu_device *a = fx_mig_enabled(&f);
    strlcpy_s(fx_mig(a, 3, 3, 40)->profile, "3g.40gb", GPU_PROFILE_MAX);
    strlcpy_s(fx_mig(a, 3, 1, 40)->profile, "1c.3g.40gb", GPU_PROFILE_MAX);
    strlcpy_s(fx_mig(a, 3, 2, 40)->profile, "2c.3g.40gb", GPU_PROFILE_MAX);
    struct dpconfig *c = cfg_strategy(NULL, DPCONFIG_MIG_MIXED);
    struct gfd_labels *l = compute(&f, c);
    expect_label(l, P "mig-3g.40gb.count", "1");
    expect_absent(l, P "mig-1c.3g.40gb.count");
    expect_absent(l, P "mig-1c.3g.40gb.product");
    expect_absent(l, P "mig-2c.3g.40gb.count");
    gfd_labels_free(l);
    dpconfig_free(c);
}

/* ---- node-level labels -------------------------------------------------------------------- */

static void test_versions(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f);
    fx_full(&f);
    strlcpy_s(f.inv.driver_version, "550.107.02", sizeof(f.inv.driver_version));
    f.inv.cuda_driver_version = 12040;
    struct gfd_labels *l = compute(&f, NULL);
    expect_label(l, P "cuda.driver.major", "550");
    expect_label(l, P "cuda.driver.minor", "107");
    expect_label(l, P "cuda.driver.rev", "02");
    expect_label(l, P "cuda.driver-version.major", "550");
    expect_label(l, P "cuda.driver-version.minor", "107");
    expect_label(l, P "cuda.driver-version.revision", "02");
    expect_label(l, P "cuda.driver-version.full", "550.107.02");
    expect_label(l, P "cuda.runtime.major", "12");
    expect_label(l, P "cuda.runtime.minor", "4");
    expect_label(l, P "cuda.runtime-version.major", "12");
    expect_label(l, P "cuda.runtime-version.minor", "4");
    expect_label(l, P "cuda.runtime-version.full", "12.4");
    gfd_labels_free(l);

    f.inv.cuda_driver_version = 12080;
    strlcpy_s(f.inv.driver_version, "400.300", sizeof(f.inv.driver_version));
    l = compute(&f, NULL);
    expect_label(l, P "cuda.runtime-version.full", "12.8");
    expect_label(l, P "cuda.driver.rev", "");
    expect_label(l, P "cuda.driver-version.revision", "");
    expect_label(l, P "cuda.driver-version.full", "400.300");
    gfd_labels_free(l);

    /* the mock's CUDA (8,0) */
    f.inv.cuda_driver_version = 8000;
    l = compute(&f, NULL);
    expect_label(l, P "cuda.runtime-version.full", "8.0");
    gfd_labels_free(l);

    static const char *const bad[] = {"", "550", "550.", "a.b", "550.1.2.3", "550.1x", ".1"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        strlcpy_s(f.inv.driver_version, bad[i], sizeof(f.inv.driver_version));
        struct gfd_input in = {.inventory = &f.inv};
        struct err e = {0};
        l = NULL;
        assert_int_equal(gfd_labels_compute(&in, &l, &e), -EINVAL);
        assert_null(l);
        assert_non_null(strstr(err_msg(&e), "driver version"));
    }
}

static void test_families(void **state)
{
    (void)state;
    static const struct {
        int major, minor;
        const char *family;
    } table[] = {
        {1, 0, "tesla"},      {1, 3, "tesla"},      {2, 0, "fermi"},      {2, 1, "fermi"},
        {3, 0, "kepler"},     {3, 7, "kepler"},     {4, 0, "undefined"},  {5, 0, "maxwell"},
        {5, 3, "maxwell"},    {6, 0, "pascal"},     {6, 2, "pascal"},     {7, 0, "volta"},
        {7, 2, "volta"},      {7, 4, "volta"},      {7, 5, "turing"},     {8, 0, "ampere"},
        {8, 6, "ampere"},     {8, 7, "ampere"},     {8, 8, "ampere"},     {8, 9, "ada-lovelace"},
        {9, 0, "hopper"},     {10, 0, "blackwell"}, {10, 3, "blackwell"}, {11, 0, "undefined"},
        {12, 0, "blackwell"}, {12, 1, "blackwell"}, {13, 0, "rubin"},     {14, 0, "undefined"},
        {0, 0, "undefined"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
        const char *got = gfd_arch_family(table[i].major, table[i].minor);
        if (strcmp(got, table[i].family) != 0)
            fail_msg("family(%d.%d) = %s, want %s", table[i].major, table[i].minor, got,
                     table[i].family);
    }
    /* and through the labels */
    struct fixture f;
    fx_init(&f);
    struct gpu_device *d = fx_full(&f);
    d->cc_major = 9;
    d->cc_minor = 0;
    struct gfd_labels *l = compute(&f, NULL);
    expect_label(l, P "gpu.family", "hopper");
    expect_label(l, P "gpu.compute.major", "9");
    expect_label(l, P "gpu.compute.minor", "0");
    gfd_labels_free(l);
    d->cc_major = 7;
    d->cc_minor = 5;
    l = compute(&f, NULL);
    expect_label(l, P "gpu.family", "turing");
    expect_label(l, P "gpu.compute.minor", "5");
    gfd_labels_free(l);
}

static void test_mode(void **state)
{
    (void)state;
    static const struct {
        unsigned a, b;
        bool b_mig;
        const char *mode;
    } table[] = {
        {0x0302, 0x0302, false, "compute"}, {0x0300, 0x0300, false, "graphics"},
        {0x0302, 0x0300, false, "unknown"}, {0, 0, false, "unknown"},
        {0x0380, 0x0380, false, "unknown"}, {0x0302, 0, true, "compute"},
        {0x0300, 0, true, "unknown"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
        struct fixture f;
        fx_init(&f);
        fx_full(&f)->pci_class = table[i].a;
        struct gpu_device *b = table[i].b_mig ? fx_mig_enabled(&f) : fx_full(&f);
        b->pci_class = table[i].b;
        struct gfd_labels *l = compute(&f, NULL);
        expect_label(l, P "gpu.mode", table[i].mode);
        gfd_labels_free(l);
    }
    struct fixture f;
    fx_init(&f); /* no GPUs */
    struct gfd_labels *l = compute(&f, NULL);
    expect_label(l, P "gpu.mode", "unknown");
    expect_absent(l, P "gpu.count");
    expect_absent(l, P "gpu.product");
    expect_label(l, P "mig.capable", "false");
    gfd_labels_free(l);
}

static void test_machine(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f);
    fx_full(&f);
    static const char *const table[][2] = {
        {NULL, "unknown"},
        {"product-name\n", "product-name"},
        {"NVIDIA DGX H100\n", "NVIDIA-DGX-H100"},
        {"DGXA100 920-23687-2530-000", "DGXA100-920-23687-2530-000"},
        {"", ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
        struct gfd_input in = {.inventory = &f.inv, .machine_type = table[i][0]};
        struct gfd_labels *l = NULL;
        struct err e = {0};
        assert_int_equal(gfd_labels_compute(&in, &l, &e), 0);
        expect_label(l, P "gpu.machine", table[i][1]);
        gfd_labels_free(l);
    }
}

/* vgpu.present on every node whose PCI devices were read; the host driver's version and branch
 * only for a vGPU whose capability carries them; nothing when the devices could not be read. */
static void test_vgpu(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f);
    fx_full(&f);
    struct gpu_vgpu_info none = {0}, bare = {.present = true},
                         host = {.present = true,
                                 .host_driver_version = "535.161",
                                 .host_driver_branch = "r535_10"};
    static const char *const V = P "vgpu.present", *const HV = P "vgpu.host-driver-version",
                             *const HB = P "vgpu.host-driver-branch";
    struct {
        const struct gpu_vgpu_info *in;
        const char *present, *version, *branch;
    } table[] = {
        {NULL, NULL, NULL, NULL},
        {&none, "false", NULL, NULL},
        {&bare, "true", NULL, NULL},
        {&host, "true", "535.161", "r535_10"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
        struct gfd_input in = {.inventory = &f.inv, .vgpu = table[i].in};
        struct gfd_labels *l = NULL;
        struct err e = {0};
        assert_int_equal(gfd_labels_compute(&in, &l, &e), 0);
        if (table[i].present)
            expect_label(l, V, table[i].present);
        else
            expect_absent(l, V);
        if (table[i].version) {
            expect_label(l, HV, table[i].version);
            expect_label(l, HB, table[i].branch);
        } else {
            expect_absent(l, HV);
            expect_absent(l, HB);
        }
        gfd_labels_free(l);
    }
}

/* A node with two GPU models: the nvidia.com/gpu labels describe the first GPU in NVML index
 * order (its product, memory and architecture) and count every GPU, whatever the order of the
 * models; docs/feature-discovery.md says why. */
static void test_mixed_models(void **state)
{
    (void)state;
    static const struct {
        const char *first, *second;
        unsigned long long first_mib;
    } table[] = {
        {"NVIDIA L40S", "NVIDIA L4", 46068},
        {"NVIDIA L4", "NVIDIA L40S", 23034},
    };
    for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
        struct fixture f;
        fx_init(&f);
        for (int k = 0; k < 4; k++) {
            struct gpu_device *d = fx_full(&f);
            bool first = k < 2;
            strlcpy_s(d->name, first ? table[i].first : table[i].second, sizeof(d->name));
            d->memory_total_bytes = (first ? table[i].first_mib : 1000ull) << 20;
        }
        for (int run = 0; run < 3; run++) { /* the same answer every time */
            struct gfd_labels *l = compute(&f, NULL);
            _cleanup_free_ char *product = gfd_sanitise(table[i].first);
            expect_label(l, P "gpu.product", product);
            expect_label(l, P "gpu.count", "4");
            char mib[32];
            snprintf(mib, sizeof(mib), "%llu", table[i].first_mib);
            expect_label(l, P "gpu.memory", mib);
            gfd_labels_free(l);
        }
    }
}

static void test_no_inventory_and_order(void **state)
{
    (void)state;
    struct gfd_input in = {.inventory = NULL, .with_timestamp = true, .timestamp = 42};
    struct gfd_labels *l = NULL;
    struct err e = {0};
    assert_int_equal(gfd_labels_compute(&in, &l, &e), 0);
    assert_int_equal(l->n, 1);
    expect_label(l, P "gfd.timestamp", "42");
    gfd_labels_free(l);

    struct fixture f;
    fx_init(&f);
    fx_full(&f);
    fx_full(&f);
    l = compute(&f, NULL);
    for (size_t i = 1; i < l->n; i++)
        assert_true(strcmp(l->items[i - 1].key, l->items[i].key) < 0);
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 1 << 16);
    assert_int_equal(gfd_labels_format(l, &b), 0);
    assert_non_null(strstr(b.data, "nvidia.com/gpu.count=2\n"));
    assert_true(str_has_prefix(b.data, "nvidia.com/cuda.driver-version.full=400.300\n"));
    /* all keys carry the nvidia.com/ prefix */
    for (size_t i = 0; i < l->n; i++)
        assert_true(str_has_prefix(l->items[i].key, P));
    gfd_labels_free(l);
}

static void test_lost_gpu_left_out(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f);
    fx_full(&f);
    fx_full(&f)->lost = true;
    fx_full(&f);
    struct gfd_labels *l = compute(&f, NULL);
    expect_label(l, P "gpu.count", "2");
    gfd_labels_free(l);
}

/* The shared name from a parsed config (renameByDefault) drops -SHARED as a set rename does. */
static void test_parsed_sharing_config(void **state)
{
    (void)state;
    static const char yaml[] = "version: v1\n"
                               "sharing:\n"
                               "  timeSlicing:\n"
                               "    renameByDefault: true\n"
                               "    resources:\n"
                               "    - name: nvidia.com/gpu\n"
                               "      replicas: 10\n";
    struct dpconfig *c = NULL;
    struct err e = {0};
    assert_int_equal(dpconfig_parse(yaml, strlen(yaml), "ts.yaml", &c, &e), 0);
    struct fixture f;
    fx_init(&f);
    for (int i = 0; i < 8; i++)
        fx_full(&f);
    struct gfd_labels *l = compute(&f, c);
    expect_resource(l, P "gpu",
                    RES("count=8", "replicas=10", "sharing-strategy=time-slicing", "memory=300",
                        "product=MOCKMODEL", "family=ampere", "compute.major=8",
                        "compute.minor=0"));
    gfd_labels_free(l);
    dpconfig_free(c);

    static const char yaml2[] = "sharing:\n"
                                "  mps:\n"
                                "    resources:\n"
                                "    - name: gpu\n"
                                "      replicas: 4\n";
    assert_int_equal(dpconfig_parse(yaml2, strlen(yaml2), "mps.yaml", &c, &e), 0);
    l = compute(&f, c);
    expect_label(l, P "gpu.product", "MOCKMODEL-SHARED");
    expect_label(l, P "gpu.sharing-strategy", "mps");
    expect_label(l, P "gpu.replicas", "4");
    expect_label(l, P "mps.capable", "true");
    gfd_labels_free(l);
    dpconfig_free(c);
}

/* The features file's timestamp: the time the labels last changed. */
static void test_stamp(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f);
    fx_full(&f);
    struct gfd_input in = {.inventory = &f.inv};
    struct gfd_stamp st = {0};
    struct gfd_labels *l = NULL;
    struct err e = {0};
    assert_int_equal(gfd_labels_stamped(&in, true, 1000, &st, &l, &e), 0);
    expect_label(l, P "gfd.timestamp", "1000");
    gfd_labels_free(l);
    /* the same labels later: the time they changed stays */
    assert_int_equal(gfd_labels_stamped(&in, true, 2000, &st, &l, &e), 0);
    expect_label(l, P "gfd.timestamp", "1000");
    gfd_labels_free(l);
    /* other labels: the time moves */
    const char *machine = "DGX H100";
    in.machine_type = machine;
    assert_int_equal(gfd_labels_stamped(&in, true, 3000, &st, &l, &e), 0);
    expect_label(l, P "gfd.timestamp", "3000");
    expect_label(l, P "gpu.machine", "DGX-H100");
    gfd_labels_free(l);
    /* without the timestamp: none written, the time still kept */
    assert_int_equal(gfd_labels_stamped(&in, false, 4000, &st, &l, &e), 0);
    expect_absent(l, P "gfd.timestamp");
    assert_int_equal(st.at, 3000);
    gfd_labels_free(l);
    /* cleared (a reload): set anew */
    gfd_stamp_clear(&st);
    assert_int_equal(gfd_labels_stamped(&in, true, 5000, &st, &l, &e), 0);
    expect_label(l, P "gfd.timestamp", "5000");
    gfd_labels_free(l);
    gfd_stamp_clear(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_full_gpu),
        cmocka_unit_test(test_b_sanitise),
        cmocka_unit_test(test_c_mig_resource),
        cmocka_unit_test(test_d_strategy_none),
        cmocka_unit_test(test_e_strategy_single),
        cmocka_unit_test(test_f_capabilities),
        cmocka_unit_test(test_g_end_to_end),
        cmocka_unit_test(test_mixed_naming_and_counts),
        cmocka_unit_test(test_mixed_skips_partial_compute_instances),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_families),
        cmocka_unit_test(test_mode),
        cmocka_unit_test(test_machine),
        cmocka_unit_test(test_vgpu),
        cmocka_unit_test(test_stamp),
        cmocka_unit_test(test_mixed_models),
        cmocka_unit_test(test_no_inventory_and_order),
        cmocka_unit_test(test_lost_gpu_left_out),
        cmocka_unit_test(test_parsed_sharing_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
