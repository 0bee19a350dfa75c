/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The remediation planner (remediation.h): one pass over the GPU nodes. The pools' budgets and
 * breakers are counted first (the upgrade planner's counting, upg_budget); nodes already in a
 * state go through the machine as far as a pass can decide without waiting on the cluster; then
 * the healthy nodes with a fault are quarantined, the earliest fault first, each through the
 * breakers, and go on as far as they can. Every decision is written back to the node, so a pass
 * after a restart continues where the last one stopped.
 */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "remediation.h"
#include "yamlcfg.h"

#define PUSH(arr, n) (*((arr) = xrealloc((arr), ((n) + 1) * sizeof(*(arr))), &(arr)[(n)++]))

#define DEFAULT_POOL         "default"
#define CLUSTER_THRESHOLD    "30%"
#define CLUSTER_WINDOW_S     3600
#define REASON_QUARANTINED   "GPUQuarantined"
#define REASON_STATE         "GPURemediation"
#define REASON_RECOVERED     "GPURecovered"
#define REASON_FAILED        "GPURemediationFailed"
#define REASON_WAITING       "GPURemediationWaiting"
#define REASON_BREAKER       "GPURemediationBreakerOpen"
#define REASON_BREAKER_RESET "GPURemediationBreakerReset"
#define REASON_REFUSED       "GPURemediationRefused"

struct breaker {
    long long threshold; /* quarantines the window allows */
    int64_t window_ms;
    int64_t reset_ms; /* quarantines before it do not count */
    int in_window;
    bool open;
    char *why;
    int64_t opened_ms;
};

struct pool {
    char *name;
    const json_t *obj; /* the DriverUpgradePool, NULL for the default pool */
    struct upg_pool up;
    bool up_ok;
    struct rem_policy own; /* its spec.remediation, parsed */
    const struct rem_policy *policy;
    const struct upg_tz *tz;
    char *error;
    struct upg_budget b;
    long long floor, budget;
    int nodes, quarantined, in_progress, failed;
    bool window_open;
    int64_t next_window_s;
    struct breaker br;
};

struct node {
    const json_t *obj;
    const char *name;
    enum rem_state state, start_state;
    bool ready, unsched;
    enum upg_state upg;
    long long gpus;
    int pool;
    char *frozen;
    bool health_ok;
    char *health_error;
    struct gh_health *h; /* parsed health (NULL when absent) */
    json_t *labels, *anns;
    int unsched_set; /* -1 unchanged, 0 uncordon, 1 cordon */
    json_t *taints;  /* the new list, or NULL: unchanged */
    char *why;       /* why it waits, this pass */
    int64_t quarantine_ms, recovery_ms;
    bool report;
};

struct planner {
    const struct rem_input *in;
    struct rem_policy defaults;
    struct node *n;
    size_t nn;
    struct pool *pools; /* the DriverUpgradePools', then the default pool */
    size_t npools;
    struct breaker cluster;
    json_t *pdb_used;
    struct rem_plan *out;
};

/* ---- the plan's lists ----------------------------------------------------------------------- */

static void event_out(struct planner *pl, const char *node, const char *pool, bool warning,
                      const char *reason, const char *fmt, ...) GPUOP_PRINTF(6, 7);
static void event_out(struct planner *pl, const char *node, const char *pool, bool warning,
                      const char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    PUSH(pl->out->events, pl->out->n_events) =
        (struct rem_event){.node = node ? xstrdup(node) : NULL,
                           .pool = pool ? xstrdup(pool) : NULL,
                           .warning = warning,
                           .reason = reason,
                           .message = xstrdup(msg)};
}

static void pod_out(struct rem_pod_ref **list, size_t *n, const json_t *pod, const char *node)
{
    PUSH(*list, *n) = (struct rem_pod_ref){xstrdup(kobj_namespace(upg_pod_obj(pod)) ?: ""),
                                           xstrdup(upg_pod_name(pod) ?: ""), xstrdup(node)};
}

/* Look again in `delay_ms` (at least a second). */
static void want_requeue(struct planner *pl, int64_t delay_ms)
{
    int64_t d = delay_ms < 1000 ? 1000 : delay_ms;
    if (pl->out->requeue_ms == 0 || d < pl->out->requeue_ms)
        pl->out->requeue_ms = d;
}

/* ---- a node's patch ------------------------------------------------------------------------- */

static const char *cur_ann(const struct node *n, const char *k)
{
    return kobj_ann_staged(n->obj, n->anns, k);
}

static void set_ann(struct node *n, const char *k, const char *v)
{
    kobj_ann_stage(n->obj, &n->anns, k, v);
}

static void set_ann_i64(struct node *n, const char *k, int64_t v)
{
    kobj_ann_stage_i64(n->obj, &n->anns, k, v);
}

static int64_t ann_i64(const struct node *n, const char *k, int64_t dflt)
{
    return kobj_ann_staged_i64(n->obj, n->anns, k, 0, dflt);
}

static bool cordoned(const struct node *n)
{
    return n->unsched_set >= 0 ? n->unsched_set == 1 : n->unsched;
}

static const json_t *cur_taints(const struct node *n)
{
    return n->taints ? n->taints : kobj_path(n->obj, "spec.taints");
}

static const json_t *our_taint(const struct node *n)
{
    size_t i;
    json_t *t;
    json_array_foreach ((json_t *)cur_taints(n), i, t) {
        if (streq_ptr(kobj_str(t, "key"), REM_TAINT_KEY))
            return t;
    }
    return NULL;
}

/* The taints as they are but ours, and ours with `value` (NULL: without it). */
static void set_taint(struct node *n, const char *value)
{
    const json_t *have = our_taint(n);
    if (value && have && streq_ptr(kobj_str(have, "value"), value) &&
        streq_ptr(kobj_str(have, "effect"), "NoSchedule"))
        return;
    if (!value && !have)
        return;
    json_t *list = json_array();
    size_t i;
    json_t *t;
    json_array_foreach ((json_t *)cur_taints(n), i, t) {
        if (!streq_ptr(kobj_str(t, "key"), REM_TAINT_KEY))
            json_array_append(list, t);
    }
    if (value)
        json_array_append_new(list, json_pack("{s:s,s:s,s:s}", "key", REM_TAINT_KEY, "value", value,
                                              "effect", "NoSchedule"));
    json_decref(n->taints);
    n->taints = list;
}

static void node_patch_out(struct planner *pl, struct node *n)
{
    if (!n->labels && !n->anns && n->unsched_set < 0 && !n->taints)
        return;
    json_t *patch = json_object();
    json_t *meta = json_object();
    if (n->labels)
        json_object_set(meta, "labels", n->labels);
    if (n->anns)
        json_object_set(meta, "annotations", n->anns);
    const char *rv = kobj_resource_version(n->obj);
    if (rv)
        json_object_set_new(meta, "resourceVersion", json_string(rv));
    json_object_set_new(patch, "metadata", meta);
    json_t *spec = NULL;
    if (n->unsched_set >= 0 || n->taints)
        spec = json_object();
    if (n->unsched_set >= 0)
        json_object_set_new(spec, "unschedulable", json_boolean(n->unsched_set == 1));
    if (n->taints)
        json_object_set(spec, "taints", n->taints);
    if (spec)
        json_object_set_new(patch, "spec", spec);
    PUSH(pl->out->patches, pl->out->n_patches) = (struct rem_node_patch){xstrdup(n->name), patch};
}

/* ---- reading a node ------------------------------------------------------------------------- */

static const char *pool_name(const struct planner *pl, const struct node *n)
{
    return n->pool >= 0 ? pl->pools[n->pool].name : NULL;
}

/* The quarantining faults' worst action, the highest sequence number among them, their GPUs,
 * and the worst one. */
struct faults {
    enum gh_action action;
    uint64_t seq;
    const struct gh_fault *worst;
    char gpus[512];
    int64_t first_ms;
};

static bool faults_of(const struct node *n, struct faults *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (!n->h)
        return false;
    for (size_t i = 0; i < n->h->n_faults; i++) {
        const struct gh_fault *f = &n->h->faults[i];
        if (!gh_action_quarantines(f->action))
            continue;
        if (!ret->worst || f->action > ret->action) {
            ret->worst = f;
            ret->action = f->action;
        }
        if (f->seq > ret->seq)
            ret->seq = f->seq;
        if (!ret->first_ms || (f->since_ms && f->since_ms < ret->first_ms))
            ret->first_ms = f->since_ms;
        if (f->uuid[0] && !strstr(ret->gpus, f->uuid)) {
            size_t l = strlen(ret->gpus);
            snprintf(ret->gpus + l, sizeof(ret->gpus) - l, "%s%s", l ? "," : "", f->uuid);
        }
    }
    return ret->worst != NULL;
}

static enum gh_action node_action(const struct node *n)
{
    int a = gh_action_parse(cur_ann(n, REM_ANN_ACTION));
    return a < 0 ? GH_ACT_NONE : (enum gh_action)a;
}

/* ---- states --------------------------------------------------------------------------------- */

static void set_waiting(struct planner *pl, struct node *n, const char *why)
{
    free(n->why);
    n->why = why ? xstrdup(why) : NULL;
    if (streq_ptr(cur_ann(n, REM_ANN_WAITING), why))
        return;
    set_ann(n, REM_ANN_WAITING, why);
    if (why)
        event_out(pl, n->name, pool_name(pl, n), false, REASON_WAITING, "remediation waits: %s",
                  why);
}

static void set_state(struct planner *pl, struct node *n, enum rem_state s, const char *why)
{
    if (n->state == s)
        return;
    struct pool *p = n->pool >= 0 ? &pl->pools[n->pool] : NULL;
    bool was_active = n->state >= REM_DRAINING && n->state <= REM_VALIDATING;
    bool active = s >= REM_DRAINING && s <= REM_VALIDATING;
    if (p && was_active != active)
        p->in_progress += active ? 1 : -1;
    if (p && (n->state == REM_FAILED) != (s == REM_FAILED))
        p->failed += s == REM_FAILED ? 1 : -1;
    if (p && (n->state == REM_HEALTHY) != (s == REM_HEALTHY))
        p->quarantined += s == REM_HEALTHY ? -1 : 1;
    if (!n->labels)
        n->labels = json_object();
    json_object_set_new(n->labels, REM_LABEL_STATE,
                        s == REM_HEALTHY ? json_null() : json_string(rem_state_name(s)));
    n->state = s;
    set_ann_i64(n, REM_ANN_SINCE, pl->in->now_ms);
    set_waiting(pl, n, NULL);
    if (s == REM_FAILED) {
        set_ann(n, REM_ANN_REASON, why);
        event_out(pl, n->name, pool_name(pl, n), true, REASON_FAILED,
                  "GPU remediation failed, node left quarantined for a person: %s",
                  why ? why : "unknown");
    } else if (s != REM_HEALTHY && s != REM_QUARANTINED) {
        set_ann(n, REM_ANN_REASON, NULL);
        event_out(pl, n->name, pool_name(pl, n), false, REASON_STATE, "node %s (%s)",
                  rem_state_name(s), cur_ann(n, REM_ANN_ACTION) ?: "no action");
    }
}

static int64_t since(const struct node *n, int64_t now)
{
    return ann_i64(n, REM_ANN_SINCE, now);
}

/* Has `timeout_s` (0: never) passed since start_ms? A start in the future is now. */
static bool timed_out(struct planner *pl, int64_t start_ms, int64_t timeout_s)
{
    if (timeout_s <= 0)
        return false;
    int64_t now = pl->in->now_ms;
    int64_t elapsed = start_ms < now ? now - start_ms : 0;
    int64_t limit = timeout_s * 1000; /* durations are bounded (REM_DURATION_MAX_S) */
    if (elapsed >= limit)
        return true;
    want_requeue(pl, limit - elapsed);
    return false;
}

/* A quarantined node stays cordoned and tainted, whoever uncordons it (an upgrade finishing,
 * by its own rule, uncordons a node it cordoned). */
static void hold_quarantine(struct planner *pl, struct node *n)
{
    if (!cordoned(n)) {
        n->unsched_set = 1;
        set_ann(n, REM_ANN_CORDONED, "true");
        /* the budget as the next node sees it: this one no longer serves */
        struct pool *p = &pl->pools[n->pool];
        p->b.unavailable++;
        if (n->ready && !upg_state_in_flight(n->upg))
            p->b.gpus_ready -= n->gpus;
    }
    set_taint(n, cur_ann(n, REM_ANN_ACTION) ?: gh_action_name(GH_ACT_RESET_GPU));
}

/* The fault the cycle handles: the worst action so far (never lowered within a cycle), the
 * last sequence number, the GPUs. True when the action became more disruptive. */
static bool take_faults(struct node *n, const struct faults *f)
{
    enum gh_action had = node_action(n);
    bool worse = f->action > had;
    if (f->worst && (worse || had == GH_ACT_NONE)) {
        set_ann(n, REM_ANN_ACTION, gh_action_name(f->action));
        set_ann(n, REM_ANN_FAULT, f->worst->message);
        set_ann(n, REM_ANN_GPUS, f->gpus);
        if (cur_ann(n, REM_ANN_ACTION) && our_taint(n))
            set_taint(n, gh_action_name(f->action));
    }
    if (f->seq > (uint64_t)ann_i64(n, REM_ANN_SEQ, 0))
        set_ann_i64(n, REM_ANN_SEQ, (int64_t)f->seq);
    return worse && had != GH_ACT_NONE;
}

/* ---- the breakers --------------------------------------------------------------------------- */

/* Where a pool's breaker lives: its DriverUpgradePool's annotations, or for the default pool
 * (no object of its own) the cluster's object, under a key of its own. */
static const json_t *breaker_anns(const struct planner *pl, const struct pool *p)
{
    return p->obj ? kobj_annotations(p->obj) : pl->in->cluster_annotations;
}
static const char *breaker_key(const struct pool *p)
{
    return p->obj ? REM_ANN_BREAKER : REM_ANN_BREAKER_DEFAULT;
}

static void breaker_read(struct breaker *br, const json_t *anns, const char *key,
                         const json_t *threshold, int64_t window_s, int total)
{
    br->threshold = kobj_int_or_percent_scaled(threshold, total, false);
    if (br->threshold < 1)
        br->threshold = 1;
    br->window_ms = window_s * 1000;
    const char *reset = kobj_str(anns, REM_ANN_BREAKER_RESET);
    int64_t r;
    uint64_t ms;
    if (reset && parse_i64(reset, &r) == 0 && r > 0)
        br->reset_ms = r;
    else if (reset && time_parse_rfc3339(reset, &ms) == 0)
        br->reset_ms = (int64_t)ms;
    const char *open = kobj_str(anns, key);
    if (!open)
        return;
    char *end = NULL;
    long long at = strtoll(open, &end, 10);
    if (end == open || at <= 0)
        at = 1; /* a value someone wrote by hand: open */
    if (br->reset_ms >= at)
        return; /* reset since it opened */
    br->open = true;
    br->opened_ms = at;
    br->why = xstrdup(end && *end == ' ' ? end + 1 : open);
}

static bool counts_in_window(const struct breaker *br, int64_t at, int64_t now)
{
    return at > 0 && at > br->reset_ms && at <= now && now - at < br->window_ms;
}

/* May one more node of pool p be quarantined? Opens a breaker (and says so) when not. */
static bool breaker_allows(struct planner *pl, struct pool *p, struct node *n)
{
    struct breaker *brs[2] = {&p->br, &pl->cluster};
    for (int k = 0; k < 2; k++) {
        struct breaker *br = brs[k];
        const char *scope = k == 0 ? p->name : NULL;
        if (!br->open && br->in_window + 1 > br->threshold) {
            br->open = true;
            br->opened_ms = pl->in->now_ms;
            free(br->why);
            br->why = xasprintf(
                "%d node%s quarantined within %llds, the %s allows %lld; node %s "
                "not quarantined",
                br->in_window, br->in_window == 1 ? "" : "s", (long long)(br->window_ms / 1000),
                k == 0 ? "pool's breaker" : "cluster's breaker", br->threshold, n->name);
            char *value = xasprintf("%lld %s", (long long)br->opened_ms, br->why);
            PUSH(pl->out->breakers, pl->out->n_breakers) = (struct rem_breaker_update){
                scope ? xstrdup(scope) : NULL, value, k == 0 ? breaker_key(p) : REM_ANN_BREAKER};
            event_out(pl, NULL, scope, true, REASON_BREAKER,
                      "%s breaker open, no new quarantine until a person resets it (annotation "
                      "%s): %s",
                      scope ? "pool" : "cluster", REM_ANN_BREAKER_RESET, br->why);
        }
        if (br->open) {
            _cleanup_free_ char *why =
                xasprintf("%s breaker open: %s", k == 0 ? "the pool's" : "the cluster's", br->why);
            set_waiting(pl, n, why);
            return false;
        }
    }
    p->br.in_window++;
    pl->cluster.in_window++;
    return true;
}

/* ---- the machine ---------------------------------------------------------------------------- */

/* Quarantines node n for its faults: cordon (unless someone already did), taint, the state, an
 * Event naming the GPU, the fault and the action. */
static void quarantine(struct planner *pl, struct node *n, const struct faults *f)
{
    int64_t now = pl->in->now_ms;
    set_ann(n, REM_ANN_ACTION, NULL);
    take_faults(n, f);
    set_ann_i64(n, REM_ANN_QUARANTINED_AT, now);
    int64_t at = f->first_ms > 0 && f->first_ms <= now ? f->first_ms : now;
    set_ann_i64(n, REM_ANN_FAULT_AT, at);
    n->quarantine_ms = now - at;
    /* a node someone else cordoned stays cordoned at the end */
    set_ann(n, REM_ANN_CORDONED, NULL);
    hold_quarantine(pl, n);
    set_state(pl, n, REM_QUARANTINED, NULL);
    event_out(pl, n->name, pool_name(pl, n), true, REASON_QUARANTINED,
              "node quarantined (cordoned, tainted %s) %lldms after the fault: %s; action %s",
              REM_TAINT_KEY, (long long)n->quarantine_ms, f->worst->message,
              gh_action_name(f->action));
}

/* Back in service: the taint off, uncordoned unless someone else had cordoned it, the cycle's
 * annotations cleared; the quarantine time stays for the breaker's window. */
static void release(struct planner *pl, struct node *n)
{
    int64_t now = pl->in->now_ms;
    if (streq_ptr(cur_ann(n, REM_ANN_CORDONED), "true") && cordoned(n)) {
        n->unsched_set = 0;
        struct pool *p = &pl->pools[n->pool];
        p->b.unavailable--;
        if (n->ready && !upg_state_in_flight(n->upg))
            p->b.gpus_ready += n->gpus;
    }
    set_taint(n, NULL);
    int64_t at = ann_i64(n, REM_ANN_FAULT_AT, 0);
    n->recovery_ms = at > 0 && at <= now ? now - at : -1;
    static const char *const clear[] = {
        REM_ANN_CORDONED,     REM_ANN_ACTION,         REM_ANN_GPUS,   REM_ANN_FAULT,
        REM_ANN_FAULT_AT,     REM_ANN_WAITING,        REM_ANN_REASON, REM_ANN_REQUEST,
        REM_ANN_REQUEST_DONE, REM_ANN_REQUEST_FAILED, REM_ANN_REBOOT, REM_ANN_REBOOT_DONE,
        REM_ANN_BOOT_ID,      REM_ANN_APPROVED,       REM_ANN_RETRY,  REM_ANN_SINCE,
    };
    _cleanup_free_ char *action = xstrdup(cur_ann(n, REM_ANN_ACTION) ?: "none");
    for (size_t i = 0; i < ARRAY_SIZE(clear); i++)
        set_ann(n, clear[i], NULL);
    set_ann_i64(n, REM_ANN_RECOVERED_AT, now);
    set_state(pl, n, REM_HEALTHY, NULL);
    set_ann(n, REM_ANN_SINCE, NULL);
    event_out(pl, n->name, pool_name(pl, n), false, REASON_RECOVERED,
              "node back in service after %s; %lldms from the fault", action,
              (long long)n->recovery_ms);
}

/* May node n's action be taken: automatic in its pool, or approved by a person? */
static bool allowed(const struct node *n, const struct pool *p)
{
    return p->policy->automatic[node_action(n)] || streq_ptr(cur_ann(n, REM_ANN_APPROVED), "true");
}

/* quarantined -> draining: the gates, in order. NULL when it may go (a slot taken). */
static char *gate(struct node *n, struct pool *p)
{
    enum gh_action a = node_action(n);
    if (!allowed(n, p))
        return xasprintf("%s needs a person: pool %s does not take it automatically "
                         "(spec.remediation.automatic); annotate the node %s=true to approve",
                         gh_action_name(a), p->name, REM_ANN_APPROVED);
    if (upg_state_in_flight(n->upg))
        return xasprintf("a driver upgrade has the node (%s)", upg_state_name(n->upg));
    if (!p->window_open) {
        char t[40] = "never";
        if (p->next_window_s)
            time_rfc3339((uint64_t)p->next_window_s * 1000, t, sizeof(t));
        return xasprintf("maintenance window closed; opens %s", t);
    }
    if (p->floor > 0 && p->b.gpus_ready < p->floor)
        return xasprintf("capacity floor: %lld of %lld GPUs ready, floor %lld", p->b.gpus_ready,
                         p->b.gpus_total, p->floor);
    long long slots = p->budget > 1 ? p->budget : 1;
    if (p->in_progress + p->b.in_progress >= slots)
        return xasprintf("budget: %d node%s in remediation, %d upgrading, maxUnavailable %lld",
                         p->in_progress, p->in_progress == 1 ? "" : "s", p->b.in_progress, slots);
    return NULL;
}

static bool pods_listed(struct planner *pl, const struct node *n)
{
    if (!pl->in->pods_listed || json_object_get(pl->in->pods_listed, n->name))
        return true;
    want_requeue(pl, 1000);
    return false;
}

/* Evicts the node's GPU pods as their namespace's mode says: 1 when none is left to wait for,
 * 0 while some are; *why says what holds. */
static int drain(struct planner *pl, struct node *n, const struct pool *p, char *why, size_t len)
{
    why[0] = '\0';
    if (!pods_listed(pl, n)) {
        snprintf(why, len, "the node's pods are not listed yet");
        return 0;
    }
    const struct rem_policy *po = p->policy;
    int64_t start = since(n, pl->in->now_ms);
    int left = 0;
    size_t i;
    json_t *pod;
    json_array_foreach ((json_t *)pl->in->pods, i, pod) {
        if (!streq_ptr(upg_pod_node(pod), n->name) || upg_pod_finished(pod) ||
            !upg_pod_is_gpu(pod) || upg_pod_daemon(pod))
            continue;
        const char *ns = kobj_namespace(upg_pod_obj(pod)), *name = upg_pod_name(pod);
        enum rem_evict_mode m = rem_policy_evict_mode(po, ns);
        if (m == REM_EVICT_LEAVE)
            continue;
        left++;
        if (upg_pod_deletion(pod)) {
            if (!why[0])
                snprintf(why, len, "pod %s/%s is terminating", ns, name);
            continue;
        }
        if (m == REM_EVICT_WAIT && !timed_out(pl, start, po->evict_wait_s)) {
            if (!why[0])
                snprintf(why, len, "waiting for pod %s/%s to complete (namespace mode wait)", ns,
                         name);
            continue;
        }
        const char *pdb = NULL;
        if (!upg_pdb_allows(pl->in->pdbs, pl->pdb_used, pod, &pdb)) {
            snprintf(why, len, "pod %s/%s: PodDisruptionBudget %s allows no disruption", ns, name,
                     pdb);
            want_requeue(pl, 5000);
            continue;
        }
        pod_out(&pl->out->evictions, &pl->out->n_evictions, pod, n->name);
        if (!why[0])
            snprintf(why, len, "evicting pod %s/%s", ns, name);
    }
    return left == 0;
}

static enum rem_state step_quarantined(struct planner *pl, struct node *n, struct pool *p,
                                       char *why, size_t len)
{
    struct faults f;
    if (faults_of(n, &f))
        take_faults(n, &f);
    else if (n->h)
        return REM_VALIDATING; /* the fault went before anything was done: checked again */
    hold_quarantine(pl, n);
    enum gh_action a = node_action(n);
    if (a == GH_ACT_REPLACE_HW) {
        snprintf(why, len, "the hardware needs a person: %s",
                 cur_ann(n, REM_ANN_FAULT) ?: gh_action_name(a));
        return REM_FAILED;
    }
    _cleanup_free_ char *g = gate(n, p);
    if (g) {
        set_waiting(pl, n, g);
        return REM_QUARANTINED;
    }
    return REM_DRAINING;
}

static enum rem_state step_draining(struct planner *pl, struct node *n, struct pool *p, char *why,
                                    size_t len)
{
    struct faults f;
    if (faults_of(n, &f))
        take_faults(n, &f);
    hold_quarantine(pl, n);
    if (!allowed(n, p))
        return REM_QUARANTINED; /* the fault grew into an action a person must approve */
    if (drain(pl, n, p, why, len))
        return REM_REMEDIATING;
    if (timed_out(pl, since(n, pl->in->now_ms), p->policy->drain_timeout_s)) {
        size_t l = strlen(why);
        snprintf(why + l, len - l, "%sthe drain did not finish within %llds", l ? "; " : "",
                 (long long)p->policy->drain_timeout_s);
        return REM_FAILED;
    }
    set_waiting(pl, n, why[0] ? why : NULL);
    return REM_DRAINING;
}

/* The request outstanding for the node's action: its id (in buf), or false. */
static bool request_id(const struct node *n, enum gh_action a, char *buf, size_t len)
{
    const char *v = cur_ann(n, a == GH_ACT_REBOOT_NODE ? REM_ANN_REBOOT : REM_ANN_REQUEST);
    if (!v)
        return false;
    if (a == GH_ACT_REBOOT_NODE) {
        snprintf(buf, len, "%s", v);
        return true;
    }
    char act[32], id[64];
    if (sscanf(v, "%31s %63s", act, id) != 2 || gh_action_parse(act) != (int)a)
        return false;
    snprintf(buf, len, "%s", id);
    return true;
}

static void request_out(struct planner *pl, struct node *n, enum gh_action a, const char *id,
                        bool fresh)
{
    PUSH(pl->out->requests, pl->out->n_requests) = (struct rem_request){
        .node = xstrdup(n->name),
        .action = a,
        .id = xstrdup(id),
        .gpus = xstrdup(a == GH_ACT_RESET_GPU ? cur_ann(n, REM_ANN_GPUS) ?: "" : ""),
        .fresh = fresh};
}

static void request_clear(struct node *n)
{
    set_ann(n, REM_ANN_REQUEST, NULL);
    set_ann(n, REM_ANN_REQUEST_DONE, NULL);
    set_ann(n, REM_ANN_REQUEST_FAILED, NULL);
    set_ann(n, REM_ANN_REBOOT, NULL);
    set_ann(n, REM_ANN_REBOOT_DONE, NULL);
    set_ann(n, REM_ANN_BOOT_ID, NULL);
}

static enum rem_state step_remediating(struct planner *pl, struct node *n, struct pool *p,
                                       char *why, size_t len)
{
    struct faults f;
    if (faults_of(n, &f) && take_faults(n, &f)) {
        /* the fault grew worse: the new action, if it may be taken */
        request_clear(n);
        set_ann_i64(n, REM_ANN_SINCE, pl->in->now_ms);
    }
    hold_quarantine(pl, n);
    if (!allowed(n, p)) {
        request_clear(n);
        return REM_QUARANTINED;
    }
    enum gh_action a = node_action(n);
    char id[64];
    if (!request_id(n, a, id, sizeof(id))) {
        snprintf(id, sizeof(id), "%lld", (long long)pl->in->now_ms);
        request_clear(n);
        if (a == GH_ACT_REBOOT_NODE) {
            set_ann(n, REM_ANN_REBOOT, id);
            set_ann(n, REM_ANN_BOOT_ID, rem_node_boot_id(n->obj) ?: "");
        } else {
            const char *gpus = a == GH_ACT_RESET_GPU ? cur_ann(n, REM_ANN_GPUS) ?: "" : "";
            _cleanup_free_ char *v =
                xasprintf("%s %s%s%s", gh_action_name(a), id, gpus[0] ? " " : "", gpus);
            set_ann(n, REM_ANN_REQUEST, v);
        }
        set_ann_i64(n, REM_ANN_SINCE, pl->in->now_ms);
        request_out(pl, n, a, id, true);
        set_waiting(pl, n, NULL);
        want_requeue(pl, 5000);
        return REM_REMEDIATING;
    }
    bool done = false;
    if (a == GH_ACT_REBOOT_NODE) {
        const char *boot = cur_ann(n, REM_ANN_BOOT_ID);
        const char *now_boot = rem_node_boot_id(n->obj);
        done = streq_ptr(cur_ann(n, REM_ANN_REBOOT_DONE), id) ||
               (boot && boot[0] && now_boot && !streq_ptr(boot, now_boot));
        done = done && n->ready;
    } else {
        const char *failed = cur_ann(n, REM_ANN_REQUEST_FAILED);
        size_t il = strlen(id);
        if (failed && strncmp(failed, id, il) == 0 && (failed[il] == ' ' || !failed[il])) {
            snprintf(why, len, "%s request %s failed: %s", gh_action_name(a), id,
                     failed[il] ? failed + il + 1 : "no reason given");
            return REM_FAILED;
        }
        done = streq_ptr(cur_ann(n, REM_ANN_REQUEST_DONE), id);
    }
    if (done)
        return REM_VALIDATING;
    if (timed_out(pl, since(n, pl->in->now_ms), p->policy->remediation_timeout_s)) {
        snprintf(why, len, "no answer to the %s request %s within %llds", gh_action_name(a), id,
                 (long long)p->policy->remediation_timeout_s);
        return REM_FAILED;
    }
    request_out(pl, n, a, id, false);
    _cleanup_free_ char *w =
        xasprintf("waiting for the %s request %s to be carried out", gh_action_name(a), id);
    set_waiting(pl, n, w);
    return REM_REMEDIATING;
}

static int64_t created_ms(const json_t *pod)
{
    uint64_t ms;
    const char *t = upg_pod_created(pod);
    return t && time_parse_rfc3339(t, &ms) == 0 ? (int64_t)ms : 0;
}

/* The node's validator pods: those from before the validation began are replaced (deleted: the
 * DaemonSet makes new ones, which check the node again); true when a new one is ready. */
static bool validators(struct planner *pl, struct node *n, int64_t start_ms)
{
    if (!pl->in->validation_enabled)
        return true;
    /* creation times have whole seconds */
    int64_t start_s = start_ms / 1000 * 1000;
    bool ok = false;
    size_t i;
    json_t *pod;
    json_array_foreach ((json_t *)pl->in->pods, i, pod) {
        if (!streq_ptr(upg_pod_node(pod), n->name) ||
            !streq_ptr(kobj_label(upg_pod_obj(pod), "app"), UPG_VALIDATOR_APP))
            continue;
        bool stale = created_ms(pod) < start_s;
        if (stale && !upg_pod_deletion(pod))
            pod_out(&pl->out->deletions, &pl->out->n_deletions, pod, n->name);
        else if (!stale && upg_pod_ready(pod) && !upg_pod_deletion(pod))
            ok = true;
    }
    return ok;
}

static enum rem_state step_validating(struct planner *pl, struct node *n, struct pool *p, char *why,
                                      size_t len)
{
    hold_quarantine(pl, n);
    int64_t start = since(n, pl->in->now_ms);
    uint64_t ack = (uint64_t)ann_i64(n, GH_ANN_ACK, 0);
    bool valid = validators(pl, n, start);
    const char *wait = NULL;
    if (!n->h) {
        wait = n->health_error ? "the node's health annotation does not parse"
                               : "the node's health agent reports nothing";
    } else if (n->h->acked < ack) {
        wait = "the node's health agent has not applied the acknowledgement yet";
    } else {
        for (size_t i = 0; i < n->h->n_faults; i++) {
            const struct gh_fault *f = &n->h->faults[i];
            if (!gh_action_quarantines(f->action))
                continue;
            snprintf(why, len, "%s: %s", f->seq <= ack ? "the fault persists" : "a new fault",
                     f->message);
            return REM_FAILED;
        }
    }
    if (!wait && valid)
        return REM_HEALTHY;
    if (!wait)
        wait = "waiting for the validator to pass on the node";
    if (timed_out(pl, start, p->policy->validation_timeout_s)) {
        snprintf(why, len, "validation did not pass within %llds: %s",
                 (long long)p->policy->validation_timeout_s, wait);
        return REM_FAILED;
    }
    set_waiting(pl, n, wait);
    return REM_VALIDATING;
}

static enum rem_state step_failed(struct planner *pl, struct node *n)
{
    hold_quarantine(pl, n);
    if (!streq_ptr(cur_ann(n, REM_ANN_RETRY), "true"))
        return REM_FAILED;
    /* a person fixed it (or wants it tried again): validate afresh, every fault acknowledged */
    set_ann(n, REM_ANN_RETRY, NULL);
    if (n->h && n->h->seq > (uint64_t)ann_i64(n, REM_ANN_SEQ, 0))
        set_ann_i64(n, REM_ANN_SEQ, (int64_t)n->h->seq);
    (void)pl;
    return REM_VALIDATING;
}

/* Entering a state: what it starts with. */
static void enter(struct node *n, enum rem_state s)
{
    if (s == REM_VALIDATING) {
        /* the latched faults of the cycle are handled: the agent clears them */
        int64_t seq = ann_i64(n, REM_ANN_SEQ, 0);
        if (seq > ann_i64(n, GH_ANN_ACK, 0))
            set_ann_i64(n, GH_ANN_ACK, seq);
        request_clear(n); /* step_validating replaces the validators, next in this pass */
    }
}

static void run_machine(struct planner *pl, struct node *n)
{
    struct pool *p = &pl->pools[n->pool];
    char why[768];
    for (int guard = 0; guard < REM_N_STATES + 2; guard++) {
        why[0] = '\0';
        enum rem_state next = n->state;
        switch (n->state) {
        case REM_QUARANTINED:
            next = step_quarantined(pl, n, p, why, sizeof(why));
            break;
        case REM_DRAINING:
            next = step_draining(pl, n, p, why, sizeof(why));
            break;
        case REM_REMEDIATING:
            next = step_remediating(pl, n, p, why, sizeof(why));
            break;
        case REM_VALIDATING:
            next = step_validating(pl, n, p, why, sizeof(why));
            break;
        case REM_FAILED:
            next = step_failed(pl, n);
            break;
        default:
            return;
        }
        if (next == n->state)
            return;
        if (next == REM_HEALTHY) {
            release(pl, n);
            return;
        }
        set_state(pl, n, next, why[0] ? why : NULL);
        enter(n, next);
        if (next == REM_FAILED)
            return;
    }
}

/* A healthy node with a fault: quarantined (through the breakers), or failed at once when it
 * recovered within the refail window; then on as far as it goes. */
static void start_node(struct planner *pl, struct node *n, const struct faults *f)
{
    struct pool *p = &pl->pools[n->pool];
    if (!breaker_allows(pl, p, n))
        return;
    quarantine(pl, n, f);
    int64_t rec = ann_i64(n, REM_ANN_RECOVERED_AT, 0);
    int64_t w = p->policy->refail_window_s;
    if (rec > 0 && w > 0 && pl->in->now_ms - rec < w * 1000) {
        char why[768];
        snprintf(why, sizeof(why), "failed again %llds after recovering (refail window %llds): %s",
                 (long long)((pl->in->now_ms - rec) / 1000), (long long)w, f->worst->message);
        set_state(pl, n, REM_FAILED, why);
        return;
    }
    run_machine(pl, n);
}

/* ---- loading -------------------------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct node *)a)->name, ((const struct node *)b)->name);
}

static void pools_load(struct planner *pl)
{
    const struct rem_input *in = pl->in;
    size_t n = json_array_size(in->pools);
    pl->pools = xcalloc(n + 1, sizeof(*pl->pools));
    for (size_t i = 0; i < n; i++) {
        struct pool *p = &pl->pools[i];
        const json_t *obj = json_array_get(in->pools, i);
        p->obj = obj;
        p->name = xstrdup(kobj_name(obj) ?: "?");
        struct err e = {0};
        if (upg_pool_parse(obj, &p->up, &e) < 0) {
            p->error = xstrdup(err_msg(&e));
            continue;
        }
        p->up_ok = true;
        _cleanup_free_ char *path = xasprintf("DriverUpgradePool %s: spec.remediation", p->name);
        if (rem_policy_parse(kobj_path(obj, "spec.remediation"), path, &p->own, &e) < 0) {
            p->error = xstrdup(err_msg(&e));
            continue;
        }
        p->policy = &p->own;
        if (p->up.time_zone) {
            const char *why = NULL;
            p->tz = upg_zones_get(in->zones, p->up.time_zone, &why);
            if (!p->tz)
                p->error = xasprintf("DriverUpgradePool %s: spec.timeZone: %s", p->name, why);
        }
    }
    struct pool *d = &pl->pools[n];
    d->name = xstrdup(DEFAULT_POOL);
    d->policy = in->policy ? in->policy : &pl->defaults;
    pl->npools = n + 1;
}

static void node_load(struct planner *pl, struct node *n, const json_t *obj)
{
    *n = (struct node){.obj = obj,
                       .name = kobj_name(obj),
                       .pool = -1,
                       .unsched_set = -1,
                       .quarantine_ms = -1,
                       .recovery_ms = -1};
    int st = rem_state_parse(kobj_label(obj, REM_LABEL_STATE));
    if (st < 0)
        n->frozen = xasprintf("label %s=\"%s\" is no remediation state", REM_LABEL_STATE,
                              kobj_label(obj, REM_LABEL_STATE));
    n->state = n->start_state = st < 0 ? REM_HEALTHY : (enum rem_state)st;
    n->ready = upg_node_ready(obj);
    n->unsched = json_is_true(kobj_path(obj, "spec.unschedulable"));
    int u = upg_state_parse(kobj_label(obj, UPG_LABEL_STATE));
    n->upg = u < 0 ? UPG_UNKNOWN : (enum upg_state)u;
    n->gpus = upg_node_gpus(obj);
    const char *ht = kobj_annotation(obj, GH_ANN_HEALTH);
    if (ht) {
        n->h = xcalloc(1, sizeof(*n->h));
        struct err e = {0};
        if (gh_health_parse(ht, strlen(ht), n->h, &e) < 0) {
            n->health_error = xstrdup(err_msg(&e));
            free(n->h);
            n->h = NULL;
        }
    }
    (void)pl;
}

/* The pool of node n: the DriverUpgradePool selecting it, else the default one; two pools, or an
 * invalid one, leave it alone. */
static void assign_pool(struct planner *pl, struct node *n)
{
    int found = -1;
    for (size_t i = 0; i + 1 < pl->npools; i++) {
        struct pool *p = &pl->pools[i];
        bool sel;
        if (p->up_ok) {
            sel = upg_pool_selects(&p->up, n->obj);
        } else {
            const json_t *ns = kobj_path(p->obj, "spec.nodeSelector");
            sel = json_is_object(ns) && kobj_labels_match(ns, kobj_labels(n->obj));
        }
        if (!sel)
            continue;
        if (found >= 0) {
            free(n->frozen);
            n->frozen = xasprintf("selected by DriverUpgradePools %s and %s", pl->pools[found].name,
                                  p->name);
            n->pool = -1;
            return;
        }
        found = (int)i;
    }
    n->pool = found >= 0 ? found : (int)pl->npools - 1;
    if (pl->pools[n->pool].error && !n->frozen)
        n->frozen = xstrdup(pl->pools[n->pool].error);
}

static bool gpu_node(const struct node *n)
{
    return n->gpus > 0 || n->h || n->health_error || n->state != REM_HEALTHY ||
           kobj_label(n->obj, REM_LABEL_STATE) ||
           streq_ptr(kobj_label(n->obj, "nvidia.com/gpu.present"), "true");
}

/* Each pool's budget (upg_budget's counting), floor, window and breaker, from the nodes as the
 * pass found them. */
static void tally(struct planner *pl)
{
    const struct rem_input *in = pl->in;
    int64_t now = in->now_ms;
    int all = 0;
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        if (n->pool < 0)
            continue;
        struct pool *p = &pl->pools[n->pool];
        upg_budget_add_node(&p->b, n->obj);
        p->nodes++;
        all++;
        if (n->state != REM_HEALTHY)
            p->quarantined++;
        if (n->state >= REM_DRAINING && n->state <= REM_VALIDATING)
            p->in_progress++;
        if (n->state == REM_FAILED)
            p->failed++;
    }
    for (size_t k = 0; k < pl->npools; k++) {
        struct pool *p = &pl->pools[k];
        const json_t *mu =
            p->up_ok && p->up.max_unavailable ? p->up.max_unavailable : in->max_unavailable;
        p->budget = upg_limit(mu, p->nodes);
        p->floor = p->up_ok && p->up.capacity_floor
                       ? kobj_int_or_percent_scaled(p->up.capacity_floor, p->b.gpus_total, true)
                       : 0;
        p->window_open = true;
        if (p->policy && p->policy->n_windows) {
            upg_window_state(p->policy->windows, p->policy->n_windows, p->tz, now / 1000,
                             &p->window_open, &p->next_window_s);
            if (!p->window_open && p->next_window_s > now / 1000)
                want_requeue(pl, (p->next_window_s - now / 1000) * 1000);
        }
        const struct rem_policy *po = p->policy ? p->policy : &pl->defaults;
        breaker_read(&p->br, breaker_anns(pl, p), breaker_key(p), po->breaker_threshold,
                     po->breaker_window_s, p->nodes);
    }
    _cleanup_json_ json_t *dflt = json_string(CLUSTER_THRESHOLD);
    breaker_read(&pl->cluster, in->cluster_annotations, REM_ANN_BREAKER,
                 in->cluster_breaker_threshold ? in->cluster_breaker_threshold : dflt,
                 in->cluster_breaker_window_s > 0 &&
                         in->cluster_breaker_window_s <= REM_DURATION_MAX_S
                     ? in->cluster_breaker_window_s
                     : CLUSTER_WINDOW_S,
                 all);
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        if (n->pool < 0)
            continue;
        int64_t at = ann_i64(n, REM_ANN_QUARANTINED_AT, 0);
        struct pool *p = &pl->pools[n->pool];
        if (counts_in_window(&p->br, at, now))
            p->br.in_window++;
        if (counts_in_window(&pl->cluster, at, now))
            pl->cluster.in_window++;
    }
}

/* A breaker reset since it opened: its annotation goes, and an Event says so. */
static void breakers_reset(struct planner *pl)
{
    for (size_t k = 0; k <= pl->npools; k++) {
        const json_t *anns =
            k < pl->npools ? breaker_anns(pl, &pl->pools[k]) : pl->in->cluster_annotations;
        const char *key = k < pl->npools ? breaker_key(&pl->pools[k]) : REM_ANN_BREAKER;
        const struct breaker *br = k < pl->npools ? &pl->pools[k].br : &pl->cluster;
        const char *scope = k < pl->npools ? pl->pools[k].name : NULL;
        if (br->open || !kobj_str(anns, key))
            continue;
        PUSH(pl->out->breakers, pl->out->n_breakers) =
            (struct rem_breaker_update){scope ? xstrdup(scope) : NULL, NULL, key};
        event_out(pl, NULL, scope, false, REASON_BREAKER_RESET,
                  "%s breaker reset: quarantines resume", scope ? "pool" : "cluster");
    }
}

/* ---- outputs -------------------------------------------------------------------------------- */

static void node_report(struct planner *pl, struct node *n)
{
    if (n->state == REM_HEALTHY && !n->why && n->recovery_ms < 0)
        return;
    PUSH(pl->out->nodes, pl->out->n_nodes) = (struct rem_node_report){
        .node = xstrdup(n->name),
        .pool = pool_name(pl, n) ? xstrdup(pool_name(pl, n)) : NULL,
        .state = n->state,
        .action = node_action(n),
        .since_ms = ann_i64(n, REM_ANN_SINCE, 0),
        .fault = cur_ann(n, REM_ANN_FAULT) ? xstrdup(cur_ann(n, REM_ANN_FAULT)) : NULL,
        .why = n->state == REM_FAILED && cur_ann(n, REM_ANN_REASON)
                   ? xstrdup(cur_ann(n, REM_ANN_REASON))
                   : (n->why ? xstrdup(n->why) : NULL),
        .quarantine_ms = n->quarantine_ms,
        .recovery_ms = n->recovery_ms};
}

static void pool_reports(struct planner *pl)
{
    for (size_t k = 0; k < pl->npools; k++) {
        struct pool *p = &pl->pools[k];
        struct rem_pool_report *r = &PUSH(pl->out->pools, pl->out->n_pools);
        *r = (struct rem_pool_report){.name = xstrdup(p->name),
                                      .nodes = p->nodes,
                                      .quarantined = p->quarantined,
                                      .in_progress = p->in_progress,
                                      .failed = p->failed,
                                      .budget = p->budget,
                                      .gpus_total = p->b.gpus_total,
                                      .gpus_ready = p->b.gpus_ready,
                                      .floor = p->floor,
                                      .quarantines_in_window = p->br.in_window,
                                      .breaker_open = p->br.open,
                                      .breaker_why = p->br.why ? xstrdup(p->br.why) : NULL,
                                      .error = p->error ? xstrdup(p->error) : NULL};
        /* the rollout holds while faults use up the pool's whole budget */
        if (p->quarantined > 0 && p->quarantined >= p->budget) {
            r->hold_upgrades = true;
            r->hold_why = xasprintf("%d node%s quarantined for GPU faults, maxUnavailable %lld",
                                    p->quarantined, p->quarantined == 1 ? "" : "s", p->budget);
        }
    }
}

static void condition(struct planner *pl)
{
    struct rem_plan *out = pl->out;
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 4096);
    bool open = pl->cluster.open;
    int failed = 0, quarantined = 0;
    if (pl->cluster.open)
        sbuf_addf(&b, "cluster breaker open: %s; ", pl->cluster.why);
    for (size_t k = 0; k < out->n_pools; k++) {
        const struct rem_pool_report *r = &out->pools[k];
        open |= r->breaker_open;
        failed += r->failed;
        quarantined += r->quarantined;
        if (r->breaker_open)
            sbuf_addf(&b, "pool %s: breaker open: %s; ", r->name, r->breaker_why);
        else if (r->quarantined)
            sbuf_addf(&b, "pool %s: %d quarantined, %d failed; ", r->name, r->quarantined,
                      r->failed);
    }
    if (b.len >= 2 && b.data)
        b.data[b.len -= 2] = '\0';
    out->condition.status = !open && failed == 0;
    out->condition.reason = open          ? "BreakerOpen"
                            : failed      ? "NodesFailed"
                            : quarantined ? "Remediating"
                                          : "NoFaults";
    out->condition.message = xstrdup(b.len && b.data ? b.data : "no node quarantined");
}

static void plan_free_inner(struct planner *pl)
{
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        free(n->frozen);
        free(n->health_error);
        free(n->h);
        free(n->why);
        json_decref(n->labels);
        json_decref(n->anns);
        json_decref(n->taints);
    }
    free(pl->n);
    for (size_t k = 0; k < pl->npools; k++) {
        struct pool *p = &pl->pools[k];
        free(p->name);
        if (p->up_ok)
            upg_pool_done(&p->up);
        rem_policy_done(&p->own);
        free(p->error);
        free(p->br.why);
    }
    free(pl->pools);
    free(pl->cluster.why);
    json_decref(pl->pdb_used);
    rem_policy_done(&pl->defaults);
}

void rem_plan_free(struct rem_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_patches; i++) {
        free(p->patches[i].node);
        json_decref(p->patches[i].patch);
    }
    free(p->patches);
    struct rem_pod_ref *lists[] = {p->evictions, p->deletions};
    size_t ns[] = {p->n_evictions, p->n_deletions};
    for (size_t l = 0; l < 2; l++) {
        for (size_t i = 0; i < ns[l]; i++) {
            free(lists[l][i].ns);
            free(lists[l][i].name);
            free(lists[l][i].node);
        }
        free(lists[l]);
    }
    for (size_t i = 0; i < p->n_requests; i++) {
        free(p->requests[i].node);
        free(p->requests[i].id);
        free(p->requests[i].gpus);
    }
    free(p->requests);
    for (size_t i = 0; i < p->n_events; i++) {
        free(p->events[i].node);
        free(p->events[i].pool);
        free(p->events[i].message);
    }
    free(p->events);
    for (size_t i = 0; i < p->n_breakers; i++) {
        free(p->breakers[i].pool);
        free(p->breakers[i].value);
    }
    free(p->breakers);
    for (size_t i = 0; i < p->n_pools; i++) {
        free(p->pools[i].name);
        free(p->pools[i].breaker_why);
        free(p->pools[i].hold_why);
        free(p->pools[i].error);
    }
    free(p->pools);
    for (size_t i = 0; i < p->n_nodes; i++) {
        free(p->nodes[i].node);
        free(p->nodes[i].pool);
        free(p->nodes[i].fault);
        free(p->nodes[i].why);
    }
    free(p->nodes);
    free(p->condition.message);
    free(p);
}

struct upg_hold *rem_plan_holds(const struct rem_plan *p, size_t *ret_n)
{
    struct upg_hold *h = xcalloc(p->n_pools + 1, sizeof(*h));
    size_t n = 0;
    for (size_t i = 0; i < p->n_pools; i++)
        if (p->pools[i].hold_upgrades)
            h[n++] = (struct upg_hold){p->pools[i].name, p->pools[i].hold_why};
    *ret_n = n;
    return h;
}

/* ---- the pass ------------------------------------------------------------------------------- */

struct candidate {
    struct node *n;
    struct faults f;
};

static int cmp_candidate(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    if (x->f.first_ms != y->f.first_ms)
        return x->f.first_ms < y->f.first_ms ? -1 : 1;
    return strcmp(x->n->name, y->n->name);
}

int rem_plan(const struct rem_input *in, struct rem_plan **ret, struct err *e)
{
    if (!in || in->now_ms <= 0)
        return err_set(e, -EINVAL, "remediation plan: no time given");
    _cleanup_(rem_plan_freep) struct rem_plan *out = xcalloc(1, sizeof(*out));
    struct planner pl = {.in = in, .out = out, .pdb_used = json_object()};
    rem_policy_defaults(&pl.defaults);
    pools_load(&pl);

    size_t nn = json_array_size(in->nodes);
    pl.n = xcalloc(nn ? nn : 1, sizeof(*pl.n));
    size_t i;
    json_t *obj;
    json_array_foreach ((json_t *)in->nodes, i, obj) {
        if (!kobj_name(obj))
            continue;
        struct node *n = &pl.n[pl.nn];
        node_load(&pl, n, obj);
        if (!gpu_node(n)) {
            free(n->frozen);
            free(n->health_error);
            free(n->h);
            continue;
        }
        pl.nn++;
    }
    qsort(pl.n, pl.nn, sizeof(*pl.n), cmp_name);
    for (i = 0; i < pl.nn; i++)
        if (!pl.n[i].frozen)
            assign_pool(&pl, &pl.n[i]);
    tally(&pl);
    breakers_reset(&pl);

    /* nodes already under way, in name order */
    for (i = 0; i < pl.nn; i++) {
        struct node *n = &pl.n[i];
        if (n->frozen || n->pool < 0 || n->state == REM_HEALTHY)
            continue;
        if (!pl.pools[n->pool].policy->enabled) {
            set_waiting(&pl, n, "remediation is off in the pool (spec.remediation.enabled)");
            continue;
        }
        run_machine(&pl, n);
    }
    /* healthy nodes with a fault, the earliest fault first */
    struct candidate *c = xcalloc(pl.nn ? pl.nn : 1, sizeof(*c));
    size_t nc = 0;
    for (i = 0; i < pl.nn; i++) {
        struct node *n = &pl.n[i];
        if (n->frozen || n->pool < 0 || n->start_state != REM_HEALTHY)
            continue;
        if (n->health_error) {
            set_waiting(&pl, n, n->health_error);
            continue;
        }
        if (!faults_of(n, &c[nc].f)) {
            set_waiting(&pl, n, NULL);
            /* in service (a person took the state label off): what the quarantine left goes */
            set_taint(n, NULL);
            if (streq_ptr(cur_ann(n, REM_ANN_CORDONED), "true")) {
                set_ann(n, REM_ANN_CORDONED, NULL);
                if (cordoned(n))
                    n->unsched_set = 0;
            }
            continue;
        }
        if (!pl.pools[n->pool].policy->enabled) {
            set_waiting(&pl, n, "remediation is off in the pool (spec.remediation.enabled)");
            continue;
        }
        c[nc++].n = n;
    }
    qsort(c, nc, sizeof(*c), cmp_candidate);
    for (i = 0; i < nc; i++)
        start_node(&pl, c[i].n, &c[i].f);
    free(c);

    for (i = 0; i < pl.nn; i++) {
        struct node *n = &pl.n[i];
        if (n->frozen) {
            if (!streq_ptr(kobj_annotation(n->obj, REM_ANN_WAITING), n->frozen)) {
                set_ann(n, REM_ANN_WAITING, n->frozen);
                event_out(&pl, n->name, NULL, true, REASON_REFUSED,
                          "remediation refused, node left as it is: %s", n->frozen);
            }
        }
        node_patch_out(&pl, n);
        node_report(&pl, n);
        out->counts[n->state]++;
    }
    pool_reports(&pl);
    condition(&pl);
    /* the counts add up to the nodes */
    int sum = 0;
    for (int s = 0; s < REM_N_STATES; s++)
        sum += out->counts[s];
    assert(sum == (int)pl.nn);
    (void)sum;
    plan_free_inner(&pl);
    *ret = steal_ptr(&out);
    return 0;
}
