/* SPDX-License-Identifier: Apache-2.0 */
/* The chart hooks' decisions (op-hooks.h): pure. */
#include <string.h>

#include "kobj.h"
#include "op-hooks.h"

int op_crd_check(const json_t *doc, const char *where, struct err *e)
{
    if (!json_is_object(doc))
        return err_set(e, -EINVAL, "%s: not an object", where);
    if (!streq_ptr(kobj_api_version(doc), "apiextensions.k8s.io/v1") ||
        !streq_ptr(kobj_kind(doc), "CustomResourceDefinition"))
        return err_set(e, -EINVAL,
                       "%s: apiVersion/kind is %s/%s, not apiextensions.k8s.io/v1 "
                       "CustomResourceDefinition",
                       where, kobj_api_version(doc) ?: "(none)", kobj_kind(doc) ?: "(none)");
    const char *name = kobj_name(doc);
    if (!name || !kobj_valid_dns_subdomain(name))
        return err_set(e, -EINVAL, "%s: metadata.name \"%s\" is not a CRD name", where, name ?: "");
    if (!json_is_object(json_object_get(doc, "spec")))
        return err_set(e, -EINVAL, "%s: CRD %s has no spec", where, name);
    return 0;
}

/* The members of `want` (labels or annotations) that `have` lacks or holds otherwise. */
static bool map_covered(const json_t *want, const json_t *have)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)want, k, v) {
        if (!json_equal(v, json_object_get(have, k)))
            return false;
    }
    return true;
}

enum op_crd_action op_crd_plan(const json_t *desired, const json_t *live, json_t **ret_obj)
{
    *ret_obj = NULL;
    if (!live)
        return OP_CRD_CREATE;
    if (json_equal(json_object_get(desired, "spec"), json_object_get(live, "spec")) &&
        map_covered(kobj_labels(desired), kobj_labels(live)) &&
        map_covered(kobj_annotations(desired), kobj_annotations(live)))
        return OP_CRD_UNCHANGED;
    json_t *obj = json_deep_copy(desired);
    json_t *meta = kobj_ensure_object(obj, "metadata");
    const char *rv = kobj_resource_version(live);
    if (rv)
        json_object_set_new(meta, "resourceVersion", json_string(rv));
    /* what others set on the stored CRD (a CA bundle injector's annotation, labels) stays */
    const char *const maps[] = {"labels", "annotations"};
    for (size_t i = 0; i < ARRAY_SIZE(maps); i++) {
        json_t *have = json_object_get(json_object_get(live, "metadata"), maps[i]);
        if (!json_is_object(have))
            continue;
        json_t *want = kobj_ensure_object(meta, maps[i]);
        const char *k;
        json_t *v;
        json_object_foreach (have, k, v) {
            if (!json_object_get(want, k))
                json_object_set(want, k, v);
        }
    }
    *ret_obj = obj;
    return OP_CRD_UPDATE;
}
