/* SPDX-License-Identifier: Apache-2.0 */
/* The device plugin and the kubelet (dp-shell.h): each server registered on kubelet.sock (retried
 * with backoff), and the kubelet's directory watched for a restarting kubelet or a socket of
 * ours taken away. */
#include <poll.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "dp-shell.h"

#define DP_REGISTER_MS 5000
#define DP_COALESCE_MS 50

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

void dp_register_all(struct plugin *pl)
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
            log_warn(DP_COMP, "registration failed; will retry", "error=\"%s\" retry_ms=%llu",
                     err_msg(&e), (unsigned long long)pl->backoff_ms);
            failed = true;
            continue;
        }
        s->registered = true;
        log_info(DP_COMP, "registered with the kubelet", "resource=%s endpoint=%s", s->resource,
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

int dp_watch_open(struct plugin *pl, struct err *e)
{
    if (mkdir_p(pl->dir, 0755) < 0)
        log_warn(DP_COMP, "cannot create the device-plugin directory", "dir=%s", pl->dir);
    pl->ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (pl->ifd < 0 || inotify_add_watch(pl->ifd, pl->dir,
                                         IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM) < 0)
        return err_errno(e, -errno, "cannot watch the device-plugin directory %s", pl->dir);
    return 0;
}

static bool is_our_socket(struct plugin *pl, const char *name)
{
    for (size_t i = 0; i < pl->n_srv; i++)
        if (strcmp(pl->srv[i].socket_name, name) == 0)
            return true;
    return false;
}

bool dp_watch_wants_restart(struct plugin *pl)
{
    int ifd = pl->ifd;
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
                log_warn(DP_COMP, "inotify: event queue overflow, restarting", NULL);
                need_restart = true;
            }
            if (!iev->len)
                continue;
            if ((iev->mask & (IN_CREATE | IN_MOVED_TO)) &&
                strcmp(iev->name, pl->kubelet_name) == 0) {
                log_info(DP_COMP, "inotify: kubelet.sock created, restarting", "path=%s",
                         pl->kubelet_sock);
                need_restart = true;
            } else if ((iev->mask & (IN_DELETE | IN_MOVED_FROM)) && is_our_socket(pl, iev->name)) {
                char path[PATH_MAX + NAME_MAX + 2];
                snprintf(path, sizeof(path), "%.*s/%.*s", PATH_MAX - 1, pl->dir, NAME_MAX,
                         iev->name);
                struct stat st;
                if (stat(path, &st) < 0) {
                    log_info(DP_COMP, "inotify: plugin socket removed, restarting", "path=%s",
                             path);
                    need_restart = true;
                }
            }
        }
    }
}
