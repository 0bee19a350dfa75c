/* SPDX-License-Identifier: Apache-2.0 */
/* For the planners' tests: pods as the shell hands them to a planner, in upg_pod_compact's form
 * (upgrade.h), which every reader must read through upg_pod_obj and the upg_pod_* accessors. A
 * test plans once from its pods as written and once from these, and expects the same. */
#ifndef GPUOP_TEST_COMPACT_PODS_H
#define GPUOP_TEST_COMPACT_PODS_H

#include <jansson.h>

#include "upgrade.h"

/* A new array of `pods` compact, their alike parts interned in `intern` (NULL: not), as the
 * pod informer keeps the operand pods. Every pod must have a name (none is dropped). */
static inline json_t *test_compact_pods(const json_t *pods, json_t *intern)
{
    json_t *out = json_array();
    size_t i;
    json_t *pod;
    json_array_foreach ((json_t *)pods, i, pod) {
        json_t *c = upg_pod_compact(pod, intern);
        if (!c || !upg_pod_is_compact(c))
            abort();
        json_array_append_new(out, c);
    }
    return out;
}

#endif
