/* SPDX-License-Identifier: Apache-2.0 */
/* Status conditions (kobj.h): the one place that knows when a condition's transition time moves. */
#include <string.h>

#include "kobj.h"
#include "util.h"

json_t *kobj_condition(const json_t *old, const char *type, bool status, const char *reason,
                       const char *message, const char *now, long long generation)
{
    const char *st = status ? "True" : "False";
    const char *ltt = now;
    size_t i;
    json_t *oc;
    json_array_foreach ((json_t *)old, i, oc) {
        if (streq_ptr(kobj_str(oc, "type"), type) && streq_ptr(kobj_str(oc, "status"), st)) {
            const char *t = kobj_str(oc, "lastTransitionTime");
            if (t)
                ltt = t;
        }
    }
    json_t *c = json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", type, "status", st, "reason",
                          reason ? reason : "", "message", message ? message : "",
                          "lastTransitionTime", ltt);
    if (generation >= 0)
        json_object_set_new(c, "observedGeneration", json_integer((json_int_t)generation));
    return c;
}

const char *kobj_condition_message(const json_t *conditions, const char *type, const char *status)
{
    size_t i;
    json_t *c;
    json_array_foreach ((json_t *)conditions, i, c) {
        if (streq_ptr(kobj_str(c, "type"), type) &&
            (!status || streq_ptr(kobj_str(c, "status"), status)))
            return kobj_str(c, "message");
    }
    return NULL;
}

json_t *kobj_condition_find(const json_t *obj, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(obj, "status.conditions"), i, c) {
        if (streq_ptr(kobj_str(c, "type"), type))
            return c;
    }
    return NULL;
}

bool kobj_condition_true(const json_t *obj, const char *type)
{
    return streq_ptr(kobj_str(kobj_condition_find(obj, type), "status"), "True");
}

bool kobj_pod_ready(const json_t *pod)
{
    return streq_ptr(kobj_path_str(pod, "status.phase"), "Running") &&
           !kobj_deletion_timestamp(pod) && kobj_condition_true(pod, "Ready");
}

void kobj_conditions_put(json_t *conditions, json_t *cond)
{
    const char *type = kobj_str(cond, "type");
    for (size_t i = 0; i < json_array_size(conditions); i++) {
        if (streq_ptr(kobj_str(json_array_get(conditions, i), "type"), type)) {
            json_array_set_new(conditions, i, cond);
            return;
        }
    }
    json_array_append_new(conditions, cond);
}
