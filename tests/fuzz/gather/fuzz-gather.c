/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop gather's redaction of untrusted text (logs, API errors) and objects, and yaml_emit:
 * redaction never crashes and is a fixed point (a second pass finds nothing, changes nothing);
 * a YAML document read, redacted and written back as YAML reads back as the same value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gather.h"
#include "yamlcfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    struct sbuf a, b;
    sbuf_init(&a, size * 12 + 64);
    sbuf_init(&b, size * 12 + 64);
    gather_redact_text(in, size, &a);
    if (sbuf_check(&a) < 0)
        __builtin_trap(); /* the bound gather gives it always holds */
    size_t again = gather_redact_text(a.data, a.len, &b);
    if (sbuf_check(&b) < 0 || again != 0 || b.len != a.len || memcmp(a.data, b.data, a.len) != 0)
        __builtin_trap(); /* not a fixed point */
    sbuf_free(&a);
    sbuf_free(&b);

    json_t *v = NULL;
    struct err e = {0};
    if (yaml_parse_one(in, size, "fuzz", &v, &e) == 0) {
        gather_redact_object(v);
        if (gather_redact_object(v) != 0)
            __builtin_trap();
        struct sbuf y;
        sbuf_init(&y, 64u << 20);
        if (yaml_emit(v, &y, &e) == 0) {
            json_t *back = NULL;
            if (yaml_parse_one(y.data, y.len, "emitted", &back, &e) < 0 || !json_equal(v, back))
                __builtin_trap(); /* what yaml_emit wrote reads back as something else */
            json_decref(back);
        }
        sbuf_free(&y);
        json_decref(v);
    }
    return 0;
}
