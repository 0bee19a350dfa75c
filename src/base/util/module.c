/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop's own shared modules, found beside the executable or under its install prefix
 * (util.h: module_open). */
#include <dlfcn.h>
#include <limits.h>
#include <string.h>

#include "util.h"

/* dlerror's text without the path it starts with, when it does ("PATH: why"). */
static const char *dl_reason(const char *path, const char *why)
{
    if (!why)
        return "unknown dlopen error";
    size_t n = strlen(path);
    if (strncmp(why, path, n) == 0 && why[n] == ':' && why[n + 1] == ' ')
        return why + n + 2;
    return why;
}

int module_open(const char *name, const char *env_name, void **ret, char **ret_path, struct err *e)
{
    char paths[2][PATH_MAX];
    size_t np = 0;
    const char *forced = env_name ? env_get(env_name) : NULL;
    if (forced) {
        if (strlcpy_s(paths[0], forced, sizeof(paths[0])) >= sizeof(paths[0]))
            return err_set(e, -ENAMETOOLONG, "loading %s: $%s is too long", name, env_name);
        np = 1;
    } else {
        char dir[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
        if (n <= 0)
            return err_errno(e, -errno, "loading %s: readlink /proc/self/exe", name);
        dir[n] = '\0';
        char *slash = strrchr(dir, '/');
        if (!slash)
            return err_set(e, -EINVAL, "loading %s: /proc/self/exe is \"%s\"", name, dir);
        *slash = '\0';
        int a = snprintf(paths[0], sizeof(paths[0]), "%s/%s", dir, name);
        /* <prefix>/bin/gpuop -> <prefix>/lib/gpuop/NAME */
        slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        int b = snprintf(paths[1], sizeof(paths[1]), "%s/" MODULE_LIBDIR "/%s", dir, name);
        if (a < 0 || (size_t)a >= sizeof(paths[0]) || b < 0 || (size_t)b >= sizeof(paths[1]))
            return err_set(e, -ENAMETOOLONG, "loading %s: the executable's path is too long", name);
        np = 2;
    }
    char tried[ERR_MSG_MAX];
    size_t used = 0;
    tried[0] = '\0';
    for (size_t i = 0; i < np; i++) {
        void *h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            *ret = h;
            if (ret_path)
                *ret_path = xstrdup(paths[i]);
            return 0;
        }
        const char *why = dl_reason(paths[i], dlerror());
        int w = snprintf(tried + used, sizeof(tried) - used, "%s\"%s\": %s", i ? "; " : "",
                         paths[i], why);
        if (w > 0)
            used += (size_t)w < sizeof(tried) - used ? (size_t)w : sizeof(tried) - used - 1;
    }
    if (forced)
        return err_set(e, -ELIBACC, "loading %s from $%s: %s", name, env_name, tried);
    if (env_name)
        return err_set(e, -ELIBACC, "loading %s: %s (or set $%s to its path)", name, tried,
                       env_name);
    return err_set(e, -ELIBACC, "loading %s: %s", name, tried);
}
