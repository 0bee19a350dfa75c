/* SPDX-License-Identifier: Apache-2.0 */
/* The toolkit's shell, shared by its files: the daemon (toolkit-main.c), the cdi commands and the
 * spec's options (cdi-main.c), the spec and the marker on the host (node-files.c), gpuop
 * installed (install.c) and the runtime's configuration (runtime-config.c). */
#ifndef GPUOP_TOOLKIT_INTERNAL_H
#define GPUOP_TOOLKIT_INTERNAL_H

#include "gpu.h"
#include "nodestate.h"
#include "nvcdi.h"
#include "svc.h"
#include "toolkit.h"

#define TK_COMP "toolkit"

/* The state of the daemon and of the cdi commands. */
struct tk {
    /* options */
    const char *install_dir;
    const char *runtime_class;
    const char *runtime;
    const char *default_runtime;
    const char *node_runtime_version;
    bool set_as_default;
    const char *restart_mode;
    const char *host_root;
    const char *driver_root;
    const char *dev_root;
    const char *output;
    const char *cdi_spec;
    const char *validations_dir;
    const char *nvml_library;
    const char *mig_minors;
    uint64_t interval_ms;
    bool cleanup;
    bool accept_envvar_unprivileged; /* the runtime handler's settings (docs/runtime.md) */
    bool accept_volume_mounts;
    /* derived */
    struct toolkit_runtime rt; /* the runtime the options ask for; its kind detected if need be */
    /* running */
    struct nvcdi_gen *gen;
    char *spec_host; /* <host_root><cdi_spec> */
    char *last_spec; /* what is on disk */
    char driver_root_now[256];
    bool runtime_failing; /* the last pass could not configure the runtime (said once) */
    bool daemon;          /* the daemon, not a cdi command: it installs gpuop after the spec */
    char *hook_path;      /* <install-dir>/gpuop: the spec's hooks run it */
    char *last_warnings;  /* the generator's warnings last logged */
};

/* ---- cdi-main.c: the spec's inputs, shared by the daemon and the cdi commands -------------- */

extern const struct svc_option tk_spec_options[];
extern const struct svc_component tk_cdi; /* `toolkit cdi generate|list` */
void tk_defaults(void *state);
void tk_cleanup(void *state);
/* The spec's generator from the options. */
int tk_spec_configure(struct svc *s, struct err *e);

/* ---- node-files.c: the spec and the marker on the host ------------------------------------ */

/* <host_root><path>, malloc'ed. */
char *tk_on_host(const struct tk *t, const char *path);
/* Atomically, the directory created; errors name the directory or the file (what: "CDI spec"). */
int tk_write_file(const char *path, const char *what, const char *data, size_t len, unsigned mode,
                  struct err *e);
/* The spec generated (*ret malloc'ed; ret_version may be NULL); the generator's warnings logged
 * when they change. */
int tk_generate(struct tk *t, char **ret, char *ret_version, size_t version_len, struct err *e);
/* Writes the spec (taken) when it differs from what is on disk. */
int tk_put_spec(struct tk *t, char *spec, const char *version, struct err *e);
void tk_remove_spec(struct tk *t);
int tk_write_marker(struct tk *t, struct err *e);
bool tk_marker_exists(const struct tk *t);
void tk_remove_marker(struct tk *t);

/* ---- install.c ---------------------------------------------------------------------------- */

/* gpuop itself as <install-dir>/gpuop, and <install-dir>/gpuop-runtime, the handler the runtime
 * runs. Rewritten only when different. */
int tk_install(struct tk *t, struct err *e);

/* ---- runtime-config.c --------------------------------------------------------------------- */

/* The runtime detected (unless --runtime named it) and its config's parser loaded. */
int tk_runtime_detect(struct tk *t, struct err *e);
/* Configured for the handler; logged as done or already done. */
int tk_runtime_configure(struct tk *t, struct err *e);
/* Kept configured on every pass: an edit followed, a failure said once. */
void tk_runtime_follow(struct tk *t);
/* gpuop's changes taken out (--cleanup), one log line per file. */
void tk_runtime_restore(struct tk *t);

#endif
