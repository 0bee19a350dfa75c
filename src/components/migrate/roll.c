/* SPDX-License-Identifier: Apache-2.0 */
/* The way back, node by node (migrate.h, "the way back"): one step of `gpuop migrate --to nvidia
 * --roll`, planned from the pods, the DaemonSets and the nodes' marks. Pure. */
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "migrate.h"
#include "upgrade.h"

struct roll_node {
    const char *name;
    bool marked;                   /* MIG_ANN_ROLL on the node: its turn has begun */
    size_t ours, ours_gone;        /* gpuop's operand pods there: live, being deleted */
    size_t nv, nv_ready;           /* NVIDIA's operand pods there (the driver's aside) */
    const json_t *ours_dp, *nv_dp; /* the device plugins */
    const json_t *surge;           /* gpuop's surge device plugin, live */
    bool surge_gone;
    const char *blocked; /* a pod of gpuop's whose DaemonSet is not NVIDIA's yet (why) */
};

static const json_t *controller_ds(const json_t *pod, const json_t *daemonsets)
{
    size_t i, k;
    json_t *r, *ds;
    json_array_foreach (kobj_path(pod, "metadata.ownerReferences"), i, r) {
        if (!json_is_true(json_object_get(r, "controller")) ||
            !streq_ptr(kobj_kind(r), "DaemonSet"))
            continue;
        json_array_foreach ((json_t *)daemonsets, k, ds) {
            if (streq_ptr(kobj_uid(ds), kobj_str(r, "uid")) &&
                streq_ptr(kobj_name(ds), kobj_str(r, "name")))
                return ds;
        }
    }
    return NULL;
}

static struct roll_node *node_of(struct roll_node **nodes, size_t *n, const char *name)
{
    for (size_t k = 0; k < *n; k++)
        if (strcmp((*nodes)[k].name, name) == 0)
            return &(*nodes)[k];
    *nodes = xrealloc(*nodes, (*n + 1) * sizeof(**nodes));
    (*nodes)[*n] = (struct roll_node){.name = name};
    return &(*nodes)[(*n)++];
}

static int node_cmp(const void *a, const void *b)
{
    return strcmp(((const struct roll_node *)a)->name, ((const struct roll_node *)b)->name);
}

static bool is_gpuop(const json_t *o)
{
    return streq_ptr(kobj_label(o, ADOPT_LABEL_MANAGED_BY), ADOPT_GPUOP_MANAGER);
}

/* Reads the pods into per-node states. -EPERM (nothing planned) when a pod of gpuop's belongs to
 * a DaemonSet of NVIDIA's that rolls on its own. */
static int read_nodes(const struct mig_roll_input *in, struct roll_node **ret, size_t *ret_n,
                      char **ret_blocked, struct err *e)
{
    struct roll_node *nodes = NULL;
    size_t n = 0, i;
    json_t *o;
    json_array_foreach ((json_t *)in->nodes, i, o) {
        if (kobj_annotation(o, MIG_ANN_ROLL))
            node_of(&nodes, &n, kobj_name(o))->marked = true;
    }
    json_array_foreach ((json_t *)in->pods, i, o) {
        const char *node = kobj_path_str(o, "spec.nodeName");
        const char *app = kobj_label(o, "app");
        bool gone = kobj_deletion_timestamp(o) != NULL;
        if (!node || adopt_is_driver_pod(o))
            continue; /* the drivers stay as they are */
        if (streq_ptr(app, ADOPT_SURGE_APP) && is_gpuop(o)) {
            struct roll_node *rn = node_of(&nodes, &n, node);
            if (gone)
                rn->surge_gone = true;
            else
                rn->surge = o;
            continue;
        }
        if (adopt_is_nvidia_pod(o)) {
            struct roll_node *rn = node_of(&nodes, &n, node);
            if (!gone) {
                rn->nv++;
                rn->nv_ready += upg_pod_ready(o);
                if (streq_ptr(app, ADOPT_DEVICE_PLUGIN_APP))
                    rn->nv_dp = o;
            }
            continue;
        }
        if (!is_gpuop(o))
            continue;
        struct roll_node *rn = node_of(&nodes, &n, node);
        if (gone) {
            rn->ours_gone++;
            continue;
        }
        rn->ours++;
        if (streq_ptr(app, ADOPT_DEVICE_PLUGIN_APP))
            rn->ours_dp = o;
        const json_t *ds = controller_ds(o, in->daemonsets);
        if (!ds) {
            if (!rn->blocked)
                rn->blocked = kobj_name(o);
            if (!*ret_blocked)
                *ret_blocked = xasprintf("pod %s on %s has no DaemonSet: waiting for NVIDIA's "
                                         "operator to create the one that claims it",
                                         kobj_name(o), node);
            continue;
        }
        if (!streq_ptr(json_string_value(json_object_get(kobj_path(ds, "spec.template.metadata."
                                                                       "labels"),
                                                         ADOPT_LABEL_MANAGED_BY)),
                       ADOPT_NVIDIA_MANAGER)) {
            if (!rn->blocked)
                rn->blocked = kobj_name(o);
            if (!*ret_blocked)
                *ret_blocked = xasprintf("DaemonSet %s still has gpuop's template: waiting for "
                                         "NVIDIA's operator to write its own",
                                         kobj_name(ds));
            continue;
        }
        if (!streq_ptr(kobj_path_str(ds, "spec.updateStrategy.type"), "OnDelete")) {
            free(nodes);
            return err_set(e, -EPERM,
                           "DaemonSet %s/%s is %s: it replaces gpuop's pods on its own, on any "
                           "node; set the ClusterPolicy's spec.daemonsets.updateStrategy to "
                           "OnDelete (NVIDIA's chart: --set daemonsets.updateStrategy=OnDelete)",
                           in->ns, kobj_name(ds),
                           kobj_path_str(ds, "spec.updateStrategy.type") ?: "RollingUpdate");
        }
    }
    if (n)
        qsort(nodes, n, sizeof(*nodes), node_cmp);
    *ret = nodes;
    *ret_n = n;
    return 0;
}

static void roll_write(struct mig_roll *r, enum mig_write_kind k, const char *kind, const char *ns,
                       const char *name, json_t *body, char *why)
{
    mig_write_add(&r->writes, &r->n_writes, k, kind, ns, name, body, why);
}

static json_t *mark_patch(bool on)
{
    return json_pack("{s:{s:{s:o}}}", "metadata", "annotations", MIG_ANN_ROLL,
                     on ? json_string("replacing") : json_null());
}

/* A node's turn: every live pod of gpuop's there deleted, the device plugin's only with a surge
 * plugin Ready beside it. */
static int node_turn(struct mig_roll *r, const struct mig_roll_input *in,
                     const struct roll_node *rn, struct err *e)
{
    if (rn->ours_dp && !rn->surge)
        return err_set(e, -EPERM,
                       "node %s: no surge device plugin (%s-%s) beside gpuop's plugin %s: "
                       "without it the node's nvidia.com/gpu allocatable would drop; run gpuop "
                       "migrate --to nvidia --apply first",
                       rn->name, ADOPT_SURGE_APP, rn->name, kobj_name(rn->ours_dp));
    if (!rn->marked)
        roll_write(
            r, MIG_PATCH_MERGE, "Node", NULL, rn->name, mark_patch(true),
            xasprintf("node %s's turn (%lld node(s) at once)", rn->name, in->max_unavailable));
    bool dp_may_go = rn->ours_dp && adopt_pod_settled(rn->surge, in->now_ms);
    size_t i;
    json_t *o;
    json_array_foreach ((json_t *)in->pods, i, o) {
        if (!is_gpuop(o) || kobj_deletion_timestamp(o) || adopt_is_driver_pod(o) ||
            !streq_ptr(kobj_path_str(o, "spec.nodeName"), rn->name) ||
            streq_ptr(kobj_label(o, "app"), ADOPT_SURGE_APP) || (o == rn->ours_dp && !dp_may_go))
            continue;
        roll_write(r, MIG_DELETE, "Pod", in->ns, kobj_name(o), NULL,
                   xasprintf("gpuop's %s pod on %s: NVIDIA's DaemonSet makes its own in its place",
                             kobj_label(o, "app") ?: "operand", rn->name));
    }
    if (rn->ours_dp && !dp_may_go && !r->waiting)
        r->waiting = xasprintf("the surge device plugin on %s to be Ready", rn->name);
    return 0;
}

/* A node whose pods of gpuop's are gone: the surge plugin goes once NVIDIA's has registered, and
 * the mark once every NVIDIA pod there is Ready. */
static void node_finish(struct mig_roll *r, const struct mig_roll_input *in,
                        const struct roll_node *rn)
{
    if (rn->surge) {
        if (adopt_pod_settled(rn->nv_dp, in->now_ms))
            roll_write(r, MIG_DELETE, "Pod", in->ns, kobj_name(rn->surge), NULL,
                       xasprintf("NVIDIA's device plugin serves node %s's GPUs: gpuop's surge "
                                 "plugin goes",
                                 rn->name));
        else if (!r->waiting)
            r->waiting = xasprintf("NVIDIA's device plugin on %s to be Ready", rn->name);
        return;
    }
    if (rn->surge_gone || rn->nv == 0 || rn->nv_ready < rn->nv) {
        if (!r->waiting)
            r->waiting = xasprintf("NVIDIA's operand pods on %s to be Ready (%zu/%zu)", rn->name,
                                   rn->nv_ready, rn->nv);
        return;
    }
    if (rn->marked)
        roll_write(r, MIG_PATCH_MERGE, "Node", NULL, rn->name, mark_patch(false),
                   xasprintf("node %s done: NVIDIA's operands run there, Ready", rn->name));
}

int mig_roll_plan(const struct mig_roll_input *in, struct mig_roll *ret, struct err *e)
{
    struct mig_roll r = {0};
    struct roll_node *nodes = NULL;
    size_t n = 0;
    char *blocked = NULL;
    int rc = read_nodes(in, &nodes, &n, &blocked, e);
    if (rc < 0) {
        free(blocked);
        return rc;
    }
    long long max = in->max_unavailable < 1 ? 1 : in->max_unavailable;
    /* in flight: marked, or gpuop's pods there going */
    long long busy = 0;
    for (size_t k = 0; k < n; k++) {
        struct roll_node *rn = &nodes[k];
        bool clean = rn->ours == 0 && rn->ours_gone == 0 && !rn->surge && !rn->surge_gone;
        bool done = clean && !rn->marked && rn->nv_ready == rn->nv;
        if (done)
            r.nodes_done++;
        else if (rn->marked || rn->ours_gone > 0)
            busy++;
    }
    r.nodes_in_flight = (size_t)busy;
    for (size_t k = 0; k < n && rc == 0; k++) {
        struct roll_node *rn = &nodes[k];
        bool started = rn->marked || rn->ours_gone > 0;
        if (started) {
            if (rn->ours > 0 && !rn->blocked)
                rc = node_turn(&r, in, rn, e);
            else if (rn->ours == 0 && rn->ours_gone == 0)
                node_finish(&r, in, rn);
            else if (!r.waiting && !rn->blocked)
                r.waiting = xasprintf("gpuop's pods on %s to go", rn->name);
        } else if (rn->ours > 0) {
            if (busy < max && !rn->blocked) {
                busy++;
                r.nodes_in_flight++;
                rc = node_turn(&r, in, rn, e);
            } else {
                r.nodes_todo++;
            }
        } else if (rn->surge && rn->ours == 0 && rn->ours_gone == 0) {
            node_finish(&r, in, rn); /* a node with only the surge plugin left */
        }
    }
    if (rc == 0 && !r.waiting && blocked) {
        r.waiting = blocked;
        blocked = NULL;
    }
    free(blocked);
    free(nodes);
    if (rc < 0) {
        mig_roll_done(&r);
        return rc;
    }
    r.done = r.nodes_todo == 0 && r.nodes_in_flight == 0 && r.n_writes == 0 && !r.waiting;
    const char *had = in->policy ? kobj_annotation(in->policy, MIG_ANN_UPDATE_STRATEGY) : NULL;
    if (r.done && had && !streq_ptr(had, "OnDelete") &&
        streq_ptr(kobj_path_str(in->policy, "spec.daemonsets.updateStrategy"), "OnDelete"))
        r.restore =
            xasprintf("the ClusterPolicy had daemonsets.updateStrategy %s before: helm "
                      "upgrade %s nvidia/gpu-operator -n %s --reuse-values --set "
                      "daemonsets.updateStrategy=%s",
                      had, in->nvidia_release ? in->nvidia_release : "gpu-operator", in->ns, had);
    *ret = r;
    return 0;
}

void mig_roll_done(struct mig_roll *r)
{
    if (!r)
        return;
    mig_writes_free(r->writes, r->n_writes);
    free(r->waiting);
    free(r->restore);
    *r = (struct mig_roll){0};
}
