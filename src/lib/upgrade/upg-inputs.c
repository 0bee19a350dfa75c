/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the shell reads for the upgrade planner (upgrade.h): the driver DaemonSets and their
 * current revisions, and the fields of Nodes and Pods the planner reads (the informers keep
 * those only). Pure.
 */
#include <assert.h>
#include <string.h>

#include "kobj.h"
#include "upgrade.h"
#include "util.h"

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
        /* an absent one null: read alike (not ready, no restarts) */
        json_array_append_new(out, json_pack("{s:O?,s:O?}", "ready", json_object_get(cs, "ready"),
                                             "restartCount", json_object_get(cs, "restartCount")));
    }
    return out;
}

/* The Pod-shaped part of upg_pod_compact: who owns it, its labels and namespace, its GPU
 * requests, emptyDirs and claims, its phase, readiness and restarts. */
static json_t *pod_alike(const json_t *obj)
{
    json_t *p = json_object(), *meta = json_object(), *spec = json_object(), *st = json_object();
    json_object_set_new(p, "metadata", meta);
    json_object_set_new(p, "spec", spec);
    json_object_set_new(p, "status", st);
    json_t *ns = kobj_path(obj, "metadata.namespace");
    if (json_is_string(ns))
        json_object_set(meta, "namespace", ns);
    json_t *labels = kobj_path(obj, "metadata.labels");
    if (labels)
        json_object_set(meta, "labels", labels);
    json_t *owners = json_array();
    size_t i;
    json_t *o;
    json_array_foreach (kobj_path(obj, "metadata.ownerReferences"), i, o)
        json_array_append_new(owners, json_pack("{s:O?,s:O?}", "kind", json_object_get(o, "kind"),
                                                "name", json_object_get(o, "name")));
    json_object_set_new(meta, "ownerReferences", owners);
    const char *mirror = kobj_annotation(obj, "kubernetes.io/config.mirror");
    if (mirror)
        json_object_set_new(meta, "annotations",
                            json_pack("{s:s}", "kubernetes.io/config.mirror", mirror));
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
    kobj_path_copy(p, obj, "spec.resourceClaims");
    kobj_path_copy(p, obj, "status.phase");
    /* the first, as kobj_condition_true reads it */
    json_t *ready = kobj_condition_find(obj, "Ready");
    if (ready)
        json_object_set_new(
            st, "conditions",
            json_pack("[{s:s,s:O?}]", "type", "Ready", "status", json_object_get(ready, "status")));
    json_object_set_new(st, "containerStatuses",
                        slim_statuses(kobj_path(obj, "status.containerStatuses")));
    json_object_set_new(st, "initContainerStatuses",
                        slim_statuses(kobj_path(obj, "status.initContainerStatuses")));
    return p;
}

/* The compact form's own values, in the order of its string. */
enum { OWN_NAME, OWN_NODE, OWN_CREATED, OWN_DELETED, N_OWN };

json_t *upg_pod_compact(const json_t *obj, json_t *intern)
{
    const char *own[N_OWN] = {
        [OWN_NAME] = kobj_name(obj),
        [OWN_NODE] = kobj_path_str(obj, "spec.nodeName"),
        [OWN_CREATED] = kobj_creation_timestamp(obj),
        [OWN_DELETED] = kobj_deletion_timestamp(obj),
    };
    if (!json_is_object(obj) || !own[OWN_NAME] || !own[OWN_NAME][0])
        return NULL;
    size_t len[N_OWN], total = 0;
    for (int i = 0; i < N_OWN; i++)
        total += (len[i] = own[i] ? strlen(own[i]) : 0) + 1;
    _cleanup_free_ char *text = xmalloc(total);
    char *w = text;
    for (int i = 0; i < N_OWN; i++) {
        memcpy(w, own[i] ? own[i] : "", len[i]);
        w[len[i]] = '\0';
        w += len[i] + 1;
    }
    assert((size_t)(w - text) == total);
    /* an interned value is read by every pod alike from then on: it holds none of obj's
     * values, which its owner may change (pod_alike refers to obj's labels and resources) */
    json_t *alike = pod_alike(obj);
    if (intern) {
        json_t *own_copy = json_deep_copy(alike);
        json_decref(alike);
        alike = kobj_intern(intern, own_copy);
    }
    /* the text holds NULs: stored by length, never checked as UTF-8 */
    return json_pack("[o,o]", alike, json_stringn_nocheck(text, total));
}

bool upg_pod_is_compact(const json_t *pod)
{
    return json_is_array(pod) && json_array_size(pod) == 2 &&
           json_is_object(json_array_get(pod, 0)) && json_is_string(json_array_get(pod, 1));
}

const json_t *upg_pod_obj(const json_t *pod)
{
    return upg_pod_is_compact(pod) ? json_array_get(pod, 0) : pod;
}

/* The compact pod's own value i; NULL when absent (empty). */
static const char *own_value(const json_t *pod, int i)
{
    assert(upg_pod_is_compact(pod));
    const json_t *s = json_array_get(pod, 1);
    const char *t = json_string_value(s), *end = t + json_string_length(s);
    for (int k = 0; k < i && t < end; k++)
        t += strlen(t) + 1;
    return t < end && *t ? t : NULL;
}

const char *upg_pod_name(const json_t *pod)
{
    return upg_pod_is_compact(pod) ? own_value(pod, OWN_NAME) : kobj_name(pod);
}

const char *upg_pod_node(const json_t *pod)
{
    return upg_pod_is_compact(pod) ? own_value(pod, OWN_NODE) : kobj_path_str(pod, "spec.nodeName");
}

const char *upg_pod_created(const json_t *pod)
{
    return upg_pod_is_compact(pod) ? own_value(pod, OWN_CREATED) : kobj_creation_timestamp(pod);
}

const char *upg_pod_deletion(const json_t *pod)
{
    return upg_pod_is_compact(pod) ? own_value(pod, OWN_DELETED) : kobj_deletion_timestamp(pod);
}
