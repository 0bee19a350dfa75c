/* SPDX-License-Identifier: Apache-2.0 */
/* The device plugin's health thread (dp-shell.h): NVML's XID and ECC events through the health
 * policy (dp-health.c), lost GPUs probed, devices recovered after the quiet period; every change
 * broadcast to the ListAndWatch streams. */
#include "dp-shell.h"

#define DP_LOST_CHECK_MS 2000
#define DP_EVENT_WAIT_MS 100

static void *health_main(void *arg)
{
    struct plugin *pl = arg;
    struct err e = {0};
    _cleanup_(gpu_events_freep) struct gpu_events *ev = NULL;
    if (gpu_events_open(pl->lib, GPU_EVENT_XID | GPU_EVENT_ECC_DBE, &ev, &e) < 0)
        log_warn(DP_COMP,
                 "Failed to start health check; continuing with event health checks "
                 "disabled",
                 "error=\"%s\"", err_msg(&e));
    uint64_t last_lost = 0, last_wait_err = 0;
    while (!stop_requested(pl->stop)) {
        struct gpu_event event;
        int r = -ETIMEDOUT;
        if (ev) {
            r = gpu_events_wait(ev, DP_EVENT_WAIT_MS, &event, &e);
        } else if (stop_wait(pl->stop, DP_EVENT_WAIT_MS)) {
            break;
        }
        uint64_t now = now_ms_mono();
        size_t changed = 0;
        if (r < 0 && r != -ETIMEDOUT) {
            if (now - last_wait_err > 10000)
                log_warn(DP_COMP, "waiting for GPU events failed", "error=\"%s\"", err_msg(&e));
            last_wait_err = now;
            if (stop_wait(pl->stop, 200))
                break;
        }
        pthread_mutex_lock(&pl->mu);
        unsigned n_gpus = pl->plan ? pl->plan->n_gpus : 0;
        bool critical = r == 0 && gh_policy_event_critical(&pl->hp, &event);
        if (critical) {
            size_t c = dp_health_apply(pl->plan, &event, now);
            log_warn(DP_COMP, "GPU error: devices marked Unhealthy",
                     "gpu=%u uuid=%s type=0x%llx xid=%llu gi=%u ci=%u devices=%zu", event.gpu_index,
                     event.uuid, (unsigned long long)event.type, (unsigned long long)event.data,
                     event.gi_id, event.ci_id, c);
            changed += c;
        } else if (r == 0) {
            log_info(DP_COMP, "GPU event ignored by the health policy",
                     "gpu=%u type=0x%llx xid=%llu", event.gpu_index, (unsigned long long)event.type,
                     (unsigned long long)event.data);
        }
        uint64_t due = pl->plan ? dp_health_recovery_due(pl->plan, now, pl->recovery_ms) : 0;
        pthread_mutex_unlock(&pl->mu);
        bool sweep = now - last_lost >= DP_LOST_CHECK_MS;
        if (sweep)
            last_lost = now;
        uint64_t probe = dp_health_probe(
            n_gpus, due, critical && event.gpu_index < 64 ? (int)event.gpu_index : -1, sweep);
        uint64_t lost = 0;
        for (unsigned g = 0; g < n_gpus && g < 64; g++) {
            if (!(probe & (1ull << g)))
                continue;
            struct gpu_sample smp;
            struct err se = {0};
            if (gpu_sample_read(pl->lib, g, &smp, &se) == 0 && smp.lost)
                lost |= 1ull << g;
        }
        pthread_mutex_lock(&pl->mu);
        for (unsigned g = 0; g < n_gpus && g < 64; g++)
            if ((lost & (1ull << g)) && pl->plan && g < pl->plan->n_gpus) {
                size_t c = dp_health_mark_lost(pl->plan, g);
                if (c)
                    log_error(DP_COMP, "GPU is lost: devices Unhealthy for good", "gpu=%u", g);
                changed += c;
            }
        size_t rec = pl->plan ? dp_health_recover(pl->plan, now, pl->recovery_ms) : 0;
        if (rec)
            log_info(DP_COMP, "devices Healthy again after the quiet period", "devices=%zu", rec);
        changed += rec;
        pthread_mutex_unlock(&pl->mu);
        if (changed)
            dp_broadcast(pl);
    }
    return NULL;
}

void dp_health_start(struct plugin *pl)
{
    if (pthread_create(&pl->health, NULL, health_main, pl) == 0)
        pl->health_running = true;
    else
        log_error(DP_COMP, "cannot start the health thread", NULL);
}

void dp_health_join(struct plugin *pl)
{
    if (!pl->health_running)
        return;
    stop_request(pl->stop); /* the process is ending, on success or error alike */
    pthread_join(pl->health, NULL);
    pl->health_running = false;
}
