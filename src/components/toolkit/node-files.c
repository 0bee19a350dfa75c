/* SPDX-License-Identifier: Apache-2.0 */
/* The toolkit's files on the host (toolkit-internal.h): the CDI spec generated and written when
 * it changes, and the .toolkit-ctr-ready marker. */
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "toolkit-internal.h"

char *tk_on_host(const struct tk *t, const char *path)
{
    return nvcdi_host_path(t->host_root, "/", path);
}

int tk_write_file(const char *path, const char *what, const char *data, size_t len, unsigned mode,
                  struct err *e)
{
    _cleanup_free_ char *dir = xstrdup(path);
    char *d = dirname(dir);
    int r = mkdir_p(d, 0755);
    struct stat st;
    if (r < 0 || stat(d, &st) < 0 || !S_ISDIR(st.st_mode))
        return err_errno(e, r < 0 ? r : -ENOTDIR, "%s directory \"%s\"", what, d);
    if ((r = file_write_atomic(path, data, len, mode, e)) < 0)
        return err_prefix(e, "%s", what);
    return 0;
}

/* What the generator left out of the spec (a driver file whose links lead outside the driver
 * root, the hooks without gpuop installed), logged once each time it changes. */
static void log_warnings(struct tk *t)
{
    const struct nvcdi_warning *w;
    size_t n = nvcdi_gen_warnings(t->gen, &w);
    _cleanup_sbuf_ struct sbuf b;
    sbuf_init(&b, 1u << 20);
    for (size_t i = 0; i < n; i++)
        sbuf_addf(&b, "%s|%s|%s\n", w[i].what, w[i].path, w[i].reason);
    const char *now = b.data ? b.data : "";
    if (t->last_warnings && strcmp(t->last_warnings, now) == 0)
        return;
    for (size_t i = 0; i < n; i++)
        log_warn(TK_COMP, w[i].what, "path=%s reason=\"%s\"", w[i].path, w[i].reason);
    free(t->last_warnings);
    t->last_warnings = xstrdup(now);
}

int tk_generate(struct tk *t, char **ret, char *ret_version, size_t version_len, struct err *e)
{
    int r = nvcdi_gen_spec(t->gen, ret, ret_version, version_len, e);
    strlcpy_s(t->driver_root_now, nvcdi_gen_driver_root(t->gen), sizeof(t->driver_root_now));
    if (r == 0)
        log_warnings(t);
    return r;
}

int tk_put_spec(struct tk *t, char *spec, const char *version, struct err *e)
{
    if (t->last_spec && strcmp(t->last_spec, spec) == 0) {
        free(spec);
        return 0;
    }
    int r = tk_write_file(t->spec_host, "CDI spec", spec, strlen(spec), 0644, e);
    if (r < 0) {
        free(spec);
        return r;
    }
    log_info(TK_COMP, "CDI spec written", "path=%s driver=%s driver_root=%s", t->cdi_spec, version,
             t->driver_root_now);
    free(t->last_spec);
    t->last_spec = spec;
    return 0;
}

void tk_remove_spec(struct tk *t)
{
    if (unlink(t->spec_host) < 0 && errno != ENOENT)
        log_warn(TK_COMP, "cannot remove the CDI spec", "path=%s errno=%d", t->cdi_spec, errno);
    free(t->last_spec);
    t->last_spec = NULL;
}

int tk_write_marker(struct tk *t, struct err *e)
{
    struct rtconfig_options o;
    char path[512];
    toolkit_rt_options(t->runtime_class, t->install_dir, t->set_as_default, t->rt.restart, path,
                       sizeof(path), &o);
    _cleanup_free_ char *text = NULL;
    int r = toolkit_marker_render(&t->rt, &o, t->cdi_spec, t->install_dir, &text, e);
    if (r < 0)
        return r;
    _cleanup_free_ char *dir = tk_on_host(t, t->validations_dir);
    return nodestate_file_write(dir, NODESTATE_TOOLKIT_CTR_READY, text, e);
}

bool tk_marker_exists(const struct tk *t)
{
    _cleanup_free_ char *dir = tk_on_host(t, t->validations_dir);
    return nodestate_file_exists(dir, NODESTATE_TOOLKIT_CTR_READY);
}

void tk_remove_marker(struct tk *t)
{
    struct err e = {0};
    _cleanup_free_ char *dir = tk_on_host(t, t->validations_dir);
    if (nodestate_file_remove(dir, NODESTATE_TOOLKIT_CTR_READY, &e) < 0)
        log_warn(TK_COMP, "cannot remove the ready marker", "error=\"%s\"", err_msg(&e));
}
