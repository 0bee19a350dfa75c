/* SPDX-License-Identifier: Apache-2.0 */
/* node-discovery's inputs from outside: an os-release file (nodestate_os_release) and a Node whose
 * labels and owned-set annotation anyone may have written (disc_plan, nodestate_nfd_apply). The
 * input: an os-release text, a NUL byte, then a Node as JSON. */
#include <stdint.h>
#include <string.h>

#include "node-discovery.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nul = memchr(data, 0, size);
    size_t os_len = nul ? (size_t)(nul - text) : size;
    char id[128], version[128];
    int r = nodestate_os_release(text, os_len, id, sizeof(id), version, sizeof(version));
    if (!nul)
        return 0;
    json_error_t je;
    json_t *node = json_loadb(nul + 1, size - os_len - 1, 0, &je);
    if (!node)
        return 0;
    static const char *const classes[] = {"0302", "0300"};
    struct nodestate_nfd_input in = {classes, 2, r == 0 ? id : NULL, version[0] ? version : NULL,
                                     NULL};
    json_t *patch = NULL;
    disc_plan(node, &in, &patch);
    json_decref(patch);
    json_decref(node);
    return 0;
}
