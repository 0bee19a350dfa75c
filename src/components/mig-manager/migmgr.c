/* SPDX-License-Identifier: Apache-2.0 */
/* migmgr's pure core: what to do next from what the Node and the GPUs say, what a change writes
 * on the Node and its Events. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "kobj.h"
#include "mig-manager.h"

static const char *const paused_labels[] = {
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.nvsm",
    "nvidia.com/gpu.deploy.client",
    NULL,
};

const struct nodeops_pause mm_pause = {.word = MM_PAUSED, .labels = paused_labels};

static bool empty(const char *s)
{
    return !s || !s[0];
}

void mm_input_read(const json_t *node, struct mm_input *ret)
{
    *ret = (struct mm_input){.want = kobj_label(node, MM_LABEL_CONFIG),
                             .state = kobj_label(node, MM_LABEL_STATE),
                             .progress = kobj_annotation(node, MM_ANN_PROGRESS),
                             .failed = kobj_annotation(node, MM_ANN_FAILED),
                             .paused = nodeops_labels_paused(kobj_labels(node), &mm_pause)};
}

static enum mm_action decide(const struct mm_input *in);

enum mm_action mm_decide(const struct mm_input *in)
{
    enum mm_action a = decide(in);
    /* no config wanted: nothing is changed, only a pause or a change left behind undone */
    assert(!empty(in->want) || a == MM_NOTHING || a == MM_RESTORE);
    /* a config that cannot be used is never applied */
    assert(!in->config_error || a == MM_REFUSE || a == MM_NOTHING || a == MM_RESTORE);
    return a;
}

static enum mm_action decide(const struct mm_input *in)
{
    if (empty(in->want))
        return in->paused || !empty(in->progress) ? MM_RESTORE : MM_NOTHING;
    /* A failed apply is not retried in a loop (each try would evict again). */
    if (streq_ptr(in->state, "failed") && streq_ptr(in->failed, in->want) && empty(in->progress) &&
        !in->paused)
        return MM_NOTHING;
    if (in->config_error)
        return MM_REFUSE;
    if (in->matches)
        return streq_ptr(in->state, "success") && !in->paused && empty(in->progress) ? MM_NOTHING
                                                                                     : MM_FINISH;
    if (in->reset_pending)
        return streq_ptr(in->state, "rebooting") && !in->paused && streq_ptr(in->progress, in->want)
                   ? MM_NOTHING
                   : MM_AWAIT_RESET;
    return MM_CHANGE;
}

const char *mm_action_name(enum mm_action a)
{
    static const char *const n[] = {"nothing", "restore", "refuse",
                                    "finish",  "change",  "await-reset"};
    return (unsigned)a < ARRAY_SIZE(n) ? n[a] : "?";
}

/* ---- a change's steps --------------------------------------------------------------------- */

const char *const mm_hook_names[] = {"pending", "pause",  "operands", "evict",
                                     "apply",   "finish", NULL};

bool mm_evict_first(const json_t *node)
{
    return !streq_ptr(kobj_annotation(node, MM_ANN_FORCE), "true");
}

enum mm_after_apply mm_after_apply(int r, bool reset_required, bool still_pending)
{
    if (r == 0 && reset_required)
        return still_pending ? MM_RESET_WAIT : MM_RESET_DONE;
    return r < 0 ? MM_APPLY_FAILED : MM_APPLIED;
}

/* ---- what is written on the Node ---------------------------------------------------------- */

void mm_patch_clear(struct mm_patch *p)
{
    json_decref(p->labels);
    json_decref(p->annotations);
    p->labels = p->annotations = NULL;
}

bool mm_patch_empty(const struct mm_patch *p)
{
    return json_object_size(p->labels) == 0 && json_object_size(p->annotations) == 0;
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

int mm_conclude_patch(const json_t *node, const char *state, const char *want, const char *reason,
                      struct mm_patch *ret, struct err *e)
{
    json_t *labels = NULL;
    int r = nodeops_labels_patch(kobj_labels(node), &mm_pause, true, &labels, e);
    if (r < 0)
        return r;
    if (state)
        json_object_set_new(labels, MM_LABEL_STATE, json_string(state));
    bool ok = streq_ptr(state, "success");
    assert(!ok || want); /* a success is of a config */
    json_t *ann = json_pack("{s:n}", MM_ANN_PROGRESS);
    json_object_set_new(ann, MM_ANN_REASON, str_or_null(reason));
    json_object_set_new(ann, MM_ANN_FAILED, str_or_null(ok ? NULL : want));
    if (ok)
        json_object_set_new(ann, MM_ANN_APPLIED, json_string(want));
    *ret = (struct mm_patch){labels, ann};
    return 0;
}

void mm_pending_patch(const json_t *node, const char *want, struct mm_patch *ret)
{
    *ret = (struct mm_patch){0};
    if (streq_ptr(kobj_label(node, MM_LABEL_STATE), "pending") &&
        streq_ptr(kobj_annotation(node, MM_ANN_PROGRESS), want))
        return;
    ret->labels = json_pack("{s:s}", MM_LABEL_STATE, "pending");
    ret->annotations =
        json_pack("{s:s,s:n,s:n}", MM_ANN_PROGRESS, want, MM_ANN_REASON, MM_ANN_FAILED);
}

int mm_pause_patch(const json_t *node, struct mm_patch *ret, struct err *e)
{
    *ret = (struct mm_patch){0};
    return nodeops_labels_patch(kobj_labels(node), &mm_pause, false, &ret->labels, e);
}

int mm_await_reset_patch(const json_t *node, const char *want, const char *why,
                         struct mm_patch *ret, bool *ret_first, struct err *e)
{
    json_t *labels = NULL;
    int r = nodeops_labels_patch(kobj_labels(node), &mm_pause, true, &labels, e);
    if (r < 0)
        return r;
    json_object_set_new(labels, MM_LABEL_STATE, json_string("rebooting"));
    *ret = (struct mm_patch){labels, json_pack("{s:s,s:s,s:n}", MM_ANN_PROGRESS, want,
                                               MM_ANN_REASON, why, MM_ANN_FAILED)};
    *ret_first = !streq_ptr(kobj_label(node, MM_LABEL_STATE), "rebooting");
    return 0;
}

void mm_blocked_patch(const json_t *node, const char *why, struct mm_patch *ret)
{
    *ret = (struct mm_patch){0};
    _cleanup_free_ char *reason = xasprintf("waiting for an eviction: %s", why);
    if (!streq_ptr(kobj_annotation(node, MM_ANN_REASON), reason))
        ret->annotations = json_pack("{s:s}", MM_ANN_REASON, reason);
}

void mm_unblocked_patch(const json_t *node, struct mm_patch *ret)
{
    *ret = (struct mm_patch){0};
    if (kobj_annotation(node, MM_ANN_REASON))
        ret->annotations = json_pack("{s:n}", MM_ANN_REASON);
}

/* ---- Events ------------------------------------------------------------------------------- */

void mm_event_text(enum mm_event k, const char *want, const char *from, const char *detail,
                   struct mm_event_text *ret)
{
    struct mm_event_text t = {.warning = true};
    const char *d = detail && detail[0] ? detail : "none";
    int w = 0;
    switch (k) {
    case MM_EV_REFUSED:
        t.reason = "MIGConfigFailed";
        w = snprintf(t.msg, sizeof(t.msg), "%s=%s refused, the GPUs keep their layout: %s",
                     MM_LABEL_CONFIG, want, d);
        break;
    case MM_EV_FAILED:
    case MM_EV_ROLLBACK_FAILED:
        t.reason = "MIGConfigFailed";
        w = snprintf(t.msg, sizeof(t.msg), "%s=%s failed, %s: %s", MM_LABEL_CONFIG, want,
                     k == MM_EV_ROLLBACK_FAILED ? "the rollback failed too"
                                                : "the previous layout is back",
                     d);
        break;
    case MM_EV_APPLIED:
        t.warning = false;
        t.reason = "MIGConfigApplied";
        w = snprintf(t.msg, sizeof(t.msg), "MIG layout changed from %s to %s; pods evicted: %s",
                     from ? from : "(none)", want, d);
        break;
    case MM_EV_REBOOT:
        t.reason = "MIGRebootRequired";
        w = snprintf(t.msg, sizeof(t.msg),
                     "%s=%s needs a reboot: %s; the GPUs keep their current layout until then",
                     MM_LABEL_CONFIG, want, d);
        break;
    case MM_EV_EVICTION_BLOCKED:
        t.reason = "MIGEvictionBlocked";
        w = snprintf(t.msg, sizeof(t.msg), "%s", d);
        break;
    }
    assert(t.reason);
    if (w >= (int)sizeof(t.msg))
        memcpy(t.msg + sizeof(t.msg) - 4, "...", 4);
    *ret = t;
}
