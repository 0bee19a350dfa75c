/* SPDX-License-Identifier: Apache-2.0 */
/* Typed results of object operations (struct ks_status) and the API server's standard ones. */
#include <string.h>

#include "ks-objects.h"

void ks_status_clear(struct ks_status *st)
{
    if (!st)
        return;
    free(st->message);
    json_decref(st->details);
    *st = (struct ks_status){0};
}

static int errno_of_code(int code)
{
    switch (code) {
    case 400:
    case 422:
        return -EINVAL;
    case 403:
        return -EACCES;
    case 404:
        return -ENOENT;
    case 405:
        return -EOPNOTSUPP;
    case 409:
        return -EEXIST;
    case 413:
        return -E2BIG;
    case 415:
        return -EPROTONOSUPPORT;
    case 429:
        return -EAGAIN;
    case 504:
        return -ETIMEDOUT;
    default:
        return code < 400 ? 0 : -EIO;
    }
}

int ks_status_vset(struct ks_status *st, int code, const char *reason, json_t *details,
                   const char *fmt, va_list ap)
{
    ks_status_clear(st);
    st->code = code;
    st->reason = reason;
    st->details = details;
    struct sbuf b;
    sbuf_init(&b, 1u << 16);
    sbuf_vaddf(&b, fmt, ap);
    st->message = ks_text_take(&b);
    return errno_of_code(code);
}

int ks_status_set(struct ks_status *st, int code, const char *reason, json_t *details,
                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = ks_status_vset(st, code, reason, details, fmt, ap);
    va_end(ap);
    return r;
}

int ks_status_ok(struct ks_status *st, int code, json_t *details)
{
    return ks_status_set(st, code, "", details, "%s", "");
}

json_t *ks_status_details(struct ks_type *t, const char *name)
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

int ks_not_found(struct ks_status *st, struct ks_type *t, const char *name)
{
    _cleanup_free_ char *q = ks_type_qualified(t);
    return ks_status_set(st, 404, "NotFound", ks_status_details(t, name), "%s \"%s\" not found", q,
                         name);
}

int ks_not_found_resource(struct ks_status *st)
{
    return ks_status_set(st, 404, "NotFound", json_object(), "%s",
                         "the server could not find the requested resource");
}

int ks_bad_request(struct ks_status *st, const char *msg)
{
    return ks_status_set(st, 400, "BadRequest", NULL, "%s", msg);
}

int ks_method_not_allowed(struct ks_status *st)
{
    return ks_status_set(st, 405, "MethodNotAllowed", NULL, "%s",
                         "the server does not allow this method on the requested resource");
}

int ks_conflict(struct ks_status *st, struct ks_type *t, const char *name)
{
    _cleanup_free_ char *q = ks_type_qualified(t);
    return ks_status_set(st, 409, "Conflict", ks_status_details(t, name),
                         "Operation cannot be fulfilled on %s \"%s\": the object has been "
                         "modified; please apply your changes to the latest version and try again",
                         q, name);
}

int ks_invalid(struct ks_status *st, struct ks_type *t, const char *name, json_t *causes)
{
    struct sbuf b;
    sbuf_init(&b, 1u << 16);
    /* the qualified kind, as the API server names it: "DaemonSet.apps", "Pod" */
    sbuf_addf(&b, "%s%s%s \"%s\" is invalid: ", t->kind, t->group[0] ? "." : "", t->group, name);
    size_t i;
    json_t *c;
    if (json_array_size(causes) > 1)
        sbuf_adds(&b, "[");
    json_array_foreach (causes, i, c) {
        sbuf_addf(&b, "%s%s: %s", i ? ", " : "", kobj_str(c, "field"), kobj_str(c, "message"));
    }
    if (json_array_size(causes) > 1)
        sbuf_adds(&b, "]");
    _cleanup_free_ char *msg = ks_text_take(&b);
    json_t *d = json_object();
    json_object_set_new(d, "name", json_string(name));
    if (t->group[0])
        json_object_set_new(d, "group", json_string(t->group));
    json_object_set_new(d, "kind", json_string(t->kind));
    json_object_set_new(d, "causes", causes);
    return ks_status_set(st, 422, "Invalid", d, "%s", msg);
}
