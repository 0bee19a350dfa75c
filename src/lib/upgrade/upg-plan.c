/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The upgrade planner (upgrade.h): one pass over the driver-managed nodes, NVIDIA's state
 * machine per node, then gpuop's gates on the nodes that wait to start. A node moves through
 * as many states as a pass can decide without waiting on the cluster, in one patch, with an
 * Event per state, so NVIDIA's Event trail is complete and the API writes stay few.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "upgrade.h"
#include "yamlcfg.h"

#define MAX_RESTARTS            10 /* driver container restarts before upgrade-failed (NVIDIA's) */
#define POOL_STATUS_MAX_WAITING 50 /* nodes named in a pool's status.waiting; then a count */

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
    const json_t *selector;  /* matchLabels (borrowed, or owner_sel) */
    const struct upg_tz *tz; /* its time zone (in->zones'), NULL: UTC */
    json_t *owner_sel;       /* a pool naming an NVIDIADriver: {owner label: its name} */
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
    struct upg_plan *out;
};

/* ---- reading objects ------------------------------------------------------------------------ */

static bool pod_ready(const json_t *pod)
{
    if (!streq_ptr(kobj_path_str(pod, "status.phase"), "Running"))
        return false;
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(pod, "status.conditions"), i, c) {
        if (streq_ptr(kobj_str(c, "type"), "Ready"))
            return streq_ptr(kobj_str(c, "status"), "True");
    }
    return false;
}

static long long pod_restarts(const json_t *pod, bool *ret_unready)
{
    long long max = 0;
    *ret_unready = false;
    const char *lists[] = {"status.initContainerStatuses", "status.containerStatuses"};
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *cs;
        json_array_foreach (kobj_path(pod, lists[l]), i, cs) {
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
    json_array_foreach (kobj_path(pod, "status.containerStatuses"), i, cs)
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
    json_array_foreach (kobj_path(pod, "spec.containers"), i, c) {
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
    json_array_foreach (kobj_path(pod, "spec.volumes"), i, v) {
        if (json_object_get(v, "emptyDir"))
            return true;
    }
    return false;
}

static bool pod_finished(const json_t *pod)
{
    const char *ph = kobj_path_str(pod, "status.phase");
    return streq_ptr(ph, "Succeeded") || streq_ptr(ph, "Failed");
}

static bool node_ready(const json_t *node)
{
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(node, "status.conditions"), i, c) {
        if (streq_ptr(kobj_str(c, "type"), "Ready"))
            return streq_ptr(kobj_str(c, "status"), "True");
    }
    return false;
}

static long long node_gpus(const json_t *node)
{
    const char *keys[] = {"status", "allocatable", "nvidia.com/gpu", NULL};
    json_t *q = kobj_keys(node, keys);
    int64_t m;
    if (json_is_string(q) && kobj_quantity_milli(json_string_value(q), &m) == 0)
        return m / 1000;
    const char *c = kobj_label(node, "nvidia.com/gpu.count");
    long long v;
    if (c && parse_i64(c, (int64_t *)&v) == 0 && v >= 0)
        return v;
    return 0;
}

/* ---- the patch of a node -------------------------------------------------------------------- */

static const char *cur_ann(const struct node *n, const char *k)
{
    if (n->anns && json_object_get(n->anns, k))
        return json_string_value(json_object_get(n->anns, k)); /* null: removed */
    return kobj_annotation(n->obj, k);
}

static void set_ann(struct node *n, const char *k, const char *v)
{
    if (streq_ptr(cur_ann(n, k), v))
        return;
    if (!n->anns)
        n->anns = json_object();
    json_object_set_new(n->anns, k, v ? json_string(v) : json_null());
}

static void set_ann_time(struct node *n, const char *k, int64_t t)
{
    char b[24];
    snprintf(b, sizeof(b), "%lld", (long long)t);
    set_ann(n, k, b);
}

static int64_t ann_time(const struct node *n, const char *k, int64_t dflt)
{
    const char *v = cur_ann(n, k);
    int64_t t;
    if (v && parse_i64(v, &t) == 0 && t > 0)
        return t;
    return dflt;
}

static bool cordoned(const struct node *n)
{
    return n->unsched_set >= 0 ? n->unsched_set == 1 : n->unsched;
}

static void event(struct planner *pl, const char *node, const char *type, const char *fmt, ...)
    GPUOP_PRINTF(4, 5);
static void event(struct planner *pl, const char *node, const char *type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_array_append_new(pl->out->events,
                          json_pack("{s:s,s:s,s:s,s:s}", "node", node, "type", type, "reason",
                                    UPG_EVENT_REASON, "message", msg));
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
        event(pl, n->name, "Warning", "Successfully updated node state label to [%s]: %s",
              upg_state_name(s), why ? why : "");
    } else {
        set_ann(n, UPG_ANN_FAILED_REASON, NULL);
        event(pl, n->name, "Normal", "Successfully updated node state label to [%s]",
              upg_state_name(s));
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

/* The PodDisruptionBudgets over a pod: may one more eviction go through this pass? Names the
 * one that refuses in *ret_pdb. */
static bool pdb_allows(struct planner *pl, const json_t *pod, const char **ret_pdb)
{
    size_t i;
    json_t *pdb;
    json_array_foreach ((json_t *)pl->in->pdbs, i, pdb) {
        if (!streq_ptr(kobj_namespace(pdb), kobj_namespace(pod)))
            continue;
        json_t *sel = kobj_path(pdb, "spec.selector.matchLabels");
        if (!json_is_object(sel) || json_object_size(sel) == 0 ||
            !kobj_labels_match(sel, kobj_labels(pod)))
            continue;
        _cleanup_free_ char *key = xasprintf("%s/%s", kobj_namespace(pdb), kobj_name(pdb));
        long long used = json_integer_value(json_object_get(pl->pdb_used, key));
        long long allowed = json_integer_value(kobj_path(pdb, "status.disruptionsAllowed"));
        if (allowed - used <= 0) {
            *ret_pdb = kobj_name(pdb);
            return false;
        }
    }
    /* Counted only once every budget over the pod allows it. */
    json_array_foreach ((json_t *)pl->in->pdbs, i, pdb) {
        json_t *sel = kobj_path(pdb, "spec.selector.matchLabels");
        if (!streq_ptr(kobj_namespace(pdb), kobj_namespace(pod)) || !json_is_object(sel) ||
            json_object_size(sel) == 0 || !kobj_labels_match(sel, kobj_labels(pod)))
            continue;
        _cleanup_free_ char *key = xasprintf("%s/%s", kobj_namespace(pdb), kobj_name(pdb));
        long long used = json_integer_value(json_object_get(pl->pdb_used, key));
        json_object_set_new(pl->pdb_used, key, json_integer(used + 1));
    }
    return true;
}

static void add_pod_action(json_t *list, const json_t *pod, const char *node)
{
    json_array_append_new(list, json_pack("{s:s,s:s,s:s}", "namespace", kobj_namespace(pod) ?: "",
                                          "name", kobj_name(pod) ?: "", "node", node));
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
        if (!streq_ptr(kobj_path_str(pod, "spec.nodeName"), n->name) || pod_finished(pod))
            continue;
        if (streq_ptr(kobj_label(pod, UPG_LABEL_DRAIN_SKIP), "true"))
            continue;
        if (kind == EVICT_GPU) {
            const char *ph = kobj_path_str(pod, "status.phase");
            if (!upg_pod_is_gpu(pod) || !(streq_ptr(ph, "Running") || streq_ptr(ph, "Pending")))
                continue;
        } else {
            if (owner_of_kind(pod, "DaemonSet") ||
                kobj_annotation(pod, "kubernetes.io/config.mirror"))
                continue;
            bool m = true;
            struct err se = {0};
            if (po->drain_selector &&
                kobj_selector_match(po->drain_selector, kobj_labels(pod), &m, &se) == 0 && !m)
                continue;
        }
        left++;
        if (kobj_deletion_timestamp(pod)) {
            if (!why[0])
                snprintf(why, why_len, "pod %s/%s is terminating", kobj_namespace(pod),
                         kobj_name(pod));
            continue;
        }
        bool empty_ok = kind == EVICT_GPU ? po->del_empty_dir : po->drain_empty_dir;
        bool force = kind == EVICT_GPU ? po->del_force : po->drain_force;
        if (pod_has_empty_dir(pod) && !empty_ok) {
            snprintf(why, why_len, "pod %s/%s uses emptyDir and deleteEmptyDir is false",
                     kobj_namespace(pod), kobj_name(pod));
            return -1;
        }
        if (!json_array_size(kobj_path(pod, "metadata.ownerReferences")) && !force) {
            snprintf(why, why_len, "pod %s/%s has no controller and force is false",
                     kobj_namespace(pod), kobj_name(pod));
            return -1;
        }
        const char *pdb = NULL;
        if (!pdb_allows(pl, pod, &pdb)) {
            snprintf(why, why_len, "pod %s/%s: PodDisruptionBudget %s allows no disruption",
                     kobj_namespace(pod), kobj_name(pod), pdb);
            continue;
        }
        add_pod_action(pl->out->evictions, pod, n->name);
        if (!why[0])
            snprintf(why, why_len, "evicting pod %s/%s", kobj_namespace(pod), kobj_name(pod));
    }
    return left == 0 ? 1 : 0;
}

/* Did validator pod `v` start before the node's driver pod? Then it validated an earlier
 * driver: the new one is not validated by it. Both times are the API server's, so no clock
 * skew enters (RFC 3339 UTC compares as text). */
static bool validator_stale(const struct node *n, const json_t *v)
{
    const char *vt = kobj_path_str(v, "metadata.creationTimestamp");
    const char *dt = n->driver ? kobj_path_str(n->driver, "metadata.creationTimestamp") : NULL;
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
        if (pod_ready(v) && !kobj_deletion_timestamp(v) && !validator_stale(n, v))
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
        if (!kobj_deletion_timestamp(v) && validator_stale(n, v))
            add_pod_action(pl->out->deletions, v, n->name);
    }
}

/* One step of NVIDIA's machine for an in-flight node: the next state, or the same to wait. */
static enum upg_state step(struct planner *pl, struct node *n, char *why, size_t why_len)
{
    const struct upg_policy *po = pl->in->policy;
    int64_t now = pl->in->now_s;
    why[0] = '\0';
    switch (n->state) {
    case UPG_CORDON:
        /* A node already cordoned here was cordoned by whoever wrote this state and died
         * before the next one (a killed operator): whether it was cordoned before the upgrade
         * was recorded when it started (start_node), as NVIDIA's does. */
        if (!cordoned(n)) {
            n->unsched_set = 1;
            set_ann(n, UPG_ANN_CORDONED, "true");
        }
        return UPG_WAIT_JOBS;
    case UPG_WAIT_JOBS: {
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
            if (streq_ptr(kobj_path_str(pod, "spec.nodeName"), n->name) && !pod_finished(pod) &&
                kobj_selector_match(po->wait_selector, kobj_labels(pod), &m, &se) == 0 && m)
                busy = true;
        }
        if (busy && !timed_out(pl, n, start, po->wait_timeout_s))
            return UPG_WAIT_JOBS;
        set_ann(n, UPG_ANN_WAIT_START, NULL);
        return UPG_POD_DELETION;
    }
    case UPG_POD_DELETION: {
        int r = evict_pods(pl, n, EVICT_GPU, why, why_len);
        if (r > 0) /* NVIDIA's: drain-required only when the drain is on */
            return po->drain_enable ? UPG_DRAIN : UPG_POD_RESTART;
        if (r < 0 || timed_out(pl, n, since(n, now), po->del_timeout_s)) {
            if (r == 0) {
                size_t l = strlen(why);
                snprintf(why + l, why_len - l, "%spod deletion timed out after %llds",
                         l ? "; " : "", (long long)po->del_timeout_s);
            }
            return po->drain_enable ? UPG_DRAIN : UPG_FAILED;
        }
        return UPG_POD_DELETION;
    }
    case UPG_DRAIN: {
        if (!po->drain_enable)
            return UPG_POD_RESTART;
        int r = evict_pods(pl, n, EVICT_DRAIN, why, why_len);
        if (r > 0)
            return UPG_POD_RESTART;
        if (r < 0)
            return UPG_FAILED;
        if (timed_out(pl, n, since(n, now), po->drain_timeout_s)) {
            size_t l = strlen(why);
            snprintf(why + l, why_len - l, "%sdrain timed out after %llds", l ? "; " : "",
                     (long long)po->drain_timeout_s);
            return UPG_FAILED;
        }
        return UPG_DRAIN;
    }
    case UPG_POD_RESTART: {
        /* a driver waiting for a safe load: the node is empty now, let it load */
        if (cur_ann(n, UPG_ANN_SAFE_LOAD))
            set_ann(n, UPG_ANN_SAFE_LOAD, NULL);
        if (!n->driver)
            return UPG_POD_RESTART; /* the DaemonSet has not made the new pod yet */
        if (!n->in_sync) {
            if (!n->drv_terminating)
                add_pod_action(pl->out->deletions, n->driver, n->name);
            n->drv_terminating = true;
            return UPG_POD_RESTART;
        }
        if (n->drv_ready) {
            /* validation-required, next in this pass, replaces the stale validators */
            set_ann_time(n, UPG_ANN_VALID_START, now);
            return UPG_VALIDATION;
        }
        bool unready;
        long long rc = pod_restarts(n->driver, &unready);
        if (unready && rc > MAX_RESTARTS) {
            snprintf(why, why_len, "driver pod %s restarted %lld times", kobj_name(n->driver), rc);
            return UPG_FAILED;
        }
        return UPG_POD_RESTART;
    }
    case UPG_VALIDATION: {
        if (validator_ok(pl, n)) {
            set_ann(n, UPG_ANN_VALID_START, NULL);
            return UPG_UNCORDON;
        }
        /* every pass, not only on entry: a validator that ran with the old driver may be
         * left (an operator killed between the state and the deletion, a deletion that
         * failed, a DaemonSet that recreated it before the driver pod) and would hold the
         * node here until the timeout */
        revalidate(pl, n);
        int64_t start = ann_time(n, UPG_ANN_VALID_START, 0);
        if (!start) {
            start = now;
            set_ann_time(n, UPG_ANN_VALID_START, now);
        }
        if (timed_out(pl, n, start, po->validation_timeout_s)) {
            snprintf(why, why_len, "validation did not pass within %llds",
                     (long long)po->validation_timeout_s);
            set_ann(n, UPG_ANN_VALID_START, NULL);
            return UPG_FAILED;
        }
        return UPG_VALIDATION;
    }
    case UPG_UNCORDON:
        if (cur_ann(n, UPG_ANN_INITIAL_UNSCH))
            set_ann(n, UPG_ANN_INITIAL_UNSCH, NULL); /* it was cordoned before: it stays so */
        else if (cordoned(n))
            n->unsched_set = 0;
        set_ann(n, UPG_ANN_CORDONED, NULL);
        set_ann_time(n, UPG_ANN_DONE_AT, now);
        set_ann(n, UPG_ANN_NODE_APPROVED, NULL);
        set_ann(n, UPG_ANN_WAITING, NULL);
        set_ann(n, UPG_ANN_TARGET, NULL);
        return UPG_DONE;
    case UPG_FAILED:
        /* re-examined every pass: a driver that became healthy ends the failure, once a
         * validator newer than it passes (an older one is replaced) */
        if (n->driver && n->in_sync && n->drv_ready) {
            if (validator_ok(pl, n))
                return UPG_UNCORDON;
            revalidate(pl, n);
        }
        return UPG_FAILED;
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
        p->selector = p->p.node_selector;
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
            /* the nodes whose driver its DaemonSets run: the default NVIDIADriver has no
             * selector, and a node two select is owned by neither */
            p->owner_sel = json_pack("{s:s}", UPG_LABEL_DRIVER_OWNER, p->p.nvidia_driver);
            p->selector = p->owner_sel;
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
        const json_t *sel = p->valid
                                ? p->selector
                                : kobj_path(json_array_get(pl->in->pools, i), "spec.nodeSelector");
        if (!p->valid && !json_is_object(sel))
            continue;
        if (!kobj_labels_match(sel, kobj_labels(n->obj)))
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

static bool in_flight(enum upg_state s)
{
    return s >= UPG_CORDON && s <= UPG_UNCORDON;
}

/* Why a pool's canary, once soaked, is still not through: NULL when it passed. Marks halts. */
static void canary_check(struct planner *pl, struct pool *p, int pi)
{
    if (!p->valid || (p->p.canary_count == 0 && !p->p.canary_selector) || !p->target ||
        streq_ptr(p->p.resumed_revision, p->target)) {
        p->canary_done = true;
        return;
    }
    int64_t now = pl->in->now_s;
    /* Canary nodes: marked for the target, selector-chosen, then the first K by name. */
    int chosen = 0;
    for (size_t i = 0; i < pl->nn; i++)
        chosen += pl->n[i].pool == pi && pl->n[i].managed && !pl->n[i].frozen &&
                  streq_ptr(cur_ann(&pl->n[i], UPG_ANN_CANARY), p->target);
    bool done = true;
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        if (n->pool != pi || !n->managed || n->frozen)
            continue;
        bool is = streq_ptr(cur_ann(n, UPG_ANN_CANARY), p->target);
        if (!is && p->p.canary_selector &&
            kobj_labels_match(p->p.canary_selector, kobj_labels(n->obj)))
            is = true;
        if (!is && !p->p.canary_selector && chosen < p->p.canary_count &&
            (n->state == UPG_REQUIRED || (n->driver && !n->in_sync))) {
            is = true;
            chosen++;
        }
        if (!is)
            continue;
        if (!streq_ptr(cur_ann(n, UPG_ANN_CANARY), p->target) && n->state != UPG_REQUIRED &&
            !(n->driver && !n->in_sync))
            continue; /* already on the target before the rollout: nothing to prove */
        if (!streq_ptr(cur_ann(n, UPG_ANN_CANARY), p->target) && n->state == UPG_REQUIRED)
            set_ann(n, UPG_ANN_CANARY, p->target); /* chosen: recorded before it starts */
        /* a failed canary halts its pool, once per target */
        const char *cf = cur_ann(n, UPG_ANN_CANARY_FAILED);
        char reason[512] = "";
        if (n->state == UPG_FAILED) {
            snprintf(reason, sizeof(reason), "upgrade failed: %s",
                     cur_ann(n, UPG_ANN_FAILED_REASON) ?: "unknown");
        } else if (n->state == UPG_DONE && n->in_sync) {
            int64_t at = ann_time(n, UPG_ANN_DONE_AT, now);
            if (now < at + p->p.canary_soak_s) {
                long long rs = n->driver ? pod_restarts_total(n->driver) : 0, bad, total;
                if (!n->drv_ready)
                    snprintf(reason, sizeof(reason), "driver pod not ready during the soak");
                else if (rs > p->p.canary_max_restarts)
                    snprintf(reason, sizeof(reason),
                             "driver pod restarted %lld times during the soak", rs);
                else if (pl->in->validation_enabled && n->validator != 1)
                    snprintf(reason, sizeof(reason), "validator not ready during the soak");
                else if ((bad = node_unhealthy_gpus(n->obj, &total)) > p->p.canary_max_unhealthy)
                    snprintf(reason, sizeof(reason),
                             "%lld of %lld GPUs unhealthy during the soak (the device plugin's "
                             "health check: a critical XID or an ECC error)",
                             bad, total);
                else {
                    done = false;
                    want_requeue(pl, at + p->p.canary_soak_s);
                }
            }
        } else {
            done = false;
        }
        if (reason[0]) {
            done = false;
            size_t tl = strlen(p->target);
            if (!(cf && strncmp(cf, p->target, tl) == 0 && cf[tl] == ' ')) {
                _cleanup_free_ char *v = xasprintf("%s %s", p->target, reason);
                set_ann(n, UPG_ANN_CANARY_FAILED, v);
                event(pl, n->name, "Warning", "canary for revision %s failed: %s; pool %s halted",
                      p->target, reason, p->p.name);
            }
        }
    }
    p->canary_done = done;
}

static void halt_check(struct planner *pl, struct pool *p, int pi)
{
    if (!p->target)
        return;
    size_t tl = strlen(p->target);
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        const char *cf = cur_ann(n, UPG_ANN_CANARY_FAILED);
        if (n->pool != pi || !cf || strncmp(cf, p->target, tl) != 0 || cf[tl] != ' ')
            continue;
        if (streq_ptr(p->p.resumed_revision, p->target))
            return; /* someone resumed this rollout */
        free(p->halted);
        p->halted = xasprintf("canary node %s: %s", n->name, cf + tl + 1);
        return;
    }
}

/* ---- gating the starts ---------------------------------------------------------------------- */

static void set_waiting(struct planner *pl, struct node *n, const char *why, bool warn)
{
    if (streq_ptr(cur_ann(n, UPG_ANN_WAITING), why))
        return;
    set_ann(n, UPG_ANN_WAITING, why);
    if (why)
        event(pl, n->name, warn ? "Warning" : "Normal", "upgrade waits: %s", why);
}

static long long limit_of(const json_t *mu, int total)
{
    if (!mu)
        return total;
    return kobj_int_or_percent_scaled(mu, total, true);
}

/* The gates in order; NULL when the node may start, else why not (*ret_warn: a refusal). */
static char *gate(struct planner *pl, struct node *n, struct pool *p, int *g_unavail,
                  int *g_progress, long long g_max_unavail, bool *ret_warn)
{
    const struct upg_policy *po = pl->in->policy;
    *ret_warn = false;
    const char *version = n->set >= 0 ? pl->in->sets[n->set].version : p->version;
    char *reason = NULL;
    const char *os_id = kobj_label(n->obj, "feature.node.kubernetes.io/system-os_release.ID");
    const char *os_ver =
        kobj_label(n->obj, "feature.node.kubernetes.io/system-os_release.VERSION_ID");
    _cleanup_free_ char *os = os_id && os_ver ? xasprintf("%s%s", os_id, os_ver) : NULL;
    if (version &&
        !upg_matrix_allows(pl->in->matrix, version, kobj_label(n->obj, "nvidia.com/gpu.family"),
                           kobj_path_str(n->obj, "status.nodeInfo.kernelVersion"), os,
                           p->p.min_cuda, &reason)) {
        *ret_warn = true;
        char *r = xasprintf("incompatible: %s", reason);
        free(reason);
        return r;
    }
    if (p->halted) {
        *ret_warn = true;
        return xasprintf("rollout halted: %s", p->halted);
    }
    bool node_ok = streq_ptr(cur_ann(n, UPG_ANN_NODE_APPROVED), "true");
    if (p->p.approval == UPG_APPROVAL_MANUAL && !node_ok &&
        !(p->target && streq_ptr(p->p.approved_revision, p->target)))
        return xasprintf("approval: annotate DriverUpgradePool %s %s=%s or the node %s=true",
                         p->p.name, UPG_ANN_POOL_APPROVED, p->target ? p->target : "?",
                         UPG_ANN_NODE_APPROVED);
    if (!p->window_open) {
        char t[40] = "never";
        if (p->next_window)
            time_rfc3339((uint64_t)p->next_window * 1000, t, sizeof(t));
        return xasprintf("maintenance window closed; opens %s", t);
    }
    if (!p->canary_done && !streq_ptr(cur_ann(n, UPG_ANN_CANARY), p->target))
        return xasprintf("canary: the pool's canary nodes upgrade and soak first");
    bool counts_ready = n->ready && !n->unsched;
    if (p->floor > 0 && counts_ready && p->gpus_ready - n->gpus < p->floor)
        return xasprintf("capacity floor: %lld of %lld GPUs ready, floor %lld, node has %lld",
                         p->gpus_ready, p->gpus_total, p->floor, n->gpus);
    /* NVIDIA's slots, then the pool's own limits */
    bool adds_unavail = counts_ready;
    if (po->max_parallel > 0 && *g_progress >= po->max_parallel)
        return xstrdup("");
    if (adds_unavail && *g_unavail >= g_max_unavail)
        return xstrdup("");
    if (p->p.max_parallel > 0 && p->in_progress >= p->p.max_parallel)
        return xstrdup("");
    if (p->p.max_unavailable && adds_unavail &&
        p->unavailable >= limit_of(p->p.max_unavailable, p->total))
        return xstrdup("");
    return NULL;
}

static void start_node(struct planner *pl, struct node *n, struct pool *p, int *g_unavail,
                       int *g_progress)
{
    if (n->ready && !n->unsched) {
        (*g_unavail)++;
        p->unavailable++;
        p->gpus_ready -= n->gpus;
    }
    (*g_progress)++;
    p->in_progress++;
    p->started++;
    n->started = true;
    set_waiting(pl, n, NULL, false);
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
        n->ready = node_ready(obj);
        n->unsched = json_is_true(kobj_path(obj, "spec.unschedulable"));
        n->gpus = node_gpus(obj);
        n->set = -1;
        n->validator = -1;
        n->unsched_set = -1;
    }
    qsort(pl->n, pl->nn, sizeof(*pl->n), cmp_name);
    json_array_foreach ((json_t *)in->pods, i, obj) {
        const char *nodename = kobj_path_str(obj, "spec.nodeName");
        if (!nodename)
            continue;
        struct node key = {.name = nodename};
        struct node *n = bsearch(&key, pl->n, pl->nn, sizeof(*pl->n), cmp_name);
        if (!n)
            continue;
        if (streq_ptr(kobj_label(obj, "app"), UPG_VALIDATOR_APP)) {
            int v = pod_ready(obj) && !kobj_deletion_timestamp(obj) ? 1 : 0;
            if (v > n->validator)
                n->validator = v;
            if (!n->vpods)
                n->vpods = json_array();
            json_array_append(n->vpods, obj);
            continue;
        }
        const json_t *own = owner_of_kind(obj, "DaemonSet");
        if (!own)
            continue;
        for (size_t s = 0; s < in->n_sets; s++) {
            if (!streq_ptr(kobj_str(own, "name"), in->sets[s].name) ||
                !streq_ptr(kobj_namespace(obj), in->sets[s].ns))
                continue;
            bool sync =
                streq_ptr(kobj_label(obj, "controller-revision-hash"), in->sets[s].revision);
            /* of two pods (the old one terminating), the one of the current revision counts */
            if (n->driver && n->in_sync && !sync)
                continue;
            n->driver = obj;
            n->set = (int)s;
            n->in_sync = sync;
            n->drv_ready = pod_ready(obj) && !kobj_deletion_timestamp(obj);
            n->drv_terminating = kobj_deletion_timestamp(obj) != NULL;
            bool unready;
            n->drv_restarts = pod_restarts(obj, &unready);
        }
    }
    for (size_t k = 0; k < pl->nn; k++) {
        struct node *n = &pl->n[k];
        n->managed = !n->skip && !n->bad_label && (n->driver || n->state != UPG_UNKNOWN);
    }
}

static void node_patch_out(struct planner *pl, struct node *n)
{
    if (!n->labels && !n->anns && n->unsched_set < 0)
        return;
    json_t *patch = json_object();
    json_t *meta = json_object();
    if (n->labels)
        json_object_set(meta, "labels", n->labels);
    if (n->anns)
        json_object_set(meta, "annotations", n->anns);
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
    json_array_append_new(pl->out->node_patches,
                          json_pack("{s:s,s:o}", "name", n->name, "patch", patch));
}

static void pool_status(struct planner *pl, struct pool *p, int pi)
{
    json_t *st = json_pack("{s:s,s:i,s:i,s:{},s:{},s:{},s:i}", "name", p->p.name, "total", 0,
                           "upgraded", 0, "inProgress", "failed", "waiting", "pending", 0);
    int total = 0, upgraded = 0, pending = 0, prog = 0, failed = 0, waiting_more = 0;
    for (size_t i = 0; i < pl->nn; i++) {
        struct node *n = &pl->n[i];
        if (n->pool != pi || !n->managed)
            continue;
        total++;
        if (n->state == UPG_DONE && n->in_sync)
            upgraded++;
        if (in_flight(n->state)) {
            prog++;
            json_object_set_new(json_object_get(st, "inProgress"), n->name,
                                json_string(upg_state_name(n->state)));
        }
        if (n->state == UPG_FAILED) {
            failed++;
            json_object_set_new(json_object_get(st, "failed"), n->name,
                                json_string(cur_ann(n, UPG_ANN_FAILED_REASON) ?: "unknown"));
        }
        if (n->state == UPG_REQUIRED)
            pending++;
        const char *w = n->frozen ? n->frozen : cur_ann(n, UPG_ANN_WAITING);
        if (w && (n->state == UPG_REQUIRED || n->frozen)) {
            /* bounded: a status is read by people and rewritten on every change */
            if (json_object_size(json_object_get(st, "waiting")) < POOL_STATUS_MAX_WAITING)
                json_object_set_new(json_object_get(st, "waiting"), n->name, json_string(w));
            else
                waiting_more++;
        }
    }
    json_object_set_new(st, "total", json_integer(total));
    json_object_set_new(st, "upgraded", json_integer(upgraded));
    json_object_set_new(st, "pending", json_integer(pending));
    if (waiting_more)
        json_object_set_new(st, "waitingMore", json_integer(waiting_more));
    if (p->halted)
        json_object_set_new(st, "halted", json_string(p->halted));
    if (p->error)
        json_object_set_new(st, "error", json_string(p->error));
    if (p->target)
        json_object_set_new(st, "targetRevision", json_string(p->target));
    if (p->version)
        json_object_set_new(st, "targetVersion", json_string(p->version));
    if (!p->window_open && p->next_window) {
        char t[40];
        time_rfc3339((uint64_t)p->next_window * 1000, t, sizeof(t));
        json_object_set_new(st, "nextWindow", json_string(t));
    }
    json_array_append_new(pl->out->pools, st);
    json_object_set_new(pl->out->pool_counts, p->p.name,
                        json_pack("{s:i,s:i,s:i,s:i}", "in_progress", prog, "done", upgraded,
                                  "failed", failed, "pending", pending));
}

static void plan_free_inner(struct planner *pl)
{
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
        json_decref(pl->pools[i].owner_sel);
        free(pl->pools[i].halted);
    }
    free(pl->pools);
    json_decref(pl->pdb_used);
}

static struct upg_plan *plan_new(void)
{
    struct upg_plan *p = xcalloc(1, sizeof(*p));
    p->node_patches = json_array();
    p->evictions = json_array();
    p->deletions = json_array();
    p->events = json_array();
    p->pools = json_array();
    p->pool_counts = json_object();
    return p;
}

void upg_plan_free(struct upg_plan *p)
{
    if (!p)
        return;
    json_decref(p->node_patches);
    json_decref(p->evictions);
    json_decref(p->deletions);
    json_decref(p->events);
    json_decref(p->pools);
    json_decref(p->pool_counts);
    free(p->error);
    free(p);
}

int upg_plan(const struct upg_input *in, struct upg_plan **ret, struct err *e)
{
    if (!in || in->now_s <= 0)
        return err_set(e, -EINVAL, "upgrade plan: no time given");
    _cleanup_(upg_plan_freep) struct upg_plan *out = plan_new();
    struct planner pl = {.in = in, .out = out};
    /* Bad input anywhere the whole plan depends on: nothing is touched. */
    if (!in->policy || (!in->matrix && in->n_sets > 0)) {
        out->frozen = true;
        out->error = xstrdup(!in->policy ? (in->policy_error ?: "upgrade policy is invalid")
                                         : (in->matrix_error ?: "no compatibility matrix"));
        json_array_append_new(out->events, json_pack("{s:s,s:s,s:s}", "type", "Warning", "reason",
                                                     UPG_EVENT_REASON, "message", out->error));
        *ret = steal_ptr(&out);
        return 0;
    }
    const struct upg_policy *po = in->policy;
    pl.pdb_used = json_object();
    load_nodes(&pl);
    if (!po->auto_upgrade) {
        /* NVIDIA's: with autoUpgrade off the controller steps back and removes its labels. */
        for (size_t i = 0; i < pl.nn; i++) {
            struct node *n = &pl.n[i];
            if (!n->skip && kobj_label(n->obj, UPG_LABEL_STATE)) {
                n->labels = json_pack("{s:n}", UPG_LABEL_STATE);
                node_patch_out(&pl, n);
            }
        }
        plan_free_inner(&pl);
        *ret = steal_ptr(&out);
        return 0;
    }
    pools_load(&pl);
    for (size_t i = 0; i < pl.nn; i++) {
        if (pl.n[i].managed)
            assign_pool(&pl, &pl.n[i]);
    }
    /* Per pool: its target, window, floor, counts (from the pass's start). */
    int g_total = 0, g_unavail = 0, g_progress = 0;
    for (size_t i = 0; i < pl.nn; i++) {
        struct node *n = &pl.n[i];
        if (!n->managed)
            continue;
        struct pool *p = &pl.pools[n->pool];
        g_total++;
        p->total++;
        if (n->set >= 0 && !p->target) {
            p->target = in->sets[n->set].revision;
            p->version = in->sets[n->set].version;
        }
        p->gpus_total += n->gpus;
        bool unavail = !n->ready || n->unsched || n->state == UPG_CORDON;
        if (unavail) {
            g_unavail++;
            p->unavailable++;
        } else if (!in_flight(n->state)) {
            p->gpus_ready += n->gpus;
        }
        if (in_flight(n->state)) {
            g_progress++;
            p->in_progress++;
        }
    }
    for (size_t k = 0; k < pl.npools; k++) {
        struct pool *p = &pl.pools[k];
        p->window_open = true;
        if (!p->valid)
            continue;
        if (p->p.n_windows) {
            upg_window_state(p->p.windows, p->p.n_windows, p->tz, in->now_s, &p->window_open,
                             &p->next_window);
            if (!p->window_open && p->next_window)
                want_requeue(&pl, p->next_window);
        }
        if (p->p.capacity_floor)
            p->floor = kobj_int_or_percent_scaled(p->p.capacity_floor, p->gpus_total, true);
    }
    /* NVIDIA's machine for nodes in flight, and the unknown/done ones that need an upgrade. */
    for (size_t i = 0; i < pl.nn; i++) {
        struct node *n = &pl.n[i];
        if (!n->managed || n->frozen)
            continue;
        bool needs = (n->driver && !n->in_sync) || cur_ann(n, UPG_ANN_SAFE_LOAD) ||
                     streq_ptr(cur_ann(n, UPG_ANN_REQUESTED), "true");
        const char *target = n->set >= 0 ? in->sets[n->set].revision : NULL;
        const char *tried = cur_ann(n, UPG_ANN_TARGET);
        if (n->state == UPG_FAILED && target && tried && !streq_ptr(tried, target)) {
            /* failed on another revision (a rollback, a newer fix): try the current one */
            set_ann(n, UPG_ANN_TARGET, target);
            set_state(&pl, n, UPG_REQUIRED, NULL);
        } else if (n->state == UPG_REQUIRED && target && tried && !streq_ptr(tried, target) &&
                   !needs) {
            /* the revision it waited for was rolled back before it started */
            set_ann(n, UPG_ANN_TARGET, NULL);
            set_ann(n, UPG_ANN_WAITING, NULL);
            set_state(&pl, n, UPG_DONE, NULL);
        } else if (n->state == UPG_UNKNOWN || n->state == UPG_DONE) {
            if (needs) {
                set_ann(n, UPG_ANN_REQUESTED, NULL);
                set_ann(n, UPG_ANN_TARGET, target);
                set_state(&pl, n, UPG_REQUIRED, NULL);
            } else if (n->state == UPG_UNKNOWN) {
                set_state(&pl, n, UPG_DONE, NULL);
            }
        } else if (n->state != UPG_REQUIRED) {
            run_machine(&pl, n);
        }
    }
    for (size_t k = 0; k < pl.npools; k++) {
        canary_check(&pl, &pl.pools[k], (int)k);
        halt_check(&pl, &pl.pools[k], (int)k);
    }
    long long g_max = limit_of(po->max_unavailable, g_total);
    /* Starts: canary nodes first, then by name. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < pl.nn; i++) {
            struct node *n = &pl.n[i];
            if (!n->managed || n->frozen || n->state != UPG_REQUIRED || n->started ||
                in->n_sets == 0) /* no driver DaemonSet: nothing to upgrade to */
                continue;
            struct pool *p = &pl.pools[n->pool];
            bool canary = p->target && streq_ptr(cur_ann(n, UPG_ANN_CANARY), p->target);
            if ((pass == 0) != canary)
                continue;
            bool warn;
            _cleanup_free_ char *why = gate(&pl, n, p, &g_unavail, &g_progress, g_max, &warn);
            if (!why) {
                start_node(&pl, n, p, &g_unavail, &g_progress);
            } else if (why[0]) {
                set_waiting(&pl, n, why, warn);
            } else {
                set_waiting(&pl, n, NULL, false); /* a slot: NVIDIA's own pending */
            }
        }
    }
    /* Frozen nodes: the reason shows, nothing else changes. */
    for (size_t i = 0; i < pl.nn; i++) {
        struct node *n = &pl.n[i];
        if (n->frozen && !streq_ptr(kobj_annotation(n->obj, UPG_ANN_WAITING), n->frozen)) {
            event(&pl, n->name, "Warning", "upgrade refused, node left as it is: %s", n->frozen);
        }
    }
    for (size_t k = 0; k < pl.npools; k++) {
        struct pool *p = &pl.pools[k];
        if (p->error)
            json_array_append_new(out->events, json_pack("{s:s,s:s,s:s,s:s}", "pool", p->p.name,
                                                         "type", "Warning", "reason",
                                                         UPG_EVENT_REASON, "message", p->error));
        pool_status(&pl, p, (int)k);
    }
    for (size_t i = 0; i < pl.nn; i++) {
        struct node *n = &pl.n[i];
        if (n->managed && !n->frozen)
            node_patch_out(&pl, n);
        if (!n->managed)
            continue;
        switch (n->state) {
        case UPG_REQUIRED:
            out->counts.pending++;
            break;
        case UPG_DONE:
            out->counts.done++;
            break;
        case UPG_FAILED:
            out->counts.failed++;
            break;
        default:
            if (in_flight(n->state))
                out->counts.in_progress++;
        }
    }
    int avail = po->max_parallel > 0 ? po->max_parallel - out->counts.in_progress
                                     : (int)(g_total - out->counts.in_progress);
    out->counts.available = avail < 0 ? 0 : avail;
    plan_free_inner(&pl);
    *ret = steal_ptr(&out);
    return 0;
}
