/* SPDX-License-Identifier: Apache-2.0 */
/* PodDisruptionBudget status. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "ks-controllers.h"

bool ks_ctl_pdbs(struct ksim *ks)
{
    struct ks_type *pt = ks_type_find(ks, "policy", "v1", "poddisruptionbudgets");
    json_t *all = ctl_values(pt->objs);
    bool changed = false;
    char ts[40];
    ks_now_str(ks, ts, sizeof(ts));
    size_t i;
    json_t *pdb;
    json_array_foreach (all, i, pdb) {
        struct ks_pdb_math m = ks_pdb_compute(ks, pdb);
        json_t *old = json_object_get(pdb, "status");
        json_t *st = json_pack("{s:I,s:I,s:I,s:I,s:O}", "expectedPods", (json_int_t)m.expected,
                               "currentHealthy", (json_int_t)m.healthy, "desiredHealthy",
                               (json_int_t)m.desired, "disruptionsAllowed", (json_int_t)m.allowed,
                               "observedGeneration",
                               kobj_path(pdb, "metadata.generation") ?: json_integer(0));
        const char *cs = m.allowed > 0 ? "True" : "False";
        const char *reason = m.allowed > 0 ? "SufficientPods" : "InsufficientPods";
        json_t *oc = json_array_get(json_object_get(old, "conditions"), 0);
        const char *lt = streq_ptr(kobj_str(oc, "status"), cs) && kobj_str(oc, "lastTransitionTime")
                             ? kobj_str(oc, "lastTransitionTime")
                             : ts;
        json_object_set_new(st, "conditions",
                            json_pack("[{s:s,s:s,s:s,s:s,s:s,s:O}]", "type", "DisruptionAllowed",
                                      "status", cs, "reason", reason, "message", "",
                                      "lastTransitionTime", lt, "observedGeneration",
                                      kobj_path(pdb, "metadata.generation") ?: json_integer(0)));
        if (!json_equal(st, old)) {
            json_t *n = json_deep_copy(pdb);
            json_object_set_new(n, "status", st);
            ks_update(ks, pt, pdb, n, "status");
            changed = true;
        } else {
            json_decref(st);
        }
    }
    json_decref(all);
    return changed;
}
