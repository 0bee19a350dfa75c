/* SPDX-License-Identifier: Apache-2.0 */
/* The OpenAPI v3 subset CRD schemas use, checked the way the API server checks a custom
 * resource; the operator runs it so an invalid ClusterPolicy is caught even by an API server
 * that did not (and so that nothing is deleted because of it). */
#include <string.h>

#include <pthread.h>

#include "operator-internal.h"
#include "operator.h"
#include "yamlcfg.h"

static bool type_matches(const char *type, const json_t *v)
{
    if (strcmp(type, "object") == 0)
        return json_is_object(v);
    if (strcmp(type, "array") == 0)
        return json_is_array(v);
    if (strcmp(type, "string") == 0)
        return json_is_string(v);
    if (strcmp(type, "integer") == 0)
        return json_is_integer(v);
    if (strcmp(type, "number") == 0)
        return json_is_number(v);
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v);
    return true; /* unknown type keyword: not ours to reject */
}

static void value_brief(const json_t *v, char *buf, size_t n)
{
    if (json_is_string(v)) {
        snprintf(buf, n, "\"%.60s\"", json_string_value(v));
        return;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    snprintf(buf, n, "%.60s", s ? s : "?");
    free(s);
}

int op_schema_validate(const json_t *schema, const json_t *value, const char *path, struct err *e)
{
    if (!json_is_object(schema) || !value)
        return 0;
    if (json_is_null(value))
        return 0; /* nullable enough for our purpose: an absent value */

    if (json_is_true(json_object_get(schema, "x-kubernetes-int-or-string"))) {
        if (!json_is_integer(value) && !json_is_string(value))
            return err_set(e, -EINVAL, "%s: expected an integer or a string, got %s", path,
                           cfg_type_name(value));
        return 0;
    }

    const char *type = json_string_value(json_object_get(schema, "type"));
    if (type && !type_matches(type, value))
        return err_set(e, -EINVAL, "%s: expected %s %s, got %s", path,
                       strcmp(type, "integer") == 0 || strcmp(type, "object") == 0 ||
                               strcmp(type, "array") == 0
                           ? "an"
                           : "a",
                       strcmp(type, "object") == 0 ? "object (mapping)" : type,
                       cfg_type_name(value));

    json_t *en = json_object_get(schema, "enum");
    if (json_is_array(en) && json_array_size(en) > 0) {
        bool ok = false;
        size_t i;
        json_t *x;
        json_array_foreach (en, i, x) {
            if (json_equal(x, (json_t *)value)) {
                ok = true;
                break;
            }
        }
        if (!ok) {
            char got[80];
            value_brief(value, got, sizeof(got));
            struct sbuf b _cleanup_sbuf_;
            sbuf_init(&b, 512);
            json_array_foreach (en, i, x) {
                char one[80];
                value_brief(x, one, sizeof(one));
                sbuf_addf(&b, "%s%s", i ? ", " : "", one);
            }
            /* the values that fit, and "..." when there are more */
            return err_set(e, -EINVAL, "%s: unsupported value %s: supported values: %s%s", path,
                           got, b.data ? b.data : "", sbuf_check(&b) < 0 ? ", ..." : "");
        }
    }

    if (json_is_string(value)) {
        size_t len = json_string_length(value);
        json_t *mx = json_object_get(schema, "maxLength");
        json_t *mn = json_object_get(schema, "minLength");
        if (json_is_integer(mx) && (json_int_t)len > json_integer_value(mx))
            return err_set(e, -EINVAL, "%s: longer than %lld characters", path,
                           (long long)json_integer_value(mx));
        if (json_is_integer(mn) && (json_int_t)len < json_integer_value(mn))
            return err_set(e, -EINVAL, "%s: shorter than %lld characters", path,
                           (long long)json_integer_value(mn));
    }
    if (json_is_number(value)) {
        json_t *mn = json_object_get(schema, "minimum");
        if (json_is_number(mn) && json_number_value(value) < json_number_value(mn))
            return err_set(e, -EINVAL, "%s: must be at least %g", path, json_number_value(mn));
    }

    json_t *any = json_object_get(schema, "anyOf");
    if (json_is_array(any) && json_array_size(any) > 0) {
        bool ok = false;
        size_t i;
        json_t *alt;
        json_array_foreach (any, i, alt) {
            struct err ignored = {0};
            if (op_schema_validate(alt, value, path, &ignored) == 0) {
                ok = true;
                break;
            }
        }
        if (!ok)
            return err_set(e, -EINVAL, "%s: %s matches none of the allowed forms", path,
                           cfg_type_name(value));
    }

    if (json_is_object(value)) {
        json_t *props = json_object_get(schema, "properties");
        json_t *req = json_object_get(schema, "required");
        if (json_is_array(req)) {
            size_t i;
            json_t *k;
            json_array_foreach (req, i, k) {
                if (json_is_string(k) && !json_object_get(value, json_string_value(k)))
                    return err_set(e, -EINVAL, "%s.%s: required field is missing", path,
                                   json_string_value(k));
            }
        }
        json_t *addl = json_object_get(schema, "additionalProperties");
        const char *k;
        json_t *v;
        json_object_foreach ((json_t *)value, k, v) {
            json_t *sub = json_is_object(props) ? json_object_get(props, k) : NULL;
            if (!sub && json_is_object(addl))
                sub = addl;
            if (!sub)
                continue; /* pruned by the API server; reported elsewhere when it matters */
            _cleanup_free_ char *sp = xasprintf("%s.%s", path, k);
            int r = op_schema_validate(sub, v, sp, e);
            if (r < 0)
                return r;
        }
    }
    if (json_is_array(value)) {
        json_t *items = json_object_get(schema, "items");
        size_t i;
        json_t *v;
        json_array_foreach (value, i, v) {
            _cleanup_free_ char *sp = xasprintf("%s[%zu]", path, i);
            int r = op_schema_validate(items, v, sp, e);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

/* ---- the compiled-in CRDs ----------------------------------------------------------------- */

static json_t *crd_schema(const char *file)
{
    json_t *schema = NULL;
    for (const struct embedded_file *f = op_embedded_crds; f->name; f++) {
        if (strcmp(f->name, file) != 0)
            continue;
        json_t *crd = NULL;
        struct err e = {0};
        if (yaml_parse_one(f->data, f->len, f->name, &crd, &e) < 0)
            break;
        json_t *v0 = json_array_get(json_object_get(json_object_get(crd, "spec"), "versions"), 0);
        json_t *s = json_object_get(json_object_get(v0, "schema"), "openAPIV3Schema");
        if (s)
            schema = json_incref(s);
        json_decref(crd);
    }
    return schema ? schema : json_object(); /* build-time data; tests prove it loads */
}

static json_t *cp_schema, *nvd_schema, *gc_schema;

static void load_schemas(void)
{
    cp_schema = crd_schema("nvidia.com_clusterpolicies.yaml");
    nvd_schema = crd_schema("nvidia.com_nvidiadrivers.yaml");
    gc_schema = crd_schema("nvidia.com_gpuclusters.yaml");
}

static pthread_once_t schemas_once = PTHREAD_ONCE_INIT;

const json_t *op_clusterpolicy_schema(void)
{
    pthread_once(&schemas_once, load_schemas);
    return cp_schema;
}

const json_t *op_nvidiadriver_schema(void)
{
    pthread_once(&schemas_once, load_schemas);
    return nvd_schema;
}

const json_t *op_gpucluster_schema(void)
{
    pthread_once(&schemas_once, load_schemas);
    return gc_schema;
}
