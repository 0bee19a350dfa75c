/* SPDX-License-Identifier: Apache-2.0 */
/* pods/<name>/log: the API server's checks (the container, the options), then where the kubelet
 * serves the log; the shell streams it (ksim_response.proxy). Kubelet answers other than 2xx
 * become the Status the API server makes of them. No I/O here. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <strings.h>

#include "ks-http.h"

/* A kubelet's answer is read up to this much when it is an error (the API server's limit). */
#define PROXY_ERROR_MAX 50000

static void render(struct ksim_response *resp, int code, const char *reason, json_t *details,
                   const char *msg)
{
    _cleanup_status_ struct ks_status st = {0};
    ks_status_set(&st, code, reason, details, "%s", msg);
    ks_render_status(resp, &st);
}

/* "[a b]" as Go prints a []string. */
static char *names_of(json_t *containers)
{
    struct sbuf b;
    sbuf_init(&b, 64 * 1024);
    sbuf_adds(&b, "[");
    size_t i;
    json_t *c;
    json_array_foreach (containers, i, c)
        sbuf_addf(&b, "%s%s", i ? " " : "", kobj_str(c, "name") ?: "");
    sbuf_adds(&b, "]");
    return ks_text_take(&b);
}

static bool has_container(json_t *spec, const char *name)
{
    static const char *const lists[] = {"containers", "initContainers", "ephemeralContainers"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *c;
        json_array_foreach (json_object_get(spec, lists[l]), i, c)
            if (streq_ptr(kobj_str(c, "name"), name))
                return true;
    }
    return false;
}

/* The container the request names, or the only one; NULL with the API server's 400 rendered. */
static const char *pick_container(json_t *pod, const char *name, json_t *q,
                                  struct ksim_response *resp)
{
    json_t *spec = json_object_get(pod, "spec");
    const char *want = ks_qget(q, "container");
    if (want && want[0]) {
        if (has_container(spec, want))
            return want;
        _cleanup_free_ char *m = xasprintf("container %s is not valid for pod %s", want, name);
        render(resp, 400, "BadRequest", NULL, m);
        return NULL;
    }
    json_t *cs = json_object_get(spec, "containers");
    if (json_array_size(cs) == 1)
        return kobj_str(json_array_get(cs, 0), "name");
    struct sbuf m;
    sbuf_init(&m, 128 * 1024);
    sbuf_addf(&m, "a container name must be specified for pod %s", name);
    if (json_array_size(cs) > 1) {
        _cleanup_free_ char *all = names_of(cs);
        sbuf_addf(&m, ", choose one of: %s", all);
        static const struct {
            const char *list, *what;
        } more[] = {{"initContainers", "init containers"},
                    {"ephemeralContainers", "ephemeral containers"}};
        for (size_t i = 0; i < ARRAY_SIZE(more); i++) {
            json_t *l = json_object_get(spec, more[i].list);
            if (json_array_size(l) == 0)
                continue;
            _cleanup_free_ char *n = names_of(l);
            sbuf_addf(&m, " or one of the %s: %s", more[i].what, n);
        }
    }
    _cleanup_free_ char *text = ks_text_take(&m);
    render(resp, 400, "BadRequest", NULL, text);
    return NULL;
}

/* The node's kubelet endpoint: its InternalIP (else its first address) and the port it
 * publishes in daemonEndpoints (10250 when absent). */
static const char *kubelet_host(json_t *node, unsigned *ret_port)
{
    const char *host = NULL;
    size_t i;
    json_t *a;
    json_array_foreach (kobj_path(node, "status.addresses"), i, a) {
        if (streq_ptr(kobj_str(a, "type"), "InternalIP")) {
            host = kobj_str(a, "address");
            break;
        }
        if (!host)
            host = kobj_str(a, "address");
    }
    json_t *port = kobj_path(node, "status.daemonEndpoints.kubeletEndpoint.Port");
    json_int_t p = json_is_integer(port) ? json_integer_value(port) : 10250;
    *ret_port = p > 0 && p < 65536 ? (unsigned)p : 10250;
    return host;
}

void ks_pod_log(struct ksim *ks, json_t *pod, const char *name, json_t *q,
                struct ksim_response *resp)
{
    /* PodLogOptions' integers (a bad one is the decoder's 400) */
    static const char *const ints[] = {"tailLines", "limitBytes", "sinceSeconds"};
    for (size_t i = 0; i < ARRAY_SIZE(ints); i++) {
        const char *v = ks_qget(q, ints[i]);
        int64_t n = 0;
        if (!v)
            continue;
        if (parse_i64(v, &n) < 0) {
            _cleanup_free_ char *m =
                xasprintf("strconv.ParseInt: parsing \"%s\": invalid syntax", v);
            render(resp, 400, "BadRequest", NULL, m);
            return;
        }
        if (n < 0 || (n == 0 && !streq(ints[i], "tailLines"))) {
            _cleanup_free_ char *m =
                xasprintf("PodLogOptions \"%s\" is invalid: %s: Invalid value: %" PRId64
                          ": must be greater than %s0",
                          name, ints[i], n, streq(ints[i], "tailLines") ? "or equal to " : "");
            render(resp, 422, "Invalid", NULL, m);
            return;
        }
    }
    const char *container = pick_container(pod, name, q, resp);
    if (!container)
        return;
    const char *node_name = kobj_path_str(pod, "spec.nodeName");
    if (!node_name || !node_name[0]) {
        /* not scheduled yet: the API server has nowhere to ask and answers an empty log */
        resp->code = 200;
        resp->content_type = "text/plain";
        return;
    }
    json_t *node = ks_get(ks_type_find(ks, "", "v1", "nodes"), "", node_name);
    if (!ks_node_external(node)) {
        /* kubesim's own simulated kubelet runs nothing and keeps no logs */
        _cleanup_status_ struct ks_status st = {0};
        ks_not_found_resource(&st);
        ks_render_status(resp, &st);
        return;
    }
    unsigned port = 10250;
    const char *host = kubelet_host(node, &port);
    if (!host || !host[0]) {
        _cleanup_free_ char *m = xasprintf("node \"%s\" has no address", node_name);
        render(resp, 500, "InternalError", NULL, m);
        return;
    }
    struct sbuf path;
    sbuf_init(&path, 16 * 1024);
    sbuf_adds(&path, "/containerLogs/");
    const char *segs[] = {kobj_namespace(pod) ?: "", name, container};
    bool bad = false;
    for (size_t i = 0; i < ARRAY_SIZE(segs); i++) {
        if (i)
            sbuf_adds(&path, "/");
        bad |= url_encode(&path, segs[i]) < 0;
    }
    /* the options the API server passes on, in its order */
    static const char *const bools[] = {"follow", "previous", "timestamps"};
    char sep = '?';
    for (size_t i = 0; i < ARRAY_SIZE(bools); i++)
        if (ks_qtrue(q, bools[i])) {
            sbuf_addf(&path, "%c%s=true", sep, bools[i]);
            sep = '&';
        }
    static const char *const vals[] = {"sinceSeconds", "sinceTime", "tailLines", "limitBytes"};
    for (size_t i = 0; i < ARRAY_SIZE(vals); i++) {
        const char *v = ks_qget(q, vals[i]);
        if (!v || !v[0])
            continue;
        sbuf_addf(&path, "%c%s=", sep, vals[i]);
        bad |= url_encode(&path, v) < 0;
        sep = '&';
    }
    if (bad || sbuf_check(&path) < 0) {
        sbuf_free(&path);
        render(resp, 400, "BadRequest", NULL, "log request too long");
        return;
    }
    struct ksim_proxy *p = xcalloc(1, sizeof(*p));
    p->host = xstrdup(host);
    p->port = (uint16_t)port;
    p->path = sbuf_steal(&path);
    p->name = xstrdup(name);
    p->follow = ks_qtrue(q, "follow");
    resp->code = 200;
    resp->content_type = "text/plain";
    resp->proxy = p;
}

void ksim_proxy_free(struct ksim_proxy *p)
{
    if (!p)
        return;
    free(p->host);
    free(p->path);
    free(p->name);
    free(p);
}

static void finish(struct ksim_response *resp)
{
    free(resp->body);
    resp->body = json_dumps(resp->json, JSON_COMPACT);
    if (!resp->body)
        resp->body = xstrdup("{}");
    resp->body_len = strlen(resp->body);
    json_decref(resp->json);
    resp->json = NULL;
}

void ksim_proxy_error(const struct ksim_proxy *p, int code, const char *body, size_t len,
                      struct ksim_response *resp)
{
    memset(resp, 0, sizeof(*resp));
    _cleanup_free_ char *text =
        xstrndup(body ? body : "", len > PROXY_ERROR_MAX ? PROXY_ERROR_MAX : len);
    json_t *details = json_pack("{s:s,s:s}", "name", p->name, "kind", "pods/log");
    /* as the API server's GenericHttpResponseChecker words them */
    if (code == 400) {
        json_decref(details);
        render(resp, 400, "BadRequest", NULL, text);
    } else if (code == 500) {
        json_decref(details);
        _cleanup_free_ char *m = xasprintf("Internal error occurred: %s", text);
        render(resp, 500, "InternalError", json_pack("{s:[{s:s}]}", "causes", "message", text), m);
    } else {
        static const struct {
            int code;
            const char *reason, *msg;
        } known[] = {
            {401, "Unauthorized", "the server has asked for the client to provide credentials"},
            {403, "Forbidden", NULL},
            {404, "NotFound", "the server could not find the requested resource"},
            {405, "MethodNotAllowed",
             "the server does not allow this method on the requested resource"},
            {409, "Conflict", "the server reported a conflict"},
            {422, "Invalid", "the server rejected our request due to an error in our request"},
            {429, "TooManyRequests",
             "the server has received too many requests and has asked us to try again later"},
            {504, "Timeout",
             "the server was unable to return a response in the time allotted, "
             "but may still be processing the request"},
        };
        const char *reason = "";
        _cleanup_free_ char *msg = xasprintf(
            "the server responded with the status code %d but did not return more information",
            code);
        if (code > 500) {
            free(msg);
            msg = xasprintf("an error on the server (\"%s\") has prevented the request from "
                            "succeeding",
                            text);
            reason = "InternalError";
        }
        for (size_t i = 0; i < ARRAY_SIZE(known); i++)
            if (known[i].code == code) {
                reason = known[i].reason;
                free(msg);
                msg = xstrdup(known[i].msg ? known[i].msg : text);
            }
        _cleanup_free_ char *m = xasprintf("%s ( pods/log %s)", msg, p->name);
        render(resp, code, reason, details, m);
    }
    finish(resp);
}

void ksim_proxy_dial_error(const struct ksim_proxy *p, const char *what, struct ksim_response *resp)
{
    memset(resp, 0, sizeof(*resp));
    _cleanup_free_ char *m =
        xasprintf("Get \"http://%s:%u%s\": %s", p->host, (unsigned)p->port, p->path, what);
    render(resp, 500, "", NULL, m);
    finish(resp);
}

int ksim_proxy_head_parse(const char *buf, size_t len, int *ret_code, int64_t *ret_length,
                          size_t *ret_head_len)
{
    const char *end = buf ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
    if (len >= 7 && strncmp(buf, "HTTP/1.", 7))
        return -EBADMSG;
    if (!end)
        return len >= 7 || !buf || !len || !strncmp(buf, "HTTP/1.", len) ? -EAGAIN : -EBADMSG;
    size_t head = (size_t)(end - buf) + 4;
    /* "HTTP/1.x NNN[ reason]" */
    if (head < 16 || buf[8] != ' ' || !isdigit((unsigned char)buf[9]) ||
        !isdigit((unsigned char)buf[10]) || !isdigit((unsigned char)buf[11]) ||
        (buf[12] != ' ' && buf[12] != '\r'))
        return -EBADMSG;
    int code = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    if (code < 100)
        return -EBADMSG;
    int64_t length = -1;
    static const char cl[] = "content-length:";
    /* header lines run from the status line's end to end (the blank line's CRLF after it) */
    const char *p = (const char *)memmem(buf, head, "\r\n", 2) + 2;
    while (p < end + 2) {
        const char *eol = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
        size_t ll = (size_t)(eol - p);
        const char *line = p;
        p = eol + 2;
        if (ll <= sizeof(cl) - 1 || strncasecmp(line, cl, sizeof(cl) - 1))
            continue;
        size_t i = sizeof(cl) - 1;
        while (i < ll && (line[i] == ' ' || line[i] == '\t'))
            i++;
        size_t vl = ll - i;
        while (vl && (line[i + vl - 1] == ' ' || line[i + vl - 1] == '\t'))
            vl--;
        char v[24];
        if (vl == 0 || vl >= sizeof(v))
            return -EBADMSG;
        memcpy(v, line + i, vl);
        v[vl] = '\0';
        if (strspn(v, "0123456789") != vl || parse_i64(v, &length) < 0)
            return -EBADMSG;
    }
    *ret_code = code;
    *ret_length = length;
    *ret_head_len = head;
    return 0;
}
