/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's ResourceQuota admission, table-driven: pods within a quota, exactly at it and over
 * it (GPUs, MIG slices, pods, count/<resource>, cpu constraints), each refusal with the API
 * server's 403 message; status.used kept current as pods are created, finish and go; a dry run
 * charges nothing; two pods racing for the last GPU: exactly one admitted. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
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
    const char *q = strchr(path, '?');
    char p[512];
    snprintf(p, sizeof(p), "%.*s", q ? (int)(q - path) : (int)strlen(path), path);
    struct ksim_request rq = {.method = method,
                              .path = p,
                              .query = q ? q + 1 : NULL,
                              .content_type = method[0] == 'P' && method[1] == 'A'
                                                  ? "application/merge-patch+json"
                                                  : "application/json",
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

static struct ksim *new_ksim(void)
{
    struct ksim_opts o;
    ksim_opts_default(&o);
    o.now_ms = clock_fn;
    return ksim_new(&o);
}

#define NS "/api/v1/namespaces/team-a"

/* A pod named name whose one container ("c") has these resources (a JSON object body). */
static char *pod(const char *name, const char *resources)
{
    return xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\"},"
                     "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"cuda:12\","
                     "\"resources\":%s}]}}",
                     name, resources);
}

struct step {
    const char *what;
    const char *method;
    const char *path;
    const char *name;      /* a pod of this name with resources below; NULL: body as is */
    const char *resources; /* or the body */
    int code;
    const char *message; /* the Status message, exactly; NULL: not checked */
};

#define GPU(n) "{\"limits\":{\"nvidia.com/gpu\":\"" #n "\"}}"
#define MIG(n) "{\"limits\":{\"nvidia.com/mig-1g.10gb\":" #n "}}"
#define QUOTA(n, h)                                                                        \
    "{\"apiVersion\":\"v1\",\"kind\":\"ResourceQuota\",\"metadata\":{\"name\":\"" n "\"}," \
    "\"spec\":{\"hard\":" h "}}"
#define CM(n) "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"" n "\"}}"

static const struct step steps[] = {
    {"namespace", "POST", "/api/v1/namespaces", NULL,
     "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"team-a\"}}", 201,
     NULL},
    {"a quota name no evaluator knows", "POST", NS "/resourcequotas", NULL,
     QUOTA("bad", "{\"gpus\":\"1\"}"), 422,
     "ResourceQuota \"bad\" is invalid: spec.hard[gpus]: Invalid value: \"gpus\": must be a "
     "standard resource for quota"},
    {"GPU quota", "POST", NS "/resourcequotas", NULL,
     QUOTA("gpu", "{\"requests.nvidia.com/gpu\":\"4\",\"limits.nvidia.com/gpu\":\"1\","
                  "\"pods\":\"3\"}"),
     201, NULL},
    {"MIG quota", "POST", NS "/resourcequotas", NULL,
     QUOTA("mig", "{\"requests.nvidia.com/mig-1g.10gb\":\"2\"}"), 201, NULL},
    {"within: 2 of 4 GPUs (limits.nvidia.com/gpu is not charged)", "POST", NS "/pods", "p1", GPU(2),
     201, NULL},
    {"dry run of 2 more: admitted, charges nothing", "POST", NS "/pods?dryRun=All", "p2", GPU(2),
     201, NULL},
    {"exactly at: 4 of 4", "POST", NS "/pods", "p2", GPU(2), 201, NULL},
    {"over by one GPU", "POST", NS "/pods", "p3", GPU(1), 403,
     "pods \"p3\" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=1, used: "
     "requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4"},
    {"MIG over: 3 slices of 2", "POST", NS "/pods", "m1", MIG(3), 403,
     "pods \"m1\" is forbidden: exceeded quota: mig, requested: requests.nvidia.com/mig-1g.10gb=3, "
     "used: requests.nvidia.com/mig-1g.10gb=0, limited: requests.nvidia.com/mig-1g.10gb=2"},
    {"MIG within: 2 slices", "POST", NS "/pods", "m1", MIG(2), 201, NULL},
    {"pods: a fourth pod passes pods=3", "POST", NS "/pods", "cpu-only",
     "{\"requests\":{\"cpu\":\"100m\"}}", 403,
     "pods \"cpu-only\" is forbidden: exceeded quota: gpu, requested: pods=1, used: pods=3, "
     "limited: pods=3"},
    {"count/configmaps quota", "POST", NS "/resourcequotas", NULL,
     QUOTA("objects", "{\"count/configmaps\":\"1\"}"), 201, NULL},
    {"first ConfigMap", "POST", NS "/configmaps", NULL, CM("a"), 201, NULL},
    {"second ConfigMap", "POST", NS "/configmaps", NULL, CM("b"), 403,
     "configmaps \"b\" is forbidden: exceeded quota: objects, requested: count/configmaps=1, "
     "used: count/configmaps=1, limited: count/configmaps=1"},
};

static const char *msg_of(json_t *st)
{
    return json_string_value(json_object_get(st, "message"));
}

static json_t *quota_field(struct ksim *ks, const char *name, const char *list, const char *res)
{
    int code;
    char path[256];
    snprintf(path, sizeof(path), NS "/resourcequotas/%s", name);
    json_t *q = call(ks, "GET", path, NULL, &code);
    assert_int_equal(code, 200);
    json_t *v = json_object_get(json_object_get(json_object_get(q, "status"), list), res);
    json_t *r = v ? json_incref(v) : NULL;
    json_decref(q);
    return r;
}

static void assert_used(struct ksim *ks, const char *quota, const char *res, const char *want)
{
    json_t *v = quota_field(ks, quota, "used", res);
    if (!want) {
        assert_null(v);
        return;
    }
    assert_non_null(v);
    if (strcmp(json_string_value(v), want) != 0)
        fail_msg("%s used %s: %s, want %s", quota, res, json_string_value(v), want);
    json_decref(v);
}

static void run_steps(struct ksim *ks)
{
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        const struct step *s = &steps[i];
        _cleanup_free_ char *body = s->name ? pod(s->name, s->resources) : xstrdup(s->resources);
        int code;
        json_t *r = call(ks, s->method, s->path, body, &code);
        if (code != s->code)
            fail_msg("%s: %d, want %d: %s", s->what, code, s->code, msg_of(r) ?: "");
        if (s->message && strcmp(msg_of(r) ?: "", s->message) != 0)
            fail_msg("%s: message\n  %s\nwant\n  %s", s->what, msg_of(r) ?: "", s->message);
        if (s->code == 403)
            assert_string_equal(json_string_value(json_object_get(r, "reason")), "Forbidden");
        json_decref(r);
    }
}

static void test_admission_table(void **state)
{
    (void)state;
    struct ksim *ks = new_ksim();
    run_steps(ks);
    assert_used(ks, "gpu", "requests.nvidia.com/gpu", "4");
    assert_used(ks, "gpu", "pods", "3");
    assert_used(ks, "gpu", "limits.nvidia.com/gpu", NULL);
    assert_used(ks, "mig", "requests.nvidia.com/mig-1g.10gb", "2");
    json_t *h = quota_field(ks, "gpu", "hard", "requests.nvidia.com/gpu");
    assert_string_equal(json_string_value(h), "4");
    json_decref(h);
    /* the controller agrees with what admission charged */
    ksim_reconcile(ks);
    assert_used(ks, "gpu", "requests.nvidia.com/gpu", "4");
    assert_used(ks, "objects", "count/configmaps", "1");
    ksim_free(ks);
}

static void test_finished_pod_releases(void **state)
{
    (void)state;
    struct ksim *ks = new_ksim();
    run_steps(ks);
    int code;
    /* p1 (2 GPUs) finishes: its GPUs and its pod slot are released, count/pods is not */
    json_decref(
        call(ks, "PATCH", NS "/pods/p1/status", "{\"status\":{\"phase\":\"Succeeded\"}}", &code));
    assert_int_equal(code, 200);
    ksim_reconcile(ks);
    assert_used(ks, "gpu", "requests.nvidia.com/gpu", "2");
    assert_used(ks, "gpu", "pods", "2");
    _cleanup_free_ char *p3 = pod("p3", GPU(2));
    json_decref(call(ks, "POST", NS "/pods", p3, &code));
    assert_int_equal(code, 201);
    assert_used(ks, "gpu", "requests.nvidia.com/gpu", "4");
    /* a deleted pod releases too (grace 0: gone at once) */
    json_decref(call(ks, "DELETE", NS "/pods/p2?gracePeriodSeconds=0", NULL, &code));
    assert_int_equal(code, 200);
    ksim_reconcile(ks);
    assert_used(ks, "gpu", "requests.nvidia.com/gpu", "2");
    ksim_free(ks);
}

static void test_cpu_constraint(void **state)
{
    (void)state;
    struct ksim *ks = new_ksim();
    int code;
    json_decref(call(ks, "POST", "/api/v1/namespaces",
                     "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":"
                     "{\"name\":\"team-a\"}}",
                     &code));
    json_decref(call(ks, "POST", NS "/resourcequotas",
                     QUOTA("compute", "{\"requests.cpu\":\"2\",\"limits.memory\":\"1Gi\"}"),
                     &code));
    assert_int_equal(code, 201);
    _cleanup_free_ char *p = pod("bare", GPU(1));
    json_t *r = call(ks, "POST", NS "/pods", p, &code);
    assert_int_equal(code, 403);
    assert_string_equal(msg_of(r), "pods \"bare\" is forbidden: failed quota: compute: must "
                                   "specify limits.memory for: c; requests.cpu for: c");
    json_decref(r);
    _cleanup_free_ char *p2 =
        pod("big", "{\"requests\":{\"cpu\":\"1500m\"},\"limits\":{\"memory\":\"2Gi\"}}");
    r = call(ks, "POST", NS "/pods", p2, &code);
    assert_int_equal(code, 403);
    assert_string_equal(msg_of(r), "pods \"big\" is forbidden: exceeded quota: compute, "
                                   "requested: limits.memory=2Gi, used: limits.memory=0, "
                                   "limited: limits.memory=1Gi");
    json_decref(r);
    ksim_free(ks);
}

struct racer {
    struct ksim *ks;
    const char *name;
    int code;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    _cleanup_free_ char *p = pod(r->name, GPU(1));
    json_decref(call(r->ks, "POST", NS "/pods", p, &r->code));
    return NULL;
}

static void test_race_for_last_gpu(void **state)
{
    (void)state;
    for (int round = 0; round < 50; round++) {
        struct ksim *ks = new_ksim();
        int code;
        json_decref(call(ks, "POST", "/api/v1/namespaces",
                         "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":"
                         "{\"name\":\"team-a\"}}",
                         &code));
        json_decref(call(ks, "POST", NS "/resourcequotas",
                         QUOTA("gpu", "{\"requests.nvidia.com/gpu\":\"1\"}"), &code));
        assert_int_equal(code, 201);
        struct racer a = {ks, "a", 0}, b = {ks, "b", 0};
        pthread_t ta, tb;
        assert_int_equal(pthread_create(&ta, NULL, race, &a), 0);
        assert_int_equal(pthread_create(&tb, NULL, race, &b), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        assert_true((a.code == 201 && b.code == 403) || (a.code == 403 && b.code == 201));
        assert_used(ks, "gpu", "requests.nvidia.com/gpu", "1");
        ksim_free(ks);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admission_table),
        cmocka_unit_test(test_finished_pod_releases),
        cmocka_unit_test(test_cpu_constraint),
        cmocka_unit_test(test_race_for_last_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
