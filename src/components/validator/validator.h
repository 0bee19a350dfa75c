/* SPDX-License-Identifier: Apache-2.0 */
/*
 * validator: the decisions of `gpuop validator --component=...`, NVIDIA's nvidia-validator
 * contract (../shared/reference/notes/operator.md §2.3, §3): which driver answers on this node
 * and what driver-ready says about it, what the toolkit marker says, which GPUs the node's CDI
 * spec lacks, why the node advertises fewer GPUs than it has, and which status files are
 * missing for all-done.
 *
 * Pure but for val_status_missing (file existence); the node root's files are read through
 * nodestate's probe (nodestate_driver_probe; tests point it at fixture folders). NVML, the CDI
 * parser, the runtime check, the CUDA check and the API server are the shell's
 * (validator-main.c); their results come in as plain data.
 */
#ifndef GPUOP_VALIDATOR_H
#define GPUOP_VALIDATOR_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "nodestate.h"
#include "util.h"

/* --component's values: NVIDIA's four checks, then all-done (the main container), then
 * toolkit-ready: the wait other operands' init containers run (the toolkit-ready file exists; it
 * checks nothing itself, writes nothing, annotates nothing). */
enum val_component {
    VAL_DRIVER,
    VAL_TOOLKIT,
    VAL_CUDA,
    VAL_PLUGIN,
    VAL_ALL_DONE,
    VAL_TOOLKIT_READY,
    VAL_COMPONENT_COUNT,
};
/* NULL-terminated names in enum order, for the option table. */
extern const char *const val_component_names[];
/* The nodestate component of a check (all-done has none: -EINVAL). */
int val_component_ns(enum val_component c, enum nodestate_component *ret);

/* The node root is read through nodestate: nodestate_root_find, nodestate_root_resolve,
 * nodestate_lib_dirs, nodestate_bin_dirs and the driver probe (nodestate_driver_probe). */

/* Formats a one-line reason into buf; a reason too long for buf ends in "..." rather than being
 * cut silently. */
void val_say(char *buf, size_t n, const char *fmt, ...) GPUOP_PRINTF(3, 4);

/* ---- driver ------------------------------------------------------------------------------- */

struct val_paths {
    const char *host_root;       /* the host's file system as mounted: "/host" */
    const char *driver_root;     /* the containerized driver's root: "/run/nvidia/driver" */
    const char *validations_dir; /* "/run/nvidia/validations" */
};

enum val_driver_source {
    VAL_SRC_NONE,      /* no driver: wait or fail with the plan's reason */
    VAL_SRC_HOST,      /* pre-installed on the host */
    VAL_SRC_CONTAINER, /* the containerized driver's root */
};
const char *val_driver_source_name(enum val_driver_source s); /* "none", "host", "container" */

struct val_driver_plan {
    enum val_driver_source source;
    bool check;                          /* false: nothing to check yet (reason says why) */
    char nvml[PATH_MAX];                 /* the libnvidia-ml.so.1 to load, "" for the default */
    char found[NODESTATE_REASON_MAX];    /* how the driver was found, for logs and the annotation */
    char reason[NODESTATE_REASON_MAX];   /* why there is nothing to check */
    struct nodestate_driver_ready ready; /* what driver-ready will say once the check passes */
};

/* Who answers for the driver: a host driver first (nvidia-smi and libnvidia-ml under the host
 * root, or the nvidia module loaded while the containerized driver's root is empty and no
 * driver DaemonSet manages the node), else the containerized driver once its startup probe
 * wrote .driver-ctr-ready (when driver_managed: a driver DaemonSet exists) or its root holds
 * libnvidia-ml. Left-overs (only libraries, only nvidia-smi) are named in the reason. */
void val_driver_plan(const struct val_paths *p, const struct nodestate_driver_facts *f,
                     bool driver_managed, struct val_driver_plan *ret);

/* What the check saw once NVML was loaded. */
/* Why a driver pod (the object the API server holds) has not made the driver ready, from its
 * status alone: the first init container or container that is not ready, as "<container> failed
 * (exit <code>)[: <the last line of its termination message>]" (down now, or waiting to restart
 * after it), "<container>: <waiting reason>[: <message>]" (an image pull, say), or
 * "<container>: running, not ready yet" (the build or load still going). Empty when the status
 * says nothing (no container status yet). */
void val_driver_pod_reason(const json_t *pod, char *buf, size_t n);

struct val_driver_seen {
    const char *nvml_error;       /* NULL when NVML initialised, else its error */
    size_t n_gpus;                /* GPUs NVML lists */
    size_t n_lost;                /* of which lost */
    int pci_gpus;                 /* NVIDIA display/3D controllers in sysfs; <= 0: unknown */
    const char *version;          /* the driver version NVML reports */
    const char *expected_version; /* NULL or "": any */
};
/* 0 when the driver answers as it should; -ENODEV with the reason in buf otherwise. */
int val_driver_verify(const struct val_driver_seen *s, char *buf, size_t n);

/* ---- toolkit ------------------------------------------------------------------------------ */

/* The toolkit's marker (.toolkit-ctr-ready) is read with nodestate's
 * nodestate_toolkit_marker_parse. */

/* Which of the node's GPUs the spec does not name, as `nvidia-ctk cdi generate` names them:
 * "<index>" and the GPU's UUID, "<index>:<mig index>" and the MIG UUID. has(name) says whether
 * the spec has a device. Returns the number missing; the first few go into buf ("0, GPU-..."),
 * "" when none. */
size_t val_cdi_missing(const struct nodestate_gpu *gpus, size_t n,
                       bool (*has)(void *ud, const char *name), void *ud, char *buf, size_t bufn);

/* ---- plugin ------------------------------------------------------------------------------- */

/* One line on a comparison's shortfall: its named shortfalls ("nvidia.com/gpu: 7 of 8
 * advertised; GPU-... (lost)"), else the short resources' counts. "" when nothing is short. */
void val_plugin_reason(const struct nodestate_gpu_count *c, char *buf, size_t n);

/* ---- what a try leads to ------------------------------------------------------------------ */

enum val_outcome {
    VAL_PASSED,  /* the check passed (its status file written) */
    VAL_NOT_YET, /* it did not pass: reason says why */
    VAL_ERROR,   /* it could not run (a status file not writable): reason is the error */
};

enum val_next {
    VAL_NEXT_DONE,  /* exit 0 (all-done: wait for a signal first) */
    VAL_NEXT_RETRY, /* sleep the interval, then try again */
    VAL_NEXT_FAIL,  /* exit 1 with message as the error */
};

/* What to do after one try, for the shell to carry out. */
struct val_report {
    bool remove_file;                        /* remove the component's status file */
    bool annotate;                           /* patch validation.gpuop.dev/<component> */
    enum nodestate_vstate state;             /* ... to this state, with reason ("" when ok) */
    bool event;                              /* record an Event on the node */
    bool warning;                            /* Warning (else Normal) */
    const char *event_reason;                /* "ValidationFailed", "ValidationSucceeded" */
    bool log_retry;                          /* log one "retrying" line */
    char message[NODESTATE_REASON_MAX + 64]; /* "driver: <reason>", for the Event and the error */
    enum val_next next;
};

/* After a try of component c: outcome and reason, the reason of the previous try ("" for
 * none), and whether the component may try again (--wait or the plugin's time left). A reason
 * seen before is retried quietly: one log line, one annotation and one Event per new reason. */
void val_report_plan(enum val_component c, enum val_outcome o, const char *reason,
                     const char *last_reason, bool more_time, struct val_report *ret);

/* ---- all-done ----------------------------------------------------------------------------- */

/* The *-ready files all-done needs (driver, toolkit, cuda, plugin) that dir lacks, named in buf
 * ("toolkit-ready, cuda-ready"); returns how many. */
size_t val_status_missing(const char *dir, char *buf, size_t n);

#endif
