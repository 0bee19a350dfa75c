/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the node annotations' decoders (driver owner, validation, gpu count, last drain)
 * and the toolkit marker, each on the same bytes, then rendered back where they parsed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nodestate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct err e = {0};
    char *out = NULL;
    struct nodestate_driver_owner o;
    if (nodestate_driver_owner_parse(text, &o, &e) == 0 &&
        nodestate_driver_owner_render(&o, &out) == 0)
        free(out);
    struct nodestate_validation v;
    if (nodestate_validation_parse(text, &v, &e) == 0 && nodestate_validation_render(&v, &out) == 0)
        free(out);
    struct nodestate_drain d;
    if (nodestate_drain_parse(text, &d, &e) == 0 && nodestate_drain_render(&d, &out) == 0)
        free(out);
    struct nodestate_gpu_count *c = calloc(1, sizeof(*c));
    if (c && nodestate_gpu_count_parse(text, c, &e) == 0 &&
        nodestate_gpu_count_render(c, &out) == 0)
        free(out);
    free(c);
    struct nodestate_toolkit_marker *m = calloc(1, sizeof(*m));
    if (m)
        (void)nodestate_toolkit_marker_parse("fuzz", text, size, m, &e);
    free(m);
    free(text);
    return 0;
}
