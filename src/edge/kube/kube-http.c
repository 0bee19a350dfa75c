/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP transport: HTTP/1.1 over kube-conn.c's connections (pooled, so they are reused), the
 * response parser of kube-h1.c, bearer tokens (re-read on rotation), the rate limiter and
 * retries. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "kube-internal.h"

#define POOL_MAX       16
#define POOL_IDLE_MS   60000 /* an idle connection older than this is closed, not reused */
#define CONNECT_MS     10000
#define TOKEN_FILE_MAX (64u << 10)

#if defined(__x86_64__)
#define KUBE_ARCH "amd64"
#elif defined(__aarch64__)
#define KUBE_ARCH "arm64"
#else
#define KUBE_ARCH "unknown"
#endif

struct kube_client {
    struct kube_conn conn;
    struct kube_url url; /* conn.server, split */
    int url_rc;          /* its error (-EINVAL), returned by every request */
    char url_err[ERR_MSG_MAX];
    struct kube_url proxy; /* from the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) */
    bool use_proxy;
    struct kube_tls *tls;
    struct kube_options opt;
    char *user_agent;

    pthread_mutex_t lock;             /* pool, limiter, token */
    struct kube_sock *pool[POOL_MAX]; /* idle keep-alive connections, the newest last */
    unsigned npool;
    struct kube_ratelimit rl;
    char *token; /* current bearer token (static or from token_file) */
    struct stat token_st;
    atomic_uint_fast64_t requests;
    struct kube_budget in_flight; /* opt.max_in_flight: what the calls hold at once */
    struct kube_budget cached;    /* opt.max_cached: what the informers keep */
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

size_t kube_client_max_decoded(const struct kube_client *c)
{
    return c->opt.max_decoded;
}

const char *const *kube_client_drop_fields(const struct kube_client *c)
{
    return c->opt.drop_fields;
}

struct kube_budget *kube_client_in_flight(struct kube_client *c)
{
    return &c->in_flight;
}

struct kube_budget *kube_client_cached(struct kube_client *c)
{
    return &c->cached;
}

void kube_client_memory(struct kube_client *c, struct kube_client_memory *ret)
{
    pthread_mutex_lock(&c->in_flight.lock);
    ret->in_flight = c->in_flight.used;
    ret->in_flight_peak = c->in_flight.peak;
    pthread_mutex_unlock(&c->in_flight.lock);
    pthread_mutex_lock(&c->cached.lock);
    ret->cached = c->cached.used;
    ret->cached_peak = c->cached.peak;
    pthread_mutex_unlock(&c->cached.lock);
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

static int proxy_from_env(struct kube_client *c, struct err *e);

int kube_client_new(const struct kube_options *o, struct kube_client **ret, struct err *e)
{
    int r;
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
    if (opt.max_decoded == 0)
        opt.max_decoded = 128u << 20;
    if (opt.max_in_flight == 0)
        opt.max_in_flight = 256u << 20;
    if (opt.max_cached == 0)
        opt.max_cached = 512u << 20;

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
    c->opt = opt;
    c->opt.kubeconfig = NULL;
    c->opt.context = NULL;
    c->opt.sa_dir = NULL;
    c->user_agent = xasprintf("gpuop/%s (linux/%s)", GPUOP_VERSION, KUBE_ARCH);
    pthread_mutex_init(&c->lock, NULL);
    kube_budget_init(&c->in_flight, opt.max_in_flight);
    kube_budget_init(&c->cached, opt.max_cached);
    kube_ratelimit_init(&c->rl, opt.qps, opt.burst, now_us_mono());
    struct err ue = {0};
    c->url_rc = kube_url_split(conn.server, &c->url, &ue);
    if (c->url_rc < 0)
        snprintf(c->url_err, sizeof(c->url_err), "%s", ue.msg);
    else if ((r = proxy_from_env(c, e)) < 0) {
        kube_client_free(c);
        return err_prefix(e, "Kubernetes client");
    }
    kube_tls_new(&c->conn, &c->tls);
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
    for (unsigned i = 0; i < c->npool; i++)
        kube_sock_close(c->pool[i]);
    token_free(c->token);
    kube_tls_free(c->tls);
    kube_conn_clear(&c->conn);
    free(c->user_agent);
    pthread_mutex_destroy(&c->lock);
    kube_budget_destroy(&c->in_flight);
    kube_budget_destroy(&c->cached);
    free(c);
}

/* The proxy the environment names for the server's scheme, unless NO_PROXY exempts the server:
 * an http:// proxy (CONNECT tunnels for https). What libcurl and client-go honour. */
static int proxy_from_env(struct kube_client *c, struct err *e)
{
    const char *names_tls[] = {"https_proxy", "HTTPS_PROXY"};
    const char *names_plain[] = {"http_proxy", "HTTP_PROXY"};
    const char **names = c->url.tls ? names_tls : names_plain;
    const char *v = NULL, *name = NULL;
    for (int i = 0; i < 2 && !v; i++) {
        v = env_get(names[i]);
        if (v && !*v)
            v = NULL;
        name = names[i];
    }
    if (!v)
        return 0;
    const char *np = env_get("no_proxy");
    if (!np || !*np)
        np = env_get("NO_PROXY");
    if (kube_no_proxy_match(np, c->url.host))
        return 0;
    _cleanup_free_ char *u = strstr(v, "://") ? xstrdup(v) : xasprintf("http://%s", v);
    size_t n = strlen(u);
    if (n > 0 && u[n - 1] == '/')
        u[n - 1] = '\0';
    int r = kube_url_split(u, &c->proxy, e);
    if (r < 0)
        return err_prefix(e, "%s", name);
    if (c->proxy.tls || c->proxy.path[0])
        return err_set(e, -EINVAL, "%s: only an http:// proxy (no path) is supported", name);
    c->use_proxy = true;
    return 0;
}

/* An idle connection from the pool (the newest, still open), or NULL. */
static struct kube_sock *pool_get(struct kube_client *c)
{
    struct kube_sock *s = NULL, *stale[POOL_MAX];
    unsigned nstale = 0;
    uint64_t now = now_ms_mono();
    pthread_mutex_lock(&c->lock);
    while (c->npool > 0 && !s) {
        struct kube_sock *t = c->pool[--c->npool];
        if (now - kube_sock_idle_since(t) > POOL_IDLE_MS || !kube_sock_alive(t))
            stale[nstale++] = t;
        else
            s = t;
    }
    pthread_mutex_unlock(&c->lock);
    for (unsigned i = 0; i < nstale; i++)
        kube_sock_close(stale[i]);
    return s;
}

/* Keeps a connection for the next request; beyond POOL_MAX the oldest is closed. */
static void pool_put(struct kube_client *c, struct kube_sock *s)
{
    struct kube_sock *old = NULL;
    kube_sock_set_idle(s, now_ms_mono());
    pthread_mutex_lock(&c->lock);
    if (c->npool == POOL_MAX) {
        old = c->pool[0];
        memmove(c->pool, c->pool + 1, (POOL_MAX - 1) * sizeof(c->pool[0]));
        c->npool--;
    }
    c->pool[c->npool++] = s;
    pthread_mutex_unlock(&c->lock);
    kube_sock_close(old);
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

static bool ratelimit_wait(struct kube_client *c, const struct call_limits *l)
{
    pthread_mutex_lock(&c->lock);
    uint64_t wait = kube_ratelimit_reserve(&c->rl, now_us_mono());
    pthread_mutex_unlock(&c->lock);
    return wait == 0 || call_nap(l, (wait + 999) / 1000);
}

/* One exchange's body: buffered (bounded, its buffer taken from the in-flight budget as it
 * grows), or a 2xx streamed into a watch parser. */
struct xfer {
    struct kube_h1 *h1;
    struct sbuf body;
    struct kube_budget *mem;
    size_t held;     /* taken from mem for the body's buffer */
    size_t short_by; /* the body's buffer could not grow by this much: the budget is spent */
    bool too_big;
    struct kube_watch_parser *parser; /* streaming: 2xx bodies go here */
    int parse_rc;
    struct err *perr;
};

static void xfer_init(struct xfer *x, struct kube_h1 *h1, size_t limit, struct kube_budget *mem)
{
    *x = (struct xfer){.h1 = h1, .mem = mem};
    sbuf_init(&x->body, limit);
}

/* Frees the body's buffer and gives its memory back. */
static void xfer_drop(struct xfer *x)
{
    sbuf_free(&x->body);
    kube_budget_put(x->mem, x->held);
    x->held = 0;
}

static int on_body(void *ud, const char *buf, size_t len)
{
    struct xfer *x = ud;
    if (x->parser && x->h1->code >= 200 && x->h1->code < 300) {
        int r = kube_watch_parser_feed(x->parser, buf, len, x->perr);
        if (r != 0) {
            x->parse_rc = r;
            return 1; /* end the exchange */
        }
        return 0;
    }
    /* a body of known length gets a buffer of that size at once: growing by doubling would
     * leave a 10 MB page of nodes in a 16 MiB buffer, after 8, 4, 2 MiB ones freed on the way */
    size_t cap = sbuf_cap_after(&x->body, len);
    bool expect = x->body.len == 0 && x->h1->has_length && !x->h1->chunked &&
                  x->h1->left <= x->body.limit - (len < x->body.limit ? len : x->body.limit);
    if (expect)
        cap = len + (size_t)x->h1->left + 1;
    if (cap > x->held) {
        if (kube_budget_take(x->mem, cap - x->held) < 0) {
            x->short_by = cap - x->held;
            return 1;
        }
        x->held = cap;
    }
    if (expect)
        sbuf_expect(&x->body, cap - 1);
    if (sbuf_append(&x->body, buf, len) < 0) {
        x->too_big = true;
        return 1;
    }
    return 0;
}

/* A request's head: it carries the bearer token, so head_free zeroes it. */
struct req_head {
    char *data;
    size_t len;
};

/*
 * The request's head. The bearer token goes in last, into a buffer sized for the whole head
 * up front: no reallocation leaves a copy of it behind, and head_free zeroes the one there is.
 */
static int request_head(struct kube_client *c, const char *method, const char *path,
                        const char *content_type, const char *body, size_t body_len,
                        struct req_head *ret, struct err *e)
{
    struct sbuf pre;
    sbuf_init(&pre, 1u << 20);
    if (c->use_proxy && !c->url.tls) /* absolute form, to the proxy */
        sbuf_addf(&pre, "%s http://%s%s%s HTTP/1.1\r\n", method, c->url.authority, c->url.path,
                  path);
    else
        sbuf_addf(&pre, "%s %s%s HTTP/1.1\r\n", method, c->url.path, path);
    sbuf_addf(&pre, "Host: %s\r\nUser-Agent: %s\r\nAccept: application/json\r\n", c->url.authority,
              c->user_agent);
    if (content_type)
        sbuf_addf(&pre, "Content-Type: %s\r\n", content_type);
    if (body || (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 &&
                 strcmp(method, "DELETE") != 0))
        sbuf_addf(&pre, "Content-Length: %zu\r\n", body ? body_len : 0);
    if (sbuf_check(&pre) < 0) {
        sbuf_free(&pre);
        return err_set(e, -ENOMEM, "request head too large");
    }
    static const char auth[] = "Authorization: Bearer ";
    pthread_mutex_lock(&c->lock);
    int r = token_refresh_locked(c, false, e);
    size_t tl = r == 0 && c->token ? strlen(c->token) : 0;
    size_t n = pre.len + (tl ? sizeof(auth) - 1 + tl + 2 : 0) + 2;
    char *h = xmalloc(n + 1);
    memcpy(h, pre.data, pre.len);
    size_t off = pre.len;
    if (tl) {
        memcpy(h + off, auth, sizeof(auth) - 1);
        off += sizeof(auth) - 1;
        memcpy(h + off, c->token, tl);
        off += tl;
        memcpy(h + off, "\r\n", 2);
        off += 2;
    }
    pthread_mutex_unlock(&c->lock);
    memcpy(h + off, "\r\n", 2);
    off += 2;
    h[off] = '\0';
    sbuf_free(&pre);
    *ret = (struct req_head){.data = h, .len = off};
    if (r < 0) {
        explicit_bzero(h, off);
        return r;
    }
    return 0;
}

static void head_free(struct req_head *h)
{
    if (h->data) {
        explicit_bzero(h->data, h->len);
        free(h->data);
    }
    *h = (struct req_head){0};
}

/*
 * Sends one request and reads its answer into x, on a pooled connection or a new one (the
 * connect bounded by 10 s and the deadline). A reused connection that fails before any byte of
 * the answer came (the server closed it while idle) is replaced once by a fresh one: nothing was
 * processed. Returns 0 with x->h1 done, 0 when x's body callback ended the exchange (x->too_big,
 * x->parse_rc), or a negative code with *ret_not_sent telling whether the request may never have
 * left (connection refused, name unresolved). The connection goes back to the pool only after a
 * complete answer that allows it.
 */
static int exchange(struct kube_client *c, const struct req_head *head, const char *body,
                    size_t body_len, struct xfer *x, const struct kube_wait *w, bool *ret_not_sent,
                    struct err *e)
{
    *ret_not_sent = false;
    if (c->url_rc < 0)
        return err_set(e, c->url_rc, "%s", c->url_err);
    char buf[16384];
    for (int attempt = 0; attempt < 2; attempt++) {
        struct kube_sock *s = attempt == 0 ? pool_get(c) : NULL;
        bool reused = s != NULL;
        if (!s) {
            uint64_t cd = deadline_after(CONNECT_MS);
            if (cd > w->deadline)
                cd = w->deadline;
            int r = kube_sock_open(&c->url, c->use_proxy ? &c->proxy : NULL, c->tls, w, cd, &s, e);
            if (r < 0) {
                *ret_not_sent = r == -ECONNREFUSED || r == -EHOSTUNREACH;
                return r;
            }
        }
        int r = kube_sock_write(s, head->data, head->len, w, e);
        if (r == 0 && body && body_len)
            r = kube_sock_write(s, body, body_len, w, e);
        if (r < 0) {
            kube_sock_close(s);
            if (reused && r == -ECONNRESET)
                continue;
            return r;
        }
        kube_h1_init(x->h1, strncmp(head->data, "HEAD ", 5) == 0);
        size_t got = 0;
        for (;;) {
            ssize_t k = kube_sock_read(s, buf, sizeof(buf), w, e);
            if (k <= 0 && reused && got == 0 && (k == 0 || k == -ECONNRESET)) {
                kube_sock_close(s);
                s = NULL;
                break; /* the idle connection was closed under us: a fresh one */
            }
            if (k < 0) {
                kube_sock_close(s);
                return (int)k;
            }
            if (k == 0) {
                kube_sock_close(s);
                return kube_h1_eof(x->h1, e);
            }
            got += (size_t)k;
            size_t used = 0;
            r = kube_h1_feed(x->h1, buf, (size_t)k, &used, on_body, x, e);
            if (r != 0) {
                kube_sock_close(s);
                return r > 0 ? 0 : r;
            }
            if (x->h1->done) {
                if (x->h1->keep_alive && used == (size_t)k)
                    pool_put(c, s);
                else
                    kube_sock_close(s);
                return 0;
            }
        }
    }
    return err_set(e, -ECONNRESET, "the server closed a fresh connection without an answer");
}

/* The wait of one exchange: the call's limits, and an I/O deadline of at most limit_ms. */
static struct kube_wait exchange_wait(const struct call_limits *l, uint64_t limit_ms,
                                      const volatile int *flag2)
{
    uint64_t d = deadline_after(limit_ms);
    return (struct kube_wait){.deadline = d < l->deadline ? d : l->deadline,
                              .flag = l->flag,
                              .flag2 = flag2,
                              .token = l->token};
}

/*
 * A 2xx body decoded (rq->decode): priced first (kube_json_cost), refused over max_decoded,
 * decoded only once the in-flight budget holds its price besides the body. Returns 0 with
 * ret->json and ret->held (the price, still taken), 1 when the budget is spent now (the caller
 * may retry), or a negative code.
 */
static int decode_body(struct kube_client *c, struct xfer *x, const char *what,
                       struct kube_resp *ret, struct err *e)
{
    size_t cost = kube_json_cost(x->body.data, x->body.len);
    if (cost > c->opt.max_decoded)
        return kube_decoded_err(e, what, "the response", cost, c->opt.max_decoded,
                                "kube_options.max_decoded");
    if (kube_budget_take(&c->in_flight, cost) < 0) {
        kube_in_flight_err(e, what, &c->in_flight, cost);
        return 1;
    }
    json_t *v = NULL;
    int r = kube_json_parse(x->body.data, x->body.len, SIZE_MAX, what, &v, e);
    if (r < 0) {
        kube_budget_put(&c->in_flight, cost);
        return r;
    }
    ret->json = v;
    ret->held = cost;
    return 0;
}

int kube_do(struct kube_client *c, const struct kube_req *rq, struct kube_resp *ret, struct err *e)
{
    const char *what = rq->what ? rq->what : rq->path;
    bool token_retried = false;
    struct call_limits lim = call_limits(c, false);
    struct kube_h1 *h1 = xmalloc(sizeof(*h1));
    int rc;
    for (unsigned attempt = 0;; attempt++) {
        if (call_stopped(&lim) || !ratelimit_wait(c, &lim)) {
            rc = err_set(e, -ECANCELED, "%s: stopped", what);
            break;
        }
        if (deadline_left_ms(lim.deadline) == 0) {
            rc = attempt > 0 ? err_prefix(e, "out of time, last error")
                             : err_set(e, -ETIMEDOUT, "%s: out of time", what);
            break;
        }
        kube_h1_init(h1, false); /* no answer yet, should the connection fail */
        struct xfer x;
        xfer_init(&x, h1, c->opt.max_response, &c->in_flight);
        struct req_head head = {0};
        int r = request_head(c, rq->method, rq->path, rq->content_type, rq->body, rq->body_len,
                             &head, e);
        if (r < 0) {
            head_free(&head);
            xfer_drop(&x);
            rc = err_prefix(e, "%s", what);
            break;
        }
        atomic_fetch_add(&c->requests, 1);
        struct kube_wait w = exchange_wait(&lim, c->opt.timeout_ms, NULL);
        bool not_sent = false;
        r = exchange(c, &head, rq->body, rq->body_len, &x, &w, &not_sent, e);
        head_free(&head);
        long code = h1->headers_done ? h1->code : 0;

        bool retry = false;
        uint64_t delay =
            kube_backoff_ms(attempt, c->opt.backoff_base_ms, c->opt.backoff_max_ms, kube_random());
        if (x.too_big) {
            xfer_drop(&x);
            rc = err_set(e, -EFBIG, "%s: response larger than the %zu-byte limit", what,
                         c->opt.max_response);
            break;
        }
        if (r == -ECANCELED && call_stopped(&lim)) {
            xfer_drop(&x);
            rc = err_set(e, -ECANCELED, "%s: stopped", what);
            break;
        }
        if (x.short_by) {
            /* the other calls hold the budget now; they give it back as they end */
            kube_in_flight_err(e, what, &c->in_flight, x.short_by);
            retry = !rq->unsafe;
        } else if (r < 0) {
            /* a certificate the CA does not vouch for, a bad URL: the same on every try */
            bool retryable = r != -EKEYREJECTED && r != -EINVAL;
            if (r == -ECANCELED)
                r = -ETIMEDOUT; /* not ours: cannot happen, kept as a timeout */
            err_prefix(e, "%s: %s", what, c->conn.server);
            e->code = r;
            retry = retryable && (!rq->unsafe || not_sent);
        } else if (code == 429) {
            kube_status_err(code, x.body.data, x.body.len, what, e);
            if (rq->no_retry_429) {
                e->code = KUBE_EBLOCKED;
                xfer_drop(&x);
                rc = KUBE_EBLOCKED;
                break;
            }
            uint64_t ra;
            if (h1->retry_after[0] &&
                kube_parse_retry_after(h1->retry_after, now_ms_real(), &ra) == 0)
                delay = ra < c->opt.backoff_max_ms ? ra : c->opt.backoff_max_ms;
            retry = true; /* a 429 was not processed: safe even for a create */
        } else if (code >= 500) {
            kube_status_err(code, x.body.data, x.body.len, what, e);
            retry = !rq->unsafe;
            uint64_t ra;
            if (h1->retry_after[0] &&
                kube_parse_retry_after(h1->retry_after, now_ms_real(), &ra) == 0)
                delay = ra < c->opt.backoff_max_ms ? ra : c->opt.backoff_max_ms;
        } else if (code == 401 && c->conn.token_file && !token_retried) {
            /* the token may have rotated under us: re-read it once */
            token_retried = true;
            pthread_mutex_lock(&c->lock);
            r = token_refresh_locked(c, true, e);
            pthread_mutex_unlock(&c->lock);
            if (r == 0) {
                xfer_drop(&x);
                attempt--;
                continue;
            }
            kube_status_err(code, x.body.data, x.body.len, what, e);
        } else if (rq->decode && code >= 200 && code < 300) {
            r = decode_body(c, &x, what, ret, e);
            if (r <= 0) {
                xfer_drop(&x);
                ret->code = code;
                rc = r;
                break;
            }
            retry = !rq->unsafe; /* the budget was spent: as for a body that could not grow */
        } else {
            ret->code = code;
            ret->len = x.body.len;
            ret->body = sbuf_steal(&x.body); /* the caller's now */
            if (rq->hold_body) {             /* and so is its share of the budget */
                ret->held = x.held;
                x.held = 0;
            }
            xfer_drop(&x);
            rc = 0;
            break;
        }
        xfer_drop(&x);
        if (!retry || attempt >= c->opt.max_retries || delay >= deadline_left_ms(lim.deadline)) {
            rc = e->code;
            break;
        }
        log_debug("kube", "retrying", "what=\"%s\" attempt=%u delay_ms=%llu", what, attempt + 1,
                  (unsigned long long)delay);
        if (!call_nap(&lim, delay)) {
            rc = err_set(e, -ECANCELED, "%s: stopped", what);
            break;
        }
    }
    free(h1);
    return rc;
}

void kube_client_release(struct kube_client *c, size_t held)
{
    kube_budget_put(&c->in_flight, held);
}

int kube_do_json_held(struct kube_client *c, const struct kube_req *rq, json_t **ret,
                      size_t *ret_held, struct err *e)
{
    struct kube_req drq = *rq;
    drq.decode = true;
    struct kube_resp resp = {0};
    int r = kube_do(c, &drq, &resp, e);
    if (r < 0)
        return r;
    const char *what = rq->what ? rq->what : rq->path;
    if (resp.code < 200 || resp.code >= 300) {
        r = kube_status_err(resp.code, resp.body, resp.len, what, e);
        free(resp.body);
        return r;
    }
    if (!ret) {
        json_decref(resp.json);
        kube_client_release(c, resp.held);
        return 0;
    }
    *ret = resp.json;
    *ret_held = resp.held;
    return 0;
}

int kube_do_json(struct kube_client *c, const struct kube_req *rq, json_t **ret, struct err *e)
{
    size_t held = 0;
    int r = kube_do_json_held(c, rq, ret, &held, e);
    /* the caller's now: what it keeps is its own to bound */
    kube_client_release(c, held);
    return r;
}

int kube_do_stream(struct kube_client *c, const char *path, const char *what,
                   struct kube_watch_parser *p, const volatile int *stop, uint64_t timeout_ms,
                   struct err *e)
{
    struct call_limits lim = call_limits(c, true);
    if ((stop && *stop) || call_stopped(&lim) || !ratelimit_wait(c, &lim))
        return err_set(e, -ECANCELED, "%s: stopped", what);
    _cleanup_free_ struct kube_h1 *h1 = xmalloc(sizeof(*h1));
    kube_h1_init(h1, false);
    struct xfer x;
    xfer_init(&x, h1, 1u << 20, &c->in_flight); /* an error answer, not the stream */
    x.parser = p;
    x.perr = e;
    struct req_head head = {0};
    int r = request_head(c, "GET", path, NULL, NULL, 0, &head, e);
    if (r < 0) {
        head_free(&head);
        xfer_drop(&x);
        return err_prefix(e, "%s", what);
    }
    atomic_fetch_add(&c->requests, 1);
    struct kube_wait w = exchange_wait(&lim, timeout_ms, stop);
    bool not_sent;
    r = exchange(c, &head, NULL, 0, &x, &w, &not_sent, e);
    head_free(&head);
    long code = h1->headers_done ? h1->code : 0;
    if (x.parse_rc != 0) {
        xfer_drop(&x);
        if (x.parse_rc < 0)
            return err_prefix(e, "%s", what);
        return p->stopped < 0 ? p->stopped : 0;
    }
    if (r == -ECANCELED && ((stop && *stop) || call_stopped(&lim))) {
        xfer_drop(&x);
        return err_set(e, -ECANCELED, "%s: stopped", what);
    }
    if (x.too_big) {
        xfer_drop(&x);
        return err_set(e, -EFBIG, "%s: error answer larger than 1 MiB", what);
    }
    if (x.short_by) {
        size_t n = x.short_by;
        xfer_drop(&x);
        return kube_in_flight_err(e, what, &c->in_flight, n);
    }
    /* a watch whose time is up ends a 200 stream: its normal end */
    if (r < 0 && !(r == -ETIMEDOUT && code == 200)) {
        xfer_drop(&x);
        err_prefix(e, "%s: %s", what, c->conn.server);
        e->code = r;
        return r;
    }
    if (code < 200 || code >= 300) {
        r = kube_status_err(code, x.body.data, x.body.len, what, e);
        xfer_drop(&x);
        return r;
    }
    xfer_drop(&x);
    r = kube_watch_parser_finish(p, e);
    if (r < 0)
        return err_prefix(e, "%s", what);
    return p->stopped < 0 ? p->stopped : 0;
}
