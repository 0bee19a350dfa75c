/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuop mig-manager: watches nvidia.com/mig.config on its node and lays the GPUs out as that
 * config of the mig-parted config file says: state pending, operands paused, their pods gone, the
 * GPU pods evicted (disruption budgets hold), the layout applied (rolled back on failure), the
 * operands restored, state success or failed, an Event. The decisions are migmgr.c's; every step
 * leaves its state on the Node, so a run killed anywhere is finished by the next.
 */
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "kobj.h"
#include "kube.h"
#include "mig-manager-internal.h"
#include "nvcdi.h" /* NVCDI_CDI_SPEC */
#include "svc.h"

#define COMPONENT "mig-manager"

#define O(m) offsetof(struct migmgr, m)
static const struct svc_option mm_options[] = {
    {.kind = SVC_FRAGMENT, .fragment = svc_node_name_option, .off = O(node)},
    {.kind = SVC_FRAGMENT, .fragment = svc_kubeconfig_option, .off = O(kubeconfig)},
    {.flag = "config-file",
     .env = "CONFIG_FILE",
     .kind = SVC_STRING,
     .off = O(config_file),
     .metavar = "FILE",
     .help = "the mig-parted v1 config (the ConfigMap's config.yaml), read at every change\n"
             "(/mig-parted-config/config.yaml)"},
    {.flag = "interval",
     .env = "MIG_MANAGER_INTERVAL",
     .kind = SVC_DURATION,
     .min = 100,
     .finite = true,
     .off = O(interval_ms),
     .metavar = "DUR",
     .help = "how often the node's labels are read (2s)"},
    {.flag = "operand-wait",
     .env = "OPERAND_WAIT_TIMEOUT",
     .kind = SVC_DURATION,
     .min = 1000,
     .finite = true,
     .off = O(operand_wait_ms),
     .metavar = "DUR",
     .help = "how long the paused operands' pods may take to go (5m)"},
    {.flag = "eviction-timeout",
     .env = "EVICTION_TIMEOUT",
     .kind = SVC_DURATION,
     .finite = true,
     .off = O(eviction_timeout_ms),
     .metavar = "DUR",
     .help = "how long evictions may wait on disruption budgets; 0s: as long as it takes,\n"
             "the state staying pending with the reason (0s)"},
    {.flag = "host-root",
     .env = "HOST_ROOT",
     .kind = SVC_STRING,
     .off = O(host_root),
     .metavar = "DIR",
     .help = "where the host's / is seen, for the CDI spec and the driver root (/)"},
    {.flag = "cdi-spec",
     .env = "CDI_SPEC",
     .kind = SVC_STRING,
     .off = O(cdi_spec),
     .metavar = "PATH",
     .help = "the host's CDI spec the toolkit writes, written again after each change when it\n"
             "is there (" NVCDI_CDI_SPEC ")"},
    {.env = "POD_NAMESPACE",
     .kind = SVC_STRING,
     .off = O(event_ns),
     .help = "where its Events go (default: the client's namespace)"},
    /* test hook: die by SIGKILL right after the named step */
    {.env = "GPUOP_MIG_MANAGER_KILL_AFTER",
     .kind = SVC_ENUM,
     .choices = mm_hook_names,
     .off = O(kill_after)},
    {0},
};
#undef O

static void mm_defaults(void *state)
{
    struct migmgr *m = state;
    m->config_file = "/mig-parted-config/config.yaml";
    m->interval_ms = 2000;
    m->operand_wait_ms = 5 * 60 * 1000;
    m->host_root = "/";
    m->cdi_spec = NVCDI_CDI_SPEC;
    m->kill_after = -1;
}

static int mm_configure(struct svc *s, struct err *e)
{
    struct migmgr *m = svc_state(s);
    if (!m->node || !m->node[0])
        return err_set(e, -EINVAL, "no node name: set NODE_NAME or --node-name");
    return 0;
}

static void mm_cleanup(void *state)
{
    struct migmgr *m = state;
    json_decref(m->node_obj);
    kube_client_free(m->kc);
    mm_layout_close(m);
}

static void step_done(struct migmgr *m, const char *step)
{
    log_debug(COMPONENT, "step done", "step=%s", step);
    if (m->kill_after >= 0 && strcmp(mm_hook_names[m->kill_after], step) == 0) {
        log_info(COMPONENT, "killed after step (test hook)", "step=%s", step);
        kill(getpid(), SIGKILL);
    }
}

/* ---- the actions: each writes what the core says (mig-manager.h) ------------------------- */

static int refuse(struct migmgr *m, const char *want, const struct err *why, struct err *e)
{
    log_warn(COMPONENT, "config refused; the GPUs keep their layout", "config=%s reason=\"%s\"",
             want, err_msg(why));
    int r = mm_node_conclude(m, "failed", want, err_msg(why), e);
    if (r == 0)
        mm_node_event(m, MM_EV_REFUSED, want, NULL, err_msg(why));
    return r;
}

static int finish(struct migmgr *m, const char *want, const char *evicted, struct err *e)
{
    const char *before = kobj_annotation(m->node_obj, MM_ANN_APPLIED);
    _cleanup_free_ char *from = xstrdup(before ? before : "(none)");
    bool changed = kobj_annotation(m->node_obj, MM_ANN_PROGRESS) != NULL;
    if (changed)
        mm_layout_cdi(m);
    int r = mm_node_conclude(m, "success", want, NULL, e);
    if (r < 0)
        return r;
    step_done(m, "finish");
    log_info(COMPONENT, "MIG config applied", "config=%s from=%s", want, from);
    if (changed)
        mm_node_event(m, MM_EV_APPLIED, want, from, evicted);
    return 0;
}

/* A MIG mode change the driver could only finish with a GPU reset: state rebooting with the
 * reason, the operands restored (the GPUs serve their current layout until the reset), the change
 * kept in progress so that after the reboot it is finished. */
static int await_reset(struct migmgr *m, const char *want, const struct err *why, struct err *e)
{
    bool first = false;
    int r = mm_node_await_reset(m, want, err_msg(why), &first, e);
    if (r < 0)
        return r;
    log_warn(COMPONENT, "MIG mode change waits for a GPU reset; state rebooting",
             "config=%s reason=\"%s\"", want, err_msg(why));
    if (first)
        mm_node_event(m, MM_EV_REBOOT, want, NULL, err_msg(why));
    return 0;
}

static int change(struct migmgr *m, const char *want, struct mm_view *v, struct err *e)
{
    int r = mm_node_pending(m, want, e);
    if (r < 0)
        return r;
    step_done(m, "pending");
    if ((r = mm_node_pause(m, e)) < 0)
        return r;
    step_done(m, "pause");
    if ((r = nodeops_wait_operands(m->svc, m->kc, m->node, kobj_labels(m->node_obj),
                                   m->operand_wait_ms, COMPONENT, e)) < 0)
        return r;
    step_done(m, "operands");
    _cleanup_free_ char *evicted = NULL;
    if (!mm_evict_first(m->node_obj))
        log_warn(COMPONENT, "forced: the GPU pods are not evicted first", "annotation=%s",
                 MM_ANN_FORCE);
    else if ((r = mm_node_evict(m, &evicted, e)) < 0)
        return r;
    step_done(m, "evict");
    enum mm_after_apply next;
    bool rollback_failed = false;
    struct err why = {0};
    if ((r = mm_layout_apply(m, want, v, &next, &rollback_failed, &why, e)) < 0)
        return r;
    switch (next) {
    case MM_RESET_WAIT:
        return await_reset(m, want, &why, e);
    case MM_RESET_DONE: /* reset in between: the next look finds the modes set and finishes */
        return 0;
    case MM_APPLY_FAILED:
        if ((r = mm_node_conclude(m, "failed", want, err_msg(&why), e)) == 0)
            mm_node_event(m, rollback_failed ? MM_EV_ROLLBACK_FAILED : MM_EV_FAILED, want, NULL,
                          err_msg(&why));
        return r;
    case MM_APPLIED:
        break;
    }
    step_done(m, "apply");
    return finish(m, want, evicted, e);
}

static int reconcile(struct migmgr *m, struct err *e)
{
    int r = mm_node_read(m, e);
    if (r < 0)
        return r;
    const char *want = kobj_label(m->node_obj, MM_LABEL_CONFIG);
    _cleanup_free_ char *want_copy = want ? xstrdup(want) : NULL; /* the Node is replaced */
    struct mm_view v _cleanup_(mm_view_clear) = {0};
    if ((r = mm_view_read(m, want_copy, &v, e)) < 0)
        return r;
    struct mm_input in;
    mm_input_read(m->node_obj, &in);
    in.config_error = v.config_error;
    in.matches = v.matches;
    in.reset_pending = v.reset_pending;
    enum mm_action a = mm_decide(&in);
    log_debug(COMPONENT, "decided", "config=%s action=%s", want_copy ? want_copy : "",
              mm_action_name(a));
    switch (a) {
    case MM_NOTHING:
        return 0;
    case MM_RESTORE:
        log_info(COMPONENT, "no config wanted: restoring what a change left", "node=%s", m->node);
        return mm_node_conclude(m, NULL, NULL, NULL, e);
    case MM_REFUSE:
        return refuse(m, want_copy, &v.why, e);
    case MM_FINISH:
        return finish(m, want_copy, NULL, e);
    case MM_CHANGE:
        return change(m, want_copy, &v, e);
    case MM_AWAIT_RESET:
        return await_reset(m, want_copy, &v.reset_why, e);
    }
    return 0;
}

static int mm_run(struct svc *s, struct err *e)
{
    struct migmgr *m = svc_state(s);
    m->svc = s;
    struct kube_options ko = {.kubeconfig = m->kubeconfig, .stop = svc_stop(s)};
    int r = kube_client_new(&ko, &m->kc, e);
    if (r < 0 || (r = mm_layout_open(m, e)) < 0)
        return r;
    log_info(COMPONENT, "watching", "node=%s label=%s config_file=%s", m->node, MM_LABEL_CONFIG,
             m->config_file);
    while (!svc_stopped(s)) {
        struct err re = {0};
        if ((r = reconcile(m, &re)) < 0 && r != -ECANCELED)
            log_warn(COMPONENT, "reconcile failed; retrying", "error=\"%s\"", err_msg(&re));
        if (svc_wait(s, m->interval_ms) == SVC_STOP)
            break;
    }
    return 0;
}

const struct svc_component migmgr_component = {
    .name = "mig-manager",
    .usage = "Usage: gpuop mig-manager [flags]\n\n"
             "Lays out this node's GPUs as the nvidia.com/mig.config label names a config of the\n"
             "mig-parted config file: nvidia.com/mig.config.state=pending, the GPU operands\n"
             "paused (nvidia.com/gpu.deploy.*=paused-for-mig-change, \"false\" kept) and their\n"
             "pods gone, the GPU pods evicted through the Eviction API (PodDisruptionBudgets\n"
             "hold; the reason is in the gpuop.dev/mig-manager.reason annotation), the layout\n"
             "applied (a failure rolls every GPU back), the CDI spec written again, the\n"
             "operands restored, then state=success or failed with the reason, and an Event.\n"
             "A MIG mode change the driver can only finish with a GPU reset ends in\n"
             "state=rebooting (operands restored); after the reset the change is finished.\n"
             "docs/mig-manager.md.\n",
    .options = {mm_options},
    .epilogue = "Also read: GPUOP_NVML_LIBRARY (default libnvidia-ml.so.1).\n"
                "Exit: 0 stopped; 1 a failure to start (API server, NVML); 2 bad input.\n",
    .state_size = sizeof(struct migmgr),
    .defaults = mm_defaults,
    .configure = mm_configure,
    .run = mm_run,
    .cleanup = mm_cleanup,
};
