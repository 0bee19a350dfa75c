/* SPDX-License-Identifier: Apache-2.0 */
/* What a bundle collects (gather.h): the kinds, which objects, a node's facts, the Events of a
 * window, the logs and their order, the doctor's image, safe names. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gather.h"
#include "kobj.h"

const struct gather_source gather_sources[] = {
    {&KUBE_CLUSTERPOLICIES, "clusterpolicies", GATHER_ALL, true},
    {&KUBE_NVIDIADRIVERS, "nvidiadrivers", GATHER_ALL, true},
    {&KUBE_DRIVERUPGRADEPOOLS, "driverupgradepools", GATHER_ALL, true},
    {&KUBE_CRDS, "customresourcedefinitions", GATHER_GPUOP, false},
    {&KUBE_CLUSTERROLES, "clusterroles", GATHER_GPUOP, false},
    {&KUBE_CLUSTERROLEBINDINGS, "clusterrolebindings", GATHER_GPUOP, false},
    {&KUBE_RUNTIMECLASSES, "runtimeclasses", GATHER_GPUOP, false},
    {&KUBE_DEPLOYMENTS, "deployments", GATHER_ALL, false},
    {&KUBE_DAEMONSETS, "daemonsets", GATHER_ALL, false},
    {&KUBE_PODS, "pods", GATHER_ALL, false},
    {&KUBE_CONFIGMAPS, "configmaps", GATHER_ALL, false},
    {&KUBE_SERVICES, "services", GATHER_ALL, false},
    {&KUBE_SERVICEACCOUNTS, "serviceaccounts", GATHER_ALL, false},
    {&KUBE_ROLES, "roles", GATHER_ALL, false},
    {&KUBE_ROLEBINDINGS, "rolebindings", GATHER_ALL, false},
    {&KUBE_LEASES, "leases", GATHER_ALL, false},
    {&KUBE_PDBS, "poddisruptionbudgets", GATHER_ALL, false},
    {&KUBE_SERVICEMONITORS, "servicemonitors", GATHER_ALL, true},
    {&KUBE_PROMETHEUSRULES, "prometheusrules", GATHER_ALL, true},
    {0},
};

bool gather_wanted(const struct gather_source *src, const json_t *obj)
{
    if (src->select == GATHER_ALL)
        return true;
    if (src->res == &KUBE_CRDS) {
        const char *g = kobj_path_str(obj, "spec.group");
        return streq_ptr(g, "nvidia.com") || streq_ptr(g, "gpuop.dev") ||
               (g && str_has_suffix(g, ".gpuop.dev"));
    }
    if (streq_ptr(kobj_label(obj, "app.kubernetes.io/managed-by"), "gpuop") ||
        streq_ptr(kobj_label(obj, "app.kubernetes.io/name"), "gpuop"))
        return true;
    const char *name = kobj_name(obj);
    return name && (str_has_prefix(name, "gpu-operator") || str_has_prefix(name, "gpuop") ||
                    str_has_prefix(name, "nvidia-"));
}

static void copy_path(json_t *to, const char *key, const json_t *from, const char *path)
{
    json_t *v = kobj_path(from, path);
    if (v)
        json_object_set_new(to, key, json_deep_copy(v));
}

json_t *gather_node_view(const json_t *node)
{
    json_t *v = json_object();
    json_object_set_new(v, "name", json_string(kobj_name(node) ?: ""));
    static const struct {
        const char *key, *path;
    } fields[] = {
        {"labels", "metadata.labels"},           {"annotations", "metadata.annotations"},
        {"unschedulable", "spec.unschedulable"}, {"taints", "spec.taints"},
        {"conditions", "status.conditions"},     {"capacity", "status.capacity"},
        {"allocatable", "status.allocatable"},   {"addresses", "status.addresses"},
        {"nodeInfo", "status.nodeInfo"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
        copy_path(v, fields[i].key, node, fields[i].path);
    return v;
}

/* An Event's last time in unix ms (0: none known). */
static uint64_t event_time(const json_t *ev)
{
    static const char *const paths[] = {"lastTimestamp", "eventTime", "series.lastObservedTime",
                                        "firstTimestamp", "metadata.creationTimestamp"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
        uint64_t t;
        const char *s = kobj_path_str(ev, paths[i]);
        if (s && time_parse_rfc3339(s, &t) == 0)
            return t;
    }
    return 0;
}

struct timed {
    uint64_t t;
    size_t i;
    json_t *ev;
};

static int by_time(const void *a, const void *b)
{
    const struct timed *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i; /* stable: the server's order */
}

json_t *gather_events_since(const json_t *items, uint64_t now_ms, uint64_t since_ms)
{
    size_t n = json_array_size(items), k = 0;
    struct timed *t = xcalloc(n ? n : 1, sizeof(*t));
    uint64_t from = since_ms && since_ms < now_ms ? now_ms - since_ms : 0;
    for (size_t i = 0; i < n; i++) {
        json_t *ev = json_array_get(items, i);
        uint64_t at = event_time(ev);
        /* an Event without a time is kept: it cannot be said to be old */
        if (since_ms && at && at < from)
            continue;
        t[k++] = (struct timed){at, i, ev};
    }
    qsort(t, k, sizeof(*t), by_time);
    json_t *list = json_array();
    for (size_t i = 0; i < k; i++)
        json_array_append(list, t[i].ev);
    free(t);
    json_t *since = json_null();
    if (since_ms) {
        char buf[40];
        time_rfc3339(from, buf, sizeof(buf));
        json_decref(since);
        since = json_string(buf);
    }
    return json_pack("{s:o,s:o}", "since", since, "items", list);
}

static bool operator_pod(const json_t *obj)
{
    return streq_ptr(kobj_label(obj, "app.kubernetes.io/component"), "operator") ||
           streq_ptr(kobj_label(obj, "app"), "gpu-operator");
}

static int by_operator_then_name(const void *a, const void *b)
{
    const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
    bool ox = operator_pod(x), oy = operator_pod(y);
    if (ox != oy)
        return ox ? -1 : 1;
    return strcmp(kobj_name(x) ?: "", kobj_name(y) ?: "");
}

/* The restarts the pod's status gives a container (init or not). */
static int64_t restarts(const json_t *pod, const char *container)
{
    static const char *const lists[] = {"status.initContainerStatuses", "status.containerStatuses"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *cs;
        json_array_foreach (kobj_path(pod, lists[l]), i, cs) {
            if (streq_ptr(kobj_str(cs, "name"), container)) {
                json_t *r = json_object_get(cs, "restartCount");
                return json_is_integer(r) ? json_integer_value(r) : 0;
            }
        }
    }
    return 0;
}

void gather_log_plan(const json_t *pods, size_t max, struct gather_log **ret, size_t *ret_n,
                     size_t *ret_more)
{
    size_t np = json_array_size(pods);
    const json_t **sorted = xcalloc(np ? np : 1, sizeof(*sorted));
    for (size_t i = 0; i < np; i++)
        sorted[i] = json_array_get(pods, i);
    qsort(sorted, np, sizeof(*sorted), by_operator_then_name);
    size_t n = 0, more = 0, cap = 16;
    struct gather_log *logs = xcalloc(cap, sizeof(*logs));
    for (size_t p = 0; p < np; p++) {
        const json_t *pod = sorted[p];
        const char *pname = kobj_name(pod);
        if (!pname || !pname[0])
            continue;
        static const char *const lists[] = {"spec.initContainers", "spec.containers"};
        for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
            size_t i;
            json_t *c;
            json_array_foreach (kobj_path(pod, lists[l]), i, c) {
                const char *cname = kobj_str(c, "name");
                if (!cname || !cname[0])
                    continue;
                for (int prev = 0; prev <= (restarts(pod, cname) > 0); prev++) {
                    if (n == max) {
                        more++;
                        continue;
                    }
                    if (n == cap) {
                        cap *= 2;
                        logs = xrealloc(logs, cap * sizeof(*logs));
                    }
                    struct gather_log *g = &logs[n++];
                    *g = (struct gather_log){.previous = prev != 0};
                    strlcpy_s(g->pod, pname, sizeof(g->pod));
                    strlcpy_s(g->container, cname, sizeof(g->container));
                    char pp[254], cp[64];
                    gather_path_part(pname, pp, sizeof(pp));
                    gather_path_part(cname, cp, sizeof(cp));
                    snprintf(g->path, sizeof(g->path), "logs/%s/%s%s.log", pp, cp,
                             prev ? ".previous" : "");
                }
            }
        }
    }
    free(sorted);
    *ret = logs;
    *ret_n = n;
    *ret_more = more;
}

const char *gather_doctor_image(const json_t *deployments, const char *fallback)
{
    size_t i;
    json_t *d;
    json_array_foreach (deployments, i, d) {
        if (!operator_pod(d))
            continue;
        const char *img =
            kobj_str(json_array_get(kobj_path(d, "spec.template.spec.containers"), 0), "image");
        if (img && img[0])
            return img;
    }
    return fallback;
}

void gather_path_part(const char *name, char *buf, size_t n)
{
    assert(n >= 2);
    size_t k = 0;
    for (const char *p = name ? name : ""; *p && k + 1 < n; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        buf[k++] = ok ? c : '_';
    }
    buf[k] = '\0';
    if (k == 0 || strcmp(buf, ".") == 0 || strcmp(buf, "..") == 0)
        strlcpy_s(buf, "_", n);
}

bool gather_api_down(int code)
{
    switch (code) {
    case -ECONNREFUSED:
    case -EHOSTUNREACH:
    case -ENETUNREACH:
    case -ECONNRESET:
    case -ECONNABORTED:
    case -ETIMEDOUT:
    case -EKEYREJECTED:
    case -EACCES:
    case -ECANCELED:
    case -ENOTCONN:
    case -EPROTO:
        return true;
    default:
        return false;
    }
}
