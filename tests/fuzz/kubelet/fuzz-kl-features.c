/* SPDX-License-Identifier: Apache-2.0 */
/* NFD's local feature file format as kubelet-sim reads it: any bytes, never a crash. */
#include <stdint.h>
#include <string.h>

#include "kl-node.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *labels = json_object();
    struct err e = {0};
    (void)kl_features_parse((const char *)data, size, 1796183424123ull, labels, &e);
    json_decref(labels);
    return 0;
}
