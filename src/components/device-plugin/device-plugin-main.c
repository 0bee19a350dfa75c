/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop device-plugin`: the I/O shell around the pure core.
 *
 * Threads: main (signals, inotify on the kubelet's directory, registration and its retries,
 * reloads), one gRPC loop thread per advertised resource (handlers), and the health thread
 * (NVML events, lost-GPU checks, recovery). `mu` guards the plan and the watcher lists; `send_mu`
 * orders ListAndWatch sends so a stream never receives an older list after a newer one. The
 * main thread never holds `mu` while stopping a server (its close callbacks take `mu`).
 */
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "dp-internal.h"
#include "grpc.h"
#include "svc.h"

#define COMP               "device-plugin"
#define DP_MAX_WATCH       16
#define DP_REGISTER_MS     5000
#define DP_BACKOFF_MIN_MS  250
#define DP_BACKOFF_MAX_MS  30000
#define DP_LOST_CHECK_MS   2000
#define DP_EVENT_WAIT_MS   100
#define DP_RECOVERY_DEF_MS (5 * 60 * 1000)
#define DP_COALESCE_MS     50

struct plugin;

struct dp_flags {
    const char *kubelet_socket;
    const char *socket_suffix;
    const char *cdi_root;
    const char *cdi_kind;
    uint64_t recovery_ms;
    const char *disable_hc, *enable_hc;
};

struct dp_srv {
    struct plugin *pl;
    char resource[DP_NAME_MAX];
    char socket_path[PATH_MAX];
    char socket_name[DP_NAME_MAX];
    struct grpc_server *srv;
    struct grpc_stream *watch[DP_MAX_WATCH];
    size_t n_watch;
    bool registered;
};

struct plugin {
    struct dpconfig_layer_state layer; /* first: svc's config-file layer works on it */
    struct dp_flags flags;
    struct dp_options opts; /* from the config at start */
    bool fail_init;
    struct stop_token *stop; /* svc's */
    int ifd;                 /* inotify on the kubelet's directory */
    pthread_mutex_t mu;
    pthread_mutex_t send_mu;
    struct dp_plan *plan;
    struct dp_srv *srv;
    size_t n_srv;
    char dir[PATH_MAX];
    char kubelet_sock[PATH_MAX];
    const char *kubelet_name;
    bool no_register;
    struct dp_health_policy hp;
    uint64_t recovery_ms;
    struct gpu_lib *lib;
    /* registration retry */
    uint64_t next_retry_ms;
    uint64_t backoff_ms;
    /* health thread */
    pthread_t health;
    bool health_running;
};

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
             "without errors; 0 disables (5m).\nLost GPUs never recover."},
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
        log_warn(COMP, "config", "warning=\"%s\"", cfg->warnings[i]);
    int r = dp_options_from_config(cfg, ret, e);
    if (r < 0)
        return err_prefix(e, "%s", file ? file : "config");
    if (pl->flags.cdi_kind && (r = dp_options_set_cdi_kind(ret, pl->flags.cdi_kind, e)) < 0)
        return err_prefix(e, "--cdi-kind");
    pl->fail_init = cfg->fail_on_init_error;
    log_info(COMP, "config resolved", "file=%s mig_strategy=%s sharing=%d", file ? file : "(none)",
             dpconfig_mig_strategy_name(ret->mig_strategy), (int)ret->sharing);
    return 0;
}

/* ---- ListAndWatch broadcasting ------------------------------------------------------------ */

static struct dp_resource *srv_resource(struct dp_srv *s)
{
    return dp_plan_find(s->pl->plan, s->resource);
}

/* Sends the current list of every resource to every watcher. pl->srv and pl->n_srv are read
 * under mu only: the main thread frees and replaces them on every restart (kubelet restart,
 * socket removal, SIGHUP), possibly while this runs on the health thread. */
static void broadcast(struct plugin *pl)
{
    struct target {
        char resource[DP_NAME_MAX];
        uint8_t *buf;
        size_t len, n;
        struct grpc_stream *st[DP_MAX_WATCH];
    } *t = NULL;
    size_t n_t = 0;
    pthread_mutex_lock(&pl->send_mu);
    pthread_mutex_lock(&pl->mu);
    t = xcalloc(pl->n_srv + 1, sizeof(*t));
    for (size_t i = 0; i < pl->n_srv; i++) {
        struct dp_srv *s = &pl->srv[i];
        struct dp_resource *r = srv_resource(s);
        struct err e = {0};
        if (!r || !s->n_watch || dp_proto_list(r, &t[n_t].buf, &t[n_t].len, &e) < 0)
            continue;
        strlcpy_s(t[n_t].resource, s->resource, sizeof(t[n_t].resource));
        for (size_t k = 0; k < s->n_watch; k++)
            t[n_t].st[t[n_t].n++] = grpc_stream_ref(s->watch[k]);
        n_t++;
    }
    pthread_mutex_unlock(&pl->mu);
    for (size_t i = 0; i < n_t; i++) {
        for (size_t k = 0; k < t[i].n; k++) {
            if (grpc_stream_send(t[i].st[k], t[i].buf, t[i].len) < 0)
                log_warn(COMP, "ListAndWatch send failed", "resource=%s", t[i].resource);
            grpc_stream_unref(t[i].st[k]);
        }
        free(t[i].buf);
    }
    pthread_mutex_unlock(&pl->send_mu);
    free(t);
}

static void watch_closed(struct grpc_stream *st, int code, void *userdata)
{
    struct dp_srv *s = userdata;
    bool found = false;
    pthread_mutex_lock(&s->pl->mu);
    for (size_t k = 0; k < s->n_watch; k++)
        if (s->watch[k] == st) {
            s->watch[k] = s->watch[--s->n_watch];
            found = true;
            break;
        }
    pthread_mutex_unlock(&s->pl->mu);
    log_info(COMP, "ListAndWatch closed", "resource=%s status=%s", s->resource,
             grpc_status_name(code));
    if (found)
        grpc_stream_unref(st);
}

/* ---- handlers (server loop threads) ------------------------------------------------------- */

static void h_options(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)req, (void)len, (void)ud;
    uint8_t *buf = NULL;
    size_t n = 0;
    struct err e = {0};
    if (dp_proto_options(&buf, &n, &e) < 0) {
        grpc_call_fail(call, GRPC_STATUS_INTERNAL, "%s", err_msg(&e));
        return;
    }
    grpc_call_reply(call, buf, n);
    free(buf);
}

static void h_list_and_watch(struct grpc_stream *st, const uint8_t *req, size_t len, void *ud)
{
    (void)req, (void)len;
    struct dp_srv *s = ud;
    struct plugin *pl = s->pl;
    uint8_t *buf = NULL;
    size_t n = 0;
    struct err e = {0};
    pthread_mutex_lock(&pl->send_mu);
    pthread_mutex_lock(&pl->mu);
    struct dp_resource *r = srv_resource(s);
    int rc = r ? dp_proto_list(r, &buf, &n, &e) : -ENOENT;
    bool kept = false;
    if (rc == 0 && s->n_watch < DP_MAX_WATCH) {
        s->watch[s->n_watch++] = grpc_stream_ref(st);
        kept = true;
    }
    pthread_mutex_unlock(&pl->mu);
    if (rc < 0) {
        grpc_stream_finish(st, GRPC_STATUS_UNAVAILABLE, "resource %s is not served now",
                           s->resource);
    } else if (!kept) {
        grpc_stream_finish(st, GRPC_STATUS_RESOURCE_EXHAUSTED, "too many ListAndWatch streams");
    } else {
        grpc_stream_set_close_cb(st, watch_closed, s);
        grpc_stream_send(st, buf, n);
        log_info(COMP, "ListAndWatch opened", "resource=%s devices=%zu", s->resource,
                 r ? r->n_devices : 0);
    }
    pthread_mutex_unlock(&pl->send_mu);
    free(buf);
}

static bool host_path_exists(const char *path, void *ud)
{
    (void)ud;
    return access(path, F_OK) == 0;
}

static void random_uuid(char out[37])
{
    uint8_t b[16] = {0};
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        uint64_t t = now_us_mono();
        memcpy(b, &t, sizeof(t));
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

/* Allocate and GetPreferredAllocation: answered from the served resource under the plan lock. */
static void serve_unary(struct grpc_call *call, struct dp_srv *s, const uint8_t *req, size_t len,
                        bool allocate, const char *refused)
{
    uint8_t *buf = NULL;
    size_t n = 0;
    int status = GRPC_STATUS_UNAVAILABLE;
    struct err e = {0};
    pthread_mutex_lock(&s->pl->mu);
    struct dp_resource *r = srv_resource(s);
    int rc = !r         ? err_set(&e, -ENOENT, "resource %s is not served now", s->resource)
             : allocate ? dp_proto_allocate(s->pl->plan, r, req, len, random_uuid, host_path_exists,
                                            NULL, &buf, &n, &status, &e)
                        : dp_proto_preferred(s->pl->plan, r, req, len, &buf, &n, &status, &e);
    pthread_mutex_unlock(&s->pl->mu);
    if (rc < 0) {
        log_warn(COMP, refused, "resource=%s error=\"%s\"", s->resource, err_msg(&e));
        grpc_call_fail(call, status, "%s", err_msg(&e));
        return;
    }
    grpc_call_reply(call, buf, n);
    free(buf);
}

static void h_allocate(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
    serve_unary(call, ud, req, len, true, "Allocate refused");
}

static void h_preferred(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
    serve_unary(call, ud, req, len, false, "GetPreferredAllocation refused");
}

static void h_prestart(struct grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)req, (void)len, (void)ud;
    grpc_call_reply(call, "", 0); /* PreStartContainerResponse{} */
}

/* ---- servers and registration (main thread) ----------------------------------------------- */

static void stop_servers(struct plugin *pl)
{
    for (size_t i = 0; i < pl->n_srv; i++) {
        grpc_server_free(pl->srv[i].srv); /* runs close callbacks: never under mu */
        pl->srv[i].srv = NULL;
    }
    pthread_mutex_lock(&pl->mu);
    free(pl->srv);
    pl->srv = NULL;
    pl->n_srv = 0;
    pthread_mutex_unlock(&pl->mu);
}

static int start_servers(struct plugin *pl, struct err *e)
{
    size_t n = pl->plan->n_resources;
    struct dp_srv *srv = xcalloc(n + 1, sizeof(*srv));
    for (size_t i = 0; i < n; i++) {
        struct dp_srv *s = &srv[i];
        const struct dp_resource *r = &pl->plan->resources[i];
        s->pl = pl;
        strlcpy_s(s->resource, r->name, sizeof(s->resource));
        const char *sfx = pl->flags.socket_suffix;
        const char *dot = strrchr(r->socket, '.');
        if (sfx && dot)
            snprintf(s->socket_name, sizeof(s->socket_name), "%.*s-%s%s", (int)(dot - r->socket),
                     r->socket, sfx, dot);
        else
            strlcpy_s(s->socket_name, r->socket, sizeof(s->socket_name));
        if ((size_t)snprintf(s->socket_path, sizeof(s->socket_path), "%.*s/%s", PATH_MAX - 200,
                             pl->dir, s->socket_name) >= sizeof(s->socket_path)) {
            free(srv);
            return err_set(e, -ENAMETOOLONG, "socket path in %s too long", pl->dir);
        }
    }
    pthread_mutex_lock(&pl->mu);
    pl->srv = srv;
    pl->n_srv = n;
    pthread_mutex_unlock(&pl->mu);
    for (size_t i = 0; i < n; i++) {
        struct dp_srv *s = &srv[i];
        int r = grpc_server_new(NULL, &s->srv, e);
        if (r == 0)
            r = grpc_server_add_unary(s->srv, "/v1beta1.DevicePlugin/GetDevicePluginOptions",
                                      h_options, s, e);
        if (r == 0)
            r = grpc_server_add_stream(s->srv, "/v1beta1.DevicePlugin/ListAndWatch",
                                       h_list_and_watch, s, e);
        if (r == 0)
            r = grpc_server_add_unary(s->srv, "/v1beta1.DevicePlugin/GetPreferredAllocation",
                                      h_preferred, s, e);
        if (r == 0)
            r = grpc_server_add_unary(s->srv, "/v1beta1.DevicePlugin/Allocate", h_allocate, s, e);
        if (r == 0)
            r = grpc_server_add_unary(s->srv, "/v1beta1.DevicePlugin/PreStartContainer", h_prestart,
                                      s, e);
        if (r == 0)
            r = grpc_server_start(s->srv, s->socket_path, e);
        if (r < 0) {
            err_prefix(e, "serve %s on %s", s->resource, s->socket_path);
            stop_servers(pl);
            return r;
        }
        log_info(COMP, "serving", "resource=%s socket=%s devices=%zu", s->resource, s->socket_path,
                 pl->plan->resources[i].n_devices);
    }
    return 0;
}

static int register_one(struct plugin *pl, struct dp_srv *s, struct err *e)
{
    _cleanup_(grpc_client_freep) struct grpc_client *c = NULL;
    /* The stop token cancels a connect or call to a kubelet that accepts and never answers. */
    struct grpc_options go = {.stop = pl->stop};
    int r = grpc_client_connect(pl->kubelet_sock, DP_REGISTER_MS, &go, &c, e);
    if (r < 0)
        return err_prefix(e, "register %s with %s", s->resource, pl->kubelet_sock);
    V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    opts.get_preferred_allocation_available = true;
    V1beta1__RegisterRequest rq = V1BETA1__REGISTER_REQUEST__INIT;
    rq.version = (char *)"v1beta1";
    rq.endpoint = s->socket_name;
    rq.resource_name = s->resource;
    rq.options = &opts;
    ProtobufCMessage *resp = NULL;
    int code = 0;
    r = grpc_client_unary_pb(c, "/v1beta1.Registration/Register", &rq.base,
                             &v1beta1__empty__descriptor, DP_REGISTER_MS, &resp, &code, e);
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    if (r < 0)
        return err_prefix(e, "register %s with %s", s->resource, pl->kubelet_sock);
    return 0;
}

/* Registers every unregistered server; schedules a retry with backoff when one fails. */
static void register_all(struct plugin *pl)
{
    if (pl->no_register)
        return;
    bool failed = false;
    for (size_t i = 0; i < pl->n_srv && !stop_requested(pl->stop); i++) {
        struct dp_srv *s = &pl->srv[i];
        if (s->registered)
            continue;
        struct err e = {0};
        if (register_one(pl, s, &e) < 0) {
            log_warn(COMP, "registration failed; will retry", "error=\"%s\" retry_ms=%llu",
                     err_msg(&e), (unsigned long long)pl->backoff_ms);
            failed = true;
            continue;
        }
        s->registered = true;
        log_info(COMP, "registered with the kubelet", "resource=%s endpoint=%s", s->resource,
                 s->socket_name);
    }
    if (failed) {
        pl->next_retry_ms = now_ms_mono() + pl->backoff_ms;
        pl->backoff_ms =
            pl->backoff_ms * 2 > DP_BACKOFF_MAX_MS ? DP_BACKOFF_MAX_MS : pl->backoff_ms * 2;
    } else {
        pl->next_retry_ms = 0;
        pl->backoff_ms = DP_BACKOFF_MIN_MS;
    }
}

static bool host_path_exists(const char *path, void *ud);

/* Under a CDI device-list strategy, the spec that defines the names Allocate hands out: written
 * (atomically) when it changes, removed when no device is left. A failure is logged: the
 * runtime then fails such containers, naming the device. */
static void write_cdi_spec(struct plugin *pl)
{
    if (!(pl->plan->opts.list_strategies & (DPCONFIG_LIST_CDI_ANNOTATIONS | DPCONFIG_LIST_CDI_CRI)))
        return;
    const char *root = pl->flags.cdi_root ? pl->flags.cdi_root : "/var/run/cdi";
    _cleanup_free_ char *path = xasprintf("%s/k8s.device-plugin.nvidia.com-gpu.json", root);
    if (strcmp(pl->plan->opts.cdi_kind, DP_CDI_VENDOR_CLASS) != 0) {
        /* another spec (the toolkit's) defines the names handed out: ours would be stale */
        if (unlink(path) == 0)
            log_info(COMP, "CDI spec removed: the names are another spec's", "path=%s kind=%s",
                     path, pl->plan->opts.cdi_kind);
        return;
    }
    _cleanup_free_ char *text = NULL, *old = NULL;
    struct err e = {0};
    if (dp_cdi_spec_render(pl->plan, host_path_exists, NULL, &text, &e) < 0) {
        log_warn(COMP, "CDI spec not written", "path=%s error=\"%s\"", path, err_msg(&e));
        return;
    }
    if (!text) {
        if (unlink(path) == 0)
            log_info(COMP, "CDI spec removed: no devices", "path=%s", path);
        return;
    }
    if (file_read_all(path, 4u << 20, &old, NULL, &e) == 0 && strcmp(old, text) == 0)
        return;
    err_clear(&e);
    if (mkdir_p(root, 0755) < 0 || file_write_atomic(path, text, strlen(text), 0644, &e) < 0) {
        log_warn(COMP, "CDI spec not written", "path=%s error=\"%s\"", path,
                 e.code ? err_msg(&e) : "cannot create the directory");
        return;
    }
    log_info(COMP, "CDI spec written", "path=%s", path);
}

static int restart(struct plugin *pl, struct dp_plan *new_plan, struct err *e)
{
    stop_servers(pl);
    if (new_plan) {
        pthread_mutex_lock(&pl->mu);
        dp_plan_carry_health(new_plan, pl->plan);
        dp_plan_free(pl->plan);
        pl->plan = new_plan;
        pthread_mutex_unlock(&pl->mu);
    }
    write_cdi_spec(pl);
    pl->backoff_ms = DP_BACKOFF_MIN_MS;
    int r = start_servers(pl, e);
    if (r < 0) {
        pl->next_retry_ms = now_ms_mono() + DP_BACKOFF_MAX_MS / 10;
        return r;
    }
    if (pl->n_srv == 0)
        log_info(COMP, "No devices found. Waiting indefinitely.", NULL);
    register_all(pl);
    return 0;
}

/* ---- health thread ------------------------------------------------------------------------ */

static void *health_main(void *arg)
{
    struct plugin *pl = arg;
    struct err e = {0};
    _cleanup_(gpu_events_freep) struct gpu_events *ev = NULL;
    if (gpu_events_open(pl->lib, GPU_EVENT_XID | GPU_EVENT_ECC_DBE, &ev, &e) < 0)
        log_warn(COMP,
                 "Failed to start health check; continuing with event health checks "
                 "disabled",
                 "error=\"%s\"", err_msg(&e));
    uint64_t last_lost = 0, last_wait_err = 0;
    while (!stop_requested(pl->stop)) {
        struct gpu_event event;
        int r = -ETIMEDOUT;
        if (ev) {
            r = gpu_events_wait(ev, DP_EVENT_WAIT_MS, &event, &e);
        } else if (stop_wait(pl->stop, DP_EVENT_WAIT_MS)) {
            break;
        }
        uint64_t now = now_ms_mono();
        size_t changed = 0;
        if (r < 0 && r != -ETIMEDOUT) {
            if (now - last_wait_err > 10000)
                log_warn(COMP, "waiting for GPU events failed", "error=\"%s\"", err_msg(&e));
            last_wait_err = now;
            if (stop_wait(pl->stop, 200))
                break;
        }
        /* Which GPUs to probe for NVML_ERROR_GPU_IS_LOST: all of them now and then, the GPU
         * of a critical event at once (XID 79: fallen off the bus), and every GPU about to
         * recover, so a lost GPU never turns Healthy. */
        pthread_mutex_lock(&pl->mu);
        unsigned n_gpus = pl->plan ? pl->plan->n_gpus : 0;
        bool critical = r == 0 && dp_health_event_is_critical(&pl->hp, &event);
        if (critical) {
            size_t c = dp_health_apply(pl->plan, &event, now);
            log_warn(COMP, "GPU error: devices marked Unhealthy",
                     "gpu=%u uuid=%s type=0x%llx xid=%llu gi=%u ci=%u devices=%zu", event.gpu_index,
                     event.uuid, (unsigned long long)event.type, (unsigned long long)event.data,
                     event.gi_id, event.ci_id, c);
            changed += c;
        } else if (r == 0) {
            log_info(COMP, "GPU event ignored by the health policy", "gpu=%u type=0x%llx xid=%llu",
                     event.gpu_index, (unsigned long long)event.type,
                     (unsigned long long)event.data);
        }
        uint64_t probe = pl->plan ? dp_health_recovery_due(pl->plan, now, pl->recovery_ms) : 0;
        pthread_mutex_unlock(&pl->mu);
        if (critical && event.gpu_index < 64)
            probe |= 1ull << event.gpu_index;
        if (now - last_lost >= DP_LOST_CHECK_MS) {
            last_lost = now;
            probe = n_gpus >= 64 ? ~0ull : (1ull << n_gpus) - 1;
        }
        uint64_t lost = 0;
        for (unsigned g = 0; g < n_gpus && g < 64; g++) {
            if (!(probe & (1ull << g)))
                continue;
            struct gpu_sample smp;
            struct err se = {0};
            if (gpu_sample_read(pl->lib, g, &smp, &se) == 0 && smp.lost)
                lost |= 1ull << g;
        }
        pthread_mutex_lock(&pl->mu);
        for (unsigned g = 0; g < n_gpus && g < 64; g++)
            if ((lost & (1ull << g)) && pl->plan && g < pl->plan->n_gpus) {
                size_t c = dp_health_mark_lost(pl->plan, g);
                if (c)
                    log_error(COMP, "GPU is lost: devices Unhealthy for good", "gpu=%u", g);
                changed += c;
            }
        size_t rec = pl->plan ? dp_health_recover(pl->plan, now, pl->recovery_ms) : 0;
        if (rec)
            log_info(COMP, "devices Healthy again after the quiet period", "devices=%zu", rec);
        changed += rec;
        pthread_mutex_unlock(&pl->mu);
        if (changed)
            broadcast(pl);
    }
    return NULL;
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
    log_info(COMP, "SIGHUP: reloading the config", NULL);
    int r = svc_config_resolve(s, e);
    if (r < 0 || (r = adopt_config(pl, &o, e)) < 0 || (r = build_plan(pl, &o, &np, e)) < 0) {
        dpconfig_free(steal_ptr(&pl->layer.pending));
        return r;
    }
    if ((r = restart(pl, np, e)) < 0)
        return err_prefix(e, "restart");
    return 0;
}

static bool is_our_socket(struct plugin *pl, const char *name)
{
    for (size_t i = 0; i < pl->n_srv; i++)
        if (strcmp(pl->srv[i].socket_name, name) == 0)
            return true;
    return false;
}

/* Reads the inotify events; true when the servers must restart (kubelet.sock re-created, one of
 * our sockets removed, or events lost). */
static bool inotify_wants_restart(struct plugin *pl, int ifd)
{
    _Alignas(struct inotify_event) char buf[4096];
    bool need_restart = false;
    /* A restarting kubelet removes our sockets and creates kubelet.sock in quick succession:
     * take the events of the next DP_COALESCE_MS too, restart once. */
    uint64_t until = now_ms_mono() + DP_COALESCE_MS;
    for (;;) {
        ssize_t n = read(ifd, buf, sizeof(buf));
        if (n <= 0) {
            uint64_t now = now_ms_mono();
            if (!need_restart || now >= until)
                return need_restart;
            struct pollfd ip = {.fd = ifd, .events = POLLIN};
            if (poll(&ip, 1, (int)(until - now)) <= 0)
                return need_restart;
            continue;
        }
        for (char *q = buf; q < buf + n;) {
            struct inotify_event *iev = (struct inotify_event *)q;
            q += sizeof(*iev) + iev->len;
            if (iev->mask & IN_Q_OVERFLOW) {
                /* Events were dropped: a kubelet.sock creation may be among them. */
                log_warn(COMP, "inotify: event queue overflow, restarting", NULL);
                need_restart = true;
            }
            if (!iev->len)
                continue;
            if ((iev->mask & (IN_CREATE | IN_MOVED_TO)) &&
                strcmp(iev->name, pl->kubelet_name) == 0) {
                log_info(COMP, "inotify: kubelet.sock created, restarting", "path=%s",
                         pl->kubelet_sock);
                need_restart = true;
            } else if ((iev->mask & (IN_DELETE | IN_MOVED_FROM)) && is_our_socket(pl, iev->name)) {
                char path[PATH_MAX + NAME_MAX + 2];
                snprintf(path, sizeof(path), "%.*s/%.*s", PATH_MAX - 1, pl->dir, NAME_MAX,
                         iev->name);
                struct stat st;
                if (stat(path, &st) < 0) {
                    log_info(COMP, "inotify: plugin socket removed, restarting", "path=%s", path);
                    need_restart = true;
                }
            }
        }
    }
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
    dp_health_policy_init(&pl->hp, pl->flags.disable_hc, pl->flags.enable_hc);
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
        log_warn(COMP, "NVML init failed; serving no devices", "error=\"%s\"", err_msg(e));
        err_clear(e);
    }
    if ((r = build_plan(pl, &pl->opts, &pl->plan, e)) < 0)
        return err_prefix(e, "cannot build the device list");
    /* inotify before the first socket, so no event is missed. */
    if (mkdir_p(pl->dir, 0755) < 0)
        log_warn(COMP, "cannot create the device-plugin directory", "dir=%s", pl->dir);
    pl->ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (pl->ifd < 0 || inotify_add_watch(pl->ifd, pl->dir,
                                         IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM) < 0)
        return err_errno(e, -errno, "cannot watch the device-plugin directory %s", pl->dir);
    if (pl->lib) {
        if (pthread_create(&pl->health, NULL, health_main, pl) == 0)
            pl->health_running = true;
        else
            log_error(COMP, "cannot start the health thread", NULL);
    }
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
        bool need_restart = (pfd[2].revents & POLLIN) && inotify_wants_restart(pl, pl->ifd);
        if (need_restart) {
            if (restart(pl, NULL, e) < 0)
                log_error(COMP, "restart failed; will retry", "error=\"%s\"", err_msg(e));
        } else if (pl->next_retry_ms && now_ms_mono() >= pl->next_retry_ms) {
            if (pl->n_srv == 0 && pl->plan && pl->plan->n_resources) {
                if (restart(pl, NULL, e) < 0)
                    log_error(COMP, "restart failed; will retry", "error=\"%s\"", err_msg(e));
            } else {
                register_all(pl);
            }
        }
        err_clear(e);
    }
}

static void dp_cleanup(void *state)
{
    struct plugin *pl = state;
    if (pl->health_running) {
        stop_request(pl->stop); /* the process is ending, on success or error alike */
        pthread_join(pl->health, NULL);
    }
    stop_servers(pl);
    dp_plan_free(pl->plan);
    gpu_lib_free(pl->lib);
    dpconfig_free(pl->layer.pending);
    if (pl->ifd >= 0)
        close(pl->ifd);
    pthread_mutex_destroy(&pl->mu);
    pthread_mutex_destroy(&pl->send_mu);
}

const struct svc_component deviceplugin_component = {
    .name = COMP,
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
