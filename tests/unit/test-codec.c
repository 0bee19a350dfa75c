/* SPDX-License-Identifier: Apache-2.0 */
/* util's codecs: hex digits, base64 both ways, URL percent-encoding both ways. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util.h"

static void test_hex(void **state)
{
    (void)state;
    assert_int_equal(hex_digit('0'), 0);
    assert_int_equal(hex_digit('a'), 10);
    assert_int_equal(hex_digit('F'), 15);
    assert_int_equal(hex_digit('g'), -1);
    assert_int_equal(hex_digit('\0'), -1);
    uint64_t v = 7;
    assert_int_equal(hex_parse("00000000", 8, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(hex_parse("1f", 2, &v), 0);
    assert_int_equal(v, 0x1f);
    assert_int_equal(hex_parse("ffffffffffffffff", 16, &v), 0);
    assert_true(v == UINT64_MAX);
    v = 7;
    assert_int_equal(hex_parse("1g", 2, &v), -EINVAL);
    assert_int_equal(hex_parse("", 0, &v), -EINVAL);
    assert_int_equal(hex_parse("11111111111111111", 17, &v), -EINVAL);
    assert_int_equal(v, 7); /* untouched on failure */
}

static void test_base64(void **state)
{
    (void)state;
    static const struct {
        const char *plain, *enc;
    } cases[] = {{"", ""},
                 {"f", "Zg=="},
                 {"fo", "Zm8="},
                 {"foo", "Zm9v"},
                 {"foob", "Zm9vYg=="},
                 {"fooba", "Zm9vYmE="},
                 {"hello", "aGVsbG8="}};
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char *e = base64_encode(cases[i].plain, strlen(cases[i].plain));
        assert_string_equal(e, cases[i].enc);
        free(e);
        char *d = NULL;
        size_t n = 99;
        assert_int_equal(base64_decode(cases[i].enc, strlen(cases[i].enc), &d, &n), 0);
        assert_int_equal(n, strlen(cases[i].plain));
        assert_string_equal(d, cases[i].plain);
        free(d);
    }
    const unsigned char bin[] = {0, 0xff, 0xfe, 0x80, 0};
    char *e = base64_encode(bin, sizeof(bin));
    char *d = NULL;
    size_t n = 0;
    assert_int_equal(base64_decode(e, strlen(e), &d, &n), 0);
    assert_int_equal(n, sizeof(bin));
    assert_memory_equal(d, bin, sizeof(bin));
    free(d);
    free(e);
    /* lenient where kubeconfigs are: no padding, line breaks, URL-safe alphabet */
    assert_int_equal(base64_decode("aGVs\nbG8", 8, &d, &n), 0);
    assert_string_equal(d, "hello");
    free(d);
    assert_int_equal(base64_decode("-_8", 3, &d, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal((unsigned char)d[0], 0xfb);
    free(d);
    d = NULL;
    assert_int_equal(base64_decode("aGV*bG8=", 8, &d, &n), -EINVAL);
    assert_int_equal(base64_decode("a", 1, &d, &n), -EINVAL);
    assert_int_equal(base64_decode("aGVsbG8=x", 9, &d, &n), -EINVAL);
    assert_null(d);
}

static void test_url(void **state)
{
    (void)state;
    char *s = url_decode("a%20b+c%2Fd", 11, true);
    assert_string_equal(s, "a b c/d");
    free(s);
    s = url_decode("a+b", 3, false);
    assert_string_equal(s, "a+b");
    free(s);
    /* malformed escapes stay as they are; only n bytes are read */
    s = url_decode("%zz%4", 5, true);
    assert_string_equal(s, "%zz%4");
    free(s);
    s = url_decode("%41%42", 3, true);
    assert_string_equal(s, "A");
    free(s);
    s = url_decode("%41", 2, true);
    assert_string_equal(s, "%4");
    free(s);
    struct sbuf b;
    sbuf_init(&b, 64);
    assert_int_equal(url_encode(&b, "app=gpu,tier in (a b)/~x"), 0);
    assert_string_equal(b.data, "app%3Dgpu%2Ctier%20in%20%28a%20b%29%2F~x");
    char *back = url_decode(b.data, b.len, false);
    assert_string_equal(back, "app=gpu,tier in (a b)/~x");
    free(back);
    sbuf_free(&b);
    sbuf_init(&b, 4);
    assert_int_equal(url_encode(&b, "a b"), -ENOBUFS); /* truncation is an error */
    sbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_url),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
