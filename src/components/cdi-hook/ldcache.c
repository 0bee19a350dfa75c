/* SPDX-License-Identifier: Apache-2.0 */
/* cdi-hook's update-ldcache (cdi-hook-internal.h): the image's CUDA forward-compatible libraries
 * looked at, the loader's drop-in written, the host's ldconfig run chrooted in the root. */
#include <assert.h>
#include <dirent.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi-hook-internal.h"

#define COMP "cdi-hook"

/* The image's CUDA forward-compatible libraries go first: a libcuda.so.<version> of a newer
 * driver branch than the host's in HOOK_COMPAT_DIR. */
static bool compat_wanted(const struct hook_ldcache_args *h, const char *rootfs)
{
    if (!h->host_driver_version)
        return false;
    char pdir[PATH_MAX];
    struct err e = {0};
    if (hook_in_root(rootfs, HOOK_COMPAT_DIR, pdir, sizeof(pdir), &e) < 0)
        return false;
    _cleanup_(closedirp) DIR *d = opendir(pdir);
    if (!d)
        return false;
    const char *names[256];
    char *owned[256];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < ARRAY_SIZE(names)) {
        if (!str_has_prefix(de->d_name, "libcuda.so."))
            continue;
        /* a regular file once resolved in the root */
        _cleanup_free_ char *rel = xasprintf("%s/%s", HOOK_COMPAT_DIR, de->d_name);
        char p[PATH_MAX];
        struct stat st;
        if (hook_in_root(rootfs, rel, p, sizeof(p), &e) < 0 || stat(p, &st) < 0 ||
            !S_ISREG(st.st_mode))
            continue;
        owned[n] = xstrdup(de->d_name);
        names[n] = owned[n];
        n++;
    }
    char version[64];
    bool use = hook_compat_pick(names, n, h->host_driver_version, version, sizeof(version));
    for (size_t i = 0; i < n; i++)
        free(owned[i]);
    if (version[0])
        log_info(COMP, use ? "CUDA forward compatibility on" : "CUDA forward compatibility off",
                 "compat=%s driver=%s", version, h->host_driver_version);
    return use;
}

static const char *find_ldconfig(const struct hook_ldcache_args *h)
{
    static const char *const candidates[] = {"/sbin/ldconfig.real", "/sbin/ldconfig",
                                             "/usr/sbin/ldconfig"};
    if (h->ldconfig)
        return h->ldconfig;
    for (size_t i = 0; i < ARRAY_SIZE(candidates); i++)
        if (access(candidates[i], X_OK) == 0)
            return candidates[i];
    return NULL;
}

int hook_update_ldcache(const char *rootfs, const struct hook_ldcache_args *h, struct err *e)
{
    if (!hook_is_dir_in(rootfs, "/etc")) {
        log_info(COMP, "no /etc in the image: no loader cache to update", "root=%s", rootfs);
        return 0;
    }
    bool present[HOOK_FOLDERS_MAX];
    for (size_t i = 0; i < h->n_folders && i < HOOK_FOLDERS_MAX; i++)
        present[i] = hook_is_dir_in(rootfs, h->folders[i]);
    struct hook_ldcache_in in = {.folders = h->folders,
                                 .n_folders = h->n_folders,
                                 .folder_present = present,
                                 .compat = compat_wanted(h, rootfs)};
    struct hook_ldcache_plan plan = {0};
    int r = hook_ldcache_plan(&in, &plan, e);
    if (r < 0)
        return r;
    /* the drop-in, where the image keeps them (so an ldconfig run in the container keeps the
     * folders); file_write_atomic renames onto the name, never writing through a link there */
    if (hook_is_dir_in(rootfs, HOOK_LDCONF_DIR)) {
        char dir[PATH_MAX];
        _cleanup_free_ char *p = NULL;
        if ((r = hook_in_root(rootfs, HOOK_LDCONF_DIR, dir, sizeof(dir), e)) == 0) {
            p = xasprintf("%s/%s", dir, HOOK_LDCONF_NAME);
            r = file_write_atomic(p, plan.conf, strlen(plan.conf), 0644, e);
        }
        if (r < 0) {
            hook_ldcache_plan_clear(&plan);
            return err_prefix(e, "the loader's drop-in");
        }
    }
    const char *ldconfig = find_ldconfig(h);
    if (!ldconfig) {
        hook_ldcache_plan_clear(&plan);
        return err_set(e, -ENOENT,
                       "no ldconfig on the host (/sbin/ldconfig.real, /sbin/ldconfig, "
                       "/usr/sbin/ldconfig; --ldconfig names another)");
    }
    /* ldconfig -r ROOT chroots into the container's root: the image's config and folders are
     * read there; the folders named here come first in the cache, in this order */
    const char *argv[4 + HOOK_FOLDERS_MAX + 1];
    size_t n = 0;
    argv[n++] = ldconfig;
    argv[n++] = "-r";
    argv[n++] = rootfs;
    for (size_t i = 0; i < plan.n_folders; i++)
        argv[n++] = plan.folders[i];
    argv[n] = NULL;
    assert(n < ARRAY_SIZE(argv));
    r = proc_run(argv, NULL, e);
    if (r == 0)
        log_info(COMP, "loader cache updated", "root=%s folders=%zu compat=%s", rootfs,
                 plan.n_folders, in.compat ? "yes" : "no");
    hook_ldcache_plan_clear(&plan);
    return r;
}
