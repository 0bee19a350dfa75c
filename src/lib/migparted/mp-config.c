/* SPDX-License-Identifier: Apache-2.0 */
/* mig-parted v1 configs: bytes in, checked plain structs out (no I/O but mp_spec_load). */
#include <ctype.h>
#include <string.h>

#include "migparted.h"
#include "yamlcfg.h"

#define CTX_MAX 512

static int digits(const char **p, unsigned max, unsigned *ret)
{
    const char *s = *p;
    unsigned v = 0;
    if (!isdigit((unsigned char)*s))
        return -EINVAL;
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (unsigned)(*s - '0');
        if (v > max)
            return -EINVAL;
        s++;
    }
    *p = s;
    *ret = v;
    return 0;
}

static const char *const attributes[] = {"+me", "+me.all", "-me", "+gfx", "-gfx", NULL};

int mp_profile_key_parse(const char *s, struct mp_profile_key *ret, struct err *e)
{
    static const char form[] = "expected [<c>c.]<g>g.<memory>gb followed by any of +me, +me.all, "
                               "-me, +gfx, -gfx";
    struct mp_profile_key k = {0};
    const char *p = s, *gi = s;
    unsigned a = 0, mem = 0;
    if (!s || !*s)
        return err_set(e, -EINVAL, "an empty MIG profile: %s", form);
    if (digits(&p, 8, &a) < 0)
        return err_set(e, -EINVAL, "\"%s\" is not a MIG profile: %s", s, form);
    if (p[0] == 'c' && p[1] == '.') {
        if (a == 0)
            return err_set(e, -EINVAL, "\"%s\": a compute instance has at least 1 slice", s);
        k.ci_slices = a;
        p += 2;
        gi = p;
        if (digits(&p, 8, &a) < 0)
            return err_set(e, -EINVAL, "\"%s\" is not a MIG profile: %s", s, form);
    }
    if (p[0] != 'g' || p[1] != '.')
        return err_set(e, -EINVAL, "\"%s\" is not a MIG profile: %s", s, form);
    k.gi_slices = a;
    p += 2;
    if (digits(&p, 99999, &mem) < 0 || p[0] != 'g' || p[1] != 'b')
        return err_set(e, -EINVAL, "\"%s\" is not a MIG profile: %s", s, form);
    p += 2;
    bool seen[ARRAY_SIZE(attributes)] = {0};
    while (*p) {
        size_t len = 1;
        while (p[len] && p[len] != '+' && p[len] != '-')
            len++;
        size_t i = 0;
        for (; attributes[i]; i++)
            if (strlen(attributes[i]) == len && strncmp(p, attributes[i], len) == 0)
                break;
        if (!attributes[i])
            return err_set(e, -EINVAL, "\"%s\": unknown profile attribute \"%.*s\": %s", s,
                           (int)len, p, form);
        if (seen[i])
            return err_set(e, -EINVAL, "\"%s\": attribute %s given twice", s, attributes[i]);
        seen[i] = true;
        p += len;
    }
    if (k.gi_slices == 0 || mem == 0)
        return err_set(e, -EINVAL, "\"%s\": slices and memory must be at least 1", s);
    if (k.ci_slices > k.gi_slices)
        return err_set(e, -EINVAL,
                       "\"%s\": a compute instance of %u slices does not fit a %u-slice GPU "
                       "instance",
                       s, k.ci_slices, k.gi_slices);
    if (k.ci_slices == k.gi_slices)
        k.ci_slices = 0; /* "3c.3g.40gb" is the whole "3g.40gb" */
    if (strlcpy_s(k.gi, gi, sizeof(k.gi)) >= sizeof(k.gi))
        return err_set(e, -EINVAL, "\"%s\": too long for a MIG profile", s);
    *ret = k;
    return 0;
}

/* "0x233010DE" -> 0x233010de; exactly 8 hex digits after 0x. */
static int hex32(const char *s, size_t n, uint32_t *ret)
{
    if (n != 10 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
        return -EINVAL;
    uint64_t v = 0;
    if (hex_parse(s + 2, 8, &v) < 0)
        return -EINVAL;
    *ret = (uint32_t)v;
    return 0;
}

static int filter_parse(const char *s, const char *ctx, struct mp_filter *ret, struct err *e)
{
    struct mp_filter f = {0};
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    if (hex32(s, n, &f.device_id) < 0 ||
        (colon && hex32(colon + 1, strlen(colon + 1), &f.subsystem_id) < 0))
        return err_set(e, -EINVAL,
                       "%s: \"%s\" is not a device filter: expected 0xDDDDVVVV (PCI device and "
                       "vendor id), optionally followed by :0xSSSSVVVV (subsystem id)",
                       ctx, s);
    f.has_subsystem = colon != NULL;
    *ret = f;
    return 0;
}

static int filters_parse(json_t *v, const char *ctx, struct mp_entry *en, struct err *e)
{
    char c2[CTX_MAX];
    if (json_is_string(v)) {
        en->filters = xcalloc(1, sizeof(*en->filters));
        en->n_filters = 1;
        return filter_parse(json_string_value(v), ctx, &en->filters[0], e);
    }
    if (json_is_integer(v))
        return err_set(e, -EINVAL,
                       "%s: got an integer: a device filter is a quoted string (\"0xDDDDVVVV\")",
                       ctx);
    if (!json_is_array(v) || json_array_size(v) == 0)
        return err_set(e, -EINVAL,
                       "%s: expected a device filter or a non-empty list of them, got %s", ctx,
                       json_is_array(v) ? "an empty list" : cfg_type_name(v));
    if (json_array_size(v) > MP_DEVICES_MAX)
        return err_set(e, -E2BIG, "%s: more than %u filters", ctx, MP_DEVICES_MAX);
    en->filters = xcalloc(json_array_size(v), sizeof(*en->filters));
    size_t i;
    json_t *x;
    json_array_foreach (v, i, x) {
        snprintf(c2, sizeof(c2), "%.400s[%zu]", ctx, i);
        if (!json_is_string(x))
            return err_set(e, -EINVAL, "%s: expected a string, got %s", c2, cfg_type_name(x));
        int r = filter_parse(json_string_value(x), c2, &en->filters[en->n_filters], e);
        if (r < 0)
            return r;
        en->n_filters++;
    }
    return 0;
}

static int devices_parse(json_t *v, const char *ctx, struct mp_entry *en, struct err *e)
{
    char c2[CTX_MAX];
    if (json_is_string(v)) {
        if (strcmp(json_string_value(v), "all") != 0)
            return err_set(e, -EINVAL, "%s: expected \"all\" or a list of GPU indices, got \"%s\"",
                           ctx, json_string_value(v));
        en->all_devices = true;
        return 0;
    }
    if (!json_is_array(v))
        return err_set(e, -EINVAL, "%s: expected \"all\" or a list of GPU indices, got %s", ctx,
                       cfg_type_name(v));
    if (json_array_size(v) == 0)
        return err_set(e, -EINVAL, "%s: an empty list selects no GPU", ctx);
    if (json_array_size(v) > MP_DEVICES_MAX)
        return err_set(e, -E2BIG, "%s: more than %u GPUs", ctx, MP_DEVICES_MAX);
    en->devices = xcalloc(json_array_size(v), sizeof(*en->devices));
    size_t i;
    json_t *x;
    json_array_foreach (v, i, x) {
        snprintf(c2, sizeof(c2), "%.400s[%zu]", ctx, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 1023)
            return err_set(e, -EINVAL, "%s: expected a GPU index (0..1023), got %s", c2,
                           json_is_integer(x) ? "a negative or too large integer"
                                              : cfg_type_name(x));
        unsigned d = (unsigned)json_integer_value(x);
        for (size_t k = 0; k < en->n_devices; k++)
            if (en->devices[k] == d)
                return err_set(e, -EINVAL, "%s: GPU %u is listed twice", c2, d);
        en->devices[en->n_devices++] = d;
    }
    return 0;
}

static int mig_devices_parse(json_t *v, const char *ctx, struct mp_entry *en, struct err *e)
{
    char c2[CTX_MAX];
    if (json_object_size(v) > MP_DEVICES_MAX)
        return err_set(e, -E2BIG, "%s: more than %u profiles", ctx, MP_DEVICES_MAX);
    en->mig_devices = xcalloc(json_object_size(v) + 1, sizeof(*en->mig_devices));
    const char *key;
    json_t *x;
    json_object_foreach (v, key, x) {
        snprintf(c2, sizeof(c2), "%.400s.\"%.64s\"", ctx, key);
        struct mp_mig_device *d = &en->mig_devices[en->n_mig_devices];
        int r = mp_profile_key_parse(key, &d->key, e);
        if (r < 0)
            return err_prefix(e, "%s", c2);
        strlcpy_s(d->profile, key, sizeof(d->profile));
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            json_integer_value(x) > MP_COUNT_MAX)
            return err_set(e, -EINVAL, "%s: expected a count (0..%u), got %s", c2, MP_COUNT_MAX,
                           json_is_integer(x) ? "one out of range" : cfg_type_name(x));
        d->count = (unsigned)json_integer_value(x);
        if (d->count > 0)
            en->n_mig_devices++;
    }
    return 0;
}

static const char *const entry_keys[] = {"devices", "mig-enabled", "mig-devices", "device-filter",
                                         NULL};

static int entry_parse(json_t *o, const char *ctx, struct mp_entry *en, struct err *e)
{
    char c2[CTX_MAX];
    if (!json_is_object(o))
        return err_set(e, -EINVAL, "%s: expected an object, got %s", ctx, cfg_type_name(o));
    int r = cfg_known_keys(o, ctx, entry_keys, e);
    if (r < 0)
        return r;
    json_t *v = json_object_get(o, "devices");
    snprintf(c2, sizeof(c2), "%.400s.devices", ctx);
    if (!v || json_is_null(v))
        return err_set(e, -EINVAL, "%s: required (\"all\" or a list of GPU indices)", c2);
    if ((r = devices_parse(v, c2, en, e)) < 0)
        return r;
    v = json_object_get(o, "mig-enabled");
    snprintf(c2, sizeof(c2), "%.400s.mig-enabled", ctx);
    if (!v || json_is_null(v))
        return err_set(e, -EINVAL, "%s: required (true or false)", c2);
    if (!json_is_boolean(v))
        return err_set(e, -EINVAL, "%s: expected true or false, got %s", c2, cfg_type_name(v));
    en->mig_enabled = json_is_true(v);
    v = json_object_get(o, "mig-devices");
    snprintf(c2, sizeof(c2), "%.400s.mig-devices", ctx);
    if (v && !json_is_null(v) && !json_is_object(v))
        return err_set(e, -EINVAL, "%s: expected a map from MIG profile to count, got %s", c2,
                       cfg_type_name(v));
    if (en->mig_enabled && (!v || json_is_null(v)))
        return err_set(e, -EINVAL,
                       "%s: required when mig-enabled is true ({} enables MIG with no devices)",
                       c2);
    if (!en->mig_enabled && json_object_size(v) > 0)
        return err_set(e, -EINVAL, "%s: must be empty when mig-enabled is false", c2);
    if (v && json_is_object(v) && (r = mig_devices_parse(v, c2, en, e)) < 0)
        return r;
    v = json_object_get(o, "device-filter");
    snprintf(c2, sizeof(c2), "%.400s.device-filter", ctx);
    if (v && !json_is_null(v) && (r = filters_parse(v, c2, en, e)) < 0)
        return r;
    return 0;
}

static void entry_clear(struct mp_entry *en)
{
    free(en->devices);
    free(en->filters);
    free(en->mig_devices);
}

void mp_spec_free(struct mp_spec *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_configs; i++) {
        for (size_t k = 0; k < s->configs[i].n_entries; k++)
            entry_clear(&s->configs[i].entries[k]);
        free(s->configs[i].entries);
        free(s->configs[i].name);
    }
    free(s->configs);
    free(s);
}

static const char *const top_keys[] = {"version", "mig-configs", NULL};

int mp_spec_parse(const char *buf, size_t len, const char *name, struct mp_spec **ret,
                  struct err *e)
{
    char ctx[CTX_MAX];
    if (len > MP_CONFIG_MAX_BYTES)
        return err_set(e, -E2BIG, "%s: %zu bytes, more than the %u a MIG config may have", name,
                       len, MP_CONFIG_MAX_BYTES);
    _cleanup_json_ json_t *root = NULL;
    int r = yaml_parse_one(buf, len, name, &root, e);
    if (r < 0)
        return r;
    if (!json_is_object(root))
        return err_set(e, -EINVAL, "%s: expected a map (version, mig-configs), got %s", name,
                       cfg_type_name(root));
    if ((r = cfg_known_keys(root, name, top_keys, e)) < 0)
        return r;
    const char *version = NULL;
    if ((r = cfg_string(root, "version", name, true, &version, e)) < 0)
        return r;
    if (strcmp(version, "v1") != 0)
        return err_set(e, -EINVAL, "%s.version: \"%s\" is not a supported version (v1)", name,
                       version);
    json_t *configs = NULL;
    if ((r = cfg_object(root, "mig-configs", name, true, &configs, e)) < 0)
        return r;
    _cleanup_(mp_spec_freep) struct mp_spec *s = xcalloc(1, sizeof(*s));
    s->configs = xcalloc(json_object_size(configs) + 1, sizeof(*s->configs));
    const char *key;
    json_t *list;
    json_object_foreach (configs, key, list) {
        snprintf(ctx, sizeof(ctx), "%.200s: mig-configs.%.253s", name, key);
        if (!key[0] || strlen(key) > MP_NAME_MAX)
            return err_set(e, -EINVAL, "%s: a config name is 1 to %u characters", ctx, MP_NAME_MAX);
        if (!json_is_array(list) || json_array_size(list) == 0)
            return err_set(e, -EINVAL, "%s: expected a non-empty list of entries, got %s", ctx,
                           json_is_array(list) ? "an empty list" : cfg_type_name(list));
        if (json_array_size(list) > MP_ENTRIES_MAX)
            return err_set(e, -E2BIG, "%s: more than %u entries", ctx, MP_ENTRIES_MAX);
        struct mp_config *c = &s->configs[s->n_configs++];
        c->name = xstrdup(key);
        c->entries = xcalloc(json_array_size(list), sizeof(*c->entries));
        size_t i;
        json_t *o;
        json_array_foreach (list, i, o) {
            char c2[CTX_MAX];
            snprintf(c2, sizeof(c2), "%.460s[%zu]", ctx, i);
            r = entry_parse(o, c2, &c->entries[c->n_entries++], e);
            if (r < 0)
                return r;
        }
    }
    *ret = steal_ptr(&s);
    return 0;
}

int mp_spec_load(const char *path, struct mp_spec **ret, struct err *e)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = file_read_all(path, MP_CONFIG_MAX_BYTES, &buf, &len, e);
    if (r < 0)
        return r;
    return mp_spec_parse(buf, len, path, ret, e);
}

const struct mp_config *mp_spec_find(const struct mp_spec *s, const char *name)
{
    for (size_t i = 0; s && name && i < s->n_configs; i++)
        if (strcmp(s->configs[i].name, name) == 0)
            return &s->configs[i];
    return NULL;
}
