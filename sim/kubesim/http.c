/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP side of kubesim's core: responses, rendering a ks_status as a Kubernetes Status
 * object, request bodies (JSON, YAML, protobuf) and query parameters. */
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
    if (ct && str_has_prefix(ct, "application/vnd.kubernetes.protobuf")) {
        const char *kind;
        v = ks_pb_decode(req->body, req->body_len, &kind);
        if (!v)
            v = ks_pb_decode_auth(req->body, req->body_len);
        if (v)
            return v;
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

bool ks_wants_table(const struct ksim_request *req)
{
    return req->accept && strstr(req->accept, "as=Table") && strstr(req->accept, "meta.k8s.io");
}
