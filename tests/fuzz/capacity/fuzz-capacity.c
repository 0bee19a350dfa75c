/* SPDX-License-Identifier: Apache-2.0 */
/* The capacity-and-quota view over arbitrary objects: the input's first line is a pool
 * definition (cap_pool_def_parse), the rest a JSON object {"nodes", "pods", "quotas"} of whatever
 * shape; the view is computed as JSON and drawn as `gpuop status` draws it (every section, over
 * the same nodes). Nothing may crash or leak. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "capacity.h"
#include "statusview.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 20)
        return 0;
    const char *nl = memchr(data, '\n', size);
    size_t first = nl ? (size_t)(nl - (const char *)data) : size;
    char *spec = xstrndup((const char *)data, first);
    struct cap_pool_def def = {0};
    struct err e = {0};
    bool have_pool = cap_pool_def_parse(spec, &def, &e) == 0;
    free(spec);
    json_t *doc = nl ? json_loadb(nl + 1, size - first - 1, 0, NULL) : NULL;
    struct cap_input in = {.nodes = json_object_get(doc, "nodes"),
                           .pods = json_object_get(doc, "pods"),
                           .quotas = json_object_get(doc, "quotas"),
                           .slices = json_object_get(doc, "slices"),
                           .claims = json_object_get(doc, "claims"),
                           .classes = json_object_get(doc, "classes"),
                           .pools = have_pool ? &def : NULL,
                           .n_pools = have_pool ? 1 : 0};
    struct cap_view *v = NULL;
    if (cap_view_compute(&in, &v, &e) == 0) {
        json_decref(cap_view_to_json(v));
        cap_view_free(v);
    }
    json_t *none = json_array();
    json_t *nodes = json_object_get(doc, "nodes"), *pods = json_object_get(doc, "pods"),
           *quotas = json_object_get(doc, "quotas");
    struct st_objects so = {.policies = none,
                            .drivers = none,
                            .nodes = json_is_array(nodes) ? nodes : none,
                            .events = none,
                            .pods = json_is_array(pods) ? pods : none,
                            .quotas = json_is_array(quotas) ? quotas : none,
                            .pools = in.pools,
                            .n_pools = in.n_pools};
    json_t *model = st_model(&so, st_sections);
    struct st_view view = {.width = 80};
    char *text = NULL;
    if (st_render_text(model, st_sections, &view, 1u << 24, &text, &e) == 0)
        free(text);
    json_decref(model);
    json_decref(none);
    json_decref(doc);
    cap_pool_def_clear(&def);
    return 0;
}
