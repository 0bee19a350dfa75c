/* SPDX-License-Identifier: Apache-2.0 */
/* The scheduler, reduced: bind pending pods to a node that passes its filters (unschedulable,
 * taints, node affinity, resources fit), fewest pods first; and the pod garbage collector for pods
 * bound to nodes that no longer exist. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ks-controllers.h"

/* Resources NodeResourcesFit counts: cpu, memory, ephemeral-storage, hugepages and extended
 * resources (a domain-qualified name outside kubernetes.io, e.g. nvidia.com/gpu). */
static bool resource_counted(const char *name)
{
    if (streq(name, "cpu") || streq(name, "memory") || streq(name, "ephemeral-storage") ||
        str_has_prefix(name, "hugepages-"))
        return true;
    const char *slash = strchr(name, '/');
    if (!slash)
        return false;
    /* kubernetes.io and its subdomains name the built-in resources */
    static const char k8s[] = "kubernetes.io";
    size_t dl = (size_t)(slash - name), kl = sizeof(k8s) - 1;
    bool builtin = dl >= kl && !strncmp(slash - kl, k8s, kl) && (dl == kl || slash[-kl - 1] == '.');
    return !builtin;
}

static void add_to(json_t *acc, const char *name, int64_t v)
{
    int64_t cur = json_integer_value(json_object_get(acc, name));
    int64_t sum = v > INT64_MAX - cur ? INT64_MAX : cur + v;
    json_object_set_new(acc, name, json_integer(sum));
}

/* One container's requests in thousandths: requests, with limits standing in for a resource
 * that has no request (the API server defaults requests to limits). */
static json_t *container_requests(json_t *c)
{
    json_t *out = json_object();
    for (int pass = 0; pass < 2; pass++) {
        const char *k;
        json_t *v;
        json_object_foreach (kobj_path(c, pass ? "resources.limits" : "resources.requests"), k, v) {
            int64_t m = 0;
            if (!resource_counted(k) || json_object_get(out, k) || ks_quantity_milli(v, &m) < 0)
                continue;
            json_object_set_new(out, k, json_integer(m));
        }
    }
    return out;
}

/* What the scheduler charges a pod: per resource, the larger of the containers' sum and any one
 * init container's request (init containers run one at a time, before the others), plus the
 * pod's overhead. */
static json_t *pod_requests(json_t *spec)
{
    json_t *sum = json_object();
    size_t i;
    json_t *c;
    const char *k;
    json_t *v;
    json_array_foreach (json_object_get(spec, "containers"), i, c) {
        json_t *r = container_requests(c);
        json_object_foreach (r, k, v)
            add_to(sum, k, json_integer_value(v));
        json_decref(r);
    }
    json_array_foreach (json_object_get(spec, "initContainers"), i, c) {
        json_t *r = container_requests(c);
        json_object_foreach (r, k, v)
            if (json_integer_value(v) > json_integer_value(json_object_get(sum, k)))
                json_object_set(sum, k, v);
        json_decref(r);
    }
    json_object_foreach (json_object_get(spec, "overhead"), k, v) {
        int64_t m = 0;
        if (resource_counted(k) && ks_quantity_milli(v, &m) == 0)
            add_to(sum, k, m);
    }
    return sum;
}

static bool pod_terminated(json_t *p)
{
    const char *ph = kobj_path_str(p, "status.phase");
    return streq_ptr(ph, "Succeeded") || streq_ptr(ph, "Failed");
}

/* What the pods bound to n (usage[name] = {"pods": count, "req": {resource: thousandths}})
 * charge it, this pod added. */
static void charge(json_t *usage, const char *node, json_t *req)
{
    json_t *u = json_object_get(usage, node);
    if (!u) {
        u = json_pack("{s:I,s:{}}", "pods", (json_int_t)0, "req");
        json_object_set_new(usage, node, u);
    }
    json_object_set_new(u, "pods",
                        json_integer(json_integer_value(json_object_get(u, "pods")) + 1));
    const char *k;
    json_t *v;
    json_object_foreach (req, k, v)
        add_to(json_object_get(u, "req"), k, json_integer_value(v));
}

/* The scheduler's filters in its order (NodeUnschedulable, TaintToleration, NodeAffinity,
 * NodeResourcesFit; DynamicResources comes after, in ks_ctl_schedule): why the pod does not fit
 * node n, appended to reasons (nothing when it fits). Extended resources DRA serves on n (dp)
 * are not NodeResourcesFit's. Returns whether preemption could help (only a resource shortage). */
static bool node_filter(json_t *spec, json_t *req, json_t *n, json_t *usage, json_t *reasons,
                        const struct ks_dra_pod *dp)
{
    json_t *tols = json_object_get(spec, "tolerations");
    if (json_is_true(kobj_path(n, "spec.unschedulable"))) {
        json_t *t = json_pack("{s:s,s:s}", "key", T_UNSCHED, "effect", "NoSchedule");
        bool tolerated = ctl_tolerates(tols, t);
        json_decref(t);
        if (!tolerated) {
            json_array_append_new(reasons, json_string("node(s) were unschedulable"));
            return false;
        }
    }
    json_t *taint = ctl_untolerated_taint(tols, n);
    if (taint) {
        _cleanup_free_ char *r =
            xasprintf("node(s) had untolerated taint {%s: %s}", kobj_str(taint, "key") ?: "",
                      kobj_str(taint, "value") ?: "");
        json_array_append_new(reasons, json_string(r));
        return false;
    }
    if (!ctl_node_affinity_matches(spec, n)) {
        json_array_append_new(reasons,
                              json_string("node(s) didn't match Pod's node affinity/selector"));
        return false;
    }
    json_t *u = json_object_get(usage, ks_obj_name(n));
    json_t *alloc = kobj_path(n, "status.allocatable");
    int64_t pods_max = 0;
    /* a node that states no pod capacity (a bare test object) takes any number */
    if (ks_quantity_milli(json_object_get(alloc, "pods"), &pods_max) == 0 &&
        (json_integer_value(json_object_get(u, "pods")) + 1) * 1000 > pods_max)
        json_array_append_new(reasons, json_string("Too many pods"));
    const char *k;
    json_t *v;
    json_object_foreach (req, k, v) {
        int64_t want = json_integer_value(v), have = 0;
        if (want <= 0 || (dp && ks_dra_extended_delegated(dp, n, k)))
            continue;
        (void)ks_quantity_milli(json_object_get(alloc, k), &have);
        int64_t used = json_integer_value(kobj_at(u, "req", k));
        if (want > have - used) {
            _cleanup_free_ char *r = xasprintf("Insufficient %s", k);
            json_array_append_new(reasons, json_string(r));
        }
    }
    return true;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* " <count> <reason>, ..." sorted as the scheduler's FitError sorts its histogram. */
static void histogram(struct sbuf *b, json_t *counts)
{
    size_t n = json_object_size(counts), i = 0;
    char **lines = xcalloc(n ? n : 1, sizeof(*lines));
    const char *k;
    json_t *v;
    json_object_foreach (counts, k, v)
        lines[i++] = xasprintf("%" JSON_INTEGER_FORMAT " %s", json_integer_value(v), k);
    qsort(lines, n, sizeof(*lines), cmp_str);
    for (i = 0; i < n; i++) {
        sbuf_addf(b, "%s%s", i ? ", " : " ", lines[i]);
        free(lines[i]);
    }
    free(lines);
}

static void count(json_t *counts, const char *reason)
{
    json_t *c = json_object_get(counts, reason);
    json_object_set_new(counts, reason, json_integer(c ? json_integer_value(c) + 1 : 1));
}

bool ks_ctl_schedule(struct ksim *ks)
{
    struct ks_type *pt = ctl_core(ks, "pods");
    struct ks_type *nt = ctl_core(ks, "nodes");
    json_t *pending = json_array();
    const char *k;
    json_t *p;
    json_object_foreach (pt->objs, k, p) {
        json_t *spec = json_object_get(p, "spec");
        if (json_string_value(json_object_get(spec, "nodeName")) || ks_is_deleting(p))
            continue;
        const char *sched = kobj_path_str(p, "spec.schedulerName");
        if (sched && !streq(sched, "default-scheduler"))
            continue;
        json_array_append(pending, p);
    }
    if (json_array_size(pending) == 0) {
        json_decref(pending);
        return false;
    }
    /* what the pods bound to each node charge it: only when there is a pod to place */
    json_t *usage = json_object(); /* node -> {pods, req} of the pods bound there */
    json_object_foreach (pt->objs, k, p) {
        const char *nn = kobj_path_str(p, "spec.nodeName");
        if (nn && !pod_terminated(p)) {
            json_t *req = pod_requests(json_object_get(p, "spec"));
            charge(usage, nn, req);
            json_decref(req);
        }
    }
    bool changed = false;
    char ts[40];
    ks_now_str(ks, ts, sizeof(ts));
    struct ks_dra_sched *dra = json_array_size(pending) ? ks_dra_sched_new(ks) : NULL;
    size_t i;
    json_array_foreach (pending, i, p) {
        json_t *spec = json_object_get(p, "spec");
        /* DynamicResources' PreEnqueue and PreFilter */
        struct ks_dra_pod *dp = NULL;
        _cleanup_free_ char *prefilter = NULL;
        int dr = ks_dra_prefilter(dra, p, &dp, &prefilter);
        if (dr == KS_DRA_WAIT)
            continue;
        bool has_claims = json_array_size(kobj_path(p, "spec.resourceClaims")) > 0;
        _cleanup_free_ char *sched_error = NULL;
        json_t *req = pod_requests(spec);
        json_t *why = json_object();     /* reason -> nodes */
        json_t *preempt = json_object(); /* what preemption says per node */
        const char *best = NULL;
        json_t *best_node = NULL;
        json_int_t best_load = 0;
        size_t total = 0;
        json_t *n;
        json_object_foreach (nt->objs, k, n) {
            total++;
            if (dr == KS_DRA_UNSCHEDULABLE || sched_error)
                continue;
            json_t *reasons = json_array();
            bool resolvable = node_filter(spec, req, n, usage, reasons, dp);
            if (json_array_size(reasons) == 0) {
                const char *reason = NULL;
                if (ks_dra_filter(dra, dp, n, &reason, &sched_error) < 0) {
                    json_decref(reasons);
                    continue;
                }
                if (reason) {
                    json_array_append_new(reasons, json_string(reason));
                    resolvable = false; /* UnschedulableAndUnresolvable */
                }
            }
            if (json_array_size(reasons) == 0) {
                json_int_t l = json_integer_value(kobj_at(usage, ks_obj_name(n), "pods"));
                if (!best || l < best_load) {
                    best = ks_obj_name(n);
                    best_node = n;
                    best_load = l;
                }
            } else {
                size_t j;
                json_t *r;
                json_array_foreach (reasons, j, r)
                    count(why, json_string_value(r));
                /* no priorities here: evicting a pod never makes room */
                count(preempt, resolvable ? "No preemption victims found for incoming pod"
                                          : "Preemption is not helpful for scheduling");
            }
            json_decref(reasons);
        }
        json_t *c = json_deep_copy(p);
        json_t *cond;
        if (sched_error) {
            /* a Filter error aborts the attempt, as the scheduler's handleSchedulingFailure */
            best = NULL;
            _cleanup_free_ char *text =
                xasprintf("running \"DynamicResources\" filter plugin: %s", sched_error);
            cond = json_pack("{s:s,s:s,s:n,s:s,s:s,s:s}", "type", "PodScheduled", "status", "False",
                             "lastProbeTime", "lastTransitionTime", ts, "reason", "SchedulerError",
                             "message", text);
        } else if (best) {
            json_object_set_new(kobj_ensure_object(c, "spec"), "nodeName", json_string(best));
            charge(usage, best, req);
            /* PreBind: claims allocated and reserved before the binding */
            ks_dra_bind(dra, dp, best_node, c);
            cond = json_pack("{s:s,s:s,s:n,s:s}", "type", "PodScheduled", "status", "True",
                             "lastProbeTime", "lastTransitionTime", ts);
        } else {
            struct sbuf msg;
            sbuf_init(&msg, 64 * 1024);
            if (total == 0) {
                sbuf_adds(&msg, "no nodes available to schedule pods");
            } else {
                sbuf_addf(&msg, "0/%zu nodes are available:", total);
                if (dr == KS_DRA_UNSCHEDULABLE) {
                    /* a PreFilter rejection stands for every node */
                    sbuf_addf(&msg, " %s", prefilter);
                    json_object_clear(preempt);
                    json_object_set_new(preempt, "Preemption is not helpful for scheduling",
                                        json_integer((json_int_t)total));
                } else {
                    histogram(&msg, why);
                }
                /* PostFilter: DynamicResources speaks for pods with claims, then preemption */
                sbuf_adds(&msg, ".");
                if (dr == KS_DRA_UNSCHEDULABLE)
                    sbuf_adds(&msg, " no new claims to deallocate,");
                else if (has_claims)
                    sbuf_adds(&msg, " still not schedulable,");
                sbuf_addf(&msg, " preemption: 0/%zu nodes are available:", total);
                histogram(&msg, preempt);
                sbuf_adds(&msg, ".");
            }
            _cleanup_free_ char *text = ks_text_take(&msg);
            cond = json_pack("{s:s,s:s,s:n,s:s,s:s,s:s}", "type", "PodScheduled", "status", "False",
                             "lastProbeTime", "lastTransitionTime", ts, "reason", "Unschedulable",
                             "message", text);
        }
        ks_dra_pod_free(dp);
        json_decref(req);
        json_decref(why);
        json_decref(preempt);
        json_t *old_cond = json_array_get(kobj_path(p, "status.conditions"), 0);
        if (!best && streq_ptr(kobj_str(old_cond, "reason"), kobj_str(cond, "reason")) &&
            streq_ptr(kobj_str(old_cond, "message"), kobj_str(cond, "message"))) {
            /* already marked unschedulable and nothing changed since: leave it */
            json_decref(cond);
            json_decref(c);
            continue;
        }
        json_object_set_new(kobj_ensure_object(c, "status"), "conditions", json_pack("[o]", cond));
        /* binding sets spec.nodeName, which a plain update may not: commit directly */
        ks_commit(ks, pt, c, KS_MODIFIED, p);
        changed = true;
    }
    ks_dra_sched_free(dra);
    json_decref(pending);
    json_decref(usage);
    return changed;
}

/* The pod garbage collector: pods bound to nodes that no longer exist are deleted. */
bool ks_ctl_orphan_pods(struct ksim *ks)
{
    struct ks_type *pt = ctl_core(ks, "pods");
    struct ks_type *nt = ctl_core(ks, "nodes");
    /* the pods changed since the last pass, unless a node went away since (then every pod) */
    json_t *look = NULL;
    size_t nodes_deleted = 0;
    bool since = ctl_changed_since(ks, nt, ks->orphans_cursor, NULL, &nodes_deleted) &&
                 nodes_deleted == 0 && ctl_changed_since(ks, pt, ks->orphans_cursor, &look, NULL);
    if (!since)
        look = ctl_values(pt->objs);
    ks->orphans_cursor = ks->rv;
    json_t *gone = json_array();
    json_t *p;
    size_t i;
    json_array_foreach (look, i, p) {
        const char *nn = kobj_path_str(p, "spec.nodeName");
        if (nn && !ks_get(nt, "", nn))
            json_array_append(gone, p);
    }
    json_decref(look);
    json_array_foreach (gone, i, p) {
        json_t *cur = ks_get(pt, ks_obj_ns(p), ks_obj_name(p));
        if (cur)
            ks_remove(ks, pt, cur);
    }
    bool changed = json_array_size(gone) > 0;
    json_decref(gone);
    return changed;
}
