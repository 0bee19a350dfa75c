/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop cdi-hook`: the shell of cdi-hook.h. Reads the container's root (the state on stdin and
 * the bundle's config.json, or --container-spec), reads what the plan needs from the image, and
 * does it: links made, the loader's drop-in written, the host's ldconfig run chrooted in the
 * container's root. Every path in the container's root is resolved inside it first.
 */
#include <assert.h>
#include <dirent.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi-hook.h"
#include "svc.h"

#define COMP "cdi-hook"

enum hook_verb { VERB_CREATE_SYMLINKS, VERB_UPDATE_LDCACHE };

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
    if (n != 1)
        return err_set(e, -EINVAL, "a hook is needed: create-symlinks or update-ldcache");
    if (strcmp(args[0], "create-symlinks") == 0)
        h->verb = VERB_CREATE_SYMLINKS;
    else if (strcmp(args[0], "update-ldcache") == 0)
        h->verb = VERB_UPDATE_LDCACHE;
    else
        return err_set(e, -EINVAL, "unknown hook \"%s\" (create-symlinks, update-ldcache)",
                       args[0]);
    bool ld = h->verb == VERB_UPDATE_LDCACHE;
    if (!ld && (h->folders.n || h->host_driver_version || h->ldconfig))
        return err_set(e, -EINVAL,
                       "create-symlinks takes --link only (--folder, --host-driver-version and "
                       "--ldconfig are update-ldcache's)");
    if (ld && h->links.n)
        return err_set(e, -EINVAL, "update-ldcache takes no --link (create-symlinks' flag)");
    for (size_t i = 0; i < h->links.n; i++) {
        struct hook_link l = {0};
        int r = hook_link_parse(h->links.v[i], &l, e);
        hook_link_clear(&l);
        if (r < 0)
            return r;
    }
    for (size_t i = 0; i < h->folders.n; i++) {
        int r = hook_path_check("--folder", h->folders.v[i], e);
        if (r < 0)
            return r;
    }
    if (h->ldconfig && h->ldconfig[0] != '/')
        return err_set(e, -EINVAL, "--ldconfig \"%s\": not an absolute path", h->ldconfig);
    return 0;
}

/* ---- the container's root ----------------------------------------------------------------- */

static int read_rootfs(const struct hook *h, char **ret, struct err *e)
{
    _cleanup_free_ char *bundle = NULL, *config = NULL, *text = NULL;
    size_t len = 0;
    int r;
    if (h->container_spec) {
        config = xstrdup(h->container_spec);
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

/* path (inside the container) resolved in its root, as this process reaches it. */
static int in_root(const char *rootfs, const char *path, char *buf, size_t n, struct err *e)
{
    int r = file_root_resolve(rootfs, path, buf, n);
    if (r < 0)
        return err_errno(e, r, "\"%s\" in the container's root", path);
    return 0;
}

static bool is_dir_in(const char *rootfs, const char *path)
{
    char p[PATH_MAX];
    struct err e = {0};
    struct stat st;
    return in_root(rootfs, path, p, sizeof(p), &e) == 0 && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- create-symlinks ---------------------------------------------------------------------- */

static int create_link(const char *rootfs, const struct hook_link *l, struct err *e)
{
    /* the link's folder resolved in the root (a missing part is created there); the link itself
     * is never followed */
    const char *slash = strrchr(l->link, '/');
    _cleanup_free_ char *dir =
        slash == l->link ? xstrdup("/") : xstrndup(l->link, (size_t)(slash - l->link));
    char pdir[PATH_MAX];
    int r = in_root(rootfs, dir, pdir, sizeof(pdir), e);
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

static int create_symlinks(const struct hook *h, const char *rootfs, struct err *e)
{
    for (size_t i = 0; i < h->links.n; i++) {
        struct hook_link l = {0};
        int r = hook_link_parse(h->links.v[i], &l, e);
        if (r == 0)
            r = create_link(rootfs, &l, e);
        hook_link_clear(&l);
        if (r < 0)
            return r;
    }
    return 0;
}

/* ---- update-ldcache ----------------------------------------------------------------------- */

/* The image's CUDA forward-compatible libraries go first: a libcuda.so.<version> of a newer
 * driver branch than the host's in HOOK_COMPAT_DIR. */
static bool compat_wanted(const struct hook *h, const char *rootfs)
{
    if (!h->host_driver_version)
        return false;
    char pdir[PATH_MAX];
    struct err e = {0};
    if (in_root(rootfs, HOOK_COMPAT_DIR, pdir, sizeof(pdir), &e) < 0)
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
        if (in_root(rootfs, rel, p, sizeof(p), &e) < 0 || stat(p, &st) < 0 || !S_ISREG(st.st_mode))
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

static const char *find_ldconfig(const struct hook *h)
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

static int update_ldcache(const struct hook *h, const char *rootfs, struct err *e)
{
    if (!is_dir_in(rootfs, "/etc")) {
        log_info(COMP, "no /etc in the image: no loader cache to update", "root=%s", rootfs);
        return 0;
    }
    bool present[HOOK_FOLDERS_MAX];
    for (size_t i = 0; i < h->folders.n && i < HOOK_FOLDERS_MAX; i++)
        present[i] = is_dir_in(rootfs, h->folders.v[i]);
    struct hook_ldcache_in in = {.folders = h->folders.v,
                                 .n_folders = h->folders.n,
                                 .folder_present = present,
                                 .compat = compat_wanted(h, rootfs)};
    struct hook_ldcache_plan plan = {0};
    int r = hook_ldcache_plan(&in, &plan, e);
    if (r < 0)
        return r;
    /* the drop-in, where the image keeps them (so an ldconfig run in the container keeps the
     * folders); file_write_atomic renames onto the name, never writing through a link there */
    if (is_dir_in(rootfs, HOOK_LDCONF_DIR)) {
        char dir[PATH_MAX];
        _cleanup_free_ char *p = NULL;
        if ((r = in_root(rootfs, HOOK_LDCONF_DIR, dir, sizeof(dir), e)) == 0) {
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

static int hook_run(struct svc *s, struct err *e)
{
    struct hook *h = svc_state(s);
    _cleanup_free_ char *rootfs = NULL;
    int r = read_rootfs(h, &rootfs, e);
    if (r < 0)
        return r;
    if (h->verb == VERB_CREATE_SYMLINKS)
        return create_symlinks(h, rootfs, e);
    return update_ldcache(h, rootfs, e);
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
