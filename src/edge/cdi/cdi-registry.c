/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi: the specs of a list of directories, and qualified names resolved against them (cdi.h).
 * Later directories win, then later files in name order: the CDI cache's priority, under which
 * /var/run/cdi (generated at run time) overrides /etc/cdi (installed).
 */
#include <string.h>

#include "cdi.h"

#define COMP          "cdi"
#define CDI_MAX_FILES 256

struct cdi_registry {
    struct cdi_spec **specs; /* in priority order, lowest first */
    size_t n;
    struct sbuf broken; /* "<error>; ..." of specs that did not parse */
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

static void names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
}

static void load_dir(struct cdi_registry *reg, const char *dir)
{
    _cleanup_(closedirp) DIR *dp = opendir(dir);
    if (!dp)
        return;
    char *names[CDI_MAX_FILES];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(dp)) && n < CDI_MAX_FILES)
        if (de->d_name[0] != '.' &&
            (str_has_suffix(de->d_name, ".json") || str_has_suffix(de->d_name, ".yaml") ||
             str_has_suffix(de->d_name, ".yml")))
            names[n++] = xstrdup(de->d_name);
    qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, names[i]);
        struct err e = {0};
        struct cdi_spec *s = NULL;
        if (cdi_spec_load(path, &s, &e) < 0) {
            log_debug(COMP, "CDI spec skipped", "error=\"%s\"", err_msg(&e));
            sbuf_addf(&reg->broken, "%s%s", reg->broken.len ? "; " : "", err_msg(&e));
            continue;
        }
        reg->specs = xrealloc(reg->specs, (reg->n + 1) * sizeof(*reg->specs));
        reg->specs[reg->n++] = s;
    }
    names_free(names, n);
}

int cdi_registry_load(const char *const *dirs, size_t n_dirs, struct cdi_registry **ret,
                      struct err *e)
{
    (void)e;
    struct cdi_registry *reg = xcalloc(1, sizeof(*reg));
    sbuf_init(&reg->broken, 4096);
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
                       *broken ? "; specs that did not parse: " : "", broken);
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
