/* SPDX-License-Identifier: Apache-2.0 */
/*
 * runtime: the pure core of `gpuop runtime` (runtime.h): runc's command line, the devices a
 * container asks for, and the CDI edit of its config.json.
 */
#include <string.h>

#include "runtime.h"

#define MAX_REQUESTED   1024
#define VISIBLE_DEVICES "NVIDIA_VISIBLE_DEVICES"
#define CDI_ANNOTATION  "cdi.k8s.io/"

/* ---- the command line --------------------------------------------------------------------- */

/* runc's global flags that take a value (urfave/cli: "--flag value" or "--flag=value"; Go's flag
 * syntax also accepts one dash). */
static const char *const runc_value_flags[] = {"root", "log",      "log-format",
                                               "criu", "rootless", NULL};
/* The wrapper's own flags; all take a value. */
static const char *const own_flags[] = {"runtime-path", "cdi-spec-dirs", "default-kind", NULL};

/* The flag's name without dashes and "=value" into name (bounded); *ret_eq the value after '='
 * or NULL. False when arg is not a flag. */
static bool flag_name(const char *arg, char *name, size_t n, const char **ret_eq)
{
    if (arg[0] != '-' || !arg[1] || strcmp(arg, "--") == 0)
        return false;
    const char *s = arg + (arg[1] == '-' ? 2 : 1);
    const char *eq = strchr(s, '=');
    size_t len = eq ? (size_t)(eq - s) : strlen(s);
    if (len >= n)
        len = n - 1;
    memcpy(name, s, len);
    name[len] = 0;
    *ret_eq = eq ? eq + 1 : NULL;
    return true;
}

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

void runtime_cmdline_clear(struct runtime_cmdline *c)
{
    free(c->own);
    free(c->pass);
    *c = (struct runtime_cmdline){0};
}

int runtime_cmdline_parse(int argc, char **argv, struct runtime_cmdline *ret, struct err *e)
{
    struct runtime_cmdline c = {0};
    c.own = xcalloc((size_t)argc + 2, sizeof(*c.own));
    c.pass = xcalloc((size_t)argc + 2, sizeof(*c.pass));
    c.own[c.n_own++] = "runtime";
    c.n_pass = 1; /* pass[0]: the runtime's path */
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        c.help = true;
    int i = 1;
    /* Global flags, up to the command. */
    for (; i < argc; i++) {
        char name[64];
        const char *val = NULL;
        if (!flag_name(argv[i], name, sizeof(name), &val))
            break;
        bool own = in_list(own_flags, name) && str_has_prefix(argv[i], "--");
        bool takes = own || in_list(runc_value_flags, name);
        bool separate = takes && !val; /* "--flag value": the value is the next word */
        if (separate) {
            if (i + 1 >= argc) {
                free(c.own), free(c.pass);
                return err_set(e, -EINVAL, "%s needs a value", argv[i]);
            }
            val = argv[i + 1];
        }
        if (strcmp(name, "log") == 0)
            c.log_path = val;
        else if (strcmp(name, "log-format") == 0)
            c.log_format = val;
        const char **to = own ? c.own : c.pass;
        int *n = own ? &c.n_own : &c.n_pass;
        to[(*n)++] = argv[i];
        if (separate)
            to[(*n)++] = argv[++i];
    }
    if (i < argc && strcmp(argv[i], "--") != 0)
        c.command = argv[i];
    /* The command and its arguments pass unchanged; create and run name the bundle. */
    for (int k = i; k < argc; k++)
        c.pass[c.n_pass++] = argv[k];
    for (int k = i + 1; runtime_command_edits(c.command) && k < argc; k++) {
        char name[64];
        const char *val = NULL;
        if (!flag_name(argv[k], name, sizeof(name), &val)) {
            if (strcmp(argv[k], "--") == 0)
                break;
            continue;
        }
        if (strcmp(name, "bundle") != 0 && strcmp(name, "b") != 0)
            continue;
        if (!val && k + 1 >= argc) {
            free(c.own), free(c.pass);
            return err_set(e, -EINVAL, "%s needs a value", argv[k]);
        }
        c.bundle = val ? val : argv[++k];
    }
    *ret = c;
    return 0;
}

bool runtime_command_edits(const char *command)
{
    return command && (strcmp(command, "create") == 0 || strcmp(command, "run") == 0);
}

/* ---- the request -------------------------------------------------------------------------- */

void runtime_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

struct names {
    char **v;
    size_t n;
};

static int names_add(struct names *ns, const char *name, size_t len, const char *from,
                     struct err *e)
{
    _cleanup_free_ char *q = xstrndup(name, len);
    size_t kind_len = 0;
    const char *dev = NULL;
    int r = cdi_qualified_split(q, &kind_len, &dev, e);
    if (r < 0)
        return err_prefix(e, "%s", from);
    for (size_t i = 0; i < ns->n; i++)
        if (strcmp(ns->v[i], q) == 0)
            return 0;
    if (ns->n >= MAX_REQUESTED)
        return err_set(e, -E2BIG, "%s: more than %d devices", from, MAX_REQUESTED);
    ns->v = xrealloc(ns->v, (ns->n + 2) * sizeof(*ns->v));
    ns->v[ns->n++] = steal_ptr(&q);
    ns->v[ns->n] = NULL;
    return 0;
}

/* Each comma-separated item of list: a qualified name, or (with default_kind) a bare name. */
static int add_list(struct names *ns, const char *list, const char *default_kind, const char *from,
                    struct err *e)
{
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t'))
            p++, len--;
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len) {
            int r;
            if (default_kind && !memchr(p, '=', len)) {
                _cleanup_free_ char *q = xasprintf("%s=%.*s", default_kind, (int)len, p);
                r = names_add(ns, q, strlen(q), from, e);
            } else {
                r = names_add(ns, p, len, from, e);
            }
            if (r < 0)
                return r;
        }
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

int runtime_requested_devices(const json_t *oci, const char *default_kind, char ***ret,
                              size_t *ret_n, struct err *e)
{
    struct names ns = {0};
    const char *visible = NULL;
    json_t *env = json_object_get(json_object_get(oci, "process"), "env");
    size_t i;
    json_t *v;
    json_array_foreach (env, i, v) {
        const char *s = json_string_value(v);
        if (s && str_has_prefix(s, VISIBLE_DEVICES "="))
            visible = s + strlen(VISIBLE_DEVICES "=");
    }
    int r = 0;
    if (visible && strcmp(visible, "none") != 0 && strcmp(visible, "void") != 0)
        r = add_list(&ns, visible, default_kind, "process.env " VISIBLE_DEVICES, e);
    /* Annotations in key order, so the order does not depend on how config.json was written. */
    json_t *an = json_object_get(oci, "annotations");
    const char **keys = NULL;
    size_t n_keys = 0;
    const char *k;
    json_object_foreach (an, k, v)
        if (str_has_prefix(k, CDI_ANNOTATION)) {
            keys = xrealloc(keys, (n_keys + 1) * sizeof(*keys));
            keys[n_keys++] = k;
        }
    for (size_t a = 0; a < n_keys; a++)
        for (size_t b = a + 1; b < n_keys; b++)
            if (strcmp(keys[b], keys[a]) < 0) {
                const char *t = keys[a];
                keys[a] = keys[b], keys[b] = t;
            }
    for (size_t a = 0; r >= 0 && a < n_keys; a++) {
        _cleanup_free_ char *from = xasprintf("annotation %s", keys[a]);
        const char *val = json_string_value(json_object_get(an, keys[a]));
        if (!val)
            r = err_set(e, -EINVAL, "%s: expected a string", from);
        else
            r = add_list(&ns, val, NULL, from, e);
    }
    free(keys);
    if (r < 0) {
        runtime_strv_free(ns.v);
        return r;
    }
    *ret = ns.v ? ns.v : xcalloc(1, sizeof(char *));
    *ret_n = ns.n;
    return 0;
}

/* ---- the edit ----------------------------------------------------------------------------- */

int runtime_edit_config(json_t *oci, const struct cdi_registry *reg, const char *const *names,
                        size_t n_names, cdi_stat_fn stat_fn, void *stat_ud, struct err *e)
{
    if (!json_is_object(oci))
        return err_set(e, -EINVAL, "config.json: expected an object");
    _cleanup_free_ const struct cdi_edits **edits = NULL;
    size_t n = 0;
    int r = cdi_registry_resolve(reg, names, n_names, &edits, &n, e);
    if (r < 0)
        return r;
    _cleanup_(json_decrefp) json_t *copy = json_deep_copy(oci);
    if ((r = cdi_oci_apply(copy, edits, n, stat_fn, stat_ud, e)) < 0)
        return r;
    json_object_clear(oci);
    json_object_update(oci, copy);
    return 0;
}
