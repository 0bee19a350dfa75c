/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda-internal: the check's core, separate from the shell that loads the driver. The core
 * drives a table of driver entry points (struct cuda_api); cuda_api_load fills it from a
 * libcuda.so.1 (dlopen), a unit test fills it with its own functions.
 */
#ifndef GPUOP_CUDA_INTERNAL_H
#define GPUOP_CUDA_INTERNAL_H

#include "cuda-abi.h"
#include "cuda.h"

#define CUDA_DEFAULT_LIBRARY "libcuda.so.1"
#define CUDA_CHECK_DEFAULT_N 50000
#define CUDA_CHECK_MAX_N     (16u * 1024 * 1024) /* 64 MiB per vector */
#define CUDA_CHECK_BLOCK     256                 /* threads per block */
#define CUDA_CHECK_TOLERANCE 1e-5

#define CUDA_FPTR(name, ret, params) ret(*name) params;
struct cuda_api {
    CUDA_FUNCS(CUDA_FPTR)
    CUDA_OPTIONAL_FUNCS(CUDA_FPTR) /* NULL when the library lacks it */
    void *dl;                      /* the dlopen handle; NULL for a table filled by hand */
    char path[256];                /* what was loaded, for messages */
};
#undef CUDA_FPTR

/* The embedded module: vectorAdd(const float *A, const float *B, float *C, int n). */
extern const char cuda_vector_add_ptx[];

/* Loads lib_path (NULL: $GPUOP_CUDA_LIBRARY, else libcuda.so.1) and resolves every entry point
 * of CUDA_FUNCS. -ENODEV when the library cannot be loaded, -ENOSYS when a symbol is missing. */
int cuda_api_load(const char *lib_path, struct cuda_api *ret, struct err *e);
void cuda_api_unload(struct cuda_api *api);

/* The check over an entry-point table (see cuda_check_run in cuda.h). */
int cuda_check_api(const struct cuda_api *api, size_t n_elements, struct cuda_check_result *ret,
                   struct err *e);

/* "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)", from the library's own tables;
 * "CUDA error 123" when it has no name for r. */
void cuda_describe(const struct cuda_api *api, CUresult r, char *buf, size_t n);
/* A CUresult as a negative errno-style code. */
int cuda_errno(CUresult r);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints a UUID. */
void cuda_uuid_format(const CUuuid *u, char *buf, size_t n);

#endif
