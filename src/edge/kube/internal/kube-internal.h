/* SPDX-License-Identifier: Apache-2.0 */
/* kube internals: the pure pieces (config resolution, URLs, Status decoding, watch-stream
 * parsing, HTTP/1.1 responses, server and proxy URLs, NO_PROXY, rate limiting, backoff, lease
 * decisions) that the unit and fuzz tests drive, and the connection layer under kube-http.c
 * (kube-conn.c). The HTTP client lives here, not in a module of its own: the API client is its
 * only user (src/edge/http is the server side). */
#ifndef GPUOP_KUBE_INTERNAL_H
#define GPUOP_KUBE_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

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
/*
 * What JSON costs decoded. The wire limit alone does not bound memory: jansson spends 32 bytes
 * on the two bytes of "0," and over 200 on the three of "{},", so a 64 MiB body can take
 * gigabytes decoded. The client therefore prices a body before decoding it, from one pass over
 * its bytes: kube_json_cost counts what jansson 2.14 allocates for each value (objects with their
 * hash buckets and members, arrays with their tables, strings, numbers; true, false and null
 * cost nothing) as glibc's malloc rounds it (16-byte chunks with an 8-byte header, 32 at least),
 * plus the parser's scratch for its longest token. For any text jansson accepts the price is at
 * least what the decode allocates (tests/kube: kube-unit checks it against jansson's own
 * allocations through a counting allocator); for other text it is whatever the tokens add up
 * to, and jansson refuses the text anyway. Chosen over counting inside the decode (a jansson
 * allocator is process-wide, and a decode cannot be stopped half way) and over a streaming
 * parse (jansson has none that can give up on a count): the pass is pure, 30 to 70 times
 * faster than the decode (a 36 MB node list: 0.03 s against 1.8 s), and lets the caller refuse
 * before any of it is spent.
 */
size_t kube_json_cost(const char *text, size_t n);
/* The JSON object text in[0..n) copied to out (n bytes at least) without the members at `paths`
 * (dotted member names from the object, NULL-terminated: "metadata.managedFields"); with
 * `under`, the paths are of the root's member of that name (a watch event's "object"). Values
 * off the paths are copied as they are, blanks between tokens left out. The length written, at
 * most n; SIZE_MAX when the text is not an object as expected (decode the original: jansson
 * names the fault). kube-skim.c. */
size_t kube_json_drop(const char *in, size_t n, const char *const *paths, const char *under,
                      char *out);
/* A value's bytes in a text. */
struct kube_span {
    const char *text; /* NULL: not found */
    size_t n;
};
/* Where the values at `paths` (dotted, from the root, NULL-terminated) of the JSON object text
 * in[0..n) are: ret[i] for paths[i] (text NULL when absent), each value's bytes as they are
 * (a string with its quotes). False when the text is not an object as expected or a path is
 * found twice (what jansson keeps, the last, is then for a decode to say). kube-skim.c. */
bool kube_json_find(const char *in, size_t n, const char *const *paths, struct kube_span *ret);

/* The list items and watch events an informer passes over undecoded (kube_informer_opts.
 * prefilter): those whose text holds no group of `groups` whole (kube_json_may_hold). `pass` is
 * told each one's type (a list item's: KUBE_WATCH_ADDED), namespace (NULL: none), name and
 * resourceVersion (NULL: none), read from the text, and says whether it may stay undecoded
 * (false: it is decoded and handed over as any other). */
struct kube_prefilter {
    const char *const *const *groups;
    bool (*pass)(enum kube_watch_type type, const char *ns, const char *name, const char *rv,
                 void *userdata);
    void *userdata;
};
/* Longest namespace, name or resourceVersion a passed-over object may have (else decoded). */
#define KUBE_PREFILTER_NAME_MAX 256
/* True when the text (a list item; with event, a whole watch event line) was passed over: it
 * may hold no group of pf's whole, it is an ADDED, MODIFIED or DELETED event (never a BOOKMARK or
 * an ERROR), its name and the rest read plainly (no escapes), and pf->pass agreed. False: decode
 * it. pf NULL: false. kube-skim.c. */
bool kube_prefilter_pass(const struct kube_prefilter *pf, const char *text, size_t n, bool event);

/* The client's kube_options.drop_fields (NULL: none). */
const char *const *kube_client_drop_fields(const struct kube_client *c);
/* The same price for a decoded value (what a store or a list keeps of it): shared values are
 * counted at each place they appear. */
size_t kube_json_value_cost(json_t *v);
/* Fills e with "<what>: the response would take about N MiB decoded, more than the M MiB limit
 * (<knob>)" (-EFBIG). */
int kube_decoded_err(struct err *e, const char *what, const char *thing, size_t cost, size_t limit,
                     const char *knob);
/* Parses a JSON object body, bounded by the caller on the wire and by max_decoded decoded
 * (priced first; SIZE_MAX: already priced). -EBADMSG, -EFBIG with a message. */
int kube_json_parse(const char *body, size_t len, size_t max_decoded, const char *what,
                    json_t **ret, struct err *e);

/* An item's bytes, as kube_list_body_each finds them. */
typedef int (*kube_item_text_fn)(const char *text, size_t n, void *userdata, struct err *e);
/* A list's body (a JSON object with an "items" array), item by item, without decoding the
 * whole: each element of "items" is handed to fn as its bytes (one pass that finds where a
 * value ends; jansson checks each value as it is decoded), every other member decoded (each
 * priced against max_decoded) into *ret_rest (may be NULL). Bytes in, calls out, no I/O.
 * -EBADMSG naming what when the text is not such an object; fn's negative code as it is. */
int kube_list_body_each(const char *body, size_t len, size_t max_decoded, const char *what,
                        kube_item_text_fn fn, void *userdata, json_t **ret_rest, struct err *e);

/* ---- memory budgets ----------------------------------------------------------------------- */

/*
 * Bytes a client holds of what the API server sent, shared by its threads: one budget for what
 * its calls hold at once (bodies being read, responses being decoded, the pages an informer is
 * applying, watch events), one for what its informers keep. A take that would pass the limit
 * fails at once (it does not wait: a call holding half a body must not wait for another).
 */
struct kube_budget {
    pthread_mutex_t lock;
    size_t limit;
    size_t used;
    size_t peak;
};
void kube_budget_init(struct kube_budget *b, size_t limit);
void kube_budget_destroy(struct kube_budget *b);
/* 0, or -ENOBUFS when used + n would pass the limit (nothing taken then). */
int kube_budget_take(struct kube_budget *b, size_t n);
void kube_budget_put(struct kube_budget *b, size_t n);
size_t kube_budget_used(struct kube_budget *b);
/* Fills e with "<what>: another N MiB of answers would pass the client's M MiB limit on what its
 * calls hold at once (kube_options.max_in_flight)" (-ENOBUFS). */
int kube_in_flight_err(struct err *e, const char *what, struct kube_budget *b, size_t n);
/* "64 KiB", "12.5 MiB", "300 MiB", "40 GiB": sizes in messages. */
void kube_mib(char *buf, size_t n, size_t bytes);

/* ---- watch stream ------------------------------------------------------------------------- */

struct kube_watch_parser {
    struct sbuf line;
    size_t max_decoded; /* one event, priced before it is decoded (kube_json_cost) */
    /* NULL, or the client's in-flight budget: the line buffer and each event while it is
     * decoded and handled are taken from it */
    struct kube_budget *mem;
    size_t line_held; /* taken from mem for the line buffer */
    kube_watch_fn fn;
    void *userdata;
    const char *const *drop; /* NULL, or the members each event's object is decoded without */
    const struct kube_prefilter *pf; /* NULL, or what passes events over undecoded */
    uint64_t skipped;                /* events it passed over */
    int stopped;                     /* the callback's nonzero return */
    uint64_t events;
};

void kube_watch_parser_init(struct kube_watch_parser *p, size_t max_line, size_t max_decoded,
                            kube_watch_fn fn, void *userdata);
void kube_watch_parser_free(struct kube_watch_parser *p);
/* Feeds bytes as they arrive (any split). Returns 0, a negative error (oversized line, bad
 * event), or a positive value once the callback asked to stop. */
int kube_watch_parser_feed(struct kube_watch_parser *p, const char *data, size_t n, struct err *e);
/* At the end of the stream: a last line without a newline is parsed too. */
int kube_watch_parser_finish(struct kube_watch_parser *p, struct err *e);
/* One event line: {"type":"ADDED","object":{...}}, priced first (max_decoded; SIZE_MAX: already
 * priced). *ret_obj is a new reference. */
int kube_watch_event_parse(const char *line, size_t n, size_t max_decoded,
                           enum kube_watch_type *ret_type, json_t **ret_obj, struct err *e);

/* ---- informer store ------------------------------------------------------------------------ */

/* Makes a new version of an object share what did not change with the version it replaces:
 * each value of fresh (a projection no one else holds yet) equal (json_equal) to the value at
 * the same path of old is replaced by old's (a reference). Objects fresh alone holds are gone
 * into (8 levels at most), so that an object with one changed member still shares the others;
 * arrays, strings and objects shared already are compared whole. True when fresh equals old
 * (then every member of it is old's). Stored objects are read-only: readers see no difference.
 * kube-informer.c. */
bool kube_share_unchanged(json_t *fresh, json_t *old);

/* ---- HTTP/1.1 responses (kube-h1.c) ------------------------------------------------------ */

/*
 * An incremental HTTP/1.1 response parser: bytes in (any split), the status, the few headers the
 * client acts on, and the body out through a callback. No I/O. Bounded: a header line holds at
 * most KUBE_H1_LINE_MAX bytes, the whole head (and a trailer) at most KUBE_H1_HEAD_MAX.
 * Understands Content-Length, Transfer-Encoding: chunked (extensions and trailers skipped), a
 * body that runs until the connection closes (no length, HTTP/1.0), 1xx interim answers
 * (skipped), and the answers without a body (1xx, 204, 304, a HEAD's). A Content-Encoding other
 * than identity is refused: the client sends no Accept-Encoding.
 */
#define KUBE_H1_LINE_MAX (16u << 10)
#define KUBE_H1_HEAD_MAX (64u << 10)

/* Receives body bytes; a nonzero return ends the feed with that value. */
typedef int (*kube_h1_body_fn)(void *userdata, const char *data, size_t n);

struct kube_h1 {
    bool head_request; /* the request was a HEAD: no body whatever the headers say */
    /* results */
    int code;          /* the final status, once headers_done */
    int minor;         /* HTTP/1.<minor> */
    bool headers_done; /* the final answer's head was read: code and the fields below hold */
    bool done;         /* the whole response was read */
    bool keep_alive;   /* once done: the connection may carry another request */
    char retry_after[64];
    /* state */
    int state;
    bool chunked, has_length, close;
    uint64_t left; /* body or chunk bytes to come */
    size_t head_bytes;
    size_t line_len;
    char line[KUBE_H1_LINE_MAX];
};

void kube_h1_init(struct kube_h1 *p, bool head_request);
/* Feeds n bytes; *ret_used says how many were taken (fewer than n only once done or on an
 * error). Returns 0, a negative code (-EBADMSG, -EPROTONOSUPPORT for a content or transfer coding
 * it cannot decode) with a message in e, or the body callback's nonzero return. */
int kube_h1_feed(struct kube_h1 *p, const char *data, size_t n, size_t *ret_used,
                 kube_h1_body_fn fn, void *userdata, struct err *e);
/* The connection closed: completes a body that runs until the close (0), else -ECONNRESET
 * (nothing, or a truncated response). */
int kube_h1_eof(struct kube_h1 *p, struct err *e);

/* ---- connections (kube-conn.c) -------------------------------------------------------------- */

/* An API server (or proxy) URL, split: scheme://host[:port][/base path]. */
struct kube_url {
    bool tls;            /* https */
    bool ip;             /* host is an IP literal (no SNI; its IP SAN is checked) */
    char host[256];      /* without the brackets of an IPv6 literal */
    char port[8];        /* always set: the scheme's default when absent */
    char authority[300]; /* what the Host header carries */
    char path[1024];     /* the base path, "" or "/prefix" without a trailing slash */
};

/* Pure: -EINVAL with a message for anything but http(s)://host[:port][/path] (no user info, no
 * query, no fragment). */
/* url as an error message may quote it: any user info (user:password@) replaced. Returns url
 * itself when it has none, else buf. */
const char *kube_url_shown(const char *url, char *buf, size_t n);
int kube_url_split(const char *url, struct kube_url *ret, struct err *e);
/* Pure: whether NO_PROXY (a comma-separated list of "*", host names with an optional leading dot,
 * matched on a domain boundary, IP literals and CIDRs; ports ignored) exempts host. */
bool kube_no_proxy_match(const char *no_proxy, const char *host);

/* What ends an I/O wait: a deadline, flags looked at every 100 ms, a token whose fd is polled. */
struct kube_wait {
    uint64_t deadline;
    const volatile int *flag;
    const volatile int *flag2;
    struct stop_token *token;
};
bool kube_wait_stopped(const struct kube_wait *w);

/* The TLS trust (the kubeconfig's CA only) and client certificate, loaded once per client. A
 * load failure is kept and returned (-EKEYREJECTED) by every TLS connection attempt. */
struct kube_tls;
void kube_tls_new(const struct kube_conn *conn, struct kube_tls **ret);
void kube_tls_free(struct kube_tls *t);

/* One connection (TCP, TLS over it for https, through an HTTP proxy when one applies). */
struct kube_sock;
/* Connects: name resolution (-EHOSTUNREACH), TCP (-ECONNREFUSED; each address in turn, with the
 * connect deadline), the proxy's CONNECT tunnel, the TLS handshake with the server's name or IP
 * checked (-EKEYREJECTED: verification or certificate problems). -ETIMEDOUT, -ECANCELED (w).
 * proxy NULL: direct. */
int kube_sock_open(const struct kube_url *u, const struct kube_url *proxy, struct kube_tls *tls,
                   const struct kube_wait *w, uint64_t connect_deadline, struct kube_sock **ret,
                   struct err *e);
void kube_sock_close(struct kube_sock *s);
GPUOP_WUR int kube_sock_write(struct kube_sock *s, const void *data, size_t n,
                              const struct kube_wait *w, struct err *e);
/* Up to n bytes (>0), 0 at the end of the stream, or a negative code. */
GPUOP_WUR ssize_t kube_sock_read(struct kube_sock *s, void *buf, size_t n,
                                 const struct kube_wait *w, struct err *e);
/* An idle pooled connection is still usable: open, nothing unread (the server did not close it). */
bool kube_sock_alive(struct kube_sock *s);
/* The monotonic ms it was last put back (for the pool's age limit). */
uint64_t kube_sock_idle_since(const struct kube_sock *s);
void kube_sock_set_idle(struct kube_sock *s, uint64_t now_ms);

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

/* ---- HTTP --------------------------------------------------------------------------------- */

struct kube_req {
    const char *method;
    const char *path; /* with query */
    const char *body;
    size_t body_len;
    const char *content_type;
    bool unsafe;       /* non-idempotent (POST): only retried when surely not processed */
    bool no_retry_429; /* eviction: a 429 goes back to the caller */
    bool decode;       /* a 2xx body is priced and decoded into kube_resp.json */
    /* the body comes back with its buffer still taken from the client's in-flight budget
     * (kube_resp.held): the caller gives it back (kube_client_release) once it frees the body,
     * so a large answer is never outside the budget while it is held */
    bool hold_body;
    const char *what; /* for messages: "get nodes/n1" */
};

struct kube_resp {
    long code;
    char *body; /* not for a decoded 2xx */
    size_t len;
    json_t *json; /* a decoded 2xx (kube_req.decode) */
    /* json's price, or the body's buffer (kube_req.hold_body), still taken from the client's
     * in-flight budget */
    size_t held;
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

/* One request, with its retries. The body's buffer is taken from the in-flight budget while it
 * is read; a call that finds the budget spent is retried (not an unsafe one) and then fails
 * with -ENOBUFS. */
int kube_do(struct kube_client *c, const struct kube_req *rq, struct kube_resp *ret, struct err *e);
/* kube_do + Status decoding + JSON parse of a 2xx body (ret may be NULL). */
int kube_do_json(struct kube_client *c, const struct kube_req *rq, json_t **ret, struct err *e);
/* The same, the decoded value's price still taken from the in-flight budget (*ret_held): the
 * caller gives it back with kube_client_release once it is done with the value (an informer's
 * page, once applied). */
int kube_do_json_held(struct kube_client *c, const struct kube_req *rq, json_t **ret,
                      size_t *ret_held, struct err *e);
void kube_client_release(struct kube_client *c, size_t held);
/* kube_list_page with the page's price still taken (kube_do_json_held). */
int kube_list_page_held(struct kube_client *c, const struct kube_resource *r, const char *ns,
                        const struct kube_list_opts *o, const char *continue_token, json_t **ret,
                        size_t *ret_held, struct err *e);

/* One list item, decoded (borrowed: take a reference to keep it). A negative return stops the
 * list with that code. */
typedef int (*kube_item_fn)(json_t *item, void *userdata, struct err *e);
/* One page, its items decoded and handed to fn one at a time (those pf passes over neither
 * decoded nor handed over; pf may be NULL), so that what the page costs is
 * its body and one item, not the page decoded (a page of 500 real nodes: ~10 MiB of body,
 * ~50 MiB decoded). *ret_page (may be NULL) gets the page without its items (metadata.continue,
 * metadata.resourceVersion). A page malformed after some items gives those items to fn first,
 * then -EBADMSG. */
int kube_list_page_each(struct kube_client *c, const struct kube_resource *r, const char *ns,
                        const struct kube_list_opts *o, const char *continue_token,
                        const struct kube_prefilter *pf, kube_item_fn fn, void *userdata,
                        json_t **ret_page, struct err *e);
/* kube_watch with events passed over undecoded by pf (NULL: none). */
int kube_watch_prefiltered(struct kube_client *c, const struct kube_resource *r, const char *ns,
                           const struct kube_watch_opts *o, const struct kube_prefilter *pf,
                           kube_watch_fn fn, void *userdata, struct err *e);

size_t kube_client_max_watch_line(const struct kube_client *c);
size_t kube_client_max_decoded(const struct kube_client *c);
struct kube_budget *kube_client_in_flight(struct kube_client *c);
struct kube_budget *kube_client_cached(struct kube_client *c);

/* The watch transport: streams the body into the parser. */
int kube_do_stream(struct kube_client *c, const char *path, const char *what,
                   struct kube_watch_parser *p, const volatile int *stop, uint64_t timeout_ms,
                   struct err *e);

#endif
