/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Time zones without the C library's process-wide zone (upgrade.h): a zone's rules read from its
 * TZif file (RFC 8536: the transitions it lists, then the POSIX TZ rule of its footer for the
 * times after them) and civil-date arithmetic on plain integers. Nothing here reads or changes
 * TZ, so any thread may convert at any time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "upgrade.h"

#define TZIF_MAX    (256 * 1024) /* the largest zone file is a few KiB */
#define TZ_NAME_MAX 64
#define TZ_RULE_MAX 128 /* a footer's POSIX TZ string */
#define DAY         86400
#define HOUR_S      3600
#define UTOFF_MAX   (26 * HOUR_S) /* offsets in the database stay within +-26 h */

/* A rule date: Jn (1..365, no Feb 29), n (0..365) or Mm.w.d, and the local time of the change. */
struct tz_date {
    char kind; /* 'J', 'n' or 'M' */
    int n, m, w, d;
    int32_t time;
};

struct tz_rule {
    int32_t std_off, dst_off; /* UTC offsets, east positive */
    bool has_dst;
    struct tz_date start, end;
};

struct upg_tz {
    size_t n_trans;
    int64_t *trans;    /* ascending instants */
    int32_t *off_at;   /* the offset from each transition on */
    int32_t first_off; /* before the first transition (time type 0) */
    bool has_rule;
    struct tz_rule rule;
};

void upg_tz_free(struct upg_tz *tz)
{
    if (!tz)
        return;
    free(tz->trans);
    free(tz->off_at);
    free(tz);
}

/* ---- civil dates (proleptic Gregorian, days since 1970-01-01) -------------------------------- */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *ret_y, int *ret_m, int *ret_d)
{
    z += 719468;
    int64_t era = floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int d = (int)(doy - (153 * mp + 2) / 5 + 1);
    int m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *ret_y = yoe + era * 400 + (m <= 2);
    *ret_m = m;
    *ret_d = d;
}

/* 0 Sunday .. 6 Saturday (1970-01-01 was a Thursday). */
static int weekday(int64_t days)
{
    return (int)((days % 7 + 7 + 4) % 7);
}

static bool leap_year(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int dim[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && leap_year(y) ? 29 : dim[m - 1];
}

/* ---- the POSIX TZ rule of the footer ------------------------------------------------------ */

/* The day (since the epoch) a rule date falls on in year y. */
static int64_t rule_day(const struct tz_date *dt, int64_t y)
{
    int64_t jan1 = days_from_civil(y, 1, 1);
    switch (dt->kind) {
    case 'J':
        return jan1 + dt->n - 1 + (leap_year(y) && dt->n >= 60);
    case 'n':
        return jan1 + dt->n;
    default: {
        int64_t first = days_from_civil(y, dt->m, 1);
        int day = 1 + (dt->d - weekday(first) + 7) % 7 + (dt->w - 1) * 7;
        while (day > days_in_month(y, dt->m))
            day -= 7;
        return first + day - 1;
    }
    }
}

static int32_t rule_offset(const struct tz_rule *r, int64_t t)
{
    if (!r->has_dst)
        return r->std_off;
    int64_t y;
    int m, d;
    civil_from_days(floor_div(t + r->std_off, DAY), &y, &m, &d);
    /* the start is in standard time, the end in daylight time (local clocks of the moment) */
    int64_t start = rule_day(&r->start, y) * DAY + r->start.time - r->std_off;
    int64_t end = rule_day(&r->end, y) * DAY + r->end.time - r->dst_off;
    bool dst = start < end ? (start <= t && t < end) : !(end <= t && t < start);
    return dst ? r->dst_off : r->std_off;
}

/* [+-]hh[:mm[:ss]] with hh up to max_h, in seconds; *p advances. */
static int parse_hms(const char **p, int max_h, int32_t *ret)
{
    const char *s = *p;
    int sign = 1;
    if (*s == '+' || *s == '-')
        sign = *s++ == '-' ? -1 : 1;
    int part[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
        if (k > 0) {
            if (*s != ':')
                break;
            s++;
        }
        if (*s < '0' || *s > '9')
            return -EINVAL;
        int v = 0, digits = 0;
        while (*s >= '0' && *s <= '9' && digits < 3) {
            v = v * 10 + (*s++ - '0');
            digits++;
        }
        part[k] = v;
    }
    if (part[0] > max_h || part[1] > 59 || part[2] > 59)
        return -EINVAL;
    *ret = sign * (part[0] * HOUR_S + part[1] * 60 + part[2]);
    *p = s;
    return 0;
}

/* A zone abbreviation: 3 or more letters, or <...> of letters, digits, '+' and '-'. */
static int parse_abbr(const char **p)
{
    const char *s = *p;
    size_t n = 0;
    if (*s == '<') {
        s++;
        while ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
               *s == '+' || *s == '-') {
            s++;
            n++;
        }
        if (*s != '>')
            return -EINVAL;
        s++;
    } else {
        while ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')) {
            s++;
            n++;
        }
    }
    if (n < 3)
        return -EINVAL;
    *p = s;
    return 0;
}

static int parse_num(const char **p, int lo, int hi, int *ret)
{
    const char *s = *p;
    int v = 0, digits = 0;
    while (*s >= '0' && *s <= '9' && digits < 4) {
        v = v * 10 + (*s++ - '0');
        digits++;
    }
    if (digits == 0 || v < lo || v > hi)
        return -EINVAL;
    *ret = v;
    *p = s;
    return 0;
}

static int parse_date(const char **p, struct tz_date *ret)
{
    const char *s = *p;
    struct tz_date dt = {.time = 2 * HOUR_S};
    if (*s == 'J') {
        s++;
        dt.kind = 'J';
        if (parse_num(&s, 1, 365, &dt.n) < 0)
            return -EINVAL;
    } else if (*s == 'M') {
        s++;
        dt.kind = 'M';
        if (parse_num(&s, 1, 12, &dt.m) < 0 || *s++ != '.' || parse_num(&s, 1, 5, &dt.w) < 0 ||
            *s++ != '.' || parse_num(&s, 0, 6, &dt.d) < 0)
            return -EINVAL;
    } else {
        dt.kind = 'n';
        if (parse_num(&s, 0, 365, &dt.n) < 0)
            return -EINVAL;
    }
    if (*s == '/') {
        s++;
        if (parse_hms(&s, 167, &dt.time) < 0)
            return -EINVAL;
    }
    *ret = dt;
    *p = s;
    return 0;
}

/* std offset [dst [offset] [,start[/time],end[/time]]] (POSIX, with RFC 8536's extensions). */
static int parse_rule(const char *text, struct tz_rule *ret)
{
    const char *s = text;
    struct tz_rule r = {0};
    int32_t off;
    if (parse_abbr(&s) < 0 || parse_hms(&s, 24, &off) < 0)
        return -EINVAL;
    r.std_off = -off; /* POSIX counts west positive */
    if (*s) {
        if (parse_abbr(&s) < 0)
            return -EINVAL;
        r.has_dst = true;
        r.dst_off = r.std_off + HOUR_S;
        if (*s && *s != ',') {
            if (parse_hms(&s, 24, &off) < 0)
                return -EINVAL;
            r.dst_off = -off;
        }
        if (*s == ',') {
            s++;
            if (parse_date(&s, &r.start) < 0 || *s++ != ',' || parse_date(&s, &r.end) < 0)
                return -EINVAL;
        } else {
            /* POSIX leaves the default to the implementation; the database always writes the
             * rule, so this is the United States' one, as other readers assume */
            r.start = (struct tz_date){.kind = 'M', .m = 3, .w = 2, .d = 0, .time = 2 * HOUR_S};
            r.end = (struct tz_date){.kind = 'M', .m = 11, .w = 1, .d = 0, .time = 2 * HOUR_S};
        }
    }
    if (*s)
        return -EINVAL;
    *ret = r;
    return 0;
}

/* ---- TZif ----------------------------------------------------------------------------------- */

struct tzif_header {
    char version;
    uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
};

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

static int read_header(const unsigned char *p, size_t len, struct tzif_header *h)
{
    if (len < 44 || memcmp(p, "TZif", 4) != 0)
        return -EINVAL;
    h->version = (char)p[4];
    if (h->version != 0 && h->version < '2')
        return -EINVAL;
    h->isutcnt = be32(p + 20);
    h->isstdcnt = be32(p + 24);
    h->leapcnt = be32(p + 28);
    h->timecnt = be32(p + 32);
    h->typecnt = be32(p + 36);
    h->charcnt = be32(p + 40);
    if (h->typecnt == 0 || h->typecnt > 256 || h->charcnt == 0 ||
        (h->isutcnt != 0 && h->isutcnt != h->typecnt) ||
        (h->isstdcnt != 0 && h->isstdcnt != h->typecnt))
        return -EINVAL;
    return 0;
}

/* The data block's length for times of `tsize` bytes, or 0 when it cannot fit `avail`. */
static size_t block_len(const struct tzif_header *h, size_t tsize, size_t avail)
{
    /* every count is below 2^32 and TZIF_MAX bounds avail: no product overflows a size_t */
    size_t n = (size_t)h->timecnt * (tsize + 1) + (size_t)h->typecnt * 6 + h->charcnt +
               (size_t)h->leapcnt * (tsize + 4) + h->isstdcnt + h->isutcnt;
    return n <= avail ? n : 0;
}

static int fail(struct err *e, const char *what, const char *why)
{
    return err_set(e, -EINVAL, "%s: not a valid TZif file: %s", what, why);
}

int upg_tz_parse(const void *data, size_t len, const char *what, struct upg_tz **ret, struct err *e)
{
    const unsigned char *p = data;
    struct tzif_header h;
    if (len > TZIF_MAX)
        return fail(e, what, "too large");
    if (read_header(p, len, &h) < 0)
        return fail(e, what, "bad header");
    size_t tsize = 4, at = 44;
    size_t blen = block_len(&h, 4, len - at);
    if (blen == 0)
        return fail(e, what, "truncated");
    if (h.version >= '2') {
        /* the 64-bit block after the 32-bit one: the one to read */
        at += blen;
        if (read_header(p + at, len - at, &h) < 0)
            return fail(e, what, "bad second header");
        at += 44;
        tsize = 8;
        blen = block_len(&h, 8, len - at);
        if (blen == 0)
            return fail(e, what, "truncated");
    }
    const unsigned char *times = p + at;
    const unsigned char *idx = times + (size_t)h.timecnt * tsize;
    const unsigned char *types = idx + h.timecnt;
    _cleanup_(upg_tz_freep) struct upg_tz *tz = xcalloc(1, sizeof(*tz));
    tz->n_trans = h.timecnt;
    tz->trans = xcalloc(h.timecnt ? h.timecnt : 1, sizeof(*tz->trans));
    tz->off_at = xcalloc(h.timecnt ? h.timecnt : 1, sizeof(*tz->off_at));
    for (uint32_t k = 0; k < h.typecnt; k++) {
        int32_t off = (int32_t)be32(types + 6 * k);
        if (off < -UTOFF_MAX || off > UTOFF_MAX || types[6 * k + 5] >= h.charcnt)
            return fail(e, what, "bad local time type");
    }
    tz->first_off = (int32_t)be32(types);
    for (uint32_t k = 0; k < h.timecnt; k++) {
        int64_t t = tsize == 8 ? be64(times + 8 * k) : (int32_t)be32(times + 4 * k);
        if (k > 0 && t <= tz->trans[k - 1])
            return fail(e, what, "transitions out of order");
        if (idx[k] >= h.typecnt)
            return fail(e, what, "bad transition type");
        tz->trans[k] = t;
        tz->off_at[k] = (int32_t)be32(types + 6 * idx[k]);
    }
    if (h.version >= '2') {
        /* the footer: "\n" POSIX TZ string "\n", for the times after the last transition */
        const char *f = (const char *)p + at + blen;
        size_t flen = len - at - blen;
        const char *nl = flen > 1 && f[0] == '\n' ? memchr(f + 1, '\n', flen - 1) : NULL;
        if (!nl || (size_t)(nl - f - 1) > TZ_RULE_MAX)
            return fail(e, what, "bad footer");
        char rule[TZ_RULE_MAX + 1];
        memcpy(rule, f + 1, (size_t)(nl - f - 1));
        rule[nl - f - 1] = '\0';
        if (rule[0]) {
            if (parse_rule(rule, &tz->rule) < 0)
                return fail(e, what, "bad POSIX TZ rule in the footer");
            tz->has_rule = true;
        }
    }
    *ret = steal_ptr(&tz);
    return 0;
}

bool upg_tz_name_valid(const char *name)
{
    if (!name || !*name || strlen(name) > TZ_NAME_MAX || name[0] == '/' || strstr(name, ".."))
        return false;
    for (const char *p = name; *p; p++)
        if (!(*p == '/' || *p == '_' || *p == '-' || *p == '+' || (*p >= '0' && *p <= '9') ||
              (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
            return false;
    return true;
}

int upg_tz_load(const char *dir, const char *name, struct upg_tz **ret, struct err *e)
{
    if (!upg_tz_name_valid(name))
        return err_set(e, -EINVAL, "time zone \"%s\": not a zone name", name ? name : "");
    if (strcmp(name, "UTC") == 0) {
        *ret = xcalloc(1, sizeof(**ret)); /* no transitions, offset 0 */
        return 0;
    }
    _cleanup_free_ char *path = xasprintf("%s/%s", dir ? dir : UPG_ZONEINFO_DIR, name);
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    int r = file_read_all(path, TZIF_MAX, &data, &len, e);
    if (r < 0)
        return err_prefix(e, "time zone \"%s\"", name);
    _cleanup_free_ char *what = xasprintf("time zone \"%s\": \"%s\"", name, path);
    return upg_tz_parse(data, len, what, ret, e);
}

/* ---- conversions ---------------------------------------------------------------------------- */

int32_t upg_tz_offset(const struct upg_tz *tz, int64_t t)
{
    if (!tz)
        return 0;
    size_t n = tz->n_trans;
    if (n == 0)
        return tz->has_rule ? rule_offset(&tz->rule, t) : tz->first_off;
    if (t < tz->trans[0])
        return tz->first_off;
    if (t >= tz->trans[n - 1])
        return tz->has_rule ? rule_offset(&tz->rule, t) : tz->off_at[n - 1];
    size_t lo = 0, hi = n - 1; /* trans[lo] <= t < trans[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (tz->trans[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return tz->off_at[lo];
}

int64_t upg_tz_local_to_utc(const struct upg_tz *tz, int64_t local)
{
    /* the offsets a day before and a day after: a zone changes its clocks at most once in
     * between (the database has no two changes within two days) */
    int32_t before = upg_tz_offset(tz, local - DAY);
    int32_t after = upg_tz_offset(tz, local + DAY);
    int64_t t1 = local - before, t2 = local - after;
    bool ok1 = upg_tz_offset(tz, t1) == before, ok2 = upg_tz_offset(tz, t2) == after;
    if (ok1 && ok2)
        return t1 < t2 ? t1 : t2; /* repeated: the first occurrence */
    if (ok2)
        return t2;
    return t1; /* valid, or skipped: read with the offset before the change */
}

/* ---- maintenance windows -------------------------------------------------------------------- */

void upg_window_state(const struct upg_window *w, size_t n, const struct upg_tz *tz, int64_t now_s,
                      bool *ret_open, int64_t *ret_next_s)
{
    bool open = false;
    int64_t close_at = 0, next_open = INT64_MAX;
    int64_t today = floor_div(now_s + upg_tz_offset(tz, now_s), DAY);
    /* Windows that started up to 8 days ago (a window lasts at most 7) or start within 8. */
    for (int64_t day = today - 8; day <= today + 8; day++) {
        int wd = weekday(day);
        for (size_t i = 0; i < n; i++) {
            if (!(w[i].days & (1u << wd)))
                continue;
            int64_t start = upg_tz_local_to_utc(tz, day * DAY + (int64_t)w[i].start_min * 60);
            int64_t end = start + (int64_t)w[i].length_min * 60;
            if (start <= now_s && now_s < end) {
                open = true;
                if (end > close_at)
                    close_at = end;
            } else if (start > now_s && start < next_open) {
                next_open = start;
            }
        }
    }
    if (n == 0)
        open = true;
    *ret_open = open;
    *ret_next_s = n == 0 ? 0 : open ? close_at : (next_open == INT64_MAX ? 0 : next_open);
}

/* ---- the zones the pools name --------------------------------------------------------------- */

struct zone {
    char *name;
    struct upg_tz *tz; /* NULL: error says why */
    char *error;
};

struct upg_zones {
    struct zone *v;
    size_t n, cap;
};

struct upg_zones *upg_zones_new(void)
{
    return xcalloc(1, sizeof(struct upg_zones));
}

void upg_zones_free(struct upg_zones *z)
{
    if (!z)
        return;
    for (size_t i = 0; i < z->n; i++) {
        free(z->v[i].name);
        upg_tz_free(z->v[i].tz);
        free(z->v[i].error);
    }
    free(z->v);
    free(z);
}

static const struct zone *zone_find(const struct upg_zones *z, const char *name)
{
    for (size_t i = 0; z && i < z->n; i++)
        if (strcmp(z->v[i].name, name) == 0)
            return &z->v[i];
    return NULL;
}

void upg_zones_load(struct upg_zones *z, const char *dir, const char *name)
{
    if (!name || zone_find(z, name))
        return;
    if (z->n == z->cap) {
        z->cap = z->cap ? 2 * z->cap : 4;
        z->v = xrealloc(z->v, z->cap * sizeof(*z->v));
    }
    struct zone *nz = &z->v[z->n++];
    *nz = (struct zone){.name = xstrdup(name)};
    struct err e = {0};
    if (upg_tz_load(dir, name, &nz->tz, &e) < 0)
        nz->error = xstrdup(err_msg(&e));
}

void upg_zones_load_pools(struct upg_zones *z, const char *dir, const json_t *pools)
{
    size_t i;
    json_t *p;
    json_array_foreach ((json_t *)pools, i, p) {
        const char *name = kobj_path_str(p, "spec.timeZone");
        if (name && upg_tz_name_valid(name))
            upg_zones_load(z, dir, name);
    }
}

const struct upg_tz *upg_zones_get(const struct upg_zones *z, const char *name,
                                   const char **ret_err)
{
    const struct zone *f = zone_find(z, name);
    *ret_err = f ? f->error : "not read from the time zone database";
    return f ? f->tz : NULL;
}
