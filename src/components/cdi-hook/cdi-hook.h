/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi-hook: `gpuop cdi-hook`, the createContainer hooks the node's CDI spec (src/lib/nvcdi) has
 * the runtime run, so that a container finds the driver's libraries whatever its image:
 *
 *   gpuop cdi-hook create-symlinks --link libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so
 *   gpuop cdi-hook update-ldcache --host-driver-version 550.90.07 --folder /usr/lib/x86_64-...
 *
 * The runtime runs a createContainer hook after the container's mounts, before it changes root,
 * with the container's state on stdin ({"bundle": ...}); the container's root filesystem is
 * root.path of the bundle's config.json. create-symlinks makes links in it (libcuda.so, the
 * development link). update-ldcache writes /etc/ld.so.conf.d/00-gpuop-cdi.conf (where the image
 * has that folder) and rebuilds the image's /etc/ld.so.cache with the host's ldconfig run
 * chrooted in the container's root (`ldconfig -r ROOT FOLDER...`), the driver's folders named
 * first; with --host-driver-version the image's CUDA forward-compatible libraries
 * (/usr/local/cuda/compat) come before them when they are of a newer driver branch.
 *
 * Paths in the container's root are resolved inside it (util's file_root_resolve): an image's
 * links never lead the hook outside its root.
 *
 * This header is the pure core (cdi-hook.c: the state and config.json read, the arguments
 * checked, what to do planned); the shell is cdi-hook-main.c (the options, the run) with
 * container-root.c (the container's root read and resolved, create-symlinks' links made) and
 * ldcache.c (update-ldcache: the image's compat folder read, the drop-in written, ldconfig run).
 */
#ifndef GPUOP_CDI_HOOK_H
#define GPUOP_CDI_HOOK_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define HOOK_STATE_MAX   (64u << 10) /* the container state on stdin */
#define HOOK_CONFIG_MAX  (8u << 20)  /* the bundle's config.json */
#define HOOK_COMPAT_DIR  "/usr/local/cuda/compat"
#define HOOK_LDCONF_DIR  "/etc/ld.so.conf.d"
#define HOOK_LDCONF_NAME "00-gpuop-cdi.conf"
#define HOOK_LDCONF      HOOK_LDCONF_DIR "/" HOOK_LDCONF_NAME
#define HOOK_FOLDERS_MAX 64

/* The bundle of an OCI container state (the JSON a runtime writes to a hook's stdin): "bundle",
 * an absolute path. -EINVAL names what is wrong. */
int hook_state_bundle(const char *text, size_t len, char **ret_bundle, struct err *e);

/* The container's root filesystem from its bundle's config.json: root.path, relative to the
 * bundle unless absolute ("<bundle>/rootfs"). path names the file in errors. */
int hook_config_rootfs(const char *path, const char *bundle, const char *text, size_t len,
                       char **ret_rootfs, struct err *e);

/* A path inside the container the hooks take as an argument: absolute, no "." or ".."
 * component, no control character (it becomes a line of a loader config), shorter than
 * PATH_MAX. what names the argument in errors ("--folder"). */
int hook_path_check(const char *what, const char *path, struct err *e);

/* "--link TARGET::LINK": a link at LINK (a path inside the container, hook_path_check) to
 * TARGET (kept as given, relative or absolute, read inside the container). */
struct hook_link {
    char *target;
    char *link;
};
int hook_link_parse(const char *arg, struct hook_link *ret, struct err *e);
void hook_link_clear(struct hook_link *l);

/* The hook named by the one argument and the flags given to it: each hook takes its own flags
 * only (create-symlinks --link; update-ldcache --folder, --host-driver-version, --ldconfig),
 * every --link and --folder well formed, --ldconfig absolute. -EINVAL naming what is wrong. */
enum hook_verb { HOOK_CREATE_SYMLINKS, HOOK_UPDATE_LDCACHE };
struct hook_args {
    const char *verb; /* the argument: "create-symlinks", "update-ldcache" */
    const char *const *links;
    size_t n_links;
    const char *const *folders;
    size_t n_folders;
    const char *host_driver_version, *ldconfig; /* NULL: not given */
};
int hook_args_check(const struct hook_args *a, enum hook_verb *ret, struct err *e);

/* Compares driver versions ("550.90.07") number by number: <0, 0, >0. */
int hook_version_cmp(const char *a, const char *b);

/* CUDA forward compatibility: the version of the newest libcuda.so.<version> among the names of
 * the image's compat folder, into buf ("" when there is none), and whether the folder goes
 * first: its driver branch (the first number) is above the host driver's. */
bool hook_compat_pick(const char *const *names, size_t n, const char *host_version, char *buf,
                      size_t len);

/* update-ldcache's plan: the folders the loader is to search, in order (the compat folder, then
 * the driver's folders in the spec's order, each once, those that are folders in the image), and
 * the drop-in config listing them. */
struct hook_ldcache_in {
    const char *const *folders; /* --folder, in order */
    size_t n_folders;
    const bool *folder_present; /* [n_folders]: a folder in the image */
    bool compat;                /* HOOK_COMPAT_DIR first */
};
struct hook_ldcache_plan {
    const char *folders[HOOK_FOLDERS_MAX + 1]; /* borrowed from in (or HOOK_COMPAT_DIR) */
    size_t n_folders;
    char *conf; /* the text of HOOK_LDCONF (malloc'ed) */
};
int hook_ldcache_plan(const struct hook_ldcache_in *in, struct hook_ldcache_plan *ret,
                      struct err *e);
void hook_ldcache_plan_clear(struct hook_ldcache_plan *p);

#endif
