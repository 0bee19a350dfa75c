/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Weekly maintenance windows in a named time zone (upgrade.h). Local times come from the C
 * library and the system's time zone database (tzdata): TZ is set for the conversion and put
 * back, under one lock, since the C library keeps the zone in process-wide state.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "upgrade.h"

static pthread_mutex_t tz_lock = PTHREAD_MUTEX_INITIALIZER;

/* A zone name as the tz database spells it: no path tricks, bounded. */
static bool tz_name_ok(const char *tz)
{
    if (!tz || !*tz || strlen(tz) > 64 || tz[0] == '/' || strstr(tz, ".."))
        return false;
    for (const char *p = tz; *p; p++)
        if (!(*p == '/' || *p == '_' || *p == '-' || *p == '+' || (*p >= '0' && *p <= '9') ||
              (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
            return false;
    return true;
}

bool upg_tz_valid(const char *tz)
{
    if (!tz_name_ok(tz))
        return false;
    if (strcmp(tz, "UTC") == 0)
        return true;
    /* glibc takes an unknown zone for UTC silently: ask the database itself. */
    const char *dirs[] = {getenv("TZDIR"), "/usr/share/zoneinfo"};
    for (size_t i = 0; i < 2; i++) {
        if (!dirs[i])
            continue;
        _cleanup_free_ char *path = xasprintf("%s/%s", dirs[i], tz);
        if (access(path, R_OK) == 0)
            return true;
    }
    return false;
}

struct tz_scope {
    char *saved;
    bool had;
};

static void tz_enter(struct tz_scope *s, const char *tz)
{
    pthread_mutex_lock(&tz_lock);
    const char *cur = getenv("TZ");
    s->had = cur != NULL;
    s->saved = cur ? xstrdup(cur) : NULL;
    setenv("TZ", tz ? tz : "UTC", 1);
    tzset();
}

static void tz_leave(struct tz_scope *s)
{
    if (s->had)
        setenv("TZ", s->saved, 1);
    else
        unsetenv("TZ");
    tzset();
    free(s->saved);
    pthread_mutex_unlock(&tz_lock);
}

/* The epoch second of local date (y, mon, mday) at minute `min` after midnight (TZ set). */
static int64_t local_at(int year, int mon, int mday, int min)
{
    struct tm t = {.tm_year = year,
                   .tm_mon = mon,
                   .tm_mday = mday,
                   .tm_hour = min / 60,
                   .tm_min = min % 60,
                   .tm_isdst = -1};
    return (int64_t)mktime(&t);
}

int upg_window_open(const struct upg_window *w, size_t n, const char *tz, int64_t now_s,
                    bool *ret_open, int64_t *ret_next_s, struct err *e)
{
    if (tz && !upg_tz_valid(tz))
        return err_set(e, -EINVAL, "time zone \"%s\" is not in the system's database", tz);
    if (n == 0) {
        *ret_open = true;
        *ret_next_s = 0;
        return 0;
    }
    struct tz_scope sc;
    tz_enter(&sc, tz);
    bool open = false;
    int64_t close_at = 0, next_open = INT64_MAX;
    time_t now = (time_t)now_s;
    struct tm today;
    localtime_r(&now, &today);
    /* Windows that started up to 8 days ago (a window lasts at most 7) or start within 8. */
    for (int d = -8; d <= 8; d++) {
        struct tm day = {.tm_year = today.tm_year,
                         .tm_mon = today.tm_mon,
                         .tm_mday = today.tm_mday + d,
                         .tm_hour = 12,
                         .tm_isdst = -1};
        mktime(&day); /* normalises the date and fills tm_wday */
        for (size_t i = 0; i < n; i++) {
            if (!(w[i].days & (1u << day.tm_wday)))
                continue;
            int64_t start = local_at(day.tm_year, day.tm_mon, day.tm_mday, w[i].start_min);
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
    tz_leave(&sc);
    *ret_open = open;
    *ret_next_s = open ? close_at : (next_open == INT64_MAX ? 0 : next_open);
    return 0;
}
