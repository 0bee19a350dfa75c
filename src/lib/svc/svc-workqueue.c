/* SPDX-License-Identifier: Apache-2.0 */
/* svc: the controllers' work queue (dedup, per-key backoff, timed requeue, stop). */
#include <string.h>

#include "svc-internal.h"

#define WQ_BASE_DEFAULT_MS 5
#define WQ_MAX_DEFAULT_MS  (1000u * 1000u)
#define WQ_KEYS_DEFAULT    65536

/* One known key. A key is in at most one of: ready (FIFO by seq), waiting (due at `due`), or
 * neither; `processing` is orthogonal (a worker holds it; `dirty` re-queues it on done). */
struct wq_item {
    char *key;
    bool ready;
    bool waiting;
    bool processing;
    bool dirty;
    uint64_t seq; /* FIFO order of ready keys */
    uint64_t due; /* waiting: when it turns ready */
    unsigned failures;
};

struct svc_workqueue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct stop_token *stop;
    struct svc_workqueue_config cfg;
    struct wq_item *items;
    size_t n, cap;
    uint64_t next_seq;
};

uint64_t svc_backoff_ms(uint64_t base_ms, uint64_t max_ms, unsigned failures)
{
    uint64_t d = base_ms ? base_ms : 1;
    for (unsigned i = 0; i < failures && d < max_ms; i++)
        d = d > max_ms / 2 ? max_ms : d * 2;
    return d < max_ms ? d : max_ms;
}

static uint64_t wq_now(struct svc_workqueue *q)
{
    return q->cfg.now_ms ? q->cfg.now_ms(q->cfg.clock_ud) : now_ms_mono();
}

static void wq_wake(void *ud)
{
    struct svc_workqueue *q = ud;
    pthread_mutex_lock(&q->lock);
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

int svc_workqueue_new(const struct svc_workqueue_config *cfg, struct stop_token *stop,
                      struct svc_workqueue **ret, struct err *e)
{
    struct svc_workqueue *q = xcalloc(1, sizeof(*q));
    if (cfg)
        q->cfg = *cfg;
    if (!q->cfg.base_delay_ms)
        q->cfg.base_delay_ms = WQ_BASE_DEFAULT_MS;
    if (!q->cfg.max_delay_ms)
        q->cfg.max_delay_ms = WQ_MAX_DEFAULT_MS;
    if (!q->cfg.max_keys)
        q->cfg.max_keys = WQ_KEYS_DEFAULT;
    pthread_mutex_init(&q->lock, NULL);
    int r = cond_init_monotonic(&q->cond);
    if (r < 0) {
        pthread_mutex_destroy(&q->lock);
        free(q);
        return err_errno(e, r, "work queue: condition variable");
    }
    q->stop = stop;
    if (stop && (r = stop_hook_add(stop, wq_wake, q)) < 0) {
        pthread_cond_destroy(&q->cond);
        pthread_mutex_destroy(&q->lock);
        free(q);
        return err_set(e, r, "work queue: too many stop hooks");
    }
    *ret = q;
    return 0;
}

void svc_workqueue_free(struct svc_workqueue *q)
{
    if (!q)
        return;
    if (q->stop)
        stop_hook_remove(q->stop, wq_wake, q);
    for (size_t i = 0; i < q->n; i++)
        free(q->items[i].key);
    free(q->items);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

static struct wq_item *wq_find(struct svc_workqueue *q, const char *key)
{
    for (size_t i = 0; i < q->n; i++)
        if (strcmp(q->items[i].key, key) == 0)
            return &q->items[i];
    return NULL;
}

static struct wq_item *wq_get_or_add(struct svc_workqueue *q, const char *key)
{
    struct wq_item *it = wq_find(q, key);
    if (it)
        return it;
    if (q->n >= q->cfg.max_keys)
        return NULL;
    if (q->n == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 16;
        q->items = xrealloc(q->items, q->cap * sizeof(*q->items));
    }
    it = &q->items[q->n++];
    *it = (struct wq_item){.key = xstrdup(key)};
    return it;
}

/* A key nobody holds, none waits for and without failures is forgotten. */
static void wq_gc(struct svc_workqueue *q, struct wq_item *it)
{
    if (it->ready || it->waiting || it->processing || it->failures)
        return;
    free(it->key);
    *it = q->items[--q->n];
}

/* Under lock: queue now (or mark dirty when a worker holds it). */
static void wq_make_ready(struct svc_workqueue *q, struct wq_item *it)
{
    it->waiting = false;
    if (it->processing) {
        it->dirty = true;
        return;
    }
    if (!it->ready) {
        it->ready = true;
        it->seq = q->next_seq++;
    }
    pthread_cond_broadcast(&q->cond);
}

int svc_workqueue_add_after(struct svc_workqueue *q, const char *key, uint64_t delay_ms)
{
    pthread_mutex_lock(&q->lock);
    struct wq_item *it = wq_get_or_add(q, key);
    if (!it) {
        pthread_mutex_unlock(&q->lock);
        return -ENOBUFS;
    }
    if (delay_ms == 0) {
        wq_make_ready(q, it);
    } else if (!it->ready) {
        uint64_t due = wq_now(q) + delay_ms;
        if (!it->waiting || due < it->due) {
            it->due = due;
            it->waiting = true;
            pthread_cond_broadcast(&q->cond);
        }
    }
    pthread_mutex_unlock(&q->lock);
    return 0;
}

int svc_workqueue_add(struct svc_workqueue *q, const char *key)
{
    return svc_workqueue_add_after(q, key, 0);
}

int svc_workqueue_add_rate_limited(struct svc_workqueue *q, const char *key)
{
    pthread_mutex_lock(&q->lock);
    struct wq_item *it = wq_get_or_add(q, key);
    unsigned f = it ? it->failures++ : 0;
    pthread_mutex_unlock(&q->lock);
    if (!it)
        return -ENOBUFS;
    return svc_workqueue_add_after(q, key,
                                   svc_backoff_ms(q->cfg.base_delay_ms, q->cfg.max_delay_ms, f));
}

void svc_workqueue_forget(struct svc_workqueue *q, const char *key)
{
    pthread_mutex_lock(&q->lock);
    struct wq_item *it = wq_find(q, key);
    if (it) {
        it->failures = 0;
        wq_gc(q, it);
    }
    pthread_mutex_unlock(&q->lock);
}

unsigned svc_workqueue_failures(struct svc_workqueue *q, const char *key)
{
    pthread_mutex_lock(&q->lock);
    struct wq_item *it = wq_find(q, key);
    unsigned f = it ? it->failures : 0;
    pthread_mutex_unlock(&q->lock);
    return f;
}

/* Under lock: promotes due keys, takes the oldest ready one. */
static int wq_take(struct svc_workqueue *q, char **ret_key, uint64_t *ret_next_ms)
{
    uint64_t now = wq_now(q), next = UINT64_MAX;
    struct wq_item *best = NULL;
    for (size_t i = 0; i < q->n; i++) {
        struct wq_item *it = &q->items[i];
        if (it->waiting && it->due <= now)
            wq_make_ready(q, it);
        if (it->waiting && it->due - now < next)
            next = it->due - now;
        if (it->ready && (!best || it->seq < best->seq))
            best = it;
    }
    if (!best) {
        if (ret_next_ms)
            *ret_next_ms = next;
        return -EAGAIN;
    }
    best->ready = false;
    best->processing = true;
    best->dirty = false;
    *ret_key = xstrdup(best->key);
    return 0;
}

int svc_workqueue_try_get(struct svc_workqueue *q, char **ret_key, uint64_t *ret_next_ms)
{
    pthread_mutex_lock(&q->lock);
    int r = wq_take(q, ret_key, ret_next_ms);
    pthread_mutex_unlock(&q->lock);
    return r;
}

int svc_workqueue_get(struct svc_workqueue *q, uint64_t timeout_ms, char **ret_key)
{
    uint64_t deadline = deadline_after(timeout_ms);
    pthread_mutex_lock(&q->lock);
    for (;;) {
        if (q->stop && stop_requested(q->stop)) {
            pthread_mutex_unlock(&q->lock);
            return -ECANCELED;
        }
        uint64_t next;
        if (wq_take(q, ret_key, &next) == 0) {
            pthread_mutex_unlock(&q->lock);
            return 0;
        }
        if (deadline_left_ms(deadline) == 0) {
            pthread_mutex_unlock(&q->lock);
            return -ETIMEDOUT;
        }
        uint64_t until = deadline_after(next);
        cond_wait_deadline(&q->cond, &q->lock, until < deadline ? until : deadline);
    }
}

void svc_workqueue_done(struct svc_workqueue *q, const char *key)
{
    pthread_mutex_lock(&q->lock);
    struct wq_item *it = wq_find(q, key);
    if (it) {
        it->processing = false;
        if (it->dirty) {
            it->dirty = false;
            wq_make_ready(q, it);
        }
        wq_gc(q, it);
    }
    pthread_mutex_unlock(&q->lock);
}

size_t svc_workqueue_len(struct svc_workqueue *q)
{
    pthread_mutex_lock(&q->lock);
    size_t n = 0;
    for (size_t i = 0; i < q->n; i++)
        if (q->items[i].ready || q->items[i].waiting)
            n++;
    pthread_mutex_unlock(&q->lock);
    return n;
}
