/* SPDX-License-Identifier: Apache-2.0 */
/* src/edge/grpc client against src/edge/grpc server over a real unix socket: socket handling,
 * limits, cross-thread stream sends, close notification, shutdown with streams held elsewhere. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cmocka.h>

#include "grpc.h"

static char dir[256];

static const char *sock_path(const char *name)
{
    static char p[320];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return p;
}

/* ---- a small server ---- */

struct srv_state {
    pthread_mutex_t mu;
    struct grpc_stream *held;
    atomic_int closed;
    atomic_int close_code;
};

static void echo(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)ud;
    grpc_call_reply(call, req, len);
}

static void on_close(struct grpc_stream *st, int code, void *ud)
{
    struct srv_state *ss = ud;
    (void)st;
    atomic_store(&ss->close_code, code);
    atomic_fetch_add(&ss->closed, 1);
}

static void hold(struct grpc_stream *st, const uint8_t *req, size_t len, void *ud)
{
    struct srv_state *ss = ud;
    grpc_stream_send(st, req, len);
    pthread_mutex_lock(&ss->mu);
    grpc_stream_unref(ss->held);
    ss->held = grpc_stream_ref(st);
    pthread_mutex_unlock(&ss->mu);
    grpc_stream_set_close_cb(st, on_close, ss);
}

static struct grpc_server *start(const char *name, const struct grpc_options *o,
                                 struct srv_state *ss)
{
    struct grpc_server *s = NULL;
    struct err e = {0};
    assert_int_equal(grpc_server_new(o, &s, &e), 0);
    assert_int_equal(grpc_server_add_unary(s, "/t.S/Echo", echo, NULL, &e), 0);
    assert_int_equal(grpc_server_add_stream(s, "/t.S/Hold", hold, ss, &e), 0);
    int r = grpc_server_start(s, sock_path(name), &e);
    if (r < 0)
        fail_msg("start: %s", err_msg(&e));
    return s;
}

static struct grpc_client *connect_to(const char *name, const struct grpc_options *o)
{
    struct grpc_client *c = NULL;
    struct err e = {0};
    if (grpc_client_connect(sock_path(name), 2000, o, &c, &e) < 0)
        fail_msg("connect: %s", err_msg(&e));
    return c;
}

static struct grpc_stream *held_stream(struct srv_state *ss)
{
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&ss->mu);
        struct grpc_stream *st = ss->held ? grpc_stream_ref(ss->held) : NULL;
        pthread_mutex_unlock(&ss->mu);
        if (st)
            return st;
        usleep(5000);
    }
    fail_msg("the stream handler never ran");
    return NULL;
}

static void srv_state_release(struct srv_state *ss)
{
    pthread_mutex_lock(&ss->mu);
    grpc_stream_unref(ss->held);
    ss->held = NULL;
    pthread_mutex_unlock(&ss->mu);
}

static bool wait_for(atomic_int *v, int want)
{
    for (int i = 0; i < 400; i++) {
        if (atomic_load(v) >= want)
            return true;
        usleep(5000);
    }
    return false;
}

/* ---- tests ---- */

static void test_socket_path(void **state)
{
    (void)state;
    struct err e = {0};
    struct grpc_server *s = NULL;
    /* A regular file is never removed. */
    FILE *f = fopen(sock_path("file.sock"), "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(grpc_server_new(NULL, &s, &e), 0);
    assert_int_equal(grpc_server_start(s, sock_path("file.sock"), &e), -EEXIST);
    assert_non_null(strstr(err_msg(&e), "not a socket"));
    grpc_server_free(s);
    assert_int_equal(access(sock_path("file.sock"), F_OK), 0);
    /* Too long. */
    char longp[200];
    memset(longp, 'a', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    longp[0] = '/';
    assert_int_equal(grpc_server_new(NULL, &s, &e), 0);
    assert_int_equal(grpc_server_start(s, longp, &e), -ENAMETOOLONG);
    grpc_server_free(s);

    /* A stale socket (nobody listening) is replaced; the mode is as asked. */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strlcpy_s(sa.sun_path, sock_path("stale.sock"), sizeof(sa.sun_path));
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
    struct grpc_options o = {.socket_mode = 0660};
    struct srv_state ss = {.mu = PTHREAD_MUTEX_INITIALIZER};
    s = start("stale.sock", &o, &ss);
    struct stat sb;
    assert_int_equal(stat(sock_path("stale.sock"), &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0660);
    assert_int_equal(grpc_server_start(s, sock_path("other.sock"), &e), -EBUSY);
    assert_int_equal(grpc_server_add_unary(s, "/t.S/Late", echo, NULL, &e), -EBUSY);

    /* A second server on the same path (a restart); freeing the first keeps the new socket. */
    unlink(sock_path("stale.sock"));
    struct grpc_server *s2 = start("stale.sock", NULL, &ss);
    grpc_server_free(s);
    assert_int_equal(access(sock_path("stale.sock"), F_OK), 0);
    struct grpc_client *c = connect_to("stale.sock", NULL);
    uint8_t *resp = NULL;
    size_t len = 0;
    int code = -1;
    assert_int_equal(grpc_client_unary(c, "/t.S/Echo", "hi", 2, 2000, &resp, &len, &code, &e), 0);
    assert_memory_equal(resp, "hi", 2);
    free(resp);
    grpc_client_free(c);
    grpc_server_free(s2);
    assert_int_equal(access(sock_path("stale.sock"), F_OK), -1);

    /* Connecting to nothing. */
    assert_int_equal(grpc_client_connect(sock_path("stale.sock"), 300, NULL, &c, &e), -ENOENT);
}

static void test_unary_sizes(void **state)
{
    (void)state;
    struct srv_state ss = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct grpc_server *s = start("unary.sock", NULL, &ss);
    struct grpc_client *c = connect_to("unary.sock", NULL);
    struct err e = {0};
    size_t big = 3u << 20;
    uint8_t *req = xmalloc(big);
    for (size_t i = 0; i < big; i++)
        req[i] = (uint8_t)(i * 7);
    uint8_t *resp = NULL;
    size_t len = 0;
    int code = -1;
    assert_int_equal(grpc_client_unary(c, "/t.S/Echo", req, big, 5000, &resp, &len, &code, &e), 0);
    assert_int_equal(len, big);
    assert_memory_equal(resp, req, big);
    free(resp);
    /* Empty message round trip. */
    assert_int_equal(grpc_client_unary(c, "/t.S/Echo", "", 0, 5000, &resp, &len, &code, &e), 0);
    assert_int_equal(len, 0);
    free(resp);
    /* Above the server's 4 MiB receive limit. */
    uint8_t *huge = xcalloc(1, (4u << 20) + 1);
    assert_int_equal(
        grpc_client_unary(c, "/t.S/Echo", huge, (4u << 20) + 1, 5000, &resp, &len, &code, &e),
        -EMSGSIZE); /* refused locally: above our own send limit */
    assert_int_equal(code, GRPC_STATUS_RESOURCE_EXHAUSTED);
    free(huge);
    grpc_client_free(c);

    /* A client that accepts only 1 KiB. */
    struct grpc_options small = {.max_recv_msg = 1024};
    c = connect_to("unary.sock", &small);
    assert_int_equal(grpc_client_unary(c, "/t.S/Echo", req, 2048, 5000, &resp, &len, &code, &e),
                     -EPROTO);
    assert_int_equal(code, GRPC_STATUS_RESOURCE_EXHAUSTED);
    assert_int_equal(grpc_client_unary(c, "/t.S/Echo", req, 1000, 5000, &resp, &len, &code, &e), 0);
    free(resp);
    grpc_client_free(c);
    free(req);
    grpc_server_free(s);
}

struct sender {
    struct grpc_stream *st;
    int n;
};

static void *send_many(void *arg)
{
    struct sender *sd = arg;
    for (int i = 0; i < sd->n; i++) {
        char m[32];
        int k = snprintf(m, sizeof(m), "msg-%d", i);
        if (grpc_stream_send(sd->st, m, (size_t)k) < 0)
            break;
    }
    return NULL;
}

static void test_stream_threads(void **state)
{
    (void)state;
    struct srv_state ss = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct grpc_server *s = start("stream.sock", NULL, &ss);
    struct grpc_client *c = connect_to("stream.sock", NULL);
    struct err e = {0};
    struct grpc_client_stream *cs = NULL;
    assert_int_equal(grpc_client_stream_open(c, "/t.S/Hold", "first", 5, 0, &cs, &e), 0);
    struct grpc_stream *st = held_stream(&ss);
    assert_string_equal(grpc_stream_path(st), "/t.S/Hold");
    /* Two threads send 200 messages each; each thread's messages arrive in order. */
    struct sender a = {st, 200}, b = {st, 200};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, send_many, &a);
    pthread_create(&tb, NULL, send_many, &b);
    uint8_t *m = NULL;
    size_t len = 0;
    int code = -1;
    assert_int_equal(grpc_client_stream_next(cs, 2000, &m, &len, &code, &e), 1);
    assert_memory_equal(m, "first", 5);
    free(m);
    int seen = 0, dup_order_ok = 1;
    int counts[200] = {0};
    while (seen < 400 && grpc_client_stream_next(cs, 2000, &m, &len, &code, &e) == 1) {
        char txt[32] = "";
        memcpy(txt, m, len < sizeof(txt) - 1 ? len : sizeof(txt) - 1);
        int i = atoi(txt + 4);
        if (i < 0 || i >= 200 || counts[i] >= 2)
            dup_order_ok = 0;
        else
            counts[i]++;
        free(m);
        seen++;
    }
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(seen, 400);
    assert_true(dup_order_ok);
    assert_int_equal(grpc_client_stream_next(cs, 50, &m, &len, &code, &e), -EAGAIN);

    /* The client goes away: the server's close callback runs with CANCELLED; sends fail. */
    grpc_client_stream_free(cs);
    assert_true(wait_for(&ss.closed, 1));
    assert_int_equal(atomic_load(&ss.close_code), GRPC_STATUS_CANCELLED);
    assert_false(grpc_stream_is_open(st));
    assert_int_equal(grpc_stream_send(st, "x", 1), -EPIPE);
    assert_int_equal(grpc_stream_finish(st, GRPC_STATUS_OK, NULL), -EPIPE);
    grpc_stream_unref(st);
    srv_state_release(&ss);

    /* Finish with a status from another thread (here: this one). */
    assert_int_equal(grpc_client_stream_open(c, "/t.S/Hold", "x", 1, 0, &cs, &e), 0);
    st = held_stream(&ss);
    assert_int_equal(grpc_stream_send(st, "y", 1), 0);
    assert_int_equal(grpc_stream_finish(st, GRPC_STATUS_NOT_FOUND, "gone: %d%%", 100), 0);
    assert_int_equal(grpc_stream_send(st, "z", 1), -EPIPE);
    assert_int_equal(grpc_client_stream_next(cs, 2000, &m, &len, &code, &e), 1);
    free(m);
    assert_int_equal(grpc_client_stream_next(cs, 2000, &m, &len, &code, &e), 1);
    assert_memory_equal(m, "y", 1);
    free(m);
    assert_int_equal(grpc_client_stream_next(cs, 2000, &m, &len, &code, &e), -EPROTO);
    assert_int_equal(code, GRPC_STATUS_NOT_FOUND);
    assert_non_null(strstr(err_msg(&e), "NOT_FOUND: gone: 100%"));
    assert_true(wait_for(&ss.closed, 2));
    assert_int_equal(atomic_load(&ss.close_code), GRPC_STATUS_NOT_FOUND);
    grpc_client_stream_free(cs);
    grpc_stream_unref(st);
    srv_state_release(&ss);

    /* Deadline of a stream, enforced by the server: the client does not drive its connection
     * until well after the deadline, so only the server can have ended the stream. */
    uint64_t t0 = now_ms_mono();
    assert_int_equal(grpc_client_stream_open(c, "/t.S/Hold", "x", 1, 200, &cs, &e), 0);
    assert_true(wait_for(&ss.closed, 3));
    assert_int_equal(atomic_load(&ss.close_code), GRPC_STATUS_DEADLINE_EXCEEDED);
    assert_true(now_ms_mono() - t0 >= 190);
    int r;
    while ((r = grpc_client_stream_next(cs, UINT64_MAX, &m, &len, &code, &e)) == 1)
        free(m);
    assert_int_equal(r, -ETIMEDOUT);
    assert_int_equal(code, GRPC_STATUS_DEADLINE_EXCEEDED);
    grpc_client_stream_free(cs);
    srv_state_release(&ss);

    /* Deadline enforced by the client while it waits (the server may race it). */
    t0 = now_ms_mono();
    assert_int_equal(grpc_client_stream_open(c, "/t.S/Hold", "x", 1, 200, &cs, &e), 0);
    assert_int_equal(grpc_client_stream_next(cs, UINT64_MAX, &m, &len, &code, &e), 1);
    free(m);
    assert_int_equal(grpc_client_stream_next(cs, UINT64_MAX, &m, &len, &code, &e), -ETIMEDOUT);
    assert_int_equal(code, GRPC_STATUS_DEADLINE_EXCEEDED);
    assert_true(now_ms_mono() - t0 < 1000);
    assert_true(wait_for(&ss.closed, 4));
    grpc_client_stream_free(cs);
    srv_state_release(&ss);

    grpc_client_free(c);
    grpc_server_free(s);
}

static void test_backpressure(void **state)
{
    (void)state;
    struct srv_state ss = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct grpc_options o = {.max_send_queue = 64 << 10};
    struct grpc_server *s = start("bp.sock", &o, &ss);
    struct grpc_client *c = connect_to("bp.sock", NULL);
    struct err e = {0};
    struct grpc_client_stream *cs = NULL;
    assert_int_equal(grpc_client_stream_open(c, "/t.S/Hold", "x", 1, 0, &cs, &e), 0);
    uint8_t *m = NULL;
    size_t len = 0;
    int code = -1;
    assert_int_equal(grpc_client_stream_next(cs, 2000, &m, &len, &code, &e), 1);
    free(m);
    struct grpc_stream *st = held_stream(&ss);
    /* The client does not read: windows and socket buffers fill, then the queue limit hits. */
    char *chunk = xcalloc(1, 16 << 10);
    int r = 0, i;
    for (i = 0; i < 4096 && r == 0; i++) {
        r = grpc_stream_send(st, chunk, 16 << 10);
        if (r == -ENOBUFS)
            break;
        if (i % 16 == 0)
            usleep(2000);
    }
    assert_int_equal(r, -ENOBUFS);
    assert_int_equal(grpc_stream_send(st, chunk, (4u << 20) + 1), -EMSGSIZE);
    free(chunk);
    grpc_stream_unref(st);
    grpc_client_stream_free(cs);
    grpc_client_free(c);
    srv_state_release(&ss);
    grpc_server_free(s);
}

static void test_limits(void **state)
{
    (void)state;
    struct srv_state ss = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct grpc_options o = {.max_streams = 2, .max_connections = 1};
    struct grpc_server *s = start("limits.sock", &o, &ss);
    struct grpc_client *c = connect_to("limits.sock", NULL);
    struct err e = {0};
    /* A second connection is closed at once. */
    struct grpc_client *c2 = NULL;
    int r = grpc_client_connect(sock_path("limits.sock"), 1000, NULL, &c2, &e);
    assert_true(r < 0);
    assert_null(c2);
    /* Two streams at once; a third waits for a slot and runs into its deadline. */
    struct grpc_client_stream *a = NULL, *b = NULL, *x = NULL;
    uint8_t *m = NULL;
    size_t len = 0;
    int code = -1;
    assert_int_equal(grpc_client_stream_open(c, "/t.S/Hold", "a", 1, 0, &a, &e), 0);
    assert_int_equal(grpc_client_stream_open(c, "/t.S/Hold", "b", 1, 0, &b, &e), 0);
    assert_int_equal(grpc_client_stream_next(a, 2000, &m, &len, &code, &e), 1);
    free(m);
    assert_int_equal(grpc_client_stream_next(b, 2000, &m, &len, &code, &e), 1);
    free(m);
    assert_int_equal(grpc_client_stream_open(c, "/t.S/Hold", "x", 1, 300, &x, &e), 0);
    r = grpc_client_stream_next(x, UINT64_MAX, &m, &len, &code, &e);
    assert_true(r < 0);
    assert_true(code == GRPC_STATUS_DEADLINE_EXCEEDED || code == GRPC_STATUS_UNAVAILABLE);
    grpc_client_stream_free(x);
    /* A freed slot is usable again. */
    grpc_client_stream_free(a);
    assert_true(wait_for(&ss.closed, 1));
    assert_int_equal(grpc_client_stream_open(c, "/t.S/Hold", "y", 1, 2000, &x, &e), 0);
    assert_int_equal(grpc_client_stream_next(x, 2000, &m, &len, &code, &e), 1);
    assert_memory_equal(m, "y", 1);
    free(m);
    grpc_client_stream_free(x);
    grpc_client_stream_free(b);
    grpc_client_free(c);
    srv_state_release(&ss);
    grpc_server_free(s);
}

static void test_shutdown_with_held_streams(void **state)
{
    (void)state;
    struct srv_state ss = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct grpc_server *s = start("shut.sock", NULL, &ss);
    struct grpc_client *c = connect_to("shut.sock", NULL);
    struct err e = {0};
    struct grpc_client_stream *cs = NULL;
    assert_int_equal(grpc_client_stream_open(c, "/t.S/Hold", "x", 1, 0, &cs, &e), 0);
    struct grpc_stream *st = held_stream(&ss);
    /* A thread keeps sending while the server is freed. */
    struct sender sd = {st, 1000000};
    pthread_t th;
    pthread_create(&th, NULL, send_many, &sd);
    usleep(20000);
    grpc_server_free(s);
    pthread_join(th, NULL); /* the sender stops at -EPIPE */
    assert_true(atomic_load(&ss.closed) == 1);
    assert_int_equal(atomic_load(&ss.close_code), GRPC_STATUS_UNAVAILABLE);
    assert_int_equal(grpc_stream_send(st, "x", 1), -EPIPE);
    grpc_stream_unref(st);
    srv_state_release(&ss);
    assert_int_equal(access(sock_path("shut.sock"), F_OK), -1);
    /* The client drains what arrived, then sees UNAVAILABLE. */
    uint8_t *m = NULL;
    size_t len = 0;
    int code = -1, r;
    while ((r = grpc_client_stream_next(cs, 2000, &m, &len, &code, &e)) == 1)
        free(m);
    assert_int_equal(r, -ECONNRESET);
    assert_int_equal(code, GRPC_STATUS_UNAVAILABLE);
    grpc_client_stream_free(cs);
    /* New calls on the dead connection fail at once. */
    assert_true(grpc_client_unary(c, "/t.S/Echo", "", 0, 1000, &m, &len, &code, &e) < 0);
    assert_int_equal(code, GRPC_STATUS_UNAVAILABLE);
    grpc_client_free(c);
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/gpuop-grpc-loop-XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socket_path),    cmocka_unit_test(test_unary_sizes),
        cmocka_unit_test(test_stream_threads), cmocka_unit_test(test_backpressure),
        cmocka_unit_test(test_limits),         cmocka_unit_test(test_shutdown_with_held_streams),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        r = r ? r : 1;
    return r;
}
