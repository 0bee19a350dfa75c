/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node status exporter as the node's GPU health agent (node-status-exporter.h, "GPU
 * health"): a thread waits on NVML's XID and ECC events and queues them, waking the main loop;
 * each health observation samples every GPU, hands the samples and the queued events to the
 * tracker (src/lib/gpuhealth), and writes what changed to the Node: the health annotation
 * (metadata) and the GPUHealthy condition (status). The decisions are the tracker's and
 * nst-health.c's.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "kobj.h"
#include "kube.h"
#include "node-status-exporter-internal.h"
#include "yamlcfg.h"

#define COMP        "node-status-exporter"
#define FIELD_MGR   "gpuop-node-status"
#define EV_WAIT_MS  500
#define EV_RETRY_MS 5000

/* ---- the events thread ---------------------------------------------------------------------- */

static void queue(struct nse *x, const struct gpu_event *event)
{
    pthread_mutex_lock(&x->ev_lock);
    if (x->evq_n < NSE_EVQ_MAX) {
        struct nse_event *q = &x->evq[x->evq_n++];
        snprintf(q->uuid, sizeof(q->uuid), "%s", event->uuid);
        q->ev = (struct gh_event_obs){.kind = (event->type & GPU_EVENT_XID) ? GH_EV_XID : GH_EV_DBE,
                                      .gpu = event->gpu_index,
                                      .xid = (unsigned)event->data,
                                      .at_ms = (int64_t)now_ms_real()};
    } else {
        x->evq_dropped++; /* the GPUs' state still shows what matters; a burst of XIDs is one */
    }
    pthread_mutex_unlock(&x->ev_lock);
    uint64_t one = 1;
    if (x->wake_fd >= 0 && write(x->wake_fd, &one, sizeof(one)) < 0) {
        /* the counter is full: the main loop is awake anyway */
    }
}

static void *events_thread(void *arg)
{
    struct nse *x = arg;
    struct gpu_events *ev = NULL;
    bool logged = false;
    while (!stop_requested(x->ev_stop)) {
        struct err e = {0};
        if (!ev) {
            if (gpu_events_open(x->lib, GPU_EVENT_XID | GPU_EVENT_ECC_DBE, &ev, &e) < 0) {
                ev = NULL;
                if (!logged)
                    log_warn(COMP, "NVML events unavailable; retrying", "error=\"%s\"",
                             err_msg(&e));
                logged = true;
                if (stop_wait(x->ev_stop, EV_RETRY_MS))
                    break;
                continue;
            }
            logged = false;
        }
        struct gpu_event event;
        int r = gpu_events_wait(ev, EV_WAIT_MS, &event, &e);
        if (r == -ETIMEDOUT)
            continue;
        if (r < 0) {
            log_warn(COMP, "NVML event wait failed; subscribing again", "error=\"%s\"",
                     err_msg(&e));
            gpu_events_free(ev);
            ev = NULL;
            if (stop_wait(x->ev_stop, 1000))
                break;
            continue;
        }
        if (event.type & (GPU_EVENT_XID | GPU_EVENT_ECC_DBE))
            queue(x, &event);
    }
    gpu_events_free(ev);
    return NULL;
}

void nse_health_start(struct nse *x)
{
    if (!x->health || x->ev_running || !x->lib || x->once)
        return;
    struct err e = {0};
    if (!x->ev_stop && stop_token_new(&x->ev_stop, &e) < 0) {
        log_warn(COMP, "the NVML events thread did not start; GPU state is still sampled",
                 "error=\"%s\"", err_msg(&e));
        return;
    }
    int r = pthread_create(&x->ev_thread, NULL, events_thread, x);
    if (r != 0) {
        log_warn(COMP, "the NVML events thread did not start; GPU state is still sampled",
                 "error=\"%s\"", strerror(r));
        return;
    }
    x->ev_running = true;
}

void nse_health_stop(struct nse *x)
{
    if (!x->ev_running)
        return;
    stop_request(x->ev_stop);
    pthread_join(x->ev_thread, NULL);
    x->ev_running = false;
}

/* ---- one observation ------------------------------------------------------------------------ */

static void write_annotation(struct nse *x, const char *text)
{
    _cleanup_json_ json_t *patch =
        json_pack("{s:{s:{s:s}}}", "metadata", "annotations", GH_ANN_HEALTH, text);
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE, .field_manager = FIELD_MGR};
    struct err e = {0};
    if (kube_patch(x->kc, &KUBE_NODES, NULL, x->node, &po, patch, NULL, &e) < 0) {
        x->st.errors[NST_ERR_ANNOTATION]++;
        gh_state_written(&x->hst, false);
        log_warn(COMP, "annotation not written; retrying", "node=%s key=%s error=\"%s\"", x->node,
                 GH_ANN_HEALTH, err_msg(&e));
        return;
    }
    log_info(COMP, "annotation written", "node=%s key=%s", x->node, GH_ANN_HEALTH);
}

static void write_condition(struct nse *x, const json_t *node, const struct gh_report *hr)
{
    const json_t *conds = node ? kobj_path(node, "status.conditions") : x->conds_written;
    _cleanup_json_ json_t *patch = nst_health_condition_patch(conds, hr, now_ms_real());
    if (!patch)
        return;
    struct kube_patch_opts po = {
        .type = KUBE_PATCH_STRATEGIC, .field_manager = FIELD_MGR, .status = true};
    struct err e = {0};
    if (kube_patch(x->kc, &KUBE_NODES, NULL, x->node, &po, patch, NULL, &e) < 0) {
        x->st.errors[NST_ERR_ANNOTATION]++;
        log_warn(COMP, "condition not written; retrying", "node=%s type=%s error=\"%s\"", x->node,
                 GH_CONDITION_TYPE, err_msg(&e));
        return;
    }
    json_decref(x->conds_written);
    x->conds_written = json_incref(kobj_path(patch, "status.conditions"));
    log_info(COMP, "condition written", "node=%s type=%s status=%s reason=%s", x->node,
             GH_CONDITION_TYPE, hr->condition_status ? "True" : "False", hr->condition_reason);
}

/* Does the Node have to be read for this observation: the first one (to continue from its
 * annotation), or while latched faults wait for the remediation's acknowledgement? */
static bool node_needed(const struct nse *x)
{
    if (!x->hst.started)
        return true;
    for (size_t i = 0; i < x->hst.h.n_faults; i++)
        if (!x->hst.h.faults[i].live)
            return true;
    return false;
}

void nse_health_observe(struct nse *x, const json_t *node_in)
{
    if (!x->health)
        return;
    struct nse_event evq[NSE_EVQ_MAX];
    size_t n_ev = 0;
    pthread_mutex_lock(&x->ev_lock);
    memcpy(evq, x->evq, x->evq_n * sizeof(evq[0]));
    n_ev = x->evq_n;
    x->evq_n = 0;
    pthread_mutex_unlock(&x->ev_lock);
    struct gh_event_obs events[NSE_EVQ_MAX];
    for (size_t i = 0; i < n_ev; i++) {
        events[i] = evq[i].ev;
        events[i].uuid = evq[i].uuid;
    }

    size_t n = x->n_gpus < GH_GPUS_MAX ? x->n_gpus : GH_GPUS_MAX;
    struct gh_gpu_obs gpus[GH_GPUS_MAX];
    bool nvml_ok = x->lib != NULL;
    for (size_t i = 0; nvml_ok && i < n; i++) {
        struct gpu_sample s;
        struct err e = {0};
        if (gpu_sample_read(x->lib, (unsigned)i, &s, &e) < 0) {
            nvml_ok = false; /* the live faults stand until the GPUs read again */
            break;
        }
        const char *uuid = i < NST_GPUS_MAX ? x->st.known_uuid[i] : NULL;
        nst_health_gpu(&s, (unsigned)i, uuid, &gpus[i]);
    }

    _cleanup_json_ json_t *fetched = NULL;
    const json_t *node = node_in;
    if (!node && node_needed(x)) {
        struct err e = {0};
        if (kube_get(x->kc, &KUBE_NODES, NULL, x->node, &fetched, &e) == 0)
            node = fetched;
    }
    struct gh_observation o = {.now_ms = (int64_t)now_ms_real(),
                               .nvml_ok = nvml_ok,
                               .gpus = gpus,
                               .n_gpus = nvml_ok ? n : 0,
                               .events = events,
                               .n_events = n_ev,
                               .plugin_held_back = nst_plugin_held_back(&x->report),
                               .annotation = node ? kobj_annotation(node, GH_ANN_HEALTH) : NULL,
                               .ack = node ? kobj_annotation(node, GH_ANN_ACK) : NULL,
                               .slowdown_window_ms = x->slowdown_window_ms};
    if (!x->hst.started && !node)
        return; /* continue from the Node's annotation, once it can be read */
    struct gh_report hr _cleanup_(gh_report_clear) = {0};
    struct err e = {0};
    if (gh_observe(&x->hst, &o, &hr, &e) < 0)
        return;
    if (hr.input_error[0]) {
        x->st.errors[NST_ERR_ANNOTATION]++;
        log_warn(COMP, "node input ignored", "node=%s error=\"%s\"", x->node, hr.input_error);
    }
    for (size_t i = 0; i < hr.n_new; i++) {
        const struct gh_fault *f = &hr.new_faults[i];
        log_emit(gh_action_quarantines(f->action) ? LOG_WARN : LOG_INFO, COMP, "GPU health event",
                 "node=%s class=%s gpu=%d uuid=%s code=%u action=%s seq=%llu message=\"%s\"",
                 x->node, gh_class_name(f->cls), f->gpu, f->uuid, f->code,
                 gh_action_name(f->action), (unsigned long long)f->seq, f->message);
    }
    if (hr.annotation)
        write_annotation(x, hr.annotation);
    write_condition(x, node, &hr);
    x->report.health_on = true;
    x->report.health = hr.health;
    memcpy(x->report.health_events, x->hst.events_total, sizeof(x->report.health_events));
}
