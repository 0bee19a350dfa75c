/* SPDX-License-Identifier: Apache-2.0 */
/* svc internals shared by its files (and its tests). */
#ifndef GPUOP_SVC_INTERNAL_H
#define GPUOP_SVC_INTERNAL_H

#include "svc.h"

/* A component's options as one list: its tables in order, every fragment in place, each
 * option's off counted from the start of the state. Built once per parse. */
struct svc_opts {
    const struct svc_component *c;
    struct svc_option *v;
    size_t n;
};
void svc_opts_init(struct svc_opts *o, const struct svc_component *c);
void svc_opts_done(struct svc_opts *o);

/* argv into cli[i] (one slot per option, last occurrence wins), SVC_STRINGS options straight
 * into state (every occurrence), and args (at most c->max_args, *n_args counts them): 0, 1 for
 * --help, or -EINVAL. */
int svc_parse_argv(const struct svc_opts *o, void *state, int argc, char **argv, const char **cli,
                   const char **args, size_t *n_args, struct err *e);
/* Options that land in state: env (table order), then flags. */
int svc_resolve_state(const struct svc_opts *o, void *state, const char *const *cli, struct err *e);
/* The config-file layer: load, env then flags for every field option, finish. */
int svc_resolve_layer(const struct svc_opts *o, void *state, const char *const *cli, struct err *e);
/* The value a field gets from flags > env, or NULL; ret_source the flag (no "--") or env. */
const char *svc_layer_value(const struct svc_opts *o, const char *const *cli, const char *field,
                            const char **ret_source);

/* The verb of c named word, or NULL. */
const struct svc_component *svc_verb_find(const struct svc_component *c, const char *word);
/* "apply, assert, export": c's verbs, each after prefix ("cdi "), into buf (truncated with
 * "..." when it does not fit). */
void svc_verb_names(const struct svc_component *c, const char *prefix, char *buf, size_t n);
/* --help of the command `gpuop <path>` (path: "toolkit cdi"). */
void svc_usage_at(const struct svc_component *c, const char *path, FILE *out);

#endif
