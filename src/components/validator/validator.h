/* SPDX-License-Identifier: Apache-2.0 */
/*
 * validator: the decisions of `gpuop validator --component=...`, NVIDIA's nvidia-validator
 * contract (../shared/reference/notes/operator.md §2.3, §3): which driver answers on this node
 * and what driver-ready says about it, what the toolkit marker says, which GPUs the node's CDI
 * spec lacks, why the node advertises fewer GPUs than it has, and which status files are
 * missing for all-done.
 *
 * Pure. Each check is a plan (val_check_step): the core names the facts to gather, one probe at
 * a time, and gives the verdict; the shell (validator-main.c, with probes.c for the node's files,
 * NVML, the CDI spec, the runtime and CUDA, and node-api.c for the API server) gathers them and
 * carries the verdict out. Tests feed facts as plain data.
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

/* The node root is read through util's file_root_resolve and nodestate: nodestate_root_find,
 * nodestate_lib_dirs, nodestate_bin_dirs and the driver probe (nodestate_driver_probe). */

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

/* ---- the driver's additional modules ------------------------------------------------------ */

/* The modules a driver container may load beside the driver, each enabled by the operator
 * (driver.rdma, gds, gdrcopy) through a variable its startup probe writes into
 * .driver-ctr-ready; the driver check then requires each enabled one loaded and writes its
 * status file, as NVIDIA's validator does. */
enum val_module {
    VAL_MOD_PEERMEM,   /* GPU_DIRECT_RDMA_ENABLED: nvidia_peermem, nvidia-peermem-ready */
    VAL_MOD_NVIDIA_FS, /* GDS_ENABLED: nvidia_fs, nvidia-fs-ready */
    VAL_MOD_GDRCOPY,   /* GDRCOPY_ENABLED: gdrdrv, gdrcopy-ready */
    VAL_MOD_COUNT,
};

/* Which modules .driver-ctr-ready enables: "KEY=true" lines (an env file) or "KEY: true" (YAML);
 * quotes around the value and blank or '#' lines allowed; a key set to anything but true (any
 * case) is off. text NULL (no file, a host driver): none. Pure. */
void val_modules_enabled(const char *text, size_t len, bool ret[VAL_MOD_COUNT]);

/* The enabled modules that module[] (nodestate_driver_facts.module) lacks: their count, and in
 * buf one reason naming each, with what the driver pod (NULL: unknown) says of the container
 * that loads it: "module nvidia_fs (GPUDirect Storage, GDS_ENABLED) is not loaded:
 * nvidia-fs-ctr failed (exit 1): <its message's last line>", else "... is not loaded (the driver
 * pod's nvidia-fs-ctr loads it)"; "" when none. Pure. */
size_t val_modules_missing(const bool enabled[VAL_MOD_COUNT],
                           const bool module[NODESTATE_MOD_COUNT], const json_t *driver_pod,
                           char *buf, size_t n);

/* The status file of a module's check. */
enum nodestate_file val_module_file(enum val_module m);

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

/* How long a check tries: 0 once, UINT64_MAX (DEADLINE_NEVER) until it passes, else up to
 * that many ms. The plugin check always waits up to timeout_ms (the kubelet needs the plugin's
 * first update); the others try once, or forever with --wait. */
uint64_t val_try_window_ms(enum val_component c, bool wait, uint64_t timeout_ms);

/* What to do after one try, for the shell to carry out. */
struct val_report {
    bool remove_file;                        /* remove the component's status file ... */
    enum nodestate_file file;                /* ... this one */
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

/* The *-ready files all-done needs (driver, toolkit, cuda, and plugin unless without_plugin)
 * that present[] (by enum nodestate_file) lacks, named in buf ("toolkit-ready, cuda-ready");
 * returns how many. */
size_t val_status_missing(const bool present[NODESTATE_FILE_COUNT], bool without_plugin, char *buf,
                          size_t n);
/* Whether the status file f is one a stopped validator pod takes away (the *-ready files of the
 * checks, not the driver's and toolkit's own .*-ctr-ready markers). */
bool val_status_cleared_on_stop(enum nodestate_file f);

/* ---- a check as a plan -------------------------------------------------------------------- */

/*
 * One try of a check is a conversation: val_check_step looks at what the shell has gathered so
 * far (struct val_facts) and either names the next fact to gather (a probe, with its arguments)
 * or gives the verdict: passed (which status file to write, with what, what to record on the
 * node and to log) or not yet / an error, with the reason. The shell runs each probe once, as
 * asked, and carries out the verdict; it decides nothing. Pure.
 */

#define VAL_DRIVER_DS_SELECTOR  "app.kubernetes.io/component=nvidia-driver"
#define VAL_TOOLKIT_DS_SELECTOR "app=nvidia-container-toolkit-daemonset"

/* What the checks are configured with, resolved once at configure time (the environment
 * included). Borrowed. */
struct val_config {
    struct val_paths paths;
    const char *driver_version; /* the version the driver check expects; NULL or "": any */
    const char *mig_strategy;   /* a node without the nvidia.com/mig.strategy label; NULL: none */
    const char *nvml_library;   /* GPUOP_NVML_LIBRARY: loaded in place of the driver root's */
    const char *cuda_library;   /* GPUOP_CUDA_LIBRARY: likewise for libcuda.so.1 */
    bool without_plugin;        /* all-done needs no plugin-ready (a DRA node: no device plugin) */
};

enum val_probe {
    VAL_PROBE_NONE,         /* nothing to gather: the step holds the verdict */
    VAL_PROBE_DRIVER,       /* the node root's driver (nodestate_driver_probe over paths) */
    VAL_PROBE_DRIVER_DS,    /* whether a DaemonSet matching selector runs (false: no API) */
    VAL_PROBE_DRIVER_POD,   /* this node's pod of the driver DaemonSets (selector) */
    VAL_PROBE_DRIVER_READY, /* the driver-ready file's text */
    VAL_PROBE_CTR_READY,    /* the driver container's .driver-ctr-ready: its text */
    VAL_PROBE_MARKER,       /* the toolkit's marker .toolkit-ctr-ready: its text */
    VAL_PROBE_TOOLKIT_DS,   /* whether a DaemonSet matching selector runs */
    VAL_PROBE_CDI_SPEC,     /* the CDI spec at path (a host path) under the host root, parsed */
    VAL_PROBE_FIND_LIB,     /* lib_name in lib_root's library folders (nodestate_lib_dirs) */
    VAL_PROBE_GPUS,         /* NVML loaded from path ("": the default), its GPUs */
    VAL_PROBE_PCI,          /* the NVIDIA display and 3D controllers under sysfs */
    VAL_PROBE_NODE,         /* this node's Node object */
    VAL_PROBE_RUNTIME,      /* the container runtime detected and checked as marker says */
    VAL_PROBE_CUDA,         /* the CUDA check with the libcuda.so.1 at path ("": the default) */
    VAL_PROBE_STATUS,       /* which status files exist */
    VAL_PROBE_COUNT,
};
const char *val_probe_name(enum val_probe p);

/* Which part of a probe failed, where the reason says it differently. */
enum val_stage {
    VAL_STAGE_NONE,
    VAL_STAGE_OPEN,    /* GPUS: NVML did not load or initialise */
    VAL_STAGE_READ,    /* GPUS: the GPUs could not be listed; CDI_SPEC: the file not read */
    VAL_STAGE_RESOLVE, /* CDI_SPEC: the path does not resolve under the host root */
    VAL_STAGE_PARSE,   /* CDI_SPEC: not a CDI spec */
    VAL_STAGE_DETECT,  /* RUNTIME: which runtime the node runs */
    VAL_STAGE_CHECK,   /* RUNTIME: its configuration */
};

/* A probe's failure: code 0 when it worked, else a negative errno; a missing file is -ENOENT. */
struct val_failure {
    int code;
    enum val_stage stage;
    char msg[ERR_MSG_MAX];
};

/* What the shell gathered, by probe: have[p] once probe p ran (failed or not); the fields of a
 * probe that failed are not read. Pointers are the shell's, valid for the try. */
struct val_facts {
    bool have[VAL_PROBE_COUNT];
    struct val_failure fail[VAL_PROBE_COUNT];
    struct nodestate_driver_facts driver; /* DRIVER */
    bool driver_ds;                       /* DRIVER_DS */
    const json_t *driver_pod;             /* DRIVER_POD: NULL none (or the API failed) */
    const char *driver_ready;             /* DRIVER_READY */
    size_t driver_ready_len;
    const char *ctr_ready; /* CTR_READY */
    size_t ctr_ready_len;
    const char *marker; /* MARKER */
    size_t marker_len;
    bool toolkit_ds;          /* TOOLKIT_DS */
    char spec_path[PATH_MAX]; /* CDI_SPEC: resolved under the host root */
    bool (*spec_has)(void *spec, const char *name);
    void *spec;
    size_t spec_devices;
    char lib[PATH_MAX];               /* FIND_LIB */
    const struct nodestate_gpu *gpus; /* GPUS */
    size_t n_gpus;
    const char *nvml_version;
    int pci_gpus;                      /* PCI: <= 0 unknown */
    const json_t *node;                /* NODE */
    const char *runtime;               /* RUNTIME: the runtime's name (rtconfig_kind_name) */
    int cuda_devices;                  /* CUDA */
    int cuda_driver;                   /* CUDA: cuDriverGetVersion */
    bool status[NODESTATE_FILE_COUNT]; /* STATUS */
};

struct val_step {
    enum val_probe probe;
    /* the probe's arguments */
    const char *selector;        /* DRIVER_DS, TOOLKIT_DS, DRIVER_POD */
    char path[PATH_MAX];         /* CDI_SPEC: the spec; GPUS, CUDA: the library ("": default) */
    char lib_root[PATH_MAX];     /* FIND_LIB */
    const char *lib_name;        /* FIND_LIB */
    const char *runtime_version; /* RUNTIME: the Node's containerRuntimeVersion; NULL unknown */
    struct nodestate_toolkit_marker marker; /* RUNTIME */
    /* the verdict, when probe is VAL_PROBE_NONE */
    enum val_outcome outcome;
    int code; /* VAL_ERROR: the error's */
    char reason[NODESTATE_REASON_MAX];
    bool write;               /* passed: write file ... */
    enum nodestate_file file; /* ... with text (NULL: empty) */
    char *text;               /* owned: val_step_clear */
    /* passed: further status files, written empty (also[f]) or removed (drop[f]) */
    bool also[NODESTATE_FILE_COUNT];
    bool drop[NODESTATE_FILE_COUNT];
    bool record_owner; /* passed: record owner (the shell stamps its time) */
    struct nodestate_driver_owner owner;
    const char *log_msg; /* passed: one info line, with log_kv; NULL: none */
    char log_kv[NODESTATE_REASON_MAX + 256];
};
void val_step_clear(struct val_step *st); /* frees text; the step can be used again */

/* The next step of check c. A probe is asked for at most once per try (have[]). */
void val_check_step(enum val_component c, const struct val_config *cfg, const struct val_facts *f,
                    struct val_step *ret);

#endif
