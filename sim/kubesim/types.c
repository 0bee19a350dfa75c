/* SPDX-License-Identifier: Apache-2.0 */
/* The resource type registry: built-in kinds and resources with their scopes and subresources,
 * and the types a CustomResourceDefinition serves. */
#include <string.h>

#include "kubesim-internal.h"

struct ks_type *ks_type_add(struct ksim *ks, const char *group, const char *version,
                            const char *plural, const char *singular, const char *kind,
                            bool namespaced)
{
    struct ks_type *t = xcalloc(1, sizeof(*t));
    t->group = xstrdup(group);
    t->version = xstrdup(version);
    t->plural = xstrdup(plural);
    t->singular = xstrdup(singular);
    t->kind = xstrdup(kind);
    t->short_names = xstrdup("");
    t->categories = xstrdup("");
    t->extra_sub = xstrdup("");
    t->namespaced = namespaced;
    t->served = true;
    t->objs = json_object();
    struct ks_type **pp = &ks->types;
    while (*pp)
        pp = &(*pp)->next;
    *pp = t;
    return t;
}

static void set_str(char **dst, const char *v)
{
    free(*dst);
    *dst = xstrdup(v);
}

void ks_types_init(struct ksim *ks)
{
    static const struct {
        const char *g, *v, *plural, *singular, *kind;
        bool ns, status, gen;
        const char *shorts, *cats, *sub;
    } builtin[] = {
        {"", "v1", "namespaces", "namespace", "Namespace", false, true, false, "ns", "",
         "finalize"},
        {"", "v1", "nodes", "node", "Node", false, true, false, "no", "", ""},
        {"", "v1", "pods", "pod", "Pod", true, true, false, "po", "all", "eviction,binding,log"},
        {"", "v1", "configmaps", "configmap", "ConfigMap", true, false, false, "cm", "", ""},
        {"", "v1", "secrets", "secret", "Secret", true, false, false, "", "", ""},
        {"", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, false, false, "sa",
         "", ""},
        {"", "v1", "services", "service", "Service", true, true, false, "svc", "all", ""},
        {"", "v1", "endpoints", "endpoints", "Endpoints", true, false, false, "ep", "", ""},
        {"", "v1", "events", "event", "Event", true, false, false, "ev", "", ""},
        {"", "v1", "resourcequotas", "resourcequota", "ResourceQuota", true, true, false, "quota",
         "", ""},
        {"apps", "v1", "daemonsets", "daemonset", "DaemonSet", true, true, true, "ds", "all", ""},
        {"apps", "v1", "deployments", "deployment", "Deployment", true, true, true, "deploy", "all",
         "scale"},
        {"apps", "v1", "replicasets", "replicaset", "ReplicaSet", true, true, true, "rs", "all",
         "scale"},
        {"apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision", true,
         false, false, "", "", ""},
        {"batch", "v1", "jobs", "job", "Job", true, true, true, "", "all", ""},
        {"rbac.authorization.k8s.io", "v1", "roles", "role", "Role", true, false, false, "", "",
         ""},
        {"rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", false,
         false, false, "", "", ""},
        {"rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", true,
         false, false, "", "", ""},
        {"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
         "ClusterRoleBinding", false, false, false, "", "", ""},
        {"policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true,
         true, true, "pdb", "", ""},
        {"coordination.k8s.io", "v1", "leases", "lease", "Lease", true, false, false, "", "", ""},
        {"events.k8s.io", "v1", "events", "event", "Event", true, false, false, "ev", "", ""},
        {"node.k8s.io", "v1", "runtimeclasses", "runtimeclass", "RuntimeClass", false, false, false,
         "", "", ""},
        {"resource.k8s.io", "v1", "deviceclasses", "deviceclass", "DeviceClass", false, false, true,
         "", "", ""},
        {"resource.k8s.io", "v1", "resourceclaims", "resourceclaim", "ResourceClaim", true, true,
         false, "", "", ""},
        {"resource.k8s.io", "v1", "resourceclaimtemplates", "resourceclaimtemplate",
         "ResourceClaimTemplate", true, false, false, "", "", ""},
        {"resource.k8s.io", "v1", "resourceslices", "resourceslice", "ResourceSlice", false, false,
         true, "", "", ""},
        {"apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
         "CustomResourceDefinition", false, true, true, "crd,crds", "api-extensions", ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(builtin); i++) {
        struct ks_type *t = ks_type_add(ks, builtin[i].g, builtin[i].v, builtin[i].plural,
                                        builtin[i].singular, builtin[i].kind, builtin[i].ns);
        t->has_status = builtin[i].status;
        t->has_generation = builtin[i].gen;
        set_str(&t->short_names, builtin[i].shorts);
        set_str(&t->categories, builtin[i].cats);
        set_str(&t->extra_sub, builtin[i].sub);
    }
}

void ks_types_free(struct ksim *ks)
{
    struct ks_type *t = ks->types;
    while (t) {
        struct ks_type *n = t->next;
        free(t->group);
        free(t->version);
        free(t->plural);
        free(t->singular);
        free(t->kind);
        free(t->short_names);
        free(t->categories);
        free(t->extra_sub);
        json_decref(t->printer_columns);
        ks_crd_schema_free(t->schema);
        json_decref(t->objs);
        json_decref(t->last_added);
        json_decref(t->openapi_schema);
        json_decref(t->openapi_components);
        free(t);
        t = n;
    }
    ks->types = NULL;
}

struct ks_type *ks_type_find(struct ksim *ks, const char *group, const char *version,
                             const char *plural)
{
    for (struct ks_type *t = ks->types; t; t = t->next)
        if (t->served && streq(t->group, group) && streq(t->version, version) &&
            streq(t->plural, plural))
            return t;
    return NULL;
}

struct ks_type *ks_type_by_kind(struct ksim *ks, const char *api_version, const char *kind)
{
    if (!api_version || !kind)
        return NULL;
    for (struct ks_type *t = ks->types; t; t = t->next) {
        if (!t->served || !streq(t->kind, kind))
            continue;
        _cleanup_free_ char *gv = ks_type_gv(t);
        if (streq(gv, api_version))
            return t;
    }
    return NULL;
}

char *ks_type_gv(const struct ks_type *t)
{
    return t->group[0] ? xasprintf("%s/%s", t->group, t->version) : xstrdup(t->version);
}

char *ks_type_qualified(const struct ks_type *t)
{
    return t->group[0] ? xasprintf("%s.%s", t->plural, t->group) : xstrdup(t->plural);
}

/* ---- types served by CRDs ---------------------------------------------------------------- */

static void csv_from(char **dst, json_t *arr)
{
    /* The limit is what the names themselves take, so the list is never cut. */
    size_t need = 0, i;
    json_t *x;
    json_array_foreach (arr, i, x)
        if (json_is_string(x))
            need += json_string_length(x) + 1;
    struct sbuf b;
    sbuf_init(&b, need);
    json_array_foreach (arr, i, x)
        if (json_is_string(x))
            sbuf_addf(&b, "%s%s", b.len ? "," : "", json_string_value(x));
    free(*dst);
    *dst = ks_text_take(&b);
}

/* Serves (or stops serving) the resources a CRD object declares. */
void ks_types_serve_crd(struct ksim *ks, json_t *crd, bool serve)
{
    const char *g = kobj_path_str(crd, "spec.group");
    const char *pl = kobj_path_str(crd, "spec.names.plural");
    const char *kind = kobj_path_str(crd, "spec.names.kind");
    if (!g || !pl || !kind)
        return;
    const char *singular = kobj_path_str(crd, "spec.names.singular");
    _cleanup_free_ char *sing = singular ? xstrdup(singular) : ks_lower_dup(kind);
    bool namespaced = streq_ptr(kobj_path_str(crd, "spec.scope"), "Namespaced");
    for (struct ks_type *t = ks->types; t; t = t->next) {
        if (t->crd && streq(t->group, g) && streq(t->plural, pl))
            t->served = false;
    }
    if (!serve)
        return;
    size_t i;
    json_t *v;
    json_array_foreach (kobj_path(crd, "spec.versions"), i, v) {
        const char *ver = kobj_str(v, "name");
        if (!ver || json_is_false(json_object_get(v, "served")))
            continue;
        struct ks_type *t = NULL;
        for (struct ks_type *x = ks->types; x; x = x->next)
            if (x->crd && streq(x->group, g) && streq(x->plural, pl) && streq(x->version, ver))
                t = x;
        if (!t) {
            t = ks_type_add(ks, g, ver, pl, sing, kind, namespaced);
            t->crd = true;
        }
        t->served = true;
        t->namespaced = namespaced;
        free(t->kind);
        t->kind = xstrdup(kind);
        free(t->singular);
        t->singular = xstrdup(sing);
        t->has_generation = true;
        t->has_status = json_is_object(kobj_path(v, "subresources.status"));
        csv_from(&t->short_names, kobj_path(crd, "spec.names.shortNames"));
        csv_from(&t->categories, kobj_path(crd, "spec.names.categories"));
        json_decref(t->printer_columns);
        json_t *pc = json_object_get(v, "additionalPrinterColumns");
        t->printer_columns = json_array_size(pc) ? json_incref(pc) : NULL;
        ks_crd_schema_free(t->schema);
        t->schema = ks_crd_schema_new(kobj_path(v, "schema.openAPIV3Schema"));
    }
}

/* Removes every custom resource of a CRD being deleted. */
