/* SPDX-License-Identifier: Apache-2.0 */
/* The device plugin's protobuf edge (bytes in, bytes out) and its config translation, including
 * NVIDIA's precedence (flag > env > file > default) as the plugin resolves it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "dp-internal.h"
#include "grpc.h"

static struct gpu_device gpus[4];
static struct gpu_inventory inv;

static void setup_inv(void)
{
    memset(gpus, 0, sizeof(gpus));
    for (unsigned i = 0; i < 4; i++) {
        gpus[i].index = i;
        gpus[i].minor = i;
        gpus[i].numa_node = i < 2 ? 0 : (i == 3 ? -1 : 1);
        snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "GPU-%08u-aaaa-bbbb-cccc-dddddddddddd", i);
    }
    inv = (struct gpu_inventory){.n_gpus = 4, .gpus = gpus};
}

static struct dp_plan *plan_from_yaml(const char *yaml)
{
    struct dpconfig *c = NULL;
    struct err e = {0};
    if (dpconfig_parse(yaml, strlen(yaml), "cfg.yaml", &c, &e) < 0)
        fail_msg("dpconfig_parse: %s", err_msg(&e));
    struct dp_options o;
    if (dp_options_from_config(c, &o, &e) < 0)
        fail_msg("dp_options_from_config: %s", err_msg(&e));
    dpconfig_free(c);
    struct dp_plan *p = NULL;
    setup_inv();
    if (dp_plan_build(&inv, &o, &p, &e) < 0)
        fail_msg("dp_plan_build: %s", err_msg(&e));
    return p;
}

static uint8_t *pack_alloc(const char *const *ids, size_t n, size_t *len)
{
    V1beta1__ContainerAllocateRequest cr = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    cr.n_devices_ids = n;
    cr.devices_ids = (char **)ids;
    V1beta1__ContainerAllocateRequest *crp[2] = {&cr, &cr};
    V1beta1__AllocateRequest rq = V1BETA1__ALLOCATE_REQUEST__INIT;
    rq.n_container_requests = 2; /* the same request for two containers */
    rq.container_requests = crp;
    uint8_t *buf = NULL;
    struct err e = {0};
    assert_int_equal(grpc_pb_pack(&rq.base, 0, &buf, len, &e), 0);
    return buf;
}

static void fixed_uuid(char out[37])
{
    strlcpy_s(out, "11111111-2222-4333-8444-555555555555", 37);
}

static void test_allocate_bytes(void **state)
{
    (void)state;
    struct dp_plan *p = plan_from_yaml("version: v1\n"
                                       "flags:\n"
                                       "  plugin:\n"
                                       "    deviceListStrategy: [envvar, cdi-annotations]\n"
                                       "    deviceIDStrategy: index\n");
    const char *ids[] = {gpus[3].uuid, gpus[1].uuid};
    size_t len = 0;
    uint8_t *req = pack_alloc(ids, 2, &len);
    uint8_t *out = NULL;
    size_t out_len = 0;
    int status = -1;
    struct err e = {0};
    assert_int_equal(dp_proto_allocate(p, &p->resources[0], req, len, fixed_uuid, NULL, NULL, &out,
                                       &out_len, &status, &e),
                     0);
    V1beta1__AllocateResponse *resp = v1beta1__allocate_response__unpack(NULL, out_len, out);
    assert_non_null(resp);
    assert_int_equal(resp->n_container_responses, 2);
    V1beta1__ContainerAllocateResponse *c = resp->container_responses[1];
    assert_int_equal(c->n_envs, 1);
    assert_string_equal(c->envs[0]->key, "NVIDIA_VISIBLE_DEVICES");
    assert_string_equal(c->envs[0]->value, "3,1");
    assert_int_equal(c->n_annotations, 1);
    assert_string_equal(c->annotations[0]->key,
                        "cdi.k8s.io/nvidia-device-plugin_11111111-2222-4333-8444-555555555555");
    assert_string_equal(c->annotations[0]->value,
                        "k8s.device-plugin.nvidia.com/gpu=3,k8s.device-plugin.nvidia.com/gpu=1");
    v1beta1__allocate_response__free_unpacked(resp, NULL);
    free(out);
    free(req);

    /* refused: UNKNOWN with the reason; undecodable: INVALID_ARGUMENT */
    const char *bad[] = {"GPU-nope"};
    req = pack_alloc(bad, 1, &len);
    assert_true(dp_proto_allocate(p, &p->resources[0], req, len, NULL, NULL, NULL, &out, &out_len,
                                  &status, &e) < 0);
    assert_int_equal(status, GRPC_STATUS_UNKNOWN);
    assert_non_null(strstr(err_msg(&e), "unknown device: GPU-nope"));
    free(req);
    static const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
    assert_true(dp_proto_allocate(p, &p->resources[0], junk, sizeof(junk), NULL, NULL, NULL, &out,
                                  &out_len, &status, &e) < 0);
    assert_int_equal(status, GRPC_STATUS_INVALID_ARGUMENT);
    dp_plan_free(p);
}

static void test_preferred_and_list_bytes(void **state)
{
    (void)state;
    struct dp_plan *p = plan_from_yaml("version: v1\n"
                                       "sharing:\n"
                                       "  timeSlicing:\n"
                                       "    resources:\n"
                                       "    - name: nvidia.com/gpu\n"
                                       "      replicas: 2\n");
    struct dp_resource *r = &p->resources[0];
    assert_string_equal(r->name, "nvidia.com/gpu");
    assert_int_equal(r->n_devices, 8);

    V1beta1__ContainerPreferredAllocationRequest cr =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
    char *avail[8];
    for (int i = 0; i < 8; i++)
        avail[i] = r->devices[i].id;
    cr.n_available_deviceids = 8;
    cr.available_deviceids = avail;
    cr.allocation_size = 4;
    V1beta1__ContainerPreferredAllocationRequest *crp = &cr;
    V1beta1__PreferredAllocationRequest rq = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
    rq.n_container_requests = 1;
    rq.container_requests = &crp;
    uint8_t *req = NULL, *out = NULL;
    size_t len = 0, out_len = 0;
    int status = 0;
    struct err e = {0};
    assert_int_equal(grpc_pb_pack(&rq.base, 0, &req, &len, &e), 0);
    assert_int_equal(dp_proto_preferred(p, r, req, len, &out, &out_len, &status, &e), 0);
    V1beta1__PreferredAllocationResponse *resp =
        v1beta1__preferred_allocation_response__unpack(NULL, out_len, out);
    assert_non_null(resp);
    assert_int_equal(resp->container_responses[0]->n_deviceids, 4);
    /* distributed: one replica of each of the 4 GPUs */
    bool seen[4] = {false};
    for (size_t i = 0; i < 4; i++) {
        const struct dp_device *d = dp_resource_find(r, resp->container_responses[0]->deviceids[i]);
        assert_non_null(d);
        assert_false(seen[d->gpu]);
        seen[d->gpu] = true;
    }
    v1beta1__preferred_allocation_response__free_unpacked(resp, NULL);
    free(out);
    free(req);

    /* a hostile size is refused, not trusted */
    cr.allocation_size = 1 << 30;
    assert_int_equal(grpc_pb_pack(&rq.base, 0, &req, &len, &e), 0);
    assert_true(dp_proto_preferred(p, r, req, len, &out, &out_len, &status, &e) < 0);
    assert_int_equal(status, GRPC_STATUS_INVALID_ARGUMENT);
    free(req);

    /* ListAndWatch: health and NUMA topology (none when unknown) */
    r->devices[0].healthy = false;
    assert_int_equal(dp_proto_list(r, &out, &out_len, &e), 0);
    V1beta1__ListAndWatchResponse *l = v1beta1__list_and_watch_response__unpack(NULL, out_len, out);
    assert_non_null(l);
    assert_int_equal(l->n_devices, 8);
    assert_string_equal(l->devices[0]->health, "Unhealthy");
    assert_string_equal(l->devices[1]->health, "Healthy");
    char want[DP_ID_MAX];
    snprintf(want, sizeof(want), "%s::1", gpus[2].uuid);
    assert_string_equal(l->devices[5]->id, want);
    assert_int_equal(l->devices[5]->topology->nodes[0]->id, 1);
    assert_null(l->devices[7]->topology); /* GPU 3: NUMA unknown */
    v1beta1__list_and_watch_response__free_unpacked(l, NULL);
    free(out);

    assert_int_equal(dp_proto_options(&out, &out_len, &e), 0);
    V1beta1__DevicePluginOptions *o = v1beta1__device_plugin_options__unpack(NULL, out_len, out);
    assert_true(o->get_preferred_allocation_available);
    assert_false(o->pre_start_required);
    v1beta1__device_plugin_options__free_unpacked(o, NULL);
    free(out);
    dp_plan_free(p);
}

/* Precedence as the plugin resolves it: --flag > ENV > config file > default. */
static const char *fake_env_vals[8][2];
static const char *fake_getenv(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(fake_env_vals) && fake_env_vals[i][0]; i++)
        if (strcmp(fake_env_vals[i][0], name) == 0)
            return fake_env_vals[i][1];
    return NULL;
}

static size_t opt_index(const char *flag)
{
    for (size_t i = 0; dpconfig_plugin_options[i].field; i++)
        if (dpconfig_plugin_options[i].flag && strcmp(dpconfig_plugin_options[i].flag, flag) == 0)
            return i;
    fail_msg("no option --%s", flag);
    return 0;
}

static void test_precedence(void **state)
{
    (void)state;
    char path[] = "/tmp/dp-cfg-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *yaml = "version: v1\n"
                       "flags:\n"
                       "  migStrategy: single\n"
                       "  plugin:\n"
                       "    deviceListStrategy: volume-mounts\n"
                       "    deviceIDStrategy: index\n"
                       "    passDeviceSpecs: true\n";
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);

    static const struct {
        const char *env_mig, *flag_mig, *env_list;
        enum dpconfig_mig_strategy want_mig;
        unsigned want_list;
    } cases[] = {
        {NULL, NULL, NULL, DPCONFIG_MIG_SINGLE, DPCONFIG_LIST_VOLUME_MOUNTS},    /* file */
        {"mixed", NULL, NULL, DPCONFIG_MIG_MIXED, DPCONFIG_LIST_VOLUME_MOUNTS},  /* env > file */
        {"mixed", "none", NULL, DPCONFIG_MIG_NONE, DPCONFIG_LIST_VOLUME_MOUNTS}, /* flag > env */
        {NULL, NULL, "envvar,cdi-cri", DPCONFIG_MIG_SINGLE,
         DPCONFIG_LIST_ENVVAR | DPCONFIG_LIST_CDI_CRI},
    };
    size_t n_opts = 0;
    while (dpconfig_plugin_options[n_opts].field)
        n_opts++;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const char **cli = xcalloc(n_opts + 1, sizeof(char *));
        cli[opt_index("config-file")] = path;
        if (cases[i].flag_mig)
            cli[opt_index("mig-strategy")] = cases[i].flag_mig;
        memset(fake_env_vals, 0, sizeof(fake_env_vals));
        size_t k = 0;
        if (cases[i].env_mig) {
            fake_env_vals[k][0] = "MIG_STRATEGY";
            fake_env_vals[k++][1] = cases[i].env_mig;
        }
        if (cases[i].env_list) {
            fake_env_vals[k][0] = "DEVICE_LIST_STRATEGY";
            fake_env_vals[k++][1] = cases[i].env_list;
        }
        struct dpconfig *c = NULL;
        struct err e = {0};
        if (dpconfig_resolve(dpconfig_plugin_options, cli, fake_getenv, &c, NULL, &e) < 0)
            fail_msg("case %zu: %s", i, err_msg(&e));
        struct dp_options o;
        assert_int_equal(dp_options_from_config(c, &o, &e), 0);
        if (o.mig_strategy != cases[i].want_mig || o.list_strategies != cases[i].want_list)
            fail_msg("case %zu: mig %d list %u, want %d %u", i, o.mig_strategy, o.list_strategies,
                     cases[i].want_mig, cases[i].want_list);
        assert_int_equal(o.id_strategy, DPCONFIG_DEVICE_ID_INDEX);
        assert_true(o.pass_device_specs);
        dpconfig_free(c);
        free(cli);
    }

    /* a bad value names the source */
    const char **cli = xcalloc(n_opts + 1, sizeof(char *));
    cli[opt_index("mig-strategy")] = "sideways";
    memset(fake_env_vals, 0, sizeof(fake_env_vals));
    struct dpconfig *c = NULL;
    struct err e = {0};
    assert_true(dpconfig_resolve(dpconfig_plugin_options, cli, fake_getenv, &c, NULL, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "mig-strategy"));
    free(cli);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocate_bytes),
        cmocka_unit_test(test_preferred_and_list_bytes),
        cmocka_unit_test(test_precedence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
