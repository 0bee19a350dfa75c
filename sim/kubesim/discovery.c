/* SPDX-License-Identifier: Apache-2.0 */
/* Discovery documents: /api, /apis, and each group version's resource list. */
#include <inttypes.h>
#include <string.h>

#include "ks-http.h"

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
        /* the access reviews, TokenReview, SelfSubjectReview: create only */
        if (streq(t->group, "authorization.k8s.io") || streq(t->group, "authentication.k8s.io"))
            json_object_set_new(r, "verbs", json_pack("[s]", "create"));
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
                                   "verbs",
                                   streq(sn, "finalize") ? "update"
                                   : streq(sn, "log")    ? "get"
                                                         : "create");
            if (streq(sn, "scale")) {
                json_object_set_new(r2, "kind", json_string("Scale"));
                json_object_set_new(r2, "group", json_string("autoscaling"));
                json_object_set_new(r2, "version", json_string("v1"));
                json_object_set_new(r2, "verbs", json_pack("[sss]", "get", "patch", "update"));
            }
            if (streq(sn, "token")) {
                json_object_set_new(r2, "kind", json_string("TokenRequest"));
                json_object_set_new(r2, "group", json_string("authentication.k8s.io"));
                json_object_set_new(r2, "version", json_string("v1"));
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

bool ks_health(const struct ksim_request *req, struct ksim_response *resp)
{
    const char *p = req->path ? req->path : "";
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    if (!streq_ptr(req->method, "GET"))
        return false;
    static const char *const paths[] = {"/healthz", "/livez", "/readyz"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
        if (strlen(paths[i]) == n && !strncmp(p, paths[i], n)) {
            resp->code = 200;
            resp->content_type = "text/plain; charset=utf-8";
            resp->body = xstrdup("ok");
            resp->body_len = 2;
            return true;
        }
    }
    return false;
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
                if (streq(kobj_str(g, "name"), t->group))
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
