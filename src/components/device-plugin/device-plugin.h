/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deviceplugin: `gpuop device-plugin`, the kubelet Device Plugin API v1beta1 for NVIDIA GPUs.
 *
 * Pure core (no I/O; plain structs; table-tested), used by the shell in device-plugin-main.c:
 *
 *   struct dp_options   what NVIDIA's config (file, env, flags) resolves to for the plugin.
 *   struct dp_plan      the advertised resources, built from a gpu_inventory + dp_options:
 *                       one dp_resource per kubelet resource name (nvidia.com/gpu,
 *                       nvidia.com/mig-<profile>, <name>.shared), each with its socket name and
 *                       device list (GPU UUIDs, MIG UUIDs, <id>::<n> replicas), plus the
 *                       GPU-to-GPU pair scores used by GetPreferredAllocation.
 *   dp_allocate()       Allocate for one container request (envs, mounts, device specs, CDI).
 *   dp_preferred()      GetPreferredAllocation for one container request.
 *   dp_health_*         event application and recovery (which events count: gpuhealth.h).
 *
 * A dp_plan is plain data owned by the caller; nothing here is thread-safe by itself.
 */
#ifndef GPUOP_DEVICEPLUGIN_H
#define GPUOP_DEVICEPLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dpconfig.h"
#include "gpu.h"
#include "gpuhealth.h"
#include "util.h"

#define DP_ID_MAX       112 /* GPU/MIG UUID + "::<n>" */
#define DP_NAME_MAX     128 /* resource name */
#define DP_PATH_MAX     512
#define DP_MAX_REPLICAS 1024 /* per physical device; bounds the advertised list */
#define DP_MAX_SHARED   32   /* sharing.resources entries */

#define DP_KUBELET_SOCKET_DEFAULT "/var/lib/kubelet/device-plugins/kubelet.sock"
#define DP_CDI_VENDOR_CLASS       "k8s.device-plugin.nvidia.com/gpu"
#define DP_CDI_TOOLKIT_KIND       "nvidia.com/gpu" /* gpuop toolkit's spec (src/lib/nvcdi) */
#define DP_VOLUME_MOUNTS_ROOT     "/var/run/nvidia-container-devices"

/* The strategies and policies are dpconfig's types (enum dpconfig_mig_strategy, DPCONFIG_LIST_*
 * bits, ...): the config's vocabulary has one owner. */

struct dp_shared_resource {
    char name[DP_NAME_MAX]; /* "nvidia.com/gpu", "nvidia.com/mig-1g.10gb" */
    unsigned replicas;      /* >= 2 */
};

struct dp_options {
    enum dpconfig_mig_strategy mig_strategy;
    unsigned list_strategies; /* DP_LIST_* set; never empty */
    enum dpconfig_device_id_strategy id_strategy;
    bool pass_device_specs;
    char dev_root[DP_PATH_MAX]; /* host path prefix of /dev/... in device specs ("" = "/") */
    char mps_root[DP_PATH_MAX];
    char cdi_annotation_prefix[64]; /* "cdi.k8s.io/" */
    /* The CDI kind of the GPU names handed out: DP_CDI_VENDOR_CLASS (NVIDIA's; the plugin writes
     * the spec defining them, device nodes only) or another spec's, such as gpuop's toolkit's
     * "nvidia.com/gpu", whose devices also bring the driver's libraries (--cdi-kind). */
    char cdi_kind[64];
    enum dpconfig_alloc_policy shared_policy;
    enum dpconfig_sharing_strategy sharing;
    bool rename_by_default;
    bool fail_requests_gt_one;
    size_t n_shared;
    struct dp_shared_resource shared[DP_MAX_SHARED];
    bool gdrcopy, gds, mofed; /* flags.{gdrcopy,gds,mofed}Enabled */
    size_t n_imex;            /* imex.channelIDs: [] or [0] */
    unsigned imex_channels[1];
};

/* The defaults: NVIDIA's (none, uuid, no device specs, dev root "/", distributed, CDI kind
 * DP_CDI_VENDOR_CLASS) but the list strategy, volume-mounts (DPCONFIG_LIST_DEFAULT). */
void dp_options_defaults(struct dp_options *o);
/* A CDI kind as "<vendor>/<class>" (CDI's rules: vendor a DNS-style name of [a-z0-9.-] and
 * class of [a-zA-Z0-9_.-], both starting with a letter or digit), into o->cdi_kind; -EINVAL
 * naming the value and the rule broken. */
int dp_options_set_cdi_kind(struct dp_options *o, const char *kind, struct err *e);

struct dp_device {
    char id[DP_ID_MAX];      /* advertised ID: GPU-..., MIG-..., <id>::<n> */
    char base_id[DP_ID_MAX]; /* the ID without the replica suffix */
    char index[16];          /* "3" or "3:1" (GPU index : MIG device index) */
    unsigned gpu;            /* index into the plan's GPUs (inventory order) */
    unsigned minor;          /* /dev/nvidia<minor> of the physical GPU */
    bool is_mig;
    unsigned gi_id, ci_id;
    int numa_node;      /* -1: unknown (no topology sent) */
    int gi_cap, ci_cap; /* MIG: /dev/nvidia-caps/nvidia-cap<N> minors; -1 unknown */
    int replica;        /* -1: not replicated */
    bool healthy;
    bool lost;              /* never recovers */
    uint64_t last_error_ms; /* monotonic time of the last critical event */
    /* the GPU's volatile ECC count (single- and double-bit) NVML showed after the error; 0: none
     * seen, so a reset cannot be told from NVML (dp_health_reset_cleared) */
    uint64_t ecc_vol_at_error;
};

struct dp_resource {
    char name[DP_NAME_MAX];   /* "nvidia.com/gpu" */
    char socket[DP_NAME_MAX]; /* "nvidia-gpu.sock" (file name in the kubelet's directory) */
    unsigned replicas;        /* 1 = not shared */
    bool fail_requests_gt_one;
    size_t n_devices;
    struct dp_device *devices;
};

struct dp_plan {
    size_t n_resources;
    struct dp_resource *resources;
    unsigned n_gpus;
    unsigned *pair_score;           /* n_gpus x n_gpus, go-gpuallocator's link scores */
    char (*gpu_uuid)[GPU_UUID_MAX]; /* n_gpus */
    struct dp_options opts;
};

/* Builds what to advertise. Errors (single strategy with a mixed layout, MPS with MIG, ...)
 * name the reason, as NVIDIA's plugin words them. A plan may hold no resources (no GPUs). */
int dp_plan_build(const struct gpu_inventory *inv, const struct dp_options *opts,
                  struct dp_plan **ret, struct err *e);
void dp_plan_free(struct dp_plan *p);
DEFINE_CLEANUP_FUNC(struct dp_plan, dp_plan_free)
/* Fills every MIG device's capability minors (/dev/nvidia-caps/nvidia-cap<N>) from the
 * driver's GPU_MIG_MINORS text where it lists them, else from the driver's layout (text may be
 * NULL: the file is absent); see gpu_mig_cap_minor. Returns the number of MIG devices. */
size_t dp_plan_apply_mig_minors(struct dp_plan *p, const char *text);
/* Copies health (unhealthy, lost, last error) from `old` onto devices with the same ID. */
void dp_plan_carry_health(struct dp_plan *p, const struct dp_plan *old);
struct dp_resource *dp_plan_find(struct dp_plan *p, const char *resource_name);
const struct dp_device *dp_resource_find(const struct dp_resource *r, const char *id);
/* The pair score of two GPUs: PCIe level (60 same board .. 10 cross-socket) + 100 per NVLink. */
unsigned dp_pair_score(unsigned topo_level, unsigned nvlinks);

/* ---- Allocate ----------------------------------------------------------------------------- */

struct dp_kv {
    char *key, *value;
};
struct dp_mount {
    char *container_path, *host_path;
    bool read_only;
};
struct dp_devspec {
    char *container_path, *host_path, *permissions;
};
struct dp_container_alloc {
    size_t n_envs, n_mounts, n_devspecs, n_annotations, n_cdi;
    struct dp_kv *envs;
    struct dp_mount *mounts;
    struct dp_devspec *devspecs;
    struct dp_kv *annotations;
    char **cdi; /* fully qualified CDI device names */
};
void dp_container_alloc_clear(struct dp_container_alloc *a);

/* Whether a host path exists (the shell stats; tests fake it). */
typedef bool (*dp_exists_fn)(const char *host_path, void *userdata);

/* Validates and builds the response for one container request. `response_id` names the
 * cdi-annotations key (cdi.k8s.io/nvidia-device-plugin_<response_id>). Errors carry the text
 * the kubelet shows (unknown device, unhealthy device, shared request above one). */
int dp_allocate(const struct dp_plan *p, const struct dp_resource *r, const char *const *ids,
                size_t n_ids, const char *response_id, dp_exists_fn exists, void *userdata,
                struct dp_container_alloc *ret, struct err *e);

/* ---- GetPreferredAllocation --------------------------------------------------------------- */

/* Chooses `size` IDs from available. Full GPUs: best-effort topology partition (in available
 * order); replicas and MIG devices: distributed or packed greedy (must_include first). ret_ids
 * (size entries) point into the plan's device IDs. */
int dp_preferred(const struct dp_plan *p, const struct dp_resource *r, const char *const *avail,
                 size_t n_avail, const char *const *must, size_t n_must, int size,
                 const char **ret_ids, size_t *ret_n, struct err *e);

/* The search budget of one GetPreferredAllocation request: units of work of the best-effort
 * search (sets considered), shared by the request's containers. An exact search of 16 GPUs
 * takes at most ~850,000 (no two GPUs alike), of two 8-GPU NVLink domains a few hundred. */
#define DP_BE_BUDGET 1000000ull
/* dp_preferred drawing on (and decrementing) *budget; when it is spent, the best-effort search
 * returns a greedy set grown from the must-include GPUs. dp_preferred: a fresh DP_BE_BUDGET. */
int dp_preferred_budget(const struct dp_plan *p, const struct dp_resource *r,
                        const char *const *avail, size_t n_avail, const char *const *must,
                        size_t n_must, int size, uint64_t *budget, const char **ret_ids,
                        size_t *ret_n, struct err *e);

/* The most available GPUs plus padding the best-effort search takes (-E2BIG above). */
#define DP_BE_MAX_SLOTS 64
/* The most states of its exact search (groups of interchangeable GPUs: every subset of 16
 * GPUs with no two alike fits); above, the greedy set is the answer. */
#define DP_BE_MAX_STATES (1u << 18)

/* The best-effort policy over GPUs 0..n-1 of a score matrix (exposed for table tests):
 * avail/must are GPU numbers; writes the chosen set to ret (size entries), in available order.
 * The answer is go-gpuallocator's (its first best split on ties, see dp-besteffort.c). 0,
 * -EINVAL (nothing satisfies the request) or -E2BIG (more than DP_BE_MAX_SLOTS slots). */
int dp_besteffort(const unsigned *pair_score, unsigned n_gpus, const unsigned *avail,
                  size_t n_avail, const unsigned *must, size_t n_must, unsigned size,
                  unsigned *ret);
int dp_besteffort_budget(const unsigned *pair_score, unsigned n_gpus, const unsigned *avail,
                         size_t n_avail, const unsigned *must, size_t n_must, unsigned size,
                         uint64_t *budget, unsigned *ret);

/* ---- health ------------------------------------------------------------------------------- */

/* Marks the devices the event hits Unhealthy (the GPU and its replicas, or the MIG devices of
 * the GPU / GI / CI). Returns the number of devices whose health changed. */
size_t dp_health_apply(struct dp_plan *p, const struct gpu_event *ev, uint64_t now_ms);
/* Marks every device of GPU `gpu` (plan index) lost: Unhealthy for good. Returns the number of
 * devices newly marked lost. */
size_t dp_health_mark_lost(struct dp_plan *p, unsigned gpu);
/* The GPUs (bit = plan GPU index, first 64) with devices dp_health_recover would return to
 * Healthy now: the shell checks those are not lost first. */
uint64_t dp_health_recovery_due(const struct dp_plan *p, uint64_t now_ms, uint64_t recovery_ms);
/* The GPUs (same bits) to probe for NVML_ERROR_GPU_IS_LOST now: on a sweep (now and then) each of
 * the n_gpus; else those about to recover (due: dp_health_recovery_due), so a lost GPU never
 * turns Healthy, and the GPU of a critical event at once (critical_gpu; -1: none), such as XID 79,
 * a GPU fallen off the bus. */
uint64_t dp_health_probe(unsigned n_gpus, uint64_t due, int critical_gpu, bool sweep);
/* Returns devices to Healthy after recovery_ms without errors (0: never). Lost ones stay. */
size_t dp_health_recover(struct dp_plan *p, uint64_t now_ms, uint64_t recovery_ms);

/* What NVML shows of a GPU now, for the early recovery after a reset. */
struct dp_gpu_now {
    bool lost;
    uint64_t ecc_sbe_vol, ecc_dbe_vol; /* volatile counts: a GPU reset or a driver reload clears
                                        * them, nothing else lowers them */
    bool remap_pending, remap_failure, retired_pending;
};
/* Records what NVML showed of GPU `gpu` just after a critical event on it: its volatile ECC
 * count, on its devices held back by that event (the highest seen). */
void dp_health_note_ecc(struct dp_plan *p, unsigned gpu, const struct dp_gpu_now *now);
/* The GPUs (bit = plan GPU index, first 64) held back by an error, not lost: the shell samples
 * them now and then, notes their ECC count (dp_health_note_ecc: the event's sample may predate
 * the count) and returns those a reset cleared (dp_health_recover_reset). */
uint64_t dp_health_reset_watch(const struct dp_plan *p);
/* The rule: a GPU held back for an error was reset since (or its driver reloaded), and NVML
 * shows it healthy: its volatile ECC count fell below what it was after the error (only a reset
 * or a reload lowers it), no double-bit error since, no rows pending remapping or pages pending
 * retirement, no failed remapping, not lost. An error that left no count in NVML (0 at the
 * error: most XIDs) cannot be told reset: it waits for the quiet period. */
bool dp_health_reset_cleared(uint64_t ecc_vol_at_error, const struct dp_gpu_now *now);
/* Returns GPU `gpu`'s devices to Healthy when dp_health_reset_cleared says so for them; the
 * number of devices changed. Lost ones stay. */
size_t dp_health_recover_reset(struct dp_plan *p, unsigned gpu, const struct dp_gpu_now *now);

/* `gpuop device-plugin` */
int deviceplugin_main(int argc, char **argv);

/* The CDI spec (JSON) defining every name Allocate hands out under a CDI strategy
 * (DP_CDI_VENDOR_CLASS=<UUID|index>): *ret is NULL when the plan has no device. exists filters
 * the optional control nodes. The shell writes it to <cdi
 * root>/k8s.device-plugin.nvidia.com-gpu.json. */
int dp_cdi_spec_render(const struct dp_plan *p, dp_exists_fn exists, void *userdata, char **ret,
                       struct err *e);

#endif
