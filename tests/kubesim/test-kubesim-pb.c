/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's protobuf: a corpus with an object of every built-in kind kubesim serves
 * (fixtures/pb-corpus.yaml) created as JSON in one kubesim and as protobuf in another reads back
 * the same, each object reads back the same as JSON and as protobuf, and lists, watches, errors
 * and content negotiation behave as the API server's. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kubesim-internal.h"
#include "kubesim-pb.h"
#include "yamlcfg.h"

#define PB   KS_PB_MEDIA_TYPE
#define JSON "application/json"

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
    return ksim_new(&o);
}

/* One request; *ret the body as JSON (decoded from protobuf when the answer is protobuf). */
static int request(struct ksim *ks, const char *method, const char *path, const char *query,
                   const char *ctype, const void *body, size_t len, const char *accept,
                   json_t **ret, const char **ret_ctype)
{
    struct ksim_request rq = {.method = method,
                              .path = path,
                              .query = query,
                              .content_type = ctype,
                              .accept = accept,
                              .body = body,
                              .body_len = len};
    struct ksim_response rs;
    ksim_handle(ks, &rq, &rs);
    json_t *v = NULL;
    if (rs.content_type && streq(rs.content_type, PB)) {
        struct err e = {0};
        if (ks_pb_decode(rs.body, rs.body_len, &v, &e) < 0)
            fail_msg("%s %s: the protobuf answer does not decode: %s", method, path, err_msg(&e));
    } else if (rs.body) {
        v = json_loadb(rs.body, rs.body_len, 0, NULL);
    }
    if (ret_ctype)
        *ret_ctype = rs.content_type;
    if (rs.watch)
        ksim_watch_free(ks, rs.watch);
    int code = rs.code;
    ksim_response_free(&rs);
    *ret = v;
    return code;
}

static json_t *get(struct ksim *ks, const char *path, const char *accept, const char *want_ctype)
{
    json_t *v;
    const char *ct;
    int code = request(ks, "GET", path, NULL, NULL, NULL, 0, accept, &v, &ct);
    assert_int_equal(code, 200);
    assert_string_equal(ct, want_ctype);
    return v;
}

static void pb_body(json_t *obj, struct sbuf *b)
{
    struct err e = {0};
    sbuf_init(b, 16u << 20);
    if (ks_pb_encode(obj, b, &e) < 0)
        fail_msg("encode %s: %s", json_string_value(json_object_get(obj, "kind")), err_msg(&e));
}

static void assert_same(json_t *a, json_t *b, const char *what)
{
    if (json_equal(a, b))
        return;
    char *sa = json_dumps(a, JSON_SORT_KEYS | JSON_INDENT(1));
    char *sb = json_dumps(b, JSON_SORT_KEYS | JSON_INDENT(1));
    fprintf(stderr, "%s differ:\n--- JSON\n%s\n--- protobuf\n%s\n", what, sa, sb);
    free(sa);
    free(sb);
    fail();
}

static json_t *load_corpus(void)
{
    const char *root = getenv("GPUOP_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/kubesim/fixtures/pb-corpus.yaml", root ? root : ".");
    json_t *v = NULL;
    struct err e = {0};
    if (yaml_load_file(path, &v, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_true(json_is_array(v));
    return v;
}

/* The object's own path: its collection and name. */
static char *object_path(json_t *entry)
{
    return xasprintf("%s/%s", json_string_value(json_object_get(entry, "path")),
                     kobj_path_str(json_object_get(entry, "object"), "metadata.name"));
}

static void drop(json_t *obj, const char *const *paths, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%s", paths[i]);
        char *dot = strrchr(buf, '.');
        *dot = '\0';
        json_object_del(kobj_path(obj, buf), dot + 1);
    }
}

/* Every kind of the corpus, created as JSON (kubesim A) and as protobuf (kubesim B): each reads
 * back the same from both, as JSON and as protobuf. */
static void test_corpus_round_trip(void **state)
{
    (void)state;
    json_t *corpus = load_corpus();
    struct ksim *a = new_sim(), *b = new_sim();
    size_t i;
    json_t *entry;
    json_array_foreach (corpus, i, entry) {
        json_t *obj = json_object_get(entry, "object");
        const char *path = json_string_value(json_object_get(entry, "path"));
        const char *kind = json_string_value(json_object_get(obj, "kind"));
        bool create_only = json_is_true(json_object_get(entry, "create_only"));
        char *js = json_dumps(obj, JSON_COMPACT);
        struct sbuf pb;
        pb_body(obj, &pb);
        json_t *ra, *rb;
        const char *cta, *ctb;
        int ca = request(a, "POST", path, NULL, JSON, js, strlen(js), JSON, &ra, &cta);
        int cb = request(b, "POST", path, NULL, PB, pb.data, pb.len, PB ", " JSON, &rb, &ctb);
        /* a kind kubesim only answers (SelfSubjectRulesReview: 405) answers the same */
        if (ca != cb || (!create_only && ca != 201)) {
            char *s = json_dumps(rb, 0);
            fail_msg("POST %s (%s): JSON %d, protobuf %d: %s", path, kind, ca, cb, s);
        }
        /* what kubesim answers in protobuf is what it answers in JSON */
        assert_string_equal(ctb, PB);
        assert_string_equal(cta, JSON);
        if (!create_only) {
            static const char *const volatile_fields[] = {"metadata.uid", "spec.clusterIP"};
            json_t *x = json_deep_copy(ra), *y = json_deep_copy(rb);
            drop(x, volatile_fields, ARRAY_SIZE(volatile_fields));
            drop(y, volatile_fields, ARRAY_SIZE(volatile_fields));
            json_object_del(json_object_get(x, "spec"), "clusterIPs");
            json_object_del(json_object_get(y, "spec"), "clusterIPs");
            assert_same(x, y, kind);
            json_decref(x);
            json_decref(y);
            /* the stored object, read as JSON and as protobuf */
            char *op = object_path(entry);
            json_t *gj = get(a, op, JSON, JSON);
            json_t *gp = get(a, op, PB, PB);
            assert_same(gj, gp, kind);
            assert_same(gj, ra, kind);
            json_decref(gj);
            json_decref(gp);
            free(op);
        } else {
            const char *got = kobj_str(rb, "kind");
            assert_true(streq(got, kind) || streq(got, "Status"));
            assert_same(json_object_get(ra, "kind"), json_object_get(rb, "kind"), kind);
        }
        json_decref(ra);
        json_decref(rb);
        sbuf_free(&pb);
        free(js);
    }
    /* every built-in kind kubesim serves is in the corpus; only the CRD kind and
     * resource.k8s.io/v1's have no message (apiextensions and resource v1 are not among the
     * .proto files, v0.32.9) */
    for (struct ks_type *t = a->types; t; t = t->next) {
        if (t->crd || !t->served)
            continue;
        _cleanup_free_ char *gv = ks_type_gv(t);
        bool found = false;
        json_array_foreach (corpus, i, entry) {
            json_t *obj = json_object_get(entry, "object");
            found |=
                streq(kobj_str(obj, "kind"), t->kind) && streq(kobj_str(obj, "apiVersion"), gv);
        }
        if (streq(t->kind, "CustomResourceDefinition") || streq(t->group, "resource.k8s.io")) {
            assert_false(ks_pb_knows(gv, t->kind));
            continue;
        }
        if (!found)
            fail_msg("%s %s is served but not in the corpus", gv, t->kind);
        assert_true(ks_pb_knows(gv, t->kind));
    }
    ksim_free(a);
    ksim_free(b);
    json_decref(corpus);
}

static void create_corpus(struct ksim *ks, json_t *corpus)
{
    size_t i;
    json_t *entry;
    json_array_foreach (corpus, i, entry) {
        if (json_is_true(json_object_get(entry, "create_only")))
            continue;
        char *js = json_dumps(json_object_get(entry, "object"), JSON_COMPACT);
        json_t *r;
        assert_int_equal(request(ks, "POST", json_string_value(json_object_get(entry, "path")),
                                 NULL, JSON, js, strlen(js), JSON, &r, NULL),
                         201);
        json_decref(r);
        free(js);
    }
}

/* Lists in protobuf: the XList message, metadata and items, the same as the JSON list. */
static void test_lists(void **state)
{
    (void)state;
    json_t *corpus = load_corpus();
    struct ksim *ks = new_sim();
    create_corpus(ks, corpus);
    size_t i;
    json_t *entry;
    json_array_foreach (corpus, i, entry) {
        if (json_is_true(json_object_get(entry, "create_only")))
            continue;
        const char *path = json_string_value(json_object_get(entry, "path"));
        json_t *lj = get(ks, path, JSON, JSON);
        json_t *lp = get(ks, path, PB, PB);
        assert_same(lj, lp, path);
        assert_true(json_array_size(json_object_get(lp, "items")) >= 1);
        const char *kind = kobj_str(lp, "kind");
        assert_true(strlen(kind) > 4 && streq(kind + strlen(kind) - 4, "List"));
        json_decref(lj);
        json_decref(lp);
    }
    ksim_free(ks);
    json_decref(corpus);
}

/* Reads the length-prefixed frames in b from *off: each a WatchEvent. */
static int next_frame(struct sbuf *b, size_t *off, char **type, json_t **obj)
{
    if (b->len - *off < 4)
        return 0;
    const unsigned char *p = (const unsigned char *)b->data + *off;
    size_t n = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
    assert_true(b->len - *off - 4 >= n);
    struct err e = {0};
    if (ks_pb_decode_watch_event(p + 4, n, type, obj, &e) < 0)
        fail_msg("watch frame: %s", err_msg(&e));
    *off += 4 + n;
    return 1;
}

static void test_watch(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    static const char cm[] = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                             "\"w1\",\"namespace\":\"default\"},\"data\":{\"a\":\"1\"}}";
    json_t *r;
    assert_int_equal(request(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, JSON, cm,
                             strlen(cm), JSON, &r, NULL),
                     201);
    json_decref(r);
    struct ksim_request rq = {.method = "GET",
                              .path = "/api/v1/namespaces/default/configmaps",
                              .query = "watch=1&allowWatchBookmarks=true",
                              .accept = PB ", " JSON};
    struct ksim_response rs;
    ksim_handle(ks, &rq, &rs);
    assert_int_equal(rs.code, 200);
    assert_non_null(rs.watch);
    assert_string_equal(rs.content_type, KS_PB_WATCH_TYPE);
    struct sbuf out;
    sbuf_init(&out, 1u << 20);
    assert_int_equal(ksim_watch_next(ks, rs.watch, &out, 0), 1);
    /* a change, then a delete */
    assert_int_equal(request(ks, "PATCH", "/api/v1/namespaces/default/configmaps/w1", NULL,
                             "application/merge-patch+json", "{\"data\":{\"a\":\"2\"}}", 18, JSON,
                             &r, NULL),
                     200);
    json_decref(r);
    assert_int_equal(request(ks, "DELETE", "/api/v1/namespaces/default/configmaps/w1", NULL, NULL,
                             NULL, 0, JSON, &r, NULL),
                     200);
    json_decref(r);
    while (ksim_watch_next(ks, rs.watch, &out, 0) > 0)
        ;
    static const char *const want[][2] = {{"ADDED", "1"}, {"MODIFIED", "2"}, {"DELETED", "2"}};
    size_t off = 0;
    for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
        char *type = NULL;
        json_t *obj = NULL;
        assert_int_equal(next_frame(&out, &off, &type, &obj), 1);
        assert_string_equal(type, want[i][0]);
        assert_string_equal(kobj_str(obj, "kind"), "ConfigMap");
        assert_string_equal(kobj_path_str(obj, "data.a"), want[i][1]);
        free(type);
        json_decref(obj);
    }
    assert_int_equal(off, out.len);
    sbuf_free(&out);
    ksim_watch_free(ks, rs.watch);
    ksim_response_free(&rs);

    /* a table watch stays JSON */
    rq.accept = "application/json;as=Table;v=v1;g=meta.k8s.io, application/json";
    ksim_handle(ks, &rq, &rs);
    assert_string_equal(rs.content_type, JSON);
    ksim_watch_free(ks, rs.watch);
    ksim_response_free(&rs);
    ksim_free(ks);
}

/* Accept with q-values; errors as protobuf Status; kinds with no message. */
static void test_negotiation(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    json_t *v = get(ks, "/api/v1/namespaces/default", "application/json;q=0.5, " PB, PB);
    assert_string_equal(kobj_str(v, "kind"), "Namespace");
    json_decref(v);
    v = get(ks, "/api/v1/namespaces/default", PB ";q=0.5, application/json", JSON);
    json_decref(v);
    v = get(ks, "/api/v1/namespaces/default", "*/*", JSON);
    json_decref(v);
    v = get(ks, "/api/v1/namespaces/default", "*/*, " PB, PB);
    json_decref(v);
    v = get(ks, "/api/v1/namespaces/default", "text/html, application/*;q=0.9, " PB ";q=0.8", JSON);
    json_decref(v);
    v = get(ks, "/api/v1/namespaces/default", PB ";q=0, application/json", JSON);
    json_decref(v);
    v = get(ks, "/api/v1/namespaces", "application/json;as=Table;v=v1;g=meta.k8s.io, " PB, JSON);
    assert_string_equal(kobj_str(v, "kind"), "Table");
    json_decref(v);
    /* a 404 in protobuf is a Status */
    const char *ct;
    assert_int_equal(request(ks, "GET", "/api/v1/namespaces/default/pods/none", NULL, NULL, NULL, 0,
                             PB, &v, &ct),
                     404);
    assert_string_equal(ct, PB);
    assert_string_equal(kobj_str(v, "kind"), "Status");
    assert_string_equal(kobj_str(v, "reason"), "NotFound");
    assert_int_equal(json_integer_value(json_object_get(v, "code")), 404);
    json_decref(v);
    /* a CRD has no message: JSON when JSON is acceptable, 406 when only protobuf is */
    v = get(ks, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", PB ", " JSON, JSON);
    json_decref(v);
    assert_int_equal(request(ks, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                             NULL, NULL, NULL, 0, PB, &v, &ct),
                     406);
    assert_string_equal(kobj_str(v, "reason"), "NotAcceptable");
    json_decref(v);
    ksim_free(ks);
}

/* Bodies kubesim cannot read: malformed protobuf is 400, a body without the envelope 415. */
static void test_bad_bodies(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    json_t *v;
    static const char trunc[] = "k8s\0\x0a\x0f\x0a\x02v1\x12\x09"
                                "ConfigMap\x12\x20\x0a";
    assert_int_equal(request(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, PB, trunc,
                             sizeof(trunc) - 1, JSON, &v, NULL),
                     400);
    assert_string_equal(kobj_str(v, "reason"), "BadRequest");
    json_decref(v);
    assert_int_equal(request(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, PB, "{}", 2,
                             JSON, &v, NULL),
                     415);
    json_decref(v);
    ksim_free(ks);
}

/* client-go's typed deletes send DeleteOptions in protobuf (a meta kind, under the client's
 * group version). */
static void test_delete_options(void **state)
{
    (void)state;
    struct ksim *ks = new_sim();
    static const char cm[] = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                             "\"d1\",\"namespace\":\"default\"}}";
    json_t *v;
    assert_int_equal(request(ks, "POST", "/api/v1/namespaces/default/configmaps", NULL, JSON, cm,
                             strlen(cm), JSON, &v, NULL),
                     201);
    json_decref(v);
    json_t *opts = json_pack("{s:s,s:s,s:s}", "apiVersion", "v1", "kind", "DeleteOptions",
                             "propagationPolicy", "Foreground");
    struct sbuf b;
    pb_body(opts, &b);
    const char *ct;
    assert_int_equal(request(ks, "DELETE", "/api/v1/namespaces/default/configmaps/d1", NULL, PB,
                             b.data, b.len, PB ", " JSON, &v, &ct),
                     200);
    assert_string_equal(ct, PB);
    json_decref(v);
    sbuf_free(&b);
    json_decref(opts);
    ksim_free(ks);
}

/* The special conversions, one by one: JSON -> protobuf -> JSON. */
static void test_special_types(void **state)
{
    (void)state;
    static const char *const objs[] = {
        /* a zero time is null; a MicroTime keeps microseconds; an offset is normalized away
         * only when it is Z */
        "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":"
        "\"l\",\"creationTimestamp\":null},\"spec\":{\"renewTime\":\"2027-01-15T08:00:10.000001Z\""
        ",\"leaseTransitions\":0}}",
        /* int-or-string both ways; quantities; bytes */
        "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"s\"},\"spec\":{"
        "\"ports\":[{\"port\":80,\"targetPort\":8080},{\"port\":81,\"targetPort\":\"web\"}]}}",
        "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\"},\"data\":{\"k\":"
        "\"AAEC/w==\"}}",
        /* maps of string lists (ExtraValue) */
        "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\",\"metadata\":"
        "{},\"spec\":{\"user\":\"u\",\"extra\":{\"x\":[\"1\",\"2\"],\"y\":[]}}}",
        /* an embedded object (RawExtension) and inlined structs */
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"ControllerRevision\",\"metadata\":{\"name\":\"r\"},"
        "\"data\":{\"a\":[1,{\"b\":null}]},\"revision\":3}",
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{"
        "\"volumes\":[{\"name\":\"v\",\"secret\":{\"secretName\":\"x\"}}],\"containers\":[{"
        "\"name\":\"c\",\"env\":[{\"name\":\"e\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"x\","
        "\"key\":\"k\"}}}]}]}}",
        /* a negative int32, an int64 past 32 bits */
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{"
        "\"securityContext\":{\"runAsUser\":4294967296},\"containers\":[{\"name\":\"c\","
        "\"ports\":[{\"containerPort\":-1}]}]}}",
        /* a meta kind under a group version */
        "{\"apiVersion\":\"v1\",\"kind\":\"Status\",\"metadata\":{},\"status\":\"Failure\","
        "\"code\":409,\"details\":{\"name\":\"x\",\"causes\":[{\"field\":\"f\"}]}}",
    };
    for (size_t i = 0; i < ARRAY_SIZE(objs); i++) {
        json_t *in = json_loads(objs[i], 0, NULL);
        assert_non_null(in);
        struct sbuf b;
        pb_body(in, &b);
        json_t *out = NULL;
        struct err e = {0};
        if (ks_pb_decode(b.data, b.len, &out, &e) < 0)
            fail_msg("%s: %s", objs[i], err_msg(&e));
        assert_same(in, out, objs[i]);
        json_decref(in);
        json_decref(out);
        sbuf_free(&b);
    }
    /* RFC 3339 with an offset is read as the instant it names */
    json_t *in = json_loads("{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":"
                            "\"e\"},\"firstTimestamp\":\"2027-01-15T10:00:00+02:00\"}",
                            0, NULL);
    struct sbuf b;
    pb_body(in, &b);
    json_t *out = NULL;
    struct err e = {0};
    assert_int_equal(ks_pb_decode(b.data, b.len, &out, &e), 0);
    assert_string_equal(kobj_str(out, "firstTimestamp"), "2027-01-15T08:00:00Z");
    json_decref(in);
    json_decref(out);
    sbuf_free(&b);
    /* a field that does not fit its type is an error, not a guess */
    in = json_loads("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":7}}", 0, NULL);
    sbuf_init(&b, 1024);
    assert_int_equal(ks_pb_encode(in, &b, &e), -EINVAL);
    json_decref(in);
    sbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_round_trip),
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_negotiation),
        cmocka_unit_test(test_bad_bodies),
        cmocka_unit_test(test_delete_options),
        cmocka_unit_test(test_special_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
