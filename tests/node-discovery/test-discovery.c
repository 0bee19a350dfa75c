/* SPDX-License-Identifier: Apache-2.0 */
/* disc_plan (the node-discovery core) and nodestate's NFD labels, os-release and PCI scan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node-discovery.h"
#include "kobj.h"
#include "nodestate.h"

static const char *const H100[] = {"0302"};

static json_t *node(const char *meta)
{
    json_error_t je;
    json_t *n = json_loads(meta, 0, &je);
    assert_non_null(n);
    return n;
}

static const char *patch_label(json_t *patch, const char *k)
{
    json_t *v = json_object_get(json_object_get(json_object_get(patch, "metadata"), "labels"), k);
    return v ? (json_is_null(v) ? "<null>" : json_string_value(v)) : NULL;
}

static const char *patch_ann(json_t *patch, const char *k)
{
    json_t *v =
        json_object_get(json_object_get(json_object_get(patch, "metadata"), "annotations"), k);
    return v ? (json_is_null(v) ? "<null>" : json_string_value(v)) : NULL;
}

/* A fresh GPU node gets the PCI and os_release labels, no kernel labels, and the owned set. */
static void test_fresh_gpu_node(void **state)
{
    (void)state;
    json_t *n =
        node("{\"metadata\":{\"name\":\"n1\",\"labels\":{\"kubernetes.io/os\":\"linux\"}}}");
    struct nodestate_nfd_input in = {H100, 1, "ubuntu", "22.04", "5.15.0-127-generic"};
    json_t *p = NULL;
    assert_int_equal(disc_plan(n, &in, &p), DISC_LABEL);
    assert_string_equal(patch_label(p, NODESTATE_NFD_PREFIX "pci-10de.present"), "true");
    assert_string_equal(patch_label(p, NODESTATE_NFD_PREFIX "pci-0302_10de.present"), "true");
    assert_string_equal(patch_label(p, NODESTATE_NFD_PREFIX "system-os_release.ID"), "ubuntu");
    assert_string_equal(patch_label(p, NODESTATE_NFD_PREFIX "system-os_release.VERSION_ID"),
                        "22.04");
    assert_string_equal(patch_label(p, NODESTATE_NFD_PREFIX "system-os_release.VERSION_ID.major"),
                        "22");
    assert_string_equal(patch_label(p, NODESTATE_NFD_PREFIX "system-os_release.VERSION_ID.minor"),
                        "04");
    assert_null(patch_label(p, NODESTATE_NFD_PREFIX "kernel-version.full"));
    assert_null(patch_label(p, "kubernetes.io/os"));
    assert_string_equal(patch_ann(p, NODESTATE_DISCOVERY_ANN),
                        "pci-0302_10de.present,pci-10de.present,system-os_release.ID,"
                        "system-os_release.VERSION_ID,system-os_release.VERSION_ID.major,"
                        "system-os_release.VERSION_ID.minor");
    assert_int_equal(json_object_size(json_object_get(json_object_get(p, "metadata"), "labels")),
                     6);
    json_decref(p);
    json_decref(n);
}

/* Applied once, the next pass writes nothing; a GPU gone removes its labels and only those. */
static void test_converges_and_removes_only_its_own(void **state)
{
    (void)state;
    json_t *n = node("{\"metadata\":{\"name\":\"n1\",\"labels\":{\"feature.node.kubernetes.io/"
                     "custom\":\"x\"}}}");
    struct nodestate_nfd_input in = {H100, 1, "rhel", "9.4", NULL};
    json_t *p = NULL;
    assert_int_equal(disc_plan(n, &in, &p), DISC_LABEL);
    /* Apply the patch as the API server would (a merge patch of flat maps). */
    json_t *meta = json_object_get(n, "metadata");
    json_t *pm = json_object_get(p, "metadata");
    json_object_set_new(meta, "annotations", json_object());
    json_object_update(json_object_get(meta, "labels"), json_object_get(pm, "labels"));
    json_object_update(json_object_get(meta, "annotations"), json_object_get(pm, "annotations"));
    json_decref(p);
    assert_int_equal(disc_plan(n, &in, &p), DISC_NOTHING);
    assert_null(p);
    struct nodestate_nfd_input gone = {NULL, 0, "rhel", "9.4", NULL};
    assert_int_equal(disc_plan(n, &gone, &p), DISC_LABEL);
    assert_string_equal(patch_label(p, NODESTATE_NFD_PREFIX "pci-10de.present"), "<null>");
    assert_string_equal(patch_label(p, NODESTATE_NFD_PREFIX "pci-0302_10de.present"), "<null>");
    assert_null(patch_label(p, NODESTATE_NFD_PREFIX "custom")); /* not its own: untouched */
    assert_null(patch_label(p, NODESTATE_NFD_PREFIX "system-os_release.ID"));
    json_decref(p);
    json_decref(n);
}

/* Where NFD runs it writes no label; it only drops its own annotation, once. */
static void test_stays_away_from_nfd(void **state)
{
    (void)state;
    json_t *n = node("{\"metadata\":{\"name\":\"n1\",\"annotations\":{\"" NODESTATE_NFD_WORKER_ANN
                     "\":\"v0.17.2\",\"" NODESTATE_DISCOVERY_ANN "\":\"pci-10de.present\"},"
                     "\"labels\":{\"feature.node.kubernetes.io/pci-10de.present\":\"true\"}}}");
    struct nodestate_nfd_input in = {H100, 1, "ubuntu", "22.04", NULL};
    json_t *p = NULL;
    assert_int_equal(disc_plan(n, &in, &p), DISC_STAY_AWAY);
    assert_null(json_object_get(json_object_get(p, "metadata"), "labels"));
    assert_string_equal(patch_ann(p, NODESTATE_DISCOVERY_ANN), "<null>");
    json_decref(p);
    json_object_del(kobj_annotations(n), NODESTATE_DISCOVERY_ANN);
    assert_int_equal(disc_plan(n, &in, &p), DISC_NOTHING);
    json_decref(n);
}

/* A CPU node: os_release labels only; a value that is not a label value is left out. */
static void test_cpu_node_and_bad_values(void **state)
{
    (void)state;
    json_t *n = node("{\"metadata\":{\"name\":\"c1\"}}");
    struct nodestate_nfd_input in = {NULL, 0, "debian", "12 (bookworm)", NULL};
    json_t *p = NULL;
    assert_int_equal(disc_plan(n, &in, &p), DISC_LABEL);
    assert_null(patch_label(p, NODESTATE_NFD_PREFIX "pci-10de.present"));
    assert_string_equal(patch_label(p, NODESTATE_NFD_PREFIX "system-os_release.ID"), "debian");
    assert_null(patch_label(p, NODESTATE_NFD_PREFIX "system-os_release.VERSION_ID"));
    json_decref(p);
    json_decref(n);
}

static void test_os_release(void **state)
{
    (void)state;
    char id[64], ver[64];
    const char *t = "NAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\n# c\nID=ubuntu\nID_LIKE=debian\n";
    assert_int_equal(nodestate_os_release(t, strlen(t), id, sizeof(id), ver, sizeof(ver)), 0);
    assert_string_equal(id, "ubuntu");
    assert_string_equal(ver, "22.04");
    const char *noid = "NAME=x\n";
    assert_int_equal(nodestate_os_release(noid, strlen(noid), id, sizeof(id), ver, sizeof(ver)),
                     -ENOENT);
}

static void put(const char *dir, const char *dev, const char *attr, const char *value)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/bus/pci/devices/%s", dir, dev);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", p);
    assert_int_equal(system(cmd), 0);
    snprintf(p, sizeof(p), "%s/bus/pci/devices/%s/%s", dir, dev, attr);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", value);
    fclose(f);
}

/* NVIDIA display functions only: not the NVSwitch (0x0680), not another vendor's GPU. */
static void test_pci_scan(void **state)
{
    (void)state;
    char dir[] = "/tmp/disc-sysfs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    put(dir, "0000:17:00.0", "vendor", "0x10de");
    put(dir, "0000:17:00.0", "class", "0x030200");
    put(dir, "0000:65:00.0", "vendor", "0x10de");
    put(dir, "0000:65:00.0", "class", "0x030000");
    put(dir, "0000:05:00.0", "vendor", "0x10de");
    put(dir, "0000:05:00.0", "class", "0x068000");
    put(dir, "0000:03:00.0", "vendor", "0x1002");
    put(dir, "0000:03:00.0", "class", "0x030000");
    char **v = NULL;
    size_t n = 0;
    struct err e = {0};
    assert_int_equal(nodestate_pci_nvidia_gpu_classes(dir, &v, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0], "0300");
    assert_string_equal(v[1], "0302");
    assert_null(v[2]);
    nodestate_strv_free(v);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    assert_true(nodestate_pci_nvidia_gpu_classes(dir, &v, &n, &e) < 0);
    assert_non_null(strstr(err_msg(&e), dir));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh_gpu_node),
        cmocka_unit_test(test_converges_and_removes_only_its_own),
        cmocka_unit_test(test_stays_away_from_nfd),
        cmocka_unit_test(test_cpu_node_and_bad_values),
        cmocka_unit_test(test_os_release),
        cmocka_unit_test(test_pci_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
