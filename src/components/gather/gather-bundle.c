/* SPDX-License-Identifier: Apache-2.0 */
/* The bundle (gather.h): a tar stream (POSIX ustar; a pax header where a name does not fit)
 * compressed with zlib's gzip into a buffer bounded by --max-size, and its index.
 *
 * The bound holds by construction: every entry is flushed (Z_SYNC_FLUSH) so what is written is
 * known exactly, and room for the index and the stream's end is kept. An entry whose worst case
 * compressed (GZ_BOUND, above zlib's own deflateBound) fits goes in at once; one that fits only
 * if it compresses is tried on a copy of the compressor's state (deflateCopy) and, when it does
 * not fit after all, the state and the output are put back as they were and it is left out. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gather.h"

#define BLOCK 512u
/* Worst case of n bytes after a sync flush, compressed: zlib's deflateBound for its default
 * window and memory is n + n/4096 + n/16384 + n/2^25 + 7 + the wrapper; this is above it, with
 * the sync flush's marker and the final block counted. */
#define GZ_BOUND(n) ((uint64_t)(n) + ((uint64_t)(n) >> 11) + 64)
/* Room kept for the index's lines about what the bound leaves out, and its two headers. */
#define INDEX_SLACK (32u << 10)
#define CHUNK       (64u << 10)

struct gather_bundle {
    char *root;
    uint64_t max;
    uint64_t now_ms;
    json_t *facts;
    json_t *collected; /* [{"path","bytes","redactions","what"}] */
    json_t *missing;   /* [{"what","why"}] */
    uint64_t index_estimate;
    z_stream z;
    bool z_ok, full, finished;
    unsigned char *out; /* the .tar.gz so far, never more than max bytes */
    size_t out_len, out_cap;
    unsigned char chunk[CHUNK];
};

static uint64_t round_block(uint64_t n)
{
    return (n + BLOCK - 1) / BLOCK * BLOCK;
}

/* ---- tar ---------------------------------------------------------------------------------- */

static void octal(char *field, size_t width, uint64_t v)
{
    /* width-1 digits and a NUL */
    snprintf(field, width, "%0*llo", (int)(width - 1), (unsigned long long)v);
}

static void checksum(char block[BLOCK])
{
    memset(block + 148, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < BLOCK; i++)
        sum += (unsigned char)block[i];
    snprintf(block + 148, 8, "%06o", sum);
    block[155] = ' ';
}

static void header(char block[BLOCK], char type, uint64_t size, uint64_t mtime_s)
{
    memcpy(block + 100, "0000644", 8);
    memcpy(block + 108, "0000000", 8);
    memcpy(block + 116, "0000000", 8);
    octal(block + 124, 12, size);
    octal(block + 136, 12, mtime_s);
    block[156] = type;
    memcpy(block + 257, "ustar", 6);
    memcpy(block + 263, "00", 2);
    memcpy(block + 265, "root", 5);
    memcpy(block + 297, "root", 5);
    checksum(block);
}

int gather_tar_header(const char *name, uint64_t size, uint64_t mtime_s, char block[BLOCK])
{
    size_t len = strlen(name);
    memset(block, 0, BLOCK);
    if (len == 0 || size > 077777777777ull)
        return -EINVAL;
    if (len <= 100) {
        memcpy(block, name, len);
    } else {
        /* ustar's split: prefix (<= 155) '/' name (<= 100) */
        size_t p = len - 101;
        while (p < len && name[p] != '/')
            p++;
        if (p >= len || p > 155 || p == 0 || len - p - 1 == 0)
            return -ENAMETOOLONG;
        memcpy(block + 345, name, p);
        memcpy(block, name + p + 1, len - p - 1);
    }
    header(block, '0', size, mtime_s);
    return 0;
}

/* A pax extended header's record "<n> path=<name>\n", n counting the whole record. */
static char *pax_path_record(const char *name, size_t *ret_len)
{
    size_t payload = strlen(" path=") + strlen(name) + 1, digits = 1;
    while (1) {
        size_t total = payload + digits;
        size_t d = 0;
        for (size_t t = total; t; t /= 10)
            d++;
        if (d == digits)
            break;
        digits = d;
    }
    char *r = xasprintf("%zu path=%s\n", payload + digits, name);
    *ret_len = payload + digits;
    assert(strlen(r) == *ret_len);
    return r;
}

/* ---- gzip --------------------------------------------------------------------------------- */

static int z_feed(struct gather_bundle *b, const void *data, size_t len, int flush, struct err *e)
{
    b->z.next_in = (Bytef *)data;
    b->z.avail_in = (uInt)len;
    assert(len <= UINT32_MAX);
    do {
        b->z.next_out = b->chunk;
        b->z.avail_out = CHUNK;
        int rc = deflate(&b->z, flush);
        if (rc == Z_STREAM_ERROR || (rc != Z_OK && rc != Z_BUF_ERROR && rc != Z_STREAM_END))
            return err_set(e, -EIO, "gzip: %s", b->z.msg ? b->z.msg : "deflate failed");
        size_t have = CHUNK - b->z.avail_out;
        if (have && b->out_len + have > b->max) /* a trial that does not fit (add) */
            return err_set(e, -EFBIG, "the bundle passed its bound of %llu bytes",
                           (unsigned long long)b->max);
        if (b->out_len + have > b->out_cap) {
            size_t cap = b->out_cap ? b->out_cap : CHUNK;
            while (cap < b->out_len + have)
                cap *= 2;
            b->out_cap = cap < b->max ? cap : (size_t)b->max;
            b->out = xrealloc(b->out, b->out_cap);
        }
        memcpy(b->out + b->out_len, b->chunk, have);
        b->out_len += have;
    } while (b->z.avail_out == 0);
    assert(b->z.avail_in == 0);
    return 0;
}

/* Writes data in pieces zlib's 32-bit counts take. */
static int z_write(struct gather_bundle *b, const void *data, size_t len, struct err *e)
{
    const char *p = data;
    while (len) {
        size_t n = len > (1u << 30) ? (1u << 30) : len;
        int r = z_feed(b, p, n, Z_NO_FLUSH, e);
        if (r < 0)
            return r;
        p += n;
        len -= n;
    }
    return 0;
}

/* ---- entries ------------------------------------------------------------------------------ */

/* Whether a bundle path is made of safe parts: no empty, "." or ".." part, no leading '/'. */
static bool safe_path(const char *path)
{
    if (!path[0] || path[0] == '/')
        return false;
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        for (size_t i = 0; i < n; i++) {
            char c = p[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-'))
                return false;
        }
        p += n;
        if (*p == '/')
            p++;
    }
    return true;
}

/* The tar bytes of a file entry (headers, data, padding). */
static uint64_t entry_size(const char *full, size_t len)
{
    char block[BLOCK];
    uint64_t pax = 0;
    if (gather_tar_header(full, len, 0, block) == -ENAMETOOLONG) {
        size_t rl = 0;
        free(pax_path_record(full, &rl));
        pax = BLOCK + round_block(rl);
    }
    return pax + BLOCK + round_block(len);
}

static int write_entry(struct gather_bundle *b, const char *full, const void *data, size_t len,
                       struct err *e)
{
    char block[BLOCK];
    uint64_t mtime = b->now_ms / 1000;
    int r = gather_tar_header(full, len, mtime, block);
    if (r == -ENAMETOOLONG) {
        size_t rl = 0;
        _cleanup_free_ char *rec = pax_path_record(full, &rl);
        char pax[BLOCK];
        _cleanup_free_ char *pname = xasprintf("PaxHeaders/%.80s", strrchr(full, '/') + 1);
        if ((r = gather_tar_header(pname, rl, mtime, pax)) < 0)
            return err_set(e, r, "tar: name %s", full);
        pax[156] = 'x';
        checksum(pax);
        char pad[BLOCK] = {0};
        if ((r = z_write(b, pax, BLOCK, e)) < 0 || (r = z_write(b, rec, rl, e)) < 0 ||
            (r = z_write(b, pad, round_block(rl) - rl, e)) < 0)
            return r;
        /* the ustar name: the last part (cut to fit), which readers without pax still show */
        char last[101];
        strlcpy_s(last, strrchr(full, '/') + 1, sizeof(last));
        if ((r = gather_tar_header(last, len, mtime, block)) < 0)
            return err_set(e, r, "tar: name %s", full);
    } else if (r < 0) {
        return err_set(e, r, "tar: name %s", full);
    }
    char pad[BLOCK] = {0};
    if ((r = z_write(b, block, BLOCK, e)) < 0 || (r = z_write(b, data, len, e)) < 0 ||
        (r = z_write(b, pad, round_block(len) - len, e)) < 0)
        return r;
    return z_feed(b, NULL, 0, Z_SYNC_FLUSH, e);
}

int gather_bundle_new(const struct gather_bundle_opts *o, struct gather_bundle **ret, struct err *e)
{
    if (o->max_size < GATHER_MIN_SIZE || o->max_size > GATHER_MAX_SIZE)
        return err_set(e, -EINVAL, "size bound %llu: expected %u to %llu bytes",
                       (unsigned long long)o->max_size, GATHER_MIN_SIZE,
                       (unsigned long long)GATHER_MAX_SIZE);
    if (!o->root || !safe_path(o->root) || strchr(o->root, '/') || strlen(o->root) > 90)
        return err_set(e, -EINVAL,
                       "bundle folder \"%s\": expected one safe name of at most 90 "
                       "bytes",
                       o->root ? o->root : "");
    struct gather_bundle *b = xcalloc(1, sizeof(*b));
    if (deflateInit2(&b->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
        free(b);
        return err_set(e, -ENOMEM, "gzip: deflateInit2 failed");
    }
    b->z_ok = true;
    b->root = xstrdup(o->root);
    b->max = o->max_size;
    b->now_ms = o->now_ms;
    b->facts = o->facts ? json_deep_copy(o->facts) : json_object();
    b->collected = json_array();
    b->missing = json_array();
    _cleanup_free_ char *f = json_dumps(b->facts, JSON_COMPACT);
    b->index_estimate = 2 * (uint64_t)(f ? strlen(f) : 0) + 2048;
    *ret = b;
    return 0;
}

void gather_bundle_free(struct gather_bundle *b)
{
    if (!b)
        return;
    if (b->z_ok)
        deflateEnd(&b->z);
    free(b->root);
    json_decref(b->facts);
    json_decref(b->collected);
    json_decref(b->missing);
    free(b->out);
    free(b);
}

/* The index's bytes for one record (its line in MANIFEST and its entry in manifest.json). */
static uint64_t record_cost(const char *a, const char *b)
{
    return 2 * (strlen(a) + strlen(b) + 96);
}

/* A line of the index, through the redaction too: API errors may quote what they were given. */
static json_t *index_text(const char *s)
{
    struct sbuf t _cleanup_sbuf_;
    sbuf_init(&t, strlen(s) * 12 + 64);
    gather_redact_text(s, strlen(s), &t);
    json_t *v = sbuf_check(&t) == 0 ? json_stringn(t.data, t.len) : NULL;
    return v ? v : json_string(GATHER_REDACTED);
}

static void missing_add(struct gather_bundle *b, const char *what, const char *why)
{
    json_t *w = index_text(what), *y = index_text(why);
    b->index_estimate += record_cost(json_string_value(w), json_string_value(y));
    json_array_append_new(b->missing, json_pack("{s:o,s:o}", "what", w, "why", y));
}

void gather_bundle_missing(struct gather_bundle *b, const char *what, const char *why_fmt, ...)
{
    char *why = NULL;
    va_list ap;
    va_start(ap, why_fmt);
    int n = vasprintf(&why, why_fmt, ap);
    va_end(ap);
    missing_add(b, what, n >= 0 ? why : "(the reason could not be formatted: out of memory)");
    if (n >= 0)
        free(why);
}

bool gather_bundle_full(const struct gather_bundle *b)
{
    return b->full;
}

void gather_bundle_counts(const struct gather_bundle *b, size_t *ret_files, size_t *ret_missing)
{
    *ret_files = json_array_size(b->collected);
    *ret_missing = json_array_size(b->missing);
}

/* What the end needs whatever else comes: the index (so far, plus the slack) with its two
 * headers, the tar's two zero blocks, gzip's end. */
static uint64_t end_reserve(const struct gather_bundle *b)
{
    return GZ_BOUND(b->index_estimate + INDEX_SLACK + 4 * BLOCK) + GZ_BOUND(2 * BLOCK) + 32;
}

int gather_bundle_add(struct gather_bundle *b, const char *path, const void *data, size_t len,
                      const char *what, size_t redactions, struct err *e)
{
    if (b->finished)
        return err_set(e, -EINVAL, "bundle: %s added after the end", path);
    if (!safe_path(path))
        return err_set(e, -EINVAL, "bundle: \"%s\" is not a safe path", path);
    _cleanup_free_ char *full = xasprintf("%s/%s", b->root, path);
    uint64_t need = GZ_BOUND(entry_size(full, len));
    uint64_t cost = record_cost(path, what);
    b->index_estimate += cost;
    uint64_t reserve = end_reserve(b);
    int r;
    if ((uint64_t)b->out_len + need + reserve <= b->max) {
        r = write_entry(b, full, data, len, e);
    } else if ((uint64_t)b->out_len + reserve + BLOCK >= b->max) {
        r = 1; /* no room for even a header */
    } else {
        /* it fits only if it compresses: tried, and undone when it does not fit */
        z_stream snap;
        if (deflateCopy(&snap, &b->z) != Z_OK)
            return err_set(e, -ENOMEM, "gzip: deflateCopy failed");
        size_t mark = b->out_len;
        struct err te = {0};
        r = write_entry(b, full, data, len, &te);
        if (r == 0 && (uint64_t)b->out_len + reserve > b->max)
            r = -EFBIG;
        if (r == -EFBIG) {
            deflateEnd(&b->z);
            if (deflateCopy(&b->z, &snap) != Z_OK) {
                b->z_ok = false;
                deflateEnd(&snap);
                return err_set(e, -ENOMEM, "gzip: deflateCopy failed");
            }
            b->out_len = mark;
            r = 1;
        } else if (r < 0) {
            *e = te;
        }
        deflateEnd(&snap);
    }
    if (r == 1) {
        b->index_estimate -= cost;
        b->full = true;
        gather_bundle_missing(b, path,
                              "the size bound: %zu bytes (%s) would pass --max-size %llu bytes",
                              len, what, (unsigned long long)b->max);
        return 1;
    }
    if (r < 0)
        return r;
    json_array_append_new(
        b->collected, json_pack("{s:s,s:I,s:I,s:o}", "path", path, "bytes", (json_int_t)len,
                                "redactions", (json_int_t)redactions, "what", index_text(what)));
    return 0;
}

/* ---- the index ---------------------------------------------------------------------------- */

int gather_index_render(const json_t *facts, const json_t *collected, const json_t *missing,
                        size_t n_listed, struct sbuf *text, struct sbuf *js)
{
    size_t nc = json_array_size(collected), nm = json_array_size(missing);
    size_t lc = nc < n_listed ? nc : n_listed, lm = nm < n_listed ? nm : n_listed;
    sbuf_adds(text, "gpuop gather: a support bundle (docs/gather.md)\n\n");
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)facts, k, v) {
        if (json_is_string(v))
            sbuf_addf(text, "%-11s %s\n", k, json_string_value(v));
        else if (json_is_integer(v))
            sbuf_addf(text, "%-11s %" JSON_INTEGER_FORMAT "\n", k, json_integer_value(v));
    }
    sbuf_addf(text,
              "\nCollected: %zu files (bytes before compression; redactions: credentials "
              "replaced by " GATHER_REDACTED ")\n",
              nc);
    json_t *jc = json_array(), *jm = json_array();
    for (size_t i = 0; i < lc; i++) {
        json_t *c = json_array_get(collected, i);
        json_int_t red = json_integer_value(json_object_get(c, "redactions"));
        sbuf_addf(text, "  %s  %" JSON_INTEGER_FORMAT " bytes",
                  json_string_value(json_object_get(c, "path")),
                  json_integer_value(json_object_get(c, "bytes")));
        if (red)
            sbuf_addf(text, "  %" JSON_INTEGER_FORMAT " redacted", red);
        sbuf_addf(text, "  %s\n", json_string_value(json_object_get(c, "what")));
        json_array_append(jc, c);
    }
    if (lc < nc)
        sbuf_addf(text, "  ... and %zu more, not listed (the size bound)\n", nc - lc);
    sbuf_addf(text, "\nNot collected: %zu\n", nm);
    for (size_t i = 0; i < lm; i++) {
        json_t *m = json_array_get(missing, i);
        sbuf_addf(text, "  %s: %s\n", json_string_value(json_object_get(m, "what")),
                  json_string_value(json_object_get(m, "why")));
        json_array_append(jm, m);
    }
    if (lm < nm)
        sbuf_addf(text, "  ... and %zu more, not listed (the size bound)\n", nm - lm);
    if (nm == 0)
        sbuf_adds(text, "  nothing\n");
    _cleanup_(json_decrefp) json_t *doc =
        json_pack("{s:O,s:o,s:o,s:{s:I,s:I}}", "facts", facts, "collected", jc, "missing", jm,
                  "unlisted", "collected", (json_int_t)(nc - lc), "missing", (json_int_t)(nm - lm));
    _cleanup_free_ char *d = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
    if (!d)
        return sbuf_fail(js, -ENOMEM);
    sbuf_adds(js, d);
    sbuf_adds(js, "\n");
    int r = sbuf_check(text);
    return r < 0 ? r : sbuf_check(js);
}

/* The index with at most n entries listed per list: its tar bytes, or UINT64_MAX unfit. */
static uint64_t index_size(const struct gather_bundle *b, size_t n, struct sbuf *text,
                           struct sbuf *js)
{
    sbuf_reset(text);
    sbuf_reset(js);
    if (gather_index_render(b->facts, b->collected, b->missing, n, text, js) < 0)
        return UINT64_MAX;
    _cleanup_free_ char *m = xasprintf("%s/MANIFEST", b->root);
    _cleanup_free_ char *j = xasprintf("%s/manifest.json", b->root);
    return entry_size(m, text->len) + entry_size(j, js->len);
}

int gather_bundle_finish(struct gather_bundle *b, char **ret, size_t *ret_len, struct err *e)
{
    if (b->finished)
        return err_set(e, -EINVAL, "bundle: finished twice");
    b->finished = true;
    uint64_t used = b->out_len + GZ_BOUND(2 * BLOCK) + 32;
    uint64_t avail = b->max > used ? b->max - used : 0;
    size_t all = json_array_size(b->collected);
    if (json_array_size(b->missing) > all)
        all = json_array_size(b->missing);
    struct sbuf text _cleanup_sbuf_, js _cleanup_sbuf_;
    sbuf_init(&text, (size_t)b->max);
    sbuf_init(&js, (size_t)b->max);
    /* everything listed when it fits, else the most entries that fit (a binary search) */
    size_t n = all;
    uint64_t sz = index_size(b, n, &text, &js);
    if (sz == UINT64_MAX || GZ_BOUND(sz) > avail) {
        size_t lo = 0, hi = all; /* lo fits (checked below), hi does not */
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            sz = index_size(b, mid, &text, &js);
            if (sz != UINT64_MAX && GZ_BOUND(sz) <= avail)
                lo = mid;
            else
                hi = mid;
        }
        n = lo;
        sz = index_size(b, n, &text, &js);
        if (sz == UINT64_MAX || GZ_BOUND(sz) > avail)
            return err_set(e, -E2BIG, "the bundle's index does not fit its bound of %llu bytes",
                           (unsigned long long)b->max);
    }
    _cleanup_free_ char *m = xasprintf("%s/MANIFEST", b->root);
    _cleanup_free_ char *j = xasprintf("%s/manifest.json", b->root);
    char zero[2 * BLOCK] = {0};
    int r;
    if ((r = write_entry(b, m, text.data, text.len, e)) < 0 ||
        (r = write_entry(b, j, js.data, js.len, e)) < 0 ||
        (r = z_write(b, zero, sizeof(zero), e)) < 0 || (r = z_feed(b, NULL, 0, Z_FINISH, e)) < 0)
        return r;
    assert(b->out_len <= b->max);
    *ret_len = b->out_len;
    *ret = b->out ? (char *)steal_ptr(&b->out) : xstrdup("");
    b->out_len = b->out_cap = 0;
    return 0;
}
