/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's protobuf body decoder (pb.c): bytes in, JSON out, no store; fuzzed on its own. */
#ifndef GPUOP_KUBESIM_PB_H
#define GPUOP_KUBESIM_PB_H

#include <jansson.h>
#include <stddef.h>

#include "util.h"

/* Decodes a protobuf body (runtime.Unknown envelope) of Namespace, ConfigMap, Secret,
 * ServiceAccount or Eviction into the JSON object it stands for; NULL when not one of those.
 * *ret_kind is the envelope's kind when there was one. */
json_t *ks_pb_decode(const char *body, size_t blen, const char **ret_kind);

#endif
