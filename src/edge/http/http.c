/* SPDX-License-Identifier: Apache-2.0 */
#include "http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>

#define COMPONENT "http"

#define HTTP_DEFAULT_MAX_CONNECTIONS 4096
#define HTTP_DEFAULT_PER_IP_LIMIT    128
#define HTTP_DEFAULT_HEADER_MS       5000
#define HTTP_DEFAULT_RESPONSE_MS     30000
#define HTTP_WATCHDOG_TICK_MS        100
#define HTTP_LOG_BURST               10 /* libmicrohttpd lines per second before suppression */

/*
 * One open connection, as the watchdog sees it. libmicrohttpd's own timeout is an idle timeout
 * (any byte restarts it), which a client trickling a byte a second never trips; the watchdog
 * instead bounds each phase by wall time: request headers complete within header_ms of the
 * connection opening (or of the previous response on a keep-alive connection, which bounds
 * idle keep-alive too), and a response is delivered within response_ms.
 */
struct http_conn {
    struct http_conn *prev, *next;
    int fd;
    bool in_request; /* headers complete, response pending */
    bool cut;        /* shut down by the watchdog; libmicrohttpd closes it next */
    uint64_t phase_start_ms;
};

struct http_server {
    struct MHD_Daemon *daemon;
    int fd;
    unsigned port;
    size_t n_routes;
    struct http_route *routes;
    char **route_paths;

    pthread_mutex_t lock; /* conns */
    struct http_conn *conns;
    unsigned header_ms, response_ms;
    int wake_fd; /* eventfd: stops the watchdog */
    pthread_t watchdog;
    bool watchdog_started;
    atomic_ulong cut_total;

    pthread_mutex_t log_lock;
    uint64_t log_window_ms;
    unsigned log_lines, log_suppressed;
};

/* ---- responses -------------------------------------------------------------------------- */

void http_response_copy(struct http_response *resp, unsigned status, const char *content_type,
                        const char *body, size_t len)
{
    char *copy = xmalloc(len + 1);
    memcpy(copy, body, len);
    copy[len] = '\0';
    http_response_take(resp, status, content_type, copy, len);
}

void http_response_static(struct http_response *resp, unsigned status, const char *content_type,
                          const char *body)
{
    resp->status = status;
    resp->content_type = content_type;
    resp->body = body;
    resp->body_len = strlen(body);
    resp->release = NULL;
    resp->release_cls = NULL;
    resp->trailer_len = 0;
}

void http_response_take(struct http_response *resp, unsigned status, const char *content_type,
                        char *body, size_t len)
{
    resp->status = status;
    resp->content_type = content_type;
    resp->body = body;
    resp->body_len = len;
    resp->release = free;
    resp->release_cls = body;
    resp->trailer_len = 0;
}

static void response_release(struct http_response *r)
{
    if (r->release)
        r->release(r->release_cls);
    r->release = NULL;
}

/* ---- serving ---------------------------------------------------------------------------- */

static enum MHD_Result queue_text(struct MHD_Connection *c, unsigned status, const char *text,
                                  const char *allow)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, HTTP_CT_TEXT);
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

struct release_ctx {
    void (*release)(void *cls);
    void *cls;
    char trailer[]; /* the response's trailer, copied */
};

static void release_trampoline(void *p)
{
    struct release_ctx *ctx = p;
    if (ctx->release)
        ctx->release(ctx->cls);
    free(ctx);
}

/* ---- per-connection deadlines ------------------------------------------------------------ */

static struct http_conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void conn_request_started(struct http_server *s, struct MHD_Connection *c)
{
    struct http_conn *hc = conn_of(c);
    if (!hc)
        return;
    pthread_mutex_lock(&s->lock);
    hc->in_request = true;
    hc->phase_start_ms = now_ms_mono();
    pthread_mutex_unlock(&s->lock);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct http_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct http_conn *hc = xcalloc(1, sizeof(*hc));
        hc->fd = ci ? ci->connect_fd : -1;
        hc->phase_start_ms = now_ms_mono();
        pthread_mutex_lock(&s->lock);
        hc->next = s->conns;
        if (s->conns)
            s->conns->prev = hc;
        s->conns = hc;
        pthread_mutex_unlock(&s->lock);
        *socket_context = hc;
        return;
    }
    /* Closed: libmicrohttpd closes the socket only after this returns, so the watchdog, which
     * shuts sockets down under the same lock, never touches a descriptor reused elsewhere. */
    struct http_conn *hc = *socket_context;
    if (!hc)
        return;
    pthread_mutex_lock(&s->lock);
    if (hc->prev)
        hc->prev->next = hc->next;
    else
        s->conns = hc->next;
    if (hc->next)
        hc->next->prev = hc->prev;
    pthread_mutex_unlock(&s->lock);
    free(hc);
    *socket_context = NULL;
}

/* A request is done (answered, or the client went away): the next one gets a fresh header
 * deadline, which is also how long an idle keep-alive connection may stay. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct http_server *s = cls;
    (void)con_cls;
    (void)toe;
    struct http_conn *hc = conn_of(c);
    if (!hc)
        return;
    pthread_mutex_lock(&s->lock);
    hc->in_request = false;
    hc->phase_start_ms = now_ms_mono();
    pthread_mutex_unlock(&s->lock);
}

static void *watchdog_main(void *arg)
{
    struct http_server *s = arg;
    for (;;) {
        struct pollfd p = {.fd = s->wake_fd, .events = POLLIN};
        int r = poll(&p, 1, HTTP_WATCHDOG_TICK_MS);
        if (r > 0)
            break;
        uint64_t now = now_ms_mono();
        unsigned cut = 0;
        pthread_mutex_lock(&s->lock);
        for (struct http_conn *hc = s->conns; hc; hc = hc->next) {
            uint64_t limit = hc->in_request ? s->response_ms : s->header_ms;
            if (hc->cut || hc->fd < 0 || now - hc->phase_start_ms <= limit)
                continue;
            /* Counted first, so whoever sees the close also sees the count. */
            atomic_fetch_add(&s->cut_total, 1);
            /* Wakes libmicrohttpd's poll on the socket; it then closes the connection. */
            shutdown(hc->fd, SHUT_RDWR);
            hc->cut = true;
            cut++;
        }
        pthread_mutex_unlock(&s->lock);
        if (cut)
            log_debug(COMPONENT, "closed connections past their deadline", "count=%u", cut);
    }
    return NULL;
}

/* ---- libmicrohttpd's messages through the project's log ----------------------------------- */

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct http_server *s = cls;
    char msg[256];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    for (char *p = msg; *p; p++)
        if (*p == '"' || *p == '\n' || *p == '\\')
            *p = '\'';
    /* Under a connection storm libmicrohttpd says the same thing per connection: a burst per
     * second gets through, the rest is counted and reported with the next line. */
    uint64_t now = now_ms_mono();
    unsigned suppressed = 0;
    pthread_mutex_lock(&s->log_lock);
    if (now - s->log_window_ms >= 1000) {
        s->log_window_ms = now;
        s->log_lines = 0;
    }
    bool emit = s->log_lines < HTTP_LOG_BURST;
    if (emit) {
        s->log_lines++;
        suppressed = s->log_suppressed;
        s->log_suppressed = 0;
    } else {
        s->log_suppressed++;
    }
    pthread_mutex_unlock(&s->log_lock);
    if (!emit)
        return;
    if (suppressed)
        log_warn(COMPONENT, "libmicrohttpd", "msg=\"%s\" suppressed=%u", msg, suppressed);
    else
        log_warn(COMPONENT, "libmicrohttpd", "msg=\"%s\"", msg);
}

/* Room for max_connections descriptors: the soft limit is raised as far as the hard limit
 * allows. Returns how many connections fit. */
static unsigned fit_fd_limit(unsigned want)
{
    const rlim_t reserve = 64; /* the process's other files, sockets, the listener */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return want;
    rlim_t need = (rlim_t)want + reserve;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        rlim_t to = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
        struct rlimit nrl = {.rlim_cur = to, .rlim_max = rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &nrl) == 0)
            rl.rlim_cur = to;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        unsigned fit = rl.rlim_cur > reserve * 2 ? (unsigned)(rl.rlim_cur - reserve) : 64;
        log_warn(COMPONENT, "open-file limit caps HTTP connections", "wanted=%u limit=%u", want,
                 fit);
        return fit;
    }
    return want;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct http_server *s = cls;
    (void)version;
    (void)upload_data;

    /* First call per request: headers only. A request with a body is refused outright. */
    if (*con_cls == NULL) {
        *con_cls = (void *)1;
        conn_request_started(s, conn);
        const char *cl =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *te =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
        if ((cl && strcmp(cl, "0") != 0) || te)
            return queue_text(conn, MHD_HTTP_CONTENT_TOO_LARGE, "request body not accepted\n",
                              NULL);
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
            return queue_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n",
                              "GET, HEAD");
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        *upload_data_size = 0; /* discard; the answer is already queued */
        return MHD_YES;
    }

    const struct http_route *route = NULL;
    for (size_t i = 0; i < s->n_routes; i++)
        if (strcmp(s->routes[i].path, url) == 0) {
            route = &s->routes[i];
            break;
        }
    if (!route)
        return queue_text(conn, MHD_HTTP_NOT_FOUND, "not found\n", NULL);

    const char *accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    struct http_request req = {.method = method, .path = url, .accept = accept ? accept : ""};
    struct http_response resp;
    resp.status = 0;
    resp.content_type = NULL;
    resp.body = NULL;
    resp.body_len = 0;
    resp.release = NULL;
    resp.release_cls = NULL;
    resp.trailer_len = 0;
    int r = route->handler(&req, &resp, route->userdata);
    if (r < 0 || !resp.content_type || resp.status < 100 || resp.status > 599) {
        response_release(&resp);
        return queue_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal error\n", NULL);
    }

    /* Body and trailer go out as two I/O vectors: the body is never copied. */
    if (resp.trailer_len > sizeof(resp.trailer))
        resp.trailer_len = sizeof(resp.trailer);
    struct release_ctx *ctx = xmalloc(sizeof(*ctx) + resp.trailer_len);
    ctx->release = resp.release;
    ctx->cls = resp.release_cls;
    memcpy(ctx->trailer, resp.trailer, resp.trailer_len);
    struct MHD_IoVec iov[2] = {{resp.body, resp.body_len}, {ctx->trailer, resp.trailer_len}};
    struct MHD_Response *mr =
        MHD_create_response_from_iovec(iov, resp.trailer_len ? 2 : 1, release_trampoline, ctx);
    if (!mr) {
        release_trampoline(ctx);
        return MHD_NO;
    }
    MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, resp.content_type);
    enum MHD_Result ret = MHD_queue_response(conn, resp.status, mr);
    MHD_destroy_response(mr);
    return ret;
}

int http_parse_listen(const char *listen, char **ret_host, unsigned *ret_port, struct err *e)
{
    if (!listen || !*listen)
        return err_set(e, -EINVAL, "listen address is empty");
    const char *colon;
    _cleanup_free_ char *host = NULL;
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close || close[1] != ':')
            return err_set(e, -EINVAL, "listen address \"%s\": expected [v6-address]:port", listen);
        host = xstrndup(listen + 1, (size_t)(close - listen - 1));
        colon = close + 1;
    } else {
        colon = strrchr(listen, ':');
        if (!colon)
            return err_set(e, -EINVAL, "listen address \"%s\": expected host:port or :port",
                           listen);
        if (colon != listen)
            host = xstrndup(listen, (size_t)(colon - listen));
        if (host && strchr(host, ':'))
            return err_set(e, -EINVAL,
                           "listen address \"%s\": IPv6 addresses need brackets, [addr]:port",
                           listen);
    }
    unsigned port;
    if (parse_uint(colon + 1, &port) < 0 || port > 65535)
        return err_set(e, -EINVAL, "listen address \"%s\": port \"%s\" is not 0-65535", listen,
                       colon + 1);
    if (host && !*host)
        return err_set(e, -EINVAL, "listen address \"%s\": empty host", listen);
    *ret_host = steal_ptr(&host);
    *ret_port = port;
    return 0;
}

static int bind_one(const struct addrinfo *p, bool wildcard)
{
    _cleanup_close_ int fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (p->ai_family == AF_INET6 && wildcard)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, p->ai_addr, p->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0)
        return -errno;
    return steal_fd(&fd);
}

static unsigned bound_port(int fd, unsigned fallback)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return fallback;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return fallback;
}

static int listen_socket(const char *listen, int *ret_fd, unsigned *ret_port, struct err *e)
{
    _cleanup_free_ char *host = NULL;
    unsigned port;
    int r = http_parse_listen(listen, &host, &port, e);
    if (r < 0)
        return r;

    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    char portbuf[8];
    snprintf(portbuf, sizeof(portbuf), "%u", port);
    struct addrinfo *ai = NULL;
    int gr = getaddrinfo(host, portbuf, &hints, &ai);
    if (gr != 0)
        return err_set(e, -EADDRNOTAVAIL, "listen address \"%s\": %s", listen, gai_strerror(gr));
    /* For the wildcard prefer IPv6 with dual stack so both families are served. */
    int last = -EADDRNOTAVAIL;
    for (int pass = 0; pass < 2; pass++) {
        for (struct addrinfo *p = ai; p; p = p->ai_next) {
            bool v6_first = !host && p->ai_family == AF_INET6;
            if (pass == 0 ? !v6_first : v6_first)
                continue;
            int fd = bind_one(p, !host);
            if (fd < 0) {
                last = fd;
                continue;
            }
            freeaddrinfo(ai);
            *ret_fd = fd;
            *ret_port = bound_port(fd, port);
            return 0;
        }
    }
    freeaddrinfo(ai);
    return err_errno(e, last ? last : -EADDRNOTAVAIL, "listen on \"%s\"", listen);
}

int http_server_new(const struct http_config *cfg, struct http_server **ret, struct err *e)
{
    for (size_t i = 0; i < cfg->n_routes; i++)
        if (!cfg->routes[i].path || cfg->routes[i].path[0] != '/' || !cfg->routes[i].handler)
            return err_set(e, -EINVAL, "http route %zu: path must start with / and have a handler",
                           i);

    struct http_server *s = xcalloc(1, sizeof(*s));
    s->fd = -1;
    s->wake_fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->log_lock, NULL);
    int r = listen_socket(cfg->listen, &s->fd, &s->port, e);
    if (r < 0) {
        http_server_free(s);
        return r;
    }
    s->n_routes = cfg->n_routes;
    s->routes = xcalloc(cfg->n_routes ? cfg->n_routes : 1, sizeof(*s->routes));
    s->route_paths = xcalloc(cfg->n_routes ? cfg->n_routes : 1, sizeof(char *));
    for (size_t i = 0; i < cfg->n_routes; i++) {
        s->routes[i] = cfg->routes[i];
        s->route_paths[i] = xstrdup(cfg->routes[i].path);
        s->routes[i].path = s->route_paths[i];
    }

    s->header_ms = cfg->header_timeout_ms ? cfg->header_timeout_ms : HTTP_DEFAULT_HEADER_MS;
    s->response_ms = cfg->response_timeout_ms ? cfg->response_timeout_ms : HTTP_DEFAULT_RESPONSE_MS;
    s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->wake_fd < 0) {
        r = err_errno(e, -errno, "listen on \"%s\": eventfd", cfg->listen);
        http_server_free(s);
        return r;
    }

    unsigned threads = cfg->threads ? cfg->threads : 1;
    unsigned max_conn =
        fit_fd_limit(cfg->max_connections ? cfg->max_connections : HTTP_DEFAULT_MAX_CONNECTIONS);
    unsigned per_ip = cfg->per_ip_limit ? cfg->per_ip_limit : HTTP_DEFAULT_PER_IP_LIMIT;
    /* The idle timeout is a backstop behind the watchdog's deadlines (whole seconds). */
    unsigned idle_s = cfg->timeout_s ? cfg->timeout_s : (s->header_ms + 999) / 1000;
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    struct MHD_OptionItem opts[8];
    size_t n = 0;
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, s->fd, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, max_conn, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, idle_s, NULL};
    opts[n++] = (struct MHD_OptionItem){
        MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (intptr_t)(cfg->request_limit ? cfg->request_limit : 16 * 1024), NULL};
    if (threads > 1)
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, threads, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};

    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
                                 on_mhd_log, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_ARRAY,
                                 opts, MHD_OPTION_END);
    if (s->daemon) {
        int pr = pthread_create(&s->watchdog, NULL, watchdog_main, s);
        if (pr != 0) {
            r = err_errno(e, -pr, "listen on \"%s\": start the connection watchdog", cfg->listen);
            http_server_free(s);
            return r;
        }
        s->watchdog_started = true;
    }
    if (!s->daemon) {
        r = err_set(e, -EIO, "listen on \"%s\": libmicrohttpd failed to start", cfg->listen);
        http_server_free(s);
        return r;
    }
    *ret = s;
    return 0;
}

void http_server_free(struct http_server *s)
{
    if (!s)
        return;
    if (s->watchdog_started) {
        uint64_t one = 1;
        if (write(s->wake_fd, &one, sizeof(one)) < 0)
            log_warn(COMPONENT, "cannot wake the connection watchdog", "errno=%d", errno);
        pthread_join(s->watchdog, NULL);
    }
    /* A started daemon owns the listening socket: MHD_stop_daemon closes it, and closing it
     * again here could close a descriptor another thread has just opened. */
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    else if (s->fd >= 0)
        close(s->fd);
    if (s->wake_fd >= 0)
        close(s->wake_fd);
    for (size_t i = 0; i < s->n_routes; i++)
        free(s->route_paths[i]);
    free(s->route_paths);
    free(s->routes);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->log_lock);
    free(s);
}

unsigned long http_server_deadline_closes(const struct http_server *s)
{
    return atomic_load(&((struct http_server *)s)->cut_total);
}

unsigned http_server_port(const struct http_server *s)
{
    return s->port;
}
