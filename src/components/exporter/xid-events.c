/* SPDX-License-Identifier: Apache-2.0 */
/* The exporter's XID events thread: NVML's XID events recorded in the XID log the collector
 * reads (DCGM_FI_DEV_XID_ERRORS, DCGM_EXP_XID_ERRORS_COUNT). */
#include "exporter-internal.h"

#define COMP "exporter"

static void record(struct exporter *x, const struct gpu_event *event)
{
    log_info(COMP, "XID", "gpu=%u uuid=%s xid=%llu", event->gpu_index, event->uuid,
             (unsigned long long)event->data);
    pthread_mutex_lock(&x->lock);
    exp_xid_log_record(&x->xids, event->uuid, event->data, now_ms_mono());
    pthread_mutex_unlock(&x->lock);
}

void *exp_xid_events_thread(void *arg)
{
    struct exporter *x = arg;
    struct gpu_events *ev = NULL;
    bool logged = false;
    while (!stop_requested(x->stop)) {
        struct err e = {0};
        if (!ev) {
            if (gpu_events_open(x->lib, GPU_EVENT_XID, &ev, &e) < 0) {
                atomic_fetch_add(&x->event_errors, 1);
                if (!logged)
                    log_warn(COMP, "XID events unavailable; retrying", "error=\"%s\"", err_msg(&e));
                logged = true;
                ev = NULL;
                stop_wait(x->stop, 5000);
                continue;
            }
            logged = false;
        }
        struct gpu_event event;
        int r = gpu_events_wait(ev, 200, &event, &e);
        if (r == -ETIMEDOUT)
            continue;
        if (r < 0) {
            atomic_fetch_add(&x->event_errors, 1);
            log_warn(COMP, "XID event wait failed; resubscribing", "error=\"%s\"", err_msg(&e));
            gpu_events_free(ev);
            ev = NULL;
            continue;
        }
        if (event.type & GPU_EVENT_XID)
            record(x, &event);
    }
    gpu_events_free(ev);
    return NULL;
}
