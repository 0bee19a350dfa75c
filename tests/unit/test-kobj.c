/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of src/base/kobj: JSON paths, Kubernetes object accessors and the API syntax rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kobj.h"
#include "util.h"

static const char pod_json[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\","
    " \"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u-1\",\"resourceVersion\":\"42\","
    "  \"generation\":3,\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
    "  \"labels\":{\"nvidia.com/gpu.present\":\"true\",\"n\":7},"
    "  \"annotations\":{\"a.b/c\":\"d\"},"
    "  \"finalizers\":[\"x/y\"],"
    "  \"ownerReferences\":[{\"kind\":\"ClusterPolicy\",\"uid\":\"cp-1\",\"name\":\"cp\"}]},"
    " \"spec\":{\"containers\":[{\"name\":\"c0\",\"image\":\"i0\"},{\"name\":\"c1\"}]}}";

static json_t *load(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    if (!v)
        fail_msg("bad fixture: %s", je.text);
    return v;
}

static void test_paths(void **state)
{
    (void)state;
    json_t *pod = load(pod_json);
    assert_ptr_equal(kobj_path(pod, ""), pod);
    assert_string_equal(kobj_path_str(pod, "metadata.name"), "p");
    assert_string_equal(kobj_path_str(pod, "spec.containers.1.name"), "c1");
    assert_string_equal(kobj_path_str(pod, "spec.containers.0.image"), "i0");
    assert_null(kobj_path(pod, "spec.containers.2"));
    assert_null(kobj_path(pod, "spec.containers.x"));
    assert_null(kobj_path(pod, "spec.containers.-1"));
    assert_null(kobj_path(pod, "spec.containers.0x1"));
    assert_null(kobj_path(pod, "metadata.name.deeper"));    /* through a string */
    assert_null(kobj_path_str(pod, "metadata.generation")); /* not a string */
    assert_null(kobj_path(NULL, "a"));
    char longseg[300];
    memset(longseg, 'a', sizeof(longseg) - 1);
    longseg[sizeof(longseg) - 1] = '\0';
    assert_null(kobj_path(pod, longseg));
    /* keys holding dots */
    assert_string_equal(
        json_string_value(kobj_at(pod, "metadata", "labels", "nvidia.com/gpu.present")), "true");
    assert_null(kobj_at(pod, "metadata", "nope", "x"));
    assert_string_equal(kobj_str(kobj_path(pod, "spec.containers.0"), "name"), "c0");
    json_decref(pod);
}

static void test_selector_string(void **state)
{
    (void)state;
    json_t *m = load("{\"b\":\"2\",\"app\":\"x\"}");
    _cleanup_free_ char *sel = kobj_selector_string(m);
    assert_string_equal(sel, "app=x,b=2");
    json_t *empty = load("{}");
    _cleanup_free_ char *none = kobj_selector_string(empty);
    assert_string_equal(none, "");
    json_t *bad = load("{\"a\":1}");
    assert_null(kobj_selector_string(bad));
    json_decref(m);
    json_decref(empty);
    json_decref(bad);
}

static void test_metadata(void **state)
{
    (void)state;
    json_t *pod = load(pod_json);
    assert_string_equal(kobj_name(pod), "p");
    assert_string_equal(kobj_namespace(pod), "ns");
    assert_string_equal(kobj_uid(pod), "u-1");
    assert_string_equal(kobj_resource_version(pod), "42");
    assert_string_equal(kobj_kind(pod), "Pod");
    assert_string_equal(kobj_api_version(pod), "v1");
    assert_string_equal(kobj_creation_timestamp(pod), "2026-01-01T00:00:00Z");
    assert_null(kobj_deletion_timestamp(pod));
    assert_int_equal(kobj_generation(pod), 3);
    assert_string_equal(kobj_label(pod, "nvidia.com/gpu.present"), "true");
    assert_null(kobj_label(pod, "n")); /* not a string */
    assert_null(kobj_label(pod, "absent"));
    assert_string_equal(kobj_annotation(pod, "a.b/c"), "d");
    assert_int_equal(json_object_size(kobj_labels(pod)), 2);
    assert_true(kobj_has_finalizer(pod, "x/y"));
    assert_false(kobj_has_finalizer(pod, "x"));
    assert_true(kobj_owned_by(pod, "ClusterPolicy", NULL));
    assert_true(kobj_owned_by(pod, "ClusterPolicy", "cp-1"));
    assert_true(kobj_owned_by(pod, NULL, "cp-1"));
    assert_false(kobj_owned_by(pod, "ClusterPolicy", "cp-2"));
    assert_false(kobj_owned_by(pod, "DaemonSet", NULL));
    char *key = kobj_key(pod);
    assert_string_equal(key, "ns/p");
    free(key);
    json_decref(pod);

    /* Type-confused or missing metadata reads as absent, never crashes. */
    json_t *odd = load("{\"metadata\":{\"name\":5,\"labels\":[\"a\"],\"annotations\":\"x\","
                       "\"finalizers\":{},\"ownerReferences\":\"no\"}}");
    assert_null(kobj_name(odd));
    assert_null(kobj_labels(odd));
    assert_null(kobj_label(odd, "a"));
    assert_null(kobj_annotations(odd));
    assert_null(kobj_key(odd));
    assert_false(kobj_has_finalizer(odd, "a"));
    assert_false(kobj_owned_by(odd, NULL, NULL));
    assert_int_equal(kobj_generation(odd), 0);
    json_decref(odd);
    assert_null(kobj_name(NULL));
    assert_null(kobj_key(NULL));

    json_t *node = load("{\"metadata\":{\"name\":\"n1\",\"namespace\":\"\"}}");
    key = kobj_key(node);
    assert_string_equal(key, "n1");
    free(key);
    json_decref(node);
}

static void test_setters(void **state)
{
    (void)state;
    json_t *pod = load(pod_json);
    json_t *out = json_object();
    kobj_path_copy(out, pod, "metadata.name");
    kobj_path_copy(out, pod, "metadata.labels");
    kobj_path_copy(out, pod, "metadata.absent");
    kobj_path_copy(out, pod, "spec.containers");
    kobj_path_copy(out, pod, "metadata.name.deeper"); /* through a string: nothing */
    char *text = json_dumps(out, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(text, "{\"metadata\":{\"labels\":{\"n\":7,\"nvidia.com/gpu.present\":"
                              "\"true\"},\"name\":\"p\"},\"spec\":{\"containers\":[{\"image\":"
                              "\"i0\",\"name\":\"c0\"},{\"name\":\"c1\"}]}}");
    free(text);
    json_t *o = json_object();
    json_object_set_new(o, "m", json_string("not an object"));
    json_t *m = kobj_ensure_object(o, "m");
    assert_true(json_is_object(m));
    assert_ptr_equal(kobj_ensure_object(o, "m"), m);
    json_t *leaf = kobj_ensure_keys(o, (const char *const[]){"spec", "template", "spec", NULL});
    assert_true(json_is_object(leaf));
    assert_ptr_equal(kobj_path(o, "spec.template.spec"), leaf);
    assert_ptr_equal(kobj_ensure_keys(o, (const char *const[]){NULL}), o);
    assert_null(kobj_ensure_keys(NULL, (const char *const[]){"a", NULL}));
    json_decref(o);
    json_decref(out);
    json_decref(pod);
}

/* The API server's syntax rules: one row per case, the expected answer of each predicate. */
enum rule { DNS_LABEL, DNS_SUBDOMAIN, LABEL_VALUE, QUALIFIED_NAME, IANA_SVC_NAME, PERCENT };

static bool rule_holds(enum rule r, const char *s)
{
    switch (r) {
    case DNS_LABEL:
        return kobj_valid_dns_label(s);
    case DNS_SUBDOMAIN:
        return kobj_valid_dns_subdomain(s);
    case LABEL_VALUE:
        return kobj_valid_label_value(s);
    case QUALIFIED_NAME:
        return kobj_valid_qualified_name(s);
    case IANA_SVC_NAME:
        return kobj_valid_iana_svc_name(s);
    case PERCENT:
        return kobj_valid_percent(s);
    }
    return false;
}

/* RFC 7386 Appendix A, and that neither input changes. */
static void test_merge_patch(void **state)
{
    (void)state;
    static const struct {
        const char *target, *patch, *want;
    } cases[] = {
        {"{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}"},
        {"{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}"},
        {"{\"a\":\"b\"}", "{\"a\":null}", "{}"},
        {"{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}"},
        {"{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}"},
        {"{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}"},
        {"{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}"},
        {"{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}"},
        {"[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]"},
        {"{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]"},
        {"{\"a\":\"foo\"}", "null", "null"},
        {"{\"a\":\"foo\"}", "\"bar\"", "\"bar\""},
        {"{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}"},
        {"[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}"},
        {"{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}"},
        /* a node's labels: one set, one removed, the rest kept */
        {"{\"metadata\":{\"labels\":{\"s\":\"a\",\"x\":\"1\"},\"name\":\"n\"}}",
         "{\"metadata\":{\"labels\":{\"s\":\"b\",\"x\":null}}}",
         "{\"metadata\":{\"labels\":{\"s\":\"b\"},\"name\":\"n\"}}"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        json_t *t = json_loads(cases[i].target, JSON_DECODE_ANY, NULL);
        json_t *p = json_loads(cases[i].patch, JSON_DECODE_ANY, NULL);
        json_t *w = json_loads(cases[i].want, JSON_DECODE_ANY, NULL);
        assert_non_null(t);
        assert_non_null(p);
        assert_non_null(w);
        json_t *t0 = json_deep_copy(t), *p0 = json_deep_copy(p);
        json_t *r = kobj_merge_patch(t, p);
        if (!json_equal(r, w)) {
            char *got = json_dumps(r, JSON_ENCODE_ANY | JSON_COMPACT);
            fail_msg("case %zu: %s + %s = %s, want %s", i, cases[i].target, cases[i].patch, got,
                     cases[i].want);
        }
        assert_true(json_equal(t, t0) && json_equal(p, p0));
        json_decref(r);
        json_decref(t);
        json_decref(p);
        json_decref(w);
        json_decref(t0);
        json_decref(p0);
    }
    json_t *empty = json_object();
    json_t *r = kobj_merge_patch(NULL, empty); /* no target: an empty object */
    assert_true(json_is_object(r) && json_object_size(r) == 0 && r != empty);
    json_decref(r);
    json_decref(empty);
}

static void test_valid_syntax(void **state)
{
    (void)state;
    static const char l63[] = "a23456789012345678901234567890123456789012345678901234567890123";
    static const char l64[] = "a234567890123456789012345678901234567890123456789012345678901234";
    static const struct {
        enum rule rule;
        const char *s;
        bool ok;
    } rows[] = {
        {DNS_LABEL, "gpu-operator", true},
        {DNS_LABEL, "0abc", true},
        {DNS_LABEL, l63, true},
        {DNS_LABEL, l64, false},
        {DNS_LABEL, "", false},
        {DNS_LABEL, "-a", false},
        {DNS_LABEL, "a-", false},
        {DNS_LABEL, "Abc", false},
        {DNS_LABEL, "a.b", false},
        {DNS_LABEL, "a_b", false},
        {DNS_SUBDOMAIN, "nvidia.com", true},
        {DNS_SUBDOMAIN, "a", true},
        {DNS_SUBDOMAIN, "", false},
        {DNS_SUBDOMAIN, ".a", false},
        {DNS_SUBDOMAIN, "a.", false},
        {DNS_SUBDOMAIN, "a..b", false},
        {DNS_SUBDOMAIN, "a.-b", false},
        {DNS_SUBDOMAIN, "A.b", false},
        {DNS_SUBDOMAIN, "a/b", false},
        {LABEL_VALUE, "", true},
        {LABEL_VALUE, "true", true},
        {LABEL_VALUE, "A_b.c-D", true},
        {LABEL_VALUE, l63, true},
        {LABEL_VALUE, l64, false},
        {LABEL_VALUE, "_a", false},
        {LABEL_VALUE, "a.", false},
        {LABEL_VALUE, "a b", false},
        {LABEL_VALUE, "a/b", false},
        {QUALIFIED_NAME, "app", true},
        {QUALIFIED_NAME, "nvidia.com/gpu.present", true},
        {QUALIFIED_NAME, "k8s.io/Name_1", true},
        {QUALIFIED_NAME, "", false},
        {QUALIFIED_NAME, "/a", false},
        {QUALIFIED_NAME, "a/", false},
        {QUALIFIED_NAME, "a/b/c", false},
        {QUALIFIED_NAME, "-x.com/a", false},
        {QUALIFIED_NAME, "X.com/a", false},
        {QUALIFIED_NAME, "a b", false},
        {IANA_SVC_NAME, "metrics", true},
        {IANA_SVC_NAME, "grpc-2", true},
        {IANA_SVC_NAME, "123456789012345", false},
        {IANA_SVC_NAME, "abcdefghijklmnop", false},
        {IANA_SVC_NAME, "a--b", false},
        {IANA_SVC_NAME, "-a", false},
        {IANA_SVC_NAME, "Http", false},
        {IANA_SVC_NAME, "", false},
        {PERCENT, "25%", true},
        {PERCENT, "0%", true},
        {PERCENT, "100", false},
        {PERCENT, "%", false},
        {PERCENT, "1.5%", false},
        {PERCENT, "-1%", false},
        {PERCENT, "10%%", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        if (rule_holds(rows[i].rule, rows[i].s) != rows[i].ok)
            fail_msg("rule %d on \"%s\": want %s", (int)rows[i].rule, rows[i].s,
                     rows[i].ok ? "valid" : "invalid");
    }
}

static void test_valid_quantity(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        bool ok, negative;
    } rows[] = {
        {"1", true, false},     {"100m", true, false},   {"1.5Gi", true, false},
        {".5", true, false},    {"5.", true, false},     {"+2k", true, false},
        {"1e3", true, false},   {"1E-3", true, false},   {"2E", true, false},
        {"-1", true, true},     {"-0.5Mi", true, true},  {"-0", true, false},
        {"-0.00", true, false}, {"-0e5", true, false},   {"", false, false},
        {".", false, false},    {"1.2.3", false, false}, {"1 GB", false, false},
        {"1GB", false, false},  {"1e", false, false},    {"1e+", false, false},
        {"1Kib", false, false}, {"k", false, false},     {"--1", false, false},
        {"1ee3", false, false}, {"0x10", false, false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        bool neg = !rows[i].negative;
        bool ok = kobj_valid_quantity(rows[i].s, &neg);
        if (ok != rows[i].ok || (ok && neg != rows[i].negative))
            fail_msg("quantity \"%s\": got ok=%d negative=%d", rows[i].s, ok, neg);
        assert_int_equal(kobj_valid_quantity(rows[i].s, NULL), rows[i].ok);
    }
}

/* The transition rule: a condition keeps its time while its status stays, takes `now` when the
 * status changes or the type is new; observedGeneration only when given. */
static void test_condition(void **state)
{
    (void)state;
    json_t *old = json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:s}]", "type", "Ready", "status", "True",
                            "lastTransitionTime", "2025-01-01T00:00:00Z", "type", "Error", "status",
                            "False", "lastTransitionTime", "2025-01-02T00:00:00Z");
    static const struct {
        const char *type;
        bool status;
        long long gen;
        const char *ltt;
    } rows[] = {
        {"Ready", true, 3, "2025-01-01T00:00:00Z"},  /* unchanged: kept */
        {"Ready", false, 3, "2026-06-01T00:00:00Z"}, /* changed: now */
        {"Error", false, -1, "2025-01-02T00:00:00Z"},
        {"Halted", true, -1, "2026-06-01T00:00:00Z"}, /* new type: now */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        json_t *c = kobj_condition(old, rows[i].type, rows[i].status, "R", "m",
                                   "2026-06-01T00:00:00Z", rows[i].gen);
        assert_string_equal(kobj_str(c, "lastTransitionTime"), rows[i].ltt);
        assert_string_equal(kobj_str(c, "status"), rows[i].status ? "True" : "False");
        assert_int_equal(json_object_get(c, "observedGeneration") != NULL, rows[i].gen >= 0);
        json_decref(c);
    }
    json_t *conds = json_array();
    kobj_conditions_put(
        conds, json_pack("{s:s,s:s,s:s}", "type", "A", "status", "True", "message", "one"));
    kobj_conditions_put(
        conds, json_pack("{s:s,s:s,s:s}", "type", "B", "status", "True", "message", "two"));
    kobj_conditions_put(
        conds, json_pack("{s:s,s:s,s:s}", "type", "A", "status", "False", "message", "three"));
    assert_int_equal(json_array_size(conds), 2);
    assert_string_equal(kobj_condition_message(conds, "A", NULL), "three");
    assert_null(kobj_condition_message(conds, "A", "True"));
    assert_string_equal(kobj_condition_message(conds, "B", "True"), "two");
    json_decref(conds);
    json_decref(old);
}

/* A condition found by type; a pod ready only when Running, not deleting and Ready True. */
static void test_pod_ready(void **state)
{
    (void)state;
    static const struct {
        const char *pod;
        bool ready;
    } rows[] = {
        {"{\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\","
         "\"status\":\"True\"}]}}",
         true},
        {"{\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"Ready\","
         "\"status\":\"True\"}]}}",
         false},
        {"{\"metadata\":{\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"},\"status\":{"
         "\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
         false},
        {"{\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\","
         "\"status\":\"False\"}]}}",
         false},
        {"{\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Initialized\","
         "\"status\":\"True\"}]}}",
         false},
        {"{\"status\":{\"phase\":\"Running\"}}", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        json_t *pod = load(rows[i].pod);
        assert_int_equal(kobj_pod_ready(pod), rows[i].ready);
        json_decref(pod);
    }
    json_t *node = load("{\"status\":{\"conditions\":[{\"type\":\"MemoryPressure\","
                        "\"status\":\"False\"},{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    assert_string_equal(kobj_str(kobj_condition_find(node, "Ready"), "status"), "True");
    assert_true(kobj_condition_true(node, "Ready"));
    assert_false(kobj_condition_true(node, "MemoryPressure"));
    assert_null(kobj_condition_find(node, "DiskPressure"));
    assert_null(kobj_condition_find(NULL, "Ready"));
    json_decref(node);
}

/* Staged annotation edits: read through, no edit for an unchanged value, removal as null. */
static void test_ann_staged(void **state)
{
    (void)state;
    json_t *obj = load("{\"metadata\":{\"annotations\":{\"a\":\"1\",\"n\":\"-5\",\"t\":\"12\"}}}");
    json_t *edits = NULL;
    kobj_ann_stage(obj, &edits, "a", "1"); /* as it is: nothing staged */
    assert_null(edits);
    assert_string_equal(kobj_ann_staged(obj, edits, "a"), "1");
    kobj_ann_stage(obj, &edits, "a", NULL);
    assert_non_null(edits);
    assert_true(json_is_null(json_object_get(edits, "a")));
    assert_null(kobj_ann_staged(obj, edits, "a"));
    kobj_ann_stage_i64(obj, &edits, "b", 42);
    assert_string_equal(kobj_ann_staged(obj, edits, "b"), "42");
    assert_int_equal(kobj_ann_staged_i64(obj, edits, "b", 0, -1), 42);
    assert_int_equal(kobj_ann_staged_i64(obj, edits, "t", 13, -1), -1); /* under min */
    assert_int_equal(kobj_ann_staged_i64(obj, edits, "n", 0, 7), 7);
    assert_int_equal(kobj_ann_staged_i64(obj, edits, "a", 0, 7), 7); /* removed */
    assert_null(kobj_ann_staged(obj, edits, "missing"));
    assert_int_equal(json_object_size(edits), 2);
    json_decref(edits);
    json_decref(obj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),          cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_setters),        cmocka_unit_test(test_valid_syntax),
        cmocka_unit_test(test_valid_quantity), cmocka_unit_test(test_selector_string),
        cmocka_unit_test(test_merge_patch),    cmocka_unit_test(test_condition),
        cmocka_unit_test(test_ann_staged),     cmocka_unit_test(test_pod_ready),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
