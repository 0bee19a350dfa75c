/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop device-plugin`: the I/O shell around the pure core. This file holds the options, the
 * plan (built from NVML and the config, swapped on a reload) and the main loop; the gRPC servers
 * are dp-server.c's, the kubelet's registration and directory watch dp-kubelet.c's, the health
 * thread dp-health-thread.c's and the CDI spec file dp-cdi-file.c's (threads and locks:
 * dp-shell.h).
 */
#include <poll.h>
#include <string.h>

#include "dp-shell.h"
#include "svc.h"

#define DP_RECOVERY_DEF_MS (5 * 60 * 1000)

/* ---- options ------------------------------------------------------------------------------ */

/* A socket name suffix: 1 to 32 of [a-z0-9-]. */
static int check_socket_suffix(const void *dst, const char *source, struct err *e)
{
    const char *v = *(const char *const *)dst;
    size_t n = v ? strlen(v) : 0;
    if (n == 0 || n > 32 || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-") != n)
        return err_set(e, -EINVAL, "%s: expected 1 to 32 of a-z, 0-9 and -", source);
    return 0;
}

#define F(member) (offsetof(struct plugin, flags) + offsetof(struct dp_flags, member))
static const struct svc_option dp_options[] = {
    {.flag = "kubelet-socket",
     .env = "KUBELET_SOCKET",
     .kind = SVC_STRING,
     .off = F(kubelet_socket),
     .metavar = "PATH",
     .help = "the kubelet's registration socket\n(/var/lib/kubelet/device-plugins/kubelet.sock); "
             "--kubelet-socket=\"\"\nserves the sockets without registering"},
    {.flag = "socket-suffix",
     .env = "DP_SOCKET_SUFFIX",
     .kind = SVC_STRING,
     .off = F(socket_suffix),
     .check = check_socket_suffix,
     .metavar = "WORD",
     .help = "added to each socket's name (nvidia-gpu-WORD.sock): a second\nplugin beside "
             "another on the node, as gpuop's operator runs\none while it takes a node over from "
             "NVIDIA's plugin"},
    {.flag = "cdi-root",
     .env = "CDI_ROOT",
     .kind = SVC_STRING,
     .off = F(cdi_root),
     .metavar = "DIR",
     .help = "where the CDI spec of the names handed out under a cdi-*\ndevice-list strategy is "
             "written (/var/run/cdi)"},
    {.flag = "cdi-kind",
     .env = "GPUOP_CDI_KIND",
     .kind = SVC_STRING,
     .off = F(cdi_kind),
     .metavar = "VENDOR/CLASS",
     .help =
         "the CDI kind of the GPU names handed out under a cdi-*\nstrategy "
         "(k8s.device-plugin.nvidia.com/gpu, whose spec the\nplugin writes: device nodes only); "
         "nvidia.com/gpu names\ngpuop toolkit's spec instead, which also brings the driver's\n"
         "libraries, and the plugin then writes none"},
    {.flag = "health-recovery-period",
     .env = "DP_HEALTH_RECOVERY_PERIOD",
     .kind = SVC_DURATION,
     .finite = true,
     .off = F(recovery_ms),
     .metavar = "DUR",
     .expect = "expected a duration such as 30s, 5m or 0",
     .help = "a device marked Unhealthy by an XID or ECC error turns\nHealthy again after DUR "
             "without errors; 0 disables (5m).\nA GPU whose reset cleared its ECC error turns "
             "Healthy\nat once. Lost GPUs never recover."},
    {.env = "DP_DISABLE_HEALTHCHECKS",
     .kind = SVC_STRING,
     .off = F(disable_hc),
     .help = "comma list of more XIDs to ignore; all or xids: ignore all"},
    {.env = "DP_ENABLE_HEALTHCHECKS",
     .kind = SVC_STRING,
     .off = F(enable_hc),
     .help = "comma list of XIDs that always count; all: every XID"},
    {0},
};
#undef F

/* The layer's pending config → options; warnings logged. */
static int adopt_config(struct plugin *pl, struct dp_options *ret, struct err *e)
{
    _cleanup_(dpconfig_freep) struct dpconfig *cfg = steal_ptr(&pl->layer.pending);
    const char *file = pl->layer.path;
    for (size_t i = 0; i < cfg->n_warnings; i++)
        log_warn(DP_COMP, "config", "warning=\"%s\"", cfg->warnings[i]);
    int r = dp_options_from_config(cfg, ret, e);
    if (r < 0)
        return err_prefix(e, "%s", file ? file : "config");
    if (pl->flags.cdi_kind && (r = dp_options_set_cdi_kind(ret, pl->flags.cdi_kind, e)) < 0)
        return err_prefix(e, "--cdi-kind");
    pl->fail_init = cfg->fail_on_init_error;
    log_info(DP_COMP, "config resolved", "file=%s mig_strategy=%s sharing=%d",
             file ? file : "(none)", dpconfig_mig_strategy_name(ret->mig_strategy),
             (int)ret->sharing);
    return 0;
}

/* ---- servers and registration (main thread) ----------------------------------------------- */

static int restart(struct plugin *pl, struct dp_plan *new_plan, struct err *e)
{
    dp_servers_stop(pl);
    if (new_plan) {
        pthread_mutex_lock(&pl->mu);
        dp_plan_carry_health(new_plan, pl->plan);
        dp_plan_free(pl->plan);
        pl->plan = new_plan;
        pthread_mutex_unlock(&pl->mu);
    }
    dp_cdi_spec_write(pl);
    pl->backoff_ms = DP_BACKOFF_MIN_MS;
    int r = dp_servers_start(pl, e);
    if (r < 0) {
        pl->next_retry_ms = now_ms_mono() + DP_BACKOFF_MAX_MS / 10;
        return r;
    }
    if (pl->n_srv == 0)
        log_info(DP_COMP, "No devices found. Waiting indefinitely.", NULL);
    dp_register_all(pl);
    return 0;
}

/* ---- main --------------------------------------------------------------------------------- */

static int build_plan(struct plugin *pl, const struct dp_options *o, struct dp_plan **ret,
                      struct err *e)
{
    if (!pl->lib) {
        struct gpu_inventory empty = {0};
        return dp_plan_build(&empty, o, ret, e);
    }
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    int r = gpu_inventory_read(pl->lib, &inv, e);
    if (r < 0)
        return r;
    if ((r = dp_plan_build(inv, o, ret, e)) < 0)
        return r;
    /* MIG devices' capability device nodes, for passDeviceSpecs and the CDI spec: the driver's
     * list, or its layout where this process does not see the file. */
    _cleanup_free_ char *minors = NULL;
    struct err me = {0};
    if (file_read_all(GPU_MIG_MINORS, 1u << 20, &minors, NULL, &me) < 0)
        minors = NULL;
    dp_plan_apply_mig_minors(*ret, minors);
    return 0;
}

static int dp_reload(struct svc *s, struct err *e)
{
    struct plugin *pl = svc_state(s);
    struct dp_options o;
    struct dp_plan *np = NULL;
    log_info(DP_COMP, "SIGHUP: reloading the config", NULL);
    int r = svc_config_resolve(s, e);
    if (r < 0 || (r = adopt_config(pl, &o, e)) < 0 || (r = build_plan(pl, &o, &np, e)) < 0) {
        dpconfig_free(steal_ptr(&pl->layer.pending));
        return r;
    }
    if ((r = restart(pl, np, e)) < 0)
        return err_prefix(e, "restart");
    return 0;
}

static void dp_defaults(void *state)
{
    struct plugin *pl = state;
    pthread_mutex_init(&pl->mu, NULL);
    pthread_mutex_init(&pl->send_mu, NULL);
    pl->backoff_ms = DP_BACKOFF_MIN_MS;
    pl->flags.kubelet_socket = DP_KUBELET_SOCKET_DEFAULT;
    pl->flags.recovery_ms = DP_RECOVERY_DEF_MS;
    pl->ifd = -1;
}

/* The kubelet socket's directory and name; the config; the health policy. Bad input: exit 2. */
static int dp_configure(struct svc *s, struct err *e)
{
    struct plugin *pl = svc_state(s);
    const char *ks = pl->flags.kubelet_socket;
    pl->no_register = !*ks;
    if (!*ks)
        ks = DP_KUBELET_SOCKET_DEFAULT;
    if (strlcpy_s(pl->kubelet_sock, ks, sizeof(pl->kubelet_sock)) >= sizeof(pl->kubelet_sock))
        return err_set(e, -ENAMETOOLONG, "--kubelet-socket: path too long");
    strlcpy_s(pl->dir, ks, sizeof(pl->dir));
    char *slash = strrchr(pl->dir, '/');
    if (slash && slash != pl->dir)
        *slash = 0;
    else if (slash)
        slash[1] = 0;
    else
        strlcpy_s(pl->dir, ".", sizeof(pl->dir));
    pl->kubelet_name =
        strrchr(pl->kubelet_sock, '/') ? strrchr(pl->kubelet_sock, '/') + 1 : pl->kubelet_sock;
    pl->recovery_ms = pl->flags.recovery_ms;
    gh_policy_init(&pl->hp, pl->flags.disable_hc, pl->flags.enable_hc);
    return adopt_config(pl, &pl->opts, e);
}

static int dp_run(struct svc *s, struct err *e)
{
    struct plugin *pl = svc_state(s);
    pl->stop = svc_stop(s);
    int r = gpu_lib_open(NULL, &pl->lib, e);
    if (r < 0 && pl->fail_init)
        return err_prefix(e, "NVML init failed (failOnInitError is true)");
    if (r < 0) {
        log_warn(DP_COMP, "NVML init failed; serving no devices", "error=\"%s\"", err_msg(e));
        err_clear(e);
    }
    if ((r = build_plan(pl, &pl->opts, &pl->plan, e)) < 0)
        return err_prefix(e, "cannot build the device list");
    if ((r = dp_watch_open(pl, e)) < 0)
        return r;
    if (pl->lib)
        dp_health_start(pl);
    if ((r = restart(pl, NULL, e)) < 0)
        return err_prefix(e, "cannot serve");
    for (;;) {
        int timeout = pl->next_retry_ms ? deadline_poll_ms(pl->next_retry_ms) : -1;
        struct pollfd pfd[3] = {{.fd = stop_fd(pl->stop), .events = POLLIN},
                                {.fd = svc_event_fd(s), .events = POLLIN},
                                {.fd = pl->ifd, .events = POLLIN}};
        if (poll(pfd, 3, timeout) < 0 && errno != EINTR)
            return err_errno(e, -errno, "poll");
        if (svc_dispatch(s) == SVC_STOP)
            return 0;
        bool need_restart = (pfd[2].revents & POLLIN) && dp_watch_wants_restart(pl);
        if (need_restart) {
            if (restart(pl, NULL, e) < 0)
                log_error(DP_COMP, "restart failed; will retry", "error=\"%s\"", err_msg(e));
        } else if (pl->next_retry_ms && now_ms_mono() >= pl->next_retry_ms) {
            if (pl->n_srv == 0 && pl->plan && pl->plan->n_resources) {
                if (restart(pl, NULL, e) < 0)
                    log_error(DP_COMP, "restart failed; will retry", "error=\"%s\"", err_msg(e));
            } else {
                dp_register_all(pl);
            }
        }
        err_clear(e);
    }
}

static void dp_cleanup(void *state)
{
    struct plugin *pl = state;
    dp_health_join(pl);
    dp_servers_stop(pl);
    dp_plan_free(pl->plan);
    gpu_lib_free(pl->lib);
    dpconfig_free(pl->layer.pending);
    if (pl->ifd >= 0)
        close(pl->ifd);
    pthread_mutex_destroy(&pl->mu);
    pthread_mutex_destroy(&pl->send_mu);
}

const struct svc_component deviceplugin_component = {
    .name = DP_COMP,
    .usage = "Usage: gpuop device-plugin [flags]\n"
             "\n"
             "Advertises the node's GPUs to the kubelet over the Device Plugin API v1beta1: one\n"
             "gRPC server per resource (nvidia-gpu.sock, nvidia-mig-<profile>.sock, ...) in the\n"
             "kubelet's device-plugin directory, registered with the kubelet, re-registered "
             "within\n"
             "a second when kubelet.sock is re-created or a plugin socket disappears.\n",
    .flags_title = "Flags (environment variables in brackets; flag > env > config file > default):",
    .options = {dpconfig_plugin_options, dp_options},
    .epilogue = "Health (as NVIDIA's plugin): XIDs 13, 31, 43, 45, 68, 109 are ignored.\n"
                "\n"
                "Signals: SIGHUP reloads the config (a bad config is reported and the last good "
                "one\n"
                "keeps serving); SIGTERM, SIGINT and SIGQUIT remove the sockets and exit 0.\n",
    .state_size = sizeof(struct plugin),
    .defaults = dp_defaults,
    .layer = &dpconfig_layer,
    .configure = dp_configure,
    .run = dp_run,
    .reload = dp_reload,
    .cleanup = dp_cleanup,
};
