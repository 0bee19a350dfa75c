/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A pool's remediation policy (remediation.h, struct rem_policy): spec.remediation of a
 * DriverUpgradePool, beside the pool's upgrade settings. Every field is optional; the defaults
 * quarantine and report, and act only where a policy says so.
 *
 *   remediation:
 *     enabled: true
 *     automatic: [reset-gpu, reload-driver, reboot-node]   # without a person
 *     eviction: {default: immediate, waitTimeout: 30m, namespaces: {batch: wait, infra: leave}}
 *     drainTimeout: 1h
 *     remediationTimeout: 30m
 *     validationTimeout: 10m
 *     refailWindow: 24h
 *     windows: [{days: [Sat, Sun], start: "02:00", duration: 4h}]   # the pool's timeZone
 *     breaker: {threshold: "20%", window: 1h}
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kobj.h"
#include "remediation.h"
#include "yamlcfg.h"

static const char *const state_names[REM_N_STATES] = {
    "", "quarantined", "draining", "remediating", "validating", "failed",
};

const char *rem_state_name(enum rem_state s)
{
    return (unsigned)s < REM_N_STATES ? state_names[s] : "";
}

int rem_state_parse(const char *v)
{
    if (!v || !*v)
        return REM_HEALTHY;
    for (int i = 1; i < REM_N_STATES; i++)
        if (strcmp(v, state_names[i]) == 0)
            return i;
    return -1;
}

static const char *const mode_names[] = {"immediate", "wait", "leave"};

const char *rem_evict_mode_name(enum rem_evict_mode m)
{
    return (unsigned)m < ARRAY_SIZE(mode_names) ? mode_names[m] : "immediate";
}

static int mode_parse(const char *s, const char *ctx, enum rem_evict_mode *ret, struct err *e)
{
    for (size_t i = 0; s && i < ARRAY_SIZE(mode_names); i++)
        if (strcmp(s, mode_names[i]) == 0) {
            *ret = (enum rem_evict_mode)i;
            return 0;
        }
    return err_set(e, -EINVAL, "%s: \"%s\": expected immediate, wait or leave", ctx,
                   s ? s : "(null)");
}

void rem_policy_defaults(struct rem_policy *p)
{
    memset(p, 0, sizeof(*p));
    p->enabled = true;
    p->evict_default = REM_EVICT_IMMEDIATE;
    p->evict_wait_s = 1800;
    p->drain_timeout_s = 3600;
    p->remediation_timeout_s = 1800;
    p->validation_timeout_s = 600;
    p->refail_window_s = 86400;
    p->breaker_threshold = json_string("20%");
    p->breaker_window_s = 3600;
}

void rem_policy_done(struct rem_policy *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_ns_modes; i++)
        free(p->ns_modes[i].ns);
    free(p->ns_modes);
    free(p->windows);
    json_decref(p->breaker_threshold);
    memset(p, 0, sizeof(*p));
}

enum rem_evict_mode rem_policy_evict_mode(const struct rem_policy *p, const char *ns)
{
    for (size_t i = 0; i < p->n_ns_modes; i++)
        if (streq_ptr(p->ns_modes[i].ns, ns))
            return p->ns_modes[i].mode;
    return p->evict_default;
}

/* A duration as a string ("30m", "1h30m", "0") or whole seconds, at most REM_DURATION_MAX_S. */
static int duration(json_t *o, const char *key, const char *ctx, int64_t *ret_s, struct err *e)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 0;
    int64_t s = -1;
    uint64_t ms;
    if (json_is_integer(v))
        s = json_integer_value(v);
    else if (json_is_string(v) && parse_duration_ms(json_string_value(v), &ms) == 0 &&
             ms / 1000 <= REM_DURATION_MAX_S)
        s = (int64_t)(ms / 1000);
    if (s < 0 || s > REM_DURATION_MAX_S)
        return err_set(e, -EINVAL,
                       "%s.%s: expected a duration (\"30m\", \"1h\") of at most 10 years, got %s",
                       ctx, key, json_is_string(v) ? json_string_value(v) : cfg_type_name(v));
    *ret_s = s;
    return 0;
}

static int parse_automatic(json_t *spec, const char *ctx, struct rem_policy *p, struct err *e)
{
    json_t *arr = NULL;
    int r = cfg_array(spec, "automatic", ctx, false, &arr, e);
    if (r < 0)
        return r;
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v) {
        int a = json_is_string(v) ? gh_action_parse(json_string_value(v)) : -1;
        if (a < 0 || !gh_action_quarantines((enum gh_action)a))
            return err_set(e, -EINVAL,
                           "%s.automatic[%zu]: expected reset-gpu, reload-driver or reboot-node, "
                           "got %s",
                           ctx, i, json_is_string(v) ? json_string_value(v) : cfg_type_name(v));
        if (a == GH_ACT_REPLACE_HW)
            return err_set(e, -EINVAL,
                           "%s.automatic[%zu]: replace-hw is a person's: it cannot be automatic",
                           ctx, i);
        p->automatic[a] = true;
    }
    return 0;
}

static int parse_eviction(json_t *spec, const char *ctx, struct rem_policy *p, struct err *e)
{
    json_t *ev = NULL;
    int r = cfg_object(spec, "eviction", ctx, false, &ev, e);
    if (r <= 0)
        return r;
    char c2[512];
    snprintf(c2, sizeof(c2), "%.400s.eviction", ctx);
    static const char *const keys[] = {"default", "waitTimeout", "namespaces", NULL};
    if ((r = cfg_known_keys(ev, c2, keys, e)) < 0)
        return r;
    const char *dflt = NULL;
    if ((r = cfg_string(ev, "default", c2, false, &dflt, e)) < 0)
        return r;
    char c3[700];
    snprintf(c3, sizeof(c3), "%s.default", c2);
    if (dflt && (r = mode_parse(dflt, c3, &p->evict_default, e)) < 0)
        return r;
    if ((r = duration(ev, "waitTimeout", c2, &p->evict_wait_s, e)) < 0)
        return r;
    json_t *ns = NULL;
    if ((r = cfg_object(ev, "namespaces", c2, false, &ns, e)) < 0)
        return r;
    const char *k;
    json_t *v;
    p->ns_modes = xcalloc(json_object_size(ns) + 1, sizeof(*p->ns_modes));
    json_object_foreach (ns, k, v) {
        snprintf(c3, sizeof(c3), "%s.namespaces.%.100s", c2, k);
        if (!kobj_valid_dns_label(k))
            return err_set(e, -EINVAL, "%s: not a namespace name", c3);
        enum rem_evict_mode m;
        if (!json_is_string(v))
            return err_set(e, -EINVAL, "%s: expected immediate, wait or leave, got %s", c3,
                           cfg_type_name(v));
        if ((r = mode_parse(json_string_value(v), c3, &m, e)) < 0)
            return r;
        p->ns_modes[p->n_ns_modes++] = (struct rem_ns_mode){xstrdup(k), m};
    }
    return 0;
}

static int parse_breaker(json_t *spec, const char *ctx, struct rem_policy *p, struct err *e)
{
    json_t *br = NULL;
    int r = cfg_object(spec, "breaker", ctx, false, &br, e);
    if (r <= 0)
        return r;
    char c2[512];
    snprintf(c2, sizeof(c2), "%.400s.breaker", ctx);
    static const char *const keys[] = {"threshold", "window", NULL};
    if ((r = cfg_known_keys(br, c2, keys, e)) < 0)
        return r;
    json_t *t = json_object_get(br, "threshold");
    if (t) {
        char c3[560];
        snprintf(c3, sizeof(c3), "%s.threshold", c2);
        json_t *v = NULL;
        if ((r = kobj_int_or_percent(t, c3, &v, e)) < 0)
            return r;
        json_decref(p->breaker_threshold);
        p->breaker_threshold = v;
    }
    if ((r = duration(br, "window", c2, &p->breaker_window_s, e)) < 0)
        return r;
    if (p->breaker_window_s <= 0)
        return err_set(e, -EINVAL, "%s.window: must be longer than 0", c2);
    return 0;
}

int rem_policy_parse(const json_t *spec_in, const char *path, struct rem_policy *ret, struct err *e)
{
    struct rem_policy p _cleanup_(rem_policy_done);
    rem_policy_defaults(&p);
    json_t *spec = (json_t *)spec_in;
    if (spec && !json_is_null(spec)) {
        if (!json_is_object(spec))
            return err_set(e, -EINVAL, "%s: expected an object, got %s", path, cfg_type_name(spec));
        static const char *const keys[] = {
            "enabled",           "automatic",    "eviction", "drainTimeout", "remediationTimeout",
            "validationTimeout", "refailWindow", "windows",  "breaker",      NULL};
        int r;
        if ((r = cfg_known_keys(spec, path, keys, e)) < 0 ||
            (r = cfg_bool(spec, "enabled", path, false, &p.enabled, e)) < 0 ||
            (r = parse_automatic(spec, path, &p, e)) < 0 ||
            (r = parse_eviction(spec, path, &p, e)) < 0 ||
            (r = duration(spec, "drainTimeout", path, &p.drain_timeout_s, e)) < 0 ||
            (r = duration(spec, "remediationTimeout", path, &p.remediation_timeout_s, e)) < 0 ||
            (r = duration(spec, "validationTimeout", path, &p.validation_timeout_s, e)) < 0 ||
            (r = duration(spec, "refailWindow", path, &p.refail_window_s, e)) < 0 ||
            (r = parse_breaker(spec, path, &p, e)) < 0)
            return r;
        json_t *wins = NULL;
        if ((r = cfg_array(spec, "windows", path, false, &wins, e)) < 0)
            return r;
        p.n_windows = json_array_size(wins);
        p.windows = xcalloc(p.n_windows ? p.n_windows : 1, sizeof(*p.windows));
        for (size_t i = 0; i < p.n_windows; i++) {
            char wp[512];
            snprintf(wp, sizeof(wp), "%.400s.windows[%zu]", path, i);
            if ((r = upg_window_parse(json_array_get(wins, i), wp, &p.windows[i], e)) < 0)
                return r;
        }
    }
    *ret = p;
    memset(&p, 0, sizeof(p));
    return 0;
}
