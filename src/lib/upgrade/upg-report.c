/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What an upgrade pass reports (upgrade.h): each pool's phase and status, the ClusterPolicy's
 * DriverUpgrade condition rolled up from the pools, and the log that holds back repeated Events.
 * Pure: plain structs and the stored objects in, values out.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "upg-internal.h"

#define CONDITION_MSG_MAX 32768 /* the condition's message, all pools */
#define POOL_LINE_MAX     4096  /* one pool's line of it */
#define NODES_NAMED       5     /* nodes in progress or failed named per pool, then a count */
#define EVENT_LOG_MAX     10000

/* ---- notes ---------------------------------------------------------------------------------- */

void upg_notes_add(struct upg_notes *n, const char *node, const char *text)
{
    n->v = xrealloc(n->v, (n->n + 1) * sizeof(*n->v));
    n->v[n->n++] = (struct upg_node_note){xstrdup(node), xstrdup(text ? text : "")};
}

void upg_notes_done(struct upg_notes *n)
{
    for (size_t i = 0; i < n->n; i++) {
        free(n->v[i].node);
        free(n->v[i].text);
    }
    free(n->v);
    *n = (struct upg_notes){0};
}

static json_t *notes_json(const struct upg_notes *n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n->n; i++)
        json_object_set_new(o, n->v[i].node, json_string(n->v[i].text));
    return o;
}

/* ---- pools ---------------------------------------------------------------------------------- */

const char *upg_phase_name(enum upg_phase p)
{
    static const char *const names[] = {
        [UPG_PHASE_DONE] = "Done",       [UPG_PHASE_UPGRADING] = "Upgrading",
        [UPG_PHASE_FAILED] = "Failed",   [UPG_PHASE_HALTED] = "Halted",
        [UPG_PHASE_INVALID] = "Invalid",
    };
    return (unsigned)p < ARRAY_SIZE(names) ? names[p] : "Unknown";
}

enum upg_phase upg_report_phase(const struct upg_pool_report *r)
{
    if (r->error)
        return UPG_PHASE_INVALID;
    if (r->halted)
        return UPG_PHASE_HALTED;
    if (r->in_progress.n > 0 || r->pending > 0)
        return UPG_PHASE_UPGRADING;
    if (r->failed.n > 0)
        return UPG_PHASE_FAILED;
    return UPG_PHASE_DONE;
}

void upg_report_pool(struct upg_pool_report *r, const json_t *obj, const char *now)
{
    /* a pool's nodes are counted once each: those done, in flight, failed or pending are a part
     * of its total */
    assert(r->total >= 0 && r->upgraded >= 0 && r->pending >= 0);
    assert((size_t)r->upgraded + r->in_progress.n + r->failed.n + (size_t)r->pending <=
           (size_t)r->total);
    r->phase = upg_report_phase(r);
    if (!obj || !kobj_name(obj))
        return;
    json_t *st =
        json_pack("{s:i,s:i,s:o,s:o,s:o,s:i}", "total", r->total, "upgraded", r->upgraded,
                  "inProgress", notes_json(&r->in_progress), "failed", notes_json(&r->failed),
                  "waiting", notes_json(&r->waiting), "pending", r->pending);
    if (r->waiting_more)
        json_object_set_new(st, "waitingMore", json_integer(r->waiting_more));
    if (r->halted)
        json_object_set_new(st, "halted", json_string(r->halted));
    if (r->error)
        json_object_set_new(st, "error", json_string(r->error));
    if (r->target_revision)
        json_object_set_new(st, "targetRevision", json_string(r->target_revision));
    if (r->target_version)
        json_object_set_new(st, "targetVersion", json_string(r->target_version));
    if (r->next_window_s) {
        char t[40];
        time_rfc3339((uint64_t)r->next_window_s * 1000, t, sizeof(t));
        json_object_set_new(st, "nextWindow", json_string(t));
    }
    json_object_set_new(
        st, "conditions",
        json_pack("[o]", kobj_condition(kobj_path(obj, "status.conditions"), "RolloutHalted",
                                        r->halted != NULL, r->halted ? "CanaryFailed" : "NotHalted",
                                        r->halted ? r->halted : "", now, -1)));
    json_object_set_new(st, "progress", json_sprintf("%d/%d", r->upgraded, r->total));
    json_object_set_new(st, "phase", json_string(upg_phase_name(r->phase)));
    /* the GPU allocation's progress (upg-alloc.c) is written apart: kept as it is */
    json_t *ga = kobj_path(obj, "status.gpuAllocation");
    if (ga)
        json_object_set(st, "gpuAllocation", ga);
    r->write = !json_equal(json_object_get(obj, "status"), st);
    r->status = st;
}

/* ---- the ClusterPolicy's DriverUpgrade condition -------------------------------------------- */

/* The condition's reasons, the worst of the pools winning. */
enum severity { SEV_DONE, SEV_IN_PROGRESS, SEV_FAILED, SEV_HALTED, SEV_INVALID };

static const char *severity_reason(enum severity s)
{
    static const char *const r[] = {"UpgradeDone", "UpgradeInProgress", "UpgradeFailed",
                                    "RolloutHalted", "InvalidUpgradeInput"};
    return r[s];
}

static enum severity pool_severity(const struct upg_pool_report *r)
{
    switch (r->phase) {
    case UPG_PHASE_INVALID:
        return SEV_INVALID;
    case UPG_PHASE_HALTED:
        return SEV_HALTED;
    case UPG_PHASE_UPGRADING:
        return r->failed.n > 0 ? SEV_FAILED : SEV_IN_PROGRESS;
    case UPG_PHASE_FAILED:
        return SEV_FAILED;
    default:
        return SEV_DONE;
    }
}

/* "pool p: 3/8 upgraded, n1 drain-required, n2 failed: why, 4 waiting (n3: why), halted: ..." */
static void pool_line(struct sbuf *b, const struct upg_pool_report *r)
{
    struct sbuf l _cleanup_sbuf_;
    sbuf_init(&l, POOL_LINE_MAX);
    sbuf_addf(&l, "pool %s: %d/%d upgraded", r->name, r->upgraded, r->total);
    /* a few nodes by name, then a count: the message stays readable on a large pool */
    for (size_t i = 0; i < r->in_progress.n && i < NODES_NAMED; i++)
        sbuf_addf(&l, ", %s %s", r->in_progress.v[i].node, r->in_progress.v[i].text);
    if (r->in_progress.n > NODES_NAMED)
        sbuf_addf(&l, " (+%zu more in progress)", r->in_progress.n - NODES_NAMED);
    for (size_t i = 0; i < r->failed.n && i < NODES_NAMED; i++)
        sbuf_addf(&l, ", %s failed: %s", r->failed.v[i].node, r->failed.v[i].text);
    if (r->failed.n > NODES_NAMED)
        sbuf_addf(&l, " (+%zu more failed)", r->failed.n - NODES_NAMED);
    if (r->waiting.n)
        sbuf_addf(&l, ", %zu waiting (%s: %s)", r->waiting.n + (size_t)r->waiting_more,
                  r->waiting.v[0].node, r->waiting.v[0].text);
    if (r->halted)
        sbuf_addf(&l, ", halted: %s", r->halted);
    if (r->error)
        sbuf_addf(&l, ", invalid: %s", r->error);
    sbuf_addf(b, "%s%s", b->len ? "; " : "",
              sbuf_check(&l) == 0 && l.data ? l.data : "pool: (status too long)");
}

void upg_report_condition(struct upg_plan *p, bool auto_upgrade)
{
    struct upg_condition *c = &p->condition;
    free(c->message);
    if (p->frozen) {
        *c = (struct upg_condition){false, "InvalidUpgradeInput", xstrdup(p->error)};
        return;
    }
    if (!auto_upgrade) {
        *c = (struct upg_condition){true, "AutoUpgradeDisabled",
                                    xstrdup("driver.upgradePolicy.autoUpgrade is false")};
        return;
    }
    enum severity worst = SEV_DONE;
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, CONDITION_MSG_MAX);
    for (size_t i = 0; i < p->n_pools; i++) {
        const struct upg_pool_report *r = &p->pools[i];
        if (r->total == 0 && !r->error)
            continue;
        enum severity s = pool_severity(r);
        if (s > worst)
            worst = s;
        pool_line(&b, r);
    }
    const char *msg = b.len == 0            ? "no driver-managed node"
                      : sbuf_check(&b) == 0 ? b.data
                                            : "(too long)";
    *c = (struct upg_condition){worst == SEV_DONE, severity_reason(worst), xstrdup(msg)};
}

/* ---- the Events posted lately --------------------------------------------------------------- */

struct upg_event_log {
    json_t *posted; /* key -> the second it was posted */
};

/* What makes two Events the same: the object, the reason, the cause (and gate), the pool and the
 * revision of the rollout; never the message. */
static char *event_key(const struct upg_event *ev)
{
    return xasprintf("%d/%s|%s|%d|%d|%s|%s", (int)ev->object, ev->name ? ev->name : "",
                     ev->reason ? ev->reason : "", (int)ev->cause, (int)ev->gate,
                     ev->pool ? ev->pool : "", ev->revision ? ev->revision : "");
}

struct upg_event_log *upg_event_log_new(void)
{
    struct upg_event_log *l = xcalloc(1, sizeof(*l));
    l->posted = json_object();
    return l;
}

void upg_event_log_free(struct upg_event_log *l)
{
    if (!l)
        return;
    json_decref(l->posted);
    free(l);
}

bool upg_event_log_holds(const struct upg_event_log *l, const struct upg_event *ev, int64_t now_s)
{
    if (!l || ev->cause == UPG_CAUSE_STATE)
        return false;
    _cleanup_free_ char *key = event_key(ev);
    json_t *t = json_object_get(l->posted, key);
    return t && now_s - json_integer_value(t) < UPG_EVENT_REPEAT_S;
}

void upg_event_log_record(struct upg_event_log *l, const struct upg_event *ev, int64_t now_s)
{
    if (ev->cause == UPG_CAUSE_STATE)
        return; /* never held back: nothing to remember */
    if (json_object_size(l->posted) >= EVENT_LOG_MAX) {
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe (l->posted, tmp, k, v) {
            if (now_s - json_integer_value(v) >= UPG_EVENT_REPEAT_S)
                json_object_del(l->posted, k);
        }
        if (json_object_size(l->posted) >= EVENT_LOG_MAX)
            json_object_clear(l->posted); /* a storm: start over rather than grow */
    }
    _cleanup_free_ char *key = event_key(ev);
    json_object_set_new(l->posted, key, json_integer((json_int_t)now_s));
}

size_t upg_event_log_size(const struct upg_event_log *l)
{
    return l ? json_object_size(l->posted) : 0;
}
