/* SPDX-License-Identifier: Apache-2.0 */
/*
 * yamlcfg: YAML (and JSON, a subset) documents into jansson values, plus checked accessors for
 * reading configuration out of them with errors that name the file and the field path.
 *
 * Scalars are typed as YAML 1.2's core schema types them: plain `true`/`false` (any case)
 * become booleans, `null`/`~`/empty become null, plain integers (decimal or 0x hex) become
 * integers, plain floats become reals, everything else, and every quoted scalar, is a string.
 * Anchors and aliases are resolved (by reference; a document holding cycles is refused, and so
 * is one whose aliases expand to more than YAML_MAX_ALIAS_NODES nodes).
 * Inputs are bounded in size and nesting depth.
 *
 * The returned values are owned by the caller (json_decref). Thread-safe.
 */
#ifndef GPUOP_YAMLCFG_H
#define GPUOP_YAMLCFG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util.h"

#define YAML_MAX_BYTES (16u << 20)
#define YAML_MAX_DEPTH 64
/* Nodes one document may reach through aliases (each alias counts the whole value it names). */
#define YAML_MAX_ALIAS_NODES 1000000

/* Parses every document of buf into a JSON array (one element per document). `name` is used in
 * error messages ("<name>:<line>:<col>: <reason>"). */
int yaml_parse_all(const char *buf, size_t len, const char *name, json_t **ret, struct err *e);
/* Parses exactly one document; an empty input gives an empty object. */
int yaml_parse_one(const char *buf, size_t len, const char *name, json_t **ret, struct err *e);
/* Reads the file (bounded) and parses one document. */
int yaml_load_file(const char *path, json_t **ret, struct err *e);
/* Reads the file and parses all documents. */
int yaml_load_file_all(const char *path, json_t **ret, struct err *e);

/* A JSON value as one YAML document (block style, two-space indents, no folding, UTF-8 kept),
 * appended to out (its limit bounds it: -E2BIG past it, never a cut document). A string that a
 * YAML 1.1 or 1.2 reader would take for another type ("true", "on", "1.5", "", ...) is quoted
 * and one with line breaks is a literal block where it can be, so the document reads back (with
 * yaml_parse_one, kubectl, PyYAML) as the same value. Deeper than YAML_MAX_DEPTH: -EINVAL. */
int yaml_emit(const json_t *v, struct sbuf *out, struct err *e);
/* Whether the plain scalar s would read back as a null, boolean or number (yaml_emit quotes it). */
bool yaml_plain_is_typed(const char *s, size_t len);

/* jansson's own json_decrefp */
#define _cleanup_json_ _cleanup_(json_decrefp)

/*
 * Checked accessors. `ctx` names where obj sits, e.g. "fleet.yaml: gpus[2]"; errors read
 * "<ctx>.<key>: expected a string, got an integer". With required=false a missing key (or a
 * null value) leaves *ret untouched and returns 0; `1` is returned when the key was present.
 */
int cfg_string(json_t *obj, const char *key, const char *ctx, bool required, const char **ret,
               struct err *e);
/* Accepts integers, and strings holding an integer (decimal or 0x hex). */
int cfg_int64(json_t *obj, const char *key, const char *ctx, bool required, int64_t min,
              int64_t max, int64_t *ret, struct err *e);
/* Accepts booleans, and the strings "true"/"false". */
int cfg_bool(json_t *obj, const char *key, const char *ctx, bool required, bool *ret,
             struct err *e);
/* The value must be an object / an array. */
int cfg_object(json_t *obj, const char *key, const char *ctx, bool required, json_t **ret,
               struct err *e);
int cfg_array(json_t *obj, const char *key, const char *ctx, bool required, json_t **ret,
              struct err *e);
/* Fails on the first key of obj not listed in allowed (NULL-terminated), naming it and the
 * allowed ones. */
int cfg_known_keys(json_t *obj, const char *ctx, const char *const *allowed, struct err *e);
/* A short name for a JSON type, for messages: "a string", "an integer", ... */
const char *cfg_type_name(const json_t *v);

#endif
