/* SPDX-License-Identifier: Apache-2.0 */
/*
 * remediation: from a GPU fault to a node back in service, as a plan. A pure core: the nodes
 * (their health from the node agent, src/lib/gpuhealth, and their remediation state), their
 * pods and PodDisruptionBudgets, the pools and their policies, the breakers' state and the time
 * in; the next actions out (node patches: labels, annotations, cordon and taints; evictions;
 * validator pods to replace; reset, driver reload and reboot requests; Events; breaker updates;
 * each pool's report and whether its driver rollout should hold; a condition). No I/O, no clock;
 * the operator's shell (a later step) reads the world, calls rem_plan() and executes the plan.
 * Every step is resumable from what the plan wrote to the nodes: the state label and the
 * remediation.gpuop.dev/ annotations are the planner's whole memory.
 *
 * A node's states (REM_LABEL_STATE; no label: in service):
 *
 *   healthy --fault--> quarantined --> draining --> remediating --> validating --> healthy
 *                           |              |             |               |
 *                           +--------------+-------------+---------------+--> failed
 *
 *   quarantined  cordoned (unless it already was) and tainted (REM_TAINT_KEY, NoSchedule) so no
 *                new GPU pod lands; an Event names the GPU, the fault and the action. Always, but
 *                for a breaker that is open.
 *   draining     its GPU pods evicted through the Eviction API (their PDBs hold them), per
 *                namespace: immediate, wait for completion (then evicted after a timeout), or
 *                left running. Starts only when the action may be taken without a person (the
 *                pool's policy, or the node approved), the window is open, no driver upgrade has
 *                the node, and the pool's budget allows (capacity floor, maxUnavailable: the
 *                same counting as driver upgrades, upg_budget).
 *   remediating  a request: reset the GPUs or reload the driver (REM_ANN_REQUEST, answered by
 *                the executor with REM_ANN_REQUEST_DONE or _FAILED), or reboot the node
 *                (REM_ANN_REBOOT, answered by a node-reboot tool with REM_ANN_REBOOT_DONE, or
 *                seen as a new status.nodeInfo.bootID).
 *   validating   the node's validator pods replaced, so the validator checks the node again;
 *                the agent's latched faults acknowledged (GH_ANN_ACK); back in service once a
 *                new validator is ready and the agent confirms no fault is left.
 *   failed       left quarantined, with the reason, for a person: a fault that needs the
 *                hardware replaced, a step that timed out, a fault that persisted, or a node that
 *                failed again within the refail window of recovering. REM_ANN_RETRY validates it
 *                again.
 *
 * A breaker per pool and one for the cluster stop new quarantines once more than a share of the
 * nodes were quarantined within a sliding window; it stays open (REM_ANN_BREAKER on the pool or
 * the cluster's object) until a person resets it (REM_ANN_BREAKER_RESET).
 *
 * Ownership: every json_t in struct rem_input is borrowed; struct rem_plan owns its values.
 * Thread-safety: rem_plan() is thread-compatible.
 */
#ifndef GPUOP_REMEDIATION_H
#define GPUOP_REMEDIATION_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpuhealth.h"
#include "upgrade.h"
#include "util.h"

/* ---- the vocabulary on the nodes ------------------------------------------------------------ */

#define REM_ANN_PREFIX          "remediation.gpuop.dev/" /* the planner's labels and annotations */
#define REM_LABEL_STATE         "remediation.gpuop.dev/state"
#define REM_TAINT_KEY           "gpuop.dev/gpu-unhealthy" /* value: the action; effect NoSchedule */
#define REM_EVENT_REASON_PREFIX "GPURemediation"

/* the planner's memory on the node */
#define REM_ANN_SINCE          "remediation.gpuop.dev/state-since" /* epoch ms the state began */
#define REM_ANN_SEQ            "remediation.gpuop.dev/event-seq"   /* the last fault handled */
#define REM_ANN_ACTION         "remediation.gpuop.dev/action"
#define REM_ANN_GPUS           "remediation.gpuop.dev/gpus"           /* the GPUs' UUIDs, comma */
#define REM_ANN_FAULT          "remediation.gpuop.dev/fault"          /* the fault, for people */
#define REM_ANN_FAULT_AT       "remediation.gpuop.dev/fault-at"       /* epoch ms it appeared */
#define REM_ANN_QUARANTINED_AT "remediation.gpuop.dev/quarantined-at" /* epoch ms; kept after */
#define REM_ANN_RECOVERED_AT   "remediation.gpuop.dev/recovered-at"   /* epoch ms */
#define REM_ANN_CORDONED       "remediation.gpuop.dev/cordoned"       /* "true": it cordoned */
#define REM_ANN_WAITING        "remediation.gpuop.dev/waiting"        /* why it waits */
#define REM_ANN_REASON         "remediation.gpuop.dev/failed-reason"
/* the requests, and their answers */
#define REM_ANN_REQUEST        "remediation.gpuop.dev/request"        /* "<action> <id> [uuids]" */
#define REM_ANN_REQUEST_DONE   "remediation.gpuop.dev/request-done"   /* "<id>" */
#define REM_ANN_REQUEST_FAILED "remediation.gpuop.dev/request-failed" /* "<id> <why>" */
#define REM_ANN_REBOOT         "remediation.gpuop.dev/reboot-requested" /* "<id>" */
#define REM_ANN_REBOOT_DONE    "remediation.gpuop.dev/reboot-done"      /* "<id>" */
#define REM_ANN_BOOT_ID        "remediation.gpuop.dev/boot-id" /* the bootID the reboot replaces */
/* what people write */
#define REM_ANN_APPROVED "remediation.gpuop.dev/approved" /* node: "true" */
#define REM_ANN_RETRY    "remediation.gpuop.dev/retry"    /* node: "true" */
/* the breaker, on a DriverUpgradePool or the cluster's object (the ClusterPolicy) */
#define REM_ANN_BREAKER       "remediation.gpuop.dev/breaker-open"  /* "<epoch ms> <why>" */
#define REM_ANN_BREAKER_RESET "remediation.gpuop.dev/breaker-reset" /* epoch ms or RFC 3339 */
/* the default pool's breaker (the nodes no DriverUpgradePool selects), on the cluster's object;
 * the cluster's REM_ANN_BREAKER_RESET resets it too */
#define REM_ANN_BREAKER_DEFAULT "remediation.gpuop.dev/default-pool-breaker-open"

enum rem_state {
    REM_HEALTHY = 0, /* no label: in service */
    REM_QUARANTINED,
    REM_DRAINING,
    REM_REMEDIATING,
    REM_VALIDATING,
    REM_FAILED,
    REM_N_STATES
};
/* The label value ("" for REM_HEALTHY); rem_state_parse: -1 for a value that is no state. */
const char *rem_state_name(enum rem_state s);
int rem_state_parse(const char *v);

/* ---- the policy: a pool's spec.remediation (rem-policy.c) ----------------------------------- */

enum rem_evict_mode {
    REM_EVICT_IMMEDIATE, /* evicted at once (under the pod's PDBs) */
    REM_EVICT_WAIT,      /* left to complete; evicted after evict_wait_s */
    REM_EVICT_LEAVE,     /* left running: the node is remediated around it */
};
const char *rem_evict_mode_name(enum rem_evict_mode m); /* "immediate", "wait", "leave" */

struct rem_ns_mode {
    char *ns;
    enum rem_evict_mode mode;
};

#define REM_DURATION_MAX_S (10LL * 365 * 86400) /* a duration of the policy, at most */

struct rem_policy {
    bool enabled;                 /* false: the pool's nodes are left alone (not quarantined) */
    bool automatic[GH_ACT_COUNT]; /* the actions taken without a person */
    enum rem_evict_mode evict_default;
    struct rem_ns_mode *ns_modes; /* per namespace */
    size_t n_ns_modes;
    int64_t evict_wait_s;          /* "wait": evicted after this (1800) */
    int64_t drain_timeout_s;       /* the drain fails after this (3600; 0: never) */
    int64_t remediation_timeout_s; /* a request unanswered fails after this (1800; 0: never) */
    int64_t validation_timeout_s;  /* 600; 0: never */
    int64_t refail_window_s;       /* a node failing again this soon after recovering goes to
                                    * failed (86400; 0: never) */
    struct upg_window *windows;    /* when drains and actions may start (none: any time) */
    size_t n_windows;
    json_t *breaker_threshold; /* int or "N%" of the pool's nodes ("20%") */
    int64_t breaker_window_s;  /* 3600 */
};
/* The defaults: enabled, nothing automatic (quarantine and report), immediate evictions. */
void rem_policy_defaults(struct rem_policy *p);
/* Parses `spec` (a pool's spec.remediation; NULL: the defaults); errors name `path` and the
 * field. */
int rem_policy_parse(const json_t *spec, const char *path, struct rem_policy *ret, struct err *e);
void rem_policy_done(struct rem_policy *p);
/* The eviction mode of namespace `ns`. */
enum rem_evict_mode rem_policy_evict_mode(const struct rem_policy *p, const char *ns);

/* ---- the planner ---------------------------------------------------------------------------- */

struct rem_input {
    const json_t *nodes; /* Node objects (those without GPUs or health are left out) */
    const json_t *pods;  /* pods on the nodes being drained and validated */
    /* {node: true} for the nodes whose every pod is in `pods`; a node not named waits for its
     * list. NULL: all are. */
    const json_t *pods_listed;
    const json_t *pdbs;              /* PodDisruptionBudgets */
    const json_t *pools;             /* DriverUpgradePool objects (spec.remediation), or NULL */
    const struct upg_zones *zones;   /* the pools' time zones, or NULL */
    const struct rem_policy *policy; /* the default pool's (NULL: rem_policy_defaults) */
    /* the ClusterPolicy's upgradePolicy.maxUnavailable, for pools without their own (NULL: none)
     * and the cluster-wide breaker (threshold NULL: "30%"; window 0: 3600 s) */
    const json_t *max_unavailable;
    const json_t *cluster_breaker_threshold;
    int64_t cluster_breaker_window_s;
    const json_t
        *cluster_annotations; /* the cluster breaker's state (the ClusterPolicy's), or NULL */
    bool validation_enabled;  /* the validator runs: validating waits for it */
    int64_t now_ms;
};

struct rem_node_patch {
    char *node;
    /* merge patch: metadata labels and annotations, spec.unschedulable, spec.taints (the whole
     * list), with metadata.resourceVersion, the node's as read, as the precondition */
    json_t *patch;
};

struct rem_pod_ref {
    char *ns, *name, *node;
};

/* What a node must do, outstanding until answered (also in its annotations). */
struct rem_request {
    char *node;
    enum gh_action action; /* reset-gpu, reload-driver, reboot-node */
    char *id;
    char *gpus; /* UUIDs, comma-separated (reset-gpu), or "" */
    bool fresh; /* made by this pass */
};

struct rem_event {
    char *node; /* NULL: about a pool or the cluster */
    char *pool;
    bool warning;
    const char *reason; /* "GPUQuarantined", "GPURemediationFailed", ... */
    char *message;
};

/* A breaker's state to write: annotation `key`'s new value (NULL: remove it), on the pool's
 * DriverUpgradePool (key REM_ANN_BREAKER), or on the cluster's object: the cluster's breaker
 * (pool NULL, key REM_ANN_BREAKER) and the default pool's (key REM_ANN_BREAKER_DEFAULT). */
struct rem_breaker_update {
    char *pool; /* NULL: the cluster's */
    char *value;
    const char *key; /* REM_ANN_BREAKER or REM_ANN_BREAKER_DEFAULT */
};

struct rem_pool_report {
    char *name;
    int nodes, quarantined, in_progress, failed; /* quarantined: in any state but healthy */
    long long budget;                            /* maxUnavailable, in nodes */
    long long gpus_total, gpus_ready, floor;
    int quarantines_in_window;
    bool breaker_open;
    char *breaker_why;
    bool hold_upgrades; /* the driver rollout should hold (upg_hold) */
    char *hold_why;
    char *error; /* its spec.remediation does not parse: its nodes are left alone */
};

/* One node under remediation, for status and metrics. */
struct rem_node_report {
    char *node;
    char *pool;
    enum rem_state state;
    enum gh_action action;
    int64_t since_ms; /* the state began */
    char *fault;      /* the fault's text */
    char *why;        /* why it waits, or why it failed; NULL */
    /* measured this pass: the fault to the quarantine, and to the node back in service (ms;
     * -1: not this pass) */
    int64_t quarantine_ms, recovery_ms;
};

struct rem_condition {
    bool status;
    const char *reason; /* NoFaults, Remediating, NodesFailed, BreakerOpen */
    char *message;
};
#define REM_CONDITION_TYPE "GPURemediation"

struct rem_plan {
    struct rem_node_patch *patches; /* at most one per node */
    size_t n_patches;
    struct rem_pod_ref *evictions; /* through the Eviction API */
    size_t n_evictions;
    struct rem_pod_ref *deletions; /* validator pods that validated before the remediation */
    size_t n_deletions;
    struct rem_request *requests;
    size_t n_requests;
    struct rem_event *events; /* a node's go once its patch went through */
    size_t n_events;
    struct rem_breaker_update *breakers;
    size_t n_breakers;
    struct rem_pool_report *pools; /* the DriverUpgradePools', then "default" */
    size_t n_pools;
    struct rem_node_report *nodes; /* the nodes in a state other than healthy, or held back */
    size_t n_nodes;
    int counts[REM_N_STATES]; /* nodes per state */
    struct rem_condition condition;
    int64_t requeue_ms; /* look again in this many ms (0: only on events) */
};

/* What the planner reads of a Node beyond its name, labels, resourceVersion and what
 * upg_project_node keeps (the budget's fields): the remediation.gpuop.dev/ annotations, the
 * health annotation (GH_ANN_HEALTH), the taints, the cordon and the boot ID. Adds them to `p`, an
 * informer's projection of `obj`; the boot ID not in `status` but in the projection's own
 * member REM_PROJECTED_BOOT_ID, so that the projected status is alike across a pool (read it
 * with rem_node_boot_id). */
#define REM_PROJECTED_BOOT_ID "gpuop.dev/bootID"
void rem_project_node(const json_t *obj, json_t *p);
/* A node's status.nodeInfo.bootID, from the API's Node or from a projection; NULL: none. */
const char *rem_node_boot_id(const json_t *node);

int rem_plan(const struct rem_input *in, struct rem_plan **ret, struct err *e);
void rem_plan_free(struct rem_plan *p);
DEFINE_CLEANUP_FUNC(struct rem_plan, rem_plan_free)

/* The upgrade holds the plan asks for (one per pool with hold_upgrades), for upg_input.holds:
 * the strings are the plan's. A new array, *ret_n entries. */
struct upg_hold *rem_plan_holds(const struct rem_plan *p, size_t *ret_n);

#endif
