/* SPDX-License-Identifier: Apache-2.0 */
/* The takeover planner (adopt.h): pure. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adopt-internal.h"
#include "kobj.h"

static const char *const action_names[ADOPT_N_ACTIONS] = {
    [ADOPT_ADOPT] = "adopt", [ADOPT_RECREATE] = "recreate", [ADOPT_REPLACE] = "replace",
    [ADOPT_DEFER] = "defer", [ADOPT_REMOVE] = "remove",     [ADOPT_WAIT] = "wait",
    [ADOPT_LEAVE] = "leave", [ADOPT_SURGE] = "surge",
};

const char *adopt_action_name(enum adopt_action a)
{
    return a < ADOPT_N_ACTIONS ? action_names[a] : "?";
}

/* ---- what is NVIDIA's ---------------------------------------------------------------------- */

static bool controlled_by_policy(const json_t *obj)
{
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(obj, "metadata.ownerReferences"), i, r) {
        if (json_is_true(json_object_get(r, "controller")) &&
            streq_ptr(kobj_kind(r), "ClusterPolicy"))
            return true;
    }
    return false;
}

bool adopt_is_nvidia(const json_t *obj)
{
    /* gpuop's, or a Helm release's (a chart's object, gpuop migrate moved it to gpuop's) */
    if (streq_ptr(kobj_label(obj, ADOPT_LABEL_MANAGED_BY), ADOPT_GPUOP_MANAGER) ||
        kobj_annotation(obj, "meta.helm.sh/release-name"))
        return false;
    if (streq_ptr(kobj_kind(obj), "Lease"))
        return streq_ptr(kobj_name(obj), ADOPT_NVIDIA_LEASE);
    return controlled_by_policy(obj);
}

bool adopt_is_nvidia_pod(const json_t *pod)
{
    return streq_ptr(kobj_label(pod, ADOPT_LABEL_MANAGED_BY), ADOPT_NVIDIA_MANAGER);
}

static bool deleting(const json_t *obj)
{
    return kobj_deletion_timestamp(obj) != NULL;
}

/* The driver's DaemonSets and pods: the ClusterPolicy's, and the NVIDIADrivers'. */
static bool is_driver_app(const char *app)
{
    return streq_ptr(app, "nvidia-driver-daemonset") ||
           (app && strncmp(app, "nvidia-gpu-driver-", 18) == 0);
}

static bool is_driver_ds(const json_t *ds)
{
    return is_driver_app(kobj_name(ds)) ||
           streq_ptr(kobj_label(ds, "app.kubernetes.io/component"), "nvidia-driver");
}

bool adopt_is_driver_daemonset(const json_t *ds)
{
    return is_driver_ds(ds);
}

static bool is_driver_pod(const json_t *pod)
{
    return is_driver_app(kobj_label(pod, "app")) ||
           streq_ptr(kobj_label(pod, "app.kubernetes.io/component"), "nvidia-driver");
}

bool adopt_is_driver_pod(const json_t *pod)
{
    return is_driver_pod(pod);
}

/* ---- the plan under construction ------------------------------------------------------------ */

struct builder {
    struct adopt_plan *p;
    size_t cap;
};

static struct adopt_item *add(struct builder *b, enum adopt_action a, const char *kind,
                              const char *ns, const char *name, const char *node, bool now,
                              char *reason /* taken */)
{
    if (b->p->n_items == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 32;
        b->p->items = xrealloc(b->p->items, b->cap * sizeof(*b->p->items));
    }
    struct adopt_item *it = &b->p->items[b->p->n_items++];
    *it = (struct adopt_item){.action = a,
                              .kind = xstrdup(kind ? kind : "?"),
                              .ns = ns ? xstrdup(ns) : NULL,
                              .name = xstrdup(name ? name : "?"),
                              .node = node ? xstrdup(node) : NULL,
                              .now = now,
                              .reason = reason};
    return it;
}

static const json_t *find_desired(const json_t *desired, const json_t *obj)
{
    size_t i;
    json_t *d;
    json_array_foreach ((json_t *)desired, i, d) {
        if (streq_ptr(kobj_kind(d), kobj_kind(obj)) && streq_ptr(kobj_name(d), kobj_name(obj)) &&
            (!adopt_kind_namespaced(kobj_kind(obj)) ||
             streq_ptr(kobj_namespace(d), kobj_namespace(obj))))
            return d;
    }
    return NULL;
}

/* A pod's controller is this DaemonSet (by uid when both have one, else by name). */
static bool owned_by_ds(const json_t *pod, const json_t *ds)
{
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(pod, "metadata.ownerReferences"), i, r) {
        if (!json_is_true(json_object_get(r, "controller")) ||
            !streq_ptr(kobj_kind(r), "DaemonSet"))
            continue;
        const char *uid = kobj_str(r, "uid"), *dsuid = kobj_uid(ds);
        return uid && dsuid ? streq_ptr(uid, dsuid) : streq_ptr(kobj_str(r, "name"), kobj_name(ds));
    }
    return false;
}

static char *selector_text(const json_t *ds)
{
    char *s = kobj_selector_string(kobj_path(ds, "spec.selector.matchLabels"));
    return s ? s : xstrdup("(not matchLabels)");
}

/* The pods of NVIDIA's templates (the driver's aside), live. */
static bool uses_sa(const json_t *pod, const char *sa)
{
    const char *p = kobj_path_str(pod, "spec.serviceAccountName");
    return streq_ptr(p ? p : "default", sa);
}

static bool mounts_configmap(const json_t *pod, const char *cm)
{
    size_t i;
    json_t *v;
    json_array_foreach (kobj_path(pod, "spec.volumes"), i, v) {
        if (streq_ptr(kobj_path_str(v, "configMap.name"), cm))
            return true;
        size_t j;
        json_t *src;
        json_array_foreach (kobj_path(v, "projected.sources"), j, src) {
            if (streq_ptr(kobj_path_str(src, "configMap.name"), cm))
                return true;
        }
    }
    return false;
}

/* How many live pods of NVIDIA's templates `pred` picks, and one of their names. */
static size_t nvidia_pods_that(const json_t *pods, bool (*pred)(const json_t *, const char *),
                               const char *arg, const char **ret_example)
{
    size_t n = 0, i;
    json_t *p;
    json_array_foreach ((json_t *)pods, i, p) {
        if (!adopt_is_nvidia_pod(p) || deleting(p) || !pred(p, arg))
            continue;
        if (n++ == 0 && ret_example)
            *ret_example = kobj_name(p);
    }
    return n;
}

/* The ServiceAccounts a binding names (in ns): whether an NVIDIA pod runs as one of them. */
static size_t binding_in_use(const json_t *binding, const json_t *pods, const char *ns,
                             const char **ret_sa, const char **ret_pod)
{
    size_t i;
    json_t *s;
    json_array_foreach (json_object_get(binding, "subjects"), i, s) {
        if (!streq_ptr(kobj_str(s, "kind"), "ServiceAccount") ||
            !streq_ptr(kobj_str(s, "namespace") ?: kobj_namespace(binding), ns))
            continue;
        size_t n = nvidia_pods_that(pods, uses_sa, kobj_str(s, "name"), ret_pod);
        if (n > 0) {
            *ret_sa = kobj_str(s, "name");
            return n;
        }
    }
    return 0;
}

/* ---- objects -------------------------------------------------------------------------------- */

static void plan_daemonset(struct builder *b, const struct adopt_input *in, const json_t *ds,
                           const json_t *want)
{
    const char *name = kobj_name(ds), *ns = kobj_namespace(ds);
    if (want) {
        json_t *have_sel = kobj_path(ds, "spec.selector");
        json_t *want_sel = kobj_path(want, "spec.selector");
        if (json_equal(have_sel, want_sel)) {
            add(b, ADOPT_ADOPT, "DaemonSet", ns, name, NULL, false,
                xstrdup(is_driver_ds(ds)
                            ? "gpuop's driver DaemonSet (OnDelete): updated in place, no driver "
                              "pod restarts"
                            : "the same selector: updated in place into gpuop's"));
            return;
        }
        _cleanup_free_ char *hs = selector_text(ds), *ws = selector_text(want);
        add(b, ADOPT_RECREATE, "DaemonSet", ns, name, NULL, true,
            xasprintf("selector %s differs from gpuop's %s and cannot change: deleted with its "
                      "pods orphaned, created as gpuop's, which claims them",
                      hs, ws));
        return;
    }
    /* A DaemonSet gpuop does not run. */
    size_t n = 0, i;
    json_t *p;
    json_array_foreach ((json_t *)in->pods, i, p) {
        if (!deleting(p) && owned_by_ds(p, ds))
            n++;
    }
    const char *component = adopt_component_of_ds(name);
    if (component && !is_driver_ds(ds)) {
        add(b, ADOPT_REMOVE, "DaemonSet", ns, name, NULL, true,
            xasprintf("the ClusterPolicy disables %s: gpuop runs none, and NVIDIA's goes (%zu "
                      "pod(s))",
                      component, n));
    } else if (is_driver_ds(ds)) {
        add(b, ADOPT_LEAVE, "DaemonSet", ns, name, NULL, false,
            xasprintf("a driver DaemonSet gpuop does not render (%zu pod(s)): its drivers stay "
                      "loaded; replace them through a driver change, then delete it",
                      n));
    } else if (streq_ptr(name, "nvidia-dcgm")) {
        /* NVIDIA's dcgm-exporter talks to this host engine; gpuop's exporter reads NVML. */
        const char *ex = NULL;
        size_t users = 0;
        json_array_foreach ((json_t *)in->pods, i, p) {
            if (adopt_is_nvidia_pod(p) && !deleting(p) &&
                streq_ptr(kobj_label(p, "app"), "nvidia-dcgm-exporter") && users++ == 0)
                ex = kobj_name(p);
        }
        if (users > 0)
            add(b, ADOPT_WAIT, "DaemonSet", ns, name, NULL, false,
                xasprintf("the DCGM host engine, used by %zu NVIDIA dcgm-exporter pod(s) (%s); "
                          "gpuop's exporter reads NVML itself",
                          users, ex));
        else
            add(b, ADOPT_REMOVE, "DaemonSet", ns, name, NULL, true,
                xstrdup("the DCGM host engine, used by no exporter any more (gpuop's reads NVML "
                        "itself)"));
    } else if (n == 0) {
        add(b, ADOPT_REMOVE, "DaemonSet", ns, name, NULL, true,
            xstrdup("NVIDIA-only and running no pod"));
    } else {
        add(b, ADOPT_LEAVE, "DaemonSet", ns, name, NULL, false,
            xasprintf("NVIDIA-only, %zu pod(s) running that workloads may use (gpuop does not "
                      "deploy it): delete it once none does",
                      n));
    }
}

static void plan_other(struct builder *b, const struct adopt_input *in, const json_t *obj,
                       const json_t *want, const json_t *nv_objects)
{
    const char *kind = kobj_kind(obj), *name = kobj_name(obj);
    const char *ns = adopt_kind_namespaced(kind) ? kobj_namespace(obj) : NULL;
    if (streq_ptr(kind, "Lease")) {
        add(b, ADOPT_LEAVE, kind, ns, name, NULL, false,
            xstrdup("NVIDIA's operator's leader-election lease: harmless once it is stopped; "
                    "delete it by hand"));
        return;
    }
    if (want) {
        add(b, ADOPT_ADOPT, kind, ns, name, NULL, false,
            xstrdup("the same name: updated in place into gpuop's"));
        return;
    }
    const char *pod = NULL, *sa = NULL;
    size_t n = 0;
    if (streq_ptr(kind, "ConfigMap")) {
        n = nvidia_pods_that(in->pods, mounts_configmap, name, &pod);
        if (n)
            add(b, ADOPT_WAIT, kind, ns, name, NULL, false,
                xasprintf("mounted by %zu NVIDIA operand pod(s) (%s)", n, pod));
        else
            add(b, ADOPT_REMOVE, kind, ns, name, NULL, true,
                xstrdup("NVIDIA-only, mounted by no NVIDIA pod"));
    } else if (streq_ptr(kind, "ServiceAccount")) {
        size_t i;
        json_t *p;
        json_array_foreach ((json_t *)in->pods, i, p) {
            if (!deleting(p) && uses_sa(p, name) && n++ == 0)
                pod = kobj_name(p);
        }
        if (n)
            add(b, ADOPT_WAIT, kind, ns, name, NULL, false,
                xasprintf("the ServiceAccount of %zu pod(s) (%s)", n, pod));
        else
            add(b, ADOPT_REMOVE, kind, ns, name, NULL, true,
                xstrdup("NVIDIA-only, no pod runs as it"));
    } else if (streq_ptr(kind, "RoleBinding") || streq_ptr(kind, "ClusterRoleBinding")) {
        n = binding_in_use(obj, in->pods, in->ns, &sa, &pod);
        if (n)
            add(b, ADOPT_WAIT, kind, ns, name, NULL, false,
                xasprintf("binds ServiceAccount %s, which %zu NVIDIA pod(s) run as (%s)", sa, n,
                          pod));
        else
            add(b, ADOPT_REMOVE, kind, ns, name, NULL, true,
                xstrdup("NVIDIA's RBAC, used by no NVIDIA pod (gpuop's pods have their own)"));
    } else if (streq_ptr(kind, "Role") || streq_ptr(kind, "ClusterRole")) {
        /* used while an NVIDIA binding that refers to it is still needed */
        const char *bkind = streq_ptr(kind, "Role") ? "RoleBinding" : "ClusterRoleBinding";
        const char *binder = NULL;
        size_t i;
        json_t *o;
        json_array_foreach ((json_t *)nv_objects, i, o) {
            if (!streq_ptr(kobj_kind(o), bkind) || deleting(o) ||
                !streq_ptr(kobj_path_str(o, "roleRef.name"), name) ||
                !streq_ptr(kobj_path_str(o, "roleRef.kind"), kind))
                continue;
            if (binding_in_use(o, in->pods, in->ns, &sa, &pod)) {
                binder = kobj_name(o);
                break;
            }
        }
        if (binder)
            add(b, ADOPT_WAIT, kind, ns, name, NULL, false,
                xasprintf("bound by %s %s, still in use (ServiceAccount %s, pod %s)", bkind, binder,
                          sa, pod));
        else
            add(b, ADOPT_REMOVE, kind, ns, name, NULL, true,
                xstrdup("NVIDIA's RBAC, bound for no NVIDIA pod"));
    } else if (streq_ptr(kind, "RuntimeClass")) {
        add(b, ADOPT_LEAVE, kind, ns, name, NULL, false,
            xstrdup("not the policy's runtime class any more, but workloads anywhere may name "
                    "it: delete it once none does"));
    } else if (streq_ptr(kind, "Service")) {
        add(b, ADOPT_REMOVE, kind, ns, name, NULL, true, xstrdup("NVIDIA-only, not gpuop's"));
    } else {
        add(b, ADOPT_LEAVE, kind, ns, name, NULL, false,
            xstrdup("NVIDIA-only, a kind the takeover does not remove"));
    }
}

/* ---- pods, node by node --------------------------------------------------------------------- */

/* The app label of each DaemonSet gpuop will run (but the driver's): its operand pods. */
static bool gpuop_operand_app(const json_t *desired, const char *app)
{
    size_t i;
    json_t *d;
    json_array_foreach ((json_t *)desired, i, d) {
        if (streq_ptr(kobj_kind(d), "DaemonSet") && !is_driver_ds(d) &&
            streq_ptr(kobj_path_str(d, "spec.selector.matchLabels.app"), app))
            return true;
    }
    return false;
}

/* Since when (ms since the epoch) a pod is Ready, 0 when it is not. */
static uint64_t ready_since(const json_t *pod)
{
    if (!kobj_pod_ready(pod))
        return 0;
    uint64_t t = 0;
    const json_t *c = kobj_condition_find(pod, "Ready");
    if (time_parse_rfc3339(kobj_str(c, "lastTransitionTime") ?: "", &t) == 0)
        return t ? t : 1;
    return 1; /* Ready, since we cannot tell when: long enough */
}

struct node_state {
    const char *name;
    size_t legacy;      /* NVIDIA operand pods there, live (the device plugin's among them) */
    size_t legacy_gone; /* NVIDIA operand pods there being deleted */
    const json_t *legacy_dp;
    const json_t *surge, *our_dp;
    bool surge_gone;
    size_t ours, ours_ready; /* gpuop's operand pods (not the surge) */
};

static int node_cmp(const void *a, const void *b)
{
    return strcmp(((const struct node_state *)a)->name, ((const struct node_state *)b)->name);
}

static long long gpu_nodes(const json_t *nodes)
{
    long long n = 0;
    size_t i;
    json_t *node;
    json_array_foreach ((json_t *)nodes, i, node) {
        if (streq_ptr(kobj_label(node, "nvidia.com/gpu.present"), "true") ||
            streq_ptr(kobj_label(node, "feature.node.kubernetes.io/pci-10de.present"), "true"))
            n++;
    }
    return n;
}

static struct node_state *node_of(struct node_state **nodes, size_t *n, size_t *cap,
                                  const char *name)
{
    for (size_t k = 0; k < *n; k++)
        if (strcmp((*nodes)[k].name, name) == 0)
            return &(*nodes)[k];
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *nodes = xrealloc(*nodes, *cap * sizeof(**nodes));
    }
    struct node_state *ns = &(*nodes)[(*n)++];
    *ns = (struct node_state){.name = name};
    return ns;
}

bool adopt_pod_settled(const json_t *pod, uint64_t now_ms)
{
    uint64_t since = pod ? ready_since(pod) : 0;
    return since && (now_ms == 0 || since + ADOPT_SURGE_SETTLE_MS <= now_ms);
}

static bool settled(const json_t *pod, uint64_t now_ms)
{
    return adopt_pod_settled(pod, now_ms);
}

int adopt_max_unavailable(const json_t *policy, const json_t *nodes, long long *ret, struct err *e)
{
    json_t *mu = kobj_path(policy, "spec.daemonsets.rollingUpdate.maxUnavailable");
    long long max = 1;
    if (mu) {
        _cleanup_(json_decrefp) json_t *v = NULL;
        if (kobj_int_or_percent(mu, "spec.daemonsets.rollingUpdate.maxUnavailable", &v, e) < 0)
            return err_prefix(e, "ClusterPolicy %s", kobj_name(policy) ?: "?");
        max = kobj_int_or_percent_scaled(v, gpu_nodes(nodes), true);
    }
    *ret = max < 1 ? 1 : max;
    return 0;
}

static void replace_pod(struct builder *b, const json_t *p, const char *node, bool now,
                        long long max)
{
    add(b, ADOPT_REPLACE, "Pod", kobj_namespace(p), kobj_name(p), node, now,
        now ? xasprintf("node %s's turn (%lld node(s) at once): NVIDIA's %s pod replaced by "
                        "gpuop's",
                        node, max, kobj_label(p, "app"))
            : xasprintf("waits for its node's turn (%lld node(s) at once)", max));
}

static int plan_pods(struct builder *b, const struct adopt_input *in, struct err *e)
{
    /* maxUnavailable of the policy's DaemonSets: the nodes replaced at once */
    long long max;
    int r = adopt_max_unavailable(in->policy, in->nodes, &max, e);
    if (r < 0)
        return r;
    b->p->max_unavailable = max;
    bool gpuop_dp = gpuop_operand_app(in->desired, ADOPT_DEVICE_PLUGIN_APP);

    size_t n_nodes = 0, cap = 0;
    struct node_state *nodes = NULL;
    size_t i;
    json_t *p;
    json_array_foreach ((json_t *)in->pods, i, p) {
        const char *node = kobj_path_str(p, "spec.nodeName");
        const char *app = kobj_label(p, "app");
        if (!node)
            continue;
        if (streq_ptr(app, ADOPT_SURGE_APP) &&
            streq_ptr(kobj_label(p, ADOPT_LABEL_MANAGED_BY), ADOPT_GPUOP_MANAGER)) {
            struct node_state *ns = node_of(&nodes, &n_nodes, &cap, node);
            if (deleting(p))
                ns->surge_gone = true;
            else
                ns->surge = p;
            continue;
        }
        if (!gpuop_operand_app(in->desired, app))
            continue;
        struct node_state *ns = node_of(&nodes, &n_nodes, &cap, node);
        if (adopt_is_nvidia_pod(p)) {
            if (deleting(p))
                ns->legacy_gone++;
            else {
                ns->legacy++;
                if (streq_ptr(app, ADOPT_DEVICE_PLUGIN_APP))
                    ns->legacy_dp = p;
            }
        } else if (!deleting(p)) {
            ns->ours++;
            ns->ours_ready += kobj_pod_ready(p);
            if (streq_ptr(app, ADOPT_DEVICE_PLUGIN_APP))
                ns->our_dp = p;
        }
    }
    if (n_nodes)
        qsort(nodes, n_nodes, sizeof(*nodes), node_cmp);
    /* A node is in flight from its first NVIDIA pod deleted (or its surge plugin made) until
     * gpuop's pods there are all Ready and the surge plugin is gone. */
    long long busy = 0;
    for (size_t k = 0; k < n_nodes; k++) {
        struct node_state *ns = &nodes[k];
        bool started = ns->legacy_gone > 0 || ns->surge || ns->surge_gone ||
                       (ns->legacy == 0 && ns->ours > ns->ours_ready);
        if (ns->legacy == 0 && ns->legacy_gone == 0 && !ns->surge && !ns->surge_gone &&
            ns->ours == ns->ours_ready)
            b->p->nodes_done++;
        else if (started) {
            b->p->nodes_in_flight++;
            busy++;
        } else if (ns->ours > ns->ours_ready) {
            busy++; /* gpuop's pods there not Ready for another reason: unavailable already */
        }
    }
    long long slots = max - busy;
    for (size_t k = 0; k < n_nodes; k++) {
        struct node_state *ns = &nodes[k];
        bool started = ns->legacy_gone > 0 || ns->surge || ns->surge_gone;
        bool now = started;
        if (!started && ns->legacy > 0) {
            now = slots > 0 && ns->ours == ns->ours_ready;
            if (now)
                slots--;
            else
                b->p->nodes_todo++;
        }
        /* Every NVIDIA operand pod of the node but the device plugin's goes at once. The
         * device plugin is surged: gpuop's plugin registers first (a pod of its own), then
         * NVIDIA's goes, then, once the DaemonSet's plugin has registered, the surge: the
         * kubelet always has a plugin for the node's GPUs, so allocatable never drops. */
        json_array_foreach ((json_t *)in->pods, i, p) {
            if (!adopt_is_nvidia_pod(p) || deleting(p) || p == ns->legacy_dp ||
                !streq_ptr(kobj_path_str(p, "spec.nodeName"), ns->name) ||
                !gpuop_operand_app(in->desired, kobj_label(p, "app")))
                continue;
            replace_pod(b, p, ns->name, now, max);
        }
        if (ns->legacy_dp) {
            if (!gpuop_dp || !now) {
                replace_pod(b, ns->legacy_dp, ns->name, now && !gpuop_dp, max);
            } else if (!ns->surge) {
                _cleanup_free_ char *surge = xasprintf("%s-%s", ADOPT_SURGE_APP, ns->name);
                add(b, ADOPT_SURGE, "Pod", in->ns, surge, ns->name, !ns->surge_gone,
                    xasprintf("gpuop's device plugin first, beside NVIDIA's: it registers the "
                              "node's GPUs before NVIDIA's plugin goes"));
                replace_pod(b, ns->legacy_dp, ns->name, false, max);
            } else {
                bool go = settled(ns->surge, in->now_ms);
                add(b, ADOPT_REPLACE, "Pod", kobj_namespace(ns->legacy_dp),
                    kobj_name(ns->legacy_dp), ns->name, go,
                    go ? xasprintf("gpuop's surge plugin serves node %s's GPUs: NVIDIA's device "
                                   "plugin goes",
                                   ns->name)
                       : xasprintf("waits for gpuop's surge plugin on node %s to be Ready",
                                   ns->name));
            }
        } else if (ns->surge) {
            bool go = settled(ns->our_dp, in->now_ms);
            add(b, go ? ADOPT_REMOVE : ADOPT_WAIT, "Pod", kobj_namespace(ns->surge),
                kobj_name(ns->surge), ns->name, go,
                go ? xstrdup("the DaemonSet's device plugin serves the node's GPUs: the surge "
                             "plugin goes")
                   : xstrdup("waits for the DaemonSet's device plugin to be Ready"));
        }
    }
    free(nodes);
    b->p->holding =
        b->p->nodes_todo + b->p->nodes_in_flight > 0 || adopt_plan_count(b->p, ADOPT_REPLACE) > 0;
    /* The driver: its pods stay as they are. */
    json_array_foreach ((json_t *)in->pods, i, p) {
        if (!adopt_is_nvidia_pod(p) || deleting(p) || !is_driver_pod(p))
            continue;
        add(b, ADOPT_DEFER, "Pod", kobj_namespace(p), kobj_name(p),
            kobj_path_str(p, "spec.nodeName"), false,
            xstrdup("NVIDIA's driver pod keeps running: replacing it is a driver change, made "
                    "by the upgrade controller under the pool's policy (drain, approval, "
                    "windows)"));
    }
    return 0;
}

/* ---- the plan -------------------------------------------------------------------------------- */

static int item_cmp(const void *a, const void *b)
{
    const struct adopt_item *x = a, *y = b;
    if (x->action != y->action)
        return (int)x->action - (int)y->action;
    int c = strcmp(x->kind, y->kind);
    if (c == 0)
        c = strcmp(x->ns ? x->ns : "", y->ns ? y->ns : "");
    if (c == 0)
        c = strcmp(x->node ? x->node : "", y->node ? y->node : "");
    if (c == 0)
        c = strcmp(x->name, y->name);
    return c;
}

int adopt_plan(const struct adopt_input *in, struct adopt_plan *ret, struct err *e)
{
    assert(in && in->policy && ret);
    struct adopt_plan p = {0};
    struct builder b = {.p = &p};
    _cleanup_(json_decrefp) json_t *nv = json_array();
    size_t i;
    json_t *o;
    json_array_foreach ((json_t *)in->objects, i, o) {
        if (adopt_is_nvidia(o) && !deleting(o))
            json_array_append(nv, o);
    }
    json_array_foreach (nv, i, o) {
        const json_t *want = in->desired ? find_desired(in->desired, o) : NULL;
        if (streq_ptr(kobj_kind(o), "DaemonSet"))
            plan_daemonset(&b, in, o, want);
        else
            plan_other(&b, in, o, want, nv);
    }
    int r = plan_pods(&b, in, e);
    if (r < 0) {
        adopt_plan_done(&p);
        return r;
    }
    if (p.n_items)
        qsort(p.items, p.n_items, sizeof(*p.items), item_cmp);
    *ret = p;
    return 0;
}

void adopt_plan_done(struct adopt_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_items; i++) {
        free(p->items[i].kind);
        free(p->items[i].ns);
        free(p->items[i].name);
        free(p->items[i].node);
        free(p->items[i].reason);
    }
    free(p->items);
    *p = (struct adopt_plan){0};
}

size_t adopt_plan_count(const struct adopt_plan *p, enum adopt_action a)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_items; i++)
        n += p->items[i].action == a;
    return n;
}

char *adopt_plan_text(const struct adopt_plan *p)
{
    char *out = xasprintf("takeover: %zu adopt, %zu recreate, %zu replace, %zu surge, %zu defer, "
                          "%zu remove, %zu wait, %zu leave; operands replaced on %lld node(s) at a "
                          "time (%zu to do, %zu in flight, %zu done)\n",
                          adopt_plan_count(p, ADOPT_ADOPT), adopt_plan_count(p, ADOPT_RECREATE),
                          adopt_plan_count(p, ADOPT_REPLACE), adopt_plan_count(p, ADOPT_SURGE),
                          adopt_plan_count(p, ADOPT_DEFER), adopt_plan_count(p, ADOPT_REMOVE),
                          adopt_plan_count(p, ADOPT_WAIT), adopt_plan_count(p, ADOPT_LEAVE),
                          p->max_unavailable, p->nodes_todo, p->nodes_in_flight, p->nodes_done);
    for (size_t i = 0; i < p->n_items; i++) {
        const struct adopt_item *it = &p->items[i];
        char *next = xasprintf("%s  %-8s %s %s%s%s%s%s: %s\n", out, adopt_action_name(it->action),
                               it->kind, it->ns ? it->ns : "", it->ns ? "/" : "", it->name,
                               it->node ? " on " : "", it->node ? it->node : "", it->reason);
        free(out);
        out = next;
    }
    return out;
}

/* ---- helpers the takeover's shells share ----------------------------------------------------- */

bool adopt_helm_owned(const json_t *obj, const char *release, const char *ns)
{
    return release && ns && streq_ptr(kobj_annotation(obj, ADOPT_HELM_RELEASE_NAME), release) &&
           streq_ptr(kobj_annotation(obj, ADOPT_HELM_RELEASE_NAMESPACE), ns);
}

json_t *adopt_surge_pod(const json_t *ds, const json_t *cp, const char *ns, const char *node)
{
    const json_t *tmpl = kobj_path(ds, "spec.template.spec");
    if (!json_is_object(tmpl) || !node || !ns)
        return NULL;
    json_t *spec = json_deep_copy(tmpl);
    json_object_set_new(spec, "nodeName", json_string(node));
    /* a socket of its own: beside the plugin it stands in for, neither replaces (nor, stopping,
     * removes) the other's socket file */
    size_t k;
    json_t *ctr;
    json_array_foreach (json_object_get(spec, "containers"), k, ctr) {
        if (!streq_ptr(json_string_value(json_array_get(json_object_get(ctr, "args"), 0)),
                       "device-plugin"))
            continue;
        json_t *env = json_object_get(ctr, "env");
        if (!json_is_array(env)) {
            env = json_array();
            json_object_set_new(ctr, "env", env);
        }
        json_array_append_new(env, json_pack("{s:s,s:s}", "name", "DP_SOCKET_SUFFIX", "value",
                                             ADOPT_SURGE_SOCKET_SUFFIX));
    }
    char *name = xasprintf("%s-%s", ADOPT_SURGE_APP, node);
    json_t *pod =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s,s:s},s:[{s:s,s:s,s:s,s:s,s:b}]},s:o}", "apiVersion",
                  "v1", "kind", "Pod", "metadata", "name", name, "namespace", ns, "labels", "app",
                  ADOPT_SURGE_APP, ADOPT_LABEL_MANAGED_BY, ADOPT_GPUOP_MANAGER, "ownerReferences",
                  "apiVersion", "nvidia.com/v1", "kind", "ClusterPolicy", "name",
                  kobj_name(cp) ?: "", "uid", kobj_uid(cp) ?: "", "controller", 0, "spec", spec);
    free(name);
    return pod;
}

json_t *adopt_toolkit_cleanup_patch(const json_t *ds)
{
    json_t *ctrs = kobj_path(ds, "spec.template.spec.containers");
    size_t i;
    json_t *c;
    json_array_foreach (ctrs, i, c) {
        if (!streq_ptr(kobj_str(c, "name"), ADOPT_TOOLKIT_CONTAINER))
            continue;
        size_t j;
        json_t *ev;
        json_array_foreach (json_object_get(c, "env"), j, ev) {
            if (streq_ptr(kobj_str(ev, "name"), "TOOLKIT_CLEANUP") &&
                streq_ptr(kobj_str(ev, "value"), "true"))
                return NULL;
        }
        return json_pack("{s:{s:{s:{s:[{s:s,s:[{s:s,s:s}]}]}}}}", "spec", "template", "spec",
                         "containers", "name", ADOPT_TOOLKIT_CONTAINER, "env", "name",
                         "TOOLKIT_CLEANUP", "value", "true");
    }
    return NULL;
}

static long long status_int(const json_t *ds, const char *field)
{
    json_t *v = json_object_get(json_object_get(ds, "status"), field);
    return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

bool adopt_ds_rolled_out(const json_t *ds, char *why, size_t why_len)
{
    char tmp[1];
    if (!why) {
        why = tmp;
        why_len = sizeof(tmp);
    }
    why[0] = '\0';
    long long gen = kobj_generation(ds), observed = status_int(ds, "observedGeneration");
    long long desired = status_int(ds, "desiredNumberScheduled");
    long long updated = status_int(ds, "updatedNumberScheduled");
    long long ready = status_int(ds, "numberReady");
    if (observed < gen) {
        snprintf(why, why_len, "generation %lld not observed yet", gen);
        return false;
    }
    if (updated < desired || ready < desired) {
        snprintf(why, why_len, "%lld/%lld updated, %lld/%lld ready", updated, desired, ready,
                 desired);
        return false;
    }
    return true;
}
