/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP/1.1 response parser (kube-h1.c), the URL splitter and NO_PROXY matching (kube-conn.c):
 * tables of good and bad input, each fed whole, split at every byte and byte by byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kube-internal.h"

struct body {
    char data[4096];
    size_t len;
};

static int body_cb(void *ud, const char *p, size_t n)
{
    struct body *b = ud;
    assert_true(b->len + n <= sizeof(b->data));
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

/* Feeds raw in pieces cut at the given points (sorted, may be empty); then the end of the stream
 * when close_at_end. Returns the first error, 0 when done. */
static int feed_split(struct kube_h1 *p, const char *raw, size_t n, const size_t *cuts,
                      size_t ncuts, bool close_at_end, struct body *b, size_t *ret_left,
                      struct err *e)
{
    size_t off = 0;
    *ret_left = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : n;
        while (off < end) {
            size_t used = 0;
            int r = kube_h1_feed(p, raw + off, end - off, &used, body_cb, b, e);
            if (r != 0)
                return r;
            off += used;
            if (p->done) {
                *ret_left = n - off;
                return 0;
            }
            assert_int_equal(used, end - off + used); /* all taken unless done */
        }
    }
    if (close_at_end)
        return kube_h1_eof(p, e);
    return p->done ? 0 : -EAGAIN;
}

struct good {
    const char *raw;
    bool head;
    bool close; /* the body runs until the connection closes */
    int code;
    const char *body;
    bool keep_alive;
    const char *retry_after;
    size_t left; /* bytes after the response (not taken) */
};

static const struct good goods[] = {
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, false, 200, "hello", true, "", 0},
    {"HTTP/1.1 200 OK\nContent-Length: 2\n\nhi", false, false, 200, "hi", true, "", 0},
    {"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi", false, false, 200, "hi",
     false, "", 0},
    {"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi", false, false, 200, "hi", false, "", 0},
    {"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nhi", false, false, 200,
     "hi", true, "", 0},
    {"HTTP/1.1 200 OK\r\n\r\nuntil the end", false, true, 200, "until the end", false, "", 0},
    {"HTTP/1.0 404 Not Found\r\n\r\n{}", false, true, 404, "{}", false, "", 0},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;a=b;c\r\n world\r\n"
     "0\r\n\r\n",
     false, false, 200, "hello world", true, "", 0},
    {"HTTP/1.1 200 OK\r\ntransfer-encoding:  CHUNKED \r\n\r\nA \r\n0123456789\r\n0\r\n"
     "X-Trailer: 1\r\nY: 2\r\n\r\n",
     false, false, 200, "0123456789", true, "", 0},
    {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\nX: y\r\n\r\n"
     "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}",
     false, false, 201, "{}", true, "", 0},
    {"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", false, false, 204, "", true, "", 0},
    {"HTTP/1.1 304 Not Modified\r\n\r\n", false, false, 304, "", true, "", 0},
    {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", true, false, 200, "", true, "", 0},
    {"HTTP/1.1 429 Too Many Requests\r\nRetry-After:  7 \r\nContent-Length: 0\r\n\r\n", false,
     false, 429, "", true, "7", 0},
    {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\nContent-Encoding: identity"
     "\r\n\r\nhiEXTRA",
     false, false, 200, "hi", true, "", 5},
    {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, false, 200, "", true, "", 0},
};

static void check_good(const struct good *g, const size_t *cuts, size_t ncuts)
{
    struct kube_h1 *p = malloc(sizeof(*p));
    kube_h1_init(p, g->head);
    struct body b = {0};
    struct err e = {0};
    size_t left = 0;
    int r = feed_split(p, g->raw, strlen(g->raw), cuts, ncuts, g->close, &b, &left, &e);
    if (r != 0)
        fail_msg("\"%s\" cut at %zu: %d %s", g->raw, ncuts ? cuts[0] : 0, r, e.msg);
    assert_true(p->done);
    assert_int_equal(p->code, g->code);
    assert_int_equal(b.len, strlen(g->body));
    assert_memory_equal(b.data, g->body, b.len);
    assert_int_equal(p->keep_alive, g->keep_alive);
    assert_string_equal(p->retry_after, g->retry_after);
    assert_int_equal(left, g->left);
    free(p);
}

static void test_h1_good(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(goods) / sizeof(goods[0]); i++) {
        const struct good *g = &goods[i];
        size_t n = strlen(g->raw);
        check_good(g, NULL, 0);
        for (size_t cut = 1; cut < n; cut++)
            check_good(g, &cut, 1);
        size_t *all = malloc(n * sizeof(size_t));
        for (size_t k = 0; k + 1 < n; k++)
            all[k] = k + 1;
        check_good(g, all, n - 1);
        free(all);
    }
}

struct bad {
    const char *raw;
    int rc;
    const char *msg;
    size_t len; /* 0: strlen(raw) */
};

static const struct bad bads[] = {
    {"", -ECONNRESET, "without an answer"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", -ECONNRESET, "middle"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", -ECONNRESET, "middle"},
    {"HTTP/2 200\r\n\r\n", -EBADMSG, "status line"},
    {"HTTP/1.1 20 OK\r\n\r\n", -EBADMSG, "status line"},
    {"HTTP/1.1 200OK\r\n\r\n", -EBADMSG, "status line"},
    {"SSH-2.0-OpenSSH\r\n", -EBADMSG, "status line"},
    {"HTTP/1.1 099 Low\r\n\r\n", -EBADMSG, "status"},
    {"HTTP/1.1 101 Switching\r\n\r\n", -EBADMSG, "101"},
    {"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", -EBADMSG, "header"},
    {"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", -EBADMSG, "header"},
    {"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", -EBADMSG, "header name"},
    {"HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n", -EBADMSG, "folded"},
    {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", -EBADMSG, "Content-Length"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", -EBADMSG, "Content-Length"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n", -EBADMSG,
     "Content-Length"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", -EBADMSG, "conflicting"},
    {"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n", -EPROTONOSUPPORT, "gzip"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", -EPROTONOSUPPORT,
     "Transfer-Encoding"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", -EBADMSG, "chunk size"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5x\r\n", -EBADMSG, "chunk size"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\n", -EBADMSG,
     "overflows"},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", -EBADMSG,
     "longer than its size"},
    {"HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n", -EBADMSG, "bad byte",
     sizeof("HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n") - 1},
    {"HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", -EBADMSG, "bad byte"},
};

static void check_bad(const struct bad *b, size_t n, const size_t *cuts, size_t ncuts)
{
    struct kube_h1 *p = malloc(sizeof(*p));
    kube_h1_init(p, false);
    struct body bd = {0};
    struct err e = {0};
    size_t left;
    int r = feed_split(p, b->raw, n, cuts, ncuts, true, &bd, &left, &e);
    if (r != b->rc)
        fail_msg("\"%s\": %d (%s), want %d", b->raw, r, e.msg, b->rc);
    assert_non_null(strstr(e.msg, b->msg));
    free(p);
}

static void test_h1_bad(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
        const struct bad *b = &bads[i];
        size_t n = b->len ? b->len : strlen(b->raw);
        check_bad(b, n, NULL, 0);
        for (size_t cut = 1; cut < n; cut++)
            check_bad(b, n, &cut, 1);
    }
}

/* The bounds: a line and a head of any size are refused, not buffered. */
static void test_h1_limits(void **state)
{
    (void)state;
    struct kube_h1 *p = malloc(sizeof(*p));
    struct err e = {0};
    size_t used;
    kube_h1_init(p, false);
    const char *st = "HTTP/1.1 200 OK\r\nX: ";
    assert_int_equal(kube_h1_feed(p, st, strlen(st), &used, NULL, NULL, &e), 0);
    char junk[4096];
    memset(junk, 'a', sizeof(junk));
    int r = 0;
    for (int i = 0; i < 8 && r == 0; i++)
        r = kube_h1_feed(p, junk, sizeof(junk), &used, NULL, NULL, &e);
    assert_int_equal(r, -EBADMSG);
    assert_non_null(strstr(e.msg, "line longer"));

    kube_h1_init(p, false);
    assert_int_equal(kube_h1_feed(p, "HTTP/1.1 200 OK\r\n", 17, &used, NULL, NULL, &e), 0);
    const char *h = "X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    r = 0;
    for (int i = 0; i < 2000 && r == 0; i++)
        r = kube_h1_feed(p, h, strlen(h), &used, NULL, NULL, &e);
    assert_int_equal(r, -EBADMSG);
    assert_non_null(strstr(e.msg, "head larger"));

    /* a body callback's nonzero return ends the feed with it */
    kube_h1_init(p, false);
    const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody";
    struct body b = {0};
    assert_int_equal(kube_h1_feed(p, resp, strlen(resp), &used, body_cb, &b, &e), 0);
    assert_true(p->done);
    free(p);
}

/* A chunked watch stream, cut at every byte, fed through the parser into the watch parser. */
static int count_event(enum kube_watch_type t, json_t *obj, void *ud)
{
    (void)obj;
    (void)t;
    (*(int *)ud)++;
    return 0;
}

struct wfeed {
    struct kube_watch_parser *wp;
    struct err *e;
};

static int to_watch(void *ud, const char *p, size_t n)
{
    struct wfeed *w = ud;
    return kube_watch_parser_feed(w->wp, p, n, w->e);
}

static void test_h1_watch_every_split(void **state)
{
    (void)state;
    static const char ev[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n";
    char raw[1024];
    int n = snprintf(raw, sizeof(raw),
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: "
                     "chunked\r\n\r\n%zx\r\n%s\r\n%zx;x=y\r\n%s%s\r\n1\r\n\n\r\n0\r\n\r\n",
                     sizeof(ev) - 1, ev, 2 * (sizeof(ev) - 1), ev, ev);
    assert_true(n > 0 && (size_t)n < sizeof(raw));
    for (size_t cut = 0; cut <= (size_t)n; cut++) {
        for (size_t cut2 = cut; cut2 <= (size_t)n; cut2 += 7) {
            struct kube_h1 *p = malloc(sizeof(*p));
            kube_h1_init(p, false);
            int events = 0;
            struct kube_watch_parser wp;
            kube_watch_parser_init(&wp, 1u << 20, SIZE_MAX, count_event, &events);
            struct err e = {0};
            struct wfeed wf = {&wp, &e};
            size_t pieces[3][2] = {{0, cut}, {cut, cut2}, {cut2, (size_t)n}};
            for (int k = 0; k < 3; k++) {
                size_t off = pieces[k][0];
                while (off < pieces[k][1]) {
                    size_t used;
                    int r =
                        kube_h1_feed(p, raw + off, pieces[k][1] - off, &used, to_watch, &wf, &e);
                    if (r != 0)
                        fail_msg("cut %zu/%zu: %s", cut, cut2, e.msg);
                    off += used;
                    if (p->done)
                        break;
                }
            }
            assert_true(p->done);
            assert_true(p->keep_alive);
            assert_int_equal(kube_watch_parser_finish(&wp, &e), 0);
            assert_int_equal(events, 3);
            kube_watch_parser_free(&wp);
            free(p);
        }
    }
}

static void test_url_split(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        bool tls, ip;
        const char *host, *port, *authority, *path;
    } ok[] = {
        {"https://10.0.0.1:6443", true, true, "10.0.0.1", "6443", "10.0.0.1:6443", ""},
        {"https://api.example.com", true, false, "api.example.com", "443", "api.example.com", ""},
        {"http://localhost:8080/", false, false, "localhost", "8080", "localhost:8080", ""},
        {"HTTPS://[::1]:6443/k8s/clusters/c1/", true, true, "::1", "6443", "[::1]:6443",
         "/k8s/clusters/c1"},
        {"http://[fd00::1]", false, true, "fd00::1", "80", "[fd00::1]", ""},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct kube_url u;
        struct err e = {0};
        if (kube_url_split(ok[i].url, &u, &e) < 0)
            fail_msg("%s: %s", ok[i].url, e.msg);
        assert_int_equal(u.tls, ok[i].tls);
        assert_int_equal(u.ip, ok[i].ip);
        assert_string_equal(u.host, ok[i].host);
        assert_string_equal(u.port, ok[i].port);
        assert_string_equal(u.authority, ok[i].authority);
        assert_string_equal(u.path, ok[i].path);
    }
    static const char *const bad[] = {
        "ftp://x",       "https://",      "https://:6443", "https://h:0",    "https://h:65536",
        "https://h:12a", "https://u:p@h", "https://[::1",  "https://[zz]:1", "https://h/p?q=1",
        "https://h#f",   "https://h o",   "https://h/a b", "10.0.0.1:6443",  "https://[::1]x",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct kube_url u;
        struct err e = {0};
        if (kube_url_split(bad[i], &u, &e) != -EINVAL)
            fail_msg("%s: accepted", bad[i]);
        assert_non_null(strstr(e.msg, "URL"));
    }
    /* user info never reaches an error message, whichever check refuses the URL */
    static const char *const secret[] = {"https://admin:s3cr3t@h:6443", "https://admin:s3cr3t@h?x",
                                         "ftp://admin:s3cr3t@h", "https://admin:s3cr3t@[zz]:1"};
    for (size_t i = 0; i < sizeof(secret) / sizeof(secret[0]); i++) {
        struct kube_url u;
        struct err e = {0};
        assert_int_equal(kube_url_split(secret[i], &u, &e), -EINVAL);
        if (strstr(e.msg, "s3cr3t") || strstr(e.msg, "admin"))
            fail_msg("%s: the error quotes the user info: %s", secret[i], e.msg);
        assert_non_null(strstr(e.msg, "<user info removed>@"));
    }
    char buf[64];
    assert_string_equal(kube_url_shown("https://h:6443/a@b", buf, sizeof(buf)),
                        "https://h:6443/a@b");
    assert_string_equal(kube_url_shown("u:p@h:6443", buf, sizeof(buf)),
                        "<user info removed>@h:6443");
}

static void test_no_proxy(void **state)
{
    (void)state;
    static const struct {
        const char *np, *host;
        bool match;
    } t[] = {
        {"*", "anything", true},
        {"example.com", "example.com", true},
        {"example.com", "api.example.com", true},
        {".example.com", "api.example.com", true},
        {".example.com", "example.com", true},
        {"example.com", "badexample.com", false},
        {"example.com:6443", "api.example.com", true},
        {"a.b, c.d ,10.0.0.0/8", "10.1.2.3", true},
        {"10.0.0.0/8", "11.1.2.3", false},
        {"10.0.0.1", "10.0.0.1", true},
        {"10.0.0.1", "10.0.0.12", false},
        {"192.168.1.0/24", "192.168.1.255", true},
        {"192.168.1.0/24", "192.168.2.1", false},
        {"fd00::/8", "fd12::1", true},
        {"::1", "::1", true},
        {"10.0.0.0/33", "10.0.0.1", false},
        {"", "example.com", false},
        {"EXAMPLE.com", "Api.example.COM", true},
        {"localhost", "127.0.0.1", false},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (kube_no_proxy_match(t[i].np, t[i].host) != t[i].match)
            fail_msg("NO_PROXY \"%s\" for %s: want %d", t[i].np, t[i].host, t[i].match);
    assert_false(kube_no_proxy_match(NULL, "x"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h1_good),   cmocka_unit_test(test_h1_bad),
        cmocka_unit_test(test_h1_limits), cmocka_unit_test(test_h1_watch_every_split),
        cmocka_unit_test(test_url_split), cmocka_unit_test(test_no_proxy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
