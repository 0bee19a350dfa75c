/* SPDX-License-Identifier: Apache-2.0 */
/* Request handling: routing, CRUD, list, watch, patch, apply, delete and garbage collection
 * markers, with the API server's status codes, reasons and messages. */
#include <ctype.h>
#include <inttypes.h>
#include <string.h>

#include "kubesim-internal.h"

/* ---- responses ---------------------------------------------------------------------------- */

void ks_json_response(struct ksim_response *resp, int code, json_t *v)
{
    resp->code = code;
    resp->content_type = "application/json";
    free(resp->body);
    resp->body = NULL;
    resp->body_len = 0;
    /* serialized by ksim_handle after unlocking: stored objects are immutable once committed
     * and jansson's reference counts are atomic, so a big list does not stall the store */
    json_decref(resp->json);
    resp->json = v;
}

void ks_status(struct ksim_response *resp, int code, const char *reason, const char *message,
               json_t *details)
{
    json_t *st = json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:i}", "kind", "Status", "apiVersion", "v1",
                           "metadata", "status", code < 300 ? "Success" : "Failure", "message",
                           message, "reason", reason, "code", code);
    if (!reason[0])
        json_object_del(st, "reason");
    if (!message[0])
        json_object_del(st, "message");
    if (details)
        json_object_set_new(st, "details", details);
    ks_json_response(resp, code, st);
}

static json_t *details(struct ks_type *t, const char *name)
{
    json_t *d = json_object();
    if (name)
        json_object_set_new(d, "name", json_string(name));
    if (t && t->group[0])
        json_object_set_new(d, "group", json_string(t->group));
    if (t)
        json_object_set_new(d, "kind", json_string(t->plural));
    return d;
}

static void not_found(struct ksim_response *resp, struct ks_type *t, const char *name)
{
    _cleanup_free_ char *q = ks_type_qualified(t);
    _cleanup_free_ char *m = xasprintf("%s \"%s\" not found", q, name);
    ks_status(resp, 404, "NotFound", m, details(t, name));
}

static void not_found_resource(struct ksim_response *resp)
{
    ks_status(resp, 404, "NotFound", "the server could not find the requested resource",
              json_object());
}

static void bad_request(struct ksim_response *resp, const char *msg)
{
    ks_status(resp, 400, "BadRequest", msg, NULL);
}

static void conflict(struct ksim_response *resp, struct ks_type *t, const char *name)
{
    _cleanup_free_ char *q = ks_type_qualified(t);
    _cleanup_free_ char *m = xasprintf("Operation cannot be fulfilled on %s \"%s\": the object "
                                       "has been modified; please apply your changes to the "
                                       "latest version and try again",
                                       q, name);
    ks_status(resp, 409, "Conflict", m, details(t, name));
}

/* 422 from a list of causes [{field, message}] */
static void invalid(struct ksim_response *resp, struct ks_type *t, const char *name, json_t *causes)
{
    struct sbuf b;
    sbuf_init(&b, 1u << 16);
    sbuf_printf(&b, "%s \"%s\" is invalid: ", t->kind, name);
    size_t i;
    json_t *c;
    if (json_array_size(causes) > 1)
        sbuf_puts(&b, "[");
    json_array_foreach (causes, i, c) {
        sbuf_printf(&b, "%s%s: %s", i ? ", " : "", jstr(c, "field"), jstr(c, "message"));
    }
    if (json_array_size(causes) > 1)
        sbuf_puts(&b, "]");
    json_t *d = json_object();
    json_object_set_new(d, "name", json_string(name));
    if (t->group[0])
        json_object_set_new(d, "group", json_string(t->group));
    json_object_set_new(d, "kind", json_string(t->kind));
    json_object_set_new(d, "causes", causes);
    ks_status(resp, 422, "Invalid", b.data ? b.data : "", d);
    sbuf_free(&b);
}

static void add_cause(json_t *causes, const char *reason, const char *field, const char *fmt, ...)
    GPUOP_PRINTF(4, 5);
static void add_cause(json_t *causes, const char *reason, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct sbuf b;
    sbuf_init(&b, 1u << 14);
    sbuf_vprintf(&b, fmt, ap);
    va_end(ap);
    json_array_append_new(causes, json_pack("{s:s,s:s,s:s}", "reason", reason, "message",
                                            b.data ? b.data : "", "field", field));
    sbuf_free(&b);
}

/* ---- validation --------------------------------------------------------------------------- */

static bool dns_label(const char *s, size_t n)
{
    if (n == 0 || n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
            return false;
    return true;
}

static bool dns_subdomain(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    const char *p = s;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        if (!dns_label(p, l))
            return false;
        if (!dot)
            return true;
        p = dot + 1;
    }
}

static const char msg_label[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
static const char msg_subdomain[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

static void validate_name(struct ks_type *t, const char *name, json_t *causes)
{
    bool label =
        !t->crd && !t->group[0] && (streq(t->plural, "namespaces") || streq(t->plural, "services"));
    bool path_seg = !t->crd && streq(t->group, "rbac.authorization.k8s.io");
    if (path_seg) {
        if (!name[0] || streq(name, ".") || streq(name, "..") || strchr(name, '/') ||
            strchr(name, '%'))
            add_cause(causes, "FieldValueInvalid", "metadata.name",
                      "Invalid value: \"%s\": may not contain '/' or '%%'", name);
        return;
    }
    if (label ? !dns_label(name, strlen(name)) : !dns_subdomain(name))
        add_cause(causes, "FieldValueInvalid", "metadata.name", "Invalid value: \"%s\": %s", name,
                  label ? msg_label : msg_subdomain);
}

static void validate_labels(json_t *obj, json_t *causes)
{
    const char *k;
    json_t *v;
    json_object_foreach (jpath(obj, "metadata.labels"), k, v) {
        _cleanup_free_ char *sel = NULL;
        if (!json_is_string(v)) {
            add_cause(causes, "FieldValueInvalid", "metadata.labels",
                      "Invalid value: label values must be strings");
            continue;
        }
        struct err e = {0};
        sel = xasprintf("%s=%s", k, json_string_value(v));
        struct ksim_selector *s = ksim_label_selector_parse(sel, &e);
        if (!s || s->n != 1 || !streq(s->reqs[0].key, k))
            add_cause(causes, "FieldValueInvalid", "metadata.labels",
                      "Invalid value: \"%s\": name part must consist of alphanumeric characters, "
                      "'-', '_' or '.', and must start and end with an alphanumeric character",
                      json_string_value(v));
        ksim_selector_free(s);
    }
}

static void validate_type(struct ksim *ks, struct ks_type *t, json_t *obj, json_t *causes)
{
    (void)ks;
    if (t->crd || t->group[0] == '\0') {
        if (!t->crd && streq(t->plural, "pods") &&
            json_array_size(jpath(obj, "spec.containers")) == 0)
            add_cause(causes, "FieldValueRequired", "spec.containers", "Required value");
        return;
    }
    if (streq(t->group, "apps") &&
        (streq(t->plural, "daemonsets") || streq(t->plural, "deployments") ||
         streq(t->plural, "replicasets"))) {
        json_t *sel = jpath(obj, "spec.selector");
        if (!json_is_object(sel)) {
            add_cause(causes, "FieldValueRequired", "spec.selector", "Required value");
            return;
        }
        struct err e = {0};
        _cleanup_(ksim_selector_freep) struct ksim_selector *s =
            ksim_label_selector_from_json(sel, &e);
        if (!s) {
            add_cause(causes, "FieldValueInvalid", "spec.selector", "Invalid value: %s",
                      err_msg(&e));
            return;
        }
        if (s->n == 0)
            add_cause(causes, "FieldValueInvalid", "spec.selector",
                      "Invalid value: {}: empty selector is invalid for deployment");
        else if (!ksim_selector_matches(s, jpath(obj, "spec.template.metadata.labels")))
            add_cause(causes, "FieldValueInvalid", "spec.template.metadata.labels",
                      "Invalid value: map[]: `selector` does not match template `labels`");
        if (json_array_size(jpath(obj, "spec.template.spec.containers")) == 0)
            add_cause(causes, "FieldValueRequired", "spec.template.spec.containers",
                      "Required value");
    }
    if (streq(t->plural, "customresourcedefinitions")) {
        const char *g = jstr(obj, "spec.group");
        const char *pl = jstr(obj, "spec.names.plural");
        const char *kind = jstr(obj, "spec.names.kind");
        const char *scope = jstr(obj, "spec.scope");
        if (!g || !pl || !kind) {
            add_cause(causes, "FieldValueRequired", "spec",
                      "spec.group, spec.names.plural and "
                      "spec.names.kind are required");
            return;
        }
        _cleanup_free_ char *want = xasprintf("%s.%s", pl, g);
        if (!streq(want, ks_obj_name(obj)))
            add_cause(causes, "FieldValueInvalid", "metadata.name",
                      "Invalid value: \"%s\": must be spec.names.plural+\".\"+spec.group",
                      ks_obj_name(obj));
        if (!scope || (!streq(scope, "Namespaced") && !streq(scope, "Cluster")))
            add_cause(causes, "FieldValueNotSupported", "spec.scope",
                      "Unsupported value: \"%s\": supported values: \"Cluster\", \"Namespaced\"",
                      scope ? scope : "");
        if (json_array_size(jpath(obj, "spec.versions")) == 0)
            add_cause(causes, "FieldValueRequired", "spec.versions", "Required value");
    }
}

/* Pod spec without the fields an update may change. */
static json_t *pod_spec_fixed(json_t *pod)
{
    json_t *spec = json_deep_copy(json_object_get(pod, "spec"));
    const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *c;
        json_array_foreach (json_object_get(spec, lists[l]), i, c)
            json_object_del(c, "image");
    }
    json_object_del(spec, "activeDeadlineSeconds");
    json_object_del(spec, "tolerations");
    json_object_del(spec, "terminationGracePeriodSeconds");
    return spec;
}

/* Fields the API server refuses to change on update (422). */
static void validate_immutable(struct ks_type *t, json_t *old, json_t *res, json_t *causes)
{
    if (t->crd)
        return;
    const char *p = t->plural;
    if (streq(t->group, "apps") && (streq(p, "daemonsets") || streq(p, "deployments") ||
                                    streq(p, "replicasets") || streq(p, "statefulsets"))) {
        if (!json_equal(jpath(old, "spec.selector"), jpath(res, "spec.selector"))) {
            char *v = json_dumps(jpath(res, "spec.selector"), JSON_COMPACT | JSON_ENCODE_ANY);
            add_cause(causes, "FieldValueInvalid", "spec.selector",
                      "Invalid value: %s: field is immutable", v ? v : "null");
            free(v);
        }
        return;
    }
    if (t->group[0])
        return;
    if (streq(p, "pods")) {
        json_t *a = pod_spec_fixed(old), *b = pod_spec_fixed(res);
        if (!json_equal(a, b))
            add_cause(causes, "FieldValueForbidden", "spec",
                      "Forbidden: pod updates may not change fields other than "
                      "`spec.containers[*].image`,`spec.initContainers[*].image`,"
                      "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
                      "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
                      "set to 1 if it was previously negative)");
        json_decref(a);
        json_decref(b);
    } else if (streq(p, "configmaps") || streq(p, "secrets")) {
        if (!json_is_true(json_object_get(old, "immutable")))
            return;
        if (!json_is_true(json_object_get(res, "immutable")))
            add_cause(causes, "FieldValueForbidden", "immutable",
                      "Forbidden: field is immutable when `immutable` is set");
        const char *const fields[] = {"data", "binaryData"};
        for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
            if (!json_equal(json_object_get(old, fields[i]) ?: json_null(),
                            json_object_get(res, fields[i]) ?: json_null()))
                add_cause(causes, "FieldValueForbidden", fields[i],
                          "Forbidden: field is immutable when `immutable` is set");
    } else if (streq(p, "services")) {
        /* an update without a clusterIP keeps the allocated one, as the API server does */
        json_t *spec = jensure(res, "spec");
        if (!json_object_get(spec, "clusterIP") && jpath(old, "spec.clusterIP")) {
            json_object_set(spec, "clusterIP", jpath(old, "spec.clusterIP"));
            if (jpath(old, "spec.clusterIPs"))
                json_object_set(spec, "clusterIPs", jpath(old, "spec.clusterIPs"));
        }
        const char *a = jstr(old, "spec.clusterIP"), *b = jstr(res, "spec.clusterIP");
        if (a && !streq_ptr(a, b))
            add_cause(causes, "FieldValueInvalid", "spec.clusterIPs[0]",
                      "Invalid value: \"%s\": field is immutable", b ? b : "");
    }
}

/* ---- CRDs --------------------------------------------------------------------------------- */

static char *lower_dup(const char *s)
{
    char *r = xstrdup(s);
    for (char *p = r; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return r;
}

static void csv_from(char **dst, json_t *arr)
{
    struct sbuf b;
    sbuf_init(&b, 4096);
    size_t i;
    json_t *x;
    json_array_foreach (arr, i, x)
        if (json_is_string(x))
            sbuf_printf(&b, "%s%s", b.len ? "," : "", json_string_value(x));
    free(*dst);
    *dst = xstrdup(b.data ? b.data : "");
    sbuf_free(&b);
}

/* Serves (or stops serving) the resources a CRD object declares. */
static void crd_sync(struct ksim *ks, json_t *crd, bool serve)
{
    const char *g = jstr(crd, "spec.group");
    const char *pl = jstr(crd, "spec.names.plural");
    const char *kind = jstr(crd, "spec.names.kind");
    if (!g || !pl || !kind)
        return;
    const char *singular = jstr(crd, "spec.names.singular");
    _cleanup_free_ char *sing = singular ? xstrdup(singular) : lower_dup(kind);
    bool namespaced = streq_ptr(jstr(crd, "spec.scope"), "Namespaced");
    for (struct ks_type *t = ks->types; t; t = t->next) {
        if (t->crd && streq(t->group, g) && streq(t->plural, pl))
            t->served = false;
    }
    if (!serve)
        return;
    size_t i;
    json_t *v;
    json_array_foreach (jpath(crd, "spec.versions"), i, v) {
        const char *ver = jstr(v, "name");
        if (!ver || json_is_false(json_object_get(v, "served")))
            continue;
        struct ks_type *t = NULL;
        for (struct ks_type *x = ks->types; x; x = x->next)
            if (x->crd && streq(x->group, g) && streq(x->plural, pl) && streq(x->version, ver))
                t = x;
        if (!t) {
            t = ks_type_add(ks, g, ver, pl, sing, kind, namespaced);
            t->crd = true;
        }
        t->served = true;
        t->namespaced = namespaced;
        free(t->kind);
        t->kind = xstrdup(kind);
        free(t->singular);
        t->singular = xstrdup(sing);
        t->has_generation = true;
        t->has_status = json_is_object(jpath(v, "subresources.status"));
        csv_from(&t->short_names, jpath(crd, "spec.names.shortNames"));
        csv_from(&t->categories, jpath(crd, "spec.names.categories"));
        json_decref(t->printer_columns);
        json_t *pc = json_object_get(v, "additionalPrinterColumns");
        t->printer_columns = json_array_size(pc) ? json_incref(pc) : NULL;
    }
}

/* Removes every custom resource of a CRD being deleted. */
static void crd_cleanup(struct ksim *ks, json_t *crd)
{
    const char *g = jstr(crd, "spec.group");
    const char *pl = jstr(crd, "spec.names.plural");
    for (struct ks_type *t = ks->types; t; t = t->next) {
        if (!t->crd || !streq_ptr(t->group, g) || !streq_ptr(t->plural, pl))
            continue;
        for (;;) {
            void *it = json_object_iter(t->objs);
            if (!it)
                break;
            ks_remove(ks, t, json_object_iter_value(it));
        }
        t->served = false;
    }
}

/* ---- query -------------------------------------------------------------------------------- */

static json_t *query_parse(const char *q)
{
    json_t *o = json_object();
    const char *p = q ? q : "";
    while (*p) {
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        _cleanup_free_ char *k = url_decode(p, eq ? (size_t)(eq - p) : n, true);
        _cleanup_free_ char *v =
            eq ? url_decode(eq + 1, n - (size_t)(eq + 1 - p), true) : xstrdup("");
        json_t *sv = json_string(v); /* NULL for bad UTF-8: the parameter is dropped */
        if (k[0] && sv)
            json_object_set_new(o, k, sv);
        else
            json_decref(sv);
        p += n + (amp ? 1 : 0);
    }
    return o;
}

static const char *qget(json_t *q, const char *k)
{
    return json_string_value(json_object_get(q, k));
}

static bool qtrue(json_t *q, const char *k)
{
    const char *v = qget(q, k);
    bool b = false;
    return v && (parse_bool(v, &b) == 0 ? b : v[0] == '\0');
}

/* ---- bodies ------------------------------------------------------------------------------- */

static bool is_yaml(const char *ct)
{
    return ct && (strstr(ct, "yaml") != NULL);
}

static json_t *pb_decode(const char *body, size_t blen, const char **ret_kind);

/* Parses a request body into an object; on failure fills a 400 and returns NULL. */
static json_t *parse_body(struct ksim *ks, const struct ksim_request *req, bool want_object,
                          struct ksim_response *resp)
{
    json_t *v = NULL;
    if (req->body_len > ks->opts.max_body) {
        char m[128];
        snprintf(m, sizeof(m), "Request entity too large: limit is %zu", ks->opts.max_body);
        ks_status(resp, 413, "RequestEntityTooLarge", m, NULL);
        return NULL;
    }
    if (!req->body || req->body_len == 0) {
        bad_request(resp, "the body of the request was empty");
        return NULL;
    }
    const char *ct = req->content_type;
    if (ct && str_has_prefix(ct, "application/vnd.kubernetes.protobuf")) {
        const char *kind;
        v = pb_decode(req->body, req->body_len, &kind);
        if (v)
            return v;
    }
    if (ct && ct[0] && !str_has_prefix(ct, "application/json") && !is_yaml(ct) &&
        !str_has_prefix(ct, "*/*")) {
        ks_status(resp, 415, "UnsupportedMediaType",
                  "the body of the request was in an unknown format - accepted media types "
                  "include: application/json, application/yaml",
                  NULL);
        return NULL;
    }
    if (is_yaml(req->content_type)) {
        struct err e = {0};
        if (yaml_parse_one(req->body, req->body_len, "body", &v, &e) < 0) {
            _cleanup_free_ char *m = xasprintf("error converting YAML to JSON: %s", err_msg(&e));
            bad_request(resp, m);
            return NULL;
        }
    } else {
        json_error_t je;
        v = json_loadb(req->body, req->body_len, JSON_DECODE_ANY, &je);
        if (!v) {
            _cleanup_free_ char *m =
                xasprintf("couldn't get version/kind; json parse error: %s", je.text);
            bad_request(resp, m);
            return NULL;
        }
    }
    if (want_object && !json_is_object(v)) {
        json_decref(v);
        bad_request(resp, "couldn't get version/kind; json parse error: json: cannot unmarshal "
                          "non-object into Go value of type struct");
        return NULL;
    }
    return v;
}

/* ---- protobuf (just enough for the Eviction bodies kubectl's typed client sends) ---------- */

static bool pb_varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        unsigned char b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* The first length-delimited field `want` of a message; false when absent or malformed. */
static bool pb_field(const unsigned char *buf, size_t len, uint64_t want, const unsigned char **ret,
                     size_t *ret_len)
{
    const unsigned char *p = buf, *end = buf + len;
    while (p < end) {
        uint64_t key, v;
        if (!pb_varint(&p, end, &key))
            return false;
        switch (key & 7) {
        case 0:
            if (!pb_varint(&p, end, &v))
                return false;
            break;
        case 1:
            if (end - p < 8)
                return false;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return false;
            p += 4;
            break;
        case 2:
            if (!pb_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return false;
            if ((key >> 3) == want) {
                *ret = p;
                *ret_len = (size_t)v;
                return true;
            }
            p += v;
            break;
        default:
            return false;
        }
    }
    return false;
}

/* ---- protobuf request bodies: the kinds kubectl's typed client creates -------------------- */

/* One field of a message: 1 read, 0 at the end, -1 malformed. */
static int pb_next(const unsigned char **p, const unsigned char *end, uint64_t *field, int *wire,
                   const unsigned char **data, size_t *len, uint64_t *val)
{
    if (*p >= end)
        return 0;
    uint64_t key;
    if (!pb_varint(p, end, &key))
        return -1;
    *field = key >> 3;
    *wire = (int)(key & 7);
    *data = NULL;
    *len = 0;
    *val = 0;
    switch (*wire) {
    case 0:
        return pb_varint(p, end, val) ? 1 : -1;
    case 1:
        if (end - *p < 8)
            return -1;
        *p += 8;
        return 1;
    case 5:
        if (end - *p < 4)
            return -1;
        *p += 4;
        return 1;
    case 2:
        if (!pb_varint(p, end, val) || *val > (uint64_t)(end - *p))
            return -1;
        *data = *p;
        *len = (size_t)*val;
        *p += *len;
        return 1;
    default:
        return -1;
    }
}

static json_t *pb_string(const unsigned char *d, size_t n)
{
    return json_stringn((const char *)d, n); /* NULL for invalid UTF-8 */
}

/* A map<string,string|bytes> entry into obj; bytes are base64'ed as JSON carries them. */
static int pb_map_entry(const unsigned char *d, size_t n, bool bytes, json_t *obj)
{
    const unsigned char *p = d, *end = d + n, *data;
    size_t len;
    uint64_t f, v;
    int w, r;
    json_t *key = NULL, *val = NULL;
    while ((r = pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
        if (w != 2)
            continue;
        json_t **slot = f == 1 ? &key : f == 2 ? &val : NULL;
        if (!slot)
            continue;
        json_decref(*slot);
        if (f == 2 && bytes) {
            char *b = base64_encode(data, len);
            *slot = json_string(b);
            free(b);
        } else {
            *slot = pb_string(data, len);
        }
    }
    if (r == 0 && json_is_string(key)) {
        if (val)
            json_object_set(obj, json_string_value(key), val);
        else
            json_object_set_new(obj, json_string_value(key), json_string(""));
    }
    json_decref(key);
    json_decref(val);
    return r;
}

static int pb_meta(const unsigned char *d, size_t n, json_t *meta)
{
    const unsigned char *p = d, *end = d + n, *data;
    size_t len;
    uint64_t f, v;
    int w, r;
    while ((r = pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
        if (w != 2)
            continue;
        if (f == 1 || f == 2 || f == 3) {
            json_t *s = pb_string(data, len);
            if (s)
                json_object_set_new(meta,
                                    f == 1   ? "name"
                                    : f == 2 ? "generateName"
                                             : "namespace",
                                    s);
        } else if (f == 11 || f == 12) {
            if (pb_map_entry(data, len, false, jensure(meta, f == 11 ? "labels" : "annotations")) <
                0)
                return -1;
        } else if (f == 14) {
            json_t *fin = json_object_get(meta, "finalizers");
            if (!fin) {
                fin = json_array();
                json_object_set_new(meta, "finalizers", fin);
            }
            json_t *s = pb_string(data, len);
            if (s)
                json_array_append_new(fin, s);
        }
    }
    return r;
}

/* Decodes a protobuf body (runtime.Unknown envelope) of Namespace, ConfigMap, Secret,
 * ServiceAccount or Eviction into the JSON object it stands for; NULL when not one of those. */
static json_t *pb_decode(const char *body, size_t blen, const char **ret_kind)
{
    const unsigned char *b = (const unsigned char *)body;
    *ret_kind = NULL;
    if (blen < 4 || memcmp(b, "k8s\0", 4) != 0)
        return NULL;
    const unsigned char *tm, *raw;
    size_t tml, rawl;
    if (!pb_field(b + 4, blen - 4, 1, &tm, &tml) || !pb_field(b + 4, blen - 4, 2, &raw, &rawl))
        return NULL;
    const unsigned char *avp, *kp;
    size_t avl, kl;
    if (!pb_field(tm, tml, 1, &avp, &avl) || !pb_field(tm, tml, 2, &kp, &kl))
        return NULL;
    static const char *const kinds[] = {"Namespace", "ConfigMap", "Secret", "ServiceAccount",
                                        "Eviction"};
    const char *kind = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
        if (strlen(kinds[i]) == kl && !memcmp(kinds[i], kp, kl))
            kind = kinds[i];
    json_t *av = pb_string(avp, avl);
    if (!kind || !av) {
        json_decref(av);
        return NULL;
    }
    json_t *obj = json_pack("{s:o,s:s,s:{}}", "apiVersion", av, "kind", kind, "metadata");
    const unsigned char *p = raw, *end = raw + rawl, *data;
    size_t len;
    uint64_t f, v;
    int w, r;
    while ((r = pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
        if (f == 1 && w == 2) {
            if (pb_meta(data, len, json_object_get(obj, "metadata")) < 0)
                r = -1;
        } else if (streq(kind, "Namespace") && f == 2 && w == 2) {
            const unsigned char *q = data, *qe = data + len, *d2;
            size_t l2;
            uint64_t f2, v2;
            int w2;
            json_t *fin = json_array();
            while (pb_next(&q, qe, &f2, &w2, &d2, &l2, &v2) > 0)
                if (f2 == 1 && w2 == 2)
                    json_array_append_new(fin, pb_string(d2, l2) ?: json_string(""));
            json_object_set_new(obj, "spec", json_pack("{s:o}", "finalizers", fin));
        } else if ((streq(kind, "ConfigMap") && (f == 2 || f == 3) && w == 2) ||
                   (streq(kind, "Secret") && (f == 2 || f == 4) && w == 2)) {
            bool bytes = (streq(kind, "ConfigMap") && f == 3) || (streq(kind, "Secret") && f == 2);
            const char *key = f == 2                     ? "data"
                              : streq(kind, "ConfigMap") ? "binaryData"
                                                         : "stringData";
            if (pb_map_entry(data, len, bytes, jensure(obj, key)) < 0)
                r = -1;
        } else if (streq(kind, "Secret") && f == 3 && w == 2) {
            json_t *s = pb_string(data, len);
            if (s)
                json_object_set_new(obj, "type", s);
        } else if (((streq(kind, "ConfigMap") && f == 4) || (streq(kind, "Secret") && f == 5)) &&
                   w == 0) {
            json_object_set_new(obj, "immutable", json_boolean(v != 0));
        }
        if (r < 0)
            break;
    }
    if (r < 0) {
        json_decref(obj);
        return NULL;
    }
    *ret_kind = kind;
    return obj;
}

/* ---- objects ------------------------------------------------------------------------------ */

static void random_suffix(struct ksim *ks, char *buf)
{
    static const char alpha[] = "bcdfghjklmnpqrstvwxz2456789";
    uint64_t x = (++ks->uid_counter + ks_now(ks)) * 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 5; i++) {
        buf[i] = alpha[x % 27];
        x /= 27;
    }
    buf[5] = '\0';
}

static bool ns_exists(struct ksim *ks, const char *ns, bool *terminating)
{
    struct ks_type *nst = ks_type_find(ks, "", "v1", "namespaces");
    json_t *o = ks_get(nst, "", ns);
    if (terminating)
        *terminating = o && jpath(o, "metadata.deletionTimestamp");
    return o != NULL;
}

/* Secrets: stringData is write-only, merged into data (base64) and dropped, as the API server
 * does on every write. */
static void ks_secret_string_data(json_t *obj)
{
    json_t *sd = json_object_get(obj, "stringData");
    if (!sd)
        return;
    const char *k;
    json_t *v;
    json_object_foreach (sd, k, v) {
        const char *s = json_string_value(v);
        if (!s)
            continue;
        char *b = base64_encode((const unsigned char *)s, strlen(s));
        json_object_set_new(jensure(obj, "data"), k, json_string(b));
        free(b);
    }
    json_object_del(obj, "stringData");
    if (!json_object_get(obj, "type"))
        json_object_set_new(obj, "type", json_string("Opaque"));
}

/* Type-specific defaults on create, as the API server's strategies and defaulters set them. */
static void defaults_on_create(struct ksim *ks, struct ks_type *t, json_t *obj)
{
    char now[40];
    ks_now_str(ks, now, sizeof(now));
    if (t->crd) {
        if (t->has_status)
            json_object_del(obj, "status");
        return;
    }
    const char *p = t->plural;
    if (!t->group[0] && streq(p, "namespaces")) {
        json_object_set_new(jensure(obj, "spec"), "finalizers", json_pack("[s]", "kubernetes"));
        json_object_set_new(jensure(obj, "status"), "phase", json_string("Active"));
        json_object_set_new(jensure(jensure(obj, "metadata"), "labels"),
                            "kubernetes.io/metadata.name", json_string(ks_obj_name(obj)));
    } else if (!t->group[0] && streq(p, "pods")) {
        json_t *spec = jensure(obj, "spec");
        if (!json_object_get(spec, "restartPolicy"))
            json_object_set_new(spec, "restartPolicy", json_string("Always"));
        if (!json_object_get(spec, "terminationGracePeriodSeconds"))
            json_object_set_new(spec, "terminationGracePeriodSeconds", json_integer(30));
        if (!json_object_get(spec, "dnsPolicy"))
            json_object_set_new(spec, "dnsPolicy", json_string("ClusterFirst"));
        if (!json_object_get(spec, "schedulerName"))
            json_object_set_new(spec, "schedulerName", json_string("default-scheduler"));
        if (!json_object_get(spec, "serviceAccountName"))
            json_object_set_new(spec, "serviceAccountName", json_string("default"));
        size_t i;
        json_t *c;
        json_array_foreach (json_object_get(spec, "containers"), i, c) {
            if (!json_is_object(c))
                continue;
            const char *img = jstr(c, "image");
            if (!json_object_get(c, "imagePullPolicy"))
                json_object_set_new(
                    c, "imagePullPolicy",
                    json_string(img && (str_has_suffix(img, ":latest") || !strchr(img, ':'))
                                    ? "Always"
                                    : "IfNotPresent"));
            if (!json_object_get(c, "terminationMessagePath"))
                json_object_set_new(c, "terminationMessagePath",
                                    json_string("/dev/termination-log"));
        }
        json_t *st = json_pack("{s:s,s:s}", "phase", "Pending", "qosClass", "BestEffort");
        if (jstr(obj, "spec.nodeName"))
            json_object_set_new(st, "conditions",
                                json_pack("[{s:s,s:s,s:n,s:s}]", "type", "PodScheduled", "status",
                                          "True", "lastProbeTime", "lastTransitionTime", now));
        json_object_set_new(obj, "status", st);
    } else if (!t->group[0] && streq(p, "secrets")) {
        ks_secret_string_data(obj);
        if (!json_object_get(obj, "type"))
            json_object_set_new(obj, "type", json_string("Opaque"));
    } else if (!t->group[0] && streq(p, "services")) {
        json_t *spec = jensure(obj, "spec");
        if (!json_object_get(spec, "type"))
            json_object_set_new(spec, "type", json_string("ClusterIP"));
        if (!json_object_get(spec, "clusterIP")) {
            char ip[32];
            snprintf(ip, sizeof(ip), "10.96.%u.%u", (unsigned)(ks->rv / 250 % 250),
                     (unsigned)(ks->rv % 250 + 2));
            json_object_set_new(spec, "clusterIP", json_string(ip));
            json_object_set_new(spec, "clusterIPs", json_pack("[s]", ip));
        }
        json_object_set_new(obj, "status", json_pack("{s:{}}", "loadBalancer"));
    } else if (streq(t->group, "apps") && streq(p, "daemonsets")) {
        json_t *spec = jensure(obj, "spec");
        if (!json_object_get(spec, "updateStrategy"))
            json_object_set_new(spec, "updateStrategy",
                                json_pack("{s:s,s:{s:i,s:i}}", "type", "RollingUpdate",
                                          "rollingUpdate", "maxUnavailable", 1, "maxSurge", 0));
        if (!json_object_get(spec, "revisionHistoryLimit"))
            json_object_set_new(spec, "revisionHistoryLimit", json_integer(10));
        json_object_set_new(obj, "status",
                            json_pack("{s:i,s:i,s:i,s:i}", "currentNumberScheduled", 0,
                                      "numberMisscheduled", 0, "desiredNumberScheduled", 0,
                                      "numberReady", 0));
    } else if (streq(t->group, "apps") && streq(p, "deployments")) {
        json_t *spec = jensure(obj, "spec");
        if (!json_object_get(spec, "replicas"))
            json_object_set_new(spec, "replicas", json_integer(1));
        if (!json_object_get(spec, "strategy"))
            json_object_set_new(spec, "strategy",
                                json_pack("{s:s,s:{s:s,s:s}}", "type", "RollingUpdate",
                                          "rollingUpdate", "maxUnavailable", "25%", "maxSurge",
                                          "25%"));
        if (!json_object_get(spec, "revisionHistoryLimit"))
            json_object_set_new(spec, "revisionHistoryLimit", json_integer(10));
        if (!json_object_get(spec, "progressDeadlineSeconds"))
            json_object_set_new(spec, "progressDeadlineSeconds", json_integer(600));
        json_object_set_new(obj, "status", json_object());
    } else if (streq(t->group, "policy")) {
        json_object_set_new(obj, "status",
                            json_pack("{s:i,s:i,s:i,s:i}", "disruptionsAllowed", 0,
                                      "currentHealthy", 0, "desiredHealthy", 0, "expectedPods", 0));
    } else if (streq(t->group, "apiextensions.k8s.io")) {
        json_t *names = json_deep_copy(jpath(obj, "spec.names"));
        if (json_is_object(names) && !json_object_get(names, "singular") && jstr(names, "kind")) {
            char *s = lower_dup(jstr(names, "kind"));
            json_object_set_new(names, "singular", json_string(s));
            free(s);
        }
        if (json_is_object(names) && !json_object_get(names, "listKind") && jstr(names, "kind")) {
            _cleanup_free_ char *lk = xasprintf("%sList", jstr(names, "kind"));
            json_object_set_new(names, "listKind", json_string(lk));
        }
        json_t *stored = json_array();
        size_t i;
        json_t *v;
        json_array_foreach (jpath(obj, "spec.versions"), i, v)
            if (json_is_true(json_object_get(v, "storage")))
                json_array_append(stored, json_object_get(v, "name"));
        json_object_set_new(
            obj, "status",
            json_pack("{s:[{s:s,s:s,s:s,s:s,s:s},{s:s,s:s,s:s,s:s,s:s}],s:o,s:o}", "conditions",
                      "type", "NamesAccepted", "status", "True", "lastTransitionTime", now,
                      "reason", "NoConflicts", "message", "no conflicts found", "type",
                      "Established", "status", "True", "lastTransitionTime", now, "reason",
                      "InitialNamesAccepted", "message", "the initial names have been accepted",
                      "acceptedNames", names ? names : json_object(), "storedVersions", stored));
    }
}

/* Strips what a client may not set and fills what the server owns; returns 422 causes. */
static json_t *prepare_create(struct ksim *ks, struct ks_type *t, const char *ns, json_t *obj,
                              struct ksim_response *resp)
{
    json_t *meta = jensure(obj, "metadata");
    const char *name = jstr(obj, "metadata.name");
    const char *gen = jstr(obj, "metadata.generateName");
    json_t *causes = json_array();
    if ((!name || !name[0]) && gen && gen[0]) {
        char sfx[8];
        random_suffix(ks, sfx);
        _cleanup_free_ char *n = xasprintf("%s%s", gen, sfx);
        json_object_set_new(meta, "name", json_string(n));
        name = jstr(obj, "metadata.name");
    }
    if (!name || !name[0]) {
        add_cause(causes, "FieldValueRequired", "metadata.name",
                  "Required value: name or generateName is required");
        invalid(resp, t, "", causes);
        return NULL;
    }
    if (t->namespaced)
        json_object_set_new(meta, "namespace", json_string(ns));
    else
        json_object_del(meta, "namespace");
    validate_name(t, name, causes);
    validate_labels(obj, causes);
    validate_type(ks, t, obj, causes);
    if (json_array_size(causes)) {
        invalid(resp, t, name, causes);
        return NULL;
    }
    json_decref(causes);
    char now[40];
    ks_now_str(ks, now, sizeof(now));
    _cleanup_free_ char *uid = ks_new_uid(ks);
    json_object_set_new(meta, "uid", json_string(uid));
    json_object_set_new(meta, "creationTimestamp", json_string(now));
    json_object_del(meta, "deletionTimestamp");
    json_object_del(meta, "deletionGracePeriodSeconds");
    json_object_del(meta, "resourceVersion");
    json_object_del(meta, "selfLink");
    if (t->has_generation)
        json_object_set_new(meta, "generation", json_integer(1));
    else
        json_object_del(meta, "generation");
    defaults_on_create(ks, t, obj);
    return obj;
}

static bool dry_run(json_t *q)
{
    const char *d = qget(q, "dryRun");
    return d && streq(d, "All");
}

/* Creates obj (stolen) in ns. */
static void do_create(struct ksim *ks, struct ks_type *t, const char *ns, json_t *obj, json_t *q,
                      struct ksim_response *resp)
{
    _cleanup_json_ json_t *own = obj;
    _cleanup_free_ char *gv = ks_type_gv(t);
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    if (!kind || !kind[0]) {
        _cleanup_free_ char *dump = json_dumps(obj, JSON_COMPACT);
        _cleanup_free_ char *m =
            xasprintf("Object 'Kind' is missing in '%.200s'", dump ? dump : "");
        bad_request(resp, m);
        return;
    }
    if (!streq(kind, t->kind) || (av && !streq(av, gv))) {
        _cleanup_free_ char *m = xasprintf(
            "the API version in the data (%s) does not match the expected API version (%s)",
            av ? av : "", gv);
        if (!streq(kind, t->kind)) {
            free(m);
            m = xasprintf("the kind in the data (%s) does not match the expected kind (%s)", kind,
                          t->kind);
        }
        bad_request(resp, m);
        return;
    }
    json_object_set_new(obj, "apiVersion", json_string(gv));
    const char *body_ns = jstr(obj, "metadata.namespace");
    if (t->namespaced && body_ns && body_ns[0] && !streq(body_ns, ns)) {
        bad_request(resp, "the namespace of the provided object does not match the namespace "
                          "sent on the request");
        return;
    }
    if (t->namespaced) {
        bool term = false;
        if (!ns_exists(ks, ns, &term)) {
            struct ks_type *nst = ks_type_find(ks, "", "v1", "namespaces");
            not_found(resp, nst, ns);
            return;
        }
        if (term) {
            _cleanup_free_ char *q2 = ks_type_qualified(t);
            _cleanup_free_ char *m = xasprintf(
                "%s \"%s\" is forbidden: unable to create new content in namespace %s because "
                "it is being terminated",
                q2, ks_obj_name(obj), ns);
            ks_status(resp, 403, "Forbidden", m, details(t, ks_obj_name(obj)));
            return;
        }
    }
    if (!prepare_create(ks, t, ns, obj, resp))
        return;
    const char *name = ks_obj_name(obj);
    if (ks_get(t, ns, name)) {
        _cleanup_free_ char *q2 = ks_type_qualified(t);
        _cleanup_free_ char *m = xasprintf("%s \"%s\" already exists", q2, name);
        ks_status(resp, 409, "AlreadyExists", m, details(t, name));
        return;
    }
    if (dry_run(q)) {
        ks_json_response(resp, 201, json_incref(obj));
        return;
    }
    json_t *stored = steal_ptr(&own);
    ks_commit(ks, t, stored, KS_ADDED, NULL);
    if (!t->crd && streq(t->plural, "customresourcedefinitions"))
        crd_sync(ks, stored, true);
    ks_json_response(resp, 201, json_incref(stored));
}

int ksim_create_object(struct ksim *ks, json_t *obj, struct err *e)
{
    pthread_mutex_lock(&ks->lock);
    int r = ks_create_locked(ks, obj, e);
    pthread_mutex_unlock(&ks->lock);
    return r;
}

int ks_create_locked(struct ksim *ks, json_t *obj, struct err *e)
{
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    struct ks_type *t = ks_type_by_kind(ks, av, kind);
    int r = 0;
    if (!t) {
        r = err_set(e, -ENOENT, "no resource for apiVersion \"%s\" kind \"%s\"", av ? av : "",
                    kind ? kind : "");
        goto out;
    }
    const char *ns = jstr(obj, "metadata.namespace");
    if (!ns || !ns[0])
        ns = "default";
    if (t->namespaced && !ns_exists(ks, ns, NULL)) {
        json_t *nso = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                                "metadata", "name", ns);
        struct ksim_response r0 = {0};
        do_create(ks, ks_type_find(ks, "", "v1", "namespaces"), "", nso, NULL, &r0);
        ksim_response_free(&r0);
    }
    struct ksim_response resp = {0};
    do_create(ks, t, ns, json_deep_copy(obj), NULL, &resp);
    if (resp.code != 201) {
        json_t *st = json_incref(resp.json);
        r = err_set(e, -EINVAL, "create %s \"%s\": %s", kind, ks_obj_name(obj),
                    jstr(st, "message") ? jstr(st, "message") : "failed");
        json_decref(st);
    }
    ksim_response_free(&resp);
out:
    return r;
}

/* The part of an object generation tracks: everything but metadata and status. */
static bool spec_changed(json_t *a, json_t *b)
{
    json_t *x = json_deep_copy(a), *y = json_deep_copy(b);
    const char *const drop[] = {"metadata", "status", "apiVersion", "kind"};
    for (size_t i = 0; i < ARRAY_SIZE(drop); i++) {
        json_object_del(x, drop[i]);
        json_object_del(y, drop[i]);
    }
    bool r = !json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return r;
}

/* Applies an update: obj (stolen) replaces old under the subresource's rules. */
static void do_update(struct ksim *ks, struct ks_type *t, json_t *old, json_t *obj, const char *sub,
                      bool dry, struct ksim_response *resp)
{
    _cleanup_json_ json_t *res = NULL;
    _cleanup_free_ char *gv = ks_type_gv(t);
    if (sub && streq(sub, "status")) {
        res = json_deep_copy(old);
        json_t *st = json_object_get(obj, "status");
        if (st)
            json_object_set(res, "status", st);
        else
            json_object_del(res, "status");
        json_decref(obj);
    } else if (sub && streq(sub, "finalize")) {
        res = json_deep_copy(old);
        json_t *f = jpath(obj, "spec.finalizers");
        json_t *spec = jensure(res, "spec");
        if (f)
            json_object_set(spec, "finalizers", f);
        else
            json_object_del(spec, "finalizers");
        json_decref(obj);
    } else {
        res = obj;
        if (t->has_status) {
            json_t *st = json_object_get(old, "status");
            if (st)
                json_object_set(res, "status", st);
            else
                json_object_del(res, "status");
        }
    }
    json_object_set_new(res, "apiVersion", json_string(gv));
    json_object_set_new(res, "kind", json_string(t->kind));
    if (!t->crd && streq(t->plural, "secrets"))
        ks_secret_string_data(res);
    json_t *meta = jensure(res, "metadata");
    json_t *om = json_object_get(old, "metadata");
    const char *keep[] = {"name",
                          "namespace",
                          "uid",
                          "creationTimestamp",
                          "deletionTimestamp",
                          "deletionGracePeriodSeconds",
                          "generation",
                          "resourceVersion"};
    for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
        json_t *v = json_object_get(om, keep[i]);
        if (v)
            json_object_set(meta, keep[i], v);
        else
            json_object_del(meta, keep[i]);
    }
    if (!json_object_get(meta, "managedFields") && json_object_get(om, "managedFields"))
        json_object_set(meta, "managedFields", json_object_get(om, "managedFields"));
    if (t->has_generation && spec_changed(old, res)) {
        json_int_t g = json_integer_value(json_object_get(om, "generation"));
        json_object_set_new(meta, "generation", json_integer(g + 1));
    }
    json_t *causes = json_array();
    validate_labels(res, causes);
    if (!sub) {
        validate_type(ks, t, res, causes);
        validate_immutable(t, old, res, causes);
    }
    if (json_array_size(causes)) {
        invalid(resp, t, ks_obj_name(old), causes);
        return;
    }
    json_decref(causes);
    if (json_equal(res, old)) {
        ks_json_response(resp, 200, json_incref(old));
        return;
    }
    if (dry) {
        ks_json_response(resp, 200, json_incref(res));
        return;
    }
    if (jpath(res, "metadata.deletionTimestamp") &&
        json_array_size(jpath(res, "metadata.finalizers")) == 0) {
        ks_commit(ks, t, json_incref(res), KS_MODIFIED, old);
        ks_remove(ks, t, res);
        ks_json_response(resp, 200, json_incref(res));
        return;
    }
    json_t *stored = steal_ptr(&res);
    ks_commit(ks, t, stored, KS_MODIFIED, old);
    if (!t->crd && streq(t->plural, "customresourcedefinitions"))
        crd_sync(ks, stored, true);
    ks_json_response(resp, 200, json_incref(stored));
}

/* A controller-side update (no HTTP); obj stolen. */
void ks_update(struct ksim *ks, struct ks_type *t, json_t *old, json_t *obj, const char *sub);
void ks_update(struct ksim *ks, struct ks_type *t, json_t *old, json_t *obj, const char *sub)
{
    struct ksim_response r = {0};
    do_update(ks, t, old, obj, sub, false, &r);
    ksim_response_free(&r);
}

/* ---- delete ------------------------------------------------------------------------------- */

static bool has_finalizer(json_t *obj, const char *f)
{
    size_t i;
    json_t *x;
    json_array_foreach (jpath(obj, "metadata.finalizers"), i, x)
        if (streq_ptr(json_string_value(x), f))
            return true;
    return false;
}

void ks_delete_obj(struct ksim *ks, struct ks_type *t, json_t *obj, const char *propagation)
{
    ks_delete_obj_grace(ks, t, obj, propagation, -1);
}

/* Graceful pod deletion: a bound pod is marked (deletionTimestamp = now + grace) and the
 * simulated kubelet removes it once its containers are "stopped" (after the shorter of the
 * grace period and --pod-ready-delay). grace < 0: the pod's terminationGracePeriodSeconds. */
static bool pod_graceful(struct ksim *ks, struct ks_type *t, json_t *obj, const char *propagation,
                         int64_t grace)
{
    if (t->crd || t->group[0] || !streq(t->plural, "pods") || !jstr(obj, "spec.nodeName"))
        return false;
    if (grace < 0) {
        json_t *g = jpath(obj, "spec.terminationGracePeriodSeconds");
        grace = json_is_integer(g) ? json_integer_value(g) : 30;
    }
    if (grace <= 0)
        return false;
    uint64_t now = ks_now(ks);
    json_t *n = json_deep_copy(obj);
    json_t *meta = jensure(n, "metadata");
    char ts[40];
    time_rfc3339(now + (uint64_t)grace * 1000, ts, sizeof(ts));
    json_object_set_new(meta, "deletionTimestamp", json_string(ts));
    json_object_set_new(meta, "deletionGracePeriodSeconds", json_integer(grace));
    const char *add = NULL;
    if (propagation && streq(propagation, "Foreground"))
        add = "foregroundDeletion";
    else if (propagation && streq(propagation, "Orphan"))
        add = "orphan";
    if (add && !has_finalizer(n, add)) {
        json_t *f = json_object_get(meta, "finalizers");
        if (!json_is_array(f)) {
            f = json_array();
            json_object_set_new(meta, "finalizers", f);
        }
        json_array_append_new(f, json_string(add));
    }
    uint64_t kill = (uint64_t)grace * 1000;
    if (ks->opts.pod_ready_delay_ms < kill)
        kill = ks->opts.pod_ready_delay_ms;
    const char *uid = jstr(obj, "metadata.uid");
    if (uid)
        json_object_set_new(ks->pod_dying, uid, json_integer((json_int_t)(now + kill)));
    if (!ks->next_due || now + kill < ks->next_due)
        ks->next_due = now + kill;
    ks_commit(ks, t, n, KS_MODIFIED, obj);
    return true;
}

void ks_delete_obj_grace(struct ksim *ks, struct ks_type *t, json_t *obj, const char *propagation,
                         int64_t grace)
{
    if (jpath(obj, "metadata.deletionTimestamp")) {
        /* a forced (grace 0) delete of a terminating pod removes it now */
        if (grace == 0 && !t->crd && streq(t->plural, "pods") &&
            json_array_size(jpath(obj, "metadata.finalizers")) == 0)
            ks_remove(ks, t, obj);
        return;
    }
    if (pod_graceful(ks, t, obj, propagation, grace))
        return;
    bool is_ns = !t->crd && streq(t->plural, "namespaces");
    bool is_crd = !t->crd && streq(t->plural, "customresourcedefinitions");
    json_t *fin = jpath(obj, "metadata.finalizers");
    const char *add = NULL;
    if (propagation && streq(propagation, "Foreground"))
        add = "foregroundDeletion";
    else if (propagation && streq(propagation, "Orphan"))
        add = "orphan";
    if (json_array_size(fin) == 0 && !add && !is_ns) {
        if (is_crd)
            crd_cleanup(ks, obj);
        ks_remove(ks, t, obj);
        return;
    }
    json_t *n = json_deep_copy(obj);
    json_t *meta = jensure(n, "metadata");
    char now[40];
    ks_now_str(ks, now, sizeof(now));
    json_object_set_new(meta, "deletionTimestamp", json_string(now));
    json_object_set_new(meta, "deletionGracePeriodSeconds", json_integer(0));
    if (add && !has_finalizer(n, add)) {
        json_t *f = json_object_get(meta, "finalizers");
        if (!json_is_array(f)) {
            f = json_array();
            json_object_set_new(meta, "finalizers", f);
        }
        json_array_append_new(f, json_string(add));
    }
    if (t->has_generation)
        json_object_set_new(
            meta, "generation",
            json_integer(json_integer_value(json_object_get(meta, "generation")) + 1));
    if (is_ns)
        json_object_set_new(jensure(n, "status"), "phase", json_string("Terminating"));
    ks_commit(ks, t, n, KS_MODIFIED, obj);
}

static void do_delete(struct ksim *ks, struct ks_type *t, json_t *obj,
                      const struct ksim_request *req, json_t *q, struct ksim_response *resp)
{
    _cleanup_json_ json_t *opts = NULL;
    if (req->body && req->body_len) {
        opts = parse_body(ks, req, true, resp);
        if (!opts)
            return;
    }
    const char *prop = jstr(opts, "propagationPolicy");
    if (!prop)
        prop = qget(q, "propagationPolicy");
    if (!prop && json_is_false(json_object_get(opts, "orphanDependents")))
        prop = "Background";
    if (!prop && json_is_true(json_object_get(opts, "orphanDependents")))
        prop = "Orphan";
    if (prop && !streq(prop, "Foreground") && !streq(prop, "Background") &&
        !streq(prop, "Orphan")) {
        json_t *causes = json_array();
        add_cause(causes, "FieldValueNotSupported", "propagationPolicy",
                  "Unsupported value: \"%s\": supported values: \"Foreground\", \"Background\", "
                  "\"Orphan\"",
                  prop);
        invalid(resp, t, ks_obj_name(obj), causes);
        return;
    }
    const char *puid = jstr(opts, "preconditions.uid");
    const char *prv = jstr(opts, "preconditions.resourceVersion");
    if (puid && !streq_ptr(puid, jstr(obj, "metadata.uid"))) {
        _cleanup_free_ char *m =
            xasprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", puid,
                      jstr(obj, "metadata.uid") ?: "");
        ks_status(resp, 409, "Conflict", m, details(t, ks_obj_name(obj)));
        return;
    }
    if (prv && !streq_ptr(prv, jstr(obj, "metadata.resourceVersion"))) {
        _cleanup_free_ char *m = xasprintf("Precondition failed: ResourceVersion in precondition: "
                                           "%s, ResourceVersion in object meta: %s",
                                           prv, jstr(obj, "metadata.resourceVersion") ?: "");
        ks_status(resp, 409, "Conflict", m, details(t, ks_obj_name(obj)));
        return;
    }
    bool dry = dry_run(q) || (json_is_array(json_object_get(opts, "dryRun")) &&
                              json_array_size(json_object_get(opts, "dryRun")));
    _cleanup_free_ char *name = xstrdup(ks_obj_name(obj));
    _cleanup_free_ char *ns = xstrdup(ks_obj_ns(obj));
    _cleanup_free_ char *uid = xstrdup(jstr(obj, "metadata.uid") ?: "");
    if (dry) {
        ks_json_response(resp, 200, json_incref(obj));
        return;
    }
    json_t *keep = json_incref(obj);
    int64_t grace = -1;
    json_t *g = json_object_get(opts, "gracePeriodSeconds");
    if (json_is_integer(g))
        grace = json_integer_value(g);
    else if (qget(q, "gracePeriodSeconds"))
        parse_i64(qget(q, "gracePeriodSeconds"), &grace);
    ks_delete_obj_grace(ks, t, obj, prop, grace);
    json_t *now = ks_get(t, ns, name);
    if (now) {
        ks_json_response(resp, 200, json_incref(now));
    } else if (!t->crd && streq(t->plural, "pods")) {
        ks_json_response(resp, 200, json_incref(keep));
    } else {
        json_t *d = details(t, name);
        json_object_set_new(d, "uid", json_string(uid));
        ks_status(resp, 200, "", "", d);
    }
    json_decref(keep);
}

/* ---- list and watch ----------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool wants_table(const struct ksim_request *req)
{
    return req->accept && strstr(req->accept, "as=Table") && strstr(req->accept, "meta.k8s.io");
}

static bool obj_visible(json_t *obj, const char *ns, const struct ksim_selector *ls,
                        const struct ksim_selector *fs)
{
    if (ns && !streq(ks_obj_ns(obj), ns))
        return false;
    return ksim_selector_matches(ls, jpath(obj, "metadata.labels")) && ks_field_matches(fs, obj);
}

/* Items in key order, filtered; a new array. Keys sorted so pagination is stable. */
static json_t *collect(struct ks_type *t, const char *ns, const struct ksim_selector *ls,
                       const struct ksim_selector *fs, const char *after, size_t limit,
                       const char **ret_last_key, size_t *ret_remaining, char ***ret_keys)
{
    size_t n = json_object_size(t->objs), k = 0;
    const char **keys = xcalloc(n ? n : 1, sizeof(char *));
    const char *key;
    json_t *v;
    json_object_foreach (t->objs, key, v)
        keys[k++] = key;
    qsort(keys, k, sizeof(char *), cmp_str);
    json_t *items = json_array();
    size_t remaining = 0;
    *ret_last_key = NULL;
    for (size_t i = 0; i < k; i++) {
        if (after && strcmp(keys[i], after) <= 0)
            continue;
        json_t *o = json_object_get(t->objs, keys[i]);
        if (!obj_visible(o, ns, ls, fs))
            continue;
        if (limit && json_array_size(items) >= limit) {
            remaining++;
            continue;
        }
        json_array_append(items, o);
        *ret_last_key = keys[i];
    }
    *ret_remaining = remaining;
    *ret_keys = (char **)keys;
    return items;
}

static void do_list(struct ksim *ks, struct ks_type *t, const char *ns, json_t *q,
                    const struct ksim_request *req, struct ksim_selector *ls,
                    struct ksim_selector *fs, struct ksim_response *resp)
{
    uint64_t limit = 0;
    const char *ls_ = qget(q, "limit");
    if (ls_ && ls_[0] && parse_u64(ls_, &limit) < 0) {
        bad_request(resp, "limit: Invalid value: must be a non-negative integer");
        return;
    }
    _cleanup_free_ char *after = NULL;
    const char *cont = qget(q, "continue");
    if (cont && cont[0]) {
        size_t n = 0;
        _cleanup_free_ char *raw = NULL;
        json_t *tok =
            base64_decode(cont, strlen(cont), &raw, &n) == 0 ? json_loadb(raw, n, 0, NULL) : NULL;
        const char *start = jstr(tok, "start");
        if (!start || !streq_ptr(jstr(tok, "v"), "meta.k8s.io/v1")) {
            json_decref(tok);
            bad_request(resp, "continue key is not valid: illegal base64 data or unrecognized "
                              "token");
            return;
        }
        size_t sl = strlen(start);
        after = xstrndup(start, sl && start[sl - 1] == '\x01' ? sl - 1 : sl);
        json_decref(tok);
    }
    const char *last = NULL;
    size_t remaining = 0;
    char **keys = NULL;
    json_t *items = collect(t, ns, ls, fs, after, (size_t)limit, &last, &remaining, &keys);
    char rv[32];
    snprintf(rv, sizeof(rv), "%" PRIu64, ks->rv);
    json_t *meta = json_pack("{s:s}", "resourceVersion", rv);
    if (remaining && last) {
        _cleanup_free_ char *start = xasprintf("%s\x01", last);
        json_t *tok = json_pack("{s:s,s:I,s:s}", "v", "meta.k8s.io/v1", "rv", (json_int_t)ks->rv,
                                "start", start);
        _cleanup_free_ char *s = json_dumps(tok, JSON_COMPACT);
        json_decref(tok);
        _cleanup_free_ char *enc = base64_encode((const unsigned char *)s, strlen(s));
        json_object_set_new(meta, "continue", json_string(enc));
        json_object_set_new(meta, "remainingItemCount", json_integer((json_int_t)remaining));
    }
    free(keys);
    if (wants_table(req)) {
        json_t *tab = ks_table(ks, t, items, !streq_ptr(qget(q, "includeObject"), "None"));
        if (streq_ptr(qget(q, "includeObject"), "Object")) {
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
    const char *rvs = qget(q, "resourceVersion");
    uint64_t rv = 0;
    if (!rvs || !rvs[0] || parse_u64(rvs, &rv) < 0 || rv <= ks->rv)
        return false;
    char m[160];
    snprintf(m, sizeof(m), "Too large resource version: %" PRIu64 ", current: %" PRIu64, rv,
             ks->rv);
    ks_status(resp, 504, "Timeout", m,
              json_pack("{s:[{s:s,s:s}],s:i}", "causes", "reason", "ResourceVersionTooLarge",
                        "message", "Too large resource version", "retryAfterSeconds", 1));
    return true;
}

static void start_watch(struct ksim *ks, struct ks_type *t, const char *ns, json_t *q,
                        const struct ksim_request *req, struct ksim_selector *ls,
                        struct ksim_selector *fs, struct ksim_response *resp)
{
    struct ksim_watch *w = xcalloc(1, sizeof(*w));
    w->type = t;
    w->ns = ns ? xstrdup(ns) : NULL;
    w->lsel = ls;
    w->fsel = fs;
    w->bookmarks = qtrue(q, "allowWatchBookmarks");
    w->table = wants_table(req);
    w->last_bookmark = ks_now(ks);
    const char *to = qget(q, "timeoutSeconds");
    uint64_t secs = 0;
    if (to && to[0] && parse_u64(to, &secs) == 0 && secs > 0) {
        w->deadline = ks_now(ks) + secs * 1000;
    } else {
        /* as the API server's --min-request-timeout: a random 30 to 60 minutes */
        uint64_t x = (++ks->uid_counter + ks_now(ks)) * 0x9E3779B97F4A7C15ull;
        w->deadline = ks_now(ks) + (1800 + (x >> 33) % 1800) * 1000;
    }
    const char *rvs = qget(q, "resourceVersion");
    uint64_t rv = 0;
    ksim_compact(ks);
    if (!rvs || !rvs[0] || streq(rvs, "0") || qtrue(q, "sendInitialEvents")) {
        const char *last;
        size_t rem;
        char **keys;
        w->initial = collect(t, ns, ls, fs, NULL, 0, &last, &rem, &keys);
        free(keys);
        w->cursor = ks->rv;
        w->initial_end_bookmark = qtrue(q, "sendInitialEvents") && w->bookmarks;
    } else if (parse_u64(rvs, &rv) < 0) {
        _cleanup_free_ char *m = xasprintf("invalid resource version: %s", rvs);
        bad_request(resp, m);
        ksim_selector_free(ls);
        ksim_selector_free(fs);
        free(w->ns);
        free(w);
        return;
    } else if (rv < ks->compacted_rv) {
        w->expired_rv = rv;
        w->cursor = rv;
    } else {
        w->cursor = rv;
    }
    ks->watches_active++;
    resp->code = 200;
    resp->content_type = "application/json";
    resp->watch = w;
}

void ksim_watch_free(struct ksim *ks, struct ksim_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&ks->lock);
    if (ks->watches_active)
        ks->watches_active--;
    pthread_mutex_unlock(&ks->lock);
    ksim_selector_free(w->lsel);
    ksim_selector_free(w->fsel);
    json_decref(w->initial);
    free(w->ns);
    free(w);
}

static bool watch_sees(struct ksim_watch *w, json_t *obj)
{
    return obj && obj_visible(obj, w->ns, w->lsel, w->fsel);
}

static void emit(struct ksim *ks, struct ksim_watch *w, struct sbuf *out, const char *type,
                 json_t *obj)
{
    json_t *o = obj;
    json_t *tab = NULL;
    if (w->table) {
        json_t *one = json_pack("[O]", obj);
        tab = ks_table(ks, w->type, one, true);
        json_decref(one);
        o = tab;
    }
    json_t *ev = json_pack("{s:s,s:O}", "type", type, "object", o);
    char *s = json_dumps(ev, JSON_COMPACT);
    if (s) {
        sbuf_puts(out, s);
        sbuf_puts(out, "\n");
    }
    free(s);
    json_decref(ev);
    json_decref(tab);
    ks->watch_events_total++;
}

static void emit_bookmark(struct ksim *ks, struct ksim_watch *w, struct sbuf *out, bool end)
{
    char rv[32];
    snprintf(rv, sizeof(rv), "%" PRIu64, w->cursor > ks->rv ? w->cursor : ks->rv);
    _cleanup_free_ char *gv = ks_type_gv(w->type);
    json_t *obj = json_pack("{s:s,s:s,s:{s:s,s:n}}", "kind", w->type->kind, "apiVersion", gv,
                            "metadata", "resourceVersion", rv, "creationTimestamp");
    if (end)
        json_object_set_new(json_object_get(obj, "metadata"), "annotations",
                            json_pack("{s:s}", "k8s.io/initial-events-end", "true"));
    bool table = w->table;
    w->table = false;
    emit(ks, w, out, "BOOKMARK", obj);
    w->table = table;
    json_decref(obj);
    w->last_bookmark = ks_now(ks);
}

static void emit_expired(struct ksim *ks, struct ksim_watch *w, struct sbuf *out)
{
    _cleanup_free_ char *m = xasprintf("too old resource version: %" PRIu64 " (%" PRIu64 ")",
                                       w->expired_rv, ks->compacted_rv + 1);
    json_t *st =
        json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:i}", "kind", "Status", "apiVersion", "v1",
                  "metadata", "status", "Failure", "message", m, "reason", "Expired", "code", 410);
    bool table = w->table;
    w->table = false;
    emit(ks, w, out, "ERROR", st);
    w->table = table;
    json_decref(st);
    w->ended = true;
}

/* First event index with rv > cursor. */
static size_t ev_search(struct ksim *ks, uint64_t cursor)
{
    size_t lo = ks->ev_head, hi = ks->ev_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ks->ev[mid].rv <= cursor)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int ksim_watch_next(struct ksim *ks, struct ksim_watch *w, struct sbuf *out, uint64_t wait_ms)
{
    pthread_mutex_lock(&ks->lock);
    uint64_t start = now_ms_mono();
    int r = 0;
    for (;;) {
        if (ks->shutdown || w->ended) {
            r = -1;
            break;
        }
        if (w->expired_rv || w->cursor < ks->compacted_rv) {
            if (!w->expired_rv)
                w->expired_rv = w->cursor;
            emit_expired(ks, w, out);
            r = 1;
            break;
        }
        if (w->initial) {
            /* in slices, so a huge initial state never overflows the stream buffer */
            size_t n = json_array_size(w->initial);
            while (w->initial_pos < n && out->len < (1u << 20))
                emit(ks, w, out, "ADDED", json_array_get(w->initial, w->initial_pos++));
            r = 1;
            if (w->initial_pos < n)
                break;
            json_decref(w->initial);
            w->initial = NULL;
            if (w->initial_end_bookmark)
                emit_bookmark(ks, w, out, true);
            r = 1;
            break;
        }
        size_t before = out->len;
        for (size_t i = ev_search(ks, w->cursor); i < ks->ev_len && out->len < (1u << 20); i++) {
            struct ks_event *e = &ks->ev[i];
            w->cursor = e->rv;
            if (e->type != w->type)
                continue;
            bool now_in = watch_sees(w, e->obj);
            bool was_in = e->kind == KS_MODIFIED ? watch_sees(w, e->old) : now_in;
            if (e->kind == KS_ADDED && now_in)
                emit(ks, w, out, "ADDED", e->obj);
            else if (e->kind == KS_DELETED && now_in)
                emit(ks, w, out, "DELETED", e->obj);
            else if (e->kind == KS_MODIFIED && now_in && was_in)
                emit(ks, w, out, "MODIFIED", e->obj);
            else if (e->kind == KS_MODIFIED && now_in)
                emit(ks, w, out, "ADDED", e->obj);
            else if (e->kind == KS_MODIFIED && was_in)
                emit(ks, w, out, "DELETED", e->obj);
        }
        if (out->len > before) {
            r = 1;
            break;
        }
        uint64_t now = ks_now(ks);
        if (w->deadline && now >= w->deadline) {
            w->ended = true;
            r = -1;
            break;
        }
        if (w->bookmarks && now >= w->last_bookmark + ks->opts.bookmark_interval_ms) {
            emit_bookmark(ks, w, out, false);
            r = 1;
            break;
        }
        uint64_t waited = now_ms_mono() - start;
        if (waited >= wait_ms)
            break;
        uint64_t left = wait_ms - waited;
        if (w->deadline && w->deadline - now < left)
            left = w->deadline - now + 1;
        if (w->bookmarks && w->last_bookmark + ks->opts.bookmark_interval_ms - now < left)
            left = w->last_bookmark + ks->opts.bookmark_interval_ms - now + 1;
        ks_cond_wait(ks, left);
    }
    pthread_mutex_unlock(&ks->lock);
    return r;
}

void ksim_metrics(struct ksim *ks, struct sbuf *out)
{
    pthread_mutex_lock(&ks->lock);
    sbuf_printf(out,
                "# HELP kubesim_watches_active Watch streams open now.\n"
                "# TYPE kubesim_watches_active gauge\n"
                "kubesim_watches_active %" PRIu64 "\n"
                "# HELP kubesim_watch_events_total Watch events sent, bookmarks included.\n"
                "# TYPE kubesim_watch_events_total counter\n"
                "kubesim_watch_events_total %" PRIu64 "\n"
                "# HELP kubesim_resource_version The global resourceVersion.\n"
                "# TYPE kubesim_resource_version gauge\n"
                "kubesim_resource_version %" PRIu64 "\n"
                "# HELP kubesim_objects Objects stored, by resource.\n"
                "# TYPE kubesim_objects gauge\n",
                ks->watches_active, ks->watch_events_total, ks->rv);
    for (struct ks_type *t = ks->types; t; t = t->next)
        if (t->served)
            sbuf_printf(out, "kubesim_objects{resource=\"%s\"} %zu\n", t->plural,
                        json_object_size(t->objs));
    pthread_mutex_unlock(&ks->lock);
}

/* ---- patch and apply ---------------------------------------------------------------------- */

json_t *ks_fieldset(json_t *v, const char *field);
int ks_apply_conflicts(json_t *mine, json_t *theirs, json_t *cfg, json_t *live, const char *path,
                       const char *manager, bool force, json_t *causes);
bool ks_apply_merge(json_t *live, json_t *config, json_t *prev_fs, json_t *others_fs, json_t **ret,
                    struct err *e);

static json_t *other_managers_fs(json_t *obj, const char *manager)
{
    json_t *all = json_object();
    size_t i;
    json_t *mf;
    json_array_foreach (jpath(obj, "metadata.managedFields"), i, mf) {
        if (streq_ptr(jstr(mf, "manager"), manager) && streq_ptr(jstr(mf, "operation"), "Apply"))
            continue;
        json_t *fs = json_object_get(mf, "fieldsV1");
        if (json_is_object(fs)) {
            json_t *m = ksim_merge_patch(all, fs);
            json_decref(all);
            all = m;
        }
    }
    return all;
}

static void do_apply(struct ksim *ks, struct ks_type *t, const char *ns, const char *name,
                     json_t *old, json_t *config, json_t *q, struct ksim_response *resp)
{
    _cleanup_json_ json_t *cfg = config;
    const char *mgr = qget(q, "fieldManager");
    if (!mgr || !mgr[0]) {
        bad_request(resp, "PATCH requests with apply-patch+yaml content type require a "
                          "fieldManager to be specified");
        return;
    }
    if (!json_is_object(cfg)) {
        bad_request(resp, "error decoding YAML: the apply configuration must be an object");
        return;
    }
    _cleanup_free_ char *gv = ks_type_gv(t);
    if (!streq_ptr(jstr(cfg, "kind"), t->kind) || !streq_ptr(jstr(cfg, "apiVersion"), gv)) {
        _cleanup_free_ char *m =
            xasprintf("the API version in the data (%s) does not match the expected API version "
                      "(%s)",
                      jstr(cfg, "apiVersion") ?: "", gv);
        bad_request(resp, m);
        return;
    }
    const char *cname = jstr(cfg, "metadata.name");
    if (cname && !streq(cname, name)) {
        _cleanup_free_ char *m = xasprintf(
            "the name of the object (%s) does not match the name on the URL (%s)", cname, name);
        bad_request(resp, m);
        return;
    }
    json_object_set_new(jensure(cfg, "metadata"), "name", json_string(name));
    json_object_del(json_object_get(cfg, "metadata"), "managedFields");
    json_t *fs = ks_fieldset(cfg, NULL);
    char now[40];
    ks_now_str(ks, now, sizeof(now));
    json_t *entry =
        json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "manager", mgr, "operation", "Apply", "apiVersion",
                  gv, "time", now, "fieldsType", "FieldsV1", "fieldsV1", fs);
    if (!old) {
        json_t *obj = json_deep_copy(cfg);
        json_object_set_new(jensure(obj, "metadata"), "managedFields", json_pack("[o]", entry));
        do_create(ks, t, ns, obj, q, resp);
        return;
    }
    json_t *prev_fs = NULL;
    json_t *mfs = jpath(old, "metadata.managedFields");
    size_t i;
    json_t *mf;
    bool force = qtrue(q, "force");
    /* other managers' entries, copied: a forced apply takes their conflicting fields */
    json_t *newmf = json_array();
    json_t *causes = json_array();
    json_array_foreach (mfs, i, mf) {
        if (streq_ptr(jstr(mf, "manager"), mgr) && streq_ptr(jstr(mf, "operation"), "Apply")) {
            prev_fs = json_object_get(mf, "fieldsV1");
            continue;
        }
        json_t *copy = json_deep_copy(mf);
        json_t *theirs = json_object_get(copy, "fieldsV1");
        if (json_is_object(theirs))
            ks_apply_conflicts(fs, theirs, cfg, old, "", jstr(mf, "manager") ?: "", force, causes);
        json_array_append_new(newmf, copy);
    }
    if (json_array_size(causes) && !force) {
        struct sbuf b;
        sbuf_init(&b, 1u << 16);
        size_t n = json_array_size(causes);
        sbuf_printf(&b, "Apply failed with %zu conflict%s: ", n, n == 1 ? "" : "s");
        json_t *c;
        json_array_foreach (causes, i, c)
            sbuf_printf(&b, "%s%s: %s", i ? "; " : "", jstr(c, "message"), jstr(c, "field"));
        json_t *d = details(t, name);
        json_object_set_new(d, "causes", causes);
        ks_status(resp, 409, "Conflict", b.data ? b.data : "", d);
        sbuf_free(&b);
        json_decref(newmf);
        json_decref(entry);
        return;
    }
    json_decref(causes);
    json_t *fake = json_pack("{s:{s:O}}", "metadata", "managedFields", newmf);
    _cleanup_json_ json_t *others = other_managers_fs(fake, mgr);
    json_decref(fake);
    json_t *live = json_deep_copy(old);
    json_object_del(json_object_get(live, "metadata"), "managedFields");
    json_t *merged = NULL;
    struct err e = {0};
    if (!ks_apply_merge(live, cfg, prev_fs, others, &merged, &e)) {
        json_decref(live);
        json_decref(entry);
        _cleanup_free_ char *m = xasprintf("apply: %s", err_msg(&e));
        ks_status(resp, 422, "Invalid", m, NULL);
        return;
    }
    json_decref(live);
    /* managedFields: replace this manager's Apply entry; keep the time when nothing changed */
    bool same_fs = prev_fs && json_equal(prev_fs, fs);
    json_t *cmp_old = json_deep_copy(old);
    json_object_del(json_object_get(cmp_old, "metadata"), "managedFields");
    json_t *cmp_new = json_deep_copy(merged);
    if (t->has_status) {
        json_t *st = json_object_get(old, "status");
        if (st)
            json_object_set(cmp_new, "status", st);
        else
            json_object_del(cmp_new, "status");
    }
    json_object_set(json_object_get(cmp_new, "metadata"), "resourceVersion",
                    jpath(old, "metadata.resourceVersion"));
    json_t *old_mf = json_array();
    json_array_foreach (mfs, i, mf)
        if (!(streq_ptr(jstr(mf, "manager"), mgr) && streq_ptr(jstr(mf, "operation"), "Apply")))
            json_array_append(old_mf, mf);
    bool unchanged = same_fs && json_equal(cmp_old, cmp_new) && json_equal(old_mf, newmf);
    json_decref(old_mf);
    json_decref(cmp_old);
    json_decref(cmp_new);
    if (unchanged) {
        json_decref(newmf);
        json_decref(entry);
        json_decref(merged);
        ks_json_response(resp, 200, json_incref(old));
        return;
    }
    json_array_append_new(newmf, entry);
    json_object_set_new(jensure(merged, "metadata"), "managedFields", newmf);
    do_update(ks, t, old, merged, NULL, dry_run(q), resp);
}

static void do_patch(struct ksim *ks, struct ks_type *t, const char *ns, const char *name,
                     json_t *old, const char *sub, const struct ksim_request *req, json_t *q,
                     struct ksim_response *resp)
{
    const char *ct = req->content_type ? req->content_type : "";
    enum { P_MERGE, P_JSON, P_SMP, P_APPLY } kind;
    if (str_has_prefix(ct, "application/merge-patch+json"))
        kind = P_MERGE;
    else if (str_has_prefix(ct, "application/json-patch+json"))
        kind = P_JSON;
    else if (str_has_prefix(ct, "application/strategic-merge-patch+json"))
        kind = P_SMP;
    else if (str_has_prefix(ct, "application/apply-patch+yaml") ||
             str_has_prefix(ct, "application/apply-patch+cbor"))
        kind = P_APPLY;
    else {
        _cleanup_free_ char *m = xasprintf(
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, "
            "application/apply-patch+yaml%s",
            t->crd ? "" : ", application/strategic-merge-patch+json");
        ks_status(resp, 415, "UnsupportedMediaType", m, NULL);
        return;
    }
    if (kind == P_SMP && t->crd) {
        ks_status(resp, 415, "UnsupportedMediaType",
                  "the body of the request was in an unknown format - accepted media types "
                  "include: application/json-patch+json, application/merge-patch+json, "
                  "application/apply-patch+yaml",
                  NULL);
        return;
    }
    struct ksim_request yreq = *req;
    yreq.content_type = kind == P_APPLY ? "application/yaml" : "application/json";
    json_t *patch = parse_body(ks, &yreq, false, resp);
    if (!patch)
        return;
    if (kind == P_APPLY) {
        do_apply(ks, t, ns, name, old, patch, q, resp);
        return;
    }
    _cleanup_json_ json_t *p = patch;
    if (!old) {
        not_found(resp, t, name);
        return;
    }
    json_t *res = NULL;
    struct err e = {0};
    if (kind == P_MERGE) {
        if (!json_is_object(p)) {
            bad_request(resp, "json: cannot unmarshal into Go value of type "
                              "map[string]interface {}");
            return;
        }
        res = ksim_merge_patch(old, p);
    } else if (kind == P_JSON) {
        if (ksim_json_patch(old, p, &res, &e) < 0) {
            _cleanup_free_ char *m = xasprintf("the server rejected our request due to an error "
                                               "in our request: %s",
                                               err_msg(&e));
            ks_status(resp, 422, "Invalid", m, details(t, name));
            return;
        }
    } else {
        if (ksim_strategic_merge_patch(old, p, &res, &e) < 0) {
            bad_request(resp, err_msg(&e));
            return;
        }
    }
    if (!json_is_object(res)) {
        json_decref(res);
        bad_request(resp, "the patch produced a non-object");
        return;
    }
    const char *prv = jstr(res, "metadata.resourceVersion");
    if (prv && !streq_ptr(prv, jstr(old, "metadata.resourceVersion"))) {
        json_decref(res);
        conflict(resp, t, name);
        return;
    }
    do_update(ks, t, old, res, sub, dry_run(q), resp);
}

/* ---- the scale subresource (autoscaling/v1 Scale) ---------------------------------------- */

static json_t *scale_of(struct ks_type *t, json_t *obj)
{
    (void)t;
    struct sbuf sel;
    sbuf_init(&sel, 1u << 16);
    const char *k;
    json_t *v;
    json_object_foreach (jpath(obj, "spec.selector.matchLabels"), k, v)
        sbuf_printf(&sel, "%s%s=%s", sel.len ? "," : "", k, json_string_value(v) ?: "");
    json_t *rep = jpath(obj, "spec.replicas");
    json_t *meta = json_object();
    const char *keep[] = {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"};
    for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
        if (json_object_get(json_object_get(obj, "metadata"), keep[i]))
            json_object_set(meta, keep[i],
                            json_object_get(json_object_get(obj, "metadata"), keep[i]));
    json_t *sc =
        json_pack("{s:s,s:s,s:o,s:{s:I},s:{s:I,s:s}}", "kind", "Scale", "apiVersion",
                  "autoscaling/v1", "metadata", meta, "spec", "replicas",
                  (json_int_t)(json_is_integer(rep) ? json_integer_value(rep) : 1), "status",
                  "replicas", (json_int_t)json_integer_value(jpath(obj, "status.replicas")),
                  "selector", sel.data ? sel.data : "");
    sbuf_free(&sel);
    return sc;
}

static void do_scale(struct ksim *ks, struct ks_type *t, json_t *cur, const char *method,
                     const struct ksim_request *req, json_t *q, struct ksim_response *resp)
{
    json_t *sc = scale_of(t, cur);
    if (streq(method, "GET")) {
        ks_json_response(resp, 200, sc);
        return;
    }
    json_t *want = NULL;
    if (streq(method, "PUT")) {
        want = parse_body(ks, req, true, resp);
    } else if (streq(method, "PATCH")) {
        const char *ct = req->content_type ? req->content_type : "";
        struct ksim_request jreq = *req;
        jreq.content_type = "application/json";
        json_t *p = NULL;
        if (!str_has_prefix(ct, "application/merge-patch+json") &&
            !str_has_prefix(ct, "application/strategic-merge-patch+json") &&
            !str_has_prefix(ct, "application/json-patch+json"))
            ks_status(resp, 415, "UnsupportedMediaType",
                      "the body of the request was in an unknown format - accepted media types "
                      "include: application/json-patch+json, application/merge-patch+json, "
                      "application/strategic-merge-patch+json",
                      NULL);
        else
            p = parse_body(ks, &jreq, false, resp);
        struct err e = {0};
        if (p && str_has_prefix(ct, "application/json-patch+json")) {
            if (ksim_json_patch(sc, p, &want, &e) < 0) {
                ks_status(resp, 422, "Invalid", err_msg(&e), NULL);
                want = NULL;
            }
        } else if (p && json_is_object(p)) {
            want = ksim_merge_patch(sc, p);
        } else if (p) {
            bad_request(resp, "json: cannot unmarshal into Go value of type autoscaling.Scale");
        }
        json_decref(p);
    } else {
        ks_status(resp, 405, "MethodNotAllowed",
                  "the server does not allow this method on the requested resource", NULL);
    }
    json_decref(sc);
    if (!want)
        return;
    json_t *rep = jpath(want, "spec.replicas");
    const char *rv = jstr(want, "metadata.resourceVersion");
    if (rv && rv[0] && !streq_ptr(rv, jstr(cur, "metadata.resourceVersion"))) {
        conflict(resp, t, ks_obj_name(cur));
    } else if (!json_is_integer(rep) || json_integer_value(rep) < 0) {
        json_t *causes = json_array();
        add_cause(causes, "FieldValueInvalid", "spec.replicas",
                  "Invalid value: must be greater than or equal to 0");
        invalid(resp, t, ks_obj_name(cur), causes);
    } else {
        json_t *n = json_deep_copy(cur);
        json_object_set(jensure(n, "spec"), "replicas", rep);
        struct ksim_response r2 = {0};
        do_update(ks, t, cur, n, NULL, dry_run(q), &r2);
        json_t *now = ks_get(t, ks_obj_ns(cur), ks_obj_name(cur));
        if (r2.code == 200 && now)
            ks_json_response(resp, 200, scale_of(t, now));
        else {
            resp->code = r2.code;
            resp->content_type = r2.content_type;
            free(resp->body);
            resp->body = steal_ptr(&r2.body);
            resp->body_len = r2.body_len;
            json_decref(resp->json);
            resp->json = steal_ptr(&r2.json);
        }
        ksim_response_free(&r2);
    }
    json_decref(want);
}

/* ---- routing ------------------------------------------------------------------------------ */

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

static void handle_locked(struct ksim *ks, const struct ksim_request *req,
                          struct ksim_response *resp)
{
    if (ks_discovery(ks, req, resp))
        return;
    strlcpy_s(resp->verb, "unknown", sizeof(resp->verb));
    /* split the path */
    const char *seg[12];
    size_t seglen[12], n = 0;
    const char *p = req->path ? req->path : "";
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        if (n == ARRAY_SIZE(seg)) {
            not_found_resource(resp);
            return;
        }
        seg[n] = s;
        seglen[n++] = (size_t)(p - s);
    }
    char *parts[12] = {0};
    for (size_t i = 0; i < n; i++)
        parts[i] = xstrndup(seg[i], seglen[i]);
    _cleanup_json_ json_t *q = query_parse(req->query);
    const char *group = NULL, *version = NULL;
    size_t i = 0;
    if (n >= 2 && streq(parts[0], "api")) {
        group = "";
        version = parts[1];
        i = 2;
    } else if (n >= 3 && streq(parts[0], "apis")) {
        group = parts[1];
        version = parts[2];
        i = 3;
    }
    bool watch = qtrue(q, "watch");
    if (group && i < n && streq(parts[i], "watch")) {
        watch = true;
        i++;
    }
    const char *ns = NULL, *resource = NULL, *name = NULL, *sub = NULL;
    size_t rest = n - i;
    if (!group || rest == 0) {
        not_found_resource(resp);
        goto out;
    }
    if (streq(parts[i], "namespaces") && rest >= 3 &&
        !(rest == 3 && (streq(parts[i + 2], "status") || streq(parts[i + 2], "finalize")))) {
        ns = parts[i + 1];
        i += 2;
        rest -= 2;
    }
    resource = parts[i];
    if (rest >= 2)
        name = parts[i + 1];
    if (rest >= 3)
        sub = parts[i + 2];
    if (rest > 3) {
        not_found_resource(resp);
        goto out;
    }
    struct ks_type *t = ks_type_find(ks, group, version, resource);
    if (!t || (ns && !t->namespaced)) {
        not_found_resource(resp);
        goto out;
    }
    if (sub && !streq(sub, "status")) {
        bool ok = false;
        const char *subs = t->extra_sub;
        size_t sl = strlen(sub);
        for (const char *s = subs; *s;) {
            const char *c = strchr(s, ',');
            size_t l = c ? (size_t)(c - s) : strlen(s);
            if (l == sl && !strncmp(s, sub, l))
                ok = true;
            s += l + (c ? 1 : 0);
        }
        if (!ok) {
            not_found_resource(resp);
            goto out;
        }
    } else if (sub && !t->has_status) {
        not_found_resource(resp);
        goto out;
    }
    if (t->namespaced && name && !ns) {
        not_found_resource(resp);
        goto out;
    }
    const char *m = req->method ? req->method : "";
    json_t *cur = name ? ks_get(t, ns ? ns : "", name) : NULL;
    if (sub && streq(sub, "scale")) {
        set_verb(resp, streq(m, "GET") ? "get" : streq(m, "PUT") ? "update" : "patch", t, sub);
        if (!cur)
            not_found(resp, t, name);
        else
            do_scale(ks, t, cur, m, req, q, resp);
        goto out;
    }
    if (streq(m, "GET")) {
        if (name && !watch) {
            set_verb(resp, "get", t, sub);
            if (!cur)
                not_found(resp, t, name);
            else if (wants_table(req)) {
                json_t *one = json_pack("[O]", cur);
                ks_json_response(resp, 200, ks_table(ks, t, one, true));
                json_decref(one);
            } else
                ks_json_response(resp, 200, json_incref(cur));
            goto out;
        }
        struct err e = {0};
        struct ksim_selector *ls = ksim_label_selector_parse(qget(q, "labelSelector"), &e);
        if (!ls) {
            set_verb(resp, watch ? "watch" : "list", t, NULL);
            bad_request(resp, err_msg(&e));
            goto out;
        }
        _cleanup_free_ char *fsel_s = NULL;
        if (name)
            fsel_s = xasprintf("metadata.name=%s%s%s", name, qget(q, "fieldSelector") ? "," : "",
                               qget(q, "fieldSelector") ?: "");
        struct ksim_selector *fs =
            ks_field_selector_parse(fsel_s ? fsel_s : qget(q, "fieldSelector"), t, &e);
        if (!fs) {
            ksim_selector_free(ls);
            set_verb(resp, watch ? "watch" : "list", t, NULL);
            bad_request(resp, err_msg(&e));
            goto out;
        }
        if (rv_too_large(ks, q, resp)) {
            set_verb(resp, watch ? "watch" : "list", t, NULL);
            ksim_selector_free(ls);
            ksim_selector_free(fs);
        } else if (watch) {
            set_verb(resp, "watch", t, NULL);
            start_watch(ks, t, ns, q, req, ls, fs, resp);
        } else {
            set_verb(resp, "list", t, NULL);
            do_list(ks, t, ns, q, req, ls, fs, resp);
            ksim_selector_free(ls);
            ksim_selector_free(fs);
        }
        goto out;
    }
    if (streq(m, "POST")) {
        if (name && sub && streq(sub, "binding") && streq(t->plural, "pods") && !t->crd) {
            set_verb(resp, "create", t, sub);
            json_t *b = parse_body(ks, req, true, resp);
            if (!b)
                goto out;
            const char *node = jstr(b, "target.name");
            if (!cur) {
                not_found(resp, t, name);
            } else if (!node || !node[0]) {
                json_t *causes = json_array();
                add_cause(causes, "FieldValueRequired", "target.name", "Required value");
                invalid(resp, t, name, causes);
            } else if (jstr(cur, "spec.nodeName")) {
                _cleanup_free_ char *msg = xasprintf("pod %s is already assigned to node \"%s\"",
                                                     name, jstr(cur, "spec.nodeName"));
                ks_status(resp, 409, "Conflict", msg, details(t, name));
            } else {
                json_t *bound = json_deep_copy(cur);
                json_object_set_new(jensure(bound, "spec"), "nodeName", json_string(node));
                char ts[40];
                ks_now_str(ks, ts, sizeof(ts));
                json_object_set_new(jensure(bound, "status"), "conditions",
                                    json_pack("[{s:s,s:s,s:n,s:s}]", "type", "PodScheduled",
                                              "status", "True", "lastProbeTime",
                                              "lastTransitionTime", ts));
                ks_commit(ks, t, bound, KS_MODIFIED, cur);
                ks_status(resp, 201, "", "", NULL);
            }
            json_decref(b);
            goto out;
        }
        if (name && sub && streq(sub, "eviction") && streq(t->plural, "pods") && !t->crd) {
            set_verb(resp, "create", t, sub);
            json_t *ev = parse_body(ks, req, true, resp);
            if (!ev)
                goto out;
            const char *evn = jstr(ev, "metadata.name");
            if (evn && !streq(evn, name)) {
                bad_request(resp, "name in URL does not match name in Eviction object");
            } else if (!cur) {
                not_found(resp, t, name);
            } else {
                ks_evict(ks, cur, resp);
            }
            json_decref(ev);
            goto out;
        }
        if (name) {
            set_verb(resp, "create", t, sub);
            ks_status(resp, 405, "MethodNotAllowed",
                      "the server does not allow this method on the requested resource", NULL);
            goto out;
        }
        set_verb(resp, "create", t, NULL);
        json_t *obj = parse_body(ks, req, true, resp);
        if (!obj)
            goto out;
        if (t->namespaced && !ns) {
            const char *bns = jstr(obj, "metadata.namespace");
            if (!bns) {
                json_decref(obj);
                not_found_resource(resp);
                goto out;
            }
            ns = bns;
            _cleanup_free_ char *nsc = xstrdup(bns);
            do_create(ks, t, nsc, obj, q, resp);
            goto out;
        }
        do_create(ks, t, ns ? ns : "", obj, q, resp);
        goto out;
    }
    if (!name) {
        if (streq(m, "DELETE")) {
            set_verb(resp, "deletecollection", t, NULL);
            struct err e = {0};
            _cleanup_(ksim_selector_freep) struct ksim_selector *ls =
                ksim_label_selector_parse(qget(q, "labelSelector"), &e);
            if (!ls) {
                bad_request(resp, err_msg(&e));
                goto out;
            }
            _cleanup_(ksim_selector_freep) struct ksim_selector *fs =
                ks_field_selector_parse(qget(q, "fieldSelector"), t, &e);
            if (!fs) {
                bad_request(resp, err_msg(&e));
                goto out;
            }
            const char *last;
            size_t rem;
            char **keys;
            json_t *items = collect(t, ns, ls, fs, NULL, 0, &last, &rem, &keys);
            free(keys);
            size_t k;
            json_t *o;
            json_array_foreach (items, k, o) {
                if (!dry_run(q))
                    ks_delete_obj(ks, t, o, qget(q, "propagationPolicy"));
            }
            _cleanup_free_ char *gv = ks_type_gv(t);
            _cleanup_free_ char *lk = xasprintf("%sList", t->kind);
            ks_json_response(resp, 200,
                             json_pack("{s:s,s:s,s:{},s:o}", "kind", lk, "apiVersion", gv,
                                       "metadata", "items", items));
            goto out;
        }
        set_verb(resp,
                 streq(m, "PUT")     ? "update"
                 : streq(m, "PATCH") ? "patch"
                                     : "unknown",
                 t, NULL);
        ks_status(resp, 405, "MethodNotAllowed",
                  "the server does not allow this method on the requested resource", NULL);
        goto out;
    }
    if (streq(m, "PUT")) {
        set_verb(resp, "update", t, sub);
        json_t *obj = parse_body(ks, req, true, resp);
        if (!obj)
            goto out;
        const char *bn = jstr(obj, "metadata.name");
        if (!bn || !streq(bn, name)) {
            _cleanup_free_ char *msg =
                xasprintf("the name of the object (%s) does not match the name on the URL (%s)",
                          bn ? bn : "", name);
            bad_request(resp, msg);
            json_decref(obj);
            goto out;
        }
        if (!cur) {
            json_decref(obj);
            not_found(resp, t, name);
            goto out;
        }
        const char *rv = jstr(obj, "metadata.resourceVersion");
        if (rv && rv[0] && !streq_ptr(rv, jstr(cur, "metadata.resourceVersion"))) {
            json_decref(obj);
            conflict(resp, t, name);
            goto out;
        }
        do_update(ks, t, cur, obj, sub, dry_run(q), resp);
        goto out;
    }
    if (streq(m, "PATCH")) {
        set_verb(resp, "patch", t, sub);
        do_patch(ks, t, ns ? ns : "", name, cur, sub, req, q, resp);
        goto out;
    }
    if (streq(m, "DELETE")) {
        set_verb(resp, "delete", t, sub);
        if (!cur)
            not_found(resp, t, name);
        else
            do_delete(ks, t, cur, req, q, resp);
        goto out;
    }
    ks_status(resp, 405, "MethodNotAllowed",
              "the server does not allow this method on the requested resource", NULL);
out:
    for (size_t k = 0; k < n; k++)
        free(parts[k]);
}

void ksim_handle(struct ksim *ks, const struct ksim_request *req, struct ksim_response *resp)
{
    memset(resp, 0, sizeof(*resp));
    pthread_mutex_lock(&ks->lock);
    handle_locked(ks, req, resp);
    if (!resp->code)
        not_found_resource(resp);
    pthread_mutex_unlock(&ks->lock);
    if (resp->json) {
        resp->body = json_dumps(resp->json, JSON_COMPACT);
        if (!resp->body)
            resp->body = xstrdup("{}");
        resp->body_len = strlen(resp->body);
        json_decref(resp->json);
        resp->json = NULL;
    }
}

void ksim_response_free(struct ksim_response *resp)
{
    if (!resp)
        return;
    free(resp->body);
    resp->body = NULL;
    json_decref(resp->json);
    resp->json = NULL;
}
