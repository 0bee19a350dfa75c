/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the device-plugin config parser, and the sharing lookups over what it accepts. */
#include <stdint.h>
#include <stdlib.h>
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

    /* The same bytes as a flag or env value for every field (bounded copy, NUL-terminated). */
    if (size <= 4096) {
        char *v = malloc(size + 1);
        if (!v)
            return 0;
        memcpy(v, data, size);
        v[size] = '\0';
        struct dpconfig *d = dpconfig_new();
        for (size_t i = 0; dpconfig_plugin_options[i].field; i++) {
            struct err e2 = {0};
            if (strcmp(dpconfig_plugin_options[i].field, "configFile") != 0 &&
                dpconfig_set(d, dpconfig_plugin_options[i].field, v, "fuzz", &e2) < 0 && !e2.msg[0])
                __builtin_trap();
        }
        for (size_t i = 0; dpconfig_gfd_options[i].field; i++) {
            struct err e2 = {0};
            if (strcmp(dpconfig_gfd_options[i].field, "configFile") != 0)
                (void)dpconfig_set(d, dpconfig_gfd_options[i].field, v, "fuzz", &e2);
        }
        dpconfig_free(d);
        free(v);
    }
    return 0;
}
