/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kobj's label sets on untrusted JSON: an array of label objects (a pool's nodes, one after the
 * other) made compact over one intern table, each compact set read through every accessor as
 * its object is (get, has, count, iteration, back to an object, a selector, a matchExpression),
 * the table pruned between sets; and the value itself read as a label set (a type-confused
 * array reads as absent or as some labels, never a crash). Any input ends without a crash, a
 * leak or a difference.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void differ(const char *what, const char *key)
{
    fprintf(stderr, "compact and object forms differ: %s \"%s\"\n", what, key ? key : "(null)");
    abort();
}

/* Every accessor reads `set` (compact) as it reads `obj` (the object it came from). */
static void same_reading(const json_t *obj, const json_t *set)
{
    if (!kobj_labels_is_compact(set) || kobj_labels_count(set) != kobj_labels_count(obj))
        differ("count", NULL);
    const char *k, *v;
    kobj_labels_foreach (obj, it, k, v) {
        char near[KOBJ_LABEL_KEY_MAX + 2];
        snprintf(near, sizeof(near), "%s0", k);
        if (!streq_ptr(kobj_labels_get(set, k), v) || !kobj_labels_has(set, k))
            differ("get", k);
        if (!streq_ptr(kobj_labels_get(set, near), kobj_labels_get(obj, near)))
            differ("get", near);
        bool m1 = false, m2 = false;
        struct err e1 = {0}, e2 = {0};
        int r1 = kobj_selector_match(k, obj, &m1, &e1), r2 = kobj_selector_match(k, set, &m2, &e2);
        if (r1 != r2 || m1 != m2)
            differ("selector", k);
        json_t *ex = json_pack("{s:s,s:s,s:[s]}", "key", k, "operator", "In", "values", v);
        if (ex && kobj_match_expression(ex, set) != kobj_match_expression(ex, obj))
            differ("matchExpression", k);
        json_decref(ex);
    }
    size_t n = 0;
    kobj_labels_foreach (set, it, k, v) {
        if (!streq_ptr(kobj_labels_get(obj, k), v))
            differ("iteration", k);
        n++;
    }
    if (n != kobj_labels_count(obj))
        differ("iteration count", NULL);
    json_t *back = kobj_labels_object(set);
    if (!json_equal(back, (json_t *)obj))
        differ("as an object", NULL);
    json_decref(back);
}

/* The value read as a label set: whatever it holds, bounded and without a crash. */
static void read_any(const json_t *v)
{
    const char *k, *val;
    size_t n = 0;
    kobj_labels_foreach (v, it, k, val)
        n++;
    (void)kobj_labels_count(v);
    (void)kobj_labels_get(v, "a");
    (void)kobj_labels_has(v, "kubernetes.io/hostname");
    bool m;
    struct err e = {0};
    (void)kobj_selector_match("a,b!=c,d in (x)", v, &m, &e);
    json_decref(kobj_labels_object(v));
    (void)n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *in = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!in)
        return 0;
    read_any(in);
    json_t *intern = json_object();
    json_t *sets = json_array();
    size_t pruned = 0, i;
    json_t *obj;
    json_array_foreach (in, i, obj) {
        read_any(obj);
        json_t *set = kobj_labels_compact(obj, intern);
        if (set && json_is_object(obj))
            same_reading(obj, set);
        if (set)
            json_array_append_new(sets, set); /* kept alive: later sets share with it */
        if (i % 3 == 2)
            json_array_remove(sets, 0); /* one let go: the prune may free its chunks */
        kobj_intern_prune(intern, &pruned, 2);
    }
    json_decref(sets);
    pruned = 0;
    kobj_intern_prune(intern, &pruned, 0);
    json_decref(intern);
    json_decref(in);
    return 0;
}
