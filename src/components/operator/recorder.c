/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Events that scale (operator.h, op_recorder): a pass's Events in, the Event writes out, as the
 * Kubernetes event recorder shapes them. Similar Events about many objects become one with a
 * count and a sample of names; an Event repeated within the window counts up the one already
 * posted (count, series) instead of making another; a token bucket per source and object holds
 * back a flood. Pure: the time comes in, the writes go out, the shell makes them.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "operator.h"

#define POSTED_MAX  4096 /* Events remembered for counting up */
#define BUCKETS_MAX 4096 /* token buckets (objects Events were about lately) */

struct op_recorder {
    struct op_recorder_opts o;
    /* identity -> {"ns", "name", "count", "last" (ms), "agg": bool} of Events posted lately */
    json_t *posted;
    /* source and object -> {"tokens": real, "at": ms} */
    json_t *buckets;
    uint64_t seq; /* Event names: unique within a millisecond */
};

struct op_recorder *op_recorder_new(const struct op_recorder_opts *o)
{
    struct op_recorder *r = xcalloc(1, sizeof(*r));
    r->o = o ? *o : (struct op_recorder_opts){0};
    if (!r->o.component)
        r->o.component = "gpuop-operator";
    if (!r->o.burst)
        r->o.burst = OP_EVENT_BURST;
    if (!r->o.refill_ms)
        r->o.refill_ms = OP_EVENT_REFILL_MS;
    if (!r->o.aggregate_min)
        r->o.aggregate_min = OP_EVENT_AGGREGATE_MIN;
    /* a queue keeps an entry for this many of a group's objects, the rest only counted: a
     * group past it must be aggregated */
    if (r->o.aggregate_min > OP_EVENT_QUEUE_KEEP)
        r->o.aggregate_min = OP_EVENT_QUEUE_KEEP;
    if (!r->o.window_ms)
        r->o.window_ms = OP_EVENT_WINDOW_MS;
    if (!r->o.sample)
        r->o.sample = OP_EVENT_SAMPLE;
    r->posted = json_object();
    r->buckets = json_object();
    return r;
}

void op_recorder_free(struct op_recorder *r)
{
    if (!r)
        return;
    json_decref(r->posted);
    json_decref(r->buckets);
    free(r);
}

void op_event_writes_done(struct op_event_writes *w)
{
    for (size_t i = 0; i < w->n; i++) {
        free(w->v[i].ns);
        free(w->v[i].name);
        free(w->v[i].key);
        json_decref(w->v[i].body);
        json_decref(w->v[i].recreate);
    }
    free(w->v);
    *w = (struct op_event_writes){0};
}

/* ---- keys ----------------------------------------------------------------------------------- */

static char *ref_key(const struct op_event_ref *o)
{
    return xasprintf("%s\x1f%s\x1f%s\x1f%s\x1f%s", o->api_version ?: "", o->kind ?: "", o->ns ?: "",
                     o->name ?: "", o->uid ?: "");
}

/* An Event's identity: about what (one object, or a group), and what it says. */
static char *single_key(const struct op_event_in *ev)
{
    _cleanup_free_ char *obj = ref_key(&ev->about);
    return xasprintf("1\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", obj, ev->ns ?: "", ev->type ?: "",
                     ev->reason ?: "", ev->message ?: "");
}

static char *group_key(const struct op_event_in *ev)
{
    _cleanup_free_ char *to = ref_key(&ev->group_ref);
    return xasprintf("n\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", ev->group, to,
                     ev->about.kind ?: "", ev->group_ns ?: "", ev->type ?: "", ev->reason ?: "",
                     ev->message ?: "");
}

/* ---- the token buckets ---------------------------------------------------------------------- */

/* Takes a token for an Event about `o`, if the bucket has one. */
static bool take_token(struct op_recorder *r, const struct op_event_ref *o, uint64_t now)
{
    _cleanup_free_ char *obj = ref_key(o);
    _cleanup_free_ char *key = xasprintf("%s\x1f%s", r->o.component, obj);
    json_t *b = json_object_get(r->buckets, key);
    double tokens = r->o.burst;
    if (b) {
        uint64_t at = (uint64_t)json_integer_value(json_object_get(b, "at"));
        tokens = json_real_value(json_object_get(b, "tokens"));
        if (now > at)
            tokens += (double)(now - at) / (double)r->o.refill_ms;
        if (tokens > r->o.burst)
            tokens = r->o.burst;
    } else if (json_object_size(r->buckets) >= BUCKETS_MAX) {
        /* forget buckets that have refilled: they hold nothing back */
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe (r->buckets, tmp, k, v) {
            uint64_t at = (uint64_t)json_integer_value(json_object_get(v, "at"));
            double t = json_real_value(json_object_get(v, "tokens"));
            if (now > at && t + (double)(now - at) / (double)r->o.refill_ms >= r->o.burst)
                json_object_del(r->buckets, k);
        }
    }
    bool ok = tokens >= 1.0;
    if (ok)
        tokens -= 1.0;
    json_object_set_new(r->buckets, key,
                        json_pack("{s:f,s:I}", "tokens", tokens, "at", (json_int_t)now));
    return ok;
}

/* ---- the Events' bodies --------------------------------------------------------------------- */

static json_t *ref_json(const struct op_event_ref *o)
{
    json_t *j = json_pack("{s:s,s:s,s:s}", "apiVersion", o->api_version ?: "v1", "kind",
                          o->kind ?: "", "name", o->name ?: "");
    if (o->ns)
        json_object_set_new(j, "namespace", json_string(o->ns));
    if (o->uid && o->uid[0])
        json_object_set_new(j, "uid", json_string(o->uid));
    return j;
}

static void set_counts(json_t *body, json_int_t count, uint64_t now)
{
    char t[40], us[48];
    time_rfc3339(now, t, sizeof(t));
    time_rfc3339_us(now * 1000, us, sizeof(us));
    json_object_set_new(body, "count", json_integer(count));
    json_object_set_new(body, "lastTimestamp", json_string(t));
    /* kubectl reads a series' count and last time first: "(x1000 over 5s)" */
    if (count > 1)
        json_object_set_new(body, "series",
                            json_pack("{s:I,s:s}", "count", count, "lastObservedTime", us));
}

static char *event_name(struct op_recorder *r, const char *about, uint64_t now)
{
    return xasprintf("%.200s.%016llx", about ?: "event",
                     (unsigned long long)(now * 1000000u + (r->seq++ % 1000000u)));
}

static json_t *new_event(const char *name, const char *ns, const struct op_event_ref *about,
                         const struct op_event_in *ev, const char *message, json_int_t count,
                         const char *component, uint64_t now)
{
    char t[40];
    time_rfc3339(now, t, sizeof(t));
    json_t *body =
        json_pack("{s:s,s:s,s:{s:s,s:s},s:o,s:s,s:s,s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind",
                  "Event", "metadata", "name", name, "namespace", ns, "involvedObject",
                  ref_json(about), "reason", ev->reason ?: "", "message", message ?: "", "type",
                  ev->type ?: "Normal", "firstTimestamp", t, "source", "component", component);
    if (!body) /* a message that is not UTF-8: said so rather than dropped */
        body = json_pack("{s:s,s:s,s:{s:s,s:s},s:o,s:s,s:s,s:s,s:s,s:{s:s}}", "apiVersion", "v1",
                         "kind", "Event", "metadata", "name", name, "namespace", ns,
                         "involvedObject", ref_json(about), "reason", "InvalidEvent", "message",
                         "(an Event whose reason or message is not UTF-8)", "type", "Warning",
                         "firstTimestamp", t, "source", "component", component);
    set_counts(body, count, now);
    return body;
}

/* "<message> on 1000 nodes: a, b, c, d, e and 995 more" */
static char *group_message(const struct op_event_in *ev, json_int_t total, const json_t *names,
                           unsigned sample)
{
    struct sbuf b;
    sbuf_init(&b, 4096);
    char kind[64];
    snprintf(kind, sizeof(kind), "%s", ev->about.kind ?: "object");
    for (char *p = kind; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    sbuf_addf(&b, "%s on %lld %ss: ", ev->message ?: "", (long long)total, kind);
    size_t n = json_array_size(names);
    for (size_t i = 0; i < n && i < sample; i++)
        sbuf_addf(&b, "%s%s", i ? ", " : "", json_string_value(json_array_get(names, i)));
    if ((json_int_t)(n < sample ? n : sample) < total)
        sbuf_addf(&b, " and %lld more", (long long)(total - (json_int_t)(n < sample ? n : sample)));
    if (b.error < 0) { /* a message is bounded: the names are a sample */
        sbuf_reset(&b);
        sbuf_addf(&b, "%.1024s on %lld %ss", ev->message ?: "", (long long)total, kind);
    }
    return sbuf_steal(&b);
}

/* ---- one pass ------------------------------------------------------------------------------- */

static void push(struct op_event_writes *w, struct op_event_write x)
{
    w->v = xrealloc(w->v, (w->n + 1) * sizeof(*w->v));
    w->v[w->n++] = x;
}

/* Forgets Events posted before the window, and the oldest past POSTED_MAX. */
static void posted_expire(struct op_recorder *r, uint64_t now)
{
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe (r->posted, tmp, k, v) {
        uint64_t last = (uint64_t)json_integer_value(json_object_get(v, "last"));
        if (last + r->o.window_ms < now)
            json_object_del(r->posted, k);
    }
    while (json_object_size(r->posted) > POSTED_MAX) {
        const char *oldest = NULL;
        uint64_t at = UINT64_MAX;
        json_object_foreach (r->posted, k, v) {
            uint64_t last = (uint64_t)json_integer_value(json_object_get(v, "last"));
            if (last < at) {
                at = last;
                oldest = k;
            }
        }
        json_object_del(r->posted, oldest);
    }
}

/* A write of an Event `key` stands for (created, or counted up), if a token allows it. */
static void write_event(struct op_recorder *r, struct op_event_writes *out, const char *key,
                        const struct op_event_in *ev, const struct op_event_ref *about,
                        const char *ns, const char *message, json_int_t n, bool agg, uint64_t now)
{
    if (!take_token(r, about, now)) {
        out->dropped += (size_t)n;
        return;
    }
    json_t *p = json_object_get(r->posted, key);
    if (p) {
        json_int_t count = json_integer_value(json_object_get(p, "count")) + n;
        json_t *patch = json_object();
        set_counts(patch, count, now);
        if (agg)
            json_object_set_new(patch, "message", json_string(message));
        json_object_set_new(p, "count", json_integer(count));
        json_object_set_new(p, "last", json_integer((json_int_t)now));
        push(out,
             (struct op_event_write){.patch = true,
                                     .ns = xstrdup(kobj_str(p, "ns")),
                                     .name = xstrdup(kobj_str(p, "name")),
                                     .body = patch,
                                     .recreate = new_event(kobj_str(p, "name"), ns, about, ev,
                                                           message, count, r->o.component, now),
                                     .key = xstrdup(key)});
        return;
    }
    char *name = event_name(r, about->name, now);
    json_object_set_new(r->posted, key,
                        json_pack("{s:s,s:s,s:I,s:I}", "ns", ns, "name", name, "count", n, "last",
                                  (json_int_t)now));
    push(out, (struct op_event_write){
                  .ns = xstrdup(ns),
                  .name = name,
                  .body = new_event(name, ns, about, ev, message, n, r->o.component, now),
                  .key = xstrdup(key)});
}

void op_recorder_plan(struct op_recorder *r, const struct op_event_in *ev, size_t n,
                      uint64_t now_ms, struct op_event_writes *ret)
{
    struct op_event_writes out = {0};
    posted_expire(r, now_ms);
    /* the groups: the distinct objects each is about, in order, and how many more each
     * counts past the queue's entries */
    _cleanup_(json_decrefp) json_t *groups = json_object();
    _cleanup_(json_decrefp) json_t *seen = json_object(); /* group key, name -> null */
    _cleanup_(json_decrefp) json_t *more = json_object(); /* group key -> count */
    for (size_t i = 0; i < n; i++) {
        if (!ev[i].group)
            continue;
        _cleanup_free_ char *gk = group_key(&ev[i]);
        json_t *names = json_object_get(groups, gk);
        if (!names) {
            names = json_array();
            json_object_set_new(groups, gk, names);
        }
        if (ev[i].more)
            json_object_set_new(more, gk,
                                json_integer(json_integer_value(json_object_get(more, gk)) +
                                             (json_int_t)ev[i].more));
        _cleanup_free_ char *sk = xasprintf("%s\x1f%s", gk, ev[i].about.name ?: "");
        if (!json_object_get(seen, sk)) {
            json_object_set_new(seen, sk, json_null());
            json_array_append_new(names, json_string(ev[i].about.name ?: ""));
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].group) {
            _cleanup_free_ char *gk = group_key(&ev[i]);
            json_t *names = json_object_get(groups, gk);
            json_t *p = json_object_get(r->posted, gk);
            size_t many = json_array_size(names);
            if (many > 0) /* its first entry left stands for those only counted */
                many += (size_t)json_integer_value(json_object_get(more, gk));
            /* only a group with more than the queue keeps counts any */
            assert(many <= OP_EVENT_QUEUE_KEEP || many >= r->o.aggregate_min);
            if (many >= r->o.aggregate_min || (p && many > 0)) {
                /* one Event for the whole group, where its first member stood */
                json_int_t total =
                    (p ? json_integer_value(json_object_get(p, "count")) : 0) + (json_int_t)many;
                _cleanup_free_ char *msg = group_message(&ev[i], total, names, r->o.sample);
                write_event(r, &out, gk, &ev[i], &ev[i].group_ref, ev[i].group_ns, msg,
                            (json_int_t)many, true, now_ms);
                json_array_clear(names); /* its other members are in it */
                continue;
            }
            if (many == 0)
                continue; /* already in its group's Event */
        }
        _cleanup_free_ char *sk = single_key(&ev[i]);
        write_event(r, &out, sk, &ev[i], &ev[i].about, ev[i].ns, ev[i].message, 1, false, now_ms);
    }
    /* every Event in was written, counted up, or dropped */
    assert(out.n <= n);
    *ret = out;
}

void op_recorder_result(struct op_recorder *r, const struct op_event_write *w, bool ok)
{
    if (ok || !w->key)
        return;
    /* not stored (refused, or the Event to count up is gone): a repeat posts a new one */
    json_t *p = json_object_get(r->posted, w->key);
    if (p && streq_ptr(kobj_str(p, "name"), w->name))
        json_object_del(r->posted, w->key);
}

/* ---- the queue ------------------------------------------------------------------------------ */

static void put(json_t *o, const char *k, const char *v)
{
    if (v)
        json_object_set_new(o, k, json_string(v) ?: json_string("(not UTF-8)"));
}

static void put_ref(json_t *o, const char *prefix, const struct op_event_ref *r)
{
    static const char *const f[] = {"api", "kind", "ns", "name", "uid"};
    const char *v[] = {r->api_version, r->kind, r->ns, r->name, r->uid};
    for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
        char k[32];
        snprintf(k, sizeof(k), "%s%s", prefix, f[i]);
        put(o, k, v[i]);
    }
}

static void get_ref(const json_t *o, const char *prefix, struct op_event_ref *r)
{
    char k[32];
#define GET(field, name)                          \
    snprintf(k, sizeof(k), "%s%s", prefix, name); \
    r->field = json_string_value(json_object_get(o, k))
    GET(api_version, "api");
    GET(kind, "kind");
    GET(ns, "ns");
    GET(name, "name");
    GET(uid, "uid");
#undef GET
}

json_t *op_event_queue_new(void)
{
    /* "list": the entries in order; "groups": group key -> {"names": {name: null}, "first":
     * its first entry's index, "more": names past OP_EVENT_QUEUE_KEEP} */
    return json_pack("{s:[],s:{}}", "list", "groups");
}

void op_event_queue_add(json_t *queue, const struct op_event_in *ev)
{
    json_t *list = json_object_get(queue, "list");
    json_t *groups = json_object_get(queue, "groups");
    assert(json_is_array(list) && json_is_object(groups));
    if (ev->group) {
        _cleanup_free_ char *gk = group_key(ev);
        json_t *g = json_object_get(groups, gk);
        if (!g) {
            g = json_pack("{s:{},s:I,s:I}", "names", "first", (json_int_t)json_array_size(list),
                          "more", (json_int_t)0);
            json_object_set_new(groups, gk, g);
        }
        json_t *names = json_object_get(g, "names");
        const char *name = ev->about.name ?: "";
        if (json_object_size(names) >= OP_EVENT_QUEUE_KEEP) {
            /* past the kept entries: a new object is counted, a repeat is in the count */
            if (!json_object_get(names, name)) {
                json_object_set_new(names, name, json_null());
                json_object_set_new(
                    g, "more", json_integer(json_integer_value(json_object_get(g, "more")) + 1));
            }
            return;
        }
        json_object_set_new(names, name, json_null());
    }
    json_t *o = json_object();
    put_ref(o, "a.", &ev->about);
    put(o, "ns", ev->ns);
    put(o, "type", ev->type);
    put(o, "reason", ev->reason);
    put(o, "message", ev->message);
    if (ev->group) {
        put(o, "group", ev->group);
        put_ref(o, "g.", &ev->group_ref);
        put(o, "gns", ev->group_ns);
    }
    json_array_append_new(list, o);
}

struct op_event_in *op_event_queue_view(const json_t *queue, size_t *ret_n)
{
    const json_t *list = json_object_get(queue, "list");
    size_t n = json_array_size(list);
    struct op_event_in *v = xcalloc(n ? n : 1, sizeof(*v));
    size_t i;
    json_t *o;
    json_array_foreach ((json_t *)list, i, o) {
        get_ref(o, "a.", &v[i].about);
        v[i].ns = kobj_str(o, "ns");
        v[i].type = kobj_str(o, "type");
        v[i].reason = kobj_str(o, "reason");
        v[i].message = kobj_str(o, "message");
        v[i].group = kobj_str(o, "group");
        if (v[i].group) {
            get_ref(o, "g.", &v[i].group_ref);
            v[i].group_ns = kobj_str(o, "gns");
        }
    }
    const char *k;
    json_t *g;
    json_object_foreach (json_object_get(queue, "groups"), k, g) {
        size_t first = (size_t)json_integer_value(json_object_get(g, "first"));
        assert(first < n);
        v[first].more = (size_t)json_integer_value(json_object_get(g, "more"));
    }
    *ret_n = n;
    return v;
}
