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

/* One field of a message at *p (advanced past it): 1 read, 0 at the end, -1 malformed. A
 * length-delimited field's bytes are data/len, a varint's value val. */
int ks_pb_next(const unsigned char **p, const unsigned char *end, uint64_t *field, int *wire,
               const unsigned char **data, size_t *len, uint64_t *val);

/* The same for the authentication and authorization kinds clients create (TokenRequest,
 * TokenReview, SelfSubjectReview, the access reviews, SelfSubjectRulesReview): pb-auth.c. */
json_t *ks_pb_decode_auth(const char *body, size_t blen);

#endif
