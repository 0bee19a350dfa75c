/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The upgrade planner (upgrade.h): one pass over the driver-managed nodes, NVIDIA's state
 * machine per node, then gpuop's gates on the nodes that wait to start. A node moves through
 * as many states as a pass can decide without waiting on the cluster, in one patch, with an
 * Event per state, so NVIDIA's Event trail is complete and the API writes stay few.
 */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "upg-internal.h"
#include "yamlcfg.h"

#define MAX_RESTARTS 10 /* driver container restarts before upgrade-failed (NVIDIA's) */

struct node {
    const json_t *obj;
    const char *name;
    enum upg_state state, start_state;
    bool bad_label; /* a state label gpuop cannot read: left alone */
    bool skip, ready, unsched;
    long long gpus;
    const json_t *driver; /* its driver pod, or NULL */
    int set;              /* index in in->sets, -1 */
    bool in_sync, drv_ready, drv_terminating;
    long long drv_restarts;
    int validator; /* -1 none, 0 not ready, 1 ready */
    json_t *vpods; /* its validator pods (borrowed objects), for the revalidation */
    bool managed;
    int pool;              /* index in pools, -1 default */
    char *frozen;          /* this node is not touched: why */
    json_t *labels, *anns; /* merge patch parts (NULL until used) */
    int unsched_set;       /* -1 unchanged, 0 uncordon, 1 cordon */
    bool started;
};

struct pool {
    struct upg_pool p;
    bool valid;
    char *error;
    const struct upg_tz *tz; /* its time zone (in->zones'), NULL: UTC */
    const char *target;      /* the revision its nodes' driver set runs */
    const char *version;
    char *halted; /* why */
    int64_t next_window;
    bool window_open;
    long long gpus_total, gpus_ready, floor;
    int total, in_progress, unavailable, started;
    bool canary_done;
};

struct planner {
    const struct upg_input *in;
    struct node *n;
    size_t nn;
    struct pool *pools;
    size_t npools;    /* the last is the default pool */
    json_t *pdb_used; /* "ns/name" -> evictions planned this pass */
    /* managed nodes, and those unavailable and in flight, across pools (NVIDIA's limits) */
    int g_total, g_unavail, g_progress;
    struct upg_plan *out;
    /* the node patches' label and annotation maps, equal ones held once (on a fresh install
     * every node's is upgrade-done since the pass's time): read-only once in a patch */
    json_t *intern;
};

/* ---- the plan's lists ----------------------------------------------------------------------- */

#define PUSH(arr, n) (*((arr) = xrealloc((arr), ((n) + 1) * sizeof(*(arr))), &(arr)[(n)++]))

static void add_pod_action(struct upg_pod_ref **list, size_t *n, const json_t *pod,
                           const char *node)
{
    struct upg_pod_ref *a = &PUSH(*list, *n);
    *a = (struct upg_pod_ref){xstrdup(kobj_namespace(upg_pod_obj(pod)) ?: ""),
                              xstrdup(upg_pod_name(pod) ?: ""), xstrdup(node)};
}

static void pod_ref_done(struct upg_pod_ref *a)
{
    free(a->ns);
    free(a->name);
    free(a->node);
}

static void event_done(struct upg_event *ev)
{
    free(ev->name);
    free(ev->pool);
    free(ev->revision);
    free(ev->message);
}

/* Appends an Event unless the log of those posted holds it back (upgrade.h). */
static void emit(struct planner *pl, struct upg_event ev)
{
    if (upg_event_log_holds(pl->in->posted, &ev, pl->in->now_s)) {
        pl->out->events_held++;
        event_done(&ev);
        return;
    }
    PUSH(pl->out->events, pl->out->n_events) = ev;
}

/* ---- reading objects ------------------------------------------------------------------------ */

static long long pod_restarts(const json_t *pod, bool *ret_unready)
{
    long long max = 0;
    *ret_unready = false;
    const char *lists[] = {"status.initContainerStatuses", "status.containerStatuses"};
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *cs;
        json_array_foreach (kobj_path(upg_pod_obj(pod), lists[l]), i, cs) {
            long long rc = json_integer_value(json_object_get(cs, "restartCount"));
            if (!json_is_true(json_object_get(cs, "ready")) && rc > max) {
                max = rc;
                *ret_unready = true;
            }
        }
    }
    return max;
}

static long long pod_restarts_total(const json_t *pod)
{
    long long t = 0;
    size_t i;
    json_t *cs;
    json_array_foreach (kobj_path(upg_pod_obj(pod), "status.containerStatuses"), i, cs)
        t += json_integer_value(json_object_get(cs, "restartCount"));
    return t;
}

static bool is_gpu_resource(const char *k)
{
    return strncmp(k, "nvidia.com/gpu", 14) == 0 || strncmp(k, "nvidia.com/mig-", 15) == 0;
}

static long long quantity(const json_t *q)
{
    int64_t m;
    if (json_is_string(q) && kobj_quantity_milli(json_string_value(q), &m) == 0 && m > 0)
        return m / 1000;
    return 0;
}

/* GPUs (and MIG devices) the node has but does not offer: those its device plugin reports
 * unhealthy, which it does on a critical XID (NVIDIA's health policy: application XIDs such as
 * 13, 31 and 43 leave the GPU healthy) or a double-bit ECC error. The kubelet counts them in
 * status.capacity and leaves them out of status.allocatable. */
static long long node_unhealthy_gpus(const json_t *node, long long *ret_total)
{
    const json_t *cap = kobj_path(node, "status.capacity");
    const json_t *alloc = kobj_path(node, "status.allocatable");
    long long bad = 0, total = 0;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)cap, k, v) {
        if (!is_gpu_resource(k))
            continue;
        long long c = quantity(v), a = quantity(json_object_get(alloc, k));
        total += c;
        if (c > a)
            bad += c - a;
    }
    *ret_total = total;
    return bad;
}

static const json_t *owner_of_kind(const json_t *obj, const char *kind)
{
    size_t i;
    json_t *o;
    json_array_foreach (kobj_path(obj, "metadata.ownerReferences"), i, o) {
        if (streq_ptr(kobj_str(o, "kind"), kind))
            return o;
    }
    return NULL;
}

static bool res_is_gpu(const json_t *res)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)res, k, v) {
        if (is_gpu_resource(k))
            return true;
    }
    return false;
}

bool upg_pod_is_gpu(const json_t *pod)
{
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(upg_pod_obj(pod), "spec.containers"), i, c) {
        if (res_is_gpu(kobj_path(c, "resources.limits")) ||
            res_is_gpu(kobj_path(c, "resources.requests")))
            return true;
    }
    return false;
}

static bool pod_has_empty_dir(const json_t *pod)
{
    size_t i;
    json_t *v;
    json_array_foreach (kobj_path(upg_pod_obj(pod), "spec.volumes"), i, v) {
        if (json_object_get(v, "emptyDir"))
            return true;
    }
    return false;
}

/* ---- the patch of a node -------------------------------------------------------------------- */

static const char *cur_ann(const struct node *n, const char *k)
{
    return kobj_ann_staged(n->obj, n->anns, k);
}

static void set_ann(struct node *n, const char *k, const char *v)
{
    kobj_ann_stage(n->obj, &n->anns, k, v);
}

static void set_ann_time(struct node *n, const char *k, int64_t t)
{
    kobj_ann_stage_i64(n->obj, &n->anns, k, t);
}

static int64_t ann_time(const struct node *n, const char *k, int64_t dflt)
{
    return kobj_ann_staged_i64(n->obj, n->anns, k, 1, dflt);
}

static bool cordoned(const struct node *n)
{
    return n->unsched_set >= 0 ? n->unsched_set == 1 : n->unsched;
}

static const char *pool_name(const struct planner *pl, const struct node *n);
static const char *pool_target(const struct planner *pl, const struct node *n);

/* An Event about node n. */
static void event(struct planner *pl, const struct node *n, bool warning, enum upg_cause cause,
                  enum upg_gate gate, const char *fmt, ...) GPUOP_PRINTF(6, 7);
static void event(struct planner *pl, const struct node *n, bool warning, enum upg_cause cause,
                  enum upg_gate gate, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *pool = pool_name(pl, n), *rev = pool_target(pl, n);
    emit(pl, (struct upg_event){.object = UPG_OBJ_NODE,
                                .name = xstrdup(n->name),
                                .pool = pool ? xstrdup(pool) : NULL,
                                .revision = rev ? xstrdup(rev) : NULL,
                                .warning = warning,
                                .reason = UPG_EVENT_REASON,
                                .cause = cause,
                                .gate = gate,
                                .message = xstrdup(msg)});
}

static void set_state(struct planner *pl, struct node *n, enum upg_state s, const char *why)
{
    if (n->state == s)
        return;
    if (!n->labels)
        n->labels = json_object();
    json_object_set_new(n->labels, UPG_LABEL_STATE,
                        s == UPG_UNKNOWN ? json_null() : json_string(upg_state_name(s)));
    n->state = s;
    set_ann_time(n, UPG_ANN_SINCE, pl->in->now_s);
    if (s == UPG_FAILED) {
        if (n->set >= 0)
            set_ann(n, UPG_ANN_TARGET, pl->in->sets[n->set].revision);
        set_ann(n, UPG_ANN_FAILED_REASON, why);
        event(pl, n, true, UPG_CAUSE_STATE, UPG_GATE_NONE,
              "Successfully updated node state label to [%s]: %s", upg_state_name(s),
              why ? why : "");
    } else {
        set_ann(n, UPG_ANN_FAILED_REASON, NULL);
        event(pl, n, false, UPG_CAUSE_STATE, UPG_GATE_NONE,
              "Successfully updated node state label to [%s]", upg_state_name(s));
    }
}

/* ---- the state machine ---------------------------------------------------------------------- */

static int64_t since(const struct node *n, int64_t now)
{
    return ann_time(n, UPG_ANN_SINCE, now);
}

static void want_requeue(struct planner *pl, int64_t at)
{
    int64_t d = at - pl->in->now_s;
    if (d < 1)
        d = 1;
    if (pl->out->requeue_s == 0 || d < pl->out->requeue_s)
        pl->out->requeue_s = d;
}

static bool timed_out(struct planner *pl, const struct node *n, int64_t start, int64_t timeout)
{
    if (timeout <= 0)
        return false;
    (void)n;
    if (pl->in->now_s >= start + timeout)
        return true;
    want_requeue(pl, start + timeout);
    return false;
}

enum evict_kind { EVICT_GPU, EVICT_DRAIN };

/*
 * Evicts what must leave the node: 1 when nothing is left, 0 while pods are still going, -1 when
 * it cannot finish (a pod that may not be evicted under the policy); *ret_why says what holds.
 */
static bool pods_listed(struct planner *pl, const struct node *n)
{
    if (!pl->in->pods_listed || json_object_get(pl->in->pods_listed, n->name))
        return true;
    want_requeue(pl, pl->in->now_s + 1);
    return false;
}

static int evict_pods(struct planner *pl, struct node *n, enum evict_kind kind, char *why,
                      size_t why_len)
{
    const struct upg_policy *po = pl->in->policy;
    int left = 0;
    why[0] = '\0';
    if (!pods_listed(pl, n)) {
        snprintf(why, why_len, "the node's pods are not listed yet");
        return 0;
    }
    size_t i;
    json_t *pod;
    json_array_foreach ((json_t *)pl->in->pods, i, pod) {
        if (!streq_ptr(upg_pod_node(pod), n->name) || upg_pod_finished(pod))
            continue;
        const json_t *po_obj = upg_pod_obj(pod);
        const char *pns = kobj_namespace(po_obj), *pname = upg_pod_name(pod);
        if (streq_ptr(kobj_label(po_obj, UPG_LABEL_DRAIN_SKIP), "true"))
            continue;
        if (kind == EVICT_GPU) {
            const char *ph = kobj_path_str(po_obj, "status.phase");
            if (!upg_pod_is_gpu(pod) || !(streq_ptr(ph, "Running") || streq_ptr(ph, "Pending")))
                continue;
        } else {
            if (upg_pod_daemon(pod))
                continue;
            bool m = true;
            struct err se = {0};
            if (po->drain_selector &&
                kobj_selector_match(po->drain_selector, kobj_labels(po_obj), &m, &se) == 0 && !m)
                continue;
        }
        left++;
        if (upg_pod_deletion(pod)) {
            if (!why[0])
                snprintf(why, why_len, "pod %s/%s is terminating", pns, pname);
            continue;
        }
        bool empty_ok = kind == EVICT_GPU ? po->del_empty_dir : po->drain_empty_dir;
        bool force = kind == EVICT_GPU ? po->del_force : po->drain_force;
        if (pod_has_empty_dir(pod) && !empty_ok) {
            snprintf(why, why_len, "pod %s/%s uses emptyDir and deleteEmptyDir is false", pns,
                     pname);
            return -1;
        }
        if (!json_array_size(kobj_path(po_obj, "metadata.ownerReferences")) && !force) {
            snprintf(why, why_len, "pod %s/%s has no controller and force is false", pns, pname);
            return -1;
        }
        const char *pdb = NULL;
        if (!upg_pdb_allows(pl->in->pdbs, pl->pdb_used, pod, &pdb)) {
            snprintf(why, why_len, "pod %s/%s: PodDisruptionBudget %s allows no disruption", pns,
                     pname, pdb);
            continue;
        }
        add_pod_action(&pl->out->evictions, &pl->out->n_evictions, pod, n->name);
        if (!why[0])
            snprintf(why, why_len, "evicting pod %s/%s", pns, pname);
    }
    return left == 0 ? 1 : 0;
}

/* Did validator pod `v` start before the node's driver pod? Then it validated an earlier
 * driver: the new one is not validated by it. Both times are the API server's, so no clock
 * skew enters (RFC 3339 UTC compares as text). */
static bool validator_stale(const struct node *n, const json_t *v)
{
    const char *vt = upg_pod_created(v);
    const char *dt = n->driver ? upg_pod_created(n->driver) : NULL;
    return vt && dt && strcmp(vt, dt) < 0;
}

/* A Ready validator that started with (or after) the driver pod now running. */
static bool validator_ok(struct planner *pl, const struct node *n)
{
    if (!pl->in->validation_enabled)
        return true;
    size_t i;
    json_t *v;
    json_array_foreach (n->vpods, i, v) {
        if (upg_pod_ready(v) && !upg_pod_deletion(v) && !validator_stale(n, v))
            return true;
    }
    return false;
}

/* The new driver is up: the node's validators that ran with the old one go, so that the
 * DaemonSet's new one validates the driver now loaded (driver, toolkit, CUDA, device plugin). */
static void revalidate(struct planner *pl, struct node *n)
{
    if (!pl->in->validation_enabled)
        return;
    size_t i;
    json_t *v;
    json_array_foreach (n->vpods, i, v) {
        if (!upg_pod_deletion(v) && validator_stale(n, v))
            add_pod_action(&pl->out->deletions, &pl->out->n_deletions, v, n->name);
    }
}

/* Each step_* below is one state of NVIDIA's machine for an in-flight node: it returns the next
 * state, or the same one to wait; `why` says what a failure (or a wait) is about. */

/* Cordons the node (unless it already is: whoever wrote the state cordoned it and died before
 * the next one; whether it was cordoned before the upgrade was recorded at its start). */
static enum upg_state step_cordon(struct node *n)
{
    if (!cordoned(n)) {
        n->unsched_set = 1;
        set_ann(n, UPG_ANN_CORDONED, "true");
    }
    return UPG_WAIT_JOBS;
}

/* Waits for the pods waitForCompletion selects to finish, or its timeout. */
static enum upg_state step_wait_jobs(struct planner *pl, struct node *n)
{
    const struct upg_policy *po = pl->in->policy;
    int64_t now = pl->in->now_s;
    if (!po->wait_selector)
        return UPG_POD_DELETION;
    int64_t start = ann_time(n, UPG_ANN_WAIT_START, 0);
    if (!start) {
        start = now;
        set_ann_time(n, UPG_ANN_WAIT_START, now);
    }
    size_t i;
    json_t *pod;
    bool busy = !pods_listed(pl, n);
    json_array_foreach ((json_t *)pl->in->pods, i, pod) {
        bool m = false;
        struct err se = {0};
        if (streq_ptr(upg_pod_node(pod), n->name) && !upg_pod_finished(pod) &&
            kobj_selector_match(po->wait_selector, kobj_labels(upg_pod_obj(pod)), &m, &se) == 0 &&
            m)
            busy = true;
    }
    if (busy && !timed_out(pl, n, start, po->wait_timeout_s))
        return UPG_WAIT_JOBS;
    set_ann(n, UPG_ANN_WAIT_START, NULL);
    return UPG_POD_DELETION;
}

/* Evicts the node's GPU pods; drain-required only when the drain is on (NVIDIA's). */
static enum upg_state step_pod_deletion(struct planner *pl, struct node *n, char *why,
                                        size_t why_len)
{
    const struct upg_policy *po = pl->in->policy;
    int r = evict_pods(pl, n, EVICT_GPU, why, why_len);
    if (r > 0)
        return po->drain_enable ? UPG_DRAIN : UPG_POD_RESTART;
    if (r < 0 || timed_out(pl, n, since(n, pl->in->now_s), po->del_timeout_s)) {
        if (r == 0) {
            size_t l = strlen(why);
            snprintf(why + l, why_len - l, "%spod deletion timed out after %llds", l ? "; " : "",
                     (long long)po->del_timeout_s);
        }
        return po->drain_enable ? UPG_DRAIN : UPG_FAILED;
    }
    return UPG_POD_DELETION;
}

/* Drains the node as the policy says, or fails at its timeout. */
static enum upg_state step_drain(struct planner *pl, struct node *n, char *why, size_t why_len)
{
    const struct upg_policy *po = pl->in->policy;
    if (!po->drain_enable)
        return UPG_POD_RESTART;
    int r = evict_pods(pl, n, EVICT_DRAIN, why, why_len);
    if (r > 0)
        return UPG_POD_RESTART;
    if (r < 0)
        return UPG_FAILED;
    if (timed_out(pl, n, since(n, pl->in->now_s), po->drain_timeout_s)) {
        size_t l = strlen(why);
        snprintf(why + l, why_len - l, "%sdrain timed out after %llds", l ? "; " : "",
                 (long long)po->drain_timeout_s);
        return UPG_FAILED;
    }
    return UPG_DRAIN;
}

/* Replaces the out-of-date driver pod; its replacement up, validation is next. */
static enum upg_state step_pod_restart(struct planner *pl, struct node *n, char *why,
                                       size_t why_len)
{
    /* a driver waiting for a safe load: the node is empty now, let it load */
    if (cur_ann(n, UPG_ANN_SAFE_LOAD))
        set_ann(n, UPG_ANN_SAFE_LOAD, NULL);
    if (!n->driver)
        return UPG_POD_RESTART; /* the DaemonSet has not made the new pod yet */
    if (!n->in_sync) {
        if (!n->drv_terminating)
            add_pod_action(&pl->out->deletions, &pl->out->n_deletions, n->driver, n->name);
        n->drv_terminating = true;
        return UPG_POD_RESTART;
    }
    if (n->drv_ready) {
        /* validation-required, next in this pass, replaces the stale validators */
        set_ann_time(n, UPG_ANN_VALID_START, pl->in->now_s);
        return UPG_VALIDATION;
    }
    bool unready;
    long long rc = pod_restarts(n->driver, &unready);
    if (unready && rc > MAX_RESTARTS) {
        snprintf(why, why_len, "driver pod %s restarted %lld times", upg_pod_name(n->driver), rc);
        return UPG_FAILED;
    }
    return UPG_POD_RESTART;
}

/* Waits for a validator that ran with the new driver, or fails at the timeout. */
static enum upg_state step_validation(struct planner *pl, struct node *n, char *why, size_t why_len)
{
    const struct upg_policy *po = pl->in->policy;
    if (validator_ok(pl, n)) {
        set_ann(n, UPG_ANN_VALID_START, NULL);
        return UPG_UNCORDON;
    }
    /* every pass, not only on entry: a validator that ran with the old driver may be left (an
     * operator killed between the state and the deletion, a deletion that failed, a DaemonSet
     * that recreated it before the driver pod) and would hold the node here until the timeout */
    revalidate(pl, n);
    int64_t start = ann_time(n, UPG_ANN_VALID_START, 0);
    if (!start) {
        start = pl->in->now_s;
        set_ann_time(n, UPG_ANN_VALID_START, start);
    }
    if (timed_out(pl, n, start, po->validation_timeout_s)) {
        snprintf(why, why_len, "validation did not pass within %llds",
                 (long long)po->validation_timeout_s);
        set_ann(n, UPG_ANN_VALID_START, NULL);
        return UPG_FAILED;
    }
    return UPG_VALIDATION;
}

/* Uncordons the node (unless it was cordoned before the upgrade) and clears the attempt. */
static enum upg_state step_uncordon(struct planner *pl, struct node *n)
{
    if (cur_ann(n, UPG_ANN_INITIAL_UNSCH))
        set_ann(n, UPG_ANN_INITIAL_UNSCH, NULL); /* it was cordoned before: it stays so */
    else if (cordoned(n))
        n->unsched_set = 0;
    set_ann(n, UPG_ANN_CORDONED, NULL);
    set_ann_time(n, UPG_ANN_DONE_AT, pl->in->now_s);
    set_ann(n, UPG_ANN_NODE_APPROVED, NULL);
    set_ann(n, UPG_ANN_WAITING, NULL);
    set_ann(n, UPG_ANN_TARGET, NULL);
    return UPG_DONE;
}

/* Re-examined every pass: a driver that became healthy ends the failure, once a validator newer
 * than it passes (an older one is replaced). */
static enum upg_state step_failed(struct planner *pl, struct node *n)
{
    if (n->driver && n->in_sync && n->drv_ready) {
        if (validator_ok(pl, n))
            return UPG_UNCORDON;
        revalidate(pl, n);
    }
    return UPG_FAILED;
}

static enum upg_state step(struct planner *pl, struct node *n, char *why, size_t why_len)
{
    why[0] = '\0';
    switch (n->state) {
    case UPG_CORDON:
        return step_cordon(n);
    case UPG_WAIT_JOBS:
        return step_wait_jobs(pl, n);
    case UPG_POD_DELETION:
        return step_pod_deletion(pl, n, why, why_len);
    case UPG_DRAIN:
        return step_drain(pl, n, why, why_len);
    case UPG_POD_RESTART:
        return step_pod_restart(pl, n, why, why_len);
    case UPG_VALIDATION:
        return step_validation(pl, n, why, why_len);
    case UPG_UNCORDON:
        return step_uncordon(pl, n);
    case UPG_FAILED:
        return step_failed(pl, n);
    default:
        return n->state;
    }
}

static void run_machine(struct planner *pl, struct node *n)
{
    char why[512];
    for (int guard = 0; guard < UPG_N_STATES + 2; guard++) {
        enum upg_state next = step(pl, n, why, sizeof(why));
        if (next == n->state)
            return;
        set_state(pl, n, next, why[0] ? why : NULL);
        if (next == UPG_FAILED || next == UPG_DONE)
            return;
    }
}

/* ---- pools ---------------------------------------------------------------------------------- */

static void pools_load(struct planner *pl)
{
    size_t n = json_array_size(pl->in->pools);
    pl->pools = xcalloc(n + 1, sizeof(*pl->pools));
    for (size_t i = 0; i < n; i++) {
        struct pool *p = &pl->pools[i];
        const json_t *obj = json_array_get(pl->in->pools, i);
        struct err e = {0};
        if (upg_pool_parse(obj, &p->p, &e) < 0) {
            p->p.name = xstrdup(kobj_name(obj) ? kobj_name(obj) : "?");
            p->error = xstrdup(err_msg(&e));
            continue;
        }
        p->valid = true;
        if (p->p.time_zone) {
            const char *why = NULL;
            p->tz = upg_zones_get(pl->in->zones, p->p.time_zone, &why);
            if (!p->tz) {
                p->valid = false;
                p->error = xasprintf("DriverUpgradePool %s: spec.timeZone: %s", p->p.name, why);
                continue;
            }
        }
        if (p->p.nvidia_driver) {
            const json_t *nvd = NULL;
            size_t k;
            json_t *d;
            json_array_foreach ((json_t *)pl->in->nvidia_drivers, k, d) {
                if (streq_ptr(kobj_name(d), p->p.nvidia_driver))
                    nvd = d;
            }
            if (!nvd) {
                p->valid = false;
                p->error = xasprintf("DriverUpgradePool %s: spec.nvidiaDriver: NVIDIADriver %s "
                                     "does not exist",
                                     p->p.name, p->p.nvidia_driver);
                continue;
            }
            /* it selects the nodes whose driver its DaemonSets run (upg_pool_selects): the
             * default NVIDIADriver has no selector, and a node two select is owned by neither */
        }
    }
    pl->pools[n].p.name = xstrdup("default");
    pl->pools[n].p.max_parallel = -1;
    pl->pools[n].valid = true;
    pl->npools = n + 1;
}

static void assign_pool(struct planner *pl, struct node *n)
{
    n->pool = (int)pl->npools - 1;
    int found = -1;
    for (size_t i = 0; i + 1 < pl->npools; i++) {
        struct pool *p = &pl->pools[i];
        /* a pool that does not parse selects nothing it can be sure of: with a selector it
         * still claims its nodes (and freezes them) */
        if (p->valid && !upg_pool_selects(&p->p, n->obj))
            continue;
        const json_t *sel = kobj_path(json_array_get(pl->in->pools, i), "spec.nodeSelector");
        if (!p->valid && (!json_is_object(sel) || !kobj_labels_match(sel, kobj_labels(n->obj))))
            continue;
        if (found >= 0) {
            free(n->frozen);
            n->frozen = xasprintf("selected by DriverUpgradePools %s and %s",
                                  pl->pools[found].p.name, p->p.name);
            return;
        }
        found = (int)i;
    }
    if (found >= 0)
        n->pool = found;
    if (!pl->pools[n->pool].valid && !n->frozen)
        n->frozen = xasprintf("%s", pl->pools[n->pool].error);
}

/* Is node n one of pool p's canaries for its target? Marked for it, chosen by the selector, else
 * the first canary_count by name among those the rollout moves (*chosen counts them). */
static bool canary_pick(struct pool *p, struct node *n, int *chosen)
{
    bool marked = streq_ptr(cur_ann(n, UPG_ANN_CANARY), p->target);
    bool needs = n->state == UPG_REQUIRED || (n->driver && !n->in_sync);
    bool is = marked;
    if (!is && p->p.canary_selector && kobj_labels_match(p->p.canary_selector, kobj_labels(n->obj)))
        is = true;
    if (!is && !p->p.canary_selector && *chosen < p->p.canary_count && needs) {
        is = true;
        (*chosen)++;
    }
    if (!is || (!marked && !needs))
        return false; /* not one, or already on the target before the rollout: nothing to prove */
    if (!marked && n->state == UPG_REQUIRED)
        set_ann(n, UPG_ANN_CANARY, p->target); /* chosen: recorded before it starts */
    return true;
}

/* A canary's verdict: why it failed into `reason` (empty: not failed); false while it has not
 * passed yet (not done, or soaking). */
static bool canary_verdict(struct planner *pl, struct pool *p, struct node *n, char *reason,
                           size_t len)
{
    int64_t now = pl->in->now_s;
    reason[0] = '\0';
    if (n->state == UPG_FAILED) {
        snprintf(reason, len, "upgrade failed: %s", cur_ann(n, UPG_ANN_FAILED_REASON) ?: "unknown");
        return false;
    }
    if (n->state != UPG_DONE || !n->in_sync)
        return false;
    int64_t at = ann_time(n, UPG_ANN_DONE_AT, now);
    if (now >= at + p->p.canary_soak_s)
        return true; /* soaked */
    long long rs = n->driver ? pod_restarts_total(n->driver) : 0, bad, total;
    if (!n->drv_ready)
        snprintf(reason, len, "driver pod not ready during the soak");
    else if (rs > p->p.canary_max_restarts)
        snprintf(reason, len, "driver pod restarted %lld times during the soak", rs);
    else if (pl->in->validation_enabled && n->validator != 1)
        snprintf(reason, len, "validator not ready during the soak");
    else if ((bad = node_unhealthy_gpus(n->obj, &total)) > p->p.canary_max_unhealthy)
        snprintf(reason, len,
                 "%lld of %lld GPUs unhealthy during the soak (the device plugin's health check: "
                 "a critical XID or an ECC error)",
                 bad, total);
    else
        want_requeue(pl, at + p->p.canary_soak_s);
    return false;
}

/* Does the canary-failed annotation value cf name revision `target`? */
static bool failed_for(const char *cf, const char *target)
{
    size_t tl = strlen(target);
    return cf && strncmp(cf, target, tl) == 0 && cf[tl] == ' ';
}

/* Sets p->canary_done once every canary of its target passed its soak; a failed one is
 * recorded on the node (once per target) with an Event, which halts the pool (halt_check). */
static void canary_check(struct planner *pl, struct pool *p, int pi)
{
    if (!p->valid || (p->p.canary_count == 0 && !p->p.canary_selector) || !p->target ||
        streq_ptr(p->p.resumed_revision, p->target)) {
        p->canary_done = true;
        return;
    }
    int chosen = 0;
    for (size_t i = 0; i < pl->nn; i++)
        chosen += pl->n[i].pool == pi && pl->n[i].managed && !pl->n[i].frozen &&
                  streq_ptr(cur_ann(&pl->n[i], UPG_ANN_CANARY), p->target);
    bool done = true;
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        if (n->pool != pi || !n->managed || n->frozen || !canary_pick(p, n, &chosen))
            continue;
        char reason[512];
        done &= canary_verdict(pl, p, n, reason, sizeof(reason));
        if (reason[0] && !failed_for(cur_ann(n, UPG_ANN_CANARY_FAILED), p->target)) {
            _cleanup_free_ char *v = xasprintf("%s %s", p->target, reason);
            set_ann(n, UPG_ANN_CANARY_FAILED, v);
            event(pl, n, true, UPG_CAUSE_CANARY_FAILED, UPG_GATE_NONE,
                  "canary for revision %s failed: %s; pool %s halted", p->target, reason,
                  p->p.name);
        }
    }
    p->canary_done = done;
}

/* A pool whose canary failed for its target is halted, until someone resumes that revision. */
static void halt_check(struct planner *pl, struct pool *p, int pi)
{
    if (!p->target || streq_ptr(p->p.resumed_revision, p->target))
        return;
    size_t tl = strlen(p->target);
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        const char *cf = cur_ann(n, UPG_ANN_CANARY_FAILED);
        if (n->pool != pi || !failed_for(cf, p->target))
            continue;
        free(p->halted);
        p->halted = xasprintf("canary node %s: %s", n->name, cf + tl + 1);
        return;
    }
}

/* ---- gating the starts ---------------------------------------------------------------------- */

/* Records why a needed start waits (NULL: it does not); an Event when that changes. */
static void set_waiting(struct planner *pl, struct node *n, enum upg_gate g, const char *why,
                        bool warn)
{
    if (streq_ptr(cur_ann(n, UPG_ANN_WAITING), why))
        return;
    set_ann(n, UPG_ANN_WAITING, why);
    if (why)
        event(pl, n, warn, UPG_CAUSE_WAITING, g, "upgrade waits: %s", why);
}

/* The compatibility matrix's gate: NULL when the node's driver version may go on it. */
static char *gate_matrix(struct planner *pl, struct node *n, struct pool *p)
{
    const char *version = n->set >= 0 ? pl->in->sets[n->set].version : p->version;
    const char *os_id = kobj_label(n->obj, "feature.node.kubernetes.io/system-os_release.ID");
    const char *os_ver =
        kobj_label(n->obj, "feature.node.kubernetes.io/system-os_release.VERSION_ID");
    _cleanup_free_ char *os = os_id && os_ver ? xasprintf("%s%s", os_id, os_ver) : NULL;
    _cleanup_free_ char *reason = NULL;
    if (!version ||
        upg_matrix_allows(pl->in->matrix, version, kobj_label(n->obj, "nvidia.com/gpu.family"),
                          kobj_path_str(n->obj, "status.nodeInfo.kernelVersion"), os, p->p.min_cuda,
                          &reason))
        return NULL;
    return xasprintf("incompatible: %s", reason);
}

/* NVIDIA's slots (maxParallelUpgrades, maxUnavailable), then the pool's own limits: may one more
 * node start? `adds_unavail`: the start makes a node unavailable that counts as available. */
static bool slot_free(struct planner *pl, struct pool *p, bool adds_unavail, long long g_max)
{
    const struct upg_policy *po = pl->in->policy;
    if (po->max_parallel > 0 && pl->g_progress >= po->max_parallel)
        return false;
    if (adds_unavail && pl->g_unavail >= g_max)
        return false;
    if (p->p.max_parallel > 0 && p->in_progress >= p->p.max_parallel)
        return false;
    if (p->p.max_unavailable && adds_unavail &&
        p->unavailable >= upg_limit(p->p.max_unavailable, p->total))
        return false;
    return true;
}

/* The gates in order: UPG_GATE_NONE when the node may start, else which holds it and why
 * (*ret_why, new; *ret_warn: a refusal, not a wait). */
static enum upg_gate gate(struct planner *pl, struct node *n, struct pool *p, long long g_max,
                          char **ret_why, bool *ret_warn)
{
    *ret_warn = false;
    *ret_why = NULL;
    if ((*ret_why = gate_matrix(pl, n, p))) {
        *ret_warn = true;
        return UPG_GATE_INCOMPATIBLE;
    }
    if (p->halted) {
        *ret_warn = true;
        *ret_why = xasprintf("rollout halted: %s", p->halted);
        return UPG_GATE_HALTED;
    }
    for (size_t i = 0; i < pl->in->n_holds; i++) {
        if (streq_ptr(pl->in->holds[i].pool, p->p.name)) {
            *ret_why = xasprintf("remediation: %s", pl->in->holds[i].why ?: "pool holds");
            return UPG_GATE_REMEDIATION;
        }
    }
    bool node_ok = streq_ptr(cur_ann(n, UPG_ANN_NODE_APPROVED), "true");
    if (p->p.approval == UPG_APPROVAL_MANUAL && !node_ok &&
        !(p->target && streq_ptr(p->p.approved_revision, p->target))) {
        *ret_why = xasprintf("approval: annotate DriverUpgradePool %s %s=%s or the node %s=true",
                             p->p.name, UPG_ANN_POOL_APPROVED, p->target ? p->target : "?",
                             UPG_ANN_NODE_APPROVED);
        return UPG_GATE_APPROVAL;
    }
    if (!p->window_open) {
        char t[40] = "never";
        if (p->next_window)
            time_rfc3339((uint64_t)p->next_window * 1000, t, sizeof(t));
        *ret_why = xasprintf("maintenance window closed; opens %s", t);
        return UPG_GATE_WINDOW;
    }
    if (!p->canary_done && !streq_ptr(cur_ann(n, UPG_ANN_CANARY), p->target)) {
        *ret_why = xstrdup("canary: the pool's canary nodes upgrade and soak first");
        return UPG_GATE_CANARY;
    }
    bool counts_ready = n->ready && !n->unsched;
    if (p->floor > 0 && counts_ready && p->gpus_ready - n->gpus < p->floor) {
        *ret_why = xasprintf("capacity floor: %lld of %lld GPUs ready, floor %lld, node has %lld",
                             p->gpus_ready, p->gpus_total, p->floor, n->gpus);
        return UPG_GATE_FLOOR;
    }
    return slot_free(pl, p, counts_ready, g_max) ? UPG_GATE_NONE : UPG_GATE_SLOT;
}

/* Starts node n: it takes a slot (and its GPUs leave the pool's ready ones) and runs as far as
 * the machine goes this pass. */
static void start_node(struct planner *pl, struct node *n, struct pool *p)
{
    if (n->ready && !n->unsched) {
        pl->g_unavail++;
        p->unavailable++;
        p->gpus_ready -= n->gpus;
    }
    pl->g_progress++;
    p->in_progress++;
    p->started++;
    n->started = true;
    set_waiting(pl, n, UPG_GATE_NONE, NULL, false);
    /* cordoned by someone else before the upgrade (not by gpuop, as a failed node retried by
     * hand is): it stays cordoned at the end */
    if (n->unsched && !cur_ann(n, UPG_ANN_CORDONED))
        set_ann(n, UPG_ANN_INITIAL_UNSCH, "true");
    set_state(pl, n, UPG_CORDON, NULL);
    run_machine(pl, n);
}

/* ---- the pass ------------------------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct node *)a)->name, ((const struct node *)b)->name);
}

static void load_nodes(struct planner *pl)
{
    const struct upg_input *in = pl->in;
    size_t nn = json_array_size(in->nodes);
    pl->n = xcalloc(nn ? nn : 1, sizeof(*pl->n));
    size_t i;
    json_t *obj;
    json_array_foreach ((json_t *)in->nodes, i, obj) {
        if (!kobj_name(obj))
            continue;
        struct node *n = &pl->n[pl->nn++];
        n->obj = obj;
        n->name = kobj_name(obj);
        int st = upg_state_parse(kobj_label(obj, UPG_LABEL_STATE));
        n->bad_label = st < 0;
        n->state = n->start_state = st < 0 ? UPG_UNKNOWN : (enum upg_state)st;
        n->skip = streq_ptr(kobj_label(obj, UPG_LABEL_SKIP), "true");
        n->ready = upg_node_ready(obj);
        n->unsched = json_is_true(kobj_path(obj, "spec.unschedulable"));
        n->gpus = upg_node_gpus(obj);
        n->set = -1;
        n->validator = -1;
        n->unsched_set = -1;
    }
    qsort(pl->n, pl->nn, sizeof(*pl->n), cmp_name);
    json_array_foreach ((json_t *)in->pods, i, obj) {
        const char *nodename = upg_pod_node(obj);
        if (!nodename)
            continue;
        struct node key = {.name = nodename};
        struct node *n = bsearch(&key, pl->n, pl->nn, sizeof(*pl->n), cmp_name);
        if (!n)
            continue;
        const json_t *po = upg_pod_obj(obj);
        if (streq_ptr(kobj_label(po, "app"), UPG_VALIDATOR_APP)) {
            int v = upg_pod_ready(obj) && !upg_pod_deletion(obj) ? 1 : 0;
            if (v > n->validator)
                n->validator = v;
            if (!n->vpods)
                n->vpods = json_array();
            json_array_append(n->vpods, obj);
            continue;
        }
        const json_t *own = owner_of_kind(po, "DaemonSet");
        if (!own)
            continue;
        for (size_t s = 0; s < in->n_sets; s++) {
            if (!streq_ptr(kobj_str(own, "name"), in->sets[s].name) ||
                !streq_ptr(kobj_namespace(po), in->sets[s].ns))
                continue;
            bool sync = streq_ptr(kobj_label(po, "controller-revision-hash"), in->sets[s].revision);
            /* of two pods (the old one terminating), the one of the current revision counts */
            if (n->driver && n->in_sync && !sync)
                continue;
            n->driver = obj;
            n->set = (int)s;
            n->in_sync = sync;
            n->drv_ready = upg_pod_ready(obj) && !upg_pod_deletion(obj);
            n->drv_terminating = upg_pod_deletion(obj) != NULL;
            bool unready;
            n->drv_restarts = pod_restarts(obj, &unready);
        }
    }
    for (size_t k = 0; k < pl->nn; k++) {
        struct node *n = &pl->n[k];
        /* a node the driver DaemonSet is about to run on counts as one with a driver: its pod
         * will be of the current revision */
        bool due = !n->driver && json_object_get(in->driver_nodes, n->name);
        n->managed = !n->skip && !n->bad_label && (n->driver || due || n->state != UPG_UNKNOWN);
    }
}

static const char *pool_name(const struct planner *pl, const struct node *n)
{
    return pl->pools && n->managed ? pl->pools[n->pool].p.name : NULL;
}

/* The revision node n's rollout is for: its driver set's, else its pool's target. */
static const char *pool_target(const struct planner *pl, const struct node *n)
{
    if (n->set >= 0)
        return pl->in->sets[n->set].revision;
    return pl->pools && n->managed ? pl->pools[n->pool].target : NULL;
}

/* Node n's patch (its labels, annotations and cordon as the pass left them), if it changed. */
static void node_patch_out(struct planner *pl, struct node *n)
{
    if (!n->labels && !n->anns && n->unsched_set < 0)
        return;
    json_t *patch = json_object();
    json_t *meta = json_object();
    if (n->labels)
        json_object_set_new(meta, "labels", kobj_intern(pl->intern, json_incref(n->labels)));
    if (n->anns)
        json_object_set_new(meta, "annotations", kobj_intern(pl->intern, json_incref(n->anns)));
    /* the precondition: the plan holds for the node as read (upgrade.h, read-your-writes) */
    const char *rv = kobj_resource_version(n->obj);
    if (rv)
        json_object_set_new(meta, "resourceVersion", json_string(rv));
    if (json_object_size(meta))
        json_object_set_new(patch, "metadata", meta);
    else
        json_decref(meta);
    if (n->unsched_set >= 0)
        json_object_set_new(patch, "spec",
                            json_pack("{s:b}", "unschedulable", n->unsched_set == 1));
    PUSH(pl->out->patches, pl->out->n_patches) = (struct upg_node_patch){xstrdup(n->name), patch};
}

/* Pool p's report: its nodes' progress as the pass leaves them, its status and phase. */
static void pool_report(struct planner *pl, struct pool *p, int pi, const char *now)
{
    struct upg_pool_report *r = &PUSH(pl->out->pools, pl->out->n_pools);
    *r = (struct upg_pool_report){.name = xstrdup(p->p.name)};
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        if (n->pool != pi || !n->managed)
            continue;
        r->total++;
        if (n->state == UPG_DONE && n->in_sync)
            r->upgraded++;
        if (upg_state_in_flight(n->state))
            upg_notes_add(&r->in_progress, n->name, upg_state_name(n->state));
        if (n->state == UPG_FAILED)
            upg_notes_add(&r->failed, n->name, cur_ann(n, UPG_ANN_FAILED_REASON) ?: "unknown");
        if (n->state == UPG_REQUIRED)
            r->pending++;
        const char *w = n->frozen ? n->frozen : cur_ann(n, UPG_ANN_WAITING);
        if (w && (n->state == UPG_REQUIRED || n->frozen)) {
            /* bounded: a status is read by people and rewritten on every change */
            if (r->waiting.n < UPG_POOL_WAITING_MAX)
                upg_notes_add(&r->waiting, n->name, w);
            else
                r->waiting_more++;
        }
    }
    r->halted = p->halted ? xstrdup(p->halted) : NULL;
    r->error = p->error ? xstrdup(p->error) : NULL;
    r->target_revision = p->target ? xstrdup(p->target) : NULL;
    r->target_version = p->version ? xstrdup(p->version) : NULL;
    r->next_window_s = !p->window_open ? p->next_window : 0;
    /* the default pool (the last) has no object, nor status */
    const json_t *obj = (size_t)pi + 1 < pl->npools ? json_array_get(pl->in->pools, pi) : NULL;
    upg_report_pool(r, obj, now);
}

static void plan_free_inner(struct planner *pl)
{
    /* nothing changed a map once in a patch */
    assert(kobj_intern_check(pl->intern));
    json_decref(pl->intern);
    for (size_t i = 0; i < pl->nn; i++) {
        free(pl->n[i].frozen);
        json_decref(pl->n[i].vpods);
        json_decref(pl->n[i].labels);
        json_decref(pl->n[i].anns);
    }
    free(pl->n);
    for (size_t i = 0; i < pl->npools; i++) {
        upg_pool_done(&pl->pools[i].p);
        free(pl->pools[i].error);
        free(pl->pools[i].halted);
    }
    free(pl->pools);
    json_decref(pl->pdb_used);
}

void upg_plan_free(struct upg_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_patches; i++) {
        free(p->patches[i].node);
        json_decref(p->patches[i].patch);
    }
    free(p->patches);
    for (size_t i = 0; i < p->n_evictions; i++)
        pod_ref_done(&p->evictions[i]);
    free(p->evictions);
    for (size_t i = 0; i < p->n_deletions; i++)
        pod_ref_done(&p->deletions[i]);
    free(p->deletions);
    for (size_t i = 0; i < p->n_events; i++)
        event_done(&p->events[i]);
    free(p->events);
    for (size_t i = 0; i < p->n_pools; i++) {
        struct upg_pool_report *r = &p->pools[i];
        free(r->name);
        upg_notes_done(&r->in_progress);
        upg_notes_done(&r->failed);
        upg_notes_done(&r->waiting);
        free(r->halted);
        free(r->error);
        free(r->target_revision);
        free(r->target_version);
        json_decref(r->status);
    }
    free(p->pools);
    free(p->condition.message);
    free(p->error);
    free(p);
}

/* ---- the pass, phase by phase -----------------------------------------------------------------
 */

/* Bad input the whole plan depends on (the policy, the matrix): nothing is touched, the
 * ClusterPolicy's Event says why. */
static bool plan_frozen(struct planner *pl)
{
    const struct upg_input *in = pl->in;
    if (in->policy && (in->matrix || in->n_sets == 0))
        return false;
    struct upg_plan *out = pl->out;
    out->frozen = true;
    out->error = xstrdup(!in->policy ? (in->policy_error ?: "upgrade policy is invalid")
                                     : (in->matrix_error ?: "no compatibility matrix"));
    emit(pl, (struct upg_event){.object = UPG_OBJ_POLICY,
                                .warning = true,
                                .reason = UPG_EVENT_REASON,
                                .cause = UPG_CAUSE_INPUT_INVALID,
                                .message = xstrdup(out->error)});
    return true;
}

/* NVIDIA's: with autoUpgrade off the controller steps back and removes its state labels. */
static void plan_stand_down(struct planner *pl)
{
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        if (!n->skip && kobj_label(n->obj, UPG_LABEL_STATE)) {
            n->labels = json_pack("{s:n}", UPG_LABEL_STATE);
            node_patch_out(pl, n);
        }
    }
}

/* Each pool's target, GPUs and counts as the pass starts, and the cluster-wide ones. */
static void tally_pools(struct planner *pl)
{
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        if (!n->managed)
            continue;
        struct pool *p = &pl->pools[n->pool];
        pl->g_total++;
        p->total++;
        if (n->set >= 0 && !p->target) {
            p->target = pl->in->sets[n->set].revision;
            p->version = pl->in->sets[n->set].version;
        }
        /* the one budget's rule (upg-budget.c), which the remediation planner counts by too */
        struct upg_budget b = {0};
        upg_budget_add(&b, n->ready, n->unsched, n->state, n->gpus);
        p->gpus_total += b.gpus_total;
        p->gpus_ready += b.gpus_ready;
        p->unavailable += b.unavailable;
        pl->g_unavail += b.unavailable;
        p->in_progress += b.in_progress;
        pl->g_progress += b.in_progress;
    }
}

/* Each valid pool's window (and the pass that opens it) and capacity floor. */
static void pool_limits(struct planner *pl)
{
    for (size_t k = 0; k < pl->npools; k++) {
        struct pool *p = &pl->pools[k];
        p->window_open = true;
        if (!p->valid)
            continue;
        if (p->p.n_windows) {
            upg_window_state(p->p.windows, p->p.n_windows, p->tz, pl->in->now_s, &p->window_open,
                             &p->next_window);
            if (!p->window_open && p->next_window)
                want_requeue(pl, p->next_window);
        }
        if (p->p.capacity_floor)
            p->floor = kobj_int_or_percent_scaled(p->p.capacity_floor, p->gpus_total, true);
    }
}

/* Node n's step this pass: one that needs an upgrade (an out-of-date driver, a request) becomes
 * upgrade-required, one in flight goes through NVIDIA's machine as far as it can. */
static void advance_node(struct planner *pl, struct node *n)
{
    bool needs = (n->driver && !n->in_sync) || cur_ann(n, UPG_ANN_SAFE_LOAD) ||
                 streq_ptr(cur_ann(n, UPG_ANN_REQUESTED), "true");
    const char *target = n->set >= 0 ? pl->in->sets[n->set].revision : NULL;
    const char *tried = cur_ann(n, UPG_ANN_TARGET);
    if (n->state == UPG_FAILED && target && tried && !streq_ptr(tried, target)) {
        /* failed on another revision (a rollback, a newer fix): try the current one */
        set_ann(n, UPG_ANN_TARGET, target);
        set_state(pl, n, UPG_REQUIRED, NULL);
    } else if (n->state == UPG_REQUIRED && target && tried && !streq_ptr(tried, target) && !needs) {
        /* the revision it waited for was rolled back before it started */
        set_ann(n, UPG_ANN_TARGET, NULL);
        set_ann(n, UPG_ANN_WAITING, NULL);
        set_state(pl, n, UPG_DONE, NULL);
    } else if (n->state == UPG_UNKNOWN || n->state == UPG_DONE) {
        if (needs) {
            set_ann(n, UPG_ANN_REQUESTED, NULL);
            set_ann(n, UPG_ANN_TARGET, target);
            set_state(pl, n, UPG_REQUIRED, NULL);
        } else if (n->state == UPG_UNKNOWN) {
            set_state(pl, n, UPG_DONE, NULL);
        }
    } else if (n->state != UPG_REQUIRED) {
        run_machine(pl, n);
    }
}

/* The starts: canary nodes first, then by name; each through the gates, or waiting and why. */
static void plan_starts(struct planner *pl)
{
    long long g_max = upg_limit(pl->in->policy->max_unavailable, pl->g_total);
    int unavail0 = pl->g_unavail, progress0 = pl->g_progress;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < pl->nn; i++) {
            struct node *n = &pl->n[i];
            if (!n->managed || n->frozen || n->state != UPG_REQUIRED || n->started ||
                pl->in->n_sets == 0) /* no driver DaemonSet: nothing to upgrade to */
                continue;
            struct pool *p = &pl->pools[n->pool];
            bool canary = p->target && streq_ptr(cur_ann(n, UPG_ANN_CANARY), p->target);
            if ((pass == 0) != canary)
                continue;
            bool warn;
            _cleanup_free_ char *why = NULL;
            enum upg_gate g = gate(pl, n, p, g_max, &why, &warn);
            if (g == UPG_GATE_NONE)
                start_node(pl, n, p);
            else
                set_waiting(pl, n, g, why, warn); /* a slot (no why): NVIDIA's own pending */
        }
    }
    /* maxUnavailable and maxParallelUpgrades hold: no start went past them (nodes already down
     * or in flight may have been past them before the pass) */
    const struct upg_policy *po = pl->in->policy;
    assert(pl->g_unavail <= (unavail0 > g_max ? unavail0 : g_max));
    assert(po->max_parallel <= 0 ||
           pl->g_progress <= (progress0 > po->max_parallel ? progress0 : po->max_parallel));
    (void)po;
    (void)unavail0;
    (void)progress0;
}

/* What the pass leaves to report: frozen nodes' refusals, invalid pools, each pool's report,
 * the node patches and NVIDIA's counts. */
static void plan_outputs(struct planner *pl)
{
    struct upg_plan *out = pl->out;
    char now[40];
    time_rfc3339((uint64_t)pl->in->now_s * 1000, now, sizeof(now));
    /* Frozen nodes: the reason shows, nothing else changes. */
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        if (n->frozen && !streq_ptr(kobj_annotation(n->obj, UPG_ANN_WAITING), n->frozen))
            event(pl, n, true, UPG_CAUSE_NODE_REFUSED, UPG_GATE_NONE,
                  "upgrade refused, node left as it is: %s", n->frozen);
    }
    for (size_t k = 0; k < pl->npools; k++) {
        struct pool *p = &pl->pools[k];
        if (p->error)
            emit(pl, (struct upg_event){.object = UPG_OBJ_POOL,
                                        .name = xstrdup(p->p.name),
                                        .pool = xstrdup(p->p.name),
                                        .warning = true,
                                        .reason = UPG_EVENT_REASON,
                                        .cause = UPG_CAUSE_POOL_INVALID,
                                        .message = xstrdup(p->error)});
        pool_report(pl, p, (int)k, now);
    }
    int managed = 0;
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        if (n->managed && !n->frozen)
            node_patch_out(pl, n);
        if (!n->managed)
            continue;
        managed++;
        if (n->state == UPG_REQUIRED)
            out->counts.pending++;
        else if (n->state == UPG_DONE)
            out->counts.done++;
        else if (n->state == UPG_FAILED)
            out->counts.failed++;
        else if (upg_state_in_flight(n->state))
            out->counts.in_progress++;
        else
            assert(n->frozen); /* only a node left alone keeps no state */
    }
    /* a node is in one state: the counts add up to at most the managed nodes */
    assert(out->counts.pending >= 0 && out->counts.done >= 0 && out->counts.failed >= 0 &&
           out->counts.in_progress >= 0);
    assert(out->counts.pending + out->counts.done + out->counts.failed + out->counts.in_progress <=
           managed);
    const struct upg_policy *po = pl->in->policy;
    int avail = po->max_parallel > 0 ? po->max_parallel - out->counts.in_progress
                                     : pl->g_total - out->counts.in_progress;
    out->counts.available = avail < 0 ? 0 : avail;
}

int upg_plan(const struct upg_input *in, struct upg_plan **ret, struct err *e)
{
    if (!in || in->now_s <= 0)
        return err_set(e, -EINVAL, "upgrade plan: no time given");
    _cleanup_(upg_plan_freep) struct upg_plan *out = xcalloc(1, sizeof(*out));
    struct planner pl = {.in = in, .out = out};
    if (!plan_frozen(&pl)) {
        pl.pdb_used = json_object();
        pl.intern = json_object();
        load_nodes(&pl);
        if (!in->policy->auto_upgrade) {
            plan_stand_down(&pl);
        } else {
            pools_load(&pl);
            for (size_t i = 0; i < pl.nn; i++)
                if (pl.n[i].managed)
                    assign_pool(&pl, &pl.n[i]);
            tally_pools(&pl);
            pool_limits(&pl);
            /* NVIDIA's machine for nodes in flight, and the unknown/done ones that need an
             * upgrade; then gpuop's gates on those that wait to start */
            for (size_t i = 0; i < pl.nn; i++)
                if (pl.n[i].managed && !pl.n[i].frozen)
                    advance_node(&pl, &pl.n[i]);
            for (size_t k = 0; k < pl.npools; k++) {
                canary_check(&pl, &pl.pools[k], (int)k);
                halt_check(&pl, &pl.pools[k], (int)k);
            }
            plan_starts(&pl);
            plan_outputs(&pl);
        }
        plan_free_inner(&pl);
    }
    upg_report_condition(out, in->policy && in->policy->auto_upgrade);
    *ret = steal_ptr(&out);
    return 0;
}
