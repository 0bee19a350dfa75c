/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda: the CUDA driver API, loaded at run time (libcuda.so.1, or $GPUOP_CUDA_LIBRARY), and the
 * validator's CUDA check: cuInit, cuDeviceGetCount, then for each device a context, an embedded
 * PTX vectorAdd loaded with cuModuleLoadData, launched, copied back and verified. The same code
 * runs against the real driver and against the simulated libcuda (build/libcuda.so.1).
 * Errors carry CUDA's own name and text (cuGetErrorName/cuGetErrorString), e.g.
 * "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)".
 */
#ifndef GPUOP_CUDA_H
#define GPUOP_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define CUDA_CHECK_MAX_DEVICES 64

struct cuda_device_result {
    int ordinal;
    char name[96];
    char uuid[48];     /* "GPU-..." as cuDeviceGetUuid gives it, "" when unavailable */
    bool ok;           /* the kernel ran and every element verified */
    char reason[256];  /* why not, one line */
    double elapsed_ms; /* context to verified result */
};

struct cuda_check_result {
    int driver_version; /* cuDriverGetVersion: 12080 */
    int n_devices;
    struct cuda_device_result dev[CUDA_CHECK_MAX_DEVICES];
};

/* Runs the check: lib_path NULL is $GPUOP_CUDA_LIBRARY, else "libcuda.so.1". n_elements is the
 * vector length (0: 50000, vectorAdd's). Returns 0 when every device passed; a negative code
 * with e naming the first failure otherwise (ret is filled as far as the check got). Every
 * device is checked even after one fails; a device's failure reads
 * "device 2 (NVIDIA H100 80GB HBM3, GPU-...): cuCtxCreate: CUDA_ERROR_UNKNOWN (unknown error)",
 * a wrong result "device 0 (...): vectorAdd result verification failed: ...". Codes: -ENODEV
 * (no library, no device, not initialised), -EBADMSG (wrong result), -ENOEXEC (the PTX did not
 * load), -EIO (other CUDA errors), -ENOSYS (the library lacks an entry point).
 * The library stays loaded, and as with any CUDA program the first cuInit's result holds for the
 * whole process: a check that failed because the driver was not there yet must be retried in a
 * new process. */
int cuda_check_run(const char *lib_path, size_t n_elements, struct cuda_check_result *ret,
                   struct err *e);

#endif
