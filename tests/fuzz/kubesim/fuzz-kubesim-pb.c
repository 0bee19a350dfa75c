/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes kubesim's protobuf body decoders on their own: the input is one request body. */
#include <stdint.h>

#include "kubesim-pb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *kind = NULL;
    json_t *v = ks_pb_decode((const char *)data, size, &kind);
    if (v && !json_is_object(v))
        __builtin_trap();
    json_decref(v);
    v = ks_pb_decode_auth((const char *)data, size);
    if (v && !json_is_object(v))
        __builtin_trap();
    json_decref(v);
    return 0;
}
