/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The remediation inputs on untrusted bytes: the first byte picks one, the rest is its input.
 * 'h' a node's health annotation (gh_health_parse, then written back and read again); 'p' a
 * pool's spec.remediation (YAML); 'w' a whole world as JSON ({nodes, pods, pdbs, pools, policy,
 * cluster, now}) planned twice, from its pods as given and compact (upg_pod_compact), each
 * plan checked for the invariants the header states.
 * Any input ends in a plan or a clear error, never a crash or a leak.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpuhealth.h"
#include "kobj.h"
#include "remediation.h"
#include "upgrade.h"
#include "yamlcfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void world(const char *in, size_t n)
{
    json_error_t je;
    _cleanup_json_ json_t *w = json_loadb(in, n, 0, &je);
    if (!json_is_object(w))
        return;
    struct rem_policy pol;
    struct err e = {0};
    if (rem_policy_parse(json_object_get(w, "policy"), "policy", &pol, &e) < 0)
        return;
    json_t *now = json_object_get(w, "now");
    struct rem_input ri = {.nodes = json_object_get(w, "nodes"),
                           .pods = json_object_get(w, "pods"),
                           .pdbs = json_object_get(w, "pdbs"),
                           .pools = json_object_get(w, "pools"),
                           .policy = &pol,
                           .max_unavailable = NULL,
                           .cluster_annotations = json_object_get(w, "cluster"),
                           .validation_enabled = true,
                           .now_ms = json_is_integer(now) ? json_integer_value(now) : 1};
    if (!json_is_array(ri.nodes) || (ri.pods && !json_is_array(ri.pods)) ||
        (ri.pdbs && !json_is_array(ri.pdbs)) || (ri.pools && !json_is_array(ri.pools)) ||
        (ri.cluster_annotations && !json_is_object(ri.cluster_annotations))) {
        rem_policy_done(&pol);
        return;
    }
    /* once from the pods as given, once from them compact as the operator hands them over
     * (upg_pod_compact: what is no pod with a name is left out) */
    _cleanup_json_ json_t *intern = json_object(), *compact = json_array();
    size_t i;
    json_t *pod;
    json_array_foreach (ri.pods, i, pod) {
        json_t *c = upg_pod_compact(pod, intern);
        if (c) {
            assert(upg_pod_is_compact(c) && upg_pod_name(c));
            json_array_append_new(compact, c);
        }
    }
    for (int run = 0; run < 2; run++) {
        if (run == 1)
            ri.pods = compact;
        struct rem_plan *p = NULL;
        if (rem_plan(&ri, &p, &e) == 0) {
            int sum = 0;
            for (int s = 0; s < REM_N_STATES; s++)
                sum += p->counts[s];
            assert(sum >= 0 && (size_t)sum <= json_array_size(ri.nodes));
            assert(p->n_patches <= json_array_size(ri.nodes));
            size_t nh;
            free(rem_plan_holds(p, &nh));
            rem_plan_free(p);
        }
    }
    assert(kobj_intern_check(intern));
    rem_policy_done(&pol);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *in = (const char *)data + 1;
    size_t n = size - 1;
    struct err e = {0};
    switch (data[0]) {
    case 'h': {
        struct gh_health h;
        if (gh_health_parse(in, n, &h, &e) == 0) {
            char *text = gh_health_format(&h);
            struct gh_health back;
            int r = gh_health_parse(text, strlen(text), &back, &e);
            assert(r == 0 && back.seq == h.seq && back.n_faults == h.n_faults);
            (void)r;
            free(text);
        }
        return 0;
    }
    case 'p': {
        _cleanup_json_ json_t *v = NULL;
        if (yaml_parse_one(in, n, "fuzz", &v, &e) < 0)
            return 0;
        struct rem_policy p;
        if (rem_policy_parse(v, "spec.remediation", &p, &e) == 0)
            rem_policy_done(&p);
        return 0;
    }
    case 'w':
        world(in, n);
        return 0;
    default:
        return 0;
    }
}
