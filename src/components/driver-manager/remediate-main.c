/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuop driver-manager remediate: the executor of the operator's reset and driver-reload requests
 * on its own node (docs/remediation.md, "The executor"). Each round it reads its Node (get: the
 * only read its RBAC needs), NVML and the node root, asks the core (dm_rem_decide) and does what
 * it says: a GPU reset with the driver's own `nvidia-smi -r -i UUID` (dm_rem_tools_pick: never
 * the image's), or a driver reload by evicting its own driver pod (the driver manager of the next
 * pod unloads, its driver container loads); then it answers on the Node. The answer is the
 * record, so a restart never carries a request out twice. */
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "driver-manager-internal.h"
#include "gpu.h"
#include "kobj.h"
#include "kube.h"
#include "remediation.h"
#include "svc.h"

#define COMPONENT "driver-manager"

struct dm_rem {
    struct drivermgr d; /* the Node, its client and the node root, as the init container's */
    const char *actions, *pod;
    uint64_t poll_ms;
    bool allow[GH_ACT_COUNT];
    bool once;
};

static const char *const rem_hook_names[] = {"executed", NULL};

static const struct svc_option rem_options[] = {
    {.flag = "host-root",
     .env = "HOST_ROOT",
     .kind = SVC_STRING,
     .off = offsetof(struct dm_rem, d.host_root),
     .metavar = "PATH",
     .help = "the node's root file system as mounted here (/host)"},
    {.flag = "driver-install-dir",
     .env = "DRIVER_INSTALL_DIR",
     .kind = SVC_STRING,
     .off = offsetof(struct dm_rem, d.driver_root),
     .metavar = "PATH",
     .help = "the containerized driver's root (/run/nvidia/driver)"},
    {.flag = "validations-dir",
     .env = "VALIDATIONS_DIR",
     .kind = SVC_STRING,
     .off = offsetof(struct dm_rem, d.validations_dir),
     .metavar = "PATH",
     .help = "the status files' folder (/run/nvidia/validations)"},
    {.kind = SVC_FRAGMENT,
     .fragment = svc_node_name_option,
     .off = offsetof(struct dm_rem, d.node)},
    {.kind = SVC_FRAGMENT,
     .fragment = svc_kubeconfig_option,
     .off = offsetof(struct dm_rem, d.kubeconfig)},
    {.flag = "remediation-actions",
     .env = "REMEDIATION_ACTIONS",
     .kind = SVC_STRING,
     .off = offsetof(struct dm_rem, actions),
     .metavar = "LIST",
     .help = "the requests carried out (reset-gpu,reload-driver); others are refused"},
    {.flag = "poll",
     .env = "REMEDIATION_POLL",
     .kind = SVC_DURATION,
     .min = 100,
     .finite = true,
     .off = offsetof(struct dm_rem, poll_ms),
     .metavar = "DUR",
     .help = "how often the Node is read for a request (2s)"},
    {.flag = "once",
     .kind = SVC_BOOL,
     .off = offsetof(struct dm_rem, once),
     .help = "one round, then exit"},
    {.env = "POD_NAME",
     .kind = SVC_STRING,
     .off = offsetof(struct dm_rem, pod),
     .help = "this driver pod's name: a driver reload evicts it"},
    {.env = "POD_NAMESPACE",
     .kind = SVC_STRING,
     .off = offsetof(struct dm_rem, d.event_ns),
     .help = "the driver pod's namespace, where its Events go"},
    /* test hook: die by SIGKILL right after the action, before the answer */
    {.env = "GPUOP_DRIVER_MANAGER_KILL_AFTER",
     .kind = SVC_ENUM,
     .choices = rem_hook_names,
     .off = offsetof(struct dm_rem, d.exit_after)},
    {0},
};

static void rem_defaults(void *state)
{
    struct dm_rem *x = state;
    x->d.host_root = "/host";
    x->d.driver_root = "/run/nvidia/driver";
    x->d.validations_dir = NODESTATE_VALIDATIONS_DIR;
    x->actions = "reset-gpu,reload-driver";
    x->poll_ms = 2000;
    x->d.exit_after = -1;
}

static int rem_configure(struct svc *s, struct err *e)
{
    struct dm_rem *x = svc_state(s);
    if (!x->d.node || !x->d.node[0])
        return err_set(e, -EINVAL, "no node name: set NODE_NAME or --node-name");
    int r = dm_rem_actions_parse(x->actions, x->allow, e);
    return r < 0 ? err_prefix(e, "--remediation-actions") : 0;
}

static void rem_cleanup(void *state)
{
    struct dm_rem *x = state;
    json_decref(x->d.node_obj);
    kube_client_free(x->d.kc);
}

/* ---- one round ---------------------------------------------------------------------------- */

/* This node's GPUs as the driver's own NVML (nvml: dm_rem_tools_pick's) shows them; NULL with
 * why in e when NVML cannot be read. NVML is held only for this read: the executor is no client
 * of the GPUs while it resets them, and no user of the module when a driver pod unloads it. */
static struct dm_rem_gpu *read_gpus(const char *nvml, struct gpu_inventory **ret_inv, size_t *ret_n,
                                    struct err *e)
{
    struct gpu_lib *lib _cleanup_(gpu_lib_freep) = NULL;
    if (gpu_lib_open(nvml, &lib, e) < 0 || gpu_inventory_read(lib, ret_inv, e) < 0)
        return NULL;
    const struct gpu_inventory *inv = *ret_inv;
    struct dm_rem_gpu *g = xcalloc(inv->n_gpus + 1, sizeof(*g));
    for (size_t i = 0; i < inv->n_gpus; i++) {
        g[i] = (struct dm_rem_gpu){.uuid = inv->gpus[i].uuid, .lost = inv->gpus[i].lost};
        struct err pe = {0};
        if (!g[i].lost && gpu_process_count(lib, inv->gpus[i].index, &g[i].processes, &pe) < 0) {
            /* unknown is not none: the reset is refused */
            g[i].processes_unknown = true;
            log_warn(COMPONENT, "GPU processes unreadable", "gpu=%s error=\"%s\"", g[i].uuid,
                     err_msg(&pe));
        }
    }
    *ret_n = inv->n_gpus;
    return g;
}

static int answer(struct dm_rem *x, const char *id, const char *why, struct err *e)
{
    struct dm_rem_answer a;
    dm_rem_answer_of(id, why, &a);
    int r = dm_node_patch(
        &x->d, json_pack("{s:{s:{s:s}}}", "metadata", "annotations", a.annotation, a.value), e);
    if (r < 0)
        return err_prefix(e, "answer request %s", id);
    log_info(COMPONENT, a.log_what, "node=%s id=%s why=\"%s\"", x->d.node, id, why ? why : "");
    dm_node_event(&x->d, a.event_type, a.event_reason, a.message);
    return 0;
}

/* The driver's own `nvidia-smi -r -i UUID` for each GPU, its library folder first in its library
 * path; the first failure (or no nvidia-smi) is the answer's reason. */
static void reset_gpus(const struct dm_rem_request *q, const struct dm_rem_tools *t, char *why,
                       size_t n)
{
    if (!t->smi[0])
        return (void)snprintf(why, n, "%s", t->why);
    _cleanup_free_ char *added = NULL;
    _cleanup_free_ const char **env = proc_env_lib_first(t->lib_dir, &added);
    for (size_t i = 0; i < q->n_gpus; i++) {
        log_info(COMPONENT, "resetting GPU", "gpu=%s request=%s smi=%s from=\"%s\"", q->gpus[i],
                 q->id, t->smi, t->from);
        const char *argv[] = {t->smi, "-r", "-i", q->gpus[i], NULL};
        struct err pe = {0};
        if (proc_run(argv, env, &pe) < 0) {
            snprintf(why, n, "GPU %s: nvidia-smi -r failed: %s", q->gpus[i], err_msg(&pe));
            return;
        }
    }
}

static int reload(struct dm_rem *x, const struct dm_rem_request *q, struct err *e)
{
    _cleanup_free_ char *mark = xasprintf("%s %s", q->id, x->pod);
    int r = dm_node_patch(
        &x->d, json_pack("{s:{s:{s:s}}}", "metadata", "annotations", DM_ANN_RELOAD, mark), e);
    if (r < 0)
        return r;
    log_info(COMPONENT, "reloading the driver: evicting this driver pod", "pod=%s request=%s",
             x->pod, q->id);
    _cleanup_free_ char *msg =
        xasprintf("request %s: driver pod %s evicted to reload the driver", q->id, x->pod);
    dm_node_event(&x->d, "Normal", "GPURemediationDriverReload", msg);
    r = kube_evict(x->d.kc, x->d.event_ns, x->pod, NULL, e);
    return r == -ENOENT ? 0 : r;
}

static int round_once(struct dm_rem *x, struct err *e)
{
    int r = dm_node_read(&x->d, e);
    if (r < 0)
        return r;
    const json_t *ann = kobj_path(x->d.node_obj, "metadata.annotations");
    struct dm_rem_input in = {.node = x->d.node, .pod = x->pod};
    dm_rem_input_annotations(ann, &in);
    memcpy(in.allow, x->allow, sizeof(in.allow));
    if (!in.request)
        return 0;
    struct nodestate_driver_facts facts;
    struct dm_finding f;
    if ((r = nodestate_driver_probe(x->d.host_root, x->d.driver_root, x->d.validations_dir, &facts,
                                    e)) < 0)
        return r;
    dm_owner_decide(&facts, NULL, &f);
    in.owner = f.owner;
    in.driver_ready = facts.ctr_ready;
    struct dm_rem_tools tools;
    dm_rem_tools_pick(&facts, f.owner, x->d.driver_root, x->d.host_root, &tools);
    struct gpu_inventory *inv _cleanup_(gpu_inventory_freep) = NULL;
    struct err ge = {0};
    _cleanup_free_ struct dm_rem_gpu *gpus =
        tools.nvml[0] ? read_gpus(tools.nvml, &inv, &in.n_gpus, &ge) : NULL;
    in.gpus = gpus;
    in.gpus_error = gpus ? NULL : tools.nvml[0] ? err_msg(&ge) : tools.why;

    struct dm_rem_decision dec;
    dm_rem_decide(&in, &dec);
    log_debug(COMPONENT, "request", "id=%s do=%s", dec.req.id, dm_rem_do_name(dec.what));
    switch (dec.what) {
    case DM_REM_IDLE:
        if (dec.why[0])
            log_warn(COMPONENT, "remediation request ignored", "node=%s why=\"%s\"", x->d.node,
                     dec.why);
        return 0;
    case DM_REM_ANSWERED:
    case DM_REM_RELOAD_WAIT:
        return 0;
    case DM_REM_FAIL:
        return answer(x, dec.req.id, dec.why, e);
    case DM_REM_RESET: {
        char why[DM_REM_WHY_MAX] = "";
        reset_gpus(&dec.req, &tools, why, sizeof(why));
        dm_step_done(&x->d, rem_hook_names, "executed");
        return answer(x, dec.req.id, why[0] ? why : NULL, e);
    }
    case DM_REM_RELOAD:
        return reload(x, &dec.req, e);
    case DM_REM_RELOAD_DONE:
        if ((r = answer(x, dec.req.id, NULL, e)) < 0)
            return r;
        return dm_node_patch(
            &x->d, json_pack("{s:{s:{s:n}}}", "metadata", "annotations", DM_ANN_RELOAD), e);
    }
    return 0;
}

static int rem_run(struct svc *s, struct err *e)
{
    struct dm_rem *x = svc_state(s);
    int r = kube_client_open(KUBE_CALLER_AGENT, x->d.kubeconfig, NULL, svc_stop(s), &x->d.kc, e);
    if (r < 0)
        return r;
    log_info(COMPONENT, "executing remediation requests", "node=%s actions=%s pod=%s", x->d.node,
             x->actions, x->pod ? x->pod : "");
    for (;;) {
        struct err re = {0};
        if ((r = round_once(x, &re)) < 0) {
            if (x->once) {
                *e = re;
                return r;
            }
            if (r == -ECANCELED)
                return 0;
            log_warn(COMPONENT, "remediation round failed", "node=%s error=\"%s\"", x->d.node,
                     err_msg(&re));
        }
        if (x->once || svc_wait(s, x->poll_ms) == SVC_STOP)
            return 0;
    }
}

const struct svc_component drivermgr_remediate_component = {
    .name = "remediate",
    .summary = "Carry out the operator's GPU reset and driver reload requests on this node",
    .usage = "Usage: gpuop driver-manager remediate [flags]\n\n"
             "Watches this node for the operator's remediation request\n"
             "(remediation.gpuop.dev/request: \"<action> <id> [GPU UUIDs]\") and carries it out:\n"
             "reset-gpu resets the named GPUs with nvidia-smi -r once no process runs on them;\n"
             "reload-driver evicts this driver pod, whose successor's driver manager unloads the\n"
             "driver and whose driver container loads it. Answers on the node with\n"
             "remediation.gpuop.dev/request-done or request-failed (with the reason); a request\n"
             "answered is never carried out again.\n",
    .options = {rem_options},
    .state_size = sizeof(struct dm_rem),
    .defaults = rem_defaults,
    .configure = rem_configure,
    .run = rem_run,
    .cleanup = rem_cleanup,
};
