/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi: the specs of a list of directories, and qualified names resolved against them (cdi.h).
 * Later directories win, then later files in name order: the CDI cache's priority, under which
 * /var/run/cdi (generated at run time) overrides /etc/cdi (installed).
 */
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi.h"

#define COMP          "cdi"
#define CDI_MAX_FILES 1024  /* spec files read per directory */
#define CDI_MAX_NAMES 65536 /* names listed per directory; more are only counted */

struct cdi_registry {
    struct cdi_spec **specs; /* in priority order, lowest first */
    size_t n;
    struct sbuf broken; /* "<error>; ..." of specs not used: refused, not parsed, not read */
};

void cdi_registry_free(struct cdi_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        cdi_spec_free(r->specs[i]);
    free(r->specs);
    sbuf_free(&r->broken);
    free(r);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void broken_add(struct cdi_registry *reg, const char *fmt, ...) GPUOP_PRINTF(2, 3);
static void broken_add(struct cdi_registry *reg, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_debug(COMP, "CDI spec not used", "error=\"%s\"", msg);
    sbuf_addf(&reg->broken, "%s%s", reg->broken.len ? "; " : "", msg);
}

/* What makes a spec file or directory untrusted, as the toolkit requires them: owned by root (or
 * by this process's own user, who could write them anyway), not writable by group or others.
 * Appends the reasons to why ("owned by uid 65534, not root"); false when there is one. */
static bool trusted(const struct stat *st, const char *what, struct sbuf *why)
{
    bool ok = true;
    if (st->st_uid != 0 && st->st_uid != geteuid()) {
        sbuf_addf(why, "%s%s owned by uid %u, not root", why->len ? "; " : "", what,
                  (unsigned)st->st_uid);
        ok = false;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        sbuf_addf(why, "%s%s writable by %s (mode %04o)", why->len ? "; " : "", what,
                  (st->st_mode & S_IWOTH) ? "others" : "group", (unsigned)(st->st_mode & 07777));
        ok = false;
    }
    return ok;
}

static bool spec_name(const char *name)
{
    return name[0] != '.' && (str_has_suffix(name, ".json") || str_has_suffix(name, ".yaml") ||
                              str_has_suffix(name, ".yml"));
}

struct names {
    char **v;
    size_t n;
    size_t more; /* names past CDI_MAX_NAMES, counted only */
};

static void names_clear(struct names *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        free(ns->v[i]);
    free(ns->v);
    *ns = (struct names){0};
}

/* The spec files of dir, sorted by name (bytes, so the order is the same everywhere). */
static void list_specs(DIR *dp, struct names *out)
{
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (!spec_name(de->d_name))
            continue;
        if (out->n >= CDI_MAX_NAMES) {
            out->more++;
            continue;
        }
        out->v = xrealloc(out->v, (out->n + 1) * sizeof(*out->v));
        out->v[out->n++] = xstrdup(de->d_name);
    }
    if (out->n > 1)
        qsort(out->v, out->n, sizeof(*out->v), cmp_str);
}

/* The files past the bound, named (as many as fit a line, then how many more). */
static void not_read(struct cdi_registry *reg, const char *dir, const struct names *ns)
{
    _cleanup_sbuf_ struct sbuf b;
    sbuf_init(&b, 2048);
    size_t left = ns->n - CDI_MAX_FILES + ns->more, named = 0;
    for (size_t i = CDI_MAX_FILES; i < ns->n && b.len + strlen(ns->v[i]) + 2 < 1800; i++, named++)
        sbuf_addf(&b, "%s%s", named ? ", " : "", ns->v[i]);
    if (named < left)
        sbuf_addf(&b, "%sand %zu more", named ? ", " : "", left - named);
    broken_add(reg,
               "CDI spec directory \"%s\": more than %u spec files, the first %u by name read; "
               "not read: %s",
               dir, CDI_MAX_FILES, CDI_MAX_FILES, sbuf_check(&b) == 0 ? b.data : "(too many)");
}

static void load_dir(struct cdi_registry *reg, const char *dir)
{
    _cleanup_(closedirp) DIR *dp = opendir(dir);
    if (!dp)
        return; /* a missing directory is empty */
    struct stat dst;
    _cleanup_sbuf_ struct sbuf dwhy;
    sbuf_init(&dwhy, 512);
    bool dir_ok = fstat(dirfd(dp), &dst) == 0 && trusted(&dst, "its directory", &dwhy);
    if (!dwhy.len && !dir_ok)
        sbuf_addf(&dwhy, "its directory cannot be checked: %s", strerror(errno));
    struct names ns = {0};
    list_specs(dp, &ns);
    for (size_t i = 0; i < ns.n && i < CDI_MAX_FILES; i++) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, ns.v[i]);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        struct stat st;
        struct err e = {0};
        /* what is checked is what was read: the stat is of the file descriptor read */
        if (file_read_all_stat(path, CDI_MAX_BYTES, &text, &len, &st, &e) < 0) {
            broken_add(reg, "%s", err_msg(&e));
            continue;
        }
        _cleanup_sbuf_ struct sbuf why;
        sbuf_init(&why, 512);
        bool ok = trusted(&st, "the file", &why);
        if (!dir_ok)
            sbuf_addf(&why, "%s%s \"%s\"", why.len ? "; " : "", dwhy.data, dir);
        if (!ok || !dir_ok) {
            broken_add(reg, "%s: refused: %s", path,
                       sbuf_check(&why) == 0 ? why.data : "not trusted");
            continue;
        }
        struct cdi_spec *spec = NULL;
        if (cdi_spec_parse(path, text, len, &spec, &e) < 0) {
            broken_add(reg, "%s", err_msg(&e));
            continue;
        }
        reg->specs = xrealloc(reg->specs, (reg->n + 1) * sizeof(*reg->specs));
        reg->specs[reg->n++] = spec;
    }
    if (ns.n > CDI_MAX_FILES || ns.more)
        not_read(reg, dir, &ns);
    names_clear(&ns);
}

int cdi_registry_load(const char *const *dirs, size_t n_dirs, struct cdi_registry **ret,
                      struct err *e)
{
    (void)e;
    struct cdi_registry *reg = xcalloc(1, sizeof(*reg));
    sbuf_init(&reg->broken, 16384);
    for (size_t i = 0; i < n_dirs; i++)
        if (dirs[i] && *dirs[i])
            load_dir(reg, dirs[i]);
    *ret = reg;
    return 0;
}

size_t cdi_registry_n_specs(const struct cdi_registry *r)
{
    return r->n;
}

const struct cdi_spec *cdi_registry_spec(const struct cdi_registry *r, size_t i)
{
    return i < r->n ? r->specs[i] : NULL;
}

const char *cdi_registry_errors(const struct cdi_registry *r)
{
    /* A full buffer keeps what fitted: the errors named are still right, only fewer. */
    return r->broken.data ? r->broken.data : "";
}

/* The highest-priority spec of kind kind (kind_len bytes) defining name. */
static const struct cdi_spec *find(const struct cdi_registry *r, const char *kind, size_t kind_len,
                                   const char *name)
{
    for (size_t k = r->n; k-- > 0;) {
        const char *sk = cdi_spec_kind(r->specs[k]);
        if (strlen(sk) == kind_len && strncmp(sk, kind, kind_len) == 0 &&
            cdi_spec_has_device(r->specs[k], name))
            return r->specs[k];
    }
    return NULL;
}

const struct cdi_spec *cdi_registry_lookup(const struct cdi_registry *r, const char *qname)
{
    size_t kind_len = 0;
    const char *name = NULL;
    struct err e = {0};
    if (cdi_qualified_split(qname, &kind_len, &name, &e) < 0)
        return NULL;
    return find(r, qname, kind_len, name);
}

int cdi_registry_resolve(const struct cdi_registry *r, const char *const *names, size_t n_names,
                         const struct cdi_edits ***ret, size_t *ret_n, struct err *e)
{
    _cleanup_free_ const struct cdi_spec **owner = xcalloc(n_names + 1, sizeof(*owner));
    _cleanup_free_ const struct cdi_edits **dev = xcalloc(n_names + 1, sizeof(*dev));
    _cleanup_sbuf_ struct sbuf unknown;
    sbuf_init(&unknown, 4096);
    for (size_t i = 0; i < n_names; i++) {
        size_t kind_len = 0;
        const char *name = NULL;
        struct err qe = {0};
        if (cdi_qualified_split(names[i], &kind_len, &name, &qe) == 0 &&
            (owner[i] = find(r, names[i], kind_len, name)))
            dev[i] = cdi_spec_device_edits(owner[i], name);
        else
            sbuf_addf(&unknown, "%s%s", unknown.len ? ", " : "", names[i]);
    }
    if (unknown.len) {
        const char *broken = cdi_registry_errors(r);
        if (sbuf_check(&unknown) < 0)
            return err_set(e, -ENOENT, "unresolvable CDI devices (too many to name)");
        return err_set(e, -ENOENT, "unresolvable CDI devices %s%s%s", unknown.data,
                       *broken ? "; specs not used: " : "", broken);
    }
    /* Spec-level edits once per spec used, then each device's, in the order named. */
    const struct cdi_edits **out = xcalloc(2 * n_names + 1, sizeof(*out));
    size_t n = 0;
    for (size_t i = 0; i < n_names; i++) {
        bool first = true;
        for (size_t k = 0; k < i && first; k++)
            first = owner[k] != owner[i];
        if (first)
            out[n++] = cdi_spec_edits(owner[i]);
    }
    for (size_t i = 0; i < n_names; i++) {
        bool first = true;
        for (size_t k = 0; k < i && first; k++)
            first = dev[k] != dev[i];
        if (first)
            out[n++] = dev[i];
    }
    *ret = out;
    *ret_n = n;
    return 0;
}
