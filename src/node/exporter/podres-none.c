/* SPDX-License-Identifier: Apache-2.0 */
/* Builds without the gRPC module: pod attribution is unavailable (reported, never fatal). */
#include "exporter-internal.h"

int exp_podresources_list(const char *socket_path, const struct gpu_inventory *inv,
                          const char *extra_resource_names, uint64_t timeout_ms,
                          struct stop_token *stop, struct exp_pod_map *map, struct err *e)
{
    (void)inv;
    (void)timeout_ms;
    (void)stop;
    (void)extra_resource_names;
    (void)map;
    return err_set(e, -EOPNOTSUPP, "kubelet PodResources \"%s\": built without gRPC support",
                   socket_path);
}
