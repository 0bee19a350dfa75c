/* SPDX-License-Identifier: Apache-2.0 */
/* Request dispatch: the route parser's coordinates and the method pick a handler from a table;
 * handlers turn the request into object operations (ks-objects.h) and render what they return.
 * No object semantics here: what a create, update or delete means lives in the object layer. */
#include <inttypes.h>
#include <string.h>

#include "ks-auth.h"
#include "ks-http.h"
#include "ks-openapi.h"
#include "kubesim-pb.h"

/* One request on its way through a handler. */
struct ks_call {
    struct ksim *ks;
    const struct ksim_request *req;
    struct ksim_response *resp;
    struct ks_type *t;
    json_t *q;
    const char *method;
    const char *ns; /* NULL: none in the path */
    const char *name;
    const char *sub;
    bool watch;
    json_t *cur; /* the named object, NULL when absent */
};

static void respond_error(struct ksim_response *resp, int code, const char *reason, const char *msg)
{
    _cleanup_status_ struct ks_status st = {0};
    ks_status_set(&st, code, reason, NULL, "%s", msg);
    ks_render_status(resp, &st);
}

static void respond_not_found(struct ksim_response *resp, struct ks_type *t, const char *name)
{
    _cleanup_status_ struct ks_status st = {0};
    ks_not_found(&st, t, name);
    ks_render_status(resp, &st);
}

static void respond_not_found_resource(struct ksim_response *resp)
{
    _cleanup_status_ struct ks_status st = {0};
    ks_not_found_resource(&st);
    ks_render_status(resp, &st);
}

static void respond_not_allowed(struct ksim_response *resp)
{
    _cleanup_status_ struct ks_status st = {0};
    ks_method_not_allowed(&st);
    ks_render_status(resp, &st);
}

/* A body, or NULL with the error already rendered. */
static json_t *body_of(struct ks_call *c, const struct ksim_request *req, bool want_object)
{
    _cleanup_status_ struct ks_status st = {0};
    json_t *v = ks_parse_body(c->ks, req, want_object, &st);
    if (!v)
        ks_render_status(c->resp, &st);
    return v;
}

static void set_verb(struct ksim_response *resp, const char *verb, struct ks_type *t,
                     const char *sub)
{
    strlcpy_s(resp->verb, verb, sizeof(resp->verb));
    if (t) {
        if (sub)
            snprintf(resp->resource, sizeof(resp->resource), "%s/%s", t->plural, sub);
        else
            strlcpy_s(resp->resource, t->plural, sizeof(resp->resource));
    }
}

/* ---- reads -------------------------------------------------------------------------------- */

static void do_list(struct ksim *ks, struct ks_type *t, const char *ns, json_t *q,
                    const struct ksim_request *req, struct ksim_selector *ls,
                    struct ksim_selector *fs, struct ksim_response *resp)
{
    uint64_t limit = 0;
    const char *ls_ = ks_qget(q, "limit");
    if (ls_ && ls_[0] && parse_u64(ls_, &limit) < 0) {
        respond_error(resp, 400, "BadRequest",
                      "limit: Invalid value: must be a non-negative "
                      "integer");
        return;
    }
    _cleanup_free_ char *after = NULL;
    const char *cont = ks_qget(q, "continue");
    if (cont && cont[0]) {
        size_t n = 0;
        _cleanup_free_ char *raw = NULL;
        json_t *tok =
            base64_decode(cont, strlen(cont), &raw, &n) == 0 ? json_loadb(raw, n, 0, NULL) : NULL;
        const char *start = kobj_str(tok, "start");
        if (!start || !streq_ptr(kobj_str(tok, "v"), "meta.k8s.io/v1")) {
            json_decref(tok);
            respond_error(resp, 400, "BadRequest",
                          "continue key is not valid: illegal base64 data or unrecognized token");
            return;
        }
        size_t sl = strlen(start);
        after = xstrndup(start, sl && start[sl - 1] == '\x01' ? sl - 1 : sl);
        json_decref(tok);
    }
    _cleanup_free_ char *last = NULL;
    size_t remaining = 0;
    json_t *items = ks_store_list(t, ns, ls, fs, after, (size_t)limit, &last, &remaining);
    char rv[32];
    snprintf(rv, sizeof(rv), "%" PRIu64, ks->rv);
    json_t *meta = json_pack("{s:s}", "resourceVersion", rv);
    if (remaining && last) {
        _cleanup_free_ char *start = xasprintf("%s\x01", last);
        json_t *tok = json_pack("{s:s,s:I,s:s}", "v", "meta.k8s.io/v1", "rv", (json_int_t)ks->rv,
                                "start", start);
        _cleanup_free_ char *s = json_dumps(tok, JSON_COMPACT);
        json_decref(tok);
        _cleanup_free_ char *enc = base64_encode(s, strlen(s));
        json_object_set_new(meta, "continue", json_string(enc));
        json_object_set_new(meta, "remainingItemCount", json_integer((json_int_t)remaining));
    }
    if (ks_wants_table(req)) {
        json_t *tab = ks_table(ks, t, items, !streq_ptr(ks_qget(q, "includeObject"), "None"));
        if (streq_ptr(ks_qget(q, "includeObject"), "Object")) {
            size_t i;
            json_t *row;
            json_array_foreach (json_object_get(tab, "rows"), i, row)
                json_object_set(row, "object", json_array_get(items, i));
        }
        json_object_set(tab, "metadata", meta);
        json_decref(meta);
        json_decref(items);
        ks_json_response(resp, 200, tab);
        return;
    }
    _cleanup_free_ char *gv = ks_type_gv(t);
    _cleanup_free_ char *lk = xasprintf("%sList", t->kind);
    ks_json_response(resp, 200,
                     json_pack("{s:s,s:s,s:o,s:o}", "kind", lk, "apiVersion", gv, "metadata", meta,
                               "items", items));
}

/* A resourceVersion newer than the store's: the watch cache's 504 "Too large resource version". */
static bool rv_too_large(struct ksim *ks, json_t *q, struct ksim_response *resp)
{
    const char *rvs = ks_qget(q, "resourceVersion");
    uint64_t rv = 0;
    if (!rvs || !rvs[0] || parse_u64(rvs, &rv) < 0 || rv <= ks->rv)
        return false;
    _cleanup_status_ struct ks_status st = {0};
    ks_status_set(&st, 504, "Timeout",
                  json_pack("{s:[{s:s,s:s}],s:i}", "causes", "reason", "ResourceVersionTooLarge",
                            "message", "Too large resource version", "retryAfterSeconds", 1),
                  "Too large resource version: %" PRIu64 ", current: %" PRIu64, rv, ks->rv);
    ks_render_status(resp, &st);
    return true;
}

static void h_get(struct ks_call *c)
{
    if (!c->cur) {
        respond_not_found(c->resp, c->t, c->name);
    } else if (ks_wants_table(c->req)) {
        json_t *one = json_pack("[O]", c->cur);
        ks_json_response(c->resp, 200, ks_table(c->ks, c->t, one, true));
        json_decref(one);
    } else {
        ks_json_response(c->resp, 200, json_incref(c->cur));
    }
}

static void h_list_or_watch(struct ks_call *c)
{
    json_t *q = c->q;
    set_verb(c->resp, c->watch ? "watch" : "list", c->t, NULL);
    struct err e = {0};
    struct ksim_selector *ls = ksim_label_selector_parse(ks_qget(q, "labelSelector"), &e);
    if (!ls) {
        respond_error(c->resp, 400, "BadRequest", err_msg(&e));
        return;
    }
    _cleanup_free_ char *fsel_s = NULL;
    if (c->name)
        fsel_s = xasprintf("metadata.name=%s%s%s", c->name, ks_qget(q, "fieldSelector") ? "," : "",
                           ks_qget(q, "fieldSelector") ?: "");
    struct ksim_selector *fs =
        ks_field_selector_parse(fsel_s ? fsel_s : ks_qget(q, "fieldSelector"), c->t, &e);
    if (!fs) {
        ksim_selector_free(ls);
        respond_error(c->resp, 400, "BadRequest", err_msg(&e));
        return;
    }
    if (rv_too_large(c->ks, q, c->resp)) {
        ksim_selector_free(ls);
        ksim_selector_free(fs);
        return;
    }
    if (!c->watch) {
        do_list(c->ks, c->t, c->ns, q, c->req, ls, fs, c->resp);
        ksim_selector_free(ls);
        ksim_selector_free(fs);
        return;
    }
    struct ks_watch_opts o = {.resource_version = ks_qget(q, "resourceVersion"),
                              .bookmarks = ks_qtrue(q, "allowWatchBookmarks"),
                              .table = ks_wants_table(c->req),
                              .send_initial_events = ks_qtrue(q, "sendInitialEvents")};
    const char *to = ks_qget(q, "timeoutSeconds");
    uint64_t secs = 0;
    if (to && to[0] && parse_u64(to, &secs) == 0)
        o.timeout_s = secs;
    _cleanup_status_ struct ks_status st = {0};
    struct ksim_watch *w = NULL;
    if (ks_watch_start(c->ks, c->t, c->ns, ls, fs, &o, &w, &st) < 0) {
        ks_render_status(c->resp, &st);
        return;
    }
    c->resp->code = 200;
    c->resp->content_type = "application/json";
    _cleanup_free_ char *gv = ks_type_gv(c->t);
    if (!o.table && ks_accepts_protobuf(c->req, gv, c->t->kind)) {
        w->proto = true;
        c->resp->content_type = KS_PB_WATCH_TYPE;
    }
    c->resp->watch = w;
}

/* ---- writes ------------------------------------------------------------------------------- */

/* The fieldValidation directive applied to a body or patch: false when it rendered a 400. */
static bool fields_ok(struct ks_call *c, json_t *obj, bool apply)
{
    _cleanup_status_ struct ks_status st = {0};
    enum ks_field_validation fv;
    if (ks_field_validation_of(c->q, &fv, &st) < 0 ||
        ks_field_validate(c->ks, c->t, obj, fv, apply, c->resp, &st) < 0) {
        ks_render_status(c->resp, &st);
        return false;
    }
    return true;
}

/* The field manager of a create, update or patch: the fieldManager parameter, else the
 * User-Agent's product name ("kubectl/v1.32.0 (linux/amd64) ..." -> "kubectl"), as the API
 * server names it; at most 128 bytes. */
static const char *write_manager(struct ks_call *c, char *buf, size_t n)
{
    const char *fm = ks_qget(c->q, "fieldManager");
    if (fm && fm[0])
        snprintf(buf, n, "%s", fm);
    else
        snprintf(buf, n, "%.*s", (int)strcspn(c->req->user_agent ?: "", "/"),
                 c->req->user_agent ?: "");
    return buf;
}

static void h_create(struct ks_call *c)
{
    json_t *obj = body_of(c, c->req, true);
    if (!obj)
        return;
    if (!fields_ok(c, obj, false)) {
        json_decref(obj);
        return;
    }
    _cleanup_free_ char *ns = xstrdup(c->ns ? c->ns : "");
    if (c->t->namespaced && !c->ns) {
        const char *bns = kobj_namespace(obj);
        if (!bns) {
            json_decref(obj);
            respond_not_found_resource(c->resp);
            return;
        }
        free(ns);
        ns = xstrdup(bns);
    }
    _cleanup_status_ struct ks_status st = {0};
    json_t *res = NULL;
    char mgr[129];
    c->ks->write_manager = write_manager(c, mgr, sizeof(mgr));
    int r = ks_obj_create(c->ks, c->t, ns, obj, ks_dry_run(c->q), &res, &st);
    c->ks->write_manager = NULL;
    ks_respond(c->resp, r, res, &st);
}

static void h_update(struct ks_call *c)
{
    json_t *obj = body_of(c, c->req, true);
    if (!obj)
        return;
    if (!fields_ok(c, obj, false)) {
        json_decref(obj);
        return;
    }
    _cleanup_status_ struct ks_status st = {0};
    json_t *res = NULL;
    char mgr[129];
    c->ks->write_manager = write_manager(c, mgr, sizeof(mgr));
    int r = ks_obj_replace(c->ks, c->t, c->name, c->cur, obj, c->sub, ks_dry_run(c->q), &res, &st);
    c->ks->write_manager = NULL;
    ks_respond(c->resp, r, res, &st);
}

static void h_patch(struct ks_call *c)
{
    const char *ct = c->req->content_type ? c->req->content_type : "";
    enum ks_patch_kind kind = KS_PATCH_MERGE;
    bool apply = false;
    if (str_has_prefix(ct, "application/merge-patch+json")) {
        kind = KS_PATCH_MERGE;
    } else if (str_has_prefix(ct, "application/json-patch+json")) {
        kind = KS_PATCH_JSON;
    } else if (str_has_prefix(ct, "application/strategic-merge-patch+json") && !c->t->crd) {
        kind = KS_PATCH_STRATEGIC;
    } else if (str_has_prefix(ct, "application/apply-patch+yaml") ||
               str_has_prefix(ct, "application/apply-patch+cbor")) {
        apply = true;
    } else {
        _cleanup_free_ char *m = xasprintf(
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, "
            "application/apply-patch+yaml%s",
            c->t->crd ? "" : ", application/strategic-merge-patch+json");
        respond_error(c->resp, 415, "UnsupportedMediaType", m);
        return;
    }
    struct ksim_request yreq = *c->req;
    yreq.content_type = apply ? "application/yaml" : "application/json";
    json_t *patch = body_of(c, &yreq, false);
    if (!patch)
        return;
    /* a merge or apply patch names the fields it sets; a JSON patch's ops are not checked */
    if (kind != KS_PATCH_JSON && !fields_ok(c, patch, apply)) {
        json_decref(patch);
        return;
    }
    _cleanup_status_ struct ks_status st = {0};
    json_t *res = NULL;
    int r;
    if (apply)
        r = ks_obj_apply(c->ks, c->t, c->ns ? c->ns : "", c->name, c->cur, patch,
                         ks_qget(c->q, "fieldManager"), ks_qtrue(c->q, "force"), ks_dry_run(c->q),
                         &res, &st);
    else {
        char mgr[129];
        c->ks->write_manager = write_manager(c, mgr, sizeof(mgr));
        r = ks_obj_patch(c->ks, c->t, c->name, c->cur, kind, patch, c->sub, ks_dry_run(c->q), &res,
                         &st);
        c->ks->write_manager = NULL;
    }
    ks_respond(c->resp, r, res, &st);
}

static void h_delete(struct ks_call *c)
{
    if (!c->cur) {
        respond_not_found(c->resp, c->t, c->name);
        return;
    }
    _cleanup_json_ json_t *opts = NULL;
    if (c->req->body && c->req->body_len) {
        opts = body_of(c, c->req, true);
        if (!opts)
            return;
    }
    struct ks_delete_opts o = {.propagation = kobj_str(opts, "propagationPolicy"), .grace = -1};
    if (!o.propagation)
        o.propagation = ks_qget(c->q, "propagationPolicy");
    if (!o.propagation && json_is_false(json_object_get(opts, "orphanDependents")))
        o.propagation = "Background";
    if (!o.propagation && json_is_true(json_object_get(opts, "orphanDependents")))
        o.propagation = "Orphan";
    o.uid = kobj_path_str(opts, "preconditions.uid");
    o.rv = kobj_path_str(opts, "preconditions.resourceVersion");
    o.dry = ks_dry_run(c->q) || (json_is_array(json_object_get(opts, "dryRun")) &&
                                 json_array_size(json_object_get(opts, "dryRun")));
    json_t *g = json_object_get(opts, "gracePeriodSeconds");
    if (json_is_integer(g))
        o.grace = json_integer_value(g);
    else if (ks_qget(c->q, "gracePeriodSeconds"))
        parse_i64(ks_qget(c->q, "gracePeriodSeconds"), &o.grace);
    _cleanup_status_ struct ks_status st = {0};
    json_t *res = NULL;
    int r = ks_obj_delete(c->ks, c->t, c->cur, &o, &res, &st);
    ks_respond(c->resp, r, res, &st);
}

static void h_delete_collection(struct ks_call *c)
{
    struct err e = {0};
    _cleanup_(ksim_selector_freep) struct ksim_selector *ls =
        ksim_label_selector_parse(ks_qget(c->q, "labelSelector"), &e);
    if (!ls) {
        respond_error(c->resp, 400, "BadRequest", err_msg(&e));
        return;
    }
    _cleanup_(ksim_selector_freep) struct ksim_selector *fs =
        ks_field_selector_parse(ks_qget(c->q, "fieldSelector"), c->t, &e);
    if (!fs) {
        respond_error(c->resp, 400, "BadRequest", err_msg(&e));
        return;
    }
    char *last;
    size_t rem;
    json_t *items = ks_store_list(c->t, c->ns, ls, fs, NULL, 0, &last, &rem);
    free(last);
    size_t k;
    json_t *o;
    json_array_foreach (items, k, o) {
        if (!ks_dry_run(c->q))
            ks_delete_obj(c->ks, c->t, o, ks_qget(c->q, "propagationPolicy"));
    }
    _cleanup_free_ char *gv = ks_type_gv(c->t);
    _cleanup_free_ char *lk = xasprintf("%sList", c->t->kind);
    ks_json_response(
        c->resp, 200,
        json_pack("{s:s,s:s,s:{},s:o}", "kind", lk, "apiVersion", gv, "metadata", "items", items));
}

/* ---- subresources ------------------------------------------------------------------------- */

static void h_scale(struct ks_call *c)
{
    const char *m = c->method;
    set_verb(c->resp, streq(m, "GET") ? "get" : streq(m, "PUT") ? "update" : "patch", c->t, c->sub);
    if (!c->cur) {
        respond_not_found(c->resp, c->t, c->name);
        return;
    }
    json_t *sc = ks_obj_scale_of(c->t, c->cur);
    if (streq(m, "GET")) {
        ks_json_response(c->resp, 200, sc);
        return;
    }
    _cleanup_json_ json_t *own_sc = sc;
    json_t *want = NULL;
    if (streq(m, "PUT")) {
        want = body_of(c, c->req, true);
    } else if (streq(m, "PATCH")) {
        const char *ct = c->req->content_type ? c->req->content_type : "";
        struct ksim_request jreq = *c->req;
        jreq.content_type = "application/json";
        if (!str_has_prefix(ct, "application/merge-patch+json") &&
            !str_has_prefix(ct, "application/strategic-merge-patch+json") &&
            !str_has_prefix(ct, "application/json-patch+json")) {
            respond_error(c->resp, 415, "UnsupportedMediaType",
                          "the body of the request was in an unknown format - accepted media "
                          "types include: application/json-patch+json, "
                          "application/merge-patch+json, application/strategic-merge-patch+json");
            return;
        }
        _cleanup_json_ json_t *p = body_of(c, &jreq, false);
        if (!p)
            return;
        struct err e = {0};
        if (str_has_prefix(ct, "application/json-patch+json")) {
            if (ksim_json_patch(sc, p, &want, &e) < 0) {
                respond_error(c->resp, 422, "Invalid", err_msg(&e));
                return;
            }
        } else if (json_is_object(p)) {
            want = kobj_merge_patch(sc, p);
        } else {
            respond_error(c->resp, 400, "BadRequest",
                          "json: cannot unmarshal into Go value of type autoscaling.Scale");
            return;
        }
    } else {
        respond_not_allowed(c->resp);
        return;
    }
    if (!want)
        return;
    _cleanup_json_ json_t *own_want = want;
    _cleanup_status_ struct ks_status st = {0};
    json_t *res = NULL;
    int r = ks_obj_scale_set(c->ks, c->t, c->cur, want, ks_dry_run(c->q), &res, &st);
    ks_respond(c->resp, r, res, &st);
}

static bool core_pods(struct ks_type *t)
{
    return !t->crd && !t->group[0] && streq(t->plural, "pods");
}

static void h_not_allowed(struct ks_call *c)
{
    respond_not_allowed(c->resp);
}

static void h_binding(struct ks_call *c)
{
    if (!core_pods(c->t)) {
        h_not_allowed(c);
        return;
    }
    _cleanup_json_ json_t *b = body_of(c, c->req, true);
    if (!b)
        return;
    if (!c->cur) {
        respond_not_found(c->resp, c->t, c->name);
        return;
    }
    _cleanup_status_ struct ks_status st = {0};
    ks_obj_bind(c->ks, c->t, c->cur, kobj_path_str(b, "target.name"), &st);
    ks_render_status(c->resp, &st);
}

static void h_evict(struct ks_call *c)
{
    if (!core_pods(c->t)) {
        h_not_allowed(c);
        return;
    }
    _cleanup_json_ json_t *ev = body_of(c, c->req, true);
    if (!ev)
        return;
    const char *evn = kobj_name(ev);
    if (evn && !streq(evn, c->name)) {
        respond_error(c->resp, 400, "BadRequest",
                      "name in URL does not match name in Eviction object");
        return;
    }
    if (!c->cur) {
        respond_not_found(c->resp, c->t, c->name);
        return;
    }
    _cleanup_status_ struct ks_status st = {0};
    ks_obj_evict(c->ks, c->cur, &st);
    ks_render_status(c->resp, &st);
}

static void h_log(struct ks_call *c)
{
    if (!c->cur) {
        respond_not_found(c->resp, c->t, c->name);
        return;
    }
    ks_pod_log(c->ks, c->cur, c->name, c->q, c->resp);
}

/* ---- dispatch ----------------------------------------------------------------------------- */

#define ANY_SUB "*"

/* First match wins. */
static const struct ks_rule {
    const char *method; /* NULL: any */
    int named;          /* 1: an object, 0: the collection, -1: either */
    const char *sub;    /* NULL: none, ANY_SUB: any or none, else that one */
    bool not_watch;     /* only without watch */
    const char *verb;   /* metrics verb; NULL: the handler sets it */
    bool verb_sub;      /* the metrics resource names the subresource */
    void (*fn)(struct ks_call *c);
} rules[] = {
    {NULL, 1, "scale", false, NULL, true, h_scale},
    {"GET", 1, "log", false, "get", true, h_log},
    {NULL, 1, "log", false, "unknown", true, h_not_allowed},
    {"GET", 1, ANY_SUB, true, "get", true, h_get},
    {"GET", -1, ANY_SUB, false, NULL, false, h_list_or_watch},
    {"POST", 1, "binding", false, "create", true, h_binding},
    {"POST", 1, "eviction", false, "create", true, h_evict},
    {"POST", 1, ANY_SUB, false, "create", true, h_not_allowed},
    {"POST", 0, NULL, false, "create", false, h_create},
    {"DELETE", 0, NULL, false, "deletecollection", false, h_delete_collection},
    {"PUT", 0, NULL, false, "update", false, h_not_allowed},
    {"PATCH", 0, NULL, false, "patch", false, h_not_allowed},
    {NULL, 0, NULL, false, "unknown", false, h_not_allowed},
    {"PUT", 1, ANY_SUB, false, "update", true, h_update},
    {"PATCH", 1, ANY_SUB, false, "patch", true, h_patch},
    {"DELETE", 1, ANY_SUB, false, "delete", true, h_delete},
};

static bool rule_matches(const struct ks_rule *r, const struct ks_call *c)
{
    if (r->method && !streq(r->method, c->method))
        return false;
    if (r->named >= 0 && r->named != (c->name != NULL))
        return false;
    if (r->not_watch && c->watch)
        return false;
    if (!r->sub)
        return c->sub == NULL;
    return streq(r->sub, ANY_SUB) || streq_ptr(r->sub, c->sub);
}

/* The subresource is one the type serves. */
static bool sub_served(struct ks_type *t, const char *sub)
{
    if (streq(sub, "status"))
        return t->has_status;
    size_t sl = strlen(sub);
    for (const char *s = t->extra_sub; *s;) {
        const char *comma = strchr(s, ',');
        size_t l = comma ? (size_t)(comma - s) : strlen(s);
        if (l == sl && !strncmp(s, sub, l))
            return true;
        s += l + (comma ? 1 : 0);
    }
    return false;
}

static void handle_locked(struct ksim *ks, const struct ksim_request *req,
                          struct ksim_response *resp)
{
    _cleanup_(ks_ident_clear) struct ks_ident who;
    if (!ks_auth_gate(ks, req, &who, resp))
        return;
    if (ks_discovery(ks, req, resp) || ks_openapi(ks, req, resp))
        return;
    strlcpy_s(resp->verb, "unknown", sizeof(resp->verb));
    _cleanup_(ks_route_free) struct ks_route rt;
    if (ks_route_parse(req->path, req->query, &rt) < 0) {
        respond_not_found_resource(resp);
        return;
    }
    struct ks_type *t = ks_type_find(ks, rt.group, rt.version, rt.resource);
    if (!t || (rt.ns && !t->namespaced) || (rt.sub && !sub_served(t, rt.sub)) ||
        (t->namespaced && rt.name && !rt.ns)) {
        respond_not_found_resource(resp);
        return;
    }
    if (ks_auth_serves(t, rt.sub)) {
        ks_auth_handle(ks, &who, req, t, rt.ns, rt.name, rt.sub, resp);
        return;
    }
    if (!ks_auth_admit(ks, &who, req, t, rt.ns, rt.sub, resp))
        return;
    struct ks_call c = {.ks = ks,
                        .req = req,
                        .resp = resp,
                        .t = t,
                        .q = rt.query,
                        .method = req->method ? req->method : "",
                        .ns = rt.ns,
                        .name = rt.name,
                        .sub = rt.sub,
                        .watch = rt.watch,
                        .cur = rt.name ? ks_get(t, rt.ns ? rt.ns : "", rt.name) : NULL};
    for (size_t i = 0; i < ARRAY_SIZE(rules); i++) {
        if (!rule_matches(&rules[i], &c))
            continue;
        if (rules[i].verb)
            set_verb(resp, rules[i].verb, t, rules[i].verb_sub ? c.sub : NULL);
        rules[i].fn(&c);
        return;
    }
    respond_not_allowed(resp);
}

void ksim_handle(struct ksim *ks, const struct ksim_request *req, struct ksim_response *resp)
{
    memset(resp, 0, sizeof(*resp));
    if (ks_health(req, resp))
        return;
    pthread_mutex_lock(&ks->lock);
    handle_locked(ks, req, resp);
    if (!resp->code)
        respond_not_found_resource(resp);
    ks_response_from_event(ks, req, resp);
    pthread_mutex_unlock(&ks->lock);
    ks_response_serialize(req, resp);
}

void ksim_response_free(struct ksim_response *resp)
{
    if (!resp)
        return;
    free(resp->body);
    resp->body = NULL;
    json_decref(resp->warnings);
    resp->warnings = NULL;
    json_decref(resp->json);
    resp->json = NULL;
    ksim_proxy_free(resp->proxy);
    resp->proxy = NULL;
}
