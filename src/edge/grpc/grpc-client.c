/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gRPC client over HTTP/2 (nghttp2) on a unix-domain socket. No background thread: every call
 * drives the connection (poll, read, nghttp2, write) on the calling thread until what it waits
 * for arrives or its time is up. Messages of other open streams that arrive meanwhile are queued
 * on those streams.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <nghttp2/nghttp2.h>

#include "grpc-internal.h"

void grpc_options_fill(struct grpc_options *o, const struct grpc_options *in);

struct cmsg {
    struct cmsg *next;
    uint8_t *data;
    size_t len;
};

struct grpc_client_stream {
    struct grpc_client *c; /* NULL once the client is gone */
    struct grpc_client_stream *next;
    int32_t id;
    char *path;
    uint8_t *req; /* framed request */
    size_t req_len, req_off;
    uint64_t deadline; /* now_ms_mono() based; 0 = none */
    struct grpc_deframer df;
    struct cmsg *head, *tail;
    size_t queued;
    bool queue_full;
    int http_status;
    bool ct_ok;
    bool have_status;
    int status;
    char message[ERR_MSG_MAX];
    bool done; /* the final status is known (messages may still be queued) */
    int final_code;
    char final_msg[ERR_MSG_MAX];
};

struct grpc_client {
    struct grpc_options o;
    char *path;
    int fd;
    nghttp2_session *h2;
    struct grpc_client_stream *streams;
    const uint8_t *out;
    size_t out_len;
    bool dead;
    char dead_msg[256];
    bool got_settings;
    bool goaway;
    int32_t goaway_last;
};

/* Queued messages beyond this many bytes on one stream (a caller that does not read) fail the
 * stream with RESOURCE_EXHAUSTED. */
#define CLIENT_QUEUE_FACTOR 4

static void stream_done(struct grpc_client_stream *st, int code, const char *fmt, ...)
    GPUOP_PRINTF(3, 4);
static void stream_done(struct grpc_client_stream *st, int code, const char *fmt, ...)
{
    if (st->done)
        return;
    st->done = true;
    st->final_code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->final_msg, sizeof(st->final_msg), fmt, ap);
    va_end(ap);
}

static void cancel(struct grpc_client_stream *st, int code, const char *msg)
{
    if (st->c && st->id > 0 && !st->done)
        nghttp2_submit_rst_stream(st->c->h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
    stream_done(st, code, "%s", msg);
}

/* ---- nghttp2 callbacks -------------------------------------------------------------------- */

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    struct grpc_client_stream *st = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (!st)
        return 0;
    if (grpc_name_is(name, namelen, ":status")) {
        int v = 0;
        if (grpc_status_parse((const char *)value, valuelen, &v) == 0)
            st->http_status = v;
    } else if (grpc_name_is(name, namelen, "content-type")) {
        st->ct_ok = grpc_content_type_ok((const char *)value, valuelen);
    } else if (grpc_name_is(name, namelen, "grpc-status")) {
        int v = 0;
        if (grpc_status_parse((const char *)value, valuelen, &v) == 0) {
            st->have_status = true;
            st->status = v;
        }
    } else if (grpc_name_is(name, namelen, "grpc-message")) {
        grpc_percent_decode((const char *)value, valuelen, st->message, sizeof(st->message));
    }
    return 0;
}

static int on_msg(void *ud, uint8_t *msg, size_t len)
{
    struct grpc_client_stream *st = ud;
    size_t limit = st->c->o.max_recv_msg * CLIENT_QUEUE_FACTOR;
    if (st->queued + len > limit) {
        st->queue_full = true;
        free(msg);
        return -1;
    }
    struct cmsg *m = xcalloc(1, sizeof(*m));
    m->data = msg;
    m->len = len;
    if (st->tail)
        st->tail->next = m;
    else
        st->head = m;
    st->tail = m;
    st->queued += len;
    return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    (void)ud;
    struct grpc_client_stream *st = nghttp2_session_get_stream_user_data(h2, id);
    if (!st || st->done)
        return 0;
    if (st->http_status != 200 || !st->ct_ok)
        return 0; /* not a gRPC response body; the status decides at the end */
    struct err e = {0};
    int code = grpc_deframer_feed(&st->df, data, len, on_msg, st, &e);
    if (code) {
        if (st->queue_full)
            cancel(st, GRPC_STATUS_RESOURCE_EXHAUSTED,
                   "more than the queue limit of messages not read by the caller");
        else
            cancel(st, code, err_msg(&e));
    }
    return 0;
}

static void stream_end(struct grpc_client_stream *st)
{
    if (st->done)
        return;
    if (st->http_status != 200 && !st->have_status)
        stream_done(st, grpc_status_from_http(st->http_status), "HTTP status %d", st->http_status);
    else if (!st->ct_ok && !st->have_status)
        stream_done(st, GRPC_STATUS_UNKNOWN, "response content-type is not application/grpc");
    else if (!st->have_status)
        stream_done(st, GRPC_STATUS_INTERNAL, "response ended without grpc-status");
    else if (st->status == GRPC_STATUS_OK && !grpc_deframer_idle(&st->df))
        stream_done(st, GRPC_STATUS_INTERNAL, "response ended inside a message");
    else
        stream_done(st, st->status, "%s", st->message);
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *ud)
{
    struct grpc_client *c = ud;
    if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
        c->got_settings = true;
        return 0;
    }
    if (frame->hd.type == NGHTTP2_GOAWAY) {
        c->goaway = true;
        c->goaway_last = frame->goaway.last_stream_id;
        return 0;
    }
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    struct grpc_client_stream *st = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (st && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        stream_end(st);
    return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *ud)
{
    (void)ud;
    struct grpc_client_stream *st = nghttp2_session_get_stream_user_data(h2, id);
    if (!st)
        return 0;
    if (!st->done) {
        if (error_code == NGHTTP2_REFUSED_STREAM)
            stream_done(st, GRPC_STATUS_UNAVAILABLE, "stream refused by the server");
        else if (error_code != NGHTTP2_NO_ERROR)
            stream_done(st, grpc_status_from_h2_error(error_code), "stream reset by the server: %s",
                        nghttp2_http2_strerror(error_code));
        else
            stream_end(st);
    }
    st->id = -1; /* the HTTP/2 stream is gone; nothing to cancel */
    return 0;
}

static ssize_t read_request(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                            uint32_t *data_flags, nghttp2_data_source *source, void *ud)
{
    (void)h2;
    (void)id;
    (void)ud;
    struct grpc_client_stream *st = source->ptr;
    size_t n = st->req_len - st->req_off;
    if (n > length)
        n = length;
    memcpy(buf, st->req + st->req_off, n);
    st->req_off += n;
    if (st->req_off == st->req_len)
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* ---- I/O ---------------------------------------------------------------------------------- */

static void client_dead(struct grpc_client *c, const char *why)
{
    if (!c->dead) {
        c->dead = true;
        snprintf(c->dead_msg, sizeof(c->dead_msg), "%s", why);
    }
    for (struct grpc_client_stream *st = c->streams; st; st = st->next)
        stream_done(st, GRPC_STATUS_UNAVAILABLE, "connection to %s: %s", c->path, c->dead_msg);
}

static void flush_out(struct grpc_client *c)
{
    while (!c->dead) {
        if (c->out_len == 0) {
            const uint8_t *p = NULL;
            ssize_t n = nghttp2_session_mem_send(c->h2, &p);
            if (n < 0) {
                client_dead(c, nghttp2_strerror((int)n));
                return;
            }
            if (n == 0)
                return;
            c->out = p;
            c->out_len = (size_t)n;
        }
        ssize_t w = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return;
            client_dead(c, strerror(errno));
            return;
        }
        c->out += w;
        c->out_len -= (size_t)w;
    }
}

static void expire(struct grpc_client *c, uint64_t now)
{
    for (struct grpc_client_stream *st = c->streams; st; st = st->next)
        if (!st->done && st->deadline && now >= st->deadline)
            cancel(st, GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
}

/* One round: write what is pending, wait (up to until, a now_ms_mono() time; 0 = don't wait) for
 * input or a stream deadline, read and process it. */
static void pump(struct grpc_client *c, uint64_t until)
{
    flush_out(c);
    if (c->dead)
        return;
    uint64_t now = now_ms_mono();
    expire(c, now);
    uint64_t wake = until;
    for (struct grpc_client_stream *st = c->streams; st; st = st->next)
        if (!st->done && st->deadline && st->deadline < wake)
            wake = st->deadline;
    int timeout = wake > now ? (wake - now > 60000 ? 60000 : (int)(wake - now)) : 0;
    struct pollfd pfds[2] = {{.fd = c->fd, .events = POLLIN | (c->out_len ? POLLOUT : 0)},
                             {.fd = stop_fd(c->o.stop), .events = POLLIN}};
    int r = poll(pfds, c->o.stop ? 2 : 1, timeout);
    if (r < 0 && errno != EINTR) {
        client_dead(c, strerror(errno));
        return;
    }
    if (stop_requested(c->o.stop)) {
        client_dead(c, "cancelled: stopping");
        return;
    }
    struct pollfd pfd = pfds[0];
    if (r > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
        uint8_t buf[16384];
        for (int i = 0; i < 16; i++) {
            ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                break;
            if (n <= 0) {
                client_dead(c, n == 0 ? "connection closed by the server" : strerror(errno));
                break;
            }
            ssize_t rv = nghttp2_session_mem_recv(c->h2, buf, (size_t)n);
            if (rv < 0) {
                client_dead(c, nghttp2_strerror((int)rv));
                break;
            }
        }
    }
    expire(c, now_ms_mono());
    flush_out(c);
    if (!c->dead && !nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2))
        client_dead(c, "connection finished (GOAWAY)");
}

/* ---- connect ------------------------------------------------------------------------------ */

static int connect_unix(const char *path, uint64_t timeout_ms, struct stop_token *stop, int *ret_fd,
                        struct err *e)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return err_set(e, -ENAMETOOLONG, "connect \"%s\": path longer than %zu bytes", path,
                       sizeof(sa.sun_path) - 1);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return err_errno(e, -errno, "connect \"%s\": socket", path);
    uint64_t until = now_ms_mono() + timeout_ms;
    for (;;) {
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EINPROGRESS)
            return err_errno(e, -errno, "connect \"%s\"", path);
        /* A unix socket whose backlog is full: EAGAIN; retry until the timeout. */
        uint64_t now = now_ms_mono();
        if (stop_requested(stop))
            return err_set(e, -ECANCELED, "connect \"%s\": cancelled: stopping", path);
        if (now >= until)
            return err_set(e, -ETIMEDOUT, "connect \"%s\": timed out after %" PRIu64 " ms", path,
                           timeout_ms);
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        poll(&pfd, 1, (int)(until - now > 10 ? 10 : until - now));
    }
    *ret_fd = steal_fd(&fd);
    return 0;
}

int grpc_client_connect(const char *socket_path, uint64_t timeout_ms,
                        const struct grpc_options *opts, struct grpc_client **ret, struct err *e)
{
    if (!timeout_ms)
        timeout_ms = 5000;
    int fd = -1;
    int r = connect_unix(socket_path, timeout_ms, opts ? opts->stop : NULL, &fd, e);
    if (r < 0)
        return r;
    uint64_t until = now_ms_mono() + timeout_ms;

    nghttp2_session_callbacks *cbs = NULL;
    if (nghttp2_session_callbacks_new(&cbs) != 0) {
        close(fd);
        return err_set(e, -ENOMEM, "connect \"%s\": out of memory", socket_path);
    }
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);

    struct grpc_client *c = xcalloc(1, sizeof(*c));
    grpc_options_fill(&c->o, opts);
    c->fd = fd;
    c->path = xstrdup(socket_path);
    r = nghttp2_session_client_new(&c->h2, cbs, c);
    nghttp2_session_callbacks_del(cbs);
    if (r != 0) {
        close(fd);
        free(c->path);
        free(c);
        return err_set(e, -ENOMEM, "connect \"%s\": %s", socket_path, nghttp2_strerror(r));
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, c->o.max_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)c->o.max_header_list},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20},
    };
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, ARRAY_SIZE(iv));
    nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, 16 << 20);

    /* The server's SETTINGS proves an HTTP/2 peer is there and alive. */
    while (!c->got_settings && !c->dead && now_ms_mono() < until)
        pump(c, until);
    if (!c->got_settings) {
        r = c->dead ? err_set(e, -ECONNRESET, "connect \"%s\": no HTTP/2 server: %s", socket_path,
                              c->dead_msg)
                    : err_set(e, -ETIMEDOUT,
                              "connect \"%s\": no HTTP/2 SETTINGS from the server within %" PRIu64
                              " ms",
                              socket_path, timeout_ms);
        grpc_client_free(c);
        return r;
    }
    *ret = c;
    return 0;
}

void grpc_client_free(struct grpc_client *c)
{
    if (!c)
        return;
    for (struct grpc_client_stream *st = c->streams; st; st = st->next) {
        stream_done(st, GRPC_STATUS_CANCELLED, "client closed");
        st->c = NULL;
    }
    if (!c->dead) {
        nghttp2_session_terminate_session(c->h2, NGHTTP2_NO_ERROR);
        flush_out(c);
    }
    nghttp2_session_del(c->h2);
    close(c->fd);
    free(c->path);
    free(c);
}

/* ---- calls -------------------------------------------------------------------------------- */

static int code_to_errno(int code)
{
    switch (code) {
    case GRPC_STATUS_OK:
        return 0;
    case GRPC_STATUS_DEADLINE_EXCEEDED:
        return -ETIMEDOUT;
    case GRPC_STATUS_UNAVAILABLE:
        return -ECONNRESET;
    default:
        return -EPROTO;
    }
}

int grpc_client_stream_open(struct grpc_client *c, const char *path, const void *req,
                            size_t req_len, uint64_t timeout_ms, struct grpc_client_stream **ret,
                            struct err *e)
{
    if (c->dead)
        return err_set(e, -ECONNRESET, "%s: connection to %s: %s", path, c->path, c->dead_msg);
    if (c->goaway)
        return err_set(e, -ECONNRESET, "%s: connection to %s is going away", path, c->path);
    if (req_len > c->o.max_send_msg)
        return err_set(e, -EMSGSIZE, "%s: request of %zu bytes is larger than the limit of %zu",
                       path, req_len, c->o.max_send_msg);
    struct grpc_client_stream *st = xcalloc(1, sizeof(*st));
    st->c = c;
    st->path = xstrdup(path);
    st->req_len = GRPC_PREFIX_LEN + req_len;
    st->req = xmalloc(st->req_len);
    grpc_frame_prefix(st->req, (uint32_t)req_len);
    if (req_len)
        memcpy(st->req + GRPC_PREFIX_LEN, req, req_len);
    grpc_deframer_init(&st->df, c->o.max_recv_msg);
    char timeout_buf[16] = "";
    if (timeout_ms) {
        st->deadline = now_ms_mono() + timeout_ms;
        grpc_timeout_format(timeout_ms, timeout_buf);
    }
    nghttp2_nv nva[] = {
#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE}
        NV(":method", "POST"),
        NV(":scheme", "http"),
        NV(":path", path),
        NV(":authority", "localhost"),
        NV("content-type", "application/grpc"),
        NV("te", "trailers"),
        NV("user-agent", "gpuop-grpc/" GPUOP_VERSION),
        NV("grpc-timeout", timeout_buf),
#undef NV
    };
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_request};
    int32_t id =
        nghttp2_submit_request(c->h2, NULL, nva, ARRAY_SIZE(nva) - (timeout_ms ? 0 : 1), &prd, st);
    if (id < 0) {
        int r = err_set(e, -EIO, "%s: %s", path, nghttp2_strerror(id));
        grpc_deframer_free(&st->df);
        free(st->req);
        free(st->path);
        free(st);
        return r;
    }
    st->id = id;
    st->next = c->streams;
    c->streams = st;
    flush_out(c);
    *ret = st;
    return 0;
}

int grpc_client_stream_open_pb(struct grpc_client *c, const char *path, const ProtobufCMessage *req,
                               uint64_t timeout_ms, struct grpc_client_stream **ret, struct err *e)
{
    _cleanup_free_ uint8_t *buf = NULL;
    size_t len = 0;
    int r = grpc_pb_pack(req, c->o.max_send_msg, &buf, &len, e);
    if (r < 0)
        return err_prefix(e, "%s", path);
    return grpc_client_stream_open(c, path, buf, len, timeout_ms, ret, e);
}

int grpc_client_stream_next(struct grpc_client_stream *st, uint64_t wait_ms, uint8_t **ret_msg,
                            size_t *ret_len, int *ret_code, struct err *e)
{
    uint64_t until = wait_ms == UINT64_MAX ? UINT64_MAX : now_ms_mono() + wait_ms;
    bool polled = false;
    for (;;) {
        if (st->head) {
            struct cmsg *m = st->head;
            st->head = m->next;
            if (!st->head)
                st->tail = NULL;
            st->queued -= m->len;
            *ret_msg = m->data;
            *ret_len = m->len;
            free(m);
            if (ret_code)
                *ret_code = GRPC_STATUS_OK;
            return 1;
        }
        if (!st->done && !st->c)
            stream_done(st, GRPC_STATUS_CANCELLED, "client closed");
        if (st->done) {
            if (ret_code)
                *ret_code = st->final_code;
            if (st->final_code == GRPC_STATUS_OK)
                return 0;
            return err_set(e, code_to_errno(st->final_code), "%s: %s%s%s", st->path,
                           grpc_status_name(st->final_code), st->final_msg[0] ? ": " : "",
                           st->final_msg);
        }
        if (polled && now_ms_mono() >= until) {
            if (ret_code)
                *ret_code = GRPC_STATUS_OK;
            return err_set(e, -EAGAIN, "%s: no message within %" PRIu64 " ms", st->path, wait_ms);
        }
        pump(st->c, until == UINT64_MAX ? now_ms_mono() + 60000 : until);
        polled = true;
    }
}

int grpc_client_stream_next_pb(struct grpc_client_stream *st,
                               const ProtobufCMessageDescriptor *desc, uint64_t wait_ms,
                               ProtobufCMessage **ret_msg, int *ret_code, struct err *e)
{
    _cleanup_free_ uint8_t *buf = NULL;
    size_t len = 0;
    int r = grpc_client_stream_next(st, wait_ms, &buf, &len, ret_code, e);
    if (r <= 0)
        return r;
    r = grpc_pb_unpack(desc, buf, len, 0, ret_msg, e);
    if (r < 0) {
        if (ret_code)
            *ret_code = GRPC_STATUS_INTERNAL;
        return err_prefix(e, "%s", st->path);
    }
    return 1;
}

void grpc_client_stream_free(struct grpc_client_stream *st)
{
    if (!st)
        return;
    struct grpc_client *c = st->c;
    if (c) {
        if (!st->done && st->id > 0) {
            nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
            flush_out(c);
        }
        if (st->id > 0)
            nghttp2_session_set_stream_user_data(c->h2, st->id, NULL);
        for (struct grpc_client_stream **p = &c->streams; *p; p = &(*p)->next) {
            if (*p == st) {
                *p = st->next;
                break;
            }
        }
    }
    while (st->head) {
        struct cmsg *m = st->head;
        st->head = m->next;
        free(m->data);
        free(m);
    }
    grpc_deframer_free(&st->df);
    free(st->req);
    free(st->path);
    free(st);
}

int grpc_client_unary(struct grpc_client *c, const char *path, const void *req, size_t req_len,
                      uint64_t timeout_ms, uint8_t **ret_resp, size_t *ret_len, int *ret_code,
                      struct err *e)
{
    _cleanup_(grpc_client_stream_freep) struct grpc_client_stream *st = NULL;
    int code = GRPC_STATUS_UNAVAILABLE;
    int r = grpc_client_stream_open(c, path, req, req_len, timeout_ms, &st, e);
    if (r < 0) {
        if (ret_code)
            *ret_code = r == -EMSGSIZE ? GRPC_STATUS_RESOURCE_EXHAUSTED : code;
        return r;
    }
    _cleanup_free_ uint8_t *msg = NULL;
    size_t len = 0;
    r = grpc_client_stream_next(st, UINT64_MAX, &msg, &len, &code, e);
    if (r < 0 || r == 0) {
        if (r == 0) {
            code = GRPC_STATUS_INTERNAL;
            r = err_set(e, -EPROTO, "%s: INTERNAL: no response message", path);
        }
        if (ret_code)
            *ret_code = code;
        return r;
    }
    /* Wait for the status that must follow the one message. */
    uint8_t *extra = NULL;
    size_t extra_len = 0;
    r = grpc_client_stream_next(st, UINT64_MAX, &extra, &extra_len, &code, e);
    if (r > 0) {
        free(extra);
        code = GRPC_STATUS_INTERNAL;
        r = err_set(e, -EPROTO, "%s: INTERNAL: more than one response message", path);
    }
    if (ret_code)
        *ret_code = code;
    if (r < 0)
        return r;
    *ret_resp = steal_ptr(&msg);
    *ret_len = len;
    return 0;
}

int grpc_client_unary_pb(struct grpc_client *c, const char *path, const ProtobufCMessage *req,
                         const ProtobufCMessageDescriptor *resp_desc, uint64_t timeout_ms,
                         ProtobufCMessage **ret_resp, int *ret_code, struct err *e)
{
    _cleanup_free_ uint8_t *buf = NULL, *resp = NULL;
    size_t len = 0, resp_len = 0;
    int r = grpc_pb_pack(req, c->o.max_send_msg, &buf, &len, e);
    if (r < 0) {
        if (ret_code)
            *ret_code = GRPC_STATUS_RESOURCE_EXHAUSTED;
        return err_prefix(e, "%s", path);
    }
    r = grpc_client_unary(c, path, buf, len, timeout_ms, &resp, &resp_len, ret_code, e);
    if (r < 0)
        return r;
    r = grpc_pb_unpack(resp_desc, resp, resp_len, 0, ret_resp, e);
    if (r < 0) {
        if (ret_code)
            *ret_code = GRPC_STATUS_INTERNAL;
        return err_prefix(e, "%s", path);
    }
    return 0;
}
