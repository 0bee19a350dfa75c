/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop status's core: a fixture cluster (cluster.json: policies, NVIDIA drivers, nodes, events,
 * pods, quotas, the time) to the view model and the text, against golden files
 * (GPUOP_UPDATE_GOLDEN=1 rewrites them); tables for the policy's last change, the pools, the drain,
 * the cut to the terminal's width and the colours. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kobj.h"
#include "statusview.h"

static char *src_path(const char *rel)
{
    const char *root = getenv("GPUOP_SOURCE_ROOT");
    return xasprintf("%s/tests/status/%s", root ? root : ".", rel);
}

struct fx {
    json_t *doc;
    struct st_objects in;
};

static int fx_setup(void **state)
{
    struct fx *f = xcalloc(1, sizeof(*f));
    _cleanup_free_ char *p = src_path("cluster.json");
    json_error_t je;
    f->doc = json_load_file(p, 0, &je);
    if (!f->doc)
        fail_msg("%s: %s", p, je.text);
    uint64_t now = 0;
    assert_int_equal(time_parse_rfc3339(kobj_str(f->doc, "now"), &now), 0);
    f->in = (struct st_objects){.policies = json_object_get(f->doc, "policies"),
                                .drivers = json_object_get(f->doc, "drivers"),
                                .nodes = json_object_get(f->doc, "nodes"),
                                .events = json_object_get(f->doc, "events"),
                                .pods = json_object_get(f->doc, "pods"),
                                .quotas = json_object_get(f->doc, "quotas"),
                                .now_ms = now};
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    json_decref(f->doc);
    free(f);
    return 0;
}

/* Compares text with golden/<name> (or writes it under GPUOP_UPDATE_GOLDEN). */
static void golden(const char *name, const char *text)
{
    _cleanup_free_ char *p = src_path(name);
    struct err e = {0};
    if (getenv("GPUOP_UPDATE_GOLDEN")) {
        assert_int_equal(file_write_atomic(p, text, strlen(text), 0644, &e), 0);
        return;
    }
    _cleanup_free_ char *want = NULL;
    if (file_read_all(p, 1u << 20, &want, NULL, &e) < 0)
        fail_msg("%s: %s (GPUOP_UPDATE_GOLDEN=1 writes it)", p, err_msg(&e));
    if (strcmp(want, text) != 0) {
        fprintf(stderr, "--- %s differs; got:\n%s", p, text);
        fail_msg("%s differs", name);
    }
}

static char *render_with(const json_t *model, const struct st_section *sections, bool color,
                         unsigned width, bool wide, uint64_t now)
{
    struct st_view v = {.color = color, .width = width, .wide = wide, .now_ms = now};
    char *text = NULL;
    struct err e = {0};
    assert_int_equal(st_render_text(model, sections, &v, 1u << 20, &text, &e), 0);
    return text;
}

static char *render(const json_t *model, bool color, unsigned width, bool wide, uint64_t now)
{
    return render_with(model, st_sections, color, width, wide, now);
}

static json_t *node_named(json_t *model, const char *name)
{
    size_t i;
    json_t *n;
    json_array_foreach (json_object_get(model, "nodes"), i, n)
        if (streq_ptr(kobj_str(n, "name"), name))
            return n;
    fail_msg("node %s not in the model", name);
    return NULL;
}

static bool has_problem(json_t *node, const char *part)
{
    size_t i;
    json_t *p;
    json_array_foreach (json_object_get(node, "problems"), i, p)
        if (strstr(json_string_value(p), part))
            return true;
    return false;
}

static void test_golden(void **state)
{
    struct fx *f = *state;
    _cleanup_(json_decrefp) json_t *model = st_model(&f->in, st_sections);
    _cleanup_free_ char *js = json_dumps(model, JSON_INDENT(2) | JSON_SORT_KEYS);
    size_t n = strlen(js);
    js = realloc(js, n + 2);
    memcpy(js + n, "\n", 2);
    golden("golden/model.json", js);
    _cleanup_free_ char *text = render(model, false, 0, false, f->in.now_ms);
    golden("golden/text.txt", text);
    _cleanup_free_ char *wide = render(model, false, 80, true, f->in.now_ms);
    golden("golden/text-wide.txt", wide);
    _cleanup_free_ char *narrow = render(model, false, 100, false, f->in.now_ms);
    golden("golden/text-100.txt", narrow);
    assert_null(strchr(text, '\x1b'));
}

/* The three facts. */
static void test_summary(void **state)
{
    struct fx *f = *state;
    _cleanup_(json_decrefp) json_t *m = st_summary_model(&f->in);
    assert_string_equal(kobj_str(m, "operatorVersion"), "0.1.0");
    /* the spec's last writer, not the later label or status writers */
    json_t *lc = kobj_path(m, "clusterPolicy.lastChange");
    assert_string_equal(kobj_str(lc, "manager"), "kubectl-edit");
    assert_string_equal(kobj_str(lc, "time"), "2026-05-31T09:30:00Z");
    json_t *d = json_object_get(m, "lastDrain");
    assert_string_equal(kobj_str(d, "node"), "h100-2");
    assert_string_equal(kobj_str(d, "by"), "operator");
    assert_int_equal(json_integer_value(kobj_path(m, "nodes.gpu")), 5);
    assert_int_equal(json_integer_value(kobj_path(m, "nodes.total")), 6);
    assert_int_equal(json_integer_value(kobj_path(m, "nodes.attention")), 3);
}

/* An Event newer than every annotation names the last drain. */
static void test_drain_from_event(void **state)
{
    struct fx *f = *state;
    _cleanup_(json_decrefp) json_t *events =
        json_pack("[{s:s,s:{s:s,s:s},s:s,s:s,s:{s:s}}]", "reason", "NodeDrain", "involvedObject",
                  "kind", "Node", "name", "a100-1", "message", "evicting GPU pods", "lastTimestamp",
                  "2026-06-01T11:45:00Z", "source", "component", "gpuop-driver-manager");
    struct st_objects in = f->in;
    in.events = events;
    _cleanup_(json_decrefp) json_t *m = st_summary_model(&in);
    json_t *d = json_object_get(m, "lastDrain");
    assert_string_equal(kobj_str(d, "node"), "a100-1");
    assert_string_equal(kobj_str(d, "reason"), "evicting GPU pods");
    /* no drain anywhere: null */
    _cleanup_(json_decrefp) json_t *none = json_array();
    _cleanup_(json_decrefp) json_t *plain = json_pack("[{s:{s:s}}]", "metadata", "name", "n");
    in.events = none;
    in.nodes = plain;
    _cleanup_(json_decrefp) json_t *m2 = st_summary_model(&in);
    assert_true(json_is_null(json_object_get(m2, "lastDrain")));
}

static void test_last_change(void **state)
{
    (void)state;
    static const struct {
        const char *mf, *want;
    } cases[] = {
        {"[]", NULL},
        /* only a status writer: nobody changed the policy */
        {"[{\"manager\":\"gpuop\",\"subresource\":\"status\",\"time\":\"2026-01-02T00:00:00Z\"}]",
         NULL},
        /* no spec writer: the latest outside a subresource */
        {"[{\"manager\":\"a\",\"time\":\"2026-01-01T00:00:00Z\"},"
         "{\"manager\":\"b\",\"time\":\"2026-01-03T00:00:00Z\"}]",
         "b"},
        /* a spec writer wins over a later metadata writer */
        {"[{\"manager\":\"spec\",\"time\":\"2026-01-01T00:00:00Z\",\"fieldsV1\":{\"f:spec\":{}}},"
         "{\"manager\":\"meta\",\"time\":\"2026-01-03T00:00:00Z\"}]",
         "spec"},
        /* the latest spec writer, fractional seconds read */
        {"[{\"manager\":\"old\",\"time\":\"2026-01-01T00:00:00.9Z\",\"fieldsV1\":{\"f:spec\":{}}},"
         "{\"manager\":\"new\",\"time\":\"2026-01-01T00:00:01.1Z\",\"fieldsV1\":{\"f:spec\":{}}},"
         "{\"manager\":\"bad\",\"time\":\"yesterday\",\"fieldsV1\":{\"f:spec\":{}}}]",
         "new"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_(json_decrefp) json_t *mf = json_loads(cases[i].mf, 0, NULL);
        assert_non_null(mf);
        _cleanup_(json_decrefp) json_t *cp =
            json_pack("{s:{s:O}}", "metadata", "managedFields", mf);
        _cleanup_(json_decrefp) json_t *lc = st_last_change(cp);
        if (!cases[i].want)
            assert_null(lc);
        else
            assert_string_equal(kobj_str(lc, "manager"), cases[i].want);
    }
}

static void test_pools(void **state)
{
    struct fx *f = *state;
    char buf[128];
    st_node_pool(json_array_get(f->in.nodes, 0), f->in.drivers, buf, sizeof(buf));
    assert_string_equal(buf, "ubuntu22.04");
    st_node_pool(json_array_get(f->in.nodes, 2), f->in.drivers, buf, sizeof(buf));
    assert_string_equal(buf, "nvidiadriver/a100");
    st_node_pool(json_array_get(f->in.nodes, 4), f->in.drivers, buf, sizeof(buf));
    assert_string_equal(buf, "unknown");
    /* the operator's owner label decides over selectors and the OS */
    _cleanup_(json_decrefp) json_t *owned = json_deep_copy(json_array_get(f->in.nodes, 0));
    json_object_set_new(kobj_ensure_keys(owned, (const char *const[]){"metadata", "labels", NULL}),
                        "nvidia.com/gpu-operator.driver.owner", json_string("research"));
    st_node_pool(owned, f->in.drivers, buf, sizeof(buf));
    assert_string_equal(buf, "nvidiadriver/research");
    _cleanup_(json_decrefp) json_t *pools = st_pools_model(&f->in);
    assert_int_equal(json_array_size(pools), 4);
    json_t *ub = json_array_get(pools, 2);
    assert_string_equal(kobj_str(ub, "name"), "ubuntu22.04");
    assert_int_equal(json_integer_value(json_object_get(ub, "nodes")), 2);
    assert_int_equal(json_integer_value(kobj_path(ub, "upgrade.done")), 1);
    assert_int_equal(json_integer_value(kobj_path(ub, "upgrade.inProgress")), 1);
    assert_int_equal(json_integer_value(kobj_path(ub, "states.drain-required")), 1);
    assert_string_equal(kobj_str(ub, "targetVersion"), "550.127.05");
    json_t *a = json_array_get(pools, 0);
    assert_string_equal(kobj_str(a, "name"), "nvidiadriver/a100");
    assert_string_equal(kobj_str(a, "targetVersion"), "570.86.15");
    assert_int_equal(json_integer_value(kobj_path(a, "upgrade.failed")), 1);
}

/* A lost GPU: advertised fewer than expected, flagged in the model and in the text. */
static void test_mismatch(void **state)
{
    struct fx *f = *state;
    _cleanup_(json_decrefp) json_t *model = st_model(&f->in, st_sections);
    json_t *n = node_named(model, "h100-2");
    assert_true(json_is_true(kobj_path(n, "gpus.mismatch")));
    assert_int_equal(json_integer_value(kobj_path(n, "gpus.physical")), 8);
    assert_int_equal(json_integer_value(kobj_path(n, "gpus.advertisedTotal")), 7);
    assert_string_equal(kobj_str(n, "health"), "fail");
    assert_true(has_problem(n, "GPU-5eed0002-0000-4000-8000-000000000002 (lost)"));
    json_t *ok = node_named(model, "h100-1");
    assert_false(json_is_true(kobj_path(ok, "gpus.mismatch")));
    assert_string_equal(kobj_str(ok, "health"), "ok");
    _cleanup_free_ char *text = render(model, false, 0, false, f->in.now_ms);
    assert_non_null(strstr(text, "7/8 MISMATCH"));
    _cleanup_free_ char *color = render(model, true, 0, false, f->in.now_ms);
    assert_non_null(strstr(color, "\x1b[31m7/8 MISMATCH"));
    assert_non_null(strstr(color, "\x1b[32mok"));
}

/* Annotations that do not parse are named, never fatal. */
static void test_bad_annotations(void **state)
{
    struct fx *f = *state;
    _cleanup_(json_decrefp) json_t *nodes = st_nodes_model(&f->in);
    json_t *bad = NULL;
    size_t i;
    json_t *n;
    json_array_foreach (nodes, i, n)
        if (streq_ptr(kobj_str(n, "name"), "bad-1"))
            bad = n;
    assert_non_null(bad);
    assert_true(has_problem(bad, "gpuop.dev/driver-owner: owner"));
    assert_true(has_problem(bad, "gpuop.dev/gpu-count: not JSON"));
    assert_string_equal(kobj_str(bad, "health"), "warn");
}

/* The last column gives way to the terminal's width; -o wide keeps everything. */
static void test_width(void **state)
{
    struct fx *f = *state;
    _cleanup_(json_decrefp) json_t *model = st_model(&f->in, st_sections);
    _cleanup_free_ char *text = render(model, false, 100, false, f->in.now_ms);
    bool cut = false;
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        size_t cols = 0;
        for (char *p = line; p < nl; p++)
            cols += ((unsigned char)*p & 0xC0) != 0x80;
        if (strstr(line, "h100-2") && strstr(line, "\xe2\x80\xa6"))
            cut = true;
        /* the summary lines are not cut (they wrap); table lines fit */
        if (!strchr(line, ':') || strstr(line, "NODE "))
            assert_true(cols <= 100);
        line = nl + 1;
    }
    assert_true(cut);
    _cleanup_free_ char *wide = render(model, false, 100, true, f->in.now_ms);
    assert_non_null(strstr(wide, "GPU-5eed0002-0000-4000-8000-000000000002 (lost)"));
    assert_non_null(strstr(wide, "UPGRADE"));
}

/* A bounded output: past the limit is an error, never a cut. */
static void test_limit(void **state)
{
    struct fx *f = *state;
    _cleanup_(json_decrefp) json_t *model = st_model(&f->in, st_sections);
    struct st_view v = {.now_ms = f->in.now_ms};
    char *text = NULL;
    struct err e = {0};
    assert_int_equal(st_render_text(model, st_sections, &v, 200, &text, &e), -E2BIG);
    assert_null(text);
    assert_non_null(strstr(e.msg, "gpuop status"));
}

/* A section is a pair of functions: one more entry adds a key to -o json and lines to the text. */
static json_t *extra_model(const struct st_objects *in)
{
    return json_pack("{s:i}", "nodes", (int)json_array_size(in->nodes));
}
static void extra_text(const json_t *m, const struct st_view *v, struct sbuf *out)
{
    (void)v;
    sbuf_addf(out, "Extra: %lld nodes\n", json_integer_value(json_object_get(m, "nodes")));
}

static void test_sections(void **state)
{
    struct fx *f = *state;
    struct st_section list[] = {st_sections[0], {"extra", extra_model, extra_text}, {0}};
    _cleanup_(json_decrefp) json_t *model = st_model(&f->in, list);
    assert_int_equal(json_integer_value(kobj_path(model, "extra.nodes")), 6);
    assert_null(json_object_get(model, "nodes"));
    _cleanup_free_ char *text = render_with(model, list, false, 0, false, f->in.now_ms);
    assert_non_null(strstr(text, "\n\nExtra: 6 nodes\n"));
}

/* The remediation section on its own fixture (remediation.json): the nodes with a fault or a
 * state (a healthy node and a node without GPUs left out; a health annotation that does not parse
 * shown), the open breakers (the cluster's, the default pool's written by hand, a pool's), the
 * condition; the text against golden/remediation.txt. Without any, the section says nothing. */
static void test_remediation(void **state)
{
    (void)state;
    _cleanup_free_ char *p = src_path("remediation.json");
    json_error_t je;
    _cleanup_(json_decrefp) json_t *doc = json_load_file(p, 0, &je);
    if (!doc)
        fail_msg("%s: %s", p, je.text);
    uint64_t now = 0;
    assert_int_equal(time_parse_rfc3339(kobj_str(doc, "now"), &now), 0);
    _cleanup_(json_decrefp) json_t *empty = json_array();
    struct st_objects in = {.policies = json_object_get(doc, "policies"),
                            .drivers = empty,
                            .nodes = json_object_get(doc, "nodes"),
                            .events = empty,
                            .pods = empty,
                            .quotas = empty,
                            .upgrade_pools = json_object_get(doc, "upgradePools"),
                            .now_ms = now};
    _cleanup_(json_decrefp) json_t *m = st_remediation_model(&in);
    json_t *nodes = json_object_get(m, "nodes");
    assert_int_equal(json_array_size(nodes), 4);
    json_t *n = json_array_get(nodes, 0);
    assert_string_equal(kobj_str(n, "name"), "h100-2");
    assert_string_equal(kobj_str(n, "state"), "remediating");
    assert_string_equal(kobj_str(n, "action"), "reset-gpu");
    assert_string_equal(kobj_path_str(n, "event.reason"), "UncorrectableECC");
    assert_string_equal(kobj_str(n, "request"), "reset-gpu 1780315500000 GPU-3");
    assert_non_null(strstr(kobj_str(n, "since"), "2026-06-01T11:55:00"));
    n = json_array_get(nodes, 1);
    assert_string_equal(kobj_str(n, "state"), "fault"); /* not quarantined: the breaker */
    assert_non_null(strstr(kobj_str(n, "why"), "breaker open"));
    n = json_array_get(nodes, 2);
    assert_string_equal(kobj_str(n, "state"), "failed");
    assert_non_null(strstr(kobj_str(n, "why"), "needs a person"));
    n = json_array_get(nodes, 3);
    assert_string_equal(kobj_str(n, "name"), "h100-5");
    assert_string_equal(kobj_str(n, "state"), "unknown");
    assert_non_null(kobj_str(n, "healthError"));
    json_t *br = json_object_get(m, "breakers");
    assert_int_equal(json_array_size(br), 3);
    assert_string_equal(kobj_str(json_array_get(br, 0), "scope"), "cluster");
    assert_string_equal(kobj_str(json_array_get(br, 1), "name"), "default");
    assert_true(json_is_null(json_object_get(json_array_get(br, 1), "since"))); /* by hand */
    assert_string_equal(kobj_str(json_array_get(br, 2), "name"), "train");
    assert_string_equal(kobj_path_str(m, "condition.reason"), "BreakerOpen");
    struct st_section only[] = {{"remediation", st_remediation_model, NULL}, {0}};
    for (const struct st_section *s = st_sections; s->name; s++)
        if (strcmp(s->name, "remediation") == 0)
            only[0] = *s;
    assert_non_null(only[0].text);
    _cleanup_(json_decrefp) json_t *model = st_model(&in, only);
    _cleanup_free_ char *text = render_with(model, only, false, 0, false, now);
    golden("golden/remediation.txt", text);
    /* no fault and no breaker: nothing */
    struct st_objects none = in;
    none.nodes = empty;
    none.policies = empty;
    none.upgrade_pools = NULL;
    _cleanup_(json_decrefp) json_t *quiet = st_model(&none, only);
    _cleanup_free_ char *nothing = render_with(quiet, only, false, 0, false, now);
    assert_string_equal(nothing, "");
}

/* A node's architecture: the kubelet's nodeInfo, else the kubernetes.io/arch label; the ARCH
 * column in -o wide, "arch" in -o json. */
static void test_arch(void **state)
{
    (void)state;
    static const struct {
        const char *info, *label, *want; /* NULL: absent */
    } cases[] = {
        {"arm64", "arm64", "arm64"}, {"arm64", NULL, "arm64"},    {NULL, "arm64", "arm64"},
        {"", "arm64", "arm64"},      {"amd64", "arm64", "amd64"}, /* the kubelet's own report wins
                                                                   */
        {NULL, NULL, NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_(json_decrefp) json_t *node =
            json_pack("{s:{s:s,s:{s:s}},s:{s:{}}}", "metadata", "name", "gh200-1", "labels",
                      "nvidia.com/gpu.present", "true", "status", "nodeInfo");
        if (cases[i].info)
            json_object_set_new(kobj_path(node, "status.nodeInfo"), "architecture",
                                json_string(cases[i].info));
        if (cases[i].label)
            json_object_set_new(kobj_path(node, "metadata.labels"), "kubernetes.io/arch",
                                json_string(cases[i].label));
        _cleanup_(json_decrefp) json_t *nodes = json_pack("[O]", node);
        _cleanup_(json_decrefp) json_t *empty = json_array();
        struct st_objects in = {.policies = empty,
                                .drivers = empty,
                                .nodes = nodes,
                                .events = empty,
                                .pods = empty,
                                .quotas = empty};
        _cleanup_(json_decrefp) json_t *model = st_nodes_model(&in);
        json_t *n = json_array_get(model, 0);
        assert_non_null(n);
        if (cases[i].want)
            assert_string_equal(kobj_str(n, "arch"), cases[i].want);
        else
            assert_true(json_is_null(json_object_get(n, "arch")));
        struct st_section only[] = {{"nodes", st_nodes_model, NULL}, {0}};
        for (const struct st_section *s = st_sections; s->name; s++)
            if (strcmp(s->name, "nodes") == 0)
                only[0] = *s;
        _cleanup_(json_decrefp) json_t *full = json_pack("{s:O}", "nodes", model);
        struct st_view v = {.wide = true};
        char *text = NULL;
        struct err e = {0};
        assert_int_equal(st_render_text(full, only, &v, 1u << 16, &text, &e), 0);
        /* the header's ARCH column, and this node's value under it */
        const char *hdr = strstr(text, "ARCH");
        assert_non_null(hdr);
        const char *line_start = text;
        size_t col = (size_t)(hdr - line_start);
        const char *row = strchr(text, '\n') + 1;
        assert_true(strlen(row) > col);
        const char *want = cases[i].want ? cases[i].want : "-";
        assert_int_equal(strncmp(row + col, want, strlen(want)), 0);
        free(text);
        /* the narrow table has no ARCH column */
        v.wide = false;
        assert_int_equal(st_render_text(full, only, &v, 1u << 16, &text, &e), 0);
        assert_null(strstr(text, "ARCH"));
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_golden, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_summary, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_drain_from_event, fx_setup, fx_teardown),
        cmocka_unit_test(test_last_change),
        cmocka_unit_test_setup_teardown(test_pools, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_mismatch, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_bad_annotations, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_width, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_limit, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_sections, fx_setup, fx_teardown),
        cmocka_unit_test(test_remediation),
        cmocka_unit_test(test_arch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
