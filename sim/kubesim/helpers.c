/* SPDX-License-Identifier: Apache-2.0 */
/* Pure predicates over objects shared by every layer (paths and metadata: src/kobj). */
#include <ctype.h>
#include <math.h>
#include <string.h>

#include "kubesim-internal.h"

char *ks_text_take(struct sbuf *b)
{
    if (sbuf_check(b) == 0)
        return sbuf_steal(b);
    char *t = xasprintf("%s... (cut: longer than %zu bytes)", b->data ? b->data : "", b->limit);
    sbuf_free(b);
    return t;
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
    return kobj_path(o, "metadata.deletionTimestamp") != NULL;
}

bool ks_pod_ready(json_t *pod)
{
    if (!streq_ptr(kobj_path_str(pod, "status.phase"), "Running") || ks_is_deleting(pod))
        return false;
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(pod, "status.conditions"), i, c)
        if (streq_ptr(kobj_str(c, "type"), "Ready"))
            return streq_ptr(kobj_str(c, "status"), "True");
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
