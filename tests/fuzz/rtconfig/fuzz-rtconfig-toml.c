/* SPDX-License-Identifier: Apache-2.0 */
/* The TOML editing cores (containerd, CRI-O) on any bytes: no crash, and an accepted config
 * edits idempotently (its output fed back gives the same bytes); uninstall of the edit gives the
 * original back, and of the edit plus a later line keeps that line and drops gpuop's entry. The
 * first byte picks the options. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Without the TOML module (gpuop-tomlx.so, $GPUOP_TOMLX_MODULE) every input would be refused
     * and nothing fuzzed: stop at once instead. */
    static bool loaded;
    struct err le = {0};
    if (!loaded && rtconfig_prepare(RTCONFIG_CONTAINERD, &le) < 0) {
        fprintf(stderr, "%s\n", err_msg(&le));
        abort();
    }
    loaded = true;
    if (size < 1)
        return 0;
    struct rtconfig_options o = {.runtime_name = "nvidia",
                                 .runtime_path = "/usr/bin/gpuop",
                                 .set_as_default = data[0] & 1,
                                 .enable_cdi = data[0] & 2};
    struct rtconfig_text in = {(const char *)data + 1, size - 1};
    struct sbuf m, d, m2, d2;
    struct err e = {0};
    sbuf_init(&m, 1 << 22);
    sbuf_init(&d, 1 << 22);
    sbuf_init(&m2, 1 << 22);
    sbuf_init(&d2, 1 << 22);
    if (rtconfig_containerd_edit(in, &o, &m, &d, &e) == 0) {
        struct rtconfig_text again = {m.data, m.len};
        if (rtconfig_containerd_edit(again, &o, &m2, &d2, &e) != 0 || m.len != m2.len ||
            memcmp(m.data, m2.data, m.len) != 0 || d.len != d2.len ||
            memcmp(d.data, d2.data, d.len) != 0)
            abort();
        struct rtconfig_undo_file u;
        struct sbuf un;
        sbuf_init(&un, 1 << 22);
        if (rtconfig_containerd_unedit(in, again, &o, &un, &u, &e) != 0 ||
            u.what != RTCONFIG_UNDO_ORIGINAL)
            abort();
        /* A later line of the administrator's: kept, gpuop's entry gone. */
        sbuf_reset(&m2);
        sbuf_add(&m2, m.data, m.len);
        sbuf_adds(&m2, "\n# later\n");
        if (sbuf_check(&m2) == 0) {
            struct rtconfig_text later = {m2.data, m2.len};
            if (rtconfig_containerd_unedit(in, later, &o, &un, &u, &e) != 0)
                abort();
            if (u.what != RTCONFIG_UNDO_EDIT && u.what != RTCONFIG_UNDO_LEFT)
                abort();
            if (u.what == RTCONFIG_UNDO_EDIT) {
                /* The line stays; undone again, nothing of gpuop's is left. */
                struct rtconfig_text undone = {un.data ? un.data : "", un.len};
                struct sbuf un3;
                sbuf_init(&un3, 1 << 22);
                if (!memmem(undone.data, undone.len, "# later", 7) ||
                    rtconfig_containerd_unedit(in, undone, &o, &un3, &u, &e) != 0 ||
                    u.what != RTCONFIG_UNDO_NONE)
                    abort();
                sbuf_free(&un3);
            }
        }
        sbuf_free(&un);
    }
    /* Any bytes as the file at uninstall, with no original: no crash. */
    struct rtconfig_undo_file u2;
    struct sbuf un2;
    sbuf_init(&un2, 1 << 22);
    rtconfig_containerd_unedit((struct rtconfig_text){NULL, 0}, in, &o, &un2, &u2, &e);
    sbuf_free(&un2);
    sbuf_reset(&d);
    rtconfig_crio_edit(&in, 1, &o, &d, NULL, &e);
    sbuf_free(&m);
    sbuf_free(&d);
    sbuf_free(&m2);
    sbuf_free(&d2);
    return 0;
}
