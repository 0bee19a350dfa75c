/* SPDX-License-Identifier: Apache-2.0 */
/* The executor's decisions (driver-manager.h, "remediation requests"): the request parsed, what
 * is refused and why, what is carried out. Pure. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "driver-manager.h"
#include "kobj.h"
#include "remediation.h"

const char *dm_rem_do_name(enum dm_rem_do d)
{
    static const char *const names[] = {"idle",   "answered",    "fail",       "reset",
                                        "reload", "reload-wait", "reload-done"};
    return (size_t)d < ARRAY_SIZE(names) ? names[d] : "?";
}

/* The next space-separated word of *p into buf; false at the end. -E2BIG in *r when too long. */
static bool word(const char **p, char *buf, size_t n, int *r)
{
    const char *s = *p + strspn(*p, " ");
    size_t len = strcspn(s, " ");
    if (len == 0)
        return false;
    if (len >= n)
        *r = -E2BIG;
    snprintf(buf, n, "%.*s", (int)len, s);
    *p = s + len;
    return true;
}

int dm_rem_parse(const char *text, struct dm_rem_request *ret, struct err *e)
{
    struct dm_rem_request q = {.action = -1};
    char gpus[DM_REM_GPUS_MAX * DM_REM_UUID_MAX], extra[8];
    const char *p = text ? text : "";
    int r = 0;
    if (!word(&p, q.action_word, sizeof(q.action_word), &r) || r < 0)
        return err_set(e, -EINVAL, "request \"%s\": no action", text ? text : "");
    if (!word(&p, q.id, sizeof(q.id), &r) || r < 0)
        return err_set(e, -EINVAL, "request \"%s\": no id (or one over %d characters)", text,
                       DM_REM_ID_MAX - 1);
    bool have_gpus = word(&p, gpus, sizeof(gpus), &r);
    if (r < 0)
        return err_set(e, -EINVAL, "request %s: the GPU list is too long", q.id);
    if (word(&p, extra, sizeof(extra), &r))
        return err_set(e, -EINVAL, "request %s: unexpected words after the GPU list", q.id);
    for (const char *g = have_gpus ? gpus : ""; *g;) {
        size_t len = strcspn(g, ",");
        if (len == 0 || len >= DM_REM_UUID_MAX)
            return err_set(e, -EINVAL, "request %s: GPU \"%.*s\": not a GPU UUID", q.id, (int)len,
                           g);
        if (q.n_gpus == DM_REM_GPUS_MAX)
            return err_set(e, -EINVAL, "request %s: more than %d GPUs", q.id, DM_REM_GPUS_MAX);
        snprintf(q.gpus[q.n_gpus++], DM_REM_UUID_MAX, "%.*s", (int)len, g);
        g += len + (g[len] == ',');
    }
    q.action = gh_action_parse(q.action_word);
    *ret = q;
    return 0;
}

int dm_rem_actions_parse(const char *text, bool ret[GH_ACT_COUNT], struct err *e)
{
    bool allow[GH_ACT_COUNT] = {0};
    for (const char *p = text ? text : ""; *p;) {
        size_t len = strcspn(p, ",");
        char w[32];
        snprintf(w, sizeof(w), "%.*s", (int)len, p);
        int a = len < sizeof(w) ? gh_action_parse(w) : -1;
        if (a != GH_ACT_RESET_GPU && a != GH_ACT_RELOAD_DRIVER)
            return err_set(e, -EINVAL,
                           "\"%.*s\": not an action the driver manager takes (reset-gpu, "
                           "reload-driver)",
                           (int)len, p);
        allow[a] = true;
        p += len + (p[len] == ',');
    }
    memcpy(ret, allow, sizeof(allow));
    return 0;
}

/* "<id>" or "<id> <why>" answers id. */
static bool answers(const char *v, const char *id)
{
    size_t n = strlen(id);
    return v && strncmp(v, id, n) == 0 && (v[n] == '\0' || v[n] == ' ');
}

static const struct dm_rem_gpu *gpu_find(const struct dm_rem_input *in, const char *uuid)
{
    for (size_t i = 0; i < in->n_gpus; i++)
        if (in->gpus[i].uuid && strcmp(in->gpus[i].uuid, uuid) == 0)
            return &in->gpus[i];
    return NULL;
}

static void fail(struct dm_rem_decision *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail(struct dm_rem_decision *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->why, sizeof(d->why), fmt, ap);
    va_end(ap);
    d->what = DM_REM_FAIL;
}

static void decide_reset(const struct dm_rem_input *in, struct dm_rem_decision *d)
{
    const struct dm_rem_request *q = &d->req;
    if (q->n_gpus == 0)
        return fail(d, "reset-gpu names no GPU");
    if (!in->gpus)
        return fail(d, "the node's GPUs cannot be read: %s",
                    in->gpus_error ? in->gpus_error : "no NVML");
    for (size_t i = 0; i < q->n_gpus; i++) {
        const struct dm_rem_gpu *g = gpu_find(in, q->gpus[i]);
        if (!g)
            return fail(d, "GPU %s is not on node %s", q->gpus[i], in->node);
        if (g->lost)
            return fail(d,
                        "GPU %s is lost (off the bus): a reset cannot bring it back, a reboot can",
                        q->gpus[i]);
        if (g->processes_unknown)
            return fail(d, "the processes on GPU %s cannot be read: no reset while they may run",
                        q->gpus[i]);
        if (g->processes)
            return fail(d, "GPU %s has %u process%s running on it: a reset needs none", q->gpus[i],
                        g->processes, g->processes == 1 ? "" : "es");
    }
    d->what = DM_REM_RESET;
}

/* The reload mark: "<id> <pod>"; whether it is this request's, and the pod it evicted. */
static bool reload_mark(const char *v, const char *id, char *pod, size_t n)
{
    if (!answers(v, id) || !v[strlen(id)])
        return false;
    snprintf(pod, n, "%s", v + strlen(id) + 1);
    return true;
}

static void decide_reload(const struct dm_rem_input *in, struct dm_rem_decision *d)
{
    char marked[DM_REM_POD_MAX + 1];
    bool have_pod = in->pod && in->pod[0];
    if (reload_mark(in->reload, d->req.id, marked, sizeof(marked))) {
        /* this request already restarted a driver pod: the one marked, unless it is this one */
        if (have_pod && strcmp(marked, in->pod) == 0) {
            snprintf(d->why, sizeof(d->why), "driver pod %s was evicted for the reload", marked);
            d->what = DM_REM_RELOAD_WAIT;
        } else if (in->owner == NODESTATE_OWNER_CONTAINER && in->driver_ready) {
            d->what = DM_REM_RELOAD_DONE;
        } else {
            snprintf(d->why, sizeof(d->why), "waiting for the reloaded driver to be ready");
            d->what = DM_REM_RELOAD_WAIT;
        }
        return;
    }
    if (in->owner == NODESTATE_OWNER_HOST)
        return fail(d, "the driver on node %s is the host's: gpuop does not reload it", in->node);
    if (in->owner != NODESTATE_OWNER_CONTAINER || !in->driver_ready)
        return fail(d, "the driver container on node %s is not ready: no driver to reload",
                    in->node);
    if (!have_pod)
        return fail(d, "the driver pod's name is unknown (POD_NAME): a reload restarts it");
    d->what = DM_REM_RELOAD;
}

void dm_rem_decide(const struct dm_rem_input *in, struct dm_rem_decision *ret)
{
    struct dm_rem_decision d = {.what = DM_REM_IDLE};
    if (!in->request || !in->request[0]) {
        *ret = d;
        return;
    }
    /* the id first: an answered request is left alone, however it reads */
    char id[DM_REM_ID_MAX] = "";
    const char *p = in->request;
    int r = 0;
    char first[32];
    if (word(&p, first, sizeof(first), &r) && !word(&p, id, sizeof(id), &r))
        id[0] = '\0';
    if (r < 0)
        id[0] = '\0';
    struct err e = {0};
    if (id[0] && (answers(in->done, id) || answers(in->failed, id))) {
        d.what = DM_REM_ANSWERED;
        snprintf(d.req.id, sizeof(d.req.id), "%s", id);
    } else if (dm_rem_parse(in->request, &d.req, &e) < 0) {
        /* without an id there is nothing to answer; with one the request is refused */
        snprintf(d.req.id, sizeof(d.req.id), "%s", id);
        if (id[0])
            fail(&d, "%s", err_msg(&e));
        else
            snprintf(d.why, sizeof(d.why), "%s", err_msg(&e));
    } else if (d.req.action != GH_ACT_RESET_GPU && d.req.action != GH_ACT_RELOAD_DRIVER) {
        fail(&d, "%s: not an action the driver manager takes (reset-gpu, reload-driver)",
             d.req.action_word);
    } else if (!in->allow[d.req.action]) {
        fail(&d, "%s is not allowed on node %s (the driver manager's --remediation-actions)",
             d.req.action_word, in->node);
    } else if (d.req.action == GH_ACT_RESET_GPU) {
        decide_reset(in, &d);
    } else {
        decide_reload(in, &d);
    }
    *ret = d;
}

void dm_rem_input_annotations(const json_t *ann, struct dm_rem_input *in)
{
    in->request = kobj_str(ann, REM_ANN_REQUEST);
    in->done = kobj_str(ann, REM_ANN_REQUEST_DONE);
    in->failed = kobj_str(ann, REM_ANN_REQUEST_FAILED);
    in->reload = kobj_str(ann, DM_ANN_RELOAD);
}

void dm_rem_answer_of(const char *id, const char *why, struct dm_rem_answer *ret)
{
    assert(id);
    *ret = (struct dm_rem_answer){0};
    if (why) {
        ret->annotation = REM_ANN_REQUEST_FAILED;
        ret->log_what = "remediation request failed";
        ret->event_type = "Warning";
        ret->event_reason = "GPURemediationRequestFailed";
        snprintf(ret->value, sizeof(ret->value), "%s %s", id, why);
        snprintf(ret->message, sizeof(ret->message), "request %s failed: %s", id, why);
    } else {
        ret->annotation = REM_ANN_REQUEST_DONE;
        ret->log_what = "remediation request done";
        ret->event_type = "Normal";
        ret->event_reason = "GPURemediationRequestDone";
        snprintf(ret->value, sizeof(ret->value), "%s", id);
        snprintf(ret->message, sizeof(ret->message), "request %s carried out", id);
    }
}

void dm_rem_tools_pick(const struct nodestate_driver_facts *f, enum nodestate_owner owner,
                       const char *driver_root, const char *host_root, struct dm_rem_tools *ret)
{
    memset(ret, 0, sizeof(*ret));
    const char *nvml, *smi, *root;
    if (owner == NODESTATE_OWNER_CONTAINER) {
        ret->from = "driver root";
        nvml = f->root_nvml, smi = f->root_smi, root = driver_root;
    } else if (owner == NODESTATE_OWNER_HOST) {
        ret->from = "host";
        nvml = f->host_nvml, smi = f->host_smi, root = host_root;
    } else {
        snprintf(ret->why, sizeof(ret->why),
                 "no driver on the node (neither a driver container's "
                 "nor the host's)");
        return;
    }
    if (!nvml[0]) {
        snprintf(ret->why, sizeof(ret->why), "the %s %s has no libnvidia-ml.so.1", ret->from,
                 root ? root : "");
        return;
    }
    if (strlcpy_s(ret->nvml, nvml, sizeof(ret->nvml)) >= sizeof(ret->nvml) ||
        strlcpy_s(ret->lib_dir, nvml, sizeof(ret->lib_dir)) >= sizeof(ret->lib_dir)) {
        ret->nvml[0] = ret->lib_dir[0] = 0;
        snprintf(ret->why, sizeof(ret->why), "the %s's libnvidia-ml.so.1: path too long",
                 ret->from);
        return;
    }
    char *slash = strrchr(ret->lib_dir, '/');
    if (slash && slash != ret->lib_dir)
        *slash = 0;
    else
        strlcpy_s(ret->lib_dir, "/", sizeof(ret->lib_dir));
    if (!smi[0] || strlcpy_s(ret->smi, smi, sizeof(ret->smi)) >= sizeof(ret->smi)) {
        ret->smi[0] = 0;
        snprintf(ret->why, sizeof(ret->why), "the %s %s has no nvidia-smi", ret->from,
                 root ? root : "");
    }
}
