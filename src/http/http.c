/* SPDX-License-Identifier: Apache-2.0 */
#include "http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

struct http_server {
    struct MHD_Daemon *daemon;
    int fd;
    unsigned port;
    size_t n_routes;
    struct http_route *routes;
    char **route_paths;
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
    if (bind(fd, p->ai_addr, p->ai_addrlen) < 0 || listen(fd, 128) < 0)
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
    int r = listen_socket(cfg->listen, &s->fd, &s->port, e);
    if (r < 0) {
        free(s);
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

    unsigned threads = cfg->threads ? cfg->threads : 1;
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    struct MHD_OptionItem opts[8];
    size_t n = 0;
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, s->fd, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
                                        cfg->max_connections ? cfg->max_connections : 64, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT,
                                        cfg->timeout_s ? cfg->timeout_s : 30, NULL};
    opts[n++] = (struct MHD_OptionItem){
        MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (intptr_t)(cfg->request_limit ? cfg->request_limit : 16 * 1024), NULL};
    if (threads > 1)
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, threads, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};

    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_ARRAY, opts,
                                 MHD_OPTION_END);
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
    /* A started daemon owns the listening socket: MHD_stop_daemon closes it, and closing it
     * again here could close a descriptor another thread has just opened. */
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    else if (s->fd >= 0)
        close(s->fd);
    for (size_t i = 0; i < s->n_routes; i++)
        free(s->route_paths[i]);
    free(s->route_paths);
    free(s->routes);
    free(s);
}

unsigned http_server_port(const struct http_server *s)
{
    return s->port;
}
