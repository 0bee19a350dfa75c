/* SPDX-License-Identifier: Apache-2.0 */
/* Connection config: kubeconfig files and the in-cluster service account. */
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>

#include "kube-internal.h"
#include "yamlcfg.h"

#define KUBE_SMALL_FILE_MAX (1u << 20)

static void blob_clear(struct kube_blob *b)
{
    if (b->data) {
        explicit_bzero(b->data, b->len);
        free(b->data);
    }
    b->data = NULL;
    b->len = 0;
}

void kube_conn_clear(struct kube_conn *c)
{
    if (!c)
        return;
    free(c->server);
    free(c->ca_file);
    blob_clear(&c->ca_data);
    free(c->cert_file);
    blob_clear(&c->cert_data);
    free(c->key_file);
    blob_clear(&c->key_data);
    if (c->token) {
        explicit_bzero(c->token, strlen(c->token));
        free(c->token);
    }
    free(c->token_file);
    free(c->ns);
    memset(c, 0, sizeof(*c));
}

static void kube_conn_clearp(struct kube_conn *c)
{
    kube_conn_clear(c);
}

int kube_base64_decode(const char *in, size_t n, char **ret, size_t *ret_len)
{
    return base64_decode(in, n, ret, ret_len);
}

/* Finds {name: <name>, <field>: {...}} in doc[list]. */
static int named_entry(json_t *doc, const char *list, const char *field, const char *name,
                       const char *path, json_t **ret, struct err *e)
{
    json_t *arr = json_object_get(doc, list);
    if (arr && !json_is_array(arr) && !json_is_null(arr))
        return err_set(e, -EINVAL, "%s: %s: expected a list, got %s", path, list,
                       cfg_type_name(arr));
    size_t i;
    json_t *it;
    json_array_foreach (arr, i, it) {
        json_t *n = json_object_get(it, "name");
        if (json_is_string(n) && strcmp(json_string_value(n), name) == 0) {
            json_t *v = json_object_get(it, field);
            if (!json_is_object(v))
                return err_set(e, -EINVAL, "%s: %s[%zu] (\"%s\").%s: expected a mapping", path,
                               list, i, name, field);
            *ret = v;
            return 0;
        }
    }
    return err_set(e, -ENOENT, "%s: %s: no entry named \"%s\"", path, list, name);
}

static char *resolve_path(const char *kubeconfig, const char *p)
{
    if (p[0] == '/')
        return xstrdup(p);
    _cleanup_free_ char *copy = xstrdup(kubeconfig);
    return xasprintf("%s/%s", dirname(copy), p);
}

/* A file path or inline -data (base64) for one credential. */
static int file_or_data(json_t *obj, const char *ctx, const char *path, const char *file_key,
                        const char *data_key, char **ret_file, struct kube_blob *ret_data,
                        struct err *e)
{
    const char *file = NULL, *data = NULL;
    int r = cfg_string(obj, file_key, ctx, false, &file, e);
    if (r < 0)
        return r;
    r = cfg_string(obj, data_key, ctx, false, &data, e);
    if (r < 0)
        return r;
    if (data && data[0]) {
        if (kube_base64_decode(data, strlen(data), &ret_data->data, &ret_data->len) < 0 ||
            ret_data->len == 0)
            return err_set(e, -EINVAL, "%s.%s: not valid base64", ctx, data_key);
        return 0;
    }
    if (file && file[0])
        *ret_file = resolve_path(path, file);
    return 0;
}

int kube_conn_from_kubeconfig(json_t *doc, const char *path, const char *context,
                              struct kube_conn *ret, struct err *e)
{
    _cleanup_(kube_conn_clearp) struct kube_conn c = {0};
    if (!json_is_object(doc))
        return err_set(e, -EINVAL, "%s: expected a kubeconfig mapping, got %s", path,
                       cfg_type_name(doc));
    const char *ctxname = context;
    if (!ctxname || !ctxname[0]) {
        ctxname = NULL;
        int r = cfg_string(doc, "current-context", path, false, &ctxname, e);
        if (r < 0)
            return r;
        if (!ctxname || !ctxname[0])
            return err_set(e, -EINVAL, "%s: current-context is not set and no context was given",
                           path);
    }
    json_t *ctx, *cluster, *user = NULL;
    int r = named_entry(doc, "contexts", "context", ctxname, path, &ctx, e);
    if (r < 0)
        return r;
    char where[256];
    snprintf(where, sizeof(where), "%s: context \"%s\"", path, ctxname);
    const char *cluster_name = NULL, *user_name = NULL, *ns = NULL;
    if ((r = cfg_string(ctx, "cluster", where, true, &cluster_name, e)) < 0 ||
        (r = cfg_string(ctx, "user", where, false, &user_name, e)) < 0 ||
        (r = cfg_string(ctx, "namespace", where, false, &ns, e)) < 0)
        return r;
    if ((r = named_entry(doc, "clusters", "cluster", cluster_name, path, &cluster, e)) < 0)
        return r;
    if (user_name && user_name[0] &&
        (r = named_entry(doc, "users", "user", user_name, path, &user, e)) < 0)
        return r;

    snprintf(where, sizeof(where), "%s: cluster \"%s\"", path, cluster_name);
    const char *server = NULL;
    char shown[320];
    if ((r = cfg_string(cluster, "server", where, true, &server, e)) < 0)
        return r;
    if (!str_has_prefix(server, "https://") && !str_has_prefix(server, "http://"))
        return err_set(e, -EINVAL, "%s.server: \"%s\" is not an http(s):// URL", where,
                       kube_url_shown(server, shown, sizeof(shown)));
    bool insecure = false;
    if ((r = cfg_bool(cluster, "insecure-skip-tls-verify", where, false, &insecure, e)) < 0)
        return r;
    if (insecure)
        return err_set(e, -EPERM,
                       "%s.insecure-skip-tls-verify: refused: gpuop always verifies the API "
                       "server's TLS certificate; give certificate-authority(-data) instead",
                       where);
    c.server = xstrdup(server);
    size_t sl = strlen(c.server);
    while (sl > 0 && c.server[sl - 1] == '/')
        c.server[--sl] = '\0';
    if ((r = file_or_data(cluster, where, path, "certificate-authority",
                          "certificate-authority-data", &c.ca_file, &c.ca_data, e)) < 0)
        return r;

    if (user) {
        snprintf(where, sizeof(where), "%s: user \"%s\"", path, user_name);
        static const char *const unsupported[] = {"exec", "auth-provider", "username", "password"};
        for (size_t i = 0; i < ARRAY_SIZE(unsupported); i++)
            if (json_object_get(user, unsupported[i]))
                return err_set(e, -EOPNOTSUPP,
                               "%s.%s: not supported; use a token, tokenFile or a client "
                               "certificate",
                               where, unsupported[i]);
        if ((r = file_or_data(user, where, path, "client-certificate", "client-certificate-data",
                              &c.cert_file, &c.cert_data, e)) < 0 ||
            (r = file_or_data(user, where, path, "client-key", "client-key-data", &c.key_file,
                              &c.key_data, e)) < 0)
            return r;
        bool has_cert = c.cert_file || c.cert_data.data;
        bool has_key = c.key_file || c.key_data.data;
        if (has_cert != has_key)
            return err_set(e, -EINVAL, "%s: a client certificate needs a client key and back",
                           where);
        const char *token = NULL, *token_file = NULL;
        if ((r = cfg_string(user, "token", where, false, &token, e)) < 0 ||
            (r = cfg_string(user, "tokenFile", where, false, &token_file, e)) < 0)
            return r;
        if (token && token[0])
            c.token = xstrdup(token);
        else if (token_file && token_file[0])
            c.token_file = resolve_path(path, token_file);
    }
    c.ns = xstrdup(ns && ns[0] ? ns : "default");
    *ret = c;
    memset(&c, 0, sizeof(c));
    return 0;
}

/* Appends the named entries of src[list] that dst lacks (first file wins). */
static void merge_list(json_t *dst, json_t *src, const char *list)
{
    json_t *s = json_object_get(src, list);
    if (!json_is_array(s))
        return;
    json_t *d = json_object_get(dst, list);
    if (!json_is_array(d)) {
        d = json_array();
        json_object_set_new(dst, list, d);
    }
    size_t i, j;
    json_t *it, *jt;
    json_array_foreach (s, i, it) {
        const char *n = json_string_value(json_object_get(it, "name"));
        bool dup = false;
        json_array_foreach (d, j, jt) {
            if (n && streq_ptr(n, json_string_value(json_object_get(jt, "name"))))
                dup = true;
        }
        if (!dup)
            json_array_append(d, it);
    }
}

int kube_conn_load_kubeconfig(const char *paths, const char *context, struct kube_conn *ret,
                              struct err *e)
{
    _cleanup_free_ char *list = xstrdup(paths);
    _cleanup_json_ json_t *merged = NULL;
    _cleanup_free_ char *first = NULL;
    char *save = NULL;
    for (char *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
        _cleanup_json_ json_t *doc = NULL;
        struct stat st;
        if (merged && stat(p, &st) < 0)
            continue; /* later files in a list may be absent, as kubectl allows */
        int r = yaml_load_file(p, &doc, e);
        if (r < 0)
            return err_prefix(e, "kubeconfig");
        if (!json_is_object(doc))
            return err_set(e, -EINVAL, "%s: expected a kubeconfig mapping, got %s", p,
                           cfg_type_name(doc));
        if (!merged) {
            merged = json_object();
            first = xstrdup(p);
        }
        const char *cur = json_string_value(json_object_get(doc, "current-context"));
        if (cur && cur[0] && !json_object_get(merged, "current-context"))
            json_object_set_new(merged, "current-context", json_string(cur));
        merge_list(merged, doc, "clusters");
        merge_list(merged, doc, "contexts");
        merge_list(merged, doc, "users");
    }
    if (!merged)
        return err_set(e, -ENOENT, "kubeconfig: no file in \"%s\"", paths);
    return kube_conn_from_kubeconfig(merged, first, context, ret, e);
}

int kube_conn_in_cluster(const char *sa_dir, struct kube_conn *ret, struct err *e)
{
    const char *host = env_get("KUBERNETES_SERVICE_HOST");
    const char *port = env_get("KUBERNETES_SERVICE_PORT");
    if (!host || !port)
        return err_set(e, -ENOENT,
                       "in-cluster config: KUBERNETES_SERVICE_HOST/PORT are not set (not in a "
                       "pod); give --kubeconfig or KUBECONFIG");
    unsigned p;
    if (parse_uint(port, &p) < 0 || p == 0 || p > 65535)
        return err_set(e, -EINVAL,
                       "in-cluster config: KUBERNETES_SERVICE_PORT \"%s\" is not a port", port);
    _cleanup_(kube_conn_clearp) struct kube_conn c = {0};
    if (strchr(host, ':'))
        c.server = xasprintf("https://[%s]:%u", host, p);
    else
        c.server = xasprintf("https://%s:%u", host, p);
    c.token_file = xasprintf("%s/token", sa_dir);
    c.ca_file = xasprintf("%s/ca.crt", sa_dir);
    struct stat st;
    if (stat(c.token_file, &st) < 0)
        return err_errno(e, -errno, "in-cluster config: service-account token \"%s\"",
                         c.token_file);
    if (stat(c.ca_file, &st) < 0)
        return err_errno(e, -errno, "in-cluster config: CA bundle \"%s\"", c.ca_file);
    _cleanup_free_ char *nsfile = xasprintf("%s/namespace", sa_dir);
    _cleanup_free_ char *ns = NULL;
    size_t len = 0;
    struct err ig = {0};
    if (file_read_all(nsfile, 4096, &ns, &len, &ig) == 0) {
        while (len > 0 && (ns[len - 1] == '\n' || ns[len - 1] == ' ' || ns[len - 1] == '\r'))
            ns[--len] = '\0';
    }
    c.ns = xstrdup(ns && ns[0] ? ns : "default");
    *ret = c;
    memset(&c, 0, sizeof(c));
    return 0;
}
