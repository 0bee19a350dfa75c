/* SPDX-License-Identifier: Apache-2.0 */
/* The route parser: a request path and query into group, version, resource, namespace, name,
 * subresource and watch, as the API server's request info resolver splits them. */
#include <string.h>

#include "ks-http.h"

json_t *ks_query_parse(const char *q)
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

const char *ks_qget(json_t *q, const char *k)
{
    return json_string_value(json_object_get(q, k));
}

bool ks_qtrue(json_t *q, const char *k)
{
    const char *v = ks_qget(q, k);
    bool b = false;
    return v && (parse_bool(v, &b) == 0 ? b : v[0] == '\0');
}

bool ks_dry_run(json_t *q)
{
    const char *d = ks_qget(q, "dryRun");
    return d && streq(d, "All");
}

void ks_route_free(struct ks_route *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->parts[i]);
    json_decref(r->query);
    *r = (struct ks_route){0};
}

int ks_route_parse(const char *path, const char *query, struct ks_route *ret)
{
    struct ks_route *r = ret;
    *r = (struct ks_route){0};
    r->query = ks_query_parse(query);
    const char *p = path ? path : "";
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        if (r->n == KS_ROUTE_MAX_SEGMENTS)
            return -ENOENT;
        r->parts[r->n++] = xstrndup(s, (size_t)(p - s));
    }
    char **parts = r->parts;
    size_t n = r->n, i = 0;
    if (n >= 2 && streq(parts[0], "api")) {
        r->group = "";
        r->version = parts[1];
        i = 2;
    } else if (n >= 3 && streq(parts[0], "apis")) {
        r->group = parts[1];
        r->version = parts[2];
        i = 3;
    }
    r->watch = ks_qtrue(r->query, "watch");
    if (r->group && i < n && streq(parts[i], "watch")) {
        r->watch = true;
        i++;
    }
    size_t rest = n - i;
    if (!r->group || rest == 0)
        return -ENOENT;
    /* namespaces/<ns>/<resource>..., but not namespaces/<name>/status or /finalize */
    if (streq(parts[i], "namespaces") && rest >= 3 &&
        !(rest == 3 && (streq(parts[i + 2], "status") || streq(parts[i + 2], "finalize")))) {
        r->ns = parts[i + 1];
        i += 2;
        rest -= 2;
    }
    r->resource = parts[i];
    if (rest >= 2)
        r->name = parts[i + 1];
    if (rest >= 3)
        r->sub = parts[i + 2];
    if (rest > 3)
        return -ENOENT;
    return 0;
}
