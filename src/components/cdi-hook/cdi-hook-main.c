/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop cdi-hook`: the shell of cdi-hook.h. The options, checked by the core; the container's
 * root read (container-root.c), then the hook done in it (container-root.c: links made;
 * ldcache.c: the loader's drop-in written, the host's ldconfig run chrooted in the root). Every
 * path in the container's root is resolved inside it first.
 */

#include "cdi-hook-internal.h"
#include "svc.h"

#define COMP "cdi-hook"

struct hook {
    struct svc_strings links;
    struct svc_strings folders;
    const char *host_driver_version;
    const char *ldconfig;
    const char *container_spec;
    enum hook_verb verb;
};

static const struct svc_option hook_options[] = {
    {.flag = "link",
     .kind = SVC_STRINGS,
     .off = offsetof(struct hook, links),
     .metavar = "TARGET::LINK",
     .help = "create-symlinks: a link at LINK (in the container) to TARGET; repeatable"},
    {.flag = "folder",
     .kind = SVC_STRINGS,
     .off = offsetof(struct hook, folders),
     .metavar = "DIR",
     .help = "update-ldcache: a folder of the driver's libraries (in the container), in the\n"
             "order the loader searches them; repeatable"},
    {.flag = "host-driver-version",
     .kind = SVC_STRING,
     .off = offsetof(struct hook, host_driver_version),
     .metavar = "VER",
     .help = "update-ldcache: the node's driver; the image's " HOOK_COMPAT_DIR " goes first\n"
             "when its libcuda is of a newer driver branch (none: never)"},
    {.flag = "ldconfig",
     .kind = SVC_STRING,
     .off = offsetof(struct hook, ldconfig),
     .metavar = "PATH",
     .help = "update-ldcache: the host's ldconfig (the first of /sbin/ldconfig.real,\n"
             "/sbin/ldconfig, /usr/sbin/ldconfig)"},
    {.flag = "container-spec",
     .kind = SVC_STRING,
     .off = offsetof(struct hook, container_spec),
     .metavar = "FILE",
     .help = "the container's config.json (default: the bundle's, from the state on stdin)"},
    {0},
};

static int hook_configure(struct svc *s, struct err *e)
{
    struct hook *h = svc_state(s);
    size_t n;
    const char *const *args = svc_args(s, &n);
    struct hook_args a = {.verb = n == 1 ? args[0] : NULL,
                          .links = (const char *const *)h->links.v,
                          .n_links = h->links.n,
                          .folders = (const char *const *)h->folders.v,
                          .n_folders = h->folders.n,
                          .host_driver_version = h->host_driver_version,
                          .ldconfig = h->ldconfig};
    return hook_args_check(&a, &h->verb, e);
}

static int hook_run(struct svc *s, struct err *e)
{
    struct hook *h = svc_state(s);
    _cleanup_free_ char *rootfs = NULL;
    int r = hook_rootfs_read(h->container_spec, &rootfs, e);
    if (r < 0)
        return r;
    if (h->verb == HOOK_CREATE_SYMLINKS)
        return hook_create_symlinks(rootfs, (const char *const *)h->links.v, h->links.n, e);
    struct hook_ldcache_args a = {.folders = (const char *const *)h->folders.v,
                                  .n_folders = h->folders.n,
                                  .host_driver_version = h->host_driver_version,
                                  .ldconfig = h->ldconfig};
    return hook_update_ldcache(rootfs, &a, e);
}

const struct svc_component cdi_hook_component = {
    .name = COMP,
    .usage = "Usage: gpuop cdi-hook create-symlinks --link TARGET::LINK...\n"
             "       gpuop cdi-hook update-ldcache [--host-driver-version VER] --folder DIR...\n\n"
             "The createContainer hooks of the node's CDI spec: the runtime runs them with the\n"
             "container's state on stdin, after its mounts, before it changes root.\n"
             "create-symlinks makes links in the container's root (libcuda.so); update-ldcache\n"
             "rebuilds its loader cache with the driver's folders first (the host's ldconfig,\n"
             "chrooted there), after the image's CUDA forward-compatible libraries when those\n"
             "are of a newer driver branch.\n",
    .options = {hook_options},
    .max_args = 1,
    .state_size = sizeof(struct hook),
    .configure = hook_configure,
    .run = hook_run,
};
