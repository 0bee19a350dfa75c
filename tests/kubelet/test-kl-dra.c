/* SPDX-License-Identifier: Apache-2.0 */
/* kl-dra's pure parts, table-driven: the claims a pod uses (by name, from a template through its
 * status, the extended resource claim, a template claim not made yet), the CDI devices each
 * container gets (a whole claim, one request, a subrequest's result, request names left empty,
 * extended-resource mappings, each name once), and the check of a plugin's registration. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kl-dra.h"

/* JSON written with ` for its quotes. */
static json_t *J(const char *text)
{
    char *s = xstrdup(text);
    for (char *p = s; *p; p++)
        if (*p == '`')
            *p = '"';
    json_error_t je;
    json_t *v = json_loads(s, 0, &je);
    if (!v)
        fail_msg("bad fixture: %s: %s", je.text, s);
    free(s);
    return v;
}

static char *dump(json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    for (char *p = s; p && *p; p++)
        if (*p == '"')
            *p = '`';
    return s;
}

static const char pod_text[] =
    "{`metadata`: {`name`: `train`, `namespace`: `ml`, `uid`: `pod-1`}, `spec`: {"
    "`resourceClaims`: [{`name`: `gpus`, `resourceClaimTemplateName`: `two`}, "
    "{`name`: `nic`, `resourceClaimName`: `fabric`}, "
    "{`name`: `none`, `resourceClaimTemplateName`: `maybe`}], "
    "`initContainers`: [{`name`: `setup`, `resources`: {`claims`: [{`name`: `nic`}]}}], "
    "`containers`: ["
    "{`name`: `a`, `resources`: {`claims`: [{`name`: `gpus`, `request`: `big`}, {`name`: `nic`}]}},"
    "{`name`: `b`, `resources`: {`claims`: [{`name`: `gpus`}]}},"
    "{`name`: `c`, `resources`: {`limits`: {`nvidia.com/gpu`: 1}}},"
    "{`name`: `d`}]}, "
    "`status`: {`resourceClaimStatuses`: [{`name`: `gpus`, `resourceClaimName`: "
    "`train-gpus-x7k2q`},"
    " {`name`: `none`}], "
    "`extendedResourceClaimStatus`: {`resourceClaimName`: `train-extended-resources-4bcdf`, "
    "`requestMappings`: [{`containerName`: `c`, `resourceName`: `nvidia.com/gpu`, "
    "`requestName`: `container-3-request-0`}]}}}";

static void test_pod_claims(void **state)
{
    (void)state;
    json_t *pod = J(pod_text);
    json_t *claims = NULL;
    struct err e = {0};
    assert_int_equal(kl_dra_pod_claims(pod, &claims, &e), 0);
    char *got = dump(claims);
    assert_string_equal(got, "[{`podClaim`:`gpus`,`claim`:`train-gpus-x7k2q`},"
                             "{`podClaim`:`nic`,`claim`:`fabric`},"
                             "{`extended`:true,`claim`:`train-extended-resources-4bcdf`}]");
    free(got);
    json_decref(claims);
    /* the template's claim not in the status yet */
    json_object_del(json_object_get(pod, "status"), "resourceClaimStatuses");
    assert_int_equal(kl_dra_pod_claims(pod, &claims, &e), -EAGAIN);
    assert_string_equal(err_msg(&e),
                        "prepare resource claim: pod \"ml/train\": ResourceClaim not created yet");
    json_decref(pod);
}

struct cc {
    const char *container;
    const char *want; /* the CDI names, ` for quotes */
};

static void test_container_cdi(void **state)
{
    (void)state;
    json_t *pod = J(pod_text);
    json_t *claims = J("{`gpus`: `uid-g`, `nic`: `uid-n`}");
    json_t *prepared = J(
        "{`uid-g`: [{`requestNames`: [`big/h100`], `cdiDeviceIDs`: [`k8s.gpu/claim=g0`]},"
        "           {`requestNames`: [`small`], `cdiDeviceIDs`: [`k8s.gpu/claim=g1`]},"
        "           {`requestNames`: [`bigger`], `cdiDeviceIDs`: [`k8s.gpu/claim=g9`]},"
        "           {`requestNames`: [], `cdiDeviceIDs`: [`k8s.gpu/claim=shared`, "
        "`k8s.gpu/claim=g0`]}],"
        " `uid-n`: [{`cdiDeviceIDs`: [`k8s.net/nic=n0`]}],"
        " `uid-x`: [{`requestNames`: [`container-3-request-0`], `cdiDeviceIDs`: [`k8s.gpu/x=e0`]},"
        "           {`requestNames`: [`container-9-request-0`], `cdiDeviceIDs`: "
        "[`k8s.gpu/x=e9`]}]}");
    static const struct cc cases[] = {
        /* one request: its devices (a subrequest's result counts for its request) and those
         * serving every request; then the whole nic claim */
        {"a", "[`k8s.gpu/claim=g0`,`k8s.gpu/claim=shared`,`k8s.net/nic=n0`]"},
        /* a whole claim: every device, each name once */
        {"b", "[`k8s.gpu/claim=g0`,`k8s.gpu/claim=g1`,`k8s.gpu/claim=g9`,`k8s.gpu/claim=shared`]"},
        /* the extended resource's mapping */
        {"c", "[`k8s.gpu/x=e0`]"},
        {"d", "[]"},
        {"setup", "[`k8s.net/nic=n0`]"},
        {"nope", "[]"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *ids = kl_dra_container_cdi(pod, cases[i].container, claims, "uid-x", prepared);
        char *got = dump(ids);
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("%s:\n got: %s\nwant: %s", cases[i].container, got, cases[i].want);
        free(got);
        json_decref(ids);
    }
    /* without the extended claim prepared, c gets nothing */
    json_t *ids = kl_dra_container_cdi(pod, "c", claims, NULL, prepared);
    assert_int_equal(json_array_size(ids), 0);
    json_decref(ids);
    json_decref(prepared);
    json_decref(claims);
    json_decref(pod);
}

static void test_check_plugin(void **state)
{
    (void)state;
    const char *v1[] = {"v1beta1.DRAPlugin", "v1.DRAPlugin"};
    const char *old[] = {"v1beta1.DRAPlugin"};
    struct err e = {0};
    assert_int_equal(kl_dra_check_plugin("/r/a.sock", "DRAPlugin", "gpu.nvidia.com",
                                         "/var/lib/kubelet/plugins/gpu.nvidia.com/dra.sock", v1, 2,
                                         &e),
                     0);
    assert_int_equal(kl_dra_check_plugin("/r/a.sock", "CSIPlugin", "x", "/x", v1, 2, &e), -EINVAL);
    assert_string_equal(err_msg(&e), "RegisterPlugin error -- no handler registered for plugin "
                                     "type: CSIPlugin at socket /r/a.sock");
    err_clear(&e);
    assert_int_equal(kl_dra_check_plugin("/r/a.sock", "DRAPlugin", "x", "/x", old, 1, &e), -EINVAL);
    assert_string_equal(err_msg(&e), "invalid versions of plugin x: none of the supported services "
                                     "[v1beta1.DRAPlugin] is implemented by this kubelet "
                                     "[v1.DRAPlugin]");
    err_clear(&e);
    assert_int_equal(kl_dra_check_plugin("/r/a.sock", "DRAPlugin", "x", "/x", NULL, 0, &e),
                     -EINVAL);
    assert_string_equal(err_msg(&e),
                        "invalid versions of plugin x: empty list of supported versions");
    err_clear(&e);
    assert_int_equal(kl_dra_check_plugin("/r/a.sock", "DRAPlugin", "", "/x", v1, 2, &e), -EINVAL);
    err_clear(&e);
    assert_int_equal(kl_dra_check_plugin("/r/a.sock", "DRAPlugin", "x", "dra.sock", v1, 2, &e),
                     -EINVAL);
    err_clear(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pod_claims),
        cmocka_unit_test(test_container_cdi),
        cmocka_unit_test(test_check_plugin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
