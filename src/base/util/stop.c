/* SPDX-License-Identifier: Apache-2.0 */
/* Monotonic deadlines, the interruptible timed wait, and the stop token. */
#include <limits.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>

#include "util.h"

uint64_t deadline_after(uint64_t ms)
{
    if (ms == DEADLINE_NEVER)
        return DEADLINE_NEVER;
    uint64_t now = now_ms_mono();
    return ms >= DEADLINE_NEVER - now ? DEADLINE_NEVER - 1 : now + ms;
}

uint64_t deadline_left_ms(uint64_t deadline)
{
    if (deadline == DEADLINE_NEVER)
        return UINT64_MAX;
    uint64_t now = now_ms_mono();
    return deadline > now ? deadline - now : 0;
}

int deadline_poll_ms(uint64_t deadline)
{
    if (deadline == DEADLINE_NEVER)
        return -1;
    uint64_t left = deadline_left_ms(deadline);
    return left > INT_MAX ? INT_MAX : (int)left;
}

struct timespec deadline_timespec(uint64_t deadline)
{
    /* A year ahead stands in for "never": far enough, and no time_t overflow. */
    if (deadline == DEADLINE_NEVER)
        deadline = deadline_after(365ull * 24 * 3600 * 1000);
    return (struct timespec){.tv_sec = (time_t)(deadline / 1000),
                             .tv_nsec = (long)(deadline % 1000) * 1000000L};
}

int cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t ca;
    int r = pthread_condattr_init(&ca);
    if (r != 0)
        return -r;
    r = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (r == 0)
        r = pthread_cond_init(cond, &ca);
    pthread_condattr_destroy(&ca);
    return -r;
}

int cond_wait_deadline(pthread_cond_t *cond, pthread_mutex_t *lock, uint64_t deadline)
{
    if (deadline != DEADLINE_NEVER && deadline_left_ms(deadline) == 0)
        return -ETIMEDOUT;
    struct timespec ts = deadline_timespec(deadline);
    int r = pthread_cond_timedwait(cond, lock, &ts);
    return r == ETIMEDOUT ? -ETIMEDOUT : 0;
}

bool cond_nap(pthread_mutex_t *lock, pthread_cond_t *cond, const volatile int *flag, uint64_t ms)
{
    uint64_t deadline = deadline_after(ms);
    pthread_mutex_lock(lock);
    while (!*flag)
        if (cond_wait_deadline(cond, lock, deadline) == -ETIMEDOUT)
            break;
    bool stopped = *flag != 0;
    pthread_mutex_unlock(lock);
    return stopped;
}

/* ---- stop token --------------------------------------------------------------------------- */

struct stop_token {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    atomic_bool stopped;
    volatile int flag; /* mirrors stopped, under lock, for cond_nap */
    int efd;
    struct {
        void (*fn)(void *ud);
        void *ud;
    } hooks[STOP_MAX_HOOKS];
    pthread_mutex_t hook_lock; /* taken alone, never with lock: hooks take their own locks */
};

int stop_token_new(struct stop_token **ret, struct err *e)
{
    struct stop_token *s = xcalloc(1, sizeof(*s));
    s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->efd < 0) {
        int r = -errno;
        free(s);
        return err_errno(e, r, "stop token: eventfd");
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->hook_lock, NULL);
    int r = cond_init_monotonic(&s->cond);
    if (r < 0) {
        close(s->efd);
        pthread_mutex_destroy(&s->lock);
        pthread_mutex_destroy(&s->hook_lock);
        free(s);
        return err_errno(e, r, "stop token: condition variable");
    }
    atomic_init(&s->stopped, false);
    *ret = s;
    return 0;
}

void stop_token_free(struct stop_token *s)
{
    if (!s)
        return;
    close(s->efd);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->hook_lock);
    free(s);
}

int stop_hook_add(struct stop_token *s, void (*fn)(void *ud), void *ud)
{
    pthread_mutex_lock(&s->hook_lock);
    bool stopped = stop_requested(s);
    int r = -ENOBUFS;
    for (size_t i = 0; i < STOP_MAX_HOOKS; i++)
        if (!s->hooks[i].fn) {
            s->hooks[i].fn = fn;
            s->hooks[i].ud = ud;
            r = 0;
            break;
        }
    pthread_mutex_unlock(&s->hook_lock);
    if (r == 0 && stopped)
        fn(ud);
    return r;
}

void stop_hook_remove(struct stop_token *s, void (*fn)(void *ud), void *ud)
{
    pthread_mutex_lock(&s->hook_lock);
    for (size_t i = 0; i < STOP_MAX_HOOKS; i++)
        if (s->hooks[i].fn == fn && s->hooks[i].ud == ud)
            s->hooks[i].fn = NULL;
    pthread_mutex_unlock(&s->hook_lock);
}

void stop_request(struct stop_token *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    bool first = !s->flag;
    s->flag = 1;
    atomic_store(&s->stopped, true);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (first) {
        uint64_t one = 1;
        /* The counter only grows from 0 to 1: this write cannot block or fail meaningfully. */
        ssize_t n = write(s->efd, &one, sizeof(one));
        (void)n;
        /* hook_lock stays held while the hooks run, so stop_hook_remove waits for a running
         * hook before its owner frees ud. */
        pthread_mutex_lock(&s->hook_lock);
        for (size_t i = 0; i < STOP_MAX_HOOKS; i++)
            if (s->hooks[i].fn)
                s->hooks[i].fn(s->hooks[i].ud);
        pthread_mutex_unlock(&s->hook_lock);
    }
}

bool stop_requested(const struct stop_token *s)
{
    return s && atomic_load(&((struct stop_token *)s)->stopped);
}

bool stop_wait_until(struct stop_token *s, uint64_t deadline)
{
    pthread_mutex_lock(&s->lock);
    while (!s->flag)
        if (cond_wait_deadline(&s->cond, &s->lock, deadline) == -ETIMEDOUT)
            break;
    bool stopped = s->flag != 0;
    pthread_mutex_unlock(&s->lock);
    return stopped;
}

bool stop_wait(struct stop_token *s, uint64_t ms)
{
    return stop_wait_until(s, deadline_after(ms));
}

int stop_fd(const struct stop_token *s)
{
    return s ? s->efd : -1;
}

const volatile int *stop_flag(const struct stop_token *s)
{
    return &s->flag;
}
