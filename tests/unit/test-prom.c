/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of src/base/prom: Prometheus text and OpenMetrics exposition into a bounded buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "prom.h"

static void test_prom_helpers(void **state)
{
    (void)state;
    assert_int_equal(prom_negotiate(NULL), PROM_FORMAT_TEXT);
    assert_int_equal(prom_negotiate(""), PROM_FORMAT_TEXT);
    assert_int_equal(prom_negotiate("text/plain;version=0.0.4"), PROM_FORMAT_TEXT);
    assert_int_equal(prom_negotiate("application/openmetrics-text;version=1.0.0"),
                     PROM_FORMAT_OPENMETRICS);
    /* What Prometheus 2.x sends. */
    assert_int_equal(
        prom_negotiate("application/openmetrics-text;version=1.0.0,application/"
                       "openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/"
                       "*;q=0.1"),
        PROM_FORMAT_OPENMETRICS);
    assert_int_equal(prom_negotiate("text/plain, application/openmetrics-text;q=0.5"),
                     PROM_FORMAT_TEXT);
    assert_int_equal(prom_negotiate("application/openmetrics-text;q=0"), PROM_FORMAT_TEXT);
    assert_int_equal(prom_negotiate("Application/OpenMetrics-Text"), PROM_FORMAT_OPENMETRICS);
    assert_string_equal(prom_content_type(PROM_FORMAT_OPENMETRICS),
                        "application/openmetrics-text; version=1.0.0; charset=utf-8");

    assert_true(prom_valid_metric_name("DCGM_FI_DEV_GPU_TEMP"));
    assert_true(prom_valid_metric_name("a:b_c9"));
    assert_false(prom_valid_metric_name("9a"));
    assert_false(prom_valid_metric_name(""));
    assert_false(prom_valid_metric_name("a-b"));
    assert_true(prom_valid_label_name("GPU_I_ID"));
    assert_false(prom_valid_label_name("a:b"));

    struct sbuf b;
    sbuf_init(&b, 4096);
    assert_int_equal(prom_escape_label_value(&b, "a\\b\"c\nd"), 0);
    assert_string_equal(b.data, "a\\\\b\\\"c\\nd");
    sbuf_reset(&b);
    assert_int_equal(
        prom_write_family(&b, PROM_FORMAT_TEXT, "x_total", PROM_COUNTER, "h \"q\" \\ \n"), 0);
    assert_string_equal(b.data, "# HELP x_total h \"q\" \\\\ \\n\n# TYPE x_total counter\n");
    sbuf_reset(&b);
    assert_int_equal(
        prom_write_family(&b, PROM_FORMAT_OPENMETRICS, "x_total", PROM_COUNTER, "h \"q\""), 0);
    assert_string_equal(b.data, "# HELP x h \\\"q\\\"\n# TYPE x counter\n");
    sbuf_reset(&b);
    assert_int_equal(prom_write_family(&b, PROM_FORMAT_OPENMETRICS, "DCGM_X", PROM_COUNTER, "h"),
                     0);
    assert_string_equal(b.data, "# HELP DCGM_X h\n# TYPE DCGM_X unknown\n");
    sbuf_reset(&b);
    assert_int_equal(prom_write_family(&b, PROM_FORMAT_TEXT, "g", PROM_UNTYPED, "h"), 0);
    assert_string_equal(b.data, "# HELP g h\n# TYPE g untyped\n");
    sbuf_reset(&b);
    assert_int_equal(prom_write_value(&b, 42), 0);
    assert_int_equal(sbuf_puts(&b, " "), 0);
    assert_int_equal(prom_write_value(&b, 123.456), 0);
    assert_int_equal(sbuf_puts(&b, " "), 0);
    assert_int_equal(prom_write_value(&b, 0.1), 0);
    assert_int_equal(sbuf_puts(&b, " "), 0);
    assert_int_equal(prom_write_value(&b, 1e300), 0);
    assert_int_equal(sbuf_puts(&b, " "), 0);
    assert_int_equal(prom_write_value(&b, 0.0 / 0.0), 0);
    assert_int_equal(sbuf_puts(&b, " "), 0);
    assert_int_equal(prom_write_value(&b, -1.0 / 0.0), 0);
    assert_int_equal(sbuf_puts(&b, " "), 0);
    assert_int_equal(prom_write_value(&b, 18446744073709551615.0), 0);
    assert_string_equal(b.data, "42 123.456 0.1 1e+300 NaN -Inf 1.8446744073709552e+19");
    sbuf_reset(&b);
    assert_int_equal(prom_write_eof(&b, PROM_FORMAT_TEXT), 0);
    assert_int_equal(b.len, 0);
    assert_int_equal(prom_write_eof(&b, PROM_FORMAT_OPENMETRICS), 0);
    assert_string_equal(b.data, "# EOF\n");
    sbuf_free(&b);
}

static void test_samples(void **state)
{
    (void)state;
    struct sbuf b;
    sbuf_init(&b, 4096);
    assert_int_equal(prom_write_sample(&b, "up", NULL, 0, 1), 0);
    struct prom_label l[] = {{"gpu", "0"}, {"pod", "a\"b\\c\nd"}, {"ns", NULL}};
    assert_int_equal(prom_write_sample(&b, "temp", l, 3, 41.5), 0);
    assert_int_equal(prom_write_sample_u64(&b, "big_total", l, 1, UINT64_MAX), 0);
    assert_string_equal(b.data, "up 1\n"
                                "temp{gpu=\"0\",pod=\"a\\\"b\\\\c\\nd\",ns=\"\"} 41.5\n"
                                "big_total{gpu=\"0\"} 18446744073709551615\n");
    sbuf_free(&b);
}

static void test_histogram(void **state)
{
    (void)state;
    struct sbuf b;
    sbuf_init(&b, 4096);
    double bounds[] = {0.005, 0.1, 1};
    uint64_t cum[] = {1, 3, 3};
    struct prom_label l[] = {{"path", "/metrics"}};
    assert_int_equal(
        prom_write_family(&b, PROM_FORMAT_OPENMETRICS, "lat_seconds", PROM_HISTOGRAM, "Latency"),
        0);
    assert_int_equal(prom_write_histogram(&b, "lat_seconds", l, 1, bounds, cum, 3, 2.25, 4), 0);
    assert_string_equal(b.data, "# HELP lat_seconds Latency\n"
                                "# TYPE lat_seconds histogram\n"
                                "lat_seconds_bucket{path=\"/metrics\",le=\"0.005\"} 1\n"
                                "lat_seconds_bucket{path=\"/metrics\",le=\"0.1\"} 3\n"
                                "lat_seconds_bucket{path=\"/metrics\",le=\"1\"} 3\n"
                                "lat_seconds_bucket{path=\"/metrics\",le=\"+Inf\"} 4\n"
                                "lat_seconds_sum{path=\"/metrics\"} 2.25\n"
                                "lat_seconds_count{path=\"/metrics\"} 4\n");
    sbuf_reset(&b);
    assert_int_equal(prom_write_histogram(&b, "h", NULL, 0, NULL, NULL, 0, 0, 0), 0);
    assert_string_equal(b.data, "h_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n");
    sbuf_reset(&b);
    double bad_bounds[] = {1, 1};
    uint64_t ok[] = {0, 0};
    assert_int_equal(prom_write_histogram(&b, "h", NULL, 0, bad_bounds, ok, 2, 0, 0), -EINVAL);
    uint64_t decreasing[] = {2, 1};
    assert_int_equal(prom_write_histogram(&b, "h", NULL, 0, bounds, decreasing, 2, 0, 2), -EINVAL);
    assert_int_equal(prom_write_histogram(&b, "h", NULL, 0, bounds, cum, 2, 0, 1), -EINVAL);
    assert_int_equal(b.len, 0);
    sbuf_free(&b);
}

/* A buffer too small is an error, never a silently truncated page; no half line is left. */
static void test_truncation_is_an_error(void **state)
{
    (void)state;
    struct sbuf b;
    sbuf_init(&b, 20);
    assert_int_equal(prom_write_sample(&b, "a", NULL, 0, 1), 0);
    struct prom_label l[] = {{"long_label", "long value"}};
    assert_int_equal(prom_write_sample(&b, "abcdef", l, 1, 1), -ENOBUFS);
    assert_string_equal(b.data, "a 1\n");
    sbuf_free(&b);

    /* The sticky writer: once full, later calls do nothing and finish reports the failure. */
    sbuf_init(&b, 64);
    struct prom_writer w;
    prom_writer_init(&w, &b, PROM_FORMAT_OPENMETRICS);
    prom_metric_u64(&w, "x_total", PROM_COUNTER, "Things", 3);
    prom_metric(&w, "y", PROM_GAUGE, "A gauge with a help text too long to fit", 1);
    size_t len = b.len;
    prom_metric(&w, "z", PROM_GAUGE, "z", 1);
    assert_int_equal(b.len, len);
    assert_int_equal(prom_writer_finish(&w), -ENOBUFS);
    /* the writer's error is the buffer's, worded with the thing and the limit */
    struct err e = {0};
    assert_int_equal(sbuf_check_err(&b, &e, "metrics page"), -ENOBUFS);
    assert_string_equal(err_msg(&e), "metrics page: larger than the limit of 64 bytes");
    sbuf_free(&b);

    /* a bad histogram sticks as well: the rest of the page is not written */
    sbuf_init(&b, 4096);
    prom_writer_init(&w, &b, PROM_FORMAT_TEXT);
    double bounds[] = {2, 1};
    uint64_t cum[] = {0, 1};
    prom_histogram(&w, "h", NULL, 0, bounds, cum, 2, 0, 1);
    prom_metric(&w, "z", PROM_GAUGE, "z", 1);
    assert_int_equal(b.len, 0);
    assert_int_equal(prom_writer_finish(&w), -EINVAL);
    assert_int_equal(sbuf_check(&b), -EINVAL);
    sbuf_free(&b);
}

/* What the operator's /metrics writes today, through the writer (text and OpenMetrics). */
static void test_writer_page(void **state)
{
    (void)state;
    struct sbuf b;
    sbuf_init(&b, 4096);
    struct prom_writer w;
    prom_writer_init(&w, &b, PROM_FORMAT_OPENMETRICS);
    prom_metric_u64(&w, "gpu_operator_reconciliation_total", PROM_COUNTER, "Reconciliations run",
                    7);
    prom_metric(&w, "gpu_operator_reconciliation_status", PROM_GAUGE, "1 ready", -1);
    prom_family(&w, "kubesim_objects", PROM_GAUGE, "Objects stored, by resource.");
    struct prom_label l[] = {{"resource", "pods"}};
    prom_sample_u64(&w, "kubesim_objects", l, 1, 12);
    assert_int_equal(prom_writer_finish(&w), 0);
    assert_string_equal(b.data, "# HELP gpu_operator_reconciliation Reconciliations run\n"
                                "# TYPE gpu_operator_reconciliation counter\n"
                                "gpu_operator_reconciliation_total 7\n"
                                "# HELP gpu_operator_reconciliation_status 1 ready\n"
                                "# TYPE gpu_operator_reconciliation_status gauge\n"
                                "gpu_operator_reconciliation_status -1\n"
                                "# HELP kubesim_objects Objects stored, by resource.\n"
                                "# TYPE kubesim_objects gauge\n"
                                "kubesim_objects{resource=\"pods\"} 12\n"
                                "# EOF\n");
    sbuf_reset(&b);
    prom_writer_init(&w, &b, PROM_FORMAT_TEXT);
    prom_metric(&w, "g", PROM_GAUGE, "h", 0.5);
    assert_int_equal(prom_writer_finish(&w), 0);
    assert_string_equal(b.data, "# HELP g h\n# TYPE g gauge\ng 0.5\n");
    sbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prom_helpers), cmocka_unit_test(test_samples),
        cmocka_unit_test(test_histogram),    cmocka_unit_test(test_truncation_is_an_error),
        cmocka_unit_test(test_writer_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
