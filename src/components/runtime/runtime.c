/* SPDX-License-Identifier: Apache-2.0 */
/*
 * runtime: the pure core of `gpuop runtime` (runtime.h): runc's command line, the devices a
 * container asks for, and the CDI edit of its config.json.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define MAX_REQUESTED   1024
#define VISIBLE_DEVICES RUNTIME_VISIBLE_DEVICES
#define CDI_ANNOTATION  "cdi.k8s.io/"

/* ---- the command line --------------------------------------------------------------------- */

/* runc's global flags that take a value (urfave/cli: "--flag value" or "--flag=value"; Go's flag
 * syntax also accepts one dash). */
static const char *const runc_value_flags[] = {"root", "log",      "log-format",
                                               "criu", "rootless", NULL};
/* The wrapper's own flags: those that take a value ("--flag value" or "--flag=value"), and the
 * switches ("--flag" or "--flag=false"). */
static const char *const own_flags[] = {"runtime-path", "cdi-spec-dirs", "default-kind",
                                        "cdi-annotation-keys", NULL};
static const char *const own_switches[] = {"accept-nvidia-visible-devices-envvar-when-unprivileged",
                                           "accept-nvidia-visible-devices-as-volume-mounts", NULL};

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
        bool own_switch = in_list(own_switches, name) && str_has_prefix(argv[i], "--");
        bool own = own_switch || (in_list(own_flags, name) && str_has_prefix(argv[i], "--"));
        bool takes = (own && !own_switch) || (!own && in_list(runc_value_flags, name));
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

void runtime_request_clear(struct runtime_request *r)
{
    for (size_t i = 0; r->names && i < r->n; i++)
        free(r->names[i]);
    free(r->names);
    *r = (struct runtime_request){0};
}

/* The capabilities by number, as OCI names them (linux/capability.h). */
static const char *const cap_names[RUNTIME_CAP_LAST_KNOWN + 1] = {
    /* 21 is CAP_SYS_ADMIN (runtime_privileged) */
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
};

int runtime_policy_annotation_keys(struct runtime_policy *p, char *list, struct err *e)
{
    size_t n = 0;
    for (const char *k = list; k && *k;) {
        size_t len = strcspn(k, ",");
        if (len == 0)
            return err_set(e, -EINVAL, "\"%s\": an empty key prefix", list);
        for (size_t i = 0; i < len; i++)
            if (k[i] <= ' ' || k[i] > '~')
                return err_set(e, -EINVAL,
                               "\"%s\": a key prefix holds a blank or a control character", list);
        if (++n > RUNTIME_MAX_ANNOTATION_KEYS)
            return err_set(e, -EINVAL, "more than %d key prefixes", RUNTIME_MAX_ANNOTATION_KEYS);
        k += len + (k[len] == ',');
    }
    /* checked: split in place (a trailing comma ends the list) */
    p->n_annotation_keys = 0;
    char *save = NULL;
    for (char *k = list ? strtok_r(list, ",", &save) : NULL; k; k = strtok_r(NULL, ",", &save))
        p->annotation_keys[p->n_annotation_keys++] = k;
    return 0;
}

uint64_t runtime_status_bounding_set(const char *status_text)
{
    const char *p = status_text ? strstr(status_text, "\nCapBnd:") : NULL;
    if (!p)
        return RUNTIME_CAPS_KNOWN;
    p += strlen("\nCapBnd:");
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strspn(p, "0123456789abcdefABCDEF");
    uint64_t v = 0;
    if (n == 0 || n > 16 || hex_parse(p, n, &v) < 0)
        return RUNTIME_CAPS_KNOWN;
    return v;
}

bool runtime_privileged(const json_t *oci, uint64_t caps)
{
    const json_t *bounding = json_object_get(
        json_object_get(json_object_get(oci, "process"), "capabilities"), "bounding");
    if (!json_is_array(bounding))
        return false;
    caps &= RUNTIME_CAPS_KNOWN;
    if (!(caps & (UINT64_C(1) << 21))) /* CAP_SYS_ADMIN */
        caps = RUNTIME_CAPS_KNOWN;
    for (unsigned c = 0; c <= RUNTIME_CAP_LAST_KNOWN; c++) {
        if (!(caps & (UINT64_C(1) << c)))
            continue;
        bool found = false;
        size_t i;
        json_t *v;
        json_array_foreach (bounding, i, v) {
            if (streq_ptr(json_string_value(v), cap_names[c])) {
                found = true;
                break;
            }
        }
        if (!found)
            return false;
    }
    return true;
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

/* One item: a qualified name, or (with default_kind) a bare one. */
static int add_item(struct names *ns, const char *p, size_t len, const char *default_kind,
                    const char *from, struct err *e)
{
    if (default_kind && !memchr(p, '=', len)) {
        _cleanup_free_ char *q = xasprintf("%s=%.*s", default_kind, (int)len, p);
        return names_add(ns, q, strlen(q), from, e);
    }
    return names_add(ns, p, len, from, e);
}

/* Each comma-separated item of list, blanks around it trimmed. */
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
            int r = add_item(ns, p, len, default_kind, from, e);
            if (r < 0)
                return r;
        }
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

/* process.env of an OCI spec (an array, or NULL). */
static json_t *oci_env(const json_t *oci)
{
    return json_object_get(json_object_get(oci, "process"), "env");
}

/* The value of one process.env entry when it sets NVIDIA_VISIBLE_DEVICES, else NULL. */
static const char *visible_of(const json_t *entry)
{
    const char *s = json_string_value(entry);
    return s && str_has_prefix(s, VISIBLE_DEVICES "=") ? s + strlen(VISIBLE_DEVICES "=") : NULL;
}

/* The value of the last NVIDIA_VISIBLE_DEVICES in process.env, or NULL. */
static const char *visible_value(const json_t *oci)
{
    const char *visible = NULL;
    size_t i;
    json_t *v;
    json_array_foreach (oci_env(oci), i, v) {
        if (visible_of(v))
            visible = visible_of(v);
    }
    return visible;
}

/* Whether a value of NVIDIA_VISIBLE_DEVICES names devices itself. */
static bool visible_names_devices(const char *v)
{
    if (!v)
        return false;
    while (*v == ' ' || *v == '\t')
        v++;
    return *v && strcmp(v, "none") != 0 && strcmp(v, "void") != 0 &&
           strcmp(v, RUNTIME_VOLUME_MOUNTS_ROOT) != 0 &&
           strcmp(v, RUNTIME_VOLUME_MOUNTS_ROOT "/") != 0;
}

/* The device a mount names: the part of its destination under the volume-mount root, when its
 * source is /dev/null (what the kubelet mounts for the device plugin). Redundant slashes in the
 * destination are ignored; NULL otherwise. */
static char *mount_device(const json_t *m)
{
    const char *src = json_string_value(json_object_get(m, "source"));
    const char *dst = json_string_value(json_object_get(m, "destination"));
    if (!src || !dst || strcmp(src, "/dev/null") != 0)
        return NULL;
    /* dst with runs of '/' folded and a trailing '/' dropped */
    size_t n = strlen(dst);
    _cleanup_free_ char *clean = xmalloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (dst[i] != '/' || k == 0 || clean[k - 1] != '/')
            clean[k++] = dst[i];
    if (k > 1 && clean[k - 1] == '/')
        k--;
    clean[k] = 0;
    const char *root = RUNTIME_VOLUME_MOUNTS_ROOT "/";
    if (!str_has_prefix(clean, root) || !clean[strlen(root)])
        return NULL;
    return xstrdup(clean + strlen(root));
}

static bool key_trusted(const struct runtime_policy *p, const char *key)
{
    for (size_t i = 0; i < p->n_annotation_keys; i++)
        if (p->annotation_keys[i] && *p->annotation_keys[i] &&
            str_has_prefix(key, p->annotation_keys[i]))
            return true;
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int runtime_request_read(const json_t *oci, const struct runtime_policy *p,
                         struct runtime_request *ret, struct err *e)
{
    struct runtime_request rq = {.privileged = runtime_privileged(oci, p->privileged_caps)};
    struct names ns = {0};
    int r = 0;
    const char *visible = visible_value(oci);
    if (visible_names_devices(visible)) {
        if (rq.privileged || p->accept_envvar_unprivileged) {
            rq.env = RUNTIME_ENV_USED;
            r = add_list(&ns, visible, p->default_kind, "process.env " VISIBLE_DEVICES, e);
        } else {
            rq.env = RUNTIME_ENV_IGNORED;
        }
    }
    if (r >= 0 && p->accept_volume_mounts) {
        size_t i;
        json_t *m;
        json_array_foreach (json_object_get(oci, "mounts"), i, m) {
            _cleanup_free_ char *dev = mount_device(m);
            if (!dev)
                continue;
            _cleanup_free_ char *from = xasprintf("mounts[%zu] " RUNTIME_VOLUME_MOUNTS_ROOT, i);
            if ((r = add_item(&ns, dev, strlen(dev), p->default_kind, from, e)) < 0)
                break;
        }
    }
    /* Annotations in key order, so the order does not depend on how config.json was written. */
    json_t *an = json_object_get(oci, "annotations");
    _cleanup_free_ const char **keys = NULL;
    size_t n_keys = 0;
    const char *k;
    json_t *v;
    json_object_foreach (an, k, v) {
        if (key_trusted(p, k)) {
            keys = xrealloc(keys, (n_keys + 1) * sizeof(*keys));
            keys[n_keys++] = k;
        } else if (str_has_prefix(k, CDI_ANNOTATION)) {
            rq.n_ignored_annotations++;
        }
    }
    if (n_keys > 1)
        qsort(keys, n_keys, sizeof(*keys), cmp_str);
    for (size_t a = 0; r >= 0 && a < n_keys; a++) {
        _cleanup_free_ char *from = xasprintf("annotation %s", keys[a]);
        const char *val = json_string_value(json_object_get(an, keys[a]));
        if (!val)
            r = err_set(e, -EINVAL, "%s: expected a string", from);
        else
            r = add_list(&ns, val, NULL, from, e);
    }
    if (r < 0) {
        rq.names = ns.v;
        rq.n = ns.n;
        runtime_request_clear(&rq);
        return r;
    }
    rq.names = ns.v ? ns.v : xcalloc(1, sizeof(char *));
    rq.n = ns.n;
    *ret = rq;
    return 0;
}

void runtime_env_void(json_t *oci)
{
    json_t *env = oci_env(oci);
    size_t i;
    json_t *v;
    json_array_foreach (env, i, v) {
        if (visible_of(v))
            json_array_set_new(env, i, json_string(VISIBLE_DEVICES "=void"));
    }
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
