/* SPDX-License-Identifier: Apache-2.0 */
/* What a bundle never carries (gather.h): Secrets refused, credentials in objects and text
 * replaced by "<redacted>". */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "gather.h"
#include "kobj.h"
#include "yamlcfg.h"

#define RED     GATHER_REDACTED
#define RED_LEN (sizeof(GATHER_REDACTED) - 1)
/* An object nested deeper than this is not walked: it is replaced whole. */
#define WALK_DEPTH 128
/* A field or parameter name longer than this is not one (read as text). */
#define KEY_MAX 128

bool gather_env_name_secret(const char *name)
{
    static const char *const parts[] = {"TOKEN", "PASSWORD",   "PASSWD", "SECRET",
                                        "KEY",   "CREDENTIAL", "AUTH"};
    if (!name)
        return false;
    for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
        if (strcasestr(name, parts[i]))
            return true;
    return false;
}

bool gather_key_secret(const char *key, size_t len)
{
    static const char *const ends[] = {"token",         "password",   "passwd",      "secret",
                                       "apikey",        "accesskey",  "secretkey",   "privatekey",
                                       "clientkeydata", "credential", "credentials", "passphrase",
                                       "authorization", "cookie"};
    char norm[KEY_MAX + 1];
    size_t n = 0;
    if (len == 0 || len > KEY_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)key[i];
        if (c == '-' || c == '_' || c == '.')
            continue;
        if (!isalnum(c))
            return false;
        norm[n++] = (char)tolower(c);
    }
    norm[n] = '\0';
    for (size_t i = 0; i < ARRAY_SIZE(ends); i++) {
        size_t el = strlen(ends[i]);
        if (n >= el && memcmp(norm + n - el, ends[i], el) == 0)
            return true;
    }
    return false;
}

/* A header or field whose value runs to the end of the line ("Bearer x", "a=b; c=d"). */
static bool key_to_eol(const char *key, size_t len)
{
    static const char *const ends[] = {"authorization", "cookie"};
    for (size_t i = 0; i < ARRAY_SIZE(ends); i++) {
        size_t el = strlen(ends[i]);
        if (len >= el && strncasecmp(key + len - el, ends[i], el) == 0)
            return true;
    }
    return false;
}

static bool ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-';
}

static bool b64url_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-';
}

static bool token_char(char c)
{
    return isalnum((unsigned char)c) || (c && strchr("._~+/=-", c));
}

static bool starts_redacted(const char *s, size_t n)
{
    return n >= RED_LEN && memcmp(s, RED, RED_LEN) == 0;
}

/* A JWT at s: three base64url segments, the first two of at least 4 characters, the first
 * starting "eyJ" (a JSON object). Its length, or 0. */
static size_t jwt_len(const char *s, size_t n)
{
    if (n < 3 || memcmp(s, "eyJ", 3) != 0)
        return 0;
    size_t i = 0;
    for (int seg = 0; seg < 3; seg++) {
        size_t start = i;
        while (i < n && b64url_char(s[i]))
            i++;
        if (seg < 2 && (i - start < 4 || i >= n || s[i] != '.'))
            return 0;
        if (seg < 2)
            i++;
    }
    return i;
}

static const char *find(const char *s, size_t n, const char *needle)
{
    return memmem(s, n, needle, strlen(needle));
}

/* "-----BEGIN ... PRIVATE KEY-----" at s: the marker's length, or 0. */
static size_t pem_begin(const char *s, size_t n)
{
    static const char begin[] = "-----BEGIN ";
    if (n < sizeof(begin) - 1 || memcmp(s, begin, sizeof(begin) - 1) != 0)
        return 0;
    size_t i = sizeof(begin) - 1;
    while (i < n && (isupper((unsigned char)s[i]) || s[i] == ' '))
        i++;
    static const char tail[] = "PRIVATE KEY-----";
    size_t tl = sizeof(tail) - 1;
    if (i + 5 > n || memcmp(s + i, "-----", 5) != 0 || i + 5 < tl ||
        memcmp(s + i + 5 - tl, tail, tl) != 0)
        return 0;
    return i + 5;
}

size_t gather_redact_text(const char *t, size_t n, struct sbuf *out)
{
    size_t count = 0, i = 0, seen = 0;
    /* where a replacement ended: what follows starts a word, as it does in the output (after
     * "<redacted>"), so that a second pass reads the text as this one did */
    size_t fresh = SIZE_MAX;
    while (i < n) {
        if (count != seen) {
            seen = count;
            fresh = i;
        }
        size_t rest = n - i;
        const char *s = t + i;
        /* a private key: the markers kept, everything between them replaced */
        size_t pb = s[0] == '-' ? pem_begin(s, rest) : 0;
        if (pb) {
            sbuf_add(out, s, pb);
            const char *end = find(s + pb, rest - pb, "-----END ");
            size_t body = end ? (size_t)(end - (s + pb)) : rest - pb;
            if (!starts_redacted(s + pb, body)) {
                sbuf_adds(out, RED);
                count++;
            } else {
                sbuf_add(out, s + pb, body);
            }
            i += pb + body;
            continue;
        }
        /* a URL's user information */
        if (s[0] == ':' && rest > 3 && s[1] == '/' && s[2] == '/') {
            size_t j = 3;
            while (j < rest && !strchr("/ \t\r\n\"'@<>?#", s[j]))
                j++;
            if (j < rest && s[j] == '@' && j > 3 && !starts_redacted(s + 3, j - 3)) {
                sbuf_adds(out, "://" RED "@");
                count++;
                i += j + 1;
                continue;
            }
            sbuf_add(out, s, 3);
            i += 3;
            continue;
        }
        if (!ident_char(s[0]) || (i > 0 && i != fresh && ident_char(t[i - 1]))) {
            sbuf_add(out, s, 1);
            i++;
            continue;
        }
        /* at the start of a word */
        size_t jl = jwt_len(s, rest);
        if (jl) {
            sbuf_adds(out, RED);
            count++;
            i += jl;
            continue;
        }
        size_t w = 0;
        while (w < rest && ident_char(s[w]))
            w++;
        if (w == 6 && strncasecmp(s, "bearer", 6) == 0) {
            size_t j = w;
            while (j < rest && s[j] == ' ')
                j++;
            size_t k = j;
            while (k < rest && token_char(s[k]))
                k++;
            if (j > w && k > j) {
                sbuf_add(out, s, j);
                sbuf_adds(out, RED);
                count++;
                i += k;
                continue;
            }
        }
        if (gather_key_secret(s, w)) {
            size_t j = w;
            char open = i > 0 && i != fresh ? t[i - 1] : 0;
            if (j < rest && (s[j] == '"' || s[j] == '\'') && s[j] == open)
                j++;
            while (j < rest && (s[j] == ' ' || s[j] == '\t'))
                j++;
            if (j < rest && (s[j] == ':' || s[j] == '=')) {
                j++;
                while (j < rest && (s[j] == ' ' || s[j] == '\t'))
                    j++;
                char q = j < rest && (s[j] == '"' || s[j] == '\'') ? s[j] : 0;
                if (q)
                    j++;
                size_t k = j;
                bool eol = key_to_eol(s, w);
                while (k < rest && s[k] != '\n' && s[k] != '\r') {
                    if (q && s[k] == '\\' && k + 1 < rest) {
                        k += 2;
                        continue;
                    }
                    if (q ? s[k] == q : (!eol && strchr(" \t,;&\"'}])<>", s[k])))
                        break;
                    k++;
                }
                if (k > rest)
                    k = rest;
                bool structure = !q && k > j && s[j] && strchr("{[|>", s[j]);
                if (k > j && !structure && !starts_redacted(s + j, k - j)) {
                    sbuf_add(out, s, j);
                    sbuf_adds(out, RED);
                    count++;
                    i += k;
                    continue;
                }
            }
        }
        sbuf_add(out, s, w);
        i += w;
    }
    return count;
}

/* Replaces the string in place when redaction changed it. */
static size_t redact_string(json_t *holder, const char *key, size_t index, json_t *str)
{
    const char *v = json_string_value(str);
    size_t len = json_string_length(str);
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, len * 12 + 64); /* each replacement adds at most 10 bytes to 1 */
    size_t n = gather_redact_text(v, len, &b);
    if (n == 0)
        return 0;
    json_t *nv = sbuf_check(&b) == 0 ? json_stringn(b.data, b.len) : NULL;
    if (!nv)
        nv = json_string(RED); /* unfit or not UTF-8 any more: all of it goes */
    if (key)
        json_object_set_new(holder, key, nv);
    else
        json_array_set_new(holder, index, nv);
    return n;
}

static size_t walk(json_t *v, int depth);

/* A string field: by its name, as embedded JSON (last-applied-configuration), or as text. */
static size_t redact_field(json_t *obj, const char *k, json_t *c)
{
    size_t len = json_string_length(c);
    if (gather_key_secret(k, strlen(k)) && len > 0 && !streq_ptr(json_string_value(c), RED)) {
        json_object_set_new(obj, k, json_string(RED));
        return 1;
    }
    if (str_has_suffix(k, "last-applied-configuration")) {
        json_t *inner = json_loadb(json_string_value(c), len, 0, NULL);
        if (json_is_object(inner)) {
            size_t n = walk(inner, 1);
            if (n) {
                char *d = json_dumps(inner, JSON_COMPACT);
                json_object_set_new(obj, k, json_string(d ? d : RED));
                free(d);
            }
            json_decref(inner);
            return n;
        }
        json_decref(inner);
    }
    return redact_string(obj, k, 0, c);
}

static size_t walk(json_t *v, int depth)
{
    size_t n = 0;
    if (json_is_object(v)) {
        /* an env var (or any name/value pair) whose name says credential */
        json_t *name = json_object_get(v, "name"), *val = json_object_get(v, "value");
        if (json_is_string(name) && json_is_string(val) && json_string_length(val) > 0 &&
            gather_env_name_secret(json_string_value(name)) &&
            !streq_ptr(json_string_value(val), RED)) {
            json_object_set_new(v, "value", json_string(RED));
            n++;
        }
        const char *k;
        json_t *c;
        void *tmp;
        json_object_foreach_safe (v, tmp, k, c) {
            if (depth >= WALK_DEPTH && (json_is_object(c) || json_is_array(c))) {
                json_object_set_new(v, k, json_string(RED));
                n++;
            } else if (json_is_string(c)) {
                n += redact_field(v, k, c);
            } else {
                n += walk(c, depth + 1);
            }
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach (v, i, c) {
            if (depth >= WALK_DEPTH && (json_is_object(c) || json_is_array(c))) {
                json_array_set_new(v, i, json_string(RED));
                n++;
            } else if (json_is_string(c)) {
                n += redact_string(v, NULL, i, c);
            } else {
                n += walk(c, depth + 1);
            }
        }
    }
    return n;
}

size_t gather_redact_object(json_t *obj)
{
    json_object_del(json_object_get(obj, "metadata"), "managedFields");
    return walk(obj, 0);
}

void gather_redact_url(const char *url, char *buf, size_t n)
{
    assert(n >= 16);
    const char *u = url ? url : "";
    const char *scheme_end = strstr(u, "://");
    const char *host = scheme_end ? scheme_end + 3 : u;
    size_t auth_len = strcspn(host, "/?#");
    const char *at = memrchr(host, '@', auth_len);
    const char *h = at ? at + 1 : host;
    size_t hl = auth_len - (size_t)(h - host);
    size_t pl = strcspn(host + auth_len, "?#");
    snprintf(buf, n, "%.*s%.*s%.*s", scheme_end ? (int)(scheme_end + 3 - u) : 0, u, (int)hl, h,
             (int)pl, host + auth_len);
}

static bool is_secret(const json_t *obj)
{
    return streq_ptr(kobj_kind(obj), "Secret") || streq_ptr(kobj_kind(obj), "SecretList");
}

int gather_object_yaml(const json_t *obj, struct sbuf *out, size_t *ret_redactions, struct err *e)
{
    size_t i;
    json_t *it;
    bool secret = is_secret(obj);
    json_array_foreach (json_object_get(obj, "items"), i, it)
        secret = secret || is_secret(it);
    if (secret)
        return err_set(e, -EPERM, "%s: a Secret is never collected", kobj_name(obj) ?: "object");
    _cleanup_(json_decrefp) json_t *copy = json_deep_copy(obj);
    if (!copy)
        return err_set(e, -ENOMEM, "copy %s", kobj_name(obj) ?: "object");
    size_t n = gather_redact_object(copy);
    int r = yaml_emit(copy, out, e);
    if (r < 0)
        return r;
    *ret_redactions = n;
    return 0;
}
