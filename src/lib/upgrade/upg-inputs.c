/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the shell reads for the upgrade planner (upgrade.h): the driver DaemonSets and their
 * current revisions, and the fields of Nodes and Pods the planner reads (the informers keep
 * those only). Pure.
 */
#include <string.h>

#include "kobj.h"
#include "upgrade.h"

/* The hash of the newest ControllerRevision the DaemonSet owns, or NULL. */
static const char *current_revision(const json_t *revisions, const json_t *ds)
{
    const char *best = NULL;
    long long best_rev = -1;
    size_t i;
    json_t *cr;
    json_array_foreach ((json_t *)revisions, i, cr) {
        if (!kobj_owned_by(cr, "DaemonSet", kobj_uid(ds)))
            continue;
        long long r = json_integer_value(json_object_get(cr, "revision"));
        if (r > best_rev) {
            best_rev = r;
            best = kobj_label(cr, "controller-revision-hash");
        }
    }
    return best;
}

/* The driver version the DaemonSet's driver container runs: its image tag up to the OS suffix
 * ("…/driver:595.91.07-ubuntu22.04" -> "595.91.07"), into buf; false when there is none. */
static bool ds_driver_version(const json_t *ds, char *buf, size_t len)
{
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(ds, "spec.template.spec.containers"), i, c) {
        const char *img = kobj_str(c, "image");
        if (!img)
            continue;
        /* the tag: after the last ':' of the name's last component, before any "@digest" */
        size_t name_len = strcspn(img, "@");
        const char *last = img;
        for (const char *p = img; p < img + name_len; p++)
            if (*p == '/')
                last = p + 1;
        const char *colon = memchr(last, ':', (size_t)(img + name_len - last));
        if (!colon)
            continue;
        size_t n = strcspn(colon + 1, "-@");
        if (n > 0 && n < len) {
            memcpy(buf, colon + 1, n);
            buf[n] = '\0';
            return true;
        }
    }
    return false;
}

struct upg_driver_set *upg_driver_sets(const json_t *owned, const json_t *revisions, const char *ns,
                                       const char *dflt, size_t *ret_n)
{
    size_t n = 0;
    struct upg_driver_set *sets = xcalloc(json_array_size(owned) + 1, sizeof(*sets));
    size_t i;
    const json_t *ds;
    json_array_foreach (owned, i, ds) {
        if (!streq_ptr(kobj_kind(ds), "DaemonSet") || !streq_ptr(kobj_namespace(ds), ns) ||
            !(streq_ptr(kobj_name(ds), UPG_DRIVER_APP) || kobj_label(ds, UPG_LABEL_NVIDIA_DRIVER)))
            continue;
        const char *rev = current_revision(revisions, ds);
        if (!rev)
            continue;
        struct upg_driver_set *s = &sets[n++];
        s->name = kobj_name(ds);
        s->ns = ns;
        s->revision = rev;
        s->version =
            ds_driver_version(ds, s->version_buf, sizeof(s->version_buf)) ? s->version_buf : dflt;
    }
    *ret_n = n;
    return sets;
}

void upg_project_node(const json_t *obj, json_t *p)
{
    /* gpuop's and NVIDIA's upgrade annotations (the planner reads and writes only those) */
    const char *k;
    json_t *v;
    json_object_foreach (kobj_annotations(obj), k, v) {
        if (str_has_prefix(k, "nvidia.com/gpu-driver-upgrade") ||
            str_has_prefix(k, "upgrade.gpuop.dev/"))
            json_object_set(
                kobj_ensure_keys(p, (const char *const[]){"metadata", "annotations", NULL}), k, v);
    }
    static const char *const paths[] = {"spec.unschedulable", "status.nodeInfo.kernelVersion"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
        kobj_path_copy(p, obj, paths[i]);
    /* the GPU resources the kubelet has (capacity) and offers (allocatable): the floor counts
     * the offered ones, a canary's soak the difference (GPUs its device plugin found unhealthy) */
    static const char *const lists[] = {"capacity", "allocatable"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        json_object_foreach (kobj_keys(obj, (const char *const[]){"status", lists[l], NULL}), k,
                             v) {
            if (strncmp(k, "nvidia.com/gpu", 14) == 0 || strncmp(k, "nvidia.com/mig-", 15) == 0)
                json_object_set(
                    kobj_ensure_keys(p, (const char *const[]){"status", lists[l], NULL}), k, v);
        }
    }
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(obj, "status.conditions"), i, c) {
        if (streq_ptr(kobj_str(c, "type"), "Ready"))
            json_object_set_new(
                kobj_ensure_object(p, "status"), "conditions",
                json_pack("[{s:s,s:O}]", "type", "Ready", "status", json_object_get(c, "status")));
    }
}

static json_t *slim_statuses(const json_t *list)
{
    json_t *out = json_array();
    size_t i;
    json_t *cs;
    json_array_foreach ((json_t *)list, i, cs) {
        json_array_append_new(
            out, json_pack("{s:O,s:O}", "ready", json_object_get(cs, "ready") ?: json_false(),
                           "restartCount", json_object_get(cs, "restartCount") ?: json_integer(0)));
    }
    return out;
}

/* Who owns it, when it was made (a validator older than the driver pod validated an earlier
 * driver), where it runs, its GPU requests, emptyDirs, readiness and restarts. */
void upg_project_pod(const json_t *obj, json_t *p)
{
    /* the upgrade, allocation and remediation planners name a pod by namespace and name: a
     * driver and a validator pod a node, ~0.3 KiB less each */
    json_object_del(p, "apiVersion");
    json_object_del(p, "kind");
    json_object_del(json_object_get(p, "metadata"), "uid");
    static const char *const keep[] = {"metadata.creationTimestamp", "status.phase"};
    for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
        kobj_path_copy(p, obj, keep[i]);
    json_t *node = kobj_path(obj, "spec.nodeName");
    if (json_is_string(node))
        json_object_set(p, UPG_PROJECTED_NODE_NAME, node);
    json_t *meta = kobj_ensure_object(p, "metadata");
    json_t *owners = json_array();
    size_t i;
    json_t *o;
    json_array_foreach (kobj_path(obj, "metadata.ownerReferences"), i, o)
        json_array_append_new(owners, json_pack("{s:O,s:O}", "kind", json_object_get(o, "kind"),
                                                "name", json_object_get(o, "name")));
    json_object_set_new(meta, "ownerReferences", owners);
    const char *mirror = kobj_annotation(obj, "kubernetes.io/config.mirror");
    if (mirror)
        json_object_set_new(meta, "annotations",
                            json_pack("{s:s}", "kubernetes.io/config.mirror", mirror));
    json_t *spec = kobj_ensure_object(p, "spec");
    json_t *ctrs = json_array();
    json_array_foreach (kobj_path(obj, "spec.containers"), i, o) {
        json_t *c = json_object();
        kobj_path_copy(c, o, "resources.limits");
        kobj_path_copy(c, o, "resources.requests");
        json_array_append_new(ctrs, c);
    }
    json_object_set_new(spec, "containers", ctrs);
    json_t *vols = json_array();
    json_array_foreach (kobj_path(obj, "spec.volumes"), i, o) {
        if (json_object_get(o, "emptyDir"))
            json_array_append_new(vols, json_pack("{s:{}}", "emptyDir"));
    }
    json_object_set_new(spec, "volumes", vols);
    json_t *st = kobj_ensure_object(p, "status");
    json_array_foreach (kobj_path(obj, "status.conditions"), i, o) {
        if (streq_ptr(kobj_str(o, "type"), "Ready"))
            json_object_set_new(
                st, "conditions",
                json_pack("[{s:s,s:O}]", "type", "Ready", "status", json_object_get(o, "status")));
    }
    json_object_set_new(st, "containerStatuses",
                        slim_statuses(kobj_path(obj, "status.containerStatuses")));
    json_object_set_new(st, "initContainerStatuses",
                        slim_statuses(kobj_path(obj, "status.initContainerStatuses")));
}

const char *upg_pod_node(const json_t *pod)
{
    return kobj_path_str(pod, "spec.nodeName")
               ?: json_string_value(json_object_get(pod, UPG_PROJECTED_NODE_NAME));
}
