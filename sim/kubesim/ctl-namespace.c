/* SPDX-License-Identifier: Apache-2.0 */
/* Namespaces: every live one gets its "default" ServiceAccount (the service-account
 * controller's job: pods without serviceAccountName use it, and the kubelet requests its token);
 * deletion removes the contents, then the kubernetes finalizer. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "ks-controllers.h"

bool ks_ctl_namespaces(struct ksim *ks)
{
    struct ks_type *nst = ctl_core(ks, "namespaces");
    json_t *all = ctl_values(nst->objs);
    bool changed = false;
    size_t i;
    json_t *ns;
    struct ks_type *sat = ctl_core(ks, "serviceaccounts");
    json_array_foreach (all, i, ns) {
        if (!ks_is_deleting(ns)) {
            if (sat && !ks_get(sat, ks_obj_name(ns), "default")) {
                char now[40];
                ks_now_str(ks, now, sizeof(now));
                _cleanup_free_ char *uid = ks_new_uid(ks);
                ks_commit(ks, sat,
                          json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s}}", "apiVersion", "v1", "kind",
                                    "ServiceAccount", "metadata", "name", "default", "namespace",
                                    ks_obj_name(ns), "uid", uid, "creationTimestamp", now),
                          KS_ADDED, NULL);
                changed = true;
            }
            continue;
        }
        const char *name = ks_obj_name(ns);
        bool left = false;
        for (struct ks_type *t = ks->types; t; t = t->next) {
            if (!t->namespaced)
                continue;
            json_t *objs = ctl_values(t->objs);
            size_t j;
            json_t *o;
            json_array_foreach (objs, j, o) {
                if (!streq(ks_obj_ns(o), name))
                    continue;
                left = true;
                if (!ks_is_deleting(o)) {
                    ks_delete_obj(ks, t, o, NULL);
                    changed = true;
                }
            }
            json_decref(objs);
        }
        if (left)
            continue;
        json_t *cur = ks_get(nst, "", name);
        if (cur) {
            json_t *n = json_deep_copy(cur);
            json_object_set_new(kobj_ensure_object(n, "spec"), "finalizers", json_array());
            ks_commit(ks, nst, n, KS_MODIFIED, cur);
            cur = ks_get(nst, "", name);
            if (json_array_size(kobj_path(cur, "metadata.finalizers")) == 0)
                ks_remove(ks, nst, cur);
            changed = true;
        }
    }
    json_decref(all);
    return changed;
}
