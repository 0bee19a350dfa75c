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

static void imports_array(struct sbuf *out, char **v, size_t n, const char *add)
{
    sbuf_adds(out, "[");
    for (size_t i = 0; i < n; i++) {
        tomlx_quote(out, v[i]);
        sbuf_adds(out, ", ");
    }
    tomlx_quote(out, add);
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
        imports_array(out, imp, nimp, dropin);
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
        imports_array(out, NULL, 0, dropin);
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
