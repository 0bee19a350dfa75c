/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop node-status-exporter`: the shell around nodestatus-core.c. Every --interval it reads the
 * status files, NVML and its Node (observe.c), computes the report, swaps in the rendered pages
 * (metrics-http.c) and writes the gpuop.dev/gpu-count annotation when it changed. A scrape copies
 * the last page out: no NVML or API call per scrape. What is due when is the core's
 * (nst_step_due).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "http.h"
#include "kube.h"
#include "node-status-exporter-internal.h"
#include "svc.h"

#define COMP "node-status-exporter"

/* ---- one observation ---------------------------------------------------------------------- */

static int observe(struct nse *x, struct err *e)
{
    struct nse_reading rd _cleanup_(nse_reading_clear) = {0};
    nse_read(x, &rd);
    int r = nst_observe(&x->st, x->node, x->grace_ms, &rd.o, &x->report, e);
    if (r < 0)
        return r;
    if (x->report.count_error[0] && !x->count_logged)
        log_warn(COMP, "GPU count unknown", "node=%s error=\"%s\"", x->node, x->report.count_error);
    x->count_logged = x->report.count_error[0] != '\0';
    nse_write_annotation(x);
    nse_health_observe(x, rd.node);
    return nse_pages_update(x, e);
}

/* ---- options ------------------------------------------------------------------------------ */

#define X(m) offsetof(struct nse, m)
static const struct svc_option nse_options[] = {
    {.flag = "listen",
     .env = "NODE_STATUS_EXPORTER_LISTEN",
     .kind = SVC_STRING,
     .off = X(listen),
     .metavar = "ADDR",
     .help = "listen address, host:port or :port (default \":8000\")"},
    {.flag = "interval",
     .env = "NODE_STATUS_EXPORTER_INTERVAL",
     .kind = SVC_DURATION,
     .min = 1,
     .finite = true,
     .off = X(interval_ms),
     .metavar = "DUR",
     .help = "how often the node is observed (default 30s)"},
    {.flag = "mismatch-grace",
     .env = "NODE_STATUS_EXPORTER_MISMATCH_GRACE",
     .kind = SVC_DURATION,
     .finite = true,
     .off = X(grace_ms),
     .metavar = "DUR",
     .help = "how long advertised GPUs may stay fewer than expected before\n"
             "gpuop_node_gpu_advertised_mismatch is 1 (default 60s)"},
    {.flag = "validations-dir",
     .env = "VALIDATIONS_DIR",
     .kind = SVC_STRING,
     .off = X(dir),
     .metavar = "DIR",
     .help = "the status files' folder (default " NODESTATE_VALIDATIONS_DIR ")"},
    {.kind = SVC_FRAGMENT, .fragment = svc_node_name_option, .off = X(node)},
    {.flag = "mig-strategy",
     .env = "MIG_STRATEGY",
     .kind = SVC_STRING,
     .off = X(mig_strategy),
     .metavar = "none|single|mixed",
     .help = "MIG strategy of a node without the nvidia.com/mig.strategy label\n"
             "(default none)"},
    {.kind = SVC_FRAGMENT, .fragment = svc_kubeconfig_option, .off = X(kubeconfig)},
    {.flag = "gpu-health",
     .env = "NODE_STATUS_EXPORTER_GPU_HEALTH",
     .kind = SVC_BOOL,
     .off = X(health),
     .help = "watch the GPUs' health (XID and ECC events, lost GPUs, row remapping, NVLink\n"
             "errors, slowdowns) and write it to the node: the " GH_ANN_HEALTH " annotation\n"
             "and the " GH_CONDITION_TYPE " condition (default true)"},
    {.flag = "health-interval",
     .env = "NODE_STATUS_EXPORTER_HEALTH_INTERVAL",
     .kind = SVC_DURATION,
     .min = 1,
     .finite = true,
     .off = X(health_interval_ms),
     .metavar = "DUR",
     .help = "how often the GPUs' state is sampled for their health; an NVML event is\n"
             "handled at once (default 5s)"},
    {.flag = "slowdown-window",
     .env = "NODE_STATUS_EXPORTER_SLOWDOWN_WINDOW",
     .kind = SVC_DURATION,
     .finite = true,
     .off = X(slowdown_window_ms),
     .metavar = "DUR",
     .help = "how long a hardware thermal or power brake slowdown may hold before it is a\n"
             "fault (default 5m; 0: never)"},
    {.flag = "once",
     .kind = SVC_FLAG,
     .off = X(once),
     .help = "observe once, print the metrics to stdout and exit"},
    {.env = "GPUOP_SYSFS_ROOT",
     .kind = SVC_STRING,
     .off = X(sysfs),
     .help = "sysfs root where NVIDIA PCI devices are counted (default /sys)"},
    {0},
};
#undef X

static void nse_defaults(void *state)
{
    struct nse *x = state;
    x->listen = ":8000";
    x->interval_ms = 30000;
    x->grace_ms = 60000;
    x->dir = NODESTATE_VALIDATIONS_DIR;
    x->sysfs = "/sys";
    x->health = true;
    x->health_interval_ms = 5000;
    x->slowdown_window_ms = 300000;
    x->wake_fd = -1;
    pthread_mutex_init(&x->lock, NULL);
    pthread_mutex_init(&x->ev_lock, NULL);
}

static int nse_configure(struct svc *s, struct err *e)
{
    struct nse *x = svc_state(s);
    return nst_config_check(x->node, x->mig_strategy, &x->strategy, e);
}

static void nse_cleanup(void *state)
{
    struct nse *x = state;
    nse_health_stop(x);
    nst_report_clear(&x->report);
    free(x->text);
    free(x->om);
    gpu_lib_free(x->lib);
    kube_client_free(x->kc);
    json_decref(x->conds_written);
    stop_token_free(x->ev_stop);
    if (x->wake_fd >= 0)
        close(x->wake_fd);
    pthread_mutex_destroy(&x->lock);
    pthread_mutex_destroy(&x->ev_lock);
}

/* Until stopped: the full observation every interval, the health one every health interval and
 * at once on an NVML event. */
static int serve(struct svc *s, struct nse *x, struct err *e)
{
    uint64_t next_obs = deadline_after(x->interval_ms);
    uint64_t next_health = deadline_after(x->health_interval_ms);
    while (!svc_stopped(s)) {
        struct pollfd p[2] = {{.fd = svc_event_fd(s), .events = POLLIN},
                              {.fd = x->wake_fd, .events = POLLIN}};
        uint64_t wake = nst_wake_at(x->health, next_obs, next_health);
        if (poll(p, x->wake_fd >= 0 ? 2 : 1, deadline_poll_ms(wake)) < 0 && errno != EINTR)
            return err_errno(e, -errno, "poll");
        if ((p[0].revents & POLLIN) && svc_dispatch(s) == SVC_STOP)
            break;
        bool woke = false;
        if (x->wake_fd >= 0 && (p[1].revents & POLLIN)) {
            uint64_t v;
            woke = read(x->wake_fd, &v, sizeof(v)) == (ssize_t)sizeof(v);
        }
        int r = 0;
        switch (nst_step_due(now_ms_mono(), x->health, woke, next_obs, next_health)) {
        case NST_STEP_OBSERVE:
            r = observe(x, e);
            next_obs = deadline_after(x->interval_ms);
            next_health = deadline_after(x->health_interval_ms);
            nse_health_start(x); /* NVML may have come up */
            break;
        case NST_STEP_HEALTH:
            nse_health_observe(x, NULL);
            r = nse_pages_update(x, e);
            next_health = deadline_after(x->health_interval_ms);
            break;
        case NST_STEP_WAIT:
            break;
        }
        if (r < 0)
            return r;
    }
    return 0;
}

static int nse_run(struct svc *s, struct err *e)
{
    struct nse *x = svc_state(s);
    /* A slow API server delays an observation by at most the call's deadline; scrapes keep
     * serving the last page meanwhile. */
    int r = kube_client_open(KUBE_CALLER_AGENT, x->kubeconfig, NULL, svc_stop(s), &x->kc, e);
    if (r < 0)
        return r;
    x->st.started_ms = now_ms_real();
    if (x->health && !x->once) {
        x->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (x->wake_fd < 0)
            return err_errno(e, -errno, "eventfd");
    }
    if ((r = observe(x, e)) < 0)
        return r;
    nse_health_start(x);
    if (x->once) {
        fputs(x->text, stdout);
        return fflush(stdout) == 0 ? 0 : err_errno(e, -EIO, "write the metrics to stdout");
    }
    _cleanup_(http_server_freep) struct http_server *srv = NULL;
    if ((r = nse_http_open(x, &srv, e)) < 0)
        return r;
    log_info(COMP, "serving",
             "listen=%s port=%u node=%s interval_ms=%llu grace_ms=%llu gpu_health=%s "
             "health_interval_ms=%llu",
             x->listen, http_server_port(srv), x->node, (unsigned long long)x->interval_ms,
             (unsigned long long)x->grace_ms, x->health ? "true" : "false",
             (unsigned long long)x->health_interval_ms);
    r = serve(s, x, e);
    nse_health_stop(x);
    return r;
}

const struct svc_component nodestatus_component = {
    .name = COMP,
    .usage = "Usage: gpuop node-status-exporter [flags]\n"
             "Serves Prometheus metrics of the node's GPU stack: NVIDIA's node status metrics\n"
             "(status files, driver check, devices advertised, PCI devices) and gpuop's (each\n"
             "validation's state, the driver owner, physical vs advertised GPUs, the mismatch).\n"
             "Observes the node every interval; a scrape serves the last observation. Writes\n"
             "the node annotation " NODESTATE_ANN_GPU_COUNT " when it changes.\n"
             "As the node's GPU health agent (--gpu-health) it classifies NVML's events and\n"
             "state and writes the node's health: the " GH_ANN_HEALTH
             " annotation and the\n" GH_CONDITION_TYPE " condition.\n"
             "Routes: /metrics (Prometheus text; OpenMetrics when asked for), /health.\n",
    .flags_title = "Flags (environment variable in brackets; a flag wins over its variable):",
    .options = {nse_options},
    .epilogue = "Other environment:\n"
                "  GPUOP_NVML_LIBRARY           libnvidia-ml.so.1 to load\n\n"
                "Signals: SIGTERM, SIGINT and SIGQUIT exit 0; SIGHUP is logged and ignored.\n",
    .state_size = sizeof(struct nse),
    .defaults = nse_defaults,
    .configure = nse_configure,
    .run = nse_run,
    .cleanup = nse_cleanup,
};
