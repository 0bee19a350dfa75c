/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-cdi: CDI specs (kl-cdi.h).
 *
 * Accepted: cdiVersion 0.3.0 to 0.8.0, 1.0.0 and 1.1.0 (the versions the CDI spec lists as
 * valid); kind "vendor/class" with the CDI package's name rules; devices[] with a name and
 * non-empty containerEdits; containerEdits (spec and device level) with env ("NAME=value"),
 * deviceNodes (path, hostPath), mounts (hostPath, containerPath, options), hooks (parsed and
 * checked, never run: kubelet-sim has no OCI runtime), and the other fields of the schema
 * (netDevices, intelRdt, additionalGids, annotations) checked for type only and not applied.
 *
 * Host paths: a spec on a simulated node names paths of that node's host, so mount sources and
 * device nodes are prefixed with the node root (a mount of /usr/lib/x/libcuda.so.1 binds
 * <root>/usr/lib/x/libcuda.so.1). deviceNodes without hostPath use path, as CDI does.
 */
#include <dirent.h>
#include <string.h>

#include "kl-cdi.h"
#include "kl-devices-internal.h"
#include "yamlcfg.h"

#define COMP          "kl-cdi"
#define CDI_MAX_BYTES (4u << 20)
#define CDI_MAX_FILES 256
#define CDI_NAME_MAX  256
#define CDI_CTX_MAX   320

struct kl_cdi_spec {
    char *path;
    char *kind;
    json_t *doc; /* validated: resolution trusts its shapes */
};

void kl_cdi_spec_free(struct kl_cdi_spec *s)
{
    if (!s)
        return;
    free(s->path);
    free(s->kind);
    json_decref(s->doc);
    free(s);
}
DEFINE_CLEANUP_FUNC(struct kl_cdi_spec, kl_cdi_spec_free)

/* ---- names ---------------------------------------------------------------------------------- */

static bool is_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_alnum(char c)
{
    return is_letter(c) || (c >= '0' && c <= '9');
}

/* The CDI parser's rules: a vendor starts with a letter, ends alphanumeric, holds letters,
 * digits, '-', '_', '.'; a class the same without '.'; a device name starts and ends
 * alphanumeric and may hold '-', '_', '.', ':'. */
static bool name_ok(const char *s, size_t n, const char *extra, bool first_letter)
{
    if (!n || !(first_letter ? is_letter(s[0]) : is_alnum(s[0])) || !is_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum(s[i]) && !strchr(extra, s[i]))
            return false;
    return true;
}

static bool kind_ok(const char *kind)
{
    const char *slash = strchr(kind, '/');
    return slash && name_ok(kind, (size_t)(slash - kind), "-_.", true) &&
           name_ok(slash + 1, strlen(slash + 1), "-_", true);
}

static bool device_name_ok(const char *s)
{
    return name_ok(s, strlen(s), "-_.:", false);
}

static const char *const cdi_versions[] = {"0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0",
                                           "0.8.0", "1.0.0", "1.1.0", NULL};

/* ---- validation ----------------------------------------------------------------------------- */

static int strings_array(json_t *obj, const char *key, const char *ctx, json_t **ret, struct err *e)
{
    json_t *arr = NULL;
    int r = cfg_array(obj, key, ctx, false, &arr, e);
    if (r < 0)
        return r;
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v)
        if (!json_is_string(v))
            return err_set(e, -EINVAL, "%s.%s[%zu]: expected a string, got %s", ctx, key, i,
                           cfg_type_name(v));
    *ret = arr;
    return 0;
}

static int check_abs(const char *v, const char *ctx, const char *key, struct err *e)
{
    if (!v || v[0] != '/')
        return err_set(e, -EINVAL, "%s.%s: \"%s\" is not an absolute path", ctx, key, v ? v : "");
    return 0;
}

/* A list of objects under key, each checked by fn(item, "<ctx>.<key>[i]"). */
static int each_object(json_t *obj, const char *key, const char *ctx,
                       int (*fn)(json_t *item, const char *ictx, struct err *e), size_t *ret_n,
                       struct err *e)
{
    json_t *arr = NULL;
    int r = cfg_array(obj, key, ctx, false, &arr, e);
    if (r < 0)
        return r;
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v) {
        char ictx[CDI_CTX_MAX];
        snprintf(ictx, sizeof(ictx), "%s.%s[%zu]", ctx, key, i);
        if (!json_is_object(v))
            return err_set(e, -EINVAL, "%s: expected an object, got %s", ictx, cfg_type_name(v));
        if ((r = fn(v, ictx, e)) < 0)
            return r;
    }
    *ret_n = json_array_size(arr);
    return 0;
}

static int check_node(json_t *o, const char *ctx, struct err *e)
{
    const char *path = NULL, *host = NULL, *s = NULL;
    int64_t n = 0;
    int r;
    if ((r = cfg_string(o, "path", ctx, true, &path, e)) < 0 ||
        (r = check_abs(path, ctx, "path", e)) < 0)
        return r;
    if ((r = cfg_string(o, "hostPath", ctx, false, &host, e)) < 0 ||
        (host && (r = check_abs(host, ctx, "hostPath", e)) < 0))
        return r;
    if ((r = cfg_string(o, "permissions", ctx, false, &s, e)) < 0 ||
        (s && s[strspn(s, "rwm")] != 0 &&
         (r = err_set(e, -EINVAL,
                      "%s.permissions: \"%s\": "
                      "only r, w and m",
                      ctx, s)) < 0))
        return r;
    if ((r = cfg_string(o, "type", ctx, false, &s, e)) < 0 ||
        (r = cfg_int64(o, "major", ctx, false, INT64_MIN, INT64_MAX, &n, e)) < 0 ||
        (r = cfg_int64(o, "minor", ctx, false, INT64_MIN, INT64_MAX, &n, e)) < 0 ||
        (r = cfg_int64(o, "uid", ctx, false, 0, UINT32_MAX, &n, e)) < 0 ||
        (r = cfg_int64(o, "gid", ctx, false, 0, UINT32_MAX, &n, e)) < 0 ||
        (r = cfg_int64(o, "fileMode", ctx, false, 0, 07777, &n, e)) < 0)
        return r;
    return 0;
}

static int check_mount(json_t *o, const char *ctx, struct err *e)
{
    const char *host = NULL, *cpath = NULL, *type = NULL;
    json_t *opts = NULL;
    int r;
    if ((r = cfg_string(o, "hostPath", ctx, true, &host, e)) < 0 ||
        (r = cfg_string(o, "containerPath", ctx, true, &cpath, e)) < 0 ||
        (r = check_abs(cpath, ctx, "containerPath", e)) < 0 ||
        (r = cfg_string(o, "type", ctx, false, &type, e)) < 0 ||
        (r = strings_array(o, "options", ctx, &opts, e)) < 0)
        return r;
    if (!*host)
        return err_set(e, -EINVAL, "%s.hostPath: empty", ctx);
    return 0;
}

static int check_hook(json_t *o, const char *ctx, struct err *e)
{
    static const char *const names[] = {
        "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
        NULL};
    const char *name = NULL, *path = NULL;
    json_t *arr = NULL;
    int64_t n = 0;
    int r;
    if ((r = cfg_string(o, "hookName", ctx, true, &name, e)) < 0 ||
        (r = cfg_string(o, "path", ctx, true, &path, e)) < 0 ||
        (r = strings_array(o, "args", ctx, &arr, e)) < 0 ||
        (r = strings_array(o, "env", ctx, &arr, e)) < 0 ||
        (r = cfg_int64(o, "timeout", ctx, false, 0, UINT32_MAX, &n, e)) < 0)
        return r;
    for (size_t i = 0; names[i]; i++)
        if (strcmp(names[i], name) == 0)
            return 0;
    return err_set(e, -EINVAL, "%s.hookName: \"%s\" is not a hook name", ctx, name);
}

static int check_netdev(json_t *o, const char *ctx, struct err *e)
{
    const char *s = NULL;
    int r;
    if ((r = cfg_string(o, "hostInterfaceName", ctx, true, &s, e)) < 0 ||
        (r = cfg_string(o, "name", ctx, true, &s, e)) < 0)
        return r;
    return 0;
}

/* containerEdits at ctx; *ret_empty when it edits nothing. */
static int check_edits(json_t *parent, const char *ctx, bool *ret_empty, struct err *e)
{
    json_t *ed = NULL;
    int r = cfg_object(parent, "containerEdits", ctx, false, &ed, e);
    if (r < 0)
        return r;
    *ret_empty = true;
    if (!ed)
        return 0;
    char ectx[CDI_CTX_MAX];
    snprintf(ectx, sizeof(ectx), "%s.containerEdits", ctx);
    json_t *env = NULL;
    if ((r = strings_array(ed, "env", ectx, &env, e)) < 0)
        return r;
    size_t i;
    json_t *v;
    json_array_foreach (env, i, v) {
        const char *s = json_string_value(v);
        if (!strchr(s, '=') || s[0] == '=')
            return err_set(e, -EINVAL, "%s.env[%zu]: \"%s\" is not NAME=value", ectx, i, s);
    }
    size_t n_nodes = 0, n_mounts = 0, n_hooks = 0, n_net = 0;
    json_t *gids = NULL, *rdt = NULL;
    if ((r = each_object(ed, "deviceNodes", ectx, check_node, &n_nodes, e)) < 0 ||
        (r = each_object(ed, "mounts", ectx, check_mount, &n_mounts, e)) < 0 ||
        (r = each_object(ed, "hooks", ectx, check_hook, &n_hooks, e)) < 0 ||
        (r = each_object(ed, "netDevices", ectx, check_netdev, &n_net, e)) < 0 ||
        (r = cfg_array(ed, "additionalGids", ectx, false, &gids, e)) < 0 ||
        (r = cfg_object(ed, "intelRdt", ectx, false, &rdt, e)) < 0)
        return r;
    json_array_foreach (gids, i, v)
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
            return err_set(e, -EINVAL, "%s.additionalGids[%zu]: not a group ID", ectx, i);
    *ret_empty = !json_array_size(env) && !n_nodes && !n_mounts && !n_hooks && !n_net &&
                 !json_array_size(gids) && !rdt;
    return 0;
}

static int check_annotations(json_t *o, const char *ctx, struct err *e)
{
    json_t *an = NULL;
    int r = cfg_object(o, "annotations", ctx, false, &an, e);
    if (r < 0 || !an)
        return r;
    const char *k;
    json_t *v;
    json_object_foreach (an, k, v)
        if (!json_is_string(v))
            return err_set(e, -EINVAL, "%s.annotations.%s: expected a string, got %s", ctx, k,
                           cfg_type_name(v));
    return 0;
}

int kl_cdi_spec_parse(const char *path, const char *text, size_t len, struct kl_cdi_spec **ret,
                      struct err *e)
{
    if (!path)
        path = "(spec)";
    if (len > CDI_MAX_BYTES)
        return err_set(e, -EFBIG, "%s: larger than %u bytes", path, CDI_MAX_BYTES);
    _cleanup_(json_decrefp) json_t *doc = NULL;
    size_t lead = 0;
    while (lead < len &&
           (text[lead] == ' ' || text[lead] == '\t' || text[lead] == '\r' || text[lead] == '\n'))
        lead++;
    int r;
    if (lead < len && text[lead] == '{') {
        json_error_t je;
        doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!doc)
            return err_set(e, -EINVAL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    } else if ((r = yaml_parse_one(text, len, path, &doc, e)) < 0) {
        return r;
    }
    if (!json_is_object(doc))
        return err_set(e, -EINVAL, "%s: expected an object, got %s", path, cfg_type_name(doc));
    static const char *const keys[] = {"cdiVersion", "kind",           "annotations",
                                       "devices",    "containerEdits", NULL};
    if ((r = cfg_known_keys(doc, path, keys, e)) < 0)
        return r;
    const char *ver = NULL, *kind = NULL;
    if ((r = cfg_string(doc, "cdiVersion", path, true, &ver, e)) < 0)
        return r;
    bool ver_ok = false;
    for (size_t i = 0; cdi_versions[i] && !ver_ok; i++)
        ver_ok = strcmp(cdi_versions[i], ver) == 0;
    if (!ver_ok)
        return err_set(e, -EINVAL,
                       "%s.cdiVersion: \"%s\" is not a supported version (0.3.0 to "
                       "0.8.0, 1.0.0, 1.1.0)",
                       path, ver);
    if ((r = cfg_string(doc, "kind", path, true, &kind, e)) < 0)
        return r;
    if (!kind_ok(kind))
        return err_set(e, -EINVAL, "%s.kind: \"%s\" is not vendor/class", path, kind);
    bool empty = true;
    json_t *devs = NULL;
    if ((r = check_annotations(doc, path, e)) < 0 || (r = check_edits(doc, path, &empty, e)) < 0 ||
        (r = cfg_array(doc, "devices", path, true, &devs, e)) < 0)
        return r;
    size_t i;
    json_t *dv;
    json_array_foreach (devs, i, dv) {
        char ctx[CDI_CTX_MAX];
        snprintf(ctx, sizeof(ctx), "%s: devices[%zu]", path, i);
        const char *name = NULL;
        if (!json_is_object(dv))
            return err_set(e, -EINVAL, "%s: expected an object, got %s", ctx, cfg_type_name(dv));
        static const char *const dkeys[] = {"name", "annotations", "containerEdits", NULL};
        if ((r = cfg_known_keys(dv, ctx, dkeys, e)) < 0 ||
            (r = cfg_string(dv, "name", ctx, true, &name, e)) < 0)
            return r;
        if (!device_name_ok(name) || strlen(name) > CDI_NAME_MAX)
            return err_set(e, -EINVAL, "%s.name: \"%s\" is not a device name", ctx, name);
        for (size_t k = 0; k < i; k++)
            if (strcmp(json_string_value(json_object_get(json_array_get(devs, k), "name")), name) ==
                0)
                return err_set(e, -EINVAL, "%s.name: \"%s\" is defined twice", ctx, name);
        if ((r = check_annotations(dv, ctx, e)) < 0 || (r = check_edits(dv, ctx, &empty, e)) < 0)
            return r;
        if (empty)
            return err_set(e, -EINVAL, "%s.containerEdits: a device must edit something", ctx);
    }
    struct kl_cdi_spec *s = xcalloc(1, sizeof(*s));
    s->path = xstrdup(path);
    s->kind = xstrdup(kind);
    s->doc = steal_ptr(&doc);
    *ret = s;
    return 0;
}

/* ---- resolution ----------------------------------------------------------------------------- */

static json_t *spec_device(const struct kl_cdi_spec *s, const char *name)
{
    size_t i;
    json_t *dv;
    json_array_foreach (json_object_get(s->doc, "devices"), i, dv)
        if (strcmp(json_string_value(json_object_get(dv, "name")), name) == 0)
            return dv;
    return NULL;
}

static char *host_path(const char *root, const char *p)
{
    bool no_root = !root || !*root || strcmp(root, "/") == 0;
    return no_root ? xstrdup(p) : xasprintf("%s%s%s", root, p[0] == '/' ? "" : "/", p);
}

static void apply_edits(const char *root, json_t *parent, struct kl_alloc *a)
{
    json_t *ed = json_object_get(parent, "containerEdits");
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get(ed, "env"), i, v) {
        const char *s = json_string_value(v);
        const char *eq = strchr(s, '=');
        _cleanup_free_ char *name = xstrndup(s, (size_t)(eq - s));
        kl_alloc_setenv(a, name, eq + 1);
    }
    json_array_foreach (json_object_get(ed, "deviceNodes"), i, v) {
        const char *hp = json_string_value(json_object_get(v, "hostPath"));
        kl_alloc_add_device_node(
            a, host_path(root, hp ? hp : json_string_value(json_object_get(v, "path"))));
    }
    json_array_foreach (json_object_get(ed, "mounts"), i, v) {
        bool ro = false;
        size_t k;
        json_t *o;
        json_array_foreach (json_object_get(v, "options"), k, o)
            ro |= strcmp(json_string_value(o), "ro") == 0;
        kl_alloc_add_mount(a, host_path(root, json_string_value(json_object_get(v, "hostPath"))),
                           xstrdup(json_string_value(json_object_get(v, "containerPath"))), ro);
    }
}

struct spec_set {
    struct kl_cdi_spec **s;
    size_t n;
    struct sbuf broken; /* "<error>; ..." of specs that did not parse */
};

static void spec_set_clear(struct spec_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        kl_cdi_spec_free(set->s[i]);
    free(set->s);
    sbuf_free(&set->broken);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads one directory's *.json / *.yaml / *.yml in name order. */
static void load_dir(const char *dir, struct spec_set *set)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    char *names[CDI_MAX_FILES];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(dp)) && n < CDI_MAX_FILES)
        if (de->d_name[0] != '.' &&
            (str_has_suffix(de->d_name, ".json") || str_has_suffix(de->d_name, ".yaml") ||
             str_has_suffix(de->d_name, ".yml")))
            names[n++] = xstrdup(de->d_name);
    closedir(dp);
    qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, names[i]);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        struct err e = {0};
        struct kl_cdi_spec *s = NULL;
        free(names[i]);
        if (file_read_all(path, CDI_MAX_BYTES, &text, &len, &e) < 0 ||
            kl_cdi_spec_parse(path, text, len, &s, &e) < 0) {
            log_warn(COMP, "CDI spec skipped", "error=\"%s\"", err_msg(&e));
            sbuf_addf(&set->broken, "%s%s", set->broken.len ? "; " : "", err_msg(&e));
            continue;
        }
        set->s = xrealloc(set->s, (set->n + 1) * sizeof(*set->s));
        set->s[set->n++] = s;
    }
}

int kl_cdi_resolve(const char *root, const char *const *names, struct kl_alloc *a, struct err *e)
{
    if (!names || !names[0])
        return 0;
    _cleanup_(spec_set_clear) struct spec_set set = {0};
    sbuf_init(&set.broken, 2048);
    static const char *const dirs[] = {"/etc/cdi", "/var/run/cdi"};
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
        _cleanup_free_ char *dir = host_path(root, dirs[i]);
        load_dir(dir, &set);
    }
    /* Each name: the last spec (the later directory, then the later file) that defines it. */
    size_t n = 0;
    while (names[n])
        n++;
    _cleanup_free_ const struct kl_cdi_spec **owner = xcalloc(n + 1, sizeof(*owner));
    _cleanup_free_ json_t **dev = xcalloc(n + 1, sizeof(*dev));
    _cleanup_sbuf_ struct sbuf unknown;
    sbuf_init(&unknown, 4096);
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(names[i], '=');
        for (size_t k = set.n; eq && k-- > 0 && !owner[i];) {
            const struct kl_cdi_spec *s = set.s[k];
            if (strlen(s->kind) != (size_t)(eq - names[i]) ||
                strncmp(s->kind, names[i], (size_t)(eq - names[i])) != 0)
                continue;
            if ((dev[i] = spec_device(s, eq + 1)))
                owner[i] = s;
        }
        if (!owner[i])
            sbuf_addf(&unknown, "%s%s", unknown.len ? ", " : "", names[i]);
    }
    if (unknown.len) {
        if (sbuf_check(&unknown) < 0)
            return err_set(e, -ENOENT, "unresolvable CDI devices (too many to name)");
        return err_set(e, -ENOENT, "unresolvable CDI devices %s%s%s", unknown.data,
                       set.broken.len ? "; specs that did not parse: " : "",
                       set.broken.len ? set.broken.data : "");
    }
    /* Spec-level edits once per spec used, then each device's, in the order named. */
    for (size_t i = 0; i < n; i++) {
        bool first = true;
        for (size_t k = 0; k < i && first; k++)
            first = owner[k] != owner[i];
        if (first)
            apply_edits(root, owner[i]->doc, a);
    }
    for (size_t i = 0; i < n; i++) {
        bool first = true;
        for (size_t k = 0; k < i && first; k++)
            first = dev[k] != dev[i];
        if (first)
            apply_edits(root, dev[i], a);
    }
    return 0;
}
