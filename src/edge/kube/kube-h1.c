/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP/1.1 response parser (contract in kube-internal.h): pure, fuzzed (tests/fuzz/kube). */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "kube-internal.h"

enum {
    H1_STATUS,     /* the status line */
    H1_HEADER,     /* header lines, up to the empty one */
    H1_BODY_LEN,   /* left bytes of a Content-Length body */
    H1_BODY_CLOSE, /* a body that ends when the connection closes */
    H1_CHUNK_SIZE, /* a chunk's size line */
    H1_CHUNK_DATA, /* left bytes of a chunk */
    H1_CHUNK_END,  /* the CRLF after a chunk's data */
    H1_TRAILER,    /* trailer lines after the last chunk */
    H1_DONE,
};

void kube_h1_init(struct kube_h1 *p, bool head_request)
{
    memset(p, 0, offsetof(struct kube_h1, line));
    p->head_request = head_request;
    p->state = H1_STATUS;
}

/* A header value's tokens, comma-separated: true when one equals tok (case-insensitive). */
static bool has_token(const char *v, const char *tok)
{
    size_t tl = strlen(tok);
    while (*v) {
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        const char *s = v;
        while (*v && *v != ',')
            v++;
        const char *end = v;
        while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if ((size_t)(end - s) == tl && strncasecmp(s, tok, tl) == 0)
            return true;
    }
    return false;
}

static int parse_status(struct kube_h1 *p, const char *l, size_t n, struct err *e)
{
    /* HTTP/1.x SP 3DIGIT [SP reason] */
    if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ' ||
        !isdigit((unsigned char)l[9]) || !isdigit((unsigned char)l[10]) ||
        !isdigit((unsigned char)l[11]) || (n > 12 && l[12] != ' '))
        return err_set(e, -EBADMSG, "bad HTTP status line");
    p->minor = l[7] - '0';
    p->code = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
    if (p->code < 100)
        return err_set(e, -EBADMSG, "bad HTTP status %d", p->code);
    if (p->code == 101)
        return err_set(e, -EBADMSG, "unexpected HTTP 101 (protocol switch)");
    p->chunked = p->has_length = false;
    p->close = p->minor == 0; /* HTTP/1.0: close unless keep-alive is asked */
    p->left = 0;
    p->retry_after[0] = '\0';
    return 0;
}

static int parse_header(struct kube_h1 *p, const char *l, size_t n, struct err *e)
{
    const char *colon = memchr(l, ':', n);
    if (!colon || colon == l)
        return err_set(e, -EBADMSG, "bad HTTP header line");
    size_t nl = (size_t)(colon - l);
    for (size_t i = 0; i < nl; i++)
        if (l[i] <= ' ' || l[i] >= 0x7f)
            return err_set(e, -EBADMSG, "bad HTTP header name");
    const char *v = colon + 1;
    /* l is NUL-terminated by the caller (line buffer); trim the value */
    while (*v == ' ' || *v == '\t')
        v++;
    size_t vl = strlen(v);
    while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        vl--;
    char val[256];
    bool long_val = vl >= sizeof(val);
    size_t cl = long_val ? sizeof(val) - 1 : vl;
    memcpy(val, v, cl);
    val[cl] = '\0';
#define IS(name) (nl == sizeof(name) - 1 && strncasecmp(l, name, nl) == 0)
    if (IS("content-length")) {
        if (long_val || vl == 0)
            return err_set(e, -EBADMSG, "bad Content-Length");
        uint64_t len = 0;
        for (size_t i = 0; i < vl; i++) {
            if (!isdigit((unsigned char)val[i]) || len > (UINT64_MAX - 9) / 10)
                return err_set(e, -EBADMSG, "bad Content-Length");
            len = len * 10 + (uint64_t)(val[i] - '0');
        }
        if (p->has_length && p->left != len)
            return err_set(e, -EBADMSG, "conflicting Content-Length headers");
        p->has_length = true;
        p->left = len;
    } else if (IS("transfer-encoding")) {
        /* chunked must be the only coding: gpuop decodes nothing else */
        if (long_val || strcasecmp(val, "chunked") != 0)
            return err_set(e, -EPROTONOSUPPORT, "unsupported Transfer-Encoding \"%.64s\"", val);
        p->chunked = true;
    } else if (IS("content-encoding")) {
        if (long_val || (vl > 0 && !(vl == 8 && strcasecmp(val, "identity") == 0)))
            return err_set(e, -EPROTONOSUPPORT,
                           "unsupported Content-Encoding \"%.64s\" (none was asked for)", val);
    } else if (IS("connection")) {
        if (has_token(val, "close"))
            p->close = true;
        else if (has_token(val, "keep-alive") && p->minor == 0)
            p->close = false;
    } else if (IS("retry-after")) {
        size_t rl = cl < sizeof(p->retry_after) ? cl : sizeof(p->retry_after) - 1;
        memcpy(p->retry_after, val, rl);
        p->retry_after[rl] = '\0';
    }
#undef IS
    return 0;
}

/* The head is complete: where the body goes. */
static void head_done(struct kube_h1 *p)
{
    if (p->code < 200) { /* an interim answer: the real one follows */
        p->state = H1_STATUS;
        return;
    }
    p->headers_done = true;
    if (p->head_request || p->code == 204 || p->code == 304) {
        p->state = H1_DONE;
    } else if (p->chunked) {
        if (p->has_length)
            p->close = true; /* both: chunked wins, and the connection is not trusted after */
        p->state = H1_CHUNK_SIZE;
    } else if (p->has_length) {
        p->state = p->left ? H1_BODY_LEN : H1_DONE;
    } else {
        p->close = true;
        p->state = H1_BODY_CLOSE;
    }
    if (p->state == H1_DONE)
        p->keep_alive = !p->close;
}

static int parse_chunk_size(struct kube_h1 *p, const char *l, size_t n, struct err *e)
{
    uint64_t size = 0;
    size_t i = 0;
    for (; i < n && isxdigit((unsigned char)l[i]); i++) {
        if (size > (UINT64_MAX >> 4))
            return err_set(e, -EBADMSG, "chunk size overflows");
        int d =
            isdigit((unsigned char)l[i]) ? l[i] - '0' : (tolower((unsigned char)l[i]) - 'a' + 10);
        size = size << 4 | (uint64_t)d;
    }
    if (i == 0)
        return err_set(e, -EBADMSG, "bad chunk size line");
    while (i < n && (l[i] == ' ' || l[i] == '\t'))
        i++;
    if (i < n && l[i] != ';')
        return err_set(e, -EBADMSG, "bad chunk size line");
    p->left = size;
    p->state = size ? H1_CHUNK_DATA : H1_TRAILER;
    return 0;
}

/* One complete line (without its CR LF, NUL-terminated in p->line). */
static int on_line(struct kube_h1 *p, struct err *e)
{
    const char *l = p->line;
    size_t n = p->line_len;
    switch (p->state) {
    case H1_STATUS:
        return parse_status(p, l, n, e) < 0 ? e->code : (p->state = H1_HEADER, 0);
    case H1_HEADER:
        if (n == 0) {
            head_done(p);
            return 0;
        }
        if (l[0] == ' ' || l[0] == '\t')
            return err_set(e, -EBADMSG, "obsolete folded HTTP header line");
        return parse_header(p, l, n, e);
    case H1_CHUNK_SIZE:
        return parse_chunk_size(p, l, n, e);
    case H1_CHUNK_END:
        if (n != 0)
            return err_set(e, -EBADMSG, "chunk data longer than its size");
        p->state = H1_CHUNK_SIZE;
        return 0;
    case H1_TRAILER:
        if (n == 0) {
            p->state = H1_DONE;
            p->keep_alive = !p->close;
        }
        return 0; /* trailer fields are ignored */
    default:
        return err_set(e, -EBADMSG, "HTTP parser: unexpected line");
    }
}

static bool line_state(int s)
{
    return s == H1_STATUS || s == H1_HEADER || s == H1_CHUNK_SIZE || s == H1_CHUNK_END ||
           s == H1_TRAILER;
}

int kube_h1_feed(struct kube_h1 *p, const char *data, size_t n, size_t *ret_used,
                 kube_h1_body_fn fn, void *userdata, struct err *e)
{
    size_t i = 0;
    int r = 0;
    while (i < n && p->state != H1_DONE) {
        if (line_state(p->state)) {
            /* the head, the trailer: counted against the head limit; chunk lines against the
             * line limit only */
            const char *nl = memchr(data + i, '\n', n - i);
            size_t take = nl ? (size_t)(nl - (data + i)) + 1 : n - i;
            bool headish = p->state == H1_STATUS || p->state == H1_HEADER || p->state == H1_TRAILER;
            if (headish && p->head_bytes + take > KUBE_H1_HEAD_MAX) {
                r = err_set(e, -EBADMSG, "HTTP head larger than %u bytes", KUBE_H1_HEAD_MAX);
                break;
            }
            if (p->line_len + take > KUBE_H1_LINE_MAX) {
                r = err_set(e, -EBADMSG, "HTTP line longer than %u bytes", KUBE_H1_LINE_MAX);
                break;
            }
            if (headish)
                p->head_bytes += take;
            memcpy(p->line + p->line_len, data + i, take);
            p->line_len += take;
            i += take;
            if (!nl)
                continue;
            p->line_len--; /* the LF */
            if (p->line_len > 0 && p->line[p->line_len - 1] == '\r')
                p->line_len--;
            if (memchr(p->line, '\0', p->line_len) || memchr(p->line, '\r', p->line_len)) {
                r = err_set(e, -EBADMSG, "bad byte in an HTTP line");
                break;
            }
            p->line[p->line_len] = '\0';
            r = on_line(p, e);
            p->line_len = 0;
            if (r != 0)
                break;
            continue;
        }
        size_t take = n - i;
        if (p->state != H1_BODY_CLOSE && take > p->left)
            take = (size_t)p->left;
        if (p->state != H1_BODY_CLOSE)
            p->left -= take;
        if (take > 0 && fn && (r = fn(userdata, data + i, take)) != 0) {
            i += take;
            break;
        }
        i += take;
        if (p->state == H1_BODY_LEN && p->left == 0) {
            p->state = H1_DONE;
            p->keep_alive = !p->close;
        } else if (p->state == H1_CHUNK_DATA && p->left == 0) {
            p->state = H1_CHUNK_END;
        }
    }
    p->done = p->state == H1_DONE;
    *ret_used = i;
    return r;
}

int kube_h1_eof(struct kube_h1 *p, struct err *e)
{
    if (p->state == H1_BODY_CLOSE) {
        p->state = H1_DONE;
        p->done = true;
        p->keep_alive = false;
        return 0;
    }
    if (p->state == H1_DONE)
        return 0;
    if (p->state == H1_STATUS && p->line_len == 0 && !p->headers_done && p->head_bytes == 0)
        return err_set(e, -ECONNRESET, "the server closed the connection without an answer");
    return err_set(e, -ECONNRESET, "the server closed the connection in the middle of an answer");
}
