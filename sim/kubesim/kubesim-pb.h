/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's protobuf codec (pb.c): JSON objects to Kubernetes' protobuf encoding and back,
 * driven by the field tables generated from Kubernetes' .proto files (pb-tables.c). Bytes in,
 * JSON out and the reverse; no store, no I/O: fuzzed on its own (tests/fuzz/kubesim). */
#ifndef GPUOP_KUBESIM_PB_H
#define GPUOP_KUBESIM_PB_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define KS_PB_MEDIA_TYPE "application/vnd.kubernetes.protobuf"
#define KS_PB_WATCH_TYPE "application/vnd.kubernetes.protobuf;stream=watch"

/* A kind the tables describe (apiVersion "v1", kind "Pod"; lists and meta kinds included). */
bool ks_pb_knows(const char *api_version, const char *kind);

/* A protobuf body: the `k8s\0` magic and a runtime.Unknown envelope whose typeMeta names the
 * kind and whose raw bytes are its message. *ret is the JSON object it stands for, apiVersion
 * and kind first. -EBADMSG for malformed bytes, -ENOENT for a kind the tables do not know. */
int ks_pb_decode(const void *body, size_t len, json_t **ret, struct err *e);

/* The reverse: obj (its apiVersion and kind name the message) appended to out as an envelope.
 * -ENOENT when the tables do not know the kind, -EINVAL when a field's JSON does not fit its
 * type, -ENOBUFS when out is full. JSON fields the message has not are left out. */
int ks_pb_encode(json_t *obj, struct sbuf *out, struct err *e);

/* One watch event as the API server streams it in protobuf: a 4-byte big-endian length, then
 * a metav1.WatchEvent (no envelope) whose object is the enveloped obj. */
int ks_pb_encode_watch_event(const char *type, json_t *obj, struct sbuf *out, struct err *e);
/* A WatchEvent message (the bytes after the length) into its type and object. */
int ks_pb_decode_watch_event(const void *msg, size_t len, char **ret_type, json_t **ret_obj,
                             struct err *e);

/* One field of a message at *p (advanced past it): 1 read, 0 at the end, -1 malformed. A
 * length-delimited field's bytes are data/len, a varint's value val. */
int ks_pb_next(const unsigned char **p, const unsigned char *end, uint64_t *field, int *wire,
               const unsigned char **data, size_t *len, uint64_t *val);

#endif
