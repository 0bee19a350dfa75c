/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi: one spec file, parsed and checked (cdi.h). The document is read into jansson (JSON, or
 * YAML through yamlcfg), checked field by field with yamlcfg's accessors, whose errors name the
 * field path, and turned into the read-only edit structs; their strings point into the kept
 * document.
 */
#include <string.h>

#include "cdi.h"
#include "yamlcfg.h"

#define CDI_CTX_MAX 320

struct cdi_device {
    const char *name;
    struct cdi_edits edits;
};

struct cdi_spec {
    char *path;
    const char *kind, *version; /* in doc */
    json_t *doc;
    struct cdi_edits edits;
    struct cdi_device *devices;
    size_t n_devices;
};

static void edits_clear(struct cdi_edits *ed)
{
    for (size_t i = 0; i < ed->n_mounts; i++)
        free((void *)ed->mounts[i].options);
    for (size_t i = 0; i < ed->n_hooks; i++) {
        free((void *)ed->hooks[i].args);
        free((void *)ed->hooks[i].env);
    }
    free((void *)ed->env);
    free((void *)ed->device_nodes);
    free((void *)ed->mounts);
    free((void *)ed->hooks);
    free((void *)ed->additional_gids);
    *ed = (struct cdi_edits){0};
}

void cdi_spec_free(struct cdi_spec *s)
{
    if (!s)
        return;
    edits_clear(&s->edits);
    for (size_t i = 0; i < s->n_devices; i++)
        edits_clear(&s->devices[i].edits);
    free(s->devices);
    free(s->path);
    json_decref(s->doc);
    free(s);
}

/* ---- names ---------------------------------------------------------------------------------- */

static bool is_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_alnum(char c)
{
    return is_letter(c) || (c >= '0' && c <= '9');
}

/* The CDI library's rules: a vendor starts with a letter, ends alphanumeric, holds letters,
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

static bool kind_ok_n(const char *kind, size_t n)
{
    const char *slash = memchr(kind, '/', n);
    return slash && name_ok(kind, (size_t)(slash - kind), "-_.", true) &&
           name_ok(slash + 1, n - (size_t)(slash + 1 - kind), "-_", true);
}

bool cdi_kind_valid(const char *kind)
{
    return kind && kind_ok_n(kind, strlen(kind));
}

bool cdi_device_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    return n <= CDI_NAME_MAX && name_ok(name, n, "-_.:", false);
}

int cdi_qualified_split(const char *qname, size_t *ret_kind_len, const char **ret_name,
                        struct err *e)
{
    const char *eq = qname ? strchr(qname, '=') : NULL;
    if (!eq)
        return err_set(e, -EINVAL, "\"%s\": not a qualified device name (vendor/class=name)",
                       qname ? qname : "");
    if (!kind_ok_n(qname, (size_t)(eq - qname)))
        return err_set(e, -EINVAL, "\"%s\": \"%.*s\" is not vendor/class", qname, (int)(eq - qname),
                       qname);
    if (!cdi_device_name_valid(eq + 1))
        return err_set(e, -EINVAL, "\"%s\": \"%s\" is not a device name", qname, eq + 1);
    *ret_kind_len = (size_t)(eq - qname);
    *ret_name = eq + 1;
    return 0;
}

static const char *const cdi_versions[] = {"0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0",
                                           "0.8.0", "1.0.0", "1.1.0", NULL};

/* Index in cdi_versions (ordered), or -1. */
static int version_rank(const char *v)
{
    for (int i = 0; cdi_versions[i]; i++)
        if (strcmp(cdi_versions[i], v) == 0)
            return i;
    return -1;
}

/* ---- checks that fill the model ------------------------------------------------------------- */

/* A string array under key (absent: n 0), copied as pointers into the document. */
static int strings_array(json_t *obj, const char *key, const char *ctx, const char *const **ret,
                         size_t *ret_n, struct err *e)
{
    json_t *arr = NULL;
    int r = cfg_array(obj, key, ctx, false, &arr, e);
    if (r < 0)
        return r;
    size_t i, n = json_array_size(arr);
    json_t *v;
    json_array_foreach (arr, i, v)
        if (!json_is_string(v))
            return err_set(e, -EINVAL, "%s.%s[%zu]: expected a string, got %s", ctx, key, i,
                           cfg_type_name(v));
    const char **out = n ? xcalloc(n, sizeof(*out)) : NULL;
    json_array_foreach (arr, i, v)
        out[i] = json_string_value(v);
    *ret = out;
    *ret_n = n;
    return 0;
}

static int check_abs(const char *v, const char *ctx, const char *key, struct err *e)
{
    if (!v || v[0] != '/')
        return err_set(e, -EINVAL, "%s.%s: \"%s\" is not an absolute path", ctx, key, v ? v : "");
    return 0;
}

static int check_env(const char *const *env, size_t n, const char *ctx, struct err *e)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr(env[i], '=') || env[i][0] == '=')
            return err_set(e, -EINVAL, "%s.env[%zu]: \"%s\" is not NAME=value", ctx, i, env[i]);
    return 0;
}

/* An optional integer into *v, with *has set when present. */
static int opt_int(json_t *o, const char *key, const char *ctx, int64_t min, int64_t max,
                   int64_t *v, bool *has, struct err *e)
{
    int r = cfg_int64(o, key, ctx, false, min, max, v, e);
    if (r < 0)
        return r;
    *has = r == 1;
    return 0;
}

static int check_node(json_t *o, const char *ctx, void *item, bool *needs_050, struct err *e)
{
    struct cdi_device_node *d = item;
    int64_t mode = 0, uid = 0, gid = 0;
    static const char *const keys[] = {"path",     "hostPath",    "type", "major", "minor",
                                       "fileMode", "permissions", "uid",  "gid",   NULL};
    int r;
    if ((r = cfg_known_keys(o, ctx, keys, e)) < 0 ||
        (r = cfg_string(o, "path", ctx, true, &d->path, e)) < 0 ||
        (r = check_abs(d->path, ctx, "path", e)) < 0)
        return r;
    if ((r = cfg_string(o, "hostPath", ctx, false, &d->host_path, e)) < 0 ||
        (d->host_path && (r = check_abs(d->host_path, ctx, "hostPath", e)) < 0))
        return r;
    *needs_050 |= d->host_path != NULL;
    if ((r = cfg_string(o, "permissions", ctx, false, &d->permissions, e)) < 0)
        return r;
    if (d->permissions && d->permissions[strspn(d->permissions, "rwm")] != 0)
        return err_set(e, -EINVAL, "%s.permissions: \"%s\": only r, w and m", ctx, d->permissions);
    if ((r = cfg_string(o, "type", ctx, false, &d->type, e)) < 0)
        return r;
    if (d->type && (strlen(d->type) != 1 || !strchr("bcup", d->type[0])))
        return err_set(e, -EINVAL, "%s.type: \"%s\" is not b, c, u or p", ctx, d->type);
    if ((r = opt_int(o, "major", ctx, INT64_MIN, INT64_MAX, &d->major, &d->has_major, e)) < 0 ||
        (r = opt_int(o, "minor", ctx, INT64_MIN, INT64_MAX, &d->minor, &d->has_minor, e)) < 0 ||
        (r = opt_int(o, "uid", ctx, 0, UINT32_MAX, &uid, &d->has_uid, e)) < 0 ||
        (r = opt_int(o, "gid", ctx, 0, UINT32_MAX, &gid, &d->has_gid, e)) < 0 ||
        (r = opt_int(o, "fileMode", ctx, 0, 07777, &mode, &d->has_file_mode, e)) < 0)
        return r;
    if (d->type && d->type[0] == 'p' && (d->has_major || d->has_minor))
        return err_set(e, -EINVAL, "%s: a fifo (type p) has no major or minor", ctx);
    d->uid = (uint32_t)uid;
    d->gid = (uint32_t)gid;
    d->file_mode = (uint32_t)mode;
    return 0;
}

static int check_mount(json_t *o, const char *ctx, void *item, bool *needs_050, struct err *e)
{
    (void)needs_050;
    struct cdi_mount *m = item;
    static const char *const keys[] = {"hostPath", "containerPath", "options", "type", NULL};
    int r;
    if ((r = cfg_known_keys(o, ctx, keys, e)) < 0 ||
        (r = cfg_string(o, "hostPath", ctx, true, &m->host_path, e)) < 0 ||
        (r = cfg_string(o, "containerPath", ctx, true, &m->container_path, e)) < 0 ||
        (r = check_abs(m->container_path, ctx, "containerPath", e)) < 0 ||
        (r = cfg_string(o, "type", ctx, false, &m->type, e)) < 0 ||
        (r = strings_array(o, "options", ctx, &m->options, &m->n_options, e)) < 0)
        return r;
    if (!*m->host_path)
        return err_set(e, -EINVAL, "%s.hostPath: empty", ctx);
    return 0;
}

static const char *const hook_names[] = {
    "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
    NULL};

static int check_hook(json_t *o, const char *ctx, void *item, bool *needs_050, struct err *e)
{
    (void)needs_050;
    struct cdi_hook *h = item;
    static const char *const keys[] = {"hookName", "path", "args", "env", "timeout", NULL};
    int r;
    if ((r = cfg_known_keys(o, ctx, keys, e)) < 0 ||
        (r = cfg_string(o, "hookName", ctx, true, &h->hook_name, e)) < 0 ||
        (r = cfg_string(o, "path", ctx, true, &h->path, e)) < 0 ||
        (r = strings_array(o, "args", ctx, &h->args, &h->n_args, e)) < 0 ||
        (r = strings_array(o, "env", ctx, &h->env, &h->n_env, e)) < 0 ||
        (r = check_env(h->env, h->n_env, ctx, e)) < 0 ||
        (r = opt_int(o, "timeout", ctx, 0, UINT32_MAX, &h->timeout, &h->has_timeout, e)) < 0)
        return r;
    for (size_t i = 0; hook_names[i]; i++)
        if (strcmp(hook_names[i], h->hook_name) == 0)
            return 0;
    return err_set(e, -EINVAL, "%s.hookName: \"%s\" is not a hook name", ctx, h->hook_name);
}

static int check_netdev(json_t *o, const char *ctx, void *item, bool *needs_050, struct err *e)
{
    (void)item, (void)needs_050;
    const char *s = NULL;
    static const char *const keys[] = {"hostInterfaceName", "name", NULL};
    int r;
    if ((r = cfg_known_keys(o, ctx, keys, e)) < 0 ||
        (r = cfg_string(o, "hostInterfaceName", ctx, true, &s, e)) < 0 ||
        (r = cfg_string(o, "name", ctx, true, &s, e)) < 0)
        return r;
    return 0;
}

typedef int (*item_fn)(json_t *o, const char *ctx, void *item, bool *needs_050, struct err *e);

static void mount_clear(void *item)
{
    free((void *)((struct cdi_mount *)item)->options);
}
static void hook_clear(void *item)
{
    struct cdi_hook *h = item;
    free((void *)h->args);
    free((void *)h->env);
}

/* A list of objects under key, each checked by fn into items[i] (items of size isz; isz 0:
 * checked only). On error what the items hold is released with clear (may be NULL). */
static int each_object(json_t *obj, const char *key, const char *ctx, item_fn fn,
                       void (*clear)(void *item), size_t isz, void **ret_items, size_t *ret_n,
                       bool *needs_050, struct err *e)
{
    json_t *arr = NULL;
    int r = cfg_array(obj, key, ctx, false, &arr, e);
    if (r < 0)
        return r;
    size_t i, n = json_array_size(arr);
    _cleanup_free_ char *items = isz && n ? xcalloc(n, isz) : NULL;
    json_t *v;
    json_array_foreach (arr, i, v) {
        char ictx[CDI_CTX_MAX];
        snprintf(ictx, sizeof(ictx), "%s.%s[%zu]", ctx, key, i);
        if (!json_is_object(v))
            r = err_set(e, -EINVAL, "%s: expected an object, got %s", ictx, cfg_type_name(v));
        else
            r = fn(v, ictx, items ? items + i * isz : NULL, needs_050, e);
        if (r < 0) {
            for (size_t k = 0; clear && items && k <= i; k++)
                clear(items + k * isz);
            return r;
        }
    }
    if (ret_items)
        *ret_items = steal_ptr(&items);
    *ret_n = n;
    return 0;
}

/* containerEdits of parent at ctx into ed (zeroed by the caller; on error the caller clears it);
 * *ret_empty when it edits nothing. */
static int check_edits(json_t *parent, const char *ctx, struct cdi_edits *ed, bool *ret_empty,
                       bool *needs_050, struct err *e)
{
    json_t *o = NULL;
    int r = cfg_object(parent, "containerEdits", ctx, false, &o, e);
    if (r < 0)
        return r;
    *ret_empty = true;
    if (!o)
        return 0;
    char ectx[CDI_CTX_MAX];
    snprintf(ectx, sizeof(ectx), "%s.containerEdits", ctx);
    static const char *const keys[] = {"env",        "deviceNodes",    "mounts",   "hooks",
                                       "netDevices", "additionalGids", "intelRdt", NULL};
    size_t n_net = 0;
    void *nodes = NULL, *mounts = NULL, *hooks = NULL;
    json_t *gids = NULL, *rdt = NULL;
    if ((r = cfg_known_keys(o, ectx, keys, e)) < 0 ||
        (r = strings_array(o, "env", ectx, &ed->env, &ed->n_env, e)) < 0 ||
        (r = check_env(ed->env, ed->n_env, ectx, e)) < 0)
        return r;
    r = each_object(o, "deviceNodes", ectx, check_node, NULL, sizeof(struct cdi_device_node),
                    &nodes, &ed->n_device_nodes, needs_050, e);
    ed->device_nodes = nodes;
    if (r < 0)
        return r;
    r = each_object(o, "mounts", ectx, check_mount, mount_clear, sizeof(struct cdi_mount), &mounts,
                    &ed->n_mounts, needs_050, e);
    ed->mounts = mounts;
    if (r < 0)
        return r;
    r = each_object(o, "hooks", ectx, check_hook, hook_clear, sizeof(struct cdi_hook), &hooks,
                    &ed->n_hooks, needs_050, e);
    ed->hooks = hooks;
    if (r < 0)
        return r;
    if ((r = each_object(o, "netDevices", ectx, check_netdev, NULL, 0, NULL, &n_net, needs_050,
                         e)) < 0 ||
        (r = cfg_array(o, "additionalGids", ectx, false, &gids, e)) < 0 ||
        (r = cfg_object(o, "intelRdt", ectx, false, &rdt, e)) < 0)
        return r;
    if (rdt) {
        static const char *const rkeys[] = {"closID",   "l3CacheSchema",    "memBwSchema",
                                            "schemata", "enableMonitoring", NULL};
        char rctx[CDI_CTX_MAX + 16];
        snprintf(rctx, sizeof(rctx), "%s.intelRdt", ectx);
        if ((r = cfg_known_keys(rdt, rctx, rkeys, e)) < 0)
            return r;
    }
    size_t i, n_gids = json_array_size(gids);
    json_t *v;
    json_array_foreach (gids, i, v)
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
            return err_set(e, -EINVAL, "%s.additionalGids[%zu]: not a group ID", ectx, i);
    if (n_gids) {
        uint32_t *g = xcalloc(n_gids, sizeof(*g));
        json_array_foreach (gids, i, v)
            g[i] = (uint32_t)json_integer_value(v);
        ed->additional_gids = g;
        ed->n_additional_gids = n_gids;
    }
    *ret_empty = !ed->n_env && !ed->n_device_nodes && !ed->n_mounts && !ed->n_hooks && !n_net &&
                 !n_gids && !rdt;
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

static int read_doc(const char *path, const char *text, size_t len, json_t **ret, struct err *e)
{
    size_t lead = 0;
    while (lead < len &&
           (text[lead] == ' ' || text[lead] == '\t' || text[lead] == '\r' || text[lead] == '\n'))
        lead++;
    if (lead < len && text[lead] == '{') {
        json_error_t je;
        json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!doc)
            return err_set(e, -EINVAL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        *ret = doc;
        return 0;
    }
    return yaml_parse_one(text, len, path, ret, e);
}

static int spec_check(struct cdi_spec *s, struct err *e)
{
    const char *path = s->path;
    json_t *doc = s->doc;
    if (!json_is_object(doc))
        return err_set(e, -EINVAL, "%s: expected an object, got %s", path, cfg_type_name(doc));
    static const char *const keys[] = {"cdiVersion", "kind",           "annotations",
                                       "devices",    "containerEdits", NULL};
    int r;
    if ((r = cfg_known_keys(doc, path, keys, e)) < 0 ||
        (r = cfg_string(doc, "cdiVersion", path, true, &s->version, e)) < 0)
        return r;
    int rank = version_rank(s->version);
    if (rank < 0)
        return err_set(e, -EINVAL,
                       "%s.cdiVersion: \"%s\" is not a supported version (0.3.0 to "
                       "0.8.0, 1.0.0, 1.1.0)",
                       path, s->version);
    if ((r = cfg_string(doc, "kind", path, true, &s->kind, e)) < 0)
        return r;
    if (!cdi_kind_valid(s->kind))
        return err_set(e, -EINVAL, "%s.kind: \"%s\" is not vendor/class", path, s->kind);
    bool empty = true, needs_050 = false;
    json_t *devs = NULL;
    if ((r = check_annotations(doc, path, e)) < 0 ||
        (r = check_edits(doc, path, &s->edits, &empty, &needs_050, e)) < 0 ||
        (r = cfg_array(doc, "devices", path, true, &devs, e)) < 0)
        return r;
    s->devices = json_array_size(devs) ? xcalloc(json_array_size(devs), sizeof(*s->devices)) : NULL;
    size_t i;
    json_t *dv;
    json_array_foreach (devs, i, dv) {
        char ctx[CDI_CTX_MAX];
        snprintf(ctx, sizeof(ctx), "%s: devices[%zu]", path, i);
        struct cdi_device *d = &s->devices[i];
        s->n_devices = i + 1; /* freed with the spec, even half-filled */
        if (!json_is_object(dv))
            return err_set(e, -EINVAL, "%s: expected an object, got %s", ctx, cfg_type_name(dv));
        static const char *const dkeys[] = {"name", "annotations", "containerEdits", NULL};
        if ((r = cfg_known_keys(dv, ctx, dkeys, e)) < 0 ||
            (r = cfg_string(dv, "name", ctx, true, &d->name, e)) < 0)
            return r;
        if (!cdi_device_name_valid(d->name))
            return err_set(e, -EINVAL, "%s.name: \"%s\" is not a device name", ctx, d->name);
        needs_050 |= d->name[0] >= '0' && d->name[0] <= '9';
        for (size_t k = 0; k < i; k++)
            if (strcmp(s->devices[k].name, d->name) == 0)
                return err_set(e, -EINVAL, "%s.name: \"%s\" is defined twice", ctx, d->name);
        if ((r = check_annotations(dv, ctx, e)) < 0 ||
            (r = check_edits(dv, ctx, &d->edits, &empty, &needs_050, e)) < 0)
            return r;
        if (empty)
            return err_set(e, -EINVAL, "%s.containerEdits: a device must edit something", ctx);
    }
    if (needs_050 && rank < version_rank("0.5.0"))
        return err_set(e, -EINVAL,
                       "%s.cdiVersion: \"%s\" is too low: hostPath on device nodes and device "
                       "names starting with a digit need 0.5.0",
                       path, s->version);
    return 0;
}

int cdi_spec_parse(const char *path, const char *text, size_t len, struct cdi_spec **ret,
                   struct err *e)
{
    if (!path)
        path = "(spec)";
    if (len > CDI_MAX_BYTES)
        return err_set(e, -EFBIG, "%s: larger than %u bytes", path, CDI_MAX_BYTES);
    _cleanup_(cdi_spec_freep) struct cdi_spec *s = xcalloc(1, sizeof(*s));
    s->path = xstrdup(path);
    int r = read_doc(path, text ? text : "", text ? len : 0, &s->doc, e);
    if (r < 0 || (r = spec_check(s, e)) < 0)
        return r;
    *ret = steal_ptr(&s);
    return 0;
}

int cdi_spec_load(const char *path, struct cdi_spec **ret, struct err *e)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = file_read_all(path, CDI_MAX_BYTES, &text, &len, e);
    if (r < 0)
        return r;
    return cdi_spec_parse(path, text, len, ret, e);
}

/* ---- accessors ------------------------------------------------------------------------------ */

const char *cdi_spec_path(const struct cdi_spec *s)
{
    return s->path;
}
const char *cdi_spec_kind(const struct cdi_spec *s)
{
    return s->kind;
}
const char *cdi_spec_version(const struct cdi_spec *s)
{
    return s->version;
}
size_t cdi_spec_n_devices(const struct cdi_spec *s)
{
    return s->n_devices;
}
const char *cdi_spec_device_name(const struct cdi_spec *s, size_t i)
{
    return i < s->n_devices ? s->devices[i].name : NULL;
}
const struct cdi_edits *cdi_spec_edits(const struct cdi_spec *s)
{
    return &s->edits;
}
const struct cdi_edits *cdi_spec_device_edits(const struct cdi_spec *s, const char *name)
{
    for (size_t i = 0; name && i < s->n_devices; i++)
        if (strcmp(s->devices[i].name, name) == 0)
            return &s->devices[i].edits;
    return NULL;
}
bool cdi_spec_has_device(const struct cdi_spec *s, const char *name)
{
    return cdi_spec_device_edits(s, name) != NULL;
}
