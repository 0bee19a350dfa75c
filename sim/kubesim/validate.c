/* SPDX-License-Identifier: Apache-2.0 */
/* Validation as the API server's strategies do it: names, labels, per-type required fields and
 * the fields an update may not change. Findings are appended as Status causes. */
#include <stdio.h>
#include <string.h>

#include "ks-objects.h"

void ks_add_cause(json_t *causes, const char *reason, const char *field, const char *fmt, ...)
    GPUOP_PRINTF(4, 5);
void ks_add_cause(json_t *causes, const char *reason, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct sbuf b;
    sbuf_init(&b, 1u << 14);
    sbuf_vaddf(&b, fmt, ap);
    va_end(ap);
    _cleanup_free_ char *msg = ks_text_take(&b);
    json_array_append_new(
        causes, json_pack("{s:s,s:s,s:s}", "reason", reason, "message", msg, "field", field));
}

const char ks_msg_dns_label[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const char ks_msg_dns_subdomain[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

void ks_validate_name(struct ks_type *t, const char *name, json_t *causes)
{
    bool label =
        !t->crd && !t->group[0] && (streq(t->plural, "namespaces") || streq(t->plural, "services"));
    bool path_seg = !t->crd && streq(t->group, "rbac.authorization.k8s.io");
    if (path_seg) {
        if (!name[0] || streq(name, ".") || streq(name, "..") || strchr(name, '/') ||
            strchr(name, '%'))
            ks_add_cause(causes, "FieldValueInvalid", "metadata.name",
                         "Invalid value: \"%s\": may not contain '/' or '%%'", name);
        return;
    }
    if (label ? !kobj_valid_dns_label(name) : !kobj_valid_dns_subdomain(name))
        ks_add_cause(causes, "FieldValueInvalid", "metadata.name", "Invalid value: \"%s\": %s",
                     name, label ? ks_msg_dns_label : ks_msg_dns_subdomain);
}

void ks_validate_labels(json_t *obj, json_t *causes)
{
    const char *k;
    json_t *v;
    json_object_foreach (kobj_path(obj, "metadata.labels"), k, v) {
        _cleanup_free_ char *sel = NULL;
        if (!json_is_string(v)) {
            ks_add_cause(causes, "FieldValueInvalid", "metadata.labels",
                         "Invalid value: label values must be strings");
            continue;
        }
        struct err e = {0};
        sel = xasprintf("%s=%s", k, json_string_value(v));
        struct ksim_selector *s = ksim_label_selector_parse(sel, &e);
        if (!s || s->n != 1 || !streq(s->reqs[0].key, k))
            ks_add_cause(
                causes, "FieldValueInvalid", "metadata.labels",
                "Invalid value: \"%s\": name part must consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                json_string_value(v));
        ksim_selector_free(s);
    }
}

static void validate_values(struct ks_type *t, json_t *obj, json_t *causes);

void ks_validate_type(struct ksim *ks, struct ks_type *t, json_t *obj, json_t *causes)
{
    (void)ks;
    if (!t->crd)
        validate_values(t, obj, causes);
    if (ks_dra_type(t)) {
        ks_dra_validate(t, obj, causes);
        return;
    }
    if (t->crd || t->group[0] == '\0') {
        if (!t->crd && streq(t->plural, "pods") &&
            json_array_size(kobj_path(obj, "spec.containers")) == 0)
            ks_add_cause(causes, "FieldValueRequired", "spec.containers", "Required value");
        if (!t->crd && streq(t->plural, "pods"))
            ks_dra_validate_pod(obj, causes);
        if (!t->crd && streq(t->plural, "resourcequotas"))
            ks_quota_validate(obj, causes);
        return;
    }
    if (streq(t->group, "apps") &&
        (streq(t->plural, "daemonsets") || streq(t->plural, "deployments") ||
         streq(t->plural, "replicasets"))) {
        json_t *sel = kobj_path(obj, "spec.selector");
        if (!json_is_object(sel)) {
            ks_add_cause(causes, "FieldValueRequired", "spec.selector", "Required value");
            return;
        }
        struct err e = {0};
        _cleanup_(ksim_selector_freep) struct ksim_selector *s =
            ksim_label_selector_from_json(sel, &e);
        if (!s) {
            ks_add_cause(causes, "FieldValueInvalid", "spec.selector", "Invalid value: %s",
                         err_msg(&e));
            return;
        }
        if (s->n == 0)
            ks_add_cause(causes, "FieldValueInvalid", "spec.selector",
                         "Invalid value: {}: empty selector is invalid for deployment");
        else if (!ksim_selector_matches(s, kobj_path(obj, "spec.template.metadata.labels")))
            ks_add_cause(causes, "FieldValueInvalid", "spec.template.metadata.labels",
                         "Invalid value: map[]: `selector` does not match template `labels`");
        if (json_array_size(kobj_path(obj, "spec.template.spec.containers")) == 0)
            ks_add_cause(causes, "FieldValueRequired", "spec.template.spec.containers",
                         "Required value");
    }
    if (streq(t->plural, "customresourcedefinitions")) {
        const char *g = kobj_path_str(obj, "spec.group");
        const char *pl = kobj_path_str(obj, "spec.names.plural");
        const char *kind = kobj_path_str(obj, "spec.names.kind");
        const char *scope = kobj_path_str(obj, "spec.scope");
        if (!g || !pl || !kind) {
            ks_add_cause(causes, "FieldValueRequired", "spec",
                         "spec.group, spec.names.plural and "
                         "spec.names.kind are required");
            return;
        }
        _cleanup_free_ char *want = xasprintf("%s.%s", pl, g);
        if (!streq(want, ks_obj_name(obj)))
            ks_add_cause(causes, "FieldValueInvalid", "metadata.name",
                         "Invalid value: \"%s\": must be spec.names.plural+\".\"+spec.group",
                         ks_obj_name(obj));
        if (!scope || (!streq(scope, "Namespaced") && !streq(scope, "Cluster")))
            ks_add_cause(causes, "FieldValueNotSupported", "spec.scope",
                         "Unsupported value: \"%s\": supported values: \"Cluster\", \"Namespaced\"",
                         scope ? scope : "");
        if (json_array_size(kobj_path(obj, "spec.versions")) == 0)
            ks_add_cause(causes, "FieldValueRequired", "spec.versions", "Required value");
    }
}

/* Pod spec without the fields an update may change. */
static json_t *pod_spec_fixed(json_t *pod)
{
    json_t *spec = json_deep_copy(json_object_get(pod, "spec"));
    const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *c;
        json_array_foreach (json_object_get(spec, lists[l]), i, c)
            json_object_del(c, "image");
    }
    json_object_del(spec, "activeDeadlineSeconds");
    json_object_del(spec, "tolerations");
    json_object_del(spec, "terminationGracePeriodSeconds");
    return spec;
}

/* Fields the API server refuses to change on update (422). */
void ks_validate_immutable(struct ks_type *t, json_t *old, json_t *res, json_t *causes)
{
    if (t->crd)
        return;
    const char *p = t->plural;
    if (streq(t->group, "apps") && (streq(p, "daemonsets") || streq(p, "deployments") ||
                                    streq(p, "replicasets") || streq(p, "statefulsets"))) {
        if (!json_equal(kobj_path(old, "spec.selector"), kobj_path(res, "spec.selector"))) {
            char *v = json_dumps(kobj_path(res, "spec.selector"), JSON_COMPACT | JSON_ENCODE_ANY);
            ks_add_cause(causes, "FieldValueInvalid", "spec.selector",
                         "Invalid value: %s: field is immutable", v ? v : "null");
            free(v);
        }
        return;
    }
    if (ks_dra_type(t)) {
        ks_dra_validate_update(t, old, res, causes);
        return;
    }
    if (t->group[0])
        return;
    if (streq(p, "pods")) {
        json_t *a = pod_spec_fixed(old), *b = pod_spec_fixed(res);
        if (!json_equal(a, b))
            ks_add_cause(
                causes, "FieldValueForbidden", "spec",
                "Forbidden: pod updates may not change fields other than "
                "`spec.containers[*].image`,`spec.initContainers[*].image`,"
                "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
                "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
                "set to 1 if it was previously negative)");
        json_decref(a);
        json_decref(b);
    } else if (streq(p, "configmaps") || streq(p, "secrets")) {
        if (!json_is_true(json_object_get(old, "immutable")))
            return;
        if (!json_is_true(json_object_get(res, "immutable")))
            ks_add_cause(causes, "FieldValueForbidden", "immutable",
                         "Forbidden: field is immutable when `immutable` is set");
        const char *const fields[] = {"data", "binaryData"};
        for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
            if (!json_equal(json_object_get(old, fields[i]) ?: json_null(),
                            json_object_get(res, fields[i]) ?: json_null()))
                ks_add_cause(causes, "FieldValueForbidden", fields[i],
                             "Forbidden: field is immutable when `immutable` is set");
    } else if (streq(p, "services")) {
        /* an update without a clusterIP keeps the allocated one, as the API server does */
        json_t *spec = kobj_ensure_object(res, "spec");
        if (!json_object_get(spec, "clusterIP") && kobj_path(old, "spec.clusterIP")) {
            json_object_set(spec, "clusterIP", kobj_path(old, "spec.clusterIP"));
            if (kobj_path(old, "spec.clusterIPs"))
                json_object_set(spec, "clusterIPs", kobj_path(old, "spec.clusterIPs"));
        }
        const char *a = kobj_path_str(old, "spec.clusterIP"),
                   *b = kobj_path_str(res, "spec.clusterIP");
        if (a && !streq_ptr(a, b))
            ks_add_cause(causes, "FieldValueInvalid", "spec.clusterIPs[0]",
                         "Invalid value: \"%s\": field is immutable", b ? b : "");
    }
}

/* ---- the decoder's type checks (400) and value ranges (422) of built-in objects ----------- */

static const char quantity_re[] = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/* As Go's encoding/json names a JSON value in "cannot unmarshal X into ...". */
static void go_json_type(json_t *v, char *buf, size_t n, bool number_value)
{
    if (json_is_number(v) && !number_value) {
        snprintf(buf, n, "number");
        return;
    }
    if (json_is_object(v))
        snprintf(buf, n, "object");
    else if (json_is_array(v))
        snprintf(buf, n, "array");
    else if (json_is_string(v))
        snprintf(buf, n, "string");
    else if (json_is_boolean(v))
        snprintf(buf, n, "bool");
    else if (json_is_real(v))
        snprintf(buf, n, "number %g", json_real_value(v));
    else if (json_is_integer(v))
        snprintf(buf, n, "number %lld", (long long)json_integer_value(v));
    else
        snprintf(buf, n, "null");
}

struct decode {
    struct ks_type *t;
    struct ks_status *st;
    int r;
};

static void decode_fail(struct decode *d, const char *fmt, ...) GPUOP_PRINTF(2, 3);
static void decode_fail(struct decode *d, const char *fmt, ...)
{
    if (d->r < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    struct sbuf b;
    sbuf_init(&b, 1u << 12);
    sbuf_vaddf(&b, fmt, ap);
    va_end(ap);
    _cleanup_free_ char *msg = ks_text_take(&b);
    d->r = ks_status_set(d->st, 400, "BadRequest", NULL,
                         "%s in version \"%s\" cannot be handled as a %s: %s", d->t->kind,
                         d->t->version, d->t->kind, msg);
}

/* v must be a JSON type; "json: cannot unmarshal <v> into Go struct field <field> of type <go>" */
static bool want_type(struct decode *d, json_t *v, int type, const char *field, const char *go)
{
    if (!v || json_is_null(v) || (int)json_typeof(v) == type ||
        (type == JSON_TRUE && json_is_boolean(v)))
        return true;
    char have[64];
    go_json_type(v, have, sizeof(have), false);
    decode_fail(d, "json: cannot unmarshal %s into Go struct field %s of type %s", have, field, go);
    return false;
}

static void decode_string_map(struct decode *d, json_t *meta, const char *key)
{
    json_t *m = json_object_get(meta, key);
    _cleanup_free_ char *field = xasprintf("ObjectMeta.metadata.%s", key);
    if (!want_type(d, m, JSON_OBJECT, field, "map[string]string"))
        return;
    const char *k;
    json_t *v;
    json_object_foreach (m, k, v)
        if (!want_type(d, v, JSON_STRING, field, "string"))
            return;
}

static void decode_meta(struct decode *d, json_t *meta)
{
    if (!want_type(d, meta, JSON_OBJECT, "ObjectMeta.metadata", "v1.ObjectMeta"))
        return;
    decode_string_map(d, meta, "labels");
    decode_string_map(d, meta, "annotations");
    json_t *f = json_object_get(meta, "finalizers");
    size_t i;
    json_t *v;
    if (want_type(d, f, JSON_ARRAY, "ObjectMeta.metadata.finalizers", "[]string"))
        json_array_foreach (f, i, v)
            if (!want_type(d, v, JSON_STRING, "ObjectMeta.metadata.finalizers", "string"))
                return;
    json_t *refs = json_object_get(meta, "ownerReferences");
    if (!want_type(d, refs, JSON_ARRAY, "ObjectMeta.metadata.ownerReferences",
                   "[]v1.OwnerReference"))
        return;
    static const struct {
        const char *name;
        int type;
        const char *go;
    } fields[] = {{"apiVersion", JSON_STRING, "string"}, {"kind", JSON_STRING, "string"},
                  {"name", JSON_STRING, "string"},       {"uid", JSON_STRING, "types.UID"},
                  {"controller", JSON_TRUE, "bool"},     {"blockOwnerDeletion", JSON_TRUE, "bool"}};
    json_array_foreach (refs, i, v) {
        if (!want_type(d, v, JSON_OBJECT, "ObjectMeta.metadata.ownerReferences",
                       "v1.OwnerReference"))
            return;
        for (size_t k = 0; k < ARRAY_SIZE(fields); k++) {
            _cleanup_free_ char *field =
                xasprintf("OwnerReference.metadata.ownerReferences.%s", fields[k].name);
            if (!want_type(d, json_object_get(v, fields[k].name), fields[k].type, field,
                           fields[k].go))
                return;
        }
    }
}

/* An int32 field: "json: cannot unmarshal ... of type int32" for anything else. */
static void decode_int32(struct decode *d, json_t *v, const char *field)
{
    if (!v || json_is_null(v))
        return;
    json_int_t n = json_integer_value(v);
    if (!json_is_integer(v) || n < INT32_MIN || n > INT32_MAX) {
        char have[64];
        go_json_type(v, have, sizeof(have), true);
        decode_fail(d, "json: cannot unmarshal %s into Go struct field %s of type int32", have,
                    field);
    }
}

/* IntOrString decodes an integer or a string; anything else fails as an int32 would. */
static void decode_intstr(struct decode *d, json_t *v)
{
    if (!v || json_is_null(v) || json_is_string(v) || json_is_integer(v))
        return;
    char have[64];
    go_json_type(v, have, sizeof(have), true);
    decode_fail(d, "json: cannot unmarshal %s into Go value of type int32", have);
}

/* The text of a quantity as the API server shows it, or NULL when it cannot be one. */
static char *quantity_text(json_t *v)
{
    if (json_is_string(v))
        return xstrdup(json_string_value(v));
    if (json_is_integer(v))
        return xasprintf("%lld", (long long)json_integer_value(v));
    if (json_is_real(v))
        return xasprintf("%g", json_real_value(v));
    return NULL;
}

/* Containers' resource requests and limits: 400 for what is no quantity, 422 for negatives. */
static void quantities(struct decode *d, json_t *podspec, const char *path, json_t *causes)
{
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *c;
        json_array_foreach (json_object_get(podspec, lists[l]), i, c) {
            static const char *const kinds[] = {"requests", "limits"};
            for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
                const char *res;
                json_t *q;
                json_object_foreach (kobj_path(json_object_get(c, "resources"), kinds[k]), res, q) {
                    _cleanup_free_ char *s = quantity_text(q);
                    bool neg = false;
                    if (!s || !kobj_valid_quantity(s, &neg)) {
                        decode_fail(d, "quantities must match the regular expression '%s'",
                                    quantity_re);
                        return;
                    }
                    if (neg && causes) {
                        _cleanup_free_ char *f = xasprintf("%s.%s[%zu].resources.%s[%s]", path,
                                                           lists[l], i, kinds[k], res);
                        ks_add_cause(causes, "FieldValueInvalid", f,
                                     "Invalid value: \"%s\": must be greater than or equal to 0",
                                     s);
                    }
                }
            }
        }
    }
}

/* The int-or-string fields of a type: path and whether a string must be a percentage. */
struct intstr_field {
    const char *group, *plural, *path;
};
static const struct intstr_field intstr_fields[] = {
    {"apps", "daemonsets", "spec.updateStrategy.rollingUpdate.maxUnavailable"},
    {"apps", "daemonsets", "spec.updateStrategy.rollingUpdate.maxSurge"},
    {"apps", "deployments", "spec.strategy.rollingUpdate.maxUnavailable"},
    {"apps", "deployments", "spec.strategy.rollingUpdate.maxSurge"},
    {"policy", "poddisruptionbudgets", "spec.minAvailable"},
    {"policy", "poddisruptionbudgets", "spec.maxUnavailable"},
};

static bool is_workload(struct ks_type *t)
{
    return streq(t->group, "apps") &&
           (streq(t->plural, "deployments") || streq(t->plural, "replicasets") ||
            streq(t->plural, "statefulsets") || streq(t->plural, "daemonsets"));
}

int ks_decode_check(struct ks_type *t, json_t *obj, struct ks_status *st)
{
    struct decode d = {.t = t, .st = st};
    if (t->crd)
        return 0;
    decode_meta(&d, json_object_get(obj, "metadata"));
    if (is_workload(t) && !streq(t->plural, "daemonsets")) {
        char field[64];
        snprintf(field, sizeof(field), "%sSpec.spec.replicas", t->kind);
        decode_int32(&d, kobj_path(obj, "spec.replicas"), field);
    }
    for (size_t i = 0; i < ARRAY_SIZE(intstr_fields); i++)
        if (streq(t->group, intstr_fields[i].group) && streq(t->plural, intstr_fields[i].plural))
            decode_intstr(&d, kobj_path(obj, intstr_fields[i].path));
    if (!t->group[0] && streq(t->plural, "pods"))
        quantities(&d, json_object_get(obj, "spec"), "spec", NULL);
    else if (is_workload(t))
        quantities(&d, kobj_path(obj, "spec.template.spec"), "spec.template.spec", NULL);
    return d.r;
}

/* Value ranges the API server's validation checks on built-in objects (422). */
static void validate_values(struct ks_type *t, json_t *obj, json_t *causes)
{
    struct ks_status ignore = {0};
    struct decode d = {.t = t, .st = &ignore};
    if (is_workload(t) && !streq(t->plural, "daemonsets")) {
        json_t *r = kobj_path(obj, "spec.replicas");
        if (json_is_integer(r) && json_integer_value(r) < 0)
            ks_add_cause(causes, "FieldValueInvalid", "spec.replicas",
                         "Invalid value: %lld: must be greater than or equal to 0",
                         (long long)json_integer_value(r));
    }
    for (size_t i = 0; i < ARRAY_SIZE(intstr_fields); i++) {
        if (!streq(t->group, intstr_fields[i].group) || !streq(t->plural, intstr_fields[i].plural))
            continue;
        json_t *v = kobj_path(obj, intstr_fields[i].path);
        if (json_is_integer(v) && json_integer_value(v) < 0)
            ks_add_cause(causes, "FieldValueInvalid", intstr_fields[i].path,
                         "Invalid value: %lld: must be greater than or equal to 0",
                         (long long)json_integer_value(v));
        const char *pct = json_string_value(v);
        if (pct && !kobj_valid_percent(pct))
            ks_add_cause(causes, "FieldValueInvalid", intstr_fields[i].path,
                         "Invalid value: \"%s\": a valid percent string must be a numeric string "
                         "followed by an ending '%%' (e.g. '1%%',  or '93%%', regex used for "
                         "validation is '[0-9]+%%')",
                         pct);
        else if (pct && str_has_suffix(intstr_fields[i].path, "maxUnavailable") &&
                 strtol(pct, NULL, 10) > 100)
            ks_add_cause(causes, "FieldValueInvalid", intstr_fields[i].path,
                         "Invalid value: \"%s\": must not be greater than 100%%", pct);
    }
    if (!t->group[0] && streq(t->plural, "pods"))
        quantities(&d, json_object_get(obj, "spec"), "spec", causes);
    else if (is_workload(t))
        quantities(&d, kobj_path(obj, "spec.template.spec"), "spec.template.spec", causes);
    ks_status_clear(&ignore);
}
