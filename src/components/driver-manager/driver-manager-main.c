/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuop driver-manager: the init container of the driver pod. It reads the node root and the
 * Node, asks the core (driver-manager.h) what to do, and does it, one step at a time; every step's
 * state lives on the Node (labels, an annotation) or the node root, so a run killed anywhere is
 * finished by the next one. docs/driver-manager.md.
 */
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include "driver-manager.h"
#include "kobj.h"
#include "kube.h"
#include "svc.h"

#define COMPONENT "driver-manager"

extern char **environ;

struct drivermgr {
    const char *host_root, *driver_root, *validations_dir, *node, *kubeconfig;
    const char *driver_version, *exit_after, *event_ns;
    uint64_t operand_wait_ms, host_wait_ms;
    struct dm_config cfg;

    struct kube_client *kc;
    json_t *node_obj; /* the Node as last read or written */
    bool blocked_reported;
};

static const char *const steps[] = {"owner",  "pause", "operands", "evict",  "drain",
                                    "unload", "clean", "restore",  "report", NULL};

static int check_step(const void *dst, const char *source, struct err *e)
{
    const char *v = *(const char *const *)dst;
    for (size_t i = 0; v && steps[i]; i++)
        if (strcmp(v, steps[i]) == 0)
            return 0;
    return err_set(e, -EINVAL,
                   "%s: not a step (owner, pause, operands, evict, drain, unload, clean, "
                   "restore, report)",
                   source);
}

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
     .kind = SVC_STRING,
     .off = offsetof(struct drivermgr, exit_after),
     .check = check_step},
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

/* The test hook: the process dies as by `kill -9` once the step is done. */
static void step_done(struct drivermgr *d, const char *step)
{
    log_debug(COMPONENT, "step done", "step=%s", step);
    if (d->exit_after && strcmp(d->exit_after, step) == 0) {
        log_info(COMPONENT, "killed after step (test hook)", "step=%s", step);
        kill(getpid(), SIGKILL);
    }
}

/* ---- the Node ----------------------------------------------------------------------------- */

static int node_patch(struct drivermgr *d, json_t *patch, struct err *e)
{
    json_t *out = NULL;
    struct kube_patch_opts o = {.type = KUBE_PATCH_MERGE};
    int r = kube_patch(d->kc, &KUBE_NODES, NULL, d->node, &o, patch, &out, e);
    json_decref(patch);
    if (r < 0)
        return err_prefix(e, "patch node %s", d->node);
    json_decref(d->node_obj);
    d->node_obj = out;
    return 0;
}

static int node_read(struct drivermgr *d, struct err *e)
{
    json_t *n = NULL;
    int r = kube_get(d->kc, &KUBE_NODES, NULL, d->node, &n, e);
    if (r < 0)
        return err_prefix(e, "read node");
    json_decref(d->node_obj);
    d->node_obj = n;
    return 0;
}

static int labels_set(struct drivermgr *d, json_t *labels, const char *what, struct err *e)
{
    if (json_object_size(labels) == 0) {
        json_decref(labels);
        return 0;
    }
    _cleanup_free_ char *text = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS);
    log_info(COMPONENT, what, "node=%s labels=%s", d->node, text ? text : "?");
    return node_patch(d, json_pack("{s:{s:o}}", "metadata", "labels", labels), e);
}

static int pause_operands(struct drivermgr *d, struct err *e)
{
    json_t *p = NULL;
    int r = nodeops_labels_patch(kobj_labels(d->node_obj), &dm_operand_pause, false, &p, e);
    return r < 0 ? r : labels_set(d, p, "operands paused", e);
}

/* Restores the operands (and with extra, sets those labels too) and uncordons a node this
 * driver manager cordoned. */
static int restore_node(struct drivermgr *d, json_t *extra, struct err *e)
{
    json_t *p = NULL;
    int r = nodeops_labels_patch(kobj_labels(d->node_obj), &dm_operand_pause, true, &p, e);
    if (r < 0) {
        json_decref(extra);
        return r;
    }
    bool extra_given = extra != NULL;
    if (extra)
        json_object_update(p, extra);
    json_decref(extra);
    if ((r = labels_set(d, p, extra_given ? "node labelled" : "operands restored", e)) < 0)
        return r;
    if (!streq_ptr(kobj_annotation(d->node_obj, DM_ANN_CORDONED), "true"))
        return 0;
    log_info(COMPONENT, "uncordoning the node it cordoned", "node=%s", d->node);
    return node_patch(d,
                      json_pack("{s:{s:b},s:{s:{s:n}}}", "spec", "unschedulable", 0, "metadata",
                                "annotations", DM_ANN_CORDONED),
                      e);
}

static int cordon(struct drivermgr *d, struct err *e)
{
    if (json_is_true(kobj_path(d->node_obj, "spec.unschedulable")))
        return 0; /* ours (the annotation says so) or someone else's: either way it stays */
    int r = node_patch(
        d, json_pack("{s:{s:{s:s}}}", "metadata", "annotations", DM_ANN_CORDONED, "true"), e);
    if (r < 0)
        return r;
    log_info(COMPONENT, "cordoning the node", "node=%s", d->node);
    return node_patch(d, json_pack("{s:{s:b}}", "spec", "unschedulable", 1), e);
}

static void event(struct drivermgr *d, const char *type, const char *reason, const char *msg)
{
    if (!d->kc || !d->node_obj)
        return;
    json_t *inv = json_pack("{s:s,s:s,s:{s:s,s:s?}}", "kind", "Node", "apiVersion", "v1",
                            "metadata", "name", d->node, "uid", kobj_uid(d->node_obj));
    const char *ns = d->event_ns ? d->event_ns : kube_client_namespace(d->kc);
    struct kube_event ev = {.ns = ns,
                            .involved = inv,
                            .type = type,
                            .reason = reason,
                            .message = msg,
                            .component = "gpuop-driver-manager",
                            .host = d->node};
    struct err e = {0};
    if (kube_event_create(d->kc, &ev, &e) < 0)
        log_warn(COMPONENT, "event not recorded", "reason=%s error=\"%s\"", reason, err_msg(&e));
    json_decref(inv);
}

static int report(struct drivermgr *d, const struct dm_finding *f, struct err *e)
{
    struct nodestate_driver_owner o = {.owner = f->owner};
    snprintf(o.version, sizeof(o.version), "%s", f->version);
    snprintf(o.source, sizeof(o.source), "%s", f->source);
    time_rfc3339(now_ms_real(), o.time, sizeof(o.time));
    _cleanup_free_ char *text = NULL;
    int r = nodestate_driver_owner_render(&o, &text);
    if (r < 0)
        return err_set(e, r, "render %s", NODESTATE_ANN_DRIVER_OWNER);
    if ((r = node_patch(d,
                        json_pack("{s:{s:{s:s}}}", "metadata", "annotations",
                                  NODESTATE_ANN_DRIVER_OWNER, text),
                        e)) < 0)
        return r;
    static const char *const reasons[] = {[NODESTATE_OWNER_NONE] = "DriverOwnerNone",
                                          [NODESTATE_OWNER_HOST] = "DriverOwnerHost",
                                          [NODESTATE_OWNER_CONTAINER] = "DriverOwnerContainer"};
    _cleanup_free_ char *msg =
        xasprintf("driver owner: %s%s%s (%s)", nodestate_owner_name(f->owner),
                  f->version[0] ? " " : "", f->version, f->source);
    event(d, "Normal", reasons[f->owner], msg);
    return 0;
}

/* The drain's record on the node (gpuop.dev/last-drain) and an Event, before the first
 * eviction: `gpuop status` names the last drain from it. */
static int record_drain(struct drivermgr *d, const struct dm_finding *f, struct err *e)
{
    struct nodestate_drain dr = {0};
    time_rfc3339(now_ms_real(), dr.time, sizeof(dr.time));
    const char *dv = d->driver_version ? d->driver_version : "";
    snprintf(dr.reason, sizeof(dr.reason),
             "driver reload: the containerized driver%s%s replaces the loaded nvidia %s",
             dv[0] ? " " : "", dv, f->version[0] ? f->version : "(version unknown)");
    snprintf(dr.by, sizeof(dr.by), "driver-manager");
    _cleanup_free_ char *text = NULL;
    int r = nodestate_drain_render(&dr, &text);
    if (r < 0)
        return err_set(e, r, "render %s", NODESTATE_ANN_LAST_DRAIN);
    if ((r = node_patch(
             d,
             json_pack("{s:{s:{s:s}}}", "metadata", "annotations", NODESTATE_ANN_LAST_DRAIN, text),
             e)) < 0)
        return r;
    event(d, "Normal", "NodeDrain", dr.reason);
    return 0;
}

/* ---- pods --------------------------------------------------------------------------------- */

static int wait_operands(struct svc *s, struct drivermgr *d, struct err *e)
{
    return nodeops_wait_operands(s, d->kc, d->node, kobj_labels(d->node_obj), d->operand_wait_ms,
                                 COMPONENT, e);
}

struct evict_ctx {
    struct drivermgr *d;
    bool drain;
};

static int evict_select(const json_t *pod, void *ud, struct err *e)
{
    struct evict_ctx *c = ud;
    enum nodeops_pod_kind k = nodeops_pod_classify(pod, kobj_labels(c->d->node_obj));
    bool target = k == NODEOPS_POD_GPU || (c->drain && k == NODEOPS_POD_OTHER);
    if (!target)
        return 0;
    if (c->drain && !kobj_deletion_timestamp(pod)) {
        int r = dm_drain_allowed(&c->d->cfg, pod, e);
        if (r < 0)
            return r;
    }
    return 1;
}

static void evict_blocked(void *ud, const char *why)
{
    struct evict_ctx *c = ud;
    if (c->d->blocked_reported)
        return;
    _cleanup_free_ char *msg =
        xasprintf("%s waits: %s", c->drain ? "drain" : "GPU pod eviction", why);
    event(c->d, "Warning", "GPUPodEvictionBlocked", msg);
    c->d->blocked_reported = true;
}

/* Evicts the node's GPU pods (drain false) or what a drain takes (drain true) through the
 * Eviction API (nodeops) and waits for them to go. */
static int evict_pods(struct svc *s, struct drivermgr *d, bool drain, struct err *e)
{
    struct evict_ctx c = {.d = d, .drain = drain};
    struct nodeops_evict o = {.kc = d->kc,
                              .svc = s,
                              .node = d->node,
                              .selector = drain ? d->cfg.drain_selector : NULL,
                              .what = drain ? "drain" : "GPU pod eviction",
                              .component = COMPONENT,
                              .timeout_ms = d->cfg.drain_timeout_ms,
                              .select = evict_select,
                              .blocked = evict_blocked,
                              .ud = &c};
    int r = nodeops_evict_pods(&o, NULL, e);
    if (r == -ETIMEDOUT)
        err_prefix(e, "DRAIN_TIMEOUT_SECONDS");
    return r;
}

/* ---- the node root ------------------------------------------------------------------------ */

/* `rmmod NAME` from PATH (the image's kmod; the simulated images' on simulated nodes). */
static int rmmod(const char *module, struct err *e)
{
    char *argv[] = {(char *)"rmmod", (char *)module, NULL};
    pid_t pid;
    int r = posix_spawnp(&pid, "rmmod", NULL, NULL, argv, environ);
    if (r != 0)
        return err_errno(e, -r, "run rmmod %s", module);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return err_errno(e, -errno, "wait for rmmod %s", module);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    return err_set(e, -EBUSY, "rmmod %s failed (%s %d): the module stays loaded", module,
                   WIFEXITED(st) ? "exit" : "signal",
                   WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

static int unload(struct drivermgr *d, struct err *e)
{
    struct nodestate_driver_facts f;
    int r = nodestate_driver_probe(d->host_root, d->driver_root, d->validations_dir, &f, e);
    if (r < 0)
        return r;
    for (int m = 0; m < NODESTATE_MOD_COUNT; m++) {
        if (!f.module[m])
            continue;
        log_info(COMPONENT, "unloading kernel module", "module=%s", nodestate_module_name(m));
        if ((r = rmmod(nodestate_module_name(m), e)) < 0)
            return r;
    }
    return 0;
}

static int clean_root(struct drivermgr *d, struct err *e)
{
    struct nodestate_driver_facts f;
    int r = nodestate_driver_probe(d->host_root, d->driver_root, d->validations_dir, &f, e);
    if (r < 0)
        return r;
    if (f.root_mountpoint && !f.module[NODESTATE_MOD_NVIDIA]) {
        log_info(COMPONENT, "unmounting the stale driver root", "path=%s", d->driver_root);
        if (umount2(d->driver_root, MNT_DETACH) < 0 && errno != EINVAL)
            return err_errno(e, -errno, "unmount \"%s\"", d->driver_root);
    }
    return nodestate_file_remove(d->validations_dir, NODESTATE_DRIVER_CTR_READY, e);
}

/* ---- the run ------------------------------------------------------------------------------ */

static int host_driver(struct svc *s, struct drivermgr *d, const struct dm_finding *f,
                       struct err *e)
{
    int r = restore_node(d, json_pack("{s:s}", DM_LABEL_DRIVER, DM_PRE_INSTALLED), e);
    if (r < 0 || (r = report(d, f, e)) < 0)
        return r;
    step_done(d, "report");
    log_info(COMPONENT, "driver pre-installed on the host; the driver pod is not needed here",
             "node=%s label=%s=%s wait=%llums", d->node, DM_LABEL_DRIVER, DM_PRE_INSTALLED,
             (unsigned long long)d->host_wait_ms);
    if (svc_wait(s, d->host_wait_ms) == SVC_STOP)
        return 0;
    return err_set(e, -EEXIST,
                   "the driver on node %s is the host's (%s); the node is labelled %s=%s so this "
                   "driver pod goes away",
                   d->node, f->source, DM_LABEL_DRIVER, DM_PRE_INSTALLED);
}

static int containerized(struct svc *s, struct drivermgr *d, const struct dm_finding *f,
                         const struct nodestate_driver_facts *facts, struct err *e)
{
    struct dm_mode mode;
    dm_mode_decide(&d->cfg, d->node_obj, &mode);
    bool loaded = false;
    for (int m = 0; m < NODESTATE_MOD_COUNT; m++)
        loaded |= facts->module[m];
    int r;
    if (loaded) {
        log_info(COMPONENT, "reloading the containerized driver", "node=%s evict=%s drain=%s%s",
                 d->node, mode.evict_gpu_pods ? "true" : "false", mode.drain ? "true" : "false",
                 mode.operator_driven ? " (the operator's upgrade controller drives this node: "
                                        "eviction and drain are its own)"
                                      : "");
        if ((r = pause_operands(d, e)) < 0)
            return r;
        step_done(d, "pause");
        if ((r = wait_operands(s, d, e)) < 0)
            return r;
        step_done(d, "operands");
        if (mode.evict_gpu_pods && (r = evict_pods(s, d, false, e)) < 0)
            return r;
        step_done(d, "evict");
        if (mode.drain && ((r = cordon(d, e)) < 0 || (r = record_drain(d, f, e)) < 0 ||
                           (r = evict_pods(s, d, true, e)) < 0))
            return r;
        step_done(d, "drain");
        if ((r = unload(d, e)) < 0)
            return r;
        step_done(d, "unload");
    } else {
        log_info(COMPONENT, "no driver loaded: nothing to unload", "node=%s", d->node);
    }
    if ((r = clean_root(d, e)) < 0)
        return r;
    step_done(d, "clean");
    if ((r = restore_node(d, NULL, e)) < 0)
        return r;
    step_done(d, "restore");
    if ((r = report(d, f, e)) < 0)
        return r;
    step_done(d, "report");
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
    if ((r = node_read(d, e)) < 0)
        return r;
    step_done(d, "owner");
    r = f.owner == NODESTATE_OWNER_HOST ? host_driver(s, d, &f, e)
                                        : containerized(s, d, &f, &facts, e);
    if (r < 0 && r != -ECANCELED && f.owner != NODESTATE_OWNER_HOST) {
        event(d, "Warning", "DriverManagerFailed", err_msg(e));
        /* the old driver keeps serving: the operands come back until the next try */
        struct err ee = {0};
        if (restore_node(d, NULL, &ee) < 0)
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
    .epilogue = "Exit: 0 the node is ready for the driver container; 1 a failure, or a host\n"
                "driver owns this node; 2 bad input (no node name, no host root).\n",
    .state_size = sizeof(struct drivermgr),
    .defaults = dm_defaults,
    .configure = dm_configure,
    .run = dm_run,
    .cleanup = dm_cleanup,
};
