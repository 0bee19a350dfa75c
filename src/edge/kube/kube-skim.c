/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Members no reader uses, left out of an object's JSON text before jansson decodes it
 * (kube_json_drop, kube-internal.h): a real node's `metadata.managedFields` and `status.images`
 * are three quarters of its 19 KB, and decoding them is most of what decoding the node costs.
 * The text is copied, leaving out the members at the given paths; values off those paths are
 * copied as they are (their brackets and strings followed, not validated: jansson validates
 * what is decoded, and a fault inside a value left out goes unseen). Anything unexpected on the
 * way (not an object, a member name with escapes in an object the paths go through, an
 * unterminated string, a depth over DROP_DEPTH_MAX) gives up: the caller decodes the original
 * text and jansson names the fault.
 */
#include <assert.h>
#include <string.h>

#include "kube-internal.h"

#define DROP_DEPTH_MAX 8   /* members' nesting along the paths */
#define DROP_PATH_MAX  256 /* a dotted path's length */

struct skim {
    const char *s;
    size_t n, i;
    char *out;
    size_t o;
    const char *const *paths;
    const char *under; /* NULL, or the root's member the paths are under */
    char path[DROP_PATH_MAX];
};

static void ws(struct skim *k)
{
    while (k->i < k->n &&
           (k->s[k->i] == ' ' || k->s[k->i] == '\t' || k->s[k->i] == '\n' || k->s[k->i] == '\r'))
        k->i++;
}

/* k->i at a quote: past the closing one, or false */
static bool skip_string(struct skim *k)
{
    size_t j = k->i + 1;
    while (j < k->n) {
        char c = k->s[j];
        if (c == '\\')
            j += 2;
        else if (c == '"') {
            k->i = j + 1;
            return true;
        } else
            j++;
    }
    return false;
}

/* One value, whatever it is, skipped; false when it does not end */
static bool skip_value(struct skim *k)
{
    ws(k);
    if (k->i >= k->n)
        return false;
    char c = k->s[k->i];
    if (c == '"')
        return skip_string(k);
    if (c == '{' || c == '[') {
        size_t depth = 0;
        while (k->i < k->n) {
            c = k->s[k->i];
            if (c == '"') {
                if (!skip_string(k))
                    return false;
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if ((c == '}' || c == ']') && --depth == 0) {
                k->i++;
                return true;
            }
            k->i++;
        }
        return false;
    }
    size_t start = k->i;
    while (k->i < k->n && !strchr(",}] \t\n\r", k->s[k->i]))
        k->i++;
    return k->i > start;
}

static void emit(struct skim *k, const char *p, size_t len)
{
    memcpy(k->out + k->o, p, len);
    k->o += len;
}

/* 2: `path` (len bytes) is one of the paths; 1: a path goes on below it; 0: neither */
static int path_match(const char *const *paths, const char *path, size_t len)
{
    int m = 0;
    for (; *paths; paths++) {
        /* path may hold any byte, a NUL too: compared by length */
        if (strnlen(*paths, len) < len || memcmp(*paths, path, len) != 0)
            continue;
        if ((*paths)[len] == '\0')
            return 2;
        if ((*paths)[len] == '.')
            m = 1;
    }
    return m;
}

/* k->i at '{' of the object at k->path (plen bytes of it) */
static bool object(struct skim *k, size_t plen, int depth)
{
    if (depth > DROP_DEPTH_MAX)
        return false;
    emit(k, "{", 1);
    k->i++;
    ws(k);
    if (k->i < k->n && k->s[k->i] == '}') {
        k->i++;
        emit(k, "}", 1);
        return true;
    }
    bool first = true;
    for (;;) {
        ws(k);
        if (k->i >= k->n || k->s[k->i] != '"')
            return false;
        size_t ks = k->i;
        if (!skip_string(k))
            return false;
        size_t klen = k->i - ks - 2; /* the name, quotes off */
        ws(k);
        if (k->i >= k->n || k->s[k->i] != ':')
            return false;
        k->i++;
        ws(k);
        const char *key = k->s + ks + 1;
        size_t clen = plen ? plen + 1 + klen : klen;
        int m = 0;
        if (memchr(key, '\\', klen))
            return false; /* a name with escapes where the paths go: jansson reads it */
        if (depth == 0 && k->under) {
            /* the root holds the object the paths are about (a watch event's "object") */
            if (klen == strlen(k->under) && memcmp(key, k->under, klen) == 0)
                m = 1;
            clen = 0;
        } else if (!memchr(key, '.', klen) && clen < sizeof(k->path)) {
            if (plen)
                k->path[plen] = '.';
            memcpy(k->path + (plen ? plen + 1 : 0), key, klen);
            m = path_match(k->paths, k->path, clen);
        }
        if (m == 2) {
            if (!skip_value(k))
                return false;
        } else {
            if (!first)
                emit(k, ",", 1);
            first = false;
            emit(k, k->s + ks, klen + 2);
            emit(k, ":", 1);
            if (m == 1 && k->i < k->n && k->s[k->i] == '{') {
                if (!object(k, clen, depth + 1))
                    return false;
            } else {
                size_t vs = k->i;
                if (!skip_value(k))
                    return false;
                emit(k, k->s + vs, k->i - vs);
            }
        }
        ws(k);
        if (k->i >= k->n)
            return false;
        if (k->s[k->i] == ',') {
            k->i++;
            continue;
        }
        if (k->s[k->i] == '}') {
            k->i++;
            emit(k, "}", 1);
            return true;
        }
        return false;
    }
}

size_t kube_json_drop(const char *in, size_t n, const char *const *paths, const char *under,
                      char *out)
{
    assert(in && out && paths);
    struct skim k = {.s = in, .n = n, .out = out, .paths = paths, .under = under};
    ws(&k);
    if (k.i >= n || in[k.i] != '{' || !object(&k, 0, 0))
        return SIZE_MAX;
    ws(&k);
    if (k.i != n)
        return SIZE_MAX;
    assert(k.o <= n); /* only members and blanks are left out */
    return k.o;
}
