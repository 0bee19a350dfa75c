/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests of the Node object, its Lease and the NFD labels kubelet-sim keeps (kl-node.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "kl-node.h"
#include "kl-reboot.h"
#include "kobj.h"

/* 2026-12-02T03:50:24.123Z */
#define NOW 1796183424123ull

static struct kl_cluster *cluster(void)
{
    static const char text[] =
        "apiVersion: gpuop.dev/v1alpha1\nkind: SimCluster\nnodes:\n"
        "- name: dgx-1\n  fleet: /f/dgx-h100.yaml\n  root: /r/dgx-1\n"
        "  kernel: 5.15.0-127-generic\n"
        "  os: {id: ubuntu, versionId: \"22.04\", prettyName: Ubuntu 22.04.5 LTS}\n"
        "  runtime: cri-o\n  cpu: 224\n  memory: 2063937984Ki\n"
        "  labels: {zone: a}\n"
        "- name: gh200-1\n  fleet: /f/gh200.yaml\n  root: /r/gh200-1\n  arch: arm64\n"
        "  kernel: 6.8.0-1013-nvidia-64k\n  os: {id: ubuntu, versionId: \"24.04\"}\n"
        "  runtime: containerd\n"
        "- name: cpu-1\n  root: /r/cpu-1\n  kernel: 6.8.0\n"
        "  os: {id: rhel, versionId: \"9\"}\n  runtime: docker\n";
    struct kl_cluster *c = NULL;
    struct err e = {0};
    if (kl_cluster_parse("c.yaml", text, strlen(text), &c, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return c;
}

static const char *label(json_t *labels, const char *k)
{
    return json_string_value(json_object_get(labels, k));
}

static void test_pci_class(void **state)
{
    (void)state;
    static const struct {
        const char *model, *cls;
    } cases[] = {
        {"NVIDIA H100 80GB HBM3", "0302"},
        {"NVIDIA A100-SXM4-80GB", "0302"},
        {"NVIDIA L4", "0302"},
        {"Tesla V100-SXM2-16GB", "0302"},
        {"NVIDIA GeForce RTX 4090", "0300"},
        {"Quadro RTX 8000", "0300"},
        {"NVIDIA RTX A6000", "0300"},
        {NULL, "0302"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
        assert_string_equal(kl_pci_class_for_model(cases[i].model), cases[i].cls);
}

static void test_fleet_models(void **state)
{
    (void)state;
    char **m = NULL;
    struct err e = {0};
    const char *text = "gpus:\n- {model: A, count: 2}\n- {model: \"NVIDIA L4\"}\n";
    assert_int_equal(kl_fleet_gpu_models("f.yaml", text, strlen(text), &m, &e), 0);
    assert_string_equal(m[0], "A");
    assert_string_equal(m[1], "A");
    assert_string_equal(m[2], "NVIDIA L4");
    assert_null(m[3]);
    kl_strv_free(m);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"gpus: []\n", "f.yaml: gpus: expected a list of GPUs"},
        {"x: 1\n", "f.yaml: gpus: expected a list of GPUs"},
        {"gpus:\n- {count: 2}\n", "f.yaml: gpus[0].model: required field is missing"},
        {"gpus:\n- {model: A, count: 0}\n", "f.yaml: gpus[0].count: 0 is out of range"},
        {"gpus:\n- {model: A, count: 1000}\n- {model: B, count: 1000}\n",
         "f.yaml: gpus: more than 1024 GPUs"},
        {"gpus: [\n", "f.yaml:"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        m = NULL;
        assert_true(kl_fleet_gpu_models("f.yaml", bad[i].text, strlen(bad[i].text), &m, &e) < 0);
        assert_null(m);
        if (!strstr(e.msg, bad[i].want))
            fail_msg("\"%s\" lacks \"%s\"", e.msg, bad[i].want);
    }
    /* every committed fleet */
    const char *src = env_get("GPUOP_SOURCE_ROOT");
    if (!src)
        return;
    static const char *const fleets[] = {"dgx-h100.yaml", "dgx-a100-80gb-mig.yaml", "pcie-l4.yaml",
                                         "dgx1-v100.yaml", "hgx-h200.yaml"};
    for (size_t i = 0; i < ARRAY_SIZE(fleets); i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/sim/fleets/%s", src, fleets[i]);
        char *t = NULL;
        size_t len = 0;
        if (file_read_all(path, 1 << 20, &t, &len, &e) < 0 ||
            kl_fleet_gpu_models(path, t, len, &m, &e) < 0)
            fail_msg("%s", err_msg(&e));
        free(t);
        assert_non_null(m[0]);
        assert_string_equal(kl_pci_class_for_model(m[0]), "0302");
        kl_strv_free(m);
    }
}

static void test_nfd_labels(void **state)
{
    (void)state;
    struct kl_cluster *c = cluster();
    const char *const models[] = {"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", NULL};
    json_t *l = kl_nfd_labels(&c->nodes[0], models);
    static const char *const want[][2] = {
        {"feature.node.kubernetes.io/pci-10de.present", "true"},
        {"feature.node.kubernetes.io/pci-0302_10de.present", "true"},
        {"feature.node.kubernetes.io/kernel-version.full", "5.15.0-127-generic"},
        {"feature.node.kubernetes.io/kernel-version.major", "5"},
        {"feature.node.kubernetes.io/kernel-version.minor", "15"},
        {"feature.node.kubernetes.io/kernel-version.revision", "0"},
        {"feature.node.kubernetes.io/system-os_release.ID", "ubuntu"},
        {"feature.node.kubernetes.io/system-os_release.VERSION_ID", "22.04"},
        {"feature.node.kubernetes.io/system-os_release.VERSION_ID.major", "22"},
        {"feature.node.kubernetes.io/system-os_release.VERSION_ID.minor", "04"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
        if (!streq_ptr(label(l, want[i][0]), want[i][1]))
            fail_msg("%s: got %s, want %s", want[i][0], label(l, want[i][0]) ?: "(none)",
                     want[i][1]);
    }
    assert_int_equal(json_object_size(l), ARRAY_SIZE(want));
    json_decref(l);
    /* a CPU node: no PCI labels; "9" has no minor */
    l = kl_nfd_labels(&c->nodes[2], NULL);
    assert_null(json_object_get(l, "feature.node.kubernetes.io/pci-10de.present"));
    assert_string_equal(label(l, "feature.node.kubernetes.io/system-os_release.VERSION_ID.major"),
                        "9");
    assert_null(
        json_object_get(l, "feature.node.kubernetes.io/system-os_release.VERSION_ID.minor"));
    assert_string_equal(label(l, "feature.node.kubernetes.io/kernel-version.revision"), "0");
    json_decref(l);
    /* a display GPU */
    const char *const vga[] = {"NVIDIA GeForce RTX 4090", NULL};
    l = kl_nfd_labels(&c->nodes[0], vga);
    assert_string_equal(label(l, "feature.node.kubernetes.io/pci-0300_10de.present"), "true");
    assert_null(json_object_get(l, "feature.node.kubernetes.io/pci-0302_10de.present"));
    json_decref(l);
    kl_cluster_free(c);
}

static void test_features_file(void **state)
{
    (void)state;
    json_t *l = json_object();
    struct err e = {0};
    const char *text = "# written by gpuop feature-discovery\n"
                       "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n"
                       "  nvidia.com/gpu.count=8  \n"
                       "\n"
                       "custom-flag\n"
                       "my.feature.node.kubernetes.io/x=1\n"
                       "profile.node.kubernetes.io/p=y\n"
                       "example.com/denied=1\n"
                       "kubernetes.io/hostname=evil\n"
                       "bad value=has space\n"
                       "v=not valid\n"
                       "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3-2";
    int r = kl_features_parse(text, strlen(text), NOW, l, &e);
    assert_int_equal(r, 4);
    assert_string_equal(label(l, "nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3-2");
    assert_string_equal(label(l, "nvidia.com/gpu.count"), "8");
    assert_string_equal(label(l, "feature.node.kubernetes.io/custom-flag"), "true");
    assert_string_equal(label(l, "my.feature.node.kubernetes.io/x"), "1");
    assert_string_equal(label(l, "profile.node.kubernetes.io/p"), "y");
    assert_int_equal(json_object_size(l), 5);
    /* a later file overrides */
    r = kl_features_parse("nvidia.com/gpu.count=4\n", 23, NOW, l, &e);
    assert_int_equal(r, 0);
    assert_string_equal(label(l, "nvidia.com/gpu.count"), "4");
    /* expiry */
    const char *stale = "# +expiry-time=2020-01-01T00:00:00Z\nstale=1\n";
    assert_int_equal(kl_features_parse(stale, strlen(stale), NOW, l, &e), 0);
    assert_null(json_object_get(l, "feature.node.kubernetes.io/stale"));
    const char *fresh = "# +expiry-time=2030-01-01T00:00:00.5Z\nfresh=1\n";
    assert_int_equal(kl_features_parse(fresh, strlen(fresh), NOW, l, &e), 0);
    assert_string_equal(label(l, "feature.node.kubernetes.io/fresh"), "1");
    const char *garbled = "# +expiry-time=tomorrow\ng=1\n";
    assert_int_equal(kl_features_parse(garbled, strlen(garbled), NOW, l, &e), 0);
    assert_null(json_object_get(l, "feature.node.kubernetes.io/g"));
    /* too large */
    assert_int_equal(kl_features_parse("x", KL_FEATURES_MAX_BYTES + 1, NOW, l, &e), -EFBIG);
    json_decref(l);
}

static void test_ids(void **state)
{
    (void)state;
    struct kl_node_ids a, b, a2;
    kl_node_ids("dgx-1", &a);
    kl_node_ids("dgx-2", &b);
    kl_node_ids("dgx-1", &a2);
    assert_int_equal(strlen(a.machine_id), 32);
    assert_int_equal(strlen(a.system_uuid), 36);
    assert_int_equal(a.system_uuid[14], '4');
    assert_string_equal(a.machine_id, a2.machine_id);
    assert_string_equal(a.boot_id, a2.boot_id);
    assert_string_not_equal(a.machine_id, b.machine_id);
    assert_string_not_equal(a.system_uuid, a.boot_id);
    /* a simulated reboot gives a new boot ID; boot 0 is the first one */
    char b0[40], b1[40], b2[40];
    kl_node_boot_id("dgx-1", 0, b0, sizeof(b0));
    kl_node_boot_id("dgx-1", 1, b1, sizeof(b1));
    kl_node_boot_id("dgx-1", 2, b2, sizeof(b2));
    assert_string_equal(b0, a.boot_id);
    assert_string_not_equal(b1, b0);
    assert_string_not_equal(b2, b1);
}

/* Conditions other writers set (the GPU health agent's) are kept; a reboot request is seen
 * until it is answered. */
static void test_foreign_conditions_and_reboot(void **state)
{
    (void)state;
    struct kl_cluster *c = cluster();
    struct kl_node_facts f = {.spec = &c->nodes[0], .ip = "198.18.0.2", .now_ms = NOW};
    json_t *n = kl_node_object(&f);
    json_array_append_new(
        kobj_path(n, "status.conditions"),
        json_pack("{s:s,s:s,s:s}", "type", "GPUHealthy", "status", "False", "reason", "Xid79"));
    f.now_ms = NOW + 10000;
    f.boot = 1;
    assert_int_equal(kl_node_apply_status(n, &f, false), 0); /* the boot ID changed */
    size_t i;
    json_t *cond;
    bool kept = false;
    json_array_foreach (kobj_path(n, "status.conditions"), i, cond)
        kept |= streq_ptr(kobj_str(cond, "type"), "GPUHealthy") &&
                streq_ptr(kobj_str(cond, "reason"), "Xid79");
    assert_true(kept);
    assert_int_equal(json_array_size(kobj_path(n, "status.conditions")), 5);
    char b1[40];
    kl_node_boot_id(c->nodes[0].name, 1, b1, sizeof(b1));
    assert_string_equal(kobj_path_str(n, "status.nodeInfo.bootID"), b1);
    assert_int_equal(kl_node_apply_status(n, &f, false), 1);

    char id[64];
    assert_false(kl_reboot_wanted(n, id, sizeof(id)));
    json_t *anns = kobj_ensure_object(json_object_get(n, "metadata"), "annotations");
    json_object_set_new(anns, "remediation.gpuop.dev/reboot-requested", json_string("1234"));
    assert_true(kl_reboot_wanted(n, id, sizeof(id)));
    assert_string_equal(id, "1234");
    json_object_set_new(anns, "remediation.gpuop.dev/reboot-done", json_string("1234"));
    assert_false(kl_reboot_wanted(n, id, sizeof(id)));
    json_object_set_new(anns, "remediation.gpuop.dev/reboot-requested", json_string("5678"));
    assert_true(kl_reboot_wanted(n, id, sizeof(id)));
    json_decref(n);
    kl_cluster_free(c);
}

static void test_node_object(void **state)
{
    (void)state;
    struct kl_cluster *c = cluster();
    json_t *res = json_pack("{s:{s:i,s:i}}", "nvidia.com/gpu", "capacity", 8, "allocatable", 7);
    struct kl_node_facts f = {
        .spec = &c->nodes[0], .ip = "198.18.0.2", .device_resources = res, .now_ms = NOW};
    json_t *n = kl_node_object(&f);
    assert_string_equal(kobj_name(n), "dgx-1");
    assert_string_equal(kobj_label(n, "kubernetes.io/hostname"), "dgx-1");
    assert_string_equal(kobj_label(n, "kubernetes.io/arch"), "amd64");
    assert_string_equal(kobj_path_str(n, "status.nodeInfo.architecture"), "amd64");
    assert_string_equal(kobj_label(n, "beta.kubernetes.io/os"), "linux");
    assert_string_equal(kobj_label(n, "zone"), "a");
    assert_string_equal(kobj_annotation(n, KL_SIMULATED_ANN), "external");
    assert_string_equal(kobj_path_str(n, "status.capacity.cpu"), "224");
    assert_string_equal(kobj_path_str(n, "status.capacity.memory"), "2063937984Ki");
    assert_string_equal(kobj_path_str(n, "status.allocatable.memory"), "2063835584Ki");
    assert_string_equal(kobj_path_str(n, "status.capacity.pods"), "110");
    json_t *cap = kobj_path(n, "status.capacity"), *alloc = kobj_path(n, "status.allocatable");
    assert_string_equal(kobj_str(cap, "nvidia.com/gpu"), "8");
    assert_string_equal(kobj_str(alloc, "nvidia.com/gpu"), "7");
    assert_string_equal(kobj_path_str(n, "status.nodeInfo.kernelVersion"), "5.15.0-127-generic");
    assert_string_equal(kobj_path_str(n, "status.nodeInfo.osImage"), "Ubuntu 22.04.5 LTS");
    assert_string_equal(kobj_path_str(n, "status.nodeInfo.containerRuntimeVersion"),
                        "cri-o://1.30.4");
    assert_string_equal(kobj_path_str(n, "status.nodeInfo.kubeletVersion"), "v1.32.4");
    assert_int_equal(
        json_integer_value(kobj_path(n, "status.daemonEndpoints.kubeletEndpoint.Port")), 10250);
    json_t *addr = kobj_path(n, "status.addresses");
    assert_string_equal(kobj_str(json_array_get(addr, 0), "type"), "InternalIP");
    assert_string_equal(kobj_str(json_array_get(addr, 0), "address"), "198.18.0.2");
    assert_string_equal(kobj_str(json_array_get(addr, 1), "address"), "dgx-1");
    json_t *conds = kobj_path(n, "status.conditions");
    assert_int_equal(json_array_size(conds), 4);
    json_t *ready = json_array_get(conds, 3);
    assert_string_equal(kobj_str(ready, "type"), "Ready");
    assert_string_equal(kobj_str(ready, "status"), "True");
    assert_string_equal(kobj_str(ready, "lastHeartbeatTime"), "2026-12-02T03:50:24Z");

    /* a heartbeat alone is no change, unless forced; transition times stay */
    f.now_ms = NOW + 10000;
    assert_int_equal(kl_node_apply_status(n, &f, false), 1);
    ready = json_array_get(kobj_path(n, "status.conditions"), 3);
    assert_string_equal(kobj_str(ready, "lastHeartbeatTime"), "2026-12-02T03:50:34Z");
    assert_string_equal(kobj_str(ready, "lastTransitionTime"), "2026-12-02T03:50:24Z");
    assert_int_equal(kl_node_apply_status(n, &f, true), 0);

    /* a device change is; someone else's extended resource is kept */
    json_object_set_new(kobj_path(n, "status.capacity"), "example.com/dongle", json_string("2"));
    json_object_set_new(kobj_path(n, "status.allocatable"), "example.com/dongle", json_string("2"));
    json_object_set_new(json_object_get(res, "nvidia.com/gpu"), "allocatable", json_integer(8));
    assert_int_equal(kl_node_apply_status(n, &f, false), 0);
    assert_string_equal(kobj_str(kobj_path(n, "status.allocatable"), "nvidia.com/gpu"), "8");
    assert_string_equal(kobj_str(kobj_path(n, "status.capacity"), "example.com/dongle"), "2");
    /* a kubernetes.io resource someone set is not kept */
    json_object_set_new(kobj_path(n, "status.capacity"), "kubernetes.io/x", json_string("1"));
    assert_int_equal(kl_node_apply_status(n, &f, false), 0);
    assert_null(json_object_get(kobj_path(n, "status.capacity"), "kubernetes.io/x"));

    /* a Ready condition another writer set False transitions */
    json_object_set_new(json_array_get(kobj_path(n, "status.conditions"), 3), "status",
                        json_string("Unknown"));
    f.now_ms = NOW + 20000;
    assert_int_equal(kl_node_apply_status(n, &f, false), 0);
    ready = json_array_get(kobj_path(n, "status.conditions"), 3);
    assert_string_equal(kobj_str(ready, "status"), "True");
    assert_string_equal(kobj_str(ready, "lastTransitionTime"), "2026-12-02T03:50:44Z");
    json_decref(n);
    json_decref(res);

    /* a Grace node: arm64 in its labels and its nodeInfo, as a real kubelet reports */
    f = (struct kl_node_facts){.spec = &c->nodes[1], .ip = NULL, .now_ms = NOW};
    n = kl_node_object(&f);
    assert_string_equal(kobj_label(n, "kubernetes.io/arch"), "arm64");
    assert_string_equal(kobj_label(n, "beta.kubernetes.io/arch"), "arm64");
    assert_string_equal(kobj_path_str(n, "status.nodeInfo.architecture"), "arm64");
    json_decref(n);

    /* the defaults of a CPU node */
    f = (struct kl_node_facts){.spec = &c->nodes[2], .ip = NULL, .now_ms = NOW};
    n = kl_node_object(&f);
    assert_string_equal(kobj_path_str(n, "status.capacity.memory"), "33554432Ki");
    assert_string_equal(kobj_path_str(n, "status.nodeInfo.osImage"), "rhel 9");
    assert_string_equal(kobj_path_str(n, "status.nodeInfo.containerRuntimeVersion"),
                        "docker://27.3.1");
    assert_null(json_object_get(kobj_path(n, "status.capacity"), "nvidia.com/gpu"));
    json_decref(n);
    kl_cluster_free(c);
}

static void test_labels(void **state)
{
    (void)state;
    struct kl_cluster *c = cluster();
    const struct kl_node_spec *s = &c->nodes[0];
    /* a node as someone else left it: other owners' labels, a stale kubelet label */
    json_t *n = json_pack("{s:{s:s,s:{s:s,s:s,s:s}}}", "metadata", "name", "dgx-1", "labels",
                          "kubernetes.io/hostname", "old", "nvidia.com/gpu.deploy.driver",
                          "pre-installed", "feature.node.kubernetes.io/by-hand", "x");
    json_t *nfd = json_pack("{s:s,s:s,s:s}", "feature.node.kubernetes.io/pci-10de.present", "true",
                            "feature.node.kubernetes.io/kernel-version.major", "5",
                            "nvidia.com/gpu.count", "8");
    assert_int_equal(kl_node_apply_labels(n, s, nfd), 0);
    assert_string_equal(kobj_label(n, "kubernetes.io/hostname"), "dgx-1");
    assert_string_equal(kobj_label(n, "nvidia.com/gpu.count"), "8");
    assert_string_equal(kobj_label(n, "nvidia.com/gpu.deploy.driver"), "pre-installed");
    assert_null(kobj_label(n, "zone")); /* the file's labels: at registration only */
    assert_string_equal(kobj_annotation(n, KL_NFD_LABELS_ANN),
                        "kernel-version.major,nvidia.com/gpu.count,pci-10de.present");
    assert_string_equal(kobj_annotation(n, KL_SIMULATED_ANN), "external");
    /* the same again: nothing to write */
    assert_int_equal(kl_node_apply_labels(n, s, nfd), 1);
    /* gpu.count no longer produced: removed; a label NFD never set stays */
    json_object_del(nfd, "nvidia.com/gpu.count");
    json_object_set_new(nfd, "feature.node.kubernetes.io/kernel-version.major", json_string("6"));
    assert_int_equal(kl_node_apply_labels(n, s, nfd), 0);
    assert_null(kobj_label(n, "nvidia.com/gpu.count"));
    assert_string_equal(kobj_label(n, "feature.node.kubernetes.io/kernel-version.major"), "6");
    assert_string_equal(kobj_label(n, "feature.node.kubernetes.io/by-hand"), "x");
    assert_string_equal(kobj_annotation(n, KL_NFD_LABELS_ANN),
                        "kernel-version.major,pci-10de.present");
    /* nothing produced: every NFD label and the annotation go */
    json_object_clear(nfd);
    assert_int_equal(kl_node_apply_labels(n, s, nfd), 0);
    assert_null(kobj_label(n, "feature.node.kubernetes.io/pci-10de.present"));
    assert_null(kobj_annotation(n, KL_NFD_LABELS_ANN));
    assert_string_equal(kobj_label(n, "feature.node.kubernetes.io/by-hand"), "x");
    json_decref(nfd);
    json_decref(n);

    /* a cluster without NFD (--no-nfd): the kubelet's labels only; what gpuop node-discovery
     * wrote stays, and no nfd-worker annotation appears */
    n = json_pack("{s:{s:s,s:{s:s}}}", "metadata", "name", "dgx-1", "labels",
                  "feature.node.kubernetes.io/pci-10de.present", "true");
    assert_int_equal(kl_node_apply_labels(n, s, json_null()), 0);
    assert_string_equal(kobj_label(n, "kubernetes.io/hostname"), "dgx-1");
    assert_string_equal(kobj_label(n, "feature.node.kubernetes.io/pci-10de.present"), "true");
    assert_null(kobj_annotation(n, KL_NFD_LABELS_ANN));
    assert_null(kobj_annotation(n, "nfd.node.kubernetes.io/worker.version"));
    assert_int_equal(kl_node_apply_labels(n, s, json_null()), 1);
    json_decref(n);
    kl_cluster_free(c);
}

static void test_lease(void **state)
{
    (void)state;
    json_t *l = kl_lease_object("dgx-1", "uid-1", 40, NOW);
    assert_string_equal(kobj_namespace(l), "kube-node-lease");
    assert_string_equal(kobj_name(l), "dgx-1");
    assert_string_equal(kobj_path_str(l, "spec.holderIdentity"), "dgx-1");
    assert_int_equal(json_integer_value(kobj_path(l, "spec.leaseDurationSeconds")), 40);
    assert_string_equal(kobj_path_str(l, "spec.renewTime"), "2026-12-02T03:50:24.123000Z");
    assert_true(kobj_owned_by(l, "Node", "uid-1"));
    kl_lease_renew(l, "dgx-1", 40, NOW + 10000);
    assert_string_equal(kobj_path_str(l, "spec.renewTime"), "2026-12-02T03:50:34.123000Z");
    json_decref(l);
    l = kl_lease_object("n", NULL, 40, NOW);
    assert_null(kobj_path(l, "metadata.ownerReferences"));
    json_decref(l);
}

/* The sanitizer settings every container gets: the test's own, and under AddressSanitizer the
 * dynamic TLS guess off (kl_sanitizer_env in node.c says why), unless the test set that flag. */
static void test_sanitizer_env(void **state)
{
    (void)state;
    static const struct {
        const char *asan, *ubsan, *lsan;
        bool asan_build;
        const char *want; /* the variables, joined by "|" */
    } cases[] = {
        {NULL, NULL, NULL, false, ""},
        {"detect_leaks=1", "halt_on_error=1", "verbosity=1", false,
         "ASAN_OPTIONS=detect_leaks=1|UBSAN_OPTIONS=halt_on_error=1|LSAN_OPTIONS=verbosity=1"},
        {NULL, NULL, NULL, true, "ASAN_OPTIONS=intercept_tls_get_addr=0"},
        {"", NULL, NULL, true, "ASAN_OPTIONS=intercept_tls_get_addr=0"},
        {"detect_leaks=1:abort_on_error=1", "print_stacktrace=1:halt_on_error=1", NULL, true,
         "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0|"
         "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"},
        /* the test's own choice stands */
        {"detect_leaks=1 intercept_tls_get_addr=1", NULL, NULL, true,
         "ASAN_OPTIONS=detect_leaks=1 intercept_tls_get_addr=1"},
        {"intercept_tls_get_addr=1", NULL, NULL, true, "ASAN_OPTIONS=intercept_tls_get_addr=1"},
        /* a flag whose name only ends the same is another flag */
        {"no_intercept_tls_get_addr=1", NULL, NULL, true,
         "ASAN_OPTIONS=no_intercept_tls_get_addr=1:intercept_tls_get_addr=0"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char **env =
            kl_sanitizer_env(cases[i].asan, cases[i].ubsan, cases[i].lsan, cases[i].asan_build);
        char got[512] = "";
        for (char **p = env; *p; p++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", p == env ? "" : "|", *p);
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, got, cases[i].want);
        kl_strv_free(env);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pci_class),   cmocka_unit_test(test_fleet_models),
        cmocka_unit_test(test_nfd_labels),  cmocka_unit_test(test_features_file),
        cmocka_unit_test(test_ids),         cmocka_unit_test(test_foreign_conditions_and_reboot),
        cmocka_unit_test(test_node_object), cmocka_unit_test(test_labels),
        cmocka_unit_test(test_lease),       cmocka_unit_test(test_sanitizer_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
