/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>
#include <string.h>

#include "yamlcfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v = NULL;
    struct err e = {0};
    if (yaml_parse_all((const char *)data, size, "fuzz", &v, &e) == 0) {
        char *s = json_dumps(v, JSON_COMPACT);
        free(s);
        json_decref(v);
    }
    return 0;
}
