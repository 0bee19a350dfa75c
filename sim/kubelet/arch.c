/* SPDX-License-Identifier: Apache-2.0 */
/* kl-arch: which programs a node's pods run, by the node's architecture (kl-arch.h). Pure. */
#include <assert.h>
#include <elf.h>
#include <errno.h>
#include <string.h>

#include "kl-arch.h"

void kl_arch_plan_clear(struct kl_arch_plan *p)
{
    if (!p)
        return;
    free(p->reason);
    *p = (struct kl_arch_plan){0};
}

int kl_arch_plan(const char *node_arch, const struct kl_arch_host *h, struct kl_arch_plan *ret,
                 struct err *e)
{
    assert(h && h->arch);
    const char *arch = node_arch ? node_arch : "amd64";
    if (strcmp(arch, "amd64") != 0 && strcmp(arch, "arm64") != 0)
        return err_set(e, -EINVAL, "architecture \"%s\": not one kubelet-sim runs (amd64, arm64)",
                       arch);
    if (strcmp(arch, h->arch) == 0) {
        *ret = (struct kl_arch_plan){.mode = KL_ARCH_NATIVE};
        return 0;
    }
    if (strcmp(arch, "arm64") != 0) {
        *ret = (struct kl_arch_plan){
            .mode = KL_ARCH_FALLBACK,
            .reason = xasprintf("no %s build is run on an %s machine: the node runs this "
                                "machine's build",
                                arch, h->arch)};
        return 0;
    }
    if (!h->arm64_dir) {
        *ret = (struct kl_arch_plan){
            .mode = KL_ARCH_FALLBACK,
            .reason = xstrdup("no arm64 cross tree (make cross ARCH=arm64, or --arm64-build): "
                              "the node runs this machine's build")};
        return 0;
    }
    if (h->binfmt) {
        *ret = (struct kl_arch_plan){.mode = KL_ARCH_BINFMT, .tree = h->arm64_dir};
        return 0;
    }
    if (!h->qemu) {
        *ret = (struct kl_arch_plan){
            .mode = KL_ARCH_FALLBACK,
            .reason = xstrdup("no qemu-aarch64-static or qemu-aarch64 (qemu-user-static) and no "
                              "binfmt_misc entry for aarch64: the node runs this machine's build")};
        return 0;
    }
    *ret = (struct kl_arch_plan){.mode = KL_ARCH_QEMU, .tree = h->arm64_dir};
    return 0;
}

const char *kl_arch_multiarch(const char *node_arch)
{
    return node_arch && strcmp(node_arch, "arm64") == 0 ? "aarch64-linux-gnu" : "x86_64-linux-gnu";
}

/* A path the shim can quote with single quotes and nothing else. */
static bool shim_path_ok(const char *p)
{
    if (!p || p[0] != '/')
        return false;
    for (const unsigned char *c = (const unsigned char *)p; *c; c++)
        if (*c == '\'' || *c == '\\' || *c < 0x20 || *c == 0x7f)
            return false;
    return true;
}

int kl_arch_shim(const char *qemu, const char *target, char **ret, struct err *e)
{
    if (!shim_path_ok(qemu))
        return err_set(e, -EINVAL, "qemu \"%s\": not an absolute path a shim can quote",
                       qemu ? qemu : "");
    if (!shim_path_ok(target))
        return err_set(e, -EINVAL, "program \"%s\": not an absolute path a shim can quote",
                       target ? target : "");
    *ret = xasprintf("#!/bin/sh\n"
                     "# kubelet-sim: an arm64 node's program, run under qemu-user\n"
                     "exec '%s' -0 \"$0\" '%s' \"$@\"\n",
                     qemu, target);
    return 0;
}

int kl_arch_elf_is_aarch64(const unsigned char *head, size_t n)
{
    if (n < sizeof(Elf64_Ehdr) || memcmp(head, ELFMAG, SELFMAG) != 0 ||
        head[EI_CLASS] != ELFCLASS64 || head[EI_DATA] != ELFDATA2LSB)
        return 0;
    /* e_machine, little-endian, at offset 18 */
    unsigned machine = (unsigned)head[18] | (unsigned)head[19] << 8;
    return machine == EM_AARCH64;
}
