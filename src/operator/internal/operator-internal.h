/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the operator's source files. */
#ifndef GPUOP_OPERATOR_INTERNAL_H
#define GPUOP_OPERATOR_INTERNAL_H

#include <stddef.h>

#include <jansson.h>

struct embedded_file {
    const char *name;
    const char *data;
    size_t len;
};
/* Generated from deploy/operands/ and deploy/crds/ by tools/embed.c. */
extern const struct embedded_file op_embedded_operands[];
extern const struct embedded_file op_embedded_crds[];

/* repository/image:version of a component section, or NULL when it names no image. */
char *op_image_ref(const json_t *sec);

/* Object accessors shared by the planner and the controller: o[a][b] as a string (b NULL:
 * o[a]) or NULL; metadata.name or NULL. */
const char *op_json_str(const json_t *o, const char *a, const char *b);
const char *op_obj_name(const json_t *o);

#endif
