/* SPDX-License-Identifier: Apache-2.0 */
/* Nodes: the unschedulable taint (the node lifecycle controller's job). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "ks-controllers.h"

bool ks_ctl_node_taints(struct ksim *ks)
{
    struct ks_type *nt = ctl_core(ks, "nodes");
    /* the nodes changed since the last pass (the others were right then), or all of them */
    json_t *look = NULL;
    if (!ctl_changed_since(ks, nt, ks->taints_cursor, &look, NULL))
        look = ctl_values(nt->objs);
    ks->taints_cursor = ks->rv;
    json_t *todo = json_array();
    size_t k;
    json_t *n;
    json_array_foreach (look, k, n) {
        bool want = json_is_true(kobj_path(n, "spec.unschedulable"));
        bool have = false;
        size_t i;
        json_t *t;
        json_array_foreach (kobj_path(n, "spec.taints"), i, t)
            if (streq_ptr(kobj_str(t, "key"), T_UNSCHED))
                have = true;
        if (want != have)
            json_array_append(todo, n);
    }
    char ts[40];
    ks_now_str(ks, ts, sizeof(ts));
    size_t i;
    json_array_foreach (todo, i, n) {
        json_t *c = json_deep_copy(n);
        json_t *spec = kobj_ensure_object(c, "spec");
        json_t *taints = json_object_get(spec, "taints");
        if (json_is_true(json_object_get(spec, "unschedulable"))) {
            if (!json_is_array(taints)) {
                taints = json_array();
                json_object_set_new(spec, "taints", taints);
            }
            json_array_append_new(taints, json_pack("{s:s,s:s,s:s}", "key", T_UNSCHED, "effect",
                                                    "NoSchedule", "timeAdded", ts));
        } else {
            for (size_t j = json_array_size(taints); j-- > 0;)
                if (streq_ptr(kobj_path_str(json_array_get(taints, j), "key"), T_UNSCHED))
                    json_array_remove(taints, j);
            if (json_array_size(taints) == 0)
                json_object_del(spec, "taints");
        }
        ks_update(ks, nt, n, c, NULL);
    }
    bool changed = json_array_size(todo) > 0;
    json_decref(todo);
    json_decref(look);
    return changed;
}
