/* SPDX-License-Identifier: Apache-2.0 */
/* kl_pod_plan: the kubelet's decisions for one pod (kl-pod-plan.h). Pure: no I/O, no clock. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kl-pod-plan.h"
#include "kobj.h"

#define DEFAULT_BACKOFF_BASE_MS 10000
#define DEFAULT_BACKOFF_MAX_MS  300000
#define DEFAULT_GRACE_S         30
/* ErrImagePull shows this long after a failed pull before ImagePullBackOff (a tenth of the
 * base delay: the kubelet's next sync after the failure). */
#define ERR_IMAGE_PULL_SHARE 10
#define PRESTOP_MIN_GRACE_MS 2000

/* ---- small helpers ------------------------------------------------------------------------ */

void kl_go_duration(uint64_t ms, char *buf, size_t n)
{
    if (ms == 0) {
        snprintf(buf, n, "0s");
        return;
    }
    if (ms < 1000) {
        snprintf(buf, n, "%llums", (unsigned long long)ms);
        return;
    }
    uint64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, frac = ms % 1000;
    char secs[32];
    if (frac) {
        char f[8];
        snprintf(f, sizeof(f), "%03llu", (unsigned long long)frac);
        for (int i = 2; i > 0 && f[i] == '0'; i--)
            f[i] = '\0';
        snprintf(secs, sizeof(secs), "%llu.%ss", (unsigned long long)s, f);
    } else {
        snprintf(secs, sizeof(secs), "%llus", (unsigned long long)s);
    }
    if (h)
        snprintf(buf, n, "%lluh%llum%s", (unsigned long long)h, (unsigned long long)m, secs);
    else if (m)
        snprintf(buf, n, "%llum%s", (unsigned long long)m, secs);
    else
        snprintf(buf, n, "%s", secs);
}

static const json_t *arr(const json_t *v, const char *path)
{
    json_t *a = kobj_path(v, path);
    return json_is_array(a) ? a : NULL;
}

static int64_t json_int_or(const json_t *obj, const char *key, int64_t def)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? json_integer_value(v) : def;
}

static void ts(uint64_t ms, char buf[32])
{
    time_rfc3339(ms, buf, 32);
}

/* ---- probes ------------------------------------------------------------------------------- */

static const char *const probe_keys[KL_PROBE_N] = {"startupProbe", "readinessProbe",
                                                   "livenessProbe"};

const char *kl_probe_kind_name(enum kl_probe_kind k)
{
    static const char *const names[KL_PROBE_N] = {"Startup", "Readiness", "Liveness"};
    return k < KL_PROBE_N ? names[k] : "?";
}

const json_t *kl_probe_spec(const json_t *container, enum kl_probe_kind kind)
{
    json_t *p = json_object_get(container, probe_keys[kind]);
    return json_is_object(p) ? p : NULL;
}

void kl_probe_init(struct kl_probe_state *s, enum kl_probe_kind kind)
{
    *s = (struct kl_probe_state){0};
    s->result = kind == KL_PROBE_READINESS  ? KL_PROBE_FAILURE
                : kind == KL_PROBE_LIVENESS ? KL_PROBE_SUCCESS
                                            : KL_PROBE_UNKNOWN;
}

void kl_probe_record(struct kl_probe_state *s, const json_t *probe, bool success, uint64_t now_ms)
{
    int64_t st = json_int_or(probe, "successThreshold", 1);
    int64_t ft = json_int_or(probe, "failureThreshold", 3);
    s->last_ms = now_ms;
    if (success) {
        s->failures = 0;
        s->successes++;
        if ((int64_t)s->successes >= st)
            s->result = KL_PROBE_SUCCESS;
    } else {
        s->successes = 0;
        s->failures++;
        if ((int64_t)s->failures >= ft)
            s->result = KL_PROBE_FAILURE;
    }
}

/* ---- QoS ---------------------------------------------------------------------------------- */

static bool qos_ctr(const json_t *c, bool *any, bool *guaranteed)
{
    static const char *const res[] = {"cpu", "memory"};
    json_t *req = kobj_path(c, "resources.requests"), *lim = kobj_path(c, "resources.limits");
    for (size_t i = 0; i < ARRAY_SIZE(res); i++) {
        const char *r = kobj_str(req, res[i]), *l = kobj_str(lim, res[i]);
        int64_t rv = 0, lv = 0;
        bool has_r = r && kobj_quantity_milli(r, &rv) == 0 && rv != 0;
        bool has_l = l && kobj_quantity_milli(l, &lv) == 0 && lv != 0;
        if (has_r || has_l)
            *any = true;
        if (!has_l || (has_r && rv != lv))
            *guaranteed = false;
    }
    return true;
}

const char *kl_pod_qos_class(const json_t *pod)
{
    bool any = false, guaranteed = true;
    static const char *const lists[] = {"spec.initContainers", "spec.containers"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        const json_t *a = arr(pod, lists[l]);
        size_t i;
        json_t *c;
        json_array_foreach (a, i, c)
            qos_ctr(c, &any, &guaranteed);
    }
    if (!any)
        return "BestEffort";
    return guaranteed ? "Guaranteed" : "Burstable";
}

/* ---- the plan ----------------------------------------------------------------------------- */

struct planner {
    const json_t *pod;
    const struct kl_pod_obs *obs;
    const json_t *prev; /* status.* of the object */
    uint64_t now, base, max;
    const char *restart_policy;
    bool deleting;
    uint64_t grace_ms;
    struct kl_pod_plan *out;
    size_t cap_actions, cap_events;
    const char *pod_name, *pod_ns, *pod_uid;
};

static void wake_at(struct planner *p, uint64_t t)
{
    if (t < p->out->wake_ms)
        p->out->wake_ms = t;
}

static struct kl_action *add_action(struct planner *p, enum kl_action_kind kind, bool init,
                                    size_t index, const char *name)
{
    struct kl_pod_plan *o = p->out;
    if (o->n_actions == p->cap_actions) {
        p->cap_actions = p->cap_actions ? p->cap_actions * 2 : 8;
        o->actions = xrealloc(o->actions, p->cap_actions * sizeof(*o->actions));
    }
    struct kl_action *a = &o->actions[o->n_actions++];
    *a = (struct kl_action){.kind = kind, .init = init, .index = index, .name = name};
    return a;
}

static void add_event(struct planner *p, const char *type, const char *reason, bool init,
                      const char *ctr, char *message /* taken */)
{
    struct kl_pod_plan *o = p->out;
    if (o->n_events == p->cap_events) {
        p->cap_events = p->cap_events ? p->cap_events * 2 : 4;
        o->events = xrealloc(o->events, p->cap_events * sizeof(*o->events));
    }
    o->events[o->n_events++] = (struct kl_plan_event){
        .type = xstrdup(type),
        .reason = xstrdup(reason),
        .message = message,
        .field_path =
            ctr ? xasprintf("spec.%s{%s}", init ? "initContainers" : "containers", ctr) : NULL,
    };
}

/* The previous status's waiting reason of a container, to raise an Event only on entering. */
static const char *prev_waiting_reason(const struct planner *p, bool init, const char *name)
{
    const json_t *a =
        json_object_get(p->prev, init ? "initContainerStatuses" : "containerStatuses");
    size_t i;
    json_t *cs;
    json_array_foreach (a, i, cs) {
        if (streq_ptr(kobj_str(cs, "name"), name))
            return kobj_path_str(cs, "state.waiting.reason");
    }
    return NULL;
}

static uint64_t pull_backoff(const struct planner *p, unsigned failures)
{
    uint64_t d = p->base;
    for (unsigned i = 1; i < failures && d < p->max; i++)
        d *= 2;
    return d < p->max ? d : p->max;
}

static bool backoff_expired(const struct planner *p, const struct kl_ctr_obs *o)
{
    return o->backoff_ms == 0 || p->now - o->backoff_updated_ms > 2 * p->max;
}

/* What the status says of a container, and whether the pod's phase counts it as running,
 * waiting, stopped or succeeded. */
struct ctr_view {
    const char *waiting_reason;
    char *waiting_message;
    bool running, terminated, ready, started;
};

static json_t *termination_json(const struct kl_ctr_termination *t)
{
    char s[32], f[32];
    ts(t->started_ms, s);
    ts(t->finished_ms, f);
    const char *reason = t->reason           ? t->reason
                         : t->oom_killed     ? "OOMKilled"
                         : t->exit_code == 0 ? "Completed"
                                             : "Error";
    json_t *j = json_pack("{s:i,s:s,s:s,s:s}", "exitCode", t->exit_code, "reason", reason,
                          "startedAt", s, "finishedAt", f);
    if (t->message)
        json_object_set_new(j, "message", json_string(t->message));
    if (t->container_id)
        json_object_set_new(j, "containerID", json_string(t->container_id));
    return j;
}

char *kl_log_tail_message(const char *log, size_t n)
{
    enum { LINES = 80, BYTES = 2048 };
    size_t start = n, lines = 0;
    /* a final newline ends the last line rather than starting an empty one */
    size_t end = n > 0 && log[n - 1] == '\n' ? n - 1 : n;
    start = end;
    while (start > 0) {
        if (log[start - 1] == '\n' && ++lines == LINES)
            break;
        start--;
    }
    if (n - start > BYTES)
        start = n - BYTES;
    if (start >= n)
        return NULL;
    return strndup(log + start, n - start);
}

/* Decides one container: actions, and its view for the status. runnable: its turn has come
 * (init containers before it succeeded). Returns true when the container is "done" in the
 * init-sequence sense (exited 0). */
static bool plan_container(struct planner *p, bool init, size_t index, const json_t *spec,
                           const struct kl_ctr_obs *o, bool runnable, bool pod_terminal,
                           struct ctr_view *v)
{
    const char *name = kobj_str(spec, "name");
    const char *image = kobj_str(spec, "image");
    *v = (struct ctr_view){0};

    if (o->phase == KL_CTR_RUNNING) {
        v->running = true;
        bool has_startup = kl_probe_spec(spec, KL_PROBE_STARTUP) != NULL;
        v->started = !has_startup || o->probes[KL_PROBE_STARTUP].result == KL_PROBE_SUCCESS;
        const json_t *rp = kl_probe_spec(spec, KL_PROBE_READINESS);
        v->ready = v->started && !p->deleting &&
                   (!rp || o->probes[KL_PROBE_READINESS].result == KL_PROBE_SUCCESS);
        if (init)
            v->ready = false;
        if (o->killing)
            return false;
        if (p->deleting) {
            uint64_t end = p->obs->deletion_seen_ms + p->grace_ms;
            uint64_t left = end > p->now ? end - p->now : 0;
            if (kobj_path(spec, "lifecycle.preStop") && !o->prestop_done) {
                struct kl_action *a = add_action(p, KL_ACT_PRESTOP, init, index, name);
                a->grace_ms = left;
                return false;
            }
            if (left < PRESTOP_MIN_GRACE_MS && o->prestop_done)
                left = PRESTOP_MIN_GRACE_MS;
            struct kl_action *a = add_action(p, KL_ACT_KILL, init, index, name);
            a->grace_ms = left;
            a->message = xasprintf("Stopping container %s", name);
            return false;
        }
        if (init)
            return false;
        /* probes: the startup probe alone until it succeeds */
        for (int k = 0; k < KL_PROBE_N; k++) {
            const json_t *ps = kl_probe_spec(spec, (enum kl_probe_kind)k);
            if (!ps)
                continue;
            if (k == KL_PROBE_STARTUP && v->started)
                continue;
            if (k != KL_PROBE_STARTUP && !v->started)
                continue;
            const struct kl_probe_state *st = &o->probes[k];
            if ((k == KL_PROBE_STARTUP || k == KL_PROBE_LIVENESS) &&
                st->result == KL_PROBE_FAILURE) {
                struct kl_action *a = add_action(p, KL_ACT_KILL, init, index, name);
                int64_t g =
                    json_int_or(ps, "terminationGracePeriodSeconds",
                                json_int_or(json_object_get(p->pod, "spec"),
                                            "terminationGracePeriodSeconds", DEFAULT_GRACE_S));
                a->grace_ms = g > 0 ? (uint64_t)g * 1000 : 0;
                a->message = xasprintf("Container %s failed %s probe, will be restarted", name,
                                       k == KL_PROBE_STARTUP ? "startup" : "liveness");
                return false;
            }
            uint64_t due =
                st->last_ms
                    ? st->last_ms + (uint64_t)json_int_or(ps, "periodSeconds", 10) * 1000
                    : o->started_ms + (uint64_t)json_int_or(ps, "initialDelaySeconds", 0) * 1000;
            if (due <= p->now) {
                struct kl_action *a = add_action(p, KL_ACT_PROBE, init, index, name);
                a->probe = (enum kl_probe_kind)k;
                a->grace_ms = (uint64_t)json_int_or(ps, "timeoutSeconds", 1) * 1000;
            } else {
                wake_at(p, due);
            }
        }
        return false;
    }

    if (o->phase == KL_CTR_EXITED) {
        bool ok = o->exited.exit_code == 0;
        bool restart = init ? !ok && strcmp(p->restart_policy, "Never") != 0
                            : strcmp(p->restart_policy, "Always") == 0 ||
                                  (!ok && strcmp(p->restart_policy, "OnFailure") == 0);
        if (p->deleting || pod_terminal)
            restart = false;
        v->terminated = true;
        if (!restart)
            return ok;
        /* restart, after the backoff */
        if (!backoff_expired(p, o) && p->now < o->exited.finished_ms + o->backoff_ms) {
            char d[32];
            kl_go_duration(o->backoff_ms, d, sizeof(d));
            v->terminated = false;
            v->waiting_reason = "CrashLoopBackOff";
            v->waiting_message =
                xasprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", d, name,
                          p->pod_name, p->pod_ns, p->pod_uid);
            if (!streq_ptr(prev_waiting_reason(p, init, name), "CrashLoopBackOff"))
                add_event(p, "Warning", "BackOff", init, name,
                          xasprintf("Back-off restarting failed container %s in pod %s_%s(%s)",
                                    name, p->pod_name, p->pod_ns, p->pod_uid));
            wake_at(p, o->exited.finished_ms + o->backoff_ms);
            return false;
        }
        uint64_t next = backoff_expired(p, o) ? p->base : o->backoff_ms * 2;
        if (next > p->max)
            next = p->max;
        struct kl_action *a = add_action(p, KL_ACT_START, init, index, name);
        a->backoff_ms = next;
        return false;
    }

    /* never started (this attempt) */
    if (pod_terminal || p->deleting || !runnable || !p->obs->sandbox_ready) {
        v->waiting_reason = init || !runnable ? "PodInitializing" : "ContainerCreating";
        return false;
    }
    if (!o->pulled) {
        if (o->pull_failures > 0) {
            uint64_t bo = pull_backoff(p, o->pull_failures);
            uint64_t show_err = o->last_pull_ms + p->base / ERR_IMAGE_PULL_SHARE;
            if (p->now < o->last_pull_ms + bo) {
                if (p->now < show_err) {
                    v->waiting_reason = "ErrImagePull";
                    v->waiting_message = xstrdup(o->pull_error ? o->pull_error : "");
                    wake_at(p, show_err);
                } else {
                    v->waiting_reason = "ImagePullBackOff";
                    v->waiting_message = xasprintf("Back-off pulling image \"%s\"", image);
                    if (!streq_ptr(prev_waiting_reason(p, init, name), "ImagePullBackOff"))
                        add_event(p, "Normal", "BackOff", init, name,
                                  xasprintf("Back-off pulling image \"%s\"", image));
                }
                wake_at(p, o->last_pull_ms + bo);
                return false;
            }
        }
        add_action(p, KL_ACT_PULL, init, index, name);
        v->waiting_reason = "ContainerCreating";
        if (o->pull_failures > 0) {
            v->waiting_reason = "ErrImagePull";
            v->waiting_message = xstrdup(o->pull_error ? o->pull_error : "");
        }
        return false;
    }
    if (o->create_failures > 0) {
        uint64_t bo = pull_backoff(p, o->create_failures);
        v->waiting_reason = o->create_reason ? o->create_reason : "CreateContainerError";
        v->waiting_message = xstrdup(o->create_error ? o->create_error : "");
        if (p->now < o->last_create_ms + bo) {
            wake_at(p, o->last_create_ms + bo);
            return false;
        }
    } else {
        v->waiting_reason = "ContainerCreating";
    }
    struct kl_action *a = add_action(p, KL_ACT_START, init, index, name);
    a->backoff_ms = o->backoff_ms;
    return false;
}

static json_t *status_json(const struct planner *p, const json_t *spec, const struct kl_ctr_obs *o,
                           const struct ctr_view *v)
{
    json_t *cs = json_object();
    json_object_set_new(cs, "name", json_string(kobj_str(spec, "name")));
    json_t *state = json_object();
    char t[32];
    if (v->waiting_reason) {
        json_t *w = json_pack("{s:s}", "reason", v->waiting_reason);
        if (v->waiting_message && v->waiting_message[0])
            json_object_set_new(w, "message", json_string(v->waiting_message));
        json_object_set_new(state, "waiting", w);
    } else if (v->running) {
        ts(o->started_ms, t);
        json_object_set_new(state, "running", json_pack("{s:s}", "startedAt", t));
    } else if (v->terminated) {
        json_object_set_new(state, "terminated", termination_json(&o->exited));
    } else {
        json_object_set_new(state, "waiting", json_pack("{s:s}", "reason", "ContainerCreating"));
    }
    json_object_set_new(cs, "state", state);
    json_t *last = json_object();
    /* a container in backoff shows its exit as lastState; a running one, the previous exit */
    if (v->waiting_reason && o->phase == KL_CTR_EXITED)
        json_object_set_new(last, "terminated", termination_json(&o->exited));
    else if (o->has_last)
        json_object_set_new(last, "terminated", termination_json(&o->last));
    json_object_set_new(cs, "lastState", last);
    json_object_set_new(cs, "ready", json_boolean(v->ready));
    json_object_set_new(cs, "restartCount", json_integer(o->restart_count));
    json_object_set_new(cs, "image", json_string(kobj_str(spec, "image")));
    json_object_set_new(cs, "imageID", json_string(o->image_id ? o->image_id : ""));
    if (o->container_id)
        json_object_set_new(cs, "containerID", json_string(o->container_id));
    json_object_set_new(cs, "started", json_boolean(v->running && v->started));
    (void)p;
    return cs;
}

/* The kubelet's getPhase. */
struct phase_counts {
    unsigned pending_init, failed_init, running, waiting, stopped, succeeded;
};

static void count_ctr(json_t *cs, bool init, struct phase_counts *c)
{
    json_t *st = json_object_get(cs, "state");
    json_t *last_t = kobj_path(cs, "lastState.terminated");
    if (init) {
        if (json_object_get(st, "running"))
            c->pending_init++;
        else if (json_object_get(st, "terminated")) {
            if (json_integer_value(kobj_path(st, "terminated.exitCode")) != 0)
                c->failed_init++;
        } else if (last_t) {
            if (json_integer_value(json_object_get(last_t, "exitCode")) != 0)
                c->failed_init++;
        } else
            c->pending_init++;
        return;
    }
    if (json_object_get(st, "running"))
        c->running++;
    else if (json_object_get(st, "terminated")) {
        c->stopped++;
        if (json_integer_value(kobj_path(st, "terminated.exitCode")) == 0)
            c->succeeded++;
    } else if (last_t)
        c->stopped++;
    else
        c->waiting++;
}

static const char *get_phase(const struct planner *p, const struct phase_counts *c, bool terminal)
{
    if (c->failed_init > 0 && strcmp(p->restart_policy, "Never") == 0)
        return "Failed";
    if (c->pending_init > 0 || c->waiting > 0)
        return "Pending";
    if (c->running > 0)
        return "Running";
    if (c->stopped > 0) {
        if (terminal)
            return c->stopped == c->succeeded ? "Succeeded" : "Failed";
        if (strcmp(p->restart_policy, "Always") == 0)
            return "Running";
        if (c->stopped == c->succeeded)
            return "Succeeded";
        if (strcmp(p->restart_policy, "Never") == 0)
            return "Failed";
        return "Running";
    }
    return "Pending";
}

static void add_condition(const struct planner *p, json_t *conds, const char *type, bool ok,
                          const char *reason, const char *message)
{
    char now[32];
    ts(p->now, now);
    const char *status = ok ? "True" : "False";
    const char *ltt = now;
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(p->prev, "conditions"), i, c) {
        if (streq_ptr(kobj_str(c, "type"), type) && streq_ptr(kobj_str(c, "status"), status) &&
            kobj_str(c, "lastTransitionTime"))
            ltt = kobj_str(c, "lastTransitionTime");
    }
    json_t *j = json_pack("{s:s,s:s,s:n,s:s}", "type", type, "status", status, "lastProbeTime",
                          "lastTransitionTime", ltt);
    if (reason)
        json_object_set_new(j, "reason", json_string(reason));
    if (message)
        json_object_set_new(j, "message", json_string(message));
    json_array_append_new(conds, j);
}

static char *name_list(json_t *names)
{
    struct sbuf b;
    sbuf_init(&b, 1 << 16);
    sbuf_adds(&b, "[");
    size_t i;
    json_t *n;
    json_array_foreach (names, i, n) {
        if (i)
            sbuf_adds(&b, " ");
        sbuf_adds(&b, json_string_value(n));
    }
    sbuf_adds(&b, "]");
    if (sbuf_check(&b) < 0) {
        sbuf_free(&b);
        return xstrdup("[...]");
    }
    return sbuf_steal(&b);
}

void kl_pod_plan_clear(struct kl_pod_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_actions; i++)
        free(p->actions[i].message);
    free(p->actions);
    for (size_t i = 0; i < p->n_events; i++) {
        free(p->events[i].type);
        free(p->events[i].reason);
        free(p->events[i].message);
        free(p->events[i].field_path);
    }
    free(p->events);
    json_decref(p->status);
    free(p->qos_class);
    *p = (struct kl_pod_plan){0};
}

int kl_pod_plan(const json_t *pod, const struct kl_pod_obs *obs, const struct kl_plan_config *cfg,
                uint64_t now_ms, struct kl_pod_plan *ret, struct err *e)
{
    const json_t *spec = json_object_get(pod, "spec");
    const json_t *inits = arr(pod, "spec.initContainers");
    const json_t *ctrs = arr(pod, "spec.containers");
    size_t n_init = inits ? json_array_size(inits) : 0;
    size_t n_ctrs = ctrs ? json_array_size(ctrs) : 0;
    if (n_ctrs == 0)
        return err_set(e, -EINVAL, "pod %s/%s: no containers", kobj_namespace(pod), kobj_name(pod));
    if (obs->n_init != n_init || obs->n_ctrs != n_ctrs)
        return err_set(e, -EINVAL, "pod %s/%s: %zu/%zu container observations for %zu/%zu",
                       kobj_namespace(pod), kobj_name(pod), obs->n_init, obs->n_ctrs, n_init,
                       n_ctrs);

    struct kl_pod_plan out = {.wake_ms = UINT64_MAX};
    struct planner p = {
        .pod = pod,
        .obs = obs,
        .prev = json_object_get(pod, "status"),
        .now = now_ms,
        .base = cfg && cfg->backoff_base_ms ? cfg->backoff_base_ms : DEFAULT_BACKOFF_BASE_MS,
        .max = cfg && cfg->backoff_max_ms ? cfg->backoff_max_ms : DEFAULT_BACKOFF_MAX_MS,
        .restart_policy = kobj_str(spec, "restartPolicy"),
        .deleting = obs->removed || kobj_deletion_timestamp(pod) != NULL,
        .out = &out,
        .pod_name = kobj_name(pod),
        .pod_ns = kobj_namespace(pod),
        .pod_uid = kobj_uid(pod),
    };
    if (!p.restart_policy)
        p.restart_policy = "Always";
    if (!p.pod_ns)
        p.pod_ns = "default";
    if (!p.pod_uid)
        p.pod_uid = "";
    if (!p.pod_name)
        p.pod_name = "";
    json_t *dg = kobj_path(pod, "metadata.deletionGracePeriodSeconds");
    int64_t grace_s = json_is_integer(dg)
                          ? json_integer_value(dg)
                          : json_int_or(spec, "terminationGracePeriodSeconds", DEFAULT_GRACE_S);
    p.grace_ms = grace_s > 0 ? (uint64_t)grace_s * 1000 : 0;

    /* A pod already terminal (as the API holds it) stays so: nothing restarts. */
    const char *prev_phase = kobj_str(p.prev, "phase");
    bool was_terminal = streq_ptr(prev_phase, "Succeeded") || streq_ptr(prev_phase, "Failed");

    struct ctr_view *iv = xcalloc(n_init ? n_init : 1, sizeof(*iv));
    struct ctr_view *cv = xcalloc(n_ctrs, sizeof(*cv));
    json_t *incomplete = json_array();
    bool inits_done = true, init_failed_never = false;
    for (size_t i = 0; i < n_init; i++) {
        const json_t *c = json_array_get(inits, i);
        const struct kl_ctr_obs *o = &obs->init[i];
        bool done = plan_container(&p, true, i, c, o, inits_done, was_terminal, &iv[i]);
        if (!done) {
            if (o->phase == KL_CTR_EXITED && o->exited.exit_code != 0 &&
                strcmp(p.restart_policy, "Never") == 0)
                init_failed_never = true;
            json_array_append_new(incomplete, json_string(kobj_str(c, "name")));
            inits_done = false;
        }
    }
    /* Pod failed on an init container (restartPolicy Never): nothing else starts. */
    for (size_t i = 0; i < n_ctrs; i++) {
        const json_t *c = json_array_get(ctrs, i);
        plan_container(&p, false, i, c, &obs->ctrs[i], inits_done && !init_failed_never,
                       was_terminal || init_failed_never, &cv[i]);
    }

    /* the status */
    json_t *st = json_object();
    json_t *ics = json_array(), *ccs = json_array();
    for (size_t i = 0; i < n_init; i++)
        json_array_append_new(ics,
                              status_json(&p, json_array_get(inits, i), &obs->init[i], &iv[i]));
    for (size_t i = 0; i < n_ctrs; i++)
        json_array_append_new(ccs, status_json(&p, json_array_get(ctrs, i), &obs->ctrs[i], &cv[i]));

    bool all_stopped = true;
    for (size_t i = 0; i < n_init; i++)
        if (obs->init[i].phase == KL_CTR_RUNNING)
            all_stopped = false;
    for (size_t i = 0; i < n_ctrs; i++)
        if (obs->ctrs[i].phase == KL_CTR_RUNNING)
            all_stopped = false;
    bool deletion_done = p.deleting && all_stopped;
    bool terminal = was_terminal || deletion_done;

    /* A terminal pod's containers show their end: the last exit, or, for one that never ran,
     * the kubelet's ContainerStatusUnknown. */
    if (deletion_done) {
        json_t *lists[2] = {ics, ccs};
        for (size_t l = 0; l < 2; l++) {
            size_t i;
            json_t *cs;
            json_array_foreach (lists[l], i, cs) {
                json_t *stt = json_object_get(cs, "state");
                if (!json_object_get(stt, "waiting"))
                    continue;
                json_t *lt = kobj_path(cs, "lastState.terminated");
                json_t *term;
                if (lt) {
                    term = json_deep_copy(lt);
                } else {
                    char now[32];
                    ts(p.now, now);
                    term = json_pack("{s:i,s:s,s:s,s:n,s:s}", "exitCode", 137, "reason",
                                     "ContainerStatusUnknown", "message",
                                     "The container could not be located when the pod was "
                                     "terminated",
                                     "startedAt", "finishedAt", now);
                }
                json_object_set_new(cs, "state", json_pack("{s:o}", "terminated", term));
                json_object_set_new(cs, "ready", json_false());
                json_object_set_new(cs, "started", json_false());
            }
        }
    }

    struct phase_counts counts = {0};
    size_t i;
    json_t *cs;
    json_array_foreach (ics, i, cs)
        count_ctr(cs, true, &counts);
    json_array_foreach (ccs, i, cs)
        count_ctr(cs, false, &counts);
    const char *phase = get_phase(&p, &counts, terminal);
    if (was_terminal)
        phase = prev_phase;
    terminal = terminal || streq_ptr(phase, "Succeeded") || streq_ptr(phase, "Failed");

    json_object_set_new(st, "phase", json_string(phase));
    json_t *conds = json_array();
    json_t *unready = json_array();
    size_t n_ready = 0;
    json_array_foreach (ccs, i, cs) {
        if (json_is_true(json_object_get(cs, "ready")))
            n_ready++;
        else
            json_array_append(unready, json_object_get(cs, "name"));
    }
    bool completed = streq_ptr(phase, "Succeeded");
    add_condition(&p, conds, "PodReadyToStartContainers", obs->sandbox_ready && !deletion_done,
                  NULL, NULL);
    {
        _cleanup_free_ char *m = name_list(incomplete);
        _cleanup_free_ char *msg = xasprintf("containers with incomplete status: %s", m);
        bool ok = inits_done || completed;
        add_condition(&p, conds, "Initialized", ok,
                      completed ? "PodCompleted"
                      : ok      ? NULL
                                : "ContainersNotInitialized",
                      ok ? NULL : msg);
    }
    {
        _cleanup_free_ char *m = name_list(unready);
        _cleanup_free_ char *msg = xasprintf("containers with unready status: %s", m);
        bool ok = n_ready == n_ctrs && !terminal;
        const char *reason = ok ? NULL : completed ? "PodCompleted" : "ContainersNotReady";
        const char *message = ok || completed ? NULL : msg;
        add_condition(&p, conds, "Ready", ok, reason, message);
        add_condition(&p, conds, "ContainersReady", ok, reason, message);
    }
    add_condition(&p, conds, "PodScheduled", true, NULL, NULL);
    json_object_set_new(st, "conditions", conds);
    json_decref(unready);
    json_decref(incomplete);

    if (obs->host_ip) {
        json_object_set_new(st, "hostIP", json_string(obs->host_ip));
        json_object_set_new(st, "hostIPs", json_pack("[{s:s}]", "ip", obs->host_ip));
    }
    bool host_network = json_is_true(json_object_get(spec, "hostNetwork"));
    const char *pod_ip = host_network ? obs->host_ip : obs->pod_ip;
    if (pod_ip && (obs->sandbox_ready || host_network)) {
        json_object_set_new(st, "podIP", json_string(pod_ip));
        json_object_set_new(st, "podIPs", json_pack("[{s:s}]", "ip", pod_ip));
    }
    const char *prev_start = kobj_str(p.prev, "startTime");
    char start[32];
    ts(obs->admitted_ms ? obs->admitted_ms : now_ms, start);
    json_object_set_new(st, "startTime", json_string(prev_start ? prev_start : start));
    if (n_init)
        json_object_set_new(st, "initContainerStatuses", ics);
    else
        json_decref(ics);
    json_object_set_new(st, "containerStatuses", ccs);
    const char *qos = kl_pod_qos_class(pod);
    json_object_set_new(st, "qosClass", json_string(qos));

    for (size_t k = 0; k < n_init; k++)
        free(iv[k].waiting_message);
    for (size_t k = 0; k < n_ctrs; k++)
        free(cv[k].waiting_message);
    free(iv);
    free(cv);

    if (obs->mount_error && !obs->sandbox_ready && !p.deleting) {
        /* the kubelet retries volume setup on its own period */
        wake_at(&p, now_ms + 2000);
    }

    bool killing = false;
    for (size_t k = 0; k < n_init; k++)
        killing = killing || obs->init[k].killing;
    for (size_t k = 0; k < n_ctrs; k++)
        killing = killing || obs->ctrs[k].killing;
    out.all_stopped = all_stopped && !killing;
    out.delete_pod = deletion_done && !killing && !obs->removed;
    out.terminal = terminal;
    out.status = st;
    out.qos_class = xstrdup(qos);
    if (p.deleting && !all_stopped) {
        /* the grace period ends: look again to see the kill through */
        uint64_t end = obs->deletion_seen_ms + p.grace_ms;
        if (end > now_ms)
            wake_at(&p, end);
    }
    *ret = out;
    return 0;
}
