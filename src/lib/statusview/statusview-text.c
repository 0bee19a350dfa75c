/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop status: the view model to text (statusview.h), and the list of sections. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "statusview.h"

#define MARK       '\x01'
#define ELLIPSIS   "\xe2\x80\xa6" /* … */
#define MIN_LAST   8
#define COLUMN_GAP 2

/* ---- cells and tables --------------------------------------------------------------------- */

static const char *ansi(char code)
{
    switch (code) {
    case 'g':
        return "\x1b[32m";
    case 'y':
        return "\x1b[33m";
    case 'r':
        return "\x1b[31m";
    case 'b':
        return "\x1b[1m";
    default:
        return "";
    }
}

/* Display columns of UTF-8 text: one per code point. */
static size_t text_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

/* Bytes of s that fill at most w columns. */
static size_t prefix_bytes(const char *s, size_t w)
{
    size_t cols = 0, i = 0;
    for (; s[i]; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (cols == w)
                break;
            cols++;
        }
    }
    return i;
}

static void cell_split(const char *cell, char *ret_code, const char **ret_text)
{
    if (cell[0] == MARK && cell[1]) {
        *ret_code = cell[1];
        *ret_text = cell + 2;
    } else {
        *ret_code = 0;
        *ret_text = cell;
    }
}

/* Writes text in w columns (cut with an ellipsis; padded unless last), coloured. */
/* Returns where the cell's text ends in out (before the padding). */
static size_t cell_put(struct sbuf *out, const char *text, char code, size_t w, bool last,
                       const struct st_view *v)
{
    size_t tw = text_width(text);
    bool color = v->color && code;
    if (color)
        sbuf_adds(out, ansi(code));
    if (tw > w) {
        size_t keep = w > 0 ? prefix_bytes(text, w - 1) : 0;
        sbuf_add(out, text, keep);
        if (w > 0)
            sbuf_adds(out, ELLIPSIS);
        tw = w;
    } else {
        sbuf_adds(out, text);
    }
    if (color)
        sbuf_adds(out, "\x1b[0m");
    size_t end = out->len;
    if (!last)
        for (size_t i = tw; i < w; i++)
            sbuf_add(out, " ", 1);
    return end;
}

/* One line: titles (coloured code) or a row of cells, each in its column, the line cut at limit
 * columns; no trailing blanks. */
static void row_put(struct sbuf *out, const char *const *titles, json_t *row, char title_code,
                    const size_t *w, size_t ncols, size_t limit, const struct st_view *v)
{
    size_t used = 0, line_start = out->len, blank_from = out->len;
    for (size_t c = 0; c < ncols; c++) {
        char code = title_code;
        const char *text = titles ? titles[c] : NULL;
        if (!titles)
            cell_split(json_string_value(json_array_get(row, c)) ?: "", &code, &text);
        size_t gap = c ? COLUMN_GAP : 0;
        if (used + gap >= limit)
            break;
        size_t room = limit - used - gap;
        size_t cw = w[c] < room ? w[c] : room;
        if (gap)
            sbuf_adds(out, "  ");
        size_t end = cell_put(out, text, code, cw, c == ncols - 1 || cw < w[c], v);
        used += gap + cw;
        if (text_width(text))
            blank_from = end;
    }
    /* drop what follows the last non-empty cell (padding of empty trailing cells) */
    if (out->error == 0 && out->len > blank_from && out->len >= line_start) {
        out->len = blank_from;
        out->data[out->len] = '\0';
    }
    sbuf_adds(out, "\n");
}

void st_table(struct sbuf *out, const char *const *titles, size_t ncols, json_t *rows,
              const struct st_view *v)
{
    size_t *w = xcalloc(ncols, sizeof(*w));
    for (size_t c = 0; c < ncols; c++)
        w[c] = text_width(titles[c]);
    size_t r;
    json_t *row;
    json_array_foreach (rows, r, row) {
        for (size_t c = 0; c < ncols; c++) {
            char code;
            const char *text;
            cell_split(json_string_value(json_array_get(row, c)) ?: "", &code, &text);
            size_t tw = text_width(text);
            if (tw > w[c])
                w[c] = tw;
        }
    }
    if (v->width && !v->wide) {
        size_t total = 0;
        for (size_t c = 0; c < ncols; c++)
            total += w[c] + (c ? COLUMN_GAP : 0);
        if (total > v->width) {
            size_t others = total - w[ncols - 1];
            size_t room = v->width > others ? v->width - others : 0;
            w[ncols - 1] = room > MIN_LAST           ? room
                           : MIN_LAST < w[ncols - 1] ? MIN_LAST
                                                     : w[ncols - 1];
        }
    }
    size_t limit = v->width && !v->wide ? v->width : SIZE_MAX;
    row_put(out, titles, NULL, 'b', w, ncols, limit, v);
    json_array_foreach (rows, r, row)
        row_put(out, NULL, row, 0, w, ncols, limit, v);
    free(w);
}

/* A cell with a colour code ('g', 'y', 'r', 'b'; 0 none). */
static json_t *cell(char code, const char *fmt, ...) GPUOP_PRINTF(2, 3);
static json_t *cell(char code, const char *fmt, ...)
{
    char buf[2048];
    size_t off = 0;
    if (code) {
        buf[0] = MARK;
        buf[1] = code;
        off = 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + off, sizeof(buf) - off, fmt, ap);
    va_end(ap);
    return json_string(buf);
}

static char health_code(const char *h)
{
    return streq_ptr(h, "ok") ? 'g' : streq_ptr(h, "warn") ? 'y' : 'r';
}

/* "45s", "5m", "3h", "2d" since t; "" when t does not parse. */
static void age(const char *t, uint64_t now_ms, char *buf, size_t n)
{
    uint64_t ms;
    buf[0] = '\0';
    if (!t || time_parse_rfc3339(t, &ms) < 0)
        return;
    uint64_t s = now_ms > ms ? (now_ms - ms) / 1000 : 0;
    if (s < 120)
        snprintf(buf, n, "%llus", (unsigned long long)s);
    else if (s < 7200)
        snprintf(buf, n, "%llum", (unsigned long long)(s / 60));
    else if (s < 172800)
        snprintf(buf, n, "%lluh", (unsigned long long)(s / 3600));
    else
        snprintf(buf, n, "%llud", (unsigned long long)(s / 86400));
}

static void colored(struct sbuf *out, const struct st_view *v, char code, const char *text)
{
    if (v->color && code)
        sbuf_addf(out, "%s%s\x1b[0m", ansi(code), text);
    else
        sbuf_adds(out, text);
}

static void label(struct sbuf *out, const struct st_view *v, const char *text)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%-14s", text);
    colored(out, v, 'b', buf);
}

/* ---- summary ------------------------------------------------------------------------------ */

static void summary_text(const json_t *m, const struct st_view *v, struct sbuf *out)
{
    char a[32];
    const char *ver = kobj_str(m, "operatorVersion");
    json_t *cp = json_object_get(m, "clusterPolicy");
    label(out, v, "Operator:");
    if (ver)
        sbuf_addf(out, "gpuop %s", ver);
    else
        colored(out, v, 'y', "unknown (no ClusterPolicy status: is the operator running?)");
    if (json_is_object(cp)) {
        const char *st = kobj_str(cp, "state");
        sbuf_addf(out, ", ClusterPolicy %s ", kobj_str(cp, "name") ?: "?");
        colored(out, v, streq_ptr(st, "ready") ? 'g' : 'y', st ? st : "(no state)");
        long long count = json_integer_value(json_object_get(cp, "count"));
        if (count > 1)
            sbuf_addf(out, " (%lld ClusterPolicies: the oldest is in force)", count);
    }
    sbuf_adds(out, "\n");
    label(out, v, "Policy owner:");
    json_t *lc = json_object_get(cp, "lastChange");
    if (!json_is_object(cp)) {
        colored(out, v, 'y', "no ClusterPolicy");
    } else if (!json_is_object(lc)) {
        sbuf_adds(out, "unknown (no managedFields)");
    } else {
        age(kobj_str(lc, "time"), v->now_ms, a, sizeof(a));
        sbuf_addf(out, "%s (%s), %s%s%s%s", kobj_str(lc, "manager") ?: "?",
                  kobj_str(lc, "operation") ?: "?", kobj_str(lc, "time") ?: "?", a[0] ? ", " : "",
                  a, a[0] ? " ago" : "");
    }
    sbuf_adds(out, "\n");
    label(out, v, "Last drain:");
    json_t *d = json_object_get(m, "lastDrain");
    if (!json_is_object(d)) {
        sbuf_adds(out, "none recorded");
    } else {
        age(kobj_str(d, "time"), v->now_ms, a, sizeof(a));
        sbuf_addf(out, "%s, %s%s%s%s", kobj_str(d, "node") ?: "?", kobj_str(d, "time"),
                  a[0] ? ", " : "", a, a[0] ? " ago" : "");
        if (kobj_str(d, "reason") && kobj_str(d, "reason")[0])
            sbuf_addf(out, ": %s", kobj_str(d, "reason"));
        if (kobj_str(d, "by"))
            sbuf_addf(out, " (%s)", kobj_str(d, "by"));
    }
    sbuf_adds(out, "\n");
    label(out, v, "GPU nodes:");
    json_t *n = json_object_get(m, "nodes");
    long long att = json_integer_value(json_object_get(n, "attention"));
    sbuf_addf(out, "%lld of %lld nodes", json_integer_value(json_object_get(n, "gpu")),
              json_integer_value(json_object_get(n, "total")));
    if (att) {
        char buf[64];
        snprintf(buf, sizeof(buf), ", %lld need%s attention", att, att == 1 ? "s" : "");
        colored(out, v, 'y', buf);
    }
    sbuf_adds(out, "\n");
}

/* ---- pools -------------------------------------------------------------------------------- */

static void pools_text(const json_t *m, const struct st_view *v, struct sbuf *out)
{
    static const char *const titles[] = {"POOL", "NODES", "DRIVER", "TARGET", "UPGRADE"};
    if (json_array_size(m) == 0)
        return;
    _cleanup_(json_decrefp) json_t *rows = json_array();
    size_t i;
    json_t *p;
    json_array_foreach (m, i, p) {
        struct sbuf drv _cleanup_sbuf_, up _cleanup_sbuf_;
        sbuf_init(&drv, 1024);
        sbuf_init(&up, 1024);
        const char *k;
        json_t *x;
        size_t nv = 0;
        json_object_foreach (json_object_get(p, "versions"), k, x)
            sbuf_addf(&drv, "%s%s (%lld)", nv++ ? ", " : "", k, json_integer_value(x));
        json_t *u = json_object_get(p, "upgrade");
        long long nodes = json_integer_value(json_object_get(p, "nodes"));
        long long done = json_integer_value(json_object_get(u, "done"));
        long long prog = json_integer_value(json_object_get(u, "inProgress"));
        long long failed = json_integer_value(json_object_get(u, "failed"));
        long long req = json_integer_value(json_object_get(u, "required"));
        char code = 0;
        if (done + prog + failed + req == 0) {
            sbuf_adds(&up, "not tracked");
        } else {
            sbuf_addf(&up, "%lld/%lld done", done, nodes);
            if (req)
                sbuf_addf(&up, ", %lld required", req);
            if (prog) {
                sbuf_addf(&up, ", %lld in progress (", prog);
                size_t ns = 0;
                json_object_foreach (json_object_get(p, "states"), k, x)
                    sbuf_addf(&up, "%s%s %lld", ns++ ? ", " : "", k, json_integer_value(x));
                sbuf_adds(&up, ")");
            }
            if (failed)
                sbuf_addf(&up, ", %lld failed", failed);
            code = failed ? 'r' : prog || req ? 'y' : 'g';
        }
        if (sbuf_check(&drv) < 0 || sbuf_check(&up) < 0)
            continue;
        const char *target = kobj_str(p, "targetVersion");
        json_array_append_new(rows, json_pack("[o,o,o,o,o]", cell(0, "%s", kobj_str(p, "name")),
                                              cell(0, "%lld", nodes), cell(0, "%s", drv.data),
                                              cell(0, "%s", target ? target : "-"),
                                              cell(code, "%s", up.data)));
    }
    st_table(out, titles, ARRAY_SIZE(titles), rows, v);
}

/* ---- nodes -------------------------------------------------------------------------------- */

static json_t *validations_cell(const json_t *val)
{
    size_t n = json_object_size(val), ok = 0;
    if (n == 0)
        return cell(0, "-");
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 512);
    const char *k;
    json_t *x;
    char code = 'g';
    json_object_foreach ((json_t *)val, k, x) {
        const char *st = kobj_str(x, "state");
        if (streq_ptr(st, "ok")) {
            ok++;
            continue;
        }
        sbuf_addf(&b, ", %s %s", k, st ? st : "?");
        if (streq_ptr(st, "failed"))
            code = 'r';
        else if (code != 'r')
            code = 'y';
    }
    if (sbuf_check(&b) < 0)
        return cell('r', "?");
    return cell(code, "%zu/%zu ok%s", ok, n, b.data ? b.data : "");
}

static void nodes_text(const json_t *m, const struct st_view *v, struct sbuf *out)
{
    /* the columns that matter most first: a narrow terminal cuts from the right */
    static const char *const titles[] = {"NODE", "HEALTH",      "OWNER", "DRIVER", "PHYS",
                                         "ADV",  "VALIDATIONS", "MIG",   "POOL",   "PROBLEMS"};
    static const char *const wide_titles[] = {
        "NODE", "HEALTH", "OWNER",   "DRIVER",  "PHYS", "ADV", "VALIDATIONS",
        "MIG",  "POOL",   "UPGRADE", "PRODUCT", "ARCH", "OS",  "PROBLEMS"};
    if (json_array_size(m) == 0) {
        sbuf_adds(out, "No GPU nodes.\n");
        return;
    }
    _cleanup_(json_decrefp) json_t *rows = json_array();
    size_t i;
    json_t *n;
    json_array_foreach (m, i, n) {
        json_t *drv = json_object_get(n, "driver");
        json_t *g = json_object_get(n, "gpus");
        json_t *mig = json_object_get(n, "mig");
        json_t *row = json_array();
        const char *h = kobj_str(n, "health");
        json_array_append_new(row, cell(0, "%s", kobj_str(n, "name") ?: "?"));
        json_array_append_new(row, cell(health_code(h), "%s", h ? h : "?"));
        const char *owner = kobj_str(drv, "owner");
        json_array_append_new(row,
                              cell(streq_ptr(owner, "none") ? 'y' : 0, "%s", owner ? owner : "-"));
        json_array_append_new(row, cell(0, "%s", kobj_str(drv, "version") ?: "-"));
        json_t *phys = json_object_get(g, "physical");
        json_array_append_new(row, json_is_integer(phys)
                                       ? cell(0, "%lld", (long long)json_integer_value(phys))
                                       : cell(0, "-"));
        json_t *exp = json_object_get(g, "expectedTotal");
        bool mismatch = json_is_true(json_object_get(g, "mismatch"));
        long long adv = json_integer_value(json_object_get(g, "advertisedTotal"));
        if (json_is_integer(exp))
            json_array_append_new(row, cell(mismatch ? 'r' : 0, "%lld/%lld%s", adv,
                                            (long long)json_integer_value(exp),
                                            mismatch ? " MISMATCH" : ""));
        else
            json_array_append_new(
                row, cell(mismatch ? 'r' : 0, "%lld%s", adv, mismatch ? " MISMATCH" : ""));
        json_array_append_new(row, validations_cell(json_object_get(n, "validations")));
        if (json_is_object(mig)) {
            const char *st = kobj_str(mig, "state");
            char code = streq_ptr(st, "failed") ? 'r' : st && !streq_ptr(st, "success") ? 'y' : 0;
            json_array_append_new(row, cell(code, "%s%s%s", kobj_str(mig, "config") ?: "-",
                                            st ? ": " : "", st ? st : ""));
        } else {
            json_array_append_new(row, cell(0, "-"));
        }
        json_array_append_new(row, cell(0, "%s", kobj_str(n, "pool") ?: "?"));
        if (v->wide) {
            json_array_append_new(row, cell(0, "%s", kobj_str(n, "upgradeState") ?: "-"));
            json_array_append_new(row, cell(0, "%s", kobj_str(n, "product") ?: "-"));
            json_array_append_new(row, cell(0, "%s", kobj_str(n, "arch") ?: "-"));
            json_array_append_new(row, cell(0, "%s", kobj_str(n, "os") ?: "-"));
        }
        struct sbuf pr _cleanup_sbuf_;
        sbuf_init(&pr, 4096);
        size_t k;
        json_t *p;
        json_array_foreach (json_object_get(n, "problems"), k, p)
            sbuf_addf(&pr, "%s%s", k ? "; " : "", json_string_value(p));
        json_array_append_new(row, cell(0, "%s", sbuf_check(&pr) == 0 && pr.data ? pr.data : ""));
        json_array_append_new(rows, row);
    }
    if (v->wide)
        st_table(out, wide_titles, ARRAY_SIZE(wide_titles), rows, v);
    else
        st_table(out, titles, ARRAY_SIZE(titles), rows, v);
}

/* ---- remediation -------------------------------------------------------------------------- */

static char rem_state_code(const char *st)
{
    if (streq_ptr(st, "failed") || streq_ptr(st, "fault") || streq_ptr(st, "unknown"))
        return 'r';
    return streq_ptr(st, "in-service") ? 0 : 'y';
}

/* Nothing when no node has a fault and no breaker is open. */
static void remediation_text(const json_t *m, const struct st_view *v, struct sbuf *out)
{
    json_t *nodes = json_object_get(m, "nodes");
    json_t *breakers = json_object_get(m, "breakers");
    json_t *cond = json_object_get(m, "condition");
    if (json_array_size(nodes) == 0 && json_array_size(breakers) == 0)
        return;
    label(out, v, "Remediation:");
    if (json_is_object(cond)) {
        bool ok = streq_ptr(kobj_str(cond, "status"), "True");
        colored(out, v, ok ? 'g' : 'r', kobj_str(cond, "reason") ?: "?");
        if (kobj_str(cond, "message"))
            sbuf_addf(out, ": %s", kobj_str(cond, "message"));
    } else {
        sbuf_adds(out, "no GPURemediation condition (is the operator running?)");
    }
    sbuf_adds(out, "\n");
    char a[32];
    size_t i;
    json_t *b;
    json_array_foreach (breakers, i, b) {
        age(kobj_str(b, "since"), v->now_ms, a, sizeof(a));
        const char *scope = kobj_str(b, "scope") ?: "?", *name = kobj_str(b, "name") ?: "?";
        /* a DriverUpgradePool's is reset on the pool; the cluster's and the default pool's on
         * the ClusterPolicy */
        bool own_pool = strcmp(scope, "pool") == 0 && strcmp(name, "default") != 0;
        colored(out, v, 'r', "Breaker open:");
        sbuf_addf(out, " %s %s%s%s: %s (reset: gpuop remediation reset%s%s)\n", scope, name,
                  a[0] ? ", for " : "", a, kobj_str(b, "why") ?: "", own_pool ? " --pool " : "",
                  own_pool ? name : "");
    }
    if (json_array_size(nodes) == 0)
        return;
    static const char *const titles[] = {"NODE", "STATE", "ACTION", "FOR", "EVENT", "WHY"};
    _cleanup_(json_decrefp) json_t *rows = json_array();
    json_t *n;
    json_array_foreach (nodes, i, n) {
        const char *st = kobj_str(n, "state");
        json_t *ev = json_object_get(n, "event");
        /* in its state since; a fault not quarantined: since the fault */
        age(kobj_str(n, "since") ?: kobj_str(ev, "time"), v->now_ms, a, sizeof(a));
        json_t *row = json_array();
        json_array_append_new(row, cell(0, "%s", kobj_str(n, "name") ?: "?"));
        json_array_append_new(row, cell(rem_state_code(st), "%s", st ? st : "?"));
        json_array_append_new(row, cell(0, "%s", kobj_str(n, "action") ?: "-"));
        json_array_append_new(row, cell(0, "%s", a[0] ? a : "-"));
        if (json_is_object(ev))
            json_array_append_new(row, cell(0, "%s: %s", kobj_str(ev, "reason") ?: "?",
                                            kobj_str(ev, "message") ?: ""));
        else
            json_array_append_new(row, cell(0, "%s", kobj_str(n, "fault") ?: "-"));
        const char *why = kobj_str(n, "why") ?: kobj_str(n, "healthError");
        json_array_append_new(row, cell(0, "%s", why ? why : ""));
        json_array_append_new(rows, row);
    }
    st_table(out, titles, ARRAY_SIZE(titles), rows, v);
}

/* ---- capacity ----------------------------------------------------------------------------- */

static long long num(const json_t *o, const char *key)
{
    return (long long)json_integer_value(json_object_get(o, key));
}

/* "a, b, c" of an array of strings; "-" when empty. */
static void join(const json_t *a, char *buf, size_t n)
{
    size_t i, off = 0;
    json_t *x;
    buf[0] = '\0';
    json_array_foreach (a, i, x)
        if (off < n)
            off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? ", " : "",
                                    json_string_value(x) ?: "?");
    if (!buf[0])
        snprintf(buf, n, "-");
}

static void capacity_totals(const json_t *m, const struct st_view *v, struct sbuf *out)
{
    static const char *const titles[] = {"RESOURCE",  "PHYSICAL", "ADVERTISED",
                                         "REQUESTED", "QUOTA",    "RATIO"};
    _cleanup_(json_decrefp) json_t *rows = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get(m, "resources"), i, r) {
        json_t *ratio = json_object_get(r, "overcommitRatio");
        bool over = json_is_true(json_object_get(r, "over"));
        char rt[32];
        if (json_is_number(ratio))
            snprintf(rt, sizeof(rt), "%.2f", json_number_value(ratio));
        else
            snprintf(rt, sizeof(rt), "inf"); /* quota with nothing advertised */
        json_array_append_new(
            rows,
            json_pack("[s,o,o,o,o,o]", kobj_str(r, "name") ?: "?",
                      cell(0, "%lld", num(r, "physical")), cell(0, "%lld", num(r, "advertised")),
                      cell(0, "%lld", num(r, "requested")), cell(0, "%lld", num(r, "quota")),
                      cell(over ? 'r' : 0, "%s%s", rt, over ? " over-committed" : "")));
    }
    st_table(out, titles, ARRAY_SIZE(titles), rows, v);
}

static void capacity_pools(const json_t *m, const struct st_view *v, struct sbuf *out)
{
    static const char *const titles[] = {"POOL",     "RESOURCE",   "NODES",
                                         "PHYSICAL", "ADVERTISED", "REQUESTED",
                                         "QUOTA",    "PINNED",     "NOTES"};
    _cleanup_(json_decrefp) json_t *rows = json_array();
    size_t i, j;
    json_t *p, *r;
    json_array_foreach (json_object_get(m, "pools"), i, p) {
        json_t *excluded = json_object_get(p, "excluded");
        long long nodes = num(p, "nodes"), usable = nodes - (long long)json_array_size(excluded);
        char ex[1024];
        join(excluded, ex, sizeof(ex));
        json_array_foreach (json_object_get(p, "resources"), j, r) {
            bool short_ = json_is_true(json_object_get(r, "short"));
            char ns[512], note[2048];
            join(json_object_get(r, "pinnedNamespaces"), ns, sizeof(ns));
            int off = short_ ? snprintf(note, sizeof(note), "short: %lld pinned by quotas (%s)",
                                        num(r, "pinnedQuota"), ns)
                             : 0;
            if (!short_)
                note[0] = '\0';
            if (json_array_size(excluded) && off >= 0 && (size_t)off < sizeof(note))
                snprintf(note + off, sizeof(note) - (size_t)off, "%sexcluded: %s", off ? "; " : "",
                         ex);
            json_array_append_new(
                rows,
                json_pack("[s,s,o,o,o,o,o,o,o]", kobj_str(p, "name") ?: "?",
                          kobj_str(r, "name") ?: "?", cell(0, "%lld/%lld", usable, nodes),
                          cell(0, "%lld", num(r, "physical")),
                          cell(0, "%lld", num(r, "advertised")),
                          cell(0, "%lld", num(r, "requested")), cell(0, "%lld", num(r, "quota")),
                          cell(short_ ? 'r' : 0, "%lld", num(r, "pinnedQuota")),
                          cell(short_                      ? 'r'
                               : json_array_size(excluded) ? 'y'
                                                           : 0,
                               "%s", note)));
        }
    }
    st_table(out, titles, ARRAY_SIZE(titles), rows, v);
}

static void capacity_namespaces(const json_t *m, const struct st_view *v, struct sbuf *out)
{
    static const char *const titles[] = {"NAMESPACE", "RESOURCE",  "QUOTA",
                                         "USED",      "REQUESTED", "POOLS"};
    _cleanup_(json_decrefp) json_t *rows = json_array();
    size_t i, j;
    json_t *n, *r;
    json_array_foreach (json_object_get(m, "namespaces"), i, n) {
        bool no_quota = json_is_true(json_object_get(n, "noGPUQuota"));
        char pools[1024];
        join(json_object_get(n, "pools"), pools, sizeof(pools));
        json_array_foreach (json_object_get(n, "resources"), j, r) {
            bool has = json_object_get(r, "hard") != NULL;
            json_array_append_new(
                rows,
                json_pack("[s,s,o,o,o,o]", kobj_str(n, "name") ?: "?", kobj_str(r, "name") ?: "?",
                          has ? cell(0, "%lld", num(r, "hard")) : cell(no_quota ? 'y' : 0, "none"),
                          has ? cell(0, "%lld", num(r, "used")) : cell(0, "-"),
                          cell(0, "%lld", num(r, "requested")),
                          cell(no_quota ? 'y' : 0, "%s%s", pools,
                               no_quota ? " (GPU pods without a GPU quota)" : "")));
        }
    }
    st_table(out, titles, ARRAY_SIZE(titles), rows, v);
}

static void capacity_text(const json_t *m, const struct st_view *v, struct sbuf *out)
{
    if (kobj_str(m, "error")) {
        label(out, v, "GPU quotas:");
        colored(out, v, 'y', kobj_str(m, "error"));
        sbuf_adds(out, "\n");
        return;
    }
    if (json_array_size(json_object_get(m, "resources")) == 0)
        return; /* nothing advertised, nothing promised */
    label(out, v, "GPU quotas:");
    sbuf_addf(out, "capacity against namespace quotas (over-commit above a ratio of %.2f)\n\n",
              json_number_value(json_object_get(m, "threshold")));
    capacity_totals(m, v, out);
    sbuf_adds(out, "\n");
    capacity_pools(m, v, out);
    if (json_array_size(json_object_get(m, "namespaces"))) {
        sbuf_adds(out, "\n");
        capacity_namespaces(m, v, out);
    }
}

/* ---- the sections ------------------------------------------------------------------------- */

const struct st_section st_sections[] = {
    {"summary", st_summary_model, summary_text},
    {"pools", st_pools_model, pools_text},
    {"nodes", st_nodes_model, nodes_text},
    {"remediation", st_remediation_model, remediation_text},
    {"dra", st_dra_model, st_dra_text},
    {"gpuAllocation", st_alloc_model, st_alloc_text},
    {"capacity", st_capacity_model, capacity_text},
    {0},
};

json_t *st_model(const struct st_objects *in, const struct st_section *sections)
{
    json_t *out = json_object();
    for (const struct st_section *s = sections; s->name; s++)
        json_object_set_new(out, s->name, s->model(in));
    return out;
}

int st_render_text(const json_t *model, const struct st_section *sections, const struct st_view *v,
                   size_t max, char **ret, struct err *e)
{
    struct sbuf out _cleanup_sbuf_;
    sbuf_init(&out, max);
    for (const struct st_section *s = sections; s->name; s++) {
        struct sbuf one _cleanup_sbuf_;
        sbuf_init(&one, max);
        s->text(json_object_get(model, s->name), v, &one);
        if (sbuf_check_err(&one, e, "gpuop status: section %s", s->name) < 0)
            return -E2BIG;
        if (one.len == 0) /* nothing to say: no blank line either */
            continue;
        if (out.len)
            sbuf_adds(&out, "\n");
        sbuf_add(&out, one.data, one.len);
    }
    if (sbuf_check_err(&out, e, "gpuop status: text") < 0)
        return -E2BIG;
    *ret = sbuf_steal(&out);
    return 0;
}
