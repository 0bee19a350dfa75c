/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The interface between tomlx.c (in gpuop) and gpuop-tomlx.so (tomlx-module.cc, toml++ and with
 * it libstdc++): plain C types only, no gpuop library call in the module. The module is loaded on
 * the first TOML operation (tomlx_open), so only the components that edit or check a runtime's
 * TOML config map those libraries. Module and binary come from the same build; the ABI number and
 * the table's size catch a module from another one.
 */
#ifndef GPUOP_TOMLX_MODULE_H
#define GPUOP_TOMLX_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TOMLX_MODULE_NAME   "gpuop-tomlx.so"
#define TOMLX_MODULE_ENV    "GPUOP_TOMLX_MODULE" /* a path: that module file and no other */
#define TOMLX_MODULE_SYMBOL "gpuop_tomlx_module"
#define TOMLX_MODULE_ABI    1u

struct tomlx;

enum tomlx_type {
    TOMLX_NONE, /* no such key */
    TOMLX_TABLE,
    TOMLX_ARRAY,
    TOMLX_STRING,
    TOMLX_INT,
    TOMLX_FLOAT,
    TOMLX_BOOL,
    TOMLX_OTHER, /* dates and times */
};

/* The operations of tomlx.h that need toml++, with the same contracts, but for these two:
 * parse: a syntax error is -EINVAL with *ret_line and *ret_col (1-based; 0 when not known) and
 *   *ret_what the parser's description (malloc'ed; NULL when there is none or no memory);
 *   -ENOMEM when out of memory. Nothing is written on success but *ret.
 * emit: the document as TOML in *ret (malloc'ed, ends with a newline unless empty) and *ret_len;
 *   -ENOMEM. */
struct tomlx_module {
    unsigned abi; /* TOMLX_MODULE_ABI */
    size_t size;  /* sizeof(struct tomlx_module) */
    int (*parse)(const char *data, size_t len, struct tomlx **ret, unsigned *ret_line,
                 unsigned *ret_col, char **ret_what);
    struct tomlx *(*new_doc)(void);
    void (*free_doc)(struct tomlx *t);
    bool (*empty)(const struct tomlx *t);
    enum tomlx_type (*type_at)(const struct tomlx *t, const char *const *path, size_t n);
    int (*get_int)(const struct tomlx *t, const char *const *path, size_t n, int64_t *ret);
    int (*get_bool)(const struct tomlx *t, const char *const *path, size_t n, bool *ret);
    int (*get_str)(const struct tomlx *t, const char *const *path, size_t n, char **ret);
    int (*str_array_len)(const struct tomlx *t, const char *const *path, size_t n);
    int (*str_array_get)(const struct tomlx *t, const char *const *path, size_t n, size_t i,
                         char **ret);
    int (*span)(const struct tomlx *t, const char *const *path, size_t n, unsigned *ret_line,
                unsigned *ret_col, unsigned *ret_end_line, unsigned *ret_end_col);
    int (*set_bool)(struct tomlx *t, const char *const *path, size_t n, bool v);
    int (*set_str)(struct tomlx *t, const char *const *path, size_t n, const char *v);
    int (*set_str_array)(struct tomlx *t, const char *const *path, size_t n, const char *const *v,
                         size_t nv);
    int (*copy)(const struct tomlx *src, const char *const *spath, size_t sn, struct tomlx *dst,
                const char *const *dpath, size_t dn);
    int (*remove)(struct tomlx *t, const char *const *path, size_t n);
    bool (*equal)(const struct tomlx *a, const struct tomlx *b);
    int (*emit)(const struct tomlx *t, char **ret, size_t *ret_len);
};

/* The module's one exported symbol (TOMLX_MODULE_SYMBOL): its table, or NULL when abi is not
 * the module's. */
typedef const struct tomlx_module *tomlx_module_fn(unsigned abi);

#ifdef __cplusplus
}
#endif

#endif
