/* SPDX-License-Identifier: Apache-2.0 */
/*
 * upgrade: the driver upgrade as a drain plan. A pure core: what the cluster holds and the time
 * in, the next actions out (node label, annotation and cordon patches, pod evictions, driver pod
 * deletions, Events, per-pool progress). No I/O, no clock; the operator's shell reads the world,
 * calls upg_plan() and executes the plan, so every step is resumable from what it wrote to the
 * nodes (NVIDIA's state label and annotations, gpuop's upgrade.gpuop.dev/ annotations).
 *
 * NVIDIA's interface, unchanged: the state label nvidia.com/gpu-driver-upgrade-state and its
 * states, the skip label, the drain-skip pod label, the initial-unschedulable, start-time and
 * requested annotations, ClusterPolicy spec.driver.upgradePolicy, Events with reason
 * GPUDriverUpgrade, the gpu_operator_nodes_upgrades_* counts.
 *
 * gpuop's additions live apart, in the DriverUpgradePool CRD (upgrade.gpuop.dev/v1alpha1,
 * cluster-scoped, deploy/crds/upgrade.gpuop.dev_driverupgradepools.yaml): a pool selects nodes
 * (a label selector, or an NVIDIADriver by name) and carries approval, maintenance windows, a
 * capacity floor, a canary, a minimum CUDA version and its own parallelism. NVIDIA's objects
 * stay valid for NVIDIA's schema; a cluster without pools behaves as NVIDIA's operator does.
 * The compatibility matrix (deploy/upgrade/compat-matrix.yaml, overridable by a ConfigMap)
 * gates every start.
 *
 * Ownership: every json_t in struct upg_input is borrowed; struct upg_plan owns its values.
 * Thread-safety: upg_plan() is thread-compatible; the time zone functions are thread-safe (they
 * never touch the C library's process-wide zone).
 */
#ifndef GPUOP_UPGRADE_H
#define GPUOP_UPGRADE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util.h"

/* ---- NVIDIA's vocabulary -------------------------------------------------------------------- */

#define UPG_LABEL_STATE       "nvidia.com/gpu-driver-upgrade-state"
#define UPG_LABEL_SKIP        "nvidia.com/gpu-driver-upgrade.skip"
#define UPG_LABEL_DRAIN_SKIP  "nvidia.com/gpu-driver-upgrade-drain.skip"
#define UPG_ANN_SAFE_LOAD     "nvidia.com/gpu-driver-upgrade.driver-wait-for-safe-load"
#define UPG_ANN_INITIAL_UNSCH "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
#define UPG_ANN_WAIT_START    "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time"
#define UPG_ANN_VALID_START   "nvidia.com/gpu-driver-upgrade-validation-start-time"
#define UPG_ANN_REQUESTED     "nvidia.com/gpu-driver-upgrade-requested"
/* The NVIDIADriver that owns a node (set by the operator with useNvidiaDriverCRD): a pool
 * naming an NVIDIADriver selects the nodes it owns. */
#define UPG_LABEL_DRIVER_OWNER "nvidia.com/gpu-operator.driver.owner"
/* The NVIDIADriver a driver DaemonSet is for (the operator's OP_LABEL_NVIDIA_DRIVER). */
#define UPG_LABEL_NVIDIA_DRIVER "gpuop.dev/nvidia-driver"
#define UPG_EVENT_REASON        "GPUDriverUpgrade"
#define UPG_DRIVER_APP          "nvidia-driver-daemonset"
#define UPG_VALIDATOR_APP       "nvidia-operator-validator"

/* gpuop's node annotations (the planner's memory in the cluster) and the pool's. */
#define UPG_ANN_SINCE         "upgrade.gpuop.dev/state-since"   /* epoch s the state began */
#define UPG_ANN_WAITING       "upgrade.gpuop.dev/waiting"       /* why a needed start waits */
#define UPG_ANN_CANARY        "upgrade.gpuop.dev/canary"        /* revision it is canary for */
#define UPG_ANN_CANARY_FAILED "upgrade.gpuop.dev/canary-failed" /* "<revision> <reason>" */
#define UPG_ANN_DONE_AT       "upgrade.gpuop.dev/done-at"       /* epoch s upgrade-done */
#define UPG_ANN_FAILED_REASON "upgrade.gpuop.dev/failed-reason"
#define UPG_ANN_CORDONED      "upgrade.gpuop.dev/cordoned"          /* gpuop cordoned it */
#define UPG_ANN_TARGET        "upgrade.gpuop.dev/target-revision"   /* of the attempt */
#define UPG_ANN_NODE_APPROVED "upgrade.gpuop.dev/approved"          /* node: "true" */
#define UPG_ANN_POOL_APPROVED "upgrade.gpuop.dev/approved-revision" /* pool: a revision */
#define UPG_ANN_POOL_RESUMED  "upgrade.gpuop.dev/resumed-revision"  /* pool: a revision */

enum upg_state {
    UPG_UNKNOWN = 0,
    UPG_REQUIRED,
    UPG_CORDON,
    UPG_WAIT_JOBS,
    UPG_POD_DELETION,
    UPG_DRAIN,
    UPG_POD_RESTART,
    UPG_VALIDATION,
    UPG_UNCORDON,
    UPG_DONE,
    UPG_FAILED,
    UPG_N_STATES
};
/* The label value ("" for UPG_UNKNOWN); upg_state_parse: -1 for a value that is no state. */
const char *upg_state_name(enum upg_state s);
int upg_state_parse(const char *v);

/* ---- policies ------------------------------------------------------------------------------- */

/* ClusterPolicy spec.driver.upgradePolicy (NVIDIA's DriverUpgradePolicySpec). */
struct upg_policy {
    bool auto_upgrade;
    int max_parallel;        /* 0: no limit */
    json_t *max_unavailable; /* integer or "N%" (owned); NULL: all nodes */
    int64_t wait_timeout_s;  /* waitForCompletion.timeoutSeconds, 0: forever */
    char *wait_selector;     /* waitForCompletion.podSelector or NULL */
    bool del_force, del_empty_dir;
    int64_t del_timeout_s; /* podDeletion.timeoutSeconds (300) */
    bool drain_enable, drain_force, drain_empty_dir;
    int64_t drain_timeout_s; /* drain.timeoutSeconds (300), 0: forever */
    char *drain_selector;
    int64_t validation_timeout_s; /* 600 */
};
/* Parses `up` (NULL: every default; `default_auto` is autoUpgrade's default: false for the
 * ClusterPolicy CRD, true for NVIDIADriver). Errors name `path` and the field. */
int upg_policy_parse(const json_t *up, const char *path, bool default_auto, struct upg_policy *ret,
                     struct err *e);
void upg_policy_done(struct upg_policy *p);

/* A weekly maintenance window: days (bit 0 Sunday .. bit 6 Saturday), a local start and a
 * length, in the pool's IANA time zone. */
struct upg_window {
    unsigned days;
    int start_min; /* minutes after local midnight */
    int length_min;
};

enum upg_approval { UPG_APPROVAL_AUTO, UPG_APPROVAL_MANUAL };
/* How a pool's nodes hand out GPUs (spec.gpuAllocation; upg-alloc.c below). */
enum upg_alloc { UPG_ALLOC_DEVICE_PLUGIN, UPG_ALLOC_DRA };

/* A DriverUpgradePool (gpuop's CRD), parsed. */
struct upg_pool {
    char *name;
    json_t *node_selector; /* matchLabels object (owned), or NULL with nvidia_driver */
    char *nvidia_driver;   /* spec.nvidiaDriver: the nodes it owns (UPG_LABEL_DRIVER_OWNER) */
    enum upg_approval approval;
    char *approved_revision, *resumed_revision; /* the pool's annotations, or NULL */
    struct upg_window *windows;
    size_t n_windows;
    char *time_zone;         /* "Europe/Berlin"; NULL: UTC */
    json_t *capacity_floor;  /* integer or "N%" of the pool's GPUs; NULL: none */
    int canary_count;        /* first K nodes; 0 with no canary_selector: no canary */
    json_t *canary_selector; /* matchLabels, or NULL */
    int64_t canary_soak_s;
    int canary_max_restarts; /* driver container restarts allowed during the soak (0) */
    /* GPUs the device plugin may have marked unhealthy (a critical XID, a double-bit ECC error:
     * the node's capacity less its allocatable) during the soak (0) */
    int canary_max_unhealthy;
    char *min_cuda;          /* "12.4", or NULL */
    int max_parallel;        /* -1: the ClusterPolicy's */
    json_t *max_unavailable; /* NULL: the ClusterPolicy's */
    /* spec.gpuAllocation: how its nodes hand out GPUs (upg_alloc_plan moves them) */
    enum upg_alloc gpu_allocation;
};
/* Parses a DriverUpgradePool object; errors name the pool and the field. */
int upg_pool_parse(const json_t *obj, struct upg_pool *ret, struct err *e);
void upg_pool_done(struct upg_pool *p);

/* Parses "Mon,Tue 02:00 4h" style windows from the CRD's {days: [..], start: "HH:MM",
 * duration: "4h"} objects; errors name `path`. */
int upg_window_parse(const json_t *w, const char *path, struct upg_window *ret, struct err *e);

/* ---- time zones (upg-tz.c) ------------------------------------------------------------------ */

/*
 * A zone's rules, read from its TZif file (RFC 8536) in the system's time zone database: the
 * transitions it lists, and the POSIX TZ rule of its footer for the times after them. The
 * arithmetic is gpuop's own on plain integers: nothing reads or sets the process's TZ, so any
 * thread converts at any time. Immutable once made.
 */
#define UPG_ZONEINFO_DIR "/usr/share/zoneinfo"
struct upg_tz;
/* Is `name` a zone name as the database spells it ("Europe/Berlin"): bounded, no path tricks? */
bool upg_tz_name_valid(const char *name);
/* TZif bytes (at most 256 KiB); `what` names the zone and its file in errors. */
int upg_tz_parse(const void *data, size_t len, const char *what, struct upg_tz **ret,
                 struct err *e);
/* Reads zone `name` from `dir` (NULL: UPG_ZONEINFO_DIR; "UTC" needs no file). A bad name, a
 * missing, unreadable, oversized or malformed file fails naming the zone and the file. */
int upg_tz_load(const char *dir, const char *name, struct upg_tz **ret, struct err *e);
void upg_tz_free(struct upg_tz *tz);
DEFINE_CLEANUP_FUNC(struct upg_tz, upg_tz_free)
/* The offset from UTC (seconds, east positive) at instant `t`; NULL tz: UTC. */
int32_t upg_tz_offset(const struct upg_tz *tz, int64_t t);
/* The instant of local wall-clock time `local` (seconds from 1970-01-01 00:00 on the zone's
 * calendar). A time the zone skips (clocks forward) reads with the offset before the change:
 * 02:30 on a spring-forward night is 03:30 by the new clock. A time it repeats (clocks back) is
 * its first occurrence. */
int64_t upg_tz_local_to_utc(const struct upg_tz *tz, int64_t local);

/* Is `now_s` inside one of the windows, in zone `tz` (NULL: UTC)? *ret_next_s: when the next
 * window opens (closed; 0: never) or the open one closes. A window starts at its local start
 * time (upg_tz_local_to_utc's reading across a clock change) and lasts its length of elapsed
 * time; no windows: always open. */
void upg_window_state(const struct upg_window *w, size_t n, const struct upg_tz *tz, int64_t now_s,
                      bool *ret_open, int64_t *ret_next_s);

/* The zones the DriverUpgradePools name, read by the shell before a pass (the planner reads no
 * file): by name, each with its rules or the error that kept them from being read. */
struct upg_zones;
struct upg_zones *upg_zones_new(void);
void upg_zones_free(struct upg_zones *z);
DEFINE_CLEANUP_FUNC(struct upg_zones, upg_zones_free)
/* Reads zone `name` from `dir` (NULL: the system's) unless held already. */
void upg_zones_load(struct upg_zones *z, const char *dir, const char *name);
/* Reads every zone the DriverUpgradePool objects' spec.timeZone names. */
void upg_zones_load_pools(struct upg_zones *z, const char *dir, const json_t *pools);
/* Zone `name`, or NULL with *ret_err saying why (its read failed, or it was never read). */
const struct upg_tz *upg_zones_get(const struct upg_zones *z, const char *name,
                                   const char **ret_err);

/* ---- the compatibility matrix --------------------------------------------------------------- */

struct upg_matrix;
/* Parses the matrix (YAML or JSON text; `source` names it in errors: the file or the
 * ConfigMap). Unknown fields, wrong types, a bad version fail naming the branch and field. */
int upg_matrix_parse(const char *text, size_t len, const char *source, struct upg_matrix **ret,
                     struct err *e);
void upg_matrix_free(struct upg_matrix *m);
DEFINE_CLEANUP_FUNC(struct upg_matrix, upg_matrix_free)
/* May driver `version` ("595.91.07") go on a node with GPU family `arch` (NULL: unknown), kernel
 * `kernel` (NULL: unknown) and OS `os` ("ubuntu22.04", NULL: unknown) for workloads needing CUDA
 * `min_cuda` (NULL: any)? On refusal, *ret_reason (new string) says why; unknowns pass. */
bool upg_matrix_allows(const struct upg_matrix *m, const char *version, const char *arch,
                       const char *kernel, const char *os, const char *min_cuda, char **ret_reason);
/* Compares dotted numeric versions ("5.15.0-127-generic" reads as 5.15.0.127): <0, 0, >0. */
int upg_version_cmp(const char *a, const char *b);

/* ---- the planner ---------------------------------------------------------------------------- */

/* One driver DaemonSet: its pods are out of date when their controller-revision-hash differs
 * from `revision`; `version` is the driver version its template runs. */
struct upg_driver_set {
    const char *name, *ns;
    const char *revision;
    const char *version;
    char version_buf[64]; /* upg_driver_sets(): the version parsed from the image */
};

struct upg_event_log;

/* A pool whose driver rollout holds: no node of it starts an upgrade (those in flight go on).
 * The remediation planner asks for one while the pool has more nodes quarantined for GPU faults
 * than its budget (rem_plan's pool reports); the shell passes them on. */
struct upg_hold {
    const char *pool; /* a DriverUpgradePool's name, or "default" */
    const char *why;
};

struct upg_input {
    const struct upg_policy *policy; /* NULL: the ClusterPolicy's upgradePolicy did not parse */
    const char *policy_error;        /* why, when policy is NULL */
    const json_t *nodes;             /* Node objects */
    const json_t *pods;              /* Pods on those nodes (driver, validator, workloads) */
    /* {node: true} for the nodes whose every pod is in `pods` (the shell lists workloads only
     * for nodes being emptied); a node not named waits for its list. NULL: all are. */
    const json_t *pods_listed;
    const json_t *pdbs;                /* PodDisruptionBudgets */
    const struct upg_driver_set *sets; /* the driver DaemonSets */
    size_t n_sets;
    const json_t *pools;             /* DriverUpgradePool objects (array), or NULL */
    const json_t *nvidia_drivers;    /* NVIDIADriver objects (pool references), or NULL */
    const struct upg_zones *zones;   /* the pools' time zones (upg_zones_load_pools), or NULL */
    const struct upg_matrix *matrix; /* NULL with matrix_error: the gate's input is broken */
    const char *matrix_error;
    /* {node: true}: the nodes a driver DaemonSet targets, or will once the operator's patch of
     * this pass (the one it is merged into) is written; NULL: none. Such a node without a driver
     * pod and without a state is recorded upgrade-done: the pod the DaemonSet makes for it runs
     * the current template (a fresh install costs no second write per node). */
    const json_t *driver_nodes;
    bool validation_enabled;            /* the validator runs: validation-required waits for it */
    const struct upg_event_log *posted; /* the Events posted lately (NULL: none) */
    const struct upg_hold *holds;       /* pools whose starts hold (NULL: none) */
    size_t n_holds;
    int64_t now_s;
};

struct upg_counts {
    int in_progress, done, failed, available, pending;
};

/* ---- what a pass reports -------------------------------------------------------------------- */

/* What an Event is about. */
enum upg_object { UPG_OBJ_NODE, UPG_OBJ_POOL, UPG_OBJ_POLICY };
/* Why it is posted: gpuop's own key below NVIDIA's one reason, GPUDriverUpgrade. */
enum upg_cause {
    UPG_CAUSE_STATE,         /* a node's state label changed: never held back (upg_event_log) */
    UPG_CAUSE_WAITING,       /* why a needed start waits (upg_event.gate) */
    UPG_CAUSE_CANARY_FAILED, /* a canary failed: its pool halts */
    UPG_CAUSE_NODE_REFUSED,  /* a node left as it is (two pools select it, its pool is invalid) */
    UPG_CAUSE_POOL_INVALID,  /* a DriverUpgradePool gpuop cannot act on */
    UPG_CAUSE_INPUT_INVALID, /* the upgrade policy or the matrix is broken: nothing moves */
};
/* The gates a needed start passes, in order; UPG_GATE_SLOT is NVIDIA's own pending (a free slot
 * under maxParallelUpgrades and maxUnavailable), which says nothing. */
enum upg_gate {
    UPG_GATE_NONE,
    UPG_GATE_INCOMPATIBLE,
    UPG_GATE_HALTED,
    UPG_GATE_REMEDIATION, /* the pool holds: GPU-faulty nodes beyond its budget (upg_hold) */
    UPG_GATE_APPROVAL,
    UPG_GATE_WINDOW,
    UPG_GATE_CANARY,
    UPG_GATE_FLOOR,
    UPG_GATE_SLOT,
};

struct upg_event {
    enum upg_object object;
    char *name;         /* the node or the pool; NULL: the ClusterPolicy */
    char *pool;         /* the pool the node is in ("default": none selects it), or NULL */
    char *revision;     /* the driver revision the rollout is for, or NULL */
    bool warning;       /* a Warning, else a Normal Event */
    const char *reason; /* UPG_EVENT_REASON */
    enum upg_cause cause;
    enum upg_gate gate; /* UPG_CAUSE_WAITING: which one */
    char *message;
};

/*
 * The Events posted lately. A pass repeats some on every pass while nothing changes (a node
 * refused, an invalid pool, a broken input) and a waiting node may flap between gates: the
 * planner holds back an Event posted within UPG_EVENT_REPEAT_S about the same object for the same
 * reason, cause, gate, pool and revision (never by its message). A state change is never held
 * back: the node's label records each one. The shell records what it posts; the planner reads
 * the log. Bounded (old entries go first); not thread-safe: the reconcile thread owns it.
 */
#define UPG_EVENT_REPEAT_S 600
struct upg_event_log;
struct upg_event_log *upg_event_log_new(void);
void upg_event_log_free(struct upg_event_log *l);
DEFINE_CLEANUP_FUNC(struct upg_event_log, upg_event_log_free)
void upg_event_log_record(struct upg_event_log *l, const struct upg_event *ev, int64_t now_s);
/* Would `ev` be held back at now_s (posted within UPG_EVENT_REPEAT_S)? */
bool upg_event_log_holds(const struct upg_event_log *l, const struct upg_event *ev, int64_t now_s);
size_t upg_event_log_size(const struct upg_event_log *l);

/* A DriverUpgradePool's phase: Invalid (it cannot be acted on), Halted (a canary failed),
 * Upgrading (nodes in flight or pending), Failed (nodes failed, none moving), Done. */
enum upg_phase {
    UPG_PHASE_DONE,
    UPG_PHASE_UPGRADING,
    UPG_PHASE_FAILED,
    UPG_PHASE_HALTED,
    UPG_PHASE_INVALID
};
const char *upg_phase_name(enum upg_phase p);

struct upg_node_note {
    char *node;
    char *text; /* its state, why it failed, why it waits */
};
struct upg_notes {
    struct upg_node_note *v;
    size_t n;
};

/* One pool's progress: "default" for the driver-managed nodes no pool selects. */
struct upg_pool_report {
    char *name;
    int total, upgraded, pending;
    struct upg_notes in_progress; /* node -> state */
    struct upg_notes failed;      /* node -> why */
    struct upg_notes waiting;     /* node -> why (the first UPG_POOL_WAITING_MAX) */
    int waiting_more;             /* waiting nodes past those named */
    char *halted;                 /* why its rollout is halted, or NULL */
    char *error;                  /* why it cannot be acted on, or NULL */
    char *target_revision, *target_version;
    int64_t next_window_s; /* closed: when its next window opens (0: none or open) */
    enum upg_phase phase;
    /* The DriverUpgradePool's status as it should read (its RolloutHalted condition keeps its
     * transition time); NULL for the default pool. `write`: it differs from the stored one. */
    json_t *status;
    bool write;
};
#define UPG_POOL_WAITING_MAX 50

/* The ClusterPolicy's DriverUpgrade condition: True with UpgradeDone (or AutoUpgradeDisabled);
 * False with UpgradeInProgress, UpgradeFailed, RolloutHalted or InvalidUpgradeInput; the
 * message a line per pool. */
struct upg_condition {
    bool status;
    const char *reason;
    char *message;
};
#define UPG_CONDITION_TYPE "DriverUpgrade"

struct upg_node_patch {
    char *node;
    /* merge patch for the Node (metadata labels/annotations, spec.unschedulable), with
     * metadata.resourceVersion, the node's as read, as the precondition */
    json_t *patch;
};

struct upg_pod_ref {
    char *ns, *name, *node;
};

struct upg_plan {
    struct upg_node_patch *patches; /* at most one per node */
    size_t n_patches;
    struct upg_pod_ref *evictions; /* through the Eviction API */
    size_t n_evictions;
    /* out-of-date driver pods, and a node's validator pods once its new driver is up (they
     * validated the old one) */
    struct upg_pod_ref *deletions;
    size_t n_deletions;
    /* the Events to post, in order; a node's go only once its patch went through */
    struct upg_event *events;
    size_t n_events;
    size_t events_held; /* repeats the log held back */
    struct upg_pool_report *pools;
    size_t n_pools;
    struct upg_condition condition;
    struct upg_counts counts; /* NVIDIA's gpu_operator_nodes_upgrades_* */
    int64_t requeue_s;        /* look again in this many seconds (0: only on events) */
    bool frozen;              /* bad input: no node was touched; `error` says why */
    char *error;
};

int upg_plan(const struct upg_input *in, struct upg_plan **ret, struct err *e);
void upg_plan_free(struct upg_plan *p);
DEFINE_CLEANUP_FUNC(struct upg_plan, upg_plan_free)

/* ---- what the shell reads for the planner (upg-inputs.c) ------------------------------------ */

/*
 * The driver DaemonSets among `owned` (gpuop's objects): in namespace `ns`, the ClusterPolicy's
 * (UPG_DRIVER_APP) and each NVIDIADriver's (labelled gpuop.dev/nvidia-driver), each with its
 * current revision (the hash of the newest of `revisions`, ControllerRevisions, it owns) and the
 * driver version its image runs (`dflt` when the tag says none). A DaemonSet without a
 * revision yet is left out. A new array (*ret_n entries) whose strings are borrowed from
 * `owned` and `revisions`, but for `version`, which is version_buf's.
 */
struct upg_driver_set *upg_driver_sets(const json_t *owned, const json_t *revisions, const char *ns,
                                       const char *dflt, size_t *ret_n);
/* What the planner reads of a Node, added to the projection `p` of `obj`: the upgrade
 * annotations (NVIDIA's nvidia.com/gpu-driver-upgrade..., gpuop's upgrade.gpuop.dev/...),
 * spec.unschedulable, the kernel version, the GPU resources of capacity and allocatable and the
 * Ready condition. */
void upg_project_node(const json_t *obj, json_t *p);
/*
 * A pod as the planners read it (upgrade, allocation, remediation), kept compact: what the pod
 * informer keeps of an operand pod, and what a pass keeps of a node's listed workloads. A
 * two-item array:
 *   [0] the pod's part alike across a DaemonSet revision's pods, an object shaped as a Pod:
 *       metadata.namespace, labels, ownerReferences (kind, name), the mirror annotation;
 *       spec.containers' resources, emptyDir volumes, resourceClaims; status.phase, the Ready
 *       condition, the containers' readiness and restarts. Interned in `intern` (kobj_intern;
 *       NULL: not), so alike pods hold one copy: read-only.
 *   [1] the pod's own values in one string: name, node, creation and deletion times, each
 *       ended by a NUL (an absent one empty).
 * About 0.2 KiB of heap a pod, against ~1.2 KiB as a projected JSON object (two objects'
 * tables, a dozen members, four strings; bench/RESULTS.md). NULL for what is no object with a
 * name.
 *
 * Every planner reads a pod, this form or the API's (a planner's tests), through upg_pod_obj
 * (the Pod-shaped part: labels, namespace, owners, spec, status) and the accessors below for
 * the pod's own values: kobj_name and the like read nothing of the compact form.
 */
json_t *upg_pod_compact(const json_t *pod, json_t *intern);
/* Whether `pod` is upg_pod_compact's form. */
bool upg_pod_is_compact(const json_t *pod);
/* The Pod-shaped part of a pod: the pod itself, or its compact form's shared object. */
const json_t *upg_pod_obj(const json_t *pod);
/* A pod's metadata.name, spec.nodeName, metadata.creationTimestamp and
 * metadata.deletionTimestamp, from either form; NULL: none. */
const char *upg_pod_name(const json_t *pod);
const char *upg_pod_node(const json_t *pod);
const char *upg_pod_created(const json_t *pod);
const char *upg_pod_deletion(const json_t *pod);

/* ---- read-your-writes ----------------------------------------------------------------------- */

/*
 * The shell plans from its informer's nodes, which may lag behind its own writes (a loaded API
 * server, a slow watch): a pass that read a node from before the previous pass's patch would
 * repeat that step (the transition and its Event again, or a slot taken twice: the node looks
 * not started). upg_writes keeps what the server returned for gpuop's node patches until the
 * informer shows them.
 *
 * The rule. Each node patch carries the resourceVersion of the node the plan read
 * (metadata.resourceVersion in a merge patch is a precondition: the server answers 409 Conflict
 * when the node changed since), so a written node's versions form one chain through gpuop's
 * writes: the version a write replaced is the one just before it. While the cached node's
 * resourceVersion is one that gpuop's writes replaced, the cache is behind them and the pass
 * plans from the object the server returned for the last write; any other version is that write
 * or a later one (a watch delivers a node's versions in order, and a re-list is no older than
 * what the cache held), and the written copy is forgotten. resourceVersions are compared for
 * equality only: Kubernetes leaves their order unspecified.
 *
 * Not thread-safe: the shell's reconcile thread owns it.
 */
struct upg_writes;
struct upg_writes *upg_writes_new(void);
void upg_writes_free(struct upg_writes *w);
DEFINE_CLEANUP_FUNC(struct upg_writes, upg_writes_free)
/* A merge patch of `node` made with the precondition `base_rv` succeeded and made version
 * `rv`; the patch is kept (as compact JSON text), not the node the server returned: the node
 * as written is the cached one with the patches applied, so no second copy of a node's labels
 * is held while the informer catches up. Ignored without a name or either version. */
void upg_writes_record(struct upg_writes *w, const char *node, const char *base_rv, const char *rv,
                       const json_t *patch);
/* The nodes to plan from: `cached` (the informer's) with each node the cache shows at a version
 * gpuop's writes replaced made anew, as the writes since that version left it (its labels,
 * annotations and the other fields the patches set, at the last write's resourceVersion).
 * Forgets the writes the cache has caught up with and those of nodes no longer there. A new
 * array; its objects are shared with `cached` or made for it (read-only). */
json_t *upg_writes_fresh(struct upg_writes *w, const json_t *cached);
/* Nodes whose written copy is still in use (for tests and a metric). */
size_t upg_writes_pending(const struct upg_writes *w);

/* ---- the disruption budget (upg-budget.c) --------------------------------------------------- */

/*
 * The one budget driver upgrades, MIG changes and the remediation of GPU faults share: a node
 * counts against its pool's maxUnavailable while it is not Ready or is cordoned (by anyone: an
 * upgrade, the MIG manager, a quarantine, a person), and its GPUs count as ready capacity (the
 * capacity floor's) only while it is Ready, schedulable and not in an upgrade. The upgrade
 * planner and the remediation planner (src/lib/remediation) count with these, so neither takes a
 * pool below its floor behind the other's back.
 */
struct upg_budget {
    int total, unavailable, in_progress; /* nodes (in_progress: an upgrade in flight) */
    long long gpus_total, gpus_ready;
};
/* Counts one node: Ready, cordoned, its upgrade state and its GPUs. */
void upg_budget_add(struct upg_budget *b, bool ready, bool unsched, enum upg_state st,
                    long long gpus);
/* The same, read from a Node object (its Ready condition, spec.unschedulable, the upgrade state
 * label and upg_node_gpus). */
void upg_budget_add_node(struct upg_budget *b, const json_t *node);
/* An int-or-percent limit (maxUnavailable, a capacity floor) of `total`, rounded up; NULL: total.
 */
long long upg_limit(const json_t *int_or_percent, int total);
bool upg_node_ready(const json_t *node); /* the Ready condition is True */
/* The node's GPUs: allocatable nvidia.com/gpu, else the nvidia.com/gpu.count label, else 0. */
long long upg_node_gpus(const json_t *node);
/* A state in which the upgrade has the node (cordon through uncordon). */
bool upg_state_in_flight(enum upg_state s);
/* Does the parsed pool `p` select `node` (its matchLabels, or the NVIDIADriver owning it)? */
bool upg_pool_selects(const struct upg_pool *p, const json_t *node);
/* May `pod` be evicted now under the PodDisruptionBudgets `pdbs` (status.disruptionsAllowed less
 * the evictions this pass already planned, counted in `used`: "ns/name" -> n)? If so the
 * eviction is counted in `used`; if not *ret_pdb names the budget that refuses. */
bool upg_pdb_allows(const json_t *pdbs, json_t *used, const json_t *pod, const char **ret_pdb);

/* A pod Running with its Ready condition True. */
bool upg_pod_ready(const json_t *pod);
/* A pod Succeeded or Failed. */
bool upg_pod_finished(const json_t *pod);
/* A pod a drain leaves: owned by a DaemonSet, or a static (mirror) pod. */
bool upg_pod_daemon(const json_t *pod);

/* Is this pod a GPU workload (a container requesting or limited by nvidia.com/gpu* or
 * nvidia.com/mig-*), the ones pod deletion evicts? */
bool upg_pod_is_gpu(const json_t *pod);

/* ---- the GPU allocation per pool (upg-alloc.c) ---------------------------------------------- */

/*
 * A pool's nodes hand out GPUs through the device plugin (a count of nvidia.com/gpu) or through
 * DRA (the kubelet plugin `gpuop dra-plugin`, ResourceSlices and claims); a node runs one, never
 * both. When a pool's spec.gpuAllocation changes, upg_alloc_plan() moves its nodes one by one
 * within the pool's and the cluster's budget (upg_budget, the one driver upgrades and the
 * remediation of GPU faults draw on):
 *
 *   start   cordoned (gpuop notes it did), the move annotated "<target> drain"
 *   drain   its GPU pods (nvidia.com/gpu requests or resource claims) evicted under their PDBs
 *   stop    the old plugin's deploy label turned off; waits until its pod is gone (and, leaving
 *           DRA, until the node's ResourceSlices are deleted)
 *   start   the new plugin's deploy label on; waits until it serves: a ResourceSlice of the node
 *           with devices (DRA), or nvidia.com/gpu allocatable (the device plugin)
 *   done    UPG_LABEL_ALLOCATION set to the target, the annotations removed, uncordoned (when
 *           gpuop cordoned it)
 *
 * Every step is written to the node before the next is taken, so a restarted operator resumes
 * where it was. A node in a move finishes that move; a pool changed back moves it again after.
 */
#define UPG_LABEL_ALLOCATION   "gpuop.dev/gpu-allocation" /* devicePlugin (or none) or dra */
#define UPG_LABEL_DEPLOY_DP    "nvidia.com/gpu.deploy.device-plugin"     /* NVIDIA's */
#define UPG_LABEL_DEPLOY_DRA   "gpuop.dev/gpu.deploy.dra-kubelet-plugin" /* "true": on */
#define UPG_ANN_MOVE           "upgrade.gpuop.dev/allocation-move"       /* "<target> <step>" */
#define UPG_ANN_MOVE_SINCE     "upgrade.gpuop.dev/allocation-since"      /* epoch s, the step */
#define UPG_ANN_MOVE_CORDONED  "upgrade.gpuop.dev/allocation-cordoned"   /* "true": gpuop did */
#define UPG_DEVICE_PLUGIN_APP  "nvidia-device-plugin-daemonset"
#define UPG_DRA_PLUGIN_APP     "nvidia-dra-driver-gpu-kubelet-plugin"
#define UPG_DRA_DRIVER         "gpu.nvidia.com"
#define UPG_LABEL_DRA_NODE     "gpuop.dev/dra-node" /* on the plugin's ResourceSlices */
#define UPG_ALLOC_EVENT_REASON "GPUAllocationMove"

/* "devicePlugin" or "dra"; upg_alloc_parse: -1 for any other value. */
const char *upg_alloc_name(enum upg_alloc a);
int upg_alloc_parse(const char *v);

enum upg_move_step { UPG_MOVE_NONE, UPG_MOVE_DRAIN, UPG_MOVE_STOP, UPG_MOVE_START };
const char *upg_move_step_name(enum upg_move_step s); /* "drain", "stop", "start" */
/* A node's move as annotated: its target and step (UPG_MOVE_NONE: no move, or an annotation
 * that does not parse, which is then started again from its first step). */
enum upg_move_step upg_move_of(const json_t *node, enum upg_alloc *ret_target);
/* The allocation a node runs now (UPG_LABEL_ALLOCATION; none: the device plugin). */
enum upg_alloc upg_node_alloc(const json_t *node);

struct upg_alloc_input {
    const json_t *nodes;       /* Node objects */
    const json_t *pods;        /* pods on the nodes in a drain or stop step */
    const json_t *pods_listed; /* {node: true}: their every pod is in pods; NULL: all are */
    const json_t *pdbs;        /* PodDisruptionBudgets */
    const json_t *pools;       /* DriverUpgradePool objects (array), or NULL */
    const json_t *nvidia_drivers;
    const json_t *max_unavailable; /* the ClusterPolicy's upgradePolicy.maxUnavailable (NULL: 1) */
    const json_t *slices;          /* ResourceSlice objects (NULL: none listed) */
    int64_t now_s;
};

struct upg_alloc_pool_report {
    char *name; /* "default": the GPU nodes no pool selects */
    enum upg_alloc target;
    int total, on_target;
    struct upg_notes moving;  /* node -> step */
    struct upg_notes waiting; /* node -> why it has not started */
    char *error;              /* the pool cannot be acted on */
    /* status.gpuAllocation as it should read (NULL for the default pool); write: it differs */
    json_t *status;
    bool write;
};

struct upg_alloc_plan {
    struct upg_node_patch *patches; /* at most one per node */
    size_t n_patches;
    struct upg_pod_ref *evictions;
    size_t n_evictions;
    char **slice_nodes; /* nodes whose ResourceSlices (UPG_LABEL_DRA_NODE) go */
    size_t n_slice_nodes;
    /* a Normal Event per node step taken (reason UPG_ALLOC_EVENT_REASON), posted once its patch
     * went through */
    struct upg_alloc_event {
        char *node, *message;
    } * events;
    size_t n_events;
    struct upg_alloc_pool_report *pools;
    size_t n_pools;
    /* some node runs DRA or is on its way to it: the DRA kubelet plugin is rendered */
    bool dra_wanted;
    int64_t requeue_s; /* look again in this many seconds (0: only on events) */
};

int upg_alloc_plan(const struct upg_alloc_input *in, struct upg_alloc_plan **ret, struct err *e);
void upg_alloc_plan_free(struct upg_alloc_plan *p);
DEFINE_CLEANUP_FUNC(struct upg_alloc_plan, upg_alloc_plan_free)
/* Does some node run DRA, or is on its way to it, or a pool ask for it (the DRA stack is then
 * rendered under the ClusterPolicy)? Pools that do not parse are passed over. */
bool upg_alloc_dra_wanted(const json_t *nodes, const json_t *pools);

#endif
