/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests of kubelet-sim's cluster file: every field, its defaults and its errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "kubelet-sim.h"
#include "util.h"

#define HEAD "apiVersion: gpuop.dev/v1alpha1\nkind: SimCluster\nnodes:\n"
/* A complete node, the fields of the header's example. */
#define NODE_A                                   \
    "- name: a\n"                                \
    "  root: /tmp/c/a\n"                         \
    "  kernel: 5.15.0-127-generic\n"             \
    "  os: {id: ubuntu, versionId: \"22.04\"}\n" \
    "  runtime: containerd\n"

static struct kl_cluster *parse_ok_at(const char *path, const char *text)
{
    struct kl_cluster *c = NULL;
    struct err e = {0};
    if (kl_cluster_parse(path, text, strlen(text), &c, &e) < 0)
        fail_msg("parse failed: %s\n--- input:\n%s", err_msg(&e), text);
    assert_non_null(c);
    return c;
}

static struct kl_cluster *parse_ok(const char *text)
{
    return parse_ok_at("/etc/sim/cluster.yaml", text);
}

/* Parsing fails with one line that names the file and holds want. */
static void parse_fails(const char *text, const char *want)
{
    struct kl_cluster *c = NULL;
    struct err e = {0};
    int r = kl_cluster_parse("/etc/sim/cluster.yaml", text, strlen(text), &c, &e);
    if (r == 0) {
        kl_cluster_free(c);
        fail_msg("parse of\n%s\nsucceeded, want an error with \"%s\"", text, want);
    }
    assert_true(r < 0);
    assert_null(c);
    const char *m = err_msg(&e);
    if (!str_has_prefix(m, "/etc/sim/cluster.yaml"))
        fail_msg("error \"%s\" does not name the file", m);
    if (strchr(m, '\n'))
        fail_msg("error \"%s\" is more than one line", m);
    if (!strstr(m, want))
        fail_msg("error \"%s\" lacks \"%s\"", m, want);
}

static void test_full_node(void **state)
{
    (void)state;
    struct kl_cluster *c = parse_ok(HEAD "- name: dgx-h100-1\n"
                                         "  fleet: ../fleets/dgx-h100.yaml\n"
                                         "  root: nodes/./dgx//h1/\n"
                                         "  kernel: 5.15.0-127-generic\n"
                                         "  os: {id: ubuntu, versionId: \"22.04\", prettyName: "
                                         "Ubuntu 22.04.5 LTS}\n"
                                         "  runtime: cri-o\n"
                                         "  kernelHeaders: [5.15.0-127-generic, 6.8.0-49-generic]\n"
                                         "  hostDriver: \"550.127.05\"\n"
                                         "  cpu: 224\n"
                                         "  memory: 2015564Mi\n"
                                         "  pods: \"250\"\n"
                                         "  labels: {node-role.example/gpu: \"true\", zone: a}\n");
    assert_int_equal(c->n_nodes, 1);
    const struct kl_node_spec *n = &c->nodes[0];
    assert_string_equal(n->name, "dgx-h100-1");
    assert_string_equal(n->fleet, "/etc/fleets/dgx-h100.yaml");
    assert_string_equal(n->root, "/etc/sim/nodes/dgx/h1");
    assert_string_equal(n->kernel, "5.15.0-127-generic");
    assert_string_equal(n->os_id, "ubuntu");
    assert_string_equal(n->os_version_id, "22.04");
    assert_string_equal(n->os_pretty, "Ubuntu 22.04.5 LTS");
    assert_int_equal(n->runtime, KL_RUNTIME_CRIO);
    assert_string_equal(n->kernel_headers[0], "5.15.0-127-generic");
    assert_string_equal(n->kernel_headers[1], "6.8.0-49-generic");
    assert_null(n->kernel_headers[2]);
    assert_string_equal(n->host_driver, "550.127.05");
    assert_int_equal(n->cpu, 224);
    assert_true(n->memory_bytes == 2015564ull * 1024 * 1024);
    assert_int_equal(n->pods, 250);
    assert_int_equal(json_object_size(n->labels), 2);
    assert_string_equal(json_string_value(json_object_get(n->labels, "zone")), "a");
    kl_cluster_free(c);
}

static void test_defaults(void **state)
{
    (void)state;
    struct kl_cluster *c = parse_ok(HEAD NODE_A "- name: b.example\n"
                                                "  root: /tmp/c/b\n"
                                                "  kernel: 6.8.0\n"
                                                "  os: {id: rhel, versionId: \"9.4\"}\n"
                                                "  runtime: docker\n");
    assert_int_equal(c->n_nodes, 2);
    const struct kl_node_spec *a = &c->nodes[0];
    assert_null(a->fleet); /* a CPU node */
    assert_null(a->host_driver);
    assert_non_null(a->kernel_headers);
    assert_null(a->kernel_headers[0]);
    assert_int_equal(a->cpu, 8);
    assert_true(a->memory_bytes == 32ull << 30);
    assert_int_equal(a->pods, 110);
    assert_true(json_is_object(a->labels) && json_object_size(a->labels) == 0);
    assert_string_equal(a->os_pretty, "ubuntu 22.04");
    assert_int_equal(a->runtime, KL_RUNTIME_CONTAINERD);
    assert_int_equal(c->nodes[1].runtime, KL_RUNTIME_DOCKER);
    kl_cluster_free(c);
}

static void test_memory_quantities(void **state)
{
    (void)state;
    static const struct {
        const char *yaml;
        uint64_t bytes;
    } ok[] = {
        {"1024", 1024},       {"\"2048\"", 2048},         {"32Gi", 32ull << 30},
        {"64G", 64000000000}, {"\"1e9\"", 1000000000ull}, {"2015564Mi", 2015564ull << 20},
        {"+1Ki", 1024},       {"1Ei", 1ull << 60},
    };
    for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
        char text[1024];
        snprintf(text, sizeof(text), HEAD NODE_A "  memory: %s\n", ok[i].yaml);
        struct kl_cluster *c = parse_ok(text);
        if (c->nodes[0].memory_bytes != ok[i].bytes)
            fail_msg("memory %s: got %llu, want %llu", ok[i].yaml,
                     (unsigned long long)c->nodes[0].memory_bytes, (unsigned long long)ok[i].bytes);
        kl_cluster_free(c);
    }
    static const char *const bad[] = {"1.5Gi", "-1Gi", "0",   "100m", "0Gi",  "16Ei", "1e20",
                                      "1e-3",  "lots", "1GB", "[1]",  "true", "\"\""};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char text[1024];
        snprintf(text, sizeof(text), HEAD NODE_A "  memory: %s\n", bad[i]);
        parse_fails(text, "nodes[0].memory: ");
    }
}

static void test_relative_paths(void **state)
{
    (void)state;
    /* relative to the cluster file's folder; ".." stops at "/" */
    struct kl_cluster *c =
        parse_ok_at("/a/b/c.yaml", HEAD "- name: n\n  fleet: ../../../../f.yaml\n  root: ./r\n"
                                        "  kernel: 6.1.0\n  os: {id: debian, versionId: \"12\"}\n"
                                        "  runtime: containerd\n");
    assert_string_equal(c->nodes[0].fleet, "/f.yaml");
    assert_string_equal(c->nodes[0].root, "/a/b/r");
    kl_cluster_free(c);
    /* a file named without a folder: relative paths cannot become absolute */
    struct kl_cluster *r = NULL;
    struct err e = {0};
    const char *text = HEAD "- name: n\n  root: r\n  kernel: 6.1.0\n"
                            "  os: {id: debian, versionId: \"12\"}\n  runtime: containerd\n";
    assert_true(kl_cluster_parse("cluster.yaml", text, strlen(text), &r, &e) < 0);
    assert_string_equal(e.msg, "cluster.yaml: nodes[0].root: \"r\" resolves to \"r\", not an "
                               "absolute path (name the cluster file by an absolute path, or "
                               "give an absolute root)");
    /* ...but absolute ones are fine */
    c = parse_ok_at("cluster.yaml", HEAD NODE_A);
    assert_string_equal(c->nodes[0].root, "/tmp/c/a");
    kl_cluster_free(c);
}

static void test_exact_messages(void **state)
{
    (void)state;
    struct kl_cluster *c = NULL;
    struct err e = {0};
    const char *text = HEAD NODE_A "- name: a\n  root: /tmp/c/x\n  kernel: 6.1.0\n"
                                   "  os: {id: debian, versionId: \"12\"}\n  runtime: docker\n";
    assert_true(kl_cluster_parse("cluster.yaml", text, strlen(text), &c, &e) < 0);
    assert_string_equal(e.msg, "cluster.yaml: nodes[1].name: duplicate node name \"a\" (nodes[0])");
    text = HEAD NODE_A "  gpus: 8\n";
    assert_true(kl_cluster_parse("cluster.yaml", text, strlen(text), &c, &e) < 0);
    assert_non_null(strstr(e.msg, "cluster.yaml: nodes[0]: unknown field \"gpus\" (known: name, "));
    text = HEAD "- name: a\n  root: /r\n  kernel: 6.1.0\n  os: {id: u, versionId: \"1\"}\n"
                "  runtime: podman\n";
    assert_true(kl_cluster_parse("cluster.yaml", text, strlen(text), &c, &e) < 0);
    assert_string_equal(e.msg, "cluster.yaml: nodes[0].runtime: \"podman\" is not one of "
                               "containerd, cri-o, docker");
    assert_null(c);
}

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        /* the document */
        {"", ": apiVersion: expected \"gpuop.dev/v1alpha1\""},
        {"[1, 2]", ": expected a mapping at the top, got a list"},
        {"apiVersion: v1\nkind: SimCluster\nnodes: []\n", "apiVersion: expected"},
        {"apiVersion: gpuop.dev/v1alpha1\nkind: Node\nnodes: []\n",
         "kind: expected \"SimCluster\""},
        {HEAD "  []\n", "nodes: the list is empty"},
        {"apiVersion: gpuop.dev/v1alpha1\nkind: SimCluster\n", "nodes: expected a list of nodes"},
        {"apiVersion: gpuop.dev/v1alpha1\nkind: SimCluster\nnodes: {a: 1}\n",
         "nodes: expected a list of nodes, got a mapping"},
        {HEAD NODE_A "extra: 1\n", ": unknown field \"extra\""},
        {HEAD "- name: [a\n", "cluster.yaml:"}, /* YAML syntax, with line and column */
        {HEAD "- 42\n", "nodes[0]: expected a mapping, got an integer"},
        /* name */
        {HEAD "- root: /x\n", "nodes[0].name: required field is missing"},
        {HEAD "- name: Node_1\n", "nodes[0].name: \"Node_1\" is not a DNS-1123 subdomain"},
        {HEAD "- name: \"\"\n", "nodes[0].name: must not be empty"},
        {HEAD "- name: -a\n", "not a DNS-1123 subdomain"},
        {HEAD "- name: a2345678901234567890123456789012.45678901234567890123456789012345\n",
         "longer than 63 bytes"},
        {HEAD "- name: 7\n", "nodes[0].name: expected a string, got an integer"},
        /* paths */
        {HEAD "- name: a\n  kernel: 6.1.0\n", "nodes[0].root: required field is missing"},
        {HEAD "- name: a\n  root: /\n", "nodes[0].root: the host's \"/\" cannot be a node root"},
        {HEAD "- name: a\n  root: /tmp/..\n", "nodes[0].root: the host's \"/\""},
        {HEAD "- name: a\n  root: /r\n  fleet: \"\"\n", "nodes[0].fleet: must not be empty"},
        {HEAD "- name: a\n  root: /r\n  fleet: {}\n", "nodes[0].fleet: expected a string"},
        {HEAD NODE_A "- name: b\n  root: /tmp/c/a\n",
         "nodes[1].root: \"/tmp/c/a\" is also the root "
         "of nodes[0] (\"a\")"},
        {HEAD NODE_A "- name: b\n  root: /tmp/c/a/../a/b\n", "lie one inside the other"},
        {HEAD NODE_A "- name: b\n  root: /tmp\n", "lie one inside the other"},
        /* kernel, os, runtime */
        {HEAD "- name: a\n  root: /r\n", "nodes[0].kernel: required field is missing"},
        {HEAD "- name: a\n  root: /r\n  kernel: \"\"\n", "nodes[0].kernel: must not be empty"},
        {HEAD "- name: a\n  root: /r\n  kernel: linux 6\n", "nodes[0].kernel: \"linux 6\" is not"},
        {HEAD "- name: a\n  root: /r\n  kernel: ../6.1\n", "nodes[0].kernel: \"../6.1\" is not"},
        {HEAD "- name: a\n  root: /r\n  kernel: 6.1.0\n", "nodes[0].os: required field is missing"},
        {HEAD "- name: a\n  root: /r\n  kernel: 6.1.0\n  os: ubuntu\n",
         "nodes[0].os: expected a mapping, got a string"},
        {HEAD "- name: a\n  root: /r\n  kernel: 6.1.0\n  os: {id: ubuntu}\n",
         "nodes[0].os.versionId: required field is missing"},
        {HEAD "- name: a\n  root: /r\n  kernel: 6.1.0\n  os: {id: ubuntu, versionId: 22.04}\n",
         "nodes[0].os.versionId: expected a string, got a number"},
        {HEAD
         "- name: a\n  root: /r\n  kernel: 6.1.0\n  os: {id: Ubuntu Linux, versionId: \"1\"}\n",
         "nodes[0].os.id: \"Ubuntu Linux\" is not a valid label value"},
        {HEAD "- name: a\n  root: /r\n  kernel: 6.1.0\n  os: {id: u, versionId: \"1\", name: x}\n",
         "nodes[0].os: unknown field \"name\""},
        {HEAD "- name: a\n  root: /r\n  kernel: 6.1.0\n  os: {id: u, versionId: \"1\"}\n",
         "nodes[0].runtime: required field is missing"},
        {HEAD "- name: a\n  root: /r\n  kernel: 6.1.0\n  os: {id: u, versionId: \"1\"}\n"
              "  runtime: Containerd\n",
         "nodes[0].runtime: \"Containerd\" is not one of"},
        /* kernelHeaders, hostDriver */
        {HEAD NODE_A "  kernelHeaders: 5.15.0\n", "nodes[0].kernelHeaders: expected a list"},
        {HEAD NODE_A "  kernelHeaders: [5.15.0, 7]\n",
         "nodes[0].kernelHeaders[1]: expected a string, got an integer"},
        {HEAD NODE_A "  kernelHeaders: [5.15.0, x/y]\n",
         "nodes[0].kernelHeaders[1]: \"x/y\" is not"},
        {HEAD NODE_A "  kernelHeaders: [5.15.0, 5.15.0]\n",
         "kernelHeaders[1]: \"5.15.0\" is listed twice"},
        {HEAD NODE_A "  hostDriver: \"550\"\n",
         "nodes[0].hostDriver: \"550\" is not a driver version"},
        {HEAD NODE_A "  hostDriver: \"550.x\"\n", "nodes[0].hostDriver: \"550.x\" is not"},
        {HEAD NODE_A "  hostDriver: \"550.127.05\"\n",
         "nodes[0].hostDriver: a node without a fleet"},
        /* capacity */
        {HEAD NODE_A "  cpu: 0\n", "nodes[0].cpu: 0 is out of range"},
        {HEAD NODE_A "  cpu: 2.5\n", "nodes[0].cpu: expected an integer, got a number"},
        {HEAD NODE_A "  cpu: \"500m\"\n", "nodes[0].cpu: \"500m\" is not an integer"},
        {HEAD NODE_A "  pods: 0\n", "nodes[0].pods: 0 is out of range"},
        {HEAD NODE_A "  pods: 100000\n", "nodes[0].pods: 100000 is out of range"},
        /* architecture */
        {HEAD NODE_A "  arch: aarch64\n",
         "nodes[0].arch: \"aarch64\" is not a node architecture (amd64, arm64)"},
        {HEAD NODE_A "  arch: [arm64]\n", "nodes[0].arch: expected a string, got a list"},
        /* labels */
        {HEAD NODE_A "  labels: [a]\n", "nodes[0].labels: expected a mapping, got a list"},
        {HEAD NODE_A "  labels: {\"bad key!\": x}\n",
         "nodes[0].labels: \"bad key!\" is not a valid "
         "label key"},
        {HEAD NODE_A "  labels: {a: 1}\n", "nodes[0].labels.a: expected a string, got an integer"},
        {HEAD NODE_A "  labels: {a: \"not valid\"}\n", "nodes[0].labels.a: \"not valid\" is not a "
                                                       "valid label value"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
        parse_fails(cases[i].text, cases[i].want);
}

static void test_sample_cluster(void **state)
{
    (void)state;
    /* The committed demo cluster parses and names existing fleets. */
    const char *src = env_get("GPUOP_SOURCE_ROOT");
    if (!src)
        skip();
    char path[4096];
    snprintf(path, sizeof(path), "%s/sim/clusters/mixed.yaml", src);
    char *text = NULL;
    size_t len = 0;
    struct err e = {0};
    if (file_read_all(path, 1 << 20, &text, &len, &e) < 0)
        fail_msg("%s", err_msg(&e));
    struct kl_cluster *c = NULL;
    if (kl_cluster_parse(path, text, len, &c, &e) < 0)
        fail_msg("%s", err_msg(&e));
    free(text);
    assert_int_equal(c->n_nodes, 5);
    size_t gpu_nodes = 0, host_driver = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        if (c->nodes[i].fleet) {
            gpu_nodes++;
            if (access(c->nodes[i].fleet, R_OK) != 0)
                fail_msg("fleet %s of %s is missing", c->nodes[i].fleet, c->nodes[i].name);
        }
        host_driver += c->nodes[i].host_driver != NULL;
    }
    assert_int_equal(gpu_nodes, 4);
    assert_int_equal(host_driver, 1);
    kl_cluster_free(c);
}

/* The committed Grace pool parses: two arm64 GPU nodes on the GH200 and GB200 fleets. */
static void test_grace_cluster(void **state)
{
    (void)state;
    const char *src = env_get("GPUOP_SOURCE_ROOT");
    if (!src)
        skip();
    char path[4096];
    snprintf(path, sizeof(path), "%s/sim/clusters/grace.yaml", src);
    char *text = NULL;
    size_t len = 0;
    struct err e = {0};
    if (file_read_all(path, 1 << 20, &text, &len, &e) < 0)
        fail_msg("%s", err_msg(&e));
    struct kl_cluster *c = NULL;
    if (kl_cluster_parse(path, text, len, &c, &e) < 0)
        fail_msg("%s", err_msg(&e));
    free(text);
    assert_int_equal(c->n_nodes, 2);
    for (size_t i = 0; i < c->n_nodes; i++) {
        assert_string_equal(c->nodes[i].arch, "arm64");
        assert_non_null(c->nodes[i].fleet);
        if (access(c->nodes[i].fleet, R_OK) != 0)
            fail_msg("fleet %s of %s is missing", c->nodes[i].fleet, c->nodes[i].name);
    }
    kl_cluster_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_node),         cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_memory_quantities), cmocka_unit_test(test_relative_paths),
        cmocka_unit_test(test_exact_messages),    cmocka_unit_test(test_errors),
        cmocka_unit_test(test_sample_cluster),    cmocka_unit_test(test_grace_cluster),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
