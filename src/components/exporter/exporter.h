/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exporter: dcgm-exporter-compatible GPU metrics from NVML (`gpuop exporter`).
 *
 * Pure core, tested by tables (this header):
 *   - the counters CSV in dcgm-exporter's format (`DCGM field, prom type, help`) and the
 *     catalogue of DCGM fields gpuop knows: what each reads from struct gpu_sample / the
 *     inventory, or why NVML cannot provide it;
 *   - the pod map (GPU / MIG / replica device IDs from the kubelet's PodResources API to
 *     pod, namespace, container);
 *   - rendering of one collection into Prometheus text or OpenMetrics with dcgm-exporter's
 *     names, types, help and label order.
 * The shell (exporter-main.c) samples NVML on a collector thread, talks to the kubelet and serves
 * the latest rendered snapshot over src/edge/http.
 *
 * MIG: NVML measures clocks, temperatures, power, energy, PCIe, ECC, violations and XIDs per
 * physical GPU. For a GPU in MIG mode, as dcgm-exporter does, those series are repeated for each
 * GPU instance with GPU_I_PROFILE / GPU_I_ID (the parent's value), so pods on MIG devices get
 * attributed series. Fields that are per-instance quantities gpuop does not measure per instance
 * (framebuffer: NVML can read it on MIG handles but the GPU model samples whole GPUs) are
 * exported once for the whole GPU without MIG labels; utilization fields are not exported for
 * GPUs in MIG mode (NVML does not report them there). The profiling fields (DCGM_FI_PROF_*, GPU
 * Performance Monitoring) are measured per GPU instance: once for the whole GPU without MIG
 * labels and once per GPU instance with its own value (EXP_MIG_OWN).
 *
 * Exporter-synthesised fields: DCGM_EXP_CLOCK_EVENTS_COUNT counts, per clock_event label, the
 * collections in the last window (--clock-events-count-window-size, default 5 min) in which
 * NVML reported that clock-event reason active;
 * DCGM_EXP_XID_ERRORS_COUNT counts the XIDs of each value seen in the last window
 * (--xid-count-window, default 5 min), labelled xid and window_size_in_ms as dcgm-exporter does.
 */
#ifndef GPUOP_EXPORTER_H
#define GPUOP_EXPORTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "prom.h"
#include "util.h"

int exporter_main(int argc, char **argv);

/* ---- catalogue ------------------------------------------------------------------------------ */

enum exp_kind { EXP_GAUGE = 0, EXP_COUNTER, EXP_LABEL };

/* Where a field's value comes from. */
enum exp_src {
    EXP_SRC_UNSUPPORTED = 0,
    EXP_SRC_SM_CLOCK,
    EXP_SRC_MEM_CLOCK,
    EXP_SRC_MAX_SM_CLOCK,
    EXP_SRC_MAX_MEM_CLOCK,
    EXP_SRC_MEM_TEMP,
    EXP_SRC_GPU_TEMP,
    EXP_SRC_POWER,
    EXP_SRC_POWER_LIMIT,
    EXP_SRC_ENERGY,
    EXP_SRC_PCIE_REPLAY,
    EXP_SRC_UTIL_GPU,
    EXP_SRC_UTIL_MEM,
    EXP_SRC_UTIL_ENC,
    EXP_SRC_UTIL_DEC,
    EXP_SRC_XID,
    EXP_SRC_FB_TOTAL,
    EXP_SRC_FB_FREE,
    EXP_SRC_FB_USED,
    EXP_SRC_FB_RESERVED,
    EXP_SRC_REMAP_UNC,
    EXP_SRC_REMAP_COR,
    EXP_SRC_REMAP_FAILURE,
    EXP_SRC_REMAP_PENDING,
    EXP_SRC_NVLINK_BW,
    EXP_SRC_NVLINK_CRC_FLIT,
    EXP_SRC_NVLINK_CRC_DATA,
    EXP_SRC_NVLINK_REPLAY,
    EXP_SRC_NVLINK_RECOVERY,
    EXP_SRC_ECC_SBE_VOL,
    EXP_SRC_ECC_DBE_VOL,
    EXP_SRC_ECC_SBE_AGG,
    EXP_SRC_ECC_DBE_AGG,
    EXP_SRC_RETIRED_SBE,
    EXP_SRC_RETIRED_DBE,
    EXP_SRC_RETIRED_PENDING,
    EXP_SRC_VIOL_POWER,
    EXP_SRC_VIOL_THERMAL,
    EXP_SRC_VIOL_SYNC_BOOST,
    EXP_SRC_VIOL_BOARD_LIMIT,
    EXP_SRC_VIOL_LOW_UTIL,
    EXP_SRC_VIOL_RELIABILITY,
    EXP_SRC_CLOCK_EVENT_REASONS, /* the GPU_CLOCK_EVENT_* bit mask (bit i as NVML numbers it) */
    EXP_SRC_CLOCK_EVENTS_COUNT,  /* DCGM_EXP_CLOCK_EVENTS_COUNT, one series per clock_event */
    EXP_SRC_XID_COUNT,           /* DCGM_EXP_XID_ERRORS_COUNT, one series per xid in the window */
    EXP_SRC_LABEL_DRIVER_VERSION,
    EXP_SRC_LABEL_SERIAL,
    EXP_SRC_PROF, /* a DCGM_FI_PROF_* field from GPU Performance Monitoring (exp_field.prof) */
};

/* How a field relates to MIG instances (see the header comment). */
enum exp_mig {
    EXP_MIG_PER_INSTANCE = 0, /* repeated per GPU instance with the parent's value */
    EXP_MIG_GPU_ONLY,         /* once per GPU, without MIG labels */
    EXP_MIG_NONE,             /* not exported for a GPU in MIG mode */
    EXP_MIG_OWN, /* once for the whole GPU without MIG labels, and per GPU instance with the
                  * instance's own value where it has one (the profiling fields) */
};

struct exp_field {
    const char *name; /* "DCGM_FI_DEV_GPU_TEMP" */
    enum exp_src src;
    enum exp_mig mig;
    bool label;               /* a string field: the CSV type must be `label` */
    const char *reason;       /* for unsupported fields: why NVML cannot provide it */
    enum gpu_prof_field prof; /* EXP_SRC_PROF: which profiling field */
};

/* The catalogue entry for a DCGM field name, or NULL when gpuop does not know it. */
const struct exp_field *exp_field_lookup(const char *name);
/* Every known field name, comma-separated, for error messages (static storage). */
const char *exp_field_known_names(void);

/* clock_event label values by GPU_CLOCK_EVENT_* bit (bit i of the mask), as dcgm-exporter
 * names them. */
#define EXP_CLOCK_EVENTS 9
extern const char *const exp_clock_event_names[EXP_CLOCK_EVENTS];

/* ---- counters CSV -----------------------------------------------------------------------------
 */

struct exp_counter {
    const struct exp_field *field;
    enum exp_kind kind;
    char *help;
    unsigned line;
};

struct exp_counters {
    size_t n;
    struct exp_counter *items;
};

/* The code for a field name gpuop does not know. The list of known ones is too long for a
 * struct err message: the caller appends exp_field_known_names() to what it reports. */
#define EXP_UNKNOWN_FIELD (-ENOMSG)

/* Parses a counters file. `source` names it in errors ("<source>:<line>: <reason>").
 * Unknown fields are EXP_UNKNOWN_FIELD (see above); unsupported known fields are accepted
 * (exp_counters_log_unsupported names them). */
int exp_counters_parse(const char *text, size_t len, const char *source, struct exp_counters **ret,
                       struct err *e);
int exp_counters_load(const char *path, struct exp_counters **ret, struct err *e);
/* The built-in default: the same set as dcgm-exporter's etc/default-counters.csv. */
int exp_counters_default(struct exp_counters **ret, struct err *e);
extern const char exp_default_counters_csv[];
void exp_counters_free(struct exp_counters *c);
DEFINE_CLEANUP_FUNC(struct exp_counters, exp_counters_free)
/* Logs, once, every counter that cannot be exported and why; returns how many. The profiling
 * fields depend on the GPUs: exp_prof_log_unsupported names those once the GPUs are known. */
size_t exp_counters_log_unsupported(const struct exp_counters *c);
/* Whether the counters ask for any profiling field (DCGM_FI_PROF_*). */
bool exp_counters_want_prof(const struct exp_counters *c);

/* ---- pod map ----------------------------------------------------------------------------------
 */

struct exp_pod_ref {
    char *pod, *namespace, *container;
};

/* What is allocated on one GPU, or one GPU instance (gi_id != EXP_WHOLE_GPU). */
#define EXP_WHOLE_GPU 0xFFFFFFFFu
struct exp_pod_entry {
    char uuid[GPU_UUID_MAX]; /* the physical GPU's "GPU-..." uuid */
    unsigned gi_id;
    struct exp_pod_ref ref;
};

struct exp_pod_map {
    size_t n;
    struct exp_pod_entry *items;
};

/* Whether the kubelet resource name is a GPU resource: nvidia.com/gpu, nvidia.com/mig-*, or
 * one listed in extra (comma-separated, NVIDIA_RESOURCE_NAMES; may be NULL). */
bool exp_pod_resource_is_gpu(const char *resource, const char *extra);
/* Resolves one device ID of a GPU resource ("GPU-…", "MIG-…", "GPU-…::3") against the inventory
 * and adds it. IDs matching nothing are ignored (returns false). Same triple twice is kept once. */
bool exp_pod_map_add(struct exp_pod_map *m, const struct gpu_inventory *inv, const char *device_id,
                     const char *pod, const char *ns, const char *container);
void exp_pod_map_clear(struct exp_pod_map *m);
void exp_pod_map_free(struct exp_pod_map *m);
DEFINE_CLEANUP_FUNC(struct exp_pod_map, exp_pod_map_free)

/* ---- clock-event history (DCGM_EXP_CLOCK_EVENTS_COUNT's window) ----------------------------- */

/* The clock-event reason masks of one GPU's recent collections, in a ring of `cap` entries. */
struct exp_clock_hist {
    size_t cap, n, next;
    uint64_t *at_ms;
    uint32_t *mask;
};

/* cap: the collections one window holds (window / interval + 2); at least 1. */
void exp_clock_hist_init(struct exp_clock_hist *h, size_t cap);
void exp_clock_hist_clear(struct exp_clock_hist *h);
/* Records one collection's mask (a zero mask needs no entry and is skipped). */
void exp_clock_hist_push(struct exp_clock_hist *h, uint64_t now_ms, uint64_t mask);
/* counts[k]: entries no older than window_ms at now_ms with reason bit k set. */
void exp_clock_hist_count(const struct exp_clock_hist *h, uint64_t now_ms, uint64_t window_ms,
                          uint64_t counts[EXP_CLOCK_EVENTS]);

/* One clock-event history per GPU, by UUID (the collector's). */
#define EXP_CLOCK_HISTS    64
#define EXP_CLOCK_HIST_MAX 4096 /* collections kept per GPU */
struct exp_clock_table {
    size_t n;
    struct {
        char uuid[GPU_UUID_MAX];
        struct exp_clock_hist h;
    } items[EXP_CLOCK_HISTS];
};
/* The collections one window holds, window / interval + 2, at most EXP_CLOCK_HIST_MAX (with very
 * short intervals the count covers the newest EXP_CLOCK_HIST_MAX collections). */
size_t exp_clock_hist_cap(uint64_t window_ms, uint64_t interval_ms);
/* uuid's history, made with cap entries the first time; NULL when the table is full (the GPU's
 * clock events are then not counted). */
struct exp_clock_hist *exp_clock_table_get(struct exp_clock_table *t, const char *uuid, size_t cap);
void exp_clock_table_clear(struct exp_clock_table *t);

/* ---- XID history (DCGM_FI_DEV_XID_ERRORS, DCGM_EXP_XID_ERRORS_COUNT) ------------------------- */

#define EXP_XID_GPUS 64  /* GPUs whose last XID is kept */
#define EXP_XID_RING 256 /* recent XID events kept for the window's counts */
/* The last XID of each GPU and the recent XID events. Plain data: the caller locks. */
struct exp_xid_log {
    size_t n_last;
    struct {
        char uuid[GPU_UUID_MAX];
        uint64_t xid;
    } last[EXP_XID_GPUS];
    size_t next, n; /* the ring: next slot, entries held */
    struct {
        char uuid[GPU_UUID_MAX];
        uint64_t xid;
        uint64_t at_ms; /* monotonic */
    } ring[EXP_XID_RING];
};
void exp_xid_log_record(struct exp_xid_log *l, const char *uuid, uint64_t xid, uint64_t now_ms);
/* uuid's last XID; 0 for none. */
uint64_t exp_xid_log_last(const struct exp_xid_log *l, const char *uuid);
/* uuid's XIDs no older than window_ms at now_ms, counted by value into st->xid_counts (the first
 * EXP_XID_COUNTS_MAX values). */
struct exp_gpu_state;
void exp_xid_log_counts(const struct exp_xid_log *l, const char *uuid, uint64_t now_ms,
                        uint64_t window_ms, struct exp_gpu_state *st);

/* ---- profiling fields: GPU Performance Monitoring (DCGM_FI_PROF_*) --------------------------
 *
 * A GPU that has GPM gets one sampler (gpu.h) for its MIG layout, made once; each collection
 * takes a sample and exports the fields over the interval between it and the previous one. The
 * arithmetic over the two samples (counter differences, their wrap, the units) is NVML's and the
 * GPU model's (gpu_gpm_metrics); what the exporter decides is which answers become series. */

/* What one GPU's profiling fields read at one collection: the whole GPU's and each GPU
 * instance's values over the interval between its last two samples. */
struct exp_prof {
    bool ok;              /* a pair was measured; false: nothing to export */
    uint64_t interval_ms; /* between the two samples */
    struct gpu_prof gpu;  /* the whole GPU */
    size_t n_gi;          /* the GPU instances with values (an instance's error leaves it out) */
    struct {
        unsigned gi_id;
        struct gpu_prof prof;
    } gi[GPU_GPM_GI_MAX];
};

/* NVML asks for more than 100 ms between two GPM samples of a GPU. */
#define EXP_GPM_MIN_GAP_MS 100
/* The oldest a previous sample may be and still pair with a collection's: one more interval (a
 * late collection), and a second at least; an older pair is stale and exports nothing. */
uint64_t exp_gpm_max_age_ms(uint64_t interval_ms);
/* Whether a collection at now_ms samples GPM, the last sample taken at prev_ms (0: none yet).
 * Not when less than EXP_GPM_MIN_GAP_MS passed: the collection keeps the last pair's values. */
bool exp_gpm_due(uint64_t prev_ms, uint64_t now_ms);
/* The values one collection exports, from gpu_gpm_metrics' answer rc (0 with *m filled) at
 * max_age_ms: nothing on an error (-EAGAIN: the first sample, or not after the previous;
 * -ESTALE: the previous too old; a failed or lost GPU), nothing for a pair longer than
 * max_age_ms, no instance whose own answer failed; within a target only what NVML answered
 * (gpu_prof.valid: a metric NVML failed, or gave as negative or not finite, stays out). */
void exp_prof_from_gpm(int rc, const struct gpu_gpm_metrics *m, uint64_t max_age_ms,
                       struct exp_prof *ret);
/* Field f of the whole GPU (gi_id EXP_WHOLE_GPU) or of GPU instance gi_id; false when it has none.
 */
bool exp_prof_value(const struct exp_prof *p, unsigned gi_id, enum gpu_prof_field f, double *ret);

/* The MIG layout a sampler was made for: the GPU instances in the inventory's order, each once,
 * with their profiles. Another layout needs another sampler. */
struct exp_gpm_layout {
    bool mig;
    size_t n;
    struct {
        unsigned gi_id, profile_id;
    } gi[GPU_GPM_GI_MAX]; /* a GPU has at most 7; a sampler takes GPU_GPM_GI_MAX */
};
void exp_gpm_layout_of(const struct gpu_device *d, struct exp_gpm_layout *ret);
bool exp_gpm_layout_equal(const struct exp_gpm_layout *a, const struct gpu_device *d);

/* Why a GPU has no GPM, gpu_gpm_support having said 0: its architecture (before Hopper, by its
 * compute capability: Hopper is 9.0) or its driver. arch is gpu_arch_name's. Writes the reason
 * (without the GPU's index) into buf. */
enum exp_gpm_why { EXP_GPM_NO_ARCH = 1, EXP_GPM_NO_DRIVER };
enum exp_gpm_why exp_gpm_why_not(const struct gpu_device *d, const char *arch,
                                 const char *driver_version, char *buf, size_t n);

/* One GPU's GPM support as the collector found it at start. */
#define EXP_GPM_REASON_MAX 256
struct exp_gpm_support {
    unsigned index;
    int support;                     /* 1; 0 (reason says why); negative: the query failed */
    char reason[EXP_GPM_REASON_MAX]; /* support <= 0 */
};
/* The GPUs that cannot serve profiling fields, grouped by reason ("gpu 0-3,6: <reason>; gpu 7:
 * <reason>") into out; returns how many GPUs support GPM (-ENOBUFS when out is too small). */
int exp_gpm_summary(const struct exp_gpm_support *g, size_t n, struct sbuf *out);
/* Logs, once at start, each requested profiling field some GPU cannot serve: "not supported,
 * not exported" with the reason when no GPU can, "not supported on some GPUs" naming them
 * otherwise. Returns the lines logged. */
size_t exp_prof_log_unsupported(const struct exp_counters *c, const struct exp_gpm_support *g,
                                size_t n);

/* ---- collection --------------------------------------------------------------------------- */

/* How long the kubelet's PodResources List may take within one collection: a quarter of the
 * interval, 250 ms at least, so that a slow kubelet delays the GPU metrics by at most that. */
uint64_t exp_podres_budget_ms(uint64_t interval_ms);

/* ---- render -----------------------------------------------------------------------------------
 */

#define EXP_XID_COUNTS_MAX 16

/* One GPU at one collection. */
struct exp_gpu_state {
    struct gpu_sample sample;
    bool ok;   /* the sample was read (false: lost or failing; no DCGM series then) */
    bool lost; /* NVML said GPU_IS_LOST */
    uint64_t last_xid;
    uint64_t clock_events[EXP_CLOCK_EVENTS]; /* collections in the window with each reason */
    /* XIDs seen in the last xid_window_ms, by value (DCGM_EXP_XID_ERRORS_COUNT). */
    size_t n_xid_counts;
    struct {
        uint64_t xid, count;
    } xid_counts[EXP_XID_COUNTS_MAX];
    const struct exp_prof *prof; /* the profiling fields' values; NULL: none (no GPM) */
};

/* The exporter's own health, rendered as gpuop_exporter_*. */
enum exp_error_kind {
    EXP_ERR_NVML = 0,    /* a sample read failed */
    EXP_ERR_GPU_LOST,    /* a GPU answered GPU_IS_LOST */
    EXP_ERR_INVENTORY,   /* the inventory could not be read */
    EXP_ERR_EVENTS,      /* XID event subscription or wait failed */
    EXP_ERR_PODRESOURCES /* the kubelet PodResources List failed */
};
#define EXP_ERR_KINDS 5
extern const char *const exp_error_kind_names[EXP_ERR_KINDS];

struct exp_self {
    double last_collection_unix_s;
    double last_collection_duration_s;
    uint64_t collections;
    uint64_t errors[EXP_ERR_KINDS];
    bool kubernetes;
    bool pod_resources_up;
};

struct exp_render_input {
    const struct exp_counters *counters;
    const struct gpu_inventory *inv;  /* may be NULL (no inventory yet) */
    const struct exp_gpu_state *gpus; /* inv->n_gpus entries */
    const char *hostname;             /* NULL: no host label */
    bool lower_hostname;              /* `hostname` instead of `Hostname` */
    bool kubernetes;                  /* add pod, namespace, container */
    const struct exp_pod_map *pods;   /* may be NULL */
    const struct exp_self *self;
    uint64_t xid_window_ms; /* the window_size_in_ms label of DCGM_EXP_XID_ERRORS_COUNT */
};

/* Renders everything but the per-scrape tail (gpuop_exporter_scrapes_total and, for
 * OpenMetrics, # EOF; see exp_render_tail). Output is bounded by out's limit. */
GPUOP_WUR int exp_render(const struct exp_render_input *in, enum prom_format f, struct sbuf *out);
GPUOP_WUR int exp_render_tail(uint64_t scrapes, enum prom_format f, struct sbuf *out);

#endif
