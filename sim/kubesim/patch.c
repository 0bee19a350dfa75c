/* SPDX-License-Identifier: Apache-2.0 */
/* Patches: RFC 6902 JSON patch, and Kubernetes' strategic merge patch with the merge keys of
 * the built-in types and the $-directives kubectl sends (RFC 7386 merge patch: kobj). */
#include <string.h>

#include "kubesim-internal.h"

/* ---- JSON patch --------------------------------------------------------------------------- */

/* Splits a JSON pointer into its parent container and the last token (unescaped). */
static int pointer_resolve(json_t *doc, const char *ptr, json_t **ret_parent, char **ret_last,
                           struct err *e)
{
    if (!ptr || (ptr[0] && ptr[0] != '/'))
        return err_set(e, -EINVAL, "invalid JSON pointer \"%s\"", ptr ? ptr : "");
    if (!ptr[0]) {
        *ret_parent = NULL;
        *ret_last = NULL;
        return 0;
    }
    json_t *cur = doc;
    const char *p = ptr + 1;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        char *tok = xmalloc(n + 1);
        size_t j = 0;
        for (size_t i = 0; i < n; i++) {
            if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) {
                tok[j++] = p[i + 1] == '0' ? '~' : '/';
                i++;
            } else {
                tok[j++] = p[i];
            }
        }
        tok[j] = '\0';
        if (!slash) {
            *ret_parent = cur;
            *ret_last = tok;
            return 0;
        }
        json_t *next = NULL;
        if (json_is_object(cur)) {
            next = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            unsigned idx;
            if (parse_uint(tok, &idx) == 0)
                next = json_array_get(cur, idx);
        }
        free(tok);
        if (!next)
            return err_set(e, -ENOENT, "doc is missing path: \"%s\"", ptr);
        cur = next;
        p = slash + 1;
    }
}

static json_t *pointer_get(json_t *doc, const char *ptr, struct err *e)
{
    json_t *parent;
    _cleanup_free_ char *last = NULL;
    if (pointer_resolve(doc, ptr, &parent, &last, e) < 0)
        return NULL;
    if (!parent)
        return doc;
    json_t *v = NULL;
    if (json_is_object(parent)) {
        v = json_object_get(parent, last);
    } else if (json_is_array(parent)) {
        unsigned idx;
        if (parse_uint(last, &idx) == 0)
            v = json_array_get(parent, idx);
    }
    if (!v)
        err_set(e, -ENOENT, "doc is missing path: \"%s\"", ptr);
    return v;
}

/* Removes and returns (a new reference) the value at ptr. */
static json_t *pointer_take(json_t *doc, const char *ptr, struct err *e)
{
    json_t *parent;
    _cleanup_free_ char *last = NULL;
    if (pointer_resolve(doc, ptr, &parent, &last, e) < 0)
        return NULL;
    if (!parent) {
        err_set(e, -EINVAL, "cannot remove the whole document");
        return NULL;
    }
    if (json_is_object(parent)) {
        json_t *v = json_object_get(parent, last);
        if (v) {
            json_incref(v);
            json_object_del(parent, last);
            return v;
        }
    } else if (json_is_array(parent)) {
        unsigned idx;
        if (parse_uint(last, &idx) == 0 && idx < json_array_size(parent)) {
            json_t *v = json_incref(json_array_get(parent, idx));
            json_array_remove(parent, idx);
            return v;
        }
    }
    err_set(e, -ENOENT, "unable to remove nonexistent key: %s: missing value", ptr);
    return NULL;
}

/* Puts v (steals it) at ptr; add semantics (arrays insert) or replace semantics. */
static int pointer_put(json_t **doc, const char *ptr, json_t *v, bool replace, struct err *e)
{
    json_t *parent;
    _cleanup_free_ char *last = NULL;
    if (pointer_resolve(*doc, ptr, &parent, &last, e) < 0) {
        json_decref(v);
        return -EINVAL;
    }
    if (!parent) {
        json_decref(*doc);
        *doc = v;
        return 0;
    }
    if (json_is_object(parent)) {
        if (replace && !json_object_get(parent, last)) {
            json_decref(v);
            return err_set(e, -ENOENT, "replace operation does not apply: doc is missing key: %s",
                           ptr);
        }
        json_object_set_new(parent, last, v);
        return 0;
    }
    if (json_is_array(parent)) {
        size_t n = json_array_size(parent);
        if (!replace && streq(last, "-")) {
            json_array_append_new(parent, v);
            return 0;
        }
        unsigned idx;
        if (parse_uint(last, &idx) < 0 || idx > n || (replace && idx == n)) {
            json_decref(v);
            return err_set(e, -EINVAL, "add operation does not apply: doc is missing path: %s",
                           ptr);
        }
        if (replace)
            json_array_set_new(parent, idx, v);
        else
            json_array_insert_new(parent, idx, v);
        return 0;
    }
    json_decref(v);
    return err_set(e, -EINVAL, "doc is missing path: %s", ptr);
}

int ksim_json_patch(json_t *target, json_t *ops, json_t **ret, struct err *e)
{
    if (!json_is_array(ops))
        return err_set(e, -EINVAL,
                       "json: cannot unmarshal %s into Go value of type jsonpatch.Patch",
                       json_is_object(ops) ? "object" : "value");
    json_t *doc = json_deep_copy(target);
    size_t i;
    json_t *op;
    json_array_foreach (ops, i, op) {
        const char *name = json_string_value(json_object_get(op, "op"));
        const char *path = json_string_value(json_object_get(op, "path"));
        const char *from = json_string_value(json_object_get(op, "from"));
        json_t *value = json_object_get(op, "value");
        int r = 0;
        if (!name || !path) {
            r = err_set(e, -EINVAL, "unexpected kind of operation: missing op or path");
        } else if (streq(name, "add") || streq(name, "replace")) {
            if (!value)
                r = err_set(e, -EINVAL, "%s operation: missing value", name);
            else
                r = pointer_put(&doc, path, json_deep_copy(value), streq(name, "replace"), e);
        } else if (streq(name, "remove")) {
            json_t *v = pointer_take(doc, path, e);
            r = v ? 0 : -ENOENT;
            json_decref(v);
        } else if (streq(name, "move") || streq(name, "copy")) {
            json_t *v = NULL;
            if (!from) {
                r = err_set(e, -EINVAL, "%s operation: missing from", name);
            } else if (streq(name, "move")) {
                v = pointer_take(doc, from, e);
            } else {
                json_t *src = pointer_get(doc, from, e);
                v = src ? json_deep_copy(src) : NULL;
            }
            if (!r)
                r = v ? pointer_put(&doc, path, v, false, e) : -ENOENT;
        } else if (streq(name, "test")) {
            json_t *cur = pointer_get(doc, path, e);
            if (!cur || !value || !json_equal(cur, value))
                r = err_set(e, -EINVAL, "testing value %s failed: test failed", path);
        } else {
            r = err_set(e, -EINVAL, "Unexpected kind: %s", name);
        }
        if (r < 0) {
            json_decref(doc);
            return r;
        }
    }
    *ret = doc;
    return 0;
}

/* ---- strategic merge patch ---------------------------------------------------------------- */

/* The merge key of a list field of the built-in types, or NULL for atomic lists. */
const char *ks_merge_key(const char *field, json_t *sample);
const char *ks_merge_key(const char *field, json_t *sample)
{
    static const char *const by_name[] = {
        "containers",       "initContainers", "ephemeralContainers", "volumes", "env",
        "imagePullSecrets", "resourceClaims", "schedulingGates",     NULL};
    for (size_t i = 0; by_name[i]; i++)
        if (streq(field, by_name[i]))
            return "name";
    if (streq(field, "volumeMounts"))
        return "mountPath";
    if (streq(field, "volumeDevices"))
        return "devicePath";
    if (streq(field, "conditions") || streq(field, "addresses"))
        return "type";
    if (streq(field, "ownerReferences"))
        return "uid";
    if (streq(field, "hostAliases"))
        return "ip";
    if (streq(field, "topologySpreadConstraints"))
        return "topologyKey";
    if (streq(field, "ports")) {
        /* container ports merge on containerPort, service ports on port */
        if (json_is_object(sample) && json_object_get(sample, "port") &&
            !json_object_get(sample, "containerPort"))
            return "port";
        return "containerPort";
    }
    return NULL;
}

static bool smp_primitive_merge(const char *field)
{
    return streq(field, "finalizers");
}

static json_t *smp_strip(json_t *v)
{
    if (json_is_object(v)) {
        json_t *o = json_object();
        const char *k;
        json_t *x;
        json_object_foreach (v, k, x) {
            if (k[0] == '$')
                continue;
            json_object_set_new(o, k, smp_strip(x));
        }
        return o;
    }
    if (json_is_array(v)) {
        json_t *a = json_array();
        size_t i;
        json_t *x;
        json_array_foreach (v, i, x) {
            if (json_is_object(x) && json_object_get(x, "$patch"))
                continue;
            json_array_append_new(a, smp_strip(x));
        }
        return a;
    }
    return json_incref(v);
}

static json_t *smp_map(json_t *orig, json_t *patch, struct err *e, int *r);

static json_t *smp_list(const char *field, json_t *orig, json_t *patch, struct err *e, int *r)
{
    size_t i;
    json_t *x;
    json_array_foreach (patch, i, x) {
        const char *d = json_string_value(json_object_get(x, "$patch"));
        if (d && streq(d, "replace"))
            return smp_strip(patch);
    }
    json_t *sample = json_array_size(patch) ? json_array_get(patch, 0) : json_array_get(orig, 0);
    const char *mk = json_is_object(sample) ? ks_merge_key(field, sample) : NULL;
    if (!json_is_array(orig))
        orig = NULL;
    if (!mk) {
        if (smp_primitive_merge(field) && orig) {
            json_t *res = json_deep_copy(orig);
            json_array_foreach (patch, i, x) {
                bool have = false;
                size_t j;
                json_t *y;
                json_array_foreach (res, j, y)
                    if (json_equal(x, y))
                        have = true;
                if (!have)
                    json_array_append(res, x);
            }
            return res;
        }
        return smp_strip(patch);
    }
    json_t *res = orig ? json_deep_copy(orig) : json_array();
    json_array_foreach (patch, i, x) {
        if (!json_is_object(x)) {
            json_array_append(res, x);
            continue;
        }
        json_t *key = json_object_get(x, mk);
        const char *d = json_string_value(json_object_get(x, "$patch"));
        if (!key) {
            if (d)
                continue;
            json_decref(res);
            *r = err_set(e, -EINVAL, "map: %s does not contain declared merge key: %s", field, mk);
            return NULL;
        }
        ssize_t found = -1;
        size_t j;
        json_t *y;
        json_array_foreach (res, j, y) {
            if (json_equal(json_object_get(y, mk), key)) {
                found = (ssize_t)j;
                break;
            }
        }
        if (d && streq(d, "delete")) {
            if (found >= 0)
                json_array_remove(res, (size_t)found);
            continue;
        }
        if (found >= 0) {
            json_t *m = smp_map(json_array_get(res, (size_t)found), x, e, r);
            if (*r < 0) {
                json_decref(res);
                return NULL;
            }
            if (m)
                json_array_set_new(res, (size_t)found, m);
            else
                json_array_remove(res, (size_t)found);
        } else {
            json_array_append_new(res, smp_strip(x));
        }
    }
    return res;
}

/* Orders list per a $setElementOrder list: listed elements first in that order, then the rest
 * in their old order. */
static void smp_set_order(json_t *list, json_t *order, const char *field)
{
    if (!json_is_array(list) || !json_is_array(order))
        return;
    json_t *sample = json_array_get(order, 0);
    const char *mk = json_is_object(sample) ? ks_merge_key(field, sample) : NULL;
    json_t *out = json_array();
    json_t *used = json_array();
    size_t i, j;
    json_t *o, *x;
    json_array_foreach (order, i, o) {
        json_t *want = mk ? json_object_get(o, mk) : o;
        json_array_foreach (list, j, x) {
            json_t *have = mk ? json_object_get(x, mk) : x;
            if (want && have && json_equal(want, have) && !json_is_true(json_array_get(used, j))) {
                json_array_append(out, x);
                while (json_array_size(used) <= j)
                    json_array_append_new(used, json_false());
                json_array_set_new(used, j, json_true());
                break;
            }
        }
    }
    json_array_foreach (list, j, x)
        if (!json_is_true(json_array_get(used, j)))
            json_array_append(out, x);
    json_array_clear(list);
    json_array_extend(list, out);
    json_decref(out);
    json_decref(used);
}

/* Returns the merged map (new reference), or NULL when the patch deletes it. */
static json_t *smp_map(json_t *orig, json_t *patch, struct err *e, int *r)
{
    const char *d = json_string_value(json_object_get(patch, "$patch"));
    if (d && streq(d, "delete"))
        return NULL;
    if (d && streq(d, "replace"))
        return smp_strip(patch);
    if (d) {
        *r = err_set(e, -EINVAL, "Unknown patch type: %s", d);
        return NULL;
    }
    json_t *res = json_is_object(orig) ? json_deep_copy(orig) : json_object();
    const char *k;
    json_t *v;
    json_object_foreach (patch, k, v) {
        if (k[0] == '$')
            continue;
        json_t *cur = json_object_get(res, k);
        if (json_is_null(v)) {
            json_object_del(res, k);
        } else if (json_is_object(v)) {
            json_t *m = smp_map(cur, v, e, r);
            if (*r < 0) {
                json_decref(res);
                return NULL;
            }
            if (m)
                json_object_set_new(res, k, m);
            else
                json_object_del(res, k);
        } else if (json_is_array(v)) {
            json_t *l = smp_list(k, cur, v, e, r);
            if (*r < 0) {
                json_decref(res);
                return NULL;
            }
            json_object_set_new(res, k, l);
        } else {
            json_object_set(res, k, v);
        }
    }
    json_object_foreach (patch, k, v) {
        if (str_has_prefix(k, "$deleteFromPrimitiveList/")) {
            const char *field = k + strlen("$deleteFromPrimitiveList/");
            json_t *list = json_object_get(res, field);
            if (!json_is_array(list) || !json_is_array(v))
                continue;
            for (size_t i = json_array_size(list); i-- > 0;) {
                size_t j;
                json_t *y;
                json_array_foreach (v, j, y)
                    if (json_equal(json_array_get(list, i), y)) {
                        json_array_remove(list, i);
                        break;
                    }
            }
        } else if (str_has_prefix(k, "$setElementOrder/")) {
            const char *field = k + strlen("$setElementOrder/");
            smp_set_order(json_object_get(res, field), v, field);
        }
    }
    json_t *retain = json_object_get(patch, "$retainKeys");
    if (json_is_array(retain)) {
        void *tmp;
        json_object_foreach_safe (res, tmp, k, v) {
            bool keep = false;
            size_t i;
            json_t *x;
            json_array_foreach (retain, i, x)
                if (streq_ptr(json_string_value(x), k))
                    keep = true;
            if (!keep)
                json_object_del(res, k);
        }
    }
    return res;
}

int ksim_strategic_merge_patch(json_t *target, json_t *patch, json_t **ret, struct err *e)
{
    if (!json_is_object(patch))
        return err_set(e, -EINVAL,
                       "json: cannot unmarshal into Go value of type map[string]interface {}");
    int r = 0;
    json_t *res = smp_map(target, patch, e, &r);
    if (r < 0)
        return r;
    if (!res)
        res = json_object();
    *ret = res;
    return 0;
}
