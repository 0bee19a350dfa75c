/* SPDX-License-Identifier: Apache-2.0 */
/* rtconfig's internals shared by its files and white-box tests. */
#ifndef GPUOP_RTCONFIG_INTERNAL_H
#define GPUOP_RTCONFIG_INTERNAL_H

#include "rtconfig.h"

struct tomlx;

/* "cri", "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime"; NULL for others. */
const char *rtconfig_containerd_plugin(int version);
/* The config's version: its `version` key, 1 without one, 2 for a file with no key at all. */
int rtconfig_containerd_version(const struct tomlx *t, int *ret, struct err *e);
/* Byte offset of (line, col), both 1-based, columns in code points. */
size_t rtconfig_text_offset(const char *s, size_t len, unsigned line, unsigned col);

#endif
