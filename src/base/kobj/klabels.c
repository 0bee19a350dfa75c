/* SPDX-License-Identifier: Apache-2.0 */
/* Label sets (kobj.h): metadata.labels as the API gives it (an object) or compact (an array of
 * shared "key=value" strings sorted by key), read through one set of accessors. */
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "util.h"

/* A compact entry's text and the length of its key (before the first '='; keys never hold
 * one: kobj_labels_compact refuses them); false for what is no entry (a type-confused array
 * read as absent, never a crash). */
static bool entry(const json_t *s, const char **ret_text, size_t *ret_klen)
{
    const char *t = json_string_value(s);
    const char *eq = t ? strchr(t, '=') : NULL;
    if (!eq || (size_t)(eq - t) > KOBJ_LABEL_KEY_MAX)
        return false;
    *ret_text = t;
    *ret_klen = (size_t)(eq - t);
    return true;
}

/* strcmp(key, entry's key) where the entry's key is its first klen bytes. */
static int key_cmp(const char *key, const char *text, size_t klen)
{
    int r = strncmp(key, text, klen);
    if (r != 0)
        return r;
    return key[klen] ? 1 : 0;
}

/* The compact entry's value for key (binary search), or NULL. */
static const char *compact_find(const json_t *labels, const char *key)
{
    size_t lo = 0, hi = json_array_size(labels);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *t;
        size_t klen;
        if (!entry(json_array_get(labels, mid), &t, &klen))
            return NULL;
        int r = key_cmp(key, t, klen);
        if (r == 0)
            return t + klen + 1;
        if (r < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

bool kobj_labels_is_compact(const json_t *labels)
{
    const char *t;
    size_t klen;
    /* the first entry tells (an API object never has an array there) */
    return json_is_array(labels) &&
           (json_array_size(labels) == 0 || entry(json_array_get(labels, 0), &t, &klen));
}

const char *kobj_labels_get(const json_t *labels, const char *key)
{
    if (!key)
        return NULL;
    if (json_is_array(labels))
        return kobj_labels_is_compact(labels) ? compact_find(labels, key) : NULL;
    return json_string_value(json_object_get(labels, key));
}

bool kobj_labels_has(const json_t *labels, const char *key)
{
    if (!key)
        return false;
    if (json_is_array(labels))
        return kobj_labels_is_compact(labels) && compact_find(labels, key) != NULL;
    return json_object_get(labels, key) != NULL;
}

size_t kobj_labels_count(const json_t *labels)
{
    if (json_is_array(labels))
        return kobj_labels_is_compact(labels) ? json_array_size(labels) : 0;
    return json_object_size(labels);
}

bool kobj_labels_next(struct kobj_labels_iter *it, const char **ret_key, const char **ret_value)
{
    if (json_is_array(it->labels)) {
        const char *t;
        size_t klen;
        for (;;) {
            if (!kobj_labels_is_compact(it->labels) || it->i >= json_array_size(it->labels))
                return false;
            if (entry(json_array_get(it->labels, it->i++), &t, &klen))
                break; /* what is no entry is skipped */
        }
        memcpy(it->key, t, klen);
        it->key[klen] = '\0';
        *ret_key = it->key;
        *ret_value = t + klen + 1;
        return true;
    }
    if (!json_is_object(it->labels))
        return false;
    void *iter = it->i == 0 ? json_object_iter((json_t *)it->labels)
                            : json_object_iter_next((json_t *)it->labels, it->iter);
    if (!iter)
        return false;
    it->iter = iter;
    it->i++;
    *ret_key = json_object_iter_key(iter);
    *ret_value = json_string_value(json_object_iter_value(iter));
    return true;
}

json_t *kobj_labels_object(const json_t *labels)
{
    if (json_is_object(labels))
        return json_copy((json_t *)labels);
    json_t *out = json_object();
    const char *k, *v;
    kobj_labels_foreach (labels, it, k, v)
        json_object_set_new(out, k, json_string(v));
    return out;
}

struct pair {
    const char *key;
    const char *value;
    size_t value_len;
};

static int pair_cmp(const void *a, const void *b)
{
    return strcmp(((const struct pair *)a)->key, ((const struct pair *)b)->key);
}

json_t *kobj_labels_compact(const json_t *labels, json_t *intern)
{
    if (kobj_labels_is_compact(labels))
        return json_incref((json_t *)labels);
    if (!json_is_object(labels) || !json_is_object(intern))
        return NULL;
    size_t n = json_object_size(labels), i = 0;
    _cleanup_free_ struct pair *pairs = xcalloc(n ? n : 1, sizeof(*pairs));
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)labels, k, v) {
        const char *s = json_string_value(v);
        /* what no API server accepts stays as it is, in the object form */
        if (!s || strlen(s) != json_string_length(v) || strchr(k, '=') ||
            strlen(k) > KOBJ_LABEL_KEY_MAX)
            return NULL;
        pairs[i++] = (struct pair){k, s, json_string_length(v)};
    }
    qsort(pairs, n, sizeof(*pairs), pair_cmp);
    json_t *tmp = json_array();
    for (i = 0; i < n; i++) {
        size_t kl = strlen(pairs[i].key);
        _cleanup_free_ char *text = xmalloc(kl + 1 + pairs[i].value_len + 1);
        memcpy(text, pairs[i].key, kl);
        text[kl] = '=';
        memcpy(text + kl + 1, pairs[i].value, pairs[i].value_len + 1);
        json_t *one = json_object_get(intern, text);
        if (!one) {
            one = json_string(text);
            if (!one) {
                json_decref(tmp);
                return NULL; /* not UTF-8 */
            }
            json_object_set_new(intern, text, one);
        }
        json_array_append(tmp, one);
    }
    /* jansson doubles an array's table as it grows; extending an empty array by the whole list
     * sizes it to the list (plus jansson's initial 8) */
    json_t *out = json_array();
    json_array_extend(out, tmp);
    json_decref(tmp);
    return out;
}

size_t kobj_intern_prune(json_t *intern, size_t *pruned, size_t slack)
{
    size_t n = json_object_size(intern);
    if (n <= 2 * *pruned + slack)
        return 0;
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe (intern, tmp, k, v) {
        if (__atomic_load_n(&v->refcount, __ATOMIC_ACQUIRE) == 1)
            json_object_del(intern, k);
    }
    *pruned = json_object_size(intern);
    return n - *pruned;
}
