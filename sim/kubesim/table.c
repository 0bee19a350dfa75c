/* SPDX-License-Identifier: Apache-2.0 */
/* Server-side Table printing (kubectl get's columns) for built-in and custom resources. */
#include <inttypes.h>
#include <string.h>

#include "ks-http.h"

static void human_age(int64_t s, char *buf, size_t n)
{
    if (s < 0)
        s = 0;
    int64_t m = s / 60, h = s / 3600, d = s / 86400;
    if (s < 120)
        snprintf(buf, n, "%" PRId64 "s", s);
    else if (m < 10)
        snprintf(buf, n, s % 60 ? "%" PRId64 "m%" PRId64 "s" : "%" PRId64 "m", m, s % 60);
    else if (h < 3)
        snprintf(buf, n, "%" PRId64 "m", m);
    else if (h < 8)
        snprintf(buf, n, m % 60 ? "%" PRId64 "h%" PRId64 "m" : "%" PRId64 "h", h, m % 60);
    else if (h < 48)
        snprintf(buf, n, "%" PRId64 "h", h);
    else if (d < 8)
        snprintf(buf, n, h % 24 ? "%" PRId64 "d%" PRId64 "h" : "%" PRId64 "d", d, h % 24);
    else
        snprintf(buf, n, "%" PRId64 "d", d);
}

static int64_t parse_ts(const char *s)
{
    struct tm tm = {0};
    if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm))
        return 0;
    return (int64_t)timegm(&tm);
}

static json_t *age_cell(struct ksim *ks, json_t *obj)
{
    const char *ts = kobj_creation_timestamp(obj);
    if (!ts)
        return json_string("<unknown>");
    char buf[32];
    human_age((int64_t)(ks_now(ks) / 1000) - parse_ts(ts), buf, sizeof(buf));
    return json_string(buf);
}

static json_t *col(const char *name, const char *type, int prio)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:i}", "name", name, "type", type, "format",
                     streq(name, "Name") ? "name" : "", "description", name, "priority", prio);
}

static json_t *int_cell(json_t *obj, const char *path)
{
    json_t *v = kobj_path(obj, path);
    return json_integer(json_is_integer(v) ? json_integer_value(v) : 0);
}

static json_t *str_or(json_t *obj, const char *path, const char *dflt)
{
    const char *s = kobj_path_str(obj, path);
    return json_string(s && s[0] ? s : dflt);
}

static json_t *intstr_cell(json_t *obj, const char *path)
{
    json_t *v = kobj_path(obj, path);
    if (json_is_integer(v)) {
        char b[32];
        snprintf(b, sizeof(b), "%lld", (long long)json_integer_value(v));
        return json_string(b);
    }
    return json_string(json_is_string(v) ? json_string_value(v) : "N/A");
}

static json_t *node_status(json_t *node)
{
    const char *ready = "Unknown";
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(node, "status.conditions"), i, c)
        if (streq_ptr(kobj_str(c, "type"), "Ready"))
            ready = streq_ptr(kobj_str(c, "status"), "True") ? "Ready" : "NotReady";
    char buf[64];
    snprintf(buf, sizeof(buf), "%s%s", ready,
             json_is_true(kobj_path(node, "spec.unschedulable")) ? ",SchedulingDisabled" : "");
    return json_string(buf);
}

static json_t *node_roles(json_t *node)
{
    struct sbuf b;
    sbuf_init(&b, 4096);
    const char *k;
    json_t *v;
    json_object_foreach (kobj_labels(node), k, v) {
        if (str_has_prefix(k, "node-role.kubernetes.io/") && k[24])
            sbuf_addf(&b, "%s%s", b.len ? "," : "", k + 24);
    }
    _cleanup_free_ char *cell = ks_text_take(&b);
    return json_string(*cell ? cell : "<none>");
}

static json_t *pod_ready_cell(json_t *pod)
{
    size_t total = json_array_size(kobj_path(pod, "spec.containers")), ready = 0, i;
    json_t *c;
    json_array_foreach (kobj_path(pod, "status.containerStatuses"), i, c)
        if (json_is_true(json_object_get(c, "ready")))
            ready++;
    char buf[32];
    snprintf(buf, sizeof(buf), "%zu/%zu", ready, total);
    return json_string(buf);
}

static json_t *pod_status_cell(json_t *pod)
{
    if (kobj_path(pod, "metadata.deletionTimestamp"))
        return json_string("Terminating");
    return str_or(pod, "status.phase", "Pending");
}

static json_t *node_selector_cell(json_t *ds)
{
    struct sbuf b;
    sbuf_init(&b, 4096);
    const char *k;
    json_t *v;
    json_object_foreach (kobj_path(ds, "spec.template.spec.nodeSelector"), k, v)
        sbuf_addf(&b, "%s%s=%s", b.len ? "," : "", k, json_string_value(v) ?: "");
    _cleanup_free_ char *cell = ks_text_take(&b);
    return json_string(*cell ? cell : "<none>");
}

/* A ResourceClaim's State column, as kubectl prints it: "deleted", "pending", "allocated",
 * "reserved", joined by commas. */
static json_t *claim_state_cell(json_t *claim)
{
    const char *states[3];
    size_t n = 0;
    bool deleted = kobj_path(claim, "metadata.deletionTimestamp") != NULL;
    if (deleted)
        states[n++] = "deleted";
    if (!json_is_object(kobj_path(claim, "status.allocation"))) {
        if (!deleted)
            states[n++] = "pending";
    } else {
        states[n++] = "allocated";
        if (json_array_size(kobj_path(claim, "status.reservedFor")))
            states[n++] = "reserved";
    }
    char buf[64] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? "," : "", states[i]);
    return json_string(buf);
}

/* A cell from a CRD printer column's JSONPath (simple .a.b.c paths). */
static json_t *jsonpath_cell(json_t *obj, const char *jp)
{
    if (!jp || jp[0] != '.')
        return json_null();
    json_t *v = kobj_path(obj, jp + 1);
    if (!v)
        return json_null();
    return json_incref(v);
}

json_t *ks_table(struct ksim *ks, struct ks_type *t, json_t *items, bool with_columns)
{
    json_t *cols = json_array();
    const char *kind = t->crd ? "" : t->kind;
    bool core = !t->crd;
#define C(name, type, prio) json_array_append_new(cols, col(name, type, prio))
    C("Name", "string", 0);
    if (core && streq(kind, "Node")) {
        C("Status", "string", 0);
        C("Roles", "string", 0);
        C("Age", "string", 0);
        C("Version", "string", 0);
        C("Internal-IP", "string", 1);
        C("OS-Image", "string", 1);
    } else if (core && streq(kind, "Pod")) {
        C("Ready", "string", 0);
        C("Status", "string", 0);
        C("Restarts", "string", 0);
        C("Age", "string", 0);
        C("IP", "string", 1);
        C("Node", "string", 1);
    } else if (core && streq(kind, "DaemonSet")) {
        C("Desired", "integer", 0);
        C("Current", "integer", 0);
        C("Ready", "integer", 0);
        C("Up-to-date", "integer", 0);
        C("Available", "integer", 0);
        C("Node Selector", "string", 0);
        C("Age", "string", 0);
    } else if (core && streq(kind, "Deployment")) {
        C("Ready", "string", 0);
        C("Up-to-date", "integer", 0);
        C("Available", "integer", 0);
        C("Age", "string", 0);
    } else if (core && streq(kind, "ReplicaSet")) {
        C("Desired", "integer", 0);
        C("Current", "integer", 0);
        C("Ready", "integer", 0);
        C("Age", "string", 0);
    } else if (core && streq(kind, "Namespace")) {
        C("Status", "string", 0);
        C("Age", "string", 0);
    } else if (core && streq(kind, "PodDisruptionBudget")) {
        C("Min Available", "string", 0);
        C("Max Unavailable", "string", 0);
        C("Allowed Disruptions", "integer", 0);
        C("Age", "string", 0);
    } else if (core && (streq(kind, "ConfigMap") || streq(kind, "Secret"))) {
        if (streq(kind, "Secret"))
            C("Type", "string", 0);
        C("Data", "integer", 0);
        C("Age", "string", 0);
    } else if (core && streq(kind, "ResourceClaim")) {
        C("State", "string", 0);
        C("Age", "string", 0);
    } else if (core && streq(kind, "ResourceSlice")) {
        C("Node", "string", 0);
        C("Driver", "string", 0);
        C("Pool", "string", 0);
        C("Age", "string", 0);
    } else if (t->printer_columns) {
        size_t i;
        json_t *pc;
        json_array_foreach (t->printer_columns, i, pc) {
            json_t *p = json_object_get(pc, "priority");
            C(kobj_str(pc, "name") ?: "", kobj_str(pc, "type") ?: "string",
              json_is_integer(p) ? (int)json_integer_value(p) : 0);
        }
    } else {
        C("Age", "string", 0);
    }
#undef C
    json_t *rows = json_array();
    size_t i;
    json_t *o;
    json_array_foreach (items, i, o) {
        json_t *cells = json_array();
#define A(v) json_array_append_new(cells, v)
        A(json_string(ks_obj_name(o)));
        if (core && streq(kind, "Node")) {
            A(node_status(o));
            A(node_roles(o));
            A(age_cell(ks, o));
            A(str_or(o, "status.nodeInfo.kubeletVersion", ""));
            json_t *addr = json_array_get(kobj_path(o, "status.addresses"), 0);
            A(str_or(addr, "address", "<none>"));
            A(str_or(o, "status.nodeInfo.osImage", "<unknown>"));
        } else if (core && streq(kind, "Pod")) {
            A(pod_ready_cell(o));
            A(pod_status_cell(o));
            A(json_string("0"));
            A(age_cell(ks, o));
            A(str_or(o, "status.podIP", "<none>"));
            A(str_or(o, "spec.nodeName", "<none>"));
        } else if (core && streq(kind, "DaemonSet")) {
            A(int_cell(o, "status.desiredNumberScheduled"));
            A(int_cell(o, "status.currentNumberScheduled"));
            A(int_cell(o, "status.numberReady"));
            A(int_cell(o, "status.updatedNumberScheduled"));
            A(int_cell(o, "status.numberAvailable"));
            A(node_selector_cell(o));
            A(age_cell(ks, o));
        } else if (core && streq(kind, "Deployment")) {
            char b[48];
            json_t *rep = kobj_path(o, "spec.replicas");
            snprintf(b, sizeof(b), "%lld/%lld",
                     (long long)json_integer_value(kobj_path(o, "status.readyReplicas")),
                     (long long)(json_is_integer(rep) ? json_integer_value(rep) : 1));
            A(json_string(b));
            A(int_cell(o, "status.updatedReplicas"));
            A(int_cell(o, "status.availableReplicas"));
            A(age_cell(ks, o));
        } else if (core && streq(kind, "ReplicaSet")) {
            json_t *rep = kobj_path(o, "spec.replicas");
            A(json_integer(json_is_integer(rep) ? json_integer_value(rep) : 1));
            A(int_cell(o, "status.replicas"));
            A(int_cell(o, "status.readyReplicas"));
            A(age_cell(ks, o));
        } else if (core && streq(kind, "Namespace")) {
            A(str_or(o, "status.phase", "Active"));
            A(age_cell(ks, o));
        } else if (core && streq(kind, "PodDisruptionBudget")) {
            A(intstr_cell(o, "spec.minAvailable"));
            A(intstr_cell(o, "spec.maxUnavailable"));
            A(int_cell(o, "status.disruptionsAllowed"));
            A(age_cell(ks, o));
        } else if (core && (streq(kind, "ConfigMap") || streq(kind, "Secret"))) {
            if (streq(kind, "Secret"))
                A(str_or(o, "type", "Opaque"));
            A(json_integer((json_int_t)(json_object_size(json_object_get(o, "data")) +
                                        json_object_size(json_object_get(o, "binaryData")))));
            A(age_cell(ks, o));
        } else if (core && streq(kind, "ResourceClaim")) {
            A(claim_state_cell(o));
            A(age_cell(ks, o));
        } else if (core && streq(kind, "ResourceSlice")) {
            A(str_or(o, "spec.nodeName", ""));
            A(str_or(o, "spec.driver", ""));
            A(str_or(o, "spec.pool.name", ""));
            A(age_cell(ks, o));
        } else if (t->printer_columns) {
            size_t j;
            json_t *pc;
            /* only the declared columns; "date" columns print as ages, as the API server's
             * custom resource table convertor does */
            json_array_foreach (t->printer_columns, j, pc) {
                json_t *cell = jsonpath_cell(o, kobj_str(pc, "jsonPath"));
                if (streq_ptr(kobj_str(pc, "type"), "date") && json_is_string(cell)) {
                    char buf[32];
                    human_age((int64_t)(ks_now(ks) / 1000) - parse_ts(json_string_value(cell)), buf,
                              sizeof(buf));
                    json_decref(cell);
                    cell = json_string(buf);
                }
                A(cell);
            }
        } else {
            A(age_cell(ks, o));
        }
#undef A
        json_t *meta = json_deep_copy(json_object_get(o, "metadata"));
        json_object_del(meta, "managedFields");
        json_array_append_new(rows, json_pack("{s:o,s:{s:s,s:s,s:o}}", "cells", cells, "object",
                                              "kind", "PartialObjectMetadata", "apiVersion",
                                              "meta.k8s.io/v1", "metadata", meta));
    }
    char rv[32];
    snprintf(rv, sizeof(rv), "%" PRIu64, ks->rv);
    json_t *tab = json_pack("{s:s,s:s,s:{s:s},s:o}", "kind", "Table", "apiVersion",
                            "meta.k8s.io/v1", "metadata", "resourceVersion", rv, "rows", rows);
    if (with_columns)
        json_object_set_new(tab, "columnDefinitions", cols);
    else {
        json_object_set_new(tab, "columnDefinitions", json_array());
        json_decref(cols);
    }
    return tab;
}
