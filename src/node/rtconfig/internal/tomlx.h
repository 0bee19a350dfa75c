/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tomlx: the few TOML operations rtconfig needs, in C, over toml++ (Debian's libtomlplusplus,
 * a maintained TOML 1.0 parser; Debian 12 ships no C TOML library). A document is parsed from
 * bytes, read and changed by key paths (arrays of key strings), and written back out. Every
 * entry point catches C++ exceptions: none crosses into C. No I/O.
 *
 * Written-out documents are toml++'s canonical form, not the input's bytes: rtconfig uses it
 * only for files it owns (drop-ins); edits of a user's file are text splices located by
 * tomlx_span (see rt-containerd.c).
 */
#ifndef GPUOP_TOMLX_H
#define GPUOP_TOMLX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "util.h" /* a C header without its own extern "C" */

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

/* Parses len bytes (need not be NUL-terminated). A syntax error: -EINVAL, e says "line L,
 * column C: <what>" and *ret_line (may be NULL) the line. */
int tomlx_parse(const char *data, size_t len, struct tomlx **ret, unsigned *ret_line,
                struct err *e);
struct tomlx *tomlx_new(void); /* an empty document */
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
/* Keys of the table at path (malloc'ed array of malloc'ed strings, in document order). */
int tomlx_keys(const struct tomlx *t, const char *const *path, size_t n, char ***ret,
               size_t *ret_n);
void tomlx_keys_free(char **keys, size_t n);
/* Structural equality of two documents. */
bool tomlx_equal(const struct tomlx *a, const struct tomlx *b);
/* Appends the document as TOML (sub-tables not indented). 0, or sbuf's error. */
int tomlx_emit(const struct tomlx *t, struct sbuf *out);
/* Appends s as a TOML basic string, quotes included. */
void tomlx_quote(struct sbuf *out, const char *s);

#ifdef __cplusplus
}
#endif

#endif
