/* SPDX-License-Identifier: Apache-2.0 */
/* The protobuf field tables (pb-tables.c, written by scripts/gen-k8s-pb.py from Kubernetes'
 * generated.proto files) that pb.c walks: one entry per message, its fields in number order. */
#ifndef GPUOP_KS_PB_TABLES_H
#define GPUOP_KS_PB_TABLES_H

#include <stddef.h>
#include <stdint.h>

/* A field's type: a scalar, or a message (ks_pb_msgs[msg]). A map's key is a string; type is
 * its value's. */
enum ks_pb_type {
    KS_PBT_STRING,
    KS_PBT_BOOL,
    KS_PBT_INT32,
    KS_PBT_INT64,
    KS_PBT_BYTES,
    KS_PBT_MSG
};
enum ks_pb_card { KS_PBC_ONE, KS_PBC_REPEATED, KS_PBC_MAP };
enum {
    KS_PBF_INLINE = 1,   /* Go embeds it: its fields sit in the parent's JSON object */
    KS_PBF_OMITZERO = 2, /* JSON leaves the zero value ("", 0, false) out */
};
/* Messages JSON writes as something other than an object of their fields. */
enum ks_pb_special {
    KS_PBS_NONE,
    KS_PBS_TIME,        /* {seconds, nanos} <-> "2006-01-02T15:04:05Z" */
    KS_PBS_MICROTIME,   /* <-> "2006-01-02T15:04:05.000000Z" */
    KS_PBS_DURATION,    /* {duration ns} <-> "1h2m3s" */
    KS_PBS_QUANTITY,    /* {string} <-> "100m" */
    KS_PBS_INTORSTRING, /* {type, intVal, strVal} <-> 8080 or "http" */
    KS_PBS_RAWEXT,      /* {raw}: an embedded object (an envelope, or JSON bytes) */
    KS_PBS_RAWJSON,     /* {Raw}: JSON bytes (managedFields' fieldsV1) */
    KS_PBS_STRLIST,     /* {repeated items}: a JSON array of strings */
};

struct ks_pb_field {
    uint32_t no;
    const char *json;
    uint8_t type; /* enum ks_pb_type */
    uint8_t card; /* enum ks_pb_card */
    uint8_t flags;
    uint16_t msg; /* KS_PBT_MSG: index in ks_pb_msgs */
};

struct ks_pb_msg {
    const char *name; /* full proto name, "k8s.io.api.core.v1.Pod"; the array is sorted by it */
    uint8_t special;  /* enum ks_pb_special */
    uint16_t n_fields;
    const struct ks_pb_field *fields;
};

/* An apiVersion and the proto package its kinds are messages of. */
struct ks_pb_package {
    const char *api_version;
    const char *package;
};

extern const struct ks_pb_msg ks_pb_msgs[];
extern const size_t ks_pb_n_msgs;
extern const struct ks_pb_package ks_pb_packages[];
extern const size_t ks_pb_n_packages;

#endif
