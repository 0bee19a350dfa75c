/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the HTTP/1.1 response parser (kube-h1.c): the first byte picks the slice size the rest
 * is fed in and whether the request was a HEAD; the body goes on into the watch parser, as a
 * watch's does. The URL splitter and NO_PROXY matching get the bytes too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_event(enum kube_watch_type t, json_t *obj, void *ud)
{
    (void)t;
    (void)obj;
    size_t *n = ud;
    return ++*n > 1000 ? 1 : 0;
}

static int to_watch(void *ud, const char *p, size_t n)
{
    struct kube_watch_parser *wp = ud;
    struct err e = {0};
    int r = kube_watch_parser_feed(wp, p, n, &e);
    return r < 0 ? 0 : r; /* a bad event does not stop the HTTP parser here */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t slice = (size_t)(data[0] & 0x3f) + 1;
    bool head = data[0] & 0x40;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    struct kube_h1 *h = malloc(sizeof(*h));
    kube_h1_init(h, head);
    size_t events = 0;
    struct kube_watch_parser wp;
    kube_watch_parser_init(&wp, 1u << 16, SIZE_MAX, on_event, &events);
    struct err e = {0};
    size_t off = 0;
    int r = 0;
    while (off < n && r == 0 && !h->done) {
        size_t take = n - off < slice ? n - off : slice;
        size_t used = 0;
        r = kube_h1_feed(h, p + off, take, &used, to_watch, &wp, &e);
        if (used > take)
            abort();
        if (r == 0 && !h->done && used != take)
            abort(); /* everything is taken until the answer is complete */
        off += used;
    }
    if (r == 0 && !h->done)
        (void)kube_h1_eof(h, &e);
    if (h->done && !h->headers_done)
        abort();
    kube_watch_parser_free(&wp);
    free(h);

    char *s = strndup(p, n < 2048 ? n : 2048);
    if (s) {
        struct kube_url u;
        if (kube_url_split(s, &u, &e) == 0 && (!u.host[0] || !u.port[0]))
            abort();
        char *sep = strchr(s, '\n');
        if (sep) {
            *sep = '\0';
            (void)kube_no_proxy_match(s, sep + 1);
        }
        free(s);
    }
    return 0;
}
