/* SPDX-License-Identifier: Apache-2.0 */
/* cdi-hook's container root (cdi-hook-internal.h): found from the state or the spec, paths
 * resolved inside it, create-symlinks' links made in it. */
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi-hook-internal.h"

#define COMP "cdi-hook"

int hook_rootfs_read(const char *container_spec, char **ret, struct err *e)
{
    _cleanup_free_ char *bundle = NULL, *config = NULL, *text = NULL;
    size_t len = 0;
    int r;
    if (container_spec) {
        config = xstrdup(container_spec);
        char *slash = strrchr(config, '/');
        bundle = slash && slash != config ? xstrndup(config, (size_t)(slash - config)) : NULL;
    } else {
        if ((r = fd_read_all(STDIN_FILENO, "stdin", HOOK_STATE_MAX, &text, &len, e)) < 0)
            return err_prefix(e, "container state");
        if ((r = hook_state_bundle(text, len, &bundle, e)) < 0)
            return r;
        config = xasprintf("%s/config.json", bundle);
        free(steal_ptr(&text));
    }
    if ((r = file_read_all(config, HOOK_CONFIG_MAX, &text, &len, e)) < 0)
        return r;
    _cleanup_free_ char *rootfs = NULL;
    if ((r = hook_config_rootfs(config, bundle, text, len, &rootfs, e)) < 0)
        return r;
    struct stat st;
    if (stat(rootfs, &st) < 0)
        return err_errno(e, -errno, "the container's root \"%s\"", rootfs);
    if (!S_ISDIR(st.st_mode))
        return err_set(e, -ENOTDIR, "the container's root \"%s\": not a directory", rootfs);
    *ret = steal_ptr(&rootfs);
    return 0;
}

int hook_in_root(const char *rootfs, const char *path, char *buf, size_t n, struct err *e)
{
    int r = file_root_resolve(rootfs, path, buf, n);
    if (r < 0)
        return err_errno(e, r, "\"%s\" in the container's root", path);
    return 0;
}

bool hook_is_dir_in(const char *rootfs, const char *path)
{
    char p[PATH_MAX];
    struct err e = {0};
    struct stat st;
    return hook_in_root(rootfs, path, p, sizeof(p), &e) == 0 && stat(p, &st) == 0 &&
           S_ISDIR(st.st_mode);
}

static int create_link(const char *rootfs, const struct hook_link *l, struct err *e)
{
    /* the link's folder resolved in the root (a missing part is created there); the link itself
     * is never followed */
    const char *slash = strrchr(l->link, '/');
    _cleanup_free_ char *dir =
        slash == l->link ? xstrdup("/") : xstrndup(l->link, (size_t)(slash - l->link));
    char pdir[PATH_MAX];
    int r = hook_in_root(rootfs, dir, pdir, sizeof(pdir), e);
    if (r < 0)
        return r;
    if ((r = mkdir_p(pdir, 0755)) < 0)
        return err_errno(e, r, "create \"%s\" in the container's root", dir);
    _cleanup_free_ char *p = xasprintf("%s/%s", pdir, slash + 1);
    struct stat st;
    if (lstat(p, &st) == 0) {
        char cur[PATH_MAX];
        ssize_t k = S_ISLNK(st.st_mode) ? readlink(p, cur, sizeof(cur) - 1) : -1;
        if (k >= 0 && (size_t)k < sizeof(cur) - 1) {
            cur[k] = 0;
            if (strcmp(cur, l->target) == 0)
                return 0;
        }
        log_info(COMP, "left as the image has it", "link=%s", l->link);
        return 0;
    }
    if (symlink(l->target, p) < 0)
        return err_errno(e, -errno, "link \"%s\" to \"%s\" in the container's root", l->link,
                         l->target);
    log_info(COMP, "link created", "link=%s target=%s", l->link, l->target);
    return 0;
}

int hook_create_symlinks(const char *rootfs, const char *const *links, size_t n, struct err *e)
{
    for (size_t i = 0; i < n; i++) {
        struct hook_link l = {0};
        int r = hook_link_parse(links[i], &l, e);
        if (r == 0)
            r = create_link(rootfs, &l, e);
        hook_link_clear(&l);
        if (r < 0)
            return r;
    }
    return 0;
}
