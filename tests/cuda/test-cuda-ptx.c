/* SPDX-License-Identifier: Apache-2.0 */
/* The simulated driver's PTX parser and visible-device rule, by tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "cuda-internal.h"
#include "simcuda.h"

static struct simcuda_ptx_module mod;

static int parse(const char *text, struct err *e)
{
    return simcuda_ptx_parse(text, strlen(text), &mod, e);
}

static void test_vector_add(void **state)
{
    (void)state;
    struct err e = {0};
    assert_int_equal(parse(cuda_vector_add_ptx, &e), 0);
    assert_int_equal(mod.version_major, 6);
    assert_int_equal(mod.version_minor, 0);
    assert_int_equal(mod.target_sm, 50);
    assert_int_equal(mod.address_size, 64);
    assert_int_equal(mod.n_entries, 1);
    const struct simcuda_ptx_entry *v = simcuda_ptx_find(&mod, "vectorAdd");
    assert_non_null(v);
    assert_true(v->kernel && v->defined);
    assert_int_equal(v->n_params, 4);
    static const size_t sizes[] = {8, 8, 8, 4};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(v->params[i].size, sizes[i]);
        assert_int_equal(v->params[i].count, 1);
    }
    assert_int_equal(v->params[3].type, SIMCUDA_U32);
    assert_null(simcuda_ptx_find(&mod, "vectoradd"));
}

#define HDR ".version 7.8\n.target sm_80\n.address_size 64\n"

static void test_valid_forms(void **state)
{
    (void)state;
    static const char *const ok[] = {
        /* what compilers emit around kernels */
        "// comment\n/* block\n comment */" HDR ".extern .func (.param .b32 r) f(.param .b64 p);\n"
        ".global .align 4 .b8 tbl[4] = {1, 2, 3, 4};\n"
        ".visible .entry k(.param .align 8 .b8 s[16], .param .u64 .ptr .global .align 4 p)"
        " .maxntid 256, 1, 1 .minnctapersm 2\n{\n .reg .b32 %r<3>;\n mov.b64 {%r1, %r2}, 0;\n"
        " @!%p1 bra L1;\nL1:\n { ret; }\n}\n",
        ".version 8.5 .target sm_90a, texmode_unified .address_size 64 .entry e { exit; }",
        ".version 6.0\n.target sm_50\n.file 1 \"a.cu\", 0, 0\n.entry e() { ret; }\n",
        ".version 6.0\n.target compute_52\n.entry e { ret; }", /* .address_size defaults to 32 */
    };
    for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
        struct err e = {0};
        if (parse(ok[i], &e) != 0)
            fail_msg("case %zu: %s", i, err_msg(&e));
    }
    struct err e = {0};
    assert_int_equal(parse(ok[0], &e), 0);
    assert_int_equal(mod.n_entries, 2);
    const struct simcuda_ptx_entry *k = simcuda_ptx_find(&mod, "k");
    assert_true(k->kernel && k->defined);
    assert_int_equal(k->n_params, 2);
    assert_int_equal(k->params[0].count, 16);
    const struct simcuda_ptx_entry *f = simcuda_ptx_find(&mod, "f");
    assert_false(f->kernel || f->defined);
    assert_int_equal(parse(ok[1], &e), 0);
    assert_int_equal(mod.target_sm, 90);
    assert_int_equal(parse(ok[3], &e), 0);
    assert_int_equal(mod.address_size, 32);
}

static void test_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"", "line 1: a PTX module starts with .version"},
        {".target sm_50\n.version 6.0\n", "line 1: a PTX module starts with .version"},
        {".version six\n", "line 1: .version needs MAJOR.MINOR"},
        {".version 6\n", "line 1: .version needs MAJOR.MINOR"},
        {".version 6.0\n.address_size 64\n", "line 2: .version is followed by .target"},
        {".version 6.0\n.target gfx90a\n", "line 2: .target: unknown target"},
        {".version 6.0\n.target sm_5\n", "line 2: .target: not an architecture (sm_NN)"},
        {".version 6.0\n.target debug\n", "line 3: .target names no architecture"},
        {".version 6.0\n.target sm_50\n.address_size 48\n", "line 3: .address_size is 32 or 64"},
        {HDR ".entry k(.param .u64 a {\n ret;\n}\n",
         "line 4: expected ')' to close a parameter list"},
        {HDR ".entry k(.param a)\n{ ret; }\n", "line 4: a parameter without a type"},
        {HDR ".entry k(.param .u128 a)\n{ ret; }\n", "line 4: unknown parameter qualifier or type"},
        {HDR ".entry k()\n{\n ret;\n", "line 7: function body not closed with '}'"},
        {HDR ".entry k()\n{\n frobnicate.u32 %r1, 1;\n}\n", "line 6: unknown instruction"},
        {HDR ".entry k()\n{\n mov.u32 %r1, 1\n}\n", "line 7: '}' before the statement's ';'"},
        {HDR ".entry k()\n{\n @, bra L;\n}\n", "line 6: expected a predicate after '@'"},
        {HDR ".entry k()\n{ ret; }\n.entry k()\n{ ret; }\n", "line 7: a function defined twice"},
        {HDR "int main() { return 0; }\n", "line 4: expected .entry, .func or a module-level "
                                           "declaration"},
        {HDR ".entry k() { ret; } /* open", "line 4: unterminated comment"},
        {HDR ".visible", "line 4: a linkage directive with nothing after it"},
        {HDR ".entry k() { mov.u32 %r1, #1; }", "line 4: unexpected character"},
        {HDR ".entry k() { ret; }\x01", "line 4: a byte that is not PTX text"},
        {HDR ".entry () { ret; }", "line 4: expected the .entry's name"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct err e = {0};
        int r = parse(bad[i].text, &e);
        if (r != -EINVAL || strcmp(err_msg(&e), bad[i].msg) != 0)
            fail_msg("case %zu: %d \"%s\", want \"%s\"", i, r, err_msg(&e), bad[i].msg);
    }
    struct err e = {0};
    assert_int_equal(parse(".version 10.0\n.target sm_100\n", &e), -EPROTONOSUPPORT);
    /* text with an embedded NUL stops where the driver would (strlen) */
    assert_int_equal(simcuda_ptx_parse(HDR "\0garbage", sizeof(HDR "\0garbage") - 1, &mod, &e), 0);
}

static void test_visible(void **state)
{
    (void)state;
    static const char *const uuids[] = {"GPU-aaaa0000-0000", "GPU-bbbb0000-0000",
                                        "GPU-bbbc0000-0000", "GPU-cccc0000-0000"};
    static const struct {
        const char *nvidia, *cuda, *want;
    } cases[] = {
        {NULL, NULL, "0123"},
        {"all", NULL, "0123"},
        {"", NULL, ""},
        {"none", NULL, ""},
        {"void", NULL, ""},
        {"2,0,9,0,GPU-cccc0000-0000,0:1,MIG-x", NULL, "203"},
        {NULL, "", ""},
        {NULL, "3,1", "31"},
        {NULL, "1,x,2", "1"}, /* stops at the first invalid entry */
        {NULL, "1,1,2", "1"}, /* and at a repeat */
        {NULL, "7,0", ""},    /* and at an ordinal out of range */
        {NULL, "GPU-bbbc,GPU-a", "20"},
        {NULL, "GPU-bbb", ""},   /* an ambiguous prefix */
        {"1,3", "1", "3"},       /* CUDA's ordinals index the container's devices */
        {"1,3", "GPU-aaaa", ""}, /* a UUID the container does not have */
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        unsigned out[64];
        size_t n = 99;
        simcuda_visible(uuids, 4, cases[i].nvidia, cases[i].cuda, out, &n);
        char got[65] = "";
        for (size_t k = 0; k < n; k++)
            got[k] = (char)('0' + out[k]);
        got[n] = '\0';
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, got, cases[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector_add),
        cmocka_unit_test(test_valid_forms),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_visible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
