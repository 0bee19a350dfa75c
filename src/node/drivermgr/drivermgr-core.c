/* SPDX-License-Identifier: Apache-2.0 */
/* drivermgr's pure core: the owner rule, the pause and restore of the operand labels, the pods
 * that go before a reload. */
#include <stdarg.h>
#include <string.h>

#include "drivermgr.h"
#include "kobj.h"

#define LABEL_VALUE_MAX 63
#define PAUSED_SUFFIX   "_" DM_PAUSED

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

void dm_owner_decide(const struct ns_driver_facts *f, const char *driver_version,
                     struct dm_finding *ret)
{
    struct dm_finding d = {0};
    const char *mv = f->module_version[0] ? f->module_version : "(version unknown)";
    if (f->module[NS_MOD_NVIDIA]) {
        bool from_root = f->root_lib[0] && (!f->module_version[0] ||
                                            strcmp(f->root_lib_version, f->module_version) == 0);
        snprintf(d.version, sizeof(d.version), "%s", f->module_version);
        if (from_root) {
            d.owner = d.found = NS_OWNER_CONTAINER;
            source_set(&d,
                       "module nvidia %s loaded; the driver root holds %s: loaded by the driver "
                       "container, reloaded by it",
                       mv, f->root_lib);
        } else {
            d.owner = d.found = NS_OWNER_HOST;
            source_set(&d,
                       "module nvidia %s loaded, not from the driver root (no libnvidia-ml.so.%s "
                       "there)%s%s",
                       mv, f->module_version[0] ? f->module_version : "*",
                       f->host_smi[0] ? "; host nvidia-smi " : "", f->host_smi);
        }
    } else if (f->host_smi[0] && f->host_lib[0]) {
        d.owner = d.found = NS_OWNER_HOST;
        snprintf(d.version, sizeof(d.version), "%s", f->host_lib_version);
        source_set(&d, "driver installed on the host, not loaded: %s and %s", f->host_smi,
                   f->host_lib);
    } else {
        d.found = NS_OWNER_NONE;
        d.owner = NS_OWNER_CONTAINER;
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

bool dm_is_operand_label(const char *key)
{
    return key && str_has_prefix(key, DM_DEPLOY_PREFIX) && strcmp(key, DM_LABEL_DRIVER) != 0 &&
           strcmp(key, DM_LABEL_OPERANDS) != 0 && key[sizeof(DM_DEPLOY_PREFIX) - 1] != '\0';
}

static bool is_paused(const char *v)
{
    return strcmp(v, DM_PAUSED) == 0 || str_has_suffix(v, PAUSED_SUFFIX);
}

int dm_label_pause(const char *value, char *buf, size_t n)
{
    const char *v = value ? value : "";
    if (strcmp(v, "false") == 0 || is_paused(v))
        return 0;
    int len = (v[0] == '\0' || strcmp(v, "true") == 0) ? snprintf(buf, n, "%s", DM_PAUSED)
                                                       : snprintf(buf, n, "%s%s", v, PAUSED_SUFFIX);
    if (len < 0 || (size_t)len >= n || len > LABEL_VALUE_MAX)
        return -E2BIG;
    return 1;
}

int dm_label_restore(const char *value, char *buf, size_t n)
{
    const char *v = value ? value : "";
    size_t len = strlen(v), sl = strlen(PAUSED_SUFFIX);
    int w;
    if (strcmp(v, DM_PAUSED) == 0)
        w = snprintf(buf, n, "true");
    else if (len > sl && str_has_suffix(v, PAUSED_SUFFIX))
        w = snprintf(buf, n, "%.*s", (int)(len - sl), v);
    else
        return 0;
    return w < 0 || (size_t)w >= n ? -E2BIG : 1;
}

int dm_labels_patch(const json_t *labels, bool restore, json_t **ret, struct err *e)
{
    json_t *patch = json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)labels, k, v) {
        if (!dm_is_operand_label(k) || !json_is_string(v))
            continue;
        char buf[LABEL_VALUE_MAX + 1 + sizeof(PAUSED_SUFFIX)];
        int r = restore ? dm_label_restore(json_string_value(v), buf, sizeof(buf))
                        : dm_label_pause(json_string_value(v), buf, sizeof(buf));
        if (r < 0) {
            json_decref(patch);
            return err_set(e, r, "label %s=%s: \"%s\" would not be a label value", k,
                           json_string_value(v), json_string_value(v));
        }
        if (r > 0)
            json_object_set_new(patch, k, json_string(buf));
    }
    *ret = patch;
    return 0;
}

bool dm_labels_paused(const json_t *labels)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)labels, k, v)
        if (dm_is_operand_label(k) && json_is_string(v) && is_paused(json_string_value(v)))
            return true;
    return false;
}

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

static bool resource_is_gpu(const char *name)
{
    return str_has_prefix(name, "nvidia.com/gpu") || str_has_prefix(name, "nvidia.com/mig-");
}

static bool container_requests_gpu(const json_t *c)
{
    static const char *const lists[] = {"resources.limits", "resources.requests"};
    for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
        const char *k;
        json_t *v;
        json_object_foreach (kobj_path(c, lists[i]), k, v)
            if (resource_is_gpu(k))
                return true;
    }
    return false;
}

static bool pod_requests_gpu(const json_t *pod)
{
    static const char *const kinds[] = {"spec.containers", "spec.initContainers"};
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
        size_t j;
        json_t *c;
        json_array_foreach (kobj_path(pod, kinds[i]), j, c)
            if (container_requests_gpu(c))
                return true;
    }
    return false;
}

static const json_t *controller_ref(const json_t *pod)
{
    size_t i;
    json_t *o;
    json_array_foreach (kobj_path(pod, "metadata.ownerReferences"), i, o)
        if (json_is_true(json_object_get(o, "controller")))
            return o;
    return NULL;
}

enum dm_pod_kind dm_pod_classify(const json_t *pod, const json_t *node_labels)
{
    const char *phase = kobj_path_str(pod, "status.phase");
    if (streq_ptr(phase, "Succeeded") || streq_ptr(phase, "Failed"))
        return DM_POD_DONE;
    const char *k;
    json_t *v;
    json_object_foreach (kobj_path(pod, "spec.nodeSelector"), k, v) {
        if (!dm_is_operand_label(k))
            continue;
        const char *now = kobj_str(node_labels, k);
        if (!now || !streq_ptr(now, json_string_value(v)))
            return DM_POD_OPERAND; /* the node no longer matches: its DaemonSet takes it away */
    }
    if (pod_requests_gpu(pod))
        return DM_POD_GPU;
    if (kobj_annotation(pod, "kubernetes.io/config.mirror"))
        return DM_POD_MIRROR;
    const json_t *ctl = controller_ref(pod);
    if (ctl && streq_ptr(kobj_str(ctl, "kind"), "DaemonSet"))
        return DM_POD_DAEMONSET;
    return DM_POD_OTHER;
}

int dm_drain_allowed(const struct dm_config *c, const json_t *pod, struct err *e)
{
    const char *name = kobj_name(pod) ? kobj_name(pod) : "?";
    const char *ns = kobj_namespace(pod) ? kobj_namespace(pod) : "?";
    if (!controller_ref(pod) && !c->drain_force)
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
