/* SPDX-License-Identifier: Apache-2.0 */
/*
 * docker's daemon.json, the pure part. jansson validates (and names the line of a syntax
 * error); the edit itself is a splice of the text, so every byte outside the members set stays
 * as it was, formatting included. A member that exists is replaced in place; a new one goes
 * after the object's last member, indented like its siblings. The result is checked against the
 * same change made on the parsed value: an edit that would do anything else is refused.
 *
 * Uninstall (rtconfig_docker_unedit) is a three-way merge over the members gpuop sets: the
 * original (the backup), what gpuop set, and the file now. A member still as gpuop set it gets
 * its original value back, or goes (with the objects gpuop created to hold it, once empty), by a
 * splice like the edit's; every other byte, the administrator's later edits included, stays.
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

/* The members of the object at ob, in order (*ret malloc'ed; NULL when none), and its closing
 * brace. */
static size_t obj_list(struct jtext t, size_t ob, struct jmember **ret, size_t *ret_close)
{
    struct jmember *v = NULL;
    size_t n = 0, i = ws(t, ob + 1);
    while (i < t.len && t.s[i] == '"') {
        struct jmember m = {.kb = i};
        i = ws(t, skip_value(t, i));
        i = ws(t, i + 1); /* ':' */
        m.vb = i;
        m.ve = skip_value(t, i);
        v = xrealloc(v, (n + 1) * sizeof(*v));
        v[n++] = m;
        i = ws(t, m.ve);
        if (i < t.len && t.s[i] == ',')
            i = ws(t, i + 1);
    }
    *ret = v;
    *ret_close = i;
    return n;
}

static bool member_is(struct jtext t, const struct jmember *m, const char *key)
{
    size_t klen = strlen(key), ke = skip_value(t, m->kb);
    return ke - m->kb == klen + 2 && memcmp(t.s + m->kb + 1, key, klen) == 0;
}

/* Removes path[0..n) from the object at ob of t, writing the new text to out: the member and
 * one comma beside it; an object's last member leaves "{}". -ENOENT when it is not there. */
static int del_path(struct jtext t, size_t ob, const char *const *path, size_t n, struct sbuf *out)
{
    struct jmember *m;
    size_t close, nm = obj_list(t, ob, &m, &close), i = 0;
    while (i < nm && !member_is(t, &m[i], path[0]))
        i++;
    int r = 0;
    if (i == nm) {
        r = -ENOENT;
    } else if (n > 1) {
        r = t.s[m[i].vb] == '{' ? del_path(t, m[i].vb, path + 1, n - 1, out) : -ENOENT;
    } else {
        size_t b, e;
        if (nm == 1) {
            b = ob + 1, e = close;
        } else if (i + 1 < nm) {
            b = m[i].kb, e = m[i + 1].kb; /* the member, its comma, the blanks before the next */
        } else {
            b = m[i - 1].ve, e = m[i].ve; /* the comma after the one before, the member */
        }
        sbuf_add(out, t.s, b);
        sbuf_add(out, t.s + e, t.len - e);
    }
    free(m);
    return r;
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

static void path_del(json_t *o, const char *const *path, size_t n)
{
    json_t *parent = path_get(o, path, n - 1);
    if (json_is_object(parent))
        json_object_del(parent, path[n - 1]);
}

static bool blank(struct rtconfig_text c)
{
    for (size_t i = 0; c.data && i < c.len; i++)
        if (!strchr(" \t\r\n", c.data[i]) || !c.data[i])
            return false;
    return true;
}

/* Parses t as jansson does, a NUL byte refused (jansson stops reading there; the scanner must
 * see what jansson saw); the value must be an object. */
static int load(struct jtext t, json_t **ret, struct err *e)
{
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
    if (!json_is_object(doc)) {
        json_decref(doc);
        return err_set(e, -EINVAL, "line 1: not a JSON object");
    }
    *ret = doc;
    return 0;
}

/* The file's layout, which new members follow: one per line or not, and the indent unit. */
static struct jstyle style(struct jtext t, bool fresh)
{
    struct jstyle st = {.multi = fresh};
    struct jmember m, last;
    size_t close, ob = ws(t, 0);
    bool empty;
    obj_find(t, ob, "", &m, &last, &close, &empty);
    if (!empty) {
        _cleanup_sbuf_ struct sbuf ind;
        sbuf_init(&ind, sizeof(st.unit));
        st.multi = memchr(t.s + ob, '\n', last.kb - ob) != NULL;
        line_indent(t, last.kb, &ind);
        strlcpy_s(st.unit, ind.len && sbuf_check(&ind) == 0 ? ind.data : "    ", sizeof(st.unit));
    } else {
        strlcpy_s(st.unit, "    ", sizeof(st.unit));
        st.multi = st.multi || memchr(t.s, '\n', t.len) != NULL;
    }
    return st;
}

/* The members gpuop sets and their values: the edit's and the uninstall's one list. */
struct docker_set {
    const char *path[2];
    size_t n;
    json_t *v; /* owned; NULL: out of memory */
};

static size_t docker_sets(const struct rtconfig_options *o, struct docker_set sets[3])
{
    size_t n = 0;
    sets[n++] = (struct docker_set){{"runtimes", o->runtime_name},
                                    2,
                                    json_pack("{s:s, s:[]}", "path", o->runtime_path, "args")};
    if (o->set_as_default)
        sets[n++] = (struct docker_set){{"default-runtime"}, 1, json_string(o->runtime_name)};
    if (o->enable_cdi)
        sets[n++] = (struct docker_set){{"features", "cdi"}, 2, json_true()};
    return n;
}

static void path_name(const struct docker_set *set, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s", set->path[0], set->n > 1 ? "." : "", set->n > 1 ? set->path[1] : "");
}

/* One splice of the uninstall on the text (cur, cur_len): the member at path set to v (NULL:
 * removed). */
static int splice(char **cur, size_t *cur_len, const char *const *path, size_t n, const json_t *v,
                  const struct jstyle *st, struct err *e)
{
    struct sbuf nb;
    sbuf_init(&nb, RTCONFIG_CONFIG_MAX);
    struct jtext ct = {*cur, *cur_len};
    int r =
        v ? set_path(ct, ws(ct, 0), path, n, v, st, &nb, e) : del_path(ct, ws(ct, 0), path, n, &nb);
    if (r == 0)
        r = sbuf_check_err(&nb, e, "daemon.json");
    else if (!v)
        r = err_set(e, r, "%s: not found in the text", path[n - 1]);
    if (r == 0) {
        free(*cur);
        *cur_len = nb.len;
        *cur = sbuf_steal(&nb);
    }
    sbuf_free(&nb);
    return r;
}

static void undo_set(struct rtconfig_undo_file *ret, enum rtconfig_undo what, const char *why)
{
    ret->what = what;
    strlcpy_s(ret->why, why, sizeof(ret->why));
}

int rtconfig_docker_edit(struct rtconfig_text config, const struct rtconfig_options *o,
                         struct sbuf *ret_config, struct err *e)
{
    bool fresh = blank(config);
    struct jtext t = fresh ? (struct jtext){"{}\n", 3} : (struct jtext){config.data, config.len};
    json_t *doc = NULL;
    int r = load(t, &doc, e);
    if (r < 0)
        return r;
    json_error_t je;
    json_t *want = json_deep_copy(doc);
    struct jstyle st = style(t, fresh);
    struct docker_set sets[3];
    size_t nsets = docker_sets(o, sets);

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
            r = splice(&cur, &cur_len, sets[i].path, sets[i].n, sets[i].v, &st, e);
            changed = changed || r == 0;
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
    json_decref(doc);
    json_decref(want);
    return r;
}

int rtconfig_docker_unedit(struct rtconfig_text base, struct rtconfig_text cur,
                           const struct rtconfig_options *o, struct sbuf *ret_config,
                           struct rtconfig_undo_file *ret, struct err *e)
{
    undo_set(ret, RTCONFIG_UNDO_NONE, "");
    if (!cur.data) {
        undo_set(ret, RTCONFIG_UNDO_NONE, "not there");
        return 0;
    }
    json_t *cdoc = NULL;
    int r = load((struct jtext){cur.data, cur.len}, &cdoc, e);
    if (r < 0)
        return r;

    /* The original plus gpuop's changes, nothing else: the original, byte for byte. */
    struct sbuf ours;
    sbuf_init(&ours, RTCONFIG_CONFIG_MAX);
    struct err oe = {0};
    bool only_ours = rtconfig_docker_edit(base, o, &ours, &oe) == 0 && ours.len == cur.len &&
                     memcmp(ours.data ? ours.data : "", cur.data, cur.len) == 0;
    sbuf_free(&ours);
    json_t *bdoc = NULL;
    if (only_ours) {
        undo_set(ret, base.data ? RTCONFIG_UNDO_ORIGINAL : RTCONFIG_UNDO_REMOVE, "");
        json_decref(cdoc);
        return 0;
    }
    if (blank(base))
        bdoc = json_object();
    else if (load((struct jtext){base.data, base.len}, &bdoc, &oe) < 0) {
        undo_set(ret, RTCONFIG_UNDO_LEFT, "the original (the backup) does not parse");
        json_decref(cdoc);
        return 0;
    }

    struct docker_set sets[3];
    size_t nsets = docker_sets(o, sets);
    struct jstyle st = style((struct jtext){cur.data, cur.len}, false);
    json_t *want = json_deep_copy(cdoc);
    char *text = xstrndup(cur.data, cur.len);
    size_t text_len = cur.len;
    bool changed = false;
    char name[128];
    for (size_t i = 0; i < nsets && r == 0 && ret->what == RTCONFIG_UNDO_NONE; i++) {
        const json_t *b = path_get(bdoc, sets[i].path, sets[i].n);
        const json_t *c = path_get(cdoc, sets[i].path, sets[i].n);
        if (!sets[i].v || !want) {
            r = err_set(e, -ENOMEM, "out of memory");
        } else if (c && json_equal((json_t *)c, sets[i].v)) {
            if (b && json_equal((json_t *)b, sets[i].v))
                continue; /* the original had it so: not gpuop's change */
            /* As gpuop set it: the original value back, or the member goes. */
            r = splice(&text, &text_len, sets[i].path, sets[i].n, b, &st, e);
            if (r == 0 && b)
                r = path_set(want, sets[i].path, sets[i].n, (json_t *)b);
            else if (r == 0)
                path_del(want, sets[i].path, sets[i].n);
            changed = true;
        } else if (!(!c && !b) && !(c && b && json_equal((json_t *)c, (json_t *)b))) {
            path_name(&sets[i], name, sizeof(name));
            char why[256];
            snprintf(why, sizeof(why), "%s changed since gpuop set it", name);
            undo_set(ret, RTCONFIG_UNDO_LEFT, why);
        }
    }
    /* The objects gpuop created to hold a member (runtimes, features), now empty, go too. */
    for (size_t i = 0; i < nsets && r == 0 && ret->what == RTCONFIG_UNDO_NONE; i++) {
        json_t *x = sets[i].n > 1 ? json_object_get(want, sets[i].path[0]) : NULL;
        if (x && json_is_object(x) && json_object_size(x) == 0 &&
            !json_object_get(bdoc, sets[i].path[0])) {
            r = splice(&text, &text_len, sets[i].path, 1, NULL, &st, e);
            json_object_del(want, sets[i].path[0]);
            changed = true;
        }
    }
    if (r == 0 && ret->what == RTCONFIG_UNDO_NONE) {
        json_error_t je;
        json_t *got = changed ? json_loadb(text, text_len, 0, &je) : NULL;
        if (!changed) {
            undo_set(ret, RTCONFIG_UNDO_NONE, "nothing of gpuop's in it");
        } else if (!got || !json_equal(got, want)) {
            undo_set(ret, RTCONFIG_UNDO_LEFT,
                     "gpuop's members cannot be taken out of the text cleanly (duplicate keys?)");
        } else if (!base.data && json_object_size(want) == 0) {
            undo_set(ret, RTCONFIG_UNDO_REMOVE, "");
        } else {
            r = sbuf_append(ret_config, text, text_len);
            if (r < 0)
                r = sbuf_check_err(ret_config, e, "daemon.json");
            else
                undo_set(ret, RTCONFIG_UNDO_EDIT, "");
        }
        json_decref(got);
    }
    for (size_t i = 0; i < nsets; i++)
        json_decref(sets[i].v);
    free(text);
    json_decref(want);
    json_decref(bdoc);
    json_decref(cdoc);
    return r;
}
