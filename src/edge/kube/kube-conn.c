/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connections to the API server: URL splitting, name resolution, a non-blocking connect with a
 * deadline, an HTTP proxy's CONNECT tunnel, and TLS with GnuTLS (linked directly: libmicrohttpd
 * maps it anyway). Every wait polls the socket and the stop token's fd, and ends at the deadline.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "kube-internal.h"

/* ---- URLs (pure) --------------------------------------------------------------------------- */

/* url for an error message: the user info of a URL (user:password@) never reaches a message, a
 * log line or a support bundle, even in the error that refuses it. */
const char *kube_url_shown(const char *url, char *buf, size_t n)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t alen = strcspn(p, "/?#");
    const char *at = NULL;
    for (const char *q = p; q < p + alen; q++)
        if (*q == '@')
            at = q;
    if (!at)
        return url;
    snprintf(buf, n, "%.*s<user info removed>%s", (int)(p - url), url, at);
    return buf;
}

int kube_url_split(const char *url, struct kube_url *ret, struct err *e)
{
    char shown_buf[320];
    const char *shown = kube_url_shown(url, shown_buf, sizeof(shown_buf));
    struct kube_url u = {0};
    const char *p;
    if (strncasecmp(url, "https://", 8) == 0) {
        u.tls = true;
        p = url + 8;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        p = url + 7;
    } else {
        return err_set(e, -EINVAL, "URL \"%.200s\": not http:// or https://", shown);
    }
    size_t alen = strcspn(p, "/?#");
    const char *path = p + alen;
    if (*path == '?' || *path == '#' || strpbrk(path, "?#"))
        return err_set(e, -EINVAL, "URL \"%.200s\": a query or fragment in a server URL", shown);
    if (alen == 0 || alen >= sizeof(u.authority))
        return err_set(e, -EINVAL, "URL \"%.200s\": no host", shown);
    if (memchr(p, '@', alen))
        return err_set(e, -EINVAL, "URL \"%.200s\": user info in a server URL", shown);
    memcpy(u.authority, p, alen);
    u.authority[alen] = '\0';
    const char *a = u.authority, *port = NULL;
    size_t hlen;
    if (a[0] == '[') {
        const char *close = strchr(a, ']');
        if (!close)
            return err_set(e, -EINVAL, "URL \"%.200s\": unclosed [", shown);
        hlen = (size_t)(close - a - 1);
        if (hlen == 0 || hlen >= sizeof(u.host))
            return err_set(e, -EINVAL, "URL \"%.200s\": bad IPv6 address", shown);
        memcpy(u.host, a + 1, hlen);
        u.host[hlen] = '\0';
        struct in6_addr a6;
        if (inet_pton(AF_INET6, u.host, &a6) != 1)
            return err_set(e, -EINVAL, "URL \"%.200s\": bad IPv6 address", shown);
        u.ip = true;
        if (close[1] == ':')
            port = close + 2;
        else if (close[1] != '\0')
            return err_set(e, -EINVAL, "URL \"%.200s\": junk after ]", shown);
    } else {
        const char *colon = strchr(a, ':');
        hlen = colon ? (size_t)(colon - a) : strlen(a);
        if (hlen == 0 || hlen >= sizeof(u.host))
            return err_set(e, -EINVAL, "URL \"%.200s\": no host", shown);
        memcpy(u.host, a, hlen);
        u.host[hlen] = '\0';
        for (size_t i = 0; i < hlen; i++)
            if (!isalnum((unsigned char)u.host[i]) && u.host[i] != '-' && u.host[i] != '.' &&
                u.host[i] != '_')
                return err_set(e, -EINVAL, "URL \"%.200s\": bad host name", shown);
        struct in_addr a4;
        u.ip = inet_pton(AF_INET, u.host, &a4) == 1;
        if (colon)
            port = colon + 1;
    }
    if (port) {
        size_t pl = strlen(port);
        if (pl == 0 || pl > 5 || strspn(port, "0123456789") != pl || atoi(port) < 1 ||
            atoi(port) > 65535)
            return err_set(e, -EINVAL, "URL \"%.200s\": bad port", shown);
        memcpy(u.port, port, pl + 1);
    } else {
        strcpy(u.port, u.tls ? "443" : "80");
    }
    size_t pl = strlen(path);
    while (pl > 0 && path[pl - 1] == '/')
        pl--;
    if (pl >= sizeof(u.path))
        return err_set(e, -EINVAL, "URL \"%.200s\": path too long", shown);
    for (size_t i = 0; i < pl; i++)
        if ((unsigned char)path[i] <= ' ' || path[i] == 0x7f)
            return err_set(e, -EINVAL, "URL \"%.200s\": bad character in the path", shown);
    memcpy(u.path, path, pl);
    u.path[pl] = '\0';
    *ret = u;
    return 0;
}

/* host (an IP literal) within addr/bits. */
static bool cidr_match(const char *entry, size_t n, const char *host)
{
    char buf[64];
    if (n >= sizeof(buf))
        return false;
    memcpy(buf, entry, n);
    buf[n] = '\0';
    char *slash = strchr(buf, '/');
    long bits = -1;
    if (slash) {
        *slash = '\0';
        char *end;
        bits = strtol(slash + 1, &end, 10);
        if (*end || end == slash + 1 || bits < 0)
            return false;
    }
    unsigned char net[16], ip[16];
    size_t len;
    if (inet_pton(AF_INET, buf, net) == 1) {
        if (inet_pton(AF_INET, host, ip) != 1)
            return false;
        len = 4;
    } else if (inet_pton(AF_INET6, buf, net) == 1) {
        if (inet_pton(AF_INET6, host, ip) != 1)
            return false;
        len = 16;
    } else {
        return false;
    }
    if (bits < 0)
        bits = (long)len * 8;
    if (bits > (long)len * 8)
        return false;
    for (long i = 0; i < bits; i++) {
        unsigned char m = (unsigned char)(0x80u >> (i % 8));
        if ((net[i / 8] & m) != (ip[i / 8] & m))
            return false;
    }
    return true;
}

bool kube_no_proxy_match(const char *no_proxy, const char *host)
{
    if (!no_proxy || !host)
        return false;
    size_t hl = strlen(host);
    while (hl > 0 && host[hl - 1] == '.')
        hl--;
    const char *p = no_proxy;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *s = p;
        while (*p && *p != ',' && *p != ' ' && *p != '\t')
            p++;
        size_t n = (size_t)(p - s);
        if (n == 0)
            continue;
        if (n == 1 && s[0] == '*')
            return true;
        if (memchr(s, '/', n) || (s[0] != '.' && cidr_match(s, n, host))) {
            if (cidr_match(s, n, host))
                return true;
            continue;
        }
        /* a host name, perhaps with a port (ignored) */
        const char *colon = memchr(s, ':', n);
        if (colon && !memchr(colon + 1, ':', n - (size_t)(colon + 1 - s)))
            n = (size_t)(colon - s);
        if (n > 0 && s[0] == '.') {
            s++;
            n--;
        }
        while (n > 0 && s[n - 1] == '.')
            n--;
        if (n == 0)
            continue;
        if (hl == n && strncasecmp(host, s, n) == 0)
            return true;
        if (hl > n && host[hl - n - 1] == '.' && strncasecmp(host + hl - n, s, n) == 0)
            return true;
    }
    return false;
}

/* ---- waits --------------------------------------------------------------------------------- */

bool kube_wait_stopped(const struct kube_wait *w)
{
    return (w->flag && *w->flag) || (w->flag2 && *w->flag2) ||
           (w->token && stop_requested(w->token));
}

/* Waits until fd is ready for events (0), or -ETIMEDOUT at the deadline, -ECANCELED on a stop. */
static int wait_fd(int fd, short events, const struct kube_wait *w, uint64_t deadline,
                   struct err *e)
{
    for (;;) {
        if (kube_wait_stopped(w))
            return err_set(e, -ECANCELED, "stopped");
        uint64_t left = deadline_left_ms(deadline);
        if (left == 0)
            return err_set(e, -ETIMEDOUT, "timed out");
        if ((w->flag || w->flag2) && left > 100)
            left = 100;
        if (left > INT_MAX)
            left = INT_MAX;
        struct pollfd pf[2] = {{.fd = fd, .events = events},
                               {.fd = w->token ? stop_fd(w->token) : -1, .events = POLLIN}};
        int r = poll(pf, 2, (int)left);
        if (r < 0 && errno != EINTR)
            return err_errno(e, -errno, "poll");
        if (r > 0 && pf[0].revents)
            return 0;
    }
}

/* ---- TLS credentials ----------------------------------------------------------------------- */

struct kube_tls {
    gnutls_certificate_credentials_t cred;
    int rc;
    char err[ERR_MSG_MAX];
};

static pthread_once_t gnutls_once = PTHREAD_ONCE_INIT;
static int gnutls_init_rc;

static void gnutls_init_once(void)
{
    gnutls_init_rc = gnutls_global_init();
}

/* A TLS input: inline data, else the file read whole (bounded). */
static int tls_input(const char *file, const struct kube_blob *data, const char *what,
                     gnutls_datum_t *ret, char **ret_owned, struct err *e)
{
    *ret_owned = NULL;
    if (data->data) {
        *ret = (gnutls_datum_t){.data = (unsigned char *)data->data, .size = (unsigned)data->len};
        return 0;
    }
    if (!file) {
        *ret = (gnutls_datum_t){0};
        return 0;
    }
    char *buf = NULL;
    size_t len = 0;
    int r = file_read_all(file, 1u << 20, &buf, &len, e);
    if (r < 0)
        return err_prefix(e, "%s", what);
    *ret = (gnutls_datum_t){.data = (unsigned char *)buf, .size = (unsigned)len};
    *ret_owned = buf;
    return 0;
}

static void secret_free(char *p, size_t n)
{
    if (p) {
        explicit_bzero(p, n);
        free(p);
    }
}

static int tls_load(struct kube_tls *t, const struct kube_conn *c, struct err *e)
{
    pthread_once(&gnutls_once, gnutls_init_once);
    if (gnutls_init_rc < 0)
        return err_set(e, -EKEYREJECTED, "TLS: %s", gnutls_strerror(gnutls_init_rc));
    int r = gnutls_certificate_allocate_credentials(&t->cred);
    if (r < 0) {
        t->cred = NULL;
        return err_set(e, -ENOMEM, "TLS: %s", gnutls_strerror(r));
    }
    gnutls_datum_t ca, cert, key;
    char *ca_o = NULL, *cert_o = NULL, *key_o = NULL;
    if (tls_input(c->ca_file, &c->ca_data, "certificate-authority", &ca, &ca_o, e) < 0)
        return -EKEYREJECTED;
    if (ca.data) {
        r = gnutls_certificate_set_x509_trust_mem(t->cred, &ca, GNUTLS_X509_FMT_PEM);
        free(ca_o);
        if (r <= 0)
            return err_set(e, -EKEYREJECTED, "certificate-authority: %s",
                           r < 0 ? gnutls_strerror(r) : "no certificate in it");
    } else {
        /* no CA named: the system's trust store, as client-go does */
        r = gnutls_certificate_set_x509_system_trust(t->cred);
        if (r < 0)
            return err_set(e, -EKEYREJECTED, "system trust store: %s", gnutls_strerror(r));
    }
    if (tls_input(c->cert_file, &c->cert_data, "client-certificate", &cert, &cert_o, e) < 0)
        return -EKEYREJECTED;
    if (tls_input(c->key_file, &c->key_data, "client-key", &key, &key_o, e) < 0) {
        free(cert_o);
        return -EKEYREJECTED;
    }
    if (cert.data || key.data) {
        if (!cert.data || !key.data)
            r = err_set(e, -EKEYREJECTED, "a client certificate needs its key (and the reverse)");
        else if ((r = gnutls_certificate_set_x509_key_mem(t->cred, &cert, &key,
                                                          GNUTLS_X509_FMT_PEM)) < 0)
            r = err_set(e, -EKEYREJECTED, "client certificate and key: %s", gnutls_strerror(r));
    }
    free(cert_o);
    secret_free(key_o, key.size);
    return r < 0 ? r : 0;
}

void kube_tls_new(const struct kube_conn *conn, struct kube_tls **ret)
{
    struct kube_tls *t = xcalloc(1, sizeof(*t));
    struct err e = {0};
    if (str_has_prefix(conn->server, "https://") || str_has_prefix(conn->server, "HTTPS://")) {
        t->rc = tls_load(t, conn, &e);
        if (t->rc < 0)
            snprintf(t->err, sizeof(t->err), "%s", e.msg);
    }
    *ret = t;
}

void kube_tls_free(struct kube_tls *t)
{
    if (!t)
        return;
    if (t->cred)
        gnutls_certificate_free_credentials(t->cred);
    free(t);
}

/* ---- sockets ------------------------------------------------------------------------------- */

struct kube_sock {
    int fd;
    gnutls_session_t tls; /* NULL: plain */
    uint64_t idle_since;
};

void kube_sock_close(struct kube_sock *s)
{
    if (!s)
        return;
    if (s->tls)
        gnutls_deinit(s->tls);
    if (s->fd >= 0)
        close(s->fd);
    free(s);
}

uint64_t kube_sock_idle_since(const struct kube_sock *s)
{
    return s->idle_since;
}

void kube_sock_set_idle(struct kube_sock *s, uint64_t now_ms)
{
    s->idle_since = now_ms;
}

bool kube_sock_alive(struct kube_sock *s)
{
    if (s->tls && gnutls_record_check_pending(s->tls) > 0)
        return false;
    struct pollfd pf = {.fd = s->fd, .events = POLLIN};
    /* readable while idle: the server closed it (EOF), or sent what nobody asked for */
    return poll(&pf, 1, 0) == 0;
}

static int tcp_connect(const struct kube_url *u, const struct kube_wait *w, uint64_t deadline,
                       int *ret_fd, struct err *e)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG};
    if (u->ip)
        hints.ai_flags = AI_NUMERICHOST;
    struct addrinfo *ai = NULL;
    int r = getaddrinfo(u->host, u->port, &hints, &ai);
    if (r != 0)
        return err_set(e, -EHOSTUNREACH, "resolve %s: %s", u->host,
                       r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
    r = err_set(e, -ECONNREFUSED, "connect %s:%s: no address", u->host, u->port);
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        _cleanup_close_ int fd =
            socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            r = err_errno(e, -ECONNREFUSED, "socket");
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        int idle = 60;
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
        if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
            if (errno != EINPROGRESS) {
                r = err_set(e, -ECONNREFUSED, "connect %s:%s: %s", u->host, u->port,
                            strerror(errno));
                continue;
            }
            int wr = wait_fd(fd, POLLOUT, w, deadline, e);
            if (wr == -ECANCELED) {
                freeaddrinfo(ai);
                return wr;
            }
            if (wr < 0) {
                r = err_set(e, wr, "connect %s:%s: %s", u->host, u->port,
                            wr == -ETIMEDOUT ? "timed out" : strerror(-wr));
                if (wr == -ETIMEDOUT)
                    break;
                continue;
            }
            int so = 0;
            socklen_t sl = sizeof(so);
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) < 0)
                so = errno;
            if (so != 0) {
                r = err_set(e, -ECONNREFUSED, "connect %s:%s: %s", u->host, u->port, strerror(so));
                continue;
            }
        }
        *ret_fd = steal_fd(&fd);
        freeaddrinfo(ai);
        return 0;
    }
    freeaddrinfo(ai);
    return r;
}

static ssize_t push_nosignal(gnutls_transport_ptr_t p, const void *data, size_t n)
{
    return send((int)(intptr_t)p, data, n, MSG_NOSIGNAL);
}

static ssize_t pull_plain(gnutls_transport_ptr_t p, void *data, size_t n)
{
    return recv((int)(intptr_t)p, data, n, 0);
}

/* A fatal GnuTLS error during the handshake: the code for it. */
static int tls_errno(int gr)
{
    switch (gr) {
    case GNUTLS_E_PUSH_ERROR:
    case GNUTLS_E_PULL_ERROR:
    case GNUTLS_E_PREMATURE_TERMINATION:
        return -ECONNRESET;
    default:
        return -EKEYREJECTED;
    }
}

static int tls_handshake(struct kube_sock *s, const struct kube_url *u, struct kube_tls *t,
                         const struct kube_wait *w, uint64_t deadline, struct err *e)
{
    if (t->rc < 0)
        return err_set(e, t->rc, "%s", t->err);
    if (!t->cred)
        return err_set(e, -EKEYREJECTED, "TLS: no credentials");
    int r = gnutls_init(&s->tls, GNUTLS_CLIENT | GNUTLS_NONBLOCK);
    if (r < 0) {
        s->tls = NULL;
        return err_set(e, -ENOMEM, "TLS: %s", gnutls_strerror(r));
    }
    if ((r = gnutls_set_default_priority(s->tls)) < 0 ||
        (r = gnutls_credentials_set(s->tls, GNUTLS_CRD_CERTIFICATE, t->cred)) < 0 ||
        (!u->ip &&
         (r = gnutls_server_name_set(s->tls, GNUTLS_NAME_DNS, u->host, strlen(u->host))) < 0))
        return err_set(e, -EKEYREJECTED, "TLS setup: %s", gnutls_strerror(r));
    /* the chain against the CA, and the name (or the IP address, against the IP SANs) */
    gnutls_session_set_verify_cert(s->tls, u->host, 0);
    gnutls_transport_set_int(s->tls, s->fd);
    gnutls_transport_set_push_function(s->tls, push_nosignal);
    gnutls_transport_set_pull_function(s->tls, pull_plain);
    gnutls_handshake_set_timeout(s->tls, 0);
    for (;;) {
        r = gnutls_handshake(s->tls);
        if (r == GNUTLS_E_SUCCESS)
            return 0;
        if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) {
            int wr = wait_fd(s->fd, gnutls_record_get_direction(s->tls) ? POLLOUT : POLLIN, w,
                             deadline, e);
            if (wr < 0)
                return err_prefix(e, "TLS handshake");
            continue;
        }
        if (gnutls_error_is_fatal(r) == 0)
            continue;
        if (r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
            unsigned st = gnutls_session_get_verify_cert_status(s->tls);
            gnutls_datum_t out = {0};
            if (gnutls_certificate_verification_status_print(st, GNUTLS_CRT_X509, &out, 0) == 0) {
                r = err_set(e, -EKEYREJECTED, "TLS: the server's certificate: %s", out.data);
                gnutls_free(out.data);
                return r;
            }
        }
        return err_set(e, tls_errno(r), "TLS handshake: %s", gnutls_strerror(r));
    }
}

/* Plain writes and reads, before TLS or without it. */
static int raw_write(int fd, const char *p, size_t n, const struct kube_wait *w, uint64_t deadline,
                     struct err *e)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return err_errno(e, -ECONNRESET, "send");
            int r = wait_fd(fd, POLLOUT, w, deadline, e);
            if (r < 0)
                return r;
            continue;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The proxy's CONNECT tunnel to u; the answer's head is read byte by byte (nothing after it may
 * be taken from the socket: TLS follows). */
static int proxy_connect(int fd, const struct kube_url *u, const struct kube_wait *w,
                         uint64_t deadline, struct err *e)
{
    char req[700];
    bool v6 = strchr(u->host, ':') != NULL;
    int n = snprintf(req, sizeof(req), "CONNECT %s%s%s:%s HTTP/1.1\r\nHost: %s%s%s:%s\r\n\r\n",
                     v6 ? "[" : "", u->host, v6 ? "]" : "", u->port, v6 ? "[" : "", u->host,
                     v6 ? "]" : "", u->port);
    if (n < 0 || (size_t)n >= sizeof(req))
        return err_set(e, -EINVAL, "proxy CONNECT: host name too long");
    int r = raw_write(fd, req, (size_t)n, w, deadline, e);
    if (r < 0)
        return err_prefix(e, "proxy CONNECT");
    struct kube_h1 *p = xmalloc(sizeof(*p));
    kube_h1_init(p, true); /* a 2xx to CONNECT has no body */
    while (!p->headers_done) {
        char c;
        ssize_t k = recv(fd, &c, 1, 0);
        if (k == 0) {
            free(p);
            return err_set(e, -ECONNRESET, "proxy CONNECT: the proxy closed the connection");
        }
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                free(p);
                return err_errno(e, -ECONNRESET, "proxy CONNECT");
            }
            if ((r = wait_fd(fd, POLLIN, w, deadline, e)) < 0) {
                free(p);
                return err_prefix(e, "proxy CONNECT");
            }
            continue;
        }
        size_t used;
        if ((r = kube_h1_feed(p, &c, 1, &used, NULL, NULL, e)) < 0) {
            free(p);
            return err_set(e, -ECONNRESET, "proxy CONNECT: %s", e->msg);
        }
    }
    int code = p->code;
    free(p);
    if (code < 200 || code >= 300)
        return err_set(e, -ECONNREFUSED, "proxy CONNECT %s:%s: HTTP %d", u->host, u->port, code);
    return 0;
}

int kube_sock_open(const struct kube_url *u, const struct kube_url *proxy, struct kube_tls *tls,
                   const struct kube_wait *w, uint64_t connect_deadline, struct kube_sock **ret,
                   struct err *e)
{
    struct kube_sock *s = xcalloc(1, sizeof(*s));
    s->fd = -1;
    int r = tcp_connect(proxy ? proxy : u, w, connect_deadline, &s->fd, e);
    if (r < 0) {
        if (proxy)
            err_prefix(e, "proxy");
        goto fail;
    }
    if (proxy && u->tls && (r = proxy_connect(s->fd, u, w, connect_deadline, e)) < 0)
        goto fail;
    if (u->tls && (r = tls_handshake(s, u, tls, w, connect_deadline, e)) < 0)
        goto fail;
    *ret = s;
    return 0;
fail:
    kube_sock_close(s);
    return r;
}

int kube_sock_write(struct kube_sock *s, const void *data, size_t n, const struct kube_wait *w,
                    struct err *e)
{
    if (!s->tls)
        return raw_write(s->fd, data, n, w, w->deadline, e) < 0 ? err_prefix(e, "send") : 0;
    const char *p = data;
    while (n > 0) {
        ssize_t k = gnutls_record_send(s->tls, p, n);
        if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) {
            int r = wait_fd(s->fd, POLLOUT, w, w->deadline, e);
            if (r < 0)
                return err_prefix(e, "send");
            continue; /* GnuTLS wants the same arguments again */
        }
        if (k < 0)
            return err_set(e, -ECONNRESET, "TLS send: %s", gnutls_strerror((int)k));
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

ssize_t kube_sock_read(struct kube_sock *s, void *buf, size_t n, const struct kube_wait *w,
                       struct err *e)
{
    for (;;) {
        if (kube_wait_stopped(w))
            return err_set(e, -ECANCELED, "stopped");
        ssize_t k;
        if (s->tls) {
            k = gnutls_record_recv(s->tls, buf, n);
            if (k >= 0)
                return k;
            if (k == GNUTLS_E_PREMATURE_TERMINATION)
                return 0; /* closed without close_notify: the end, as the HTTP layer judges */
            if (k == GNUTLS_E_REHANDSHAKE || gnutls_error_is_fatal((int)k) == 0) {
                if (k != GNUTLS_E_AGAIN && k != GNUTLS_E_INTERRUPTED)
                    continue; /* a non-fatal alert or a ticket: read on */
            } else {
                return err_set(e, k == GNUTLS_E_FATAL_ALERT_RECEIVED ? -EKEYREJECTED : -ECONNRESET,
                               "TLS receive: %s%s%s", gnutls_strerror((int)k),
                               k == GNUTLS_E_FATAL_ALERT_RECEIVED ? ": " : "",
                               k == GNUTLS_E_FATAL_ALERT_RECEIVED
                                   ? gnutls_alert_get_name(gnutls_alert_get(s->tls))
                                   : "");
            }
        } else {
            k = recv(s->fd, buf, n, 0);
            if (k >= 0)
                return k;
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return err_errno(e, -ECONNRESET, "receive");
        }
        int r = wait_fd(s->fd, POLLIN, w, w->deadline, e);
        if (r < 0)
            return r;
    }
}
