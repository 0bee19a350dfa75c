/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop runtime's device request over an arbitrary config.json, under the closed default policy
 * and under the most open one: names or an error saying where the bad name came from, never a
 * crash; every name qualified; and the closed policy never asks for a device the open one does
 * not. */
#include <stdint.h>
#include <string.h>

#include "runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool source_named(const char *msg)
{
    return strstr(msg, "NVIDIA_VISIBLE_DEVICES") || strstr(msg, "annotation") ||
           strstr(msg, "mounts[");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *oci = json_loadb((const char *)data, size, 0, NULL);
    if (!oci)
        return 0;
    struct runtime_policy closed = {.default_kind = "nvidia.com/gpu",
                                    .accept_volume_mounts = true,
                                    .annotation_keys = {RUNTIME_PLUGIN_ANNOTATION},
                                    .n_annotation_keys = 1,
                                    .privileged_caps = RUNTIME_CAPS_KNOWN};
    struct runtime_policy open = closed;
    open.accept_envvar_unprivileged = true;
    open.annotation_keys[0] = "cdi.k8s.io/";
    struct runtime_request rc = {0}, ro = {0};
    struct err ec = {0}, eo = {0};
    int r_closed = runtime_request_read(oci, &closed, &rc, &ec);
    int r_open = runtime_request_read(oci, &open, &ro, &eo);
    if ((r_closed < 0 && !source_named(err_msg(&ec))) ||
        (r_open < 0 && !source_named(err_msg(&eo))))
        __builtin_trap();
    for (size_t i = 0; r_closed == 0 && i < rc.n; i++) {
        if (!strchr(rc.names[i], '='))
            __builtin_trap(); /* every name is qualified */
        bool in_open = false;
        for (size_t k = 0; r_open == 0 && k < ro.n && !in_open; k++)
            in_open = strcmp(rc.names[i], ro.names[k]) == 0;
        if (r_open == 0 && !in_open)
            __builtin_trap(); /* the closed policy gave more than the open one */
    }
    if (r_closed == 0 && rc.env == RUNTIME_ENV_USED && !rc.privileged)
        __builtin_trap();
    if (r_closed == 0)
        runtime_request_clear(&rc);
    if (r_open == 0)
        runtime_request_clear(&ro);
    json_decref(oci);
    return 0;
}
