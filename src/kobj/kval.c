/* SPDX-License-Identifier: Apache-2.0 */
/* The API server's syntax rules for names, labels, quantities and percentages (kobj.h). */
#include <ctype.h>
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
