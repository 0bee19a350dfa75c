/* SPDX-License-Identifier: Apache-2.0 */
/* The shell's side of a proxied response (pods/log to a kubelet process): a plain HTTP/1.0 GET
 * with deadlines on connect and on the response headers, the body streamed to the client until
 * either side closes. HTTP/1.0, so the kubelet never answers chunked: the body ends at the close
 * (or at Content-Length). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kubesim-proxy.h"

#define CONNECT_MS  5000
#define HEADERS_MS  10000
#define HEADERS_MAX (64 * 1024)
#define ERROR_MAX   50000
/* a log that is not followed and sends nothing this long is cut */
#define IDLE_MS 60000

struct upstream {
    int fd;
    int client_fd; /* -1: unknown */
    char *buf;     /* body bytes that came with the headers */
    size_t len, off;
    int64_t left; /* Content-Length still to come; -1: until the close */
    bool follow;
};

/* Go's wording of a dial error, lowercase: "connect: connection refused". */
static void dial_text(char *out, size_t n, const struct ksim_proxy *p, const char *op, int err)
{
    char e[128];
    snprintf(e, sizeof(e), "%s", err == ETIMEDOUT ? "i/o timeout" : strerror(err));
    if (err != ETIMEDOUT && e[0])
        e[0] = (char)tolower((unsigned char)e[0]);
    if (op)
        snprintf(out, n, "dial tcp %s:%u: %s: %s", p->host, (unsigned)p->port, op, e);
    else
        snprintf(out, n, "dial tcp %s:%u: %s", p->host, (unsigned)p->port, e);
}

static int dial(const struct ksim_proxy *p, char *why, size_t why_n)
{
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, p->host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(p->port);
        sl = sizeof(*v4);
    } else if (inet_pton(AF_INET6, p->host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(p->port);
        sl = sizeof(*v6);
    } else {
        snprintf(why, why_n, "dial tcp: lookup %s: no such host", p->host);
        return -EINVAL;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        dial_text(why, why_n, p, "socket", errno);
        return -errno;
    }
    if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
        int r = errno;
        close(fd);
        dial_text(why, why_n, p, "connect", r);
        return -r;
    }
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    int pr = poll(&pfd, 1, CONNECT_MS);
    int soerr = 0;
    socklen_t el = sizeof(soerr);
    if (pr <= 0) {
        close(fd);
        dial_text(why, why_n, p, NULL, ETIMEDOUT);
        return -ETIMEDOUT;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el) < 0 || soerr) {
        close(fd);
        dial_text(why, why_n, p, "connect", soerr ? soerr : errno);
        return -(soerr ? soerr : EIO);
    }
    return fd;
}

static int write_all(int fd, const char *s, size_t n, uint64_t deadline)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EAGAIN) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            if (poll(&pfd, 1, deadline_poll_ms(deadline)) <= 0)
                return -ETIMEDOUT;
            continue;
        }
        if (w < 0)
            return errno == EINTR ? 0 : -errno;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads into b until pred says it has enough, the peer closes (0) or the deadline passes. */
static int read_until(int fd, struct sbuf *b, uint64_t deadline, bool (*enough)(struct sbuf *))
{
    char tmp[16384];
    while (!enough(b)) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, deadline_poll_ms(deadline));
        if (pr == 0)
            return -ETIMEDOUT;
        if (pr < 0 && errno != EINTR)
            return -errno;
        ssize_t r = recv(fd, tmp, sizeof(tmp), 0);
        if (r == 0)
            return 0;
        if (r < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return -errno;
        }
        if (sbuf_append(b, tmp, (size_t)r) < 0)
            return -ENOBUFS;
    }
    return 1;
}

static bool have_headers(struct sbuf *b)
{
    return b->len >= 4 && memmem(b->data, b->len, "\r\n\r\n", 4) != NULL;
}

static bool have_error_body(struct sbuf *b)
{
    return b->len >= ERROR_MAX;
}

static ssize_t body_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    struct upstream *u = cls;
    if (u->left == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (u->off < u->len) {
        size_t n = u->len - u->off;
        if (n > max)
            n = max;
        if (u->left >= 0 && (int64_t)n > u->left)
            n = (size_t)u->left;
        memcpy(out, u->buf + u->off, n);
        u->off += n;
        if (u->left > 0)
            u->left -= (int64_t)n;
        return (ssize_t)n;
    }
    uint64_t idle = deadline_after(IDLE_MS);
    for (;;) {
        struct pollfd pfd[2] = {{.fd = u->fd, .events = POLLIN},
                                {.fd = u->client_fd, .events = POLLRDHUP}};
        int pr = poll(pfd, u->client_fd >= 0 ? 2 : 1, 1000);
        if (pr < 0 && errno != EINTR)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (pr > 0 && u->client_fd >= 0 && (pfd[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
            return MHD_CONTENT_READER_END_WITH_ERROR; /* the client went away */
        if (pr > 0 && pfd[0].revents) {
            if (max > 65536)
                max = 65536;
            if (u->left >= 0 && (int64_t)max > u->left)
                max = (size_t)u->left;
            ssize_t r = recv(u->fd, out, max, 0);
            if (r == 0)
                return MHD_CONTENT_READER_END_OF_STREAM;
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (r < 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
            if (u->left > 0)
                u->left -= r;
            return r;
        }
        if (!u->follow && deadline_left_ms(idle) == 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static void body_free(void *cls)
{
    struct upstream *u = cls;
    close(u->fd);
    free(u->buf);
    free(u);
}

static enum MHD_Result send_status(struct MHD_Connection *c, struct ksim_response *r, int *code)
{
    *code = r->code;
    char *b = steal_ptr(&r->body);
    size_t len = r->body_len;
    struct MHD_Response *mr = MHD_create_response_from_buffer(len, b, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(mr, "Content-Type", "application/json");
    MHD_add_response_header(mr, "Cache-Control", "no-cache, private");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->code, mr);
    MHD_destroy_response(mr);
    ksim_response_free(r);
    return ret;
}

enum MHD_Result ks_proxy_respond(struct MHD_Connection *c, const struct ksim_proxy *p,
                                 int client_fd, int *ret_code)
{
    struct ksim_response r;
    char why[512];
    int fd = dial(p, why, sizeof(why));
    if (fd < 0) {
        ksim_proxy_dial_error(p, why, &r);
        return send_status(c, &r, ret_code);
    }
    uint64_t deadline = deadline_after(HEADERS_MS);
    _cleanup_free_ char *req = xasprintf("GET %s HTTP/1.0\r\nHost: %s:%u\r\nUser-Agent: kubesim\r\n"
                                         "Accept: */*\r\n\r\n",
                                         p->path, p->host, (unsigned)p->port);
    struct sbuf b;
    sbuf_init(&b, HEADERS_MAX + ERROR_MAX);
    int rr = write_all(fd, req, strlen(req), deadline);
    if (rr >= 0)
        rr = read_until(fd, &b, deadline, have_headers);
    int code = 0;
    int64_t left = -1;
    size_t hlen = 0;
    int hr = rr < 0 ? rr : ksim_proxy_head_parse(b.data, b.len, &code, &left, &hlen);
    if (hr < 0) {
        close(fd);
        sbuf_free(&b);
        snprintf(why, sizeof(why), "%s",
                 hr == -ETIMEDOUT ? "net/http: timeout awaiting response headers"
                                  : "malformed HTTP response");
        ksim_proxy_dial_error(p, why, &r);
        return send_status(c, &r, ret_code);
    }
    if (code < 200 || code > 299) {
        /* the error body, as much of it as the API server reads */
        if (left < 0 || (int64_t)(b.len - hlen) < left)
            (void)read_until(fd, &b, deadline_after(HEADERS_MS), have_error_body);
        close(fd);
        size_t blen = b.len - hlen;
        if (left >= 0 && (int64_t)blen > left)
            blen = (size_t)left;
        ksim_proxy_error(p, code, b.data + hlen, blen, &r);
        sbuf_free(&b);
        return send_status(c, &r, ret_code);
    }
    struct upstream *u = xcalloc(1, sizeof(*u));
    u->fd = fd;
    u->client_fd = client_fd;
    u->len = b.len - hlen;
    u->buf = xmalloc(u->len ? u->len : 1);
    memcpy(u->buf, b.data + hlen, u->len);
    u->left = left;
    u->follow = p->follow;
    sbuf_free(&b);
    struct MHD_Response *mr =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, body_read, u, body_free);
    MHD_add_response_header(mr, "Content-Type", "text/plain");
    MHD_add_response_header(mr, "Cache-Control", "no-cache, private");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)code, mr);
    MHD_destroy_response(mr);
    *ret_code = code;
    return ret;
}
