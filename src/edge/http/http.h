/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http: a small GET-only HTTP server over libmicrohttpd for serving in-memory snapshots
 * (/metrics, /health, /healthz, /readyz). The Prometheus exposition itself is src/base/prom
 * (prom.h, no I/O), included here so a metrics handler has both.
 *
 * Threading: libmicrohttpd runs its own event loop (epoll/poll) in `threads` internal threads
 * (default 1), plus one watchdog thread that enforces per-connection deadlines. libmicrohttpd's
 * own messages go through the project's log (component "http"), rate-limited. Handlers are called
 * on those threads and must not block: they are meant to copy out a snapshot that another thread
 * prepared. An event loop rather than thread-per-connection keeps memory flat however many scrapers
 * connect (no 8 MiB stack per connection) and bounds concurrency with a connection limit instead of
 * a thread count.
 *
 * Requests are bounded: headers and URL must fit the per-connection memory limit (request larger
 * than that gets 431/414 from libmicrohttpd), request bodies are refused with 413, methods other
 * than GET and HEAD get 405, unknown paths 404.
 *
 * http_server_new() starts serving; http_server_free() stops it cleanly (stops accepting, waits
 * for the handler threads, closes the socket). Routes are fixed before start.
 */
#ifndef GPUOP_HTTP_H
#define GPUOP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prom.h"
#include "util.h"

#define HTTP_CT_TEXT        "text/plain; charset=utf-8"
#define HTTP_CT_PROM_TEXT   PROM_CT_TEXT
#define HTTP_CT_OPENMETRICS PROM_CT_OPENMETRICS
#define HTTP_CT_JSON        "application/json"

struct http_request {
    const char *method; /* "GET" or "HEAD" */
    const char *path;   /* without the query string */
    const char *accept; /* the Accept header, "" when absent */
};

#define HTTP_TRAILER_MAX 1024

/*
 * What a handler answers. body is sent as is (body_len bytes); release(release_cls) is called
 * once libmicrohttpd is done with it (NULL release: body is static or outlives the server), so a
 * handler can hand out a reference-counted snapshot without copying it. The optional trailer
 * (trailer_len bytes, copied by the server) is sent right after the body: the few bytes that
 * change per request (a scrape counter, "# EOF"). content_type must be a static string.
 */
struct http_response {
    unsigned status;
    const char *content_type;
    const char *body;
    size_t body_len;
    void (*release)(void *cls);
    void *release_cls;
    size_t trailer_len;
    char trailer[HTTP_TRAILER_MAX];
};

/* Fills resp. A non-zero return answers 500 (any body set is released). */
typedef int (*http_handler_fn)(const struct http_request *req, struct http_response *resp,
                               void *userdata);

/* Helpers to fill a response: a copy of text (freed by the server) or a static string. */
void http_response_copy(struct http_response *resp, unsigned status, const char *content_type,
                        const char *body, size_t len);
void http_response_static(struct http_response *resp, unsigned status, const char *content_type,
                          const char *body);
/* Takes ownership of a malloc'd body. */
void http_response_take(struct http_response *resp, unsigned status, const char *content_type,
                        char *body, size_t len);

struct http_route {
    const char *path; /* exact match, e.g. "/metrics" */
    http_handler_fn handler;
    void *userdata;
};

/*
 * Limits that keep idle and slow clients from starving the others (0 picks the default):
 * request headers must be complete within header_timeout_ms of the connection opening, or of
 * the previous response on a keep-alive connection (so an idle keep-alive is closed then too),
 * however slowly bytes trickle in; a response must be delivered within response_timeout_ms.
 * The server holds at most max_connections at once and per_ip_limit from one address; more are
 * accepted and closed at once. The open-file soft limit is raised to fit max_connections.
 */
struct http_config {
    const char *listen; /* "host:port", ":port", "[v6]:port"; port 0 picks a free one */
    const struct http_route *routes;
    size_t n_routes;
    unsigned threads;             /* event-loop threads; 0 means 1 */
    unsigned max_connections;     /* 0 means 4096 */
    unsigned per_ip_limit;        /* connections from one client address; 0 means 128 */
    unsigned header_timeout_ms;   /* 0 means 5000 */
    unsigned response_timeout_ms; /* 0 means 30000 */
    unsigned timeout_s;   /* libmicrohttpd's idle timeout, a backstop; 0: the header deadline */
    size_t request_limit; /* bytes of headers + URL per connection; 0 means 16 KiB */
};

struct http_server;

/* Binds, listens and starts serving. Errors name the listen address and the reason. */
int http_server_new(const struct http_config *cfg, struct http_server **ret, struct err *e);
/* Stops serving and frees; accepts NULL. */
void http_server_free(struct http_server *s);
DEFINE_CLEANUP_FUNC(struct http_server, http_server_free)
/* The TCP port actually bound (useful with port 0). */
unsigned http_server_port(const struct http_server *s);
/* Connections closed so far for missing a deadline. */
unsigned long http_server_deadline_closes(const struct http_server *s);

/* Splits "host:port", ":port", "[v6]:port" into host (NULL for any) and port.
 * -EINVAL with a message naming the address when malformed. *ret_host is malloc'd or NULL. */
int http_parse_listen(const char *listen, char **ret_host, unsigned *ret_port, struct err *e);

#endif
