/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuhealth: a node's GPU health as events with a recommended action. A pure core, shared by the
 * node agent that watches NVML (gpuop node-status-exporter writes the result to its Node) and
 * the remediation planner (src/lib/remediation) that reads it back from the Node.
 *
 *   the catalog     what NVML reports, classified: each XID of NVIDIA's XID catalog (Ampere and
 *                   later) with NVIDIA's immediate resolution bucket and the action gpuop takes
 *                   from it, and the classes NVML reports without an XID (an uncorrectable ECC
 *                   error, row remapping pending or failed, pages pending retirement, a GPU lost
 *                   from the bus, NVLink errors, thermal and power slowdowns held beyond a
 *                   window, a device plugin that disagrees with NVML). Data, tested entry by
 *                   entry; docs/remediation.md cites the source of each.
 *   the tracker     gh_observe(): one observation of the node's GPUs (their state now, the events
 *                   since the last one, the remediation's acknowledgement) and the time in; the
 *                   node's current health out: its active faults, the condition and the
 *                   annotation to write when it changed.
 *   the annotation  GH_ANN_HEALTH, JSON: the active faults, the last event, the event sequence
 *                   and what the remediation acknowledged. It lives on the Node, so a restarted
 *                   agent (or operator) continues from it; gh_health_parse() reads it back.
 *
 * Two kinds of fault. A *live* fault is a state NVML shows now (a GPU lost, rows pending
 * remapping, a slowdown held): it lasts while NVML shows it and goes when it does (a reset, a
 * reboot). A *latched* fault is an event (an XID, an ECC error event, NVLink errors counted): it
 * stays until the remediation acknowledges it (GH_ANN_ACK, written by the planner once the node
 * was remediated and validated), since NVML shows nothing when the cause is gone. Every fault
 * gets a sequence number when it appears; the acknowledgement names the last one handled.
 *
 *   the plugins' policy  gh_policy_*: which NVML events make a device unhealthy in a device
 *                   plugin (`gpuop device-plugin`, `gpuop dra-plugin`), as NVIDIA's device plugin
 *                   decides it: every XID but the application errors 13, 31, 43, 45, 68 and 109,
 *                   narrowed by a disable list (DP_DISABLE_HEALTHCHECKS: XIDs to ignore, "all" or
 *                   "xids" for every XID) and widened by an enable list (DP_ENABLE_HEALTHCHECKS:
 *                   XIDs that count over both, "all" for every XID); double-bit ECC events count.
 *
 * No I/O, no clock: time is passed in. Not thread-safe: one caller owns a gh_state.
 */
#ifndef GPUOP_GPUHEALTH_H
#define GPUOP_GPUHEALTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "util.h"

/* The agent's annotation on its Node (JSON, gh_health_format) and the Node condition. */
#define GH_ANN_HEALTH     "gpuop.dev/gpu-health"
#define GH_CONDITION_TYPE "GPUHealthy"
/* The remediation's acknowledgement (written by the planner, read by the agent): the sequence
 * number of the last event it remediated and validated; latched faults up to it are cleared. */
#define GH_ANN_ACK        "remediation.gpuop.dev/ack-seq"
#define GH_FAULTS_MAX     16 /* active faults kept (the worst first) */
#define GH_GPUS_MAX       64 /* GPUs a node has at most */
#define GH_UUID_MAX       96
#define GH_MSG_MAX        240
#define GH_ANNOTATION_MAX (16u << 10) /* bytes of the annotation read back */

/* What should be done, from the least to the most disruptive. NVIDIA's immediate resolution
 * buckets map onto these (gh_bucket_action). */
enum gh_action {
    GH_ACT_NONE,             /* nothing: informational, or benign */
    GH_ACT_RESTART_WORKLOAD, /* the application that hit it restarts; the GPU is fine */
    GH_ACT_RESET_GPU,        /* the GPU must be reset (its processes gone) */
    GH_ACT_RELOAD_DRIVER,    /* the driver must be reloaded */
    GH_ACT_REBOOT_NODE,      /* the node must be rebooted */
    GH_ACT_REPLACE_HW,       /* a person must look at the hardware */
    GH_ACT_COUNT
};
/* "none", "restart-workload", "reset-gpu", "reload-driver", "reboot-node", "replace-hw". */
const char *gh_action_name(enum gh_action a);
/* The action named, or -1. */
int gh_action_parse(const char *s);
/* Does the action take the node out of service (reset-gpu and above)? Those make the node
 * unhealthy and are what the remediation planner quarantines a node for. */
bool gh_action_quarantines(enum gh_action a);
/* NVIDIA's immediate resolution bucket ("RESET_GPU", "RESTART_BM", ...) as a gpuop action; -1 for
 * a bucket gpuop does not know. */
int gh_bucket_action(const char *bucket);

enum gh_class {
    GH_CLS_XID,             /* an XID critical error event (latched) */
    GH_CLS_ECC_DBE,         /* uncorrectable (double-bit) ECC errors: a DBE event, or the
                             * volatile count above 0 (live: a reset clears it) */
    GH_CLS_REMAP_PENDING,   /* rows pending remapping (Ampere and later; live) */
    GH_CLS_REMAP_FAILURE,   /* a row remapping failed (live) */
    GH_CLS_RETIRED_PENDING, /* pages pending retirement (before Ampere; live) */
    GH_CLS_LOST,            /* the GPU fell off the bus: NVML answers GPU_IS_LOST (live) */
    GH_CLS_NVLINK,          /* NVLink recovery or replay errors counted (latched) */
    GH_CLS_THERMAL,         /* a hardware thermal slowdown held beyond the window (live) */
    GH_CLS_POWER,           /* a hardware power brake slowdown held beyond the window (live) */
    GH_CLS_PLUGIN,          /* the device plugin holds back GPUs NVML reports healthy (live) */
    GH_CLS_COUNT
};
/* "xid", "ecc-dbe", "remap-pending", "remap-failure", "retired-pending", "lost", "nvlink",
 * "thermal", "power", "plugin"; gh_class_parse: -1 for another word. */
const char *gh_class_name(enum gh_class c);
int gh_class_parse(const char *s);

/* ---- the catalog ---------------------------------------------------------------------------- */

/* One XID of NVIDIA's catalog. */
struct gh_xid_entry {
    unsigned xid;
    const char *mnemonic; /* NVIDIA's */
    const char *bucket;   /* NVIDIA's immediate resolution bucket */
    enum gh_action action;
};
/* The catalog, by XID. */
const struct gh_xid_entry *gh_xid_catalog(size_t *ret_n);
/* The entry of `xid`, or NULL: an XID the catalog does not list (reported, action none). */
const struct gh_xid_entry *gh_xid_lookup(unsigned xid);

/* One class without an XID. */
struct gh_class_entry {
    enum gh_class cls;
    enum gh_action action;
    bool live;
    const char *reason;  /* the condition's reason: CamelCase */
    const char *summary; /* what it is, for messages */
};
const struct gh_class_entry *gh_class_info(enum gh_class c);

/* ---- faults --------------------------------------------------------------------------------- */

struct gh_fault {
    uint64_t seq;
    enum gh_class cls;
    unsigned code; /* the XID (GH_CLS_XID), else 0 */
    int gpu;       /* NVML index; -1: the node (GH_CLS_PLUGIN) */
    char uuid[GH_UUID_MAX];
    enum gh_action action;
    bool live;
    int64_t since_ms; /* when it appeared (wall clock) */
    char message[GH_MSG_MAX];
};
/* The condition reason of a fault: "Xid79", "UncorrectableECC", ... (buf of at least 32). */
void gh_fault_reason(const struct gh_fault *f, char *buf, size_t n);

/* The health a Node carries (GH_ANN_HEALTH), as written or read back. */
struct gh_health {
    uint64_t seq;          /* the last sequence number given */
    uint64_t acked;        /* the last acknowledgement the agent applied */
    bool healthy;          /* no fault that quarantines */
    enum gh_action action; /* the worst action of the active faults */
    size_t n_faults;
    struct gh_fault faults[GH_FAULTS_MAX]; /* active, the worst first */
    bool has_last;
    struct gh_fault last; /* the newest event, active or not */
    int64_t updated_ms;
};
/* The annotation's JSON text (new; compact, keys sorted). */
char *gh_health_format(const struct gh_health *h);
/* Reads an annotation back; errors name GH_ANN_HEALTH and the field. At most GH_ANNOTATION_MAX
 * bytes, GH_FAULTS_MAX faults; unknown keys are ignored (a newer agent's). */
int gh_health_parse(const char *text, size_t len, struct gh_health *ret, struct err *e);

/* ---- the tracker ---------------------------------------------------------------------------- */

/* One GPU as NVML shows it now. A field is read when its *_ok bit is set. */
struct gh_gpu_obs {
    unsigned index;
    const char *uuid; /* NULL or "" when unknown (a GPU lost before it was read) */
    bool lost;
    bool ecc_ok;
    uint64_t dbe_volatile;
    bool remap_ok, remap_pending, remap_failure;
    bool retired_ok, retired_pending;
    bool nvlink_ok;
    uint64_t nvlink_errors; /* recovery + replay errors, all links: a counter */
    bool clocks_ok;
    uint64_t clock_event_reasons; /* NVML's clock event reason bits (gpu.h's GPU_CLOCK_EVENT_*) */
};
/* The clock event reasons that are faults when held (bit i as NVML's, and gpu.h's). */
#define GH_CLOCKS_HW_SLOWDOWN    (1ULL << 3)
#define GH_CLOCKS_HW_THERMAL     (1ULL << 6)
#define GH_CLOCKS_HW_POWER_BRAKE (1ULL << 7)

/* An event NVML delivered since the last observation. */
enum gh_event_kind { GH_EV_XID, GH_EV_DBE };
struct gh_event_obs {
    enum gh_event_kind kind;
    unsigned gpu;
    const char *uuid;
    unsigned xid; /* GH_EV_XID */
    int64_t at_ms;
};

struct gh_observation {
    int64_t now_ms;
    bool nvml_ok; /* the GPUs were read; false: only the events count, live faults are kept */
    const struct gh_gpu_obs *gpus;
    size_t n_gpus;
    const struct gh_event_obs *events;
    size_t n_events;
    /* GPUs the node advertises fewer than NVML has, none of them faulty by NVML, for longer than
     * the agent's grace period: the device plugin disagrees (0: it agrees; -1: unknown) */
    int plugin_held_back;
    /* What the Node carries now (NULL: unknown or absent): the agent's annotation, read once to
     * continue after a restart, and the planner's acknowledgement. */
    const char *annotation;
    const char *ack;
    uint64_t slowdown_window_ms; /* a slowdown held this long is a fault (0: never) */
};

/* Kept between observations; zero it before the first. */
struct gh_state {
    bool started;
    struct gh_health h;
    /* per GPU: where a slowdown began (0: none), the NVLink error count seen */
    uint64_t thermal_since[GH_GPUS_MAX], power_since[GH_GPUS_MAX];
    uint64_t nvlink_seen[GH_GPUS_MAX];
    bool nvlink_known[GH_GPUS_MAX];
    uint64_t events_total[GH_CLS_COUNT]; /* faults that appeared, by class */
    uint64_t written_hash;               /* of the annotation text last handed out */
};

struct gh_report {
    struct gh_health health; /* now */
    /* the faults that appeared in this observation (for logs and metrics), at most
     * GH_FAULTS_MAX */
    size_t n_new;
    struct gh_fault new_faults[GH_FAULTS_MAX];
    size_t n_cleared; /* faults gone since the last observation */
    /* the condition: status, reason and message (for GH_CONDITION_TYPE) */
    bool condition_status;
    char condition_reason[48];
    char condition_message[512];
    /* GH_ANN_HEALTH's new text when the health changed (malloc'ed), else NULL */
    char *annotation;
    /* why the Node's annotation or acknowledgement was not read ("" when it was) */
    char input_error[ERR_MSG_MAX];
};
void gh_report_clear(struct gh_report *r); /* frees the annotation; accepts NULL */

/* One observation: the events become latched faults, the GPUs' state live ones, the
 * acknowledgement clears latched ones up to it. Bad input on the Node (an annotation or an
 * acknowledgement that does not parse) is reported in input_error and ignored: returns 0 (-EINVAL
 * only for an observation without a time). */
int gh_observe(struct gh_state *st, const struct gh_observation *o, struct gh_report *ret,
               struct err *e);
/* The shell could not write the annotation gh_observe handed out: the next one hands it out
 * again (ok true: nothing to do). */
void gh_state_written(struct gh_state *st, bool ok);

/* ---- the plugins' policy -------------------------------------------------------------------- */

#define GH_XID_SET_MAX 64
struct gh_policy {
    bool disable_all; /* the disable list says "all" or "xids" */
    bool enable_all;  /* the enable list says "all" */
    size_t n_ignored, n_enabled;
    uint64_t ignored[GH_XID_SET_MAX]; /* the defaults plus the disable list */
    uint64_t enabled[GH_XID_SET_MAX]; /* the enable list (overrides ignored) */
};
/* Parses the two lists (NULL = unset) as NVIDIA's plugin does: comma lists, trimmed, lower case,
 * malformed entries ignored. Never fails. */
void gh_policy_init(struct gh_policy *hp, const char *disable_list, const char *enable_list);
bool gh_policy_xid_critical(const struct gh_policy *hp, uint64_t xid);
/* Whether the event (an XID that counts, or double-bit ECC) makes devices unhealthy. */
bool gh_policy_event_critical(const struct gh_policy *hp, const struct gpu_event *ev);

#endif
