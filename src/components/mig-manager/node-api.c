/* SPDX-License-Identifier: Apache-2.0 */
/* The MIG manager's side of the API server: its Node read and patched, its Events, the
 * evictions of the node's GPU pods (nodeops). What is written is the core's (mig-manager.h). */
#include <string.h>

#include "kobj.h"
#include "kube.h"
#include "mig-manager-internal.h"
#include "svc.h"

#define COMPONENT "mig-manager"

int mm_node_read(struct migmgr *m, struct err *e)
{
    return nodeops_node_read(m->kc, m->node, &m->node_obj, e);
}

int mm_node_patch(struct migmgr *m, struct mm_patch *p, struct err *e)
{
    if (mm_patch_empty(p)) {
        mm_patch_clear(p);
        return 0;
    }
    json_t *meta = json_object();
    if (p->labels)
        json_object_set(meta, "labels", p->labels);
    if (p->annotations)
        json_object_set(meta, "annotations", p->annotations);
    mm_patch_clear(p);
    return nodeops_node_patch(m->kc, m->node, json_pack("{s:o}", "metadata", meta), &m->node_obj,
                              e);
}

void mm_node_event(struct migmgr *m, enum mm_event k, const char *want, const char *from,
                   const char *detail)
{
    struct mm_event_text t;
    mm_event_text(k, want, from, detail, &t);
    struct nodeops_event ev = {.ns = m->event_ns,
                               .source = "gpuop-mig-manager",
                               .component = COMPONENT,
                               .type = t.warning ? "Warning" : "Normal",
                               .reason = t.reason,
                               .message = t.msg};
    nodeops_node_event(m->kc, m->node, m->node_obj, &ev);
}

int mm_node_conclude(struct migmgr *m, const char *state, const char *want, const char *reason,
                     struct err *e)
{
    struct mm_patch p;
    int r = mm_conclude_patch(m->node_obj, state, want, reason, &p, e);
    return r < 0 ? r : mm_node_patch(m, &p, e);
}

int mm_node_pending(struct migmgr *m, const char *want, struct err *e)
{
    struct mm_patch p;
    mm_pending_patch(m->node_obj, want, &p);
    if (!mm_patch_empty(&p))
        log_info(COMPONENT, "MIG config change", "config=%s", want);
    return mm_node_patch(m, &p, e);
}

int mm_node_await_reset(struct migmgr *m, const char *want, const char *why, bool *ret_first,
                        struct err *e)
{
    struct mm_patch p;
    int r = mm_await_reset_patch(m->node_obj, want, why, &p, ret_first, e);
    return r < 0 ? r : mm_node_patch(m, &p, e);
}

int mm_node_pause(struct migmgr *m, struct err *e)
{
    struct mm_patch p;
    int r = mm_pause_patch(m->node_obj, &p, e);
    if (r < 0)
        return r;
    if (!mm_patch_empty(&p)) {
        _cleanup_free_ char *text = json_dumps(p.labels, JSON_COMPACT | JSON_SORT_KEYS);
        log_info(COMPONENT, "operands paused", "labels=%s", text ? text : "?");
    }
    return mm_node_patch(m, &p, e);
}

static int evict_select(const json_t *pod, void *ud, struct err *e)
{
    (void)e;
    struct migmgr *m = ud;
    return nodeops_pod_classify(pod, kobj_labels(m->node_obj)) == NODEOPS_POD_GPU;
}

static void evict_blocked(void *ud, const char *why)
{
    struct migmgr *m = ud;
    struct mm_patch p;
    mm_blocked_patch(m->node_obj, why, &p);
    if (mm_patch_empty(&p)) {
        mm_patch_clear(&p);
        return;
    }
    _cleanup_free_ char *reason =
        xstrdup(json_string_value(json_object_get(p.annotations, MM_ANN_REASON)));
    struct err e = {0};
    if (mm_node_patch(m, &p, &e) < 0)
        log_warn(COMPONENT, "reason not recorded", "error=\"%s\"", err_msg(&e));
    if (!m->blocked_reported) {
        mm_node_event(m, MM_EV_EVICTION_BLOCKED, NULL, NULL, reason);
        m->blocked_reported = true;
    }
}

int mm_node_evict(struct migmgr *m, char **ret_evicted, struct err *e)
{
    m->blocked_reported = false;
    struct nodeops_evict o = {.kc = m->kc,
                              .svc = m->svc,
                              .node = m->node,
                              .what = "GPU pod eviction",
                              .component = COMPONENT,
                              .timeout_ms = m->eviction_timeout_ms,
                              .select = evict_select,
                              .blocked = evict_blocked,
                              .ud = m};
    int r = nodeops_evict_pods(&o, ret_evicted, e);
    if (r < 0)
        return r;
    struct mm_patch p;
    mm_unblocked_patch(m->node_obj, &p);
    return mm_node_patch(m, &p, e);
}
