/* SPDX-License-Identifier: Apache-2.0 */
/* The API server's syntax rules for names, labels, quantities and percentages (kobj.h). */
#include <ctype.h>
#include <inttypes.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "util.h"

static bool is_alnum_lower(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool dns_label_n(const char *s, size_t n)
{
    if (n == 0 || n > 63 || !is_alnum_lower(s[0]) || !is_alnum_lower(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum_lower(s[i]) && s[i] != '-')
            return false;
    return true;
}

/* Labels separated by single dots, at most 253 bytes in all. */
static bool dns_subdomain_n(const char *s, size_t n)
{
    if (n == 0 || n > 253)
        return false;
    const char *end = s + n;
    for (const char *p = s;;) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t l = dot ? (size_t)(dot - p) : (size_t)(end - p);
        if (!dns_label_n(p, l))
            return false;
        if (!dot)
            return true;
        p = dot + 1;
    }
}

bool kobj_valid_dns_label(const char *s)
{
    return dns_label_n(s, strlen(s));
}

bool kobj_valid_dns_subdomain(const char *s)
{
    return dns_subdomain_n(s, strlen(s));
}

/* At most 63 of [A-Za-z0-9_.-], alphanumeric at both ends (the empty string excluded). */
static bool name_part(const char *s, size_t n)
{
    if (n == 0 || n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

bool kobj_valid_label_value(const char *s)
{
    size_t n = strlen(s);
    return n == 0 || name_part(s, n);
}

bool kobj_valid_qualified_name(const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash)
        return name_part(s, strlen(s));
    return dns_subdomain_n(s, (size_t)(slash - s)) && name_part(slash + 1, strlen(slash + 1));
}

bool kobj_valid_iana_svc_name(const char *s)
{
    size_t n = strlen(s);
    bool letter = false;
    if (n == 0 || n > 15 || s[0] == '-' || s[n - 1] == '-' || strstr(s, "--"))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!is_alnum_lower(s[i]) && s[i] != '-')
            return false;
        letter = letter || (s[i] >= 'a' && s[i] <= 'z');
    }
    return letter;
}

bool kobj_valid_quantity(const char *s, bool *ret_negative)
{
    /* [+-]? (digits[.digits?] | .digits) (binary SI | decimal SI | e[+-]?digits)? */
    const char *p = s;
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    const char *d0 = p;
    bool nonzero = false;
    for (; isdigit((unsigned char)*p); p++)
        nonzero |= *p != '0';
    bool int_digits = p > d0;
    if (*p == '.') {
        p++;
        const char *f0 = p;
        for (; isdigit((unsigned char)*p); p++)
            nonzero |= *p != '0';
        if (!int_digits && p == f0)
            return false;
    } else if (!int_digits) {
        return false;
    }
    bool ok = *p == '\0';
    static const char *const suffixes[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u",
                                           "m",  "k",  "M",  "G",  "T",  "P",  "E"};
    for (size_t i = 0; !ok && i < ARRAY_SIZE(suffixes); i++)
        ok = strcmp(p, suffixes[i]) == 0;
    if (!ok && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        if (*q == '+' || *q == '-')
            q++;
        ok = isdigit((unsigned char)*q) != 0;
        for (; ok && *q; q++)
            ok = isdigit((unsigned char)*q) != 0;
    }
    if (ok && ret_negative)
        *ret_negative = neg && nonzero;
    return ok;
}

bool kobj_valid_percent(const char *s)
{
    size_t digits = strspn(s, "0123456789");
    return digits > 0 && strcmp(s + digits, "%") == 0;
}

int kobj_quantity_milli(const char *s, int64_t *ret)
{
    bool neg;
    if (!s || !kobj_valid_quantity(s, &neg))
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    long double v = strtold(s, &end);
    if (errno || end == s)
        return -EINVAL;
    static const struct {
        const char *sfx;
        long double mul;
    } sfx[] = {
        {"Ki", 1024.0L},
        {"Mi", 1048576.0L},
        {"Gi", 1073741824.0L},
        {"Ti", 1099511627776.0L},
        {"Pi", 1125899906842624.0L},
        {"Ei", 1152921504606846976.0L},
        {"n", 1e-9L},
        {"u", 1e-6L},
        {"m", 1e-3L},
        {"", 1.0L},
        {"k", 1e3L},
        {"M", 1e6L},
        {"G", 1e9L},
        {"T", 1e12L},
        {"P", 1e15L},
        {"E", 1e18L},
    };
    /* strtold took an exponent ("2e3") already; what remains is a suffix or nothing */
    long double mul = -1;
    for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++)
        if (strcmp(end, sfx[i].sfx) == 0)
            mul = sfx[i].mul;
    if (mul < 0)
        return -EINVAL;
    long double milli = ceill(v * mul * 1000.0L - 1e-9L);
    if (milli >= (long double)INT64_MAX)
        *ret = INT64_MAX;
    else if (milli <= (long double)INT64_MIN)
        *ret = INT64_MIN;
    else
        *ret = (int64_t)milli;
    return 0;
}

void kobj_quantity_format(int64_t milli, bool binary, char *buf, size_t n)
{
    if (milli % 1000 != 0) {
        snprintf(buf, n, "%" PRId64 "m", milli);
        return;
    }
    int64_t v = milli / 1000;
    static const char *const dec[] = {"", "k", "M", "G", "T", "P", "E"};
    static const char *const bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    size_t e = 0;
    if (v == 0) {
        snprintf(buf, n, "0");
        return;
    }
    if (binary && v % 1024 == 0) {
        while (e + 1 < ARRAY_SIZE(bin) && v % 1024 == 0) {
            v /= 1024;
            e++;
        }
        snprintf(buf, n, "%" PRId64 "%s", v, bin[e]);
        return;
    }
    while (e + 1 < ARRAY_SIZE(dec) && v % 1000 == 0) {
        v /= 1000;
        e++;
    }
    snprintf(buf, n, "%" PRId64 "%s", v, dec[e]);
}

int kobj_int_or_percent(const json_t *v, const char *field, json_t **ret, struct err *e)
{
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return err_set(e, -EINVAL,
                           "%s: Invalid value: %lld: must be greater than or equal "
                           "to 0",
                           field, (long long)json_integer_value(v));
        *ret = json_incref((json_t *)v);
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s)
        return err_set(e, -EINVAL, "%s: Invalid value: must be an integer or a percentage", field);
    size_t n = strlen(s);
    size_t digits = strspn(s, "0123456789");
    if (digits == 0 || digits > 9 || !(digits == n || kobj_valid_percent(s)))
        return err_set(e, -EINVAL,
                       "%s: Invalid value: \"%s\": a valid percent string must be a numeric "
                       "string followed by an ending '%%' (e.g. '1%%', or '93%%'), or an integer",
                       field, s);
    long val = strtol(s, NULL, 10);
    if (s[n - 1] == '%') {
        if (val > 100)
            return err_set(e, -EINVAL, "%s: Invalid value: \"%s\": must not be greater than 100%%",
                           field, s);
        *ret = json_incref((json_t *)v);
        return 0;
    }
    /* An integer written as a string: the API server takes only a JSON integer. */
    *ret = json_integer(val);
    return 0;
}

long long kobj_int_or_percent_scaled(const json_t *v, long long total, bool round_up)
{
    if (json_is_integer(v))
        return json_integer_value(v);
    const char *s = json_string_value(v);
    if (!s)
        return 0;
    long long pct = strtoll(s, NULL, 10);
    long long num = pct * total;
    return round_up ? (num + 99) / 100 : num / 100;
}
