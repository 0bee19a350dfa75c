/* SPDX-License-Identifier: Apache-2.0 */
/* managedFields for writes other than server-side apply: a create, update or patch records an
 * "Update" entry under the request's field manager (the fieldManager parameter, else the
 * User-Agent's product name) with the time and the fields it changed, as the API server does;
 * the fields it now owns are taken from the other managers' entries, and an entry left empty is
 * dropped. A write that changes nothing leaves managedFields as they were. */
#include <string.h>

#include "ks-objects.h"

/* The fields of now that differ from was (or that was lacks), as an object: maps recursed,
 * everything else whole. NULL when nothing differs. */
static json_t *changed_part(json_t *was, json_t *now)
{
    if (!json_is_object(now) || !json_is_object(was))
        return json_equal(was, now) ? NULL : json_incref(now);
    json_t *out = NULL;
    const char *k;
    json_t *v;
    json_object_foreach (now, k, v) {
        json_t *d = changed_part(json_object_get(was, k), v);
        if (!d)
            continue;
        if (!out)
            out = json_object();
        json_object_set_new(out, k, d);
    }
    return out;
}

/* Removes from theirs every leaf path mine holds; returns whether theirs is left empty. */
static bool fs_subtract(json_t *theirs, json_t *mine)
{
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe (theirs, tmp, k, v) {
        json_t *m = json_object_get(mine, k);
        if (!m)
            continue;
        if (json_object_size(m) == 0 || fs_subtract(v, m))
            json_object_del(theirs, k);
    }
    return json_object_size(theirs) == 0;
}

/* o's top and metadata copied, the rest shared: what managedFields compares may drop keys there
 * and only reads the rest. */
static json_t *copy_top_meta(json_t *o)
{
    json_t *c = json_copy(o);
    json_t *meta = json_object_get(o, "metadata");
    if (json_is_object(meta))
        json_object_set_new(c, "metadata", json_copy(meta));
    return c;
}

void ks_managed_record(struct ksim *ks, struct ks_type *t, json_t *old, json_t *res,
                       const char *sub)
{
    const char *mgr = ks->write_manager;
    if (!mgr)
        return;
    json_t *a = old ? copy_top_meta(old) : json_object();
    json_t *b = copy_top_meta(res);
    /* what the server keeps is nobody's field */
    const char *const meta_drop[] = {"managedFields",     "resourceVersion", "generation", "uid",
                                     "creationTimestamp", "selfLink",        "namespace",  "name"};
    for (size_t i = 0; i < ARRAY_SIZE(meta_drop); i++) {
        json_object_del(json_object_get(a, "metadata"), meta_drop[i]);
        json_object_del(json_object_get(b, "metadata"), meta_drop[i]);
    }
    if (json_object_size(json_object_get(b, "metadata")) == 0)
        json_object_del(b, "metadata");
    json_object_del(b, "apiVersion");
    json_object_del(b, "kind");
    _cleanup_json_ json_t *diff = changed_part(a, b);
    json_decref(a);
    json_decref(b);
    if (!diff)
        return;
    json_t *mine = ks_fieldset(diff, NULL);
    _cleanup_free_ char *gv = ks_type_gv(t);
    char now[40];
    ks_now_str(ks, now, sizeof(now));
    json_t *meta = kobj_ensure_object(res, "metadata");
    json_t *old_mfs = json_object_get(meta, "managedFields");
    json_t *mfs = json_array();
    json_t *prev = NULL;
    size_t i;
    json_t *mf;
    json_array_foreach (old_mfs, i, mf) {
        json_t *copy = json_deep_copy(mf);
        if (streq_ptr(kobj_str(mf, "manager"), mgr) &&
            streq_ptr(kobj_str(mf, "operation"), "Update") &&
            streq_ptr(kobj_str(mf, "subresource"), sub)) {
            prev = copy;
            continue;
        }
        json_t *fs = json_object_get(copy, "fieldsV1");
        if (json_is_object(fs) && json_object_size(fs) && fs_subtract(fs, mine)) {
            json_decref(copy);
            continue;
        }
        json_array_append_new(mfs, copy);
    }
    json_t *fs = mine;
    if (prev) {
        fs = kobj_merge_patch(json_object_get(prev, "fieldsV1"), mine);
        json_decref(mine);
        json_decref(prev);
    }
    json_t *entry =
        json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "manager", mgr, "operation", "Update", "apiVersion",
                  gv, "time", now, "fieldsType", "FieldsV1", "fieldsV1", fs);
    if (sub)
        json_object_set_new(entry, "subresource", json_string(sub));
    json_array_append_new(mfs, entry);
    json_object_set_new(meta, "managedFields", mfs);
}
