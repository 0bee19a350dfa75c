/* SPDX-License-Identifier: Apache-2.0 */
/* drivermgr's pure core: the owner rule, the operand pause it uses, whether a drain may take a
 * pod. */
#include <stdarg.h>
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
