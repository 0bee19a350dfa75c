/* SPDX-License-Identifier: Apache-2.0 */
/* Pure predicates over objects shared by every layer (paths and metadata: src/base/kobj). */
#include <ctype.h>
#include <errno.h>
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

json_t *ks_own_member(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    json_t *c = json_is_object(v) ? json_copy(v) : json_object();
    json_object_set_new(o, key, c);
    return c;
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

int ks_quantity_milli(json_t *v, int64_t *ret)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0)
            return -EINVAL;
        *ret = i > INT64_MAX / 1000 ? INT64_MAX : (int64_t)i * 1000;
        return 0;
    }
    if (json_is_real(v)) {
        long double x = (long double)json_real_value(v);
        if (!(x >= 0))
            return -EINVAL;
        x = ceill(x * 1000.0L - 1e-9L);
        *ret = x >= (long double)INT64_MAX ? INT64_MAX : (int64_t)x;
        return 0;
    }
    int64_t m;
    if (kobj_quantity_milli(json_string_value(v), &m) < 0 || m < 0)
        return -EINVAL;
    *ret = m;
    return 0;
}

bool ks_node_external(json_t *node)
{
    return streq_ptr(kobj_annotation(node, KS_EXTERNAL_KUBELET_ANNOTATION), "external");
}
