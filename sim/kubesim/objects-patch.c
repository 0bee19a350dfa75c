/* SPDX-License-Identifier: Apache-2.0 */
/* Patch (merge, JSON, strategic) and server-side apply of one object. */
#include <string.h>

#include "ks-objects.h"

static json_t *other_managers_fs(json_t *obj, const char *manager)
{
    json_t *all = json_object();
    size_t i;
    json_t *mf;
    json_array_foreach (kobj_path(obj, "metadata.managedFields"), i, mf) {
        if (streq_ptr(kobj_str(mf, "manager"), manager) &&
            streq_ptr(kobj_str(mf, "operation"), "Apply"))
            continue;
        json_t *fs = json_object_get(mf, "fieldsV1");
        if (json_is_object(fs)) {
            json_t *m = kobj_merge_patch(all, fs);
            json_decref(all);
            all = m;
        }
    }
    return all;
}

int ks_obj_apply(struct ksim *ks, struct ks_type *t, const char *ns, const char *name, json_t *old,
                 json_t *config, const char *mgr, bool force, bool dry, json_t **ret_obj,
                 struct ks_status *st)
{
    _cleanup_json_ json_t *cfg = config;
    if (!mgr || !mgr[0]) {
        return ks_bad_request(st, "PATCH requests with apply-patch+yaml content type require a "
                                  "fieldManager to be specified");
    }
    if (!json_is_object(cfg)) {
        return ks_bad_request(st, "error decoding YAML: the apply configuration must be an object");
    }
    _cleanup_free_ char *gv = ks_type_gv(t);
    if (!streq_ptr(kobj_kind(cfg), t->kind) || !streq_ptr(kobj_api_version(cfg), gv)) {
        _cleanup_free_ char *m =
            xasprintf("the API version in the data (%s) does not match the expected API version "
                      "(%s)",
                      kobj_api_version(cfg) ?: "", gv);
        return ks_bad_request(st, m);
    }
    const char *cname = kobj_name(cfg);
    if (cname && !streq(cname, name)) {
        _cleanup_free_ char *m = xasprintf(
            "the name of the object (%s) does not match the name on the URL (%s)", cname, name);
        return ks_bad_request(st, m);
    }
    json_object_set_new(kobj_ensure_object(cfg, "metadata"), "name", json_string(name));
    json_object_del(json_object_get(cfg, "metadata"), "managedFields");
    json_t *fs = ks_fieldset(cfg, NULL);
    char now[40];
    ks_now_str(ks, now, sizeof(now));
    json_t *entry =
        json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "manager", mgr, "operation", "Apply", "apiVersion",
                  gv, "time", now, "fieldsType", "FieldsV1", "fieldsV1", fs);
    if (!old) {
        json_t *obj = json_deep_copy(cfg);
        json_object_set_new(kobj_ensure_object(obj, "metadata"), "managedFields",
                            json_pack("[o]", entry));
        return ks_obj_create(ks, t, ns, obj, dry, ret_obj, st);
    }
    json_t *prev_fs = NULL;
    json_t *mfs = kobj_path(old, "metadata.managedFields");
    size_t i;
    json_t *mf;
    /* other managers' entries, copied: a forced apply takes their conflicting fields */
    json_t *newmf = json_array();
    json_t *causes = json_array();
    json_array_foreach (mfs, i, mf) {
        if (streq_ptr(kobj_str(mf, "manager"), mgr) &&
            streq_ptr(kobj_str(mf, "operation"), "Apply")) {
            prev_fs = json_object_get(mf, "fieldsV1");
            continue;
        }
        json_t *copy = json_deep_copy(mf);
        json_t *theirs = json_object_get(copy, "fieldsV1");
        if (json_is_object(theirs))
            ks_apply_conflicts(fs, theirs, cfg, old, "", kobj_str(mf, "manager") ?: "", force,
                               causes);
        json_array_append_new(newmf, copy);
    }
    if (json_array_size(causes) && !force) {
        struct sbuf b;
        sbuf_init(&b, 1u << 16);
        size_t n = json_array_size(causes);
        sbuf_addf(&b, "Apply failed with %zu conflict%s: ", n, n == 1 ? "" : "s");
        json_t *c;
        json_array_foreach (causes, i, c)
            sbuf_addf(&b, "%s%s: %s", i ? "; " : "", kobj_str(c, "message"), kobj_str(c, "field"));
        _cleanup_free_ char *msg = ks_text_take(&b);
        json_t *d = ks_status_details(t, name);
        json_object_set_new(d, "causes", causes);
        int r = ks_status_set(st, 409, "Conflict", d, "%s", msg);
        json_decref(newmf);
        json_decref(entry);
        return r;
    }
    json_decref(causes);
    json_t *fake = json_pack("{s:{s:O}}", "metadata", "managedFields", newmf);
    _cleanup_json_ json_t *others = other_managers_fs(fake, mgr);
    json_decref(fake);
    json_t *live = json_deep_copy(old);
    json_object_del(json_object_get(live, "metadata"), "managedFields");
    json_t *merged = NULL;
    struct err e = {0};
    if (!ks_apply_merge(live, cfg, prev_fs, others, &merged, &e)) {
        json_decref(live);
        json_decref(entry);
        _cleanup_free_ char *m = xasprintf("apply: %s", err_msg(&e));
        return ks_status_set(st, 422, "Invalid", NULL, "%s", m);
    }
    json_decref(live);
    /* managedFields: replace this manager's Apply entry; keep the time when nothing changed */
    bool same_fs = prev_fs && json_equal(prev_fs, fs);
    json_t *cmp_old = json_deep_copy(old);
    json_object_del(json_object_get(cmp_old, "metadata"), "managedFields");
    json_t *cmp_new = json_deep_copy(merged);
    if (t->has_status) {
        json_t *ost = json_object_get(old, "status");
        if (ost)
            json_object_set(cmp_new, "status", ost);
        else
            json_object_del(cmp_new, "status");
    }
    json_object_set(json_object_get(cmp_new, "metadata"), "resourceVersion",
                    kobj_path(old, "metadata.resourceVersion"));
    json_t *old_mf = json_array();
    json_array_foreach (mfs, i, mf)
        if (!(streq_ptr(kobj_str(mf, "manager"), mgr) &&
              streq_ptr(kobj_str(mf, "operation"), "Apply")))
            json_array_append(old_mf, mf);
    bool unchanged = same_fs && json_equal(cmp_old, cmp_new) && json_equal(old_mf, newmf);
    json_decref(old_mf);
    json_decref(cmp_old);
    json_decref(cmp_new);
    if (unchanged) {
        json_decref(newmf);
        json_decref(entry);
        json_decref(merged);
        if (ret_obj)
            *ret_obj = json_incref(old);
        return ks_status_ok(st, 200, NULL);
    }
    json_array_append_new(newmf, entry);
    json_object_set_new(kobj_ensure_object(merged, "metadata"), "managedFields", newmf);
    return ks_obj_update(ks, t, old, merged, NULL, dry, ret_obj, st);
}

/* RFC 7386 over a stored object: as kobj_merge_patch, but only the objects along the patch's
 * paths are copied; the rest is shared with target (stored objects are never changed in place). */
static json_t *merge_shared(json_t *target, json_t *patch)
{
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *res = json_is_object(target) ? json_copy(target) : json_object();
    const char *k;
    json_t *v;
    json_object_foreach (patch, k, v) {
        if (json_is_null(v)) {
            json_object_del(res, k);
            continue;
        }
        json_object_set_new(res, k, merge_shared(json_object_get(res, k), v));
    }
    return res;
}

/* Whether an update of t changes its new version only at the top and in metadata (what
 * merge_shared leaves shared may stay so): not custom resources (schema defaults), DRA kinds
 * (their defaults), Secrets (stringData folded into data) or Services (the clusterIP kept). */
static bool update_changes_top_only(struct ks_type *t)
{
    return !t->crd && !ks_dra_type(t) &&
           !(t->group[0] == '\0' && (streq(t->plural, "secrets") || streq(t->plural, "services")));
}

int ks_obj_patch(struct ksim *ks, struct ks_type *t, const char *name, json_t *old,
                 enum ks_patch_kind kind, json_t *patch, const char *sub, bool dry,
                 json_t **ret_obj, struct ks_status *st)
{
    _cleanup_json_ json_t *p = patch;
    if (!old)
        return ks_not_found(st, t, name);
    json_t *res = NULL;
    struct err e = {0};
    if (kind == KS_PATCH_MERGE) {
        if (!json_is_object(p))
            return ks_bad_request(st, "json: cannot unmarshal into Go value of type "
                                      "map[string]interface {}");
        if (update_changes_top_only(t)) {
            res = merge_shared(old, p);
            /* the update changes metadata in place: never old's */
            json_t *meta = json_object_get(res, "metadata");
            if (meta && meta == json_object_get(old, "metadata"))
                json_object_set_new(res, "metadata", json_copy(meta));
        } else {
            res = kobj_merge_patch(old, p);
        }
    } else if (kind == KS_PATCH_JSON) {
        if (ksim_json_patch(old, p, &res, &e) < 0)
            return ks_status_set(st, 422, "Invalid", ks_status_details(t, name),
                                 "the server rejected our request due to an error in our "
                                 "request: %s",
                                 err_msg(&e));
    } else {
        if (ksim_strategic_merge_patch(old, p, &res, &e) < 0)
            return ks_bad_request(st, err_msg(&e));
    }
    if (!json_is_object(res)) {
        json_decref(res);
        return ks_bad_request(st, "the patch produced a non-object");
    }
    const char *prv = kobj_resource_version(res);
    if (prv && !streq_ptr(prv, kobj_resource_version(old))) {
        json_decref(res);
        return ks_conflict(st, t, name);
    }
    return ks_obj_update(ks, t, old, res, sub, dry, ret_obj, st);
}
