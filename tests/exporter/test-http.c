/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of src/edge/http: the server over real sockets (libcurl client). The Prometheus writers are
 * src/base/prom, tested in tests/unit/test-prom.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "http.h"

/* close() as the test binary exports it (libmicrohttpd's calls resolve here too): counts the
 * closes of descriptors that were not open, i.e. double closes, which in a threaded process can
 * close another thread's freshly opened file. */
static int bad_closes;
int close(int fd)
{
    long r = syscall(SYS_close, fd);
    if (r < 0 && errno == EBADF)
        __atomic_add_fetch(&bad_closes, 1, __ATOMIC_SEQ_CST);
    return (int)r;
}

static int hello(const struct http_request *req, struct http_response *resp, void *ud)
{
    (void)ud;
    char *body = xasprintf("hello %s accept=[%s]\n", req->path, req->accept);
    http_response_take(resp, 200, HTTP_CT_TEXT, body, strlen(body));
    return 0;
}

static int failing(const struct http_request *req, struct http_response *resp, void *ud)
{
    (void)req;
    (void)ud;
    http_response_copy(resp, 200, HTTP_CT_TEXT, "leak?", 5); /* released on failure */
    return -EIO;
}

static int fixed(const struct http_request *req, struct http_response *resp, void *ud)
{
    (void)req;
    http_response_static(resp, 503, HTTP_CT_TEXT, ud);
    return 0;
}

static int released;

static void count_release(void *cls)
{
    (void)cls;
    __atomic_add_fetch(&released, 1, __ATOMIC_SEQ_CST);
}

/* A shared body handed out by reference plus a per-request trailer. */
static int with_trailer(const struct http_request *req, struct http_response *resp, void *ud)
{
    (void)req;
    resp->status = 200;
    resp->content_type = HTTP_CT_TEXT;
    resp->body = ud;
    resp->body_len = strlen(ud);
    resp->release = count_release;
    resp->release_cls = NULL;
    memcpy(resp->trailer, "tail\n", 5);
    resp->trailer_len = 5;
    return 0;
}

struct reply {
    long status;
    struct sbuf body;
    char ctype[128];
};

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
    struct reply *r = ud;
    return sbuf_append(&r->body, p, sz * n) < 0 ? 0 : sz * n;
}

static void request(unsigned port, const char *method, const char *path, const char *header,
                    const char *body, struct reply *out)
{
    CURL *c = curl_easy_init();
    assert_non_null(c);
    char *url = xasprintf("http://127.0.0.1:%u%s", port, path);
    sbuf_init(&out->body, 1 << 20);
    struct curl_slist *hdrs = header ? curl_slist_append(NULL, header) : NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
    if (hdrs)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "GET") != 0)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
        fail_msg("%s %s: %s", method, path, curl_easy_strerror(rc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    strlcpy_s(out->ctype, ct ? ct : "", sizeof(out->ctype));
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    free(url);
}

static void test_server(void **state)
{
    (void)state;
    struct http_route routes[] = {
        {"/hello", hello, NULL},
        {"/fail", failing, NULL},
        {"/busy", fixed, "busy\n"},
        {"/trailer", with_trailer, "shared body\n"},
    };
    struct http_config cfg = {.listen = "127.0.0.1:0", .routes = routes, .n_routes = 4};
    struct http_server *s = NULL;
    struct err e = {0};
    if (http_server_new(&cfg, &s, &e) < 0)
        fail_msg("%s", err_msg(&e));
    unsigned port = http_server_port(s);
    assert_true(port > 0);

    struct reply r;
    request(port, "GET", "/hello", "Accept: text/plain", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body.data, "hello /hello accept=[text/plain]\n");
    assert_string_equal(r.ctype, HTTP_CT_TEXT);
    sbuf_free(&r.body);

    request(port, "GET", "/hello?x=1", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body.data, "hello /hello accept=[*/*]\n");
    sbuf_free(&r.body);

    request(port, "HEAD", "/hello", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body.len, 0);
    sbuf_free(&r.body);

    request(port, "GET", "/nope", NULL, NULL, &r);
    assert_int_equal(r.status, 404);
    sbuf_free(&r.body);

    request(port, "GET", "/fail", NULL, NULL, &r);
    assert_int_equal(r.status, 500);
    sbuf_free(&r.body);

    request(port, "GET", "/busy", NULL, NULL, &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body.data, "busy\n");
    sbuf_free(&r.body);

    request(port, "GET", "/trailer", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body.data, "shared body\ntail\n");
    sbuf_free(&r.body);
    request(port, "HEAD", "/trailer", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    sbuf_free(&r.body);

    request(port, "DELETE", "/hello", NULL, NULL, &r);
    assert_int_equal(r.status, 405);
    sbuf_free(&r.body);

    request(port, "POST", "/hello", NULL, "some body", &r);
    assert_int_equal(r.status, 413);
    sbuf_free(&r.body);

    /* Headers beyond the per-connection memory limit are refused, not buffered. */
    char *big = xmalloc(40000);
    memcpy(big, "X-Big: ", 7);
    memset(big + 7, 'a', 40000 - 8);
    big[40000 - 1] = '\0';
    request(port, "GET", "/hello", big, NULL, &r);
    assert_true(r.status == 431 || r.status == 413 || r.status == 400);
    sbuf_free(&r.body);
    free(big);

    http_server_free(s);
    http_server_free(NULL);
    /* Every response's body was released exactly once, by the time the server is gone. */
    assert_int_equal(__atomic_load_n(&released, __ATOMIC_SEQ_CST), 2);
}

static void test_listen_errors(void **state)
{
    (void)state;
    char *host = NULL;
    unsigned port = 0;
    struct err e = {0};
    assert_int_equal(http_parse_listen(":9400", &host, &port, &e), 0);
    assert_null(host);
    assert_int_equal(port, 9400);
    assert_int_equal(http_parse_listen("127.0.0.1:80", &host, &port, &e), 0);
    assert_string_equal(host, "127.0.0.1");
    free(host);
    assert_int_equal(http_parse_listen("[::1]:8080", &host, &port, &e), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 8080);
    free(host);
    const char *bad[] = {"", "9400", ":", ":x", ":70000", "::1:80", "[::1]80", "[::1", ":-1"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        host = NULL;
        if (http_parse_listen(bad[i], &host, &port, &e) >= 0)
            fail_msg("\"%s\" accepted", bad[i]);
        assert_null(host);
    }
    assert_non_null(strstr(err_msg(&e), ":-1"));

    /* A port in use: the error names the address. */
    struct http_route rt = {"/", hello, NULL};
    struct http_config cfg = {.listen = "127.0.0.1:0", .routes = &rt, .n_routes = 1};
    struct http_server *a = NULL, *b = NULL;
    assert_int_equal(http_server_new(&cfg, &a, &e), 0);
    char *addr = xasprintf("127.0.0.1:%u", http_server_port(a));
    cfg.listen = addr;
    assert_true(http_server_new(&cfg, &b, &e) < 0);
    assert_null(b);
    assert_non_null(strstr(err_msg(&e), addr));
    cfg.listen = "no-such-host.invalid:1";
    assert_true(http_server_new(&cfg, &b, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "no-such-host.invalid"));
    struct http_route badroute = {"metrics", hello, NULL};
    cfg.listen = "127.0.0.1:0";
    cfg.routes = &badroute;
    assert_true(http_server_new(&cfg, &b, &e) < 0);
    http_server_free(a);
    free(addr);
}

/* ---- deadlines and limits over raw sockets ------------------------------------------------ */

/* A TCP connection from `source` (a loopback address) to 127.0.0.1:port. */
static int raw_connect(const char *source, unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in src = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, source, &src.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0);
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&dst, sizeof(dst)), 0);
    return fd;
}

/* Milliseconds until the server closes fd (reads and discards what it sends), or -1 when it
 * is still open after limit_ms. `trickle`: sends one byte of a never-ending header every 100 ms
 * meanwhile. */
static long ms_until_closed(int fd, long limit_ms, bool trickle)
{
    uint64_t t0 = now_ms_mono();
    if (trickle) {
        const char *start = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: ";
        assert_true(write(fd, start, strlen(start)) > 0);
    }
    for (;;) {
        long spent = (long)(now_ms_mono() - t0);
        if (spent > limit_ms)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) > 0) {
            char buf[4096];
            ssize_t n = read(fd, buf, sizeof(buf));
            if (n <= 0)
                return (long)(now_ms_mono() - t0);
            continue;
        }
        if (trickle && send(fd, "a", 1, MSG_NOSIGNAL) < 0)
            return (long)(now_ms_mono() - t0);
    }
}

/* Request headers trickling in a byte at a time do not hold a connection past the header
 * deadline, nor does an idle keep-alive connection; a normal request is unaffected. */
static void test_deadlines(void **state)
{
    (void)state;
    struct http_route routes[] = {{"/hello", hello, NULL}};
    struct http_config cfg = {.listen = "127.0.0.1:0",
                              .routes = routes,
                              .n_routes = 1,
                              .header_timeout_ms = 400,
                              .timeout_s = 60};
    struct http_server *s = NULL;
    struct err e = {0};
    if (http_server_new(&cfg, &s, &e) < 0)
        fail_msg("%s", err_msg(&e));
    unsigned port = http_server_port(s);

    int fd = raw_connect("127.0.0.1", port);
    long ms = ms_until_closed(fd, 3000, true);
    close(fd);
    assert_true(ms >= 300 && ms < 1500);

    fd = raw_connect("127.0.0.1", port);
    ms = ms_until_closed(fd, 3000, false); /* silent from the start */
    close(fd);
    assert_true(ms >= 300 && ms < 1500);

    /* An answered request, then idle keep-alive: closed at the deadline after the response. */
    fd = raw_connect("127.0.0.1", port);
    const char *req = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    char buf[512];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "200 OK"));
    ms = ms_until_closed(fd, 3000, false);
    close(fd);
    assert_true(ms >= 0 && ms < 1500);
    assert_true(http_server_deadline_closes(s) >= 3);

    struct reply r;
    request(port, "GET", "/hello", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    sbuf_free(&r.body);
    http_server_free(s);
}

/* One client address holds at most per_ip_limit connections; another is still served. */
static void test_per_client_limit(void **state)
{
    (void)state;
    struct http_route routes[] = {{"/hello", hello, NULL}};
    struct http_config cfg = {
        .listen = "127.0.0.1:0", .routes = routes, .n_routes = 1, .per_ip_limit = 3};
    struct http_server *s = NULL;
    struct err e = {0};
    if (http_server_new(&cfg, &s, &e) < 0)
        fail_msg("%s", err_msg(&e));
    unsigned port = http_server_port(s);
    int held[3];
    for (int i = 0; i < 3; i++)
        held[i] = raw_connect("127.0.0.1", port);
    usleep(100 * 1000); /* accepted by the server */
    int extra = raw_connect("127.0.0.1", port);
    assert_true(ms_until_closed(extra, 2000, false) >= 0); /* refused: closed at once */
    close(extra);
    int other = raw_connect("127.0.0.2", port);
    const char *req = "GET /hello HTTP/1.0\r\n\r\n";
    assert_int_equal(write(other, req, strlen(req)), (ssize_t)strlen(req));
    char buf[512];
    ssize_t n = read(other, buf, sizeof(buf) - 1);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "200 OK"));
    close(other);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ms_until_closed(held[i], 200, false), -1); /* still held */
    for (int i = 0; i < 3; i++)
        close(held[i]);
    http_server_free(s);
}

/* The listening socket is closed exactly once: libmicrohttpd owns it once started. */
static void test_no_double_close(void **state)
{
    (void)state;
    struct http_route routes[] = {{"/busy", fixed, "busy\n"}};
    struct http_config cfg = {.listen = "127.0.0.1:0", .routes = routes, .n_routes = 1};
    for (int i = 0; i < 3; i++) {
        struct http_server *s = NULL;
        struct err e = {0};
        if (http_server_new(&cfg, &s, &e) < 0)
            fail_msg("%s", err_msg(&e));
        int before = __atomic_load_n(&bad_closes, __ATOMIC_SEQ_CST);
        http_server_free(s);
        assert_int_equal(__atomic_load_n(&bad_closes, __ATOMIC_SEQ_CST), before);
    }
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server),           cmocka_unit_test(test_listen_errors),
        cmocka_unit_test(test_no_double_close),  cmocka_unit_test(test_deadlines),
        cmocka_unit_test(test_per_client_limit),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return r;
}
