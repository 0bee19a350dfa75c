/* SPDX-License-Identifier: Apache-2.0 */
/* What the planner reads of a Node, for an informer's projection (remediation.h). */
#include <string.h>

#include "kobj.h"
#include "remediation.h"

void rem_project_node(const json_t *obj, json_t *p)
{
    const char *k;
    json_t *v;
    json_object_foreach (kobj_annotations(obj), k, v) {
        if (str_has_prefix(k, REM_ANN_PREFIX) || strcmp(k, GH_ANN_HEALTH) == 0)
            json_object_set(
                kobj_ensure_keys(p, (const char *const[]){"metadata", "annotations", NULL}), k, v);
    }
    static const char *const paths[] = {"spec.unschedulable", "spec.taints",
                                        "status.nodeInfo.bootID"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
        kobj_path_copy(p, obj, paths[i]);
}
