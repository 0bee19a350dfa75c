/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The operator's decisions: which ClusterPolicy is active, what each one's status says, which
 * labels each node gets, which objects to write and to delete, which Events to record. Pure: the
 * shell (controller.c) reads the cluster into a snapshot and executes the plan.
 */
#include <assert.h>
#include <string.h>

#include "operator-internal.h"
#include "nodestate.h"
#include "operator.h"
#include "yamlcfg.h"

static bool deleting(const json_t *o)
{
    return kobj_deletion_timestamp(o) != NULL;
}

/* Oldest creationTimestamp wins; the name breaks ties. RFC 3339 UTC strings order as text. */
static const json_t *pick_active(const json_t *list)
{
    const json_t *best = NULL;
    size_t i;
    const json_t *cp;
    json_array_foreach (list, i, cp) {
        if (deleting(cp))
            continue;
        if (!best) {
            best = cp;
            continue;
        }
        const char *a = kobj_creation_timestamp(cp);
        const char *b = kobj_creation_timestamp(best);
        int cmp = strcmp(a ? a : "", b ? b : "");
        if (cmp < 0 || (cmp == 0 && strcmp(kobj_name(cp) ?: "", kobj_name(best) ?: "") < 0))
            best = cp;
    }
    return best;
}

/* ---- status ------------------------------------------------------------------------------- */

/* The one rule (kobj_condition): a condition keeps its lastTransitionTime while its status does
 * not change. */
json_t *op_condition(const struct op_status_ctx *sc, const char *type, bool status,
                     const char *reason, const char *message)
{
    return kobj_condition(sc->old_conditions, type, status, reason, message, sc->now,
                          sc->generation);
}

/* The stored message of a condition, to report each change once: what was reported lives in
 * the ClusterPolicy's status, so a restarted operator repeats nothing. */
const char *op_stored_condition(const json_t *cp, const char *type, const char *status)
{
    return kobj_condition_message(kobj_at(cp, "status", "conditions"), type, status);
}

/* ---- reports ------------------------------------------------------------------------------ */

void op_report_init(struct op_report *r, const json_t *obj)
{
    *r = (struct op_report){.name = xstrdup(kobj_name(obj) ?: ""),
                            .object = json_incref((json_t *)obj)};
}

void op_report_event(struct op_report *r, const char *type, const char *reason, const char *message)
{
    r->events = xrealloc(r->events, (r->n_events + 1) * sizeof(*r->events));
    r->events[r->n_events++] = (struct op_event){type, reason, xstrdup(message ? message : "")};
}

void op_report_status(struct op_report *r, json_t *status)
{
    json_t *old = json_object_get(r->object, "status");
    json_decref(r->status);
    r->status = status;
    r->write = !(old && json_equal(old, status));
}

void op_report_done(struct op_report *r)
{
    free(r->name);
    json_decref(r->object);
    json_decref(r->status);
    for (size_t i = 0; i < r->n_events; i++)
        free(r->events[i].message);
    free(r->events);
    *r = (struct op_report){0};
}

static bool is_gpucluster(const json_t *obj)
{
    return streq_ptr(kobj_kind(obj), "GPUCluster");
}

/* A policy's status set on its report, in the shape its CRD holds. */
static void report_status(struct op_report *r, json_t *status)
{
    op_report_status(r, is_gpucluster(r->object) ? op_gpucluster_status(status) : status);
}

/* A new policy report, appended to the plan's (the pointer holds until the next one). */
static struct op_policy_report *policy_report(struct op_plan *plan, const json_t *cp, bool active)
{
    plan->policies = xrealloc(plan->policies, (plan->n_policies + 1) * sizeof(*plan->policies));
    struct op_policy_report *pr = &plan->policies[plan->n_policies++];
    *pr = (struct op_policy_report){.active = active, .valid = true};
    op_report_init(&pr->r, cp);
    return pr;
}

void op_write_errors_add(struct op_write_errors *w, const char *object, const char *reason)
{
    w->v = xrealloc(w->v, (w->n + 1) * sizeof(*w->v));
    w->v[w->n++] = (struct op_write_error){xstrdup(object), xstrdup(reason)};
}

bool op_write_errors_equal(const struct op_write_errors *a, const struct op_write_errors *b)
{
    size_t na = a ? a->n : 0, nb = b ? b->n : 0;
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a->v[i].object, b->v[i].object) != 0 ||
            strcmp(a->v[i].reason, b->v[i].reason) != 0)
            return false;
    return true;
}

void op_write_errors_done(struct op_write_errors *w)
{
    for (size_t i = 0; i < w->n; i++) {
        free(w->v[i].object);
        free(w->v[i].reason);
    }
    free(w->v);
    *w = (struct op_write_errors){0};
}

void op_status_ctx_init(struct op_status_ctx *sc, const json_t *cp, uint64_t now_ms)
{
    sc->old_conditions = kobj_at(cp, "status", "conditions");
    sc->generation = kobj_generation(cp);
    time_rfc3339(now_ms, sc->now, sizeof(sc->now));
}

/* Every ClusterPolicy but the active one is ignored, as NVIDIA's operator does. */
static void plan_ignored(const struct op_snapshot *s, const json_t *cp, const json_t *active,
                         struct op_plan *plan)
{
    struct op_status_ctx sc;
    op_status_ctx_init(&sc, cp, s->now_ms);
    struct op_report *r = &policy_report(plan, cp, false)->r;
    _cleanup_free_ char *msg = xasprintf("another %s (%s) is active; only one is reconciled",
                                         kobj_kind(cp) ?: "ClusterPolicy", kobj_name(active));
    json_t *st =
        json_pack("{s:s,s:s,s:[o]}", "state", "ignored", "namespace", s->defaults->namespace,
                  "conditions", op_condition(&sc, "Ready", false, "Ignored", msg));
    bool told = is_gpucluster(cp)
                    ? streq_ptr(op_stored_condition(cp, "Ready", "False"), msg)
                    : json_equal(kobj_at(cp, "status", "state"), json_object_get(st, "state"));
    if (!told)
        op_report_event(r, "Warning", "Ignored", msg);
    report_status(r, st);
}

/* The status of a policy that is not reconciled: notReady, Ready False and Error True with
 * `reason` and `why`, its other conditions kept as they were. */
static void report_refused(const struct op_snapshot *s, const json_t *obj,
                           struct op_policy_report *pr, const char *reason, const char *why)
{
    struct op_status_ctx sc;
    op_status_ctx_init(&sc, obj, s->now_ms);
    json_t *prev = json_object_get(obj, "status");
    json_t *st = prev ? json_deep_copy(prev) : json_object();
    json_object_set_new(st, "state", json_string("notReady"));
    json_object_set_new(st, "namespace", json_string(s->defaults->namespace));
    json_t *conds = json_array();
    json_array_append_new(conds, op_condition(&sc, "Ready", false, reason, why));
    json_array_append_new(conds, op_condition(&sc, "Error", true, reason, why));
    size_t k;
    json_t *oc;
    json_array_foreach (sc.old_conditions, k, oc) {
        const char *t = kobj_str(oc, "type");
        if (!streq_ptr(t, "Ready") && !streq_ptr(t, "Error"))
            json_array_append(conds, oc);
    }
    json_object_set_new(st, "conditions", conds);
    report_status(&pr->r, st);
}

/* Invalid: the running operands stay exactly as they are; the status says why, and the other
 * conditions stay as they were, so what was reported (UnsupportedFields, ...) is not reported
 * again once the policy is fixed. */
static void plan_invalid(const struct op_snapshot *s, const json_t *cp, const char *why,
                         struct op_plan *plan)
{
    struct op_policy_report *pr = policy_report(plan, cp, true);
    pr->valid = false;
    if (!streq_ptr(op_stored_condition(cp, "Error", "True"), why))
        op_report_event(&pr->r, "Warning",
                        is_gpucluster(cp) ? "InvalidGPUCluster" : "InvalidClusterPolicy", why);
    report_refused(s, cp, pr, "ReconcileFailed", why);
}

/* A GPUCluster and a ClusterPolicy together: both refused, as NVIDIA's operator refuses them.
 * Nothing is applied or pruned, no node is patched: what runs keeps running (no disruption)
 * until one of them is deleted. Each says why in its conditions, with an Event when that is
 * new. */
static struct op_policy_report *plan_conflict(const struct op_snapshot *s, const json_t *obj,
                                              const json_t *other, struct op_plan *plan)
{
    struct op_policy_report *pr = policy_report(plan, obj, false);
    pr->valid = false;
    _cleanup_free_ char *why = xasprintf(
        "conflicting %s resource \"%s\" found: a GPUCluster and a ClusterPolicy cannot co-exist; "
        "neither is reconciled, and what runs is left as it is, until one of them is deleted",
        kobj_kind(other) ?: "?", kobj_name(other) ?: "");
    if (!streq_ptr(op_stored_condition(obj, "Error", "True"), why))
        op_report_event(&pr->r, "Warning", "ConflictingResources", why);
    report_refused(s, obj, pr, "ConflictingResources", why);
    return pr;
}

/* ---- nodes -------------------------------------------------------------------------------- */

static bool driver_targets_after(const json_t *labels, const json_t *patch)
{
    const char *deploy = op_label_after(labels, patch, "nvidia.com/gpu.deploy.driver");
    return !deploy || !*deploy || strcmp(deploy, "true") == 0;
}

static bool driver_targets(const json_t *labels)
{
    return driver_targets_after(labels, NULL);
}

bool op_node_runs_driver_after(const json_t *labels, const json_t *patch)
{
    return driver_targets_after(labels, patch) &&
           !streq_ptr(op_label_after(labels, patch, OP_LABEL_DEPLOY_OPERANDS), "false");
}

bool op_node_runs_driver(const json_t *labels)
{
    return op_node_runs_driver_after(labels, NULL);
}

/* The driver image's OS suffix from the NFD os_release labels of the GPU nodes the driver
 * DaemonSet will run on (the most common; ties to the first by name); *ret_counts: tag -> nodes. */
static char *os_tag_of(const json_t *nodes, json_t **ret_counts)
{
    _cleanup_json_ json_t *counts = json_object();
    size_t i;
    const json_t *n;
    json_array_foreach (nodes, i, n) {
        json_t *labels = kobj_labels(n);
        if (!op_node_is_gpu(labels))
            continue;
        /* Nodes with a pre-installed driver (or operands off) never run the driver image. */
        if (!op_node_runs_driver(labels))
            continue;
        const char *id = kobj_labels_get(labels, "feature.node.kubernetes.io/system-os_release.ID");
        const char *ver =
            kobj_labels_get(labels, "feature.node.kubernetes.io/system-os_release.VERSION_ID");
        if (!id || !ver)
            continue;
        _cleanup_free_ char *tag = xasprintf("%s%s", id, ver);
        json_t *cnt = json_object_get(counts, tag);
        json_object_set_new(counts, tag,
                            json_integer(json_is_integer(cnt) ? json_integer_value(cnt) + 1 : 1));
    }
    const char *best = NULL;
    json_int_t best_n = 0;
    const char *k;
    json_t *v;
    json_object_foreach (counts, k, v) {
        if (json_integer_value(v) > best_n ||
            (json_integer_value(v) == best_n && best && strcmp(k, best) < 0)) {
            best = k;
            best_n = json_integer_value(v);
        }
    }
    char *ret = best ? xstrdup(best) : NULL;
    *ret_counts = steal_ptr(&counts);
    return ret;
}

static int count_gpu_nodes(const json_t *nodes)
{
    int gpu = 0;
    size_t i;
    const json_t *n;
    json_array_foreach (nodes, i, n) {
        if (op_node_is_gpu(kobj_labels(n)))
            gpu++;
    }
    return gpu;
}

/* GPU nodes whose stack the validator passed: its plugin validation (the last of the chain)
 * says ok and no validation says failed. */
static int count_ready_gpu_nodes(const json_t *nodes)
{
    int ready = 0;
    size_t i;
    const json_t *n;
    json_array_foreach (nodes, i, n) {
        if (!op_node_is_gpu(kobj_labels(n)))
            continue;
        bool plugin_ok = false, failed = false;
        for (int c = 0; c < NODESTATE_COMP_COUNT; c++) {
            char key[64];
            nodestate_validation_key((enum nodestate_component)c, key, sizeof(key));
            const char *text = kobj_str(kobj_annotations(n), key);
            struct nodestate_validation v;
            struct err e = {0};
            if (!text || nodestate_validation_parse(text, &v, &e) < 0)
                continue;
            failed |= v.state == NODESTATE_V_FAILED;
            plugin_ok |= c == NODESTATE_COMP_PLUGIN && v.state == NODESTATE_V_OK;
        }
        ready += plugin_ok && !failed;
    }
    return ready;
}

/* The driver loaded on the node is the driver container's (the driver manager's
 * gpuop.dev/driver-owner): another version there is an upgrade under way, not a host driver. */
static bool driver_is_containers(const json_t *node)
{
    const char *text = kobj_annotation(node, NODESTATE_ANN_DRIVER_OWNER);
    struct nodestate_driver_owner o;
    struct err e = {0};
    return text && nodestate_driver_owner_parse(text, &o, &e) == 0 &&
           o.owner == NODESTATE_OWNER_CONTAINER;
}

/* Node label patches, with the driver owner labels of `owners` (node -> value or null); *warnings
 * gets a line per node where a host driver of another version is already loaded while the
 * ClusterPolicy's driver DaemonSet targets the node (two drivers would race). */
static int plan_nodes(const json_t *nodes, const struct op_policy *p, const json_t *owners,
                      struct op_plan *plan, json_t *warnings, struct err *e)
{
    /* equal patches held once (on a fresh install every GPU node's is the same): read-only */
    _cleanup_json_ json_t *intern = json_object();
    size_t i;
    const json_t *n;
    json_array_foreach (nodes, i, n) {
        json_t *labels = kobj_labels(n);
        _cleanup_json_ json_t *patch = NULL;
        int r = op_node_labels(labels, p, &patch, e);
        if (r < 0)
            return err_prefix(e, "node %s", kobj_name(n));
        json_t *owner = json_object_get(owners, kobj_name(n) ?: "");
        if (owner)
            json_object_set(patch, OP_LABEL_DRIVER_OWNER, owner);
        if (p->operand[OP_DRIVER].enabled && kobj_name(n)) {
            /* as the node will be: the patch written (read through it, no merged copy) */
            bool driver =
                op_node_is_gpu_after(labels, patch) && op_node_runs_driver_after(labels, patch) &&
                (!p->use_nvidia_driver_crd || op_label_after(labels, patch, OP_LABEL_DRIVER_OWNER));
            if (driver)
                json_object_set_new(plan->driver_nodes, kobj_name(n), json_true());
        }
        if (p->operand[OP_DRIVER].enabled && !p->use_nvidia_driver_crd && p->driver_version[0] &&
            op_node_is_gpu(labels)) {
            const char *loaded = kobj_labels_get(labels, "nvidia.com/cuda.driver-version.full");
            if (loaded && strcmp(loaded, p->driver_version) != 0 && driver_targets(labels) &&
                !driver_is_containers(n))
                json_array_append_new(warnings,
                                      json_sprintf("node %s: a driver %s is already loaded; the "
                                                   "driver DaemonSet would install %s (label it "
                                                   "nvidia.com/gpu.deploy.driver=pre-installed)",
                                                   kobj_name(n), loaded, p->driver_version));
        }
        if (json_object_size(patch) > 0) {
            plan->node_patches = xrealloc(plan->node_patches,
                                          (plan->n_node_patches + 1) * sizeof(*plan->node_patches));
            plan->node_patches[plan->n_node_patches++] = (struct op_node_patch){
                xstrdup(kobj_name(n) ?: ""), kobj_intern(intern, steal_ptr(&patch))};
        }
    }
    /* nothing changed a patch once interned */
    assert(kobj_intern_check(intern));
    return 0;
}

/* ---- objects ------------------------------------------------------------------------------ */

static bool same_object(const json_t *a, const json_t *b)
{
    return streq_ptr(kobj_kind(a), kobj_kind(b)) && streq_ptr(kobj_name(a), kobj_name(b)) &&
           streq_ptr(kobj_namespace(a), kobj_namespace(b));
}

static const json_t *find_live(const json_t *owned, const json_t *desired)
{
    size_t i;
    const json_t *o;
    json_array_foreach (owned, i, o) {
        if (same_object(o, desired))
            return o;
    }
    return NULL;
}

bool op_object_current(const json_t *desired, const json_t *live)
{
    if (!live)
        return false;
    const char *want = kobj_annotation(desired, OP_HASH_ANNOTATION);
    const char *have = kobj_annotation(live, OP_HASH_ANNOTATION);
    return want && streq_ptr(want, have) &&
           streq_ptr(kobj_label(live, "app.kubernetes.io/managed-by"), OP_MANAGED_BY);
}

static bool owned_by_policy(const json_t *obj)
{
    json_t *refs = kobj_at(obj, "metadata", "ownerReferences");
    size_t i;
    json_t *ref;
    json_array_foreach (refs, i, ref) {
        if (streq_ptr(kobj_str(ref, "kind"), "ClusterPolicy") ||
            streq_ptr(kobj_str(ref, "kind"), "GPUCluster"))
            return true;
    }
    return false;
}

/* What gpuop owns that is no longer wanted (a component turned off). Only ever planned for a
 * valid policy: nothing is deleted because of a parse or validation error. */
static void plan_prune(const json_t *owned, struct op_plan *plan)
{
    size_t i;
    const json_t *o;
    json_array_foreach (owned, i, o) {
        if (!owned_by_policy(o) || deleting(o) || find_live(plan->desired, o))
            continue;
        const char *ns = kobj_namespace(o);
        plan->prune = xrealloc(plan->prune, (plan->n_prune + 1) * sizeof(*plan->prune));
        plan->prune[plan->n_prune++] = (struct op_object_ref){
            xstrdup(kobj_kind(o) ?: ""), ns ? xstrdup(ns) : NULL, xstrdup(kobj_name(o) ?: "")};
    }
}

const json_t *op_find_daemonset(const json_t *owned, const char *ns, const char *name)
{
    size_t i;
    const json_t *o;
    json_array_foreach (owned, i, o) {
        if (streq_ptr(kobj_kind(o), "DaemonSet") && streq_ptr(kobj_name(o), name) &&
            streq_ptr(kobj_namespace(o), ns))
            return o;
    }
    return NULL;
}

/* "2 object(s) not written: DaemonSet gpu-operator/x: reason; ..." or NULL when none failed.
 * At most a few are named, so the condition stays readable. */
static char *write_errors_msg(const struct op_write_errors *errors)
{
    size_t n = errors ? errors->n : 0;
    if (n == 0)
        return NULL;
    char *msg = xasprintf("%zu object(s) not written", n);
    for (size_t i = 0; i < n; i++) {
        const struct op_write_error *x = &errors->v[i];
        char *next = i == 4 ? xasprintf("%s; and %zu more", msg, n - i)
                            : xasprintf("%s%s %s: %s", msg, i ? ";" : ":", x->object ?: "?",
                                        x->reason ?: "?");
        free(msg);
        msg = next;
        if (i == 4)
            break;
    }
    return msg;
}

/* ---- what the node agents found ----------------------------------------------------------- */

#define FINDINGS_NODES_MAX 20    /* nodes named in one condition message; the rest are counted */
#define FINDINGS_MSG_MAX   16384 /* well under the CRD's 32768 for a condition message */

/* "gpu-1: ...; gpu-2: ..." with at most FINDINGS_NODES_MAX lines (and FINDINGS_MSG_MAX bytes),
 * then "; and N more nodes". */
static char *join_lines(const json_t *lines)
{
    size_t n = json_array_size(lines), i;
    char *msg = xstrdup("");
    for (i = 0; i < n && i < FINDINGS_NODES_MAX; i++) {
        const char *line = json_string_value(json_array_get(lines, i));
        if (i > 0 && strlen(msg) + strlen(line) + 2 > FINDINGS_MSG_MAX)
            break;
        char *next = xasprintf("%s%s%s", msg, i ? "; " : "", line);
        free(msg);
        msg = next;
    }
    if (i < n) {
        char *next = xasprintf("%s; and %zu more nodes", msg, n - i);
        free(msg);
        msg = next;
    }
    return msg;
}

/* One finding as a condition, True while some node reports it (absent otherwise), with a
 * Warning Event each time its message changes and a Normal one when it clears. */
static void finding(const struct op_status_ctx *sc, const json_t *cp, struct op_report *r,
                    json_t *conds, const json_t *lines, const char *type, const char *reason,
                    const char *cleared_reason, const char *cleared_msg)
{
    const char *stored = op_stored_condition(cp, type, "True");
    if (json_array_size(lines) == 0) {
        if (stored)
            op_report_event(r, "Normal", cleared_reason, cleared_msg);
        return;
    }
    _cleanup_free_ char *msg = join_lines(lines);
    if (!streq_ptr(stored, msg))
        op_report_event(r, "Warning", type, msg);
    json_array_append_new(conds, op_condition(sc, type, true, reason, msg));
}

/* Nodes whose validation failed, and nodes that advertise fewer GPUs than they have (the node
 * status exporter's gpu-count annotation, past its grace period): an incident even while pods
 * still schedule. Neither changes the policy's readiness, which follows the operands. */
static void plan_findings(const struct op_status_ctx *sc, const json_t *nodes, const json_t *cp,
                          struct op_report *r, json_t *conds)
{
    _cleanup_json_ json_t *failed = NULL, *mismatch = NULL;
    op_node_findings(nodes, &failed, &mismatch);
    finding(sc, cp, r, conds, failed, "ValidationFailed", "NodeValidationFailed",
            "ValidationRecovered", "no node reports a failed validation");
    finding(sc, cp, r, conds, mismatch, "GPUCountMismatch", "AdvertisedFewerGPUs",
            "GPUCountMatched", "every node advertises the GPUs it has");
}

/* The snapshot's other findings (op_snapshot.findings), by the same rules as the nodes' ones;
 * each carries its own Event type and at most a few lines. */
static void plan_more_findings(const struct op_status_ctx *sc, const json_t *findings,
                               const json_t *cp, struct op_report *r, json_t *conds)
{
    size_t i;
    const json_t *f;
    json_array_foreach (findings, i, f) {
        const char *type = kobj_str(f, "type");
        const json_t *lines = json_object_get(f, "lines");
        const char *stored = op_stored_condition(cp, type, "True");
        if (json_array_size(lines) == 0) {
            if (stored)
                op_report_event(r, "Normal", kobj_str(f, "cleared_reason"),
                                kobj_str(f, "cleared_message"));
            continue;
        }
        _cleanup_free_ char *msg = join_lines(lines);
        if (!streq_ptr(stored, msg))
            op_report_event(r, kobj_str(f, "event_type"), type, msg);
        json_array_append_new(conds, op_condition(sc, type, true, kobj_str(f, "reason"), msg));
    }
}

/* ---- the active policy, phase by phase ---------------------------------------------------- */

/* What the active, valid policy's phases share. */
struct active {
    const struct op_snapshot *s;
    const json_t *cp;
    const struct op_policy *p;
    struct op_status_ctx sc;
    struct op_policy_report *pr; /* its report (set last: the plan's array may move before) */
    struct op_nvd_result nvd;
    bool delegated;          /* NVIDIADrivers own the driver (useNvidiaDriverCRD) */
    json_t *warnings;        /* host driver conflicts, a line per node */
    json_t *os_counts;       /* driver OS tag -> GPU nodes */
    char *os_tag;            /* the most common one */
    json_t *conds;           /* the status's conditions, in order */
    json_t *not_ready;       /* the components' states not ready */
    char *unsup_msg;         /* the UnsupportedFields message */
    bool servicemonitor;     /* the policy renders the exporter's ServiceMonitor */
    json_t *precompiled;     /* driver.usePrecompiled: its DaemonSets' names; NULL: not used */
    json_t *no_kernel;       /* driver nodes no precompiled DaemonSet can select, a line each */
    const char *kmc_missing; /* driver.kernelModuleConfig names a ConfigMap that is not there */
    const json_t *kmc;       /* that ConfigMap, as read; NULL: none named, or missing */
    struct op_event *events; /* the report's Events, until it exists */
    size_t n_events;
};

static void active_event(struct active *a, const char *type, const char *reason, const char *msg)
{
    a->events = xrealloc(a->events, (a->n_events + 1) * sizeof(*a->events));
    a->events[a->n_events++] = (struct op_event){type, reason, xstrdup(msg)};
}

static void active_done(struct active *a)
{
    op_nvd_result_done(&a->nvd);
    json_decref(a->warnings);
    json_decref(a->precompiled);
    json_decref(a->no_kernel);
    json_decref(a->os_counts);
    free(a->os_tag);
    json_decref(a->conds);
    json_decref(a->not_ready);
    free(a->unsup_msg);
    for (size_t i = 0; i < a->n_events; i++)
        free(a->events[i].message);
    free(a->events);
}

/* The NVIDIADrivers' DaemonSets, owners and reports (nvdriver.c), then the node label patches. */
static int plan_drivers_and_nodes(struct active *a, struct op_plan *plan, struct err *e)
{
    const struct op_snapshot *s = a->s;
    struct op_nvd_input ni = {.nvidia_drivers = s->nvidia_drivers,
                              .nodes = s->nodes,
                              .owned = s->owned,
                              .policy = a->p,
                              .templates = s->templates,
                              .configmaps = s->configmaps,
                              .delegated = a->delegated,
                              .now_ms = s->now_ms};
    int r = op_nvd_plan(&ni, &a->nvd, e);
    if (r < 0)
        return r;
    plan->nvidia_drivers = steal_ptr(&a->nvd.reports);
    plan->n_nvidia_drivers = a->nvd.n_reports;
    a->nvd.n_reports = 0;
    return plan_nodes(s->nodes, a->p, a->nvd.owners, plan, a->warnings, e);
}

/* ---- driver.usePrecompiled ------------------------------------------------------------------ */

/* A DaemonSet name part from a kernel release ("5.15.0-69-generic"): lower case, [a-z0-9.-]. */
static char *name_part(const char *s)
{
    char *out = xstrdup(s);
    for (char *c = out; *c; c++) {
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
        else if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '.' || *c == '-'))
            *c = '-';
    }
    return out;
}

static void set_label_at(json_t *obj, const char *const *path, const char *k, const char *v)
{
    json_t *cur = obj;
    for (; *path; path++)
        cur = kobj_ensure_object(cur, *path);
    json_object_set_new(cur, k, json_string(v));
}

/*
 * driver.usePrecompiled (ClusterPolicy): NVIDIA's precompiled images are built for one kernel,
 * so the single driver DaemonSet becomes one per kernel and OS among the nodes the driver
 * targets (plan->driver_nodes), each selecting on NFD's kernel label and OS labels, named
 * nvidia-driver-daemonset-<kernel>-<os> (a hash of it past 63 characters), running
 * <repository>/<image>:<branch>-<kernel>-<os>. A kernel no node runs any more has no DaemonSet
 * and its old one is pruned. The kernel is the node's (status.nodeInfo.kernelVersion, else the
 * label); a node whose label is missing or says another kernel cannot be selected: it goes to
 * a->no_kernel. Keeps the objects' order: the DaemonSets take the single one's place.
 */
static int plan_precompiled(struct active *a, struct op_plan *plan, struct err *e)
{
    const struct op_snapshot *s = a->s;
    const char *single = op_component_def(OP_DRIVER)->ds_name;
    size_t at = SIZE_MAX, i;
    json_t *obj;
    json_array_foreach (plan->desired, i, obj) {
        if (streq_ptr(kobj_kind(obj), "DaemonSet") && streq_ptr(kobj_name(obj), single)) {
            at = i;
            break;
        }
    }
    if (at == SIZE_MAX)
        return 0; /* an override template without the driver's DaemonSet */
    json_array_remove(plan->desired, at);
    a->precompiled = json_array();
    a->no_kernel = json_array();
    _cleanup_json_ json_t *groups = json_object(); /* "<kernel> <os>" -> [kernel, id, ver] */
    const json_t *n;
    json_array_foreach (s->nodes, i, n) {
        const char *node = kobj_name(n);
        if (!node || !json_object_get(plan->driver_nodes, node))
            continue;
        const json_t *labels = kobj_labels(n);
        const char *label = kobj_labels_get(labels, OP_LABEL_KERNEL);
        const char *info = kobj_path_str(n, "status.nodeInfo.kernelVersion");
        const char *kernel = info && *info ? info : label;
        const char *id = kobj_labels_get(labels, "feature.node.kubernetes.io/system-os_release.ID");
        const char *ver =
            kobj_labels_get(labels, "feature.node.kubernetes.io/system-os_release.VERSION_ID");
        if (!kernel || !*kernel || !streq_ptr(label, kernel) || !id || !*id || !ver || !*ver) {
            json_array_append_new(
                a->no_kernel,
                json_sprintf("node %s: %s", node,
                             !kernel || !*kernel ? "its kernel is unknown"
                             : !label            ? "no " OP_LABEL_KERNEL " label"
                             : !streq_ptr(label, kernel)
                                 ? "its " OP_LABEL_KERNEL " label is not its running kernel"
                                 : "no system-os_release ID and VERSION_ID labels"));
            continue;
        }
        _cleanup_free_ char *key = xasprintf("%s %s%s", kernel, id, ver);
        if (!json_object_get(groups, key))
            json_object_set_new(groups, key, json_pack("[s,s,s]", kernel, id, ver));
    }
    size_t ng = json_object_size(groups), k = 0;
    _cleanup_free_ const char **keys = xcalloc(ng + 1, sizeof(*keys));
    const char *key;
    json_t *g;
    json_object_foreach (groups, key, g) { /* in order (a few kernels: insertion) */
        size_t j = k++;
        for (; j > 0 && strcmp(keys[j - 1], key) > 0; j--)
            keys[j] = keys[j - 1];
        keys[j] = key;
    }
    _cleanup_free_ char *base = xasprintf("%s/%s", a->p->driver_repository, a->p->driver_image);
    for (k = 0; k < ng; k++) {
        g = json_object_get(groups, keys[k]);
        const char *kernel = json_string_value(json_array_get(g, 0));
        const char *id = json_string_value(json_array_get(g, 1));
        const char *ver = json_string_value(json_array_get(g, 2));
        _cleanup_free_ char *os = xasprintf("%s%s", id, ver);
        _cleanup_free_ char *image = op_precompiled_image(base, a->p->driver_version, kernel, os);
        struct op_render_ctx ctx = {
            .os_tag = os, .driver_image = image, .kernel_module_config = a->kmc};
        _cleanup_json_ json_t *ds = NULL;
        int r = op_render_driver_daemonset(a->p, s->templates, &ctx, &ds, e);
        if (r < 0)
            return r;
        _cleanup_free_ char *kpart = name_part(kernel);
        _cleanup_free_ char *full = xasprintf("%s-%s-%s", single, kpart, os);
        _cleanup_free_ char *name =
            strlen(full) <= 63
                ? xstrdup(full)
                : xasprintf("%s-%08llx-%s", single,
                            (unsigned long long)(op_fnv64(kernel) & 0xffffffffu), os);
        static const char *const meta_labels[] = {"metadata", "labels", NULL};
        static const char *const match[] = {"spec", "selector", "matchLabels", NULL};
        static const char *const tmpl_labels[] = {"spec", "template", "metadata", "labels", NULL};
        static const char *const node_sel[] = {"spec", "template", "spec", "nodeSelector", NULL};
        json_object_set_new(kobj_ensure_object(ds, "metadata"), "name", json_string(name));
        set_label_at(ds, meta_labels, OP_LABEL_DRIVER_DS, name);
        set_label_at(ds, match, OP_LABEL_DRIVER_DS, name);
        set_label_at(ds, tmpl_labels, OP_LABEL_DRIVER_DS, name);
        set_label_at(ds, node_sel, OP_LABEL_KERNEL, kernel);
        set_label_at(ds, node_sel, "feature.node.kubernetes.io/system-os_release.ID", id);
        set_label_at(ds, node_sel, "feature.node.kubernetes.io/system-os_release.VERSION_ID", ver);
        op_finish_object(ds, a->p);
        json_array_insert(plan->desired, at + k, ds);
        json_array_append_new(a->precompiled, json_string(name));
    }
    return 0;
}

/* Every object the policy renders (with the NVIDIADrivers' DaemonSets in place of its single
 * driver DaemonSet when they own the driver); those not current are applied, what gpuop owns
 * and no longer renders is pruned. */
static int plan_objects(struct active *a, struct op_plan *plan, struct err *e)
{
    const struct op_snapshot *s = a->s;
    a->os_tag = os_tag_of(s->nodes, &a->os_counts);
    const char *kmc_name = kobj_path_str(a->p->operand[OP_DRIVER].spec, "kernelModuleConfig.name");
    if (kmc_name && *kmc_name && a->p->operand[OP_DRIVER].enabled && !a->delegated) {
        size_t j;
        const json_t *cm;
        json_array_foreach (s->configmaps, j, cm)
            if (streq_ptr(kobj_name(cm), kmc_name) &&
                streq_ptr(kobj_namespace(cm), s->defaults->namespace))
                a->kmc = cm;
        if (!a->kmc)
            a->kmc_missing = kmc_name;
    }
    struct op_render_ctx ctx = {.os_tag = a->os_tag, .kernel_module_config = a->kmc};
    json_decref(plan->desired);
    plan->desired = NULL;
    int r = op_render(a->p, s->templates, &ctx, &plan->desired, e);
    if (r < 0)
        return r;
    size_t i;
    json_t *obj;
    /* Without the Prometheus Operator's CRD a ServiceMonitor has nowhere to go: left out, as
     * NVIDIA's operator leaves it out. */
    for (i = json_array_size(plan->desired); i-- > 0;) {
        if (!streq_ptr(kobj_kind(json_array_get(plan->desired, i)), "ServiceMonitor"))
            continue;
        a->servicemonitor = true;
        plan->servicemonitor_missing = !s->servicemonitor_served;
        if (!s->servicemonitor_served)
            json_array_remove(plan->desired, i);
    }
    plan->namespace_patch = op_psa_patch(a->p, s->namespace_obj);
    if (a->p->operand[OP_DRIVER].enabled && !a->delegated &&
        json_is_true(json_object_get(a->p->operand[OP_DRIVER].spec, "usePrecompiled")) &&
        (r = plan_precompiled(a, plan, e)) < 0)
        return r;
    if (a->delegated) {
        json_array_foreach (plan->desired, i, obj) {
            if (streq_ptr(kobj_kind(obj), "DaemonSet") &&
                streq_ptr(kobj_name(obj), op_component_def(OP_DRIVER)->ds_name)) {
                json_array_remove(plan->desired, i);
                break;
            }
        }
        json_array_extend(plan->desired, a->nvd.objects);
        /* NVIDIADrivers not listed yet: the single DaemonSet stays too (not pruned before
         * anything can take its nodes) */
        const json_t *single = op_find_daemonset(s->owned, s->defaults->namespace,
                                                 op_component_def(OP_DRIVER)->ds_name);
        if (!s->nvidia_drivers && single)
            json_array_append(plan->desired, (json_t *)single);
    }
    json_array_foreach (plan->desired, i, obj) {
        /* Its kernel module ConfigMap missing: NVIDIA's operator fails the driver's state and
         * changes nothing of it; so does gpuop (the status says why). */
        if (a->kmc_missing && streq_ptr(kobj_kind(obj), "DaemonSet") &&
            strncmp(kobj_name(obj) ?: "", op_component_def(OP_DRIVER)->ds_name,
                    strlen(op_component_def(OP_DRIVER)->ds_name)) == 0)
            continue;
        if (!op_object_current(obj, find_live(s->owned, obj)))
            json_array_append(plan->apply, obj);
    }
    plan_prune(s->owned, plan);
    /* an object is applied only if desired, and never both applied and pruned */
    assert(json_array_size(plan->apply) <= json_array_size(plan->desired));
    return 0;
}

/* A condition per component from its DaemonSet (or the NVIDIADrivers'); the states not ready
 * go to a->not_ready. */
static void component_conditions(struct active *a)
{
    const struct op_snapshot *s = a->s;
    for (int k = 0; k < OP_N_COMPONENTS; k++) {
        const struct op_component_def *def = op_component_def(k);
        _cleanup_free_ char *type = xasprintf("%sReady", def->title);
        if (!a->p->operand[k].enabled) {
            const char *why =
                !def->ds_name       ? "not deployed by gpuop"
                : !a->p->gpucluster ? "disabled in the ClusterPolicy"
                : k == OP_DEVICE_PLUGIN
                    ? "not deployed for a GPUCluster: the DRA kubelet plugin serves the GPUs"
                : k == OP_MIG_MANAGER ? "not deployed for a GPUCluster"
                                      : "disabled in the GPUCluster";
            json_array_append_new(a->conds, op_condition(&a->sc, type, false, "Disabled", why));
            continue;
        }
        char why[160] = "not created yet";
        bool ready;
        const char *whyp = why;
        bool by_nvds = k == OP_DRIVER && a->delegated;
        if (by_nvds) {
            ready = a->nvd.all_ready;
            whyp = a->nvd.why ? a->nvd.why : "";
        } else if (k == OP_DRIVER && a->precompiled) {
            /* every precompiled DaemonSet ready (none: no node runs the driver) */
            ready = true;
            size_t j;
            const json_t *nm;
            json_array_foreach (a->precompiled, j, nm) {
                const json_t *ds =
                    op_find_daemonset(s->owned, s->defaults->namespace, json_string_value(nm));
                char one[128] = "not created yet";
                if (!ds || !op_ds_ready(ds, one, sizeof(one))) {
                    snprintf(why, sizeof(why), "%s: %s", json_string_value(nm), one);
                    ready = false;
                    break;
                }
            }
        } else {
            const json_t *ds = op_find_daemonset(s->owned, s->defaults->namespace, def->ds_name);
            ready = ds && op_ds_ready(ds, why, sizeof(why));
        }
        if (!ready)
            json_array_append_new(a->not_ready, json_string(def->state));
        const char *msg = !ready    ? whyp
                          : by_nvds ? "every NVIDIADriver applied and ready"
                                    : "applied and ready";
        json_array_append_new(
            a->conds, op_condition(&a->sc, type, ready, ready ? "Ready" : "OperandNotReady", msg));
    }
    if (a->p->gpucluster || a->p->dra_nodes) {
        /* the DRA kubelet plugin, the GPUCluster's own operand (or the DRA pools') */
        char why[160] = "not created yet";
        const json_t *ds = op_find_daemonset(s->owned, s->defaults->namespace, OP_DRA_DS_NAME);
        bool ready = ds && op_ds_ready(ds, why, sizeof(why));
        if (!ready)
            json_array_append_new(a->not_ready, json_string("state-dra-driver"));
        json_array_append_new(a->conds, op_condition(&a->sc, "DRADriverReady", ready,
                                                     ready ? "Ready" : "OperandNotReady",
                                                     ready ? "applied and ready" : why));
    }
}

/* Fields accepted and not acted on, a host driver in the way, GPU nodes of several OS under one
 * driver image: each a condition, with an Event when its message changes. */
static void warning_conditions(struct active *a)
{
    const json_t *cp = a->cp;
    if (json_array_size(a->p->unimplemented) > 0)
        json_array_append_new(a->conds, op_condition(&a->sc, "UnsupportedFields", true,
                                                     "AcceptedNotApplied", a->unsup_msg));
    if (json_array_size(a->warnings) > 0) {
        _cleanup_free_ char *w = json_dumps(a->warnings, JSON_COMPACT);
        if (!streq_ptr(op_stored_condition(cp, "HostDriverConflict", "True"), w))
            active_event(a, "Warning", "HostDriverConflict", w);
        json_array_append_new(
            a->conds, op_condition(&a->sc, "HostDriverConflict", true, "HostDriverDetected", w));
    }
    if (a->p->gpu_access_msg) {
        if (!streq_ptr(op_stored_condition(cp, "GPUAccess", "True"), a->p->gpu_access_msg))
            active_event(a, "Warning", "GPUAccess", a->p->gpu_access_msg);
        json_array_append_new(
            a->conds,
            op_condition(&a->sc, "GPUAccess", true, a->p->gpu_access_reason, a->p->gpu_access_msg));
    }
    /* The exporter's ServiceMonitor, wanted: written, or why it was not (no CRD to hold it). */
    if (a->servicemonitor) {
        bool served = a->s->servicemonitor_served;
        const char *msg = served
                              ? "the exporter's ServiceMonitor is applied"
                              : "the ServiceMonitor kind (monitoring.coreos.com/v1) is not served: "
                                "no ServiceMonitor was written; install the Prometheus "
                                "Operator's CRDs and gpuop writes it";
        if (!served && !streq_ptr(op_stored_condition(cp, "ServiceMonitor", "False"), msg))
            active_event(a, "Warning", "ServiceMonitorCRDMissing", msg);
        json_array_append_new(a->conds, op_condition(&a->sc, "ServiceMonitor", served,
                                                     served ? "Applied" : "CRDNotInstalled", msg));
    }
    if (a->kmc_missing) {
        _cleanup_free_ char *w =
            xasprintf("spec.driver.kernelModuleConfig.name: ConfigMap %s/%s not found; the driver "
                      "DaemonSet is left as it is until it exists",
                      a->s->defaults->namespace, a->kmc_missing);
        if (!streq_ptr(op_stored_condition(cp, "KernelModuleConfig", "False"), w))
            active_event(a, "Warning", "KernelModuleConfigMissing", w);
        json_array_append_new(
            a->conds, op_condition(&a->sc, "KernelModuleConfig", false, "ConfigMapNotFound", w));
    }
    /* Precompiled drivers: nodes no DaemonSet can select (NFD's kernel label missing or stale). */
    if (json_array_size(a->no_kernel) > 0) {
        _cleanup_free_ char *w = json_dumps(a->no_kernel, JSON_COMPACT);
        if (!streq_ptr(op_stored_condition(cp, "PrecompiledDriver", "False"), w))
            active_event(a, "Warning", "PrecompiledDriverKernel", w);
        json_array_append_new(
            a->conds, op_condition(&a->sc, "PrecompiledDriver", false, "KernelLabelMissing", w));
    }
    /* One driver DaemonSet runs one image: GPU nodes of another OS would get a driver built for
     * the wrong OS. NVIDIA splits the DaemonSet per OS; gpuop does not yet, so it says so. */
    if (a->p->operand[OP_DRIVER].enabled && !a->delegated && !a->precompiled &&
        json_object_size(a->os_counts) > 1) {
        _cleanup_free_ char *cnt = json_dumps(a->os_counts, JSON_COMPACT | JSON_SORT_KEYS);
        _cleanup_free_ char *w = xasprintf(
            "GPU nodes run different OS versions %s; the driver DaemonSet runs the %s image on all "
            "of them (one driver DaemonSet per OS is not implemented): label the others "
            "nvidia.com/gpu.deploy.driver=false or pre-install their driver",
            cnt, a->os_tag);
        if (!streq_ptr(op_stored_condition(cp, "DriverOSMismatch", "True"), w))
            active_event(a, "Warning", "DriverOSMismatch", w);
        json_array_append_new(
            a->conds, op_condition(&a->sc, "DriverOSMismatch", true, "MixedOperatingSystems", w));
    }
}

/* The policy's status: Ready and Error first (from the components and the last execution's
 * failed writes), the other conditions, the findings, the counts; its Events; the plan's
 * health. */
static void policy_status(struct active *a, struct op_plan *plan)
{
    const struct op_snapshot *s = a->s;
    const json_t *cp = a->cp;
    /* What the last execution could not write (the namespace gone, a 403, a 422): the policy is
     * not ready, whatever the DaemonSets that are left say, until a write succeeds again. */
    _cleanup_free_ char *failed = write_errors_msg(s->apply_errors);
    bool all_ready = json_array_size(a->not_ready) == 0 && !failed;
    _cleanup_free_ char *nr = json_dumps(a->not_ready, JSON_COMPACT);
    const char *kind = op_policy_kind(a->p);
    _cleanup_free_ char *msg =
        failed ? xasprintf("%s is not ready: %s", kind, failed)
        : all_ready
            ? xasprintf("%s is ready as all resources have been successfully reconciled", kind)
            : xasprintf("%s is not ready, states not ready: %s", kind, nr);
    /* NVIDIA's reasons: Ready/Reconciled with Error/Ready when all is well. */
    const char *reason = failed ? "ReconcileFailed" : all_ready ? "Reconciled" : "OperandNotReady";
    json_array_insert_new(a->conds, 0, op_condition(&a->sc, "Ready", all_ready, reason, msg));
    json_array_insert_new(a->conds, 1,
                          op_condition(&a->sc, "Error", failed != NULL,
                                       all_ready ? "Ready" : reason, all_ready ? "" : msg));
    warning_conditions(a);
    struct op_report fr = {0}; /* the findings' Events, in their order after the others */
    plan_findings(&a->sc, s->nodes, cp, &fr, a->conds);
    plan_more_findings(&a->sc, s->findings, cp, &fr, a->conds);
    const char *state = all_ready ? "ready" : "notReady";
    int ready_nodes = count_ready_gpu_nodes(s->nodes), gpu_nodes = count_gpu_nodes(s->nodes);
    assert(ready_nodes >= 0 && ready_nodes <= gpu_nodes);
    json_t *status = json_pack("{s:s,s:O,s:s,s:I,s:s}", "namespace", s->defaults->namespace,
                               "conditions", a->conds, "state", state, "observedGeneration",
                               (json_int_t)a->sc.generation, "operatorVersion", GPUOP_VERSION);
    /* "ready/total" GPU nodes, for kubectl's Nodes column (the CRD's printer columns). */
    json_object_set_new(status, "nodes", json_sprintf("%d/%d", ready_nodes, gpu_nodes));

    a->pr = policy_report(plan, cp, true);
    struct op_report *r = &a->pr->r;
    for (size_t i = 0; i < a->n_events; i++)
        op_report_event(r, a->events[i].type, a->events[i].reason, a->events[i].message);
    for (size_t i = 0; i < fr.n_events; i++)
        op_report_event(r, fr.events[i].type, fr.events[i].reason, fr.events[i].message);
    op_report_done(&fr);
    if (failed) {
        if (!streq_ptr(op_stored_condition(cp, "Error", "True"), msg))
            op_report_event(r, "Warning", "ReconcileFailed", msg);
    } else if (!streq_ptr(kobj_path_str(cp, "status.state"), state)) {
        op_report_event(r, all_ready ? "Normal" : "Warning", all_ready ? "Ready" : "NotReady", msg);
    }
    report_status(r, status);
    plan->health = failed ? -1 : all_ready ? 1 : 0;
    plan->requeue = !all_ready;
}

static int plan_active(const struct op_snapshot *s, const json_t *cp, struct op_plan *plan,
                       struct err *e)
{
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    struct err perr = {0};
    if (op_policy_parse((json_t *)cp, s->defaults, &p, &perr) < 0) {
        plan->health = -1;
        plan_invalid(s, cp, err_msg(&perr), plan);
        return 0;
    }
    p->dra_nodes = s->dra_nodes && !p->gpucluster;
    struct active a = {.s = s,
                       .cp = cp,
                       .p = p,
                       .delegated = p->operand[OP_DRIVER].enabled && p->use_nvidia_driver_crd,
                       .warnings = json_array(),
                       .conds = json_array(),
                       .not_ready = json_array()};
    op_status_ctx_init(&a.sc, cp, s->now_ms);
    int r = plan_drivers_and_nodes(&a, plan, e);
    if (r == 0)
        r = plan_objects(&a, plan, e);
    if (r == 0) {
        /* fields gpuop accepts but does not act on: reported once per distinct set */
        _cleanup_free_ char *unsup = json_dumps(p->unimplemented, JSON_COMPACT);
        a.unsup_msg = xasprintf("accepted, not acted on by gpuop: %s", unsup);
        if (json_array_size(p->unimplemented) > 0 &&
            !streq_ptr(op_stored_condition(cp, "UnsupportedFields", NULL), a.unsup_msg))
            active_event(&a, "Normal", "UnsupportedFields", a.unsup_msg);
        component_conditions(&a);
        policy_status(&a, plan);
    }
    active_done(&a);
    return r;
}

int op_plan(const struct op_snapshot *s, struct op_plan **ret, struct err *e)
{
    _cleanup_(op_plan_freep) struct op_plan *plan = xcalloc(1, sizeof(*plan));
    plan->desired = json_array();
    plan->apply = json_array();
    plan->driver_nodes = json_object();
    plan->gpu_nodes = count_gpu_nodes(s->nodes);

    /* s->policies holds ClusterPolicies and GPUClusters */
    _cleanup_json_ json_t *cps = json_array(), *gcs = json_array();
    size_t i;
    const json_t *cp;
    json_array_foreach (s->policies, i, cp) {
        if (!deleting(cp))
            json_array_append((json_t *)(is_gpucluster(cp) ? gcs : cps), (json_t *)cp);
    }
    const json_t *active = pick_active(cps), *active_gc = pick_active(gcs);
    if (active && active_gc) {
        /* both: each refused, the ClusterPolicy's report the plan's active one (invalid: the
         * shell writes its status and nothing else) */
        json_array_foreach (gcs, i, cp)
            plan_conflict(s, cp, active, plan);
        json_array_foreach (cps, i, cp) {
            if (cp != active)
                plan_conflict(s, cp, active_gc, plan);
        }
        struct op_policy_report *pr = plan_conflict(s, active, active_gc, plan);
        pr->active = true;
        plan->active = pr;
        plan->has_active = true;
        plan->health = -1;
        *ret = steal_ptr(&plan);
        return 0;
    }
    const json_t *list = active ? cps : gcs;
    if (!active)
        active = active_gc;
    json_array_foreach (list, i, cp) {
        if (cp != active)
            plan_ignored(s, cp, active, plan);
    }
    if (active) {
        /* No policy, nothing to do: nodes are labelled once, together with the deploy labels,
         * when a ClusterPolicy arrives (one write per node). */
        plan->has_active = true;
        _cleanup_json_ json_t *as_policy = NULL;
        struct err gerr = {0};
        int r = 0;
        if (is_gpucluster(active) &&
            op_gpucluster_policy(active, json_array_size(s->nvidia_drivers) > 0, &as_policy,
                                 &gerr) < 0) {
            plan->health = -1;
            plan_invalid(s, active, err_msg(&gerr), plan);
        } else {
            r = plan_active(s, as_policy ? as_policy : active, plan, e);
        }
        if (r < 0)
            return r;
        plan->active = &plan->policies[plan->n_policies - 1];
        assert(plan->active->active);
    }
    assert(plan->health >= -1 && plan->health <= 1 && plan->gpu_nodes >= 0);
    *ret = steal_ptr(&plan);
    return 0;
}

void op_plan_free(struct op_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_policies; i++)
        op_report_done(&p->policies[i].r);
    free(p->policies);
    for (size_t i = 0; i < p->n_node_patches; i++) {
        free(p->node_patches[i].node);
        json_decref(p->node_patches[i].labels);
    }
    free(p->node_patches);
    json_decref(p->namespace_patch);
    json_decref(p->desired);
    json_decref(p->driver_nodes);
    json_decref(p->apply);
    for (size_t i = 0; i < p->n_prune; i++) {
        free(p->prune[i].kind);
        free(p->prune[i].ns);
        free(p->prune[i].name);
    }
    free(p->prune);
    for (size_t i = 0; i < p->n_nvidia_drivers; i++)
        op_report_done(&p->nvidia_drivers[i]);
    free(p->nvidia_drivers);
    free(p);
}
