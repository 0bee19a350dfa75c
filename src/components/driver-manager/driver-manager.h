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

#endif
