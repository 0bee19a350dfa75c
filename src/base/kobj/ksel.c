/* SPDX-License-Identifier: Apache-2.0 */
/* Label selectors (kobj.h): the string form the API takes in ?labelSelector= and in policies
 * that name pods or nodes, and matchLabels. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "util.h"

#define SEL_MAX 4096 /* bytes; a longer selector is refused */

enum sel_op { SEL_EXISTS, SEL_NOT_EXISTS, SEL_EQ, SEL_NE, SEL_IN, SEL_NOTIN };

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static size_t token_len(const char *p)
{
    return strcspn(p, " \t,=!()");
}

/* Does value (n bytes) appear in the set "(a, b, c)" that starts at *pp? Advances past ')'. */
static int parse_set(const char **pp, const char *val, bool *ret_in, struct err *e, const char *sel)
{
    const char *p = skip_ws(*pp);
    if (*p != '(')
        return err_set(e, -EINVAL, "label selector \"%s\": expected '(' after in/notin", sel);
    p++;
    bool in = false;
    for (;;) {
        p = skip_ws(p);
        size_t n = token_len(p);
        if (val && n == strlen(val) && strncmp(p, val, n) == 0)
            in = true;
        p = skip_ws(p + n);
        if (*p == ')')
            break;
        if (*p != ',')
            return err_set(e, -EINVAL, "label selector \"%s\": unterminated value set", sel);
        p++;
    }
    *pp = p + 1;
    *ret_in = in;
    return 0;
}

static int selector_eval(const char *sel, const json_t *labels, bool *ret_match, struct err *e)
{
    if (!sel)
        sel = "";
    if (strlen(sel) > SEL_MAX)
        return err_set(e, -E2BIG, "label selector: longer than %d bytes", SEL_MAX);
    bool all = true;
    const char *p = skip_ws(sel);
    while (*p) {
        bool neg = false;
        if (*p == '!') {
            neg = true;
            p = skip_ws(p + 1);
        }
        size_t kn = token_len(p);
        if (kn == 0 || kn > 316)
            return err_set(e, -EINVAL, "label selector \"%s\": expected a label key at \"%s\"", sel,
                           p);
        char key[320];
        memcpy(key, p, kn);
        key[kn] = '\0';
        if (!kobj_valid_qualified_name(key))
            return err_set(e, -EINVAL, "label selector \"%s\": invalid label key \"%s\"", sel, key);
        const char *have = kobj_labels_get(labels, key);
        p = skip_ws(p + kn);
        enum sel_op op = neg ? SEL_NOT_EXISTS : SEL_EXISTS;
        if (!neg && (strncmp(p, "==", 2) == 0 || strncmp(p, "!=", 2) == 0 || *p == '=')) {
            op = *p == '!' ? SEL_NE : SEL_EQ;
            p = skip_ws(p + (p[1] == '=' ? 2 : 1));
            size_t vn = token_len(p);
            char val[64];
            if (vn >= sizeof(val))
                return err_set(e, -EINVAL, "label selector \"%s\": value too long", sel);
            memcpy(val, p, vn);
            val[vn] = '\0';
            if (!kobj_valid_label_value(val))
                return err_set(e, -EINVAL, "label selector \"%s\": invalid value \"%s\"", sel, val);
            bool eq = have && strcmp(have, val) == 0;
            all = all && (op == SEL_EQ ? eq : !eq);
            p = skip_ws(p + vn);
        } else if (!neg && (strncmp(p, "in", 2) == 0 || strncmp(p, "notin", 5) == 0) &&
                   token_len(p) == (p[0] == 'i' ? 2u : 5u)) {
            op = p[0] == 'i' ? SEL_IN : SEL_NOTIN;
            p += op == SEL_IN ? 2 : 5;
            bool in = false;
            int r = parse_set(&p, have, &in, e, sel);
            if (r < 0)
                return r;
            all = all && (op == SEL_IN ? in : !in);
            p = skip_ws(p);
        } else {
            all = all && (op == SEL_EXISTS ? have != NULL : have == NULL);
        }
        if (*p == ',') {
            p = skip_ws(p + 1);
            if (!*p)
                return err_set(e, -EINVAL, "label selector \"%s\": trailing ','", sel);
        } else if (*p) {
            return err_set(e, -EINVAL, "label selector \"%s\": unexpected \"%s\"", sel, p);
        }
    }
    *ret_match = all;
    return 0;
}

int kobj_selector_match(const char *sel, const json_t *labels, bool *ret_match, struct err *e)
{
    return selector_eval(sel, labels, ret_match, e);
}

int kobj_selector_check(const char *sel, struct err *e)
{
    bool m;
    return selector_eval(sel, NULL, &m, e);
}

bool kobj_labels_match(const json_t *match, const json_t *labels)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)match, k, v) {
        const char *have = kobj_labels_get(labels, k);
        if (!have || !json_is_string(v) || strcmp(have, json_string_value(v)) != 0)
            return false;
    }
    return true;
}

static bool in_values(const json_t *values, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (values, i, v)
        if (s && streq_ptr(json_string_value(v), s))
            return true;
    return false;
}

bool kobj_match_expression(const json_t *expr, const json_t *labels)
{
    const char *key = kobj_str(expr, "key"), *op = kobj_str(expr, "operator");
    const json_t *values = json_object_get(expr, "values");
    const char *val = kobj_labels_get(labels, key);
    if (streq_ptr(op, "In"))
        return in_values(values, val);
    if (streq_ptr(op, "NotIn"))
        return !in_values(values, val);
    if (streq_ptr(op, "Exists"))
        return val != NULL;
    if (streq_ptr(op, "DoesNotExist"))
        return val == NULL;
    if (streq_ptr(op, "Gt") || streq_ptr(op, "Lt")) {
        const char *lim = json_string_value(json_array_get(values, 0));
        if (!val || !lim)
            return false;
        long long a = strtoll(val, NULL, 10), b = strtoll(lim, NULL, 10);
        return streq_ptr(op, "Gt") ? a > b : a < b;
    }
    return false;
}
