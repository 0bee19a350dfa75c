/* SPDX-License-Identifier: Apache-2.0 */
/* Parsing what drives the upgrade planner: NVIDIA's upgradePolicy, gpuop's DriverUpgradePool
 * and the compatibility matrix (upgrade.h). Errors name the object and the field. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "upgrade.h"
#include "yamlcfg.h"

static const char *const state_names[UPG_N_STATES] = {
    [UPG_UNKNOWN] = "",
    [UPG_REQUIRED] = "upgrade-required",
    [UPG_CORDON] = "cordon-required",
    [UPG_WAIT_JOBS] = "wait-for-jobs-required",
    [UPG_POD_DELETION] = "pod-deletion-required",
    [UPG_DRAIN] = "drain-required",
    [UPG_POD_RESTART] = "pod-restart-required",
    [UPG_VALIDATION] = "validation-required",
    [UPG_UNCORDON] = "uncordon-required",
    [UPG_DONE] = "upgrade-done",
    [UPG_FAILED] = "upgrade-failed",
};

const char *upg_state_name(enum upg_state s)
{
    return s < UPG_N_STATES ? state_names[s] : "";
}

int upg_state_parse(const char *v)
{
    if (!v)
        return UPG_UNKNOWN;
    for (int i = 0; i < UPG_N_STATES; i++)
        if (strcmp(v, state_names[i]) == 0)
            return i;
    return -1;
}

/* ---- NVIDIA's upgradePolicy ----------------------------------------------------------------- */

static int opt_selector(json_t *obj, const char *key, const char *ctx, char **ret, struct err *e)
{
    const char *s = NULL;
    int r = cfg_string(obj, key, ctx, false, &s, e);
    if (r < 0)
        return r;
    if (!s || !*s)
        return 0;
    if (kobj_selector_check(s, e) < 0)
        return err_prefix(e, "%s.%s", ctx, key);
    *ret = xstrdup(s);
    return 0;
}

int upg_policy_parse(const json_t *up_in, const char *path, bool default_auto,
                     struct upg_policy *ret, struct err *e)
{
    json_t *up = (json_t *)up_in;
    struct upg_policy p = {.auto_upgrade = default_auto,
                           .max_parallel = 1,
                           .del_timeout_s = 300,
                           .drain_timeout_s = 300,
                           .validation_timeout_s = 600};
    int r = 0;
    if (up && !json_is_null(up)) {
        if (!json_is_object(up))
            return err_set(e, -EINVAL, "%s: expected an object, got %s", path, cfg_type_name(up));
        static const char *const keys[] = {
            "autoUpgrade", "maxParallelUpgrades", "maxUnavailable", "waitForCompletion",
            "podDeletion", "gpuPodDeletion",      "drain",          NULL};
        int64_t mp = 1;
        json_t *wfc = NULL, *pd = NULL, *dr = NULL, *mu;
        _cleanup_free_ char *ctx_w = xasprintf("%s.waitForCompletion", path);
        _cleanup_free_ char *ctx_p = xasprintf("%s.podDeletion", path);
        _cleanup_free_ char *ctx_d = xasprintf("%s.drain", path);
        _cleanup_free_ char *ctx_mu = xasprintf("%s.maxUnavailable", path);
        if ((r = cfg_known_keys(up, path, keys, e)) < 0 ||
            (r = cfg_bool(up, "autoUpgrade", path, false, &p.auto_upgrade, e)) < 0 ||
            (r = cfg_int64(up, "maxParallelUpgrades", path, false, 0, 100000, &mp, e)) < 0 ||
            (r = cfg_object(up, "waitForCompletion", path, false, &wfc, e)) < 0 ||
            (r = cfg_object(up, "podDeletion", path, false, &pd, e)) < 0 ||
            (r = cfg_object(up, "drain", path, false, &dr, e)) < 0)
            goto fail;
        p.max_parallel = (int)mp;
        mu = json_object_get(up, "maxUnavailable");
        if (mu && !json_is_null(mu) &&
            (r = kobj_int_or_percent(mu, ctx_mu, &p.max_unavailable, e)) < 0)
            goto fail;
        if (!p.max_unavailable)
            p.max_unavailable = json_string("25%");
        if (wfc) {
            static const char *const wk[] = {"timeoutSeconds", "podSelector", NULL};
            if ((r = cfg_known_keys(wfc, ctx_w, wk, e)) < 0 ||
                (r = cfg_int64(wfc, "timeoutSeconds", ctx_w, false, 0, INT32_MAX, &p.wait_timeout_s,
                               e)) < 0 ||
                (r = opt_selector(wfc, "podSelector", ctx_w, &p.wait_selector, e)) < 0)
                goto fail;
        }
        if (pd) {
            static const char *const pk[] = {"force", "timeoutSeconds", "deleteEmptyDir", NULL};
            if ((r = cfg_known_keys(pd, ctx_p, pk, e)) < 0 ||
                (r = cfg_bool(pd, "force", ctx_p, false, &p.del_force, e)) < 0 ||
                (r = cfg_int64(pd, "timeoutSeconds", ctx_p, false, 0, INT32_MAX, &p.del_timeout_s,
                               e)) < 0 ||
                (r = cfg_bool(pd, "deleteEmptyDir", ctx_p, false, &p.del_empty_dir, e)) < 0)
                goto fail;
        }
        if (dr) {
            static const char *const dk[] = {"enable",         "force",          "podSelector",
                                             "timeoutSeconds", "deleteEmptyDir", NULL};
            if ((r = cfg_known_keys(dr, ctx_d, dk, e)) < 0 ||
                (r = cfg_bool(dr, "enable", ctx_d, false, &p.drain_enable, e)) < 0 ||
                (r = cfg_bool(dr, "force", ctx_d, false, &p.drain_force, e)) < 0 ||
                (r = cfg_int64(dr, "timeoutSeconds", ctx_d, false, 0, INT32_MAX, &p.drain_timeout_s,
                               e)) < 0 ||
                (r = cfg_bool(dr, "deleteEmptyDir", ctx_d, false, &p.drain_empty_dir, e)) < 0 ||
                (r = opt_selector(dr, "podSelector", ctx_d, &p.drain_selector, e)) < 0)
                goto fail;
        }
    } else {
        p.max_unavailable = json_string("25%");
    }
    *ret = p;
    return 0;
fail:
    upg_policy_done(&p);
    return r;
}

void upg_policy_done(struct upg_policy *p)
{
    if (!p)
        return;
    json_decref(p->max_unavailable);
    free(p->wait_selector);
    free(p->drain_selector);
    *p = (struct upg_policy){0};
}

/* ---- windows -------------------------------------------------------------------------------- */

static const char *const day_names[7] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};

static int parse_hhmm(const char *s, int *ret_min)
{
    if (!s || strlen(s) != 5 || !isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]) ||
        s[2] != ':' || !isdigit((unsigned char)s[3]) || !isdigit((unsigned char)s[4]))
        return -EINVAL;
    int h = (s[0] - '0') * 10 + (s[1] - '0'), m = (s[3] - '0') * 10 + (s[4] - '0');
    if (h > 23 || m > 59)
        return -EINVAL;
    *ret_min = h * 60 + m;
    return 0;
}

int upg_window_parse(const json_t *w_in, const char *path, struct upg_window *ret, struct err *e)
{
    json_t *w = (json_t *)w_in;
    if (!json_is_object(w))
        return err_set(e, -EINVAL, "%s: expected an object, got %s", path, cfg_type_name(w));
    static const char *const keys[] = {"days", "start", "duration", NULL};
    json_t *days = NULL;
    const char *start = NULL, *dur = NULL;
    int r;
    if ((r = cfg_known_keys(w, path, keys, e)) < 0 ||
        (r = cfg_array(w, "days", path, true, &days, e)) < 0 ||
        (r = cfg_string(w, "start", path, true, &start, e)) < 0 ||
        (r = cfg_string(w, "duration", path, true, &dur, e)) < 0)
        return r;
    struct upg_window out = {0};
    size_t i;
    json_t *d;
    json_array_foreach (days, i, d) {
        const char *s = json_string_value(d);
        int k = 0;
        while (k < 7 && !(s && strncasecmp(s, day_names[k], 3) == 0 && strlen(s) == 3))
            k++;
        if (k == 7)
            return err_set(e, -EINVAL,
                           "%s.days[%zu]: expected one of Sun, Mon, Tue, Wed, Thu, "
                           "Fri, Sat",
                           path, i);
        out.days |= 1u << k;
    }
    if (!out.days)
        return err_set(e, -EINVAL, "%s.days: names no day", path);
    if (parse_hhmm(start, &out.start_min) < 0)
        return err_set(e, -EINVAL, "%s.start: \"%s\" is not a time of day HH:MM", path, start);
    uint64_t ms;
    if (parse_duration_ms(dur, &ms) < 0 || ms < 60000 || ms > 7ull * 24 * 3600 * 1000)
        return err_set(e, -EINVAL, "%s.duration: \"%s\" is not a duration from 1m to 168h", path,
                       dur);
    out.length_min = (int)(ms / 60000);
    *ret = out;
    return 0;
}

/* ---- DriverUpgradePool ---------------------------------------------------------------------- */

static int match_labels(json_t *spec, const char *key, const char *ctx, json_t **ret, struct err *e)
{
    json_t *o = NULL;
    int r = cfg_object(spec, key, ctx, false, &o, e);
    if (r < 0 || !o)
        return r;
    const char *k;
    json_t *v;
    json_object_foreach (o, k, v) {
        if (!kobj_valid_qualified_name(k))
            return err_set(e, -EINVAL, "%s.%s: invalid label key \"%s\"", ctx, key, k);
        if (!json_is_string(v) || !kobj_valid_label_value(json_string_value(v)))
            return err_set(e, -EINVAL, "%s.%s[%s]: expected a label value", ctx, key, k);
    }
    *ret = json_incref(o);
    return 0;
}

int upg_pool_parse(const json_t *obj, struct upg_pool *ret, struct err *e)
{
    const char *name = kobj_name(obj);
    if (!name)
        return err_set(e, -EINVAL, "DriverUpgradePool without metadata.name");
    struct upg_pool p = {.name = xstrdup(name), .max_parallel = -1};
    _cleanup_free_ char *ctx = xasprintf("DriverUpgradePool %s: spec", name);
    json_t *spec = json_object_get(obj, "spec");
    int r = 0;
    if (!json_is_object(spec)) {
        r = err_set(e, -EINVAL, "%s: expected an object", ctx);
        goto fail;
    }
    static const char *const keys[] = {"nodeSelector", "nvidiaDriver", "approval",
                                       "maintenanceWindows", "timeZone", "capacityFloor", "canary",
                                       "minCudaVersion", "maxParallelUpgrades", "maxUnavailable",
                                       /* src/lib/remediation's (rem_policy_parse) */
                                       "remediation", "gpuAllocation", NULL};
    const char *nvd = NULL, *approval = NULL, *tz = NULL, *cuda = NULL, *alloc = NULL;
    json_t *wins = NULL, *canary = NULL;
    int64_t mp = -1;
    if ((r = cfg_known_keys(spec, ctx, keys, e)) < 0 ||
        (r = match_labels(spec, "nodeSelector", ctx, &p.node_selector, e)) < 0 ||
        (r = cfg_string(spec, "nvidiaDriver", ctx, false, &nvd, e)) < 0 ||
        (r = cfg_string(spec, "approval", ctx, false, &approval, e)) < 0 ||
        (r = cfg_array(spec, "maintenanceWindows", ctx, false, &wins, e)) < 0 ||
        (r = cfg_string(spec, "timeZone", ctx, false, &tz, e)) < 0 ||
        (r = cfg_object(spec, "canary", ctx, false, &canary, e)) < 0 ||
        (r = cfg_string(spec, "minCudaVersion", ctx, false, &cuda, e)) < 0 ||
        (r = cfg_string(spec, "gpuAllocation", ctx, false, &alloc, e)) < 0 ||
        (r = cfg_int64(spec, "maxParallelUpgrades", ctx, false, 0, 100000, &mp, e)) < 0)
        goto fail;
    if (!!p.node_selector == !!nvd) {
        r = err_set(e, -EINVAL, "%s: exactly one of nodeSelector and nvidiaDriver is required",
                    ctx);
        goto fail;
    }
    p.nvidia_driver = nvd ? xstrdup(nvd) : NULL;
    if (!approval || strcmp(approval, "auto") == 0) {
        p.approval = UPG_APPROVAL_AUTO;
    } else if (strcmp(approval, "manual") == 0) {
        p.approval = UPG_APPROVAL_MANUAL;
    } else {
        r = err_set(e, -EINVAL, "%s.approval: \"%s\": expected auto or manual", ctx, approval);
        goto fail;
    }
    if (alloc) {
        int a = upg_alloc_parse(alloc);
        if (a < 0) {
            r = err_set(e, -EINVAL, "%s.gpuAllocation: \"%s\": expected devicePlugin or dra", ctx,
                        alloc);
            goto fail;
        }
        p.gpu_allocation = (enum upg_alloc)a;
    }
    if (tz) {
        /* the zone's file is read by the shell (upg_zones), its errors named by the planner */
        if (!upg_tz_name_valid(tz)) {
            r = err_set(e, -EINVAL, "%s.timeZone: \"%s\" is not a time zone name", ctx, tz);
            goto fail;
        }
        p.time_zone = xstrdup(tz);
    }
    if (wins) {
        p.n_windows = json_array_size(wins);
        p.windows = xcalloc(p.n_windows ? p.n_windows : 1, sizeof(*p.windows));
        for (size_t i = 0; i < p.n_windows; i++) {
            _cleanup_free_ char *wp = xasprintf("%s.maintenanceWindows[%zu]", ctx, i);
            if ((r = upg_window_parse(json_array_get(wins, i), wp, &p.windows[i], e)) < 0)
                goto fail;
        }
    }
    json_t *floor = json_object_get(spec, "capacityFloor");
    if (floor && !json_is_null(floor)) {
        _cleanup_free_ char *fp = xasprintf("%s.capacityFloor", ctx);
        if ((r = kobj_int_or_percent(floor, fp, &p.capacity_floor, e)) < 0)
            goto fail;
    }
    json_t *mu = json_object_get(spec, "maxUnavailable");
    if (mu && !json_is_null(mu)) {
        _cleanup_free_ char *mp2 = xasprintf("%s.maxUnavailable", ctx);
        if ((r = kobj_int_or_percent(mu, mp2, &p.max_unavailable, e)) < 0)
            goto fail;
    }
    p.max_parallel = (int)mp;
    if (canary) {
        _cleanup_free_ char *cc = xasprintf("%s.canary", ctx);
        static const char *const ck[] = {"nodes",       "selector",         "soakSeconds",
                                         "maxRestarts", "maxUnhealthyGPUs", NULL};
        int64_t k = 0, soak = 600, mr = 0, unhealthy = 0;
        if ((r = cfg_known_keys(canary, cc, ck, e)) < 0 ||
            (r = cfg_int64(canary, "nodes", cc, false, 0, 100000, &k, e)) < 0 ||
            (r = match_labels(canary, "selector", cc, &p.canary_selector, e)) < 0 ||
            (r = cfg_int64(canary, "soakSeconds", cc, false, 0, 30 * 86400, &soak, e)) < 0 ||
            (r = cfg_int64(canary, "maxRestarts", cc, false, 0, 1000, &mr, e)) < 0 ||
            (r = cfg_int64(canary, "maxUnhealthyGPUs", cc, false, 0, 100000, &unhealthy, e)) < 0)
            goto fail;
        if (k == 0 && !p.canary_selector) {
            r = err_set(e, -EINVAL, "%s: nodes (a count) or selector is required", cc);
            goto fail;
        }
        p.canary_count = (int)k;
        p.canary_soak_s = soak;
        p.canary_max_restarts = (int)mr;
        p.canary_max_unhealthy = (int)unhealthy;
    }
    if (cuda) {
        if (upg_version_cmp(cuda, "0") <= 0 || !isdigit((unsigned char)cuda[0])) {
            r = err_set(e, -EINVAL, "%s.minCudaVersion: \"%s\" is not a version", ctx, cuda);
            goto fail;
        }
        p.min_cuda = xstrdup(cuda);
    }
    const char *ap = kobj_annotation(obj, UPG_ANN_POOL_APPROVED);
    const char *rs = kobj_annotation(obj, UPG_ANN_POOL_RESUMED);
    p.approved_revision = ap ? xstrdup(ap) : NULL;
    p.resumed_revision = rs ? xstrdup(rs) : NULL;
    *ret = p;
    return 0;
fail:
    upg_pool_done(&p);
    return r;
}

void upg_pool_done(struct upg_pool *p)
{
    if (!p)
        return;
    free(p->name);
    json_decref(p->node_selector);
    free(p->nvidia_driver);
    free(p->approved_revision);
    free(p->resumed_revision);
    free(p->windows);
    free(p->time_zone);
    json_decref(p->capacity_floor);
    json_decref(p->canary_selector);
    free(p->min_cuda);
    json_decref(p->max_unavailable);
    *p = (struct upg_pool){0};
}

/* ---- versions and the matrix ---------------------------------------------------------------- */

/* Next numeric component of a version at *pp; -1 at the end. Non-digits separate. */
static long long next_num(const char **pp)
{
    const char *p = *pp;
    while (*p && !isdigit((unsigned char)*p))
        p++;
    if (!*p) {
        *pp = p;
        return -1;
    }
    long long v = 0;
    while (isdigit((unsigned char)*p)) {
        if (v < 1000000000000LL)
            v = v * 10 + (*p - '0');
        p++;
    }
    *pp = p;
    return v;
}

int upg_version_cmp(const char *a, const char *b)
{
    for (;;) {
        long long x = next_num(&a), y = next_num(&b);
        if (x < 0 && y < 0)
            return 0;
        if (x < 0)
            x = 0;
        if (y < 0)
            y = 0;
        if (x != y)
            return x < y ? -1 : 1;
    }
}

struct matrix_branch {
    char *branch;
    json_t *archs; /* array of strings or NULL */
    char *min_kernel, *cuda;
    json_t *os_images; /* array of strings or NULL */
};

struct upg_matrix {
    struct matrix_branch *b;
    size_t n;
};

void upg_matrix_free(struct upg_matrix *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->b[i].branch);
        json_decref(m->b[i].archs);
        free(m->b[i].min_kernel);
        free(m->b[i].cuda);
        json_decref(m->b[i].os_images);
    }
    free(m->b);
    free(m);
}

static int string_list(json_t *o, const char *key, const char *ctx, json_t **ret, struct err *e)
{
    json_t *a = NULL;
    int r = cfg_array(o, key, ctx, false, &a, e);
    if (r < 0 || !a)
        return r;
    size_t i;
    json_t *v;
    json_array_foreach (a, i, v) {
        if (!json_is_string(v))
            return err_set(e, -EINVAL, "%s.%s[%zu]: expected a string, got %s", ctx, key, i,
                           cfg_type_name(v));
    }
    *ret = json_incref(a);
    return 0;
}

#define MATRIX_MAX_BYTES    (1u << 20)
#define MATRIX_MAX_BRANCHES 256

int upg_matrix_parse(const char *text, size_t len, const char *source, struct upg_matrix **ret,
                     struct err *e)
{
    if (len > MATRIX_MAX_BYTES)
        return err_set(e, -E2BIG, "%s: larger than %u bytes", source, MATRIX_MAX_BYTES);
    _cleanup_json_ json_t *doc = NULL;
    int r = yaml_parse_one(text, len, source, &doc, e);
    if (r < 0)
        return r;
    if (!json_is_object(doc))
        return err_set(e, -EINVAL, "%s: expected a mapping, got %s", source, cfg_type_name(doc));
    static const char *const top[] = {"branches", NULL};
    json_t *branches = NULL;
    if ((r = cfg_known_keys(doc, source, top, e)) < 0 ||
        (r = cfg_object(doc, "branches", source, true, &branches, e)) < 0)
        return r;
    size_t n = json_object_size(branches);
    if (n == 0 || n > MATRIX_MAX_BRANCHES)
        return err_set(e, -EINVAL, "%s: branches: expected 1 to %d driver branches", source,
                       MATRIX_MAX_BRANCHES);
    struct upg_matrix *m = xcalloc(1, sizeof(*m));
    m->b = xcalloc(n, sizeof(*m->b));
    const char *k;
    json_t *v;
    json_object_foreach (branches, k, v) {
        _cleanup_free_ char *ctx = xasprintf("%s: branches.%s", source, k);
        struct matrix_branch *b = &m->b[m->n++];
        b->branch = xstrdup(k);
        if (!*k || strspn(k, "0123456789") != strlen(k)) {
            r = err_set(e, -EINVAL, "%s: a driver branch is its major version (\"595\")", ctx);
            goto fail;
        }
        if (!json_is_object(v)) {
            r = err_set(e, -EINVAL, "%s: expected a mapping, got %s", ctx, cfg_type_name(v));
            goto fail;
        }
        static const char *const bk[] = {"architectures", "minKernel", "cudaVersion", "osImages",
                                         NULL};
        const char *mk = NULL, *cuda = NULL;
        if ((r = cfg_known_keys(v, ctx, bk, e)) < 0 ||
            (r = string_list(v, "architectures", ctx, &b->archs, e)) < 0 ||
            (r = cfg_string(v, "minKernel", ctx, false, &mk, e)) < 0 ||
            (r = cfg_string(v, "cudaVersion", ctx, true, &cuda, e)) < 0 ||
            (r = string_list(v, "osImages", ctx, &b->os_images, e)) < 0)
            goto fail;
        if (!isdigit((unsigned char)cuda[0])) {
            r = err_set(e, -EINVAL, "%s.cudaVersion: \"%s\" is not a version", ctx, cuda);
            goto fail;
        }
        if (mk && !isdigit((unsigned char)mk[0])) {
            r = err_set(e, -EINVAL, "%s.minKernel: \"%s\" is not a version", ctx, mk);
            goto fail;
        }
        b->cuda = xstrdup(cuda);
        b->min_kernel = mk ? xstrdup(mk) : NULL;
    }
    *ret = m;
    return 0;
fail:
    upg_matrix_free(m);
    return r;
}

static bool list_has(const json_t *list, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach ((json_t *)list, i, v) {
        if (strcasecmp(json_string_value(v), s) == 0)
            return true;
    }
    return false;
}

bool upg_matrix_allows(const struct upg_matrix *m, const char *version, const char *arch,
                       const char *kernel, const char *os, const char *min_cuda, char **ret_reason)
{
    char branch[16];
    size_t bl = version ? strspn(version, "0123456789") : 0;
    if (bl == 0 || bl >= sizeof(branch)) {
        *ret_reason = xasprintf("driver version \"%s\" has no branch", version ? version : "");
        return false;
    }
    memcpy(branch, version, bl);
    branch[bl] = '\0';
    const struct matrix_branch *b = NULL;
    for (size_t i = 0; m && i < m->n; i++)
        if (strcmp(m->b[i].branch, branch) == 0)
            b = &m->b[i];
    if (!b) {
        *ret_reason = xasprintf("driver branch %s is not in the compatibility matrix", branch);
        return false;
    }
    if (arch && b->archs && !list_has(b->archs, arch)) {
        *ret_reason = xasprintf("driver %s does not support GPU architecture %s", version, arch);
        return false;
    }
    if (kernel && b->min_kernel && upg_version_cmp(kernel, b->min_kernel) < 0) {
        *ret_reason = xasprintf("driver %s needs kernel %s or newer, node runs %s", version,
                                b->min_kernel, kernel);
        return false;
    }
    if (os && b->os_images && !list_has(b->os_images, os)) {
        *ret_reason = xasprintf("driver %s has no published image for %s", version, os);
        return false;
    }
    if (min_cuda && upg_version_cmp(b->cuda, min_cuda) < 0) {
        *ret_reason = xasprintf("driver %s supports CUDA %s, the pool's workloads need %s", version,
                                b->cuda, min_cuda);
        return false;
    }
    return true;
}
