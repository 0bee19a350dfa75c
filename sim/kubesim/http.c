/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP side of kubesim's core: responses, rendering a ks_status as a Kubernetes Status
 * object, request bodies (JSON, YAML, protobuf) and query parameters. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "ks-http.h"
#include "kubesim-pb.h"

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

void ks_render_status(struct ksim_response *resp, const struct ks_status *st)
{
    int code = st->code ? st->code : 500;
    const char *reason = st->reason ? st->reason : "";
    const char *message = st->message ? st->message : "";
    json_t *o = json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:i}", "kind", "Status", "apiVersion", "v1",
                          "metadata", "status", code < 300 ? "Success" : "Failure", "message",
                          message, "reason", reason, "code", code);
    if (!reason[0])
        json_object_del(o, "reason");
    if (!message[0])
        json_object_del(o, "message");
    if (st->details)
        json_object_set(o, "details", st->details);
    ks_json_response(resp, code, o);
}

void ks_respond(struct ksim_response *resp, int r, json_t *obj, const struct ks_status *st)
{
    if (r < 0 || !obj) {
        json_decref(obj);
        ks_render_status(resp, st);
        return;
    }
    ks_json_response(resp, st->code ? st->code : 200, obj);
}

/* ---- bodies ------------------------------------------------------------------------------- */

static bool is_yaml(const char *ct)
{
    return ct && (strstr(ct, "yaml") != NULL);
}

json_t *ks_parse_body(struct ksim *ks, const struct ksim_request *req, bool want_object,
                      struct ks_status *st)
{
    json_t *v = NULL;
    if (req->body_len > ks->opts.max_body) {
        ks_status_set(st, 413, "RequestEntityTooLarge", NULL,
                      "Request entity too large: limit is %zu", ks->opts.max_body);
        return NULL;
    }
    if (!req->body || req->body_len == 0) {
        ks_bad_request(st, "the body of the request was empty");
        return NULL;
    }
    const char *ct = req->content_type;
    if (ct && str_has_prefix(ct, KS_PB_MEDIA_TYPE)) {
        struct err e = {0};
        int r = ks_pb_decode(req->body, req->body_len, &v, &e);
        if (r == 0)
            return v;
        /* a body without the envelope, or a kind with no message (custom resources, as the
         * API server serves them): the unsupported media type below */
        if (r != -ENOENT && req->body_len >= 4 && !memcmp(req->body, "k8s", 4)) {
            ks_bad_request(st, err_msg(&e));
            return NULL;
        }
    }
    if (ct && ct[0] && !str_has_prefix(ct, "application/json") && !is_yaml(ct) &&
        !str_has_prefix(ct, "*/*")) {
        ks_status_set(st, 415, "UnsupportedMediaType", NULL, "%s",
                      "the body of the request was in an unknown format - accepted media types "
                      "include: application/json, application/yaml");
        return NULL;
    }
    if (is_yaml(req->content_type)) {
        struct err e = {0};
        if (yaml_parse_one(req->body, req->body_len, "body", &v, &e) < 0) {
            _cleanup_free_ char *m = xasprintf("error converting YAML to JSON: %s", err_msg(&e));
            ks_bad_request(st, m);
            return NULL;
        }
    } else {
        json_error_t je;
        v = json_loadb(req->body, req->body_len, JSON_DECODE_ANY, &je);
        if (!v) {
            _cleanup_free_ char *m =
                xasprintf("couldn't get version/kind; json parse error: %s", je.text);
            ks_bad_request(st, m);
            return NULL;
        }
    }
    if (want_object && !json_is_object(v)) {
        json_decref(v);
        ks_bad_request(st, "couldn't get version/kind; json parse error: json: cannot unmarshal "
                           "non-object into Go value of type struct");
        return NULL;
    }
    return v;
}

/* ---- content negotiation ------------------------------------------------------------------ */

enum media { MEDIA_JSON, MEDIA_PROTOBUF, MEDIA_NONE };

/* The Accept header's choice, as the API server negotiates it: the clause with the highest q
 * (a named type before a wildcard, then the first of equals) among JSON (application/json, yaml,
 * wildcards) and protobuf, protobuf only when the object has a message (pb_ok). A header naming
 * nothing kubesim writes gets JSON, as before; MEDIA_NONE when only protobuf was acceptable and the
 * object has no message. */
static enum media negotiate(const char *accept, bool pb_ok)
{
    if (!accept || !accept[0])
        return MEDIA_JSON;
    double best_q = -1;
    int best_spec = -1;
    enum media best = MEDIA_JSON;
    bool pb_asked = false;
    for (const char *p = accept; *p;) {
        size_t n = strcspn(p, ",");
        _cleanup_free_ char *clause = xstrndup(p, n);
        p += n + (p[n] == ',');
        char *save = NULL;
        char *type = strtok_r(clause, ";", &save);
        if (!type)
            continue;
        type += strspn(type, " \t");
        type[strcspn(type, " \t")] = '\0';
        double q = 1;
        bool as = false;
        for (char *prm; (prm = strtok_r(NULL, ";", &save));) {
            prm += strspn(prm, " \t");
            if (str_has_prefix(prm, "q="))
                q = strtod(prm + 2, NULL);
            else if (str_has_prefix(prm, "as="))
                as = true;
        }
        if (q <= 0 || as)
            continue;
        enum media m;
        if (strcasecmp(type, KS_PB_MEDIA_TYPE) == 0) {
            pb_asked = true;
            if (!pb_ok)
                continue;
            m = MEDIA_PROTOBUF;
        } else if (strcasecmp(type, "application/json") == 0 || strcasecmp(type, "*/*") == 0 ||
                   strcasecmp(type, "application/*") == 0 || strcasestr(type, "yaml")) {
            m = MEDIA_JSON;
        } else {
            continue;
        }
        /* at equal q a named type beats a wildcard, as goautoneg orders them */
        int spec = strchr(type, '*') ? (type[0] == '*' ? 0 : 1) : 2;
        if (q > best_q || (q == best_q && spec > best_spec)) {
            best_q = q;
            best_spec = spec;
            best = m;
        }
    }
    if (best_q < 0 && pb_asked)
        return MEDIA_NONE;
    return best;
}

bool ks_accepts_protobuf(const struct ksim_request *req, const char *api_version, const char *kind)
{
    return negotiate(req->accept, ks_pb_knows(api_version, kind)) == MEDIA_PROTOBUF;
}

bool ks_response_is_json(const struct ksim_request *req, const struct ksim_response *resp)
{
    json_t *v = resp->json;
    const char *av = json_string_value(json_object_get(v, "apiVersion"));
    const char *kind = json_string_value(json_object_get(v, "kind"));
    if (!streq_ptr(resp->content_type, "application/json") || streq_ptr(kind, "Table"))
        return true;
    return negotiate(req->accept, ks_pb_knows(av, kind)) == MEDIA_JSON;
}

void ks_response_serialize(const struct ksim_request *req, struct ksim_response *resp)
{
    json_t *v = resp->json;
    if (!v)
        return;
    resp->json = NULL;
    const char *av = json_string_value(json_object_get(v, "apiVersion"));
    const char *kind = json_string_value(json_object_get(v, "kind"));
    enum media m = MEDIA_JSON;
    if (streq_ptr(resp->content_type, "application/json") && !streq_ptr(kind, "Table"))
        m = negotiate(req->accept, ks_pb_knows(av, kind));
    if (m == MEDIA_NONE) {
        json_decref(v);
        v = json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:i}", "kind", "Status", "apiVersion", "v1",
                      "metadata", "status", "Failure", "message",
                      "only the following media types are accepted: application/json, "
                      "application/yaml",
                      "reason", "NotAcceptable", "code", 406);
        resp->code = 406;
        m = negotiate(req->accept, true);
    }
    if (m == MEDIA_PROTOBUF) {
        struct err e = {0};
        struct sbuf b;
        sbuf_init(&b, SIZE_MAX / 2);
        if (ks_pb_encode(v, &b, &e) == 0) {
            resp->body_len = b.len;
            resp->body = sbuf_steal(&b);
            resp->content_type = KS_PB_MEDIA_TYPE;
            json_decref(v);
            return;
        }
        /* an object the tables cannot carry: JSON, which every client reads */
        sbuf_free(&b);
    }
    resp->content_type = "application/json";
    resp->body = json_dumps(v, JSON_COMPACT);
    if (!resp->body)
        resp->body = xstrdup("{}");
    resp->body_len = strlen(resp->body);
    json_decref(v);
}

bool ks_wants_table(const struct ksim_request *req)
{
    return req->accept && strstr(req->accept, "as=Table") && strstr(req->accept, "meta.k8s.io");
}
