/* SPDX-License-Identifier: Apache-2.0 */
/*
 * runtime: `gpuop runtime`, the `nvidia` runtime handler. An OCI runtime wrapper: it takes
 * runc's command line verbatim, and for `create` and `run` reads the bundle's config.json, finds
 * the devices the container asks for (NVIDIA_VISIBLE_DEVICES in its environment, the
 * cdi.k8s.io/ annotations), applies their CDI edits (src/edge/cdi) and writes config.json back
 * atomically; then it executes the low-level runtime (runc, crun) with the same arguments.
 * Every other command passes straight through. docs/runtime.md tells the whole story.
 *
 * This header is the pure core: the command line, the device request, the edit. The shell
 * (runtime-main.c) reads the bundle and the CDI directories, writes, and executes.
 */
#ifndef GPUOP_RUNTIME_H
#define GPUOP_RUNTIME_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cdi.h"
#include "util.h"

/* ---- the command line --------------------------------------------------------------------- */

/* runc's argv split: the wrapper's own flags (recognized only before the command: --runtime-path,
 * --cdi-spec-dirs, --default-kind, and --help alone) go to own[]; everything else, in order, to
 * pass[] (pass[0] is left for the runtime's path). Pointers into argv. */
struct runtime_cmdline {
    const char **own; /* own[0] = "runtime", then the wrapper's flags; NULL-terminated */
    int n_own;
    const char **pass; /* pass[0] = NULL (the caller sets it), then runc's args; NULL-terminated */
    int n_pass;
    const char *command;    /* "create", "run", "start", ...; NULL when none */
    const char *bundle;     /* --bundle / -b of create and run; NULL: the working directory */
    const char *log_path;   /* runc's --log */
    const char *log_format; /* runc's --log-format ("text", "json") */
    bool help;              /* `gpuop runtime --help` */
};
/* argv[0] is the component name (or the binary's); argv[1..] runc's. */
int runtime_cmdline_parse(int argc, char **argv, struct runtime_cmdline *ret, struct err *e);
void runtime_cmdline_clear(struct runtime_cmdline *c);
/* Whether the command gets the edit: create and run. */
bool runtime_command_edits(const char *command);

/* ---- the request -------------------------------------------------------------------------- */

/* The qualified CDI names a container asks for, in order, without repeats: the value of
 * NVIDIA_VISIBLE_DEVICES in process.env (the last one set wins, as in an environment; "all",
 * indices, UUIDs, MIG "<gpu>:<mig>" and MIG UUIDs become default_kind=<name>; a qualified name
 * is taken as is; "none", "void" or empty ask for nothing), then the values of the cdi.k8s.io/
 * annotations in key order ("vendor/class=name,..."). A malformed name is an error naming it and
 * where it came from. *ret is NULL-terminated (strv_free). */
int runtime_requested_devices(const json_t *oci, const char *default_kind, char ***ret,
                              size_t *ret_n, struct err *e);
void runtime_strv_free(char **v);

/* Resolves names against reg and applies their edits to oci (on a copy: oci is unchanged on
 * error). stat_fn as cdi_oci_apply. */
int runtime_edit_config(json_t *oci, const struct cdi_registry *reg, const char *const *names,
                        size_t n_names, cdi_stat_fn stat_fn, void *stat_ud, struct err *e);

#endif
