/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tomlx in gpuop: the calls of internal/tomlx.h through the table of gpuop-tomlx.so
 * (internal/tomlx-module.h), loaded once, on the first TOML operation. The string helpers that
 * need no parser (tomlx_quote, tomlx_keys_free) are here, in C.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "tomlx.h"

static const struct tomlx_module *mod;
static struct err load_err;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* Errors say what the module is for: the caller adds the file being read. */
static void load(void)
{
    void *h;
    _cleanup_free_ char *path = NULL;
    if (module_open(TOMLX_MODULE_NAME, TOMLX_MODULE_ENV, &h, &path, &load_err) < 0) {
        err_prefix(&load_err, "the TOML parser");
        return;
    }
    tomlx_module_fn *fn;
    /* POSIX guarantees object and function pointers convert through dlsym's void *. */
    *(void **)(&fn) = dlsym(h, TOMLX_MODULE_SYMBOL);
    if (!fn) {
        err_set(&load_err, -ELIBBAD, "the TOML parser: \"%s\" has no %s: not gpuop's %s", path,
                TOMLX_MODULE_SYMBOL, TOMLX_MODULE_NAME);
        return;
    }
    const struct tomlx_module *m = fn(TOMLX_MODULE_ABI);
    if (!m || m->abi != TOMLX_MODULE_ABI || m->size != sizeof(*m)) {
        err_set(&load_err, -ELIBBAD,
                "the TOML parser: \"%s\" is not of interface version %u: a module from another "
                "gpuop build",
                path, TOMLX_MODULE_ABI);
        return;
    }
    mod = m;
}

int tomlx_open(struct err *e)
{
    pthread_once(&load_once, load);
    if (!mod)
        return err_set(e, load_err.code ? load_err.code : -ELIBACC, "%s", load_err.msg);
    return 0;
}

int tomlx_parse(const char *data, size_t len, struct tomlx **ret, unsigned *ret_line, struct err *e)
{
    int r = tomlx_open(e);
    if (r < 0)
        return r;
    unsigned line, col;
    _cleanup_free_ char *what = NULL;
    struct tomlx *t;
    r = mod->parse(data, len, &t, &line, &col, &what);
    if (r == -ENOMEM)
        return err_set(e, r, "out of memory parsing TOML");
    if (r < 0 && line == 0)
        return err_set(e, -EINVAL, "TOML parser failed");
    if (r < 0) {
        if (ret_line)
            *ret_line = line;
        return err_set(e, -EINVAL, "line %u, column %u: %s", line, col,
                       what ? what : "syntax error");
    }
    *ret = t;
    return 0;
}

struct tomlx *tomlx_new(void)
{
    struct err e = {0};
    return tomlx_open(&e) < 0 ? NULL : mod->new_doc();
}

/* Every call below has a document, so the module is there. */
void tomlx_free(struct tomlx *t)
{
    if (t)
        mod->free_doc(t);
}

bool tomlx_empty(const struct tomlx *t)
{
    return mod->empty(t);
}

enum tomlx_type tomlx_type_at(const struct tomlx *t, const char *const *path, size_t n)
{
    return mod->type_at(t, path, n);
}

int tomlx_get_int(const struct tomlx *t, const char *const *path, size_t n, int64_t *ret)
{
    return mod->get_int(t, path, n, ret);
}

int tomlx_get_bool(const struct tomlx *t, const char *const *path, size_t n, bool *ret)
{
    return mod->get_bool(t, path, n, ret);
}

int tomlx_get_str(const struct tomlx *t, const char *const *path, size_t n, char **ret)
{
    return mod->get_str(t, path, n, ret);
}

int tomlx_str_array_len(const struct tomlx *t, const char *const *path, size_t n)
{
    return mod->str_array_len(t, path, n);
}

int tomlx_str_array_get(const struct tomlx *t, const char *const *path, size_t n, size_t i,
                        char **ret)
{
    return mod->str_array_get(t, path, n, i, ret);
}

int tomlx_span(const struct tomlx *t, const char *const *path, size_t n, unsigned *ret_line,
               unsigned *ret_col, unsigned *ret_end_line, unsigned *ret_end_col)
{
    return mod->span(t, path, n, ret_line, ret_col, ret_end_line, ret_end_col);
}

int tomlx_set_bool(struct tomlx *t, const char *const *path, size_t n, bool v)
{
    return mod->set_bool(t, path, n, v);
}

int tomlx_set_str(struct tomlx *t, const char *const *path, size_t n, const char *v)
{
    return mod->set_str(t, path, n, v);
}

int tomlx_set_str_array(struct tomlx *t, const char *const *path, size_t n, const char *const *v,
                        size_t nv)
{
    return mod->set_str_array(t, path, n, v, nv);
}

int tomlx_copy(const struct tomlx *src, const char *const *spath, size_t sn, struct tomlx *dst,
               const char *const *dpath, size_t dn)
{
    return mod->copy(src, spath, sn, dst, dpath, dn);
}

int tomlx_remove(struct tomlx *t, const char *const *path, size_t n)
{
    return mod->remove(t, path, n);
}

bool tomlx_equal(const struct tomlx *a, const struct tomlx *b)
{
    return mod->equal(a, b);
}

int tomlx_emit(const struct tomlx *t, struct sbuf *out)
{
    _cleanup_free_ char *s = NULL;
    size_t len = 0;
    int r = mod->emit(t, &s, &len);
    if (r < 0)
        return sbuf_fail(out, r);
    r = sbuf_append(out, s, len);
    return r < 0 ? r : 0;
}

void tomlx_keys_free(char **keys, size_t n)
{
    if (!keys)
        return;
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

void tomlx_quote(struct sbuf *out, const char *s)
{
    sbuf_adds(out, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            sbuf_adds(out, "\\\"");
            break;
        case '\\':
            sbuf_adds(out, "\\\\");
            break;
        case '\n':
            sbuf_adds(out, "\\n");
            break;
        case '\t':
            sbuf_adds(out, "\\t");
            break;
        case '\r':
            sbuf_adds(out, "\\r");
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                sbuf_addf(out, "\\u%04x", *p);
            else
                sbuf_add(out, p, 1);
        }
    }
    sbuf_adds(out, "\"");
}
