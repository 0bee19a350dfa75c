/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The upgrade planner's parsers on untrusted bytes: the first byte picks one, the rest is its
 * input. 'm' the compatibility matrix (a ConfigMap's text), 's' a label selector (a policy's
 * podSelector), 'p' a DriverUpgradePool (YAML), 'u' a ClusterPolicy's upgradePolicy (YAML), 'z' a
 * time zone's TZif file (its rules then asked for offsets, wall times and a window), 'c' a Pod
 * (JSON) made compact (upg_pod_compact), which must read as the Pod does.
 * Any input ends in a value or a clear error, never a crash or a leak.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "upgrade.h"
#include "yamlcfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *nonempty(const char *s)
{
    return s && *s ? s : NULL;
}

/* Every accessor reads the same from the Pod and from its compact form. */
static void pod_compact(const char *in, size_t n)
{
    _cleanup_json_ json_t *pod = json_loadb(in, n, 0, NULL);
    _cleanup_json_ json_t *intern = json_object();
    _cleanup_json_ json_t *c = upg_pod_compact(pod, intern);
    if (!c) {
        assert(!json_is_object(pod) || !nonempty(kobj_name(pod)));
        return;
    }
    assert(upg_pod_is_compact(c) && !upg_pod_is_compact(pod));
    assert(streq_ptr(upg_pod_name(c), kobj_name(pod)));
    assert(streq_ptr(upg_pod_node(c), nonempty(upg_pod_node(pod))));
    assert(streq_ptr(upg_pod_created(c), nonempty(upg_pod_created(pod))));
    assert(streq_ptr(upg_pod_deletion(c), nonempty(upg_pod_deletion(pod))));
    const json_t *o = upg_pod_obj(c);
    assert(streq_ptr(kobj_namespace(o), kobj_namespace(pod)));
    assert(json_equal(kobj_path(o, "metadata.labels"), kobj_path(pod, "metadata.labels")) ||
           (!kobj_path(o, "metadata.labels") && !kobj_path(pod, "metadata.labels")));
    assert(upg_pod_ready(c) == upg_pod_ready(pod));
    assert(upg_pod_finished(c) == upg_pod_finished(pod));
    assert(upg_pod_daemon(c) == upg_pod_daemon(pod));
    assert(upg_pod_is_gpu(c) == upg_pod_is_gpu(pod));
    assert(json_array_size(kobj_path(o, "spec.resourceClaims")) ==
           json_array_size(kobj_path(pod, "spec.resourceClaims")));
    assert(kobj_intern_check(intern));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *in = (const char *)data + 1;
    size_t n = size - 1;
    struct err e = {0};
    switch (data[0]) {
    case 'c':
        pod_compact(in, n);
        return 0;
    case 'm': {
        struct upg_matrix *m = NULL;
        if (upg_matrix_parse(in, n, "fuzz", &m, &e) == 0) {
            char *why = NULL;
            if (!upg_matrix_allows(m, "595.91.07", "hopper", "5.15.0", "ubuntu22.04", "12.4", &why))
                free(why);
            upg_matrix_free(m);
        }
        return 0;
    }
    case 's': {
        char *s = strndup(in, n);
        json_t *labels = json_pack("{s:s,s:s}", "app", "x", "tier", "gpu");
        bool match;
        (void)kobj_selector_match(s, labels, &match, &e);
        json_decref(labels);
        free(s);
        return 0;
    }
    case 'p':
    case 'u': {
        _cleanup_json_ json_t *v = NULL;
        if (yaml_parse_one(in, n, "fuzz", &v, &e) < 0)
            return 0;
        if (data[0] == 'p') {
            struct upg_pool p;
            if (upg_pool_parse(v, &p, &e) == 0)
                upg_pool_done(&p);
        } else {
            struct upg_policy p;
            if (upg_policy_parse(v, "upgradePolicy", false, &p, &e) == 0)
                upg_policy_done(&p);
        }
        return 0;
    }
    case 'z': {
        struct upg_tz *tz = NULL;
        if (upg_tz_parse(in, n, "fuzz", &tz, &e) == 0) {
            static const int64_t at[] = {INT32_MIN,  -2840140800, 0,
                                         1774746000, 4118126400,  (int64_t)1 << 40};
            for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
                (void)upg_tz_offset(tz, at[i]);
                (void)upg_tz_local_to_utc(tz, at[i]);
            }
            struct upg_window w = {.days = 0x7f, .start_min = 150, .length_min = 60};
            bool open;
            int64_t next;
            upg_window_state(&w, 1, tz, 1774746000, &open, &next);
            upg_tz_free(tz);
        }
        return 0;
    }
    default:
        return 0;
    }
}
