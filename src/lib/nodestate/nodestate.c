/* SPDX-License-Identifier: Apache-2.0 */
/* nodestate: the status files, the agents' node annotations, expected vs advertised GPUs. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "kobj.h"
#include "nodestate.h"

/* ---- status files ------------------------------------------------------------------------- */

static const char *const file_names[NODESTATE_FILE_COUNT] = {
    [NODESTATE_DRIVER_CTR_READY] = ".driver-ctr-ready",
    [NODESTATE_TOOLKIT_CTR_READY] = ".toolkit-ctr-ready",
    [NODESTATE_DRIVER_READY] = "driver-ready",
    [NODESTATE_TOOLKIT_READY] = "toolkit-ready",
    [NODESTATE_CUDA_READY] = "cuda-ready",
    [NODESTATE_PLUGIN_READY] = "plugin-ready",
    [NODESTATE_PEERMEM_READY] = "nvidia-peermem-ready",
    [NODESTATE_NVIDIA_FS_READY] = "nvidia-fs-ready",
    [NODESTATE_GDRCOPY_READY] = "gdrcopy-ready",
};

const char *nodestate_file_name(enum nodestate_file f)
{
    return (unsigned)f < NODESTATE_FILE_COUNT ? file_names[f] : "?";
}

int nodestate_file_path(const char *dir, enum nodestate_file f, char *buf, size_t n)
{
    if ((unsigned)f >= NODESTATE_FILE_COUNT)
        return -EINVAL;
    int w = snprintf(buf, n, "%s/%s", dir ? dir : NODESTATE_VALIDATIONS_DIR, file_names[f]);
    return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

static bool env_value_ok(const char *v)
{
    for (const char *p = v; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+,=-", *p))
            return false;
    return true;
}

static bool env_key_ok(const char *k)
{
    if (!*k || (*k >= '0' && *k <= '9'))
        return false;
    for (const char *p = k; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return true;
}

int nodestate_env_render(const struct nodestate_kv *kv, size_t n, char **ret, struct err *e)
{
    _cleanup_(sbuf_freep) struct sbuf b;
    sbuf_init(&b, 64 * 1024);
    for (size_t i = 0; i < n; i++) {
        if (!kv[i].key || !env_key_ok(kv[i].key))
            return err_set(e, -EINVAL, "status file: bad variable name \"%s\"",
                           kv[i].key ? kv[i].key : "(null)");
        const char *v = kv[i].value ? kv[i].value : "";
        if (!env_value_ok(v))
            return err_set(e, -EINVAL,
                           "status file: %s: value \"%s\" has a byte a shell would "
                           "read differently",
                           kv[i].key, v);
        sbuf_addf(&b, "%s=%s\n", kv[i].key, v);
    }
    int r = sbuf_check_err(&b, e, "status file");
    if (r < 0)
        return r;
    *ret = b.len ? sbuf_steal(&b) : xstrdup("");
    return 0;
}

int nodestate_env_get(const char *text, size_t len, const char *key, char *buf, size_t n)
{
    size_t kl = strlen(key);
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *s = p;
        while (s < le && (*s == ' ' || *s == '\t'))
            s++;
        if (le - s > 7 && !strncmp(s, "export ", 7))
            s += 7;
        if (s < le && *s != '#' && (size_t)(le - s) > kl && !strncmp(s, key, kl) && s[kl] == '=') {
            const char *v = s + kl + 1, *ve = le;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if (ve - v >= 2 && (*v == '"' || *v == '\'') && ve[-1] == *v) {
                v++;
                ve--;
            }
            if ((size_t)(ve - v) >= n)
                return -ENAMETOOLONG;
            memcpy(buf, v, (size_t)(ve - v));
            buf[ve - v] = '\0';
            return 0;
        }
        p = le + 1;
    }
    return -ENOENT;
}

int nodestate_driver_ready_render(const struct nodestate_driver_ready *d, char **ret, struct err *e)
{
    struct nodestate_kv kv[] = {
        {"IS_HOST_DRIVER", d->is_host_driver ? "true" : "false"},
        {"NVIDIA_DRIVER_ROOT", d->driver_root},
        {"DRIVER_ROOT_CTR_PATH", d->driver_root_ctr},
        {"NVIDIA_DEV_ROOT", d->dev_root},
        {"DEV_ROOT_CTR_PATH", d->dev_root_ctr},
    };
    return nodestate_env_render(kv, ARRAY_SIZE(kv), ret, e);
}

int nodestate_driver_ready_parse(const char *path, const char *text, size_t len,
                                 struct nodestate_driver_ready *ret, struct err *e)
{
    memset(ret, 0, sizeof(*ret));
    char host[16];
    int r = nodestate_env_get(text, len, "IS_HOST_DRIVER", host, sizeof(host));
    if (r < 0)
        return err_set(e, -EINVAL, "%s: IS_HOST_DRIVER: %s", path,
                       r == -ENOENT ? "missing" : "too long");
    if (parse_bool(host, &ret->is_host_driver) < 0)
        return err_set(e, -EINVAL, "%s: IS_HOST_DRIVER: \"%s\" is not true or false", path, host);
    struct {
        const char *key;
        char *buf;
        bool required;
    } f[] = {
        {"NVIDIA_DRIVER_ROOT", ret->driver_root, true},
        {"DRIVER_ROOT_CTR_PATH", ret->driver_root_ctr, false},
        {"NVIDIA_DEV_ROOT", ret->dev_root, false},
        {"DEV_ROOT_CTR_PATH", ret->dev_root_ctr, false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
        r = nodestate_env_get(text, len, f[i].key, f[i].buf, sizeof(ret->driver_root));
        if (r == -ENAMETOOLONG || (r == -ENOENT && f[i].required) ||
            (f[i].required && !f[i].buf[0]))
            return err_set(e, -EINVAL, "%s: %s: %s", path, f[i].key,
                           r == -ENAMETOOLONG ? "too long" : "missing");
    }
    return 0;
}

int nodestate_file_write(const char *dir, enum nodestate_file f, const char *text, struct err *e)
{
    char path[4096];
    if (nodestate_file_path(dir, f, path, sizeof(path)) < 0)
        return err_set(e, -ENAMETOOLONG, "status file path too long");
    int r = mkdir_p(dir ? dir : NODESTATE_VALIDATIONS_DIR, 0755);
    if (r < 0)
        return err_errno(e, r, "create %s", dir ? dir : NODESTATE_VALIDATIONS_DIR);
    return file_write_atomic(path, text ? text : "", text ? strlen(text) : 0, 0644, e);
}

int nodestate_file_remove(const char *dir, enum nodestate_file f, struct err *e)
{
    char path[4096];
    if (nodestate_file_path(dir, f, path, sizeof(path)) < 0)
        return err_set(e, -ENAMETOOLONG, "status file path too long");
    if (unlink(path) < 0 && errno != ENOENT)
        return err_errno(e, -errno, "remove %s", path);
    return 0;
}

bool nodestate_file_exists(const char *dir, enum nodestate_file f)
{
    char path[4096];
    struct stat st;
    return nodestate_file_path(dir, f, path, sizeof(path)) == 0 && stat(path, &st) == 0 &&
           !S_ISDIR(st.st_mode);
}

/* ---- names -------------------------------------------------------------------------------- */

static int name_index(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (!strcmp(names[i], s))
            return (int)i;
    return -EINVAL;
}

static const char *const owner_names[] = {"none", "host", "container"};
const char *nodestate_owner_name(enum nodestate_owner o)
{
    return (unsigned)o < ARRAY_SIZE(owner_names) ? owner_names[o] : "?";
}
int nodestate_owner_parse(const char *s, enum nodestate_owner *ret)
{
    int i = name_index(owner_names, ARRAY_SIZE(owner_names), s);
    if (i < 0)
        return i;
    *ret = (enum nodestate_owner)i;
    return 0;
}

static const char *const comp_names[NODESTATE_COMP_COUNT] = {"driver", "toolkit", "cuda", "plugin"};
const char *nodestate_component_name(enum nodestate_component c)
{
    return (unsigned)c < NODESTATE_COMP_COUNT ? comp_names[c] : "?";
}
int nodestate_component_parse(const char *s, enum nodestate_component *ret)
{
    int i = name_index(comp_names, NODESTATE_COMP_COUNT, s);
    if (i < 0)
        return i;
    *ret = (enum nodestate_component)i;
    return 0;
}
enum nodestate_file nodestate_component_file(enum nodestate_component c)
{
    static const enum nodestate_file f[NODESTATE_COMP_COUNT] = {
        NODESTATE_DRIVER_READY, NODESTATE_TOOLKIT_READY, NODESTATE_CUDA_READY,
        NODESTATE_PLUGIN_READY};
    return (unsigned)c < NODESTATE_COMP_COUNT ? f[c] : NODESTATE_FILE_COUNT;
}
void nodestate_validation_key(enum nodestate_component c, char *buf, size_t n)
{
    snprintf(buf, n, NODESTATE_ANN_VALIDATION_PREFIX "%s", nodestate_component_name(c));
}

static const char *const vstate_names[] = {"waiting", "ok", "failed"};
const char *nodestate_vstate_name(enum nodestate_vstate s)
{
    return (unsigned)s < ARRAY_SIZE(vstate_names) ? vstate_names[s] : "?";
}
int nodestate_vstate_parse(const char *s, enum nodestate_vstate *ret)
{
    int i = name_index(vstate_names, ARRAY_SIZE(vstate_names), s);
    if (i < 0)
        return i;
    *ret = (enum nodestate_vstate)i;
    return 0;
}

/* ---- annotation codecs -------------------------------------------------------------------- */

static char *dump(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s; /* NULL only when out of memory */
}

static int load(const char *what, const char *text, json_t **ret, struct err *e)
{
    if (!text)
        return err_set(e, -EINVAL, "%s: missing", what);
    size_t len = strlen(text);
    if (len > NODESTATE_ANN_MAX)
        return err_set(e, -EFBIG, "%s: %zu bytes, more than %d", what, len, NODESTATE_ANN_MAX);
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return err_set(e, -EINVAL, "%s: not JSON: %s", what, je.text);
    if (!json_is_object(o)) {
        json_decref(o);
        return err_set(e, -EINVAL, "%s: not a JSON object", what);
    }
    *ret = o;
    return 0;
}

/* Copies an optional string field; a non-string or one that does not fit is an error. */
static int get_str(const char *what, const json_t *o, const char *key, char *buf, size_t n,
                   bool required, struct err *e)
{
    json_t *v = json_object_get(o, key);
    if (!v) {
        if (required)
            return err_set(e, -EINVAL, "%s: %s: missing", what, key);
        buf[0] = '\0';
        return 0;
    }
    if (!json_is_string(v))
        return err_set(e, -EINVAL, "%s: %s: not a string", what, key);
    if (json_string_length(v) >= n)
        return err_set(e, -EINVAL, "%s: %s: longer than %zu bytes", what, key, n - 1);
    memcpy(buf, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

int nodestate_driver_owner_render(const struct nodestate_driver_owner *o, char **ret)
{
    json_t *j = json_object();
    json_object_set_new(j, "owner", json_string(nodestate_owner_name(o->owner)));
    json_object_set_new(j, "version", json_string(o->version));
    json_object_set_new(j, "source", json_string(o->source));
    json_object_set_new(j, "time", json_string(o->time));
    *ret = dump(j);
    return *ret ? 0 : -ENOMEM;
}

int nodestate_driver_owner_parse(const char *text, struct nodestate_driver_owner *ret,
                                 struct err *e)
{
    static const char what[] = NODESTATE_ANN_DRIVER_OWNER;
    memset(ret, 0, sizeof(*ret));
    json_t *j = NULL;
    int r = load(what, text, &j, e);
    if (r < 0)
        return r;
    char owner[32];
    if ((r = get_str(what, j, "owner", owner, sizeof(owner), true, e)) < 0 ||
        (r = get_str(what, j, "version", ret->version, sizeof(ret->version), false, e)) < 0 ||
        (r = get_str(what, j, "source", ret->source, sizeof(ret->source), false, e)) < 0 ||
        (r = get_str(what, j, "time", ret->time, sizeof(ret->time), false, e)) < 0)
        goto out;
    if (nodestate_owner_parse(owner, &ret->owner) < 0)
        r = err_set(e, -EINVAL, "%s: owner: \"%s\" is not none, host or container", what, owner);
out:
    json_decref(j);
    return r;
}

int nodestate_drain_render(const struct nodestate_drain *d, char **ret)
{
    json_t *j = json_object();
    json_object_set_new(j, "time", json_string(d->time));
    json_object_set_new(j, "reason", json_string(d->reason));
    json_object_set_new(j, "by", json_string(d->by));
    *ret = dump(j);
    return *ret ? 0 : -ENOMEM;
}

int nodestate_drain_parse(const char *text, struct nodestate_drain *ret, struct err *e)
{
    static const char what[] = NODESTATE_ANN_LAST_DRAIN;
    memset(ret, 0, sizeof(*ret));
    json_t *j = NULL;
    int r = load(what, text, &j, e);
    if (r < 0)
        return r;
    if ((r = get_str(what, j, "time", ret->time, sizeof(ret->time), true, e)) < 0 ||
        (r = get_str(what, j, "reason", ret->reason, sizeof(ret->reason), false, e)) < 0 ||
        (r = get_str(what, j, "by", ret->by, sizeof(ret->by), false, e)) < 0)
        goto out;
out:
    json_decref(j);
    return r;
}

int nodestate_validation_render(const struct nodestate_validation *v, char **ret)
{
    json_t *j = json_object();
    json_object_set_new(j, "state", json_string(nodestate_vstate_name(v->state)));
    json_object_set_new(j, "reason", json_string(v->reason));
    json_object_set_new(j, "time", json_string(v->time));
    *ret = dump(j);
    return *ret ? 0 : -ENOMEM;
}

int nodestate_validation_parse(const char *text, struct nodestate_validation *ret, struct err *e)
{
    static const char what[] = "validation annotation";
    memset(ret, 0, sizeof(*ret));
    json_t *j = NULL;
    int r = load(what, text, &j, e);
    if (r < 0)
        return r;
    char state[16];
    if ((r = get_str(what, j, "state", state, sizeof(state), true, e)) < 0 ||
        (r = get_str(what, j, "reason", ret->reason, sizeof(ret->reason), false, e)) < 0 ||
        (r = get_str(what, j, "time", ret->time, sizeof(ret->time), false, e)) < 0)
        goto out;
    if (nodestate_vstate_parse(state, &ret->state) < 0)
        r = err_set(e, -EINVAL, "%s: state: \"%s\" is not waiting, ok or failed", what, state);
out:
    json_decref(j);
    return r;
}

/* ---- expected vs advertised --------------------------------------------------------------- */

int nodestate_mig_strategy_parse(const char *s, enum nodestate_mig_strategy *ret)
{
    if (!s || !*s || !strcmp(s, "none"))
        *ret = NODESTATE_MIG_NONE;
    else if (!strcmp(s, "single"))
        *ret = NODESTATE_MIG_SINGLE;
    else if (!strcmp(s, "mixed"))
        *ret = NODESTATE_MIG_MIXED;
    else
        return -EINVAL;
    return 0;
}

/* Adds count to name in a sorted list. */
static int rc_add(struct nodestate_resource_count *l, size_t *n, const char *name, int64_t count,
                  struct err *e)
{
    size_t i = 0;
    while (i < *n && strcmp(l[i].name, name) < 0)
        i++;
    if (i < *n && !strcmp(l[i].name, name)) {
        l[i].count += count;
        return 0;
    }
    if (*n >= NODESTATE_RESOURCES_MAX)
        return err_set(e, -E2BIG, "more than %d GPU resources", NODESTATE_RESOURCES_MAX);
    if (strlen(name) >= NODESTATE_RESOURCE_MAX)
        return err_set(e, -EINVAL, "resource name \"%s\" too long", name);
    memmove(&l[i + 1], &l[i], (*n - i) * sizeof(*l));
    snprintf(l[i].name, sizeof(l[i].name), "%s", name);
    l[i].count = count;
    (*n)++;
    return 0;
}

/* ---- NVML's inventory as plain GPUs ------------------------------------------------------ */

void nodestate_gpus_from(const struct gpu_inventory *inv, char (*known)[GPU_UUID_MAX],
                         size_t n_known, struct nodestate_gpus *ret)
{
    size_t n_mig = 0;
    for (size_t i = 0; i < inv->n_gpus; i++)
        n_mig += inv->gpus[i].mig_enabled ? inv->gpus[i].n_mig : 0;
    struct nodestate_gpus g = {.n = inv->n_gpus};
    g.g = xcalloc(inv->n_gpus + 1, sizeof(*g.g));
    g.mig_names = xcalloc(2 * n_mig + 1, sizeof(*g.mig_names));
    g.names = xcalloc(inv->n_gpus + 1, sizeof(*g.names));
    size_t k = 0;
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *d = &inv->gpus[i];
        struct nodestate_gpu *ng = &g.g[i];
        bool read = d->uuid[0] && strcmp(d->uuid, "-") != 0;
        char *slot = known && d->index < n_known ? known[d->index] : NULL;
        if (read && slot)
            strlcpy_s(slot, d->uuid, GPU_UUID_MAX);
        if (read) {
            ng->uuid = d->uuid;
        } else {
            if (slot && slot[0])
                strlcpy_s(g.names[i], slot, sizeof(g.names[i]));
            else
                snprintf(g.names[i], sizeof(g.names[i]), "GPU %u (no UUID)", d->index);
            ng->uuid = g.names[i];
        }
        ng->lost = d->lost;
        ng->mig_enabled = d->mig_enabled;
        if (!d->mig_enabled)
            continue;
        ng->n_mig = d->n_mig;
        ng->mig_profiles = g.mig_names + k;
        for (size_t m = 0; m < d->n_mig; m++)
            g.mig_names[k++] = d->mig[m].profile;
        ng->mig_uuids = g.mig_names + k;
        for (size_t m = 0; m < d->n_mig; m++)
            g.mig_names[k++] = d->mig[m].uuid;
    }
    assert(k == 2 * n_mig);
    *ret = g;
}

void nodestate_gpus_clear(struct nodestate_gpus *g)
{
    free(g->g);
    free(g->mig_names);
    free(g->names);
    memset(g, 0, sizeof(*g));
}

int nodestate_expected_resources(const struct nodestate_gpu *gpus, size_t n,
                                 enum nodestate_mig_strategy s,
                                 struct nodestate_resource_count *ret, size_t *ret_n, struct err *e)
{
    *ret_n = 0;
    for (size_t i = 0; i < n; i++) {
        const struct nodestate_gpu *g = &gpus[i];
        int r;
        if (s == NODESTATE_MIG_NONE || !g->mig_enabled) {
            r = rc_add(ret, ret_n, "nvidia.com/gpu", 1, e);
        } else if (s == NODESTATE_MIG_SINGLE) {
            r = g->n_mig ? rc_add(ret, ret_n, "nvidia.com/gpu", (int64_t)g->n_mig, e) : 0;
        } else {
            r = 0;
            for (size_t m = 0; m < g->n_mig && r == 0; m++) {
                char name[NODESTATE_RESOURCE_MAX + 16];
                snprintf(name, sizeof(name), "nvidia.com/mig-%s", g->mig_profiles[m]);
                r = rc_add(ret, ret_n, name, 1, e);
            }
        }
        if (r < 0)
            return r;
    }
    return 0;
}

/* "nvidia.com/gpu.shared" counts for "nvidia.com/gpu": a sharing config's renamed resource. */
static void base_name(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s", name);
    size_t l = strlen(buf);
    if (l > 7 && !strcmp(buf + l - 7, ".shared"))
        buf[l - 7] = '\0';
}

static void add_missing(struct nodestate_gpu_count *c, const char *fmt, ...) GPUOP_PRINTF(2, 3);
static void add_missing(struct nodestate_gpu_count *c, const char *fmt, ...)
{
    if (c->n_missing >= NODESTATE_MISSING_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->missing[c->n_missing++], sizeof(c->missing[0]), fmt, ap);
    va_end(ap);
}

int nodestate_gpu_count_compare(const struct nodestate_gpu *gpus, size_t n,
                                enum nodestate_mig_strategy s, const char *allocatable_json,
                                struct nodestate_gpu_count *ret, struct err *e)
{
    memset(ret, 0, sizeof(*ret));
    ret->physical = (int64_t)n;
    int r = nodestate_expected_resources(gpus, n, s, ret->expected, &ret->n_expected, e);
    if (r < 0)
        return r;
    if (allocatable_json && *allocatable_json) {
        json_t *a = NULL;
        r = load("allocatable", allocatable_json, &a, e);
        if (r < 0)
            return r;
        const char *key;
        json_t *v;
        json_object_foreach (a, key, v) {
            if (strncmp(key, "nvidia.com/", 11))
                continue;
            int64_t milli;
            if (!json_is_string(v) || kobj_quantity_milli(json_string_value(v), &milli) < 0) {
                r = err_set(e, -EINVAL, "allocatable: %s: not a quantity", key);
                break;
            }
            char base[NODESTATE_RESOURCE_MAX];
            base_name(key, base, sizeof(base));
            if ((r = rc_add(ret->advertised, &ret->n_advertised, base, milli / 1000, e)) < 0)
                break;
        }
        json_decref(a);
        if (r < 0)
            return r;
    }
    for (size_t i = 0; i < ret->n_expected; i++) {
        int64_t have = 0;
        for (size_t j = 0; j < ret->n_advertised; j++)
            if (!strcmp(ret->advertised[j].name, ret->expected[i].name))
                have = ret->advertised[j].count;
        if (have < ret->expected[i].count) {
            ret->short_ = true;
            add_missing(ret, "%s: %lld of %lld advertised", ret->expected[i].name, (long long)have,
                        (long long)ret->expected[i].count);
        }
    }
    for (size_t i = 0; i < n; i++)
        if (gpus[i].lost)
            add_missing(ret, "%s (lost)", gpus[i].uuid ? gpus[i].uuid : "?");
    return 0;
}

static json_t *rc_json(const struct nodestate_resource_count *l, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(o, l[i].name, json_integer(l[i].count));
    return o;
}

int nodestate_gpu_count_render(const struct nodestate_gpu_count *c, char **ret)
{
    json_t *j = json_object();
    json_object_set_new(j, "physical", json_integer(c->physical));
    json_object_set_new(j, "expected", rc_json(c->expected, c->n_expected));
    json_object_set_new(j, "advertised", rc_json(c->advertised, c->n_advertised));
    json_t *m = json_array();
    for (size_t i = 0; i < c->n_missing; i++)
        json_array_append_new(m, json_string(c->missing[i]));
    json_object_set_new(j, "missing", m);
    json_object_set_new(j, "short", json_boolean(c->short_));
    json_object_set_new(j, "since", json_string(c->since));
    json_object_set_new(j, "mismatch", json_boolean(c->mismatch));
    *ret = dump(j);
    return *ret ? 0 : -ENOMEM;
}

static int rc_parse(const char *what, const json_t *j, const char *key,
                    struct nodestate_resource_count *l, size_t *n, struct err *e)
{
    json_t *o = json_object_get(j, key);
    *n = 0;
    if (!o)
        return 0;
    if (!json_is_object(o))
        return err_set(e, -EINVAL, "%s: %s: not an object", what, key);
    const char *k;
    json_t *v;
    json_object_foreach (o, k, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return err_set(e, -EINVAL, "%s: %s.%s: not a count", what, key, k);
        int r = rc_add(l, n, k, json_integer_value(v), e);
        if (r < 0)
            return err_prefix(e, "%s: %s", what, key);
    }
    return 0;
}

int nodestate_gpu_count_parse(const char *text, struct nodestate_gpu_count *ret, struct err *e)
{
    static const char what[] = NODESTATE_ANN_GPU_COUNT;
    memset(ret, 0, sizeof(*ret));
    json_t *j = NULL;
    int r = load(what, text, &j, e);
    if (r < 0)
        return r;
    json_t *v = json_object_get(j, "physical");
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        r = err_set(e, -EINVAL, "%s: physical: missing or not a count", what);
        goto out;
    }
    ret->physical = json_integer_value(v);
    if ((r = rc_parse(what, j, "expected", ret->expected, &ret->n_expected, e)) < 0 ||
        (r = rc_parse(what, j, "advertised", ret->advertised, &ret->n_advertised, e)) < 0 ||
        (r = get_str(what, j, "since", ret->since, sizeof(ret->since), false, e)) < 0)
        goto out;
    json_t *m = json_object_get(j, "missing");
    if (m && !json_is_array(m)) {
        r = err_set(e, -EINVAL, "%s: missing: not an array", what);
        goto out;
    }
    size_t i;
    json_array_foreach (m, i, v) {
        if (!json_is_string(v)) {
            r = err_set(e, -EINVAL, "%s: missing[%zu]: not a string", what, i);
            goto out;
        }
        add_missing(ret, "%s", json_string_value(v));
    }
    struct {
        const char *key;
        bool *dst;
    } b[] = {{"short", &ret->short_}, {"mismatch", &ret->mismatch}};
    for (size_t k = 0; k < ARRAY_SIZE(b); k++) {
        v = json_object_get(j, b[k].key);
        if (v && !json_is_boolean(v)) {
            r = err_set(e, -EINVAL, "%s: %s: not a boolean", what, b[k].key);
            goto out;
        }
        *b[k].dst = json_is_true(v);
    }
out:
    json_decref(j);
    return r;
}

int nodestate_toolkit_marker_parse(const char *path, const char *text, size_t len,
                                   struct nodestate_toolkit_marker *ret, struct err *e)
{
    struct nodestate_toolkit_marker m = {.check_runtime = true, .cdi_enabled = true};
    strlcpy_s(m.runtime_name, "nvidia", sizeof(m.runtime_name));
    strlcpy_s(m.runtime_path, NODESTATE_RUNTIME_PATH_DEFAULT, sizeof(m.runtime_path));
    strlcpy_s(m.cdi_spec, NODESTATE_CDI_SPEC_DEFAULT, sizeof(m.cdi_spec));
    if (!text) {
        *ret = m;
        return 0;
    }
    char install[PATH_MAX] = "";
    const struct {
        const char *key;
        char *buf;
        size_t size;
        bool abs; /* a path: absolute */
    } keys[] = {
        {"RUNTIME", m.runtime, sizeof(m.runtime), false},
        {"RUNTIME_CONFIG", m.runtime_config, sizeof(m.runtime_config), true},
        {"RUNTIME_NAME", m.runtime_name, sizeof(m.runtime_name), false},
        {"RUNTIME_PATH", m.runtime_path, sizeof(m.runtime_path), true},
        {"CDI_SPEC", m.cdi_spec, sizeof(m.cdi_spec), true},
        {"TOOLKIT_INSTALL_DIR", install, sizeof(install), true},
    };
    bool have_path = false;
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        char v[PATH_MAX];
        int r = nodestate_env_get(text, len, keys[i].key, v, sizeof(v));
        if (r == -ENOENT || (r == 0 && !*v))
            continue;
        if (r < 0 || strlen(v) >= keys[i].size)
            return err_set(e, -ENAMETOOLONG, "%s: %s: value too long", path, keys[i].key);
        if (keys[i].abs && v[0] != '/')
            return err_set(e, -EINVAL, "%s: %s: \"%s\" is not an absolute path", path, keys[i].key,
                           v);
        memcpy(keys[i].buf, v, strlen(v) + 1);
        have_path = have_path || keys[i].buf == m.runtime_path;
    }
    strlcpy_s(m.install_dir, install, sizeof(m.install_dir));
    if (!have_path && install[0]) {
        int w = snprintf(m.runtime_path, sizeof(m.runtime_path), "%s/%s", install,
                         NODESTATE_TOOLKIT_WRAPPER);
        if (w < 0 || (size_t)w >= sizeof(m.runtime_path))
            return err_set(e, -ENAMETOOLONG, "%s: TOOLKIT_INSTALL_DIR: value too long", path);
    }
    if (strcmp(m.runtime, "none") == 0) {
        m.check_runtime = false;
        m.runtime[0] = '\0';
    }
    char v[16];
    int r = nodestate_env_get(text, len, "CDI_ENABLED", v, sizeof(v));
    if (r == 0 && parse_bool(v, &m.cdi_enabled) < 0)
        return err_set(e, -EINVAL, "%s: CDI_ENABLED: \"%s\" is not a boolean", path, v);
    if (r < 0 && r != -ENOENT)
        return err_set(e, r, "%s: CDI_ENABLED: value too long", path);
    *ret = m;
    return 0;
}
