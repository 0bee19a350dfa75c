/* SPDX-License-Identifier: Apache-2.0 */
/* Codecs several modules need: hex digits, base64, URL percent-encoding; FNV-1a. Bytes in, bytes
 * out. */
#include <ctype.h>
#include <string.h>

#include "util.h"

int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

uint64_t hash_fnv1a64(const void *data, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

int hex_parse(const char *s, size_t n, uint64_t *ret)
{
    if (!s || n == 0 || n > 16)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = hex_digit(s[i]);
        if (d < 0)
            return -EINVAL;
        v = v << 4 | (uint64_t)d;
    }
    *ret = v;
    return 0;
}

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const void *data, size_t n)
{
    const unsigned char *d = data;
    char *r = xmalloc((n + 2) / 3 * 4 + 1);
    size_t j = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)d[i + 1] << 8;
        if (i + 2 < n)
            v |= d[i + 2];
        r[j++] = b64_alphabet[(v >> 18) & 63];
        r[j++] = b64_alphabet[(v >> 12) & 63];
        r[j++] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
        r[j++] = i + 2 < n ? b64_alphabet[v & 63] : '=';
    }
    r[j] = '\0';
    return r;
}

static int b64_value(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

int base64_decode(const char *in, size_t n, char **ret, size_t *ret_len)
{
    _cleanup_free_ char *out = xmalloc(n / 4 * 3 + 4);
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    bool pad = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)in[i];
        if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
            continue;
        if (ch == '=') {
            pad = true;
            continue;
        }
        int v = b64_value(ch);
        if (v < 0 || pad)
            return -EINVAL;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (bits >= 6) /* a lone trailing sextet encodes nothing */
        return -EINVAL;
    out[o] = '\0';
    *ret_len = o;
    *ret = steal_ptr(&out);
    return 0;
}

char *url_decode(const char *s, size_t n, bool plus_space)
{
    char *r = xmalloc(n + 1);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
            r[j++] = (char)(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
            i += 2;
        } else if (plus_space && s[i] == '+') {
            r[j++] = ' ';
        } else {
            r[j++] = s[i];
        }
    }
    r[j] = '\0';
    return r;
}

int url_encode(struct sbuf *out, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        int r = isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~'
                    ? sbuf_append(out, s, 1)
                    : sbuf_printf(out, "%%%02X", ch);
        if (r < 0)
            return r;
    }
    return 0;
}
