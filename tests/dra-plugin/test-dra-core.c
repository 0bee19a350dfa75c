/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA plugin's pure core (dra-plugin.h): names, the model, ResourceSlices, the publish plan,
 * opaque configs, claim plans and the checkpoint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dra-plugin.h"
#include "kobj.h"

#define GIB (1024ull * 1024ull * 1024ull)

/* ---- fixtures ---------------------------------------------------------------------------------
 */

static void h100(struct gpu_device *g, unsigned i)
{
    memset(g, 0, sizeof(*g));
    g->index = g->minor = i;
    snprintf(g->name, sizeof(g->name), "NVIDIA H100 80GB HBM3");
    snprintf(g->uuid, sizeof(g->uuid), "GPU-00000000-0000-0000-0000-00000000000%u", i);
    snprintf(g->bus_id, sizeof(g->bus_id), "00000000:%02X:00.0", 0x18 + i);
    g->memory_total_bytes = 80 * GIB;
    g->cc_major = 9;
    g->arch = 9;
    g->brand = 14;
    g->numa_node = -1;
}

static struct gpu_inventory *inv_new(size_t n)
{
    struct gpu_inventory *inv = xcalloc(1, sizeof(*inv));
    snprintf(inv->driver_version, sizeof(inv->driver_version), "550.90.07");
    inv->cuda_driver_version = 12040;
    inv->n_gpus = n;
    inv->gpus = xcalloc(n, sizeof(*inv->gpus));
    for (size_t i = 0; i < n; i++)
        h100(&inv->gpus[i], (unsigned)i);
    return inv;
}

static void inv_free(struct gpu_inventory *inv)
{
    for (size_t i = 0; i < inv->n_gpus; i++)
        free(inv->gpus[i].mig);
    free(inv->gpus);
    free(inv);
}

/* An A100 80GB with MIG on: a 3g.40gb at slice 0 and a 1g.10gb at slice 6. */
static void a100_mig(struct gpu_device *g)
{
    snprintf(g->name, sizeof(g->name), "NVIDIA A100-SXM4-80GB");
    g->arch = 7;
    g->cc_major = 8;
    g->mig_capable = g->mig_enabled = g->mig_pending = true;
    g->n_mig = 2;
    g->mig = xcalloc(2, sizeof(*g->mig));
    struct gpu_mig_device *m = &g->mig[0];
    snprintf(m->uuid, sizeof(m->uuid), "MIG-aaaaaaaa-0000-0000-0000-000000000001");
    snprintf(m->profile, sizeof(m->profile), "3g.40gb");
    m->gi_id = 2;
    m->gi_profile_id = 9;
    m->gi_slices = m->ci_slices = 3;
    m->multiprocessors = 42;
    m->copy_engines = 3;
    m->memory_mib = 40192;
    m->gi_placement_start = 0;
    m->gi_placement_size = 4;
    m = &g->mig[1];
    snprintf(m->uuid, sizeof(m->uuid), "MIG-aaaaaaaa-0000-0000-0000-000000000002");
    snprintf(m->profile, sizeof(m->profile), "1g.10gb");
    m->gi_id = 13;
    m->gi_profile_id = 19;
    m->gi_slices = m->ci_slices = 1;
    m->multiprocessors = 14;
    m->copy_engines = 1;
    m->memory_mib = 9856;
    m->gi_placement_start = 6;
    m->gi_placement_size = 1;
}

static const json_t *device_of(const json_t *slices, const char *name)
{
    size_t i, k;
    json_t *s, *d;
    json_array_foreach (slices, i, s) {
        json_array_foreach (kobj_path(s, "spec.devices"), k, d) {
            if (streq_ptr(kobj_str(d, "name"), name))
                return d;
        }
    }
    return NULL;
}

/* The one typed value of an attribute: its type and value. */
static void assert_attr(const json_t *dev, const char *name, const char *type, const char *want)
{
    const json_t *a = json_object_get(json_object_get(dev, "attributes"), name);
    if (!a)
        fail_msg("%s: no attribute %s", kobj_str(dev, "name"), name);
    assert_int_equal(json_object_size(a), 1);
    const char *got = kobj_str(a, type);
    if (!got || strcmp(got, want) != 0)
        fail_msg("%s: attribute %s: want %s %s, got %s", kobj_str(dev, "name"), name, type, want,
                 json_dumps(a, JSON_COMPACT));
}

static void assert_capacity(const json_t *dev, const char *name, const char *want)
{
    const json_t *c = json_object_get(json_object_get(dev, "capacity"), name);
    const char *got = kobj_str(c, "value");
    if (!got || strcmp(got, want) != 0)
        fail_msg("%s: capacity %s: want %s, got %s", kobj_str(dev, "name"), name, want,
                 got ? got : "(none)");
}

/* ---- names ----------------------------------------------------------------------------------- */

static void test_names(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } labels[] = {
        {"1g.10gb", "1g10gb"}, {"1g.10gb+me", "1g10gb-me"},
        {"7g.80gb", "7g80gb"}, {"1c.3g.40gb", "1c3g40gb"},
        {"+me.", "me"},        {"1G.20GB", "1g20gb"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(labels); i++) {
        char buf[GPU_PROFILE_MAX];
        dra_profile_label(labels[i].in, buf, sizeof(buf));
        assert_string_equal(buf, labels[i].out);
    }
    static const struct {
        const char *in, *out;
        int r;
    } vers[] = {
        {"550.90.07", "550.90.7", 0},  {"9.0", "9.0.0", 0},     {"12", "12.0.0", 0},
        {"570.86.15", "570.86.15", 0}, {"v1.2", NULL, -EINVAL}, {"", NULL, -EINVAL},
        {"1.2.3.4", "1.2.3", 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(vers); i++) {
        char buf[32];
        int r = dra_semver(vers[i].in, buf, sizeof(buf));
        assert_int_equal(r, vers[i].r);
        if (r == 0)
            assert_string_equal(buf, vers[i].out);
    }
    assert_string_equal(dra_arch_name(9), "Hopper");
    assert_string_equal(dra_arch_name(8), "Ada Lovelace");
    assert_string_equal(dra_brand_name(14), "Nvidia");
}

/* ---- whole GPUs ------------------------------------------------------------------------------ */

static void test_whole_gpus(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_new(3);
    struct dra_gpu_extra extra[3] = {{.pcie_root = "pci0000:17"}, {.unhealthy = true}, {{0}}};
    struct dra_model_input in = {.inv = inv, .extra = extra};
    struct err e = {0};
    _cleanup_(dra_model_freep) struct dra_model *m = NULL;
    assert_int_equal(dra_model_build(&in, &m, &e), 0);
    assert_int_equal(m->n_devices, 3);
    assert_string_equal(m->devices[0].name, "gpu-0");
    assert_string_equal(m->devices[2].name, "gpu-2");
    assert_true(m->devices[0].published);
    assert_false(m->devices[1].published); /* unhealthy: withdrawn, still known */
    assert_non_null(dra_model_find(m, "gpu-1"));

    struct dra_slice_meta meta = {.node_name = "node-a", .node_uid = "uid-1", .generation = 1};
    json_t *slices = NULL;
    assert_int_equal(dra_slices_render(m, &meta, &slices, &e), 0);
    assert_int_equal(json_array_size(slices), 1);
    const json_t *s = json_array_get(slices, 0);
    assert_string_equal(kobj_str(s, "apiVersion"), "resource.k8s.io/v1");
    assert_string_equal(kobj_str(s, "kind"), "ResourceSlice");
    assert_string_equal(kobj_str(kobj_path(s, "spec"), "driver"), "gpu.nvidia.com");
    assert_string_equal(kobj_str(kobj_path(s, "spec"), "nodeName"), "node-a");
    assert_string_equal(kobj_str(kobj_path(s, "spec.pool"), "name"), "node-a");
    const json_t *owner = json_array_get(kobj_path(s, "metadata.ownerReferences"), 0);
    assert_string_equal(kobj_str(owner, "kind"), "Node");
    assert_string_equal(kobj_str(owner, "uid"), "uid-1");
    assert_int_equal(json_array_size(kobj_path(s, "spec.devices")), 2);
    assert_null(device_of(slices, "gpu-1"));

    const json_t *d = device_of(slices, "gpu-0");
    assert_non_null(d);
    assert_attr(d, "type", "string", "gpu");
    assert_attr(d, "uuid", "string", "GPU-00000000-0000-0000-0000-000000000000");
    assert_attr(d, "productName", "string", "NVIDIA H100 80GB HBM3");
    assert_attr(d, "brand", "string", "Nvidia");
    assert_attr(d, "architecture", "string", "Hopper");
    assert_attr(d, "cudaComputeCapability", "version", "9.0.0");
    assert_attr(d, "driverVersion", "version", "550.90.7");
    assert_attr(d, "cudaDriverVersion", "version", "12.4.0");
    assert_attr(d, "resource.kubernetes.io/pcieRoot", "string", "pci0000:17");
    assert_capacity(d, "memory", "80Gi");
    /* an unknown PCIe root is left out, not published empty */
    d = device_of(slices, "gpu-2");
    assert_null(
        json_object_get(json_object_get(d, "attributes"), "resource.kubernetes.io/pcieRoot"));
    json_decref(slices);

    /* no devices at all: one empty slice says the pool is empty */
    for (size_t i = 0; i < 3; i++)
        extra[i].unhealthy = true;
    dra_model_free(m);
    m = NULL;
    assert_int_equal(dra_model_build(&in, &m, &e), 0);
    assert_int_equal(dra_slices_render(m, &meta, &slices, &e), 0);
    assert_int_equal(json_array_size(slices), 1);
    assert_int_equal(json_array_size(kobj_path(json_array_get(slices, 0), "spec.devices")), 0);
    json_decref(slices);
    meta.node_name = "";
    assert_int_equal(dra_slices_render(m, &meta, &slices, &e), -EINVAL);
    inv_free(inv);
}

/* ---- health ---------------------------------------------------------------------------------- */

static void test_withdrawn(void **state)
{
    (void)state;
    static const struct {
        bool lost;
        uint64_t fault, now, recovery;
        bool want;
    } cases[] = {
        {false, 0, 1000, 0, false},      /* healthy */
        {true, 0, 1000, 0, true},        /* lost: always out */
        {true, 0, 1000, 10, true},       /* lost: no recovery */
        {false, 500, 1000, 0, true},     /* an XID, no recovery period: out for good */
        {false, 500, 1000, 1000, true},  /* within the quiet period */
        {false, 500, 1500, 1000, false}, /* quiet for the whole period: back */
        {false, 500, 1499, 1000, true},  /* one ms short */
        {false, 2000, 1000, 1000, true}, /* a clock that went back: still out */
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
        if (dra_gpu_withdrawn(cases[i].lost, cases[i].fault, cases[i].now, cases[i].recovery) !=
            cases[i].want)
            fail_msg("case %zu: want %d", i, cases[i].want);
}

/* ---- MIG ------------------------------------------------------------------------------------- */

static void test_mig_devices(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_new(2);
    a100_mig(&inv->gpus[1]);
    struct dra_model_input in = {.inv = inv};
    struct err e = {0};
    _cleanup_(dra_model_freep) struct dra_model *m = NULL;
    assert_int_equal(dra_model_build(&in, &m, &e), 0);
    /* the MIG-enabled GPU publishes its MIG devices, not itself */
    assert_null(dra_model_find(m, "gpu-1"));
    assert_non_null(dra_model_find(m, "gpu-0"));
    const struct dra_device *d = dra_model_find(m, "gpu-1-mig-3g40gb-9-0");
    assert_non_null(d);
    assert_int_equal(d->type, DRA_MIG);
    assert_non_null(dra_model_find(m, "gpu-1-mig-1g10gb-19-6"));

    struct dra_slice_meta meta = {.node_name = "node-a"};
    json_t *slices = NULL;
    assert_int_equal(dra_slices_render(m, &meta, &slices, &e), 0);
    assert_null(kobj_path(json_array_get(slices, 0), "metadata.ownerReferences"));
    const json_t *j = device_of(slices, "gpu-1-mig-1g10gb-19-6");
    assert_non_null(j);
    assert_attr(j, "type", "string", "mig");
    assert_attr(j, "uuid", "string", "MIG-aaaaaaaa-0000-0000-0000-000000000002");
    assert_attr(j, "parentUUID", "string", inv->gpus[1].uuid);
    assert_attr(j, "profile", "string", "1g.10gb");
    assert_attr(j, "architecture", "string", "Ampere");
    assert_attr(j, "cudaComputeCapability", "version", "8.0.0");
    assert_capacity(j, "multiprocessors", "14");
    assert_capacity(j, "copyEngines", "1");
    assert_capacity(j, "memory", "9856Mi");
    assert_capacity(j, "memorySlice6", "1");
    assert_null(json_object_get(json_object_get(j, "capacity"), "memorySlice5"));
    assert_null(json_object_get(j, "consumesCounters")); /* not partitionable */
    j = device_of(slices, "gpu-1-mig-3g40gb-9-0");
    for (int i = 0; i < 4; i++) {
        char k[32];
        snprintf(k, sizeof(k), "memorySlice%d", i);
        assert_capacity(j, k, "1");
    }
    json_decref(slices);
    inv_free(inv);
}

/* ---- the publish plan ------------------------------------------------------------------------ */

static json_t *render_gen(const struct dra_model *m, int64_t gen)
{
    struct dra_slice_meta meta = {.node_name = "node-a", .node_uid = "u", .generation = gen};
    json_t *s = NULL;
    struct err e = {0};
    assert_int_equal(dra_slices_render(m, &meta, &s, &e), 0);
    return s;
}

/* What the API server holds after a plan, as listed: the objects with a resourceVersion. */
static json_t *as_listed(const json_t *slices)
{
    json_t *out = json_deep_copy(slices);
    size_t i;
    json_t *s;
    json_array_foreach (out, i, s) {
        json_object_set_new(json_object_get(s, "metadata"), "resourceVersion",
                            json_sprintf("%zu", 10 + i));
    }
    return out;
}

static void test_publish_plan(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_new(2);
    struct dra_gpu_extra extra[2] = {{{0}}, {{0}}};
    struct dra_model_input in = {.inv = inv, .extra = extra};
    struct err e = {0};
    struct dra_model *m = NULL;
    assert_int_equal(dra_model_build(&in, &m, &e), 0);

    /* nothing there: create, generation 0 */
    json_t *desired = render_gen(m, 0), *none = json_array();
    struct dra_publish p = {0};
    assert_int_equal(dra_publish_plan(desired, none, &p, &e), 0);
    assert_int_equal(json_array_size(p.create), 1);
    assert_int_equal(json_array_size(p.update) + json_array_size(p.remove), 0);
    assert_int_equal(p.generation, 0);
    assert_int_equal(
        json_integer_value(kobj_path(json_array_get(p.create, 0), "spec.pool.generation")), 0);
    json_t *existing = as_listed(p.create);
    dra_publish_clear(&p);

    /* the same again: nothing to write (idempotent) */
    assert_int_equal(dra_publish_plan(desired, existing, &p, &e), 0);
    assert_true(dra_publish_empty(&p));
    assert_int_equal(p.generation, 0);
    dra_publish_clear(&p);
    json_decref(desired);

    /* a GPU turns unhealthy: an update at generation 1, carrying the resourceVersion */
    dra_model_free(m);
    extra[1].unhealthy = true;
    assert_int_equal(dra_model_build(&in, &m, &e), 0);
    desired = render_gen(m, 0);
    assert_int_equal(dra_publish_plan(desired, existing, &p, &e), 0);
    assert_int_equal(json_array_size(p.update), 1);
    assert_int_equal(p.generation, 1);
    const json_t *u = json_array_get(p.update, 0);
    assert_string_equal(kobj_str(kobj_path(u, "metadata"), "resourceVersion"), "10");
    assert_int_equal(json_array_size(kobj_path(u, "spec.devices")), 1);
    dra_publish_clear(&p);

    /* a stray slice of the plugin's is deleted */
    json_t *stray = json_deep_copy(json_array_get(existing, 0));
    json_object_set_new(json_object_get(stray, "metadata"), "name",
                        json_string("node-a-gpu.nvidia.com-7"));
    json_array_append_new(existing, stray);
    assert_int_equal(dra_publish_plan(desired, existing, &p, &e), 0);
    assert_int_equal(json_array_size(p.remove), 1);
    assert_string_equal(json_string_value(json_array_get(p.remove, 0)), "node-a-gpu.nvidia.com-7");
    dra_publish_clear(&p);

    json_decref(desired);
    json_decref(existing);
    json_decref(none);
    dra_model_free(m);
    inv_free(inv);
}

/* ---- opaque configs -------------------------------------------------------------------------- */

static void test_configs(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        int r;
        const char *msg; /* a part of the error */
    } cases[] = {
        {"{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\","
         "\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":{\"interval\":\"Long\"}}"
         "}",
         0, NULL},
        {"{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"MigDeviceConfig\","
         "\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":50,"
         "\"defaultPinnedDeviceMemoryLimit\":\"10Gi\"}}}",
         0, NULL},
        {"{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\"}", 0, NULL},
        {"{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\","
         "\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":{\"interval\":\"Fast\"}}"
         "}",
         -EINVAL, "sharing.timeSlicingConfig.interval"},
        {"{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\","
         "\"sharing\":{\"strategy\":\"Spatial\"}}",
         -EINVAL, "sharing.strategy"},
        {"{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\",\"colour\":1}",
         -EINVAL, "colour"},
        {"{\"apiVersion\":\"resource.nvidia.com/v1\",\"kind\":\"GpuConfig\"}", -EINVAL,
         "apiVersion"},
        {"{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"VfioDeviceConfig\"}", -EINVAL,
         "kind"},
        {"{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\","
         "\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":101}}"
         "}",
         -EINVAL, "sharing.mpsConfig.defaultActiveThreadPercentage"},
        {"{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\","
         "\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultPinnedDeviceMemoryLimit\":"
         "\"lots\"}}}",
         -EINVAL, "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit"},
        {"[1]", -EINVAL, "claim x"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        json_error_t je;
        json_t *v = json_loads(cases[i].json, 0, &je);
        assert_non_null(v);
        struct dra_config c;
        struct err e = {0};
        int r = dra_config_parse(v, "claim x", &c, &e);
        json_decref(v);
        if (r != cases[i].r)
            fail_msg("case %zu: want %d, got %d (%s)", i, cases[i].r, r, e.msg);
        if (cases[i].msg && !strstr(e.msg, cases[i].msg))
            fail_msg("case %zu: error \"%s\" does not name %s", i, e.msg, cases[i].msg);
        if (r == 0 && i == 0) {
            assert_int_equal(c.kind, DRA_CONFIG_GPU);
            assert_int_equal(c.sharing.strategy, DRA_SHARE_TIME_SLICING);
            assert_int_equal(c.sharing.interval, DRA_INTERVAL_LONG);
        }
        if (r == 0 && i == 1) {
            assert_int_equal(c.kind, DRA_CONFIG_MIG);
            assert_int_equal(c.sharing.strategy, DRA_SHARE_MPS);
            assert_int_equal(c.sharing.active_thread_percentage, 50);
            assert_int_equal(c.sharing.pinned_memory_limit, 10 * GIB);
        }
    }
}

/* ---- claims ---------------------------------------------------------------------------------- */

static json_t *claim_json(const char *uid, const char *results, const char *config)
{
    char *text =
        xasprintf("{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"%s\"},"
                  "\"status\":{\"allocation\":{\"devices\":{\"results\":%s,\"config\":%s}}}}",
                  uid, results, config ? config : "[]");
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    if (!v)
        fail_msg("claim fixture: %s", je.text);
    free(text);
    return v;
}

#define RESULT(req, dev)                                                                           \
    "{\"request\":\"" req "\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"node-a\",\"device\":\"" dev \
    "\"}"
#define TS_CONFIG(src, reqs)                                                            \
    "{\"source\":\"" src "\",\"requests\":" reqs                                        \
    ",\"opaque\":{\"driver\":\"gpu.nvidia.com\",\"parameters\":{\"apiVersion\":"        \
    "\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\",\"sharing\":{\"strategy\":" \
    "\"TimeSlicing\",\"timeSlicingConfig\":{\"interval\":\"Short\"}}}}}"
#define MPS_CONFIG(reqs)                                                                \
    "{\"source\":\"FromClaim\",\"requests\":" reqs                                      \
    ",\"opaque\":{\"driver\":\"gpu.nvidia.com\",\"parameters\":{\"apiVersion\":"        \
    "\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\",\"sharing\":{\"strategy\":" \
    "\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":25}}}}}"

static void test_claim_plans(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_new(2);
    a100_mig(&inv->gpus[1]);
    struct dra_model_input in = {.inv = inv};
    struct err e = {0};
    _cleanup_(dra_model_freep) struct dra_model *m = NULL;
    assert_int_equal(dra_model_build(&in, &m, &e), 0);
    struct dra_claim_ref ref = {.uid = "uid-1", .ns = "ns", .name = "c"};

    /* a GPU with a class's time-slicing, a MIG device without config */
    json_t *cj = claim_json(
        "uid-1", "[" RESULT("gpu", "gpu-0") "," RESULT("mig", "gpu-1-mig-1g10gb-19-6") "]",
        "[" TS_CONFIG("FromClass", "[\"gpu\"]") "]");
    struct dra_claim *c = NULL;
    assert_int_equal(dra_claim_plan(m, "node-a", &ref, cj, &c, &e), 0);
    assert_int_equal(c->n_devices, 2);
    assert_string_equal(c->devices[0].uuid, inv->gpus[0].uuid);
    assert_int_equal(c->devices[0].sharing.strategy, DRA_SHARE_TIME_SLICING);
    assert_int_equal(c->devices[0].sharing.interval, DRA_INTERVAL_SHORT);
    assert_int_equal(c->devices[1].type, DRA_MIG);
    assert_string_equal(c->devices[1].uuid, "MIG-aaaaaaaa-0000-0000-0000-000000000002");
    assert_string_equal(c->devices[1].parent_uuid, inv->gpus[1].uuid);
    assert_int_equal(c->devices[1].gi_id, 13);
    assert_int_equal(c->devices[1].sharing.strategy, DRA_SHARE_NONE);
    char ids[2][DRA_CDI_ID_MAX];
    assert_int_equal(dra_claim_cdi_ids(c, 0, ids), 1);
    char want[DRA_CDI_ID_MAX];
    snprintf(want, sizeof(want), "k8s.gpu.nvidia.com/device=%s", inv->gpus[0].uuid);
    assert_string_equal(ids[0], want);
    assert_false(dra_claim_has_edits(c));
    char *spec = (char *)1;
    struct dra_cdi_paths paths = {.mps_root = "/run/gpuop/dra/mps"};
    assert_int_equal(dra_claim_cdi_spec(c, &paths, &spec, &e), 0);
    assert_null(spec);

    /* the same claim planned again: the same devices (a repeated prepare answers the same) */
    struct dra_claim *again = NULL;
    assert_int_equal(dra_claim_plan(m, "node-a", &ref, cj, &again, &e), 0);
    assert_int_equal(again->n_devices, c->n_devices);
    for (size_t i = 0; i < c->n_devices; i++)
        assert_memory_equal(&again->devices[i], &c->devices[i], sizeof(c->devices[i]));
    dra_claim_free(again);

    /* the claims set: put, find, a second put of the same UID replaces, take */
    struct dra_claims cs = {0};
    assert_int_equal(dra_claims_put(&cs, c, &e), 0);
    assert_int_equal(dra_claim_plan(m, "node-a", &ref, cj, &again, &e), 0);
    assert_int_equal(dra_claims_put(&cs, again, &e), 0);
    assert_int_equal(cs.n, 1);
    assert_ptr_equal(dra_claims_find(&cs, "uid-1"), again);
    struct dra_claim *t = dra_claims_take(&cs, "uid-1");
    assert_ptr_equal(t, again);
    assert_null(dra_claims_take(&cs, "uid-1")); /* unprepare twice: nothing the second time */
    dra_claim_free(t);
    dra_claims_clear(&cs);
    json_decref(cj);

    /* MPS: the claim's own CDI device with the client environment */
    cj = claim_json("uid-1", "[" RESULT("gpu", "gpu-0") "]", "[" MPS_CONFIG("[]") "]");
    assert_int_equal(dra_claim_plan(m, "node-a", &ref, cj, &c, &e), 0);
    assert_true(dra_claim_has_edits(c));
    assert_int_equal(dra_claim_cdi_ids(c, 0, ids), 2);
    assert_string_equal(ids[1], "k8s.gpu.nvidia.com/claim=uid-1-gpu-0");
    assert_int_equal(dra_claim_cdi_spec(c, &paths, &spec, &e), 0);
    assert_non_null(spec);
    assert_non_null(strstr(spec, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25"));
    assert_non_null(strstr(spec, "/run/gpuop/dra/mps/uid-1/pipe"));
    free(spec);
    dra_claim_free(c);
    json_decref(cj);

    /* errors, each naming the claim and what is wrong */
    static const struct {
        const char *uid, *results, *config;
        int r;
        const char *msg;
    } bad[] = {
        {"uid-2", "[" RESULT("gpu", "gpu-0") "]", NULL, -ESTALE, "was replaced"},
        {"uid-1", "[" RESULT("gpu", "gpu-9") "]", NULL, -ENODEV, "gpu-9"},
        {"uid-1",
         "[{\"request\":\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"node-b\",\"device\":"
         "\"gpu-0\"}]",
         NULL, -EINVAL, "node-b"},
        {"uid-1", "[" RESULT("mig", "gpu-1-mig-1g10gb-19-6") "]",
         "[" TS_CONFIG("FromClaim", "[\"mig\"]") "]", -EINVAL, "GpuConfig for request mig"},
        {"uid-1", "[" RESULT("gpu", "gpu-0") "]",
         "[{\"source\":\"FromClaim\",\"opaque\":{\"driver\":\"gpu.nvidia.com\",\"parameters\":"
         "{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\",\"x\":1}}}]",
         -EINVAL, "config 0"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        cj = claim_json(bad[i].uid, bad[i].results, bad[i].config);
        c = NULL;
        int r = dra_claim_plan(m, "node-a", &ref, cj, &c, &e);
        json_decref(cj);
        if (r != bad[i].r || !strstr(e.msg, bad[i].msg) || !strstr(e.msg, "ns/c"))
            fail_msg("bad %zu: want %d naming %s, got %d: %s", i, bad[i].r, bad[i].msg, r, e.msg);
        assert_null(c);
    }
    /* not allocated */
    json_error_t je;
    cj = json_loads("{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"uid-1\"}}", 0,
                    &je);
    assert_int_equal(dra_claim_plan(m, "node-a", &ref, cj, &c, &e), -ENOENT);
    json_decref(cj);
    inv_free(inv);
}

/* ---- the checkpoint -------------------------------------------------------------------------- */

static void test_checkpoint(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_new(2);
    a100_mig(&inv->gpus[1]);
    struct dra_model_input in = {.inv = inv};
    struct err e = {0};
    _cleanup_(dra_model_freep) struct dra_model *m = NULL;
    assert_int_equal(dra_model_build(&in, &m, &e), 0);
    struct dra_claims cs = {0};
    const char *uids[] = {"uid-1", "uid-2"};
    const char *res[] = {"[" RESULT("gpu", "gpu-0") "]",
                         "[" RESULT("mig", "gpu-1-mig-3g40gb-9-0") "]"};
    for (size_t i = 0; i < 2; i++) {
        struct dra_claim_ref ref = {.ns = "ns", .name = "c"};
        snprintf(ref.uid, sizeof(ref.uid), "%s", uids[i]);
        json_t *cj = claim_json(uids[i], res[i], i == 0 ? "[" MPS_CONFIG("[]") "]" : NULL);
        struct dra_claim *c = NULL;
        assert_int_equal(dra_claim_plan(m, "node-a", &ref, cj, &c, &e), 0);
        json_decref(cj);
        if (i == 1) {
            c->state = DRA_PREPARE_STARTED;
            c->devices[0].created = true;
        }
        assert_int_equal(dra_claims_put(&cs, c, &e), 0);
    }
    char *text = NULL;
    assert_int_equal(dra_checkpoint_encode(&cs, &text, &e), 0);

    /* read back after a restart: the same claims, in the same order */
    struct dra_claims back = {0};
    assert_int_equal(dra_checkpoint_decode(text, strlen(text), "/cp.json", &back, &e), 0);
    assert_int_equal(back.n, 2);
    for (size_t i = 0; i < 2; i++) {
        const struct dra_claim *a = cs.v[i], *b = back.v[i];
        assert_string_equal(a->ref.uid, b->ref.uid);
        assert_string_equal(a->ref.ns, b->ref.ns);
        assert_int_equal(a->state, b->state);
        assert_int_equal(a->n_devices, b->n_devices);
        for (size_t k = 0; k < a->n_devices; k++)
            assert_memory_equal(&a->devices[k], &b->devices[k], sizeof(a->devices[k]));
    }
    size_t n_owned = 0;
    struct dra_owned_slice *owned = dra_claims_owned(&back, &n_owned);
    assert_int_equal(n_owned, 1);
    assert_string_equal(owned[0].parent_uuid, inv->gpus[1].uuid);
    assert_int_equal(owned[0].gi_id, 2);
    free(owned);
    dra_claims_clear(&back);

    /* a changed byte in the claims: the checksum refuses it, naming the file */
    char *bent = xstrdup(text);
    char *p = strstr(bent, "uid-2");
    assert_non_null(p);
    p[4] = '3';
    int r = dra_checkpoint_decode(bent, strlen(bent), "/cp.json", &back, &e);
    assert_int_equal(r, -EBADMSG);
    assert_non_null(strstr(e.msg, "/cp.json"));
    assert_int_equal(back.n, 0);
    free(bent);
    /* an unknown version, text that is not JSON, and the empty file */
    const char *v9 = "{\"version\":\"v9\",\"claims\":[]}";
    assert_int_equal(dra_checkpoint_decode(v9, strlen(v9), "/cp.json", &back, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "version"));
    assert_int_equal(dra_checkpoint_decode("{", 1, "/cp.json", &back, &e), -EINVAL);
    assert_int_equal(dra_checkpoint_decode("", 0, "/cp.json", &back, &e), 0);
    assert_int_equal(back.n, 0);
    free(text);
    dra_claims_clear(&cs);
    inv_free(inv);
}

/* ---- flags ----------------------------------------------------------------------------------- */

static const struct svc_component flags_component = {
    .name = "dra-plugin",
    .options = {dra_common_options, dra_options},
    .state_size = sizeof(struct dra_flags),
    .defaults = dra_flags_defaults,
};

static void test_flags(void **state)
{
    (void)state;
    static const struct {
        const char *argv[6];
        int parse, check; /* svc_parse's result, then dra_flags_check's (serving) */
        const char *msg;  /* in the error */
        bool partitionable;
        uint64_t resync_ms;
    } cases[] = {
        {{"dra-plugin", "--node-name=n1"}, 0, 0, NULL, false, 10000},
        {{"dra-plugin", "--node-name=n1", "--partitionable-devices", "--resync=2s"},
         0,
         0,
         NULL,
         true,
         2000},
        {{"dra-plugin", "--node-name=n1", "--resync=10ms"}, -EINVAL, 0, "resync", false, 0},
        {{"dra-plugin", "--node-name=n1", "--resync=soon"}, -EINVAL, 0, "resync", false, 0},
        {{"dra-plugin"}, 0, -EINVAL, "--node-name (NODE_NAME) is required", false, 10000},
        {{"dra-plugin", "--node-name=n1", "--cdi-dir=run/cdi"},
         0,
         -EINVAL,
         "--cdi-dir: \"run/cdi\" is not an absolute path",
         false,
         10000},
        {{"dra-plugin", "--node-name=n1", "--partitionable-devices=maybe"},
         -EINVAL,
         0,
         "partitionable-devices",
         false,
         0},
    };
    FILE *devnull = fopen("/dev/null", "w");
    assert_non_null(devnull);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct dra_flags f = {0};
        struct err e = {0};
        int argc = 0;
        while (cases[i].argv[argc])
            argc++;
        int r = svc_parse(&flags_component, &f, argc, (char **)cases[i].argv, devnull, &e);
        if (r != cases[i].parse)
            fail_msg("case %zu: parse %d, want %d (%s)", i, r, cases[i].parse, e.msg);
        if (r == 0)
            r = dra_flags_check(&f, true, &e);
        if (cases[i].parse == 0 && r != cases[i].check)
            fail_msg("case %zu: check %d, want %d (%s)", i, r, cases[i].check, e.msg);
        if (cases[i].msg && !strstr(e.msg, cases[i].msg))
            fail_msg("case %zu: error \"%s\" does not name \"%s\"", i, e.msg, cases[i].msg);
        if (r == 0) {
            assert_int_equal(f.partitionable, cases[i].partitionable);
            assert_int_equal(f.resync_ms, cases[i].resync_ms);
            assert_string_equal(f.plugin_dir, "/var/lib/kubelet/plugins/gpu.nvidia.com");
        }
    }
    /* the slices verb needs only a node name */
    struct dra_flags f = {.node_name = "n1"};
    struct err e = {0};
    assert_int_equal(dra_flags_check(&f, false, &e), 0);
    assert_int_equal(dra_flags_check(&f, true, &e), -EINVAL);
    fclose(devnull);
}

/* ---- health, API objects --------------------------------------------------------------------- */

static void test_faults(void **state)
{
    (void)state;
    struct dra_faults *fs = xcalloc(1, sizeof(*fs));
    assert_int_equal(dra_faults_at(NULL, "GPU-a"), 0);
    assert_int_equal(dra_faults_at(fs, "GPU-a"), 0);
    assert_true(dra_faults_note(fs, "GPU-a", 0)); /* 0 is "none": kept as 1 */
    assert_int_equal(dra_faults_at(fs, "GPU-a"), 1);
    assert_true(dra_faults_note(fs, "GPU-a", 500));
    assert_int_equal(dra_faults_at(fs, "GPU-a"), 500);
    assert_int_equal(fs->n, 1);
    for (unsigned i = 1; i < DRA_FAULTS_MAX; i++) {
        char u[32];
        snprintf(u, sizeof(u), "GPU-%u", i);
        assert_true(dra_faults_note(fs, u, i));
    }
    assert_false(dra_faults_note(fs, "GPU-full", 7));
    assert_int_equal(dra_faults_at(fs, "GPU-full"), 0);
    assert_true(dra_faults_note(fs, "GPU-a", 900)); /* a known GPU still updates */
    assert_int_equal(dra_faults_at(fs, "GPU-a"), 900);
    free(fs);
}

static void test_api_objects(void **state)
{
    (void)state;
    json_t *list =
        json_loads("{\"items\":["
                   "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"driver\":\"gpu.nvidia.com\","
                   "\"nodeName\":\"n1\"}},"
                   "{\"metadata\":{\"name\":\"b\"},\"spec\":{\"driver\":\"gpu.nvidia.com\","
                   "\"nodeName\":\"n2\"}},"
                   "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"driver\":\"other.example.com\","
                   "\"nodeName\":\"n1\"}},"
                   "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"driver\":\"gpu.nvidia.com\"}}]}",
                   0, NULL);
    assert_non_null(list);
    json_t *own = dra_slices_own(list, "n1");
    assert_int_equal(json_array_size(own), 1);
    assert_string_equal(kobj_str(kobj_path(json_array_get(own, 0), "metadata"), "name"), "a");
    json_decref(own);
    own = dra_slices_own(list, "n3");
    assert_int_equal(json_array_size(own), 0);
    json_decref(own);
    json_decref(list);

    json_t *claim = json_loads("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
                               "\"metadata\":{\"name\":\"c\",\"uid\":\"u\",\"managedFields\":[{}],"
                               "\"annotations\":{\"a\":\"b\"}},\"spec\":{\"x\":1},"
                               "\"status\":{\"allocation\":{\"devices\":{}},\"reservedFor\":[]}}",
                               0, NULL);
    json_t *p = dra_claim_project(claim, NULL);
    assert_null(json_object_get(p, "spec"));
    assert_null(kobj_path(p, "status.reservedFor"));
    assert_non_null(kobj_path(p, "status.allocation.devices"));
    assert_string_equal(kobj_uid(p), "u");
    assert_null(kobj_path(p, "metadata.managedFields"));
    assert_null(kobj_path(p, "metadata.annotations"));
    json_decref(p);
    json_object_del(claim, "status");
    p = dra_claim_project(claim, NULL);
    assert_null(json_object_get(p, "status"));
    json_decref(p);
    json_decref(claim);
}

/* ---- MIG slices made on demand --------------------------------------------------------------- */

/* The A100's 1g.10gb profile: 7 placements of one memory slice. */
static struct gpu_mig_profile profile_1g(void)
{
    struct gpu_mig_profile p = {.index = 0,
                                .id = 19,
                                .slices = 1,
                                .memory_mib = 9856,
                                .max_count = 7,
                                .multiprocessors = 14,
                                .copy_engines = 1,
                                .n_placements = 7};
    snprintf(p.name, sizeof(p.name), "1g.10gb");
    for (unsigned i = 0; i < 7; i++)
        p.placements[i] = (struct gpu_mig_placement){.start = i, .size = 1};
    return p;
}

static void add_mig(struct gpu_device *g, unsigned gi_id, unsigned start, const char *uuid)
{
    g->mig = xrealloc(g->mig, (g->n_mig + 1) * sizeof(*g->mig));
    struct gpu_mig_device *m = &g->mig[g->n_mig++];
    memset(m, 0, sizeof(*m));
    snprintf(m->uuid, sizeof(m->uuid), "%s", uuid);
    snprintf(m->profile, sizeof(m->profile), "1g.10gb");
    m->gi_id = gi_id;
    m->ci_id = 0;
    m->gi_profile_id = 19;
    m->gi_slices = m->ci_slices = 1;
    m->gi_placement_start = start;
    m->gi_placement_size = 1;
}

static void test_mig_on_demand(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_new(2);
    a100_mig(&inv->gpus[1]); /* a 3g.40gb at 0-3 (gi 2), a 1g.10gb at 6 (gi 13) */
    struct gpu_mig_profile prof = profile_1g();
    struct dra_gpu_extra extra[2] = {{.n_profiles = 0}, {.n_profiles = 1, .profiles = &prof}};
    struct dra_model_input in = {.inv = inv, .extra = extra, .partitionable = true};
    struct err e = {0};
    _cleanup_(dra_model_freep) struct dra_model *m = NULL;
    assert_int_equal(dra_model_build(&in, &m, &e), 0);
    /* the free placements 4 and 5 are offered; 0-3 and 6 are taken by existing devices */
    assert_int_equal(dra_model_find(m, "gpu-1-mig-1g10gb-19-4")->type, DRA_MIG_DYNAMIC);
    assert_int_equal(dra_model_find(m, "gpu-1-mig-1g10gb-19-5")->type, DRA_MIG_DYNAMIC);
    assert_null(dra_model_find(m, "gpu-1-mig-1g10gb-19-0"));
    assert_int_equal(dra_model_find(m, "gpu-1-mig-1g10gb-19-6")->type, DRA_MIG);

    /* a claim for placement 4 and for the existing device at 6 */
    json_t *cj = claim_json(
        "uid-1",
        "[" RESULT("a", "gpu-1-mig-1g10gb-19-4") "," RESULT("b", "gpu-1-mig-1g10gb-19-6") "]",
        NULL);
    struct dra_claim_ref ref = {.uid = "uid-1", .ns = "ns", .name = "c"};
    struct dra_claim *c = NULL;
    assert_int_equal(dra_claim_plan(m, "node-a", &ref, cj, &c, &e), 0);
    json_decref(cj);
    assert_int_equal(c->devices[0].type, DRA_MIG_DYNAMIC);
    assert_string_equal(c->devices[0].uuid, "");
    char ids[2][DRA_CDI_ID_MAX];
    assert_int_equal(dra_claim_cdi_ids(c, 0, ids), 0); /* no CDI device before it exists */
    struct dra_claims cs = {0};
    assert_int_equal(dra_claims_put(&cs, c, &e), 0);

    struct dra_mig_create todo[DRA_CLAIM_DEVICES_MAX];
    size_t n = 99;
    assert_int_equal(dra_mig_prepare_plan(c, false, inv, &cs, todo, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_int_equal(todo[0].device, 0);
    assert_int_equal(todo[0].gpu_index, 1);
    assert_int_equal(todo[0].start, 4);
    assert_string_equal(todo[0].profile, "1g.10gb");

    /* made (gi 7) and recorded: the next plan takes its UUID and makes nothing */
    c->devices[0].gi_id = 7;
    c->devices[0].created = true;
    add_mig(&inv->gpus[1], 7, 4, "MIG-made-4");
    assert_int_equal(dra_mig_prepare_plan(c, false, inv, &cs, todo, &n, &e), 0);
    assert_int_equal(n, 0);
    assert_string_equal(c->devices[0].uuid, "MIG-made-4");
    assert_int_equal(dra_claim_cdi_ids(c, 0, ids), 1);
    /* the model built with the claims' slices keeps the placement, not a device of its own */
    size_t n_owned = 0;
    struct dra_owned_slice *owned = dra_claims_owned(&cs, &n_owned);
    assert_int_equal(n_owned, 1);
    struct dra_model_input in2 = {
        .inv = inv, .extra = extra, .partitionable = true, .owned = owned, .n_owned = n_owned};
    _cleanup_(dra_model_freep) struct dra_model *m2 = NULL;
    assert_int_equal(dra_model_build(&in2, &m2, &e), 0);
    assert_int_equal(dra_model_find(m2, "gpu-1-mig-1g10gb-19-4")->type, DRA_MIG_DYNAMIC);
    free(owned);

    /* unprepare destroys gi 7, never the existing device the claim was allocated (gi 13) */
    struct dra_mig_destroy gone[DRA_CLAIM_DEVICES_MAX];
    assert_int_equal(dra_mig_unprepare_plan(c, inv, &cs, gone), 1);
    assert_int_equal(gone[0].gi_id, 7);
    assert_int_equal(gone[0].gpu_index, 1);
    assert_int_equal(gone[0].device, 0);

    /* a restart between the creation and the checkpoint: gi 7 at placement 4, not recorded */
    c->devices[0].created = false;
    c->devices[0].gi_id = 0;
    c->devices[0].uuid[0] = 0;
    c->state = DRA_PREPARE_STARTED;
    /* a first prepare may not take it: it is someone else's */
    assert_int_equal(dra_mig_prepare_plan(c, false, inv, &cs, todo, &n, &e), -EBUSY);
    assert_non_null(strstr(e.msg, "GPU instance 7"));
    /* the unprepare of a claim left started destroys it: nothing leaks */
    assert_int_equal(dra_mig_unprepare_plan(c, inv, &cs, gone), 1);
    assert_int_equal(gone[0].gi_id, 7);
    /* a resumed prepare adopts it: nothing made twice */
    assert_int_equal(dra_mig_prepare_plan(c, true, inv, &cs, todo, &n, &e), 0);
    assert_int_equal(n, 0);
    assert_true(c->devices[0].created);
    assert_int_equal(c->devices[0].gi_id, 7);
    assert_string_equal(c->devices[0].uuid, "MIG-made-4");

    /* another claim made it: neither adopted nor destroyed */
    struct dra_claim *other = xcalloc(1, sizeof(*other));
    snprintf(other->ref.uid, sizeof(other->ref.uid), "uid-2");
    other->n_devices = 1;
    other->devices = xcalloc(1, sizeof(*other->devices));
    other->devices[0] = c->devices[0];
    other->state = DRA_PREPARE_COMPLETED;
    assert_int_equal(dra_claims_put(&cs, other, &e), 0);
    c->devices[0].created = false;
    c->devices[0].uuid[0] = 0;
    assert_int_equal(dra_mig_prepare_plan(c, true, inv, &cs, todo, &n, &e), -EBUSY);
    assert_int_equal(dra_mig_unprepare_plan(c, inv, &cs, gone), 0);
    dra_claim_free(dra_claims_take(&cs, "uid-2"));

    /* a recorded slice that is gone (a GPU reset) is made again */
    c->devices[0].created = true;
    c->devices[0].gi_id = 9;
    assert_int_equal(dra_mig_prepare_plan(c, false, inv, &cs, todo, &n, &e), -EBUSY);
    inv->gpus[1].n_mig = 2; /* gi 7 destroyed */
    c->devices[0].created = true;
    c->devices[0].gi_id = 9;
    assert_int_equal(dra_mig_prepare_plan(c, false, inv, &cs, todo, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_false(c->devices[0].created);
    assert_int_equal(dra_mig_unprepare_plan(c, inv, &cs, gone), 0);

    /* the parent gone */
    snprintf(inv->gpus[1].uuid, sizeof(inv->gpus[1].uuid), "GPU-replaced");
    assert_int_equal(dra_mig_prepare_plan(c, false, inv, &cs, todo, &n, &e), -ENODEV);
    assert_int_equal(dra_mig_unprepare_plan(c, inv, &cs, gone), 0);
    dra_claims_clear(&cs);
    inv_free(inv);
}

/* MPS: the daemon a claim gets (its devices in bus order, the limits it is told) and the
 * client environment its containers get, by table */
static void test_mps_daemon(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        const char *uid;
        /* per device: GPU index, placement start, uuid ("" not made), MPS (pct, its limit) or
         * not */
        struct {
            unsigned gpu, start;
            const char *uuid;
            bool mps;
            int pct;
            int64_t limit;
        } dev[3];
        size_t n;
        int r;
        const char *visible, *commands, *pinned, *msg;
    } t[] = {
        {"no MPS device: no daemon",
         "u-1",
         {{0, 0, "GPU-a", false, -1, -1}},
         1,
         0,
         "",
         "",
         "",
         NULL},
        {"one GPU, a percentage, no limit",
         "u-1",
         {{0, 0, "GPU-a", true, 50, -1}},
         1,
         0,
         "GPU-a",
         "set_default_active_thread_percentage 50\n",
         "",
         NULL},
        {"two GPUs listed out of bus order, each with its limit",
         "u-1",
         {{3, 0, "GPU-d", true, 25, 2 * GIB}, {1, 0, "GPU-b", true, 25, GIB}},
         2,
         0,
         "GPU-b,GPU-d",
         "set_default_active_thread_percentage 25\nset_default_device_pinned_mem_limit 0 1024M\n"
         "set_default_device_pinned_mem_limit 1 2048M\n",
         "0=1024M,1=2048M",
         NULL},
        {"limits rounded up to MB; a device without MPS left out",
         "u-1",
         {{0, 0, "GPU-a", false, -1, -1},
          {2, 0, "GPU-c", true, -1, 1536 * 1024},
          {2, 4, "MIG-x", true, -1, 1}},
         3,
         0,
         "GPU-c,MIG-x",
         "set_default_device_pinned_mem_limit 0 2M\nset_default_device_pinned_mem_limit 1 1M\n",
         "0=2M,1=1M",
         NULL},
        {"a slice not made yet",
         "u-1",
         {{0, 0, "", true, 50, -1}},
         1,
         -EINVAL,
         NULL,
         NULL,
         NULL,
         "MPS on a slice not made yet"},
        {"a UID that is no folder name",
         "../x",
         {{0, 0, "GPU-a", true, 50, -1}},
         1,
         -EINVAL,
         NULL,
         NULL,
         NULL,
         "is not a UID"},
        {"no MPS device: its UID is not a folder's, nothing checked",
         "U-1",
         {{0, 0, "GPU-a", false, -1, -1}},
         1,
         0,
         "",
         "",
         "",
         NULL},
        {"an upper-case UID",
         "U-1",
         {{0, 0, "GPU-a", true, 50, -1}},
         1,
         -EINVAL,
         NULL,
         NULL,
         NULL,
         "is not a UID"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        struct dra_prepared_device devs[3];
        memset(devs, 0, sizeof(devs));
        struct dra_claim c = {
            .ref = {.ns = "ns", .name = "c"}, .n_devices = t[i].n, .devices = devs};
        snprintf(c.ref.uid, sizeof(c.ref.uid), "%s", t[i].uid);
        for (size_t k = 0; k < t[i].n; k++) {
            struct dra_prepared_device *d = &devs[k];
            snprintf(d->device, sizeof(d->device), "dev-%zu", k);
            d->gpu_index = t[i].dev[k].gpu;
            d->start = t[i].dev[k].start;
            snprintf(d->uuid, sizeof(d->uuid), "%s", t[i].dev[k].uuid);
            d->sharing.active_thread_percentage = t[i].dev[k].pct;
            d->sharing.pinned_memory_limit = t[i].dev[k].limit;
            if (t[i].dev[k].mps)
                d->sharing.strategy = DRA_SHARE_MPS;
        }
        struct dra_mps_daemon d;
        struct err e = {0};
        int r = dra_mps_daemon_plan(&c, &d, &e);
        if (r != t[i].r)
            fail_msg("%s: %d, want %d (%s)", t[i].what, r, t[i].r, err_msg(&e));
        if (r < 0) {
            if (!strstr(err_msg(&e), t[i].msg) || !strstr(err_msg(&e), "claim ns/c"))
                fail_msg("%s: \"%s\" does not say \"%s\"", t[i].what, err_msg(&e), t[i].msg);
            continue;
        }
        assert_string_equal(d.n_devices ? d.visible_devices : "", t[i].visible);
        assert_string_equal(d.n_devices ? d.commands : "", t[i].commands);
        assert_string_equal(d.n_devices ? d.pinned_env : "", t[i].pinned);
        if (d.n_devices)
            assert_string_equal(d.claim_dir, t[i].uid);

        /* the containers' edits say the same */
        char *spec = NULL;
        struct dra_cdi_paths paths = {.mps_root = "/var/lib/kubelet/plugins/gpu.nvidia.com/mps"};
        assert_int_equal(dra_claim_cdi_spec(&c, &paths, &spec, &e), 0);
        if (!d.n_devices) {
            assert_null(spec);
            continue;
        }
        assert_non_null(spec);
        char want[256];
        snprintf(want, sizeof(want), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%s", t[i].pinned);
        assert_true(!t[i].pinned[0] || strstr(spec, want));
        assert_true(t[i].pinned[0] || !strstr(spec, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"));
        assert_true((d.active_thread_percentage > 0) ==
                    (strstr(spec, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=") != NULL));
        assert_non_null(strstr(spec, "\"CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps\""));
        assert_non_null(strstr(spec, "\"/var/lib/kubelet/plugins/gpu.nvidia.com/mps/u-1/pipe\""));
        assert_non_null(strstr(spec, "\"/var/lib/kubelet/plugins/gpu.nvidia.com/mps/u-1/shm\""));
        assert_non_null(strstr(spec, "\"/dev/shm\""));
        free(spec);
    }

    /* a claim's per-device limits resolved at plan time: by ordinal (bus order) or UUID, else
     * the default */
    struct gpu_inventory *inv = inv_new(3);
    struct dra_model_input in = {.inv = inv};
    struct err e = {0};
    _cleanup_(dra_model_freep) struct dra_model *m = NULL;
    assert_int_equal(dra_model_build(&in, &m, &e), 0);
    struct dra_claim_ref ref = {.uid = "uid-1", .ns = "ns", .name = "c"};
    char *cfg = xasprintf(
        "[{\"source\":\"FromClaim\",\"requests\":[],\"opaque\":{\"driver\":\"gpu.nvidia.com\","
        "\"parameters\":{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\","
        "\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultPinnedDeviceMemoryLimit\":"
        "\"2Gi\",\"defaultPerDevicePinnedMemoryLimit\":{\"1\":\"1Gi\",\"%s\":\"512Mi\"}}}}}}]",
        inv->gpus[2].uuid);
    /* listed gpu-2, gpu-1, gpu-0: ordinals 0 gpu-0, 1 gpu-1, 2 gpu-2 */
    json_t *cj = claim_json(
        "uid-1", "[" RESULT("a", "gpu-2") "," RESULT("b", "gpu-1") "," RESULT("c", "gpu-0") "]",
        cfg);
    struct dra_claim *c = NULL;
    assert_int_equal(dra_claim_plan(m, "node-a", &ref, cj, &c, &e), 0);
    assert_int_equal(c->devices[0].sharing.pinned_memory_limit, 512 * 1024 * 1024); /* by UUID */
    assert_int_equal(c->devices[1].sharing.pinned_memory_limit, GIB);               /* ordinal 1 */
    assert_int_equal(c->devices[2].sharing.pinned_memory_limit, 2 * GIB); /* the default */
    struct dra_mps_daemon d;
    assert_int_equal(dra_mps_daemon_plan(c, &d, &e), 0);
    assert_string_equal(d.pinned_env, "0=2048M,1=1024M,2=512M");
    dra_claim_free(c);
    json_decref(cj);
    free(cfg);
    inv_free(inv);
}

/* ---- compute time slices --------------------------------------------------------------------- */

/* A claim of whole GPUs and MIG devices: spec "0L 1- 2D m" is GPU-0 time-sliced Long, GPU-1
 * without config, GPU-2 time-sliced Default, a MIG device on GPU-0 (S: time-sliced). */
static struct dra_claim *ts_claim(const char *uid, const char *spec)
{
    struct dra_claim *c = xcalloc(1, sizeof(*c));
    strlcpy_s(c->ref.uid, uid, sizeof(c->ref.uid));
    strlcpy_s(c->ref.ns, "ns", sizeof(c->ref.ns));
    strlcpy_s(c->ref.name, uid, sizeof(c->ref.name));
    c->devices = xcalloc(8, sizeof(*c->devices));
    for (const char *p = spec; *p; p++) {
        if (*p == ' ')
            continue;
        struct dra_prepared_device *d = &c->devices[c->n_devices++];
        char how;
        if (*p == 'm') {
            d->type = DRA_MIG;
            snprintf(d->uuid, sizeof(d->uuid), "MIG-0");
            snprintf(d->parent_uuid, sizeof(d->parent_uuid), "GPU-0");
            how = *++p;
        } else {
            d->type = DRA_GPU;
            snprintf(d->uuid, sizeof(d->uuid), "GPU-%c", *p);
            how = *++p;
        }
        static const char kinds[] = "DSML";
        const char *k = strchr(kinds, how);
        if (how != '-' && k) {
            d->sharing.strategy = DRA_SHARE_TIME_SLICING;
            d->sharing.interval = (enum dra_interval)(k - kinds);
        }
    }
    return c;
}

/* The plan as "GPU-0=L GPU-2=D". */
static void ts_text(const struct dra_timeslice *ts, size_t n, char *buf, size_t len)
{
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, "%s%s=%c", i ? " " : "", ts[i].uuid, "DSML"[ts[i].interval]);
    }
}

static void test_timeslices(void **state)
{
    (void)state;
    assert_int_equal(dra_interval_smi(DRA_INTERVAL_DEFAULT), 0);
    assert_int_equal(dra_interval_smi(DRA_INTERVAL_SHORT), 1);
    assert_int_equal(dra_interval_smi(DRA_INTERVAL_MEDIUM), 2);
    assert_int_equal(dra_interval_smi(DRA_INTERVAL_LONG), 3);
    static const struct {
        const char *claim;  /* the claim prepared or unprepared */
        const char *others; /* other prepared claims, ';' between them, in the order prepared */
        const char *prepare, *unprepare;
    } cases[] = {
        /* no config, a MIG device (no interval): nothing set, nothing set back */
        {"0- m-", "", "", ""},
        {"0L", "", "GPU-0=L", "GPU-0=D"},
        /* Default asked explicitly: set (a GPU left at another goes back), nothing to undo */
        {"0D", "", "GPU-0=D", ""},
        {"0L 1- 2S mS", "", "GPU-0=L GPU-2=S", "GPU-0=D GPU-2=D"},
        /* another claim holds the GPU with its own interval: that one back, not Default */
        {"0L", "0M", "GPU-0=L", "GPU-0=M"},
        {"0M", "0M", "GPU-0=M", ""},
        /* ... the last prepared of them wins; one without config asks nothing */
        {"0L", "0S;0M;0-", "GPU-0=L", "GPU-0=M"},
        {"0L", "0-", "GPU-0=L", "GPU-0=D"},
        /* other GPUs' claims do not matter */
        {"0L 1S", "1L;2M", "GPU-0=L GPU-1=S", "GPU-0=D GPU-1=L"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct dra_claim *c = ts_claim("self", cases[i].claim);
        struct dra_claims cs = {0};
        struct err e = {0};
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", cases[i].others);
        char *save = NULL;
        int k = 0;
        for (char *o = strtok_r(buf, ";", &save); o; o = strtok_r(NULL, ";", &save)) {
            char uid[32];
            snprintf(uid, sizeof(uid), "other-%d", k++);
            struct dra_claim *oc = ts_claim(uid, o);
            assert_int_equal(dra_claims_put(&cs, oc, &e), 0);
        }
        /* the claim among the prepared ones (as on unprepare; here a copy with its UID) changes
         * nothing */
        struct dra_claim *self = ts_claim("self", cases[i].claim);
        assert_int_equal(dra_claims_put(&cs, self, &e), 0);
        struct dra_timeslice ts[8];
        char got[256];
        ts_text(ts, dra_timeslice_prepare_plan(c, ts), got, sizeof(got));
        if (strcmp(got, cases[i].prepare) != 0)
            fail_msg("case %zu prepare: want \"%s\", got \"%s\"", i, cases[i].prepare, got);
        ts_text(ts, dra_timeslice_unprepare_plan(c, &cs, ts), got, sizeof(got));
        if (strcmp(got, cases[i].unprepare) != 0)
            fail_msg("case %zu unprepare: want \"%s\", got \"%s\"", i, cases[i].unprepare, got);
        dra_claims_clear(&cs);
        dra_claim_free(c);
    }

    /* from a claim the plan made: a class's TimeSlicing Short on a GPU, none on a MIG device */
    struct gpu_inventory *inv = inv_new(2);
    a100_mig(&inv->gpus[1]);
    struct dra_model_input in = {.inv = inv};
    struct err e = {0};
    _cleanup_(dra_model_freep) struct dra_model *m = NULL;
    assert_int_equal(dra_model_build(&in, &m, &e), 0);
    struct dra_claim_ref ref = {.uid = "uid-1", .ns = "ns", .name = "c"};
    json_t *cj = claim_json(
        "uid-1", "[" RESULT("gpu", "gpu-0") "," RESULT("mig", "gpu-1-mig-1g10gb-19-6") "]",
        "[" TS_CONFIG("FromClass", "[\"gpu\"]") "]");
    struct dra_claim *c = NULL;
    assert_int_equal(dra_claim_plan(m, "node-a", &ref, cj, &c, &e), 0);
    struct dra_timeslice ts[DRA_CLAIM_DEVICES_MAX];
    assert_int_equal(dra_timeslice_prepare_plan(c, ts), 1);
    assert_string_equal(ts[0].uuid, inv->gpus[0].uuid);
    assert_int_equal(ts[0].interval, DRA_INTERVAL_SHORT);
    assert_int_equal(dra_timeslice_unprepare_plan(c, NULL, ts), 1);
    assert_int_equal(ts[0].interval, DRA_INTERVAL_DEFAULT);
    dra_claim_free(c);
    json_decref(cj);
    inv_free(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),       cmocka_unit_test(test_whole_gpus),
        cmocka_unit_test(test_mig_devices), cmocka_unit_test(test_publish_plan),
        cmocka_unit_test(test_configs),     cmocka_unit_test(test_claim_plans),
        cmocka_unit_test(test_checkpoint),  cmocka_unit_test(test_withdrawn),
        cmocka_unit_test(test_flags),       cmocka_unit_test(test_faults),
        cmocka_unit_test(test_api_objects), cmocka_unit_test(test_mig_on_demand),
        cmocka_unit_test(test_mps_daemon),  cmocka_unit_test(test_timeslices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
