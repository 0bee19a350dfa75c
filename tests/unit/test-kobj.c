/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of src/kobj: JSON paths and Kubernetes object accessors. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_setters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
