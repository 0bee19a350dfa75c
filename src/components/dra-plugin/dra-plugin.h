/* SPDX-License-Identifier: Apache-2.0 */
/*
 * draplugin: `gpuop dra-plugin`, NVIDIA's GPUs through Dynamic Resource Allocation
 * (resource.k8s.io/v1) under NVIDIA's driver name gpu.nvidia.com.
 *
 * Pure core (no I/O, no clock; plain structs and jansson values; table-tested):
 *
 *   struct dra_model    what the node offers: every device the plugin publishes, built from the
 *                       GPU inventory (and, with partitionable devices, the GPUs' MIG profiles):
 *                       whole GPUs (gpu-<minor>), existing MIG devices, and with partitionable
 *                       devices every placement of every MIG profile, made on demand.
 *   dra_slices_render   the model as ResourceSlice objects (NVIDIA's attribute names and types,
 *                       capacities, shared counters); dra_publish_plan what to create, update
 *                       and delete so the API server holds exactly those.
 *   dra_config_parse    the opaque configuration resource.nvidia.com/v1beta1 GpuConfig and
 *                       MigDeviceConfig (sharing: TimeSlicing, MPS), strictly decoded.
 *   dra_claim_plan      a ResourceClaim's allocation on this node's pool to prepared devices,
 *                       each with its sharing and its CDI device names; dra_claim_cdi_spec the
 *                       claim's own CDI spec (sharing's edits).
 *   dra_checkpoint_*    the prepared claims on disk (versioned, checksummed JSON), so a restart
 *                       between prepare and unprepare loses nothing.
 *
 *   dra_flags           the flags (one option table) and their checks.
 *   dra_mig_*_plan      with partitionable devices, which MIG slices a claim's prepare makes or
 *                       adopts (resuming after a restart) and which its unprepare destroys.
 *   dra_mps_daemon_plan a claim's MPS control daemon: its devices and the limits it is told.
 *   dra_timeslice_*     which GPUs' compute time slice a claim's prepare sets (its TimeSlicing
 *                       interval) and its unprepare sets back (Default, or what the claims still
 *                       holding the GPU ask).
 *
 * The shell (dra-plugin-main.c: the component; dra-node.c: NVML, publication, CDI, health;
 * dra-serve.c: the kubelet's DRA and plugin-registration services; dra-mps-daemon.c: the MPS
 * control daemons) reads the world, calls the core and executes. Nothing here is thread-safe by
 * itself.
 */
#ifndef GPUOP_DRAPLUGIN_H
#define GPUOP_DRAPLUGIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "svc.h"
#include "util.h"

#define DRA_DRIVER_NAME       "gpu.nvidia.com"
#define DRA_CDI_VENDOR        "k8s." DRA_DRIVER_NAME
#define DRA_CDI_BASE_KIND     DRA_CDI_VENDOR "/device" /* the node's devices (nvcdi, by UUID) */
#define DRA_CDI_CLAIM         DRA_CDI_VENDOR "/claim"  /* a claim's own edits (sharing) */
#define DRA_DEV_NAME_MAX      64                       /* a DNS label */
#define DRA_PCIE_ROOT_MAX     32                       /* "pci0000:17" */
#define DRA_UID_MAX           64                       /* metadata.uid (36) */
#define DRA_NS_MAX            64                       /* a namespace: a DNS label */
#define DRA_OBJ_NAME_MAX      254                      /* a DNS subdomain */
#define DRA_REQUEST_MAX       130 /* "<request>/<subrequest>", two DNS labels */
#define DRA_CDI_ID_MAX        192
#define DRA_MPS_LIMITS_MAX    32
#define DRA_CLAIMS_MAX        4096 /* prepared claims the plugin keeps */
#define DRA_CLAIM_DEVICES_MAX 32   /* results of one claim (the API's limit) */

/* ---- flags ----------------------------------------------------------------------------------- */

struct dra_flags {
    const char *node_name, *kubeconfig, *library;
    const char *host_root;    /* where this process sees the host's "/" */
    const char *registry_dir; /* host paths */
    const char *plugin_dir;
    const char *cdi_dir;
    const char *driver_root;
    uint64_t resync_ms;
    uint64_t recovery_ms;
    bool partitionable; /* MIG slices made on demand */
};
/* The flags every verb takes (node name, library, partitionable devices), and the serving
 * plugin's; both write a struct dra_flags. */
extern const struct svc_option dra_common_options[];
extern const struct svc_option dra_options[];
void dra_flags_defaults(void *state);
/* What the table cannot say: a node name (a DNS subdomain's length), and, when serving,
 * absolute host paths. */
int dra_flags_check(const struct dra_flags *f, bool serving, struct err *e);

/* ---- health ---------------------------------------------------------------------------------- */

#define DRA_FAULTS_MAX 64
/* The GPUs' last counted XID or ECC error (monotonic ms, never 0), by UUID. */
struct dra_faults {
    size_t n;
    char uuid[DRA_FAULTS_MAX][GPU_UUID_MAX];
    uint64_t at_ms[DRA_FAULTS_MAX];
};
uint64_t dra_faults_at(const struct dra_faults *fs, const char *uuid); /* 0: none; fs may be NULL */
/* Notes a fault at now_ms; past DRA_FAULTS_MAX GPUs a new one is not kept (false). */
bool dra_faults_note(struct dra_faults *fs, const char *uuid, uint64_t now_ms);

/* ---- API objects ----------------------------------------------------------------------------- */

/* What the plugin keeps of a ResourceClaim from its watch: identity and status.allocation (a
 * kube_informer projection; new reference, NULL on no memory). */
json_t *dra_claim_project(json_t *obj, void *ud);
/* The slices of a ResourceSlice list that are this plugin's on node `node` (a new array holding
 * references to list's items). */
json_t *dra_slices_own(const json_t *list, const char *node);

/* ---- the model ------------------------------------------------------------------------------ */

enum dra_dev_type {
    DRA_GPU,         /* a whole GPU */
    DRA_MIG,         /* a MIG device that exists */
    DRA_MIG_DYNAMIC, /* a MIG profile at one placement, made when a claim is prepared */
};
const char *dra_dev_type_name(enum dra_dev_type t); /* "gpu", "mig", "mig" */

/* What the shell read beside the inventory, per GPU (in inventory order). */
struct dra_gpu_extra {
    char pcie_root[DRA_PCIE_ROOT_MAX]; /* "pci0000:17" (sysfs); "": unknown, not published */
    bool unhealthy; /* an XID/ECC error or a lost GPU: its devices are withdrawn from the slices */
    /* partitionable devices: the GPU's GPU-instance profiles (gpu_mig_profiles), MIG on */
    size_t n_profiles;
    const struct gpu_mig_profile *profiles;
};

/* A MIG slice the plugin made for a claim: not part of the layout the slices describe (its
 * placement stays published; the claim holding it keeps the scheduler off it). */
struct dra_owned_slice {
    char parent_uuid[GPU_UUID_MAX];
    unsigned gi_id;
};

struct dra_model_input {
    const struct gpu_inventory *inv;   /* borrowed; must outlive the model */
    const struct dra_gpu_extra *extra; /* inv->n_gpus entries; NULL: none known */
    bool partitionable;                /* MIG slices made on demand on MIG-enabled GPUs */
    const struct dra_owned_slice *owned;
    size_t n_owned;
};

struct dra_device {
    char name[DRA_DEV_NAME_MAX]; /* gpu-<minor>, gpu-<minor>-mig-<profile>-<gi profile>-<start> */
    enum dra_dev_type type;
    size_t gpu;     /* index into inv->gpus */
    size_t mig;     /* DRA_MIG: index into inv->gpus[gpu].mig */
    bool published; /* false: withdrawn (its GPU is unhealthy), still known to claims */
    char pcie_root[DRA_PCIE_ROOT_MAX]; /* the GPU's, "" unknown */
    /* DRA_MIG and DRA_MIG_DYNAMIC: the GPU-instance profile and placement */
    char profile[GPU_PROFILE_MAX];
    unsigned gi_profile_id, start, size;
    unsigned multiprocessors, copy_engines, decoders, encoders, jpegs, ofas;
    uint64_t memory_bytes; /* the device's memory (a whole GPU's total) */
};

/* A GPU's shared counters (partitionable devices): what its MIG slices consume. */
struct dra_counter_set {
    char name[DRA_DEV_NAME_MAX]; /* gpu-<minor>-counter-set */
    size_t gpu;
    unsigned multiprocessors, copy_engines, decoders, encoders, jpegs, ofas;
    uint64_t memory_bytes;
    unsigned memory_slices;
};

struct dra_model {
    const struct gpu_inventory *inv;
    bool partitionable;
    size_t n_devices;
    struct dra_device *devices; /* in publication order: GPU by GPU */
    size_t n_counter_sets;
    struct dra_counter_set *counter_sets;
    size_t n_warnings;
    char **warnings; /* what was left out and why ("GPU 2: MIG enabled without MIG devices") */
};

int dra_model_build(const struct dra_model_input *in, struct dra_model **ret, struct err *e);
void dra_model_free(struct dra_model *m);
DEFINE_CLEANUP_FUNC(struct dra_model, dra_model_free)
/* Whether a GPU's devices are withdrawn from the slices: a GPU NVML lost, always; one with an
 * XID or ECC error the health policy counts (fault_ms: when, monotonic; 0: none), until
 * recovery_ms of quiet (0: until the plugin restarts). */
bool dra_gpu_withdrawn(bool lost, uint64_t fault_ms, uint64_t now_ms, uint64_t recovery_ms);
/* The device of that name, or NULL. */
const struct dra_device *dra_model_find(const struct dra_model *m, const char *name);
/* The DNS-label form of a MIG profile in a device name: "1g.10gb+me" -> "1g10gb-me". */
void dra_profile_label(const char *profile, char *buf, size_t n);
/* The semantic version of a driver version as the API server takes it: "550.90.07" ->
 * "550.90.7", "9.0" -> "9.0.0". -EINVAL for what has no leading number. */
int dra_semver(const char *v, char *buf, size_t n);
/* NVIDIA's words for an NVML brand and architecture ("Nvidia", "Hopper", "Ada Lovelace"). */
const char *dra_brand_name(unsigned brand);
const char *dra_arch_name(unsigned arch);

/* ---- ResourceSlices ------------------------------------------------------------------------ */

#define DRA_SLICE_DEVICES_MAX      128 /* devices in one slice */
#define DRA_SLICE_DEVICES_ADV_MAX  64  /* ... when they consume counters */
#define DRA_SLICE_COUNTER_SETS_MAX 8   /* counter sets in one slice */

struct dra_slice_meta {
    const char *node_name; /* the pool and spec.nodeName */
    const char *node_uid;  /* the Node's uid: the slices' owner (NULL: no owner) */
    int64_t generation;    /* spec.pool.generation */
};

/* The node's ResourceSlices (a JSON array, new reference): counter sets in slices of their own,
 * the published devices in slices of at most 128 (64 when they consume counters), named
 * <node>-gpu.nvidia.com-<n>, labelled and owned by the Node. A node without devices gets one
 * slice without devices, so its pool says so. */
int dra_slices_render(const struct dra_model *m, const struct dra_slice_meta *meta, json_t **ret,
                      struct err *e);

/* What makes the API server's slices the desired ones. Every desired slice carries one pool
 * generation: the existing slices' when nothing changed (nothing to write), else one above the
 * highest seen, written to every slice, since the scheduler reads only a pool's newest
 * generation. Existing slices not desired are deleted. */
struct dra_publish {
    int64_t generation;
    json_t *create; /* array of objects */
    json_t *update; /* array of objects, each with the existing metadata.resourceVersion */
    json_t *remove; /* array of names */
};
/* desired: dra_slices_render's array (any generation); existing: the plugin's slices as listed.
 * Both borrowed. */
int dra_publish_plan(const json_t *desired, const json_t *existing, struct dra_publish *ret,
                     struct err *e);
void dra_publish_clear(struct dra_publish *p);
bool dra_publish_empty(const struct dra_publish *p);

/* ---- opaque configuration ------------------------------------------------------------------- */

#define DRA_CONFIG_API_VERSION "resource.nvidia.com/v1beta1"

enum dra_config_kind { DRA_CONFIG_GPU, DRA_CONFIG_MIG };
enum dra_strategy { DRA_SHARE_NONE, DRA_SHARE_TIME_SLICING, DRA_SHARE_MPS };
enum dra_interval {
    DRA_INTERVAL_DEFAULT,
    DRA_INTERVAL_SHORT,
    DRA_INTERVAL_MEDIUM,
    DRA_INTERVAL_LONG
};
const char *dra_strategy_name(enum dra_strategy s); /* "", "TimeSlicing", "MPS" */
const char *dra_interval_name(enum dra_interval i); /* "Default", ... */

struct dra_mps_limit {
    char device[GPU_UUID_MAX]; /* an index ("0") or a UUID, as written */
    int64_t bytes;
};

/* A device's sharing (small: every prepared device holds one). */
struct dra_sharing {
    enum dra_strategy strategy;
    enum dra_interval interval; /* TimeSlicing */
    /* MPS; -1: not set. In a config the default limit; in a prepared device its own limit (the
     * per-device limit naming it, else the default: dra_claim_plan). */
    int active_thread_percentage;
    int64_t pinned_memory_limit;
    bool multi_user;
};

struct dra_config {
    enum dra_config_kind kind;
    struct dra_sharing sharing;
    /* MPS's defaultPerDevicePinnedMemoryLimit */
    size_t n_limits;
    struct dra_mps_limit limits[DRA_MPS_LIMITS_MAX];
};

/* One opaque config's parameters. where names it in errors ("claim default/c: config 0"); every
 * error names the field ("...: sharing.timeSlicingConfig.interval: unknown value \"Fast\"; one
 * of Default, Short, Medium, Long"). Unknown fields are refused, as NVIDIA's driver decodes
 * strictly. */
int dra_config_parse(const json_t *params, const char *where, struct dra_config *ret,
                     struct err *e);

/* ---- claims ---------------------------------------------------------------------------------- */

struct dra_claim_ref {
    char uid[DRA_UID_MAX];
    char ns[DRA_NS_MAX];
    char name[DRA_OBJ_NAME_MAX];
};

enum dra_claim_state {
    DRA_PREPARE_STARTED,   /* written before a MIG slice is made: the next prepare resumes it,
                              an unprepare destroys what it made */
    DRA_PREPARE_COMPLETED, /* prepared: a repeated prepare answers the same devices */
};

struct dra_prepared_device {
    char request[DRA_REQUEST_MAX];
    char pool[DRA_OBJ_NAME_MAX];
    char device[DRA_DEV_NAME_MAX];
    enum dra_dev_type type;
    unsigned gpu_index, minor;      /* the (parent) GPU */
    char uuid[GPU_UUID_MAX];        /* GPU-... or MIG-...; "" until a slice is made */
    char parent_uuid[GPU_UUID_MAX]; /* MIG: the GPU's */
    char profile[GPU_PROFILE_MAX];  /* MIG */
    unsigned gi_profile_id, start, size;
    unsigned gi_id, ci_id; /* MIG, once it exists */
    bool created;          /* the plugin made the slice: destroyed on unprepare */
    struct dra_sharing sharing;
};

struct dra_claim {
    struct dra_claim_ref ref;
    enum dra_claim_state state;
    size_t n_devices;
    struct dra_prepared_device *devices;
};
void dra_claim_free(struct dra_claim *c);
DEFINE_CLEANUP_FUNC(struct dra_claim, dra_claim_free)

/* A claim (the ResourceClaim object) allocated on this node to the devices it prepares: its
 * results for gpu.nvidia.com, each in pool `pool` and a device of the model, with the sharing
 * the configs give it (class configs first, then the claim's, a later one winning for the
 * requests it names; a GpuConfig applies to whole GPUs, a MigDeviceConfig to MIG devices; one
 * naming a request of the other kind is an error). An MPS device's pinned memory limit is its
 * config's per-device limit naming its ordinal among the claim's MPS devices in bus order (the
 * daemon's numbering) or its UUID, else the config's default. ref is the kubelet's: a claim whose
 * UID differs, or that is not allocated, is an error naming it. */
int dra_claim_plan(const struct dra_model *m, const char *pool, const struct dra_claim_ref *ref,
                   const json_t *claim, struct dra_claim **ret, struct err *e);

/* The CDI device names the container runtime gets for device i: the node's device by UUID
 * (k8s.gpu.nvidia.com/device=<uuid>) and, when the claim has edits of its own, its claim device
 * (k8s.gpu.nvidia.com/claim=<uid>-<device>). Returns how many (0 while a slice has no UUID). */
size_t dra_claim_cdi_ids(const struct dra_claim *c, size_t i, char ids[2][DRA_CDI_ID_MAX]);
/* Whether the claim has edits of its own (MPS), i.e. a spec of its own. */
bool dra_claim_has_edits(const struct dra_claim *c);

struct dra_cdi_paths {
    const char *mps_root; /* host view of the folder of the claims' MPS folders */
};
/* The claim's CDI spec (JSON, malloc'ed): one device per MPS device, with MPS's client
 * environment (the pipe folder, the active thread percentage and pinned memory limits the
 * claim's daemon was told: dra_mps_daemon_plan, its devices numbered in the order of their PCI
 * bus, which CUDA_DEVICE_ORDER pins), the daemon's pipe folder mounted at DRA_MPS_PIPE_DIR and
 * its shared memory folder at /dev/shm. Time-slicing has no edit (its interval is the GPU's,
 * set with nvidia-smi: dra_timeslice_prepare_plan). NULL (*ret) when the claim has no edits. */
int dra_claim_cdi_spec(const struct dra_claim *c, const struct dra_cdi_paths *paths, char **ret,
                       struct err *e);

/* The prepared claims, in the order prepared. */
struct dra_claims {
    size_t n;
    struct dra_claim **v;
};
void dra_claims_clear(struct dra_claims *cs);
struct dra_claim *dra_claims_find(const struct dra_claims *cs, const char *uid);
/* Takes c (replacing a claim of the same UID). -ENOSPC past DRA_CLAIMS_MAX. */
int dra_claims_put(struct dra_claims *cs, struct dra_claim *c, struct err *e);
/* Removes and returns the claim of that UID (caller frees), NULL when none. */
struct dra_claim *dra_claims_take(struct dra_claims *cs, const char *uid);
/* The MIG slices the claims made (dra_model_input.owned), malloc'ed; count in *ret_n. */
struct dra_owned_slice *dra_claims_owned(const struct dra_claims *cs, size_t *ret_n);

/* ---- MPS sharing ------------------------------------------------------------------------------
 */

#define DRA_MPS_PIPE_DIR "/tmp/nvidia-mps" /* the pipe folder as a container sees it */

/* Whether device d of a claim is shared through MPS. */
bool dra_mps_device(const struct dra_prepared_device *d);
/* The claim's MPS devices in bus order (GPU index, then placement), the order CUDA numbers them
 * in (CUDA_DEVICE_ORDER=PCI_BUS_ID): their indexes in ret (c->n_devices entries); the count. */
size_t dra_mps_order(const struct dra_claim *c, size_t *ret);
/* Whether a claim UID names a folder of its own under the MPS root (lower-case letters, digits
 * and dashes, as metadata.uid is): anything else, -EINVAL naming it. */
int dra_mps_claim_dir(const char *uid, struct err *e);

/* The MPS control daemon of a claim: one per claim with MPS devices, in the folder
 * <MPS root>/<claim_dir> (pipe/, log/, shm/), seeing the claim's MPS devices alone. */
struct dra_mps_daemon {
    char claim_dir[DRA_UID_MAX];           /* the claim's UID */
    size_t n_devices;                      /* 0: the claim has no MPS device, no daemon */
    size_t devices[DRA_CLAIM_DEVICES_MAX]; /* the claim's MPS devices in bus order: ordinals */
    /* CUDA_VISIBLE_DEVICES of the daemon: the devices' UUIDs in that order */
    char visible_devices[DRA_CLAIM_DEVICES_MAX * GPU_UUID_MAX];
    int active_thread_percentage; /* the first device's config's; -1 not set */
    /* what the daemon is told once started, a line each: set_default_active_thread_percentage,
     * set_default_device_pinned_mem_limit <ordinal> <MB>M */
    char commands[2048];
    char pinned_env[1024]; /* CUDA_MPS_PINNED_DEVICE_MEM_LIMIT's value: "0=1024M,1=2048M" */
};
/* The daemon claim c needs (ret->n_devices 0: none). Every MPS device must have its UUID (an
 * on-demand MIG slice is made first); a UID that names no folder is -EINVAL. */
int dra_mps_daemon_plan(const struct dra_claim *c, struct dra_mps_daemon *ret, struct err *e);

/* ---- compute time slices ---------------------------------------------------------------------
 */

/* A GPU's compute time slice to set (`nvidia-smi compute-policy -i <uuid> --set-timeslice N`). */
struct dra_timeslice {
    char uuid[GPU_UUID_MAX];
    enum dra_interval interval;
};
/* nvidia-smi's value for an interval: Default 0, Short 1, Medium 2, Long 3. */
unsigned dra_interval_smi(enum dra_interval i);

/* What prepare sets for claim c (c->n_devices entries in ret): each whole GPU with a
 * TimeSlicing config gets its interval, Default included (a GPU left at another is set back).
 * A GPU without one keeps what it has; MIG devices have no interval (a MigDeviceConfig has no
 * time-slicing settings). Returns the count. */
size_t dra_timeslice_prepare_plan(const struct dra_claim *c, struct dra_timeslice *ret);
/* What unprepare sets back for claim c (c->n_devices entries in ret): each whole GPU whose
 * interval c's prepare set gets the interval the other claims of cs holding that GPU ask (the
 * last prepared of them with a TimeSlicing config), Default when none asks one; nothing where
 * that is the interval c set. c itself in cs is ignored. Returns the count. */
size_t dra_timeslice_unprepare_plan(const struct dra_claim *c, const struct dra_claims *cs,
                                    struct dra_timeslice *ret);

/* ---- MIG slices made on demand (partitionable devices) ----------------------------------------
 */

struct dra_mig_create {
    size_t device;      /* index into the claim's devices */
    unsigned gpu_index; /* the parent GPU's NVML index (now) */
    char profile[GPU_PROFILE_MAX];
    unsigned start; /* the placement */
};

/* What prepare still has to make for claim c's on-demand MIG devices (c->n_devices entries in
 * ret, count in *ret_n), against the GPUs as they are now. A device whose slice exists takes its
 * UUID and ids from inv: one the claim made (gi_id recorded), or, when resumed (the checkpoint
 * held c as DRA_PREPARE_STARTED: a restart may have come between the slice's creation and the
 * checkpoint's), one at its placement that no other claim in cs made. An instance at the
 * placement otherwise is someone else's: -EBUSY naming it, nothing made. The parent gone:
 * -ENODEV. Once the creations are done and recorded (gi_id, ci_id, created), a second call with
 * the new inventory returns none and leaves every device with its UUID. */
int dra_mig_prepare_plan(struct dra_claim *c, bool resumed, const struct gpu_inventory *inv,
                         const struct dra_claims *cs, struct dra_mig_create *ret, size_t *ret_n,
                         struct err *e);

struct dra_mig_destroy {
    size_t device;
    unsigned gpu_index;
    unsigned gi_id;
};
/* The GPU instances unprepare destroys for claim c (c->n_devices entries in ret): those the
 * claim made that still exist, and, for a claim left at DRA_PREPARE_STARTED, an instance at an
 * on-demand device's placement no other claim in cs made. Never an existing MIG device the
 * claim was merely allocated. Returns the count. */
size_t dra_mig_unprepare_plan(const struct dra_claim *c, const struct gpu_inventory *inv,
                              const struct dra_claims *cs, struct dra_mig_destroy *ret);

/* ---- the checkpoint -------------------------------------------------------------------------- */

#define DRA_CHECKPOINT_VERSION "gpuop.dev/dra-plugin-checkpoint/v1"
#define DRA_CHECKPOINT_MAX     (16u << 20)

/* The claims as the checkpoint file's text (JSON, malloc'ed): version, claims, and a checksum
 * of the claims. */
int dra_checkpoint_encode(const struct dra_claims *cs, char **ret, struct err *e);
/* The file's text back; path names it in errors (a field, a checksum that does not match, an
 * unknown version). Empty text: no claims. */
int dra_checkpoint_decode(const char *text, size_t len, const char *path, struct dra_claims *ret,
                          struct err *e);

#endif
