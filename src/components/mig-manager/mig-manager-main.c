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
#include "mig-manager.h"
#include "migparted.h"
#include "nvcdi.h"
#include "svc.h"

#define COMPONENT "mig-manager"

struct migmgr {
    const char *node, *kubeconfig, *config_file, *event_ns, *kill_after;
    const char *host_root, *cdi_spec;
    uint64_t interval_ms, operand_wait_ms, eviction_timeout_ms;

    struct svc *svc;
    struct kube_client *kc;
    struct gpu_lib *lib;
    struct nvcdi_gen *cdi;
    json_t *node_obj;
    bool blocked_reported;
};

static const char *const steps[] = {"pending", "pause",  "operands", "evict",
                                    "apply",   "finish", NULL};

static int check_step(const void *dst, const char *source, struct err *e)
{
    const char *v = *(const char *const *)dst;
    for (size_t i = 0; v && steps[i]; i++)
        if (strcmp(v, steps[i]) == 0)
            return 0;
    return err_set(e, -EINVAL, "%s: not a step (pending, pause, operands, evict, apply, finish)",
                   source);
}

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
     .kind = SVC_STRING,
     .off = O(kill_after),
     .check = check_step},
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
    nvcdi_gen_free(m->cdi);
    gpu_lib_free(m->lib);
}

static void step_done(struct migmgr *m, const char *step)
{
    log_debug(COMPONENT, "step done", "step=%s", step);
    if (m->kill_after && strcmp(m->kill_after, step) == 0) {
        log_info(COMPONENT, "killed after step (test hook)", "step=%s", step);
        kill(getpid(), SIGKILL);
    }
}

/* ---- the Node ----------------------------------------------------------------------------- */

static int node_read(struct migmgr *m, struct err *e)
{
    json_t *n = NULL;
    int r = kube_get(m->kc, &KUBE_NODES, NULL, m->node, &n, e);
    if (r < 0)
        return err_prefix(e, "read node %s", m->node);
    json_decref(m->node_obj);
    m->node_obj = n;
    return 0;
}

/* A merge patch of metadata: labels and annotations (objects or NULL; a null value removes). */
static int node_patch(struct migmgr *m, json_t *labels, json_t *annotations, struct err *e)
{
    json_t *meta = json_object();
    if (labels)
        json_object_set_new(meta, "labels", labels);
    if (annotations)
        json_object_set_new(meta, "annotations", annotations);
    json_t *patch = json_pack("{s:o}", "metadata", meta);
    json_t *out = NULL;
    struct kube_patch_opts o = {.type = KUBE_PATCH_MERGE};
    int r = kube_patch(m->kc, &KUBE_NODES, NULL, m->node, &o, patch, &out, e);
    json_decref(patch);
    if (r < 0)
        return err_prefix(e, "patch node %s", m->node);
    json_decref(m->node_obj);
    m->node_obj = out;
    return 0;
}

static void event(struct migmgr *m, const char *type, const char *reason, const char *msg)
{
    json_t *inv = json_pack("{s:s,s:s,s:{s:s,s:s?}}", "kind", "Node", "apiVersion", "v1",
                            "metadata", "name", m->node, "uid", kobj_uid(m->node_obj));
    const char *ns = m->event_ns ? m->event_ns : kube_client_namespace(m->kc);
    struct kube_event ev = {.ns = ns,
                            .involved = inv,
                            .type = type,
                            .reason = reason,
                            .message = msg,
                            .component = "gpuop-mig-manager",
                            .host = m->node};
    struct err e = {0};
    if (kube_event_create(m->kc, &ev, &e) < 0)
        log_warn(COMPONENT, "event not recorded", "reason=%s error=\"%s\"", reason, err_msg(&e));
    json_decref(inv);
}

/* The operands' labels back (those this agent paused). */
static json_t *restore_labels(struct migmgr *m, struct err *e)
{
    json_t *p = NULL;
    if (nodeops_labels_patch(kobj_labels(m->node_obj), &mm_pause, true, &p, e) < 0)
        return NULL;
    return p;
}

/* ---- the config and the GPUs -------------------------------------------------------------- */

struct view {
    struct mp_spec *spec;
    struct mp_node *gpus;
    struct mp_plan *plan;
    struct err why;       /* config_error's reason */
    struct err reset_why; /* reset_pending's: the GPUs waiting for a reset */
    bool config_error;
    bool matches;
    bool reset_pending;
};

static void view_clear(struct view *v)
{
    mp_spec_free(v->spec);
    mp_node_free(v->gpus);
    mp_plan_free(v->plan);
}

/* Reads the config file and the GPUs and plans want. A problem with the config (the file, the
 * name, a layout the GPUs cannot hold) is config_error with the reason; one reading the GPUs is
 * an error. */
static int view_read(struct migmgr *m, const char *want, struct view *v, struct err *e)
{
    int r = mp_node_read(m->lib, &v->gpus, e);
    if (r < 0)
        return r;
    if (!want || !want[0])
        return 0;
    if (mp_spec_load(m->config_file, &v->spec, &v->why) < 0) {
        v->config_error = true;
        return 0;
    }
    const struct mp_config *c = mp_spec_find(v->spec, want);
    if (!c) {
        err_set(&v->why, -ENOENT, "%s: no config named \"%s\" (%s=%s)", m->config_file, want,
                MM_LABEL_CONFIG, want);
        v->config_error = true;
        return 0;
    }
    if (mp_plan_make(c, v->gpus->gpus, v->gpus->n_gpus, &v->plan, &v->why) < 0) {
        err_prefix(&v->why, "%s", m->config_file);
        v->config_error = true;
        return 0;
    }
    struct err ignored = {0};
    v->matches = mp_plan_matches(v->plan, v->gpus->gpus, v->gpus->n_gpus, false, &ignored) == 0;
    v->reset_pending =
        mp_plan_reset_pending(v->plan, v->gpus->gpus, v->gpus->n_gpus, &v->reset_why) > 0;
    return 0;
}

/* ---- the actions -------------------------------------------------------------------------- */

/* Ends a change or a refusal: operands restored, the state and the annotations in one patch. */
static int conclude(struct migmgr *m, const char *state, const char *want, const char *reason,
                    struct err *e)
{
    json_t *labels = restore_labels(m, e);
    if (!labels)
        return -EINVAL;
    if (state)
        json_object_set_new(labels, MM_LABEL_STATE, json_string(state));
    json_t *ann = json_pack("{s:n}", MM_ANN_PROGRESS);
    json_object_set_new(ann, MM_ANN_REASON, reason ? json_string(reason) : json_null());
    bool ok = streq_ptr(state, "success");
    json_object_set_new(ann, MM_ANN_FAILED, ok || !want ? json_null() : json_string(want));
    if (ok)
        json_object_set_new(ann, MM_ANN_APPLIED, json_string(want));
    return node_patch(m, labels, ann, e);
}

static int refuse(struct migmgr *m, const char *want, const struct err *why, struct err *e)
{
    log_warn(COMPONENT, "config refused; the GPUs keep their layout", "config=%s reason=\"%s\"",
             want, err_msg(why));
    int r = conclude(m, "failed", want, err_msg(why), e);
    if (r < 0)
        return r;
    _cleanup_free_ char *msg = xasprintf("%s=%s refused, the GPUs keep their layout: %s",
                                         MM_LABEL_CONFIG, want, err_msg(why));
    event(m, "Warning", "MIGConfigFailed", msg);
    return 0;
}

/* The node's CDI spec for the new layout, before the operands come back (its MIG devices are
 * what the device plugin will hand out), where the toolkit keeps one. A failure is logged: the
 * toolkit writes it again within its interval. */
static void cdi_regenerate(struct migmgr *m)
{
    _cleanup_free_ char *path = nvcdi_host_path(m->host_root, "/", m->cdi_spec);
    if (access(path, F_OK) < 0) {
        log_debug(COMPONENT, "no CDI spec to regenerate", "path=%s", path);
        return;
    }
    struct err e = {0};
    _cleanup_free_ char *spec = NULL, *old = NULL;
    size_t old_len = 0;
    int r = nvcdi_gen_spec(m->cdi, &spec, NULL, 0, &e);
    if (r == 0 && file_read_all(path, NVCDI_SPEC_MAX, &old, &old_len, &e) == 0 &&
        old_len == strlen(spec) && memcmp(old, spec, old_len) == 0) {
        log_info(COMPONENT, "CDI spec already current", "path=%s", m->cdi_spec);
        return;
    }
    err_clear(&e);
    if (r == 0)
        r = file_write_atomic(path, spec, strlen(spec), 0644, &e);
    if (r < 0) {
        log_warn(COMPONENT, "CDI spec not regenerated; the toolkit will", "path=%s error=\"%s\"",
                 m->cdi_spec, err_msg(&e));
        return;
    }
    log_info(COMPONENT, "CDI spec regenerated", "path=%s driver_root=%s", m->cdi_spec,
             nvcdi_gen_driver_root(m->cdi));
}

static int finish(struct migmgr *m, const char *want, const char *evicted, struct err *e)
{
    const char *before = kobj_annotation(m->node_obj, MM_ANN_APPLIED);
    _cleanup_free_ char *from = xstrdup(before ? before : "(none)");
    bool changed = kobj_annotation(m->node_obj, MM_ANN_PROGRESS) != NULL;
    if (changed)
        cdi_regenerate(m);
    int r = conclude(m, "success", want, NULL, e);
    if (r < 0)
        return r;
    step_done(m, "finish");
    log_info(COMPONENT, "MIG config applied", "config=%s from=%s", want, from);
    if (changed) {
        _cleanup_free_ char *msg = xasprintf("MIG layout changed from %s to %s; pods evicted: %s",
                                             from, want, evicted && evicted[0] ? evicted : "none");
        event(m, "Normal", "MIGConfigApplied", msg);
    }
    return 0;
}

/* A MIG mode change the driver could only finish with a GPU reset: state rebooting with the
 * reason, the operands restored (the GPUs serve their current layout until the reset), the change
 * kept in progress so that after the reboot it is finished. */
static int await_reset(struct migmgr *m, const char *want, const struct err *why, struct err *e)
{
    bool first = !streq_ptr(kobj_label(m->node_obj, MM_LABEL_STATE), "rebooting");
    json_t *labels = restore_labels(m, e);
    if (!labels)
        return -EINVAL;
    json_object_set_new(labels, MM_LABEL_STATE, json_string("rebooting"));
    json_t *ann = json_pack("{s:s,s:s,s:n}", MM_ANN_PROGRESS, want, MM_ANN_REASON, err_msg(why),
                            MM_ANN_FAILED);
    int r = node_patch(m, labels, ann, e);
    if (r < 0)
        return r;
    log_warn(COMPONENT, "MIG mode change waits for a GPU reset; state rebooting",
             "config=%s reason=\"%s\"", want, err_msg(why));
    if (first) {
        _cleanup_free_ char *msg =
            xasprintf("%s=%s needs a reboot: %s; the GPUs keep their current layout until then",
                      MM_LABEL_CONFIG, want, err_msg(why));
        event(m, "Warning", "MIGRebootRequired", msg);
    }
    return 0;
}

static int evict_select(const json_t *pod, void *ud, struct err *e)
{
    (void)e;
    struct migmgr *m = ud;
    return nodeops_pod_classify(pod, kobj_labels(m->node_obj)) == NODEOPS_POD_GPU;
}

static void evict_blocked(void *ud, const char *why)
{
    struct migmgr *m = ud;
    _cleanup_free_ char *reason = xasprintf("waiting for an eviction: %s", why);
    if (streq_ptr(kobj_annotation(m->node_obj, MM_ANN_REASON), reason))
        return;
    struct err e = {0};
    if (node_patch(m, NULL, json_pack("{s:s}", MM_ANN_REASON, reason), &e) < 0)
        log_warn(COMPONENT, "reason not recorded", "error=\"%s\"", err_msg(&e));
    if (!m->blocked_reported) {
        event(m, "Warning", "MIGEvictionBlocked", reason);
        m->blocked_reported = true;
    }
}

static int change(struct migmgr *m, const char *want, struct view *v, struct err *e)
{
    int r;
    if (!streq_ptr(kobj_label(m->node_obj, MM_LABEL_STATE), "pending") ||
        !streq_ptr(kobj_annotation(m->node_obj, MM_ANN_PROGRESS), want)) {
        log_info(COMPONENT, "MIG config change", "config=%s", want);
        if ((r = node_patch(
                 m, json_pack("{s:s}", MM_LABEL_STATE, "pending"),
                 json_pack("{s:s,s:n,s:n}", MM_ANN_PROGRESS, want, MM_ANN_REASON, MM_ANN_FAILED),
                 e)) < 0)
            return r;
    }
    step_done(m, "pending");
    json_t *pause = NULL;
    if ((r = nodeops_labels_patch(kobj_labels(m->node_obj), &mm_pause, false, &pause, e)) < 0)
        return r;
    if (json_object_size(pause) > 0) {
        _cleanup_free_ char *text = json_dumps(pause, JSON_COMPACT | JSON_SORT_KEYS);
        log_info(COMPONENT, "operands paused", "labels=%s", text ? text : "?");
        if ((r = node_patch(m, pause, NULL, e)) < 0)
            return r;
    } else {
        json_decref(pause);
    }
    step_done(m, "pause");
    if ((r = nodeops_wait_operands(m->svc, m->kc, m->node, kobj_labels(m->node_obj),
                                   m->operand_wait_ms, COMPONENT, e)) < 0)
        return r;
    step_done(m, "operands");
    _cleanup_free_ char *evicted = NULL;
    if (streq_ptr(kobj_annotation(m->node_obj, MM_ANN_FORCE), "true")) {
        log_warn(COMPONENT, "forced: the GPU pods are not evicted first", "annotation=%s",
                 MM_ANN_FORCE);
    } else {
        m->blocked_reported = false;
        struct nodeops_evict o = {.kc = m->kc,
                                  .svc = m->svc,
                                  .node = m->node,
                                  .what = "GPU pod eviction",
                                  .component = COMPONENT,
                                  .timeout_ms = m->eviction_timeout_ms,
                                  .select = evict_select,
                                  .blocked = evict_blocked,
                                  .ud = m};
        if ((r = nodeops_evict_pods(&o, &evicted, e)) < 0)
            return r;
        if (kobj_annotation(m->node_obj, MM_ANN_REASON) &&
            (r = node_patch(m, NULL, json_pack("{s:n}", MM_ANN_REASON), e)) < 0)
            return r;
    }
    step_done(m, "evict");
    /* The layout a failure goes back to: as the GPUs are now, just before the change. */
    mp_node_free(v->gpus);
    v->gpus = NULL;
    if ((r = mp_node_read(m->lib, &v->gpus, e)) < 0)
        return r;
    struct mp_apply_result res = {0};
    struct err why = {0};
    /* Every GPU's MIG mode first: a mode the driver can only set with a GPU reset stops the
     * change there, before any instance is touched. */
    r = mp_apply(m->lib, v->gpus, v->plan, MP_APPLY_MODES_FIRST, &res, &why);
    if (r == 0 && res.reset_required) {
        _cleanup_(mp_node_freep) struct mp_node *now = NULL;
        if ((r = mp_node_read(m->lib, &now, e)) < 0)
            return r;
        struct err reset_why = {0};
        if (mp_plan_reset_pending(v->plan, now->gpus, now->n_gpus, &reset_why) > 0)
            return await_reset(m, want, &reset_why, e);
        /* reset in between: the next poll finds the modes set and finishes the change */
        return 0;
    }
    if (r < 0) {
        log_error(COMPONENT, "apply failed", "config=%s rolled_back=%s error=\"%s\"", want,
                  res.rolled_back ? "true" : "false", err_msg(&why));
        if ((r = conclude(m, "failed", want, err_msg(&why), e)) < 0)
            return r;
        _cleanup_free_ char *msg = xasprintf("%s=%s failed, %s: %s", MM_LABEL_CONFIG, want,
                                             res.rollback_failed ? "the rollback failed too"
                                                                 : "the previous layout is back",
                                             err_msg(&why));
        event(m, "Warning", "MIGConfigFailed", msg);
        return 0;
    }
    step_done(m, "apply");
    return finish(m, want, evicted, e);
}

static int reconcile(struct migmgr *m, struct err *e)
{
    int r = node_read(m, e);
    if (r < 0)
        return r;
    const char *want = kobj_label(m->node_obj, MM_LABEL_CONFIG);
    _cleanup_free_ char *want_copy = want ? xstrdup(want) : NULL;
    struct view v = {0};
    if ((r = view_read(m, want_copy, &v, e)) < 0) {
        view_clear(&v);
        return r;
    }
    struct mm_input in = {.want = want_copy,
                          .state = kobj_label(m->node_obj, MM_LABEL_STATE),
                          .progress = kobj_annotation(m->node_obj, MM_ANN_PROGRESS),
                          .failed = kobj_annotation(m->node_obj, MM_ANN_FAILED),
                          .paused = nodeops_labels_paused(kobj_labels(m->node_obj), &mm_pause),
                          .config_error = v.config_error,
                          .matches = v.matches,
                          .reset_pending = v.reset_pending};
    enum mm_action a = mm_decide(&in);
    log_debug(COMPONENT, "decided", "config=%s action=%s", want_copy ? want_copy : "",
              mm_action_name(a));
    switch (a) {
    case MM_NOTHING:
        break;
    case MM_RESTORE:
        log_info(COMPONENT, "no config wanted: restoring what a change left", "node=%s", m->node);
        r = conclude(m, NULL, NULL, NULL, e);
        break;
    case MM_REFUSE:
        r = refuse(m, want_copy, &v.why, e);
        break;
    case MM_FINISH:
        r = finish(m, want_copy, NULL, e);
        break;
    case MM_CHANGE:
        r = change(m, want_copy, &v, e);
        break;
    case MM_AWAIT_RESET:
        r = await_reset(m, want_copy, &v.reset_why, e);
        break;
    }
    view_clear(&v);
    return r;
}

static int mm_run(struct svc *s, struct err *e)
{
    struct migmgr *m = svc_state(s);
    m->svc = s;
    struct kube_options ko = {.kubeconfig = m->kubeconfig, .stop = svc_stop(s)};
    int r = kube_client_new(&ko, &m->kc, e);
    if (r < 0)
        return r;
    if ((r = gpu_lib_open(NULL, &m->lib, e)) < 0)
        return r;
    struct nvcdi_gen_options go = {
        .host_root = m->host_root, .lib = m->lib, .spec_path = m->cdi_spec};
    m->cdi = nvcdi_gen_new(&go);
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
