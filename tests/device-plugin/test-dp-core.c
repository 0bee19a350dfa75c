/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests of the device plugin's pure core: resources per MIG strategy and sharing,
 * Allocate per deviceListStrategy, GetPreferredAllocation policies, and the health policy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "device-plugin.h"

/* ---- fixtures ----------------------------------------------------------------------------- */

static struct gpu_inventory *inv_new(unsigned n)
{
    struct gpu_inventory *inv = xcalloc(1, sizeof(*inv));
    inv->n_gpus = n;
    inv->gpus = xcalloc(n, sizeof(*inv->gpus));
    inv->topo_level = xcalloc(n * n, sizeof(unsigned));
    inv->nvlinks = xcalloc(n * n, sizeof(unsigned));
    for (unsigned i = 0; i < n; i++) {
        struct gpu_device *g = &inv->gpus[i];
        g->index = i;
        g->minor = i;
        snprintf(g->uuid, sizeof(g->uuid), "GPU-%08x-0000-0000-0000-00000000000%u", i, i % 10);
        snprintf(g->bus_id, sizeof(g->bus_id), "00000000:%02X:00.0", 0x10 + i);
        g->numa_node = i < n / 2 ? 0 : 1;
        for (unsigned j = 0; j < n; j++)
            inv->topo_level[i * n + j] = i == j ? 0 : GPU_TOPO_SYSTEM;
    }
    return inv;
}

static void inv_free(struct gpu_inventory *inv)
{
    for (size_t i = 0; i < inv->n_gpus; i++)
        free(inv->gpus[i].mig);
    free(inv->gpus);
    free(inv->topo_level);
    free(inv->nvlinks);
    free(inv);
}

static void add_mig(struct gpu_inventory *inv, unsigned gpu, const char *profile, unsigned gi,
                    unsigned ci, unsigned gslices, unsigned cslices)
{
    struct gpu_device *g = &inv->gpus[gpu];
    g->mig_capable = g->mig_enabled = true;
    g->mig = xrealloc(g->mig, (g->n_mig + 1) * sizeof(*g->mig));
    struct gpu_mig_device *m = &g->mig[g->n_mig];
    memset(m, 0, sizeof(*m));
    m->index = (unsigned)g->n_mig;
    m->gi_id = gi;
    m->ci_id = ci;
    m->gi_slices = gslices;
    m->ci_slices = cslices;
    strlcpy_s(m->profile, profile, sizeof(m->profile));
    snprintf(m->uuid, sizeof(m->uuid), "MIG-%08x-%04x-0000-0000-000000000000", gpu, gi * 16 + ci);
    g->n_mig++;
}

/* DGX-1 (Volta) hybrid cube-mesh: 8 GPUs, 6 NVLinks each; GPUs 0-3 on CPU 0 and 4-7 on CPU 1;
 * (0,1) (2,3) (4,5) (6,7) share a PCIe switch. Pair score = PCIe + 100 x NVLinks:
 *   same switch: 50, same CPU: 20, cross CPU: 10.
 *   (0,1)=150 (0,2)=120 (0,3)=220 (0,4)=210 (1,2)=220 (1,3)=120 (1,5)=210 (2,3)=250
 *   (2,6)=110 (3,7)=110 (4,5)=150 (4,6)=120 (4,7)=220 (5,6)=220 (5,7)=120 (6,7)=250
 *   every other pair (cross CPU, no NVLink) = 10. */
static const unsigned dgx1_nvlinks[8][8] = {
    {0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 0, 2, 0, 0, 1, 0},
    {2, 1, 2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
    {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0},
};

static struct gpu_inventory *inv_dgx1(void)
{
    struct gpu_inventory *inv = inv_new(8);
    for (unsigned a = 0; a < 8; a++)
        for (unsigned b = 0; b < 8; b++) {
            unsigned lvl = 0;
            if (a != b)
                lvl = a / 4 != b / 4   ? GPU_TOPO_SYSTEM
                      : a / 2 == b / 2 ? GPU_TOPO_SINGLE
                                       : GPU_TOPO_NODE;
            inv->topo_level[a * 8 + b] = lvl;
            inv->nvlinks[a * 8 + b] = dgx1_nvlinks[a][b];
        }
    return inv;
}

static struct dp_plan *plan_or_fail(const struct gpu_inventory *inv, const struct dp_options *o)
{
    struct dp_plan *p = NULL;
    struct err e = {0};
    int r = dp_plan_build(inv, o, &p, &e);
    if (r < 0)
        fail_msg("dp_plan_build: %s", err_msg(&e));
    return p;
}

/* ---- resources ---------------------------------------------------------------------------- */

static void test_parsers(void **state)
{
    (void)state;
    /* The config's names are parsed by dpconfig (tests/feature-discovery/test-dpconfig.c). */
    /* NVML levels to go-gpuallocator points */
    assert_int_equal(dp_pair_score(GPU_TOPO_INTERNAL, 0), 60);
    assert_int_equal(dp_pair_score(GPU_TOPO_SINGLE, 0), 50);
    assert_int_equal(dp_pair_score(GPU_TOPO_MULTIPLE, 0), 40);
    assert_int_equal(dp_pair_score(GPU_TOPO_HOSTBRIDGE, 0), 30);
    assert_int_equal(dp_pair_score(GPU_TOPO_NODE, 0), 20);
    assert_int_equal(dp_pair_score(GPU_TOPO_SYSTEM, 18), 1810);
}

static void test_strategy_none(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_new(4);
    add_mig(inv, 3, "1g.10gb", 1, 0, 1, 1); /* MIG-enabled GPUs stay whole GPUs under none */
    struct dp_options o;
    dp_options_defaults(&o);
    struct dp_plan *p = plan_or_fail(inv, &o);
    assert_int_equal(p->n_resources, 1);
    struct dp_resource *r = &p->resources[0];
    assert_string_equal(r->name, "nvidia.com/gpu");
    assert_string_equal(r->socket, "nvidia-gpu.sock");
    assert_int_equal(r->n_devices, 4);
    assert_string_equal(r->devices[3].id, inv->gpus[3].uuid);
    assert_string_equal(r->devices[3].index, "3");
    assert_false(r->devices[3].is_mig);
    assert_int_equal(r->devices[0].numa_node, 0);
    assert_int_equal(r->devices[3].numa_node, 1);
    assert_true(r->devices[0].healthy);
    dp_plan_free(p);
    inv_free(inv);

    /* no GPUs: nothing to advertise, not an error */
    struct gpu_inventory empty = {0};
    for (int m = DPCONFIG_MIG_NONE; m <= DPCONFIG_MIG_MIXED; m++) {
        o.mig_strategy = (enum dpconfig_mig_strategy)m;
        p = plan_or_fail(&empty, &o);
        assert_int_equal(p->n_resources, 0);
        dp_plan_free(p);
    }
}

static void test_strategy_single(void **state)
{
    (void)state;
    struct dp_options o;
    dp_options_defaults(&o);
    o.mig_strategy = DPCONFIG_MIG_SINGLE;
    struct err e = {0};
    struct dp_plan *p = NULL;

    /* all MIG, one profile: MIG devices as nvidia.com/gpu */
    struct gpu_inventory *inv = inv_new(2);
    add_mig(inv, 0, "1g.10gb", 7, 0, 1, 1);
    add_mig(inv, 0, "1g.10gb", 8, 0, 1, 1);
    add_mig(inv, 1, "1g.10gb", 9, 0, 1, 1);
    p = plan_or_fail(inv, &o);
    assert_int_equal(p->n_resources, 1);
    assert_string_equal(p->resources[0].name, "nvidia.com/gpu");
    assert_string_equal(p->resources[0].socket, "nvidia-gpu.sock");
    assert_int_equal(p->resources[0].n_devices, 3);
    assert_string_equal(p->resources[0].devices[1].id, inv->gpus[0].mig[1].uuid);
    assert_string_equal(p->resources[0].devices[1].index, "0:1");
    assert_string_equal(p->resources[0].devices[2].index, "1:0");
    assert_true(p->resources[0].devices[2].is_mig);

    /* MIG capability minors and the device specs they give */
    const char *minors = "config 1\nmonitor 2\ngpu0/gi7/access 66\ngpu0/gi7/ci0/access 67\n"
                         "gpu0/gi8/access 75\ngpu0/gi8/ci0/access 76\ngpu1/gi9/access 84\n"
                         "gpu1/gi9/ci0/access junk\ngpu0/gi7/ci0/access 99 trailing\n";
    assert_int_equal(dp_plan_apply_mig_minors(p, minors), 3);
    assert_int_equal(p->resources[0].devices[0].gi_cap, 66);
    assert_int_equal(p->resources[0].devices[0].ci_cap, 67);
    assert_int_equal(p->resources[0].devices[2].gi_cap, 84);
    /* a line that does not parse: the driver's layout (3 + 1 * 135 + 9 * 9, then ci 0) */
    assert_int_equal(p->resources[0].devices[2].ci_cap, 220);
    p->opts.pass_device_specs = true;
    struct dp_container_alloc a = {0};
    const char *mig_ids[] = {p->resources[0].devices[1].id};
    assert_int_equal(dp_allocate(p, &p->resources[0], mig_ids, 1, "x", NULL, NULL, &a, &e), 0);
    assert_int_equal(a.n_devspecs, 7); /* 4 control devices, nvidia0, cap75, cap76 */
    assert_string_equal(a.devspecs[4].container_path, "/dev/nvidia0");
    assert_string_equal(a.devspecs[5].container_path, "/dev/nvidia-caps/nvidia-cap75");
    assert_string_equal(a.devspecs[6].host_path, "/dev/nvidia-caps/nvidia-cap76");
    dp_container_alloc_clear(&a);
    dp_plan_free(p);
    /* no mig-minors file (a container without the host's /proc/driver): the driver's layout */
    p = plan_or_fail(inv, &o);
    assert_int_equal(dp_plan_apply_mig_minors(p, NULL), 3);
    assert_int_equal(p->resources[0].devices[1].gi_cap, 3 + 8 * 9);
    assert_int_equal(p->resources[0].devices[1].ci_cap, 3 + 8 * 9 + 1);
    dp_plan_free(p);

    /* two profiles */
    add_mig(inv, 1, "3g.40gb", 2, 0, 3, 3);
    assert_int_equal(dp_plan_build(inv, &o, &p, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "more than one MIG device type present on node"));
    inv_free(inv);

    /* MIG and non-MIG GPUs */
    inv = inv_new(2);
    add_mig(inv, 0, "1g.10gb", 7, 0, 1, 1);
    assert_int_equal(dp_plan_build(inv, &o, &p, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "all devices on the node must be configured with the "
                                        "same migEnabled value"));
    /* MIG enabled, no MIG devices */
    inv->gpus[1].mig_enabled = true;
    inv->gpus[0].n_mig = 0;
    assert_int_equal(dp_plan_build(inv, &o, &p, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "has MIG enabled but no MIG devices"));
    inv_free(inv);

    /* no MIG at all: whole GPUs */
    inv = inv_new(2);
    p = plan_or_fail(inv, &o);
    assert_int_equal(p->n_resources, 1);
    assert_string_equal(p->resources[0].devices[0].id, inv->gpus[0].uuid);
    dp_plan_free(p);
    inv_free(inv);
}

static void test_strategy_mixed(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_new(3);
    add_mig(inv, 1, "3g.40gb", 1, 0, 3, 3);
    add_mig(inv, 1, "1g.10gb", 9, 0, 1, 1);
    add_mig(inv, 1, "1g.10gb+me", 10, 0, 1, 1);
    add_mig(inv, 2, "1g.10gb", 9, 0, 1, 1);
    add_mig(inv, 2, "1c.2g.20gb", 3, 0, 2, 1); /* C != G: not exposed */
    struct dp_options o;
    dp_options_defaults(&o);
    o.mig_strategy = DPCONFIG_MIG_MIXED;
    struct dp_plan *p = plan_or_fail(inv, &o);
    assert_int_equal(p->n_resources, 4);
    assert_string_equal(p->resources[0].name, "nvidia.com/gpu");
    assert_int_equal(p->resources[0].n_devices, 1);
    assert_string_equal(p->resources[0].devices[0].id, inv->gpus[0].uuid);
    assert_string_equal(p->resources[1].name, "nvidia.com/mig-1g.10gb");
    assert_string_equal(p->resources[1].socket, "nvidia-mig-1g.10gb.sock");
    assert_int_equal(p->resources[1].n_devices, 2);
    assert_string_equal(p->resources[1].devices[0].index, "1:1");
    assert_string_equal(p->resources[1].devices[1].index, "2:0");
    assert_string_equal(p->resources[2].name, "nvidia.com/mig-1g.10gb.me");
    assert_string_equal(p->resources[2].socket, "nvidia-mig-1g.10gb.me.sock");
    assert_string_equal(p->resources[3].name, "nvidia.com/mig-3g.40gb");
    assert_int_equal(p->resources[3].devices[0].numa_node, inv->gpus[1].numa_node);
    assert_null(dp_plan_find(p, "nvidia.com/mig-1c.2g.20gb"));
    dp_plan_free(p);
    inv_free(inv);
}

static void test_time_slicing(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_new(2);
    struct dp_options o;
    dp_options_defaults(&o);
    o.sharing = DPCONFIG_SHARING_TIME_SLICING;
    o.n_shared = 2;
    strlcpy_s(o.shared[0].name, "nvidia.com/gpu", DP_NAME_MAX);
    o.shared[0].replicas = 4;
    strlcpy_s(o.shared[1].name, "nvidia.com/not-gpu", DP_NAME_MAX);
    o.shared[1].replicas = 2;
    struct dp_plan *p = plan_or_fail(inv, &o);
    struct dp_resource *r = &p->resources[0];
    assert_string_equal(r->name, "nvidia.com/gpu");
    assert_int_equal(r->replicas, 4);
    assert_int_equal(r->n_devices, 8);
    char want[DP_ID_MAX];
    snprintf(want, sizeof(want), "%s::3", inv->gpus[0].uuid);
    assert_string_equal(r->devices[3].id, want);
    assert_string_equal(r->devices[3].base_id, inv->gpus[0].uuid);
    assert_int_equal(r->devices[4].replica, 0);
    assert_string_equal(r->devices[4].index, "1");
    dp_plan_free(p);

    o.rename_by_default = true;
    o.fail_requests_gt_one = true;
    p = plan_or_fail(inv, &o);
    assert_string_equal(p->resources[0].name, "nvidia.com/gpu.shared");
    assert_string_equal(p->resources[0].socket, "nvidia-gpu.shared.sock");
    assert_true(p->resources[0].fail_requests_gt_one);
    dp_plan_free(p);

    /* MPS: needs a root, refuses MIG */
    o.sharing = DPCONFIG_SHARING_MPS;
    struct err e = {0};
    assert_int_equal(dp_plan_build(inv, &o, &p, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "--mps-root"));
    strlcpy_s(o.mps_root, "/run/nvidia/mps", sizeof(o.mps_root));
    p = plan_or_fail(inv, &o);
    dp_plan_free(p);
    add_mig(inv, 1, "1g.10gb", 9, 0, 1, 1);
    o.mig_strategy = DPCONFIG_MIG_MIXED;
    assert_int_equal(dp_plan_build(inv, &o, &p, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "not supported with MIG"));
    inv_free(inv);
}

/* ---- Allocate ----------------------------------------------------------------------------- */

static bool fake_exists(const char *path, void *ud)
{
    (void)ud;
    /* nvidia-uvm-tools and nvidia-modeset are absent on this fake host, and so are the GPUs'
     * own nodes (a plugin container without the host's /dev at the same path): those are passed
     * all the same */
    return !strstr(path, "uvm-tools") && !strstr(path, "modeset") &&
           !strstr(path, "/dev/nvidia7") && !strstr(path, "/dev/nvidia0");
}

static const char *env_of(const struct dp_container_alloc *a, const char *key)
{
    for (size_t i = 0; i < a->n_envs; i++)
        if (strcmp(a->envs[i].key, key) == 0)
            return a->envs[i].value;
    return NULL;
}

static void test_allocate(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_new(4);
    inv->gpus[2].minor = 7;
    struct dp_options o;
    dp_options_defaults(&o);
    struct dp_plan *p = plan_or_fail(inv, &o);
    struct dp_resource *r = &p->resources[0];
    struct dp_container_alloc a = {0};
    struct err e = {0};
    const char *ids[] = {inv->gpus[2].uuid, inv->gpus[0].uuid};

    /* the default, volume-mounts + uuid: the variable points at the mounts, one per GPU */
    assert_int_equal(dp_allocate(p, r, ids, 2, "rid", fake_exists, NULL, &a, &e), 0);
    char want[512];
    assert_int_equal(a.n_envs, 1);
    assert_string_equal(env_of(&a, "NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
    assert_int_equal(a.n_mounts, 2);
    for (size_t i = 0; i < 2; i++) {
        snprintf(want, sizeof(want), "/var/run/nvidia-container-devices/%s",
                 inv->gpus[i == 0 ? 2 : 0].uuid);
        assert_string_equal(a.mounts[i].container_path, want);
        assert_string_equal(a.mounts[i].host_path, "/dev/null");
        assert_false(a.mounts[i].read_only);
    }
    assert_int_equal(a.n_devspecs + a.n_cdi + a.n_annotations, 0);
    dp_container_alloc_clear(&a);

    /* envvar + uuid (NVIDIA's default) */
    dp_plan_free(p);
    o.list_strategies = DPCONFIG_LIST_ENVVAR;
    p = plan_or_fail(inv, &o);
    r = &p->resources[0];
    assert_int_equal(dp_allocate(p, r, ids, 2, "rid", fake_exists, NULL, &a, &e), 0);
    snprintf(want, sizeof(want), "%s,%s", inv->gpus[2].uuid, inv->gpus[0].uuid);
    assert_int_equal(a.n_envs, 1);
    assert_string_equal(env_of(&a, "NVIDIA_VISIBLE_DEVICES"), want);
    assert_int_equal(a.n_devspecs + a.n_mounts + a.n_cdi + a.n_annotations, 0);
    dp_container_alloc_clear(&a);

    /* envvar + index + passDeviceSpecs under a dev root */
    dp_plan_free(p);
    o.id_strategy = DPCONFIG_DEVICE_ID_INDEX;
    o.pass_device_specs = true;
    strlcpy_s(o.dev_root, "/run/nvidia/driver/", sizeof(o.dev_root));
    p = plan_or_fail(inv, &o);
    r = &p->resources[0];
    assert_int_equal(dp_allocate(p, r, ids, 2, "rid", fake_exists, NULL, &a, &e), 0);
    assert_string_equal(env_of(&a, "NVIDIA_VISIBLE_DEVICES"), "2,0");
    assert_int_equal(a.n_devspecs, 4); /* nvidiactl, nvidia-uvm, nvidia7, nvidia0 */
    assert_string_equal(a.devspecs[0].container_path, "/dev/nvidiactl");
    assert_string_equal(a.devspecs[0].host_path, "/run/nvidia/driver/dev/nvidiactl");
    assert_string_equal(a.devspecs[0].permissions, "rw");
    assert_string_equal(a.devspecs[1].container_path, "/dev/nvidia-uvm");
    assert_string_equal(a.devspecs[2].container_path, "/dev/nvidia7");
    assert_string_equal(a.devspecs[3].host_path, "/run/nvidia/driver/dev/nvidia0");
    dp_container_alloc_clear(&a);

    /* volume-mounts */
    dp_plan_free(p);
    dp_options_defaults(&o);
    o.list_strategies = DPCONFIG_LIST_VOLUME_MOUNTS;
    p = plan_or_fail(inv, &o);
    r = &p->resources[0];
    assert_int_equal(dp_allocate(p, r, ids, 2, "rid", fake_exists, NULL, &a, &e), 0);
    assert_string_equal(env_of(&a, "NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
    assert_int_equal(a.n_mounts, 2);
    snprintf(want, sizeof(want), "/var/run/nvidia-container-devices/%s", inv->gpus[2].uuid);
    assert_string_equal(a.mounts[0].container_path, want);
    assert_string_equal(a.mounts[0].host_path, "/dev/null");
    dp_container_alloc_clear(&a);

    /* cdi-cri + cdi-annotations only: no env, CDI names */
    dp_plan_free(p);
    o.list_strategies = DPCONFIG_LIST_CDI_CRI | DPCONFIG_LIST_CDI_ANNOTATIONS;
    o.pass_device_specs = true; /* not used when every strategy is CDI */
    p = plan_or_fail(inv, &o);
    r = &p->resources[0];
    assert_int_equal(dp_allocate(p, r, ids, 2, "abc", fake_exists, NULL, &a, &e), 0);
    assert_int_equal(a.n_envs, 0);
    assert_int_equal(a.n_devspecs, 0);
    assert_int_equal(a.n_cdi, 2);
    snprintf(want, sizeof(want), "k8s.device-plugin.nvidia.com/gpu=%s", inv->gpus[2].uuid);
    assert_string_equal(a.cdi[0], want);
    assert_int_equal(a.n_annotations, 1);
    assert_string_equal(a.annotations[0].key, "cdi.k8s.io/nvidia-device-plugin_abc");
    snprintf(want, sizeof(want),
             "k8s.device-plugin.nvidia.com/gpu=%s,k8s.device-plugin.nvidia.com/gpu=%s",
             inv->gpus[2].uuid, inv->gpus[0].uuid);
    assert_string_equal(a.annotations[0].value, want);
    dp_container_alloc_clear(&a);

    /* the toolkit's kind: its names, nothing else changes */
    dp_plan_free(p);
    assert_int_equal(dp_options_set_cdi_kind(&o, DP_CDI_TOOLKIT_KIND, &e), 0);
    p = plan_or_fail(inv, &o);
    r = &p->resources[0];
    assert_int_equal(dp_allocate(p, r, ids, 2, "abc", fake_exists, NULL, &a, &e), 0);
    assert_int_equal(a.n_cdi, 2);
    snprintf(want, sizeof(want), "nvidia.com/gpu=%s", inv->gpus[2].uuid);
    assert_string_equal(a.cdi[0], want);
    dp_container_alloc_clear(&a);
    assert_int_equal(dp_options_set_cdi_kind(&o, DP_CDI_VENDOR_CLASS, &e), 0);

    /* envvar + cdi-cri with index ids */
    dp_plan_free(p);
    o.list_strategies = DPCONFIG_LIST_CDI_CRI | DPCONFIG_LIST_ENVVAR;
    o.id_strategy = DPCONFIG_DEVICE_ID_INDEX;
    o.pass_device_specs = false;
    p = plan_or_fail(inv, &o);
    r = &p->resources[0];
    assert_int_equal(dp_allocate(p, r, ids, 1, "x", NULL, NULL, &a, &e), 0);
    assert_string_equal(a.cdi[0], "k8s.device-plugin.nvidia.com/gpu=2");
    assert_string_equal(env_of(&a, "NVIDIA_VISIBLE_DEVICES"), "2");
    dp_container_alloc_clear(&a);

    /* the optional features: envs always, extra CDI devices with a CDI strategy */
    dp_plan_free(p);
    o.gdrcopy = o.mofed = true;
    o.n_imex = 1;
    o.imex_channels[0] = 0;
    p = plan_or_fail(inv, &o);
    r = &p->resources[0];
    assert_int_equal(dp_allocate(p, r, ids, 1, "x", NULL, NULL, &a, &e), 0);
    assert_string_equal(env_of(&a, "NVIDIA_GDRCOPY"), "enabled");
    assert_string_equal(env_of(&a, "NVIDIA_MOFED"), "enabled");
    assert_null(env_of(&a, "NVIDIA_GDS"));
    assert_string_equal(env_of(&a, "NVIDIA_IMEX_CHANNELS"), "0");
    assert_int_equal(a.n_cdi, 4);
    assert_string_equal(a.cdi[1], "k8s.device-plugin.nvidia.com/gdrcopy=all");
    assert_string_equal(a.cdi[2], "k8s.device-plugin.nvidia.com/mofed=all");
    assert_string_equal(a.cdi[3], "k8s.device-plugin.nvidia.com/imex-channel=0");
    dp_container_alloc_clear(&a);

    /* errors */
    const char *bad[] = {inv->gpus[1].uuid, "GPU-nope"};
    assert_int_equal(dp_allocate(p, r, bad, 2, "x", NULL, NULL, &a, &e), -ENOENT);
    assert_string_equal(
        err_msg(&e), "invalid allocation request for 'nvidia.com/gpu': unknown device: GPU-nope");
    r->devices[1].healthy = false;
    assert_int_equal(dp_allocate(p, r, bad, 1, "x", NULL, NULL, &a, &e), -EIO);
    snprintf(want, sizeof(want),
             "invalid allocation request for 'nvidia.com/gpu': device %s is Unhealthy",
             inv->gpus[1].uuid);
    assert_string_equal(err_msg(&e), want);
    dp_plan_free(p);
    inv_free(inv);
}

static void test_allocate_shared(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_new(2);
    struct dp_options o;
    dp_options_defaults(&o);
    o.sharing = DPCONFIG_SHARING_TIME_SLICING;
    o.n_shared = 1;
    strlcpy_s(o.shared[0].name, "nvidia.com/gpu", DP_NAME_MAX);
    o.shared[0].replicas = 3;
    struct dp_plan *p = plan_or_fail(inv, &o);
    struct dp_resource *r = &p->resources[0];
    struct dp_container_alloc a = {0};
    struct err e = {0};
    /* two replicas of GPU 0 and one of GPU 1: the mounts name each GPU once */
    const char *ids[] = {r->devices[1].id, r->devices[0].id, r->devices[5].id};
    assert_int_equal(dp_allocate(p, r, ids, 3, "x", NULL, NULL, &a, &e), 0);
    char want[256];
    assert_int_equal(a.n_mounts, 2);
    snprintf(want, sizeof(want), "/var/run/nvidia-container-devices/%s", inv->gpus[1].uuid);
    assert_string_equal(a.mounts[1].container_path, want);
    dp_container_alloc_clear(&a);
    dp_plan_free(p);
    /* ... and so does the variable under envvar */
    o.list_strategies = DPCONFIG_LIST_ENVVAR;
    p = plan_or_fail(inv, &o);
    r = &p->resources[0];
    const char *again[] = {r->devices[1].id, r->devices[0].id, r->devices[5].id};
    assert_int_equal(dp_allocate(p, r, again, 3, "x", NULL, NULL, &a, &e), 0);
    snprintf(want, sizeof(want), "%s,%s", inv->gpus[0].uuid, inv->gpus[1].uuid);
    assert_string_equal(env_of(&a, "NVIDIA_VISIBLE_DEVICES"), want);
    dp_container_alloc_clear(&a);
    dp_plan_free(p);
    o.list_strategies = DPCONFIG_LIST_DEFAULT;

    o.fail_requests_gt_one = true;
    p = plan_or_fail(inv, &o);
    r = &p->resources[0];
    const char *two[] = {r->devices[0].id, r->devices[3].id};
    assert_int_equal(dp_allocate(p, r, two, 2, "x", NULL, NULL, &a, &e), -EINVAL);
    assert_string_equal(err_msg(&e),
                        "invalid request: maximum request size for shared resources is 1; found 2");
    assert_int_equal(dp_allocate(p, r, two, 1, "x", NULL, NULL, &a, &e), 0);
    dp_container_alloc_clear(&a);
    dp_plan_free(p);

    /* MPS adds its pipe directory */
    o.sharing = DPCONFIG_SHARING_MPS;
    strlcpy_s(o.mps_root, "/run/nvidia/mps", sizeof(o.mps_root));
    p = plan_or_fail(inv, &o);
    r = &p->resources[0];
    two[0] = r->devices[0].id;
    assert_int_equal(dp_allocate(p, r, two, 1, "x", NULL, NULL, &a, &e), 0);
    assert_string_equal(env_of(&a, "CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com/gpu/pipe");
    assert_int_equal(a.n_mounts, 3); /* the pipe and shm directories, then the GPU's */
    assert_string_equal(a.mounts[0].host_path, "/run/nvidia/mps/nvidia.com/gpu/pipe");
    assert_string_equal(a.mounts[1].container_path, "/dev/shm");
    assert_string_equal(a.mounts[2].host_path, "/dev/null");
    dp_container_alloc_clear(&a);
    dp_plan_free(p);
    inv_free(inv);
}

/* ---- GetPreferredAllocation --------------------------------------------------------------- */

/* dp_preferred over device IDs on the DGX-1 (the best-effort search itself:
 * test-dp-besteffort.c). */
static void test_preferred_ids(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_dgx1();
    struct dp_options o;
    dp_options_defaults(&o);
    struct dp_plan *p = plan_or_fail(inv, &o);
    assert_int_equal(p->pair_score[2 * 8 + 3], 250);
    assert_int_equal(p->pair_score[0 * 8 + 4], 210);
    struct dp_resource *res = &p->resources[0];
    const char *avail[8], *must[1] = {inv->gpus[0].uuid};
    for (int i = 0; i < 8; i++)
        avail[i] = inv->gpus[i].uuid;
    const char *ret[2];
    size_t n = 0;
    struct err e = {0};
    assert_int_equal(dp_preferred(p, res, avail, 8, must, 1, 2, ret, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_string_equal(ret[0], inv->gpus[0].uuid);
    assert_string_equal(ret[1], inv->gpus[4].uuid);
    const char *bogus[] = {"GPU-x"};
    assert_int_equal(dp_preferred(p, res, bogus, 1, NULL, 0, 1, ret, &n, &e), -ENOENT);
    assert_int_equal(dp_preferred(p, res, avail, 8, NULL, 0, 0, ret, &n, &e), -EINVAL);
    assert_int_equal(dp_preferred(p, res, avail + 1, 7, must, 1, 2, ret, &n, &e), -EINVAL);
    dp_plan_free(p);
    inv_free(inv);

    /* 16 GPUs in two NVLink domains (bench/deviceplugin/hgx-16.yaml), listed from the second
     * domain, 5 with GPU 3: the first best split is {8-12} {13-15,0,1} {2-6} {7,pad}, so GPUs
     * 2-6, all in GPU 3's domain; a request of several containers shares the budget and every
     * answer is the search's. */
    inv = inv_new(16);
    for (unsigned a = 0; a < 16; a++)
        for (unsigned b = 0; b < 16; b++)
            if (a != b && a / 8 == b / 8) {
                inv->topo_level[a * 16 + b] = GPU_TOPO_NODE;
                inv->nvlinks[a * 16 + b] = 2;
            }
    p = plan_or_fail(inv, &o);
    res = &p->resources[0];
    const char *all16[16], *must16[1] = {inv->gpus[3].uuid}, *ret16[5];
    for (unsigned i = 0; i < 16; i++)
        all16[i] = inv->gpus[(i + 8) % 16].uuid;
    uint64_t budget = DP_BE_BUDGET;
    for (int c = 0; c < 8; c++) {
        assert_int_equal(
            dp_preferred_budget(p, res, all16, 16, must16, 1, 5, &budget, ret16, &n, &e), 0);
        assert_int_equal(n, 5);
        for (unsigned i = 0; i < 5; i++)
            assert_string_equal(ret16[i], inv->gpus[2 + i].uuid);
    }
    assert_true(budget > DP_BE_BUDGET / 2);
    dp_plan_free(p);
    inv_free(inv);
}

static size_t count_gpu(const struct dp_plan *p, const struct dp_resource *r, const char **ids,
                        size_t n, unsigned gpu)
{
    (void)p;
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (dp_resource_find(r, ids[i])->gpu == gpu)
            c++;
    return c;
}

static struct dp_plan *shared_plan(struct gpu_inventory *inv, unsigned replicas,
                                   enum dpconfig_alloc_policy pol)
{
    struct dp_options o;
    dp_options_defaults(&o);
    o.sharing = DPCONFIG_SHARING_TIME_SLICING;
    o.n_shared = 1;
    strlcpy_s(o.shared[0].name, "nvidia.com/gpu", DP_NAME_MAX);
    o.shared[0].replicas = replicas;
    o.shared_policy = pol;
    return plan_or_fail(inv, &o);
}

static void test_greedy(void **state)
{
    (void)state;
    struct err e = {0};
    const char *ret[8];
    size_t n = 0;

    /* NVIDIA: 2 GPUs x 4 replicas, size 2 -> one replica of each GPU. */
    struct gpu_inventory *inv = inv_new(2);
    struct dp_plan *p = shared_plan(inv, 4, DPCONFIG_ALLOC_DISTRIBUTED);
    struct dp_resource *r = &p->resources[0];
    const char *all[8];
    for (int i = 0; i < 8; i++)
        all[i] = r->devices[i].id;
    assert_int_equal(dp_preferred(p, r, all, 8, NULL, 0, 2, ret, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_int_equal(count_gpu(p, r, ret, n, 0), 1);
    assert_int_equal(count_gpu(p, r, ret, n, 1), 1);

    /* NVIDIA: available {GPU-0::0, GPU-0::1, GPU-1::1}, size 2 -> one of each GPU: GPU 1 has
     * one replica allocated already, so GPU 0 goes first; then both have one allocated and
     * the tie goes to the GPU not yet picked in this request. */
    const char *some[] = {r->devices[0].id, r->devices[1].id, r->devices[5].id};
    assert_int_equal(dp_preferred(p, r, some, 3, NULL, 0, 2, ret, &n, &e), 0);
    assert_string_equal(ret[0], r->devices[0].id);
    assert_string_equal(ret[1], r->devices[5].id);

    /* must-include comes first, the rest spread */
    const char *must[] = {r->devices[2].id};
    assert_int_equal(dp_preferred(p, r, all, 8, must, 1, 3, ret, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_string_equal(ret[0], r->devices[2].id);
    assert_int_equal(count_gpu(p, r, ret, n, 1), 1);

    /* not enough */
    assert_int_equal(dp_preferred(p, r, some, 3, NULL, 0, 4, ret, &n, &e), -EINVAL);
    assert_string_equal(err_msg(&e), "not enough available devices to satisfy allocation");
    dp_plan_free(p);

    /* packed: all from one GPU while it has free replicas */
    p = shared_plan(inv, 4, DPCONFIG_ALLOC_PACKED);
    r = &p->resources[0];
    for (int i = 0; i < 8; i++)
        all[i] = r->devices[i].id;
    assert_int_equal(dp_preferred(p, r, all, 8, NULL, 0, 3, ret, &n, &e), 0);
    assert_int_equal(count_gpu(p, r, ret, n, 0), 3);
    /* packed prefers the GPU with the most already allocated: GPU 1 (only ::3 left free) */
    const char *part[] = {r->devices[0].id, r->devices[1].id, r->devices[7].id};
    assert_int_equal(dp_preferred(p, r, part, 3, NULL, 0, 1, ret, &n, &e), 0);
    assert_string_equal(ret[0], r->devices[7].id);
    dp_plan_free(p);
    inv_free(inv);

    /* NVIDIA: 3 GPUs x 2 replicas, size 3 -> 1/1/1 */
    inv = inv_new(3);
    p = shared_plan(inv, 2, DPCONFIG_ALLOC_DISTRIBUTED);
    r = &p->resources[0];
    const char *six[6];
    for (int i = 0; i < 6; i++)
        six[i] = r->devices[i].id;
    assert_int_equal(dp_preferred(p, r, six, 6, NULL, 0, 3, ret, &n, &e), 0);
    for (unsigned g = 0; g < 3; g++)
        assert_int_equal(count_gpu(p, r, ret, n, g), 1);
    dp_plan_free(p);
    inv_free(inv);

    /* MIG devices spread over physical GPUs (mixed, 2 GPUs x 3 x 1g.10gb) */
    inv = inv_new(2);
    for (unsigned g = 0; g < 2; g++)
        for (unsigned k = 0; k < 3; k++)
            add_mig(inv, g, "1g.10gb", 9 + k, 0, 1, 1);
    struct dp_options o;
    dp_options_defaults(&o);
    o.mig_strategy = DPCONFIG_MIG_MIXED;
    p = plan_or_fail(inv, &o);
    r = dp_plan_find(p, "nvidia.com/mig-1g.10gb");
    assert_non_null(r);
    const char *migs[6];
    for (int i = 0; i < 6; i++)
        migs[i] = r->devices[i].id;
    assert_int_equal(dp_preferred(p, r, migs, 6, NULL, 0, 2, ret, &n, &e), 0);
    assert_int_equal(count_gpu(p, r, ret, n, 0), 1);
    assert_int_equal(count_gpu(p, r, ret, n, 1), 1);
    dp_plan_free(p);
    o.shared_policy = DPCONFIG_ALLOC_PACKED;
    p = plan_or_fail(inv, &o);
    r = dp_plan_find(p, "nvidia.com/mig-1g.10gb");
    for (int i = 0; i < 6; i++)
        migs[i] = r->devices[i].id;
    assert_int_equal(dp_preferred(p, r, migs, 6, NULL, 0, 2, ret, &n, &e), 0);
    assert_int_equal(count_gpu(p, r, ret, n, 0), 2);
    dp_plan_free(p);
    inv_free(inv);
}

/* ---- health ------------------------------------------------------------------------------- */

/* Which GPUs the health thread probes for a lost GPU: all on a sweep, else those about to
 * recover and the GPU of a critical event. */
static void test_health_probe(void **state)
{
    (void)state;
    static const struct {
        unsigned n_gpus;
        uint64_t due;
        int critical;
        bool sweep;
        uint64_t want;
    } cases[] = {
        {8, 0, -1, false, 0},     {8, 0x6, -1, false, 0x6}, {8, 0x6, 0, false, 0x7},
        {8, 0, 5, false, 0x20},   {8, 0x6, 5, true, 0xff},  {0, 0, -1, true, 0},
        {64, 0, -1, true, ~0ull}, {70, 0, -1, true, ~0ull}, {70, 0, 63, false, 1ull << 63},
        {70, 0, 64, false, 0}, /* past the first 64: not probed */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        print_message("case %zu\n", i);
        assert_int_equal(
            dp_health_probe(cases[i].n_gpus, cases[i].due, cases[i].critical, cases[i].sweep),
            cases[i].want);
    }
}

static size_t n_unhealthy(const struct dp_resource *r)
{
    size_t c = 0;
    for (size_t i = 0; i < r->n_devices; i++)
        c += !r->devices[i].healthy;
    return c;
}

/* The early recovery after a reset: NVML's volatile ECC count below what it was after the error
 * (a reset or a driver reload cleared it) and nothing else wrong. */
static void test_health_reset_cleared(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        uint64_t at_error;
        struct dp_gpu_now now;
        bool want;
    } cases[] = {
        {"reset: the counts cleared", 1, {.ecc_sbe_vol = 0, .ecc_dbe_vol = 0}, true},
        {"reset, single-bit errors since", 5, {.ecc_sbe_vol = 2}, true},
        {"no reset: the count as after the error", 1, {.ecc_dbe_vol = 1}, false},
        {"no reset: more since", 1, {.ecc_dbe_vol = 2}, false},
        {"a double-bit error since the reset", 5, {.ecc_dbe_vol = 1}, false},
        {"single-bit errors back to the count", 3, {.ecc_sbe_vol = 3}, false},
        {"an error NVML kept no count of (an XID)", 0, {0}, false},
        {"lost", 1, {.lost = true}, false},
        {"rows still pending remapping", 1, {.remap_pending = true}, false},
        {"a failed remapping", 1, {.remap_failure = true}, false},
        {"pages pending retirement", 1, {.retired_pending = true}, false},
        {"the sum overflows", UINT64_MAX, {.ecc_sbe_vol = UINT64_MAX, .ecc_dbe_vol = 0}, false},
        {"the sum wraps", 5, {.ecc_sbe_vol = UINT64_MAX, .ecc_dbe_vol = 2}, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        print_message("case %zu: %s\n", i, cases[i].name);
        assert_int_equal(dp_health_reset_cleared(cases[i].at_error, &cases[i].now), cases[i].want);
    }
}

static const struct dp_device *gpu_dev(const struct dp_resource *r, unsigned gpu)
{
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].gpu == gpu)
            return &r->devices[i];
    fail_msg("no device of GPU %u", gpu);
    return NULL;
}

/* An ECC error on a shared GPU: the count noted, the reset returns its replicas; an XID with no
 * count waits for the quiet period; a lost GPU is not watched. */
static void test_health_recover_reset(void **state)
{
    (void)state;
    struct gpu_inventory *inv = inv_new(2);
    struct dp_plan *p = shared_plan(inv, 3, DPCONFIG_ALLOC_DISTRIBUTED);
    struct dp_resource *r = &p->resources[0];
    struct gpu_event dbe = {
        .gpu_index = 1, .type = GPU_EVENT_ECC_DBE, .gi_id = 0xFFFFFFFFu, .ci_id = 0xFFFFFFFFu};
    struct gpu_event xid = dbe;
    xid.gpu_index = 0;
    xid.type = GPU_EVENT_XID;
    xid.data = 94;
    assert_int_equal(dp_health_apply(p, &dbe, 1000), 3);
    assert_int_equal(dp_health_apply(p, &xid, 1000), 3);
    assert_int_equal(dp_health_reset_watch(p), 0x3); /* both held back, neither lost */
    struct dp_gpu_now after = {.ecc_dbe_vol = 1, .remap_pending = true};
    dp_health_note_ecc(p, 1, &after);
    struct dp_gpu_now none = {0};
    dp_health_note_ecc(p, 0, &none); /* the XID left no count */
    assert_int_equal(gpu_dev(r, 0)->ecc_vol_at_error, 0);
    /* not reset yet */
    assert_int_equal(dp_health_recover_reset(p, 1, &after), 0);
    /* the count read again, lower than noted: the highest stays */
    struct dp_gpu_now lower = {.ecc_dbe_vol = 0, .ecc_sbe_vol = 0, .remap_pending = true};
    dp_health_note_ecc(p, 1, &lower);
    assert_int_equal(gpu_dev(r, 1)->ecc_vol_at_error, 1);
    /* reset: the count cleared and the remapping done */
    struct dp_gpu_now reset = {0};
    assert_int_equal(dp_health_recover_reset(p, 0, &reset), 0); /* the XID's GPU stays */
    assert_int_equal(dp_health_recover_reset(p, 1, &reset), 3);
    assert_int_equal(n_unhealthy(r), 3);
    for (size_t i = 0; i < r->n_devices; i++)
        assert_int_equal(r->devices[i].healthy, r->devices[i].gpu == 1);
    assert_int_equal(dp_health_reset_watch(p), 0x1); /* the XID's GPU, still held back */
    /* a new episode starts from no count: the old one's is not reused */
    assert_int_equal(dp_health_apply(p, &xid, 2000), 0);
    dbe.gpu_index = 1;
    assert_int_equal(dp_health_apply(p, &dbe, 3000), 3);
    assert_int_equal(gpu_dev(r, 1)->ecc_vol_at_error, 0);
    assert_int_equal(dp_health_recover_reset(p, 1, &reset), 0);
    /* a lost GPU never comes back this way */
    dp_health_note_ecc(p, 1, &after);
    assert_int_equal(dp_health_mark_lost(p, 1), 3);
    assert_int_equal(dp_health_recover_reset(p, 1, &reset), 0);
    assert_int_equal(dp_health_reset_watch(p), 0x1); /* not the lost one */
    /* the count is carried over to a rebuilt plan */
    struct dp_plan *p2 = shared_plan(inv, 3, DPCONFIG_ALLOC_DISTRIBUTED);
    dp_plan_carry_health(p2, p);
    assert_int_equal(gpu_dev(&p2->resources[0], 1)->ecc_vol_at_error, 1);
    dp_plan_free(p2);
    dp_plan_free(p);
    inv_free(inv);
}

static void test_health_apply(void **state)
{
    (void)state;
    /* whole GPU with replicas */
    struct gpu_inventory *inv = inv_new(2);
    struct dp_plan *p = shared_plan(inv, 3, DPCONFIG_ALLOC_DISTRIBUTED);
    struct dp_resource *r = &p->resources[0];
    struct gpu_event ev = {.gpu_index = 1,
                           .type = GPU_EVENT_XID,
                           .data = 79,
                           .gi_id = 0xFFFFFFFFu,
                           .ci_id = 0xFFFFFFFFu};
    strlcpy_s(ev.uuid, inv->gpus[1].uuid, sizeof(ev.uuid));
    assert_int_equal(dp_health_apply(p, &ev, 1000), 3);
    assert_int_equal(n_unhealthy(r), 3);
    assert_false(r->devices[3].healthy);
    assert_true(r->devices[2].healthy);
    assert_int_equal(dp_health_apply(p, &ev, 2000), 0); /* already unhealthy; timer restarts */
    /* recovery: quiet period from the last error */
    assert_int_equal(dp_health_recovery_due(p, 2000 + 299999, 300000), 0);
    assert_int_equal(dp_health_recovery_due(p, 2000 + 300000, 300000), 1u << 1);
    assert_int_equal(dp_health_recovery_due(p, 2000 + 300000, 0), 0);
    assert_int_equal(dp_health_recover(p, 2000 + 299999, 300000), 0);
    assert_int_equal(dp_health_recover(p, 2000 + 300000, 300000), 3);
    assert_int_equal(n_unhealthy(r), 0);
    /* 0 disables recovery */
    dp_health_apply(p, &ev, 5000);
    assert_int_equal(dp_health_recover(p, 1ull << 40, 0), 0);
    /* lost never recovers */
    assert_int_equal(dp_health_mark_lost(p, 0), 3);
    assert_int_equal(dp_health_recover(p, 1ull << 41, 1000), 3); /* GPU 1 only */
    assert_int_equal(n_unhealthy(r), 3);
    assert_true(r->devices[0].lost);

    /* carried over to a rebuilt plan */
    struct dp_plan *p2 = shared_plan(inv, 3, DPCONFIG_ALLOC_DISTRIBUTED);
    dp_plan_carry_health(p2, p);
    assert_int_equal(n_unhealthy(&p2->resources[0]), 3);
    assert_true(p2->resources[0].devices[1].lost);
    dp_plan_free(p2);
    dp_plan_free(p);
    inv_free(inv);

    /* MIG: the event's GI/CI select the MIG devices */
    inv = inv_new(2);
    add_mig(inv, 0, "1g.10gb", 7, 0, 1, 1);
    add_mig(inv, 0, "1g.10gb", 8, 0, 1, 1);
    add_mig(inv, 0, "1g.10gb", 9, 0, 1, 1);
    add_mig(inv, 1, "1g.10gb", 7, 0, 1, 1);
    struct dp_options o;
    dp_options_defaults(&o);
    o.mig_strategy = DPCONFIG_MIG_SINGLE;
    p = plan_or_fail(inv, &o);
    r = &p->resources[0];
    struct gpu_event mev = {
        .gpu_index = 0, .type = GPU_EVENT_XID, .data = 48, .gi_id = 8, .ci_id = 0};
    strlcpy_s(mev.uuid, inv->gpus[0].uuid, sizeof(mev.uuid));
    assert_int_equal(dp_health_apply(p, &mev, 1), 1);
    assert_false(r->devices[1].healthy);
    assert_true(r->devices[3].healthy);  /* same GI id, other GPU */
    mev.gi_id = mev.ci_id = 0xFFFFFFFFu; /* whole GPU: all its MIG devices */
    assert_int_equal(dp_health_apply(p, &mev, 2), 2);
    assert_int_equal(n_unhealthy(r), 3);
    /* no uuid: by index */
    struct gpu_event iev = {.gpu_index = 1,
                            .type = GPU_EVENT_XID,
                            .data = 48,
                            .gi_id = 0xFFFFFFFFu,
                            .ci_id = 0xFFFFFFFFu};
    assert_int_equal(dp_health_apply(p, &iev, 3), 1);
    dp_plan_free(p);
    inv_free(inv);
}

/* --cdi-kind: CDI's vendor/class rules, each refusal naming the value. */
static void test_cdi_kind(void **state)
{
    (void)state;
    static const struct {
        const char *kind;
        bool ok;
    } cases[] = {
        {"nvidia.com/gpu", true},
        {"k8s.device-plugin.nvidia.com/gpu", true},
        {"example.com/Class_1", true},
        {"nvidia.com", false},
        {"/gpu", false},
        {"nvidia.com/", false},
        {"a/b/c", false},
        {"Nvidia.com/gpu", false},
        {"nvidia.com/-gpu", false},
        {".nvidia.com/gpu", false},
        {"nvidia com/gpu", false},
        {"a.very.long.vendor.name.that.goes.on.and.on.example.com/and-a-class", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct dp_options o;
        dp_options_defaults(&o);
        struct err e = {0};
        int r = dp_options_set_cdi_kind(&o, cases[i].kind, &e);
        if (cases[i].ok) {
            assert_int_equal(r, 0);
            assert_string_equal(o.cdi_kind, cases[i].kind);
        } else {
            assert_int_equal(r, -EINVAL);
            assert_non_null(strstr(err_msg(&e), cases[i].kind));
            assert_string_equal(o.cdi_kind, DP_CDI_VENDOR_CLASS);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parsers),
        cmocka_unit_test(test_strategy_none),
        cmocka_unit_test(test_strategy_single),
        cmocka_unit_test(test_strategy_mixed),
        cmocka_unit_test(test_time_slicing),
        cmocka_unit_test(test_allocate),
        cmocka_unit_test(test_allocate_shared),
        cmocka_unit_test(test_preferred_ids),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_health_apply),
        cmocka_unit_test(test_health_probe),
        cmocka_unit_test(test_health_reset_cleared),
        cmocka_unit_test(test_health_recover_reset),
        cmocka_unit_test(test_cdi_kind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
