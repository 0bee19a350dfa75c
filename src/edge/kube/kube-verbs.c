/* SPDX-License-Identifier: Apache-2.0 */
/* The verbs: get, list, create, update, patch, delete, eviction, events, watch. */
#include <limits.h>
#include <string.h>

#include "kube-internal.h"

#define PATH_MAX_LEN 8192

static void what_of(char *buf, size_t n, const char *verb, const struct kube_resource *r,
                    const char *ns, const char *name)
{
    if (r->namespaced && ns && ns[0])
        snprintf(buf, n, "%s %s %s/%s", verb, r->plural, ns, name ? name : "");
    else
        snprintf(buf, n, "%s %s %s", verb, r->plural, name ? name : "");
    size_t l = strlen(buf);
    while (l > 0 && (buf[l - 1] == ' ' || buf[l - 1] == '/'))
        buf[--l] = '\0';
}

static int check_name(const char *verb, const struct kube_resource *r, const char *name,
                      struct err *e)
{
    if (!name || !name[0])
        return err_set(e, -EINVAL, "%s %s: a name is required", verb, r->plural);
    if (strlen(name) > 253 || strchr(name, '/') || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0)
        return err_set(e, -EINVAL, "%s %s \"%.64s\": not a valid object name", verb, r->plural,
                       name);
    return 0;
}

static int check_ns(const char *verb, const struct kube_resource *r, const char *ns, bool required,
                    struct err *e)
{
    if (r->namespaced && required && (!ns || !ns[0]))
        return err_set(e, -EINVAL, "%s %s: a namespace is required", verb, r->plural);
    if (ns && (strlen(ns) > 63 || strchr(ns, '/')))
        return err_set(e, -EINVAL, "%s %s: \"%.64s\" is not a valid namespace", verb, r->plural,
                       ns);
    return 0;
}

int kube_get(struct kube_client *c, const struct kube_resource *r, const char *ns, const char *name,
             json_t **ret, struct err *e)
{
    int rc;
    if ((rc = check_name("get", r, name, e)) < 0 || (rc = check_ns("get", r, ns, true, e)) < 0)
        return rc;
    _cleanup_sbuf_ struct sbuf p;
    sbuf_init(&p, PATH_MAX_LEN);
    if (kube_build_path(&p, r, ns, name, NULL) < 0)
        return err_set(e, -ENAMETOOLONG, "get %s: path too long", r->plural);
    char what[320];
    what_of(what, sizeof(what), "get", r, ns, name);
    struct kube_req rq = {.method = "GET", .path = p.data, .what = what};
    return kube_do_json(c, &rq, ret, e);
}

/* The path and the what of one page's GET. */
static int list_page_request(const struct kube_resource *r, const char *ns,
                             const struct kube_list_opts *o, const char *continue_token,
                             struct sbuf *p, char *what, size_t what_n, struct err *e)
{
    int rc;
    if ((rc = check_ns("list", r, ns, false, e)) < 0 ||
        (rc = kube_selector_check("labelSelector", o->label_selector, e)) < 0 ||
        (rc = kube_selector_check("fieldSelector", o->field_selector, e)) < 0)
        return rc;
    char lim[24];
    snprintf(lim, sizeof(lim), "%u", o->limit ? o->limit : 500);
    if (kube_build_path(p, r, ns, NULL, NULL) < 0 ||
        kube_query_add(p, "labelSelector", o->label_selector) < 0 ||
        kube_query_add(p, "fieldSelector", o->field_selector) < 0 ||
        kube_query_add(p, "limit", lim) < 0 || kube_query_add(p, "continue", continue_token) < 0 ||
        (!continue_token && kube_query_add(p, "resourceVersion", o->resource_version) < 0))
        return err_set(e, -ENAMETOOLONG, "list %s: URL too long", r->plural);
    what_of(what, what_n, "list", r, ns, NULL);
    return 0;
}

int kube_list_page_held(struct kube_client *c, const struct kube_resource *r, const char *ns,
                        const struct kube_list_opts *o, const char *continue_token, json_t **ret,
                        size_t *ret_held, struct err *e)
{
    struct kube_list_opts def = {0};
    if (!o)
        o = &def;
    int rc;
    _cleanup_sbuf_ struct sbuf p;
    sbuf_init(&p, PATH_MAX_LEN * 2);
    char what[320];
    if ((rc = list_page_request(r, ns, o, continue_token, &p, what, sizeof(what), e)) < 0)
        return rc;
    struct kube_req rq = {.method = "GET", .path = p.data, .what = what};
    json_t *page = NULL;
    size_t held = 0;
    if ((rc = kube_do_json_held(c, &rq, &page, &held, e)) < 0)
        return rc;
    if (!json_is_array(json_object_get(page, "items"))) {
        json_decref(page);
        kube_client_release(c, held);
        return err_set(e, -EBADMSG, "%s: the answer has no \"items\" list", what);
    }
    *ret = page;
    *ret_held = held;
    return 0;
}

struct page_each {
    struct kube_client *c;
    const char *what;
    const struct kube_prefilter *pf;
    kube_item_fn fn;
    void *userdata;
};

/* One item's bytes: passed over, or priced, decoded within the in-flight budget, handed over,
 * freed. */
static int page_item(const char *text, size_t n, void *ud, struct err *e)
{
    struct page_each *pe = ud;
    if (kube_prefilter_pass(pe->pf, text, n, false))
        return 0;
    size_t cost = kube_json_cost(text, n);
    struct kube_budget *mem = kube_client_in_flight(pe->c);
    if (kube_budget_take(mem, cost) < 0)
        return kube_in_flight_err(e, pe->what, mem, cost);
    json_t *it = NULL;
    const char *const *drop = kube_client_drop_fields(pe->c);
    _cleanup_free_ char *skim = drop ? xmalloc(n ? n : 1) : NULL;
    size_t m = skim ? kube_json_drop(text, n, drop, NULL, skim) : SIZE_MAX;
    int r = m != SIZE_MAX ? kube_json_parse(skim, m, SIZE_MAX, pe->what, &it, e)
                          : kube_json_parse(text, n, SIZE_MAX, pe->what, &it, e);
    if (r == 0) {
        r = pe->fn(it, pe->userdata, e);
        json_decref(it);
    }
    kube_budget_put(mem, cost);
    return r;
}

int kube_list_page_each(struct kube_client *c, const struct kube_resource *r, const char *ns,
                        const struct kube_list_opts *o, const char *continue_token,
                        const struct kube_prefilter *pf, kube_item_fn fn, void *userdata,
                        json_t **ret_page, struct err *e)
{
    struct kube_list_opts def = {0};
    if (!o)
        o = &def;
    int rc;
    _cleanup_sbuf_ struct sbuf p;
    sbuf_init(&p, PATH_MAX_LEN * 2);
    char what[320];
    if ((rc = list_page_request(r, ns, o, continue_token, &p, what, sizeof(what), e)) < 0)
        return rc;
    /* the body stays in the in-flight budget from its first byte read to its free: priced
     * outside it, 64 MiB pages read by a dozen informers at once had held ~1 GiB */
    struct kube_req rq = {.method = "GET", .path = p.data, .what = what, .hold_body = true};
    struct kube_resp resp = {0};
    if ((rc = kube_do(c, &rq, &resp, e)) < 0)
        return rc;
    _cleanup_free_ char *body = steal_ptr(&resp.body);
    if (resp.code < 200 || resp.code >= 300) {
        rc = kube_status_err(resp.code, body, resp.len, what, e);
        free(steal_ptr(&body));
        kube_client_release(c, resp.held);
        return rc;
    }
    /* the whole page is priced as if decoded, so a page over the limit is refused before any
     * of it is applied, as a decoded answer is; the body is held while its items are */
    size_t cost = kube_json_cost(body, resp.len);
    if (cost > kube_client_max_decoded(c)) {
        rc = kube_decoded_err(e, what, "the response", cost, kube_client_max_decoded(c),
                              "kube_options.max_decoded");
        free(steal_ptr(&body));
        kube_client_release(c, resp.held);
        return rc;
    }
    struct page_each pe = {c, what, pf, fn, userdata};
    rc = kube_list_body_each(body, resp.len, kube_client_max_decoded(c), what, page_item, &pe,
                             ret_page, e);
    free(steal_ptr(&body));
    kube_client_release(c, resp.held);
    return rc;
}

int kube_list_page(struct kube_client *c, const struct kube_resource *r, const char *ns,
                   const struct kube_list_opts *o, const char *continue_token, json_t **ret,
                   struct err *e)
{
    size_t held = 0;
    int rc = kube_list_page_held(c, r, ns, o, continue_token, ret, &held, e);
    kube_client_release(c, held); /* the caller's now */
    return rc;
}

static size_t add_sat(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/* A continue token the server forgot (410 Gone) restarts a list this many times at most. */
#define LIST_RESTARTS_MAX 3

int kube_list(struct kube_client *c, const struct kube_resource *r, const char *ns,
              const struct kube_list_opts *o, json_t **ret, struct err *e)
{
    struct kube_list_budget own = {.limit = kube_client_max_decoded(c)};
    struct kube_list_budget *budget = o && o->budget ? o->budget : &own;
    const char *knob = o && o->budget ? "the caller's list budget" : "kube_options.max_decoded";
    const size_t start = budget->used;
    _cleanup_json_ json_t *all = NULL;
    _cleanup_free_ char *cont = NULL;
    /* list items lack kind and apiVersion on the wire; callers expect whole objects */
    _cleanup_free_ char *av =
        r->group && r->group[0] ? xasprintf("%s/%s", r->group, r->version) : xstrdup(r->version);
    size_t type_cost;
    {
        _cleanup_json_ json_t *t = json_pack("{s:s,s:s}", "kind", r->kind, "apiVersion", av);
        type_cost = kube_json_value_cost(t); /* (a little more: an empty object's own price) */
    }
    unsigned restarts = 0, pages = 0;
    for (;; pages++) {
        if (pages > 100000)
            return err_set(e, -ELOOP, "list %s: more than 100000 pages", r->plural);
        _cleanup_json_ json_t *page = NULL;
        size_t held = 0;
        int rc = kube_list_page_held(c, r, ns, o, cont, &page, &held, e);
        if (rc == KUBE_EGONE && cont && restarts < LIST_RESTARTS_MAX) {
            /* client-go's pager falls back to one list without pages here; this one starts
             * over with pages, so that no answer is larger than a page */
            restarts++;
            log_info("kube", "continue token expired, listing again", "resource=%s restart=%u",
                     r->plural, restarts);
            json_decref(steal_ptr(&all));
            free(steal_ptr(&cont));
            budget->used = start;
            pages = UINT_MAX; /* 0 again at the next turn */
            continue;
        }
        if (rc < 0) {
            budget->used = start;
            if (rc == KUBE_EGONE && cont)
                return err_prefix(e, "list %s: the continue token expired %u times", r->plural,
                                  restarts + 1);
            return rc;
        }
        json_t *meta = json_object_get(page, "metadata");
        if (!all) {
            all = json_object();
            _cleanup_free_ char *kind = xasprintf("%sList", r->kind);
            json_object_set_new(all, "kind", json_string(kind));
            json_object_set(all, "apiVersion", json_object_get(page, "apiVersion"));
            json_t *m = json_object();
            json_object_set(m, "resourceVersion", json_object_get(meta, "resourceVersion"));
            json_object_set_new(all, "metadata", m);
            json_object_set_new(all, "items", json_array());
        }
        json_t *items = json_object_get(all, "items");
        json_t *page_items = json_object_get(page, "items");
        /* What the page's items will cost in the list: the page's price (at least what they
         * hold: the envelope and the parser's scratch are counted too, and no walk over them
         * is needed), a slot each in the list (the table at most doubles), and the kind and
         * apiVersion given to those without. */
        size_t n = json_array_size(page_items), typed = 0, i;
        json_t *it;
        json_array_foreach (page_items, i, it) {
            if (json_is_object(it) && !json_object_get(it, "kind"))
                typed++;
        }
        size_t cost = add_sat(held, n * 16 + typed * type_cost);
        if (cost > budget->limit || budget->used > budget->limit - cost) {
            char so_far[32], lim[32];
            kube_mib(so_far, sizeof(so_far), add_sat(budget->used, cost));
            kube_mib(lim, sizeof(lim), budget->limit);
            budget->used = start;
            kube_client_release(c, held);
            return err_set(e, -EFBIG,
                           "list %s: %s take more than %s decoded after %u page%s, over the %s "
                           "limit (%s)",
                           r->plural, start ? "the lists together" : "the items", so_far, pages + 1,
                           pages ? "s" : "", lim, knob);
        }
        budget->used += cost;
        json_array_foreach (page_items, i, it) {
            if (json_is_object(it) && !json_object_get(it, "kind")) {
                json_object_set_new(it, "kind", json_string(r->kind));
                json_object_set_new(it, "apiVersion", json_string(av));
            }
            json_array_append(items, it);
        }
        const char *next = json_string_value(json_object_get(meta, "continue"));
        free(cont);
        cont = next && next[0] ? xstrdup(next) : NULL;
        json_decref(steal_ptr(&page));
        kube_client_release(c, held); /* the page's items are the list's now */
        if (!cont)
            break;
    }
    *ret = steal_ptr(&all);
    return 0;
}

static int write_obj(struct kube_client *c, const char *method, const char *verb,
                     const struct kube_resource *r, const char *ns, json_t *obj, bool status,
                     json_t **ret, struct err *e)
{
    if (!json_is_object(obj))
        return err_set(e, -EINVAL, "%s %s: the body is not an object", verb, r->plural);
    const char *name = kobj_name(obj);
    bool post = strcmp(method, "POST") == 0;
    int rc;
    if (!post && (rc = check_name(verb, r, name, e)) < 0)
        return rc;
    if (!ns || !ns[0])
        ns = kobj_namespace(obj);
    if (r->namespaced && (!ns || !ns[0]))
        ns = kube_client_namespace(c);
    if ((rc = check_ns(verb, r, ns, true, e)) < 0)
        return rc;
    _cleanup_sbuf_ struct sbuf p;
    sbuf_init(&p, PATH_MAX_LEN);
    if (kube_build_path(&p, r, ns, post ? NULL : name, status ? "status" : NULL) < 0)
        return err_set(e, -ENAMETOOLONG, "%s %s: path too long", verb, r->plural);
    _cleanup_free_ char *body = json_dumps(obj, JSON_COMPACT);
    if (!body)
        return err_set(e, -EINVAL, "%s %s: the body cannot be serialized", verb, r->plural);
    char what[320];
    what_of(what, sizeof(what), verb, r, ns, name ? name : "");
    struct kube_req rq = {.method = method,
                          .path = p.data,
                          .body = body,
                          .body_len = strlen(body),
                          .content_type = "application/json",
                          .unsafe = post,
                          .what = what};
    return kube_do_json(c, &rq, ret, e);
}

int kube_create(struct kube_client *c, const struct kube_resource *r, const char *ns, json_t *obj,
                json_t **ret, struct err *e)
{
    return write_obj(c, "POST", "create", r, ns, obj, false, ret, e);
}

int kube_create_sub(struct kube_client *c, const struct kube_resource *r, const char *ns,
                    const char *name, const char *sub, json_t *obj, json_t **ret, struct err *e)
{
    int rc;
    if ((rc = check_name("create", r, name, e)) < 0 ||
        (rc = check_ns("create", r, ns, true, e)) < 0)
        return rc;
    if (!sub || !sub[0] || strchr(sub, '/') || !json_is_object(obj))
        return err_set(e, -EINVAL, "create %s/%s: bad subresource or body", r->plural,
                       sub ? sub : "");
    _cleanup_sbuf_ struct sbuf p;
    sbuf_init(&p, PATH_MAX_LEN);
    if (kube_build_path(&p, r, ns, name, sub) < 0)
        return err_set(e, -ENAMETOOLONG, "create %s/%s: path too long", r->plural, sub);
    _cleanup_free_ char *body = json_dumps(obj, JSON_COMPACT);
    if (!body)
        return err_set(e, -EINVAL, "create %s/%s: the body cannot be serialized", r->plural, sub);
    char what[320], verb[64];
    snprintf(verb, sizeof(verb), "create %s of", sub);
    what_of(what, sizeof(what), verb, r, ns, name);
    struct kube_req rq = {.method = "POST",
                          .path = p.data,
                          .body = body,
                          .body_len = strlen(body),
                          .content_type = "application/json",
                          .unsafe = true,
                          .what = what};
    return kube_do_json(c, &rq, ret, e);
}

int kube_update(struct kube_client *c, const struct kube_resource *r, const char *ns, json_t *obj,
                json_t **ret, struct err *e)
{
    return write_obj(c, "PUT", "update", r, ns, obj, false, ret, e);
}

int kube_update_status(struct kube_client *c, const struct kube_resource *r, const char *ns,
                       json_t *obj, json_t **ret, struct err *e)
{
    return write_obj(c, "PUT", "update status of", r, ns, obj, true, ret, e);
}

int kube_update_retry(struct kube_client *c, const struct kube_resource *r, const char *ns,
                      const char *name, bool status, kube_mutate_fn mutate, void *userdata,
                      json_t **ret, struct err *e)
{
    for (int attempt = 0;; attempt++) {
        _cleanup_json_ json_t *obj = NULL;
        int rc = kube_get(c, r, ns, name, &obj, e);
        if (rc < 0)
            return rc;
        rc = mutate(obj, userdata, e);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            if (ret)
                *ret = steal_ptr(&obj);
            return 0;
        }
        json_t *out = NULL;
        rc = status ? kube_update_status(c, r, ns, obj, ret ? &out : NULL, e)
                    : kube_update(c, r, ns, obj, ret ? &out : NULL, e);
        if (rc == 0) {
            if (ret)
                *ret = out;
            return 0;
        }
        if (rc != KUBE_ECONFLICT)
            return rc;
        if (attempt >= 9)
            return err_prefix(e, "still conflicting after %d attempts", attempt + 1);
        log_debug("kube", "update conflict, re-reading", "resource=%s name=%s attempt=%d",
                  r->plural, name, attempt + 1);
    }
}

int kube_patch(struct kube_client *c, const struct kube_resource *r, const char *ns,
               const char *name, const struct kube_patch_opts *o, json_t *patch, json_t **ret,
               struct err *e)
{
    struct kube_patch_opts def = {0};
    if (!o)
        o = &def;
    int rc;
    if ((rc = check_name("patch", r, name, e)) < 0 || (rc = check_ns("patch", r, ns, true, e)) < 0)
        return rc;
    static const char *const ctypes[] = {
        "application/merge-patch+json", "application/strategic-merge-patch+json",
        "application/json-patch+json", "application/apply-patch+yaml"};
    if ((unsigned)o->type >= ARRAY_SIZE(ctypes))
        return err_set(e, -EINVAL, "patch %s: unknown patch type %d", r->plural, (int)o->type);
    if (o->type == KUBE_PATCH_JSON ? !json_is_array(patch) : !json_is_object(patch))
        return err_set(e, -EINVAL, "patch %s/%s: a %s patch must be a JSON %s", r->plural, name,
                       o->type == KUBE_PATCH_JSON ? "JSON" : "merge/apply",
                       o->type == KUBE_PATCH_JSON ? "array" : "object");
    _cleanup_sbuf_ struct sbuf p;
    sbuf_init(&p, PATH_MAX_LEN);
    if (kube_build_path(&p, r, ns, name, o->status ? "status" : NULL) < 0)
        return err_set(e, -ENAMETOOLONG, "patch %s: path too long", r->plural);
    int q = 0;
    if (o->type == KUBE_PATCH_APPLY) {
        q = kube_query_add(&p, "fieldManager", o->field_manager ? o->field_manager : "gpuop");
        if (q >= 0 && o->force)
            q = kube_query_add(&p, "force", "true");
    } else if (o->field_manager) {
        q = kube_query_add(&p, "fieldManager", o->field_manager);
    }
    if (q < 0)
        return err_set(e, -ENAMETOOLONG, "patch %s: path too long", r->plural);
    _cleanup_free_ char *body = json_dumps(patch, JSON_COMPACT);
    if (!body)
        return err_set(e, -EINVAL, "patch %s: the patch cannot be serialized", r->plural);
    char what[320];
    what_of(what, sizeof(what), "patch", r, ns, name);
    struct kube_req rq = {.method = "PATCH",
                          .path = p.data,
                          .body = body,
                          .body_len = strlen(body),
                          .content_type = ctypes[o->type],
                          .what = what};
    return kube_do_json(c, &rq, ret, e);
}

static json_t *delete_options(const struct kube_delete_opts *o, const char *kind,
                              const char *api_version)
{
    json_t *d = json_pack("{s:s,s:s}", "kind", kind, "apiVersion", api_version);
    if (!o)
        return d;
    static const char *const prop[] = {NULL, "Background", "Foreground", "Orphan"};
    if ((unsigned)o->propagation < ARRAY_SIZE(prop) && prop[o->propagation])
        json_object_set_new(d, "propagationPolicy", json_string(prop[o->propagation]));
    if (o->precondition_uid || o->precondition_resource_version) {
        json_t *pre = json_object();
        if (o->precondition_uid)
            json_object_set_new(pre, "uid", json_string(o->precondition_uid));
        if (o->precondition_resource_version)
            json_object_set_new(pre, "resourceVersion",
                                json_string(o->precondition_resource_version));
        json_object_set_new(d, "preconditions", pre);
    }
    if (o->has_grace)
        json_object_set_new(d, "gracePeriodSeconds", json_integer(o->grace_period_seconds));
    return d;
}

int kube_delete(struct kube_client *c, const struct kube_resource *r, const char *ns,
                const char *name, const struct kube_delete_opts *o, struct err *e)
{
    int rc;
    if ((rc = check_name("delete", r, name, e)) < 0 ||
        (rc = check_ns("delete", r, ns, true, e)) < 0)
        return rc;
    _cleanup_sbuf_ struct sbuf p;
    sbuf_init(&p, PATH_MAX_LEN);
    if (kube_build_path(&p, r, ns, name, NULL) < 0)
        return err_set(e, -ENAMETOOLONG, "delete %s: path too long", r->plural);
    _cleanup_json_ json_t *opts = delete_options(o, "DeleteOptions", "v1");
    _cleanup_free_ char *body = json_dumps(opts, JSON_COMPACT);
    char what[320];
    what_of(what, sizeof(what), "delete", r, ns, name);
    struct kube_req rq = {.method = "DELETE",
                          .path = p.data,
                          .body = body,
                          .body_len = strlen(body),
                          .content_type = "application/json",
                          .what = what};
    return kube_do_json(c, &rq, NULL, e);
}

int kube_evict(struct kube_client *c, const char *ns, const char *pod,
               const struct kube_delete_opts *o, struct err *e)
{
    int rc;
    if ((rc = check_name("evict", &KUBE_PODS, pod, e)) < 0 ||
        (rc = check_ns("evict", &KUBE_PODS, ns, true, e)) < 0)
        return rc;
    _cleanup_sbuf_ struct sbuf p;
    sbuf_init(&p, PATH_MAX_LEN);
    if (kube_build_path(&p, &KUBE_PODS, ns, pod, "eviction") < 0)
        return err_set(e, -ENAMETOOLONG, "evict: path too long");
    _cleanup_json_ json_t *ev =
        json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "policy/v1", "kind", "Eviction",
                  "metadata", "name", pod, "namespace", ns);
    if (o)
        json_object_set_new(ev, "deleteOptions", delete_options(o, "DeleteOptions", "v1"));
    _cleanup_free_ char *body = json_dumps(ev, JSON_COMPACT);
    char what[320];
    snprintf(what, sizeof(what), "evict pod %s/%s", ns, pod);
    /* An eviction is a create that is refused or done as a whole: retried on connection
     * failures only when it surely was not sent; a 429 is the disruption budget speaking. */
    struct kube_req rq = {.method = "POST",
                          .path = p.data,
                          .body = body,
                          .body_len = strlen(body),
                          .content_type = "application/json",
                          .unsafe = true,
                          .no_retry_429 = true,
                          .what = what};
    rc = kube_do_json(c, &rq, NULL, e);
    if (rc == KUBE_EBLOCKED)
        err_prefix(e, "%s: blocked by a PodDisruptionBudget", what);
    return rc;
}

int kube_pod_log(struct kube_client *c, const char *ns, const char *pod, const char *container,
                 size_t limit, char **ret, size_t *ret_len, struct err *e)
{
    struct kube_log_opts o = {.container = container, .limit_bytes = limit};
    return kube_pod_log_opts(c, ns, pod, &o, ret, ret_len, e);
}

int kube_pod_log_opts(struct kube_client *c, const char *ns, const char *pod,
                      const struct kube_log_opts *o, char **ret, size_t *ret_len, struct err *e)
{
    int rc;
    if ((rc = check_name("log", &KUBE_PODS, pod, e)) < 0 ||
        (rc = check_ns("log", &KUBE_PODS, ns, true, e)) < 0)
        return rc;
    _cleanup_sbuf_ struct sbuf p;
    sbuf_init(&p, PATH_MAX_LEN);
    if (kube_build_path(&p, &KUBE_PODS, ns, pod, "log") < 0 ||
        (o->container && kube_query_add(&p, "container", o->container) < 0) ||
        (o->previous && kube_query_add(&p, "previous", "true") < 0))
        return err_set(e, -ENAMETOOLONG, "log: path too long");
    const struct {
        const char *name;
        uint64_t v;
    } nums[] = {{"tailLines", o->tail_lines},
                {"sinceSeconds", o->since_seconds},
                {"limitBytes", o->limit_bytes}};
    for (size_t i = 0; i < ARRAY_SIZE(nums); i++) {
        if (!nums[i].v)
            continue;
        char nb[32];
        snprintf(nb, sizeof(nb), "%llu", (unsigned long long)nums[i].v);
        if (kube_query_add(&p, nums[i].name, nb) < 0)
            return err_set(e, -ENAMETOOLONG, "log: path too long");
    }
    char what[320];
    snprintf(what, sizeof(what), "log of pod %s/%s", ns, pod);
    struct kube_req rq = {.method = "GET", .path = p.data, .what = what};
    struct kube_resp resp = {0};
    if ((rc = kube_do(c, &rq, &resp, e)) < 0)
        return rc;
    if (resp.code < 200 || resp.code >= 300) {
        rc = kube_status_err(resp.code, resp.body, resp.len, what, e);
        free(resp.body);
        return rc;
    }
    *ret = resp.body ? resp.body : xstrdup("");
    if (ret_len)
        *ret_len = resp.body ? resp.len : 0;
    return 0;
}

int kube_event_create(struct kube_client *c, const struct kube_event *ev, struct err *e)
{
    if (!ev || !json_is_object(ev->involved) || !ev->reason || !ev->message)
        return err_set(e, -EINVAL,
                       "create event: involved object, reason and message are "
                       "required");
    json_t *meta = json_object_get(ev->involved, "metadata");
    const char *iname = json_string_value(json_object_get(meta, "name"));
    const char *ins = json_string_value(json_object_get(meta, "namespace"));
    if (!iname)
        return err_set(e, -EINVAL, "create event: the involved object has no metadata.name");
    const char *ns = ev->ns ? ev->ns : (ins && ins[0] ? ins : "default");
    char now[48];
    time_rfc3339_us(now_ms_real() * 1000, now, sizeof(now));
    now[19] = 'Z'; /* Time, not MicroTime: seconds only */
    now[20] = '\0';
    json_t *inv = json_object();
    static const char *const copy[] = {"kind", "apiVersion"};
    for (size_t i = 0; i < ARRAY_SIZE(copy); i++) {
        json_t *v = json_object_get(ev->involved, copy[i]);
        if (json_is_string(v))
            json_object_set(inv, copy[i], v);
    }
    json_object_set_new(inv, "name", json_string(iname));
    if (ins)
        json_object_set_new(inv, "namespace", json_string(ins));
    static const char *const mcopy[] = {"uid", "resourceVersion"};
    for (size_t i = 0; i < ARRAY_SIZE(mcopy); i++) {
        json_t *v = json_object_get(meta, mcopy[i]);
        if (json_is_string(v))
            json_object_set(inv, mcopy[i], v);
    }
    char name[300];
    snprintf(name, sizeof(name), "%.200s.%016llx", iname,
             (unsigned long long)(now_us_mono() ^ kube_random()));
    _cleanup_json_ json_t *obj = json_pack(
        "{s:s,s:s,s:{s:s,s:s},s:o,s:s,s:s,s:s,s:i,s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind",
        "Event", "metadata", "name", name, "namespace", ns, "involvedObject", inv, "reason",
        ev->reason, "message", ev->message, "type", ev->type ? ev->type : "Normal", "count",
        ev->count > 0 ? ev->count : 1, "firstTimestamp", now, "lastTimestamp", now, "source",
        "component", ev->component ? ev->component : "gpuop");
    if (!obj)
        return err_set(e, -EINVAL, "create event: reason or message is not valid UTF-8");
    if (ev->host)
        json_object_set_new(json_object_get(obj, "source"), "host", json_string(ev->host));
    return kube_create(c, &KUBE_EVENTS, ns, obj, NULL, e);
}

/* ---- watch -------------------------------------------------------------------------------- */

struct watch_ctx {
    kube_watch_fn fn;
    void *userdata;
    struct err *e;
};

static int watch_cb(enum kube_watch_type t, json_t *obj, void *ud)
{
    struct watch_ctx *w = ud;
    if (t == KUBE_WATCH_ERROR) {
        json_int_t code = json_integer_value(json_object_get(obj, "code"));
        _cleanup_free_ char *body = json_dumps(obj, JSON_COMPACT);
        kube_status_err(code > 0 ? code : 500, body, body ? strlen(body) : 0, "watch", w->e);
        if (code == 410)
            w->e->code = KUBE_EGONE;
        int r = w->fn(t, obj, w->userdata);
        if (r < 0)
            return r;
        return w->e->code;
    }
    int r = w->fn(t, obj, w->userdata);
    if (r < 0)
        err_set(w->e, r, "watch stopped by its handler");
    return r;
}

int kube_watch(struct kube_client *c, const struct kube_resource *r, const char *ns,
               const struct kube_watch_opts *o, kube_watch_fn fn, void *userdata, struct err *e)
{
    return kube_watch_prefiltered(c, r, ns, o, NULL, fn, userdata, e);
}

int kube_watch_prefiltered(struct kube_client *c, const struct kube_resource *r, const char *ns,
                           const struct kube_watch_opts *o, const struct kube_prefilter *pf,
                           kube_watch_fn fn, void *userdata, struct err *e)
{
    struct kube_watch_opts def = {0};
    if (!o)
        o = &def;
    int rc;
    if ((rc = check_ns("watch", r, ns, false, e)) < 0 ||
        (rc = kube_selector_check("labelSelector", o->label_selector, e)) < 0 ||
        (rc = kube_selector_check("fieldSelector", o->field_selector, e)) < 0)
        return rc;
    unsigned tmo = o->timeout_seconds ? o->timeout_seconds : 300;
    char tbuf[24];
    snprintf(tbuf, sizeof(tbuf), "%u", tmo);
    _cleanup_sbuf_ struct sbuf p;
    sbuf_init(&p, PATH_MAX_LEN * 2);
    if (kube_build_path(&p, r, ns, NULL, NULL) < 0 || kube_query_add(&p, "watch", "true") < 0 ||
        kube_query_add(&p, "labelSelector", o->label_selector) < 0 ||
        kube_query_add(&p, "fieldSelector", o->field_selector) < 0 ||
        kube_query_add(&p, "resourceVersion", o->resource_version) < 0 ||
        (o->bookmarks && kube_query_add(&p, "allowWatchBookmarks", "true") < 0) ||
        kube_query_add(&p, "timeoutSeconds", tbuf) < 0)
        return err_set(e, -ENAMETOOLONG, "watch %s: URL too long", r->plural);
    char what[320];
    what_of(what, sizeof(what), "watch", r, ns, NULL);
    struct watch_ctx w = {fn, userdata, e};
    struct kube_watch_parser parser;
    kube_watch_parser_init(&parser, kube_client_max_watch_line(c), kube_client_max_decoded(c),
                           watch_cb, &w);
    parser.mem = kube_client_in_flight(c);
    parser.drop = kube_client_drop_fields(c);
    parser.pf = pf;
    rc = kube_do_stream(c, p.data, what, &parser, o->stop, (uint64_t)tmo * 1000 + 30000, e);
    kube_watch_parser_free(&parser);
    if (rc == KUBE_EGONE)
        e->code = KUBE_EGONE;
    return rc;
}
