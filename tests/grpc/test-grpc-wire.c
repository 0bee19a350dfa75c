/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the gRPC wire code: message framing, header values, protobuf helpers, and the
 * server connection core fed with raw HTTP/2 bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "grpc-internal.h"

struct collected {
    unsigned n;
    size_t lens[16];
    uint8_t first[16];
    bool refuse_after_one;
};

static int collect(void *ud, uint8_t *msg, size_t len)
{
    struct collected *c = ud;
    if (c->refuse_after_one && c->n >= 1) {
        free(msg);
        return -1;
    }
    assert_non_null(msg);
    if (c->n < 16) {
        c->lens[c->n] = len;
        c->first[c->n] = len ? msg[0] : 0;
    }
    c->n++;
    free(msg);
    return 0;
}

static size_t frame(uint8_t *out, uint8_t flag, const char *body, size_t len)
{
    grpc_frame_prefix(out, (uint32_t)len);
    out[0] = flag;
    memcpy(out + 5, body, len);
    return 5 + len;
}

static void test_deframe_whole_and_split(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t n = frame(buf, 0, "hello", 5);
    n += frame(buf + n, 0, "", 0); /* zero-length message */
    n += frame(buf + n, 0, "xy", 2);
    /* Every split point, including one byte at a time. */
    for (size_t step = 1; step <= n; step++) {
        struct grpc_deframer d;
        struct collected c = {0};
        struct err e = {0};
        grpc_deframer_init(&d, 1024);
        for (size_t off = 0; off < n; off += step) {
            size_t k = n - off < step ? n - off : step;
            assert_int_equal(grpc_deframer_feed(&d, buf + off, k, collect, &c, &e), 0);
        }
        assert_int_equal(c.n, 3);
        assert_int_equal(c.lens[0], 5);
        assert_int_equal(c.first[0], 'h');
        assert_int_equal(c.lens[1], 0);
        assert_int_equal(c.lens[2], 2);
        assert_true(grpc_deframer_idle(&d));
        grpc_deframer_free(&d);
    }
}

static void test_deframe_partial(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t n = frame(buf, 0, "hello", 5);
    struct grpc_deframer d;
    struct collected c = {0};
    struct err e = {0};
    grpc_deframer_init(&d, 1024);
    assert_int_equal(grpc_deframer_feed(&d, buf, 3, collect, &c, &e), 0);
    assert_false(grpc_deframer_idle(&d)); /* inside the prefix */
    assert_int_equal(grpc_deframer_feed(&d, buf + 3, n - 4, collect, &c, &e), 0);
    assert_false(grpc_deframer_idle(&d)); /* inside the body */
    assert_int_equal(c.n, 0);
    grpc_deframer_free(&d); /* frees the partial body */
}

static void test_deframe_oversized(void **state)
{
    (void)state;
    /* The prefix alone claims 4 GiB - 1: refused before anything is buffered. */
    uint8_t buf[5] = {0, 0xff, 0xff, 0xff, 0xff};
    struct grpc_deframer d;
    struct collected c = {0};
    struct err e = {0};
    grpc_deframer_init(&d, 4u << 20);
    assert_int_equal(grpc_deframer_feed(&d, buf, 5, collect, &c, &e),
                     GRPC_STATUS_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(err_msg(&e), "4294967295 bytes is larger than the limit of 4194304"));
    /* Failed stays failed. */
    assert_int_equal(grpc_deframer_feed(&d, buf, 1, collect, &c, &e),
                     GRPC_STATUS_RESOURCE_EXHAUSTED);
    grpc_deframer_free(&d);

    /* Exactly at the limit is fine, one above is not. */
    uint8_t msg[5 + 8];
    size_t n = frame(msg, 0, "12345678", 8);
    grpc_deframer_init(&d, 8);
    assert_int_equal(grpc_deframer_feed(&d, msg, n, collect, &c, &e), 0);
    assert_int_equal(c.n, 1);
    grpc_deframer_free(&d);
    grpc_deframer_init(&d, 7);
    assert_int_equal(grpc_deframer_feed(&d, msg, n, collect, &c, &e),
                     GRPC_STATUS_RESOURCE_EXHAUSTED);
    grpc_deframer_free(&d);
}

static void test_deframe_flags(void **state)
{
    (void)state;
    uint8_t buf[16];
    struct collected c = {0};
    struct err e = {0};
    struct grpc_deframer d;
    size_t n = frame(buf, 1, "zz", 2);
    grpc_deframer_init(&d, 1024);
    assert_int_equal(grpc_deframer_feed(&d, buf, n, collect, &c, &e), GRPC_STATUS_UNIMPLEMENTED);
    assert_non_null(strstr(err_msg(&e), "compressed"));
    grpc_deframer_free(&d);
    n = frame(buf, 0x80, "zz", 2);
    grpc_deframer_init(&d, 1024);
    assert_int_equal(grpc_deframer_feed(&d, buf, n, collect, &c, &e), GRPC_STATUS_INTERNAL);
    grpc_deframer_free(&d);
    assert_int_equal(c.n, 0);

    /* A callback that refuses the second message fails the deframer with INTERNAL. */
    uint8_t two[32];
    n = frame(two, 0, "a", 1);
    n += frame(two + n, 0, "b", 1);
    struct collected r = {.refuse_after_one = true};
    grpc_deframer_init(&d, 1024);
    assert_int_equal(grpc_deframer_feed(&d, two, n, collect, &r, &e), GRPC_STATUS_INTERNAL);
    assert_int_equal(r.n, 1);
    grpc_deframer_free(&d);
}

static void test_percent(void **state)
{
    (void)state;
    char out[128], back[128];
    const char *in = "100% done\n\xc3\xa9t\xc3\xa9 ~ok";
    grpc_percent_encode(in, strlen(in), out, sizeof(out));
    assert_string_equal(out, "100%25 done%0A%C3%A9t%C3%A9 ~ok");
    grpc_percent_decode(out, strlen(out), back, sizeof(back));
    assert_string_equal(back, in);
    /* Malformed escapes are kept literally; NUL decodes to '?'. */
    grpc_percent_decode("50%z %4 %", 9, back, sizeof(back));
    assert_string_equal(back, "50%z %4 %");
    grpc_percent_decode("a%00b", 5, back, sizeof(back));
    assert_string_equal(back, "a?b");
    /* Truncation never splits an escape and always terminates. */
    char small[6];
    assert_int_equal(grpc_percent_encode("ab\ncd", 5, small, sizeof(small)), 5);
    assert_string_equal(small, "ab%0A");
    char tiny[5];
    assert_int_equal(grpc_percent_encode("ab\ncd", 5, tiny, sizeof(tiny)), 2);
    assert_string_equal(tiny, "ab");
    char one[1];
    assert_int_equal(grpc_percent_decode("abc", 3, one, sizeof(one)), 0);
    assert_string_equal(one, "");
}

static void test_timeout(void **state)
{
    (void)state;
    char buf[16];
    uint64_t ms = 0;
    grpc_timeout_format(250, buf);
    assert_string_equal(buf, "250m");
    grpc_timeout_format(100000000ull, buf); /* 9 digits of ms: seconds */
    assert_string_equal(buf, "100000S");
    assert_int_equal(grpc_timeout_parse(buf, strlen(buf), &ms), 0);
    assert_int_equal(ms, 100000000ull);
    assert_int_equal(grpc_timeout_parse("1H", 2, &ms), 0);
    assert_int_equal(ms, 3600000);
    assert_int_equal(grpc_timeout_parse("1500u", 5, &ms), 0);
    assert_int_equal(ms, 2); /* rounded up */
    assert_int_equal(grpc_timeout_parse("1n", 2, &ms), 0);
    assert_int_equal(ms, 1);
    assert_int_equal(grpc_timeout_parse("99999999H", 9, &ms), 0);
    assert_int_equal(ms, 100ull * 24 * 3600 * 1000);                      /* capped */
    assert_int_equal(grpc_timeout_parse("123456789m", 10, &ms), -EINVAL); /* 9 digits */
    assert_int_equal(grpc_timeout_parse("m", 1, &ms), -EINVAL);
    assert_int_equal(grpc_timeout_parse("10x", 3, &ms), -EINVAL);
    assert_int_equal(grpc_timeout_parse("-1S", 3, &ms), -EINVAL);
}

static void test_headers(void **state)
{
    (void)state;
    assert_true(grpc_content_type_ok("application/grpc", 16));
    assert_true(grpc_content_type_ok("application/grpc+proto", 22));
    assert_true(grpc_content_type_ok("application/grpc; charset=x", 27));
    assert_false(grpc_content_type_ok("application/grpcx", 17));
    assert_false(grpc_content_type_ok("application/json", 16));
    assert_false(grpc_content_type_ok("application/grp", 15));
    int v = -1;
    assert_int_equal(grpc_status_parse("14", 2, &v), 0);
    assert_int_equal(v, 14);
    assert_int_equal(grpc_status_parse("", 0, &v), -EINVAL);
    assert_int_equal(grpc_status_parse("1a", 2, &v), -EINVAL);
    assert_int_equal(grpc_status_parse("99999999999", 11, &v), -EINVAL);
    assert_int_equal(grpc_status_from_http(404), GRPC_STATUS_UNIMPLEMENTED);
    assert_int_equal(grpc_status_from_http(503), GRPC_STATUS_UNAVAILABLE);
    assert_int_equal(grpc_status_from_http(500), GRPC_STATUS_UNKNOWN);
    assert_int_equal(grpc_status_from_h2_error(0x8), GRPC_STATUS_CANCELLED);
    assert_int_equal(grpc_status_from_h2_error(0x7), GRPC_STATUS_UNAVAILABLE);
    /* gRPC's HTTP/2 error mapping, every code it lists */
    static const struct {
        uint32_t h2;
        int code;
    } map[] = {{0x0, GRPC_STATUS_INTERNAL},           {0x1, GRPC_STATUS_INTERNAL},
               {0x2, GRPC_STATUS_INTERNAL},           {0x3, GRPC_STATUS_INTERNAL},
               {0x4, GRPC_STATUS_INTERNAL},           {0x6, GRPC_STATUS_INTERNAL},
               {0x7, GRPC_STATUS_UNAVAILABLE},        {0x8, GRPC_STATUS_CANCELLED},
               {0x9, GRPC_STATUS_INTERNAL},           {0xa, GRPC_STATUS_INTERNAL},
               {0xb, GRPC_STATUS_RESOURCE_EXHAUSTED}, {0xc, GRPC_STATUS_PERMISSION_DENIED}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        assert_int_equal(grpc_status_from_h2_error(map[i].h2), map[i].code);
    assert_string_equal(grpc_status_name(4), "DEADLINE_EXCEEDED");
    assert_string_equal(grpc_status_name(16), "UNAUTHENTICATED");
    assert_string_equal(grpc_status_name(17), "UNKNOWN");
    assert_string_equal(grpc_status_name(-1), "UNKNOWN");
}

static void test_pb(void **state)
{
    (void)state;
    V1beta1__Device dev = V1BETA1__DEVICE__INIT;
    dev.id = "GPU-x";
    dev.health = "Healthy";
    uint8_t *buf = NULL;
    size_t len = 0;
    struct err e = {0};
    assert_int_equal(grpc_pb_pack(&dev.base, 0, &buf, &len, &e), 0);
    assert_int_equal(grpc_pb_pack(&dev.base, 4, &(uint8_t *){NULL}, &(size_t){0}, &e), -EMSGSIZE);
    ProtobufCMessage *m = NULL;
    assert_int_equal(grpc_pb_unpack(&v1beta1__device__descriptor, buf, len, 0, &m, &e), 0);
    assert_string_equal(((V1beta1__Device *)m)->id, "GPU-x");
    protobuf_c_message_free_unpacked(m, NULL);
    assert_int_equal(grpc_pb_unpack(&v1beta1__device__descriptor, buf, len, len - 1, &m, &e),
                     -EMSGSIZE);
    assert_int_equal(
        grpc_pb_unpack(&v1beta1__device__descriptor, (const uint8_t *)"\xff\xff", 2, 0, &m, &e),
        -EBADMSG);
    assert_non_null(strstr(err_msg(&e), "v1beta1.Device"));
    free(buf);
}

/* ---- the server connection core, fed raw bytes ---- */

static unsigned echo_calls;

static void echo(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)ud;
    echo_calls++;
    grpc_call_reply(call, req, len);
}

static void test_sconn_garbage(void **state)
{
    (void)state;
    struct grpc_server *s = NULL;
    struct grpc_sconn *c = NULL;
    struct err e = {0};
    assert_int_equal(grpc_server_new(NULL, &s, &e), 0);
    assert_int_equal(grpc_server_add_unary(s, "/t.S/Echo", echo, NULL, &e), 0);
    assert_int_equal(grpc_server_add_unary(s, "/t.S/Echo", echo, NULL, &e), -EEXIST);
    assert_int_equal(grpc_server_add_unary(s, "nopath", echo, NULL, &e), -EINVAL);
    assert_int_equal(grpc_sconn_new(s, -1, &c, &e), 0);
    assert_true(grpc_sconn_drain(c) > 0); /* our SETTINGS */
    assert_int_equal(grpc_sconn_feed(c, (const uint8_t *)"GET / HTTP/1.1\r\n\r\n", 18), -EPROTO);
    grpc_sconn_free(c);
    grpc_server_free(s);
}

static void test_sconn_request(void **state)
{
    (void)state;
    /* A prior-knowledge HTTP/2 request for /t.S/Echo with a 3-byte message, built by hand:
     * preface, empty SETTINGS, HEADERS (literal, not indexed), DATA with END_STREAM. */
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    uint8_t buf[512];
    size_t n = 0;
    memcpy(buf, preface, 24);
    n = 24;
    const uint8_t settings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    memcpy(buf + n, settings, 9);
    n += 9;
    uint8_t hb[256];
    size_t h = 0;
#define LIT(name, value)                      \
    do {                                      \
        hb[h++] = 0x00;                       \
        hb[h++] = (uint8_t)strlen(name);      \
        memcpy(hb + h, name, strlen(name));   \
        h += strlen(name);                    \
        hb[h++] = (uint8_t)strlen(value);     \
        memcpy(hb + h, value, strlen(value)); \
        h += strlen(value);                   \
    } while (0)
    LIT(":method", "POST");
    LIT(":scheme", "http");
    LIT(":path", "/t.S/Echo");
    LIT(":authority", "localhost");
    LIT("content-type", "application/grpc");
    LIT("te", "trailers");
    const uint8_t hh[] = {0, 0, (uint8_t)h, 1, 0x4 /* END_HEADERS */, 0, 0, 0, 1};
    memcpy(buf + n, hh, 9);
    n += 9;
    memcpy(buf + n, hb, h);
    n += h;
    const uint8_t dh[] = {0, 0, 8, 0, 0x1 /* END_STREAM */, 0, 0, 0, 1};
    memcpy(buf + n, dh, 9);
    n += 9;
    n += frame(buf + n, 0, "abc", 3);

    struct grpc_server *s = NULL;
    struct grpc_sconn *c = NULL;
    struct err e = {0};
    assert_int_equal(grpc_server_new(NULL, &s, &e), 0);
    assert_int_equal(grpc_server_add_unary(s, "/t.S/Echo", echo, NULL, &e), 0);
    assert_int_equal(grpc_sconn_new(s, -1, &c, &e), 0);
    echo_calls = 0;
    assert_int_equal(grpc_sconn_feed(c, buf, n), 0);
    assert_int_equal(echo_calls, 1);
    ssize_t out = grpc_sconn_drain(c);
    assert_true(out > 8 + 5 + 3); /* headers, the echoed message, trailers */
    grpc_sconn_free(c);

    /* The same request cut at every byte boundary, and with a truncated tail. */
    for (size_t cut = 1; cut < n; cut += 7) {
        assert_int_equal(grpc_sconn_new(s, -1, &c, &e), 0);
        echo_calls = 0;
        assert_int_equal(grpc_sconn_feed(c, buf, cut), 0);
        grpc_sconn_drain(c);
        assert_int_equal(grpc_sconn_feed(c, buf + cut, n - cut), 0);
        assert_int_equal(echo_calls, 1);
        grpc_sconn_free(c);
        assert_int_equal(grpc_sconn_new(s, -1, &c, &e), 0);
        grpc_sconn_feed(c, buf, cut);
        grpc_sconn_drain(c);
        grpc_sconn_free(c); /* a half-received request is freed cleanly */
    }
    grpc_server_free(s);
}

static size_t h2_frame_header(uint8_t *out, size_t len, uint8_t type, uint8_t flags, uint32_t id)
{
    const uint8_t hd[9] = {
        (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len,       type,       flags,
        (uint8_t)(id >> 24),  (uint8_t)(id >> 16), (uint8_t)(id >> 8), (uint8_t)id};
    memcpy(out, hd, 9);
    return 9;
}

static size_t header_literal(uint8_t *out, const char *name, const char *value)
{
    size_t h = 0;
    out[h++] = 0x00; /* literal, not indexed: the same block is valid on every stream */
    out[h++] = (uint8_t)strlen(name);
    memcpy(out + h, name, strlen(name));
    h += strlen(name);
    out[h++] = (uint8_t)strlen(value);
    memcpy(out + h, value, strlen(value));
    return h + strlen(value);
}

/* Many streams each announcing a message of max_recv_msg bytes and sending only its start: the
 * connection holds at most GRPC_CONN_RECV_FACTOR x max_recv_msg; the rest are refused. */
static void test_sconn_buffer_bound(void **state)
{
    (void)state;
    uint8_t hb[256];
    size_t h = 0;
    h += header_literal(hb + h, ":method", "POST");
    h += header_literal(hb + h, ":scheme", "http");
    h += header_literal(hb + h, ":path", "/t.S/Echo");
    h += header_literal(hb + h, ":authority", "localhost");
    h += header_literal(hb + h, "content-type", "application/grpc");
    static uint8_t buf[8192];
    size_t n = 0;
    memcpy(buf, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    n = 24;
    n += h2_frame_header(buf + n, 0, 0x4 /* SETTINGS */, 0, 0);
    const size_t max_msg = 1000;
    for (uint32_t id = 1; id <= 19; id += 2) {
        n += h2_frame_header(buf + n, h, 0x1 /* HEADERS */, 0x4 /* END_HEADERS */, id);
        memcpy(buf + n, hb, h);
        n += h;
        n += h2_frame_header(buf + n, 5 + 10, 0x0 /* DATA */, 0, id);
        const uint8_t prefix[5] = {0, 0, 0, (uint8_t)(max_msg >> 8), (uint8_t)max_msg};
        memcpy(buf + n, prefix, 5);
        memset(buf + n + 5, 'x', 10);
        n += 15;
    }
    assert_true(n < sizeof(buf));

    struct grpc_options o = {.max_recv_msg = max_msg};
    struct grpc_server *s = NULL;
    struct grpc_sconn *c = NULL;
    struct err e = {0};
    assert_int_equal(grpc_server_new(&o, &s, &e), 0);
    assert_int_equal(grpc_server_add_unary(s, "/t.S/Echo", echo, NULL, &e), 0);
    assert_int_equal(grpc_sconn_new(s, -1, &c, &e), 0);
    echo_calls = 0;
    assert_int_equal(grpc_sconn_feed(c, buf, n), 0);
    size_t held = grpc_sconn_buffered(c);
    assert_true(held > 0);
    assert_true(held <= GRPC_CONN_RECV_FACTOR * max_msg);
    assert_int_equal(echo_calls, 0);
    assert_true(grpc_sconn_drain(c) > 0); /* the refusals */
    grpc_sconn_free(c);
    grpc_server_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deframe_whole_and_split),
        cmocka_unit_test(test_deframe_partial),
        cmocka_unit_test(test_deframe_oversized),
        cmocka_unit_test(test_deframe_flags),
        cmocka_unit_test(test_percent),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_headers),
        cmocka_unit_test(test_pb),
        cmocka_unit_test(test_sconn_garbage),
        cmocka_unit_test(test_sconn_request),
        cmocka_unit_test(test_sconn_buffer_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
