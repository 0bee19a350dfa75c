/* SPDX-License-Identifier: Apache-2.0 */
#include "prom.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <strings.h>

/* q-value of the media range matching `type` in an Accept header; -1 when not listed. */
static double accept_q(const char *accept, const char *type)
{
    double best = -1;
    size_t tl = strlen(type);
    const char *p = accept;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        if (len >= tl && strncasecmp(p, type, tl) == 0 &&
            (len == tl || p[tl] == ';' || p[tl] == ' ' || p[tl] == '\t')) {
            double q = 1.0;
            for (const char *s = p + tl; s < p + len; s++) {
                if (*s != ';')
                    continue;
                const char *t = s + 1;
                while (t < p + len && (*t == ' ' || *t == '\t'))
                    t++;
                if (t + 2 <= p + len && (t[0] == 'q' || t[0] == 'Q') && t[1] == '=') {
                    char tmp[16];
                    size_t ql = 0;
                    for (const char *u = t + 2; u < p + len && ql + 1 < sizeof(tmp) &&
                                                (isdigit((unsigned char)*u) || *u == '.');
                         u++)
                        tmp[ql++] = *u;
                    tmp[ql] = '\0';
                    q = ql ? strtod(tmp, NULL) : 0;
                }
            }
            if (q > best)
                best = q;
        }
        p = end ? end + 1 : NULL;
    }
    return best;
}

enum prom_format prom_negotiate(const char *accept)
{
    if (!accept || !*accept)
        return PROM_FORMAT_TEXT;
    double om = accept_q(accept, "application/openmetrics-text");
    if (om <= 0)
        return PROM_FORMAT_TEXT;
    double text = accept_q(accept, "text/plain");
    double any = accept_q(accept, "*/*");
    if (any > text)
        text = any;
    return om >= text ? PROM_FORMAT_OPENMETRICS : PROM_FORMAT_TEXT;
}

const char *prom_content_type(enum prom_format f)
{
    return f == PROM_FORMAT_OPENMETRICS ? PROM_CT_OPENMETRICS : PROM_CT_TEXT;
}

static bool name_valid(const char *n, bool colon)
{
    if (!n || !*n)
        return false;
    for (const char *p = n; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (colon && c == ':') || (p != n && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

bool prom_valid_metric_name(const char *name)
{
    return name_valid(name, true);
}

bool prom_valid_label_name(const char *name)
{
    return name_valid(name, false);
}

int prom_escape_label_value(struct sbuf *b, const char *v)
{
    const char *run = v;
    for (const char *p = v;; p++) {
        const char *rep = NULL;
        switch (*p) {
        case '\\':
            rep = "\\\\";
            break;
        case '"':
            rep = "\\\"";
            break;
        case '\n':
            rep = "\\n";
            break;
        case '\0':
            return sbuf_append(b, run, (size_t)(p - run));
        default:
            continue;
        }
        int r = sbuf_append(b, run, (size_t)(p - run));
        if (r < 0)
            return r;
        r = sbuf_puts(b, rep);
        if (r < 0)
            return r;
        run = p + 1;
    }
}

static int escape_help(struct sbuf *b, const char *help, bool quotes)
{
    int r = 0;
    for (const char *p = help; *p && r >= 0; p++) {
        if (*p == '\\')
            r = sbuf_puts(b, "\\\\");
        else if (*p == '\n')
            r = sbuf_puts(b, "\\n");
        else if (quotes && *p == '"')
            r = sbuf_puts(b, "\\\"");
        else
            r = sbuf_append(b, p, 1);
    }
    return r;
}

int prom_write_family(struct sbuf *b, enum prom_format f, const char *name, enum prom_type t,
                      const char *help)
{
    const char *type = t == PROM_GAUGE       ? "gauge"
                       : t == PROM_COUNTER   ? "counter"
                       : t == PROM_HISTOGRAM ? "histogram"
                                             : "untyped";
    size_t nlen = strlen(name);
    if (f == PROM_FORMAT_OPENMETRICS) {
        if (t == PROM_UNTYPED) {
            type = "unknown";
        } else if (t == PROM_COUNTER) {
            if (str_has_suffix(name, "_total"))
                nlen -= strlen("_total");
            else
                type = "unknown";
        }
    }
    int r = sbuf_printf(b, "# HELP %.*s ", (int)nlen, name);
    if (r >= 0)
        r = escape_help(b, help ? help : "", f == PROM_FORMAT_OPENMETRICS);
    if (r >= 0)
        r = sbuf_printf(b, "\n# TYPE %.*s %s\n", (int)nlen, name, type);
    return r;
}

int prom_write_value(struct sbuf *b, double v)
{
    if (isnan(v))
        return sbuf_puts(b, "NaN");
    if (isinf(v))
        return sbuf_puts(b, v > 0 ? "+Inf" : "-Inf");
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        return sbuf_printf(b, "%.0f", v);
    char buf[40];
    snprintf(buf, sizeof(buf), "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, sizeof(buf), "%.17g", v);
    return sbuf_puts(b, buf);
}

int prom_write_eof(struct sbuf *b, enum prom_format f)
{
    return f == PROM_FORMAT_OPENMETRICS ? sbuf_puts(b, "# EOF\n") : 0;
}

/* Drops what a failed write appended, so a sample never ends half written. */
static void undo(struct sbuf *b, size_t mark)
{
    if (b->data && mark <= b->len) {
        b->len = mark;
        b->data[mark] = '\0';
    }
}

static int write_labels(struct sbuf *b, const struct prom_label *labels, size_t n, const char *le)
{
    if (n == 0 && !le)
        return 0;
    int r = sbuf_puts(b, "{");
    for (size_t i = 0; i < n && r >= 0; i++) {
        r = sbuf_printf(b, "%s%s=\"", i ? "," : "", labels[i].name);
        if (r >= 0)
            r = prom_escape_label_value(b, labels[i].value ? labels[i].value : "");
        if (r >= 0)
            r = sbuf_puts(b, "\"");
    }
    if (r >= 0 && le)
        r = sbuf_printf(b, "%sle=\"%s\"", n ? "," : "", le);
    if (r >= 0)
        r = sbuf_puts(b, "}");
    return r;
}

/* All or nothing: a sample that does not fit leaves no half line behind. */
static int sample_begin(struct sbuf *b, const char *name, const char *suffix,
                        const struct prom_label *labels, size_t n, const char *le)
{
    int r = sbuf_printf(b, "%s%s", name, suffix);
    if (r >= 0)
        r = write_labels(b, labels, n, le);
    if (r >= 0)
        r = sbuf_puts(b, " ");
    return r;
}

int prom_write_sample(struct sbuf *b, const char *name, const struct prom_label *labels,
                      size_t n_labels, double v)
{
    size_t mark = b->len;
    int r = sample_begin(b, name, "", labels, n_labels, NULL);
    if (r >= 0)
        r = prom_write_value(b, v);
    if (r >= 0)
        r = sbuf_puts(b, "\n");
    if (r < 0)
        undo(b, mark);
    return r;
}

int prom_write_sample_u64(struct sbuf *b, const char *name, const struct prom_label *labels,
                          size_t n_labels, uint64_t v)
{
    size_t mark = b->len;
    int r = sample_begin(b, name, "", labels, n_labels, NULL);
    if (r >= 0)
        r = sbuf_printf(b, "%" PRIu64 "\n", v);
    if (r < 0)
        undo(b, mark);
    return r;
}

int prom_write_histogram(struct sbuf *b, const char *name, const struct prom_label *labels,
                         size_t n_labels, const double *bounds, const uint64_t *cumulative,
                         size_t n_bounds, double sum, uint64_t count)
{
    for (size_t i = 0; i < n_bounds; i++) {
        if (isnan(bounds[i]) || (i && !(bounds[i] > bounds[i - 1])))
            return -EINVAL;
        if ((i && cumulative[i] < cumulative[i - 1]) || cumulative[i] > count)
            return -EINVAL;
    }
    size_t mark = b->len;
    int r = 0;
    for (size_t i = 0; i <= n_bounds && r >= 0; i++) {
        char le[40];
        if (i == n_bounds) {
            strlcpy_s(le, "+Inf", sizeof(le));
        } else {
            struct sbuf tmp;
            sbuf_init(&tmp, sizeof(le) - 1);
            r = prom_write_value(&tmp, bounds[i]);
            if (r >= 0)
                strlcpy_s(le, tmp.data, sizeof(le));
            sbuf_free(&tmp);
            if (r < 0)
                break;
        }
        r = sample_begin(b, name, "_bucket", labels, n_labels, le);
        if (r >= 0)
            r = sbuf_printf(b, "%" PRIu64 "\n", i == n_bounds ? count : cumulative[i]);
    }
    if (r >= 0)
        r = sample_begin(b, name, "_sum", labels, n_labels, NULL);
    if (r >= 0)
        r = prom_write_value(b, sum);
    if (r >= 0)
        r = sbuf_puts(b, "\n");
    if (r >= 0)
        r = sample_begin(b, name, "_count", labels, n_labels, NULL);
    if (r >= 0)
        r = sbuf_printf(b, "%" PRIu64 "\n", count);
    if (r < 0)
        undo(b, mark);
    return r;
}

/* ---- sticky-error writer ------------------------------------------------------------------- */

void prom_writer_init(struct prom_writer *w, struct sbuf *out, enum prom_format f)
{
    w->out = out;
    w->format = f;
}

/* A primitive's failure that left the buffer alone (-EINVAL) becomes the buffer's error too. */
static void sticky(struct prom_writer *w, int r)
{
    sbuf_fail(w->out, r);
}

static bool failed(const struct prom_writer *w)
{
    return sbuf_check(w->out) < 0;
}

void prom_family(struct prom_writer *w, const char *name, enum prom_type t, const char *help)
{
    if (!failed(w))
        sticky(w, prom_write_family(w->out, w->format, name, t, help));
}

void prom_sample(struct prom_writer *w, const char *name, const struct prom_label *labels,
                 size_t n_labels, double v)
{
    if (!failed(w))
        sticky(w, prom_write_sample(w->out, name, labels, n_labels, v));
}

void prom_sample_u64(struct prom_writer *w, const char *name, const struct prom_label *labels,
                     size_t n_labels, uint64_t v)
{
    if (!failed(w))
        sticky(w, prom_write_sample_u64(w->out, name, labels, n_labels, v));
}

void prom_metric(struct prom_writer *w, const char *name, enum prom_type t, const char *help,
                 double v)
{
    prom_family(w, name, t, help);
    prom_sample(w, name, NULL, 0, v);
}

void prom_metric_u64(struct prom_writer *w, const char *name, enum prom_type t, const char *help,
                     uint64_t v)
{
    prom_family(w, name, t, help);
    prom_sample_u64(w, name, NULL, 0, v);
}

void prom_histogram(struct prom_writer *w, const char *name, const struct prom_label *labels,
                    size_t n_labels, const double *bounds, const uint64_t *cumulative,
                    size_t n_bounds, double sum, uint64_t count)
{
    if (!failed(w))
        sticky(w, prom_write_histogram(w->out, name, labels, n_labels, bounds, cumulative, n_bounds,
                                       sum, count));
}

int prom_writer_finish(struct prom_writer *w)
{
    if (!failed(w))
        sticky(w, prom_write_eof(w->out, w->format));
    return sbuf_check(w->out);
}
