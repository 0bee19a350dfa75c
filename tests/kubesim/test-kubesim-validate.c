/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim validates built-in objects as the API server does: type-confused fields are 400 with
 * the decoder's message, invalid values 422 with the field path. A table of bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kubesim.h"

static const char *const cm_path = "/api/v1/namespaces/default/configmaps";
static const char *const pod_path = "/api/v1/namespaces/default/pods";
static const char *const deploy_path = "/apis/apps/v1/namespaces/default/deployments";
static const char *const ds_path = "/apis/apps/v1/namespaces/default/daemonsets";
static const char *const pdb_path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";

#define CM(meta) \
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\"," meta "}}"
#define POD(res)                                                                       \
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{" \
    "\"containers\":[{\"name\":\"c\",\"image\":\"i:1\",\"resources\":" res "}]}}"
#define TEMPLATE                                                                                  \
    "\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":{\"metadata\":{\"labels\":{\"a\":" \
    "\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i:1\"}]}}"
#define DEPLOY(spec)          \
    "{\"apiVersion\":\"apps/" \
    "v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"d\"},\"spec\":{" spec TEMPLATE "}}"
#define DS(ru)                                                                                    \
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"d\"},\"spec\":{" \
    "\"updateStrategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":" ru "}," TEMPLATE "}}"
#define PDB(spec)                                                                            \
    "{\"apiVersion\":\"policy/v1\",\"kind\":\"PodDisruptionBudget\",\"metadata\":{\"name\":" \
    "\"b\"},\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}}," spec "}}"

static const struct row {
    const char *path, *body;
    int code;
    const char *message; /* a part of the Status message */
} rows[] = {
    /* the decoder: 400 */
    {cm_path, CM("\"labels\":{\"a\":1}"), 400,
     "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number "
     "into Go struct field ObjectMeta.metadata.labels of type string"},
    {cm_path, CM("\"labels\":[\"a\"]"), 400,
     "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type "
     "map[string]string"},
    {cm_path, CM("\"annotations\":{\"a\":true}"), 400,
     "json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.annotations of type "
     "string"},
    {cm_path, CM("\"finalizers\":\"x\""), 400,
     "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.finalizers of type "
     "[]string"},
    {cm_path, CM("\"finalizers\":[1]"), 400,
     "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.finalizers of type "
     "string"},
    {cm_path, CM("\"ownerReferences\":{}"), 400,
     "json: cannot unmarshal object into Go struct field ObjectMeta.metadata.ownerReferences of "
     "type []v1.OwnerReference"},
    {cm_path, CM("\"ownerReferences\":[{\"name\":1}]"), 400,
     "json: cannot unmarshal number into Go struct field OwnerReference.metadata.ownerReferences."
     "name of type string"},
    {cm_path, CM("\"ownerReferences\":[{\"controller\":\"yes\"}]"), 400,
     "json: cannot unmarshal string into Go struct field OwnerReference.metadata.ownerReferences."
     "controller of type bool"},
    {deploy_path, DEPLOY("\"replicas\":\"3\","), 400,
     "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal "
     "string into Go struct field DeploymentSpec.spec.replicas of type int32"},
    {ds_path, DS("{\"maxUnavailable\":true}"), 400,
     "json: cannot unmarshal bool into Go value of type int32"},
    {pod_path, POD("{\"limits\":{\"cpu\":\"lots\"}}"), 400,
     "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
    /* validation: 422 with the field path */
    {deploy_path, DEPLOY("\"replicas\":-1,"), 422,
     "spec.replicas: Invalid value: -1: must be greater than or "
     "equal to 0"},
    {ds_path, DS("{\"maxUnavailable\":-1}"), 422,
     "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: -1: must be greater than "
     "or equal to 0"},
    {deploy_path,
     DEPLOY("\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":-2}},"), 422,
     "spec.strategy.rollingUpdate.maxSurge: Invalid value: -2: must be greater than or equal to "
     "0"},
    {pdb_path, PDB("\"minAvailable\":-1"), 422,
     "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"},
    {pod_path, POD("{\"requests\":{\"cpu\":\"-1\"}}"), 422,
     "spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or "
     "equal to 0"},
    /* an int-or-string string must be a percentage */
    {ds_path, DS("{\"maxUnavailable\":\"1\"}"), 422,
     "DaemonSet.apps \"d\" is invalid: spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid "
     "value: "
     "\"1\": a valid percent string must be a numeric string followed by an ending '%' (e.g. "
     "'1%',  or '93%', regex used for validation is '[0-9]+%')"},
    {deploy_path,
     DEPLOY("\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxUnavailable\":"
            "\"150%\"}},"),
     422,
     "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"150%\": must not be greater "
     "than 100%"},
    /* valid: 201 */
    {ds_path, DS("{\"maxUnavailable\":1}"), 201, NULL},
    {ds_path, DS("{\"maxUnavailable\":\"10%\"}"), 201, NULL},
    {pod_path, POD("{\"limits\":{\"cpu\":\"500m\",\"memory\":\"1Gi\",\"nvidia.com/gpu\":1}}"), 201,
     NULL},
    {deploy_path, DEPLOY("\"replicas\":0,"), 201, NULL},
};

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct ksim *ks = ksim_new(NULL);
        struct ksim_request rq = {.method = "POST",
                                  .path = rows[i].path,
                                  .content_type = "application/json",
                                  .accept = "application/json",
                                  .body = rows[i].body,
                                  .body_len = strlen(rows[i].body)};
        struct ksim_response rs;
        ksim_handle(ks, &rq, &rs);
        json_t *st = rs.body ? json_loads(rs.body, 0, NULL) : NULL;
        const char *msg = json_string_value(json_object_get(st, "message"));
        if (rs.code != rows[i].code ||
            (rows[i].message && (!msg || !strstr(msg, rows[i].message)))) {
            fprintf(stderr, "row %zu: %s\n  got %d %s\n  want %d %s\n", i, rows[i].body, rs.code,
                    rs.body ? rs.body : "", rows[i].code, rows[i].message ? rows[i].message : "");
            fail();
        }
        if (rows[i].code == 400)
            assert_string_equal(json_string_value(json_object_get(st, "reason")), "BadRequest");
        json_decref(st);
        ksim_response_free(&rs);
        ksim_free(ks);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
