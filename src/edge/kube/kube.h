/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube: the Kubernetes API client the operator and the node agents use.
 *
 *  - Connection: a kubeconfig (--kubeconfig, KUBECONFIG) or the in-cluster service account
 *    (KUBERNETES_SERVICE_HOST/PORT, token re-read when it rotates, CA bundle, namespace file).
 *    TLS is always verified; insecure-skip-tls-verify is refused. A given CA (file or inline
 *    data) is the only trust anchor; without one, the system's CA certificates are trusted.
 *  - Verbs over a resource descriptor: get, list (selectors, pagination), watch, create, update
 *    (+ a conflict-retry helper), patch (merge, strategic, JSON, server-side apply), delete,
 *    the status subresource, pod eviction, Events.
 *  - An informer (list + one watch per type into a local store, indexed by namespace/name and by
 *    label, with handlers and an optional projection) and Lease-based leader election.
 *  - Client-side rate limiting (token bucket) and retries with jittered exponential backoff on
 *    5xx, 429 (Retry-After honoured) and connection errors.
 *
 * Errors: every verb returns 0 or a negative code and fills a struct err. API Status objects
 * become messages such as `nodes "n1" not found (404 NotFound)`; the HTTP code maps to:
 *   400/422 -EINVAL   401 -EACCES   403 -EPERM   404 -ENOENT   405 -EOPNOTSUPP
 *   409 AlreadyExists -EEXIST, 409 Conflict (stale resourceVersion) -ESTALE (KUBE_ECONFLICT)
 *   410 -EIDRM (KUBE_EGONE)   429 -EAGAIN (after retries), on eviction -EBUSY (KUBE_EBLOCKED)
 *   5xx -EIO   timeouts -ETIMEDOUT   connection failures -ECONNREFUSED / -EHOSTUNREACH
 *   TLS verification failures -EKEYREJECTED   oversized responses -EFBIG   bad JSON -EBADMSG
 *   a response or list over its decoded limit -EFBIG   the in-flight budget spent -ENOBUFS
 *
 * Memory (docs/kube-client.md): a body is bounded on the wire (max_response), priced before it
 * is decoded (max_decoded), and held within the client's in-flight budget (max_in_flight);
 * informers keep their stores within max_cached; kube_list its items within a budget.
 *
 * Bodies are jansson values. Objects passed in are borrowed; objects returned are owned by the
 * caller (json_decref).
 *
 * Thread-safety: a kube_client is safe to use from many threads at once (each request borrows an
 * idle keep-alive connection from a bounded pool, or opens one). Informers and leader electors run
 * their own thread; their accessors are thread-safe. Handlers run on the informer's thread.
 *
 * Secrets (tokens, keys, client certificates) are never logged nor put in error messages.
 *
 * Transport: HTTP/1.1 of its own over GnuTLS (no HTTP/2, no compression). Trusted: the
 * kubeconfig's (or service account's) CA only, or the system's store when none is named. An
 * http:// proxy from HTTPS_PROXY/HTTP_PROXY (lower case first) applies unless NO_PROXY exempts the
 * server; a proxy variable that is not http:// fails kube_client_new with -EINVAL.
 */
#ifndef GPUOP_KUBE_H
#define GPUOP_KUBE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util.h"

#define KUBE_ECONFLICT (-ESTALE)
#define KUBE_EGONE     (-EIDRM)
#define KUBE_EBLOCKED  (-EBUSY)

/* ---- resources ---------------------------------------------------------------------------- */

struct kube_resource {
    const char *group; /* "" for the core group */
    const char *version;
    const char *plural;
    const char *kind;
    bool namespaced;
};

extern const struct kube_resource KUBE_NAMESPACES, KUBE_NODES, KUBE_PODS, KUBE_CONFIGMAPS,
    KUBE_SECRETS, KUBE_SERVICES, KUBE_SERVICEACCOUNTS, KUBE_EVENTS, KUBE_DAEMONSETS,
    KUBE_DEPLOYMENTS, KUBE_CONTROLLERREVISIONS, KUBE_LEASES, KUBE_PDBS, KUBE_RUNTIMECLASSES,
    KUBE_CRDS;
extern const struct kube_resource KUBE_CLUSTERPOLICIES, KUBE_NVIDIADRIVERS, KUBE_GPUCLUSTERS,
    KUBE_DRIVERUPGRADEPOOLS, KUBE_CLUSTERROLES, KUBE_CLUSTERROLEBINDINGS, KUBE_ROLES,
    KUBE_ROLEBINDINGS, KUBE_RESOURCEQUOTAS, KUBE_SERVICEMONITORS, KUBE_PROMETHEUSRULES,
    KUBE_RESOURCECLAIMS, KUBE_RESOURCESLICES, KUBE_DEVICECLASSES;

/* ---- connection --------------------------------------------------------------------------- */

struct kube_options {
    const char *kubeconfig;   /* path; NULL: $KUBECONFIG, then in-cluster, then ~/.kube/config */
    const char *context;      /* NULL: current-context */
    const char *sa_dir;       /* in-cluster service-account dir; NULL: the standard one */
    double qps;               /* 0: 20 */
    unsigned burst;           /* 0: 40 */
    unsigned max_retries;     /* 0: 5; retries of one request on 5xx/429/connection errors */
    uint64_t backoff_base_ms; /* 0: 200 */
    uint64_t backoff_max_ms;  /* 0: 10000 (also caps Retry-After) */
    uint64_t timeout_ms;      /* 0: 30000, per attempt of a non-watch request */
    uint64_t call_timeout_ms; /* 0: 120000: the deadline of one call, its retries included */
    /* The owner's stop token (NULL: none). Once it fires every request in flight is abandoned
     * (the call fails with -ECANCELED), retry backoffs and rate-limit waits end at once and new
     * calls fail at once; watches end as by their own stop. The token must outlive the client. */
    struct stop_token *stop;
    size_t max_response;   /* 0: 64 MiB, hard limit on one response body */
    size_t max_watch_line; /* 0: 8 MiB, hard limit on one watch event */
    /* The limits on what the server's answers cost in memory once decoded (docs/kube-client.md).
     * A body is priced before it is decoded, from its bytes: jansson spends 16 to 100 times
     * the wire size of small values, so the wire limits alone do not bound memory. */
    /* 0: 128 MiB. One response or watch event decoded, and one kube_list's items together
     * (unless the call brings its own budget). Over it: -EFBIG, naming the call and the limit. */
    size_t max_decoded;
    /* 0: 256 MiB. What all the client's calls hold at once of the server's answers: bodies being
     * read, responses being decoded, the pages informers are applying, watch events. A call that
     * would pass it fails with -ENOBUFS (after its retries: the others' memory frees as they
     * end). Keep it at least max_response + max_decoded, or a largest answer never fits. */
    size_t max_in_flight;
    /* 0: 512 MiB. What the client's informers keep, together (their stores, priced as decoded).
     * An informer that would pass it keeps what it holds, logs the error and lists again after
     * a backoff; it is synced only once a whole list fits. */
    size_t max_cached;
    /* NULL, or members (dotted paths from an object, NULL-terminated, e.g.
     * "metadata.managedFields") that list items and watch events are decoded without, for a
     * client whose informers read none of them: the text is skimmed before jansson decodes it
     * (a real node's managedFields and status.images are three quarters of its bytes). Direct
     * calls (get, patch, kube_list) are decoded whole. The array must outlive the client. */
    const char *const *drop_fields;
};

struct kube_client;

int kube_client_new(const struct kube_options *o, struct kube_client **ret, struct err *e);
void kube_client_free(struct kube_client *c);
DEFINE_CLEANUP_FUNC(struct kube_client, kube_client_free)
/* The kubeconfig context's namespace, or the in-cluster namespace, or "default". */
const char *kube_client_namespace(const struct kube_client *c);
/* "https://10.0.0.1:443" */
const char *kube_client_server(const struct kube_client *c);
/* The bearer token (static or the token file's current one) and the CA bundle (PEM) the client
 * uses, each NULL when the connection has none: what kubelet-sim hands its pods as their
 * service-account credentials (the simulated API server has no TokenRequest). The caller frees
 * both and wipes the token (explicit_bzero) first. */
int kube_client_credentials(struct kube_client *c, char **ret_token, char **ret_ca, struct err *e);
/* Requests sent (each retry counts), for tests and benchmarks. */
uint64_t kube_client_requests(const struct kube_client *c);
/* What the client holds of the server's answers (bytes, priced as kube_options says), now and
 * at most so far, for tests and benchmarks. */
struct kube_client_memory {
    size_t in_flight, in_flight_peak; /* against max_in_flight */
    size_t cached, cached_peak;       /* against max_cached */
};
void kube_client_memory(struct kube_client *c, struct kube_client_memory *ret);

/* What waits on a component's calls, which sets their deadlines. */
enum kube_caller {
    /* A node agent's pass, tried again next interval: 10 s an attempt, 20 s a call. */
    KUBE_CALLER_AGENT,
    /* A command someone waits on (gpuop status, gpuop doctor NODE): 30 s a call. */
    KUBE_CALLER_COMMAND,
};
/* A component's client options: its --kubeconfig and --context (NULL: $KUBECONFIG, then the
 * in-cluster config, then ~/.kube/config; NULL context: the current one), its caller's
 * deadlines and its stop token (NULL: none); the rest kube_options' defaults, for the caller to
 * adjust before kube_client_new. Pure. */
struct kube_options kube_options_for(enum kube_caller caller, const char *kubeconfig,
                                     const char *context, struct stop_token *stop);
/* kube_client_new with kube_options_for's options. */
int kube_client_open(enum kube_caller caller, const char *kubeconfig, const char *context,
                     struct stop_token *stop, struct kube_client **ret, struct err *e);

/* ---- verbs -------------------------------------------------------------------------------- */

/* What lists may keep, decoded, together: a command listing several kinds gives each of its
 * lists the same budget and so bounds them all at once. */
struct kube_list_budget {
    size_t limit;
    size_t used; /* by the lists made with it so far (kube_list adds what each keeps) */
};

struct kube_list_opts {
    const char *label_selector;   /* "app=x,tier!=db"; NULL: none */
    const char *field_selector;   /* "spec.nodeName=n1" */
    unsigned limit;               /* page size; 0: 500. kube_list follows continue tokens */
    const char *resource_version; /* NULL: most recent */
    /* kube_list: what its items may cost decoded, drawn from (NULL: the client's max_decoded for
     * this list alone). Over it: -EFBIG naming the resource and the limit; budget->used is left
     * as it was before the call. */
    struct kube_list_budget *budget;
};

/* ns: NULL or "" for cluster-scoped resources (or for all namespaces when listing). Writes
 * (create, update) with a NULL ns use the object's metadata.namespace, else the client's. */
int kube_get(struct kube_client *c, const struct kube_resource *r, const char *ns, const char *name,
             json_t **ret, struct err *e);
/* Every page, merged: {"kind":"<Kind>List","metadata":{"resourceVersion":...},"items":[...]}.
 * Pages of o->limit items (500), one at a time, as client-go's pager asks for them; a continue
 * token the server has forgotten (410 Gone) starts the list over from its first page (at most
 * 3 times). Each page is bounded on the wire and decoded, the items kept by the budget. */
int kube_list(struct kube_client *c, const struct kube_resource *r, const char *ns,
              const struct kube_list_opts *o, json_t **ret, struct err *e);
/* One page; continue_token from the previous page's metadata.continue (NULL for the first). */
int kube_list_page(struct kube_client *c, const struct kube_resource *r, const char *ns,
                   const struct kube_list_opts *o, const char *continue_token, json_t **ret,
                   struct err *e);
int kube_create(struct kube_client *c, const struct kube_resource *r, const char *ns, json_t *obj,
                json_t **ret, struct err *e);
/* POST to a named object's subresource (serviceaccounts/NAME/token, ...). */
int kube_create_sub(struct kube_client *c, const struct kube_resource *r, const char *ns,
                    const char *name, const char *sub, json_t *obj, json_t **ret, struct err *e);
/* PUT with the object's metadata.resourceVersion: -ESTALE when someone else wrote first. */
int kube_update(struct kube_client *c, const struct kube_resource *r, const char *ns, json_t *obj,
                json_t **ret, struct err *e);
int kube_update_status(struct kube_client *c, const struct kube_resource *r, const char *ns,
                       json_t *obj, json_t **ret, struct err *e);

/* Mutates obj in place. Returns 0 to write it, 1 when nothing needs to change (no write is
 * made), or a negative code to give up. */
typedef int (*kube_mutate_fn)(json_t *obj, void *userdata, struct err *e);
/* Get, mutate, update (or update_status); on 409 Conflict re-read and re-apply, up to 10 times.
 * ret (may be NULL) gets the stored object. */
int kube_update_retry(struct kube_client *c, const struct kube_resource *r, const char *ns,
                      const char *name, bool status, kube_mutate_fn mutate, void *userdata,
                      json_t **ret, struct err *e);

enum kube_patch_type {
    KUBE_PATCH_MERGE,     /* application/merge-patch+json */
    KUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json */
    KUBE_PATCH_JSON,      /* application/json-patch+json (patch is an array) */
    KUBE_PATCH_APPLY,     /* server-side apply (application/apply-patch+yaml, JSON is YAML) */
};

struct kube_patch_opts {
    enum kube_patch_type type;
    const char *field_manager; /* required for APPLY; NULL: "gpuop" */
    bool force;                /* APPLY: take ownership of conflicting fields */
    bool status;               /* patch the status subresource */
};

int kube_patch(struct kube_client *c, const struct kube_resource *r, const char *ns,
               const char *name, const struct kube_patch_opts *o, json_t *patch, json_t **ret,
               struct err *e);

enum kube_propagation {
    KUBE_PROPAGATION_DEFAULT = 0,
    KUBE_PROPAGATION_BACKGROUND,
    KUBE_PROPAGATION_FOREGROUND,
    KUBE_PROPAGATION_ORPHAN,
};

struct kube_delete_opts {
    enum kube_propagation propagation;
    const char *precondition_uid;
    const char *precondition_resource_version;
    bool has_grace;               /* false: the object's default grace period */
    int64_t grace_period_seconds; /* with has_grace */
};

/* Deleting something already gone is -ENOENT. */
int kube_delete(struct kube_client *c, const struct kube_resource *r, const char *ns,
                const char *name, const struct kube_delete_opts *o, struct err *e);

/* policy/v1 Eviction of a pod. A 429 (a PodDisruptionBudget forbids it now) is KUBE_EBLOCKED,
 * returned at once, not retried: the caller decides when to try again. */
int kube_evict(struct kube_client *c, const char *ns, const char *pod,
               const struct kube_delete_opts *o, struct err *e);

/* A pod's log (text; container NULL: the pod's only container), at most limit bytes (0: the
 * client's response limit). *ret is NUL-terminated; the caller frees it. */
int kube_pod_log(struct kube_client *c, const char *ns, const char *pod, const char *container,
                 size_t limit, char **ret, size_t *ret_len, struct err *e);
/* What a log request asks (the API's PodLogOptions). */
struct kube_log_opts {
    const char *container;  /* NULL: the pod's only container */
    bool previous;          /* the container's instance before its last restart */
    uint64_t tail_lines;    /* the last N lines; 0: every line */
    uint64_t since_seconds; /* the lines of the last N seconds; 0: every line */
    size_t limit_bytes;     /* at most N bytes (the server's cut); 0: the client's response limit */
};
/* kube_pod_log with every option. The server may ignore a limit (a kubelet without limitBytes):
 * check *ret_len against limit_bytes. */
int kube_pod_log_opts(struct kube_client *c, const char *ns, const char *pod,
                      const struct kube_log_opts *o, char **ret, size_t *ret_len, struct err *e);

struct kube_event {
    const char *ns;        /* the event's namespace; NULL: the object's, or "default" */
    json_t *involved;      /* the object concerned (kind, apiVersion, metadata.name/ns/uid used) */
    const char *type;      /* "Normal" or "Warning" */
    const char *reason;    /* CamelCase, e.g. "DriverUpgradeStarted" */
    const char *message;   /* human text */
    const char *component; /* source.component; NULL: "gpuop" */
    const char *host;      /* source.host; may be NULL */
    int count;             /* 0: 1 */
};

/* Creates a core/v1 Event. */
int kube_event_create(struct kube_client *c, const struct kube_event *ev, struct err *e);

/* ---- watch -------------------------------------------------------------------------------- */

enum kube_watch_type {
    KUBE_WATCH_ADDED,
    KUBE_WATCH_MODIFIED,
    KUBE_WATCH_DELETED,
    KUBE_WATCH_BOOKMARK,
    KUBE_WATCH_ERROR, /* obj is a Status */
};

const char *kube_watch_type_name(enum kube_watch_type t);

/* Called per event; obj is borrowed (json_incref to keep it). Return 0 to go on, anything else
 * stops the watch (kube_watch then returns that value when negative, else 0). */
typedef int (*kube_watch_fn)(enum kube_watch_type type, json_t *obj, void *userdata);

struct kube_watch_opts {
    const char *label_selector;
    const char *field_selector;
    const char *resource_version; /* start after this version; NULL: "most recent" */
    bool bookmarks;               /* allowWatchBookmarks */
    unsigned timeout_seconds;     /* server-side end of the stream; 0: 300 */
    const volatile int *stop;     /* when non-NULL and set nonzero, the stream is abandoned */
};

/* One watch stream, until the server ends it (returns 0), the callback stops it, *stop is set
 * (returns -ECANCELED), or an error. A 410 Gone (as an HTTP answer or as an ERROR event) returns
 * KUBE_EGONE: re-list. Reconnecting is the caller's (the informer's) job. */
int kube_watch(struct kube_client *c, const struct kube_resource *r, const char *ns,
               const struct kube_watch_opts *o, kube_watch_fn fn, void *userdata, struct err *e);

/* ---- informer ----------------------------------------------------------------------------- */

struct kube_informer;

struct kube_informer_handlers {
    /* obj/old are the stored (projected) objects, borrowed and read-only. */
    void (*on_add)(json_t *obj, void *userdata);
    void (*on_update)(json_t *old, json_t *obj, void *userdata);
    void (*on_delete)(json_t *obj, void *userdata);
    void *userdata;
};

/* Returns a new reference to what the store should keep of obj (e.g. a smaller copy), or NULL
 * when the store keeps nothing of it (an object the owner never needs: no handler is called for
 * it; a later event for it is treated as new; one the store held is removed, on_delete). */
typedef json_t *(*kube_project_fn)(json_t *obj, void *userdata);

struct kube_informer_opts {
    const char *ns; /* NULL: all namespaces */
    const char *label_selector;
    const char *field_selector;
    unsigned page_size; /* 0: 500 */
    /* A projection: either a function, or a NULL-terminated list of dotted field paths to keep
     * ("spec.taints", "status.allocatable"); apiVersion, kind, metadata.name, namespace, uid,
     * resourceVersion, labels and deletionTimestamp are always kept. Neither: the full object
     * is kept. With a projection, an update that changes nothing the projection keeps (a node
     * heartbeat) refreshes the store without an on_update call. A projection function may
     * return another value than an object (a form its readers know, upg_pod_compact): the
     * store keys it by the full object's name, and it has no labels to index, no namespace a
     * list filters on (list with ns NULL), no version to compare on a relist (each item is
     * projected again; an equal result is no update). */
    kube_project_fn project;
    void *project_userdata;
    const char *const *keep_fields;
    /* Label keys the label index covers (NULL-terminated); NULL: every label key. Indexing only
     * the keys a controller queries keeps the index small (each entry costs ~100 bytes). */
    const char *const *index_label_keys;
    /* Dotted paths (NULL-terminated) whose values (objects, arrays or strings), after the
     * projection, the store keeps once: objects with equal values there share one copy
     * ("metadata.labels" of a node pool, a "status" most pods have alike, "apiVersion"). Name
     * only paths whose values repeat: each distinct value is also a key (its JSON text) of the
     * table of shared values. Stored objects are read-only, so readers see no difference; each
     * object is still priced whole against max_cached (an upper bound). */
    const char *const *share_paths;
    /* Labels kept in the compact form (kobj.h's label sets: sorted "key=value" strings the
     * store's objects share, ~8 bytes a label per object against ~110 as a JSON object); every
     * reader of these objects' labels must then read through kobj_labels_get() and the other
     * label set accessors. The shared strings no object holds any more are dropped once their
     * table has doubled, so changing values (a timestamp) do not grow it without bound. */
    bool compact_labels;
    /* NULL, or what the JSON text of every object the projection keeps holds: groups
     * (NULL-terminated) of substrings (NULL-terminated, none empty), every string of one group
     * in a member name or a string value (a pod's GPU request holds "nvidia.com/" and
     * "requests" or "limits": the groups {"nvidia.com/", "requests"}, {"nvidia.com/", "limits"}).
     * A list item or watch event (ADDED, MODIFIED, DELETED; never a BOOKMARK or an ERROR) whose
     * text holds no group whole, and no escape that could hide a string (kube_json_may_hold),
     * is neither decoded nor stored, only its resourceVersion noted. The contract: the filter
     * passes over only objects the projection would drop, and an object's being kept never
     * changes (a pod's requests and claims cannot). An object the store holds is always decoded
     * (counted in stats.prefilter_held: a filter that misses what its projection keeps), and
     * removed if the projection keeps nothing of it now. */
    const char *const *const *prefilter;
    struct kube_informer_handlers handlers;
};

/* Whether the JSON text may hold every string of one of groups (each NULL-terminated, and the
 * list), each in a member name or a string value: false only when for no group is every string
 * in the text as it is, and no escape in it stands for a character any string holds ("\/"
 * for "nvidia.com/", any "\u" of a character outside ASCII for a string outside ASCII). The
 * text need not be valid JSON; for text that is, false means no group's strings are all in its
 * decoded names and strings. Pure. */
bool kube_json_may_hold(const char *text, size_t n, const char *const *const *groups);

/* The informer starts at once: a list (in pages, each applied to the store as it comes; a
 * forgotten continue token starts it over), then one watch, from the list's resourceVersion,
 * with bookmarks. The store counts against the client's max_cached: an informer that would pass
 * it keeps what it has and lists again after a backoff (synced only once a whole list fits). A
 * stream the server ends normally is resumed from the last version seen (bookmarks keep it fresh);
 * after a 410 Gone, a broken connection or a refused watch it lists again, after a jittered backoff
 * (the server may have restarted), and the differences become add/update/delete calls. The client
 * must outlive the informer. */
int kube_informer_new(struct kube_client *c, const struct kube_resource *r,
                      const struct kube_informer_opts *o, struct kube_informer **ret,
                      struct err *e);
/* Stops the thread (at once, abandoning the stream) and frees the store. Accepts NULL. */
void kube_informer_free(struct kube_informer *inf);
DEFINE_CLEANUP_FUNC(struct kube_informer, kube_informer_free)

/* Lists again soon and stores every object anew through the projection, unchanged ones too:
 * for a projection function that now keeps more (its owner widened what it keeps). The store
 * stays synced meanwhile; kube_informer_relisted() says when such a list has completed. */
void kube_informer_relist(struct kube_informer *inf);
/* Has every relist asked for by kube_informer_relist() before this call completed? */
bool kube_informer_relisted(struct kube_informer *inf);

/* Waits until the first list is in the store. 0, or -ETIMEDOUT. */
int kube_informer_wait_synced(struct kube_informer *inf, uint64_t timeout_ms);
bool kube_informer_synced(struct kube_informer *inf);
/* A new reference to the stored object, or NULL. ns NULL for cluster-scoped. Read-only. */
json_t *kube_informer_get(struct kube_informer *inf, const char *ns, const char *name);
/* A new array of the stored objects (read-only): all (label_key NULL), those with the label
 * label_key=label_value (from the label index when it covers label_key, else by a scan), or
 * those having label_key at all (label_value NULL; a scan). ns NULL: every namespace. */
json_t *kube_informer_list(struct kube_informer *inf, const char *ns, const char *label_key,
                           const char *label_value);
size_t kube_informer_count(struct kube_informer *inf);
/* The resourceVersion the store reflects. Caller frees. */
char *kube_informer_resource_version(struct kube_informer *inf);

struct kube_informer_stats {
    uint64_t lists;          /* full lists made (1 + re-lists) */
    uint64_t watches;        /* watch streams opened */
    uint64_t events;         /* watch events applied (bookmarks excluded) */
    uint64_t gone;           /* 410s seen */
    uint64_t unchanged;      /* updates that left the projection as it was (no on_update call) */
    uint64_t listed;         /* items the lists handed over, page by page (a list's progress) */
    uint64_t skipped;        /* list items and watch events the prefilter passed over undecoded */
    uint64_t prefilter_held; /* ones it would have passed over that the store held: decoded */
};
void kube_informer_stats(struct kube_informer *inf, struct kube_informer_stats *ret);

/* Waiting for informers' first lists: a deadline on progress, not on the whole, so a list that
 * takes long because it is large goes on while its pages come, and a server that answers
 * nothing fails in stall_ms. `listed` is the informers' stats.listed summed; now_ms monotonic.
 * The first call starts the clock. True when nothing was listed for stall_ms. Pure. */
struct kube_sync_progress {
    uint64_t listed, since_ms;
    bool started;
};
bool kube_sync_stalled(struct kube_sync_progress *p, uint64_t listed, uint64_t now_ms,
                       uint64_t stall_ms);

/* Keeps only the listed dotted paths (plus the identity fields); a new object. */
json_t *kube_project_fields(json_t *obj, const char *const *keep_fields);

/* ---- leader election ---------------------------------------------------------------------- */

struct kube_leader;

struct kube_leader_opts {
    const char *ns;       /* the Lease's namespace */
    const char *name;     /* the Lease's name */
    const char *identity; /* this candidate (e.g. the pod name); unique */
    uint64_t lease_ms;    /* 0: 15000. Others wait this long after the last renewal seen */
    uint64_t renew_ms;    /* 0: 10000. The leader gives up when it cannot renew this long */
    uint64_t retry_ms;    /* 0: 2000. Period of attempts */
    uint64_t release_ms;  /* 0: 1000. Bounds the release of the lease on kube_leader_free */
    void (*on_started)(void *userdata); /* became leader */
    void (*on_stopped)(void *userdata); /* lost (or released) the lease */
    void (*on_new_leader)(const char *identity, void *userdata);
    void *userdata;
};

/* Starts a candidate on its own thread. Callbacks run on that thread. */
int kube_leader_new(struct kube_client *c, const struct kube_leader_opts *o,
                    struct kube_leader **ret, struct err *e);
bool kube_leader_is_leader(struct kube_leader *l);
/* The current holder as last seen (caller frees), or NULL. */
char *kube_leader_holder(struct kube_leader *l);
/* Stops; a leader releases the lease (empty holder) so another can take over at once, when the
 * API server answers within release_ms (even after the client's stop token fired). */
void kube_leader_free(struct kube_leader *l);
DEFINE_CLEANUP_FUNC(struct kube_leader, kube_leader_free)

#endif
