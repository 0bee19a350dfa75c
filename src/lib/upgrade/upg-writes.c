/* SPDX-License-Identifier: Apache-2.0 */
/* Read-your-writes for the upgrade controller's node patches (upgrade.h states the rule). */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "upgrade.h"
#include "yamlcfg.h"

#define REPLACED_MAX 32 /* versions remembered per node: a cache further behind plans from it */

struct upg_writes {
    /* node name -> [the last write's version, then per write gpuop made on the chain, oldest
     * first: the resourceVersion it replaced, the patch written on it as compact JSON text].
     * One array a node (a fresh install writes every node at once: an object and two arrays a
     * node were ~0.5 KiB more). Text: a patch of ~15 labels and annotations is ~2.5 KiB as
     * jansson objects against ~0.6 KiB as text, and the texts alike are held once (below); it
     * is parsed again only for a pass that plans from it. */
    json_t *by_node;
    /* "key=value" -> one string, for the compact labels of the nodes fresh() makes (reconcile
     * thread only; pruned as the informer's is) */
    json_t *intern;
    size_t intern_pruned;
    /* the patches' texts, each held once: written without their precondition (the version is
     * the entry's own), a fresh install's are alike for every node */
    json_t *texts;
    size_t texts_pruned;
};

struct upg_writes *upg_writes_new(void)
{
    struct upg_writes *w = xcalloc(1, sizeof(*w));
    w->by_node = json_object();
    w->intern = json_object();
    w->texts = json_object();
    return w;
}

void upg_writes_free(struct upg_writes *w)
{
    if (!w)
        return;
    json_decref(w->by_node);
    json_decref(w->intern);
    json_decref(w->texts);
    free(w);
}

void upg_writes_record(struct upg_writes *w, const char *node, const char *base_rv, const char *rv,
                       const json_t *patch)
{
    if (!node || !base_rv || !rv || streq_ptr(base_rv, rv) || !json_is_object(patch))
        return;
    json_t *e = json_object_get(w->by_node, node);
    json_t *entry = json_array();
    json_array_append_new(entry, json_string(rv));
    /* a write on top of the previous one (planned from its copy): the chain goes on, its
     * REPLACED_MAX - 1 newest writes kept */
    if (e && streq_ptr(json_string_value(json_array_get(e, 0)), base_rv)) {
        size_t writes = (json_array_size(e) - 1) / 2;
        size_t from = writes >= REPLACED_MAX ? writes - (REPLACED_MAX - 1) : 0;
        for (size_t i = 1 + 2 * from; i < json_array_size(e); i++)
            json_array_append(entry, json_array_get(e, i));
    }
    /* the patch less its precondition (patched() reads its labels, annotations and the
     * members outside metadata) */
    _cleanup_json_ json_t *bare = json_copy((json_t *)patch);
    json_t *meta = json_copy(json_object_get(patch, "metadata"));
    if (meta) {
        json_object_del(meta, "resourceVersion");
        json_object_set_new(bare, "metadata", meta);
    }
    char *text = json_dumps(bare, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text) {
        json_decref(entry);
        return;
    }
    json_array_append_new(entry, json_string(base_rv));
    json_array_append_new(entry, kobj_intern(w->texts, json_string(text)));
    free(text);
    assert(json_array_size(entry) % 2 == 1 && json_array_size(entry) <= 1 + 2 * REPLACED_MAX);
    json_object_set_new(w->by_node, node, entry);
}

/* The write of a node's entry that replaced version `rv` (its index among the writes). */
static size_t write_of(const json_t *entry, const char *rv)
{
    for (size_t i = 1; i + 1 < json_array_size(entry); i += 2)
        if (streq_ptr(json_string_value(json_array_get(entry, i)), rv))
            return (i - 1) / 2;
    return SIZE_MAX;
}

/* `node` as the patches of its entry's writes from `from` on left it, at version `rv`: a new object
 * sharing what the patches do not touch with `node`. Its labels keep their form (a compact set
 * stays compact, its strings from w->intern). Fields a patch sets that the informer's projection
 * leaves out (another annotation) are there too: readers name what they read. */
static json_t *patched(struct upg_writes *w, const json_t *node, const json_t *entry, size_t from,
                       const char *rv)
{
    json_t *out = json_copy((json_t *)node);
    json_t *meta = json_copy(json_object_get(node, "metadata"));
    if (!meta)
        meta = json_object();
    json_object_set_new(out, "metadata", meta);
    json_t *have = kobj_labels(node);
    json_t *labels = kobj_labels_object(have);
    for (size_t i = 2 + 2 * from; i < json_array_size(entry); i += 2) {
        const json_t *pt = json_array_get(entry, i);
        _cleanup_json_ json_t *p =
            json_loadb(json_string_value(pt), json_string_length(pt), 0, NULL);
        const char *k;
        json_t *v;
        json_object_foreach (kobj_labels(p), k, v) {
            if (json_is_null(v))
                json_object_del(labels, k);
            else
                json_object_set(labels, k, v);
        }
        json_t *anns = json_object_get(json_object_get(p, "metadata"), "annotations");
        if (anns)
            json_object_set_new(meta, "annotations",
                                kobj_merge_patch(json_object_get(meta, "annotations"), anns));
        json_object_foreach ((json_t *)p, k, v) {
            if (strcmp(k, "metadata") != 0)
                json_object_set_new(out, k, kobj_merge_patch(json_object_get(out, k), v));
        }
    }
    json_t *compact = kobj_labels_is_compact(have) ? kobj_labels_compact(labels, w->intern) : NULL;
    json_object_set_new(meta, "labels", compact ? compact : json_incref(labels));
    json_decref(labels);
    json_object_set_new(meta, "resourceVersion", json_string(rv));
    return out;
}

json_t *upg_writes_fresh(struct upg_writes *w, const json_t *cached)
{
    json_t *out = json_array();
    _cleanup_json_ json_t *keep = json_object();
    size_t i;
    json_t *n;
    json_array_foreach ((json_t *)cached, i, n) {
        const char *name = kobj_name(n);
        json_t *e = name ? json_object_get(w->by_node, name) : NULL;
        size_t at = e ? write_of(e, kobj_resource_version(n)) : SIZE_MAX;
        if (at != SIZE_MAX) {
            json_array_append_new(out,
                                  patched(w, n, e, at, json_string_value(json_array_get(e, 0))));
            json_object_set(keep, name, e);
        } else {
            json_array_append(out, n);
        }
    }
    json_object_clear(w->by_node);
    json_object_update(w->by_node, keep);
    kobj_intern_prune(w->intern, &w->intern_pruned, 1024);
    kobj_intern_prune(w->texts, &w->texts_pruned, 64);
    return out;
}

size_t upg_writes_pending(const struct upg_writes *w)
{
    return w ? json_object_size(w->by_node) : 0;
}
