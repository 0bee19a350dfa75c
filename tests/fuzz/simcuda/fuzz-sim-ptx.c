/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the simulated libcuda's PTX parser (module text to struct simcuda_ptx_module). */
#include <stdint.h>
#include <string.h>

#include "simcuda.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct simcuda_ptx_module m;
    struct err e = {0};
    int r = simcuda_ptx_parse((const char *)data, size, &m, &e);
    if (r == 0) {
        if (m.n_entries > SIMCUDA_PTX_MAX_ENTRIES || m.target_sm == 0 ||
            (m.address_size != 32 && m.address_size != 64))
            __builtin_trap();
        for (size_t i = 0; i < m.n_entries; i++) {
            if (m.entries[i].name[0] == '\0' || m.entries[i].n_params > SIMCUDA_PTX_MAX_PARAMS ||
                simcuda_ptx_find(&m, m.entries[i].name) == NULL)
                __builtin_trap();
        }
    } else if (strlen(err_msg(&e)) == 0) {
        __builtin_trap(); /* every refusal says why */
    }
    return 0;
}
