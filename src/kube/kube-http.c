/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP transport: libcurl handles (pooled, so connections are reused), TLS, bearer tokens
 * (re-read on rotation), the rate limiter and retries. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "kube-curl.h"
#include "kube-internal.h"

/* libcurl is loaded on first use (kube-curl.h): calls go through its table. (curl.h defines
 * these two as argument-count checks of the direct calls.) */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_easy_init      (kube_curl()->easy_init)
#define curl_easy_cleanup   (kube_curl()->easy_cleanup)
#define curl_easy_reset     (kube_curl()->easy_reset)
#define curl_easy_setopt    (kube_curl()->easy_setopt)
#define curl_easy_getinfo   (kube_curl()->easy_getinfo)
#define curl_easy_strerror  (kube_curl()->easy_strerror)
#define curl_slist_append   (kube_curl()->slist_append)
#define curl_slist_free_all (kube_curl()->slist_free_all)
#define curl_multi_init     (kube_curl()->multi_init)
#define curl_multi_cleanup  (kube_curl()->multi_cleanup)
#define curl_multi_add      (kube_curl()->multi_add_handle)
#define curl_multi_remove   (kube_curl()->multi_remove_handle)
#define curl_multi_perform  (kube_curl()->multi_perform)
#define curl_multi_poll     (kube_curl()->multi_poll)
#define curl_multi_info     (kube_curl()->multi_info_read)

#define POOL_MAX       16
#define TOKEN_FILE_MAX (64u << 10)

#if defined(__x86_64__)
#define KUBE_ARCH "amd64"
#elif defined(__aarch64__)
#define KUBE_ARCH "arm64"
#else
#define KUBE_ARCH "unknown"
#endif

/*
 * A TLS file handed to libcurl by path. The GnuTLS build of libcurl (kube-curl.c) takes no
 * in-memory certificates (CURLOPT_*_BLOB), so a kubeconfig's inline data (the -data keys) goes
 * into a memory file (memfd, never on a disk), named "/proc/self/fd/N", for the client's life.
 */
struct tls_file {
    char *path; /* NULL: none */
    int fd;     /* the memory file; -1 when path is the kubeconfig's own file */
    size_t len;
};

struct kube_client {
    struct kube_conn conn;
    struct tls_file ca, cert, key;
    struct kube_options opt;
    char *user_agent;

    pthread_mutex_t lock; /* pool, limiter, token */
    struct kube_handle {
        CURL *h;
        CURLM *m; /* each transfer runs on its own multi, which keeps the connections */
    } pool[POOL_MAX];
    unsigned npool;
    struct kube_ratelimit rl;
    char *token; /* current bearer token (static or from token_file) */
    struct stat token_st;
    atomic_uint_fast64_t requests;
};

const char *kube_client_namespace(const struct kube_client *c)
{
    return c->conn.ns ? c->conn.ns : "default";
}

const char *kube_client_server(const struct kube_client *c)
{
    return c->conn.server;
}

size_t kube_client_max_watch_line(const struct kube_client *c)
{
    return c->opt.max_watch_line;
}

uint64_t kube_client_requests(const struct kube_client *c)
{
    return atomic_load(&((struct kube_client *)c)->requests);
}

static void token_free(char *t)
{
    if (t) {
        explicit_bzero(t, strlen(t));
        free(t);
    }
}

/* Re-reads the token file when it changed (kubelet rotates it by swapping a symlink).
 * Called with the lock held. */
static int token_refresh_locked(struct kube_client *c, bool force, struct err *e)
{
    if (!c->conn.token_file)
        return 0;
    struct stat st;
    if (stat(c->conn.token_file, &st) < 0)
        return err_errno(e, -errno, "bearer token file \"%s\"", c->conn.token_file);
    if (!force && c->token && st.st_ino == c->token_st.st_ino &&
        st.st_mtim.tv_sec == c->token_st.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == c->token_st.st_mtim.tv_nsec && st.st_size == c->token_st.st_size)
        return 0;
    char *t = NULL;
    size_t len = 0;
    int r = file_read_all(c->conn.token_file, TOKEN_FILE_MAX, &t, &len, e);
    if (r < 0)
        return err_prefix(e, "bearer token file");
    while (len > 0 && (t[len - 1] == '\n' || t[len - 1] == '\r' || t[len - 1] == ' '))
        t[--len] = '\0';
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)t[i] < 0x21 || (unsigned char)t[i] > 0x7e) {
            token_free(t);
            return err_set(e, -EINVAL,
                           "bearer token file \"%s\": holds a character a token "
                           "cannot hold",
                           c->conn.token_file);
        }
    if (len == 0) {
        token_free(t);
        return err_set(e, -EINVAL, "bearer token file \"%s\": empty", c->conn.token_file);
    }
    token_free(c->token);
    c->token = t;
    c->token_st = st;
    return 0;
}

int kube_client_credentials(struct kube_client *c, char **ret_token, char **ret_ca, struct err *e)
{
    pthread_mutex_lock(&c->lock);
    int r = token_refresh_locked(c, false, e);
    char *tok = r == 0 && c->token ? xstrdup(c->token) : NULL;
    pthread_mutex_unlock(&c->lock);
    if (r < 0)
        return r;
    char *ca = NULL;
    if (c->conn.ca_data.data) {
        ca = xstrndup(c->conn.ca_data.data, c->conn.ca_data.len);
    } else if (c->conn.ca_file) {
        size_t len = 0;
        if ((r = file_read_all(c->conn.ca_file, 1u << 20, &ca, &len, e)) < 0) {
            token_free(tok);
            return err_prefix(e, "CA bundle");
        }
    }
    *ret_token = tok;
    *ret_ca = ca;
    return 0;
}

static int tls_file_open(const char *file, const struct kube_blob *data, const char *what,
                         struct tls_file *ret, struct err *e)
{
    if (file) {
        *ret = (struct tls_file){.path = xstrdup(file), .fd = -1};
        return 0;
    }
    if (!data->data)
        return 0;
    _cleanup_close_ int fd = memfd_create(what, MFD_CLOEXEC);
    if (fd < 0)
        return err_errno(e, -errno, "%s data: memory file", what);
    int r = fd_write_all(fd, data->data, data->len);
    if (r < 0)
        return err_errno(e, r, "%s data: write the memory file", what);
    *ret = (struct tls_file){.path = xasprintf("/proc/self/fd/%d", fd), .len = data->len};
    ret->fd = steal_fd(&fd);
    return 0;
}

/* Closes the file; a memory file is overwritten first, as the secrets in memory are. */
static void tls_file_close(struct tls_file *f)
{
    if (f->fd >= 0) {
        static const char zeros[4096];
        for (size_t off = 0; off < f->len; off += sizeof(zeros)) {
            size_t n = f->len - off < sizeof(zeros) ? f->len - off : sizeof(zeros);
            if (pwrite(f->fd, zeros, n, (off_t)off) < 0)
                break;
        }
        close(f->fd);
    }
    free(f->path);
    *f = (struct tls_file){.fd = -1};
}

struct kube_options kube_options_for(enum kube_caller caller, const char *kubeconfig,
                                     const char *context, struct stop_token *stop)
{
    struct kube_options o = {.kubeconfig = kubeconfig, .context = context, .stop = stop};
    switch (caller) {
    case KUBE_CALLER_AGENT:
        /* a slow API server delays a pass by at most the call's deadline */
        o.timeout_ms = 10000;
        o.call_timeout_ms = 20000;
        break;
    case KUBE_CALLER_COMMAND:
        o.call_timeout_ms = 30000;
        break;
    }
    return o;
}

int kube_client_open(enum kube_caller caller, const char *kubeconfig, const char *context,
                     struct stop_token *stop, struct kube_client **ret, struct err *e)
{
    struct kube_options o = kube_options_for(caller, kubeconfig, context, stop);
    return kube_client_new(&o, ret, e);
}

int kube_client_new(const struct kube_options *o, struct kube_client **ret, struct err *e)
{
    int r = kube_curl_load(e);
    if (r < 0)
        return err_prefix(e, "Kubernetes client");
    struct kube_options opt = o ? *o : (struct kube_options){0};
    if (opt.qps <= 0)
        opt.qps = 20;
    if (opt.burst == 0)
        opt.burst = 40;
    if (opt.max_retries == 0)
        opt.max_retries = 5;
    if (opt.backoff_base_ms == 0)
        opt.backoff_base_ms = 200;
    if (opt.backoff_max_ms == 0)
        opt.backoff_max_ms = 10000;
    if (opt.timeout_ms == 0)
        opt.timeout_ms = 30000;
    if (opt.call_timeout_ms == 0)
        opt.call_timeout_ms = 120000;
    if (opt.max_response == 0)
        opt.max_response = 64u << 20;
    if (opt.max_watch_line == 0)
        opt.max_watch_line = 8u << 20;

    struct kube_conn conn = {0};
    const char *kc = opt.kubeconfig ? opt.kubeconfig : env_get("KUBECONFIG");
    if (kc)
        r = kube_conn_load_kubeconfig(kc, opt.context, &conn, e);
    else if (env_get("KUBERNETES_SERVICE_HOST"))
        r = kube_conn_in_cluster(opt.sa_dir ? opt.sa_dir : KUBE_SA_DIR, &conn, e);
    else {
        const char *home = env_get("HOME");
        _cleanup_free_ char *def = xasprintf("%s/.kube/config", home ? home : "/root");
        if (access(def, R_OK) == 0)
            r = kube_conn_load_kubeconfig(def, opt.context, &conn, e);
        else
            r = err_set(e, -ENOENT,
                        "no Kubernetes connection: not in a cluster, no --kubeconfig, no "
                        "KUBECONFIG and no %s",
                        def);
    }
    if (r < 0)
        return r;

    struct kube_client *c = xcalloc(1, sizeof(*c));
    c->conn = conn;
    c->ca.fd = c->cert.fd = c->key.fd = -1;
    c->opt = opt;
    c->opt.kubeconfig = NULL;
    c->opt.context = NULL;
    c->opt.sa_dir = NULL;
    c->user_agent = xasprintf("gpuop/%s (linux/%s)", GPUOP_VERSION, KUBE_ARCH);
    pthread_mutex_init(&c->lock, NULL);
    kube_ratelimit_init(&c->rl, opt.qps, opt.burst, now_us_mono());
    if ((r = tls_file_open(conn.ca_file, &conn.ca_data, "certificate-authority", &c->ca, e)) < 0 ||
        (r = tls_file_open(conn.cert_file, &conn.cert_data, "client-certificate", &c->cert, e)) <
            0 ||
        (r = tls_file_open(conn.key_file, &conn.key_data, "client-key", &c->key, e)) < 0) {
        kube_client_free(c);
        return err_prefix(e, "Kubernetes client");
    }
    if (conn.token)
        c->token = xstrdup(conn.token);
    else if ((r = token_refresh_locked(c, true, e)) < 0) {
        kube_client_free(c);
        return r;
    }
    *ret = c;
    return 0;
}

void kube_client_free(struct kube_client *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < c->npool; i++) {
        curl_multi_cleanup(c->pool[i].m);
        curl_easy_cleanup(c->pool[i].h);
    }
    token_free(c->token);
    tls_file_close(&c->ca);
    tls_file_close(&c->cert);
    tls_file_close(&c->key);
    kube_conn_clear(&c->conn);
    free(c->user_agent);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* A handle from the pool (its connections kept), or a new one; h NULL when out of memory. */
static struct kube_handle handle_get(struct kube_client *c)
{
    struct kube_handle hd = {0};
    pthread_mutex_lock(&c->lock);
    if (c->npool > 0)
        hd = c->pool[--c->npool];
    pthread_mutex_unlock(&c->lock);
    if (hd.h) {
        curl_easy_reset(hd.h); /* its multi keeps the live connections */
        return hd;
    }
    hd.h = curl_easy_init();
    hd.m = curl_multi_init();
    if (!hd.h || !hd.m) {
        if (hd.m)
            curl_multi_cleanup(hd.m);
        if (hd.h)
            curl_easy_cleanup(hd.h);
        return (struct kube_handle){0};
    }
    return hd;
}

static void handle_put(struct kube_client *c, struct kube_handle hd)
{
    pthread_mutex_lock(&c->lock);
    bool kept = c->npool < POOL_MAX;
    if (kept)
        c->pool[c->npool++] = hd;
    pthread_mutex_unlock(&c->lock);
    if (!kept) {
        curl_multi_cleanup(hd.m);
        curl_easy_cleanup(hd.h);
    }
}

/* ---- the limits of one call ---------------------------------------------------------------- */

static __thread struct kube_call call_ctx;

void kube_call_begin(const struct kube_call *call)
{
    call_ctx = *call;
}

void kube_call_end(void)
{
    call_ctx = (struct kube_call){0};
}

/* What ends one call early: its deadline, the calling thread's stop flag, the client's token. */
struct call_limits {
    uint64_t deadline;
    const volatile int *flag;
    struct stop_token *token;
};

static struct call_limits call_limits(const struct kube_client *c, bool watch)
{
    struct call_limits l = {.deadline = call_ctx.deadline, .flag = call_ctx.stop};
    if (!l.deadline)
        l.deadline = watch ? DEADLINE_NEVER : deadline_after(c->opt.call_timeout_ms);
    l.token = call_ctx.detached ? NULL : c->opt.stop;
    return l;
}

static bool call_stopped(const struct call_limits *l)
{
    return (l->flag && *l->flag) || (l->token && stop_requested(l->token));
}

/* Sleeps up to ms, and never past the call's deadline; false when the call was stopped. The
 * client's token wakes it at once; a thread's own flag is looked at every 50 ms. */
static bool call_nap(const struct call_limits *l, uint64_t ms)
{
    uint64_t end = deadline_after(ms);
    if (end > l->deadline)
        end = l->deadline;
    for (;;) {
        if (call_stopped(l))
            return false;
        uint64_t left = deadline_left_ms(end);
        if (left == 0)
            return true;
        if (l->flag && left > 50)
            left = 50;
        if (l->token) {
            stop_wait(l->token, left);
        } else {
            struct timespec ts = {(time_t)(left / 1000), (long)(left % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
}

/* A libcurl timeout from what is left of the call (at least 1 ms: 0 would mean none). */
static long curl_ms(uint64_t limit_ms, const struct call_limits *l)
{
    uint64_t left = deadline_left_ms(l->deadline);
    if (left < limit_ms)
        limit_ms = left;
    if (limit_ms == 0)
        limit_ms = 1;
    return limit_ms > LONG_MAX ? LONG_MAX : (long)limit_ms;
}

static bool ratelimit_wait(struct kube_client *c, const struct call_limits *l)
{
    pthread_mutex_lock(&c->lock);
    uint64_t wait = kube_ratelimit_reserve(&c->rl, now_us_mono());
    pthread_mutex_unlock(&c->lock);
    return wait == 0 || call_nap(l, (wait + 999) / 1000);
}

struct xfer {
    struct sbuf body;
    bool too_big;
    char retry_after[64];
    struct kube_watch_parser *parser; /* streaming: 2xx bodies go here */
    CURL *h;
    int parse_rc;
    struct err *perr;
    const volatile int *stop;
    const struct call_limits *limits;
};

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
    struct xfer *x = ud;
    size_t len = size * n;
    static const char key[] = "retry-after:";
    if (len > sizeof(key) - 1 && strncasecmp(buf, key, sizeof(key) - 1) == 0) {
        size_t vl = len - (sizeof(key) - 1);
        if (vl >= sizeof(x->retry_after))
            vl = sizeof(x->retry_after) - 1;
        memcpy(x->retry_after, buf + sizeof(key) - 1, vl);
        x->retry_after[vl] = '\0';
    }
    return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *ud)
{
    struct xfer *x = ud;
    size_t len = size * n;
    if (x->parser) {
        long code = 0;
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200 && code < 300) {
            int r = kube_watch_parser_feed(x->parser, buf, len, x->perr);
            if (r != 0) {
                x->parse_rc = r;
                return 0; /* abort the transfer */
            }
            return len;
        }
    }
    if (sbuf_append(&x->body, buf, len) < 0) {
        x->too_big = true;
        return 0;
    }
    return len;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    struct xfer *x = ud;
    return (x->stop && *x->stop) || (x->limits && call_stopped(x->limits)) ? 1 : 0;
}

static int curl_errno(CURLcode cc, bool *ret_not_sent, bool *ret_retry)
{
    *ret_not_sent = false;
    *ret_retry = true;
    switch (cc) {
    case CURLE_COULDNT_RESOLVE_HOST:
        *ret_not_sent = true;
        return -EHOSTUNREACH;
    case CURLE_COULDNT_CONNECT:
        *ret_not_sent = true;
        return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        *ret_retry = false;
        return -EKEYREJECTED;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
        *ret_retry = false;
        return -EINVAL;
    default:
        return -ECONNRESET;
    }
}

/*
 * curl_easy_perform, waiting on the stop token's fd as well as on the transfer: a stop ends it
 * at once, where the progress callback alone would see it up to a second late on a connection
 * that sends nothing. A thread's own flag is looked at every 100 ms.
 */
static CURLcode perform(struct kube_handle hd, const struct call_limits *l)
{
    if (curl_multi_add(hd.m, hd.h) != CURLM_OK)
        return CURLE_OUT_OF_MEMORY;
    struct curl_waitfd wfd = {.fd = l->token ? stop_fd(l->token) : -1, .events = CURL_WAIT_POLLIN};
    CURLcode cc = CURLE_OK;
    int running = 1;
    for (;;) {
        if (curl_multi_perform(hd.m, &running) != CURLM_OK) {
            cc = CURLE_RECV_ERROR;
            break;
        }
        if (!running)
            break;
        if (call_stopped(l)) {
            cc = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
        if (curl_multi_poll(hd.m, wfd.fd >= 0 ? &wfd : NULL, wfd.fd >= 0 ? 1 : 0,
                            l->flag ? 100 : 1000, NULL) != CURLM_OK) {
            cc = CURLE_RECV_ERROR;
            break;
        }
    }
    if (!running) {
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info(hd.m, &left)))
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == hd.h)
                cc = msg->data.result;
    }
    curl_multi_remove(hd.m, hd.h);
    return cc;
}

/* Sets the options shared by every request on a freshly reset handle. */
static int setup_handle(struct kube_client *c, CURL *h, const char *url, struct xfer *x,
                        struct curl_slist **headers, struct err *e)
{
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, curl_ms(10000, x->limits));
    /* Called about once a second while nothing arrives, at once on every byte: the stop. */
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    /* The kubeconfig's (or the service account's) CA is the only trust anchor, as for
     * client-go: libcurl's default CA directory (/etc/ssl/certs) is dropped, which it would
     * otherwise trust as well (and the GnuTLS build would load whole on every connection). */
    if (c->ca.path) {
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca.path);
        curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
    }
    if (c->cert.path) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert.path);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (c->key.path) {
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->key.path);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
    *headers = curl_slist_append(*headers, "Accept: application/json");
    pthread_mutex_lock(&c->lock);
    int r = token_refresh_locked(c, false, e);
    if (r == 0 && c->token) {
        _cleanup_free_ char *auth = xasprintf("Authorization: Bearer %s", c->token);
        *headers = curl_slist_append(*headers, auth);
        explicit_bzero(auth, strlen(auth));
    }
    pthread_mutex_unlock(&c->lock);
    return r;
}

static void slist_free_secret(struct curl_slist *l)
{
    for (struct curl_slist *p = l; p; p = p->next)
        explicit_bzero(p->data, strlen(p->data));
    curl_slist_free_all(l);
}

int kube_do(struct kube_client *c, const struct kube_req *rq, struct kube_resp *ret, struct err *e)
{
    _cleanup_free_ char *url = xasprintf("%s%s", c->conn.server, rq->path);
    const char *what = rq->what ? rq->what : rq->path;
    bool token_retried = false;
    struct call_limits lim = call_limits(c, false);
    for (unsigned attempt = 0;; attempt++) {
        if (call_stopped(&lim) || !ratelimit_wait(c, &lim))
            return err_set(e, -ECANCELED, "%s: stopped", what);
        if (deadline_left_ms(lim.deadline) == 0)
            return attempt > 0 ? err_prefix(e, "out of time, last error")
                               : err_set(e, -ETIMEDOUT, "%s: out of time", what);
        struct kube_handle hd = handle_get(c);
        if (!hd.h)
            return err_set(e, -ENOMEM, "%s: no curl handle", what);
        CURL *h = hd.h;
        struct xfer x = {.h = h, .limits = &lim};
        sbuf_init(&x.body, c->opt.max_response);
        struct curl_slist *headers = NULL;
        int r = setup_handle(c, h, url, &x, &headers, e);
        if (r < 0) {
            slist_free_secret(headers);
            sbuf_free(&x.body);
            handle_put(c, hd);
            return err_prefix(e, "%s", what);
        }
        if (rq->content_type) {
            _cleanup_free_ char *ct = xasprintf("Content-Type: %s", rq->content_type);
            headers = curl_slist_append(headers, ct);
        }
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, curl_ms(c->opt.timeout_ms, &lim));
        if (strcmp(rq->method, "GET") != 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
        if (rq->body) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
        }
        atomic_fetch_add(&c->requests, 1);
        CURLcode cc = perform(hd, &lim);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        slist_free_secret(headers);
        handle_put(c, hd);

        bool retry = false;
        uint64_t delay =
            kube_backoff_ms(attempt, c->opt.backoff_base_ms, c->opt.backoff_max_ms, kube_random());
        if (x.too_big) {
            sbuf_free(&x.body);
            return err_set(e, -EFBIG, "%s: response larger than the %zu-byte limit", what,
                           c->opt.max_response);
        }
        if (cc == CURLE_ABORTED_BY_CALLBACK && call_stopped(&lim)) {
            sbuf_free(&x.body);
            return err_set(e, -ECANCELED, "%s: stopped", what);
        }
        if (cc != CURLE_OK) {
            bool not_sent, retryable;
            r = curl_errno(cc, &not_sent, &retryable);
            err_set(e, r, "%s: %s: %s", what, c->conn.server, curl_easy_strerror(cc));
            retry = retryable && (!rq->unsafe || not_sent);
        } else if (code == 429) {
            kube_status_err(code, x.body.data, x.body.len, what, e);
            if (rq->no_retry_429) {
                e->code = KUBE_EBLOCKED;
                sbuf_free(&x.body);
                return KUBE_EBLOCKED;
            }
            uint64_t ra;
            if (x.retry_after[0] && kube_parse_retry_after(x.retry_after, now_ms_real(), &ra) == 0)
                delay = ra < c->opt.backoff_max_ms ? ra : c->opt.backoff_max_ms;
            retry = true; /* a 429 was not processed: safe even for a create */
        } else if (code >= 500) {
            kube_status_err(code, x.body.data, x.body.len, what, e);
            retry = !rq->unsafe;
            uint64_t ra;
            if (x.retry_after[0] && kube_parse_retry_after(x.retry_after, now_ms_real(), &ra) == 0)
                delay = ra < c->opt.backoff_max_ms ? ra : c->opt.backoff_max_ms;
        } else if (code == 401 && c->conn.token_file && !token_retried) {
            /* the token may have rotated under us: re-read it once */
            token_retried = true;
            pthread_mutex_lock(&c->lock);
            r = token_refresh_locked(c, true, e);
            pthread_mutex_unlock(&c->lock);
            if (r == 0) {
                sbuf_free(&x.body);
                attempt--;
                continue;
            }
            kube_status_err(code, x.body.data, x.body.len, what, e);
        } else {
            ret->code = code;
            ret->len = x.body.len;
            ret->body = sbuf_steal(&x.body);
            return 0;
        }
        sbuf_free(&x.body);
        if (!retry || attempt >= c->opt.max_retries || delay >= deadline_left_ms(lim.deadline))
            return e->code;
        log_debug("kube", "retrying", "what=\"%s\" attempt=%u delay_ms=%llu", what, attempt + 1,
                  (unsigned long long)delay);
        if (!call_nap(&lim, delay))
            return err_set(e, -ECANCELED, "%s: stopped", what);
    }
}

int kube_do_json(struct kube_client *c, const struct kube_req *rq, json_t **ret, struct err *e)
{
    struct kube_resp resp = {0};
    int r = kube_do(c, rq, &resp, e);
    if (r < 0)
        return r;
    const char *what = rq->what ? rq->what : rq->path;
    if (resp.code < 200 || resp.code >= 300) {
        r = kube_status_err(resp.code, resp.body, resp.len, what, e);
        free(resp.body);
        return r;
    }
    if (!ret) {
        free(resp.body);
        return 0;
    }
    r = kube_json_parse(resp.body, resp.len, what, ret, e);
    free(resp.body);
    return r;
}

int kube_do_stream(struct kube_client *c, const char *path, const char *what,
                   struct kube_watch_parser *p, const volatile int *stop, uint64_t timeout_ms,
                   struct err *e)
{
    _cleanup_free_ char *url = xasprintf("%s%s", c->conn.server, path);
    struct call_limits lim = call_limits(c, true);
    if ((stop && *stop) || call_stopped(&lim) || !ratelimit_wait(c, &lim))
        return err_set(e, -ECANCELED, "%s: stopped", what);
    struct kube_handle hd = handle_get(c);
    if (!hd.h)
        return err_set(e, -ENOMEM, "%s: no curl handle", what);
    CURL *h = hd.h;
    struct xfer x = {.h = h, .parser = p, .perr = e, .stop = stop, .limits = &lim};
    sbuf_init(&x.body, 1u << 20); /* an error answer, not the stream */
    struct curl_slist *headers = NULL;
    int r = setup_handle(c, h, url, &x, &headers, e);
    if (r < 0) {
        slist_free_secret(headers);
        sbuf_free(&x.body);
        handle_put(c, hd);
        return err_prefix(e, "%s", what);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, curl_ms(timeout_ms, &lim));
    atomic_fetch_add(&c->requests, 1);
    CURLcode cc = perform(hd, &lim);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    slist_free_secret(headers);
    handle_put(c, hd);
    if (x.parse_rc != 0) {
        sbuf_free(&x.body);
        if (x.parse_rc < 0)
            return err_prefix(e, "%s", what);
        return p->stopped < 0 ? p->stopped : 0;
    }
    if (cc == CURLE_ABORTED_BY_CALLBACK && ((stop && *stop) || call_stopped(&lim))) {
        sbuf_free(&x.body);
        return err_set(e, -ECANCELED, "%s: stopped", what);
    }
    if (x.too_big) {
        sbuf_free(&x.body);
        return err_set(e, -EFBIG, "%s: error answer larger than 1 MiB", what);
    }
    if (cc != CURLE_OK && !(cc == CURLE_OPERATION_TIMEDOUT && code == 200)) {
        bool ns, rt;
        r = curl_errno(cc, &ns, &rt);
        sbuf_free(&x.body);
        return err_set(e, r, "%s: %s: %s", what, c->conn.server, curl_easy_strerror(cc));
    }
    if (code < 200 || code >= 300) {
        r = kube_status_err(code, x.body.data, x.body.len, what, e);
        sbuf_free(&x.body);
        return r;
    }
    sbuf_free(&x.body);
    r = kube_watch_parser_finish(p, e);
    if (r < 0)
        return err_prefix(e, "%s", what);
    return p->stopped < 0 ? p->stopped : 0;
}
