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

#include "gpuhealth.h"
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

/* ---- remediation requests ----------------------------------------------------------------- */

/* `gpuop driver-manager remediate` carries out the operator's reset and driver-reload requests on
 * its own node (docs/remediation.md, "The executor"): the request is the annotation
 * REM_ANN_REQUEST, "<action> <id> [UUID,UUID...]", answered with REM_ANN_REQUEST_DONE ("<id>") or
 * REM_ANN_REQUEST_FAILED ("<id> <why>"). The answer is the record: a request answered is never
 * carried out again, whatever restarted meanwhile.
 *
 * A driver reload is the driver pod's restart (its init container, this driver manager, unloads;
 * the driver container loads): the executor marks the node with DM_ANN_RELOAD ("<id> <pod>") and
 * evicts its own driver pod; the executor of the next driver pod answers once the new driver is
 * ready. */
#define DM_ANN_RELOAD   "gpuop.dev/driver-manager-reload"
#define DM_REM_ID_MAX   64
#define DM_REM_GPUS_MAX 64
#define DM_REM_UUID_MAX 96
#define DM_REM_POD_MAX  254
#define DM_REM_WHY_MAX  512

struct dm_rem_request {
    int action; /* enum gh_action, or -1 for a word gpuop does not know (in action_word) */
    char action_word[32];
    char id[DM_REM_ID_MAX];
    size_t n_gpus;
    char gpus[DM_REM_GPUS_MAX][DM_REM_UUID_MAX];
};

/* Parses a request. -EINVAL (e says why) when it has no id to answer, too many words, or a GPU
 * list over the bounds; an unknown action parses (action -1) so that it can be refused. */
int dm_rem_parse(const char *text, struct dm_rem_request *ret, struct err *e);

/* A GPU of this node as NVML shows it. */
struct dm_rem_gpu {
    const char *uuid;
    bool lost;              /* NVML_ERROR_GPU_IS_LOST */
    unsigned processes;     /* compute processes running on it (MIG instances' too) */
    bool processes_unknown; /* NVML could not say: no reset */
};

struct dm_rem_input {
    const char *node;
    /* the node's annotations (NULL: absent) */
    const char *request, *done, *failed, *reload;
    /* the actions this executor may take (--remediation-actions); the others are refused */
    bool allow[GH_ACT_COUNT];
    /* this node's GPUs; NULL with gpus_error when NVML could not be read */
    const struct dm_rem_gpu *gpus;
    size_t n_gpus;
    const char *gpus_error;
    enum nodestate_owner owner; /* who owns the driver (dm_owner_decide) */
    bool driver_ready;          /* the driver container says it is ready (.driver-ctr-ready) */
    const char *pod;            /* this driver pod's name (POD_NAME), NULL or "" unknown */
};

enum dm_rem_do {
    DM_REM_IDLE,        /* no request, or one that cannot be answered (why says) */
    DM_REM_ANSWERED,    /* answered already: nothing */
    DM_REM_FAIL,        /* answer request-failed with why */
    DM_REM_RESET,       /* reset the request's GPUs, then answer */
    DM_REM_RELOAD,      /* mark the node (DM_ANN_RELOAD "<id> <pod>"), evict this driver pod */
    DM_REM_RELOAD_WAIT, /* this pod was asked to go; or the new driver is not ready yet */
    DM_REM_RELOAD_DONE, /* the new driver pod's driver is ready: answer done, remove the mark */
};
const char *dm_rem_do_name(enum dm_rem_do d);

struct dm_rem_decision {
    enum dm_rem_do what;
    struct dm_rem_request req;
    char why[DM_REM_WHY_MAX];
};

/* The request and its answers among a node's annotations (metadata.annotations, NULL: none);
 * fills in's request, done, failed and reload, which point into ann. */
void dm_rem_input_annotations(const json_t *ann, struct dm_rem_input *in);

/* How a request is answered on its node: done (why NULL) or failed with why. */
struct dm_rem_answer {
    const char *annotation; /* REM_ANN_REQUEST_DONE or REM_ANN_REQUEST_FAILED */
    char value[DM_REM_ID_MAX + DM_REM_WHY_MAX + 2]; /* "<id>" or "<id> <why>" */
    const char *log_what;                           /* "remediation request done" or "... failed" */
    const char *event_type, *event_reason;
    char message[DM_REM_ID_MAX + DM_REM_WHY_MAX + 32]; /* the Event's */
};
void dm_rem_answer_of(const char *id, const char *why, struct dm_rem_answer *ret);

/* What to do about the node's request. Pure. */
void dm_rem_decide(const struct dm_rem_input *in, struct dm_rem_decision *ret);

/* The driver's own NVML and nvidia-smi, which the executor uses rather than its image's: from the
 * driver root (as nodestate_driver_probe found them there, resolved inside it) when the driver is
 * containerized, from the host root when it is the host's. nvml and smi are "" with why set
 * when the owner's root lacks them (smi alone may be missing: a reset then fails with why);
 * lib_dir is the folder of nvml, the library path nvidia-smi is run with. Pure. */
struct dm_rem_tools {
    char nvml[PATH_MAX], smi[PATH_MAX], lib_dir[PATH_MAX];
    const char *from; /* "driver root" or "host" */
    char why[DM_REM_WHY_MAX];
};
void dm_rem_tools_pick(const struct nodestate_driver_facts *f, enum nodestate_owner owner,
                       const char *driver_root, const char *host_root, struct dm_rem_tools *ret);

/* The executor's actions: "reset-gpu,reload-driver" and the like; -EINVAL naming a word that is
 * not an action the executor can take. */
int dm_rem_actions_parse(const char *text, bool ret[GH_ACT_COUNT], struct err *e);

#endif
