/* SPDX-License-Identifier: Apache-2.0 */
/* The RBAC authorizer (rbac.c) as the API server evaluates it: a table of requests against one
 * policy (verbs, wildcards, subresources and "* /sub", resourceNames, nonResourceURLs, binding
 * kinds and subjects, the built-in bootstrap roles, dangling references), the 403 messages; and
 * the core's authentication (admin and ServiceAccount tokens, impersonation) through
 * ksim_handle. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ks-rbac.h"
#include "kubesim.h"

static const char *const policy_json =
    "{\"roles\":{"
    "  \"team/evict\":{\"metadata\":{\"name\":\"evict\",\"namespace\":\"team\"},\"rules\":["
    "    {\"apiGroups\":[\"\"],\"resources\":[\"pods/eviction\"],\"verbs\":[\"create\"]},"
    "    {\"apiGroups\":[\"apps\"],\"resources\":[\"*/scale\"],\"verbs\":[\"update\"]}]}},"
    " \"cluster_roles\":{"
    "  \"/reader\":{\"metadata\":{\"name\":\"reader\"},\"rules\":["
    "    {\"apiGroups\":[\"\"],\"resources\":[\"pods\",\"pods/log\"],\"verbs\":[\"get\",\"list\","
    "     \"watch\"]}]},"
    "  \"/one-cm\":{\"metadata\":{\"name\":\"one-cm\"},\"rules\":["
    "    {\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"resourceNames\":[\"cm1\"],"
    "     \"verbs\":[\"get\",\"update\"]}]},"
    "  \"/nodes\":{\"metadata\":{\"name\":\"nodes\"},\"rules\":["
    "    {\"apiGroups\":[\"\"],\"resources\":[\"nodes/status\"],\"verbs\":[\"patch\"]},"
    "    {\"apiGroups\":[\"*\"],\"resources\":[\"leases\"],\"verbs\":[\"*\"]}]},"
    "  \"/urls\":{\"metadata\":{\"name\":\"urls\"},\"rules\":["
    "    {\"nonResourceURLs\":[\"/metrics\",\"/logs/*\"],\"verbs\":[\"get\"]}]}},"
    " \"role_bindings\":{"
    "  \"team/r\":{\"metadata\":{\"name\":\"r\",\"namespace\":\"team\"},"
    "    \"roleRef\":{\"kind\":\"ClusterRole\",\"name\":\"reader\"},"
    "    \"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"bot\"}]},"
    "  \"team/cm\":{\"metadata\":{\"name\":\"cm\",\"namespace\":\"team\"},"
    "    \"roleRef\":{\"kind\":\"ClusterRole\",\"name\":\"one-cm\"},"
    "    \"subjects\":[{\"kind\":\"User\",\"name\":\"carol\"}]},"
    "  \"team/e\":{\"metadata\":{\"name\":\"e\",\"namespace\":\"team\"},"
    "    \"roleRef\":{\"kind\":\"Role\",\"name\":\"evict\"},"
    "    \"subjects\":[{\"kind\":\"Group\",\"name\":\"system:serviceaccounts:team\"}]},"
    "  \"other/x\":{\"metadata\":{\"name\":\"x\",\"namespace\":\"other\"},"
    "    \"roleRef\":{\"kind\":\"Role\",\"name\":\"gone\"},"
    "    \"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"bot\",\"namespace\":\"team\"}]}},"
    " \"cluster_role_bindings\":{"
    "  \"/n\":{\"metadata\":{\"name\":\"n\"},\"roleRef\":{\"kind\":\"ClusterRole\",\"name\":"
    "    \"nodes\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"dave\"}]},"
    "  \"/u\":{\"metadata\":{\"name\":\"u\"},\"roleRef\":{\"kind\":\"ClusterRole\",\"name\":"
    "    \"urls\"},\"subjects\":[{\"kind\":\"Group\",\"name\":\"monitoring\"}]},"
    "  \"/sa-no-ns\":{\"metadata\":{\"name\":\"sa-no-ns\"},\"roleRef\":{\"kind\":\"ClusterRole\","
    "    \"name\":\"nodes\"},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"bot\"}]}}}";

#define BOT "system:serviceaccount:team:bot"
#define BOT_G \
    "[\"system:serviceaccounts\",\"system:serviceaccounts:team\",\"system:authenticated\"]"
#define AUTH_G "[\"system:authenticated\"]"

static const struct row {
    const char *user, *groups; /* groups: a JSON array */
    const char *verb;
    bool res;
    const char *group, *resource, *sub, *name, *ns, *path;
    bool allowed;
    const char *reason; /* a substring of the reason, or NULL */
} rows[] = {
    /* a RoleBinding to a ClusterRole: that namespace only; ServiceAccount subject without a
     * namespace takes the binding's */
    {BOT, BOT_G, "get", true, "", "pods", NULL, "p", "team", NULL, true,
     "RoleBinding \"r/team\" of ClusterRole \"reader\" to ServiceAccount \"bot/team\""},
    {BOT, BOT_G, "list", true, "", "pods", NULL, NULL, "team", NULL, true, NULL},
    {BOT, BOT_G, "watch", true, "", "pods", NULL, NULL, "team", NULL, true, NULL},
    {BOT, BOT_G, "delete", true, "", "pods", NULL, "p", "team", NULL, false, NULL},
    {BOT, BOT_G, "get", true, "", "pods", NULL, "p", "default", NULL, false, NULL},
    {BOT, BOT_G, "list", true, "", "pods", NULL, NULL, NULL, NULL, false, NULL},
    {BOT, BOT_G, "get", true, "apps", "pods", NULL, "p", "team", NULL, false, NULL},
    /* subresources are resources of their own */
    {BOT, BOT_G, "get", true, "", "pods", "log", "p", "team", NULL, true, NULL},
    {BOT, BOT_G, "get", true, "", "pods", "exec", "p", "team", NULL, false, NULL},
    {BOT, BOT_G, "create", true, "", "pods", "eviction", "p", "team", NULL, true,
     "RoleBinding \"e/team\" of Role \"evict\" to Group \"system:serviceaccounts:team\""},
    {BOT, BOT_G, "create", true, "", "pods", NULL, NULL, "team", NULL, false, NULL},
    /* "*" + "/scale" */
    {BOT, BOT_G, "update", true, "apps", "deployments", "scale", "d", "team", NULL, true, NULL},
    {BOT, BOT_G, "update", true, "apps", "deployments", NULL, "d", "team", NULL, false, NULL},
    {BOT, BOT_G, "update", true, "apps", "deployments", "status", "d", "team", NULL, false, NULL},
    /* resourceNames: that name only, never a list */
    {"carol", AUTH_G, "get", true, "", "configmaps", NULL, "cm1", "team", NULL, true, NULL},
    {"carol", AUTH_G, "get", true, "", "configmaps", NULL, "cm2", "team", NULL, false, NULL},
    {"carol", AUTH_G, "list", true, "", "configmaps", NULL, NULL, "team", NULL, false, NULL},
    /* ClusterRoleBinding: everywhere; '*' verbs and API groups */
    {"dave", AUTH_G, "patch", true, "", "nodes", "status", "n1", NULL, NULL, true,
     "ClusterRoleBinding \"n\" of ClusterRole \"nodes\" to User \"dave\""},
    {"dave", AUTH_G, "patch", true, "", "nodes", NULL, "n1", NULL, NULL, false, NULL},
    {"dave", AUTH_G, "deletecollection", true, "coordination.k8s.io", "leases", NULL, NULL,
     "kube-system", NULL, true, NULL},
    {"dave", AUTH_G, "get", true, "", "configmaps", NULL, "cm1", "team", NULL, false, NULL},
    /* a ServiceAccount subject without a namespace in a ClusterRoleBinding matches nobody */
    {BOT, BOT_G, "patch", true, "", "nodes", "status", "n1", NULL, NULL, false, NULL},
    /* nonResourceURLs: exact or prefix*; never a resource */
    {"erin", "[\"monitoring\",\"system:authenticated\"]", "get", false, NULL, NULL, NULL, NULL,
     NULL, "/metrics", true, NULL},
    {"erin", "[\"monitoring\"]", "get", false, NULL, NULL, NULL, NULL, NULL, "/logs/a/b", true,
     NULL},
    {"erin", "[\"monitoring\"]", "get", false, NULL, NULL, NULL, NULL, NULL, "/logs", false, NULL},
    {"erin", "[\"monitoring\"]", "post", false, NULL, NULL, NULL, NULL, NULL, "/metrics", false,
     NULL},
    /* the bootstrap roles: discovery and basic-user for the authenticated, public info for all */
    {"frank", AUTH_G, "get", false, NULL, NULL, NULL, NULL, NULL, "/apis/apps/v1", true,
     "system:discovery"},
    {"frank", AUTH_G, "create", true, "authorization.k8s.io", "selfsubjectaccessreviews", NULL,
     NULL, NULL, NULL, true, "system:basic-user"},
    {"frank", AUTH_G, "create", true, "authorization.k8s.io", "subjectaccessreviews", NULL, NULL,
     NULL, NULL, false, NULL},
    {"system:anonymous", "[\"system:unauthenticated\"]", "get", false, NULL, NULL, NULL, NULL, NULL,
     "/version", true, "system:public-info-viewer"},
    {"system:anonymous", "[\"system:unauthenticated\"]", "get", false, NULL, NULL, NULL, NULL, NULL,
     "/apis", false, NULL},
    /* system:masters may do anything */
    {"root", "[\"system:masters\"]", "impersonate", true, "", "users", NULL, "x", NULL, NULL, true,
     NULL},
    /* a dangling reference is the reason of a denial */
    {BOT, BOT_G, "get", true, "", "secrets", NULL, "s", "other", NULL, false,
     "RBAC: role.rbac.authorization.k8s.io \"gone\" not found"},
};

static void test_table(void **state)
{
    (void)state;
    json_t *pj = json_loads(policy_json, 0, NULL);
    assert_non_null(pj);
    struct ks_rbac_policy p = {.roles = json_object_get(pj, "roles"),
                               .cluster_roles = json_object_get(pj, "cluster_roles"),
                               .role_bindings = json_object_get(pj, "role_bindings"),
                               .cluster_role_bindings =
                                   json_object_get(pj, "cluster_role_bindings")};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *r = &rows[i];
        json_t *groups = json_loads(r->groups, 0, NULL);
        struct ks_authz_attrs a = {.user = r->user,
                                   .groups = groups,
                                   .verb = r->verb,
                                   .resource_request = r->res,
                                   .api_group = r->group,
                                   .resource = r->resource,
                                   .sub = r->sub,
                                   .name = r->name,
                                   .ns = r->ns,
                                   .path = r->path};
        char *reason = NULL;
        bool ok = ks_rbac_authorize(&p, &a, &reason);
        if (ok != r->allowed || (r->reason && !strstr(reason, r->reason)))
            fail_msg("row %zu (%s %s %s/%s): allowed %d, want %d; reason \"%s\"", i, r->user,
                     r->verb, r->resource ? r->resource : r->path, r->sub ? r->sub : "", ok,
                     r->allowed, reason);
        free(reason);
        json_decref(groups);
    }
    json_decref(pj);
}

static void test_messages(void **state)
{
    (void)state;
    struct {
        struct ks_authz_attrs a;
        const char *reason, *want;
    } m[] = {
        {{.user = BOT,
          .verb = "get",
          .resource_request = true,
          .api_group = "",
          .resource = "pods",
          .name = "x",
          .ns = "ns"},
         "",
         "pods \"x\" is forbidden: User \"" BOT "\" cannot get resource \"pods\" in API group "
         "\"\" in the namespace \"ns\""},
        {{.user = "u",
          .verb = "list",
          .resource_request = true,
          .api_group = "",
          .resource = "nodes"},
         NULL,
         "nodes is forbidden: User \"u\" cannot list resource \"nodes\" in API group \"\" at the "
         "cluster scope"},
        {{.user = "u",
          .verb = "create",
          .resource_request = true,
          .api_group = "",
          .resource = "pods",
          .sub = "eviction",
          .name = "p",
          .ns = "n"},
         "RBAC: role.rbac.authorization.k8s.io \"r\" not found",
         "pods \"p\" is forbidden: User \"u\" cannot create resource \"pods/eviction\" in API "
         "group \"\" in the namespace \"n\": RBAC: role.rbac.authorization.k8s.io \"r\" not "
         "found"},
        {{.user = "u",
          .verb = "watch",
          .resource_request = true,
          .api_group = "apps",
          .resource = "daemonsets",
          .ns = "n"},
         NULL,
         "daemonsets.apps is forbidden: User \"u\" cannot watch resource \"daemonsets\" in API "
         "group \"apps\" in the namespace \"n\""},
        {{.user = "u", .verb = "get", .path = "/metrics"},
         NULL,
         "forbidden: User \"u\" cannot get path \"/metrics\""},
    };
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        char *s = ks_rbac_forbidden_message(&m[i].a, m[i].reason);
        assert_string_equal(s, m[i].want);
        free(s);
    }
}

/* ---- the core: tokens, impersonation, reviews --------------------------------------------- */

static int call(struct ksim *ks, const char *method, const char *path, const char *auth,
                const char *as_user, const char *body, char **ret_body)
{
    struct ksim_request rq = {.method = method,
                              .path = path,
                              .content_type = "application/json",
                              .body = body,
                              .body_len = body ? strlen(body) : 0,
                              .authorization = auth,
                              .impersonate_user = as_user};
    struct ksim_response rs;
    ksim_handle(ks, &rq, &rs);
    int code = rs.code;
    if (ret_body)
        *ret_body = strdup(rs.body ? rs.body : "");
    ksim_response_free(&rs);
    return code;
}

static void test_core(void **state)
{
    (void)state;
    struct ksim_opts o;
    ksim_opts_default(&o);
    o.authz = KSIM_AUTHZ_RBAC;
    o.admin_token = "adm";
    struct ksim *ks = ksim_new(&o);
    const char *A = "Bearer adm";
    assert_int_equal(call(ks, "GET", "/api/v1/nodes", NULL, NULL, NULL, NULL), 401);
    assert_int_equal(call(ks, "GET", "/api/v1/nodes", "Bearer nope", NULL, NULL, NULL), 401);
    assert_int_equal(call(ks, "GET", "/api/v1/nodes", A, NULL, NULL, NULL), 200);
    assert_int_equal(call(ks, "POST", "/api/v1/namespaces/default/serviceaccounts", A, NULL,
                          "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":{"
                          "\"name\":\"sa\"}}",
                          NULL),
                     201);
    char *b = NULL;
    assert_int_equal(call(ks, "POST", "/api/v1/namespaces/default/serviceaccounts/sa/token", A,
                          NULL,
                          "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":"
                          "\"TokenRequest\",\"spec\":{}}",
                          &b),
                     201);
    json_t *tr = json_loads(b, 0, NULL);
    free(b);
    const char *tok = json_string_value(json_object_get(json_object_get(tr, "status"), "token"));
    assert_non_null(tok);
    char auth[256];
    snprintf(auth, sizeof(auth), "Bearer %s", tok);
    json_decref(tr);
    assert_int_equal(call(ks, "GET", "/api/v1/namespaces/default/pods", auth, NULL, NULL, &b), 403);
    assert_non_null(strstr(b, "pods is forbidden: User \\\"system:serviceaccount:default:sa\\\" "
                              "cannot list resource \\\"pods\\\""));
    free(b);
    /* discovery and the self review need no binding */
    assert_int_equal(call(ks, "GET", "/apis", auth, NULL, NULL, NULL), 200);
    assert_int_equal(
        call(ks, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", auth, NULL,
             "{\"spec\":{\"resourceAttributes\":{\"verb\":\"list\",\"resource\":\"pods\","
             "\"namespace\":\"default\"}}}",
             &b),
        201);
    assert_non_null(strstr(b, "\"allowed\":false"));
    free(b);
    /* a ServiceAccount may not impersonate; the admin may, and is then that user */
    assert_int_equal(call(ks, "GET", "/api/v1/nodes", auth, "root", NULL, NULL), 403);
    assert_int_equal(
        call(ks, "GET", "/api/v1/nodes", A, "system:serviceaccount:default:sa", NULL, NULL), 403);
    /* a binding makes it allowed, at once */
    assert_int_equal(
        call(ks, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", A,
             NULL,
             "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\","
             "\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s."
             "io\",\"kind\":\"ClusterRole\",\"name\":\"pods\"},\"subjects\":[{\"kind\":"
             "\"ServiceAccount\",\"name\":\"sa\"}]}",
             NULL),
        201);
    assert_int_equal(call(ks, "GET", "/api/v1/namespaces/default/pods", auth, NULL, NULL, &b), 403);
    assert_non_null(
        strstr(b, "RBAC: clusterrole.rbac.authorization.k8s.io \\\"pods\\\" not found"));
    free(b);
    assert_int_equal(call(ks, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", A, NULL,
                          "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":"
                          "\"ClusterRole\",\"metadata\":{\"name\":\"pods\"},\"rules\":[{"
                          "\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"verbs\":[\"list\"]}]}",
                          NULL),
                     201);
    assert_int_equal(call(ks, "GET", "/api/v1/namespaces/default/pods", auth, NULL, NULL, NULL),
                     200);
    /* escalation: the ServiceAccount cannot grant what it does not hold */
    assert_int_equal(call(ks, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", auth, NULL,
                          "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":"
                          "\"ClusterRole\",\"metadata\":{\"name\":\"x\"},\"rules\":[{"
                          "\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"verbs\":[\"list\"]}]}",
                          NULL),
                     403); /* no create on clusterroles in the first place */
    assert_int_equal(call(ks, "PUT", "/apis/rbac.authorization.k8s.io/v1/clusterroles/pods", A,
                          NULL,
                          "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":"
                          "\"ClusterRole\",\"metadata\":{\"name\":\"pods\"},\"rules\":[{"
                          "\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"verbs\":[\"list\"]},{"
                          "\"apiGroups\":[\"rbac.authorization.k8s.io\"],\"resources\":["
                          "\"roles\"],\"verbs\":[\"create\"]}]}",
                          NULL),
                     200);
    assert_int_equal(call(ks, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
                          auth, NULL,
                          "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\","
                          "\"metadata\":{\"name\":\"r\"},\"rules\":[{\"apiGroups\":[\"\"],"
                          "\"resources\":[\"pods\"],\"verbs\":[\"watch\",\"list\",\"get\"]},{"
                          "\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],"
                          "\"resourceNames\":[\"c\"],\"verbs\":[\"get\"]}]}",
                          &b),
                     403);
    assert_non_null(strstr(b, "roles.rbac.authorization.k8s.io \\\"r\\\" is forbidden: user "
                              "\\\"system:serviceaccount:default:sa\\\" (groups=[\\\"system:"
                              "serviceaccounts\\\" \\\"system:serviceaccounts:default\\\" "
                              "\\\"system:authenticated\\\"]) is attempting to grant RBAC "
                              "permissions not currently held:\\n{APIGroups:[\\\"\\\"], "
                              "Resources:[\\\"configmaps\\\"], ResourceNames:[\\\"c\\\"], "
                              "Verbs:[\\\"get\\\"]}\\n{APIGroups:[\\\"\\\"], "
                              "Resources:[\\\"pods\\\"], Verbs:[\\\"watch\\\" "
                              "\\\"get\\\"]}\""));
    free(b);
    /* the ServiceAccount goes, and its token with it */
    assert_int_equal(
        call(ks, "DELETE", "/api/v1/namespaces/default/serviceaccounts/sa", A, NULL, NULL, NULL),
        200);
    assert_int_equal(call(ks, "GET", "/api/v1/namespaces/default/pods", auth, NULL, NULL, NULL),
                     401);
    ksim_free(ks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_core),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
