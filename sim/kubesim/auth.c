/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Authentication, impersonation and authorization of every request, and the APIs about them.
 *
 * Tokens: the admin's (--token, or one kubesim makes for the kubeconfig it writes) is the user
 * kubesim-admin in system:masters. ServiceAccount tokens come from the TokenRequest API
 * (POST .../serviceaccounts/NAME/token): opaque random strings kubesim remembers, valid until
 * they expire, the ServiceAccount is deleted or the pod they are bound to is gone; they
 * authenticate as system:serviceaccount:NS:NAME in system:serviceaccounts,
 * system:serviceaccounts:NS and system:authenticated. Request attributes are derived from the
 * URL as the API server's RequestInfoFactory derives them.
 */
#include <ctype.h>
#include <inttypes.h>
#include <string.h>
#include <sys/random.h>

#include "ks-auth.h"

#define RBAC_GROUP "rbac.authorization.k8s.io"

void ks_ident_clear(struct ks_ident *id)
{
    free(id->user);
    free(id->uid);
    json_decref(id->groups);
    *id = (struct ks_ident){0};
}

void ks_auth_init(struct ksim *ks)
{
    ks->sa_tokens = json_object();
    ks->admin_token = ks->opts.admin_token ? xstrdup(ks->opts.admin_token) : NULL;
    ks->opts.admin_token = NULL; /* the caller's string: not kept */
    static const struct {
        const char *g, *plural, *singular, *kind;
        bool ns;
    } reviews[] = {
        {"authentication.k8s.io", "tokenreviews", "tokenreview", "TokenReview", false},
        {"authentication.k8s.io", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview",
         false},
        {"authorization.k8s.io", "localsubjectaccessreviews", "localsubjectaccessreview",
         "LocalSubjectAccessReview", true},
        {"authorization.k8s.io", "selfsubjectaccessreviews", "selfsubjectaccessreview",
         "SelfSubjectAccessReview", false},
        {"authorization.k8s.io", "selfsubjectrulesreviews", "selfsubjectrulesreview",
         "SelfSubjectRulesReview", false},
        {"authorization.k8s.io", "subjectaccessreviews", "subjectaccessreview",
         "SubjectAccessReview", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(reviews); i++)
        ks_type_add(ks, reviews[i].g, "v1", reviews[i].plural, reviews[i].singular, reviews[i].kind,
                    reviews[i].ns);
    struct ks_type *sa = ks_type_find(ks, "", "v1", "serviceaccounts");
    if (sa) {
        free(sa->extra_sub);
        sa->extra_sub = xstrdup("token");
    }
}

/* ---- authentication ----------------------------------------------------------------------- */

static json_t *admin_groups(void)
{
    return json_pack("[ss]", KSIM_ADMIN_GROUP, "system:authenticated");
}

static json_t *sa_groups(const char *ns)
{
    _cleanup_free_ char *g = xasprintf("system:serviceaccounts:%s", ns);
    return json_pack("[sss]", "system:serviceaccounts", g, "system:authenticated");
}

static bool uid_matches(json_t *obj, const char *uid)
{
    return obj && !ks_is_deleting(obj) &&
           (!uid || streq_ptr(kobj_path_str(obj, "metadata.uid"), uid));
}

/* 0 and the identity of a ServiceAccount token still valid, or -ENOENT. */
static int sa_token_identity(struct ksim *ks, const char *token, struct ks_ident *ret)
{
    json_t *rec = json_object_get(ks->sa_tokens, token);
    if (!rec)
        return -ENOENT;
    const char *ns = kobj_str(rec, "ns");
    const char *name = kobj_str(rec, "name");
    const char *uid = kobj_str(rec, "uid");
    json_int_t exp = json_integer_value(json_object_get(rec, "exp"));
    struct ks_type *sat = ks_type_find(ks, "", "v1", "serviceaccounts");
    struct ks_type *pt = ks_type_find(ks, "", "v1", "pods");
    const char *pod = kobj_str(rec, "podName");
    bool valid = ns && name && (uint64_t)exp > ks_now(ks) && sat &&
                 uid_matches(ks_get(sat, ns, name), uid) &&
                 (!pod || (pt && uid_matches(ks_get(pt, ns, pod), kobj_str(rec, "podUid"))));
    if (!valid) {
        json_object_del(ks->sa_tokens, token);
        return -ENOENT;
    }
    ret->user = xasprintf("system:serviceaccount:%s:%s", ns, name);
    ret->uid = uid ? xstrdup(uid) : NULL;
    ret->groups = sa_groups(ns);
    return 0;
}

/* 0, or -EACCES for a credential that names nobody, -ENOENT for none given. */
static int authenticate(struct ksim *ks, const char *authorization, struct ks_ident *ret)
{
    if (!authorization || !authorization[0])
        return -ENOENT;
    const char *tok = NULL;
    if (strncasecmp(authorization, "Bearer ", 7) == 0)
        tok = authorization + 7;
    while (tok && *tok == ' ')
        tok++;
    if (!tok || !tok[0])
        return -EACCES;
    if (ks->admin_token && streq(tok, ks->admin_token)) {
        ret->user = xstrdup(KSIM_ADMIN_USER);
        ret->groups = admin_groups();
        return 0;
    }
    return sa_token_identity(ks, tok, ret) == 0 ? 0 : -EACCES;
}

/* ---- request attributes ------------------------------------------------------------------- */

/* The attributes the API server's RequestInfoFactory derives; strings borrowed from rt and req. */
static void request_attrs(const struct ksim_request *req, const struct ks_route *rt, bool resource,
                          struct ks_authz_attrs *a)
{
    const char *m = req->method ? req->method : "";
    *a = (struct ks_authz_attrs){.path = req->path ? req->path : "/"};
    if (!resource) {
        static const char *const lower[][2] = {
            {"GET", "get"},     {"HEAD", "head"},     {"POST", "post"},      {"PUT", "put"},
            {"PATCH", "patch"}, {"DELETE", "delete"}, {"OPTIONS", "options"}};
        a->verb = "";
        for (size_t i = 0; i < ARRAY_SIZE(lower); i++)
            if (streq(m, lower[i][0]))
                a->verb = lower[i][1];
        return;
    }
    a->resource_request = true;
    a->api_group = rt->group;
    a->resource = rt->resource;
    a->name = rt->name;
    a->sub = rt->sub;
    a->ns = rt->ns;
    /* namespaces/NAME[/status|finalize]: the namespace is the object itself */
    if (!rt->ns && streq(rt->resource, "namespaces") && rt->name)
        a->ns = rt->name;
    bool path_watch = rt->n > 2 && (streq(rt->parts[rt->group[0] ? 3 : 2], "watch"));
    if (streq(m, "POST"))
        a->verb = "create";
    else if (streq(m, "PUT"))
        a->verb = "update";
    else if (streq(m, "PATCH"))
        a->verb = "patch";
    else if (streq(m, "DELETE"))
        a->verb = rt->name ? "delete" : "deletecollection";
    else if (streq(m, "GET") || streq(m, "HEAD"))
        a->verb = path_watch ? "watch" : rt->name ? "get" : rt->watch ? "watch" : "list";
    else
        a->verb = "";
}

/* metadata.name=X alone in a list's or watch's field selector names the object (the API
 * server's RequiresExactMatch). Borrowed from q. */
static const char *field_selector_name(json_t *q)
{
    const char *fs = ks_qget(q, "fieldSelector");
    if (!fs || strchr(fs, ','))
        return NULL;
    const char *v = NULL;
    if (str_has_prefix(fs, "metadata.name=="))
        v = fs + 15;
    else if (str_has_prefix(fs, "metadata.name="))
        v = fs + 14;
    return v && v[0] && !strchr(v, '/') && !streq(v, ".") && !streq(v, "..") ? v : NULL;
}

static struct ks_rbac_policy stored_policy(struct ksim *ks)
{
    struct ks_type *r = ks_type_find(ks, RBAC_GROUP, "v1", "roles");
    struct ks_type *cr = ks_type_find(ks, RBAC_GROUP, "v1", "clusterroles");
    struct ks_type *rb = ks_type_find(ks, RBAC_GROUP, "v1", "rolebindings");
    struct ks_type *crb = ks_type_find(ks, RBAC_GROUP, "v1", "clusterrolebindings");
    return (struct ks_rbac_policy){.roles = r ? r->objs : NULL,
                                   .cluster_roles = cr ? cr->objs : NULL,
                                   .role_bindings = rb ? rb->objs : NULL,
                                   .cluster_role_bindings = crb ? crb->objs : NULL};
}

/* The authorizer chain: AlwaysAllow, or system:masters then RBAC. */
static bool authorize(struct ksim *ks, const struct ks_authz_attrs *a, char **ret_reason)
{
    if (ks->opts.authz != KSIM_AUTHZ_RBAC) {
        if (ret_reason)
            *ret_reason = xstrdup("");
        return true;
    }
    struct ks_rbac_policy p = stored_policy(ks);
    return ks_rbac_authorize(&p, a, ret_reason);
}

static void render_forbidden(struct ksim_response *resp, const struct ks_authz_attrs *a,
                             const char *reason)
{
    _cleanup_free_ char *msg = ks_rbac_forbidden_message(a, reason);
    json_t *d = json_object();
    if (a->resource_request) {
        if (a->name && a->name[0])
            json_object_set_new(d, "name", json_string(a->name));
        if (a->api_group && a->api_group[0])
            json_object_set_new(d, "group", json_string(a->api_group));
        json_object_set_new(d, "kind", json_string(a->resource));
    }
    _cleanup_status_ struct ks_status st = {0};
    ks_status_set(&st, 403, "Forbidden", d, "%s", msg);
    ks_render_status(resp, &st);
    strlcpy_s(resp->verb, a->verb && a->verb[0] ? a->verb : "unknown", sizeof(resp->verb));
    if (a->resource_request)
        snprintf(resp->resource, sizeof(resp->resource), "%s%s%s", a->resource,
                 a->sub && a->sub[0] ? "/" : "", a->sub && a->sub[0] ? a->sub : "");
}

static void render_unauthorized(struct ksim_response *resp)
{
    _cleanup_status_ struct ks_status st = {0};
    ks_status_set(&st, 401, "Unauthorized", NULL, "Unauthorized");
    ks_render_status(resp, &st);
}

/* The impersonation filter: each Impersonate-* header is a request to `impersonate` users,
 * groups or serviceaccounts, authorized for the real user; then the request runs as the
 * impersonated user (with system:authenticated, and a ServiceAccount's groups when no group
 * was named). */
static bool impersonate(struct ksim *ks, const struct ksim_request *req, struct ks_ident *id,
                        struct ksim_response *resp)
{
    const char *user = req->impersonate_user;
    if (!user && req->n_impersonate_groups == 0)
        return true;
    if (!user || !user[0]) {
        _cleanup_status_ struct ks_status st = {0};
        ks_status_set(&st, 500, "InternalError", NULL, "%s",
                      "Internal error occurred: requested impersonation of groups without a "
                      "user");
        ks_render_status(resp, &st);
        return false;
    }
    struct ks_authz_attrs a = {.user = id->user,
                               .groups = id->groups,
                               .verb = "impersonate",
                               .resource_request = true,
                               .api_group = "",
                               .resource = "users",
                               .name = user};
    _cleanup_free_ char *sa_ns = NULL;
    const char *sa_prefix = "system:serviceaccount:";
    if (str_has_prefix(user, sa_prefix)) {
        const char *rest = user + strlen(sa_prefix);
        const char *colon = strchr(rest, ':');
        if (colon && colon[1]) {
            sa_ns = xstrndup(rest, (size_t)(colon - rest));
            a.resource = "serviceaccounts";
            a.ns = sa_ns;
            a.name = colon + 1;
        }
    }
    for (size_t i = 0; i <= req->n_impersonate_groups; i++) {
        if (i > 0) {
            a = (struct ks_authz_attrs){.user = id->user,
                                        .groups = id->groups,
                                        .verb = "impersonate",
                                        .resource_request = true,
                                        .api_group = "",
                                        .resource = "groups",
                                        .name = req->impersonate_groups[i - 1]};
        }
        _cleanup_free_ char *reason = NULL;
        if (!authorize(ks, &a, &reason)) {
            render_forbidden(resp, &a, reason);
            return false;
        }
    }
    json_t *groups = json_array();
    for (size_t i = 0; i < req->n_impersonate_groups; i++)
        json_array_append_new(groups, json_string(req->impersonate_groups[i]));
    if (sa_ns && req->n_impersonate_groups == 0) {
        json_decref(groups);
        groups = sa_groups(sa_ns);
    }
    bool has_authn = false;
    size_t i;
    json_t *g;
    json_array_foreach (groups, i, g)
        has_authn |= streq_ptr(json_string_value(g), "system:authenticated");
    if (!has_authn && !streq(user, "system:anonymous"))
        json_array_append_new(groups, json_string("system:authenticated"));
    ks_ident_clear(id);
    id->user = xstrdup(user);
    id->groups = groups;
    return true;
}

bool ks_auth_gate(struct ksim *ks, const struct ksim_request *req, struct ks_ident *ret,
                  struct ksim_response *resp)
{
    *ret = (struct ks_ident){0};
    if (ks->opts.authz == KSIM_AUTHZ_OFF)
        return true;
    struct ks_ident id = {0};
    int r = authenticate(ks, req->authorization, &id);
    if (r == -ENOENT && ks->opts.anonymous_admin) {
        id.user = xstrdup(KSIM_ADMIN_USER);
        id.groups = admin_groups();
        r = 0;
    }
    if (r < 0) {
        render_unauthorized(resp);
        return false;
    }
    if (!impersonate(ks, req, &id, resp)) {
        ks_ident_clear(&id);
        return false;
    }
    _cleanup_(ks_route_free) struct ks_route rt;
    bool resource = ks_route_parse(req->path, req->query, &rt) == 0;
    struct ks_authz_attrs a;
    request_attrs(req, &rt, resource, &a);
    a.user = id.user;
    a.groups = id.groups;
    if (resource && !a.name && (streq(a.verb, "list") || streq(a.verb, "watch")))
        a.name = field_selector_name(rt.query);
    _cleanup_free_ char *reason = NULL;
    if (!authorize(ks, &a, &reason)) {
        render_forbidden(resp, &a, reason);
        ks_ident_clear(&id);
        return false;
    }
    *ret = id;
    return true;
}

/* ---- escalation prevention ---------------------------------------------------------------- */

static void quoted(struct sbuf *b, const char *label, json_t *one)
{
    sbuf_adds(b, label);
    sbuf_adds(b, ":[\"");
    sbuf_adds(b, json_string_value(one) ? json_string_value(one) : "");
    sbuf_adds(b, "\"]");
}

/* A missing permission: its CompactString without the verbs (prefix) gathers the verbs, as
 * CompactRules merges the verbs of one group and resource (rules with resourceNames or
 * nonResourceURLs are kept one per verb). */
static void add_missing(json_t *missing, struct sbuf *prefix, json_t *verb, bool compact)
{
    _cleanup_free_ char *key = ks_text_take(prefix);
    if (!compact) {
        char *k = xasprintf("%s\x1f%s", key, json_string_value(verb));
        json_object_set_new(missing, k, json_pack("[O]", verb));
        free(k);
        return;
    }
    json_t *verbs = json_object_get(missing, key);
    if (!verbs) {
        verbs = json_array();
        json_object_set_new(missing, key, verbs);
    }
    json_array_append(verbs, verb);
}

/* The atomic permissions of rules (BreakdownRule) the user does not hold, into missing
 * (add_missing); ns NULL: cluster-wide. */
static void missing_rules(struct ksim *ks, const struct ks_ident *who, json_t *rules,
                          const char *ns, json_t *missing)
{
    size_t i, gi, ri, vi, ni;
    json_t *rule, *g, *r, *v, *n;
    json_array_foreach (rules, i, rule) {
        json_t *verbs = json_object_get(rule, "verbs");
        json_t *urls = json_object_get(rule, "nonResourceURLs");
        json_array_foreach (urls, ri, r) {
            json_array_foreach (verbs, vi, v) {
                struct ks_authz_attrs a = {.user = who->user,
                                           .groups = who->groups,
                                           .verb = json_string_value(v),
                                           .path = json_string_value(r)};
                if (!a.verb || !a.path || authorize(ks, &a, NULL))
                    continue;
                struct sbuf b;
                sbuf_init(&b, 64 * 1024);
                quoted(&b, "{NonResourceURLs", r);
                add_missing(missing, &b, v, false);
            }
        }
        json_t *names = json_object_get(rule, "resourceNames");
        size_t nn = json_array_size(names) ? json_array_size(names) : 1;
        json_array_foreach (json_object_get(rule, "apiGroups"), gi, g) {
            json_array_foreach (json_object_get(rule, "resources"), ri, r) {
                const char *res = json_string_value(r);
                if (!res || !json_is_string(g))
                    continue;
                const char *slash = strchr(res, '/');
                _cleanup_free_ char *base =
                    slash ? xstrndup(res, (size_t)(slash - res)) : xstrdup(res);
                json_array_foreach (verbs, vi, v) {
                    for (ni = 0; ni < nn; ni++) {
                        n = json_array_get(names, ni);
                        struct ks_authz_attrs a = {.user = who->user,
                                                   .groups = who->groups,
                                                   .verb = json_string_value(v),
                                                   .resource_request = true,
                                                   .api_group = json_string_value(g),
                                                   .resource = base,
                                                   .sub = slash ? slash + 1 : NULL,
                                                   .name = json_string_value(n),
                                                   .ns = ns};
                        if (!a.verb || authorize(ks, &a, NULL))
                            continue;
                        struct sbuf b;
                        sbuf_init(&b, 64 * 1024);
                        quoted(&b, "{APIGroups", g);
                        quoted(&b, ", Resources", r);
                        if (n)
                            quoted(&b, ", ResourceNames", n);
                        add_missing(missing, &b, v, !n);
                    }
                }
            }
        }
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The missing permissions as the API server lists them: one CompactString a line, sorted, each
 * after a newline. */
static char *missing_text(json_t *missing)
{
    size_t n = json_object_size(missing), k = 0;
    char **lines = xcalloc(n ? n : 1, sizeof(*lines));
    const char *key;
    json_t *verbs;
    json_object_foreach (missing, key, verbs) {
        struct sbuf b;
        sbuf_init(&b, 64 * 1024);
        const char *sep = strchr(key, '\x1f');
        _cleanup_free_ char *prefix = sep ? xstrndup(key, (size_t)(sep - key)) : xstrdup(key);
        sbuf_adds(&b, prefix);
        sbuf_adds(&b, ", Verbs:[");
        size_t i;
        json_t *v;
        json_array_foreach (verbs, i, v) {
            sbuf_adds(&b, i ? " \"" : "\"");
            sbuf_adds(&b, json_string_value(v));
            sbuf_adds(&b, "\"");
        }
        sbuf_adds(&b, "]}");
        lines[k++] = ks_text_take(&b);
    }
    qsort(lines, k, sizeof(*lines), cmp_str);
    struct sbuf out;
    sbuf_init(&out, 1u << 20);
    for (size_t i = 0; i < k; i++) {
        sbuf_adds(&out, "\n");
        sbuf_adds(&out, lines[i]);
        free(lines[i]);
    }
    free(lines);
    return ks_text_take(&out);
}

/* The user may `escalate` or `bind` (verb) the role kind/name; ns NULL: cluster-wide. */
static bool may(struct ksim *ks, const struct ks_ident *who, const char *verb, const char *plural,
                const char *name, const char *ns)
{
    struct ks_authz_attrs a = {.user = who->user,
                               .groups = who->groups,
                               .verb = verb,
                               .resource_request = true,
                               .api_group = RBAC_GROUP,
                               .resource = plural,
                               .name = name,
                               .ns = ns};
    return authorize(ks, &a, NULL);
}

bool ks_auth_admit(struct ksim *ks, const struct ks_ident *who, const struct ksim_request *req,
                   struct ks_type *t, const char *ns, const char *sub, struct ksim_response *resp)
{
    const char *m = req->method ? req->method : "";
    if (ks->opts.authz != KSIM_AUTHZ_RBAC || !who->groups || t->crd || sub ||
        !streq(t->group, RBAC_GROUP) || !(streq(m, "POST") || streq(m, "PUT")))
        return true;
    _cleanup_status_ struct ks_status st = {0};
    _cleanup_json_ json_t *obj = ks_parse_body(ks, req, true, &st);
    if (!obj)
        return true; /* the handler answers the bad body */
    const char *name = kobj_name(obj) ? kobj_name(obj) : "";
    const char *ons = t->namespaced ? (ns ? ns : ks_obj_ns(obj)) : NULL;
    json_t *rules = NULL;
    bool binding = str_has_suffix(t->plural, "bindings");
    if (!binding) {
        if (may(ks, who, "escalate", t->plural, name, ons))
            return true;
        rules = json_object_get(obj, "rules");
    } else {
        const char *kind = kobj_path_str(obj, "roleRef.kind");
        const char *rname = kobj_path_str(obj, "roleRef.name");
        bool cluster = streq_ptr(kind, "ClusterRole");
        if (!rname || !(cluster || streq_ptr(kind, "Role")))
            return true; /* validation answers it */
        if (may(ks, who, "bind", cluster ? "clusterroles" : "roles", rname, ons))
            return true;
        struct ks_type *rt = ks_type_find(ks, RBAC_GROUP, "v1", cluster ? "clusterroles" : "roles");
        json_t *role = rt ? ks_get(rt, cluster ? "" : (ons ? ons : ""), rname) : NULL;
        if (!role) {
            ks_not_found(&st, rt, rname);
            ks_render_status(resp, &st);
            return false;
        }
        rules = json_object_get(role, "rules");
    }
    _cleanup_json_ json_t *missing = json_object();
    missing_rules(ks, who, rules, ons, missing);
    if (json_object_size(missing) == 0)
        return true;
    struct sbuf groups;
    sbuf_init(&groups, 64 * 1024);
    size_t i;
    json_t *g;
    json_array_foreach (who->groups, i, g) {
        sbuf_adds(&groups, i ? " \"" : "\"");
        sbuf_adds(&groups, json_string_value(g) ? json_string_value(g) : "");
        sbuf_adds(&groups, "\"");
    }
    _cleanup_free_ char *gtext = ks_text_take(&groups);
    _cleanup_free_ char *mtext = missing_text(missing);
    _cleanup_free_ char *q = ks_type_qualified(t);
    ks_status_set(&st, 403, "Forbidden", ks_status_details(t, name),
                  "%s \"%s\" is forbidden: user \"%s\" (groups=[%s]) is attempting to grant RBAC "
                  "permissions not currently held:%s",
                  q, name, who->user, gtext ? gtext : "", mtext ? mtext : "");
    sbuf_free(&groups);
    ks_render_status(resp, &st);
    return false;
}

/* ---- TokenRequest ------------------------------------------------------------------------- */

static char *new_token(void)
{
    unsigned char raw[32];
    size_t got = 0;
    while (got < sizeof(raw)) {
        ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    for (; got < sizeof(raw); got++) /* getrandom failing is not expected; never repeat anyway */
        raw[got] = (unsigned char)(now_us_mono() >> (got % 8));
    char *hex = xcalloc(1, 2 * sizeof(raw) + 5);
    memcpy(hex, "ksa.", 4);
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(hex + 4 + 2 * i, 3, "%02x", raw[i]);
    return hex;
}

/* Every few thousand tokens, those expired go: the store stays bounded by the live ones. */
static void prune_tokens(struct ksim *ks)
{
    if (json_object_size(ks->sa_tokens) < 4096 || json_object_size(ks->sa_tokens) % 1024)
        return;
    const char *k;
    json_t *v;
    void *n;
    uint64_t now = ks_now(ks);
    json_object_foreach_safe (ks->sa_tokens, n, k, v) {
        if ((uint64_t)json_integer_value(json_object_get(v, "exp")) <= now)
            json_object_del(ks->sa_tokens, k);
    }
}

static void respond_status(struct ksim_response *resp, int code, const char *reason,
                           json_t *details, const char *msg)
{
    _cleanup_status_ struct ks_status st = {0};
    ks_status_set(&st, code, reason, details, "%s", msg);
    ks_render_status(resp, &st);
}

static void respond_invalid(struct ksim_response *resp, const char *kind, const char *group,
                            const char *name, const char *field, const char *msg)
{
    _cleanup_free_ char *full =
        xasprintf("%s.%s \"%s\" is invalid: %s: %s", kind, group, name ? name : "", field, msg);
    _cleanup_free_ char *cause = xasprintf("%s", msg);
    json_t *d = json_pack("{s:s,s:s,s:s,s:[{s:s,s:s,s:s}]}", "name", name ? name : "", "group",
                          group, "kind", kind, "causes", "reason", "FieldValueInvalid", "message",
                          cause, "field", field);
    respond_status(resp, 422, "Invalid", d, full);
}

static void token_request(struct ksim *ks, const struct ksim_request *req, struct ks_type *sat,
                          const char *ns, const char *name, struct ksim_response *resp)
{
    _cleanup_status_ struct ks_status st = {0};
    _cleanup_json_ json_t *body = ks_parse_body(ks, req, true, &st);
    if (!body) {
        ks_render_status(resp, &st);
        return;
    }
    json_t *sa = ks_get(sat, ns, name);
    if (!sa || ks_is_deleting(sa)) {
        ks_not_found(&st, sat, name);
        ks_render_status(resp, &st);
        return;
    }
    json_t *spec = json_object_get(body, "spec");
    json_int_t secs = 3600;
    json_t *es = json_object_get(spec, "expirationSeconds");
    if (json_is_integer(es))
        secs = json_integer_value(es);
    if (secs < 600) {
        _cleanup_free_ char *m =
            xasprintf("Invalid value: %lld: may not specify a duration less than 10 minutes",
                      (long long)secs);
        respond_invalid(resp, "TokenRequest", "authentication.k8s.io", name,
                        "spec.expirationSeconds", m);
        return;
    }
    if (secs > (json_int_t)1 << 32)
        secs = (json_int_t)1 << 32;
    json_t *aud = json_object_get(spec, "audiences");
    json_t *bound = json_object_get(spec, "boundObjectRef");
    const char *bkind = kobj_str(bound, "kind");
    const char *bname = kobj_str(bound, "name");
    json_t *bobj = NULL;
    if (bound && !json_is_null(bound)) {
        if (!streq_ptr(bkind, "Pod") && !streq_ptr(bkind, "Secret") && !streq_ptr(bkind, "Node")) {
            respond_invalid(resp, "TokenRequest", "authentication.k8s.io", name,
                            "spec.boundObjectRef.kind",
                            "Unsupported value: the bound object must be a Pod, Secret or Node");
            return;
        }
        struct ks_type *bt = ks_type_find(ks, "", "v1",
                                          streq(bkind, "Pod")      ? "pods"
                                          : streq(bkind, "Secret") ? "secrets"
                                                                   : "nodes");
        bobj = bt && bname ? ks_get(bt, streq(bkind, "Node") ? "" : ns, bname) : NULL;
        const char *buid = kobj_str(bound, "uid");
        if (!bobj || (buid && buid[0] && !streq_ptr(kobj_path_str(bobj, "metadata.uid"), buid))) {
            _cleanup_free_ char *lk = ks_lower_dup(bkind);
            _cleanup_free_ char *m = xasprintf("%ss \"%s\" not found", lk, bname ? bname : "");
            respond_status(resp, 404, "NotFound", NULL, m);
            return;
        }
    }
    uint64_t exp_ms = ks_now(ks) + (uint64_t)secs * 1000;
    prune_tokens(ks);
    _cleanup_free_ char *tok = new_token();
    json_t *rec = json_pack("{s:s,s:s,s:s?,s:I}", "ns", ns, "name", name, "uid",
                            kobj_path_str(sa, "metadata.uid"), "exp", (json_int_t)exp_ms);
    if (bobj && streq(bkind, "Pod")) {
        json_object_set_new(rec, "podName", json_string(bname));
        json_object_set_new(rec, "podUid", json_string(kobj_path_str(bobj, "metadata.uid")));
    }
    json_object_set_new(ks->sa_tokens, tok, rec);
    if (ks->journal)
        ks_journal_token(ks, tok, rec);
    char now[40], expts[40];
    ks_now_str(ks, now, sizeof(now));
    time_rfc3339(exp_ms, expts, sizeof(expts));
    json_t *aud_out = json_array_size(aud) ? json_incref(aud)
                                           : json_pack("[s]", "https://kubernetes.default.svc");
    json_t *out =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:s},s:{s:o,s:I,s:O},s:{s:s,s:s}}", "kind", "TokenRequest",
                  "apiVersion", "authentication.k8s.io/v1", "metadata", "name", name, "namespace",
                  ns, "creationTimestamp", now, "spec", "audiences", aud_out, "expirationSeconds",
                  secs, "boundObjectRef", bound ? bound : json_null(), "status", "token", tok,
                  "expirationTimestamp", expts);
    ks_json_response(resp, 201, out);
}

/* ---- reviews ------------------------------------------------------------------------------ */

static json_t *str_array(json_t *v)
{
    json_t *a = json_array();
    size_t i;
    json_t *s;
    json_array_foreach (v, i, s) {
        if (json_is_string(s))
            json_array_append(a, s);
    }
    return a;
}

/* SubjectAccessReviewSpec's attributes for user and groups; strings borrowed from spec. */
static int review_attrs(json_t *spec, struct ks_authz_attrs *a)
{
    json_t *ra = json_object_get(spec, "resourceAttributes");
    json_t *na = json_object_get(spec, "nonResourceAttributes");
    if (!!json_is_object(ra) == !!json_is_object(na))
        return -EINVAL;
    if (ra) {
        a->resource_request = true;
        a->verb = kobj_str(ra, "verb") ?: "";
        a->api_group = kobj_str(ra, "group") ?: "";
        a->resource = kobj_str(ra, "resource") ?: "";
        a->sub = kobj_str(ra, "subresource");
        a->name = kobj_str(ra, "name");
        a->ns = kobj_str(ra, "namespace");
    } else {
        a->verb = kobj_str(na, "verb") ?: "";
        a->path = kobj_str(na, "path") ?: "";
    }
    return 0;
}

static void access_review(struct ksim *ks, const struct ks_ident *who,
                          const struct ksim_request *req, struct ks_type *t, const char *ns,
                          struct ksim_response *resp)
{
    _cleanup_status_ struct ks_status st = {0};
    json_t *body = ks_parse_body(ks, req, true, &st);
    if (!body) {
        ks_render_status(resp, &st);
        return;
    }
    _cleanup_json_ json_t *own = body;
    json_t *spec = kobj_ensure_object(body, "spec");
    struct ks_authz_attrs a = {0};
    if (review_attrs(spec, &a) < 0) {
        respond_invalid(resp, t->kind, t->group, "", "spec.resourceAttributes",
                        "Invalid value: \"null\": exactly one of nonResourceAttributes or "
                        "resourceAttributes must be specified");
        return;
    }
    _cleanup_json_ json_t *groups = NULL;
    bool self = streq(t->plural, "selfsubjectaccessreviews");
    if (self) {
        a.user = who->user ? who->user : KSIM_ADMIN_USER;
        groups = who->groups ? json_incref(who->groups) : admin_groups();
    } else {
        a.user = kobj_str(spec, "user") ?: "";
        groups = str_array(json_object_get(spec, "groups"));
        if (!a.user[0] && json_array_size(groups) == 0) {
            respond_invalid(resp, t->kind, t->group, "", "spec.user",
                            "Invalid value: \"\": at least one of user or group must be "
                            "specified");
            return;
        }
    }
    if (ns) { /* LocalSubjectAccessReview: the URL's namespace */
        if (a.ns && a.ns[0] && !streq(a.ns, ns)) {
            _cleanup_free_ char *m =
                xasprintf("Invalid value: \"%s\": must match metadata.namespace", a.ns);
            respond_invalid(resp, t->kind, t->group, "", "spec.resourceAttributes.namespace", m);
            return;
        }
        a.ns = ns;
    }
    a.groups = groups;
    _cleanup_free_ char *reason = NULL;
    bool ok = authorize(ks, &a, &reason);
    json_t *status = json_pack("{s:b}", "allowed", ok);
    if (reason && reason[0])
        json_object_set_new(status, "reason", json_string(reason));
    json_object_set_new(body, "status", status);
    json_t *meta = kobj_ensure_object(body, "metadata");
    if (!json_object_get(meta, "creationTimestamp"))
        json_object_set_new(meta, "creationTimestamp", json_null());
    ks_json_response(resp, 201, json_incref(body));
}

static void token_review(struct ksim *ks, const struct ksim_request *req,
                         struct ksim_response *resp)
{
    _cleanup_status_ struct ks_status st = {0};
    _cleanup_json_ json_t *body = ks_parse_body(ks, req, true, &st);
    if (!body) {
        ks_render_status(resp, &st);
        return;
    }
    const char *tok = kobj_path_str(body, "spec.token");
    struct ks_ident id = {0};
    _cleanup_free_ char *hdr = xasprintf("Bearer %s", tok ? tok : "");
    json_t *status;
    if (tok && authenticate(ks, hdr, &id) == 0) {
        status = json_pack("{s:b,s:{s:s,s:O}}", "authenticated", true, "user", "username", id.user,
                           "groups", id.groups);
        if (id.uid)
            json_object_set_new(json_object_get(status, "user"), "uid", json_string(id.uid));
        ks_ident_clear(&id);
    } else {
        status = json_pack("{s:b,s:{},s:s}", "authenticated", false, "user", "error",
                           "invalid bearer token");
    }
    json_object_set_new(body, "status", status);
    json_object_set_new(kobj_ensure_object(body, "metadata"), "creationTimestamp", json_null());
    ks_json_response(resp, 201, json_incref(body));
}

static void self_subject_review(const struct ks_ident *who, struct ksim_response *resp)
{
    json_t *ui = json_pack("{s:s,s:o}", "username", who->user ? who->user : KSIM_ADMIN_USER,
                           "groups", who->groups ? json_incref(who->groups) : admin_groups());
    if (who->uid)
        json_object_set_new(ui, "uid", json_string(who->uid));
    ks_json_response(resp, 201,
                     json_pack("{s:s,s:s,s:{s:n},s:{s:o}}", "kind", "SelfSubjectReview",
                               "apiVersion", "authentication.k8s.io/v1", "metadata",
                               "creationTimestamp", "status", "userInfo", ui));
}

bool ks_auth_serves(struct ks_type *t, const char *sub)
{
    if (t->crd)
        return false;
    if (streq(t->group, "authorization.k8s.io") || streq(t->group, "authentication.k8s.io"))
        return true;
    return !t->group[0] && streq(t->plural, "serviceaccounts") && streq_ptr(sub, "token");
}

void ks_auth_handle(struct ksim *ks, const struct ks_ident *who, const struct ksim_request *req,
                    struct ks_type *t, const char *ns, const char *name, const char *sub,
                    struct ksim_response *resp)
{
    bool post = streq_ptr(req->method, "POST");
    snprintf(resp->resource, sizeof(resp->resource), "%s%s%s", t->plural, sub ? "/" : "",
             sub ? sub : "");
    strlcpy_s(resp->verb, post ? "create" : "unknown", sizeof(resp->verb));
    bool sa_token = !t->group[0];
    if (!post || (sa_token && !name) || (!sa_token && (name || sub))) {
        _cleanup_status_ struct ks_status st = {0};
        ks_method_not_allowed(&st);
        ks_render_status(resp, &st);
        return;
    }
    if (sa_token)
        token_request(ks, req, t, ns, name, resp);
    else if (streq(t->plural, "tokenreviews"))
        token_review(ks, req, resp);
    else if (streq(t->plural, "selfsubjectreviews"))
        self_subject_review(who, resp);
    else if (streq(t->plural, "selfsubjectrulesreviews"))
        respond_status(resp, 405, "MethodNotAllowed", NULL,
                       "selfsubjectrulesreviews are not served by kubesim");
    else
        access_review(ks, who, req, t, ns, resp);
}

/* The shell's own non-resource URLs (/metrics). */
bool ksim_allowed(struct ksim *ks, const struct ksim_request *req, struct ksim_response *resp)
{
    memset(resp, 0, sizeof(*resp));
    pthread_mutex_lock(&ks->lock);
    struct ks_ident id;
    bool ok = ks_auth_gate(ks, req, &id, resp);
    pthread_mutex_unlock(&ks->lock);
    ks_ident_clear(&id);
    if (!ok && resp->json) {
        resp->body = json_dumps(resp->json, JSON_COMPACT);
        resp->body_len = resp->body ? strlen(resp->body) : 0;
        json_decref(resp->json);
        resp->json = NULL;
    }
    return ok;
}
