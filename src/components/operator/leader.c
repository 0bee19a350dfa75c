/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's leader election (op-controller.h): a Lease; the replica that holds it writes,
 * and one that loses it stops writing at once (op_check_leader). */
#include <assert.h>
#include <pthread.h>

#include "op-controller.h"

#define COMPONENT "operator"

static void on_started(void *u)
{
    struct controller *c = u;
    log_info(COMPONENT, "became leader", NULL);
    pthread_mutex_lock(&c->lock);
    c->leader = true;
    pthread_mutex_unlock(&c->lock);
    op_mark_dirty(c);
}

static void on_stopped(void *u)
{
    struct controller *c = u;
    log_warn(COMPONENT, "lost leadership; stopping writes", NULL);
    pthread_mutex_lock(&c->lock);
    c->leader = false;
    pthread_mutex_unlock(&c->lock);
}

static void on_new_leader(const char *identity, void *u)
{
    (void)u;
    log_info(COMPONENT, "leader", "identity=%s", identity ? identity : "");
}

/* ---- main --------------------------------------------------------------------------------- */

int op_leader_start(struct controller *c, const struct kube_leader_opts *lo, struct err *e)
{
    if (!lo) {
        c->leader = true;
        return 0;
    }
    struct kube_leader_opts o = *lo;
    o.on_started = on_started;
    o.on_stopped = on_stopped;
    o.on_new_leader = on_new_leader;
    o.userdata = c;
    assert(c->lease_kc); /* the Lease's own client, made by the caller */
    return kube_leader_new(c->lease_kc, &o, &c->leader_elector, e);
}
