/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's controllers do bounded work: a Deployment of a million replicas makes pods in
 * slow-start batches, a bounded number per reconcile (the store lock is released in between),
 * and no more than the per-owner cap, past which the ReplicaSet reports why (condition and
 * Event). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "kubesim.h"

static uint64_t fake_now = 1800000000000ull;
static uint64_t clock_fn(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static json_t *call(struct ksim *ks, const char *method, const char *path, const char *body,
                    int *ret_code)
{
    struct ksim_request rq = {.method = method,
                              .path = path,
                              .content_type = "application/json",
                              .accept = "application/json",
                              .body = body,
                              .body_len = body ? strlen(body) : 0};
    struct ksim_response rs;
    ksim_handle(ks, &rq, &rs);
    *ret_code = rs.code;
    json_t *v = rs.body ? json_loads(rs.body, 0, NULL) : NULL;
    ksim_response_free(&rs);
    return v;
}

static size_t count(struct ksim *ks, const char *path)
{
    int code;
    json_t *l = call(ks, "GET", path, NULL, &code);
    assert_int_equal(code, 200);
    size_t n = json_array_size(json_object_get(l, "items"));
    json_decref(l);
    return n;
}

static const char deploy[] =
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"huge\"},"
    "\"spec\":{\"replicas\":1000000,\"selector\":{\"matchLabels\":{\"app\":\"huge\"}},"
    "\"template\":{\"metadata\":{\"labels\":{\"app\":\"huge\"}},"
    "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox:1\"}]}}}}";

static void test_million_replicas(void **state)
{
    (void)state;
    struct ksim_opts o;
    ksim_opts_default(&o);
    o.now_ms = clock_fn;
    o.max_pods_per_owner = 1200;
    struct ksim *ks = ksim_new(&o);
    int code;
    json_decref(call(ks, "POST", "/apis/apps/v1/namespaces/default/deployments", deploy, &code));
    assert_int_equal(code, 201);
    /* one reconcile makes the ReplicaSet and a bounded first batch of pods */
    uint64_t t0 = now_ms_mono();
    assert_true(ksim_reconcile(ks));
    assert_true(now_ms_mono() - t0 < 5000);
    size_t first = count(ks, "/api/v1/namespaces/default/pods");
    assert_true(first > 0);
    assert_true(first <= 500);
    /* later reconciles add more, never past the cap */
    size_t last = first;
    for (int i = 0; i < 50; i++) {
        ksim_reconcile(ks);
        size_t n = count(ks, "/api/v1/namespaces/default/pods");
        assert_true(n <= last + 500);
        last = n;
    }
    assert_int_equal(last, 1200);
    /* the ReplicaSet says why it stopped, and so does an Event */
    json_t *rsl = call(ks, "GET", "/apis/apps/v1/namespaces/default/replicasets", NULL, &code);
    json_t *rs = json_array_get(json_object_get(rsl, "items"), 0);
    json_t *conds = json_object_get(json_object_get(rs, "status"), "conditions");
    json_t *c = json_array_get(conds, 0);
    assert_string_equal(json_string_value(json_object_get(c, "type")), "ReplicaFailure");
    assert_string_equal(json_string_value(json_object_get(c, "reason")), "FailedCreate");
    assert_non_null(strstr(json_string_value(json_object_get(c, "message")), "1200"));
    json_decref(rsl);
    json_t *evl = call(ks, "GET", "/api/v1/namespaces/default/events", NULL, &code);
    assert_int_equal(json_array_size(json_object_get(evl, "items")), 1);
    json_t *ev = json_array_get(json_object_get(evl, "items"), 0);
    assert_string_equal(json_string_value(json_object_get(ev, "reason")), "FailedCreate");
    assert_string_equal(json_string_value(json_object_get(ev, "type")), "Warning");
    json_decref(evl);
    ksim_free(ks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_million_replicas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
