/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's HTTP shell on the component runtime (src/lib/svc: flags, signals, stop, exit codes):
 * libmicrohttpd (optionally TLS with a generated CA), bearer-token authentication, request
 * metrics, the controller thread and the kubeconfig it writes. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kubesim-internal.h"
#include "kubesim-proxy.h"
#include "kubesim-tls.h"
#include "prom.h"
#include "svc.h"

#define KS_COMPONENT        "kubesim"
#define KS_OPEN_ADMIN_TOKEN "kubesim-admin"

struct shell {
    struct ksim *ks;
    size_t max_body;
    pthread_mutex_t mlock;
    json_t *counters; /* "verb\x1fresource\x1fcode" -> count */
    struct stop_token *stop;
};

struct conn_ctx {
    struct sbuf body;
    bool too_large;
};

struct stream {
    struct shell *sh;
    struct ksim_watch *w;
    struct sbuf buf;
    size_t off;
    int fd;
    bool done;
};

static void count_request(struct shell *sh, const char *verb, const char *resource, int code)
{
    _cleanup_free_ char *key = xasprintf("%s\x1f%s\x1f%d", verb[0] ? verb : "unknown",
                                         resource[0] ? resource : "unknown", code);
    pthread_mutex_lock(&sh->mlock);
    json_t *c = json_object_get(sh->counters, key);
    json_object_set_new(sh->counters, key, json_integer(c ? json_integer_value(c) + 1 : 1));
    pthread_mutex_unlock(&sh->mlock);
}

/* The request counters (keys "verb\x1fresource\x1fcode"), then the core's metrics: 0, or
 * -ENOBUFS when the page does not fit out. */
static int metrics_text(struct shell *sh, struct sbuf *out)
{
    struct prom_writer w;
    prom_writer_init(&w, out, PROM_FORMAT_TEXT);
    prom_family(&w, "kubesim_requests_total", PROM_COUNTER,
                "API requests served, by verb, resource and HTTP code.");
    pthread_mutex_lock(&sh->mlock);
    const char *k;
    json_t *v;
    json_object_foreach (sh->counters, k, v) {
        const char *a = strchr(k, '\x1f');
        const char *b = a ? strchr(a + 1, '\x1f') : NULL;
        if (!a || !b)
            continue;
        _cleanup_free_ char *verb = xstrndup(k, (size_t)(a - k));
        _cleanup_free_ char *res = xstrndup(a + 1, (size_t)(b - a - 1));
        const struct prom_label l[] = {{"verb", verb}, {"resource", res}, {"code", b + 1}};
        prom_sample_u64(&w, "kubesim_requests_total", l, ARRAY_SIZE(l),
                        (uint64_t)json_integer_value(v));
    }
    pthread_mutex_unlock(&sh->mlock);
    int r = prom_writer_finish(&w);
    return r < 0 ? r : ksim_metrics(sh->ks, out);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct stream *s = cls;
    for (;;) {
        if (s->off < s->buf.len) {
            size_t n = s->buf.len - s->off;
            if (n > max)
                n = max;
            memcpy(buf, s->buf.data + s->off, n);
            s->off += n;
            if (s->off == s->buf.len) {
                sbuf_reset(&s->buf);
                s->off = 0;
            }
            return (ssize_t)n;
        }
        if (s->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        int r = ksim_watch_next(s->sh->ks, s->w, &s->buf, 1000);
        if (r < 0)
            s->done = true;
        if (r == 0 && s->fd >= 0) {
            /* nothing to send: notice a client that went away */
            struct pollfd pfd = {.fd = s->fd, .events = POLLRDHUP};
            if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void stream_free(void *cls)
{
    struct stream *s = cls;
    ksim_watch_free(s->sh->ks, s->w);
    sbuf_free(&s->buf);
    free(s);
}

static enum MHD_Result send_text(struct MHD_Connection *c, int code, const char *ct, char *body,
                                 size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", ct);
    MHD_add_response_header(r, "Cache-Control", "no-cache, private");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    struct sbuf *q = cls;
    /* Sticky: on_request checks q once the arguments are collected. */
    if (q->len)
        sbuf_adds(q, "&");
    for (int pass = 0; pass < 2; pass++) {
        const char *s = pass ? (value ? value : "") : key;
        if (pass)
            sbuf_adds(q, "=");
        if (url_encode(q, s) < 0)
            return MHD_NO;
    }
    return MHD_YES;
}

/* The Impersonate-User header and up to 16 Impersonate-Group headers (kubectl --as and
 * --as-group); the strings are the connection's. */
struct impersonation {
    const char *user;
    const char *groups[16];
    size_t n_groups;
};

static enum MHD_Result collect_impersonation(void *cls, enum MHD_ValueKind kind, const char *key,
                                             const char *value)
{
    (void)kind;
    struct impersonation *imp = cls;
    if (!value)
        return MHD_YES;
    if (strcasecmp(key, "Impersonate-User") == 0)
        imp->user = value;
    else if (strcasecmp(key, "Impersonate-Group") == 0 && imp->n_groups < ARRAY_SIZE(imp->groups))
        imp->groups[imp->n_groups++] = value;
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    struct shell *sh = cls;
    struct conn_ctx *ctx = *con_cls;
    if (!ctx) {
        ctx = xcalloc(1, sizeof(*ctx));
        sbuf_init(&ctx->body, sh->max_body);
        *con_cls = ctx;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!ctx->too_large && sbuf_append(&ctx->body, upload, *upload_size) < 0)
            ctx->too_large = true;
        *upload_size = 0;
        return MHD_YES;
    }
    struct impersonation imp = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, collect_impersonation, &imp);
    struct ksim_request auth_req = {
        .method = method,
        .path = url,
        .authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
        .impersonate_user = imp.user,
        .impersonate_groups = imp.groups,
        .n_impersonate_groups = imp.n_groups,
    };
    if (streq(url, "/metrics") && streq(method, "GET")) {
        struct ksim_response denied;
        if (!ksim_allowed(sh->ks, &auth_req, &denied)) {
            count_request(sh, "unknown", "unknown", denied.code);
            char *b = steal_ptr(&denied.body);
            return send_text(c, denied.code, "application/json", b ? b : xstrdup(""),
                             b ? denied.body_len : 0);
        }
        struct sbuf out;
        sbuf_init(&out, 64u << 20);
        if (metrics_text(sh, &out) < 0) {
            sbuf_free(&out);
            char *b = xstrdup("metrics: the page exceeds 64 MiB\n");
            return send_text(c, 500, "text/plain", b, strlen(b));
        }
        size_t len = out.len;
        return send_text(c, 200, prom_content_type(PROM_FORMAT_TEXT), sbuf_steal(&out), len);
    }
    struct sbuf q;
    sbuf_init(&q, 1u << 20);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_query, &q);
    if (sbuf_check(&q) < 0) {
        sbuf_free(&q);
        count_request(sh, "unknown", "unknown", 414);
        char *b = xasprintf("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                            "\"status\":\"Failure\",\"message\":\"the query string is longer "
                            "than %u bytes\",\"reason\":\"RequestURITooLong\",\"code\":414}",
                            1u << 20);
        return send_text(c, 414, "application/json", b, strlen(b));
    }
    struct ksim_request req = {
        .method = method,
        .path = url,
        .authorization = auth_req.authorization,
        .impersonate_user = imp.user,
        .impersonate_groups = imp.groups,
        .n_impersonate_groups = imp.n_groups,
        .query = q.data ? q.data : "",
        .content_type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"),
        .accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept"),
        .user_agent = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "User-Agent"),
        .body = ctx->body.data,
        .body_len = ctx->too_large ? sh->max_body + 1 : ctx->body.len,
    };
    struct ksim_response resp;
    ksim_handle(sh->ks, &req, &resp);
    sbuf_free(&q);
    if (resp.proxy) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        int code = 0;
        enum MHD_Result ret = ks_proxy_respond(c, resp.proxy, ci ? ci->connect_fd : -1, &code);
        count_request(sh, resp.verb, resp.resource, code);
        ksim_response_free(&resp);
        return ret;
    }
    count_request(sh, resp.verb, resp.resource, resp.code);
    if (resp.watch) {
        struct stream *s = xcalloc(1, sizeof(*s));
        s->sh = sh;
        s->w = resp.watch;
        s->fd = -1;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
            s->fd = ci->connect_fd;
        sbuf_init(&s->buf, 64u << 20);
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
                                                                   stream_read, s, stream_free);
        MHD_add_response_header(r, "Content-Type",
                                resp.content_type ? resp.content_type : "application/json");
        MHD_add_response_header(r, "Cache-Control", "no-cache, private");
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    char *body = steal_ptr(&resp.body);
    size_t len = body ? resp.body_len : 0;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body ? body : xstrdup(""), MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type",
                            resp.content_type ? resp.content_type : "application/json");
    MHD_add_response_header(r, "Cache-Control", "no-cache, private");
    size_t i;
    json_t *w;
    json_array_foreach (resp.warnings, i, w) {
        /* RFC 7234 warn-text: a quoted string, quotes and backslashes escaped */
        struct sbuf h;
        sbuf_init(&h, 8192);
        sbuf_addf(&h, "299 - \"");
        for (const char *p = json_string_value(w); p && *p; p++)
            sbuf_addf(&h, "%s%c", (*p == '"' || *p == '\\') ? "\\" : "", *p);
        sbuf_addf(&h, "\"");
        if (!h.error)
            MHD_add_response_header(r, "Warning", h.data);
        sbuf_free(&h);
    }
    ksim_response_free(&resp);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)resp.code, r);
    MHD_destroy_response(r);
    return ret;
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct conn_ctx *ctx = *con_cls;
    if (ctx) {
        sbuf_free(&ctx->body);
        free(ctx);
        *con_cls = NULL;
    }
}

static void *controller_main(void *arg)
{
    struct shell *sh = arg;
    uint64_t last_us = 0;
    while (!stop_requested(sh->stop)) {
        ksim_wait_change(sh->ks, 100);
        if (stop_requested(sh->stop))
            break;
        /* let a burst of writes land first: one reconcile per burst, not per write, and
         * never more than a third of the time holding the store */
        if (stop_wait(sh->stop, (20000 + 2 * last_us + 999) / 1000))
            break;
        uint64_t t0 = now_us_mono();
        ksim_reconcile(sh->ks);
        last_us = now_us_mono() - t0;
        if (last_us > 1000000)
            last_us = 1000000;
    }
    return NULL;
}

static int write_kubeconfig(const char *path, const char *server, const char *ca_pem,
                            const char *token, struct err *e)
{
    _cleanup_sbuf_ struct sbuf b;
    sbuf_init(&b, 1u << 20);
    _cleanup_free_ char *ca = ca_pem ? base64_encode(ca_pem, strlen(ca_pem)) : NULL;
    _cleanup_free_ char *ca_line =
        ca ? xasprintf("    certificate-authority-data: %s\n", ca) : xstrdup("");
    _cleanup_free_ char *user = token ? xasprintf("\n    token: %s\n", token) : xstrdup(" {}\n");
    if (sbuf_printf(&b,
                    "apiVersion: v1\nkind: Config\nclusters:\n- name: kubesim\n  cluster:\n"
                    "    server: %s\n%susers:\n- name: kubesim\n  user:%scontexts:\n"
                    "- name: kubesim\n  context:\n    cluster: kubesim\n    user: kubesim\n"
                    "    namespace: default\ncurrent-context: kubesim\npreferences: {}\n",
                    server, ca_line, user) < 0)
        return err_set(e, -ENOBUFS, "\"%s\": the kubeconfig exceeds 1 MiB", path);
    return file_write_atomic(path, b.data, b.len, 0600, e);
}

static json_t *default_node_template(void)
{
    return json_pack("{s:s,s:s,s:{s:s,s:{s:s,s:s}},s:{s:{s:s,s:s,s:s,s:s},s:{s:s,s:s,s:s,s:s},"
                     "s:[{s:s,s:s,s:s,s:s}],s:{s:s,s:s,s:s,s:s,s:s,s:s}}}",
                     "apiVersion", "v1", "kind", "Node", "metadata", "name", "node", "labels",
                     "kubernetes.io/os", "linux", "kubernetes.io/arch", "amd64", "status",
                     "capacity", "cpu", "8", "memory", "32Gi", "pods", "110", "ephemeral-storage",
                     "100Gi", "allocatable", "cpu", "8", "memory", "32Gi", "pods", "110",
                     "ephemeral-storage", "100Gi", "conditions", "type", "Ready", "status", "True",
                     "reason", "KubeletReady", "message", "kubelet is posting ready status",
                     "nodeInfo", "kubeletVersion", "v1.32.0", "containerRuntimeVersion",
                     "containerd://1.7.24", "osImage", "Ubuntu 22.04.4 LTS", "kernelVersion",
                     "5.15.0-105-generic", "operatingSystem", "linux", "architecture", "amd64");
}

/* What a kubelet writes when it registers its node: the annotations every kubelet sets and the
 * machine's identity in nodeInfo (kept when the template has them). */
static void kubelet_register(json_t *node, unsigned i)
{
    json_t *ann = kobj_ensure_object(kobj_ensure_object(node, "metadata"), "annotations");
    if (!json_object_get(ann, "node.alpha.kubernetes.io/ttl"))
        json_object_set_new(ann, "node.alpha.kubernetes.io/ttl", json_string("0"));
    if (!json_object_get(ann, "volumes.kubernetes.io/controller-managed-attach-detach"))
        json_object_set_new(ann, "volumes.kubernetes.io/controller-managed-attach-detach",
                            json_string("true"));
    json_t *info = kobj_ensure_object(kobj_ensure_object(node, "status"), "nodeInfo");
    char id[64];
    snprintf(id, sizeof(id), "%032x", 0x5eed0000u + i);
    if (!json_object_get(info, "machineID"))
        json_object_set_new(info, "machineID", json_string(id));
    snprintf(id, sizeof(id), "%08x-0000-4000-8000-%012x", 0x5eed0000u + i, i);
    if (!json_object_get(info, "systemUUID"))
        json_object_set_new(info, "systemUUID", json_string(id));
    snprintf(id, sizeof(id), "%08x-0000-4000-8000-%012x", 0xb0070000u + i, i);
    if (!json_object_get(info, "bootID"))
        json_object_set_new(info, "bootID", json_string(id));
    const char *kv = kobj_str(info, "kubeletVersion");
    if (!json_object_get(info, "kubeProxyVersion"))
        json_object_set_new(info, "kubeProxyVersion", json_string(kv ? kv : "v1.32.0"));
}

static int make_nodes(struct ksim *ks, unsigned n, const char *tmpl_path, struct err *e)
{
    _cleanup_json_ json_t *tmpl = NULL;
    if (tmpl_path) {
        if (yaml_load_file(tmpl_path, &tmpl, e) < 0)
            return err_prefix(e, "--node-template");
        if (!json_is_object(tmpl))
            return err_set(e, -EINVAL, "--node-template \"%s\": expected a Node object", tmpl_path);
        if (!json_object_get(tmpl, "apiVersion"))
            json_object_set_new(tmpl, "apiVersion", json_string("v1"));
        if (!json_object_get(tmpl, "kind"))
            json_object_set_new(tmpl, "kind", json_string("Node"));
        if (!streq_ptr(kobj_kind(tmpl), "Node"))
            return err_set(e, -EINVAL, "--node-template \"%s\": kind is %s, expected Node",
                           tmpl_path, kobj_kind(tmpl) ?: "?");
    } else {
        tmpl = default_node_template();
    }
    const char *base = kobj_name(tmpl);
    if (!base || !base[0])
        base = "node";
    _cleanup_free_ char *prefix = xstrdup(base);
    for (unsigned i = 0; i < n; i++) {
        /* the template's values shared but for the objects a node changes */
        json_t *node = json_copy(tmpl);
        json_t *meta = ks_own_member(node, "metadata");
        ks_own_member(meta, "annotations");
        json_t *status = ks_own_member(node, "status");
        ks_own_member(status, "nodeInfo");
        char name[300];
        snprintf(name, sizeof(name), "%s-%05u", prefix, i);
        json_object_set_new(meta, "name", json_string(name));
        json_object_set_new(ks_own_member(meta, "labels"), "kubernetes.io/hostname",
                            json_string(name));
        char ip[32];
        snprintf(ip, sizeof(ip), "10.%u.%u.%u", 1 + i / 65536, (i / 256) % 256, i % 256);
        json_object_set_new(kobj_ensure_object(node, "status"), "addresses",
                            json_pack("[{s:s,s:s},{s:s,s:s}]", "type", "InternalIP", "address", ip,
                                      "type", "Hostname", "address", name));
        kubelet_register(node, i);
        int r = ksim_create_object_own(ks, node, e);
        if (r < 0)
            return r;
    }
    return 0;
}

static int load_file(struct ksim *ks, const char *path, struct err *e)
{
    _cleanup_json_ json_t *docs = NULL;
    if (yaml_load_file_all(path, &docs, e) < 0)
        return err_prefix(e, "--load");
    size_t i;
    json_t *d;
    json_array_foreach (docs, i, d) {
        if (json_is_null(d) || (json_is_object(d) && json_object_size(d) == 0))
            continue;
        json_t *items = json_object_get(d, "items");
        if (json_is_object(d) && str_has_suffix(kobj_kind(d) ?: "", "List") &&
            json_is_array(items)) {
            size_t j;
            json_t *it;
            json_array_foreach (items, j, it) {
                if (ksim_create_object(ks, it, e) < 0)
                    return err_prefix(e, "--load \"%s\": document %zu item %zu", path, i + 1, j);
            }
            continue;
        }
        if (!json_is_object(d))
            return err_set(e, -EINVAL, "--load \"%s\": document %zu: expected an object", path,
                           i + 1);
        if (ksim_create_object(ks, d, e) < 0)
            return err_prefix(e, "--load \"%s\": document %zu", path, i + 1);
    }
    return 0;
}

static int parse_listen(const char *s, struct sockaddr_in *sa, bool allow_remote, struct err *e)
{
    _cleanup_free_ char *host = xstrdup(s);
    char *colon = strrchr(host, ':');
    unsigned port = 0;
    if (!colon || parse_uint(colon + 1, &port) < 0 || port > 65535)
        return err_set(e, -EINVAL, "--listen \"%s\": expected HOST:PORT", s);
    *colon = '\0';
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    const char *h = host[0] ? host : "127.0.0.1";
    if (streq(h, "localhost"))
        h = "127.0.0.1";
    if (inet_pton(AF_INET, h, &sa->sin_addr) != 1)
        return err_set(e, -EINVAL, "--listen \"%s\": not an IPv4 address", s);
    if (!allow_remote && (ntohl(sa->sin_addr.s_addr) >> 24) != 127)
        return err_set(e, -EINVAL, "--listen \"%s\": not a loopback address (use --allow-remote)",
                       s);
    return 0;
}

/* ---- the component ------------------------------------------------------------------------ */

struct kubesim {
    const char *listen;
    const char *kubeconfig_out;
    struct svc_strings loads;
    unsigned nodes;
    const char *node_template;
    bool tls;
    const char *token;
    const char *authorization_mode;
    uint64_t watch_retention_ms;
    uint64_t pod_ready_delay_ms;
    uint64_t bookmark_interval_ms;
    uint64_t max_body;
    bool allow_remote;
    const char *log_level;
    const char *data_dir;
    /* configure */
    struct sockaddr_in sa;
};

static int check_token(const void *dst, const char *source, struct err *e)
{
    const char *t = *(const char *const *)dst;
    if (!t[0])
        return err_set(e, -EINVAL, "%s: must not be empty", source);
    return 0;
}

static int check_authz_mode(const void *dst, const char *source, struct err *e)
{
    const char *m = *(const char *const *)dst;
    if (!streq(m, "RBAC") && !streq(m, "AlwaysAllow"))
        return err_set(e, -EINVAL, "%s: expected RBAC or AlwaysAllow", source);
    return 0;
}

static int check_log_level(const void *dst, const char *source, struct err *e)
{
    enum log_level l;
    if (log_parse_level(*(const char *const *)dst, &l) < 0)
        return err_set(e, -EINVAL, "%s: expected debug|info|warn|error", source);
    return 0;
}

#define KS_OPT(m) .off = offsetof(struct kubesim, m)
static const struct svc_option kubesim_options[] = {
    {.flag = "listen",
     .kind = SVC_STRING,
     KS_OPT(listen),
     .metavar = "ADDR",
     .help = "address to serve on (default 127.0.0.1:0, a free port)"},
    {.flag = "kubeconfig-out",
     .kind = SVC_STRING,
     KS_OPT(kubeconfig_out),
     .metavar = "FILE",
     .help = "write a kubeconfig for clients and kubectl"},
    {.flag = "load",
     .kind = SVC_STRINGS,
     KS_OPT(loads),
     .metavar = "FILE.yaml",
     .help = "create the objects of a multi-document file (repeatable)"},
    {.flag = "nodes",
     .kind = SVC_UINT,
     .max = 100000,
     KS_OPT(nodes),
     .metavar = "N",
     .help = "create N nodes (from --node-template or a default)"},
    {.flag = "node-template",
     .kind = SVC_STRING,
     KS_OPT(node_template),
     .metavar = "FILE",
     .help = "a Node object; names become <name>-00000..."},
    {.flag = "tls",
     .kind = SVC_FLAG,
     KS_OPT(tls),
     .help = "serve HTTPS with a generated CA (in the kubeconfig)"},
    {.flag = "token",
     .kind = SVC_STRING,
     KS_OPT(token),
     .check = check_token,
     .metavar = "TOKEN",
     .help = "require 'Authorization: Bearer TOKEN' (the admin's, in system:masters)"},
    {.flag = "authorization-mode",
     .kind = SVC_STRING,
     KS_OPT(authorization_mode),
     .check = check_authz_mode,
     .metavar = "MODE",
     .help = "RBAC (default: Roles and bindings decide, system:masters may do anything) or "
             "AlwaysAllow"},
    {.flag = "watch-retention",
     .kind = SVC_DURATION,
     KS_OPT(watch_retention_ms),
     .help = "how long watch events are kept (default 5m)"},
    {.flag = "pod-ready-delay",
     .kind = SVC_DURATION,
     KS_OPT(pod_ready_delay_ms),
     .help = "scheduled pods turn Running+Ready after this (default 1s)"},
    {.flag = "bookmark-interval",
     .kind = SVC_DURATION,
     KS_OPT(bookmark_interval_ms),
     .help = "watch bookmark period (default 1m)"},
    {.flag = "max-body",
     .kind = SVC_U64,
     .min = 1,
     .max = 1u << 30,
     KS_OPT(max_body),
     .metavar = "BYTES",
     .help = "request body limit (default 3145728)"},
    {.flag = "allow-remote",
     .kind = SVC_FLAG,
     KS_OPT(allow_remote),
     .help = "allow a non-loopback --listen address"},
    {.flag = "data-dir",
     .env = "KUBESIM_DATA_DIR",
     .kind = SVC_STRING,
     KS_OPT(data_dir),
     .metavar = "DIR",
     .help = "persist every committed change in DIR (a journal and snapshots, the TLS\n"
             "certificates); a restart with the same DIR resumes from it"},
    {.flag = "log-level",
     .kind = SVC_STRING,
     KS_OPT(log_level),
     .check = check_log_level,
     .metavar = "LEVEL",
     .help = "debug|info|warn|error"},
    {0},
};
#undef KS_OPT

static void kubesim_defaults(void *state)
{
    struct kubesim *k = state;
    struct ksim_opts ko;
    ksim_opts_default(&ko);
    k->listen = "127.0.0.1:0";
    k->authorization_mode = "RBAC";
    k->watch_retention_ms = ko.watch_retention_ms;
    k->pod_ready_delay_ms = ko.pod_ready_delay_ms;
    k->bookmark_interval_ms = ko.bookmark_interval_ms;
    k->max_body = ko.max_body;
}

static int kubesim_configure(struct svc *s, struct err *e)
{
    struct kubesim *k = svc_state(s);
    if (k->log_level) {
        enum log_level l = LOG_INFO;
        log_parse_level(k->log_level, &l);
        log_set_level(l);
    }
    return parse_listen(k->listen, &k->sa, k->allow_remote, e);
}

/* One thread and one descriptor per connection: as many as the descriptor limit allows. */
static unsigned connection_limit(void)
{
    struct rlimit rl;
    unsigned conn_limit = 900;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max && rl.rlim_cur < 65536) {
            rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
            setrlimit(RLIMIT_NOFILE, &rl);
            getrlimit(RLIMIT_NOFILE, &rl);
        }
        if (rl.rlim_cur > 128)
            conn_limit = (unsigned)(rl.rlim_cur - 64 < 8192 ? rl.rlim_cur - 64 : 8192);
    }
    return conn_limit;
}

/* libmicrohttpd's own messages ("Closing connection (application error generating response)"
 * when a watch ends under a client) go through the project's log, at debug level. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[256];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    for (char *p = msg; *p; p++)
        if (*p == '"' || *p == '\n' || *p == '\\')
            *p = '\'';
    log_debug("kubesim", "libmicrohttpd", "detail=\"%s\"", msg);
}

static struct MHD_Daemon *start_http(struct shell *sh, const struct sockaddr_in *sa,
                                     const struct ks_tls *cert)
{
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG | (cert ? MHD_USE_TLS : 0);
    struct MHD_OptionItem tls_ops[] = {
        {MHD_OPTION_HTTPS_MEM_KEY, 0, cert ? cert->key_pem : NULL},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, cert ? cert->cert_pem : NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    return MHD_start_daemon(flags, 0, NULL, NULL, on_request, sh, MHD_OPTION_EXTERNAL_LOGGER,
                            on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)sa,
                            MHD_OPTION_NOTIFY_COMPLETED, on_done, sh, MHD_OPTION_CONNECTION_TIMEOUT,
                            0u, MHD_OPTION_CONNECTION_LIMIT, connection_limit(), MHD_OPTION_ARRAY,
                            cert ? tls_ops : tls_ops + 2, MHD_OPTION_END);
}

/* Serves until the stop token fires: the controller thread reconciles, the main thread waits. */
static int serve(struct svc *s, struct shell *sh, struct MHD_Daemon *d, const char *ca_pem,
                 const char *token, struct err *e)
{
    struct kubesim *k = svc_state(s);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    unsigned port = info ? info->port : ntohs(k->sa.sin_port);
    char ipbuf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &k->sa.sin_addr, ipbuf, sizeof(ipbuf));
    char server[128];
    snprintf(server, sizeof(server), "%s://%s:%u", k->tls ? "https" : "http", ipbuf, port);
    if (k->kubeconfig_out && write_kubeconfig(k->kubeconfig_out, server, ca_pem, token, e) < 0)
        return err_prefix(e, "--kubeconfig-out");
    printf("kubesim: serving %s\n", server);
    fflush(stdout);
    log_info(KS_COMPONENT, "serving", "address=%s nodes=%u tls=%s", server, k->nodes,
             k->tls ? "true" : "false");
    pthread_t ctl;
    if (pthread_create(&ctl, NULL, controller_main, sh) != 0)
        return err_set(e, -EAGAIN, "cannot start the controller thread");
    while (svc_wait(s, DEADLINE_NEVER) != SVC_STOP)
        ;
    ksim_shutdown(sh->ks);
    pthread_join(ctl, NULL);
    return 0;
}

/* --tls with --data-dir: the CA, certificate and key of the first start, kept in DIR/tls so
 * clients keep verifying the server across restarts. */
static int tls_persistent(const char *dir, const char *ip, struct ks_tls **ret, struct err *e)
{
    static const char *const names[] = {"ca.crt", "tls.crt", "tls.key"};
    _cleanup_free_ char *tdir = xasprintf("%s/tls", dir);
    _cleanup_(ks_tls_freep) struct ks_tls *t = xcalloc(1, sizeof(*t));
    char **pems[] = {&t->ca_pem, &t->cert_pem, &t->key_pem};
    size_t have = 0;
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        _cleanup_free_ char *path = xasprintf("%s/%s", tdir, names[i]);
        size_t len;
        struct err re = {0};
        int r = file_read_all(path, 1u << 20, pems[i], &len, &re);
        if (r == 0)
            have++;
        else if (r != -ENOENT)
            return err_set(e, r, "%s", re.msg);
    }
    if (have == ARRAY_SIZE(names)) {
        *ret = steal_ptr(&t);
        return 0;
    }
    if (have)
        return err_set(e, -EBADMSG, "\"%s\": holds only some of ca.crt, tls.crt and tls.key", tdir);
    ks_tls_free(steal_ptr(&t));
    int r = ks_tls_generate(ip, &t, e);
    if (r < 0)
        return r;
    if (mkdir_p(tdir, 0700) < 0)
        return err_set(e, -errno, "mkdir \"%s\": %s", tdir, strerror(errno));
    /* the key last: a kill between the writes leaves a set the next start refuses */
    const char *const made[] = {t->ca_pem, t->cert_pem, t->key_pem};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        _cleanup_free_ char *path = xasprintf("%s/%s", tdir, names[i]);
        r = file_write_atomic(path, made[i], strlen(made[i]), 0600, e);
        if (r < 0)
            return r;
    }
    *ret = steal_ptr(&t);
    return 0;
}

static int kubesim_run(struct svc *s, struct err *e)
{
    struct kubesim *k = svc_state(s);
    struct ksim_opts ko;
    ksim_opts_default(&ko);
    ko.watch_retention_ms = k->watch_retention_ms;
    ko.pod_ready_delay_ms = k->pod_ready_delay_ms;
    ko.bookmark_interval_ms = k->bookmark_interval_ms ? k->bookmark_interval_ms : 1;
    ko.max_body = (size_t)k->max_body;
    ko.initial_rv = now_ms_real();
    ko.authz =
        streq(k->authorization_mode, "AlwaysAllow") ? KSIM_AUTHZ_ALWAYS_ALLOW : KSIM_AUTHZ_RBAC;
    /* Without --token the server is open (no credentials: the admin, as before) and the
     * kubeconfig carries a well-known admin token: it hides nothing the open server does not
     * give away, and a client keeps working across a restart. */
    ko.admin_token = k->token ? k->token : KS_OPEN_ADMIN_TOKEN;
    ko.anonymous_admin = !k->token;
    _cleanup_(ksim_freep) struct ksim *ks = ksim_new(&ko);
    struct ksim_persist_info pinfo = {0};
    if (k->data_dir) {
        int r = ksim_persist_open(ks, k->data_dir, &pinfo, e);
        if (r == -EBADMSG || r == -EBUSY)
            return svc_bad_input(s, r);
        if (r < 0)
            return r;
        log_info(KS_COMPONENT, pinfo.loaded ? "state loaded" : "state empty",
                 "data_dir=\"%s\" objects=%zu journal_records=%zu resource_version=%" PRIu64,
                 k->data_dir, pinfo.objects, pinfo.journal_records, pinfo.rv);
        if (pinfo.loaded && (k->nodes || k->loads.n))
            log_info(KS_COMPONENT, "--nodes and --load not applied",
                     "detail=\"the objects come from --data-dir\"");
    }
    int r = 0;
    if (!pinfo.loaded) {
        r = k->nodes ? make_nodes(ks, k->nodes, k->node_template, e) : 0;
        for (size_t i = 0; r == 0 && i < k->loads.n; i++)
            r = load_file(ks, k->loads.v[i], e);
    }
    if (r < 0)
        return r;
    ksim_reconcile(ks);

    _cleanup_(ks_tls_freep) struct ks_tls *cert = NULL;
    if (k->tls) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
            return err_set(e, -ENOTSUP, "--tls: this libmicrohttpd was built without TLS");
        char ip[INET_ADDRSTRLEN] = "";
        inet_ntop(AF_INET, &k->sa.sin_addr, ip, sizeof(ip));
        r = k->data_dir ? tls_persistent(k->data_dir, ip, &cert, e) : ks_tls_generate(ip, &cert, e);
        if (r < 0) {
            err_prefix(e, "--tls");
            return r == -EBADMSG ? svc_bad_input(s, r) : r;
        }
    }
    struct shell sh = {.ks = ks, .max_body = ko.max_body, .stop = svc_stop(s)};
    pthread_mutex_init(&sh.mlock, NULL);
    sh.counters = json_object();
    struct MHD_Daemon *d = start_http(&sh, &k->sa, cert);
    if (!d)
        r = err_set(e, -EADDRNOTAVAIL, "listen on %s: cannot start the HTTP server", k->listen);
    else
        r = serve(s, &sh, d, cert ? cert->ca_pem : NULL, ko.admin_token, e);
    ksim_shutdown(ks);
    if (d)
        MHD_stop_daemon(d);
    json_decref(sh.counters);
    pthread_mutex_destroy(&sh.mlock);
    return r;
}

static const struct svc_component kubesim_component = {
    .name = KS_COMPONENT,
    .usage = "Usage: kubesim [flags]\n\n"
             "An in-memory Kubernetes API server for tests, benchmarks and demos. Prints\n"
             "\"kubesim: serving URL\" on stdout once it listens.\n",
    .options = {kubesim_options},
    .epilogue =
        "Signals: SIGTERM, SIGINT and SIGQUIT stop (exit 0); SIGHUP is logged and ignored.\n"
        "Exit: 0 stopped, 1 a runtime failure, 2 bad input (flags).\n",
    .state_size = sizeof(struct kubesim),
    .defaults = kubesim_defaults,
    .configure = kubesim_configure,
    .run = kubesim_run,
};

int main(int argc, char **argv)
{
    return svc_main(&kubesim_component, argc, argv);
}
