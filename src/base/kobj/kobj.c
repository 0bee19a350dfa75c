/* SPDX-License-Identifier: Apache-2.0 */
#include "kobj.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

#define KOBJ_SEGMENT_MAX 256

/* One step of a dotted path: a key on an object, a decimal index on an array. */
static json_t *step(const json_t *v, const char *seg)
{
    if (json_is_object(v))
        return json_object_get(v, seg);
    if (json_is_array(v)) {
        uint64_t i;
        if (seg[0] < '0' || seg[0] > '9' || parse_u64(seg, &i) < 0 || str_has_prefix(seg, "0x"))
            return NULL;
        return i < json_array_size(v) ? json_array_get(v, (size_t)i) : NULL;
    }
    return NULL;
}

json_t *kobj_path(const json_t *v, const char *dotted)
{
    char part[KOBJ_SEGMENT_MAX];
    const char *p = dotted ? dotted : "";
    json_t *cur = (json_t *)v;
    while (cur && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof(part))
            return NULL;
        memcpy(part, p, n);
        part[n] = '\0';
        cur = step(cur, part);
        p += n + (dot ? 1 : 0);
    }
    return cur;
}

const char *kobj_path_str(const json_t *v, const char *dotted)
{
    return json_string_value(kobj_path(v, dotted));
}

json_t *kobj_keys(const json_t *v, const char *const *keys)
{
    json_t *cur = (json_t *)v;
    for (; cur && *keys; keys++)
        cur = json_object_get(cur, *keys);
    return cur;
}

const char *kobj_str(const json_t *obj, const char *key)
{
    if (json_is_array(obj))
        return kobj_labels_get(obj, key); /* a compact label set, or NULL */
    return json_string_value(json_object_get(obj, key));
}

json_t *kobj_ensure_object(json_t *obj, const char *key)
{
    json_t *c = json_object_get(obj, key);
    if (!json_is_object(c)) {
        c = json_object();
        if (json_object_set_new(obj, key, c) < 0)
            return NULL;
    }
    return c;
}

json_t *kobj_ensure_keys(json_t *root, const char *const *keys)
{
    json_t *cur = json_is_object(root) ? root : NULL;
    for (; cur && *keys; keys++)
        cur = kobj_ensure_object(cur, *keys);
    return cur;
}

void kobj_path_copy(json_t *dst, const json_t *src, const char *dotted)
{
    char part[KOBJ_SEGMENT_MAX];
    const char *p = dotted;
    while (p && *p && json_is_object(dst)) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof(part))
            return;
        memcpy(part, p, n);
        part[n] = '\0';
        p += n + (dot ? 1 : 0);
        if (n == 0)
            continue; /* "a..b" is "a.b" */
        json_t *v = json_object_get(src, part);
        if (!v)
            return;
        if (!*p) {
            json_object_set(dst, part, v);
            return;
        }
        if (!json_is_object(v))
            return;
        dst = kobj_ensure_object(dst, part);
        src = v;
    }
}

json_t *kobj_merge_patch(const json_t *target, const json_t *patch)
{
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *res = json_is_object(target) ? json_deep_copy(target) : json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)patch, k, v) {
        if (json_is_null(v)) {
            json_object_del(res, k);
            continue;
        }
        json_object_set_new(res, k, kobj_merge_patch(json_object_get(res, k), v));
    }
    return res;
}

#define INTERN_FLAGS (JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY)

json_t *kobj_intern(json_t *table, json_t *v)
{
    if (!table || !v)
        return v;
    _cleanup_free_ char *key = json_dumps(v, INTERN_FLAGS);
    if (!key)
        return v; /* out of memory for the text: not shared, still right */
    json_t *have = json_object_get(table, key);
    if (have) {
        json_incref(have);
        json_decref(v);
        return have;
    }
    json_object_set(table, key, v);
    return v;
}

bool kobj_intern_check(const json_t *table)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)table, k, v) {
        _cleanup_free_ char *text = json_dumps(v, INTERN_FLAGS);
        if (!text || strcmp(text, k) != 0)
            return false;
    }
    return true;
}

/* ---- metadata ------------------------------------------------------------------------------- */

static json_t *meta(const json_t *obj)
{
    return json_object_get(obj, "metadata");
}

const char *kobj_meta_str(const json_t *obj, const char *field)
{
    return json_string_value(json_object_get(meta(obj), field));
}

const char *kobj_name(const json_t *obj)
{
    return kobj_meta_str(obj, "name");
}

const char *kobj_namespace(const json_t *obj)
{
    return kobj_meta_str(obj, "namespace");
}

const char *kobj_uid(const json_t *obj)
{
    return kobj_meta_str(obj, "uid");
}

const char *kobj_resource_version(const json_t *obj)
{
    return kobj_meta_str(obj, "resourceVersion");
}

const char *kobj_creation_timestamp(const json_t *obj)
{
    return kobj_meta_str(obj, "creationTimestamp");
}

const char *kobj_deletion_timestamp(const json_t *obj)
{
    return kobj_meta_str(obj, "deletionTimestamp");
}

const char *kobj_kind(const json_t *obj)
{
    return kobj_str(obj, "kind");
}

const char *kobj_api_version(const json_t *obj)
{
    return kobj_str(obj, "apiVersion");
}

long long kobj_generation(const json_t *obj)
{
    json_t *g = json_object_get(meta(obj), "generation");
    return json_is_integer(g) ? (long long)json_integer_value(g) : 0;
}

json_t *kobj_labels(const json_t *obj)
{
    json_t *l = json_object_get(meta(obj), "labels");
    return json_is_object(l) || kobj_labels_is_compact(l) ? l : NULL;
}

json_t *kobj_annotations(const json_t *obj)
{
    json_t *a = json_object_get(meta(obj), "annotations");
    return json_is_object(a) ? a : NULL;
}

const char *kobj_label(const json_t *obj, const char *key)
{
    return kobj_labels_get(kobj_labels(obj), key);
}

const char *kobj_annotation(const json_t *obj, const char *key)
{
    return kobj_str(kobj_annotations(obj), key);
}

const char *kobj_ann_staged(const json_t *obj, const json_t *edits, const char *key)
{
    json_t *v = edits ? json_object_get(edits, key) : NULL;
    if (v)
        return json_string_value(v); /* null: removed */
    return kobj_annotation(obj, key);
}

void kobj_ann_stage(const json_t *obj, json_t **edits, const char *key, const char *value)
{
    if (streq_ptr(kobj_ann_staged(obj, *edits, key), value))
        return;
    if (!*edits)
        *edits = json_object();
    json_object_set_new(*edits, key, value ? json_string(value) : json_null());
}

void kobj_ann_stage_i64(const json_t *obj, json_t **edits, const char *key, int64_t value)
{
    char b[24];
    snprintf(b, sizeof(b), "%lld", (long long)value);
    kobj_ann_stage(obj, edits, key, b);
}

int64_t kobj_ann_staged_i64(const json_t *obj, const json_t *edits, const char *key, int64_t min,
                            int64_t dflt)
{
    const char *v = kobj_ann_staged(obj, edits, key);
    int64_t t;
    if (v && parse_i64(v, &t) == 0 && t >= min)
        return t;
    return dflt;
}

char *kobj_key(const json_t *obj)
{
    const char *ns = kobj_namespace(obj);
    const char *name = kobj_name(obj);
    if (!name)
        return NULL;
    return ns && ns[0] ? xasprintf("%s/%s", ns, name) : xstrdup(name);
}

bool kobj_owned_by(const json_t *obj, const char *kind, const char *uid)
{
    size_t i;
    json_t *ref;
    json_array_foreach (json_object_get(meta(obj), "ownerReferences"), i, ref) {
        if ((!kind || streq_ptr(kobj_str(ref, "kind"), kind)) &&
            (!uid || streq_ptr(kobj_str(ref, "uid"), uid)))
            return true;
    }
    return false;
}

bool kobj_has_finalizer(const json_t *obj, const char *f)
{
    size_t i;
    json_t *x;
    json_array_foreach (json_object_get(meta(obj), "finalizers"), i, x)
        if (streq_ptr(json_string_value(x), f))
            return true;
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *kobj_selector_string(const json_t *match_labels)
{
    size_t n = json_object_size(match_labels);
    if (n == 0)
        return strdup("");
    _cleanup_free_ const char **keys = calloc(n, sizeof(*keys));
    if (!keys)
        return NULL;
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)match_labels, k, v) {
        if (!json_is_string(v))
            return NULL;
        keys[i++] = k;
    }
    qsort(keys, n, sizeof(*keys), cmp_str);
    size_t len = 1;
    for (i = 0; i < n; i++)
        len += strlen(keys[i]) + json_string_length(json_object_get(match_labels, keys[i])) + 2;
    char *out = malloc(len), *w = out;
    if (!out)
        return NULL;
    for (i = 0; i < n; i++)
        w += sprintf(w, "%s%s=%s", i ? "," : "", keys[i],
                     json_string_value(json_object_get(match_labels, keys[i])));
    return out;
}
