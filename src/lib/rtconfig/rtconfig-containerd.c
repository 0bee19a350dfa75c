/* SPDX-License-Identifier: Apache-2.0 */
/*
 * containerd's config, edited as `nvidia-ctk runtime configure` does
 * (../shared/reference/notes/node-components.md §3), the pure part.
 *
 * The main file is changed by one text splice: an `imports` entry naming the drop-in (and
 * `version = 2` when the file was empty). Everything else goes into the drop-in, which gpuop
 * owns. containerd merges an imported file section by section: a plugin section named there
 * replaces the main file's one whole (containerd 1.x; seen with Debian's 1.6 in the tests), so
 * the drop-in carries the main file's CRI plugin section with the additions, and the user's
 * settings there (registry mirrors, runc options) stay in force.
 *
 * Uninstall (rtconfig_containerd_unedit) takes the one `imports` entry out of the file as it is
 * then, by the same kind of splice; everything else the administrator wrote since stays.
 */
#include <errno.h>
#include <string.h>

#include "rtconfig-internal.h"
#include "tomlx.h"

static const char *const default_cdi_dirs[] = {"/etc/cdi", "/var/run/cdi"};

const char *rtconfig_containerd_plugin(int version)
{
    switch (version) {
    case 1:
        return "cri";
    case 2:
        return "io.containerd.grpc.v1.cri";
    case 3:
        return "io.containerd.cri.v1.runtime";
    default:
        return NULL;
    }
}

int rtconfig_containerd_version(const struct tomlx *t, int *ret, struct err *e)
{
    int64_t v;
    int r = tomlx_get_int(t, TP("version"), &v);
    if (r == -ENOENT) {
        /* No version key means version 1, unless the file holds nothing: then it is new. */
        *ret = tomlx_empty(t) ? 2 : 1;
        return 0;
    }
    if (r < 0)
        return err_set(e, -EINVAL, "version: not an integer");
    if (!rtconfig_containerd_plugin((int)v) || v != (int)v)
        return err_set(e, -EINVAL, "version %lld: not a containerd config version (1, 2 or 3)",
                       (long long)v);
    *ret = (int)v;
    return 0;
}

/* Byte offset of (line, col) in text: lines and columns 1-based, columns in code points. */
size_t rtconfig_text_offset(const char *s, size_t len, unsigned line, unsigned col)
{
    size_t i = 0;
    for (unsigned l = 1; l < line && i < len; i++)
        if (s[i] == '\n')
            l++;
    for (unsigned c = 1; c < col && i < len && s[i] != '\n';) {
        i++;
        while (i < len && ((unsigned char)s[i] & 0xc0) == 0x80)
            i++;
        c++;
    }
    return i;
}

/* Offset just past the end of line `line` (after its '\n'; len at the end). */
static size_t line_end(const char *s, size_t len, unsigned line)
{
    size_t i = rtconfig_text_offset(s, len, line, 1);
    while (i < len && s[i] != '\n')
        i++;
    return i < len ? i + 1 : len;
}

static int build_dropin(const struct tomlx *m, int version, const struct rtconfig_options *o,
                        struct tomlx **ret, struct err *e)
{
    const char *plugin = rtconfig_containerd_plugin(version);
    const char *name = o->runtime_name;
    _cleanup_(tomlx_freep) struct tomlx *d = tomlx_new();
    if (!d)
        return err_set(e, -ENOMEM, "out of memory");

    enum tomlx_type top = tomlx_type_at(m, TP("plugins"));
    if (top != TOMLX_NONE && top != TOMLX_TABLE)
        return err_set(e, -EINVAL, "plugins: not a table");
    enum tomlx_type pt = tomlx_type_at(m, TP("plugins", plugin));
    if (pt == TOMLX_TABLE) {
        int r = tomlx_copy(m, TP("plugins", plugin), d, TP("plugins", plugin));
        if (r < 0)
            return err_errno(e, r, "plugins.\"%s\": copy", plugin);
    } else if (pt != TOMLX_NONE) {
        return err_set(e, -EINVAL, "plugins.\"%s\": not a table", plugin);
    }
    enum tomlx_type rt = tomlx_type_at(d, TP("plugins", plugin, "containerd", "runtimes"));
    if (rt != TOMLX_NONE && rt != TOMLX_TABLE)
        return err_set(e, -EINVAL, "plugins.\"%s\".containerd.runtimes: not a table", plugin);

    /* containerd decodes a runtimes table over its defaults as a whole: once the drop-in names
     * one runtime, a runc the config left to the defaults is gone (seen with containerd 1.6's
     * dump). So runc is spelled out, as containerd's default config has it, when the config
     * has it nowhere and it is (by default) the default runtime. */
    _cleanup_free_ char *dflt_name = NULL;
    int dr =
        tomlx_get_str(d, TP("plugins", plugin, "containerd", "default_runtime_name"), &dflt_name);
    if (tomlx_type_at(d, TP("plugins", plugin, "containerd", "runtimes", "runc")) == TOMLX_NONE &&
        (dr == -ENOENT || (dr == 0 && strcmp(dflt_name, "runc") == 0))) {
        int rr = tomlx_set_str(
            d, TP("plugins", plugin, "containerd", "runtimes", "runc", "runtime_type"),
            "io.containerd.runc.v2");
        if (rr < 0)
            return err_set(e, -EINVAL, "plugins.\"%s\".containerd: not a table", plugin);
    }

    /* The handler is cloned from runc, else from the default runtime, else made up. */
    _cleanup_free_ char *deflt = NULL;
    const char *from = NULL;
    if (tomlx_type_at(d, TP("plugins", plugin, "containerd", "runtimes", "runc")) == TOMLX_TABLE)
        from = "runc";
    else if (tomlx_get_str(d, TP("plugins", plugin, "containerd", "default_runtime_name"),
                           &deflt) == 0 &&
             strcmp(deflt, name) != 0 &&
             tomlx_type_at(d, TP("plugins", plugin, "containerd", "runtimes", deflt)) ==
                 TOMLX_TABLE)
        from = deflt;
    int r;
    if (from) {
        r = tomlx_copy(d, TP("plugins", plugin, "containerd", "runtimes", from), d,
                       TP("plugins", plugin, "containerd", "runtimes", name));
    } else {
        tomlx_remove(d, TP("plugins", plugin, "containerd", "runtimes", name));
        r = tomlx_set_str(d, TP("plugins", plugin, "containerd", "runtimes", name, "runtime_type"),
                          "io.containerd.runc.v2");
    }
    if (r >= 0 && tomlx_type_at(d, TP("plugins", plugin, "containerd", "runtimes", name,
                                      "options")) != TOMLX_TABLE) {
        tomlx_remove(d, TP("plugins", plugin, "containerd", "runtimes", name, "options"));
    }
    if (r >= 0)
        r = tomlx_set_str(
            d, TP("plugins", plugin, "containerd", "runtimes", name, "options", "BinaryName"),
            o->runtime_path);
    if (r >= 0 && o->set_as_default)
        r = tomlx_set_str(d, TP("plugins", plugin, "containerd", "default_runtime_name"), name);
    if (r >= 0 && o->enable_cdi) {
        r = tomlx_set_bool(d, TP("plugins", plugin, "enable_cdi"), true);
        if (r >= 0 && tomlx_type_at(d, TP("plugins", plugin, "cdi_spec_dirs")) == TOMLX_NONE)
            r = tomlx_set_str_array(d, TP("plugins", plugin, "cdi_spec_dirs"), default_cdi_dirs,
                                    ARRAY_SIZE(default_cdi_dirs));
    }
    if (r < 0)
        return err_set(e, r == -EEXIST ? -EINVAL : r,
                       "plugins.\"%s\": a key on the way to the %s runtime is not a table", plugin,
                       name);
    *ret = steal_ptr(&d);
    return 0;
}

/* The main file's imports (strings), or none. */
static int get_imports(const struct tomlx *t, char ***ret, size_t *ret_n, struct err *e)
{
    int n = tomlx_str_array_len(t, TP("imports"));
    *ret = NULL;
    *ret_n = 0;
    if (n == -ENOENT)
        return 0;
    if (n < 0)
        return err_set(e, -EINVAL, "imports: not an array of strings");
    char **v = xcalloc((size_t)n + 1, sizeof(char *));
    for (int i = 0; i < n; i++) {
        int r = tomlx_str_array_get(t, TP("imports"), (size_t)i, &v[i]);
        if (r < 0) {
            tomlx_keys_free(v, (size_t)i);
            return err_set(e, -EINVAL, "imports: not an array of strings");
        }
    }
    *ret = v;
    *ret_n = (size_t)n;
    return 0;
}

/* An imports array's text: v[0..n) but those equal to skip, then add (both may be NULL). */
static void imports_array(struct sbuf *out, char **v, size_t n, const char *skip, const char *add)
{
    bool first = true;
    sbuf_adds(out, "[");
    for (size_t i = 0; i < n; i++) {
        if (skip && strcmp(v[i], skip) == 0)
            continue;
        sbuf_adds(out, first ? "" : ", ");
        tomlx_quote(out, v[i]);
        first = false;
    }
    if (add) {
        sbuf_adds(out, first ? "" : ", ");
        tomlx_quote(out, add);
    }
    sbuf_adds(out, "]");
}

/* The new main text: the old one with dropin added to imports (and a version when empty). */
static int edit_main(struct rtconfig_text main, const struct tomlx *m, const char *dropin,
                     struct sbuf *out, struct err *e)
{
    const char *s = main.data ? main.data : "";
    size_t len = main.data ? main.len : 0;
    char **imp;
    size_t nimp;
    int r = get_imports(m, &imp, &nimp, e);
    if (r < 0)
        return r;
    bool have = false;
    for (size_t i = 0; i < nimp; i++)
        have = have || strcmp(imp[i], dropin) == 0;

    if (have) {
        sbuf_add(out, s, len);
    } else if (nimp > 0 || tomlx_type_at(m, TP("imports")) != TOMLX_NONE) {
        unsigned l0, c0, l1, c1;
        if (tomlx_span(m, TP("imports"), &l0, &c0, &l1, &c1) < 0) {
            tomlx_keys_free(imp, nimp);
            return err_set(e, -EINVAL, "imports: cannot locate it in the text");
        }
        size_t b = rtconfig_text_offset(s, len, l0, c0), en = rtconfig_text_offset(s, len, l1, c1);
        if (en < b || en > len || s[b] != '[') {
            tomlx_keys_free(imp, nimp);
            return err_set(e, -EINVAL, "imports: cannot locate it in the text");
        }
        sbuf_add(out, s, b);
        imports_array(out, imp, nimp, NULL, dropin);
        sbuf_add(out, s + en, len - en);
    } else {
        /* A top-level key goes before the first table: after `version`, else first. */
        unsigned l0, c0, l1, c1;
        size_t at = 0;
        if (tomlx_span(m, TP("version"), &l0, &c0, &l1, &c1) == 0)
            at = line_end(s, len, l1);
        sbuf_add(out, s, at);
        if (at > 0 && s[at - 1] != '\n')
            sbuf_adds(out, "\n");
        if (tomlx_empty(m))
            sbuf_adds(out, "version = 2\n");
        sbuf_adds(out, "imports = ");
        imports_array(out, NULL, 0, NULL, dropin);
        sbuf_adds(out, "\n");
        sbuf_add(out, s + at, len - at);
    }
    tomlx_keys_free(imp, nimp);
    return 0;
}

/* The splice changed imports (and version of an empty file) and nothing else. */
static int check_main(const struct tomlx *old, const char *text, size_t len, const char *dropin,
                      struct err *e)
{
    _cleanup_(tomlx_freep) struct tomlx *nw = NULL;
    struct err pe = {0};
    if (tomlx_parse(text, len, &nw, NULL, &pe) < 0)
        return err_set(e, -EINVAL, "the edited config does not parse (%s); not written",
                       err_msg(&pe));
    char **a, **b;
    size_t na, nb;
    int r = get_imports(old, &a, &na, e);
    if (r < 0)
        return r;
    r = get_imports(nw, &b, &nb, e);
    if (r < 0) {
        tomlx_keys_free(a, na);
        return r;
    }
    bool ok = nb == na + 1 || (nb == na && na > 0);
    for (size_t i = 0; ok && i < na; i++)
        ok = strcmp(a[i], b[i]) == 0;
    if (ok && nb == na + 1)
        ok = strcmp(b[na], dropin) == 0;
    tomlx_keys_free(a, na);
    tomlx_keys_free(b, nb);
    _cleanup_(tomlx_freep) struct tomlx *o2 = NULL;
    if (ok) {
        struct tomlx *n2 = nw;
        o2 = tomlx_new();
        if (!o2 || (!tomlx_empty(old) && tomlx_copy(old, NULL, 0, o2, NULL, 0) < 0))
            return err_set(e, -ENOMEM, "out of memory");
        tomlx_remove(o2, TP("imports"));
        tomlx_remove(n2, TP("imports"));
        if (tomlx_empty(old))
            tomlx_remove(n2, TP("version"));
        ok = tomlx_equal(o2, n2);
    }
    if (!ok)
        return err_set(e, -EINVAL, "editing imports would change more than imports; not written");
    return 0;
}

int rtconfig_containerd_edit(struct rtconfig_text main, const struct rtconfig_options *o,
                             struct sbuf *ret_main, struct sbuf *ret_dropin, struct err *e)
{
    const char *dropin = rtconfig_dropin_path(RTCONFIG_CONTAINERD, o);
    _cleanup_(tomlx_freep) struct tomlx *m = NULL;
    int r = tomlx_parse(main.data, main.data ? main.len : 0, &m, NULL, e);
    if (r < 0)
        return r;
    int version;
    r = rtconfig_containerd_version(m, &version, e);
    if (r < 0)
        return r;

    _cleanup_(tomlx_freep) struct tomlx *d = NULL;
    r = build_dropin(m, version, o, &d, e);
    if (r < 0)
        return r;

    sbuf_adds(ret_dropin, "# Written by gpuop: the ");
    sbuf_adds(ret_dropin, o->runtime_name);
    sbuf_adds(ret_dropin, " runtime handler and CDI. It holds the CRI plugin's section of\n"
                          "# the main config as a whole (containerd replaces a section an "
                          "imported file names);\n# gpuop rewrites it from there and removes "
                          "it on cleanup. Edit the main config, not this file.\n");
    sbuf_addf(ret_dropin, "version = %d\n\n", version);
    r = tomlx_emit(d, ret_dropin);
    if (r < 0 || sbuf_check(ret_dropin) < 0)
        return sbuf_check_err(ret_dropin, e, "containerd drop-in");

    r = edit_main(main, m, dropin, ret_main, e);
    if (r < 0)
        return r;
    r = sbuf_check_err(ret_main, e, "containerd config");
    if (r < 0)
        return r;
    return check_main(m, ret_main->data ? ret_main->data : "", ret_main->len, dropin, e);
}

/* ---- uninstall ---------------------------------------------------------------------------- */

static bool only_blanks(const char *s, size_t b, size_t e)
{
    for (size_t i = b; i < e; i++)
        if (!strchr(" \t\r\n", s[i]) || !s[i])
            return false;
    return true;
}

/* The top-level key's line is `key = value` alone, as gpuop writes it (blanks around, no
 * comment): its bytes [*ret_b, *ret_e), the newline included. */
static bool own_line(const struct tomlx *t, const char *key, const char *s, size_t len,
                     size_t *ret_b, size_t *ret_e)
{
    unsigned l0, c0, l1, c1;
    if (tomlx_span(t, (const char *const[]){key}, 1, &l0, &c0, &l1, &c1) < 0)
        return false;
    size_t b = rtconfig_text_offset(s, len, l0, 1), vb = rtconfig_text_offset(s, len, l0, c0);
    size_t ve = rtconfig_text_offset(s, len, l1, c1), e = line_end(s, len, l1), k = strlen(key);
    size_t i = b;
    while (i < vb && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (vb - i < k || memcmp(s + i, key, k) != 0)
        return false;
    for (i += k; i < vb && (s[i] == ' ' || s[i] == '\t');)
        i++;
    if (i >= vb || s[i] != '=')
        return false;
    if (!only_blanks(s, i + 1, vb) || ve > e || !only_blanks(s, ve, e))
        return false;
    *ret_b = b;
    *ret_e = e;
    return true;
}

static void undo_set(struct rtconfig_undo_file *ret, enum rtconfig_undo what, const char *why)
{
    ret->what = what;
    strlcpy_s(ret->why, why, sizeof(ret->why));
}

/* out = s without [b, e) */
static void cut(struct sbuf *out, const char *s, size_t len, size_t b, size_t e)
{
    sbuf_add(out, s, b);
    sbuf_add(out, s + e, len - e);
}

/* The text with gpuop's imports entry taken out: the line when gpuop added it and nothing else
 * is in the array, else the array written anew without it. Checked by parsing: the result must
 * equal cur but for that entry. *ret_ok false: it cannot be done cleanly. */
static int take_out_import(const struct tomlx *c, struct rtconfig_text cur, bool base_imports,
                           const char *dropin, char **imp, size_t nimp, struct sbuf *out,
                           bool *ret_ok)
{
    size_t others = 0, b, e;
    for (size_t i = 0; i < nimp; i++)
        others += strcmp(imp[i], dropin) != 0;
    bool whole = others == 0 && !base_imports && own_line(c, "imports", cur.data, cur.len, &b, &e);
    *ret_ok = false;
    if (whole) {
        cut(out, cur.data, cur.len, b, e);
    } else {
        unsigned l0, c0, l1, c1;
        if (tomlx_span(c, TP("imports"), &l0, &c0, &l1, &c1) < 0)
            return 0;
        b = rtconfig_text_offset(cur.data, cur.len, l0, c0);
        e = rtconfig_text_offset(cur.data, cur.len, l1, c1);
        if (e < b || e > cur.len || cur.data[b] != '[')
            return 0;
        sbuf_add(out, cur.data, b);
        imports_array(out, imp, nimp, dropin, NULL);
        sbuf_add(out, cur.data + e, cur.len - e);
    }
    if (sbuf_check(out) < 0)
        return sbuf_check(out);
    /* What it must parse to: cur without the entry (or the key). */
    _cleanup_(tomlx_freep) struct tomlx *got = NULL;
    struct err pe = {0};
    if (tomlx_parse(out->data ? out->data : "", out->len, &got, NULL, &pe) < 0)
        return 0;
    char **left;
    size_t nleft;
    bool has = tomlx_type_at(got, TP("imports")) != TOMLX_NONE;
    if (has != !whole || get_imports(got, &left, &nleft, &pe) < 0)
        return 0;
    bool ok = nleft == others;
    for (size_t i = 0, j = 0; ok && i < nimp; i++)
        if (strcmp(imp[i], dropin) != 0)
            ok = strcmp(imp[i], left[j++]) == 0;
    tomlx_keys_free(left, nleft);
    _cleanup_(tomlx_freep) struct tomlx *want = tomlx_new();
    if (!want || tomlx_copy(c, NULL, 0, want, NULL, 0) < 0)
        return -ENOMEM;
    tomlx_remove(want, TP("imports"));
    tomlx_remove(got, TP("imports"));
    *ret_ok = ok && tomlx_equal(want, got);
    return 0;
}

int rtconfig_containerd_unedit(struct rtconfig_text base, struct rtconfig_text cur,
                               const struct rtconfig_options *o, struct sbuf *ret_main,
                               struct rtconfig_undo_file *ret, struct err *e)
{
    undo_set(ret, RTCONFIG_UNDO_NONE, "");
    if (!cur.data) {
        undo_set(ret, RTCONFIG_UNDO_NONE, "not there");
        return 0;
    }
    const char *dropin = rtconfig_dropin_path(RTCONFIG_CONTAINERD, o);
    _cleanup_(tomlx_freep) struct tomlx *c = NULL;
    int r = tomlx_parse(cur.data, cur.len, &c, NULL, e);
    if (r < 0)
        return r;
    char **imp;
    size_t nimp;
    r = get_imports(c, &imp, &nimp, e);
    if (r < 0)
        return r;

    /* The original plus gpuop's change, nothing else: the original, byte for byte. */
    _cleanup_sbuf_ struct sbuf om, od;
    sbuf_init(&om, RTCONFIG_CONFIG_MAX);
    sbuf_init(&od, RTCONFIG_CONFIG_MAX);
    struct err oe = {0};
    bool only_ours = rtconfig_containerd_edit(base, o, &om, &od, &oe) == 0 && om.len == cur.len &&
                     memcmp(om.data ? om.data : "", cur.data, cur.len) == 0;
    bool mine = false;
    for (size_t i = 0; i < nimp; i++)
        mine = mine || strcmp(imp[i], dropin) == 0;
    _cleanup_(tomlx_freep) struct tomlx *b = NULL;
    _cleanup_sbuf_ struct sbuf out;
    sbuf_init(&out, RTCONFIG_CONFIG_MAX);
    bool ok = false;
    if (only_ours) {
        undo_set(ret, base.data ? RTCONFIG_UNDO_ORIGINAL : RTCONFIG_UNDO_REMOVE, "");
    } else if (!mine) {
        undo_set(ret, RTCONFIG_UNDO_NONE, "no imports entry of gpuop's");
    } else if (base.data && tomlx_parse(base.data, base.len, &b, NULL, &oe) < 0) {
        undo_set(ret, RTCONFIG_UNDO_LEFT, "the original (the backup) does not parse");
    } else if ((r = take_out_import(c, cur, b && tomlx_type_at(b, TP("imports")) != TOMLX_NONE,
                                    dropin, imp, nimp, &out, &ok)) < 0) {
        r = sbuf_check_err(&out, e, "containerd config");
    } else if (!ok) {
        undo_set(ret, RTCONFIG_UNDO_LEFT, "gpuop's imports entry cannot be taken out cleanly");
    } else {
        /* A file that had no key got `version = 2` with the entry: it goes too when it is all
         * that is left (else it stays: what was added since was written for version 2). */
        _cleanup_(tomlx_freep) struct tomlx *t = NULL;
        int64_t v = 0;
        size_t lb, le;
        if ((!b || tomlx_empty(b)) &&
            tomlx_parse(out.data ? out.data : "", out.len, &t, NULL, &oe) == 0 &&
            tomlx_get_int(t, TP("version"), &v) == 0 && v == 2 &&
            own_line(t, "version", out.data, out.len, &lb, &le)) {
            tomlx_remove(t, TP("version"));
            if (tomlx_empty(t)) {
                size_t len = out.len;
                _cleanup_free_ char *text = xstrndup(out.data, len);
                sbuf_reset(&out);
                cut(&out, text, len, lb, le);
            }
        }
        if (!base.data && only_blanks(out.data ? out.data : "", 0, out.len)) {
            undo_set(ret, RTCONFIG_UNDO_REMOVE, "");
        } else {
            r = sbuf_append(ret_main, out.data ? out.data : "", out.len);
            if (r < 0)
                r = sbuf_check_err(ret_main, e, "containerd config");
            else
                undo_set(ret, RTCONFIG_UNDO_EDIT, "");
        }
    }
    tomlx_keys_free(imp, nimp);
    return r;
}
