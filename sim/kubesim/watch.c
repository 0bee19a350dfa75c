/* SPDX-License-Identifier: Apache-2.0 */
/* Watch streams: the initial state, events from the store's log with selector transitions,
 * bookmarks, timeouts and 410 Expired once the log is compacted past the cursor. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "ks-http.h"
#include "kubesim-pb.h"

int ks_watch_start(struct ksim *ks, struct ks_type *t, const char *ns, struct ksim_selector *ls,
                   struct ksim_selector *fs, const struct ks_watch_opts *o, struct ksim_watch **ret,
                   struct ks_status *st)
{
    const char *rvs = o->resource_version;
    uint64_t rv = 0;
    struct ksim_watch *w = xcalloc(1, sizeof(*w));
    w->type = t;
    w->ns = ns ? xstrdup(ns) : NULL;
    w->lsel = ls;
    w->fsel = fs;
    w->bookmarks = o->bookmarks;
    w->table = o->table;
    w->last_bookmark = ks_now(ks);
    if (o->timeout_s > 0) {
        w->deadline = ks_now(ks) + o->timeout_s * 1000;
    } else {
        /* as the API server's --min-request-timeout: a random 30 to 60 minutes */
        uint64_t x = (++ks->uid_counter + ks_now(ks)) * 0x9E3779B97F4A7C15ull;
        w->deadline = ks_now(ks) + (1800 + (x >> 33) % 1800) * 1000;
    }
    ks_store_compact(ks);
    if (!rvs || !rvs[0] || streq(rvs, "0") || o->send_initial_events) {
        char *last;
        size_t rem;
        w->initial = ks_store_list(t, ns, ls, fs, NULL, 0, &last, &rem);
        free(last);
        w->cursor = ks->rv;
        w->initial_end_bookmark = o->send_initial_events && w->bookmarks;
    } else if (parse_u64(rvs, &rv) < 0) {
        ksim_selector_free(ls);
        ksim_selector_free(fs);
        free(w->ns);
        free(w);
        return ks_status_set(st, 400, "BadRequest", NULL, "invalid resource version: %s", rvs);
    } else if (rv < ks->compacted_rv) {
        w->expired_rv = rv;
        w->cursor = rv;
    } else {
        w->cursor = rv;
    }
    ks->watches_active++;
    *ret = w;
    return ks_status_ok(st, 200, NULL);
}

void ksim_watch_free(struct ksim *ks, struct ksim_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&ks->lock);
    if (ks->watches_active)
        ks->watches_active--;
    pthread_mutex_unlock(&ks->lock);
    ksim_selector_free(w->lsel);
    ksim_selector_free(w->fsel);
    json_decref(w->initial);
    free(w->ns);
    free(w);
}

static bool watch_sees(struct ksim_watch *w, json_t *obj)
{
    return obj && ks_obj_visible(obj, w->ns, w->lsel, w->fsel);
}

static void emit(struct ksim *ks, struct ksim_watch *w, struct sbuf *out, const char *type,
                 json_t *obj)
{
    json_t *o = obj;
    json_t *tab = NULL;
    if (w->table) {
        json_t *one = json_pack("[O]", obj);
        tab = ks_table(ks, w->type, one, true);
        json_decref(one);
        o = tab;
    }
    if (w->proto) {
        struct err e = {0};
        if (ks_pb_encode_watch_event(type, o, out, &e) < 0 && sbuf_check(out) == 0) {
            /* an object the tables cannot carry: an ERROR event, then the watch ends */
            json_t *st = json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:i}", "kind", "Status", "apiVersion",
                                   "v1", "metadata", "status", "Failure", "message", err_msg(&e),
                                   "reason", "InternalError", "code", 500);
            if (ks_pb_encode_watch_event("ERROR", st, out, &e) < 0)
                sbuf_fail(out, -EINVAL);
            json_decref(st);
            w->ended = true;
        }
        json_decref(tab);
        ks->watch_events_total++;
        return;
    }
    json_t *ev = json_pack("{s:s,s:O}", "type", type, "object", o);
    char *s = json_dumps(ev, JSON_COMPACT);
    if (s) {
        /* Sticky, one append per event (never half a line): ksim_watch_next ends the watch
         * when an event did not fit. */
        size_t n = strlen(s);
        s[n] = '\n'; /* json_dumps' NUL becomes the line's end */
        sbuf_add(out, s, n + 1);
    }
    free(s);
    json_decref(ev);
    json_decref(tab);
    ks->watch_events_total++;
}

/* The event's object as compact JSON, made once for every JSON watcher that sends it. The
 * newest events' dumps are kept, up to KS_EV_DUMP_BUDGET bytes in all: older ones are dropped
 * (a watcher that far behind has it made again). NULL when jansson cannot dump it. */
static const char *event_dump(struct ksim *ks, struct ks_event *e, size_t *ret_len)
{
    if (!e->dump) {
        e->dump = json_dumps(e->obj, JSON_COMPACT);
        if (!e->dump)
            return NULL;
        e->dump_len = strlen(e->dump);
        ks->ev_dump_bytes += e->dump_len;
        for (size_t i = ks_ev_search(ks, ks->ev_dump_low ? ks->ev_dump_low - 1 : 0);
             ks->ev_dump_bytes > KS_EV_DUMP_BUDGET && i < ks->ev_len && &ks->ev[i] != e; i++) {
            ks_ev_drop_dump(ks, &ks->ev[i]);
            ks->ev_dump_low = ks->ev[i].rv + 1;
        }
    }
    *ret_len = e->dump_len;
    return e->dump;
}

void ks_response_from_event(struct ksim *ks, const struct ksim_request *req,
                            struct ksim_response *resp)
{
    if (!resp->json || resp->body || ks->ev_len == ks->ev_head)
        return;
    struct ks_event *e = &ks->ev[ks->ev_len - 1];
    if (e->obj != resp->json || !ks_response_is_json(req, resp))
        return;
    size_t n = 0;
    const char *dump = event_dump(ks, e, &n);
    if (!dump)
        return;
    char *body = xmalloc(n + 1);
    memcpy(body, dump, n);
    body[n] = '\0';
    resp->body = body;
    resp->body_len = n;
    resp->content_type = "application/json";
    json_decref(resp->json);
    resp->json = NULL;
}

/* An event of the log: as emit() would send it, its object's JSON made once (event_dump). */
static void emit_event(struct ksim *ks, struct ksim_watch *w, struct sbuf *out, const char *type,
                       struct ks_event *e)
{
    size_t n = 0;
    const char *dump = w->table || w->proto ? NULL : event_dump(ks, e, &n);
    if (!dump) {
        emit(ks, w, out, type, e->obj);
        return;
    }
    /* {"type":"T","object":OBJ}\n, as json_dumps writes the pair, in one append: the event
     * is sent whole or not at all */
    static const char pre[] = "{\"type\":\"", mid[] = "\",\"object\":", post[] = "}\n";
    size_t tl = strlen(type), need = sizeof(pre) - 1 + tl + sizeof(mid) - 1 + n + sizeof(post) - 1;
    if (sbuf_check(out) < 0)
        return;
    if (need > out->limit || out->len > out->limit - need) {
        (void)sbuf_fail(out, -ENOBUFS);
        return;
    }
    sbuf_add(out, pre, sizeof(pre) - 1);
    sbuf_add(out, type, tl);
    sbuf_add(out, mid, sizeof(mid) - 1);
    sbuf_add(out, dump, n);
    sbuf_add(out, post, sizeof(post) - 1);
    ks->watch_events_total++;
}

static void emit_bookmark(struct ksim *ks, struct ksim_watch *w, struct sbuf *out, bool end)
{
    char rv[32];
    snprintf(rv, sizeof(rv), "%" PRIu64, w->cursor > ks->rv ? w->cursor : ks->rv);
    _cleanup_free_ char *gv = ks_type_gv(w->type);
    json_t *obj = json_pack("{s:s,s:s,s:{s:s,s:n}}", "kind", w->type->kind, "apiVersion", gv,
                            "metadata", "resourceVersion", rv, "creationTimestamp");
    if (end)
        json_object_set_new(json_object_get(obj, "metadata"), "annotations",
                            json_pack("{s:s}", "k8s.io/initial-events-end", "true"));
    bool table = w->table;
    w->table = false;
    emit(ks, w, out, "BOOKMARK", obj);
    w->table = table;
    json_decref(obj);
    w->last_bookmark = ks_now(ks);
}

static void emit_expired(struct ksim *ks, struct ksim_watch *w, struct sbuf *out)
{
    _cleanup_free_ char *m = xasprintf("too old resource version: %" PRIu64 " (%" PRIu64 ")",
                                       w->expired_rv, ks->compacted_rv + 1);
    json_t *st =
        json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:i}", "kind", "Status", "apiVersion", "v1",
                  "metadata", "status", "Failure", "message", m, "reason", "Expired", "code", 410);
    bool table = w->table;
    w->table = false;
    emit(ks, w, out, "ERROR", st);
    w->table = table;
    json_decref(st);
    w->ended = true;
}

int ksim_watch_next(struct ksim *ks, struct ksim_watch *w, struct sbuf *out, uint64_t wait_ms)
{
    pthread_mutex_lock(&ks->lock);
    uint64_t start = now_ms_mono();
    int r = 0;
    for (;;) {
        if (ks->shutdown || w->ended) {
            r = -1;
            break;
        }
        if (w->expired_rv || w->cursor < ks->compacted_rv) {
            if (!w->expired_rv)
                w->expired_rv = w->cursor;
            emit_expired(ks, w, out);
            r = 1;
            break;
        }
        if (w->initial) {
            /* in slices, so a huge initial state never overflows the stream buffer */
            size_t n = json_array_size(w->initial);
            while (w->initial_pos < n && out->len < (1u << 20))
                emit(ks, w, out, "ADDED", json_array_get(w->initial, w->initial_pos++));
            r = 1;
            if (w->initial_pos < n)
                break;
            json_decref(w->initial);
            w->initial = NULL;
            if (w->initial_end_bookmark)
                emit_bookmark(ks, w, out, true);
            r = 1;
            break;
        }
        size_t before = out->len;
        for (size_t i = ks_ev_search(ks, w->cursor); i < ks->ev_len && out->len < (1u << 20); i++) {
            struct ks_event *e = &ks->ev[i];
            w->cursor = e->rv;
            if (e->type != w->type)
                continue;
            bool now_in = watch_sees(w, e->obj);
            bool was_in = e->kind == KS_MODIFIED ? watch_sees(w, e->old) : now_in;
            if (e->kind == KS_ADDED && now_in)
                emit_event(ks, w, out, "ADDED", e);
            else if (e->kind == KS_DELETED && now_in)
                emit_event(ks, w, out, "DELETED", e);
            else if (e->kind == KS_MODIFIED && now_in && was_in)
                emit_event(ks, w, out, "MODIFIED", e);
            else if (e->kind == KS_MODIFIED && now_in)
                emit_event(ks, w, out, "ADDED", e);
            else if (e->kind == KS_MODIFIED && was_in)
                emit_event(ks, w, out, "DELETED", e);
        }
        if (out->len > before) {
            r = 1;
            break;
        }
        uint64_t now = ks_now(ks);
        if (w->deadline && now >= w->deadline) {
            w->ended = true;
            r = -1;
            break;
        }
        if (w->bookmarks && now >= w->last_bookmark + ks->opts.bookmark_interval_ms) {
            emit_bookmark(ks, w, out, false);
            r = 1;
            break;
        }
        uint64_t waited = now_ms_mono() - start;
        if (waited >= wait_ms)
            break;
        uint64_t left = wait_ms - waited;
        if (w->deadline && w->deadline - now < left)
            left = w->deadline - now + 1;
        if (w->bookmarks && w->last_bookmark + ks->opts.bookmark_interval_ms - now < left)
            left = w->last_bookmark + ks->opts.bookmark_interval_ms - now + 1;
        ks_cond_wait(ks, left);
    }
    if (sbuf_check(out) < 0) {
        /* An event did not fit in out: end the watch rather than skip the event, so the
         * client watches again from the last resourceVersion it saw. */
        w->ended = true;
        r = out->len ? 1 : -1;
    }
    pthread_mutex_unlock(&ks->lock);
    return r;
}
