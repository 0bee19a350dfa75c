/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuop driver-manager: the init container of the driver pod. It reads the node root and the
 * Node, asks the core (driver-manager.h) what to do, and does it, one step at a time; every step's
 * state lives on the Node (labels, an annotation) or the node root, so a run killed anywhere is
 * finished by the next one. docs/driver-manager.md.
 */
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "driver-manager-internal.h"
#include "kobj.h"
#include "kube.h"
#include "svc.h"

#define COMPONENT "driver-manager"

static const struct svc_option dm_options[] = {
    {.flag = "host-root",
     .env = "HOST_ROOT",
     .kind = SVC_STRING,
     .off = offsetof(struct drivermgr, host_root),
     .metavar = "PATH",
     .help = "the node's root file system as mounted here (/host)"},
    {.flag = "driver-install-dir",
     .env = "DRIVER_INSTALL_DIR",
     .kind = SVC_STRING,
     .off = offsetof(struct drivermgr, driver_root),
     .metavar = "PATH",
     .help = "the containerized driver's root (/run/nvidia/driver)"},
    {.flag = "validations-dir",
     .env = "VALIDATIONS_DIR",
     .kind = SVC_STRING,
     .off = offsetof(struct drivermgr, validations_dir),
     .metavar = "PATH",
     .help = "the status files' folder (/run/nvidia/validations)"},
    {.kind = SVC_FRAGMENT,
     .fragment = svc_node_name_option,
     .off = offsetof(struct drivermgr, node)},
    {.kind = SVC_FRAGMENT,
     .fragment = svc_kubeconfig_option,
     .off = offsetof(struct drivermgr, kubeconfig)},
    {.flag = "operand-wait",
     .env = "OPERAND_WAIT_TIMEOUT",
     .kind = SVC_DURATION,
     .min = 1000,
     .finite = true,
     .off = offsetof(struct drivermgr, operand_wait_ms),
     .metavar = "DUR",
     .help = "how long the paused operands' pods may take to go (5m)"},
    {.flag = "host-driver-wait",
     .env = "HOST_DRIVER_WAIT",
     .kind = SVC_DURATION,
     .finite = true,
     .off = offsetof(struct drivermgr, host_wait_ms),
     .metavar = "DUR",
     .help = "a host driver: exit 1 after this wait for the pod's removal (60s)"},
    {.env = "POD_NAMESPACE",
     .kind = SVC_STRING,
     .off = offsetof(struct drivermgr, event_ns),
     .help = "where its Events go (default: the client's namespace)"},
    {.env = "DRIVER_VERSION",
     .kind = SVC_STRING,
     .off = offsetof(struct drivermgr, driver_version),
     .help = "the containerized driver's version, reported in the owner annotation"},
    {.env = "ENABLE_GPU_POD_EVICTION",
     .kind = SVC_BOOL,
     .off = offsetof(struct drivermgr, cfg.gpu_pod_eviction),
     .help = "evict the pods using GPUs before the reload (true)"},
    {.env = "ENABLE_AUTO_DRAIN",
     .kind = SVC_BOOL,
     .off = offsetof(struct drivermgr, cfg.auto_drain),
     .help = "cordon the node and evict every pod but DaemonSet pods (false)"},
    {.env = "DRAIN_USE_FORCE",
     .kind = SVC_BOOL,
     .off = offsetof(struct drivermgr, cfg.drain_force),
     .help = "the drain also evicts pods without a controller (false)"},
    {.env = "DRAIN_POD_SELECTOR_LABEL",
     .kind = SVC_STRING,
     .off = offsetof(struct drivermgr, cfg.drain_selector),
     .help = "the drain evicts only pods matching this label selector"},
    {.env = "DRAIN_TIMEOUT_SECONDS",
     .kind = SVC_DURATION,
     .finite = true,
     .off = offsetof(struct drivermgr, cfg.drain_timeout_ms),
     .help = "how long evictions may wait on disruption budgets; 0s: no limit (0s)"},
    {.env = "DRAIN_DELETE_EMPTYDIR_DATA",
     .kind = SVC_BOOL,
     .off = offsetof(struct drivermgr, cfg.drain_delete_emptydir),
     .help = "the drain also evicts pods with emptyDir volumes (false)"},
    /* test hook: die by SIGKILL right after the named step */
    {.env = "GPUOP_DRIVER_MANAGER_KILL_AFTER",
     .kind = SVC_ENUM,
     .choices = dm_hook_names,
     .off = offsetof(struct drivermgr, exit_after)},
    {0},
};

static void dm_defaults(void *state)
{
    struct drivermgr *d = state;
    d->host_root = "/host";
    d->driver_root = "/run/nvidia/driver";
    d->validations_dir = NODESTATE_VALIDATIONS_DIR;
    d->operand_wait_ms = 5 * 60 * 1000;
    d->host_wait_ms = 60 * 1000;
    d->cfg.gpu_pod_eviction = true;
    d->exit_after = -1;
}

static int dm_configure(struct svc *s, struct err *e)
{
    struct drivermgr *d = svc_state(s);
    if (!d->node || !d->node[0])
        return err_set(e, -EINVAL, "no node name: set NODE_NAME or --node-name");
    struct nodestate_driver_facts f;
    return nodestate_driver_probe(d->host_root, d->driver_root, d->validations_dir, &f, e);
}

static void dm_cleanup(void *state)
{
    struct drivermgr *d = state;
    json_decref(d->node_obj);
    kube_client_free(d->kc);
}

/* ---- the run ------------------------------------------------------------------------------ */

static int host_wait(struct svc *s, struct drivermgr *d, const struct dm_finding *f, struct err *e)
{
    log_info(COMPONENT, "driver pre-installed on the host; the driver pod is not needed here",
             "node=%s label=%s=%s wait=%llums", d->node, DM_LABEL_DRIVER, DM_PRE_INSTALLED,
             (unsigned long long)d->host_wait_ms);
    if (svc_wait(s, d->host_wait_ms) == SVC_STOP)
        return 1; /* stopped: done */
    return err_set(e, -EEXIST,
                   "the driver on node %s is the host's (%s); the node is labelled %s=%s so this "
                   "driver pod goes away",
                   d->node, f->source, DM_LABEL_DRIVER, DM_PRE_INSTALLED);
}

/* One step of the plan; 1 when the run ends there with success. */
static int run_step(struct svc *s, struct drivermgr *d, enum dm_step step,
                    const struct dm_finding *f, struct err *e)
{
    switch (step) {
    case DM_STEP_MARK:
        return 0;
    case DM_STEP_LABEL_HOST:
        return dm_node_restore(d, true, e);
    case DM_STEP_PAUSE:
        return dm_node_pause(d, e);
    case DM_STEP_WAIT_OPERANDS:
        return nodeops_wait_operands(s, d->kc, d->node, kobj_labels(d->node_obj),
                                     d->operand_wait_ms, COMPONENT, e);
    case DM_STEP_EVICT:
        return dm_node_evict(s, d, false, e);
    case DM_STEP_CORDON:
        return dm_node_cordon(d, e);
    case DM_STEP_RECORD_DRAIN:
        return dm_node_record_drain(d, f, e);
    case DM_STEP_DRAIN:
        return dm_node_evict(s, d, true, e);
    case DM_STEP_UNLOAD:
        return dm_root_unload(d, e);
    case DM_STEP_CLEAN:
        return dm_root_clean(d, e);
    case DM_STEP_RESTORE:
        return dm_node_restore(d, false, e);
    case DM_STEP_REPORT:
        return dm_node_report(d, f, e);
    case DM_STEP_HOST_WAIT:
        return host_wait(s, d, f, e);
    case DM_STEP_COUNT:
        break;
    }
    return err_set(e, -EINVAL, "step %d: not a step", (int)step);
}

static int run_plan(struct svc *s, struct drivermgr *d, const struct dm_finding *f,
                    const struct nodestate_driver_facts *facts, struct err *e)
{
    struct dm_mode mode;
    dm_mode_decide(&d->cfg, d->node_obj, &mode);
    struct dm_plan plan;
    dm_plan(f, facts, &mode, &plan);
    if (plan.reload)
        log_info(COMPONENT, "reloading the containerized driver", "node=%s evict=%s drain=%s%s",
                 d->node, mode.evict_gpu_pods ? "true" : "false", mode.drain ? "true" : "false",
                 mode.operator_driven ? " (the operator's upgrade controller drives this node: "
                                        "eviction and drain are its own)"
                                      : "");
    else if (f->owner != NODESTATE_OWNER_HOST)
        log_info(COMPONENT, "no driver loaded: nothing to unload", "node=%s", d->node);
    for (size_t i = 0; i < plan.n; i++) {
        int r = run_step(s, d, plan.steps[i].step, f, e);
        if (r != 0)
            return r < 0 ? r : 0;
        dm_step_done(d, dm_hook_names, plan.steps[i].hook);
    }
    log_info(COMPONENT, "node ready for the driver container", "node=%s", d->node);
    return 0;
}

static int dm_run(struct svc *s, struct err *e)
{
    struct drivermgr *d = svc_state(s);
    struct kube_options ko = {.kubeconfig = d->kubeconfig, .stop = svc_stop(s)};
    int r = kube_client_new(&ko, &d->kc, e);
    if (r < 0)
        return r;
    struct nodestate_driver_facts facts;
    struct dm_finding f;
    if ((r = nodestate_driver_probe(d->host_root, d->driver_root, d->validations_dir, &facts, e)) <
        0)
        return r;
    dm_owner_decide(&facts, d->driver_version, &f);
    log_info(COMPONENT, "driver owner", "node=%s owner=%s found=%s version=%s source=\"%s\"",
             d->node, nodestate_owner_name(f.owner), nodestate_owner_name(f.found), f.version,
             f.source);
    if ((r = dm_node_read(d, e)) < 0)
        return r;
    dm_step_done(d, dm_hook_names, "owner");
    r = run_plan(s, d, &f, &facts, e);
    if (r < 0 && r != -ECANCELED && f.owner != NODESTATE_OWNER_HOST) {
        dm_node_event(d, "Warning", "DriverManagerFailed", err_msg(e));
        /* the old driver keeps serving: the operands come back until the next try */
        struct err ee = {0};
        if (dm_node_restore(d, false, &ee) < 0)
            log_warn(COMPONENT, "operands not restored", "error=\"%s\"", err_msg(&ee));
    }
    return r;
}

const struct svc_component drivermgr_component = {
    .name = "driver-manager",
    .usage = "Usage: gpuop driver-manager [flags]\n\n"
             "The driver pod's init container: decides who owns the NVIDIA driver on this node\n"
             "(the host, the driver container, or none). A host driver: labels the node\n"
             "nvidia.com/gpu.deploy.driver=pre-installed and exits 1 so this pod goes away.\n"
             "Otherwise, before the driver container (re)loads: pauses the GPU operands, evicts\n"
             "the GPU pods (PodDisruptionBudgets hold), drains when configured, unloads the old\n"
             "modules, cleans a stale driver root and restores the operands. Records the finding\n"
             "in the node annotation gpuop.dev/driver-owner and an Event.\n",
    .options = {dm_options},
    .verbs = {&drivermgr_remediate_component},
    .epilogue = "Exit: 0 the node is ready for the driver container; 1 a failure, or a host\n"
                "driver owns this node; 2 bad input (no node name, no host root).\n",
    .state_size = sizeof(struct drivermgr),
    .defaults = dm_defaults,
    .configure = dm_configure,
    .run = dm_run,
    .cleanup = dm_cleanup,
};
