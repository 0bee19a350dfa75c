/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The opaque configuration of gpu.nvidia.com (dra-plugin.h): resource.nvidia.com/v1beta1
 * GpuConfig and MigDeviceConfig, decoded strictly, every error naming the field. Pure.
 */
#include <string.h>

#include "dra-plugin.h"
#include "kobj.h"

#define MIN_PINNED_LIMIT (1024 * 1024) /* 1Mi: MPS counts the limit in MB */

static const char *const intervals[] = {"Default", "Short", "Medium", "Long", NULL};

const char *dra_strategy_name(enum dra_strategy s)
{
    return s == DRA_SHARE_TIME_SLICING ? "TimeSlicing" : s == DRA_SHARE_MPS ? "MPS" : "";
}

const char *dra_interval_name(enum dra_interval i)
{
    return (unsigned)i < 4 ? intervals[i] : "Default";
}

/* Every key of obj must be one of allowed (NULL-terminated). */
static int only_fields(const json_t *obj, const char *const *allowed, const char *where,
                       const char *path, const char *why, struct err *e)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)obj, k, v) {
        bool ok = false;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = strcmp(allowed[i], k) == 0;
        if (!ok)
            return err_set(e, -EINVAL, "%s: %s%s%s: unknown field%s", where, path, *path ? "." : "",
                           k, why ? why : "");
    }
    return 0;
}

/* A quantity of bytes: a string ("10Gi") or an integer. */
static int bytes_of(const json_t *v, const char *where, const char *path, int64_t *ret,
                    struct err *e)
{
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return err_set(e, -EINVAL, "%s: %s: must not be negative", where, path);
        *ret = json_integer_value(v);
        return 0;
    }
    const char *s = json_string_value(v);
    int64_t milli = 0;
    bool neg = false;
    if (!s || !kobj_valid_quantity(s, &neg) || kobj_quantity_milli(s, &milli) < 0)
        return err_set(e, -EINVAL, "%s: %s: not a quantity (such as 10Gi)", where, path);
    if (neg)
        return err_set(e, -EINVAL, "%s: %s: \"%s\" is negative", where, path, s);
    *ret = milli / 1000 + (milli % 1000 ? 1 : 0);
    return 0;
}

static int parse_mps(const json_t *mps, const char *where, struct dra_config *c, struct err *e)
{
    struct dra_sharing *sh = &c->sharing;
    static const char *const fields[] = {"defaultActiveThreadPercentage",
                                         "defaultPinnedDeviceMemoryLimit",
                                         "defaultPerDevicePinnedMemoryLimit", "multiUser", NULL};
    if (!json_is_object(mps))
        return err_set(e, -EINVAL, "%s: sharing.mpsConfig: not an object", where);
    int r = only_fields(mps, fields, where, "sharing.mpsConfig", NULL, e);
    if (r < 0)
        return r;
    json_t *v = json_object_get(mps, "defaultActiveThreadPercentage");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 100)
            return err_set(e, -EINVAL,
                           "%s: sharing.mpsConfig.defaultActiveThreadPercentage: must be an "
                           "integer from 1 to 100",
                           where);
        sh->active_thread_percentage = (int)json_integer_value(v);
    }
    v = json_object_get(mps, "defaultPinnedDeviceMemoryLimit");
    if (v && !json_is_null(v)) {
        if ((r = bytes_of(v, where, "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit",
                          &sh->pinned_memory_limit, e)) < 0)
            return r;
        if (sh->pinned_memory_limit < MIN_PINNED_LIMIT)
            return err_set(e, -EINVAL,
                           "%s: sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: below 1Mi",
                           where);
    }
    v = json_object_get(mps, "defaultPerDevicePinnedMemoryLimit");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v))
            return err_set(e, -EINVAL,
                           "%s: sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit: not a map of "
                           "device (index or UUID) to quantity",
                           where);
        const char *k;
        json_t *q;
        json_object_foreach (v, k, q) {
            char path[GPU_UUID_MAX + 64];
            snprintf(path, sizeof(path), "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[%s]",
                     k);
            if (c->n_limits == DRA_MPS_LIMITS_MAX)
                return err_set(e, -E2BIG, "%s: %s: more than %d devices", where, path,
                               DRA_MPS_LIMITS_MAX);
            bool index = k[0] != 0, uuid = str_has_prefix(k, "GPU-") || str_has_prefix(k, "MIG-");
            for (const char *p = k; *p; p++)
                index = index && *p >= '0' && *p <= '9';
            if ((!index && !uuid) || strlen(k) >= GPU_UUID_MAX)
                return err_set(e, -EINVAL, "%s: %s: not a device index or UUID", where, path);
            struct dra_mps_limit *l = &c->limits[c->n_limits];
            if ((r = bytes_of(q, where, path, &l->bytes, e)) < 0)
                return r;
            if (l->bytes < MIN_PINNED_LIMIT)
                return err_set(e, -EINVAL, "%s: %s: below 1Mi", where, path);
            strlcpy_s(l->device, k, sizeof(l->device));
            c->n_limits++;
        }
    }
    v = json_object_get(mps, "multiUser");
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v))
            return err_set(e, -EINVAL, "%s: sharing.mpsConfig.multiUser: not a boolean", where);
        sh->multi_user = json_is_true(v);
    }
    return 0;
}

static int parse_sharing(const json_t *s, enum dra_config_kind kind, const char *where,
                         struct dra_config *c, struct err *e)
{
    struct dra_sharing *sh = &c->sharing;
    static const char *const gpu_fields[] = {"strategy", "timeSlicingConfig", "mpsConfig", NULL};
    static const char *const mig_fields[] = {"strategy", "mpsConfig", NULL};
    if (!json_is_object(s))
        return err_set(e, -EINVAL, "%s: sharing: not an object", where);
    int r = only_fields(
        s, kind == DRA_CONFIG_GPU ? gpu_fields : mig_fields, where, "sharing",
        kind == DRA_CONFIG_MIG ? " (a MigDeviceConfig has no time-slice interval)" : NULL, e);
    if (r < 0)
        return r;
    const char *st = json_string_value(json_object_get(s, "strategy"));
    if (!st)
        return err_set(e, -EINVAL, "%s: sharing.strategy: required (TimeSlicing or MPS)", where);
    if (strcmp(st, "TimeSlicing") == 0)
        sh->strategy = DRA_SHARE_TIME_SLICING;
    else if (strcmp(st, "MPS") == 0)
        sh->strategy = DRA_SHARE_MPS;
    else
        return err_set(e, -EINVAL,
                       "%s: sharing.strategy: unknown value \"%s\"; one of TimeSlicing, "
                       "MPS",
                       where, st);
    json_t *ts = json_object_get(s, "timeSlicingConfig");
    json_t *mps = json_object_get(s, "mpsConfig");
    if (ts && !json_is_null(ts)) {
        if (sh->strategy != DRA_SHARE_TIME_SLICING)
            return err_set(e, -EINVAL, "%s: sharing.timeSlicingConfig: set, but the strategy is %s",
                           where, st);
        static const char *const ts_fields[] = {"interval", NULL};
        if (!json_is_object(ts))
            return err_set(e, -EINVAL, "%s: sharing.timeSlicingConfig: not an object", where);
        if ((r = only_fields(ts, ts_fields, where, "sharing.timeSlicingConfig", NULL, e)) < 0)
            return r;
        json_t *iv = json_object_get(ts, "interval");
        if (iv && !json_is_null(iv)) {
            const char *name = json_string_value(iv);
            size_t i = 0;
            while (intervals[i] && !(name && strcmp(intervals[i], name) == 0))
                i++;
            if (!intervals[i])
                return err_set(e, -EINVAL,
                               "%s: sharing.timeSlicingConfig.interval: unknown value \"%s\"; one "
                               "of Default, Short, Medium, Long",
                               where, name ? name : "(not a string)");
            sh->interval = (enum dra_interval)i;
        }
    }
    if (mps && !json_is_null(mps)) {
        if (sh->strategy != DRA_SHARE_MPS)
            return err_set(e, -EINVAL, "%s: sharing.mpsConfig: set, but the strategy is %s", where,
                           st);
        if ((r = parse_mps(mps, where, c, e)) < 0)
            return r;
    }
    return 0;
}

int dra_config_parse(const json_t *params, const char *where, struct dra_config *ret, struct err *e)
{
    static const char *const fields[] = {"apiVersion", "kind", "sharing", NULL};
    if (!json_is_object(params))
        return err_set(e, -EINVAL, "%s: parameters: not an object", where);
    const char *av = json_string_value(json_object_get(params, "apiVersion"));
    const char *kind = json_string_value(json_object_get(params, "kind"));
    if (!av || strcmp(av, DRA_CONFIG_API_VERSION) != 0)
        return err_set(e, -EINVAL, "%s: apiVersion \"%s\": expected %s", where, av ? av : "",
                       DRA_CONFIG_API_VERSION);
    struct dra_config c = {.sharing = {.active_thread_percentage = -1, .pinned_memory_limit = -1}};
    if (kind && strcmp(kind, "GpuConfig") == 0)
        c.kind = DRA_CONFIG_GPU;
    else if (kind && strcmp(kind, "MigDeviceConfig") == 0)
        c.kind = DRA_CONFIG_MIG;
    else
        return err_set(e, -EINVAL, "%s: kind \"%s\": gpuop serves GpuConfig and MigDeviceConfig",
                       where, kind ? kind : "");
    int r = only_fields(params, fields, where, "", NULL, e);
    if (r < 0)
        return r;
    json_t *s = json_object_get(params, "sharing");
    if (s && !json_is_null(s) && (r = parse_sharing(s, c.kind, where, &c, e)) < 0)
        return r;
    *ret = c;
    return 0;
}
