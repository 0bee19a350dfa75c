/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop runtime`'s shell, shared by its files: runtime-main.c (the options, the run), bundle.c
 * (config.json edited) and runc-log.c (errors where runc's caller reads them). */
#ifndef GPUOP_RUNTIME_INTERNAL_H
#define GPUOP_RUNTIME_INTERNAL_H

#include "runtime.h"

#define RUNTIME_COMP "runtime"

/* The wrapper's own options (runtime-main.c's table). */
struct runtime_opts {
    const char *runtime_path;
    const char *spec_dirs; /* ':'-separated */
    const char *default_kind;
    bool accept_envvar_unprivileged;
    bool accept_volume_mounts;
    const char *annotation_keys; /* checked with the option */
};

/* ---- bundle.c ----------------------------------------------------------------------------- */

/* config.json of the bundle, edited for the devices it asks for under o's policy. Nothing is
 * written unless the whole edit succeeded; then it is replaced atomically, its mode kept. */
int runtime_bundle_edit(const struct runtime_cmdline *c, const struct runtime_opts *o,
                        struct err *e);

/* ---- runc-log.c --------------------------------------------------------------------------- */

/* One line in runc's --log file (none without one), in its --log-format, as runc writes them. */
void runtime_log_line(const struct runtime_cmdline *c, const char *level, const char *msg);
/* An error: one line to stderr and one to runc's --log file. */
void runtime_report(const struct runtime_cmdline *c, const char *msg);

#endif
