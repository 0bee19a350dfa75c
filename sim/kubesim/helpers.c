/* SPDX-License-Identifier: Apache-2.0 */
/* Small JSON accessors and pure predicates over objects shared by every layer. */
#include <ctype.h>
#include <math.h>
#include <string.h>

#include "kubesim-internal.h"

json_t *jpath(json_t *v, const char *dotted)
{
    char part[256];
    const char *p = dotted;
    while (v && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof(part))
            return NULL;
        memcpy(part, p, n);
        part[n] = '\0';
        v = json_object_get(v, part);
        p += n + (dot ? 1 : 0);
    }
    return v;
}

const char *jstr(json_t *v, const char *dotted)
{
    return json_string_value(jpath(v, dotted));
}

json_t *jensure(json_t *v, const char *key)
{
    json_t *c = json_object_get(v, key);
    if (!json_is_object(c)) {
        c = json_object();
        json_object_set_new(v, key, c);
    }
    return c;
}

char *ks_lower_dup(const char *s)
{
    char *r = xstrdup(s);
    for (char *p = r; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return r;
}

bool ks_is_deleting(json_t *o)
{
    return jpath(o, "metadata.deletionTimestamp") != NULL;
}

bool ks_pod_ready(json_t *pod)
{
    if (!streq_ptr(jstr(pod, "status.phase"), "Running") || ks_is_deleting(pod))
        return false;
    size_t i;
    json_t *c;
    json_array_foreach (jpath(pod, "status.conditions"), i, c)
        if (streq_ptr(jstr(c, "type"), "Ready"))
            return streq_ptr(jstr(c, "status"), "True");
    return false;
}

bool ks_has_finalizer(json_t *obj, const char *f)
{
    size_t i;
    json_t *x;
    json_array_foreach (jpath(obj, "metadata.finalizers"), i, x)
        if (streq_ptr(json_string_value(x), f))
            return true;
    return false;
}

int64_t ks_intstr_scaled(json_t *v, int64_t total, bool round_up, int64_t dflt)
{
    if (json_is_integer(v))
        return json_integer_value(v);
    const char *s = json_string_value(v);
    if (!s)
        return dflt;
    char *end = NULL;
    double pct = strtod(s, &end);
    if (end == s || !end || *end != '%') {
        int64_t n;
        return parse_i64(s, &n) == 0 ? n : dflt;
    }
    double x = pct * (double)total / 100.0;
    return (int64_t)(round_up ? ceil(x) : floor(x));
}
