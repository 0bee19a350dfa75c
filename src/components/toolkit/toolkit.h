/* SPDX-License-Identifier: Apache-2.0 */
/*
 * toolkit: `gpuop toolkit`, the node's CDI spec (src/lib/nvcdi), gpuop installed as the runtime
 * handler, and the runtime's configuration (src/lib/rtconfig), kept ready for GPU containers.
 *
 * This header is the pure core (toolkit.c; table-tested): which runtime the options ask for,
 * the install directory's rules, the handler's script, the spec's hook path, the runtime's
 * options and the .toolkit-ctr-ready marker. The shell: toolkit-main.c (the daemon), cdi-main.c
 * (`toolkit cdi generate|list` and the spec's options both share), node-files.c (the spec and the
 * marker on the host), install.c (gpuop and its handler script installed) and runtime-config.c
 * (the runtime detected, configured, followed, restored).
 */
#ifndef GPUOP_TOOLKIT_H
#define GPUOP_TOOLKIT_H

#include <stdbool.h>
#include <stddef.h>

#include "rtconfig.h"
#include "util.h"

#define TOOLKIT_BINARY_NAME  "gpuop"         /* <install-dir>/gpuop: the spec's hooks run it */
#define TOOLKIT_WRAPPER_NAME "gpuop-runtime" /* <install-dir>/gpuop-runtime: the handler */
#define TOOLKIT_RUNTIME_NONE "none"
#define TOOLKIT_RUNTIME_AUTO "auto"

/* The node's runtime as the options ask for it. */
struct toolkit_runtime {
    bool configure; /* false with --runtime=none: the spec only */
    bool known;     /* --runtime named one; else detected at run time */
    enum rtconfig_kind kind;
    enum rtconfig_restart_mode restart;
};
/* From --runtime (auto, containerd, cri-o, docker, none), --default-runtime (the policy's: ""
 * or NULL when none; a named --runtime must be it), --restart-mode (signal, systemd, none) and
 * --runtime-class (not empty). -EINVAL naming the flag and the value; *ret written only on
 * success. */
int toolkit_runtime_choose(const char *runtime, const char *default_runtime,
                           const char *restart_mode, const char *runtime_class,
                           struct toolkit_runtime *ret, struct err *e);

/* --install-dir: an absolute path of letters, digits and /._+- only (it goes into a shell script
 * and a runtime's config). -EINVAL naming the value. */
int toolkit_install_dir_check(const char *dir, struct err *e);

/* <install-dir>/gpuop, the path the spec's hooks run ("/gpuop" under "/"); malloc'ed. */
char *toolkit_hook_path(const char *install_dir);

/* The handler script installed as <install-dir>/gpuop-runtime: `gpuop runtime` run from bin
 * with the runtime's arguments, and before them the handler's settings that differ from its
 * defaults. malloc'ed. */
char *toolkit_wrapper_script(const char *bin, bool accept_envvar_unprivileged,
                             bool accept_volume_mounts);

/* The runtime's options for the handler runtime_class running <install-dir>/gpuop-runtime
 * (written into path, n bytes), CDI enabled. */
void toolkit_rt_options(const char *runtime_class, const char *install_dir, bool set_as_default,
                        enum rtconfig_restart_mode restart, char *path, size_t n,
                        struct rtconfig_options *ret);

/* The .toolkit-ctr-ready marker (an env file): RUNTIME (the runtime's name, none when not
 * configured), RUNTIME_CONFIG (its main config, when configured), CDI_SPEC and
 * TOOLKIT_INSTALL_DIR. */
int toolkit_marker_render(const struct toolkit_runtime *rt, const struct rtconfig_options *o,
                          const char *cdi_spec, const char *install_dir, char **ret, struct err *e);

#endif
