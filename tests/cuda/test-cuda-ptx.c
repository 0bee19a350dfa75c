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
        {".version 6.0\n.target sm_00\n", "line 2: .target: not an architecture (sm_NN)"},
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

/* Real compiler output (tests/fuzz/simcuda/nvcc-kernels.cu through nvcc 13.0): kernels with
 * loops, shared memory, atomics, a struct parameter, device functions and debug sections. */
static void test_nvcc_output(void **state)
{
    (void)state;
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    if (!src)
        skip();
    static const struct {
        const char *file;
        unsigned sm;
        size_t entries;
    } files[] = {{"nvcc-sm90.ptx", 90, 3}, {"nvcc-sm80-debug.ptx", 80, 10}};
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        _cleanup_free_ char *path =
            xasprintf("%s/tests/fuzz/simcuda/corpus/%s", src, files[i].file);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        struct err e = {0};
        assert_int_equal(file_read_all(path, 1 << 20, &text, &len, &e), 0);
        if (simcuda_ptx_parse(text, len, &mod, &e) != 0)
            fail_msg("%s: %s", files[i].file, err_msg(&e));
        assert_int_equal(mod.target_sm, files[i].sm);
        assert_int_equal(mod.n_entries, files[i].entries);
        const struct simcuda_ptx_entry *v = simcuda_ptx_find(&mod, "vectorAdd");
        assert_true(v && v->kernel && v->defined && v->n_params == 4);
        assert_int_equal(v->params[0].size, 8);
        assert_int_equal(v->params[3].size, 4);
        const struct simcuda_ptx_entry *st = simcuda_ptx_find(&mod, "structy");
        assert_true(st && st->kernel && st->n_params == 2);
        assert_int_equal(st->params[0].type, SIMCUDA_B8);
        assert_int_equal(st->params[0].count, 24);
        const struct simcuda_ptx_entry *r = simcuda_ptx_find(&mod, "reduce");
        assert_true(r && r->kernel && r->n_params == 3);
    }
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
        simcuda_visible(uuids, 4, NULL, cases[i].nvidia, cases[i].cuda, out, &n);
        char got[65] = "";
        for (size_t k = 0; k < n; k++)
            got[k] = (char)('0' + out[k]);
        got[n] = '\0';
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, got, cases[i].want);
    }

    /* A container given device nodes (CDI): with NVIDIA_VISIBLE_DEVICES unset or void, the GPUs
     * are the nodes; without the control node, the variable's rule as above. */
    static const unsigned minors_13[] = {3, 1, 9};
    const struct simcuda_nodes with_ctl = {true, minors_13, 3}, no_ctl = {false, minors_13, 3},
                               none = {true, NULL, 0};
    const struct {
        const struct simcuda_nodes *nodes;
        const char *nvidia, *cuda, *want;
    } node_cases[] = {
        {&with_ctl, NULL, NULL, "13"},   /* fleet order; minor 9 is no GPU of the fleet */
        {&with_ctl, "void", NULL, "13"}, /* the CDI spec's NVIDIA_VISIBLE_DEVICES=void */
        {&with_ctl, "void", "1", "3"},   /* CUDA's ordinals index them */
        {&with_ctl, "0", NULL, "0"},     /* the variable names devices: the legacy path */
        {&with_ctl, "all", NULL, "0123"},
        {&none, "void", NULL, ""},     /* the control node only: no device */
        {&no_ctl, NULL, NULL, "0123"}, /* no control node: a host process */
        {&no_ctl, "void", NULL, ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(node_cases); i++) {
        unsigned out[64];
        size_t n = 99;
        simcuda_visible(uuids, 4, node_cases[i].nodes, node_cases[i].nvidia, node_cases[i].cuda,
                        out, &n);
        char got[65] = "";
        for (size_t k = 0; k < n; k++)
            got[k] = (char)('0' + out[k]);
        got[n] = '\0';
        if (strcmp(got, node_cases[i].want) != 0)
            fail_msg("node case %zu: got \"%s\", want \"%s\"", i, got, node_cases[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector_add), cmocka_unit_test(test_valid_forms),
        cmocka_unit_test(test_malformed),  cmocka_unit_test(test_nvcc_output),
        cmocka_unit_test(test_visible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
