/* SPDX-License-Identifier: Apache-2.0 */
#include "yamlcfg.h"

#include <ctype.h>
#include <math.h>
#include <string.h>
#include <yaml.h>

#define YAMLCFG_STR_(x) #x
#define YAMLCFG_STR(x)  YAMLCFG_STR_(x)

struct anchor {
    char *name;
    json_t *value;
    size_t nodes; /* the value's size with its aliases expanded */
};

struct yparser {
    yaml_parser_t p;
    const char *name;
    const char *buf; /* the input, for positions of reader errors */
    size_t len;
    struct anchor *anchors;
    size_t n_anchors, cap_anchors;
    /* Nodes reached through aliases in this document. Values are shared, not copied, but a
     * consumer that walks, copies or serialises one (json_dumps, json_deep_copy) expands them:
     * a few hundred bytes of nested aliases ("billion laughs") would be 2^30 nodes. */
    size_t alias_nodes;
    struct err *e;
};

static void anchors_clear(struct yparser *y)
{
    for (size_t i = 0; i < y->n_anchors; i++) {
        free(y->anchors[i].name);
        json_decref(y->anchors[i].value);
    }
    y->n_anchors = 0;
    y->alias_nodes = 0;
}

static void anchor_add(struct yparser *y, const char *name, json_t *v, size_t nodes)
{
    if (y->n_anchors == y->cap_anchors) {
        y->cap_anchors = y->cap_anchors ? y->cap_anchors * 2 : 8;
        y->anchors = xrealloc(y->anchors, y->cap_anchors * sizeof(*y->anchors));
    }
    y->anchors[y->n_anchors].name = xstrdup(name);
    y->anchors[y->n_anchors].value = json_incref(v);
    y->anchors[y->n_anchors].nodes = nodes;
    y->n_anchors++;
}

static const struct anchor *anchor_find(struct yparser *y, const char *name)
{
    for (size_t i = y->n_anchors; i > 0; i--)
        if (strcmp(y->anchors[i - 1].name, name) == 0)
            return &y->anchors[i - 1];
    return NULL;
}

static int perr(struct yparser *y, const yaml_mark_t *m, const char *what)
{
    return err_set(y->e, -EINVAL, "%s:%zu:%zu: %s", y->name, m->line + 1, m->column + 1, what);
}

/* libyaml's own failure. Reader errors (bad UTF-8, control characters) carry a byte offset, not
 * a mark; turn it into the line and column the user can look at. */
static int parse_error(struct yparser *y)
{
    const char *what = y->p.problem ? y->p.problem : "syntax error";
    if (y->p.error != YAML_READER_ERROR)
        return perr(y, &y->p.problem_mark, what);
    yaml_mark_t m = {0};
    size_t off = y->p.problem_offset < y->len ? y->p.problem_offset : y->len;
    for (size_t i = 0; i < off; i++) {
        if (y->buf[i] == '\n') {
            m.line++;
            m.column = 0;
        } else {
            m.column++;
        }
    }
    return perr(y, &m, what);
}

static bool is_plain_int(const char *s, json_int_t *ret)
{
    const char *p = s;
    bool neg = false;
    if (*p == '-' || *p == '+') {
        neg = *p == '-';
        p++;
    }
    if (!*p)
        return false;
    int base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    } else if (p[0] == '0' && p[1] == 'o') {
        base = 8;
        p += 2;
    }
    if (!*p)
        return false;
    for (const char *q = p; *q; q++) {
        if (base == 16 ? !isxdigit((unsigned char)*q) : !isdigit((unsigned char)*q))
            return false;
        if (base == 8 && *q > '7')
            return false;
    }
    errno = 0;
    unsigned long long v = strtoull(p, NULL, base);
    if (errno || v > (unsigned long long)INT64_MAX)
        return false;
    *ret = neg ? -(json_int_t)v : (json_int_t)v;
    return true;
}

static bool is_plain_float(const char *s, double *ret)
{
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    bool digit = false, dot = false;
    for (; *p; p++) {
        if (isdigit((unsigned char)*p)) {
            digit = true;
        } else if (*p == '.' && !dot) {
            dot = true;
        } else if ((*p == 'e' || *p == 'E') && digit) {
            p++;
            if (*p == '-' || *p == '+')
                p++;
            if (!*p)
                return false;
            for (; *p; p++)
                if (!isdigit((unsigned char)*p))
                    return false;
            break;
        } else {
            return false;
        }
    }
    if (!digit)
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return false;
    *ret = v;
    return true;
}

static json_t *scalar_value(const yaml_event_t *ev)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || ev->data.scalar.quoted_implicit) {
        json_t *q = json_stringn(s, len); /* NULL for invalid UTF-8 */
        return q ? q : json_string("");
    }
    if (ev->data.scalar.tag && strcmp((const char *)ev->data.scalar.tag, YAML_STR_TAG) == 0)
        return json_stringn(s, len);
    if (len == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
        strcmp(s, "NULL") == 0)
        return json_null();
    if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0)
        return json_true();
    if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0)
        return json_false();
    json_int_t iv;
    if (is_plain_int(s, &iv))
        return json_integer(iv);
    double dv;
    if (is_plain_float(s, &dv))
        return json_real(dv);
    json_t *v = json_stringn(s, len);
    return v ? v : json_string("");
}

/* Parses the node starting with *ev (already read). Consumes through the node's end.
 * *ret_nodes: the value's size with aliases expanded (saturating). */
static int parse_node(struct yparser *y, yaml_event_t *ev, int depth, json_t **ret,
                      size_t *ret_nodes)
{
    if (depth > YAML_MAX_DEPTH)
        return perr(y, &ev->start_mark, "nesting deeper than the limit");
    switch (ev->type) {
    case YAML_ALIAS_EVENT: {
        const struct anchor *a = anchor_find(y, (const char *)ev->data.alias.anchor);
        if (!a)
            return perr(y, &ev->start_mark, "unknown alias");
        if (a->nodes > YAML_MAX_ALIAS_NODES - y->alias_nodes)
            return perr(y, &ev->start_mark,
                        "aliases expand to more than " YAMLCFG_STR(YAML_MAX_ALIAS_NODES) " nodes");
        y->alias_nodes += a->nodes;
        *ret = json_incref(a->value);
        *ret_nodes = a->nodes;
        return 0;
    }
    case YAML_SCALAR_EVENT: {
        json_t *v = scalar_value(ev);
        if (!v)
            return perr(y, &ev->start_mark, "scalar is not valid UTF-8");
        if (ev->data.scalar.anchor)
            anchor_add(y, (const char *)ev->data.scalar.anchor, v, 1);
        *ret = v;
        *ret_nodes = 1;
        return 0;
    }
    case YAML_SEQUENCE_START_EVENT: {
        json_t *arr = json_array();
        size_t nodes = 1;
        for (;;) {
            yaml_event_t child;
            if (!yaml_parser_parse(&y->p, &child)) {
                json_decref(arr);
                return parse_error(y);
            }
            if (child.type == YAML_SEQUENCE_END_EVENT) {
                yaml_event_delete(&child);
                break;
            }
            json_t *v = NULL;
            size_t n = 0;
            int r = parse_node(y, &child, depth + 1, &v, &n);
            yaml_event_delete(&child);
            if (r < 0) {
                json_decref(arr);
                return r;
            }
            json_array_append_new(arr, v);
            nodes = n > SIZE_MAX - nodes ? SIZE_MAX : nodes + n;
        }
        /* Registered once complete, so an alias can never refer to its own ancestor. */
        if (ev->data.sequence_start.anchor)
            anchor_add(y, (const char *)ev->data.sequence_start.anchor, arr, nodes);
        *ret = arr;
        *ret_nodes = nodes;
        return 0;
    }
    case YAML_MAPPING_START_EVENT: {
        json_t *obj = json_object();
        size_t nodes = 1;
        _cleanup_json_ json_t *merged = json_object(); /* keys that came from `<<` */
        for (;;) {
            yaml_event_t kev;
            if (!yaml_parser_parse(&y->p, &kev)) {
                json_decref(obj);
                return parse_error(y);
            }
            if (kev.type == YAML_MAPPING_END_EVENT) {
                yaml_event_delete(&kev);
                break;
            }
            if (kev.type != YAML_SCALAR_EVENT) {
                int r = perr(y, &kev.start_mark, "mapping keys must be scalars");
                yaml_event_delete(&kev);
                json_decref(obj);
                return r;
            }
            _cleanup_free_ char *key =
                xstrndup((const char *)kev.data.scalar.value, kev.data.scalar.length);
            yaml_mark_t kmark = kev.start_mark;
            bool merge = strcmp(key, "<<") == 0 && kev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
            yaml_event_delete(&kev);
            yaml_event_t vev;
            if (!yaml_parser_parse(&y->p, &vev)) {
                json_decref(obj);
                return parse_error(y);
            }
            json_t *v = NULL;
            size_t n = 0;
            int r = parse_node(y, &vev, depth + 1, &v, &n);
            yaml_event_delete(&vev);
            if (r < 0) {
                json_decref(obj);
                return r;
            }
            nodes = n > SIZE_MAX - 1 - nodes ? SIZE_MAX : nodes + 1 + n;
            if (merge && json_is_object(v)) {
                const char *mk;
                json_t *mv;
                json_object_foreach (v, mk, mv) {
                    if (!json_object_get(obj, mk)) {
                        json_object_set(obj, mk, mv);
                        json_object_set_new(merged, mk, json_true());
                    }
                }
                json_decref(v);
                continue;
            }
            if (json_object_get(obj, key) && !json_object_get(merged, key)) {
                json_decref(v);
                json_decref(obj);
                return perr(y, &kmark, "duplicate mapping key");
            }
            json_object_del(merged, key);
            if (json_object_set_new(obj, key, v) < 0) {
                json_decref(obj);
                return perr(y, &kmark, "invalid mapping key");
            }
        }
        if (ev->data.mapping_start.anchor)
            anchor_add(y, (const char *)ev->data.mapping_start.anchor, obj, nodes);
        *ret = obj;
        *ret_nodes = nodes;
        return 0;
    }
    default:
        return perr(y, &ev->start_mark, "unexpected YAML event");
    }
}

static int parse_stream(const char *buf, size_t len, const char *name, bool one, json_t **ret,
                        struct err *e)
{
    if (len > YAML_MAX_BYTES)
        return err_set(e, -EFBIG, "%s: larger than %u bytes", name, YAML_MAX_BYTES);
    struct yparser y = {.name = name, .buf = buf, .len = len, .e = e};
    if (!yaml_parser_initialize(&y.p))
        return err_set(e, -ENOMEM, "%s: cannot initialise the YAML parser", name);
    yaml_parser_set_input_string(&y.p, (const unsigned char *)buf, len);
    json_t *docs = json_array();
    int r = 0;
    bool done = false;
    while (!done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&y.p, &ev)) {
            r = parse_error(&y);
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT: {
            yaml_event_t nev;
            if (!yaml_parser_parse(&y.p, &nev)) {
                r = parse_error(&y);
                done = true;
                break;
            }
            json_t *v = NULL;
            if (nev.type == YAML_DOCUMENT_END_EVENT) {
                v = json_null();
            } else {
                size_t nodes = 0;
                r = parse_node(&y, &nev, 0, &v, &nodes);
                if (r == 0) {
                    yaml_event_t dend;
                    if (!yaml_parser_parse(&y.p, &dend)) {
                        r = parse_error(&y);
                        json_decref(v);
                    } else {
                        yaml_event_delete(&dend);
                    }
                }
            }
            yaml_event_delete(&nev);
            anchors_clear(&y);
            if (r < 0) {
                done = true;
                break;
            }
            json_array_append_new(docs, v);
            break;
        }
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    anchors_clear(&y);
    free(y.anchors);
    yaml_parser_delete(&y.p);
    if (r < 0) {
        json_decref(docs);
        return r;
    }
    if (one) {
        size_t n = json_array_size(docs);
        if (n > 1) {
            json_decref(docs);
            return err_set(e, -EINVAL, "%s: expected one YAML document, found %zu", name, n);
        }
        json_t *v = n ? json_incref(json_array_get(docs, 0)) : json_object();
        json_decref(docs);
        if (json_is_null(v)) {
            json_decref(v);
            v = json_object();
        }
        *ret = v;
        return 0;
    }
    *ret = docs;
    return 0;
}

int yaml_parse_all(const char *buf, size_t len, const char *name, json_t **ret, struct err *e)
{
    return parse_stream(buf, len, name, false, ret, e);
}

int yaml_parse_one(const char *buf, size_t len, const char *name, json_t **ret, struct err *e)
{
    return parse_stream(buf, len, name, true, ret, e);
}

int yaml_load_file(const char *path, json_t **ret, struct err *e)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = file_read_all(path, YAML_MAX_BYTES, &buf, &len, e);
    if (r < 0)
        return r;
    return yaml_parse_one(buf, len, path, ret, e);
}

int yaml_load_file_all(const char *path, json_t **ret, struct err *e)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = file_read_all(path, YAML_MAX_BYTES, &buf, &len, e);
    if (r < 0)
        return r;
    return yaml_parse_all(buf, len, path, ret, e);
}

/* ---- accessors ---------------------------------------------------------------------------- */

const char *cfg_type_name(const json_t *v)
{
    if (!v)
        return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "a mapping";
    case JSON_ARRAY:
        return "a list";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "unknown";
}

static json_t *cfg_lookup(json_t *obj, const char *key, const char *ctx, bool required, int *r,
                          struct err *e)
{
    *r = 0;
    if (!json_is_object(obj)) {
        *r = err_set(e, -EINVAL, "%s: expected a mapping, got %s", ctx, cfg_type_name(obj));
        return NULL;
    }
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required)
            *r = err_set(e, -EINVAL, "%s.%s: required field is missing", ctx, key);
        return NULL;
    }
    return v;
}

int cfg_string(json_t *obj, const char *key, const char *ctx, bool required, const char **ret,
               struct err *e)
{
    int r;
    json_t *v = cfg_lookup(obj, key, ctx, required, &r, e);
    if (!v)
        return r;
    if (!json_is_string(v))
        return err_set(e, -EINVAL, "%s.%s: expected a string, got %s", ctx, key, cfg_type_name(v));
    *ret = json_string_value(v);
    return 1;
}

int cfg_int64(json_t *obj, const char *key, const char *ctx, bool required, int64_t min,
              int64_t max, int64_t *ret, struct err *e)
{
    int r;
    json_t *v = cfg_lookup(obj, key, ctx, required, &r, e);
    if (!v)
        return r;
    int64_t x;
    if (json_is_integer(v)) {
        x = (int64_t)json_integer_value(v);
    } else if (json_is_string(v)) {
        json_int_t iv;
        if (!is_plain_int(json_string_value(v), &iv))
            return err_set(e, -EINVAL, "%s.%s: \"%s\" is not an integer", ctx, key,
                           json_string_value(v));
        x = (int64_t)iv;
    } else {
        return err_set(e, -EINVAL, "%s.%s: expected an integer, got %s", ctx, key,
                       cfg_type_name(v));
    }
    if (x < min || x > max)
        return err_set(e, -ERANGE, "%s.%s: %lld is out of range [%lld, %lld]", ctx, key,
                       (long long)x, (long long)min, (long long)max);
    *ret = x;
    return 1;
}

int cfg_bool(json_t *obj, const char *key, const char *ctx, bool required, bool *ret, struct err *e)
{
    int r;
    json_t *v = cfg_lookup(obj, key, ctx, required, &r, e);
    if (!v)
        return r;
    if (json_is_boolean(v)) {
        *ret = json_is_true(v);
        return 1;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcasecmp(s, "true") == 0) {
            *ret = true;
            return 1;
        }
        if (strcasecmp(s, "false") == 0) {
            *ret = false;
            return 1;
        }
    }
    return err_set(e, -EINVAL, "%s.%s: expected true or false, got %s", ctx, key, cfg_type_name(v));
}

int cfg_object(json_t *obj, const char *key, const char *ctx, bool required, json_t **ret,
               struct err *e)
{
    int r;
    json_t *v = cfg_lookup(obj, key, ctx, required, &r, e);
    if (!v)
        return r;
    if (!json_is_object(v))
        return err_set(e, -EINVAL, "%s.%s: expected a mapping, got %s", ctx, key, cfg_type_name(v));
    *ret = v;
    return 1;
}

int cfg_array(json_t *obj, const char *key, const char *ctx, bool required, json_t **ret,
              struct err *e)
{
    int r;
    json_t *v = cfg_lookup(obj, key, ctx, required, &r, e);
    if (!v)
        return r;
    if (!json_is_array(v))
        return err_set(e, -EINVAL, "%s.%s: expected a list, got %s", ctx, key, cfg_type_name(v));
    *ret = v;
    return 1;
}

int cfg_known_keys(json_t *obj, const char *ctx, const char *const *allowed, struct err *e)
{
    if (!json_is_object(obj))
        return err_set(e, -EINVAL, "%s: expected a mapping, got %s", ctx, cfg_type_name(obj));
    const char *k;
    json_t *v;
    json_object_foreach (obj, k, v) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, k) == 0) {
                ok = true;
                break;
            }
        if (!ok) {
            struct sbuf b _cleanup_sbuf_;
            sbuf_init(&b, 1024);
            for (const char *const *a = allowed; *a; a++)
                sbuf_addf(&b, "%s%s", a == allowed ? "" : ", ", *a);
            int r =
                sbuf_check_err(&b, e, "%s: unknown field \"%s\": the list of known fields", ctx, k);
            if (r < 0)
                return r;
            return err_set(e, -EINVAL, "%s: unknown field \"%s\" (known: %s)", ctx, k,
                           b.data ? b.data : "");
        }
    }
    return 0;
}
