/* SPDX-License-Identifier: Apache-2.0 */
/* Validation as the API server's strategies do it: names, labels, per-type required fields and
 * the fields an update may not change. Findings are appended as Status causes. */
#include <ctype.h>
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
    sbuf_vprintf(&b, fmt, ap);
    va_end(ap);
    json_array_append_new(causes, json_pack("{s:s,s:s,s:s}", "reason", reason, "message",
                                            b.data ? b.data : "", "field", field));
    sbuf_free(&b);
}

static bool dns_label(const char *s, size_t n)
{
    if (n == 0 || n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
            return false;
    return true;
}

static bool dns_subdomain(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    const char *p = s;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        if (!dns_label(p, l))
            return false;
        if (!dot)
            return true;
        p = dot + 1;
    }
}

static const char msg_label[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
static const char msg_subdomain[] =
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
    if (label ? !dns_label(name, strlen(name)) : !dns_subdomain(name))
        ks_add_cause(causes, "FieldValueInvalid", "metadata.name", "Invalid value: \"%s\": %s",
                     name, label ? msg_label : msg_subdomain);
}

void ks_validate_labels(json_t *obj, json_t *causes)
{
    const char *k;
    json_t *v;
    json_object_foreach (jpath(obj, "metadata.labels"), k, v) {
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

void ks_validate_type(struct ksim *ks, struct ks_type *t, json_t *obj, json_t *causes)
{
    (void)ks;
    if (t->crd || t->group[0] == '\0') {
        if (!t->crd && streq(t->plural, "pods") &&
            json_array_size(jpath(obj, "spec.containers")) == 0)
            ks_add_cause(causes, "FieldValueRequired", "spec.containers", "Required value");
        return;
    }
    if (streq(t->group, "apps") &&
        (streq(t->plural, "daemonsets") || streq(t->plural, "deployments") ||
         streq(t->plural, "replicasets"))) {
        json_t *sel = jpath(obj, "spec.selector");
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
        else if (!ksim_selector_matches(s, jpath(obj, "spec.template.metadata.labels")))
            ks_add_cause(causes, "FieldValueInvalid", "spec.template.metadata.labels",
                         "Invalid value: map[]: `selector` does not match template `labels`");
        if (json_array_size(jpath(obj, "spec.template.spec.containers")) == 0)
            ks_add_cause(causes, "FieldValueRequired", "spec.template.spec.containers",
                         "Required value");
    }
    if (streq(t->plural, "customresourcedefinitions")) {
        const char *g = jstr(obj, "spec.group");
        const char *pl = jstr(obj, "spec.names.plural");
        const char *kind = jstr(obj, "spec.names.kind");
        const char *scope = jstr(obj, "spec.scope");
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
        if (json_array_size(jpath(obj, "spec.versions")) == 0)
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
        if (!json_equal(jpath(old, "spec.selector"), jpath(res, "spec.selector"))) {
            char *v = json_dumps(jpath(res, "spec.selector"), JSON_COMPACT | JSON_ENCODE_ANY);
            ks_add_cause(causes, "FieldValueInvalid", "spec.selector",
                         "Invalid value: %s: field is immutable", v ? v : "null");
            free(v);
        }
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
        json_t *spec = jensure(res, "spec");
        if (!json_object_get(spec, "clusterIP") && jpath(old, "spec.clusterIP")) {
            json_object_set(spec, "clusterIP", jpath(old, "spec.clusterIP"));
            if (jpath(old, "spec.clusterIPs"))
                json_object_set(spec, "clusterIPs", jpath(old, "spec.clusterIPs"));
        }
        const char *a = jstr(old, "spec.clusterIP"), *b = jstr(res, "spec.clusterIP");
        if (a && !streq_ptr(a, b))
            ks_add_cause(causes, "FieldValueInvalid", "spec.clusterIPs[0]",
                         "Invalid value: \"%s\": field is immutable", b ? b : "");
    }
}
