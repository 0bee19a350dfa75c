/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node status exporter's core: the metrics page for a node fixture (golden text), the grace
 * period of gpuop_node_gpu_advertised_mismatch with time passed in, the start of a shortfall
 * kept across a restart through the node's annotation, and what is reported when a source
 * cannot be read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "kobj.h"
#include "node-status-exporter.h"

#define T0 1767225600000ull /* 2026-01-01T00:00:00Z */

static const char *const uuids[] = {"GPU-00000000-0000-0000-0000-000000000000",
                                    "GPU-11111111-1111-1111-1111-111111111111"};

/* A node with `allocatable` nvidia.com/gpu (and as much capacity), the agents' annotations. */
static json_t *node_fixture(int allocatable)
{
    json_error_t je;
    json_t *n = json_loads(
        "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"gpu-1\","
        "\"labels\":{\"nvidia.com/gpu.present\":\"true\"},\"annotations\":{"
        "\"gpuop.dev/"
        "driver-owner\":\"{\\\"owner\\\":\\\"host\\\",\\\"version\\\":\\\"550.127.05\\\","
        "\\\"source\\\":\\\"module nvidia loaded\\\",\\\"time\\\":\\\"2026-01-01T00:00:00Z\\\"}\","
        "\"validation.gpuop.dev/driver\":\"{\\\"state\\\":\\\"ok\\\",\\\"reason\\\":\\\"\\\","
        "\\\"time\\\":\\\"2026-01-01T00:00:00Z\\\"}\","
        "\"validation.gpuop.dev/plugin\":\"{\\\"state\\\":\\\"failed\\\",\\\"reason\\\":"
        "\\\"nvidia.com/gpu: 1 of 2\\\",\\\"time\\\":\\\"2026-01-01T00:00:00Z\\\"}\"}},"
        "\"status\":{\"capacity\":{\"cpu\":\"8\"},\"allocatable\":{\"cpu\":\"8\"}}}",
        0, &je);
    assert_non_null(n);
    char q[16];
    snprintf(q, sizeof(q), "%d", allocatable);
    json_object_set_new(kobj_path(n, "status.capacity"), "nvidia.com/gpu", json_string(q));
    json_object_set_new(kobj_path(n, "status.allocatable"), "nvidia.com/gpu", json_string(q));
    return n;
}

static void set_annotation(json_t *node, const char *key, const char *value)
{
    json_object_set_new(kobj_path(node, "metadata.annotations"), key, json_string(value));
}

struct fx {
    struct nodestate_gpu gpus[2];
    struct nst_observation o;
    json_t *node;
};

static void fx_init(struct fx *f, int allocatable, bool lost, uint64_t now)
{
    memset(f, 0, sizeof(*f));
    for (size_t i = 0; i < 2; i++)
        f->gpus[i].uuid = uuids[i];
    f->gpus[1].lost = lost;
    f->node = node_fixture(allocatable);
    f->o = (struct nst_observation){.now_ms = now,
                                    .files_ok = true,
                                    .nvml_ok = true,
                                    .gpus = f->gpus,
                                    .n_gpus = 2,
                                    .driver_version = "550.127.05",
                                    .pci_devices = 2,
                                    .node = f->node};
    f->o.file[NODESTATE_DRIVER_READY] = true;
    f->o.file[NODESTATE_TOOLKIT_READY] = true;
}

static char *render(const struct nst_report *r, enum prom_format fmt)
{
    struct sbuf b;
    sbuf_init(&b, 1 << 20);
    assert_int_equal(nst_render(r, fmt, &b), 0);
    return sbuf_steal(&b);
}

static char *read_golden(const char *name)
{
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    if (!src)
        src = ".";
    _cleanup_free_ char *path = xasprintf("%s/tests/node-status-exporter/golden/%s", src, name);
    char *text = NULL;
    struct err e = {0};
    if (file_read_all(path, 1 << 20, &text, NULL, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return text;
}

/* The page for a healthy node with two GPUs, equal to the golden file (GPUOP_UPDATE_GOLDEN=1
 * rewrites it). */
static void test_golden(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f, 2, false, T0 + 5000);
    struct nst_state st = {.started_ms = T0};
    struct nst_report r = {0};
    struct err e = {0};
    assert_int_equal(nst_observe(&st, "gpu-1", 60000, &f.o, &r, &e), 0);
    _cleanup_free_ char *text = render(&r, PROM_FORMAT_TEXT);
    _cleanup_free_ char *om = render(&r, PROM_FORMAT_OPENMETRICS);
    const char *names[] = {"healthy.prom", "healthy.om"};
    const char *pages[] = {text, om};
    for (size_t i = 0; i < 2; i++) {
        if (getenv("GPUOP_UPDATE_GOLDEN")) {
            const char *src = getenv("GPUOP_SOURCE_ROOT");
            _cleanup_free_ char *path =
                xasprintf("%s/tests/node-status-exporter/golden/%s", src, names[i]);
            assert_int_equal(file_write_atomic(path, pages[i], strlen(pages[i]), 0644, &e), 0);
        }
        _cleanup_free_ char *want = read_golden(names[i]);
        if (strcmp(want, pages[i]) != 0)
            fail_msg("%s differs:\n%s", names[i], pages[i]);
    }
    /* The annotation reports the count, not short. */
    assert_non_null(r.annotation);
    struct nodestate_gpu_count c;
    assert_int_equal(nodestate_gpu_count_parse(r.annotation, &c, &e), 0);
    assert_int_equal(c.physical, 2);
    assert_false(c.short_);
    assert_false(c.mismatch);
    /* Written once: the node now carries it, so the next observation has nothing to write. */
    set_annotation(f.node, NODESTATE_ANN_GPU_COUNT, r.annotation);
    f.o.now_ms += 30000;
    assert_int_equal(nst_observe(&st, "gpu-1", 60000, &f.o, &r, &e), 0);
    assert_null(r.annotation);
    nst_report_clear(&r);
    json_decref(f.node);
}

static bool has_line(const char *page, const char *line)
{
    const char *p = page;
    size_t n = strlen(line);
    while ((p = strstr(p, line))) {
        if ((p == page || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return true;
        p += n;
    }
    return false;
}

static void observe_at(struct nst_state *st, struct fx *f, uint64_t now, struct nst_report *r)
{
    struct err e = {0};
    f->o.now_ms = now;
    assert_int_equal(nst_observe(st, "gpu-1", 60000, &f->o, r, &e), 0);
    if (r->annotation) /* the shell writes it; the node carries it from then on */
        set_annotation(f->node, NODESTATE_ANN_GPU_COUNT, r->annotation);
}

/* A lost GPU the node no longer advertises: short at once, a mismatch only after the grace
 * period, the annotation written when it changes (short, then mismatch), and back to 0 when
 * the node advertises both GPUs again. */
static void test_grace(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f, 1, true, T0);
    struct nst_state st = {.started_ms = T0};
    struct nst_report r = {0};
    struct nodestate_gpu_count c;
    struct err e = {0};

    observe_at(&st, &f, T0 + 10000, &r);
    assert_true(r.count_ok);
    assert_true(r.count.short_);
    assert_false(r.count.mismatch);
    assert_string_equal(r.count.since, "2026-01-01T00:00:10Z");
    assert_int_equal(r.lost, 1);
    assert_non_null(r.annotation);
    assert_int_equal(nodestate_gpu_count_parse(r.annotation, &c, &e), 0);
    assert_true(c.short_);
    assert_false(c.mismatch);
    _cleanup_free_ char *p0 = render(&r, PROM_FORMAT_TEXT);
    assert_true(has_line(p0, "gpuop_node_gpu_advertised_short{node=\"gpu-1\"} 1"));
    assert_true(has_line(p0, "gpuop_node_gpu_advertised_mismatch{node=\"gpu-1\"} 0"));
    assert_true(has_line(p0, "gpuop_node_gpus_lost{node=\"gpu-1\"} 1"));

    observe_at(&st, &f, T0 + 69999, &r); /* 59.999 s short */
    assert_false(r.count.mismatch);
    assert_null(r.annotation); /* nothing changed */

    observe_at(&st, &f, T0 + 70000, &r); /* 60 s short */
    assert_true(r.count.mismatch);
    assert_string_equal(r.count.since, "2026-01-01T00:00:10Z");
    assert_non_null(r.annotation);
    assert_int_equal(nodestate_gpu_count_parse(r.annotation, &c, &e), 0);
    assert_true(c.mismatch);
    assert_string_equal(c.since, "2026-01-01T00:00:10Z");
    _cleanup_free_ char *p1 = render(&r, PROM_FORMAT_TEXT);
    assert_true(has_line(p1, "gpuop_node_gpu_advertised_mismatch{node=\"gpu-1\"} 1"));

    observe_at(&st, &f, T0 + 80000, &r);
    assert_true(r.count.mismatch);
    assert_null(r.annotation);

    /* The GPU is back and advertised: the mismatch clears at once, and a new shortfall starts
     * its own grace period. */
    f.gpus[1].lost = false;
    json_decref(f.node);
    f.node = node_fixture(2);
    f.o.node = f.node;
    observe_at(&st, &f, T0 + 90000, &r);
    assert_false(r.count.short_);
    assert_false(r.count.mismatch);
    assert_string_equal(r.count.since, "");
    assert_non_null(r.annotation);
    json_object_set_new(kobj_path(f.node, "status.allocatable"), "nvidia.com/gpu",
                        json_string("1"));
    observe_at(&st, &f, T0 + 100000, &r);
    assert_true(r.count.short_);
    assert_false(r.count.mismatch);
    assert_string_equal(r.count.since, "2026-01-01T00:01:40Z");
    nst_report_clear(&r);
    json_decref(f.node);
}

/* A restarted exporter keeps the start its predecessor wrote in the annotation: the mismatch
 * is reported at once when the shortfall is older than the grace period. A start in the future
 * (a clock that went back) is not trusted. */
static void test_restart_keeps_since(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f, 1, true, T0);
    struct nst_state st = {.started_ms = T0};
    struct nst_report r = {0};
    observe_at(&st, &f, T0, &r); /* writes short since T0 */
    assert_false(r.count.mismatch);

    struct nst_state st2 = {.started_ms = T0 + 120000};
    observe_at(&st2, &f, T0 + 120000, &r);
    assert_true(r.count.mismatch);
    assert_string_equal(r.count.since, "2026-01-01T00:00:00Z");

    struct nst_state st3 = {.started_ms = T0 - 3600000};
    observe_at(&st3, &f, T0 - 3600000, &r);
    assert_false(r.count.mismatch);
    assert_string_equal(r.count.since, "2025-12-31T23:00:00Z");
    nst_report_clear(&r);
    json_decref(f.node);
}

/* What cannot be read is reported as unknown and counted, never as a made-up value. */
static void test_unknown_sources(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f, 2, false, T0);
    struct nst_state st = {.started_ms = T0};
    struct nst_report r = {0};
    struct err e = {0};
    f.o.node = NULL;
    f.o.files_ok = false;
    f.o.pci_devices = -1;
    assert_int_equal(nst_observe(&st, "gpu-1", 60000, &f.o, &r, &e), 0);
    assert_false(r.count_ok);
    assert_null(r.annotation);
    _cleanup_free_ char *p = render(&r, PROM_FORMAT_TEXT);
    assert_true(has_line(p, "gpu_operator_node_device_plugin_devices_total{node=\"gpu-1\"} -1"));
    assert_true(has_line(p, "gpu_operator_nvidia_pci_devices_total{node=\"gpu-1\"} -1"));
    assert_true(has_line(p, "gpu_operator_node_driver_ready{node=\"gpu-1\"} 0"));
    assert_true(has_line(p, "gpuop_node_status_errors_total{node=\"gpu-1\",kind=\"node\"} 1"));
    assert_true(has_line(p, "gpuop_node_status_errors_total{node=\"gpu-1\",kind=\"files\"} 1"));
    assert_true(has_line(
        p, "gpuop_node_validation_state{node=\"gpu-1\",component=\"plugin\",state=\"unknown\"} 1"));
    assert_true(has_line(
        p, "gpuop_node_driver_info{node=\"gpu-1\",owner=\"unknown\",version=\"550.127.05\"} 1"));
    assert_null(strstr(p, "gpuop_node_gpu_advertised_mismatch"));

    f.o.node = f.node;
    f.o.nvml_ok = false;
    f.o.n_gpus = 0;
    f.o.driver_version = NULL;
    assert_int_equal(nst_observe(&st, "gpu-1", 60000, &f.o, &r, &e), 0);
    assert_false(r.count_ok);
    _cleanup_free_ char *p2 = render(&r, PROM_FORMAT_TEXT);
    assert_true(has_line(p2, "gpu_operator_node_driver_validation{node=\"gpu-1\"} 0"));
    assert_true(has_line(p2, "gpu_operator_node_device_plugin_devices_total{node=\"gpu-1\"} 2"));
    assert_true(has_line(p2, "gpuop_node_status_errors_total{node=\"gpu-1\",kind=\"nvml\"} 1"));
    assert_true(has_line(
        p2, "gpuop_node_driver_info{node=\"gpu-1\",owner=\"host\",version=\"550.127.05\"} 1"));
    assert_true(has_line(
        p2, "gpuop_node_validation_state{node=\"gpu-1\",component=\"plugin\",state=\"failed\"} 1"));

    /* An allocatable that does not read: the count is unknown (no series), counted, said why;
     * the exporter carries on. */
    f.o.nvml_ok = true;
    f.o.n_gpus = 2;
    json_object_set_new(kobj_path(f.node, "status.allocatable"), "nvidia.com/gpu",
                        json_string("two"));
    assert_int_equal(nst_observe(&st, "gpu-1", 60000, &f.o, &r, &e), 0);
    assert_false(r.count_ok);
    assert_null(r.annotation);
    assert_non_null(strstr(r.count_error, "not a quantity"));
    assert_int_equal(r.errors[NST_ERR_NODE], 2);
    _cleanup_free_ char *p3 = render(&r, PROM_FORMAT_TEXT);
    assert_null(strstr(p3, "gpuop_node_gpu_advertised_mismatch"));
    json_object_set_new(kobj_path(f.node, "status.allocatable"), "nvidia.com/gpu",
                        json_string("2"));

    /* An annotation that does not parse: unknown, counted. */
    set_annotation(f.node, "validation.gpuop.dev/cuda", "{not json");
    assert_int_equal(nst_observe(&st, "gpu-1", 60000, &f.o, &r, &e), 0);
    assert_int_equal(r.validation[NODESTATE_COMP_CUDA], NST_V_UNKNOWN);
    assert_int_equal(r.errors[NST_ERR_ANNOTATION], 1);
    nst_report_clear(&r);
    json_decref(f.node);
}

/* A page that does not fit is an error, not a truncated page. */
static void test_render_limit(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f, 2, false, T0);
    struct nst_state st = {.started_ms = T0};
    struct nst_report r = {0};
    struct err e = {0};
    assert_int_equal(nst_observe(&st, "gpu-1", 60000, &f.o, &r, &e), 0);
    struct sbuf b;
    sbuf_init(&b, 256);
    assert_int_equal(nst_render(&r, PROM_FORMAT_TEXT, &b), -ENOBUFS);
    sbuf_free(&b);
    nst_report_clear(&r);
    json_decref(f.node);
}

static void test_parse_time(void **state)
{
    (void)state;
    uint64_t t = 0;
    assert_int_equal(time_parse_rfc3339("2026-01-01T00:00:00Z", &t), 0);
    assert_int_equal(t, T0);
    assert_int_equal(time_parse_rfc3339("2026-01-01T00:00:01.25Z", &t), 0);
    assert_int_equal(t, T0 + 1250);
    assert_int_equal(time_parse_rfc3339("2026-01-01T00:00:00", &t), -EINVAL);
    assert_int_equal(time_parse_rfc3339("2026-01-01T00:00:00+02:00", &t), -EINVAL);
    assert_int_equal(time_parse_rfc3339("2026-01-01T00:00:00.Z", &t), -EINVAL);
    assert_int_equal(time_parse_rfc3339("yesterday", &t), -EINVAL);
    assert_int_equal(time_parse_rfc3339(NULL, &t), -EINVAL);
}

/* The options as typed: the error names the flag. */
static void test_config_check(void **state)
{
    (void)state;
    static const struct {
        const char *node, *strategy;
        int rc;
        enum nodestate_mig_strategy want;
        const char *msg;
    } cases[] = {
        {"gpu-1", NULL, 0, NODESTATE_MIG_NONE, NULL},
        {"gpu-1", "", 0, NODESTATE_MIG_NONE, NULL},
        {"gpu-1", "single", 0, NODESTATE_MIG_SINGLE, NULL},
        {"gpu-1", "mixed", 0, NODESTATE_MIG_MIXED, NULL},
        {NULL, "none", -EINVAL, 0, "no node name: give --node-name or NODE_NAME"},
        {"", "none", -EINVAL, 0, "no node name"},
        {"gpu-1", "Mixed", -EINVAL, 0, "--mig-strategy \"Mixed\": expected none, single or mixed"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct err e = {0};
        enum nodestate_mig_strategy st = NODESTATE_MIG_MIXED + 1;
        assert_int_equal(nst_config_check(cases[i].node, cases[i].strategy, &st, &e), cases[i].rc);
        if (cases[i].rc == 0)
            assert_int_equal(st, cases[i].want);
        else {
            assert_int_equal(st, NODESTATE_MIG_MIXED + 1); /* written only on success */
            assert_non_null(strstr(err_msg(&e), cases[i].msg));
        }
    }
}

/* The loop's schedule: the full observation wins, the health one on an event or its deadline. */
static void test_step_due(void **state)
{
    (void)state;
    static const struct {
        uint64_t now;
        bool health, woke;
        uint64_t next_obs, next_health;
        enum nst_step want;
        uint64_t wake;
    } cases[] = {
        {100, true, false, 200, 150, NST_STEP_WAIT, 150},
        {150, true, false, 200, 150, NST_STEP_HEALTH, 150},
        {120, true, true, 200, 150, NST_STEP_HEALTH, 150},
        {200, true, true, 200, 150, NST_STEP_OBSERVE, 150},
        {250, true, false, 200, 300, NST_STEP_OBSERVE, 200},
        {150, false, true, 200, 150, NST_STEP_WAIT, 200},  /* health off: events ignored */
        {160, false, false, 200, 150, NST_STEP_WAIT, 200}, /* health off: its deadline too */
        {100, true, false, DEADLINE_NEVER, DEADLINE_NEVER, NST_STEP_WAIT, DEADLINE_NEVER},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        assert_int_equal(nst_step_due(cases[i].now, cases[i].health, cases[i].woke,
                                      cases[i].next_obs, cases[i].next_health),
                         cases[i].want);
        assert_int_equal(nst_wake_at(cases[i].health, cases[i].next_obs, cases[i].next_health),
                         cases[i].wake);
    }
}

/* Both pages from one report; a limit too small fails naming it and hands out nothing. */
static void test_render_pages(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f, 2, false, T0);
    struct nst_state st = {.started_ms = T0};
    struct nst_report r = {0};
    struct err e = {0};
    assert_int_equal(nst_observe(&st, "gpu-1", 60000, &f.o, &r, &e), 0);
    char *text = NULL, *om = NULL;
    assert_int_equal(nst_render_pages(&r, 1u << 20, &text, &om, &e), 0);
    assert_non_null(strstr(text, "gpuop_node_status_observations_total{node=\"gpu-1\"} 1\n"));
    assert_null(strstr(text, "# EOF"));
    assert_non_null(strstr(om, "# EOF\n"));
    free(text);
    free(om);
    text = om = NULL;
    assert_int_equal(nst_render_pages(&r, 256, &text, &om, &e), -ENOBUFS);
    assert_null(text);
    assert_null(om);
    assert_string_equal(err_msg(&e), "rendering the metrics: more than 256 bytes");
    nst_report_clear(&r);
    json_decref(f.node);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_grace),
        cmocka_unit_test(test_restart_keeps_since),
        cmocka_unit_test(test_unknown_sources),
        cmocka_unit_test(test_render_limit),
        cmocka_unit_test(test_parse_time),
        cmocka_unit_test(test_config_check),
        cmocka_unit_test(test_step_due),
        cmocka_unit_test(test_render_pages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
