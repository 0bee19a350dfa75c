/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tomlx: the few TOML operations rtconfig needs, in C. A document is parsed from bytes, read and
 * changed by key paths (arrays of key strings), and written back out. No I/O but one: the parser
 * is toml++ (Debian's libtomlplusplus, a maintained TOML 1.0 parser; Debian 12 ships no C TOML
 * library), which lives in gpuop's module gpuop-tomlx.so (tomlx-module.cc) with libstdc++, loaded
 * on the first parse (tomlx_open), so the components that never read TOML (every one but the
 * toolkit, the validator's and doctor's runtime checks) do not map those libraries.
 *
 * Written-out documents are toml++'s canonical form, not the input's bytes: rtconfig uses it
 * only for files it owns (drop-ins); edits of a user's file are text splices located by
 * tomlx_span (see rtconfig-containerd.c).
 */
#ifndef GPUOP_TOMLX_H
#define GPUOP_TOMLX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tomlx-module.h" /* enum tomlx_type */
#include "util.h"

/* A key path for the calls below: TP("plugins", "cri") gives the array and its length. */
#define TP(...)                           \
    ((const char *const[]){__VA_ARGS__}), \
        (sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

/* Loads gpuop-tomlx.so once per process (util.h's module_open: $GPUOP_TOMLX_MODULE, else beside
 * the executable, else <prefix>/lib/gpuop). -ELIBACC with e naming the paths tried and why; every
 * later call gives the same answer. tomlx_parse calls it; a caller that starts with tomlx_new
 * calls it first for the error. */
int tomlx_open(struct err *e);

/* Parses len bytes (need not be NUL-terminated). A syntax error: -EINVAL, e says "line L,
 * column C: <what>" and *ret_line (may be NULL) the line. */
int tomlx_parse(const char *data, size_t len, struct tomlx **ret, unsigned *ret_line,
                struct err *e);
struct tomlx *tomlx_new(void);    /* an empty document; NULL: no memory, or no module */
void tomlx_free(struct tomlx *t); /* accepts NULL */
DEFINE_CLEANUP_FUNC(struct tomlx, tomlx_free)

bool tomlx_empty(const struct tomlx *t); /* no key at all */
enum tomlx_type tomlx_type_at(const struct tomlx *t, const char *const *path, size_t n);
/* 0, -ENOENT (absent), or -EINVAL (another type). */
int tomlx_get_int(const struct tomlx *t, const char *const *path, size_t n, int64_t *ret);
int tomlx_get_bool(const struct tomlx *t, const char *const *path, size_t n, bool *ret);
int tomlx_get_str(const struct tomlx *t, const char *const *path, size_t n, char **ret);
/* An array of strings: its length, or -ENOENT / -EINVAL; element i into *ret (malloc'ed). */
int tomlx_str_array_len(const struct tomlx *t, const char *const *path, size_t n);
int tomlx_str_array_get(const struct tomlx *t, const char *const *path, size_t n, size_t i,
                        char **ret);
/* Where a value sits in the parsed text: 1-based lines, 1-based columns counted in code points;
 * end is just past the value. -ENOENT when absent or not from the parsed text. */
int tomlx_span(const struct tomlx *t, const char *const *path, size_t n, unsigned *ret_line,
               unsigned *ret_col, unsigned *ret_end_line, unsigned *ret_end_col);

/* Setters create missing tables along the path; -EEXIST when a step is not a table. */
int tomlx_set_bool(struct tomlx *t, const char *const *path, size_t n, bool v);
int tomlx_set_str(struct tomlx *t, const char *const *path, size_t n, const char *v);
int tomlx_set_str_array(struct tomlx *t, const char *const *path, size_t n, const char *const *v,
                        size_t nv);
/* Deep copy of src's node at spath to dst at dpath (replacing what is there). */
int tomlx_copy(const struct tomlx *src, const char *const *spath, size_t sn, struct tomlx *dst,
               const char *const *dpath, size_t dn);
int tomlx_remove(struct tomlx *t, const char *const *path, size_t n); /* absent is fine */
/* Frees an array of n malloc'ed strings (as the imports lists are built). */
void tomlx_keys_free(char **keys, size_t n);
/* Structural equality of two documents. */
bool tomlx_equal(const struct tomlx *a, const struct tomlx *b);
/* Appends the document as TOML (sub-tables not indented). 0, or sbuf's error. */
int tomlx_emit(const struct tomlx *t, struct sbuf *out);
/* Appends s as a TOML basic string, quotes included. */
void tomlx_quote(struct sbuf *out, const char *s);

#endif
