/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi: containerEdits applied to an OCI runtime spec (cdi.h), the way the CDI library edits a
 * container: environment by name, device nodes with their cgroup allow rules, mounts ordered
 * parents first, hooks by lifecycle point, additional groups. A field of the OCI spec that has
 * the wrong type is an error naming it, never replaced.
 */
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "cdi.h"

int cdi_stat_host(void *ud, const char *path, struct cdi_host_node *ret, struct err *e)
{
    (void)ud;
    struct stat st;
    if (stat(path, &st) < 0)
        return err_errno(e, -errno, "stat \"%s\"", path);
    char type;
    if (S_ISCHR(st.st_mode))
        type = 'c';
    else if (S_ISBLK(st.st_mode))
        type = 'b';
    else if (S_ISFIFO(st.st_mode))
        type = 'p';
    else
        return err_set(e, -EINVAL, "\"%s\": not a device node", path);
    *ret = (struct cdi_host_node){
        .type = type,
        .major = type == 'p' ? 0 : (int64_t)major(st.st_rdev),
        .minor = type == 'p' ? 0 : (int64_t)minor(st.st_rdev),
        .file_mode = st.st_mode & 07777,
        .uid = st.st_uid,
        .gid = st.st_gid,
    };
    return 0;
}

/* parent.key as an object (created when missing); another type is an error. */
static int obj_at(json_t *parent, const char *key, const char *where, json_t **ret, struct err *e)
{
    json_t *v = json_object_get(parent, key);
    if (!v || json_is_null(v)) {
        v = json_object();
        json_object_set_new(parent, key, v);
    } else if (!json_is_object(v)) {
        return err_set(e, -EINVAL, "config.json: %s: expected an object", where);
    }
    *ret = v;
    return 0;
}

static int arr_at(json_t *parent, const char *key, const char *where, json_t **ret, struct err *e)
{
    json_t *v = json_object_get(parent, key);
    if (!v || json_is_null(v)) {
        v = json_array();
        json_object_set_new(parent, key, v);
    } else if (!json_is_array(v)) {
        return err_set(e, -EINVAL, "config.json: %s: expected an array", where);
    }
    *ret = v;
    return 0;
}

/* Appends v (stolen) unless an equal value is there: applying the same edits twice (a runtime
 * that already applied them, then the wrapper) gives the same spec. */
static void append_unique(json_t *arr, json_t *v)
{
    size_t i;
    json_t *o;
    json_array_foreach (arr, i, o)
        if (json_equal(o, v)) {
            json_decref(v);
            return;
        }
    json_array_append_new(arr, v);
}

static int apply_env(json_t *oci, const struct cdi_edits *ed, struct err *e)
{
    if (!ed->n_env)
        return 0;
    json_t *proc = NULL, *env = NULL;
    int r;
    if ((r = obj_at(oci, "process", "process", &proc, e)) < 0 ||
        (r = arr_at(proc, "env", "process.env", &env, e)) < 0)
        return r;
    for (size_t i = 0; i < ed->n_env; i++) {
        const char *kv = ed->env[i];
        size_t name_len = (size_t)(strchr(kv, '=') - kv);
        bool replaced = false;
        size_t k;
        json_t *v;
        json_array_foreach (env, k, v) {
            const char *s = json_string_value(v);
            if (s && strncmp(s, kv, name_len) == 0 && s[name_len] == '=') {
                json_array_set_new(env, k, json_string(kv));
                replaced = true;
            }
        }
        if (!replaced)
            json_array_append_new(env, json_string(kv));
    }
    return 0;
}

/* The node as OCI's linux.devices entry. As the CDI library does, the host is read only when the
 * spec leaves the type out, or the major of a c/b/u node; the host's mode is used then. */
static int node_fill(const struct cdi_device_node *d, cdi_stat_fn stat_fn, void *ud,
                     struct cdi_host_node *ret, struct err *e)
{
    struct cdi_host_node h = {.type = d->type ? d->type[0] : 0};
    if (!d->type || (d->type[0] != 'p' && !d->has_major)) {
        const char *host = d->host_path ? d->host_path : d->path;
        int r = stat_fn(ud, host, &h, e);
        if (r < 0)
            return err_prefix(e, "device node \"%s\"", d->path);
        if (d->type && d->type[0] != 'u')
            h.type = d->type[0];
    }
    if (h.type == 'u')
        h.type = 'c'; /* an unbuffered character device is a character device to cgroups */
    if (d->has_major)
        h.major = d->major;
    if (d->has_minor)
        h.minor = d->minor;
    if (d->has_file_mode)
        h.file_mode = d->file_mode;
    *ret = h;
    return 0;
}

static int apply_devices(json_t *oci, const struct cdi_edits *ed, cdi_stat_fn stat_fn, void *ud,
                         struct err *e)
{
    if (!ed->n_device_nodes)
        return 0;
    json_t *linux_ = NULL, *devs = NULL, *res = NULL, *rules = NULL;
    int r;
    if ((r = obj_at(oci, "linux", "linux", &linux_, e)) < 0 ||
        (r = arr_at(linux_, "devices", "linux.devices", &devs, e)) < 0 ||
        (r = obj_at(linux_, "resources", "linux.resources", &res, e)) < 0 ||
        (r = arr_at(res, "devices", "linux.resources.devices", &rules, e)) < 0)
        return r;
    for (size_t i = 0; i < ed->n_device_nodes; i++) {
        const struct cdi_device_node *d = &ed->device_nodes[i];
        struct cdi_host_node h = {0};
        if ((r = node_fill(d, stat_fn, ud, &h, e)) < 0)
            return r;
        char type[2] = {h.type, 0};
        json_t *dev = json_pack("{s:s, s:s}", "path", d->path, "type", type);
        if (h.type != 'p') {
            json_object_set_new(dev, "major", json_integer(h.major));
            json_object_set_new(dev, "minor", json_integer(h.minor));
        }
        if (h.file_mode)
            json_object_set_new(dev, "fileMode", json_integer(h.file_mode));
        if (d->has_uid)
            json_object_set_new(dev, "uid", json_integer(d->uid));
        if (d->has_gid)
            json_object_set_new(dev, "gid", json_integer(d->gid));
        size_t k;
        json_t *v;
        bool replaced = false;
        json_array_foreach (devs, k, v)
            if (!replaced && streq_ptr(json_string_value(json_object_get(v, "path")), d->path)) {
                json_array_set(devs, k, dev);
                replaced = true;
            }
        if (!replaced)
            json_array_append(devs, dev);
        json_decref(dev);
        if (h.type == 'c' || h.type == 'b')
            append_unique(rules,
                          json_pack("{s:b, s:s, s:I, s:I, s:s}", "allow", 1, "type", type, "major",
                                    (json_int_t)h.major, "minor", (json_int_t)h.minor, "access",
                                    d->permissions ? d->permissions : "rwm"));
    }
    return 0;
}

static size_t path_depth(const char *p)
{
    size_t n = 0;
    for (const char *c = p; c && *c; c++)
        if (*c == '/' && c[1] && c[1] != '/')
            n++;
    return n;
}

/* Parents before children, stably (insertion sort: config.json holds tens of mounts). */
static void sort_mounts(json_t *mounts)
{
    size_t n = json_array_size(mounts);
    for (size_t i = 1; i < n; i++) {
        json_t *m = json_incref(json_array_get(mounts, i));
        size_t d = path_depth(json_string_value(json_object_get(m, "destination")));
        size_t k = i;
        while (k > 0 && path_depth(json_string_value(
                            json_object_get(json_array_get(mounts, k - 1), "destination"))) > d) {
            json_array_set(mounts, k, json_array_get(mounts, k - 1));
            k--;
        }
        json_array_set_new(mounts, k, m);
    }
}

static int apply_mounts(json_t *oci, const struct cdi_edits *ed, struct err *e)
{
    if (!ed->n_mounts)
        return 0;
    json_t *mounts = NULL;
    int r = arr_at(oci, "mounts", "mounts", &mounts, e);
    if (r < 0)
        return r;
    for (size_t i = 0; i < ed->n_mounts; i++) {
        const struct cdi_mount *m = &ed->mounts[i];
        for (size_t k = json_array_size(mounts); k-- > 0;)
            if (streq_ptr(
                    json_string_value(json_object_get(json_array_get(mounts, k), "destination")),
                    m->container_path))
                json_array_remove(mounts, k);
        json_t *o =
            json_pack("{s:s, s:s}", "source", m->host_path, "destination", m->container_path);
        if (m->type)
            json_object_set_new(o, "type", json_string(m->type));
        if (m->n_options) {
            json_t *opts = json_array();
            for (size_t k = 0; k < m->n_options; k++)
                json_array_append_new(opts, json_string(m->options[k]));
            json_object_set_new(o, "options", opts);
        }
        json_array_append_new(mounts, o);
    }
    sort_mounts(mounts);
    return 0;
}

static json_t *strings_json(const char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static int apply_hooks(json_t *oci, const struct cdi_edits *ed, struct err *e)
{
    if (!ed->n_hooks)
        return 0;
    json_t *hooks = NULL;
    int r = obj_at(oci, "hooks", "hooks", &hooks, e);
    if (r < 0)
        return r;
    for (size_t i = 0; i < ed->n_hooks; i++) {
        const struct cdi_hook *h = &ed->hooks[i];
        char where[64];
        snprintf(where, sizeof(where), "hooks.%s", h->hook_name);
        json_t *list = NULL;
        if ((r = arr_at(hooks, h->hook_name, where, &list, e)) < 0)
            return r;
        json_t *o = json_pack("{s:s}", "path", h->path);
        if (h->n_args)
            json_object_set_new(o, "args", strings_json(h->args, h->n_args));
        if (h->n_env)
            json_object_set_new(o, "env", strings_json(h->env, h->n_env));
        if (h->has_timeout)
            json_object_set_new(o, "timeout", json_integer(h->timeout));
        append_unique(list, o);
    }
    return 0;
}

static int apply_gids(json_t *oci, const struct cdi_edits *ed, struct err *e)
{
    if (!ed->n_additional_gids)
        return 0;
    json_t *proc = NULL, *user = NULL, *gids = NULL;
    int r;
    if ((r = obj_at(oci, "process", "process", &proc, e)) < 0 ||
        (r = obj_at(proc, "user", "process.user", &user, e)) < 0 ||
        (r = arr_at(user, "additionalGids", "process.user.additionalGids", &gids, e)) < 0)
        return r;
    for (size_t i = 0; i < ed->n_additional_gids; i++) {
        uint32_t g = ed->additional_gids[i];
        bool have = g == 0; /* root's group is never added, as CDI does */
        size_t k;
        json_t *v;
        json_array_foreach (gids, k, v)
            have |= json_is_integer(v) && json_integer_value(v) == g;
        if (!have)
            json_array_append_new(gids, json_integer(g));
    }
    return 0;
}

int cdi_oci_apply(json_t *oci, const struct cdi_edits *const *edits, size_t n, cdi_stat_fn stat_fn,
                  void *stat_ud, struct err *e)
{
    if (!json_is_object(oci))
        return err_set(e, -EINVAL, "config.json: expected an object");
    if (!stat_fn)
        stat_fn = cdi_stat_host;
    for (size_t i = 0; i < n; i++) {
        const struct cdi_edits *ed = edits[i];
        int r;
        if ((r = apply_env(oci, ed, e)) < 0 ||
            (r = apply_devices(oci, ed, stat_fn, stat_ud, e)) < 0 ||
            (r = apply_mounts(oci, ed, e)) < 0 || (r = apply_hooks(oci, ed, e)) < 0 ||
            (r = apply_gids(oci, ed, e)) < 0)
            return r;
    }
    return 0;
}
