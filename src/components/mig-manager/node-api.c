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
    json_t *n = NULL;
    int r = kube_get(m->kc, &KUBE_NODES, NULL, m->node, &n, e);
    if (r < 0)
        return err_prefix(e, "read node %s", m->node);
    json_decref(m->node_obj);
    m->node_obj = n;
    return 0;
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
    json_t *patch = json_pack("{s:o}", "metadata", meta);
    json_t *out = NULL;
    struct kube_patch_opts o = {.type = KUBE_PATCH_MERGE};
    int r = kube_patch(m->kc, &KUBE_NODES, NULL, m->node, &o, patch, &out, e);
    json_decref(patch);
    if (r < 0)
        return err_prefix(e, "patch node %s", m->node);
    json_decref(m->node_obj);
    m->node_obj = out;
    return 0;
}

void mm_node_event(struct migmgr *m, enum mm_event k, const char *want, const char *from,
                   const char *detail)
{
    struct mm_event_text ev;
    mm_event_text(k, want, from, detail, &ev);
    json_t *inv = json_pack("{s:s,s:s,s:{s:s,s:s?}}", "kind", "Node", "apiVersion", "v1",
                            "metadata", "name", m->node, "uid", kobj_uid(m->node_obj));
    const char *ns = m->event_ns ? m->event_ns : kube_client_namespace(m->kc);
    struct kube_event kev = {.ns = ns,
                             .involved = inv,
                             .type = ev.warning ? "Warning" : "Normal",
                             .reason = ev.reason,
                             .message = ev.msg,
                             .component = "gpuop-mig-manager",
                             .host = m->node};
    struct err e = {0};
    if (kube_event_create(m->kc, &kev, &e) < 0)
        log_warn(COMPONENT, "event not recorded", "reason=%s error=\"%s\"", ev.reason, err_msg(&e));
    json_decref(inv);
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
