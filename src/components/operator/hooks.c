/* SPDX-License-Identifier: Apache-2.0 */
/* The chart hooks' decisions (op-hooks.h): pure. */
#include <string.h>

#include "adopt.h"
#include "kobj.h"
#include "op-hooks.h"
#include "yamlcfg.h"

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

bool op_crd_file(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".yaml") == 0;
}

int op_crds_add(json_t *out, const json_t *docs, const char *path, struct err *e)
{
    _cleanup_json_ json_t *mine = json_array();
    size_t j;
    json_t *d;
    json_array_foreach ((json_t *)docs, j, d) {
        if (json_is_null(d) || (json_is_object(d) && json_object_size(d) == 0))
            continue;
        _cleanup_free_ char *where = xasprintf("%s: document %zu", path, j + 1);
        int r = op_crd_check(d, where, e);
        if (r < 0)
            return r;
        json_array_append(mine, d);
    }
    json_array_extend(out, mine);
    return 0;
}

int op_uninstall_check(const char *release, const char *const *delete_crds, size_t n, struct err *e)
{
    if (!release || !*release)
        return err_set(e, -EINVAL, "--release NAME is required");
    for (size_t i = 0; i < n; i++)
        if (!kobj_valid_dns_subdomain(delete_crds[i]))
            return err_set(e, -EINVAL, "--delete-crd \"%s\": not a CRD name", delete_crds[i]);
    return 0;
}

char *op_deployment_pods_selector(const json_t *deployment)
{
    char *sel = kobj_selector_string(kobj_path(deployment, "spec.selector.matchLabels"));
    if (sel && !*sel) {
        free(sel);
        return NULL;
    }
    return sel;
}

const char *op_toolkit_pending(const json_t *items, char *why, size_t why_len)
{
    size_t i;
    json_t *ds;
    json_array_foreach ((json_t *)items, i, ds) {
        if (!adopt_ds_rolled_out(ds, why, why_len))
            return kobj_name(ds) ?: "";
    }
    return NULL;
}

void op_release_split(const json_t *items, const char *release, const char *ns, json_t **ret_delete,
                      json_t **ret_keep)
{
    json_t *del = json_array(), *keep = json_array();
    size_t i;
    json_t *o;
    json_array_foreach ((json_t *)items, i, o) {
        if (kobj_name(o))
            json_array_append_new(adopt_helm_owned(o, release, ns) ? del : keep,
                                  json_string(kobj_name(o)));
    }
    *ret_delete = del;
    *ret_keep = keep;
}
