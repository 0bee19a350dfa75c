/* SPDX-License-Identifier: Apache-2.0 */
/*
 * build/cuda-check: the CUDA check on its own, for a machine with a GPU (scripts/
 * cuda-check-real.sh) and for the tests against the simulated libcuda.
 *   cuda-check [--lib PATH] [--elements N]
 *   cuda-check --ptx            prints the embedded PTX module (for ptxas, in the tests)
 * Prints one line per device and a verdict; exit 0 when every device passed, 1 when the check
 * failed, 2 on bad arguments.
 */
#include <string.h>

#include "cuda-internal.h"

static int usage(void)
{
    fprintf(stderr, "usage: cuda-check [--lib PATH] [--elements N]\n"
                    "  --lib PATH      the CUDA driver library (default $GPUOP_CUDA_LIBRARY, "
                    "else libcuda.so.1)\n"
                    "  --elements N    vectorAdd's length (default 50000)\n"
                    "  --ptx           print the embedded PTX module and exit\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *lib = NULL;
    uint64_t n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ptx") == 0 && argc == 2) {
            fputs(cuda_vector_add_ptx, stdout);
            return fflush(stdout) == 0 ? 0 : 1;
        } else if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc) {
            lib = argv[++i];
        } else if (strcmp(argv[i], "--elements") == 0 && i + 1 < argc) {
            if (parse_u64(argv[++i], &n) < 0 || n == 0) {
                fprintf(stderr, "cuda-check: --elements: \"%s\" is not a positive number\n",
                        argv[i]);
                return 2;
            }
        } else {
            return usage();
        }
    }
    static struct cuda_check_result res;
    struct err e = {0};
    int r = cuda_check_run(lib, (size_t)n, &res, &e);
    if (res.driver_version)
        printf("CUDA driver API %d.%d, %d device(s)\n", res.driver_version / 1000,
               res.driver_version % 1000 / 10, res.n_devices);
    for (int i = 0; i < res.n_devices; i++) {
        const struct cuda_device_result *d = &res.dev[i];
        printf("device %d: %s %s: %s", d->ordinal, d->name[0] ? d->name : "?",
               d->uuid[0] ? d->uuid : "-", d->ok ? "PASS" : "FAIL");
        if (d->ok)
            printf(" (vectorAdd verified, %.1f ms)\n", d->elapsed_ms);
        else
            printf(": %s\n", d->reason);
    }
    if (r < 0) {
        printf("CUDA check: FAIL: %s\n", err_msg(&e));
        return 1;
    }
    printf("CUDA check: PASS\n");
    return 0;
}
