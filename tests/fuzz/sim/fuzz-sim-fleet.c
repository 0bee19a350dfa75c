/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the simulator's fleet parser (YAML bytes to struct sim_fleet). */
#include <stdint.h>
#include <string.h>

#include "simnvml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sim_fleet *f = NULL;
    struct err e = {0};
    if (sim_fleet_parse((const char *)data, size, "fuzz.yaml", &f, &e) == 0) {
        /* exercise what the driver derives from a parsed fleet */
        struct sim_gpu_state st;
        for (size_t i = 0; i < f->n_gpus; i++) {
            sim_gpu_state_init(&f->gpus[i], &st);
            struct sim_sample s;
            sim_telemetry(f, (unsigned)i, 1796000000000ULL, &s);
            for (size_t k = 0; k < f->n_gpus; k++)
                (void)sim_fleet_nvlinks(f, (unsigned)i, (unsigned)k);
        }
        sim_fleet_free(f);
    } else if (strlen(err_msg(&e)) == 0) {
        __builtin_trap(); /* every refusal says why */
    }
    return 0;
}
