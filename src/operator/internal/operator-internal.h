/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the operator's source files. */
#ifndef GPUOP_OPERATOR_INTERNAL_H
#define GPUOP_OPERATOR_INTERNAL_H

#include <stddef.h>

#include <jansson.h>

#include "kobj.h" /* the object accessors (one vocabulary for the tree) */

struct embedded_file {
    const char *name;
    const char *data;
    size_t len;
};
/* Generated from deploy/operands/ and deploy/crds/ by tools/embed.c. */
extern const struct embedded_file op_embedded_operands[];
extern const struct embedded_file op_embedded_crds[];
/* deploy/upgrade/compat-matrix.yaml, the compatibility matrix gpuop ships. */
extern const struct embedded_file op_embedded_upgrade[];

/* repository/image:version of a component section, or NULL when it names no image. */
char *op_image_ref(const json_t *sec);

#endif
