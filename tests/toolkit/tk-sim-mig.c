/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Changes a GPU's MIG layout through NVML (the simulated driver in the toolkit's daemon test), as
 * the MIG manager would: `tk-sim-mig GPU PROFILE...` enables MIG on GPU and creates one instance
 * per profile; `tk-sim-mig GPU off` destroys them and disables MIG. The library comes from
 * $GPUOP_NVML_LIBRARY (the simulator, with GPUOP_SIM_FLEET and GPUOP_SIM_STATE).
 */
#include <stdio.h>
#include <string.h>

#include "gpu.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: tk-sim-mig GPU PROFILE... | tk-sim-mig GPU off\n");
        return 2;
    }
    unsigned gpu;
    if (parse_uint(argv[1], &gpu) < 0) {
        fprintf(stderr, "tk-sim-mig: \"%s\" is not a GPU index\n", argv[1]);
        return 2;
    }
    struct err e = {0};
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    struct gpu_mig_mode mode;
    int r = gpu_lib_open(NULL, &lib, &e);
    if (r == 0 && strcmp(argv[2], "off") == 0) {
        r = gpu_mig_destroy_all(lib, gpu, &e);
        if (r == 0)
            r = gpu_mig_set_mode(lib, gpu, false, &mode, &e);
    } else if (r == 0) {
        r = gpu_mig_set_mode(lib, gpu, true, &mode, &e);
        for (int i = 2; r == 0 && i < argc; i++)
            r = gpu_mig_create(lib, gpu, argv[i], NULL, NULL, &e);
    }
    if (r < 0) {
        fprintf(stderr, "tk-sim-mig: %s\n", err_msg(&e));
        return 1;
    }
    return 0;
}
