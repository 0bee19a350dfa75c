/* SPDX-License-Identifier: Apache-2.0 */
/* The informer: list + one watch per resource type into a local store, indexed by
 * namespace/name and by label. */
#include <assert.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "kube-internal.h"

struct kube_informer {
    struct kube_client *c;
    struct kube_resource r;
    char *group, *version, *plural, *kind;
    char *ns, *label_selector, *field_selector;
    unsigned page_size;
    kube_project_fn project;
    void *project_userdata;
    char **keep_fields;
    json_t *index_keys; /* label keys indexed, or NULL for all */
    struct kube_informer_handlers h;

    pthread_t thread;
    bool started;
    volatile int stop;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* synced, and wakes the backoff sleep on stop */
    json_t *store;       /* "ns/name" -> object */
    json_t *labels;      /* "key=value" -> {"ns/name": true} */
    json_t *intern;      /* label value or "key=value" -> one shared string (informer thread
                          * only) */
    size_t intern_pruned;
    bool compact_labels;
    char **share_paths; /* dotted paths whose values are shared (NULL: none) */
    char ***prefilter;  /* kube_informer_opts.prefilter (NULL: none) */
    json_t *shared;     /* canonical JSON text -> the one copy (informer thread only) */
    size_t shared_pruned;
    /* kube_informer_relist(): asked (under lock) and done (the informer thread); watch_stop
     * ends the watch for it (and on the stop) */
    unsigned relist_asked, relist_done;
    volatile int watch_stop;
    char *rv;
    bool synced;
    struct kube_informer_stats stats;
    /* What the store and its label index hold, priced as decoded (kube_json_value_cost), taken
     * from the client's cached budget; all of it goes back when the informer is freed. */
    struct kube_budget *cached;
    size_t held;
};

json_t *kube_project_fields(json_t *obj, const char *const *keep_fields)
{
    static const char *const always[] = {"apiVersion",      "kind",
                                         "metadata.name",   "metadata.namespace",
                                         "metadata.uid",    "metadata.resourceVersion",
                                         "metadata.labels", "metadata.deletionTimestamp"};
    json_t *out = json_object();
    for (size_t i = 0; i < ARRAY_SIZE(always); i++)
        kobj_path_copy(out, obj, always[i]);
    for (size_t i = 0; keep_fields && keep_fields[i]; i++)
        kobj_path_copy(out, obj, keep_fields[i]);
    return out;
}

/* Label values repeat across objects ("true", a product name, a driver version): objects share
 * one string per value. The table drops values no object holds any more once it has doubled. */
static void intern_labels(struct kube_informer *inf, json_t *obj)
{
    json_t *labels = kobj_labels(obj);
    const char *k;
    json_t *v;
    json_object_foreach (labels, k, v) {
        const char *str = json_string_value(v);
        if (!str || strlen(str) != json_string_length(v))
            continue;
        json_t *in = json_object_get(inf->intern, str);
        if (!in)
            json_object_set(inf->intern, str, v);
        else if (in != v)
            json_object_set(labels, k, in); /* replaces the value, the key stays */
    }
    kobj_intern_prune(inf->intern, &inf->intern_pruned, 1024);
}

/* The projection's labels as a compact set (kobj.h) of the informer's shared strings; a set
 * the API would not give (kobj_labels_compact refuses it) stays an object. p's metadata is its
 * own: a projection made it, or p is the object just decoded, seen by no other thread yet. */
static void compact_labels(struct kube_informer *inf, json_t *p)
{
    json_t *labels = kobj_labels(p);
    if (!json_is_object(labels))
        return;
    json_t *compact = kobj_labels_compact(labels, inf->intern);
    if (compact)
        json_object_set_new(json_object_get(p, "metadata"), "labels", compact);
    kobj_intern_prune(inf->intern, &inf->intern_pruned, 1024);
}

/* Replaces each share path's value of the (not yet stored) projection p by the one copy of an
 * equal value, or makes it that copy. */
static void share(struct kube_informer *inf, json_t *p)
{
    for (size_t i = 0; inf->share_paths[i]; i++) {
        const char *path = inf->share_paths[i];
        const char *dot = strrchr(path, '.');
        json_t *parent = p;
        if (dot) {
            _cleanup_free_ char *pp = xstrndup(path, (size_t)(dot - path));
            parent = kobj_path(p, pp);
        }
        const char *key = dot ? dot + 1 : path;
        json_t *v = json_object_get(parent, key);
        if (!json_is_object(v) && !json_is_array(v) && !json_is_string(v))
            continue;
        _cleanup_free_ char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        if (!text)
            continue;
        json_t *one = json_object_get(inf->shared, text);
        if (!one)
            json_object_set(inf->shared, text, v);
        else if (one != v)
            json_object_set(parent, key, one);
    }
    /* shared copies only the table still holds go once it has doubled */
    kobj_intern_prune(inf->shared, &inf->shared_pruned, 1024);
}

static json_t *project(struct kube_informer *inf, json_t *obj)
{
    json_t *p;
    if (inf->project)
        p = inf->project(obj, inf->project_userdata);
    else if (inf->keep_fields)
        p = kube_project_fields(obj, (const char *const *)inf->keep_fields);
    else
        p = json_incref(obj);
    /* a labels object still shared with a caller-made projection is left alone */
    json_t *labels = kobj_labels(p);
    if (p && inf->compact_labels)
        compact_labels(inf, p);
    else if (p && (!inf->project || labels == kobj_labels(obj)))
        intern_labels(inf, p);
    if (p && inf->share_paths)
        share(inf, p);
    return p;
}

/* ---- store (lock held) -------------------------------------------------------------------- */

static void labels_index(struct kube_informer *inf, const char *key, json_t *obj, bool add)
{
    const char *k, *v;
    kobj_labels_foreach (kobj_labels(obj), it, k, v) {
        if (!v || (inf->index_keys && !json_object_get(inf->index_keys, k)))
            continue;
        _cleanup_free_ char *kv = xasprintf("%s=%s", k, v);
        json_t *set = json_object_get(inf->labels, kv);
        if (add) {
            if (!set) {
                set = json_object();
                json_object_set_new(inf->labels, kv, set);
            }
            json_object_set_new(set, key, json_true());
        } else if (set) {
            json_object_del(set, key);
            if (json_object_size(set) == 0)
                json_object_del(inf->labels, kv);
        }
    }
}

/* What one stored object costs: its value, its key in the store and in the label index's sets
 * (a pair of about 64 bytes and the key each). The sets themselves, one per distinct label, are
 * left out. */
static size_t entry_cost(struct kube_informer *inf, const char *key, json_t *obj)
{
    size_t per_key = 64 + strlen(key);
    size_t n = 1;
    const char *k, *v;
    kobj_labels_foreach (kobj_labels(obj), it, k, v) {
        if (v && (!inf->index_keys || json_object_get(inf->index_keys, k)))
            n++;
    }
    return kube_json_value_cost(obj) + n * per_key;
}

/* -EFBIG: the client's informers together would keep more than max_cached. */
static int cache_full_err(struct kube_informer *inf, size_t more, struct err *e)
{
    char need[32], lim[32];
    kube_mib(need, sizeof(need), more);
    kube_mib(lim, sizeof(lim), inf->cached->limit);
    return err_set(e, -EFBIG,
                   "informer for %s: another %s would pass the %s limit on what the client's "
                   "informers keep (kube_options.max_cached); the store keeps what it has",
                   inf->r.plural, need, lim);
}

/* Moves the held total by the difference between what an entry costs now and before. Lock held. */
static int cache_adjust(struct kube_informer *inf, size_t before, size_t after, struct err *e)
{
    if (before > inf->held)
        before = inf->held; /* never give back more than was taken */
    if (after > before) {
        if (kube_budget_take(inf->cached, after - before) < 0)
            return cache_full_err(inf, after - before, e);
        inf->held += after - before;
    } else {
        kube_budget_put(inf->cached, before - after);
        inf->held -= before - after;
    }
    return 0;
}

/* Stores obj (takes the reference). Returns the old object (a reference) or NULL. */
static json_t *store_put(struct kube_informer *inf, const char *key, json_t *obj)
{
    json_t *old = json_incref(json_object_get(inf->store, key));
    if (old)
        labels_index(inf, key, old, false);
    json_object_set_new(inf->store, key, obj);
    labels_index(inf, key, obj, true);
    return old;
}

static json_t *store_del(struct kube_informer *inf, const char *key)
{
    json_t *old = json_incref(json_object_get(inf->store, key));
    if (!old)
        return NULL;
    labels_index(inf, key, old, false);
    json_object_del(inf->store, key);
    return old;
}

static void set_rv(struct kube_informer *inf, const char *rv)
{
    if (!rv || !rv[0])
        return;
    pthread_mutex_lock(&inf->lock);
    free(inf->rv);
    inf->rv = xstrdup(rv);
    pthread_mutex_unlock(&inf->lock);
}

/* Equal but for metadata.resourceVersion: a change the projection does not keep. A projection
 * of another form than an object keeps no version: equal, then. */
static bool same_but_version(json_t *a, json_t *b)
{
    if (!json_is_object(a) || !json_is_object(b))
        return json_equal(a, b);
    if (json_object_size(a) != json_object_size(b))
        return false;
    const char *k;
    json_t *v;
    json_object_foreach (a, k, v) {
        json_t *w = json_object_get(b, k);
        if (strcmp(k, "metadata") != 0) {
            if (!w || !json_equal(v, w))
                return false;
            continue;
        }
        if (!json_is_object(v) || !json_is_object(w) || json_object_size(v) != json_object_size(w))
            return false;
        const char *mk;
        json_t *mv;
        json_object_foreach (v, mk, mv) {
            json_t *mw = json_object_get(w, mk);
            if (!mw || (strcmp(mk, "resourceVersion") != 0 && !json_equal(mv, mw)))
                return false;
        }
    }
    return true;
}

static void apply_delete(struct kube_informer *inf, const char *key)
{
    pthread_mutex_lock(&inf->lock);
    json_t *old = store_del(inf, key);
    if (old)
        cache_adjust(inf, entry_cost(inf, key, old), 0, NULL);
    pthread_mutex_unlock(&inf->lock);
    if (old && inf->h.on_delete)
        inf->h.on_delete(old, inf->h.userdata);
    json_decref(old);
}

/* How deep kube_share_unchanged goes into objects before it compares what is below whole. */
#define SHARE_DEPTH_MAX 8

static bool share_object(json_t *fresh, json_t *old, unsigned depth)
{
    bool same = json_object_size(fresh) == json_object_size(old);
    const char *k;
    json_t *v;
    json_object_foreach (fresh, k, v) {
        json_t *w = json_object_get(old, k);
        if (!w) {
            same = false;
            continue;
        }
        if (v == w)
            continue;
        bool equal;
        /* an object this version alone holds is gone into, so that it shares what it can even
         * when something below changed; one shared already (a share_paths value) is compared */
        if (json_is_object(v) && json_is_object(w) && v->refcount == 1 && depth < SHARE_DEPTH_MAX)
            equal = share_object(v, w, depth + 1);
        else
            equal = json_equal(v, w);
        if (equal)
            json_object_set(fresh, k, w); /* an existing key: replaced in place, no rehash */
        else
            same = false;
    }
    return same;
}

bool kube_share_unchanged(json_t *fresh, json_t *old)
{
    assert(!json_is_object(fresh) || fresh->refcount == 1);
    if (!json_is_object(fresh) || !json_is_object(old) || fresh == old)
        return fresh == old;
    return share_object(fresh, old, 0);
}

/* Stores what the projection keeps of full. -EFBIG (the store unchanged) when the cached
 * budget cannot hold it. */
static int apply_upsert(struct kube_informer *inf, json_t *full, struct err *e)
{
    _cleanup_free_ char *key = kobj_key(full);
    if (!key)
        return 0;
    json_t *obj = project(inf, full);
    if (!obj) {
        /* nothing of it kept now: a version stored before must not linger */
        pthread_mutex_lock(&inf->lock);
        bool held = json_object_get(inf->store, key) != NULL;
        pthread_mutex_unlock(&inf->lock);
        if (held)
            apply_delete(inf, key);
        return 0;
    }
    /* The version replaced (only this thread writes the store: no lock needed to read it) lends
     * the new one every value that did not change, so that while a reader still holds the old
     * version the two cost little more than one. Only a projection is changed so: without
     * one, obj is the decoded object itself, which its caller still reads. */
    json_t *prev = json_object_get(inf->store, key);
    if (prev && obj != full && obj->refcount == 1)
        kube_share_unchanged(obj, prev);
    size_t cost = entry_cost(inf, key, obj);
    pthread_mutex_lock(&inf->lock);
    json_t *cur = json_object_get(inf->store, key);
    int r = cache_adjust(inf, cur ? entry_cost(inf, key, cur) : 0, cost, e);
    if (r < 0) {
        pthread_mutex_unlock(&inf->lock);
        json_decref(obj);
        return r;
    }
    json_t *keep = json_incref(obj);
    json_t *old = store_put(inf, key, obj);
    bool quiet = old && (inf->project || inf->keep_fields) && same_but_version(old, keep);
    if (quiet)
        inf->stats.unchanged++;
    pthread_mutex_unlock(&inf->lock);
    if (quiet)
        ; /* the projection did not change (say, a node heartbeat): nothing to tell */
    else if (old && inf->h.on_update)
        inf->h.on_update(old, keep, inf->h.userdata);
    else if (!old && inf->h.on_add)
        inf->h.on_add(keep, inf->h.userdata);
    json_decref(old);
    json_decref(keep);
    return 0;
}

/* ---- the loop ----------------------------------------------------------------------------- */

/* Sleeps up to ms; returns true when stopped. */
static bool nap(struct kube_informer *inf, uint64_t ms)
{
    return cond_nap(&inf->lock, &inf->cond, &inf->stop, ms);
}

/* A continue token the server forgot (410 Gone) restarts a list this many times at most. */
#define RELIST_RESTARTS_MAX 3

/* The keys a relist has seen, priced against the cached budget while it runs. */
struct seen {
    json_t *keys;
    size_t held;
};

static void seen_reset(struct kube_informer *inf, struct seen *sn)
{
    json_decref(sn->keys);
    sn->keys = json_object();
    kube_budget_put(inf->cached, sn->held);
    sn->held = 0;
}

static int seen_add(struct kube_informer *inf, struct seen *sn, const char *key, struct err *e)
{
    size_t cost = 64 + strlen(key);
    if (kube_budget_take(inf->cached, cost) < 0)
        return cache_full_err(inf, cost, e);
    sn->held += cost;
    json_object_set_new(sn->keys, key, json_true());
    return 0;
}

/* What a relist's page items are applied with. */
struct page_apply {
    struct kube_informer *inf;
    struct seen *sn;
    bool all; /* unchanged items are stored anew too */
};

/* Whether the store holds the object named: the prefilter passes over only what it does not
 * (kube.h: an object it holds is always decoded). The informer thread's, as every store write. */
static bool prefilter_may_pass(struct kube_informer *inf, const char *ns, const char *name)
{
    char key[2 * KUBE_PREFILTER_NAME_MAX + 2];
    snprintf(key, sizeof(key), "%s%s%s", ns ? ns : "", ns ? "/" : "", name);
    pthread_mutex_lock(&inf->lock);
    bool held = json_object_get(inf->store, key) != NULL;
    if (held)
        inf->stats.prefilter_held++;
    else
        inf->stats.skipped++;
    pthread_mutex_unlock(&inf->lock);
    if (held)
        log_warn("kube", "prefilter would pass over an object the informer keeps; decoded",
                 "resource=%s name=%s", inf->r.plural, key);
    return !held;
}

/* A list item passed over: the list's own version is what the informer resumes from. */
static bool item_pass(enum kube_watch_type t, const char *ns, const char *name, const char *rv,
                      void *ud)
{
    (void)t;
    (void)rv;
    struct page_apply *pa = ud;
    if (!prefilter_may_pass(pa->inf, ns, name))
        return false;
    pthread_mutex_lock(&pa->inf->lock);
    pa->inf->stats.listed++;
    pthread_mutex_unlock(&pa->inf->lock);
    return true;
}

/* Brings the store to one list item, as the page hands it over (kube_list_page_each). */
static int apply_item(json_t *it, void *ud, struct err *e)
{
    struct page_apply *pa = ud;
    struct kube_informer *inf = pa->inf;
    _cleanup_free_ char *key = kobj_key(it);
    if (!key)
        return 0;
    /* List items lack kind/apiVersion; handlers expect them. */
    if (!json_object_get(it, "kind")) {
        json_object_set_new(it, "kind", json_string(inf->r.kind));
        _cleanup_free_ char *av = inf->r.group[0] ? xasprintf("%s/%s", inf->r.group, inf->r.version)
                                                  : xstrdup(inf->r.version);
        json_object_set_new(it, "apiVersion", json_string(av));
    }
    int r = seen_add(inf, pa->sn, key, e);
    if (r < 0)
        return r;
    pthread_mutex_lock(&inf->lock);
    json_t *cur = json_object_get(inf->store, key);
    bool same = cur && streq_ptr(kobj_resource_version(cur), kobj_resource_version(it));
    inf->stats.listed++;
    pthread_mutex_unlock(&inf->lock);
    if ((!same || pa->all) && (r = apply_upsert(inf, it, e)) < 0)
        return r;
    return 0;
}

/*
 * A full list, in pages; the store is brought to it (add/update/delete calls) page by page, so
 * what it costs is the store (the cached budget) and one page (the in-flight budget) at a time.
 * A continue token the server forgot starts it over from the first page, as client-go's
 * reflector lists again.
 */
static int relist(struct kube_informer *inf, struct err *e)
{
    pthread_mutex_lock(&inf->lock);
    unsigned asked = inf->relist_asked;
    pthread_mutex_unlock(&inf->lock);
    bool all = asked != inf->relist_done;
    struct kube_list_opts lo = {.label_selector = inf->label_selector,
                                .field_selector = inf->field_selector,
                                .limit = inf->page_size};
    struct seen sn = {0};
    seen_reset(inf, &sn);
    _cleanup_free_ char *cont = NULL;
    _cleanup_free_ char *rv = NULL;
    unsigned restarts = 0;
    int r = 0;
    for (;;) {
        if (inf->stop) {
            r = -ECANCELED;
            break;
        }
        /* the page's items are decoded and applied one at a time: a page costs its body and
         * one item, not the page decoded */
        json_t *page = NULL;
        struct page_apply pa = {inf, &sn, all};
        struct kube_prefilter pf = {(const char *const *const *)inf->prefilter, item_pass, &pa};
        r = kube_list_page_each(inf->c, &inf->r, inf->ns, &lo, cont, inf->prefilter ? &pf : NULL,
                                apply_item, &pa, &page, e);
        if (r == KUBE_EGONE && cont && restarts < RELIST_RESTARTS_MAX) {
            restarts++;
            log_info("kube", "continue token expired, listing again", "resource=%s restart=%u",
                     inf->r.plural, restarts);
            free(steal_ptr(&cont));
            seen_reset(inf, &sn);
            continue;
        }
        if (r < 0)
            break;
        json_t *meta = json_object_get(page, "metadata");
        if (r == 0 && !cont) {
            free(rv);
            rv = xstrdup(json_string_value(json_object_get(meta, "resourceVersion")) ?: "");
        }
        const char *next = json_string_value(json_object_get(meta, "continue"));
        free(cont);
        cont = next && next[0] ? xstrdup(next) : NULL;
        json_decref(page);
        if (r < 0 || !cont)
            break;
    }
    if (r < 0) {
        json_decref(sn.keys);
        kube_budget_put(inf->cached, sn.held);
        return r;
    }
    /* whatever the store holds that the list lacks was deleted meanwhile */
    _cleanup_json_ json_t *gone = json_array();
    pthread_mutex_lock(&inf->lock);
    const char *k;
    json_t *v;
    json_object_foreach (inf->store, k, v) {
        if (!json_object_get(sn.keys, k))
            json_array_append_new(gone, json_string(k));
    }
    pthread_mutex_unlock(&inf->lock);
    json_decref(sn.keys);
    kube_budget_put(inf->cached, sn.held);
    size_t i;
    json_array_foreach (gone, i, v) {
        apply_delete(inf, json_string_value(v));
    }
    set_rv(inf, rv);
    pthread_mutex_lock(&inf->lock);
    inf->stats.lists++;
    inf->relist_done = asked;
    inf->synced = true;
    pthread_cond_broadcast(&inf->cond);
    pthread_mutex_unlock(&inf->lock);
    return 0;
}

struct watch_state {
    struct kube_informer *inf;
    struct err *e;
};

static int on_event(enum kube_watch_type t, json_t *obj, void *ud)
{
    struct watch_state *ws = ud;
    struct kube_informer *inf = ws->inf;
    if (t == KUBE_WATCH_ERROR)
        return 0; /* kube_watch turns it into the return code */
    const char *rv = kobj_resource_version(obj);
    if (t == KUBE_WATCH_BOOKMARK) {
        set_rv(inf, rv);
        return 0;
    }
    if (t == KUBE_WATCH_DELETED) {
        _cleanup_free_ char *key = kobj_key(obj);
        if (key)
            apply_delete(inf, key);
    } else {
        int r = apply_upsert(inf, obj, ws->e);
        if (r < 0)
            return r; /* the watch ends with this error; the informer lists again later */
    }
    set_rv(inf, rv);
    pthread_mutex_lock(&inf->lock);
    inf->stats.events++;
    pthread_mutex_unlock(&inf->lock);
    return 0;
}

/* A watch event passed over: its version is the informer's, as a decoded event's, so that a
 * watch resumed after the stream ends starts past it (and not, after minutes of such events
 * alone, from a version the server has compacted away: a 410 and a whole list). */
static bool event_pass(enum kube_watch_type t, const char *ns, const char *name, const char *rv,
                       void *ud)
{
    (void)t;
    struct watch_state *ws = ud;
    if (!prefilter_may_pass(ws->inf, ns, name))
        return false;
    set_rv(ws->inf, rv);
    return true;
}

static void *informer_main(void *ud)
{
    struct kube_informer *inf = ud;
    bool need_list = true;
    unsigned failures = 0;
    /* Every call of this thread (lists included) ends when the informer is freed. */
    kube_call_begin(&(struct kube_call){.stop = &inf->stop});
    while (!inf->stop) {
        struct err e = {0};
        if (need_list) {
            int r = relist(inf, &e);
            if (r == -ECANCELED)
                break;
            if (r < 0) {
                log_warn("kube", "informer list failed", "resource=%s error=\"%s\"", inf->r.plural,
                         err_msg(&e));
                if (nap(inf, kube_backoff_ms(failures++, 500, 30000, kube_random())))
                    break;
                continue;
            }
            need_list = false;
            failures = 0;
        }
        pthread_mutex_lock(&inf->lock);
        bool relist_asked = inf->relist_asked != inf->relist_done;
        inf->watch_stop = inf->stop || relist_asked;
        if (!relist_asked)
            inf->stats.watches++;
        pthread_mutex_unlock(&inf->lock);
        if (relist_asked) {
            need_list = true;
            continue;
        }
        _cleanup_free_ char *rv = kube_informer_resource_version(inf);
        struct kube_watch_opts wo = {.label_selector = inf->label_selector,
                                     .field_selector = inf->field_selector,
                                     .resource_version = rv,
                                     .bookmarks = true,
                                     .timeout_seconds = 300 + (unsigned)(kube_random() % 300),
                                     .stop = &inf->watch_stop};
        uint64_t started = now_ms_mono();
        struct err we = {0};
        struct watch_state ws = {inf, &we};
        struct kube_prefilter pf = {(const char *const *const *)inf->prefilter, event_pass, &ws};
        int r = kube_watch_prefiltered(inf->c, &inf->r, inf->ns, &wo, inf->prefilter ? &pf : NULL,
                                       on_event, &ws, &e);
        if (r < 0 && we.code == r)
            e = we; /* the store's own error, not "stopped by its handler" */
        if (inf->stop)
            break;
        pthread_mutex_lock(&inf->lock);
        relist_asked = inf->relist_asked != inf->relist_done;
        pthread_mutex_unlock(&inf->lock);
        if (relist_asked) {
            need_list = true; /* kube_informer_relist() ended the watch */
            continue;
        }
        if (r == -ECANCELED)
            break;
        if (r == 0) {
            failures = 0;
            continue; /* the server closed the stream: resume from the last version */
        }
        if (r == KUBE_EGONE) {
            pthread_mutex_lock(&inf->lock);
            inf->stats.gone++;
            pthread_mutex_unlock(&inf->lock);
            log_info("kube", "watch expired, re-listing", "resource=%s", inf->r.plural);
            need_list = true;
            continue;
        }
        if (now_ms_mono() - started > 10000)
            failures = 0;
        log_warn("kube", "watch failed, re-listing", "resource=%s error=\"%s\"", inf->r.plural,
                 err_msg(&e));
        /* The stream broke or the watch was refused: the server may have restarted and lost
         * our version (or be another replica), so a resumed watch could silently miss
         * changes. Start over from a list, as after a 410. Streams that end normally (every
         * few minutes) are resumed without one. */
        need_list = true;
        if (nap(inf, kube_backoff_ms(failures++, 200, 30000, kube_random())))
            break;
    }
    kube_call_end();
    return NULL;
}

/* A NULL-terminated list of strings copied (NULL: NULL), and freed. */
static char **strv_copy(const char *const *v)
{
    if (!v)
        return NULL;
    size_t n = 0;
    while (v[n])
        n++;
    char **out = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        out[i] = xstrdup(v[i]);
    return out;
}

static void strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

int kube_informer_new(struct kube_client *c, const struct kube_resource *r,
                      const struct kube_informer_opts *o, struct kube_informer **ret, struct err *e)
{
    struct kube_informer_opts def = {0};
    if (!o)
        o = &def;
    int rc;
    if ((rc = kube_selector_check("labelSelector", o->label_selector, e)) < 0 ||
        (rc = kube_selector_check("fieldSelector", o->field_selector, e)) < 0)
        return err_prefix(e, "informer for %s", r->plural);
    struct kube_informer *inf = xcalloc(1, sizeof(*inf));
    inf->c = c;
    inf->group = xstrdup(r->group ? r->group : "");
    inf->version = xstrdup(r->version);
    inf->plural = xstrdup(r->plural);
    inf->kind = xstrdup(r->kind ? r->kind : "");
    inf->r =
        (struct kube_resource){inf->group, inf->version, inf->plural, inf->kind, r->namespaced};
    inf->ns = o->ns && o->ns[0] ? xstrdup(o->ns) : NULL;
    inf->label_selector = o->label_selector ? xstrdup(o->label_selector) : NULL;
    inf->field_selector = o->field_selector ? xstrdup(o->field_selector) : NULL;
    inf->page_size = o->page_size;
    inf->project = o->project;
    inf->project_userdata = o->project_userdata;
    inf->keep_fields = strv_copy(o->keep_fields);
    if (o->index_label_keys) {
        inf->index_keys = json_object();
        for (size_t i = 0; o->index_label_keys[i]; i++)
            json_object_set_new(inf->index_keys, o->index_label_keys[i], json_true());
    }
    inf->share_paths = strv_copy(o->share_paths);
    if (inf->share_paths)
        inf->shared = json_object();
    if (o->prefilter) {
        size_t n = 0;
        while (o->prefilter[n])
            n++;
        inf->prefilter = xcalloc(n + 1, sizeof(char **));
        for (size_t g = 0; g < n; g++) {
            /* an empty string or group is in every text: no filter at all */
            assert(o->prefilter[g][0]);
            for (size_t i = 0; o->prefilter[g][i]; i++)
                assert(o->prefilter[g][i][0]);
            inf->prefilter[g] = strv_copy(o->prefilter[g]);
        }
    }
    inf->compact_labels = o->compact_labels;
    inf->h = o->handlers;
    inf->cached = kube_client_cached(c);
    inf->store = json_object();
    inf->labels = json_object();
    inf->intern = json_object();
    pthread_mutex_init(&inf->lock, NULL);
    cond_init_monotonic(&inf->cond);
    if ((rc = pthread_create(&inf->thread, NULL, informer_main, inf)) != 0) {
        kube_informer_free(inf);
        return err_errno(e, -rc, "informer for %s: starting its thread", r->plural);
    }
    inf->started = true;
    *ret = inf;
    return 0;
}

void kube_informer_free(struct kube_informer *inf)
{
    if (!inf)
        return;
    pthread_mutex_lock(&inf->lock);
    inf->stop = 1;
    inf->watch_stop = 1;
    pthread_cond_broadcast(&inf->cond);
    pthread_mutex_unlock(&inf->lock);
    if (inf->started)
        pthread_join(inf->thread, NULL);
    json_decref(inf->store);
    if (inf->cached)
        kube_budget_put(inf->cached, inf->held);
    json_decref(inf->labels);
    json_decref(inf->index_keys);
    json_decref(inf->intern);
    strv_free(inf->keep_fields);
    strv_free(inf->share_paths);
    for (size_t g = 0; inf->prefilter && inf->prefilter[g]; g++)
        strv_free(inf->prefilter[g]);
    free(inf->prefilter);
    json_decref(inf->shared);
    free(inf->group);
    free(inf->version);
    free(inf->plural);
    free(inf->kind);
    free(inf->ns);
    free(inf->label_selector);
    free(inf->field_selector);
    free(inf->rv);
    pthread_cond_destroy(&inf->cond);
    pthread_mutex_destroy(&inf->lock);
    free(inf);
}

int kube_informer_wait_synced(struct kube_informer *inf, uint64_t timeout_ms)
{
    uint64_t deadline = deadline_after(timeout_ms);
    pthread_mutex_lock(&inf->lock);
    while (!inf->synced)
        if (cond_wait_deadline(&inf->cond, &inf->lock, deadline) == -ETIMEDOUT)
            break;
    bool s = inf->synced;
    pthread_mutex_unlock(&inf->lock);
    return s ? 0 : -ETIMEDOUT;
}

void kube_informer_relist(struct kube_informer *inf)
{
    pthread_mutex_lock(&inf->lock);
    inf->relist_asked++;
    inf->watch_stop = 1;
    pthread_cond_broadcast(&inf->cond);
    pthread_mutex_unlock(&inf->lock);
}

bool kube_informer_relisted(struct kube_informer *inf)
{
    pthread_mutex_lock(&inf->lock);
    bool done = inf->relist_done == inf->relist_asked;
    pthread_mutex_unlock(&inf->lock);
    return done;
}

bool kube_informer_synced(struct kube_informer *inf)
{
    pthread_mutex_lock(&inf->lock);
    bool s = inf->synced;
    pthread_mutex_unlock(&inf->lock);
    return s;
}

json_t *kube_informer_get(struct kube_informer *inf, const char *ns, const char *name)
{
    if (!name)
        return NULL;
    _cleanup_free_ char *key = ns && ns[0] ? xasprintf("%s/%s", ns, name) : xstrdup(name);
    pthread_mutex_lock(&inf->lock);
    json_t *v = json_incref(json_object_get(inf->store, key));
    pthread_mutex_unlock(&inf->lock);
    return v;
}

static bool in_ns(json_t *obj, const char *ns)
{
    return !ns || streq_ptr(kobj_namespace(obj), ns);
}

json_t *kube_informer_list(struct kube_informer *inf, const char *ns, const char *label_key,
                           const char *label_value)
{
    json_t *out = json_array();
    const char *k;
    json_t *v;
    pthread_mutex_lock(&inf->lock);
    bool indexed = label_key && label_value &&
                   (!inf->index_keys || json_object_get(inf->index_keys, label_key));
    if (indexed) {
        _cleanup_free_ char *kv = xasprintf("%s=%s", label_key, label_value);
        json_object_foreach (json_object_get(inf->labels, kv), k, v) {
            json_t *obj = json_object_get(inf->store, k);
            if (obj && in_ns(obj, ns))
                json_array_append(out, obj);
        }
    } else {
        json_object_foreach (inf->store, k, v) {
            if (!in_ns(v, ns))
                continue;
            const json_t *lv = kobj_labels(v);
            if (label_key &&
                (!kobj_labels_has(lv, label_key) ||
                 (label_value && !streq_ptr(kobj_labels_get(lv, label_key), label_value))))
                continue;
            json_array_append(out, v);
        }
    }
    pthread_mutex_unlock(&inf->lock);
    return out;
}

size_t kube_informer_count(struct kube_informer *inf)
{
    pthread_mutex_lock(&inf->lock);
    size_t n = json_object_size(inf->store);
    pthread_mutex_unlock(&inf->lock);
    return n;
}

char *kube_informer_resource_version(struct kube_informer *inf)
{
    pthread_mutex_lock(&inf->lock);
    char *rv = inf->rv ? xstrdup(inf->rv) : NULL;
    pthread_mutex_unlock(&inf->lock);
    return rv;
}

void kube_informer_stats(struct kube_informer *inf, struct kube_informer_stats *ret)
{
    pthread_mutex_lock(&inf->lock);
    *ret = inf->stats;
    pthread_mutex_unlock(&inf->lock);
}

bool kube_sync_stalled(struct kube_sync_progress *p, uint64_t listed, uint64_t now_ms,
                       uint64_t stall_ms)
{
    if (!p->started || listed != p->listed) {
        p->started = true;
        p->listed = listed;
        p->since_ms = now_ms;
        return false;
    }
    return now_ms - p->since_ms >= stall_ms;
}
