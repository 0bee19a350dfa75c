/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests of which programs a node's pods run by its architecture (kl-arch.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "kl-arch.h"

static void test_plan(void **state)
{
    (void)state;
    static const struct {
        const char *node;
        struct kl_arch_host host;
        enum kl_arch_mode mode;
        const char *tree;   /* NULL: none */
        const char *reason; /* a part of it; NULL: none */
    } cases[] = {
        {"amd64", {.arch = "amd64", .arm64_dir = "/b64", .qemu = "/q"}, KL_ARCH_NATIVE, NULL, NULL},
        {NULL, {.arch = "amd64"}, KL_ARCH_NATIVE, NULL, NULL},
        {"arm64", {.arch = "amd64", .arm64_dir = "/b64", .qemu = "/q"}, KL_ARCH_QEMU, "/b64", NULL},
        /* binfmt_misc wins over an explicit qemu, and needs none */
        {"arm64",
         {.arch = "amd64", .arm64_dir = "/b64", .qemu = "/q", .binfmt = true},
         KL_ARCH_BINFMT,
         "/b64",
         NULL},
        {"arm64",
         {.arch = "amd64", .arm64_dir = "/b64", .binfmt = true},
         KL_ARCH_BINFMT,
         "/b64",
         NULL},
        {"arm64",
         {.arch = "amd64", .qemu = "/q", .binfmt = true},
         KL_ARCH_FALLBACK,
         NULL,
         "no arm64 cross tree"},
        {"arm64", {.arch = "amd64", .arm64_dir = "/b64"}, KL_ARCH_FALLBACK, NULL, "no qemu"},
        /* an arm64 machine runs its own build on an arm64 node */
        {"arm64", {.arch = "arm64"}, KL_ARCH_NATIVE, NULL, NULL},
        {"amd64",
         {.arch = "arm64", .arm64_dir = "/b64", .qemu = "/q"},
         KL_ARCH_FALLBACK,
         NULL,
         "no amd64 build"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct kl_arch_plan p = {0};
        struct err e = {0};
        assert_int_equal(kl_arch_plan(cases[i].node, &cases[i].host, &p, &e), 0);
        assert_int_equal(p.mode, cases[i].mode);
        if (cases[i].tree)
            assert_string_equal(p.tree, cases[i].tree);
        else
            assert_null(p.tree);
        if (cases[i].reason)
            assert_non_null(strstr(p.reason ? p.reason : "", cases[i].reason));
        else
            assert_null(p.reason);
        kl_arch_plan_clear(&p);
    }
    struct kl_arch_plan p = {0};
    struct err e = {0};
    struct kl_arch_host h = {.arch = "amd64"};
    assert_int_equal(kl_arch_plan("riscv64", &h, &p, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "\"riscv64\""));
}

static void test_multiarch(void **state)
{
    (void)state;
    assert_string_equal(kl_arch_multiarch("arm64"), "aarch64-linux-gnu");
    assert_string_equal(kl_arch_multiarch("amd64"), "x86_64-linux-gnu");
    assert_string_equal(kl_arch_multiarch(NULL), "x86_64-linux-gnu");
}

static void test_shim(void **state)
{
    (void)state;
    char *text = NULL;
    struct err e = {0};
    assert_int_equal(
        kl_arch_shim("/usr/bin/qemu-aarch64-static", "/w/build-arm64/gpuop", &text, &e), 0);
    assert_string_equal(text, "#!/bin/sh\n"
                              "# kubelet-sim: an arm64 node's program, run under qemu-user\n"
                              "exec '/usr/bin/qemu-aarch64-static' -0 \"$0\" "
                              "'/w/build-arm64/gpuop' \"$@\"\n");
    free(text);
    /* what single quotes cannot carry is refused, naming the path */
    static const struct {
        const char *qemu, *target, *named;
    } bad[] = {
        {"/q", "/it's/gpuop", "/it's/gpuop"},
        {"/q", "/a\\b", "/a\\b"},
        {"/q", "/a\nb", "/a\nb"},
        {"/q", "gpuop", "gpuop"},
        {"q", "/gpuop", "q"},
        {NULL, "/gpuop", "qemu"},
        {"/q", NULL, "program"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        text = NULL;
        e = (struct err){0};
        assert_int_equal(kl_arch_shim(bad[i].qemu, bad[i].target, &text, &e), -EINVAL);
        assert_null(text);
        assert_non_null(strstr(err_msg(&e), bad[i].named));
    }
}

static void test_elf(void **state)
{
    (void)state;
    Elf64_Ehdr h = {0};
    memcpy(h.e_ident, ELFMAG, SELFMAG);
    h.e_ident[EI_CLASS] = ELFCLASS64;
    h.e_ident[EI_DATA] = ELFDATA2LSB;
    h.e_machine = EM_AARCH64; /* this test runs on little-endian machines only */
    assert_int_equal(kl_arch_elf_is_aarch64((const unsigned char *)&h, sizeof(h)), 1);
    assert_int_equal(kl_arch_elf_is_aarch64((const unsigned char *)&h, sizeof(h) - 1), 0);
    h.e_machine = EM_X86_64;
    assert_int_equal(kl_arch_elf_is_aarch64((const unsigned char *)&h, sizeof(h)), 0);
    h.e_machine = EM_AARCH64;
    h.e_ident[EI_CLASS] = ELFCLASS32;
    assert_int_equal(kl_arch_elf_is_aarch64((const unsigned char *)&h, sizeof(h)), 0);
    static const unsigned char script[64] = "#!/bin/sh\nexec qemu\n";
    assert_int_equal(kl_arch_elf_is_aarch64(script, sizeof(script)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_multiarch),
        cmocka_unit_test(test_shim),
        cmocka_unit_test(test_elf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
