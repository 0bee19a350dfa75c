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

/* ---- label sets: the object form and the compact form read alike ---------------------------- */

static const char node_labels_json[] =
    "{\"kubernetes.io/hostname\":\"gpu-0\",\"nvidia.com/gpu.present\":\"true\","
    " \"nvidia.com/gpu.count\":\"8\",\"feature.node.kubernetes.io/pci-10de.present\":\"true\","
    " \"a\":\"\",\"zone\":\"eu-1\",\"a.b/c\":\"x=y\"}";

/* Both forms of one label set: [0] the object, [1] compact (over `intern`). */
static void both_forms(json_t *intern, json_t *forms[2])
{
    forms[0] = load(node_labels_json);
    forms[1] = kobj_labels_compact(forms[0], intern);
    assert_non_null(forms[1]);
    assert_true(kobj_labels_is_compact(forms[1]));
    assert_false(kobj_labels_is_compact(forms[0]));
}

static void test_label_sets(void **state)
{
    (void)state;
    json_t *intern = json_object();
    json_t *forms[2];
    both_forms(intern, forms);
    for (int f = 0; f < 2; f++) {
        json_t *l = forms[f];
        assert_string_equal(kobj_labels_get(l, "kubernetes.io/hostname"), "gpu-0");
        assert_string_equal(kobj_labels_get(l, "nvidia.com/gpu.count"), "8");
        assert_string_equal(kobj_labels_get(l, "a"), ""); /* an empty value is there */
        assert_true(kobj_labels_has(l, "a"));
        assert_string_equal(kobj_labels_get(l, "a.b/c"), "x=y"); /* '=' in a value */
        assert_null(kobj_labels_get(l, "missing"));
        assert_false(kobj_labels_has(l, "missing"));
        assert_null(kobj_labels_get(l, "a.b")); /* a key's prefix is not the key */
        assert_null(kobj_labels_get(l, "zone2"));
        assert_null(kobj_labels_get(l, NULL));
        assert_int_equal(kobj_labels_count(l), 7);
        assert_string_equal(kobj_str(l, "zone"), "eu-1"); /* the generic reader too */
        assert_null(kobj_str(l, "missing"));
        /* every label once, by iteration */
        size_t n = 0;
        const char *k, *v;
        kobj_labels_foreach (l, it, k, v) {
            assert_string_equal(kobj_labels_get(forms[0], k), v);
            n++;
        }
        assert_int_equal(n, 7);
        /* as an object again: the same set */
        json_t *o = kobj_labels_object(l);
        assert_true(json_equal(o, forms[0]));
        json_decref(o);
        /* through an object's metadata */
        json_t *obj = json_pack("{s:{s:O}}", "metadata", "labels", l);
        assert_ptr_equal(kobj_labels(obj), l);
        assert_string_equal(kobj_label(obj, "zone"), "eu-1");
        assert_null(kobj_label(obj, "nope"));
        json_decref(obj);
    }
    /* compact order is key order, whatever the object's */
    const char *k, *v, *prev = NULL;
    char last[KOBJ_LABEL_KEY_MAX + 1] = "";
    kobj_labels_foreach (forms[1], it, k, v) {
        (void)v;
        if (prev)
            assert_true(strcmp(last, k) < 0);
        snprintf(last, sizeof(last), "%s", k);
        prev = last;
    }
    /* the empty set and NULL */
    json_t *empty = json_object();
    json_t *ec = kobj_labels_compact(empty, intern);
    assert_true(kobj_labels_is_compact(ec));
    assert_int_equal(kobj_labels_count(ec), 0);
    assert_null(kobj_labels_get(ec, "a"));
    assert_null(kobj_labels_get(NULL, "a"));
    assert_int_equal(kobj_labels_count(NULL), 0);
    size_t none = 0;
    kobj_labels_foreach (NULL, it, k, v)
        none++;
    kobj_labels_foreach (ec, it, k, v)
        none++;
    assert_int_equal(none, 0);
    json_decref(ec);
    json_decref(empty);
    json_decref(forms[0]);
    json_decref(forms[1]);
    json_decref(intern);
}

/* ---- the compact form's chunks ----------------------------------------------------------------
 */

/* Whether item c (a chunk or a single entry) is one of set's items, by address. */
static bool holds_chunk(const json_t *set, const json_t *c)
{
    for (size_t i = 0; i < json_array_size(set); i++)
        if (json_array_get(set, i) == c)
            return true;
    return false;
}

/* How many of a's chunks b holds too (the same arrays). */
static size_t shared_chunks(const json_t *a, const json_t *b)
{
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(a); i++)
        n += json_is_array(json_array_get(a, i)) && holds_chunk(b, json_array_get(a, i));
    return n;
}

/* How many chunks (not single entries) a set has. */
static size_t chunk_count(const json_t *set)
{
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(set); i++)
        n += json_is_array(json_array_get(set, i));
    return n;
}

/* The entry string "key=value" of set (found in its chunks), or NULL. */
static json_t *entry_of(const json_t *set, const char *text)
{
    for (size_t i = 0; i < json_array_size(set); i++) {
        json_t *c = json_array_get(set, i);
        if (streq_ptr(json_string_value(c), text))
            return c;
        for (size_t j = 0; j < json_array_size(c); j++)
            if (streq_ptr(json_string_value(json_array_get(c, j)), text))
                return json_array_get(c, j);
    }
    return NULL;
}

/* The shape every compact set has: items that are chunks of 2 to 16 entries or single entries,
 * keys strictly increasing across them, the count their sum. */
static void assert_compact_shape(const json_t *set, size_t count)
{
    assert_true(kobj_labels_is_compact(set));
    size_t n = 0;
    char last[KOBJ_LABEL_KEY_MAX + 2] = "";
    for (size_t i = 0; i < json_array_size(set); i++) {
        const json_t *item = json_array_get(set, i);
        json_t *one = json_array();
        json_array_append(one, (json_t *)item);
        const json_t *c = json_is_array(item) ? item : one;
        if (json_is_array(item))
            assert_in_range(json_array_size(c), 2, 16);
        else
            assert_true(json_is_string(item));
        for (size_t j = 0; j < json_array_size(c); j++) {
            const char *t = json_string_value(json_array_get(c, j));
            assert_non_null(t);
            const char *eq = strchr(t, '=');
            assert_non_null(eq);
            char key[KOBJ_LABEL_KEY_MAX + 2];
            snprintf(key, sizeof(key), "%.*s", (int)(eq - t), t);
            if (n > 0 && strcmp(last, key) >= 0)
                fail_msg("keys out of order: \"%s\" then \"%s\"", last, key);
            snprintf(last, sizeof(last), "%s", key);
            n++;
        }
        json_decref(one);
    }
    assert_int_equal(n, count);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A key from a small alphabet of parts, so keys are often prefixes of one another and sort
 * next to each other ("a", "a.b", "a/b", "a0", "a-x"): where chunk and search boundaries fall. */
static void random_key(uint64_t *rng, char *buf, size_t n)
{
    static const char *const parts[] = {
        "a", "b", "nvidia.com/", "gpu", ".", "-", "0", "/", "z", "feature.node.kubernetes.io/",
        "x", "_"};
    size_t len = 0, parts_n = 1 + rng_next(rng) % 5;
    buf[0] = '\0';
    for (size_t i = 0; i < parts_n; i++) {
        const char *p = parts[rng_next(rng) % ARRAY_SIZE(parts)];
        if (len + strlen(p) + 1 > n)
            break;
        memcpy(buf + len, p, strlen(p) + 1);
        len += strlen(p);
    }
}

/* Every accessor reads a compact set as it reads the object it came from. */
static void assert_same_reading(const json_t *obj, const json_t *set, uint64_t *rng)
{
    assert_int_equal(kobj_labels_count(set), kobj_labels_count(obj));
    /* get and has of every key, and of keys near them that are not in the set */
    const char *k, *v;
    kobj_labels_foreach (obj, it, k, v) {
        assert_string_equal(kobj_labels_get(set, k), v);
        assert_true(kobj_labels_has(set, k));
        assert_string_equal(kobj_str(set, k), v);
        char near[KOBJ_LABEL_KEY_MAX + 4];
        static const char *const tails[] = {"0", "=", "\x7f", ".", ""};
        for (size_t i = 0; i < ARRAY_SIZE(tails); i++) {
            snprintf(near, sizeof(near), "%s%s", k, tails[i]);
            assert_true(streq_ptr(kobj_labels_get(set, near), kobj_labels_get(obj, near)));
            assert_int_equal(kobj_labels_has(set, near), kobj_labels_has(obj, near));
        }
        size_t kl = strlen(k); /* a key's prefix */
        if (kl > 1) {
            snprintf(near, sizeof(near), "%.*s", (int)(kl - 1), k);
            assert_true(streq_ptr(kobj_labels_get(set, near), kobj_labels_get(obj, near)));
        }
    }
    for (int i = 0; i < 40; i++) {
        char key[64];
        random_key(rng, key, sizeof(key));
        assert_true(streq_ptr(kobj_labels_get(set, key), kobj_labels_get(obj, key)));
        assert_int_equal(kobj_labels_has(set, key), kobj_labels_has(obj, key));
        /* the selectors: exists, equality with the object's value, a missing key */
        char sel[160];
        const char *want = kobj_labels_get(obj, key);
        if (!kobj_valid_qualified_name(key))
            continue;
        snprintf(sel, sizeof(sel), "%s", key);
        bool m1 = false, m2 = true;
        struct err e = {0};
        assert_int_equal(kobj_selector_match(sel, obj, &m1, &e), 0);
        assert_int_equal(kobj_selector_match(sel, set, &m2, &e), 0);
        assert_int_equal(m1, m2);
        if (want && kobj_valid_label_value(want)) {
            snprintf(sel, sizeof(sel), "%s=%s,!%sq", key, want, key);
            assert_int_equal(kobj_selector_match(sel, obj, &m1, &e), 0);
            assert_int_equal(kobj_selector_match(sel, set, &m2, &e), 0);
            assert_true(m1);
            assert_int_equal(m1, m2);
        }
        json_t *ex = json_pack("{s:s,s:s,s:[s]}", "key", key, "operator", want ? "In" : "NotIn",
                               "values", want ? want : "v");
        assert_true(kobj_match_expression(ex, obj));
        assert_int_equal(kobj_match_expression(ex, set), kobj_match_expression(ex, obj));
        json_decref(ex);
    }
    /* iteration: every label once, in key order */
    size_t n = 0;
    char last[KOBJ_LABEL_KEY_MAX + 1] = "";
    kobj_labels_foreach (set, it, k, v) {
        assert_string_equal(kobj_labels_get(obj, k), v);
        if (n > 0)
            assert_true(strcmp(last, k) < 0);
        snprintf(last, sizeof(last), "%s", k);
        n++;
    }
    assert_int_equal(n, kobj_labels_count(obj));
    json_t *back = kobj_labels_object(set);
    assert_true(json_equal(back, (json_t *)obj));
    json_decref(back);
    /* through an object's metadata and matchLabels */
    json_t *node = json_pack("{s:{s:O}}", "metadata", "labels", set);
    assert_ptr_equal(kobj_labels(node), set);
    kobj_labels_foreach (obj, it, k, v)
        assert_string_equal(kobj_label(node, k), v);
    assert_true(kobj_labels_match(obj, set));
    json_decref(node);
}

/* Random label sets, sizes 0, 1, around a chunk's bound and up to 300: both forms read alike,
 * the compact one well formed. */
static void test_label_sets_random(void **state)
{
    (void)state;
    json_t *intern = json_object();
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    static const size_t sizes[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 77, 300};
    size_t pruned = 0;
    for (int round = 0; round < 400; round++) {
        size_t want = round < (int)ARRAY_SIZE(sizes) ? sizes[round] : rng_next(&rng) % 120;
        json_t *obj = json_object();
        for (size_t tries = 0; json_object_size(obj) < want && tries < 20 * want + 20; tries++) {
            char key[64], val[16];
            random_key(&rng, key, sizeof(key));
            /* a run of numbered keys sometimes: long runs with no cut point */
            if (rng_next(&rng) % 4 == 0)
                snprintf(key + strlen(key), sizeof(key) - strlen(key), "%03u",
                         (unsigned)(rng_next(&rng) % 1000));
            snprintf(val, sizeof(val), "%s%u", rng_next(&rng) % 3 ? "v" : "",
                     (unsigned)(rng_next(&rng) % 4));
            json_object_set_new(obj, key, json_string(val));
        }
        json_t *set = kobj_labels_compact(obj, intern);
        assert_non_null(set);
        assert_compact_shape(set, json_object_size(obj));
        assert_same_reading(obj, set, &rng);
        /* the same labels again: the labels the first set alone held are in chunks now, and a
         * third time gives the second's items */
        json_t *again = kobj_labels_compact(obj, intern), *third = kobj_labels_compact(obj, intern);
        assert_compact_shape(again, json_object_size(obj));
        assert_same_reading(obj, again, &rng);
        assert_int_equal(json_array_size(third), json_array_size(again));
        for (size_t i = 0; i < json_array_size(again); i++)
            assert_ptr_equal(json_array_get(third, i), json_array_get(again, i));
        json_decref(again);
        json_decref(third);
        json_decref(set);
        json_decref(obj);
        kobj_intern_prune(intern, &pruned, 64);
    }
    json_decref(intern);
}

/* Sets that differ in one label share every chunk but one or two, whether the label's value
 * changed or the label was added or removed; equal labels are one string; what a set has of its
 * own against the chunk its keys first made (a hostname) stands alone, outside the chunks. */
static void test_label_sets_shared(void **state)
{
    (void)state;
    json_t *intern = json_object();
    json_t *a = load("{\"x\":\"1\",\"y\":\"same\"}"), *b = load("{\"y\":\"same\",\"z\":\"2\"}");
    json_t *ca = kobj_labels_compact(a, intern), *cb = kobj_labels_compact(b, intern);
    assert_non_null(entry_of(ca, "y=same"));
    assert_ptr_equal(entry_of(ca, "y=same"), entry_of(cb, "y=same"));
    /* a compact set is taken as it is */
    json_t *again = kobj_labels_compact(ca, intern);
    assert_ptr_equal(again, ca);
    json_decref(again);
    json_decref(ca);
    json_decref(cb);
    json_decref(a);
    json_decref(b);

    /* a pool's nodes: 80 labels alike but the hostname */
    json_t *base = json_object();
    for (int i = 0; i < 80; i++) {
        char k[64];
        snprintf(k, sizeof(k), "feature.node.kubernetes.io/cpu-cpuid.F%02d", i);
        json_object_set_new(base, k, json_string("true"));
    }
    json_object_set_new(base, "kubernetes.io/hostname", json_string("node-w"));
    json_t *first = kobj_labels_compact(base, intern);
    assert_true(chunk_count(first) >= 5); /* 81 labels in chunks of at most 16 */
    json_object_set_new(base, "kubernetes.io/hostname", json_string("node-0"));
    json_t *s0 = kobj_labels_compact(base, intern);
    size_t n0 = chunk_count(s0);
    assert_true(shared_chunks(s0, first) + 1 >= chunk_count(first));
    json_t *host = entry_of(s0, "kubernetes.io/hostname=node-0");
    assert_true(holds_chunk(s0, host)); /* its own: a single entry */
    /* the same node again while its last set lives (an informer's update): the same items */
    json_t *s0b = kobj_labels_compact(base, intern);
    assert_int_equal(json_array_size(s0b), json_array_size(s0));
    for (size_t i = 0; i < json_array_size(s0); i++)
        assert_ptr_equal(json_array_get(s0b, i), json_array_get(s0, i));
    json_decref(s0b);
    for (int variant = 0; variant < 4; variant++) {
        json_t *o = json_copy(base);
        if (variant == 0) /* another hostname */
            json_object_set_new(o, "kubernetes.io/hostname", json_string("node-1"));
        else if (variant == 1) /* one label added in the middle */
            json_object_set_new(o, "feature.node.kubernetes.io/cpu-cpuid.F40x", json_string("1"));
        else if (variant == 2) /* one removed in the middle */
            json_object_del(o, "feature.node.kubernetes.io/cpu-cpuid.F41");
        else /* one added first */
            json_object_set_new(o, "a", json_string("1"));
        json_t *s1 = kobj_labels_compact(o, intern);
        size_t n1 = chunk_count(s1), alike = shared_chunks(s1, s0);
        if (alike + 2 < n1 || alike + 2 < n0)
            fail_msg("variant %d: %zu of %zu chunks shared (of %zu)", variant, alike, n1, n0);
        if (variant == 0)
            assert_int_equal(alike, n1); /* another hostname: every chunk */
        /* the same labels on another set: the same items */
        json_t *s2 = kobj_labels_compact(o, intern);
        assert_int_equal(json_array_size(s2), json_array_size(s1));
        for (size_t i = 0; i < json_array_size(s1); i++)
            assert_ptr_equal(json_array_get(s2, i), json_array_get(s1, i));
        json_decref(s2);
        json_decref(s1);
        json_decref(o);
    }
    json_decref(s0);
    json_decref(first);
    json_decref(base);
    json_decref(intern);
}

/* A prune drops the chunks no set holds, then the strings only those held, in one call. */
static void test_label_sets_prune(void **state)
{
    (void)state;
    json_t *intern = json_object();
    json_t *a = json_object(), *b;
    for (int i = 0; i < 40; i++) {
        char k[32];
        snprintf(k, sizeof(k), "k%02d", i);
        json_object_set_new(a, k, json_string("v"));
    }
    b = json_copy(a);
    json_object_set_new(a, "k20", json_string("only-a"));
    json_object_set_new(a, "k20x", json_string("only-a"));
    json_t *warm = kobj_labels_compact(b, intern); /* b's labels held: in chunks from now */
    json_t *ca = kobj_labels_compact(a, intern), *cb = kobj_labels_compact(b, intern);
    json_decref(warm);
    size_t before = json_object_size(intern), pruned = 0;
    assert_int_equal(kobj_intern_prune(intern, &pruned, before), 0); /* not grown enough */
    /* what only a holds: its chunks that b lacks, and its two strings */
    size_t only_a = 0;
    for (size_t i = 0; i < json_array_size(ca); i++) {
        const json_t *item = json_array_get(ca, i);
        only_a += json_is_array(item) && !holds_chunk(cb, item);
    }
    assert_true(only_a <= 2);
    assert_true(chunk_count(cb) >= 3);
    json_t *ka = entry_of(ca, "k20=only-a");
    assert_non_null(ka);
    json_decref(ca);
    assert_int_equal(kobj_intern_prune(intern, &pruned, 0), only_a + 2);
    assert_int_equal(pruned, before - only_a - 2);
    assert_null(json_object_get(intern, "k20=only-a"));
    assert_null(json_object_get(intern, "k20x=only-a"));
    assert_non_null(json_object_get(intern, "k20=v"));
    /* every value left is held by b: as many chunks and strings as b has */
    size_t chunks = 0, strings = 0;
    const char *k;
    json_t *v;
    json_object_foreach (intern, k, v) {
        if (json_is_array(v)) {
            assert_true(holds_chunk(cb, v));
            chunks++;
        } else {
            assert_non_null(entry_of(cb, json_string_value(v)));
            strings++;
        }
    }
    assert_int_equal(chunks, chunk_count(cb));
    assert_int_equal(strings, 40);
    assert_string_equal(kobj_labels_get(cb, "k20"), "v");
    /* b gone too: the table empties in one prune */
    json_decref(cb);
    pruned = 0;
    assert_int_equal(kobj_intern_prune(intern, &pruned, 0), chunks + strings);
    assert_int_equal(json_object_size(intern), 0);
    json_decref(a);
    json_decref(b);
    json_decref(intern);
}

/* A table slot taken by something else (another chunk under the same name, a string) costs the
 * sharing of that chunk, never a wrong reading. */
static void test_label_sets_planted(void **state)
{
    (void)state;
    json_t *intern = json_object();
    json_t *o = load(node_labels_json);
    json_t *warm = kobj_labels_compact(o, intern);
    json_t *set = kobj_labels_compact(o, intern);
    json_t *other = load("[\"a=other\"]");
    int planted = 0;
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe (intern, tmp, k, v) {
        if (!json_is_array(v))
            continue;
        json_object_set(intern, k, planted++ % 2 ? json_string("a=junk") : other);
    }
    assert_true(planted >= 1);
    uint64_t rng = 7;
    json_t *again = kobj_labels_compact(o, intern);
    assert_same_reading(o, again, &rng);
    assert_int_equal(shared_chunks(again, set), 0); /* the table's chunks were replaced */
    assert_int_equal(json_array_size(other), 1);    /* and are left as they were */
    json_decref(again);
    json_decref(set);
    json_decref(warm);
    json_decref(other);
    json_decref(o);
    json_decref(intern);
}

/* What the API never gives stays an object; a type-confused array reads as absent. */
static void test_label_sets_refused(void **state)
{
    (void)state;
    json_t *intern = json_object();
    const char *bad[] = {"{\"a\":5}", "{\"a=b\":\"c\"}"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        json_t *l = load(bad[i]);
        assert_null(kobj_labels_compact(l, intern));
        json_decref(l);
    }
    char longkey[KOBJ_LABEL_KEY_MAX + 8];
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    json_t *lk = json_pack("{s:s}", longkey, "v");
    assert_null(kobj_labels_compact(lk, intern));
    json_decref(lk);
    /* arrays that are no compact set: no labels, and kobj_labels_compact refuses them */
    const char *none[] = {
        "[\"x\"]",          "[5]", "[[5]]", "[[]]", "[[\"x\"]]", "[{\"a\":\"1\"}]", "[[[\"a=1\"]]]",
        "[null, [\"a=1\"]]"};
    for (size_t i = 0; i < ARRAY_SIZE(none); i++) {
        json_t *l = load(none[i]);
        assert_false(kobj_labels_is_compact(l));
        assert_null(kobj_labels_get(l, "a"));
        assert_false(kobj_labels_has(l, "a"));
        assert_int_equal(kobj_labels_count(l), 0);
        const char *k, *v;
        kobj_labels_foreach (l, it, k, v)
            fail_msg("%s: a label \"%s\"", none[i], k);
        json_t *obj = kobj_labels_object(l);
        assert_int_equal(json_object_size(obj), 0);
        json_decref(obj);
        assert_null(kobj_labels_compact(l, intern));
        json_t *node = json_pack("{s:{s:O}}", "metadata", "labels", l);
        assert_null(kobj_labels(node));
        assert_null(kobj_label(node, "a"));
        json_decref(node);
        json_decref(l);
    }
    /* junk inside a compact set: what is no chunk or no entry is skipped by iteration and
     * never crashes a lookup (which may then miss, as for absent) */
    const char *junk[] = {
        "[[\"a=1\", 5, \"nokey\", \"b=2\"]]",
        "[[\"a=1\"], 5, [\"b=2\"], [], [\"c=3\", null]]",
        "[[\"a=1\"], [\"b=2\", [\"x=9\"]], {\"c\":\"3\"}, \"d=4\"]",
        "[\"a=1\", [\"b=2\", 5], \"nokey\", [true], \"c=3\"]",
    };
    for (size_t i = 0; i < ARRAY_SIZE(junk); i++) {
        json_t *l = load(junk[i]);
        assert_true(kobj_labels_is_compact(l));
        const char *k, *v;
        size_t n = 0;
        kobj_labels_foreach (l, it, k, v) {
            assert_true(strlen(k) == 1 && strchr("abcd", k[0]));
            n++;
        }
        assert_in_range(n, 2, 3);
        const char *a = kobj_labels_get(l, "a");
        assert_true(!a || strcmp(a, "1") == 0);
        static const char *const keys[] = {"a", "b", "c", "d", "x", "nokey", "", "zz"};
        for (size_t j = 0; j < ARRAY_SIZE(keys); j++) {
            const char *got = kobj_labels_get(l, keys[j]);
            assert_true(!got || strlen(got) == 1);
            (void)kobj_labels_has(l, keys[j]);
            bool m;
            struct err e = {0};
            (void)kobj_selector_match("a,b", l, &m, &e);
        }
        (void)kobj_labels_count(l);
        json_t *obj = kobj_labels_object(l);
        assert_in_range(json_object_size(obj), 2, 3);
        json_decref(obj);
        json_decref(l);
    }
    json_decref(intern);
}

/* Selectors, matchLabels and matchExpressions read both forms; a missing label satisfies
 * NotIn, != and DoesNotExist. */
static void test_label_sets_selectors(void **state)
{
    (void)state;
    json_t *intern = json_object();
    json_t *forms[2];
    both_forms(intern, forms);
    static const struct {
        const char *sel;
        bool match;
    } sels[] = {
        {"", true},
        {"nvidia.com/gpu.present=true", true},
        {"nvidia.com/gpu.present==true,zone=eu-1", true},
        {"nvidia.com/gpu.present=false", false},
        {"zone!=eu-1", false},
        {"missing!=x", true},
        {"zone in (eu-1,eu-2)", true},
        {"zone in (eu-2)", false},
        {"missing in (a)", false},
        {"zone notin (eu-2)", true},
        {"zone notin (eu-1)", false},
        {"missing notin (a)", true},
        {"zone", true},
        {"missing", false},
        {"!missing", true},
        {"!zone", false},
        {"a", true}, /* an empty value exists */
    };
    static const struct {
        const char *expr;
        bool match;
    } exprs[] = {
        {"{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"eu-1\"]}", true},
        {"{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"eu-2\"]}", false},
        {"{\"key\":\"missing\",\"operator\":\"In\",\"values\":[\"eu-1\"]}", false},
        {"{\"key\":\"zone\",\"operator\":\"NotIn\",\"values\":[\"eu-1\"]}", false},
        {"{\"key\":\"missing\",\"operator\":\"NotIn\",\"values\":[\"eu-1\"]}", true},
        {"{\"key\":\"zone\",\"operator\":\"Exists\"}", true},
        {"{\"key\":\"missing\",\"operator\":\"Exists\"}", false},
        {"{\"key\":\"missing\",\"operator\":\"DoesNotExist\"}", true},
        {"{\"key\":\"zone\",\"operator\":\"DoesNotExist\"}", false},
        {"{\"key\":\"nvidia.com/gpu.count\",\"operator\":\"Gt\",\"values\":[\"4\"]}", true},
        {"{\"key\":\"nvidia.com/gpu.count\",\"operator\":\"Gt\",\"values\":[\"8\"]}", false},
        {"{\"key\":\"nvidia.com/gpu.count\",\"operator\":\"Lt\",\"values\":[\"9\"]}", true},
        {"{\"key\":\"missing\",\"operator\":\"Lt\",\"values\":[\"9\"]}", false},
        {"{\"key\":\"nvidia.com/gpu.count\",\"operator\":\"Gt\"}", false},
        {"{\"key\":\"zone\",\"operator\":\"Sideways\",\"values\":[\"eu-1\"]}", false},
    };
    for (int f = 0; f < 2; f++) {
        for (size_t i = 0; i < ARRAY_SIZE(sels); i++) {
            bool m = !sels[i].match;
            struct err e = {0};
            assert_int_equal(kobj_selector_match(sels[i].sel, forms[f], &m, &e), 0);
            if (m != sels[i].match)
                fail_msg("form %d, selector \"%s\": %d", f, sels[i].sel, m);
        }
        for (size_t i = 0; i < ARRAY_SIZE(exprs); i++) {
            json_t *ex = load(exprs[i].expr);
            if (kobj_match_expression(ex, forms[f]) != exprs[i].match)
                fail_msg("form %d, expression %s", f, exprs[i].expr);
            json_decref(ex);
        }
        json_t *m1 = load("{\"zone\":\"eu-1\",\"nvidia.com/gpu.present\":\"true\"}");
        json_t *m2 = load("{\"zone\":\"eu-1\",\"missing\":\"x\"}");
        json_t *m3 = load("{\"zone\":1}");
        assert_true(kobj_labels_match(m1, forms[f]));
        assert_false(kobj_labels_match(m2, forms[f]));
        assert_false(kobj_labels_match(m3, forms[f]));
        assert_true(kobj_labels_match(NULL, forms[f]));
        json_decref(m1);
        json_decref(m2);
        json_decref(m3);
    }
    json_decref(forms[0]);
    json_decref(forms[1]);
    json_decref(intern);
}

/* Equal values held once, whatever their keys' order; a change to one held is found. */
static void test_intern(void **state)
{
    (void)state;
    json_t *table = json_object();
    json_t *a = kobj_intern(table, json_pack("{s:s,s:n}", "x", "1", "y"));
    json_t *b = kobj_intern(table, json_pack("{s:n,s:s}", "y", "x", "1"));
    json_t *c = kobj_intern(table, json_pack("{s:s}", "x", "2"));
    assert_ptr_equal(a, b);
    assert_ptr_not_equal(a, c);
    assert_int_equal(json_object_size(table), 2);
    assert_null(kobj_intern(table, NULL));
    json_t *d = json_string("as is");
    assert_ptr_equal(kobj_intern(NULL, d), d);
    assert_true(kobj_intern_check(table));
    json_object_set_new(c, "z", json_string("changed"));
    assert_false(kobj_intern_check(table));
    /* the values handed out outlive the table */
    json_decref(table);
    assert_string_equal(json_string_value(json_object_get(b, "x")), "1");
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_setters),
        cmocka_unit_test(test_valid_syntax),
        cmocka_unit_test(test_valid_quantity),
        cmocka_unit_test(test_selector_string),
        cmocka_unit_test(test_merge_patch),
        cmocka_unit_test(test_condition),
        cmocka_unit_test(test_ann_staged),
        cmocka_unit_test(test_pod_ready),
        cmocka_unit_test(test_label_sets),
        cmocka_unit_test(test_label_sets_random),
        cmocka_unit_test(test_intern),
        cmocka_unit_test(test_label_sets_shared),
        cmocka_unit_test(test_label_sets_prune),
        cmocka_unit_test(test_label_sets_planted),
        cmocka_unit_test(test_label_sets_refused),
        cmocka_unit_test(test_label_sets_selectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
