/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deviceplugin internals: the protobuf edge (bytes in, bytes out; no I/O, fuzzable) and the
 * translation of a resolved dpconfig into dp_options.
 */
#ifndef GPUOP_DP_INTERNAL_H
#define GPUOP_DP_INTERNAL_H

#include "device-plugin.h"
#include "dpconfig.h"

#define DP_MAX_CONTAINERS 256   /* container requests per call */
#define DP_MAX_REQ_IDS    16384 /* device IDs per container request */
#define DP_MAX_MSG        (4u << 20)

/* Fills a CDI annotation response ID (36 characters + NUL). */
typedef void (*dp_uuid_fn)(char out[37]);

/*
 * Handle one request's bytes for resource r: on success *ret and *ret_len hold the packed response
 * (malloc'd). On failure a negative code, *ret_status the gRPC status to answer (INVALID_ARGUMENT
 * for undecodable requests, UNKNOWN for refused ones, as NVIDIA's plugin answers) and e the
 * message.
 */
int dp_proto_allocate(const struct dp_plan *p, const struct dp_resource *r, const uint8_t *req,
                      size_t len, dp_uuid_fn uuid, dp_exists_fn exists, void *userdata,
                      uint8_t **ret, size_t *ret_len, int *ret_status, struct err *e);
int dp_proto_preferred(const struct dp_plan *p, const struct dp_resource *r, const uint8_t *req,
                       size_t len, uint8_t **ret, size_t *ret_len, int *ret_status, struct err *e);
/* The ListAndWatchResponse of r (every device, its health and NUMA node). */
int dp_proto_list(const struct dp_resource *r, uint8_t **ret, size_t *ret_len, struct err *e);
/* DevicePluginOptions{get_preferred_allocation_available: true}. */
int dp_proto_options(uint8_t **ret, size_t *ret_len, struct err *e);

/* dp_options from a resolved config; errors for what the plugin cannot serve. */
int dp_options_from_config(const struct dpconfig *c, struct dp_options *ret, struct err *e);

#endif
