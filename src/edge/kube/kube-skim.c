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
    char *out; /* NULL: nothing is copied (kube_json_find) */
    size_t o;
    const char *const *paths;
    const char *under;       /* NULL, or the root's member the paths are under */
    struct kube_span *found; /* kube_json_find: where each path's value is; NULL: dropped */
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
    if (!k->out)
        return;
    memcpy(k->out + k->o, p, len);
    k->o += len;
}

/* 2: `path` (len bytes) is one of the paths (*ret_idx: which); 1: a path goes on below it;
 * 0: neither */
static int path_match(const char *const *paths, const char *path, size_t len, size_t *ret_idx)
{
    int m = 0;
    for (size_t i = 0; paths[i]; i++) {
        /* path may hold any byte, a NUL too: compared by length */
        if (strnlen(paths[i], len) < len || memcmp(paths[i], path, len) != 0)
            continue;
        if (paths[i][len] == '\0') {
            *ret_idx = i;
            return 2;
        }
        if (paths[i][len] == '.')
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
        size_t idx = 0;
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
            m = path_match(k->paths, k->path, clen, &idx);
        }
        if (m == 2) {
            size_t vs = k->i;
            if (!skip_value(k))
                return false;
            if (k->found) {
                if (k->found[idx].text)
                    return false; /* twice: jansson keeps the last, the caller decodes */
                k->found[idx] = (struct kube_span){k->s + vs, k->i - vs};
            }
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

bool kube_json_find(const char *in, size_t n, const char *const *paths, struct kube_span *ret)
{
    assert(in && paths && ret);
    size_t np = 0;
    while (paths[np])
        np++;
    memset(ret, 0, np * sizeof(*ret));
    struct skim k = {.s = in, .n = n, .paths = paths, .found = ret};
    ws(&k);
    if (k.i >= n || in[k.i] != '{' || !object(&k, 0, 0))
        return false;
    ws(&k);
    return k.i == n;
}

/* What the escape at p[0] ('\\', with p[1] inside the text) stands for: a character (0-127),
 * 128 for any character outside ASCII, -1 for no valid escape. *ret_len: its length. */
static int escape_char(const char *p, const char *end, size_t *ret_len)
{
    static const char simple[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
    *ret_len = 2;
    if (p[1] != 'u') {
        for (size_t i = 0; i + 1 < sizeof(simple); i += 2)
            if (simple[i] == p[1])
                return (unsigned char)simple[i + 1];
        return -1;
    }
    if (end - p < 6)
        return -1;
    unsigned cp = 0;
    for (int i = 2; i < 6; i++) {
        char c = p[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d == 16)
            return -1;
        cp = cp * 16 + d;
    }
    *ret_len = 6;
    return cp < 128 ? (int)cp : 128;
}

static bool any_holds(const char *const *const *groups, int ch)
{
    for (size_t g = 0; groups[g]; g++)
        for (size_t i = 0; groups[g][i]; i++)
            for (const unsigned char *c = (const unsigned char *)groups[g][i]; *c; c++)
                if (ch == 128 ? *c >= 128 : *c == (unsigned)ch)
                    return true;
    return false;
}

bool kube_json_may_hold(const char *text, size_t n, const char *const *const *groups)
{
    assert(groups);
    for (size_t g = 0; groups[g]; g++) {
        bool all = true;
        for (size_t i = 0; all && groups[g][i]; i++) {
            size_t l = strlen(groups[g][i]);
            all = l == 0 || memmem(text, n, groups[g][i], l) != NULL;
        }
        if (all)
            return true;
    }
    /* Not in the text as it is; nor hidden by an escape? Escapes are read from the left, as a
     * decoder does (outside strings JSON holds no backslash); one that stands for a character
     * none of the strings holds cannot be part of a match ("\"" in a kubectl annotation, "\u003c"
     * for '<'), any other may be: decode. */
    const char *end = text + n;
    for (const char *p = memchr(text, '\\', n); p; p = memchr(p, '\\', (size_t)(end - p))) {
        if (end - p < 2)
            return true;
        size_t len;
        int ch = escape_char(p, end, &len);
        if (ch < 0 || any_holds(groups, ch))
            return true;
        p += len;
        if (p >= end)
            break;
    }
    return false;
}

/* A span found by kube_json_find as a string without escapes, copied to buf (n bytes); false
 * when it is none or does not fit. An absent one is "" (*ret_set false). */
static bool plain_string(const struct kube_span *sp, char *buf, size_t n, bool *ret_set)
{
    *ret_set = sp->text != NULL;
    buf[0] = '\0';
    if (!sp->text)
        return true;
    if (sp->n < 2 || sp->text[0] != '"' || sp->n - 2 >= n || memchr(sp->text + 1, '\\', sp->n - 2))
        return false;
    memcpy(buf, sp->text + 1, sp->n - 2);
    buf[sp->n - 2] = '\0';
    return true;
}

bool kube_prefilter_pass(const struct kube_prefilter *pf, const char *text, size_t n, bool event)
{
    if (!pf || !pf->groups || kube_json_may_hold(text, n, pf->groups))
        return false;
    static const char *const item_paths[] = {"metadata.namespace", "metadata.name",
                                             "metadata.resourceVersion", NULL};
    static const char *const event_paths[] = {"object.metadata.namespace", "object.metadata.name",
                                              "object.metadata.resourceVersion", "type", NULL};
    struct kube_span sp[4];
    if (!kube_json_find(text, n, event ? event_paths : item_paths, sp))
        return false;
    enum kube_watch_type t = KUBE_WATCH_ADDED;
    if (event) {
        static const char *const names[] = {"\"ADDED\"", "\"MODIFIED\"", "\"DELETED\""};
        static const enum kube_watch_type types[] = {KUBE_WATCH_ADDED, KUBE_WATCH_MODIFIED,
                                                     KUBE_WATCH_DELETED};
        size_t i = 0;
        while (i < ARRAY_SIZE(names) &&
               !(sp[3].n == strlen(names[i]) && memcmp(sp[3].text, names[i], sp[3].n) == 0))
            i++;
        if (i == ARRAY_SIZE(names))
            return false; /* a BOOKMARK, an ERROR, anything else: decoded */
        t = types[i];
    }
    char ns[KUBE_PREFILTER_NAME_MAX], name[KUBE_PREFILTER_NAME_MAX], rv[KUBE_PREFILTER_NAME_MAX];
    bool has_ns, has_name, has_rv;
    if (!plain_string(&sp[0], ns, sizeof(ns), &has_ns) ||
        !plain_string(&sp[1], name, sizeof(name), &has_name) || !has_name || !name[0] ||
        !plain_string(&sp[2], rv, sizeof(rv), &has_rv))
        return false;
    return pf->pass(t, has_ns && ns[0] ? ns : NULL, name, has_rv ? rv : NULL, pf->userdata);
}
