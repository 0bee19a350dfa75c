/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim: an in-memory Kubernetes API server core. Requests in (method, path, query, body),
 * responses out (code, JSON body or a watch stream); no I/O of its own, so tests and the fuzz
 * target drive it directly. The HTTP shell (main.c) adds sockets, TLS and authentication.
 *
 * One mutex guards the whole store; every entry point takes it, so a ksim is thread-safe.
 * Controllers (DaemonSets, pod readiness, garbage collection, namespaces, PDB status) run in
 * ksim_reconcile(), which the shell calls from a background thread and tests call directly.
 */
#ifndef GPUOP_KUBESIM_H
#define GPUOP_KUBESIM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct ksim;
struct ksim_watch;

/* Who may do what (the API server's --authorization-mode and its authenticators). */
enum ksim_authz {
    /* No authentication: every request acts as the admin (the core's tests, fuzzing). */
    KSIM_AUTHZ_OFF = 0,
    /* Bearer tokens authenticate (401 on an unknown one); everyone is allowed everything. */
    KSIM_AUTHZ_ALWAYS_ALLOW,
    /* Bearer tokens authenticate; RBAC over the stored Roles, ClusterRoles and bindings
     * decides (403); system:masters bypasses it. */
    KSIM_AUTHZ_RBAC,
};

/* The static admin identity: the --token / kubeconfig credential. */
#define KSIM_ADMIN_USER  "kubesim-admin"
#define KSIM_ADMIN_GROUP "system:masters"

struct ksim_opts {
    uint64_t watch_retention_ms; /* events older than this are compacted (410 below them) */
    uint64_t pod_ready_delay_ms; /* scheduled pods turn Running+Ready after this */
    uint64_t bookmark_interval_ms;
    size_t max_body;   /* request bodies above this are 413 */
    size_t max_events; /* hard cap on the retained event log */
    /* Pods one ReplicaSet may make kubesim hold (its ReplicaFailure condition says so past it);
     * 0: the default, 10000. */
    size_t max_pods_per_owner;
    /* Daemon pods the DaemonSet controller makes, and pods the simulated kubelet starts, in one
     * reconcile (the rest in the next ones, the store lock let go between); 0: 10000. */
    size_t daemon_burst;
    /* With ksim_persist_open: the journal is compacted into a snapshot once past this many
     * bytes and twice the snapshot's size; 0: 64 MiB. */
    size_t journal_compact_bytes;
    /* First resourceVersion. The shell starts from the wall clock in ms, so a client resuming
     * a watch across a kubesim restart sees 410 (older) instead of silence. */
    uint64_t initial_rv;
    /* Clock (wall, ms since the epoch); NULL uses the real one. Tests inject their own. */
    uint64_t (*now_ms)(void *ctx);
    void *clock_ctx;
    enum ksim_authz authz;
    /* Bearer token of KSIM_ADMIN_USER (groups system:masters, system:authenticated); NULL:
     * none. Copied. */
    const char *admin_token;
    /* A request without credentials acts as the admin (kubesim without --token, as the old
     * API servers' insecure port); false: 401. Bad credentials are 401 either way. */
    bool anonymous_admin;
};

void ksim_opts_default(struct ksim_opts *o);
struct ksim *ksim_new(const struct ksim_opts *o);
void ksim_free(struct ksim *ks);
DEFINE_CLEANUP_FUNC(struct ksim, ksim_free)

struct ksim_request {
    const char *method; /* GET, POST, PUT, PATCH, DELETE */
    const char *path;   /* /api/v1/namespaces/default/pods, no query */
    const char *query;  /* raw, percent-encoded, without '?'; may be NULL */
    const char *content_type;
    const char *accept;
    const char *body;
    size_t body_len;
    const char *authorization; /* the Authorization header; NULL: none */
    /* Impersonate-User and each Impersonate-Group header (kubectl --as, --as-group) */
    const char *impersonate_user;
    const char *const *impersonate_groups;
    size_t n_impersonate_groups;
    const char *user_agent; /* the User-Agent header; NULL: none (names a write's manager) */
};

/* Where the shell gets a response body from: a kubelet's HTTP endpoint (pods/log on a node a
 * kubelet process serves), as the API server proxies to the kubelet. Plain HTTP here. */
struct ksim_proxy {
    char *host; /* the node's InternalIP */
    uint16_t port;
    char *path; /* "/containerLogs/NS/POD/CONTAINER?follow=true&..." */
    char *name; /* the pod, for the Status of a kubelet error */
    bool follow;
};
void ksim_proxy_free(struct ksim_proxy *p);

struct ksim_response {
    int code;
    const char *content_type; /* static string */
    char *body;               /* malloc'ed, NUL-terminated */
    size_t body_len;
    struct ksim_watch *watch; /* non-NULL: stream ksim_watch_next() after the headers */
    /* non-NULL: the body (content_type, code 200) is the kubelet's answer to this request */
    struct ksim_proxy *proxy;
    /* for metrics: "get|list|watch|create|update|patch|delete|deletecollection|..." */
    char verb[24];
    /* "<plural>[/<subresource>]": a CRD's plural takes up to 253 bytes (its name is
     * plural.group, a DNS subdomain), so the metrics label is never cut */
    char resource[272];
    json_t *json; /* internal: the body, serialized once the store is unlocked */
    /* NULL or an array of strings, each sent as a `Warning: 299 - "..."` header (unknown fields
     * under fieldValidation=Warn) */
    json_t *warnings;
};

/* Handles one request. Never fails: every problem becomes a Status response. */
void ksim_handle(struct ksim *ks, const struct ksim_request *req, struct ksim_response *resp);
void ksim_response_free(struct ksim_response *resp);
/* Authenticates and authorizes a request the shell serves itself (/metrics, a non-resource
 * URL): true to serve it; false with the 401 or 403 Status in resp (free it). */
bool ksim_allowed(struct ksim *ks, const struct ksim_request *req, struct ksim_response *resp);
/* A kubelet's answer other than 2xx (its body, len bytes) as the Status the API server makes of
 * it: 400 BadRequest with the kubelet's text, 404 NotFound "the server could not find the
 * requested resource ( pods/log P)", ... resp is overwritten (free it). */
void ksim_proxy_error(const struct ksim_proxy *p, int code, const char *body, size_t len,
                      struct ksim_response *resp);
/* The head of a kubelet's HTTP/1.x answer in buf (len bytes): 0 with the status code, the
 * Content-Length (-1 when absent) and the head's length (body bytes follow it); -EAGAIN when
 * the head is not complete yet; -EBADMSG when it is not an HTTP response. */
int ksim_proxy_head_parse(const char *buf, size_t len, int *ret_code, int64_t *ret_length,
                          size_t *ret_head_len);
/* The kubelet could not be reached (what: "dial tcp 1.2.3.4:10250: connect: connection
 * refused"): the API server's 500 with the client's error. */
void ksim_proxy_dial_error(const struct ksim_proxy *p, const char *what,
                           struct ksim_response *resp);

/* Appends the next newline-delimited watch events to out, waiting up to wait_ms for one.
 * Returns 1 when something was appended, 0 when nothing came, -1 when the watch ended
 * (timeoutSeconds passed, ksim shutting down or an ERROR event was the last thing sent). */
int ksim_watch_next(struct ksim *ks, struct ksim_watch *w, struct sbuf *out, uint64_t wait_ms);
void ksim_watch_free(struct ksim *ks, struct ksim_watch *w);
/* Wakes every blocked ksim_watch_next and makes later ones return -1 (shutdown). */
void ksim_shutdown(struct ksim *ks);

/* Creates one object as a POST would (namespaces are created on the fly). Used by --load. */
int ksim_create_object(struct ksim *ks, json_t *obj, struct err *e);
/* As ksim_create_object, without its copy: takes obj, whose top and metadata the create changes
 * and stores; its other values may be held elsewhere too (nothing changes them in place). */
int ksim_create_object_own(struct ksim *ks, json_t *obj, struct err *e);
/* Persistence, as etcd behind an API server (journal.c): every change committed from now on is
 * appended to a journal in dir (made when missing; locked against a second kubesim) before the
 * request is answered. When dir holds a state (a snapshot, a journal), it replaces the store
 * (ks as ksim_new made it), the watch log starts empty at the loaded resourceVersion (older
 * ones get 410) and the controllers resume from the loaded objects. Then the state is written
 * as one snapshot and the journal emptied. A corrupt snapshot or journal line (other than a
 * torn last journal line, dropped and logged) is -EBADMSG naming the file and line, with
 * nothing written; -EBUSY: another process holds dir. */
struct ksim_persist_info {
    bool loaded;            /* a state was read back */
    uint64_t rv;            /* the resourceVersion now */
    size_t objects;         /* objects loaded */
    size_t journal_records; /* journal lines read (those the snapshot holds already included) */
};
int ksim_persist_open(struct ksim *ks, const char *dir, struct ksim_persist_info *ret,
                      struct err *e);
/* Runs the controllers once. Returns true when it changed something. */
bool ksim_reconcile(struct ksim *ks);
/* Blocks until a write happens or wait_ms passes (for the controller thread). */
void ksim_wait_change(struct ksim *ks, uint64_t wait_ms);

/* Prometheus text of the core's metrics (watches, objects) appended to out, written through
 * src/base/prom: 0, or -ENOBUFS when out's limit would be passed. */
GPUOP_WUR int ksim_metrics(struct ksim *ks, struct sbuf *out);
/* Current global resourceVersion. */
uint64_t ksim_resource_version(struct ksim *ks);

/* Pure helpers, exported for unit tests. */
struct ksim_selector;
/* Parses a label selector string; NULL on error with the API server's message in e. */
struct ksim_selector *ksim_label_selector_parse(const char *s, struct err *e);
/* From a metav1.LabelSelector object (matchLabels + matchExpressions). */
struct ksim_selector *ksim_label_selector_from_json(json_t *sel, struct err *e);
bool ksim_selector_matches(const struct ksim_selector *sel, json_t *labels);
void ksim_selector_free(struct ksim_selector *s);
DEFINE_CLEANUP_FUNC(struct ksim_selector, ksim_selector_free)

/* RFC 6902; returns 0 and a new value, or -EINVAL with a message. */
int ksim_json_patch(json_t *target, json_t *ops, json_t **ret, struct err *e);
/* Strategic merge patch with Kubernetes' merge keys and $-directives; returns a new value. */
int ksim_strategic_merge_patch(json_t *target, json_t *patch, json_t **ret, struct err *e);

#endif
