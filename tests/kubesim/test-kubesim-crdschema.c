/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's CRD structural schemas: defaulting and pruning (the object an API server stores) and
 * validation (the causes of its 422), over the project's own ClusterPolicy and NVIDIADriver CRDs
 * and small schemas. Tables of bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ks-crd-schema.h"
#include "util.h"
#include "yamlcfg.h"

/* A schema by name: "CP" and "NVD" are the project's CRDs (deploy/crds/), anything else is a
 * schema as JSON. */
static json_t *crd_schema_json(const char *file)
{
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    assert_non_null(src);
    _cleanup_free_ char *path = xasprintf("%s/deploy/crds/%s", src, file);
    json_t *crd = NULL;
    struct err e = {0};
    assert_int_equal(yaml_load_file(path, &crd, &e), 0);
    json_t *s = json_object_get(
        json_object_get(
            json_array_get(json_object_get(json_object_get(crd, "spec"), "versions"), 0), "schema"),
        "openAPIV3Schema");
    assert_true(json_is_object(s));
    json_incref(s);
    json_decref(crd);
    return s;
}

static struct ks_crd_schema *schema_for(const char *name)
{
    json_t *j;
    if (strcmp(name, "CP") == 0) {
        j = crd_schema_json("nvidia.com_clusterpolicies.yaml");
    } else if (strcmp(name, "NVD") == 0) {
        j = crd_schema_json("nvidia.com_nvidiadrivers.yaml");
    } else {
        json_error_t je;
        j = json_loads(name, 0, &je);
        if (!j)
            fail_msg("schema %s: %s", name, je.text);
    }
    struct ks_crd_schema *s = ks_crd_schema_new(j);
    json_decref(j);
    assert_non_null(s);
    return s;
}

static json_t *parse(const char *s)
{
    json_error_t je;
    json_t *j = json_loads(s, JSON_DECODE_ANY, &je);
    if (!j)
        fail_msg("%s: %s", s, je.text);
    return j;
}

/* The smallest ClusterPolicy the schema takes: the sections it requires. */
#define CP_REQ                                                                             \
    "\"daemonsets\":{},\"dcgm\":{},\"dcgmExporter\":{},\"devicePlugin\":{},\"driver\":{}," \
    "\"gfd\":{},\"nodeStatusExporter\":{},\"operator\":{},\"toolkit\":{}"
#define CP(spec)                                                                                   \
    "{\"apiVersion\":\"nvidia.com/v1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":\"cp\"}," \
    "\"spec\":{" spec "}}"
#define CP_DEFAULTED                                                                         \
    "\"daemonsets\":{\"updateStrategy\":\"RollingUpdate\"},\"dcgm\":{},\"dcgmExporter\":{}," \
    "\"devicePlugin\":{},\"driver\":{\"kernelModuleType\":\"auto\"},\"gfd\":{},"             \
    "\"nodeStatusExporter\":{},\"operator\":{\"runtimeClass\":\"nvidia\"},"                  \
    "\"toolkit\":{\"installDir\":\"/usr/local/nvidia\"}"

/* ---- defaulting and pruning --------------------------------------------------------------- */

static const struct admit_row {
    const char *schema, *in, *want;
} admit_rows[] = {
    /* omitted fields read back with the CRD's defaults; unknown fields are pruned */
    {"CP", CP(CP_REQ), CP(CP_DEFAULTED)},
    {"CP", CP(CP_REQ ",\"bogus\":1,\"mig\":{\"strategy\":\"single\",\"x\":true}"),
     CP(CP_DEFAULTED ",\"mig\":{\"strategy\":\"single\"}")},
    {"CP",
     "{\"apiVersion\":\"nvidia.com/v1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":"
     "\"cp\",\"labels\":{\"a\":\"b\"}},\"spec\":{" CP_REQ "},\"extra\":{}}",
     "{\"apiVersion\":\"nvidia.com/v1\",\"kind\":\"ClusterPolicy\",\"metadata\":{\"name\":"
     "\"cp\",\"labels\":{\"a\":\"b\"}},\"spec\":{" CP_DEFAULTED "}}"},
    /* nested defaults: a defaulted object's own defaults apply once the object exists */
    {"CP", CP(CP_REQ ",\"driver\":{\"upgradePolicy\":{\"drain\":{}}}"),
     CP("\"daemonsets\":{\"updateStrategy\":\"RollingUpdate\"},\"dcgm\":{},\"dcgmExporter\":{},"
        "\"devicePlugin\":{},\"driver\":{\"kernelModuleType\":\"auto\",\"upgradePolicy\":{"
        "\"autoUpgrade\":false,\"maxParallelUpgrades\":1,\"maxUnavailable\":\"25%\",\"drain\":{"
        "\"enable\":false,\"force\":false,\"deleteEmptyDir\":false,\"timeoutSeconds\":300}}},"
        "\"gfd\":{},\"nodeStatusExporter\":{},\"operator\":{\"runtimeClass\":\"nvidia\"},"
        "\"toolkit\":{\"installDir\":\"/usr/local/nvidia\"}")},
    /* a null without a default is dropped; with one it is defaulted */
    {"CP", CP(CP_REQ ",\"mig\":null,\"operator\":{\"runtimeClass\":null}"), CP(CP_DEFAULTED)},
    /* items of arrays are defaulted and pruned through items */
    {"CP",
     CP(CP_REQ ",\"dcgmExporter\":{\"serviceMonitor\":{\"relabelings\":[{\"x\":1,"
               "\"targetLabel\":\"t\"}]}}"),
     CP("\"daemonsets\":{\"updateStrategy\":\"RollingUpdate\"},\"dcgm\":{},\"dcgmExporter\":{"
        "\"serviceMonitor\":{\"relabelings\":[{\"action\":\"replace\",\"targetLabel\":\"t\"}]}},"
        "\"devicePlugin\":{},\"driver\":{\"kernelModuleType\":\"auto\"},\"gfd\":{},"
        "\"nodeStatusExporter\":{},\"operator\":{\"runtimeClass\":\"nvidia\"},"
        "\"toolkit\":{\"installDir\":\"/usr/local/nvidia\"}")},
    /* x-kubernetes-preserve-unknown-fields keeps a subtree; additionalProperties types map values
     */
    {"NVD",
     "{\"kind\":\"NVIDIADriver\",\"spec\":{\"resources\":{\"limits\":{\"x\":1}},\"nodeSelector\":"
     "{\"a\":\"b\"},\"what\":1}}",
     "{\"kind\":\"NVIDIADriver\",\"spec\":{\"resources\":{\"limits\":{\"x\":1}},\"nodeSelector\":"
     "{\"a\":\"b\"},\"default\":false,\"driverType\":\"gpu\",\"kernelModuleType\":\"auto\","
     "\"image\":\"nvcr.io/nvidia/driver\"}}"},
    /* embedded resources keep apiVersion, kind and metadata */
    {"{\"type\":\"object\",\"properties\":{\"tpl\":{\"type\":\"object\","
     "\"x-kubernetes-embedded-resource\":true,\"properties\":{\"spec\":{\"type\":\"object\"}}}}}",
     "{\"tpl\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{},"
     "\"junk\":1}}",
     "{\"tpl\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{}}"
     "}"},
    /* additionalProperties: true keeps everything */
    {"{\"type\":\"object\",\"additionalProperties\":true}", "{\"a\":{\"b\":1}}",
     "{\"a\":{\"b\":1}}"},
};

static void test_admit(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(admit_rows); i++) {
        const struct admit_row *r = &admit_rows[i];
        _cleanup_(ks_crd_schema_freep) struct ks_crd_schema *s = schema_for(r->schema);
        json_t *obj = parse(r->in), *want = parse(r->want);
        ks_crd_schema_admit(s, obj);
        if (!json_equal(obj, want)) {
            char *got = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
            fail_msg("row %zu: got %s", i, got);
        }
        /* admitted once, admitted: the second pass changes nothing */
        ks_crd_schema_admit(s, obj);
        assert_true(json_equal(obj, want));
        json_decref(obj);
        json_decref(want);
    }
}

/* ---- validation --------------------------------------------------------------------------- */

#define NUM "{\"type\":\"object\",\"properties\":{\"n\":"

static const struct validate_row {
    const char *schema, *old, *obj;
    const char *want; /* "<reason> <field>: <message>" per cause, joined by "\n"; "" valid */
} validate_rows[] = {
    {"CP", NULL, CP(CP_DEFAULTED), ""},
    {"CP", NULL, CP(CP_DEFAULTED ",\"driver\":{\"enabled\":\"yes\"}"),
     "FieldValueTypeInvalid spec.driver.enabled: Invalid value: \"string\": spec.driver.enabled "
     "in body must be of type boolean: \"string\""},
    {"CP", NULL, CP("\"driver\":{\"enabled\":true}"),
     "FieldValueRequired spec.daemonsets: Required value\n"
     "FieldValueRequired spec.dcgm: Required value\n"
     "FieldValueRequired spec.dcgmExporter: Required value\n"
     "FieldValueRequired spec.devicePlugin: Required value\n"
     "FieldValueRequired spec.gfd: Required value\n"
     "FieldValueRequired spec.nodeStatusExporter: Required value\n"
     "FieldValueRequired spec.operator: Required value\n"
     "FieldValueRequired spec.toolkit: Required value"},
    {"CP", NULL, CP(CP_DEFAULTED ",\"mig\":{\"strategy\":\"bogus\"}"),
     "FieldValueNotSupported spec.mig.strategy: Unsupported value: \"bogus\": supported values: "
     "\"none\", \"single\", \"mixed\""},
    /* integer vs string, int-or-string, quantity patterns */
    {"CP", NULL, CP(CP_DEFAULTED ",\"driver\":{\"startupProbe\":{\"periodSeconds\":\"10\"}}"),
     "FieldValueTypeInvalid spec.driver.startupProbe.periodSeconds: Invalid value: \"string\": "
     "spec.driver.startupProbe.periodSeconds in body must be of type integer: \"string\""},
    {"CP", NULL,
     CP(CP_DEFAULTED ",\"driver\":{\"upgradePolicy\":{\"maxUnavailable\":3},\"resources\":{"
                     "\"limits\":{\"memory\":\"64Mi\",\"cpu\":2}}}"),
     ""},
    {"CP", NULL, CP(CP_DEFAULTED ",\"driver\":{\"resources\":{\"limits\":{\"memory\":\"64 MB\"}}}"),
     "FieldValueInvalid spec.driver.resources.limits.memory: Invalid value: \"64 MB\": "
     "spec.driver.resources.limits.memory in body should match '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|"
     "(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$'"},
    {"CP", NULL, CP(CP_DEFAULTED ",\"driver\":{\"upgradePolicy\":{\"maxUnavailable\":true}}"),
     "FieldValueTypeInvalid spec.driver.upgradePolicy.maxUnavailable: Invalid value: \"boolean\": "
     "spec.driver.upgradePolicy.maxUnavailable in body must be of type integer,string: "
     "\"boolean\"\n"
     "FieldValueInvalid spec.driver.upgradePolicy.maxUnavailable: Invalid value: true: "
     "\"spec.driver.upgradePolicy.maxUnavailable\" must validate at least one schema (anyOf)\n"
     "FieldValueTypeInvalid spec.driver.upgradePolicy.maxUnavailable: Invalid value: \"boolean\": "
     "spec.driver.upgradePolicy.maxUnavailable in body must be of type integer: \"boolean\""},
    /* minimum, and required keys of list items */
    {"CP", NULL, CP(CP_DEFAULTED ",\"driver\":{\"upgradePolicy\":{\"maxParallelUpgrades\":-1}}"),
     "FieldValueInvalid spec.driver.upgradePolicy.maxParallelUpgrades: Invalid value: -1: "
     "spec.driver.upgradePolicy.maxParallelUpgrades in body should be greater than or equal to 0"},
    {"CP", NULL, CP(CP_DEFAULTED ",\"toolkit\":{\"env\":[{\"value\":\"v\"}]}"),
     "FieldValueRequired spec.toolkit.env[0].name: Required value"},
    /* status: maxLength, date-time, enum */
    {"CP", NULL,
     "{\"spec\":{" CP_DEFAULTED "},\"status\":{\"state\":\"ready\",\"conditions\":[{\"type\":"
     "\"Ready\",\"status\":\"Maybe\",\"reason\":\"R\",\"message\":\"\",\"lastTransitionTime\":"
     "\"yesterday\"}]}}",
     "FieldValueNotSupported status.conditions[0].status: Unsupported value: \"Maybe\": supported "
     "values: \"True\", \"False\", \"Unknown\"\n"
     "FieldValueTypeInvalid status.conditions[0].lastTransitionTime: Invalid value: "
     "\"yesterday\": status.conditions[0].lastTransitionTime in body must be of type date-time: "
     "\"yesterday\""},
    /* ratcheting: an unchanged invalid value is not re-validated on update */
    {"CP", CP(CP_DEFAULTED ",\"mig\":{\"strategy\":\"bogus\"}"),
     CP(CP_DEFAULTED ",\"mig\":{\"strategy\":\"bogus\"},\"gfd\":{\"enabled\":true}"), ""},
    /* NVIDIADriver: immutability by the transition rule self == oldSelf */
    {"NVD", "{\"spec\":{\"driverType\":\"gpu\"}}", "{\"spec\":{\"driverType\":\"vgpu\"}}",
     "FieldValueInvalid spec.driverType: Invalid value: \"string\": driverType is immutable"},
    {"NVD", NULL, "{\"spec\":{\"driverType\":\"vgpu\"}}", ""},
    {"NVD", "{\"spec\":{}}", "{\"spec\":{\"usePrecompiled\":true}}", ""},
    /* small schemas: bounds, lengths, items, properties, nullable, combinators */
    {NUM "{\"type\":\"number\",\"maximum\":1.5,\"exclusiveMaximum\":true}}}", NULL, "{\"n\":1.5}",
     "FieldValueInvalid n: Invalid value: 1.5: n in body should be less than 1.5"},
    {NUM "{\"type\":\"integer\",\"minimum\":1,\"exclusiveMinimum\":true}}}", NULL, "{\"n\":1}",
     "FieldValueInvalid n: Invalid value: 1: n in body should be greater than 1"},
    {NUM "{\"type\":\"integer\",\"multipleOf\":5}}}", NULL, "{\"n\":7}",
     "FieldValueInvalid n: Invalid value: 7: n in body should be a multiple of 5"},
    {NUM "{\"type\":\"integer\"}}}", NULL, "{\"n\":1.5}",
     "FieldValueTypeInvalid n: Invalid value: \"number\": n in body must be of type integer: "
     "\"number\""},
    {NUM "{\"type\":\"number\"}}}", NULL, "{\"n\":3}", ""},
    {NUM "{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}}}", NULL, "{\"n\":\"a\"}",
     "FieldValueInvalid n: Invalid value: \"a\": n in body should be at least 2 chars long"},
    {NUM "{\"type\":\"string\",\"maxLength\":3}}}", NULL, "{\"n\":\"\xc3\xa9t\xc3\xa9\"}", ""},
    {NUM "{\"type\":\"string\",\"maxLength\":3}}}", NULL, "{\"n\":\"abcd\"}",
     "FieldValueTooLong n: Too long: may not be more than 3 bytes"},
    {NUM "{\"type\":\"array\",\"maxItems\":1,\"items\":{\"type\":\"string\"}}}}", NULL,
     "{\"n\":[\"a\",2]}",
     "FieldValueTooMany n: Too many: 2: must have at most 1 items\n"
     "FieldValueTypeInvalid n[1]: Invalid value: \"integer\": n[1] in body must be of type "
     "string: \"integer\""},
    {NUM "{\"type\":\"array\",\"minItems\":1}}}", NULL, "{\"n\":[]}",
     "FieldValueInvalid n: Invalid value: []: n in body should have at least 1 items"},
    {NUM "{\"type\":\"object\",\"maxProperties\":1,\"additionalProperties\":{\"type\":"
         "\"boolean\"}}}}",
     NULL, "{\"n\":{\"a\":true,\"b\":\"x\"}}",
     "FieldValueTooMany n: Too many: 2: must have at most 1 items\n"
     "FieldValueTypeInvalid n.b: Invalid value: \"string\": n.b in body must be of type boolean: "
     "\"string\""},
    {NUM "{\"type\":\"string\",\"nullable\":true}}}", NULL, "{\"n\":null}", ""},
    {NUM "{\"type\":\"string\",\"enum\":[\"a\",\"b\"]}}}", NULL, "{\"n\":\"c\"}",
     "FieldValueNotSupported n: Unsupported value: \"c\": supported values: \"a\", \"b\""},
    {NUM "{\"type\":\"integer\",\"enum\":[1,2]}}}", NULL, "{\"n\":3}",
     "FieldValueNotSupported n: Unsupported value: 3: supported values: \"1\", \"2\""},
    {NUM "{\"type\":\"string\",\"not\":{\"enum\":[\"x\"]}}}}", NULL, "{\"n\":\"x\"}",
     "FieldValueInvalid n: Invalid value: \"x\": \"n\" must not validate the schema (not)"},
    /* RE2 syntax: \d, \w and \- in a class, (?:...), lazy quantifiers */
    {NUM "{\"type\":\"string\",\"pattern\":\"^\\\\d+(?:\\\\.\\\\d+)*?$\"}}}", NULL,
     "{\"n\":\"1.22\"}", ""},
    {NUM "{\"type\":\"string\",\"pattern\":\"^\\\\d+(?:\\\\.\\\\d+)*?$\"}}}", NULL,
     "{\"n\":\"1.x\"}",
     "FieldValueInvalid n: Invalid value: \"1.x\": n in body should match "
     "'^\\d+(?:\\.\\d+)*?$'"},
    {NUM "{\"type\":\"string\",\"pattern\":\"^[\\\\w\\\\-.]+$\"}}}", NULL, "{\"n\":\"a-b_c.d\"}",
     ""},
    {NUM "{\"type\":\"string\",\"pattern\":\"^[\\\\w\\\\-.]+$\"}}}", NULL, "{\"n\":\"a b\"}",
     "FieldValueInvalid n: Invalid value: \"a b\": n in body should match '^[\\w\\-.]+$'"},
    /* embedded resources need apiVersion and kind */
    {NUM "{\"type\":\"object\",\"x-kubernetes-embedded-resource\":true}}}", NULL,
     "{\"n\":{\"kind\":\"Pod\"}}",
     "FieldValueRequired n.apiVersion: Required value: must not be empty"},
};

static char *causes_text(json_t *causes)
{
    struct sbuf b;
    sbuf_init(&b, 1u << 16);
    size_t i;
    json_t *c;
    json_array_foreach (causes, i, c)
        sbuf_addf(&b, "%s%s %s: %s", i ? "\n" : "", json_string_value(json_object_get(c, "reason")),
                  json_string_value(json_object_get(c, "field")),
                  json_string_value(json_object_get(c, "message")));
    assert_int_equal(sbuf_check(&b), 0);
    return sbuf_steal(&b);
}

static void test_validate(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(validate_rows); i++) {
        const struct validate_row *r = &validate_rows[i];
        _cleanup_(ks_crd_schema_freep) struct ks_crd_schema *s = schema_for(r->schema);
        json_t *obj = parse(r->obj);
        json_t *old = r->old ? parse(r->old) : NULL;
        json_t *causes = json_array();
        ks_crd_schema_validate(s, obj, old, causes);
        _cleanup_free_ char *got = causes_text(causes);
        if (strcmp(got, r->want) != 0)
            fail_msg("row %zu:\n got: %s\nwant: %s", i, got, r->want);
        json_decref(causes);
        json_decref(obj);
        json_decref(old);
    }
}

/* Every pattern of the project's CRDs is checked (none left to POSIX's gaps). */
static void test_patterns_compiled(void **state)
{
    (void)state;
    _cleanup_(ks_crd_schema_freep) struct ks_crd_schema *cp = schema_for("CP");
    assert_int_equal(ks_crd_schema_unchecked_patterns(cp), 0);
    _cleanup_(ks_crd_schema_freep) struct ks_crd_schema *bad =
        schema_for("{\"type\":\"string\",\"pattern\":\"\\\\bword\\\\b\"}");
    assert_int_equal(ks_crd_schema_unchecked_patterns(bad), 1);
    /* an unchecked pattern accepts rather than rejects */
    json_t *causes = json_array(), *v = json_string("x");
    ks_crd_schema_validate(bad, v, NULL, causes);
    assert_int_equal(json_array_size(causes), 0);
    json_decref(v);
    json_decref(causes);
    assert_null(ks_crd_schema_new(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admit),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_patterns_compiled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
