/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop runtime's device request over an arbitrary config.json: names or an error saying where
 * the bad name came from, never a crash. */
#include <stdint.h>
#include <string.h>

#include "runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *oci = json_loadb((const char *)data, size, 0, NULL);
    if (!oci)
        return 0;
    char **names = NULL;
    size_t n = 0;
    struct err e = {0};
    if (runtime_requested_devices(oci, "nvidia.com/gpu", &names, &n, &e) == 0) {
        for (size_t i = 0; i < n; i++)
            if (!strchr(names[i], '='))
                __builtin_trap(); /* every name is qualified */
        runtime_strv_free(names);
    } else if (!strstr(err_msg(&e), "NVIDIA_VISIBLE_DEVICES") &&
               !strstr(err_msg(&e), "annotation")) {
        __builtin_trap();
    }
    json_decref(oci);
    return 0;
}
