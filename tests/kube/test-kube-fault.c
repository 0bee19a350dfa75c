/* SPDX-License-Identifier: Apache-2.0 */
/* The client against a scripted python stand-in (tests/kube/faultsrv.py) for faults a faithful
 * simulator does not produce: 5xx and 429 bursts with Retry-After, connection failures,
 * oversized and truncated bodies, watch streams cut at odd places, a 410 mid-stream, token
 * rotation, that no secret reaches an error message, and the memory bounds (decoded prices,
 * bodies in flight, list and store budgets, a forgotten continue token). */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "kube-internal.h"
#include "kube-peer.h"

#define TOKEN "sekret-token-4242"

static char tmpdir[256];
static char script_path[512], log_path[512], kc_path[512], tok_path[512];

struct fx {
    struct peer srv;
    struct kube_client *c;
};

/* Starts the stand-in with `script` and a client on it. */
static void fx_start(struct fx *f, const char *script, const struct kube_options *extra,
                     bool token_file)
{
    write_text(script_path, script);
    unlink(log_path);
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    char py[512];
    snprintf(py, sizeof(py), "%s/tests/kube/faultsrv.py", src ? src : ".");
    char *argv[] = {"/usr/bin/python3", py, script_path, log_path, NULL};
    assert_int_equal(peer_start(argv, true, &f->srv), 0);
    char kc[1024];
    if (token_file)
        snprintf(kc, sizeof(kc),
                 "current-context: t\ncontexts: [{name: t, context: {cluster: c, user: u, "
                 "namespace: ns1}}]\nclusters: [{name: c, cluster: {server: "
                 "'http://127.0.0.1:%d'}}]\nusers: [{name: u, user: {tokenFile: '%s'}}]\n",
                 f->srv.port, tok_path);
    else
        snprintf(kc, sizeof(kc),
                 "current-context: t\ncontexts: [{name: t, context: {cluster: c, user: u, "
                 "namespace: ns1}}]\nclusters: [{name: c, cluster: {server: "
                 "'http://127.0.0.1:%d'}}]\nusers: [{name: u, user: {token: " TOKEN "}}]\n",
                 f->srv.port);
    write_text(kc_path, kc);
    struct kube_options o = extra ? *extra : (struct kube_options){0};
    o.kubeconfig = kc_path;
    if (!o.backoff_base_ms)
        o.backoff_base_ms = 10;
    if (!o.backoff_max_ms)
        o.backoff_max_ms = 3000;
    if (!o.qps)
        o.qps = 1000;
    if (!o.burst)
        o.burst = 1000;
    struct err e = {0};
    int r = kube_client_new(&o, &f->c, &e);
    if (r < 0)
        fail_msg("client: %s", e.msg);
}

static void fx_stop(struct fx *f)
{
    kube_client_free(f->c);
    f->c = NULL;
    peer_stop(&f->srv);
}

/* The requests the stand-in saw. */
static json_t *seen_requests(void)
{
    json_t *arr = json_array();
    FILE *fp = fopen(log_path, "r");
    if (!fp)
        return arr;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, fp) > 0)
        json_array_append_new(arr, json_loads(line, 0, NULL));
    free(line);
    fclose(fp);
    return arr;
}

static size_t count_requests(void)
{
    json_t *a = seen_requests();
    size_t n = json_array_size(a);
    json_decref(a);
    return n;
}

#define STATUS(code, reason, msg)                                                          \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"" msg \
    "\",\"reason\":\"" reason "\",\"code\":" #code "}"
#define NODE(name, rv)                                                        \
    "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"" name \
    "\",\"resourceVersion\":\"" rv "\",\"labels\":{\"gpu\":\"yes\"}}}"

static void test_retry_5xx(void **state)
{
    (void)state;
    struct fx f = {0};
    fx_start(
        &f,
        "{\"rules\":[{\"method\":\"GET\",\"path\":\"/api/v1/nodes/n1\",\"responses\":["
        "{\"code\":503,\"body\":\"busy\"},{\"code\":500,\"body\":" STATUS(
            500, "InternalError", "etcd hiccup") "},"
                                                 "{\"code\":200,\"body\":" NODE("n1", "3") "}]}]}",
        NULL, false);
    json_t *node = NULL;
    struct err e = {0};
    int r = kube_get(f.c, &KUBE_NODES, NULL, "n1", &node, &e);
    if (r < 0)
        fail_msg("%s", e.msg);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(node, "metadata"), "resourceVersion")),
        "3");
    json_decref(node);
    json_t *reqs = seen_requests();
    assert_int_equal(json_array_size(reqs), 3);
    /* User-Agent and the bearer token went with every try */
    json_t *h = json_object_get(json_array_get(reqs, 2), "headers");
    const char *ua = json_string_value(json_object_get(h, "user-agent"));
    assert_non_null(ua);
    assert_true(str_has_prefix(ua, "gpuop/" GPUOP_VERSION " (linux/"));
    assert_string_equal(json_string_value(json_object_get(h, "authorization")), "Bearer " TOKEN);
    json_decref(reqs);
    fx_stop(&f);
}

static void test_retry_exhausted_and_4xx(void **state)
{
    (void)state;
    struct fx f = {0};
    struct kube_options o = {.max_retries = 2};
    fx_start(
        &f,
        "{\"rules\":[{\"method\":\"GET\",\"path\":\"/api/v1/nodes/down\",\"responses\":["
        "{\"code\":502,\"body\":\"bad gateway\"}]},"
        "{\"method\":\"GET\",\"path\":\"/api/v1/nodes/n1\",\"responses\":[{\"code\":404,"
        "\"body\":" STATUS(
            404, "NotFound",
            "nodes \\\"n1\\\" not found") "}]},"
                                          "{\"method\":\"GET\",\"path\":\"/api/v1/nodes/"
                                          "forbidden\",\"responses\":[{\"code\":"
                                          "403,\"body\":" STATUS(403, "Forbidden", "nope") "}]}]}",
        &o, false);
    struct err e = {0};
    json_t *v = NULL;
    assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "down", &v, &e), -EIO);
    assert_string_equal(e.msg, "get nodes down: HTTP 502: bad gateway");
    assert_int_equal(count_requests(), 3); /* 1 + 2 retries */
    assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "n1", &v, &e), -ENOENT);
    assert_string_equal(e.msg, "nodes \"n1\" not found (404 NotFound)");
    assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "forbidden", &v, &e), -EPERM);
    assert_int_equal(count_requests(), 5); /* 4xx: never retried */
    assert_null(strstr(e.msg, TOKEN));
    fx_stop(&f);
}

static void test_retry_after_429(void **state)
{
    (void)state;
    struct fx f = {0};
    fx_start(&f,
             "{\"rules\":[{\"method\":\"POST\",\"path\":\"/api/v1/namespaces/ns1/configmaps\","
             "\"responses\":[{\"code\":429,\"headers\":{\"Retry-After\":\"1\"},\"body\":" STATUS(
                 429, "TooManyRequests",
                 "slow down") "},"
                              "{\"code\":201,\"body\":{\"kind\":\"ConfigMap\"}}]}]}",
             NULL, false);
    json_t *cm = json_pack("{s:{s:s}}", "metadata", "name", "x");
    struct err e = {0};
    uint64_t t0 = now_ms_mono();
    int r = kube_create(f.c, &KUBE_CONFIGMAPS, "ns1", cm, NULL, &e);
    uint64_t took = now_ms_mono() - t0;
    if (r < 0)
        fail_msg("%s", e.msg);
    /* Retry-After: 1 was honoured (the jittered backoff alone would be ~10 ms) */
    assert_true(took >= 950);
    assert_true(took < 3000);
    assert_int_equal(count_requests(), 2);
    json_decref(cm);
    fx_stop(&f);
}

static void test_create_not_retried_on_5xx(void **state)
{
    (void)state;
    struct fx f = {0};
    fx_start(&f,
             "{\"rules\":[{\"method\":\"POST\",\"path\":\"/api/v1/namespaces/ns1/configmaps\","
             "\"responses\":[{\"code\":503,\"body\":\"maybe\"},{\"code\":201,\"body\":{}}]}]}",
             NULL, false);
    json_t *cm = json_pack("{s:{s:s}}", "metadata", "name", "x");
    struct err e = {0};
    /* a 5xx may have been applied: a non-idempotent create is not blindly repeated */
    assert_int_equal(kube_create(f.c, &KUBE_CONFIGMAPS, NULL, cm, NULL, &e), -EIO);
    assert_int_equal(count_requests(), 1);
    json_t *reqs = seen_requests();
    json_t *body =
        json_loads(json_string_value(json_object_get(json_array_get(reqs, 0), "body")), 0, NULL);
    assert_true(json_equal(body, cm));
    json_decref(body);
    json_decref(reqs);
    json_decref(cm);
    fx_stop(&f);
}

static void test_eviction_blocked(void **state)
{
    (void)state;
    struct fx f = {0};
    fx_start(
        &f,
        "{\"rules\":[{\"method\":\"POST\",\"path\":\"/api/v1/namespaces/ns1/pods/p1/eviction\","
        "\"responses\":[{\"code\":429,\"headers\":{\"Retry-After\":\"0\"},\"body\":" STATUS(
            429, "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.") "},"
                                                                                 "{\"code\":201,"
                                                                                 "\"body\":{}}]}]}",
        NULL, false);
    struct err e = {0};
    struct kube_delete_opts d = {.has_grace = true, .grace_period_seconds = 5};
    assert_int_equal(kube_evict(f.c, "ns1", "p1", &d, &e), KUBE_EBLOCKED);
    assert_int_equal(e.code, KUBE_EBLOCKED);
    assert_non_null(strstr(e.msg, "blocked by a PodDisruptionBudget"));
    assert_non_null(strstr(e.msg, "disruption budget"));
    assert_int_equal(count_requests(), 1);
    /* the caller tries again later: now it goes through */
    assert_int_equal(kube_evict(f.c, "ns1", "p1", &d, &e), 0);
    json_t *reqs = seen_requests();
    json_t *body =
        json_loads(json_string_value(json_object_get(json_array_get(reqs, 1), "body")), 0, NULL);
    assert_string_equal(json_string_value(json_object_get(body, "kind")), "Eviction");
    assert_string_equal(json_string_value(json_object_get(body, "apiVersion")), "policy/v1");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(body, "deleteOptions"),
                                                        "gracePeriodSeconds")),
                     5);
    json_decref(body);
    json_decref(reqs);
    fx_stop(&f);
}

static void test_bounded_and_malformed(void **state)
{
    (void)state;
    struct fx f = {0};
    struct kube_options o = {.max_response = 4096, .max_retries = 1};
    fx_start(&f,
             "{\"rules\":["
             "{\"method\":\"GET\",\"path\":\"/api/v1/nodes/big\",\"responses\":[{\"code\":200,"
             "\"body\":\"[0,\",\"repeat\":100000}]},"
             "{\"method\":\"GET\",\"path\":\"/api/v1/nodes/trunc\",\"responses\":[{\"code\":200,"
             "\"raw\":\"{\\\"kind\\\":\\\"Node\\\",\\\"metadata\\\":{\\\"na\"}]},"
             "{\"method\":\"GET\",\"path\":\"/api/v1/nodes/notobj\",\"responses\":[{\"code\":200,"
             "\"body\":[1,2]}]},"
             "{\"method\":\"GET\",\"path\":\"/api/v1/nodes\",\"responses\":[{\"code\":200,"
             "\"body\":{\"kind\":\"NodeList\",\"items\":{}}}]}]}",
             &o, false);
    struct err e = {0};
    json_t *v = NULL;
    assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "big", &v, &e), -EFBIG);
    assert_non_null(strstr(e.msg, "4096-byte limit"));
    assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "trunc", &v, &e), -EBADMSG);
    assert_non_null(strstr(e.msg, "malformed JSON"));
    assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "notobj", &v, &e), -EBADMSG);
    assert_int_equal(kube_list(f.c, &KUBE_NODES, NULL, NULL, &v, &e), -EBADMSG);
    assert_non_null(strstr(e.msg, "no \"items\" list"));
    /* bad input refused before any request */
    size_t before = count_requests();
    assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "a/b", &v, &e), -EINVAL);
    assert_int_equal(kube_get(f.c, &KUBE_PODS, NULL, "p", &v, &e), -EINVAL);
    struct kube_list_opts lo = {.label_selector = "a=b\r\nInjected: 1"};
    assert_int_equal(kube_list(f.c, &KUBE_NODES, NULL, &lo, &v, &e), -EINVAL);
    json_t *arr = json_array();
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
    assert_int_equal(kube_patch(f.c, &KUBE_NODES, NULL, "n", &po, arr, NULL, &e), -EINVAL);
    json_decref(arr);
    assert_int_equal(count_requests(), before);
    fx_stop(&f);
}

static void test_connection_refused(void **state)
{
    (void)state;
    int port = free_port();
    char kc[512];
    snprintf(kc, sizeof(kc),
             "current-context: t\ncontexts: [{name: t, context: {cluster: c, user: u}}]\n"
             "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:%d'}}]\n"
             "users: [{name: u, user: {token: " TOKEN "}}]\n",
             port);
    write_text(kc_path, kc);
    struct kube_options o = {
        .kubeconfig = kc_path, .max_retries = 3, .backoff_base_ms = 20, .backoff_max_ms = 40};
    struct kube_client *c = NULL;
    struct err e = {0};
    assert_int_equal(kube_client_new(&o, &c, &e), 0);
    json_t *v = NULL;
    uint64_t t0 = now_ms_mono();
    assert_int_equal(kube_get(c, &KUBE_NODES, NULL, "n1", &v, &e), -ECONNREFUSED);
    assert_true(now_ms_mono() - t0 >= 40); /* three backoffs of >= 10, 20, 20 ms */
    assert_int_equal(kube_client_requests(c), 4);
    assert_non_null(strstr(e.msg, "get nodes n1"));
    assert_null(strstr(e.msg, TOKEN));
    kube_client_free(c);
}

/* ---- deadlines and the stop token (issue 18 item 5) --------------------------------------- */

/* A listening socket nobody accepts on: the kernel completes connections into the backlog and
 * no answer ever comes, like a black-holed API server. */
static int blackhole_listen(int *ret_port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 64), 0);
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *ret_port = ntohs(a.sin_port);
    return fd;
}

static struct kube_client *client_on(int port, struct kube_options o)
{
    char kc[512];
    snprintf(kc, sizeof(kc),
             "current-context: t\ncontexts: [{name: t, context: {cluster: c, user: u}}]\n"
             "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:%d'}}]\n"
             "users: [{name: u, user: {token: " TOKEN "}}]\n",
             port);
    write_text(kc_path, kc);
    o.kubeconfig = kc_path;
    struct kube_client *c = NULL;
    struct err e = {0};
    if (kube_client_new(&o, &c, &e) < 0)
        fail_msg("client: %s", e.msg);
    return c;
}

static void *stop_later(void *token)
{
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    stop_request(token);
    return NULL;
}

static void test_blackhole_deadline_and_stop(void **state)
{
    (void)state;
    int port;
    int lfd = blackhole_listen(&port);
    struct err e = {0};
    json_t *v = NULL;

    /* The call's deadline bounds it, retries included. */
    struct kube_client *c = client_on(port, (struct kube_options){.call_timeout_ms = 300});
    uint64_t t0 = now_ms_mono();
    assert_int_equal(kube_get(c, &KUBE_NODES, NULL, "n1", &v, &e), -ETIMEDOUT);
    uint64_t took = now_ms_mono() - t0;
    assert_true(took >= 250 && took < 1500);
    kube_client_free(c);

    /* The stop token ends a call in flight at once. */
    struct stop_token *stop = NULL;
    assert_int_equal(stop_token_new(&stop, &e), 0);
    c = client_on(port, (struct kube_options){.stop = stop});
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stop_later, stop), 0);
    t0 = now_ms_mono();
    assert_int_equal(kube_get(c, &KUBE_NODES, NULL, "n1", &v, &e), -ECANCELED);
    took = now_ms_mono() - t0;
    pthread_join(th, NULL);
    assert_true(took >= 150 && took < 700);
    assert_non_null(strstr(e.msg, "get nodes n1"));

    /* Once stopped, a call fails before sending anything... */
    uint64_t sent = kube_client_requests(c);
    assert_int_equal(kube_get(c, &KUBE_NODES, NULL, "n1", &v, &e), -ECANCELED);
    assert_int_equal(kube_client_requests(c), sent);
    /* ...unless detached from the token (the leader's release), bounded by its deadline. */
    kube_call_begin(&(struct kube_call){.deadline = deadline_after(300), .detached = true});
    t0 = now_ms_mono();
    assert_int_equal(kube_get(c, &KUBE_NODES, NULL, "n1", &v, &e), -ETIMEDOUT);
    kube_call_end();
    took = now_ms_mono() - t0;
    assert_true(took >= 250 && took < 1500);
    assert_int_equal(kube_client_requests(c), sent + 1);
    kube_client_free(c);
    stop_token_free(stop);
    close(lfd);

    /* A retry backoff ends with the stop too. */
    assert_int_equal(stop_token_new(&stop, &e), 0);
    c = client_on(free_port(), (struct kube_options){
                                   .stop = stop, .backoff_base_ms = 5000, .backoff_max_ms = 5000});
    assert_int_equal(pthread_create(&th, NULL, stop_later, stop), 0);
    t0 = now_ms_mono();
    assert_int_equal(kube_get(c, &KUBE_NODES, NULL, "n1", &v, &e), -ECANCELED);
    took = now_ms_mono() - t0;
    pthread_join(th, NULL);
    assert_true(took < 700);
    kube_client_free(c);
    stop_token_free(stop);
}

static void test_token_rotation(void **state)
{
    (void)state;
    write_text(tok_path, "first-token\n");
    struct fx f = {0};
    fx_start(&f,
             "{\"rules\":[{\"method\":\"GET\",\"path\":\"/api/v1/nodes/n1\",\"responses\":["
             "{\"code\":200,\"body\":" NODE("n1", "1") "}]}]}",
             NULL, true);
    struct err e = {0};
    json_t *v = NULL;
    assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "n1", &v, &e), 0);
    json_decref(v);
    /* kubelet swaps the file: the next request carries the new token */
    write_text(tok_path, "second-token-longer\n");
    assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "n1", &v, &e), 0);
    json_decref(v);
    json_t *reqs = seen_requests();
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(reqs, 0), "headers"), "authorization")),
                        "Bearer first-token");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(reqs, 1), "headers"), "authorization")),
                        "Bearer second-token-longer");
    json_decref(reqs);
    /* an unreadable token file is a clear error naming the file, not a crash */
    unlink(tok_path);
    assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "n1", &v, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "bearer token file"));
    fx_stop(&f);
}

static void test_rate_limit(void **state)
{
    (void)state;
    struct fx f = {0};
    struct kube_options o = {.qps = 20, .burst = 2};
    fx_start(&f,
             "{\"rules\":[{\"method\":\"GET\",\"path\":\"/api/v1/nodes/n1\",\"responses\":["
             "{\"code\":200,\"body\":" NODE("n1", "1") "}]}]}",
             &o, false);
    struct err e = {0};
    uint64_t t0 = now_ms_mono();
    for (int i = 0; i < 12; i++) {
        json_t *v = NULL;
        assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "n1", &v, &e), 0);
        json_decref(v);
    }
    uint64_t took = now_ms_mono() - t0;
    /* 2 at once, then 10 at 20 QPS: at least 500 ms */
    assert_true(took >= 480);
    fx_stop(&f);
}

static void test_pagination_and_conflict(void **state)
{
    (void)state;
    struct fx f = {0};
    fx_start(
        &f,
        "{\"rules\":["
        "{\"method\":\"GET\",\"path\":\"/api/v1/nodes\",\"query_has\":\"continue=tok2\","
        "\"responses\":[{\"code\":200,\"body\":{\"kind\":\"NodeList\",\"metadata\":{"
        "\"resourceVersion\":\"50\"},\"items\":[" NODE(
            "c",
            "3") "]}}]},"
                 "{\"method\":\"GET\",\"path\":\"/api/v1/nodes\",\"query_has\":\"continue=tok1\","
                 "\"responses\":[{\"code\":200,\"body\":{\"kind\":\"NodeList\",\"metadata\":{"
                 "\"resourceVersion\":\"50\",\"continue\":\"tok2\"},\"items\":[" NODE(
                     "b", "2") "]}}]},"
                               "{\"method\":\"GET\",\"path\":\"/api/v1/"
                               "nodes\",\"responses\":[{\"code\":200,\"body\":{"
                               "\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{"
                               "\"resourceVersion\":\"50\","
                               "\"continue\":\"tok1\"},\"items\":[" NODE("a", "1") "]}}]}]}",
        NULL, false);
    struct err e = {0};
    json_t *all = NULL;
    struct kube_list_opts lo = {.limit = 1, .label_selector = "gpu=yes"};
    if (kube_list(f.c, &KUBE_NODES, NULL, &lo, &all, &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(json_array_size(json_object_get(all, "items")), 3);
    assert_string_equal(json_string_value(json_object_get(all, "kind")), "NodeList");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(all, "metadata"), "resourceVersion")),
        "50");
    json_decref(all);
    json_t *reqs = seen_requests();
    assert_int_equal(json_array_size(reqs), 3);
    const char *q = json_string_value(json_object_get(json_array_get(reqs, 1), "query"));
    assert_non_null(strstr(q, "limit=1"));
    assert_non_null(strstr(q, "labelSelector=gpu%3Dyes"));
    assert_non_null(strstr(q, "continue=tok1"));
    json_decref(reqs);
    fx_stop(&f);
}

static int mutate_label(json_t *obj, void *ud, struct err *e)
{
    (void)e;
    int *calls = ud;
    (*calls)++;
    json_t *meta = json_object_get(obj, "metadata");
    json_object_set_new(json_object_get(meta, "labels"), "touched", json_string("yes"));
    return 0;
}

static void test_conflict_retry(void **state)
{
    (void)state;
    struct fx f = {0};
    fx_start(
        &f,
        "{\"rules\":["
        "{\"method\":\"GET\",\"path\":\"/api/v1/nodes/a\",\"responses\":[{\"code\":200,"
        "\"body\":" NODE("a", "1") "},{\"code\":200,\"body\":" NODE(
            "a",
            "7") "}]},"
                 "{\"method\":\"PUT\",\"path\":\"/api/v1/nodes/a\",\"responses\":[{\"code\":409,"
                 "\"body\":" STATUS(409, "Conflict",
                                    "the object has been modified") "},"
                                                                    "{\"code\":200,\"body\":" NODE(
                                                                        "a", "8") "}]}]}",
        NULL, false);
    struct err e = {0};
    int calls = 0;
    json_t *out = NULL;
    if (kube_update_retry(f.c, &KUBE_NODES, NULL, "a", false, mutate_label, &calls, &out, &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(calls, 2);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(out, "metadata"), "resourceVersion")),
        "8");
    json_decref(out);
    json_t *reqs = seen_requests();
    /* GET, PUT(409), GET, PUT: the second PUT carries the re-read version */
    assert_int_equal(json_array_size(reqs), 4);
    json_t *put =
        json_loads(json_string_value(json_object_get(json_array_get(reqs, 3), "body")), 0, NULL);
    json_t *meta = json_object_get(put, "metadata");
    assert_string_equal(json_string_value(json_object_get(meta, "resourceVersion")), "7");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(meta, "labels"), "touched")), "yes");
    json_decref(put);
    json_decref(reqs);
    fx_stop(&f);
}

struct evlog {
    char s[1024];
};

static int evlog_cb(enum kube_watch_type t, json_t *obj, void *ud)
{
    struct evlog *l = ud;
    const char *n = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    size_t len = strlen(l->s);
    snprintf(l->s + len, sizeof(l->s) - len, "%s:%s;", kube_watch_type_name(t), n ? n : "-");
    return 0;
}

static void test_watch_stream(void **state)
{
    (void)state;
    struct fx f = {0};
    /* events split mid-line across chunks, a keep-alive, then a 410 as an ERROR event */
    fx_start(
        &f,
        "{\"rules\":[{\"method\":\"GET\",\"path\":\"/api/v1/nodes\",\"query_has\":"
        "\"watch=true\",\"responses\":[{\"code\":200,\"stream\":["
        "\"{\\\"type\\\":\\\"ADDED\\\",\\\"object\\\":{\\\"metadata\\\":{\\\"na\","
        "\"me\\\":\\\"a\\\"}}}\\n{\\\"type\\\":\\\"MODI\","
        "\"FIED\\\",\\\"object\\\":{\\\"metadata\\\":{\\\"name\\\":\\\"a\\\"}}}\\n\\n\","
        "\"{\\\"type\\\":\\\"ERROR\\\",\\\"object\\\":{\\\"kind\\\":\\\"Status\\\","
        "\\\"code\\\":410,\\\"reason\\\":\\\"Expired\\\",\\\"message\\\":\\\"too old\\\"}}\\n\""
        "]},{\"code\":410,\"body\":" STATUS(410, "Expired", "too old resource version") "}]}]}",
        NULL, false);
    struct evlog l = {{0}};
    struct err e = {0};
    struct kube_watch_opts wo = {.resource_version = "5", .bookmarks = true};
    assert_int_equal(kube_watch(f.c, &KUBE_NODES, NULL, &wo, evlog_cb, &l, &e), KUBE_EGONE);
    assert_string_equal(l.s, "ADDED:a;MODIFIED:a;ERROR:-;");
    assert_non_null(strstr(e.msg, "too old (410 Expired)"));
    json_t *reqs = seen_requests();
    const char *q = json_string_value(json_object_get(json_array_get(reqs, 0), "query"));
    assert_non_null(strstr(q, "resourceVersion=5"));
    assert_non_null(strstr(q, "allowWatchBookmarks=true"));
    json_decref(reqs);
    /* the 410 as an HTTP answer */
    l.s[0] = '\0';
    assert_int_equal(kube_watch(f.c, &KUBE_NODES, NULL, &wo, evlog_cb, &l, &e), KUBE_EGONE);
    assert_string_equal(l.s, "");
    fx_stop(&f);
}

struct counts {
    int add, upd, del;
};
static void c_add(json_t *o, void *ud)
{
    (void)o;
    ((struct counts *)ud)->add++;
}
static void c_upd(json_t *a, json_t *b, void *ud)
{
    (void)a;
    (void)b;
    ((struct counts *)ud)->upd++;
}
static void c_del(json_t *o, void *ud)
{
    (void)o;
    ((struct counts *)ud)->del++;
}

static void test_informer_relist_on_410(void **state)
{
    (void)state;
    struct fx f = {0};
    /* list (a,b) -> watch answers 410 -> re-list (b changed, c new, a gone) -> watch streams
     * one more change and holds */
    fx_start(
        &f,
        "{\"rules\":["
        "{\"method\":\"GET\",\"path\":\"/api/v1/nodes\",\"query_has\":\"watch=true\","
        "\"responses\":[{\"code\":410,\"body\":" STATUS(
            410, "Expired",
            "too old") "},"
                       "{\"code\":200,\"hold\":30,\"stream\":[\"{\\\"type\\\":\\\"MODIFIED\\\","
                       "\\\"object\\\":"
                       "{\\\"metadata\\\":{\\\"name\\\":\\\"c\\\",\\\"resourceVersion\\\":"
                       "\\\"31\\\",\\\"labels\\\":{\\\"gpu\\\":\\\"no\\\"}}}}\\n\"]}]},"
                       "{\"method\":\"GET\",\"path\":\"/api/v1/nodes\",\"responses\":["
                       "{\"code\":200,\"body\":{\"metadata\":{\"resourceVersion\":\"10\"},"
                       "\"items\":[" NODE("a", "1") "," NODE(
                           "b", "2") "]}},"
                                     "{\"code\":200,\"body\":{\"metadata\":{\"resourceVersion\":"
                                     "\"30\"},\"items\":[" NODE("b", "20") "," NODE("c",
                                                                                    "21") "]}}]}]}",
        NULL, false);
    struct counts n = {0};
    struct kube_informer_opts io = {.handlers = {c_add, c_upd, c_del, &n}};
    struct kube_informer *inf = NULL;
    struct err e = {0};
    assert_int_equal(kube_informer_new(f.c, &KUBE_NODES, &io, &inf, &e), 0);
    assert_int_equal(kube_informer_wait_synced(inf, 5000), 0);
    uint64_t deadline = now_ms_mono() + 5000;
    struct kube_informer_stats st;
    for (;;) {
        kube_informer_stats(inf, &st);
        _cleanup_free_ char *rv = kube_informer_resource_version(inf);
        if ((st.events >= 1 && streq_ptr(rv, "31")) || now_ms_mono() > deadline)
            break;
        usleep(10000);
    }
    assert_int_equal(st.lists, 2);
    assert_int_equal(st.gone, 1);
    assert_int_equal(st.watches, 2);
    assert_int_equal(kube_informer_count(inf), 2);
    json_t *a = kube_informer_get(inf, NULL, "a");
    assert_null(a);
    json_t *yes = kube_informer_list(inf, NULL, "gpu", "yes");
    assert_int_equal(json_array_size(yes), 1); /* b; c moved to gpu=no */
    json_decref(yes);
    json_t *no = kube_informer_list(inf, NULL, "gpu", "no");
    assert_int_equal(json_array_size(no), 1);
    json_decref(no);
    assert_int_equal(n.add, 3); /* a, b, c */
    assert_int_equal(n.upd, 2); /* b on re-list, c from the watch */
    assert_int_equal(n.del, 1); /* a */
    uint64_t t0 = now_ms_mono();
    kube_informer_free(inf); /* abandons a held stream at once */
    assert_true(now_ms_mono() - t0 < 3000);
    fx_stop(&f);
}

/* ---- memory bounds ------------------------------------------------------------------------ */

/* A faultsrv rule (query_has may be NULL) answering with responses in turn. */
static json_t *rule(const char *path, const char *query_has, json_t *responses)
{
    json_t *r = json_pack("{s:s,s:s,s:o}", "method", "GET", "path", path, "responses", responses);
    if (query_has)
        json_object_set_new(r, "query_has", json_string(query_has));
    return r;
}

/* A NodeList page: n nodes named <prefix>0.. (each about 300 bytes of JSON), continue token
 * cont (NULL: the last page). */
static json_t *node_page(const char *prefix, int n, const char *cont)
{
    json_t *items = json_array();
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "%s%d", prefix, i);
        json_array_append_new(items, json_pack("{s:{s:s,s:s,s:{s:s,s:s}},s:{s:{s:s,s:s}}}",
                                               "metadata", "name", name, "resourceVersion", "7",
                                               "labels", "gpu", "yes", "nvidia.com/gpu.product",
                                               "NVIDIA-H100-80GB-HBM3", "status", "allocatable",
                                               "cpu", "64", "nvidia.com/gpu", "8"));
    }
    json_t *meta = json_pack("{s:s}", "resourceVersion", "50");
    if (cont)
        json_object_set_new(meta, "continue", json_string(cont));
    return json_pack("{s:s,s:s,s:o,s:o}", "kind", "NodeList", "apiVersion", "v1", "metadata", meta,
                     "items", items);
}

static json_t *ok(json_t *body)
{
    return json_pack("{s:i,s:o}", "code", 200, "body", body);
}

static void fx_start_rules(struct fx *f, json_t *rules, const struct kube_options *o)
{
    json_t *script = json_pack("{s:o}", "rules", rules);
    char *text = json_dumps(script, JSON_COMPACT);
    json_decref(script);
    fx_start(f, text, o, false);
    free(text);
}

static void assert_nothing_held(struct kube_client *c)
{
    struct kube_client_memory m;
    kube_client_memory(c, &m);
    assert_int_equal(m.in_flight, 0);
    assert_int_equal(m.cached, 0);
}

/* A body is priced before it is decoded: one that would cost more than max_decoded is refused
 * (the wire limit alone let it through), and bodies being read are bounded by max_in_flight. */
static void test_decoded_and_in_flight_limits(void **state)
{
    (void)state;
    /* 100,000 empty objects: 300 KB on the wire, over 20 MiB decoded */
    struct sbuf bloat;
    sbuf_init(&bloat, 1u << 20);
    sbuf_adds(&bloat, "{\"kind\":\"Node\",\"metadata\":{\"name\":\"bloat\"},\"x\":[{}");
    for (int i = 1; i < 100000; i++)
        sbuf_adds(&bloat, ",{}");
    sbuf_adds(&bloat, "]}");
    assert_int_equal(sbuf_check(&bloat), 0);
    json_t *rules = json_array();
    json_array_append_new(rules, rule("/api/v1/nodes/bloat", NULL,
                                      json_pack("[{s:i,s:s}]", "code", 200, "body", bloat.data)));
    json_array_append_new(rules, rule("/api/v1/nodes", NULL,
                                      json_pack("[{s:i,s:s}]", "code", 200, "body", bloat.data)));
    json_array_append_new(
        rules, rule("/api/v1/nodes/fine", NULL, json_pack("[o]", ok(node_page("n", 1, NULL)))));
    /* a watch event of the same: refused before it is decoded, the events before it handled */
    char *ev = xasprintf("{\"type\":\"ADDED\",\"object\":%s}\n", bloat.data);
    json_array_insert_new(
        rules, 0, /* before the list's rule, which would answer it too */
        rule("/api/v1/nodes", "watch=true",
             json_pack("[{s:i,s:[s,s]}]", "code", 200, "stream",
                       "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n", ev)));
    free(ev);
    sbuf_free(&bloat);
    struct fx f = {0};
    struct kube_options o = {.max_decoded = 8u << 20, .max_in_flight = 16u << 20};
    fx_start_rules(&f, rules, &o);
    struct err e = {0};
    json_t *v = NULL;
    assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "bloat", &v, &e), -EFBIG);
    assert_null(v);
    assert_non_null(strstr(e.msg, "get nodes bloat: the response would take about "));
    assert_non_null(strstr(e.msg, "MiB decoded, more than the 8.0 MiB limit "
                                  "(kube_options.max_decoded)"));
    assert_int_equal(kube_list(f.c, &KUBE_NODES, NULL, NULL, &v, &e), -EFBIG);
    assert_non_null(strstr(e.msg, "list nodes: the response would take about "));
    size_t before = count_requests();
    assert_int_equal(kube_get(f.c, &KUBE_NODES, NULL, "fine", &v, &e), 0);
    json_decref(v);
    assert_int_equal(count_requests(), before + 1); /* refused, not retried */
    struct evlog l = {{0}};
    struct kube_watch_opts wo = {.resource_version = "5"};
    assert_int_equal(kube_watch(f.c, &KUBE_NODES, NULL, &wo, evlog_cb, &l, &e), -EFBIG);
    assert_string_equal(l.s, "ADDED:a;");
    assert_non_null(strstr(e.msg, "watch nodes: watch event: the event would take about "));
    assert_non_null(strstr(e.msg, "more than the 8.0 MiB limit (kube_options.max_decoded)"));
    assert_nothing_held(f.c);
    struct kube_client_memory m;
    kube_client_memory(f.c, &m);
    assert_true(m.in_flight_peak > 0 && m.in_flight_peak <= o.max_in_flight);
    fx_stop(&f);

    /* a budget smaller than one body: the body stops growing there, the call is retried (the
     * others' memory would free meanwhile), then fails naming the limit */
    rules = json_array();
    json_array_append_new(
        rules, rule("/api/v1/nodes", NULL, json_pack("[o]", ok(node_page("n", 500, NULL)))));
    struct kube_options small = {.max_in_flight = 64u << 10, .max_retries = 2};
    fx_start_rules(&f, rules, &small);
    before = count_requests();
    assert_int_equal(kube_list(f.c, &KUBE_NODES, NULL, NULL, &v, &e), -ENOBUFS);
    assert_non_null(strstr(e.msg, "list nodes: another "));
    assert_non_null(strstr(e.msg, "would pass the client's 64 KiB limit on what its calls hold "
                                  "at once (kube_options.max_in_flight)"));
    assert_int_equal(count_requests(), before + 3);
    assert_nothing_held(f.c);
    kube_client_memory(f.c, &m);
    assert_true(m.in_flight_peak <= small.max_in_flight);
    fx_stop(&f);
}

/* kube_list's pages: the items kept within a budget (the client's max_decoded, or one the
 * caller shares between lists), and a forgotten continue token starts the list over. */
static void test_list_budget_and_restart(void **state)
{
    (void)state;
    json_t *rules = json_array();
    /* endless: every page names another */
    json_array_append_new(rules, rule("/api/v1/nodes", "continue=more",
                                      json_pack("[o]", ok(node_page("m", 50, "more")))));
    json_array_append_new(rules, rule("/api/v1/nodes", "labelSelector=endless",
                                      json_pack("[o]", ok(node_page("e", 50, "more")))));
    /* the second page's token is forgotten once, then always */
    json_array_append_new(rules, rule("/api/v1/nodes", "continue=once",
                                      json_pack("[{s:i,s:s},o]", "code", 410, "body",
                                                STATUS(410, "Expired", "continue too old"),
                                                ok(node_page("b", 1, NULL)))));
    json_array_append_new(rules, rule("/api/v1/nodes", "labelSelector=gone-once",
                                      json_pack("[o]", ok(node_page("a", 1, "once")))));
    json_array_append_new(rules, rule("/api/v1/nodes", "continue=always",
                                      json_pack("[{s:i,s:s}]", "code", 410, "body",
                                                STATUS(410, "Expired", "continue too old"))));
    json_array_append_new(rules, rule("/api/v1/nodes", "labelSelector=gone-always",
                                      json_pack("[o]", ok(node_page("a", 1, "always")))));
    json_array_append_new(
        rules, rule("/api/v1/nodes", NULL, json_pack("[o]", ok(node_page("n", 20, NULL)))));
    struct fx f = {0};
    struct kube_options o = {.max_decoded = 1u << 20};
    fx_start_rules(&f, rules, &o);
    struct err e = {0};
    json_t *v = NULL;

    /* the client's own budget: max_decoded */
    struct kube_list_opts endless = {.label_selector = "endless"};
    assert_int_equal(kube_list(f.c, &KUBE_NODES, NULL, &endless, &v, &e), -EFBIG);
    assert_null(v);
    assert_non_null(strstr(e.msg, "list nodes: the items take more than 1.0 MiB decoded after "));
    assert_non_null(strstr(e.msg, "pages, over the 1.0 MiB limit (kube_options.max_decoded)"));
    size_t pages = count_requests();
    assert_true(pages > 3 && pages < 40);

    /* a budget shared by lists: each adds what it keeps; one that does not fit adds nothing */
    struct kube_list_budget shared = {.limit = 400u << 10};
    struct kube_list_opts lo = {.budget = &shared};
    assert_int_equal(kube_list(f.c, &KUBE_NODES, NULL, &lo, &v, &e), 0);
    assert_int_equal(json_array_size(json_object_get(v, "items")), 20);
    size_t one = shared.used;
    assert_true(one > 20 * 300 && one < 20 * 4096);
    /* what the list holds is at most what it was charged */
    assert_true(kube_json_value_cost(json_object_get(v, "items")) <= one + 512);
    json_decref(steal_ptr(&v));
    assert_int_equal(kube_list(f.c, &KUBE_NODES, NULL, &lo, &v, &e), 0);
    json_decref(steal_ptr(&v));
    assert_int_equal(shared.used, 2 * one);
    lo.label_selector = "endless";
    assert_int_equal(kube_list(f.c, &KUBE_NODES, NULL, &lo, &v, &e), -EFBIG);
    assert_non_null(strstr(e.msg, "list nodes: the lists together take more than "));
    assert_non_null(strstr(e.msg, "over the 400 KiB limit (the caller's list budget)"));
    assert_int_equal(shared.used, 2 * one);

    /* a forgotten continue token: the list starts over from its first page */
    struct kube_list_opts once = {.label_selector = "gone-once"};
    size_t before = count_requests();
    assert_int_equal(kube_list(f.c, &KUBE_NODES, NULL, &once, &v, &e), 0);
    json_t *items = json_object_get(v, "items");
    assert_int_equal(json_array_size(items), 2); /* a0 and b0, a0 once */
    assert_string_equal(kobj_name(json_array_get(items, 0)), "a0");
    assert_string_equal(kobj_name(json_array_get(items, 1)), "b0");
    json_decref(steal_ptr(&v));
    json_t *reqs = seen_requests();
    assert_int_equal(json_array_size(reqs), before + 4); /* a, 410, a again, b */
    const char *q = json_string_value(json_object_get(json_array_get(reqs, before + 2), "query"));
    assert_null(strstr(q, "continue="));
    json_decref(reqs);
    /* forgotten every time: given up after 3 new starts */
    struct kube_list_opts always = {.label_selector = "gone-always"};
    before = count_requests();
    assert_int_equal(kube_list(f.c, &KUBE_NODES, NULL, &always, &v, &e), KUBE_EGONE);
    assert_non_null(strstr(e.msg, "list nodes: the continue token expired 4 times"));
    assert_int_equal(count_requests(), before + 8);
    assert_nothing_held(f.c);
    fx_stop(&f);
}

/* The informer: its store within the client's max_cached (never synced while a list does not
 * fit, everything given back when freed), and a forgotten continue token starts its list over. */
static void test_informer_bounds(void **state)
{
    (void)state;
    json_t *rules = json_array();
    json_array_append_new(rules,
                          rule("/api/v1/nodes", "watch=true",
                               json_pack("[{s:i,s:i,s:[]}]", "code", 200, "hold", 30, "stream")));
    json_array_append_new(rules, rule("/api/v1/nodes", "continue=once",
                                      json_pack("[{s:i,s:s},o]", "code", 410, "body",
                                                STATUS(410, "Expired", "continue too old"),
                                                ok(node_page("b", 1, NULL)))));
    json_array_append_new(rules, rule("/api/v1/nodes", "labelSelector=gone-once",
                                      json_pack("[o]", ok(node_page("a", 1, "once")))));
    json_array_append_new(rules, rule("/api/v1/nodes", "continue=more",
                                      json_pack("[o]", ok(node_page("m", 50, "more")))));
    json_array_append_new(
        rules, rule("/api/v1/nodes", NULL, json_pack("[o]", ok(node_page("n", 50, "more")))));
    struct fx f = {0};
    struct kube_options o = {.max_cached = 256u << 10};
    fx_start_rules(&f, rules, &o);
    struct err e = {0};

    struct counts n = {0};
    struct kube_informer_opts io = {.label_selector = "gone-once",
                                    .handlers = {c_add, c_upd, c_del, &n}};
    struct kube_informer *inf = NULL;
    assert_int_equal(kube_informer_new(f.c, &KUBE_NODES, &io, &inf, &e), 0);
    assert_int_equal(kube_informer_wait_synced(inf, 5000), 0);
    assert_int_equal(kube_informer_count(inf), 2);
    assert_int_equal(n.add, 2); /* a0 once, b0 */
    struct kube_informer_stats st;
    kube_informer_stats(inf, &st);
    assert_int_equal(st.lists, 1);
    struct kube_client_memory m;
    kube_client_memory(f.c, &m);
    assert_true(m.cached > 0);
    kube_informer_free(inf);
    assert_nothing_held(f.c);

    /* endless pages: the store stops at the budget and is never synced */
    struct kube_informer_opts all = {.handlers = {c_add, c_upd, c_del, &n}};
    assert_int_equal(kube_informer_new(f.c, &KUBE_NODES, &all, &inf, &e), 0);
    assert_int_equal(kube_informer_wait_synced(inf, 1500), -ETIMEDOUT);
    kube_client_memory(f.c, &m);
    assert_true(m.cached_peak <= o.max_cached);
    assert_true(m.cached_peak > o.max_cached / 2);
    size_t kept = kube_informer_count(inf);
    assert_true(kept > 0 && kept < 200);
    kube_informer_free(inf);
    assert_nothing_held(f.c);
    fx_stop(&f);
}

static char *slurp(const char *dir, const char *name)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    char *data = NULL;
    size_t n = 0;
    struct err e = {0};
    if (file_read_all(p, 1u << 20, &data, &n, &e) < 0)
        fail_msg("%s", e.msg);
    while (n > 0 && (data[n - 1] == '\n' || data[n - 1] == '\r'))
        data[--n] = '\0';
    return data;
}

/* Memory files open now: the client hands inline kubeconfig data to GnuTLS from memory, so none
 * may appear (an older transport needed them). */
static int count_memfds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char target[256];
        ssize_t len = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        if (str_has_prefix(target, "/memfd:"))
            n++;
    }
    closedir(d);
    return n;
}

/* TLS with client certificates (files, and inline -data) against the stand-in serving HTTPS
 * that requires a certificate from its client CA. */
static void test_client_certificates(void **state)
{
    (void)state;
    if (access("/usr/bin/openssl", X_OK) != 0)
        skip();
    char pki[512];
    snprintf(pki, sizeof(pki), "%s/pki", tmpdir);
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "set -e\nmkdir -p '%s'\ncd '%s'\n"
             "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'\n"
             "openssl req -x509 $K -keyout ca.key -out ca.crt -days 1 -subj /CN=test-ca\n"
             "openssl req $K -keyout srv.key -out srv.csr -subj /CN=127.0.0.1\n"
             "echo subjectAltName=IP:127.0.0.1 > srv.ext\n"
             "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out "
             "srv.crt -days 1 -extfile srv.ext\n"
             "openssl req $K -keyout cli.key -out cli.csr -subj /CN=gpuop-test\n"
             "openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out "
             "cli.crt -days 1\n"
             "for f in ca.crt cli.crt cli.key; do base64 -w0 $f > $f.b64; done\n",
             pki, pki);
    char sh[600], full[700];
    snprintf(sh, sizeof(sh), "%s/pki.sh", tmpdir);
    write_text(sh, cmd);
    snprintf(full, sizeof(full), "bash '%s' >/dev/null 2>&1", sh);
    if (system(full) != 0)
        fail_msg("openssl could not make the test PKI");

    write_text(script_path, "{\"rules\":[{\"method\":\"GET\",\"path\":\"/api/v1/nodes/n1\","
                            "\"responses\":[{\"code\":200,\"body\":" NODE("n1", "1") "}]}]}");
    unlink(log_path);
    char v[600];
    snprintf(v, sizeof(v), "%s/srv.crt", pki);
    setenv("FAULTSRV_TLS_CERT", v, 1);
    snprintf(v, sizeof(v), "%s/srv.key", pki);
    setenv("FAULTSRV_TLS_KEY", v, 1);
    snprintf(v, sizeof(v), "%s/ca.crt", pki);
    setenv("FAULTSRV_TLS_CLIENT_CA", v, 1);
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    char py[512];
    snprintf(py, sizeof(py), "%s/tests/kube/faultsrv.py", src ? src : ".");
    char *argv[] = {"/usr/bin/python3", py, script_path, log_path, NULL};
    struct peer srv = {0};
    assert_int_equal(peer_start(argv, true, &srv), 0);
    unsetenv("FAULTSRV_TLS_CERT");
    unsetenv("FAULTSRV_TLS_KEY");
    unsetenv("FAULTSRV_TLS_CLIENT_CA");

    _cleanup_free_ char *ca64 = slurp(pki, "ca.crt.b64");
    _cleanup_free_ char *crt64 = slurp(pki, "cli.crt.b64");
    _cleanup_free_ char *key64 = slurp(pki, "cli.key.b64");
    static const char head[] =
        "current-context: t\ncontexts: [{name: t, context: {cluster: c, user: u}}]\n";
    char *kcs[4];
    /* files, relative to the kubeconfig */
    kcs[0] = xasprintf("%sclusters: [{name: c, cluster: {server: 'https://127.0.0.1:%d', "
                       "certificate-authority: ca.crt}}]\nusers: [{name: u, user: "
                       "{client-certificate: cli.crt, client-key: cli.key}}]\n",
                       head, srv.port);
    /* inline data */
    kcs[1] = xasprintf("%sclusters: [{name: c, cluster: {server: 'https://127.0.0.1:%d', "
                       "certificate-authority-data: %s}}]\nusers: [{name: u, user: "
                       "{client-certificate-data: %s, client-key-data: %s}}]\n",
                       head, srv.port, ca64, crt64, key64);
    /* no client certificate: the server refuses the handshake */
    kcs[2] = xasprintf("%sclusters: [{name: c, cluster: {server: 'https://127.0.0.1:%d', "
                       "certificate-authority-data: %s}}]\nusers: [{name: u, user: {token: "
                       "x}}]\n",
                       head, srv.port, ca64);
    /* the right CA, the wrong name: the server's certificate is for the IP 127.0.0.1 only */
    kcs[3] = xasprintf("%sclusters: [{name: c, cluster: {server: 'https://localhost:%d', "
                       "certificate-authority: ca.crt}}]\nusers: [{name: u, user: "
                       "{client-certificate: cli.crt, client-key: cli.key}}]\n",
                       head, srv.port);
    for (int i = 0; i < 4; i++) {
        char kc[600];
        snprintf(kc, sizeof(kc), "%s/kc-%d.yaml", pki, i);
        write_text(kc, kcs[i]);
        free(kcs[i]);
        struct kube_options o = {.kubeconfig = kc, .max_retries = 1, .backoff_base_ms = 10};
        struct kube_client *c = NULL;
        struct err e = {0};
        if (kube_client_new(&o, &c, &e) < 0)
            fail_msg("kubeconfig %d: %s", i, e.msg);
        /* inline data stays in memory: no file of any kind carries it */
        assert_int_equal(count_memfds(), 0);
        json_t *node = NULL;
        int r = kube_get(c, &KUBE_NODES, NULL, "n1", &node, &e);
        if (i < 2 && r < 0)
            fail_msg("kubeconfig %d: %s", i, e.msg);
        if (i == 2 && r == 0)
            fail_msg("a client without a certificate got through");
        if (i == 2)
            assert_null(strstr(e.msg, "BEGIN"));
        if (i == 3) {
            assert_int_equal(r, -EKEYREJECTED);
            assert_non_null(strstr(e.msg, "certificate"));
            assert_int_equal(kube_client_requests(c), 1); /* not retried */
        }
        json_decref(node);
        kube_client_free(c);
        assert_int_equal(count_memfds(), 0);
    }
    json_t *reqs = seen_requests();
    assert_int_equal(json_array_size(reqs), 2);
    for (size_t i = 0; i < 2; i++)
        assert_string_equal(
            json_string_value(json_object_get(json_array_get(reqs, i), "client_cn")), "gpuop-test");
    json_decref(reqs);
    peer_stop(&srv);
}

/* ---- the transport against a raw scripted server ------------------------------------------ */

/* Per accepted connection, in order: the answers to its requests in turn. "" closes the
 * connection without answering the request read; "STALL:<bytes>" writes the bytes and then
 * holds the connection open, silent, until the server is stopped. */
struct rawsrv {
    int lfd, port;
    pthread_t th;
    const char *const *conns[4];
    atomic_int accepted;
    atomic_int quit;
};

/* Reads one request (head, and a Content-Length body): 0, or -1 when the client closed. */
static int raw_read_request(int fd)
{
    char head[8192];
    size_t n = 0;
    while (n < sizeof(head) - 1) {
        if (read(fd, head + n, 1) != 1)
            return -1;
        n++;
        if (n >= 4 && memcmp(head + n - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    head[n] = '\0';
    const char *cl = strcasestr(head, "\r\nContent-Length:");
    long len = cl ? strtol(cl + 17, NULL, 10) : 0;
    for (long i = 0; i < len; i++) {
        char c;
        if (read(fd, &c, 1) != 1)
            return -1;
    }
    return 0;
}

static void *rawsrv_main(void *arg)
{
    struct rawsrv *r = arg;
    for (int ci = 0; ci < 4 && r->conns[ci]; ci++) {
        int fd = -1;
        while (fd < 0 && !atomic_load(&r->quit)) {
            struct pollfd pf = {.fd = r->lfd, .events = POLLIN};
            if (poll(&pf, 1, 50) > 0)
                fd = accept(r->lfd, NULL, NULL);
        }
        if (fd < 0)
            return NULL;
        atomic_fetch_add(&r->accepted, 1);
        for (const char *const *rep = r->conns[ci]; *rep; rep++) {
            if (raw_read_request(fd) < 0 || (*rep)[0] == '\0')
                break;
            if (str_has_prefix(*rep, "STALL:")) {
                size_t len = strlen(*rep + 6);
                assert_int_equal(write(fd, *rep + 6, len), (ssize_t)len);
                while (!atomic_load(&r->quit))
                    usleep(10000);
                break;
            }
            size_t len = strlen(*rep);
            assert_int_equal(write(fd, *rep, len), (ssize_t)len);
        }
        close(fd);
    }
    return NULL;
}

static void rawsrv_start(struct rawsrv *r)
{
    r->lfd = blackhole_listen(&r->port);
    assert_int_equal(pthread_create(&r->th, NULL, rawsrv_main, r), 0);
}

static void rawsrv_stop(struct rawsrv *r)
{
    atomic_store(&r->quit, 1);
    pthread_join(r->th, NULL);
    close(r->lfd);
}

#define RAW_NODE_OK                                                                   \
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n" \
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"},\"x\":\"abc\"}"

/* Connections are kept and reused; a kept connection the server closed while the request was
 * on its way (before any answer) is replaced by a fresh one, even for a create. */
static void test_keepalive_reuse_and_idle_close(void **state)
{
    (void)state;
    static const char *const c0[] = {RAW_NODE_OK, RAW_NODE_OK, "", NULL};
    static const char *const c1[] = {
        "HTTP/1.1 201 Created\r\nContent-Length: 50\r\n\r\n"
        "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n2\"},\"x\":\"abc\"}",
        NULL};
    struct rawsrv srv = {.conns = {c0, c1}};
    rawsrv_start(&srv);
    struct kube_client *c = client_on(srv.port, (struct kube_options){.max_retries = 1});
    struct err e = {0};
    json_t *v = NULL;
    for (int i = 0; i < 2; i++) {
        if (kube_get(c, &KUBE_NODES, NULL, "n1", &v, &e) < 0)
            fail_msg("get %d: %s", i, e.msg);
        json_decref(v);
    }
    assert_int_equal(atomic_load(&srv.accepted), 1); /* one connection for both */
    json_t *obj = json_pack("{s:s,s:{s:s}}", "kind", "Node", "metadata", "name", "n2");
    if (kube_create(c, &KUBE_NODES, NULL, obj, &v, &e) < 0)
        fail_msg("create on a connection closed under it: %s", e.msg);
    json_decref(obj);
    assert_string_equal(kobj_name(v), "n2");
    json_decref(v);
    assert_int_equal(atomic_load(&srv.accepted), 2);
    assert_int_equal(kube_client_requests(c), 3); /* the replacement is not a retry */
    kube_client_free(c);
    rawsrv_stop(&srv);
}

/* A body that stops coming: the call's deadline ends it. */
static void test_stalled_body_deadline(void **state)
{
    (void)state;
    static const char *const c0[] = {"STALL:HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"ki",
                                     NULL};
    struct rawsrv srv = {.conns = {c0}};
    rawsrv_start(&srv);
    struct kube_client *c = client_on(srv.port, (struct kube_options){.call_timeout_ms = 300});
    struct err e = {0};
    json_t *v = NULL;
    uint64_t t0 = now_ms_mono();
    assert_int_equal(kube_get(c, &KUBE_NODES, NULL, "n1", &v, &e), -ETIMEDOUT);
    uint64_t took = now_ms_mono() - t0;
    assert_true(took >= 250 && took < 1500);
    kube_client_free(c);
    rawsrv_stop(&srv);
}

/* A watch whose stream goes silent ends at once on the stop token, after the events that came. */
static void test_stop_ends_stalled_watch(void **state)
{
    (void)state;
    /* one event (in a chunk with an extension), then silence: no last chunk */
    static const char *const c0_open[] = {
        "STALL:HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        "34;ext=1\r\n{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n\r\n",
        NULL};
    struct rawsrv srv = {.conns = {c0_open}};
    rawsrv_start(&srv);
    struct stop_token *stop = NULL;
    struct err e = {0};
    assert_int_equal(stop_token_new(&stop, &e), 0);
    struct kube_client *c = client_on(srv.port, (struct kube_options){.stop = stop});
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stop_later, stop), 0);
    struct evlog l = {{0}};
    struct kube_watch_opts wo = {.timeout_seconds = 30};
    uint64_t t0 = now_ms_mono();
    assert_int_equal(kube_watch(c, &KUBE_NODES, NULL, &wo, evlog_cb, &l, &e), -ECANCELED);
    uint64_t took = now_ms_mono() - t0;
    pthread_join(th, NULL);
    assert_true(took >= 150 && took < 700);
    assert_string_equal(l.s, "ADDED:a;");
    kube_client_free(c);
    stop_token_free(stop);
    rawsrv_stop(&srv);
}

static int setup(void **state)
{
    (void)state;
    if (access("/usr/bin/python3", X_OK) != 0) {
        fprintf(stderr, "SKIP: /usr/bin/python3 is absent\n");
        exit(77);
    }
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/kube-fault-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    snprintf(script_path, sizeof(script_path), "%s/script.json", tmpdir);
    snprintf(log_path, sizeof(log_path), "%s/log.jsonl", tmpdir);
    snprintf(kc_path, sizeof(kc_path), "%s/kubeconfig", tmpdir);
    snprintf(tok_path, sizeof(tok_path), "%s/token", tmpdir);
    unsetenv("KUBECONFIG");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_5xx),
        cmocka_unit_test(test_retry_exhausted_and_4xx),
        cmocka_unit_test(test_retry_after_429),
        cmocka_unit_test(test_create_not_retried_on_5xx),
        cmocka_unit_test(test_eviction_blocked),
        cmocka_unit_test(test_bounded_and_malformed),
        cmocka_unit_test(test_connection_refused),
        cmocka_unit_test(test_blackhole_deadline_and_stop),
        cmocka_unit_test(test_token_rotation),
        cmocka_unit_test(test_rate_limit),
        cmocka_unit_test(test_pagination_and_conflict),
        cmocka_unit_test(test_conflict_retry),
        cmocka_unit_test(test_watch_stream),
        cmocka_unit_test(test_informer_relist_on_410),
        cmocka_unit_test(test_client_certificates),
        cmocka_unit_test(test_keepalive_reuse_and_idle_close),
        cmocka_unit_test(test_stalled_body_deadline),
        cmocka_unit_test(test_stop_ends_stalled_watch),
        cmocka_unit_test(test_decoded_and_in_flight_limits),
        cmocka_unit_test(test_list_budget_and_restart),
        cmocka_unit_test(test_informer_bounds),
    };
    int r = cmocka_run_group_tests(tests, setup, NULL);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return r;
}
