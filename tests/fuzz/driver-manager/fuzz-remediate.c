/* SPDX-License-Identifier: Apache-2.0 */
/* The executor's request parser and decision (driver-manager.h, "remediation requests"): the
 * input's lines are the request, the done and failed answers, the reload mark and the actions. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driver-manager.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384)
        return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    const char *line[5] = {NULL, NULL, NULL, NULL, NULL};
    char *p = text;
    for (size_t i = 0; i < 5 && p; i++) {
        line[i] = p;
        p = strchr(p, '\n');
        if (p)
            *p++ = '\0';
    }
    struct err e = {0};
    struct dm_rem_request q;
    dm_rem_parse(line[0], &q, &e);
    static const struct dm_rem_gpu gpus[] = {
        {.uuid = "GPU-a"}, {.uuid = "GPU-b", .processes = 1}, {.uuid = "GPU-c", .lost = true}};
    struct dm_rem_input in = {.node = "n1",
                              .request = line[0],
                              .done = line[1],
                              .failed = line[2],
                              .reload = line[3],
                              .gpus = gpus,
                              .n_gpus = 3,
                              .owner = NODESTATE_OWNER_CONTAINER,
                              .driver_ready = true,
                              .pod = "p1"};
    if (line[4] && dm_rem_actions_parse(line[4], in.allow, &e) < 0)
        in.allow[GH_ACT_RESET_GPU] = in.allow[GH_ACT_RELOAD_DRIVER] = true;
    struct dm_rem_decision d;
    dm_rem_decide(&in, &d);
    free(text);
    return 0;
}
