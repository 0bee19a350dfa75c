/* SPDX-License-Identifier: Apache-2.0 */
/* cdi-hook's pure core (cdi-hook.h): bytes and arguments in, decisions out; no I/O. */
#include <assert.h>
#include <jansson.h>
#include <limits.h>
#include <string.h>

#include "cdi-hook.h"

int hook_state_bundle(const char *text, size_t len, char **ret_bundle, struct err *e)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return err_set(e, -EINVAL, "container state (stdin): not JSON: %s (line %d)", je.text,
                       je.line);
    int r = 0;
    const char *b = json_string_value(json_object_get(root, "bundle"));
    if (!json_is_object(root))
        r = err_set(e, -EINVAL, "container state (stdin): not a JSON object");
    else if (!b || !*b)
        r = err_set(e, -EINVAL, "container state (stdin): bundle: missing");
    else if (b[0] != '/' || strlen(b) >= PATH_MAX)
        r = err_set(e, -EINVAL, "container state (stdin): bundle \"%.200s\": not an absolute path",
                    b);
    else
        *ret_bundle = xstrdup(b);
    json_decref(root);
    return r;
}

int hook_config_rootfs(const char *path, const char *bundle, const char *text, size_t len,
                       char **ret_rootfs, struct err *e)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root)
        return err_set(e, -EINVAL, "%s: not JSON: %s (line %d)", path, je.text, je.line);
    int r = 0;
    const char *p = json_string_value(json_object_get(json_object_get(root, "root"), "path"));
    if (!p || !*p)
        r = err_set(e, -EINVAL, "%s: root.path: missing", path);
    else if (p[0] != '/' && (!bundle || bundle[0] != '/'))
        r = err_set(e, -EINVAL, "%s: root.path \"%.200s\" is relative and no bundle is known", path,
                    p);
    else {
        char *rootfs = p[0] == '/' ? xstrdup(p) : xasprintf("%s/%s", bundle, p);
        if (strlen(rootfs) >= PATH_MAX) {
            free(rootfs);
            r = err_set(e, -ENAMETOOLONG, "%s: root.path: too long", path);
        } else {
            *ret_rootfs = rootfs;
        }
    }
    json_decref(root);
    return r;
}

int hook_path_check(const char *what, const char *path, struct err *e)
{
    size_t n = strlen(path);
    if (path[0] != '/')
        return err_set(e, -EINVAL, "%s \"%.200s\": not an absolute path", what, path);
    if (n >= PATH_MAX)
        return err_set(e, -ENAMETOOLONG, "%s: longer than %d bytes", what, PATH_MAX - 1);
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            return err_set(e, -EINVAL, "%s \"%.200s\": a control character", what, path);
    for (const char *c = path; c && *c;) {
        while (*c == '/')
            c++;
        size_t cl = strcspn(c, "/");
        if ((cl == 1 && c[0] == '.') || (cl == 2 && c[0] == '.' && c[1] == '.'))
            return err_set(e, -EINVAL, "%s \"%.200s\": a \".\" or \"..\" component", what, path);
        c += cl;
    }
    return 0;
}

int hook_link_parse(const char *arg, struct hook_link *ret, struct err *e)
{
    const char *sep = strstr(arg, "::");
    if (!sep || sep == arg || !sep[2])
        return err_set(e, -EINVAL, "--link \"%.200s\": not TARGET::LINK", arg);
    _cleanup_free_ char *target = xstrndup(arg, (size_t)(sep - arg));
    if (strlen(target) >= PATH_MAX)
        return err_set(e, -ENAMETOOLONG, "--link: the target is too long");
    for (const unsigned char *c = (const unsigned char *)target; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            return err_set(e, -EINVAL, "--link \"%.200s\": a control character", arg);
    int r = hook_path_check("--link", sep + 2, e);
    if (r < 0)
        return r;
    if (strcmp(sep + 2, "/") == 0)
        return err_set(e, -EINVAL, "--link \"%.200s\": the link cannot be /", arg);
    ret->target = steal_ptr(&target);
    ret->link = xstrdup(sep + 2);
    return 0;
}

void hook_link_clear(struct hook_link *l)
{
    free(l->target);
    free(l->link);
    l->target = l->link = NULL;
}

int hook_args_check(const struct hook_args *a, enum hook_verb *ret, struct err *e)
{
    enum hook_verb verb;
    if (!a->verb)
        return err_set(e, -EINVAL, "a hook is needed: create-symlinks or update-ldcache");
    if (strcmp(a->verb, "create-symlinks") == 0)
        verb = HOOK_CREATE_SYMLINKS;
    else if (strcmp(a->verb, "update-ldcache") == 0)
        verb = HOOK_UPDATE_LDCACHE;
    else
        return err_set(e, -EINVAL, "unknown hook \"%s\" (create-symlinks, update-ldcache)",
                       a->verb);
    bool ld = verb == HOOK_UPDATE_LDCACHE;
    if (!ld && (a->n_folders || a->host_driver_version || a->ldconfig))
        return err_set(e, -EINVAL,
                       "create-symlinks takes --link only (--folder, --host-driver-version and "
                       "--ldconfig are update-ldcache's)");
    if (ld && a->n_links)
        return err_set(e, -EINVAL, "update-ldcache takes no --link (create-symlinks' flag)");
    for (size_t i = 0; i < a->n_links; i++) {
        struct hook_link l = {0};
        int r = hook_link_parse(a->links[i], &l, e);
        hook_link_clear(&l);
        if (r < 0)
            return r;
    }
    for (size_t i = 0; i < a->n_folders; i++) {
        int r = hook_path_check("--folder", a->folders[i], e);
        if (r < 0)
            return r;
    }
    if (a->ldconfig && a->ldconfig[0] != '/')
        return err_set(e, -EINVAL, "--ldconfig \"%s\": not an absolute path", a->ldconfig);
    *ret = verb;
    return 0;
}

/* The next number of a version ("550" of "550.90.07"), *p moved past it and its dot. */
static unsigned long long next_number(const char **p)
{
    unsigned long long v = 0;
    while (**p >= '0' && **p <= '9') {
        if (v < (1ull << 60))
            v = v * 10 + (unsigned)(**p - '0');
        (*p)++;
    }
    if (**p == '.')
        (*p)++;
    return v;
}

int hook_version_cmp(const char *a, const char *b)
{
    while (*a || *b) {
        unsigned long long x = next_number(&a), y = next_number(&b);
        if (x != y)
            return x < y ? -1 : 1;
        /* anything but digits and dots ends the comparison */
        if ((*a && !(*a >= '0' && *a <= '9')) || (*b && !(*b >= '0' && *b <= '9')))
            break;
    }
    return 0;
}

static bool version_like(const char *s)
{
    if (!*s || *s == '.' || strlen(s) >= 64)
        return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || *s == '.'))
            return false;
    return true;
}

bool hook_compat_pick(const char *const *names, size_t n, const char *host_version, char *buf,
                      size_t len)
{
    const char *best = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!str_has_prefix(names[i], "libcuda.so."))
            continue;
        const char *v = names[i] + strlen("libcuda.so.");
        /* libcuda.so.1 is the link: a version has a dot */
        if (!version_like(v) || !strchr(v, '.'))
            continue;
        if (!best || hook_version_cmp(v, best) > 0)
            best = v;
    }
    if (len)
        strlcpy_s(buf, best ? best : "", len);
    if (!best || !host_version || !version_like(host_version))
        return false;
    const char *a = best, *b = host_version;
    return next_number(&a) > next_number(&b);
}

int hook_ldcache_plan(const struct hook_ldcache_in *in, struct hook_ldcache_plan *ret,
                      struct err *e)
{
    if (in->n_folders > HOOK_FOLDERS_MAX)
        return err_set(e, -E2BIG, "more than %d --folder", HOOK_FOLDERS_MAX);
    struct hook_ldcache_plan p = {0};
    for (size_t i = 0; i < in->n_folders; i++) {
        int r = hook_path_check("--folder", in->folders[i], e);
        if (r < 0)
            return r;
    }
    if (in->compat)
        p.folders[p.n_folders++] = HOOK_COMPAT_DIR;
    for (size_t i = 0; i < in->n_folders; i++) {
        bool seen = false;
        for (size_t k = 0; k < p.n_folders && !seen; k++)
            seen = strcmp(p.folders[k], in->folders[i]) == 0;
        if (!seen && (!in->folder_present || in->folder_present[i]))
            p.folders[p.n_folders++] = in->folders[i];
    }
    assert(p.n_folders <= HOOK_FOLDERS_MAX + 1);
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, (HOOK_FOLDERS_MAX + 2) * PATH_MAX);
    sbuf_adds(&b, "# gpuop cdi-hook update-ldcache: the GPU driver's library folders\n");
    for (size_t i = 0; i < p.n_folders; i++)
        sbuf_addf(&b, "%s\n", p.folders[i]);
    int r = sbuf_check_err(&b, e, "%s", HOOK_LDCONF);
    if (r < 0)
        return r;
    p.conf = sbuf_steal(&b);
    *ret = p;
    return 0;
}

void hook_ldcache_plan_clear(struct hook_ldcache_plan *p)
{
    free(p->conf);
    p->conf = NULL;
    p->n_folders = 0;
}
