/* SPDX-License-Identifier: Apache-2.0 */
/*
 * docker's daemon.json, the pure part. jansson validates (and names the line of a syntax
 * error); the edit itself is a splice of the text, so every byte outside the members set stays
 * as it was, formatting included. A member that exists is replaced in place; a new one goes
 * after the object's last member, indented like its siblings. The result is checked against the
 * same change made on the parsed value: an edit that would do anything else is refused.
 */
#include <errno.h>
#include <string.h>

#include <jansson.h>

#include "rtconfig-internal.h"

struct jtext {
    const char *s;
    size_t len;
};

static size_t ws(struct jtext t, size_t i)
{
    while (i < t.len && strchr(" \t\r\n", t.s[i]) && t.s[i])
        i++;
    return i;
}

/* Past the value starting at i (the text is valid JSON: jansson said so). */
static size_t skip_value(struct jtext t, size_t i)
{
    size_t depth = 0;
    for (; i < t.len; i++) {
        char c = t.s[i];
        if (depth == 0 && (c == ',' || c == '}' || c == ']' || c == ':' || strchr(" \t\r\n", c)))
            return i; /* the end of a scalar */
        if (c == '"') {
            for (i++; i < t.len && t.s[i] != '"'; i++)
                if (t.s[i] == '\\')
                    i++;
            if (depth == 0)
                return i < t.len ? i + 1 : t.len;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth <= 1)
                return i < t.len ? i + 1 : t.len;
            depth--;
        }
    }
    return t.len;
}

struct jmember {
    size_t kb, vb, ve; /* key's opening quote, value's first byte, past the value */
};

/* The object at ob ('{'): the member named key (raw bytes between the quotes), the last
 * member and the closing brace. */
static bool obj_find(struct jtext t, size_t ob, const char *key, struct jmember *ret,
                     struct jmember *ret_last, size_t *ret_close, bool *ret_empty)
{
    size_t i = ws(t, ob + 1), klen = strlen(key);
    bool found = false;
    *ret_empty = true;
    while (i < t.len && t.s[i] == '"') {
        struct jmember m = {.kb = i};
        size_t ke = skip_value(t, i);
        i = ws(t, ke);
        i = ws(t, i + 1); /* ':' */
        m.vb = i;
        m.ve = skip_value(t, i);
        if (!found && ke - m.kb == klen + 2 && memcmp(t.s + m.kb + 1, key, klen) == 0) {
            *ret = m;
            found = true;
        }
        *ret_last = m;
        *ret_empty = false;
        i = ws(t, m.ve);
        if (i < t.len && t.s[i] == ',')
            i = ws(t, i + 1);
    }
    *ret_close = i;
    return found;
}

/* The whitespace that starts the line holding offset at. */
static void line_indent(struct jtext t, size_t at, struct sbuf *out)
{
    size_t b = at;
    while (b > 0 && t.s[b - 1] != '\n')
        b--;
    size_t e = b;
    while (e < at && (t.s[e] == ' ' || t.s[e] == '\t'))
        e++;
    sbuf_add(out, t.s + b, e - b);
}

static void render(const json_t *v, const char *indent, const char *unit, bool multi,
                   struct sbuf *out)
{
    if (json_is_object(v) && json_object_size(v) > 0) {
        const char *k;
        json_t *x;
        size_t n = 0;
        sbuf_adds(out, "{");
        json_object_foreach ((json_t *)v, k, x) {
            sbuf_adds(out, n++ ? "," : "");
            if (multi)
                sbuf_addf(out, "\n%s%s", indent, unit);
            else if (n > 1)
                sbuf_adds(out, " ");
            json_t *ks = json_string(k);
            char *kd = json_dumps(ks, JSON_ENCODE_ANY);
            sbuf_addf(out, "%s: ", kd ? kd : "\"\"");
            free(kd);
            json_decref(ks);
            _cleanup_free_ char *in2 = xasprintf("%s%s", indent, unit);
            render(x, in2, unit, multi, out);
        }
        if (multi)
            sbuf_addf(out, "\n%s", indent);
        sbuf_adds(out, "}");
        return;
    }
    char *d = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!d) {
        sbuf_fail(out, -ENOMEM);
        return;
    }
    /* JSON_COMPACT drops the space after ','; put it back for arrays of scalars. */
    for (const char *p = d; *p; p++) {
        sbuf_add(out, p, 1);
        if (*p == ',' && !json_is_string(v))
            sbuf_adds(out, " ");
    }
    free(d);
}

struct jstyle {
    bool multi;
    char unit[16];
};

/* Sets path[0..n) to v in the object at ob of t, writing the new text to out. */
static int set_path(struct jtext t, size_t ob, const char *const *path, size_t n, const json_t *v,
                    const struct jstyle *st, struct sbuf *out, struct err *e)
{
    struct jmember m, last;
    size_t close;
    bool empty;
    if (obj_find(t, ob, path[0], &m, &last, &close, &empty)) {
        if (n > 1) {
            if (t.s[m.vb] != '{')
                return err_set(e, -EINVAL, "%s: not an object", path[0]);
            return set_path(t, m.vb, path + 1, n - 1, v, st, out, e);
        }
        _cleanup_sbuf_ struct sbuf ind;
        sbuf_init(&ind, 4096);
        line_indent(t, m.kb, &ind);
        sbuf_add(out, t.s, m.vb);
        render(v, ind.data ? ind.data : "", st->unit, st->multi, out);
        sbuf_add(out, t.s + m.ve, t.len - m.ve);
        return 0;
    }
    /* Absent: the rest of the path becomes nested objects. */
    json_t *nv = json_incref((json_t *)v);
    for (size_t i = n; i-- > 1;) {
        json_t *o = json_object();
        json_object_set_new(o, path[i], nv);
        nv = o;
    }
    _cleanup_sbuf_ struct sbuf ind;
    sbuf_init(&ind, 4096);
    json_t *ks = json_string(path[0]);
    char *kd = json_dumps(ks, JSON_ENCODE_ANY);
    json_decref(ks);
    if (!empty) {
        line_indent(t, last.kb, &ind);
        const char *in = ind.data ? ind.data : "";
        bool multi = memchr(t.s + ob, '\n', last.kb - ob) != NULL;
        sbuf_add(out, t.s, last.ve);
        if (multi)
            sbuf_addf(out, ",\n%s%s: ", in, kd ? kd : "\"\"");
        else
            sbuf_addf(out, ", %s: ", kd ? kd : "\"\"");
        render(nv, in, st->unit, st->multi && multi, out);
        sbuf_add(out, t.s + last.ve, t.len - last.ve);
    } else {
        line_indent(t, ob, &ind);
        const char *in = ind.data ? ind.data : "";
        _cleanup_free_ char *in2 = xasprintf("%s%s", in, st->unit);
        sbuf_add(out, t.s, ob + 1);
        if (st->multi)
            sbuf_addf(out, "\n%s%s: ", in2, kd ? kd : "\"\"");
        else
            sbuf_addf(out, "%s: ", kd ? kd : "\"\"");
        render(nv, in2, st->unit, st->multi, out);
        sbuf_addf(out, st->multi ? "\n%s" : "", in);
        sbuf_add(out, t.s + close, t.len - close);
    }
    free(kd);
    json_decref(nv);
    return 0;
}

static json_t *path_get(json_t *o, const char *const *path, size_t n)
{
    for (size_t i = 0; i < n && o; i++)
        o = json_is_object(o) ? json_object_get(o, path[i]) : NULL;
    return o;
}

/* The same change on the parsed value: what the text must parse to afterwards. */
static int path_set(json_t *o, const char *const *path, size_t n, json_t *v)
{
    for (size_t i = 0; i + 1 < n; i++) {
        json_t *x = json_object_get(o, path[i]);
        if (!x) {
            x = json_object();
            json_object_set_new(o, path[i], x);
        }
        if (!json_is_object(x))
            return -EINVAL;
        o = x;
    }
    return json_object_set(o, path[n - 1], v) == 0 ? 0 : -ENOMEM;
}

static bool blank(struct rtconfig_text c)
{
    for (size_t i = 0; c.data && i < c.len; i++)
        if (!strchr(" \t\r\n", c.data[i]) || !c.data[i])
            return false;
    return true;
}

int rtconfig_docker_edit(struct rtconfig_text config, const struct rtconfig_options *o,
                         struct sbuf *ret_config, struct err *e)
{
    bool fresh = blank(config);
    struct jtext t = fresh ? (struct jtext){"{}\n", 3} : (struct jtext){config.data, config.len};
    /* jansson stops reading at a NUL byte; the scanner below must see what jansson saw. */
    const char *nul = memchr(t.s, '\0', t.len);
    if (nul) {
        int line = 1;
        for (const char *p = t.s; p < nul; p++)
            line += *p == '\n';
        return err_set(e, -EINVAL, "line %d: a NUL byte", line);
    }
    json_error_t je;
    json_t *doc = json_loadb(t.s, t.len, 0, &je);
    if (!doc)
        return err_set(e, -EINVAL, "line %d, column %d: %s", je.line, je.column, je.text);
    json_t *want = json_deep_copy(doc);
    int r = 0;
    if (!json_is_object(doc)) {
        r = err_set(e, -EINVAL, "line 1: not a JSON object");
        goto out;
    }

    struct jstyle st = {.multi = fresh};
    {
        struct jmember m, last;
        size_t close, ob = ws(t, 0);
        bool empty;
        obj_find(t, ob, "", &m, &last, &close, &empty);
        if (!empty) {
            _cleanup_sbuf_ struct sbuf ind;
            sbuf_init(&ind, sizeof(st.unit));
            st.multi = memchr(t.s + ob, '\n', last.kb - ob) != NULL;
            line_indent(t, last.kb, &ind);
            strlcpy_s(st.unit, ind.len && sbuf_check(&ind) == 0 ? ind.data : "    ",
                      sizeof(st.unit));
        } else {
            strlcpy_s(st.unit, "    ", sizeof(st.unit));
            st.multi = st.multi || memchr(t.s, '\n', t.len) != NULL;
        }
    }

    struct {
        const char *path[2];
        size_t n;
        json_t *v;
    } sets[3];
    size_t nsets = 0;
    sets[nsets++] =
        (__typeof__(sets[0])){{"runtimes", o->runtime_name},
                              2,
                              json_pack("{s:s, s:[]}", "path", o->runtime_path, "args")};
    if (o->set_as_default)
        sets[nsets++] = (__typeof__(sets[0])){{"default-runtime"}, 1, json_string(o->runtime_name)};
    if (o->enable_cdi)
        sets[nsets++] = (__typeof__(sets[0])){{"features", "cdi"}, 2, json_true()};

    char *cur = xstrndup(t.s, t.len);
    size_t cur_len = t.len;
    bool changed = fresh;
    for (size_t i = 0; i < nsets && r == 0; i++) {
        const json_t *have = path_get(doc, sets[i].path, sets[i].n);
        if (!sets[i].v) {
            r = err_set(e, -ENOMEM, "out of memory");
        } else if (!have || !json_equal((json_t *)have, sets[i].v)) {
            if (path_set(want, sets[i].path, sets[i].n, sets[i].v) < 0) {
                r = err_set(e, -EINVAL, "%s: not an object", sets[i].path[0]);
                break;
            }
            struct sbuf nb;
            sbuf_init(&nb, RTCONFIG_CONFIG_MAX);
            struct jtext ct = {cur, cur_len};
            r = set_path(ct, ws(ct, 0), sets[i].path, sets[i].n, sets[i].v, &st, &nb, e);
            if (r == 0)
                r = sbuf_check_err(&nb, e, "daemon.json");
            if (r == 0) {
                free(cur);
                cur_len = nb.len;
                cur = sbuf_steal(&nb);
                changed = true;
            }
            sbuf_free(&nb);
        }
    }
    for (size_t i = 0; i < nsets; i++)
        json_decref(sets[i].v);

    if (r == 0 && changed) {
        json_t *got = json_loadb(cur, cur_len, 0, &je);
        if (!got || !json_equal(got, want))
            r = err_set(e, -EINVAL,
                        "the edit would change more than the runtime settings "
                        "(duplicate keys?); not written");
        json_decref(got);
    }
    if (r == 0)
        r = sbuf_append(ret_config, changed ? cur : config.data, changed ? cur_len : config.len);
    if (r < 0 && e->code == 0)
        r = sbuf_check_err(ret_config, e, "daemon.json");
    free(cur);
out:
    json_decref(doc);
    json_decref(want);
    return r;
}
