/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes kubesim's request handling. Input: "METHOD PATH[?QUERY]\nCONTENT-TYPE\nBODY"; several
 * requests may follow each other, separated by a line "\n---\n", against one store, and a
 * reconcile and a watch read run after each, so state built by earlier requests is exercised.
 * A request proxied to a kubelet (pods/log) takes its body as the kubelet's answer. */
#include <stdint.h>
#include <string.h>

#include "kubesim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t fixed_clock(void *ctx)
{
    uint64_t *t = ctx;
    return *t += 700;
}

static void one(struct ksim *ks, const char *req, size_t len)
{
    const char *nl = memchr(req, '\n', len);
    size_t l1 = nl ? (size_t)(nl - req) : len;
    char *line = strndup(req, l1);
    const char *rest = nl ? nl + 1 : req + len;
    size_t restlen = len - (size_t)(rest - req);
    const char *nl2 = memchr(rest, '\n', restlen);
    char *ctype = strndup(rest, nl2 ? (size_t)(nl2 - rest) : restlen);
    const char *body = nl2 ? nl2 + 1 : rest + restlen;
    size_t body_len = len - (size_t)(body - req);
    char *sp = strchr(line, ' ');
    const char *method = line, *path = "/";
    if (sp) {
        *sp = '\0';
        path = sp + 1;
    }
    char *q = strchr((char *)path, '?');
    if (q)
        *q++ = '\0';
    struct ksim_request rq = {.method = method,
                              .path = path,
                              .query = q,
                              .content_type = ctype,
                              .accept = strstr(ctype, "Table")
                                            ? "application/json;as=Table;v=v1;g=meta.k8s.io"
                                            : "application/json",
                              .body = body,
                              .body_len = body_len};
    struct ksim_response rs;
    ksim_handle(ks, &rq, &rs);
    if (rs.code < 200 || rs.code > 599)
        __builtin_trap();
    if (rs.watch) {
        struct sbuf b;
        sbuf_init(&b, 1u << 22);
        ksim_watch_next(ks, rs.watch, &b, 0);
        ksim_watch_next(ks, rs.watch, &b, 0);
        sbuf_free(&b);
        ksim_watch_free(ks, rs.watch);
    }
    if (rs.proxy) {
        /* a log proxied to a kubelet: the body stands for the kubelet's answer */
        int code = 0;
        int64_t length = 0;
        size_t head = 0;
        if (ksim_proxy_head_parse(body, body_len, &code, &length, &head) == 0 &&
            (code < 200 || code > 299)) {
            struct ksim_response er;
            ksim_proxy_error(rs.proxy, code, body + head, body_len - head, &er);
            if (er.code != code && er.code != 500)
                __builtin_trap();
            ksim_response_free(&er);
        }
    }
    ksim_response_free(&rs);
    ksim_reconcile(ks);
    free(line);
    free(ctype);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!data || !size)
        return 0;
    uint64_t t = 1800000000000ull;
    struct ksim_opts o;
    ksim_opts_default(&o);
    o.now_ms = fixed_clock;
    o.clock_ctx = &t;
    o.max_body = 1u << 16;
    o.max_events = 256;
    struct ksim *ks = ksim_new(&o);
    size_t off = 0;
    for (int n = 0; n < 32 && off < size; n++) {
        const char *p = (const char *)data + off;
        const char *sep = memmem(p, size - off, "\n---\n", 5);
        size_t len = sep ? (size_t)(sep - p) : size - off;
        one(ks, p, len);
        if (!sep)
            break;
        off += len + 5;
    }
    ksim_free(ks);
    return 0;
}
