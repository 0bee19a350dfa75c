/* SPDX-License-Identifier: Apache-2.0 */
/* JSON values to YAML text (yamlcfg.h: yaml_emit), through libyaml's emitter. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "yamlcfg.h"

/* Whether a plain scalar s would read back as something other than a string, to YAML 1.2's
 * core schema (yamlcfg's own reading) or YAML 1.1's (kubectl's, PyYAML's): null and booleans in
 * any case, the 1.1 words yes/no/on/off/y/n, and anything that starts as a number does (integers,
 * floats, .inf, .nan, octal, hex, sexagesimal, timestamps). Such a string is quoted. */
bool yaml_plain_is_typed(const char *s, size_t len)
{
    static const char *const words[] = {"~",   "null", "true", "false", "yes",   "no",    "on",
                                        "off", "y",    "n",    ".inf",  "-.inf", "+.inf", ".nan"};
    if (len == 0)
        return true;
    for (size_t i = 0; i < ARRAY_SIZE(words); i++)
        if (len == strlen(words[i]) && strncasecmp(s, words[i], len) == 0)
            return true;
    size_t i = 0;
    if (s[0] == '-' || s[0] == '+')
        i++;
    if (i < len && s[i] == '.')
        i++;
    return i < len && s[i] >= '0' && s[i] <= '9';
}

struct emit {
    yaml_emitter_t em;
    struct sbuf *out;
};

static int on_write(void *data, unsigned char *buffer, size_t size)
{
    struct sbuf *out = data;
    sbuf_add(out, buffer, size);
    return sbuf_check(out) == 0; /* 0 stops the emitter */
}

static int emitter_err(struct emit *x, struct err *e)
{
    if (sbuf_check(x->out) < 0)
        return err_set(e, -E2BIG, "YAML output: larger than the limit of %zu bytes", x->out->limit);
    return err_set(e, -EINVAL, "YAML output: %s", x->em.problem ? x->em.problem : "emitter error");
}

static int emit_event(struct emit *x, yaml_event_t *ev, struct err *e)
{
    return yaml_emitter_emit(&x->em, ev) ? 0 : emitter_err(x, e);
}

static int scalar(struct emit *x, const char *s, size_t len, bool string, struct err *e)
{
    yaml_event_t ev;
    yaml_scalar_style_t style = YAML_ANY_SCALAR_STYLE;
    if (string && memchr(s, '\n', len))
        style = YAML_LITERAL_SCALAR_STYLE; /* the emitter quotes it where a block cannot be */
    int plain_implicit = !string || !yaml_plain_is_typed(s, len);
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)len, plain_implicit,
                                      1, style))
        return err_set(e, -ENOMEM, "YAML output: scalar event");
    return emit_event(x, &ev, e);
}

static int node(struct emit *x, const json_t *v, int depth, struct err *e)
{
    if (depth > YAML_MAX_DEPTH)
        return err_set(e, -EINVAL, "YAML output: nested deeper than %d", YAML_MAX_DEPTH);
    yaml_event_t ev;
    char num[64];
    int r;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_ANY_MAPPING_STYLE))
            return err_set(e, -ENOMEM, "YAML output: mapping event");
        if ((r = emit_event(x, &ev, e)) < 0)
            return r;
        const char *k;
        json_t *c;
        json_object_foreach ((json_t *)v, k, c) {
            if ((r = scalar(x, k, strlen(k), true, e)) < 0 || (r = node(x, c, depth + 1, e)) < 0)
                return r;
        }
        yaml_mapping_end_event_initialize(&ev);
        return emit_event(x, &ev, e);
    }
    case JSON_ARRAY: {
        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_ANY_SEQUENCE_STYLE))
            return err_set(e, -ENOMEM, "YAML output: sequence event");
        if ((r = emit_event(x, &ev, e)) < 0)
            return r;
        size_t i;
        json_t *c;
        json_array_foreach (v, i, c) {
            if ((r = node(x, c, depth + 1, e)) < 0)
                return r;
        }
        yaml_sequence_end_event_initialize(&ev);
        return emit_event(x, &ev, e);
    }
    case JSON_STRING:
        return scalar(x, json_string_value(v), json_string_length(v), true, e);
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return scalar(x, num, strlen(num), false, e);
    case JSON_REAL: {
        int n = snprintf(num, sizeof(num), "%.17g", json_real_value(v));
        if (n > 0 && (size_t)n < sizeof(num) - 2 && !strpbrk(num, ".eEn"))
            strcat(num, ".0"); /* read back as a float, not an integer */
        return scalar(x, num, strlen(num), false, e);
    }
    case JSON_TRUE:
        return scalar(x, "true", 4, false, e);
    case JSON_FALSE:
        return scalar(x, "false", 5, false, e);
    case JSON_NULL:
    default:
        return scalar(x, "null", 4, false, e);
    }
}

int yaml_emit(const json_t *v, struct sbuf *out, struct err *e)
{
    struct emit x = {.out = out};
    if (!yaml_emitter_initialize(&x.em))
        return err_set(e, -ENOMEM, "YAML output: emitter");
    yaml_emitter_set_output(&x.em, on_write, out);
    yaml_emitter_set_unicode(&x.em, 1);
    yaml_emitter_set_width(&x.em, -1); /* no folding of long lines */
    yaml_emitter_set_indent(&x.em, 2);
    yaml_event_t ev;
    int r = 0;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    if ((r = emit_event(&x, &ev, e)) < 0)
        goto done;
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
    if ((r = emit_event(&x, &ev, e)) < 0 || (r = node(&x, v, 0, e)) < 0)
        goto done;
    yaml_document_end_event_initialize(&ev, 1);
    if ((r = emit_event(&x, &ev, e)) < 0)
        goto done;
    yaml_stream_end_event_initialize(&ev);
    if ((r = emit_event(&x, &ev, e)) < 0)
        goto done;
    if (!yaml_emitter_flush(&x.em))
        r = emitter_err(&x, e);
done:
    yaml_emitter_delete(&x.em);
    return r;
}
