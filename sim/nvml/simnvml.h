/* SPDX-License-Identifier: Apache-2.0 */
/*
 * simnvml: the core of the simulated GPU fleet, shared by the simulated driver
 * (build/libnvidia-ml.so.1) and the `gpuop-sim` command. It holds no nvml* symbols.
 *
 *  - fleet: a fleet file (GPUOP_SIM_FLEET, YAML) parsed into plain structs; sim_fleet_parse is
 *    a pure function over bytes (fuzzed), every error names the file and the field path.
 *  - MIG tables: GPU-instance profiles per model, from NVIDIA's published tables.
 *  - MIG operations: pure functions over one GPU's mutable state (create/destroy GPU and compute
 *    instances), returning NVML return codes.
 *  - state store: the mutable state (MIG mode and instances, lost GPUs, ECC counters, events),
 *    in memory or shared between processes through a directory (GPUOP_SIM_STATE): a JSON file
 *    written under flock with an atomic rename and an append-only events log.
 *  - telemetry: plausible, moving, deterministic values for a seed and a time.
 *
 * Structs are plain data. A sim_store is not thread-safe: callers serialise (the driver holds
 * its own mutex); separate processes are serialised by the store's file lock.
 */
#ifndef GPUOP_SIMNVML_H
#define GPUOP_SIMNVML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define SIM_MAX_GPUS       64
#define SIM_GI_IDS         15 /* GPU instance ids 0..14 (derived from the placement) */
#define SIM_CI_IDS         8  /* compute instance ids 0..7 within a GPU instance */
#define SIM_MAX_LINKS      36 /* NVML_NVLINK_MAX_LINKS */
#define SIM_MEM_SLICES     8  /* placement units (memory slices) of a MIG-capable GPU */
#define SIM_COMPUTE_SLICES 7
#define SIM_NO_ID          0xFFFFFFFFu

/* ---- MIG profile tables ----------------------------------------------------------------- */

struct sim_gi_profile {
    const char *name; /* canonical: "1g.10gb", "1g.10gb+me" */
    unsigned index;   /* NVML_GPU_INSTANCE_PROFILE_* */
    unsigned id;      /* hardware profile id (nvidia-smi mig -lgip "ID") */
    unsigned slices;  /* compute slices */
    unsigned size;    /* placement size in memory slices */
    unsigned max_count;
    unsigned memory_mb; /* memorySizeMB */
    unsigned sms, ce, dec, enc, jpeg, ofa;
    unsigned n_starts;
    unsigned starts[SIM_MEM_SLICES]; /* placement starts, in NVML's order */
};

struct sim_mig_table {
    const char *key; /* "a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb" */
    size_t n;
    const struct sim_gi_profile *profiles;
};

/* The table for an NVML model name ("NVIDIA A100-SXM4-80GB"), or NULL. */
const struct sim_mig_table *sim_mig_table_for_model(const char *model);
const struct sim_mig_table *sim_mig_table_by_key(const char *key);
const struct sim_gi_profile *sim_mig_profile_by_name(const struct sim_mig_table *t,
                                                     const char *name);
const struct sim_gi_profile *sim_mig_profile_by_id(const struct sim_mig_table *t, unsigned id);
const struct sim_gi_profile *sim_mig_profile_by_index(const struct sim_mig_table *t,
                                                      unsigned index);

/* Compute-instance profiles of a GPU instance of profile p: index i (NVML_COMPUTE_INSTANCE_
 * PROFILE_*: 0..4 = 1, 2, 3, 4, 7 slices). False when the GI offers no such CI profile. */
struct sim_ci_profile {
    unsigned index, id, slices, max_count, sms;
    char name[48]; /* "1c.3g.40gb", or the GI's name for a CI spanning the whole GI */
};
bool sim_mig_ci_profile(const struct sim_gi_profile *p, unsigned index, struct sim_ci_profile *ret);

/* ---- workload load ---------------------------------------------------------------------- */

/* What a workload drives on the GPU or MIG device it runs on, in thousandths (0..SIM_LOAD_MAX):
 * SM activity, tensor-pipe activity and DRAM bandwidth. What the simulated GPU Performance
 * Monitoring counts (sim-gpm.c). */
#define SIM_LOAD_MAX 1000
struct sim_load {
    unsigned sm, tensor, dram;
};
/* A CUDA process's load where neither it, its GPU (`gpuop-sim set-load`) nor the fleet names
 * one: vectorAdd's (the CUDA sample's kernel), memory-bound and without tensor cores. */
#define SIM_LOAD_DEFAULT ((struct sim_load){.sm = 600, .tensor = 0, .dram = 500})

/* A ratio 0..1 as text ("0.8", "1", "0.125": at most three decimals) in thousandths; -EINVAL for
 * anything else, -ERANGE above 1. */
int sim_ratio_parse(const char *s, unsigned *ret_milli);
/* "sm=0.8,tensor=0.5,dram=0.3" (each key at most once; a key left out is 0). The error names the
 * part that is wrong. */
int sim_load_parse(const char *s, struct sim_load *ret, struct err *e);

/* ---- fleet ------------------------------------------------------------------------------ */

struct sim_gpu_spec {
    char model[96];
    char uuid[80];
    char serial[32];
    char bus_id[32];        /* NVML busId: "00000000:18:00.0" */
    char bus_id_legacy[16]; /* "0000:18:00.0" */
    char vbios[32];
    char board_part[80];
    unsigned domain, bus, device;
    uint32_t pci_device_id, pci_subsystem_id;
    uint64_t memory_mib, reserved_mib;
    int cc_major, cc_minor;
    unsigned arch; /* NVML_DEVICE_ARCH_* */
    unsigned brand;
    bool mig_capable, ecc;
    unsigned power_limit_w, idle_power_w, idle_temp_c;
    unsigned max_sm_clock_mhz, max_mem_clock_mhz;
    unsigned multiprocessors; /* 0: unknown */
    unsigned pcie_gen, pcie_width;
    const struct sim_mig_table *mig_table; /* NULL: no MIG */
    /* initial MIG layout (applied to a fresh state) */
    bool mig_enabled;
    size_t n_mig_instances;
    const struct sim_gi_profile *mig_instances[SIM_COMPUTE_SLICES];
    /* NVLinks: peer GPU index of each link, numbered consecutively */
    unsigned n_links;
    unsigned link_peer[SIM_MAX_LINKS];
    /* `workload:` the load a CUDA process on this GPU drives (else SIM_LOAD_DEFAULT) */
    bool has_workload;
    struct sim_load workload;
    /* `c2c:` NVLink-C2C to a Grace CPU (nvmlDeviceGetC2cModeInfoV); `addressing_mode:` none,
     * hmm or ats (nvmlDeviceGetAddressingMode). Left out: the call is not supported. */
    bool has_c2c, c2c;
    bool has_addressing_mode;
    unsigned addressing_mode; /* NVML_DEVICE_ADDRESSING_MODE_* */
};

struct sim_fleet {
    char *path; /* as given, for messages */
    char driver_version[80];
    int cuda_driver_version;
    uint64_t seed;
    uint64_t hash; /* of the file's bytes: a state dir belongs to one fleet */
    size_t n_gpus;
    struct sim_gpu_spec *gpus;
    unsigned *pcie_level; /* n_gpus x n_gpus NVML_TOPOLOGY_* levels */
};

/* Parses a fleet document. `name` is the file name used in messages. */
int sim_fleet_parse(const char *buf, size_t len, const char *name, struct sim_fleet **ret,
                    struct err *e);
int sim_fleet_load(const char *path, struct sim_fleet **ret, struct err *e);
void sim_fleet_free(struct sim_fleet *f);
DEFINE_CLEANUP_FUNC(struct sim_fleet, sim_fleet_free)
/* The number of NVLinks between GPUs a and b. */
unsigned sim_fleet_nvlinks(const struct sim_fleet *f, unsigned a, unsigned b);
const char *sim_arch_name(unsigned arch);
unsigned sim_cores_per_sm(unsigned arch); /* CUDA cores per SM */
const char *sim_topology_name(unsigned level);

/* ---- mutable state ---------------------------------------------------------------------- */

struct sim_ci {
    unsigned id, profile_index, start, size;
};

struct sim_gi {
    unsigned id, profile_id, start, size;
    unsigned n_ci;
    struct sim_ci ci[SIM_CI_IDS]; /* sorted by id */
};

struct sim_gpu_state {
    bool mig_mode; /* the current MIG mode */
    /* A mode change to !mig_mode waits for a GPU reset (`gpuop-sim gpu-reset`); only where
     * mig_reset_required is set (`gpuop-sim inject mig-reset-required`): otherwise a change
     * takes effect at once, as on bare metal with an idle GPU. */
    bool mig_change_pending;
    bool mig_reset_required;
    bool lost;
    uint64_t ecc_sbe_vol, ecc_dbe_vol, ecc_sbe_agg, ecc_dbe_agg;
    unsigned retired_sbe, retired_dbe;
    bool retired_pending;
    unsigned remapped_cor, remapped_unc;
    bool remap_pending, remap_failure;
    unsigned last_xid;
    /* NVLink errors counted on all links (`gpuop-sim inject nvlink`); a reset clears them */
    unsigned nvlink_recovery, nvlink_replay;
    /* clock event reasons forced on (`gpuop-sim inject thermal|power`, NVML's bits): a slowdown
     * that holds until `inject cool` */
    uint64_t throttle;
    /* An injected MIG fault (`gpuop-sim inject mig-fail`): when non-zero, the GPU-instance
     * creation that brings it to 0 fails with NVML_ERROR_UNKNOWN (and creates nothing); each
     * creation counts it down, so the fault fires once. */
    unsigned mig_fail_in;
    /* `gpuop-sim set-load --gpu`: the load a process on this GPU drives, over the fleet's */
    bool has_load;
    struct sim_load load;
    /* the compute time slice (`nvidia-smi compute-policy --set-timeslice`): 0 the driver's
     * default, 1 short, 2 medium, 3 long; a driver reload and a reboot bring back the default */
    unsigned timeslice;
    unsigned n_gi;
    struct sim_gi gi[SIM_GI_IDS]; /* sorted by id */
};

/* A process holding a GPU (a simulated CUDA program): what nvmlDeviceGetComputeRunningProcesses
 * lists, and what keeps a simulated driver from unloading. Entries whose pid is gone are ignored
 * by readers and pruned by the next registration. */
#define SIM_MAX_PROCS 256
struct sim_proc {
    uint32_t pid;
    unsigned gpu;
    unsigned gi_id, ci_id; /* the MIG device it runs on; SIM_NO_ID: the whole GPU */
    uint64_t used_mib;
    /* its own load (SIM_WORKLOAD_LOAD, `gpuop-sim set-load --pid`), over its GPU's */
    bool has_load;
    struct sim_load load;
};

struct sim_state {
    uint64_t generation;
    uint64_t boots;    /* simulated reboots of the node (sim_store_reboot) */
    uint64_t next_seq; /* sequence number of the next event */
    size_t n_gpus;
    struct sim_gpu_state *gpus;
    size_t n_procs;
    struct sim_proc procs[SIM_MAX_PROCS];
};

/* Resets one GPU's state to the fleet's initial one (MIG layout from the fleet). */
void sim_gpu_state_init(const struct sim_gpu_spec *spec, struct sim_gpu_state *g);

/* MIG operations (NVML return codes: 0 success, NVML_ERROR_*). */
/* Sets the MIG mode; *ret_pending: the change waits for a GPU reset (mig_reset_required). */
int sim_mig_set_mode(const struct sim_gpu_spec *spec, struct sim_gpu_state *g, bool enable,
                     bool *ret_pending);
/* A GPU reset: a pending MIG mode change takes effect. NVML_ERROR_IN_USE while processes run on
 * the GPU (checked by the caller). */
void sim_mig_reset(struct sim_gpu_state *g);
/* placement_start SIM_NO_ID: the driver picks one. */
int sim_mig_gi_create(const struct sim_gpu_spec *spec, struct sim_gpu_state *g, unsigned profile_id,
                      unsigned placement_start, unsigned *ret_gi_id);
int sim_mig_gi_destroy(struct sim_gpu_state *g, unsigned gi_id);
unsigned sim_mig_gi_remaining(const struct sim_gpu_spec *spec, const struct sim_gpu_state *g,
                              unsigned profile_id);
int sim_mig_ci_create(const struct sim_gpu_spec *spec, struct sim_gpu_state *g, unsigned gi_id,
                      unsigned ci_profile_index, unsigned *ret_ci_id);
int sim_mig_ci_destroy(struct sim_gpu_state *g, unsigned gi_id, unsigned ci_id);
unsigned sim_mig_ci_remaining(const struct sim_gpu_spec *spec, const struct sim_gpu_state *g,
                              unsigned gi_id, unsigned ci_profile_index);
struct sim_gi *sim_gpu_find_gi(struct sim_gpu_state *g, unsigned gi_id);
const struct sim_gi *sim_gpu_find_gi_const(const struct sim_gpu_state *g, unsigned gi_id);
/* The GI id NVML gives the placement (start, size). */
unsigned sim_mig_gi_id_for(unsigned start, unsigned size);
/* Deterministic "MIG-xxxxxxxx-..." UUID of the MIG device (gi, ci) of a GPU. */
void sim_mig_uuid(const struct sim_gpu_spec *spec, unsigned gi_id, unsigned ci_id, char *buf,
                  size_t n);

/* ---- resets and reboots (sim-faults.c) --------------------------------------------------- */

/*
 * What NVML shows after a GPU reset, a driver reload and a node reboot (docs/remediation.md,
 * "The simulator"). A reset brings a pending MIG mode into effect, applies the rows pending
 * remapping and clears the volatile ECC and NVLink error counts; a lost GPU cannot be reset
 * (NVML_ERROR_GPU_IS_LOST: only a reboot brings it back). A driver reload also applies pages
 * pending retirement. A reboot does all of that for every GPU, brings lost GPUs back, ends every
 * process and destroys the MIG instances (the mode stays). A slowdown (throttle) stays through
 * all three: it is the cooling's or the power supply's. The caller checks processes.
 */
struct sim_store;
int sim_gpu_reset(struct sim_gpu_state *g); /* NVML return code */
void sim_gpu_driver_reload(struct sim_gpu_state *g);
void sim_gpu_reboot(struct sim_gpu_state *g);
/* Reboots the simulated node behind the store: every GPU, no process left, boots counted. */
int sim_store_reboot(struct sim_store *s, struct err *e);

/* ---- events ------------------------------------------------------------------------------ */

struct sim_event {
    uint64_t seq;
    unsigned gpu;
    uint64_t type; /* nvmlEventType* bit */
    uint64_t data; /* the XID */
    unsigned gi_id, ci_id;
    uint64_t unix_ms;
};

/* ---- store ------------------------------------------------------------------------------- */

struct sim_store;

/* dir NULL: state kept in this process. A fresh dir (or one written for another fleet) is
 * initialised from the fleet. The store keeps a reference to fleet. */
#define SIM_STORE_RESET 0x1 /* start from the fleet's initial state, whatever the dir holds */
int sim_store_open(const struct sim_fleet *fleet, const char *dir, unsigned flags,
                   struct sim_store **ret, struct err *e);
void sim_store_free(struct sim_store *s);
DEFINE_CLEANUP_FUNC(struct sim_store, sim_store_free)
const char *sim_store_dir(const struct sim_store *s); /* NULL when process-local */
/* Re-reads the shared state when another process changed it (a stat when not). On error the
 * last good state stays. */
int sim_store_refresh(struct sim_store *s, struct err *e);
const struct sim_state *sim_store_state(const struct sim_store *s);

/* Applies fn to the freshest state under the exclusive lock and writes the result when fn
 * returns 0. fn returns 0, a positive code (a refusal, e.g. an NVML error: nothing is written
 * and the code is returned) or a negative errno. Events fn adds with sim_update_event are
 * appended to the events log in the same critical section. */
struct sim_update;
typedef int (*sim_update_fn)(struct sim_update *u, struct sim_state *st, void *arg, struct err *e);
int sim_store_update(struct sim_store *s, sim_update_fn fn, void *arg, struct err *e);
void sim_update_event(struct sim_update *u, unsigned gpu, uint64_t type, uint64_t data,
                      unsigned gi_id, unsigned ci_id);
/* Back to the fleet's initial state (the event sequence continues). */
int sim_store_reset(struct sim_store *s, struct err *e);

/* Events with seq > after, oldest first, at most max; *ret_n is set. Process-local stores
 * have no events. *ret_last_seq (optional) is the newest sequence number seen. */
int sim_store_events(struct sim_store *s, uint64_t after, struct sim_event *ret, size_t max,
                     size_t *ret_n, struct err *e);
/* The sequence number of the newest event (0 when none). */
uint64_t sim_store_last_seq(struct sim_store *s);
/* The events log path, for inotify-based waiting; NULL when process-local. */
const char *sim_store_events_path(const struct sim_store *s);

/* ---- processes and the node's driver ----------------------------------------------------- */

/* True while pid names a process (one of another user's counts). */
bool sim_pid_alive(uint32_t pid);
/* Registers procs (n at most SIM_MAX_PROCS) in the shared state, replacing the entries of their
 * pids and pruning those of processes that are gone. -ENOSPC when the table is full. */
int sim_procs_register(struct sim_store *s, const struct sim_proc *procs, size_t n, struct err *e);
/* Removes every entry of pid (none: success). */
int sim_procs_unregister(struct sim_store *s, uint32_t pid, struct err *e);
/* The live entries on GPU gpu (SIM_NO_ID: every GPU), at most max copied to ret (may be NULL);
 * returns how many there are. */
size_t sim_procs_live(const struct sim_state *st, unsigned gpu, struct sim_proc *ret, size_t max);

/* Sets the load of every entry of pid (load NULL: back to its GPU's). -ENOENT when pid holds no
 * simulated GPU. */
int sim_procs_set_load(struct sim_store *s, uint32_t pid, const struct sim_load *load,
                       struct err *e);

/* The kernel module of a simulated node: <root>/sys/module/nvidia/version holds the loaded
 * driver's version. 1 and the version (trimmed) in buf when loaded, 0 when not, negative when the
 * file cannot be read or is not a version. */
#define SIM_DRIVER_VERSION_FILE "/sys/module/nvidia/version"
int sim_driver_loaded(const char *root, char *buf, size_t n, struct err *e);

/* The loaded module's references. On a real node every open /dev/nvidia* (an NVML or CUDA
 * client) holds nvidia, and rmmod refuses it while its refcount is above the modules that use
 * it. Here a reference is a shared flock on <root>/sys/module/nvidia/refcnt: the kernel drops it
 * when its holder ends, as it closes a dead process's device files.
 *
 * sim_module_get takes one: 1 with *ret_fd holding it (close releases it), 0 when no driver is
 * loaded. A loaded module without the refcnt file (a root laid out by hand) is 1 with
 * *ret_fd -1: nothing to hold. Waits while an unload holds the module (sim_module_lock).
 *
 * sim_module_lock takes the module for an unload: 1 with *ret_fd holding it exclusively (no
 * reference can be taken until it is closed; one taken then finds the module gone), 0 when a
 * process holds a reference ("Module nvidia is in use"); *ret_fd -1 when there is no refcnt
 * file. Both negative when the file cannot be opened or locked. */
#define SIM_MODULE_REFCNT_FILE "/sys/module/nvidia/refcnt"
int sim_module_get(const char *root, int *ret_fd, struct err *e);
int sim_module_lock(const char *root, int *ret_fd, struct err *e);
/* ---- the driver's device nodes ---------------------------------------------------------- */

/* Character device majors: NVIDIA's fixed 195 for the GPUs (minor = the GPU's minor, its fleet
 * index), nvidiactl (255) and nvidia-modeset (254); nvidia-uvm and nvidia-caps get dynamic
 * majors on a real host, fixed here. */
#define SIM_GPU_MAJOR  195
#define SIM_CTL_MINOR  254 /* GPU minors are below nvidia-modeset's */
#define SIM_UVM_MAJOR  510
#define SIM_CAPS_MAJOR 509
#define SIM_DEV_MAX    4096 /* nodes of one kind sim_dev_read takes at most */

struct sim_dev_node {
    char path[64]; /* "/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap3" */
    unsigned major, minor;
};

/* The /dev/nvidia-caps/nvidia-cap<N> minor of MIG GPU instance gi (ci < 0) or of its compute
 * instance ci on the GPU with that minor, as the driver lays them out: "config" 1, "monitor" 2,
 * then per GPU minor 15 GPU instances of 9 minors each (the GI's access, then its 8 compute
 * instances'). */
unsigned sim_mig_cap_minor(unsigned gpu_minor, unsigned gi, int ci);

/* The device nodes a loaded driver has on a node with n_gpus GPUs (GPU i has minor i):
 * nvidiactl, nvidia-modeset, nvidia-uvm, nvidia-uvm-tools, /dev/nvidia<i>, and for the
 * MIG-capable ones (mig_capable[i]; NULL: none) every capability node. *ret is malloc'ed. */
size_t sim_dev_layout(size_t n_gpus, const bool *mig_capable, struct sim_dev_node **ret);

/* The device nodes a process finds in a /dev folder: what the simulated CUDA enumerates when a
 * container runtime gave it device nodes (CDI). */
struct sim_dev_nodes {
    bool ctl; /* <dev>/nvidiactl, a character device */
    size_t n_gpu, n_cap;
    unsigned gpu_minors[SIM_DEV_MAX]; /* character devices nvidia<N> of SIM_GPU_MAJOR */
    unsigned cap_minors[SIM_DEV_MAX]; /* character devices in <dev>/nvidia-caps */
};
void sim_dev_read(const char *dev, struct sim_dev_nodes *ret);

/* The CUDA driver API version (NVML's integer: 12040 for 12.4) a driver version ships, by its
 * branch (the number before the first dot); fallback for a branch not in the table. */
int sim_cuda_version_for_driver(const char *driver_version, int fallback);

/* ---- telemetry --------------------------------------------------------------------------- */

struct sim_sample {
    unsigned util_gpu, util_mem, util_enc, util_dec; /* percent */
    unsigned temp_c, mem_temp_c;
    unsigned power_mw;
    uint64_t energy_mj; /* since 2026-01-01T00:00:00Z */
    unsigned sm_clock_mhz, mem_clock_mhz, video_clock_mhz;
    uint64_t mem_used_mib;
    uint64_t clock_event_reasons;
    unsigned pcie_tx_kbps, pcie_rx_kbps;
    uint64_t nvlink_kib; /* per-link total data counter */
};

/* Deterministic for (fleet seed, gpu, unix_ms). */
void sim_telemetry(const struct sim_fleet *f, unsigned gpu, uint64_t unix_ms,
                   struct sim_sample *ret);
/* The simulated clock: $GPUOP_SIM_CLOCK (unix seconds, frozen) when set, else real time. */
uint64_t sim_now_ms(void);
uint64_t sim_hash64(uint64_t a, uint64_t b);

/* ---- GPU Performance Monitoring (sim-gpm.c) --------------------------------------------- */

/* What the simulated GPM counts: activities (ratio x time) and flows (bytes). */
enum sim_gpm_activity {
    SIM_GPM_GR,     /* graphics/compute engine active */
    SIM_GPM_SM,     /* SMs busy */
    SIM_GPM_OCC,    /* warps resident vs the maximum */
    SIM_GPM_INT,    /* integer pipe */
    SIM_GPM_TENSOR, /* any tensor pipe */
    SIM_GPM_DFMA,
    SIM_GPM_HMMA,
    SIM_GPM_IMMA,
    SIM_GPM_DRAM, /* DRAM bandwidth vs the maximum */
    SIM_GPM_FP64, /* non-tensor */
    SIM_GPM_FP32,
    SIM_GPM_FP16,
    SIM_GPM_ACTIVITIES
};
enum sim_gpm_flow {
    SIM_GPM_PCIE_TX,
    SIM_GPM_PCIE_RX,
    SIM_GPM_NVLINK_TX,
    SIM_GPM_NVLINK_RX,
    SIM_GPM_FLOWS
};

/* A target's activity at an instant: ratios 0..1 and bytes per second. A MIG target counts no
 * PCIe or NVLink (those are the GPU's); a GPU without NVLinks counts none. */
struct sim_gpm_rates {
    double active[SIM_GPM_ACTIVITIES];
    double bytes_per_s[SIM_GPM_FLOWS];
    bool pcie, nvlink;
    unsigned n_links;
    uint64_t ident; /* the MIG instance's identity (profile, placement): 0 for a whole GPU */
};

/* Counters since a target's first sample: nanoseconds, activity x nanoseconds, bytes. */
struct sim_gpm_counters {
    uint64_t elapsed_ns;
    uint64_t active_ns[SIM_GPM_ACTIVITIES];
    uint64_t bytes[SIM_GPM_FLOWS];
    bool pcie, nvlink;
    unsigned n_links;
};

/* GPM is Hopper's and later's: NVML's documentation marks it "Hopper or newer". */
bool sim_gpm_supported(const struct sim_gpu_spec *spec);
/* The load a process drives: its own, else its GPU's (set-load), the fleet's, the default. */
struct sim_load sim_proc_load(const struct sim_gpu_spec *spec, const struct sim_gpu_state *g,
                              const struct sim_proc *p);
/* Pure: the activity of GPU spec/g (gi SIM_NO_ID), of its GPU instance gi (ci SIM_NO_ID) or of
 * compute instance (gi, ci), from the live processes on the GPU (procs[0..n), e.g. from
 * sim_procs_live). NVML_SUCCESS, or NVML_ERROR_NOT_FOUND for an instance that does not exist. */
int sim_gpm_rates(const struct sim_gpu_spec *spec, const struct sim_gpu_state *g,
                  const struct sim_proc *procs, size_t n, unsigned gi, unsigned ci,
                  struct sim_gpm_rates *ret);
/* Adds dt_ms of rates r to c. */
void sim_gpm_advance(struct sim_gpm_counters *c, const struct sim_gpm_rates *r, uint64_t dt_ms);
/* One NVML_GPM_METRIC_* over the interval from a to b (b later): NVML_SUCCESS with *ret (percent
 * 0..100, MiB/s), or the metric's NVML error (NOT_SUPPORTED for what the target does not count,
 * INVALID_ARGUMENT for an id outside NVML's range or an empty interval). */
int sim_gpm_metric(unsigned metric_id, const struct sim_gpm_counters *a,
                   const struct sim_gpm_counters *b, double *ret);

/* ---- CLI --------------------------------------------------------------------------------- */

int sim_main(int argc, char **argv);

#endif
