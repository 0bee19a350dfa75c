/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's OpenAPI documents and fieldValidation, through ksim_handle: a table of writes with
 * each directive (the status code, the message, the Warning texts), and the documents' shape
 * (index, per group-version documents, CRD schemas, the fieldValidation parameter). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kubesim.h"

static const char *const cm_path = "/api/v1/namespaces/default/configmaps";
static const char *const deploy_path = "/apis/apps/v1/namespaces/default/deployments";
static const char *const widget_path = "/apis/example.com/v1/namespaces/default/widgets";

#define DEPLOY(name, spec)                                                                      \
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"" name "\"}," \
    "\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":{\"metadata\":{"       \
    "\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\"," spec "}]}}}}"
#define WIDGET(name, spec)                                                                         \
    "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"" name "\"}," \
    "\"spec\":" spec "}"

static const char crd[] =
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
    "\"metadata\":{\"name\":\"widgets.example.com\"},\"spec\":{\"group\":\"example.com\","
    "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"widgets\",\"singular\":\"widget\","
    "\"kind\":\"Widget\"},\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,"
    "\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":"
    "\"object\",\"description\":\"The widget.\",\"properties\":{\"size\":{\"type\":\"integer\"},"
    "\"opts\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"object\",\"properties\":"
    "{\"on\":{\"type\":\"boolean\"}}}},\"free\":{\"type\":\"object\","
    "\"x-kubernetes-preserve-unknown-fields\":true},\"closed\":{\"type\":\"object\"}}}}}}}]}}";

static const struct row {
    const char *path, *query, *body;
    int code;
    const char *message; /* a part of the body (Status message), or NULL */
    const char *warning; /* the only Warning text, or NULL: none */
} rows[] = {
    /* known fields, every directive */
    {deploy_path, "fieldValidation=Strict", DEPLOY("ok", "\"image\":\"i\""), 201, NULL, NULL},
    {deploy_path, "", DEPLOY("ok2", "\"image\":\"i\",\"env\":[{\"name\":\"A\"}]"), 201, NULL, NULL},
    /* unknown fields: Strict 400 with the decoder's text, Warn (the default) a warning */
    {deploy_path, "fieldValidation=Strict", DEPLOY("s1", "\"imagex\":\"i\""), 400,
     "Deployment in version \\\"v1\\\" cannot be handled as a Deployment: strict decoding error: "
     "unknown field \\\"spec.template.spec.containers[0].imagex\\\"",
     NULL},
    {deploy_path, "fieldValidation=Warn", DEPLOY("w1", "\"imagex\":\"i\""), 201, NULL,
     "unknown field \"spec.template.spec.containers[0].imagex\""},
    {deploy_path, "", DEPLOY("w2", "\"imagex\":\"i\""), 201, NULL,
     "unknown field \"spec.template.spec.containers[0].imagex\""},
    {deploy_path, "fieldValidation=Ignore", DEPLOY("i1", "\"imagex\":\"i\""), 201, NULL, NULL},
    {cm_path, "fieldValidation=Strict",
     "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\",\"nam\":\"x\"},"
     "\"datas\":{}}",
     400, "strict decoding error: unknown field \\\"metadata.nam\\\", unknown field \\\"datas\\\"",
     NULL},
    /* parts kubesim leaves open take anything */
    {deploy_path, "fieldValidation=Strict",
     DEPLOY("open", "\"image\":\"i\",\"securityContext\":{\"anything\":{\"x\":1}}"), 201, NULL,
     NULL},
    {cm_path, "fieldValidation=Maybe",
     "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"m\"}}", 400,
     "fieldValidation must be one of Ignore, Warn, or Strict", NULL},
    /* custom resources against their CRD's schema */
    {widget_path, "fieldValidation=Strict",
     WIDGET("w", "{\"size\":1,\"opts\":{\"a\":{\"on\":true}}}"), 201, NULL, NULL},
    {widget_path, "fieldValidation=Strict", WIDGET("w2", "{\"sise\":1}"), 400,
     "Widget in version \\\"v1\\\" cannot be handled as a Widget: strict decoding error: unknown "
     "field \\\"spec.sise\\\"",
     NULL},
    {widget_path, "fieldValidation=Strict", WIDGET("w3", "{\"opts\":{\"a\":{\"of\":true}}}"), 400,
     "unknown field \\\"spec.opts.a.of\\\"", NULL},
    {widget_path, "fieldValidation=Strict", WIDGET("w4", "{\"free\":{\"x\":{\"y\":1}}}"), 201, NULL,
     NULL},
    {widget_path, "fieldValidation=Strict", WIDGET("w5", "{\"closed\":{\"x\":1}}"), 400,
     "unknown field \\\"spec.closed.x\\\"", NULL},
    {widget_path, "", WIDGET("w6", "{\"sise\":1}"), 201, NULL, "unknown field \"spec.sise\""},
};

static void req(struct ksim *ks, const char *method, const char *path, const char *query,
                const char *ct, const char *body, struct ksim_response *resp)
{
    struct ksim_request r = {.method = method,
                             .path = path,
                             .query = query,
                             .content_type = ct,
                             .body = body,
                             .body_len = body ? strlen(body) : 0};
    ksim_handle(ks, &r, resp);
}

static struct ksim *new_sim(void)
{
    struct ksim_opts o;
    ksim_opts_default(&o);
    struct ksim *ks = ksim_new(&o);
    struct ksim_response resp;
    req(ks, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", NULL,
        "application/json", crd, &resp);
    assert_int_equal(resp.code, 201);
    ksim_response_free(&resp);
    return ks;
}

static void test_field_validation(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *r = &rows[i];
        struct ksim_response resp;
        req(ks, "POST", r->path, r->query, "application/json", r->body, &resp);
        if (resp.code != r->code || (r->message && !strstr(resp.body, r->message)))
            fail_msg("row %zu: %d %s", i, resp.code, resp.body);
        size_t nw = json_array_size(resp.warnings);
        if (r->warning) {
            if (nw != 1 || strcmp(json_string_value(json_array_get(resp.warnings, 0)), r->warning))
                fail_msg("row %zu: warnings %zu: %s", i, nw,
                         nw ? json_string_value(json_array_get(resp.warnings, 0)) : "");
        } else if (nw) {
            fail_msg("row %zu: unexpected warning %s", i,
                     json_string_value(json_array_get(resp.warnings, 0)));
        }
        ksim_response_free(&resp);
    }
    /* a merge patch is checked too; a server-side apply has its own wording */
    struct ksim_response resp;
    req(ks, "PATCH", "/apis/apps/v1/namespaces/default/deployments/ok", "fieldValidation=Strict",
        "application/merge-patch+json", "{\"spec\":{\"replica\":2,\"paused\":null}}", &resp);
    assert_int_equal(resp.code, 400);
    assert_non_null(strstr(resp.body, "unknown field \\\"spec.replica\\\""));
    ksim_response_free(&resp);
    req(ks, "PATCH", "/apis/apps/v1/namespaces/default/deployments/ok",
        "fieldValidation=Strict&fieldManager=t", "application/apply-patch+yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: ok}\nspec: {replica: 2}\n", &resp);
    assert_int_equal(resp.code, 400);
    assert_non_null(strstr(resp.body, ".spec.replica: field not declared in schema"));
    ksim_response_free(&resp);
    ksim_free(ks);
}

static json_t *get_json(struct ksim *ks, const char *path, int want)
{
    struct ksim_response resp;
    req(ks, "GET", path, NULL, NULL, NULL, &resp);
    if (resp.code != want)
        fail_msg("GET %s: %d %s", path, resp.code, resp.body);
    json_t *v = json_loads(resp.body, 0, NULL);
    ksim_response_free(&resp);
    assert_non_null(v);
    return v;
}

static void test_documents(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    json_t *idx = get_json(ks, "/openapi/v3", 200);
    const char *u = json_string_value(
        json_object_get(json_object_get(json_object_get(idx, "paths"), "apis/example.com/v1"),
                        "serverRelativeURL"));
    assert_non_null(u);
    assert_true(strncmp(u, "/openapi/v3/apis/example.com/v1?hash=", 37) == 0);
    assert_non_null(json_object_get(json_object_get(idx, "paths"), "api/v1"));
    json_decref(idx);

    json_t *doc = get_json(ks, "/openapi/v3/apis/example.com/v1", 200);
    json_t *w = json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"),
                                "com.example.v1.Widget");
    assert_non_null(w);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_object_get(w, "properties"), "spec"),
                                          "description")),
        "The widget.");
    json_t *patch = json_object_get(
        json_object_get(json_object_get(doc, "paths"),
                        "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"),
        "patch");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(patch, "x-kubernetes-group-version-kind"), "kind")),
                        "Widget");
    bool fv = false;
    size_t i;
    json_t *p;
    json_array_foreach (json_object_get(patch, "parameters"), i, p)
        fv |= !strcmp(json_string_value(json_object_get(p, "name")), "fieldValidation");
    assert_true(fv);
    json_decref(doc);

    json_t *v2 = get_json(ks, "/openapi/v2", 200);
    assert_string_equal(json_string_value(json_object_get(v2, "swagger")), "2.0");
    assert_non_null(
        json_object_get(json_object_get(v2, "definitions"), "io.k8s.api.apps.v1.DaemonSet"));
    json_decref(v2);
    json_decref(get_json(ks, "/openapi/v3/apis/nope/v1", 404));
    json_decref(get_json(ks, "/openapi/v3/api/v2", 404));
    ksim_free(ks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_field_validation),
        cmocka_unit_test(test_documents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
