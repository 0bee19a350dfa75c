/* SPDX-License-Identifier: Apache-2.0 */
/* The kubelet PodResources v1 client: List over gRPC, GPU devices into the pod map. */
#include <string.h>

#include "exporter-internal.h"
#include "grpc.h"
#include "podresources/v1/api.pb-c.h"

#define PODRES_TIMEOUT_MS 5000
#define PODRES_MAX_MSG    (16u << 20)

static size_t apply(const V1__ListPodResourcesResponse *resp, const struct gpu_inventory *inv,
                    const char *extra, struct exp_pod_map *map)
{
    size_t n = 0;
    for (size_t p = 0; p < resp->n_pod_resources; p++) {
        const V1__PodResources *pod = resp->pod_resources[p];
        if (!pod || !pod->name || !pod->namespace_)
            continue;
        for (size_t c = 0; c < pod->n_containers; c++) {
            const V1__ContainerResources *ctr = pod->containers[c];
            if (!ctr || !ctr->name)
                continue;
            for (size_t d = 0; d < ctr->n_devices; d++) {
                const V1__ContainerDevices *dev = ctr->devices[d];
                if (!dev || !exp_pod_resource_is_gpu(dev->resource_name, extra))
                    continue;
                for (size_t i = 0; i < dev->n_device_ids; i++)
                    if (exp_pod_map_add(map, inv, dev->device_ids[i], pod->name, pod->namespace_,
                                        ctr->name))
                        n++;
            }
        }
    }
    return n;
}

int exp_podresources_list(const char *socket_path, const struct gpu_inventory *inv,
                          const char *extra_resource_names, uint64_t timeout_ms,
                          struct stop_token *stop, struct exp_pod_map *map, struct err *e)
{
    if (!timeout_ms || timeout_ms > PODRES_TIMEOUT_MS)
        timeout_ms = PODRES_TIMEOUT_MS;
    uint64_t deadline = deadline_after(timeout_ms);
    struct grpc_options opts = {.max_recv_msg = PODRES_MAX_MSG, .stop = stop};
    _cleanup_(grpc_client_freep) struct grpc_client *c = NULL;
    int r = grpc_client_connect(socket_path, timeout_ms, &opts, &c, e);
    if (r < 0)
        return err_prefix(e, "kubelet PodResources \"%s\"", socket_path);
    V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    int code = 0;
    r = grpc_client_unary_pb(
        c, "/v1.PodResourcesLister/List", &req.base, &v1__list_pod_resources_response__descriptor,
        deadline_left_ms(deadline) ? deadline_left_ms(deadline) : 1, &resp, &code, e);
    if (r < 0)
        return err_prefix(e, "kubelet PodResources \"%s\" List", socket_path);
    apply((const V1__ListPodResourcesResponse *)resp, inv, extra_resource_names, map);
    protobuf_c_message_free_unpacked(resp, NULL);
    return 0;
}
