/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "yamlcfg.h"

static json_t *parse(const char *s, struct err *e)
{
    json_t *v = NULL;
    if (yaml_parse_one(s, strlen(s), "t.yaml", &v, e) < 0)
        return NULL;
    return v;
}

static void test_scalars(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_json_ json_t *v = parse("a: 1\nb: 0x233010de\nc: \"9.0\"\nd: 9.0\ne: true\n"
                                     "f: ~\ng: hello world\nh: '12'\ni: False\n",
                                     &e);
    assert_non_null(v);
    assert_int_equal(json_integer_value(json_object_get(v, "a")), 1);
    assert_int_equal(json_integer_value(json_object_get(v, "b")), 0x233010de);
    assert_string_equal(json_string_value(json_object_get(v, "c")), "9.0");
    assert_true(json_is_real(json_object_get(v, "d")));
    assert_true(json_is_true(json_object_get(v, "e")));
    assert_true(json_is_null(json_object_get(v, "f")));
    assert_string_equal(json_string_value(json_object_get(v, "g")), "hello world");
    assert_string_equal(json_string_value(json_object_get(v, "h")), "12");
    assert_true(json_is_false(json_object_get(v, "i")));
}

static void test_structures_and_anchors(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_json_ json_t *v =
        parse("base: &b {x: 1, y: [1, 2]}\nuse: *b\nmerged:\n  <<: *b\n  x: 5\n", &e);
    assert_non_null(v);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(v, "use"), "x")), 1);
    json_t *m = json_object_get(v, "merged");
    assert_int_equal(json_integer_value(json_object_get(m, "x")), 5);
    assert_int_equal(json_array_size(json_object_get(m, "y")), 2);
}

static void test_errors(void **state)
{
    (void)state;
    struct err e = {0};
    assert_null(parse("a: [1, 2\n", &e));
    assert_non_null(strstr(err_msg(&e), "t.yaml:"));
    assert_null(parse("a: 1\na: 2\n", &e));
    assert_non_null(strstr(err_msg(&e), "duplicate"));
    assert_null(parse("a: *nope\n", &e));
    assert_non_null(strstr(err_msg(&e), "alias"));
    /* An alias cannot refer to a node still being built. */
    assert_null(parse("a: &x [1, *x]\n", &e));
    json_t *v = NULL;
    assert_int_equal(yaml_parse_one("a: 1\n---\nb: 2\n", 14, "t.yaml", &v, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "one YAML document"));
    /* a bad byte on line 3 is reported on line 3, not at 1:1 */
    assert_null(parse("a: 1\nb: 2\nc: \xff\xfe\n", &e));
    assert_non_null(strstr(err_msg(&e), "t.yaml:3:4:"));
    assert_non_null(strstr(err_msg(&e), "UTF-8"));
    assert_null(parse("a: 1\nb: x\x01y\n", &e));
    assert_non_null(strstr(err_msg(&e), "t.yaml:2:5:"));
    /* deep nesting is bounded */
    char deep[400];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 200);
    assert_int_equal(yaml_parse_one(deep, sizeof(deep), "t.yaml", &v, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "nesting"));
}

/* n levels, each a list of two aliases of the level below: 2^n leaves once expanded. */
static char *alias_ladder(int levels)
{
    struct sbuf b;
    sbuf_init(&b, 1 << 20);
    sbuf_adds(&b, "l0: &l0 [x, x]\n");
    for (int i = 1; i < levels; i++)
        sbuf_addf(&b, "l%d: &l%d [*l%d, *l%d]\n", i, i, i - 1, i - 1);
    assert_int_equal(sbuf_check(&b), 0);
    return sbuf_steal(&b);
}

static void test_alias_expansion_bounded(void **state)
{
    (void)state;
    struct err e = {0};
    /* "billion laughs": 40 lines that a json_dumps or json_deep_copy would expand to 2^40 */
    _cleanup_free_ char *bomb = alias_ladder(40);
    json_t *v = parse(bomb, &e);
    if (v)
        json_decref(v);
    assert_null(v);
    assert_non_null(strstr(err_msg(&e), "t.yaml:"));
    assert_non_null(strstr(err_msg(&e), "aliases expand to more than"));
    /* a modest use of aliases still parses */
    _cleanup_free_ char *ok = alias_ladder(12);
    _cleanup_json_ json_t *w = parse(ok, &e);
    assert_non_null(w);
    assert_int_equal(json_array_size(json_object_get(w, "l11")), 2);
    /* the budget is per document: each of many documents may use it */
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 1 << 20);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sbuf_printf(&b, "---\n%s", ok), 0);
    json_t *all = NULL;
    assert_int_equal(yaml_parse_all(b.data, b.len, "m.yaml", &all, &e), 0);
    assert_int_equal(json_array_size(all), 3);
    json_decref(all);
}

static void test_multi_doc(void **state)
{
    (void)state;
    struct err e = {0};
    json_t *v = NULL;
    const char *s = "a: 1\n---\nb: 2\n---\n";
    assert_int_equal(yaml_parse_all(s, strlen(s), "m.yaml", &v, &e), 0);
    assert_int_equal(json_array_size(v), 3);
    json_decref(v);
    assert_int_equal(yaml_parse_one("", 0, "empty", &v, &e), 0);
    assert_true(json_is_object(v));
    json_decref(v);
}

static void test_accessors(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_json_ json_t *v = parse("name: x\ncount: \"8\"\nbad: [1]\nflag: \"true\"\n", &e);
    const char *s = NULL;
    assert_int_equal(cfg_string(v, "name", "f.yaml: gpus[0]", true, &s, &e), 1);
    assert_string_equal(s, "x");
    assert_int_equal(cfg_string(v, "missing", "f.yaml: gpus[0]", false, &s, &e), 0);
    assert_int_equal(cfg_string(v, "missing", "f.yaml: gpus[0]", true, &s, &e), -EINVAL);
    assert_string_equal(err_msg(&e), "f.yaml: gpus[0].missing: required field is missing");
    int64_t n = 0;
    assert_int_equal(cfg_int64(v, "count", "c", true, 1, 16, &n, &e), 1);
    assert_int_equal(n, 8);
    assert_int_equal(cfg_int64(v, "count", "c", true, 1, 4, &n, &e), -ERANGE);
    assert_int_equal(cfg_int64(v, "bad", "c", true, 0, 4, &n, &e), -EINVAL);
    assert_string_equal(err_msg(&e), "c.bad: expected an integer, got a list");
    bool b = false;
    assert_int_equal(cfg_bool(v, "flag", "c", true, &b, &e), 1);
    assert_true(b);
    static const char *const known[] = {"name", "count", "flag", NULL};
    assert_int_equal(cfg_known_keys(v, "c", known, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "unknown field \"bad\""));
}

/* yaml_emit: a value written as YAML reads back as the same value; strings a reader would
 * type are quoted; the output's limit is an error, never a cut document. */
static void test_emit(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_json_ json_t *v = json_loads(
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\",\"labels\":{}},"
        "\"data\":{\"yes\":\"on\",\"n\":\"NULL\",\"t\":\"TrUe\",\"num\":\"1.5\",\"int\":\"012\","
        "\"neg\":\"-3\",\"ver\":\"550.127.05\",\"empty\":\"\",\"tilde\":\"~\",\"inf\":\".inf\","
        "\"colon\":\"a: b\",\"dash\":\"- x\",\"hash\":\"#c\",\"lead\":\" sp\",\"quote\":\"'\\\"\","
        "\"multi\":\"line 1\\nline 2\\n\",\"trail\":\"x \\n y\",\"utf8\":\"\u00e9\u4e2d\","
        "\"ctl\":\"a\\u0001b\",\"star\":\"*ref\",\"amp\":\"&a\",\"at\":\"@x\",\"pct\":\"%x\"},"
        "\"spec\":{\"i\":-42,\"big\":9007199254740993,\"r\":2.5,\"whole\":3.0,\"b\":false,"
        "\"z\":null,\"list\":[1,\"2\",[],{},[{\"k\":[true]}]],\"deep\":{\"a\":{\"b\":{}}}}}",
        0, NULL);
    assert_non_null(v);
    struct sbuf out _cleanup_sbuf_;
    sbuf_init(&out, 1 << 20);
    assert_int_equal(yaml_emit(v, &out, &e), 0);
    _cleanup_json_ json_t *back = NULL;
    assert_int_equal(yaml_parse_one(out.data, out.len, "emitted", &back, &e), 0);
    if (!json_equal(v, back)) {
        char *a = json_dumps(back, JSON_SORT_KEYS);
        fail_msg("read back differs:\n%s\nfrom:\n%s", a, out.data);
    }
    /* block style, the multi-line string a literal block, typed-looking strings quoted */
    assert_non_null(strstr(out.data, "kind: ConfigMap\n"));
    assert_non_null(strstr(out.data, "  multi: |\n    line 1\n    line 2\n"));
    assert_non_null(strstr(out.data, "'yes': 'on'\n"));
    assert_non_null(strstr(out.data, "ver: '550.127.05'\n"));
    assert_non_null(strstr(out.data, "  i: -42\n"));
    assert_non_null(strstr(out.data, "  whole: 3.0\n"));

    /* the limit: an error naming it */
    struct sbuf small _cleanup_sbuf_;
    sbuf_init(&small, 64);
    assert_int_equal(yaml_emit(v, &small, &e), -E2BIG);
    assert_non_null(strstr(err_msg(&e), "limit of 64 bytes"));

    /* nesting past YAML_MAX_DEPTH */
    _cleanup_json_ json_t *deep = json_array();
    json_t *cur = deep;
    for (int i = 0; i < YAML_MAX_DEPTH + 2; i++) {
        json_t *n = json_array();
        json_array_append_new(cur, n);
        cur = n;
    }
    struct sbuf d _cleanup_sbuf_;
    sbuf_init(&d, 1 << 20);
    assert_int_equal(yaml_emit(deep, &d, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "nested deeper"));

    static const struct {
        const char *s;
        bool typed;
    } cases[] = {{"", true},
                 {"~", true},
                 {"Null", true},
                 {"tRUE", true},
                 {"off", true},
                 {"Y", true},
                 {"12", true},
                 {"-1", true},
                 {".5", true},
                 {"-.inf", true},
                 {".NaN", true},
                 {"0x1f", true},
                 {"1:20", true},
                 {"2026-01-01", true},
                 {"abc", false},
                 {"yes please", false},
                 {"nvidia.com/gpu", false},
                 {"v1", false},
                 {"-", false},
                 {".x", false}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (yaml_plain_is_typed(cases[i].s, strlen(cases[i].s)) != cases[i].typed)
            fail_msg("yaml_plain_is_typed(\"%s\") != %d", cases[i].s, cases[i].typed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars),   cmocka_unit_test(test_structures_and_anchors),
        cmocka_unit_test(test_errors),    cmocka_unit_test(test_multi_doc),
        cmocka_unit_test(test_accessors), cmocka_unit_test(test_alias_expansion_bounded),
        cmocka_unit_test(test_emit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
