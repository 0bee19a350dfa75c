/* SPDX-License-Identifier: Apache-2.0 */
/* The object store: keys, resourceVersions, uids, the event log and its compaction. */
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

json_t *jpath(json_t *v, const char *dotted)
{
    char part[256];
    const char *p = dotted;
    while (v && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof(part))
            return NULL;
        memcpy(part, p, n);
        part[n] = '\0';
        v = json_object_get(v, part);
        p += n + (dot ? 1 : 0);
    }
    return v;
}

const char *jstr(json_t *v, const char *dotted)
{
    return json_string_value(jpath(v, dotted));
}

json_t *jensure(json_t *v, const char *key)
{
    json_t *c = json_object_get(v, key);
    if (!json_is_object(c)) {
        c = json_object();
        json_object_set_new(v, key, c);
    }
    return c;
}

const char *ks_obj_ns(json_t *obj)
{
    const char *s = jstr(obj, "metadata.namespace");
    return s ? s : "";
}

const char *ks_obj_name(json_t *obj)
{
    const char *s = jstr(obj, "metadata.name");
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
    json_object_set_new(jensure(obj, "metadata"), "resourceVersion", json_string(b));
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
        ks->ev_head++;
    }
    if (ks->ev_head > 1024 && ks->ev_head * 2 > ks->ev_len) {
        memmove(ks->ev, ks->ev + ks->ev_head, (ks->ev_len - ks->ev_head) * sizeof(*ks->ev));
        ks->ev_len -= ks->ev_head;
        ks->ev_head = 0;
    }
}

void ksim_compact(struct ksim *ks);
void ksim_compact(struct ksim *ks)
{
    ev_compact(ks);
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

void ks_commit(struct ksim *ks, struct ks_type *t, json_t *obj, enum ks_ev kind, json_t *old)
{
    ks->rv++;
    ks_set_rv(obj, ks->rv);
    _cleanup_free_ char *key = ks_key(t->namespaced ? ks_obj_ns(obj) : "", ks_obj_name(obj));
    json_t *keep_old = old ? json_incref(old) : NULL; /* old may be the map's reference */
    json_object_set_new(t->objs, key, obj);
    const char *uid = jstr(obj, "metadata.uid");
    if (uid && kind == KS_ADDED) {
        json_t *ref = json_pack("[Is]", (json_int_t)(intptr_t)t, key);
        json_object_set_new(ks->uids, uid, ref);
    }
    if (jpath(obj, "metadata.ownerReferences") || jpath(obj, "metadata.deletionTimestamp"))
        ks->gc_dirty = true;
    ev_append(ks, t, kind, obj, keep_old);
    json_decref(keep_old);
}

void ks_remove(struct ksim *ks, struct ks_type *t, json_t *obj)
{
    ks->rv++;
    json_t *last = json_deep_copy(obj);
    ks_set_rv(last, ks->rv);
    _cleanup_free_ char *key = ks_key(t->namespaced ? ks_obj_ns(obj) : "", ks_obj_name(obj));
    const char *uid = jstr(last, "metadata.uid");
    if (uid)
        json_object_del(ks->uids, uid);
    json_object_del(t->objs, key); /* obj may be gone now */
    ks->gc_dirty = true;
    ev_append(ks, t, KS_DELETED, last, NULL);
    json_decref(last);
}

uint64_t ksim_resource_version(struct ksim *ks)
{
    pthread_mutex_lock(&ks->lock);
    uint64_t rv = ks->rv;
    pthread_mutex_unlock(&ks->lock);
    return rv;
}

void ksim_opts_default(struct ksim_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->watch_retention_ms = 5 * 60 * 1000;
    o->pod_ready_delay_ms = 1000;
    o->bookmark_interval_ms = 60 * 1000;
    o->max_body = 3u << 20;
    o->max_events = 1u << 20;
}

struct ksim *ksim_new(const struct ksim_opts *o)
{
    struct ksim *ks = xcalloc(1, sizeof(*ks));
    if (o)
        ks->opts = *o;
    else
        ksim_opts_default(&ks->opts);
    if (!ks->opts.max_events)
        ks->opts.max_events = 1u << 20;
    if (!ks->opts.max_body)
        ks->opts.max_body = 3u << 20;
    if (!ks->opts.bookmark_interval_ms)
        ks->opts.bookmark_interval_ms = 60 * 1000;
    pthread_mutex_init(&ks->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ks->changed, &ca);
    pthread_condattr_destroy(&ca);
    ks->rv = ks->opts.initial_rv;
    ks->compacted_rv = ks->opts.initial_rv;
    ks->uids = json_object();
    ks->pdb_disrupted = json_object();
    ks->pod_born = json_object();
    ks->pod_dying = json_object();
    ks_types_init(ks);
    static const char *const nss[] = {"default", "kube-system", "kube-public", "kube-node-lease"};
    for (size_t i = 0; i < ARRAY_SIZE(nss); i++) {
        json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                               "metadata", "name", nss[i]);
        struct err e = {0};
        ksim_create_object(ks, ns, &e);
        json_decref(ns);
    }
    return ks;
}

void ksim_free(struct ksim *ks)
{
    if (!ks)
        return;
    for (size_t i = ks->ev_head; i < ks->ev_len; i++) {
        json_decref(ks->ev[i].obj);
        json_decref(ks->ev[i].old);
    }
    free(ks->ev);
    ks_types_free(ks);
    json_decref(ks->uids);
    json_decref(ks->pdb_disrupted);
    json_decref(ks->pod_born);
    json_decref(ks->pod_dying);
    pthread_mutex_destroy(&ks->lock);
    pthread_cond_destroy(&ks->changed);
    free(ks);
}

void ksim_shutdown(struct ksim *ks)
{
    pthread_mutex_lock(&ks->lock);
    ks->shutdown = true;
    pthread_cond_broadcast(&ks->changed);
    pthread_mutex_unlock(&ks->lock);
}

static void cond_wait_ms(struct ksim *ks, uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&ks->changed, &ks->lock, &ts);
}

void ks_cond_wait(struct ksim *ks, uint64_t ms)
{
    cond_wait_ms(ks, ms);
}

void ksim_wait_change(struct ksim *ks, uint64_t wait_ms)
{
    pthread_mutex_lock(&ks->lock);
    if (!ks->dirty && !ks->shutdown)
        cond_wait_ms(ks, wait_ms);
    pthread_mutex_unlock(&ks->lock);
}

bool ksim_reconcile(struct ksim *ks)
{
    pthread_mutex_lock(&ks->lock);
    ev_compact(ks);
    bool changed = ks_controllers(ks);
    pthread_mutex_unlock(&ks->lock);
    return changed;
}
