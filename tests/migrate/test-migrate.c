/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuop migrate's core: Helm release records (round trip, every object kept, delete hooks
 * dropped, bad input named), and the plan on the cluster NVIDIA's operator v24.9.2 leaves
 * (tests/adopt/fixtures): the writes of --from nvidia, a refusal per precondition (each names it
 * and plans no write), and the writes of --to nvidia.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kobj.h"
#include "migrate.h"
#include "yamlcfg.h"

static json_t *y(const char *s)
{
    json_t *v = NULL;
    struct err e = {0};
    if (yaml_parse_one(s, strlen(s), "test", &v, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return v;
}

/* ---- release records ---------------------------------------------------------------------- */

#define MANIFEST                                                                            \
    "---\n# Source: gpu-operator/templates/serviceaccount.yaml\napiVersion: v1\nkind: "     \
    "ServiceAccount\nmetadata:\n  name: gpu-operator\n  namespace: gpu-operator\n---\n# "   \
    "Source: gpu-operator/templates/clusterpolicy.yaml\napiVersion: nvidia.com/v1\nkind: "  \
    "ClusterPolicy\nmetadata:\n  name: cluster-policy\n  annotations:\n    a: b\nspec:\n  " \
    "driver: {enabled: true}\n---   \n\n"

static json_t *release(void)
{
    json_t *rel =
        json_pack("{s:s,s:s,s:i,s:{s:s},s:s,s:[{s:s,s:[s]},{s:s,s:[s]},{s:s,s:[s,s]}]}", "name",
                  "gpu-operator", "namespace", "gpu-operator", "version", 1, "info", "status",
                  "deployed", "manifest", MANIFEST, "hooks", "name", "gpu-operator-upgrade-crd",
                  "events", "pre-upgrade", "name", "gpu-operator-cleanup-crd", "events",
                  "pre-delete", "name", "nfd-prune", "events", "post-delete", "post-upgrade");
    return rel;
}

static void test_release_round_trip(void **state)
{
    (void)state;
    _cleanup_json_ json_t *rel = release();
    _cleanup_free_ char *data = NULL;
    struct err e = {0};
    assert_int_equal(mig_release_encode(rel, &data, &e), 0);
    /* what the API returns: base64 of Helm's base64 of gzip (magic 1f 8b 08) */
    char *helm = NULL, *gz = NULL;
    size_t hl = 0, gl = 0;
    assert_int_equal(base64_decode(data, strlen(data), &helm, &hl), 0);
    assert_int_equal(base64_decode(helm, hl, &gz, &gl), 0);
    assert_true(gl > 3 && (unsigned char)gz[0] == 0x1f && (unsigned char)gz[1] == 0x8b);
    free(helm);
    free(gz);
    _cleanup_json_ json_t *back = NULL;
    assert_int_equal(mig_release_decode(data, &back, &e), 0);
    assert_true(json_equal(rel, back));
    /* Helm's uncompressed form reads too */
    _cleanup_free_ char *raw = json_dumps(rel, JSON_COMPACT);
    _cleanup_free_ char *h2 = base64_encode(raw, strlen(raw));
    _cleanup_free_ char *d2 = base64_encode(h2, strlen(h2));
    _cleanup_json_ json_t *back2 = NULL;
    assert_int_equal(mig_release_decode(d2, &back2, &e), 0);
    assert_true(json_equal(rel, back2));
    /* bad input: named */
    json_t *bad = NULL;
    assert_int_equal(mig_release_decode("!!!", &bad, &e), -EINVAL);
    assert_string_equal(err_msg(&e), "release record: data.release is not base64");
    _cleanup_free_ char *notgz = base64_encode("\x1f\x8b\x08garbage", 10);
    _cleanup_free_ char *d3 = base64_encode(notgz, strlen(notgz));
    assert_true(mig_release_decode(d3, &bad, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "release record: gzip"));
}

static void test_release_keep_all(void **state)
{
    (void)state;
    _cleanup_json_ json_t *rel = release();
    size_t docs = 0, hooks = 0;
    struct err e = {0};
    assert_int_equal(mig_release_keep_all(rel, &docs, &hooks, &e), 0);
    assert_int_equal(docs, 2);
    assert_int_equal(hooks, 2); /* pre-delete and post-delete; pre-upgrade stays */
    assert_int_equal(json_array_size(json_object_get(rel, "hooks")), 1);
    const char *m = kobj_str(rel, "manifest");
    assert_non_null(strstr(m, "---\n# Source: gpu-operator/templates/serviceaccount.yaml\n{"));
    _cleanup_json_ json_t *parsed = NULL;
    assert_int_equal(yaml_parse_all(m, strlen(m), "manifest", &parsed, &e), 0);
    size_t i, n = 0;
    json_t *d;
    json_array_foreach (parsed, i, d) {
        if (!json_is_object(d) || json_object_size(d) == 0)
            continue;
        n++;
        assert_string_equal(kobj_annotation(d, "helm.sh/resource-policy"), "keep");
    }
    assert_int_equal(n, 2);
    /* the rest of each object is as it was */
    json_t *cp = json_array_get(parsed, json_array_size(parsed) - 1);
    assert_string_equal(kobj_annotation(cp, "a"), "b");
    assert_true(json_is_true(kobj_path(cp, "spec.driver.enabled")));
    /* a document that does not parse: named, nothing changed */
    _cleanup_json_ json_t *bad = release();
    json_object_set_new(bad, "manifest", json_string("---\nkind: A\n---\nkind: [b\n"));
    _cleanup_json_ json_t *before = json_deep_copy(bad);
    assert_true(mig_release_keep_all(bad, &docs, &hooks, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "release gpu-operator: release manifest document 2"));
    assert_true(json_equal(bad, before));
}

/* ---- plans -------------------------------------------------------------------------------- */

/* The world NVIDIA's operator leaves (tests/adopt/fixtures), with its chart's operator
 * Deployment at 0 replicas, the CRDs and its release record. */
static json_t *world_json(void)
{
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    _cleanup_free_ char *path =
        xasprintf("%s/tests/adopt/fixtures/nvidia-v24.9.2.yaml", src ? src : ".");
    json_t *f = NULL;
    struct err e = {0};
    if (yaml_load_file(path, &f, &e) < 0)
        fail_msg("%s", err_msg(&e));
    json_object_set_new(
        f, "deployments",
        y("- kind: Deployment\n  metadata: {name: gpu-operator, namespace: gpu-operator, labels: "
          "{app.kubernetes.io/managed-by: Helm, app.kubernetes.io/name: gpu-operator}}\n  spec: "
          "{replicas: 0, selector: {matchLabels: {app: gpu-operator, app.kubernetes.io/component: "
          "gpu-operator}}, template: {metadata: {labels: {app: gpu-operator, "
          "app.kubernetes.io/component: gpu-operator}}}}\n"));
    json_object_set_new(
        f, "crds",
        y("- metadata: {name: clusterpolicies.nvidia.com}\n  spec: {versions: [{name: v1}]}\n  "
          "status: {storedVersions: [v1]}\n- metadata: {name: nvidiadrivers.nvidia.com}\n  spec: "
          "{versions: [{name: v1alpha1}]}\n"));
    _cleanup_json_ json_t *rel = release();
    _cleanup_free_ char *data = NULL;
    assert_int_equal(mig_release_encode(rel, &data, &e), 0);
    json_object_set_new(f, "releases",
                        json_pack("[{s:s,s:{s:s,s:s,s:{s:s,s:s,s:s,s:s}},s:{s:s}}]", "kind",
                                  "Secret", "metadata", "name",
                                  "sh.helm.release.v1.gpu-operator.v1", "namespace", "gpu-operator",
                                  "labels", "owner", "helm", "name", "gpu-operator", "version", "1",
                                  "status", "deployed", "data", "release", data));
    json_t *policies = json_array();
    json_array_append(policies, json_object_get(f, "policy"));
    json_object_set_new(f, "policies", policies);
    return f;
}

static struct mig_world world_of(const json_t *f, enum mig_direction dir)
{
    return (struct mig_world){.dir = dir,
                              .ns = "gpu-operator",
                              .release = "gpuop",
                              .nvidia_release = "gpu-operator",
                              .deployments = json_object_get(f, "deployments"),
                              .crds = json_object_get(f, "crds"),
                              .policies = json_object_get(f, "policies"),
                              .nodes = json_object_get(f, "nodes"),
                              .pods = json_object_get(f, "pods"),
                              .objects = json_object_get(f, "objects"),
                              .releases = json_object_get(f, "releases")};
}

static char *writes_of(const struct mig_plan *p)
{
    char *out = xstrdup("");
    for (size_t i = 0; i < p->n_writes; i++) {
        const struct mig_write *w = &p->writes[i];
        char *n = xasprintf("%s%d %s %s\n", out, (int)w->kind, w->res_kind, w->name);
        free(out);
        out = n;
    }
    return out;
}

static void test_from_nvidia(void **state)
{
    (void)state;
    _cleanup_json_ json_t *f = world_json();
    struct mig_world w = world_of(f, MIG_FROM_NVIDIA);
    struct mig_plan p;
    struct err e = {0};
    assert_int_equal(mig_plan(&w, &p, &e), 0);
    assert_false(p.refused);
    _cleanup_free_ char *got = writes_of(&p);
    assert_string_equal(got, "0 Deployment gpu-operator\n"
                             "2 ClusterPolicy cluster-policy\n"
                             "2 Service gpu-operator\n"
                             "4 Secret sh.helm.release.v1.gpu-operator.v1\n");
    /* the ClusterPolicy gets gpuop's release's metadata */
    json_t *cp = p.writes[1].body;
    assert_string_equal(kobj_annotation(cp, "meta.helm.sh/release-name"), "gpuop");
    assert_string_equal(kobj_annotation(cp, "meta.helm.sh/release-namespace"), "gpu-operator");
    assert_string_equal(kobj_label(cp, "app.kubernetes.io/managed-by"), "Helm");
    assert_null(p.writes[1].ns);
    /* the release record keeps everything, runs no delete hook */
    json_t *secret = p.writes[3].body;
    _cleanup_json_ json_t *rel = NULL;
    assert_int_equal(mig_release_decode(kobj_path_str(secret, "data.release"), &rel, &e), 0);
    assert_non_null(strstr(kobj_str(rel, "manifest"), "\"helm.sh/resource-policy\": \"keep\""));
    assert_int_equal(json_array_size(json_object_get(rel, "hooks")), 1);
    assert_non_null(kobj_annotation(secret, "migrate.gpuop.dev/kept"));
    /* the takeover plan: the chart's Service counted as gpuop's */
    assert_true(p.has_takeover);
    assert_int_equal(adopt_plan_count(&p.takeover, ADOPT_RECREATE), 2);
    for (size_t i = 0; i < p.takeover.n_items; i++)
        if (streq_ptr(p.takeover.items[i].name, "gpu-operator"))
            assert_int_equal(p.takeover.items[i].action, ADOPT_ADOPT);
    _cleanup_free_ char *text = NULL;
    assert_int_equal(mig_plan_text(&p, false, &text, &e), 0);
    assert_non_null(strstr(text, "gpuop migrate --from nvidia (dry run)\npreconditions:\n  ok   "
                                 "NVIDIA's operator stopped: Deployment gpu-operator/gpu-operator "
                                 "is at 0 replicas, no pod of it runs\n"));
    assert_non_null(strstr(text, "  ok   every GPU node's driver owner: 3 GPU node(s) with a "
                                 "Ready driver pod (left running), 0 with the host's driver\n"));
    assert_non_null(strstr(text, "changes (made with --apply):\n  delete  Deployment "
                                 "gpu-operator/gpu-operator: "));
    assert_non_null(strstr(text, "what gpuop's operator then does, takeover: "));
    assert_non_null(strstr(text, "GPU access: containers that run keep the devices"));
    mig_plan_done(&p);
    /* an earlier run's record is not rewritten again; objects already moved are not patched */
    json_t *s0 = json_array_get(json_object_get(f, "releases"), 0);
    json_object_set_new(
        kobj_ensure_keys(s0, (const char *const[]){"metadata", "annotations", NULL}),
        "migrate.gpuop.dev/kept", json_string("x"));
    json_t *cpol = json_array_get(json_object_get(f, "policies"), 0);
    json_object_set_new(
        kobj_ensure_keys(cpol, (const char *const[]){"metadata", "annotations", NULL}),
        "meta.helm.sh/release-name", json_string("gpuop"));
    json_object_set_new(json_object_get(json_object_get(cpol, "metadata"), "annotations"),
                        "meta.helm.sh/release-namespace", json_string("gpu-operator"));
    json_object_set_new(json_object_get(json_object_get(cpol, "metadata"), "labels"),
                        "app.kubernetes.io/managed-by", json_string("Helm"));
    assert_int_equal(mig_plan(&w, &p, &e), 0);
    _cleanup_free_ char *again = writes_of(&p);
    assert_string_equal(again, "0 Deployment gpu-operator\n2 Service gpu-operator\n");
    mig_plan_done(&p);
}

struct refusal {
    const char *what;
    void (*change)(json_t *f);
    const char *check, *detail;
};

static void running(json_t *f)
{
    json_t *d = json_array_get(json_object_get(f, "deployments"), 0);
    json_object_set_new(json_object_get(d, "spec"), "replicas", json_integer(1));
}
static void running_pod(json_t *f)
{
    json_array_append_new(
        json_object_get(f, "pods"),
        y("metadata: {name: gpu-operator-abc, labels: {app: gpu-operator, "
          "app.kubernetes.io/component: gpu-operator}}\nspec: {nodeName: cpu-1}"));
}
static void two_policies(json_t *f)
{
    json_array_append_new(json_object_get(f, "policies"),
                          y("kind: ClusterPolicy\nmetadata: {name: second}\nspec: {}"));
}
static void mid_upgrade(json_t *f)
{
    json_t *n = json_array_get(json_object_get(f, "nodes"), 2);
    json_object_set_new(json_object_get(json_object_get(n, "metadata"), "labels"),
                        "nvidia.com/gpu-driver-upgrade-state", json_string("drain-required"));
}
static void crd_v2(json_t *f)
{
    json_t *c = json_array_get(json_object_get(f, "crds"), 0);
    json_array_append_new(kobj_path(c, "spec.versions"), y("{name: v2}"));
}
static void stored_v1beta1(json_t *f)
{
    json_t *c = json_array_get(json_object_get(f, "crds"), 0);
    json_array_append_new(kobj_path(c, "status.storedVersions"), json_string("v1beta1"));
}
static void no_crd(json_t *f)
{
    json_array_remove(json_object_get(f, "crds"), 0);
}
static void driver_not_ready(json_t *f)
{
    size_t i;
    json_t *p;
    json_array_foreach (json_object_get(f, "pods"), i, p) {
        if (streq_ptr(kobj_name(p), "nvidia-driver-daemonset-gpu-l4"))
            json_object_set_new(json_object_get(p, "status"), "conditions",
                                y("[{type: Ready, status: 'False'}]"));
    }
}
static void nvidiadriver_pod(json_t *f)
{
    json_array_append_new(
        json_object_get(f, "pods"),
        y("metadata: {name: nvidia-gpu-driver-ubuntu22.04-x, labels: {app: "
          "nvidia-gpu-driver-ubuntu22.04-67cfc5d7c}}\nspec: {nodeName: gpu-h100}"));
}
static void pending_release(json_t *f)
{
    json_t *s = json_array_get(json_object_get(f, "releases"), 0);
    json_object_set_new(json_object_get(json_object_get(s, "metadata"), "labels"), "status",
                        json_string("pending-upgrade"));
}
static void gpuop_release_there(json_t *f)
{
    json_array_append_new(json_object_get(f, "releases"),
                          y("metadata: {name: sh.helm.release.v1.gpuop.v1, labels: {owner: helm, "
                            "name: gpuop, version: '1', status: deployed}}"));
}

static const struct refusal refusals[] = {
    {"NVIDIA's operator still running", running, "NVIDIA's operator stopped",
     "Deployment gpu-operator/gpu-operator wants 1 replica(s) and 0 pod(s) of it remain: stop "
     "it first (kubectl -n gpu-operator scale deployment gpu-operator --replicas=0)"},
    {"a pod of NVIDIA's operator left", running_pod, "NVIDIA's operator stopped",
     "Deployment gpu-operator/gpu-operator wants 0 replica(s) and 1 pod(s) of it remain: stop "
     "it first (kubectl -n gpu-operator scale deployment gpu-operator --replicas=0)"},
    {"two ClusterPolicies", two_policies, "one ClusterPolicy",
     "2 ClusterPolicies (cluster-policy, second): both operators act on one; delete the others "
     "first (the one whose status is ignored)"},
    {"an upgrade in flight", mid_upgrade, "no driver upgrade in flight",
     "1 node(s) mid-upgrade: gpu-h100 (drain-required); let the upgrade finish (or fail and be "
     "handled) first"},
    {"an unknown CRD version", crd_v2, "CRD versions",
     "CRD clusterpolicies.nvidia.com has version v2, which gpuop does not know (it knows v1): "
     "nothing is changed"},
    {"an unknown stored version", stored_v1beta1, "CRD versions",
     "CRD clusterpolicies.nvidia.com stores objects at version v1beta1, which gpuop does not "
     "know (it knows v1)"},
    {"no ClusterPolicy CRD", no_crd, "CRD versions",
     "CRD clusterpolicies.nvidia.com is not installed: there is no ClusterPolicy to take over"},
    {"a driver pod not Ready", driver_not_ready, "every GPU node's driver owner",
     "node gpu-l4: its driver pod is not Ready, and its driver is not marked pre-installed: who "
     "owns its driver is unknown (wait for its driver pod, or label the node "
     "nvidia.com/gpu.deploy.driver=pre-installed)"},
    {"an NVIDIADriver's driver", nvidiadriver_pod, "every GPU node's driver owner",
     "node gpu-h100: its driver is run by nvidia-gpu-driver-ubuntu22.04-x, an NVIDIADriver's pod: "
     "a takeover of NVIDIADriver-managed drivers is not supported yet"},
    {"NVIDIA's release mid-upgrade", pending_release, "the release's record settled",
     "Helm release gpu-operator, revision 1, is pending-upgrade: let helm finish first"},
    {"gpuop's release there already", gpuop_release_there, "the target release is free",
     "Helm release gpuop exists already in gpu-operator (deployed): uninstall it or pick another "
     "name"},
};

static void test_refusals(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        const struct refusal *r = &refusals[i];
        _cleanup_json_ json_t *f = world_json();
        r->change(f);
        struct mig_world w = world_of(f, MIG_FROM_NVIDIA);
        struct mig_plan p;
        struct err e = {0};
        assert_int_equal(mig_plan(&w, &p, &e), 0);
        if (!p.refused)
            fail_msg("%s: not refused", r->what);
        assert_int_equal(p.n_writes, 0);
        bool found = false;
        for (size_t k = 0; k < p.n_checks; k++) {
            if (p.checks[k].ok)
                continue;
            if (strcmp(p.checks[k].name, r->check) != 0 || strcmp(p.checks[k].detail, r->detail))
                fail_msg("%s: failed %s: %s", r->what, p.checks[k].name, p.checks[k].detail);
            found = true;
        }
        assert_true(found);
        _cleanup_free_ char *text = NULL;
        assert_int_equal(mig_plan_text(&p, true, &text, &e), 0);
        assert_non_null(strstr(text, "refused: a precondition failed; nothing was changed\n"));
        mig_plan_done(&p);
    }
}

/* The way back: gpuop's objects as the operator made them (the fixture's, relabelled). */
static void test_to_nvidia(void **state)
{
    (void)state;
    _cleanup_json_ json_t *f = world_json();
    json_t *dep = json_array_get(json_object_get(f, "deployments"), 0);
    json_object_set_new(json_object_get(dep, "metadata"), "labels",
                        y("{app.kubernetes.io/name: gpuop, app.kubernetes.io/component: operator, "
                          "app: gpu-operator}"));
    size_t i;
    json_t *o;
    json_array_foreach (json_object_get(f, "objects"), i, o) {
        if (!streq_ptr(kobj_kind(o), "DaemonSet"))
            continue;
        json_t *labels = kobj_ensure_keys(o, (const char *const[]){"metadata", "labels", NULL});
        json_object_set_new(labels, "app.kubernetes.io/managed-by", json_string("gpuop"));
        if (streq_ptr(kobj_name(o), "nvidia-container-toolkit-daemonset"))
            json_object_set_new(kobj_path(o, "spec.template.spec"), "containers",
                                y("[{name: nvidia-container-toolkit-ctr}]"));
        if (streq_ptr(kobj_name(o), "nvidia-device-plugin-daemonset"))
            json_object_set_new(kobj_path(o, "spec.template.spec"), "containers",
                                y("[{name: nvidia-device-plugin, image: gpuop:0.1.0, "
                                  "args: [device-plugin]}]"));
    }
    json_t *s = json_array_get(json_object_get(f, "releases"), 0);
    json_object_set_new(json_object_get(json_object_get(s, "metadata"), "labels"), "name",
                        json_string("gpuop"));
    json_object_set_new(json_object_get(s, "metadata"), "name",
                        json_string("sh.helm.release.v1.gpuop.v1"));
    struct mig_world w = world_of(f, MIG_TO_NVIDIA);
    struct mig_plan p;
    struct err e = {0};
    assert_int_equal(mig_plan(&w, &p, &e), 0);
    if (p.refused)
        fail_msg("refused: %s", p.checks[0].detail);
    _cleanup_free_ char *got = writes_of(&p);
    assert_string_equal(got, "0 Deployment gpu-operator\n"
                             "2 ClusterPolicy cluster-policy\n"
                             "2 ClusterPolicy cluster-policy\n"
                             "4 Secret sh.helm.release.v1.gpuop.v1\n"
                             "5 Pod gpuop-device-plugin-takeover-gpu-a100\n"
                             "5 Pod gpuop-device-plugin-takeover-gpu-h100\n"
                             "5 Pod gpuop-device-plugin-takeover-gpu-l4\n"
                             "1 DaemonSet gpu-feature-discovery\n"
                             "3 DaemonSet nvidia-container-toolkit-daemonset\n"
                             "1 DaemonSet nvidia-operator-validator\n");
    assert_string_equal(kobj_annotation(p.writes[1].body, "meta.helm.sh/release-name"),
                        "gpu-operator");
    /* NVIDIA's DaemonSets at OnDelete, the value the policy had kept for its restore */
    assert_string_equal(kobj_path_str(p.writes[2].body, "spec.daemonsets.updateStrategy"),
                        "OnDelete");
    assert_string_equal(kobj_annotation(p.writes[2].body, "migrate.gpuop.dev/update-strategy"),
                        "RollingUpdate");
    assert_string_equal(p.toolkit_ds, "nvidia-container-toolkit-daemonset");
    assert_false(p.has_takeover);
    assert_int_equal(p.surge_pods, 3);
    /* a surge pod: the device plugin's template on the node, its own socket, no DaemonSet's */
    const json_t *surge = p.writes[4].body;
    assert_string_equal(kobj_path_str(surge, "spec.nodeName"), "gpu-a100");
    assert_string_equal(kobj_label(surge, "app"), "gpuop-device-plugin-takeover");
    assert_string_equal(kobj_label(surge, "app.kubernetes.io/managed-by"), "gpuop");
    assert_string_equal(kobj_path_str(surge, "metadata.ownerReferences.0.kind"), "ClusterPolicy");
    _cleanup_free_ char *sj = json_dumps(surge, JSON_COMPACT);
    bool suffix = false;
    size_t k;
    json_t *c;
    json_array_foreach (kobj_path(surge, "spec.containers"), k, c) {
        size_t j;
        json_t *ev;
        json_array_foreach (json_object_get(c, "env"), j, ev) {
            suffix |= streq_ptr(kobj_str(ev, "name"), "DP_SOCKET_SUFFIX") &&
                      streq_ptr(kobj_str(ev, "value"), "takeover");
        }
    }
    if (!suffix)
        fail_msg("no DP_SOCKET_SUFFIX=takeover in the surge pod: %s", sj);
    _cleanup_free_ char *text = NULL;
    assert_int_equal(mig_plan_text(&p, true, &text, &e), 0);
    assert_non_null(strstr(text, "  ok   gpuop's operator stopped: "));
    assert_non_null(strstr(text, "left for you once NVIDIA's operands run on every node"));
    assert_non_null(strstr(text, "kubectl -n gpu-operator delete pods -l "
                                 "app=gpuop-device-plugin-takeover"));
    /* run again with the surge pods there: none made twice, all three waited for */
    json_t *pods = json_object_get(f, "pods");
    for (size_t n = 4; n < 7; n++)
        json_array_append(pods, p.writes[n].body);
    mig_plan_done(&p);
    assert_int_equal(mig_plan(&w, &p, &e), 0);
    assert_int_equal(p.surge_pods, 3);
    for (size_t n = 0; n < p.n_writes; n++)
        assert_int_not_equal(p.writes[n].kind, MIG_CREATE);
    mig_plan_done(&p);
    /* gpuop's operator running: refused */
    json_object_set_new(json_object_get(dep, "spec"), "replicas", json_integer(2));
    assert_int_equal(mig_plan(&w, &p, &e), 0);
    assert_true(p.refused);
    assert_int_equal(p.n_writes, 0);
    mig_plan_done(&p);
}

/* ---- the way back, node by node ------------------------------------------------------------ */

/* A pod: "NAME NODE APP OWNER[:DS] STATE", OWNER gpuop or nvidia; DS the owning DaemonSet's short
 * name (tk, dp; none: no owner); STATE ready (Ready long ago), fresh (Ready just now), pending,
 * gone (being deleted). */
static json_t *roll_pod(const char *spec)
{
    char name[64], node[32], app[64], owner[32], state[16];
    if (sscanf(spec, "%63s %31s %63s %31s %15s", name, node, app, owner, state) != 5)
        fail_msg("bad pod spec %s", spec);
    char *ds = strchr(owner, ':');
    if (ds)
        *ds++ = '\0';
    json_t *p = json_pack(
        "{s:s,s:{s:s,s:s,s:{s:s,s:s}},s:{s:s},s:{s:s,s:[{s:s,s:s,s:s}]}}", "kind", "Pod",
        "metadata", "name", name, "namespace", "gpu-operator", "labels", "app", app,
        "app.kubernetes.io/managed-by", streq_ptr(owner, "gpuop") ? "gpuop" : "gpu-operator",
        "spec", "nodeName", node, "status", "phase",
        streq_ptr(state, "pending") ? "Pending" : "Running", "conditions", "type", "Ready",
        "status", streq_ptr(state, "pending") ? "False" : "True", "lastTransitionTime",
        streq_ptr(state, "fresh") ? "2026-12-06T10:00:00Z" : "2026-12-06T09:00:00Z");
    if (streq_ptr(state, "gone"))
        json_object_set_new(json_object_get(p, "metadata"), "deletionTimestamp",
                            json_string("2026-12-06T10:00:00Z"));
    if (ds && !streq_ptr(ds, "none")) {
        _cleanup_free_ char *dsname = xasprintf("ds-%s", ds), *uid = xasprintf("uid-%s", ds);
        json_object_set_new(json_object_get(p, "metadata"), "ownerReferences",
                            json_pack("[{s:s,s:s,s:s,s:b}]", "kind", "DaemonSet", "name", dsname,
                                      "uid", uid, "controller", 1));
    }
    return p;
}

/* A DaemonSet "ds-X" of NVIDIA's template (or gpuop's: "gpuop") and update strategy. */
static json_t *roll_ds(const char *x, const char *manager, const char *strategy)
{
    _cleanup_free_ char *name = xasprintf("ds-%s", x), *uid = xasprintf("uid-%s", x);
    return json_pack("{s:s,s:{s:s,s:s},s:{s:{s:s},s:{s:{s:{s:s}}}}}", "kind", "DaemonSet",
                     "metadata", "name", name, "uid", uid, "spec", "updateStrategy", "type",
                     strategy, "template", "metadata", "labels", "app.kubernetes.io/managed-by",
                     manager);
}

#define G_TK(n, st) "tk-g-" n " " n " nvidia-container-toolkit-daemonset gpuop:tk " st
#define G_DP(n, st) "dp-g-" n " " n " nvidia-device-plugin-daemonset gpuop:dp " st
#define N_TK(n, st) "tk-n-" n " " n " nvidia-container-toolkit-daemonset nvidia:tk " st
#define N_DP(n, st) "dp-n-" n " " n " nvidia-device-plugin-daemonset nvidia:dp " st
#define SURGE(n, st) \
    "gpuop-device-plugin-takeover-" n " " n " gpuop-device-plugin-takeover gpuop " st
#define N_DRV(n) "drv-n-" n " " n " nvidia-driver-daemonset nvidia ready"
#define G_DRV(n) "drv-g-" n " " n " nvidia-driver-daemonset gpuop ready"
#define G_ALL(n) G_TK(n, "ready"), G_DP(n, "ready"), SURGE(n, "ready"), N_DRV(n)
#define N_ALL(n) N_TK(n, "ready"), N_DP(n, "ready"), N_DRV(n)

/* Which node goes next, what is deleted, when a node is done; a roll stopped anywhere resumes
 * from the pods and the marks. */
static void test_roll(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        const char *pods[16];
        const char *marked; /* nodes marked, space separated */
        long long max;
        const char *strategy, *template_of; /* the DaemonSets' (default OnDelete, NVIDIA's) */
        int rc;
        const char *writes; /* "patch Node n1 on", "delete Pod x" lines */
        size_t todo, in_flight, done;
        bool finished;
        const char *waiting; /* a substring, or NULL for none */
    } cases[] = {
        {"the first node's turn: marked, gpuop's operand pods deleted (the surge settled), the "
         "driver's left",
         {G_ALL("n1"), G_ALL("n2"), G_ALL("n3")},
         "",
         1,
         NULL,
         NULL,
         0,
         "patch Node n1 on\ndelete Pod tk-g-n1\ndelete Pod dp-g-n1\n",
         2,
         1,
         0,
         false,
         NULL},
        {"two at once",
         {G_ALL("n1"), G_ALL("n2"), G_ALL("n3")},
         "",
         2,
         NULL,
         NULL,
         0,
         "patch Node n1 on\ndelete Pod tk-g-n1\ndelete Pod dp-g-n1\npatch Node n2 on\n"
         "delete Pod tk-g-n2\ndelete Pod dp-g-n2\n",
         1,
         2,
         0,
         false,
         NULL},
        {"n1 in flight (NVIDIA's pods not Ready): nothing else starts",
         {N_TK("n1", "pending"), N_DP("n1", "pending"), SURGE("n1", "ready"), N_DRV("n1"),
          G_ALL("n2"), G_ALL("n3")},
         "n1",
         1,
         NULL,
         NULL,
         0,
         "",
         2,
         1,
         0,
         false,
         "NVIDIA's device plugin on n1"},
        {"n1's gpuop pods still going: waits, nothing else starts",
         {G_TK("n1", "gone"), G_DP("n1", "gone"), SURGE("n1", "ready"), N_DRV("n1"), G_ALL("n2")},
         "n1",
         1,
         NULL,
         NULL,
         0,
         "",
         1,
         1,
         0,
         false,
         "gpuop's pods on n1 to go"},
        {"NVIDIA's plugin settled on n1: the surge goes",
         {N_TK("n1", "pending"), N_DP("n1", "ready"), SURGE("n1", "ready"), N_DRV("n1"),
          G_ALL("n2")},
         "n1",
         1,
         NULL,
         NULL,
         0,
         "delete Pod gpuop-device-plugin-takeover-n1\n",
         1,
         1,
         0,
         false,
         NULL},
        {"NVIDIA's plugin Ready just now: the surge stays",
         {N_TK("n1", "ready"), N_DP("n1", "fresh"), SURGE("n1", "ready"), N_DRV("n1"), G_ALL("n2")},
         "n1",
         1,
         NULL,
         NULL,
         0,
         "",
         1,
         1,
         0,
         false,
         "NVIDIA's device plugin on n1"},
        {"the surge going: n1 still in flight",
         {N_ALL("n1"), SURGE("n1", "gone"), G_ALL("n2")},
         "n1",
         1,
         NULL,
         NULL,
         0,
         "",
         1,
         1,
         0,
         false,
         "NVIDIA's operand pods on n1"},
        {"every NVIDIA pod on n1 Ready, no surge: the mark goes",
         {N_ALL("n1"), G_ALL("n2")},
         "n1",
         1,
         NULL,
         NULL,
         0,
         "patch Node n1 off\n",
         1,
         1,
         0,
         false,
         NULL},
        {"n1 done: n2's turn",
         {N_ALL("n1"), G_ALL("n2"), G_ALL("n3")},
         "",
         1,
         NULL,
         NULL,
         0,
         "patch Node n2 on\ndelete Pod tk-g-n2\ndelete Pod dp-g-n2\n",
         1,
         1,
         1,
         false,
         NULL},
        {"stopped mid-turn (n1 marked, its device plugin left): the turn goes on, unmarked ones "
         "wait",
         {G_TK("n1", "gone"), G_DP("n1", "ready"), SURGE("n1", "ready"), N_DRV("n1"), G_ALL("n2")},
         "n1",
         1,
         NULL,
         NULL,
         0,
         "delete Pod dp-g-n1\n",
         1,
         1,
         0,
         false,
         NULL},
        {"stopped after the mark, before a delete: the turn goes on",
         {G_ALL("n1"), G_ALL("n2")},
         "n1",
         1,
         NULL,
         NULL,
         0,
         "delete Pod tk-g-n1\ndelete Pod dp-g-n1\n",
         1,
         1,
         0,
         false,
         NULL},
        {"the surge plugin not settled: the device plugin waits, the rest goes",
         {G_TK("n1", "ready"), G_DP("n1", "ready"), SURGE("n1", "fresh"), N_DRV("n1")},
         "",
         1,
         NULL,
         NULL,
         0,
         "patch Node n1 on\ndelete Pod tk-g-n1\n",
         0,
         1,
         0,
         false,
         "the surge device plugin on n1"},
        {"gpuop's driver pods are never deleted",
         {G_TK("n1", "ready"), G_DP("n1", "ready"), SURGE("n1", "ready"), G_DRV("n1")},
         "",
         1,
         NULL,
         NULL,
         0,
         "patch Node n1 on\ndelete Pod tk-g-n1\ndelete Pod dp-g-n1\n",
         0,
         1,
         0,
         false,
         NULL},
        {"all done",
         {N_ALL("n1"), N_ALL("n2"), G_DRV("n3")},
         "",
         1,
         NULL,
         NULL,
         0,
         "",
         0,
         0,
         2,
         true,
         NULL},
        {"NVIDIA's operator has not written the DaemonSets yet: nothing starts",
         {G_ALL("n1"), G_ALL("n2")},
         "",
         1,
         NULL,
         "gpuop",
         0,
         "",
         2,
         0,
         0,
         false,
         "still has gpuop's template"},
        {"a DaemonSet that rolls on its own: refused",
         {G_ALL("n1")},
         "",
         1,
         "RollingUpdate",
         NULL,
         -EPERM,
         "DaemonSet gpu-operator/ds-tk is RollingUpdate: it replaces gpuop's pods on its own",
         0,
         0,
         0,
         false,
         NULL},
        {"no surge plugin beside gpuop's: refused",
         {G_TK("n1", "ready"), G_DP("n1", "ready"), N_DRV("n1")},
         "",
         1,
         NULL,
         NULL,
         -EPERM,
         "node n1: no surge device plugin",
         0,
         0,
         0,
         false,
         NULL},
        {"an orphaned pod of gpuop's (its DaemonSet deleted): waits for NVIDIA's to claim it",
         {"gfd-g-n1 n1 gpu-feature-discovery gpuop:none ready", SURGE("n1", "ready")},
         "",
         1,
         NULL,
         NULL,
         0,
         "",
         1,
         0,
         0,
         false,
         "has no DaemonSet"},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        _cleanup_json_ json_t *pods = json_array(), *dss = json_array(), *nodes = json_array();
        for (size_t i = 0; cases[c].pods[i]; i++)
            json_array_append_new(pods, roll_pod(cases[c].pods[i]));
        const char *st = cases[c].strategy ? cases[c].strategy : "OnDelete";
        const char *tm = cases[c].template_of ? cases[c].template_of : "gpu-operator";
        json_array_append_new(dss, roll_ds("tk", tm, st));
        json_array_append_new(dss, roll_ds("dp", tm, "OnDelete"));
        const char *names[] = {"n1", "n2", "n3"};
        for (size_t i = 0; i < 3; i++) {
            json_t *n = json_pack("{s:s,s:{s:s,s:{}}}", "kind", "Node", "metadata", "name",
                                  names[i], "annotations");
            if (strstr(cases[c].marked, names[i]))
                json_object_set_new(kobj_path(n, "metadata.annotations"), MIG_ANN_ROLL,
                                    json_string("replacing"));
            json_array_append_new(nodes, n);
        }
        struct mig_roll_input in = {.ns = "gpu-operator",
                                    .pods = pods,
                                    .daemonsets = dss,
                                    .nodes = nodes,
                                    .max_unavailable = cases[c].max,
                                    .now_ms = 1796551202000ULL}; /* 2026-12-06T10:00:02Z */
        struct mig_roll r;
        struct err e = {0};
        int rc = mig_roll_plan(&in, &r, &e);
        if (rc != cases[c].rc)
            fail_msg("%s: rc %d, want %d (%s)", cases[c].what, rc, cases[c].rc, err_msg(&e));
        if (rc < 0) {
            if (!strstr(err_msg(&e), cases[c].writes))
                fail_msg("%s: error \"%s\", want \"%s\"", cases[c].what, err_msg(&e),
                         cases[c].writes);
            continue;
        }
        _cleanup_free_ char *got = xstrdup("");
        for (size_t i = 0; i < r.n_writes; i++) {
            const struct mig_write *w = &r.writes[i];
            const char *onoff = "";
            if (w->kind == MIG_PATCH_MERGE)
                onoff = json_is_null(json_object_get(kobj_path(w->body, "metadata.annotations"),
                                                     MIG_ANN_ROLL))
                            ? " off"
                            : " on";
            char *n = xasprintf("%s%s %s %s%s\n", got, w->kind == MIG_DELETE ? "delete" : "patch",
                                w->res_kind, w->name, onoff);
            free(got);
            got = n;
        }
        if (strcmp(got, cases[c].writes) != 0)
            fail_msg("%s: writes\n%s\nwant\n%s(waiting: %s; %zu/%zu/%zu)", cases[c].what, got,
                     cases[c].writes, r.waiting ?: "none", r.nodes_todo, r.nodes_in_flight,
                     r.nodes_done);
        if (r.nodes_todo != cases[c].todo || r.nodes_in_flight != cases[c].in_flight ||
            r.nodes_done != cases[c].done || r.done != cases[c].finished)
            fail_msg("%s: todo %zu in flight %zu done %zu finished %d, want %zu %zu %zu %d",
                     cases[c].what, r.nodes_todo, r.nodes_in_flight, r.nodes_done, r.done,
                     cases[c].todo, cases[c].in_flight, cases[c].done, cases[c].finished);
        if (cases[c].waiting ? !r.waiting || !strstr(r.waiting, cases[c].waiting) : !!r.waiting)
            fail_msg("%s: waiting \"%s\", want \"%s\"", cases[c].what, r.waiting ?: "(none)",
                     cases[c].waiting ?: "(none)");
        mig_roll_done(&r);
    }
}

/* Done: how to restore the update strategy the policy had, from the mark --apply left. */
static void test_roll_restore(void **state)
{
    (void)state;
    _cleanup_json_ json_t *pods = json_pack("[o]", roll_pod(N_TK("n1", "ready")));
    _cleanup_json_ json_t *cp = y("metadata: {name: cluster-policy, annotations: "
                                  "{migrate.gpuop.dev/update-strategy: RollingUpdate}}\n"
                                  "spec: {daemonsets: {updateStrategy: OnDelete}}\n");
    struct mig_roll_input in = {.ns = "gpu-operator",
                                .pods = pods,
                                .max_unavailable = 1,
                                .policy = cp,
                                .nvidia_release = "gpu-op"};
    struct mig_roll r;
    struct err e = {0};
    assert_int_equal(mig_roll_plan(&in, &r, &e), 0);
    assert_true(r.done);
    assert_non_null(r.restore);
    assert_non_null(strstr(r.restore, "helm upgrade gpu-op nvidia/gpu-operator -n gpu-operator "
                                      "--reuse-values --set daemonsets.updateStrategy="
                                      "RollingUpdate"));
    mig_roll_done(&r);
    /* restored already: nothing to say */
    json_object_set_new(kobj_path(cp, "spec.daemonsets"), "updateStrategy",
                        json_string("RollingUpdate"));
    assert_int_equal(mig_roll_plan(&in, &r, &e), 0);
    assert_null(r.restore);
    mig_roll_done(&r);
}

/* ---- the requests ------------------------------------------------------------------------- */

/* The options as typed: one direction, naming nvidia; the names DNS labels; errors name the flag.
 */
static void test_options(void **state)
{
    (void)state;
    static const struct {
        const char *from, *to, *ns, *release;
        int rc;
        enum mig_direction dir;
        const char *msg;
        bool roll, apply;
        unsigned max_unavailable;
    } cases[] = {
        {"nvidia", NULL, NULL, NULL, 0, MIG_FROM_NVIDIA, NULL},
        {NULL, "nvidia", NULL, NULL, 0, MIG_TO_NVIDIA, NULL, true, false, 2},
        {"nvidia", NULL, NULL, NULL, -EINVAL, 0,
         "--roll goes with --to nvidia alone (run --apply first)", true, false, 0},
        {NULL, "nvidia", NULL, NULL, -EINVAL, 0,
         "--roll goes with --to nvidia alone (run --apply first)", true, true, 0},
        {NULL, "nvidia", NULL, NULL, -EINVAL, 0, "--max-unavailable goes with --roll", false, false,
         2},
        {NULL, "nvidia", "gpu-ops", "gpuop-2", 0, MIG_TO_NVIDIA, NULL},
        {NULL, NULL, NULL, NULL, -EINVAL, 0, "give one of --from nvidia and --to nvidia"},
        {"nvidia", "nvidia", NULL, NULL, -EINVAL, 0, "give one of --from nvidia and --to nvidia"},
        {"amd", NULL, NULL, NULL, -EINVAL, 0, "--from \"amd\": the only other operator is nvidia"},
        {NULL, "NVIDIA", NULL, NULL, -EINVAL, 0,
         "--to \"NVIDIA\": the only other operator is nvidia"},
        {"nvidia", NULL, "Gpu_Operator", NULL, -EINVAL, 0,
         "--namespace \"Gpu_Operator\": not a DNS label"},
        {"nvidia", NULL, NULL, "", -EINVAL, 0, "--release \"\": not a DNS label"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mig_options o = {0};
        mig_options_defaults(&o);
        assert_string_equal(o.ns, "gpu-operator");
        assert_string_equal(o.release, "gpuop");
        assert_string_equal(o.nvidia_release, "gpu-operator");
        assert_int_equal(o.timeout_ms, 600000);
        o.from = cases[i].from;
        o.to = cases[i].to;
        o.roll = cases[i].roll;
        o.apply = cases[i].apply;
        o.max_unavailable = cases[i].max_unavailable;
        if (cases[i].ns)
            o.ns = cases[i].ns;
        if (cases[i].release)
            o.release = cases[i].release;
        enum mig_direction dir = (enum mig_direction)42;
        struct err e = {0};
        assert_int_equal(mig_options_check(&o, &dir, &e), cases[i].rc);
        if (cases[i].rc == 0) {
            assert_int_equal(dir, cases[i].dir);
        } else {
            assert_int_equal(dir, 42);
            assert_string_equal(err_msg(&e), cases[i].msg);
        }
    }
}

/* Each planned write as its request: the resource, the verb, and what counts as done already. */
static void test_requests(void **state)
{
    (void)state;
    static const struct {
        enum mig_write_kind kind;
        const char *res_kind;
        const char *plural;
        enum mig_verb verb;
        enum kube_propagation propagation;
        enum kube_patch_type patch;
        int done_code;
    } cases[] = {
        {MIG_DELETE, "Deployment", "deployments", MIG_VERB_DELETE, KUBE_PROPAGATION_BACKGROUND, 0,
         -ENOENT},
        {MIG_DELETE_ORPHAN, "DaemonSet", "daemonsets", MIG_VERB_DELETE, KUBE_PROPAGATION_ORPHAN, 0,
         -ENOENT},
        {MIG_PATCH_MERGE, "ClusterPolicy", "clusterpolicies", MIG_VERB_PATCH, 0, KUBE_PATCH_MERGE,
         0},
        {MIG_PATCH_STRATEGIC, "DaemonSet", "daemonsets", MIG_VERB_PATCH, 0, KUBE_PATCH_STRATEGIC,
         0},
        {MIG_REPLACE, "Secret", "secrets", MIG_VERB_UPDATE, 0, 0, 0},
        {MIG_CREATE, "Pod", "pods", MIG_VERB_CREATE, 0, 0, -EEXIST},
        {MIG_PATCH_MERGE, "ServiceAccount", "serviceaccounts", MIG_VERB_PATCH, 0, KUBE_PATCH_MERGE,
         0},
        {MIG_PATCH_MERGE, "Service", "services", MIG_VERB_PATCH, 0, KUBE_PATCH_MERGE, 0},
        {MIG_PATCH_MERGE, "Node", "nodes", MIG_VERB_PATCH, 0, KUBE_PATCH_MERGE, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mig_write w = {
            .kind = cases[i].kind, .res_kind = (char *)cases[i].res_kind, .name = (char *)"x"};
        struct mig_request rq;
        struct err e = {0};
        assert_int_equal(mig_request_of(&w, &rq, &e), 0);
        assert_string_equal(rq.res->plural, cases[i].plural);
        assert_int_equal(rq.verb, cases[i].verb);
        if (rq.verb == MIG_VERB_DELETE)
            assert_int_equal(rq.propagation, cases[i].propagation);
        if (rq.verb == MIG_VERB_PATCH)
            assert_int_equal(rq.patch, cases[i].patch);
        assert_int_equal(rq.done_code, cases[i].done_code);
    }
    struct mig_write w = {
        .kind = MIG_DELETE, .res_kind = (char *)"Namespace", .name = (char *)"n1"};
    struct mig_request rq = {0};
    struct err e = {0};
    assert_int_equal(mig_request_of(&w, &rq, &e), -EINVAL);
    assert_string_equal(err_msg(&e), "Namespace n1: not a kind migrate writes");
    assert_null(rq.res);
}

/* What is read: every list but the CRDs' by the table, items given their kind; the world borrows
 * them. */
static void test_reads(void **state)
{
    (void)state;
    struct mig_lists l;
    mig_lists_init(&l);
    bool filled[7] = {0};
    size_t n = 0;
    for (const struct mig_read *rd = mig_reads; rd->res; rd++, n++) {
        assert_true(rd->field % sizeof(json_t *) == 0 && rd->field < sizeof(l));
        filled[rd->field / sizeof(json_t *)] = true;
        _cleanup_json_ json_t *list =
            json_pack("{s:[{s:{s:s}}]}", "items", "metadata", "name", rd->res->plural);
        mig_lists_add(&l, rd, list);
    }
    assert_int_equal(n, 15);
    assert_false(filled[offsetof(struct mig_lists, crds) / sizeof(json_t *)]);
    assert_int_equal(json_array_size(l.crds), 0);
    assert_int_equal(json_array_size(l.objects), 10);
    assert_int_equal(json_array_size(l.releases), 1);
    assert_string_equal(kobj_kind(json_array_get(l.releases, 0)), "Secret");
    assert_string_equal(kobj_kind(json_array_get(l.policies, 0)), "ClusterPolicy");
    assert_string_equal(kobj_kind(json_array_get(l.objects, 9)), "RuntimeClass");
    for (const struct mig_read *rd = mig_reads; rd->res; rd++)
        if (strcmp(rd->res->kind, "Secret") == 0)
            assert_string_equal(rd->selector, "owner=helm"); /* Helm's records, no other Secret */
        else
            assert_null(rd->selector);
    assert_string_equal(mig_crd_names[0], "clusterpolicies.nvidia.com");
    assert_string_equal(mig_crd_names[1], "nvidiadrivers.nvidia.com");
    assert_null(mig_crd_names[2]);
    struct mig_options o = {0};
    mig_options_defaults(&o);
    struct mig_world w = mig_world_of(&o, MIG_TO_NVIDIA, &l);
    assert_int_equal(w.dir, MIG_TO_NVIDIA);
    assert_string_equal(w.nvidia_release, "gpu-operator");
    assert_ptr_equal(w.objects, l.objects);
    assert_ptr_equal(w.crds, l.crds);
    mig_lists_done(&l);
    assert_null(l.objects);
}

/* A refusal names the first failed precondition; the surge wait counts Ready pods. */
static void test_refusal_and_ready(void **state)
{
    (void)state;
    struct mig_check checks[] = {{"CRD versions", true, (char *)"v1"},
                                 {"NVIDIA's operator stopped", false, (char *)"1 replica"},
                                 {"one ClusterPolicy", false, (char *)"2"}};
    struct mig_plan p = {.checks = checks, .n_checks = 3};
    struct err e = {0};
    assert_int_equal(mig_plan_refusal(&p, &e), 0);
    p.refused = true;
    assert_int_equal(mig_plan_refusal(&p, &e), -EPERM);
    assert_string_equal(err_msg(&e), "refused: NVIDIA's operator stopped: 1 replica");
    _cleanup_json_ json_t *pods = y("items:\n"
                                    "- status: {phase: Running, conditions: [{type: Ready, status: "
                                    "'True'}]}\n"
                                    "- status: {phase: Running, conditions: [{type: Ready, status: "
                                    "'False'}]}\n"
                                    "- status: {phase: Pending}\n"
                                    "- status: {phase: Running, conditions: [{type: Ready, status: "
                                    "'True'}]}\n");
    assert_int_equal(mig_pods_ready(pods), 2);
    assert_int_equal(mig_pods_ready(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_round_trip), cmocka_unit_test(test_release_keep_all),
        cmocka_unit_test(test_from_nvidia),        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_to_nvidia),          cmocka_unit_test(test_options),
        cmocka_unit_test(test_requests),           cmocka_unit_test(test_reads),
        cmocka_unit_test(test_refusal_and_ready),  cmocka_unit_test(test_roll),
        cmocka_unit_test(test_roll_restore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
