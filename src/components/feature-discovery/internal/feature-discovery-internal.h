/* SPDX-License-Identifier: Apache-2.0 */
/* Feature discovery's shell, shared by its files: the files it reads and writes (node-files.c). */
#ifndef GPUOP_GFD_INTERNAL_H
#define GPUOP_GFD_INTERNAL_H

#include "feature-discovery.h"

/* The machine type file's contents; NULL (unknown) when the path is unset or the file does not
 * exist. */
int gfd_machine_type_read(const char *path, char **ret, struct err *e);

/* The output: NFD's features file, or stdout for "", NULL or "-". */
bool gfd_output_is_stdout(const char *path);
/* Written atomically (its folder made); a device or FIFO (/dev/null, a pipe) written in place. */
int gfd_output_write(const char *path, const char *data, size_t len, struct err *e);
/* Removed when it is a regular file (never a device such as /dev/null); a failure is logged. */
void gfd_output_remove(const char *path);
/* The temporary files a run killed mid-write left beside it removed (NFD must not read them). */
void gfd_output_clean(const char *path);

#endif
