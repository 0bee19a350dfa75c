/* SPDX-License-Identifier: Apache-2.0 */
/* docker's daemon.json editing core on any bytes: no crash; an accepted config gives JSON that
 * parses and edits idempotently, and its uninstall gives the original back; any bytes as the file
 * at uninstall: no crash, and an edited result parses. The first byte picks the options. */
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
        struct rtconfig_undo_file u;
        sbuf_reset(&again);
        if (rtconfig_docker_unedit(in, t, &o, &again, &u, &e) != 0 ||
            u.what != RTCONFIG_UNDO_ORIGINAL)
            abort();
    }
    struct rtconfig_undo_file u2;
    sbuf_reset(&again);
    if (rtconfig_docker_unedit((struct rtconfig_text){NULL, 0}, in, &o, &again, &u2, &e) == 0 &&
        u2.what == RTCONFIG_UNDO_EDIT) {
        json_error_t je;
        json_t *v = json_loadb(again.data, again.len, 0, &je);
        if (!v)
            abort();
        json_decref(v);
    }
    sbuf_free(&out);
    sbuf_free(&again);
    return 0;
}
