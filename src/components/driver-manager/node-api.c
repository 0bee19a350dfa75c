/* SPDX-License-Identifier: Apache-2.0 */
/* The driver manager's side of the API server: its Node read and patched (labels, cordon,
 * annotations), its Events, the evictions of the node's pods (nodeops). What is written and
 * which pods go are the core's (driver-manager.h); this file only talks to the API server. */
#include <string.h>

#include "driver-manager-internal.h"
#include "kobj.h"
#include "kube.h"
#include "svc.h"

#define COMPONENT "driver-manager"

int dm_node_patch(struct drivermgr *d, json_t *patch, struct err *e)
{
    return nodeops_node_patch(d->kc, d->node, patch, &d->node_obj, e);
}

int dm_node_read(struct drivermgr *d, struct err *e)
{
    return nodeops_node_read(d->kc, d->node, &d->node_obj, e);
}

static int labels_set(struct drivermgr *d, json_t *labels, const char *what, struct err *e)
{
    if (json_object_size(labels) == 0) {
        json_decref(labels);
        return 0;
    }
    _cleanup_free_ char *text = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS);
    log_info(COMPONENT, what, "node=%s labels=%s", d->node, text ? text : "?");
    return dm_node_patch(d, json_pack("{s:{s:o}}", "metadata", "labels", labels), e);
}

int dm_node_pause(struct drivermgr *d, struct err *e)
{
    json_t *p = NULL;
    int r = nodeops_labels_patch(kobj_labels(d->node_obj), &dm_operand_pause, false, &p, e);
    return r < 0 ? r : labels_set(d, p, "operands paused", e);
}

int dm_node_restore(struct drivermgr *d, bool pre_installed, struct err *e)
{
    json_t *labels = NULL;
    bool uncordon = false;
    int r = dm_restore_patch(d->node_obj, pre_installed, &labels, &uncordon, e);
    if (r < 0 ||
        (r = labels_set(d, labels, pre_installed ? "node labelled" : "operands restored", e)) < 0)
        return r;
    if (!uncordon)
        return 0;
    log_info(COMPONENT, "uncordoning the node it cordoned", "node=%s", d->node);
    return dm_node_patch(d,
                         json_pack("{s:{s:b},s:{s:{s:n}}}", "spec", "unschedulable", 0, "metadata",
                                   "annotations", DM_ANN_CORDONED),
                         e);
}

int dm_node_cordon(struct drivermgr *d, struct err *e)
{
    if (json_is_true(kobj_path(d->node_obj, "spec.unschedulable")))
        return 0; /* ours (the annotation says so) or someone else's: either way it stays */
    int r = dm_node_patch(
        d, json_pack("{s:{s:{s:s}}}", "metadata", "annotations", DM_ANN_CORDONED, "true"), e);
    if (r < 0)
        return r;
    log_info(COMPONENT, "cordoning the node", "node=%s", d->node);
    return dm_node_patch(d, json_pack("{s:{s:b}}", "spec", "unschedulable", 1), e);
}

void dm_node_event(struct drivermgr *d, const char *type, const char *reason, const char *msg)
{
    if (!d->kc || !d->node_obj)
        return;
    struct nodeops_event ev = {.ns = d->event_ns,
                               .source = "gpuop-driver-manager",
                               .component = COMPONENT,
                               .type = type,
                               .reason = reason,
                               .message = msg};
    nodeops_node_event(d->kc, d->node, d->node_obj, &ev);
}

/* The annotation key set to text. */
static int annotate(struct drivermgr *d, const char *key, const char *text, struct err *e)
{
    return dm_node_patch(d, json_pack("{s:{s:{s:s}}}", "metadata", "annotations", key, text), e);
}

int dm_node_report(struct drivermgr *d, const struct dm_finding *f, struct err *e)
{
    struct nodestate_driver_owner o = {.owner = f->owner};
    snprintf(o.version, sizeof(o.version), "%s", f->version);
    snprintf(o.source, sizeof(o.source), "%s", f->source);
    time_rfc3339(now_ms_real(), o.time, sizeof(o.time));
    _cleanup_free_ char *text = NULL;
    int r = nodestate_driver_owner_render(&o, &text);
    if (r < 0)
        return err_set(e, r, "render %s", NODESTATE_ANN_DRIVER_OWNER);
    if ((r = annotate(d, NODESTATE_ANN_DRIVER_OWNER, text, e)) < 0)
        return r;
    const char *reason;
    char msg[NODESTATE_REASON_MAX + 128];
    dm_owner_event(f, &reason, msg, sizeof(msg));
    dm_node_event(d, "Normal", reason, msg);
    return 0;
}

int dm_node_record_drain(struct drivermgr *d, const struct dm_finding *f, struct err *e)
{
    struct nodestate_drain dr;
    dm_drain_record(f, d->driver_version, &dr);
    time_rfc3339(now_ms_real(), dr.time, sizeof(dr.time));
    _cleanup_free_ char *text = NULL;
    int r = nodestate_drain_render(&dr, &text);
    if (r < 0)
        return err_set(e, r, "render %s", NODESTATE_ANN_LAST_DRAIN);
    if ((r = annotate(d, NODESTATE_ANN_LAST_DRAIN, text, e)) < 0)
        return r;
    dm_node_event(d, "Normal", "NodeDrain", dr.reason);
    return 0;
}

/* ---- pods --------------------------------------------------------------------------------- */

struct evict_ctx {
    struct drivermgr *d;
    bool drain;
};

static int evict_select(const json_t *pod, void *ud, struct err *e)
{
    struct evict_ctx *c = ud;
    return dm_evict_select(&c->d->cfg, pod, kobj_labels(c->d->node_obj), c->drain, e);
}

static void evict_blocked(void *ud, const char *why)
{
    struct evict_ctx *c = ud;
    if (c->d->blocked_reported)
        return;
    _cleanup_free_ char *msg =
        xasprintf("%s waits: %s", c->drain ? "drain" : "GPU pod eviction", why);
    dm_node_event(c->d, "Warning", "GPUPodEvictionBlocked", msg);
    c->d->blocked_reported = true;
}

int dm_node_evict(struct svc *s, struct drivermgr *d, bool drain, struct err *e)
{
    struct evict_ctx c = {.d = d, .drain = drain};
    struct nodeops_evict o = {.kc = d->kc,
                              .svc = s,
                              .node = d->node,
                              .selector = drain ? d->cfg.drain_selector : NULL,
                              .what = drain ? "drain" : "GPU pod eviction",
                              .component = COMPONENT,
                              .timeout_ms = d->cfg.drain_timeout_ms,
                              .select = evict_select,
                              .blocked = evict_blocked,
                              .ud = &c};
    int r = nodeops_evict_pods(&o, NULL, e);
    if (r == -ETIMEDOUT)
        err_prefix(e, "DRAIN_TIMEOUT_SECONDS");
    return r;
}
