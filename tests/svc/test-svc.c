/* SPDX-License-Identifier: Apache-2.0 */
/* svc: option tables (precedence, errors, --help), the work queue on an injected clock, and the
 * signal contract of svc_main in a child process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>

#include "svc-internal.h"
#include "svc.h"

/* ---- options ------------------------------------------------------------------------------ */

struct opts {
    const char *listen;
    uint64_t interval_ms;
    uint64_t window_ms;
    bool once;
    bool verbose;
    int format;
    unsigned count;
    /* layer */
    char calls[512];
};

static const char *const formats[] = {"text", "openmetrics", NULL};

static int check_even(const void *dst, const char *source, struct err *e)
{
    if (*(const unsigned *)dst % 2)
        return err_set(e, -EINVAL, "%s: must be even", source);
    return 0;
}

static const struct svc_option test_options[] = {
    {.flag = "listen",
     .short_flag = 'a',
     .env = "T_LISTEN",
     .kind = SVC_STRING,
     .off = offsetof(struct opts, listen),
     .metavar = "ADDR",
     .help = "listen address"},
    {.flag = "interval",
     .short_flag = 'c',
     .kind = SVC_DURATION,
     .min = 1,
     .finite = true,
     .off = offsetof(struct opts, interval_ms),
     .help = "collection interval"},
    {.env = "T_INTERVAL",
     .kind = SVC_U64,
     .min = 1,
     .expect = "expected milliseconds > 0",
     .off = offsetof(struct opts, interval_ms),
     .help = "the interval in milliseconds"},
    {.flag = "window",
     .env = "T_WINDOW",
     .kind = SVC_U64,
     .min = 1,
     .expect = "expected milliseconds > 0",
     .off = offsetof(struct opts, window_ms),
     .help = "a window\nover two lines"},
    {.flag = "once", .kind = SVC_FLAG, .off = offsetof(struct opts, once), .help = "once"},
    {.flag = "verbose",
     .env = "T_VERBOSE",
     .kind = SVC_BOOL,
     .off = offsetof(struct opts, verbose),
     .help = "more"},
    {.flag = "format",
     .kind = SVC_ENUM,
     .choices = formats,
     .off = offsetof(struct opts, format),
     .help = "output format"},
    {.flag = "count",
     .env = "T_COUNT",
     .kind = SVC_UINT,
     .check = check_even,
     .off = offsetof(struct opts, count),
     .help = "an even count"},
    {0},
};

static void test_defaults(void *state)
{
    struct opts *o = state;
    o->listen = ":9400";
    o->interval_ms = 30000;
    o->window_ms = 300000;
}

static const struct svc_component test_component = {
    .name = "test",
    .usage = "Usage: gpuop test [flags]\n",
    .options = {test_options},
    .epilogue = "Signals: none.\n",
    .state_size = sizeof(struct opts),
    .defaults = test_defaults,
};

static void clear_env(void)
{
    unsetenv("T_LISTEN");
    unsetenv("T_INTERVAL");
    unsetenv("T_WINDOW");
    unsetenv("T_VERBOSE");
    unsetenv("T_COUNT");
    unsetenv("T_CONFIG");
    unsetenv("T_MODE");
}

/* Parses a NULL-terminated argument list (argv[0] included). */
static int parse(const struct svc_component *c, struct opts *o, struct err *e, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, e);
    for (char *a = va_arg(ap, char *); a && argc < 31; a = va_arg(ap, char *))
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    memset(o, 0, sizeof(*o));
    err_clear(e);
    FILE *devnull = fopen("/dev/null", "w");
    int r = svc_parse(c, o, argc, argv, devnull, e);
    fclose(devnull);
    return r;
}

/* A repeatable flag: every occurrence in order, env not read, a bounded count. */
struct list_opts {
    struct svc_strings loads;
    const char *name;
};

static const struct svc_option list_options[] = {
    {.flag = "load",
     .env = "T_LOAD",
     .kind = SVC_STRINGS,
     .max = 3,
     .off = offsetof(struct list_opts, loads),
     .metavar = "FILE",
     .help = "repeatable"},
    {.flag = "name", .kind = SVC_STRING, .off = offsetof(struct list_opts, name), .help = "a name"},
    {0},
};

static const struct svc_component list_component = {
    .name = "list",
    .options = {list_options},
    .state_size = sizeof(struct list_opts),
};

static int parse_list(struct list_opts *o, struct err *e, int argc, char **argv)
{
    memset(o, 0, sizeof(*o));
    err_clear(e);
    FILE *devnull = fopen("/dev/null", "w");
    int r = svc_parse(&list_component, o, argc, argv, devnull, e);
    fclose(devnull);
    return r;
}

static void test_repeatable(void **state)
{
    (void)state;
    struct list_opts o;
    struct err e = {0};
    setenv("T_LOAD", "from-env", 1);
    assert_int_equal(parse_list(&o, &e, 1, (char *[]){"list", NULL}), 0);
    assert_int_equal(o.loads.n, 0);
    assert_int_equal(
        parse_list(&o, &e, 5, (char *[]){"list", "--load", "a", "--name=x", "--load=b", NULL}), 0);
    assert_int_equal(o.loads.n, 2);
    assert_string_equal(o.loads.v[0], "a");
    assert_string_equal(o.loads.v[1], "b");
    assert_string_equal(o.name, "x");
    assert_int_equal(
        parse_list(&o, &e, 5,
                   (char *[]){"list", "--load=a", "--load=b", "--load=c", "--load=d", NULL}),
        -E2BIG);
    assert_string_equal(err_msg(&e), "--load \"d\": at most 3 of them");
    assert_int_equal(parse_list(&o, &e, 2, (char *[]){"list", "--load", NULL}), -EINVAL);
    unsetenv("T_LOAD");
}

static void test_precedence(void **state)
{
    (void)state;
    clear_env();
    struct opts o;
    struct err e = {0};
    assert_int_equal(parse(&test_component, &o, &e, "test", NULL), 0);
    assert_string_equal(o.listen, ":9400");
    assert_int_equal(o.interval_ms, 30000);
    assert_false(o.once);

    setenv("T_LISTEN", ":1", 1);
    setenv("T_INTERVAL", "1500", 1);
    setenv("T_VERBOSE", "yes", 1);
    assert_int_equal(parse(&test_component, &o, &e, "test", NULL), 0);
    assert_string_equal(o.listen, ":1");
    assert_int_equal(o.interval_ms, 1500);
    assert_true(o.verbose);

    /* flag > env, whatever the order of the table */
    assert_int_equal(parse(&test_component, &o, &e, "test", "-a", ":2", "--interval=2s",
                           "--verbose=false", "--once", "--format", "openmetrics", "--count=4",
                           NULL),
                     0);
    assert_string_equal(o.listen, ":2");
    assert_int_equal(o.interval_ms, 2000);
    assert_false(o.verbose);
    assert_true(o.once);
    assert_int_equal(o.format, 1);
    assert_int_equal(o.count, 4);
    /* attached short value, last occurrence wins */
    assert_int_equal(parse(&test_component, &o, &e, "test", "-c500ms", "-c", "750ms", NULL), 0);
    assert_int_equal(o.interval_ms, 750);
    /* short flags without a value share a dash */
    static const struct svc_option shorts[] = {
        {.flag = "once", .short_flag = 'o', .kind = SVC_FLAG, .off = offsetof(struct opts, once)},
        {.flag = "verbose",
         .short_flag = 'v',
         .kind = SVC_FLAG,
         .off = offsetof(struct opts, verbose)},
        {.flag = "listen",
         .short_flag = 'a',
         .kind = SVC_STRING,
         .off = offsetof(struct opts, listen)},
        {0},
    };
    const struct svc_component sc = {.name = "s", .options = {shorts}};
    assert_int_equal(parse(&sc, &o, &e, "s", "-ova:7", NULL), 0);
    assert_true(o.once && o.verbose);
    assert_string_equal(o.listen, ":7");
    assert_int_equal(parse(&sc, &o, &e, "s", "-ox", NULL), -EINVAL);
    assert_string_equal(err_msg(&e), "unknown flag \"-x\" (see --help)");
    /* arguments besides flags, up to max_args */
    const struct svc_component with_args = {.name = "s", .options = {shorts}, .max_args = 2};
    assert_int_equal(parse(&with_args, &o, &e, "s", "inject", "-o", "xid", NULL), 0);
    assert_int_equal(parse(&with_args, &o, &e, "s", "a", "b", "c", NULL), -EINVAL);
    assert_string_equal(err_msg(&e), "unexpected argument \"c\" (see --help)");
    /* bool alone means true */
    assert_int_equal(parse(&test_component, &o, &e, "test", "--verbose", NULL), 0);
    assert_true(o.verbose);
    clear_env();
}

static void test_errors_table(void **state)
{
    (void)state;
    clear_env();
    static const struct {
        const char *args[4];
        const char *env, *env_value;
        const char *want;
    } cases[] = {
        {{"--interval", "soon"},
         NULL,
         NULL,
         "--interval \"soon\": expected a duration such as 30s or 500ms"},
        {{"--interval", "0"}, NULL, NULL, "--interval \"0\": expected a duration"},
        {{"--interval", "infinite"}, NULL, NULL, "--interval \"infinite\": expected a duration"},
        {{"--window", "5m"}, NULL, NULL, "--window \"5m\": expected milliseconds > 0"},
        {{NULL}, "T_INTERVAL", "1s", "T_INTERVAL=\"1s\": expected milliseconds > 0"},
        {{NULL}, "T_VERBOSE", "maybe", "T_VERBOSE=\"maybe\": not a boolean"},
        {{"--format", "xml"}, NULL, NULL, "--format \"xml\": expected one of text|openmetrics"},
        {{"--count", "3"}, NULL, NULL, "--count \"3\": must be even"},
        {{"--count", "-1"}, NULL, NULL, "--count \"-1\": expected an integer >= 0"},
        {{"--no-such"}, NULL, NULL, "unknown flag \"--no-such\" (see --help)"},
        {{"--no-such=1"}, NULL, NULL, "unknown flag \"--no-such\" (see --help)"},
        {{"-z"}, NULL, NULL, "unknown flag \"-z\" (see --help)"},
        {{"--listen"}, NULL, NULL, "flag --listen needs a value"},
        {{"stray"}, NULL, NULL, "unexpected argument \"stray\" (see --help)"},
        {{"--once", "extra"}, NULL, NULL, "unexpected argument \"extra\" (see --help)"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        clear_env();
        if (cases[i].env)
            setenv(cases[i].env, cases[i].env_value, 1);
        struct opts o;
        struct err e = {0};
        const char *const *a = cases[i].args;
        int r = parse(&test_component, &o, &e, "test", a[0], a[0] ? a[1] : NULL,
                      a[0] && a[1] ? a[2] : NULL, NULL);
        if (r != -EINVAL || strstr(err_msg(&e), cases[i].want) == NULL)
            fail_msg("case %zu: r=%d msg=\"%s\", want \"%s\"", i, r, err_msg(&e), cases[i].want);
    }
    clear_env();
}

static void test_help(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct opts o;
    struct err e = {0};
    assert_int_equal(svc_parse(&test_component, &o, 2, (char *[]){"test", "--help", NULL}, f, &e),
                     1);
    fclose(f);
    static const char *const want[] = {
        "Usage: gpuop test [flags]\n",
        "  -a, --listen ADDR            listen address [T_LISTEN]\n",
        "  -c, --interval DUR           collection interval\n",
        "      --window N               a window\n                               over two lines "
        "[T_WINDOW]\n",
        "      --once                   once\n",
        "      --verbose[=BOOL]         more [T_VERBOSE]\n",
        "  -h, --help                   this text\n",
        "\nEnvironment:\n  T_INTERVAL                   the interval in milliseconds\n",
        "\nSignals: none.\n",
    };
    for (size_t i = 0; i < ARRAY_SIZE(want); i++)
        if (!strstr(buf, want[i]))
            fail_msg("--help lacks \"%s\":\n%s", want[i], buf);
    free(buf);
}

/* ---- shared fragments --------------------------------------------------------------------- */

/* A component's own fragment over a struct its states embed, holding a fragment itself. */
struct sub {
    const char *a;
    unsigned n;
};

static const struct svc_option inner_fragment[] = {
    {.flag = "sub-n", .kind = SVC_UINT, .off = offsetof(struct sub, n), .help = "an n"},
    {0},
};

static const struct svc_option sub_fragment[] = {
    {.flag = "sub-a",
     .env = "T_SUB_A",
     .kind = SVC_STRING,
     .off = offsetof(struct sub, a),
     .help = "an a"},
    {.kind = SVC_FRAGMENT, .fragment = inner_fragment},
    {0},
};

struct frag_opts {
    const char *name;
    struct sub first;
    const char *kubeconfig;
    const char *context;
    struct sub second;
    const char *node;
};

static const struct svc_option frag_options[] = {
    {.flag = "name", .kind = SVC_STRING, .off = offsetof(struct frag_opts, name), .help = "a name"},
    {.kind = SVC_FRAGMENT,
     .fragment = svc_kubeconfig_option,
     .off = offsetof(struct frag_opts, kubeconfig)},
    {.kind = SVC_FRAGMENT, .fragment = sub_fragment, .off = offsetof(struct frag_opts, second)},
    {.kind = SVC_FRAGMENT,
     .fragment = svc_node_name_option,
     .off = offsetof(struct frag_opts, node),
     .help = "the node this test runs for"},
    {.kind = SVC_FRAGMENT,
     .fragment = svc_context_option,
     .off = offsetof(struct frag_opts, context)},
    {0},
};

static const struct svc_component frag_component = {
    .name = "frag",
    .usage = "Usage: gpuop frag [flags]\n",
    .options = {frag_options},
    .state_size = sizeof(struct frag_opts),
};

static int parse_frag(struct frag_opts *o, struct err *e, int argc, char **argv, FILE *out)
{
    memset(o, 0, sizeof(*o));
    err_clear(e);
    return svc_parse(&frag_component, o, argc, argv, out, e);
}

static void test_fragments(void **state)
{
    (void)state;
    unsetenv("KUBECONFIG");
    unsetenv("NODE_NAME");
    unsetenv("T_SUB_A");
    struct frag_opts o;
    struct err e = {0};
    FILE *devnull = fopen("/dev/null", "w");
    /* every option lands in its member, a nested fragment's in the embedded struct */
    char *argv[] = {"frag", "--kubeconfig", "/k", "--sub-a", "x", "--sub-n", "3", "--context",
                    "c1",   "--node-name",  "n1", "--name",  "y", NULL};
    assert_int_equal(parse_frag(&o, &e, 13, argv, devnull), 0);
    assert_string_equal(o.kubeconfig, "/k");
    assert_string_equal(o.context, "c1");
    assert_string_equal(o.node, "n1");
    assert_string_equal(o.name, "y");
    assert_string_equal(o.second.a, "x");
    assert_int_equal(o.second.n, 3);
    assert_null(o.first.a); /* the fragment was placed at `second` only */
    assert_int_equal(o.first.n, 0);
    /* the fragments' environment variables */
    setenv("KUBECONFIG", "/from-env", 1);
    setenv("NODE_NAME", "n2", 1);
    setenv("T_SUB_A", "z", 1);
    assert_int_equal(parse_frag(&o, &e, 1, (char *[]){"frag", NULL}, devnull), 0);
    assert_string_equal(o.kubeconfig, "/from-env");
    assert_string_equal(o.node, "n2");
    assert_string_equal(o.second.a, "z");
    assert_int_equal(parse_frag(&o, &e, 3, (char *[]){"frag", "--sub-n", "-1", NULL}, devnull),
                     -EINVAL);
    assert_string_equal(err_msg(&e), "--sub-n \"-1\": expected an integer >= 0");
    unsetenv("KUBECONFIG");
    unsetenv("NODE_NAME");
    unsetenv("T_SUB_A");
    fclose(devnull);

    /* --help: each fragment where the table lists it; a help of its own replaces the shared */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(parse_frag(&o, &e, 2, (char *[]){"frag", "--help", NULL}, f), 1);
    fclose(f);
    const char *want = "      --name VALUE             a name\n"
                       "      --kubeconfig PATH        kubeconfig (default: in-cluster, else "
                       "~/.kube/config)\n"
                       "                               [KUBECONFIG]\n"
                       "      --sub-a VALUE            an a [T_SUB_A]\n"
                       "      --sub-n N                an n\n"
                       "      --node-name NAME         the node this test runs for [NODE_NAME]\n"
                       "      --context NAME           kubeconfig context (default: the current "
                       "one)\n"
                       "  -h, --help                   this text\n";
    if (!strstr(buf, want))
        fail_msg("--help:\n%s\nwant:\n%s", buf, want);
    free(buf);
}

/* ---- config-file layer -------------------------------------------------------------------- */

static int layer_load(void *state, const char *path, struct err *e)
{
    struct opts *o = state;
    if (path && strcmp(path, "bad") == 0)
        return err_set(e, -EINVAL, "%s: bad file", path);
    o->calls[0] = 0;
    snprintf(o->calls, sizeof(o->calls), "load(%s)", path ? path : "-");
    return 0;
}

static int layer_set(void *state, const char *field, const char *value, const char *source,
                     struct err *e)
{
    struct opts *o = state;
    if (strcmp(value, "bogus") == 0)
        return err_set(e, -EINVAL, "%s: unknown mode \"%s\"", source, value);
    size_t n = strlen(o->calls);
    snprintf(o->calls + n, sizeof(o->calls) - n, " %s=%s<%s", field, value, source);
    return 0;
}

static int layer_finish(void *state, struct err *e)
{
    (void)e;
    struct opts *o = state;
    size_t n = strlen(o->calls);
    snprintf(o->calls + n, sizeof(o->calls) - n, " finish");
    return 0;
}

static const struct svc_layer test_layer = {layer_load, layer_set, layer_finish};

static const struct svc_option layer_options[] = {
    {.field = "flags.mode", .flag = "mode", .env = "T_MODE_FALLBACK", .kind = SVC_STRING},
    {.field = "flags.mode", .flag = "mode", .env = "T_MODE", .kind = SVC_STRING, .help = "mode"},
    {.field = "flags.on", .flag = "on", .kind = SVC_BOOL, .help = "on"},
    {.field = "configFile",
     .flag = "config-file",
     .env = "T_CONFIG",
     .kind = SVC_CONFIG_FILE,
     .help = "config file"},
    {0},
};

static const struct svc_component layer_component = {
    .name = "layered",
    .options = {layer_options, test_options},
    .state_size = sizeof(struct opts),
    .layer = &test_layer,
};

static void test_layer_precedence(void **state)
{
    (void)state;
    clear_env();
    struct opts o;
    struct err e = {0};
    assert_int_equal(parse(&layer_component, &o, &e, "x", NULL), 0);
    assert_string_equal(o.calls, "load(-) finish");
    setenv("T_MODE_FALLBACK", "a", 1);
    setenv("T_MODE", "b", 1);
    setenv("T_CONFIG", "env.yaml", 1);
    assert_int_equal(parse(&layer_component, &o, &e, "x", "--on", NULL), 0);
    /* file, then env in table order (the later variable wins), then flags */
    assert_string_equal(o.calls, "load(env.yaml) flags.mode=a<T_MODE_FALLBACK "
                                 "flags.mode=b<T_MODE flags.on=true<--on finish");
    assert_int_equal(parse(&layer_component, &o, &e, "x", "--config-file", "cli.yaml", "--mode=c",
                           "-a", ":5", NULL),
                     0);
    assert_string_equal(o.calls, "load(cli.yaml) flags.mode=a<T_MODE_FALLBACK "
                                 "flags.mode=b<T_MODE flags.mode=c<--mode finish");
    assert_string_equal(o.listen, ":5"); /* the plain table beside the layer's */
    assert_int_equal(parse(&layer_component, &o, &e, "x", "--config-file=bad", NULL), -EINVAL);
    assert_string_equal(err_msg(&e), "bad: bad file");
    assert_int_equal(parse(&layer_component, &o, &e, "x", "--mode", "bogus", NULL), -EINVAL);
    assert_string_equal(err_msg(&e), "--mode: unknown mode \"bogus\"");
    clear_env();
}

/* ---- work queue --------------------------------------------------------------------------- */

static uint64_t fake_now(void *ud)
{
    return *(uint64_t *)ud;
}

static char *get_key(struct svc_workqueue *q)
{
    char *k = NULL;
    uint64_t next = 0;
    if (svc_workqueue_try_get(q, &k, &next) < 0)
        return NULL;
    return k;
}

static void test_backoff_table(void **state)
{
    (void)state;
    static const struct {
        uint64_t base, max;
        unsigned failures;
        uint64_t want;
    } t[] = {
        {5, 1000, 0, 5},      {5, 1000, 1, 10}, {5, 1000, 3, 40}, {5, 1000, 8, 1000},
        {5, 1000, 200, 1000}, {0, 10, 0, 1},    {7, 7, 5, 7},     {1, UINT64_MAX, 70, UINT64_MAX},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++)
        if (svc_backoff_ms(t[i].base, t[i].max, t[i].failures) != t[i].want)
            fail_msg("case %zu: %llu", i,
                     (unsigned long long)svc_backoff_ms(t[i].base, t[i].max, t[i].failures));
}

static void test_workqueue_dedup_and_dirty(void **state)
{
    (void)state;
    uint64_t now = 1000;
    struct svc_workqueue_config cfg = {.now_ms = fake_now, .clock_ud = &now};
    struct err e = {0};
    _cleanup_(svc_workqueue_freep) struct svc_workqueue *q = NULL;
    assert_int_equal(svc_workqueue_new(&cfg, NULL, &q, &e), 0);
    svc_workqueue_add(q, "a");
    svc_workqueue_add(q, "b");
    svc_workqueue_add(q, "a"); /* dedup */
    assert_int_equal(svc_workqueue_len(q), 2);
    _cleanup_free_ char *k1 = get_key(q);
    assert_string_equal(k1, "a"); /* FIFO */
    svc_workqueue_add(q, "a");    /* held: queued again on done, not handed out twice */
    _cleanup_free_ char *k2 = get_key(q);
    assert_string_equal(k2, "b");
    assert_null(get_key(q));
    svc_workqueue_done(q, "a");
    _cleanup_free_ char *k3 = get_key(q);
    assert_string_equal(k3, "a");
    svc_workqueue_done(q, "a");
    svc_workqueue_done(q, "b");
    assert_int_equal(svc_workqueue_len(q), 0);
    assert_null(get_key(q));
}

static void test_workqueue_timed_and_backoff(void **state)
{
    (void)state;
    uint64_t now = 1000;
    struct svc_workqueue_config cfg = {
        .base_delay_ms = 10, .max_delay_ms = 50, .now_ms = fake_now, .clock_ud = &now};
    struct err e = {0};
    _cleanup_(svc_workqueue_freep) struct svc_workqueue *q = NULL;
    assert_int_equal(svc_workqueue_new(&cfg, NULL, &q, &e), 0);
    svc_workqueue_add_after(q, "later", 100);
    svc_workqueue_add_after(q, "later", 300); /* the earliest time wins */
    char *k = NULL;
    uint64_t next = 0;
    assert_int_equal(svc_workqueue_try_get(q, &k, &next), -EAGAIN);
    assert_int_equal(next, 100);
    now += 99;
    assert_null(get_key(q));
    now += 1;
    _cleanup_free_ char *k1 = get_key(q);
    assert_string_equal(k1, "later");
    svc_workqueue_done(q, "later");

    /* failures: 10, 20, 40, 50 (capped); forget resets */
    static const uint64_t delays[] = {10, 20, 40, 50, 50};
    for (size_t i = 0; i < ARRAY_SIZE(delays); i++) {
        svc_workqueue_add_rate_limited(q, "x");
        assert_int_equal(svc_workqueue_try_get(q, &k, &next), -EAGAIN);
        assert_int_equal(next, delays[i]);
        now += delays[i];
        _cleanup_free_ char *kx = get_key(q);
        assert_string_equal(kx, "x");
        svc_workqueue_done(q, "x");
    }
    assert_int_equal(svc_workqueue_failures(q, "x"), 5);
    svc_workqueue_forget(q, "x");
    assert_int_equal(svc_workqueue_failures(q, "x"), 0);
    svc_workqueue_add_rate_limited(q, "x");
    assert_int_equal(svc_workqueue_try_get(q, &k, &next), -EAGAIN);
    assert_int_equal(next, 10);
    /* an immediate add beats a pending delay */
    svc_workqueue_add(q, "x");
    _cleanup_free_ char *k2 = get_key(q);
    assert_string_equal(k2, "x");
    svc_workqueue_done(q, "x");
}

static void *stop_soon(void *arg)
{
    usleep(50 * 1000);
    stop_request(arg);
    return NULL;
}

static void test_workqueue_stop(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_(stop_token_freep) struct stop_token *stop = NULL;
    assert_int_equal(stop_token_new(&stop, &e), 0);
    _cleanup_(svc_workqueue_freep) struct svc_workqueue *q = NULL;
    assert_int_equal(svc_workqueue_new(NULL, stop, &q, &e), 0);
    char *k = NULL;
    assert_int_equal(svc_workqueue_get(q, 20, &k), -ETIMEDOUT);
    svc_workqueue_add_after(q, "k", 30); /* real clock */
    uint64_t t0 = now_ms_mono();
    assert_int_equal(svc_workqueue_get(q, 5000, &k), 0);
    assert_true(now_ms_mono() - t0 >= 29 && now_ms_mono() - t0 < 4000);
    assert_string_equal(k, "k");
    free(k);
    svc_workqueue_done(q, "k");
    pthread_t t;
    pthread_create(&t, NULL, stop_soon, stop);
    t0 = now_ms_mono();
    assert_int_equal(svc_workqueue_get(q, DEADLINE_NEVER, &k), -ECANCELED);
    assert_true(now_ms_mono() - t0 < 4000);
    pthread_join(t, NULL);
}

/* ---- svc_main: signals, reload, exit codes ------------------------------------------------- */

struct looper {
    unsigned reloads;
    bool fail;
};

static int looper_reload(struct svc *s, struct err *e)
{
    (void)e;
    struct looper *l = svc_state(s);
    l->reloads++;
    printf("reload %u\n", l->reloads);
    fflush(stdout);
    return 0;
}

static int looper_run(struct svc *s, struct err *e)
{
    struct looper *l = svc_state(s);
    if (l->fail)
        return err_set(e, -EIO, "device \"x\": broken");
    printf("ready\n");
    fflush(stdout);
    while (svc_wait(s, DEADLINE_NEVER) != SVC_STOP)
        ;
    printf("stopped reloads=%u\n", l->reloads);
    fflush(stdout);
    return 0;
}

static const struct svc_option looper_options[] = {
    {.flag = "fail", .kind = SVC_FLAG, .off = offsetof(struct looper, fail), .help = "fail"},
    {0},
};

static const struct svc_component looper = {
    .name = "looper",
    .options = {looper_options},
    .state_size = sizeof(struct looper),
    .run = looper_run,
    .reload = looper_reload,
};

static const struct svc_component looper_noreload = {
    .name = "looper",
    .options = {looper_options},
    .state_size = sizeof(struct looper),
    .run = looper_run,
};

/* Runs svc_main in a child with stdout (and stderr with merge_stderr) on a pipe; sends the
 * signals once it is ready. */
static int run_child_out(const struct svc_component *c, char **argv, const int *sigs, size_t n_sigs,
                         bool merge_stderr, char *out, size_t out_n)
{
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pfd[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(merge_stderr ? pfd[1] : devnull, 2);
        int argc = 0;
        while (argv[argc])
            argc++;
        int code = svc_main(c, argc, argv);
        fflush(NULL);
        _exit(code);
    }
    close(pfd[1]);
    size_t len = 0;
    bool started = false;
    uint64_t t0 = now_ms_mono();
    for (;;) {
        ssize_t r = read(pfd[0], out + len, out_n - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
        out[len] = 0;
        if (!started && strstr(out, "ready\n")) {
            started = true;
            for (size_t i = 0; i < n_sigs; i++) {
                kill(pid, sigs[i]);
                usleep(50 * 1000);
            }
        }
    }
    out[len] = 0;
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (now_ms_mono() - t0 > 5000)
        fail_msg("the child took %llu ms", (unsigned long long)(now_ms_mono() - t0));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int run_child(const struct svc_component *c, char **argv, const int *sigs, size_t n_sigs,
                     char *out, size_t out_n)
{
    return run_child_out(c, argv, sigs, n_sigs, false, out, out_n);
}

static void test_signals(void **state)
{
    (void)state;
    char out[1024];
    char *argv[] = {"looper", NULL};
    int hup_term[] = {SIGHUP, SIGHUP, SIGTERM};
    assert_int_equal(run_child(&looper, argv, hup_term, 3, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "reload 2\nstopped reloads=2\n"));
    int hup_int[] = {SIGHUP, SIGINT};
    assert_int_equal(run_child(&looper_noreload, argv, hup_int, 2, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "stopped reloads=0\n"));
    int quit[] = {SIGQUIT};
    assert_int_equal(run_child(&looper, argv, quit, 1, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "stopped"));
    /* exit codes in one place: runtime failure 1, bad usage 2, help 0 */
    char *fail_argv[] = {"looper", "--fail", NULL};
    assert_int_equal(run_child(&looper, fail_argv, NULL, 0, out, sizeof(out)), 1);
    char *bad_argv[] = {"looper", "--bogus", NULL};
    assert_int_equal(run_child(&looper, bad_argv, NULL, 0, out, sizeof(out)), 2);
    char *help_argv[] = {"looper", "--help", NULL};
    assert_int_equal(run_child(&looper, help_argv, NULL, 0, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "--fail"));
}

/* ---- verbs -------------------------------------------------------------------------------- */

struct verb_opts {
    const char *file;
    int from;
};

static const struct svc_option file_option[] = {
    {.flag = "file",
     .short_flag = 'f',
     .kind = SVC_STRING,
     .off = offsetof(struct verb_opts, file),
     .help = "a file (required)"},
    {0},
};

static int apply_configure(struct svc *s, struct err *e)
{
    struct verb_opts *v = svc_state(s);
    return v->file ? 0 : err_set(e, -EINVAL, "-f FILE is required");
}

static int apply_run(struct svc *s, struct err *e)
{
    struct verb_opts *v = svc_state(s);
    if (strcmp(v->file, "fail") == 0)
        return err_set(e, -EIO, "apply \"%s\": broken", v->file);
    if (strcmp(v->file, "bad") == 0)
        return svc_bad_input(s, err_set(e, -EINVAL, "apply \"%s\": bad", v->file));
    printf("apply %s by %s\n", v->file, svc_name(s));
    return 0;
}

static int say_run(struct svc *s, struct err *e)
{
    (void)e;
    (void)s;
    printf("said\n");
    return 0;
}

static const char *const migrate_from[] = {"nvidia", NULL};

static const struct svc_option migrate_options[] = {
    {.flag = "from",
     .kind = SVC_ENUM,
     .choices = migrate_from,
     .off = offsetof(struct verb_opts, from),
     .help = "whose install to take over"},
    {0},
};

static int migrate_run(struct svc *s, struct err *e)
{
    (void)e;
    struct verb_opts *v = svc_state(s);
    printf("migrate from %s\n", migrate_from[v->from]);
    return 0;
}

static const struct svc_component verb_apply = {
    .name = "apply",
    .summary = "Apply a file",
    .usage = "Usage: gpuop tool apply -f FILE\n",
    .options = {file_option},
    .state_size = sizeof(struct verb_opts),
    .configure = apply_configure,
    .run = apply_run,
};

static const struct svc_component verb_say = {.name = "say", .summary = "Say it", .run = say_run};

/* `gpuop migrate --from nvidia` as a verb: a component and one line in its parent's list. */
static const struct svc_component verb_migrate = {
    .name = "migrate",
    .summary = "Take over another operator's install",
    .options = {migrate_options},
    .state_size = sizeof(struct verb_opts),
    .run = migrate_run,
};

static const struct svc_component verb_cdi = {
    .name = "cdi", .summary = "CDI things", .verbs = {&verb_say, &verb_apply}};

static const struct svc_component verb_tool = {
    .name = "tool",
    .summary = "A tool of verbs",
    .verbs = {&verb_apply, &verb_say, &verb_cdi, &verb_migrate},
};

static const struct svc_component verb_daemon = {
    .name = "daemon",
    .usage = "Usage: gpuop daemon [flags]\n",
    .options = {file_option},
    .state_size = sizeof(struct verb_opts),
    .run = say_run,
    .verbs = {&verb_say},
};

static void test_verbs(void **state)
{
    (void)state;
    static const struct {
        const struct svc_component *c;
        char *argv[6];
        int want_code;
        const char *want; /* in stdout and stderr */
    } cases[] = {
        {&verb_tool, {"tool", "apply", "-f", "x"}, 0, "apply x by tool\n"},
        {&verb_tool, {"tool", "apply", "--file=x"}, 0, "apply x by tool\n"},
        {&verb_tool, {"tool", "cdi", "apply", "-f", "y"}, 0, "apply y by tool\n"},
        {&verb_tool, {"tool", "cdi", "say"}, 0, "said\n"},
        {&verb_tool, {"tool", "migrate", "--from", "nvidia"}, 0, "migrate from nvidia\n"},
        {&verb_tool,
         {"tool", "migrate", "--from", "other"},
         2,
         "error tool --from \"other\": expected one of nvidia\n"},
        /* a verb is required where the component has no run of its own */
        {&verb_tool,
         {"tool"},
         2,
         "error tool a command is required: apply, say, cdi, migrate (see gpuop tool --help)\n"},
        {&verb_tool,
         {"tool", "cdi"},
         2,
         "error tool a command is required: say, apply (see gpuop tool cdi --help)\n"},
        {&verb_tool,
         {"tool", "frob"},
         2,
         "error tool unknown command \"frob\" (apply, say, cdi, migrate)\n"},
        {&verb_tool,
         {"tool", "cdi", "frob"},
         2,
         "error tool unknown command \"cdi frob\" (cdi say, cdi apply)\n"},
        /* the verb comes first; its flags are its own */
        {&verb_tool,
         {"tool", "-f", "x", "apply"},
         2,
         "error tool the command \"apply\" comes first, before the flags\n"},
        {&verb_tool,
         {"tool", "say", "-f", "x"},
         2,
         "error tool unknown flag \"-f\" (see --help)\n"},
        {&verb_tool, {"tool", "say", "extra"}, 2, "unexpected argument \"extra\""},
        /* exit codes: configure's error and svc_bad_input are bad input, run's a failure */
        {&verb_tool, {"tool", "apply"}, 2, "error tool -f FILE is required\n"},
        {&verb_tool, {"tool", "apply", "-f", "bad"}, 2, "error tool apply \"bad\": bad\n"},
        {&verb_tool, {"tool", "apply", "-f", "fail"}, 1, "error tool apply \"fail\": broken\n"},
        /* a component with a run and verbs runs itself without one */
        {&verb_daemon, {"daemon", "-f", "x"}, 0, "said\n"},
        {&verb_daemon, {"daemon", "say"}, 0, "said\n"},
        {&verb_daemon, {"daemon", "apply"}, 2, "error daemon unknown command \"apply\" (say)\n"},
        /* generated help */
        {&verb_tool,
         {"tool", "--help"},
         0,
         "Usage: gpuop tool COMMAND [flags]\n\nA tool of verbs.\n\nCommands:\n"
         "  apply    Apply a file\n  say      Say it\n  cdi      CDI things\n"
         "  migrate  Take over another operator's install\n\n"
         "`gpuop tool COMMAND --help`: a command's own flags.\n\nFlags:\n"
         "  -h, --help                   this text\n"},
        {&verb_tool,
         {"tool", "cdi", "-h"},
         0,
         "Usage: gpuop tool cdi COMMAND [flags]\n\nCDI things.\n\nCommands:\n"
         "  say    Say it\n  apply  Apply a file\n\n`gpuop tool cdi COMMAND --help`"},
        {&verb_tool,
         {"tool", "migrate", "--help"},
         0,
         "Usage: gpuop tool migrate [flags]\n\nTake over another operator's install.\n\n"
         "Flags:\n      --from NAME              whose install to take over\n"},
        {&verb_tool, {"tool", "apply", "--help"}, 0, "Usage: gpuop tool apply -f FILE\n"},
        {&verb_daemon,
         {"daemon", "--help"},
         0,
         "Usage: gpuop daemon [flags]\n\nCommands:\n  say  Say it\n"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char out[4096];
        char **argv = (char **)cases[i].argv;
        int code = run_child_out(cases[i].c, argv, NULL, 0, true, out, sizeof(out));
        if (code != cases[i].want_code || !strstr(out, cases[i].want))
            fail_msg("case %zu (%s %s): exit %d, want %d; output:\n%s\nwant:\n%s", i, argv[0],
                     argv[1] ? argv[1] : "", code, cases[i].want_code, out, cases[i].want);
    }
}

static void test_verb_names(void **state)
{
    (void)state;
    char buf[32];
    svc_verb_names(&verb_tool, "", buf, sizeof(buf));
    assert_string_equal(buf, "apply, say, cdi, migrate");
    svc_verb_names(&verb_tool, "x ", buf, sizeof(buf));
    assert_string_equal(buf, "x apply, x say, x cdi, x mig...");
    char tiny[8];
    svc_verb_names(&verb_tool, "", tiny, sizeof(tiny));
    assert_string_equal(tiny, "appl...");
    assert_ptr_equal(svc_verb_find(&verb_tool, "cdi"), &verb_cdi);
    assert_null(svc_verb_find(&verb_tool, "cd"));
    assert_null(svc_verb_find(&test_component, "apply"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_repeatable),
        cmocka_unit_test(test_errors_table),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_fragments),
        cmocka_unit_test(test_layer_precedence),
        cmocka_unit_test(test_backoff_table),
        cmocka_unit_test(test_workqueue_dedup_and_dirty),
        cmocka_unit_test(test_workqueue_timed_and_backoff),
        cmocka_unit_test(test_workqueue_stop),
        cmocka_unit_test(test_signals),
        cmocka_unit_test(test_verbs),
        cmocka_unit_test(test_verb_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
