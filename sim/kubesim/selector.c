/* SPDX-License-Identifier: Apache-2.0 */
/* Label and field selectors, parsed and matched as the API server does. */
#include <ctype.h>
#include <string.h>

#include "kubesim-internal.h"

void ksim_selector_free(struct ksim_selector *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->reqs[i].key);
        for (size_t j = 0; j < s->reqs[i].nvals; j++)
            free(s->reqs[i].vals[j]);
        free(s->reqs[i].vals);
    }
    free(s->reqs);
    free(s);
}

static struct ks_req *sel_add(struct ksim_selector *s, const char *key, size_t keylen, int op)
{
    s->reqs = xrealloc(s->reqs, (s->n + 1) * sizeof(*s->reqs));
    struct ks_req *r = &s->reqs[s->n++];
    memset(r, 0, sizeof(*r));
    r->key = xstrndup(key, keylen);
    r->op = op;
    return r;
}

static void req_add_val(struct ks_req *r, const char *v, size_t n)
{
    r->vals = xrealloc(r->vals, (r->nvals + 1) * sizeof(char *));
    r->vals[r->nvals++] = xstrndup(v, n);
}

/* A character of a label key or value token, as the selector lexer reads it. */
static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

static void skip_ws(const char **p)
{
    while (**p == ' ' || **p == '\t')
        (*p)++;
}

static size_t scan_ident(const char *p)
{
    size_t n = 0;
    while (p[n] && (name_char(p[n]) || p[n] == '/'))
        n++;
    return n;
}

struct ksim_selector *ksim_label_selector_parse(const char *s, struct err *e)
{
    struct ksim_selector *sel = xcalloc(1, sizeof(*sel));
    const char *p = s ? s : "";
    skip_ws(&p);
    if (!*p)
        return sel;
    for (;;) {
        skip_ws(&p);
        bool neg = false;
        if (*p == '!') {
            neg = true;
            p++;
            skip_ws(&p);
        }
        size_t kl = scan_ident(p);
        if (kl == 0) {
            err_set(e, -EINVAL, "unable to parse requirement: found '%s', expected: identifier",
                    *p ? p : "end of string");
            goto fail;
        }
        _cleanup_free_ char *key = xstrndup(p, kl);
        if (!kobj_valid_qualified_name(key)) {
            err_set(e, -EINVAL,
                    "unable to parse requirement: key: Invalid value: \"%s\": name part must "
                    "consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                    "with an alphanumeric character",
                    key);
            goto fail;
        }
        p += kl;
        skip_ws(&p);
        if (neg) {
            sel_add(sel, key, kl, KS_OP_NOTEXISTS);
        } else if (*p == ',' || !*p) {
            sel_add(sel, key, kl, KS_OP_EXISTS);
        } else if (*p == '=' || (*p == '!' && p[1] == '=')) {
            int op = *p == '!' ? KS_OP_NEQ : KS_OP_EQ;
            p += (*p == '!' || p[1] == '=') ? 2 : 1;
            skip_ws(&p);
            size_t vl = 0;
            while (p[vl] && p[vl] != ',' && p[vl] != ' ' && p[vl] != '\t')
                vl++;
            _cleanup_free_ char *val = xstrndup(p, vl);
            if (!kobj_valid_label_value(val) || strchr(val, '=') || strchr(val, '!') ||
                strchr(val, '(') || strchr(val, ')')) {
                err_set(e, -EINVAL,
                        "unable to parse requirement: values[0][%s]: Invalid value: \"%s\": a "
                        "valid label must be an empty string or consist of alphanumeric "
                        "characters, '-', '_' or '.', and must start and end with an "
                        "alphanumeric character",
                        key, val);
                goto fail;
            }
            req_add_val(sel_add(sel, key, kl, op), val, vl);
            p += vl;
        } else if ((str_has_prefix(p, "in") && !name_char(p[2])) ||
                   (str_has_prefix(p, "notin") && !name_char(p[5]))) {
            int op = p[0] == 'i' ? KS_OP_IN : KS_OP_NOTIN;
            p += op == KS_OP_IN ? 2 : 5;
            skip_ws(&p);
            if (*p != '(') {
                err_set(e, -EINVAL, "found '%s', expected: '('", *p ? p : "end of string");
                goto fail;
            }
            p++;
            struct ks_req *r = sel_add(sel, key, kl, op);
            for (;;) {
                skip_ws(&p);
                size_t vl = 0;
                while (p[vl] && name_char(p[vl]))
                    vl++;
                _cleanup_free_ char *val = xstrndup(p, vl);
                if (!kobj_valid_label_value(val)) {
                    err_set(e, -EINVAL, "unable to parse requirement: invalid label value: \"%s\"",
                            val);
                    goto fail;
                }
                req_add_val(r, val, vl);
                p += vl;
                skip_ws(&p);
                if (*p == ',') {
                    p++;
                    continue;
                }
                if (*p == ')') {
                    p++;
                    break;
                }
                err_set(e, -EINVAL, "found '%s', expected: ',', or ')'", *p ? p : "end of string");
                goto fail;
            }
        } else {
            err_set(e, -EINVAL,
                    "unable to parse requirement: found '%s', expected: "
                    "'=', '!=', '==', 'in', notin'",
                    p);
            goto fail;
        }
        skip_ws(&p);
        if (!*p)
            break;
        if (*p != ',') {
            err_set(e, -EINVAL, "found '%s', expected: ',' or 'end of string'", p);
            goto fail;
        }
        p++;
    }
    return sel;
fail:
    ksim_selector_free(sel);
    return NULL;
}

struct ksim_selector *ksim_label_selector_from_json(json_t *js, struct err *e)
{
    struct ksim_selector *sel = xcalloc(1, sizeof(*sel));
    if (!json_is_object(js))
        return sel;
    const char *k;
    json_t *v;
    json_object_foreach (json_object_get(js, "matchLabels"), k, v) {
        const char *s = json_string_value(v);
        req_add_val(sel_add(sel, k, strlen(k), KS_OP_EQ), s ? s : "", s ? strlen(s) : 0);
    }
    size_t i;
    json_t *x;
    json_array_foreach (json_object_get(js, "matchExpressions"), i, x) {
        const char *key = json_string_value(json_object_get(x, "key"));
        const char *op = json_string_value(json_object_get(x, "operator"));
        int o;
        if (!key || !op) {
            err_set(e, -EINVAL, "matchExpressions[%zu]: key and operator are required", i);
            ksim_selector_free(sel);
            return NULL;
        }
        if (streq(op, "In"))
            o = KS_OP_IN;
        else if (streq(op, "NotIn"))
            o = KS_OP_NOTIN;
        else if (streq(op, "Exists"))
            o = KS_OP_EXISTS;
        else if (streq(op, "DoesNotExist"))
            o = KS_OP_NOTEXISTS;
        else {
            err_set(e, -EINVAL, "\"%s\" is not a valid label selector operator", op);
            ksim_selector_free(sel);
            return NULL;
        }
        struct ks_req *r = sel_add(sel, key, strlen(key), o);
        size_t j;
        json_t *val;
        json_array_foreach (json_object_get(x, "values"), j, val) {
            const char *s = json_string_value(val);
            if (s)
                req_add_val(r, s, strlen(s));
        }
    }
    return sel;
}

static bool req_match(const struct ks_req *r, const char *have)
{
    bool in = false;
    for (size_t i = 0; i < r->nvals && have; i++)
        if (streq(r->vals[i], have))
            in = true;
    switch (r->op) {
    case KS_OP_EQ:
    case KS_OP_IN:
        return have && in;
    case KS_OP_NEQ:
    case KS_OP_NOTIN:
        return !have || !in;
    case KS_OP_EXISTS:
        return have != NULL;
    case KS_OP_NOTEXISTS:
        return have == NULL;
    }
    return false;
}

bool ksim_selector_matches(const struct ksim_selector *sel, json_t *labels)
{
    if (!sel)
        return true;
    for (size_t i = 0; i < sel->n; i++)
        if (!req_match(&sel->reqs[i], json_string_value(json_object_get(labels, sel->reqs[i].key))))
            return false;
    return true;
}

/* ---- field selectors ---------------------------------------------------------------------- */

static const char *const pod_fields[] = {"spec.nodeName",
                                         "status.phase",
                                         "spec.restartPolicy",
                                         "spec.schedulerName",
                                         "spec.serviceAccountName",
                                         "status.podIP",
                                         "status.nominatedNodeName",
                                         "spec.hostNetwork",
                                         NULL};
static const char *const event_fields[] = {"involvedObject.kind",
                                           "involvedObject.namespace",
                                           "involvedObject.name",
                                           "involvedObject.uid",
                                           "involvedObject.apiVersion",
                                           "involvedObject.resourceVersion",
                                           "involvedObject.fieldPath",
                                           "reason",
                                           "reportingComponent",
                                           "source",
                                           "type",
                                           NULL};
static const char *const node_fields[] = {"spec.unschedulable", NULL};
static const char *const secret_fields[] = {"type", NULL};
static const char *const ns_fields[] = {"status.phase", NULL};

static bool field_supported(struct ks_type *t, const char *f)
{
    if (streq(f, "metadata.name") || (t->namespaced && streq(f, "metadata.namespace")))
        return true;
    const char *const *list = NULL;
    if (!t->crd && t->group[0] == '\0') {
        if (streq(t->plural, "pods"))
            list = pod_fields;
        else if (streq(t->plural, "events"))
            list = event_fields;
        else if (streq(t->plural, "nodes"))
            list = node_fields;
        else if (streq(t->plural, "secrets"))
            list = secret_fields;
        else if (streq(t->plural, "namespaces"))
            list = ns_fields;
    }
    for (size_t i = 0; list && list[i]; i++)
        if (streq(list[i], f))
            return true;
    return false;
}

struct ksim_selector *ks_field_selector_parse(const char *s, struct ks_type *t, struct err *e)
{
    struct ksim_selector *sel = xcalloc(1, sizeof(*sel));
    sel->is_field = true;
    const char *p = s ? s : "";
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        _cleanup_free_ char *term = xstrndup(p, n);
        p += n + (end ? 1 : 0);
        if (!term[0])
            continue;
        char *op = strstr(term, "!=");
        int o = KS_OP_NEQ;
        size_t oplen = 2;
        if (!op) {
            op = strstr(term, "==");
            o = KS_OP_EQ;
        }
        if (!op) {
            op = strchr(term, '=');
            oplen = 1;
        }
        if (!op) {
            err_set(e, -EINVAL, "invalid selector: '%s'; can't understand '%s'", s, term);
            goto fail;
        }
        *op = '\0';
        const char *field = term;
        while (*field == ' ')
            field++;
        if (!field_supported(t, field)) {
            err_set(e, -EINVAL, "field label not supported: %s", field);
            goto fail;
        }
        const char *val = op + oplen;
        req_add_val(sel_add(sel, field, strlen(field), o), val, strlen(val));
    }
    return sel;
fail:
    ksim_selector_free(sel);
    return NULL;
}

static const char *field_value(json_t *obj, const char *f, char *buf, size_t n)
{
    if (streq(f, "source"))
        f = "source.component";
    json_t *v = kobj_path(obj, f);
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_boolean(v))
        return json_is_true(v) ? "true" : "false";
    if (json_is_integer(v)) {
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
        return buf;
    }
    if (streq(f, "spec.unschedulable") || streq(f, "spec.hostNetwork"))
        return "false";
    return "";
}

bool ks_field_matches(const struct ksim_selector *sel, json_t *obj)
{
    if (!sel)
        return true;
    for (size_t i = 0; i < sel->n; i++) {
        char buf[32];
        const char *have = field_value(obj, sel->reqs[i].key, buf, sizeof(buf));
        bool eq = streq(have, sel->reqs[i].vals[0]);
        if (eq != (sel->reqs[i].op == KS_OP_EQ))
            return false;
    }
    return true;
}
