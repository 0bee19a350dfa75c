/* SPDX-License-Identifier: Apache-2.0 */
/* Label sets (kobj.h): metadata.labels as the API gives it (an object) or compact (chunks of
 * shared "key=value" strings and single strings, sorted by key, each chunk shared by the sets
 * that have it alike), read through one set of accessors. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "util.h"

/*
 * Where chunks end. A chunk ends after an entry whose key's hash has its top CUT_BITS bits zero
 * (one key in 2^CUT_BITS: 8 entries a chunk on average), or once it holds CHUNK_MAX entries.
 * The cut points depend on the keys alone, not on their neighbours or the values: a label
 * whose value changes touches one chunk (put_run: split there), and a label added or removed one
 * chunk (two where it moves a cut point), never every chunk after it, as fixed-size chunks
 * would. Only a run of CHUNK_MAX keys without a cut point shifts, up to the next cut point.
 */
#define CUT_BITS  3
#define CHUNK_MAX 16
/* A chunk's slot in the intern table: "\x01" and 16 hex digits of the hash of its keys. It has
 * no '=', so it never names an entry ("key=value"). */
#define CHUNK_KEY_LEN 17

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

/* The first entry of item i of a compact set (a chunk's first, or the item itself); false when
 * that is no entry. */
static bool item_first(const json_t *set, size_t i, const char **ret_text, size_t *ret_klen)
{
    const json_t *item = json_array_get(set, i);
    return entry(json_is_array(item) ? json_array_get(item, 0) : item, ret_text, ret_klen);
}

/* strcmp(key, entry's key) where the entry's key is its first klen bytes. */
static int key_cmp(const char *key, const char *text, size_t klen)
{
    int r = strncmp(key, text, klen);
    if (r != 0)
        return r;
    return key[klen] ? 1 : 0;
}

/* The value for key in one chunk (binary search), or NULL. */
static const char *chunk_find(const json_t *chunk, const char *key)
{
    size_t lo = 0, hi = json_array_size(chunk);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *t;
        size_t klen;
        if (!entry(json_array_get(chunk, mid), &t, &klen))
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

/* The compact set's value for key, or NULL: a binary search over the items by their first
 * keys, then one within the last chunk that starts at or before key. */
static const char *compact_find(const json_t *set, const char *key)
{
    size_t lo = 0, hi = json_array_size(set);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *t;
        size_t klen;
        if (!item_first(set, mid, &t, &klen))
            return NULL;
        int r = key_cmp(key, t, klen);
        if (r == 0)
            return t + klen + 1;
        if (r < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    const json_t *item = lo == 0 ? NULL : json_array_get(set, lo - 1);
    return json_is_array(item) ? chunk_find(item, key) : NULL; /* a single entry: not equal */
}

bool kobj_labels_is_compact(const json_t *labels)
{
    const char *t;
    size_t klen;
    /* the first entry tells (an API object never has an array there) */
    return json_is_array(labels) &&
           (json_array_size(labels) == 0 || item_first(labels, 0, &t, &klen));
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
    if (!json_is_array(labels))
        return json_object_size(labels);
    if (!kobj_labels_is_compact(labels))
        return 0;
    size_t n = 0, i;
    json_t *item;
    json_array_foreach ((json_t *)labels, i, item)
        n += json_is_string(item) ? 1 : json_array_size(item); /* 0 for what is neither */
    return n;
}

bool kobj_labels_next(struct kobj_labels_iter *it, const char **ret_key, const char **ret_value)
{
    if (json_is_array(it->labels)) {
        if (!kobj_labels_is_compact(it->labels))
            return false;
        const char *t;
        size_t klen;
        for (;;) {
            const json_t *chunk = json_array_get(it->labels, it->i);
            if (!chunk)
                return false; /* past the last item */
            if (!json_is_array(chunk)) {
                it->i++;
                if (entry(chunk, &t, &klen))
                    break; /* a single entry */
                continue;
            }
            if (it->j >= json_array_size(chunk)) {
                it->i++; /* what is no chunk has no entries: skipped */
                it->j = 0;
                continue;
            }
            if (entry(json_array_get(chunk, it->j++), &t, &klen))
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
    size_t key_len;
    const char *value;
    size_t value_len;
};

static int pair_cmp(const void *a, const void *b)
{
    return strcmp(((const struct pair *)a)->key, ((const struct pair *)b)->key);
}

/* The one string "key=value" of `intern` (borrowed), added when new; NULL when the text is not
 * UTF-8 or the table holds something else under it. */
static json_t *intern_entry(json_t *intern, const struct pair *p)
{
    char small[256];
    _cleanup_free_ char *big = NULL;
    size_t n = p->key_len + 1 + p->value_len + 1;
    char *text = n <= sizeof(small) ? small : (big = xmalloc(n));
    memcpy(text, p->key, p->key_len);
    text[p->key_len] = '=';
    memcpy(text + p->key_len + 1, p->value, p->value_len + 1);
    json_t *one = json_object_get(intern, text);
    if (one)
        return json_is_string(one) ? one : NULL;
    one = json_string(text);
    if (!one)
        return NULL; /* not UTF-8 */
    json_object_set_new(intern, text, one);
    return one;
}

/* Whether two entries have the same key. */
static bool same_key(const json_t *a, const json_t *b)
{
    const char *ta, *tb;
    size_t ka, kb;
    return entry(a, &ta, &ka) && entry(b, &tb, &kb) && ka == kb && memcmp(ta, tb, ka) == 0;
}

/* Appends to `set` the entries e[0..n) (borrowed from intern) as shared chunks and single
 * entries. A chunk's slot in `intern` is named by its keys: "\x01" and 16 hex digits of their
 * hash. An empty slot takes a new chunk of these entries; a slot holding these very entries
 * gives them; a slot holding the same keys with other values (another node's hostname, another
 * pool's product) splits them: each run alike with the slot's becomes a chunk of its own (its
 * slot, the same way), each entry that differs, and a run of one, stands alone in the set. So
 * the nodes of a pool share every chunk and hold only what is their own as single entries,
 * however many there are. A slot holding anything else (another chunk whose keys hash alike, a
 * planted value) is left as it is and the entries made a chunk for this set alone: a lost share,
 * never a wrong one. */
static void put_run(json_t *set, json_t *intern, json_t *const *e, const uint64_t *kh, size_t n)
{
    assert(n <= CHUNK_MAX);
    if (n <= 1) {
        if (n == 1)
            json_array_append(set, e[0]); /* a chunk of one is that entry */
        return;
    }
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ kh[i]) * 0x100000001b3ULL;
    char key[CHUNK_KEY_LEN + 1];
    key[0] = '\x01';
    for (int i = 0; i < 16; i++)
        key[1 + i] = "0123456789abcdef"[(h >> (60 - 4 * i)) & 0xf];
    key[CHUNK_KEY_LEN] = '\0';
    json_t *have = json_object_get(intern, key);
    bool keys_alike = json_is_array(have) && json_array_size(have) == n;
    size_t differ = 0;
    for (size_t i = 0; keys_alike && i < n; i++) {
        json_t *x = json_array_get(have, i);
        keys_alike = x == e[i] || same_key(x, e[i]);
        differ += x != e[i];
    }
    if (keys_alike && differ == 0) {
        json_array_append(set, have);
        return;
    }
    if (keys_alike) {
        size_t run = 0; /* the start of the run alike */
        for (size_t i = 0; i <= n; i++) {
            if (i < n && json_array_get(have, i) == e[i])
                continue;
            put_run(set, intern, e + run, kh + run, i - run);
            if (i < n)
                json_array_append(set, e[i]);
            run = i + 1;
        }
        return;
    }
    json_t *chunk = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append(chunk, e[i]);
    if (!have)
        json_object_set(intern, key, chunk);
    json_array_append_new(set, chunk);
}

/* A key's hash (what names a chunk's slot), and whether a chunk ends after the key's entry:
 * FNV-1a's high bits barely see a key's last bytes ("...F40" and "...F41"), so the hash is
 * mixed first (MurmurHash3's finaliser). */
static uint64_t key_hash(const struct pair *p)
{
    return hash_fnv1a64(p->key, p->key_len);
}

static bool cut_after(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h >> (64 - CUT_BITS) == 0;
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
        size_t kl = strlen(k);
        /* what no API server accepts stays as it is, in the object form */
        if (!s || strlen(s) != json_string_length(v) || strchr(k, '=') || kl > KOBJ_LABEL_KEY_MAX)
            return NULL;
        pairs[i++] = (struct pair){k, kl, s, json_string_length(v)};
    }
    qsort(pairs, n, sizeof(*pairs), pair_cmp);
    json_t *set = json_array();
    json_t *e[CHUNK_MAX];   /* the entries of the chunk being filled (borrowed from intern) */
    uint64_t kh[CHUNK_MAX]; /* their keys' hashes */
    size_t m = 0;
    for (i = 0; i < n; i++) {
        json_t *one = intern_entry(intern, &pairs[i]);
        if (!one) {
            json_decref(set);
            return NULL;
        }
        kh[m] = key_hash(&pairs[i]);
        e[m++] = one;
        if (m == CHUNK_MAX || i + 1 == n || cut_after(kh[m - 1])) {
            put_run(set, intern, e, kh, m);
            m = 0;
        }
    }
    return set;
}

size_t kobj_intern_prune(json_t *intern, size_t *pruned, size_t slack)
{
    size_t n = json_object_size(intern);
    if (n <= 2 * *pruned + slack)
        return 0;
    /* two sweeps: first what holds other values of the table (a label set's chunks), then the
     * values (the entries) those held, so one prune frees both */
    for (int sweep = 0; sweep < 2; sweep++) {
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe (intern, tmp, k, v) {
            if (sweep == 0 && !json_is_array(v) && !json_is_object(v))
                continue;
            if (__atomic_load_n(&v->refcount, __ATOMIC_ACQUIRE) == 1)
                json_object_del(intern, k);
        }
    }
    *pruned = json_object_size(intern);
    return n - *pruned;
}
