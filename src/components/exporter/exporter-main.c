/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop exporter`: the shell around the pure core: the options, then the collector thread
 * (collector.c: NVML every --collect-interval, the pod map on the same clock, fully rendered
 * snapshots), the XID events thread (xid-events.c) and the HTTP server, whose threads only hand
 * out the latest snapshot by reference, so a scrape makes no NVML or kubelet call.
 */
#include <malloc.h>
#include <string.h>
#include <unistd.h>

#include "exporter-internal.h"
#include "exporter.h"
#include "svc.h"

#define COMP "exporter"

/* ---- HTTP ------------------------------------------------------------------------------------ */

/* Serves the latest snapshot by reference (no copy, no NVML or kubelet call); only the scrape
 * counter (and OpenMetrics' # EOF) is written per request. */
static int handle_metrics(const struct http_request *req, struct http_response *resp, void *ud)
{
    struct exporter *x = ud;
    enum prom_format f = prom_negotiate(req->accept);
    uint64_t n = atomic_fetch_add(&x->scrapes, 1) + 1;

    struct exp_snapshot *s = exp_snapshot_get(x);
    if (!s) {
        http_response_static(resp, 503, HTTP_CT_TEXT, "no collection yet\n");
        return 0;
    }
    resp->status = 200;
    resp->content_type = prom_content_type(f);
    resp->body = f == PROM_FORMAT_OPENMETRICS ? s->om : s->text;
    resp->body_len = f == PROM_FORMAT_OPENMETRICS ? s->om_len : s->text_len;
    resp->release = exp_snapshot_unref;
    resp->release_cls = s;
    struct sbuf tb;
    sbuf_init(&tb, sizeof(resp->trailer));
    if (exp_render_tail(n, f, &tb) < 0) {
        sbuf_free(&tb);
        return -ENOBUFS; /* the server releases the snapshot reference */
    }
    memcpy(resp->trailer, tb.data, tb.len);
    resp->trailer_len = tb.len;
    sbuf_free(&tb);
    return 0;
}

static int handle_health(const struct http_request *req, struct http_response *resp, void *ud)
{
    (void)req;
    struct exp_snapshot *s = exp_snapshot_get(ud);
    exp_snapshot_unref(s);
    if (s)
        http_response_static(resp, 200, HTTP_CT_TEXT, "OK\n");
    else
        http_response_static(resp, 503, HTTP_CT_TEXT, "no collection yet\n");
    return 0;
}

/* ---- options --------------------------------------------------------------------------------- */

static const char *const formats[] = {"text", "openmetrics", NULL};

#define X(member) offsetof(struct exporter, member)
static const struct svc_option exporter_options[] = {
    {.flag = "listen",
     .short_flag = 'a',
     .env = "DCGM_EXPORTER_LISTEN",
     .kind = SVC_STRING,
     .off = X(listen),
     .metavar = "ADDR",
     .help = "listen address, host:port or :port (default \":9400\")"},
    {.flag = "collectors",
     .short_flag = 'f',
     .env = "DCGM_EXPORTER_COLLECTORS",
     .kind = SVC_STRING,
     .off = X(collectors),
     .metavar = "FILE",
     .help = "counters CSV in dcgm-exporter's format (\"field, type, help\");\n"
             "default: built-in copy of dcgm-exporter's default-counters.csv"},
    {.flag = "collect-interval",
     .short_flag = 'c',
     .kind = SVC_DURATION,
     .min = 1,
     .finite = true,
     .off = X(interval_ms),
     .metavar = "DUR",
     .help = "collection interval, e.g. 30s, 500ms (default 30s)\n"
             "[DCGM_EXPORTER_INTERVAL, in milliseconds]"},
    {.env = "DCGM_EXPORTER_INTERVAL",
     .kind = SVC_U64,
     .min = 1,
     .off = X(interval_ms),
     .expect = "expected milliseconds > 0",
     .help = "collection interval in milliseconds"},
    {.flag = "kubernetes",
     .short_flag = 'k',
     .env = "DCGM_EXPORTER_KUBERNETES",
     .kind = SVC_FLAG,
     .off = X(kubernetes),
     .help = "add pod, namespace, container from the kubelet"},
    {.flag = "pod-resources-socket",
     .env = "DCGM_POD_RESOURCES_KUBELET_SOCKET",
     .kind = SVC_STRING,
     .off = X(socket),
     .metavar = "P",
     .help = "kubelet PodResources socket\n(default /var/lib/kubelet/pod-resources/kubelet.sock)"},
    {.flag = "lowercase-hostname",
     .env = "GPUOP_EXPORTER_LOWERCASE_HOSTNAME",
     .kind = SVC_FLAG,
     .off = X(lower_hostname),
     .help = "name the host label `hostname` (newer dcgm-exporter)\ninstead of `Hostname`"},
    {.flag = "no-hostname",
     .short_flag = 'n',
     .kind = SVC_FLAG,
     .off = X(no_hostname),
     .help = "omit the host label"},
    {.flag = "xid-count-window-size",
     .env = "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE",
     .kind = SVC_U64,
     .min = 1,
     .expect = "expected milliseconds > 0",
     .off = X(xid_window_ms),
     .metavar = "MS",
     .help = "window of DCGM_EXP_XID_ERRORS_COUNT (default 300000)"},
    {.flag = "clock-events-count-window-size",
     .env = "DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE",
     .kind = SVC_U64,
     .min = 1,
     .expect = "expected milliseconds > 0",
     .off = X(clock_window_ms),
     .metavar = "MS",
     .help = "window of DCGM_EXP_CLOCK_EVENTS_COUNT (default 300000)"},
    {.flag = "once",
     .kind = SVC_FLAG,
     .off = X(once),
     .help = "collect once, print the metrics to stdout and exit\n"
             "(profiling fields: a first sample up to a second before)"},
    {.flag = "format",
     .kind = SVC_ENUM,
     .choices = formats,
     .off = X(once_format),
     .expect = "expected text or openmetrics",
     .metavar = "text|openmetrics",
     .help = "format for --once (default text)"},
    {.env = "NODE_NAME",
     .kind = SVC_STRING,
     .off = X(node_name),
     .help = "host label value (default: the host name)"},
    {.env = "NVIDIA_RESOURCE_NAMES",
     .kind = SVC_STRING,
     .off = X(resource_names),
     .help = "extra comma-separated kubelet resource names to\n"
             "attribute, besides nvidia.com/gpu and nvidia.com/mig-*"},
    {0},
};
#undef X

static void exporter_defaults(void *state)
{
    struct exporter *x = state;
    x->listen = ":9400";
    x->interval_ms = 30000;
    x->socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
    x->xid_window_ms = 300000;
    x->clock_window_ms = 300000;
    x->once_format = PROM_FORMAT_TEXT;
    pthread_mutex_init(&x->lock, NULL);
}

static void exporter_cleanup(void *state)
{
    struct exporter *x = state;
    free(x->hostname);
    exp_counters_free(x->counters);
    exp_collector_clear(x);
    gpu_lib_free(x->lib);
    pthread_mutex_destroy(&x->lock);
}

static int exporter_configure(struct svc *s, struct err *e)
{
    (void)e;
    struct exporter *x = svc_state(s);
    if (!x->no_hostname) {
        char hn[256] = "";
        if (!x->node_name && gethostname(hn, sizeof(hn) - 1) < 0)
            strlcpy_s(hn, "localhost", sizeof(hn));
        x->hostname = xstrdup(x->node_name ? x->node_name : hn);
    }
    return 0;
}

/* ---- run ------------------------------------------------------------------------------------- */

static int print_once(struct exporter *x, struct err *e)
{
    bool om = x->once_format == PROM_FORMAT_OPENMETRICS;
    struct sbuf tb _cleanup_sbuf_;
    sbuf_init(&tb, 512);
    if (exp_render_tail(0, (enum prom_format)x->once_format, &tb) < 0)
        return err_set(e, -ENOBUFS, "rendering the metrics' tail");
    fwrite(om ? x->snap->om : x->snap->text, 1, om ? x->snap->om_len : x->snap->text_len, stdout);
    fwrite(tb.data, 1, tb.len, stdout);
    return fflush(stdout) == 0 ? 0 : err_errno(e, -EIO, "write the metrics to stdout");
}

/* Serves until the stop token fires: the collector and events threads, the HTTP server. */
static int serve(struct exporter *x, struct err *e)
{
    struct http_route routes[] = {{"/metrics", handle_metrics, x}, {"/health", handle_health, x}};
    /* Scrapers send a few hundred bytes of headers; a small per-connection pool keeps memory
     * flat under many concurrent scrapers. */
    struct http_config hc = {
        .listen = x->listen, .routes = routes, .n_routes = 2, .request_limit = 8192};
    _cleanup_(http_server_freep) struct http_server *srv = NULL;
    int r = http_server_new(&hc, &srv, e);
    if (r < 0)
        return r;
    pthread_t events_tid, coll_tid;
    if (pthread_create(&events_tid, NULL, exp_xid_events_thread, x) != 0)
        return err_set(e, -EAGAIN, "cannot start the events thread");
    if (pthread_create(&coll_tid, NULL, exp_collector_thread, x) != 0) {
        stop_request(x->stop);
        pthread_join(events_tid, NULL);
        return err_set(e, -EAGAIN, "cannot start the collector thread");
    }
    /* Named, so that its CPU time can be read apart (/proc/PID/task/TID/comm; bench/exporter). */
    pthread_setname_np(coll_tid, "exp-collector");
    log_info(COMP, "serving", "listen=%s port=%u interval_ms=%llu gpus=%zu kubernetes=%s",
             x->listen, http_server_port(srv), (unsigned long long)x->interval_ms, x->n_gpus,
             x->kubernetes ? "true" : "false");
    stop_wait(x->stop, DEADLINE_NEVER);
    pthread_join(coll_tid, NULL);
    pthread_join(events_tid, NULL);
    return 0;
}

static int exporter_run(struct svc *s, struct err *e)
{
    struct exporter *x = svc_state(s);
    x->stop = svc_stop(s);
    int r = x->collectors ? exp_counters_load(x->collectors, &x->counters, e)
                          : exp_counters_default(&x->counters, e);
    if (r == EXP_UNKNOWN_FIELD)
        svc_error_tail(s, "; known fields: %s", exp_field_known_names());
    if (r < 0) /* a counters file missing, unreadable or malformed: bad input, as any config */
        return x->collectors ? svc_bad_input(s, r) : r;
    exp_counters_log_unsupported(x->counters);
    x->want_prof = exp_counters_want_prof(x->counters);
    /* Each collection renders two pages (hundreds of KiB with MIG) and frees the two before:
     * with glibc's moving threshold such buffers come to live in the collector's arena, which
     * keeps their pages after they are freed. A fixed threshold (glibc's starting value) keeps
     * them in their own mappings, returned when a snapshot goes (bench/exporter/gpm.sh). */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    if ((r = gpu_lib_open(NULL, &x->lib, e)) < 0)
        return r;
    /* The profiling fields are measured between two samples: --once takes the first a moment
     * before its collection (as long as the interval, at most a second). */
    if (x->once && exp_gpm_prime(x) > 0) {
        uint64_t wait = x->interval_ms < 1000 ? x->interval_ms : 1000;
        if (stop_wait_until(x->stop, now_ms_mono() +
                                         (wait > EXP_GPM_MIN_GAP_MS ? wait : EXP_GPM_MIN_GAP_MS)))
            return 0;
    }
    if ((r = exp_collect(x, e)) < 0)
        return r;
    return x->once ? print_once(x, e) : serve(x, e);
}

const struct svc_component exporter_component = {
    .name = COMP,
    .usage = "Usage: gpuop exporter [flags]\n"
             "Serves GPU metrics to Prometheus under dcgm-exporter's names, types and labels.\n"
             "A collector samples NVML every interval and refreshes the pod map on the same "
             "clock;\n"
             "each scrape serves the latest snapshot (no NVML or kubelet call on scrape).\n"
             "Routes: /metrics (Prometheus text; OpenMetrics when asked for), /health.\n",
    .flags_title = "Flags (environment variable in brackets; a flag wins over its variable):",
    .options = {exporter_options},
    .epilogue = "Other environment:\n"
                "  GPUOP_NVML_LIBRARY           libnvidia-ml.so.1 to load\n\n"
                "Signals: SIGTERM, SIGINT and SIGQUIT exit 0; SIGHUP is logged and ignored.\n",
    .state_size = sizeof(struct exporter),
    .defaults = exporter_defaults,
    .configure = exporter_configure,
    .run = exporter_run,
    .cleanup = exporter_cleanup,
};
