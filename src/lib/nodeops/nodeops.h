/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nodeops: what the node agents that take a node's GPUs away for a while share (the driver
 * manager around a driver reload, the MIG manager around a layout change).
 *
 *  - The operand pause (pure): the nvidia.com/gpu.deploy.<operand> labels go to a pause word
 *    ("paused-for-driver-upgrade", "paused-for-mig-change"): "true" or "" become the word,
 *    "false" stays, a value already paused for this word stays, any other value v becomes
 *    "v_<word>" (so pauses of different agents compose: each restore undoes its own). Both read
 *    only the labels, so a run killed in between is undone by the next.
 *  - Which pods on a node hold GPUs (pure): operands whose node no longer matches their
 *    nodeSelector (their DaemonSet takes them away), pods requesting nvidia.com/gpu* or
 *    nvidia.com/mig-* (evicted), finished pods, DaemonSet and mirror pods.
 *  - The shell (nodeops-evict.c): a node's pods through src/edge/kube, the wait for the paused
 *    operands to go, the eviction of chosen pods through the Eviction API (PodDisruptionBudgets
 *    hold; a refusal is waited out with backoff, never deleted around); (nodeops-node.c) the
 *    agent's own Node read and merge-patched, and the Events it posts on it.
 *
 * Thread-compatible.
 */
#ifndef GPUOP_NODEOPS_H
#define GPUOP_NODEOPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube.h"
#include "svc.h"
#include "util.h"

#define NODEOPS_DEPLOY_PREFIX   "nvidia.com/gpu.deploy."
#define NODEOPS_LABEL_DRIVER    "nvidia.com/gpu.deploy.driver"
#define NODEOPS_LABEL_OPERANDS  "nvidia.com/gpu.deploy.operands"
#define NODEOPS_LABEL_VALUE_MAX 63

/* ---- the operand pause -------------------------------------------------------------------- */

struct nodeops_pause {
    const char *word;          /* the paused value: "paused-for-mig-change" */
    const char *const *labels; /* NULL-terminated deploy labels it covers; NULL: every operand
                                  label (nodeops_is_operand_label) */
};

/* A nvidia.com/gpu.deploy.<x> label other than the driver's and the operands kill switch. */
bool nodeops_is_operand_label(const char *key);
/* One value paused: 1 when it changes (buf holds the new value), 0 when not, -E2BIG when the
 * result would not be a label value (63 bytes). */
int nodeops_label_pause(const char *value, const char *word, char *buf, size_t n);
/* The inverse: word -> "true", "v_<word>" -> "v". 1 when it changes, 0 when not. */
int nodeops_label_restore(const char *value, const char *word, char *buf, size_t n);
/* The metadata.labels merge patch pausing (restore false) or restoring (true) the covered labels
 * of a node's labels (an object or NULL); *ret is an object (empty: nothing to do). */
int nodeops_labels_patch(const json_t *labels, const struct nodeops_pause *p, bool restore,
                         json_t **ret, struct err *e);
/* Whether a covered label is paused with p's word. */
bool nodeops_labels_paused(const json_t *labels, const struct nodeops_pause *p);

/* ---- pods --------------------------------------------------------------------------------- */

enum nodeops_pod_kind {
    NODEOPS_POD_OTHER,     /* stays */
    NODEOPS_POD_DONE,      /* Succeeded or Failed: holds nothing, nothing to wait for */
    NODEOPS_POD_OPERAND,   /* its nodeSelector names an operand label the node no longer matches */
    NODEOPS_POD_GPU,       /* requests nvidia.com/gpu* or nvidia.com/mig-* */
    NODEOPS_POD_DAEMONSET, /* owned by a DaemonSet */
    NODEOPS_POD_MIRROR,    /* a static pod's mirror */
};
/* node_labels: the node's labels now (after a pause). A pod that both requests GPUs and is an
 * operand is an operand. A terminating pod keeps its kind. */
enum nodeops_pod_kind nodeops_pod_classify(const json_t *pod, const json_t *node_labels);
/* The pod's controller ownerReference, or NULL. */
const json_t *nodeops_pod_controller(const json_t *pod);

/* ---- the shell ---------------------------------------------------------------------------- */

/* The Node read: *node_obj (owned; may be NULL) is replaced by what the API server returns. */
int nodeops_node_read(struct kube_client *kc, const char *node, json_t **node_obj, struct err *e);
/* A merge patch of the Node (patch taken, released either way): *node_obj is replaced by the
 * Node as written. Errors name the node. */
int nodeops_node_patch(struct kube_client *kc, const char *node, json_t *patch, json_t **node_obj,
                       struct err *e);

struct nodeops_event {
    const char *ns;        /* the Event's namespace; NULL: the client's */
    const char *source;    /* its reporting component: "gpuop-mig-manager" */
    const char *component; /* the log component a failure is logged under */
    const char *type;      /* "Normal", "Warning" */
    const char *reason, *message;
};
/* An Event on the Node (its uid from node_obj, which may be NULL); a failure is logged. */
void nodeops_node_event(struct kube_client *kc, const char *node, const json_t *node_obj,
                        const struct nodeops_event *ev);

/* The pods bound to node (selector: a label selector, NULL all): the List object. */
int nodeops_node_pods(struct kube_client *kc, const char *node, const char *selector, json_t **ret,
                      struct err *e);

/* Waits (polling) until no pod on the node is NODEOPS_POD_OPERAND for node_labels; -ETIMEDOUT
 * naming the pods after timeout_ms, -ECANCELED when s stops. */
int nodeops_wait_operands(struct svc *s, struct kube_client *kc, const char *node,
                          const json_t *node_labels, uint64_t timeout_ms, const char *component,
                          struct err *e);

struct nodeops_evict {
    struct kube_client *kc;
    struct svc *svc; /* waits end when it stops (-ECANCELED) */
    const char *node;
    const char *selector;  /* label selector of the pods considered; NULL: all */
    const char *what;      /* "GPU pod eviction", "drain": in logs and errors */
    const char *component; /* log component */
    uint64_t timeout_ms;   /* 0: no limit */
    /* Which pods go: 1 evict, 0 leave, negative: refuse the whole eviction (e filled). */
    int (*select)(const json_t *pod, void *ud, struct err *e);
    /* Called when a disruption budget blocks (the first refusal of each pass), with the reason
     * ("pod ns/name: ..."); may be NULL. */
    void (*blocked)(void *ud, const char *why);
    void *ud;
};
/* Evicts the selected pods through the Eviction API and waits for them to go. A pod already
 * terminating is waited for, never evicted again; a budget's refusal is retried with backoff
 * (1 s doubling to 16 s) until timeout_ms: -ETIMEDOUT with the reason. *ret_evicted (may be
 * NULL) gets "ns/name,..." of the pods it evicted (caller frees; NULL when none). */
int nodeops_evict_pods(const struct nodeops_evict *o, char **ret_evicted, struct err *e);

#endif
