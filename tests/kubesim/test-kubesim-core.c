/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of kubesim's core: requests in, responses out, with an injected clock. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "kobj.h"
#include "kubesim.h"
#include "yamlcfg.h"

static uint64_t fake_now = 1800000000000ull;
static uint64_t clock_fn(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static struct ksim *new_sim(void)
{
    struct ksim_opts o;
    ksim_opts_default(&o);
    o.now_ms = clock_fn;
    o.pod_ready_delay_ms = 1000;
    o.watch_retention_ms = 60000;
    o.max_body = 4096;
    return ksim_new(&o);
}

/* Sends one request; returns the parsed body (or NULL) and the code. */
static json_t *call(struct ksim *ks, const char *method, const char *path, const char *query,
                    const char *ctype, const char *body, int *code)
{
    struct ksim_request rq = {.method = method,
                              .path = path,
                              .query = query,
                              .content_type = ctype ? ctype : "application/json",
                              .accept = "application/json",
                              .body = body,
                              .body_len = body ? strlen(body) : 0};
    struct ksim_response rs;
    ksim_handle(ks, &rq, &rs);
    *code = rs.code;
    json_t *v = rs.body ? json_loads(rs.body, 0, NULL) : NULL;
    if (rs.watch)
        ksim_watch_free(ks, rs.watch);
    ksim_response_free(&rs);
    return v;
}

static json_t *ok(struct ksim *ks, const char *method, const char *path, const char *query,
                  const char *ctype, const char *body, int want)
{
    int code = 0;
    json_t *v = call(ks, method, path, query, ctype, body, &code);
    if (code != want) {
        char *s = v ? json_dumps(v, 0) : NULL;
        fprintf(stderr, "%s %s: got %d want %d: %s\n", method, path, code, want, s ? s : "");
        free(s);
    }
    assert_int_equal(code, want);
    return v;
}

static const char *js(json_t *v, const char *path)
{
    json_t *c = v;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *tok = strtok(buf, "."); tok && c; tok = strtok(NULL, "."))
        c = json_object_get(c, tok);
    return json_string_value(c);
}

static json_t *jp(json_t *v, const char *path)
{
    json_t *c = v;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *tok = strtok(buf, "."); tok && c; tok = strtok(NULL, "."))
        c = json_is_array(c) ? json_array_get(c, (size_t)atoi(tok)) : json_object_get(c, tok);
    return c;
}

static void create_node(struct ksim *ks, const char *name, const char *labels_json,
                        const char *taints_json)
{
    char body[2048];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\","
             "\"labels\":%s},\"spec\":{\"taints\":%s},\"status\":{\"conditions\":[{\"type\":"
             "\"Ready\",\"status\":\"True\"}]}}",
             name, labels_json ? labels_json : "{}", taints_json ? taints_json : "[]");
    json_decref(ok(ks, "POST", "/api/v1/nodes", NULL, NULL, body, 201));
}

/* ---- selectors ---------------------------------------------------------------------------- */

static void test_label_selectors(void **state)
{
    (void)state;
    json_t *labels = json_pack("{s:s,s:s}", "app", "gpu", "tier", "node");
    struct {
        const char *sel;
        bool match;
    } cases[] = {
        {"", true},
        {"app=gpu", true},
        {"app==gpu", true},
        {"app!=gpu", false},
        {"app in (gpu, cpu)", true},
        {"app notin (gpu)", false},
        {"tier", true},
        {"!tier", false},
        {"missing", false},
        {"!missing", true},
        {"app=gpu,tier=node", true},
        {"app=gpu,tier=other", false},
        {"missing!=x", true},
        {"missing notin (x)", true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct err e = {0};
        struct ksim_selector *s = ksim_label_selector_parse(cases[i].sel, &e);
        assert_non_null(s);
        if (ksim_selector_matches(s, labels) != cases[i].match)
            fail_msg("selector \"%s\"", cases[i].sel);
        ksim_selector_free(s);
    }
    const char *bad[] = {"app=(", "app in gpu", "a b", "=x", "app in (x", "-bad=x", "app=x=y"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct err e = {0};
        struct ksim_selector *s = ksim_label_selector_parse(bad[i], &e);
        if (s)
            fail_msg("selector \"%s\" should be rejected", bad[i]);
        assert_true(strlen(err_msg(&e)) > 0);
    }
    json_decref(labels);
}

static void test_selectors_over_http(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    create_node(ks, "a", "{\"gpu\":\"true\"}", NULL);
    create_node(ks, "b", "{\"gpu\":\"false\"}", NULL);
    create_node(ks, "c", NULL, NULL);
    json_t *l = ok(ks, "GET", "/api/v1/nodes", "labelSelector=gpu%3Dtrue", NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(l, "items")), 1);
    json_decref(l);
    l = ok(ks, "GET", "/api/v1/nodes", "labelSelector=gpu", NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(l, "items")), 2);
    json_decref(l);
    l = ok(ks, "GET", "/api/v1/nodes", "labelSelector=%21gpu", NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(l, "items")), 1);
    json_decref(l);
    l = ok(ks, "GET", "/api/v1/nodes", "fieldSelector=metadata.name%21%3Da", NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(l, "items")), 2);
    json_decref(l);
    l = ok(ks, "GET", "/api/v1/nodes", "labelSelector=gpu%20in%20(", NULL, NULL, 400);
    assert_string_equal(js(l, "reason"), "BadRequest");
    json_decref(l);
    l = ok(ks, "GET", "/api/v1/nodes", "fieldSelector=spec.bogus%3D1", NULL, NULL, 400);
    assert_string_equal(js(l, "message"), "field label not supported: spec.bogus");
    json_decref(l);
    /* pods by spec.nodeName and status.phase */
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods", NULL, NULL,
                   "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},"
                   "\"spec\":{\"nodeName\":\"a\",\"containers\":[{\"name\":\"c\",\"image\":"
                   "\"x:1\"}]}}",
                   201));
    l = ok(ks, "GET", "/api/v1/pods", "fieldSelector=spec.nodeName%3Da,status.phase%3DPending",
           NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(l, "items")), 1);
    json_decref(l);
    l = ok(ks, "GET", "/api/v1/pods", "fieldSelector=spec.nodeName%3Db", NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(l, "items")), 0);
    json_decref(l);
    ksim_free(ks);
}

/* ---- CRUD semantics and error statuses ---------------------------------------------------- */

static void test_crud_semantics(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    const char *cm = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                     "\"c1\"},\"data\":{\"a\":\"1\"}}";
    json_t *o = ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL, cm, 201);
    assert_non_null(js(o, "metadata.uid"));
    assert_non_null(js(o, "metadata.creationTimestamp"));
    const char *rv1 = js(o, "metadata.resourceVersion");
    assert_non_null(rv1);
    char stale[512];
    snprintf(stale, sizeof(stale),
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c1\","
             "\"resourceVersion\":\"%s\"},\"data\":{\"a\":\"2\"}}",
             rv1);
    json_decref(o);
    /* duplicate create */
    o = ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL, cm, 409);
    assert_string_equal(js(o, "reason"), "AlreadyExists");
    assert_string_equal(js(o, "message"), "configmaps \"c1\" already exists");
    json_decref(o);
    /* update with the right rv, then the same (now stale) rv again */
    o = ok(ks, "PUT", "/api/v1/namespaces/default/configmaps/c1", NULL, NULL, stale, 200);
    assert_string_equal(js(o, "data.a"), "2");
    json_decref(o);
    o = ok(ks, "PUT", "/api/v1/namespaces/default/configmaps/c1", NULL, NULL, stale, 409);
    assert_string_equal(js(o, "reason"), "Conflict");
    assert_non_null(strstr(js(o, "message"), "the object has been modified"));
    json_decref(o);
    /* not found, with details */
    o = ok(ks, "GET", "/api/v1/namespaces/default/configmaps/nope", NULL, NULL, NULL, 404);
    assert_string_equal(js(o, "message"), "configmaps \"nope\" not found");
    assert_string_equal(js(o, "details.kind"), "configmaps");
    json_decref(o);
    o = ok(ks, "GET", "/apis/apps/v1/namespaces/default/daemonsets/nope", NULL, NULL, NULL, 404);
    assert_string_equal(js(o, "message"), "daemonsets.apps \"nope\" not found");
    assert_string_equal(js(o, "details.group"), "apps");
    json_decref(o);
    /* invalid name */
    o = ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL,
           "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"Bad_Name\"}}",
           422);
    assert_string_equal(js(o, "reason"), "Invalid");
    assert_string_equal(js(jp(o, "details.causes.0"), "field"), "metadata.name");
    assert_string_equal(js(o, "details.kind"), "ConfigMap");
    json_decref(o);
    /* missing namespace */
    o = ok(ks, "POST", "/api/v1/namespaces/ghost/configmaps", NULL, NULL, cm, 404);
    assert_string_equal(js(o, "message"), "namespaces \"ghost\" not found");
    json_decref(o);
    /* malformed and wrong bodies */
    o = ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL,
           "{\"apiVersion\":", 400);
    assert_string_equal(js(o, "reason"), "BadRequest");
    json_decref(o);
    o = ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, "application/yaml", "a: [b",
           400);
    json_decref(o);
    o = ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL,
           "{\"metadata\":{\"name\":\"x\"}}", 400);
    assert_non_null(strstr(js(o, "message"), "Object 'Kind' is missing"));
    json_decref(o);
    o = ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL,
           "application/vnd.kubernetes.protobuf", "k8s\x01", 415);
    json_decref(o);
    /* oversized */
    char *big = malloc(8192);
    memset(big, 'a', 8191);
    big[8191] = '\0';
    o = ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL, big, 413);
    assert_string_equal(js(o, "reason"), "RequestEntityTooLarge");
    json_decref(o);
    free(big);
    /* unknown resource */
    o = ok(ks, "GET", "/api/v1/frobs", NULL, NULL, NULL, 404);
    assert_string_equal(js(o, "reason"), "NotFound");
    json_decref(o);
    /* generateName */
    o = ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL,
           "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"generateName\":"
           "\"gen-\"}}",
           201);
    assert_true(strncmp(js(o, "metadata.name"), "gen-", 4) == 0);
    assert_int_equal(strlen(js(o, "metadata.name")), 9);
    json_decref(o);
    /* delete, then 404 */
    o = ok(ks, "DELETE", "/api/v1/namespaces/default/configmaps/c1", NULL, NULL, NULL, 200);
    json_decref(o);
    json_decref(
        ok(ks, "DELETE", "/api/v1/namespaces/default/configmaps/c1", NULL, NULL, NULL, 404));
    ksim_free(ks);
}

static void test_generation_and_status(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    const char *ds = "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":"
                     "\"d\"},\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":"
                     "{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{"
                     "\"name\":\"c\",\"image\":\"i:1\"}]}}}}";
    json_t *o = ok(ks, "POST", "/apis/apps/v1/namespaces/default/daemonsets", NULL, NULL, ds, 201);
    assert_int_equal(json_integer_value(jp(o, "metadata.generation")), 1);
    json_decref(o);
    /* a label change does not bump generation */
    o = ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL,
           "application/merge-patch+json", "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}", 200);
    assert_int_equal(json_integer_value(jp(o, "metadata.generation")), 1);
    json_decref(o);
    /* a spec change does */
    o = ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL,
           "application/strategic-merge-patch+json",
           "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
           "\"i:2\"}]}}}}",
           200);
    assert_int_equal(json_integer_value(jp(o, "metadata.generation")), 2);
    assert_string_equal(js(jp(o, "spec.template.spec.containers.0"), "image"), "i:2");
    const char *rv = js(o, "metadata.resourceVersion");
    char rvb[32];
    snprintf(rvb, sizeof(rvb), "%s", rv);
    json_decref(o);
    /* status through the main resource is ignored; through /status it sticks */
    o = ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL,
           "application/merge-patch+json", "{\"status\":{\"numberReady\":7}}", 200);
    assert_int_not_equal(json_integer_value(jp(o, "status.numberReady")), 7);
    assert_string_equal(js(o, "metadata.resourceVersion"), rvb); /* no-op: no new rv */
    json_decref(o);
    o = ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/daemonsets/d/status", NULL,
           "application/merge-patch+json", "{\"status\":{\"numberReady\":7}}", 200);
    assert_int_equal(json_integer_value(jp(o, "status.numberReady")), 7);
    assert_int_equal(json_integer_value(jp(o, "metadata.generation")), 2);
    json_decref(o);
    /* 422: the selector is immutable */
    o = ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL,
           "application/merge-patch+json",
           "{\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\",\"x\":\"y\"}},"
           "\"template\":{\"metadata\":{\"labels\":{\"x\":\"y\"}}}}}",
           422);
    assert_string_equal(js(jp(o, "details.causes.0"), "field"), "spec.selector");
    assert_non_null(strstr(js(o, "message"), "field is immutable"));
    json_decref(o);
    /* immutable ConfigMaps and pod specs */
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL,
                   "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                   "\"frozen\"},\"immutable\":true,\"data\":{\"a\":\"1\"}}",
                   201));
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/configmaps/frozen", NULL,
                   "application/merge-patch+json", "{\"data\":{\"a\":\"2\"}}", 422));
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/configmaps/frozen", NULL,
                   "application/merge-patch+json", "{\"metadata\":{\"labels\":{\"l\":\"1\"}}}",
                   200));
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods", NULL, NULL,
                   "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},"
                   "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i:1\"}]}}",
                   201));
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/pods/p", NULL,
                   "application/strategic-merge-patch+json",
                   "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i:3\"}]}}", 200));
    o = ok(ks, "PATCH", "/api/v1/namespaces/default/pods/p", NULL,
           "application/strategic-merge-patch+json", "{\"spec\":{\"hostNetwork\":true}}", 422);
    assert_string_equal(js(jp(o, "details.causes.0"), "reason"), "FieldValueForbidden");
    json_decref(o);
    /* 422: selector must match template labels */
    o = ok(ks, "POST", "/apis/apps/v1/namespaces/default/daemonsets", NULL, NULL,
           "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"e\"},"
           "\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":{\"metadata\":{"
           "\"labels\":{\"a\":\"c\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
           "\"i\"}]}}}}",
           422);
    assert_string_equal(js(jp(o, "details.causes.0"), "field"), "spec.template.metadata.labels");
    json_decref(o);
    ksim_free(ks);
}

/* ---- patches ------------------------------------------------------------------------------ */

static json_t *J(const char *s)
{
    json_error_t e;
    json_t *v = json_loads(s, 0, &e);
    if (!v)
        fail_msg("bad JSON in test: %s: %s", s, e.text);
    return v;
}

static void expect_smp(const char *orig, const char *patch, const char *want)
{
    json_t *o = J(orig), *p = J(patch), *w = J(want), *res = NULL;
    struct err e = {0};
    assert_int_equal(ksim_strategic_merge_patch(o, p, &res, &e), 0);
    if (!json_equal(res, w)) {
        char *s = json_dumps(res, JSON_SORT_KEYS);
        fail_msg("SMP %s + %s = %s, want %s", orig, patch, s, want);
    }
    json_decref(o);
    json_decref(p);
    json_decref(w);
    json_decref(res);
}

static void test_strategic_merge_patch(void **state)
{
    (void)state;
    /* containers merge by name */
    expect_smp(
        "{\"containers\":[{\"name\":\"a\",\"image\":\"1\"},{\"name\":\"b\",\"image\":\"1\"}]}",
        "{\"containers\":[{\"name\":\"b\",\"image\":\"2\"}]}",
        "{\"containers\":[{\"name\":\"a\",\"image\":\"1\"},{\"name\":\"b\",\"image\":\"2\"}]}");
    /* env merge by name, $patch: delete */
    expect_smp("{\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\",\"value\":\"2\"}]}",
               "{\"env\":[{\"name\":\"A\",\"$patch\":\"delete\"}]}",
               "{\"env\":[{\"name\":\"B\",\"value\":\"2\"}]}");
    /* container ports merge on containerPort, service ports on port */
    expect_smp("{\"ports\":[{\"containerPort\":80,\"name\":\"http\"}]}",
               "{\"ports\":[{\"containerPort\":443,\"name\":\"https\"}]}",
               "{\"ports\":[{\"containerPort\":80,\"name\":\"http\"},{\"containerPort\":443,"
               "\"name\":\"https\"}]}");
    expect_smp("{\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]}",
               "{\"ports\":[{\"port\":80,\"targetPort\":8080}]}",
               "{\"ports\":[{\"port\":80,\"protocol\":\"TCP\",\"targetPort\":8080}]}");
    /* conditions by type */
    expect_smp("{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"},{\"type\":\"X\","
               "\"status\":\"True\"}]}",
               "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}",
               "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},{\"type\":\"X\","
               "\"status\":\"True\"}]}");
    /* tolerations are atomic in the real schema: replaced */
    expect_smp("{\"tolerations\":[{\"key\":\"a\"}]}", "{\"tolerations\":[{\"key\":\"b\"}]}",
               "{\"tolerations\":[{\"key\":\"b\"}]}");
    /* null deletes a map key; $patch: replace on a map */
    expect_smp("{\"a\":{\"x\":1,\"y\":2},\"b\":1}", "{\"a\":{\"x\":null},\"b\":null}",
               "{\"a\":{\"y\":2}}");
    expect_smp("{\"a\":{\"x\":1,\"y\":2}}", "{\"a\":{\"$patch\":\"replace\",\"z\":3}}",
               "{\"a\":{\"z\":3}}");
    /* $patch: replace on a list */
    expect_smp("{\"volumes\":[{\"name\":\"a\"},{\"name\":\"b\"}]}",
               "{\"volumes\":[{\"name\":\"c\"},{\"$patch\":\"replace\"}]}",
               "{\"volumes\":[{\"name\":\"c\"}]}");
    /* $retainKeys */
    expect_smp("{\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":1}}}",
               "{\"strategy\":{\"$retainKeys\":[\"type\"],\"type\":\"Recreate\"}}",
               "{\"strategy\":{\"type\":\"Recreate\"}}");
    /* $setElementOrder */
    expect_smp("{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}",
               "{\"$setElementOrder/containers\":[{\"name\":\"b\"},{\"name\":\"a\"}],"
               "\"containers\":[{\"name\":\"a\",\"image\":\"x\"}]}",
               "{\"containers\":[{\"name\":\"b\"},{\"name\":\"a\",\"image\":\"x\"}]}");
    /* $deleteFromPrimitiveList and merging primitive finalizers */
    expect_smp("{\"finalizers\":[\"a\",\"b\"]}",
               "{\"$deleteFromPrimitiveList/finalizers\":[\"a\"],\"finalizers\":[\"c\"]}",
               "{\"finalizers\":[\"b\",\"c\"]}");
}

static void test_merge_and_json_patch(void **state)
{
    (void)state;
    json_t *t = J("{\"a\":{\"b\":1,\"c\":[1,2]},\"d\":1}");
    json_t *p = J("{\"a\":{\"b\":null,\"c\":[3]},\"e\":\"x\"}");
    json_t *r = kobj_merge_patch(t, p);
    json_t *w = J("{\"a\":{\"c\":[3]},\"d\":1,\"e\":\"x\"}");
    assert_true(json_equal(r, w));
    json_decref(p);
    json_decref(r);
    json_decref(w);
    struct err e = {0};
    p = J("[{\"op\":\"add\",\"path\":\"/a/c/-\",\"value\":9},{\"op\":\"replace\",\"path\":\"/d\","
          "\"value\":2},{\"op\":\"remove\",\"path\":\"/a/b\"},{\"op\":\"copy\",\"from\":\"/d\","
          "\"path\":\"/f\"},{\"op\":\"move\",\"from\":\"/f\",\"path\":\"/g\"},{\"op\":\"test\","
          "\"path\":\"/g\",\"value\":2},{\"op\":\"add\",\"path\":\"/a/h~1i\",\"value\":0}]");
    assert_int_equal(ksim_json_patch(t, p, &r, &e), 0);
    w = J("{\"a\":{\"c\":[1,2,9],\"h/i\":0},\"d\":2,\"g\":2}");
    assert_true(json_equal(r, w));
    json_decref(p);
    json_decref(r);
    json_decref(w);
    p = J("[{\"op\":\"test\",\"path\":\"/d\",\"value\":5}]");
    assert_true(ksim_json_patch(t, p, &r, &e) < 0);
    json_decref(p);
    p = J("[{\"op\":\"remove\",\"path\":\"/nope\"}]");
    assert_true(ksim_json_patch(t, p, &r, &e) < 0);
    json_decref(p);
    json_decref(t);
    /* over HTTP: a failed test op is 422; strategic merge on a CR is 415 */
    struct ksim *ks = new_sim();
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default", NULL, "application/json-patch+json",
                   "[{\"op\":\"test\",\"path\":\"/metadata/name\",\"value\":\"x\"}]", 422));
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default", NULL, "text/plain", "{}", 415));
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default", NULL, "application/merge-patch+json",
                   "{\"metadata\":{\"resourceVersion\":\"999\"}}", 409));
    ksim_free(ks);
}

static void test_server_side_apply(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    const char *cfg = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n  labels: {a: "
                      "\"1\", b: \"2\"}\ndata:\n  x: \"1\"\n  y: \"2\"\n";
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/configmaps/s", NULL,
                   "application/apply-patch+yaml", cfg, 400)); /* fieldManager required */
    json_t *o = ok(ks, "PATCH", "/api/v1/namespaces/default/configmaps/s", "fieldManager=t",
                   "application/apply-patch+yaml", cfg, 201);
    char rv[32];
    snprintf(rv, sizeof(rv), "%s", js(o, "metadata.resourceVersion"));
    assert_string_equal(js(jp(o, "metadata.managedFields.0"), "manager"), "t");
    json_decref(o);
    /* idempotent: the same apply changes nothing */
    o = ok(ks, "PATCH", "/api/v1/namespaces/default/configmaps/s", "fieldManager=t",
           "application/apply-patch+yaml", cfg, 200);
    assert_string_equal(js(o, "metadata.resourceVersion"), rv);
    json_decref(o);
    /* another writer adds a key; an apply dropping y removes y but keeps z */
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/configmaps/s", NULL,
                   "application/merge-patch+json", "{\"data\":{\"z\":\"3\"}}", 200));
    const char *cfg2 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n  labels: {a: "
                       "\"1\"}\ndata:\n  x: \"1\"\n";
    o = ok(ks, "PATCH", "/api/v1/namespaces/default/configmaps/s", "fieldManager=t",
           "application/apply-patch+yaml", cfg2, 200);
    assert_null(jp(o, "data.y"));
    assert_string_equal(js(o, "data.z"), "3");
    assert_string_equal(js(o, "data.x"), "1");
    assert_null(jp(o, "metadata.labels.b"));
    json_decref(o);
    /* a second manager applying a different value for x conflicts; force takes it over */
    const char *cfg3 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  x: \"9\"\n";
    o = ok(ks, "PATCH", "/api/v1/namespaces/default/configmaps/s", "fieldManager=u",
           "application/apply-patch+yaml", cfg3, 409);
    assert_string_equal(js(o, "reason"), "Conflict");
    assert_string_equal(js(jp(o, "details.causes.0"), "field"), ".data.x");
    assert_string_equal(js(jp(o, "details.causes.0"), "reason"), "FieldManagerConflict");
    assert_string_equal(js(o, "message"),
                        "Apply failed with 1 conflict: conflict with \"t\": .data.x");
    json_decref(o);
    /* the same value is shared ownership, not a conflict */
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/configmaps/s", "fieldManager=v",
                   "application/apply-patch+yaml", cfg2, 200));
    o = ok(ks, "PATCH", "/api/v1/namespaces/default/configmaps/s", "fieldManager=u&force=true",
           "application/apply-patch+yaml", cfg3, 200);
    assert_string_equal(js(o, "data.x"), "9");
    json_decref(o);
    /* t no longer owns x: t re-applying without x keeps u's value */
    const char *cfg4 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n  labels: {a: "
                       "\"1\"}\n";
    o = ok(ks, "PATCH", "/api/v1/namespaces/default/configmaps/s", "fieldManager=t",
           "application/apply-patch+yaml", cfg4, 200);
    assert_string_equal(js(o, "data.x"), "9");
    json_decref(o);
    ksim_free(ks);
}

/* ---- garbage collection, finalizers, namespaces ------------------------------------------- */

static char *owner_child(struct ksim *ks, const char *owner, const char *child)
{
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\"}}",
             owner);
    json_t *o = ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL, body, 201);
    char *uid = strdup(js(o, "metadata.uid"));
    json_decref(o);
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"%s\","
             "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"%s\","
             "\"uid\":\"%s\",\"blockOwnerDeletion\":true}]}}",
             child, owner, uid);
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/secrets", NULL, NULL, body, 201));
    return uid;
}

static void test_garbage_collection(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    /* background */
    free(owner_child(ks, "o1", "c1"));
    json_decref(
        ok(ks, "DELETE", "/api/v1/namespaces/default/configmaps/o1", NULL, NULL, NULL, 200));
    ksim_reconcile(ks);
    json_decref(ok(ks, "GET", "/api/v1/namespaces/default/secrets/c1", NULL, NULL, NULL, 404));
    /* orphan */
    free(owner_child(ks, "o2", "c2"));
    json_decref(ok(ks, "DELETE", "/api/v1/namespaces/default/configmaps/o2", NULL, NULL,
                   "{\"propagationPolicy\":\"Orphan\"}", 200));
    ksim_reconcile(ks);
    json_decref(ok(ks, "GET", "/api/v1/namespaces/default/configmaps/o2", NULL, NULL, NULL, 404));
    json_t *o = ok(ks, "GET", "/api/v1/namespaces/default/secrets/c2", NULL, NULL, NULL, 200);
    assert_null(jp(o, "metadata.ownerReferences"));
    json_decref(o);
    /* foreground: the owner waits, marked, until the dependent is gone */
    free(owner_child(ks, "o3", "c3"));
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/secrets/c3", NULL,
                   "application/merge-patch+json",
                   "{\"metadata\":{\"finalizers\":[\"example.com/hold\"]}}", 200));
    o = ok(ks, "DELETE", "/api/v1/namespaces/default/configmaps/o3", "propagationPolicy=Foreground",
           NULL, NULL, 200);
    assert_non_null(jp(o, "metadata.deletionTimestamp"));
    json_decref(o);
    ksim_reconcile(ks);
    o = ok(ks, "GET", "/api/v1/namespaces/default/configmaps/o3", NULL, NULL, NULL, 200);
    assert_string_equal(json_string_value(jp(o, "metadata.finalizers.0")), "foregroundDeletion");
    json_decref(o);
    o = ok(ks, "GET", "/api/v1/namespaces/default/secrets/c3", NULL, NULL, NULL, 200);
    assert_non_null(jp(o, "metadata.deletionTimestamp"));
    json_decref(o);
    /* removing the last finalizer deletes the dependent, then the owner goes */
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/secrets/c3", NULL,
                   "application/merge-patch+json", "{\"metadata\":{\"finalizers\":null}}", 200));
    json_decref(ok(ks, "GET", "/api/v1/namespaces/default/secrets/c3", NULL, NULL, NULL, 404));
    ksim_reconcile(ks);
    json_decref(ok(ks, "GET", "/api/v1/namespaces/default/configmaps/o3", NULL, NULL, NULL, 404));
    /* namespace deletion removes contents, then the namespace; creates meanwhile are 403 */
    json_decref(ok(ks, "POST", "/api/v1/namespaces", NULL, NULL,
                   "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"n\"}}",
                   201));
    json_decref(ok(ks, "POST", "/api/v1/namespaces/n/configmaps", NULL, NULL,
                   "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"k\","
                   "\"finalizers\":[\"x/y\"]}}",
                   201));
    o = ok(ks, "DELETE", "/api/v1/namespaces/n", NULL, NULL, NULL, 200);
    assert_string_equal(js(o, "status.phase"), "Terminating");
    json_decref(o);
    json_decref(ok(ks, "POST", "/api/v1/namespaces/n/configmaps", NULL, NULL,
                   "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"k2\"}}",
                   403));
    ksim_reconcile(ks);
    json_decref(ok(ks, "GET", "/api/v1/namespaces/n", NULL, NULL, NULL, 200));
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/n/configmaps/k", NULL,
                   "application/merge-patch+json", "{\"metadata\":{\"finalizers\":[]}}", 200));
    ksim_reconcile(ks);
    json_decref(ok(ks, "GET", "/api/v1/namespaces/n", NULL, NULL, NULL, 404));
    ksim_free(ks);
}

/* ---- DaemonSet controller ----------------------------------------------------------------- */

static json_t *list_pods(struct ksim *ks, const char *q)
{
    return ok(ks, "GET", "/api/v1/namespaces/default/pods", q, NULL, NULL, 200);
}

/* Lets simulated time pass until the controllers and the kubelet are done. */
static void settle(struct ksim *ks)
{
    for (int i = 0; i < 6; i++) {
        fake_now += 1500;
        ksim_reconcile(ks);
    }
}

static void test_daemonset_scheduling(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    create_node(ks, "n1", "{\"gpu\":\"true\",\"zone\":\"a\"}", NULL);
    create_node(ks, "n2", "{\"gpu\":\"true\",\"zone\":\"b\"}", NULL);
    create_node(ks, "n3", "{\"gpu\":\"true\",\"zone\":\"a\"}",
                "[{\"key\":\"dedicated\",\"value\":\"ml\",\"effect\":\"NoSchedule\"}]");
    create_node(ks, "n4", "{\"zone\":\"a\"}", NULL);
    create_node(ks, "n5", "{\"gpu\":\"true\",\"zone\":\"a\",\"skip\":\"1\"}", NULL);
    /* nodeSelector gpu=true; affinity zone In (a) and skip DoesNotExist; no toleration for n3 */
    const char *ds =
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"d\"},"
        "\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"d\"}},\"updateStrategy\":{\"type\":"
        "\"RollingUpdate\",\"rollingUpdate\":{\"maxUnavailable\":1}},\"template\":{\"metadata\":{"
        "\"labels\":{\"app\":\"d\"}},\"spec\":{\"nodeSelector\":{\"gpu\":\"true\"},\"affinity\":"
        "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
        "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\","
        "\"values\":[\"a\"]},{\"key\":\"skip\",\"operator\":\"DoesNotExist\"}]}]}}},"
        "\"containers\":[{\"name\":\"c\",\"image\":\"i:1\"}]}}}}";
    json_decref(ok(ks, "POST", "/apis/apps/v1/namespaces/default/daemonsets", NULL, NULL, ds, 201));
    ksim_reconcile(ks);
    json_t *l = list_pods(ks, NULL);
    assert_int_equal(json_array_size(json_object_get(l, "items")), 1);
    json_t *p = jp(l, "items.0");
    assert_string_equal(js(p, "spec.nodeName"), "n1");
    assert_non_null(json_object_get(jp(p, "metadata.labels"), "controller-revision-hash"));
    assert_string_equal(js(p, "status.phase"), "Pending");
    json_decref(l);
    /* tolerate n3's taint: now two pods */
    json_decref(ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL,
                   "application/strategic-merge-patch+json",
                   "{\"spec\":{\"template\":{\"spec\":{\"tolerations\":[{\"key\":\"dedicated\","
                   "\"operator\":\"Equal\",\"value\":\"ml\",\"effect\":\"NoSchedule\"}]}}}}",
                   200));
    ksim_reconcile(ks);
    l = list_pods(ks, NULL);
    assert_int_equal(json_array_size(json_object_get(l, "items")), 2);
    json_decref(l);
    /* the old pod terminates and is replaced; pods turn Ready after the delay */
    settle(ks);
    json_t *d =
        ok(ks, "GET", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL, NULL, NULL, 200);
    assert_int_equal(json_integer_value(jp(d, "status.desiredNumberScheduled")), 2);
    assert_int_equal(json_integer_value(jp(d, "status.numberReady")), 2);
    assert_int_equal(json_integer_value(jp(d, "status.updatedNumberScheduled")), 2);
    assert_int_equal(json_integer_value(jp(d, "status.observedGeneration")),
                     json_integer_value(jp(d, "metadata.generation")));
    json_decref(d);
    /* cordon does not evict DaemonSet pods (they tolerate the unschedulable taint) */
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/n1", NULL, "application/strategic-merge-patch+json",
                   "{\"spec\":{\"unschedulable\":true}}", 200));
    ksim_reconcile(ks);
    json_t *n1 = ok(ks, "GET", "/api/v1/nodes/n1", NULL, NULL, NULL, 200);
    bool tainted = false;
    size_t i;
    json_t *t;
    json_array_foreach (jp(n1, "spec.taints"), i, t)
        if (streq_ptr(js(t, "key"), "node.kubernetes.io/unschedulable"))
            tainted = true;
    assert_true(tainted);
    json_decref(n1);
    l = list_pods(ks, "fieldSelector=spec.nodeName%3Dn1");
    assert_int_equal(json_array_size(json_object_get(l, "items")), 1);
    json_decref(l);
    /* a NoSchedule taint it does not tolerate keeps new pods off but leaves the running one
     * (counted as misscheduled), as in Kubernetes; a NoExecute one removes it */
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/n1", NULL, "application/merge-patch+json",
                   "{\"spec\":{\"taints\":[{\"key\":\"bad\",\"effect\":\"NoSchedule\"}]}}", 200));
    ksim_reconcile(ks);
    l = list_pods(ks, "fieldSelector=spec.nodeName%3Dn1");
    assert_int_equal(json_array_size(json_object_get(l, "items")), 1);
    assert_null(jp(l, "items.0.metadata.deletionTimestamp"));
    json_decref(l);
    d = ok(ks, "GET", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL, NULL, NULL, 200);
    assert_int_equal(json_integer_value(jp(d, "status.numberMisscheduled")), 1);
    json_decref(d);
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/n1", NULL, "application/merge-patch+json",
                   "{\"spec\":{\"taints\":[{\"key\":\"bad\",\"effect\":\"NoExecute\"}]}}", 200));
    ksim_reconcile(ks);
    l = list_pods(ks, "fieldSelector=spec.nodeName%3Dn1");
    assert_non_null(jp(l, "items.0.metadata.deletionTimestamp"));
    json_decref(l);
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/n1", NULL, "application/merge-patch+json",
                   "{\"spec\":{\"taints\":null}}", 200));
    settle(ks);
    l = list_pods(ks, "fieldSelector=spec.nodeName%3Dn1");
    assert_int_equal(json_array_size(json_object_get(l, "items")), 1);
    assert_null(jp(l, "items.0.metadata.deletionTimestamp"));
    json_decref(l);
    /* a node that stops matching loses its pod */
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/n1", NULL, "application/merge-patch+json",
                   "{\"metadata\":{\"labels\":{\"gpu\":null}}}", 200));
    ksim_reconcile(ks);
    l = list_pods(ks, "fieldSelector=spec.nodeName%3Dn1");
    assert_non_null(jp(l, "items.0.metadata.deletionTimestamp")); /* terminating first */
    json_decref(l);
    settle(ks);
    l = list_pods(ks, "fieldSelector=spec.nodeName%3Dn1");
    assert_int_equal(json_array_size(json_object_get(l, "items")), 0);
    json_decref(l);
    ksim_free(ks);
}

static void test_scheduler(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    create_node(ks, "tainted", NULL, "[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]");
    create_node(ks, "cordoned", NULL, NULL);
    create_node(ks, "free", NULL, NULL);
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/cordoned", NULL, "application/merge-patch+json",
                   "{\"spec\":{\"unschedulable\":true}}", 200));
    const char *pod = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\"},"
                      "\"spec\":{%s\"containers\":[{\"name\":\"c\",\"image\":\"i:1\"}]}}";
    char body[512];
    snprintf(body, sizeof(body), pod, "p", "");
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods", NULL, NULL, body, 201));
    snprintf(body, sizeof(body), pod, "q", "\"nodeSelector\":{\"none\":\"x\"},");
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods", NULL, NULL, body, 201));
    ksim_reconcile(ks);
    json_t *o = ok(ks, "GET", "/api/v1/namespaces/default/pods/p", NULL, NULL, NULL, 200);
    assert_string_equal(js(o, "spec.nodeName"), "free");
    json_decref(o);
    o = ok(ks, "GET", "/api/v1/namespaces/default/pods/q", NULL, NULL, NULL, 200);
    assert_null(jp(o, "spec.nodeName"));
    assert_string_equal(js(jp(o, "status.conditions.0"), "reason"), "Unschedulable");
    json_decref(o);
    fake_now += 1500;
    ksim_reconcile(ks);
    o = ok(ks, "GET", "/api/v1/namespaces/default/pods/p", NULL, NULL, NULL, 200);
    assert_string_equal(js(o, "status.phase"), "Running");
    json_decref(o);
    /* the binding subresource binds once; a second binding is a conflict */
    snprintf(body, sizeof(body), pod, "r", "\"schedulerName\":\"other\",");
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods", NULL, NULL, body, 201));
    const char *bind = "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":"
                       "\"r\"},\"target\":{\"kind\":\"Node\",\"name\":\"free\"}}";
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods/r/binding", NULL, NULL, bind, 201));
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods/r/binding", NULL, NULL, bind, 409));
    o = ok(ks, "GET", "/api/v1/namespaces/default/pods/r", NULL, NULL, NULL, 200);
    assert_string_equal(js(o, "spec.nodeName"), "free");
    json_decref(o);
    /* a pod whose node is deleted is collected */
    json_decref(ok(ks, "DELETE", "/api/v1/nodes/free", NULL, NULL, NULL, 200));
    ksim_reconcile(ks);
    json_decref(ok(ks, "GET", "/api/v1/namespaces/default/pods/p", NULL, NULL, NULL, 404));
    ksim_free(ks);
}

static int count_hash(json_t *list, const char *hash)
{
    int n = 0;
    size_t i;
    json_t *p;
    json_array_foreach (json_object_get(list, "items"), i, p)
        if (!jp(p, "metadata.deletionTimestamp") &&
            streq_ptr(json_string_value(
                          json_object_get(jp(p, "metadata.labels"), "controller-revision-hash")),
                      hash))
            n++;
    return n;
}

/* The node, phase and deletion of every pod, "node:phase[:deleting]" sorted, one per line. */
static char *pods_by_node(struct ksim *ks)
{
    json_t *l = list_pods(ks, NULL);
    json_t *lines = json_array();
    size_t i;
    json_t *p;
    json_array_foreach (json_object_get(l, "items"), i, p) {
        char b[256];
        snprintf(b, sizeof(b), "%s:%s%s", js(p, "spec.nodeName") ? js(p, "spec.nodeName") : "-",
                 js(p, "status.phase") ? js(p, "status.phase") : "-",
                 jp(p, "metadata.deletionTimestamp") ? ":deleting" : "");
        json_array_append_new(lines, json_string(b));
    }
    json_decref(l);
    /* sorted: insertion into an ordered string */
    size_t n = json_array_size(lines);
    char *out = calloc(1, n * 256 + 1);
    for (size_t k = 0; k < n; k++) {
        size_t best = SIZE_MAX;
        for (size_t j = 0; j < n; j++) {
            const char *c = json_string_value(json_array_get(lines, j));
            if (c[0] &&
                (best == SIZE_MAX || strcmp(c, json_string_value(json_array_get(lines, best))) < 0))
                best = j;
        }
        strcat(out, json_string_value(json_array_get(lines, best)));
        strcat(out, "\n");
        json_array_set_new(lines, best, json_string(""));
    }
    json_decref(lines);
    return out;
}

/* The controllers that follow the event log (node taints, the DaemonSet controller's pod index
 * and orphans, the kubelet, the pod and owner garbage collectors) reach what a look at every
 * object reaches: the same story with a log that keeps everything, and with one compacted after
 * a few events (every pass then looks at everything). */
static void controllers_story(size_t max_events)
{
    struct ksim_opts o;
    ksim_opts_default(&o);
    o.now_ms = clock_fn;
    o.pod_ready_delay_ms = 1000;
    o.watch_retention_ms = 60000;
    o.max_events = max_events;
    struct ksim *ks = ksim_new(&o);
    create_node(ks, "n1", "{\"gpu\":\"true\"}", NULL);
    create_node(ks, "n2", "{\"gpu\":\"true\"}", NULL);
    create_node(ks, "n3", "{\"gpu\":\"true\"}", NULL);
    create_node(ks, "n4", "{\"gpu\":\"false\"}", NULL);
    json_decref(ok(ks, "POST", "/apis/apps/v1/namespaces/default/daemonsets", NULL, NULL,
                   "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":"
                   "\"d\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"d\"}},\"template\":"
                   "{\"metadata\":{\"labels\":{\"app\":\"d\"}},\"spec\":{\"nodeSelector\":{"
                   "\"gpu\":\"true\"},\"containers\":[{\"name\":\"c\",\"image\":\"i:1\"}]}}}}",
                   201));
    settle(ks);
    char *got = pods_by_node(ks);
    assert_string_equal(got, "n1:Running\nn2:Running\nn3:Running\n");
    free(got);
    /* a pod bound to a node that does not exist, one whose owner does not exist */
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods", NULL, NULL,
                   "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"ghost\"},"
                   "\"spec\":{\"nodeName\":\"nowhere\",\"containers\":[{\"name\":\"c\","
                   "\"image\":\"i\"}]}}",
                   201));
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods", NULL, NULL,
                   "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"orphan\","
                   "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
                   "\"name\":\"gone\",\"uid\":\"no-such-uid\"}]},\"spec\":{\"nodeName\":\"n1\","
                   "\"terminationGracePeriodSeconds\":0,\"containers\":[{\"name\":\"c\","
                   "\"image\":\"i\"}]}}",
                   201));
    /* cordon n2, remove n3, make n4 a GPU node, delete n1's daemon pod */
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/n2", NULL, "application/merge-patch+json",
                   "{\"spec\":{\"unschedulable\":true}}", 200));
    json_decref(ok(ks, "DELETE", "/api/v1/nodes/n3", NULL, NULL, NULL, 200));
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/n4", NULL, "application/merge-patch+json",
                   "{\"metadata\":{\"labels\":{\"gpu\":\"true\"}}}", 200));
    json_t *l = list_pods(ks, "fieldSelector=spec.nodeName%3Dn1,metadata.name!%3Dorphan");
    assert_int_equal(json_array_size(json_object_get(l, "items")), 1);
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s",
             js(jp(l, "items.0"), "metadata.name"));
    json_decref(l);
    json_decref(ok(ks, "DELETE", path, "gracePeriodSeconds=0", NULL, NULL, 200));
    settle(ks);
    got = pods_by_node(ks);
    assert_string_equal(got, "n1:Running\nn2:Running\nn4:Running\n");
    free(got);
    json_t *n2 = ok(ks, "GET", "/api/v1/nodes/n2", NULL, NULL, NULL, 200);
    assert_string_equal(js(jp(n2, "spec.taints.0"), "key"), "node.kubernetes.io/unschedulable");
    json_decref(n2);
    json_t *d =
        ok(ks, "GET", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL, NULL, NULL, 200);
    assert_int_equal(json_integer_value(jp(d, "status.desiredNumberScheduled")), 3);
    assert_int_equal(json_integer_value(jp(d, "status.numberReady")), 3);
    json_decref(d);
    ksim_free(ks);
}

static void test_controllers_follow_log(void **state)
{
    (void)state;
    controllers_story(1u << 20);
    controllers_story(4);
}

/* A DaemonSet over more nodes than one reconcile's burst: the pods are made (and started) over
 * several reconciles, the store lock let go between them, and all of them in the end. */
static void test_daemonset_burst(void **state)
{
    (void)state;
    struct ksim_opts o;
    ksim_opts_default(&o);
    o.now_ms = clock_fn;
    o.pod_ready_delay_ms = 1000;
    o.daemon_burst = 4;
    struct ksim *ks = ksim_new(&o);
    enum { N = 9 };
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof(name), "n%d", i);
        json_t *node = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Node",
                                 "metadata", "name", name);
        struct err e = {0};
        assert_int_equal(ksim_create_object(ks, node, &e), 0);
        json_decref(node);
    }
    json_decref(ok(ks, "POST", "/apis/apps/v1/namespaces/default/daemonsets", NULL, NULL,
                   "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":"
                   "\"d\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"d\"}},\"template\":"
                   "{\"metadata\":{\"labels\":{\"app\":\"d\"}},\"spec\":{\"containers\":[{"
                   "\"name\":\"c\",\"image\":\"i:1\"}]}}}}",
                   201));
    for (size_t want = 4; want <= N; want += 4) {
        assert_true(ksim_reconcile(ks));
        json_t *l = list_pods(ks, NULL);
        assert_int_equal(json_array_size(json_object_get(l, "items")), want < N ? want : N);
        json_decref(l);
    }
    /* started 4 at a time too */
    fake_now += 1500;
    ksim_reconcile(ks);
    json_t *l = list_pods(ks, "fieldSelector=status.phase%3DRunning");
    assert_int_equal(json_array_size(json_object_get(l, "items")), 4);
    json_decref(l);
    settle(ks);
    json_t *d =
        ok(ks, "GET", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL, NULL, NULL, 200);
    assert_int_equal(json_integer_value(jp(d, "status.desiredNumberScheduled")), N);
    assert_int_equal(json_integer_value(jp(d, "status.numberReady")), N);
    json_decref(d);
    ksim_free(ks);
}

/* Objects made alike and the versions of one object share what they have in common: a write to
 * one never shows in another (every writer copies what it changes). */
static void test_shared_values_stay_apart(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    create_node(ks, "a", "{\"gpu\":\"true\",\"zone\":\"z\"}", NULL);
    create_node(ks, "b", "{\"gpu\":\"true\",\"zone\":\"z\"}", NULL);
    const char *pod = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
                      "\"labels\":{\"app\":\"x\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
                      "\"image\":\"i:1\",\"env\":[{\"name\":\"E\",\"value\":\"1\"}]}]}}";
    char body[512];
    snprintf(body, sizeof(body), pod, "p");
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods", NULL, NULL, body, 201));
    snprintf(body, sizeof(body), pod, "q");
    json_t *q0 = ok(ks, "POST", "/api/v1/namespaces/default/pods", NULL, NULL, body, 201);
    const char *rv0 = js(q0, "metadata.resourceVersion");
    char since[64];
    snprintf(since, sizeof(since), "watch=1&resourceVersion=%s", rv0);
    /* each kind of write to p, and to node a */
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/pods/p", NULL,
                   "application/json-patch+json",
                   "[{\"op\":\"replace\",\"path\":\"/spec/containers/0/image\","
                   "\"value\":\"i:2\"}]",
                   200));
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/pods/p", NULL,
                   "application/merge-patch+json", "{\"metadata\":{\"labels\":{\"app\":\"y\"}}}",
                   200));
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/pods/p", NULL,
                   "application/strategic-merge-patch+json",
                   "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i:3\"}]}}", 200));
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/pods/p/status", NULL,
                   "application/merge-patch+json", "{\"status\":{\"phase\":\"Running\"}}", 200));
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/a", NULL, "application/merge-patch+json",
                   "{\"metadata\":{\"labels\":{\"zone\":\"y\"}},\"spec\":{\"podCIDR\":"
                   "\"10.0.0.0/24\"}}",
                   200));
    json_t *q = ok(ks, "GET", "/api/v1/namespaces/default/pods/q", NULL, NULL, NULL, 200);
    assert_string_equal(js(jp(q, "spec.containers.0"), "image"), "i:1");
    assert_string_equal(js(jp(q, "spec.containers.0.env.0"), "value"), "1");
    assert_string_equal(js(q, "metadata.labels.app"), "x");
    assert_false(streq_ptr(js(q, "status.phase"), "Running"));
    assert_string_equal(js(q, "metadata.resourceVersion"), rv0);
    json_decref(q);
    json_decref(q0);
    json_t *b = ok(ks, "GET", "/api/v1/nodes/b", NULL, NULL, NULL, 200);
    assert_string_equal(js(b, "metadata.labels.zone"), "z");
    assert_null(jp(b, "spec.podCIDR"));
    json_decref(b);
    json_t *p = ok(ks, "GET", "/api/v1/namespaces/default/pods/p", NULL, NULL, NULL, 200);
    assert_string_equal(js(jp(p, "spec.containers.0"), "image"), "i:3");
    assert_string_equal(js(jp(p, "spec.containers.0.env.0"), "value"), "1");
    assert_string_equal(js(p, "metadata.labels.app"), "y");
    assert_string_equal(js(p, "status.phase"), "Running");
    json_decref(p);
    /* the log still holds each version as it was written */
    struct ksim_request rq = {.method = "GET",
                              .path = "/api/v1/namespaces/default/pods",
                              .query = since,
                              .accept = "application/json"};
    struct ksim_response rs;
    ksim_handle(ks, &rq, &rs);
    assert_int_equal(rs.code, 200);
    assert_non_null(rs.watch);
    struct sbuf out;
    sbuf_init(&out, 1 << 20);
    assert_int_equal(ksim_watch_next(ks, rs.watch, &out, 0), 1);
    const char *want[][3] = {
        {"1", "x", "i:2"}, {"1", "y", "i:2"}, {"1", "y", "i:3"}, {"1", "y", "i:3"}};
    char *line = out.data;
    for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        json_t *ev = json_loads(line, 0, NULL);
        assert_non_null(ev);
        json_t *obj = json_object_get(ev, "object");
        assert_string_equal(js(ev, "type"), "MODIFIED");
        assert_string_equal(js(jp(obj, "spec.containers.0.env.0"), "value"), want[i][0]);
        assert_string_equal(js(obj, "metadata.labels.app"), want[i][1]);
        assert_string_equal(js(jp(obj, "spec.containers.0"), "image"), want[i][2]);
        json_decref(ev);
        line = nl + 1;
    }
    sbuf_free(&out);
    ksim_watch_free(ks, rs.watch);
    ksim_response_free(&rs);
    ksim_free(ks);
}

/* The pod a DaemonSet makes for one node as compact JSON (its only pod there). */
static char *ds_pod_on(struct ksim *ks, const char *node, char *ret_name, size_t name_len)
{
    char q[64];
    snprintf(q, sizeof(q), "fieldSelector=spec.nodeName%%3D%s", node);
    json_t *l = list_pods(ks, q);
    json_t *items = json_object_get(l, "items");
    assert_int_equal(json_array_size(items), 1);
    json_t *pod = json_array_get(items, 0);
    if (ret_name)
        snprintf(ret_name, name_len, "%s", js(pod, "metadata.name"));
    char *s = json_dumps(pod, JSON_COMPACT);
    json_decref(l);
    return s;
}

static char *ds_template(struct ksim *ks)
{
    json_t *d =
        ok(ks, "GET", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL, NULL, NULL, 200);
    char *s = json_dumps(jp(d, "spec.template"), JSON_COMPACT);
    json_decref(d);
    return s;
}

/* A DaemonSet's pods hold their template's unchanged parts (containers, volumes, annotations)
 * with the template and with each other: the defaults a pod gets, and every later write to one
 * pod (each patch kind, status, a refused write), never show in the template or another pod;
 * a write to the template never shows in its pods. */
static void test_daemon_pods_share_template(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    create_node(ks, "a", "{\"gpu\":\"true\"}", NULL);
    create_node(ks, "b", "{\"gpu\":\"true\"}", NULL);
    json_decref(
        ok(ks, "POST", "/apis/apps/v1/namespaces/default/daemonsets", NULL, NULL,
           "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"d\"},"
           "\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"d\"}},\"updateStrategy\":{\"type\":"
           "\"OnDelete\"},\"template\":{\"metadata\":{\"labels\":{\"app\":\"d\"},\"annotations\":{"
           "\"note\":\"n\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i:1\",\"env\":[{"
           "\"name\":\"E\",\"value\":\"1\"}],\"resources\":{\"limits\":{\"cpu\":\"1\"}}}],"
           "\"initContainers\":[{\"name\":\"i\",\"image\":\"i:1\",\"resources\":{\"limits\":{"
           "\"memory\":\"1Mi\"},\"requests\":{}}}],\"volumes\":[{\"name\":\"v\",\"hostPath\":{"
           "\"path\":\"/x\"}}],\"tolerations\":[{\"key\":\"k\",\"operator\":\"Exists\"}],"
           "\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{"
           "\"weight\":1,\"preference\":{\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":"
           "\"Exists\"}]}}]}}}}}}",
           201));
    settle(ks);
    /* the pods got their defaults and the controller's additions; the template did not */
    char a_name[128];
    _cleanup_free_ char *a0 = ds_pod_on(ks, "a", a_name, sizeof(a_name));
    _cleanup_free_ char *b0 = ds_pod_on(ks, "b", NULL, 0);
    _cleanup_free_ char *t0 = ds_template(ks);
    json_t *a = json_loads(a0, 0, NULL), *t = json_loads(t0, 0, NULL);
    assert_string_equal(js(jp(a, "spec.containers.0"), "imagePullPolicy"), "IfNotPresent");
    assert_string_equal(js(jp(a, "spec.containers.0.resources.requests"), "cpu"), "1");
    assert_string_equal(js(jp(a, "spec.initContainers.0.resources.requests"), "memory"), "1Mi");
    assert_int_equal(json_array_size(jp(a, "spec.tolerations")), 7);
    assert_non_null(
        jp(a, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"));
    assert_non_null(
        jp(a, "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"));
    assert_non_null(jp(a, "metadata.labels.controller-revision-hash"));
    assert_string_equal(js(a, "metadata.annotations.note"), "n");
    assert_null(jp(t, "spec.containers.0.imagePullPolicy"));
    assert_null(jp(t, "spec.containers.0.terminationMessagePath"));
    assert_null(jp(t, "spec.containers.0.resources.requests"));
    assert_int_equal(json_object_size(jp(t, "spec.initContainers.0.resources.requests")), 0);
    assert_int_equal(json_array_size(jp(t, "spec.tolerations")), 1);
    assert_null(jp(t, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"));
    assert_null(jp(t, "spec.nodeName"));
    assert_null(jp(t, "metadata.labels.controller-revision-hash"));
    json_decref(a);
    json_decref(t);
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s", a_name);
    char status_path[300];
    snprintf(status_path, sizeof(status_path), "%s/status", path);
    static const char JP[] = "application/json-patch+json", MP[] = "application/merge-patch+json",
                      SMP[] = "application/strategic-merge-patch+json";
    const struct {
        bool status;
        const char *ctype, *body;
        int code;
    } writes[] = {
        {false, JP,
         "[{\"op\":\"replace\",\"path\":\"/spec/containers/0/image\",\"value\":\"i:2\"}]", 200},
        {false, MP, "{\"metadata\":{\"annotations\":{\"note\":\"m\"},\"labels\":{\"x\":\"y\"}}}",
         200},
        {false, SMP, "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i:3\"}]}}", 200},
        {false, JP,
         "[{\"op\":\"add\",\"path\":\"/spec/tolerations/-\",\"value\":{\"key\":\"z\","
         "\"operator\":\"Exists\"}}]",
         200},
        {false, JP, "[{\"op\":\"add\",\"path\":\"/metadata/annotations/more\",\"value\":\"1\"}]",
         200},
        /* refused (a pod's volumes and env are immutable): nothing written, nothing changed */
        {false, JP,
         "[{\"op\":\"replace\",\"path\":\"/spec/volumes/0/hostPath/path\",\"value\":\"/y\"}]", 422},
        {false, JP,
         "[{\"op\":\"replace\",\"path\":\"/spec/containers/0/env/0/value\",\"value\":\"2\"}]", 422},
        {true, MP, "{\"status\":{\"phase\":\"Failed\",\"message\":\"m\"}}", 200},
    };
    for (size_t i = 0; i < ARRAY_SIZE(writes); i++) {
        json_decref(ok(ks, "PATCH", writes[i].status ? status_path : path, NULL, writes[i].ctype,
                       writes[i].body, writes[i].code));
        _cleanup_free_ char *b = ds_pod_on(ks, "b", NULL, 0);
        _cleanup_free_ char *tm = ds_template(ks);
        if (strcmp(b, b0) != 0 || strcmp(tm, t0) != 0)
            fprintf(stderr, "write %zu showed elsewhere:\n%s\n%s\n", i, b, tm);
        assert_string_equal(b, b0);
        assert_string_equal(tm, t0);
    }
    _cleanup_free_ char *a1 = ds_pod_on(ks, "a", NULL, 0);
    a = json_loads(a1, 0, NULL);
    assert_string_equal(js(jp(a, "spec.containers.0"), "image"), "i:3");
    assert_string_equal(js(a, "metadata.annotations.note"), "m");
    assert_string_equal(js(a, "metadata.annotations.more"), "1");
    assert_string_equal(js(jp(a, "spec.volumes.0"), "hostPath.path"), "/x");
    assert_int_equal(json_array_size(jp(a, "spec.tolerations")), 8);
    json_decref(a);
    /* a write to the template (OnDelete: the pods stay) never shows in its pods */
    json_decref(ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL, JP,
                   "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/env/0/value\","
                   "\"value\":\"9\"},{\"op\":\"replace\",\"path\":\"/spec/template/metadata/"
                   "annotations/note\",\"value\":\"t\"},{\"op\":\"replace\",\"path\":\"/spec/"
                   "template/spec/volumes/0/hostPath/path\",\"value\":\"/t\"}]",
                   200));
    json_decref(ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL, MP,
                   "{\"spec\":{\"template\":{\"spec\":{\"tolerations\":null}}}}", 200));
    _cleanup_free_ char *b1 = ds_pod_on(ks, "b", NULL, 0);
    assert_string_equal(b1, b0);
    _cleanup_free_ char *a2 = ds_pod_on(ks, "a", NULL, 0);
    assert_string_equal(a2, a1);
    ksim_free(ks);
}

/* One raw request: the response as it goes out (the caller frees it). */
static void raw(struct ksim *ks, const char *method, const char *path, const char *query,
                const char *ctype, const char *accept, const char *body, struct ksim_response *rs)
{
    struct ksim_request rq = {.method = method,
                              .path = path,
                              .query = query,
                              .content_type = ctype,
                              .accept = accept,
                              .body = body,
                              .body_len = body ? strlen(body) : 0};
    ksim_handle(ks, &rq, rs);
}

/* A write's JSON response is the text its watch event carries (made once for both), byte for
 * byte; protobuf, dry runs and refused writes answer as before. */
static void test_write_response_is_event_json(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    create_node(ks, "a", "{\"gpu\":\"true\"}", NULL);
    json_t *n0 = ok(ks, "GET", "/api/v1/nodes/a", NULL, NULL, NULL, 200);
    char since[64];
    snprintf(since, sizeof(since), "watch=1&resourceVersion=%s",
             js(n0, "metadata.resourceVersion"));
    json_decref(n0);
    static const char MP[] = "application/merge-patch+json";
    const struct {
        const char *accept, *query, *body;
        int code;
        bool event; /* a new version: the watch sends it */
    } calls[] = {
        {"application/json", NULL, "{\"metadata\":{\"labels\":{\"x\":\"1\"}}}", 200, true},
        {"application/json, */*", NULL, "{\"metadata\":{\"labels\":{\"x\":\"2\"}}}", 200, true},
        {"application/yaml", NULL, "{\"metadata\":{\"labels\":{\"x\":\"3\"}}}", 200, true},
        {"application/vnd.kubernetes.protobuf, application/json", NULL,
         "{\"metadata\":{\"labels\":{\"x\":\"4\"}}}", 200, true},
        {"application/json", "dryRun=All", "{\"metadata\":{\"labels\":{\"x\":\"5\"}}}", 200, false},
        {"application/json", NULL, "{\"metadata\":{\"labels\":{\"x\":\"4\"}}}", 200, false},
        {"application/json", NULL, "{\"metadata\":{\"resourceVersion\":\"1\"}}", 409, false},
    };
    char *bodies[ARRAY_SIZE(calls)] = {0};
    for (size_t i = 0; i < ARRAY_SIZE(calls); i++) {
        struct ksim_response rs;
        raw(ks, "PATCH", "/api/v1/nodes/a", calls[i].query, MP, calls[i].accept, calls[i].body,
            &rs);
        assert_int_equal(rs.code, calls[i].code);
        assert_non_null(rs.body);
        bool pb = strstr(calls[i].accept, "protobuf") != NULL;
        assert_string_equal(rs.content_type,
                            pb ? "application/vnd.kubernetes.protobuf" : "application/json");
        if (!pb) {
            assert_int_equal(rs.body_len, strlen(rs.body));
            /* the same text as the object serialized on its own */
            json_t *v = json_loads(rs.body, 0, NULL);
            assert_non_null(v);
            char *again = json_dumps(v, JSON_COMPACT);
            assert_string_equal(again, rs.body);
            free(again);
            json_decref(v);
            bodies[i] = strdup(rs.body);
        }
        ksim_response_free(&rs);
    }
    /* the watch sends each new version as the write answered it */
    struct ksim_response rs;
    raw(ks, "GET", "/api/v1/nodes", since, NULL, "application/json", NULL, &rs);
    assert_int_equal(rs.code, 200);
    assert_non_null(rs.watch);
    struct sbuf out;
    sbuf_init(&out, 1 << 20);
    assert_int_equal(ksim_watch_next(ks, rs.watch, &out, 0), 1);
    char *line = out.data;
    size_t events = 0;
    for (size_t i = 0; i < ARRAY_SIZE(calls); i++) {
        if (!calls[i].event)
            continue;
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        const char pre[] = "{\"type\":\"MODIFIED\",\"object\":";
        assert_true(strncmp(line, pre, strlen(pre)) == 0);
        char *obj = line + strlen(pre);
        obj[strlen(obj) - 1] = '\0'; /* the event's closing brace */
        if (bodies[i])
            assert_string_equal(obj, bodies[i]);
        line = nl + 1;
        events++;
    }
    assert_int_equal(events, 4);
    assert_string_equal(line, "");
    for (size_t i = 0; i < ARRAY_SIZE(calls); i++)
        free(bodies[i]);
    sbuf_free(&out);
    ksim_watch_free(ks, rs.watch);
    ksim_response_free(&rs);
    ksim_free(ks);
}

static void test_daemonset_updates(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof(name), "n%d", i);
        create_node(ks, name, NULL, NULL);
    }
    const char *ds =
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"d\"},"
        "\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"d\"}},\"updateStrategy\":{\"type\":"
        "\"RollingUpdate\",\"rollingUpdate\":{\"maxUnavailable\":\"50%\"}},\"template\":{"
        "\"metadata\":{\"labels\":{\"app\":\"d\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
        "\"image\":\"i:1\"}]}}}}";
    json_decref(ok(ks, "POST", "/apis/apps/v1/namespaces/default/daemonsets", NULL, NULL, ds, 201));
    ksim_reconcile(ks);
    fake_now += 1500;
    ksim_reconcile(ks);
    json_t *l = list_pods(ks, NULL);
    assert_int_equal(json_array_size(json_object_get(l, "items")), 4);
    char old_hash[64];
    snprintf(old_hash, sizeof(old_hash), "%s",
             json_string_value(
                 json_object_get(jp(l, "items.0.metadata.labels"), "controller-revision-hash")));
    json_decref(l);
    json_t *crs = ok(ks, "GET", "/apis/apps/v1/namespaces/default/controllerrevisions", NULL, NULL,
                     NULL, 200);
    assert_int_equal(json_array_size(json_object_get(crs, "items")), 1);
    json_decref(crs);
    /* new template: at most 2 (50% of 4) pods go at once */
    json_decref(ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL,
                   "application/strategic-merge-patch+json",
                   "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\","
                   "\"image\":\"i:2\"}]}}}}",
                   200));
    ksim_reconcile(ks);
    l = list_pods(ks, NULL);
    assert_int_equal(count_hash(l, old_hash), 2); /* two terminating, two left */
    json_decref(l);
    settle(ks);
    l = list_pods(ks, NULL);
    assert_int_equal(count_hash(l, old_hash), 0);
    assert_int_equal(json_array_size(json_object_get(l, "items")), 4);
    json_decref(l);
    crs = ok(ks, "GET", "/apis/apps/v1/namespaces/default/controllerrevisions", NULL, NULL, NULL,
             200);
    assert_int_equal(json_array_size(json_object_get(crs, "items")), 2);
    json_decref(crs);
    /* OnDelete: a template change replaces nothing until a pod is deleted */
    json_decref(
        ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL,
           "application/merge-patch+json",
           "{\"spec\":{\"updateStrategy\":{\"type\":\"OnDelete\",\"rollingUpdate\":null},"
           "\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i:3\"}]}}}}",
           200));
    ksim_reconcile(ks);
    fake_now += 1500;
    ksim_reconcile(ks);
    json_t *d =
        ok(ks, "GET", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL, NULL, NULL, 200);
    assert_int_equal(json_integer_value(jp(d, "status.updatedNumberScheduled")), 0);
    assert_int_equal(json_integer_value(jp(d, "status.numberReady")), 4);
    json_decref(d);
    l = list_pods(ks, NULL);
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s",
             js(jp(l, "items.0"), "metadata.name"));
    json_decref(l);
    json_decref(ok(ks, "DELETE", path, NULL, NULL, NULL, 200));
    settle(ks);
    d = ok(ks, "GET", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL, NULL, NULL, 200);
    assert_int_equal(json_integer_value(jp(d, "status.updatedNumberScheduled")), 1);
    json_decref(d);
    /* deleting the DaemonSet collects its pods and revisions */
    json_decref(
        ok(ks, "DELETE", "/apis/apps/v1/namespaces/default/daemonsets/d", NULL, NULL, NULL, 200));
    settle(ks);
    l = list_pods(ks, NULL);
    assert_int_equal(json_array_size(json_object_get(l, "items")), 0);
    json_decref(l);
    ksim_free(ks);
}

static size_t count_live(json_t *list)
{
    size_t n = 0, i;
    json_t *p;
    json_array_foreach (json_object_get(list, "items"), i, p)
        if (!jp(p, "metadata.deletionTimestamp"))
            n++;
    return n;
}

/* A node with allocatable resources (and, optionally, the external-kubelet annotation). */
static void create_node_alloc(struct ksim *ks, const char *name, const char *alloc_json,
                              const char *taints_json, bool external)
{
    char body[2048];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\"%s},"
             "\"spec\":{\"taints\":%s},\"status\":{\"allocatable\":%s,\"capacity\":%s,"
             "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],\"addresses\":[{\"type\":"
             "\"InternalIP\",\"address\":\"127.0.0.1\"}],\"daemonEndpoints\":{"
             "\"kubeletEndpoint\":{\"Port\":10250}}}}",
             name,
             external ? ",\"annotations\":{\"kubelet.gpuop.dev/simulated\":\"external\"}" : "",
             taints_json ? taints_json : "[]", alloc_json, alloc_json);
    json_decref(ok(ks, "POST", "/api/v1/nodes", NULL, NULL, body, 201));
}

static void create_gpu_pod(struct ksim *ks, const char *name, const char *resources)
{
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\"},\"spec\":{"
             "\"containers\":[{\"name\":\"c\",\"image\":\"i:1\",\"resources\":%s}]}}",
             name, resources);
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods", NULL, NULL, body, 201));
}

static char *pod_node(struct ksim *ks, const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s", name);
    json_t *o = ok(ks, "GET", path, NULL, NULL, NULL, 200);
    const char *n = js(o, "spec.nodeName");
    char *r = n ? strdup(n) : NULL;
    json_decref(o);
    return r;
}

static void test_scheduler_resources(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    create_node_alloc(
        ks, "gpu-a", "{\"cpu\":\"4\",\"memory\":\"8Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"2\"}",
        NULL, false);
    create_node_alloc(
        ks, "gpu-b", "{\"cpu\":\"4\",\"memory\":\"8Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"1\"}",
        NULL, false);
    create_node_alloc(ks, "cpu", "{\"cpu\":\"4\",\"memory\":\"8Gi\",\"pods\":\"110\"}", NULL,
                      false);
    create_node_alloc(
        ks, "tainted",
        "{\"cpu\":\"4\",\"memory\":\"8Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"8\"}",
        "[{\"key\":\"k\",\"value\":\"v\",\"effect\":\"NoSchedule\"}]", false);
    /* limits stand in for absent requests; only gpu-a has two */
    create_gpu_pod(ks, "two", "{\"limits\":{\"nvidia.com/gpu\":2}}");
    ksim_reconcile(ks);
    char *n = pod_node(ks, "two");
    assert_string_equal(n, "gpu-a");
    free(n);
    /* gpu-a is full: one more GPU fits on gpu-b only */
    create_gpu_pod(ks, "one", "{\"requests\":{\"nvidia.com/gpu\":\"1\",\"cpu\":\"500m\"}}");
    ksim_reconcile(ks);
    n = pod_node(ks, "one");
    assert_string_equal(n, "gpu-b");
    free(n);
    /* nothing left: the scheduler's message, reasons counted per node and sorted */
    create_gpu_pod(ks, "more", "{\"limits\":{\"nvidia.com/gpu\":\"1\"}}");
    ksim_reconcile(ks);
    json_t *o = ok(ks, "GET", "/api/v1/namespaces/default/pods/more", NULL, NULL, NULL, 200);
    assert_null(jp(o, "spec.nodeName"));
    assert_string_equal(js(jp(o, "status.conditions.0"), "reason"), "Unschedulable");
    assert_string_equal(js(jp(o, "status.conditions.0"), "status"), "False");
    assert_string_equal(js(jp(o, "status.conditions.0"), "message"),
                        "0/4 nodes are available: 1 node(s) had untolerated taint {k: v}, 3 "
                        "Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 1 "
                        "Preemption is not helpful for scheduling, 3 No preemption victims found "
                        "for incoming pod.");
    json_decref(o);
    /* cpu and memory count too, each a reason of its own */
    create_gpu_pod(ks, "big", "{\"requests\":{\"cpu\":\"3800m\",\"memory\":\"9Gi\"}}");
    ksim_reconcile(ks);
    o = ok(ks, "GET", "/api/v1/namespaces/default/pods/big", NULL, NULL, NULL, 200);
    assert_string_equal(js(jp(o, "status.conditions.0"), "message"),
                        "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated "
                        "taint {k: v}, 3 Insufficient memory. preemption: 0/4 nodes are available: "
                        "1 Preemption is not helpful for scheduling, 3 No preemption victims found "
                        "for incoming pod.");
    json_decref(o);
    /* a pod that finished frees its GPUs */
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/pods/two/status", NULL,
                   "application/merge-patch+json", "{\"status\":{\"phase\":\"Succeeded\"}}", 200));
    ksim_reconcile(ks);
    n = pod_node(ks, "more");
    assert_string_equal(n, "gpu-a");
    free(n);
    ksim_free(ks);
}

/* A node a kubelet process serves: kubesim neither fakes its pods' status nor removes its
 * terminating pods; what the kubelet writes stays. */
static void test_external_kubelet(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    create_node_alloc(ks, "ext", "{\"cpu\":\"4\",\"pods\":\"110\"}", NULL, true);
    create_gpu_pod(ks, "p", "{}");
    settle(ks);
    json_t *o = ok(ks, "GET", "/api/v1/namespaces/default/pods/p", NULL, NULL, NULL, 200);
    assert_string_equal(js(o, "spec.nodeName"), "ext");
    assert_string_equal(js(o, "status.phase"), "Pending");
    assert_null(jp(o, "status.containerStatuses"));
    json_decref(o);
    /* the kubelet reports a crash loop: it stays so */
    json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/pods/p/status", NULL,
                   "application/merge-patch+json",
                   "{\"status\":{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"c\","
                   "\"ready\":false,\"restartCount\":3,\"state\":{\"waiting\":{\"reason\":"
                   "\"CrashLoopBackOff\"}}}]}}",
                   200));
    settle(ks);
    o = ok(ks, "GET", "/api/v1/namespaces/default/pods/p", NULL, NULL, NULL, 200);
    assert_string_equal(js(jp(o, "status.containerStatuses.0"), "name"), "c");
    assert_non_null(jp(o, "status.containerStatuses.0.state.waiting"));
    assert_int_equal(json_integer_value(jp(o, "status.containerStatuses.0.restartCount")), 3);
    json_decref(o);
    /* deleted: terminating until the kubelet, its containers stopped, deletes it with grace 0 */
    json_decref(ok(ks, "DELETE", "/api/v1/namespaces/default/pods/p", NULL, NULL, NULL, 200));
    settle(ks);
    o = ok(ks, "GET", "/api/v1/namespaces/default/pods/p", NULL, NULL, NULL, 200);
    assert_non_null(jp(o, "metadata.deletionTimestamp"));
    json_decref(o);
    json_decref(ok(ks, "DELETE", "/api/v1/namespaces/default/pods/p", "gracePeriodSeconds=0", NULL,
                   NULL, 200));
    json_decref(ok(ks, "GET", "/api/v1/namespaces/default/pods/p", NULL, NULL, NULL, 404));
    ksim_free(ks);
}

/* pods/log: the API server's checks here, the kubelet request the shell is to make, and the
 * Status a kubelet's error becomes. */
static void test_pod_log(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    create_node_alloc(ks, "ext", "{\"pods\":\"110\"}", NULL, true);
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods", NULL, NULL,
                   "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},"
                   "\"spec\":{\"nodeName\":\"ext\",\"initContainers\":[{\"name\":\"i\","
                   "\"image\":\"x:1\"}],\"containers\":[{\"name\":\"a\",\"image\":\"x:1\"},"
                   "{\"name\":\"b\",\"image\":\"x:1\"}]}}",
                   201));
    struct ksim_request rq = {.method = "GET",
                              .path = "/api/v1/namespaces/default/pods/p/log",
                              .query = "container=b&follow=true&tailLines=5&timestamps=1"};
    struct ksim_response rs;
    ksim_handle(ks, &rq, &rs);
    assert_int_equal(rs.code, 200);
    assert_non_null(rs.proxy);
    assert_string_equal(rs.proxy->host, "127.0.0.1");
    assert_int_equal(rs.proxy->port, 10250);
    assert_string_equal(rs.proxy->path,
                        "/containerLogs/default/p/b?follow=true&timestamps=true&tailLines=5");
    assert_true(rs.proxy->follow);
    struct ksim_response err;
    ksim_proxy_error(rs.proxy, 404, "pod not found", 13, &err);
    assert_int_equal(err.code, 404);
    json_t *o = json_loads(err.body, 0, NULL);
    assert_string_equal(js(o, "message"),
                        "the server could not find the requested resource ( pods/log p)");
    assert_string_equal(js(o, "reason"), "NotFound");
    json_decref(o);
    ksim_response_free(&err);
    ksim_proxy_error(rs.proxy, 400, "previous terminated container \"b\" in pod \"p\" not found",
                     55, &err);
    o = json_loads(err.body, 0, NULL);
    assert_string_equal(js(o, "message"),
                        "previous terminated container \"b\" in pod \"p\" not found");
    assert_string_equal(js(o, "reason"), "BadRequest");
    json_decref(o);
    ksim_response_free(&err);
    ksim_response_free(&rs);
    /* the API server's own answers */
    o = ok(ks, "GET", "/api/v1/namespaces/default/pods/p/log", NULL, NULL, NULL, 400);
    assert_string_equal(js(o, "message"), "a container name must be specified for pod p, choose "
                                          "one of: [a b] or one of the init containers: [i]");
    json_decref(o);
    json_decref(
        ok(ks, "GET", "/api/v1/namespaces/default/pods/p/log", "container=i", NULL, NULL, 200));
    o = ok(ks, "GET", "/api/v1/namespaces/default/pods/p/log", "container=a&tailLines=-1", NULL,
           NULL, 422);
    assert_string_equal(js(o, "message"), "PodLogOptions \"p\" is invalid: tailLines: Invalid "
                                          "value: -1: must be greater than or equal to 0");
    json_decref(o);
    json_decref(ok(ks, "GET", "/api/v1/namespaces/default/pods/q/log", NULL, NULL, NULL, 404));
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods/p/log", NULL, NULL, "{}", 405));
    ksim_free(ks);
}

/* The head of a kubelet's answer, as the shell's proxy reads it. */
static void test_proxy_head(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int r, code;
        int64_t length;
        size_t head;
    } cases[] = {
        {"HTTP/1.0 200 OK\r\nContent-Length: 12\r\n\r\nline1\nline2\n", 0, 200, 12, 39},
        {"HTTP/1.1 400 Bad Request\r\ncontent-length:3 \r\nX: y\r\n\r\nbad", 0, 400, 3, 53},
        {"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", 0, 200, -1, 45},
        {"HTTP/1.0 404\r\n\r\n", 0, 404, -1, 16},
        {"HTTP/1.0 200 OK\r\nContent-Le", -EAGAIN, 0, 0, 0},
        {"HTT", -EAGAIN, 0, 0, 0},
        {"", -EAGAIN, 0, 0, 0},
        {"SSH-2.0-OpenSSH\r\n\r\n", -EBADMSG, 0, 0, 0},
        {"HTTP/1.0 2x0 OK\r\n\r\n", -EBADMSG, 0, 0, 0},
        {"HTTP/1.0 099 OK\r\n\r\n", -EBADMSG, 0, 0, 0},
        {"HTTP/1.0 200 OK\r\nContent-Length: -1\r\n\r\n", -EBADMSG, 0, 0, 0},
        {"HTTP/1.0 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", -EBADMSG, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int code = 0;
        int64_t length = 0;
        size_t head = 0;
        int r = ksim_proxy_head_parse(cases[i].in, strlen(cases[i].in), &code, &length, &head);
        if (r != cases[i].r)
            fail_msg("case %zu: got %d want %d", i, r, cases[i].r);
        if (r == 0) {
            assert_int_equal(code, cases[i].code);
            assert_int_equal(length, cases[i].length);
            assert_int_equal(head, cases[i].head);
        }
    }
}

static void test_deployments(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    create_node(ks, "n1", NULL, NULL);
    create_node(ks, "n2", NULL, NULL);
    const char *dep = "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{"
                      "\"name\":\"w\"},\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{"
                      "\"app\":\"w\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"w\"}},"
                      "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i:1\"}]}}}}";
    json_decref(
        ok(ks, "POST", "/apis/apps/v1/namespaces/default/deployments", NULL, NULL, dep, 201));
    settle(ks);
    json_t *d =
        ok(ks, "GET", "/apis/apps/v1/namespaces/default/deployments/w", NULL, NULL, NULL, 200);
    assert_int_equal(json_integer_value(jp(d, "status.availableReplicas")), 2);
    assert_int_equal(json_integer_value(jp(d, "status.updatedReplicas")), 2);
    assert_string_equal(js(jp(d, "status.conditions.0"), "status"), "True");
    json_decref(d);
    json_t *l = list_pods(ks, "labelSelector=app%3Dw");
    assert_int_equal(count_live(l), 2);
    assert_non_null(json_object_get(jp(l, "items.0.metadata.labels"), "pod-template-hash"));
    json_decref(l);
    /* a new template rolls to a new ReplicaSet; the old one is scaled to 0 */
    json_decref(ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/deployments/w", NULL,
                   "application/strategic-merge-patch+json",
                   "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\","
                   "\"image\":\"i:2\"}]}}}}",
                   200));
    settle(ks);
    json_t *rs =
        ok(ks, "GET", "/apis/apps/v1/namespaces/default/replicasets", NULL, NULL, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(rs, "items")), 2);
    int64_t sum = 0;
    size_t i;
    json_t *x;
    json_array_foreach (json_object_get(rs, "items"), i, x)
        sum += json_integer_value(jp(x, "spec.replicas"));
    assert_int_equal(sum, 2);
    json_decref(rs);
    l = list_pods(ks, "labelSelector=app%3Dw");
    assert_int_equal(count_live(l), 2);
    assert_string_equal(js(jp(l, "items.0.spec.containers.0"), "image"), "i:2");
    json_decref(l);
    /* the scale subresource */
    json_t *sc = ok(ks, "GET", "/apis/apps/v1/namespaces/default/deployments/w/scale", NULL, NULL,
                    NULL, 200);
    assert_string_equal(js(sc, "kind"), "Scale");
    assert_int_equal(json_integer_value(jp(sc, "spec.replicas")), 2);
    assert_string_equal(js(sc, "status.selector"), "app=w");
    json_decref(sc);
    json_decref(ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/deployments/w/scale", NULL,
                   "application/merge-patch+json", "{\"spec\":{\"replicas\":3}}", 200));
    json_decref(ok(ks, "PATCH", "/apis/apps/v1/namespaces/default/deployments/w/scale", NULL,
                   "application/merge-patch+json", "{\"spec\":{\"replicas\":-1}}", 422));
    settle(ks);
    l = list_pods(ks, "labelSelector=app%3Dw");
    assert_int_equal(count_live(l), 3);
    json_decref(l);
    /* deleting the Deployment collects its ReplicaSets and pods */
    json_decref(
        ok(ks, "DELETE", "/apis/apps/v1/namespaces/default/deployments/w", NULL, NULL, NULL, 200));
    settle(ks);
    l = list_pods(ks, NULL);
    assert_int_equal(json_array_size(json_object_get(l, "items")), 0);
    json_decref(l);
    ksim_free(ks);
}

/* ---- PodDisruptionBudgets and eviction ---------------------------------------------------- */

static void test_pdb_eviction(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    create_node(ks, "n", NULL, NULL);
    for (int i = 0; i < 3; i++) {
        char body[512];
        snprintf(body, sizeof(body),
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p%d\","
                 "\"labels\":{\"app\":\"w\"}},\"spec\":{\"nodeName\":\"n\",\"containers\":[{"
                 "\"name\":\"c\",\"image\":\"i:1\"}]}}",
                 i);
        json_decref(ok(ks, "POST", "/api/v1/namespaces/default/pods", NULL, NULL, body, 201));
    }
    json_decref(ok(ks, "POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", NULL,
                   NULL,
                   "{\"apiVersion\":\"policy/v1\",\"kind\":\"PodDisruptionBudget\",\"metadata\":{"
                   "\"name\":\"b\"},\"spec\":{\"minAvailable\":\"60%\",\"selector\":{"
                   "\"matchLabels\":{\"app\":\"w\"}}}}",
                   201));
    const char *ev = "{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{"
                     "\"name\":\"%s\"}}";
    char body[256];
    /* not yet processed by the controller: 429 */
    snprintf(body, sizeof(body), ev, "p0");
    json_decref(
        ok(ks, "POST", "/api/v1/namespaces/default/pods/p0/eviction", NULL, NULL, body, 429));
    ksim_reconcile(ks);
    fake_now += 1500;
    ksim_reconcile(ks);
    json_t *b = ok(ks, "GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/b", NULL,
                   NULL, NULL, 200);
    /* 3 healthy, 60% of 3 rounds up to 2 desired: one disruption allowed */
    assert_int_equal(json_integer_value(jp(b, "status.currentHealthy")), 3);
    assert_int_equal(json_integer_value(jp(b, "status.desiredHealthy")), 2);
    assert_int_equal(json_integer_value(jp(b, "status.disruptionsAllowed")), 1);
    json_decref(b);
    json_t *o =
        ok(ks, "POST", "/api/v1/namespaces/default/pods/p0/eviction", NULL, NULL, body, 201);
    assert_string_equal(js(o, "status"), "Success");
    json_decref(o);
    /* the budget is spent at once, before the controller recomputes it */
    snprintf(body, sizeof(body), ev, "p1");
    json_decref(
        ok(ks, "POST", "/api/v1/namespaces/default/pods/p1/eviction", NULL, NULL, body, 429));
    json_decref(ok(ks, "PATCH", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/b", NULL,
                   "application/merge-patch+json", "{\"spec\":{\"minAvailable\":2}}", 200));
    ksim_reconcile(ks);
    o = ok(ks, "POST", "/api/v1/namespaces/default/pods/p1/eviction", NULL, NULL, body, 429);
    assert_string_equal(js(o, "reason"), "TooManyRequests");
    assert_string_equal(js(o, "message"),
                        "Cannot evict pod as it would violate the pod's disruption budget.");
    assert_string_equal(js(jp(o, "details.causes.0"), "reason"), "DisruptionBudget");
    assert_string_equal(js(jp(o, "details.causes.0"), "message"),
                        "The disruption budget b needs 2 healthy pods and has 2 currently");
    json_decref(o);
    /* the evicted pod terminates gracefully, then is gone */
    o = ok(ks, "GET", "/api/v1/namespaces/default/pods/p0", NULL, NULL, NULL, 200);
    assert_non_null(jp(o, "metadata.deletionTimestamp"));
    assert_int_equal(json_integer_value(jp(o, "metadata.deletionGracePeriodSeconds")), 30);
    json_decref(o);
    fake_now += 1500;
    ksim_reconcile(ks);
    json_decref(ok(ks, "GET", "/api/v1/namespaces/default/pods/p0", NULL, NULL, NULL, 404));
    /* relax the budget: eviction allowed */
    json_decref(ok(ks, "PATCH", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/b", NULL,
                   "application/merge-patch+json", "{\"spec\":{\"minAvailable\":1}}", 200));
    ksim_reconcile(ks);
    json_decref(
        ok(ks, "POST", "/api/v1/namespaces/default/pods/p1/eviction", NULL, NULL, body, 201));
    /* name mismatch */
    json_decref(
        ok(ks, "POST", "/api/v1/namespaces/default/pods/p2/eviction", NULL, NULL, body, 400));
    /* a forced delete (grace period 0) removes a bound pod at once */
    json_decref(ok(ks, "DELETE", "/api/v1/namespaces/default/pods/p2", "gracePeriodSeconds=0", NULL,
                   NULL, 200));
    json_decref(ok(ks, "GET", "/api/v1/namespaces/default/pods/p2", NULL, NULL, NULL, 404));
    ksim_free(ks);
}

/* ---- watch -------------------------------------------------------------------------------- */

static struct ksim_watch *watch(struct ksim *ks, const char *path, const char *q, int *code)
{
    struct ksim_request rq = {
        .method = "GET", .path = path, .query = q, .accept = "application/json"};
    struct ksim_response rs;
    ksim_handle(ks, &rq, &rs);
    *code = rs.code;
    ksim_response_free(&rs);
    return rs.watch;
}

static json_t *events(struct ksim *ks, struct ksim_watch *w)
{
    struct sbuf b;
    sbuf_init(&b, 1u << 24);
    ksim_watch_next(ks, w, &b, 0);
    json_t *a = json_array();
    char *save = NULL;
    for (char *line = strtok_r(b.data ? b.data : (char[]){0}, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save))
        json_array_append_new(a, json_loads(line, 0, NULL));
    sbuf_free(&b);
    return a;
}

static void test_watch(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    create_node(ks, "a", "{\"x\":\"1\"}", NULL);
    uint64_t rv = ksim_resource_version(ks);
    char q[128];
    snprintf(q, sizeof(q), "watch=true&resourceVersion=%llu&labelSelector=x%%3D1",
             (unsigned long long)rv);
    int code = 0;
    struct ksim_watch *w = watch(ks, "/api/v1/nodes", q, &code);
    assert_int_equal(code, 200);
    assert_non_null(w);
    json_t *e = events(ks, w);
    assert_int_equal(json_array_size(e), 0);
    json_decref(e);
    create_node(ks, "b", "{\"x\":\"1\"}", NULL);
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/a", NULL, "application/merge-patch+json",
                   "{\"metadata\":{\"labels\":{\"x\":\"2\"}}}", 200));
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/b", NULL, "application/merge-patch+json",
                   "{\"metadata\":{\"labels\":{\"y\":\"1\"}}}", 200));
    json_decref(ok(ks, "DELETE", "/api/v1/nodes/b", NULL, NULL, NULL, 200));
    e = events(ks, w);
    assert_int_equal(json_array_size(e), 4);
    assert_string_equal(js(json_array_get(e, 0), "type"), "ADDED");
    assert_string_equal(js(json_array_get(e, 1), "type"), "DELETED"); /* a left the selector */
    assert_string_equal(js(jp(e, "1.object"), "metadata.name"), "a");
    assert_string_equal(js(json_array_get(e, 2), "type"), "MODIFIED");
    assert_string_equal(js(json_array_get(e, 3), "type"), "DELETED");
    json_decref(e);
    ksim_watch_free(ks, w);
    /* initial events with resourceVersion=0, then a bookmark when allowed */
    w = watch(ks, "/api/v1/nodes", "watch=1&resourceVersion=0&allowWatchBookmarks=true", &code);
    e = events(ks, w);
    assert_int_equal(json_array_size(e), 1);
    json_decref(e);
    fake_now += 61000;
    e = events(ks, w);
    assert_int_equal(json_array_size(e), 1);
    assert_string_equal(js(json_array_get(e, 0), "type"), "BOOKMARK");
    json_decref(e);
    ksim_watch_free(ks, w);
    /* retention: events older than the window are compacted; old rvs get 410 Expired */
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/a", NULL, "application/merge-patch+json",
                   "{\"metadata\":{\"labels\":{\"z\":\"1\"}}}", 200));
    fake_now += 61000;
    json_decref(ok(ks, "PATCH", "/api/v1/nodes/a", NULL, "application/merge-patch+json",
                   "{\"metadata\":{\"labels\":{\"z\":\"2\"}}}", 200));
    w = watch(ks, "/api/v1/nodes", q, &code);
    assert_int_equal(code, 200);
    e = events(ks, w);
    assert_int_equal(json_array_size(e), 1);
    assert_string_equal(js(json_array_get(e, 0), "type"), "ERROR");
    assert_int_equal(json_integer_value(jp(e, "0.object.code")), 410);
    assert_string_equal(js(jp(e, "0.object"), "reason"), "Expired");
    assert_non_null(strstr(js(jp(e, "0.object"), "message"), "too old resource version"));
    json_decref(e);
    struct sbuf b;
    sbuf_init(&b, 4096);
    assert_int_equal(ksim_watch_next(ks, w, &b, 0), -1);
    sbuf_free(&b);
    ksim_watch_free(ks, w);
    /* a resourceVersion from the future (a client that outlived a restart): 504 */
    snprintf(q, sizeof(q), "watch=1&resourceVersion=%llu",
             (unsigned long long)ksim_resource_version(ks) + 100);
    json_t *tl = ok(ks, "GET", "/api/v1/nodes", q, NULL, NULL, 504);
    assert_string_equal(js(jp(tl, "details.causes.0"), "reason"), "ResourceVersionTooLarge");
    json_decref(tl);
    /* timeoutSeconds ends the stream */
    w = watch(ks, "/api/v1/nodes", "watch=1&resourceVersion=0&timeoutSeconds=1", &code);
    json_decref(events(ks, w));
    fake_now += 2000;
    sbuf_init(&b, 4096);
    assert_int_equal(ksim_watch_next(ks, w, &b, 0), -1);
    sbuf_free(&b);
    ksim_watch_free(ks, w);
    ksim_free(ks);
}

/* A large initial state streams in slices: every object arrives exactly once. */
static void test_watch_large_initial(void **state)
{
    (void)state;
    struct ksim_opts o;
    ksim_opts_default(&o);
    o.now_ms = clock_fn;
    struct ksim *ks = ksim_new(&o);
    char pad[1025];
    memset(pad, 'x', 1024);
    pad[1024] = '\0';
    for (int i = 0; i < 1500; i++) {
        char body[1300];
        snprintf(body, sizeof(body),
                 "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                 "\"c%d\"},\"data\":{\"p\":\"%s\"}}",
                 i, pad);
        json_decref(ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL, body, 201));
    }
    int code;
    struct ksim_watch *w = watch(ks, "/api/v1/configmaps", "watch=1", &code);
    size_t total = 0;
    int calls = 0;
    for (; calls < 10 && total < 1500; calls++) {
        json_t *e = events(ks, w);
        total += json_array_size(e);
        json_decref(e);
    }
    assert_int_equal(total, 1500);
    assert_true(calls >= 2);
    ksim_watch_free(ks, w);
    ksim_free(ks);
}

/* An event too large for the stream buffer ends the watch (the client watches again) instead of
 * being skipped; a status message over its limit says it was cut. */
static void test_buffer_limits(void **state)
{
    (void)state;
    struct ksim_opts o;
    ksim_opts_default(&o);
    o.now_ms = clock_fn;
    struct ksim *ks = ksim_new(&o);
    char pad[1025];
    memset(pad, 'x', 1024);
    pad[1024] = '\0';
    char body[1300];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
             "\"big\"},\"data\":{\"p\":\"%s\"}}",
             pad);
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL, body, 201));
    int code;
    struct ksim_watch *w = watch(ks, "/api/v1/configmaps", "watch=1", &code);
    assert_int_equal(code, 200);
    struct sbuf b;
    sbuf_init(&b, 256);
    assert_int_equal(ksim_watch_next(ks, w, &b, 0), -1);
    assert_int_equal(b.len, 0);
    sbuf_reset(&b);
    assert_int_equal(ksim_watch_next(ks, w, &b, 0), -1);
    sbuf_free(&b);
    ksim_watch_free(ks, w);

    /* 3000 invalid label keys: a 422 whose message is far over its 64 KiB */
    struct sbuf big;
    sbuf_init(&big, 1u << 20);
    sbuf_adds(&big, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                    "\"bad\",\"labels\":{");
    for (int i = 0; i < 3000; i++)
        sbuf_addf(&big, "%s\"-bad%d\":\"v\"", i ? "," : "", i);
    sbuf_adds(&big, "}}}");
    assert_int_equal(sbuf_check(&big), 0);
    json_t *st = ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL, big.data, 422);
    const char *msg = js(st, "message");
    assert_non_null(msg);
    assert_true(str_has_suffix(msg, "... (cut: longer than 65536 bytes)"));
    json_decref(st);
    sbuf_free(&big);
    ksim_free(ks);
}

static void test_pagination(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    for (int i = 0; i < 7; i++) {
        char name[16];
        snprintf(name, sizeof(name), "n%d", i);
        create_node(ks, name, NULL, NULL);
    }
    int seen = 0;
    char q[1024] = "limit=3";
    for (int page = 0; page < 5; page++) {
        json_t *l = ok(ks, "GET", "/api/v1/nodes", q, NULL, NULL, 200);
        seen += (int)json_array_size(json_object_get(l, "items"));
        const char *c = js(l, "metadata.continue");
        if (!c) {
            json_decref(l);
            break;
        }
        assert_true(json_integer_value(jp(l, "metadata.remainingItemCount")) > 0);
        snprintf(q, sizeof(q), "limit=3&continue=%s", c);
        json_decref(l);
    }
    assert_int_equal(seen, 7);
    json_decref(ok(ks, "GET", "/api/v1/nodes", "limit=3&continue=%25%25garbage", NULL, NULL, 400));
    ksim_free(ks);
}

static void test_crd_lifecycle(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    const char *crd =
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
        "\"metadata\":{\"name\":\"gadgets.example.com\"},\"spec\":{\"group\":\"example.com\","
        "\"scope\":\"Cluster\",\"names\":{\"plural\":\"gadgets\",\"kind\":\"Gadget\"},"
        "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,\"subresources\":{"
        "\"status\":{}}}]}}";
    json_decref(ok(ks, "GET", "/apis/example.com/v1/gadgets", NULL, NULL, NULL, 404));
    json_t *o = ok(ks, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", NULL,
                   NULL, crd, 201);
    assert_string_equal(js(jp(o, "status.conditions.1"), "type"), "Established");
    json_decref(o);
    json_t *d = ok(ks, "GET", "/apis/example.com/v1", NULL, NULL, NULL, 200);
    assert_string_equal(js(jp(d, "resources.0"), "name"), "gadgets");
    assert_string_equal(js(jp(d, "resources.1"), "name"), "gadgets/status");
    json_decref(d);
    o = ok(ks, "POST", "/apis/example.com/v1/gadgets", NULL, NULL,
           "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":\"g\"},"
           "\"spec\":{\"n\":1},\"status\":{\"ok\":true}}",
           201);
    assert_null(jp(o, "status")); /* status subresource: dropped on create */
    assert_int_equal(json_integer_value(jp(o, "metadata.generation")), 1);
    json_decref(o);
    json_decref(ok(ks, "PATCH", "/apis/example.com/v1/gadgets/g", NULL,
                   "application/strategic-merge-patch+json", "{}", 415));
    o = ok(ks, "PATCH", "/apis/example.com/v1/gadgets/g/status", NULL,
           "application/merge-patch+json", "{\"status\":{\"ok\":true}}", 200);
    assert_true(json_is_true(jp(o, "status.ok")));
    json_decref(o);
    json_decref(ok(ks, "DELETE",
                   "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                   "gadgets.example.com",
                   NULL, NULL, NULL, 200));
    json_decref(ok(ks, "GET", "/apis/example.com/v1/gadgets", NULL, NULL, NULL, 404));
    /* bad CRD name */
    o = ok(ks, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", NULL, NULL,
           "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
           "\"metadata\":{\"name\":\"wrong.example.com\"},\"spec\":{\"group\":\"example.com\","
           "\"scope\":\"Cluster\",\"names\":{\"plural\":\"gadgets\",\"kind\":\"Gadget\"},"
           "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true}]}}",
           422);
    json_decref(o);
    ksim_free(ks);
}

/* A ConfigMap as kubectl's typed client encodes it (captured from kubectl 1.32). */
static void test_protobuf_bodies(void **state)
{
    (void)state;
    static const char pb[] =
        "\x6b\x38\x73\x00\x0a\x0f\x0a\x02\x76\x31\x12\x09\x43\x6f\x6e\x66\x69\x67\x4d\x61\x70\x12"
        "\x2c\x0a\x1a\x0a\x03\x63\x6d\x39\x12\x00\x1a\x07\x64\x65\x66\x61\x75\x6c\x74\x22\x00\x2a"
        "\x00\x32\x00\x38\x00\x42\x00\x12\x06\x0a\x01\x61\x12\x01\x62\x12\x06\x0a\x01\x6b\x12\x01"
        "\x76\x1a\x00\x22\x00";
    struct ksim *ks = new_sim();
    struct ksim_request rq = {.method = "POST",
                              .path = "/api/v1/namespaces/default/configmaps",
                              .content_type = "application/vnd.kubernetes.protobuf",
                              .body = pb,
                              .body_len = sizeof(pb) - 1};
    struct ksim_response rs;
    ksim_handle(ks, &rq, &rs);
    assert_int_equal(rs.code, 201);
    json_t *o = json_loads(rs.body, 0, NULL);
    ksim_response_free(&rs);
    assert_string_equal(js(o, "metadata.name"), "cm9");
    assert_string_equal(js(o, "data.a"), "b");
    assert_string_equal(js(o, "data.k"), "v");
    json_decref(o);
    /* every truncation is an answer, never a crash */
    for (size_t n = 0; n < sizeof(pb) - 1; n++) {
        rq.body_len = n;
        ksim_handle(ks, &rq, &rs);
        assert_true(rs.code == 415 || rs.code == 400 || rs.code == 201 || rs.code == 409 ||
                    rs.code == 422);
        ksim_response_free(&rs);
    }
    ksim_free(ks);
}

static void test_hostile_requests(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    const char *paths[] = {"",
                           "/",
                           "//",
                           "/api",
                           "/api/v1/namespaces//pods",
                           "/apis/apps/v1/namespaces/default/daemonsets/x/y/z/w",
                           "/api/v1/namespaces/default/pods/x/eviction",
                           "/api/v1/nodes/%00",
                           "/apis/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o"};
    const char *methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "BREW"};
    const char *bodies[] = {
        NULL, "", "null", "[]", "{\"kind\":7}", "\xff\xfe", "{\"metadata\":[]}"};
    /* deeply nested bodies through every patch type */
    struct sbuf deep;
    sbuf_init(&deep, 1u << 20);
    sbuf_adds(&deep, "{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":");
    for (int i = 0; i < 1500; i++)
        sbuf_adds(&deep, "{\"x\":");
    sbuf_adds(&deep, "1");
    for (int i = 0; i < 1500; i++)
        sbuf_adds(&deep, "}");
    sbuf_adds(&deep, "}");
    assert_int_equal(sbuf_check(&deep), 0);
    const char *ctypes[] = {"application/merge-patch+json",
                            "application/strategic-merge-patch+json", "application/json-patch+json",
                            "application/apply-patch+yaml"};
    for (size_t c = 0; c < sizeof(ctypes) / sizeof(ctypes[0]); c++) {
        int code = 0;
        struct ksim_opts o;
        ksim_opts_default(&o);
        struct ksim *big = ksim_new(&o);
        json_decref(call(big, "PATCH", "/api/v1/namespaces/default", "fieldManager=f", ctypes[c],
                         deep.data, &code));
        assert_true(code >= 200 && code < 600);
        ksim_free(big);
    }
    sbuf_free(&deep);
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++)
            for (size_t b = 0; b < sizeof(bodies) / sizeof(bodies[0]); b++) {
                int code = 0;
                json_decref(
                    call(ks, methods[m], paths[i], "watch=0&limit=x", NULL, bodies[b], &code));
                assert_true(code >= 200 && code < 600);
            }
    ksim_free(ks);
}

/* The core's metrics as Prometheus text; a buffer too small is an error, not a cut page. */
static void test_metrics_text(void **state)
{
    (void)state;
    _cleanup_(ksim_freep) struct ksim *ks = new_sim();
    _cleanup_sbuf_ struct sbuf out;
    sbuf_init(&out, 1u << 20);
    assert_int_equal(ksim_metrics(ks, &out), 0);
    assert_non_null(strstr(out.data, "# HELP kubesim_watches_active Watch streams open now.\n"
                                     "# TYPE kubesim_watches_active gauge\n"
                                     "kubesim_watches_active 0\n"));
    assert_non_null(strstr(out.data, "# TYPE kubesim_objects gauge\n"));
    assert_non_null(strstr(out.data, "kubesim_objects{resource=\"namespaces\"} 4\n"));
    _cleanup_sbuf_ struct sbuf small;
    sbuf_init(&small, 64);
    assert_int_equal(ksim_metrics(ks, &small), -ENOBUFS);
}

/* ---- persistence (--data-dir) ------------------------------------------------------------- */

static struct ksim *open_sim(const char *dir, struct ksim_persist_info *info, int want)
{
    struct ksim_opts o;
    ksim_opts_default(&o);
    o.now_ms = clock_fn;
    o.pod_ready_delay_ms = 1000;
    o.watch_retention_ms = 60000;
    o.max_body = 4096;
    o.journal_compact_bytes = 4096;
    struct ksim *ks = ksim_new(&o);
    struct err e = {0};
    int r = ksim_persist_open(ks, dir, info, &e);
    if (r != want)
        fprintf(stderr, "ksim_persist_open: %d (%s), want %d\n", r, e.msg, want);
    assert_int_equal(r, want);
    return ks;
}

static char *read_text(const char *path)
{
    char *s = NULL;
    size_t n;
    struct err e = {0};
    assert_int_equal(file_read_all(path, 1u << 24, &s, &n, &e), 0);
    return s;
}

static void test_persistence(void **state)
{
    (void)state;
    char dir[] = "/tmp/kubesim-persist-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct ksim_persist_info info;
    struct ksim *ks = open_sim(dir, &info, 0);
    assert_false(info.loaded);
    create_node(ks, "n1", "{\"a\":\"1\"}", NULL);
    json_decref(ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL,
                   "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"keep\"},"
                   "\"data\":{\"k\":\"v\"}}",
                   201));
    json_decref(
        ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL,
           "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"gone\"}}", 201));
    json_decref(
        ok(ks, "DELETE", "/api/v1/namespaces/default/configmaps/gone", NULL, NULL, NULL, 200));
    json_decref(ok(ks, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", NULL,
                   NULL,
                   "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":"
                   "\"CustomResourceDefinition\",\"metadata\":{\"name\":\"gadgets.example.com\"},"
                   "\"spec\":{\"group\":\"example.com\",\"scope\":\"Cluster\",\"names\":{"
                   "\"plural\":\"gadgets\",\"kind\":\"Gadget\"},\"versions\":[{\"name\":\"v1\","
                   "\"served\":true,\"storage\":true}]}}",
                   201));
    json_decref(ok(ks, "POST", "/apis/example.com/v1/gadgets", NULL, NULL,
                   "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{\"name\":"
                   "\"g\"},\"spec\":{\"n\":1}}",
                   201));
    ksim_reconcile(ks); /* the controllers' writes (ServiceAccounts) are journaled too */
    json_t *keep =
        ok(ks, "GET", "/api/v1/namespaces/default/configmaps/keep", NULL, NULL, NULL, 200);
    uint64_t rv = ksim_resource_version(ks);
    ksim_free(ks); /* no write at free: what is on disk is what a SIGKILL leaves */

    ks = open_sim(dir, &info, 0);
    assert_true(info.loaded);
    assert_true(info.journal_records > 0);
    assert_int_equal(info.rv, rv);
    assert_int_equal(ksim_resource_version(ks), rv);
    json_t *back =
        ok(ks, "GET", "/api/v1/namespaces/default/configmaps/keep", NULL, NULL, NULL, 200);
    assert_true(json_equal(keep, back));
    json_decref(back);
    json_decref(ok(ks, "GET", "/api/v1/namespaces/default/configmaps/gone", NULL, NULL, NULL, 404));
    json_decref(ok(ks, "GET", "/apis/example.com/v1/gadgets/g", NULL, NULL, NULL, 200));
    json_decref(
        ok(ks, "GET", "/api/v1/namespaces/default/serviceaccounts/default", NULL, NULL, NULL, 200));
    /* a watch from before the restart: 410; from now: events */
    char q[96];
    snprintf(q, sizeof(q), "watch=1&resourceVersion=%llu", (unsigned long long)rv - 1);
    int code = 0;
    struct ksim_watch *w = watch(ks, "/api/v1/namespaces/default/configmaps", q, &code);
    assert_int_equal(code, 200);
    json_t *e = events(ks, w);
    assert_string_equal(js(json_array_get(e, 0), "type"), "ERROR");
    assert_int_equal(json_integer_value(jp(e, "0.object.code")), 410);
    json_decref(e);
    ksim_watch_free(ks, w);
    snprintf(q, sizeof(q), "watch=1&resourceVersion=%llu", (unsigned long long)rv);
    w = watch(ks, "/api/v1/namespaces/default/configmaps", q, &code);
    json_t *made =
        ok(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, NULL,
           "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"new\"}}", 201);
    e = events(ks, w);
    assert_string_equal(js(json_array_get(e, 0), "type"), "ADDED");
    assert_string_equal(js(json_array_get(e, 0), "object.metadata.name"), "new");
    json_decref(e);
    ksim_watch_free(ks, w);
    /* UIDs and resourceVersions go on from the loaded counters */
    assert_string_not_equal(js(made, "metadata.uid"), js(keep, "metadata.uid"));
    assert_true(strtoull(js(made, "metadata.resourceVersion"), NULL, 10) > rv);
    json_decref(made);
    /* past the compaction threshold the journal becomes a snapshot at the next reconcile */
    char jpath[256];
    snprintf(jpath, sizeof(jpath), "%s/journal.jsonl", dir);
    for (int i = 0; i < 100; i++)
        json_decref(ok(ks, "PATCH", "/api/v1/namespaces/default/configmaps/new", NULL,
                       "application/merge-patch+json",
                       i % 2 ? "{\"data\":{\"n\":\"1\"}}" : "{\"data\":{\"n\":\"2\"}}", 200));
    struct stat jst;
    assert_int_equal(stat(jpath, &jst), 0);
    assert_true(jst.st_size > 4096);
    off_t before = jst.st_size;
    ksim_reconcile(ks);
    assert_int_equal(stat(jpath, &jst), 0);
    assert_true(jst.st_size < before); /* emptied, then the controllers' writes, if any */
    /* a second process on the same directory is refused */
    struct ksim *other = open_sim(dir, NULL, -EBUSY);
    ksim_free(other);
    ksim_free(ks);

    /* a torn last journal line is dropped, the lines before it kept */
    char path[256];
    snprintf(path, sizeof(path), "%s/journal.jsonl", dir);
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs("{\"rv\":99999999999999,\"u\":1,\"t\":\"/v1/configmaps\",\"o\":{\"metad", f);
    fclose(f);
    ks = open_sim(dir, &info, 0);
    json_decref(ok(ks, "GET", "/api/v1/namespaces/default/configmaps/new", NULL, NULL, NULL, 200));
    assert_true(ksim_resource_version(ks) < 99999999999999ull);
    ksim_free(ks);

    /* a corrupt snapshot: -EBADMSG naming the file, nothing written */
    snprintf(path, sizeof(path), "%s/snapshot.jsonl", dir);
    char *good = read_text(path);
    struct err err = {0};
    assert_int_equal(file_write_atomic(path,
                                       "{\"kubesim\":\"snapshot\",\"version\":1}\n{\"t\":1}\n", 43,
                                       0600, &err),
                     0);
    ks = new_sim();
    assert_int_equal(ksim_persist_open(ks, dir, NULL, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "snapshot.jsonl\" line 2"));
    ksim_free(ks);
    char *after = read_text(path);
    assert_string_equal(after, "{\"kubesim\":\"snapshot\",\"version\":1}\n{\"t\":1}\n");
    free(after);
    free(good);
    json_decref(keep);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_selectors),
        cmocka_unit_test(test_selectors_over_http),
        cmocka_unit_test(test_crud_semantics),
        cmocka_unit_test(test_generation_and_status),
        cmocka_unit_test(test_strategic_merge_patch),
        cmocka_unit_test(test_merge_and_json_patch),
        cmocka_unit_test(test_server_side_apply),
        cmocka_unit_test(test_garbage_collection),
        cmocka_unit_test(test_daemonset_scheduling),
        cmocka_unit_test(test_daemonset_updates),
        cmocka_unit_test(test_controllers_follow_log),
        cmocka_unit_test(test_daemonset_burst),
        cmocka_unit_test(test_shared_values_stay_apart),
        cmocka_unit_test(test_daemon_pods_share_template),
        cmocka_unit_test(test_write_response_is_event_json),
        cmocka_unit_test(test_scheduler),
        cmocka_unit_test(test_scheduler_resources),
        cmocka_unit_test(test_external_kubelet),
        cmocka_unit_test(test_pod_log),
        cmocka_unit_test(test_proxy_head),
        cmocka_unit_test(test_deployments),
        cmocka_unit_test(test_pdb_eviction),
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_watch_large_initial),
        cmocka_unit_test(test_buffer_limits),
        cmocka_unit_test(test_pagination),
        cmocka_unit_test(test_crd_lifecycle),
        cmocka_unit_test(test_protobuf_bodies),
        cmocka_unit_test(test_hostile_requests),
        cmocka_unit_test(test_metrics_text),
        cmocka_unit_test(test_persistence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
