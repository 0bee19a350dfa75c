/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's commands: `gpuop operator render` (render-main.c) and the flags it shares with
 * `gpuop operator` (controller.c), each a one-option fragment over a `const char *`. */
#ifndef GPUOP_OP_CLI_H
#define GPUOP_OP_CLI_H

#include "svc.h"

extern const struct svc_component op_render_component;
/* The chart's hooks: `gpuop operator apply-crds` (hooks-crds-main.c) and `gpuop operator
 * uninstall` (hooks-main.c). */
extern const struct svc_component op_apply_crds_component;
extern const struct svc_component op_uninstall_component;

/* --namespace NS [OPERATOR_NAMESPACE]: the operands' namespace (the caller's default:
 * gpu-operator) */
extern const struct svc_option op_namespace_option[];
/* --operand-image IMAGE [OPERAND_IMAGE]: every gpuop operand's image (NULL: gpuop:VERSION) */
extern const struct svc_option op_operand_image_option[];
/* --operand-templates DIR: templates that replace compiled-in ones of the same name */
extern const struct svc_option op_operand_templates_option[];

#endif
