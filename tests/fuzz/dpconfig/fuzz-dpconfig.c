/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the device-plugin config parser, and the sharing lookups over what it accepts. */
#include <stdint.h>
#include <string.h>

#include "dpconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dpconfig *c = NULL;
    struct err e = {0};
    if (dpconfig_parse((const char *)data, size, "fuzz", &c, &e) == 0) {
        (void)dpconfig_sharing_strategy(c);
        (void)dpconfig_replica_count(c, "nvidia.com/gpu");
        (void)dpconfig_replica_count(c, "gpu");
        const struct dpconfig_sharing *s = dpconfig_active_sharing(c);
        for (size_t i = 0; i < s->n_resources; i++)
            (void)dpconfig_replicas_for(c, s->resources[i].name);
        dpconfig_free(c);
    } else if (!e.msg[0]) {
        __builtin_trap(); /* every failure carries a message */
    }
    return 0;
}
