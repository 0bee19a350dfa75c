/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the kube client's pure pieces: URLs and selectors, kubeconfig and in-cluster
 * config, Status decoding, the watch-stream parser, the rate limiter, backoff, Retry-After,
 * leases and projections, what JSON costs decoded and the memory budgets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "json-alloc-count.h"
#include "kube-internal.h"

static char tmpdir[256];

static void write_file(const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup_tmp(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/kube-unit-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

/* ---- URLs --------------------------------------------------------------------------------- */

static void test_paths(void **state)
{
    (void)state;
    struct sbuf b;
    sbuf_init(&b, 4096);
    assert_int_equal(kube_build_path(&b, &KUBE_NODES, NULL, "n1", "status"), 0);
    assert_string_equal(b.data, "/api/v1/nodes/n1/status");
    sbuf_reset(&b);
    assert_int_equal(kube_build_path(&b, &KUBE_PODS, "gpu-operator", NULL, NULL), 0);
    assert_string_equal(b.data, "/api/v1/namespaces/gpu-operator/pods");
    sbuf_reset(&b);
    /* cluster-scoped resources ignore a namespace */
    assert_int_equal(kube_build_path(&b, &KUBE_NODES, "x", NULL, NULL), 0);
    assert_string_equal(b.data, "/api/v1/nodes");
    sbuf_reset(&b);
    assert_int_equal(kube_build_path(&b, &KUBE_LEASES, "kube-system", "gpuop", NULL), 0);
    assert_string_equal(b.data, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpuop");
    sbuf_reset(&b);
    assert_int_equal(kube_build_path(&b, &KUBE_PODS, "ns", "p 1", "eviction"), 0);
    assert_string_equal(b.data, "/api/v1/namespaces/ns/pods/p%201/eviction");
    sbuf_free(&b);
}

static void test_selectors(void **state)
{
    (void)state;
    struct sbuf b;
    sbuf_init(&b, 4096);
    assert_int_equal(sbuf_puts(&b, "/api/v1/pods"), 0);
    assert_int_equal(kube_query_add(&b, "labelSelector",
                                    "app in (a,b),tier!=db,!canary,nvidia.com/gpu.present=true"),
                     0);
    assert_int_equal(kube_query_add(&b, "fieldSelector", "spec.nodeName=n1"), 0);
    assert_int_equal(kube_query_add(&b, "continue", NULL), 0);
    assert_int_equal(kube_query_add(&b, "limit", "500"), 0);
    assert_string_equal(b.data, "/api/v1/pods?labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Ddb"
                                "%2C%21canary%2Cnvidia.com%2Fgpu.present%3Dtrue&fieldSelector="
                                "spec.nodeName%3Dn1&limit=500");
    sbuf_free(&b);
    struct err e = {0};
    assert_int_equal(kube_selector_check("labelSelector", "a=b,c notin (x)", &e), 0);
    assert_int_equal(kube_selector_check("labelSelector", "a=b\nX-Evil: 1", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "labelSelector"));
}

static void test_base64(void **state)
{
    (void)state;
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(kube_base64_decode("aGVsbG8=", 8, &out, &n), 0);
    assert_int_equal(n, 5);
    assert_memory_equal(out, "hello", 5);
    free(out);
    assert_int_equal(kube_base64_decode("aGVs\nbG8", 8, &out, &n), 0);
    assert_int_equal(n, 5);
    free(out);
    assert_int_equal(kube_base64_decode("aGV*bG8=", 8, &out, &n), -EINVAL);
    assert_int_equal(kube_base64_decode("a", 1, &out, &n), -EINVAL);
    assert_int_equal(kube_base64_decode("aGVsbG8=x", 9, &out, &n), -EINVAL);
}

/* ---- kubeconfig --------------------------------------------------------------------------- */

static const char kc_good[] =
    "apiVersion: v1\n"
    "kind: Config\n"
    "current-context: sim\n"
    "clusters:\n"
    "- name: other\n"
    "  cluster: {server: 'https://other:6443'}\n"
    "- name: simc\n"
    "  cluster:\n"
    "    server: https://127.0.0.1:6443/\n"
    "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n"
    "contexts:\n"
    "- name: sim\n"
    "  context: {cluster: simc, user: admin, namespace: gpu-operator}\n"
    "- name: files\n"
    "  context: {cluster: other, user: certs}\n"
    "users:\n"
    "- name: admin\n"
    "  user: {token: sekret-token}\n"
    "- name: certs\n"
    "  user: {client-certificate: pki/c.crt, client-key: /abs/c.key}\n";

static int kc_parse(const char *text, const char *context, struct kube_conn *c, struct err *e)
{
    json_t *doc = NULL;
    int r = yaml_parse_one(text, strlen(text), "kc.yaml", &doc, e);
    if (r < 0)
        return r;
    r = kube_conn_from_kubeconfig(doc, "/etc/kube/kc.yaml", context, c, e);
    json_decref(doc);
    return r;
}

static void test_kubeconfig(void **state)
{
    (void)state;
    struct kube_conn c = {0};
    struct err e = {0};
    assert_int_equal(kc_parse(kc_good, NULL, &c, &e), 0);
    assert_string_equal(c.server, "https://127.0.0.1:6443");
    assert_string_equal(c.ns, "gpu-operator");
    assert_string_equal(c.token, "sekret-token");
    assert_non_null(c.ca_data.data);
    assert_memory_equal(c.ca_data.data, "-----BEGIN CERTIFICATE-----", 27);
    assert_null(c.ca_file);
    kube_conn_clear(&c);

    assert_int_equal(kc_parse(kc_good, "files", &c, &e), 0);
    assert_string_equal(c.server, "https://other:6443");
    assert_string_equal(c.ns, "default");
    assert_string_equal(c.cert_file, "/etc/kube/pki/c.crt");
    assert_string_equal(c.key_file, "/abs/c.key");
    assert_null(c.token);
    kube_conn_clear(&c);
}

struct kc_bad {
    const char *text;
    const char *context;
    int code;
    const char *msg;
};

static void test_kubeconfig_errors(void **state)
{
    (void)state;
    static const struct kc_bad cases[] = {
        {"current-context: x\n", NULL, -ENOENT, "contexts: no entry named \"x\""},
        {"clusters: []\n", NULL, -EINVAL, "current-context is not set"},
        {kc_good, "nope", -ENOENT, "no entry named \"nope\""},
        {"current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\n"
         "clusters: [{name: c, cluster: {server: 'https://x', insecure-skip-tls-verify: true}}]\n",
         NULL, -EPERM, "insecure-skip-tls-verify: refused"},
        {"current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\n"
         "clusters: [{name: c, cluster: {server: 'ftp://x'}}]\n",
         NULL, -EINVAL, "is not an http(s):// URL"},
        {"current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\n"
         "clusters: [{name: c, cluster: {certificate-authority: /x}}]\n",
         NULL, -EINVAL, "server"},
        {"current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\n"
         "clusters: [{name: c, cluster: {server: 'https://x', certificate-authority-data: "
         "'!!notbase64'}}]\n",
         NULL, -EINVAL, "certificate-authority-data: not valid base64"},
        {"current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
         "clusters: [{name: c, cluster: {server: 'https://x'}}]\n"
         "users: [{name: u, user: {exec: {command: aws}}}]\n",
         NULL, -EOPNOTSUPP, "user \"u\".exec: not supported"},
        {"current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
         "clusters: [{name: c, cluster: {server: 'https://x'}}]\n"
         "users: [{name: u, user: {client-certificate: /c.crt}}]\n",
         NULL, -EINVAL, "needs a client key"},
        {"current-context: a\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
         "clusters: [{name: c, cluster: {server: 'https://x'}}]\n"
         "users: [{name: u, user: {token: [1, 2]}}]\n",
         NULL, -EINVAL, "token: expected a string"},
        {"current-context: a\ncontexts: {a: 1}\n", NULL, -EINVAL, "contexts: expected a list"},
        {"- 1\n- 2\n", NULL, -EINVAL, "expected a kubeconfig mapping"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct kube_conn c = {0};
        struct err e = {0};
        int r = kc_parse(cases[i].text, cases[i].context, &c, &e);
        if (r != cases[i].code || !strstr(e.msg, cases[i].msg))
            fail_msg("case %zu: got %d \"%s\", want %d \"%s\"", i, r, e.msg, cases[i].code,
                     cases[i].msg);
        assert_null(c.server);
        assert_non_null(strstr(e.msg, "/etc/kube/kc.yaml"));
    }
}

static void test_kubeconfig_files(void **state)
{
    (void)state;
    /* a KUBECONFIG list: the first file naming an entry wins, absent later files are fine */
    write_file("a.yaml", "current-context: one\n"
                         "contexts: [{name: one, context: {cluster: c1, user: u1}}]\n"
                         "clusters: [{name: c1, cluster: {server: 'http://127.0.0.1:1'}}]\n");
    write_file("b.yaml", "current-context: two\n"
                         "clusters: [{name: c1, cluster: {server: 'http://ignored:2'}}]\n"
                         "users: [{name: u1, user: {tokenFile: tok}}]\n");
    write_file("tok", "rotating-1\n");
    char list[1024];
    snprintf(list, sizeof(list), "%s/a.yaml:%s/b.yaml:%s/absent.yaml", tmpdir, tmpdir, tmpdir);
    struct kube_conn c = {0};
    struct err e = {0};
    assert_int_equal(kube_conn_load_kubeconfig(list, NULL, &c, &e), 0);
    assert_string_equal(c.server, "http://127.0.0.1:1");
    char want[512];
    snprintf(want, sizeof(want), "%s/tok", tmpdir);
    assert_string_equal(c.token_file, want);
    kube_conn_clear(&c);

    snprintf(list, sizeof(list), "%s/absent.yaml", tmpdir);
    assert_int_equal(kube_conn_load_kubeconfig(list, NULL, &c, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "absent.yaml"));
    write_file("broken.yaml", "clusters: [\n");
    snprintf(list, sizeof(list), "%s/broken.yaml", tmpdir);
    assert_true(kube_conn_load_kubeconfig(list, NULL, &c, &e) < 0);
    assert_non_null(strstr(e.msg, "broken.yaml"));

    /* the client refuses insecure-skip-tls-verify as a whole */
    write_file("insecure.yaml", "current-context: a\ncontexts: [{name: a, context: {cluster: c}}]\n"
                                "clusters: [{name: c, cluster: {server: 'https://x', "
                                "insecure-skip-tls-verify: true}}]\n");
    snprintf(list, sizeof(list), "%s/insecure.yaml", tmpdir);
    struct kube_client *cl = NULL;
    struct kube_options o = {.kubeconfig = list};
    assert_int_equal(kube_client_new(&o, &cl, &e), -EPERM);
    assert_null(cl);
    assert_non_null(strstr(e.msg, "TLS"));
}

/* A component's client: the caller's deadlines, its flags and stop token, the rest defaults. */
static void test_client_for_caller(void **state)
{
    (void)state;
    struct stop_token *stop = (struct stop_token *)&tmpdir; /* only compared */
    static const struct {
        enum kube_caller caller;
        uint64_t timeout_ms, call_timeout_ms;
    } cases[] = {
        {KUBE_CALLER_AGENT, 10000, 20000},
        {KUBE_CALLER_COMMAND, 0, 30000},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kube_options o = kube_options_for(cases[i].caller, "/k", "ctx", stop);
        assert_string_equal(o.kubeconfig, "/k");
        assert_string_equal(o.context, "ctx");
        assert_ptr_equal(o.stop, stop);
        assert_int_equal(o.timeout_ms, cases[i].timeout_ms);
        assert_int_equal(o.call_timeout_ms, cases[i].call_timeout_ms);
        assert_int_equal(o.max_retries, 0);
        assert_null(o.sa_dir);
    }
    struct kube_options o = kube_options_for(KUBE_CALLER_AGENT, NULL, NULL, NULL);
    assert_null(o.kubeconfig);
    assert_null(o.context);
    assert_null(o.stop);

    /* kube_client_open: the kubeconfig and context given, an error naming a missing file */
    write_file("open.yaml", "current-context: one\n"
                            "contexts: [{name: one, context: {cluster: c1}}, "
                            "{name: two, context: {cluster: c2}}]\n"
                            "clusters: [{name: c1, cluster: {server: 'http://127.0.0.1:1'}}, "
                            "{name: c2, cluster: {server: 'http://127.0.0.1:2'}}]\n");
    char path[512];
    snprintf(path, sizeof(path), "%s/open.yaml", tmpdir);
    struct err e = {0};
    struct kube_client *c = NULL;
    assert_int_equal(kube_client_open(KUBE_CALLER_COMMAND, path, "two", NULL, &c, &e), 0);
    assert_string_equal(kube_client_server(c), "http://127.0.0.1:2");
    kube_client_free(c);
    c = NULL;
    assert_int_equal(kube_client_open(KUBE_CALLER_AGENT, path, NULL, NULL, &c, &e), 0);
    assert_string_equal(kube_client_server(c), "http://127.0.0.1:1");
    kube_client_free(c);
    c = NULL;
    snprintf(path, sizeof(path), "%s/absent.yaml", tmpdir);
    assert_int_equal(kube_client_open(KUBE_CALLER_AGENT, path, NULL, NULL, &c, &e), -ENOENT);
    assert_null(c);
    assert_non_null(strstr(e.msg, "absent.yaml"));
}

static void test_in_cluster(void **state)
{
    (void)state;
    char sa[512];
    snprintf(sa, sizeof(sa), "%s/sa", tmpdir);
    mkdir(sa, 0700);
    struct kube_conn c = {0};
    struct err e = {0};
    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(kube_conn_in_cluster(sa, &c, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "KUBERNETES_SERVICE_HOST"));
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "notaport", 1);
    assert_int_equal(kube_conn_in_cluster(sa, &c, &e), -EINVAL);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    assert_int_equal(kube_conn_in_cluster(sa, &c, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "token"));
    write_file("sa/token", "tkn\n");
    write_file("sa/ca.crt", "x");
    write_file("sa/namespace", "gpu-operator\n");
    assert_int_equal(kube_conn_in_cluster(sa, &c, &e), 0);
    assert_string_equal(c.server, "https://10.96.0.1:443");
    assert_string_equal(c.ns, "gpu-operator");
    kube_conn_clear(&c);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    assert_int_equal(kube_conn_in_cluster(sa, &c, &e), 0);
    assert_string_equal(c.server, "https://[fd00::1]:443");
    kube_conn_clear(&c);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
}

/* ---- Status ------------------------------------------------------------------------------- */

static void test_status(void **state)
{
    (void)state;
    struct err e = {0};
    const char *nf = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                     "\"message\":\"nodes \\\"n1\\\" not found\",\"reason\":\"NotFound\","
                     "\"details\":{\"name\":\"n1\",\"kind\":\"nodes\"},\"code\":404}";
    assert_int_equal(kube_status_err(404, nf, strlen(nf), "get nodes n1", &e), -ENOENT);
    assert_string_equal(e.msg, "nodes \"n1\" not found (404 NotFound)");
    const char *cf = "{\"kind\":\"Status\",\"message\":\"Operation cannot be fulfilled\","
                     "\"reason\":\"Conflict\",\"code\":409}";
    assert_int_equal(kube_status_err(409, cf, strlen(cf), "x", &e), KUBE_ECONFLICT);
    assert_string_equal(e.msg, "Operation cannot be fulfilled (409 Conflict)");
    const char *ae = "{\"kind\":\"Status\",\"message\":\"exists\",\"reason\":\"AlreadyExists\"}";
    assert_int_equal(kube_status_err(409, ae, strlen(ae), "x", &e), -EEXIST);
    const char *gone = "{\"kind\":\"Status\",\"message\":\"too old resource version: 1 (5)\","
                       "\"reason\":\"Expired\",\"code\":410}";
    assert_int_equal(kube_status_err(410, gone, strlen(gone), "x", &e), KUBE_EGONE);
    assert_string_equal(e.msg, "too old resource version: 1 (5) (410 Expired)");
    assert_int_equal(kube_status_err(503, "<html>\x1b[31mdown</html>", 22, "list nodes", &e), -EIO);
    assert_string_equal(e.msg, "list nodes: HTTP 503: <html> [31mdown</html>");
    assert_int_equal(kube_status_err(502, NULL, 0, "list nodes", &e), -EIO);
    assert_string_equal(e.msg, "list nodes: HTTP 502");
    /* a Status with hostile fields: wrong types, control characters */
    const char *bad = "{\"kind\":\"Status\",\"message\":\"a\\nb\\u0000c\",\"reason\":7}";
    assert_int_equal(kube_status_err(422, bad, strlen(bad), "x", &e), -EINVAL);
    assert_null(strchr(e.msg, '\n'));
    assert_int_equal(kube_http_errno(429, NULL), -EAGAIN);
    assert_int_equal(kube_http_errno(403, NULL), -EPERM);
    assert_int_equal(kube_http_errno(401, NULL), -EACCES);

    json_t *v = NULL;
    assert_int_equal(kube_json_parse("{\"a\":", 5, SIZE_MAX, "get x", &v, &e), -EBADMSG);
    assert_non_null(strstr(e.msg, "get x: malformed JSON"));
    assert_int_equal(kube_json_parse("[1]", 3, SIZE_MAX, "get x", &v, &e), -EBADMSG);
    assert_int_equal(kube_json_parse("{\"a\":1}", 7, SIZE_MAX, "get x", &v, &e), 0);
    json_decref(v);
}

/* ---- watch stream ------------------------------------------------------------------------- */

struct seen {
    char log[2048];
    int n;
    int stop_at;
};

static int collect(enum kube_watch_type t, json_t *obj, void *ud)
{
    struct seen *s = ud;
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    size_t l = strlen(s->log);
    snprintf(s->log + l, sizeof(s->log) - l, "%s:%s;", kube_watch_type_name(t), name ? name : "-");
    s->n++;
    return s->stop_at && s->n >= s->stop_at ? 1 : 0;
}

static const char stream[] =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\"}}}\n"
    "\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\r\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}";

static void test_watch_parser_chunks(void **state)
{
    (void)state;
    const char *want = "ADDED:a;MODIFIED:b;BOOKMARK:-;DELETED:a;ERROR:-;";
    size_t n = strlen(stream);
    /* every chunk size, from byte by byte up to all at once */
    for (size_t chunk = 1; chunk <= n; chunk += (chunk < 20 ? 1 : 37)) {
        struct seen s = {0};
        struct kube_watch_parser p;
        struct err e = {0};
        kube_watch_parser_init(&p, 4096, SIZE_MAX, collect, &s);
        for (size_t off = 0; off < n; off += chunk) {
            size_t take = n - off < chunk ? n - off : chunk;
            assert_int_equal(kube_watch_parser_feed(&p, stream + off, take, &e), 0);
        }
        assert_int_equal(kube_watch_parser_finish(&p, &e), 0);
        kube_watch_parser_free(&p);
        if (strcmp(s.log, want) != 0)
            fail_msg("chunk %zu: %s", chunk, s.log);
    }
}

static void test_watch_parser_errors(void **state)
{
    (void)state;
    struct err e = {0};
    struct seen s = {0};
    struct kube_watch_parser p;
    /* an oversized event line */
    kube_watch_parser_init(&p, 64, SIZE_MAX, collect, &s);
    char big[200];
    memset(big, 'x', sizeof(big));
    assert_int_equal(kube_watch_parser_feed(&p, big, 40, &e), 0);
    assert_int_equal(kube_watch_parser_feed(&p, big, 40, &e), -EFBIG);
    assert_non_null(strstr(e.msg, "64-byte limit"));
    kube_watch_parser_free(&p);
    /* the same limit when the whole oversized line arrives in one chunk */
    kube_watch_parser_init(&p, 64, SIZE_MAX, collect, &s);
    char line[200];
    int n =
        snprintf(line, sizeof(line), "{\"type\":\"ADDED\",\"object\":{\"kind\":\"%0120d\"}}\n", 0);
    assert_true(n > 64 && n < (int)sizeof(line));
    err_clear(&e);
    assert_int_equal(kube_watch_parser_feed(&p, line, (size_t)n, &e), -EFBIG);
    assert_non_null(strstr(e.msg, "64-byte limit"));
    kube_watch_parser_free(&p);

    static const char *const bad[] = {
        "{\"type\":\"ADDED\",\"object\":{\"a\":\n",
        "{\"type\":\"SURPRISE\",\"object\":{}}\n",
        "{\"type\":\"ADDED\",\"object\":[1]}\n",
        "{\"object\":{}}\n",
        "[]\n",
        "\"str\"\n",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        kube_watch_parser_init(&p, 4096, SIZE_MAX, collect, &s);
        int r = kube_watch_parser_feed(&p, bad[i], strlen(bad[i]), &e);
        if (r != -EBADMSG)
            fail_msg("case %zu: %d", i, r);
        assert_non_null(strstr(e.msg, "watch event"));
        kube_watch_parser_free(&p);
    }
    /* a truncated last line */
    kube_watch_parser_init(&p, 4096, SIZE_MAX, collect, &s);
    assert_int_equal(kube_watch_parser_feed(&p, "{\"type\":\"ADDED\",\"obj", 20, &e), 0);
    assert_int_equal(kube_watch_parser_finish(&p, &e), -EBADMSG);
    assert_non_null(strstr(e.msg, "truncated watch stream"));
    kube_watch_parser_free(&p);

    /* the callback stops the stream */
    struct seen s2 = {.stop_at = 2};
    kube_watch_parser_init(&p, 4096, SIZE_MAX, collect, &s2);
    assert_int_equal(kube_watch_parser_feed(&p, stream, strlen(stream), &e), 1);
    assert_int_equal(s2.n, 2);
    assert_int_equal(kube_watch_parser_feed(&p, stream, strlen(stream), &e), 1);
    assert_int_equal(s2.n, 2);
    kube_watch_parser_free(&p);
}

/* ---- rate limiting, backoff, Retry-After ---------------------------------------------------- */

static void test_ratelimit(void **state)
{
    (void)state;
    struct kube_ratelimit rl;
    uint64_t t = 1000000;
    kube_ratelimit_init(&rl, 10, 5, t);
    for (int i = 0; i < 5; i++)
        assert_int_equal(kube_ratelimit_reserve(&rl, t), 0);
    /* the 6th waits one token (100 ms at 10 QPS), the 7th two */
    assert_int_equal(kube_ratelimit_reserve(&rl, t), 100000);
    assert_int_equal(kube_ratelimit_reserve(&rl, t), 200000);
    /* after the reservations are due, tokens accrue again, never past the burst */
    t += 200000;
    assert_int_equal(kube_ratelimit_reserve(&rl, t), 100000);
    t += 10 * 1000000;
    for (int i = 0; i < 5; i++)
        assert_int_equal(kube_ratelimit_reserve(&rl, t), 0);
    assert_true(kube_ratelimit_reserve(&rl, t) > 0);
    /* 100 requests at 20 QPS burst 1: the last one is due at ~99/20 s */
    kube_ratelimit_init(&rl, 20, 1, 0);
    uint64_t w = 0;
    for (int i = 0; i < 100; i++)
        w = kube_ratelimit_reserve(&rl, 0);
    assert_in_range(w, 4950000 - 1, 4950000 + 1);
}

/* The informers' sync deadline runs on progress: a list that keeps handing over items never
 * stalls, one that hands over nothing for stall_ms does. */
static void test_sync_stalled(void **state)
{
    (void)state;
    static const struct {
        uint64_t listed, now_ms;
        bool stalled;
    } steps[] = {
        {0, 1000, false},                             /* the first look starts the clock */
        {0, 60999, false},                            /* nothing yet, under the stall */
        {0, 61000, true},                             /* nothing for 60 s: a dead server */
        {500, 61100, false},                          /* a page came: the clock starts again */
        {500, 121099, false},                         /* just under 60 s since */
        {1000, 121100, false}, {1500, 300000, false}, /* slow pages, each within 60 s of the last */
        {1500, 360000, true},
    };
    struct kube_sync_progress p = {0};
    for (size_t i = 0; i < ARRAY_SIZE(steps); i++)
        assert_int_equal(kube_sync_stalled(&p, steps[i].listed, steps[i].now_ms, 60000),
                         steps[i].stalled);
}

static void test_backoff(void **state)
{
    (void)state;
    for (unsigned a = 0; a < 70; a++) {
        uint64_t d = 200;
        for (unsigned i = 0; i < a && d < 10000; i++)
            d *= 2;
        if (d > 10000)
            d = 10000;
        for (uint64_t rnd = 0; rnd < 2000; rnd += 97) {
            uint64_t v = kube_backoff_ms(a, 200, 10000, rnd * 7919 + a);
            assert_in_range(v, d / 2, d);
        }
        assert_int_equal(kube_backoff_ms(a, 200, 10000, d - d / 2), d);
        assert_int_equal(kube_backoff_ms(a, 200, 10000, 0), d / 2);
    }
    /* jitter actually spreads */
    assert_int_not_equal(kube_backoff_ms(3, 200, 10000, 1), kube_backoff_ms(3, 200, 10000, 2));
}

static void test_retry_after(void **state)
{
    (void)state;
    uint64_t ms = 0;
    assert_int_equal(kube_parse_retry_after("3", 0, &ms), 0);
    assert_int_equal(ms, 3000);
    assert_int_equal(kube_parse_retry_after(" 120\r\n", 0, &ms), 0);
    assert_int_equal(ms, 120000);
    /* Sun, 29 Nov 2026 21:30:10 GMT is 10 s after now */
    uint64_t now = 1795987800ull * 1000;
    assert_int_equal(kube_parse_retry_after("Sun, 29 Nov 2026 21:30:10 GMT", now, &ms), 0);
    assert_int_equal(ms, 10000);
    assert_int_equal(kube_parse_retry_after("Sun, 29 Nov 2026 21:00:00 GMT", now, &ms), 0);
    assert_int_equal(ms, 0);
    /* the obsolete forms RFC 9110 says recipients must accept */
    assert_int_equal(kube_parse_retry_after("Sunday, 29-Nov-26 21:30:20 GMT", now, &ms), 0);
    assert_int_equal(ms, 20000);
    assert_int_equal(kube_parse_retry_after("Sun Nov 29 21:30:05 2026", now, &ms), 0);
    assert_int_equal(ms, 5000);
    assert_int_equal(kube_parse_retry_after("Sun, 29 Foo 2026 21:30:10 GMT", now, &ms), -EINVAL);
    /* a value too long to hold is rejected, not cut to its valid-looking start */
    char lng[80];
    memset(lng, ' ', sizeof(lng));
    lng[0] = '5';
    lng[sizeof(lng) - 2] = 'x';
    lng[sizeof(lng) - 1] = '\0';
    assert_int_equal(kube_parse_retry_after(lng, 0, &ms), -EINVAL);
    assert_int_equal(kube_parse_retry_after("Sun, 29 Nov 2026 25:30:10 GMT", now, &ms), -EINVAL);
    assert_int_equal(kube_parse_retry_after("Sun, 29 Nov 2026 21:30:10 GMT junk", now, &ms),
                     -EINVAL);
    assert_int_equal(kube_parse_retry_after("soon", now, &ms), -EINVAL);
    assert_int_equal(kube_parse_retry_after("-1", now, &ms), -EINVAL);
    assert_int_equal(kube_parse_retry_after("99999999999", now, &ms), -EINVAL);
}

/* ---- leases and projections --------------------------------------------------------------- */

static void test_lease_decide(void **state)
{
    (void)state;
    json_t *free_l = json_pack("{s:{}}", "spec");
    json_t *empty = json_pack("{s:{s:s}}", "spec", "holderIdentity", "");
    json_t *mine = json_pack("{s:{s:s}}", "spec", "holderIdentity", "me");
    json_t *other = json_pack("{s:{s:s}}", "spec", "holderIdentity", "them");
    assert_int_equal(kube_lease_decide(free_l, "me", false), KUBE_LEASE_ACQUIRE);
    assert_int_equal(kube_lease_decide(empty, "me", false), KUBE_LEASE_ACQUIRE);
    assert_int_equal(kube_lease_decide(mine, "me", false), KUBE_LEASE_RENEW);
    assert_int_equal(kube_lease_decide(other, "me", false), KUBE_LEASE_WAIT);
    assert_int_equal(kube_lease_decide(other, "me", true), KUBE_LEASE_ACQUIRE);
    json_decref(free_l);
    json_decref(empty);
    json_decref(mine);
    json_decref(other);
    char buf[48];
    time_rfc3339_us(1795987800123456ull, buf, sizeof(buf));
    assert_string_equal(buf, "2026-11-29T21:30:00.123456Z");
}

static void test_projection(void **state)
{
    (void)state;
    json_t *node = json_loads(
        "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"n1\",\"uid\":\"u\","
        "\"resourceVersion\":\"7\",\"labels\":{\"a\":\"b\"},\"annotations\":{\"big\":\"x\"},"
        "\"managedFields\":[1,2,3]},\"spec\":{\"unschedulable\":true,\"taints\":[]},"
        "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\"},\"images\":[1,2,3],"
        "\"nodeInfo\":{\"kernelVersion\":\"6.1\",\"osImage\":\"Debian\"}}}",
        0, NULL);
    assert_non_null(node);
    const char *const keep[] = {
        "spec.unschedulable", "status.allocatable",        "status.nodeInfo.kernelVersion",
        "status.absent.deep", "metadata.name.notanobject", NULL};
    json_t *p = kube_project_fields(node, keep);
    char *s = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(
        s, "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"labels\":{\"a\":\"b\"},"
           "\"name\":\"n1\",\"resourceVersion\":\"7\",\"uid\":\"u\"},\"spec\":{\"unschedulable\":"
           "true},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\"},\"nodeInfo\":{"
           "\"kernelVersion\":\"6.1\"}}}");
    free(s);
    json_decref(p);
    json_decref(node);
}

/* ---- what JSON costs decoded -------------------------------------------------------------- */

/* The price of text is at least what jansson allocates decoding it (its scratch included), and
 * not far above; a decoded value's price is what it holds. */
static void check_price(const char *label, const char *text, size_t n)
{
    /* only values made and freed here go through the counting allocator */
    json_alloc_count_start();
    json_error_t je;
    json_t *v = json_loadb(text, n, 0, &je);
    size_t peak = json_alloc_peak, live = json_alloc_live;
    if (!v) {
        json_alloc_count_stop();
        fail_msg("%s: not JSON: %s", label, je.text);
    }
    size_t price = kube_json_cost(text, n);
    size_t held = kube_json_value_cost(v);
    json_decref(v);
    size_t left = json_alloc_live;
    json_alloc_count_stop();
    if (price < peak || price > peak + peak / 4 + 4096)
        fail_msg("%s: priced %zu, jansson took %zu at its peak", label, price, peak);
    /* (a string escaped on the wire holds what it took there, a few bytes over its price) */
    if (held + held / 16 + 32 < live || held > live + live / 4 + 64)
        fail_msg("%s: the value priced %zu, jansson holds %zu", label, held, live);
    assert_int_equal(left, 0);
}

static char *repeat(const char *head, const char *item, size_t times, const char *tail)
{
    struct sbuf b;
    sbuf_init(&b, 64u << 20);
    sbuf_adds(&b, head);
    for (size_t i = 0; i < times; i++) {
        if (i)
            sbuf_adds(&b, ",");
        sbuf_addf(&b, item, (unsigned)i);
    }
    sbuf_adds(&b, tail);
    assert_int_equal(sbuf_check(&b), 0);
    return sbuf_steal(&b);
}

static void test_json_cost(void **state)
{
    (void)state;
    static const char *const small[] = {
        "{}",
        "[]",
        "{\"a\":1}",
        "[0]",
        "[1.5e3,-2,true,false,null]",
        "{\"k\":\"\",\"l\":\"x\",\"m\":[[],{}]}",
        "{\"esc\\u00e9\\n\":\"a\\\"b\\\\c\\u0041\\ud83d\\ude00\"}",
        " { \"ws\" : [ 1 , 2 ] ,\n\t\"x\" : { } } ",
    };
    for (size_t i = 0; i < ARRAY_SIZE(small); i++)
        check_price(small[i], small[i], strlen(small[i]));
    /* what a hostile server sends: tiny values, many of them */
    struct {
        const char *label, *head, *item, *tail;
        size_t times;
    } big[] = {
        {"objects", "{\"items\":[", "{}", "]}", 20000},
        {"zeros", "[", "0", "]", 50000},
        {"arrays", "[", "[]", "]", 20000},
        {"members", "{", "\"k%u\":null", "}", 5000},
        {"strings", "[", "\"s%u\"", "]", 20000},
        {"nodes", "{\"kind\":\"NodeList\",\"items\":[",
         "{\"metadata\":{\"name\":\"node-%u\",\"resourceVersion\":\"12345\",\"labels\":{"
         "\"nvidia.com/gpu.present\":\"true\",\"kubernetes.io/hostname\":\"node\"}},"
         "\"spec\":{\"taints\":[{\"key\":\"k\",\"effect\":\"NoSchedule\"}]},\"status\":{"
         "\"allocatable\":{\"cpu\":\"64\",\"nvidia.com/gpu\":\"8\"},\"conditions\":[{"
         "\"type\":\"Ready\",\"status\":\"True\"}]}}",
         "]}", 2000},
    };
    for (size_t i = 0; i < ARRAY_SIZE(big); i++) {
        _cleanup_free_ char *t = repeat(big[i].head, big[i].item, big[i].times, big[i].tail);
        check_price(big[i].label, t, strlen(t));
    }
    /* a long string, and deep nesting (past the 64 levels kept without allocating) */
    _cleanup_free_ char *lng = repeat("{\"a\":\"", "xxxxxxxxxxxxxxxx", 4096, "\"}");
    for (char *c = lng + 6; *c; c++)
        if (*c == ',')
            *c = 'y';
    check_price("long string", lng, strlen(lng));
    _cleanup_free_ char *key = repeat("{\"", "xxxxxxxxxxxxxxxx", 4096, "\":1}");
    for (char *c = key + 2; *c; c++)
        if (*c == ',')
            *c = 'y';
    check_price("long name", key, strlen(key));
    char deep[4000];
    size_t d = 0;
    for (int k = 0; k < 500; k++)
        deep[d++] = k % 2 ? '[' : '{', d += k % 2 ? 0 : (size_t)sprintf(deep + d, "\"k\":");
    for (int k = 499; k >= 0; k--)
        deep[d++] = k % 2 ? ']' : '}';
    deep[d] = '\0';
    check_price("deep", deep, d);

    /* the amplification the wire limit alone let through: ~70 times for "{}," */
    _cleanup_free_ char *objs = repeat("[", "{}", 100000, "]");
    size_t wire = strlen(objs);
    assert_true(kube_json_cost(objs, wire) > 60 * wire);
    /* anything at all is priced without harm */
    static const char *const junk[] = {"",       "\"",   "\"abc\\", "}}]]",
                                       "{{{[[[", "::,,", "tru",     "\x01\xff"};
    for (size_t i = 0; i < ARRAY_SIZE(junk); i++)
        (void)kube_json_cost(junk[i], strlen(junk[i]));
    (void)kube_json_cost(NULL, 0);
}

/* The text skimmed of the given members decodes to the object decoded whole less those members. */
static void expect_drop(const char *in, const char *const *paths, const char *under,
                        const char *want)
{
    size_t n = strlen(in);
    _cleanup_free_ char *out = xmalloc(n + 1);
    size_t m = kube_json_drop(in, n, paths, under, out);
    if (!want) {
        assert_int_equal(m, SIZE_MAX);
        return;
    }
    assert_true(m <= n);
    _cleanup_json_ json_t *got = json_loadb(out, m, 0, NULL);
    _cleanup_json_ json_t *exp = json_loads(want, 0, NULL);
    assert_non_null(got);
    assert_non_null(exp);
    if (!json_equal(got, exp))
        fail_msg("skimmed %.*s, want %s", (int)m, out, want);
}

static void test_json_drop(void **state)
{
    (void)state;
    static const char *const node[] = {"metadata.managedFields", "status.images", NULL};
    /* first, middle, last and only members left out; blanks anywhere */
    expect_drop("{\"metadata\":{\"managedFields\":[{\"manager\":\"x\",\"fieldsV1\":{\"f:a\":{}}}],"
                "\"name\":\"n1\",\"labels\":{\"a\":\"1\"}},\"status\":{\"capacity\":{\"x\":\"1\"},"
                "\"images\":[{\"names\":[\"a\",\"b\"],\"sizeBytes\":1}],\"phase\":\"x\"}}",
                node, NULL,
                "{\"metadata\":{\"name\":\"n1\",\"labels\":{\"a\":\"1\"}},"
                "\"status\":{\"capacity\":{\"x\":\"1\"},\"phase\":\"x\"}}");
    expect_drop(" { \"status\" : { \"images\" : [ ] } , \"spec\" : { } } ", node, NULL,
                "{\"status\":{},\"spec\":{}}");
    expect_drop("{\"status\":{\"a\":1,\"images\":[]}}", node, NULL, "{\"status\":{\"a\":1}}");
    /* nothing to leave out: the same object; a path through a non-object is left alone */
    expect_drop("{\"a\":[1,2,{\"b\":\"}]\\\"{\"}],\"c\":null,\"d\":-1.5e3,\"e\":true}", node, NULL,
                "{\"a\":[1,2,{\"b\":\"}]\\\"{\"}],\"c\":null,\"d\":-1.5e3,\"e\":true}");
    expect_drop("{\"metadata\":\"x\",\"status\":[{\"images\":1}]}", node, NULL,
                "{\"metadata\":\"x\",\"status\":[{\"images\":1}]}");
    /* a name with a dot is not a path; the paths of a watch event are under its object */
    expect_drop("{\"metadata.managedFields\":1,\"metadata\":{}}", node, NULL,
                "{\"metadata.managedFields\":1,\"metadata\":{}}");
    expect_drop("{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"n\","
                "\"managedFields\":[]},\"status\":{\"images\":[]}},\"status\":{\"images\":1}}",
                node, "object",
                "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"n\"},\"status\":{}},"
                "\"status\":{\"images\":1}}");
    /* given up (the caller decodes the original): not an object, unterminated, trailing
     * bytes, a missing colon, a name with escapes where the paths go, too deep */
    static const char *const bad[] = {"",
                                      "[]",
                                      "\"x\"",
                                      "{\"metadata\":{\"name\":\"n}}",
                                      "{\"a\":1} x",
                                      "{\"a\" 1}",
                                      "{\"a\":1,}",
                                      "{\"a\":[1,2}",
                                      "{\"st\\u0061tus\":{\"images\":1}}",
                                      "{\"metadata\":{\"n\\\"\":1}}"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        expect_drop(bad[i], node, NULL, NULL);
    static const char *const deep[] = {"a.a.a.a.a.a.a.a.a.a.a", NULL};
    expect_drop(
        "{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{}}}}}}}}}}}", deep,
        NULL, NULL);
    /* the benchmark's node: three quarters of it left out, the rest the same */
    const char *root = getenv("GPUOP_SOURCE_ROOT"); /* meson test's environment */
    assert_non_null(root);
    char path[4096];
    snprintf(path, sizeof(path), "%s/bench/operator/node-template.yaml", root);
    _cleanup_json_ json_t *tmpl = NULL;
    struct err e = {0};
    assert_int_equal(yaml_load_file(path, &tmpl, &e), 0);
    _cleanup_free_ char *text = json_dumps(tmpl, JSON_INDENT(2));
    size_t n = strlen(text);
    _cleanup_free_ char *out = xmalloc(n);
    size_t m = kube_json_drop(text, n, node, NULL, out);
    assert_true(m < n / 3);
    _cleanup_json_ json_t *got = json_loadb(out, m, 0, NULL);
    json_object_del(json_object_get(tmpl, "metadata"), "managedFields");
    json_object_del(json_object_get(tmpl, "status"), "images");
    assert_true(json_equal(got, tmpl));
}

/* A new version shares with the one it replaces every value that did not change: the same
 * pointers where equal (objects gone into, arrays whole), its own where changed, equal to what
 * it was made as. */
static void test_share_unchanged(void **state)
{
    (void)state;
    static const struct {
        const char *old, *fresh;
        const char *shared; /* paths (space-separated) that must be old's pointer */
        const char *own;    /* paths that must not */
        bool same;
    } cases[] = {
        /* a node patched: its labels set and an annotation changed, nothing else */
        {"{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"5\","
         "\"labels\":[\"a=1\",\"b=2\"],\"annotations\":{\"x\":\"1\",\"y\":\"t1\"}},"
         "\"status\":{\"nodeInfo\":{\"bootID\":\"b\",\"kernelVersion\":\"6\"},"
         "\"allocatable\":{\"nvidia.com/gpu\":\"8\"}},\"spec\":{\"taints\":[{\"k\":\"v\"}]}}",
         "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"6\","
         "\"labels\":[\"a=1\",\"b=3\"],\"annotations\":{\"x\":\"1\",\"y\":\"t2\"}},"
         "\"status\":{\"nodeInfo\":{\"bootID\":\"b\",\"kernelVersion\":\"6\"},"
         "\"allocatable\":{\"nvidia.com/gpu\":\"8\"}},\"spec\":{\"taints\":[{\"k\":\"v\"}]}}",
         "kind metadata.name metadata.annotations.x status status.nodeInfo status.allocatable "
         "spec spec.taints",
         "metadata metadata.resourceVersion metadata.labels metadata.annotations "
         "metadata.annotations.y",
         false},
        /* everything equal: the whole of it old's */
        {"{\"a\":{\"b\":[1,2],\"c\":\"s\"},\"d\":null,\"e\":1.5}",
         "{\"a\":{\"b\":[1,2],\"c\":\"s\"},\"d\":null,\"e\":1.5}", "a a.b a.c e", "", true},
        /* a member added, one gone, a type changed, an array's element changed */
        {"{\"a\":{\"b\":1,\"gone\":2},\"c\":[1,{\"x\":1}],\"d\":\"1\",\"k\":{\"z\":\"q\"}}",
         "{\"a\":{\"b\":1,\"new\":2},\"c\":[1,{\"x\":2}],\"d\":1,\"k\":{\"z\":\"q\"}}", "k",
         "a c d", false},
        /* an empty object and an empty array are values like others */
        {"{\"a\":{},\"b\":[],\"c\":{\"d\":{}}}", "{\"a\":{},\"b\":[],\"c\":{\"d\":{},\"e\":1}}",
         "a b c.d", "c", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_json_ json_t *old = json_loads(cases[i].old, 0, NULL);
        json_t *fresh = json_loads(cases[i].fresh, 0, NULL);
        _cleanup_json_ json_t *want = json_deep_copy(fresh);
        assert_non_null(old);
        assert_non_null(fresh);
        _cleanup_json_ json_t *before = json_deep_copy(old);
        bool same = kube_share_unchanged(fresh, old);
        if (same != cases[i].same)
            fail_msg("case %zu: same %d", i, same);
        /* the new version is what it was made as; the old one untouched */
        assert_true(json_equal(fresh, want));
        assert_true(json_equal(old, before));
        for (int own = 0; own < 2; own++) {
            _cleanup_free_ char *list = xstrdup(own ? cases[i].own : cases[i].shared);
            char *save = NULL;
            for (char *p = strtok_r(list, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
                json_t *f = kobj_path(fresh, p), *o = kobj_path(old, p);
                assert_non_null(f);
                if ((f == o) == (bool)own)
                    fail_msg("case %zu: %s %s old's", i, p, own ? "is" : "is not");
            }
        }
        json_decref(fresh);
    }
    /* not objects: nothing to share */
    _cleanup_json_ json_t *a = json_array(), *o = json_object();
    assert_false(kube_share_unchanged(a, o));
}

/* kube_json_may_hold: false only when no decoded name or string can hold one of the strings. */
static void test_json_may_hold(void **state)
{
    (void)state;
    static const char *const req[] = {"nvidia.com/", "requests", NULL};
    static const char *const lim[] = {"nvidia.com/", "limits", NULL};
    static const char *const claims[] = {"resourceClaims", NULL};
    static const char *const *const gpu[] = {req, lim, claims, NULL};
    static const char *const cafe[] = {"caf\xc3\xa9", NULL};
    static const char *const *const accent[] = {cafe, NULL};
    static const struct {
        const char *text;
        const char *const *const *strings;
        bool may;
    } cases[] = {
        {"{\"metadata\":{\"name\":\"x\"},\"spec\":{\"containers\":[{\"image\":\"busybox\"}]}}", gpu,
         false},
        {"", gpu, false},
        /* a group whole, anywhere in the text: a request, a name, an annotation */
        {"{\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}", gpu, true},
        {"{\"resources\":{\"requests\":{\"nvidia.com/mig-1g.10gb\":\"1\"}}}", gpu, true},
        {"{\"metadata\":{\"name\":\"nvidia.com/x\",\"labels\":{\"limits\":\"\"}}}", gpu, true},
        {"{\"metadata\":{\"annotations\":{\"a\":\"see nvidia.com/gpu requests\"}}}", gpu, true},
        {"{\"spec\":{\"resourceClaims\":[]}}", gpu, true},
        /* part of a group: an operand pod (tolerations, a node selector), a CPU request */
        {"{\"spec\":{\"tolerations\":[{\"key\":\"nvidia.com/gpu\"}],\"nodeSelector\":"
         "{\"nvidia.com/gpu.deploy.driver\":\"true\"},\"containers\":[{\"resources\":{}}]}}",
         gpu, false},
        {"{\"spec\":{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]}}", gpu,
         false},
        /* escapes that may hide a match: the slash, a letter of one, anything invalid */
        {"{\"k\":\"nvidia.com\\/gpu\"}", gpu, true},
        {"{\"k\":\"\\u0071\"}", gpu, true},
        {"{\"k\":\"\\u006evidia.com/gpu\"}", gpu, true},
        {"{\"k\":\"\\u006Evidia\"}", gpu, true},
        {"{\"k\":\"\\x\"}", gpu, true},
        {"{\"k\":\"\\u00\"}", gpu, true},
        {"{\"k\":\"\\u00g1\"}", gpu, true},
        {"{\"k\":\"ab\\", gpu, true},
        /* escapes of characters no string holds: '<', a quote, a backslash, a newline, é */
        {"{\"k\":\"\\u003ca\\u003e\"}", gpu, false},
        {"{\"last-applied\":\"{\\\"a\\\":\\\"b\\\\n\\\"}\\n\\t\"}", gpu, false},
        {"{\"k\":\"caf\\u00e9\"}", gpu, false},
        /* an escaped backslash, then a slash that is no escape: read as a decoder does */
        {"{\"k\":\"a\\\\/b\"}", gpu, false},
        /* a string outside ASCII: any escape of a character outside ASCII may be part of it */
        {"{\"k\":\"caf\\u00e9\"}", accent, true},
        {"{\"k\":\"caf\\u00c3\"}", accent, true},
        {"{\"k\":\"cafe\\u003c\"}", accent, false},
        {"{\"k\":\"caf\xc3\xa9\"}", accent, true},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        bool may = kube_json_may_hold(cases[i].text, strlen(cases[i].text), cases[i].strings);
        if (may != cases[i].may)
            fail_msg("case %zu (%s): %d", i, cases[i].text, may);
        /* the property: for text jansson decodes, false means no name or string holds one */
        json_t *v = json_loads(cases[i].text, JSON_DECODE_ANY, NULL);
        if (v && !may) {
            _cleanup_free_ char *dump = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            for (size_t g = 0; cases[i].strings[g]; g++) {
                bool all = true;
                for (size_t k = 0; cases[i].strings[g][k]; k++)
                    all = all && strstr(dump, cases[i].strings[g][k]);
                assert_false(all);
            }
        }
        json_decref(v);
    }
}

/* kube_prefilter_pass: what is passed over, what the owner is told of it, what is decoded. */
struct passed {
    char log[512];
    bool refuse; /* the owner holds it: decode */
};

static bool note_pass(enum kube_watch_type t, const char *ns, const char *name, const char *rv,
                      void *ud)
{
    struct passed *ps = ud;
    size_t l = strlen(ps->log);
    snprintf(ps->log + l, sizeof(ps->log) - l, "%s %s/%s@%s;", kube_watch_type_name(t),
             ns ? ns : "-", name, rv ? rv : "-");
    return !ps->refuse;
}

static void test_prefilter(void **state)
{
    (void)state;
    static const char *const req[] = {"nvidia.com/", "requests", NULL};
    static const char *const claims[] = {"resourceClaims", NULL};
    static const char *const *const gpu[] = {req, claims, NULL};
    static const struct {
        const char *text;
        bool event;
        bool pass;
        const char *told; /* what note_pass heard */
    } cases[] = {
        {"{\"metadata\":{\"name\":\"p1\",\"namespace\":\"ns\",\"resourceVersion\":\"7\"},"
         "\"spec\":{\"containers\":[{\"image\":\"x\"}]}}",
         false, true, "ADDED ns/p1@7;"},
        {"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"resourceVersion\":\"8\","
         "\"name\":\"p1\",\"namespace\":\"ns\"},\"status\":{\"phase\":\"Running\"}}}",
         true, true, "MODIFIED ns/p1@8;"},
        {"{\"object\":{\"metadata\":{\"name\":\"n1\"}},\"type\":\"DELETED\"}", true, true,
         "DELETED -/n1@-;"},
        {" {\"type\" : \"ADDED\" , \"object\" : {\"kind\":\"Pod\",\"metadata\" : { \"name\" : "
         "\"a\" "
         ", \"resourceVersion\":\"9\"} } } ",
         true, true, "ADDED -/a@9;"},
        /* never a BOOKMARK nor an ERROR, nor an unknown type */
        {"{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"name\":\"b\",\"resourceVersion\":"
         "\"10\"}}}",
         true, false, ""},
        {"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"metadata\":{\"name\":"
         "\"x\"}}}",
         true, false, ""},
        {"{\"type\":\"SYNC\",\"object\":{\"metadata\":{\"name\":\"x\"}}}", true, false, ""},
        {"{\"object\":{\"metadata\":{\"name\":\"x\"}}}", true, false, ""},
        /* a group whole anywhere: a request, the name, an annotation; not part of one */
        {"{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":{"
         "\"requests\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
         false, false, ""},
        {"{\"metadata\":{\"name\":\"requests\",\"labels\":{\"nvidia.com/a\":\"\"}}}", false, false,
         ""},
        {"{\"metadata\":{\"name\":\"p\",\"namespace\":\"gpu-operator\"},\"spec\":{"
         "\"tolerations\":[{\"key\":\"nvidia.com/gpu\"}]}}",
         false, true, "ADDED gpu-operator/p@-;"},
        {"{\"metadata\":{\"name\":\"p\",\"annotations\":{\"x\":\"resourceClaims\"}}}", false, false,
         ""},
        /* an escape that may hide one; a name or version with escapes; no name; twice */
        {"{\"metadata\":{\"name\":\"p\"},\"x\":\"nvidia.com\\/gpu\"}", false, false, ""},
        {"{\"metadata\":{\"name\":\"p\\u0031\"}}", false, false, ""},
        {"{\"metadata\":{\"name\":\"p\",\"resourceVersion\":\"\\u0031\"}}", false, false, ""},
        {"{\"metadata\":{\"namespace\":\"ns\"}}", false, false, ""},
        {"{\"metadata\":{\"name\":\"\"}}", false, false, ""},
        {"{\"metadata\":{\"name\":1}}", false, false, ""},
        {"{\"metadata\":{\"name\":\"a\"},\"metadata\":{\"name\":\"b\"}}", false, false, ""},
        {"{\"metadata\":{\"name\":\"a\",\"name\":\"b\"}}", false, false, ""},
        /* not an object as expected: decoded (and refused by jansson) */
        {"{\"metadata\":{\"name\":\"a\"}", false, false, ""},
        {"[{\"metadata\":{\"name\":\"a\"}}]", false, false, ""},
        /* an event's whole line is looked at, a list item's whole text */
        {"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}},\"x\":\"resourceClaims\"}",
         true, false, ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct passed ps = {{0}, false};
        struct kube_prefilter pf = {gpu, note_pass, &ps};
        bool pass = kube_prefilter_pass(&pf, cases[i].text, strlen(cases[i].text), cases[i].event);
        if (pass != cases[i].pass || strcmp(ps.log, cases[i].told) != 0)
            fail_msg("case %zu: pass %d, told \"%s\"", i, pass, ps.log);
        /* the owner holding it: decoded after all */
        ps = (struct passed){{0}, true};
        assert_false(
            kube_prefilter_pass(&pf, cases[i].text, strlen(cases[i].text), cases[i].event));
    }
    assert_false(kube_prefilter_pass(NULL, "{}", 2, false));
    /* a name longer than kept: decoded */
    _cleanup_free_ char *longname = repeat("{\"metadata\":{\"name\":\"", "a", 300, "\"}}");
    struct passed ps = {{0}, false};
    struct kube_prefilter pf = {gpu, note_pass, &ps};
    assert_false(kube_prefilter_pass(&pf, longname, strlen(longname), false));

    /* in a watch stream: the passed-over events never reach the handler; the others do */
    struct seen s = {0};
    struct kube_watch_parser p;
    kube_watch_parser_init(&p, 4096, SIZE_MAX, collect, &s);
    p.pf = &pf;
    const char *st =
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"plain\",\"resourceVersion\":"
        "\"1\"}}}\n"
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"gpu\",\"resourceVersion\":\"2\"},"
        "\"spec\":{\"resourceClaims\":[{\"name\":\"c\"}]}}}\n"
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"3\"}}}\n"
        "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"plain\",\"resourceVersion\":"
        "\"4\"}}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n";
    struct err e = {0};
    assert_int_equal(kube_watch_parser_feed(&p, st, strlen(st), &e), 0);
    kube_watch_parser_free(&p);
    assert_string_equal(s.log, "ADDED:gpu;BOOKMARK:-;ERROR:-;");
    assert_int_equal(p.skipped, 2);
    assert_string_equal(ps.log, "ADDED -/plain@1;DELETED -/plain@4;");
}

static void test_decoded_limit(void **state)
{
    (void)state;
    struct err e = {0};
    json_t *v = NULL;
    _cleanup_free_ char *objs = repeat("{\"items\":[", "{}", 100000, "]}");
    size_t n = strlen(objs);
    assert_int_equal(kube_json_parse(objs, n, 4u << 20, "list nodes", &v, &e), -EFBIG);
    assert_null(v);
    assert_non_null(strstr(e.msg, "list nodes: the response would take about "));
    assert_non_null(strstr(e.msg, "more than the 4.0 MiB limit (kube_options.max_decoded)"));
    assert_int_equal(kube_json_parse(objs, n, 64u << 20, "list nodes", &v, &e), 0);
    json_decref(v);

    /* a watch event, priced before it is decoded; then the in-flight budget while handled */
    struct seen s = {0};
    struct kube_watch_parser p;
    _cleanup_free_ char *ev = repeat("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":"
                                     "\"big\"},\"x\":[",
                                     "0", 10000, "]}}\n");
    kube_watch_parser_init(&p, 1u << 20, 64u << 10, collect, &s);
    assert_int_equal(kube_watch_parser_feed(&p, ev, strlen(ev), &e), -EFBIG);
    assert_non_null(strstr(e.msg, "watch event: the event would take about"));
    kube_watch_parser_free(&p);
    assert_int_equal(s.n, 0);

    struct kube_budget mem;
    kube_budget_init(&mem, 1u << 20);
    kube_watch_parser_init(&p, 1u << 20, SIZE_MAX, collect, &s);
    p.mem = &mem;
    /* split, so the line is buffered (and its buffer taken from the budget) */
    size_t half = strlen(ev) / 2;
    assert_int_equal(kube_watch_parser_feed(&p, ev, half, &e), 0);
    assert_true(kube_budget_used(&mem) > 0);
    assert_int_equal(kube_watch_parser_feed(&p, ev + half, strlen(ev) - half, &e), 0);
    assert_int_equal(s.n, 1);
    kube_watch_parser_free(&p);
    assert_int_equal(kube_budget_used(&mem), 0);
    assert_true(mem.peak > kube_json_cost(ev, strlen(ev)));
    /* a budget too small for the event */
    mem.limit = 300u << 10;
    kube_watch_parser_init(&p, 1u << 20, SIZE_MAX, collect, &s);
    p.mem = &mem;
    assert_int_equal(kube_watch_parser_feed(&p, ev, strlen(ev), &e), -ENOBUFS);
    assert_non_null(strstr(e.msg, "kube_options.max_in_flight"));
    kube_watch_parser_free(&p);
    assert_int_equal(kube_budget_used(&mem), 0);
    kube_budget_destroy(&mem);

    /* an error body too costly to decode is not decoded: its first bytes are the message */
    _cleanup_free_ char *st =
        repeat("{\"kind\":\"Status\",\"message\":\"m\",\"x\":[", "{}", 20000, "]}");
    assert_int_equal(kube_status_err(500, st, strlen(st), "list nodes", &e), -EIO);
    assert_non_null(strstr(e.msg, "list nodes: HTTP 500: {\"kind\":\"Status\""));
}

static void test_budget(void **state)
{
    (void)state;
    struct kube_budget b;
    kube_budget_init(&b, 100);
    assert_int_equal(kube_budget_take(&b, 60), 0);
    assert_int_equal(kube_budget_take(&b, 41), -ENOBUFS);
    assert_int_equal(kube_budget_used(&b), 60);
    assert_int_equal(kube_budget_take(&b, 40), 0);
    assert_int_equal(kube_budget_take(&b, SIZE_MAX), -ENOBUFS);
    kube_budget_put(&b, 100);
    assert_int_equal(b.peak, 100);
    assert_int_equal(kube_budget_used(&b), 0);
    kube_budget_destroy(&b);
    char m[32];
    kube_mib(m, sizeof(m), 3u << 20);
    assert_string_equal(m, "3.0 MiB");
    kube_mib(m, sizeof(m), 300u << 20);
    assert_string_equal(m, "300 MiB");
    kube_mib(m, sizeof(m), (size_t)20 << 30);
    assert_string_equal(m, "20 GiB");
    kube_mib(m, sizeof(m), 64u << 10);
    assert_string_equal(m, "64 KiB");
    kube_mib(m, sizeof(m), 100);
    assert_string_equal(m, "1 KiB");
}

/* kube_list_body_each: every item's exact bytes, the rest decoded, malformed bodies named. */
struct items_seen {
    char s[512];
    int stop_at; /* the item at which fn fails (1-based; 0: never) */
    int n;
};

static int items_cb(const char *text, size_t n, void *ud, struct err *e)
{
    struct items_seen *is = ud;
    if (++is->n == is->stop_at)
        return err_set(e, -ECANCELED, "stopped at %d", is->n);
    size_t l = strlen(is->s);
    snprintf(is->s + l, sizeof(is->s) - l, "%.*s|", (int)n, text);
    return 0;
}

static void test_list_body_each(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        int rc;
        const char *items; /* what fn saw */
        const char *rest;  /* the rest, compact, sorted */
    } cases[] = {
        {"{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"7\",\"continue\":\"c\"},"
         "\"items\":[{\"a\":\"x]}\\\"[\"},{\"b\":[1,{\"c\":null}]}]}",
         0, "{\"a\":\"x]}\\\"[\"}|{\"b\":[1,{\"c\":null}]}|",
         "{\"kind\":\"NodeList\",\"metadata\":{\"continue\":\"c\",\"resourceVersion\":\"7\"}}"},
        {" { \"items\" : [ ] , \"n\" : -1.5e3 , \"t\":true } \n", 0, "",
         "{\"n\":-1500.0,\"t\":true}"},
        {"{\"items\":[ 1 , \"s\" ,null,[]]}", 0, "1|\"s\"|null|[]|", "{}"},
        {"{\"metadata\":{},\"items\":[{}],\"zz\":[]}", 0, "{}|", "{\"metadata\":{},\"zz\":[]}"},
        {"{\"kind\":\"NodeList\"}", -EBADMSG, "", NULL},
        {"{}", -EBADMSG, "", NULL},
        {"[]", -EBADMSG, "", NULL},
        {"", -EBADMSG, "", NULL},
        {"{\"items\":{}}", -EBADMSG, "", NULL},
        {"{\"items\":[{}],\"items\":[{}]}", -EBADMSG, "{}|", NULL},
        {"{\"items\":[{},]}", -EBADMSG, "{}|", NULL},
        {"{\"items\":[{}] \"x\":1}", -EBADMSG, "{}|", NULL},
        {"{\"items\":[{}]}x", -EBADMSG, "{}|", NULL},
        {"{\"items\":[{}]", -EBADMSG, "{}|", NULL},
        {"{\"items\":[{\"a\":1}", -EBADMSG, "{\"a\":1}|", NULL},
        {"{\"items\":[\"open]}", -EBADMSG, "", NULL},
        {"{\"m\":{\"a\":},\"items\":[]}", -EBADMSG, "", NULL},
        {"{\"m\" 1,\"items\":[]}", -EBADMSG, "", NULL},
        {"{m:1,\"items\":[]}", -EBADMSG, "", NULL},
        {"{\"a\\u0000b\":1,\"items\":[]}", -EBADMSG, "", NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct items_seen is = {{0}, 0, 0};
        struct err e = {0};
        json_t *rest = NULL;
        int rc = kube_list_body_each(cases[i].body, strlen(cases[i].body), 1u << 20, "list x",
                                     items_cb, &is, &rest, &e);
        if (rc != cases[i].rc || strcmp(is.s, cases[i].items) != 0)
            fail_msg("case %zu: rc %d (%s), items \"%s\"", i, rc, e.msg, is.s);
        if (rc == 0) {
            char *t = json_dumps(rest, JSON_COMPACT | JSON_SORT_KEYS);
            if (strcmp(t, cases[i].rest) != 0)
                fail_msg("case %zu: rest %s", i, t);
            free(t);
            json_decref(rest);
        } else {
            assert_null(rest);
            assert_non_null(strstr(e.msg, "list x: "));
        }
    }
    /* fn's error stops the walk and comes back as it is */
    struct items_seen is = {{0}, 2, 0};
    struct err e = {0};
    const char *b = "{\"items\":[{},{},{}]}";
    assert_int_equal(kube_list_body_each(b, strlen(b), 1u << 20, "list x", items_cb, &is, NULL, &e),
                     -ECANCELED);
    assert_string_equal(is.s, "{}|");
    assert_string_equal(e.msg, "stopped at 2");
    /* a member besides the items priced before it is decoded */
    const char *big = "{\"x\":[{},{},{},{},{},{},{},{}],\"items\":[]}";
    is = (struct items_seen){{0}, 0, 0};
    assert_int_equal(kube_list_body_each(big, strlen(big), 256, "list x", items_cb, &is, NULL, &e),
                     -EFBIG);
    assert_non_null(strstr(e.msg, "(kube_options.max_decoded)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_selectors),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_kubeconfig),
        cmocka_unit_test(test_kubeconfig_errors),
        cmocka_unit_test(test_kubeconfig_files),
        cmocka_unit_test(test_client_for_caller),
        cmocka_unit_test(test_in_cluster),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_watch_parser_chunks),
        cmocka_unit_test(test_watch_parser_errors),
        cmocka_unit_test(test_ratelimit),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_sync_stalled),
        cmocka_unit_test(test_retry_after),
        cmocka_unit_test(test_lease_decide),
        cmocka_unit_test(test_projection),
        cmocka_unit_test(test_json_cost),
        cmocka_unit_test(test_json_drop),
        cmocka_unit_test(test_share_unchanged),
        cmocka_unit_test(test_json_may_hold),
        cmocka_unit_test(test_prefilter),
        cmocka_unit_test(test_decoded_limit),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_list_body_each),
    };
    int r = cmocka_run_group_tests(tests, setup_tmp, NULL);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return r;
}
