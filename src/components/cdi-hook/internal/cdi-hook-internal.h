/* SPDX-License-Identifier: Apache-2.0 */
/* cdi-hook's shell, shared by its files: the container's root (container-root.c) and
 * update-ldcache (ldcache.c); cdi-hook-main.c runs them. */
#ifndef GPUOP_CDI_HOOK_INTERNAL_H
#define GPUOP_CDI_HOOK_INTERNAL_H

#include "cdi-hook.h"

/* ---- container-root.c --------------------------------------------------------------------- */

/* The container's root: the bundle's config.json's root.path, the bundle read from the state
 * on stdin, or container_spec (a config.json) when given. A directory, or an error naming it. */
int hook_rootfs_read(const char *container_spec, char **ret, struct err *e);
/* path (inside the container) resolved in its root, as this process reaches it. */
int hook_in_root(const char *rootfs, const char *path, char *buf, size_t n, struct err *e);
/* Whether path is a directory once resolved in the root. */
bool hook_is_dir_in(const char *rootfs, const char *path);
/* create-symlinks: each --link made in the root (its folder created there; the link itself never
 * followed); a link already at LINK is left as the image has it. */
int hook_create_symlinks(const char *rootfs, const char *const *links, size_t n, struct err *e);

/* ---- ldcache.c ---------------------------------------------------------------------------- */

struct hook_ldcache_args {
    const char *const *folders;
    size_t n_folders;
    const char *host_driver_version; /* NULL: no CUDA forward compatibility */
    const char *ldconfig;            /* NULL: the host's, found */
};
/* update-ldcache: the drop-in written where the image keeps them, the loader's cache rebuilt with
 * the host's ldconfig chrooted in the root. An image without /etc: nothing to do. */
int hook_update_ldcache(const char *rootfs, const struct hook_ldcache_args *a, struct err *e);

#endif
