/* SPDX-License-Identifier: Apache-2.0 */
/* exporter internals shared between the shell's files. */
#ifndef GPUOP_EXPORTER_INTERNAL_H
#define GPUOP_EXPORTER_INTERNAL_H

#include "exporter.h"
#include "http.h"

/* Lists pod resources from the kubelet (PodResources v1 List over gRPC on a unix socket) and
 * adds the GPU devices to *map. The whole exchange ends by timeout_ms, or at once when stop is
 * requested. Without gRPC support compiled in: -EOPNOTSUPP. */
int exp_podresources_list(const char *socket_path, const struct gpu_inventory *inv,
                          const char *extra_resource_names, uint64_t timeout_ms,
                          struct stop_token *stop, struct exp_pod_map *map, struct err *e);

#endif
