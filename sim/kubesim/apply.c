/* SPDX-License-Identifier: Apache-2.0 */
/* Server-side apply, simplified: each Apply manager's field set (FieldsV1) is recorded; an apply
 * merges the configuration into the live object (maps merged, keyed lists merged by their merge
 * keys, other lists atomic) and removes the fields the manager owned before, no longer applies,
 * and no other manager owns. Conflicts between managers are not detected. */
#include <string.h>

#include "kubesim-internal.h"

const char *ks_merge_key(const char *field, json_t *sample);
json_t *ks_fieldset(json_t *v, const char *field);
bool ks_apply_merge(json_t *live, json_t *config, json_t *prev_fs, json_t *others_fs, json_t **ret,
                    struct err *e);

static char *item_key(json_t *item, const char *mk)
{
    json_t *k = json_pack("{s:O}", mk, json_object_get(item, mk));
    char *s = json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(k);
    char *r = xasprintf("k:%s", s ? s : "{}");
    free(s);
    return r;
}

json_t *ks_fieldset(json_t *v, const char *field)
{
    json_t *fs = json_object();
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach (v, k, x) {
            if (!field && (streq(k, "apiVersion") || streq(k, "kind")))
                continue;
            _cleanup_free_ char *fk = xasprintf("f:%s", k);
            json_object_set_new(fs, fk, ks_fieldset(x, k));
        }
    } else if (json_is_array(v) && field) {
        json_t *sample = json_array_get(v, 0);
        const char *mk = json_is_object(sample) ? ks_merge_key(field, sample) : NULL;
        if (!mk)
            return fs;
        size_t i;
        json_t *x;
        json_array_foreach (v, i, x) {
            if (!json_is_object(x) || !json_object_get(x, mk))
                continue;
            _cleanup_free_ char *ik = item_key(x, mk);
            json_t *sub = ks_fieldset(x, NULL);
            json_object_set_new(sub, ".", json_object());
            json_object_set_new(fs, ik, sub);
        }
    }
    return fs;
}

static void prune(json_t *obj, json_t *prev, json_t *now, json_t *others);

static void prune_list(json_t *arr, json_t *prev, json_t *now, json_t *others)
{
    const char *k;
    json_t *pv;
    json_object_foreach (prev, k, pv) {
        if (!str_has_prefix(k, "k:"))
            continue;
        json_t *key = json_loads(k + 2, 0, NULL);
        if (!json_is_object(key)) {
            json_decref(key);
            continue;
        }
        for (size_t i = json_array_size(arr); i-- > 0;) {
            json_t *item = json_array_get(arr, i);
            bool match = true;
            const char *kk;
            json_t *kv;
            json_object_foreach (key, kk, kv)
                if (!json_equal(json_object_get(item, kk), kv))
                    match = false;
            if (!match)
                continue;
            json_t *nv = json_object_get(now, k);
            json_t *ov = json_object_get(others, k);
            if (!nv && !ov)
                json_array_remove(arr, i);
            else
                prune(item, pv, nv, ov);
            break;
        }
        json_decref(key);
    }
}

static void prune(json_t *obj, json_t *prev, json_t *now, json_t *others)
{
    if (!json_is_object(obj) || !json_is_object(prev))
        return;
    const char *k;
    json_t *pv;
    json_object_foreach (prev, k, pv) {
        if (!str_has_prefix(k, "f:"))
            continue;
        const char *name = k + 2;
        json_t *nv = json_object_get(now, k);
        json_t *ov = json_object_get(others, k);
        json_t *child = json_object_get(obj, name);
        if (!child)
            continue;
        if (!nv && !ov) {
            json_object_del(obj, name);
            continue;
        }
        if (json_is_object(child))
            prune(child, pv, nv, ov);
        else if (json_is_array(child))
            prune_list(child, pv, nv, ov);
    }
}

bool ks_apply_merge(json_t *live, json_t *config, json_t *prev_fs, json_t *others_fs, json_t **ret,
                    struct err *e)
{
    json_t *merged = NULL;
    if (ksim_strategic_merge_patch(live, config, &merged, e) < 0)
        return false;
    if (json_is_object(prev_fs)) {
        json_t *now = ks_fieldset(config, NULL);
        json_t *meta = json_object_get(merged, "metadata");
        json_t *name = json_incref(json_object_get(meta, "name"));
        json_t *ns = json_incref(json_object_get(meta, "namespace"));
        prune(merged, prev_fs, now, others_fs);
        meta = kobj_ensure_object(merged, "metadata");
        if (name)
            json_object_set_new(meta, "name", name);
        if (ns)
            json_object_set_new(meta, "namespace", ns);
        json_decref(now);
    }
    *ret = merged;
    return true;
}

static bool fs_has_children(json_t *fs)
{
    const char *k;
    json_t *v;
    json_object_foreach (fs, k, v)
        if (str_has_prefix(k, "f:") || str_has_prefix(k, "k:"))
            return true;
    return false;
}

static json_t *list_find(json_t *list, json_t *key)
{
    size_t i;
    json_t *item;
    json_array_foreach (list, i, item) {
        bool match = json_is_object(item);
        const char *kk;
        json_t *kv;
        json_object_foreach (key, kk, kv)
            if (!json_equal(json_object_get(item, kk), kv))
                match = false;
        if (match)
            return item;
    }
    return NULL;
}

int ks_apply_conflicts(json_t *mine, json_t *theirs, json_t *cfg, json_t *live, const char *path,
                       const char *manager, bool force, json_t *causes);
int ks_apply_conflicts(json_t *mine, json_t *theirs, json_t *cfg, json_t *live, const char *path,
                       const char *manager, bool force, json_t *causes)
{
    int n = 0;
    const char *k;
    json_t *m;
    void *tmp;
    json_object_foreach_safe (mine, tmp, k, m) {
        json_t *th = json_object_get(theirs, k);
        if (!th)
            continue;
        json_t *c = NULL, *l = NULL;
        _cleanup_free_ char *p = NULL;
        if (str_has_prefix(k, "f:")) {
            c = json_object_get(cfg, k + 2);
            l = json_object_get(live, k + 2);
            p = xasprintf("%s.%s", path, k + 2);
        } else if (str_has_prefix(k, "k:")) {
            json_t *key = json_loads(k + 2, 0, NULL);
            if (!json_is_object(key)) {
                json_decref(key);
                continue;
            }
            c = list_find(cfg, key);
            l = list_find(live, key);
            struct sbuf b;
            sbuf_init(&b, 4096);
            const char *kk;
            json_t *kv;
            json_object_foreach (key, kk, kv) {
                char *vs = json_dumps(kv, JSON_ENCODE_ANY | JSON_COMPACT);
                sbuf_addf(&b, "[%s=%s]", kk, vs ? vs : "");
                free(vs);
            }
            /* A key too long for b is named as fieldsV1 spells it rather than cut. */
            p = sbuf_check(&b) == 0 ? xasprintf("%s%s", path, b.data ? b.data : "")
                                    : xasprintf("%s[%s]", path, k + 2);
            sbuf_free(&b);
            json_decref(key);
        } else {
            continue;
        }
        if (fs_has_children(m) && fs_has_children(th)) {
            n += ks_apply_conflicts(m, th, c, l, p, manager, force, causes);
            continue;
        }
        if (json_equal(c, l) || (!c && !l))
            continue;
        n++;
        _cleanup_free_ char *msg = xasprintf("conflict with \"%s\"", manager);
        json_array_append_new(causes, json_pack("{s:s,s:s,s:s}", "reason", "FieldManagerConflict",
                                                "message", msg, "field", p));
        if (force)
            json_object_del(theirs, k);
    }
    return n;
}
