/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's CEL subset for DRA device selectors (ks-cel.h), table-driven: selectors true and
 * false against a GPU and a MIG device, attributes of every kind, capacities compared as
 * quantities, versions, the operators' semantics (commutative && and ||, heterogeneous
 * equality, cross-type numbers, overflow), and the API server's texts for what CEL refuses at
 * compile time and at run time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ks-cel.h"
#include "util.h"

static const char gpu_attrs[] =
    "{\"type\": {\"string\": \"gpu\"}, \"productName\": {\"string\": \"NVIDIA H100 80GB HBM3\"},"
    " \"uuid\": {\"string\": \"GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c\"},"
    " \"architecture\": {\"string\": \"Hopper\"},"
    " \"driverVersion\": {\"version\": \"550.127.5\"},"
    " \"cudaComputeCapability\": {\"version\": \"9.0.0\"},"
    " \"index\": {\"int\": 3}, \"mig\": {\"bool\": false},"
    " \"resource.kubernetes.io/pcieRoot\": {\"string\": \"pci0000:00\"},"
    " \"gpu.nvidia.com/brand\": {\"string\": \"Nvidia\"}}";
static const char gpu_caps[] = "{\"memory\": {\"value\": \"81559Mi\"}, "
                               "\"example.com/slots\": {\"value\": 4}}";

enum want { MATCH, NOMATCH, COMPILE_ERR, RUNTIME_ERR };

struct tc {
    const char *expr;
    enum want want;
    const char *msg; /* the error text, exactly (NULL: not checked) */
};

static const struct tc cases[] = {
    /* the selectors NVIDIA's classes and the project use */
    {"device.driver == 'gpu.nvidia.com'", MATCH, NULL},
    {"device.driver == \"gpu.nvidia.com\" && device.attributes['gpu.nvidia.com'].type == 'gpu'",
     MATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].type == 'mig'", NOMATCH, NULL},
    {"device.attributes[\"gpu.nvidia.com\"].productName == \"NVIDIA H100 80GB HBM3\"", MATCH, NULL},
    {"device.attributes[\"gpu.nvidia.com\"].productName.startsWith(\"NVIDIA H100\")", MATCH, NULL},
    {"device.attributes[\"gpu.nvidia.com\"].productName.startsWith(\"NVIDIA A100\")", NOMATCH,
     NULL},
    {"device.attributes['gpu.nvidia.com'].productName.contains('80GB')", MATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].productName.endsWith('HBM3')", MATCH, NULL},
    /* an H100 "80GB" has 81559 MiB: less than 80Gi, more than 80G */
    {"device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"80G\")) >= 0", MATCH, NULL},
    {"device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"80Gi\")) >= 0", NOMATCH,
     NULL},
    {"device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('40Gi'))", MATCH, NULL},
    {"device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('100Gi'))", MATCH, NULL},
    {"device.capacity['gpu.nvidia.com'].memory == quantity('81559Mi')", MATCH, NULL},
    {"device.capacity['gpu.nvidia.com'].memory.asInteger() == 85520809984", MATCH, NULL},
    {"device.capacity['example.com'].slots.asInteger() == 4", MATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].architecture in ['Ampere', 'Hopper']", MATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].architecture in ['Ampere', 'Blackwell']", NOMATCH, NULL},
    {"!(device.attributes['gpu.nvidia.com'].type == 'mig')", MATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].type == 'mig' || device.attributes['gpu.nvidia.com']"
     ".index == 3",
     MATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].index >= 2 && device.attributes['gpu.nvidia.com']"
     ".index < 4",
     MATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].index > 3", NOMATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].mig == false", MATCH, NULL},
    {"!device.attributes['gpu.nvidia.com'].mig", MATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].brand == 'Nvidia'", MATCH, NULL},
    {"device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'", MATCH, NULL},
    /* versions */
    {"device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))", MATCH,
     NULL},
    {"device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('560.35.3')) < 0", MATCH,
     NULL},
    {"device.attributes['gpu.nvidia.com'].cudaComputeCapability == semver('9.0.0')", MATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].cudaComputeCapability.major() >= 8", MATCH, NULL},
    {"semver('1.0.0-alpha').isLessThan(semver('1.0.0'))", MATCH, NULL},
    {"semver('1.0.0-alpha.1').isLessThan(semver('1.0.0-alpha.beta'))", MATCH, NULL},
    {"semver('1.0.0-2').isLessThan(semver('1.0.0-11'))", MATCH, NULL},
    {"semver('v1.2', true) == semver('1.2.0')", MATCH, NULL},
    {"isSemver('1.2.3') && !isSemver('1.2')", MATCH, NULL},
    {"semver('1.2')", COMPILE_ERR,
     "must evaluate to bool or the unknown type, not kubernetes.Semver"},
    {"semver('1.2') == semver('1.2.0')", RUNTIME_ERR, "No Major.Minor.Patch elements found"},
    /* presence */
    {"has(device.attributes['gpu.nvidia.com'].productName)", MATCH, NULL},
    {"has(device.attributes['gpu.nvidia.com'].nvlinkDomain)", NOMATCH, NULL},
    {"'productName' in device.attributes['gpu.nvidia.com']", MATCH, NULL},
    {"'gpu.nvidia.com' in device.attributes && !('example.com' in device.attributes)", MATCH, NULL},
    {"size(device.attributes['gpu.nvidia.com']) == 9", MATCH, NULL},
    /* CEL semantics */
    {"device.attributes['gpu.nvidia.com'].nvlinkDomain == 'a' && false", NOMATCH, NULL},
    {"false && device.attributes['gpu.nvidia.com'].nvlinkDomain == 'a'", NOMATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].nvlinkDomain == 'a' || true", MATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].index == 'three'", NOMATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].index == 3.0", MATCH, NULL},
    {"device.attributes['gpu.nvidia.com'].index < 3.5", MATCH, NULL},
    {"1 < 2u && 2.5 > 2", MATCH, NULL},
    {"[1, 2] + [3] == [1, 2, 3]", MATCH, NULL},
    {"'a' + 'b' == 'ab' && size('héllo') == 5", MATCH, NULL},
    {"7 / 2 == 3 && 7 % 3 == 1 && -7 / 2 == -3", MATCH, NULL},
    {"int('42') == 42 && string(42) == '42' && double('1.5') == 1.5 && uint(3) == 3u", MATCH, NULL},
    {"true ? device.driver == 'gpu.nvidia.com' : false", MATCH, NULL},
    {"-9223372036854775808 < 0", MATCH, NULL},
    {"r'a\\d' == 'a\\\\d' && '\\x41\\u00e9' == 'A\xc3\xa9'", MATCH, NULL},
    {"// a comment\ndevice.driver == 'gpu.nvidia.com'", MATCH, NULL},
    {"!!true", MATCH, NULL},
    {"quantity('1.5') == quantity('1500m') && isQuantity('1Gi') && !isQuantity('one')", MATCH,
     NULL},
    {"quantity('1Gi').add(1).compareTo(quantity('1073741825')) == 0", MATCH, NULL},
    /* run-time errors, as the scheduler reports them */
    {"device.attributes['gpu.nvidia.com'].nvlinkDomain == 'a'", RUNTIME_ERR,
     "no such key: nvlinkDomain"},
    {"device.attributes['example.com'].model == 'x'", RUNTIME_ERR, "no such key: model"},
    {"device.capacity['gpu.nvidia.com'].cores.isGreaterThan(quantity('1'))", RUNTIME_ERR,
     "no such key: cores"},
    {"device.attributes['gpu.nvidia.com'].productName < 5", RUNTIME_ERR, "no such overload"},
    {"device.attributes['gpu.nvidia.com'].index / 0 == 1", RUNTIME_ERR, "division by zero"},
    {"9223372036854775807 + 1 > 0", RUNTIME_ERR, "integer overflow"},
    {"quantity('lots').sign() == 1", RUNTIME_ERR,
     "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
    {"device.attributes['gpu.nvidia.com'].productName", RUNTIME_ERR,
     "CEL result of type string could not be converted to bool"},
    /* compile-time errors, in the API server's words */
    {"device.driver", COMPILE_ERR, "must evaluate to bool or the unknown type, not string"},
    {"1 + 1", COMPILE_ERR, "must evaluate to bool or the unknown type, not int"},
    {"driver == 'x'", COMPILE_ERR,
     "compilation failed: ERROR: <input>:1:1: undeclared reference to 'driver' (in container '')\n"
     " | driver == 'x'\n"
     " | ^"},
    {"device.drivr == 'x'", COMPILE_ERR,
     "compilation failed: ERROR: <input>:1:7: undefined field 'drivr'\n"
     " | device.drivr == 'x'\n"
     " | ......^"},
    {"device.capacity['gpu.nvidia.com'].memory > quantity('80Gi')", COMPILE_ERR,
     "compilation failed: ERROR: <input>:1:42: found no matching overload for '_>_' applied to "
     "'(kubernetes.Quantity, kubernetes.Quantity)'\n"
     " | device.capacity['gpu.nvidia.com'].memory > quantity('80Gi')\n"
     " | .........................................^"},
    {"device.driver == 1", COMPILE_ERR,
     "compilation failed: ERROR: <input>:1:15: found no matching overload for '_==_' applied to "
     "'(string, int)'\n"
     " | device.driver == 1\n"
     " | ..............^"},
    {"device.driver.startsWith(1)", COMPILE_ERR,
     "compilation failed: ERROR: <input>:1:25: found no matching overload for 'startsWith' "
     "applied to 'string.(int)'\n"
     " | device.driver.startsWith(1)\n"
     " | ........................^"},
    {"!device.driver", COMPILE_ERR,
     "compilation failed: ERROR: <input>:1:1: found no matching overload for '!_' applied to "
     "'(string)'\n"
     " | !device.driver\n"
     " | ^"},
    {"device.driver.frob()", COMPILE_ERR,
     "compilation failed: ERROR: <input>:1:19: undeclared reference to 'frob' (in container '')\n"
     " | device.driver.frob()\n"
     " | ..................^"},
    {"device.driver == 'a' &&", COMPILE_ERR,
     "compilation failed: ERROR: <input>:1:24: Syntax error: mismatched input '<EOF>' expecting "
     "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, "
     "STRING, BYTES, IDENTIFIER}\n"
     " | device.driver == 'a' &&\n"
     " | .......................^"},
    {"device.driver == 'gpu", COMPILE_ERR,
     "compilation failed: ERROR: <input>:1:18: Syntax error: token recognition error at: "
     "''gpu'\n"
     " | device.driver == 'gpu\n"
     " | .................^"},
    {"device.driver == 'a')", COMPILE_ERR, NULL},
    {"x == 1 && y == 2", COMPILE_ERR,
     "compilation failed: ERROR: <input>:1:1: undeclared reference to 'x' (in container '')\n"
     " | x == 1 && y == 2\n"
     " | ^\n"
     "ERROR: <input>:1:11: undeclared reference to 'y' (in container '')\n"
     " | x == 1 && y == 2\n"
     " | ..........^"},
    {"has(device)", COMPILE_ERR, NULL},
    {"device.attributes.exists(d, d == 'x')", COMPILE_ERR, NULL},
    {"cel.bind(a, device.driver, a == 'x')", COMPILE_ERR, NULL},
    {"{'a': 1}['a'] == 1", COMPILE_ERR, NULL},
    {"if == 1", COMPILE_ERR, NULL},
    {"99999999999999999999 > 1", COMPILE_ERR, NULL},
};

static void test_cases(void **state)
{
    (void)state;
    json_t *attrs = json_loads(gpu_attrs, 0, NULL);
    json_t *caps = json_loads(gpu_caps, 0, NULL);
    assert_non_null(attrs);
    assert_non_null(caps);
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const struct tc *t = &cases[i];
        struct ks_cel *c = NULL;
        char *err = NULL;
        int r = ks_cel_compile(t->expr, strlen(t->expr), &c, &err);
        if (t->want == COMPILE_ERR) {
            if (r == 0)
                fail_msg("%s: compiled", t->expr);
            if (t->msg && strcmp(err, t->msg) != 0)
                fail_msg("%s:\n got: %s\nwant: %s", t->expr, err, t->msg);
            free(err);
            continue;
        }
        if (r < 0)
            fail_msg("%s: %s", t->expr, err);
        bool match = false;
        r = ks_cel_match(c, "gpu.nvidia.com", attrs, caps, &match, &err);
        if (t->want == RUNTIME_ERR) {
            if (r == 0)
                fail_msg("%s: evaluated to %d", t->expr, match);
            if (t->msg && strcmp(err, t->msg) != 0)
                fail_msg("%s:\n got: %s\nwant: %s", t->expr, err, t->msg);
            free(err);
        } else {
            if (r < 0)
                fail_msg("%s: %s", t->expr, err);
            if (match != (t->want == MATCH))
                fail_msg("%s: %s", t->expr, match ? "matched" : "did not match");
        }
        ks_cel_free(c);
    }
    json_decref(attrs);
    json_decref(caps);
}

/* A MIG device of another driver's slice: unqualified names are that driver's. */
static void test_other_driver(void **state)
{
    (void)state;
    json_t *attrs = json_loads("{\"profile\": {\"string\": \"1g.10gb\"}}", 0, NULL);
    const char *e1 = "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'";
    const char *e2 = "device.attributes['mig.example.com'].profile == '1g.10gb'";
    struct ks_cel *c1 = NULL, *c2 = NULL;
    char *err = NULL;
    assert_int_equal(ks_cel_compile(e1, strlen(e1), &c1, &err), 0);
    assert_int_equal(ks_cel_compile(e2, strlen(e2), &c2, &err), 0);
    bool m = false;
    assert_int_equal(ks_cel_match(c2, "mig.example.com", attrs, NULL, &m, &err), 0);
    assert_true(m);
    assert_int_equal(ks_cel_match(c1, "mig.example.com", attrs, NULL, &m, &err), -EINVAL);
    assert_string_equal(err, "no such key: profile");
    free(err);
    ks_cel_free(c1);
    ks_cel_free(c2);
    json_decref(attrs);
}

static void test_limits(void **state)
{
    (void)state;
    /* longer than resource.CELSelectorExpressionMaxLength */
    size_t n = KS_CEL_MAX_LEN + 1;
    char *big = xmalloc(n + 1);
    memset(big, ' ', n);
    big[n] = '\0';
    memcpy(big, "true", 4);
    struct ks_cel *c = NULL;
    char *err = NULL;
    assert_int_equal(ks_cel_compile(big, n, &c, &err), -EINVAL);
    free(err);
    /* deep nesting ends in an error, not a crash */
    size_t depth = 5000;
    char *deep = xmalloc(depth * 2 + 8);
    size_t k = 0;
    for (size_t i = 0; i < depth; i++)
        deep[k++] = '(';
    deep[k++] = '1';
    for (size_t i = 0; i < depth; i++)
        deep[k++] = ')';
    assert_int_equal(ks_cel_compile(deep, k > KS_CEL_MAX_LEN ? KS_CEL_MAX_LEN : k, &c, &err),
                     -EINVAL);
    free(err);
    free(deep);
    free(big);
    /* a flat chain of operators is a deep tree too: 200 additions compile, 400 do not */
    for (int terms = 200; terms <= 400; terms += 200) {
        struct sbuf b;
        sbuf_init(&b, 1u << 16);
        sbuf_adds(&b, "1");
        for (int i = 0; i < terms; i++)
            sbuf_adds(&b, " + 1");
        sbuf_adds(&b, " > 0");
        assert_int_equal(sbuf_check(&b), 0);
        int r = ks_cel_compile(b.data, b.len, &c, &err);
        if (terms == 200) {
            assert_int_equal(r, 0);
            ks_cel_free(c);
        } else {
            assert_int_equal(r, -EINVAL);
            assert_non_null(strstr(err, "max recursion depth exceeded"));
            free(err);
        }
        sbuf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_other_driver),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
