/* SPDX-License-Identifier: Apache-2.0 */
/* For the planners' tests: nodes as the operator's node informer keeps them, their labels in
 * the compact form (kobj.h), which every reader must read through kobj's label sets. A test
 * plans once from its nodes as written and once from these, and expects the same. */
#ifndef GPUOP_TEST_COMPACT_NODES_H
#define GPUOP_TEST_COMPACT_NODES_H

#include <jansson.h>

#include "kobj.h"

/* A new array of new nodes sharing all but their metadata with `nodes`; labels compact over
 * `intern`. A label set kobj_labels_compact refuses stays as it is. */
static inline json_t *test_compact_nodes(const json_t *nodes, json_t *intern)
{
    json_t *out = json_array();
    size_t i;
    json_t *n;
    json_array_foreach ((json_t *)nodes, i, n) {
        json_t *c = json_copy(n);
        json_t *meta = json_copy(json_object_get(n, "metadata"));
        json_t *labels = meta ? kobj_labels_compact(kobj_labels(n), intern) : NULL;
        if (labels)
            json_object_set_new(meta, "labels", labels);
        if (meta)
            json_object_set_new(c, "metadata", meta);
        json_array_append_new(out, c);
    }
    return out;
}

#endif
