/* SPDX-License-Identifier: Apache-2.0 */
/* kube internals: the pure pieces (config resolution, URLs, Status decoding, watch-stream
 * parsing, rate limiting, backoff, lease decisions) that the unit and fuzz tests drive. */
#ifndef GPUOP_KUBE_INTERNAL_H
#define GPUOP_KUBE_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kobj.h"
#include "kube.h"
#include "util.h"
#include "yamlcfg.h"

#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* ---- connection config -------------------------------------------------------------------- */

struct kube_blob {
    char *data;
    size_t len;
};

/* A resolved connection. Secrets (token, key) live here and nowhere else. */
struct kube_conn {
    char *server; /* "https://host:port", no trailing slash */
    char *ca_file;
    struct kube_blob ca_data;
    char *cert_file;
    struct kube_blob cert_data;
    char *key_file;
    struct kube_blob key_data;
    char *token;      /* a static bearer token */
    char *token_file; /* re-read when it changes (rotation) */
    char *ns;         /* default namespace */
};

void kube_conn_clear(struct kube_conn *c);
/* Resolves `context` (NULL: current-context) of a parsed kubeconfig. `path` names the file in
 * errors; relative file paths are resolved against its directory. */
int kube_conn_from_kubeconfig(json_t *doc, const char *path, const char *context,
                              struct kube_conn *ret, struct err *e);
/* Reads the kubeconfig file(s) (a colon-separated list: the first file naming an entry wins)
 * and resolves it. */
int kube_conn_load_kubeconfig(const char *paths, const char *context, struct kube_conn *ret,
                              struct err *e);
/* In-cluster: KUBERNETES_SERVICE_HOST/PORT and sa_dir/{token,ca.crt,namespace}. -ENOENT when
 * not in a cluster. */
int kube_conn_in_cluster(const char *sa_dir, struct kube_conn *ret, struct err *e);
/* Standard base64 (padding optional, whitespace skipped). -EINVAL on bad input. */
int kube_base64_decode(const char *in, size_t n, char **ret, size_t *ret_len);

/* ---- URLs --------------------------------------------------------------------------------- */

/* Percent-encodes everything but unreserved characters. */
GPUOP_WUR int kube_url_escape(struct sbuf *b, const char *s);
/* /api/v1/namespaces/<ns>/pods/<name>/<sub>; ns, name and sub may be NULL. */
GPUOP_WUR int kube_build_path(struct sbuf *b, const struct kube_resource *r, const char *ns,
                              const char *name, const char *sub);
/* Appends "?k=v" or "&k=v" (v escaped); v NULL or "" appends nothing. */
GPUOP_WUR int kube_query_add(struct sbuf *b, const char *key, const char *value);
/* Checks a selector for characters a selector never holds (control characters, '#', '?'...):
 * -EINVAL with a message. The server validates the grammar. */
int kube_selector_check(const char *what, const char *sel, struct err *e);

/* ---- responses ---------------------------------------------------------------------------- */

/* The errno-style code for an HTTP status (and Status reason, may be NULL). */
int kube_http_errno(long http, const char *reason);
/* Fills e from a non-2xx answer: the Status message, code and reason when body holds a Status
 * ("nodes \"n1\" not found (404 NotFound)"), else "<what>: HTTP <code>". Returns e->code. */
int kube_status_err(long http, const char *body, size_t len, const char *what, struct err *e);
/* Parses a JSON object body, bounded by the caller. -EBADMSG with a message. */
int kube_json_parse(const char *body, size_t len, const char *what, json_t **ret, struct err *e);

/* ---- watch stream ------------------------------------------------------------------------- */

struct kube_watch_parser {
    struct sbuf line;
    kube_watch_fn fn;
    void *userdata;
    int stopped; /* the callback's nonzero return */
    uint64_t events;
};

void kube_watch_parser_init(struct kube_watch_parser *p, size_t max_line, kube_watch_fn fn,
                            void *userdata);
void kube_watch_parser_free(struct kube_watch_parser *p);
/* Feeds bytes as they arrive (any split). Returns 0, a negative error (oversized line, bad
 * event), or a positive value once the callback asked to stop. */
int kube_watch_parser_feed(struct kube_watch_parser *p, const char *data, size_t n, struct err *e);
/* At the end of the stream: a last line without a newline is parsed too. */
int kube_watch_parser_finish(struct kube_watch_parser *p, struct err *e);
/* One event line: {"type":"ADDED","object":{...}}. *ret_obj is a new reference. */
int kube_watch_event_parse(const char *line, size_t n, enum kube_watch_type *ret_type,
                           json_t **ret_obj, struct err *e);

/* ---- rate limiting and backoff ------------------------------------------------------------ */

struct kube_ratelimit {
    double qps;
    double burst;
    double tokens; /* may go negative: reservations not yet due */
    uint64_t last_us;
};

void kube_ratelimit_init(struct kube_ratelimit *rl, double qps, unsigned burst, uint64_t now_us);
/* Takes one token; returns how long (us) the caller must wait before sending. */
uint64_t kube_ratelimit_reserve(struct kube_ratelimit *rl, uint64_t now_us);

/* Jittered exponential backoff: d = min(max, base * 2^attempt); a value in [d/2, d]. rnd is a
 * random number. */
uint64_t kube_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t max_ms, uint64_t rnd);
/* Retry-After: delta-seconds or an HTTP date. -EINVAL when unparsable. */
int kube_parse_retry_after(const char *v, uint64_t now_unix_ms, uint64_t *ret_ms);
uint64_t kube_random(void);

/* ---- leases ------------------------------------------------------------------------------- */

enum kube_lease_action {
    KUBE_LEASE_WAIT,    /* held by another, not expired */
    KUBE_LEASE_ACQUIRE, /* free or expired: take it */
    KUBE_LEASE_RENEW,   /* ours: renew */
};

/* Decides from the Lease's spec whether we may take it. `expired` is the caller's observation
 * that the record has not changed for a whole lease duration (local clock, no skew). */
enum kube_lease_action kube_lease_decide(json_t *lease, const char *identity, bool expired);
/* MicroTime "2026-11-29T21:30:00.123456Z". */
void kube_microtime(uint64_t unix_us, char *buf, size_t n);

/* ---- HTTP --------------------------------------------------------------------------------- */

struct kube_req {
    const char *method;
    const char *path; /* with query */
    const char *body;
    size_t body_len;
    const char *content_type;
    bool unsafe;       /* non-idempotent (POST): only retried when surely not processed */
    bool no_retry_429; /* eviction: a 429 goes back to the caller */
    const char *what;  /* for messages: "get nodes/n1" */
};

struct kube_resp {
    long code;
    char *body;
    size_t len;
};

/*
 * The calling thread's call context: what bounds the calls it makes between kube_call_begin and
 * kube_call_end (nested scopes are not supported). deadline: a monotonic deadline (0: the
 * client's call_timeout_ms); stop: a flag that abandons the call when set (the informer's and
 * the leader's own stop); detached: the client's stop token does not cancel these calls (the
 * leader's bounded release of the Lease, made after the process was told to stop).
 */
struct kube_call {
    uint64_t deadline;
    const volatile int *stop;
    bool detached;
};
void kube_call_begin(const struct kube_call *call);
void kube_call_end(void);

int kube_do(struct kube_client *c, const struct kube_req *rq, struct kube_resp *ret, struct err *e);
/* kube_do + Status decoding + JSON parse of a 2xx body (ret may be NULL). */
int kube_do_json(struct kube_client *c, const struct kube_req *rq, json_t **ret, struct err *e);

size_t kube_client_max_watch_line(const struct kube_client *c);

/* The watch transport: streams the body into the parser. */
int kube_do_stream(struct kube_client *c, const char *path, const char *what,
                   struct kube_watch_parser *p, const volatile int *stop, uint64_t timeout_ms,
                   struct err *e);

#endif
