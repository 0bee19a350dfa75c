/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nodestatus: the pure core of `gpuop node-status-exporter`. One observation of the node (the
 * status files in /run/nvidia/validations, what NVML lists, the Node object) and the time go
 * in; the metrics page and the gpuop.dev/gpu-count annotation to write come out.
 *
 *   nst_observe()  observation + the state kept between observations -> a report: the values
 *                  of every metric, and the annotation text when it differs from the node's
 *   nst_render()   report -> Prometheus text 0.0.4 or OpenMetrics (src/base/prom)
 *
 * The state carries what must outlive one observation: when the node was first seen advertising
 * fewer GPUs than it has (the grace period of gpuop_node_gpu_advertised_mismatch), the last
 * successes NVIDIA's metrics report, and the error counters. Time is passed in, so the grace
 * period is tested without sleeping.
 *
 * No I/O, no clock, no locks: the shell (node-status-exporter-main.c) reads the world on a timer,
 * calls these and serves the rendered page.
 */
#ifndef GPUOP_NODESTATUS_H
#define GPUOP_NODESTATUS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "gpuhealth.h"
#include "nodestate.h"
#include "prom.h"
#include "util.h"

#define NST_NODE_MAX 256
#define NST_GPUS_MAX 64 /* GPU indices whose UUID is remembered */

/* What the shell saw in one pass. Borrowed for the call. */
struct nst_observation {
    uint64_t now_ms; /* wall clock, ms since the epoch */
    /* The status files (NVIDIA's barriers): present or not. files_ok false: the folder could
     * not be read (the file[] values are then ignored: reported as not ready). */
    bool files_ok;
    bool file[NODESTATE_FILE_COUNT];
    /* NVML: nvml_ok when the library initialised and listed the GPUs. */
    bool nvml_ok;
    const struct nodestate_gpu *gpus;
    size_t n_gpus;
    const char *driver_version; /* NVML's, "" or NULL when unknown */
    int64_t pci_devices;        /* NVIDIA PCI functions on the node; -1 unknown */
    /* The Node object (labels, annotations, status.capacity and status.allocatable are read);
     * NULL when it could not be read. */
    const json_t *node;
    /* The MIG strategy when the node's nvidia.com/mig.strategy label is absent. */
    enum nodestate_mig_strategy default_strategy;
};

enum nst_error {
    NST_ERR_NVML,       /* NVML did not initialise or list the GPUs */
    NST_ERR_NODE,       /* the Node could not be read */
    NST_ERR_FILES,      /* the validations folder could not be read */
    NST_ERR_ANNOTATION, /* an agent's annotation did not parse, or the gpu-count write failed */
    NST_ERR_COUNT,
};
const char *nst_error_name(enum nst_error k); /* "nvml", "node", "files", "annotation" */

/* Kept by the shell between observations; zero it, then set started_ms. */
struct nst_state {
    uint64_t started_ms;     /* the exporter's start (wall clock) */
    uint64_t short_since_ms; /* first seen short of GPUs; 0: not short */
    uint64_t driver_ok_ms;   /* last observation where NVML answered; 0: never */
    uint64_t plugin_ok_ms;   /* last observation where the node advertised GPUs */
    uint64_t errors[NST_ERR_COUNT];
    uint64_t observations;
    /* The UUID last read at each index: a lost GPU no longer answers for its UUID, and the
     * missing GPU is named by what it was. */
    char known_uuid[NST_GPUS_MAX][GPU_UUID_MAX]; /* nodestate_gpus_from's known */
};

/* The validation state-set: an agent's annotation, or unknown without one. */
enum nst_vstate { NST_V_WAITING, NST_V_OK, NST_V_FAILED, NST_V_UNKNOWN, NST_V_COUNT };
const char *nst_vstate_name(enum nst_vstate s); /* "waiting", "ok", "failed", "unknown" */

struct nst_report {
    char node[NST_NODE_MAX];
    uint64_t now_ms, started_ms;
    bool ready[NODESTATE_COMP_COUNT]; /* NVIDIA's barriers: driver-ready, toolkit-ready, ... */
    bool driver_validation;           /* NVML answered */
    uint64_t driver_ok_ms, plugin_ok_ms;
    int64_t devices_total; /* NVIDIA's: status.capacity nvidia.com/gpu* + nvidia.com/mig-*; -1 */
    int64_t pci_devices;
    enum nst_vstate validation[NODESTATE_COMP_COUNT];
    char owner[16]; /* "host", "container", "none", "unknown" */
    char owner_version[64];
    /* The comparison; count_ok false when NVML or the node could not be read, or what the node
     * advertises did not read (count_error says why; counted as a node error). */
    bool count_ok;
    char count_error[ERR_MSG_MAX];
    int64_t lost;
    struct nodestate_gpu_count count; /* since and mismatch set */
    uint64_t errors[NST_ERR_COUNT];
    uint64_t observations;
    /* The gpuop.dev/gpu-count value to write (malloc'ed), or NULL: unchanged or unknown. */
    char *annotation;
    /* GPU health (--gpu-health): the node's health now and the faults seen by class; rendered
     * when health_on. Set by the shell from gh_observe (nst_observe leaves them). */
    bool health_on;
    struct gh_health health;
    uint64_t health_events[GH_CLS_COUNT];
};
void nst_report_clear(struct nst_report *r); /* frees annotation; accepts NULL */

/*
 * One observation. The advertised count is compared with the expected one (nodestate's
 * nodestate_gpu_count_compare, under the node's MIG strategy); short for at least grace_ms makes
 * the mismatch. A shortfall the node's current annotation already dates (a restarted exporter)
 * keeps that start. What could not be read is counted in the errors and reported as unknown,
 * never as a failure: returns 0 (e is kept for the contract's sake and not filled).
 */
int nst_observe(struct nst_state *st, const char *node, uint64_t grace_ms,
                const struct nst_observation *o, struct nst_report *ret, struct err *e);

/* The metrics page; -ENOBUFS when out's limit is passed. */
GPUOP_WUR int nst_render(const struct nst_report *r, enum prom_format f, struct sbuf *out);

/* ---- the shell's decisions ------------------------------------------------------------------ */

/* The options as typed: a node name is required; --mig-strategy none, single or mixed (NULL or
 * "": none). The error names the flag. */
int nst_config_check(const char *node, const char *mig_strategy,
                     enum nodestate_mig_strategy *ret_strategy, struct err *e);

/* Both pages of a report, Prometheus text and OpenMetrics, each at most limit bytes: malloc'ed
 * strings (the caller frees), written only on success; -ENOBUFS naming the limit. */
int nst_render_pages(const struct nst_report *r, size_t limit, char **ret_text, char **ret_om,
                     struct err *e);

/* The exporter's loop. Deadlines are monotonic instants in ms, now too. */
enum nst_step {
    NST_STEP_WAIT,    /* nothing is due */
    NST_STEP_OBSERVE, /* the full observation (the health's comes with it) */
    NST_STEP_HEALTH,  /* the health observation alone */
};
/* What is due at now: the full observation once next_obs has passed; else, with health on, the
 * health observation when an NVML event woke the loop or next_health has passed. */
enum nst_step nst_step_due(uint64_t now, bool health, bool woke, uint64_t next_obs,
                           uint64_t next_health);
/* When the loop wakes next: next_obs, or next_health when health is on and it comes first. */
uint64_t nst_wake_at(bool health, uint64_t next_obs, uint64_t next_health);

/* ---- GPU health (nst-health.c) ------------------------------------------------------------- */

/*
 * The exporter is also the node's GPU health agent (--gpu-health, on by default): it watches
 * NVML's XID and ECC events and samples each GPU's state, classifies them with
 * src/lib/gpuhealth, and writes the node's health to its Node: the GH_ANN_HEALTH annotation and
 * the GH_CONDITION_TYPE condition. One NVML watcher per node serves the metrics and the health.
 */

/* One GPU's sample as the tracker reads it (uuid borrowed). */
void nst_health_gpu(const struct gpu_sample *s, unsigned index, const char *uuid,
                    struct gh_gpu_obs *ret);
/* GPUs the node advertises fewer than it has, once that is a mismatch (past the grace period)
 * and no GPU is lost: what the device plugin holds back (0 none; -1 unknown: the count could not
 * be made). */
int nst_plugin_held_back(const struct nst_report *r);
/* The strategic merge patch of the Node's status that makes its GH_CONDITION_TYPE condition say
 * what `h` says (the transition time kept while its status holds), or NULL when `conditions`
 * (the Node's status.conditions, or the ones last written) already says it. */
json_t *nst_health_condition_patch(const json_t *conditions, const struct gh_report *h,
                                   uint64_t now_ms);
/* The health families (nst_render calls it when health_on). */
void nst_render_health(struct prom_writer *w, const struct nst_report *r);

#endif
