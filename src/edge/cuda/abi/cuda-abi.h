/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda-abi: gpuop's own declarations of the CUDA driver API subset the CUDA check uses, written
 * to the driver's published ABI (LP64). Values, types and the exported symbol names must match
 * the real libcuda.so.1: the same gpuop binary runs on a real driver or on the simulated one
 * (sim/cuda), which implements these prototypes.
 *
 * The product never links against these symbols: src/edge/cuda loads them with dlopen/dlsym (the
 * CUDA_FUNCS list below, by the names the library exports: the _v2 names where the driver moved
 * an entry point to a 64-bit CUdeviceptr or a new layout).
 */
#ifndef GPUOP_CUDA_ABI_H
#define GPUOP_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CUresult: an int-sized enum in the ABI. */
typedef int CUresult;
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_ECC_UNCORRECTABLE = 214,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
    CUDA_ERROR_UNKNOWN = 999,
};

typedef int CUdevice;         /* a device ordinal */
typedef uint64_t CUdeviceptr; /* 64-bit on every 64-bit platform (the _v2 entry points) */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

/* The entry points, by exported symbol name: X(symbol, return, params). */
#define CUDA_FUNCS(X)                                                                            \
    X(cuInit, CUresult, (unsigned int flags))                                                    \
    X(cuDriverGetVersion, CUresult, (int *driverVersion))                                        \
    X(cuDeviceGetCount, CUresult, (int *count))                                                  \
    X(cuDeviceGet, CUresult, (CUdevice * device, int ordinal))                                   \
    X(cuDeviceGetName, CUresult, (char *name, int len, CUdevice dev))                            \
    X(cuDeviceGetUuid, CUresult, (CUuuid * uuid, CUdevice dev))                                  \
    X(cuCtxCreate_v2, CUresult, (CUcontext * pctx, unsigned int flags, CUdevice dev))            \
    X(cuCtxDestroy_v2, CUresult, (CUcontext ctx))                                                \
    X(cuCtxSynchronize, CUresult, (void))                                                        \
    X(cuModuleLoadData, CUresult, (CUmodule * module, const void *image))                        \
    X(cuModuleGetFunction, CUresult, (CUfunction * hfunc, CUmodule hmod, const char *name))      \
    X(cuModuleUnload, CUresult, (CUmodule hmod))                                                 \
    X(cuMemAlloc_v2, CUresult, (CUdeviceptr * dptr, size_t bytesize))                            \
    X(cuMemFree_v2, CUresult, (CUdeviceptr dptr))                                                \
    X(cuMemcpyHtoD_v2, CUresult, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)) \
    X(cuMemcpyDtoH_v2, CUresult, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount))       \
    X(cuLaunchKernel, CUresult,                                                                  \
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,        \
       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                   \
       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra))        \
    X(cuGetErrorName, CUresult, (CUresult error, const char **pStr))                             \
    X(cuGetErrorString, CUresult, (CUresult error, const char **pStr))

/* Optional: cuDeviceGetUuid_v2 (CUDA 11.4+; the MIG-aware UUID), used when present. */
#define CUDA_OPTIONAL_FUNCS(X) X(cuDeviceGetUuid_v2, CUresult, (CUuuid * uuid, CUdevice dev))

#define CUDA_DECLARE(name, ret, params) ret name params;
CUDA_FUNCS(CUDA_DECLARE)
CUDA_OPTIONAL_FUNCS(CUDA_DECLARE)
#undef CUDA_DECLARE

#ifdef __cplusplus
}
#endif

#endif
