/* SPDX-License-Identifier: Apache-2.0 */
/* The resource type registry, discovery documents and server-side Table printing. */
#include <inttypes.h>
#include <string.h>

#include "kubesim-internal.h"

struct ks_type *ks_type_add(struct ksim *ks, const char *group, const char *version,
                            const char *plural, const char *singular, const char *kind,
                            bool namespaced)
{
    struct ks_type *t = xcalloc(1, sizeof(*t));
    t->group = xstrdup(group);
    t->version = xstrdup(version);
    t->plural = xstrdup(plural);
    t->singular = xstrdup(singular);
    t->kind = xstrdup(kind);
    t->short_names = xstrdup("");
    t->categories = xstrdup("");
    t->extra_sub = xstrdup("");
    t->namespaced = namespaced;
    t->served = true;
    t->objs = json_object();
    struct ks_type **pp = &ks->types;
    while (*pp)
        pp = &(*pp)->next;
    *pp = t;
    return t;
}

static void set_str(char **dst, const char *v)
{
    free(*dst);
    *dst = xstrdup(v);
}

void ks_types_init(struct ksim *ks)
{
    static const struct {
        const char *g, *v, *plural, *singular, *kind;
        bool ns, status, gen;
        const char *shorts, *cats, *sub;
    } builtin[] = {
        {"", "v1", "namespaces", "namespace", "Namespace", false, true, false, "ns", "",
         "finalize"},
        {"", "v1", "nodes", "node", "Node", false, true, false, "no", "", ""},
        {"", "v1", "pods", "pod", "Pod", true, true, false, "po", "all", "eviction,binding"},
        {"", "v1", "configmaps", "configmap", "ConfigMap", true, false, false, "cm", "", ""},
        {"", "v1", "secrets", "secret", "Secret", true, false, false, "", "", ""},
        {"", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, false, false, "sa",
         "", ""},
        {"", "v1", "services", "service", "Service", true, true, false, "svc", "all", ""},
        {"", "v1", "endpoints", "endpoints", "Endpoints", true, false, false, "ep", "", ""},
        {"", "v1", "events", "event", "Event", true, false, false, "ev", "", ""},
        {"apps", "v1", "daemonsets", "daemonset", "DaemonSet", true, true, true, "ds", "all", ""},
        {"apps", "v1", "deployments", "deployment", "Deployment", true, true, true, "deploy", "all",
         "scale"},
        {"apps", "v1", "replicasets", "replicaset", "ReplicaSet", true, true, true, "rs", "all",
         "scale"},
        {"apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision", true,
         false, false, "", "", ""},
        {"rbac.authorization.k8s.io", "v1", "roles", "role", "Role", true, false, false, "", "",
         ""},
        {"rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", false,
         false, false, "", "", ""},
        {"rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", true,
         false, false, "", "", ""},
        {"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
         "ClusterRoleBinding", false, false, false, "", "", ""},
        {"policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true,
         true, true, "pdb", "", ""},
        {"coordination.k8s.io", "v1", "leases", "lease", "Lease", true, false, false, "", "", ""},
        {"events.k8s.io", "v1", "events", "event", "Event", true, false, false, "ev", "", ""},
        {"node.k8s.io", "v1", "runtimeclasses", "runtimeclass", "RuntimeClass", false, false, false,
         "", "", ""},
        {"apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
         "CustomResourceDefinition", false, true, true, "crd,crds", "api-extensions", ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(builtin); i++) {
        struct ks_type *t = ks_type_add(ks, builtin[i].g, builtin[i].v, builtin[i].plural,
                                        builtin[i].singular, builtin[i].kind, builtin[i].ns);
        t->has_status = builtin[i].status;
        t->has_generation = builtin[i].gen;
        set_str(&t->short_names, builtin[i].shorts);
        set_str(&t->categories, builtin[i].cats);
        set_str(&t->extra_sub, builtin[i].sub);
    }
}

void ks_types_free(struct ksim *ks)
{
    struct ks_type *t = ks->types;
    while (t) {
        struct ks_type *n = t->next;
        free(t->group);
        free(t->version);
        free(t->plural);
        free(t->singular);
        free(t->kind);
        free(t->short_names);
        free(t->categories);
        free(t->extra_sub);
        json_decref(t->printer_columns);
        json_decref(t->objs);
        free(t);
        t = n;
    }
    ks->types = NULL;
}

struct ks_type *ks_type_find(struct ksim *ks, const char *group, const char *version,
                             const char *plural)
{
    for (struct ks_type *t = ks->types; t; t = t->next)
        if (t->served && streq(t->group, group) && streq(t->version, version) &&
            streq(t->plural, plural))
            return t;
    return NULL;
}

struct ks_type *ks_type_by_kind(struct ksim *ks, const char *api_version, const char *kind)
{
    if (!api_version || !kind)
        return NULL;
    for (struct ks_type *t = ks->types; t; t = t->next) {
        if (!t->served || !streq(t->kind, kind))
            continue;
        _cleanup_free_ char *gv = ks_type_gv(t);
        if (streq(gv, api_version))
            return t;
    }
    return NULL;
}

char *ks_type_gv(const struct ks_type *t)
{
    return t->group[0] ? xasprintf("%s/%s", t->group, t->version) : xstrdup(t->version);
}

char *ks_type_qualified(const struct ks_type *t)
{
    return t->group[0] ? xasprintf("%s.%s", t->plural, t->group) : xstrdup(t->plural);
}

/* ---- discovery ---------------------------------------------------------------------------- */

static json_t *csv_array(const char *csv)
{
    json_t *a = json_array();
    const char *p = csv;
    while (p && *p) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        json_array_append_new(a, json_stringn(p, n));
        p += n + (c ? 1 : 0);
    }
    return a;
}

static json_t *resource_list(struct ksim *ks, const char *group, const char *version)
{
    json_t *res = json_array();
    for (struct ks_type *t = ks->types; t; t = t->next) {
        if (!t->served || !streq(t->group, group) || !streq(t->version, version))
            continue;
        json_t *r =
            json_pack("{s:s,s:s,s:b,s:s,s:[ssssssss]}", "name", t->plural, "singularName",
                      t->singular, "namespaced", t->namespaced, "kind", t->kind, "verbs", "create",
                      "delete", "deletecollection", "get", "list", "patch", "update", "watch");
        if (t->short_names[0])
            json_object_set_new(r, "shortNames", csv_array(t->short_names));
        if (t->categories[0])
            json_object_set_new(r, "categories", csv_array(t->categories));
        json_array_append_new(res, r);
        _cleanup_free_ char *stname = xasprintf("%s/status", t->plural);
        if (t->has_status)
            json_array_append_new(res,
                                  json_pack("{s:s,s:s,s:b,s:s,s:[sss]}", "name", stname,
                                            "singularName", "", "namespaced", t->namespaced, "kind",
                                            t->kind, "verbs", "get", "patch", "update"));
        json_t *subs = csv_array(t->extra_sub);
        size_t i;
        json_t *s;
        json_array_foreach (subs, i, s) {
            const char *sn = json_string_value(s);
            _cleanup_free_ char *subname = xasprintf("%s/%s", t->plural, sn);
            json_t *r2 = json_pack("{s:s,s:s,s:b,s:s,s:[s]}", "name", subname, "singularName", "",
                                   "namespaced", t->namespaced, "kind",
                                   streq(sn, "eviction")  ? "Eviction"
                                   : streq(sn, "binding") ? "Binding"
                                                          : t->kind,
                                   "verbs", streq(sn, "finalize") ? "update" : "create");
            if (streq(sn, "scale")) {
                json_object_set_new(r2, "kind", json_string("Scale"));
                json_object_set_new(r2, "group", json_string("autoscaling"));
                json_object_set_new(r2, "version", json_string("v1"));
                json_object_set_new(r2, "verbs", json_pack("[sss]", "get", "patch", "update"));
            }
            if (streq(sn, "eviction")) {
                json_object_set_new(r2, "group", json_string("policy"));
                json_object_set_new(r2, "version", json_string("v1"));
            }
            json_array_append_new(res, r2);
        }
        json_decref(subs);
    }
    _cleanup_free_ char *gv = group[0] ? xasprintf("%s/%s", group, version) : xstrdup(version);
    return json_pack("{s:s,s:s,s:s,s:o}", "kind", "APIResourceList", "apiVersion", "v1",
                     "groupVersion", gv, "resources", res);
}

static json_t *group_entry(const char *g, const char *v)
{
    _cleanup_free_ char *gv = xasprintf("%s/%s", g, v);
    return json_pack("{s:s,s:[{s:s,s:s}],s:{s:s,s:s}}", "name", g, "versions", "groupVersion", gv,
                     "version", v, "preferredVersion", "groupVersion", gv, "version", v);
}

bool ks_discovery(struct ksim *ks, const struct ksim_request *req, struct ksim_response *resp)
{
    const char *p = req->path;
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    _cleanup_free_ char *path = xstrndup(p, n);
    if (!streq(req->method, "GET"))
        return false;
    if (streq(path, "/version")) {
        strlcpy_s(resp->verb, "get", sizeof(resp->verb));
        strlcpy_s(resp->resource, "version", sizeof(resp->resource));
        ks_json_response(resp, 200,
                         json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "major", "1", "minor",
                                   "32", "gitVersion", "v1.32.0-kubesim", "gitCommit",
                                   GPUOP_GIT_REV, "gitTreeState", "clean", "buildDate",
                                   "2026-01-01T00:00:00Z", "goVersion", "go1.23.0", "compiler",
                                   "gc", "platform", "linux/amd64"));
        return true;
    }
    if (streq(path, "/healthz") || streq(path, "/livez") || streq(path, "/readyz")) {
        resp->code = 200;
        resp->content_type = "text/plain; charset=utf-8";
        resp->body = xstrdup("ok");
        resp->body_len = 2;
        return true;
    }
    strlcpy_s(resp->verb, "get", sizeof(resp->verb));
    strlcpy_s(resp->resource, "discovery", sizeof(resp->resource));
    if (streq(path, "/api")) {
        ks_json_response(resp, 200,
                         json_pack("{s:s,s:[s],s:[{s:s,s:s}]}", "kind", "APIVersions", "versions",
                                   "v1", "serverAddressByClientCIDRs", "clientCIDR", "0.0.0.0/0",
                                   "serverAddress", "127.0.0.1:443"));
        return true;
    }
    if (streq(path, "/api/v1")) {
        ks_json_response(resp, 200, resource_list(ks, "", "v1"));
        return true;
    }
    if (streq(path, "/apis")) {
        json_t *groups = json_array();
        json_t *seen = json_object();
        for (struct ks_type *t = ks->types; t; t = t->next) {
            if (!t->served || !t->group[0])
                continue;
            _cleanup_free_ char *gv = ks_type_gv(t);
            if (json_object_get(seen, gv))
                continue;
            json_object_set_new(seen, gv, json_true());
            /* one entry per group, listing its versions */
            json_t *found = NULL;
            size_t i;
            json_t *g;
            json_array_foreach (groups, i, g)
                if (streq(jstr(g, "name"), t->group))
                    found = g;
            if (found) {
                json_array_append_new(
                    json_object_get(found, "versions"),
                    json_pack("{s:s,s:s}", "groupVersion", gv, "version", t->version));
            } else {
                json_array_append_new(groups, group_entry(t->group, t->version));
            }
        }
        json_decref(seen);
        ks_json_response(resp, 200,
                         json_pack("{s:s,s:s,s:o}", "kind", "APIGroupList", "apiVersion", "v1",
                                   "groups", groups));
        return true;
    }
    if (str_has_prefix(path, "/apis/")) {
        const char *rest = path + 6;
        const char *slash = strchr(rest, '/');
        if (!slash) {
            for (struct ks_type *t = ks->types; t; t = t->next) {
                if (t->served && streq(t->group, rest)) {
                    json_t *g = group_entry(t->group, t->version);
                    json_object_set_new(g, "kind", json_string("APIGroup"));
                    json_object_set_new(g, "apiVersion", json_string("v1"));
                    ks_json_response(resp, 200, g);
                    return true;
                }
            }
            return false;
        }
        if (strchr(slash + 1, '/'))
            return false;
        _cleanup_free_ char *g = xstrndup(rest, (size_t)(slash - rest));
        for (struct ks_type *t = ks->types; t; t = t->next) {
            if (t->served && streq(t->group, g) && streq(t->version, slash + 1)) {
                ks_json_response(resp, 200, resource_list(ks, g, slash + 1));
                return true;
            }
        }
    }
    return false;
}

/* ---- tables ------------------------------------------------------------------------------- */

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
    const char *ts = jstr(obj, "metadata.creationTimestamp");
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
    json_t *v = jpath(obj, path);
    return json_integer(json_is_integer(v) ? json_integer_value(v) : 0);
}

static json_t *str_or(json_t *obj, const char *path, const char *dflt)
{
    const char *s = jstr(obj, path);
    return json_string(s && s[0] ? s : dflt);
}

static json_t *intstr_cell(json_t *obj, const char *path)
{
    json_t *v = jpath(obj, path);
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
    json_array_foreach (jpath(node, "status.conditions"), i, c)
        if (streq_ptr(jstr(c, "type"), "Ready"))
            ready = streq_ptr(jstr(c, "status"), "True") ? "Ready" : "NotReady";
    char buf[64];
    snprintf(buf, sizeof(buf), "%s%s", ready,
             json_is_true(jpath(node, "spec.unschedulable")) ? ",SchedulingDisabled" : "");
    return json_string(buf);
}

static json_t *node_roles(json_t *node)
{
    struct sbuf b;
    sbuf_init(&b, 4096);
    const char *k;
    json_t *v;
    json_object_foreach (jpath(node, "metadata.labels"), k, v) {
        if (str_has_prefix(k, "node-role.kubernetes.io/") && k[24])
            sbuf_printf(&b, "%s%s", b.len ? "," : "", k + 24);
    }
    json_t *r = json_string(b.len ? b.data : "<none>");
    sbuf_free(&b);
    return r;
}

static json_t *pod_ready_cell(json_t *pod)
{
    size_t total = json_array_size(jpath(pod, "spec.containers")), ready = 0, i;
    json_t *c;
    json_array_foreach (jpath(pod, "status.containerStatuses"), i, c)
        if (json_is_true(json_object_get(c, "ready")))
            ready++;
    char buf[32];
    snprintf(buf, sizeof(buf), "%zu/%zu", ready, total);
    return json_string(buf);
}

static json_t *pod_status_cell(json_t *pod)
{
    if (jpath(pod, "metadata.deletionTimestamp"))
        return json_string("Terminating");
    return str_or(pod, "status.phase", "Pending");
}

static json_t *node_selector_cell(json_t *ds)
{
    struct sbuf b;
    sbuf_init(&b, 4096);
    const char *k;
    json_t *v;
    json_object_foreach (jpath(ds, "spec.template.spec.nodeSelector"), k, v)
        sbuf_printf(&b, "%s%s=%s", b.len ? "," : "", k, json_string_value(v) ?: "");
    json_t *r = json_string(b.len ? b.data : "<none>");
    sbuf_free(&b);
    return r;
}

/* A cell from a CRD printer column's JSONPath (simple .a.b.c paths). */
static json_t *jsonpath_cell(json_t *obj, const char *jp)
{
    if (!jp || jp[0] != '.')
        return json_null();
    json_t *v = jpath(obj, jp + 1);
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
    } else if (t->printer_columns) {
        size_t i;
        json_t *pc;
        json_array_foreach (t->printer_columns, i, pc) {
            json_t *p = json_object_get(pc, "priority");
            C(jstr(pc, "name") ?: "", jstr(pc, "type") ?: "string",
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
            json_t *addr = json_array_get(jpath(o, "status.addresses"), 0);
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
            json_t *rep = jpath(o, "spec.replicas");
            snprintf(b, sizeof(b), "%lld/%lld",
                     (long long)json_integer_value(jpath(o, "status.readyReplicas")),
                     (long long)(json_is_integer(rep) ? json_integer_value(rep) : 1));
            A(json_string(b));
            A(int_cell(o, "status.updatedReplicas"));
            A(int_cell(o, "status.availableReplicas"));
            A(age_cell(ks, o));
        } else if (core && streq(kind, "ReplicaSet")) {
            json_t *rep = jpath(o, "spec.replicas");
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
        } else if (t->printer_columns) {
            size_t j;
            json_t *pc;
            /* only the declared columns; "date" columns print as ages, as the API server's
             * custom resource table convertor does */
            json_array_foreach (t->printer_columns, j, pc) {
                json_t *cell = jsonpath_cell(o, jstr(pc, "jsonPath"));
                if (streq_ptr(jstr(pc, "type"), "date") && json_is_string(cell)) {
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
