/* SPDX-License-Identifier: Apache-2.0 */
/* Lease-based leader election (coordination.k8s.io/v1 Lease), as client-go's leaderelection
 * does it: expiry is judged on the local monotonic clock from when the record was last seen to
 * change, so clock skew between candidates does not matter. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "kube-internal.h"

struct kube_leader {
    struct kube_client *c;
    char *ns, *name, *identity;
    uint64_t lease_ms, renew_ms, retry_ms, release_ms;
    void (*on_started)(void *);
    void (*on_stopped)(void *);
    void (*on_new_leader)(const char *, void *);
    void *userdata;

    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    volatile int stop;
    bool leader;
    char *holder;
    /* the record as last observed */
    char *obs_record;
    uint64_t obs_at_ms;
    json_t *written; /* the Lease as our last successful write left it (leader thread only) */
    uint64_t last_renew_ms;
};

static bool nap(struct kube_leader *l, uint64_t ms)
{
    return cond_nap(&l->lock, &l->cond, &l->stop, ms);
}

static void observe(struct kube_leader *l, json_t *lease)
{
    json_t *spec = json_object_get(lease, "spec");
    const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
    _cleanup_free_ char *rec = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    if (!streq_ptr(rec, l->obs_record)) {
        free(l->obs_record);
        l->obs_record = steal_ptr(&rec);
        l->obs_at_ms = now_ms_mono();
    }
    pthread_mutex_lock(&l->lock);
    bool changed = !streq_ptr(holder && holder[0] ? holder : NULL, l->holder);
    free(l->holder);
    l->holder = holder && holder[0] ? xstrdup(holder) : NULL;
    pthread_mutex_unlock(&l->lock);
    if (changed && holder && holder[0] && l->on_new_leader)
        l->on_new_leader(holder, l->userdata);
}

static void fill_spec(struct kube_leader *l, json_t *lease, bool acquire)
{
    char now[48];
    time_rfc3339_us(now_ms_real() * 1000, now, sizeof(now));
    json_t *spec = json_object_get(lease, "spec");
    if (!json_is_object(spec)) {
        spec = json_object();
        json_object_set_new(lease, "spec", spec);
    }
    if (acquire) {
        const char *prev = json_string_value(json_object_get(spec, "holderIdentity"));
        json_int_t tr = json_integer_value(json_object_get(spec, "leaseTransitions"));
        if (prev && prev[0] && strcmp(prev, l->identity) != 0)
            tr++;
        json_object_set_new(spec, "leaseTransitions", json_integer(tr));
        json_object_set_new(spec, "acquireTime", json_string(now));
    }
    json_object_set_new(spec, "holderIdentity", json_string(l->identity));
    json_object_set_new(spec, "leaseDurationSeconds",
                        json_integer((json_int_t)((l->lease_ms + 999) / 1000)));
    json_object_set_new(spec, "renewTime", json_string(now));
}

/* The outcome of writing our lease (r, the server's copy in out): true when we hold it. */
static bool lease_written(struct kube_leader *l, int r, json_t *out, const char *failed,
                          const struct err *e)
{
    if (r < 0) {
        log_debug("kube", failed, "lease=%s/%s error=\"%s\"", l->ns, l->name, err_msg(e));
        return false;
    }
    observe(l, out);
    json_decref(l->written);
    l->written = out;
    return true;
}

/* One attempt: true when we hold the lease afterwards. */
static bool try_acquire_or_renew(struct kube_leader *l)
{
    struct err e = {0};
    _cleanup_json_ json_t *lease = NULL;
    int r = kube_get(l->c, &KUBE_LEASES, l->ns, l->name, &lease, &e);
    if (r == -ENOENT) {
        lease = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "coordination.k8s.io/v1", "kind",
                          "Lease", "metadata", "name", l->name, "namespace", l->ns);
        fill_spec(l, lease, true);
        json_t *out = NULL;
        r = kube_create(l->c, &KUBE_LEASES, l->ns, lease, &out, &e);
        return lease_written(l, r, out, "lease create failed", &e);
    }
    if (r < 0) {
        log_debug("kube", "lease get failed", "lease=%s/%s error=\"%s\"", l->ns, l->name,
                  err_msg(&e));
        return false;
    }
    observe(l, lease);
    /* The holder's own lease duration decides when its lease runs out (as client-go does):
     * another candidate's shorter setting must not cut a longer lease short. */
    uint64_t dur_ms = l->lease_ms;
    json_t *lds = kobj_path(lease, "spec.leaseDurationSeconds");
    if (json_is_integer(lds) && json_integer_value(lds) > 0 && json_integer_value(lds) < 24 * 3600)
        dur_ms = (uint64_t)json_integer_value(lds) * 1000;
    bool expired = now_ms_mono() - l->obs_at_ms >= dur_ms;
    enum kube_lease_action a = kube_lease_decide(lease, l->identity, expired);
    if (a == KUBE_LEASE_WAIT)
        return false;
    fill_spec(l, lease, a == KUBE_LEASE_ACQUIRE);
    json_t *out = NULL;
    r = kube_update(l->c, &KUBE_LEASES, l->ns, lease, &out, &e);
    return lease_written(l, r, out, "lease update failed", &e);
}

static void set_leader(struct kube_leader *l, bool v)
{
    pthread_mutex_lock(&l->lock);
    bool was = l->leader;
    l->leader = v;
    pthread_mutex_unlock(&l->lock);
    if (v && !was) {
        log_info("kube", "became leader", "lease=%s/%s identity=%s", l->ns, l->name, l->identity);
        if (l->on_started)
            l->on_started(l->userdata);
    } else if (!v && was) {
        log_info("kube", "stopped leading", "lease=%s/%s identity=%s", l->ns, l->name, l->identity);
        if (l->on_stopped)
            l->on_stopped(l->userdata);
    }
}

/* Made after the stop: the client's stop token does not cancel it, release_ms bounds it. One
 * write of the Lease as our last renewal left it; a conflict (someone wrote since) reads it again
 * and releases only when it is still ours. */
static void release(struct kube_leader *l)
{
    struct err e = {0};
    _cleanup_json_ json_t *lease = l->written ? json_deep_copy(l->written) : NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!lease && kube_get(l->c, &KUBE_LEASES, l->ns, l->name, &lease, &e) < 0)
            break;
        if (kube_lease_decide(lease, l->identity, false) != KUBE_LEASE_RENEW)
            return;
        char now[48];
        time_rfc3339_us(now_ms_real() * 1000, now, sizeof(now));
        json_t *spec = json_object_get(lease, "spec");
        json_object_set_new(spec, "holderIdentity", json_string(""));
        json_object_set_new(spec, "leaseDurationSeconds", json_integer(1));
        json_object_set_new(spec, "renewTime", json_string(now));
        int r = kube_update(l->c, &KUBE_LEASES, l->ns, lease, NULL, &e);
        if (r == 0)
            return;
        json_decref(steal_ptr(&lease));
        if (r != KUBE_ECONFLICT)
            break;
    }
    log_warn("kube", "lease release failed", "lease=%s/%s error=\"%s\"", l->ns, l->name,
             err_msg(&e));
}

/* What is left of the renew deadline, counted from the start of the last renewal that held (as
 * client-go's renew loop is bounded by it): 0 once it passed. */
static uint64_t renew_left_ms(const struct kube_leader *l, uint64_t now)
{
    uint64_t since = now - l->last_renew_ms;
    return since < l->renew_ms ? l->renew_ms - since : 0;
}

static bool is_leading(struct kube_leader *l)
{
    pthread_mutex_lock(&l->lock);
    bool leading = l->leader;
    pthread_mutex_unlock(&l->lock);
    return leading;
}

static void *leader_main(void *ud)
{
    struct kube_leader *l = ud;
    while (!l->stop) {
        /* A leader stops within the renew deadline of its last renewal, which is shorter than the
         * lease others wait out: its attempts (their retries included) and the naps between
         * them never run past it, so it cannot still be writing when another replica may take
         * the Lease over. A candidate's attempt ends with the stop or after a renew deadline. */
        uint64_t t0 = now_ms_mono();
        bool leading = is_leading(l);
        uint64_t budget = leading ? renew_left_ms(l, t0) : l->renew_ms;
        if (leading && budget == 0) {
            set_leader(l, false); /* could not renew in time: someone may take over */
            leading = false;
            budget = l->renew_ms;
        }
        kube_call_begin(&(struct kube_call){.deadline = deadline_after(budget), .stop = &l->stop});
        bool held = try_acquire_or_renew(l);
        kube_call_end();
        uint64_t now = now_ms_mono();
        if (held) {
            l->last_renew_ms = t0; /* the renewTime written is no older than the attempt */
            set_leader(l, true);
        } else if (leading && renew_left_ms(l, now) == 0) {
            set_leader(l, false);
        }
        uint64_t wait = l->retry_ms;
        if (!held)
            wait = l->retry_ms + kube_random() % (l->retry_ms / 5 + 1); /* jitter */
        if (is_leading(l) && !held) {
            uint64_t left = renew_left_ms(l, now);
            if (wait > left)
                wait = left; /* wake at the deadline to step down on time */
        }
        if (nap(l, wait))
            break;
    }
    if (is_leading(l)) {
        kube_call_begin(
            &(struct kube_call){.deadline = deadline_after(l->release_ms), .detached = true});
        release(l);
        kube_call_end();
        set_leader(l, false);
    }
    return NULL;
}

int kube_leader_new(struct kube_client *c, const struct kube_leader_opts *o,
                    struct kube_leader **ret, struct err *e)
{
    if (!o || !o->ns || !o->ns[0] || !o->name || !o->name[0] || !o->identity || !o->identity[0])
        return err_set(e, -EINVAL,
                       "leader election: namespace, lease name and identity are "
                       "required");
    struct kube_leader *l = xcalloc(1, sizeof(*l));
    l->c = c;
    l->ns = xstrdup(o->ns);
    l->name = xstrdup(o->name);
    l->identity = xstrdup(o->identity);
    l->lease_ms = o->lease_ms ? o->lease_ms : 15000;
    l->renew_ms = o->renew_ms ? o->renew_ms : 10000;
    l->retry_ms = o->retry_ms ? o->retry_ms : 2000;
    l->release_ms = o->release_ms ? o->release_ms : 1000;
    if (l->renew_ms >= l->lease_ms || l->retry_ms >= l->renew_ms) {
        kube_leader_free(l);
        return err_set(e, -EINVAL,
                       "leader election: need retry < renew deadline < lease "
                       "duration");
    }
    l->on_started = o->on_started;
    l->on_stopped = o->on_stopped;
    l->on_new_leader = o->on_new_leader;
    l->userdata = o->userdata;
    pthread_mutex_init(&l->lock, NULL);
    cond_init_monotonic(&l->cond);
    int r = pthread_create(&l->thread, NULL, leader_main, l);
    if (r != 0) {
        kube_leader_free(l);
        return err_errno(e, -r, "leader election: starting its thread");
    }
    l->started = true;
    *ret = l;
    return 0;
}

bool kube_leader_is_leader(struct kube_leader *l)
{
    pthread_mutex_lock(&l->lock);
    bool v = l->leader;
    pthread_mutex_unlock(&l->lock);
    return v;
}

char *kube_leader_holder(struct kube_leader *l)
{
    pthread_mutex_lock(&l->lock);
    char *h = l->holder ? xstrdup(l->holder) : NULL;
    pthread_mutex_unlock(&l->lock);
    return h;
}

void kube_leader_free(struct kube_leader *l)
{
    if (!l)
        return;
    if (l->started) {
        pthread_mutex_lock(&l->lock);
        l->stop = 1;
        pthread_cond_broadcast(&l->cond);
        pthread_mutex_unlock(&l->lock);
        pthread_join(l->thread, NULL);
        pthread_cond_destroy(&l->cond);
        pthread_mutex_destroy(&l->lock);
    }
    free(l->ns);
    free(l->name);
    free(l->identity);
    free(l->holder);
    free(l->obs_record);
    json_decref(l->written);
    free(l);
}
