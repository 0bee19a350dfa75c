/* SPDX-License-Identifier: Apache-2.0 */
/* The object store: keys, resourceVersions, uids, the event log and its compaction, change
 * notification (ks->changed) for watches and the controller thread. It calls nothing above it:
 * whoever must react to a write (CRD types, controllers) is called by the layer that wrote. */
#include <inttypes.h>
#include <string.h>

#include "kubesim-internal.h"

static uint64_t real_now(void *ctx)
{
    (void)ctx;
    return now_ms_real();
}

uint64_t ks_now(struct ksim *ks)
{
    return ks->opts.now_ms ? ks->opts.now_ms(ks->opts.clock_ctx) : real_now(NULL);
}

void ks_now_str(struct ksim *ks, char *buf, size_t n)
{
    time_rfc3339(ks_now(ks), buf, n);
}

const char *ks_obj_ns(json_t *obj)
{
    const char *s = kobj_namespace(obj);
    return s ? s : "";
}

const char *ks_obj_name(json_t *obj)
{
    const char *s = kobj_name(obj);
    return s ? s : "";
}

char *ks_key(const char *ns, const char *name)
{
    return xasprintf("%s/%s", ns ? ns : "", name);
}

json_t *ks_get(struct ks_type *t, const char *ns, const char *name)
{
    _cleanup_free_ char *k = ks_key(t->namespaced ? ns : "", name);
    return json_object_get(t->objs, k);
}

void ks_set_rv(json_t *obj, uint64_t rv)
{
    char b[32];
    snprintf(b, sizeof(b), "%" PRIu64, rv);
    json_object_set_new(kobj_ensure_object(obj, "metadata"), "resourceVersion", json_string(b));
}

char *ks_new_uid(struct ksim *ks)
{
    /* Random-looking but reproducible v4-format UIDs. */
    uint64_t x = ++ks->uid_counter * 0x9E3779B97F4A7C15ull ^ 0x5851F42D4C957F2Dull;
    uint64_t y = x * 0xD6E8FEB86659FD93ull + ks->uid_counter;
    return xasprintf("%08" PRIx64 "-%04" PRIx64 "-4%03" PRIx64 "-a%03" PRIx64 "-%012" PRIx64,
                     x >> 32, (x >> 16) & 0xffff, x & 0xfff, (y >> 52) & 0xfff,
                     (uint64_t)(y & 0xffffffffffffull));
}

void ks_ev_drop_dump(struct ksim *ks, struct ks_event *e)
{
    if (!e->dump)
        return;
    ks->ev_dump_bytes -= e->dump_len;
    free(e->dump);
    e->dump = NULL;
    e->dump_len = 0;
}

static void ev_compact(struct ksim *ks)
{
    uint64_t now = ks_now(ks);
    while (ks->ev_head < ks->ev_len) {
        struct ks_event *e = &ks->ev[ks->ev_head];
        size_t live = ks->ev_len - ks->ev_head;
        bool old = ks->opts.watch_retention_ms != UINT64_MAX &&
                   e->t_ms + ks->opts.watch_retention_ms < now;
        if (!old && live <= ks->opts.max_events)
            break;
        ks->compacted_rv = e->rv;
        json_decref(e->obj);
        json_decref(e->old);
        ks_ev_drop_dump(ks, e);
        ks->ev_head++;
    }
    if (ks->ev_head > 1024 && ks->ev_head * 2 > ks->ev_len) {
        memmove(ks->ev, ks->ev + ks->ev_head, (ks->ev_len - ks->ev_head) * sizeof(*ks->ev));
        ks->ev_len -= ks->ev_head;
        ks->ev_head = 0;
    }
}

static void ev_append(struct ksim *ks, struct ks_type *t, enum ks_ev kind, json_t *obj, json_t *old)
{
    if (ks->ev_len == ks->ev_cap) {
        ks->ev_cap = ks->ev_cap ? ks->ev_cap * 2 : 1024;
        ks->ev = xrealloc(ks->ev, ks->ev_cap * sizeof(*ks->ev));
    }
    ks->ev[ks->ev_len++] = (struct ks_event){.rv = ks->rv,
                                             .t_ms = ks_now(ks),
                                             .type = t,
                                             .kind = kind,
                                             .obj = json_incref(obj),
                                             .old = old ? json_incref(old) : NULL};
    ev_compact(ks);
    ks->dirty = true;
    pthread_cond_broadcast(&ks->changed);
}

/* Whether v is held by one parent only: a value with other holders (another object, an older
 * version, a template) is never changed in place, only compared. */
static bool held_once(json_t *v)
{
    return __atomic_load_n(&v->refcount, __ATOMIC_ACQUIRE) == 1;
}

/* Whether a and b are the same JSON, key order included (what a client reads back), making a's
 * children that are the same as b's (by key, by index) b's own: the versions of an object, and
 * objects made alike (a DaemonSet's pods, nodes from one template), hold what they have in common
 * once. Stored objects are never changed in place (a write makes a new version), so a shared
 * value stays what every holder read. own: a is the caller's alone, so its children may be
 * replaced; a child that has other holders is only compared (replacing inside it would change
 * them). */
static bool share_same(json_t *a, json_t *b, int depth, bool own)
{
    if (a == b)
        return true;
    if (!a || !b || json_typeof(a) != json_typeof(b) || depth > 64)
        return false;
    switch (json_typeof(a)) {
    case JSON_OBJECT: {
        bool same = json_object_size(a) == json_object_size(b);
        void *ib = json_object_iter(b);
        for (void *ia = json_object_iter(a); ia; ia = json_object_iter_next(a, ia)) {
            const char *k = json_object_iter_key(ia);
            json_t *va = json_object_iter_value(ia);
            json_t *vb = json_object_get(b, k);
            if (vb && share_same(va, vb, depth + 1, own && held_once(va))) {
                if (own && va != vb)
                    json_object_iter_set(a, ia, vb);
            } else {
                same = false;
            }
            if (same && (!ib || !streq(json_object_iter_key(ib), k)))
                same = false;
            if (ib)
                ib = json_object_iter_next(b, ib);
            if (!same && !own)
                return false;
        }
        return same;
    }
    case JSON_ARRAY: {
        size_t na = json_array_size(a), nb = json_array_size(b);
        bool same = na == nb;
        if (!same && !own)
            return false;
        for (size_t i = 0; i < na && i < nb; i++) {
            json_t *va = json_array_get(a, i), *vb = json_array_get(b, i);
            if (share_same(va, vb, depth + 1, own && held_once(va))) {
                if (own && va != vb)
                    json_array_set(a, i, vb);
            } else {
                same = false;
                if (!own)
                    return false;
            }
        }
        return same;
    }
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_INTEGER:
        return json_integer_value(a) == json_integer_value(b);
    case JSON_REAL: {
        double x = json_real_value(a), y = json_real_value(b);
        return memcmp(&x, &y, sizeof(x)) == 0;
    }
    default: /* true, false, null */
        return true;
    }
}

void ks_share(json_t *obj, json_t *ref)
{
    if (obj && ref && obj != ref && json_is_object(obj) && json_is_object(ref))
        share_same(obj, ref, 0, true);
}

/* Whether the ownerReferences changed from old (NULL: a new object) to obj. */
static bool owners_changed(json_t *obj, json_t *old)
{
    json_t *refs = kobj_path(obj, "metadata.ownerReferences");
    if (!old)
        return refs != NULL;
    return !json_equal(refs, kobj_path(old, "metadata.ownerReferences"));
}

void ks_commit(struct ksim *ks, struct ks_type *t, json_t *obj, enum ks_ev kind, json_t *old)
{
    ks->rv++;
    ks_set_rv(obj, ks->rv);
    /* share with the version it replaces, or with the last object of its type made */
    ks_share(obj, kind == KS_MODIFIED ? old : t->last_added);
    if (kind == KS_ADDED) {
        json_decref(t->last_added);
        t->last_added = json_incref(obj);
    }
    _cleanup_free_ char *key = ks_key(t->namespaced ? ks_obj_ns(obj) : "", ks_obj_name(obj));
    json_t *keep_old = old ? json_incref(old) : NULL; /* old may be the map's reference */
    json_object_set_new(t->objs, key, obj);
    const char *uid = kobj_uid(obj);
    if (uid && kind == KS_ADDED) {
        json_t *ref = json_pack("[Is]", (json_int_t)(intptr_t)t, key);
        json_object_set_new(ks->uids, uid, ref);
    }
    /* the garbage collector looks again at what a deletion may orphan or finish (every object),
     * or only at objects whose owners changed (the event log since its last pass) */
    if (kobj_path(obj, "metadata.deletionTimestamp"))
        ks->gc_full = true;
    else if (owners_changed(obj, kind == KS_MODIFIED ? old : NULL))
        ks->gc_dirty = true;
    if (ks->journal)
        ks_journal_put(ks, t, obj);
    ev_append(ks, t, kind, obj, keep_old);
    json_decref(keep_old);
}

void ks_remove(struct ksim *ks, struct ks_type *t, json_t *obj)
{
    ks->rv++;
    /* the last state: the object with the deletion's resourceVersion (a new top and metadata,
     * the rest shared with the stored object, which nothing changes in place) */
    json_t *last = json_copy(obj);
    json_t *meta = json_object_get(obj, "metadata");
    if (json_is_object(meta))
        json_object_set_new(last, "metadata", json_copy(meta));
    ks_set_rv(last, ks->rv);
    _cleanup_free_ char *key = ks_key(t->namespaced ? ks_obj_ns(obj) : "", ks_obj_name(obj));
    const char *uid = kobj_uid(last);
    if (uid)
        json_object_del(ks->uids, uid);
    json_object_del(t->objs, key); /* obj may be gone now */
    ks->gc_full = true;
    if (ks->journal)
        ks_journal_del(ks, t, key);
    ev_append(ks, t, KS_DELETED, last, NULL);
    json_decref(last);
}

size_t ks_ev_search(struct ksim *ks, uint64_t cursor)
{
    size_t lo = ks->ev_head, hi = ks->ev_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ks->ev[mid].rv <= cursor)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool ks_ev_since(struct ksim *ks, uint64_t cursor, size_t *ret_index)
{
    if (cursor < ks->compacted_rv)
        return false;
    *ret_index = ks_ev_search(ks, cursor);
    return true;
}

void ks_cond_wait(struct ksim *ks, uint64_t ms)
{
    cond_wait_deadline(&ks->changed, &ks->lock, deadline_after(ms));
}

void ks_store_compact(struct ksim *ks)
{
    ev_compact(ks);
}

void ks_store_free(struct ksim *ks)
{
    for (size_t i = ks->ev_head; i < ks->ev_len; i++) {
        json_decref(ks->ev[i].obj);
        json_decref(ks->ev[i].old);
        ks_ev_drop_dump(ks, &ks->ev[i]);
    }
    free(ks->ev);
    ks->ev = NULL;
    ks->ev_head = ks->ev_len = ks->ev_cap = 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

bool ks_obj_visible(json_t *obj, const char *ns, const struct ksim_selector *ls,
                    const struct ksim_selector *fs)
{
    if (ns && !streq(ks_obj_ns(obj), ns))
        return false;
    return ksim_selector_matches(ls, kobj_labels(obj)) && ks_field_matches(fs, obj);
}

/* Items in key order, filtered; a new array. Keys sorted so pagination is stable. */
json_t *ks_store_list(struct ks_type *t, const char *ns, const struct ksim_selector *ls,
                      const struct ksim_selector *fs, const char *after, size_t limit,
                      char **ret_last_key, size_t *ret_remaining)
{
    size_t n = json_object_size(t->objs), k = 0;
    const char **keys = xcalloc(n ? n : 1, sizeof(char *));
    const char *key;
    json_t *v;
    json_object_foreach (t->objs, key, v)
        keys[k++] = key;
    qsort(keys, k, sizeof(char *), cmp_str);
    json_t *items = json_array();
    size_t remaining = 0;
    const char *last = NULL;
    for (size_t i = 0; i < k; i++) {
        if (after && strcmp(keys[i], after) <= 0)
            continue;
        json_t *o = json_object_get(t->objs, keys[i]);
        if (!ks_obj_visible(o, ns, ls, fs))
            continue;
        if (limit && json_array_size(items) >= limit) {
            remaining++;
            continue;
        }
        json_array_append(items, o);
        last = keys[i];
    }
    *ret_remaining = remaining;
    *ret_last_key = last ? xstrdup(last) : NULL;
    free(keys);
    return items;
}
