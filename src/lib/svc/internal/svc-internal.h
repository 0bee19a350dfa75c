/* SPDX-License-Identifier: Apache-2.0 */
/* svc internals shared by its files (and its tests). */
#ifndef GPUOP_SVC_INTERNAL_H
#define GPUOP_SVC_INTERNAL_H

#include "svc.h"

size_t svc_n_options(const struct svc_component *c);
const struct svc_option *svc_option_at(const struct svc_component *c, size_t i);
/* argv into cli[i] (one slot per option, last occurrence wins), SVC_STRINGS options straight
 * into state (every occurrence), and args (at most c->max_args, *n_args counts them): 0, 1 for
 * --help, or -EINVAL. */
int svc_parse_argv(const struct svc_component *c, void *state, int argc, char **argv,
                   const char **cli, const char **args, size_t *n_args, struct err *e);
/* Options that land in state: env (table order), then flags. */
int svc_resolve_state(const struct svc_component *c, void *state, const char *const *cli,
                      struct err *e);
/* The config-file layer: load, env then flags for every field option, finish. */
int svc_resolve_layer(const struct svc_component *c, void *state, const char *const *cli,
                      struct err *e);
/* The value a field gets from flags > env, or NULL; ret_source the flag (no "--") or env. */
const char *svc_layer_value(const struct svc_component *c, const char *const *cli,
                            const char *field, const char **ret_source);

#endif
