/* SPDX-License-Identifier: Apache-2.0 */
/*
 * adopt: taking over a cluster NVIDIA's GPU Operator has been running, as a plan. A pure core:
 * the ClusterPolicy, what NVIDIA's operator left in the operands' namespace and the cluster
 * (DaemonSets, ServiceAccounts, RBAC, ConfigMaps, Services, the RuntimeClass, its Lease), the
 * operand pods, the nodes and gpuop's own objects in; per object what happens out:
 *
 *   adopt     the same name, a shape gpuop can update in place (a DaemonSet with gpuop's
 *             selector): the operator replaces it with its own
 *   recreate  a DaemonSet whose selector differs from gpuop's (selectors are immutable):
 *             deleted with its pods orphaned, created as gpuop's, which claims them
 *   replace   NVIDIA's operand pods (not the driver's), node by node: every such pod of a node
 *             is deleted at once and the node counts against maxUnavailable until gpuop's pods
 *             there are Ready; at most daemonsets.rollingUpdate.maxUnavailable nodes at a time
 *   defer     NVIDIA's driver pods: never restarted by the takeover; replacing them is a driver
 *             change, the upgrade controller's, under the pool's policy
 *   remove    NVIDIA-only and safe now (nothing running uses it): deleted, with an Event
 *   wait      NVIDIA-only and still used: removed once safe
 *   leave     NVIDIA-only and not gpuop's to remove (listed, with why)
 *   surge     gpuop's device plugin as a pod of its own on a node whose turn it is, beside
 *             NVIDIA's: it registers the node's GPUs with the kubelet first, then NVIDIA's
 *             plugin pod is replaced, and once the DaemonSet's plugin has registered (Ready for
 *             ADOPT_SURGE_SETTLE_MS) the surge pod is removed, so the kubelet never loses the
 *             GPUs (a plugin that goes marks them unhealthy until another registers)
 *
 * The facts it rests on (NVIDIA's operator v24.9.2: tests/adopt/fixtures, written from
 * ../shared/reference/nvidia-operator-v24.9.2/README.md): NVIDIA's operand objects carry one
 * controller ownerReference to the ClusterPolicy and its DaemonSets and pods the label
 * app.kubernetes.io/managed-by=gpu-operator; gpu-feature-discovery and nvidia-operator-validator
 * select on an app.kubernetes.io/part-of label gpuop's selectors lack; NVIDIA's RBAC objects are
 * named after the ServiceAccounts gpuop shares (nvidia-device-plugin, ...) while gpuop's roles
 * are gpuop-<name>.
 *
 * Ownership: every json_t of struct adopt_input is borrowed; struct adopt_plan owns its strings.
 * Thread-compatible; no I/O, no clock.
 */
#ifndef GPUOP_ADOPT_H
#define GPUOP_ADOPT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* The label NVIDIA's operator and gpuop put on what they make, and their values. */
#define ADOPT_LABEL_MANAGED_BY "app.kubernetes.io/managed-by"
#define ADOPT_NVIDIA_MANAGER   "gpu-operator"
#define ADOPT_GPUOP_MANAGER    "gpuop"
/* NVIDIA's operator's leader-election Lease in its namespace. */
#define ADOPT_NVIDIA_LEASE "53822513.nvidia.com"
/* Helm's ownership metadata: what `helm install` checks before it takes an object over, and the
 * annotation that keeps an object when its release is uninstalled. */
#define ADOPT_HELM_RELEASE_NAME      "meta.helm.sh/release-name"
#define ADOPT_HELM_RELEASE_NAMESPACE "meta.helm.sh/release-namespace"
#define ADOPT_HELM_RESOURCE_POLICY   "helm.sh/resource-policy"
/* The toolkit's DaemonSet and container in deploy/operands/container-toolkit.yaml. */
#define ADOPT_TOOLKIT_DS        "nvidia-container-toolkit-daemonset"
#define ADOPT_TOOLKIT_CONTAINER "nvidia-container-toolkit-ctr"
/* The device plugin's app label (gpuop's and NVIDIA's), and the surge pod's. */
#define ADOPT_DEVICE_PLUGIN_APP   "nvidia-device-plugin-daemonset"
#define ADOPT_SURGE_APP           "gpuop-device-plugin-takeover"
#define ADOPT_SURGE_SOCKET_SUFFIX "takeover" /* its socket: nvidia-gpu-takeover.sock */
/* How long a device plugin pod is Ready before the one it replaces goes: its registration with
 * the kubelet follows its start. */
#define ADOPT_SURGE_SETTLE_MS 5000
/* Events about the takeover (reason), on the ClusterPolicy. */
#define ADOPT_EVENT_REASON "GPUOperatorTakeover"

enum adopt_action {
    ADOPT_ADOPT = 0,
    ADOPT_RECREATE,
    ADOPT_REPLACE,
    ADOPT_DEFER,
    ADOPT_REMOVE,
    ADOPT_WAIT,
    ADOPT_LEAVE,
    ADOPT_SURGE,
    ADOPT_N_ACTIONS
};
/* "adopt", "recreate", "replace", "defer", "remove", "wait", "leave", "surge" */
const char *adopt_action_name(enum adopt_action a);

struct adopt_item {
    enum adopt_action action;
    char *kind; /* "DaemonSet"; "Pod" for replace and defer */
    char *ns;   /* NULL for cluster-scoped objects */
    char *name;
    char *node;   /* pods: their node, else NULL */
    bool now;     /* replace: this node's turn (delete the pod now); recreate/remove: always */
    char *reason; /* one line: why, for the plan and the Event */
};

struct adopt_input {
    const char *ns;        /* the operands' namespace (NVIDIA's and gpuop's) */
    const json_t *policy;  /* the ClusterPolicy */
    const json_t *objects; /* what is there: the namespace's DaemonSets, ServiceAccounts, Roles,
                              RoleBindings, ConfigMaps, Services and Leases, the cluster's
                              ClusterRoles, ClusterRoleBindings and RuntimeClasses (each with
                              kind); any may be missing */
    const json_t *pods;    /* the namespace's pods */
    const json_t *nodes;   /* the nodes (maxUnavailable as a percentage counts the GPU nodes) */
    /* gpuop's objects for the policy: kind, metadata.name and .namespace, and a DaemonSet's
     * spec.selector and spec.template.metadata.labels (adopt_expected(), or what the operator
     * renders) */
    const json_t *desired;
    uint64_t now_ms; /* ms since the epoch (pods' Ready times); 0: any Ready pod is settled */
};

struct adopt_plan {
    struct adopt_item *items; /* ordered: by action, then kind, namespace, name and node */
    size_t n_items;
    /* NVIDIA operand pods (the driver's aside) remain: gpuop's operand DaemonSets but the
     * driver's are held at OnDelete, so that only the takeover replaces pods, node by node. */
    bool holding;
    long long max_unavailable; /* nodes whose operands are replaced at once */
    size_t nodes_todo;         /* nodes with NVIDIA operand pods, not started */
    size_t nodes_in_flight;    /* started, gpuop's pods there not all Ready yet */
    size_t nodes_done;         /* every operand of the node gpuop's and Ready */
};

/* Fails only on a policy it cannot read (daemonsets.rollingUpdate.maxUnavailable), naming the
 * field; nothing is planned then. */
int adopt_plan(const struct adopt_input *in, struct adopt_plan *ret, struct err *e);
void adopt_plan_done(struct adopt_plan *p);
/* Items of an action. */
size_t adopt_plan_count(const struct adopt_plan *p, enum adopt_action a);
/* The plan as text: a line per item ("recreate DaemonSet gpu-operator/gpu-feature-discovery:
 * ...") after a summary line; a new string. */
char *adopt_plan_text(const struct adopt_plan *p);

/* Made by NVIDIA's operator: a controller ownerReference to a ClusterPolicy and not labelled
 * gpuop's, or NVIDIA's Lease. */
bool adopt_is_nvidia(const json_t *obj);
/* A driver DaemonSet: the ClusterPolicy's (nvidia-driver-daemonset) or an NVIDIADriver's
 * (nvidia-gpu-driver-*), NVIDIA's or gpuop's. */
bool adopt_is_driver_daemonset(const json_t *ds);
/* A pod of NVIDIA's operand templates: labelled app.kubernetes.io/managed-by=gpu-operator. */
bool adopt_is_nvidia_pod(const json_t *pod);
/* A driver pod (its app or component label), NVIDIA's or gpuop's. */
bool adopt_is_driver_pod(const json_t *pod);
/* Whether a pod has been Ready for ADOPT_SURGE_SETTLE_MS at now_ms (0: Ready is enough). */
bool adopt_pod_settled(const json_t *pod, uint64_t now_ms);
/* The nodes whose operands are replaced at once: the policy's
 * spec.daemonsets.rollingUpdate.maxUnavailable (a percentage counts the GPU nodes of `nodes`),
 * at least 1; 1 when unset. Fails naming the field when it does not parse. */
int adopt_max_unavailable(const json_t *policy, const json_t *nodes, long long *ret, struct err *e);

/* Whether obj carries Helm's ownership annotations of release `release` in namespace `ns`. */
bool adopt_helm_owned(const json_t *obj, const char *release, const char *ns);

/* The strategic merge patch turning gpuop's toolkit DaemonSet's cleanup on (TOOLKIT_CLEANUP=true
 * in its toolkit container: on SIGTERM the toolkit takes its changes out of the node's runtime
 * configuration), or NULL when it has no such container or the cleanup is on already. New. */
json_t *adopt_toolkit_cleanup_patch(const json_t *ds);

/* The surge device plugin pod of a node (ADOPT_SURGE_APP-<node>): the pod template of gpuop's
 * device plugin DaemonSet ds, bound to the node, its plugin on a socket of its own
 * (DP_SOCKET_SUFFIX=ADOPT_SURGE_SOCKET_SUFFIX), owned by the ClusterPolicy cp (not as its
 * controller: gone with it), selected by no DaemonSet. The takeover runs one while NVIDIA's
 * plugin goes; gpuop migrate --to nvidia one per node while NVIDIA's plugin replaces gpuop's. New;
 * NULL when ds has no pod template. */
json_t *adopt_surge_pod(const json_t *ds, const json_t *cp, const char *ns, const char *node);

/* Whether every pod of a DaemonSet runs its current template and is ready (its status says so
 * for its current generation); *why (may be NULL) says what is missing. */
bool adopt_ds_rolled_out(const json_t *ds, char *why, size_t why_len);

/*
 * gpuop's objects for a ClusterPolicy, by name (kind, metadata.name, metadata.namespace; a
 * DaemonSet's selector and template labels), from a table of deploy/operands (tests/adopt checks
 * it against the templates, tests/operator against the operator's render): for a caller that
 * cannot render (gpuop migrate). A new array. Fails on a policy that is not an object.
 */
int adopt_expected(const json_t *policy, const char *ns, json_t **ret, struct err *e);

#endif
