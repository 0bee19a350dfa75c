/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's HTTP layer: requests in, responses out. Routes (route.c) feed a dispatch table
 * (api.c) whose handlers call the object layer and render its ks_status (http.c); discovery,
 * tables and watch streams are rendered here too. Nothing below calls into this layer. */
#ifndef GPUOP_KS_HTTP_H
#define GPUOP_KS_HTTP_H

#include "ks-objects.h"

/* ---- http.c: responses, bodies, query parameters ------------------------------------------ */

void ks_json_response(struct ksim_response *resp, int code, json_t *v); /* steals v */
/* The Status object: code, reason, message, details. */
void ks_render_status(struct ksim_response *resp, const struct ks_status *st);
/* r < 0 or obj NULL: the status; else obj (stolen) with st->code. */
void ks_respond(struct ksim_response *resp, int r, json_t *obj, const struct ks_status *st);
/* A request body as JSON (from JSON, YAML or protobuf); NULL with a 400/413/415 in st. */
json_t *ks_parse_body(struct ksim *ks, const struct ksim_request *req, bool want_object,
                      struct ks_status *st);
const char *ks_qget(json_t *q, const char *k);
bool ks_qtrue(json_t *q, const char *k);
bool ks_dry_run(json_t *q);
bool ks_wants_table(const struct ksim_request *req);
/* The Accept header picks protobuf for an object of this kind (one the tables describe). */
bool ks_accepts_protobuf(const struct ksim_request *req, const char *api_version, const char *kind);
/* resp->json into resp->body: JSON, or protobuf where the Accept header prefers it and the kind
 * has a message (never a Table); 406 when only protobuf was acceptable and it has none. */
void ks_response_serialize(const struct ksim_request *req, struct ksim_response *resp);
/* Whether ks_response_serialize writes resp->json as JSON. */
bool ks_response_is_json(const struct ksim_request *req, const struct ksim_response *resp);

/* ---- watch.c: a write's response -------------------------------------------------------- */

/* Under ks->lock: where resp->json is the object of the log's newest event (the version a write
 * just stored) and goes out as JSON, its body is the event's JSON, made once for the response
 * and every JSON watcher. */
void ks_response_from_event(struct ksim *ks, const struct ksim_request *req,
                            struct ksim_response *resp);

/* ---- podlog.c: pods/<name>/log ---------------------------------------------------------- */

/* The API server's checks, then resp->proxy for a pod on a node a kubelet process serves (an
 * empty log for an unbound pod; 404 on kubesim's own nodes, which run nothing). */
void ks_pod_log(struct ksim *ks, json_t *pod, const char *name, json_t *q,
                struct ksim_response *resp);

/* ---- route.c: URL to resource coordinates ------------------------------------------------- */

#define KS_ROUTE_MAX_SEGMENTS 12

struct ks_route {
    char *parts[KS_ROUTE_MAX_SEGMENTS];
    size_t n;
    const char *group; /* "" for /api */
    const char *version;
    const char *resource;
    const char *ns; /* NULL: cluster scope or all namespaces */
    const char *name;
    const char *sub;
    bool watch;    /* /watch/ in the path or ?watch=true */
    json_t *query; /* decoded parameters, name -> string */
};

/* 0, or -ENOENT when the path names no resource. ret is always initialised (free it). */
int ks_route_parse(const char *path, const char *query, struct ks_route *ret);
void ks_route_free(struct ks_route *r);
json_t *ks_query_parse(const char *q);

/* ---- watch.c ------------------------------------------------------------------------------ */

struct ks_watch_opts {
    const char *resource_version; /* NULL or "": from now, with the current state as ADDED */
    uint64_t timeout_s;           /* 0: the API server's random 30 to 60 minutes */
    bool bookmarks;
    bool table;
    bool send_initial_events;
};
/* Takes ls and fs (freed on failure too). */
int ks_watch_start(struct ksim *ks, struct ks_type *t, const char *ns, struct ksim_selector *ls,
                   struct ksim_selector *fs, const struct ks_watch_opts *o, struct ksim_watch **ret,
                   struct ks_status *st);

/* ---- discovery.c and table.c -------------------------------------------------------------- */

/* /healthz, /livez and /readyz: answered without the store lock, so a long reconcile never
 * makes a liveness probe fail. */
bool ks_health(const struct ksim_request *req, struct ksim_response *resp);
bool ks_discovery(struct ksim *ks, const struct ksim_request *req, struct ksim_response *resp);
json_t *ks_table(struct ksim *ks, struct ks_type *t, json_t *items, bool with_columns);

#endif
