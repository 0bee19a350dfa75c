/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the device plugin's request handling, protobuf bytes in. The first byte picks
 * the call and the plan: Allocate or GetPreferredAllocation, against 8 whole GPUs with a
 * DGX-1-like NVLink topology (best-effort path) or the same GPUs time-sliced x4 (greedy path).
 * The rest is the request message. GPU UUIDs are GPU-0000000<i>-0000-0000-0000-000000000000.
 */
#include <stdint.h>
#include <string.h>

#include "dp-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct dp_plan *plans[2];

static void build_plans(void)
{
    static const unsigned nv[8][8] = {
        {0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 0, 2, 0, 0, 1, 0},
        {2, 1, 2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
        {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0},
    };
    struct gpu_device gpus[8];
    unsigned topo[64], links[64];
    memset(gpus, 0, sizeof(gpus));
    for (unsigned i = 0; i < 8; i++) {
        gpus[i].index = i;
        gpus[i].minor = i;
        gpus[i].numa_node = (int)(i / 4);
        snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "GPU-%08u-0000-0000-0000-000000000000", i);
        for (unsigned j = 0; j < 8; j++) {
            topo[i * 8 + j] = i / 4 != j / 4 ? GPU_TOPO_SYSTEM : GPU_TOPO_NODE;
            links[i * 8 + j] = nv[i][j];
        }
    }
    struct gpu_inventory inv = {.n_gpus = 8, .gpus = gpus, .topo_level = topo, .nvlinks = links};
    struct dp_options o;
    struct err e = {0};
    dp_options_defaults(&o);
    o.list_strategies =
        DPCONFIG_LIST_ENVVAR | DPCONFIG_LIST_CDI_CRI | DPCONFIG_LIST_CDI_ANNOTATIONS;
    o.pass_device_specs = true;
    if (dp_plan_build(&inv, &o, &plans[0], &e) < 0)
        abort();
    o.sharing = DPCONFIG_SHARING_TIME_SLICING;
    o.n_shared = 1;
    strlcpy_s(o.shared[0].name, "nvidia.com/gpu", sizeof(o.shared[0].name));
    o.shared[0].replicas = 4;
    o.fail_requests_gt_one = true;
    o.id_strategy = DPCONFIG_DEVICE_ID_INDEX;
    if (dp_plan_build(&inv, &o, &plans[1], &e) < 0)
        abort();
}

static bool no_files(const char *path, void *ud)
{
    (void)path, (void)ud;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!plans[0])
        build_plans();
    if (size < 1)
        return 0;
    struct dp_plan *p = plans[(data[0] >> 1) & 1];
    struct dp_resource *r = &p->resources[0];
    uint8_t *out = NULL;
    size_t n = 0;
    int status = 0;
    struct err e = {0};
    int rc;
    if (data[0] & 1)
        rc = dp_proto_preferred(p, r, data + 1, size - 1, &out, &n, &status, &e);
    else
        rc = dp_proto_allocate(p, r, data + 1, size - 1, NULL, no_files, NULL, &out, &n, &status,
                               &e);
    if (rc < 0 && (status == 0 || !e.msg[0]))
        abort(); /* a refusal always carries a status and a message */
    free(out);
    return 0;
}
