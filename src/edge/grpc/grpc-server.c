/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gRPC server over HTTP/2 (nghttp2) on a unix-domain socket.
 *
 * One loop thread per server owns the listener, every connection and every nghttp2 session. The
 * only state shared with other threads is inside struct grpc_stream (queued messages, finish
 * request, open flag), guarded by the stream's own mutex; other threads queue and poke the
 * loop's eventfd, and the loop moves queued bytes into HTTP/2. Handlers and close callbacks run
 * on the loop thread with no lock of ours held, so they may call any stream function.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <nghttp2/nghttp2.h>

#include "grpc-internal.h"

#define COMPONENT "grpc"

enum method_kind { METHOD_UNARY, METHOD_STREAM };

struct method {
    char *path;
    enum method_kind kind;
    const ProtobufCMessageDescriptor *desc; /* NULL: raw bytes */
    union {
        grpc_unary_fn unary;
        grpc_stream_fn stream;
        grpc_unary_pb_fn unary_pb;
        grpc_stream_pb_fn stream_pb;
    } fn;
    void *userdata;
};

struct grpc_server {
    struct grpc_options o;
    struct method *methods;
    size_t n_methods;
    char *socket_path;
    dev_t sock_dev; /* the socket file we created, to unlink only our own */
    ino_t sock_ino;
    int listen_fd;
    int wake_fd;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    struct grpc_sconn *conns;
    unsigned n_conns;
};

struct grpc_stream {
    atomic_int refs;
    pthread_mutex_t mu;
    /* --- guarded by mu --- */
    struct grpc_server *srv; /* for wake-ups; NULL once closed */
    bool open;               /* false once the HTTP/2 stream closed */
    uint8_t *q;              /* framed messages not yet handed to HTTP/2: q[q_off..q_len) */
    size_t q_len, q_off, q_cap;
    bool finish; /* a status was set; no more messages */
    int fin_code;
    char *fin_msg;
    int http_status; /* for a trailers-only answer; 200 normally */
    bool dirty;      /* the loop should look at the queue */
    grpc_stream_close_fn close_cb;
    void *close_ud;
    /* --- loop thread only --- */
    struct grpc_sconn *conn;
    struct grpc_stream *next;
    int32_t id;
    size_t max_send;
    size_t max_queue;
    char *path;
    const struct method *m;
    uint64_t deadline; /* now_ms_mono() based; 0 = none */
    size_t hdr_bytes;
    bool method_post, ct_ok, hdr_too_big;
    struct grpc_deframer df;
    uint8_t *req;
    size_t req_len;
    unsigned n_req;
    bool rejected;   /* answered before the request ended; ignore the rest */
    bool dispatched; /* the handler ran */
    bool headers_sent, deferred, closed_cb_done;
};

struct grpc_call {
    struct grpc_stream *st;
    bool replied;
};

struct grpc_sconn {
    struct grpc_server *srv;
    int fd;
    nghttp2_session *h2;
    struct grpc_stream *streams;
    unsigned n_streams;
    const uint8_t *out; /* pending output from nghttp2_session_mem_send */
    size_t out_len;
    bool dead; /* the socket failed or the peer hung up */
    struct grpc_sconn *next;
};

/* ---- streams ------------------------------------------------------------------------------ */

static void wake_locked(struct grpc_stream *st)
{
    st->dirty = true;
    if (st->srv && st->srv->wake_fd >= 0) {
        uint64_t one = 1;
        ssize_t r = write(st->srv->wake_fd, &one, sizeof(one));
        (void)r; /* EAGAIN: the counter is already non-zero, the loop wakes anyway */
    }
}

struct grpc_stream *grpc_stream_ref(struct grpc_stream *st)
{
    atomic_fetch_add(&st->refs, 1);
    return st;
}

void grpc_stream_unref(struct grpc_stream *st)
{
    if (!st || atomic_fetch_sub(&st->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&st->mu);
    free(st->q);
    free(st->fin_msg);
    free(st->path);
    free(st->req);
    grpc_deframer_free(&st->df);
    free(st);
}

static int queue_locked(struct grpc_stream *st, const void *msg, size_t len, bool bounded)
{
    size_t pending = st->q_len - st->q_off;
    size_t need = GRPC_PREFIX_LEN + len;
    if (bounded && pending + need > st->max_queue)
        return -ENOBUFS;
    if (st->q_off > 0 && st->q_off == st->q_len)
        st->q_off = st->q_len = 0;
    if (st->q_len + need > st->q_cap) {
        if (st->q_off > 0) {
            memmove(st->q, st->q + st->q_off, pending);
            st->q_len = pending;
            st->q_off = 0;
        }
        if (st->q_len + need > st->q_cap) {
            size_t cap = st->q_cap ? st->q_cap : 4096;
            while (cap < st->q_len + need)
                cap *= 2;
            uint8_t *nq = realloc(st->q, cap);
            if (!nq)
                return -ENOMEM;
            st->q = nq;
            st->q_cap = cap;
        }
    }
    grpc_frame_prefix(st->q + st->q_len, (uint32_t)len);
    if (len)
        memcpy(st->q + st->q_len + GRPC_PREFIX_LEN, msg, len);
    st->q_len += need;
    return 0;
}

int grpc_stream_send(struct grpc_stream *st, const void *msg, size_t len)
{
    if (len > st->max_send)
        return -EMSGSIZE;
    pthread_mutex_lock(&st->mu);
    int r = -EPIPE;
    if (st->open && !st->finish) {
        r = queue_locked(st, msg, len, true);
        if (r == 0)
            wake_locked(st);
    }
    pthread_mutex_unlock(&st->mu);
    return r;
}

int grpc_stream_send_pb(struct grpc_stream *st, const ProtobufCMessage *msg)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    struct err e = {0};
    int r = grpc_pb_pack(msg, st->max_send, &buf, &len, &e);
    if (r < 0)
        return r;
    r = grpc_stream_send(st, buf, len);
    free(buf);
    return r;
}

static int finish_v(struct grpc_stream *st, int code, int http_status, const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    if (code < 0 || code > GRPC_STATUS_UNAUTHENTICATED)
        code = GRPC_STATUS_UNKNOWN;
    pthread_mutex_lock(&st->mu);
    int r = -EPIPE;
    if (st->open && !st->finish) {
        st->finish = true;
        st->fin_code = code;
        st->fin_msg = strdup(buf);
        st->http_status = http_status;
        wake_locked(st);
        r = 0;
    }
    pthread_mutex_unlock(&st->mu);
    return r;
}

static int GPUOP_PRINTF(4, 5)
    stream_finish_http(struct grpc_stream *st, int code, int http_status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = finish_v(st, code, http_status, fmt, ap);
    va_end(ap);
    return r;
}

int grpc_stream_finish(struct grpc_stream *st, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = finish_v(st, code, 200, fmt ? fmt : "", ap);
    va_end(ap);
    return r;
}

bool grpc_stream_is_open(struct grpc_stream *st)
{
    pthread_mutex_lock(&st->mu);
    bool r = st->open && !st->finish;
    pthread_mutex_unlock(&st->mu);
    return r;
}

const char *grpc_stream_path(const struct grpc_stream *st)
{
    return st->path ? st->path : "";
}

void grpc_stream_set_close_cb(struct grpc_stream *st, grpc_stream_close_fn fn, void *userdata)
{
    pthread_mutex_lock(&st->mu);
    st->close_cb = fn;
    st->close_ud = userdata;
    pthread_mutex_unlock(&st->mu);
}

/* The HTTP/2 stream is gone (or the connection): detach, tell the owner, drop the conn's ref. */
static void stream_closed(struct grpc_stream *st, int code_if_unfinished)
{
    pthread_mutex_lock(&st->mu);
    int code = st->finish ? st->fin_code : code_if_unfinished;
    st->open = false;
    st->srv = NULL;
    grpc_stream_close_fn cb = st->close_cb;
    void *ud = st->close_ud;
    st->close_cb = NULL;
    pthread_mutex_unlock(&st->mu);
    if (st->dispatched && cb)
        cb(st, code, ud);
    grpc_stream_unref(st);
}

/* ---- unary calls -------------------------------------------------------------------------- */

void grpc_call_reply(struct grpc_call *call, const void *msg, size_t len)
{
    if (call->replied)
        return;
    call->replied = true;
    struct grpc_stream *st = call->st;
    if (len > st->max_send) {
        grpc_stream_finish(st, GRPC_STATUS_RESOURCE_EXHAUSTED,
                           "response of %zu bytes is larger than the limit of %zu", len,
                           st->max_send);
        return;
    }
    pthread_mutex_lock(&st->mu);
    int r = st->open && !st->finish ? queue_locked(st, msg, len, false) : -EPIPE;
    pthread_mutex_unlock(&st->mu);
    if (r == -ENOMEM)
        grpc_stream_finish(st, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory for the response");
    else if (r == 0)
        grpc_stream_finish(st, GRPC_STATUS_OK, "%s", "");
}

void grpc_call_reply_pb(struct grpc_call *call, const ProtobufCMessage *msg)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    struct err e = {0};
    if (call->replied)
        return;
    int r = grpc_pb_pack(msg, call->st->max_send, &buf, &len, &e);
    if (r < 0) {
        call->replied = true;
        grpc_stream_finish(call->st,
                           r == -EMSGSIZE ? GRPC_STATUS_RESOURCE_EXHAUSTED : GRPC_STATUS_INTERNAL,
                           "%s", err_msg(&e));
        return;
    }
    grpc_call_reply(call, buf, len);
    free(buf);
}

void grpc_call_fail(struct grpc_call *call, int code, const char *fmt, ...)
{
    if (call->replied)
        return;
    call->replied = true;
    if (code == GRPC_STATUS_OK)
        code = GRPC_STATUS_UNKNOWN;
    va_list ap;
    va_start(ap, fmt);
    finish_v(call->st, code, 200, fmt, ap);
    va_end(ap);
}

const char *grpc_call_path(const struct grpc_call *call)
{
    return grpc_stream_path(call->st);
}

uint64_t grpc_call_deadline_ms(const struct grpc_call *call)
{
    return call->st->deadline;
}

/* ---- server object ------------------------------------------------------------------------ */

static void options_fill(struct grpc_options *o, const struct grpc_options *in)
{
    *o = in ? *in : (struct grpc_options){0};
    if (!o->max_recv_msg)
        o->max_recv_msg = GRPC_DEFAULT_MAX_RECV_MSG;
    if (!o->max_send_msg)
        o->max_send_msg = GRPC_DEFAULT_MAX_SEND_MSG;
    if (!o->max_streams)
        o->max_streams = GRPC_DEFAULT_MAX_STREAMS;
    if (!o->max_header_list)
        o->max_header_list = GRPC_DEFAULT_MAX_HEADER_LIST;
    if (!o->max_connections)
        o->max_connections = GRPC_DEFAULT_MAX_CONNECTIONS;
    if (!o->max_send_queue)
        o->max_send_queue = GRPC_DEFAULT_MAX_SEND_QUEUE;
    if (!o->socket_mode)
        o->socket_mode = 0600;
    if (o->max_recv_msg > UINT32_MAX)
        o->max_recv_msg = UINT32_MAX;
    if (o->max_send_msg > UINT32_MAX)
        o->max_send_msg = UINT32_MAX;
}

/* Shared with grpc-client.c through this one declaration. */
void grpc_options_fill(struct grpc_options *o, const struct grpc_options *in);
void grpc_options_fill(struct grpc_options *o, const struct grpc_options *in)
{
    options_fill(o, in);
}

int grpc_server_new(const struct grpc_options *opts, struct grpc_server **ret, struct err *e)
{
    (void)e;
    struct grpc_server *s = xcalloc(1, sizeof(*s));
    options_fill(&s->o, opts);
    s->listen_fd = -1;
    s->wake_fd = -1;
    atomic_init(&s->stop, false);
    *ret = s;
    return 0;
}

static int add_method(struct grpc_server *s, const char *path, enum method_kind kind,
                      const ProtobufCMessageDescriptor *desc, void *fn, void *ud, struct err *e)
{
    if (s->started)
        return err_set(e, -EBUSY, "gRPC method %s: the server is already started", path);
    if (!path || path[0] != '/' || !strchr(path + 1, '/'))
        return err_set(e, -EINVAL, "gRPC method \"%s\": not a /package.Service/Method path",
                       path ? path : "(null)");
    for (size_t i = 0; i < s->n_methods; i++)
        if (strcmp(s->methods[i].path, path) == 0)
            return err_set(e, -EEXIST, "gRPC method %s: registered twice", path);
    s->methods = xrealloc(s->methods, (s->n_methods + 1) * sizeof(*s->methods));
    struct method *m = &s->methods[s->n_methods++];
    *m = (struct method){.path = xstrdup(path), .kind = kind, .desc = desc, .userdata = ud};
    /* All members of the union are function pointers of the same size; store through one. */
    if (kind == METHOD_UNARY && !desc)
        m->fn.unary = (grpc_unary_fn)fn;
    else if (kind == METHOD_UNARY)
        m->fn.unary_pb = (grpc_unary_pb_fn)fn;
    else if (!desc)
        m->fn.stream = (grpc_stream_fn)fn;
    else
        m->fn.stream_pb = (grpc_stream_pb_fn)fn;
    return 0;
}

int grpc_server_add_unary(struct grpc_server *s, const char *path, grpc_unary_fn fn, void *userdata,
                          struct err *e)
{
    return add_method(s, path, METHOD_UNARY, NULL, (void *)fn, userdata, e);
}

int grpc_server_add_stream(struct grpc_server *s, const char *path, grpc_stream_fn fn,
                           void *userdata, struct err *e)
{
    return add_method(s, path, METHOD_STREAM, NULL, (void *)fn, userdata, e);
}

int grpc_server_add_unary_pb(struct grpc_server *s, const char *path,
                             const ProtobufCMessageDescriptor *req_desc, grpc_unary_pb_fn fn,
                             void *userdata, struct err *e)
{
    if (!req_desc)
        return err_set(e, -EINVAL, "gRPC method %s: no request descriptor", path);
    return add_method(s, path, METHOD_UNARY, req_desc, (void *)fn, userdata, e);
}

int grpc_server_add_stream_pb(struct grpc_server *s, const char *path,
                              const ProtobufCMessageDescriptor *req_desc, grpc_stream_pb_fn fn,
                              void *userdata, struct err *e)
{
    if (!req_desc)
        return err_set(e, -EINVAL, "gRPC method %s: no request descriptor", path);
    return add_method(s, path, METHOD_STREAM, req_desc, (void *)fn, userdata, e);
}

const char *grpc_server_socket_path(const struct grpc_server *s)
{
    return s->socket_path;
}

static const struct method *method_find(const struct grpc_server *s, const char *path)
{
    for (size_t i = 0; i < s->n_methods; i++)
        if (strcmp(s->methods[i].path, path) == 0)
            return &s->methods[i];
    return NULL;
}

/* ---- request handling (nghttp2 callbacks) ------------------------------------------------- */

static struct grpc_stream *stream_new(struct grpc_sconn *c, int32_t id)
{
    struct grpc_stream *st = xcalloc(1, sizeof(*st));
    atomic_init(&st->refs, 1);
    pthread_mutex_init(&st->mu, NULL);
    st->srv = c->srv;
    st->open = true;
    st->http_status = 200;
    st->conn = c;
    st->id = id;
    st->max_send = c->srv->o.max_send_msg;
    st->max_queue = c->srv->o.max_send_queue;
    grpc_deframer_init(&st->df, c->srv->o.max_recv_msg);
    st->next = c->streams;
    c->streams = st;
    c->n_streams++;
    return st;
}

static void stream_unlink(struct grpc_sconn *c, struct grpc_stream *st)
{
    for (struct grpc_stream **p = &c->streams; *p; p = &(*p)->next) {
        if (*p == st) {
            *p = st->next;
            c->n_streams--;
            break;
        }
    }
    st->conn = NULL;
    st->next = NULL;
}

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *frame, void *ud)
{
    struct grpc_sconn *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (c->n_streams >= c->srv->o.max_streams) {
        nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                  NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    struct grpc_stream *st = stream_new(c, frame->hd.stream_id);
    if (nghttp2_session_set_stream_user_data(h2, frame->hd.stream_id, st) != 0) {
        stream_unlink(c, st);
        grpc_stream_unref(st);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    struct grpc_stream *st = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (!st || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* refused stream, or client trailers: nothing we use */
    st->hdr_bytes += namelen + valuelen + 32; /* RFC 9113 6.5.2 accounting */
    if (st->hdr_bytes > st->conn->srv->o.max_header_list) {
        st->hdr_too_big = true;
        return 0;
    }
    if (grpc_name_is(name, namelen, ":path")) {
        free(st->path);
        st->path = xstrndup((const char *)value, valuelen);
    } else if (grpc_name_is(name, namelen, ":method")) {
        st->method_post = valuelen == 4 && memcmp(value, "POST", 4) == 0;
    } else if (grpc_name_is(name, namelen, "content-type")) {
        st->ct_ok = grpc_content_type_ok((const char *)value, valuelen);
    } else if (grpc_name_is(name, namelen, "grpc-timeout")) {
        uint64_t ms = 0;
        if (grpc_timeout_parse((const char *)value, valuelen, &ms) == 0)
            st->deadline = now_ms_mono() + ms;
    }
    return 0;
}

static void reject(struct grpc_stream *st, int code, int http_status, const char *msg)
{
    st->rejected = true;
    stream_finish_http(st, code, http_status, "%s", msg);
}

static void request_headers_done(struct grpc_stream *st)
{
    char msg[512];
    if (st->hdr_too_big) {
        snprintf(msg, sizeof(msg), "request headers larger than %zu bytes",
                 st->conn->srv->o.max_header_list);
        reject(st, GRPC_STATUS_RESOURCE_EXHAUSTED, 431, msg);
    } else if (!st->method_post) {
        reject(st, GRPC_STATUS_UNIMPLEMENTED, 405, "method must be POST");
    } else if (!st->ct_ok) {
        reject(st, GRPC_STATUS_UNKNOWN, 415, "content-type must be application/grpc");
    } else if (!st->path || !(st->m = method_find(st->conn->srv, st->path))) {
        snprintf(msg, sizeof(msg), "unknown method %s", st->path ? st->path : "(none)");
        reject(st, GRPC_STATUS_UNIMPLEMENTED, 200, msg);
    }
}

static int on_request_msg(void *ud, uint8_t *msg, size_t len)
{
    struct grpc_stream *st = ud;
    if (st->n_req++ > 0) {
        free(msg);
        return -1;
    }
    st->req = msg;
    st->req_len = len;
    return 0;
}

size_t grpc_sconn_buffered(const struct grpc_sconn *c)
{
    size_t n = 0;
    for (const struct grpc_stream *st = c->streams; st; st = st->next)
        n += (st->df.msg ? st->df.msg_len : 0) + (st->req ? st->req_len : 0);
    return n;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    struct grpc_sconn *c = ud;
    struct grpc_stream *st = nghttp2_session_get_stream_user_data(h2, id);
    if (!st || st->rejected)
        return 0;
    struct err e = {0};
    int code = grpc_deframer_feed(&st->df, data, len, on_request_msg, st, &e);
    if (code) {
        if (st->n_req > 1)
            reject(st, GRPC_STATUS_UNIMPLEMENTED, 200,
                   "more than one request message: client streaming is not supported");
        else
            reject(st, code, 200, err_msg(&e));
        return 0;
    }
    /* max_recv_msg bounds one message; this bounds a connection's many streams, each of which
     * could otherwise hold a message of that size waiting for the rest of its bytes. */
    size_t limit = GRPC_CONN_RECV_FACTOR * c->srv->o.max_recv_msg;
    if (grpc_sconn_buffered(c) > limit) {
        grpc_deframer_free(&st->df);
        free(st->req);
        st->req = NULL;
        st->req_len = 0;
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "request messages buffered on this connection exceed %zu bytes; retry", limit);
        reject(st, GRPC_STATUS_RESOURCE_EXHAUSTED, 200, msg);
    }
    return 0;
}

static void dispatch(struct grpc_stream *st)
{
    const struct method *m = st->m;
    const uint8_t *req = st->req ? st->req : (const uint8_t *)"";
    ProtobufCMessage *pb = NULL;
    if (m->desc) {
        struct err e = {0};
        if (grpc_pb_unpack(m->desc, req, st->req_len, 0, &pb, &e) < 0) {
            reject(st, GRPC_STATUS_INTERNAL, 200, err_msg(&e));
            return;
        }
    }
    st->dispatched = true;
    if (m->kind == METHOD_UNARY) {
        struct grpc_call call = {.st = st};
        if (m->desc)
            m->fn.unary_pb(&call, pb, m->userdata);
        else
            m->fn.unary(&call, req, st->req_len, m->userdata);
        if (!call.replied)
            grpc_stream_finish(st, GRPC_STATUS_INTERNAL, "%s: handler gave no reply", st->path);
    } else {
        if (m->desc)
            m->fn.stream_pb(st, pb, m->userdata);
        else
            m->fn.stream(st, req, st->req_len, m->userdata);
    }
    if (pb)
        protobuf_c_message_free_unpacked(pb, NULL);
    free(st->req);
    st->req = NULL;
}

static void request_done(struct grpc_stream *st)
{
    if (st->rejected || st->dispatched)
        return;
    if (!grpc_deframer_idle(&st->df))
        reject(st, GRPC_STATUS_INTERNAL, 200, "request ended inside a message");
    else if (st->n_req == 0)
        reject(st, GRPC_STATUS_INTERNAL, 200, "request has no message");
    else
        dispatch(st);
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *ud)
{
    (void)ud;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    struct grpc_stream *st = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (!st)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
        request_headers_done(st);
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
        request_done(st);
    return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *ud)
{
    (void)error_code;
    struct grpc_sconn *c = ud;
    struct grpc_stream *st = nghttp2_session_get_stream_user_data(h2, id);
    if (!st)
        return 0;
    nghttp2_session_set_stream_user_data(h2, id, NULL);
    stream_unlink(c, st);
    stream_closed(st, GRPC_STATUS_CANCELLED);
    return 0;
}

/* ---- responses ---------------------------------------------------------------------------- */

#define NV(n, v)                                                                   \
    {                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE \
    }

/* Fills nva with grpc-status and, when non-empty, the percent-encoded grpc-message. */
static size_t status_nv(nghttp2_nv *nva, char code_buf[16], char *msg_buf, size_t msg_size,
                        int code, const char *msg)
{
    snprintf(code_buf, 16, "%d", code);
    nva[0] = (nghttp2_nv)NV("grpc-status", code_buf);
    if (!msg || !*msg)
        return 1;
    grpc_percent_encode(msg, strlen(msg), msg_buf, msg_size);
    nva[1] = (nghttp2_nv)NV("grpc-message", msg_buf);
    return 2;
}

static ssize_t read_queue(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                          uint32_t *data_flags, nghttp2_data_source *source, void *ud)
{
    (void)ud;
    struct grpc_stream *st = source->ptr;
    pthread_mutex_lock(&st->mu);
    size_t n = st->q_len - st->q_off;
    if (n > length)
        n = length;
    memcpy(buf, st->q + st->q_off, n);
    st->q_off += n;
    bool empty = st->q_off == st->q_len;
    ssize_t r = (ssize_t)n;
    if (empty && st->finish) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        char code_buf[16], msg_buf[3 * 1024];
        nghttp2_nv nva[2];
        size_t nv = status_nv(nva, code_buf, msg_buf, sizeof(msg_buf), st->fin_code, st->fin_msg);
        if (nghttp2_submit_trailer(h2, id, nva, nv) != 0)
            r = NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    } else if (n == 0) {
        st->deferred = true;
        r = NGHTTP2_ERR_DEFERRED;
    }
    pthread_mutex_unlock(&st->mu);
    return r;
}

/* Moves what other threads queued into HTTP/2: response headers, data, trailers. */
static void stream_flush(nghttp2_session *h2, struct grpc_stream *st)
{
    pthread_mutex_lock(&st->mu);
    bool has_data = st->q_len > st->q_off;
    bool fin = st->finish;
    int code = st->fin_code, http_status = st->http_status;
    char *msg = fin && st->fin_msg ? strdup(st->fin_msg) : NULL;
    bool deferred = st->deferred;
    st->deferred = false;
    st->dirty = false;
    pthread_mutex_unlock(&st->mu);

    if (!st->headers_sent && fin && !has_data) {
        /* Trailers-only: one HEADERS frame with the status, ending the stream. */
        char code_buf[16], http_buf[8], msg_buf[3 * 1024];
        snprintf(http_buf, sizeof(http_buf), "%d", http_status);
        nghttp2_nv nva[4] = {NV(":status", http_buf), NV("content-type", "application/grpc")};
        size_t n = 2 + status_nv(nva + 2, code_buf, msg_buf, sizeof(msg_buf), code, msg);
        st->headers_sent = true;
        nghttp2_submit_response(h2, st->id, nva, n, NULL);
    } else if (!st->headers_sent && (has_data || fin)) {
        nghttp2_nv nva[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
        nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_queue};
        st->headers_sent = true;
        nghttp2_submit_response(h2, st->id, nva, ARRAY_SIZE(nva), &prd);
    } else if (st->headers_sent && deferred && (has_data || fin)) {
        nghttp2_session_resume_data(h2, st->id);
    } else if (deferred) {
        pthread_mutex_lock(&st->mu);
        st->deferred = true;
        pthread_mutex_unlock(&st->mu);
    }
    free(msg);
}

/* ---- connections -------------------------------------------------------------------------- */

int grpc_sconn_new(struct grpc_server *s, int fd, struct grpc_sconn **ret, struct err *e)
{
    nghttp2_session_callbacks *cbs = NULL;
    nghttp2_option *opt = NULL;
    if (nghttp2_session_callbacks_new(&cbs) != 0 || nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cbs);
        return err_set(e, -ENOMEM, "gRPC connection: out of memory");
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    nghttp2_option_set_max_send_header_block_length(opt, 64 * 1024);
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);

    struct grpc_sconn *c = xcalloc(1, sizeof(*c));
    c->srv = s;
    c->fd = fd;
    int r = nghttp2_session_server_new2(&c->h2, cbs, c, opt);
    nghttp2_session_callbacks_del(cbs);
    nghttp2_option_del(opt);
    if (r != 0) {
        free(c);
        return err_set(e, -ENOMEM, "gRPC connection: %s", nghttp2_strerror(r));
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s->o.max_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)s->o.max_header_list},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20},
    };
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, ARRAY_SIZE(iv));
    nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, 16 << 20);
    *ret = c;
    return 0;
}

void grpc_sconn_free(struct grpc_sconn *c)
{
    if (!c)
        return;
    /* nghttp2_session_del runs no close callbacks: end the remaining streams ourselves. */
    while (c->streams) {
        struct grpc_stream *st = c->streams;
        nghttp2_session_set_stream_user_data(c->h2, st->id, NULL);
        stream_unlink(c, st);
        stream_closed(st, GRPC_STATUS_CANCELLED);
    }
    nghttp2_session_del(c->h2);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

int grpc_sconn_feed(struct grpc_sconn *c, const uint8_t *data, size_t len)
{
    ssize_t r = nghttp2_session_mem_recv(c->h2, data, len);
    if (r < 0) {
        log_debug(COMPONENT, "closing connection", "reason=\"%s\"", nghttp2_strerror((int)r));
        return -EPROTO;
    }
    return 0;
}

ssize_t grpc_sconn_drain(struct grpc_sconn *c)
{
    for (struct grpc_stream *st = c->streams; st; st = st->next) {
        pthread_mutex_lock(&st->mu);
        bool dirty = st->dirty;
        pthread_mutex_unlock(&st->mu);
        if (dirty)
            stream_flush(c->h2, st);
    }
    ssize_t total = 0;
    for (;;) {
        if (c->out_len == 0) {
            const uint8_t *p = NULL;
            ssize_t n = nghttp2_session_mem_send(c->h2, &p);
            if (n < 0)
                return -EPROTO;
            if (n == 0)
                break;
            c->out = p;
            c->out_len = (size_t)n;
        }
        if (c->fd < 0) {
            total += (ssize_t)c->out_len;
            c->out_len = 0;
            continue;
        }
        ssize_t w = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                break;
            c->dead = true;
            return -EPROTO;
        }
        c->out += w;
        c->out_len -= (size_t)w;
        total += w;
        if (c->out_len > 0)
            break;
    }
    return total;
}

static bool sconn_done(const struct grpc_sconn *c)
{
    return c->dead || (c->out_len == 0 && !nghttp2_session_want_read(c->h2) &&
                       !nghttp2_session_want_write(c->h2));
}

/* ---- loop --------------------------------------------------------------------------------- */

static void sconn_read(struct grpc_sconn *c)
{
    uint8_t buf[16384];
    for (int i = 0; i < 16; i++) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        if (n <= 0) {
            c->dead = true;
            return;
        }
        if (grpc_sconn_feed(c, buf, (size_t)n) < 0) {
            /* nghttp2 queued a GOAWAY where it could; send it, then close. */
            grpc_sconn_drain(c);
            c->dead = true;
            return;
        }
    }
}

static void accept_all(struct grpc_server *s)
{
    for (;;) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                log_warn(COMPONENT, "accept failed", "socket=%s error=\"%s\"", s->socket_path,
                         strerror(errno));
            return;
        }
        if (s->n_conns >= s->o.max_connections) {
            log_warn(COMPONENT, "too many connections, closing new one", "socket=%s limit=%u",
                     s->socket_path, s->o.max_connections);
            close(fd);
            continue;
        }
        struct grpc_sconn *c = NULL;
        struct err e = {0};
        if (grpc_sconn_new(s, fd, &c, &e) < 0) {
            log_warn(COMPONENT, "connection setup failed", "error=\"%s\"", err_msg(&e));
            close(fd);
            continue;
        }
        c->next = s->conns;
        s->conns = c;
        s->n_conns++;
    }
}

/* Ends streams whose deadline passed; returns the poll timeout until the next one (-1: none). */
static int expire_deadlines(struct grpc_server *s)
{
    uint64_t now = now_ms_mono(), next = 0;
    for (struct grpc_sconn *c = s->conns; c; c = c->next) {
        for (struct grpc_stream *st = c->streams; st; st = st->next) {
            if (!st->deadline)
                continue;
            if (st->deadline <= now) {
                st->deadline = 0;
                grpc_stream_finish(st, GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
            } else if (!next || st->deadline < next) {
                next = st->deadline;
            }
        }
    }
    if (!next)
        return -1;
    uint64_t d = next - now;
    return d > 60000 ? 60000 : (int)d;
}

static void conns_reap(struct grpc_server *s)
{
    for (struct grpc_sconn **p = &s->conns; *p;) {
        struct grpc_sconn *c = *p;
        if (!c->dead && grpc_sconn_drain(c) < 0)
            c->dead = true;
        if (sconn_done(c)) {
            *p = c->next;
            s->n_conns--;
            grpc_sconn_free(c);
        } else {
            p = &c->next;
        }
    }
}

static void shutdown_conns(struct grpc_server *s)
{
    for (struct grpc_sconn *c = s->conns; c; c = c->next) {
        for (struct grpc_stream *st = c->streams; st; st = st->next)
            grpc_stream_finish(st, GRPC_STATUS_UNAVAILABLE, "server shutting down");
        nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->h2), NGHTTP2_NO_ERROR,
                              NULL, 0);
    }
    /* Give the goodbyes up to 200 ms to reach the peers, then close regardless. */
    uint64_t until = now_ms_mono() + 200;
    for (;;) {
        bool pending = false;
        for (struct grpc_sconn *c = s->conns; c; c = c->next) {
            if (!c->dead && grpc_sconn_drain(c) < 0)
                c->dead = true;
            if (!c->dead && c->out_len > 0)
                pending = true;
        }
        uint64_t now = now_ms_mono();
        if (!pending || now >= until)
            break;
        struct pollfd pfd[GRPC_DEFAULT_MAX_CONNECTIONS];
        nfds_t n = 0;
        for (struct grpc_sconn *c = s->conns; c && n < ARRAY_SIZE(pfd); c = c->next)
            if (!c->dead && c->out_len > 0)
                pfd[n++] = (struct pollfd){.fd = c->fd, .events = POLLOUT};
        poll(pfd, n, (int)(until - now));
    }
    while (s->conns) {
        struct grpc_sconn *c = s->conns;
        s->conns = c->next;
        s->n_conns--;
        grpc_sconn_free(c);
    }
}

static void *server_loop(void *arg)
{
    struct grpc_server *s = arg;
    size_t cap = s->o.max_connections + 2;
    struct pollfd *pfd = xcalloc(cap, sizeof(*pfd));
    struct grpc_sconn **who = xcalloc(cap, sizeof(*who));
    while (!atomic_load(&s->stop)) {
        int timeout = expire_deadlines(s);
        conns_reap(s);
        nfds_t n = 0;
        pfd[n++] = (struct pollfd){.fd = s->wake_fd, .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        for (struct grpc_sconn *c = s->conns; c && n < cap; c = c->next) {
            short ev = POLLIN;
            if (c->out_len > 0)
                ev |= POLLOUT;
            who[n] = c;
            pfd[n++] = (struct pollfd){.fd = c->fd, .events = ev};
        }
        int r = poll(pfd, n, timeout);
        if (r < 0 && errno != EINTR) {
            log_error(COMPONENT, "poll failed", "error=\"%s\"", strerror(errno));
            break;
        }
        if (r <= 0)
            continue;
        if (pfd[0].revents) {
            uint64_t v;
            ssize_t rr = read(s->wake_fd, &v, sizeof(v));
            (void)rr;
        }
        for (nfds_t i = 2; i < n; i++)
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
                sconn_read(who[i]);
        if (pfd[1].revents & POLLIN)
            accept_all(s);
    }
    shutdown_conns(s);
    free(pfd);
    free(who);
    return NULL;
}

int grpc_server_start(struct grpc_server *s, const char *socket_path, struct err *e)
{
    if (s->started)
        return err_set(e, -EBUSY, "gRPC server on %s: already started", s->socket_path);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(socket_path) >= sizeof(sa.sun_path))
        return err_set(e, -ENAMETOOLONG, "gRPC socket \"%s\": path longer than %zu bytes",
                       socket_path, sizeof(sa.sun_path) - 1);
    memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);

    struct stat sb;
    if (lstat(socket_path, &sb) == 0) {
        if (!S_ISSOCK(sb.st_mode))
            return err_set(e, -EEXIST, "gRPC socket \"%s\": exists and is not a socket",
                           socket_path);
        if (unlink(socket_path) < 0 && errno != ENOENT)
            return err_errno(e, -errno, "gRPC socket \"%s\": remove stale socket", socket_path);
    }
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return err_errno(e, -errno, "gRPC socket \"%s\": socket", socket_path);
    /* Bind under a restrictive umask so the socket is never briefly wider than asked. */
    mode_t old = umask(0777 & ~s->o.socket_mode);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    int saved = errno;
    umask(old);
    if (r < 0)
        return err_errno(e, -saved, "gRPC socket \"%s\": bind", socket_path);
    if (chmod(socket_path, s->o.socket_mode) < 0 || listen(fd, 64) < 0) {
        r = -errno;
        unlink(socket_path);
        return err_errno(e, r, "gRPC socket \"%s\": listen", socket_path);
    }
    if (stat(socket_path, &sb) == 0) {
        s->sock_dev = sb.st_dev;
        s->sock_ino = sb.st_ino;
    }
    _cleanup_close_ int wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wfd < 0) {
        r = -errno;
        unlink(socket_path);
        return err_errno(e, r, "gRPC server \"%s\": eventfd", socket_path);
    }
    s->listen_fd = fd;
    s->wake_fd = wfd;
    s->socket_path = xstrdup(socket_path);
    r = pthread_create(&s->thread, NULL, server_loop, s);
    if (r != 0) {
        s->listen_fd = s->wake_fd = -1;
        unlink(socket_path);
        free(s->socket_path);
        s->socket_path = NULL;
        return err_errno(e, -r, "gRPC server \"%s\": start thread", socket_path);
    }
    fd = wfd = -1;
    s->started = true;
    return 0;
}

void grpc_server_free(struct grpc_server *s)
{
    if (!s)
        return;
    if (s->started) {
        atomic_store(&s->stop, true);
        uint64_t one = 1;
        ssize_t r = write(s->wake_fd, &one, sizeof(one));
        (void)r;
        pthread_join(s->thread, NULL);
        close(s->listen_fd);
        close(s->wake_fd);
        /* Unlink the socket only if it is still ours: a new server may have bound the path. */
        struct stat sb;
        if (lstat(s->socket_path, &sb) == 0 && sb.st_dev == s->sock_dev && sb.st_ino == s->sock_ino)
            unlink(s->socket_path);
    }
    while (s->conns) { /* connections made by tests without a thread */
        struct grpc_sconn *c = s->conns;
        s->conns = c->next;
        grpc_sconn_free(c);
    }
    for (size_t i = 0; i < s->n_methods; i++)
        free(s->methods[i].path);
    free(s->methods);
    free(s->socket_path);
    free(s);
}
