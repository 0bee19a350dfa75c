/* SPDX-License-Identifier: Apache-2.0 */
/* Structural-schema defaulting, pruning and validation of custom resources (ks-crd-schema.h).
 * Messages follow apiextensions-apiserver's conversion of kube-openapi's validation errors to
 * field errors (validation.go kubeOpenAPIResultToFieldErrors) and apimachinery's field.Error
 * rendering ("<field>: <type>: <value>: <detail>"). */
#include <ctype.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ks-crd-schema.h"
#include "util.h"

static bool str_eq(const char *a, const char *b)
{
    return strcmp(a, b) == 0;
}

struct crd_pattern {
    char *pattern; /* as written in the schema */
    regex_t re;
    bool ok; /* compiled; false: left unchecked */
    struct crd_pattern *next;
};

struct ks_crd_schema {
    json_t *root;
    struct crd_pattern *patterns;
    size_t unchecked;
};

/* ---- RE2 to POSIX ERE --------------------------------------------------------------------- */

static const char *perl_class(char c)
{
    switch (c) {
    case 'd':
        return "0-9";
    case 'w':
        return "A-Za-z0-9_";
    case 's':
        return "[:space:]";
    default:
        return NULL;
    }
}

/* Translates one bracket expression starting at p (just past '['); *end gets the position after
 * its ']'. false: not expressible. */
static bool bracket_to_ere(const char *p, const char **end, struct sbuf *out)
{
    bool neg = false, hyphen = false, close = false, caret = false;
    struct sbuf items;
    sbuf_init(&items, 4096);
    if (*p == '^') {
        neg = true;
        p++;
    }
    if (*p == ']') {
        close = true;
        p++;
    }
    bool ok = true;
    while (*p && *p != ']') {
        if (p[0] == '[' && p[1] == ':') {
            const char *e = strstr(p + 2, ":]");
            if (!e) {
                ok = false;
                break;
            }
            sbuf_add(&items, p, (size_t)(e + 2 - p));
            p = e + 2;
            continue;
        }
        if (*p == '\\') {
            char c = p[1];
            if (!c) {
                ok = false;
                break;
            }
            const char *cls = perl_class(c);
            if (cls)
                sbuf_adds(&items, cls);
            else if (c == '-')
                hyphen = true;
            else if (c == ']')
                close = true;
            else if (c == '^')
                caret = true;
            else if (c == 'n')
                sbuf_adds(&items, "\n");
            else if (c == 't')
                sbuf_adds(&items, "\t");
            else if (ispunct((unsigned char)c))
                sbuf_add(&items, &c, 1);
            else
                ok = false; /* \D \W \S \p{..} inside a class */
            p += 2;
            continue;
        }
        if (*p == '-' && (p[1] == ']' || items.len == 0)) {
            hyphen = true;
            p++;
            continue;
        }
        if (*p == '^') {
            caret = true;
            p++;
            continue;
        }
        sbuf_add(&items, p, 1);
        p++;
    }
    if (*p != ']')
        ok = false;
    if (ok && items.len == 0 && caret && !close && !hyphen)
        ok = false; /* "[\^]" alone: POSIX has no spelling for it but "\^" */
    if (ok && sbuf_check(&items) == 0) {
        sbuf_adds(out, "[");
        if (neg)
            sbuf_adds(out, "^");
        if (close)
            sbuf_adds(out, "]");
        sbuf_add(out, items.data ? items.data : "", items.len);
        if (caret)
            sbuf_adds(out, "^");
        if (hyphen)
            sbuf_adds(out, "-");
        sbuf_adds(out, "]");
        *end = p + 1;
    } else {
        ok = false;
    }
    sbuf_free(&items);
    return ok;
}

/* RE2 (Go's regexp, which kube-openapi uses) to POSIX ERE; NULL when not expressible. Lazy
 * quantifiers become greedy ones: for a match test (all a pattern does) that is the same. */
static char *re2_to_ere(const char *p)
{
    struct sbuf out;
    sbuf_init(&out, 16384);
    bool ok = true;
    while (ok && *p) {
        char c = *p;
        if (c == '\\') {
            char n = p[1];
            const char *cls = perl_class((char)tolower((unsigned char)n));
            if (cls && (n == 'd' || n == 'w' || n == 's'))
                sbuf_addf(&out, "[%s]", cls);
            else if (cls)
                sbuf_addf(&out, "[^%s]", cls);
            else if (n == 'A')
                sbuf_adds(&out, "^");
            else if (n == 'z')
                sbuf_adds(&out, "$");
            else if (n == 'n')
                sbuf_adds(&out, "\n");
            else if (n == 't')
                sbuf_adds(&out, "\t");
            else if (n && ispunct((unsigned char)n))
                sbuf_add(&out, p, 2);
            else
                ok = false;
            p += n ? 2 : 1;
            continue;
        }
        if (c == '[') {
            const char *end = NULL;
            ok = bracket_to_ere(p + 1, &end, &out);
            p = end;
            continue;
        }
        if (c == '(' && p[1] == '?') {
            if (p[2] == ':') {
                sbuf_adds(&out, "(");
                p += 3;
                continue;
            }
            ok = false;
            break;
        }
        if ((c == '*' || c == '+' || c == '?' || c == '}') && p[1] == '?') {
            sbuf_add(&out, p, 1);
            p += 2;
            continue;
        }
        sbuf_add(&out, p, 1);
        p++;
    }
    if (!ok || sbuf_check(&out) < 0) {
        sbuf_free(&out);
        return NULL;
    }
    return sbuf_steal(&out);
}

static const struct crd_pattern *pattern_find(const struct ks_crd_schema *s, const char *pat)
{
    for (const struct crd_pattern *p = s->patterns; p; p = p->next)
        if (str_eq(p->pattern, pat))
            return p;
    return NULL;
}

static void collect_patterns(struct ks_crd_schema *s, json_t *sch, int depth)
{
    if (!json_is_object(sch) || depth > 64)
        return;
    const char *pat = json_string_value(json_object_get(sch, "pattern"));
    if (pat && !pattern_find(s, pat)) {
        struct crd_pattern *p = xcalloc(1, sizeof(*p));
        p->pattern = xstrdup(pat);
        _cleanup_free_ char *ere = re2_to_ere(pat);
        p->ok = ere && regcomp(&p->re, ere, REG_EXTENDED | REG_NOSUB) == 0;
        if (!p->ok)
            s->unchecked++;
        p->next = s->patterns;
        s->patterns = p;
    }
    const char *k;
    json_t *v;
    json_object_foreach (json_object_get(sch, "properties"), k, v)
        collect_patterns(s, v, depth + 1);
    collect_patterns(s, json_object_get(sch, "items"), depth + 1);
    collect_patterns(s, json_object_get(sch, "additionalProperties"), depth + 1);
    collect_patterns(s, json_object_get(sch, "not"), depth + 1);
    const char *const comb[] = {"anyOf", "allOf", "oneOf"};
    for (size_t i = 0; i < ARRAY_SIZE(comb); i++) {
        size_t j;
        json_array_foreach (json_object_get(sch, comb[i]), j, v)
            collect_patterns(s, v, depth + 1);
    }
}

struct ks_crd_schema *ks_crd_schema_new(json_t *openapi)
{
    if (!json_is_object(openapi))
        return NULL;
    struct ks_crd_schema *s = xcalloc(1, sizeof(*s));
    s->root = json_incref(openapi);
    collect_patterns(s, openapi, 0);
    return s;
}

void ks_crd_schema_free(struct ks_crd_schema *s)
{
    if (!s)
        return;
    struct crd_pattern *p = s->patterns;
    while (p) {
        struct crd_pattern *n = p->next;
        if (p->ok)
            regfree(&p->re);
        free(p->pattern);
        free(p);
        p = n;
    }
    json_decref(s->root);
    free(s);
}

void ks_crd_schema_freep(struct ks_crd_schema **s)
{
    ks_crd_schema_free(*s);
    *s = NULL;
}

size_t ks_crd_schema_unchecked_patterns(const struct ks_crd_schema *s)
{
    return s ? s->unchecked : 0;
}

/* ---- schema accessors --------------------------------------------------------------------- */

static bool sch_flag(json_t *sch, const char *key)
{
    return json_is_true(json_object_get(sch, key));
}

/* The schema of an object's field k: its property, else additionalProperties when a schema. */
static json_t *field_schema(json_t *sch, const char *k)
{
    json_t *p = json_object_get(json_object_get(sch, "properties"), k);
    if (json_is_object(p))
        return p;
    json_t *ap = json_object_get(sch, "additionalProperties");
    return json_is_object(ap) ? ap : NULL;
}

/* ---- defaulting and pruning --------------------------------------------------------------- */

static void default_node(json_t *v, json_t *sch, int depth)
{
    if (!json_is_object(sch) || depth > 128)
        return;
    if (json_is_object(v)) {
        /* PruneNonNullableNullsWithoutDefaults, then Default */
        const char *k;
        json_t *x;
        void *tmp;
        json_object_foreach_safe (v, tmp, k, x) {
            json_t *fs = field_schema(sch, k);
            if (json_is_null(x) && fs && !sch_flag(fs, "nullable") &&
                !json_object_get(fs, "default"))
                json_object_del(v, k);
        }
        json_object_foreach (json_object_get(sch, "properties"), k, x) {
            json_t *d = json_object_get(x, "default");
            if (!d)
                continue;
            json_t *cur = json_object_get(v, k);
            if (!cur || (json_is_null(cur) && !sch_flag(x, "nullable")))
                json_object_set_new(v, k, json_deep_copy(d));
        }
        json_object_foreach (v, k, x)
            default_node(x, field_schema(sch, k), depth + 1);
    } else if (json_is_array(v)) {
        json_t *items = json_object_get(sch, "items");
        size_t i;
        json_t *x;
        json_array_foreach (v, i, x) {
            json_t *d = json_object_get(items, "default");
            if (json_is_null(x) && d && !sch_flag(items, "nullable"))
                json_array_set_new(v, i, json_deep_copy(d));
            default_node(json_array_get(v, i), items, depth + 1);
        }
    }
}

static bool is_meta_field(const char *k)
{
    return str_eq(k, "apiVersion") || str_eq(k, "kind") || str_eq(k, "metadata");
}

static void prune_node(json_t *v, json_t *sch, bool resource, int depth)
{
    if (!json_is_object(sch) || depth > 128)
        return;
    if (json_is_object(v)) {
        bool preserve = sch_flag(sch, "x-kubernetes-preserve-unknown-fields");
        bool any = json_is_true(json_object_get(sch, "additionalProperties"));
        const char *k;
        json_t *x;
        void *tmp;
        json_object_foreach_safe (v, tmp, k, x) {
            if (resource && is_meta_field(k)) {
                /* metadata is ObjectMeta, kept as the server's own code keeps it */
                if (!str_eq(k, "metadata"))
                    prune_node(x, field_schema(sch, k), false, depth + 1);
                continue;
            }
            json_t *fs = field_schema(sch, k);
            if (fs)
                prune_node(x, fs, sch_flag(fs, "x-kubernetes-embedded-resource"), depth + 1);
            else if (!preserve && !any)
                json_object_del(v, k);
        }
    } else if (json_is_array(v)) {
        json_t *items = json_object_get(sch, "items");
        size_t i;
        json_t *x;
        json_array_foreach (v, i, x)
            prune_node(x, items, sch_flag(items, "x-kubernetes-embedded-resource"), depth + 1);
    }
}

void ks_crd_schema_default(const struct ks_crd_schema *s, json_t *obj)
{
    if (s)
        default_node(obj, s->root, 0);
}

void ks_crd_schema_admit(const struct ks_crd_schema *s, json_t *obj)
{
    if (!s)
        return;
    default_node(obj, s->root, 0);
    prune_node(obj, s->root, true, 0);
}

/* ---- validation --------------------------------------------------------------------------- */

#define CRD_PATH_MAX 2048

struct vctx {
    const struct ks_crd_schema *s;
    json_t *causes;
    char path[CRD_PATH_MAX];
    size_t len;
};

/* JSON data types as kube-openapi names them. */
static const char *data_type(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

/* A Go %q of s (ASCII control characters escaped). */
static void add_quoted(struct sbuf *b, const char *s, size_t n)
{
    sbuf_adds(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            sbuf_addf(b, "\\%c", c);
        else if (c == '\n')
            sbuf_adds(b, "\\n");
        else if (c == '\t')
            sbuf_adds(b, "\\t");
        else if (c < 0x20 || c == 0x7f)
            sbuf_addf(b, "\\x%02x", c);
        else
            sbuf_add(b, &s[i], 1);
    }
    sbuf_adds(b, "\"");
}

static void add_number(struct sbuf *b, json_t *v)
{
    if (json_is_integer(v)) {
        sbuf_addf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return;
    }
    double d = json_number_value(v);
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    sbuf_adds(b, buf);
}

/* A field error's bad value as apimachinery renders it. */
static void add_value(struct sbuf *b, json_t *v)
{
    if (json_is_string(v)) {
        add_quoted(b, json_string_value(v), json_string_length(v));
    } else if (json_is_number(v)) {
        add_number(b, v);
    } else if (json_is_boolean(v)) {
        sbuf_adds(b, json_is_true(v) ? "true" : "false");
    } else if (json_is_null(v) || !v) {
        sbuf_adds(b, "\"null\"");
    } else {
        _cleanup_free_ char *d = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        sbuf_adds(b, d ? d : "");
    }
}

static void cause_at(struct vctx *c, const char *field, const char *reason, json_t *bad,
                     const char *type, const char *fmt, ...) GPUOP_PRINTF(6, 7);
/* Appends {reason, message: "<type>: <value>: <detail>", field}; bad NULL: no value shown. */
static void cause_at(struct vctx *c, const char *field, const char *reason, json_t *bad,
                     const char *type, const char *fmt, ...)
{
    struct sbuf b;
    sbuf_init(&b, 16384);
    sbuf_adds(&b, type);
    if (bad) {
        sbuf_adds(&b, ": ");
        add_value(&b, bad);
    }
    if (fmt) {
        sbuf_adds(&b, ": ");
        va_list ap;
        va_start(ap, fmt);
        sbuf_vaddf(&b, fmt, ap);
        va_end(ap);
    }
    if (sbuf_check(&b) < 0) {
        sbuf_reset(&b);
        sbuf_adds(&b, type);
    }
    _cleanup_free_ char *msg = sbuf_steal(&b);
    json_array_append_new(
        c->causes, json_pack("{s:s,s:s,s:s}", "reason", reason, "message", msg, "field", field));
}

#define CAUSE(c, reason, bad, type, ...) cause_at(c, (c)->path, reason, bad, type, __VA_ARGS__)

/* Enters a child path segment; false (and an error) when the path gets too long. */
static bool path_push(struct vctx *c, const char *key, long idx, size_t *saved)
{
    *saved = c->len;
    int n;
    if (key)
        n = snprintf(c->path + c->len, sizeof(c->path) - c->len, "%s%s", c->len ? "." : "", key);
    else
        n = snprintf(c->path + c->len, sizeof(c->path) - c->len, "[%ld]", idx);
    if (n < 0 || (size_t)n >= sizeof(c->path) - c->len) {
        c->path[c->len] = '\0';
        CAUSE(c, "FieldValueInvalid", NULL, "Invalid value", "nested too deeply");
        return false;
    }
    c->len += (size_t)n;
    return true;
}

static void path_pop(struct vctx *c, size_t saved)
{
    c->len = saved;
    c->path[saved] = '\0';
}

static size_t utf8_len(const char *s, size_t n)
{
    size_t r = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            r++;
    return r;
}

static bool two_digits(const char *p)
{
    return isdigit((unsigned char)p[0]) && isdigit((unsigned char)p[1]);
}

/* RFC 3339 date-time, as strfmt's DateTime parses it. */
static bool is_date_time(const char *s)
{
    size_t n = strlen(s);
    if (n < 20 || !two_digits(s) || !two_digits(s + 2) || s[4] != '-' || !two_digits(s + 5) ||
        s[7] != '-' || !two_digits(s + 8) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        !two_digits(s + 11) || s[13] != ':' || !two_digits(s + 14) || s[16] != ':' ||
        !two_digits(s + 17))
        return false;
    const char *p = s + 19;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return false;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if ((*p == 'Z' || *p == 'z') && p[1] == '\0')
        return true;
    return (*p == '+' || *p == '-') && two_digits(p + 1) && p[3] == ':' && two_digits(p + 4) &&
           p[6] == '\0';
}

static bool type_ok(json_t *v, const char *type, bool int_or_string)
{
    if (int_or_string)
        return json_is_integer(v) || json_is_string(v) ||
               (json_is_real(v) && json_real_value(v) == (double)(json_int_t)json_real_value(v));
    if (!type || !type[0])
        return true;
    if (str_eq(type, "object"))
        return json_is_object(v);
    if (str_eq(type, "array"))
        return json_is_array(v);
    if (str_eq(type, "string"))
        return json_is_string(v);
    if (str_eq(type, "boolean"))
        return json_is_boolean(v);
    if (str_eq(type, "number"))
        return json_is_number(v);
    if (str_eq(type, "integer"))
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == (double)(json_int_t)json_real_value(v));
    return true;
}

static void validate_node(struct vctx *c, json_t *v, json_t *sch, json_t *old, bool resource,
                          int depth);

/* Validates v against sub into a fresh list of causes (anyOf, allOf, oneOf, not). */
static json_t *validate_sub(struct vctx *c, json_t *v, json_t *sub, int depth)
{
    json_t *saved = c->causes;
    json_t *mine = json_array();
    c->causes = mine;
    validate_node(c, v, sub, NULL, false, depth + 1);
    c->causes = saved;
    return mine;
}

static void validate_combinators(struct vctx *c, json_t *v, json_t *sch, int depth)
{
    json_t *any = json_object_get(sch, "anyOf");
    if (json_array_size(any)) {
        json_t *first = NULL;
        bool pass = false;
        size_t i;
        json_t *sub;
        json_array_foreach (any, i, sub) {
            json_t *r = validate_sub(c, v, sub, depth);
            if (json_array_size(r) == 0) {
                pass = true;
                json_decref(r);
                break;
            }
            if (!first)
                first = r;
            else
                json_decref(r);
        }
        if (!pass) {
            CAUSE(c, "FieldValueInvalid", v, "Invalid value",
                  "\"%s\" must validate at least one schema (anyOf)", c->path);
            json_array_extend(c->causes, first);
        }
        json_decref(first);
    }
    json_t *all = json_object_get(sch, "allOf");
    if (json_array_size(all)) {
        size_t i;
        json_t *sub;
        json_t *fails = json_array();
        json_array_foreach (all, i, sub) {
            json_t *r = validate_sub(c, v, sub, depth);
            json_array_extend(fails, r);
            json_decref(r);
        }
        if (json_array_size(fails)) {
            CAUSE(c, "FieldValueInvalid", v, "Invalid value",
                  "\"%s\" must validate all the schemas (allOf)", c->path);
            json_array_extend(c->causes, fails);
        }
        json_decref(fails);
    }
    json_t *one = json_object_get(sch, "oneOf");
    if (json_array_size(one)) {
        size_t i, passed = 0;
        json_t *sub;
        json_array_foreach (one, i, sub) {
            json_t *r = validate_sub(c, v, sub, depth);
            if (json_array_size(r) == 0)
                passed++;
            json_decref(r);
        }
        if (passed != 1)
            CAUSE(c, "FieldValueInvalid", v, "Invalid value",
                  "\"%s\" must validate one and only one schema (oneOf)", c->path);
    }
    json_t *not = json_object_get(sch, "not");
    if (json_is_object(not )) {
        json_t *r = validate_sub(c, v, not, depth);
        if (json_array_size(r) == 0)
            CAUSE(c, "FieldValueInvalid", v, "Invalid value",
                  "\"%s\" must not validate the schema (not)", c->path);
        json_decref(r);
    }
}

/* Compares a number with a schema bound. */
static int num_cmp(json_t *a, json_t *b)
{
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return x < y ? -1 : x > y;
    }
    double x = json_number_value(a), y = json_number_value(b);
    return x < y ? -1 : x > y;
}

static void bound_str(char *buf, size_t n, json_t *b)
{
    struct sbuf s;
    sbuf_init(&s, n - 1);
    add_number(&s, b);
    snprintf(buf, n, "%s", sbuf_check(&s) == 0 && s.data ? s.data : "?");
    sbuf_free(&s);
}

static void validate_scalar(struct vctx *c, json_t *v, json_t *sch)
{
    char bound[64];
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t runes = utf8_len(s, json_string_length(v));
        json_t *mn = json_object_get(sch, "minLength");
        json_t *mx = json_object_get(sch, "maxLength");
        if (json_is_integer(mx) && (json_int_t)runes > json_integer_value(mx)) {
            json_int_t m = json_integer_value(mx);
            CAUSE(c, "FieldValueTooLong", NULL, "Too long",
                  "may not be more than %" JSON_INTEGER_FORMAT " byte%s", m, m == 1 ? "" : "s");
        }
        if (json_is_integer(mn) && (json_int_t)runes < json_integer_value(mn))
            CAUSE(c, "FieldValueInvalid", v, "Invalid value",
                  "%s in body should be at least %" JSON_INTEGER_FORMAT " chars long", c->path,
                  json_integer_value(mn));
        const char *pat = json_string_value(json_object_get(sch, "pattern"));
        const struct crd_pattern *p = pat ? pattern_find(c->s, pat) : NULL;
        if (p && p->ok && regexec(&p->re, s, 0, NULL, 0) != 0)
            CAUSE(c, "FieldValueInvalid", v, "Invalid value", "%s in body should match '%s'",
                  c->path, pat);
        const char *fmt = json_string_value(json_object_get(sch, "format"));
        if (fmt && str_eq(fmt, "date-time") && !is_date_time(s))
            CAUSE(c, "FieldValueTypeInvalid", v, "Invalid value",
                  "%s in body must be of type date-time: \"%s\"", c->path, s);
    }
    if (json_is_number(v)) {
        json_t *mn = json_object_get(sch, "minimum");
        json_t *mx = json_object_get(sch, "maximum");
        if (json_is_number(mn)) {
            bool ex = sch_flag(sch, "exclusiveMinimum");
            int r = num_cmp(v, mn);
            bound_str(bound, sizeof(bound), mn);
            if (r < 0 || (ex && r == 0))
                CAUSE(c, "FieldValueInvalid", v, "Invalid value",
                      "%s in body should be greater than %s%s", c->path, ex ? "" : "or equal to ",
                      bound);
        }
        if (json_is_number(mx)) {
            bool ex = sch_flag(sch, "exclusiveMaximum");
            int r = num_cmp(v, mx);
            bound_str(bound, sizeof(bound), mx);
            if (r > 0 || (ex && r == 0))
                CAUSE(c, "FieldValueInvalid", v, "Invalid value",
                      "%s in body should be less than %s%s", c->path, ex ? "" : "or equal to ",
                      bound);
        }
        json_t *mo = json_object_get(sch, "multipleOf");
        if (json_is_number(mo) && json_number_value(mo) > 0) {
            double q = json_number_value(v) / json_number_value(mo);
            if (q != (double)(long long)q) {
                bound_str(bound, sizeof(bound), mo);
                CAUSE(c, "FieldValueInvalid", v, "Invalid value",
                      "%s in body should be a multiple of %s", c->path, bound);
            }
        }
    }
}

static void validate_enum(struct vctx *c, json_t *v, json_t *en)
{
    size_t i;
    json_t *x;
    json_array_foreach (en, i, x)
        if (json_equal(x, v))
            return;
    struct sbuf b;
    sbuf_init(&b, 8192);
    json_array_foreach (en, i, x) {
        sbuf_adds(&b, i ? ", " : "");
        if (json_is_string(x)) {
            add_quoted(&b, json_string_value(x), json_string_length(x));
        } else {
            _cleanup_free_ char *d = json_dumps(x, JSON_COMPACT | JSON_ENCODE_ANY);
            add_quoted(&b, d ? d : "", d ? strlen(d) : 0);
        }
    }
    if (sbuf_check(&b) < 0) {
        sbuf_reset(&b);
        sbuf_adds(&b, "...");
    }
    _cleanup_free_ char *vals = sbuf_steal(&b);
    CAUSE(c, "FieldValueNotSupported", v, "Unsupported value", "supported values: %s", vals);
}

/* x-kubernetes-validations: the transition rule self == oldSelf. */
static void validate_rules(struct vctx *c, json_t *v, json_t *sch, json_t *old)
{
    json_t *rules = json_object_get(sch, "x-kubernetes-validations");
    size_t i;
    json_t *r;
    json_array_foreach (rules, i, r) {
        const char *rule = json_string_value(json_object_get(r, "rule"));
        if (!rule || !old)
            continue;
        char norm[64];
        size_t n = 0;
        for (const char *p = rule; *p && n + 1 < sizeof(norm); p++)
            if (!isspace((unsigned char)*p))
                norm[n++] = *p;
        norm[n] = '\0';
        if (!str_eq(norm, "self==oldSelf") && !str_eq(norm, "oldSelf==self"))
            continue;
        if (json_equal(v, old))
            continue;
        const char *msg = json_string_value(json_object_get(r, "message"));
        const char *reason = json_string_value(json_object_get(r, "reason"));
        const char *type = json_string_value(json_object_get(sch, "type"));
        json_t *shown = json_string(type ? type : data_type(v));
        const char *fp = json_string_value(json_object_get(r, "fieldPath"));
        _cleanup_free_ char *field = fp && fp[0] ? xasprintf("%s%s", c->path, fp) : NULL;
        const char *ftype = "Invalid value";
        const char *freason = "FieldValueInvalid";
        if (reason && str_eq(reason, "FieldValueForbidden")) {
            ftype = "Forbidden";
            freason = reason;
        } else if (reason && str_eq(reason, "FieldValueRequired")) {
            ftype = "Required value";
            freason = reason;
        } else if (reason && str_eq(reason, "FieldValueDuplicate")) {
            ftype = "Duplicate value";
            freason = reason;
        }
        if (msg && msg[0])
            cause_at(c, field ? field : c->path, freason, shown, ftype, "%s", msg);
        else
            cause_at(c, field ? field : c->path, freason, shown, ftype, "failed rule: %s", rule);
        json_decref(shown);
    }
}

static void validate_object(struct vctx *c, json_t *v, json_t *sch, json_t *old, bool resource,
                            int depth)
{
    size_t saved;
    size_t i;
    json_t *x;
    json_array_foreach (json_object_get(sch, "required"), i, x) {
        const char *k = json_string_value(x);
        if (!k || json_object_get(v, k))
            continue;
        if (!path_push(c, k, 0, &saved))
            return;
        CAUSE(c, "FieldValueRequired", NULL, "Required value", NULL);
        path_pop(c, saved);
    }
    json_t *mp = json_object_get(sch, "maxProperties");
    json_t *np = json_object_get(sch, "minProperties");
    json_int_t count = (json_int_t)json_object_size(v);
    if (json_is_integer(mp) && count > json_integer_value(mp))
        CAUSE(c, "FieldValueTooMany", NULL, "Too many",
              "%" JSON_INTEGER_FORMAT ": must have at most %" JSON_INTEGER_FORMAT " items", count,
              json_integer_value(mp));
    if (json_is_integer(np) && count < json_integer_value(np))
        CAUSE(c, "FieldValueInvalid", v, "Invalid value",
              "%s in body should have at least %" JSON_INTEGER_FORMAT " properties", c->path,
              json_integer_value(np));
    if (sch_flag(sch, "x-kubernetes-embedded-resource")) {
        const char *const need[] = {"apiVersion", "kind"};
        for (size_t j = 0; j < ARRAY_SIZE(need); j++) {
            const char *s = json_string_value(json_object_get(v, need[j]));
            if (s && s[0])
                continue;
            if (!path_push(c, need[j], 0, &saved))
                return;
            CAUSE(c, "FieldValueRequired", NULL, "Required value", "must not be empty");
            path_pop(c, saved);
        }
    }
    const char *k;
    json_object_foreach (v, k, x) {
        if (resource && str_eq(k, "metadata"))
            continue;
        json_t *fs = field_schema(sch, k);
        if (!fs)
            continue;
        if (!path_push(c, k, 0, &saved))
            return;
        validate_node(c, x, fs, json_object_get(old, k),
                      sch_flag(fs, "x-kubernetes-embedded-resource"), depth + 1);
        path_pop(c, saved);
    }
}

static void validate_array(struct vctx *c, json_t *v, json_t *sch, int depth)
{
    json_int_t n = (json_int_t)json_array_size(v);
    json_t *mx = json_object_get(sch, "maxItems");
    json_t *mn = json_object_get(sch, "minItems");
    if (json_is_integer(mx) && n > json_integer_value(mx))
        CAUSE(c, "FieldValueTooMany", NULL, "Too many",
              "%" JSON_INTEGER_FORMAT ": must have at most %" JSON_INTEGER_FORMAT " items", n,
              json_integer_value(mx));
    if (json_is_integer(mn) && n < json_integer_value(mn))
        CAUSE(c, "FieldValueInvalid", v, "Invalid value",
              "%s in body should have at least %" JSON_INTEGER_FORMAT " items", c->path,
              json_integer_value(mn));
    json_t *items = json_object_get(sch, "items");
    if (!json_is_object(items))
        return;
    size_t i;
    json_t *x;
    json_array_foreach (v, i, x) {
        size_t saved;
        if (!path_push(c, NULL, (long)i, &saved))
            return;
        /* items of lists other than map lists do not correlate with the old list's */
        validate_node(c, x, items, NULL, sch_flag(items, "x-kubernetes-embedded-resource"),
                      depth + 1);
        path_pop(c, saved);
    }
}

static void validate_node(struct vctx *c, json_t *v, json_t *sch, json_t *old, bool resource,
                          int depth)
{
    if (!json_is_object(sch) || !v)
        return;
    if (depth > 128) {
        CAUSE(c, "FieldValueInvalid", NULL, "Invalid value", "nested too deeply");
        return;
    }
    /* ratcheting: a value unchanged by an update is not validated again */
    if (old && json_equal(v, old))
        return;
    const char *type = json_string_value(json_object_get(sch, "type"));
    bool ios = sch_flag(sch, "x-kubernetes-int-or-string");
    if (json_is_null(v)) {
        if (sch_flag(sch, "nullable") || ((!type || !type[0]) && !ios))
            return;
    }
    /* kube-openapi's validators in its order: type, combinators, string and format, number,
     * array, enum, object; all run even after a type error (each applies to its kind only) */
    json_t *en = json_object_get(sch, "enum");
    if (!type_ok(v, type, ios)) {
        const char *want = ios ? "integer,string" : type;
        json_t *dt = json_string(data_type(v));
        CAUSE(c, "FieldValueTypeInvalid", dt, "Invalid value",
              "%s in body must be of type %s: \"%s\"", c->path, want, data_type(v));
        json_decref(dt);
        validate_combinators(c, v, sch, depth);
        if (json_is_array(en))
            validate_enum(c, v, en);
        return;
    }
    validate_combinators(c, v, sch, depth);
    validate_scalar(c, v, sch);
    if (json_is_array(v))
        validate_array(c, v, sch, depth);
    if (json_is_array(en))
        validate_enum(c, v, en);
    if (json_is_object(v))
        validate_object(c, v, sch, old, resource, depth);
    validate_rules(c, v, sch, old);
}

void ks_crd_schema_validate(const struct ks_crd_schema *s, json_t *obj, json_t *old, json_t *causes)
{
    if (!s)
        return;
    struct vctx *c = xcalloc(1, sizeof(*c));
    c->s = s;
    c->causes = causes;
    validate_node(c, obj, s->root, old, true, 0);
    free(c);
}
