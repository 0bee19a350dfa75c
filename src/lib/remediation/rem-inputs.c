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
    static const char *const paths[] = {"spec.unschedulable", "spec.taints"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
        kobj_path_copy(p, obj, paths[i]);
    /* the boot ID, the one member of a node's status no other node has, beside it: the rest of
     * the projected status (resources, Ready, the kernel) is alike across a pool and an
     * informer may keep it once */
    json_t *boot = kobj_path(obj, "status.nodeInfo.bootID");
    if (json_is_string(boot))
        json_object_set(p, REM_PROJECTED_BOOT_ID, boot);
}

const char *rem_node_boot_id(const json_t *node)
{
    return kobj_path_str(node, "status.nodeInfo.bootID")
               ?: json_string_value(json_object_get(node, REM_PROJECTED_BOOT_ID));
}
