/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rtconfig: a node's container runtime configured for GPUs, as `nvidia-ctk runtime configure`
 * does it (../shared/reference/notes/node-components.md §3): containerd (config versions 1, 2
 * and 3; a drop-in and an `imports` entry where supported), CRI-O (a drop-in), docker
 * (daemon.json). The runtime is detected from the node (its containerRuntimeVersion and the
 * sockets and config files under the host root), never assumed. Existing settings are kept byte
 * for byte outside what changes; the original is backed up; configuring twice changes nothing;
 * restore brings the original back. The editing cores are pure (bytes in, bytes out) and fuzzed;
 * the functions below taking host_root do the file I/O.
 *
 * This header starts as the contract between the toolkit daemon (src/node/toolkit) and the
 * validator's toolkit check; the module's owner extends it.
 */
#ifndef GPUOP_RTCONFIG_H
#define GPUOP_RTCONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

enum rt_kind {
    RT_CONTAINERD,
    RT_CRIO,
    RT_DOCKER,
};
const char *rt_kind_name(enum rt_kind k); /* "containerd", "cri-o", "docker" */
/* Accepts "containerd", "cri-o"/"crio", "docker" and a containerRuntimeVersion
 * ("containerd://1.7.24"). */
int rt_kind_parse(const char *s, enum rt_kind *ret);

struct rt_options {
    const char *runtime_name; /* the handler: "nvidia" */
    const char *runtime_path; /* the wrapper binary the handler runs (gpuop runtime) */
    bool set_as_default;
    bool enable_cdi;
};

/* Detects the node's runtime: node_runtime_version (status.nodeInfo.containerRuntimeVersion,
 * NULL when unknown) first, then the sockets and config files under host_root. A node whose
 * runtime differs from want (NULL: no expectation) is an error naming both. */
int rt_detect(const char *host_root, const char *node_runtime_version, const char *want,
              enum rt_kind *ret, struct err *e);

/* Configures it: the files it wrote go into changed (a NUL-separated list, may be NULL).
 * Idempotent. A config that does not parse: nothing written, e names the file and line. */
int rt_configure(const char *host_root, enum rt_kind k, const struct rt_options *o,
                 bool *ret_changed, struct err *e);
/* Puts back what rt_configure changed (byte for byte). */
int rt_restore(const char *host_root, enum rt_kind k, const struct rt_options *o, struct err *e);
/* 0 when the runtime on host_root is configured for GPUs as o says (the handler exists and runs
 * o->runtime_path; CDI enabled when o->enable_cdi); -ENOENT with the reason in e otherwise. */
int rt_check(const char *host_root, enum rt_kind k, const struct rt_options *o, struct err *e);

#endif
