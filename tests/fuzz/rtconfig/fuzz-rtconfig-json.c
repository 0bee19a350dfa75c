/* SPDX-License-Identifier: Apache-2.0 */
/* docker's daemon.json editing core on any bytes: no crash; an accepted config gives JSON that
 * parses and edits idempotently. The first byte picks the options. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "rtconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct rtconfig_options o = {.runtime_name = "nvidia",
                                 .runtime_path = "/usr/bin/gpuop",
                                 .set_as_default = data[0] & 1,
                                 .enable_cdi = data[0] & 2};
    struct rtconfig_text in = {(const char *)data + 1, size - 1};
    struct sbuf out, again;
    struct err e = {0};
    sbuf_init(&out, 1 << 22);
    sbuf_init(&again, 1 << 22);
    if (rtconfig_docker_edit(in, &o, &out, &e) == 0) {
        json_error_t je;
        json_t *v = json_loadb(out.data, out.len, 0, &je);
        if (!v)
            abort();
        json_decref(v);
        struct rtconfig_text t = {out.data, out.len};
        if (rtconfig_docker_edit(t, &o, &again, &e) != 0 || again.len != out.len ||
            memcmp(again.data, out.data, out.len) != 0)
            abort();
    }
    sbuf_free(&out);
    sbuf_free(&again);
    return 0;
}
