/* SPDX-License-Identifier: Apache-2.0 */
/* The RBAC authorizer (plugin/pkg/auth/authorizer/rbac): bindings whose subjects name the user,
 * their roles' rules against the request's attributes; the first rule that allows wins. */
#include <string.h>

#include "ks-rbac.h"
#include "kubesim-internal.h"

static bool str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static bool in_list(json_t *list, const char *want)
{
    size_t i;
    json_t *v;
    json_array_foreach (list, i, v) {
        if (json_is_string(v) && str_eq(json_string_value(v), want))
            return true;
    }
    return false;
}

static bool has_group(const struct ks_authz_attrs *a, const char *g)
{
    return in_list(a->groups, g);
}

/* VerbMatches and APIGroupMatches: '*' or the value. */
static bool matches_or_star(json_t *list, const char *want)
{
    return in_list(list, "*") || in_list(list, want);
}

static bool resource_matches(json_t *rule, const char *combined, const char *sub)
{
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get(rule, "resources"), i, v) {
        const char *r = json_string_value(v);
        if (!r)
            continue;
        if (streq(r, "*") || streq(r, combined))
            return true;
        /* a rule for "*\/scale" matches the scale subresource of any resource */
        if (sub && sub[0] && r[0] == '*' && r[1] == '/' && streq(r + 2, sub))
            return true;
    }
    return false;
}

static bool name_matches(json_t *rule, const char *name)
{
    json_t *names = json_object_get(rule, "resourceNames");
    if (json_array_size(names) == 0)
        return true;
    return in_list(names, name ? name : "");
}

static bool url_matches(json_t *rule, const char *path)
{
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get(rule, "nonResourceURLs"), i, v) {
        const char *u = json_string_value(v);
        if (!u)
            continue;
        size_t n = strlen(u);
        if (streq(u, "*") || streq(u, path ? path : ""))
            return true;
        if (n && u[n - 1] == '*' && path && strncmp(path, u, n - 1) == 0)
            return true;
    }
    return false;
}

bool ks_rbac_rule_allows(json_t *rule, const struct ks_authz_attrs *a)
{
    if (!json_is_object(rule) || !matches_or_star(json_object_get(rule, "verbs"), a->verb))
        return false;
    if (!a->resource_request)
        return url_matches(rule, a->path);
    _cleanup_free_ char *combined = a->sub && a->sub[0]
                                        ? xasprintf("%s/%s", a->resource ? a->resource : "", a->sub)
                                        : xstrdup(a->resource ? a->resource : "");
    return matches_or_star(json_object_get(rule, "apiGroups"), a->api_group ? a->api_group : "") &&
           resource_matches(rule, combined, a->sub) && name_matches(rule, a->name);
}

/* appliesToUser: a ServiceAccount subject without a namespace takes the binding's. */
static bool subject_applies(json_t *s, const struct ks_authz_attrs *a, const char *binding_ns)
{
    const char *kind = kobj_str(s, "kind");
    const char *name = kobj_str(s, "name");
    if (!kind || !name)
        return false;
    if (streq(kind, "User"))
        return str_eq(a->user, name);
    if (streq(kind, "Group"))
        return has_group(a, name);
    if (streq(kind, "ServiceAccount")) {
        const char *ns = kobj_str(s, "namespace");
        if (!ns || !ns[0])
            ns = binding_ns;
        if (!ns || !ns[0])
            return false;
        _cleanup_free_ char *u = xasprintf("system:serviceaccount:%s:%s", ns, name);
        return str_eq(a->user, u);
    }
    return false;
}

static char *describe_subject(json_t *s, const char *binding_ns)
{
    const char *kind = kobj_str(s, "kind");
    if (streq_ptr(kind, "ServiceAccount")) {
        const char *ns = kobj_str(s, "namespace");
        return xasprintf("ServiceAccount \"%s/%s\"", kobj_str(s, "name"),
                         ns && ns[0] ? ns : (binding_ns ? binding_ns : ""));
    }
    return xasprintf("%s \"%s\"", kind, kobj_str(s, "name"));
}

/* Walks the rules the policy gives the request's user, as VisitRulesFor does. */
struct visit {
    const struct ks_authz_attrs *a;
    json_t *errors; /* messages of dangling role references, deduplicated as Aggregate does */
    char *allowed_by;
};

static void add_error(struct visit *v, char *msg)
{
    if (!in_list(v->errors, msg))
        json_array_append_new(v->errors, json_string(msg));
    free(msg);
}

static bool rules_allow(json_t *rules, const struct ks_authz_attrs *a)
{
    size_t i;
    json_t *r;
    json_array_foreach (rules, i, r) {
        if (ks_rbac_rule_allows(r, a))
            return true;
    }
    return false;
}

/* The bootstrap policy kubesim serves without stored objects. */
static json_t *bootstrap_rules(const struct ks_authz_attrs *a, const char **ret_role)
{
    bool authn = has_group(a, "system:authenticated");
    bool unauthn = has_group(a, "system:unauthenticated");
    if (authn) {
        json_t *basic = json_pack("[{s:[s],s:[ss],s:[s]},{s:[s],s:[s],s:[s]}]", "apiGroups",
                                  "authorization.k8s.io", "resources", "selfsubjectaccessreviews",
                                  "selfsubjectrulesreviews", "verbs", "create", "apiGroups",
                                  "authentication.k8s.io", "resources", "selfsubjectreviews",
                                  "verbs", "create");
        if (rules_allow(basic, a)) {
            *ret_role = "system:basic-user";
            return basic;
        }
        json_decref(basic);
        json_t *disc = json_pack("[{s:[sssssssssss],s:[s]}]", "nonResourceURLs", "/api", "/api/*",
                                 "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
                                 "/readyz", "/version", "/version/", "verbs", "get");
        if (rules_allow(disc, a)) {
            *ret_role = "system:discovery";
            return disc;
        }
        json_decref(disc);
    }
    if (authn || unauthn) {
        json_t *pub = json_pack("[{s:[sssss],s:[s]}]", "nonResourceURLs", "/healthz", "/livez",
                                "/readyz", "/version", "/version/", "verbs", "get");
        if (rules_allow(pub, a)) {
            *ret_role = "system:public-info-viewer";
            return pub;
        }
        json_decref(pub);
    }
    return NULL;
}

/* The binding's role's rules (borrowed), or NULL with the reference error recorded. */
static json_t *role_rules(const struct ks_rbac_policy *p, json_t *binding, const char *binding_ns,
                          struct visit *v)
{
    const char *kind = kobj_path_str(binding, "roleRef.kind");
    const char *name = kobj_path_str(binding, "roleRef.name");
    if (!name)
        name = "";
    if (streq_ptr(kind, "ClusterRole")) {
        _cleanup_free_ char *key = xasprintf("/%s", name);
        json_t *r = json_object_get(p->cluster_roles, key);
        if (!r) {
            add_error(v, xasprintf("clusterrole.rbac.authorization.k8s.io \"%s\" not found", name));
            return NULL;
        }
        return json_object_get(r, "rules");
    }
    if (streq_ptr(kind, "Role") && binding_ns) {
        _cleanup_free_ char *key = xasprintf("%s/%s", binding_ns, name);
        json_t *r = json_object_get(p->roles, key);
        if (!r) {
            add_error(v, xasprintf("role.rbac.authorization.k8s.io \"%s\" not found", name));
            return NULL;
        }
        return json_object_get(r, "rules");
    }
    add_error(v, xasprintf("unsupported role reference kind: \"%s\"", kind ? kind : ""));
    return NULL;
}

/* true when a binding of bindings (cluster-wide when ns is NULL) allows the request. */
static bool visit_bindings(const struct ks_rbac_policy *p, json_t *bindings, const char *ns,
                           struct visit *v)
{
    const char *key;
    json_t *b;
    json_object_foreach (bindings, key, b) {
        const char *bns = ns ? kobj_namespace(b) : NULL;
        if (ns && !str_eq(bns, ns))
            continue;
        json_t *subject = NULL;
        size_t i;
        json_t *s;
        json_array_foreach (json_object_get(b, "subjects"), i, s) {
            if (subject_applies(s, v->a, bns)) {
                subject = s;
                break;
            }
        }
        if (!subject)
            continue;
        json_t *rules = role_rules(p, b, bns, v);
        if (!rules || !rules_allow(rules, v->a))
            continue;
        _cleanup_free_ char *who = describe_subject(subject, bns);
        _cleanup_free_ char *bname =
            ns ? xasprintf("%s/%s", kobj_name(b), ns) : xstrdup(kobj_name(b) ? kobj_name(b) : "");
        v->allowed_by =
            xasprintf("RBAC: allowed by %s \"%s\" of %s \"%s\" to %s",
                      ns ? "RoleBinding" : "ClusterRoleBinding", bname,
                      kobj_path_str(b, "roleRef.kind"), kobj_path_str(b, "roleRef.name"), who);
        return true;
    }
    return false;
}

static char *aggregate(json_t *errors)
{
    size_t n = json_array_size(errors);
    if (n == 0)
        return xstrdup("");
    if (n == 1)
        return xasprintf("RBAC: %s", json_string_value(json_array_get(errors, 0)));
    struct sbuf b;
    sbuf_init(&b, 1u << 20);
    sbuf_adds(&b, "RBAC: [");
    size_t i;
    json_t *e;
    json_array_foreach (errors, i, e) {
        if (i)
            sbuf_adds(&b, ", ");
        sbuf_adds(&b, json_string_value(e));
    }
    sbuf_adds(&b, "]");
    char *s = sbuf_check(&b) < 0 ? xstrdup("RBAC: role references not found") : sbuf_steal(&b);
    sbuf_free(&b);
    return s;
}

bool ks_rbac_authorize(const struct ks_rbac_policy *p, const struct ks_authz_attrs *a,
                       char **ret_reason)
{
    if (has_group(a, "system:masters")) {
        if (ret_reason)
            *ret_reason = xstrdup("");
        return true;
    }
    const char *boot_role = NULL;
    json_t *boot = bootstrap_rules(a, &boot_role);
    if (boot) {
        json_decref(boot);
        if (ret_reason)
            *ret_reason =
                xasprintf("RBAC: allowed by ClusterRoleBinding \"%s\" of ClusterRole "
                          "\"%s\" to Group \"%s\"",
                          boot_role, boot_role,
                          has_group(a, "system:authenticated") ? "system:authenticated"
                                                               : "system:unauthenticated");
        return true;
    }
    struct visit v = {.a = a, .errors = json_array()};
    bool ok = visit_bindings(p, p->cluster_role_bindings, NULL, &v);
    if (!ok && a->resource_request && a->ns && a->ns[0])
        ok = visit_bindings(p, p->role_bindings, a->ns, &v);
    if (ret_reason)
        *ret_reason = ok ? steal_ptr(&v.allowed_by) : aggregate(v.errors);
    free(v.allowed_by);
    json_decref(v.errors);
    return ok;
}

char *ks_rbac_forbidden_message(const struct ks_authz_attrs *a, const char *reason)
{
    const char *user = a->user ? a->user : "";
    _cleanup_free_ char *what = NULL;
    _cleanup_free_ char *subject = NULL;
    if (!a->resource_request) {
        what = xasprintf("User \"%s\" cannot %s path \"%s\"", user, a->verb, a->path);
        subject = xstrdup("forbidden");
    } else {
        _cleanup_free_ char *res =
            a->sub && a->sub[0] ? xasprintf("%s/%s", a->resource, a->sub) : xstrdup(a->resource);
        const char *g = a->api_group ? a->api_group : "";
        if (a->ns && a->ns[0])
            what = xasprintf("User \"%s\" cannot %s resource \"%s\" in API group \"%s\" in the "
                             "namespace \"%s\"",
                             user, a->verb, res, g, a->ns);
        else
            what = xasprintf("User \"%s\" cannot %s resource \"%s\" in API group \"%s\" at the "
                             "cluster scope",
                             user, a->verb, res, g);
        /* NewForbidden names the GroupResource (resource.group), then the name when given */
        _cleanup_free_ char *gr = g[0] ? xasprintf("%s.%s", a->resource, g) : xstrdup(a->resource);
        subject = a->name && a->name[0] ? xasprintf("%s \"%s\" is forbidden", gr, a->name)
                                        : xasprintf("%s is forbidden", gr);
    }
    if (reason && reason[0])
        return xasprintf("%s: %s: %s", subject, what, reason);
    return xasprintf("%s: %s", subject, what);
}
