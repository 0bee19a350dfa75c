/* SPDX-License-Identifier: Apache-2.0 */
/* drivermgr's pure core: the owner rule, the operand pause it uses, whether a drain may take a
 * pod, the run's plan and what it writes on the node. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "driver-manager.h"
#include "kobj.h"

/* ---- the owner ---------------------------------------------------------------------------- */

/* The source is a one-line reason for people: one too long for the annotation ends in "...". */
static void source_set(struct dm_finding *d, const char *fmt, ...) GPUOP_PRINTF(2, 3);
static void source_set(struct dm_finding *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(d->source, sizeof(d->source), fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(d->source))
        memcpy(d->source + sizeof(d->source) - 4, "...", 4);
}

void dm_owner_decide(const struct nodestate_driver_facts *f, const char *driver_version,
                     struct dm_finding *ret)
{
    struct dm_finding d = {0};
    const char *mv = f->module_version[0] ? f->module_version : "(version unknown)";
    if (f->module[NODESTATE_MOD_NVIDIA]) {
        bool from_root = f->root_lib[0] && (!f->module_version[0] ||
                                            strcmp(f->root_lib_version, f->module_version) == 0);
        snprintf(d.version, sizeof(d.version), "%s", f->module_version);
        if (from_root) {
            d.owner = d.found = NODESTATE_OWNER_CONTAINER;
            source_set(&d,
                       "module nvidia %s loaded; the driver root holds %s: loaded by the driver "
                       "container, reloaded by it",
                       mv, f->root_lib);
        } else {
            d.owner = d.found = NODESTATE_OWNER_HOST;
            source_set(&d,
                       "module nvidia %s loaded, not from the driver root (no libnvidia-ml.so.%s "
                       "there)%s%s",
                       mv, f->module_version[0] ? f->module_version : "*",
                       f->host_smi[0] ? "; host nvidia-smi " : "", f->host_smi);
        }
    } else if (f->host_smi[0] && f->host_lib[0]) {
        d.owner = d.found = NODESTATE_OWNER_HOST;
        snprintf(d.version, sizeof(d.version), "%s", f->host_lib_version);
        source_set(&d, "driver installed on the host, not loaded: %s and %s", f->host_smi,
                   f->host_lib);
    } else {
        d.found = NODESTATE_OWNER_NONE;
        d.owner = NODESTATE_OWNER_CONTAINER;
        snprintf(d.version, sizeof(d.version), "%s", driver_version ? driver_version : "");
        const char *left = f->host_lib[0]   ? "; only libraries left behind on the host: "
                           : f->host_smi[0] ? "; only nvidia-smi on the host (no libnvidia-ml): "
                                            : "";
        source_set(&d, "no driver loaded%s%s%s; the driver container installs it", left,
                   f->host_lib[0] ? f->host_lib : f->host_smi,
                   f->root_lib[0] ? "; a stale driver root" : "");
    }
    /* someone always owns the driver from now on; what was found agrees unless nothing was */
    assert(d.owner != NODESTATE_OWNER_NONE);
    assert(d.found == d.owner || d.found == NODESTATE_OWNER_NONE);
    *ret = d;
}

/* ---- pause and restore -------------------------------------------------------------------- */

const struct nodeops_pause dm_operand_pause = {.word = DM_PAUSED, .labels = NULL};

/* ---- pods --------------------------------------------------------------------------------- */

void dm_mode_decide(const struct dm_config *c, const json_t *node, struct dm_mode *ret)
{
    const char *state = kobj_label(node, DM_LABEL_UPGRADE_STATE);
    const char *enabled = kobj_annotation(node, DM_ANN_UPGRADE_ENABLED);
    struct dm_mode m = {0};
    m.operator_driven = (state && state[0]) || streq_ptr(enabled, "true");
    m.evict_gpu_pods = c->gpu_pod_eviction && !m.operator_driven;
    m.drain = c->auto_drain && !m.operator_driven;
    *ret = m;
}

int dm_drain_allowed(const struct dm_config *c, const json_t *pod, struct err *e)
{
    const char *name = kobj_name(pod) ? kobj_name(pod) : "?";
    const char *ns = kobj_namespace(pod) ? kobj_namespace(pod) : "?";
    if (!nodeops_pod_controller(pod) && !c->drain_force)
        return err_set(e, -EPERM,
                       "pod %s/%s has no controller (ReplicaSet, Job, StatefulSet, ...): "
                       "DRAIN_USE_FORCE=true drains it",
                       ns, name);
    size_t i;
    json_t *vol;
    json_array_foreach (kobj_path(pod, "spec.volumes"), i, vol) {
        if (json_object_get(vol, "emptyDir") && !c->drain_delete_emptydir)
            return err_set(e, -EPERM,
                           "pod %s/%s has emptyDir volume %s (its data would go): "
                           "DRAIN_DELETE_EMPTYDIR_DATA=true drains it",
                           ns, name, kobj_str(vol, "name") ? kobj_str(vol, "name") : "?");
    }
    return 0;
}

int dm_evict_select(const struct dm_config *c, const json_t *pod, const json_t *node_labels,
                    bool drain, struct err *e)
{
    enum nodeops_pod_kind k = nodeops_pod_classify(pod, node_labels);
    bool target = k == NODEOPS_POD_GPU || (drain && k == NODEOPS_POD_OTHER);
    if (!target)
        return 0;
    if (drain && !kobj_deletion_timestamp(pod)) {
        int r = dm_drain_allowed(c, pod, e);
        if (r < 0)
            return r;
    }
    return 1;
}

/* ---- the run as a plan -------------------------------------------------------------------- */

const char *dm_step_name(enum dm_step s)
{
    static const char *const n[] = {"mark",    "label-host",   "pause",    "wait-operands", "evict",
                                    "cordon",  "record-drain", "drain",    "unload",        "clean",
                                    "restore", "report",       "host-wait"};
    static_assert(ARRAY_SIZE(n) == DM_STEP_COUNT, "a name per step");
    return (unsigned)s < ARRAY_SIZE(n) ? n[s] : "?";
}

const char *const dm_hook_names[] = {"owner",  "pause", "operands", "evict",  "drain",
                                     "unload", "clean", "restore",  "report", NULL};

static void add(struct dm_plan *p, enum dm_step s, const char *hook)
{
    assert(p->n < DM_PLAN_MAX);
    /* the steps run in enum order (a mark may sit anywhere) */
    assert(s == DM_STEP_MARK || p->n == 0 || p->steps[p->n - 1].step <= s);
    p->steps[p->n].step = s;
    p->steps[p->n].hook = hook;
    p->n++;
}

/* The reload: operands paused and gone, the GPU pods evicted, a drain, the modules out. */
static void plan_reload(const struct dm_mode *mode, struct dm_plan *p)
{
    add(p, DM_STEP_PAUSE, "pause");
    add(p, DM_STEP_WAIT_OPERANDS, "operands");
    add(p, mode->evict_gpu_pods ? DM_STEP_EVICT : DM_STEP_MARK, "evict");
    if (mode->drain) {
        add(p, DM_STEP_CORDON, NULL);
        add(p, DM_STEP_RECORD_DRAIN, NULL);
        add(p, DM_STEP_DRAIN, "drain");
    } else {
        add(p, DM_STEP_MARK, "drain");
    }
    add(p, DM_STEP_UNLOAD, "unload");
}

void dm_plan(const struct dm_finding *f, const struct nodestate_driver_facts *facts,
             const struct dm_mode *mode, struct dm_plan *ret)
{
    struct dm_plan p = {0};
    if (f->owner == NODESTATE_OWNER_HOST) {
        add(&p, DM_STEP_LABEL_HOST, NULL);
        add(&p, DM_STEP_REPORT, "report");
        add(&p, DM_STEP_HOST_WAIT, NULL);
        *ret = p;
        return;
    }
    enum nodestate_module loaded[NODESTATE_MOD_COUNT];
    p.reload = dm_unload_order(facts, loaded) > 0;
    if (p.reload)
        plan_reload(mode, &p);
    add(&p, DM_STEP_CLEAN, "clean");
    add(&p, DM_STEP_RESTORE, "restore");
    add(&p, DM_STEP_REPORT, "report");
    *ret = p;
}

size_t dm_unload_order(const struct nodestate_driver_facts *f,
                       enum nodestate_module ret[NODESTATE_MOD_COUNT])
{
    size_t n = 0;
    /* nodestate's module order is the unload order: users of nvidia first */
    for (int m = 0; m < NODESTATE_MOD_COUNT; m++)
        if (f->module[m])
            ret[n++] = (enum nodestate_module)m;
    assert(n <= NODESTATE_MOD_COUNT);
    return n;
}

bool dm_root_stale(const struct nodestate_driver_facts *f)
{
    return f->root_mountpoint && !f->module[NODESTATE_MOD_NVIDIA];
}

/* ---- what is written on the node ---------------------------------------------------------- */

int dm_restore_patch(const json_t *node, bool pre_installed, json_t **ret_labels,
                     bool *ret_uncordon, struct err *e)
{
    json_t *p = NULL;
    int r = nodeops_labels_patch(kobj_labels(node), &dm_operand_pause, true, &p, e);
    if (r < 0)
        return r;
    if (pre_installed)
        json_object_set_new(p, DM_LABEL_DRIVER, json_string(DM_PRE_INSTALLED));
    *ret_labels = p;
    *ret_uncordon = streq_ptr(kobj_annotation(node, DM_ANN_CORDONED), "true");
    return 0;
}

void dm_owner_event(const struct dm_finding *f, const char **ret_reason, char *msg, size_t n)
{
    static const char *const reasons[] = {[NODESTATE_OWNER_NONE] = "DriverOwnerNone",
                                          [NODESTATE_OWNER_HOST] = "DriverOwnerHost",
                                          [NODESTATE_OWNER_CONTAINER] = "DriverOwnerContainer"};
    assert((unsigned)f->owner < ARRAY_SIZE(reasons));
    *ret_reason = reasons[f->owner];
    int w = snprintf(msg, n, "driver owner: %s%s%s (%s)", nodestate_owner_name(f->owner),
                     f->version[0] ? " " : "", f->version, f->source);
    if (w >= 0 && (size_t)w >= n && n > 4)
        memcpy(msg + n - 4, "...", 4);
}

void dm_drain_record(const struct dm_finding *f, const char *driver_version,
                     struct nodestate_drain *ret)
{
    struct nodestate_drain dr = {0};
    const char *dv = driver_version ? driver_version : "";
    snprintf(dr.reason, sizeof(dr.reason),
             "driver reload: the containerized driver%s%s replaces the loaded nvidia %s",
             dv[0] ? " " : "", dv, f->version[0] ? f->version : "(version unknown)");
    snprintf(dr.by, sizeof(dr.by), "driver-manager");
    *ret = dr;
}
