/* SPDX-License-Identifier: Apache-2.0 */
/*
 * drivermgr: the decisions of `gpuop driver-manager`, the init container of the driver pod (the
 * job of NVIDIA's k8s-driver-manager). docs/driver-manager.md tells the whole story.
 *
 *  - Who owns the driver on this node (nodestate's nodestate_driver_probe reads a node root,
 *    dm_owner_decide decides from what it read): a driver pre-installed on the host, the
 * containerized driver, or none.
 *  - The operand pause: each nvidia.com/gpu.deploy.<operand> label (but the driver's own and the
 *    operands kill switch) goes to "paused-for-driver-upgrade" while the driver reloads (the
 *    rule, shared with the MIG manager, is nodeops'); the restore undoes exactly that.
 *  - Whether a drain may take a pod (which pods hold GPUs is nodeops'); whether eviction and
 *    drain are the operator's (its upgrade controller drives this node).
 *  - The order the kernel modules are unloaded in.
 *
 * Pure. Thread-compatible.
 */
#ifndef GPUOP_DRIVERMGR_H
#define GPUOP_DRIVERMGR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nodeops.h"
#include "nodestate.h"
#include "util.h"

#define DM_DEPLOY_PREFIX       NODEOPS_DEPLOY_PREFIX
#define DM_LABEL_DRIVER        NODEOPS_LABEL_DRIVER
#define DM_LABEL_OPERANDS      NODEOPS_LABEL_OPERANDS
#define DM_PRE_INSTALLED       "pre-installed"
#define DM_PAUSED              "paused-for-driver-upgrade"
#define DM_LABEL_UPGRADE_STATE "nvidia.com/gpu-driver-upgrade-state"
#define DM_ANN_UPGRADE_ENABLED "nvidia.com/gpu-driver-upgrade-enabled"
/* Set on the node before the driver manager cordons it, so the uncordon is its own to undo
 * (a node cordoned by someone else stays cordoned). */
#define DM_ANN_CORDONED "gpuop.dev/driver-manager-cordoned"

/* ---- the owner ---------------------------------------------------------------------------- */

/* The driver manager reads the node root through nodestate's probe (nodestate_driver_probe, struct
 * nodestate_driver_facts): the modules (nodestate_module, in unload order), their version,
 * nvidia-smi and the versioned libnvidia-ml on the host and under the driver root, whether that
 * root is a mount point. */
#define DM_VERSION_MAX NODESTATE_VERSION_MAX

/* What the driver manager found: the owner from now on (NODESTATE_OWNER_CONTAINER also when nothing
 * is loaded yet: the driver container is about to install it), the version when known, and how it
 * was told, for the gpuop.dev/driver-owner annotation. found is what the node showed before the
 * driver manager did anything (NODESTATE_OWNER_NONE: no driver at all). */
struct dm_finding {
    enum nodestate_owner owner;
    enum nodestate_owner found;
    char version[DM_VERSION_MAX];
    char source[NODESTATE_REASON_MAX];
};

/* The rule (docs/driver-manager.md):
 *  1. nvidia loaded, and the driver root holds libnvidia-ml of the loaded version (of any
 *     version when the module's is unknown): the containerized driver loaded it (container);
 *  2. nvidia loaded otherwise: the host's (host);
 *  3. not loaded, nvidia-smi and a libnvidia-ml.so.<version> under the host root: a host driver
 *     installed but not loaded yet (host);
 *  4. otherwise none: leftovers (libraries without nvidia-smi, nvidia-smi without libraries)
 *     are named in the source but own nothing.
 * driver_version: the containerized driver's (DRIVER_VERSION; may be NULL), reported when it is
 * about to install. */
void dm_owner_decide(const struct nodestate_driver_facts *f, const char *driver_version,
                     struct dm_finding *ret);

/* ---- pause and restore -------------------------------------------------------------------- */

/* The operand pause around a reload (nodeops): every operand deploy label but the driver's and
 * the kill switch goes to DM_PAUSED. */
extern const struct nodeops_pause dm_operand_pause;

/* ---- pods --------------------------------------------------------------------------------- */

/* NVIDIA's k8s-driver-manager settings (its environment variables). */
struct dm_config {
    bool gpu_pod_eviction;      /* ENABLE_GPU_POD_EVICTION (true) */
    bool auto_drain;            /* ENABLE_AUTO_DRAIN (false) */
    bool drain_force;           /* DRAIN_USE_FORCE: drain pods without a controller */
    bool drain_delete_emptydir; /* DRAIN_DELETE_EMPTYDIR_DATA */
    const char *drain_selector; /* DRAIN_POD_SELECTOR_LABEL: a label selector, NULL: all */
    uint64_t drain_timeout_ms;  /* DRAIN_TIMEOUT_SECONDS: 0 waits as long as it takes */
};

struct dm_mode {
    bool operator_driven; /* the upgrade-state label or the upgrade-enabled annotation */
    bool evict_gpu_pods;
    bool drain;
};
/* The operator's upgrade controller, when it drives the node, evicts and drains itself: the
 * driver manager then only pauses, waits for the operands and unloads. */
void dm_mode_decide(const struct dm_config *c, const json_t *node, struct dm_mode *ret);

/* Whether a drain may evict the pod (NODEOPS_POD_OTHER or NODEOPS_POD_GPU): a pod without a
 * controller needs drain_force, one with emptyDir volumes drain_delete_emptydir, as kubectl drain
 * refuses them. -EPERM with the reason in e. */
int dm_drain_allowed(const struct dm_config *c, const json_t *pod, struct err *e);

/* Whether the pod goes: 1 when it is the target of this eviction (a GPU pod; with drain, any pod
 * but the DaemonSets'), 0 when it stays, -EPERM (e says why) when a drain may not take it
 * (dm_drain_allowed; a pod already terminating is taken as it is). */
int dm_evict_select(const struct dm_config *c, const json_t *pod, const json_t *node_labels,
                    bool drain, struct err *e);

/* ---- the run as a plan -------------------------------------------------------------------- */

/* The steps, in the order they run. */
enum dm_step {
    DM_STEP_MARK,          /* nothing to do: only the test hook's name */
    DM_STEP_LABEL_HOST,    /* operands restored and gpu.deploy.driver=pre-installed */
    DM_STEP_PAUSE,         /* the operands paused */
    DM_STEP_WAIT_OPERANDS, /* their pods gone */
    DM_STEP_EVICT,         /* the GPU pods evicted */
    DM_STEP_CORDON,        /* the node cordoned (and marked as cordoned by the driver manager) */
    DM_STEP_RECORD_DRAIN,  /* gpuop.dev/last-drain and an Event */
    DM_STEP_DRAIN,         /* every pod a drain takes evicted */
    DM_STEP_UNLOAD,        /* the loaded modules unloaded (dm_unload_order) */
    DM_STEP_CLEAN,         /* a stale driver root unmounted, .driver-ctr-ready removed */
    DM_STEP_RESTORE,       /* the operands restored, the node uncordoned if it was ours */
    DM_STEP_REPORT,        /* gpuop.dev/driver-owner and an Event */
    DM_STEP_HOST_WAIT,     /* a host driver: wait for the pod's removal, then fail */
    DM_STEP_COUNT,
};
const char *dm_step_name(enum dm_step s);

/* The names the test hook (GPUOP_DRIVER_MANAGER_KILL_AFTER) knows, NULL-terminated. */
extern const char *const dm_hook_names[];

#define DM_PLAN_MAX 16
struct dm_plan {
    bool reload; /* a driver is loaded: the containerized driver reloads it */
    size_t n;
    struct {
        enum dm_step step;
        const char *hook; /* the test hook's name for "right after this", or NULL */
    } steps[DM_PLAN_MAX];
};

/* What the driver manager does on this node: a host driver gets the node labelled and the pod
 * sent away; otherwise the node is readied for the driver container, with a reload (pause,
 * operands, evict, drain, unload) when a driver is loaded. Steps in enum order. */
void dm_plan(const struct dm_finding *f, const struct nodestate_driver_facts *facts,
             const struct dm_mode *mode, struct dm_plan *ret);

/* The modules loaded, in the order they are unloaded; returns how many. */
size_t dm_unload_order(const struct nodestate_driver_facts *f,
                       enum nodestate_module ret[NODESTATE_MOD_COUNT]);
/* A driver root left mounted without the nvidia module: unmounted by the clean step. */
bool dm_root_stale(const struct nodestate_driver_facts *f);

/* ---- what is written on the node ---------------------------------------------------------- */

/* The labels the restore step sets (the operands back; with pre_installed also
 * gpu.deploy.driver=pre-installed; possibly empty) and whether the node is uncordoned (the
 * driver manager cordoned it: DM_ANN_CORDONED). */
int dm_restore_patch(const json_t *node, bool pre_installed, json_t **ret_labels,
                     bool *ret_uncordon, struct err *e);

/* The owner's Event: its reason (DriverOwnerHost, ...) and message. */
void dm_owner_event(const struct dm_finding *f, const char **ret_reason, char *msg, size_t n);

/* The drain's record (gpuop.dev/last-drain) but its time: why, and by whom. */
void dm_drain_record(const struct dm_finding *f, const char *driver_version,
                     struct nodestate_drain *ret);

#endif
