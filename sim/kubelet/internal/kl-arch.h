/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-arch: which programs a node's pods run, by the node's architecture (pure).
 *
 * An amd64 node runs this machine's build. An arm64 (Grace) node runs the aarch64 cross tree
 * (`make cross ARCH=arm64`: build-arm64/gpuop, sim-image-bin/, libnvidia-ml.so.1, libcuda.so.1)
 * when there is one and this machine can run aarch64 programs:
 *  - through binfmt_misc when the kernel has an enabled aarch64 entry (qemu-user's): the cross
 *    tree's programs are run as they are;
 *  - else through qemu-user named explicitly: the node gets a folder of shims, one per program,
 *    each a two-line /bin/sh script that execs qemu-aarch64 on the cross tree's program (qemu's
 *    -0 keeps the name it was run by). A shim works wherever a program is run by path or by
 *    name: as a container's command, from PATH, from a shell, from another emulated program
 *    (qemu-user passes execve to the kernel, which runs the script, which starts qemu again).
 * Without a cross tree or qemu the node runs this machine's build, and the plan says why.
 */
#ifndef GPUOP_KL_ARCH_H
#define GPUOP_KL_ARCH_H

#include <stdbool.h>

#include "util.h"

/* What this machine offers. Paths absolute; NULL: absent. */
struct kl_arch_host {
    const char *arch;      /* this machine's, as Kubernetes names it ("amd64", "arm64") */
    const char *arm64_dir; /* a cross tree holding gpuop for aarch64 */
    const char *qemu;      /* qemu-aarch64-static or qemu-aarch64 */
    bool binfmt;           /* the kernel runs aarch64 programs (an enabled binfmt_misc entry) */
};

enum kl_arch_mode {
    KL_ARCH_NATIVE,   /* the node is of this machine's architecture: this machine's build */
    KL_ARCH_FALLBACK, /* another one, but it cannot run here: this machine's build (reason) */
    KL_ARCH_BINFMT,   /* the cross tree's programs, run by the kernel through binfmt_misc */
    KL_ARCH_QEMU,     /* the cross tree's programs through shims that exec qemu */
};

struct kl_arch_plan {
    enum kl_arch_mode mode;
    const char *tree; /* BINFMT, QEMU: the cross tree (host->arm64_dir); else NULL */
    char *reason;     /* FALLBACK: why, one line; else NULL */
};
void kl_arch_plan_clear(struct kl_arch_plan *p);

/* The plan for a node of architecture node_arch ("amd64", "arm64") on host h. -EINVAL for an
 * architecture kubelet-sim does not know. */
int kl_arch_plan(const char *node_arch, const struct kl_arch_host *h, struct kl_arch_plan *ret,
                 struct err *e);

/* The multiarch folder of a node's driver libraries (usr/lib/<this>/libnvidia-ml.so.1):
 * "x86_64-linux-gnu" or "aarch64-linux-gnu". */
const char *kl_arch_multiarch(const char *node_arch);

/* A shim's text: runs target under qemu with the name the shim was run by ($0) and its
 * arguments. -EINVAL for a path that is not absolute or holds a quote, a backslash or a control
 * character (the script quotes each path once, with single quotes). Caller frees. */
int kl_arch_shim(const char *qemu, const char *target, char **ret, struct err *e);

/* Whether an ELF header (the first n bytes of a file) is an aarch64 program: 1 yes, 0 another
 * machine or not ELF. */
int kl_arch_elf_is_aarch64(const unsigned char *head, size_t n);

#endif
