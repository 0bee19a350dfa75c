/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migparted's core: profile names, a table of invalid configs and their messages, the default
 * ConfigMap (every named config resolves on the GPU models it is written for and is refused on
 * the others), and the placement planner (every default layout fits; layouts that cannot fit are
 * refused). The GPUs' profiles and placements come from NVML as the product reads them: the
 * simulated driver (argv[1]) serving a fleet of one A100 40GB, A100 80GB, H100 80GB and H200.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "migparted.h"
#include "yamlcfg.h"

static const char *nvml_path;
static struct mp_node *node; /* GPU 0: A100 40GB, 1: A100 80GB, 2: H100 80GB, 3: H200 */
static struct mp_spec *defaults;

static const char fleet[] =
    "driver_version: \"570.86.15\"\n"
    "cuda_driver_version: 12080\n"
    "gpus:\n"
    "  - {model: \"NVIDIA A100-SXM4-40GB\", memory_mib: 40960, compute_capability: \"8.0\",\n"
    "     architecture: ampere, pci_device_id: 0x20b010de, mig_capable: true,\n"
    "     power_limit_w: 400, max_sm_clock_mhz: 1410}\n"
    "  - {model: \"NVIDIA A100-SXM4-80GB\", memory_mib: 81920, compute_capability: \"8.0\",\n"
    "     architecture: ampere, pci_device_id: 0x20b210de, mig_capable: true,\n"
    "     power_limit_w: 400, max_sm_clock_mhz: 1410}\n"
    "  - {model: \"NVIDIA H100 80GB HBM3\", memory_mib: 81559, compute_capability: \"9.0\",\n"
    "     architecture: hopper, pci_device_id: 0x233010de, mig_capable: true,\n"
    "     power_limit_w: 700, max_sm_clock_mhz: 1980}\n"
    "  - {model: \"NVIDIA H200\", memory_mib: 143771, compute_capability: \"9.0\",\n"
    "     architecture: hopper, pci_device_id: 0x233510de, mig_capable: true,\n"
    "     power_limit_w: 700, max_sm_clock_mhz: 1980}\n"
    "  - {model: \"NVIDIA L4\", memory_mib: 23034, compute_capability: \"8.9\",\n"
    "     architecture: ada, pci_device_id: 0x27b810de, mig_capable: false,\n"
    "     power_limit_w: 72, max_sm_clock_mhz: 2040}\n";

static int setup(void **state)
{
    (void)state;
    char dir[] = "/tmp/test-migparted-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof(path), "%s/fleet.yaml", dir);
    struct err e = {0};
    assert_int_equal(file_write_atomic(path, fleet, strlen(fleet), 0644, &e), 0);
    setenv("GPUOP_SIM_FLEET", path, 1);
    unsetenv("GPUOP_SIM_STATE");
    unsetenv("GPUOP_SIM_ROOT");
    struct gpu_lib *lib = NULL;
    if (gpu_lib_open(nvml_path, &lib, &e) < 0)
        fail_msg("open %s: %s", nvml_path, err_msg(&e));
    if (mp_node_read(lib, &node, &e) < 0)
        fail_msg("mp_node_read: %s", err_msg(&e));
    gpu_lib_free(lib);
    unlink(path);
    rmdir(dir);
    assert_int_equal(node->n_gpus, 5);

    /* NVIDIA's ConfigMap, key config.yaml */
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    char cm_path[4096];
    snprintf(cm_path, sizeof(cm_path), "%s/tests/migparted/default-mig-parted-config.yaml",
             src ? src : ".");
    _cleanup_json_ json_t *cm = NULL;
    if (yaml_load_file(cm_path, &cm, &e) < 0)
        fail_msg("%s", err_msg(&e));
    const char *text =
        json_string_value(json_object_get(json_object_get(cm, "data"), "config.yaml"));
    assert_non_null(text);
    if (mp_spec_parse(text, strlen(text), "default-mig-parted-config", &defaults, &e) < 0)
        fail_msg("default config: %s", err_msg(&e));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mp_node_free(node);
    mp_spec_free(defaults);
    return 0;
}

/* ---- profile names ------------------------------------------------------------------------- */

static void test_profile_keys(void **state)
{
    (void)state;
    static const struct {
        const char *s, *gi;
        unsigned ci;
    } ok[] = {
        {"1g.10gb", "1g.10gb", 0},         {"1g.10gb+me", "1g.10gb+me", 0},
        {"1g.24gb+gfx", "1g.24gb+gfx", 0}, {"1g.24gb+me.all", "1g.24gb+me.all", 0},
        {"1g.24gb-me", "1g.24gb-me", 0},   {"1c.2g.10gb", "2g.10gb", 1},
        {"2c.3g.40gb", "3g.40gb", 2},      {"3c.3g.40gb", "3g.40gb", 0},
        {"7g.141gb", "7g.141gb", 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
        struct mp_profile_key k;
        struct err e = {0};
        if (mp_profile_key_parse(ok[i].s, &k, &e) < 0)
            fail_msg("%s: %s", ok[i].s, err_msg(&e));
        assert_string_equal(k.gi, ok[i].gi);
        assert_int_equal(k.ci_slices, ok[i].ci);
    }
    static const struct {
        const char *s, *msg;
    } bad[] = {
        {"", "an empty MIG profile"},
        {"1g", "is not a MIG profile"},
        {"1g.10", "is not a MIG profile"},
        {"g.10gb", "is not a MIG profile"},
        {"1g.10gb+foo", "unknown profile attribute \"+foo\""},
        {"1g.10gb+me+me", "attribute +me given twice"},
        {"4c.3g.40gb", "does not fit a 3-slice GPU instance"},
        {"0c.3g.40gb", "at least 1 slice"},
        {"0g.10gb", "at least 1"},
        {"1g.10gb ", "unknown profile attribute"},
        {"99g.10gb", "is not a MIG profile"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct mp_profile_key k;
        struct err e = {0};
        assert_int_equal(mp_profile_key_parse(bad[i].s, &k, &e), -EINVAL);
        if (!strstr(err_msg(&e), bad[i].msg))
            fail_msg("\"%s\": got \"%s\", wanted \"%s\"", bad[i].s, err_msg(&e), bad[i].msg);
    }
}

/* ---- invalid configs ----------------------------------------------------------------------- */

static void test_invalid_configs(void **state)
{
    (void)state;
    static const struct {
        const char *yaml, *msg;
    } t[] = {
        {"version: v2\nmig-configs: {}\n", "c.yaml.version: \"v2\" is not a supported version"},
        {"mig-configs: {}\n", "version"},
        {"version: v1\n", "mig-configs"},
        {"version: v1\nmig-configs: {}\nextra: 1\n", "extra"},
        {"- 1\n", "expected a map"},
        {"version: v1\nmig-configs: []\n", "mig-configs"},
        {"version: v1\nmig-configs:\n  a: []\n", "mig-configs.a: expected a non-empty list"},
        {"version: v1\nmig-configs:\n  a: {}\n", "mig-configs.a: expected a non-empty list"},
        {"version: v1\nmig-configs:\n  a:\n    - mig-enabled: false\n",
         "mig-configs.a[0].devices: required"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: some\n      mig-enabled: false\n",
         "mig-configs.a[0].devices: expected \"all\" or a list of GPU indices, got \"some\""},
        {"version: v1\nmig-configs:\n  a:\n    - devices: []\n      mig-enabled: false\n",
         "mig-configs.a[0].devices: an empty list selects no GPU"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: [0, -1]\n      mig-enabled: false\n",
         "mig-configs.a[0].devices[1]: expected a GPU index"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: [0, 0]\n      mig-enabled: false\n",
         "mig-configs.a[0].devices[1]: GPU 0 is listed twice"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: [\"0\"]\n      mig-enabled: false\n",
         "mig-configs.a[0].devices[0]: expected a GPU index (0..1023), got a string"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n", "a[0].mig-enabled: required"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: yes\n",
         "a[0].mig-enabled: expected true or false, got a string"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n",
         "a[0].mig-devices: required when mig-enabled is true"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n"
         "      mig-devices: {\"1g.10gb\": 1}\n",
         "a[0].mig-devices: must be empty when mig-enabled is false"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n"
         "      mig-devices: [\"1g.10gb\"]\n",
         "a[0].mig-devices: expected a map from MIG profile to count, got a list"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n"
         "      mig-devices: {\"1g.10gb\": -1}\n",
         "a[0].mig-devices.\"1g.10gb\": expected a count (0..64)"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n"
         "      mig-devices: {\"1g.10gb\": \"2\"}\n",
         "a[0].mig-devices.\"1g.10gb\": expected a count (0..64), got a string"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n"
         "      mig-devices: {\"1x.10gb\": 1}\n",
         "a[0].mig-devices.\"1x.10gb\": \"1x.10gb\" is not a MIG profile"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n"
         "      device-filter: \"0x2330\"\n",
         "a[0].device-filter: \"0x2330\" is not a device filter"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n"
         "      device-filter: [\"0x233010DE\", \"0x233010DE:0x16\"]\n",
         "a[0].device-filter[1]: \"0x233010DE:0x16\" is not a device filter"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n"
         "      device-filter: []\n",
         "a[0].device-filter: expected a device filter or a non-empty list of them, got an "
         "empty list"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n"
         "      device-filter: 0x233010DE\n",
         "a[0].device-filter: got an integer: a device filter is a quoted string"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n"
         "      device-filter: {a: 1}\n",
         "a[0].device-filter: expected a device filter or a non-empty list of them, got a "
         "mapping"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n"
         "      mig-devices: {}\n      devcies: [0]\n",
         "devcies"},
        {"version: v1\nmig-configs:\n  a:\n    - 7\n", "a[0]: expected an object, got an integer"},
        {"version: v1\nmig-configs:\n  a:\n    - devices: all\n  mig-enabled: [\n", "c.yaml:"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        struct mp_spec *s = NULL;
        struct err e = {0};
        int r = mp_spec_parse(t[i].yaml, strlen(t[i].yaml), "c.yaml", &s, &e);
        if (r >= 0)
            fail_msg("case %zu parsed: %s", i, t[i].yaml);
        assert_null(s);
        if (!strstr(err_msg(&e), t[i].msg))
            fail_msg("case %zu: got \"%s\", wanted \"%s\"", i, err_msg(&e), t[i].msg);
        if (!str_has_prefix(err_msg(&e), "c.yaml"))
            fail_msg("case %zu: \"%s\" does not name the file", i, err_msg(&e));
    }
    /* too large */
    size_t big = MP_CONFIG_MAX_BYTES + 1;
    char *buf = xcalloc(big, 1);
    memset(buf, ' ', big);
    struct mp_spec *s = NULL;
    struct err e = {0};
    assert_int_equal(mp_spec_parse(buf, big, "big.yaml", &s, &e), -E2BIG);
    free(buf);
}

static void test_valid_forms(void **state)
{
    (void)state;
    static const char y[] = "version: v1\n"
                            "mig-configs:\n"
                            "  custom:\n"
                            "    - devices: [0, 2]\n"
                            "      mig-enabled: true\n"
                            "      device-filter: \"0x233010de:0x16C110DE\"\n"
                            "      mig-devices: {\"1c.3g.40gb\": 2, \"1g.10gb\": 0}\n"
                            "    - devices: [1]\n"
                            "      mig-enabled: false\n"
                            "      mig-devices: {}\n";
    _cleanup_(mp_spec_freep) struct mp_spec *s = NULL;
    struct err e = {0};
    if (mp_spec_parse(y, strlen(y), "v.yaml", &s, &e) < 0)
        fail_msg("%s", err_msg(&e));
    const struct mp_config *c = mp_spec_find(s, "custom");
    assert_non_null(c);
    assert_null(mp_spec_find(s, "other"));
    assert_int_equal(c->n_entries, 2);
    assert_int_equal(c->entries[0].n_devices, 2);
    assert_int_equal(c->entries[0].n_filters, 1);
    assert_true(c->entries[0].filters[0].has_subsystem);
    assert_int_equal(c->entries[0].filters[0].device_id, 0x233010de);
    assert_int_equal(c->entries[0].filters[0].subsystem_id, 0x16c110de);
    assert_int_equal(c->entries[0].n_mig_devices, 1); /* a count of 0 is no device */
    assert_int_equal(c->entries[0].mig_devices[0].count, 2);
    assert_int_equal(c->entries[0].mig_devices[0].key.ci_slices, 1);
    assert_false(c->entries[1].mig_enabled);
}

/* ---- the default ConfigMap on each model ---------------------------------------------------- */

/* The configs written for each model (the ConfigMap's comments and device filters). */
static const char *const a100_40[] = {
    "all-disabled", "all-enabled", "all-1g.5gb",  "all-1g.5gb.me", "all-2g.10gb", "all-3g.20gb",
    "all-4g.20gb",  "all-7g.40gb", "all-1g.10gb", "all-balanced",  NULL};
static const char *const a100_80_h100[] = {
    "all-disabled", "all-enabled", "all-1g.10gb", "all-1g.10gb.me", "all-1g.20gb", "all-2g.20gb",
    "all-3g.40gb",  "all-4g.40gb", "all-7g.80gb", "all-balanced",   NULL};
static const char *const h200[] = {"all-disabled",
                                   "all-enabled",
                                   "all-balanced",
                                   "all-1g.18gb",
                                   "all-1g.18gb.me",
                                   "all-1g.35gb",
                                   "all-2g.35gb",
                                   "all-3g.71gb",
                                   "all-4g.71gb",
                                   "all-7g.141gb",
                                   NULL};

static bool listed(const char *const *l, const char *name)
{
    for (; *l; l++)
        if (strcmp(*l, name) == 0)
            return true;
    return false;
}

/* The plan is what the config asks (profiles and counts) and its placements are the GPU's own
 * and apart: checked here independently of the planner. */
static void check_plan(const struct mp_config *c, const struct mp_gpu *g,
                       const struct mp_gpu_plan *p)
{
    assert_true(p->selected);
    const struct mp_entry *en = NULL;
    for (size_t i = 0; i < c->n_entries && !en; i++) {
        const struct mp_entry *x = &c->entries[i];
        bool ok = x->n_filters == 0;
        for (size_t k = 0; k < x->n_filters; k++)
            ok |= x->filters[k].device_id == g->pci_device_id;
        if (ok)
            en = x;
    }
    assert_non_null(en);
    assert_int_equal(p->mig_enabled, en->mig_enabled);
    unsigned want = 0;
    for (size_t i = 0; i < en->n_mig_devices; i++) {
        unsigned have = 0;
        for (size_t k = 0; k < p->n_instances; k++) {
            char name[64];
            mp_instance_profile(&p->instances[k], name, sizeof(name));
            have += strcmp(name, en->mig_devices[i].profile) == 0;
        }
        assert_int_equal(have, en->mig_devices[i].count);
        want += en->mig_devices[i].count;
    }
    assert_int_equal(p->n_instances, want);
    uint64_t used = 0;
    unsigned slices = 0;
    for (size_t k = 0; k < p->n_instances; k++) {
        const struct mp_instance *in = &p->instances[k];
        const struct gpu_mig_profile *prof = NULL;
        for (size_t j = 0; j < g->n_profiles; j++)
            if (strcmp(g->profiles[j].name, in->gi) == 0)
                prof = &g->profiles[j];
        assert_non_null(prof);
        bool valid = false;
        for (size_t j = 0; j < prof->n_placements; j++)
            valid |= prof->placements[j].start == in->start && prof->placements[j].size == in->size;
        assert_true(valid);
        uint64_t bits = ((1ULL << in->size) - 1) << in->start;
        assert_int_equal(used & bits, 0);
        used |= bits;
        slices += prof->slices;
    }
    assert_true(slices <= 7);
}

static void model_configs(unsigned gpu, const char *const *expected)
{
    const struct mp_gpu *g = &node->gpus[gpu];
    assert_true(g->mig_capable);
    assert_true(g->n_profiles >= 7);
    size_t resolved = 0;
    for (size_t i = 0; i < defaults->n_configs; i++) {
        const struct mp_config *c = &defaults->configs[i];
        struct mp_plan *p = NULL;
        struct err e = {0};
        int r = mp_plan_make(c, g, 1, &p, &e);
        if (listed(expected, c->name)) {
            if (r < 0)
                fail_msg("%s on %s: %s", c->name, g->model, err_msg(&e));
            check_plan(c, g, &p->gpus[0]);
            /* the plan as a layout matches itself, and another config does not */
            struct mp_gpu as = *g;
            as.mig_enabled = p->gpus[0].mig_enabled;
            as.instances = p->gpus[0].instances;
            as.n_instances = p->gpus[0].n_instances;
            assert_int_equal(mp_plan_matches(p, &as, 1, false, &e), 0);
            resolved++;
        } else {
            if (r >= 0)
                fail_msg("%s resolved on %s, which it is not written for", c->name, g->model);
            char want[128];
            snprintf(want, sizeof(want), "mig-configs.%s", c->name);
            if (!strstr(err_msg(&e), want) || (!strstr(err_msg(&e), "has no MIG profile") &&
                                               !strstr(err_msg(&e), "selects none")))
                fail_msg("%s on %s: unexpected refusal \"%s\"", c->name, g->model, err_msg(&e));
        }
        mp_plan_free(p);
    }
    size_t n_expected = 0;
    while (expected[n_expected])
        n_expected++;
    assert_int_equal(resolved, n_expected);
}

static void test_defaults_parse(void **state)
{
    (void)state;
    assert_true(defaults->n_configs >= 80);
    for (size_t i = 0; i < defaults->n_configs; i++)
        assert_true(defaults->configs[i].n_entries >= 1);
    const struct mp_config *b = mp_spec_find(defaults, "all-balanced");
    assert_non_null(b);
    assert_true(b->n_entries >= 10);
}

static void test_defaults_a100_40gb(void **state)
{
    (void)state;
    model_configs(0, a100_40);
}
static void test_defaults_a100_80gb(void **state)
{
    (void)state;
    model_configs(1, a100_80_h100);
}
static void test_defaults_h100(void **state)
{
    (void)state;
    model_configs(2, a100_80_h100);
}
static void test_defaults_h200(void **state)
{
    (void)state;
    model_configs(3, h200);
}

/* The whole node: a config selects by index and filter; the L4 is left alone by all-disabled
 * and refused by a config that would enable MIG on it. */
static void test_node_selection(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_(mp_plan_freep) struct mp_plan *p = NULL;
    if (mp_plan_make(mp_spec_find(defaults, "all-balanced"), node->gpus, 4, &p, &e) < 0)
        fail_msg("%s", err_msg(&e));
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(p->gpus[i].n_instances, 4);
    mp_plan_free(p);
    p = NULL;
    if (mp_plan_make(mp_spec_find(defaults, "all-disabled"), node->gpus, 5, &p, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_true(p->gpus[4].selected);
    assert_int_equal(mp_gpu_matches(&node->gpus[4], &p->gpus[4], false, &e), 0);
    mp_plan_free(p);
    p = NULL;
    assert_true(mp_plan_make(mp_spec_find(defaults, "all-enabled"), node->gpus, 5, &p, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "GPU 4 (NVIDIA L4) is not MIG capable"));

    static const char y[] = "version: v1\n"
                            "mig-configs:\n"
                            "  twice:\n"
                            "    - {devices: all, mig-enabled: false}\n"
                            "    - {devices: [2], mig-enabled: true, mig-devices: {}}\n"
                            "  nowhere:\n"
                            "    - {devices: [9], mig-enabled: false}\n"
                            "  by-index:\n"
                            "    - {devices: [2], mig-enabled: true, mig-devices: {3g.40gb: 1}}\n";
    _cleanup_(mp_spec_freep) struct mp_spec *s = NULL;
    if (mp_spec_parse(y, strlen(y), "y", &s, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_int_equal(mp_plan_make(mp_spec_find(s, "twice"), node->gpus, 4, &p, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "GPU 2 (NVIDIA H100 80GB HBM3) is selected by entries 0 "
                                        "and 1"));
    assert_int_equal(mp_plan_make(mp_spec_find(s, "nowhere"), node->gpus, 4, &p, &e), -ENOENT);
    assert_non_null(strstr(err_msg(&e), "selects none of this node's GPUs"));
    if (mp_plan_make(mp_spec_find(s, "by-index"), node->gpus, 4, &p, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_false(p->gpus[0].selected);
    assert_true(p->gpus[2].selected);
    assert_int_equal(p->gpus[2].n_instances, 1);
}

/* ---- a MIG mode waiting for a GPU reset ------------------------------------------------------ */

static void test_reset_pending(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_(mp_plan_freep) struct mp_plan *p = NULL;
    if (mp_plan_make(mp_spec_find(defaults, "all-balanced"), node->gpus, 4, &p, &e) < 0)
        fail_msg("%s", err_msg(&e));
    struct mp_gpu g[4];
    memcpy(g, node->gpus, sizeof(g)); /* shallow: read only */
    static const struct {
        bool enabled[4], pending[4];
        const char *msg; /* NULL: nothing waits */
    } t[] = {
        /* as wanted, or a change not made yet: nothing waits */
        {{1, 1, 1, 1}, {1, 1, 1, 1}, NULL},
        {{0, 0, 0, 0}, {0, 0, 0, 0}, NULL},
        /* the wanted mode pending on GPUs 1 and 3 */
        {{1, 0, 1, 0},
         {1, 1, 1, 1},
         "the MIG mode of GPU 1 (MIG enabled), GPU 3 (MIG enabled) "
         "waits for a GPU reset the driver could not do live (reboot "
         "the node or reset the GPUs to finish)"},
        {{0, 1, 1, 1}, {1, 1, 1, 1}, "of GPU 0 (MIG enabled) waits for a GPU reset"},
        /* a pending mode the plan does not want: the change sets the mode again */
        {{1, 1, 1, 1}, {0, 1, 1, 1}, NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        for (size_t k = 0; k < 4; k++) {
            g[k].mig_enabled = t[i].enabled[k];
            g[k].mig_pending = t[i].pending[k];
        }
        struct err why = {0};
        int r = mp_plan_reset_pending(p, g, 4, &why);
        if (r != (t[i].msg ? 1 : 0))
            fail_msg("case %zu: %d (%s)", i, r, err_msg(&why));
        if (t[i].msg && !strstr(err_msg(&why), t[i].msg))
            fail_msg("case %zu: \"%s\", wanted \"%s\"", i, err_msg(&why), t[i].msg);
    }
    /* a GPU the config does not select, or a plan for another node: nothing */
    g[1].mig_enabled = false;
    g[1].mig_pending = true;
    p->gpus[1].selected = false;
    struct err why = {0};
    assert_int_equal(mp_plan_reset_pending(p, g, 4, &why), 0);
    assert_int_equal(mp_plan_reset_pending(p, g, 3, &why), 0);
}

/* ---- layouts that cannot fit ----------------------------------------------------------------- */

static void test_unfit(void **state)
{
    (void)state;
    static const struct {
        const char *devices, *msg;
    } t[] = {
        /* more than the profile allows */
        {"{\"1g.10gb\": 8}", "holds at most 7 x 1g.10gb, the config asks for 8"},
        {"{\"1g.10gb+me\": 2}", "holds at most 1 x 1g.10gb+me"},
        {"{\"3g.40gb\": 1, \"1c.3g.40gb\": 2}", "holds at most 2 x 3g.40gb, the config asks for 3"},
        /* more compute slices than the GPU has */
        {"{\"4g.40gb\": 1, \"3g.40gb\": 1, \"1g.10gb\": 1}", "has 7 compute slices, the config "
                                                             "asks for 8"},
        /* within every count and the compute slices, but no placements keep them apart */
        {"{\"1g.20gb\": 4, \"1g.10gb\": 1}", "the instances cannot coexist"},
        {"{\"1g.20gb\": 3, \"3g.40gb\": 1}", "the instances cannot coexist"},
        {"{\"4g.40gb\": 1, \"1g.20gb\": 2, \"1g.10gb\": 1}", "the instances cannot coexist"},
        /* a profile of another model */
        {"{\"1g.18gb\": 1}", "has no MIG profile \"1g.18gb\" (it offers 1g.10gb"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        char y[512];
        snprintf(y, sizeof(y),
                 "version: v1\nmig-configs:\n  x:\n    - {devices: all, mig-enabled: true, "
                 "mig-devices: %s}\n",
                 t[i].devices);
        _cleanup_(mp_spec_freep) struct mp_spec *s = NULL;
        struct err e = {0};
        if (mp_spec_parse(y, strlen(y), "y", &s, &e) < 0)
            fail_msg("case %zu: %s", i, err_msg(&e));
        struct mp_plan *p = NULL;
        int r = mp_plan_make(&s->configs[0], &node->gpus[2], 1, &p, &e);
        if (r >= 0)
            fail_msg("case %zu (%s) fits", i, t[i].devices);
        assert_null(p);
        if (!strstr(err_msg(&e), t[i].msg) || !strstr(err_msg(&e), "GPU 2 (NVIDIA H100 80GB HBM3)"))
            fail_msg("case %zu: got \"%s\", wanted \"%s\"", i, err_msg(&e), t[i].msg);
    }
    /* The same shapes that do fit, to show the refusals are the planner's and not blanket. */
    static const char *const fits[] = {
        "{\"1g.20gb\": 3, \"1g.10gb\": 1}",
        "{\"2g.20gb\": 3, \"1g.10gb\": 1}",
        "{\"4g.40gb\": 1, \"3g.40gb\": 1}",
        "{\"4g.40gb\": 1, \"2g.20gb\": 1, \"1g.20gb\": 1}",
        "{\"4g.40gb\": 1, \"1g.20gb\": 1, \"1g.10gb\": 2}",
        "{\"1g.20gb\": 2, \"3g.40gb\": 1}",
        "{\"1c.3g.40gb\": 1, \"2c.3g.40gb\": 1}",
    };
    for (size_t i = 0; i < ARRAY_SIZE(fits); i++) {
        char y[512];
        snprintf(y, sizeof(y),
                 "version: v1\nmig-configs:\n  x:\n    - {devices: all, mig-enabled: true, "
                 "mig-devices: %s}\n",
                 fits[i]);
        _cleanup_(mp_spec_freep) struct mp_spec *s = NULL;
        struct err e = {0};
        if (mp_spec_parse(y, strlen(y), "y", &s, &e) < 0)
            fail_msg("%s", err_msg(&e));
        _cleanup_(mp_plan_freep) struct mp_plan *p = NULL;
        if (mp_plan_make(&s->configs[0], &node->gpus[2], 1, &p, &e) < 0)
            fail_msg("%s: %s", fits[i], err_msg(&e));
        check_plan(&s->configs[0], &node->gpus[2], &p->gpus[0]);
    }
}

/* ---- assert and export ----------------------------------------------------------------------- */

static void test_export_roundtrip(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_(mp_plan_freep) struct mp_plan *p = NULL;
    if (mp_plan_make(mp_spec_find(defaults, "all-balanced"), node->gpus, 4, &p, &e) < 0)
        fail_msg("%s", err_msg(&e));
    struct mp_gpu gpus[5];
    memcpy(gpus, node->gpus, sizeof(gpus));
    for (size_t i = 0; i < 4; i++) {
        gpus[i].mig_enabled = true;
        gpus[i].instances = p->gpus[i].instances;
        gpus[i].n_instances = p->gpus[i].n_instances;
    }
    gpus[3].mig_enabled = false; /* the H200 left disabled */
    gpus[3].n_instances = 0;
    _cleanup_free_ char *text = mp_export(gpus, 5, "current");
    assert_non_null(text);
    assert_non_null(strstr(text, "mig-configs:\n  current:\n"));
    /* the A100 80GB and the H100 have the same layout: one entry */
    assert_non_null(strstr(text, "- devices: [1, 2]\n      mig-enabled: true\n"));
    assert_non_null(strstr(text, "- devices: [3]\n      mig-enabled: false\n"));
    _cleanup_(mp_spec_freep) struct mp_spec *s = NULL;
    if (mp_spec_parse(text, strlen(text), "export", &s, &e) < 0)
        fail_msg("%s\n%s", err_msg(&e), text);
    _cleanup_(mp_plan_freep) struct mp_plan *back = NULL;
    if (mp_plan_make(mp_spec_find(s, "current"), gpus, 5, &back, &e) < 0)
        fail_msg("%s\n%s", err_msg(&e), text);
    if (mp_plan_matches(back, gpus, 5, false, &e) < 0)
        fail_msg("%s\n%s", err_msg(&e), text);
    /* A layout that differs is named with what it has and what is wanted. */
    gpus[2].n_instances = 1;
    assert_int_equal(mp_plan_matches(back, gpus, 5, false, &e), -ESTALE);
    assert_non_null(strstr(err_msg(&e), "GPU 2: has "));
    assert_non_null(strstr(err_msg(&e), "wanted 1g.10gb x2, 2g.20gb x1, 3g.40gb x1"));
    assert_int_equal(mp_plan_matches(back, gpus, 5, true, &e), 0); /* mode only */
    gpus[3].mig_enabled = true;
    assert_int_equal(mp_plan_matches(back, gpus, 5, true, &e), -ESTALE);
    assert_non_null(strstr(err_msg(&e), "GPU 3: MIG mode is enabled, wanted disabled"));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s LIBNVIDIA-ML\n", argv[0]);
        return 2;
    }
    nvml_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_keys),       cmocka_unit_test(test_invalid_configs),
        cmocka_unit_test(test_valid_forms),        cmocka_unit_test(test_defaults_parse),
        cmocka_unit_test(test_defaults_a100_40gb), cmocka_unit_test(test_defaults_a100_80gb),
        cmocka_unit_test(test_defaults_h100),      cmocka_unit_test(test_defaults_h200),
        cmocka_unit_test(test_node_selection),     cmocka_unit_test(test_unfit),
        cmocka_unit_test(test_export_roundtrip),   cmocka_unit_test(test_reset_pending),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
