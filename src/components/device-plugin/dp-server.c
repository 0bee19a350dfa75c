/* SPDX-License-Identifier: Apache-2.0 */
/* The device plugin's gRPC servers (dp-shell.h): one per advertised resource, its handlers
 * answered from the plan under its lock through the protobuf edge (dp-proto.c), ListAndWatch
 * streams kept and sent every change. */
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "dp-shell.h"

/* ---- ListAndWatch broadcasting ------------------------------------------------------------ */

static struct dp_resource *srv_resource(struct dp_srv *s)
{
    return dp_plan_find(s->pl->plan, s->resource);
}

/* pl->srv and pl->n_srv are read under mu only: the main thread frees and replaces them on every
 * restart (kubelet restart, socket removal, SIGHUP), possibly while this runs on the health thread.
 */
void dp_broadcast(struct plugin *pl)
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
                log_warn(DP_COMP, "ListAndWatch send failed", "resource=%s", t[i].resource);
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
    log_info(DP_COMP, "ListAndWatch closed", "resource=%s status=%s", s->resource,
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
        log_info(DP_COMP, "ListAndWatch opened", "resource=%s devices=%zu", s->resource,
                 r ? r->n_devices : 0);
    }
    pthread_mutex_unlock(&pl->send_mu);
    free(buf);
}

bool dp_host_path_exists(const char *path, void *ud)
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
             : allocate ? dp_proto_allocate(s->pl->plan, r, req, len, random_uuid,
                                            dp_host_path_exists, NULL, &buf, &n, &status, &e)
                        : dp_proto_preferred(s->pl->plan, r, req, len, &buf, &n, &status, &e);
    pthread_mutex_unlock(&s->pl->mu);
    if (rc < 0) {
        log_warn(DP_COMP, refused, "resource=%s error=\"%s\"", s->resource, err_msg(&e));
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

void dp_servers_stop(struct plugin *pl)
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

int dp_servers_start(struct plugin *pl, struct err *e)
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
        if (!sfx || !dot) {
            strlcpy_s(s->socket_name, r->socket, sizeof(s->socket_name));
        } else if ((size_t)snprintf(s->socket_name, sizeof(s->socket_name), "%.*s-%s%s",
                                    (int)(dot - r->socket), r->socket, sfx,
                                    dot) >= sizeof(s->socket_name)) {
            free(srv);
            return err_set(e, -ENAMETOOLONG, "socket name %s with suffix %s too long", r->socket,
                           sfx);
        }
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
            dp_servers_stop(pl);
            return r;
        }
        log_info(DP_COMP, "serving", "resource=%s socket=%s devices=%zu", s->resource,
                 s->socket_path, pl->plan->resources[i].n_devices);
    }
    return 0;
}
