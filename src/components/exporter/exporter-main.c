/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop exporter`: the shell around the pure core. A collector thread samples NVML every
 * --collect-interval, refreshes the pod map on the same clock and swaps in fully rendered
 * snapshots (text and OpenMetrics); an events thread records XIDs; the HTTP threads only copy
 * the latest snapshot out, so a scrape makes no NVML or kubelet call.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "exporter-internal.h"
#include "exporter.h"
#include "svc.h"

#define COMP           "exporter"
#define SNAPSHOT_LIMIT (64u << 20)
#define XID_TABLE_MAX  64
#define PODRES_MIN_MS  250

/* A rendered collection, shared by reference between the collector and in-flight responses. */
struct snapshot {
    atomic_int refs;
    char *text;
    size_t text_len;
    char *om;
    size_t om_len;
};

static void snapshot_unref(void *p)
{
    struct snapshot *s = p;
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
        free(s->text);
        free(s->om);
        free(s);
    }
}

struct xid_entry {
    char uuid[GPU_UUID_MAX];
    uint64_t xid;
};

#define XID_RING 256 /* recent XID events kept for DCGM_EXP_XID_ERRORS_COUNT */
struct xid_event {
    char uuid[GPU_UUID_MAX];
    uint64_t xid;
    uint64_t at_ms; /* monotonic */
};

#define CLOCK_HIST_MAX 4096 /* collections kept per GPU for DCGM_EXP_CLOCK_EVENTS_COUNT */
#define CLOCK_HISTS    64
struct clock_hist {
    char uuid[GPU_UUID_MAX];
    struct exp_clock_hist h;
};

struct exporter {
    /* configuration */
    const char *listen;
    const char *collectors;
    uint64_t interval_ms;
    bool kubernetes;
    const char *socket;
    char *hostname; /* NULL: no host label */
    bool no_hostname;
    const char *node_name;
    bool lower_hostname;
    const char *resource_names;
    bool once;
    int once_format; /* enum prom_format */

    struct exp_counters *counters;
    struct gpu_lib *lib;

    /* collector state (collector thread only) */
    struct gpu_inventory *inv;
    struct exp_gpu_state *gpus;
    size_t n_gpus;
    struct exp_self self;
    struct exp_pod_map pods;
    bool podres_failing;

    /* shared */
    pthread_mutex_t lock;
    struct stop_token *stop; /* svc's */
    struct snapshot *snap;   /* under lock; NULL before the first collection */
    atomic_uint_fast64_t scrapes;
    struct xid_entry xids[XID_TABLE_MAX]; /* under lock */
    size_t n_xids;
    struct xid_event ring[XID_RING]; /* under lock */
    size_t ring_next, ring_n;
    uint64_t xid_window_ms;
    uint64_t clock_window_ms;
    struct clock_hist clock_hists[CLOCK_HISTS]; /* collector thread only */
    size_t n_clock_hists;
    atomic_uint_fast64_t event_errors;
};

/* ---- XID events ------------------------------------------------------------------------------ */

static void xid_record(struct exporter *x, const char *uuid, uint64_t xid)
{
    pthread_mutex_lock(&x->lock);
    size_t i;
    for (i = 0; i < x->n_xids; i++)
        if (strcmp(x->xids[i].uuid, uuid) == 0)
            break;
    if (i == x->n_xids && x->n_xids < XID_TABLE_MAX) {
        strlcpy_s(x->xids[i].uuid, uuid, sizeof(x->xids[i].uuid));
        x->n_xids++;
    }
    if (i < x->n_xids)
        x->xids[i].xid = xid;
    struct xid_event *ev = &x->ring[x->ring_next];
    strlcpy_s(ev->uuid, uuid, sizeof(ev->uuid));
    ev->xid = xid;
    ev->at_ms = now_ms_mono();
    x->ring_next = (x->ring_next + 1) % XID_RING;
    if (x->ring_n < XID_RING)
        x->ring_n++;
    pthread_mutex_unlock(&x->lock);
}

/* The XIDs of one GPU in the last window, counted by value. */
static void xid_counts(struct exporter *x, const char *uuid, struct exp_gpu_state *st)
{
    uint64_t now = now_ms_mono();
    st->n_xid_counts = 0;
    pthread_mutex_lock(&x->lock);
    for (size_t i = 0; i < x->ring_n; i++) {
        const struct xid_event *ev = &x->ring[i];
        if (strcmp(ev->uuid, uuid) != 0 || now - ev->at_ms > x->xid_window_ms)
            continue;
        size_t k;
        for (k = 0; k < st->n_xid_counts; k++)
            if (st->xid_counts[k].xid == ev->xid)
                break;
        if (k == st->n_xid_counts) {
            if (k == EXP_XID_COUNTS_MAX)
                continue;
            st->xid_counts[k].xid = ev->xid;
            st->xid_counts[k].count = 0;
            st->n_xid_counts++;
        }
        st->xid_counts[k].count++;
    }
    pthread_mutex_unlock(&x->lock);
}

static uint64_t xid_last(struct exporter *x, const char *uuid)
{
    uint64_t v = 0;
    pthread_mutex_lock(&x->lock);
    for (size_t i = 0; i < x->n_xids; i++)
        if (strcmp(x->xids[i].uuid, uuid) == 0)
            v = x->xids[i].xid;
    pthread_mutex_unlock(&x->lock);
    return v;
}

static void *events_thread(void *arg)
{
    struct exporter *x = arg;
    struct gpu_events *ev = NULL;
    bool logged = false;
    while (!stop_requested(x->stop)) {
        struct err e = {0};
        if (!ev) {
            if (gpu_events_open(x->lib, GPU_EVENT_XID, &ev, &e) < 0) {
                atomic_fetch_add(&x->event_errors, 1);
                if (!logged)
                    log_warn(COMP, "XID events unavailable; retrying", "error=\"%s\"", err_msg(&e));
                logged = true;
                ev = NULL;
                stop_wait(x->stop, 5000);
                continue;
            }
            logged = false;
        }
        struct gpu_event event;
        int r = gpu_events_wait(ev, 200, &event, &e);
        if (r == -ETIMEDOUT)
            continue;
        if (r < 0) {
            atomic_fetch_add(&x->event_errors, 1);
            log_warn(COMP, "XID event wait failed; resubscribing", "error=\"%s\"", err_msg(&e));
            gpu_events_free(ev);
            ev = NULL;
            continue;
        }
        if (event.type & GPU_EVENT_XID) {
            log_info(COMP, "XID", "gpu=%u uuid=%s xid=%llu", event.gpu_index, event.uuid,
                     (unsigned long long)event.data);
            xid_record(x, event.uuid, event.data);
        }
    }
    gpu_events_free(ev);
    return NULL;
}

/* ---- collection ------------------------------------------------------------------------------ */

/*
 * DCGM_EXP_CLOCK_EVENTS_COUNT as dcgm-exporter computes it: per reason, the collections in the
 * last window in which NVML reported the reason active. Each GPU keeps the masks of one window
 * (window / interval + 2 entries, at most CLOCK_HIST_MAX: with very short intervals the count
 * covers the newest CLOCK_HIST_MAX collections).
 */
static void clock_events_count(struct exporter *x, const char *uuid, struct exp_gpu_state *st)
{
    memset(st->clock_events, 0, sizeof(st->clock_events));
    struct exp_clock_hist *h = NULL;
    for (size_t i = 0; i < x->n_clock_hists && !h; i++)
        if (strcmp(x->clock_hists[i].uuid, uuid) == 0)
            h = &x->clock_hists[i].h;
    if (!h) {
        if (x->n_clock_hists == CLOCK_HISTS)
            return;
        struct clock_hist *ch = &x->clock_hists[x->n_clock_hists++];
        strlcpy_s(ch->uuid, uuid, sizeof(ch->uuid));
        uint64_t cap = x->clock_window_ms / x->interval_ms + 2;
        exp_clock_hist_init(&ch->h, cap > CLOCK_HIST_MAX ? CLOCK_HIST_MAX : (size_t)cap);
        h = &ch->h;
    }
    uint64_t now = now_ms_mono();
    if (st->ok && (st->sample.valid & GPU_SAMPLE_CLOCK_EVENTS))
        exp_clock_hist_push(h, now, st->sample.clock_event_reasons);
    exp_clock_hist_count(h, now, x->clock_window_ms, st->clock_events);
}

static void refresh_pods(struct exporter *x)
{
    exp_pod_map_clear(&x->pods);
    struct err e = {0};
    /* A kubelet that is slow or never answers delays the GPU metrics by at most a quarter of the
     * interval (250 ms at least; attribution is then left empty for this collection), and never
     * a stop. */
    uint64_t budget = x->interval_ms / 4 > PODRES_MIN_MS ? x->interval_ms / 4 : PODRES_MIN_MS;
    int r =
        exp_podresources_list(x->socket, x->inv, x->resource_names, budget, x->stop, &x->pods, &e);
    if (r < 0) {
        x->self.errors[EXP_ERR_PODRESOURCES]++;
        x->self.pod_resources_up = false;
        exp_pod_map_clear(&x->pods);
        if (!x->podres_failing)
            log_warn(COMP,
                     "kubelet PodResources unavailable; pod labels left empty, retrying "
                     "every collection",
                     "socket=%s error=\"%s\"", x->socket, err_msg(&e));
        x->podres_failing = true;
        return;
    }
    if (x->podres_failing)
        log_info(COMP, "kubelet PodResources reachable again", "socket=%s", x->socket);
    x->podres_failing = false;
    x->self.pod_resources_up = true;
}

static void read_gpus(struct exporter *x)
{
    struct err e = {0};
    struct gpu_inventory *inv = NULL;
    if (gpu_inventory_read(x->lib, &inv, &e) < 0) {
        x->self.errors[EXP_ERR_INVENTORY]++;
        log_warn(COMP, "inventory read failed; keeping the previous one", "error=\"%s\"",
                 err_msg(&e));
    } else {
        struct exp_gpu_state *gpus = xcalloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*gpus));
        gpu_inventory_free(x->inv);
        free(x->gpus);
        x->inv = inv;
        x->gpus = gpus;
        x->n_gpus = inv->n_gpus;
    }
    for (size_t i = 0; i < x->n_gpus; i++) {
        struct exp_gpu_state *st = &x->gpus[i];
        const struct gpu_device *d = &x->inv->gpus[i];
        memset(&st->sample, 0, sizeof(st->sample));
        err_clear(&e);
        int r = gpu_sample_read(x->lib, d->index, &st->sample, &e);
        st->lost = st->sample.lost || d->lost || r == GPU_ERR_LOST;
        st->ok = r >= 0 && !st->lost;
        if (st->lost) {
            x->self.errors[EXP_ERR_GPU_LOST]++;
            log_debug(COMP, "GPU lost", "gpu=%u uuid=%s", d->index, d->uuid);
        } else if (r < 0) {
            x->self.errors[EXP_ERR_NVML]++;
            log_warn(COMP, "GPU sample failed", "gpu=%u uuid=%s error=\"%s\"", d->index, d->uuid,
                     err_msg(&e));
        }
        clock_events_count(x, d->uuid, st);
        st->last_xid = xid_last(x, d->uuid);
        xid_counts(x, d->uuid, st);
    }
}

static int collect(struct exporter *x, struct err *e)
{
    uint64_t t0 = now_us_mono();
    read_gpus(x);
    if (x->kubernetes)
        refresh_pods(x);
    x->self.errors[EXP_ERR_EVENTS] = atomic_load(&x->event_errors);
    x->self.collections++;
    x->self.last_collection_unix_s = now_ms_real() / 1000.0;
    x->self.last_collection_duration_s = (now_us_mono() - t0) / 1e6;
    x->self.kubernetes = x->kubernetes;

    struct exp_render_input in = {.counters = x->counters,
                                  .inv = x->inv,
                                  .gpus = x->gpus,
                                  .hostname = x->hostname,
                                  .lower_hostname = x->lower_hostname,
                                  .kubernetes = x->kubernetes,
                                  .pods = &x->pods,
                                  .self = &x->self,
                                  .xid_window_ms = x->xid_window_ms};
    _cleanup_sbuf_ struct sbuf text, om;
    sbuf_init(&text, SNAPSHOT_LIMIT);
    sbuf_init(&om, SNAPSHOT_LIMIT);
    if (exp_render(&in, PROM_FORMAT_TEXT, &text) < 0 ||
        exp_render(&in, PROM_FORMAT_OPENMETRICS, &om) < 0)
        return err_set(e, -ENOBUFS, "rendering metrics: more than %u bytes", SNAPSHOT_LIMIT);
    struct snapshot *fresh = xcalloc(1, sizeof(*fresh));
    atomic_init(&fresh->refs, 1);
    fresh->text_len = text.len;
    fresh->om_len = om.len;
    fresh->text = sbuf_steal(&text);
    fresh->om = sbuf_steal(&om);

    pthread_mutex_lock(&x->lock);
    struct snapshot *old = x->snap;
    x->snap = fresh;
    pthread_mutex_unlock(&x->lock);
    snapshot_unref(old);
    return 0;
}

static void *collector_thread(void *arg)
{
    struct exporter *x = arg;
    uint64_t next = now_ms_mono() + x->interval_ms;
    while (!stop_wait_until(x->stop, next)) {
        struct err e = {0};
        if (collect(x, &e) < 0)
            log_error(COMP, "collection failed", "error=\"%s\"", err_msg(&e));
        next += x->interval_ms;
        uint64_t now = now_ms_mono();
        if (next <= now) /* fell behind: skip, don't burst */
            next = now + x->interval_ms;
    }
    return NULL;
}

/* ---- HTTP ------------------------------------------------------------------------------------ */

/* Serves the latest snapshot by reference (no copy, no NVML or kubelet call); only the scrape
 * counter (and OpenMetrics' # EOF) is written per request. */
static int handle_metrics(const struct http_request *req, struct http_response *resp, void *ud)
{
    struct exporter *x = ud;
    enum prom_format f = prom_negotiate(req->accept);
    uint64_t n = atomic_fetch_add(&x->scrapes, 1) + 1;

    pthread_mutex_lock(&x->lock);
    struct snapshot *s = x->snap;
    if (s)
        atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&x->lock);
    if (!s) {
        http_response_static(resp, 503, HTTP_CT_TEXT, "no collection yet\n");
        return 0;
    }
    resp->status = 200;
    resp->content_type = prom_content_type(f);
    resp->body = f == PROM_FORMAT_OPENMETRICS ? s->om : s->text;
    resp->body_len = f == PROM_FORMAT_OPENMETRICS ? s->om_len : s->text_len;
    resp->release = snapshot_unref;
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
    struct exporter *x = ud;
    (void)req;
    pthread_mutex_lock(&x->lock);
    bool ok = x->snap != NULL;
    pthread_mutex_unlock(&x->lock);
    if (ok)
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
     .help = "collect once, print the metrics to stdout and exit"},
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
    gpu_inventory_free(x->inv);
    free(x->gpus);
    for (size_t i = 0; i < x->n_clock_hists; i++)
        exp_clock_hist_clear(&x->clock_hists[i].h);
    exp_pod_map_clear(&x->pods);
    snapshot_unref(x->snap);
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
    if (pthread_create(&events_tid, NULL, events_thread, x) != 0)
        return err_set(e, -EAGAIN, "cannot start the events thread");
    if (pthread_create(&coll_tid, NULL, collector_thread, x) != 0) {
        stop_request(x->stop);
        pthread_join(events_tid, NULL);
        return err_set(e, -EAGAIN, "cannot start the collector thread");
    }
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
    if ((r = gpu_lib_open(NULL, &x->lib, e)) < 0 || (r = collect(x, e)) < 0)
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
