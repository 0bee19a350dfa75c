/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes kubesim's protobuf codec on its own: the input is one request body (or, after a first
 * byte of 'W', one watch event). What decodes is encoded again and must decode to the same
 * JSON: the codec reads back what it writes. */
#include <stdint.h>
#include <stdlib.h>

#include "kubesim-pb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct err e = {0};
    json_t *v = NULL;
    if (size && data[0] == 'W') {
        char *type = NULL;
        if (ks_pb_decode_watch_event(data + 1, size - 1, &type, &v, &e) == 0) {
            free(type);
            json_decref(v);
        }
        return 0;
    }
    if (ks_pb_decode(data, size, &v, &e) < 0)
        return 0;
    struct sbuf b;
    sbuf_init(&b, 64u << 20);
    if (ks_pb_encode(v, &b, &e) == 0) {
        json_t *again = NULL;
        if (ks_pb_decode(b.data, b.len, &again, &e) < 0 || !json_equal(v, again))
            abort();
        json_decref(again);
    }
    sbuf_free(&b);
    json_decref(v);
    return 0;
}
