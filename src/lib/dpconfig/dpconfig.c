/* SPDX-License-Identifier: Apache-2.0 */
/* NVIDIA's device-plugin config v1: parsing, validation, defaults and precedence. */
#include <ctype.h>
#include <string.h>

#include "dpconfig.h"
#include "yamlcfg.h"

#define DEFAULT_OUTPUT_FILE       "/etc/kubernetes/node-feature-discovery/features.d/gfd"
#define DEFAULT_MACHINE_TYPE_FILE "/sys/class/dmi/id/product_name"

/* ---- names -------------------------------------------------------------------------------- */

static const char *const mig_names[] = {"none", "single", "mixed"};
static const char *const devid_names[] = {"uuid", "index"};
static const char *const alloc_names[] = {"distributed", "packed"};
static const char *const discovery_names[] = {"auto", "nvml", "tegra"};
static const char *const sharing_names[] = {"none", "time-slicing", "mps"};
static const char *const list_names[] = {"envvar", "volume-mounts", "cdi-annotations", "cdi-cri"};

static int name_index(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (strcmp(names[i], s) == 0)
            return (int)i;
    return -1;
}

const char *dpconfig_mig_strategy_name(enum dpconfig_mig_strategy s)
{
    return (unsigned)s < ARRAY_SIZE(mig_names) ? mig_names[s] : "unknown";
}

int dpconfig_parse_mig_strategy(const char *s, enum dpconfig_mig_strategy *ret)
{
    int i = name_index(mig_names, ARRAY_SIZE(mig_names), s);
    if (i < 0)
        return -EINVAL;
    *ret = (enum dpconfig_mig_strategy)i;
    return 0;
}

const char *dpconfig_sharing_strategy_name(enum dpconfig_sharing_strategy s)
{
    return (unsigned)s < ARRAY_SIZE(sharing_names) ? sharing_names[s] : "unknown";
}

const char *dpconfig_device_id_strategy_name(enum dpconfig_device_id_strategy s)
{
    return (unsigned)s < ARRAY_SIZE(devid_names) ? devid_names[s] : "unknown";
}

const char *dpconfig_alloc_policy_name(enum dpconfig_alloc_policy p)
{
    return (unsigned)p < ARRAY_SIZE(alloc_names) ? alloc_names[p] : "unknown";
}

const char *dpconfig_discovery_strategy_name(enum dpconfig_discovery_strategy s)
{
    return (unsigned)s < ARRAY_SIZE(discovery_names) ? discovery_names[s] : "unknown";
}

int dpconfig_parse_list_strategy(const char *s, unsigned *ret_bit)
{
    int i = name_index(list_names, ARRAY_SIZE(list_names), s);
    if (i < 0)
        return -EINVAL;
    *ret_bit = 1u << i;
    return 0;
}

/* ---- lifetime ----------------------------------------------------------------------------- */

struct dpconfig *dpconfig_new(void)
{
    struct dpconfig *c = xcalloc(1, sizeof(*c));
    c->mig_strategy = DPCONFIG_MIG_NONE;
    c->fail_on_init_error = true;
    c->nvidia_driver_root = xstrdup("/");
    c->plugin.device_list_strategy = DPCONFIG_LIST_DEFAULT;
    c->plugin.device_id_strategy = DPCONFIG_DEVICE_ID_UUID;
    c->plugin.cdi_annotation_prefix = xstrdup("cdi.k8s.io/");
    c->plugin.nvidia_ctk_path = xstrdup("/usr/bin/nvidia-ctk");
    c->plugin.container_driver_root = xstrdup("/driver-root");
    c->plugin.shared_devices_allocation_policy = DPCONFIG_ALLOC_DISTRIBUTED;
    c->gfd.sleep_interval_ms = 60000;
    c->gfd.output_file = xstrdup(DEFAULT_OUTPUT_FILE);
    c->gfd.machine_type_file = xstrdup(DEFAULT_MACHINE_TYPE_FILE);
    c->mps.fail_requests_greater_than_one = true;
    return c;
}

static void sharing_clear(struct dpconfig_sharing *s)
{
    for (size_t i = 0; i < s->n_resources; i++) {
        free(s->resources[i].name);
        free(s->resources[i].rename);
    }
    free(s->resources);
    s->resources = NULL;
    s->n_resources = 0;
}

void dpconfig_free(struct dpconfig *c)
{
    if (!c)
        return;
    free(c->nvidia_driver_root);
    free(c->nvidia_dev_root);
    free(c->mps_root);
    free(c->plugin.cdi_annotation_prefix);
    free(c->plugin.nvidia_ctk_path);
    free(c->plugin.container_driver_root);
    free(c->gfd.output_file);
    free(c->gfd.machine_type_file);
    sharing_clear(&c->time_slicing);
    sharing_clear(&c->mps);
    for (size_t i = 0; i < c->n_warnings; i++)
        free(c->warnings[i]);
    free(c->warnings);
    free(c);
}

static void add_warning(struct dpconfig *c, const char *fmt, ...) GPUOP_PRINTF(2, 3);
static void add_warning(struct dpconfig *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    if (!s)
        return;
    c->warnings = xrealloc(c->warnings, (c->n_warnings + 1) * sizeof(char *));
    c->warnings[c->n_warnings++] = s;
}

/* ---- typed fields ------------------------------------------------------------------------- */

enum field_type {
    T_BOOL,
    T_STRING,
    T_MIG,
    T_DEVID,
    T_ALLOC,
    T_DISCOVERY,
    T_LIST,
    T_DURATION,
    T_IMEX_CHANNELS,
};

struct field_def {
    const char *path;
    enum field_type type;
    size_t off;
};

#define F(path, type, member)                         \
    {                                                 \
        path, type, offsetof(struct dpconfig, member) \
    }

static const struct field_def fields[] = {
    F("flags.migStrategy", T_MIG, mig_strategy),
    F("flags.failOnInitError", T_BOOL, fail_on_init_error),
    F("flags.nvidiaDriverRoot", T_STRING, nvidia_driver_root),
    F("flags.nvidiaDevRoot", T_STRING, nvidia_dev_root),
    F("flags.mpsRoot", T_STRING, mps_root),
    F("flags.gdrcopyEnabled", T_BOOL, gdrcopy_enabled),
    F("flags.gdsEnabled", T_BOOL, gds_enabled),
    F("flags.mofedEnabled", T_BOOL, mofed_enabled),
    F("flags.useNodeFeatureAPI", T_BOOL, use_node_feature_api),
    F("flags.deviceDiscoveryStrategy", T_DISCOVERY, device_discovery_strategy),
    F("flags.plugin.passDeviceSpecs", T_BOOL, plugin.pass_device_specs),
    F("flags.plugin.deviceListStrategy", T_LIST, plugin.device_list_strategy),
    F("flags.plugin.deviceIDStrategy", T_DEVID, plugin.device_id_strategy),
    F("flags.plugin.cdiAnnotationPrefix", T_STRING, plugin.cdi_annotation_prefix),
    F("flags.plugin.nvidiaCTKPath", T_STRING, plugin.nvidia_ctk_path),
    F("flags.plugin.containerDriverRoot", T_STRING, plugin.container_driver_root),
    F("flags.plugin.sharedDevicesAllocationPolicy", T_ALLOC,
      plugin.shared_devices_allocation_policy),
    F("flags.gfd.oneshot", T_BOOL, gfd.oneshot),
    F("flags.gfd.noTimestamp", T_BOOL, gfd.no_timestamp),
    F("flags.gfd.sleepInterval", T_DURATION, gfd.sleep_interval_ms),
    F("flags.gfd.outputFile", T_STRING, gfd.output_file),
    F("flags.gfd.machineTypeFile", T_STRING, gfd.machine_type_file),
    F("imex.channelIDs", T_IMEX_CHANNELS, imex),
    F("imex.required", T_BOOL, imex.required),
};

static const struct field_def *field_find(const char *path)
{
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
        if (strcmp(fields[i].path, path) == 0)
            return &fields[i];
    return NULL;
}

static void *field_ptr(struct dpconfig *c, const struct field_def *f)
{
    return (char *)c + f->off;
}

static int enum_from(const char *const *names, size_t n, const char *what, const char *value,
                     const char *source, int *ret, struct err *e)
{
    int i = name_index(names, n, value);
    if (i < 0) {
        char known[128] = "";
        size_t used = 0;
        for (size_t k = 0; k < n; k++) {
            int w = snprintf(known + used, sizeof(known) - used, "%s%s", k ? "|" : "", names[k]);
            if (w < 0 || (size_t)w >= sizeof(known) - used)
                break;
            used += (size_t)w;
        }
        return err_set(e, -EINVAL, "%s: unknown %s \"%s\" (%s)", source, what, value, known);
    }
    *ret = i;
    return 0;
}

static int set_bool(bool *dst, const char *value, const char *source, struct err *e)
{
    bool b;
    if (parse_bool(value, &b) < 0)
        return err_set(e, -EINVAL, "%s: \"%s\" is not a boolean (true|false)", source, value);
    *dst = b;
    return 0;
}

/* sleepInterval: a positive duration or "infinite". */
static int set_duration(uint64_t *dst, const char *value, const char *source, struct err *e)
{
    uint64_t ms;
    if (parse_duration_ms(value, &ms) < 0)
        return err_set(e, -EINVAL,
                       "%s: \"%s\" is not a duration (e.g. 60s, 5m, 1h30m, or infinite)", source,
                       value);
    if (ms == 0)
        return err_set(e, -EINVAL, "%s: the interval must be positive", source);
    *dst = ms;
    return 0;
}

static int list_add(unsigned *set, const char *item, const char *source, struct err *e)
{
    unsigned bit;
    if (dpconfig_parse_list_strategy(item, &bit) < 0)
        return err_set(e, -EINVAL,
                       "%s: invalid device list strategy \"%s\" "
                       "(envvar|volume-mounts|cdi-annotations|cdi-cri)",
                       source, item);
    *set |= bit;
    return 0;
}

/* A comma-separated list, as a flag or env var gives deviceListStrategy. */
static int set_list_csv(unsigned *dst, const char *value, const char *source, struct err *e)
{
    unsigned set = 0;
    _cleanup_free_ char *copy = xstrdup(value);
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok))
            tok++;
        size_t n = strlen(tok);
        while (n > 0 && isspace((unsigned char)tok[n - 1]))
            tok[--n] = '\0';
        int r = list_add(&set, tok, source, e);
        if (r < 0)
            return r;
    }
    if (!set)
        return err_set(e, -EINVAL, "%s: no device list strategy given", source);
    *dst = set;
    return 0;
}

static int imex_set_one(struct dpconfig *c, int64_t id, bool any, const char *source, struct err *e)
{
    if (any && id != 0)
        return err_set(e, -EINVAL, "%s: only the IMEX channel list [] or [0] is supported", source);
    c->imex.n_channel_ids = any ? 1 : 0;
    c->imex.channel_ids[0] = 0;
    return 0;
}

static int set_from_string(struct dpconfig *c, const struct field_def *f, const char *value,
                           const char *source, struct err *e)
{
    void *p = field_ptr(c, f);
    int i, r;
    switch (f->type) {
    case T_BOOL:
        return set_bool(p, value, source, e);
    case T_STRING:
        free(*(char **)p);
        *(char **)p = xstrdup(value);
        return 0;
    case T_MIG:
        r = enum_from(mig_names, ARRAY_SIZE(mig_names), "MIG strategy", value, source, &i, e);
        if (r == 0)
            *(enum dpconfig_mig_strategy *)p = (enum dpconfig_mig_strategy)i;
        return r;
    case T_DEVID:
        r = enum_from(devid_names, ARRAY_SIZE(devid_names), "device ID strategy", value, source, &i,
                      e);
        if (r == 0)
            *(enum dpconfig_device_id_strategy *)p = (enum dpconfig_device_id_strategy)i;
        return r;
    case T_ALLOC:
        r = enum_from(alloc_names, ARRAY_SIZE(alloc_names), "shared devices allocation policy",
                      value, source, &i, e);
        if (r == 0)
            *(enum dpconfig_alloc_policy *)p = (enum dpconfig_alloc_policy)i;
        return r;
    case T_DISCOVERY:
        r = enum_from(discovery_names, ARRAY_SIZE(discovery_names), "device discovery strategy",
                      value, source, &i, e);
        if (r == 0)
            *(enum dpconfig_discovery_strategy *)p = (enum dpconfig_discovery_strategy)i;
        return r;
    case T_LIST:
        return set_list_csv(p, value, source, e);
    case T_DURATION:
        return set_duration(p, value, source, e);
    case T_IMEX_CHANNELS: {
        /* "" or "0" (comma-separated; NVIDIA allows at most channel 0) */
        bool any = false;
        int64_t id = 0;
        _cleanup_free_ char *copy = xstrdup(value);
        char *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            int64_t v;
            if (parse_i64(tok, &v) < 0)
                return err_set(e, -EINVAL, "%s: \"%s\" is not an IMEX channel id", source, tok);
            if (any && v != id)
                return imex_set_one(c, 1, true, source, e);
            id = v;
            any = true;
        }
        return imex_set_one(c, id, any, source, e);
    }
    }
    return err_set(e, -EINVAL, "%s: unsupported field type", source);
}

int dpconfig_set(struct dpconfig *c, const char *field, const char *value, const char *source,
                 struct err *e)
{
    const struct field_def *f = field_find(field ? field : "");
    if (!source)
        source = field ? field : "(null)";
    if (!f)
        return err_set(e, -EINVAL, "%s: unknown config field \"%s\"", source,
                       field ? field : "(null)");
    if (!value)
        return err_set(e, -EINVAL, "%s: a value is required", source);
    return set_from_string(c, f, value, source, e);
}

/* ---- parsing ------------------------------------------------------------------------------ */

static char *path_join(const char *ctx, const char *key)
{
    return *ctx ? xasprintf("%s.%s", ctx, key) : xstrdup(key);
}

static int check_keys(json_t *obj, const char *path, const char *const *allowed, struct err *e)
{
    if (!json_is_object(obj))
        return err_set(e, -EINVAL, "%s: expected a mapping, got %s", *path ? path : "(top level)",
                       cfg_type_name(obj));
    const char *k;
    json_t *v;
    json_object_foreach (obj, k, v) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, k) == 0)
                ok = true;
        if (!ok) {
            _cleanup_free_ char *p = path_join(path, k);
            struct sbuf b _cleanup_sbuf_;
            sbuf_init(&b, 1024);
            for (const char *const *a = allowed; *a; a++)
                sbuf_addf(&b, "%s%s", a == allowed ? "" : ", ", *a);
            int r = sbuf_check_err(&b, e, "%s: unknown field: the list of known fields", p);
            if (r < 0)
                return r;
            return err_set(e, -EINVAL, "%s: unknown field (known: %s)", p, b.data ? b.data : "");
        }
    }
    return 0;
}

/* A scalar leaf from the file: checks its JSON type, then sets it through the typed field. */
static int set_from_json(struct dpconfig *c, const char *path, json_t *v, struct err *e)
{
    const struct field_def *f = field_find(path);
    if (!f)
        return err_set(e, -EINVAL, "%s: unknown field", path);
    switch (f->type) {
    case T_BOOL:
        if (json_is_boolean(v)) {
            *(bool *)field_ptr(c, f) = json_is_true(v);
            return 0;
        }
        if (json_is_string(v))
            return set_bool(field_ptr(c, f), json_string_value(v), path, e);
        return err_set(e, -EINVAL, "%s: expected true or false, got %s", path, cfg_type_name(v));
    case T_STRING:
    case T_MIG:
    case T_DEVID:
    case T_ALLOC:
    case T_DISCOVERY:
        if (!json_is_string(v))
            return err_set(e, -EINVAL, "%s: expected a string, got %s", path, cfg_type_name(v));
        return set_from_string(c, f, json_string_value(v), path, e);
    case T_DURATION:
        if (json_is_integer(v)) {
            /* A number is nanoseconds, as Go's time.Duration reads it. */
            json_int_t ns = json_integer_value(v);
            if (ns <= 0)
                return err_set(e, -EINVAL, "%s: the interval must be positive", path);
            uint64_t ms = (uint64_t)ns / 1000000u;
            if (ms == 0)
                return err_set(e, -EINVAL,
                               "%s: %lld ns is below the 1 ms resolution (durations in the file "
                               "are strings such as \"60s\"; plain numbers are nanoseconds)",
                               path, (long long)ns);
            *(uint64_t *)field_ptr(c, f) = ms;
            return 0;
        }
        if (!json_is_string(v))
            return err_set(e, -EINVAL, "%s: expected a duration string such as \"60s\", got %s",
                           path, cfg_type_name(v));
        return set_from_string(c, f, json_string_value(v), path, e);
    case T_LIST: {
        if (json_is_string(v)) {
            unsigned set = 0;
            int r = list_add(&set, json_string_value(v), path, e);
            if (r == 0)
                c->plugin.device_list_strategy = set;
            return r;
        }
        if (!json_is_array(v))
            return err_set(e, -EINVAL, "%s: expected a string or a list of strings, got %s", path,
                           cfg_type_name(v));
        if (json_array_size(v) == 0)
            return err_set(e, -EINVAL, "%s: no device list strategy given", path);
        unsigned set = 0;
        size_t i;
        json_t *item;
        json_array_foreach (v, i, item) {
            _cleanup_free_ char *ip = xasprintf("%s[%zu]", path, i);
            if (!json_is_string(item))
                return err_set(e, -EINVAL, "%s: expected a string, got %s", ip,
                               cfg_type_name(item));
            int r = list_add(&set, json_string_value(item), ip, e);
            if (r < 0)
                return r;
        }
        c->plugin.device_list_strategy = set;
        return 0;
    }
    case T_IMEX_CHANNELS: {
        if (!json_is_array(v))
            return err_set(e, -EINVAL, "%s: expected a list, got %s", path, cfg_type_name(v));
        if (json_array_size(v) > 1)
            return err_set(e, -EINVAL, "%s: only the IMEX channel list [] or [0] is supported",
                           path);
        if (json_array_size(v) == 0)
            return imex_set_one(c, 0, false, path, e);
        json_t *item = json_array_get(v, 0);
        if (!json_is_integer(item))
            return err_set(e, -EINVAL, "%s[0]: expected an integer, got %s", path,
                           cfg_type_name(item));
        return imex_set_one(c, json_integer_value(item), true, path, e);
    }
    }
    return err_set(e, -EINVAL, "%s: unsupported field", path);
}

/* Walks a mapping whose scalar members are typed fields; `nested` names sub-mappings handled by
 * the caller. */
static int parse_leaves(struct dpconfig *c, json_t *obj, const char *path,
                        const char *const *allowed, const char *const *nested, struct err *e)
{
    int r = check_keys(obj, path, allowed, e);
    if (r < 0)
        return r;
    const char *k;
    json_t *v;
    json_object_foreach (obj, k, v) {
        bool skip = json_is_null(v);
        for (const char *const *n = nested; n && *n && !skip; n++)
            if (strcmp(*n, k) == 0)
                skip = true;
        if (skip)
            continue;
        _cleanup_free_ char *p = path_join(path, k);
        r = set_from_json(c, p, v, e);
        if (r < 0)
            return r;
    }
    return 0;
}

static int parse_flags(struct dpconfig *c, json_t *flags, struct err *e)
{
    static const char *const keys[] = {"migStrategy",
                                       "failOnInitError",
                                       "nvidiaDriverRoot",
                                       "nvidiaDevRoot",
                                       "mpsRoot",
                                       "gdrcopyEnabled",
                                       "gdsEnabled",
                                       "mofedEnabled",
                                       "useNodeFeatureAPI",
                                       "deviceDiscoveryStrategy",
                                       "plugin",
                                       "gfd",
                                       NULL};
    static const char *const nested[] = {"plugin", "gfd", NULL};
    static const char *const plugin_keys[] = {"passDeviceSpecs",
                                              "deviceListStrategy",
                                              "deviceIDStrategy",
                                              "cdiAnnotationPrefix",
                                              "nvidiaCTKPath",
                                              "containerDriverRoot",
                                              "sharedDevicesAllocationPolicy",
                                              NULL};
    static const char *const gfd_keys[] = {"oneshot",    "noTimestamp",     "sleepInterval",
                                           "outputFile", "machineTypeFile", NULL};
    int r = parse_leaves(c, flags, "flags", keys, nested, e);
    if (r < 0)
        return r;
    json_t *plugin = json_object_get(flags, "plugin");
    if (plugin && !json_is_null(plugin)) {
        r = parse_leaves(c, plugin, "flags.plugin", plugin_keys, NULL, e);
        if (r < 0)
            return r;
    }
    json_t *gfd = json_object_get(flags, "gfd");
    if (gfd && !json_is_null(gfd)) {
        r = parse_leaves(c, gfd, "flags.gfd", gfd_keys, NULL, e);
        if (r < 0)
            return r;
    }
    return 0;
}

/* A resource name as NVIDIA's NewResourceName makes it: the nvidia.com/ prefix added when
 * missing, at most 63 characters, and (gpuop's check) a non-empty name of [A-Za-z0-9._-]. */
static int resource_name(const char *path, const char *s, char **ret, struct err *e)
{
    char *n = str_has_prefix(s, DPCONFIG_NAME_PREFIX) ? xstrdup(s)
                                                      : xasprintf("%s%s", DPCONFIG_NAME_PREFIX, s);
    const char *base = n + strlen(DPCONFIG_NAME_PREFIX);
    if (strlen(n) > DPCONFIG_NAME_MAX) {
        int r = err_set(e, -EINVAL,
                        "%s: fully-qualified resource name must be %d characters or less: %s", path,
                        DPCONFIG_NAME_MAX, n);
        free(n);
        return r;
    }
    bool ok = *base != '\0';
    for (const char *p = base; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
            ok = false;
    if (!ok) {
        int r = err_set(e, -EINVAL, "%s: invalid resource name \"%s\"", path, s);
        free(n);
        return r;
    }
    *ret = n;
    return 0;
}

static bool is_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

/* A device reference: GPU index "0", MIG index "0:1", "GPU-<uuid>", "MIG-<uuid>" or
 * "MIG-GPU-<uuid>/<gi>/<ci>". */
static bool device_ref_ok(const char *s)
{
    if (is_digits(s))
        return true;
    const char *colon = strchr(s, ':');
    if (colon) {
        _cleanup_free_ char *a = xstrndup(s, (size_t)(colon - s));
        return is_digits(a) && is_digits(colon + 1);
    }
    return (str_has_prefix(s, "GPU-") || str_has_prefix(s, "MIG-")) && strlen(s) > 4;
}

/* Validates `devices`; returns 1 when it asks for something other than "all". */
static int parse_devices(const char *path, json_t *v, struct err *e)
{
    if (json_is_string(v)) {
        if (strcmp(json_string_value(v), "all") == 0)
            return 0;
        return err_set(e, -EINVAL,
                       "%s: expected \"all\", a device count or a list of devices, got \"%s\"",
                       path, json_string_value(v));
    }
    if (json_is_integer(v)) {
        if (json_integer_value(v) <= 0)
            return err_set(e, -EINVAL, "%s: the device count must be > 0", path);
        return 1;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *item;
        json_array_foreach (v, i, item) {
            if (!json_is_string(item) || !device_ref_ok(json_string_value(item)))
                return err_set(e, -EINVAL,
                               "%s[%zu]: unsupported device reference %s%s%s (a GPU index, a "
                               "MIG index i:j, or a GPU-/MIG- UUID)",
                               path, i, json_is_string(item) ? "\"" : "",
                               json_is_string(item) ? json_string_value(item) : cfg_type_name(item),
                               json_is_string(item) ? "\"" : "");
        }
        return 1;
    }
    return err_set(e, -EINVAL, "%s: expected \"all\", a device count or a list of devices, got %s",
                   path, cfg_type_name(v));
}

static int parse_sharing_section(struct dpconfig *c, json_t *obj, const char *path, const char *id,
                                 struct dpconfig_sharing *s, struct err *e)
{
    static const char *const keys[] = {"renameByDefault", "failRequestsGreaterThanOne", "resources",
                                       NULL};
    static const char *const res_keys[] = {"name", "rename", "replicas", "devices", NULL};
    int r = check_keys(obj, path, keys, e);
    if (r < 0)
        return r;
    _cleanup_free_ char *p_rbd = path_join(path, "renameByDefault");
    _cleanup_free_ char *p_fail = path_join(path, "failRequestsGreaterThanOne");
    _cleanup_free_ char *p_res = path_join(path, "resources");
    json_t *v;

    bool rename_by_default = false;
    if ((v = json_object_get(obj, "renameByDefault")) && !json_is_null(v)) {
        if (!json_is_boolean(v))
            return err_set(e, -EINVAL, "%s: expected true or false, got %s", p_rbd,
                           cfg_type_name(v));
        rename_by_default = json_is_true(v);
    }
    bool fail = s->fail_requests_greater_than_one;
    if ((v = json_object_get(obj, "failRequestsGreaterThanOne")) && !json_is_null(v)) {
        if (!json_is_boolean(v))
            return err_set(e, -EINVAL, "%s: expected true or false, got %s", p_fail,
                           cfg_type_name(v));
        fail = json_is_true(v);
    }
    json_t *res = json_object_get(obj, "resources");
    if (res && !json_is_null(res) && !json_is_array(res))
        return err_set(e, -EINVAL, "%s: expected a list, got %s", p_res, cfg_type_name(res));
    if (!res || json_is_null(res) || json_array_size(res) == 0)
        return err_set(e, -EINVAL, "%s: no resources specified", p_res);
    if (json_array_size(res) > DPCONFIG_MAX_RESOURCES)
        return err_set(e, -EINVAL, "%s: too many resources (%zu; at most %d)", p_res,
                       json_array_size(res), DPCONFIG_MAX_RESOURCES);

    size_t n = json_array_size(res);
    struct dpconfig_replicated_resource *list = xcalloc(n, sizeof(*list));
    bool warn_rename = false, warn_devices = false;
    size_t i;
    json_t *item;
    json_array_foreach (res, i, item) {
        _cleanup_free_ char *ip = xasprintf("%s[%zu]", p_res, i);
        _cleanup_free_ char *p_name = path_join(ip, "name");
        _cleanup_free_ char *p_rename = path_join(ip, "rename");
        _cleanup_free_ char *p_rep = path_join(ip, "replicas");
        _cleanup_free_ char *p_dev = path_join(ip, "devices");
        r = check_keys(item, ip, res_keys, e);
        if (r < 0)
            goto fail;
        json_t *name = json_object_get(item, "name");
        if (!name || json_is_null(name)) {
            r = err_set(e, -EINVAL, "%s: missing required field 'name'", p_name);
            goto fail;
        }
        if (!json_is_string(name)) {
            r = err_set(e, -EINVAL, "%s: expected a string, got %s", p_name, cfg_type_name(name));
            goto fail;
        }
        r = resource_name(p_name, json_string_value(name), &list[i].name, e);
        if (r < 0)
            goto fail;
        /* One entry per resource: a second one for the same name was once ignored. */
        for (size_t k = 0; k < i; k++)
            if (strcmp(list[k].name, list[i].name) == 0) {
                r = err_set(e, -EINVAL, "%s: resource \"%s\" is already given by %s[%zu].name",
                            p_name, list[i].name, p_res, k);
                goto fail;
            }
        json_t *rep = json_object_get(item, "replicas");
        if (!rep || json_is_null(rep)) {
            r = err_set(e, -EINVAL, "%s: missing required field 'replicas'", p_rep);
            goto fail;
        }
        if (!json_is_integer(rep)) {
            r = err_set(e, -EINVAL, "%s: expected an integer, got %s", p_rep, cfg_type_name(rep));
            goto fail;
        }
        json_int_t nrep = json_integer_value(rep);
        if (nrep < 2) {
            r = err_set(e, -EINVAL, "%s: number of replicas must be >= 2", p_rep);
            goto fail;
        }
        if (nrep > DPCONFIG_MAX_REPLICAS) {
            r = err_set(e, -EINVAL, "%s: %lld replicas is more than gpuop supports (%d)", p_rep,
                        (long long)nrep, DPCONFIG_MAX_REPLICAS);
            goto fail;
        }
        list[i].replicas = (unsigned)nrep;
        _cleanup_free_ char *shared = xasprintf("%s.shared", list[i].name);
        json_t *rn = json_object_get(item, "rename");
        if (rn && !json_is_null(rn)) {
            if (!json_is_string(rn)) {
                r = err_set(e, -EINVAL, "%s: expected a string, got %s", p_rename,
                            cfg_type_name(rn));
                goto fail;
            }
            _cleanup_free_ char *renamed = NULL;
            if (*json_string_value(rn)) {
                r = resource_name(p_rename, json_string_value(rn), &renamed, e);
                if (r < 0)
                    goto fail;
            }
            /* NVIDIA forces rename to "" or, with renameByDefault, <name>.shared. */
            if (renamed && (!rename_by_default || strcmp(renamed, shared) != 0))
                warn_rename = true;
        }
        if (rename_by_default)
            list[i].rename = steal_ptr(&shared);
        json_t *dev = json_object_get(item, "devices");
        if (dev && !json_is_null(dev)) {
            r = parse_devices(p_dev, dev, e);
            if (r < 0)
                goto fail;
            if (r == 1)
                warn_devices = true;
        }
    }
    sharing_clear(s);
    s->present = true;
    s->rename_by_default = rename_by_default;
    s->fail_requests_greater_than_one = fail;
    s->resources = list;
    s->n_resources = n;
    if (warn_rename)
        add_warning(c,
                    "Setting the 'rename' field in sharing.%s.resources is not yet supported in "
                    "the config. Ignoring...",
                    id);
    if (warn_devices)
        add_warning(c,
                    "Customizing the 'devices' field in sharing.%s.resources is not yet "
                    "supported in the config. Ignoring...",
                    id);
    return 0;
fail:
    for (size_t k = 0; k < n; k++) {
        free(list[k].name);
        free(list[k].rename);
    }
    free(list);
    return r;
}

static int parse_sharing(struct dpconfig *c, json_t *obj, struct err *e)
{
    static const char *const keys[] = {"timeSlicing", "mps", NULL};
    int r = check_keys(obj, "sharing", keys, e);
    if (r < 0)
        return r;
    json_t *v = json_object_get(obj, "timeSlicing");
    if (v && !json_is_null(v)) {
        r = parse_sharing_section(c, v, "sharing.timeSlicing", "timeSlicing", &c->time_slicing, e);
        if (r < 0)
            return r;
    }
    v = json_object_get(obj, "mps");
    if (v && !json_is_null(v)) {
        r = parse_sharing_section(c, v, "sharing.mps", "mps", &c->mps, e);
        if (r < 0)
            return r;
    }
    return 0;
}

static int parse_resource_patterns(json_t *list, const char *path, struct err *e)
{
    static const char *const keys[] = {"pattern", "name", NULL};
    if (!json_is_array(list))
        return err_set(e, -EINVAL, "%s: expected a list, got %s", path, cfg_type_name(list));
    size_t i;
    json_t *item;
    json_array_foreach (list, i, item) {
        _cleanup_free_ char *ip = xasprintf("%s[%zu]", path, i);
        int r = check_keys(item, ip, keys, e);
        if (r < 0)
            return r;
        for (size_t k = 0; keys[k]; k++) {
            _cleanup_free_ char *kp = path_join(ip, keys[k]);
            json_t *v = json_object_get(item, keys[k]);
            if (!v || json_is_null(v))
                return err_set(e, -EINVAL, "%s: required field is missing", kp);
            if (!json_is_string(v))
                return err_set(e, -EINVAL, "%s: expected a string, got %s", kp, cfg_type_name(v));
            if (k == 1) {
                _cleanup_free_ char *n = NULL;
                r = resource_name(kp, json_string_value(v), &n, e);
                if (r < 0)
                    return r;
            }
        }
    }
    return (int)json_array_size(list);
}

static int parse_resources(struct dpconfig *c, json_t *obj, struct err *e)
{
    static const char *const keys[] = {"gpus", "mig", NULL};
    int r = check_keys(obj, "resources", keys, e);
    if (r < 0)
        return r;
    int total = 0;
    for (size_t k = 0; keys[k]; k++) {
        json_t *v = json_object_get(obj, keys[k]);
        if (!v || json_is_null(v))
            continue;
        _cleanup_free_ char *p = path_join("resources", keys[k]);
        r = parse_resource_patterns(v, p, e);
        if (r < 0)
            return r;
        total += r;
    }
    if (total > 0)
        add_warning(c, "Customizing the 'resources' field is not yet supported in the config. "
                       "Ignoring...");
    return 0;
}

static int parse_imex(struct dpconfig *c, json_t *obj, struct err *e)
{
    static const char *const keys[] = {"channelIDs", "required", NULL};
    return parse_leaves(c, obj, "imex", keys, NULL, e);
}

static int parse_root(struct dpconfig *c, json_t *root, struct err *e)
{
    static const char *const keys[] = {"version", "flags", "resources", "sharing", "imex", NULL};
    int r = check_keys(root, "", keys, e);
    if (r < 0)
        return r;
    json_t *v = json_object_get(root, "version");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v))
            return err_set(e, -EINVAL, "version: expected a string, got %s", cfg_type_name(v));
        if (strcmp(json_string_value(v), DPCONFIG_VERSION) != 0)
            return err_set(e, -EINVAL, "version: unknown version \"%s\" (only %s)",
                           json_string_value(v), DPCONFIG_VERSION);
    }
    if ((v = json_object_get(root, "flags")) && !json_is_null(v) && (r = parse_flags(c, v, e)) < 0)
        return r;
    if ((v = json_object_get(root, "resources")) && !json_is_null(v) &&
        (r = parse_resources(c, v, e)) < 0)
        return r;
    if ((v = json_object_get(root, "sharing")) && !json_is_null(v) &&
        (r = parse_sharing(c, v, e)) < 0)
        return r;
    if ((v = json_object_get(root, "imex")) && !json_is_null(v) && (r = parse_imex(c, v, e)) < 0)
        return r;
    return 0;
}

int dpconfig_parse(const char *buf, size_t len, const char *name, struct dpconfig **ret,
                   struct err *e)
{
    if (!name)
        name = "config";
    if (len > DPCONFIG_MAX_BYTES)
        return err_set(e, -EFBIG, "%s: config is larger than %u bytes", name, DPCONFIG_MAX_BYTES);
    _cleanup_json_ json_t *root = NULL;
    int r = yaml_parse_one(buf, len, name, &root, e);
    if (r < 0)
        return r;
    _cleanup_(dpconfig_freep) struct dpconfig *c = dpconfig_new();
    if (!json_is_null(root)) {
        r = parse_root(c, root, e);
        if (r < 0)
            return err_prefix(e, "%s", name);
    }
    *ret = steal_ptr(&c);
    return 0;
}

int dpconfig_load_file(const char *path, struct dpconfig **ret, struct err *e)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = file_read_all(path, DPCONFIG_MAX_BYTES, &buf, &len, e);
    if (r < 0)
        return err_prefix(e, "config file");
    return dpconfig_parse(buf, len, path, ret, e);
}

/* ---- precedence --------------------------------------------------------------------------- */

#define O(fld, flg, ev, k, mv, h)                                                 \
    {                                                                             \
        .field = fld, .flag = flg, .env = ev, .kind = k, .metavar = mv, .help = h \
    }

const struct svc_option dpconfig_plugin_options[] = {
    O("configFile", "config-file", "CONFIG_FILE", SVC_CONFIG_FILE, "PATH",
      "NVIDIA device-plugin config, version v1"),
    O("flags.migStrategy", "mig-strategy", "MIG_STRATEGY", SVC_STRING, "none|single|mixed",
      "MIG strategy (none)"),
    O("flags.failOnInitError", "fail-on-init-error", "FAIL_ON_INIT_ERROR", SVC_BOOL, NULL,
      "exit when NVML cannot start (true)"),
    O("flags.nvidiaDriverRoot", "nvidia-driver-root", "NVIDIA_DRIVER_ROOT", SVC_STRING, "PATH",
      "host root of the driver (/); also --driver-root"),
    O("flags.nvidiaDriverRoot", "driver-root", NULL, SVC_STRING, NULL, NULL),
    O("flags.nvidiaDevRoot", "dev-root", "NVIDIA_DEV_ROOT", SVC_STRING, "PATH",
      "host root of /dev/nvidia* (the driver root)"),
    O("flags.mpsRoot", "mps-root", "MPS_ROOT", SVC_STRING, "PATH",
      "MPS daemon root, needed for MPS sharing"),
    O("flags.gdrcopyEnabled", "gdrcopy-enabled", "GDRCOPY_ENABLED", SVC_BOOL, NULL,
      "accepted as NVIDIA's plugin accepts it"),
    O("flags.gdsEnabled", "gds-enabled", "GDS_ENABLED", SVC_BOOL, NULL,
      "accepted as NVIDIA's plugin accepts it"),
    O("flags.mofedEnabled", "mofed-enabled", "MOFED_ENABLED", SVC_BOOL, NULL,
      "accepted as NVIDIA's plugin accepts it"),
    O("flags.deviceDiscoveryStrategy", "device-discovery-strategy", "DEVICE_DISCOVERY_STRATEGY",
      SVC_STRING, "auto|nvml|tegra", "accepted as NVIDIA's plugin accepts it"),
    O("flags.plugin.passDeviceSpecs", "pass-device-specs", "PASS_DEVICE_SPECS", SVC_BOOL, NULL,
      "add /dev/nvidia* device specs (false)"),
    O("flags.plugin.deviceListStrategy", "device-list-strategy", "DEVICE_LIST_STRATEGY", SVC_STRING,
      "LIST", "envvar, volume-mounts, cdi-annotations, cdi-cri;\ncomma separated (volume-mounts)"),
    O("flags.plugin.deviceIDStrategy", "device-id-strategy", "DEVICE_ID_STRATEGY", SVC_STRING,
      "uuid|index", "(uuid)"),
    O("flags.plugin.cdiAnnotationPrefix", "cdi-annotation-prefix", "CDI_ANNOTATION_PREFIX",
      SVC_STRING, "P", "(cdi.k8s.io/)"),
    O("flags.plugin.nvidiaCTKPath", "nvidia-ctk-path", "NVIDIA_CTK_PATH", SVC_STRING, "PATH",
      "accepted as NVIDIA's plugin accepts it"),
    O("flags.plugin.containerDriverRoot", "container-driver-root", "CONTAINER_DRIVER_ROOT",
      SVC_STRING, "PATH", "accepted as NVIDIA's plugin accepts it"),
    O("flags.plugin.sharedDevicesAllocationPolicy", "shared-devices-allocation-policy",
      "SHARED_DEVICES_ALLOCATION_POLICY", SVC_STRING, "distributed|packed", "(distributed)"),
    O("imex.channelIDs", "imex-channel-ids", "IMEX_CHANNEL_IDS", SVC_STRING, "IDS",
      "accepted as NVIDIA's plugin accepts it"),
    O("imex.required", "imex-required", "IMEX_REQUIRED", SVC_BOOL, NULL,
      "accepted as NVIDIA's plugin accepts it"),
    {0},
};

/* NVIDIA's GFD also reads MIG_STRATEGY and FAIL_ON_INIT_ERROR (the names its operator sets) after
 * the GFD_ ones: listed first, so that the GFD_ variable, applied later, wins. */
const struct svc_option dpconfig_gfd_options[] = {
    O("flags.migStrategy", "mig-strategy", "MIG_STRATEGY", SVC_STRING, NULL, NULL),
    O("flags.failOnInitError", "fail-on-init-error", "FAIL_ON_INIT_ERROR", SVC_BOOL, NULL, NULL),
    O("flags.migStrategy", "mig-strategy", "GFD_MIG_STRATEGY", SVC_STRING, "STRATEGY",
      "none (default), single or mixed\n(or MIG_STRATEGY)"),
    O("flags.failOnInitError", "fail-on-init-error", "GFD_FAIL_ON_INIT_ERROR", SVC_BOOL, NULL,
      "fail when NVML cannot be initialised (default true);\nfalse: keep running with no GPU "
      "labels (or FAIL_ON_INIT_ERROR)"),
    O("flags.gfd.oneshot", "oneshot", "GFD_ONESHOT", SVC_BOOL, NULL, "label once and exit"),
    O("flags.gfd.noTimestamp", "no-timestamp", "GFD_NO_TIMESTAMP", SVC_BOOL, NULL,
      "omit nvidia.com/gfd.timestamp"),
    O("flags.gfd.sleepInterval", "sleep-interval", "GFD_SLEEP_INTERVAL", SVC_STRING, "DURATION",
      "time between relabels (60s; 'infinite' labels once\nand keeps running)"),
    O("flags.gfd.outputFile", "output-file", "GFD_OUTPUT_FILE", SVC_STRING, "FILE",
      "where the labels go; '-' is stdout (default\n"
      "/etc/kubernetes/node-feature-discovery/features.d/gfd,\nwritten atomically); also -o, "
      "--output"),
    {.field = "flags.gfd.outputFile", .flag = "output", .short_flag = 'o', .kind = SVC_STRING},
    O("flags.gfd.machineTypeFile", "machine-type-file", "GFD_MACHINE_TYPE_FILE", SVC_STRING, "FILE",
      "source of nvidia.com/gpu.machine (default\n/sys/class/dmi/id/product_name; missing: "
      "unknown)"),
    O("flags.useNodeFeatureAPI", "use-node-feature-api", "GFD_USE_NODE_FEATURE_API", SVC_BOOL, NULL,
      "accepted for compatibility; labels go to the file"),
    O("flags.deviceDiscoveryStrategy", "device-discovery-strategy", "GFD_DEVICE_DISCOVERY_STRATEGY",
      SVC_STRING, "S", "auto (default), nvml or tegra"),
    O("configFile", "config-file", "GFD_CONFIG_FILE", SVC_CONFIG_FILE, "FILE",
      "NVIDIA device-plugin config (v1, YAML or JSON): flags,\nflags.gfd and sharing "
      "(time-slicing, MPS)"),
    {0},
};

#undef O

/* ---- svc's config-file layer -------------------------------------------------------------- */

int dpconfig_layer_load(void *state, const char *path, struct err *e)
{
    struct dpconfig_layer_state *l = state;
    dpconfig_free(l->pending);
    l->pending = NULL;
    l->path = path;
    if (!path) {
        l->pending = dpconfig_new();
        return 0;
    }
    return dpconfig_load_file(path, &l->pending, e);
}

int dpconfig_layer_set(void *state, const char *field, const char *value, const char *source,
                       struct err *e)
{
    struct dpconfig_layer_state *l = state;
    return dpconfig_set(l->pending, field, value, source, e);
}

int dpconfig_layer_finish(void *state, struct err *e)
{
    (void)e;
    struct dpconfig_layer_state *l = state;
    if (!l->pending->nvidia_dev_root)
        l->pending->nvidia_dev_root = xstrdup(l->pending->nvidia_driver_root);
    return 0;
}

const struct svc_layer dpconfig_layer = {
    .load = dpconfig_layer_load,
    .set = dpconfig_layer_set,
    .finish = dpconfig_layer_finish,
};

const char *dpconfig_option_value(const struct svc_option *opts, const char *const *cli_values,
                                  dpconfig_getenv_fn getenv_fn, const char *field,
                                  const char **ret_source)
{
    if (!getenv_fn)
        getenv_fn = env_get;
    const char *val = NULL, *src = NULL;
    for (size_t i = 0; opts[i].field; i++)
        if (strcmp(opts[i].field, field) == 0 && opts[i].env && getenv_fn(opts[i].env)) {
            val = getenv_fn(opts[i].env);
            src = opts[i].env;
        }
    for (size_t i = 0; cli_values && opts[i].field; i++)
        if (strcmp(opts[i].field, field) == 0 && cli_values[i]) {
            val = cli_values[i];
            src = opts[i].flag;
        }
    if (ret_source)
        *ret_source = src;
    return val;
}

int dpconfig_apply_overrides(struct dpconfig *c, const struct svc_option *opts,
                             const char *const *cli_values, dpconfig_getenv_fn getenv_fn,
                             struct err *e)
{
    if (!getenv_fn)
        getenv_fn = env_get;
    for (size_t i = 0; opts[i].field; i++) {
        if (strcmp(opts[i].field, "configFile") == 0 || !opts[i].env)
            continue;
        const char *v = getenv_fn(opts[i].env);
        if (!v)
            continue;
        int r = dpconfig_set(c, opts[i].field, v, opts[i].env, e);
        if (r < 0)
            return r;
    }
    for (size_t i = 0; cli_values && opts[i].field; i++) {
        if (strcmp(opts[i].field, "configFile") == 0 || !cli_values[i])
            continue;
        char src[96];
        snprintf(src, sizeof(src), "--%s", opts[i].flag ? opts[i].flag : opts[i].field);
        int r = dpconfig_set(c, opts[i].field, cli_values[i], src, e);
        if (r < 0)
            return r;
    }
    return 0;
}

int dpconfig_resolve(const struct svc_option *opts, const char *const *cli_values,
                     dpconfig_getenv_fn getenv_fn, struct dpconfig **ret,
                     const char **ret_config_file, struct err *e)
{
    const char *path = dpconfig_option_value(opts, cli_values, getenv_fn, "configFile", NULL);
    _cleanup_(dpconfig_freep) struct dpconfig *c = NULL;
    if (path) {
        int r = dpconfig_load_file(path, &c, e);
        if (r < 0)
            return r;
    } else {
        c = dpconfig_new();
    }
    int r = dpconfig_apply_overrides(c, opts, cli_values, getenv_fn, e);
    if (r < 0)
        return r;
    if (!c->nvidia_dev_root)
        c->nvidia_dev_root = xstrdup(c->nvidia_driver_root);
    if (ret_config_file)
        *ret_config_file = path;
    *ret = steal_ptr(&c);
    return 0;
}

/* ---- sharing ------------------------------------------------------------------------------ */

static bool is_replicated(const struct dpconfig_sharing *s)
{
    for (size_t i = 0; i < s->n_resources; i++)
        if (s->resources[i].replicas > 1)
            return true;
    return false;
}

enum dpconfig_sharing_strategy dpconfig_sharing_strategy(const struct dpconfig *c)
{
    if (!c)
        return DPCONFIG_SHARING_NONE;
    if (is_replicated(&c->mps))
        return DPCONFIG_SHARING_MPS;
    if (is_replicated(&c->time_slicing))
        return DPCONFIG_SHARING_TIME_SLICING;
    return DPCONFIG_SHARING_NONE;
}

const struct dpconfig_sharing *dpconfig_active_sharing(const struct dpconfig *c)
{
    if (!c)
        return NULL;
    return dpconfig_sharing_strategy(c) == DPCONFIG_SHARING_MPS ? &c->mps : &c->time_slicing;
}

const struct dpconfig_replicated_resource *dpconfig_replicas_for(const struct dpconfig *c,
                                                                 const char *resource)
{
    if (!c || !resource)
        return NULL;
    const struct dpconfig_sharing *s = dpconfig_active_sharing(c);
    bool bare = !strchr(resource, '/');
    for (size_t i = 0; i < s->n_resources; i++) {
        const char *n = s->resources[i].name;
        if (bare ? (str_has_prefix(n, DPCONFIG_NAME_PREFIX) &&
                    strcmp(n + strlen(DPCONFIG_NAME_PREFIX), resource) == 0)
                 : strcmp(n, resource) == 0)
            return &s->resources[i];
    }
    return NULL;
}

unsigned dpconfig_replica_count(const struct dpconfig *c, const char *resource)
{
    const struct dpconfig_replicated_resource *r = dpconfig_replicas_for(c, resource);
    return r && r->replicas > 1 ? r->replicas : 1;
}
